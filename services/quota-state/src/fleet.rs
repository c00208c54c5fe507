//! One quota across clusters (`docs/fleet-quota.md`): quota-state in a hub cluster keeps the
//! ElasticQuota tree of the hub and the pods of every member cluster in one ledger, keyed by
//! (cluster, pod).
//!
//! Members are declared by Secrets in quota-state's namespace of the hub, labelled
//! [`MEMBER_LABEL`]`=true`, each holding a kubeconfig for the member's API server
//! ([`KUBECONFIG_KEY`]) and optionally its cluster name ([`NAME_KEY`], else the Secret's name).
//! They are watched: a Secret added starts that member's Pod and Namespace feeds, a changed one
//! restarts them (usage kept), a deleted one stops them and, after `--member-removal-grace`,
//! drops the member's usage (a hub watch hiccup never does: only a Delete event, or absence
//! from a completed relist).
//!
//! A member's scheduling-webhook calls with a client certificate naming
//! [`member_identity`] (`member-<cluster>`), and acts for its own cluster's pods only
//! ([`crate::auth::Policy::Fleet`]). Until a member's first lists are in, its calls get
//! UNAVAILABLE, which its webhook answers with `--quota-unavailable`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};

use crate::ledger::Ledger;
use crate::metrics::Metrics;

/// Label of the Secrets that declare member clusters (value `true`).
pub const MEMBER_LABEL: &str = "fleet.admission-webhooks.io/member";
/// Key of a member Secret holding the member's kubeconfig.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// Key of a member Secret holding the member's cluster name (a DNS label; default: the Secret's
/// name).
pub const NAME_KEY: &str = "name";
/// ElasticQuota annotation naming the member clusters a quota spans.
pub use crate::ledger::SPANS as SPANS_ANNOTATION;
/// Prefix of a member's caller identity.
pub const MEMBER_IDENTITY_PREFIX: &str = "member-";

/// The identity a member cluster's scheduling-webhook presents (its client certificate's
/// name): `member-<cluster>`.
pub fn member_identity(cluster: &str) -> String {
    format!("{MEMBER_IDENTITY_PREFIX}{cluster}")
}

/// The cluster a caller identity names, if it is a member identity.
pub fn cluster_of_identity(identity: &str) -> Option<&str> {
    identity
        .strip_prefix(MEMBER_IDENTITY_PREFIX)
        .filter(|c| quota_protocol::spec::is_cluster_name(c))
}

/// What quota-state knows of one member.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemberState {
    /// Its first Pod and Namespace lists are in: its calls are answered.
    pub listed: bool,
    /// Its Pod watch is up (false: broken, its usage kept as last seen).
    pub watching: bool,
    /// Its Secret is gone: its calls are refused, its usage leaves after the grace period.
    pub removing: bool,
}

/// The declared members, shared by the feeds (which update them) and the service (which
/// authorises callers by them).
#[derive(Debug, Default)]
pub struct Members {
    inner: RwLock<BTreeMap<String, MemberState>>,
    /// Notified when a member is declared or leaves (managed certificates issue its client
    /// certificate at once).
    pub changed: Arc<tokio::sync::Notify>,
}

impl Members {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, MemberState>> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, MemberState>> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `cluster` is a member now (declared, not being removed).
    pub fn declared(&self, cluster: &str) -> bool {
        self.read().get(cluster).is_some_and(|m| !m.removing)
    }

    /// Whether `cluster`'s first lists are in.
    pub fn listed(&self, cluster: &str) -> bool {
        self.read().get(cluster).is_some_and(|m| m.listed)
    }

    /// The declared members' names.
    pub fn names(&self) -> Vec<String> {
        self.read()
            .iter()
            .filter(|(_, m)| !m.removing)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Every known member and its state (metrics).
    pub fn snapshot(&self) -> Vec<(String, MemberState)> {
        self.read().iter().map(|(n, m)| (n.clone(), *m)).collect()
    }

    /// Changes `cluster`'s state (declaring it if new).
    pub fn update(&self, cluster: &str, f: impl FnOnce(&mut MemberState)) {
        let declared = {
            let mut w = self.write();
            let before = w.get(cluster).map(|m| !m.removing);
            let m = w.entry(cluster.to_owned()).or_default();
            f(m);
            before != Some(!m.removing)
        };
        if declared {
            self.changed.notify_one();
        }
    }

    /// The client identities of the declared members.
    pub fn identities(&self) -> Vec<String> {
        self.names().iter().map(|c| member_identity(c)).collect()
    }

    fn forget(&self, cluster: &str) {
        self.write().remove(cluster);
    }
}

/// How the fleet runs.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Namespace of the member Secrets (quota-state's own).
    pub namespace: String,
    /// How long a removed member's usage stays in the ledger after its Secret is deleted.
    pub removal_grace: Duration,
    /// Where in each member to keep a copy of the client Secret quota-state issued for it
    /// (namespace, name), renewed with it: `None` leaves copying to the user.
    pub client_secret_copy: Option<(String, String)>,
}

/// A member cluster as its Secret declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSecret {
    /// The cluster's name.
    pub cluster: String,
    /// Its kubeconfig (YAML).
    pub kubeconfig: String,
}

/// The member a Secret declares, or why it declares none.
pub fn member_of(s: &Secret) -> Result<MemberSecret, String> {
    let secret = s.metadata.name.clone().unwrap_or_default();
    let text = |k: &str| -> Option<String> {
        s.data
            .as_ref()
            .and_then(|d| d.get(k))
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .or_else(|| s.string_data.as_ref().and_then(|d| d.get(k)).cloned())
    };
    let cluster = text(NAME_KEY)
        .map(|n| n.trim().to_owned())
        .unwrap_or_else(|| secret.clone());
    if !quota_protocol::spec::is_cluster_name(&cluster) {
        return Err(format!(
            "member Secret {secret}: cluster name {cluster:?} is not a DNS label (lower-case letters, digits and '-', at most 63)"
        ));
    }
    let kubeconfig = text(KUBECONFIG_KEY)
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| format!("member Secret {secret}: no {KUBECONFIG_KEY} key"))?;
    Ok(MemberSecret {
        cluster,
        kubeconfig,
    })
}

/// A kube client for a member from its kubeconfig.
pub async fn member_client(m: &MemberSecret) -> Result<kube::Client, String> {
    let kc = kube::config::Kubeconfig::from_yaml(&m.kubeconfig)
        .map_err(|e| format!("member {}: kubeconfig: {e}", m.cluster))?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| format!("member {}: kubeconfig: {e}", m.cluster))?;
    kube::Client::try_from(config).map_err(|e| format!("member {}: client: {e}", m.cluster))
}

/// A member being fed: its Secret as last taken, and its feed task.
struct Running {
    secret: MemberSecret,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches the member Secrets of the hub (`hub`) and feeds `ledger` from each member, until
/// the process ends. Member states go to `members`, their watch health to `metrics`.
pub async fn run(
    hub: kube::Client,
    ledger: Arc<Ledger>,
    members: Arc<Members>,
    metrics: Metrics,
    o: FleetOptions,
) {
    let api: Api<Secret> = Api::namespaced(hub, &o.namespace);
    let hub_api = api.clone();
    let config = watcher::Config::default().labels(&format!("{MEMBER_LABEL}=true"));
    let stream = watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    let mut running: HashMap<String, Running> = HashMap::new();
    // Secret name -> cluster, to act on deletions and relists.
    let mut by_secret: HashMap<String, String> = HashMap::new();
    let mut listing: Option<Vec<String>> = None;
    // Bumped when a member is (re)declared: a pending removal checks it is still due.
    let generation = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let remove = |cluster: String, running: &mut HashMap<String, Running>| {
        if running.remove(&cluster).is_none() {
            return;
        }
        members.update(&cluster, |m| {
            m.removing = true;
            m.listed = false;
        });
        tracing::warn!(
            cluster = %cluster,
            grace = ?o.removal_grace,
            "member Secret gone: its calls are refused, its usage leaves the ledger after the grace period",
        );
        let (ledger, members, metrics, generation) = (
            ledger.clone(),
            members.clone(),
            metrics.clone(),
            generation.clone(),
        );
        let at = generation.load(std::sync::atomic::Ordering::Acquire);
        let grace = o.removal_grace;
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let still = members
                .snapshot()
                .iter()
                .any(|(c, m)| *c == cluster && m.removing);
            if still && generation.load(std::sync::atomic::Ordering::Acquire) == at {
                ledger.drop_member(&cluster);
                members.forget(&cluster);
                metrics.forget_member(&cluster);
                tracing::warn!(cluster = %cluster, "member removed from the ledger");
            }
        });
    };
    while let Some(ev) = stream.next().await {
        let (secrets, relisted): (Vec<Secret>, bool) = match ev {
            Ok(Event::Init) => {
                listing = Some(Vec::new());
                continue;
            }
            Ok(Event::InitApply(s)) => {
                if let (Some(l), Some(n)) = (listing.as_mut(), s.metadata.name.clone()) {
                    l.push(n);
                }
                (vec![s], false)
            }
            Ok(Event::InitDone) => (Vec::new(), true),
            Ok(Event::Apply(s)) => (vec![s], false),
            Ok(Event::Delete(s)) => {
                let name = s.metadata.name.unwrap_or_default();
                if let Some(cluster) = by_secret.remove(&name) {
                    remove(cluster, &mut running);
                }
                continue;
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "member Secret watch error; retrying (members keep being fed)",
                );
                continue;
            }
        };
        for s in secrets {
            let name = s.metadata.name.clone().unwrap_or_default();
            let m = match member_of(&s) {
                Ok(m) => m,
                Err(e) => {
                    tracing::error!(error = %e, "member Secret not taken");
                    continue;
                }
            };
            if running.get(&m.cluster).is_some_and(|r| r.secret == m) {
                by_secret.insert(name, m.cluster.clone());
                continue;
            }
            // Two Secrets naming one cluster: the first keeps it.
            if let Some(other) = by_secret
                .iter()
                .find(|(secret, cluster)| **cluster == m.cluster && **secret != name)
                .map(|(secret, _)| secret.clone())
            {
                tracing::error!(
                    cluster = %m.cluster,
                    secret = %name,
                    other = %other,
                    "member Secret not taken: another member Secret names the same cluster",
                );
                continue;
            }
            // A Secret that now names another cluster: the cluster it named leaves.
            if let Some(before) = by_secret.get(&name).filter(|c| **c != m.cluster).cloned() {
                by_secret.remove(&name);
                remove(before, &mut running);
            }
            let client = match member_client(&m).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(error = %e, "member Secret not taken");
                    continue;
                }
            };
            generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            let restarted = running.contains_key(&m.cluster);
            members.update(&m.cluster, |s| s.removing = false);
            tracing::info!(
                cluster = %m.cluster,
                secret = %name,
                restarted,
                "member declared: feeding its pods",
            );
            let feed = crate::feed::member(
                m.cluster.clone(),
                client.clone(),
                ledger.clone(),
                members.clone(),
                metrics.clone(),
            );
            let copy = copy_client_secret(
                hub_api.clone(),
                m.cluster.clone(),
                client,
                o.client_secret_copy.clone(),
            );
            let task = tokio::spawn(async move {
                tokio::join!(feed, copy);
            });
            by_secret.insert(name, m.cluster.clone());
            running.insert(m.cluster.clone(), Running { secret: m, task });
        }
        if relisted && let Some(listed) = listing.take() {
            let gone: Vec<(String, String)> = by_secret
                .iter()
                .filter(|(secret, _)| !listed.contains(secret))
                .map(|(s, c)| (s.clone(), c.clone()))
                .collect();
            for (secret, cluster) in gone {
                by_secret.remove(&secret);
                remove(cluster, &mut running);
            }
        }
    }
}

/// Keeps `to` (namespace, name) in member `cluster` equal to the client Secret quota-state
/// issued for it in the hub (`hub`'s quota-state-client-member-<cluster>), so that renewals
/// and CA rotations reach the member's scheduling-webhook without anyone copying them. Returns
/// at once when `to` is `None`; otherwise runs until aborted, logging failures once until the
/// next success.
async fn copy_client_secret(
    hub: Api<Secret>,
    cluster: String,
    member: kube::Client,
    to: Option<(String, String)>,
) {
    let Some((namespace, name)) = to else {
        return;
    };
    let issued =
        admission_kit::cluster::managed::client_secret("quota-state", &member_identity(&cluster));
    let config = watcher::Config::default().fields(&format!("metadata.name={issued}"));
    let stream = watcher(hub, config).default_backoff().applied_objects();
    futures::pin_mut!(stream);
    let target: Api<Secret> = Api::namespaced(member, &namespace);
    let mut failing = false;
    while let Some(ev) = stream.next().await {
        let Ok(s) = ev else { continue };
        if s.data.as_ref().is_none_or(|d| !d.contains_key("tls.crt")) {
            continue;
        }
        let copy = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            data: s.data.clone(),
            type_: s.type_.clone(),
            ..Default::default()
        };
        let params = kube::api::PatchParams::apply("quota-state").force();
        match target
            .patch(&name, &params, &kube::api::Patch::Apply(&copy))
            .await
        {
            Ok(_) => {
                if failing {
                    tracing::info!(
                        cluster = %cluster,
                        secret = %format!("{namespace}/{name}"),
                        "member client Secret copied again",
                    );
                }
                failing = false;
                tracing::debug!(cluster = %cluster, "member client Secret copied");
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(
                        cluster = %cluster,
                        secret = %format!("{namespace}/{name}"),
                        error = %e,
                        "cannot copy the member's client Secret into it (does its kubeconfig allow writing that Secret?); retrying at the next change",
                    );
                }
                failing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn a_member_secret_names_its_cluster_and_holds_a_kubeconfig() {
        let m = member_of(&secret("east", &[("kubeconfig", "apiVersion: v1")])).unwrap();
        assert_eq!(m.cluster, "east");
        let m = member_of(&secret(
            "member-1",
            &[("kubeconfig", "apiVersion: v1"), ("name", "west\n")],
        ))
        .unwrap();
        assert_eq!(m.cluster, "west");
        assert_eq!(
            member_of(&secret("east", &[])),
            Err("member Secret east: no kubeconfig key".into())
        );
        let bad = member_of(&secret("x", &[("kubeconfig", "k"), ("name", "East.1")]));
        assert!(bad.unwrap_err().contains("not a DNS label"));
    }

    #[test]
    fn identities_name_their_cluster() {
        assert_eq!(member_identity("east"), "member-east");
        assert_eq!(cluster_of_identity("member-east"), Some("east"));
        assert_eq!(cluster_of_identity("scheduling-webhook"), None);
        assert_eq!(cluster_of_identity("member-"), None);
        assert_eq!(cluster_of_identity("member-a/b"), None);
    }

    #[test]
    fn members_removed_are_no_longer_declared() {
        let m = Members::default();
        m.update("east", |s| s.listed = true);
        assert!(m.declared("east") && m.listed("east"));
        m.update("east", |s| s.removing = true);
        assert!(!m.declared("east"));
        assert_eq!(m.names(), Vec::<String>::new());
        m.forget("east");
        assert!(m.snapshot().is_empty());
    }
}
