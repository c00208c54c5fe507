//! Feeds the ledger from the API server: watches of ElasticQuotas and Pods (kube-runtime
//! watchers, retried with backoff after errors). After each (re)list, objects the list no longer
//! holds are dropped, so a watch gap never leaves stale usage behind.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use admission_kit::resources::pod_request;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use serde_json::Value;

use crate::ledger::{Amount, Amounts, Ledger, QuotaSpec};

const NAME: &str = "quota.scheduling.koordinator.sh/name";

fn amounts_of(v: &Value) -> Amounts {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, q)| {
                    let q = admission_kit::go::Quantity::parse(q.as_str()?).ok()?;
                    let p = q.value();
                    Some((
                        k.clone(),
                        Amount {
                            milli: p.milli_value()?,
                            format: p.format,
                        },
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The ledger's view of an ElasticQuota object.
pub fn quota_spec(o: &DynamicObject) -> QuotaSpec {
    let label = |k: &str| {
        o.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(k))
            .cloned()
            .unwrap_or_default()
    };
    let ann = |k: &str| {
        o.metadata
            .annotations
            .as_ref()
            .and_then(|l| l.get(k))
            .cloned()
            .unwrap_or_default()
    };
    let max = amounts_of(&o.data["spec"]["max"]);
    let admission: Value = serde_json::from_str(&ann("quota.scheduling.koordinator.sh/admission"))
        .unwrap_or(Value::Null);
    let admission = amounts_of(&admission);
    let parent = label("quota.scheduling.koordinator.sh/parent");
    QuotaSpec {
        name: o.metadata.name.clone().unwrap_or_default(),
        namespace: o.metadata.namespace.clone().unwrap_or_default(),
        parent: (!parent.is_empty() && parent != "koordinator-root-quota").then_some(parent),
        limit: if admission.is_empty() {
            max.clone()
        } else {
            admission
        },
        max,
        namespaces: serde_json::from_str(&ann("quota.scheduling.koordinator.sh/namespaces"))
            .unwrap_or_default(),
    }
}

/// What a live pod is charged: its quota and request; `None` once it has finished.
pub fn pod_charge(ledger: &Ledger, p: &Pod) -> Option<(String, Amounts)> {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Failed" | "Succeeded")) {
        return None;
    }
    let ns = p.metadata.namespace.as_deref().unwrap_or_default();
    let quota = ledger.quota_of_pod(
        ns,
        p.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NAME))
            .map(String::as_str),
    );
    let req = p.spec.as_ref().map(pod_request).unwrap_or_default();
    let amounts = req
        .into_iter()
        .filter_map(|(k, a)| {
            Some((
                k,
                Amount {
                    milli: i64::try_from(a.milli).ok()?,
                    format: a.format,
                },
            ))
        })
        .collect();
    Some((quota, amounts))
}

/// The ElasticQuota resource.
pub fn elastic_quota_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.sigs.k8s.io", "v1alpha1", "ElasticQuota"),
        "elasticquotas",
    )
}

async fn feed_quotas(client: kube::Client, ledger: Arc<Ledger>, ready: Arc<AtomicBool>) {
    let api: Api<DynamicObject> = Api::all_with(client, &elastic_quota_resource());
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut seen = HashSet::new();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => seen.clear(),
            Ok(Event::InitApply(o)) | Ok(Event::Apply(o)) => {
                let spec = quota_spec(&o);
                seen.insert((spec.name.clone(), spec.namespace.clone()));
                ledger.upsert_quota(spec);
            }
            Ok(Event::Delete(o)) => {
                let spec = quota_spec(&o);
                ledger.delete_quota(&spec.name, &spec.namespace);
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

async fn feed_pods(client: kube::Client, ledger: Arc<Ledger>, ready: Arc<AtomicBool>) {
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
                ledger.observe_pod(&ns, &name, pod_charge(&ledger, &p));
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
                ready.store(true, Ordering::Release);
            }
            Err(e) => tracing::warn!(error = %e, "Pod watch error; retrying"),
        }
    }
}

/// Starts both feeds; the returned flags turn true after each one's first full list.
pub fn start(client: kube::Client, ledger: Arc<Ledger>) -> (Arc<AtomicBool>, Arc<AtomicBool>) {
    let (q, p) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    tokio::spawn(feed_quotas(client.clone(), ledger.clone(), q.clone()));
    tokio::spawn(feed_pods(client, ledger, p.clone()));
    (q, p)
}
