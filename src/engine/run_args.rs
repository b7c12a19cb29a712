//! `runArgs` (extra `docker run` flags in devcontainer.json) mapped onto a [`ContainerSpec`],
//! and the `--mount` / `mounts` string parser. Pure functions.
//!
//! Spec: [`runArgs`](https://containers.dev/implementors/json_reference/#image-specific) and
//! [`mounts`](https://containers.dev/implementors/json_reference/#general-properties). The
//! reference CLI passes `runArgs` to `docker run` verbatim; devcell talks to the engine's API,
//! so it maps the common flags and refuses any other, naming it (spec-note 0081).

use super::error::{EngineError, Result};
use super::spec::{ContainerSpec, Device, Mount, MountKind, PortBinding, Ulimit};

/// The flags [`apply_run_args`] maps, long forms (short aliases: `-e -l -h -u -v -m -p`).
pub const SUPPORTED_FLAGS: &[&str] = &[
    "--cap-add",
    "--cap-drop",
    "--security-opt",
    "--network",
    "--net",
    "--add-host",
    "--env",
    "--label",
    "--name",
    "--hostname",
    "--init",
    "--privileged",
    "--user",
    "--volume",
    "--mount",
    "--tmpfs",
    "--read-only",
    "--shm-size",
    "--ulimit",
    "--memory",
    "--cpus",
    "--pids-limit",
    "--device",
    "--publish",
    "--gpus",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flag {
    CapAdd,
    CapDrop,
    SecurityOpt,
    Network,
    AddHost,
    Env,
    Label,
    Name,
    Hostname,
    Init,
    Privileged,
    User,
    Volume,
    Mount,
    Tmpfs,
    ReadOnly,
    ShmSize,
    Ulimit,
    Memory,
    Cpus,
    PidsLimit,
    Device,
    Publish,
    Gpus,
}

impl Flag {
    fn from_long(name: &str) -> Option<Self> {
        Some(match name {
            "cap-add" => Flag::CapAdd,
            "cap-drop" => Flag::CapDrop,
            "security-opt" => Flag::SecurityOpt,
            "network" | "net" => Flag::Network,
            "add-host" => Flag::AddHost,
            "env" => Flag::Env,
            "label" => Flag::Label,
            "name" => Flag::Name,
            "hostname" => Flag::Hostname,
            "init" => Flag::Init,
            "privileged" => Flag::Privileged,
            "user" => Flag::User,
            "volume" => Flag::Volume,
            "mount" => Flag::Mount,
            "tmpfs" => Flag::Tmpfs,
            "read-only" => Flag::ReadOnly,
            "shm-size" => Flag::ShmSize,
            "ulimit" => Flag::Ulimit,
            "memory" => Flag::Memory,
            "cpus" => Flag::Cpus,
            "pids-limit" => Flag::PidsLimit,
            "device" => Flag::Device,
            "publish" => Flag::Publish,
            "gpus" => Flag::Gpus,
            _ => return None,
        })
    }

    fn from_short(c: char) -> Option<Self> {
        Some(match c {
            'e' => Flag::Env,
            'l' => Flag::Label,
            'h' => Flag::Hostname,
            'u' => Flag::User,
            'v' => Flag::Volume,
            'm' => Flag::Memory,
            'p' => Flag::Publish,
            _ => return None,
        })
    }

    fn is_bool(self) -> bool {
        matches!(self, Flag::Init | Flag::Privileged | Flag::ReadOnly)
    }
}

/// Applies `runArgs` to `spec`, in order (a later flag overrides an earlier scalar, and adds to
/// lists). Accepts `--flag value`, `--flag=value`, `-f value`, `-f=value` and `-fvalue`; boolean
/// flags (`--init`, `--privileged`, `--read-only`) also take `=true`/`=false`.
///
/// `host_env` resolves `-e NAME` without a value, as `docker run` does from its own environment
/// (an unset variable is skipped).
///
/// A GPU (`--gpus all`, `--device nvidia.com/gpu=all`) changes nothing here: it is the
/// configuration's GPU request ([`gpu_run_arg`]), settled and judged with
/// `hostRequirements.gpu` and given through [`ContainerSpec::gpu`] (spec-note 0646).
///
/// Errors: [`EngineError::UnsupportedRunArg`] for any other flag or a bare argument;
/// [`EngineError::InvalidRunArg`] for a missing or invalid value (a GPU other than every GPU
/// among them); [`EngineError::InvalidMount`].
pub fn apply_run_args(
    spec: &mut ContainerSpec,
    args: &[String],
    host_env: &dyn Fn(&str) -> Option<String>,
) -> Result<()> {
    for token in tokens(args)? {
        match token.value {
            Value::Bool(value) => match token.flag {
                Flag::Init => spec.init = Some(value),
                Flag::Privileged => spec.privileged = value,
                _ => spec.read_only_rootfs = value,
            },
            Value::Text(value) => apply_value(spec, token.flag, &token.shown, &value, host_env)?,
        }
    }
    Ok(())
}

/// The GPU `args` ask for, as written (`--gpus all`, `--device nvidia.com/gpu=all`), or
/// `None`; the last one when several do. Arguments [`apply_run_args`] refuses ask for none.
pub fn gpu_run_arg(args: &[String]) -> Option<String> {
    tokens(args)
        .ok()?
        .into_iter()
        .filter_map(|t| match (t.flag, t.value) {
            (Flag::Gpus, Value::Text(v)) => Some(format!("{} {v}", t.shown)),
            (Flag::Device, Value::Text(v)) if cdi_gpu(&v).is_some() => {
                Some(format!("{} {v}", t.shown))
            }
            _ => None,
        })
        .next_back()
}

/// The CDI device name of an NVIDIA GPU (`nvidia.com/gpu=<name>`): `Some(name)`.
fn cdi_gpu(value: &str) -> Option<&str> {
    value.strip_prefix("nvidia.com/gpu=")
}

/// Every GPU, in `--gpus`'s and CDI's words: devcell gives every GPU or none (spec-note 0646).
fn every_gpu(shown: &str, value: &str, all: &str) -> Result<()> {
    if value.trim_matches('"') == "all" {
        return Ok(());
    }
    Err(invalid(
        shown,
        format!(
            "devcell gives a container every GPU or none: write `{all}` (or `hostRequirements.gpu`), found `{value}`"
        ),
    ))
}

/// A flag's value: a boolean flag's, or the text of any other.
enum Value {
    Bool(bool),
    Text(String),
}

/// One flag of `runArgs`, its value read.
struct Token {
    flag: Flag,
    /// The flag as written (`--name`, `-e`).
    shown: String,
    value: Value,
}

/// `args` read into flags and values (see [`apply_run_args`] for the spellings).
///
/// Errors: as [`apply_run_args`], for the flags and the values' presence.
fn tokens(args: &[String]) -> Result<Vec<Token>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let (flag, shown, inline) = if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            match Flag::from_long(name) {
                Some(f) => (f, format!("--{name}"), inline),
                None => {
                    return Err(EngineError::UnsupportedRunArg {
                        flag: format!("--{name}"),
                    });
                }
            }
        } else if let Some(short) = arg.strip_prefix('-').filter(|s| !s.is_empty()) {
            let mut chars = short.chars();
            let c = chars.next().unwrap_or('-');
            let rest: String = chars.collect();
            match Flag::from_short(c) {
                Some(f) => {
                    let inline = if rest.is_empty() {
                        None
                    } else {
                        Some(rest.strip_prefix('=').unwrap_or(&rest).to_string())
                    };
                    (f, format!("-{c}"), inline)
                }
                None => return Err(EngineError::UnsupportedRunArg { flag: arg.clone() }),
            }
        } else {
            return Err(EngineError::UnsupportedRunArg { flag: arg.clone() });
        };
        let value = if flag.is_bool() {
            Value::Bool(match inline.as_deref() {
                None | Some("true") | Some("1") => true,
                Some("false") | Some("0") => false,
                Some(other) => {
                    return Err(invalid(
                        &shown,
                        format!("expected `true` or `false`, found `{other}`"),
                    ));
                }
            })
        } else {
            Value::Text(match inline {
                Some(v) => v,
                None => {
                    let v = args
                        .get(i)
                        .ok_or_else(|| invalid(&shown, "a value is required".to_string()))?;
                    i += 1;
                    v.clone()
                }
            })
        };
        out.push(Token { flag, shown, value });
    }
    Ok(out)
}

fn invalid(flag: &str, message: String) -> EngineError {
    EngineError::InvalidRunArg {
        flag: flag.to_string(),
        message,
    }
}

fn apply_value(
    spec: &mut ContainerSpec,
    flag: Flag,
    shown: &str,
    value: &str,
    host_env: &dyn Fn(&str) -> Option<String>,
) -> Result<()> {
    let nonempty = |v: &str| {
        if v.is_empty() {
            Err(invalid(shown, "the value is empty".to_string()))
        } else {
            Ok(v.to_string())
        }
    };
    match flag {
        Flag::CapAdd => spec.cap_add.push(nonempty(value)?),
        Flag::CapDrop => spec.cap_drop.push(nonempty(value)?),
        Flag::SecurityOpt => spec.security_opt.push(nonempty(value)?),
        Flag::Network => spec.network_mode = Some(nonempty(value)?),
        Flag::AddHost => {
            let (host, ip) = value
                .split_once(['=', ':'])
                .filter(|(h, ip)| !h.is_empty() && !ip.is_empty())
                .ok_or_else(|| invalid(shown, format!("expected `host:ip`, found `{value}`")))?;
            spec.extra_hosts.push(format!("{host}:{ip}"));
        }
        Flag::Env => match value.split_once('=') {
            Some(("", _)) => {
                return Err(invalid(
                    shown,
                    format!("expected `NAME=value`, found `{value}`"),
                ));
            }
            Some((k, v)) => {
                spec.env.insert(k.to_string(), v.to_string());
            }
            None => {
                if let Some(v) = host_env(value) {
                    spec.env.insert(value.to_string(), v);
                }
            }
        },
        Flag::Label => {
            let (k, v) = value.split_once('=').unwrap_or((value, ""));
            spec.labels.insert(nonempty(k)?, v.to_string());
        }
        Flag::Name => spec.name = Some(nonempty(value)?),
        Flag::Hostname => spec.hostname = Some(nonempty(value)?),
        Flag::User => spec.user = Some(nonempty(value)?),
        Flag::Volume => spec.mounts.push(parse_volume(value)?),
        Flag::Mount => spec.mounts.push(parse_mount(value)?),
        Flag::Tmpfs => {
            let (path, opts) = value.split_once(':').unwrap_or((value, ""));
            if !path.starts_with('/') {
                return Err(invalid(
                    shown,
                    format!("expected an absolute path, found `{path}`"),
                ));
            }
            spec.tmpfs.insert(path.to_string(), opts.to_string());
        }
        Flag::ShmSize => spec.shm_size = Some(parse_size(value).map_err(|m| invalid(shown, m))?),
        Flag::Memory => {
            spec.limits.memory_bytes = Some(parse_size(value).map_err(|m| invalid(shown, m))?)
        }
        Flag::Ulimit => spec
            .ulimits
            .push(parse_ulimit(value).map_err(|m| invalid(shown, m))?),
        Flag::Cpus => {
            let cpus: f64 = value
                .parse()
                .ok()
                .filter(|c: &f64| c.is_finite() && *c >= 0.0)
                .ok_or_else(|| {
                    invalid(shown, format!("expected a number of CPUs, found `{value}`"))
                })?;
            spec.limits.nano_cpus = Some((cpus * 1e9).round() as i64);
        }
        Flag::PidsLimit => {
            let n: i64 = value
                .parse()
                .map_err(|_| invalid(shown, format!("expected an integer, found `{value}`")))?;
            spec.limits.pids = if n <= 0 { None } else { Some(n) };
        }
        Flag::Device => match cdi_gpu(value) {
            Some(name) => every_gpu(shown, name, "--device nvidia.com/gpu=all")?,
            None => spec
                .devices
                .push(parse_device(value).map_err(|m| invalid(shown, m))?),
        },
        Flag::Gpus => every_gpu(shown, value, "--gpus all")?,
        Flag::Publish => spec
            .ports
            .push(parse_publish(value).map_err(|m| invalid(shown, m))?),
        Flag::Init | Flag::Privileged | Flag::ReadOnly => {}
    }
    Ok(())
}

/// Parses a size as `docker run` does (`--memory`, `--shm-size`): a number with an optional
/// binary unit `b`, `k`, `m`, `g`, `t`, `p` (case-insensitive, optional `b`/`ib` suffix:
/// `512m`, `4g`, `1.5GiB`, `65536`). Returns bytes.
pub fn parse_size(text: &str) -> std::result::Result<i64, String> {
    let t = text.trim().to_ascii_lowercase();
    let bad = || format!("expected a size such as `512m` or `4g`, found `{text}`");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: f64 = num.parse().map_err(|_| bad())?;
    let unit = unit.trim_start();
    let unit = unit
        .strip_suffix("ib")
        .or_else(|| unit.strip_suffix('b').filter(|u| !u.is_empty()))
        .unwrap_or(unit);
    let mult: f64 = match unit {
        "" | "b" => 1.0,
        "k" => 1024.0,
        "m" => 1024.0 * 1024.0,
        "g" => 1024.0_f64.powi(3),
        "t" => 1024.0_f64.powi(4),
        "p" => 1024.0_f64.powi(5),
        _ => return Err(bad()),
    };
    let bytes = num * mult;
    if !bytes.is_finite() || bytes > i64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as i64)
}

fn parse_ulimit(text: &str) -> std::result::Result<Ulimit, String> {
    let bad = || format!("expected `name=soft[:hard]`, found `{text}`");
    let (name, limits) = text.split_once('=').ok_or_else(bad)?;
    let (soft, hard) = limits.split_once(':').unwrap_or((limits, limits));
    let soft: i64 = soft.parse().map_err(|_| bad())?;
    let hard: i64 = hard.parse().map_err(|_| bad())?;
    if name.is_empty() || soft > hard {
        return Err(bad());
    }
    Ok(Ulimit {
        name: name.to_string(),
        soft,
        hard,
    })
}

fn parse_device(text: &str) -> std::result::Result<Device, String> {
    let parts: Vec<&str> = text.split(':').collect();
    let is_perms = |s: &str| !s.is_empty() && s.chars().all(|c| matches!(c, 'r' | 'w' | 'm'));
    let (host, container, perms) = match parts.as_slice() {
        [h] => (*h, *h, "rwm"),
        [h, p] if is_perms(p) => (*h, *h, *p),
        [h, c] => (*h, *c, "rwm"),
        [h, c, p] if is_perms(p) => (*h, *c, *p),
        _ => return Err(format!("expected `host[:container[:rwm]]`, found `{text}`")),
    };
    if !host.starts_with('/') || !container.starts_with('/') {
        return Err(format!("expected absolute device paths, found `{text}`"));
    }
    Ok(Device {
        host_path: host.to_string(),
        container_path: container.to_string(),
        permissions: perms.to_string(),
    })
}

/// Parses a `-p` value: `[ip:][host_port:]container_port[/protocol]` (IPv6 ip in brackets).
/// Port ranges are not supported.
pub fn parse_publish(text: &str) -> std::result::Result<PortBinding, String> {
    let bad = || {
        format!(
            "expected `[ip:][hostPort:]containerPort[/protocol]` with single ports, found `{text}`"
        )
    };
    let (addr, protocol) = match text.rsplit_once('/') {
        Some((a, p)) if matches!(p, "tcp" | "udp" | "sctp") => (a, p),
        Some(_) => return Err(bad()),
        None => (text, "tcp"),
    };
    let (ip, rest) = if let Some(stripped) = addr.strip_prefix('[') {
        let (ip, rest) = stripped.split_once("]:").ok_or_else(bad)?;
        (Some(ip.to_string()), rest)
    } else {
        let parts: Vec<&str> = addr.split(':').collect();
        match parts.as_slice() {
            [_] | [_, _] => (None, addr),
            [ip, _, _] => (Some((*ip).to_string()), &addr[ip.len() + 1..]),
            _ => return Err(bad()),
        }
    };
    let port = |s: &str| s.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(bad);
    let (host_port, container_port) = match rest.split_once(':') {
        Some(("", c)) => (None, port(c)?),
        Some((h, c)) => (Some(port(h)?), port(c)?),
        None => (None, port(rest)?),
    };
    Ok(PortBinding {
        container_port,
        protocol: protocol.to_string(),
        host_ip: ip.filter(|i| !i.is_empty()),
        host_port,
    })
}

/// Parses a `-v` value: `target` (anonymous volume), `source:target[:options]`. A source
/// starting with `/` is a bind mount, otherwise a named volume; option `ro` makes it
/// read-only (`rw`, `z`, `Z`, `cached`, `delegated`, `consistent`, `nocopy` and propagation
/// modes are accepted and ignored).
pub fn parse_volume(text: &str) -> Result<Mount> {
    let bad = |message: String| EngineError::InvalidMount {
        spec: text.to_string(),
        message,
    };
    let parts: Vec<&str> = text.split(':').collect();
    let (source, target, opts) = match parts.as_slice() {
        [t] => (None, *t, ""),
        [s, t] => (Some(*s), *t, ""),
        [s, t, o] => (Some(*s), *t, *o),
        _ => return Err(bad("expected `source:target[:options]`".to_string())),
    };
    if !target.starts_with('/') {
        return Err(bad(format!(
            "expected an absolute container path, found `{target}`"
        )));
    }
    let mut read_only = false;
    for opt in opts.split(',').filter(|o| !o.is_empty()) {
        match opt {
            "ro" | "readonly" => read_only = true,
            "rw" | "z" | "Z" | "cached" | "delegated" | "consistent" | "nocopy" | "copy"
            | "private" | "rprivate" | "shared" | "rshared" | "slave" | "rslave" => {}
            other => return Err(bad(format!("unknown volume option `{other}`"))),
        }
    }
    let kind = match source {
        Some(s) if s.starts_with('/') => MountKind::Bind,
        Some(s) if s.starts_with('.') || s.starts_with('~') => {
            return Err(bad(format!(
                "relative bind source `{s}`: use an absolute path such as `${{localWorkspaceFolder}}/…`"
            )));
        }
        Some("") => return Err(bad("the source is empty".to_string())),
        _ => MountKind::Volume,
    };
    Ok(Mount {
        kind,
        source: source.map(str::to_string),
        target: target.to_string(),
        read_only,
    })
}

/// Parses a `--mount` / devcontainer.json `mounts` string: comma-separated `key=value` fields
/// (a field may be double-quoted): `type` (`bind`, `volume` — the default — or `tmpfs`),
/// `source`/`src`, `target`/`dst`/`destination`, `readonly`/`ro` (bare or `=true|false|1|0`),
/// `tmpfs-size` (a size as [`parse_size`] reads it) and `tmpfs-mode` (octal), kept in a tmpfs
/// mount's `source` as [`tmpfs_mount_source`] writes them; `consistency`, `bind-propagation`,
/// `volume-nocopy` are accepted and ignored.
///
/// Errors: [`EngineError::InvalidMount`] naming the string: unknown key or type, no target,
/// a bind mount without a source.
pub fn parse_mount(text: &str) -> Result<Mount> {
    let bad = |message: String| EngineError::InvalidMount {
        spec: text.to_string(),
        message,
    };
    let mut kind = MountKind::Volume;
    let mut source = None;
    let mut target = None;
    let mut read_only = false;
    let (mut tmpfs_size, mut tmpfs_mode) = (None, None);
    let fields = crate::formats::mount::fields(text).map_err(|e| bad(e.to_string()))?;
    for crate::formats::mount::MountField { key, value } in fields {
        let need = |v: Option<String>| v.ok_or_else(|| bad(format!("`{key}` needs a value")));
        match key.as_str() {
            "type" => {
                kind = match need(value)?.as_str() {
                    "bind" => MountKind::Bind,
                    "volume" => MountKind::Volume,
                    "tmpfs" => MountKind::Tmpfs,
                    other => return Err(bad(format!("unsupported mount type `{other}`"))),
                }
            }
            "source" => source = Some(need(value)?),
            "target" => target = Some(need(value)?),
            "readonly" => {
                read_only = match value.as_deref() {
                    None | Some("true") | Some("1") => true,
                    Some("false") | Some("0") => false,
                    Some(v) => return Err(bad(format!("invalid `{key}` value `{v}`"))),
                }
            }
            "tmpfs-size" => {
                tmpfs_size = Some(parse_size(&need(value)?).map_err(&bad)?);
            }
            "tmpfs-mode" => {
                let v = need(value)?;
                tmpfs_mode = Some(u32::from_str_radix(&v, 8).map_err(|_| {
                    bad(format!("`tmpfs-mode` expects an octal mode, found `{v}`"))
                })?);
            }
            "consistency" | "bind-propagation" | "volume-nocopy" | "bind-nonrecursive" => {}
            other => return Err(bad(format!("unknown mount field `{other}`"))),
        }
    }
    let target = target
        .filter(|t| !t.is_empty())
        .ok_or_else(|| bad("no `target`".to_string()))?;
    let source = source.filter(|s| !s.is_empty());
    if kind == MountKind::Bind && source.is_none() {
        return Err(bad("a bind mount needs a `source`".to_string()));
    }
    let source = match kind {
        MountKind::Tmpfs if tmpfs_size.is_some() || tmpfs_mode.is_some() => {
            Some(tmpfs_mount_source(tmpfs_size.unwrap_or(0), tmpfs_mode))
        }
        MountKind::Tmpfs => None,
        _ => source,
    };
    Ok(Mount {
        kind,
        source,
        target,
        read_only,
    })
}

/// A [`Mount`] in Docker's `--mount` syntax, the inverse of [`parse_mount`]: for the places
/// that need the text (a configuration's `workspaceMount` as the reference reads it, a
/// `--mount` flag). A field holding a comma or a double quote is quoted CSV-style
/// (`"source=a,b"`, inner quotes doubled), as Docker's parser expects.
pub fn mount_string(mount: &Mount) -> String {
    let field = |key: &str, value: &str| {
        let kv = format!("{key}={value}");
        if kv.contains(',') || kv.contains('"') {
            format!("\"{}\"", kv.replace('"', "\"\""))
        } else {
            kv
        }
    };
    let mut fields = vec![format!("type={}", mount.kind.as_str())];
    match (mount.kind, mount.source.as_deref()) {
        (MountKind::Tmpfs, Some(source)) => {
            fields.extend(tmpfs_mount_size(source).map(|s| format!("tmpfs-size={s}")));
            fields.extend(tmpfs_mount_mode(source).map(|m| format!("tmpfs-mode={m:o}")));
        }
        (_, Some(source)) => fields.push(field("source", source)),
        (_, None) => {}
    }
    fields.push(field("target", &mount.target));
    if mount.read_only {
        fields.push("readonly".to_string());
    }
    fields.join(",")
}

/// The `source` of a tmpfs [`Mount`]: `size=<bytes>[,mode=<octal>]` (`size=0`: the engine's
/// default, unbounded).
pub fn tmpfs_mount_source(size_bytes: i64, mode: Option<u32>) -> String {
    match mode {
        Some(mode) => format!("size={size_bytes},mode={mode:o}"),
        None => format!("size={size_bytes}"),
    }
}

/// The size in bytes a tmpfs [`Mount`]'s `source` names (`None` when it names none or `0`).
pub fn tmpfs_mount_size(source: &str) -> Option<i64> {
    tmpfs_field(source, "size")
        .and_then(|v| v.parse().ok())
        .filter(|s| *s > 0)
}

/// The mode a tmpfs [`Mount`]'s `source` names.
pub fn tmpfs_mount_mode(source: &str) -> Option<u32> {
    tmpfs_field(source, "mode").and_then(|v| u32::from_str_radix(v, 8).ok())
}

fn tmpfs_field<'a>(source: &'a str, key: &str) -> Option<&'a str> {
    source
        .split(',')
        .find_map(|f| f.split_once('=').filter(|(k, _)| *k == key).map(|(_, v)| v))
}

/// Converts one devcontainer.json / Feature `mounts` element: a string in `--mount` syntax
/// ([`parse_mount`]) or a Mount object `{ "type": "bind" | "volume", "source"?, "target" }`
/// (`src`/`dst`/`destination` accepted as in strings; `external` and other keys ignored, as the
/// reference CLI does). Spec: [`mounts`](https://containers.dev/implementors/json_reference/#general-properties).
///
/// Errors: [`EngineError::InvalidMount`] naming the element.
pub fn mount_from_json(value: &serde_json::Value) -> Result<Mount> {
    use serde_json::Value;
    let obj = match value {
        Value::String(s) => return parse_mount(s),
        Value::Object(obj) => obj,
        other => {
            return Err(EngineError::InvalidMount {
                spec: other.to_string(),
                message: "expected a string or an object".to_string(),
            });
        }
    };
    let field = |names: &[&str]| {
        obj.iter()
            .find(|(k, _)| names.contains(&k.to_ascii_lowercase().as_str()))
            .and_then(|(_, v)| v.as_str())
            .map(str::to_string)
    };
    let bad = |message: &str| EngineError::InvalidMount {
        spec: value.to_string(),
        message: message.to_string(),
    };
    let kind = match field(&["type"]).as_deref() {
        Some("bind") => MountKind::Bind,
        Some("volume") | None => MountKind::Volume,
        Some("tmpfs") => MountKind::Tmpfs,
        Some(_) => return Err(bad("unsupported mount `type`")),
    };
    let target = field(&["target", "dst", "destination"])
        .filter(|t| !t.is_empty())
        .ok_or_else(|| bad("no `target`"))?;
    let source = field(&["source", "src"]).filter(|s| !s.is_empty());
    if kind == MountKind::Bind && source.is_none() {
        return Err(bad("a bind mount needs a `source`"));
    }
    let read_only = obj
        .iter()
        .find(|(k, _)| matches!(k.to_ascii_lowercase().as_str(), "readonly" | "ro"))
        .is_some_and(|(_, v)| v.as_bool() == Some(true) || v.as_str() == Some("true"));
    Ok(Mount {
        kind,
        source: if kind == MountKind::Tmpfs {
            None
        } else {
            source
        },
        target,
        read_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    fn map(a: &[&str]) -> Result<ContainerSpec> {
        let mut spec = ContainerSpec::default();
        apply_run_args(&mut spec, &args(a), &|k| {
            (k == "HOSTVAR").then(|| "hv".to_string())
        })?;
        Ok(spec)
    }

    #[test]
    fn both_value_forms_are_accepted() {
        let s = map(&[
            "--cap-add",
            "SYS_PTRACE",
            "--cap-add=NET_ADMIN",
            "--security-opt",
            "seccomp=unconfined",
            "--net=host",
            "-e",
            "A=1",
            "-eB=2",
            "-e=C=3",
            "--env",
            "HOSTVAR",
            "--env=MISSING",
            "-l",
            "k=v",
            "--label=flag",
        ])
        .unwrap();
        assert_eq!(s.cap_add, ["SYS_PTRACE", "NET_ADMIN"]);
        assert_eq!(s.security_opt, ["seccomp=unconfined"]);
        assert_eq!(s.network_mode.as_deref(), Some("host"));
        let env: Vec<_> = s.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(env, ["A=1", "B=2", "C=3", "HOSTVAR=hv"]);
        assert_eq!(s.labels.get("k").map(String::as_str), Some("v"));
        assert_eq!(s.labels.get("flag").map(String::as_str), Some(""));
    }

    #[test]
    fn scalars_and_booleans() {
        let s = map(&[
            "--name",
            "c1",
            "-h",
            "box",
            "--init",
            "--privileged",
            "--read-only=true",
            "-u",
            "1000:1000",
            "--cap-drop",
            "ALL",
            "--add-host",
            "db:10.0.0.2",
            "--add-host=cache=10.0.0.3",
        ])
        .unwrap();
        assert_eq!(s.name.as_deref(), Some("c1"));
        assert_eq!(s.hostname.as_deref(), Some("box"));
        assert_eq!(s.init, Some(true));
        assert!(s.privileged && s.read_only_rootfs);
        assert_eq!(s.user.as_deref(), Some("1000:1000"));
        assert_eq!(s.cap_drop, ["ALL"]);
        assert_eq!(s.extra_hosts, ["db:10.0.0.2", "cache:10.0.0.3"]);
        let s = map(&["--privileged=false", "--init=0"]).unwrap();
        assert!(!s.privileged);
        assert_eq!(s.init, Some(false));
    }

    #[test]
    fn limits_and_sizes() {
        let s = map(&[
            "--memory",
            "4g",
            "--cpus=1.5",
            "--pids-limit",
            "100",
            "--shm-size=64m",
            "--ulimit",
            "nofile=1024:2048",
            "--ulimit=core=0",
        ])
        .unwrap();
        assert_eq!(s.limits.memory_bytes, Some(4 << 30));
        assert_eq!(s.limits.nano_cpus, Some(1_500_000_000));
        assert_eq!(s.limits.pids, Some(100));
        assert_eq!(s.shm_size, Some(64 << 20));
        assert_eq!(
            s.ulimits[0],
            Ulimit {
                name: "nofile".into(),
                soft: 1024,
                hard: 2048
            }
        );
        assert_eq!(s.ulimits[1].hard, 0);
        assert_eq!(
            map(&["-m", "512m"]).unwrap().limits.memory_bytes,
            Some(512 << 20)
        );
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("65536").unwrap(), 65536);
        assert_eq!(parse_size("2kb").unwrap(), 2048);
        assert!(parse_size("4x").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn mounts_volumes_tmpfs_devices_ports() {
        let s = map(&[
            "-v",
            "/host/data:/data:ro",
            "--volume=cache:/cache",
            "-v",
            "/anon",
            "--mount",
            "type=bind,source=/h,target=/c,readonly",
            "--tmpfs",
            "/scratch:size=64m",
            "--device=/dev/fuse",
            "--device",
            "/dev/sda:/dev/xvda:r",
            "-p",
            "8080:80",
            "--publish=127.0.0.1:5432:5432/udp",
            "-p",
            "3000",
        ])
        .unwrap();
        assert_eq!(
            s.mounts[0],
            Mount {
                kind: MountKind::Bind,
                source: Some("/host/data".into()),
                target: "/data".into(),
                read_only: true
            }
        );
        assert_eq!(s.mounts[1].kind, MountKind::Volume);
        assert_eq!(s.mounts[2].source, None);
        assert_eq!(s.mounts[3].target, "/c");
        assert!(s.mounts[3].read_only);
        assert_eq!(
            s.tmpfs.get("/scratch").map(String::as_str),
            Some("size=64m")
        );
        assert_eq!(s.devices[0].container_path, "/dev/fuse");
        assert_eq!(s.devices[1].permissions, "r");
        assert_eq!(s.ports[0].host_port, Some(8080));
        assert_eq!(s.ports[1].host_ip.as_deref(), Some("127.0.0.1"));
        assert_eq!(s.ports[1].protocol, "udp");
        assert_eq!(
            s.ports[2],
            PortBinding {
                container_port: 3000,
                protocol: "tcp".into(),
                host_ip: None,
                host_port: None
            }
        );
    }

    #[test]
    fn unknown_flags_and_bare_arguments_are_errors_naming_them() {
        for (a, named) in [
            (vec!["-it"], "-it"),
            (vec!["ubuntu"], "ubuntu"),
            (vec!["--ipc=host"], "--ipc"),
        ] {
            let err = map(&a).unwrap_err();
            assert!(
                matches!(err, EngineError::UnsupportedRunArg { .. }),
                "{err}"
            );
            assert!(err.to_string().contains(&format!("`{named}`")), "{err}");
        }
    }

    /// `--gpus all` and CDI's `--device nvidia.com/gpu=all` are the configuration's GPU
    /// request (spec-note 0646): read by [`gpu_run_arg`], nothing in the spec (the GPU comes
    /// only through the settled, judged request); a part of the GPUs is refused clearly.
    #[test]
    fn a_gpu_in_run_args_is_the_gpu_request_and_changes_nothing_here() {
        for (a, asked) in [
            (vec!["--gpus", "all"], "--gpus all"),
            (vec!["--gpus=all"], "--gpus all"),
            (vec!["--gpus", "\"all\""], "--gpus \"all\""),
            (
                vec!["--device", "nvidia.com/gpu=all"],
                "--device nvidia.com/gpu=all",
            ),
            (
                vec!["--init", "--device=nvidia.com/gpu=all"],
                "--device nvidia.com/gpu=all",
            ),
        ] {
            let owned: Vec<String> = a.iter().map(|s| s.to_string()).collect();
            assert_eq!(gpu_run_arg(&owned).as_deref(), Some(asked), "{a:?}");
            let s = map(&a).unwrap();
            assert_eq!(s.gpu, None, "{a:?}");
            assert!(s.devices.is_empty(), "{a:?}");
        }
        for a in [
            vec!["--gpus", "1"],
            vec!["--gpus", "device=0"],
            vec!["--device", "nvidia.com/gpu=0"],
        ] {
            let err = map(&a).unwrap_err();
            assert!(
                err.to_string().contains("every GPU or none"),
                "{a:?}: {err}"
            );
        }
        // a value that only looks like the flag, another CDI device, no GPU
        for a in [
            vec!["--label", "--gpus"],
            vec!["--device", "/dev/fuse"],
            vec!["--env", "X=--device nvidia.com/gpu=all"],
        ] {
            let owned: Vec<String> = a.iter().map(|s| s.to_string()).collect();
            assert_eq!(gpu_run_arg(&owned), None, "{a:?}");
        }
        let err = map(&["--device", "example.com/fpga=all"]).unwrap_err();
        assert!(err.to_string().contains("absolute device paths"), "{err}");
    }

    #[test]
    fn namespace_sharing_and_publish_all_flags_are_refused_in_every_spelling() {
        // Other namespaces than the network's cannot be mapped, so none reaches the engine
        // (spec-note 0430); `-P` would publish every exposed port on every host interface.
        for flag in ["pid", "ipc", "uts", "userns", "cgroupns"] {
            for value in ["host", "container:victim"] {
                for a in [
                    vec![format!("--{flag}"), value.to_string()],
                    vec![format!("--{flag}={value}")],
                ] {
                    let a: Vec<&str> = a.iter().map(String::as_str).collect();
                    let err = map(&a).unwrap_err();
                    assert!(
                        err.to_string().contains(&format!("`--{flag}`")),
                        "{a:?}: {err}"
                    );
                }
            }
        }
        for a in [
            vec!["-P"],
            vec!["--publish-all"],
            vec!["--publish-all=true"],
        ] {
            assert!(
                matches!(map(&a), Err(EngineError::UnsupportedRunArg { .. })),
                "{a:?}"
            );
        }
        // Every spelling of the network flag lands in `network_mode`, judged by the policy.
        for a in [
            vec!["--network", "container:victim"],
            vec!["--network=container:victim"],
            vec!["--net", "container:victim"],
            vec!["--net=container:victim"],
        ] {
            assert_eq!(
                map(&a).unwrap().network_mode.as_deref(),
                Some("container:victim"),
                "{a:?}"
            );
        }
    }

    #[test]
    fn tmpfs_mounts_keep_their_size_and_mode() {
        let m = parse_mount("type=tmpfs,target=/x,tmpfs-size=64m,tmpfs-mode=1770").unwrap();
        let source = m.source.unwrap();
        assert_eq!(source, format!("size={},mode=1770", 64 << 20));
        assert_eq!(tmpfs_mount_size(&source), Some(64 << 20));
        assert_eq!(tmpfs_mount_mode(&source), Some(0o1770));
        let m = parse_mount("type=tmpfs,target=/x").unwrap();
        assert_eq!(m.source, None);
        let m = parse_mount("type=tmpfs,target=/x,source=/etc").unwrap();
        assert_eq!(m.source, None, "a tmpfs has no host source");
        assert!(parse_mount("type=tmpfs,target=/x,tmpfs-size=lots").is_err());
        assert!(parse_mount("type=tmpfs,target=/x,tmpfs-mode=9").is_err());
    }

    #[test]
    fn missing_or_bad_values_are_errors() {
        for a in [
            vec!["--cap-add"],
            vec!["--memory", "lots"],
            vec!["--cpus=-1"],
            vec!["--pids-limit", "x"],
            vec!["--add-host", "nohost"],
            vec!["-p", "80-90:80-90"],
            vec!["--ulimit", "nofile"],
            vec!["--privileged=maybe"],
            vec!["--tmpfs", "rel"],
            vec!["-v", "./rel:/x"],
        ] {
            assert!(map(&a).is_err(), "{a:?} should fail");
        }
    }

    #[test]
    fn mount_json_elements() {
        use serde_json::json;
        let m = mount_from_json(&json!("type=bind,src=/a,dst=/b")).unwrap();
        assert_eq!((m.kind, m.target.as_str()), (MountKind::Bind, "/b"));
        let m = mount_from_json(&json!({"type": "volume", "source": "dind-${devcontainerId}", "target": "/var/lib/docker", "external": true})).unwrap();
        assert_eq!(m.source.as_deref(), Some("dind-${devcontainerId}"));
        assert_eq!(m.kind, MountKind::Volume);
        assert!(mount_from_json(&json!({"type": "bind", "target": "/x"})).is_err());
        assert!(mount_from_json(&json!({"type": "bind", "source": "/x"})).is_err());
        assert!(mount_from_json(&json!(42)).is_err());
    }

    /// `mount_string` writes what `parse_mount` reads back unchanged, awkward paths included.
    #[test]
    fn a_mount_string_parses_back_to_its_mount() {
        let bind = Mount {
            kind: MountKind::Bind,
            source: Some("/w/a,b \"c\"".into()),
            target: "/workspaces/a,b".into(),
            read_only: true,
        };
        assert_eq!(
            mount_string(&bind),
            r#"type=bind,"source=/w/a,b ""c""","target=/workspaces/a,b",readonly"#
        );
        for mount in [
            bind,
            Mount {
                kind: MountKind::Volume,
                source: None,
                target: "/data".into(),
                read_only: false,
            },
            parse_mount("type=tmpfs,target=/t,tmpfs-size=1m,tmpfs-mode=1777").unwrap(),
            parse_mount("type=bind,source=/w,target=/workspaces/w").unwrap(),
        ] {
            assert_eq!(parse_mount(&mount_string(&mount)).unwrap(), mount);
        }
        assert_eq!(
            mount_string(&parse_mount("type=bind,source=/w,target=/workspaces/w").unwrap()),
            "type=bind,source=/w,target=/workspaces/w"
        );
    }

    #[test]
    fn mount_string_parser() {
        let m = parse_mount("source=/ws/.cache,target=/home/u/.cache,type=bind,consistency=cached")
            .unwrap();
        assert_eq!(m.kind, MountKind::Bind);
        assert_eq!(m.source.as_deref(), Some("/ws/.cache"));
        assert!(!m.read_only);
        let m = parse_mount("src=vol1,dst=/data,ro=true").unwrap();
        assert_eq!(m.kind, MountKind::Volume);
        assert!(m.read_only);
        let m = parse_mount("type=tmpfs,destination=/t,tmpfs-size=1m").unwrap();
        assert_eq!(
            (m.kind, m.source.as_deref()),
            (MountKind::Tmpfs, Some("size=1048576"))
        );
        let m = parse_mount(r#""source=/a,b",target=/x,type=bind"#).unwrap();
        assert_eq!(m.source.as_deref(), Some("/a,b"));
        assert!(parse_mount("source=/a,type=bind").is_err());
        assert!(parse_mount("type=bind,target=/x").is_err());
        assert!(parse_mount("type=npipe,target=/x").is_err());
        let err = parse_mount("target=/x,bogus=1").unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
        assert!(parse_mount(r#"target="/x"#).is_err());
    }
}
