// Shared by build.rs (`include!`) and `crate::rules`: what a rule id looks like.

/// A rule id: capitals, then dash-separated parts, the last a number (`MV-03`, `NS-FIX-1`,
/// `PV-3`, `S-FIX-1`); a sub-rule suffix such as `PV-3.2` is not an id of its own.
pub fn is_rule_id(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() >= 2
        && (1..=5).contains(&parts[0].len())
        && parts[0].bytes().all(|b| b.is_ascii_uppercase())
        && parts[1..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_uppercase()))
        && parts
            .last()
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}
