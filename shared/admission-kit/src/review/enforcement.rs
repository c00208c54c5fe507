//! Enforcement modes: what an endpoint does with its own decision. A team that runs an
//! upstream's webhook today installs ours beside it in `audit` (or `warn`), reads where the two
//! would disagree on real traffic, and switches to `enforce` when the numbers say so — as
//! Gatekeeper's `enforcementAction: dryrun|warn` and Kyverno's `Audit` do for policies.
//!
//! The mode is applied to a finished [`Answer`], after every rule ran: the rules, the diff and
//! the decision record are the same in every mode; only what the API server is told changes.

use std::collections::BTreeMap;

use base64::Engine as _;

use crate::review::handler::{Answer, Decision};
use crate::review::mode::Enforcement;

impl Enforcement {
    /// Turns `answer` into what this mode sends, recording on its [`Decision`] what the rules
    /// concluded (`enforcement`, `withheld_patch`).
    pub fn apply(self, answer: &mut Answer) {
        answer.decision.enforcement = self;
        if self == Self::Enforce {
            return;
        }
        let response = &mut answer.review.response;
        let would_deny = !response.allowed;
        response.allowed = true;
        response.status = None;
        match self {
            Self::Enforce => {}
            Self::Warn => {
                if would_deny {
                    response.warnings.extend(warnings(&answer.decision));
                }
            }
            Self::Audit => {
                if let Some(patch) = response.patch.take() {
                    answer.decision.withheld_patch = Some(patch_text(&patch));
                    answer.decision.patched = false;
                }
                response.patch_type = None;
                response.warnings.clear();
                response.audit_annotations = BTreeMap::new();
            }
        }
        // What was sent: an admission. The would-be denials stay in `decision.denials`.
        answer.decision.allowed = true;
        answer.decision.would_deny = would_deny;
    }
}

/// One warning per would-be denial: `would be denied (MV-19): spec.x: must be …`.
fn warnings(d: &Decision) -> impl Iterator<Item = String> + '_ {
    d.denials.iter().map(|x| {
        if x.field.is_empty() {
            format!("would be denied ({}): {}", x.rule, x.message)
        } else {
            format!("would be denied ({}): {}: {}", x.rule, x.field, x.message)
        }
    })
}

/// A response's patch (base64 of a JSON Patch) as its JSON text for the log; the base64 itself
/// when it is not.
fn patch_text(b64: &str) -> String {
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_else(|| b64.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::envelope::{Response, ReviewOut, Status};
    use crate::review::handler::Denial;

    fn answer(allowed: bool, patch: Option<&str>) -> Answer {
        Answer {
            review: ReviewOut::new(
                "",
                Response {
                    uid: "u1".into(),
                    allowed,
                    status: (!allowed).then(|| Status::failure(422, "Invalid", "no")),
                    patch: patch
                        .map(|p| base64::engine::general_purpose::STANDARD.encode(p.as_bytes())),
                    patch_type: patch.map(|_| "JSONPatch".into()),
                    warnings: vec!["upstream warning".into()],
                    audit_annotations: BTreeMap::from([("a".into(), "b".into())]),
                },
            ),
            decision: Decision {
                allowed,
                patched: patch.is_some(),
                denials: if allowed {
                    Vec::new()
                } else {
                    vec![
                        Denial {
                            rule: "MV-19",
                            field: "spec.replicas".into(),
                            message: "must be positive".into(),
                        },
                        Denial {
                            rule: "PB-6",
                            field: String::new(),
                            message: "refused".into(),
                        },
                    ]
                },
                ..Decision::default()
            },
        }
    }

    #[test]
    fn enforce_sends_the_answer_as_the_rules_made_it() {
        for allowed in [true, false] {
            let mut a = answer(allowed, None);
            let before = a.review.to_bytes();
            Enforcement::Enforce.apply(&mut a);
            assert_eq!(a.review.to_bytes(), before);
            assert_eq!(a.decision.allowed, allowed);
            assert!(!a.decision.would_deny);
        }
    }

    #[test]
    fn warn_admits_and_returns_each_denial_as_a_warning() {
        let mut a = answer(false, None);
        Enforcement::Warn.apply(&mut a);
        let r = &a.review.response;
        assert!(r.allowed);
        assert!(r.status.is_none());
        assert_eq!(
            r.warnings,
            [
                "upstream warning",
                "would be denied (MV-19): spec.replicas: must be positive",
                "would be denied (PB-6): refused",
            ]
        );
        assert!(a.decision.allowed && a.decision.would_deny);
        assert_eq!(a.decision.enforcement, Enforcement::Warn);
        assert_eq!(a.decision.denials.len(), 2, "the would-be denials are kept");
    }

    #[test]
    fn warn_keeps_a_patch() {
        let mut a = answer(true, Some(r#"[{"op":"add","path":"/x","value":1}]"#));
        let before = a.review.to_bytes();
        Enforcement::Warn.apply(&mut a);
        assert_eq!(a.review.to_bytes(), before);
        assert!(!a.decision.would_deny);
    }

    #[test]
    fn audit_admits_silently_and_withholds_the_patch() {
        let patch = r#"[{"op":"add","path":"/x","value":1}]"#;
        let mut a = answer(true, Some(patch));
        Enforcement::Audit.apply(&mut a);
        let r = &a.review.response;
        assert!(r.allowed && r.patch.is_none() && r.patch_type.is_none());
        assert!(r.warnings.is_empty() && r.audit_annotations.is_empty());
        assert_eq!(a.decision.withheld_patch.as_deref(), Some(patch));
        assert!(!a.decision.patched, "nothing was sent");

        let mut a = answer(false, None);
        Enforcement::Audit.apply(&mut a);
        let r = &a.review.response;
        assert!(r.allowed && r.status.is_none() && r.warnings.is_empty());
        assert!(a.decision.would_deny);
        assert_eq!(a.decision.rules().to_string(), "MV-19,PB-6");
    }
}
