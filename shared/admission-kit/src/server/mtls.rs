//! Mutual TLS between our own services (scheduling-webhook → quota-state): each side presents a
//! certificate signed by one CA and verifies the other's, so the server knows which service
//! calls ([`peer_names`]) and the caller knows it reached the real server.
//!
//! The certificate, key and CA files are polled and the whole rustls configuration is rebuilt
//! when their bytes change ([`Reloading`]): a renewed certificate or CA is used from the next
//! connection on, without a restart. Polling for the reason given in [`crate::server::tls`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::pki_types::CertificateDer;

#[cfg(feature = "certificates")]
use rustls::sign::CertifiedKey;

#[cfg(feature = "certificates")]
use crate::server::tls::certified_key;
use crate::server::tls::{TlsError, pem_chain as chain, pem_key as key, read};

/// The three PEM files of one side of a mutual-TLS link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MtlsFiles {
    /// Our certificate chain.
    pub cert: PathBuf,
    /// Our private key.
    pub key: PathBuf,
    /// The CA (one or more certificates) the other side's certificate must chain to.
    pub ca: PathBuf,
}

/// The bytes of the three files, compared to notice a change.
type Contents = (Vec<u8>, Vec<u8>, Vec<u8>);

impl MtlsFiles {
    fn contents(&self) -> Result<Contents, TlsError> {
        Ok((read(&self.cert)?, read(&self.key)?, read(&self.ca)?))
    }
}

fn roots(pem: &[u8]) -> Result<Arc<rustls::RootCertStore>, TlsError> {
    let mut store = rustls::RootCertStore::empty();
    for c in chain(pem, "CA")? {
        store.add(c).map_err(TlsError::Config)?;
    }
    Ok(Arc::new(store))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

const VERSIONS: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

fn server_config_of(c: &Contents) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots(&c.2)?, provider())
            .build()
            .map_err(|e| TlsError::Pem(format!("CA: {e}")))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)
        .map_err(TlsError::Config)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain(&c.0, "certificate")?, key(&c.1)?)
        .map_err(TlsError::Key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(cfg))
}

/// A server configuration from PEM texts: our certificate and key, and the CA certificates a
/// client's certificate must chain to.
pub fn server_config_from_pem(
    cert: &[u8],
    key: &[u8],
    client_cas: &[u8],
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    server_config_of(&(cert.to_vec(), key.to_vec(), client_cas.to_vec()))
}

fn client_config_of(c: &Contents) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)
        .map_err(TlsError::Config)?
        .with_root_certificates(roots(&c.2)?)
        .with_client_auth_cert(chain(&c.0, "certificate")?, key(&c.1)?)
        .map_err(TlsError::Key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(cfg))
}

/// A client configuration from PEM texts: our certificate and key, and the CA certificates the
/// server's certificate must chain to.
pub fn client_config_from_pem(
    cert: &[u8],
    key: &[u8],
    server_cas: &[u8],
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    client_config_of(&(cert.to_vec(), key.to_vec(), server_cas.to_vec()))
}

/// A client configuration that trusts nothing and presents nothing: every handshake fails.
/// Stands in until real credentials are loaded.
pub fn client_config_refusing() -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)
        .map_err(TlsError::Config)?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(cfg))
}

/// A rustls configuration rebuilt from its files whenever their bytes change.
#[derive(Debug)]
pub struct Reloading<T> {
    current: ArcSwap<T>,
}

impl<T> Reloading<T> {
    /// A configuration that never changes (tests, and callers that build their own).
    pub fn fixed(config: Arc<T>) -> Arc<Self> {
        Arc::new(Self {
            current: ArcSwap::new(config),
        })
    }

    /// The configuration for the next connection.
    pub fn get(&self) -> Arc<T> {
        self.current.load_full()
    }

    /// Replaces the configuration from the next connection on (configurations built from
    /// somewhere else than files, such as a managed Secret).
    pub fn set(&self, config: Arc<T>) {
        self.current.store(config);
    }
}

impl<T: Send + Sync + 'static> Reloading<T> {
    /// The configuration for each next connection, as a function: what a connector that knows
    /// nothing of the kit takes (`quota_protocol::channel::mtls_channel`).
    pub fn source(self: Arc<Self>) -> Arc<dyn Fn() -> Arc<T> + Send + Sync> {
        Arc::new(move || self.get())
    }
}

fn reloading<T: Send + Sync + std::fmt::Debug + 'static>(
    files: MtlsFiles,
    every: Duration,
    build: fn(&Contents) -> Result<Arc<T>, TlsError>,
) -> Result<Arc<Reloading<T>>, TlsError> {
    let mut last = files.contents()?;
    let me = Arc::new(Reloading {
        current: ArcSwap::new(build(&last)?),
    });
    let weak = Arc::downgrade(&me);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(me) = weak.upgrade() else { return };
            let now = match files.contents() {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        "cannot read mutual-TLS files; keeping the current ones",
                    );
                    continue;
                }
            };
            if now == last {
                continue;
            }
            match build(&now) {
                Ok(cfg) => {
                    me.current.store(cfg);
                    tracing::info!(
                        cert = %files.cert.display(),
                        ca = %files.ca.display(),
                        "mutual-TLS files reloaded",
                    );
                    last = now;
                }
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        "new mutual-TLS files not usable yet; keeping the current ones",
                    )
                }
            }
        }
    });
    Ok(me)
}

/// A server configuration that requires a client certificate signed by `files.ca` (ALPN h2),
/// reloaded every `every`. Needs a tokio runtime.
pub fn server(
    files: MtlsFiles,
    every: Duration,
) -> Result<Arc<Reloading<rustls::ServerConfig>>, TlsError> {
    reloading(files, every, server_config_of)
}

/// A client configuration that presents `files.cert` and trusts only `files.ca` (ALPN h2),
/// reloaded every `every`. Needs a tokio runtime.
pub fn client(
    files: MtlsFiles,
    every: Duration,
) -> Result<Arc<Reloading<rustls::ClientConfig>>, TlsError> {
    reloading(files, every, client_config_of)
}

/// A client configuration that trusts `ca` and presents no certificate: what an unauthenticated
/// caller looks like, to show that a mutual-TLS server refuses it (tests, diagnostics).
pub fn client_without_certificate(
    ca: &Path,
) -> Result<Arc<Reloading<rustls::ClientConfig>>, TlsError> {
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)
        .map_err(TlsError::Config)?
        .with_root_certificates(roots(&read(ca)?)?)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Reloading::fixed(Arc::new(cfg)))
}

/// The names a peer certificate carries: its subject common names, DNS and URI subject
/// alternative names. Empty when the certificate does not parse (rustls has verified it by then).
pub fn peer_names(cert: &CertificateDer<'_>) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let Ok((_, c)) = x509_parser::parse_x509_certificate(cert.as_ref()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = c
        .subject()
        .iter_common_name()
        .filter_map(|a| a.as_str().ok().map(str::to_owned))
        .collect();
    if let Ok(Some(san)) = c.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(s) | GeneralName::URI(s) => names.push((*s).to_owned()),
                _ => {}
            }
        }
    }
    names
}

#[cfg(feature = "certificates")]
/// A CA in memory that issues server and client certificates: local runs and tests, and the
/// managed certificates of [`crate::cluster::managed`] (which keeps the CA in a Secret and loads it back
/// with [`Pki::from_pem`]).
pub struct Pki {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_pem: String,
    key_pem: String,
}

#[cfg(feature = "certificates")]
/// A certificate's validity window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// Not valid before this time.
    pub not_before: std::time::SystemTime,
    /// Not valid after this time.
    pub not_after: std::time::SystemTime,
}

#[cfg(feature = "certificates")]
impl Validity {
    /// From now (backdated by a tenth of the lifetime, at most five minutes, for clock skew
    /// between us and the API server) for `lifetime`.
    pub fn from_now(lifetime: Duration) -> Self {
        Self::starting(std::time::SystemTime::now(), lifetime)
    }

    /// As [`Validity::from_now`], from `now`.
    pub fn starting(now: std::time::SystemTime, lifetime: Duration) -> Self {
        let skew = (lifetime / 10).min(Duration::from_secs(300));
        Self {
            not_before: now - skew,
            not_after: now + lifetime,
        }
    }

    fn apply(&self, p: &mut rcgen::CertificateParams) {
        p.not_before = self.not_before.into();
        p.not_after = self.not_after.into();
    }
}

#[cfg(feature = "certificates")]
impl Default for Validity {
    /// The validity rcgen gives when none is set would be centuries; ours is a year.
    fn default() -> Self {
        Self::from_now(Duration::from_secs(365 * 24 * 3600))
    }
}

#[cfg(feature = "certificates")]
impl Pki {
    /// A new CA named `common_name`, valid for a year.
    pub fn new(common_name: &str) -> Result<Self, TlsError> {
        Self::with_validity(common_name, Validity::default())
    }

    /// A new CA named `common_name` valid for `validity`.
    pub fn with_validity(common_name: &str, validity: Validity) -> Result<Self, TlsError> {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, common_name);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        validity.apply(&mut ca);
        let key = KeyPair::generate()?;
        let cert = ca.self_signed(&key)?;
        let key_pem = key.serialize_pem();
        Ok(Self {
            ca_pem: cert.pem(),
            key_pem,
            issuer: rcgen::Issuer::new(ca, key),
        })
    }

    /// A CA from its certificate and key (PEM), as [`Pki::ca_pem`] and [`Pki::key_pem`] wrote them.
    pub fn from_pem(ca_pem: &str, key_pem: &str) -> Result<Self, TlsError> {
        let key = rcgen::KeyPair::from_pem(key_pem)?;
        let ca = chain(ca_pem.as_bytes(), "CA")?;
        let issuer = rcgen::Issuer::from_ca_cert_der(&ca[0], key)?;
        Ok(Self {
            issuer,
            ca_pem: ca_pem.to_owned(),
            key_pem: key_pem.to_owned(),
        })
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.ca_pem.clone()
    }

    /// The CA's private key, PEM.
    pub fn key_pem(&self) -> String {
        self.key_pem.clone()
    }

    /// A certificate for `names` (DNS names or IP addresses; the first is also the common
    /// name), usable for serving and/or as a client, valid for a year: `(certificate PEM, key
    /// PEM)`.
    pub fn issue(
        &self,
        names: &[String],
        server: bool,
        client: bool,
    ) -> Result<(String, String), TlsError> {
        self.issue_for(names, server, client, Validity::default())
    }

    /// As [`Pki::issue`], valid for `validity`.
    pub fn issue_for(
        &self,
        names: &[String],
        server: bool,
        client: bool,
        validity: Validity,
    ) -> Result<(String, String), TlsError> {
        use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair};
        let mut leaf = CertificateParams::new(names.to_vec())?;
        leaf.distinguished_name.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_else(|| "localhost".into()),
        );
        if server {
            leaf.extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        if client {
            leaf.extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth);
        }
        validity.apply(&mut leaf);
        let key = KeyPair::generate()?;
        let cert = leaf.signed_by(&key, &self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// Issues as [`Pki::issue`] and writes `<stem>.crt`, `<stem>.key` and `<stem>-ca.crt` (this
    /// CA) into `dir`.
    pub fn write(
        &self,
        dir: &Path,
        stem: &str,
        names: &[String],
        server: bool,
        client: bool,
    ) -> Result<MtlsFiles, TlsError> {
        let (cert, key) = self.issue(names, server, client)?;
        let files = MtlsFiles {
            cert: dir.join(format!("{stem}.crt")),
            key: dir.join(format!("{stem}.key")),
            ca: dir.join(format!("{stem}-ca.crt")),
        };
        for (path, text) in [
            (&files.cert, cert),
            (&files.key, key),
            (&files.ca, self.ca_pem()),
        ] {
            std::fs::write(path, text).map_err(|source| TlsError::Read {
                path: path.display().to_string(),
                source,
            })?;
        }
        Ok(files)
    }
}

#[cfg(feature = "certificates")]
/// A CA and a serving certificate signed by it, made in memory.
pub struct SelfSigned {
    /// The CA certificate, PEM: the `caBundle` of webhook configurations.
    pub ca_pem: String,
    /// The serving certificate chain, PEM.
    pub cert_pem: String,
    /// The serving key, PEM.
    pub key_pem: String,
}

#[cfg(feature = "certificates")]
impl SelfSigned {
    /// Makes a CA and a serving certificate for `names` (DNS names or IP addresses).
    pub fn generate(names: &[String]) -> Result<Self, TlsError> {
        let ca = Pki::new("admission-kit self-signed CA")?;
        let (cert_pem, key_pem) = ca.issue(names, true, false)?;
        Ok(Self {
            ca_pem: ca.ca_pem(),
            cert_pem,
            key_pem,
        })
    }

    /// The serving key for the store.
    pub fn certified_key(&self) -> Result<CertifiedKey, TlsError> {
        certified_key(self.cert_pem.as_bytes(), self.key_pem.as_bytes())
    }
}

#[cfg(all(test, feature = "certificates"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn issued_pairs_build_both_sides_and_carry_their_names() {
        crate::server::tls::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::new("test CA").unwrap();
        let s = pki
            .write(dir.path(), "server", &["quota-state".into()], true, false)
            .unwrap();
        let c = pki
            .write(
                dir.path(),
                "client",
                &["scheduling-webhook".into()],
                false,
                true,
            )
            .unwrap();
        assert!(server(s, Duration::from_secs(1)).is_ok());
        let cfg = client(c.clone(), Duration::from_secs(1)).unwrap();
        assert_eq!(cfg.get().alpn_protocols, vec![b"h2".to_vec()]);
        let pem = std::fs::read(&c.cert).unwrap();
        let der = chain(&pem, "certificate").unwrap();
        assert_eq!(
            peer_names(&der[0]),
            vec![
                "scheduling-webhook".to_owned(),
                "scheduling-webhook".to_owned()
            ]
        );
        let missing = MtlsFiles {
            ca: dir.path().join("nope"),
            ..c
        };
        assert!(
            client(missing, Duration::from_secs(1))
                .unwrap_err()
                .to_string()
                .contains("nope")
        );
    }
}
