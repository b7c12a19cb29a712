//! Shared helpers for integration tests: run the real `devcell` binary on fixtures; Docker
//! engine helpers in [`docker`].

#![allow(dead_code)]

pub mod context;
pub mod deadline;
pub mod docker;
pub mod git;
pub mod hostile;
pub mod measure;
pub mod proxy;
pub mod refcli;
pub mod snapshot;

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;

/// The repository root (where `fixtures/` lives).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `fixtures/<rel>`.
pub fn fixture(rel: &str) -> PathBuf {
    repo().join("fixtures").join(rel)
}

/// A `devcell` command with a clean, fixed environment (`HOME`, `USER`, `PATH` only, and the
/// test run's `DOCKER_HOST` when set: scripts/podman runs the engine tests against Podman).
pub fn devcell() -> Command {
    let mut cmd = Command::cargo_bin("devcell").expect("devcell binary is built");
    cmd.env_clear()
        .env("HOME", "/home/tester")
        .env("USER", "tester")
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    if let Ok(host) = std::env::var("DOCKER_HOST") {
        cmd.env("DOCKER_HOST", host);
    }
    cmd
}

/// Runs `devcell read-configuration --workspace-folder <ws> <extra…>`.
pub fn read_configuration(ws: &Path, extra: &[&str]) -> Output {
    devcell()
        .arg("read-configuration")
        .arg("--workspace-folder")
        .arg(ws)
        .args(extra)
        .output()
        .expect("devcell runs")
}

/// Parses the single JSON line on stdout of a successful run, failing with stderr otherwise.
pub fn stdout_json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "devcell failed ({:?}): {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines().count(),
        1,
        "expected one line on stdout: {text}"
    );
    serde_json::from_str(&text).expect("stdout is JSON")
}

/// The JSON envelope on stdout, whatever the exit status; fails with stdout and stderr when
/// stdout is not one JSON value.
pub fn envelope(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "one JSON object on stdout ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Asserts a failed run: exit code 1, nothing on stdout, no panic; returns stderr.
pub fn assert_failed(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "expected exit 1; stderr: {stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "expected no stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!stderr.contains("panicked"), "devcell panicked: {stderr}");
    stderr
}

pub mod engine;
// ---- OCI registries -------------------------------------------------------------------------

/// The shared local registry (`DEVCELL_TEST_REGISTRY`, plain HTTP). `None` (with a note on
/// stderr) when unset and `DEVCELL_TEST_ENGINE` is not `1`; panics when the engine flag is set
/// but the registry is missing, so CI never skips silently.
#[allow(clippy::print_stderr)]
pub fn test_registry() -> Option<String> {
    match std::env::var("DEVCELL_TEST_REGISTRY") {
        Ok(r) if !r.is_empty() => Some(r),
        _ if std::env::var("DEVCELL_TEST_ENGINE").as_deref() == Ok("1") => {
            panic!("DEVCELL_TEST_ENGINE=1 but DEVCELL_TEST_REGISTRY is not set")
        }
        _ => {
            eprintln!("note: DEVCELL_TEST_REGISTRY unset; skipping registry test");
            None
        }
    }
}

/// A random token of this test process (8 lowercase hex digits), the same for all its calls:
/// not the pid, which two CI jobs in containers on one engine can share.
pub fn run_token() -> &'static str {
    use std::hash::{BuildHasher as _, Hasher as _};
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        format!("{:08x}", h.finish() as u32)
    })
}

/// `<base>-<run token>`: a workspace folder name (and so a Compose project name, which
/// derives from it) that this process alone uses, so runs from two worktrees or two CI jobs
/// on one engine do not collide ("network already exists"). A test's own names differ by
/// `base`.
pub fn per_run(base: &str) -> String {
    format!("{base}-{}", run_token())
}

/// A name unique to this test run and call (`<prefix>-<pid>-<nanos>-<n>`), lowercase.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

fn wait_for_port(port: u16) -> bool {
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

/// A private `docker-registry` (distribution 2.8) on a free 127.0.0.1 port, storage in a
/// temporary folder; killed on drop. Tests may stop it or tamper with its storage.
pub struct PrivateRegistry {
    /// `127.0.0.1:<port>`.
    pub addr: String,
    child: Option<std::process::Child>,
    dir: tempfile::TempDir,
}

/// User name accepted by [`PrivateRegistry::start_secure`].
pub const REGISTRY_USER: &str = "devcell-user";
/// Password accepted by [`PrivateRegistry::start_secure`] (a test-only value).
pub const REGISTRY_PASSWORD: &str = "devcell-test-password";
/// bcrypt (cost 5) of [`REGISTRY_PASSWORD`], as `htpasswd -nbB` prints it.
const REGISTRY_HTPASSWD: &str =
    "devcell-user:$2y$05$oVv2/o77OT.1gPRF0/s5BuXnj1ZmEtss.t/Hi9E8zPOotAjPJcNMa";

impl PrivateRegistry {
    /// Starts one over plain HTTP, anonymous. See [`Self::start_with`].
    pub fn start() -> Option<PrivateRegistry> {
        Self::start_with(false, None)
    }

    /// Starts one over plain HTTP with distribution's `silly` token auth: every request
    /// without `Authorization` gets `401` with `WWW-Authenticate: Bearer realm="<realm>",
    /// service="devcell-test"`; any bearer token is then accepted. Exercises the client's
    /// token flow against a real registry (checklist 56).
    pub fn start_with_token_realm(realm: &str) -> Option<PrivateRegistry> {
        Self::start_with(
            false,
            Some(format!(
                "auth:\n  silly:\n    realm: {realm}\n    service: devcell-test\n"
            )),
        )
    }

    /// Starts one over plain HTTP with distribution's `token` auth: JWTs issued by a
    /// [`TokenServer`] (realm `<server>/token`, service `devcell-test`, issuer
    /// `devcell-test-issuer`) and verified against its certificate.
    pub fn start_with_token_server(server: &TokenServer) -> Option<PrivateRegistry> {
        Self::start_with(
            false,
            Some(format!(
                "auth:\n  token:\n    realm: {}/token\n    service: devcell-test\n    issuer: devcell-test-issuer\n    rootcertbundle: {}\n",
                server.base,
                server.certificate().display()
            )),
        )
    }

    /// Starts one with TLS (a CA and a `127.0.0.1` leaf certificate generated now with
    /// `openssl`; the CA is at [`Self::ca_certificate`]) and htpasswd basic auth
    /// ([`REGISTRY_USER`] / [`REGISTRY_PASSWORD`]).
    pub fn start_secure() -> Option<PrivateRegistry> {
        Self::start_with(true, None)
    }

    /// The CA certificate (PEM) of a registry started with [`Self::start_secure`].
    pub fn ca_certificate(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    fn make_certificates(dir: &Path) {
        let run = |args: &[&str]| {
            let out = std::process::Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .output()
                .expect("openssl is installed");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=devcell test CA",
        ]);
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "leaf.key",
            "-out",
            "leaf.csr",
            "-subj",
            "/CN=127.0.0.1",
        ]);
        std::fs::write(
            dir.join("leaf.ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write ext");
        run(&[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.crt",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ]);
    }

    /// Starts one. `None` (note on stderr) when `docker-registry` is not installed and
    /// `DEVCELL_TEST_ENGINE` is not `1`; panics when it is.
    #[allow(clippy::print_stderr)]
    fn start_with(secure: bool, extra: Option<String>) -> Option<PrivateRegistry> {
        let have = std::process::Command::new("sh")
            .args(["-c", "command -v docker-registry"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !have {
            if std::env::var("DEVCELL_TEST_ENGINE").as_deref() == Ok("1") {
                panic!("DEVCELL_TEST_ENGINE=1 but `docker-registry` is not installed");
            }
            eprintln!("note: docker-registry not installed; skipping registry test");
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let config = dir.path().join("config.yml");
        let mut yaml = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("storage").display()
        );
        if secure {
            Self::make_certificates(dir.path());
            let d = dir.path().display();
            yaml.push_str(&format!(
                "  tls:\n    certificate: {d}/leaf.crt\n    key: {d}/leaf.key\nauth:\n  htpasswd:\n    realm: devcell-test\n    path: {d}/htpasswd\n"
            ));
            std::fs::write(
                dir.path().join("htpasswd"),
                format!("{REGISTRY_HTPASSWD}\n"),
            )
            .expect("write htpasswd");
        }
        if let Some(extra) = extra {
            yaml.push_str(&extra);
        }
        std::fs::write(&config, yaml).expect("write registry config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log file");
        let child = std::process::Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(log.try_clone().expect("clone log"))
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let reg = PrivateRegistry {
            addr: format!("127.0.0.1:{port}"),
            child: Some(child),
            dir,
        };
        assert!(
            wait_for_port(port),
            "docker-registry did not listen on {}: {}",
            reg.addr,
            std::fs::read_to_string(reg.dir.path().join("registry.log")).unwrap_or_default()
        );
        Some(reg)
    }

    /// The registry's blob storage root (`…/docker/registry/v2/blobs/sha256`).
    pub fn blob_data(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// How many requests the registry has answered (its access log) whose request line
    /// contains `needle`, e.g. `/v2/ns/hello/manifests/` for manifest requests of one
    /// repository (GET and HEAD alike).
    pub fn requests_containing(&self, needle: &str) -> usize {
        std::fs::read_to_string(self.dir.path().join("registry.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(" HTTP/1.1\" ") && l.contains(needle))
            .count()
    }

    /// Kills the registry process and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for PrivateRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A static file server (`python3 -m http.server`) for `dir` on a free 127.0.0.1 port;
/// killed on drop.
pub struct FileServer {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    child: std::process::Child,
}

impl FileServer {
    /// Serves `dir`. Panics when python3 is missing (it is part of the test prerequisites).
    pub fn start(dir: &Path) -> FileServer {
        let port = free_port();
        let child = std::process::Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        assert!(wait_for_port(port), "http.server did not start");
        FileServer {
            base: format!("http://127.0.0.1:{port}"),
            child,
        }
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `fixtures/registry/token-server.py` on a free 127.0.0.1 port: an OAuth2 token endpoint
/// that accepts only the `refresh_token` grant with [`TokenServer::REFRESH_TOKEN`] and issues
/// JWTs a [`PrivateRegistry::start_with_token_server`] registry accepts. Killed on drop.
pub struct TokenServer {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl TokenServer {
    /// The refresh (identity) token the server accepts (a test-only value).
    pub const REFRESH_TOKEN: &'static str = "devcell-test-refresh-token";

    /// Generates a signing key and certificate with `openssl` and starts the server.
    pub fn start() -> TokenServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = std::process::Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "token.key",
                "-out",
                "token.crt",
                "-days",
                "2",
                "-subj",
                "/CN=devcell test token issuer",
            ])
            .current_dir(dir.path())
            .output()
            .expect("openssl is installed");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let child = std::process::Command::new("python3")
            .arg(fixture("registry/token-server.py"))
            .arg(port.to_string())
            .arg(dir.path().join("token.key"))
            .arg(dir.path().join("token.crt"))
            .arg(Self::REFRESH_TOKEN)
            .arg(dir.path().join("requests.log"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 runs the token server");
        assert!(wait_for_port(port), "the token server did not start");
        TokenServer {
            base: format!("http://127.0.0.1:{port}"),
            child,
            dir,
        }
    }

    /// The certificate whose key signs the tokens (PEM).
    pub fn certificate(&self) -> PathBuf {
        self.dir.path().join("token.crt")
    }

    /// The requests received so far, one JSON object each (`method`, `path`, the form fields,
    /// `refresh_token_ok` instead of the refresh token, `authorization`: whether the header
    /// was sent).
    pub fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.path().join("requests.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("log line is JSON"))
            .collect()
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Copies a folder tree (test fixtures into a temporary place).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let dest = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).expect("copy");
        }
    }
}

/// Runs `devcell features publish <dir> -r <registry> -n <namespace>` and returns its JSON.
pub fn publish(dir: &Path, registry: &str, namespace: &str) -> serde_json::Value {
    let out = devcell()
        .args(["features", "publish"])
        .arg(dir)
        .args(["-r", registry, "-n", namespace])
        .output()
        .expect("devcell runs");
    stdout_json(&out)
}

/// A byte-for-byte fingerprint of the tree under `root`: SHA-256 over every entry's relative
/// path (sorted), kind, mode bits, owner uid/gid, and content (files) or target (symbolic
/// links, not followed). Equal before and after means nothing under `root` was created,
/// removed, changed, re-owned or re-moded.
pub fn tree_fingerprint(root: &Path) -> String {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::MetadataExt as _;
    fn walk(root: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mut record =
                format!("{:o} {}:{} ", meta.mode(), meta.uid(), meta.gid()).into_bytes();
            if meta.file_type().is_symlink() {
                record.extend(
                    std::fs::read_link(&path)
                        .unwrap()
                        .as_os_str()
                        .as_encoded_bytes(),
                );
            } else if meta.is_dir() {
                walk(root, &path, out);
            } else {
                record.extend(std::fs::read(&path).unwrap());
            }
            out.insert(rel, record);
        }
    }
    let mut entries = std::collections::BTreeMap::new();
    walk(root, root, &mut entries);
    let mut hasher = Sha256::new();
    for (path, record) in &entries {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update(record);
        hasher.update([0]);
    }
    format!(
        "{} entries, sha256 {}",
        entries.len(),
        hex::encode(hasher.finalize())
    )
}
