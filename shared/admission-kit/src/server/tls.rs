//! Serving certificates: loaded from files and reloaded when they change, or made on the spot
//! (`--self-signed`) for local use.
//!
//! The server resolves its certificate per handshake from a [`CertStore`], so a new certificate
//! is served to new connections as soon as it is loaded, without a restart. Files are polled
//! rather than watched with inotify: a Kubernetes secret volume updates by swapping a `..data`
//! symlink, which inotify on the file paths misses, while re-reading two small files every few
//! seconds is cheap and catches every kind of update.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why certificates could not be loaded or made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The PEM holds no certificate or no usable key.
    #[error("{0}")]
    Pem(String),
    /// The key type is not supported.
    #[error("unsupported private key: {0}")]
    Key(rustls::Error),
    /// Certificate generation failed.
    #[cfg(feature = "certificates")]
    #[error("cannot generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The TLS configuration could not be built.
    #[error("TLS configuration: {0}")]
    Config(rustls::Error),
}

/// Installs ring as the process-wide rustls crypto provider (the one provider of the workspace).
/// Safe to call more than once.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The certificate currently served; swapped atomically on reload.
#[derive(Debug)]
pub struct CertStore {
    current: ArcSwapOption<CertifiedKey>,
    /// `notAfter` of the served certificate, Unix seconds (0: none).
    not_after: std::sync::atomic::AtomicI64,
    /// The same as a metric, and the count of new certificates that were not taken
    /// (unreadable, key not matching, wrong names, expired). `None` only if the metric
    /// constructors refused their (constant, valid) names.
    metrics: Option<(prometheus::IntGauge, prometheus::IntCounter)>,
}

impl CertStore {
    /// An empty store: handshakes fail until a certificate is loaded.
    pub fn new() -> Arc<Self> {
        let gauge = prometheus::IntGauge::new(
            "admission_webhook_certificate_expiration_timestamp_seconds",
            "notAfter of the serving certificate this replica serves, Unix seconds.",
        );
        let counter = prometheus::IntCounter::new(
            "admission_webhook_certificate_rejected_total",
            "New serving certificates not taken (unreadable, key not matching, wrong names or expired); the previous one kept serving.",
        );
        Arc::new(Self {
            current: ArcSwapOption::empty(),
            not_after: std::sync::atomic::AtomicI64::new(0),
            metrics: gauge.ok().zip(counter.ok()),
        })
    }

    /// Serves `key` from the next handshake on.
    pub fn set(&self, key: CertifiedKey) {
        let not_after = key
            .cert
            .first()
            .and_then(|c| validity(c).ok())
            .map_or(0, |(_, b)| b);
        self.not_after
            .store(not_after, std::sync::atomic::Ordering::Release);
        if let Some((g, _)) = &self.metrics {
            g.set(not_after);
        }
        self.current.store(Some(Arc::new(key)));
    }

    /// Counts (and the caller logs) a new certificate that was not taken.
    pub fn reject(&self) {
        if let Some((_, c)) = &self.metrics {
            c.inc();
        }
    }

    /// The store's metrics, to register with the service's registry.
    pub fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        match &self.metrics {
            Some((g, c)) => vec![Box::new(g.clone()), Box::new(c.clone())],
            None => Vec::new(),
        }
    }

    /// Whether a certificate is loaded and not expired (readiness depends on it).
    pub fn loaded(&self) -> bool {
        self.current.load().is_some()
            && unix_now() < self.not_after.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The DER of the leaf certificate currently served.
    pub fn current_leaf(&self) -> Option<CertificateDer<'static>> {
        self.current
            .load()
            .as_ref()
            .and_then(|k| k.cert.first().cloned())
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }
}

/// A rustls server config: TLS 1.2 and 1.3 only, ALPN h2 and http/1.1, certificates from `store`.
pub fn server_config(store: Arc<CertStore>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_cert_resolver(store);
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// As [`server_config`], and every client must present a certificate that chains to the CA in
/// `client_ca`: the API server's, which it presents through its admission kubeconfig. Read once at
/// start (restart to trust another CA); a handshake without such a certificate fails.
pub fn server_config_with_clients(
    store: Arc<CertStore>,
    client_ca: &Path,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in pem_chain(&read(client_ca)?, "client CA")? {
        roots.add(c).map_err(TlsError::Config)?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| TlsError::Pem(format!("client CA {}: {e}", client_ca.display())))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(TlsError::Config)?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(store);
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

pub(crate) fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// The certificates of a PEM file (`what` names it in errors); at least one.
pub(crate) fn pem_chain(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem(format!("bad {what} PEM: {e}")))?;
    if certs.is_empty() {
        return Err(TlsError::Pem(format!("no certificate in the {what} file")));
    }
    Ok(certs)
}

/// The private key of a PEM file.
pub(crate) fn pem_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    rustls_pemfile::private_key(&mut &pem[..])
        .map_err(|e| TlsError::Pem(format!("bad key PEM: {e}")))?
        .ok_or_else(|| TlsError::Pem("no private key in the key file".into()))
}

/// The PEM blocks of a text, each normalised to end in a newline (bundles compare by block).
pub(crate) fn pem_blocks(pem: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in pem.lines() {
        if line.starts_with("-----BEGIN ") {
            cur.clear();
        }
        cur.push_str(line.trim_end());
        cur.push('\n');
        if line.starts_with("-----END ") {
            out.push(std::mem::take(&mut cur));
        }
    }
    out
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// `(notBefore, notAfter)` of a certificate, Unix seconds.
pub fn validity(cert: &CertificateDer<'_>) -> Result<(i64, i64), TlsError> {
    let (_, c) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| TlsError::Pem(format!("bad certificate: {e}")))?;
    Ok((
        c.validity().not_before.timestamp(),
        c.validity().not_after.timestamp(),
    ))
}

/// Builds a served key from PEM certificate chain and PEM private key: taken only whole, so the
/// key must be the certificate's and the certificate must not have expired.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, TlsError> {
    let certs = pem_chain(cert_pem, "certificate")?;
    let key = pem_key(key_pem)?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key).map_err(TlsError::Key)?;
    let (_, not_after) = validity(&certs[0])?;
    if not_after <= unix_now() {
        return Err(TlsError::Pem("the certificate has expired".into()));
    }
    let ck = CertifiedKey::new(certs, signing);
    match ck.keys_match() {
        // `Unknown`: the provider cannot tell (not for ring's key types); nothing to compare.
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(ck),
        Err(_) => Err(TlsError::Pem(
            "the private key does not belong to the certificate".into(),
        )),
    }
}

/// Certificate and key files, reloaded when their contents change.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

impl CertFiles {
    fn read_both(&self) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
        Ok((read(&self.cert)?, read(&self.key)?))
    }

    /// Loads the files into `store` once; an error leaves the store as it was.
    pub fn load_into(&self, store: &CertStore) -> Result<(), TlsError> {
        let (c, k) = self.read_both()?;
        store.set(certified_key(&c, &k)?);
        Ok(())
    }

    /// Polls the files every `every` and loads them into `store` whenever their bytes change and
    /// form a valid pair. A half-written, mismatched or expired pair is logged and counted once
    /// per content, while the previous certificate keeps being served; it is retried as soon as
    /// either file changes again (a key written after its certificate, a symlink swap finishing).
    pub fn spawn_reloader(
        self,
        store: Arc<CertStore>,
        every: Duration,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tried = self.read_both().ok();
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let now = match self.read_both() {
                    Ok(v) => v,
                    Err(e) => {
                        tracing::warn!(
                            error = %e,
                            "cannot read serving certificate; keeping the current one",
                        );
                        continue;
                    }
                };
                if tried.as_ref() == Some(&now) {
                    continue;
                }
                match certified_key(&now.0, &now.1) {
                    Ok(k) => {
                        store.set(k);
                        tracing::info!(cert = %self.cert.display(), "serving certificate reloaded");
                    }
                    Err(e) => {
                        store.reject();
                        tracing::warn!(
                            error = %e,
                            cert = %self.cert.display(),
                            "new serving certificate not taken; keeping the current one",
                        );
                    }
                }
                tried = Some(now);
            }
        })
    }
}

#[cfg(all(test, feature = "certificates"))]
mod tests {
    use super::*;
    use crate::server::mtls::SelfSigned;

    #[test]
    fn self_signed_pair_loads() {
        install_crypto_provider();
        let s = SelfSigned::generate(&["localhost".into(), "127.0.0.1".into()]).unwrap();
        assert!(s.ca_pem.contains("BEGIN CERTIFICATE"));
        let store = CertStore::new();
        assert!(!store.loaded());
        store.set(s.certified_key().unwrap());
        assert!(store.loaded());
        assert!(server_config(store).is_ok());
    }

    #[test]
    fn a_pair_is_taken_only_whole_and_unexpired() {
        install_crypto_provider();
        let a = SelfSigned::generate(&["localhost".into()]).unwrap();
        let b = SelfSigned::generate(&["localhost".into()]).unwrap();
        let e = certified_key(a.cert_pem.as_bytes(), b.key_pem.as_bytes())
            .err()
            .unwrap();
        assert!(e.to_string().contains("does not belong"), "{e}");
        let ca = crate::server::mtls::Pki::new("t").unwrap();
        let past = std::time::SystemTime::now() - Duration::from_secs(7200);
        let (c, k) = ca
            .issue_for(
                &["localhost".into()],
                true,
                false,
                crate::server::mtls::Validity::starting(past, Duration::from_secs(3600)),
            )
            .unwrap();
        let e = certified_key(c.as_bytes(), k.as_bytes()).err().unwrap();
        assert!(e.to_string().contains("expired"), "{e}");
    }

    #[tokio::test]
    async fn reloader_keeps_the_served_pair_until_a_whole_new_one_arrives() {
        install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let files = CertFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        let a = SelfSigned::generate(&["localhost".into()]).unwrap();
        let b = SelfSigned::generate(&["localhost".into()]).unwrap();
        std::fs::write(&files.cert, &a.cert_pem).unwrap();
        std::fs::write(&files.key, &a.key_pem).unwrap();
        let store = CertStore::new();
        files.load_into(&store).unwrap();
        let first = store.current_leaf().unwrap();
        files
            .clone()
            .spawn_reloader(store.clone(), Duration::from_millis(20));
        // The certificate first, the key later: the half-written pair is never served.
        std::fs::write(&files.cert, &b.cert_pem).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(store.current_leaf().unwrap(), first);
        assert!(store.loaded());
        std::fs::write(&files.key, &b.key_pem).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_ne!(store.current_leaf().unwrap(), first);
    }

    #[test]
    fn bad_pem_is_a_clear_error() {
        let e = certified_key(b"junk", b"junk").err().unwrap();
        assert!(e.to_string().contains("no certificate"), "{e}");
    }
}
