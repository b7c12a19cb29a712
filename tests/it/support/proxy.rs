//! [`EngineProxy`]: a unix-socket forwarder to the real engine that a test "stops" at a chosen
//! moment, so devcell sees its engine vanish mid-way without stopping the shared `dockerd`.
//!
//! devcell is pointed at it with `DOCKER_HOST=unix://<proxy path>`. Every connection is copied
//! byte for byte both ways to the engine's socket. When the [`Trigger`] fires, the proxy
//! removes its socket file (new connections fail with "no such file", as with a stopped
//! engine) and shuts down every open connection (requests in flight see the connection drop).

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// When the proxy stops.
#[derive(Debug, Clone)]
pub enum Trigger {
    /// After the engine's first answer to a request whose bytes contain this text (e.g.
    /// `"/containers/create"`): the answer is passed on, then the engine is gone.
    AfterResponseTo(String),
    /// As soon as the engine sends bytes containing this text (e.g. a hook's output line): the
    /// bytes are passed on, then the engine is gone.
    OnOutput(String),
}

struct Shared {
    path: PathBuf,
    killed: AtomicBool,
    conns: Mutex<Vec<UnixStream>>,
    trigger: Trigger,
}

impl Shared {
    fn kill(&self) {
        if self.killed.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the accept loop, then make the address unreachable.
        let _ = UnixStream::connect(&self.path);
        let _ = std::fs::remove_file(&self.path);
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    fn fired(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }
}

/// A forwarder to the engine's socket; stopped on drop.
pub struct EngineProxy {
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// The engine's socket: `DOCKER_HOST` when it is `unix://…`, else `/var/run/docker.sock`.
pub fn engine_socket() -> PathBuf {
    std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/var/run/docker.sock"))
}

impl EngineProxy {
    /// Listens at a fresh `/tmp/devcell-proxy-<unique>.sock`.
    pub fn start(trigger: Trigger) -> EngineProxy {
        let path = PathBuf::from(format!(
            "/tmp/{}.sock",
            crate::support::unique("devcell-proxy")
        ));
        let listener = UnixListener::bind(&path).expect("bind the proxy socket");
        let shared = Arc::new(Shared {
            path,
            killed: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
            trigger,
        });
        let upstream = engine_socket();
        let s = shared.clone();
        let accept = std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.fired() {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(engine) = UnixStream::connect(&upstream) else {
                    continue;
                };
                {
                    let mut conns = s.conns.lock().unwrap();
                    conns.push(client.try_clone().unwrap());
                    conns.push(engine.try_clone().unwrap());
                }
                let armed = Arc::new(AtomicBool::new(false));
                let (s1, s2) = (s.clone(), s.clone());
                let (mut c_read, mut e_write) =
                    (client.try_clone().unwrap(), engine.try_clone().unwrap());
                let (mut e_read, mut c_write) = (engine, client);
                let armed_req = armed.clone();
                std::thread::spawn(move || {
                    let _ = pump(&mut c_read, &mut e_write, |bytes| {
                        if let Trigger::AfterResponseTo(needle) = &s1.trigger
                            && contains(bytes, needle.as_bytes())
                        {
                            armed_req.store(true, Ordering::SeqCst);
                        }
                        false
                    });
                    let _ = e_write.shutdown(Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let fire = pump(&mut e_read, &mut c_write, |bytes| match &s2.trigger {
                        Trigger::AfterResponseTo(_) => armed.load(Ordering::SeqCst),
                        Trigger::OnOutput(needle) => contains(bytes, needle.as_bytes()),
                    });
                    if fire {
                        s2.kill();
                    }
                    let _ = c_write.shutdown(Shutdown::Write);
                });
            }
        });
        EngineProxy {
            shared,
            accept: Some(accept),
        }
    }

    /// `unix://<path>`, for `DOCKER_HOST`.
    pub fn docker_host(&self) -> String {
        format!("unix://{}", self.shared.path.display())
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Whether the trigger fired (the engine is "gone").
    pub fn fired(&self) -> bool {
        self.shared.fired()
    }
}

/// Copies `from` → `to` chunk by chunk until end of file or an error (`false`), or until a
/// chunk for which `stop` says so has been passed on (`true`).
fn pump(from: &mut UnixStream, to: &mut UnixStream, mut stop: impl FnMut(&[u8]) -> bool) -> bool {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        let fire = stop(&buf[..n]);
        if to.write_all(&buf[..n]).is_err() {
            return false;
        }
        let _ = to.flush();
        if fire {
            return true;
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

impl Drop for EngineProxy {
    fn drop(&mut self) {
        self.shared.kill();
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}
