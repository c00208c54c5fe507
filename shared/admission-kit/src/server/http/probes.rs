//! The probe port: `/healthz`, `/readyz` and `/metrics` in plain HTTP, with its own limits.

use super::*;

/// What `/metrics` serves.
pub type Render = Arc<dyn Fn() -> Vec<u8> + Send + Sync>;
/// What `/readyz` answers: `Err` says why not ready.
pub type Ready = Arc<dyn Fn() -> Result<(), &'static str> + Send + Sync>;

/// The probe port's protections: the webhook port's, sized for its few honest clients (the
/// kubelet's probes, one Prometheus or two). Its NetworkPolicy admits the monitoring namespace,
/// but a flood from there, or from inside the pod's network, must still cost the process a
/// bounded amount of memory and file descriptors and never reach the webhook port.
#[derive(Debug, Clone, Copy)]
pub struct ProbeLimits {
    /// Open connections at most; at the cap the oldest idle one is closed (see
    /// [`crate::server::conns`]), so a kubelet probe always finds room while a flood evicts itself.
    pub max_connections: usize,
    /// Time for the first byte, and for an HTTP/1.1 request head.
    pub first_byte: Duration,
    /// How long a connection may rest between requests.
    pub idle: Duration,
}

impl Default for ProbeLimits {
    /// 32 connections (within the 128 descriptors [`crate::server::conns::default_cap`] leaves beside the
    /// webhook port), 5 s to the first byte, 60 s idle (Prometheus scrapes every 15–60 s and
    /// reconnects when closed).
    fn default() -> Self {
        Self {
            max_connections: 32,
            first_byte: Duration::from_secs(5),
            idle: Duration::from_secs(60),
        }
    }
}

/// Serves the probe port: `/metrics` (Prometheus text from `render`), `/healthz` and `/livez`
/// (always ok), `/readyz` (from `ready`), over HTTP/1.1 and HTTP/2 cleartext, within the
/// default [`ProbeLimits`]. Every service's probe port, quota-state's included.
pub async fn serve_probes(listener: TcpListener, render: Render, ready: Ready) {
    serve_probes_with(listener, render, ready, ProbeLimits::default()).await
}

/// [`serve_probes`] within `limits`.
pub async fn serve_probes_with(
    listener: TcpListener,
    render: Render,
    ready: Ready,
    limits: ProbeLimits,
) {
    let conns = crate::server::conns::Connections::new(limits.max_connections);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(v) => v,
            Err(e) => {
                // Typically EMFILE: back off instead of spinning.
                tracing::warn!(error = %e, "probe port: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if !conns.make_room() {
            tracing::debug!(
                %peer,
                "probe port: every connection answering at the cap: turned away",
            );
            continue;
        }
        let registered = conns.register();
        let render = render.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let busy = registered.busy.clone();
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let answering = crate::server::conns::Busy::start(&busy);
                let path = req.uri().path();
                let resp = if path == "/metrics" {
                    let mut r = text(StatusCode::OK, render());
                    r.headers_mut().insert(
                        header::CONTENT_TYPE,
                        header::HeaderValue::from_static(
                            "text/plain; version=0.0.4; charset=utf-8",
                        ),
                    );
                    r
                } else {
                    health(path, &*ready)
                        .unwrap_or_else(|| text(StatusCode::NOT_FOUND, "404 page not found"))
                };
                drop(answering);
                async move { Ok::<_, Infallible>(resp) }
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            // Probes send no bodies: the smallest read buffer hyper allows, heads bounded in
            // time (hyper's timer also closes a keep-alive connection resting that long, which
            // costs Prometheus one reconnect).
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.first_byte)
                .max_buf_size(8 * 1024);
            builder
                .http2()
                .timer(TokioTimer::new())
                .max_concurrent_streams(8)
                .initial_connection_window_size(64 * 1024)
                .initial_stream_window_size(16 * 1024)
                .max_header_list_size(16 * 1024)
                .max_send_buf_size(256 * 1024);
            let io = crate::server::idle::IdleTimeout::new(stream, limits.first_byte, limits.idle);
            let conn = builder.serve_connection(TokioIo::new(io), svc);
            // Evicted means idle (no request being answered): dropped at once, so that its
            // descriptor is free before the next one is accepted.
            tokio::select! {
                _ = conn => {}
                _ = registered.evict.notified() => {}
            }
            drop(registered);
        });
    }
}
