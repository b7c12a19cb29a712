//! The container a merged configuration asks for, as an engine-neutral [`ContainerSpec`]
//! ([spec: container creation](https://containers.dev/implementors/spec/#container-creation)).
//! Pure functions; `up` adds the security profile on top.
//!
//! What goes in, in the reference CLI's `docker run` order: `appPort` (N →
//! `127.0.0.1:N:N`), the workspace mount, merged `mounts`, `--mount` flags, the id labels,
//! `containerEnv`, `containerUser`, `runArgs` (mapped by [`run_args::apply_run_args`]; an
//! unknown flag is an error naming it), then `init`, `privileged`, `capAdd`, `securityOpt`
//! from the merged configuration, the keep-alive entrypoint and the `devcontainer.metadata`
//! label.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::config::metadata::MergedConfiguration;
use crate::engine::run_args::{self, parse_mount, parse_publish};
use crate::engine::{ContainerSpec, ImageInfo, Mount, MountKind};
use crate::names::METADATA_LABEL;
use crate::ops::error::{OpsError, Result};

/// Folder of devcell's per-container state volume (run-once markers), under the hardened
/// profile whose home folders are tmpfs (spec-notes/0181).
pub const STATE_DIR: &str = "/var/lib/devcell";

/// tmpfs where the hook wrapper records the process group of each running hook
/// (spec-note 0423), under the hardened profile: a process group lives exactly as long as the
/// container's current start, and so does a tmpfs. Created sticky and world-writable, like
/// `/tmp`, so the hooks' user may write it with no `chmod` after the start (spec-note 0471).
pub const RUN_DIR: &str = "/run/devcell";

/// Mount options of the [`RUN_DIR`] tmpfs: pid files only (`noexec`, 1 MiB).
pub const RUN_DIR_TMPFS: &str = "rw,nosuid,nodev,noexec,size=1m,mode=1777";

/// The keep-alive script run by `/bin/sh -c` as the container's command (our own wording of
/// the reference CLI's behaviour): says it started, exits 0 on `SIGTERM`, runs each Feature
/// `entrypoint` (passed as positional parameters after the separator `--devcell-end--`), then
/// `exec`s the remaining arguments (the image's entrypoint and command, when
/// `overrideCommand` is `false`) or sleeps forever.
pub const KEEP_ALIVE_SCRIPT: &str = r#"echo "Container started"
trap "exit 0" TERM
while [ "$#" -gt 0 ] && [ "$1" != "--devcell-end--" ]; do
  /bin/sh -c "$1"
  shift
done
[ "$#" -gt 0 ] && shift
if [ "$#" -gt 0 ]; then exec "$@"; fi
while sleep 1 & wait $!; do :; done"#;

/// Inputs of [`container_spec`].
#[derive(Clone)]
pub struct SpecInputs<'a> {
    /// The image to run (reference or id).
    pub image: &'a str,
    /// What the engine knows about it (entrypoint/cmd for `overrideCommand: false`).
    pub image_info: &'a ImageInfo,
    /// The merged configuration (substituted through `${devcontainerId}`).
    pub merged: &'a Value,
    /// The workspace mount ([`crate::ops::load::LoadedConfiguration::workspace_mount`]; `None`:
    /// none).
    pub workspace_mount: Option<&'a Mount>,
    /// `--mount` flags of the command line.
    pub extra_mounts: &'a [Mount],
    /// The id labels.
    pub id_labels: &'a BTreeMap<String, String>,
    /// The `devcontainer.metadata` label to write (`None`: the image carries it).
    pub metadata_label: Option<String>,
    /// Host environment, for `runArgs` `-e NAME` without a value.
    pub host_env: &'a dyn Fn(&str) -> Option<String>,
}

/// Builds the container request from a merged configuration.
///
/// Errors: [`OpsError::Engine`] for an invalid mount string or an unsupported or invalid
/// `runArgs` flag (named); [`OpsError::Unsupported`] for an `appPort`, mount or
/// `runArgs` value of the wrong JSON type.
pub fn container_spec(inputs: &SpecInputs<'_>) -> Result<ContainerSpec> {
    let merged = inputs.merged;
    let mut spec = ContainerSpec {
        image: inputs.image.to_string(),
        ..ContainerSpec::default()
    };

    for (index, port) in array(merged, "appPort").iter().enumerate() {
        let binding =
            match port {
                Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()).map(|n| {
                    crate::engine::PortBinding {
                        container_port: n,
                        protocol: "tcp".into(),
                        host_ip: Some("127.0.0.1".into()),
                        host_port: Some(n),
                    }
                }),
                Value::String(s) => parse_publish(s).ok(),
                _ => None,
            };
        spec.ports.push(binding.ok_or_else(|| OpsError::Unsupported {
            message: format!("`appPort[{index}]`: expected a port number or `[ip:]host:container`, found `{port}`"),
            hint: None,
        })?);
    }

    spec.mounts.extend(inputs.workspace_mount.cloned());
    spec.mounts.extend(configured_mounts(merged)?);
    spec.mounts.extend(inputs.extra_mounts.iter().cloned());

    spec.labels = inputs.id_labels.clone();
    // what this container is for, read by a lookup by a user's `--id-label` (spec-note 0421)
    spec.labels.insert(
        crate::names::ID_LABELS_LABEL.to_string(),
        serde_json::to_string(inputs.id_labels).unwrap_or_default(),
    );
    let typed = MergedConfiguration::of(merged);
    spec.env.extend(typed.container_env);
    spec.user = typed.users.container_user;

    let run_args: Vec<String> = array(merged, "runArgs")
        .iter()
        .map(|a| match a {
            Value::String(s) => Ok(s.clone()),
            other => Err(OpsError::Unsupported {
                message: format!("`runArgs`: expected strings, found `{other}`"),
                hint: None,
            }),
        })
        .collect::<Result<_>>()?;
    run_args::apply_run_args(&mut spec, &run_args, inputs.host_env)?;

    if typed.init {
        spec.init = Some(true);
    }
    if typed.privileged {
        spec.privileged = true;
    }
    for cap in typed.cap_add {
        if !spec.cap_add.contains(&cap) {
            spec.cap_add.push(cap);
        }
    }
    for opt in typed.security_opt {
        if !spec.security_opt.contains(&opt) {
            spec.security_opt.push(opt);
        }
    }

    // overrideCommand defaults to true for image and Dockerfile configs.
    let override_command = typed.override_command.unwrap_or(true);
    let mut cmd = vec![
        "-c".to_string(),
        KEEP_ALIVE_SCRIPT.to_string(),
        "devcell-keep-alive".to_string(),
    ];
    cmd.extend(typed.entrypoints);
    cmd.push("--devcell-end--".to_string());
    if !override_command {
        cmd.extend(inputs.image_info.entrypoint.iter().flatten().cloned());
        cmd.extend(inputs.image_info.cmd.iter().flatten().cloned());
    }
    spec.entrypoint = Some(vec!["/bin/sh".to_string()]);
    spec.cmd = Some(cmd);

    if let Some(label) = &inputs.metadata_label {
        spec.labels
            .insert(METADATA_LABEL.to_string(), label.clone());
    }
    Ok(spec)
}

/// The user the container is asked to run as: `containerUser`, then a `runArgs` `-u`/`--user`
/// (as [`container_spec`] sets `spec.user`); `None` when neither names one. `runArgs` that do
/// not parse give the user before the bad flag: [`container_spec`] refuses them anyway.
pub fn configured_container_user(merged: &Value) -> Option<String> {
    let mut spec = ContainerSpec {
        user: MergedConfiguration::of(merged).users.container_user,
        ..ContainerSpec::default()
    };
    let args: Vec<String> = array(merged, "runArgs")
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    let _ = run_args::apply_run_args(&mut spec, &args, &|_| None);
    spec.user.filter(|u| !u.is_empty())
}

/// The label keys the merged configuration's `runArgs` set (`--label`, `-l`, in any of their
/// spellings), as [`run_args::apply_run_args`] reads them; for the policy's identity-label
/// check (spec-note 0421). `runArgs` that do not parse give the labels before the bad flag:
/// [`container_spec`] refuses them anyway.
pub fn repository_labels(merged: &Value) -> Vec<String> {
    let args: Vec<String> = array(merged, "runArgs")
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    let mut spec = ContainerSpec::default();
    let _ = run_args::apply_run_args(&mut spec, &args, &|_| None);
    spec.labels.into_keys().collect()
}

/// A `mounts` element (string or `{type, source, target}` object) as a [`Mount`]; `None`
/// for object mounts marked `external` (compose-only).
/// The mounts the merged configuration asks for (`mounts` of devcontainer.json and of the
/// Features' metadata), in order, as the container is given them.
///
/// Errors: [`OpsError::Unsupported`] for an entry that is not a mount.
pub(crate) fn configured_mounts(merged: &Value) -> Result<Vec<Mount>> {
    let mut mounts = Vec::new();
    for (index, mount) in array(merged, "mounts").iter().enumerate() {
        mounts.extend(mount_from_value(mount, index)?);
    }
    Ok(mounts)
}

fn mount_from_value(mount: &Value, index: usize) -> Result<Option<Mount>> {
    match mount {
        Value::String(s) => Ok(Some(parse_mount(s)?)),
        Value::Object(o) => {
            let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
            let target = text("target")
                .or_else(|| text("dst"))
                .or_else(|| text("destination"));
            let Some(target) = target else {
                return Err(OpsError::Unsupported {
                    message: format!("`mounts[{index}]`: a mount object needs a `target`"),
                    hint: None,
                });
            };
            let kind = match text("type").as_deref() {
                Some("bind") => MountKind::Bind,
                Some("tmpfs") => MountKind::Tmpfs,
                _ => MountKind::Volume,
            };
            Ok(Some(Mount {
                kind,
                // A tmpfs has no source; its size comes only from a `tmpfs-size` string.
                source: text("source")
                    .or_else(|| text("src"))
                    .filter(|s| !s.is_empty() && kind != MountKind::Tmpfs),
                target,
                read_only: o.get("readonly").and_then(Value::as_bool).unwrap_or(false),
            }))
        }
        other => Err(OpsError::Unsupported {
            message: format!("`mounts[{index}]`: expected a string or an object, found `{other}`"),
            hint: None,
        }),
    }
}

fn array<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// `hostRequirements` the host does not meet, one message each (spec: "a warning").
/// `cpus` is compared with the host's available parallelism, `memory` with `MemTotal` of
/// `/proc/meminfo`; `storage` and `gpu` are not checked.
pub fn unmet_host_requirements(
    merged: &Value,
    host_cpus: usize,
    host_memory_bytes: Option<u128>,
) -> Vec<String> {
    let Some(req) = merged.get("hostRequirements") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(cpus) = req.get("cpus").and_then(Value::as_u64)
        && cpus > host_cpus as u64
    {
        out.push(format!(
            "`hostRequirements.cpus` asks for {cpus} CPUs, the host has {host_cpus}"
        ));
    }
    if let (Some(memory), Some(host)) = (
        req.get("memory")
            .and_then(Value::as_str)
            .and_then(crate::config::metadata::parse_bytes),
        host_memory_bytes,
    ) && memory > host
    {
        out.push(format!(
            "`hostRequirements.memory` asks for {memory} bytes, the host has {host}"
        ));
    }
    out
}

/// The host's `MemTotal` in bytes (Linux `/proc/meminfo`), if readable.
pub fn host_memory_bytes() -> Option<u128> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The user devcell would not replace with its own (spec-note 0188): `containerUser`, else
    /// a `runArgs` user flag, as `container_spec` sets it.
    #[test]
    fn the_configured_container_user_includes_run_args() {
        assert_eq!(configured_container_user(&json!({})), None);
        assert_eq!(
            configured_container_user(&json!({"containerUser": "root"})).as_deref(),
            Some("root")
        );
        for args in [
            json!(["-u", "0"]),
            json!(["--user=0"]),
            json!(["--user", "0"]),
        ] {
            assert_eq!(
                configured_container_user(&json!({"runArgs": args})).as_deref(),
                Some("0"),
                "{args}"
            );
        }
        assert_eq!(
            configured_container_user(&json!({"containerUser": "a", "runArgs": ["-u", "b"]}))
                .as_deref(),
            build(json!({"containerUser": "a", "runArgs": ["-u", "b"]}))
                .unwrap()
                .user
                .as_deref()
        );
    }

    fn build(merged: Value) -> Result<ContainerSpec> {
        let info = ImageInfo {
            entrypoint: Some(vec!["/entry".into()]),
            cmd: Some(vec!["serve".into()]),
            ..ImageInfo::default()
        };
        let labels = BTreeMap::from([("devcontainer.local_folder".to_string(), "/w".to_string())]);
        let inputs = SpecInputs {
            image: "img",
            image_info: &info,
            merged: &merged,
            workspace_mount: Some(
                &parse_mount("type=bind,source=/w,target=/workspaces/w").unwrap(),
            ),
            extra_mounts: &[parse_mount("type=volume,source=cache,target=/cache").unwrap()],
            id_labels: &labels,
            metadata_label: Some("[]".into()),
            host_env: &|_| None,
        };
        container_spec(&inputs)
    }

    #[test]
    fn merged_configuration_maps_onto_the_spec() {
        let spec = build(json!({
            "appPort": [3000, "127.0.0.1:8080:80"],
            "mounts": ["type=tmpfs,target=/scratch", {"type": "volume", "source": "v", "target": "/v"}],
            "containerEnv": {"A": "1"},
            "containerUser": "nobody",
            "init": true,
            "capAdd": ["SYS_PTRACE"],
            "securityOpt": ["seccomp=unconfined"],
            "entrypoints": ["echo feature"],
            "runArgs": ["--cap-add=NET_ADMIN", "--hostname", "box"]
        }))
        .unwrap();
        assert_eq!(spec.ports[0].host_ip.as_deref(), Some("127.0.0.1"));
        assert_eq!(spec.ports[0].host_port, Some(3000));
        assert_eq!(spec.ports[1].container_port, 80);
        let targets: Vec<&str> = spec.mounts.iter().map(|m| m.target.as_str()).collect();
        assert_eq!(targets, ["/workspaces/w", "/scratch", "/v", "/cache"]);
        assert_eq!(spec.env["A"], "1");
        assert_eq!(spec.user.as_deref(), Some("nobody"));
        assert_eq!(spec.init, Some(true));
        assert_eq!(spec.cap_add, ["NET_ADMIN", "SYS_PTRACE"]);
        assert_eq!(spec.hostname.as_deref(), Some("box"));
        assert_eq!(spec.labels[METADATA_LABEL], "[]");
        let cmd = spec.cmd.unwrap();
        assert_eq!(cmd[0], "-c");
        assert_eq!(&cmd[3..], ["echo feature", "--devcell-end--"]);
        assert_eq!(spec.entrypoint.unwrap(), ["/bin/sh"]);
    }

    #[test]
    fn override_command_false_runs_the_image_command() {
        let spec = build(json!({"overrideCommand": false})).unwrap();
        assert_eq!(
            &spec.cmd.unwrap()[3..],
            ["--devcell-end--", "/entry", "serve"]
        );
    }

    #[test]
    fn unknown_run_arg_is_named() {
        let err = build(json!({"runArgs": ["--ipc", "host"]})).unwrap_err();
        assert!(err.to_string().contains("`--ipc`"), "{err}");
    }

    #[test]
    fn keep_alive_script_runs_entrypoints_then_the_command() {
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", KEEP_ALIVE_SCRIPT, "x", "echo one", "--devcell-end--"])
            .args(["/bin/echo", "two"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("Container started\n"), "{text}");
        assert!(text.contains("two"), "{text}");
    }

    #[test]
    fn host_requirements_warn_when_unmet() {
        let merged = json!({"hostRequirements": {"cpus": 64, "memory": "1tb"}});
        let warnings = unmet_host_requirements(&merged, 2, Some(8 << 30));
        assert_eq!(warnings.len(), 2);
        assert!(
            unmet_host_requirements(&json!({"hostRequirements": {"cpus": 1}}), 2, None).is_empty()
        );
    }
}
