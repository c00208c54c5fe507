//! Resource arithmetic on quantities (exact, in billionths) and Kubernetes' pod-request formula,
//! shared by the services that count resources (scheduling-webhook, quota-state).

use std::collections::BTreeMap;

use crate::go::{ParsedQuantity, Quantity as GoQuantity, QuantityFormat};
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A resource list (`corev1.ResourceList`).
pub type ResourceList = BTreeMap<String, Quantity>;

/// A quantity as an exact number of billionths, with the format it prints in.
///
/// Billionths because apimachinery rounds every parsed quantity to whole nanos: sums and
/// comparisons of these are exactly Go's `Quantity.Add` and `Cmp` (three `500u` requests are
/// `1500u`, not `3m`), in 128 bits where Go's `MilliValue` would wrap beyond 64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount {
    /// Value × 10^9, exact.
    pub nano: i128,
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
    /// The quantity is beyond [`MAX_NANO`] billionths (about 8.5e28 units).
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
    /// A sum of amounts leaves the range of [`MAX_NANO`].
    #[error(
        "the total of {resource} is too large to be counted (the limit is {} units)",
        MAX_COUNTABLE_UNITS
    )]
    Overflow {
        /// Resource name.
        resource: String,
    },
}

/// The largest magnitude of an exact amount, in billionths: 2^126 (about 8.5e28 units). Every
/// exact amount and sum stays within it, so that it also crosses 128-bit wire formats with room
/// to spare.
pub const MAX_NANO: i128 = 1 << 126;

/// [`MAX_NANO`] in whole units.
pub const MAX_COUNTABLE_UNITS: i128 = MAX_NANO / NANO_PER_UNIT;

/// Billionths in one unit.
pub const NANO_PER_UNIT: i128 = 1_000_000_000;

/// Billionths in one thousandth.
pub const NANO_PER_MILLI: i128 = 1_000_000;

fn within(m: i128) -> Option<i128> {
    (m.unsigned_abs() <= MAX_NANO.unsigned_abs()).then_some(m)
}

impl Amount {
    /// Parses a quantity leniently, for rules that only look at an amount's rough size:
    /// unparsable text counts as zero, a value beyond 128-bit billionths as the largest one.
    /// The quota path uses [`Amount::try_of`] instead, which never guesses.
    pub fn of(q: &Quantity) -> Self {
        match GoQuantity::from_json_text(&q.0) {
            Ok(p) => Self {
                nano: p
                    .value()
                    .nano_value_wide()
                    .unwrap_or(if p.value().negative {
                        i128::MIN
                    } else {
                        i128::MAX
                    }),
                format: p.value().format,
            },
            Err(_) => Self {
                nano: 0,
                format: QuantityFormat::DecimalSI,
            },
        }
    }

    /// Parses the quantity of `resource` exactly, or says why it cannot be counted.
    pub fn try_of(resource: &str, q: &Quantity) -> Result<Self, AmountError> {
        let p = GoQuantity::from_json_text(&q.0).map_err(|e| AmountError::Unparsable {
            resource: resource.to_owned(),
            message: format!("{e}: {}", crate::go::go_quote(&q.0)),
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
            nano: p
                .nano_value_wide()
                .and_then(within)
                .ok_or_else(|| AmountError::TooLarge {
                    resource: resource.to_owned(),
                    text: text.to_owned(),
                })?,
            format: p.format,
        })
    }

    /// `milli` thousandths, printed in `format`.
    pub fn from_milli(milli: i128, format: QuantityFormat) -> Self {
        Self {
            nano: milli.saturating_mul(NANO_PER_MILLI),
            format,
        }
    }

    /// Canonical text (Go's `Quantity.String()` of the exact value: `1500u`, `1500m`, `2Gi`).
    pub fn canonical(&self) -> String {
        ParsedQuantity::from_nano(self.nano, self.format).canonical()
    }

    /// Whether it is a whole number at milli precision, as upstream asks it
    /// (`Value()*1000 == MilliValue()`: `999999999n` rounds to a whole `1`).
    pub fn is_integer(&self) -> bool {
        self.milli() % 1000 == 0
    }

    /// Whether it is zero.
    pub fn is_zero(&self) -> bool {
        self.nano == 0
    }

    /// The value × 1000 rounded away from zero, as Go's `MilliValue()` rounds (`500u` is 1).
    pub fn milli(&self) -> i128 {
        away_from_zero(self.nano, NANO_PER_MILLI)
    }

    /// The value rounded to a whole number away from zero, as Go's `Value()` rounds (`100m` is
    /// 1, `-100m` is -1).
    pub fn value(&self) -> i128 {
        away_from_zero(self.nano, NANO_PER_UNIT)
    }
}

fn away_from_zero(n: i128, d: i128) -> i128 {
    n / d + (n % d).signum()
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
            .and_modify(|x| x.nano = x.nano.saturating_add(v.nano))
            .or_insert(*v);
    }
}

/// `a += b`, keeping the first format seen per key, or the first resource whose sum leaves the
/// range of [`MAX_NANO`] (then `a` is left partly added: callers drop it).
pub fn try_add(a: &mut Amounts, b: &Amounts) -> Result<(), AmountError> {
    for (k, v) in b {
        match a.get_mut(k) {
            Some(x) => {
                x.nano = x.nano.checked_add(v.nano).and_then(within).ok_or_else(|| {
                    AmountError::Overflow {
                        resource: k.clone(),
                    }
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
            Some(x) if x.nano >= v.nano => {}
            Some(x) => x.nano = v.nano,
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

/// A pod's request, worked out at most once per review for the rules that read it exactly
/// ([`try_pod_request`]: the quota) and those that read it leniently ([`pod_request`]): the two
/// agree whenever the exact one can be counted, so the lenient one is only worked out apart
/// when it cannot (parsing every quantity twice was 4 % of a served Pod validation).
#[derive(Debug)]
pub struct PodRequest<'a> {
    spec: Option<&'a PodSpec>,
    exact: std::sync::OnceLock<Option<Result<Amounts, AmountError>>>,
}

impl<'a> PodRequest<'a> {
    /// The request of the pod with this spec (none: nothing requested).
    pub fn new(spec: Option<&'a PodSpec>) -> Self {
        Self {
            spec,
            exact: std::sync::OnceLock::new(),
        }
    }

    /// [`try_pod_request`] of the spec; `None` without one.
    pub fn exact(&self) -> Option<&Result<Amounts, AmountError>> {
        self.exact
            .get_or_init(|| self.spec.map(try_pod_request))
            .as_ref()
    }

    /// [`pod_request`] of the spec; empty without one.
    pub fn lenient(&self) -> std::borrow::Cow<'_, Amounts> {
        match self.exact() {
            Some(Ok(exact)) => std::borrow::Cow::Borrowed(exact),
            _ => std::borrow::Cow::Owned(self.spec.map(pod_request).unwrap_or_default()),
        }
    }
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

/// A quantity Go's typed decoder refuses while k8s-openapi's `Quantity` (plain text) accepts it:
/// the object does not decode (answered as a decode error, as upstream answers it). The text
/// starts with apimachinery's; the value and its path follow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}: {} at {path}", crate::go::go_quote(text))]
pub struct BadQuantity {
    /// Where it is (`spec.containers[0].resources.limits.cpu`).
    pub path: String,
    /// The text as sent.
    pub text: String,
    /// Why it does not parse.
    pub error: crate::go::QuantityError,
}

impl BadQuantity {
    /// The same error one level up: `prefix` goes in front of the path. Paths are built only
    /// on the way out of an error, so a clean object costs no string formatting.
    pub fn under(mut self, prefix: impl std::fmt::Display) -> Self {
        self.path = if self.path.is_empty() {
            prefix.to_string()
        } else {
            format!("{prefix}.{}", self.path)
        };
        self
    }
}

fn quantity_ok(q: &Quantity) -> Result<(), BadQuantity> {
    crate::go::check_quantity_text(crate::go::json_trim(&q.0)).map_err(|error| BadQuantity {
        path: String::new(),
        text: q.0.clone(),
        error,
    })
}

fn list_ok(rl: Option<&ResourceList>) -> Result<(), BadQuantity> {
    rl.into_iter()
        .flatten()
        .try_for_each(|(k, v)| quantity_ok(v).map_err(|e| e.under(k)))
}

fn requirements_ok(
    r: Option<&k8s_openapi::api::core::v1::ResourceRequirements>,
) -> Result<(), BadQuantity> {
    let Some(r) = r else { return Ok(()) };
    list_ok(r.limits.as_ref()).map_err(|e| e.under("limits"))?;
    list_ok(r.requests.as_ref()).map_err(|e| e.under("requests"))
}

fn env_ok(env: Option<&Vec<k8s_openapi::api::core::v1::EnvVar>>) -> Result<(), BadQuantity> {
    for (i, e) in env.into_iter().flatten().enumerate() {
        let divisor = e
            .value_from
            .as_ref()
            .and_then(|v| v.resource_field_ref.as_ref())
            .and_then(|r| r.divisor.as_ref());
        if let Some(d) = divisor {
            quantity_ok(d)
                .map_err(|e| e.under(format!("[{i}].valueFrom.resourceFieldRef.divisor")))?;
        }
    }
    Ok(())
}

/// Checks every quantity of a resource list.
pub fn check_list(path: &str, rl: Option<&ResourceList>) -> Result<(), BadQuantity> {
    list_ok(rl).map_err(|e| e.under(path))
}

/// Checks the limits and requests of a container's (or pod's) resources.
pub fn check_requirements(
    path: &str,
    r: Option<&k8s_openapi::api::core::v1::ResourceRequirements>,
) -> Result<(), BadQuantity> {
    requirements_ok(r).map_err(|e| e.under(path))
}

/// Checks the resource-field divisors of environment variables.
pub fn check_env(
    path: &str,
    env: Option<&Vec<k8s_openapi::api::core::v1::EnvVar>>,
) -> Result<(), BadQuantity> {
    // The index joins the list's path without a dot: `env[0]`.
    env_ok(env).map_err(|mut e| {
        e.path = format!("{path}{}", e.path);
        e
    })
}

/// Checks every quantity a `PodSpec` holds: containers of each kind (resources, env divisors),
/// pod-level resources, overhead, and volumes (emptyDir size, downward API divisors, generic
/// ephemeral claims).
pub fn check_pod_spec(path: &str, spec: &PodSpec) -> Result<(), BadQuantity> {
    pod_spec_ok(spec).map_err(|e| e.under(path))
}

fn pod_spec_ok(spec: &PodSpec) -> Result<(), BadQuantity> {
    let container = |kind: &str,
                     i: usize,
                     resources: Option<&k8s_openapi::api::core::v1::ResourceRequirements>,
                     env: Option<&Vec<k8s_openapi::api::core::v1::EnvVar>>| {
        requirements_ok(resources)
            .map_err(|e| e.under("resources"))
            .and_then(|()| {
                env_ok(env).map_err(|mut e| {
                    e.path = format!("env{}", e.path);
                    e
                })
            })
            .map_err(|e| e.under(format!("{kind}[{i}]")))
    };
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        container("initContainers", i, c.resources.as_ref(), c.env.as_ref())?;
    }
    for (i, c) in spec.containers.iter().enumerate() {
        container("containers", i, c.resources.as_ref(), c.env.as_ref())?;
    }
    for (i, c) in spec.ephemeral_containers.iter().flatten().enumerate() {
        container(
            "ephemeralContainers",
            i,
            c.resources.as_ref(),
            c.env.as_ref(),
        )?;
    }
    list_ok(spec.overhead.as_ref()).map_err(|e| e.under("overhead"))?;
    requirements_ok(spec.resources.as_ref()).map_err(|e| e.under("resources"))?;
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        volume_ok(v).map_err(|e| e.under(format!("volumes[{i}]")))?;
    }
    Ok(())
}

fn volume_ok(v: &k8s_openapi::api::core::v1::Volume) -> Result<(), BadQuantity> {
    if let Some(size) = v.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref()) {
        quantity_ok(size).map_err(|e| e.under("emptyDir.sizeLimit"))?;
    }
    let divisors = |items: Option<&Vec<k8s_openapi::api::core::v1::DownwardAPIVolumeFile>>| {
        items
            .into_iter()
            .flatten()
            .enumerate()
            .try_for_each(|(j, f)| {
                match f
                    .resource_field_ref
                    .as_ref()
                    .and_then(|r| r.divisor.as_ref())
                {
                    Some(d) => quantity_ok(d)
                        .map_err(|e| e.under(format!("items[{j}].resourceFieldRef.divisor"))),
                    None => Ok(()),
                }
            })
    };
    divisors(v.downward_api.as_ref().and_then(|d| d.items.as_ref()))
        .map_err(|e| e.under("downwardAPI"))?;
    for (k, s) in v
        .projected
        .iter()
        .flat_map(|p| p.sources.iter().flatten())
        .enumerate()
    {
        divisors(s.downward_api.as_ref().and_then(|d| d.items.as_ref()))
            .map_err(|e| e.under(format!("projected.sources[{k}].downwardAPI")))?;
    }
    if let Some(r) = v
        .ephemeral
        .as_ref()
        .and_then(|e| e.volume_claim_template.as_ref())
        .and_then(|t| t.spec.resources.as_ref())
    {
        list_ok(r.limits.as_ref())
            .map_err(|e| e.under("limits"))
            .and_then(|()| list_ok(r.requests.as_ref()).map_err(|e| e.under("requests")))
            .map_err(|e| e.under("ephemeral.volumeClaimTemplate.spec.resources"))?;
    }
    Ok(())
}

/// [`check_pod_spec`] on a Pod's spec, as the text a handler's `check_decoded` returns.
pub fn check_pod(pod: &k8s_openapi::api::core::v1::Pod) -> Result<(), String> {
    pod.spec
        .as_ref()
        .map_or(Ok(()), |s| check_pod_spec("spec", s))
        .map_err(|e| e.to_string())
}

/// `name=quantity` pairs, sorted by name, joined by `,`.
pub fn list_text(a: &Amounts) -> String {
    a.iter()
        .map(|(k, v)| format!("{k}={}", v.canonical()))
        .collect::<Vec<_>>()
        .join(",")
}

/// The text Go prints for a decoded quantity (`Quantity.String()`): the exact value, sub-milli
/// digits included, in canonical form or as written where Go keeps the spelling
/// ([`ParsedQuantity::canonical`]). Text that does not parse is returned as it is (the decode
/// checks refuse it before any rule prints it).
pub fn go_text(q: &Quantity) -> String {
    GoQuantity::from_json_text(&q.0).map_or_else(|_| q.0.clone(), |p| p.value().canonical())
}

/// Whether Go's decode keeps another value than `q` says (rounded up to nano units, or a
/// BinarySI value capped at 2^63-1): see [`GoQuantity::altered_by_decode`].
pub fn altered_by_decode(q: &Quantity) -> bool {
    GoQuantity::from_json_text(&q.0).is_ok_and(|p| p.altered_by_decode())
}

/// Compares two decoded quantities exactly, as Go's `Quantity.Cmp` (text that does not parse
/// counts as zero; the decode checks refuse it before any rule compares it).
pub fn cmp_quantities(a: &Quantity, b: &Quantity) -> std::cmp::Ordering {
    let value = |q: &Quantity| {
        GoQuantity::from_json_text(&q.0)
            .map_or_else(|_| ParsedQuantity::zero(), |p| p.value().clone())
    };
    value(a).cmp_value(&value(b))
}

/// A resource list as compact JSON with sorted keys and quantities as Go prints them
/// ([`go_text`]).
pub fn canonical_json(rl: &ResourceList) -> String {
    let m: BTreeMap<&str, String> = rl.iter().map(|(k, v)| (k.as_str(), go_text(v))).collect();
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

    /// Worked out once, each reading is the one its own function gives: exact and lenient alike
    /// where every amount counts, apart where one cannot be counted (unparsable, too large, a sum
    /// too large).
    #[test]
    fn pod_request_once_reads_as_each_function() {
        let with = |cpu: &str, memory: &str| {
            spec(json!({"containers": [
                {"name": "a", "resources": {"requests": {"cpu": cpu, "memory": memory}}},
                {"name": "b", "resources": {"requests": {"cpu": cpu}}}]}))
        };
        let specs = [
            with("1", "1Gi"),
            with("250m", "100M"),
            with("ten", "1Gi"),
            with("1e40", "1Gi"),
            with("1", "800000000000000000000000000000Ei"),
            with(&format!("{}", MAX_COUNTABLE_UNITS), "1"),
            spec(json!({"containers": []})),
        ];
        for s in &specs {
            let once = PodRequest::new(Some(s));
            assert_eq!(once.exact(), Some(&try_pod_request(s)));
            assert_eq!(*once.lenient(), pod_request(s));
        }
        assert!(specs.iter().any(|s| try_pod_request(s).is_err()));
        let none = PodRequest::new(None);
        assert_eq!((none.exact(), none.lenient().len()), (None, 0));
    }

    #[test]
    fn exact_amounts_never_clamp_or_wrap() {
        // Petabytes of memory: the milli-value is beyond 64 bits, still exact here.
        let q = |t: &str| Quantity(t.to_owned());
        let a = Amount::try_of("memory", &q("10Pi")).unwrap();
        assert_eq!(a.milli(), 11_258_999_068_426_240_000);
        assert_eq!(a.nano, 11_258_999_068_426_240_000_000_000);
        assert_eq!(a.canonical(), "10Pi");
        let cpu = Amount::try_of("cpu", &q("9223372036854775")).unwrap();
        assert_eq!(cpu.milli(), 9_223_372_036_854_775_000);
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
            {"name": "a", "resources": {"requests": {"cpu": "5e28"}}},
            {"name": "b", "resources": {"requests": {"cpu": "5e28"}}}
        ]}));
        assert_eq!(
            try_pod_request(&s).unwrap_err(),
            AmountError::Overflow {
                resource: "cpu".into()
            }
        );
        // The lenient path adds without the bound (and saturates rather than wrap).
        assert_eq!(pod_request(&s)["cpu"].nano, 100_000 * 10i128.pow(33));
        let s = spec(json!({"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "9223372036854775", "memory": "8Ei"}}}
        ], "overhead": {"cpu": "1"}}));
        let r = try_pod_request(&s).unwrap();
        assert_eq!(
            r["cpu"].milli(),
            9_223_372_036_854_776_000,
            "past i64::MAX, exact"
        );
        // Go caps a BinarySI value at 2^63-1 when it parses it (8Ei is 2^63).
        assert_eq!(r["memory"].canonical(), "9223372036854775807");
    }

    /// Sub-milli amounts add exactly, as Go's `Quantity.Add` (three `500u` are `1500u`,
    /// not `3m`), and print as Go prints the sum.
    #[test]
    fn sub_milli_amounts_add_exactly() {
        let s = spec(json!({"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500u", "memory": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500u", "memory": "100n"}}},
            {"name": "c", "resources": {"requests": {"cpu": "500u"}}}
        ]}));
        let r = try_pod_request(&s).unwrap();
        assert_eq!(r["cpu"].nano, 1_500_000);
        assert_eq!(
            r["cpu"].milli(),
            2,
            "MilliValue rounds the exact sum up once"
        );
        assert_eq!(list_text(&r), "cpu=1500u,memory=1000000100n");
        assert_eq!(
            Amount::from_milli(-100, QuantityFormat::DecimalSI).value(),
            -1,
            "away from zero"
        );
        assert_eq!(
            Amount::try_of("cpu", &Quantity("-1n".into()))
                .unwrap()
                .milli(),
            -1
        );
    }

    /// The decode check names the quantity's full path, whatever the nesting.
    #[test]
    fn bad_quantities_are_named_by_path() {
        let at = |v: serde_json::Value| check_pod_spec("spec", &spec(v)).map_err(|e| e.path);
        assert_eq!(
            at(json!({"containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]})),
            Ok(())
        );
        assert_eq!(
            at(
                json!({"containers": [{"name": "a"}, {"name": "b", "env": [{"name": "x"},
                {"name": "y", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1x"}}}]}]})
            ),
            Err("spec.containers[1].env[1].valueFrom.resourceFieldRef.divisor".into())
        );
        assert_eq!(
            at(
                json!({"containers": [{"name": "a"}], "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "big"}}]})
            ),
            Err("spec.volumes[0].emptyDir.sizeLimit".into())
        );
        assert_eq!(
            at(
                json!({"containers": [{"name": "a"}], "initContainers": [{"name": "i", "resources": {"requests": {"memory": "1e"}}}]})
            ),
            Err("spec.initContainers[0].resources.requests.memory".into())
        );
        assert_eq!(
            at(json!({"containers": [{"name": "a"}], "overhead": {"cpu": "?"}})),
            Err("spec.overhead.cpu".into())
        );
    }
}
