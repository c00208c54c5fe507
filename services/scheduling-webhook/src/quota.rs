//! The rules that read the ElasticQuota tree (spec §7): the quota name of a pod (QN), PV-3, PV-4,
//! the ElasticQuota defaulting (QM) and validation (QV).
//!
//! With `--quota-state-url` every tree question goes to quota-state ([`crate::quota_client`]),
//! which keeps the tree and the usage from its watches. Without it (`review`, `serve --state`)
//! the same functions of [`quota_protocol::tree`] run here on a tree built from the cluster state,
//! and PV-4 reads the usage upstream's way, from each quota's `child-request` annotation.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use admission_kit::review::lookup::{Generation, LookupError};
use admission_kit::{Context, Mutator, Operation, Request, Status, Validator, Verdict};
use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use quota_protocol::tree::{
    self, PodIndex, QuotaLookup, Refused, Topology, TreeGates, annotation, label, pod_quota_label,
};

use crate::quota_client;
use crate::types::{ElasticQuota, ResourceList};
use admission_kit::compat::resources::{
    Amount, Amounts, PodRequest, amounts, canonical_json, list_text, try_amounts,
};

use keys::*;
pub use quota_protocol::tree::keys;

fn to_quota(d: &DynamicObject) -> Option<ElasticQuota> {
    serde_json::to_value(d)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

/// The ElasticQuotas of the cluster state, typed, and the tree built from them (in-process
/// evaluation).
#[derive(Debug)]
pub struct StateQuotas {
    /// Every ElasticQuota that decodes (shared with the next derivation, which reuses those
    /// still listed).
    pub objects: Vec<Arc<ElasticQuota>>,
    /// Their tree.
    pub topology: Topology,
    /// The address of the state object each of `objects` was decoded from.
    origin: Vec<usize>,
    /// The quotas as a workload check reads them, made on the first workload check and kept
    /// up as quotas are added in place: a check then reads the quotas it names, not every one.
    workload: std::sync::OnceLock<WorkloadIndex>,
}

/// Each quota's limits and usage by name ([`StateWorkloadQuotas`]).
#[derive(Debug, Default)]
struct WorkloadIndex {
    specs: BTreeMap<String, Vec<quota_protocol::spec::QuotaSpec>>,
    used: BTreeMap<String, Amounts>,
}

impl WorkloadIndex {
    fn of<'a>(objects: impl IntoIterator<Item = &'a ElasticQuota>) -> Self {
        let mut index = Self::default();
        for o in objects {
            index.add(o);
        }
        index
    }

    /// Limits as PV-4 reads them, usage from the `child-request` annotation.
    fn add(&mut self, o: &ElasticQuota) {
        let spec = quota_protocol::spec::QuotaSpec::of(o);
        let name = spec.info.name.clone();
        let usage = parse_list(annotation(o, CHILD_REQUEST))
            .ok()
            .and_then(|l| try_amounts(Some(&l)).ok())
            .unwrap_or_default();
        self.used.insert(name.clone(), usage);
        self.specs.entry(name).or_default().push(spec);
    }
}

/// The objects the last [`StateQuotas`] was derived from, and it. Holding the objects keeps
/// their addresses theirs, so a list of the very same allocations is the very same quotas: the
/// state hands out new objects for every change (files load once; a watch store replaces an
/// object on each event). With the state's generation of the kind when it keeps one: the same
/// generation is the same objects, known without listing them (admission-check's state).
type Derived = (
    Vec<Arc<DynamicObject>>,
    Arc<StateQuotas>,
    Option<Generation>,
);

/// The last derivation, one per service: a second state only costs a rebuild when the two
/// alternate (tests), never a wrong answer.
#[derive(Default)]
pub struct QuotaCache(Mutex<Option<Derived>>);

/// Every ElasticQuota of the cluster state and their tree, derived again only when the state's
/// quota objects changed (each review used to decode every quota and build the tree anew, twice
/// for a Pod: 15 % of an in-process Pod validation's time).
pub fn state_quotas(cache: &QuotaCache, ctx: &Context) -> Result<Arc<StateQuotas>, LookupError> {
    let last = || cache.0.lock().unwrap_or_else(PoisonError::into_inner);
    let generation = ctx.generation::<ElasticQuota>();
    if let Some((_, derived, Some(held))) = &*last()
        && generation == Some(*held)
    {
        return Ok(derived.clone());
    }
    // Only quotas added since (admission-check remembers each quota it admits): added to the
    // tree in place when no review holds it any more, instead of listing every quota and
    // deriving the tree anew per quota (quadratic in the number of quotas). A state without
    // generations (a watch) cannot name them: no second lock per review there.
    if generation.is_some()
        && let Some(derived) = add_new_quotas(ctx, &mut last(), generation)
    {
        return Ok(derived);
    }
    let listed = ctx.list::<ElasticQuota>(None)?;
    if let Some((held, derived, known)) = &mut *last()
        && held.len() == listed.len()
        && held.iter().zip(&listed).all(|(a, b)| Arc::ptr_eq(a, b))
    {
        *known = generation;
        return Ok(derived.clone());
    }
    // A watch that added a quota: the listing is the last one and more.
    if let Some(derived) = add_listed_quotas(&mut last(), &listed, generation) {
        return Ok(derived);
    }
    // Objects already decoded last time (the same allocation is the same object, held by the cache
    // so its address is not reused) are reused: a run that adds quotas one at a time
    // (admission-check on 1,000 quotas) decoded every quota again for each new one.
    let (objects, origin): (Vec<Arc<ElasticQuota>>, Vec<usize>) = {
        let guard = last();
        let before: std::collections::HashMap<usize, &Arc<ElasticQuota>> = guard
            .as_ref()
            .map(|(_, derived, _)| {
                derived
                    .origin
                    .iter()
                    .copied()
                    .zip(&derived.objects)
                    .collect()
            })
            .unwrap_or_default();
        listed
            .iter()
            .filter_map(|d| {
                let at = Arc::as_ptr(d) as usize;
                let q = match before.get(&at) {
                    Some(q) => Some(Arc::clone(q)),
                    None => to_quota(d).map(Arc::new),
                };
                q.map(|q| (q, at))
            })
            .unzip()
    };
    let derived = Arc::new(StateQuotas {
        topology: Topology::from_objects(objects.iter().map(|q| &**q)),
        objects,
        origin,
        workload: std::sync::OnceLock::new(),
    });
    *last() = Some((listed, derived.clone(), generation));
    Ok(derived)
}

/// Where a state lists an object: by namespace, then name.
fn list_key(m: &kube::api::ObjectMeta) -> (&str, &str) {
    (
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default(),
    )
}

/// The last derivation brought up to `generation` when the state can name the quotas added since
/// it was made ([`Context::added_since`]) and nothing else holds it (`Arc::get_mut`); `None`:
/// list and derive. The new quotas go into the tree in the order a listing would give them and
/// take their places in the lists, so the result is the one a listing would have given.
fn add_new_quotas(
    ctx: &Context,
    last: &mut Option<Derived>,
    generation: Option<Generation>,
) -> Option<Arc<StateQuotas>> {
    let (held, derived, known) = last.as_mut()?;
    let mut added = ctx.added_since::<ElasticQuota>((*known)?)?;
    let state = Arc::get_mut(derived)?;
    added.sort_by(|a, b| list_key(&a.metadata).cmp(&list_key(&b.metadata)));
    let place = |d: &Arc<DynamicObject>| {
        let key = list_key(&d.metadata);
        held.binary_search_by(|o| list_key(&o.metadata).cmp(&key))
    };
    if added.iter().any(|d| place(d).is_ok()) {
        // Already held: not only additions. Derived anew by the caller.
        return None;
    }
    let decoded: Vec<Option<ElasticQuota>> = added.iter().map(|d| to_quota(d)).collect();
    for q in decoded.iter().flatten() {
        if !state
            .topology
            .insert(tree::QuotaInfo::of(q), tree::bound_namespaces(q))
        {
            // The tree is half extended: only the decoded objects (untouched) may be reused.
            // Derived anew by the caller (rare: a quota the tree refuses, such as a second of
            // one name); with nothing held, nothing is extended.
            held.clear();
            *known = None;
            return None;
        }
    }
    for (d, q) in added.into_iter().zip(decoded) {
        let key = list_key(&d.metadata);
        let at = held.partition_point(|o| list_key(&o.metadata) < key);
        if let Some(q) = q {
            if let Some(index) = state.workload.get_mut() {
                index.add(&q);
            }
            let k = state
                .objects
                .partition_point(|o| list_key(&o.metadata) < key);
            state.objects.insert(k, Arc::new(q));
            state.origin.insert(k, Arc::as_ptr(&d) as usize);
        }
        held.insert(at, d);
    }
    *known = generation;
    Some(derived.clone())
}

/// The derivation of `listed` from the last one when `listed` only adds objects to those it was
/// derived from, in the same order, and nothing else holds it (`Arc::get_mut`); `None`: derive
/// anew. One walk over the three lists comparing addresses: no hashing per review.
fn add_listed_quotas(
    last: &mut Option<Derived>,
    listed: &[Arc<DynamicObject>],
    generation: Option<Generation>,
) -> Option<Arc<StateQuotas>> {
    let (held, derived, known) = last.as_mut()?;
    if held.is_empty() || listed.len() <= held.len() {
        return None;
    }
    let state = Arc::get_mut(derived)?;
    let at = |d: &Arc<DynamicObject>| Arc::as_ptr(d) as usize;
    let (mut h, mut k) = (0, 0);
    let mut topology = None;
    let (mut objects, mut origin) = (Vec::with_capacity(listed.len()), Vec::new());
    for d in listed {
        let here = at(d);
        if held.get(h).is_some_and(|o| at(o) == here) {
            h += 1;
            // Held: decoded last time unless it did not decode.
            if state.origin.get(k) == Some(&here)
                && let Some(q) = state.objects.get(k)
            {
                objects.push(Arc::clone(q));
                origin.push(here);
                k += 1;
            }
            continue;
        }
        let Some(q) = to_quota(d) else { continue };
        let t = topology.get_or_insert_with(|| std::mem::take(&mut state.topology));
        let info = tree::QuotaInfo::of(&q);
        if !t.insert(info, tree::bound_namespaces(&q)) {
            // Derived anew by the caller, which replaces all of the cache and reuses only its
            // decoded objects (untouched so far).
            return None;
        }
        objects.push(Arc::new(q));
        origin.push(here);
    }
    if h < held.len() {
        // Something held is gone or moved: not only additions. Derived anew by the caller.
        return None;
    }
    if let Some(t) = topology {
        state.topology = t;
    }
    state.objects = objects;
    state.origin = origin;
    *held = listed.to_vec();
    *known = generation;
    Some(derived.clone())
}

/// QN of a pod, with the gate the service runs with.
pub fn quota_name_of(view: &dyn QuotaLookup, pod: &Pod, ns: &str, ctx: &Context) -> String {
    let label = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NAME))
        .map(String::as_str);
    tree::quota_name(view, label, ns, ctx.gates().enabled("DisableDefaultQuota"))
}

/// Whether no quota rule concerns the pod, judged from this service's own ElasticQuota watch
/// cache (used while quota-state cannot be asked): its quota name (QN) is one PV-3 and PV-4 pass
/// (none, or the default, system or root quota), and no quota is named like its namespace or
/// lists it, so PM-3 finds no tree either. A cache that cannot be read concerns every pod.
pub fn concerns_no_quota(svc: &crate::Service, pod: &Pod, ns: &str, ctx: &Context) -> bool {
    if svc.options.fleet_member() {
        // The quotas live in the hub: a label names one, and a namespace's binding is what
        // quota-state last said of it (never said: concerned).
        let label = pod_quota_label(pod);
        return match label {
            "" => crate::quota_client::namespace_concerned(&svc.quota, ns) == Some(false),
            l => [tree::keys::DEFAULT, tree::keys::SYSTEM, tree::keys::ROOT].contains(&l),
        };
    }
    let Ok(quotas) = state_quotas(&svc.quotas, ctx) else {
        return false;
    };
    let topology = &quotas.topology;
    let qn = quota_name_of(topology, pod, ns, ctx);
    matches!(
        qn.as_str(),
        "" | tree::keys::DEFAULT | tree::keys::SYSTEM | tree::keys::ROOT
    ) && topology.quota(ns).is_none()
        && topology.bound_to(ns).is_none()
}

/// The pods of the cluster state as QV reads them.
struct StatePods(Vec<Pod>);

impl StatePods {
    fn of(ctx: &Context) -> Result<Self, LookupError> {
        Ok(Self(
            ctx.list::<Pod>(None)?
                .iter()
                .filter_map(|d| to_pod(d))
                .collect(),
        ))
    }
}

impl PodIndex for StatePods {
    fn labelled(&self, quota: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|p| pod_quota_label(p) == quota)
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    fn any_bound(&self, quota: &str, namespaces: &[String]) -> bool {
        self.0.iter().any(|p| {
            let ns = p.metadata.namespace.as_deref().unwrap_or_default();
            pod_quota_label(p) == quota || ns == quota || namespaces.iter().any(|n| n == ns)
        })
    }
}

/// A pod from cluster state.
pub fn to_pod(d: &DynamicObject) -> Option<Pod> {
    serde_json::to_value(d)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

/// The pod's namespace: its own, or the request's when empty (PM-0.3).
pub fn pod_namespace(pod: &Pod, req_ns: Option<&str>) -> String {
    pod.metadata
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| req_ns.map(str::to_owned))
        .unwrap_or_default()
}

/// PV-3.2 in-process: a pod cannot be charged to a parent quota.
pub fn pv_3_2_not_on_parent(
    svc: &crate::Service,
    pod: &Pod,
    ns: &str,
    ctx: &Context,
) -> Result<(), String> {
    if ctx.gates().enabled("SupportParentQuotaSubmitPod") {
        return Ok(());
    }
    let quotas = state_quotas(&svc.quotas, ctx).map_err(|e| e.to_string())?;
    let t = &quotas.topology;
    tree::pv_3_2_not_on_parent(
        t,
        &quota_name_of(t, pod, ns, ctx),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
}

use quota_protocol::spec::QUOTA_KEYS;

fn parse_list(text: &str) -> Result<ResourceList, String> {
    if text.is_empty() {
        return Ok(ResourceList::new());
    }
    let v: Option<ResourceList> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok(v.unwrap_or_default())
}

/// Whether PV-4 runs for this request (PV-4.1: CREATE; UPDATE only with its gate).
pub fn admission_runs(req: &Request<Pod>, ctx: &Context) -> bool {
    ctx.gates().enabled("EnableQuotaAdmission")
        && match req.operation {
            Operation::Create => true,
            Operation::Update => ctx.gates().enabled("EnableQuotaAdmissionOnUpdate"),
            _ => false,
        }
}

/// PV-4 in-process: the pod fits its quota's limit given the usage recorded in the quota's
/// `child-request` annotation (upstream's reading; quota-state keeps the usage itself).
pub fn pv_4_quota_admission(
    svc: &crate::Service,
    req: &Request<Pod>,
    request: &PodRequest<'_>,
    ns: &str,
    ctx: &Context,
) -> Result<(), String> {
    if !admission_runs(req, ctx) {
        return Ok(());
    }
    let quotas = state_quotas(&svc.quotas, ctx).map_err(|e| e.to_string())?;
    let (objects, t) = (&quotas.objects, &quotas.topology);
    let new = quota_name_of(t, &req.object, ns, ctx);
    let old = match req.operation {
        Operation::Update => Some(
            req.old_object
                .as_ref()
                .map(|o| quota_name_of(t, o, ns, ctx))
                .unwrap_or_default(),
        ),
        _ => None,
    };
    let Some(quota) = tree::admission_quota(new, old.as_deref()) else {
        return Ok(());
    };
    let found: Vec<&ElasticQuota> = objects
        .iter()
        .map(|o| &**o)
        .filter(|o| o.metadata.name.as_deref() == Some(quota.as_str()))
        .collect();
    let eq = match found.as_slice() {
        [] => return Err(format!("elastic quota {quota} not found")),
        [one] => *one,
        _ => return Err(format!("more than one elastic quota {quota} found")),
    };
    let used = try_amounts(Some(&parse_list(annotation(eq, CHILD_REQUEST))?))
        .map_err(|e| format!("elastic quota {quota} {CHILD_REQUEST}: {e}"))?;
    let admission = parse_list(annotation(eq, ADMISSION))?;
    let max = eq.spec.max.clone().unwrap_or_default();
    let limit = amounts(Some(if admission.is_empty() {
        &max
    } else {
        &admission
    }));
    if !max.keys().any(|k| QUOTA_KEYS.contains(&k.as_str())) {
        return Ok(());
    }
    let pod = &req.object;
    let finished = matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed" | "Succeeded")
    );
    let request: Amounts = if finished {
        Amounts::new()
    } else {
        // Exact amounts: one that cannot be counted refuses the pod, naming it (never clamped).
        let r = match request.exact() {
            None => return Ok(()),
            Some(Ok(r)) => r,
            Some(Err(e)) => {
                let name = pod.metadata.name.as_deref().unwrap_or(&req.name);
                return Err(format!("pod {ns}/{name}: {e}"));
            }
        };
        r.iter()
            .filter(|(k, v)| !v.is_zero() && max.get(*k).is_some_and(|m| !Amount::of(m).is_zero()))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    if request.is_empty() {
        return Ok(());
    }
    let (mut r_ex, mut u_ex, mut l_ex) = (Amounts::new(), Amounts::new(), Amounts::new());
    for (k, r) in &request {
        let Some(l) = limit.get(k) else { continue };
        let u = used.get(k).copied();
        let total = u.map(|u| u.nano).unwrap_or(0).checked_add(r.nano);
        if total.is_none_or(|t| t > l.nano) {
            r_ex.insert(k.clone(), *r);
            if let Some(u) = u {
                u_ex.insert(k.clone(), u);
            }
            l_ex.insert(k.clone(), *l);
        }
    }
    if !r_ex.is_empty() {
        return Err(format!(
            "exceeded quota: {}/{quota}, requested: {}, used: {}, limited: {}",
            eq.metadata.namespace.as_deref().unwrap_or_default(),
            list_text(&r_ex),
            list_text(&u_ex),
            list_text(&l_ex)
        ));
    }
    Ok(())
}

fn labels_mut(o: &mut ElasticQuota) -> &mut BTreeMap<String, String> {
    o.metadata.labels.get_or_insert_with(BTreeMap::new)
}

/// The quantities of an ElasticQuota (`spec.min`, `spec.max`, `status.used`) as Go's decoder
/// parses them.
fn check_quota_quantities(q: &ElasticQuota) -> Result<(), String> {
    use admission_kit::compat::resources::check_list;
    check_list("spec.min", q.spec.min.as_ref())
        .and_then(|()| check_list("spec.max", q.spec.max.as_ref()))
        .and_then(|()| {
            let used = q.status.as_ref().and_then(|s| s.used.as_ref());
            check_list("status.used", used)
        })
        .map_err(|e| e.to_string())
}

/// `/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota` (QM-0..QM-4).
pub struct QuotaDefaulter(pub Arc<crate::Service>);

impl Mutator for QuotaDefaulter {
    type Object = ElasticQuota;

    /// A quantity Go's decoder refuses fails the decode here too.
    fn check_decoded(&self, q: &ElasticQuota) -> Result<(), String> {
        check_quota_quantities(q)
    }

    fn mutate(&self, req: &Request<ElasticQuota>, q: &mut ElasticQuota, ctx: &Context) -> Verdict {
        admission_kit::server::metrics::koord::timed_with(
            "mutate",
            "elasticquota",
            req.operation.as_str(),
            "QuotaMetaChecker",
            || quota_defaults(&self.0, req, q, ctx),
            Verdict::allowed,
        )
    }

    fn denial(&self, _: &Request<ElasticQuota>, errors: &[admission_kit::FieldError]) -> Status {
        Status {
            code: Some(400),
            message: admission_kit::review::field::aggregate(errors),
            ..Status::default()
        }
    }
}

/// `/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota` (QV).
pub struct QuotaValidator(pub Arc<crate::Service>);

/// QV through quota-state, or in-process on the cluster state. `Ok` carries warnings.
///
/// QV-0: the quotas and pods the tree rules read must be readable; a decode or lookup failure
/// is refused with its cause.
fn validate_quota(
    svc: &crate::Service,
    req: &Request<ElasticQuota>,
    ctx: &Context,
) -> Result<Vec<String>, (&'static str, Refused)> {
    let old = req.old_object.as_ref();
    let qv_0 = |message: String| {
        (
            "QV-0",
            Refused {
                field: String::new(),
                message,
            },
        )
    };
    if svc.options.quota_state() {
        return match quota_client::blocking(quota_client::validate_quota(
            &svc.quota,
            ctx,
            req.operation,
            &req.object,
            old,
        )) {
            Ok(answer) => answer.map(|()| Vec::new()),
            Err(cause) => quota_client::unavailable(&svc.quota, "the ElasticQuota tree", &cause)
                .map(|w| vec![w])
                .map_err(qv_0),
        };
    }
    let quotas = state_quotas(&svc.quotas, ctx).map_err(|e| qv_0(e.to_string()))?;
    // Only an update (QV-T1) and a delete (QV-D) read the pods: a create lists none, which
    // would cost every pod of the state per quota created.
    let pods = if req.operation == Operation::Create {
        StatePods(Vec::new())
    } else {
        StatePods::of(ctx).map_err(|e| qv_0(e.to_string()))?
    };
    let gates = TreeGates {
        update_resource_key: ctx.gates().enabled("ElasticQuotaEnableUpdateResourceKey"),
    };
    tree::validate_at(
        quota_client::wire_operation(req.operation),
        &req.object,
        old,
        &quotas.topology,
        &pods,
        gates,
    )
    .map(|()| Vec::new())
}

impl Validator for QuotaValidator {
    type Object = ElasticQuota;

    /// A quantity Go's decoder refuses fails the decode here too.
    fn check_decoded(&self, q: &ElasticQuota) -> Result<(), String> {
        check_quota_quantities(q)
    }

    fn validate(&self, req: &Request<ElasticQuota>, ctx: &Context) -> Verdict {
        let v = admission_kit::server::metrics::koord::timed_with(
            "validate",
            "elasticquota",
            req.operation.as_str(),
            "QuotaMetaChecker",
            || quota_checks(&self.0, req, ctx),
            Verdict::allowed,
        );
        if req.operation == Operation::Delete && !req.dry_run && v.allowed() {
            // The quota goes: so does its QM-5 gauge, once it is gone (a forged review removes
            // nothing).
            let (ctx, namespace, name) = (ctx.clone(), req.namespace.clone(), req.name.clone());
            admission_kit::server::metrics::koord::forget_shared_weight_once_gone(
                &req.name,
                move || {
                    matches!(
                        ctx.get::<ElasticQuota>(namespace.as_deref(), &name),
                        Ok(None)
                    )
                },
            );
        }
        v
    }

    fn allowed_status(&self) -> Option<Status> {
        Some(Status::allowed())
    }
}

/// QM-5: the shared weight of quota `namespace/name` per resource, in units, as the quota that
/// exists carries it (its `shared-weight` annotation, which QM-4 defaults to its max); `None`
/// while there is no such quota. Entries that do not read are left out.
pub fn qm_5_created_shared_weight(
    ctx: &Context,
    namespace: Option<&str>,
    name: &str,
) -> Option<Vec<(String, f64)>> {
    let quota = ctx.get::<ElasticQuota>(namespace, name).ok()??;
    let text = quota.metadata.annotations.as_ref()?.get(SHARED_WEIGHT)?;
    let weights: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity> =
        serde_json::from_str(text).ok()?;
    Some(
        weights
            .iter()
            .map(|(r, q)| {
                let units = admission_kit::compat::resources::Amount::of(q).milli() as f64 / 1000.0;
                (r.clone(), units)
            })
            .collect(),
    )
}

/// The body of the handler, timed under upstream's plugin name `QuotaMetaChecker`.
///
/// QM-2: a quota without a parent label gets `koordinator-root-quota` as its parent.
///
/// Mutated: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: team-a}, spec: {min: {cpu: "1", memory: 4Gi}, max: {cpu: "10", memory: 40Gi}}}`
///
/// Admitted: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-b, namespace: team-b, labels: {quota.scheduling.koordinator.sh/parent: koordinator-root-quota}}, spec: {min: {cpu: "1", memory: 4Gi}, max: {cpu: "10", memory: 40Gi}}}`
///
/// QM-3: a quota without a tree id under a parent other than the root takes its parent's tree
/// id; a parent not in the quota tree is refused ("parent not exist").
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: parent-a, namespace: quota-parents, labels: {quota.scheduling.koordinator.sh/is-parent: "true", quota.scheduling.koordinator.sh/tree-id: t1}}, spec: {min: {cpu: "100", memory: 400Gi}, max: {cpu: "1000", memory: 4000Gi}}}`
///
/// Refused: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: team-a, labels: {quota.scheduling.koordinator.sh/parent: nobody}}, spec: {min: {cpu: "1", memory: 4Gi}, max: {cpu: "10", memory: 40Gi}}}`
///
/// Mutated: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: team-a, labels: {quota.scheduling.koordinator.sh/parent: parent-a}}, spec: {min: {cpu: "1", memory: 4Gi}, max: {cpu: "10", memory: 40Gi}}}`
///
/// Admitted: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-b, namespace: team-b, labels: {quota.scheduling.koordinator.sh/parent: parent-a, quota.scheduling.koordinator.sh/tree-id: t1}}, spec: {min: {cpu: "1", memory: 4Gi}, max: {cpu: "10", memory: 40Gi}}}`
///
/// QM-4: a quota without a shared-weight annotation gets its `spec.max` as the weight; a
/// `spec.max` that does not decode as a resource list is refused.
///
/// Mutated: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: team-a}, spec: {min: {cpu: "1", memory: 4Gi}, max: {cpu: "10", memory: 40Gi}}}`
///
/// Admitted: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-b, namespace: team-b, annotations: {quota.scheduling.koordinator.sh/shared-weight: "{\"cpu\":\"10\",\"memory\":\"40Gi\"}"}}, spec: {min: {cpu: "1", memory: 4Gi}, max: {cpu: "10", memory: 40Gi}}}`
fn quota_defaults(
    svc: &crate::Service,
    req: &Request<ElasticQuota>,
    q: &mut ElasticQuota,
    ctx: &Context,
) -> Verdict {
    if req.resource.resource != "elasticquotas"
        || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
        || req.operation != Operation::Create
    {
        return Verdict::default();
    }
    let name = q.metadata.name.clone().unwrap_or_default();
    if name == ROOT {
        return Verdict::default(); // QM-1
    }
    let mut applied = Vec::new();
    let mut warnings = Vec::new();
    if label(q, PARENT).is_empty() {
        labels_mut(q).insert(PARENT.into(), ROOT.into()); // QM-2
        applied.push("QM-2");
    }
    let parent = label(q, PARENT).to_owned();
    if label(q, TREE_ID).is_empty() && parent != ROOT {
        // QM-3
        let found = if svc.options.quota_state() {
            let asked = quota_client::lookup(&svc.quota, vec![parent.clone()], "");
            match quota_client::blocking(asked) {
                Ok(s) => s.quota(&parent),
                Err(cause) => {
                    match quota_client::unavailable(&svc.quota, "the quota's parent", &cause) {
                        Ok(w) => {
                            warnings.push(w);
                            return Verdict {
                                applied,
                                warnings,
                                ..Verdict::default()
                            };
                        }
                        Err(m) => return Verdict::errored("QM-3", 500, m),
                    }
                }
            }
        } else {
            match state_quotas(&svc.quotas, ctx) {
                Ok(q) => q.topology.quota(&parent),
                Err(e) => return Verdict::errored("QM-3", 500, e.to_string()),
            }
        };
        match found {
            None => {
                return Verdict::errored(
                    "QM-3",
                    400,
                    format!("fill quota {name} failed, parent not exist"),
                )
                .at(format!("metadata.labels[{PARENT}]"));
            }
            Some(p) if !p.tree_id.is_empty() => {
                labels_mut(q).insert(TREE_ID.into(), p.tree_id.clone());
                applied.push("QM-3");
            }
            _ => {}
        }
    }
    // QM-4
    let max = q.spec.max.clone();
    let current = annotation(q, SHARED_WEIGHT).to_owned();
    let new_text = if current.is_empty() {
        // QM-5: upstream's gauge of the defaulted weights (the max values), in units; shown
        // once the quota exists, read from it (never for a dry run, a forged review or one a
        // later webhook refuses: their names never become series).
        if !req.dry_run && max.as_ref().is_some_and(|m| !m.is_empty()) {
            let (ctx, namespace, quota) = (ctx.clone(), req.namespace.clone(), name.clone());
            admission_kit::server::metrics::koord::shared_weight_once_created(&name, move || {
                qm_5_created_shared_weight(&ctx, namespace.as_deref(), &quota)
            });
        }
        Some(
            max.as_ref()
                .map(canonical_json)
                .unwrap_or_else(|| "null".into()),
        )
    } else {
        // Decoded as Go decodes a ResourceList: a quantity that does not parse is refused with
        // apimachinery's text, JSON errors in encoding/json's words.
        let mut sw: BTreeMap<String, String> =
            match admission_kit::compat::go::decode_resource_list(&current) {
                Ok(m) => m.into_iter().map(|(k, q)| (k, q.canonical())).collect(),
                Err(e) => {
                    return Verdict::errored(
                        "QM-4",
                        400,
                        format!("fillDefaultQuotaInfo unmarshal sharedWeight failed:{e}"),
                    )
                    .at(format!("metadata.annotations[{SHARED_WEIGHT}]"));
                }
            };
        let maxm = max.unwrap_or_default();
        let mut changed = false;
        for (k, v) in &maxm {
            if !sw.contains_key(k) {
                sw.insert(k.clone(), admission_kit::compat::resources::go_text(v));
                changed = true;
            }
        }
        let before = sw.len();
        sw.retain(|k, _| maxm.contains_key(k));
        changed |= sw.len() != before;
        changed.then(|| serde_json::to_string(&sw).unwrap_or_default())
    };
    if let Some(text) = new_text {
        q.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(SHARED_WEIGHT.into(), text);
        applied.push("QM-4");
    }
    if !applied.is_empty() && qm_6_reprint_altered_quantities(q) {
        applied.push("QM-6");
    }
    Verdict {
        applied,
        warnings,
        ..Verdict::default()
    }
}

/// QM-6: when QM-2..QM-4 changed the quota, a `spec.min`, `spec.max` or `status.used` quantity
/// Go decodes to another value than written (`8Ei` and above capped at 2^63-1, finer than a
/// nano rounded up) is re-printed as Go prints it.
///
/// Mutated: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: team-a}, spec: {min: {cpu: "0.0000000001"}, max: {cpu: "10"}}}`
///
/// Admitted: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-b, namespace: team-b}, spec: {min: {cpu: "1"}, max: {cpu: "10"}}}`
///
/// Why (`docs/upstream-parity.md`): upstream's patch is the raw request against
/// its re-encoded object. These re-prints change the quota, so they are ours too; the ones that
/// change nothing stay out (spec §7.2 F-1). Returns whether any quantity was re-printed.
fn qm_6_reprint_altered_quantities(q: &mut ElasticQuota) -> bool {
    use admission_kit::compat::resources::{altered_by_decode, go_text};
    let used = q.status.as_mut().and_then(|s| s.used.as_mut());
    let mut changed = false;
    for list in [q.spec.min.as_mut(), q.spec.max.as_mut(), used]
        .into_iter()
        .flatten()
    {
        for v in list.values_mut().filter(|v| altered_by_decode(v)) {
            v.0 = go_text(v);
            changed = true;
        }
    }
    changed
}

/// The body of the handler, timed under upstream's plugin name `QuotaMetaChecker`.
fn quota_checks(svc: &crate::Service, req: &Request<ElasticQuota>, ctx: &Context) -> Verdict {
    if req.resource.resource != "elasticquotas"
        || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
    {
        return Verdict::default();
    }
    match validate_quota(svc, req, ctx) {
        Ok(warnings) => Verdict {
            warnings,
            ..Verdict::default()
        },
        Err((rule, refused)) => Verdict::errored(rule, 400, refused.message).at(refused.field),
    }
}

/// The cluster state's quotas as a workload check reads them in-process (`review --state`,
/// `serve --state`, `admission-check`): limits as PV-4 reads them, usage from each quota's
/// `child-request` annotation (upstream's record of what its subtree admitted).
pub struct StateWorkloadQuotas {
    quotas: Arc<StateQuotas>,
}

impl StateWorkloadQuotas {
    /// The quotas of the cluster state.
    pub fn of(cache: &QuotaCache, ctx: &Context) -> Result<Self, LookupError> {
        Ok(Self {
            quotas: state_quotas(cache, ctx)?,
        })
    }

    fn index(&self) -> &WorkloadIndex {
        self.quotas
            .workload
            .get_or_init(|| WorkloadIndex::of(self.quotas.objects.iter().map(|q| &**q)))
    }

    /// The tree QN and PV-3.2 read.
    pub fn topology(&self) -> &Topology {
        &self.quotas.topology
    }
}

impl quota_protocol::workload::Quotas for StateWorkloadQuotas {
    fn max(&self, quota: &str) -> Result<Option<&Amounts>, String> {
        match self.index().specs.get(quota).map(Vec::as_slice) {
            None | Some([]) => Ok(None),
            Some([one]) => Ok(Some(&one.max)),
            Some(_) => Err(format!("more than one elastic quota {quota} found")),
        }
    }

    fn chain(&self, quota: &str) -> Result<Vec<quota_protocol::workload::Level<'_>>, String> {
        static NONE: std::sync::LazyLock<Amounts> = std::sync::LazyLock::new(Amounts::new);
        let mut out: Vec<quota_protocol::workload::Level<'_>> = Vec::new();
        let mut cur = quota;
        // A chain longer than the quotas is a cycle: stop there, as quota-state does.
        while !cur.is_empty()
            && !quota_protocol::spec::UNCHECKED.contains(&cur)
            && !out.iter().any(|l| l.name == cur)
            && out.len() <= self.index().specs.len()
        {
            let Some(spec) = self.index().specs.get(cur).and_then(|v| v.first()) else {
                break;
            };
            out.push(quota_protocol::workload::Level {
                name: &spec.info.name,
                limit: &spec.limit,
                used: self.index().used.get(cur).unwrap_or(&NONE),
            });
            cur = &spec.info.parent;
        }
        Ok(out)
    }
}
