//! Feeds the ledger from the API server: watches of ElasticQuotas, Pods and Namespaces (names
//! only; kube-runtime watchers, retried with backoff after errors). After each (re)list, objects the list no longer
//! holds are dropped, so a watch gap never leaves stale usage behind.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use admission_kit::resources::try_pod_request;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};

use crate::ledger::{Amounts, Ledger, QuotaSpec};
use crate::tree::keys::CHILD_REQUEST;
use crate::tree::{annotation, pod_quota_label as quota_label};
use crate::types::ElasticQuota;

/// What a pod is charged: its request (Kubernetes' pod-request formula), exactly; nothing once it
/// has finished. `Err` names the amount that cannot be counted.
pub fn pod_requests(p: &Pod) -> Result<Amounts, String> {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Failed" | "Succeeded")) {
        return Ok(Amounts::new());
    }
    p.spec
        .as_ref()
        .map(try_pod_request)
        .transpose()
        .map(Option::unwrap_or_default)
        .map_err(|e| e.to_string())
}

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

/// The namespaces that exist, names only (a metadata watch): a review for a pod of any other
/// namespace can only be forged, and reserves nothing.
async fn feed_namespaces(client: kube::Client, ledger: Arc<Ledger>, ready: Arc<AtomicBool>) {
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(client);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut listing: Vec<String> = Vec::new();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(n)) => listing.extend(n.metadata.name),
            Ok(Event::InitDone) => {
                ledger.set_namespaces(listing.iter().map(String::as_str));
                listing = Vec::new();
                ready.store(true, Ordering::Release);
            }
            Ok(Event::Apply(n)) => {
                ledger.observe_namespace(n.metadata.name.as_deref().unwrap_or_default(), true)
            }
            Ok(Event::Delete(n)) => {
                ledger.observe_namespace(n.metadata.name.as_deref().unwrap_or_default(), false)
            }
            Err(e) => tracing::warn!(error = %e, "Namespace watch error; retrying"),
        }
    }
}

async fn feed_pods(
    client: kube::Client,
    ledger: Arc<Ledger>,
    ready: Arc<AtomicBool>,
    namespaces: Arc<AtomicBool>,
) {
    let api: Api<Pod> = Api::all(client);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut seen = HashSet::new();
    let key = |p: &Pod| {
        (
            p.metadata.namespace.clone().unwrap_or_default(),
            p.metadata.name.clone().unwrap_or_default(),
        )
    };
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => seen.clear(),
            Ok(Event::InitApply(p)) | Ok(Event::Apply(p)) => {
                let (ns, name) = key(&p);
                seen.insert((ns.clone(), name.clone()));
                ledger.observe_pod_usage(&ns, &name, quota_label(&p), pod_requests(&p));
            }
            Ok(Event::Delete(p)) => {
                let (ns, name) = key(&p);
                ledger.delete_pod(&ns, &name);
            }
            Ok(Event::InitDone) => {
                for (ns, name) in ledger.known().1 {
                    if !seen.contains(&(ns.clone(), name.clone())) {
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

/// Starts the feeds; the returned flags turn true after the first full list of quotas, and of
/// pods and namespaces.
pub fn start(client: kube::Client, ledger: Arc<Ledger>) -> (Arc<AtomicBool>, Arc<AtomicBool>) {
    let (q, p, n) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    tokio::spawn(feed_quotas(client.clone(), ledger.clone(), q.clone()));
    tokio::spawn(feed_namespaces(client.clone(), ledger.clone(), n.clone()));
    tokio::spawn(feed_pods(client, ledger, p.clone(), n));
    (q, p)
}
