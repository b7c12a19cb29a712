//! `--group NAME` and `--cleanup on-exit|manual` as the user gives them (spec-note 0525): the
//! request a handoff's options carry, below [`crate::handoff::plan`] and
//! [`crate::handoff::group`], which both read it.

use serde::{Deserialize, Serialize};

/// What happens to a group's container when its members end (`--cleanup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cleanup {
    /// An agent's exit removes nothing; `devcell delete` removes the container (Grove: an
    /// agent's exit never deletes the workspace).
    #[default]
    Manual,
    /// The container (and its anonymous volumes) is removed when the group's last live member
    /// ends; never the workspace, its worktrees or git directories.
    OnExit,
}

impl Cleanup {
    /// `manual` or `on-exit`, as the flag spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Cleanup::Manual => "manual",
            Cleanup::OnExit => "on-exit",
        }
    }
}

impl std::fmt::Display for Cleanup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Cleanup {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "manual" => Ok(Cleanup::Manual),
            "on-exit" => Ok(Cleanup::OnExit),
            other => Err(format!(
                "unknown cleanup policy `{other}` (expected `on-exit` or `manual`)"
            )),
        }
    }
}

/// A group's name: 1–64 of `A-Z a-z 0-9 . _ -`, not starting with `.` or `-` (it names the
/// record's file).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GroupName(String);

impl GroupName {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for GroupName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && !s.starts_with(['.', '-'])
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(GroupName(s))
        } else {
            Err(format!(
                "invalid group name `{s}`: 1 to 64 of letters, digits, `.`, `_` and `-`, not starting with `.` or `-`"
            ))
        }
    }
}

impl From<GroupName> for String {
    fn from(n: GroupName) -> String {
        n.0
    }
}

impl std::fmt::Display for GroupName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `--group NAME` with its `--cleanup`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRequest {
    /// The group.
    pub name: GroupName,
    /// The policy asked for (the group's, once it exists: another one is refused).
    pub cleanup: Cleanup,
}

/// `--group NAME` and `--cleanup POLICY` as given (`None` without `--group`).
///
/// # Errors
/// [`crate::ops::OpsError::Unsupported`] for a bad name or policy.
pub fn request(
    group: Option<&str>,
    cleanup: Option<&str>,
) -> Result<Option<GroupRequest>, crate::ops::OpsError> {
    let bad = |message: String| crate::ops::OpsError::Unsupported {
        message,
        hint: None,
    };
    let Some(name) = group else {
        return Ok(None);
    };
    Ok(Some(GroupRequest {
        name: GroupName::try_from(name.to_string()).map_err(bad)?,
        cleanup: cleanup
            .map(str::parse)
            .transpose()
            .map_err(bad)?
            .unwrap_or_default(),
    }))
}
