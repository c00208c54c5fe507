//! What rules may read of the cluster: one lookup interface ([`ClusterState`]), keyed by kind
//! ([`TypeKey`]), with its errors. The backings (watch caches in `serve`, `--state` files in
//! `review`) live in [`crate::cluster::state`]; rules and handlers know only this interface.

use std::sync::Arc;

use kube::Resource;
use kube::api::{ApiResource, DynamicObject};

/// Why a lookup could not answer. Rules that need the answer deny (fail closed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The name to look up is empty (the API client refuses this before sending anything).
    #[error("resource name may not be empty")]
    EmptyName,
    /// The watch cache has not finished its initial list.
    #[error("the cache of {0} has not finished its initial list")]
    NotSynced(String),
    /// The service does not watch this kind: a wiring mistake in the service.
    #[error("{0} is not watched by this service")]
    NotWatched(String),
    /// A read from the API server failed or took too long.
    #[error("{0}")]
    Unreadable(String),
}

/// Identifies a kind: `apiVersion` plus `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeKey {
    /// `group/version`, or `version` for the core group.
    pub api_version: String,
    /// The kind.
    pub kind: String,
}

impl TypeKey {
    /// The key of a statically typed kind.
    pub fn of<K: Resource<DynamicType = ()>>() -> Self {
        Self {
            api_version: K::api_version(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
        }
    }

    pub(crate) fn of_resource(ar: &ApiResource) -> Self {
        Self {
            api_version: ar.api_version.clone(),
            kind: ar.kind.clone(),
        }
    }
}

impl std::fmt::Display for TypeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.api_version, self.kind)
    }
}

/// Read access to the cluster objects rules depend on.
pub trait ClusterState: Send + Sync {
    /// One object by namespace (None for cluster-scoped) and name. Rules go through
    /// [`crate::review::handler::Context::get`], which refuses an empty name as the API client does.
    fn get(
        &self,
        ty: &TypeKey,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError>;

    /// All objects of a kind, optionally within one namespace.
    fn list(
        &self,
        ty: &TypeKey,
        namespace: Option<&str>,
    ) -> Result<Vec<Arc<DynamicObject>>, LookupError>;

    /// One object of any kind as the API server has it now, from no cache: for the rare review
    /// that needs an object of a kind nobody watches (the workload behind a `scale` review).
    /// States without an API server look among their own objects; the default knows none.
    fn read_now(
        &self,
        resource: &ApiResource,
        _namespace: Option<&str>,
        _name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        Err(LookupError::NotWatched(resource.kind.clone()))
    }

    /// A value that changes whenever the objects of `ty` change, and that no other state
    /// shares: what a rule derived from a list of them holds while it is the same, without
    /// listing again. `None` (the default) when the state does not keep one.
    fn generation(&self, _ty: &TypeKey) -> Option<Generation> {
        None
    }

    /// The objects of `ty` added since generation `since`, in the order they were added, when
    /// every change since was an addition; `None` (the default) when the state cannot tell. What
    /// a rule derived from a list at `since` can be brought up to date with, instead of listing
    /// every object again for each one added (admission-check's run: quadratic).
    fn added_since(&self, _ty: &TypeKey, _since: Generation) -> Option<Vec<Arc<DynamicObject>>> {
        None
    }
}

/// See [`ClusterState::generation`]: the state's identity and its count of changes to a kind.
pub type Generation = (u64, u64);

/// A state with nothing in it; every lookup finds nothing.
#[derive(Debug, Default)]
pub struct EmptyState;

impl ClusterState for EmptyState {
    fn get(
        &self,
        _: &TypeKey,
        _: Option<&str>,
        _: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        Ok(None)
    }
    fn list(&self, _: &TypeKey, _: Option<&str>) -> Result<Vec<Arc<DynamicObject>>, LookupError> {
        Ok(Vec::new())
    }
}
