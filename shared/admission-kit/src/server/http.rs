//! The HTTPS server: hyper 1 over tokio-rustls, HTTP/1.1 and HTTP/2 by ALPN.
//!
//! Each webhook path is a stack of tower layers around the handler:
//! [`Observe`](observe::Observe) (span, metrics, decision log) → [`Limits`](limits::Limits) (method, content type, body size and read
//! time) → [`ReviewService`] (decode, rules, encode). Health, readiness and metrics sit beside
//! them. Handlers never see transport concerns.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::Either;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::{Layer, Service, ServiceExt};
use tracing::Instrument;

use crate::review::app::{App, DecodeErrors};
use crate::review::envelope::{self, Response as ReviewResponse, ReviewOut, Status};
use crate::review::handler::{
    Answer, Context, Decision, Handler, Peer, ReviewError, review_body, review_body_async,
};
use crate::review::mode::{Enforcement, Modes};
use crate::server::budget::Budget;
use crate::server::metrics::Metrics;
use crate::server::tls::{CertStore, TlsError, server_config};

pub mod limits;
pub mod observe;
pub mod probes;
use limits::{Limits, LimitsLayer};
use observe::*;
use probes::serve_probes;

/// The body every response carries.
pub type Body = Full<Bytes>;

/// Transport limits and timings.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Webhook (HTTPS) listen address.
    pub listen: SocketAddr,
    /// Metrics and probes (plain HTTP) listen address; `None` disables it.
    pub metrics_listen: Option<SocketAddr>,
    /// Largest accepted request body, in bytes.
    pub body_limit: usize,
    /// Request bytes all reviews in flight may hold together (each reserves its declared
    /// Content-Length, or `body_limit` when it declares none); beyond it, 429 before the body
    /// is read. Never below `body_limit`.
    pub max_inflight_bytes: usize,
    /// Reviews in flight at once; beyond it, 429 before the body is read.
    pub max_concurrent_reviews: usize,
    /// Open connections at most (see [`crate::server::conns`]); at the cap the oldest idle one is closed
    /// to make room.
    pub max_connections: usize,
    /// Time allowed for a TLS handshake.
    pub handshake_timeout: Duration,
    /// TLS handshakes in progress at once; a connection beyond it is closed at once (see
    /// [`crate::server::conns::Handshakes`]).
    pub max_handshakes: usize,
    /// The same from one address.
    pub max_handshakes_per_peer: usize,
    /// Time allowed for reading a request's headers.
    pub header_timeout: Duration,
    /// Time allowed for reading a request's body.
    pub body_timeout: Duration,
    /// How long a connection may rest between reads and writes once its first byte came (which
    /// must come within `header_timeout` of the handshake); see [`crate::server::idle`].
    pub idle_timeout: Duration,
    /// After a stop signal, how long to keep serving while readiness reports false, so that
    /// endpoints controllers take the pod out of rotation before the listener closes.
    pub shutdown_delay: Duration,
    /// After the listener closes, how long in-flight reviews may take before connections are
    /// dropped.
    pub shutdown_grace: Duration,
    /// Connections older than this are closed gracefully (HTTP/2 GOAWAY, HTTP/1.1 close after
    /// the response in flight); the client reconnects, so load spreads over new replicas and a
    /// renewed certificate is presented. `None`: connections live as long as the client wants.
    pub max_connection_age: Option<Duration>,
    /// When set, clients must present a certificate chaining to this CA (the API server's
    /// client certificate from its admission kubeconfig); others fail the handshake.
    pub client_ca_file: Option<std::path::PathBuf>,
    /// With `client_ca_file`: the names (common name, DNS or URI SAN) one of which the client
    /// certificate must carry. Empty: any certificate of that CA. A chain alone is not enough
    /// where the CA also signs users' certificates (kubeadm's cluster CA signs kubectl's).
    pub allowed_client_names: Vec<String>,
    /// Bind the webhook port with `SO_REUSEPORT`, so that several processes on one host share
    /// it and the kernel spreads new connections over them (replicas on one machine, a new
    /// binary started before the old one stops).
    pub reuse_port: bool,
    /// Each endpoint's enforcement mode (`--enforcement`): what it does with its decisions.
    pub enforcement: Modes,
    /// Continue the trace a request's `traceparent` names. `serve` sets it when spans are
    /// exported ([`crate::server::telemetry::Telemetry::exporting`]); off, the header is not read,
    /// so a traced API server costs a service that exports nothing nothing.
    pub continue_traces: bool,
    /// Write the decision line of a plain admission (admitted unchanged, no warning, enforced)
    /// at INFO like every other decision. Off, it is written at DEBUG (`RUST_LOG` can still
    /// select it) and counted in the metrics: denials, warnings, mutations and decisions on
    /// trial are always logged.
    pub log_admissions: bool,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            metrics_listen: Some(SocketAddr::from(([0, 0, 0, 0], 8080))),
            // An object may be 3 MiB and a review carries the old and the new one: as
            // controller-runtime, allow 7 MiB.
            body_limit: 7 * 1024 * 1024,
            // A quarter of the Deployments' 128Mi limit: a review's decoded form takes about
            // twice its bytes, and the process itself ~15 MiB.
            max_inflight_bytes: 32 * 1024 * 1024,
            max_concurrent_reviews: 256,
            max_connections: crate::server::conns::default_cap(),
            handshake_timeout: Duration::from_secs(10),
            // The API server opens a few connections at a time, an HTTP/1.1 client under load
            // (a proxy, a benchmark) a hundred or so; 256 pending handshakes of about 12 KiB
            // each are 3 MiB.
            max_handshakes: 256,
            max_handshakes_per_peer: 128,
            max_connection_age: None,
            client_ca_file: None,
            allowed_client_names: Vec::new(),
            reuse_port: false,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            // Above the API server's 90 s: it closes a resting connection first.
            idle_timeout: Duration::from_secs(120),
            shutdown_delay: Duration::from_secs(3),
            shutdown_grace: Duration::from_secs(25),
            enforcement: Modes::default(),
            continue_traces: true,
            log_admissions: false,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// TLS could not be configured.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// What readiness depends on.
pub struct Readiness {
    certs: Arc<CertStore>,
    synced: Box<dyn Fn() -> bool + Send + Sync>,
    draining: AtomicBool,
}

impl Readiness {
    /// Ready when certificates are loaded, `synced()` holds and no shutdown has begun.
    pub fn new(certs: Arc<CertStore>, synced: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self {
            certs,
            synced: Box::new(synced),
            draining: AtomicBool::new(false),
        }
    }

    /// `Ok` when ready, otherwise why not.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.draining.load(Ordering::Acquire) {
            return Err("shutting down");
        }
        if !self.certs.loaded() {
            return Err("serving certificate not loaded");
        }
        if !(self.synced)() {
            return Err("cluster state caches not synced");
        }
        Ok(())
    }
}

fn text(code: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn json(code: StatusCode, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// An error answer on a webhook path: an AdmissionReview denying with the HTTP code, so the API
/// server's log shows our message, in the apiVersion the body claimed (v1 when unknown).
pub fn review_error(
    code: StatusCode,
    api_version: &str,
    uid: String,
    message: String,
) -> Response<Body> {
    let out = ReviewOut::new(
        api_version,
        ReviewResponse {
            uid,
            allowed: false,
            status: Some(Status::failure(
                code.as_u16(),
                code.canonical_reason().unwrap_or("Error"),
                message,
            )),
            ..ReviewResponse::default()
        },
    );
    json(code, out.to_bytes())
}

fn health(path: &str, ready: &dyn Fn() -> Result<(), &'static str>) -> Option<Response<Body>> {
    match path {
        "/healthz" | "/livez" => Some(text(StatusCode::OK, "ok")),
        "/readyz" => Some(match ready() {
            Ok(()) => text(StatusCode::OK, "ok"),
            Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, why),
        }),
        _ => None,
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The innermost service: decode, run the handler, encode. The [`Decision`] rides in the
/// response's extensions for the outer layers.
#[derive(Clone)]
pub struct ReviewService {
    handler: Arc<dyn Handler>,
    ctx: Context,
    decode_errors: DecodeErrors,
    /// The handler waits for another service ([`Handler::waits`]): reviews are awaited on the
    /// connection's task; the others are answered within `call`, with no future to allocate.
    waits: bool,
    /// What the endpoint does with its decisions.
    enforcement: Enforcement,
}

impl ReviewService {
    /// Serves `handler` with `ctx`, answering undecodable reviews as `decode_errors` says.
    pub fn new(handler: Arc<dyn Handler>, ctx: Context, decode_errors: DecodeErrors) -> Self {
        let waits = handler.waits(&ctx);
        Self {
            handler,
            ctx,
            decode_errors,
            waits,
            enforcement: Enforcement::Enforce,
        }
    }

    /// The same service in enforcement mode `mode`.
    pub fn enforcing(mut self, mode: Enforcement) -> Self {
        self.enforcement = mode;
        self
    }

    fn answer(&self, body: &[u8], answered: Result<Answer, ReviewError>) -> Response<Body> {
        match answered {
            Ok(mut a) => {
                self.enforcement.apply(&mut a);
                let mut r = json(StatusCode::OK, a.review.to_bytes());
                r.extensions_mut().insert(a.decision);
                r
            }
            // On trial, a review we cannot decode is the upstream's to answer: admitted (with
            // the error as a warning in `warn`), recorded as a would-be refusal.
            Err(e) if self.enforcement != Enforcement::Enforce => {
                let warnings = match self.enforcement {
                    Enforcement::Warn => vec![format!("would be refused: {e}")],
                    _ => Vec::new(),
                };
                let out = ReviewOut::new(
                    envelope::claimed_api_version(body),
                    ReviewResponse {
                        uid: envelope::claimed_uid(body),
                        allowed: true,
                        warnings,
                        ..ReviewResponse::default()
                    },
                );
                let mut r = json(StatusCode::OK, out.to_bytes());
                r.extensions_mut().insert(TrialRefusal(self.enforcement));
                r.extensions_mut().insert(e);
                r
            }
            Err(e) => {
                let mut r = match self.decode_errors {
                    DecodeErrors::Errored => json(
                        StatusCode::OK,
                        e.errored_review(
                            envelope::claimed_api_version(body),
                            envelope::claimed_uid(body),
                        )
                        .to_bytes(),
                    ),
                    DecodeErrors::PlainText => text(StatusCode::BAD_REQUEST, e.plain_text()),
                };
                r.extensions_mut().insert(e);
                r
            }
        }
    }
}

impl Service<Request<Bytes>> for ReviewService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Either<
        std::future::Ready<Result<Response<Body>, Infallible>>,
        BoxFuture<Result<Response<Body>, Infallible>>,
    >;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Bytes>) -> Self::Future {
        let peer = req.extensions().get::<Peer>().copied();
        if !self.waits {
            let body = req.body();
            let ctx = self.ctx.clone().with_peer(peer);
            let answered = review_body(self.handler.as_ref(), body, &ctx);
            return Either::Left(std::future::ready(Ok(self.answer(body, answered))));
        }
        let mut this = self.clone();
        this.ctx = this.ctx.with_peer(peer);
        Either::Right(Box::pin(async move {
            let body = req.into_body();
            let answered = review_body_async(this.handler.as_ref(), &body, &this.ctx).await;
            Ok(this.answer(&body, answered))
        }))
    }
}

/// A webhook path's full layer stack.
#[derive(Clone)]
pub struct EndpointStack {
    svc: Observe<Limits<ReviewService>>,
}

impl EndpointStack {
    /// Builds the stack for one endpoint around `review`, its innermost service.
    pub fn new(
        path: &'static str,
        review: ReviewService,
        metrics: Metrics,
        opts: &ServeOptions,
        budget: Arc<Budget>,
    ) -> Self {
        let svc = tower::ServiceBuilder::new()
            .layer(ObserveLayer {
                path,
                metrics,
                continue_traces: opts.continue_traces,
                log_admissions: opts.log_admissions,
            })
            .layer(LimitsLayer {
                body_limit: opts.body_limit,
                body_timeout: opts.body_timeout,
                budget,
            })
            .service(review);
        Self { svc }
    }
}

/// Routes webhook-port requests: endpoints, health, readiness, 404.
#[derive(Clone)]
pub struct Router {
    routes: Arc<std::collections::HashMap<&'static str, EndpointStack>>,
    readiness: Arc<Readiness>,
    budget: Arc<Budget>,
}

impl Router {
    /// A router for every endpoint of `app`.
    pub fn new(
        app: &App,
        ctx: Context,
        metrics: Metrics,
        readiness: Arc<Readiness>,
        opts: &ServeOptions,
    ) -> Self {
        let budget = Arc::new(Budget::new(
            opts.max_inflight_bytes,
            opts.body_limit,
            opts.max_concurrent_reviews,
        ));
        let routes = app
            .endpoints
            .iter()
            .map(|e| {
                (
                    e.path,
                    EndpointStack::new(
                        e.path,
                        ReviewService::new(e.handler.clone(), ctx.clone(), app.decode_errors)
                            .enforcing(opts.enforcement.of(e.path)),
                        metrics.clone(),
                        opts,
                        budget.clone(),
                    ),
                )
            })
            .collect();
        Self {
            routes: Arc::new(routes),
            readiness,
            budget,
        }
    }

    /// Handles one request.
    pub async fn handle<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let http1 = req.version() < http::Version::HTTP_2;
        let path = req.uri().path();
        let mut resp = match self.routes.get(path) {
            Some(stack) => {
                let Ok(r) = stack.svc.clone().oneshot(req).await;
                r
            }
            None => health(path, &|| self.readiness.check())
                .unwrap_or_else(|| text(StatusCode::NOT_FOUND, "404 page not found")),
        };
        // Draining: an HTTP/1.1 client leaves after this answer (HTTP/2 ones get GOAWAY).
        if http1 && self.readiness.draining.load(Ordering::Acquire) {
            resp.headers_mut()
                .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
        }
        resp
    }
}

fn bind(addr: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    if reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    socket.listen(1024)
}

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    metrics: Metrics,
    readiness: Arc<Readiness>,
    opts: ServeOptions,
}

impl Server {
    /// Binds the listeners. Readiness reports ready once `certs` holds a certificate and
    /// `synced()` is true.
    pub async fn bind(
        app: &App,
        ctx: Context,
        certs: Arc<CertStore>,
        synced: impl Fn() -> bool + Send + Sync + 'static,
        metrics: Metrics,
        opts: ServeOptions,
    ) -> Result<Self, ServeError> {
        let listener = bind(opts.listen, opts.reuse_port).map_err(|source| ServeError::Bind {
            addr: opts.listen,
            source,
        })?;
        let metrics_listener = match opts.metrics_listen {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .map_err(|source| ServeError::Bind { addr, source })?,
            ),
            None => None,
        };
        let readiness = Arc::new(Readiness::new(certs.clone(), synced));
        let router = Router::new(app, ctx, metrics.clone(), readiness.clone(), &opts);
        Ok(Self {
            listener,
            metrics_listener,
            tls: match &opts.client_ca_file {
                Some(ca) => crate::server::tls::server_config_with_clients(certs, ca)?,
                None => server_config(certs)?,
            },
            router,
            metrics,
            readiness,
            opts,
        })
    }

    /// The webhook port's address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// The metrics port's address.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// Serves until `shutdown` resolves, then: readiness false, keep serving for the shutdown
    /// delay, stop accepting, close idle keep-alive connections (HTTP/1.1 without keep-alive from
    /// then on, HTTP/2 GOAWAY), let in-flight reviews finish within the grace period.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        // Every connection task holds a clone of `done`; when all are dropped, all have ended.
        let (closing, closing_rx) = tokio::sync::watch::channel(false);
        // Flips at the stop signal (with readiness), a shutdown delay before `closing`: HTTP/2
        // connections get GOAWAY at once; HTTP/1.1 answers carry `Connection: close` (the
        // router reads readiness), so no client sends on a connection the server is closing.
        let (draining_tx, draining_rx) = tokio::sync::watch::channel(false);
        let (done, mut all_done) = tokio::sync::mpsc::channel::<()>(1);
        let acceptor = TlsAcceptor::from(self.tls.clone());
        if let Some(l) = self.metrics_listener {
            let metrics = self.metrics.clone();
            let readiness = self.readiness.clone();
            // Not watched by the graceful shutdown: probes and metrics stay up until exit.
            tokio::spawn(serve_probes(
                l,
                Arc::new(move || metrics.render()),
                Arc::new(move || readiness.check()),
            ));
        }
        let delay = self.opts.shutdown_delay;
        let readiness = self.readiness.clone();
        let shutdown = async move {
            shutdown.await;
            readiness.draining.store(true, Ordering::Release);
            let _ = draining_tx.send(true);
            tracing::info!(delay = ?delay, "stop requested: readiness is false, draining");
            tokio::time::sleep(delay).await;
        };
        tokio::pin!(shutdown);
        let conns = crate::server::conns::Connections::new(self.opts.max_connections);
        let handshakes = crate::server::conns::Handshakes::new(
            self.opts.max_handshakes,
            self.opts.max_handshakes_per_peer,
        );
        let trimmer = tokio::spawn(crate::server::trim::after_bursts(
            self.router.budget.clone(),
        ));
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = self.listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(v) => v,
                        Err(e) => {
                            // Typically EMFILE: back off instead of spinning.
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let Some(shaking) = handshakes.begin(peer.ip().to_canonical()) else {
                        self.metrics.handshakes_refused.with_label_values(&["busy"]).inc();
                        tracing::debug!(
                            %peer,
                            "too many TLS handshakes in progress (in all or from this address): turned away",
                        );
                        continue;
                    };
                    if !conns.make_room() {
                        tracing::debug!(
                            %peer,
                            "every connection answering at the connection cap: turned away",
                        );
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let acceptor = acceptor.clone();
                    let router = self.router.clone();
                    let mut closing = closing_rx.clone();
                    let mut draining = draining_rx.clone();
                    let done = done.clone();
                    let opts = self.opts.clone();
                    let refused = self.metrics.handshakes_refused.clone();
                    let registered = conns.register();
                    tokio::spawn(async move {
                        let handshake =
                            tokio::time::timeout(opts.handshake_timeout, acceptor.accept(stream))
                                .await;
                        drop(shaking);
                        let tls = match handshake {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                refused.with_label_values(&["failed"]).inc();
                                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                refused.with_label_values(&["timeout"]).inc();
                                tracing::debug!(%peer, "TLS handshake timed out");
                                return;
                            }
                        };
                        if let Err(names) = client_allowed(&tls, &opts.allowed_client_names) {
                            refused.with_label_values(&["forbidden"]).inc();
                            tracing::warn!(
                                %peer,
                                ?names,
                                allowed = ?opts.allowed_client_names,
                                "refused a client certificate that names none of --allowed-client-names",
                            );
                            return;
                        }
                        // The handshake proved the API server's client certificate.
                        let authenticated = opts.client_ca_file.is_some();
                        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
                        let busy = registered.busy.clone();
                        // HTTP/1.1 request heads are bounded here, not by hyper (see crate::server::idle).
                        let head =
                            crate::server::idle::HeadDeadline::new(opts.header_timeout, busy.clone());
                        let started = head.started();
                        let served = started.clone();
                        let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                            req.extensions_mut().insert(Peer {
                                ip: peer.ip().to_canonical(),
                                authenticated,
                            });
                            let router = router.clone();
                            started.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                            let answering = crate::server::conns::Busy::start(&busy);
                            async move {
                                let _answering = answering;
                                Ok::<_, Infallible>(router.handle(req).await)
                            }
                        });
                        let mut builder = auto::Builder::new(TokioExecutor::new());
                        builder
                            .http1()
                            .timer(TokioTimer::new())
                            .header_read_timeout(None)
                            // hyper's default read buffer grows to 408 KiB per connection while
                            // a body streams in; 100 connections uploading at once held 40 MiB
                            // of it. 64 KiB still takes any request head the API server sends.
                            .max_buf_size(64 * 1024)
                            .keep_alive(true);
                        // HTTP/2 sized so one connection cannot take the in-flight budget:
                        // whatever its streams, a client may send only the connection window
                        // (1 MiB) ahead of what the server has read, and a body is read only
                        // once the budget has room for it (429 otherwise). Header lists are
                        // bounded like HTTP/1.1 heads (64 KiB; hyper allows 16 MiB).
                        builder
                            .http2()
                            .timer(TokioTimer::new())
                            .keep_alive_interval(Duration::from_secs(30))
                            .max_concurrent_streams(250)
                            .initial_connection_window_size(1 << 20)
                            .initial_stream_window_size(1 << 20)
                            .max_header_list_size(64 * 1024);
                        let mut tls = crate::server::idle::IdleTimeout::new(
                            tls,
                            opts.header_timeout,
                            opts.idle_timeout,
                        );
                        if !h2 {
                            tls = tls.with_head_deadline(head);
                        }
                        let conn = builder.serve_connection(TokioIo::new(tls), svc).into_owned();
                        let mut conn = std::pin::pin!(conn);
                        let age = async {
                            match opts.max_connection_age {
                                Some(d) => tokio::time::sleep(d).await,
                                None => std::future::pending().await,
                            }
                        };
                        let ended = tokio::select! {
                            r = conn.as_mut() => Some(r),
                            _ = closing.wait_for(|c| *c) => None,
                            _ = goaway_when_draining(&mut draining, &served), if h2 => None,
                            _ = registered.evict.notified() => None,
                            _ = age => None,
                        };
                        let result = match ended {
                            Some(r) => r,
                            None => {
                                conn.as_mut().graceful_shutdown();
                                conn.await
                            }
                        };
                        if let Err(e) = result {
                            tracing::debug!(%peer, error = %e, "connection ended with an error");
                        }
                        drop(registered);
                        drop(done);
                    });
                }
            }
        }
        drop(self.listener);
        trimmer.abort();
        let grace = self.opts.shutdown_grace;
        tracing::info!("listener closed; closing idle connections and finishing in-flight reviews");
        let _ = closing.send(true);
        drop(done);
        if tokio::time::timeout(grace, all_done.recv()).await.is_err() {
            tracing::warn!(
                grace = ?grace,
                "in-flight reviews did not finish within the grace period",
            );
        }
        tracing::info!("server stopped");
    }
}

/// Whether the client certificate of `tls` carries one of `allowed` (any, when `allowed` is
/// empty); `Err` holds the names it carries. Checked once per connection, after the handshake
/// proved the chain: the API server's certificate is then told apart from the users' that the
/// same cluster CA signs.
fn client_allowed<IO>(
    tls: &tokio_rustls::server::TlsStream<IO>,
    allowed: &[String],
) -> Result<(), Vec<String>> {
    if allowed.is_empty() {
        return Ok(());
    }
    let names = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(crate::server::mtls::peer_names)
        .unwrap_or_default();
    if names.iter().any(|n| allowed.contains(n)) {
        Ok(())
    } else {
        Err(names)
    }
}

/// Resolves when an HTTP/2 connection should get GOAWAY for the drain: once draining and the
/// connection has received a request. The API server keeps dialling while the load balancer
/// still lists a draining replica (endpoints follow readiness with a delay), and its HTTP/2
/// client sends the first request with the connection preface: shutting down a connection
/// still in its HTTP/2 handshake drops that request (the client sees EOF, and a POST is not
/// retried), while a GOAWAY after the first request lets it finish and moves the client on.
/// Checked every 10 ms while draining only; a connection that never sends is closed by the
/// first-byte timeout or when the listener closes.
async fn goaway_when_draining(
    draining: &mut tokio::sync::watch::Receiver<bool>,
    served: &std::sync::atomic::AtomicU64,
) {
    let _ = draining.wait_for(|d| *d).await;
    while served.load(Ordering::Acquire) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
