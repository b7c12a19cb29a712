//! The host-side egress proxy (issue 13, item 2): the only way out of an `allowlist`
//! container. It serves HTTP/1.1 on a Unix socket the container reaches through its forwarder
//! and lets a request through only when the [`Allowlist`] allows its host and port:
//!
//! - **plain HTTP** as a forward proxy: the request line must be in absolute form
//!   (`GET http://host:port/path`) and a `Host` header, when present, must name the same host
//!   and port; the request is sent on in origin form over a new connection to the decided
//!   address (`Connection: close`, hop-by-hop headers dropped);
//! - **`CONNECT host:port`**: after `200`, the first bytes must be a TLS ClientHello whose SNI
//!   equals `host` (read with rustls's server [`Acceptor`], which parses without terminating
//!   TLS); no SNI, another name, or anything but TLS closes the tunnel. The bytes read are then
//!   sent to the decided address and the tunnel relays both ways. TLS itself stays end to end.
//!
//! Every request gets one [`Decision`] in the [`DecisionLog`], written when its exchange ends.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use rustls::server::Acceptor;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixListener};

use super::policy::{Allowed, Allowlist, Host, Refusal, Resolver};
use super::record::{Decision, DecisionLog, Via};
use super::upstream::{CREDENTIAL_HEADERS, PATH_PREFIX, Upstream, Upstreams};

/// How long the proxy waits for a destination to accept, and for a ClientHello after `CONNECT`.
const WAIT: Duration = Duration::from_secs(30);
/// A ClientHello longer than this is refused (real ones are a few KiB).
const MAX_CLIENT_HELLO: usize = 64 * 1024;

type Body = BoxBody<Bytes, hyper::Error>;

/// The proxy: an allowlist, the host's resolver and the session's decision log. Cheap to clone.
#[derive(Clone)]
pub struct Proxy {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    allowlist: Allowlist,
    resolver: Arc<dyn Resolver>,
    log: DecisionLog,
    upstreams: Upstreams,
    /// The forwarder's port in the container: `http://127.0.0.1:<port>/upstreams/…` sent to
    /// the proxy in absolute form is the upstream, not the host's loopback.
    local_port: Option<u16>,
}

impl Proxy {
    /// A proxy enforcing `allowlist`, resolving names with `resolver`, recording in `log`.
    pub fn new(allowlist: Allowlist, resolver: Arc<dyn Resolver>, log: DecisionLog) -> Proxy {
        Proxy {
            inner: Arc::new(Inner {
                allowlist,
                resolver,
                log,
                upstreams: Upstreams::new(),
                local_port: None,
            }),
        }
    }

    /// A proxy that also serves `upstreams` at `/upstreams/<id>/…` (origin-form requests the
    /// forwarder relays from the container's loopback; spec-note 0501).
    pub fn with_upstreams(
        allowlist: Allowlist,
        resolver: Arc<dyn Resolver>,
        log: DecisionLog,
        upstreams: Upstreams,
    ) -> Proxy {
        Proxy {
            inner: Arc::new(Inner {
                allowlist,
                resolver,
                log,
                upstreams,
                local_port: None,
            }),
        }
    }

    /// Tells the proxy the forwarder's loopback port in the container, so that a client which
    /// ignores `NO_PROXY` (BusyBox `wget` does) and sends the in-container upstream URL
    /// `http://127.0.0.1:<port>/upstreams/<id>/…` to the proxy in absolute form gets that
    /// upstream (the host's own loopback at that port is never meant: the container cannot
    /// name it).
    #[must_use]
    pub fn with_local_port(mut self, port: u16) -> Proxy {
        Arc::make_mut(&mut self.inner).local_port = Some(port);
        self
    }

    /// Serves every connection accepted on `listener` until the task is dropped or aborted
    /// (an accept error is returned).
    pub async fn serve_unix(&self, listener: UnixListener) -> std::io::Result<()> {
        loop {
            let (stream, _) = listener.accept().await?;
            let proxy = self.clone();
            tokio::spawn(async move { proxy.serve_connection(stream).await });
        }
    }

    /// Serves one client connection (HTTP/1.1, with `CONNECT` upgrades) until it closes.
    pub async fn serve_connection<IO>(&self, io: IO)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let service = service_fn(move |req| {
            let inner = Arc::clone(&inner);
            async move { Ok::<_, Infallible>(inner.handle(req).await) }
        });
        // A client that breaks the protocol just loses its connection.
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades()
            .await;
    }
}

/// What a decision record needs from the start of a request.
struct Start {
    time: DateTime<Utc>,
    clock: Instant,
    destination: String,
    port: u16,
    via: Via,
}

impl Start {
    /// The start of an exchange with `authority` (its port, or `default_port`), and the
    /// host it names.
    fn for_authority(
        authority: &hyper::http::uri::Authority,
        default_port: u16,
        via: Via,
    ) -> (Start, Option<Host>) {
        let host = Host::parse(authority.host());
        let destination = host
            .as_ref()
            .map_or_else(|| authority.host().to_string(), Host::to_string);
        let port = authority.port_u16().unwrap_or(default_port);
        (Start::new(destination, port, via), host)
    }

    fn new(destination: String, port: u16, via: Via) -> Start {
        Start {
            time: Utc::now(),
            clock: Instant::now(),
            destination,
            port,
            via,
        }
    }

    fn decision(
        &self,
        outcome: Result<&Allowed, &Refusal>,
        address: Option<SocketAddr>,
    ) -> Decision {
        let (allowed, reason, detail) = match outcome {
            Ok(a) => (true, "allowed".to_string(), a.entry.clone()),
            Err(r) => (false, r.code().to_string(), r.to_string()),
        };
        Decision {
            time: self.time,
            destination: self.destination.clone(),
            port: self.port,
            via: self.via,
            allowed,
            reason,
            detail,
            address: address.map(|a| a.to_string()),
            bytes_sent: 0,
            bytes_received: 0,
            duration_ms: u64::try_from(self.clock.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }
}

impl Inner {
    async fn handle(self: Arc<Self>, mut req: Request<Incoming>) -> Response<Body> {
        if req.method() == Method::CONNECT {
            self.connect(req).await
        } else if req.uri().scheme().is_none() && req.uri().path().starts_with(PATH_PREFIX) {
            self.upstream(req).await
        } else if self.is_local_upstream(req.uri()) {
            let origin = req
                .uri()
                .path_and_query()
                .map_or(PATH_PREFIX, |p| p.as_str())
                .parse::<Uri>()
                .unwrap_or_else(|_| Uri::from_static("/"));
            *req.uri_mut() = origin;
            self.upstream(req).await
        } else {
            self.forward(req).await
        }
    }

    /// `http://127.0.0.1:<forwarder port>/upstreams/…` (or `localhost`, `[::1]`): the
    /// in-container upstream URL, sent through the proxy by a client that ignores `NO_PROXY`.
    fn is_local_upstream(&self, uri: &Uri) -> bool {
        let (Some(port), Some("http"), Some(authority)) =
            (self.local_port, uri.scheme_str(), uri.authority())
        else {
            return false;
        };
        let loopback = matches!(
            authority.host().to_ascii_lowercase().as_str(),
            "127.0.0.1" | "localhost" | "[::1]"
        );
        loopback && authority.port_u16() == Some(port) && uri.path().starts_with(PATH_PREFIX)
    }

    fn record(&self, decision: Decision) {
        // A log that cannot be written must not open the network: the decision stands, and
        // the failure is reported where devcell reports its own errors.
        if let Err(e) = self.log.append(&decision) {
            tracing::error!("{e}");
        }
    }

    /// Decides `host:port` against `rules` and connects to one of the allowed addresses.
    async fn open(
        &self,
        rules: &Allowlist,
        host: &str,
        port: u16,
    ) -> Result<(Allowed, TcpStream, SocketAddr), Refusal> {
        let allowed = rules.decide(host, port, self.resolver.as_ref()).await?;
        let (tcp, address) = connect_any(&allowed.addrs).await?;
        Ok((allowed, tcp, address))
    }

    /// Records `decision` with the bytes counted both ways once `conn` ends: when the
    /// response has been read (`Connection: close`) or the client went away, the exchange is
    /// complete and its bytes are known.
    fn record_when_done<C>(
        self: Arc<Self>,
        conn: C,
        mut decision: Decision,
        start: Start,
        (sent, received): (Arc<AtomicU64>, Arc<AtomicU64>),
    ) where
        C: std::future::Future + Send + 'static,
    {
        tokio::spawn(async move {
            let _ = conn.await;
            decision.bytes_sent = sent.load(Ordering::Relaxed);
            decision.bytes_received = received.load(Ordering::Relaxed);
            decision.duration_ms = elapsed_ms(&start);
            self.record(decision);
        });
    }

    fn refuse(&self, start: &Start, refusal: Refusal) -> Response<Body> {
        self.record(start.decision(Err(&refusal), None));
        let status = match refusal {
            Refusal::BadRequest(_) => StatusCode::BAD_REQUEST,
            Refusal::UpstreamFailed(_) => StatusCode::BAD_GATEWAY,
            _ => StatusCode::FORBIDDEN,
        };
        text(
            status,
            format!(
                "devcell egress: refused {}:{} ({}): {refusal}\n",
                start.destination,
                start.port,
                refusal.code()
            ),
        )
    }

    async fn connect(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let Some(authority) = req.uri().authority().cloned() else {
            let start = Start::new(req.uri().to_string(), 0, Via::Connect);
            return self.refuse(
                &start,
                Refusal::BadRequest("CONNECT needs `host:port`".to_string()),
            );
        };
        let (start, host) = Start::for_authority(&authority, 443, Via::Connect);
        let port = start.port;
        let allowed = match self
            .allowlist
            .decide(authority.host(), port, self.resolver.as_ref())
            .await
        {
            Ok(a) => a,
            Err(r) => return self.refuse(&start, r),
        };
        let inner = Arc::clone(&self);
        tokio::spawn(async move {
            match hyper::upgrade::on(req).await {
                Ok(upgraded) => {
                    inner
                        .tunnel(TokioIo::new(upgraded), host, start, allowed)
                        .await
                }
                Err(e) => inner.record(start.decision(
                    Err(&Refusal::BadRequest(format!(
                        "the CONNECT upgrade failed: {e}"
                    ))),
                    None,
                )),
            }
        });
        Response::new(empty())
    }

    async fn tunnel<IO>(&self, mut client: IO, host: Option<Host>, start: Start, allowed: Allowed)
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let hello = match tokio::time::timeout(WAIT, read_client_hello(&mut client)).await {
            Ok(r) => r,
            Err(_) => Err((
                Vec::new(),
                Refusal::NotTls("no ClientHello in time".to_string()),
            )),
        };
        let (buffered, sni) = match hello {
            Ok(ok) => ok,
            Err((_, refusal)) => {
                self.record(start.decision(Err(&refusal), None));
                return;
            }
        };
        let sni_matches = match (&sni, &host) {
            (None, _) => Err(Refusal::NoSni),
            (Some(s), Some(Host::Name(h)))
                if Host::parse(s).as_ref() == Some(&Host::Name(h.clone())) =>
            {
                Ok(())
            }
            (Some(s), _) => Err(Refusal::SniMismatch(s.clone())),
        };
        if let Err(refusal) = sni_matches {
            self.record(start.decision(Err(&refusal), None));
            return;
        }
        let (mut upstream, address) = match connect_any(&allowed.addrs).await {
            Ok(ok) => ok,
            Err(refusal) => {
                self.record(start.decision(Err(&refusal), None));
                return;
            }
        };
        let mut decision = start.decision(Ok(&allowed), Some(address));
        let sent_first = upstream.write_all(&buffered).await.is_ok();
        let (up, down) = if sent_first {
            tokio::io::copy_bidirectional(&mut client, &mut upstream)
                .await
                .unwrap_or((0, 0))
        } else {
            (0, 0)
        };
        decision.bytes_sent = buffered.len() as u64 + up;
        decision.bytes_received = down;
        decision.duration_ms = elapsed_ms(&start);
        self.record(decision);
    }

    async fn forward(self: Arc<Self>, mut req: Request<Incoming>) -> Response<Body> {
        let uri = req.uri().clone();
        let (Some(authority), Some("http")) = (uri.authority().cloned(), uri.scheme_str()) else {
            let dest = req
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let start = Start::new(dest, 0, Via::Http);
            let why = if uri.scheme_str().is_some_and(|s| s != "http") {
                "only `http://` URIs are forwarded; use CONNECT for TLS"
            } else {
                "a proxy request needs an absolute URI (`GET http://host:port/path`)"
            };
            return self.refuse(&start, Refusal::BadRequest(why.to_string()));
        };
        let (start, host) = Start::for_authority(&authority, 80, Via::Http);
        let port = start.port;
        if let Some(value) = req.headers().get(header::HOST) {
            let same = value
                .to_str()
                .ok()
                .and_then(|v| v.parse::<hyper::http::uri::Authority>().ok())
                .is_some_and(|h| {
                    Host::parse(h.host()) == host && h.port_u16().unwrap_or(80) == port
                });
            if !same {
                return self.refuse(
                    &start,
                    Refusal::BadRequest(
                        "the `Host` header names another host or port than the request URI"
                            .to_string(),
                    ),
                );
            }
        }
        let (allowed, upstream, address) =
            match self.open(&self.allowlist, authority.host(), port).await {
                Ok(ok) => ok,
                Err(r) => return self.refuse(&start, r),
            };
        let counted = Counted::new(upstream);
        let (sent, received) = (Arc::clone(&counted.written), Arc::clone(&counted.read));
        let (mut sender, conn) =
            match hyper::client::conn::http1::handshake(TokioIo::new(counted)).await {
                Ok(ok) => ok,
                Err(e) => return self.refuse(&start, Refusal::UpstreamFailed(e.to_string())),
            };
        let decision = start.decision(Ok(&allowed), Some(address));
        Arc::clone(&self).record_when_done(conn, decision, start, (sent, received));
        let origin_form = uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse::<Uri>()
            .unwrap_or_else(|_| Uri::from_static("/"));
        *req.uri_mut() = origin_form;
        drop_hop_by_hop(req.headers_mut());
        req.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        relay(sender.send_request(req).await, "the destination")
    }
}

impl Inner {
    /// `/upstreams/<id>/rest?query` → `https://<upstream><base path>/rest?query`, with the
    /// container's credential headers dropped and the configured one added.
    async fn upstream(self: Arc<Self>, mut req: Request<Incoming>) -> Response<Body> {
        let path = req.uri().path()[PATH_PREFIX.len()..].to_string();
        let (id, rest) = match path.split_once('/') {
            Some((id, rest)) => (id.to_string(), format!("/{rest}")),
            None => (path.clone(), String::new()),
        };
        let Some(up) = self.upstreams.get(&id).cloned() else {
            let start = Start::new(format!("{PATH_PREFIX}{id}"), 0, Via::Upstream);
            return self.refuse(
                &start,
                Refusal::BadRequest(format!("no upstream `{id}` is configured")),
            );
        };
        let start = Start::new(up.host.clone(), up.port, Via::Upstream);
        let (allowed, tcp, address) = match self.open(&up.destination, &up.host, up.port).await {
            Ok(ok) => ok,
            Err(r) => return self.refuse(&start, r),
        };
        let counted = Counted::new(tcp);
        let (sent, received) = (Arc::clone(&counted.written), Arc::clone(&counted.read));
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(&up.tls));
        let tls =
            match tokio::time::timeout(WAIT, connector.connect(up.server_name.clone(), counted))
                .await
            {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    return self.refuse(&start, Refusal::UpstreamFailed(format!("TLS: {e}")));
                }
                Err(_) => {
                    return self.refuse(
                        &start,
                        Refusal::UpstreamFailed("no TLS handshake in time".to_string()),
                    );
                }
            };
        let (mut sender, conn) =
            match hyper::client::conn::http1::handshake(TokioIo::new(tls)).await {
                Ok(ok) => ok,
                Err(e) => return self.refuse(&start, Refusal::UpstreamFailed(e.to_string())),
            };
        let mut decision = start.decision(Ok(&allowed), Some(address));
        decision.detail = format!("upstream `{}`", up.id);
        Arc::clone(&self).record_when_done(conn, decision, start, (sent, received));
        let target = format!(
            "{}{}{}",
            up.base_path,
            if rest.is_empty() && up.base_path.is_empty() {
                "/"
            } else {
                &rest
            },
            req.uri()
                .query()
                .map(|q| format!("?{q}"))
                .unwrap_or_default()
        );
        *req.uri_mut() = match target.parse::<Uri>() {
            Ok(u) => u,
            Err(_) => Uri::from_static("/"),
        };
        set_upstream_headers(req.headers_mut(), &up);
        relay(
            sender.send_request(req).await,
            &format!("upstream `{}`", up.id),
        )
    }
}

/// The response of `what` (a destination, an upstream) with its hop-by-hop headers dropped,
/// or `502 Bad Gateway` saying that `what` failed.
fn relay(response: hyper::Result<Response<Incoming>>, what: &str) -> Response<Body> {
    match response {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            drop_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, body.boxed())
        }
        Err(e) => text(
            StatusCode::BAD_GATEWAY,
            format!("devcell egress: {what} failed: {e}\n"),
        ),
    }
}

/// The headers sent to an upstream: hop-by-hop and every credential header the container
/// sent dropped, `Host` set to the upstream, and the configured header (sensitive) added.
fn set_upstream_headers(headers: &mut HeaderMap, up: &Upstream) {
    drop_hop_by_hop(headers);
    for name in CREDENTIAL_HEADERS {
        headers.remove(name);
    }
    headers.remove(&up.header);
    if let Ok(host) = HeaderValue::from_str(&up.authority) {
        headers.insert(header::HOST, host);
    }
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    headers.insert(up.header.clone(), up.value.clone());
}

fn elapsed_ms(start: &Start) -> u64 {
    u64::try_from(start.clock.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Reads until rustls's [`Acceptor`] has a whole ClientHello: the bytes read (to send on) and
/// its SNI. Anything else is a refusal (with the bytes read so far).
async fn read_client_hello<IO: AsyncRead + Unpin>(
    client: &mut IO,
) -> Result<(Vec<u8>, Option<String>), (Vec<u8>, Refusal)> {
    let mut acceptor = Acceptor::default();
    let mut buffered = Vec::new();
    let mut chunk = vec![0u8; 8192];
    loop {
        let n = match client.read(&mut chunk).await {
            Ok(0) => {
                return Err((
                    buffered,
                    Refusal::NotTls("the tunnel closed before a ClientHello".to_string()),
                ));
            }
            Ok(n) => n,
            Err(e) => return Err((buffered, Refusal::NotTls(e.to_string()))),
        };
        buffered.extend_from_slice(&chunk[..n]);
        if buffered.len() > MAX_CLIENT_HELLO {
            return Err((
                buffered,
                Refusal::NotTls("ClientHello too long".to_string()),
            ));
        }
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            if let Err(e) = acceptor.read_tls(&mut rest) {
                return Err((buffered, Refusal::NotTls(e.to_string())));
            }
            match acceptor.accept() {
                Ok(Some(accepted)) => {
                    let sni = accepted.client_hello().server_name().map(str::to_owned);
                    return Ok((buffered, sni));
                }
                Ok(None) => {}
                Err((e, _alert)) => return Err((buffered, Refusal::NotTls(e.to_string()))),
            }
        }
    }
}

/// Connects to the first of `addrs` that accepts (each within [`WAIT`]).
async fn connect_any(addrs: &[SocketAddr]) -> Result<(TcpStream, SocketAddr), Refusal> {
    let mut last = "no address".to_string();
    for addr in addrs {
        match tokio::time::timeout(WAIT, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => return Ok((s, *addr)),
            Ok(Err(e)) => last = format!("{addr}: {e}"),
            Err(_) => last = format!("{addr}: no answer in {}s", WAIT.as_secs()),
        }
    }
    Err(Refusal::UpstreamFailed(last))
}

/// Headers that describe one hop (RFC 9110 §7.6.1) and the proxy's own, never sent on.
fn drop_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
        .collect();
    for name in named {
        headers.remove(name.as_str());
    }
    for name in [
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    ] {
        headers.remove(name);
    }
}

fn empty() -> Body {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut resp = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// A stream that counts the bytes read from and written to it.
struct Counted<T> {
    inner: T,
    read: Arc<AtomicU64>,
    written: Arc<AtomicU64>,
}

impl<T> Counted<T> {
    fn new(inner: T) -> Counted<T> {
        Counted {
            inner,
            read: Arc::new(AtomicU64::new(0)),
            written: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        poll
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &poll {
            self.written.fetch_add(*n as u64, Ordering::Relaxed);
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::channel::SocketFolder;
    use crate::egress::policy::FakeResolver;
    use http_body_util::Empty;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    struct Harness {
        _state: tempfile::TempDir,
        socket: PathBuf,
        log: PathBuf,
    }

    /// A proxy on a Unix socket (as the container reaches it), with `entries` and `resolver`.
    fn proxy(entries: &[String], resolver: FakeResolver) -> Harness {
        let state = tempfile::tempdir().unwrap();
        let folder = SocketFolder::create(state.path(), "t").unwrap();
        let listener = folder.bind().unwrap();
        let log = state.path().join("decisions.jsonl");
        let proxy = Proxy::new(
            Allowlist::parse(entries).unwrap(),
            Arc::new(resolver),
            DecisionLog::open(&log).unwrap(),
        );
        tokio::spawn(async move { proxy.serve_unix(listener).await });
        Harness {
            socket: folder.socket(),
            log,
            _state: state,
        }
    }

    /// Waits (bounded) until the log holds `n` decisions and returns them.
    async fn decisions(log: &Path, n: usize) -> Vec<Decision> {
        for _ in 0..500 {
            let d = DecisionLog::read(log).unwrap_or_default();
            if d.len() >= n {
                return d;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("fewer than {n} decisions in {}", log.display());
    }

    type Seen = Arc<Mutex<Vec<(String, HeaderMap)>>>;

    /// Serves HTTP/1 on `io`, recording each request's URI and headers in `record` and
    /// answering every request with `body`.
    async fn serve_recording<I>(io: I, record: Seen, body: &'static [u8])
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let service = service_fn(move |req: Request<Incoming>| {
            record
                .lock()
                .unwrap()
                .push((req.uri().to_string(), req.headers().clone()));
            async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(body)))) }
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(io), service)
            .await;
    }

    /// An HTTP server on 127.0.0.1 recording each request's URI and headers.
    async fn http_upstream() -> (u16, Seen) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Seen = Arc::default();
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let (s, _) = listener.accept().await.unwrap();
                tokio::spawn(serve_recording(
                    s,
                    Arc::clone(&record),
                    b"hello from upstream",
                ));
            }
        });
        (port, seen)
    }

    async fn client(socket: &Path) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>> {
        let s = tokio::net::UnixStream::connect(socket).await.unwrap();
        let (tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
            .await
            .unwrap();
        tokio::spawn(conn.with_upgrades());
        tx
    }

    /// Sends `req` to the proxy at `socket` on a new connection: the status and the body as text.
    async fn send(socket: &Path, req: Request<Empty<Bytes>>) -> (StatusCode, String) {
        let resp = client(socket).await.send_request(req).await.unwrap();
        let status = resp.status();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    async fn get(socket: &Path, uri: &str, host: Option<&str>) -> (StatusCode, String) {
        let mut req = Request::builder().uri(uri);
        if let Some(h) = host {
            req = req.header(header::HOST, h);
        }
        let req = req
            .header(header::PROXY_AUTHORIZATION, "Basic c2VjcmV0")
            .body(Empty::new())
            .unwrap();
        send(socket, req).await
    }

    /// A real TLS ClientHello from rustls, naming `sni` (or no SNI at all).
    pub(crate) fn client_hello(sni: Option<&str>) -> Vec<u8> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        config.enable_sni = sni.is_some();
        let name = rustls::pki_types::ServerName::try_from(sni.unwrap_or("unnamed.test"))
            .unwrap()
            .to_owned();
        let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let mut out = Vec::new();
        conn.write_tls(&mut out).unwrap();
        out
    }

    /// Sends `CONNECT authority`, then `first` bytes through the tunnel; returns the status and
    /// what the tunnel answered before it closed (empty for a refused tunnel).
    async fn connect(socket: &Path, authority: &str, first: &[u8]) -> (StatusCode, Vec<u8>) {
        let req = Request::builder()
            .method(Method::CONNECT)
            .uri(authority)
            .header(header::HOST, authority)
            .body(Empty::new())
            .unwrap();
        let resp = client(socket).await.send_request(req).await.unwrap();
        let status = resp.status();
        if status != StatusCode::OK {
            return (status, Vec::new());
        }
        let mut tunnel = TokioIo::new(hyper::upgrade::on(resp).await.unwrap());
        tunnel.write_all(first).await.unwrap();
        let mut answer = Vec::new();
        let _ = tunnel.read_to_end(&mut answer).await;
        (status, answer)
    }

    /// A TCP listener on 127.0.0.1 for a test to accept from.
    fn raw_upstream() -> (u16, std::net::TcpListener) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        (l.local_addr().unwrap().port(), l)
    }

    /// A TCP server on 127.0.0.1 that counts and at once closes every connection: a tunnel
    /// wrongly let through ends (the test fails on its record, it does not hang).
    async fn counting_upstream() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = Arc::clone(&hits);
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                drop(s);
            }
        });
        (port, hits)
    }

    #[tokio::test]
    async fn plain_http_to_a_pinned_name_is_forwarded_in_origin_form() {
        let (port, seen) = http_upstream().await;
        let h = proxy(&[format!("web.test:{port}=127.0.0.1")], FakeResolver::new());
        let uri = format!("http://web.test:{port}/hello?x=1");
        let (status, body) = get(&h.socket, &uri, Some(&format!("web.test:{port}"))).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::OK, "hello from upstream")
        );
        let d = decisions(&h.log, 1).await;
        assert!(d[0].allowed, "{d:?}");
        assert_eq!(d[0].reason, "allowed");
        assert_eq!(d[0].destination, "web.test");
        assert_eq!(d[0].port, port);
        assert_eq!(d[0].via, Via::Http);
        assert_eq!(
            d[0].address.as_deref(),
            Some(format!("127.0.0.1:{port}").as_str())
        );
        assert!(d[0].bytes_sent > 0 && d[0].bytes_received > "hello from upstream".len() as u64);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].0, "/hello?x=1");
        assert_eq!(seen[0].1[header::HOST], format!("web.test:{port}").as_str());
        assert!(!seen[0].1.contains_key(header::PROXY_AUTHORIZATION));
    }

    #[tokio::test]
    async fn plain_http_refusals_never_reach_the_upstream() {
        let (port, seen) = http_upstream().await;
        let resolver = FakeResolver::new().with("local.test", &["127.0.0.1"]);
        let h = proxy(
            &[
                format!("web.test:{port}=127.0.0.1"),
                format!("local.test:{port}"),
            ],
            resolver,
        );
        let cases = [
            // Not on the list.
            (
                format!("http://other.test:{port}/"),
                None,
                StatusCode::FORBIDDEN,
                "not-listed",
            ),
            // The listed name on another port.
            (
                "http://web.test/".to_string(),
                None,
                StatusCode::FORBIDDEN,
                "not-listed",
            ),
            // An IP literal no entry names.
            (
                format!("http://127.0.0.1:{port}/"),
                None,
                StatusCode::FORBIDDEN,
                "not-listed",
            ),
            // A listed name that resolves to loopback without a pin.
            (
                format!("http://local.test:{port}/"),
                None,
                StatusCode::FORBIDDEN,
                "non-public-address",
            ),
            // `Host` names another host than the URI.
            (
                format!("http://web.test:{port}/"),
                Some(format!("other.test:{port}")),
                StatusCode::BAD_REQUEST,
                "bad-request",
            ),
            // Origin form: the proxy is not a web server.
            (
                "/".to_string(),
                Some(format!("web.test:{port}")),
                StatusCode::BAD_REQUEST,
                "bad-request",
            ),
        ];
        for (i, (uri, host, status, reason)) in cases.iter().enumerate() {
            let (got, body) = get(&h.socket, uri, host.as_deref()).await;
            assert_eq!(got, *status, "{uri}: {body}");
            assert!(body.contains(reason), "{uri}: {body}");
            let d = decisions(&h.log, i + 1).await;
            assert!(!d[i].allowed);
            assert_eq!(d[i].reason, *reason, "{uri}");
        }
        assert!(
            seen.lock().unwrap().is_empty(),
            "a refused request reached the upstream"
        );
    }

    /// Sends `raw` bytes on one connection to the proxy and reads until it closes.
    async fn raw_exchange(socket: &Path, raw: &[u8]) -> String {
        let mut s = tokio::net::UnixStream::connect(socket).await.unwrap();
        s.write_all(raw).await.unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Attack (spec-note 0500): several requests on one connection (pipelined, or one
    /// smuggled in another's body with both `Content-Length` and `Transfer-Encoding`) are each
    /// judged on their own: only the listed one reaches its server, and a server the list
    /// does not name is never contacted.
    #[tokio::test]
    async fn requests_sharing_a_connection_are_each_judged() {
        let (port, seen) = http_upstream().await;
        let (other, other_seen) = http_upstream().await;
        let h = proxy(&[format!("web.test:{port}=127.0.0.1")], FakeResolver::new());
        let pipelined = format!(
            "GET http://web.test:{port}/one HTTP/1.1\r\nHost: web.test:{port}\r\n\r\n\
             GET http://other.test:{other}/two HTTP/1.1\r\nHost: other.test:{other}\r\n\r\n\
             GET http://127.0.0.1:{other}/three HTTP/1.1\r\nHost: 127.0.0.1:{other}\r\n\r\n\
             GET /four HTTP/1.1\r\nHost: web.test:{port}\r\nConnection: close\r\n\r\n"
        );
        let answer = raw_exchange(&h.socket, pipelined.as_bytes()).await;
        // the bodies end without a newline: find each status line where it starts
        let statuses: Vec<&str> = answer
            .match_indices("HTTP/1.1 ")
            .map(|(i, _)| &answer[i + 9..i + 12])
            .collect();
        assert_eq!(statuses, ["200", "403", "403", "400"], "{answer}");
        let smuggled = format!(
            "POST http://web.test:{port}/five HTTP/1.1\r\nHost: web.test:{port}\r\n\
             Content-Length: 70\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
             0\r\n\r\nGET http://127.0.0.1:{other}/six HTTP/1.1\r\nHost: 127.0.0.1:{other}\r\n\r\n"
        );
        raw_exchange(&h.socket, smuggled.as_bytes()).await;
        decisions(&h.log, 4).await;
        assert!(
            other_seen.lock().unwrap().is_empty(),
            "a server no entry names was reached"
        );
        let paths: Vec<String> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|(u, _)| u.clone())
            .collect();
        assert!(paths.first().is_some_and(|p| p == "/one"), "{paths:?}");
        assert!(
            paths.iter().all(|p| p == "/one" || p == "/five"),
            "{paths:?}"
        );
    }

    #[tokio::test]
    async fn connect_with_the_hosts_sni_relays_the_client_hello() {
        let (port, upstream) = raw_upstream();
        let h = proxy(&[format!("tls.test:{port}=127.0.0.1")], FakeResolver::new());
        let hello = client_hello(Some("tls.test"));
        let server = tokio::task::spawn_blocking(move || {
            let (mut s, _) = upstream.accept().unwrap();
            let mut got = vec![0u8; 5];
            std::io::Read::read_exact(&mut s, &mut got).unwrap();
            let len = u16::from_be_bytes([got[3], got[4]]) as usize;
            got.resize(5 + len, 0);
            std::io::Read::read_exact(&mut s, &mut got[5..]).unwrap();
            std::io::Write::write_all(&mut s, b"tls-upstream").unwrap();
            got
        });
        let (status, answer) = connect(&h.socket, &format!("tls.test:{port}"), &hello).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer, b"tls-upstream");
        assert_eq!(
            server.await.unwrap(),
            hello,
            "the ClientHello went on unchanged"
        );
        let d = decisions(&h.log, 1).await;
        assert!(d[0].allowed, "{d:?}");
        assert_eq!(d[0].via, Via::Connect);
        assert_eq!(d[0].bytes_sent, hello.len() as u64);
        assert_eq!(d[0].bytes_received, b"tls-upstream".len() as u64);
    }

    #[tokio::test]
    async fn connect_without_matching_sni_or_tls_is_closed_before_the_upstream() {
        let (port, hits) = counting_upstream().await;
        let h = proxy(&[format!("tls.test:{port}=127.0.0.1")], FakeResolver::new());
        let cases: [(&str, Vec<u8>, &str); 4] = [
            ("tls.test", client_hello(Some("other.test")), "sni-mismatch"),
            ("tls.test", client_hello(None), "no-sni"),
            ("tls.test", b"SSH-2.0-OpenSSH_9.6\r\n".to_vec(), "not-tls"),
            ("other.test", client_hello(Some("other.test")), "not-listed"),
        ];
        for (i, (host, first, reason)) in cases.iter().enumerate() {
            let (status, answer) = connect(&h.socket, &format!("{host}:{port}"), first).await;
            if *reason == "not-listed" {
                assert_eq!(status, StatusCode::FORBIDDEN);
            } else {
                assert_eq!(
                    status,
                    StatusCode::OK,
                    "the tunnel opens before the ClientHello"
                );
                assert!(answer.is_empty(), "{reason}: {answer:?}");
            }
            let d = decisions(&h.log, i + 1).await;
            assert!(!d[i].allowed);
            assert_eq!(d[i].reason, *reason);
        }
        assert_eq!(hits.load(Ordering::SeqCst), 0, "the upstream was contacted");
    }

    /// A TLS server on 127.0.0.1 for `api.test` with a certificate from a test CA (written to
    /// `ca.pem` in `dir`), recording each request's URI and headers.
    async fn tls_upstream(dir: &Path) -> (u16, PathBuf, Seen) {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["api.test".to_string()])
            .unwrap()
            .signed_by(&leaf_key, &ca)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Seen = Arc::default();
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let (acceptor, record) = (acceptor.clone(), Arc::clone(&record));
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(s).await else {
                        return;
                    };
                    serve_recording(tls, record, b"data: hello from the model\n\n").await;
                });
            }
        });
        (port, ca_file, seen)
    }

    /// A proxy serving one upstream `openai` → `https://api.test:<port>/v1` pinned to
    /// 127.0.0.1, trusting `ca` (none: the system roots only).
    fn upstream_proxy(port: u16, ca: Option<&Path>, secret: &str) -> Harness {
        let state = tempfile::tempdir().unwrap();
        let folder = SocketFolder::create(state.path(), "t").unwrap();
        let listener = folder.bind().unwrap();
        let log = state.path().join("decisions.jsonl");
        let url = format!("https://api.test:{port}/v1");
        let ca_files: Vec<PathBuf> = ca.into_iter().map(Path::to_path_buf).collect();
        let mut upstreams = Upstreams::new();
        upstreams.insert(
            Upstream::new(&crate::egress::upstream::UpstreamSpec {
                id: "openai",
                url: &url,
                header: "Authorization",
                value: &format!("Bearer {secret}"),
                env: "OPENAI_BASE_URL",
                address: Some("127.0.0.1"),
                ca_files: &ca_files,
            })
            .unwrap(),
        );
        let proxy = Proxy::with_upstreams(
            Allowlist::default(),
            Arc::new(FakeResolver::new()),
            DecisionLog::open(&log).unwrap(),
            upstreams,
        )
        .with_local_port(3128);
        tokio::spawn(async move { proxy.serve_unix(listener).await });
        Harness {
            socket: folder.socket(),
            log,
            _state: state,
        }
    }

    /// `GET path` on the proxy's socket as the container's client sends it to the forwarder
    /// (origin form, `Host: 127.0.0.1:3128`), with a credential of its own.
    async fn get_origin(socket: &Path, path: &str) -> (StatusCode, String) {
        let req = Request::builder()
            .uri(path)
            .header(header::HOST, "127.0.0.1:3128")
            .header(header::AUTHORIZATION, "Bearer from-the-container")
            .header("x-api-key", "also-from-the-container")
            .body(Empty::new())
            .unwrap();
        send(socket, req).await
    }

    #[tokio::test]
    async fn an_upstream_gets_the_hosts_header_over_verified_tls_never_the_containers() {
        let dir = tempfile::tempdir().unwrap();
        let (port, ca, seen) = tls_upstream(dir.path()).await;
        let secret = "sk-host-only-7f3a9c";
        let h = upstream_proxy(port, Some(&ca), secret);
        let (status, body) =
            get_origin(&h.socket, "/upstreams/openai/chat/completions?stream=1").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body, "data: hello from the model\n\n");
        {
            let seen = seen.lock().unwrap();
            assert_eq!(seen.len(), 1);
            let (uri, headers) = &seen[0];
            assert_eq!(uri, "/v1/chat/completions?stream=1");
            let auth: Vec<_> = headers.get_all(header::AUTHORIZATION).iter().collect();
            assert_eq!(
                auth,
                [format!("Bearer {secret}").as_str()],
                "only the host's header"
            );
            assert!(!headers.contains_key("x-api-key"), "{headers:?}");
            assert_eq!(headers[header::HOST], format!("api.test:{port}").as_str());
        }
        let d = decisions(&h.log, 1).await;
        assert!(d[0].allowed, "{d:?}");
        assert_eq!(d[0].via, Via::Upstream);
        assert_eq!(d[0].destination, "api.test");
        assert_eq!(d[0].port, port);
        assert_eq!(d[0].detail, "upstream `openai`");
        assert!(d[0].bytes_sent > 0 && d[0].bytes_received > 0);
        let record = std::fs::read_to_string(&h.log).unwrap();
        assert!(
            !record.contains(secret),
            "the value is in the record: {record}"
        );
        assert!(!record.contains("from-the-container"));
    }

    #[tokio::test]
    async fn an_upstream_not_verified_or_not_configured_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (port, _ca, seen) = tls_upstream(dir.path()).await;
        let secret = "sk-host-only-52e1";
        // Without the test CA the certificate does not verify: nothing is sent.
        let h = upstream_proxy(port, None, secret);
        let (status, body) = get_origin(&h.socket, "/upstreams/openai/models").await;
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
        assert!(body.contains("upstream-failed"), "{body}");
        assert!(!body.contains(secret), "{body}");
        let (status, body) = get_origin(&h.socket, "/upstreams/other/models").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let d = decisions(&h.log, 2).await;
        assert_eq!(d[0].reason, "upstream-failed");
        assert_eq!(d[1].reason, "bad-request");
        assert!(
            seen.lock().unwrap().is_empty(),
            "a request reached the upstream"
        );
        assert!(!std::fs::read_to_string(&h.log).unwrap().contains(secret));
    }

    #[tokio::test]
    async fn an_upstream_asked_for_through_the_proxy_variables_is_the_same_upstream() {
        let dir = tempfile::tempdir().unwrap();
        let (port, ca, seen) = tls_upstream(dir.path()).await;
        let secret = "sk-host-only-a91d";
        let h = upstream_proxy(port, Some(&ca), secret);
        // BusyBox `wget` ignores NO_PROXY: the in-container URL comes in absolute form
        let (status, body) = get_origin(
            &h.socket,
            "http://127.0.0.1:3128/upstreams/openai/models?x=1",
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        // another port of the container's loopback is not the forwarder's: not an upstream
        let (status, body) =
            get_origin(&h.socket, "http://127.0.0.1:3129/upstreams/openai/models").await;
        assert_ne!(status, StatusCode::OK, "{body}");
        {
            let seen = seen.lock().unwrap();
            assert_eq!(seen.len(), 1, "only the first reached the upstream");
            assert_eq!(seen[0].0, "/v1/models?x=1");
            let auth: Vec<_> = seen[0].1.get_all(header::AUTHORIZATION).iter().collect();
            assert_eq!(auth, [format!("Bearer {secret}").as_str()]);
        }
        let d = decisions(&h.log, 2).await;
        let upstream = d.iter().find(|d| d.via == Via::Upstream).unwrap();
        assert!(
            upstream.allowed && upstream.destination == "api.test",
            "{d:?}"
        );
        let other = d.iter().find(|d| d.via == Via::Http).unwrap();
        assert!(!other.allowed, "{d:?}");
    }
}
