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
//! Pure but for [`mounts_as_host_sees`] and [`bind_backed_devices`], which inspect a
//! container's volumes through the engine.

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

/// Makes each top-level volume of the resolved Compose `model` what the engine already holds
/// under its name (`held`, engine name → [`VolumeInfo`]; the name is the volume's `name`, else
/// its key): one [`classify`] finds bind-backed gets the engine's options as its
/// `driver_opts` (`type: none`, `o: bind`, `device`), whatever the model says (attacks G1). Compose
/// reuses an existing volume without comparing its options with the file's, so a `wsvol: {}`
/// written after an earlier session made `wsvol` with `o=bind,device=<workspace>` mounts that
/// bind; from here every rule that reads the model's driver options (the request of the bind,
/// the covers of `.git`, the host writers of spec-note 0611) judges the bind. `external`
/// volumes and those named with `name:` alike. Returns the keys rewritten. Pure.
pub fn compose_model_as_held(
    model: &mut serde_json::Value,
    held: &BTreeMap<String, VolumeInfo>,
    workspace: &Path,
) -> Vec<String> {
    let mut rewritten = Vec::new();
    let Some(volumes) = model
        .get_mut("volumes")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return rewritten;
    };
    for (key, def) in volumes.iter_mut() {
        let name = def
            .get("name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or(key)
            .to_string();
        if let VolumeUse::BindBacked(device) = classify(held.get(&name), workspace) {
            let opts = serde_json::json!({"type": "none", "o": "bind", "device": device});
            match def.as_object_mut() {
                Some(def) => {
                    def.insert("driver_opts".to_string(), opts);
                }
                None => *def = serde_json::json!({"name": name, "driver_opts": opts}),
            }
            rewritten.push(key.clone());
        }
    }
    rewritten
}

/// The kind [`as_host_sees`] gives a read-write volume mount devcell cannot resolve to what it
/// shows of the host (the engine has no such volume, or its driver options are not a plain
/// bind: another driver's, `type=nfs`, `o=bind` without a `device`): every judge of a
/// container's mounts counts it as writable host content (attack M5).
pub const UNRESOLVED_VOLUME: &str = "unresolved-volume";

/// A container's `mounts` as the host sees them, once its volumes are inspected (`held`, name →
/// what the engine holds; a name missing from it is a volume the engine no longer knows): each
/// volume mount whose volume is bind-backed ([`classify`], the rule every other judge applies:
/// a `local` volume with `o=bind`/`rbind` and a `device`; attacks F6, G1, L7, M5) becomes a
/// bind of its `device`; one with driver options devcell cannot resolve, or that the engine
/// does not know, becomes [`UNRESOLVED_VOLUME`] (its `source` naming the volume); a plain
/// volume shows the engine's own storage, no host folder of the user's, and is kept as it is.
/// Pure.
pub fn as_host_sees(
    mounts: &[crate::engine::MountInfo],
    held: &BTreeMap<String, VolumeInfo>,
) -> Vec<crate::engine::MountInfo> {
    mounts
        .iter()
        .map(|m| {
            let Some(name) = m.name.as_ref().filter(|_| m.kind == "volume") else {
                return m.clone();
            };
            let info = held.get(name);
            let unresolved = |why: &str| crate::engine::MountInfo {
                kind: UNRESOLVED_VOLUME.into(),
                source: format!("the volume `{name}` ({why})"),
                ..m.clone()
            };
            match (classify(info, Path::new("")), info) {
                (VolumeUse::BindBacked(device), Some(_)) => crate::engine::MountInfo {
                    kind: "bind".into(),
                    source: device,
                    ..m.clone()
                },
                (_, None) => unresolved("the engine does not know it"),
                (_, Some(i)) if is_bind(i) => unresolved("a bind with no `device`"),
                (_, Some(i)) if !i.options.is_empty() => {
                    unresolved("driver options devcell cannot resolve")
                }
                _ => m.clone(),
            }
        })
        .collect()
}

/// [`as_host_sees`] with the volumes inspected through `engine`: the one view of a container's
/// mounts every judge of them reads (an external container a handoff is given, `env export`).
///
/// Errors: the engine's, inspecting a volume.
pub async fn mounts_as_host_sees(
    engine: &dyn crate::engine::Engine,
    mounts: &[crate::engine::MountInfo],
) -> Result<Vec<crate::engine::MountInfo>, crate::engine::EngineError> {
    let mut held = BTreeMap::new();
    for name in mounts
        .iter()
        .filter(|m| m.kind == "volume")
        .filter_map(|m| m.name.as_deref())
    {
        if let Some(info) = engine.inspect_volume(name).await? {
            held.insert(name.to_string(), info);
        }
    }
    Ok(as_host_sees(mounts, &held))
}

/// The host folder (its `device`, as written) each bind-backed named volume among `mounts`
/// binds, by volume name ([`classify`]: `local`, `o=bind`, a `device`): such a volume writes
/// its `device` as a bind does, so every judge that counts binds counts it too (the foreign
/// writers of an `up`, attack 27 R1; which containers are a workspace's, R3). One inspect per
/// named volume among `mounts` (the caller narrows them, e.g. to the writable ones).
///
/// Errors: the engine's, inspecting a volume.
pub async fn bind_backed_devices<'a>(
    engine: &dyn crate::engine::Engine,
    mounts: impl IntoIterator<Item = &'a crate::engine::MountInfo>,
) -> Result<BTreeMap<String, String>, crate::engine::EngineError> {
    let mut devices = BTreeMap::new();
    for name in mounts
        .into_iter()
        .filter(|m| m.kind == "volume")
        .filter_map(|m| m.name.as_ref())
    {
        let info = engine.inspect_volume(name).await?;
        if let VolumeUse::BindBacked(device) = classify(info.as_ref(), Path::new("")) {
            devices.insert(name.clone(), device);
        }
    }
    Ok(devices)
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

    /// Attack G1: a volume an earlier session made with `o=bind,device=<workspace>` and
    /// the project's label, declared plain (`wsvol: {}`) now, or `external`, or by `name:`,
    /// is judged as the bind the engine holds: the model gets the engine's options, so the
    /// bind's request, the `.git` cover and the host writers see it. A plain volume the engine
    /// holds, and one it does not hold, are left as the model says.
    #[test]
    fn a_bind_backed_volume_the_engine_holds_is_a_bind_whatever_the_model_says() {
        use serde_json::json;
        let ws = Path::new("/work/ws");
        let bind = |name: &str, device: &str| {
            let mut v = volume(
                "local",
                &[("type", "none"), ("o", "bind"), ("device", device)],
                &[("com.docker.compose.project", "ws_devcontainer")],
            );
            v.name = name.into();
            (name.to_string(), v)
        };
        let mut plain = volume("local", &[], &[]);
        plain.name = "ws_devcontainer_data".into();
        let held: BTreeMap<String, VolumeInfo> = [
            bind("ws_devcontainer_wsvol", "/work/ws"),
            bind("shared-by-name", "/etc"),
            bind("outside", "/home/u"),
            ("ws_devcontainer_data".to_string(), plain),
        ]
        .into_iter()
        .collect();
        let mut model = json!({"name": "ws_devcontainer", "services": {
        "app": {"volumes": [{"type": "volume", "source": "wsvol", "target": "/hostws"}]}},
        "volumes": {
            "wsvol": {"name": "ws_devcontainer_wsvol"},
            "named": {"name": "shared-by-name"},
            "ext": {"name": "outside", "external": true},
            "data": {"name": "ws_devcontainer_data"},
            "fresh": {"name": "ws_devcontainer_fresh"},
            "lying": {"name": "ws_devcontainer_wsvol",
                      "driver_opts": {"type": "none", "o": "bind", "device": "/work/ws/sub"}}
        }});
        let mut rewritten = compose_model_as_held(&mut model, &held, ws);
        rewritten.sort();
        assert_eq!(rewritten, ["ext", "lying", "named", "wsvol"]);
        let device = |key: &str| model["volumes"][key]["driver_opts"]["device"].clone();
        assert_eq!(device("wsvol"), "/work/ws");
        assert_eq!(device("named"), "/etc");
        assert_eq!(device("ext"), "/home/u");
        assert_eq!(device("lying"), "/work/ws", "the engine's options win");
        assert_eq!(model["volumes"]["wsvol"]["driver_opts"]["o"], "bind");
        assert!(model["volumes"]["data"].get("driver_opts").is_none());
        assert!(model["volumes"]["fresh"].get("driver_opts").is_none());
        assert_eq!(
            crate::security::host_path::bind_backed_volume(&model, "wsvol"),
            Some("/work/ws")
        );
        // and the sidecar on it is a host writer (spec-note 0611)
        assert!(crate::security::compose::writes_host_path(
            &model,
            &model["services"]["app"]
        ));
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
