//! What `exec` and `run-user-commands` may use of a configuration they re-read (spec-note
//! 0443).
//!
//! Both commands attach to a container `up` created and judged, but they read
//! `devcontainer.json` again, and the container can rewrite it (the workspace is mounted
//! read-write). Under `hardened` `up` records on the container what it judged
//! ([`JudgedAtCreation`]: the host variables it let cross, the remote user's uid), and the
//! re-read configuration may use no more: another host variable, or a remote user that is
//! uid 0 where `up` judged a non-root one, is the request `up` would have reported
//! ([`Permission::HostEnv`], [`Permission::Root`]), granted only with `--allow` on this
//! command. A container without the record (made by the reference CLI, or by devcell under
//! `reference`) keeps the reference CLI's behaviour.
//!
//! Pure: the caller passes the labels, the environment and the resolved uid.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::names::HOST_ENV_LABEL;

use super::error::{Result, SecurityError};
use super::host_env::{HostEnvUse, NON_SECRET_NAMES};
use super::policy::{Grants, Permission, PermissionRequest, RequestStatus, Source};

/// What `up` judged when it created a container under `hardened`, read back from its labels.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JudgedAtCreation {
    /// The host variables `up` let cross (granted), from [`HOST_ENV_LABEL`].
    pub host_env: BTreeSet<String>,
    /// The remote user's uid `up` judged, from [`crate::names::REMOTE_UID_LABEL`] (`None` when it was not
    /// recorded).
    pub remote_uid: Option<u32>,
}

impl JudgedAtCreation {
    /// The record on a container's labels; `None` when it carries no [`HOST_ENV_LABEL`] (not
    /// created by devcell under `hardened`: the reference CLI's behaviour applies).
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Option<Self> {
        let names = labels.get(HOST_ENV_LABEL)?;
        Some(JudgedAtCreation {
            host_env: names
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect(),
            remote_uid: crate::names::remote_uid(labels),
        })
    }
}

/// The value of [`HOST_ENV_LABEL`] for the granted [`Permission::HostEnv`] requests among
/// `requests`: their names, sorted, comma-separated (empty when none).
pub fn host_env_label(requests: &[PermissionRequest]) -> String {
    let names: BTreeSet<&str> = requests
        .iter()
        .filter(|r| r.status == RequestStatus::Granted)
        .filter_map(|r| match &r.permission {
            Permission::HostEnv(n) => Some(n.as_str()),
            _ => None,
        })
        .collect();
    names.into_iter().collect::<Vec<_>>().join(",")
}

/// Judges what a re-read configuration uses against `judged` and this command's `grants`:
/// one [`Permission::HostEnv`] per host variable in `uses` (granted with `--allow env:NAME`,
/// allowed when `up` recorded it or for [`NON_SECRET_NAMES`], else refused), and
/// [`Permission::Root`] when `remote_uid` is 0 and `up` did not record uid 0 (granted with
/// `--allow root`, else refused).
pub fn judge(
    judged: &JudgedAtCreation,
    grants: &Grants,
    uses: &[HostEnvUse],
    remote_uid: Option<u32>,
) -> Vec<PermissionRequest> {
    let mut out: Vec<PermissionRequest> = uses
        .iter()
        .map(|u| {
            let permission = Permission::HostEnv(u.name.clone());
            let status = if grants.allows(&permission) {
                RequestStatus::Granted
            } else if judged.host_env.contains(&u.name)
                || NON_SECRET_NAMES.contains(&u.name.as_str())
            {
                RequestStatus::AllowedByProfile
            } else {
                RequestStatus::Refused
            };
            PermissionRequest {
                permission,
                source: Source::DevcontainerJson,
                status,
            }
        })
        .collect();
    if remote_uid == Some(0) && judged.remote_uid != Some(0) {
        out.push(PermissionRequest {
            permission: Permission::Root,
            source: Source::DevcontainerJson,
            status: if grants.allows(&Permission::Root) {
                RequestStatus::Granted
            } else {
                RequestStatus::Refused
            },
        });
    }
    out
}

/// The host environment the re-read configuration and the container's label may be
/// substituted with: the names `up` recorded, the ones granted now and
/// [`NON_SECRET_NAMES`]; any other variable resolves as unset.
pub fn visible_env(
    judged: &JudgedAtCreation,
    grants: &Grants,
    env: &HashMap<String, String>,
) -> HashMap<String, String> {
    env.iter()
        .filter(|(name, _)| {
            judged.host_env.contains(*name)
                || grants.env.contains(*name)
                || NON_SECRET_NAMES.contains(&name.as_str())
        })
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect()
}

/// [`SecurityError::Refused`] (profile `hardened`, every request listed) when any of
/// `requests` is refused; `Ok` otherwise. Nothing may run in the container then.
///
/// # Errors
/// As described.
pub fn check(requests: &[PermissionRequest]) -> Result<()> {
    if requests.iter().any(|r| r.status == RequestStatus::Refused) {
        return Err(SecurityError::Refused {
            profile: "hardened".to_string(),
            requests: requests.to_vec(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::REMOTE_UID_LABEL;

    fn uses(names: &[&str]) -> Vec<HostEnvUse> {
        names
            .iter()
            .map(|n| HostEnvUse {
                name: n.to_string(),
                properties: vec!["remoteEnv.X".into()],
                persists_in_image: false,
            })
            .collect()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_record_is_read_back_and_its_absence_means_reference_behaviour() {
        assert_eq!(JudgedAtCreation::from_labels(&labels(&[])), None);
        let j = JudgedAtCreation::from_labels(&labels(&[
            (HOST_ENV_LABEL, "A,B"),
            (REMOTE_UID_LABEL, "1000"),
        ]))
        .unwrap();
        assert_eq!(j.host_env, BTreeSet::from(["A".into(), "B".into()]));
        assert_eq!(j.remote_uid, Some(1000));
        let empty = JudgedAtCreation::from_labels(&labels(&[(HOST_ENV_LABEL, "")])).unwrap();
        assert!(empty.host_env.is_empty() && empty.remote_uid.is_none());
    }

    #[test]
    fn the_label_lists_granted_host_variables_only() {
        let req = |n: &str, status| PermissionRequest {
            permission: Permission::HostEnv(n.into()),
            source: Source::DevcontainerJson,
            status,
        };
        let r = [
            req("B", RequestStatus::Granted),
            req("HOME", RequestStatus::AllowedByProfile),
            req("A", RequestStatus::Granted),
            PermissionRequest {
                permission: Permission::Root,
                source: Source::DevcontainerJson,
                status: RequestStatus::Granted,
            },
        ];
        assert_eq!(host_env_label(&r), "A,B");
    }

    #[test]
    fn more_than_up_judged_is_a_request_granted_only_now() {
        let judged = JudgedAtCreation {
            host_env: BTreeSet::from(["KEPT".to_string()]),
            remote_uid: Some(65534),
        };
        let none = Grants::default();
        let r = judge(&judged, &none, &uses(&["KEPT", "HOME", "STOLEN"]), Some(0));
        let status: Vec<_> = r.iter().map(|r| (r.permission.clone(), r.status)).collect();
        assert_eq!(
            status,
            [
                (
                    Permission::HostEnv("KEPT".into()),
                    RequestStatus::AllowedByProfile
                ),
                (
                    Permission::HostEnv("HOME".into()),
                    RequestStatus::AllowedByProfile
                ),
                (Permission::HostEnv("STOLEN".into()), RequestStatus::Refused),
                (Permission::Root, RequestStatus::Refused),
            ]
        );
        let err = check(&r).unwrap_err();
        assert!(err.to_string().contains("STOLEN"), "{err}");

        let granted = Grants::parse(&["env:STOLEN", "root"]).unwrap();
        let r = judge(&judged, &granted, &uses(&["STOLEN"]), Some(0));
        assert!(
            r.iter().all(|r| r.status == RequestStatus::Granted),
            "{r:?}"
        );
        assert!(check(&r).is_ok());

        // root that `up` judged (and granted) stays allowed; a non-root uid asks nothing
        let root = JudgedAtCreation {
            remote_uid: Some(0),
            ..JudgedAtCreation::default()
        };
        assert!(judge(&root, &none, &[], Some(0)).is_empty());
        assert!(judge(&judged, &none, &[], Some(1000)).is_empty());
        // an unknown recorded uid does not make root acceptable
        let unknown = JudgedAtCreation::default();
        assert_eq!(judge(&unknown, &none, &[], Some(0)).len(), 1);
    }

    #[test]
    fn only_recorded_granted_and_non_secret_variables_are_visible() {
        let env: HashMap<String, String> = [("HOME", "/h"), ("KEPT", "k"), ("S", "s"), ("G", "g")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let judged = JudgedAtCreation {
            host_env: BTreeSet::from(["KEPT".to_string()]),
            remote_uid: None,
        };
        let seen = visible_env(&judged, &Grants::parse(&["env:G"]).unwrap(), &env);
        let mut names: Vec<_> = seen.keys().cloned().collect();
        names.sort();
        assert_eq!(names, ["G", "HOME", "KEPT"]);
    }
}
