//! What the rules ask the Kubernetes API: the Pod an eviction names, whether a Node still
//! exists, and the drain record ([`crate::record`]), behind [`Cluster`] so that unit tests run
//! the rules against a cluster in memory.

use std::collections::BTreeMap;
use std::time::Duration;

use admission_kit::cluster::peers;
use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, ObjectMeta, PostParams};

use crate::record::{self, Begun, Ended};

/// Where the drain record lives, and how much it may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordAt {
    /// The service's namespace.
    pub namespace: String,
    /// The ConfigMap's name.
    pub name: String,
    /// What it holds at most.
    pub bounds: record::Bounds,
}

/// The API reads and record writes the rules need. Errors are texts for the warning a review
/// carries when it proceeds without an answer.
pub trait Cluster: Send + Sync {
    /// The Pod `namespace/name`, `None` when there is none.
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Pod>, String>>;

    /// Whether Node `name` exists.
    fn node_exists<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<bool, String>>;

    /// The addresses the API server's connections come from, as quota-state remembers them in
    /// Lease `namespace/name` ([`admission_kit::cluster::peers`]); none when there is no Lease.
    fn api_server_peers<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, String>>;

    /// The recorded drain of Pod `uid`, started now when none is and `at`'s bounds allow
    /// ([`record::begin_within`]).
    fn begin<'a>(
        &'a self,
        at: &'a RecordAt,
        uid: &'a str,
        pod: &'a str,
        timeout: Duration,
        now: Timestamp,
    ) -> BoxFuture<'a, Result<Begun, String>>;

    /// Records how the drain of `uid` ended; whether this call recorded it ([`record::end`]).
    fn end<'a>(
        &'a self,
        at: &'a RecordAt,
        uid: &'a str,
        how: Ended,
    ) -> BoxFuture<'a, Result<bool, String>>;
}

/// Compare-and-swap attempts on the record before a review gives up (other replicas writing
/// the same ConfigMap at the same moment).
const ATTEMPTS: usize = 5;

/// The cluster through the API server: a client from the environment (in-cluster config or
/// `KUBECONFIG`), made on first use.
pub struct Kube {
    client: tokio::sync::OnceCell<kube::Client>,
    /// The API server's addresses last read, by Lease, and when ([`PEERS_FRESH`]).
    peers: std::sync::Mutex<Option<(String, std::time::Instant, Vec<String>)>>,
}

/// How long the API server's addresses, once read, answer evictions before they are read again:
/// an eviction waits for no read in most cases, and an address quota-state has just learnt
/// counts within seconds.
const PEERS_FRESH: Duration = Duration::from_secs(5);

impl Kube {
    /// A client made from the environment on first use.
    pub fn from_environment() -> Self {
        Self {
            client: tokio::sync::OnceCell::new(),
            peers: std::sync::Mutex::default(),
        }
    }

    /// This client.
    pub fn with_client(client: kube::Client) -> Self {
        Self {
            client: tokio::sync::OnceCell::new_with(Some(client)),
            peers: std::sync::Mutex::default(),
        }
    }

    async fn client(&self) -> Result<kube::Client, String> {
        self.client
            .get_or_try_init(|| async {
                kube::Client::try_default()
                    .await
                    .map_err(|e| format!("no Kubernetes API client: {e}"))
            })
            .await
            .cloned()
    }

    /// Applies `change` to the record's data and writes it back when it changed, retrying on a
    /// conflict with a fresh read. The ConfigMap ships with the overlay; where it is missing
    /// (`cargo xtask up`, tests) it is created if this account may.
    async fn change<T>(
        &self,
        at: &RecordAt,
        mut change: impl FnMut(&mut BTreeMap<String, String>) -> Result<(T, bool), String>,
    ) -> Result<T, String> {
        let api: Api<ConfigMap> = Api::namespaced(self.client().await?, &at.namespace);
        let what = format!("drain record {}/{}", at.namespace, at.name);
        for _ in 0..ATTEMPTS {
            let Some(mut cm) = api
                .get_opt(&at.name)
                .await
                .map_err(|e| format!("{what}: {e}"))?
            else {
                let empty = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(at.name.clone()),
                        ..ObjectMeta::default()
                    },
                    ..ConfigMap::default()
                };
                match api.create(&PostParams::default(), &empty).await {
                    Ok(_) => continue,
                    Err(kube::Error::Api(s)) if s.code == 409 => continue,
                    Err(e) => return Err(format!("{what} is missing and was not created: {e}")),
                }
            };
            let mut data = cm.data.take().unwrap_or_default();
            let (out, changed) = change(&mut data)?;
            if !changed {
                return Ok(out);
            }
            cm.data = Some(data);
            cm.metadata.managed_fields = None;
            match api.replace(&at.name, &PostParams::default(), &cm).await {
                Ok(_) => return Ok(out),
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => return Err(format!("{what}: {e}")),
            }
        }
        Err(format!(
            "{what}: changed by others {ATTEMPTS} times in a row"
        ))
    }
}

impl Cluster for Kube {
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Pod>, String>> {
        Box::pin(async move {
            Api::<Pod>::namespaced(self.client().await?, namespace)
                .get_opt(name)
                .await
                .map_err(|e| format!("Pod {namespace}/{name}: {e}"))
        })
    }

    fn node_exists<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            Api::<Node>::all(self.client().await?)
                .get_metadata_opt(name)
                .await
                .map(|n| n.is_some())
                .map_err(|e| format!("Node {name}: {e}"))
        })
    }

    fn api_server_peers<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(async move {
            let key = format!("{namespace}/{name}");
            let cached = |c: &Option<(String, std::time::Instant, Vec<String>)>| {
                c.as_ref()
                    .filter(|(k, at, _)| *k == key && at.elapsed() < PEERS_FRESH)
                    .map(|(.., p)| p.clone())
            };
            if let Some(p) = self.peers.lock().ok().and_then(|c| cached(&c)) {
                return Ok(p);
            }
            let lease = Api::<Lease>::namespaced(self.client().await?, namespace)
                .get_opt(name)
                .await
                .map_err(|e| format!("Lease {key}: {e}"))?;
            let text = lease
                .as_ref()
                .and_then(|l| l.metadata.annotations.as_ref())
                .and_then(|a| a.get(peers::ANNOTATION))
                .map_or("", String::as_str);
            let found: Vec<String> = peers::decode(text, std::time::SystemTime::now())
                .into_iter()
                .map(|(p, _)| p)
                .collect();
            if let Ok(mut c) = self.peers.lock() {
                *c = Some((key, std::time::Instant::now(), found.clone()));
            }
            Ok(found)
        })
    }

    fn begin<'a>(
        &'a self,
        at: &'a RecordAt,
        uid: &'a str,
        pod: &'a str,
        timeout: Duration,
        now: Timestamp,
    ) -> BoxFuture<'a, Result<Begun, String>> {
        Box::pin(self.change(at, move |data| {
            record::begin_within(data, uid, pod, timeout, now, at.bounds)
        }))
    }

    fn end<'a>(
        &'a self,
        at: &'a RecordAt,
        uid: &'a str,
        how: Ended,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(self.change(at, move |data| {
            let changed = record::end(data, uid, how);
            Ok((changed, changed))
        }))
    }
}

/// A cluster in memory for the rules' unit tests and the fuzz target: Pods and Nodes given,
/// one record.
#[cfg(any(test, feature = "testing"))]
#[derive(Default)]
pub struct Memory {
    /// Pods by `namespace/name`.
    pub pods: std::sync::Mutex<BTreeMap<String, Pod>>,
    /// Names of the Nodes that exist.
    pub nodes: std::sync::Mutex<Vec<String>>,
    /// The record's data.
    pub record: std::sync::Mutex<BTreeMap<String, String>>,
    /// When set, every call fails with this text (an API server that cannot be reached).
    pub failing: std::sync::Mutex<Option<String>>,
    /// The API server's addresses, as quota-state's Lease would list them.
    pub api_server_peers: std::sync::Mutex<Vec<String>>,
}

#[cfg(any(test, feature = "testing"))]
impl Memory {
    fn failed(&self) -> Result<(), String> {
        match self.failing.lock() {
            Ok(f) => f.clone().map_or(Ok(()), Err),
            Err(_) => Err("poisoned".into()),
        }
    }
}

#[cfg(any(test, feature = "testing"))]
impl Cluster for Memory {
    fn pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Pod>, String>> {
        Box::pin(async move {
            self.failed()?;
            let pods = self.pods.lock().map_err(|_| "poisoned".to_owned())?;
            Ok(pods.get(&format!("{namespace}/{name}")).cloned())
        })
    }

    fn node_exists<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            self.failed()?;
            let nodes = self.nodes.lock().map_err(|_| "poisoned".to_owned())?;
            Ok(nodes.iter().any(|n| n == name))
        })
    }

    fn api_server_peers<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(async move {
            self.failed()?;
            let peers = self
                .api_server_peers
                .lock()
                .map_err(|_| "poisoned".to_owned())?;
            Ok(peers.clone())
        })
    }

    fn begin<'a>(
        &'a self,
        at: &'a RecordAt,
        uid: &'a str,
        pod: &'a str,
        timeout: Duration,
        now: Timestamp,
    ) -> BoxFuture<'a, Result<Begun, String>> {
        Box::pin(async move {
            self.failed()?;
            let mut data = self.record.lock().map_err(|_| "poisoned".to_owned())?;
            record::begin_within(&mut data, uid, pod, timeout, now, at.bounds).map(|(b, _)| b)
        })
    }

    fn end<'a>(
        &'a self,
        _: &'a RecordAt,
        uid: &'a str,
        how: Ended,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            self.failed()?;
            let mut data = self.record.lock().map_err(|_| "poisoned".to_owned())?;
            Ok(record::end(&mut data, uid, how))
        })
    }
}
