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
    /// Its place among the connections; freed when the connection ends.
    _slot: Slot,
}

/// Connections open at most. Every scheduling-webhook replica (at most 12 with the shipped
/// autoscaler, twice that during a rolling update) and every fleet member holds one.
pub const MAX_CONNECTIONS: usize = 256;
/// Connections of one certificate's names at most: what a holder of one client key can hold
/// (with [`crate::MAX_STREAMS`] streams each: about 36 MiB of stream state at most).
pub const MAX_CONNECTIONS_PER_IDENTITY: usize = 64;
/// TLS handshakes in progress at once, and from one address.
const MAX_HANDSHAKES: (usize, usize) = (64, 8);

/// The open connections, in all and per certificate.
#[derive(Debug, Clone, Default)]
struct Slots {
    by_names: Arc<std::sync::Mutex<std::collections::HashMap<Arc<[String]>, usize>>>,
    total: Arc<std::sync::atomic::AtomicUsize>,
}

/// One open connection's place in [`Slots`].
#[derive(Debug)]
struct Slot {
    names: Arc<[String]>,
    slots: Slots,
}

impl Slots {
    /// A place for a connection of `names`, or `None` at either bound.
    fn take(&self, names: &Arc<[String]>) -> Option<Slot> {
        use std::sync::atomic::Ordering;
        let mut m = self.by_names.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.get(names).copied().unwrap_or(0);
        if n >= MAX_CONNECTIONS_PER_IDENTITY
            || self.total.load(Ordering::Acquire) >= MAX_CONNECTIONS
        {
            return None;
        }
        m.insert(names.clone(), n + 1);
        self.total.fetch_add(1, Ordering::AcqRel);
        Some(Slot {
            names: names.clone(),
            slots: self.clone(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut m = self
            .slots
            .by_names
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.names) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.names);
            }
        }
        self.slots
            .total
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
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
    let handshakes =
        admission_kit::server::conns::Handshakes::new(MAX_HANDSHAKES.0, MAX_HANDSHAKES.1);
    let slots = Slots::default();
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
            let Some(shaking) = handshakes.begin(addr.ip().to_canonical()) else {
                metrics.refused("handshake", "busy");
                tracing::debug!(peer = %addr, "too many TLS handshakes in progress: turned away");
                continue;
            };
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.get());
            let tx = tx.clone();
            let metrics = metrics.clone();
            let slots = slots.clone();
            tokio::spawn(async move {
                let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await;
                drop(shaking);
                let tls = match handshake {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        metrics.refused("handshake", "tls");
                        tracing::warn!(
                            peer = %addr,
                            error = %e,
                            "refused a connection: TLS handshake failed (no or untrusted client certificate?)",
                        );
                        return;
                    }
                    Err(_) => {
                        metrics.refused("handshake", "timeout");
                        tracing::warn!(
                            peer = %addr,
                            "refused a connection: TLS handshake timed out",
                        );
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
                let names: Arc<[String]> = names.into();
                let Some(slot) = slots.take(&names) else {
                    metrics.refused("handshake", "connections");
                    tracing::warn!(
                        peer = %addr,
                        ?names,
                        "refused a connection: too many open, in all or of this certificate",
                    );
                    return;
                };
                let _ = tx
                    .send(PeerStream {
                        inner: tls,
                        peer: Peer { names },
                        _slot: slot,
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
