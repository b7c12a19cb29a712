//! The reference CLI (`@devcontainers/cli`, `devcontainer`) for interop tests, run so that all
//! of its traffic stays on this machine (spec-notes/0260-interop-traffic-stays-local.md):
//!
//! - its control-manifest cache (`$TMPDIR/devcontainercli-<user>/control-manifest.json`) is
//!   seeded fresh before every run, so `build`/`up` do not fetch the control manifest from
//!   the internet (the reference refetches only when that file is older than five minutes);
//! - `HTTP(S)_PROXY`/`ALL_PROXY` point at a local [`Guard`] that answers `403` and records
//!   every request; `NO_PROXY` exempts `localhost` and `127.0.0.1` (the test registries). A
//!   request to any other host therefore reaches the guard on 127.0.0.1 (no DNS lookup, no
//!   packet leaves the machine) and fails the test through [`RefCli::assert_stayed_local`];
//! - `DOCKER_CONFIG` is an empty folder (no credential helper runs), and `GITHUB_TOKEN` /
//!   `DEVCONTAINERS_OCI_AUTH` are removed.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The reference CLI's `devcontainer` binary with a private `TMPDIR` and a proxy [`Guard`].
pub struct RefCli {
    /// Path of the `devcontainer` binary.
    pub bin: PathBuf,
    tmp: tempfile::TempDir,
    guard: Guard,
}

/// The reference CLI for `test`: `DEVCELL_TEST_REFCLI` (required to name a file when set),
/// else `/opt/refcli/node_modules/.bin/devcontainer` when installed. Panics when neither is
/// there and `DEVCELL_TEST_ENGINE=1` (CI must not skip interop); otherwise `None` with a note.
pub fn reference_cli(test: &str) -> Option<RefCli> {
    let bin = match std::env::var("DEVCELL_TEST_REFCLI") {
        Ok(path) if !path.is_empty() => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "{test}: DEVCELL_TEST_REFCLI names no file: {}",
                path.display()
            );
            Some(path)
        }
        _ => Some(PathBuf::from("/opt/refcli/node_modules/.bin/devcontainer"))
            .filter(|p| p.is_file()),
    };
    let Some(bin) = bin else {
        assert!(
            std::env::var("DEVCELL_TEST_ENGINE").as_deref() != Ok("1"),
            "{test}: DEVCELL_TEST_ENGINE=1 but the reference CLI is missing \
             (set DEVCELL_TEST_REFCLI; scripts/test installs @devcontainers/cli with npm)"
        );
        #[allow(clippy::print_stderr)]
        {
            eprintln!("note: {test} skipped: no reference CLI (set DEVCELL_TEST_REFCLI)");
        }
        return None;
    };
    let tmp = tempfile::Builder::new()
        .prefix("devcell-refcli-")
        .tempdir()
        .expect("temp dir");
    std::fs::create_dir(tmp.path().join("docker-config")).expect("mkdir");
    Some(RefCli {
        bin,
        tmp,
        guard: Guard::start(),
    })
}

impl RefCli {
    /// A `devcontainer` command with the local-only environment described in the module doc.
    pub fn command(&self) -> Command {
        self.seed_control_manifest();
        let proxy = format!("http://{}", self.guard.addr);
        let mut cmd = Command::new(&self.bin);
        for name in [
            "npm_config_proxy",
            "npm_config_http_proxy",
            "npm_config_https_proxy",
            "npm_config_no_proxy",
            "GITHUB_TOKEN",
            "GITHUB_HOST",
            "DEVCONTAINERS_OCI_AUTH",
        ] {
            cmd.env_remove(name);
        }
        for name in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ] {
            cmd.env(name, &proxy);
        }
        cmd.env("NO_PROXY", "localhost,127.0.0.1")
            .env("no_proxy", "localhost,127.0.0.1")
            .env("TMPDIR", self.tmp.path())
            .env("DOCKER_CONFIG", self.tmp.path().join("docker-config"));
        cmd
    }

    /// The requests the reference CLI sent to hosts other than the exempted local ones (each
    /// went to the [`Guard`], never further).
    pub fn outside_requests(&self) -> Vec<String> {
        self.guard.requests()
    }

    /// Panics when the reference CLI tried to reach any host other than the exempted local
    /// registries (each such request went to the [`Guard`] instead).
    pub fn assert_stayed_local(&self) {
        let seen = self.guard.requests();
        assert!(
            seen.is_empty(),
            "the reference CLI tried to reach other hosts (stopped at the local guard): {seen:?}"
        );
    }

    /// Writes an empty control manifest where the reference CLI caches it, with a fresh
    /// modification time (it refetches only when the file is older than five minutes).
    fn seed_control_manifest(&self) {
        let user = Command::new("id")
            .arg("-un")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let dir = self.tmp.path().join(format!("devcontainercli-{user}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(
            dir.join("control-manifest.json"),
            r#"{"disallowedFeatures":[],"featureAdvisories":[]}"#,
        )
        .expect("write control manifest");
    }

    /// The private `TMPDIR` given to the reference CLI.
    pub fn tmpdir(&self) -> &Path {
        self.tmp.path()
    }
}

/// A local stand-in for an HTTP proxy: records the request line of every connection
/// (`CONNECT host:443 HTTP/1.1`, `GET http://host/… HTTP/1.1`) and answers `403`. Stopped on
/// drop.
pub struct Guard {
    /// `127.0.0.1:<port>`.
    pub addr: String,
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Guard {
    /// Listens on a free 127.0.0.1 port.
    pub fn start() -> Guard {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr").to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            let _ = stream.set_nonblocking(false);
                            let _ =
                                stream.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                            let mut line = String::new();
                            let _ = BufReader::new(&stream).read_line(&mut line);
                            seen.lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(line.trim_end().to_string());
                            let _ = stream.write_all(
                                b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                            );
                        }
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                    }
                }
            })
        };
        Guard {
            addr,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// The request lines received so far.
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
