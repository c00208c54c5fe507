//! Managed certificates (`serve --tls-mode=managed`): the service keeps its own CA and serving
//! certificate in a Secret of its namespace, serves from memory, rotates them, and keeps the
//! caBundle of its webhook configurations current, so that no cert-manager is needed.
//!
//! Every replica watches the Secret ([`spawn_loader`]) and serves its pair from the next
//! handshake on, once the pair is whole (the key is the certificate's), unexpired, and verifies
//! for every configured name against the Secret's CA bundle. One replica, holder of a Lease,
//! writes ([`spawn_writer`]); it reconciles in small steps ([`plan`]), each one write, so that a
//! writer killed between two steps leaves a state the next writer continues from:
//!
//! 1. No usable CA: a new CA is made *pending* (`ca-next.*`), added to the bundle next to every
//!    CA the configurations still trust (a deleted Secret does not untrust what is served).
//! 2. The configurations' caBundle is set to the bundle; the time is noted in the Secret.
//! 3. After the propagation delay (the API servers' informers have the new bundle), the pending
//!    CA becomes the signing CA and a serving certificate it signs is written.
//! 4. The serving certificate is renewed at two thirds of its lifetime; the CA likewise, which
//!    goes through steps 1–3 with the old CA still in the bundle.
//! 5. A propagation delay after a promotion (every replica has swapped), CAs other than the
//!    signing and pending ones are dropped from the bundle, then from the configurations.
//!
//! So whichever certificate a replica serves at any moment is signed by a CA the API server
//! already trusts: no review fails during a rotation.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::cluster::registration::{RegisterError, Registered, Registrar};
use crate::server::mtls::{Pki, Validity};
use crate::server::tls::{CertStore, TlsError, certified_key, pem_chain, validity};

/// Secret key of the signing CA's certificate.
pub const CA_CERT: &str = "ca.crt";
/// Secret key of the signing CA's private key.
pub const CA_KEY: &str = "ca.key";
/// Secret key of the pending CA's certificate (during a CA rotation).
pub const NEXT_CERT: &str = "ca-next.crt";
/// Secret key of the pending CA's private key.
pub const NEXT_KEY: &str = "ca-next.key";
/// Secret key of the CAs the webhook configurations must trust (PEM, concatenated).
pub const BUNDLE: &str = "ca-bundle.crt";
/// Secret key of the serving certificate.
pub const TLS_CERT: &str = "tls.crt";
/// Secret key of the serving key.
pub const TLS_KEY: &str = "tls.key";
/// Client Secret key of the CAs the client trusts (the bundle), named as cert-manager names it.
pub const CLIENT_CA: &str = "ca.crt";
/// Annotation: the service a Secret or Lease belongs to. The overlays ship each service's
/// Secrets and Leases empty with it, so that no account needs `create`; a service refuses to
/// load or write one that names another owner (two services pointed at one name by mistake
/// never share a CA). Objects without it (made by the service itself) are its own.
pub const OWNER: &str = "admission-webhooks.io/owner";

/// Whether `meta` names an owner other than `service`: `Err` says whose it is.
pub fn check_owner(meta: &kube::api::ObjectMeta, service: &str) -> Result<(), String> {
    match meta.annotations.as_ref().and_then(|a| a.get(OWNER)) {
        Some(owner) if owner != service => Err(format!(
            "{} belongs to {owner} ({OWNER}), not to {service}",
            meta.name.as_deref().unwrap_or_default()
        )),
        _ => Ok(()),
    }
}

/// Whether the Lease `namespace/name`, if it exists, is `service`'s (see [`OWNER`]): checked
/// before competing for it, so that a service never holds, renews or waits on another's Lease.
pub async fn check_lease_owner(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    service: &str,
) -> Result<(), String> {
    let api: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), namespace);
    match api.get_opt(name).await {
        Ok(Some(l)) => check_owner(&l.metadata, service),
        Ok(None) => Ok(()),
        Err(e) => Err(format!("get Lease {name}: {e}")),
    }
}

/// Annotation: when the configurations were seen carrying the pending CA (RFC 3339).
pub const REGISTERED_AT: &str = "admission-webhooks.io/ca-next-registered-at";
/// Annotation: when the pending CA became the signing CA (RFC 3339).
pub const PROMOTED_AT: &str = "admission-webhooks.io/ca-promoted-at";

/// A certificate and its key, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    /// Certificate PEM.
    pub cert: String,
    /// Private key PEM.
    pub key: String,
}

/// What the Secret holds, read leniently: a key that is missing or not UTF-8 is `None`, and
/// [`plan`] decides what is usable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Material {
    /// The CA that signs serving certificates.
    pub ca: Option<Pair>,
    /// A CA on its way in (registered, not yet signing).
    pub next: Option<Pair>,
    /// The serving certificate and key.
    pub serving: Option<Pair>,
    /// The CA certificates to trust, one PEM each, in order.
    pub bundle: Vec<String>,
    /// When the configurations carried the bundle with `next` in it.
    pub next_registered_at: Option<SystemTime>,
    /// When `ca` was promoted from `next`.
    pub promoted_at: Option<SystemTime>,
}

fn time_of(s: &str) -> Option<SystemTime> {
    OffsetDateTime::parse(s, &Rfc3339)
        .ok()
        .map(SystemTime::from)
}

fn time_text(t: SystemTime) -> String {
    OffsetDateTime::from(t)
        .format(&Rfc3339)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into())
}

/// A Secret's value as text: `None` when missing, blank or not UTF-8.
fn secret_text(secret: &Secret, key: &str) -> Option<String> {
    secret
        .data
        .as_ref()?
        .get(key)
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
        .filter(|s| !s.trim().is_empty())
}

impl Material {
    /// Reads a Secret's data and annotations.
    pub fn of(secret: &Secret) -> Self {
        let text = |k: &str| secret_text(secret, k);
        let pair = |c: &str, k: &str| {
            Some(Pair {
                cert: text(c)?,
                key: text(k)?,
            })
        };
        let ann = secret.metadata.annotations.clone().unwrap_or_default();
        Self {
            ca: pair(CA_CERT, CA_KEY),
            next: pair(NEXT_CERT, NEXT_KEY),
            serving: pair(TLS_CERT, TLS_KEY),
            bundle: text(BUNDLE)
                .map(|b| crate::server::tls::pem_blocks(&b))
                .unwrap_or_default(),
            next_registered_at: ann.get(REGISTERED_AT).and_then(|s| time_of(s)),
            promoted_at: ann.get(PROMOTED_AT).and_then(|s| time_of(s)),
        }
    }

    /// The bundle as one PEM text (what goes into `caBundle`).
    pub fn bundle_pem(&self) -> String {
        self.bundle.concat()
    }

    /// The Secret's data and annotations for this material.
    pub fn write_into(&self, secret: &mut Secret) {
        let mut data = BTreeMap::new();
        let mut put = |k: &str, v: &str| {
            data.insert(k.to_owned(), ByteString(v.as_bytes().to_vec()));
        };
        for (p, c, k) in [
            (&self.ca, CA_CERT, CA_KEY),
            (&self.next, NEXT_CERT, NEXT_KEY),
            (&self.serving, TLS_CERT, TLS_KEY),
        ] {
            if let Some(p) = p {
                put(c, &p.cert);
                put(k, &p.key);
            }
        }
        put(BUNDLE, &self.bundle_pem());
        secret.data = Some(data);
        secret.type_ = Some("Opaque".into());
        let ann = secret
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        ann.remove(REGISTERED_AT);
        ann.remove(PROMOTED_AT);
        if let Some(t) = self.next_registered_at {
            ann.insert(REGISTERED_AT.into(), time_text(t));
        }
        if let Some(t) = self.promoted_at {
            ann.insert(PROMOTED_AT.into(), time_text(t));
        }
    }
}

/// Lifetimes and delays of managed certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    /// CA lifetime; renewed at two thirds.
    pub ca: Duration,
    /// Serving certificate lifetime; renewed at two thirds.
    pub serving: Duration,
    /// How long a new caBundle is given to reach every API server before a certificate signed
    /// by the new CA is served, and how long an old CA stays trusted after the switch.
    pub propagation: Duration,
}

/// One step of reconciliation.
#[derive(Debug)]
pub enum Step {
    /// Write this material to the Secret; the `&str` names the event for the log.
    Write(Box<Material>, Event),
    /// Set the configurations' caBundle, and every client Secret's `ca.crt`, to the material's
    /// bundle.
    Register,
    /// Write a new client certificate for the identity.
    Client(String, Box<Pair>),
    /// Nothing due before this long.
    Wait(Duration),
}

/// What a written step did (log lines and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A new CA was made, pending registration.
    CaIssued,
    /// The configurations were seen carrying the pending CA.
    CaRegistered,
    /// The pending CA now signs; a new serving certificate was issued by it.
    CaPromoted,
    /// CAs no longer needed were dropped from the bundle.
    CaRetired,
    /// A new serving certificate was issued.
    ServingIssued,
    /// The bundle lacked the signing or pending CA and was repaired.
    BundleRepaired,
    /// A new client certificate was issued.
    ClientIssued,
}

impl Event {
    /// The label used in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CaIssued => "ca-issued",
            Self::CaRegistered => "ca-registered",
            Self::CaPromoted => "ca-promoted",
            Self::CaRetired => "ca-retired",
            Self::ServingIssued => "serving-issued",
            Self::BundleRepaired => "bundle-repaired",
            Self::ClientIssued => "client-issued",
        }
    }
}

fn der(pem: &str) -> Option<CertificateDer<'static>> {
    pem_chain(pem.as_bytes(), "certificate")
        .ok()
        .and_then(|c| c.into_iter().next())
}

fn secs(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn at(s: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

/// `(notBefore, notAfter)` of a PEM certificate.
fn window(pem: &str) -> Option<(i64, i64)> {
    validity(&der(pem)?).ok()
}

/// When a certificate valid `(nb, na)` is due for renewal: two thirds into its life.
fn renew_at((nb, na): (i64, i64)) -> SystemTime {
    at(nb + (na - nb) * 2 / 3)
}

/// A CA pair that loads, whose key is its certificate's, and that is valid at `now`.
fn usable_ca(p: &Pair, now: SystemTime) -> Option<(Pki, (i64, i64))> {
    let w = window(&p.cert)?;
    let pki = Pki::from_pem(&p.cert, &p.key).ok()?;
    (w.0 <= secs(now) && secs(now) < w.1).then_some((pki, w))
}

/// Whether `leaf` (with `key`) is whole and verifies for every one of `names` against `roots`
/// at `now`: the check a replica makes before serving it, and the writer before keeping it.
pub fn verifies(
    leaf: &Pair,
    roots: &[String],
    names: &[String],
    now: SystemTime,
) -> Result<(), TlsError> {
    certified_key(leaf.cert.as_bytes(), leaf.key.as_bytes())?;
    let end = der(&leaf.cert).ok_or_else(|| TlsError::Pem("no serving certificate".into()))?;
    let mut store = rustls::RootCertStore::empty();
    for r in roots {
        if let Some(d) = der(r) {
            // A CA that does not parse as a trust anchor is simply not trusted.
            let _ = store.add(d);
        }
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(store),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| TlsError::Pem(format!("no usable CA: {e}")))?;
    let when = UnixTime::since_unix_epoch(
        now.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default(),
    );
    for n in names {
        let name = ServerName::try_from(n.as_str())
            .map_err(|e| TlsError::Pem(format!("{n:?} is not a DNS name or IP address: {e}")))?
            .to_owned();
        verifier
            .verify_server_cert(&end, &[], &name, &[], when)
            .map_err(|e| TlsError::Pem(format!("certificate does not verify for {n}: {e}")))?;
    }
    Ok(())
}

/// What [`plan`] needs besides the material.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Names the serving certificate must be valid for.
    pub names: Vec<String>,
    /// Common-name prefix of the CAs (the service's name).
    pub service: String,
    /// Lifetimes and delays.
    pub lifetimes: Lifetimes,
    /// Identities that get a client certificate from the CA (mutual TLS callers), each in the
    /// Secret [`client_secret`] names, with the CA bundle as `ca.crt`.
    pub clients: Vec<String>,
}

/// The Secret holding `identity`'s client certificate, of the service `service`.
pub fn client_secret(service: &str, identity: &str) -> String {
    format!("{service}-client-{identity}")
}

impl Policy {
    fn client(
        &self,
        now: SystemTime,
        id: &str,
        ca: &Pki,
        ca_window: (i64, i64),
    ) -> Result<Pair, TlsError> {
        let mut v = Validity::starting(now, self.lifetimes.serving);
        v.not_after = v.not_after.min(at(ca_window.1));
        let (cert, key) = ca.issue_for(&[id.to_owned()], false, true, v)?;
        Ok(Pair { cert, key })
    }

    fn new_ca(&self, now: SystemTime) -> Result<Pair, TlsError> {
        let pki = Pki::with_validity(
            &format!("{} CA {}", self.service, time_text(now)),
            Validity::starting(now, self.lifetimes.ca),
        )?;
        Ok(Pair {
            cert: pki.ca_pem(),
            key: pki.key_pem(),
        })
    }

    fn serving(&self, now: SystemTime, ca: &Pki, ca_window: (i64, i64)) -> Result<Pair, TlsError> {
        let mut v = Validity::starting(now, self.lifetimes.serving);
        v.not_after = v.not_after.min(at(ca_window.1));
        let (cert, key) = ca.issue_for(&self.names, true, false, v)?;
        Ok(Pair { cert, key })
    }
}

fn still_valid(pem: &str, now: SystemTime) -> bool {
    window(pem).is_some_and(|(_, na)| secs(now) < na)
}

/// What a client Secret holds: its pair (if any) and its `ca.crt`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientMaterial {
    /// The client certificate and key.
    pub pair: Option<Pair>,
    /// The CA bundle the client trusts (PEM).
    pub ca: String,
}

fn client_verifies(cert: &str, ca: &str, now: SystemTime) -> bool {
    let (Some(end), Some(root)) = (der(cert), der(ca)) else {
        return false;
    };
    let mut store = rustls::RootCertStore::empty();
    if store.add(root).is_err() {
        return false;
    }
    let Ok(v) = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(store),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build() else {
        return false;
    };
    let when = UnixTime::since_unix_epoch(
        now.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default(),
    );
    v.verify_client_cert(&end, &[], when).is_ok()
}

/// The next step from `m` at `now`: pure, so every state a writer can leave is tested alone.
/// `clients` holds the client Secrets of [`Policy::clients`], by identity.
pub fn plan(
    now: SystemTime,
    m: &Material,
    reg: &Registered,
    clients: &BTreeMap<String, ClientMaterial>,
    p: &Policy,
) -> Result<Step, TlsError> {
    let ca = m.ca.as_ref().and_then(|c| usable_ca(c, now));
    let next = m.next.as_ref().and_then(|c| usable_ca(c, now));
    let prop = p.lifetimes.propagation;
    let write = |m: Material, e| Ok(Step::Write(Box::new(m), e));

    // 1. Nothing to sign with and nothing on its way: a new pending CA, trusted next to every
    //    CA still trusted now.
    if ca.is_none() && next.is_none() {
        let fresh = p.new_ca(now)?;
        let mut bundle = vec![fresh.cert.clone()];
        for c in reg.cas.iter().chain(&m.bundle) {
            if still_valid(c, now) && !bundle.contains(c) {
                bundle.push(c.clone());
            }
        }
        return write(
            Material {
                ca: None,
                next: Some(fresh),
                serving: m.serving.clone(),
                bundle,
                next_registered_at: None,
                promoted_at: m.promoted_at,
            },
            Event::CaIssued,
        );
    }
    let ca_pair = ca.as_ref().and(m.ca.as_ref());
    let next_pair = next.as_ref().and(m.next.as_ref());

    // The bundle must hold the signing and the pending CA.
    let missing: Vec<&Pair> = ca_pair
        .into_iter()
        .chain(next_pair)
        .filter(|c| !m.bundle.contains(&c.cert))
        .collect();
    if !missing.is_empty() {
        let mut n = m.clone();
        n.bundle.extend(missing.into_iter().map(|c| c.cert.clone()));
        n.next_registered_at = None;
        return write(n, Event::BundleRepaired);
    }
    // 2. The configurations (and clients) carry the bundle before anything it enables is
    //    served.
    let bundle = m.bundle_pem();
    let clients_hold = p
        .clients
        .iter()
        .all(|id| clients.get(id).is_some_and(|c| c.ca == bundle));
    if !reg.holds_bundle || !clients_hold {
        return Ok(Step::Register);
    }
    let mut wait = Duration::MAX;
    let until = |t: SystemTime| t.duration_since(now).unwrap_or_default();

    // 3. The pending CA: note its registration, promote it a propagation delay later.
    if let (Some(np), Some((npki, nw))) = (next_pair, &next) {
        match m.next_registered_at {
            None => {
                let mut n = m.clone();
                n.next_registered_at = Some(if reg.fresh {
                    now.checked_sub(prop).unwrap_or(now)
                } else {
                    now
                });
                return write(n, Event::CaRegistered);
            }
            Some(t) if now >= t + prop => {
                let serving = p.serving(now, npki, *nw)?;
                return write(
                    Material {
                        ca: Some(np.clone()),
                        next: None,
                        serving: Some(serving),
                        bundle: m.bundle.clone(),
                        next_registered_at: None,
                        promoted_at: Some(now),
                    },
                    Event::CaPromoted,
                );
            }
            Some(t) => wait = wait.min(until(t + prop)),
        }
    }
    let (Some(cp), Some((cpki, cw))) = (ca_pair, &ca) else {
        // Only a pending CA so far: the promotion above is what comes next.
        return Ok(Step::Wait(wait));
    };

    // 4. The CA is renewed at two thirds of its life (through a pending CA).
    if next.is_none() {
        let due = renew_at(*cw);
        if now >= due {
            let fresh = p.new_ca(now)?;
            let mut n = m.clone();
            n.bundle.push(fresh.cert.clone());
            n.next = Some(fresh);
            n.next_registered_at = None;
            return write(n, Event::CaIssued);
        }
        wait = wait.min(until(due));
    }

    // 5. The serving certificate: whole, for every name, signed by the signing CA, and renewed
    //    at two thirds of its life.
    let serving_due = m.serving.as_ref().and_then(|s| {
        verifies(s, std::slice::from_ref(&cp.cert), &p.names, now).ok()?;
        Some(renew_at(window(&s.cert)?))
    });
    match serving_due {
        Some(due) if now < due => wait = wait.min(until(due)),
        _ => {
            let mut n = m.clone();
            n.serving = Some(p.serving(now, cpki, *cw)?);
            return write(n, Event::ServingIssued);
        }
    }

    // 6. Client certificates: signed by the signing CA, renewed at two thirds of their life.
    for id in &p.clients {
        let pair = clients.get(id).and_then(|c| c.pair.as_ref());
        let due = pair.and_then(|c| {
            certified_key(c.cert.as_bytes(), c.key.as_bytes()).ok()?;
            client_verifies(&c.cert, &cp.cert, now).then_some(())?;
            Some(renew_at(window(&c.cert)?))
        });
        match due {
            Some(due) if now < due => wait = wait.min(until(due)),
            _ => {
                let pair = p.client(now, id, cpki, *cw)?;
                return Ok(Step::Client(id.clone(), Box::new(pair)));
            }
        }
    }

    // 7. Old CAs leave the bundle a propagation delay after the switch.
    let keep: Vec<String> = m
        .bundle
        .iter()
        .filter(|c| Some(*c) == Some(&cp.cert) || next_pair.is_some_and(|n| &&n.cert == c))
        .cloned()
        .collect();
    if keep.len() != m.bundle.len() {
        let since = m.promoted_at.unwrap_or(SystemTime::UNIX_EPOCH);
        if now >= since + prop {
            let mut n = m.clone();
            n.bundle = keep;
            return write(n, Event::CaRetired);
        }
        wait = wait.min(until(since + prop));
    }
    Ok(Step::Wait(wait))
}

/// Metrics of managed certificates, registered with the service's registry.
#[derive(Clone)]
pub struct ManagedMetrics {
    /// Writes by event (`ca-issued`, `ca-promoted`, `serving-issued`, …).
    pub rotations: prometheus::IntCounterVec,
    /// Failed attempts to set the configurations' caBundle.
    pub registration_errors: prometheus::IntCounter,
    /// Failed reconciliations (Secret unreadable or not writable, API unreachable).
    pub errors: prometheus::IntCounter,
    /// notAfter of the signing CA this replica last saw, Unix seconds.
    pub ca_expiry: prometheus::IntGauge,
    /// 1 while this replica holds the writer Lease.
    pub writer: prometheus::IntGauge,
}

impl ManagedMetrics {
    /// Creates the metrics and registers them with `registry`.
    pub fn new(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts};
        let m = Self {
            rotations: IntCounterVec::new(
                Opts::new(
                    "admission_webhook_certificate_rotations_total",
                    "Writes of the managed certificate Secret by event: ca-issued, ca-registered, ca-promoted, ca-retired, serving-issued, bundle-repaired.",
                ),
                &["event"],
            )?,
            registration_errors: IntCounter::new(
                "admission_webhook_registration_errors_total",
                "Failed attempts to set the caBundle of (or register) the service's webhook configurations.",
            )?,
            errors: IntCounter::new(
                "admission_webhook_certificate_errors_total",
                "Failed reconciliations of the managed certificate Secret (API unreachable, Secret not writable).",
            )?,
            ca_expiry: IntGauge::new(
                "admission_webhook_ca_expiration_timestamp_seconds",
                "notAfter of the CA that signs the served certificate, Unix seconds.",
            )?,
            writer: IntGauge::new(
                "admission_webhook_certificate_writer",
                "1 while this replica holds the Lease that makes it the certificate writer.",
            )?,
        };
        registry.register(Box::new(m.rotations.clone()))?;
        registry.register(Box::new(m.registration_errors.clone()))?;
        registry.register(Box::new(m.errors.clone()))?;
        registry.register(Box::new(m.ca_expiry.clone()))?;
        registry.register(Box::new(m.writer.clone()))?;
        Ok(m)
    }
}

/// Where the managed certificates live and how they are made.
#[derive(Debug, Clone)]
pub struct Managed {
    /// Namespace of the Secret and the Lease (the service's own).
    pub namespace: String,
    /// Secret name.
    pub secret: String,
    /// Lease name (one writer among the replicas).
    pub lease: String,
    /// This replica's identity in the Lease.
    pub identity: String,
    /// Lease duration; a dead writer is replaced within it.
    pub lease_duration: Duration,
    /// How often the writer checks even when nothing changes.
    pub check_interval: Duration,
    /// Names, service and lifetimes.
    pub policy: Policy,
    /// Identities that get client certificates besides [`Policy::clients`], from a list that
    /// changes at run time (quota-state's fleet members).
    pub more_clients: Option<ClientSource>,
}

/// A changing list of client identities.
#[derive(Clone)]
pub struct ClientSource {
    /// The identities now.
    pub list: Arc<dyn Fn() -> Vec<String> + Send + Sync>,
    /// Notified when the list changes: the writer issues the new ones at once.
    pub changed: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for ClientSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSource")
            .field("list", &(self.list)())
            .finish_non_exhaustive()
    }
}

impl Managed {
    /// This configuration with [`Managed::more_clients`]' identities now among the policy's.
    fn with_current_clients(&self) -> Managed {
        let mut m = self.clone();
        if let Some(more) = &self.more_clients {
            for id in (more.list)() {
                if !m.policy.clients.contains(&id) {
                    m.policy.clients.push(id);
                }
            }
        }
        m
    }
}

/// Where the loader puts a pair it takes: the webhook server's [`CertStore`], or a mutual-TLS
/// server configuration (which also trusts the bundle for client certificates).
pub trait Serve: Send + Sync + 'static {
    /// Serves `pair` from the next handshake on; `bundle` is the Secret's CA bundle.
    fn take(&self, pair: &Pair, bundle: &[String]) -> Result<(), TlsError>;
    /// Counts a pair that was not taken.
    fn reject(&self);
}

impl Serve for CertStore {
    fn take(&self, pair: &Pair, _: &[String]) -> Result<(), TlsError> {
        self.set(certified_key(pair.cert.as_bytes(), pair.key.as_bytes())?);
        Ok(())
    }

    fn reject(&self) {
        CertStore::reject(self);
    }
}

/// A mutual-TLS server configuration fed by managed certificates: the served pair, and the
/// Secret's CA bundle as the roots client certificates must chain to (quota-state).
#[derive(Debug)]
pub struct MutualTls {
    /// The configuration for new connections.
    pub config: Arc<crate::server::mtls::Reloading<rustls::ServerConfig>>,
    loaded: std::sync::atomic::AtomicBool,
}

impl MutualTls {
    /// Not loaded yet: until the first pair is taken, handshakes fail (no certificate).
    pub fn new() -> Result<Arc<Self>, TlsError> {
        let none = crate::server::tls::server_config(CertStore::new())?;
        Ok(Arc::new(Self {
            config: crate::server::mtls::Reloading::fixed(none),
            loaded: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// Whether a pair has been taken (readiness).
    pub fn loaded(&self) -> bool {
        self.loaded.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl Serve for MutualTls {
    fn take(&self, pair: &Pair, bundle: &[String]) -> Result<(), TlsError> {
        let cfg = crate::server::mtls::server_config_from_pem(
            pair.cert.as_bytes(),
            pair.key.as_bytes(),
            bundle.concat().as_bytes(),
        )?;
        self.config.set(cfg);
        self.loaded
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    fn reject(&self) {}
}

/// The watch events of one Secret, selected by name (so RBAC can grant list and watch on that
/// name only), with kube-runtime's backoff on errors.
fn watch_secret(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> impl futures::Stream<
    Item = Result<kube::runtime::watcher::Event<Secret>, kube::runtime::watcher::Error>,
> {
    use kube::runtime::{WatchStreamExt as _, watcher};
    let api: Api<Secret> = Api::namespaced(client, namespace);
    watcher(
        api,
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff()
}

/// A mutual-TLS client configuration from a Secret holding `tls.crt`, `tls.key` and `ca.crt`
/// (a managed client Secret, or cert-manager's), read from the API and watched: a renewed
/// certificate or CA is used from the next connection on, with no volume-mount delay. Until a
/// whole pair is read, every handshake fails. Needs a tokio runtime.
pub fn client_config_from_secret(
    namespace: String,
    name: String,
) -> Result<Arc<crate::server::mtls::Reloading<rustls::ClientConfig>>, TlsError> {
    use futures::StreamExt as _;
    use kube::runtime::WatchStreamExt as _;
    let config =
        crate::server::mtls::Reloading::fixed(crate::server::mtls::client_config_refusing()?);
    let out = config.clone();
    tokio::spawn(async move {
        let client = match kube::Client::try_default().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(
                    secret = %name,
                    error = %e,
                    "cannot reach the Kubernetes API for the client certificate; calls fail until restarted with access",
                );
                return;
            }
        };
        let mut events = std::pin::pin!(watch_secret(client, &namespace, &name).applied_objects());
        let mut last = None;
        while let Some(ev) = events.next().await {
            let s = match ev {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(
                        secret = %name,
                        error = %e,
                        "cannot watch the client certificate Secret; retrying",
                    );
                    continue;
                }
            };
            let c = client_material(&s);
            let Some(pair) = c.pair.clone() else {
                tracing::warn!(
                    secret = %name,
                    "client certificate Secret has no tls.crt/tls.key yet",
                );
                continue;
            };
            if last.as_ref() == Some(&c) {
                continue;
            }
            let built = certified_key(pair.cert.as_bytes(), pair.key.as_bytes()).and_then(|_| {
                crate::server::mtls::client_config_from_pem(
                    pair.cert.as_bytes(),
                    pair.key.as_bytes(),
                    c.ca.as_bytes(),
                )
            });
            match built {
                Ok(cfg) => {
                    config.set(cfg);
                    tracing::info!(secret = %name, "client certificate loaded from the Secret");
                }
                Err(e) => {
                    tracing::warn!(
                        secret = %name,
                        error = %e,
                        "client certificate in the Secret not taken; keeping the current one",
                    )
                }
            }
            last = Some(c);
        }
    });
    Ok(out)
}

/// Watches the Secret and serves its pair through `store` whenever a new, whole pair verifies
/// for every name against the Secret's bundle; anything else is logged, counted, and the
/// previous pair keeps serving. `changed` is notified on every event (it wakes the writer).
pub fn spawn_loader(
    client: kube::Client,
    m: Managed,
    store: Arc<dyn Serve>,
    metrics: ManagedMetrics,
    changed: Arc<tokio::sync::Notify>,
) -> tokio::task::JoinHandle<()> {
    use futures::StreamExt as _;
    use kube::runtime::watcher;
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watch_secret(client, &m.namespace, &m.secret));
        let mut served: Option<Pair> = None;
        while let Some(ev) = events.next().await {
            changed.notify_one();
            let secret = match ev {
                Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)) => s,
                Ok(watcher::Event::Delete(_)) => {
                    tracing::warn!(
                        secret = %m.secret,
                        "certificate Secret deleted; serving the current certificate until a new one is written",
                    );
                    continue;
                }
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(
                        secret = %m.secret,
                        error = %e,
                        "cannot watch the certificate Secret; retrying",
                    );
                    continue;
                }
            };
            if let Err(e) = check_owner(&secret.metadata, &m.policy.service) {
                tracing::error!(secret = %m.secret, error = %e, "certificate Secret not taken");
                continue;
            }
            let mat = Material::of(&secret);
            if let Some(w) = mat.ca.as_ref().and_then(|c| window(&c.cert)) {
                metrics.ca_expiry.set(w.1);
            }
            let Some(pair) = mat.serving.clone() else {
                continue;
            };
            if served.as_ref() == Some(&pair) {
                continue;
            }
            let check = verifies(&pair, &mat.bundle, &m.policy.names, SystemTime::now())
                .and_then(|()| store.take(&pair, &mat.bundle));
            match check {
                Ok(()) => {
                    let until = window(&pair.cert).map(|w| time_text(at(w.1)));
                    tracing::info!(
                        secret = %m.secret,
                        not_after = until.as_deref().unwrap_or("?"),
                        "serving certificate loaded from the Secret",
                    );
                    served = Some(pair);
                }
                Err(e) => {
                    store.reject();
                    tracing::warn!(
                        secret = %m.secret,
                        error = %e,
                        "serving certificate in the Secret not taken; keeping the current one",
                    );
                    served = Some(pair);
                }
            }
        }
    })
}

/// Competes for the Lease and, while holding it, reconciles the Secret and the configurations
/// ([`plan`]). Never exits on errors: the API unreachable, a conflict or a refused write are
/// logged, counted and retried with backoff.
pub fn spawn_writer(
    client: kube::Client,
    m: Managed,
    registrar: Registrar,
    metrics: ManagedMetrics,
    changed: Arc<tokio::sync::Notify>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff =
            super::backoff::Backoff::new(Duration::from_millis(200), Duration::from_secs(30));
        let secs = |d: Duration| d.as_secs().max(1);
        let mut leader = loop {
            if let Err(e) =
                check_lease_owner(&client, &m.namespace, &m.lease, &m.policy.service).await
            {
                metrics.errors.inc();
                let wait = backoff.next_delay();
                tracing::error!(
                    lease = %m.lease,
                    error = %e,
                    retry_in = ?wait,
                    "certificate writer Lease not taken; retrying",
                );
                tokio::time::sleep(wait).await;
                continue;
            }
            let built = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &m.lease)
                .with_namespace(&m.namespace)
                .with_identity(m.identity.clone())
                .with_duration(secs(m.lease_duration))
                .with_grace(secs(m.lease_duration / 3))
                .build()
                .await;
            match built {
                Ok(manager) => break manager.watch().await.0,
                Err(e) => {
                    metrics.errors.inc();
                    let wait = backoff.next_delay();
                    tracing::warn!(
                        lease = %m.lease,
                        error = %e,
                        retry_in = ?wait,
                        "cannot set up the certificate writer Lease; retrying",
                    );
                    tokio::time::sleep(wait).await;
                }
            }
        };
        let mut state = WriterState::default();
        let mut was_leader = None;
        loop {
            let is_leader = *leader.borrow_and_update();
            metrics.writer.set(i64::from(is_leader));
            if was_leader != Some(is_leader) {
                tracing::info!(identity = %m.identity, writer = is_leader, "certificate writer");
                was_leader = Some(is_leader);
                // A new writer applies a self-registration once, so an upgraded endpoint table
                // reaches the configurations even when their caBundle is already right.
                state.applied = false;
            }
            if !is_leader {
                if leader.changed().await.is_err() {
                    return;
                }
                continue;
            }
            let now = m.with_current_clients();
            let wait = match reconcile(&client, &now, &registrar, &metrics, &mut state).await {
                Ok(w) => {
                    backoff.reset();
                    w.min(m.check_interval)
                }
                Err(e) => {
                    metrics.errors.inc();
                    let w = backoff.next_delay();
                    tracing::warn!(
                        secret = %m.secret,
                        error = %e,
                        retry_in = ?w,
                        "certificate reconciliation failed; retrying",
                    );
                    w
                }
            };
            let more = async {
                match &m.more_clients {
                    Some(c) => c.changed.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = changed.notified() => {}
                _ = more => {}
                r = leader.changed() => if r.is_err() { return },
            }
        }
    })
}

/// Starts the loader (every replica) into `store` and the writer (the Lease holder), with
/// their metrics in `registry`. Returns once both run; `store` holds nothing until the loader
/// has taken a valid pair.
pub async fn start(
    m: Managed,
    registrar: Registrar,
    store: Arc<dyn Serve>,
    registry: &prometheus::Registry,
) -> Result<(), ManagedError> {
    let client = kube::Client::try_default().await.map_err(|e| {
        ManagedError::Api(
            "managed certificates live in a Secret, which needs the Kubernetes API (set KUBECONFIG or run in a cluster)".into(),
            e,
        )
    })?;
    let metrics = ManagedMetrics::new(registry).map_err(ManagedError::Metrics)?;
    let changed = Arc::new(tokio::sync::Notify::new());
    tracing::info!(
        secret = %m.secret,
        namespace = %m.namespace,
        names = ?m.policy.names,
        clients = ?m.policy.clients,
        "managed certificates"
    );
    spawn_loader(
        client.clone(),
        m.clone(),
        store,
        metrics.clone(),
        changed.clone(),
    );
    spawn_writer(client, m, registrar, metrics, changed);
    Ok(())
}

/// Why a reconciliation step failed.
#[derive(Debug, thiserror::Error)]
pub enum ManagedError {
    /// The API server refused or could not be reached.
    #[error("{0}: {1}")]
    Api(String, kube::Error),
    /// A certificate could not be made.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The webhook configurations could not be read or updated.
    #[error(transparent)]
    Register(#[from] RegisterError),
    /// The metrics could not be registered.
    #[error("metrics: {0}")]
    Metrics(prometheus::Error),
    /// The Secret belongs to another service.
    #[error("refusing another service's object: {0}")]
    NotOurs(String),
}

fn client_material(s: &Secret) -> ClientMaterial {
    let text = |k: &str| secret_text(s, k);
    ClientMaterial {
        pair: text(TLS_CERT)
            .zip(text(TLS_KEY))
            .map(|(cert, key)| Pair { cert, key }),
        ca: text(CLIENT_CA).unwrap_or_default(),
    }
}

/// Writes a client Secret (`tls.crt`, `tls.key`, `ca.crt`: what cert-manager writes, so a
/// client mounts either the same way).
async fn write_client(
    api: &Api<Secret>,
    m: &Managed,
    id: &str,
    c: &ClientMaterial,
) -> Result<(), ManagedError> {
    let name = client_secret(&m.policy.service, id);
    let mut data = BTreeMap::new();
    if let Some(p) = &c.pair {
        data.insert(TLS_CERT.to_owned(), ByteString(p.cert.clone().into_bytes()));
        data.insert(TLS_KEY.to_owned(), ByteString(p.key.clone().into_bytes()));
    }
    data.insert(CLIENT_CA.to_owned(), ByteString(c.ca.clone().into_bytes()));
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(m.namespace.clone()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_owned(),
                m.policy.service.clone(),
            )])),
            ..Default::default()
        },
        data: Some(data),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    let pp = kube::api::PatchParams::apply(&format!("{}-certificates", m.policy.service)).force();
    api.patch(&name, &pp, &kube::api::Patch::Apply(&secret))
        .await
        .map_err(|e| ManagedError::Api(format!("write Secret {name}"), e))?;
    Ok(())
}

/// What the writer remembers between reconciliations while it holds the Lease.
#[derive(Debug, Default)]
struct WriterState {
    /// The configurations trusted no CA before the last registration.
    fresh: bool,
    /// The configurations have been registered by this writer (self-registration).
    applied: bool,
}

/// Runs steps until one says wait (at most a handful: each writes, then re-reads).
async fn reconcile(
    client: &kube::Client,
    m: &Managed,
    registrar: &Registrar,
    metrics: &ManagedMetrics,
    state: &mut WriterState,
) -> Result<Duration, ManagedError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &m.namespace);
    for _ in 0..8 {
        let current = api
            .get_opt(&m.secret)
            .await
            .map_err(|e| ManagedError::Api(format!("get Secret {}", m.secret), e))?;
        if let Some(c) = &current {
            check_owner(&c.metadata, &m.policy.service).map_err(ManagedError::NotOurs)?;
        }
        let mat = current.as_ref().map(Material::of).unwrap_or_default();
        let mut clients = BTreeMap::new();
        for id in &m.policy.clients {
            let name = client_secret(&m.policy.service, id);
            let sec = api
                .get_opt(&name)
                .await
                .map_err(|e| ManagedError::Api(format!("get Secret {name}"), e))?;
            if let Some(c) = &sec {
                check_owner(&c.metadata, &m.policy.service).map_err(ManagedError::NotOurs)?;
            }
            clients.insert(
                id.clone(),
                sec.map(|s| client_material(&s)).unwrap_or_default(),
            );
        }
        let reg = match registrar.observe(client, &mat.bundle_pem()).await {
            Ok(mut r) => {
                r.fresh = state.fresh;
                r.holds_bundle &= state.applied || !registrar.is_full();
                r
            }
            Err(e) => {
                metrics.registration_errors.inc();
                return Err(e.into());
            }
        };
        match plan(SystemTime::now(), &mat, &reg, &clients, &m.policy)? {
            Step::Wait(d) => return Ok(d),
            Step::Register => {
                state.fresh = reg.cas.is_empty();
                if let Err(e) = registrar.register(client, &mat.bundle_pem()).await {
                    metrics.registration_errors.inc();
                    return Err(e.into());
                }
                state.applied = true;
                for id in &m.policy.clients {
                    let mut c = clients.get(id).cloned().unwrap_or_default();
                    if c.ca != mat.bundle_pem() {
                        c.ca = mat.bundle_pem();
                        write_client(&api, m, id, &c).await?;
                    }
                }
                tracing::info!(
                    cas = mat.bundle.len(),
                    "webhook configurations and clients carry the CA bundle"
                );
            }
            Step::Client(id, pair) => {
                let c = ClientMaterial {
                    pair: Some(*pair),
                    ca: mat.bundle_pem(),
                };
                write_client(&api, m, &id, &c).await?;
                metrics
                    .rotations
                    .with_label_values(&[Event::ClientIssued.as_str()])
                    .inc();
                tracing::info!(
                    event = Event::ClientIssued.as_str(),
                    client = %id,
                    "certificate rotation",
                );
            }
            Step::Write(new, event) => {
                let mut secret = current.unwrap_or_else(|| Secret {
                    metadata: kube::api::ObjectMeta {
                        name: Some(m.secret.clone()),
                        namespace: Some(m.namespace.clone()),
                        labels: Some(BTreeMap::from([(
                            "app.kubernetes.io/managed-by".to_owned(),
                            m.policy.service.clone(),
                        )])),
                        ..Default::default()
                    },
                    ..Default::default()
                });
                new.write_into(&mut secret);
                let pp = PostParams {
                    field_manager: Some(format!("{}-certificates", m.policy.service)),
                    ..Default::default()
                };
                let r = if secret.metadata.resource_version.is_some() {
                    api.replace(&m.secret, &pp, &secret).await
                } else {
                    api.create(&pp, &secret).await
                };
                r.map_err(|e| ManagedError::Api(format!("write Secret {}", m.secret), e))?;
                metrics.rotations.with_label_values(&[event.as_str()]).inc();
                let not_after = |p: &Option<Pair>| {
                    p.as_ref()
                        .and_then(|p| window(&p.cert))
                        .map(|w| time_text(at(w.1)))
                        .unwrap_or_default()
                };
                tracing::info!(
                    event = event.as_str(),
                    secret = %m.secret,
                    ca_not_after = %not_after(&new.ca),
                    next_ca_not_after = %not_after(&new.next),
                    serving_not_after = %not_after(&new.serving),
                    bundle = new.bundle.len(),
                    "certificate rotation"
                );
            }
        }
    }
    Ok(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_naming_another_owner_is_refused() {
        let meta = |owner: Option<&str>| kube::api::ObjectMeta {
            name: Some("quota-state-certificates".into()),
            annotations: owner.map(|o| BTreeMap::from([(OWNER.to_owned(), o.to_owned())])),
            ..Default::default()
        };
        assert_eq!(check_owner(&meta(None), "quota-state"), Ok(()));
        assert_eq!(
            check_owner(&meta(Some("quota-state")), "quota-state"),
            Ok(())
        );
        assert_eq!(
            check_owner(&meta(Some("registry-webhook")), "quota-state"),
            Err(format!(
                "quota-state-certificates belongs to registry-webhook ({OWNER}), not to quota-state"
            ))
        );
    }

    fn policy(ca: u64, serving: u64, propagation: u64) -> Policy {
        Policy {
            names: vec!["hook.ns.svc".into(), "127.0.0.1".into()],
            service: "hook".into(),
            lifetimes: Lifetimes {
                ca: Duration::from_secs(ca),
                serving: Duration::from_secs(serving),
                propagation: Duration::from_secs(propagation),
            },
            clients: vec!["caller".into()],
        }
    }

    /// The Secret, the configurations' bundle and the client Secrets, as a writer leaves them.
    #[derive(Clone, Default)]
    struct World {
        m: Material,
        configs: Vec<String>,
        fresh: bool,
        clients: BTreeMap<String, ClientMaterial>,
    }

    /// Runs steps at `now` until one waits; returns the events.
    fn settle(now: SystemTime, w: &mut World, p: &Policy) -> Vec<Event> {
        let mut events = Vec::new();
        for _ in 0..12 {
            let reg = Registered {
                holds_bundle: w.configs == w.m.bundle,
                cas: w.configs.clone(),
                fresh: w.fresh,
            };
            match plan(now, &w.m, &reg, &w.clients, p).unwrap() {
                Step::Wait(_) => return events,
                Step::Register => {
                    w.fresh = w.configs.is_empty();
                    w.configs = w.m.bundle.clone();
                    for id in &p.clients {
                        w.clients.entry(id.clone()).or_default().ca = w.m.bundle_pem();
                    }
                }
                Step::Write(n, e) => {
                    w.m = *n;
                    events.push(e);
                }
                Step::Client(id, pair) => {
                    let c = w.clients.entry(id).or_default();
                    c.pair = Some(*pair);
                    c.ca = w.m.bundle_pem();
                    events.push(Event::ClientIssued);
                }
            }
        }
        panic!("no settled state after 12 steps: {events:?}");
    }

    #[test]
    fn first_install_serves_at_once_with_the_bundle_registered_first() {
        crate::server::tls::install_crypto_provider();
        let p = policy(3600, 600, 60);
        let now = SystemTime::now();
        let mut w = World::default();
        let events = settle(now, &mut w, &p);
        assert_eq!(
            events,
            [
                Event::CaIssued,
                Event::CaRegistered,
                Event::CaPromoted,
                Event::ClientIssued
            ]
        );
        assert_eq!(w.configs, w.m.bundle);
        assert_eq!(w.m.bundle.len(), 1);
        let serving = w.m.serving.clone().unwrap();
        verifies(&serving, &w.configs, &p.names, now).unwrap();
        let client = w.clients["caller"].pair.clone().unwrap();
        assert!(client_verifies(&client.cert, &w.m.bundle[0], now));
    }

    /// A virtual clock over three CA lifetimes: the API server (and the mutual-TLS client) see
    /// the bundle `lag` late and replicas serve the Secret's pair a second late, yet at every
    /// second the served certificate verifies against what the API server trusts, and the
    /// client's certificate against what the server trusts.
    #[test]
    fn every_served_certificate_verifies_through_rotations() {
        crate::server::tls::install_crypto_provider();
        let p = policy(90, 15, 6);
        let lag = 3; // seconds, below the propagation delay
        let start = SystemTime::now();
        let mut w = World::default();
        let mut history: Vec<World> = Vec::new();
        let mut events = Vec::new();
        for t in 0..270u64 {
            let now = start + Duration::from_secs(t);
            events.extend(settle(now, &mut w, &p));
            history.push(w.clone());
            let seen = |back: u64| &history[t.saturating_sub(back) as usize];
            let Some(served) = seen(1).m.serving.clone() else {
                continue;
            };
            if t >= lag {
                verifies(&served, &seen(lag).configs, &p.names, now)
                    .unwrap_or_else(|e| panic!("at {t}s: {e}; events so far {events:?}"));
                let client_ca = crate::server::tls::pem_blocks(&seen(lag).clients["caller"].ca);
                verifies(&served, &client_ca, &p.names, now)
                    .unwrap_or_else(|e| panic!("client at {t}s: {e}"));
                let cert = seen(lag).clients["caller"].pair.clone().unwrap().cert;
                assert!(
                    seen(1)
                        .m
                        .bundle
                        .iter()
                        .any(|ca| client_verifies(&cert, ca, now)),
                    "server trusts the client at {t}s"
                );
            }
        }
        let count = |e: Event| events.iter().filter(|x| **x == e).count();
        assert!(count(Event::CaPromoted) >= 3, "{events:?}");
        assert!(count(Event::ServingIssued) >= 10, "{events:?}");
        assert!(count(Event::ClientIssued) >= 10, "{events:?}");
        assert!(count(Event::CaRetired) >= 2, "{events:?}");
        assert!(
            history.iter().any(|w| w.m.bundle.len() == 2),
            "both CAs trusted during a rotation"
        );
    }

    #[test]
    fn a_deleted_secret_keeps_what_the_configurations_trust_until_the_switch() {
        crate::server::tls::install_crypto_provider();
        let p = policy(3600, 600, 60);
        let now = SystemTime::now();
        let mut w = World::default();
        settle(now, &mut w, &p);
        let old_serving = w.m.serving.clone().unwrap();
        let old_ca = w.configs[0].clone();
        // The Secret is deleted; replicas still serve `old_serving`.
        w.m = Material::default();
        let later = now + Duration::from_secs(5);
        let events = settle(later, &mut w, &p);
        assert_eq!(events, [Event::CaIssued, Event::CaRegistered]);
        assert!(w.configs.contains(&old_ca), "old CA still trusted");
        assert_eq!(w.configs.len(), 2);
        verifies(&old_serving, &w.configs, &p.names, later).unwrap();
        // A propagation delay later the new CA signs; the old one leaves a delay after that.
        let t2 = later + Duration::from_secs(61);
        assert_eq!(
            settle(t2, &mut w, &p),
            [Event::CaPromoted, Event::ClientIssued]
        );
        verifies(w.m.serving.as_ref().unwrap(), &w.configs, &p.names, t2).unwrap();
        let t3 = t2 + Duration::from_secs(61);
        assert_eq!(settle(t3, &mut w, &p), [Event::CaRetired]);
        assert!(!w.configs.contains(&old_ca));
    }

    #[test]
    fn a_corrupted_or_mismatched_pair_is_replaced() {
        crate::server::tls::install_crypto_provider();
        let p = policy(3600, 600, 60);
        let now = SystemTime::now();
        let mut w = World::default();
        settle(now, &mut w, &p);
        let ca = w.m.ca.clone();
        // The key of another certificate: replaced, the CA kept.
        let other = Pki::new("other").unwrap();
        w.m.serving.as_mut().unwrap().key = other.key_pem();
        assert_eq!(settle(now, &mut w, &p), [Event::ServingIssued]);
        assert_eq!(w.m.ca, ca);
        // Garbage in the CA: a new CA goes through registration first.
        w.m.ca.as_mut().unwrap().cert = "junk".into();
        let later = now + Duration::from_secs(1);
        assert_eq!(
            settle(later, &mut w, &p),
            [Event::CaIssued, Event::CaRegistered]
        );
    }

    #[test]
    fn material_round_trips_through_a_secret() {
        crate::server::tls::install_crypto_provider();
        let p = policy(3600, 600, 60);
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut w = World::default();
        settle(now, &mut w, &p);
        w.m.next_registered_at = Some(now);
        let mut s = Secret::default();
        w.m.write_into(&mut s);
        assert_eq!(Material::of(&s), w.m);
    }
}
