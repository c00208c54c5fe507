//! The router's webhooks: ModelRoute validation (`docs/spec/kthena-v1.md` §11, MR-1..MR-9) and
//! ModelServer, which upstream admits whatever it holds (§12).

use admission_kit::review::field::BadValue;
use admission_kit::{Context, ErrorList, FieldError, Path, Request, Status, Validator, Verdict};

use crate::types::Obj;
use crate::v1::go_regexp::compile_error;
use crate::v1::networking::{ModelRouteSpec, ModelServerSpec, Rule};

/// A ModelRoute as the rules see it.
pub type RouteObj = Obj<ModelRouteSpec>;
/// A ModelServer as the rules see it.
pub type ServerObj = Obj<ModelServerSpec>;

/// The router's denial text: `validation failed: ` then each `  - <error>` with nothing between
/// them (upstream joins with an empty string, unlike the controller manager's newlines).
pub fn router_denial(errors: &[FieldError]) -> Status {
    let mut msg = String::from("validation failed: ");
    for e in errors {
        msg.push_str("  - ");
        msg.push_str(&e.to_string());
    }
    Status::message(msg)
}

fn null() -> BadValue {
    BadValue::Raw("null".to_owned())
}

/// MR-1, MR-2: a model name or LoRA adapters, and no empty adapter name.
///
/// Refused: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {rules: [{targetModels: [{modelServerName: s}]}]}}`
///
/// Admitted: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{targetModels: [{modelServerName: s, weight: 50}]}]}}`
fn mr_1_2_names(spec: &ModelRouteSpec, errs: &mut ErrorList) {
    let spec_path = Path::new("spec");
    let adapters = spec.lora_adapters.as_deref().unwrap_or_default();
    if spec.model_name.is_empty() && adapters.is_empty() {
        errs.push(FieldError::required(
            "MR-1",
            spec_path.clone(),
            "either modelName or loraAdapters must be specified",
        ));
    }
    for (i, a) in adapters.iter().enumerate() {
        if a.is_empty() {
            errs.push(FieldError::invalid(
                "MR-2",
                spec_path.child("loraAdapters").index(i),
                "",
                "lora adapter name cannot be an empty string",
            ));
        }
    }
}

/// Regular expressions compile as Go's (MR-8, MR-9).
///
/// MR-8: each header's `regex` compiles; headers in name order (upstream walks a Go map).
///
/// Refused: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{modelMatch: {headers: {x-tenant: {regex: "a(b"}}}, targetModels: [{modelServerName: s}]}]}}`
///
/// Admitted: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{modelMatch: {headers: {x-tenant: {regex: "a(b)"}}}, targetModels: [{modelServerName: s}]}]}}`
///
/// MR-9: the URI's `regex` compiles (Go's syntax: no look-ahead).
///
/// Refused: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{modelMatch: {uri: {regex: "^/v1/(?=chat)"}}, targetModels: [{modelServerName: s}]}]}}`
///
/// Admitted: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{modelMatch: {uri: {regex: "^/v1/(chat|completions)"}}, targetModels: [{modelServerName: s}]}]}}`
fn mr_8_9_regexes(rule: &Rule, path: &Path, errs: &mut ErrorList) {
    let Some(m) = &rule.model_match else { return };
    let at = path.child("modelMatch");
    for (key, sm) in m.headers.iter().flatten() {
        if let Some(re) = sm.as_ref().and_then(|s| s.regex.as_ref())
            && let Some(why) = compile_error(re)
        {
            let p = at.child("headers").key(key).child("regex");
            errs.push(FieldError::invalid("MR-8", p, re.as_str(), why));
        }
    }
    if let Some(re) = m.uri.as_ref().and_then(|u| u.regex.as_ref())
        && let Some(why) = compile_error(re)
    {
        let p = at.child("uri").child("regex");
        errs.push(FieldError::invalid("MR-9", p, re.as_str(), why));
    }
}

/// MR-3..MR-9 for each rule: not null, has targets, each target names a server (and is not null:
/// FIX F-2), weights (absent = 100) add up, as uint32 with wrap-around, to more than zero; then
/// the regexes.
///
/// MR-3: a routing rule is not null.
///
/// Refused: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [null]}}`
///
/// Admitted: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{targetModels: [{modelServerName: s, weight: 50}]}]}}`
///
/// MR-4: a routing rule has target models.
///
/// Refused: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{targetModels: []}]}}`
///
/// Admitted: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{targetModels: [{modelServerName: s, weight: 50}]}]}}`
///
/// MR-5: each target names a model server.
///
/// Refused: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{targetModels: [{weight: 50}]}]}}`
///
/// Admitted: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{targetModels: [{modelServerName: s, weight: 50}]}]}}`
///
/// MR-6: a target is not null.
///
/// Refused: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{targetModels: [null]}]}}`
///
/// Admitted: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{targetModels: [{modelServerName: s, weight: 50}]}]}}`
///
/// MR-7: the targets' weights (absent = 100) add up, as a wrapping uint32, to more than zero.
///
/// Refused: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{targetModels: [{modelServerName: s, weight: 0}]}]}}`
///
/// Admitted: `{apiVersion: networking.serving.volcano.sh/v1alpha1, kind: ModelRoute, metadata: {name: r}, spec: {modelName: m, rules: [{targetModels: [{modelServerName: s, weight: 50}]}]}}`
fn mr_3_9_rules(spec: &ModelRouteSpec, errs: &mut ErrorList) {
    let rules = Path::new("spec").child("rules");
    for (i, rule) in spec.rules.iter().enumerate() {
        let Some(rule) = rule else {
            errs.push(FieldError::invalid(
                "MR-3",
                rules.index(i),
                null(),
                "rule must not be nil",
            ));
            continue;
        };
        let path = rules.index(i);
        let targets = path.child("targetModels");
        if rule.target_models.is_empty() {
            errs.push(FieldError::required(
                "MR-4",
                targets,
                "each rule must have at least one target model",
            ));
            continue;
        }
        let mut total = 0u32;
        for (j, t) in rule.target_models.iter().enumerate() {
            let Some(t) = t else {
                errs.push(FieldError::invalid(
                    "MR-6",
                    targets.index(j),
                    null(),
                    "target model must not be nil",
                ));
                continue;
            };
            if t.model_server_name.is_empty() {
                errs.push(FieldError::invalid(
                    "MR-5",
                    targets.index(j).child("modelServerName"),
                    "",
                    "modelServerName cannot be an empty string",
                ));
            }
            total = total.wrapping_add(t.weight.unwrap_or(100));
        }
        if total == 0 {
            errs.push(FieldError::invalid(
                "MR-7",
                targets,
                0i64,
                "total weight must be greater than zero",
            ));
        }
        mr_8_9_regexes(rule, &path, errs);
    }
}

/// Every ModelRoute rule, in upstream's order.
pub fn validate_route(spec: &ModelRouteSpec) -> ErrorList {
    let mut errs = ErrorList::new();
    mr_1_2_names(spec, &mut errs);
    mr_3_9_rules(spec, &mut errs);
    errs
}

/// `/validate/modelroute`.
pub struct RouteValidator;

impl Validator for RouteValidator {
    type Object = RouteObj;

    fn reads_old_object(&self) -> bool {
        false
    }

    fn validate(&self, req: &Request<RouteObj>, _: &Context) -> Verdict {
        validate_route(&req.object.spec).into()
    }

    fn denial(&self, _: &Request<RouteObj>, errors: &[FieldError]) -> Status {
        router_denial(errors)
    }
}

/// `/validate/modelserver`: upstream decodes the object and admits it.
pub struct ServerValidator;

impl Validator for ServerValidator {
    type Object = ServerObj;

    fn reads_old_object(&self) -> bool {
        false
    }

    fn validate(&self, _: &Request<ServerObj>, _: &Context) -> Verdict {
        Verdict::default()
    }
}
