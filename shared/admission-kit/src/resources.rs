//! Resource arithmetic on quantities (exact, in thousandths) and Kubernetes' pod-request formula,
//! shared by the services that count resources (scheduling-webhook, quota-state).

use std::collections::BTreeMap;

use crate::go::{ParsedQuantity, Quantity as GoQuantity, QuantityFormat};
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A resource list (`corev1.ResourceList`).
pub type ResourceList = BTreeMap<String, Quantity>;

/// A quantity as an exact number of thousandths, with the format it prints in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount {
    /// Value × 1000, rounded up as Go's `MilliValue`.
    pub milli: i128,
    /// How it prints.
    pub format: QuantityFormat,
}

impl Amount {
    /// Parses a quantity; unparsable text counts as zero.
    pub fn of(q: &Quantity) -> Self {
        match GoQuantity::parse(&q.0) {
            Ok(p) => Self::from_parsed(p.value()),
            Err(_) => Self {
                milli: 0,
                format: QuantityFormat::DecimalSI,
            },
        }
    }

    /// From a parsed quantity.
    pub fn from_parsed(p: &ParsedQuantity) -> Self {
        Self {
            milli: i128::from(p.milli_value().unwrap_or(i64::MAX)),
            format: p.format,
        }
    }

    /// Canonical text.
    pub fn canonical(&self) -> String {
        ParsedQuantity::from_milli(i64::try_from(self.milli).unwrap_or(i64::MAX), self.format)
            .canonical()
    }

    /// Whether it is a whole number.
    pub fn is_integer(&self) -> bool {
        self.milli % 1000 == 0
    }

    /// The value rounded up to a whole number (Go's `Value()`).
    pub fn ceil(&self) -> i128 {
        self.milli.div_euclid(1000) + i128::from(self.milli.rem_euclid(1000) != 0)
    }
}

/// A resource list as amounts.
pub type Amounts = BTreeMap<String, Amount>;

/// Parses a resource list.
pub fn amounts(rl: Option<&ResourceList>) -> Amounts {
    rl.map(|m| m.iter().map(|(k, v)| (k.clone(), Amount::of(v))).collect())
        .unwrap_or_default()
}

/// `a += b`, keeping the first format seen per key.
pub fn add(a: &mut Amounts, b: &Amounts) {
    for (k, v) in b {
        a.entry(k.clone())
            .and_modify(|x| x.milli += v.milli)
            .or_insert(*v);
    }
}

/// Per-key maximum.
pub fn max_into(a: &mut Amounts, b: &Amounts) {
    for (k, v) in b {
        match a.get_mut(k) {
            Some(x) if x.milli >= v.milli => {}
            Some(x) => x.milli = v.milli,
            None => {
                a.insert(k.clone(), *v);
            }
        }
    }
}

fn container_requests(c: &Container) -> Amounts {
    amounts(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
}

/// Kubernetes' pod request (section 2): containers, init containers and sidecars, pod-level
/// requests, overhead.
pub fn pod_request(spec: &PodSpec) -> Amounts {
    let mut reqs = Amounts::new();
    for c in &spec.containers {
        add(&mut reqs, &container_requests(c));
    }
    let mut sidecars = Amounts::new();
    let mut init_max = Amounts::new();
    for c in spec.init_containers.iter().flatten() {
        let mut r = container_requests(c);
        if c.restart_policy.as_deref() == Some("Always") {
            add(&mut reqs, &r);
            add(&mut sidecars, &r);
            r = sidecars.clone();
        } else {
            add(&mut r, &sidecars);
        }
        max_into(&mut init_max, &r);
    }
    max_into(&mut reqs, &init_max);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        for (k, v) in pod_level {
            if k == "cpu" || k == "memory" || k.starts_with("hugepages-") {
                reqs.insert(k.clone(), Amount::of(v));
            }
        }
    }
    add(&mut reqs, &amounts(spec.overhead.as_ref()));
    reqs
}

/// `name=quantity` pairs, sorted by name, joined by `,`.
pub fn list_text(a: &Amounts) -> String {
    a.iter()
        .map(|(k, v)| format!("{k}={}", v.canonical()))
        .collect::<Vec<_>>()
        .join(",")
}

/// A resource list as compact JSON with sorted keys and canonical quantities.
pub fn canonical_json(rl: &ResourceList) -> String {
    let m: BTreeMap<&str, String> = rl
        .iter()
        .map(|(k, v)| (k.as_str(), Amount::of(v).canonical()))
        .collect();
    serde_json::to_string(&m).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> PodSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn pod_request_formula() {
        let s = spec(json!({
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}, {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}],
            "overhead": {"cpu": "500m"}
        }));
        let r = pod_request(&s);
        assert_eq!(list_text(&r), "cpu=3500m,memory=1Gi");
        let s = spec(json!({
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                               {"name": "i", "resources": {"requests": {"cpu": "1"}}}]
        }));
        assert_eq!(list_text(&pod_request(&s)), "cpu=2");
    }
}
