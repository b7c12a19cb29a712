//! Named volumes a configuration mounts (spec-note 0444).
//!
//! A `type=volume` mount names a volume on the engine; when that volume already exists, the
//! container gets whatever it holds: another workspace's data, or, for a `local` volume made
//! with `o=bind,device=<host folder>`, a host folder read-write. Under `hardened` devcell
//! creates the missing named volumes itself, labelled with the workspace
//! ([`VOLUME_WORKSPACE_LABEL`]), and judges an existing one by what it is
//! ([`classify`]): one devcell made for this workspace is used as it is; a bind-backed one is
//! replaced by a bind of its `device`, which the policy then judges like any bind (resolved by
//! [`super::host_path`]); any other is [`Permission::Volume`], granted with
//! `--allow volume:<name>`.
//!
//! Pure: the caller inspects the volumes through the engine.

use std::collections::BTreeMap;
use std::path::Path;

use crate::engine::VolumeInfo;
use crate::names::VOLUME_WORKSPACE_LABEL;

use super::policy::{Grants, Permission, PermissionRequest};
use super::profile::SecurityProfile;

/// What an existing (or missing) named volume is to a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeUse {
    /// No such volume: devcell creates it for this workspace ([`labels_for`]).
    Missing,
    /// devcell created it for this workspace: used as it is.
    Owned,
    /// A `local` volume with `o=bind`: a bind of this host path (its `device`, as written).
    BindBacked(String),
    /// Anything else (another workspace's, made by hand, another driver): a request.
    Foreign,
}

/// Classifies `info` (`None`: the engine has no such volume) for the host workspace folder
/// `workspace` (as the container's `devcontainer.local_folder` label names it).
pub fn classify(info: Option<&VolumeInfo>, workspace: &Path) -> VolumeUse {
    let Some(info) = info else {
        return VolumeUse::Missing;
    };
    if is_bind(info) {
        return match info.options.get("device") {
            Some(device) => VolumeUse::BindBacked(device.clone()),
            None => VolumeUse::Foreign,
        };
    }
    let ours = info.driver == "local"
        && info.options.is_empty()
        && info.labels.get(VOLUME_WORKSPACE_LABEL).map(String::as_str)
            == Some(&*workspace.to_string_lossy());
    if ours {
        VolumeUse::Owned
    } else {
        VolumeUse::Foreign
    }
}

/// Whether a volume's options make it a bind of a host path (`o` holds `bind` or `rbind`
/// among its comma-separated flags, as `mount(8)` reads them).
fn is_bind(info: &VolumeInfo) -> bool {
    info.options
        .get("o")
        .is_some_and(|o| o.split(',').any(|f| matches!(f.trim(), "bind" | "rbind")))
}

/// The labels devcell puts on a named volume it creates for `workspace`.
pub fn labels_for(workspace: &Path) -> BTreeMap<String, String> {
    BTreeMap::from([(
        VOLUME_WORKSPACE_LABEL.to_string(),
        workspace.to_string_lossy().into_owned(),
    )])
}

/// One [`Permission::Volume`] request per foreign volume name, judged: `reference` →
/// `allowedByProfile`; `hardened` → `granted` with `--allow volume:<name>`, else `refused`.
pub fn judge(
    profile: &SecurityProfile,
    grants: &Grants,
    names: &[String],
) -> Vec<PermissionRequest> {
    names
        .iter()
        .map(|name| {
            grants.judge_devcontainer_json(profile, Permission::Volume(name.clone()), false)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::policy::RequestStatus;

    fn volume(driver: &str, options: &[(&str, &str)], labels: &[(&str, &str)]) -> VolumeInfo {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        VolumeInfo {
            name: "v".into(),
            driver: driver.into(),
            options: map(options),
            labels: map(labels),
        }
    }

    #[test]
    fn volumes_are_judged_by_what_they_are() {
        let ws = Path::new("/work/ws");
        assert_eq!(classify(None, ws), VolumeUse::Missing);
        let ours = volume("local", &[], &[(VOLUME_WORKSPACE_LABEL, "/work/ws")]);
        assert_eq!(classify(Some(&ours), ws), VolumeUse::Owned);
        assert_eq!(
            classify(Some(&ours), Path::new("/work/other")),
            VolumeUse::Foreign
        );
        assert_eq!(
            classify(Some(&volume("local", &[], &[])), ws),
            VolumeUse::Foreign
        );
        for o in ["bind", "rbind", "ro,bind", "rw, rbind"] {
            let bind = volume(
                "local",
                &[("type", "none"), ("o", o), ("device", "/etc")],
                // a label cannot make a bind-backed volume the workspace's
                &[(VOLUME_WORKSPACE_LABEL, "/work/ws")],
            );
            assert_eq!(
                classify(Some(&bind), ws),
                VolumeUse::BindBacked("/etc".into()),
                "{o}"
            );
        }
        let nfs = volume("local", &[("type", "nfs"), ("o", "addr=10.0.0.1")], &[]);
        assert_eq!(classify(Some(&nfs), ws), VolumeUse::Foreign);
        let plugin = volume("sshfs", &[], &[(VOLUME_WORKSPACE_LABEL, "/work/ws")]);
        assert_eq!(classify(Some(&plugin), ws), VolumeUse::Foreign);
        let no_device = volume("local", &[("o", "bind")], &[]);
        assert_eq!(classify(Some(&no_device), ws), VolumeUse::Foreign);
    }

    #[test]
    fn a_foreign_volume_is_a_request_granted_by_name() {
        let names = vec!["shared".to_string()];
        let hardened = SecurityProfile::default();
        let r = judge(&hardened, &Grants::default(), &names);
        assert_eq!(r[0].status, RequestStatus::Refused);
        assert_eq!(
            r[0].permission.grant_flag().unwrap(),
            "--allow volume:shared"
        );
        let g = Grants::parse(&["volume:shared"]).unwrap();
        assert_eq!(
            judge(&hardened, &g, &names)[0].status,
            RequestStatus::Granted
        );
        assert_eq!(
            judge(&SecurityProfile::Reference, &Grants::default(), &names)[0].status,
            RequestStatus::AllowedByProfile
        );
        assert!(Grants::parse(&["volume:"]).is_err());
        assert!(Grants::parse(&["volume:a/b"]).is_err());
    }
}
