//! Who may call quota-state, and how it knows.
//!
//! Every connection is mutual TLS ([`incoming`]): the caller's certificate must chain to the
//! configured CA, or the handshake fails. The names in that certificate ([`Peer`]) then decide,
//! per call, whether the caller is one of the allowed identities ([`Policy`]); only the
//! scheduling-webhook identity is, by default. A reservation remembers the identity that made it,
//! and only that identity may release it (see the ledger). Refused handshakes and calls are
//! logged and counted in `quota_state_refused_calls_total`.
//!
//! `--insecure-plaintext` (benchmarks and local runs only) turns all of this off: every caller is
//! then the anonymous identity and allowed, which quota-state logs at start as a warning.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use admission_kit::server::mtls::{Reloading, peer_names};
use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::server::Connected;

use crate::metrics::Metrics;
pub use quota_protocol::channel::{mtls_channel, plaintext_channel};

/// The authenticated peer of a connection: the names of its certificate.
#[derive(Debug, Clone, Default)]
pub struct Peer {
    /// Common names, DNS and URI SANs of the client certificate.
    pub names: Arc<[String]>,
}

/// A TLS connection with its verified peer.
#[derive(Debug)]
pub struct PeerStream {
    inner: tokio_rustls::server::TlsStream<TcpStream>,
    peer: Peer,
}

impl Connected for PeerStream {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

impl AsyncRead for PeerStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections accepted on `listener` that completed a mutual-TLS handshake with the current
/// configuration of `tls`. Handshakes run concurrently (one slow client never holds up the
/// others); failed ones are logged and counted, never passed on.
pub fn incoming(
    listener: TcpListener,
    tls: Arc<Reloading<rustls::ServerConfig>>,
    metrics: Metrics,
) -> impl Stream<Item = Result<PeerStream, std::io::Error>> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<PeerStream>(64);
    tokio::spawn(async move {
        loop {
            let (tcp, addr) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.get());
            let tx = tx.clone();
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        metrics.refused("handshake", "tls");
                        tracing::warn!(peer = %addr, error = %e, "refused a connection: TLS handshake failed (no or untrusted client certificate?)");
                        return;
                    }
                    Err(_) => {
                        metrics.refused("handshake", "timeout");
                        tracing::warn!(peer = %addr, "refused a connection: TLS handshake timed out");
                        return;
                    }
                };
                let names: Vec<String> = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .map(peer_names)
                    .unwrap_or_default();
                let _ = tx
                    .send(PeerStream {
                        inner: tls,
                        peer: Peer {
                            names: names.into(),
                        },
                    })
                    .await;
            });
        }
    });
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|o| o.map(Ok)))
}

/// Which callers may use the service.
#[derive(Debug, Clone)]
pub enum Policy {
    /// Plaintext (`--insecure-plaintext`): everyone, as the anonymous identity.
    Anyone,
    /// Mutual TLS: callers whose certificate carries one of these names.
    Names(BTreeSet<String>),
    /// Mutual TLS in a fleet: callers whose certificate carries the identity of a declared
    /// member cluster ([`crate::fleet::member_identity`]); each acts for its own cluster only.
    Fleet(Arc<crate::fleet::Members>),
}

/// The identity plaintext callers get.
pub const ANONYMOUS: &str = "anonymous";

/// An allowed caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The allowed name its certificate carries (what owns its reservations).
    pub identity: String,
    /// Its member cluster in a fleet; "" when quota-state serves one cluster.
    pub cluster: String,
}

impl Policy {
    /// The caller (the allowed name its certificate carries, and its cluster), or why it may
    /// not call.
    pub fn authorize<T>(&self, req: &tonic::Request<T>) -> Result<Caller, tonic::Status> {
        let plain = |identity: String| Caller {
            identity,
            cluster: String::new(),
        };
        let peer = || {
            req.extensions().get::<Peer>().ok_or_else(|| {
                tonic::Status::unauthenticated("quota-state accepts only mutual-TLS callers")
            })
        };
        match self {
            Policy::Anyone => Ok(plain(ANONYMOUS.to_owned())),
            Policy::Names(allowed) => {
                let peer = peer()?;
                peer.names
                    .iter()
                    .find(|n| allowed.contains(n.as_str()))
                    .cloned()
                    .map(plain)
                    .ok_or_else(|| {
                        tonic::Status::permission_denied(format!(
                            "caller {:?} is not allowed; quota-state answers only {:?}",
                            peer.names, allowed
                        ))
                    })
            }
            Policy::Fleet(members) => {
                let peer = peer()?;
                peer.names
                    .iter()
                    .find_map(|n| {
                        let cluster = crate::fleet::cluster_of_identity(n)?;
                        members.declared(cluster).then(|| Caller {
                            identity: n.clone(),
                            cluster: cluster.to_owned(),
                        })
                    })
                    .ok_or_else(|| {
                        tonic::Status::permission_denied(format!(
                            "caller {:?} is not allowed; quota-state answers only the members of \
                             its fleet ({:?}), each as {}<cluster>",
                            peer.names,
                            members.names(),
                            crate::fleet::MEMBER_IDENTITY_PREFIX
                        ))
                    })
            }
        }
    }
}
