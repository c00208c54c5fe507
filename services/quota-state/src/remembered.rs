//! The API server's addresses, remembered across restarts and fail-overs.
//!
//! A peer earns trust when one of its pods backs its reservation ([`crate::ledger`]'s peers);
//! a new leader knows none, and until the API server's first pod is seen its reviews are judged
//! as a stranger's, which a forger sending at full speed could crowd out for a while. So the
//! serving replica writes the trusted addresses of this cluster, with when each was last backed,
//! into an annotation of a Lease of its own, and a replica about to serve trusts those seen
//! within [`admission_kit::cluster::peers::MAX_AGE`] before it answers (the format:
//! [`admission_kit::cluster::peers`]). Only quota-state's account may write the Lease.
//!
//! lifecycle-webhook reads the same annotation: an eviction from an address the API server's
//! pods never came from starts no drain.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use admission_kit::cluster::peers::{ANNOTATION, MAX_REMEMBERED, decode, encode};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

use crate::ledger::Ledger;

/// How often the serving replica looks for a change to write.
const EVERY: Duration = Duration::from_secs(1);

/// A remembered address is rewritten when it was backed this much later than written.
const REFRESH: Duration = Duration::from_secs(600);

/// Where the annotation lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseAt {
    /// The service's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
}

/// Reads the remembered addresses and trusts them in `ledger`: how many it trusts anew.
pub async fn load(client: &kube::Client, ledger: &Ledger, at: &LeaseAt) -> Result<usize, String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &at.namespace);
    let lease = api
        .get_opt(&at.name)
        .await
        .map_err(|e| format!("Lease {}/{}: {e}", at.namespace, at.name))?;
    let text = lease
        .as_ref()
        .and_then(|l| l.metadata.annotations.as_ref())
        .and_then(|a| a.get(ANNOTATION))
        .map_or("", String::as_str);
    let peers = decode(text, SystemTime::now());
    let added = ledger.remember_trusted(&peers);
    if added > 0 {
        tracing::info!(
            added,
            lease = %at.name,
            "trusting the API server's addresses the previous leader remembered"
        );
    }
    Ok(added)
}

/// Writes `text` into the Lease's annotation; creates the Lease where it is missing and this
/// account may (the manifests ship it: `create` cannot be limited to a name).
async fn write(client: &kube::Client, at: &LeaseAt, text: &str) -> Result<(), String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &at.namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {ANNOTATION: text}}});
    match api
        .patch(&at.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(at.name.clone()),
                    annotations: Some(
                        [
                            (ANNOTATION.to_owned(), text.to_owned()),
                            (
                                "admission-webhooks.io/owner".to_owned(),
                                "quota-state".to_owned(),
                            ),
                        ]
                        .into(),
                    ),
                    ..ObjectMeta::default()
                },
                spec: None,
            };
            api.create(&PostParams::default(), &lease)
                .await
                .map(drop)
                .map_err(|e| format!("Lease {}/{} is missing: {e}", at.namespace, at.name))
        }
        Err(e) => Err(format!("Lease {}/{}: {e}", at.namespace, at.name)),
    }
}

/// While this replica serves: writes the trusted addresses whenever the set changes, or one was
/// backed [`REFRESH`] later than written.
pub async fn run(client: kube::Client, ledger: Arc<Ledger>, at: LeaseAt, serving: Arc<AtomicBool>) {
    let mut written: Vec<(String, Duration)> = Vec::new();
    let mut written_at = std::time::Instant::now();
    let mut failing = false;
    loop {
        tokio::time::sleep(EVERY).await;
        if !serving.load(Ordering::Acquire) {
            written.clear();
            continue;
        }
        let mut now: Vec<(String, Duration)> = ledger.trusted_here();
        now.truncate(MAX_REMEMBERED);
        let elapsed = written_at.elapsed();
        let changed = now.len() != written.len()
            || now.iter().zip(&written).any(|((a, ago), (b, was))| {
                // Backed later than written, by more than REFRESH?
                a != b || (was.saturating_add(elapsed)).saturating_sub(*ago) > REFRESH
            });
        if !changed || now.is_empty() {
            continue;
        }
        match write(&client, &at, &encode(&now, SystemTime::now())).await {
            Ok(()) => {
                if failing {
                    tracing::info!(lease = %at.name, "writing the API server's addresses again");
                }
                failing = false;
                written = now;
                written_at = std::time::Instant::now();
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(
                        error = %e,
                        "cannot remember the API server's addresses; retrying",
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

    #[test]
    fn remembered_addresses_are_trusted_and_others_are_not() {
        let ledger = Ledger::new(Duration::from_secs(15));
        let text = encode(
            &[("10.0.0.1".to_owned(), Duration::from_secs(1))],
            SystemTime::now(),
        );
        assert_eq!(
            ledger.remember_trusted(&decode(&text, SystemTime::now())),
            1
        );
        assert!(ledger.peer_trusted("", "10.0.0.1"));
        assert!(!ledger.peer_trusted("", "10.0.0.2"));
        assert_eq!(ledger.trusted_here()[0].0, "10.0.0.1");
        // A fleet member's addresses are never remembered for this cluster.
        assert_eq!(
            ledger.remember_trusted(&[("east/10.0.0.3".to_owned(), Duration::ZERO)]),
            0
        );
    }
}
