//! Cluster state that rules read: one lookup interface, two backings.
//!
//! In `serve` the state is a set of kube-runtime reflector stores kept current by watches (one per
//! kind a service declares), so a review normally makes no API call. In `review` it is the objects
//! of `--state` files. Rules see only [`ClusterState`], so the same rule code runs both ways.
//!
//! A watch cache lags the API server: `kubectl apply -f dir/` creates a policy and, a moment
//! later, the binding that names it. So a lookup the cache cannot answer (a miss, or any lookup
//! before the initial list is in) is read from the API server with a short deadline
//! ([`LIVE_READ_DEADLINE`]), counted in `admission_webhook_state_live_reads_total`. An absence
//! the API server confirmed is remembered for [`ABSENT_FOR`], so a rule that looks up an object
//! that does not exist on every review (an optional ConfigMap) costs the API server at most one
//! read per second and name, not one per review. Past [`REFRESH_AFTER`] a lookup still answers
//! from that confirmation and asks again in the background, so under steady traffic no review
//! waits for the read (on a busy API server it took 0.2 to 0.45 s: the p99 of `/validate-pod`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};

use crate::review::app::{Keep, WatchSpec};
use crate::review::lookup::{ClusterState, Generation, LookupError, TypeKey};

/// Each [`StaticState`] gets its own identity, so generations of two states never compare equal.
fn next_state_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Why a state file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// The file could not be read.
    #[error("cannot read state file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is neither JSON nor YAML, or an object lacks apiVersion, kind or metadata.name.
    #[error("state file {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

type Objects = BTreeMap<(String, String), Arc<DynamicObject>>;

/// Objects loaded from files (`review --state`): JSON or YAML, single objects, multi-document
/// YAML, or `List`s.
#[derive(Debug)]
pub struct StaticState {
    by_type: HashMap<TypeKey, Objects>,
    /// This state's identity and, per kind, how many times its objects changed.
    id: u64,
    changes: HashMap<TypeKey, u64>,
    /// Per kind, the objects added since its last change that was not an addition.
    added: HashMap<TypeKey, Additions>,
}

/// The objects of a kind added one after another from change `from` on (`objects[i]` made
/// change `from + i + 1`).
#[derive(Debug, Default)]
struct Additions {
    from: u64,
    objects: Vec<Arc<DynamicObject>>,
}

impl Default for StaticState {
    fn default() -> Self {
        Self {
            by_type: HashMap::new(),
            id: next_state_id(),
            changes: HashMap::new(),
            added: HashMap::new(),
        }
    }
}

impl StaticState {
    /// Loads every object of every file.
    pub fn from_files<P: AsRef<Path>>(paths: &[P]) -> Result<Self, StateFileError> {
        let mut state = Self::default();
        for p in paths {
            let path = p.as_ref().display().to_string();
            let text = std::fs::read_to_string(p).map_err(|source| StateFileError::Read {
                path: path.clone(),
                source,
            })?;
            state
                .add_text(&text)
                .map_err(|message| StateFileError::Parse { path, message })?;
        }
        Ok(state)
    }

    /// Adds the objects of JSON or YAML text.
    pub fn add_text(&mut self, text: &str) -> Result<(), String> {
        let docs: Vec<serde_json::Value> = match serde_json::from_str(text) {
            Ok(v) => vec![v],
            Err(json_err) => {
                let mut docs = Vec::new();
                for doc in serde_yaml_ng::Deserializer::from_str(text) {
                    use serde::Deserialize;
                    let v = serde_json::Value::deserialize(doc)
                        .map_err(|e| format!("neither JSON ({json_err}) nor YAML ({e})"))?;
                    if !v.is_null() {
                        docs.push(v);
                    }
                }
                docs
            }
        };
        for doc in docs {
            self.add_value(doc)?;
        }
        Ok(())
    }

    /// Adds one object, or each item of a `List`.
    pub fn add_value(&mut self, v: serde_json::Value) -> Result<(), String> {
        let is_list = v
            .get("kind")
            .and_then(|k| k.as_str())
            .is_some_and(|k| k.ends_with("List"))
            && v.get("items").is_some_and(|i| i.is_array());
        if is_list {
            if let serde_json::Value::Object(mut m) = v
                && let Some(serde_json::Value::Array(items)) = m.remove("items")
            {
                for item in items {
                    self.add_value(item)?;
                }
            }
            return Ok(());
        }
        let obj: DynamicObject =
            serde_json::from_value(v).map_err(|e| format!("not a Kubernetes object: {e}"))?;
        let tm = obj
            .types
            .clone()
            .ok_or_else(|| "an object has no apiVersion/kind".to_owned())?;
        let name = obj
            .metadata
            .name
            .clone()
            .ok_or_else(|| format!("a {} has no metadata.name", tm.kind))?;
        let ns = obj.metadata.namespace.clone().unwrap_or_default();
        let key = TypeKey {
            api_version: tm.api_version,
            kind: tm.kind,
        };
        match self
            .by_type
            .entry(key.clone())
            .or_default()
            .entry((ns, name))
        {
            // The same object again keeps its allocation and the kind's generation: what was
            // derived from a list of these objects (a quota tree) stays valid, as it would for
            // a watch that sees no change.
            std::collections::btree_map::Entry::Occupied(e) if **e.get() == obj => return Ok(()),
            std::collections::btree_map::Entry::Occupied(mut e) => {
                e.insert(Arc::new(obj));
                let changes = self.changes.entry(key.clone()).or_default();
                *changes += 1;
                // A replacement: what was added before it is no longer all that changed.
                self.added.insert(
                    key,
                    Additions {
                        from: *changes,
                        objects: Vec::new(),
                    },
                );
            }
            std::collections::btree_map::Entry::Vacant(e) => {
                let obj = Arc::clone(e.insert(Arc::new(obj)));
                *self.changes.entry(key.clone()).or_default() += 1;
                self.added.entry(key).or_default().objects.push(obj);
            }
        }
        Ok(())
    }

    /// How many objects are loaded.
    pub fn len(&self) -> usize {
        self.by_type.values().map(BTreeMap::len).sum()
    }

    /// Whether nothing is loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A [`StaticState`] that gains objects while it is read: admission-check's run (each object it
/// admits joins the state later objects are checked against) and tests. An object keeps its
/// allocation once added, so what is derived from a list of them stays valid for that list.
#[derive(Debug, Default)]
pub struct GrowingState(std::sync::RwLock<StaticState>);

impl GrowingState {
    /// Starts from `state`.
    pub fn new(state: StaticState) -> Self {
        Self(std::sync::RwLock::new(state))
    }

    /// Adds an object (or a List's items), as [`StaticState::add_value`].
    pub fn add_value(&self, v: serde_json::Value) -> Result<(), String> {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .add_value(v)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, StaticState> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ClusterState for GrowingState {
    fn get(
        &self,
        ty: &TypeKey,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        self.read().get(ty, namespace, name)
    }

    fn list(
        &self,
        ty: &TypeKey,
        namespace: Option<&str>,
    ) -> Result<Vec<Arc<DynamicObject>>, LookupError> {
        self.read().list(ty, namespace)
    }

    fn generation(&self, ty: &TypeKey) -> Option<Generation> {
        self.read().generation(ty)
    }

    fn added_since(&self, ty: &TypeKey, since: Generation) -> Option<Vec<Arc<DynamicObject>>> {
        self.read().added_since(ty, since)
    }

    fn read_now(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        self.read().read_now(resource, namespace, name)
    }
}

impl ClusterState for StaticState {
    fn get(
        &self,
        ty: &TypeKey,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        Ok(self.by_type.get(ty).and_then(|objs| {
            objs.get(&(namespace.unwrap_or_default().to_owned(), name.to_owned()))
                .cloned()
        }))
    }

    fn list(
        &self,
        ty: &TypeKey,
        namespace: Option<&str>,
    ) -> Result<Vec<Arc<DynamicObject>>, LookupError> {
        Ok(self
            .by_type
            .get(ty)
            .map(|objs| {
                objs.iter()
                    .filter(|((ns, _), _)| namespace.is_none_or(|want| want == ns))
                    .map(|(_, o)| o.clone())
                    .collect()
            })
            .unwrap_or_default())
    }

    fn generation(&self, ty: &TypeKey) -> Option<Generation> {
        Some((self.id, self.changes.get(ty).copied().unwrap_or_default()))
    }

    fn added_since(&self, ty: &TypeKey, (id, at): Generation) -> Option<Vec<Arc<DynamicObject>>> {
        if id != self.id {
            return None;
        }
        let Some(added) = self.added.get(ty) else {
            // Nothing of the kind ever changed: nothing added since.
            return (at == 0).then(Vec::new);
        };
        let skip = usize::try_from(at.checked_sub(added.from)?).ok()?;
        added.objects.get(skip..).map(<[_]>::to_vec)
    }

    fn read_now(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        let ty = TypeKey {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        };
        self.get(&ty, namespace, name)
    }
}

/// Runs one read from the API server on this worker thread within [`LIVE_READ_DEADLINE`]
/// (rules are synchronous: `block_in_place` hands the thread's other tasks to the other
/// workers), counting it in `admission_webhook_state_live_reads_total` by kind and result.
/// `None` on a runtime where a thread cannot be lent (current-thread), where nothing is read.
fn read_blocking(
    kind: &str,
    read: impl std::future::Future<Output = Result<Option<DynamicObject>, kube::Error>>,
) -> Option<Result<Option<Arc<DynamicObject>>, String>> {
    let handle = tokio::runtime::Handle::try_current()
        .ok()
        .filter(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)?;
    let got = tokio::task::block_in_place(|| {
        handle.block_on(tokio::time::timeout(LIVE_READ_DEADLINE, read))
    });
    Some(counted(kind, got))
}

/// A live read's outcome, counted in `admission_webhook_state_live_reads_total` by kind and
/// result.
fn counted(
    kind: &str,
    got: Result<Result<Option<DynamicObject>, kube::Error>, tokio::time::error::Elapsed>,
) -> Result<Option<Arc<DynamicObject>>, String> {
    match got {
        Ok(Ok(Some(mut o))) => {
            o.managed_fields_mut().clear();
            crate::server::metrics::state_live_read(kind, "found");
            Ok(Some(Arc::new(o)))
        }
        Ok(Ok(None)) => {
            crate::server::metrics::state_live_read(kind, "absent");
            Ok(None)
        }
        Ok(Err(e)) => {
            crate::server::metrics::state_live_read(kind, "error");
            Err(e.to_string())
        }
        Err(_) => {
            crate::server::metrics::state_live_read(kind, "error");
            Err(format!(
                "no answer within {} ms",
                LIVE_READ_DEADLINE.as_millis()
            ))
        }
    }
}

/// One object read from the API server (metadata only when `metadata_only`), owning what it
/// needs so that it can also run on a task of its own.
async fn read_one(
    client: Client,
    resource: ApiResource,
    metadata_only: bool,
    namespace: Option<String>,
    name: String,
) -> Result<Option<DynamicObject>, kube::Error> {
    let namespace = namespace.as_deref();
    if metadata_only {
        let api = api_for::<PartialObjectMeta<DynamicObject>>(&client, namespace, &resource);
        api.get_metadata_opt(&name).await.map(|o| {
            o.map(|p| DynamicObject {
                types: Some(kube::core::TypeMeta {
                    api_version: resource.api_version.clone(),
                    kind: resource.kind.clone(),
                }),
                metadata: p.metadata,
                data: serde_json::Value::Object(serde_json::Map::new()),
            })
        })
    } else {
        api_for::<DynamicObject>(&client, namespace, &resource)
            .get_opt(&name)
            .await
    }
}

/// The API of `ar` objects in `namespace`, or in all namespaces.
fn api_for<K>(client: &Client, namespace: Option<&str>, ar: &ApiResource) -> Api<K>
where
    K: Resource<DynamicType = ApiResource, Scope = kube::core::DynamicResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

/// A metadata-only watch event as the object of its kind with no fields beyond metadata, so that
/// the store and the lookups stay one type (and typed reads of it see the right kind).
fn metadata_event(
    e: watcher::Event<PartialObjectMeta<DynamicObject>>,
    types: &kube::core::TypeMeta,
) -> watcher::Event<DynamicObject> {
    let object = |p: PartialObjectMeta<DynamicObject>| DynamicObject {
        types: Some(types.clone()),
        metadata: p.metadata,
        data: serde_json::Value::Object(serde_json::Map::new()),
    };
    match e {
        watcher::Event::Apply(p) => watcher::Event::Apply(object(p)),
        watcher::Event::Delete(p) => watcher::Event::Delete(object(p)),
        watcher::Event::InitApply(p) => watcher::Event::InitApply(object(p)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

struct Watched {
    resource: ApiResource,
    cache: Cache,
    synced: Arc<AtomicBool>,
    metadata_only: bool,
}

/// Where a watch's objects are kept.
enum Cache {
    /// kube-runtime's reflector store.
    Full(Store<DynamicObject>),
    /// A metadata-only watch whose rules name what they read ([`WatchSpec::keep`]).
    Kept(Arc<KeptCache>),
}

impl Cache {
    fn get(
        &self,
        ar: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<DynamicObject>> {
        match self {
            Cache::Full(store) => {
                let mut key = ObjectRef::new_with(name, ar.clone());
                if let Some(ns) = namespace {
                    key = key.within(ns);
                }
                store.get(&key)
            }
            Cache::Kept(c) => c.get(namespace.unwrap_or_default(), name),
        }
    }

    fn list(&self, namespace: Option<&str>) -> Vec<Arc<DynamicObject>> {
        match (self, namespace) {
            (Cache::Full(store), None) => store.state(),
            (Cache::Full(store), Some(ns)) => {
                store.state_filter(|o| o.metadata.namespace.as_deref() == Some(ns))
            }
            (Cache::Kept(c), ns) => c.list(ns),
        }
    }
}

/// Objects by namespace (`""` for cluster-scoped kinds), then name.
type ByName = HashMap<Box<str>, HashMap<Box<str>, Arc<DynamicObject>>>;

/// The cache of a metadata-only watch that keeps only what its rules read: each object trimmed
/// to its namespace, name and the kept labels and annotations, held by namespace and name.
/// Written by hand rather than with kube-runtime's reflector store, whose key for every object
/// (`ObjectRef`) carries its own copy of the kind's `ApiResource` and of the object's identity,
/// as large again as the trimmed object: with a Pod's metadata trimmed, the key would be half
/// of what each cached Pod costs. A relist is gathered aside and replaces the objects when it
/// is complete, as the reflector does, so lookups meanwhile see the last full state.
#[derive(Default)]
struct KeptCache {
    objects: std::sync::RwLock<ByName>,
    /// The relist under way.
    relist: Mutex<Option<ByName>>,
    types: Option<kube::core::TypeMeta>,
    keep: Keep,
}

impl KeptCache {
    fn new(ar: &ApiResource, keep: Keep) -> Self {
        Self {
            types: Some(kube::core::TypeMeta {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
            }),
            keep,
            ..Self::default()
        }
    }

    /// `o` as the rules read it.
    fn trim(&self, o: DynamicObject) -> DynamicObject {
        let only = |m: Option<BTreeMap<String, String>>, keys: &[String]| {
            let kept: BTreeMap<String, String> = m
                .into_iter()
                .flatten()
                .filter(|(k, _)| keys.contains(k))
                .collect();
            (!kept.is_empty()).then_some(kept)
        };
        DynamicObject {
            types: self.types.clone(),
            metadata: kube::api::ObjectMeta {
                name: o.metadata.name,
                namespace: o.metadata.namespace,
                labels: only(o.metadata.labels, &self.keep.labels),
                annotations: only(o.metadata.annotations, &self.keep.annotations),
                ..Default::default()
            },
            data: serde_json::Value::Object(serde_json::Map::new()),
        }
    }

    fn insert(into: &mut ByName, o: DynamicObject) {
        let ns = o.metadata.namespace.as_deref().unwrap_or_default();
        let name: Box<str> = o.metadata.name.as_deref().unwrap_or_default().into();
        match into.get_mut(ns) {
            Some(names) => {
                names.insert(name, Arc::new(o));
            }
            None => {
                let ns: Box<str> = ns.into();
                into.entry(ns).or_default().insert(name, Arc::new(o));
            }
        }
    }

    fn remove(from: &mut ByName, o: &DynamicObject) {
        let ns = o.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(names) = from.get_mut(ns) {
            names.remove(o.metadata.name.as_deref().unwrap_or_default());
            if names.is_empty() {
                from.remove(ns);
            }
        }
    }

    /// Applies one watch event; true when a complete list has just been applied.
    fn apply(&self, e: watcher::Event<DynamicObject>) -> bool {
        let write = || self.objects.write().unwrap_or_else(|p| p.into_inner());
        let relist = || self.relist.lock().unwrap_or_else(|p| p.into_inner());
        match e {
            watcher::Event::Init => *relist() = Some(ByName::new()),
            watcher::Event::InitApply(o) => {
                let o = self.trim(o);
                Self::insert(relist().get_or_insert_with(ByName::new), o);
            }
            watcher::Event::InitDone => {
                let listed = relist().take().unwrap_or_default();
                *write() = listed;
                return true;
            }
            watcher::Event::Apply(o) => {
                let o = self.trim(o);
                Self::insert(&mut write(), o);
            }
            watcher::Event::Delete(o) => Self::remove(&mut write(), &o),
        }
        false
    }

    fn get(&self, namespace: &str, name: &str) -> Option<Arc<DynamicObject>> {
        let objects = self.objects.read().unwrap_or_else(|p| p.into_inner());
        objects.get(namespace)?.get(name).cloned()
    }

    fn list(&self, namespace: Option<&str>) -> Vec<Arc<DynamicObject>> {
        let objects = self.objects.read().unwrap_or_else(|p| p.into_inner());
        match namespace {
            Some(ns) => objects
                .get(ns)
                .map(|names| names.values().cloned().collect())
                .unwrap_or_default(),
            None => objects
                .values()
                .flat_map(|names| names.values().cloned())
                .collect(),
        }
    }
}

/// How long a live read may take: well inside the webhooks' 10 s timeout, and short enough that
/// an unreachable API server does not hold a review long (the cache's answer is used then).
pub const LIVE_READ_DEADLINE: Duration = Duration::from_secs(1);

/// How long an absence confirmed by the API server is trusted without asking again.
pub const ABSENT_FOR: Duration = Duration::from_secs(1);

/// How old a trusted absence may be before a lookup that uses it also asks again, on a task of
/// its own: half of [`ABSENT_FOR`], so that a read of ordinary speed renews the confirmation
/// before it expires.
pub const REFRESH_AFTER: Duration = Duration::from_millis(500);

/// (kind, namespace, name) of a looked-up object.
type AbsentKey = (TypeKey, Option<String>, String);

/// An absence the API server confirmed.
#[derive(Debug, Clone, Copy)]
struct Absence {
    /// When it was confirmed.
    at: Instant,
    /// Whether a read to renew it is under way.
    renewing: bool,
}

/// Absences the API server confirmed.
type Absences = Mutex<HashMap<AbsentKey, Absence>>;

/// Reflector stores fed by watches: the `serve` backing of [`ClusterState`].
pub struct WatchState {
    by_type: HashMap<TypeKey, Watched>,
    client: Client,
    absent: Arc<Absences>,
}

/// What a live read found.
enum Live {
    Found(Arc<DynamicObject>),
    Absent,
    /// No answer (deadline, connection, a current-thread runtime that cannot block).
    Unknown,
}

impl WatchState {
    /// Starts one watch per resource on the runtime. Watch errors are retried with backoff
    /// forever (kube-runtime's default backoff); the store keeps serving its last contents.
    /// `settings` (the gates in force) answers [`WatchSpec::needed`].
    pub fn start(
        client: Client,
        specs: &[WatchSpec],
        settings: &crate::review::handler::Context,
    ) -> Self {
        let mut by_type = HashMap::new();
        for spec in specs {
            if spec.needed.as_ref().is_some_and(|needed| !needed(settings)) {
                tracing::info!(
                    kind = %spec.resource.kind,
                    "not watched: no rule reads it with these options",
                );
                continue;
            }
            let ar = &spec.resource;
            let synced = Arc::new(AtomicBool::new(false));
            let (namespace, config) = match &spec.only {
                Some((ns, name)) => (
                    Some(ns.as_str()),
                    watcher::Config::default().fields(&format!("metadata.name={name}")),
                ),
                None => (None, watcher::Config::default()),
            };
            let kind = ar.kind.clone();
            let events = if spec.metadata_only {
                let types = kube::core::TypeMeta {
                    api_version: ar.api_version.clone(),
                    kind: ar.kind.clone(),
                };
                watcher(
                    api_for::<PartialObjectMeta<DynamicObject>>(&client, namespace, ar),
                    config,
                )
                .map_ok(move |e| metadata_event(e, &types))
                .boxed()
            } else {
                watcher(api_for::<DynamicObject>(&client, namespace, ar), config).boxed()
            };
            let events = events.default_backoff();
            let kept = spec
                .keep
                .as_ref()
                .filter(|_| spec.metadata_only)
                .map(|keep| Arc::new(KeptCache::new(ar, keep(settings))));
            let (cache, stream) = match kept {
                Some(kept) => {
                    let (c, flag) = (kept.clone(), synced.clone());
                    let stream = events
                        .map_ok(move |e| {
                            if c.apply(e) {
                                flag.store(true, Ordering::Release);
                            }
                        })
                        .boxed();
                    (Cache::Kept(kept), stream)
                }
                None => {
                    let writer = reflector::store::Writer::<DynamicObject>::new(ar.clone());
                    let store = writer.as_reader();
                    let stream = events
                        // No rule reads managedFields, and they are often the larger part of an
                        // object: the stores hold every Pod (or Node) of the cluster.
                        .modify(|o| o.managed_fields_mut().clear())
                        .reflect(writer)
                        .applied_objects()
                        .map_ok(|_| ())
                        .boxed();
                    let (s, flag) = (store.clone(), synced.clone());
                    tokio::spawn(async move {
                        if s.wait_until_ready().await.is_ok() {
                            flag.store(true, Ordering::Release);
                        }
                    });
                    (Cache::Full(store), stream)
                }
            };
            let (optional, absent_flag) = (spec.optional, synced.clone());
            tokio::spawn(async move {
                futures::pin_mut!(stream);
                let mut said_absent = false;
                while let Some(ev) = stream.next().await {
                    match ev {
                        // An optional kind the API server does not serve: empty until it does.
                        Err(watcher::Error::InitialListFailed(kube::Error::Api(s)))
                            if optional && s.code == 404 =>
                        {
                            absent_flag.store(true, Ordering::Release);
                            if !said_absent {
                                tracing::info!(
                                    kind = %kind,
                                    "kind not installed; its lookups find nothing until it is",
                                );
                                said_absent = true;
                            }
                        }
                        Err(e) => tracing::warn!(kind = %kind, error = %e, "watch error; retrying"),
                        Ok(_) => {}
                    }
                }
            });
            by_type.insert(
                TypeKey::of_resource(ar),
                Watched {
                    resource: ar.clone(),
                    cache,
                    synced,
                    metadata_only: spec.metadata_only,
                },
            );
        }
        Self {
            by_type,
            client,
            absent: Arc::default(),
        }
    }

    /// Reads one object from the API server (metadata only for kinds watched so), within
    /// [`LIVE_READ_DEADLINE`]. Rules are synchronous, so the read blocks this worker thread
    /// (`block_in_place` hands its other tasks to the other workers); on a current-thread
    /// runtime, where that is impossible, it answers [`Live::Unknown`].
    fn live_get(&self, w: &Watched, namespace: Option<&str>, name: &str) -> Live {
        let read = read_one(
            self.client.clone(),
            w.resource.clone(),
            w.metadata_only,
            namespace.map(str::to_owned),
            name.to_owned(),
        );
        match read_blocking(&w.resource.kind, read) {
            None => Live::Unknown,
            Some(Ok(Some(o))) => Live::Found(o),
            Some(Ok(None)) => Live::Absent,
            Some(Err(e)) => {
                tracing::debug!(kind = %w.resource.kind, name, error = %e, "live read failed");
                Live::Unknown
            }
        }
    }

    /// Whether the API server said a moment ago that this object does not exist: `Some(renew)`
    /// while the confirmation is trusted, `renew` when this lookup should ask again (it is past
    /// [`REFRESH_AFTER`] and no other lookup is asking).
    fn recently_absent(&self, key: &AbsentKey) -> Option<bool> {
        let mut m = self.absent.lock().ok()?;
        match m.get_mut(key).map(|a| (a.at.elapsed(), a)) {
            Some((age, a)) if age < ABSENT_FOR => {
                let renew = !a.renewing && age >= REFRESH_AFTER;
                a.renewing |= renew;
                Some(renew)
            }
            Some(_) => {
                m.remove(key);
                None
            }
            None => None,
        }
    }

    /// Asks the API server again about an absence still trusted, on a task of its own: the
    /// lookup that started it answers from the confirmation at once. Absent again: the
    /// confirmation is renewed; found: forgotten, so the next lookup reads the object (unless
    /// the watch has brought it); no answer: left to expire.
    fn renew_absence(&self, w: &Watched, key: AbsentKey) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            stop_renewing(&self.absent, &key);
            return;
        };
        let read = read_one(
            self.client.clone(),
            w.resource.clone(),
            w.metadata_only,
            key.1.clone(),
            key.2.clone(),
        );
        let (absent, kind) = (self.absent.clone(), w.resource.kind.clone());
        handle.spawn(async move {
            let got = counted(&kind, tokio::time::timeout(LIVE_READ_DEADLINE, read).await);
            match got {
                Ok(None) => remember(&absent, key),
                Ok(Some(_)) => {
                    if let Ok(mut m) = absent.lock() {
                        m.remove(&key);
                    }
                }
                Err(e) => {
                    tracing::debug!(kind, name = key.2, error = %e, "live read failed");
                    stop_renewing(&absent, &key);
                }
            }
        });
    }

    /// Whether every watch has finished its initial list.
    pub fn synced(&self) -> bool {
        self.by_type
            .values()
            .all(|w| w.synced.load(Ordering::Acquire))
    }

    fn watched(&self, ty: &TypeKey) -> Result<&Watched, LookupError> {
        let w = self
            .by_type
            .get(ty)
            .ok_or_else(|| LookupError::NotWatched(ty.to_string()))?;
        if !w.synced.load(Ordering::Acquire) {
            return Err(LookupError::NotSynced(ty.to_string()));
        }
        Ok(w)
    }
}

/// Records that the API server has just confirmed `key` absent.
fn remember(absent: &Absences, key: AbsentKey) {
    if let Ok(mut m) = absent.lock() {
        // Bounded: expired entries go whenever the map has grown.
        if m.len() >= 4096 {
            m.retain(|_, a| a.at.elapsed() < ABSENT_FOR);
        }
        m.insert(
            key,
            Absence {
                at: Instant::now(),
                renewing: false,
            },
        );
    }
}

/// Leaves `key`'s absence to expire: no read renews it now.
fn stop_renewing(absent: &Absences, key: &AbsentKey) {
    if let Ok(mut m) = absent.lock()
        && let Some(a) = m.get_mut(key)
    {
        a.renewing = false;
    }
}

impl ClusterState for WatchState {
    fn get(
        &self,
        ty: &TypeKey,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        let w = self
            .by_type
            .get(ty)
            .ok_or_else(|| LookupError::NotWatched(ty.to_string()))?;
        let synced = w.synced.load(Ordering::Acquire);
        if synced && let Some(o) = w.cache.get(&w.resource, namespace, name) {
            return Ok(Some(o));
        }
        // A miss, or no cache yet: ask the API server (or trust its recent "absent").
        let absent_key = (ty.clone(), namespace.map(str::to_owned), name.to_owned());
        if let Some(renew) = self.recently_absent(&absent_key) {
            if renew {
                self.renew_absence(w, absent_key);
            }
            return Ok(None);
        }
        match self.live_get(w, namespace, name) {
            Live::Found(o) => Ok(Some(o)),
            Live::Absent => {
                remember(&self.absent, absent_key);
                Ok(None)
            }
            // No answer: what the cache says, or that it cannot say yet.
            Live::Unknown if synced => Ok(None),
            Live::Unknown => Err(LookupError::NotSynced(ty.to_string())),
        }
    }

    fn list(
        &self,
        ty: &TypeKey,
        namespace: Option<&str>,
    ) -> Result<Vec<Arc<DynamicObject>>, LookupError> {
        Ok(self.watched(ty)?.cache.list(namespace))
    }

    fn read_now(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        let api = api_for::<DynamicObject>(&self.client, namespace, resource);
        read_blocking(&resource.kind, api.get_opt(name))
            .unwrap_or_else(|| {
                crate::server::metrics::state_live_read(&resource.kind, "error");
                Err("no multi-threaded runtime to read from".into())
            })
            .map_err(|why| {
                LookupError::Unreadable(format!(
                    "{} {}/{name} could not be read: {why}",
                    resource.kind,
                    namespace.unwrap_or_default()
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> TypeKey {
        TypeKey {
            api_version: "example.com/v1".into(),
            kind: "Thing".into(),
        }
    }

    fn pod(ns: &str, name: &str, labels: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": "u-1", "resourceVersion": "7",
                         "labels": labels, "annotations": {"skip": "me", "keep-a": "yes"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "x"}],
                         "managedFields": [{"manager": "m"}]}
        }))
        .unwrap()
    }

    /// A kept cache holds each object's namespace, name and kept keys only, and replaces its
    /// objects with a relist only once the relist is complete.
    #[test]
    fn kept_cache_trims_and_relists_whole() {
        let ar = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        let c = KeptCache::new(
            &ar,
            Keep {
                labels: vec!["keep-l".into()],
                annotations: vec!["keep-a".into()],
            },
        );
        assert!(!c.apply(watcher::Event::Init));
        c.apply(watcher::Event::InitApply(pod(
            "a",
            "p1",
            serde_json::json!({"keep-l": "1", "other": "2"}),
        )));
        c.apply(watcher::Event::InitApply(pod(
            "b",
            "p2",
            serde_json::json!({"other": "2"}),
        )));
        // Nothing served before the list is complete.
        assert!(c.get("a", "p1").is_none());
        assert!(c.apply(watcher::Event::InitDone));
        let p1 = c.get("a", "p1").unwrap();
        assert_eq!(
            serde_json::to_value(&*p1).unwrap(),
            serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p1", "namespace": "a", "labels": {"keep-l": "1"},
                             "annotations": {"keep-a": "yes"}}})
        );
        let p2 = c.get("b", "p2").unwrap();
        assert_eq!(p2.metadata.labels, None);
        assert_eq!(c.list(None).len(), 2);
        assert_eq!(c.list(Some("b")).len(), 1);
        assert!(c.list(Some("c")).is_empty());
        // Watch events apply at once.
        c.apply(watcher::Event::Apply(pod("c", "p3", serde_json::json!({}))));
        c.apply(watcher::Event::Delete(pod(
            "a",
            "p1",
            serde_json::json!({}),
        )));
        assert!(c.get("a", "p1").is_none());
        assert_eq!(c.list(None).len(), 2);
        // A relist: the old objects serve until it is done, then only the listed ones remain.
        c.apply(watcher::Event::Init);
        c.apply(watcher::Event::InitApply(pod(
            "d",
            "p4",
            serde_json::json!({}),
        )));
        assert!(c.get("c", "p3").is_some());
        assert!(c.apply(watcher::Event::InitDone));
        assert!(c.get("c", "p3").is_none());
        assert_eq!(c.list(None).len(), 1);
        // The typed read a rule makes.
        let typed: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(serde_json::to_value(&*c.get("d", "p4").unwrap()).unwrap())
                .unwrap();
        assert_eq!(typed.metadata.name.as_deref(), Some("p4"));
    }

    /// A growing state answers a live read from its own objects, as the static one does (a
    /// rule that reads the API server now, JS-08's JobSet, finds what the run holds).
    #[test]
    fn growing_state_reads_now_from_its_objects() {
        let g = GrowingState::default();
        g.add_value(
            serde_json::json!({"apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": "a", "namespace": "ns"}}),
        )
        .unwrap();
        let resource = ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            api_version: "example.com/v1".into(),
            kind: "Thing".into(),
            plural: "things".into(),
        };
        assert!(g.read_now(&resource, Some("ns"), "a").unwrap().is_some());
        assert!(g.read_now(&resource, Some("ns"), "b").unwrap().is_none());
    }

    /// What was added since a generation, while only additions happened; nothing to say once
    /// an object was replaced, or for another state's generation.
    #[test]
    fn added_since_names_additions_only() {
        let thing = |name: &str, v: u32| {
            serde_json::json!({"apiVersion": "example.com/v1", "kind": "Thing",
                "metadata": {"name": name, "namespace": "ns"}, "spec": {"v": v}})
        };
        let mut s = StaticState::default();
        assert_eq!(s.added_since(&key(), (s.id, 0)).map(|v| v.len()), Some(0));
        s.add_value(thing("a", 1)).unwrap();
        let at = s.generation(&key()).unwrap();
        s.add_value(thing("b", 1)).unwrap();
        s.add_value(thing("c", 1)).unwrap();
        let names = |v: Vec<Arc<DynamicObject>>| -> Vec<String> {
            v.iter()
                .map(|o| o.metadata.name.clone().unwrap_or_default())
                .collect()
        };
        assert_eq!(
            s.added_since(&key(), at).map(names),
            Some(vec!["b".into(), "c".into()])
        );
        // The same object again changes nothing.
        s.add_value(thing("c", 1)).unwrap();
        assert_eq!(s.added_since(&key(), at).map(|v| v.len()), Some(2));
        // A replacement: what came before it cannot be brought up to date by additions.
        s.add_value(thing("a", 2)).unwrap();
        assert!(s.added_since(&key(), at).is_none());
        let now = s.generation(&key()).unwrap();
        s.add_value(thing("d", 1)).unwrap();
        assert_eq!(
            s.added_since(&key(), now).map(names),
            Some(vec!["d".into()])
        );
        assert!(StaticState::default().added_since(&key(), now).is_none());
    }

    #[test]
    fn loads_lists_yaml_and_json() {
        let mut s = StaticState::default();
        s.add_text(
            r#"{"apiVersion":"v1","kind":"List","items":[
                {"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"a","namespace":"ns"}}]}"#,
        )
        .unwrap();
        s.add_text(
            "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: b, namespace: ns}\n---\napiVersion: example.com/v1\nkind: Thing\nmetadata: {name: c}\n",
        )
        .unwrap();
        assert_eq!(s.len(), 3);
        assert!(s.get(&key(), Some("ns"), "a").unwrap().is_some());
        assert!(s.get(&key(), Some("other"), "a").unwrap().is_none());
        assert!(s.get(&key(), None, "c").unwrap().is_some());
        assert_eq!(s.list(&key(), Some("ns")).unwrap().len(), 2);
        assert_eq!(s.list(&key(), None).unwrap().len(), 3);
    }

    #[test]
    fn the_same_object_again_keeps_its_allocation() {
        let mut s = StaticState::default();
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n"}, "data": {"a": "1"}});
        s.add_value(cm.clone()).unwrap();
        let key = TypeKey {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let first = s.get(&key, Some("n"), "c").unwrap().unwrap();
        s.add_value(cm.clone()).unwrap();
        let again = s.get(&key, Some("n"), "c").unwrap().unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let mut changed = cm;
        changed["data"]["a"] = "2".into();
        s.add_value(changed).unwrap();
        let after = s.get(&key, Some("n"), "c").unwrap().unwrap();
        assert!(!Arc::ptr_eq(&first, &after));
        // One change per new or changed object; another state never shares a generation.
        assert_eq!(s.generation(&key).map(|g| g.1), Some(2));
        assert_ne!(s.generation(&key), StaticState::default().generation(&key));
        assert_eq!(after.data["data"]["a"], "2");
    }

    #[test]
    fn rejects_objects_without_identity() {
        let mut s = StaticState::default();
        assert!(
            s.add_text(r#"{"kind":"Thing","metadata":{"name":"a"}}"#)
                .is_err()
        );
        assert!(
            s.add_text(r#"{"apiVersion":"v1","kind":"Thing","metadata":{}}"#)
                .is_err()
        );
        assert!(s.add_text("a: [unclosed").is_err());
    }
}
