//! Who asked for what: [`Origins`] from the metadata entries `up` merges (base image label
//! entries, Feature entries, the devcontainer.json entry). Pure.
//!
//! Attribution follows the spec's merge rules
//! ([merge logic](https://containers.dev/implementors/spec/#merge-logic)): `privileged`, each
//! `capAdd` and `securityOpt` value is attributed to the first entry that asks for it (image
//! before Features before devcontainer.json: the one that made it part of the merge);
//! `mounts`, `containerUser`, `remoteUser` to the last entry that sets them (last one wins).
//! A base-image entry with an `id` is that Feature's; without one it is the image label's.

use serde_json::Value;

use crate::config::metadata::mount_target;

use super::policy::{Origins, Source, normalize_cap};

/// Builds [`Origins`] from the entries as `config::metadata::collect_entries` takes them.
pub fn origins_from_metadata(base: &[Value], features: &[Value], config: &Value) -> Origins {
    let mut origins = Origins::default();
    let attributed = base
        .iter()
        .map(|e| (e, entry_source(e, Source::ImageMetadata)))
        .chain(
            features
                .iter()
                .map(|e| (e, entry_source(e, Source::Feature("<unnamed>".to_string())))),
        )
        .chain(std::iter::once((config, Source::DevcontainerJson)));
    for (entry, source) in attributed {
        let Some(obj) = entry.as_object() else {
            continue;
        };
        if obj.get("privileged").and_then(Value::as_bool) == Some(true)
            && origins.privileged.is_none()
        {
            origins.privileged = Some(source.clone());
        }
        for cap in strings(obj.get("capAdd")) {
            origins
                .capabilities
                .entry(normalize_cap(&cap))
                .or_insert_with(|| source.clone());
        }
        for opt in strings(obj.get("securityOpt")) {
            origins
                .security_opts
                .entry(opt)
                .or_insert_with(|| source.clone());
        }
        if let Some(mounts) = obj.get("mounts").and_then(Value::as_array) {
            for target in mounts.iter().filter_map(mount_target) {
                origins.mounts.insert(target, source.clone());
            }
        }
        if obj.get("containerUser").and_then(Value::as_str).is_some() {
            origins.container_user = Some(source.clone());
        }
        if obj.get("remoteUser").and_then(Value::as_str).is_some() {
            origins.remote_user = Some(source.clone());
        }
    }
    origins
}

/// An entry with an `id` is that Feature's; otherwise `fallback`.
fn entry_source(entry: &Value, fallback: Source) -> Source {
    match entry.get("id").and_then(Value::as_str) {
        Some(id) => Source::Feature(id.to_string()),
        None => fallback,
    }
}

fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn attributes_each_request_to_who_asked() {
        let base = [
            json!({"mounts": ["source=/var/run/docker.sock,target=/var/run/docker-host.sock,type=bind"], "remoteUser": "vscode"}),
            json!({"id": "ghcr.io/x/base-feature:1", "capAdd": ["SYS_ADMIN"]}),
        ];
        let features = [json!({
            "id": "ghcr.io/devcontainers/features/docker-in-docker:2",
            "privileged": true,
            "capAdd": ["CAP_SYS_PTRACE", "SYS_ADMIN"],
            "securityOpt": ["seccomp=unconfined"],
            "mounts": [{"source": "dind-var", "target": "/var/lib/docker", "type": "volume"}]
        })];
        let config = json!({
            "privileged": true,
            "securityOpt": ["seccomp=unconfined", "label=disable"],
            "mounts": ["source=/data,target=/var/lib/docker,type=bind"],
            "containerUser": "root"
        });
        let o = origins_from_metadata(&base, &features, &config);
        let dind = Source::Feature("ghcr.io/devcontainers/features/docker-in-docker:2".into());
        assert_eq!(o.privileged, Some(dind.clone()));
        assert_eq!(
            o.capabilities["SYS_ADMIN"],
            Source::Feature("ghcr.io/x/base-feature:1".into())
        );
        assert_eq!(o.capabilities["SYS_PTRACE"], dind);
        assert_eq!(o.security_opts["seccomp=unconfined"], dind);
        assert_eq!(o.security_opts["label=disable"], Source::DevcontainerJson);
        assert_eq!(o.mounts["/var/run/docker-host.sock"], Source::ImageMetadata);
        // Last one wins for mounts by target and for users.
        assert_eq!(o.mounts["/var/lib/docker"], Source::DevcontainerJson);
        assert_eq!(o.remote_user, Some(Source::ImageMetadata));
        assert_eq!(o.container_user, Some(Source::DevcontainerJson));
    }

    /// The three refusals, from metadata as `up` sees it: a config asking for
    /// privileged, a Feature asking for a capability, an image label asking for a socket mount.
    #[test]
    fn refusals_name_config_feature_and_image_label() {
        use crate::engine::run_args::parse_mount;
        use crate::engine::{ContainerSpec, Mount, MountKind};
        use crate::security::{
            Grants, Permission, PolicyInput, RequestStatus, SecurityError, SecurityProfile, apply,
        };
        let socket = "source=/var/run/docker.sock,target=/var/run/docker-host.sock,type=bind";
        let base = [json!({ "mounts": [socket] })];
        let features = [json!({"id": "ghcr.io/x/debugger:1", "capAdd": ["SYS_PTRACE"]})];
        let config = json!({"privileged": true});
        let spec = ContainerSpec {
            image: "img".into(),
            privileged: true,
            cap_add: vec!["SYS_PTRACE".into()],
            mounts: vec![
                Mount {
                    kind: MountKind::Bind,
                    source: Some("/ws".into()),
                    target: "/workspaces/ws".into(),
                    read_only: false,
                },
                parse_mount(socket).unwrap(),
            ],
            ..ContainerSpec::default()
        };
        let input = PolicyInput {
            spec,
            origins: origins_from_metadata(&base, &features, &config),
            remote_user: Some("vscode".into()),
            workspace: "/ws".into(),
            ..PolicyInput::default()
        };
        let err = apply(&SecurityProfile::default(), &input, &Grants::default()).unwrap_err();
        let SecurityError::Refused { requests, .. } = &err else {
            panic!("{err}");
        };
        let got: Vec<_> = requests
            .iter()
            .map(|r| (r.permission.clone(), r.source.clone(), r.status))
            .collect();
        assert_eq!(
            got,
            [
                (
                    Permission::Privileged,
                    Source::DevcontainerJson,
                    RequestStatus::Refused
                ),
                (
                    Permission::Capability("SYS_PTRACE".into()),
                    Source::Feature("ghcr.io/x/debugger:1".into()),
                    RequestStatus::Refused
                ),
                (
                    Permission::EngineSocket("/var/run/docker.sock".into()),
                    Source::ImageMetadata,
                    RequestStatus::Forbidden
                ),
            ]
        );
        let text = err.to_string();
        for needle in [
            "privileged mode (from devcontainer.json), grant with `--allow privileged`",
            "capability `SYS_PTRACE` (from Feature `ghcr.io/x/debugger:1`), grant with `--allow cap:SYS_PTRACE`",
            "`/var/run/docker.sock` (from image label `devcontainer.metadata`), never allowed",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in {text}");
        }
    }

    #[test]
    fn plain_config_attributes_nothing_else() {
        let o = origins_from_metadata(&[], &[], &json!({"image": "x"}));
        assert_eq!(o, Origins::default());
    }
}
