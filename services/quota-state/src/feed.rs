//! Feeds the ledger from the API server: watches of ElasticQuotas, Pods and Namespaces (names
//! only; kube-runtime watchers, and for Pods, the busiest, [`protobuf`]'s; retried with backoff
//! after errors). After each (re)list, objects the list no longer holds are dropped, so a watch
//! gap never leaves stale usage behind.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};

use crate::ledger::{Ledger, QuotaSpec};
use quota_protocol::tree::annotation;
use quota_protocol::tree::keys::CHILD_REQUEST;
use quota_protocol::types::ElasticQuota;

mod pod;
pub mod protobuf;

pub use pod::{WatchedPod, pod_requests};

async fn feed_quotas(client: kube::Client, ledger: Arc<Ledger>, ready: Arc<AtomicBool>) {
    let api: Api<ElasticQuota> = Api::all(client);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut seen = HashSet::new();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => seen.clear(),
            Ok(Event::InitApply(o)) | Ok(Event::Apply(o)) => {
                let spec = QuotaSpec::of(&o);
                seen.insert((spec.info.name.clone(), spec.info.namespace.clone()));
                ledger.observe_shown(
                    &spec.info.namespace,
                    &spec.info.name,
                    annotation(&o, CHILD_REQUEST),
                );
                ledger.observe_shown_split(
                    &spec.info.namespace,
                    &spec.info.name,
                    annotation(&o, crate::ledger::BY_MEMBER),
                );
                ledger.upsert_quota(spec);
            }
            Ok(Event::Delete(o)) => {
                ledger.delete_quota(
                    o.metadata.name.as_deref().unwrap_or_default(),
                    o.metadata.namespace.as_deref().unwrap_or_default(),
                );
            }
            Ok(Event::InitDone) => {
                for (name, ns) in ledger.known().0 {
                    if !seen.contains(&(name.clone(), ns.clone())) {
                        ledger.delete_quota(&name, &ns);
                    }
                }
                ready.store(true, Ordering::Release);
            }
            Err(e) => tracing::warn!(error = %e, "ElasticQuota watch error; retrying"),
        }
    }
}

/// The namespaces that exist in `cluster` ("" for the one cluster), names only (a metadata
/// watch): a review for a pod of any other namespace can only be forged, and reserves nothing.
async fn feed_namespaces(
    cluster: &str,
    client: kube::Client,
    ledger: Arc<Ledger>,
    ready: Arc<AtomicBool>,
) {
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(client);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut listing: Vec<String> = Vec::new();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(n)) => listing.extend(n.metadata.name),
            Ok(Event::InitDone) => {
                ledger.set_namespaces_in(cluster, listing.iter().map(String::as_str));
                listing = Vec::new();
                ready.store(true, Ordering::Release);
            }
            Ok(Event::Apply(n)) => ledger.observe_namespace_in(
                cluster,
                n.metadata.name.as_deref().unwrap_or_default(),
                true,
            ),
            Ok(Event::Delete(n)) => ledger.observe_namespace_in(
                cluster,
                n.metadata.name.as_deref().unwrap_or_default(),
                false,
            ),
            Err(e) => tracing::warn!(cluster, error = %e, "Namespace watch error; retrying"),
        }
    }
}

async fn feed_pods(
    client: kube::Client,
    ledger: Arc<Ledger>,
    ready: Arc<AtomicBool>,
    namespaces: Arc<AtomicBool>,
) {
    let stream = protobuf::pods(client).default_backoff();
    futures::pin_mut!(stream);
    // The pods of the (re)list in progress, to drop those it no longer has (None: watching, so
    // the steady stream of events neither hashes nor holds a key per pod).
    let mut seen: Option<HashSet<(String, String)>> = None;
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => seen = Some(HashSet::new()),
            Ok(Event::InitApply(mut p)) | Ok(Event::Apply(mut p)) => {
                let (ns, name) = p.key();
                let requests = std::mem::replace(&mut p.requests, Ok(Default::default()));
                ledger.observe_pod_event("", &ns, &name, p.uid(), &p.quota, requests);
                if let Some(seen) = seen.as_mut() {
                    seen.insert((ns, name));
                }
            }
            Ok(Event::Delete(p)) => {
                let (ns, name) = p.key();
                ledger.delete_pod(&ns, &name);
            }
            Ok(Event::InitDone) => {
                let listed_now = seen.take().unwrap_or_default();
                for (ns, name) in ledger.known().1 {
                    if !listed_now.contains(&(ns.clone(), name.clone())) {
                        ledger.delete_pod(&ns, &name);
                    }
                }
                // Serving waits for the namespaces too (until they are known every pod would
                // reserve); the pod events meanwhile wait in the stream.
                while !namespaces.load(Ordering::Acquire) {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                ready.store(true, Ordering::Release);
            }
            Err(e) => tracing::warn!(error = %e, "Pod watch error; retrying"),
        }
    }
}

/// Starts the ElasticQuota feed alone (a fleet's hub: pods come from the members, see
/// [`member`]); the returned flags turn true after the first full list of quotas, and at once.
pub fn start_quotas(
    client: kube::Client,
    ledger: Arc<Ledger>,
) -> (Arc<AtomicBool>, Arc<AtomicBool>) {
    let q = Arc::new(AtomicBool::new(false));
    tokio::spawn(feed_quotas(client, ledger, q.clone()));
    (q, Arc::new(AtomicBool::new(true)))
}

/// Starts the feeds; the returned flags turn true after the first full list of quotas, and of
/// pods and namespaces.
pub fn start(client: kube::Client, ledger: Arc<Ledger>) -> (Arc<AtomicBool>, Arc<AtomicBool>) {
    let (q, p, n) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    tokio::spawn(feed_quotas(client.clone(), ledger.clone(), q.clone()));
    tokio::spawn({
        let (client, ledger, n) = (client.clone(), ledger.clone(), n.clone());
        async move { feed_namespaces("", client, ledger, n).await }
    });
    tokio::spawn(feed_pods(client, ledger, p.clone(), n));
    (q, p)
}

/// How often a member's API server is asked whether it answers, and how long it may take: a
/// watch whose connection hangs without an error would otherwise go unnoticed.
const MEMBER_PROBE: Duration = Duration::from_secs(3);

/// Feeds the ledger from member cluster `cluster` of a fleet until aborted: its namespaces, and
/// its pods in passes — each a fresh list, then the watch, until the watch fails or the API
/// server stops answering [`MEMBER_PROBE`]. Between passes the member is stalled
/// ([`Ledger::member_watch`]): its usage stays as last seen and its reservations wait, so a
/// broken watch never frees quota; the next pass's list applies what changed meanwhile (its
/// deletions count again) and ends the stall. Logged once per outage; `members` and the
/// metrics show it.
pub async fn member(
    cluster: String,
    client: kube::Client,
    ledger: Arc<Ledger>,
    members: Arc<crate::fleet::Members>,
    metrics: crate::metrics::Metrics,
) {
    let namespaces = Arc::new(AtomicBool::new(false));
    let ns_feed = feed_namespaces(&cluster, client.clone(), ledger.clone(), namespaces.clone());
    let pods = async {
        let mut backoff = admission_kit::cluster::backoff::Backoff::new(
            Duration::from_millis(200),
            Duration::from_secs(10),
        );
        let mut broken_since: Option<std::time::Instant> = None;
        loop {
            let error = member_pass(&cluster, &client, &ledger, &namespaces, || {
                members.update(&cluster, |m| {
                    m.listed = true;
                    m.watching = true;
                });
                metrics.member_watch(&cluster, true);
                if let Some(since) = broken_since.take() {
                    tracing::info!(
                        cluster = %cluster,
                        broken_for = ?since.elapsed(),
                        "member Pod watch back; usage relisted",
                    );
                }
                backoff.reset();
            })
            .await;
            ledger.member_watch(&cluster, false);
            members.update(&cluster, |m| m.watching = false);
            metrics.member_watch(&cluster, false);
            if broken_since.is_none() {
                broken_since = Some(std::time::Instant::now());
                tracing::warn!(
                    cluster = %cluster,
                    error = %error,
                    "member Pod watch broken: its usage is kept as last seen and its reservations held until it lists again",
                );
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
    };
    tokio::select! {
        () = ns_feed => {},
        () = pods => {},
    }
}

/// One pass of a member's Pod feed: list, then watch; `listed` runs after each complete list.
/// Returns why it ended.
async fn member_pass(
    cluster: &str,
    client: &kube::Client,
    ledger: &Ledger,
    namespaces: &AtomicBool,
    mut listed: impl FnMut(),
) -> String {
    let stream = protobuf::pods(client.clone());
    futures::pin_mut!(stream);
    // The pods of the list under way (None: watching).
    let mut seen: Option<HashSet<(String, String)>> = None;
    let mut probe = tokio::time::interval(MEMBER_PROBE);
    probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let ev = tokio::select! {
            ev = stream.next() => ev,
            _ = probe.tick() => {
                match tokio::time::timeout(MEMBER_PROBE, client.apiserver_version()).await {
                    Ok(Ok(_)) => continue,
                    Ok(Err(e)) => return format!("API server probe: {e}"),
                    Err(_) => return format!("API server probe: no answer within {MEMBER_PROBE:?}"),
                }
            }
        };
        let Some(ev) = ev else {
            return "watch ended".into();
        };
        match ev {
            Ok(Event::Init) => seen = Some(HashSet::new()),
            Ok(Event::InitApply(mut p)) | Ok(Event::Apply(mut p)) => {
                let (ns, name) = p.key();
                let requests = std::mem::replace(&mut p.requests, Ok(Default::default()));
                ledger.observe_pod_event(cluster, &ns, &name, p.uid(), &p.quota, requests);
                if let Some(seen) = seen.as_mut() {
                    seen.insert((ns, name));
                }
            }
            Ok(Event::Delete(p)) => {
                let (ns, name) = p.key();
                ledger.delete_pod_in(cluster, &ns, &name);
            }
            Ok(Event::InitDone) => {
                let listed_now = seen.take().unwrap_or_default();
                for (ns, name) in ledger.pods_in(cluster) {
                    if !listed_now.contains(&(ns.clone(), name.clone())) {
                        ledger.delete_pod_in(cluster, &ns, &name);
                    }
                }
                while !namespaces.load(Ordering::Acquire) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                ledger.member_watch(cluster, true);
                listed();
            }
            Err(e) => return e.to_string(),
        }
    }
}
