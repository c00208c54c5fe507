//! What every RPC must carry before the ledger looks at it: Kubernetes names where names are
//! expected, bounded counts and lengths, objects bounded in size and depth. A call that fails is
//! answered INVALID_ARGUMENT with the reason. Hand-written: these are Kubernetes' own small
//! grammars (DNS-1123 labels and subdomains, label values, qualified names), and no maintained
//! crate offers them without pulling in a client library.

use quota_protocol::proto::{
    AdmitPodRequest, CheckWorkloadRequest, LookupRequest, ReleaseRequest, ValidateQuotaRequest,
};

/// Resources per AdmitPod request.
pub const MAX_RESOURCES: usize = 64;
/// Names per Lookup request.
pub const MAX_NAMES: usize = 64;
/// Bytes of each ElasticQuota JSON in ValidateQuota.
pub const MAX_OBJECT_BYTES: usize = 1 << 20;
/// Nesting of each ElasticQuota JSON in ValidateQuota.
pub const MAX_DEPTH: usize = 64;

fn alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// A DNS-1123 label: namespaces.
fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter().all(|&c| alnum(c) || c == b'-')
}

/// A DNS-1123 subdomain: pod and quota names.
fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label)
}

/// A label value: quota labels ("" allowed).
fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')))
}

/// A resource name: a qualified name (`[prefix/]name`, prefix a subdomain).
fn is_resource_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    prefix.is_none_or(is_subdomain) && name.len() <= 63 && is_label_value(name) && !name.is_empty()
}

fn check(ok: bool, what: &str, value: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        let shown: String = value.chars().take(80).collect();
        Err(format!("{what} {shown:?} is not valid"))
    }
}

/// AdmitPod: namespace a label, name empty or a subdomain, quota labels label values, at most
/// [`MAX_RESOURCES`] resources with qualified names. Amounts are the ledger's to judge.
pub fn admit_pod(r: &AdmitPodRequest) -> Result<(), String> {
    check(is_label(&r.namespace), "namespace", &r.namespace)?;
    check(
        r.name.is_empty() || is_subdomain(&r.name),
        "pod name",
        &r.name,
    )?;
    check(
        is_label_value(&r.quota_label),
        "quota label",
        &r.quota_label,
    )?;
    if let Some(old) = &r.old_quota_label {
        check(is_label_value(old), "old quota label", old)?;
    }
    if r.requests.len() > MAX_RESOURCES {
        return Err(format!(
            "{} resources requested, at most {MAX_RESOURCES} are accepted",
            r.requests.len()
        ));
    }
    for k in r.requests.keys() {
        check(is_resource_name(k), "resource name", k)?;
    }
    check_uid("review uid", &r.review_uid)?;
    check_uid("pod uid", &r.pod_uid)?;
    check(
        r.peer.is_empty() || r.peer.parse::<std::net::IpAddr>().is_ok(),
        "peer address",
        &r.peer,
    )?;
    if r.check_admission && !r.dry_run && r.name.is_empty() {
        return Err("a reservation needs the pod's name".into());
    }
    Ok(())
}

/// CheckWorkload: namespace a label, name a subdomain, quota label a label value, at most
/// [`MAX_RESOURCES`] resources with qualified names.
pub fn check_workload(r: &CheckWorkloadRequest) -> Result<(), String> {
    check(is_label(&r.namespace), "namespace", &r.namespace)?;
    check(is_subdomain(&r.name), "workload name", &r.name)?;
    check(
        is_label_value(&r.quota_label),
        "quota label",
        &r.quota_label,
    )?;
    for m in [&r.requests, &r.total] {
        if m.len() > MAX_RESOURCES {
            return Err(format!(
                "{} resources requested, at most {MAX_RESOURCES} are accepted",
                m.len()
            ));
        }
        for k in m.keys() {
            check(is_resource_name(k), "resource name", k)?;
        }
    }
    Ok(())
}

/// Pods per AdmitPods call.
pub const MAX_BATCH: usize = 64;

/// AdmitPods: at most [`MAX_BATCH`] pods (each is checked as [`admit_pod`] on its own).
pub fn admit_pods(pods: &[AdmitPodRequest]) -> Result<(), String> {
    if pods.len() > MAX_BATCH {
        return Err(format!(
            "{} pods in one AdmitPods call, at most {MAX_BATCH} are accepted",
            pods.len()
        ));
    }
    Ok(())
}

/// Release: a namespace and a pod name.
pub fn release(r: &ReleaseRequest) -> Result<(), String> {
    check(is_label(&r.namespace), "namespace", &r.namespace)?;
    check(is_subdomain(&r.name), "pod name", &r.name)?;
    check_uid("review uid", &r.review_uid)
}

/// A review uid: what the API server sends is a UUID (36 characters); anything up to 128
/// printable ASCII characters is taken, so that the key a reservation keeps stays small.
fn check_uid(what: &str, uid: &str) -> Result<(), String> {
    check(
        uid.len() <= 128 && uid.bytes().all(|b| b.is_ascii_graphic()),
        what,
        uid,
    )
}

/// Lookup: at most [`MAX_NAMES`] quota names, each a subdomain; namespace empty or a label.
pub fn lookup(r: &LookupRequest) -> Result<(), String> {
    if r.names.len() > MAX_NAMES {
        return Err(format!(
            "{} names asked, at most {MAX_NAMES} are accepted",
            r.names.len()
        ));
    }
    for n in &r.names {
        check(is_subdomain(n), "quota name", n)?;
    }
    check(
        r.namespace.is_empty() || is_label(&r.namespace),
        "namespace",
        &r.namespace,
    )
}

/// The deepest nesting of arrays and objects in `json` (strings skipped).
fn depth(json: &[u8]) -> usize {
    let (mut d, mut max, mut in_str, mut esc) = (0usize, 0usize, false, false);
    for &c in json {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'{' | b'[' => {
                d += 1;
                max = max.max(d);
            }
            b'}' | b']' => d = d.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// ValidateQuota: each object at most [`MAX_OBJECT_BYTES`] and [`MAX_DEPTH`] deep.
pub fn validate_quota(r: &ValidateQuotaRequest) -> Result<(), String> {
    for (what, o) in [("object", &r.object), ("old_object", &r.old_object)] {
        if o.len() > MAX_OBJECT_BYTES {
            return Err(format!(
                "{what} is {} bytes, at most {MAX_OBJECT_BYTES} are accepted",
                o.len()
            ));
        }
        let d = depth(o);
        if d > MAX_DEPTH {
            return Err(format!(
                "{what} is nested {d} deep, at most {MAX_DEPTH} is accepted"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use quota_protocol::proto::Amount;

    fn pod(ns: &str, name: &str) -> AdmitPodRequest {
        AdmitPodRequest {
            namespace: ns.into(),
            name: name.into(),
            check_admission: true,
            ..AdmitPodRequest::default()
        }
    }

    #[test]
    fn names_are_kubernetes_names() {
        assert!(admit_pod(&pod("team-a", "web-0.x")).is_ok());
        for (ns, name) in [
            ("", "p"),
            ("Team", "p"),
            ("team-", "p"),
            ("a".repeat(64).as_str(), "p"),
            ("ns", "../etc"),
            ("ns", "p q"),
            ("ns", ""),
        ] {
            assert!(admit_pod(&pod(ns, name)).is_err(), "{ns:?} {name:?}");
        }
        let mut r = pod("ns", "p");
        r.quota_label = "team_a.x".into();
        assert!(admit_pod(&r).is_ok());
        r.quota_label = "-bad".into();
        assert_eq!(
            admit_pod(&r).unwrap_err(),
            "quota label \"-bad\" is not valid"
        );
    }

    #[test]
    fn counts_and_lengths_are_bounded() {
        let mut r = pod("ns", "p");
        r.requests = (0..=MAX_RESOURCES)
            .map(|i| (format!("example.com/r{i}"), Amount::default()))
            .collect();
        assert!(admit_pod(&r).unwrap_err().contains("at most 64"));
        r.requests = [("nvidia.com/gpu".to_owned(), Amount::default())].into();
        assert!(admit_pod(&r).is_ok());
        r.requests = [("x".repeat(300), Amount::default())].into();
        assert!(admit_pod(&r).is_err());
        let l = LookupRequest {
            names: vec!["q".into(); MAX_NAMES + 1],
            namespace: String::new(),
        };
        assert!(lookup(&l).is_err());
        let v = ValidateQuotaRequest {
            object: format!("{}1{}", "[".repeat(65), "]".repeat(65)).into_bytes(),
            ..ValidateQuotaRequest::default()
        };
        assert_eq!(
            validate_quota(&v).unwrap_err(),
            "object is nested 65 deep, at most 64 is accepted"
        );
        let v = ValidateQuotaRequest {
            object:
                br#"{"a":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"["}"#
                    .to_vec(),
            ..ValidateQuotaRequest::default()
        };
        assert!(validate_quota(&v).is_ok(), "brackets inside strings");
        let v = ValidateQuotaRequest {
            old_object: vec![b' '; MAX_OBJECT_BYTES + 1],
            ..ValidateQuotaRequest::default()
        };
        assert!(validate_quota(&v).unwrap_err().starts_with("old_object is"));
    }
}
