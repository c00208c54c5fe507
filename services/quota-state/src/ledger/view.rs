//! The tree decisions read (`View`), and its rebuild: the rebuilder's copies of the quotas and
//! groups kept from the ledger's logs (`Builder`), and what moves when a new tree is installed
//! (`Plan`). See the module above for the argument.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Amount, Amounts, GroupKey, QuotaSpec, State, UNCHECKED, add};
use quota_protocol::tree::{self, Topology};

/// The quota tree as admissions read it, built from the quotas as they were at one moment.
/// Built off the ledger's lock and installed under it in a step that moves only the usage whose
/// place in the tree changed; see [`Ledger::spawn_rebuilder`].
#[derive(Debug, Default)]
pub(super) struct View {
    pub(super) topology: Arc<Topology>,
    /// The quotas by name (several when a name is used in several namespaces).
    pub(super) specs: HashMap<String, Vec<Arc<QuotaSpec>>>,
    /// Each quota and its ancestors up to the root, without the quotas never checked (the root,
    /// system and default quotas) and stopping at a cycle: whose subtree usage a pod charged to
    /// it adds to.
    pub(super) chains: HashMap<String, Arc<[String]>>,
}

impl View {
    pub(super) fn build(specs: &[Arc<QuotaSpec>]) -> Self {
        let topology = Arc::new(Topology::build(
            specs.iter().map(|q| (q.info.clone(), q.namespaces.clone())),
        ));
        let mut by_name: HashMap<String, Vec<Arc<QuotaSpec>>> = HashMap::new();
        for q in specs {
            by_name
                .entry(q.info.name.clone())
                .or_default()
                .push(q.clone());
        }
        let chains = by_name
            .keys()
            .map(|q| (q.clone(), Self::walk(&by_name, q).into()))
            .collect();
        Self {
            topology,
            specs: by_name,
            chains,
        }
    }

    fn walk(specs: &HashMap<String, Vec<Arc<QuotaSpec>>>, quota: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut cur = Some(quota.to_owned());
        while let Some(q) = cur {
            if q.is_empty() || out.contains(&q) || UNCHECKED.contains(&q.as_str()) {
                break; // no quota, a cycle, or the root
            }
            cur = specs
                .get(&q)
                .and_then(|v| v.first())
                .map(|s| s.info.parent.clone())
                .filter(|p| !p.is_empty());
            out.push(q);
        }
        out
    }

    pub(super) fn chain(&self, quota: &str) -> Arc<[String]> {
        match self.chains.get(quota) {
            Some(c) => c.clone(),
            None => Self::walk(&self.specs, quota).into(),
        }
    }

    /// The one quota named `quota`, if exactly one.
    pub(super) fn spec(&self, quota: &str) -> Option<&Arc<QuotaSpec>> {
        self.specs.get(quota).and_then(|v| v.first())
    }
}

/// The chain of `quota` in `view`; empty before the first tree (nothing is charged then: the
/// first installation charges every group).
pub(super) fn chain_in(view: Option<&View>, quota: &str) -> Arc<[String]> {
    view.map_or_else(|| Arc::from([]), |v| v.chain(quota))
}

/// `subtree[q] += sign × amounts` for each quota `q` of `chain`.
pub(super) fn add_along<'a>(
    subtree: &mut HashMap<String, Amounts>,
    chain: &[String],
    amounts: impl Iterator<Item = (&'a str, &'a Amount)> + Clone,
    sign: i128,
) {
    for q in chain {
        let to = match subtree.get_mut(q) {
            Some(t) => t,
            None => subtree.entry(q.clone()).or_default(),
        };
        add(to, amounts.clone(), sign);
    }
}

/// `uncountable[q] ± n` for each quota `q` of `chain`; zero entries are removed.
pub(super) fn count_along(
    uncountable: &mut HashMap<String, u32>,
    chain: &[String],
    n: u32,
    up: bool,
) {
    if n == 0 {
        return;
    }
    for q in chain {
        let c = uncountable.entry(q.clone()).or_default();
        *c = if up {
            c.saturating_add(n)
        } else {
            c.saturating_sub(n)
        };
        if *c == 0 {
            uncountable.remove(q);
        }
    }
}

/// A quota watch event, as the rebuilder replays it on its copy of the quotas.
#[derive(Debug)]
pub(super) enum QuotaChange {
    Upsert(Arc<QuotaSpec>),
    Delete { name: String, namespace: String },
}

/// Entries a log holds at most before the rebuilder copies everything instead: a ledger nobody
/// reads for a long while (the service's rebuilder takes them every second).
pub(super) const LOG_BOUND: usize = 100_000;

/// What the rebuilder takes from the ledger under the lock: the logs, or copies of everything
/// after they overflowed.
pub(super) enum Taken {
    Logs(Vec<QuotaChange>, Vec<GroupKey>),
    All(Vec<Arc<QuotaSpec>>, Vec<GroupKey>),
}

/// The rebuilder's own copies of the quotas and the groups, kept up to date from the ledger's
/// logs, so that what it takes under the lock costs what changed, not what exists.
#[derive(Debug, Default)]
pub(super) struct Builder {
    /// By (name, namespace).
    pub(super) quotas: HashMap<(String, String), Arc<QuotaSpec>>,
    pub(super) groups: Vec<GroupKey>,
}

impl Builder {
    /// Under the lock: O(changes), except after an overflow.
    pub(super) fn take(&self, s: &mut State) -> Taken {
        if std::mem::take(&mut s.resync) {
            s.quota_log.clear();
            s.new_groups.clear();
            return Taken::All(
                s.quotas.values().flatten().cloned().collect(),
                s.groups.keys().cloned().collect(),
            );
        }
        Taken::Logs(
            std::mem::take(&mut s.quota_log),
            std::mem::take(&mut s.new_groups),
        )
    }

    /// Off the lock.
    pub(super) fn apply(&mut self, t: Taken) {
        let key = |q: &QuotaSpec| (q.info.name.clone(), q.info.namespace.clone());
        match t {
            Taken::All(quotas, groups) => {
                self.quotas = quotas.into_iter().map(|q| (key(&q), q)).collect();
                self.groups = groups;
            }
            Taken::Logs(log, groups) => {
                for c in log {
                    match c {
                        QuotaChange::Upsert(q) => {
                            self.quotas.insert(key(&q), q);
                        }
                        QuotaChange::Delete { name, namespace } => {
                            self.quotas.remove(&(name, namespace));
                        }
                    }
                }
                // A group only the rebuilder still holds has no pods left.
                self.groups.retain(|g| Arc::strong_count(g) > 1);
                self.groups.extend(groups);
            }
        }
    }
}

/// What a rebuild computed off the lock, to apply under it.
pub(super) struct Plan {
    /// Groups whose chain changed: key, quota before, quota now.
    pub(super) moves: Vec<(GroupKey, String, String)>,
    /// Quota names whose chain changed (their reservations move).
    pub(super) changed: Vec<String>,
}

impl Plan {
    pub(super) fn of(base: Option<&View>, new: &View, groups: &[GroupKey]) -> Self {
        let mut changed: Vec<String> = new
            .specs
            .keys()
            .chain(base.into_iter().flat_map(|b| b.specs.keys()))
            .filter(|q| *chain_in(base, q) != *new.chain(q))
            .cloned()
            .collect();
        changed.sort_unstable();
        changed.dedup();
        let moves = groups
            .iter()
            .filter_map(|g| {
                let from = match base {
                    Some(b) => tree::quota_name(&*b.topology, Some(&g.label), &g.namespace, false),
                    None => String::new(),
                };
                let to = tree::quota_name(&*new.topology, Some(&g.label), &g.namespace, false);
                (to != from || *chain_in(base, &from) != *new.chain(&to))
                    .then(|| (g.clone(), from, to))
            })
            .collect();
        Self { moves, changed }
    }
}
