//! L3: `devcell audit --probe`: the audit's questions asked from inside the running container.
//!
//! [`PROBE_SCRIPT`] is a POSIX `sh` script (busybox `sh` is enough; it also uses `cat`, `tr`,
//! `sed`, `grep -E`, `rm`) that prints facts as `key=value` lines: its uid/gid and capability
//! sets (`/proc/self/status`), `NoNewPrivs`, the seccomp mode, every `/proc/self/mountinfo`
//! line, which directories outside the workspace it can write (it creates a temporary file with
//! `set -C`, so never overwrites one, and removes it), which engine or display sockets exist,
//! host devices, whether the host's PID namespace is visible, the cgroup pids/memory/CPU limits,
//! the names of its environment variables (never values; only a flag when a value looks like a
//! token), and its network interfaces. Run it with [`probe_command`] through the engine's exec.
//!
//! [`parse_probe_output`] reads that output into [`ProbeFacts`]; [`ProbeFacts::to_container_facts`]
//! maps it onto the same neutral [`ContainerFacts`] the engine-based audit uses, so
//! [`audit_probe`] scores the same eight controls with the same rules (spec-note 0148).

use serde::{Deserialize, Serialize};

use super::audit::{
    AuditContext, AuditError, AuditReport, ContainerFacts, DeviceFact, EnvFact, FactsSource,
    MountFact, MountKind, Seccomp, audit, caps_from_mask,
};

/// The probe script. Argument `$1`: the workspace folder inside the container (default
/// `/workspace`); it and its subfolders are not write-tested. Output: one `key=value` per line,
/// starting with `devcell_probe=1`. It never prints an environment variable value.
pub const PROBE_SCRIPT: &str = r#"ws="${1:-/workspace}"
echo "devcell_probe=1"
echo "workspace=$ws"
while IFS= read -r l; do
  case "$l" in
    Uid:*|Gid:*|Cap*:*|NoNewPrivs:*|Seccomp:*) printf 'status=%s\n' "$l" ;;
  esac
done < /proc/self/status
while IFS= read -r l; do printf 'mountinfo=%s\n' "$l"; done < /proc/self/mountinfo
for a in /proc/self/attr/apparmor/current /proc/self/attr/current; do
  if [ -r "$a" ]; then v=$(cat "$a" 2>/dev/null) && { printf 'apparmor=%s\n' "$v"; break; }; fi
done
probe_write() {
  d=$1
  case "$d" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/pts|/dev/pts/*|/dev/mqueue|/dev/mqueue/*) return ;; esac
  case "$d" in "$ws"|"$ws"/*) return ;; esac
  [ -d "$d" ] || return
  f="$d/.devcell-probe.$$"
  if ( set -C; : > "$f" ) 2>/dev/null; then rm -f "$f"; echo "writable=$d"; fi
}
for d in / /etc /usr /var /root /home /opt /srv /mnt /media /run /var/run /tmp /var/tmp /dev/shm; do probe_write "$d"; done
while read -r _ _ _ _ mp _; do
  probe_write "$mp"
  [ -S "$mp" ] && echo "socket=$mp"
  case "$mp" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue ;; esac
  for s in "$mp"/*.sock "$mp"/*/*.sock "$mp"/.X11-unix/*; do [ -S "$s" ] && echo "socket=$s"; done
done < /proc/self/mountinfo
for s in /var/run/docker.sock /run/docker.sock /run/podman/podman.sock /var/run/podman/podman.sock \
  /run/containerd/containerd.sock /var/run/containerd/containerd.sock /run/crio/crio.sock \
  /run/buildkit/buildkitd.sock /run/user/*/docker.sock /run/user/*/podman/podman.sock /tmp/.X11-unix/*; do
  [ -S "$s" ] && echo "socket=$s"
done
for d in /dev/* /dev/*/*; do
  if [ -b "$d" ]; then echo "blockdev=$d"; elif [ -c "$d" ]; then echo "chardev=$d"; fi
done
c1=$(cat /proc/1/cgroup 2>/dev/null); cs=$(cat /proc/self/cgroup 2>/dev/null)
if [ "$(cat /proc/2/comm 2>/dev/null)" = kthreadd ]; then echo "pid_host=1"
elif [ -n "$c1" ] && [ -n "$cs" ] && [ "$c1" != "$cs" ]; then echo "pid_host=1"
else echo "pid_host=0"; fi
limit() {
  k=$1; shift
  for f in "$@"; do if [ -r "$f" ]; then printf '%s=%s\n' "$k" "$(cat "$f" 2>/dev/null)"; return; fi; done
}
cg=$(sed -n 's/^0:://p' /proc/self/cgroup 2>/dev/null | head -n 1)
v2="/sys/fs/cgroup${cg%/}"
limit pids_max "$v2/pids.max" /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max
limit memory_max "$v2/memory.max" /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes
limit cpu_max "$v2/cpu.max" /sys/fs/cgroup/cpu.max
limit cpu_cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us
limit cpu_cfs_period_us /sys/fs/cgroup/cpu/cpu.cfs_period_us /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us
cat /proc/self/environ 2>/dev/null | tr '\000' '\n' | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/env=\1/p'
cat /proc/self/environ 2>/dev/null | tr '\000' '\n' \
  | grep -E '^[A-Za-z_][A-Za-z0-9_]*=((ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|sk-|sk_live_|rk_live_|xoxb-|xoxp-|xoxa-|AKIA|ASIA|AIza|npm_|pypi-|hf_|dop_v1_)[^[:space:]]{16}|-----BEGIN[A-Z ]*PRIVATE KEY)' \
  | sed 's/=.*//; s/^/env_token=/'
sed -n 's/^ *\([^:| ]*\):.*/netif=\1/p' /proc/net/dev 2>/dev/null
echo "devcell_probe_end=1"
"#;

/// The argv that runs [`PROBE_SCRIPT`] inside a container (for the engine's exec):
/// `sh -c <script> devcell-probe <workspace>`.
pub fn probe_command(container_workspace: &str) -> Vec<String> {
    vec![
        "sh".to_string(),
        "-c".to_string(),
        PROBE_SCRIPT.to_string(),
        "devcell-probe".to_string(),
        container_workspace.to_string(),
    ]
}

/// One `/proc/self/mountinfo` entry, octal escapes decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MountInfo {
    /// Mount point inside the container.
    pub mount_point: String,
    /// Path inside the mounted file system (for a bind: the host path relative to its file
    /// system; for a volume `…/volumes/<name>/_data`).
    pub root: String,
    /// File system type.
    pub fs_type: String,
    /// Mount source (a device, `tmpfs`, `overlay`, …).
    pub source: String,
    /// Per-mount options (`ro`/`rw`, `nosuid`, …).
    pub options: Vec<String>,
}

impl MountInfo {
    /// Mounted read-only.
    pub fn read_only(&self) -> bool {
        self.options.iter().any(|o| o == "ro")
    }
}

/// What the probe reported, parsed. `None` = the probe could not tell.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeFacts {
    /// The workspace folder the probe was given.
    pub workspace: Option<String>,
    /// Effective uid.
    pub uid: Option<u32>,
    /// Effective gid.
    pub gid: Option<u32>,
    /// `CapEff` mask.
    pub cap_eff: Option<u64>,
    /// `CapPrm` mask.
    pub cap_prm: Option<u64>,
    /// `CapBnd` mask (what the container's processes can ever hold).
    pub cap_bnd: Option<u64>,
    /// `NoNewPrivs`.
    pub no_new_privs: Option<bool>,
    /// `Seccomp` mode: 0 none, 1 strict, 2 filter.
    pub seccomp_mode: Option<u8>,
    /// AppArmor label (`unconfined`, `docker-default (enforce)`), when the kernel has one.
    pub apparmor: Option<String>,
    /// Mount table.
    pub mounts: Vec<MountInfo>,
    /// Directories outside the workspace the probe could write.
    pub writable: Vec<String>,
    /// Socket files found (engine sockets, display sockets, sockets in mounted folders).
    pub sockets: Vec<String>,
    /// Block devices and non-standard character devices under `/dev`.
    pub devices: Vec<String>,
    /// The host's PID namespace is visible (`kthreadd`, or PID 1 in another cgroup).
    pub pid_host: Option<bool>,
    /// cgroup `pids.max`.
    pub pids_max: Option<String>,
    /// cgroup `memory.max` / `memory.limit_in_bytes`.
    pub memory_max: Option<String>,
    /// cgroup v2 `cpu.max`.
    pub cpu_max: Option<String>,
    /// cgroup v1 `cpu.cfs_quota_us`.
    pub cpu_cfs_quota_us: Option<String>,
    /// cgroup v1 `cpu.cfs_period_us`.
    pub cpu_cfs_period_us: Option<String>,
    /// Environment variable names.
    pub env_names: Vec<String>,
    /// Names whose value looks like a token.
    pub env_token: Vec<String>,
    /// Network interfaces (`/proc/net/dev`).
    pub net_interfaces: Vec<String>,
    /// The script ran to its last line.
    pub complete: bool,
}

/// Decodes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let n = (bytes[i + 1] - b'0') as u32 * 64
                + (bytes[i + 2] - b'0') as u32 * 8
                + (bytes[i + 3] - b'0') as u32;
            out.push(n as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses one mountinfo line: `id parent major:minor root mountpoint options [optional…] -
/// fstype source superoptions`. `None` when malformed.
pub fn parse_mountinfo_line(line: &str) -> Option<MountInfo> {
    let (head, tail) = line.split_once(" - ")?;
    let f: Vec<&str> = head.split(' ').collect();
    let t: Vec<&str> = tail.split(' ').collect();
    if f.len() < 6 || t.len() < 2 {
        return None;
    }
    Some(MountInfo {
        root: unescape(f[3]),
        mount_point: unescape(f[4]),
        options: f[5].split(',').map(str::to_string).collect(),
        fs_type: t[0].to_string(),
        source: unescape(t[1]),
    })
}

/// Parses the output of [`PROBE_SCRIPT`]. Unknown keys are ignored (newer scripts), blank lines
/// skipped.
///
/// # Errors
/// [`AuditError::NotProbeOutput`] without the `devcell_probe=1` header;
/// [`AuditError::ProbeLine`] for a line that is not `key=value`.
pub fn parse_probe_output(output: &str) -> Result<ProbeFacts, AuditError> {
    let mut p = ProbeFacts::default();
    let mut header = false;
    for (n, raw) in output.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(AuditError::ProbeLine { line: n + 1 });
        };
        let value = value.to_string();
        match key {
            "devcell_probe" => header = value == "1",
            "devcell_probe_end" => p.complete = true,
            "workspace" => p.workspace = Some(value),
            "status" => parse_status(&mut p, &value),
            "mountinfo" => {
                if let Some(m) = parse_mountinfo_line(&value) {
                    p.mounts.push(m);
                }
            }
            "apparmor" => p.apparmor = Some(value.trim().to_string()),
            "writable" => push_unique(&mut p.writable, value),
            "socket" => push_unique(&mut p.sockets, value),
            "blockdev" => push_unique(&mut p.devices, value),
            "chardev" if !is_standard_chardev(&value) => push_unique(&mut p.devices, value),
            "pid_host" => p.pid_host = Some(value == "1"),
            "pids_max" => p.pids_max = Some(value.trim().to_string()),
            "memory_max" => p.memory_max = Some(value.trim().to_string()),
            "cpu_max" => p.cpu_max = Some(value.trim().to_string()),
            "cpu_cfs_quota_us" => p.cpu_cfs_quota_us = Some(value.trim().to_string()),
            "cpu_cfs_period_us" => p.cpu_cfs_period_us = Some(value.trim().to_string()),
            "env" => push_unique(&mut p.env_names, value),
            "env_token" => push_unique(&mut p.env_token, value),
            "netif" => push_unique(&mut p.net_interfaces, value),
            _ => {}
        }
    }
    if !header {
        return Err(AuditError::NotProbeOutput);
    }
    Ok(p)
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

fn is_standard_chardev(path: &str) -> bool {
    let rel = path.strip_prefix("/dev/").unwrap_or(path);
    matches!(
        rel,
        "null"
            | "zero"
            | "full"
            | "random"
            | "urandom"
            | "tty"
            | "console"
            | "ptmx"
            | "stdin"
            | "stdout"
            | "stderr"
            | "core"
    ) || rel.starts_with("pts/")
        || rel.starts_with("fd/")
}

fn parse_status(p: &mut ProbeFacts, line: &str) {
    let Some((k, v)) = line.split_once(':') else {
        return;
    };
    let fields: Vec<&str> = v.split_whitespace().collect();
    let first = fields.first().copied().unwrap_or_default();
    let hex = || u64::from_str_radix(first, 16).ok();
    match k {
        // Real, effective, saved, filesystem: the effective id is the second field.
        "Uid" => p.uid = fields.get(1).and_then(|s| s.parse().ok()),
        "Gid" => p.gid = fields.get(1).and_then(|s| s.parse().ok()),
        "CapEff" => p.cap_eff = hex(),
        "CapPrm" => p.cap_prm = hex(),
        "CapBnd" => p.cap_bnd = hex(),
        "NoNewPrivs" => p.no_new_privs = Some(first == "1"),
        "Seccomp" => p.seccomp_mode = first.parse().ok(),
        _ => {}
    }
}

/// Numeric cgroup limit; `max`, `-1` and values of 2^62 or more (cgroup v1's "unlimited")
/// mean no limit.
fn cgroup_number(v: Option<&str>) -> Option<i64> {
    let n: i64 = v?.trim().parse().ok()?;
    (n > 0 && n < (1i64 << 62)).then_some(n)
}

fn volume_name_from_root(root: &str) -> Option<String> {
    let parts: Vec<&str> = root.split('/').collect();
    let i = parts.iter().rposition(|p| *p == "volumes")?;
    (parts.get(i + 2) == Some(&"_data"))
        .then(|| parts.get(i + 1).map(|s| s.to_string()))
        .flatten()
}

impl ProbeFacts {
    /// Whether the probe could create a file in `/`.
    pub fn root_writable(&self) -> bool {
        self.writable.iter().any(|w| w == "/")
    }

    /// Maps the probe's observations onto [`ContainerFacts`] (source `probe`). Unobservable
    /// facts stay unknown: image, labels, ports, IPC/UTS modes, attached network names.
    ///
    /// Mounts: the root file system gives `read_only_rootfs`; `/proc`, `/sys`, `/dev` and the
    /// engine-managed `/etc/hosts`, `/etc/hostname`, `/etc/resolv.conf` are skipped; `tmpfs` is a
    /// tmpfs; a root under `…/volumes/<name>/_data` is a volume; anything else is a bind whose
    /// source is the mountinfo root (the host path when it lives on the host's root file system).
    pub fn to_container_facts(&self) -> ContainerFacts {
        let mut read_only_rootfs = None;
        let mut mounts = Vec::new();
        for m in &self.mounts {
            let mp = m.mount_point.as_str();
            if mp == "/" {
                read_only_rootfs = Some(m.read_only());
                continue;
            }
            let pseudo = matches!(
                m.fs_type.as_str(),
                "proc" | "sysfs" | "devpts" | "mqueue" | "cgroup" | "cgroup2"
            );
            let under = |p: &str| mp == p || mp.starts_with(&format!("{p}/"));
            let engine_file = matches!(mp, "/etc/hosts" | "/etc/hostname" | "/etc/resolv.conf")
                && m.root.contains("/containers/");
            if pseudo || under("/proc") || under("/sys") || under("/dev") || engine_file {
                continue;
            }
            // A tmpfs mounted whole is container memory; a tmpfs with a deeper root is a bind
            // from a host tmpfs (e.g. a host `/tmp` on tmpfs).
            let (kind, source, volume_name) = if m.fs_type == "tmpfs" && m.root == "/" {
                (MountKind::Tmpfs, None, None)
            } else if let Some(name) = volume_name_from_root(&m.root) {
                (MountKind::Volume, None, Some(name))
            } else {
                (MountKind::Bind, Some(m.root.clone()), None)
            };
            mounts.push(MountFact {
                kind,
                source,
                volume_name,
                target: m.mount_point.clone(),
                read_only: m.read_only(),
            });
        }

        let network_mode = if self.net_interfaces.is_empty() {
            None
        } else if self.net_interfaces.iter().all(|i| i == "lo") {
            Some("none".to_string())
        } else if self
            .net_interfaces
            .iter()
            .any(|i| i == "docker0" || i.starts_with("veth") || i.starts_with("br-"))
        {
            Some("host".to_string())
        } else {
            Some("bridge".to_string())
        };

        let cpu_limit = match self.cpu_max.as_deref() {
            Some(v) => {
                let mut it = v.split_whitespace();
                match (it.next(), it.next()) {
                    (Some(q), Some(p)) => match (q.parse::<f64>(), p.parse::<f64>()) {
                        (Ok(q), Ok(p)) if p > 0.0 => Some(q / p),
                        _ => None,
                    },
                    _ => None,
                }
            }
            None => match (
                cgroup_number(self.cpu_cfs_quota_us.as_deref()),
                cgroup_number(self.cpu_cfs_period_us.as_deref()),
            ) {
                (Some(q), Some(p)) => Some(q as f64 / p as f64),
                _ => None,
            },
        };

        ContainerFacts {
            source: Some(FactsSource::Probe),
            env: self
                .env_names
                .iter()
                .map(|n| EnvFact {
                    name: n.clone(),
                    credential_name: super::audit::is_credential_name(n),
                    token_value: self.env_token.contains(n),
                })
                .collect(),
            mounts,
            capabilities: self.cap_bnd.map(caps_from_mask),
            no_new_privileges: self.no_new_privs,
            seccomp: self.seccomp_mode.map(|m| {
                if m == 0 {
                    Seccomp::Unconfined
                } else {
                    Seccomp::Filtered
                }
            }),
            apparmor_unconfined: self.apparmor.as_deref().map(|a| a == "unconfined"),
            pid_mode: self
                .pid_host
                .map(|h| if h { "host" } else { "private" }.to_string()),
            network_mode,
            devices: self
                .devices
                .iter()
                .map(|d| DeviceFact {
                    host_path: None,
                    container_path: d.clone(),
                })
                .collect(),
            read_only_rootfs,
            pids_limit: cgroup_number(self.pids_max.as_deref()),
            memory_limit: cgroup_number(self.memory_max.as_deref()),
            cpu_limit,
            limits_known: self.pids_max.is_some() || self.memory_max.is_some(),
            user: self.uid.map(|u| u.to_string()),
            uid: self.uid,
            sockets: self.sockets.clone(),
            writable_paths: self.writable.clone(),
            network_interfaces: Some(self.net_interfaces.clone()).filter(|i| !i.is_empty()),
            ..ContainerFacts::default()
        }
    }
}

/// Parses probe output and audits it: the seam for `devcell audit --probe`. `engine` is the
/// container's `docker inspect` JSON, when available.
///
/// # Errors
/// As [`parse_probe_output`] and [`ContainerFacts::from_docker_inspect`].
pub fn audit_probe_output(
    output: &str,
    ctx: &AuditContext,
    engine: Option<&serde_json::Value>,
) -> Result<AuditReport, AuditError> {
    let probe = parse_probe_output(output)?;
    let engine = engine
        .map(ContainerFacts::from_docker_inspect)
        .transpose()?;
    Ok(audit_probe(&probe, ctx, engine.as_ref()))
}

/// Scores the eight controls from what the probe saw inside. With `engine` (the same
/// container's `docker inspect` facts), what a process inside cannot observe (image identity,
/// labels, published ports, IPC/UTS modes, network names, volume names) is taken from it and the
/// report's source is `probe-with-inspect`; without it those facts are unknown, which caps
/// reproducibility and teardown at 1 (spec-note 0148).
pub fn audit_probe(
    probe: &ProbeFacts,
    ctx: &AuditContext,
    engine: Option<&ContainerFacts>,
) -> AuditReport {
    let mut ctx = ctx.clone();
    if ctx.container_workspace.is_none() {
        ctx.container_workspace = probe.workspace.clone();
    }
    let facts = probe.to_container_facts();
    let facts = match engine {
        Some(e) => facts.fill_unobservable_from(e),
        None => facts,
    };
    audit(&facts, &ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::audit::{Control, Risk};
    use crate::security::known::ENGINE_SOCKET_PATHS;

    /// The probe looks for the sockets at every known place, so it agrees with the audit
    /// and the policy on what an engine socket is.
    #[test]
    fn the_probe_looks_at_every_known_socket_path() {
        for p in ENGINE_SOCKET_PATHS {
            assert!(PROBE_SCRIPT.contains(p), "{p}");
        }
    }

    const HARDENED: &str = "devcell_probe=1
workspace=/workspace
status=Uid:\t65534\t65534\t65534\t65534
status=Gid:\t65534\t65534\t65534\t65534
status=CapPrm:\t0000000000000000
status=CapEff:\t0000000000000000
status=CapBnd:\t0000000000000000
status=NoNewPrivs:\t1
status=Seccomp:\t2
mountinfo=72 48 0:39 / / ro,relatime master:2 - overlay overlay rw,lowerdir=/x
mountinfo=73 72 0:42 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
mountinfo=74 72 0:43 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
mountinfo=85 77 0:36 /docker/abc /sys/fs/cgroup/pids ro,nosuid - cgroup cgroup rw,pids
mountinfo=89 72 254:0 /home/me/work/repo /workspace rw,relatime - ext4 /dev/vda rw
mountinfo=90 72 0:48 / /tmp rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw
mountinfo=91 72 254:0 /var/lib/docker/containers/abc/resolv.conf /etc/resolv.conf ro,relatime - ext4 /dev/vda rw
writable=/tmp
chardev=/dev/null
chardev=/dev/pts/ptmx
pid_host=0
pids_max=256
memory_max=536870912
cpu_cfs_quota_us=100000
cpu_cfs_period_us=100000
env=PATH
env=HOME
netif=lo
devcell_probe_end=1
";

    fn ctx() -> AuditContext {
        AuditContext {
            workspace: Some("/home/me/work/repo".into()),
            home: Some("/home/me".into()),
            features_lockfile: Some(true),
            ..AuditContext::default()
        }
    }

    fn report(extra: &str) -> AuditReport {
        let p = parse_probe_output(&format!("{HARDENED}{extra}")).unwrap();
        audit_probe(&p, &ctx(), None)
    }

    #[test]
    fn parses_the_hardened_output() {
        let p = parse_probe_output(HARDENED).unwrap();
        assert_eq!(p.uid, Some(65534));
        assert_eq!(p.cap_bnd, Some(0));
        assert_eq!(p.no_new_privs, Some(true));
        assert_eq!(p.seccomp_mode, Some(2));
        assert_eq!(p.mounts.len(), 7);
        assert!(p.devices.is_empty(), "{:?}", p.devices);
        assert!(p.complete);
        assert!(!p.root_writable());
        let f = p.to_container_facts();
        assert_eq!(f.read_only_rootfs, Some(true));
        assert_eq!(f.mounts.len(), 2, "{:?}", f.mounts);
        assert_eq!(f.cpu_limit, Some(1.0));
        assert_eq!(f.network_mode.as_deref(), Some("none"));
    }

    #[test]
    fn probe_alone_scores_observable_controls_full_and_caps_the_rest() {
        let r = report("");
        // All but reproducibility and teardown, which a probe cannot observe.
        for c in Control::ALL {
            if matches!(c, Control::Reproducibility | Control::Teardown) {
                continue;
            }
            assert_eq!(r.score_of(c), 2, "{c:?}\n{r:#?}");
        }
        assert_eq!(r.score_of(Control::Reproducibility), 1);
        assert_eq!(r.score_of(Control::Teardown), 1);
    }

    #[test]
    fn probe_sees_sockets_caps_pid_host_tokens_and_home() {
        let r = report("socket=/var/run/docker.sock\n");
        assert_eq!(r.score_of(Control::EngineSocket), 0);
        let r = report("status=CapBnd:\t0000000000200000\n");
        assert_eq!(r.score_of(Control::EngineSocket), 0);
        let r = report("pid_host=1\n");
        assert_eq!(r.score_of(Control::EngineSocket), 0);
        let r = report("env=GITHUB_TOKEN\nenv_token=GITHUB_TOKEN\n");
        assert_eq!(r.score_of(Control::SecretBoundary), 0);
        let r = report("blockdev=/dev/sda\n");
        assert_eq!(r.score_of(Control::EngineSocket), 0);
        let r = report("mountinfo=95 72 254:0 /home/me /home/me rw,relatime - ext4 /dev/vda rw\n");
        assert_eq!(r.score_of(Control::RepoScope), 0);
        assert_eq!(r.score_of(Control::SecretBoundary), 0);
        assert_eq!(r.score_of(Control::BrowserIsolation), 0);
        assert_eq!(r.score_of(Control::CachePolicy), 0);
        let r = report("netif=eth0\n");
        assert_eq!(r.score_of(Control::NetworkPolicy), 0);
        let r = report(
            "mountinfo=96 72 254:0 /var/lib/docker/volumes/npm-cache/_data /root/.npm rw - ext4 /dev/vda rw\n",
        );
        let c = r.control(Control::CachePolicy).unwrap();
        assert_eq!(c.score, 1, "{c:?}");
        assert!(
            c.evidence
                .iter()
                .any(|e| e.subject.contains("npm-cache") && e.risk == Risk::Weak)
        );
    }

    #[test]
    fn bad_output_is_an_error() {
        assert!(matches!(
            parse_probe_output("sh: not found\n"),
            Err(AuditError::ProbeLine { line: 1 })
        ));
        assert!(matches!(
            parse_probe_output("uid=0\n"),
            Err(AuditError::NotProbeOutput)
        ));
    }

    #[test]
    fn mountinfo_escapes_and_limits() {
        let m = parse_mountinfo_line("1 2 0:1 /a\\040b /c rw shared:1 - ext4 /dev/x rw").unwrap();
        assert_eq!(m.root, "/a b");
        assert_eq!(m.fs_type, "ext4");
        assert!(parse_mountinfo_line("garbage").is_none());
        assert_eq!(cgroup_number(Some("max")), None);
        assert_eq!(cgroup_number(Some("9223372036854771712")), None);
        assert_eq!(cgroup_number(Some("-1")), None);
        assert_eq!(cgroup_number(Some("256")), Some(256));
        assert_eq!(
            volume_name_from_root("/var/lib/docker/volumes/v1/_data"),
            Some("v1".into())
        );
    }

    #[test]
    fn script_never_prints_values_and_is_posix() {
        // The only lines reading the environment strip everything after `=`.
        for line in PROBE_SCRIPT.lines().filter(|l| l.contains("environ")) {
            assert!(line.contains("tr '\\000' '\\n'"), "{line}");
        }
        assert!(PROBE_SCRIPT.contains("s/=.*//"));
        assert!(!PROBE_SCRIPT.contains("[["), "bashism");
        assert!(!PROBE_SCRIPT.contains("local "), "not POSIX");
        assert_eq!(probe_command("/w")[4], "/w");
    }
}
