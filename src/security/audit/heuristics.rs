//! The audit's judgement of names, values and paths, independent of any one control: which
//! environment variable names and values look like credentials, which image references are
//! pinned, and the host folders (credentials, browser profiles, caches, broad system folders)
//! the controls look for in mount sources, compared by path components.

use std::path::{Component, Path};

/// Whether `reference` names an image by registry digest (`<repository>@sha256:<64 hex>`): a
/// pin any machine can pull.
pub fn is_digest_pinned(reference: &str) -> bool {
    reference
        .rsplit_once("@sha256:")
        .is_some_and(|(repo, hex)| !repo.is_empty() && is_sha256_hex(hex))
}

/// Whether `reference` is a local image ID (`sha256:<64 hex>`): exact on this engine, but not
/// something another machine can pull.
pub fn is_image_id(reference: &str) -> bool {
    reference.strip_prefix("sha256:").is_some_and(is_sha256_hex)
}

/// Whether `text` is 64 lower-case hex digits: a sha256 in the form the engine writes it
/// (image ids, anonymous volumes' names).
pub fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Capabilities that let a process escape to, or control, the host (critical).
pub(super) const CRITICAL_CAPS: &[&str] = &[
    "SYS_ADMIN",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_PTRACE",
    "DAC_READ_SEARCH",
    "SYS_BOOT",
    "BPF",
    "MAC_ADMIN",
    "MAC_OVERRIDE",
    "PERFMON",
];

/// Whether an environment variable name looks like a credential: a `_`/`-`-separated segment is
/// `AUTH`/`OAUTH`/`PAT`/`APIKEY`/…, ends in `AUTH`, or the name contains `TOKEN`, `SECRET`,
/// `PASSWORD`, `PASSWD`, `CREDENTIAL`, `API_KEY`, `ACCESS_KEY`, `PRIVATE_KEY` or `SECRET_KEY`.
pub fn is_credential_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    const SUBSTRINGS: &[&str] = &[
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "API_KEY",
        "APIKEY",
        "ACCESS_KEY",
        "PRIVATE_KEY",
        "SECRET_KEY",
        "CLIENT_KEY",
    ];
    if SUBSTRINGS.iter().any(|s| upper.contains(s)) {
        return true;
    }
    upper.split(['_', '-']).any(|seg| {
        matches!(seg, "AUTH" | "OAUTH" | "PAT" | "PASS" | "PWD") && upper != "PWD"
            || (seg.ends_with("AUTH") && seg.len() > 4)
    })
}

/// Whether a value looks like a long-lived token: a known provider prefix followed by at least
/// 16 more characters, or a PEM private key.
pub(super) fn looks_like_token(value: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "glpat-",
        "sk-",
        "sk_live_",
        "rk_live_",
        "xoxb-",
        "xoxp-",
        "xoxa-",
        "AKIA",
        "ASIA",
        "AIza",
        "npm_",
        "pypi-",
        "hf_",
        "dop_v1_",
    ];
    let v = value.trim();
    if v.contains("-----BEGIN") && v.contains("PRIVATE KEY") {
        return true;
    }
    PREFIXES
        .iter()
        .any(|p| v.starts_with(p) && v.len() >= p.len() + 16 && !v.contains(char::is_whitespace))
}

/// Credential folders and files relative to a home folder (long-lived host secrets).
pub(super) const CREDENTIAL_DIRS: &[&str] = &[
    ".ssh",
    ".aws",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".gnupg",
    ".azure",
    ".config/gh",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".password-store",
    ".terraform.d",
    ".config/hub",
    ".vault-token",
];

/// File names that hold a single credential (task credentials: weak, not critical).
pub(super) const CREDENTIAL_FILES: &[&str] = &[
    "auth.json",
    "credentials",
    "credentials.json",
    "token",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
];

/// Browser and mail profile folders relative to a home folder.
pub(super) const BROWSER_DIRS: &[&str] = &[
    ".config/google-chrome",
    ".config/google-chrome-beta",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".config/opera",
    ".mozilla",
    ".thunderbird",
    "snap/firefox",
    "snap/chromium",
    ".var/app/org.mozilla.firefox",
    ".var/app/com.google.Chrome",
    ".var/app/org.chromium.Chromium",
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Firefox",
];

/// Package and build cache folders, relative to a home folder or anywhere in a path.
pub(super) const CACHE_DIRS: &[&str] = &[
    ".cache",
    ".npm",
    ".pnpm-store",
    ".yarn",
    ".cargo/registry",
    ".cargo/git",
    ".m2",
    ".gradle",
    "go/pkg/mod",
    ".nuget/packages",
    ".gem",
    ".bundle",
    ".composer",
    ".ivy2",
    ".sbt",
    ".ccache",
    ".local/share/pnpm",
    ".local/share/uv",
    "var/cache/apt",
    "cargo/registry",
];

/// Host folders too broad to mount (each exposes far more than a repository).
pub(super) const BROAD_DIRS: &[&str] = &[
    "/",
    "/etc",
    "/var",
    "/usr",
    "/opt",
    "/srv",
    "/run",
    "/var/run",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/lib",
    "/lib64",
    "/bin",
    "/sbin",
    "/tmp",
    "/mnt",
    "/media",
    "/var/lib",
    "/home",
    "/Users",
    "/root",
    "/var/lib/docker",
    "/var/lib/containerd",
    "/var/lib/containers",
];

/// Host paths whose write access controls the host kernel or engine.
pub(super) const HOST_CONTROL_DIRS: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/lib/modules",
    "/var/lib/docker",
    "/var/lib/containerd",
    "/var/lib/containers",
];

pub(super) fn components(p: &str) -> Vec<String> {
    Path::new(p)
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

/// Whether `path` contains `rel` (a relative path like `.config/gcloud`) as consecutive
/// components, and where it ends: `Some(true)` when `rel` is the last part (the folder itself),
/// `Some(false)` when `path` is inside it.
pub(super) fn contains_rel(path: &str, rel: &str) -> Option<bool> {
    let p = components(path);
    let r = components(rel);
    if r.is_empty() || p.len() < r.len() {
        return None;
    }
    let mut found = None;
    for i in 0..=(p.len() - r.len()) {
        if p[i..i + r.len()] == r[..] {
            found = Some(i + r.len() == p.len());
        }
    }
    found
}

pub(super) fn same(a: &str, b: &Path) -> bool {
    components(a) == components(&b.to_string_lossy())
}

/// `a` is a strict ancestor of `b`.
pub(super) fn ancestor_of(a: &str, b: &Path) -> bool {
    let ca = components(a);
    let cb = components(&b.to_string_lossy());
    ca.len() < cb.len() && cb[..ca.len()] == ca[..]
}

pub(super) fn within(a: &str, b: &Path) -> bool {
    let ca = components(a);
    let cb = components(&b.to_string_lossy());
    ca.len() >= cb.len() && ca[..cb.len()] == cb[..]
}

pub(super) fn matches_any(p: &str, list: &[&str]) -> Option<(String, bool)> {
    list.iter()
        .find_map(|rel| contains_rel(p, rel).map(|end| (rel.to_string(), end)))
}

pub(super) fn is_anonymous_volume(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

pub(super) fn is_proxy_name(n: &str) -> bool {
    matches!(
        n.to_ascii_uppercase().as_str(),
        "HTTP_PROXY" | "HTTPS_PROXY" | "ALL_PROXY"
    )
}

/// A Feature referenced by a relative path (`./name`, `../name`): part of the configuration.
pub(super) fn is_local_feature(id: &str) -> bool {
    id.starts_with("./") || id.starts_with("../")
}
