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

struct Inner {
    allowlist: Allowlist,
    resolver: Arc<dyn Resolver>,
    log: DecisionLog,
}

impl Proxy {
    /// A proxy enforcing `allowlist`, resolving names with `resolver`, recording in `log`.
    pub fn new(allowlist: Allowlist, resolver: Arc<dyn Resolver>, log: DecisionLog) -> Proxy {
        Proxy {
            inner: Arc::new(Inner {
                allowlist,
                resolver,
                log,
            }),
        }
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
    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        if req.method() == Method::CONNECT {
            self.connect(req).await
        } else {
            self.forward(req).await
        }
    }

    fn record(&self, decision: Decision) {
        // A log that cannot be written must not open the network: the decision stands, and
        // the failure is reported where devcell reports its own errors.
        if let Err(e) = self.log.append(&decision) {
            tracing::error!("{e}");
        }
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
        let port = authority.port_u16().unwrap_or(443);
        let host = Host::parse(authority.host());
        let start = Start::new(
            host.as_ref()
                .map_or_else(|| authority.host().to_string(), Host::to_string),
            port,
            Via::Connect,
        );
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
        let port = authority.port_u16().unwrap_or(80);
        let host = Host::parse(authority.host());
        let start = Start::new(
            host.as_ref()
                .map_or_else(|| authority.host().to_string(), Host::to_string),
            port,
            Via::Http,
        );
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
        let allowed = match self
            .allowlist
            .decide(authority.host(), port, self.resolver.as_ref())
            .await
        {
            Ok(a) => a,
            Err(r) => return self.refuse(&start, r),
        };
        let (upstream, address) = match connect_any(&allowed.addrs).await {
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
        let inner = Arc::clone(&self);
        tokio::spawn(async move {
            // The connection ends when the response has been read (`Connection: close`) or
            // the client went away: then the exchange is complete and its bytes are known.
            let _ = conn.await;
            let mut decision = decision;
            decision.bytes_sent = sent.load(Ordering::Relaxed);
            decision.bytes_received = received.load(Ordering::Relaxed);
            decision.duration_ms = elapsed_ms(&start);
            inner.record(decision);
        });
        let origin_form = uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse::<Uri>()
            .unwrap_or_else(|_| Uri::from_static("/"));
        *req.uri_mut() = origin_form;
        drop_hop_by_hop(req.headers_mut());
        req.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        match sender.send_request(req).await {
            Ok(resp) => {
                let (mut parts, body) = resp.into_parts();
                drop_hop_by_hop(&mut parts.headers);
                Response::from_parts(parts, body.boxed())
            }
            Err(e) => text(
                StatusCode::BAD_GATEWAY,
                format!("devcell egress: the destination failed: {e}\n"),
            ),
        }
    }
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
