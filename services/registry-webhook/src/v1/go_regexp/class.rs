//! Go's arithmetic on character classes: a class is a list of `lo, hi` rune pairs, appended to
//! as Go appends (merging with the last two pairs only) and cleaned (sorted and merged) where Go
//! cleans it. The exact list matters: Go counts its length against a limit, tells one-rune
//! classes by it, and factors alternations by comparing classes.

use super::tables::{GROUPS, NAMES, Name, RANGES, SIMPLE_FOLD};

/// The largest rune.
pub(super) const MAX_RUNE: u32 = 0x10_FFFF;
/// The lowest and highest runes that fold to another.
const MIN_FOLD: u32 = 0x41;
const MAX_FOLD: u32 = 0x1_E943;

/// Appends `lo..=hi`, widening the last or the one-before-last pair when it overlaps or abuts.
pub(super) fn append_range(r: &mut Vec<u32>, lo: u32, hi: u32) {
    let n = r.len();
    for i in [2, 4] {
        if n >= i {
            let (rlo, rhi) = (r[n - i], r[n - i + 1]);
            if lo <= rhi + 1 && rlo <= hi + 1 {
                r[n - i] = rlo.min(lo);
                r[n - i + 1] = rhi.max(hi);
                return;
            }
        }
    }
    r.extend([lo, hi]);
}

/// The next rune in `r`'s case-folding orbit (`r` itself when it has no other case).
pub(super) fn simple_fold(r: u32) -> u32 {
    SIMPLE_FOLD
        .binary_search_by_key(&r, |&(from, _)| from)
        .map_or(r, |k| SIMPLE_FOLD[k].1)
}

/// The smallest rune of `r`'s orbit: what a case-folded literal stores.
pub(super) fn min_fold_rune(r: u32) -> u32 {
    if !(MIN_FOLD..=MAX_FOLD).contains(&r) {
        return r;
    }
    let mut m = r;
    let mut f = simple_fold(r);
    while f != r {
        m = m.min(f);
        f = simple_fold(f);
    }
    m
}

/// Appends `lo..=hi` and every rune folding to one of them. For one rune the pairs come out as
/// Go's rune-by-rune walk makes them; a wider range is always cleaned afterwards (in a class
/// and in a group under `(?i)`), so only its set matters, and that is built from the folding
/// table rather than by visiting up to 125,000 runes.
pub(super) fn append_folded_range(r: &mut Vec<u32>, lo: u32, hi: u32) {
    append_range(r, lo, hi);
    let (from, to) = (lo.max(MIN_FOLD), hi.min(MAX_FOLD));
    if from > to {
        return;
    }
    let first = SIMPLE_FOLD.partition_point(|&(c, _)| c < from);
    for &(c, _) in SIMPLE_FOLD[first..].iter().take_while(|&&(c, _)| c <= to) {
        let mut f = simple_fold(c);
        while f != c {
            append_range(r, f, f);
            f = simple_fold(f);
        }
    }
}

/// Appends one rune, with its other cases when `fold`.
pub(super) fn append_literal(r: &mut Vec<u32>, x: u32, fold: bool) {
    if fold {
        append_folded_range(r, x, x);
    } else {
        append_range(r, x, x);
    }
}

pub(super) fn append_class(r: &mut Vec<u32>, x: &[u32]) {
    for p in x.chunks_exact(2) {
        append_range(r, p[0], p[1]);
    }
}

fn append_folded_class(r: &mut Vec<u32>, x: &[u32]) {
    for p in x.chunks_exact(2) {
        append_folded_range(r, p[0], p[1]);
    }
}

/// Appends every rune outside `x`, which is clean.
fn append_negated_class(r: &mut Vec<u32>, x: &[u32]) {
    let mut next = 0;
    for p in x.chunks_exact(2) {
        if next < p[0] {
            append_range(r, next, p[0] - 1);
        }
        next = p[1] + 1;
    }
    if next <= MAX_RUNE {
        append_range(r, next, MAX_RUNE);
    }
}

/// The runes of a table, one by one where it steps by more than one.
fn table_runs(table: &'static [(u32, u32, u32)]) -> impl Iterator<Item = (u32, u32)> {
    table.iter().flat_map(|&(lo, hi, stride)| {
        let step = if stride == 1 { hi - lo + 1 } else { stride };
        (lo..=hi)
            .step_by(step.max(1) as usize)
            .map(move |c| if stride == 1 { (lo, hi) } else { (c, c) })
    })
}

fn append_table(r: &mut Vec<u32>, table: &'static [(u32, u32, u32)]) {
    for (lo, hi) in table_runs(table) {
        append_range(r, lo, hi);
    }
}

fn append_negated_table(r: &mut Vec<u32>, table: &'static [(u32, u32, u32)]) {
    let mut next = 0;
    for (lo, hi) in table_runs(table) {
        if next < lo {
            append_range(r, next, lo - 1);
        }
        next = hi + 1;
    }
    if next <= MAX_RUNE {
        append_range(r, next, MAX_RUNE);
    }
}

/// Sorts the pairs (by low end, then high end descending) and merges overlapping and abutting
/// ones.
pub(super) fn clean(r: &mut Vec<u32>) {
    let (pairs, _) = r.as_chunks_mut::<2>();
    pairs.sort_unstable_by(|a, b| a[0].cmp(&b[0]).then(b[1].cmp(&a[1])));
    let mut w = 0;
    for k in 0..pairs.len() {
        let [lo, hi] = pairs[k];
        if w > 0 && lo <= pairs[w - 1][1] + 1 {
            pairs[w - 1][1] = pairs[w - 1][1].max(hi);
        } else {
            pairs[w] = [lo, hi];
            w += 1;
        }
    }
    r.truncate(2 * w);
}

/// The complement of a clean class.
pub(super) fn negate(r: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(r.len() + 2);
    append_negated_class(&mut out, r);
    out
}

/// Whether the class holds `c`.
pub(super) fn contains(r: &[u32], c: u32) -> bool {
    r.chunks_exact(2).any(|p| p[0] <= c && c <= p[1])
}

/// The entry Go finds for a name already in canonical form.
pub(super) fn unicode_name(canonical: &str) -> Option<&'static Name> {
    NAMES
        .binary_search_by(|n| n.name.cmp(canonical))
        .ok()
        .map(|k| &NAMES[k])
}

fn slice(range: (u16, u16)) -> &'static [(u32, u32, u32)] {
    &RANGES[usize::from(range.0)..usize::from(range.1)]
}

/// Appends a Unicode table; `positive` after the name's own inversion and the escape's sign.
pub(super) fn append_unicode(r: &mut Vec<u32>, name: &Name, positive: bool, fold: bool) {
    match name.fold.filter(|_| fold) {
        None if positive => append_table(r, slice(name.table)),
        None => append_negated_table(r, slice(name.table)),
        Some(extra) => {
            let mut tmp = Vec::new();
            append_table(&mut tmp, slice(name.table));
            append_table(&mut tmp, slice(extra));
            clean(&mut tmp);
            if positive {
                append_class(r, &tmp);
            } else {
                append_negated_class(r, &tmp);
            }
        }
    }
}

/// Appends a Perl (`\d`) or POSIX (`[:alpha:]`) group; `false` when Go knows no such group.
pub(super) fn append_group(r: &mut Vec<u32>, group: &str, fold: bool) -> bool {
    let Some(&(_, negated, class)) = GROUPS.iter().find(|g| g.0 == group) else {
        return false;
    };
    let folded;
    let class = if fold {
        let mut tmp = Vec::new();
        append_folded_class(&mut tmp, class);
        clean(&mut tmp);
        folded = tmp;
        &folded[..]
    } else {
        class
    };
    if negated {
        append_negated_class(r, class);
    } else {
        append_class(r, class);
    }
    true
}
