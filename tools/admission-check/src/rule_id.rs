// Shared by build.rs (`include!`) and `crate::rules`: what a rule id looks like.

/// A rule id: capitals, then dash-separated parts, the last a number, a letter and a number,
/// or one letter (`MV-03`, `NS-FIX-1`, `QV-C1`, `QV-S`); a sub-rule suffix such as `PV-3.2` is
/// not an id of its own.
pub fn is_rule_id(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() >= 2
        && (1..=5).contains(&parts[0].len())
        && parts[0].bytes().all(|b| b.is_ascii_uppercase())
        && parts[1..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_uppercase()))
        && parts.last().is_some_and(|n| {
            // A number, a letter and a number (`QV-C1`), or one letter (`QV-S`).
            let digits = n.trim_start_matches(|c: char| c.is_ascii_uppercase());
            (n.len() == 1 && n.bytes().all(|b| b.is_ascii_uppercase()))
                || (!digits.is_empty()
                    && n.len() - digits.len() <= 1
                    && digits.bytes().all(|b| b.is_ascii_digit()))
        })
}
