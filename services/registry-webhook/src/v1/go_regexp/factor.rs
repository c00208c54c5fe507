//! Go's factoring of an alternation's branches, which changes the tree Go's limits measure
//! (`ab|ac` becomes `a(?:b|c)`, `a|b` becomes `[ab]`): the same four rounds, with the same
//! nodes allocated and freed in the same order, so that Go's counts and remembered sizes are
//! reproduced. The rounds recurse into the branches they group, as Go's do.

use super::{Fault, Flags, Op, Parser};

impl Parser<'_> {
    /// An alternation's branches after Go's four rounds; Go's limits checked on every branch
    /// they change.
    pub(super) fn factor(&mut self, mut sub: Vec<usize>) -> Result<Vec<usize>, Fault> {
        if sub.len() < 2 {
            return Ok(sub);
        }
        sub = self.factor_strings(sub)?;
        sub = self.factor_leading(sub)?;
        sub = self.merge_classes(sub);
        // Round 4: runs of empty matches become one.
        let mut out = Vec::with_capacity(sub.len());
        for (k, &s) in sub.iter().enumerate() {
            let empty = |id: usize| self.nodes[id].op == Op::EmptyMatch;
            if sub.get(k + 1).is_some_and(|&next| empty(s) && empty(next)) {
                continue;
            }
            out.push(s);
        }
        Ok(out)
    }

    /// Round 1: branches starting with the same literal runes (and case folding) share them.
    fn factor_strings(&mut self, mut sub: Vec<usize>) -> Result<Vec<usize>, Fault> {
        let mut out = Vec::with_capacity(sub.len());
        let mut start = 0;
        // The common runes: the first `len` of a literal node's, with its folding.
        let mut common: Option<(usize, usize, bool)> = None;
        for i in 0..=sub.len() {
            let next = sub.get(i).and_then(|&s| self.leading_string(s));
            if let (Some((lit, len, fold)), Some((ilit, ifold))) = (common, next)
                && fold == ifold
            {
                let same = self.nodes[lit].runes[..len]
                    .iter()
                    .zip(&self.nodes[ilit].runes)
                    .take_while(|(a, b)| a == b)
                    .count();
                if same > 0 {
                    common = Some((lit, same, fold));
                    continue;
                }
            }
            if i > start + 1
                && let Some((lit, len, fold)) = common
            {
                let prefix = self.allocate(Op::Literal);
                let runes = self.nodes[lit].runes[..len].to_vec();
                let node = &mut self.nodes[prefix];
                node.runes = runes;
                node.flags = Flags::default().set(Flags::FOLD_CASE, fold);
                for s in &mut sub[start..i] {
                    *s = self.remove_leading_string(*s, len);
                    self.check_limits(*s)?;
                }
                out.push(self.after_prefix(prefix, sub[start..i].to_vec())?);
            } else if i == start + 1 {
                out.push(sub[start]);
            }
            start = i;
            common = next.map(|(ilit, ifold)| (ilit, self.nodes[ilit].runes.len(), ifold));
        }
        Ok(out)
    }

    /// `prefix` followed by the alternation of `branches` (which no longer start with it).
    fn after_prefix(&mut self, prefix: usize, branches: Vec<usize>) -> Result<usize, Fault> {
        let suffix = self.collapse(branches, Op::Alternate)?;
        let re = self.allocate(Op::Concat);
        self.nodes[re].subs.extend([prefix, suffix]);
        Ok(re)
    }

    /// The literal a branch starts with (itself, or a concatenation's first), and its folding.
    fn leading_string(&self, id: usize) -> Option<(usize, bool)> {
        let node = &self.nodes[id];
        let lead = match node.subs.first() {
            Some(&first) if node.op == Op::Concat => first,
            _ => id,
        };
        let lead_node = &self.nodes[lead];
        (lead_node.op == Op::Literal).then_some((lead, lead_node.flags.fold()))
    }

    /// `id` without its first `n` runes; what replaces it.
    fn remove_leading_string(&mut self, id: usize, n: usize) -> usize {
        let node = &self.nodes[id];
        if node.op == Op::Concat && !node.subs.is_empty() {
            let first = self.remove_leading_string(node.subs[0], n);
            self.nodes[id].subs[0] = first;
            if self.nodes[first].op == Op::EmptyMatch {
                self.release(first);
                match self.nodes[id].subs.len() {
                    0 | 1 => {
                        self.nodes[id].op = Op::EmptyMatch;
                        self.nodes[id].subs.clear();
                    }
                    2 => {
                        let rest = self.nodes[id].subs[1];
                        self.release(id);
                        return rest;
                    }
                    _ => {
                        self.nodes[id].subs.remove(0);
                    }
                }
            }
            return id;
        }
        if node.op == Op::Literal {
            let node = &mut self.nodes[id];
            node.runes.drain(..n.min(node.runes.len()));
            if node.runes.is_empty() {
                node.op = Op::EmptyMatch;
            }
        }
        id
    }

    /// Round 2: branches starting with the same one-character piece (or a fixed repeat of
    /// one) share it.
    fn factor_leading(&mut self, mut sub: Vec<usize>) -> Result<Vec<usize>, Fault> {
        let mut out = Vec::with_capacity(sub.len());
        let mut start = 0;
        let mut first: Option<usize> = None;
        for i in 0..=sub.len() {
            let next = sub.get(i).and_then(|&s| self.leading_regexp(s));
            if let (Some(f), Some(n)) = (first, next)
                && self.is_fixed_char(f)
                && self.equal(f, n)
            {
                continue;
            }
            if i > start + 1
                && let Some(prefix) = first
            {
                for (k, s) in sub[start..i].iter_mut().enumerate() {
                    *s = self.remove_leading_regexp(*s, k != 0);
                    self.check_limits(*s)?;
                }
                out.push(self.after_prefix(prefix, sub[start..i].to_vec())?);
            } else if i == start + 1 {
                out.push(sub[start]);
            }
            start = i;
            first = next;
        }
        Ok(out)
    }

    /// The piece a branch starts with: a concatenation's first, or the branch itself; none for
    /// an empty match.
    fn leading_regexp(&self, id: usize) -> Option<usize> {
        let node = &self.nodes[id];
        if node.op == Op::EmptyMatch {
            return None;
        }
        match node.subs.first() {
            Some(&first) if node.op == Op::Concat => {
                (self.nodes[first].op != Op::EmptyMatch).then_some(first)
            }
            _ => Some(id),
        }
    }

    /// `id` without its leading piece, which is freed when `free`.
    fn remove_leading_regexp(&mut self, id: usize, free: bool) -> usize {
        if self.nodes[id].op == Op::Concat && !self.nodes[id].subs.is_empty() {
            if free {
                self.release(self.nodes[id].subs[0]);
            }
            self.nodes[id].subs.remove(0);
            match self.nodes[id].subs.len() {
                0 => self.nodes[id].op = Op::EmptyMatch,
                1 => {
                    let rest = self.nodes[id].subs[0];
                    self.release(id);
                    return rest;
                }
                _ => {}
            }
            return id;
        }
        if free {
            self.release(id);
        }
        self.allocate(Op::EmptyMatch)
    }

    /// One character, or a repeat of one a fixed number of times.
    fn is_fixed_char(&self, id: usize) -> bool {
        let node = &self.nodes[id];
        self.is_char_class(id)
            || (node.op == Op::Repeat
                && node.min == node.max
                && node.subs.first().is_some_and(|&s| self.is_char_class(s)))
    }

    /// Go's structural equality, for the pieces round 2 compares.
    fn equal(&self, a: usize, b: usize) -> bool {
        let (x, y) = (&self.nodes[a], &self.nodes[b]);
        if x.op != y.op {
            return false;
        }
        match x.op {
            Op::Literal | Op::CharClass => x.flags.fold() == y.flags.fold() && x.runes == y.runes,
            Op::Repeat => {
                x.flags.has(Flags::NON_GREEDY) == y.flags.has(Flags::NON_GREEDY)
                    && x.min == y.min
                    && x.max == y.max
                    && match (x.subs.first(), y.subs.first()) {
                        (Some(&s), Some(&t)) => self.is_char_class(s) && self.equal(s, t),
                        _ => false,
                    }
            }
            _ => true,
        }
    }

    /// Round 3: runs of one-character branches become one class.
    fn merge_classes(&mut self, mut sub: Vec<usize>) -> Vec<usize> {
        let mut out = Vec::with_capacity(sub.len());
        let mut start = 0;
        for i in 0..=sub.len() {
            if i < sub.len() && self.is_char_class(sub[i]) {
                continue;
            }
            if i > start + 1 {
                // The most complex first: later kinds, then more runes.
                let mut max = start;
                for j in start + 1..i {
                    let (m, n) = (&self.nodes[sub[max]], &self.nodes[sub[j]]);
                    if m.op < n.op || (m.op == n.op && m.runes.len() < n.runes.len()) {
                        max = j;
                    }
                }
                sub.swap(start, max);
                for j in start + 1..i {
                    self.merge_char_class(sub[start], sub[j]);
                    self.release(sub[j]);
                }
                self.clean_alt(sub[start]);
                out.push(sub[start]);
            } else if i == start + 1 {
                out.push(sub[start]);
            }
            if i < sub.len() {
                out.push(sub[i]);
            }
            start = i + 1;
        }
        out
    }
}
