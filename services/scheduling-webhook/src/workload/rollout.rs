//! How a Deployment's rolling update uses its quota: the part of WQ-7 that reads the object
//! alone (whether an update starts a rollout, and what the strategy lets it do with a full
//! quota). The quota question itself is asked by `decide`.

use serde_json::Value;

/// A rollout that lets no old Pod go before a new one runs: its first new Pod needs room in the
/// quota, or it waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoRoomToStart {
    /// `spec.replicas`.
    pub replicas: i64,
    /// `maxSurge` as written (`25%`, `1`) and resolved against `replicas` (rounded up).
    pub max_surge: (String, i64),
    /// `maxUnavailable` as written and resolved (rounded down): 0 here.
    pub max_unavailable: String,
}

/// `value` (an int or a percentage) of `total`, rounded up or down as the Deployment
/// controller rounds it; `None` for what the API server's validation refuses anyway.
fn scaled(value: &Value, total: i64, round_up: bool) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            let product = pct.checked_mul(total)?;
            Some(if round_up {
                (product + 99).div_euclid(100)
            } else {
                product.div_euclid(100)
            })
        }
        _ => None,
    }
}

/// The text of an int-or-percentage as the user wrote it.
fn written(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// WQ-7: an UPDATE of an apps/v1 Deployment that changes its Pod template starts a rolling
/// update; when its strategy is `RollingUpdate` and `maxUnavailable` resolves to 0 against
/// `spec.replicas` (rounded down, as the Deployment controller does: `25%` of 3 is 0), no old
/// Pod goes before a new one runs, so the rollout can start only if the quota has room for one
/// new Pod now. This returns such a rollout (the quota question is `decide`'s); `None` for a
/// create, an update that keeps the template, a paused Deployment, `Recreate`, or an
/// unavailability of 1 or more (old Pods go first and make the room). Where both resolve to 0
/// the controller lets one Pod be unavailable, and so does this.
pub fn wq_7_rollout_without_room(object: &Value, old: Option<&Value>) -> Option<NoRoomToStart> {
    let old = old?;
    let spec = object.get("spec")?;
    if object.pointer("/spec/template") == old.pointer("/spec/template")
        || spec.get("paused").and_then(Value::as_bool) == Some(true)
    {
        return None;
    }
    let strategy = spec.get("strategy");
    let kind = strategy
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("RollingUpdate");
    if kind != "RollingUpdate" {
        return None;
    }
    let default = Value::String("25%".to_owned());
    let rolling = strategy.and_then(|s| s.get("rollingUpdate"));
    let surge = rolling.and_then(|r| r.get("maxSurge")).unwrap_or(&default);
    let unavailable = rolling
        .and_then(|r| r.get("maxUnavailable"))
        .unwrap_or(&default);
    let replicas = spec.get("replicas").and_then(Value::as_i64).unwrap_or(1);
    let resolved_surge = scaled(surge, replicas, true)?;
    let resolved_unavailable = scaled(unavailable, replicas, false)?;
    if resolved_unavailable > 0 || resolved_surge == 0 || replicas == 0 {
        return None;
    }
    Some(NoRoomToStart {
        replicas,
        max_surge: (written(surge), resolved_surge),
        max_unavailable: written(unavailable),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(replicas: i64, image: &str, strategy: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": replicas, "strategy": strategy,
                        "template": {"spec": {"containers": [{"name": "c", "image": image}]}}}})
    }

    fn defaults() -> Value {
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    }

    #[test]
    fn wq_7_three_replicas_with_the_defaults_let_no_old_pod_go_first() {
        let r = wq_7_rollout_without_room(
            &deployment(3, "app:2", defaults()),
            Some(&deployment(3, "app:1", defaults())),
        );
        assert_eq!(
            r,
            Some(NoRoomToStart {
                replicas: 3,
                max_surge: ("25%".into(), 1),
                max_unavailable: "25%".into(),
            })
        );
    }

    #[test]
    fn wq_7_four_replicas_with_the_defaults_make_room_first() {
        let r = wq_7_rollout_without_room(
            &deployment(4, "app:2", defaults()),
            Some(&deployment(4, "app:1", defaults())),
        );
        assert_eq!(r, None, "25% of 4 is 1: an old Pod goes first");
    }

    #[test]
    fn wq_7_only_a_template_change_of_a_rolling_deployment_counts() {
        let s = defaults();
        let same = wq_7_rollout_without_room(
            &deployment(3, "app:1", s.clone()),
            Some(&deployment(2, "app:1", s.clone())),
        );
        assert_eq!(same, None, "a scale is no rollout");
        let created = wq_7_rollout_without_room(&deployment(3, "app:2", s), None);
        assert_eq!(created, None);
        let recreate = json!({"type": "Recreate"});
        let r = wq_7_rollout_without_room(
            &deployment(3, "app:2", recreate.clone()),
            Some(&deployment(3, "app:1", recreate)),
        );
        assert_eq!(r, None);
        let mut paused = deployment(3, "app:2", defaults());
        paused["spec"]["paused"] = json!(true);
        let r = wq_7_rollout_without_room(&paused, Some(&deployment(3, "app:1", defaults())));
        assert_eq!(r, None);
    }

    #[test]
    fn wq_7_integers_and_both_zero_resolve_as_the_controller_does() {
        let zero =
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 0}});
        let r = wq_7_rollout_without_room(
            &deployment(10, "app:2", zero.clone()),
            Some(&deployment(10, "app:1", zero)),
        );
        assert_eq!(r.map(|r| r.max_surge), Some(("2".into(), 2)));
        // 0% and 0%: the controller lets one Pod be unavailable (the API server refuses 0 and 0
        // written as integers).
        let none = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "0%", "maxUnavailable": "0%"}});
        let r = wq_7_rollout_without_room(
            &deployment(3, "app:2", none.clone()),
            Some(&deployment(3, "app:1", none)),
        );
        assert_eq!(r, None);
    }
}
