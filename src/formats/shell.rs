//! POSIX `sh` words: the one quoter for values devcell writes into shell scripts, Dockerfile
//! `RUN` lines and `devcontainer-features.env`.
//!
//! Always the single-quoted form (`'…'`, each `'` written `'\''`), even for words that need no
//! quotes: the generated text is part of image cache keys and of what spec-note 0042 pins, so it
//! must not depend on the value's characters the way `shlex::try_quote`'s choice of form does.
//! Reading shell words back is [`shlex`]'s job.

/// `value` as one POSIX `sh` word in single quotes (`'` written as `'\''`): it reaches the shell
/// byte for byte (`"`, `$`, backticks, `\` and newlines included). A NUL byte cannot be passed
/// to a process; callers that may see one check with [`has_nul`] first.
pub fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// Whether `value` holds a NUL byte, which no shell word or environment variable can carry.
pub fn has_nul(value: &str) -> bool {
    value.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_words_read_back_as_the_value() {
        for value in [
            "",
            "plain",
            "it's",
            "a b",
            "$(x) `y` \\z \"q\"",
            "line\nbreak",
            "''",
        ] {
            let quoted = quote(value);
            assert!(
                quoted.starts_with('\'') && quoted.ends_with('\''),
                "{quoted}"
            );
            assert_eq!(
                shlex::split(&quoted),
                Some(vec![value.to_string()]),
                "{quoted}"
            );
        }
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert!(has_nul("a\0b") && !has_nul("ab"));
    }
}
