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
    /// Value × 1000, rounded up as Go's `MilliValue`, exact in 128 bits (Go's `MilliValue` wraps
    /// beyond 64 bits; memory above 9.2 PB already does).
    pub milli: i128,
    /// How it prints.
    pub format: QuantityFormat,
}

/// Why a resource amount cannot be counted exactly: the quota path refuses rather than guess.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    /// The quantity does not parse (what the API server's decoder would say of it).
    #[error("{resource}: {message}")]
    Unparsable {
        /// Resource name.
        resource: String,
        /// The parser's text (Go's wording).
        message: String,
    },
    /// The quantity is beyond [`MAX_MILLI`] thousandths (about 8.5e34 units).
    #[error(
        "{resource}={text} is too large to be counted (the limit is {} units)",
        MAX_COUNTABLE_UNITS
    )]
    TooLarge {
        /// Resource name.
        resource: String,
        /// The quantity as written.
        text: String,
    },
    /// A sum of amounts leaves the range of [`MAX_MILLI`].
    #[error(
        "the total of {resource} is too large to be counted (the limit is {} units)",
        MAX_COUNTABLE_UNITS
    )]
    Overflow {
        /// Resource name.
        resource: String,
    },
}

/// The largest magnitude of an exact amount, in thousandths: 2^126. Every exact amount and sum
/// stays within it, so that it also crosses 128-bit wire formats with room to spare.
pub const MAX_MILLI: i128 = 1 << 126;

/// [`MAX_MILLI`] in whole units.
pub const MAX_COUNTABLE_UNITS: i128 = MAX_MILLI / 1000;

fn within(m: i128) -> Option<i128> {
    (m.unsigned_abs() <= MAX_MILLI.unsigned_abs()).then_some(m)
}

impl Amount {
    /// Parses a quantity leniently, for rules that only look at an amount's rough size:
    /// unparsable text counts as zero, a value beyond 128-bit thousandths as the largest one.
    /// The quota path uses [`Amount::try_of`] instead, which never guesses.
    pub fn of(q: &Quantity) -> Self {
        match GoQuantity::parse(&q.0) {
            Ok(p) => Self {
                milli: p
                    .value()
                    .milli_value_wide()
                    .unwrap_or(if p.value().negative {
                        i128::MIN
                    } else {
                        i128::MAX
                    }),
                format: p.value().format,
            },
            Err(_) => Self {
                milli: 0,
                format: QuantityFormat::DecimalSI,
            },
        }
    }

    /// Parses the quantity of `resource` exactly, or says why it cannot be counted.
    pub fn try_of(resource: &str, q: &Quantity) -> Result<Self, AmountError> {
        let p = GoQuantity::parse(&q.0).map_err(|e| AmountError::Unparsable {
            resource: resource.to_owned(),
            message: e.to_string(),
        })?;
        Self::try_from_parsed(resource, &q.0, p.value())
    }

    /// From a parsed quantity, exactly, or why it cannot be counted.
    pub fn try_from_parsed(
        resource: &str,
        text: &str,
        p: &ParsedQuantity,
    ) -> Result<Self, AmountError> {
        Ok(Self {
            milli: p
                .milli_value_wide()
                .and_then(within)
                .ok_or_else(|| AmountError::TooLarge {
                    resource: resource.to_owned(),
                    text: text.to_owned(),
                })?,
            format: p.format,
        })
    }

    /// Canonical text.
    pub fn canonical(&self) -> String {
        ParsedQuantity::from_milli(self.milli, self.format).canonical()
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

/// Parses a resource list leniently (see [`Amount::of`]).
pub fn amounts(rl: Option<&ResourceList>) -> Amounts {
    rl.map(|m| m.iter().map(|(k, v)| (k.clone(), Amount::of(v))).collect())
        .unwrap_or_default()
}

/// Parses a resource list exactly, or names the first amount that cannot be counted.
pub fn try_amounts(rl: Option<&ResourceList>) -> Result<Amounts, AmountError> {
    rl.into_iter()
        .flatten()
        .map(|(k, v)| Ok((k.clone(), Amount::try_of(k, v)?)))
        .collect()
}

/// `a += b`, keeping the first format seen per key; saturating, for the lenient rules (see
/// [`Amount::of`]). The quota path uses [`try_add`].
pub fn add(a: &mut Amounts, b: &Amounts) {
    for (k, v) in b {
        a.entry(k.clone())
            .and_modify(|x| x.milli = x.milli.saturating_add(v.milli))
            .or_insert(*v);
    }
}

/// `a += b`, keeping the first format seen per key, or the first resource whose sum leaves the
/// range of [`MAX_MILLI`] (then `a` is left partly added: callers drop it).
pub fn try_add(a: &mut Amounts, b: &Amounts) -> Result<(), AmountError> {
    for (k, v) in b {
        match a.get_mut(k) {
            Some(x) => {
                x.milli = x
                    .milli
                    .checked_add(v.milli)
                    .and_then(within)
                    .ok_or_else(|| AmountError::Overflow {
                        resource: k.clone(),
                    })?;
            }
            None => {
                a.insert(k.clone(), *v);
            }
        }
    }
    Ok(())
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

/// Kubernetes' pod request (section 2), leniently (see [`Amount::of`]): for rules that only ask
/// whether a resource is requested or how much roughly. The quota path uses
/// [`try_pod_request`].
pub fn pod_request(spec: &PodSpec) -> Amounts {
    pod_request_with(spec, &|_, q| Ok(Amount::of(q)), &|a, b| {
        add(a, b);
        Ok(())
    })
    .unwrap_or_default()
}

/// Kubernetes' pod request (section 2) exactly: containers, init containers and sidecars,
/// pod-level requests, overhead. Fails naming the resource and value that cannot be counted.
pub fn try_pod_request(spec: &PodSpec) -> Result<Amounts, AmountError> {
    pod_request_with(spec, &Amount::try_of, &try_add)
}

type Parse<'a> = &'a dyn Fn(&str, &Quantity) -> Result<Amount, AmountError>;
type Sum<'a> = &'a dyn Fn(&mut Amounts, &Amounts) -> Result<(), AmountError>;

fn pod_request_with(
    spec: &PodSpec,
    parse: Parse<'_>,
    sum: Sum<'_>,
) -> Result<Amounts, AmountError> {
    let list = |rl: Option<&ResourceList>| -> Result<Amounts, AmountError> {
        rl.into_iter()
            .flatten()
            .map(|(k, v)| Ok((k.clone(), parse(k, v)?)))
            .collect()
    };
    let requests = |c: &Container| list(c.resources.as_ref().and_then(|r| r.requests.as_ref()));
    let mut reqs = Amounts::new();
    for c in &spec.containers {
        sum(&mut reqs, &requests(c)?)?;
    }
    let mut sidecars = Amounts::new();
    let mut init_max = Amounts::new();
    for c in spec.init_containers.iter().flatten() {
        let mut r = requests(c)?;
        if c.restart_policy.as_deref() == Some("Always") {
            sum(&mut reqs, &r)?;
            sum(&mut sidecars, &r)?;
            r = sidecars.clone();
        } else {
            sum(&mut r, &sidecars)?;
        }
        max_into(&mut init_max, &r);
    }
    max_into(&mut reqs, &init_max);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        for (k, v) in pod_level {
            if k == "cpu" || k == "memory" || k.starts_with("hugepages-") {
                reqs.insert(k.clone(), parse(k, v)?);
            }
        }
    }
    sum(&mut reqs, &list(spec.overhead.as_ref())?)?;
    Ok(reqs)
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

/// Amounts as compact JSON with sorted keys and canonical quantities: the shape of Koordinator's
/// `child-request` annotation.
pub fn amounts_json(a: &Amounts) -> String {
    let m: BTreeMap<&str, String> = a.iter().map(|(k, v)| (k.as_str(), v.canonical())).collect();
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

    #[test]
    fn exact_amounts_never_clamp_or_wrap() {
        // Petabytes of memory: the milli-value is beyond 64 bits, still exact here.
        let q = |t: &str| Quantity(t.to_owned());
        let a = Amount::try_of("memory", &q("10Pi")).unwrap();
        assert_eq!(a.milli, 11_258_999_068_426_240_000);
        assert_eq!(a.canonical(), "10Pi");
        let cpu = Amount::try_of("cpu", &q("9223372036854775")).unwrap();
        assert_eq!(cpu.milli, 9_223_372_036_854_775_000);
        assert_eq!(cpu.canonical(), "9223372036854775");
        assert_eq!(
            Amount::try_of("cpu", &q("1e40")).unwrap_err().to_string(),
            format!(
                "cpu=1e40 is too large to be counted (the limit is {MAX_COUNTABLE_UNITS} units)"
            )
        );
        assert!(
            Amount::try_of("cpu", &q("ten"))
                .unwrap_err()
                .to_string()
                .starts_with("cpu: quantities must match the regular expression")
        );
        // Two amounts that fit, whose sum does not.
        let s = spec(json!({"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "5e34"}}},
            {"name": "b", "resources": {"requests": {"cpu": "5e34"}}}
        ]}));
        assert_eq!(
            try_pod_request(&s).unwrap_err(),
            AmountError::Overflow {
                resource: "cpu".into()
            }
        );
        // The lenient path adds without the bound (and saturates rather than wrap).
        assert_eq!(pod_request(&s)["cpu"].milli, 100_000 * 10i128.pow(33));
        let s = spec(json!({"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "9223372036854775", "memory": "8Ei"}}}
        ], "overhead": {"cpu": "1"}}));
        let r = try_pod_request(&s).unwrap();
        assert_eq!(
            r["cpu"].milli, 9_223_372_036_854_776_000,
            "past i64::MAX, exact"
        );
        assert_eq!(r["memory"].canonical(), "8Ei");
    }
}
