//! Image references (`[registry/]repository[:tag][@digest]`), parsed once through
//! [`oci_client::Reference`] (the distribution reference grammar and Docker's normalisation:
//! no registry means `docker.io`, a one-component Docker Hub repository is `library/<name>`),
//! and kept as written so what devcell hands the engine or prints is the user's spelling.

use oci_client::{ParseError, Reference};

/// The tag Docker assumes when a reference names neither a tag nor a digest.
pub const DEFAULT_TAG: &str = "latest";

/// Docker Hub's registry name as [`ImageReference::registry`] reports it.
pub const DOCKER_HUB: &str = "docker.io";

/// An image reference that failed to parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid image reference `{reference}`: {source}")]
pub struct InvalidImageReference {
    /// The reference as given.
    pub reference: String,
    /// What the grammar refused (an uppercase repository, a short digest, …).
    #[source]
    pub source: ParseError,
}

/// A parsed image reference and its spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageReference {
    written: String,
    parsed: Reference,
}

impl ImageReference {
    /// Parses `text` (`busybox`, `127.0.0.1:5000/a/b:1`, `x/y@sha256:<64 hex>`).
    ///
    /// Errors: [`InvalidImageReference`] when `text` is not a reference (empty, uppercase in the
    /// repository, a digest of the wrong length or algorithm, …).
    pub fn parse(text: &str) -> Result<ImageReference, InvalidImageReference> {
        let parsed = Reference::try_from(text).map_err(|source| InvalidImageReference {
            reference: text.to_string(),
            source,
        })?;
        Ok(ImageReference {
            written: text.to_string(),
            parsed,
        })
    }

    /// The reference as written.
    pub fn as_str(&self) -> &str {
        &self.written
    }

    /// The registry host (`docker.io` when none is named; `index.docker.io` reads as it).
    pub fn registry(&self) -> &str {
        self.parsed.registry()
    }

    /// The repository in the registry (`library/busybox`, `a/b`).
    pub fn repository(&self) -> &str {
        self.parsed.repository()
    }

    /// The tag as written, or [`DEFAULT_TAG`] when neither a tag nor a digest is written.
    pub fn tag(&self) -> Option<&str> {
        self.parsed.tag()
    }

    /// The digest (`sha256:<hex>`), if written.
    pub fn digest(&self) -> Option<&str> {
        self.parsed.digest()
    }

    /// The name as written, without tag and digest (`busybox`, `127.0.0.1:5000/a/b`): what the
    /// engine's pull, tag and push calls take besides the tag.
    pub fn name(&self) -> &str {
        let mut name = self.written.as_str();
        if let Some(digest) = self.digest() {
            name = name.strip_suffix(digest).unwrap_or(name);
            name = name.strip_suffix('@').unwrap_or(name);
        }
        if let Some(tag) = self.tag()
            && let Some(rest) = name.strip_suffix(tag)
            && let Some(rest) = rest.strip_suffix(':')
        {
            name = rest;
        }
        name
    }

    /// What the engine pulls or pushes besides [`Self::name`]: the digest when one is written
    /// (a tag next to it is ignored, as Docker does), else the tag.
    pub fn tag_or_digest(&self) -> &str {
        self.digest().or(self.tag()).unwrap_or(DEFAULT_TAG)
    }

    /// Docker's familiar spelling: a Docker Hub name written fully qualified
    /// (`docker.io/library/alpine:3`, as Podman reports it) loses `docker.io/` and, for an
    /// official image, `library/` (`alpine:3`); other spellings are kept as written.
    pub fn familiar(&self) -> String {
        let name = self.name();
        let suffix = &self.written[name.len()..];
        if self.registry() != DOCKER_HUB || !name.starts_with("docker.io/") {
            return self.written.clone();
        }
        let repository = self.repository();
        let short = match repository.strip_prefix("library/") {
            Some(official) if !official.contains('/') => official,
            _ => repository,
        };
        format!("{short}{suffix}")
    }

    /// The parsed [`oci_client::Reference`] (for the registry client).
    pub fn reference(&self) -> &Reference {
        &self.parsed
    }

    /// The parsed [`oci_client::Reference`], owned.
    pub fn into_reference(self) -> Reference {
        self.parsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// (written, registry, repository, tag, digest, name, tag_or_digest)
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        &'a str,
        &'a str,
    );

    #[test]
    fn references_parse_as_docker_reads_them() {
        let digest = format!("sha256:{HEX}");
        let with_digest = format!("127.0.0.1:5000/a/b@{digest}");
        let both = format!("x/y:1@{digest}");
        let cases: [Case<'_>; 10] = [
            (
                "busybox",
                "docker.io",
                "library/busybox",
                Some("latest"),
                None,
                "busybox",
                "latest",
            ),
            (
                "busybox:1.36",
                "docker.io",
                "library/busybox",
                Some("1.36"),
                None,
                "busybox",
                "1.36",
            ),
            (
                "devcell/features:abc",
                "docker.io",
                "devcell/features",
                Some("abc"),
                None,
                "devcell/features",
                "abc",
            ),
            (
                "docker.io/library/alpine:3",
                "docker.io",
                "library/alpine",
                Some("3"),
                None,
                "docker.io/library/alpine",
                "3",
            ),
            (
                "index.docker.io/x/y",
                "docker.io",
                "x/y",
                Some("latest"),
                None,
                "index.docker.io/x/y",
                "latest",
            ),
            (
                "localhost:5000/x",
                "localhost:5000",
                "x",
                Some("latest"),
                None,
                "localhost:5000/x",
                "latest",
            ),
            (
                "localhost/x:2",
                "localhost",
                "x",
                Some("2"),
                None,
                "localhost/x",
                "2",
            ),
            (
                "127.0.0.1:5000/a/b:1",
                "127.0.0.1:5000",
                "a/b",
                Some("1"),
                None,
                "127.0.0.1:5000/a/b",
                "1",
            ),
            (
                &with_digest,
                "127.0.0.1:5000",
                "a/b",
                None,
                Some(&digest),
                "127.0.0.1:5000/a/b",
                &digest,
            ),
            (
                &both,
                "docker.io",
                "x/y",
                Some("1"),
                Some(&digest),
                "x/y",
                &digest,
            ),
        ];
        for (written, registry, repository, tag, digest, name, pulled) in cases {
            let r = ImageReference::parse(written).unwrap_or_else(|e| panic!("{written}: {e}"));
            assert_eq!(r.as_str(), written);
            assert_eq!(r.registry(), registry, "{written}");
            assert_eq!(r.repository(), repository, "{written}");
            assert_eq!(r.tag(), tag, "{written}");
            assert_eq!(r.digest(), digest, "{written}");
            assert_eq!(r.name(), name, "{written}");
            assert_eq!(r.tag_or_digest(), pulled, "{written}");
        }
    }

    #[test]
    fn invalid_references_are_refused() {
        for bad in [
            "",
            "Busybox",
            "Busybox:1",
            "127.0.0.1:5000/A/b:1",
            "x/y@sha256:abc",
            "x/y@md5:00",
            "x y",
            "x/y:bad tag",
            ":1",
        ] {
            let err = ImageReference::parse(bad).expect_err(bad);
            assert_eq!(err.reference, bad);
            assert!(err.to_string().contains("invalid image reference"), "{err}");
        }
    }

    #[test]
    fn familiar_spelling_follows_docker() {
        let digest = format!("sha256:{HEX}");
        let cases = [
            ("docker.io/library/alpine:3", "alpine:3".to_string()),
            ("docker.io/devcell/features:x", "devcell/features:x".into()),
            ("docker.io/library/a/b:1", "library/a/b:1".into()),
            ("docker.io/library/alpine", "alpine".into()),
            (
                &format!("docker.io/library/alpine:3@{digest}"),
                format!("alpine:3@{digest}"),
            ),
            ("alpine:3", "alpine:3".into()),
            ("localhost/x:1", "localhost/x:1".into()),
            ("ghcr.io/o/r:1", "ghcr.io/o/r:1".into()),
            ("127.0.0.1:5000/a/b:1", "127.0.0.1:5000/a/b:1".into()),
        ];
        for (written, want) in cases {
            assert_eq!(
                ImageReference::parse(written).unwrap().familiar(),
                want,
                "{written}"
            );
        }
    }
}
