//! `handoff --container ID --expect-mount HOST:CONTAINER[:ro|rw]` (issue 29, item 3): what a
//! container devcell did not create must mount, checked against the mounts the engine reports
//! (agent-runner's `expectedMounts`, which are validation only: nothing is added to a running
//! container). Checked before anything runs when a container someone else owns is handed off
//! (`handoff::agent::external`, spec-note 0524).

use std::fmt;

use crate::engine::ContainerInfo;
use crate::ops::OpsError;

/// One `--expect-mount`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedMount {
    /// The absolute host path.
    pub host: String,
    /// The absolute path in the container.
    pub container: String,
    /// `Some(true)`: read-write; `Some(false)`: read-only; `None`: either.
    pub writable: Option<bool>,
}

impl fmt::Display for ExpectedMount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.container)?;
        match self.writable {
            Some(true) => f.write_str(":rw"),
            Some(false) => f.write_str(":ro"),
            None => Ok(()),
        }
    }
}

impl ExpectedMount {
    /// Parses `HOST:CONTAINER[:ro|rw]`; both paths absolute (a trailing `/` is dropped).
    ///
    /// Errors: [`OpsError::Unsupported`] naming the value and the form expected.
    pub fn parse(value: &str) -> Result<Self, OpsError> {
        let bad = |why: &str| {
            OpsError::Unsupported {
            message: format!("invalid `--expect-mount {value}`: {why}"),
            hint: Some("write `HOST:CONTAINER`, `HOST:CONTAINER:ro` or `HOST:CONTAINER:rw`, both paths absolute".into()),
        }
        };
        let parts: Vec<&str> = value.split(':').collect();
        let (host, container, writable) = match parts.as_slice() {
            [h, c] => (*h, *c, None),
            [h, c, "rw"] => (*h, *c, Some(true)),
            [h, c, "ro"] => (*h, *c, Some(false)),
            [_, _, mode] => return Err(bad(&format!("the mode is `{mode}`, not `ro` or `rw`"))),
            _ => return Err(bad("expected two paths and an optional mode")),
        };
        let clean = |p: &str| -> Option<String> {
            let trimmed = p.trim_end_matches('/');
            let p = if trimmed.is_empty() { "/" } else { trimmed };
            (p.starts_with('/') && !p.split('/').any(|s| s == ".." || s == "."))
                .then(|| p.to_string())
        };
        Ok(ExpectedMount {
            host: clean(host).ok_or_else(|| bad("the host path is not absolute"))?,
            container: clean(container).ok_or_else(|| bad("the container path is not absolute"))?,
            writable,
        })
    }
}

/// Each `--expect-mount` value, parsed ([`ExpectedMount::parse`]).
///
/// Errors: the first value that does not parse.
pub fn parse_all(values: &[String]) -> Result<Vec<ExpectedMount>, OpsError> {
    values.iter().map(|v| ExpectedMount::parse(v)).collect()
}

/// Checks each expectation against `info`'s mounts: a mount at the container path, of that
/// host path, with the mode asked for.
///
/// Errors: [`OpsError::NamedContainer`] naming the first expectation not met and what the
/// container has there instead.
pub fn check(info: &ContainerInfo, expected: &[ExpectedMount]) -> Result<(), OpsError> {
    for e in expected {
        let at = info
            .mounts
            .iter()
            .find(|m| m.destination.trim_end_matches('/') == e.container.trim_end_matches('/'));
        let reason = match at {
            None => format!(
                "expected mount `{e}`: the container mounts nothing at `{}`",
                e.container
            ),
            Some(m) if m.source.trim_end_matches('/') != e.host => format!(
                "expected mount `{e}`: at `{}` the container mounts `{}` ({})",
                e.container, m.source, m.kind
            ),
            Some(m) if e.writable.is_some_and(|w| w != m.rw) => format!(
                "expected mount `{e}`: it is mounted {}",
                if m.rw { "read-write" } else { "read-only" }
            ),
            Some(_) => continue,
        };
        return Err(OpsError::NamedContainer {
            container: info.name.clone(),
            found: true,
            reason,
            hint: "name the container that has these mounts, or correct `--expect-mount`".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::MountInfo;

    fn bind(source: &str, destination: &str, rw: bool) -> MountInfo {
        MountInfo::bind(source, destination, rw)
    }

    #[test]
    fn expectations_parse_with_an_optional_mode_and_absolute_paths_only() {
        let e = ExpectedMount::parse("/srv/ws/:/workspace:ro").unwrap();
        assert_eq!(
            e,
            ExpectedMount {
                host: "/srv/ws".into(),
                container: "/workspace".into(),
                writable: Some(false)
            }
        );
        assert_eq!(e.to_string(), "/srv/ws:/workspace:ro");
        assert_eq!(ExpectedMount::parse("/a:/b").unwrap().writable, None);
        assert_eq!(
            ExpectedMount::parse("/a:/b:rw").unwrap().writable,
            Some(true)
        );
        for bad in [
            "a:/b",
            "/a:b",
            "/a:/b:x",
            "/a",
            "/a:/b:ro:x",
            "/a/../etc:/b",
        ] {
            assert!(ExpectedMount::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_missing_moved_or_wrong_mode_mount_is_refused_naming_it() {
        let info = ContainerInfo {
            name: "devbox".into(),
            mounts: vec![
                bind("/srv/ws", "/workspace", true),
                bind("/srv/cache", "/cache", false),
            ],
            ..ContainerInfo::default()
        };
        let ok = [
            ExpectedMount::parse("/srv/ws:/workspace:rw").unwrap(),
            ExpectedMount::parse("/srv/cache:/cache").unwrap(),
        ];
        check(&info, &ok).unwrap();
        for (asked, says) in [
            ("/srv/ws:/work", "mounts nothing at `/work`"),
            (
                "/srv/other:/workspace",
                "at `/workspace` the container mounts `/srv/ws`",
            ),
            ("/srv/cache:/cache:rw", "it is mounted read-only"),
        ] {
            let e = check(&info, &[ExpectedMount::parse(asked).unwrap()]).unwrap_err();
            let text = e.to_string();
            assert!(
                text.contains(asked) && text.contains(says) && text.contains("devbox"),
                "{text}"
            );
        }
    }
}
