//! `sha256:<hex>` digests (OCI image spec, descriptor digests): compute, parse, verify.

use sha2::{Digest as _, Sha256};

use super::error::{OciError, Result};

/// `sha256:<64 lowercase hex>` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// Returns the hex part of a `sha256:<64 lowercase hex>` digest.
///
/// # Errors
/// [`OciError::InvalidDigest`] for any other algorithm or shape (this also keeps digests safe
/// to use as file names).
pub fn parse_sha256(digest: &str) -> Result<&str> {
    match digest.strip_prefix("sha256:") {
        Some(hex)
            if hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
        {
            Ok(hex)
        }
        _ => Err(OciError::InvalidDigest {
            digest: digest.to_owned(),
        }),
    }
}

/// Checks that `actual` equals `expected`.
///
/// # Errors
/// [`OciError::DigestMismatch`] naming `subject`.
pub fn verify(subject: &str, expected: &str, actual: &str) -> Result<()> {
    if expected == actual {
        Ok(())
    } else {
        Err(OciError::DigestMismatch {
            subject: subject.to_owned(),
            expected: expected.to_owned(),
            actual: actual.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_empty_json_digests_match_appendix_a() {
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_digest(b"{}"),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    #[test]
    fn parse_sha256_rejects_other_shapes() {
        let ok = format!("sha256:{}", "0a".repeat(32));
        assert!(parse_sha256(&ok).is_ok());
        for bad in [
            "sha256:abc",
            "sha512:00",
            "sha256:../../etc/passwd",
            &format!("sha256:{}", "A".repeat(64)),
        ] {
            assert!(parse_sha256(bad).is_err(), "{bad}");
        }
    }
}
