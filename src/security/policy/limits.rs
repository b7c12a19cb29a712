//! Resource limits under `hardened`: the profile's limits, or the configuration's when lower
//! (spec-note 0085), and the memory-backed file systems (`/dev/shm`, every tmpfs) they bound
//! (spec-notes 0082, 0432).

use crate::engine::{ContainerSpec, Limits, MountKind};
use crate::security::profile::ProfileLimits;

use crate::security::permissions::Permission;

/// tmpfs paths `hardened` always adds (with the remote user's home, [`HOME_TMPFS_SIZE`]).
///
/// Each has an explicit `size`, so temporary storage is bounded per mount (a full tmpfs gives
/// `ENOSPC`) and not only by the memory limit its pages are charged to (the Grove RFC's
/// "bounded temporary storage"; spec-note 0082).
pub const HARDENED_TMPFS: &[(&str, &str)] = &[
    ("/tmp", "rw,nosuid,nodev,exec,size=1g,mode=1777"),
    ("/var/tmp", "rw,nosuid,nodev,exec,size=1g,mode=1777"),
    ("/run", "rw,nosuid,nodev,size=64m,mode=755"),
];

/// `size` of the tmpfs `hardened` puts on the remote user's home.
pub const HOME_TMPFS_SIZE: &str = "2g";

/// The request a per-process limit (`--ulimit`, Compose `ulimits`) is when it lets an
/// unprivileged process do what the profile's limits do not bound (spec-note 0400, attacks):
/// `rtprio` above 0 (real-time scheduling without `CAP_SYS_NICE`: the CPU limit does not
/// throttle a real-time task, so one busy loop takes a host CPU) and `nice` above 20 (a
/// priority above the default, over the host's own processes). `soft` and `hard` as the
/// engine takes them (`-1`: unlimited); the higher decides.
pub fn ulimit_permission(name: &str, soft: i64, hard: i64) -> Option<Permission> {
    let high = if soft < 0 || hard < 0 {
        i64::MAX
    } else {
        soft.max(hard)
    };
    let beyond = match name {
        "rtprio" => high > 0,
        "nice" => high > 20,
        _ => false,
    };
    let shown = if high == i64::MAX {
        "unlimited".to_string()
    } else {
        high.to_string()
    };
    beyond.then(|| Permission::RuntimeOption(format!("ulimit.{name}={shown}")))
}

/// The profile's limits, or the configuration's when it asks for less (spec-note 0085).
pub(super) fn clamp_limits(requested: Limits, profile: ProfileLimits) -> Limits {
    let min = |r: Option<i64>, p: i64| Some(r.filter(|r| *r > 0 && *r < p).unwrap_or(p));
    Limits {
        pids: min(requested.pids, profile.pids),
        memory_bytes: min(requested.memory_bytes, profile.memory_bytes),
        nano_cpus: min(requested.nano_cpus, profile.nano_cpus),
    }
}

/// `size` `hardened` gives a requested tmpfs that names none (the profile's `/tmp` size),
/// before the memory limit bounds it (spec-note 0432).
pub const DEFAULT_TMPFS_BYTES: i64 = 1 << 30;

/// Bounds what lives in memory by the container's memory limit (spec-note 0432): `/dev/shm`
/// (`--shm-size`) and every tmpfs (`--tmpfs`, `--mount type=tmpfs`, the profile's own) get a
/// `size` of at most `spec.limits.memory_bytes`; a tmpfs without one gets
/// [`DEFAULT_TMPFS_BYTES`] (or the limit when lower). Larger requests are clamped, like limits
/// (spec-note 0085): raising them is the user's setting, not the repository's.
pub(super) fn bound_memory_filesystems(spec: &mut ContainerSpec) {
    let Some(max) = spec.limits.memory_bytes.filter(|m| *m > 0) else {
        return;
    };
    if let Some(shm) = spec.shm_size.as_mut() {
        *shm = (*shm).clamp(0, max);
    }
    for opts in spec.tmpfs.values_mut() {
        *opts = bound_tmpfs_options(opts, max);
    }
    for m in spec
        .mounts
        .iter_mut()
        .filter(|m| m.kind == MountKind::Tmpfs)
    {
        let size = m
            .source
            .as_deref()
            .and_then(crate::engine::run_args::tmpfs_mount_size)
            .unwrap_or(DEFAULT_TMPFS_BYTES);
        let mode = m
            .source
            .as_deref()
            .and_then(crate::engine::run_args::tmpfs_mount_mode);
        m.source = Some(crate::engine::run_args::tmpfs_mount_source(
            size.min(max),
            mode,
        ));
    }
}

/// tmpfs mount options (`rw,size=100g,mode=1777`) with `size` (or `nr_blocks`) replaced by one
/// of at most `max` bytes; a size the kernel takes relative to RAM (`50%`) or cannot be read
/// counts as `max`.
pub fn bound_tmpfs_options(opts: &str, max: i64) -> String {
    let mut size: Option<i64> = None;
    let mut out: Vec<String> = Vec::new();
    let mut at = None;
    for opt in opts.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let asked = match opt.split_once('=') {
            Some(("size", v)) => tmpfs_size_bytes(v),
            Some(("nr_blocks", v)) => tmpfs_size_bytes(v).and_then(|b| b.checked_mul(4096)),
            _ => {
                out.push(opt.to_string());
                continue;
            }
        };
        // The last one wins, as for `mount`; it stays where the first one was.
        size = Some(asked.unwrap_or(max));
        at.get_or_insert(out.len());
    }
    let size = format!(
        "size={}",
        human_size(size.unwrap_or(DEFAULT_TMPFS_BYTES).clamp(0, max))
    );
    out.insert(at.unwrap_or(out.len()), size);
    out.join(",")
}

/// A tmpfs `size=` value in bytes: a number with an optional `k`, `m`, `g`, `t`, `p`, `e`
/// suffix (powers of 1024, as `mount -t tmpfs` reads it); `None` for `%` or anything else.
pub(super) fn tmpfs_size_bytes(text: &str) -> Option<i64> {
    let t = text.trim().to_ascii_lowercase();
    let (num, mult) = match t.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => {
            let exp = "kmgtpe".find(c)? as u32 + 1;
            (&t[..i], 1024_i64.checked_pow(exp)?)
        }
        _ => (t.as_str(), 1),
    };
    num.parse::<i64>()
        .ok()?
        .checked_mul(mult)
        .or(Some(i64::MAX))
}

/// Bytes as the largest exact tmpfs unit: `1g`, `64m`, `12k`, `1000`.
pub(super) fn human_size(bytes: i64) -> String {
    for (unit, shift) in [("g", 30), ("m", 20), ("k", 10)] {
        if bytes > 0 && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}
