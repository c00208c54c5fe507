//! Whether a pattern compiles as Go's `regexp.Compile` (RE2 syntax with Perl's extensions), and
//! Go's error text when it does not: ``error parsing regexp: <what>: `<fragment>` ``.
//!
//! A parser of Go's syntax written here, from Go's documented syntax and its observed answers
//! (`tests/data/go-regexp.jsonl`: every pattern there carries the answer of Go on this machine,
//! and the test command checks each one). No crate parses Go's dialect: `regex-syntax` reads
//! another one (`\<`, `[a--b]`, `\p{IsGreek}`, `(?<=`, repeat counts all differ), and a filter
//! in front of it cannot give Go's first error in Go's order.
//!
//! It reads left to right as Go does, so the first fault met is the one reported, and builds
//! the tree whose node count, height, program size and runes Go bounds (1,000 levels; 3,355,443
//! instructions; 1,000 copies through nested counted repeats; 2^25 runes): classes with their
//! runes as Go builds them (`class`, from Go's tables in `tables`), and alternations factored
//! as Go factors them before measuring (`factor`). Nothing else of a regular expression (what
//! it matches) is built.

mod class;
mod factor;
mod tables;

use std::collections::HashMap;
use std::fmt;

use tables::Name;

/// Go's error for `pattern`, or `None` when Go compiles it.
pub fn compile_error(pattern: &str) -> Option<String> {
    if pattern.len() <= LONG_PATTERN {
        return Parser::new(pattern).parse().err().map(|f| f.to_string());
    }
    // Go factors an alternation level by level, recursing once per shared prefix; a request
    // can carry a pattern deep enough (about 3,700 levels in 7 MB) to exhaust a worker's
    // stack, so a long pattern is parsed on a thread of its own with room for any of them.
    std::thread::scope(|scope| {
        let parse = || Parser::new(pattern).parse().err().map(|f| f.to_string());
        match std::thread::Builder::new()
            .name("go-regexp".into())
            .stack_size(LONG_PATTERN_STACK)
            .spawn_scoped(scope, parse)
        {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|_| Some("error parsing regexp: internal error".to_owned())),
            Err(_) => Some("error parsing regexp: no thread to parse a long pattern".to_owned()),
        }
    })
}

/// Patterns longer than this are parsed on a thread of their own. Factoring recurses at most
/// √(2 × length) levels (each level needs a branch one piece longer than the last): 256 at this
/// length, which a worker's stack holds.
const LONG_PATTERN: usize = 32 << 10;
/// That thread's stack: a level of factoring takes about 0.4 KiB in a release build (a few
/// times more unoptimised); the pages are only touched as used.
const LONG_PATTERN_STACK: usize = 64 << 20;

/// Go's limit on the height of the parsed tree.
const MAX_HEIGHT: u32 = 1000;
/// Go's limit on the compiled program: 128 MiB of 40-byte instructions.
const MAX_SIZE: i64 = (128 << 20) / 40;
/// Go's limit on the runes of all literals and classes, each counted every time it is pushed:
/// 128 MiB of 4-byte runes.
const MAX_RUNES: i64 = (128 << 20) / 4;
/// Go's limit on copies made by counted repeats, nested ones multiplied.
const MAX_COPIES: i64 = 1000;

/// One of Go's error kinds, as Go words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    CharRange,
    Escape,
    NamedCapture,
    PerlOp,
    NestedRepeat,
    RepeatCount,
    MissingBracket,
    MissingParen,
    MissingArgument,
    TrailingBackslash,
    UnexpectedParen,
    TooDeep,
    TooLarge,
}

impl Code {
    fn words(self) -> &'static str {
        match self {
            Code::CharRange => "invalid character class range",
            Code::Escape => "invalid escape sequence",
            Code::NamedCapture => "invalid named capture",
            Code::PerlOp => "invalid or unsupported Perl syntax",
            Code::NestedRepeat => "invalid nested repetition operator",
            Code::RepeatCount => "invalid repeat count",
            Code::MissingBracket => "missing closing ]",
            Code::MissingParen => "missing closing )",
            Code::MissingArgument => "missing argument to repetition operator",
            Code::TrailingBackslash => "trailing backslash at end of expression",
            Code::UnexpectedParen => "unexpected )",
            Code::TooDeep => "expression nests too deeply",
            Code::TooLarge => "expression too large",
        }
    }
}

/// The first fault Go meets, and the part of the pattern it quotes.
#[derive(Debug, PartialEq, Eq)]
struct Fault {
    code: Code,
    fragment: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error parsing regexp: {}: `{}`",
            self.code.words(),
            self.fragment
        )
    }
}

fn fault<T>(code: Code, fragment: &str) -> Result<T, Fault> {
    Err(Fault {
        code,
        fragment: fragment.to_owned(),
    })
}

/// Go's node kinds, in Go's order: merging two one-character alternatives keeps the later kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    NoMatch,
    EmptyMatch,
    Literal,
    CharClass,
    AnyCharNotNl,
    AnyChar,
    /// Anchors and word boundaries: nothing Go merges or measures tells them apart.
    Anchor,
    Capture,
    Star,
    Plus,
    Quest,
    Repeat,
    Concat,
    Alternate,
    /// `(` while its group is read.
    LeftParen,
    /// `|` while its alternation is read.
    VerticalBar,
}

impl Op {
    fn is_marker(self) -> bool {
        self >= Op::LeftParen
    }
}

/// Go's parse flags, with Go's bit values: nodes compare them whole when Go does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Flags(u16);

impl Flags {
    const FOLD_CASE: u16 = 1;
    const DOT_NL: u16 = 8;
    const ONE_LINE: u16 = 16;
    const NON_GREEDY: u16 = 32;
    /// What `regexp.Compile` parses with: ClassNL, OneLine, PerlX and UnicodeGroups.
    const PERL: Flags = Flags(4 | 16 | 64 | 128);

    fn has(self, bit: u16) -> bool {
        self.0 & bit != 0
    }

    fn set(self, bit: u16, on: bool) -> Self {
        Flags(if on { self.0 | bit } else { self.0 & !bit })
    }

    fn fold(self) -> bool {
        self.has(Self::FOLD_CASE)
    }
}

#[derive(Debug)]
struct Node {
    op: Op,
    flags: Flags,
    /// A literal's runes, or a class's `lo, hi` pairs.
    runes: Vec<u32>,
    min: i64,
    max: i64,
    /// Whether a `(` captures.
    capture: bool,
    subs: Vec<usize>,
    /// Go keeps each node's size, once its size tracking has started, in a map it never
    /// clears: a node freed and allocated again keeps its old size until it is measured afresh,
    /// and a literal run that grows is not measured again. So does this. Heights are forgotten
    /// when a node is freed, as Go forgets them.
    size: Option<i64>,
    height: Option<u32>,
}

/// Go's parse, left to right over a stack of nodes and markers.
struct Parser<'a> {
    whole: &'a str,
    nodes: Vec<Node>,
    stack: Vec<usize>,
    flags: Flags,
    /// Nodes Go has allocated (its limits start counting past a number of them), and the
    /// freed ones it allocates from first.
    allocated: i64,
    free: Vec<usize>,
    /// Runes pushed in literals and classes, counted again each time a node is pushed.
    runes: i64,
    /// The product of the counts of the repeats met before size tracking started.
    repeats: i64,
    /// Unicode tables as appended to an empty class, by name, sign and case folding.
    tables: HashMap<(&'static str, bool, bool), Vec<u32>>,
    sizing: bool,
    measuring_height: bool,
}

impl<'a> Parser<'a> {
    fn new(whole: &'a str) -> Self {
        Self {
            whole,
            nodes: Vec::new(),
            stack: Vec::new(),
            flags: Flags::PERL,
            allocated: 0,
            free: Vec::new(),
            runes: 0,
            repeats: 1,
            tables: HashMap::new(),
            sizing: false,
            measuring_height: false,
        }
    }

    fn parse(&mut self) -> Result<(), Fault> {
        let whole = self.whole;
        let b = whole.as_bytes();
        let mut i = 0;
        // Where the previous step's repeat operator started, if it was one.
        let mut last_repeat: Option<usize> = None;
        while i < b.len() {
            let mut repeat_at = None;
            match b[i] {
                b'(' if b.get(i + 1) == Some(&b'?') => i = self.group_or_flags(i)?,
                b'(' => {
                    self.left_paren(true)?;
                    i += 1;
                }
                b'|' => {
                    self.vertical_bar()?;
                    i += 1;
                }
                b')' => {
                    self.right_paren()?;
                    i += 1;
                }
                b'^' | b'$' => {
                    self.op(Op::Anchor)?;
                    i += 1;
                }
                b'.' => {
                    let op = if self.flags.has(Flags::DOT_NL) {
                        Op::AnyChar
                    } else {
                        Op::AnyCharNotNl
                    };
                    self.op(op)?;
                    i += 1;
                }
                b'[' => i = self.class(i)?,
                op @ (b'*' | b'+' | b'?') => {
                    let op = match op {
                        b'*' => Op::Star,
                        b'+' => Op::Plus,
                        _ => Op::Quest,
                    };
                    let start = i;
                    i = self.repeat(op, (0, 0), i, i + 1, last_repeat)?;
                    repeat_at = Some(start);
                }
                b'{' => match counts(whole, i) {
                    None => {
                        self.literal(u32::from('{'))?;
                        i += 1;
                    }
                    Some((min, max, after)) => {
                        if !(0..=MAX_COPIES).contains(&min)
                            || max > MAX_COPIES
                            || (max >= 0 && min > max)
                        {
                            return fault(Code::RepeatCount, &whole[i..after]);
                        }
                        let start = i;
                        i = self.repeat(Op::Repeat, (min, max), i, after, last_repeat)?;
                        repeat_at = Some(start);
                    }
                },
                b'\\' => i = self.backslash(i)?,
                _ => {
                    let c = char_at(whole, i);
                    self.literal(u32::from(c))?;
                    i += c.len_utf8();
                }
            }
            last_repeat = repeat_at;
        }
        self.concat()?;
        if self.swap_vertical_bar() {
            self.stack.pop();
        }
        self.alternate()?;
        if self.stack.len() != 1 {
            return fault(Code::MissingParen, whole);
        }
        Ok(())
    }

    /// `(` (or `(?:`, `(?P<name>`): a marker holding the flags to restore at its `)`.
    fn left_paren(&mut self, capture: bool) -> Result<(), Fault> {
        let id = self.op(Op::LeftParen)?;
        self.nodes[id].capture = capture;
        Ok(())
    }

    /// `(?` followed by flags, a non-capturing group or a named group.
    fn group_or_flags(&mut self, i: usize) -> Result<usize, Fault> {
        let whole = self.whole;
        let rest = &whole[i..];
        let rb = rest.as_bytes();
        let named_p = rb.len() > 4 && rb[2] == b'P' && rb[3] == b'<';
        let named = rb.len() > 3 && rb[2] == b'<';
        if named_p || named {
            let Some(end) = rest.find('>') else {
                return fault(Code::NamedCapture, rest);
            };
            let name = &rest[if named_p { 4 } else { 3 }..end];
            let valid =
                !name.is_empty() && name.bytes().all(|c| c == b'_' || c.is_ascii_alphanumeric());
            if !valid {
                return fault(Code::NamedCapture, &rest[..=end]);
            }
            self.left_paren(true)?;
            return Ok(i + end + 1);
        }
        // Flags: `i` folds case, `m` makes `^`/`$` match at lines, `s` lets `.` match a
        // newline, `U` swaps greediness; after `-` each clears its flag, and a flag must follow
        // the `-`. `:` opens a group, `)` ends a flags-only group.
        let mut flags = self.flags;
        let mut negated = false;
        let mut saw_flag = false;
        let mut j = i + 2;
        while j < whole.len() {
            let c = char_at(whole, j);
            j += c.len_utf8();
            let bit = match c {
                'i' => Some((Flags::FOLD_CASE, true)),
                'm' => Some((Flags::ONE_LINE, false)),
                's' => Some((Flags::DOT_NL, true)),
                'U' => Some((Flags::NON_GREEDY, true)),
                _ => None,
            };
            match c {
                _ if bit.is_some() => {
                    if let Some((bit, on)) = bit {
                        flags = flags.set(bit, on != negated);
                    }
                    saw_flag = true;
                }
                '-' if !negated => {
                    negated = true;
                    saw_flag = false;
                }
                ':' | ')' if !negated || saw_flag => {
                    if c == ':' {
                        self.left_paren(false)?;
                    }
                    self.flags = flags;
                    return Ok(j);
                }
                _ => break,
            }
        }
        fault(Code::PerlOp, &whole[i..j])
    }

    /// A backslash outside a class: an anchor, `\Q…\E`, a class escape or one character.
    fn backslash(&mut self, i: usize) -> Result<usize, Fault> {
        let whole = self.whole;
        match whole.as_bytes().get(i + 1) {
            Some(b'A' | b'b' | b'B' | b'z') => {
                self.op(Op::Anchor)?;
                return Ok(i + 2);
            }
            Some(b'C') => return fault(Code::Escape, &whole[i..i + 2]),
            Some(b'Q') => {
                let body = &whole[i + 2..];
                let (lit, next) = match body.find("\\E") {
                    Some(e) => (&body[..e], i + 2 + e + 2),
                    None => (body, whole.len()),
                };
                for c in lit.chars() {
                    self.literal(u32::from(c))?;
                }
                return Ok(next);
            }
            _ => {}
        }
        // Go allocates the class node before it knows whether this is a class escape.
        let id = self.allocate(Op::CharClass);
        self.nodes[id].flags = self.flags;
        let mut runes = Vec::new();
        let next = match unicode_class(whole, i)? {
            Some((next, name, positive)) => {
                self.append_unicode(&mut runes, name, positive);
                Some(next)
            }
            None => perl_class(whole, i, &mut runes, self.flags.fold()),
        };
        if let Some(next) = next {
            self.nodes[id].runes = runes;
            self.push(id)?;
            return Ok(next);
        }
        self.release(id);
        let (c, next) = escape(whole, i)?;
        self.literal(c)?;
        Ok(next)
    }

    /// `[…]`: its items in order, each checked as Go checks it, and the class Go builds.
    fn class(&mut self, start: usize) -> Result<usize, Fault> {
        let whole = self.whole;
        let b = whole.as_bytes();
        let id = self.allocate(Op::CharClass);
        self.nodes[id].flags = self.flags;
        let fold = self.flags.fold();
        let mut i = start + 1;
        let negated = b.get(i) == Some(&b'^');
        if negated {
            i += 1;
        }
        let mut posix_close = NextMatch::new(":]");
        let mut runes = Vec::new();
        let mut first = true;
        while i >= b.len() || b[i] != b']' || first {
            first = false;
            let rest = &whole[i..];
            if rest.len() > 2
                && rest.starts_with("[:")
                && let Some(close) = posix_close.next(whole, i + 2)
            {
                let name = &whole[i..close + 2];
                if !class::append_group(&mut runes, name, fold) {
                    return fault(Code::CharRange, name);
                }
                i += name.len();
                continue;
            }
            if let Some((next, name, positive)) = unicode_class(whole, i)? {
                self.append_unicode(&mut runes, name, positive);
                i = next;
                continue;
            }
            if let Some(next) = perl_class(whole, i, &mut runes, fold) {
                i = next;
                continue;
            }
            let range_start = i;
            let (lo, next) = class_char(whole, start, i)?;
            i = next;
            let mut hi = lo;
            if b.get(i) == Some(&b'-') && b.get(i + 1).is_some_and(|&c| c != b']') {
                let (h, next) = class_char(whole, start, i + 1)?;
                i = next;
                if h < lo {
                    return fault(Code::CharRange, &whole[range_start..i]);
                }
                hi = h;
            }
            if fold {
                class::append_folded_range(&mut runes, lo, hi);
            } else {
                class::append_range(&mut runes, lo, hi);
            }
        }
        class::clean(&mut runes);
        if negated {
            runes = class::negate(&runes);
        }
        self.nodes[id].runes = runes;
        self.push(id)?;
        Ok(i + 1)
    }

    /// Appends a Unicode table's runes (or those outside it) as Go does. Onto an empty class
    /// that is the same list every time, kept once built: a pattern may name a large table tens
    /// of thousands of times before Go's rune limit stops it. Onto a non-empty one (inside
    /// `[…]`, cleaned afterwards) only the set matters.
    fn append_unicode(&mut self, runes: &mut Vec<u32>, name: &'static Name, positive: bool) {
        let fold = self.flags.fold();
        let key = (name.name, positive, fold);
        let built = self.tables.entry(key).or_insert_with(|| {
            let mut built = Vec::new();
            class::append_unicode(&mut built, name, positive, fold);
            built
        });
        if runes.is_empty() {
            runes.extend_from_slice(built);
        } else {
            class::append_class(runes, built);
        }
    }

    /// A node, from those freed first, as Go takes them (it counts only new ones).
    fn allocate(&mut self, op: Op) -> usize {
        if let Some(id) = self.free.pop() {
            let node = &mut self.nodes[id];
            node.op = op;
            node.flags = Flags::default();
            node.runes.clear();
            node.min = 0;
            node.max = 0;
            node.capture = false;
            node.subs.clear();
            return id;
        }
        self.allocated += 1;
        self.nodes.push(Node {
            op,
            flags: Flags::default(),
            runes: Vec::new(),
            min: 0,
            max: 0,
            capture: false,
            subs: Vec::new(),
            size: None,
            height: None,
        });
        self.nodes.len() - 1
    }

    fn release(&mut self, id: usize) {
        self.nodes[id].height = None;
        self.free.push(id);
    }

    /// A node of `op` with the current flags, pushed.
    fn op(&mut self, op: Op) -> Result<usize, Fault> {
        let id = self.allocate(op);
        self.nodes[id].flags = self.flags;
        self.push(id)?;
        Ok(id)
    }

    fn literal(&mut self, rune: u32) -> Result<(), Fault> {
        let id = self.allocate(Op::Literal);
        self.nodes[id].flags = self.flags;
        let rune = if self.flags.fold() {
            class::min_fold_rune(rune)
        } else {
            rune
        };
        self.nodes[id].runes.push(rune);
        self.push(id)
    }

    /// Go's push: a class of one rune (or of one letter in both cases) becomes a literal,
    /// joined to a literal run below when it can be (and then neither pushed nor measured);
    /// otherwise the two literals on top are joined first. The runes count every time.
    fn push(&mut self, id: usize) -> Result<(), Fault> {
        let node = &self.nodes[id];
        self.runes += node.runes.len() as i64;
        let r = &node.runes;
        let single = node.op == Op::CharClass && r.len() == 2 && r[0] == r[1];
        let cased = node.op == Op::CharClass
            && ((r.len() == 4
                && r[0] == r[1]
                && r[2] == r[3]
                && class::simple_fold(r[0]) == r[2]
                && class::simple_fold(r[2]) == r[0])
                || (r.len() == 2
                    && r[0] + 1 == r[1]
                    && class::simple_fold(r[0]) == r[1]
                    && class::simple_fold(r[1]) == r[0]));
        if single || cased {
            let rune = r[0];
            let flags = self.flags.set(Flags::FOLD_CASE, cased);
            if self.maybe_concat(Some((rune, flags))) {
                return Ok(());
            }
            let node = &mut self.nodes[id];
            node.op = Op::Literal;
            node.runes.truncate(1);
            node.flags = flags;
        } else {
            self.maybe_concat(None);
        }
        self.stack.push(id);
        self.check_limits(id)
    }

    /// Go's incremental joining of literal runs: the two literals on top with the same case
    /// folding become one run. Given a rune, the top node the join frees carries it instead
    /// (`true`: it is on the stack then).
    fn maybe_concat(&mut self, incoming: Option<(u32, Flags)>) -> bool {
        let n = self.stack.len();
        if n < 2 {
            return false;
        }
        let (top, below) = (self.stack[n - 1], self.stack[n - 2]);
        let (t, b) = (&self.nodes[top], &self.nodes[below]);
        if t.op != Op::Literal || b.op != Op::Literal || t.flags.fold() != b.flags.fold() {
            return false;
        }
        let moved = std::mem::take(&mut self.nodes[top].runes);
        self.nodes[below].runes.extend_from_slice(&moved);
        if let Some((rune, flags)) = incoming {
            let node = &mut self.nodes[top];
            node.runes = moved;
            node.runes.clear();
            node.runes.push(rune);
            node.flags = flags;
            return true;
        }
        self.stack.pop();
        self.release(top);
        false
    }

    /// Replaces the stack's top with its repetition; `before` is where the operator starts,
    /// `after` where it ends (before a non-greedy `?`).
    fn repeat(
        &mut self,
        op: Op,
        (min, max): (i64, i64),
        before: usize,
        mut after: usize,
        last_repeat: Option<usize>,
    ) -> Result<usize, Fault> {
        let whole = self.whole;
        let mut flags = self.flags;
        if whole.as_bytes().get(after) == Some(&b'?') {
            after += 1;
            flags = flags.set(Flags::NON_GREEDY, !flags.has(Flags::NON_GREEDY));
        }
        if let Some(last) = last_repeat {
            return fault(Code::NestedRepeat, &whole[last..after]);
        }
        let Some(&top) = self.stack.last() else {
            return fault(Code::MissingArgument, &whole[before..after]);
        };
        if self.nodes[top].op.is_marker() {
            return fault(Code::MissingArgument, &whole[before..after]);
        }
        let id = self.allocate(op);
        let node = &mut self.nodes[id];
        node.min = min;
        node.max = max;
        node.flags = flags;
        node.subs.push(top);
        if let Some(slot) = self.stack.last_mut() {
            *slot = id;
        }
        self.check_limits(id)?;
        if op == Op::Repeat && (min >= 2 || max >= 2) && !self.copies_within(id, MAX_COPIES) {
            return fault(Code::RepeatCount, &whole[before..after]);
        }
        Ok(after)
    }

    /// Whether the counted repeats under `id`, multiplied down each path, stay within `n`
    /// copies. Go's parse only calls this for counts of two or more, which refuses any nesting
    /// of them deeper than ten, so the walks stay short.
    fn copies_within(&self, id: usize, n: i64) -> bool {
        let mut todo = vec![(id, n)];
        while let Some((id, mut n)) = todo.pop() {
            let node = &self.nodes[id];
            if node.op == Op::Repeat {
                if node.max == 0 {
                    continue;
                }
                let m = if node.max < 0 { node.min } else { node.max };
                if m > n {
                    return false;
                }
                if m > 0 {
                    n /= m;
                }
            }
            todo.extend(node.subs.iter().map(|&s| (s, n)));
        }
        true
    }

    /// Everything above the topmost marker becomes one concatenation.
    fn concat(&mut self) -> Result<(), Fault> {
        self.maybe_concat(None);
        let subs = self.take_above_marker();
        let id = if subs.is_empty() {
            self.allocate(Op::EmptyMatch)
        } else {
            self.collapse(subs, Op::Concat)?
        };
        self.push(id)
    }

    /// Everything above the topmost `(` becomes one alternation.
    fn alternate(&mut self) -> Result<(), Fault> {
        let subs = self.take_above_marker();
        if let Some(&last) = subs.last() {
            self.clean_alt(last);
        }
        let id = if subs.is_empty() {
            self.allocate(Op::NoMatch)
        } else {
            self.collapse(subs, Op::Alternate)?
        };
        self.push(id)
    }

    fn take_above_marker(&mut self) -> Vec<usize> {
        let keep = self
            .stack
            .iter()
            .rposition(|&id| self.nodes[id].op.is_marker())
            .map_or(0, |p| p + 1);
        self.stack.split_off(keep)
    }

    /// One node over `subs`, taking in the subs of those of the same kind; an alternation's
    /// branches are factored as Go factors them, and one left alone is returned as it is.
    fn collapse(&mut self, subs: Vec<usize>, op: Op) -> Result<usize, Fault> {
        if let [one] = subs[..] {
            return Ok(one);
        }
        let id = self.allocate(op);
        let mut all = Vec::with_capacity(subs.len());
        for s in subs {
            if self.nodes[s].op == op {
                all.append(&mut self.nodes[s].subs);
                self.release(s);
            } else {
                all.push(s);
            }
        }
        if op == Op::Alternate {
            all = self.factor(all)?;
            if let [one] = all[..] {
                self.release(id);
                return Ok(one);
            }
        }
        self.nodes[id].subs = all;
        Ok(id)
    }

    fn vertical_bar(&mut self) -> Result<(), Fault> {
        self.concat()?;
        if !self.swap_vertical_bar() {
            self.op(Op::VerticalBar)?;
        }
        Ok(())
    }

    /// Puts the alternative just read below the `|` on the stack, merging two one-character
    /// alternatives into one class; `false` when no `|` is there.
    fn swap_vertical_bar(&mut self) -> bool {
        let n = self.stack.len();
        if n >= 3
            && self.nodes[self.stack[n - 2]].op == Op::VerticalBar
            && self.is_char_class(self.stack[n - 1])
            && self.is_char_class(self.stack[n - 3])
        {
            let (mut src, mut dst) = (self.stack[n - 1], self.stack[n - 3]);
            if self.nodes[src].op > self.nodes[dst].op {
                (src, dst) = (dst, src);
                self.stack[n - 3] = dst;
            }
            self.merge_char_class(dst, src);
            self.release(src);
            self.stack.truncate(n - 1);
            return true;
        }
        if n >= 2 && self.nodes[self.stack[n - 2]].op == Op::VerticalBar {
            if n >= 3 {
                self.clean_alt(self.stack[n - 3]);
            }
            self.stack.swap(n - 1, n - 2);
            return true;
        }
        false
    }

    fn right_paren(&mut self) -> Result<(), Fault> {
        self.concat()?;
        if self.swap_vertical_bar() {
            self.stack.pop();
        }
        self.alternate()?;
        let n = self.stack.len();
        if n < 2 {
            return fault(Code::UnexpectedParen, self.whole);
        }
        let inner = self.stack[n - 1];
        let open = self.stack[n - 2];
        self.stack.truncate(n - 2);
        if self.nodes[open].op != Op::LeftParen {
            return fault(Code::UnexpectedParen, self.whole);
        }
        self.flags = self.nodes[open].flags;
        if !self.nodes[open].capture {
            return self.push(inner);
        }
        self.nodes[open].op = Op::Capture;
        self.nodes[open].subs = vec![inner];
        self.push(open)
    }

    /// One character: a one-rune literal, a class or any character.
    fn is_char_class(&self, id: usize) -> bool {
        let node = &self.nodes[id];
        match node.op {
            Op::Literal => node.runes.len() == 1,
            Op::CharClass | Op::AnyCharNotNl | Op::AnyChar => true,
            _ => false,
        }
    }

    /// Makes `dst` match what `src` matches too; `dst` is of the later kind.
    fn merge_char_class(&mut self, dst: usize, src: usize) {
        let (s_op, s_flags) = (self.nodes[src].op, self.nodes[src].flags);
        let s_runes = std::mem::take(&mut self.nodes[src].runes);
        let node = &mut self.nodes[dst];
        match node.op {
            Op::AnyCharNotNl => {
                let newline = match s_op {
                    Op::Literal => s_runes == [u32::from(b'\n')],
                    Op::CharClass => class::contains(&s_runes, u32::from(b'\n')),
                    Op::AnyCharNotNl => false,
                    _ => true,
                };
                if newline {
                    node.op = Op::AnyChar;
                }
            }
            Op::CharClass if s_op == Op::Literal => {
                class::append_literal(&mut node.runes, s_runes[0], s_flags.fold());
            }
            Op::CharClass => class::append_class(&mut node.runes, &s_runes),
            Op::Literal if s_runes[0] == node.runes[0] && s_flags == node.flags => {}
            Op::Literal => {
                let own = node.runes[0];
                node.op = Op::CharClass;
                node.runes.clear();
                class::append_literal(&mut node.runes, own, node.flags.fold());
                class::append_literal(&mut node.runes, s_runes[0], s_flags.fold());
            }
            _ => {}
        }
        self.nodes[src].runes = s_runes;
    }

    /// A class about to sit in an alternation: cleaned, and any character said as such.
    fn clean_alt(&mut self, id: usize) {
        let node = &mut self.nodes[id];
        if node.op != Op::CharClass {
            return;
        }
        class::clean(&mut node.runes);
        let any = [0, class::MAX_RUNE];
        let not_newline = [0, 0x09, 0x0B, class::MAX_RUNE];
        if node.runes == any || node.runes == not_newline {
            node.op = if node.runes == any {
                Op::AnyChar
            } else {
                Op::AnyCharNotNl
            };
            node.runes.clear();
        }
    }

    fn check_limits(&mut self, id: usize) -> Result<(), Fault> {
        if self.runes > MAX_RUNES {
            return fault(Code::TooLarge, self.whole);
        }
        self.check_size(id)?;
        self.check_height(id)
    }

    /// Go measures program size only once allocations times the repeat counts seen could
    /// exceed the limit; from then on every node pushed is measured.
    fn check_size(&mut self, id: usize) -> Result<(), Fault> {
        if !self.sizing {
            let node = &self.nodes[id];
            if node.op == Op::Repeat {
                let n = if node.max == -1 { node.min } else { node.max }.max(1);
                self.repeats = if n > MAX_SIZE / self.repeats {
                    MAX_SIZE
                } else {
                    self.repeats * n
                };
            }
            if self.allocated < MAX_SIZE / self.repeats {
                return Ok(());
            }
            self.sizing = true;
            for s in self.stack.clone() {
                self.check_size(s)?;
            }
        }
        if self.size(id, true) > MAX_SIZE {
            return fault(Code::TooLarge, self.whole);
        }
        Ok(())
    }

    /// Go's estimate of the instructions a node compiles to.
    fn size(&mut self, id: usize, fresh: bool) -> i64 {
        if !fresh && let Some(s) = self.nodes[id].size {
            return s;
        }
        let subs = self.nodes[id].subs.clone();
        let sub = |p: &mut Self, k: usize| subs.get(k).map_or(0, |&s| p.size(s, false));
        let node = &self.nodes[id];
        let (min, max) = (node.min, node.max);
        let size = match node.op {
            Op::Literal => node.runes.len() as i64,
            Op::Capture | Op::Star => 2 + sub(self, 0),
            Op::Plus | Op::Quest => 1 + sub(self, 0),
            Op::Concat => (0..subs.len()).map(|k| sub(self, k)).sum(),
            Op::Alternate => {
                let total: i64 = (0..subs.len()).map(|k| sub(self, k)).sum();
                total + (subs.len() as i64 - 1).max(0)
            }
            Op::Repeat => {
                let s = sub(self, 0);
                match max {
                    -1 if min == 0 => 2 + s,
                    -1 => 1i64.saturating_add(min.saturating_mul(s)),
                    _ => max.saturating_mul(s).saturating_add(max - min),
                }
            }
            _ => 0,
        }
        .max(1);
        self.nodes[id].size = Some(size);
        size
    }

    fn check_height(&mut self, id: usize) -> Result<(), Fault> {
        if self.allocated < i64::from(MAX_HEIGHT) {
            return Ok(());
        }
        if !self.measuring_height {
            self.measuring_height = true;
            for s in self.stack.clone() {
                self.check_height(s)?;
            }
        }
        if self.height(id, true) > MAX_HEIGHT {
            return fault(Code::TooDeep, self.whole);
        }
        Ok(())
    }

    /// The tree's height under a node; the tree is at most `MAX_HEIGHT` + 1 high here (every
    /// node is measured as it is made once the count allows such a height), so the recursion
    /// is bounded.
    fn height(&mut self, id: usize, fresh: bool) -> u32 {
        if !fresh && let Some(h) = self.nodes[id].height {
            return h;
        }
        let subs = self.nodes[id].subs.clone();
        let h = 1 + subs
            .iter()
            .map(|&s| self.height(s, false))
            .max()
            .unwrap_or(0);
        self.nodes[id].height = Some(h);
        h
    }
}

/// `{n}`, `{n,}` or `{n,m}` at `i`: the counts (`-1`: no maximum, or a number too large) and
/// where it ends; `None` when the brace starts no count (Go takes it literally then).
fn counts(whole: &str, i: usize) -> Option<(i64, i64, usize)> {
    let b = whole.as_bytes();
    let (min, j) = number(b, i + 1)?;
    let (min, max, j) = match b.get(j)? {
        b',' if *b.get(j + 1)? == b'}' => (min, -1, j + 1),
        b',' => {
            let (max, k) = number(b, j + 1)?;
            // A maximum too large to hold makes the whole count invalid, as in Go.
            (if max < 0 { -1 } else { min }, max, k)
        }
        _ => (min, min, j),
    };
    (b.get(j)? == &b'}').then_some((min, max, j + 1))
}

/// A decimal number without a leading zero at `i`: its value (`-1` past 99,999,999) and its end.
fn number(b: &[u8], i: usize) -> Option<(i64, usize)> {
    let digits = b[i.min(b.len())..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count();
    if digits == 0 || (digits >= 2 && b[i] == b'0') {
        return None;
    }
    let mut n: i64 = 0;
    for &c in &b[i..i + digits] {
        if n >= 100_000_000 {
            n = -1;
            break;
        }
        n = n * 10 + i64::from(c - b'0');
    }
    Some((n, i + digits))
}

fn char_at(s: &str, i: usize) -> char {
    s[i..].chars().next().unwrap_or('\u{0}')
}

/// `\p{Name}`, `\pN`, `\P…` at `i`: where it ends, the table and whether its runes are
/// taken (`false`: those outside it); `None` when no such escape starts there, or Go's refusal
/// of an unknown name (Go quotes up to the first `}`, or to the end).
fn unicode_class(whole: &str, i: usize) -> Result<Option<(usize, &'static Name, bool)>, Fault> {
    let rest = &whole[i..];
    if !(rest.starts_with("\\p") || rest.starts_with("\\P")) {
        return Ok(None);
    }
    let mut positive = rest.as_bytes()[1] == b'p';
    let (seq, name) = match rest[2..].chars().next() {
        Some('{') => match rest.find('}') {
            Some(end) => (&rest[..=end], &rest[3..end]),
            None => return fault(Code::CharRange, rest),
        },
        Some(c) => (&rest[..2 + c.len_utf8()], &rest[2..2 + c.len_utf8()]),
        None => (rest, ""),
    };
    let name = match name.strip_prefix('^') {
        Some(bare) => {
            positive = !positive;
            bare
        }
        None => name,
    };
    let Some(entry) = class::unicode_name(&canonical(name)) else {
        return fault(Code::CharRange, seq);
    };
    Ok(Some((i + seq.len(), entry, positive != entry.inverted)))
}

/// The form Go looks a class name up by: spaces, `_` and `-` dropped, the first remaining
/// byte upper-case and the other ASCII letters lower-case.
fn canonical(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (k, c) in name
        .chars()
        .filter(|c| !matches!(c, ' ' | '_' | '-'))
        .enumerate()
    {
        out.push(if k == 0 {
            c.to_ascii_uppercase()
        } else {
            c.to_ascii_lowercase()
        });
    }
    out
}

/// The next occurrence of a needle at or after a position that only moves forward: Go searches
/// the rest of the pattern for `:]` at every `[:` of a class, which repeated would be quadratic;
/// one search serves until the position passes what it found.
struct NextMatch {
    needle: &'static str,
    found: Option<(usize, Option<usize>)>,
}

impl NextMatch {
    fn new(needle: &'static str) -> Self {
        Self {
            needle,
            found: None,
        }
    }

    fn next(&mut self, hay: &str, from: usize) -> Option<usize> {
        match self.found {
            // Searched from no later than `from`, and nothing found there was before `from`.
            Some((searched, hit)) if searched <= from && hit.is_none_or(|h| h >= from) => hit,
            _ => {
                let hit = hay[from..].find(self.needle).map(|k| from + k);
                self.found = Some((from, hit));
                hit
            }
        }
    }
}

/// `\d`, `\D`, `\s`, `\S`, `\w`, `\W` at `i`, its runes appended to `runes`: where it ends.
fn perl_class(whole: &str, i: usize, runes: &mut Vec<u32>, fold: bool) -> Option<usize> {
    let b = whole.as_bytes();
    let is_group = b.get(i) == Some(&b'\\') && b.get(i + 1).is_some_and(|c| b"dDsSwW".contains(c));
    (is_group && class::append_group(runes, &whole[i..i + 2], fold)).then_some(i + 2)
}

/// One character of a class at `i`; `start` is the class's `[` (Go quotes the whole class from
/// there when it is not closed).
fn class_char(whole: &str, start: usize, i: usize) -> Result<(u32, usize), Fault> {
    match whole.as_bytes().get(i) {
        None => fault(Code::MissingBracket, &whole[start..]),
        Some(b'\\') => escape(whole, i),
        Some(_) => {
            let c = char_at(whole, i);
            Ok((u32::from(c), i + c.len_utf8()))
        }
    }
}

/// A one-character escape at `i` (the backslash): the rune and where it ends, or Go's refusal,
/// which quotes the escape up to the character that made it invalid.
fn escape(whole: &str, i: usize) -> Result<(u32, usize), Fault> {
    let b = whole.as_bytes();
    let Some(&first) = b.get(i + 1) else {
        return fault(Code::TrailingBackslash, "");
    };
    let c = char_at(whole, i + 1);
    let mut t = i + 1 + c.len_utf8();
    let is_octal = |k: usize| b.get(k).is_some_and(|c| (b'0'..=b'7').contains(c));
    let invalid = |t: usize| fault(Code::Escape, &whole[i..t]);
    match first {
        // Punctuation, space and control characters stand for themselves.
        c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((u32::from(c), t)),
        // `\0` and up to two more octal digits; `\1`–`\7` only with a second digit (else a
        // back-reference, which Go does not have).
        b'0'..=b'7' if first == b'0' || is_octal(t) => {
            let mut r = u32::from(first - b'0');
            for _ in 0..2 {
                if !is_octal(t) {
                    break;
                }
                r = r * 8 + u32::from(b[t] - b'0');
                t += 1;
            }
            Ok((r, t))
        }
        b'x' => {
            if t >= b.len() {
                return invalid(t);
            }
            let c = char_at(whole, t);
            t += c.len_utf8();
            if c == '{' {
                let mut r: u32 = 0;
                let mut digits = 0;
                loop {
                    if t >= b.len() {
                        return invalid(t);
                    }
                    let c = char_at(whole, t);
                    t += c.len_utf8();
                    if c == '}' {
                        break;
                    }
                    let Some(v) = c.to_digit(16) else {
                        return invalid(t);
                    };
                    r = r * 16 + v;
                    if r > 0x10_FFFF {
                        return invalid(t);
                    }
                    digits += 1;
                }
                if digits == 0 {
                    return invalid(t);
                }
                return Ok((r, t));
            }
            let hi = c.to_digit(16);
            let lo = if t < b.len() {
                let c = char_at(whole, t);
                t += c.len_utf8();
                c.to_digit(16)
            } else {
                None
            };
            match (hi, lo) {
                (Some(h), Some(l)) => Ok((h * 16 + l, t)),
                _ => invalid(t),
            }
        }
        b'a' => Ok((0x07, t)),
        b'f' => Ok((0x0C, t)),
        b'n' => Ok((0x0A, t)),
        b'r' => Ok((0x0D, t)),
        b't' => Ok((0x09, t)),
        b'v' => Ok((0x0B, t)),
        _ => invalid(t),
    }
}

#[cfg(test)]
mod tests;
