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
//! only what Go's limits need: a tree of the node shapes whose count, height and program size
//! Go bounds (1,000 levels; 3,355,443 instructions; 1,000 copies through nested counted
//! repeats). Character classes are kept as "one rune or more", never as their runes.

mod names;

use std::fmt;

/// Go's error for `pattern`, or `None` when Go compiles it.
pub fn compile_error(pattern: &str) -> Option<String> {
    Parser::new(pattern).parse().err().map(|f| f.to_string())
}

/// Go's limit on the height of the parsed tree.
const MAX_HEIGHT: u32 = 1000;
/// Go's limit on the compiled program: 128 MiB of 40-byte instructions.
const MAX_SIZE: i64 = (128 << 20) / 40;
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

/// What a node is, as far as Go's limits and merges can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A run of literal runes (Go joins adjacent ones with the same case folding).
    Literal {
        first: u32,
        len: u32,
        fold: bool,
    },
    /// A class of more than one rune, or any character.
    Class,
    /// Empty match, no match, anchors and boundaries.
    Leaf,
    Capture,
    Star,
    Plus,
    Quest,
    Repeat {
        min: i64,
        max: i64,
    },
    Concat,
    Alternate,
    /// `(`, with whether it captures and the case folding to restore at its `)`.
    Open {
        capture: bool,
        fold: bool,
    },
    /// `|` while its alternation is being read.
    Bar,
}

impl Shape {
    fn is_marker(self) -> bool {
        matches!(self, Shape::Open { .. } | Shape::Bar)
    }

    /// One character: what two alternatives merge into a class from.
    fn is_one_char(self) -> bool {
        matches!(self, Shape::Class | Shape::Literal { len: 1, .. })
    }
}

#[derive(Debug)]
struct Node {
    shape: Shape,
    subs: Vec<usize>,
    /// Go remembers a node's size and height once its limit tracking has started, and does
    /// not revisit a literal run that grows afterwards; so do these.
    size: Option<i64>,
    height: Option<u32>,
}

/// Go's parse, left to right over a stack of nodes and markers.
struct Parser<'a> {
    whole: &'a str,
    nodes: Vec<Node>,
    stack: Vec<usize>,
    fold: bool,
    /// Nodes Go has allocated (its limits start counting past a number of them), and the
    /// freed ones it allocates from first.
    allocated: i64,
    free: Vec<usize>,
    /// The product of the counts of the repeats met before size tracking started.
    repeats: i64,
    sizing: bool,
    measuring_height: bool,
}

impl<'a> Parser<'a> {
    fn new(whole: &'a str) -> Self {
        Self {
            whole,
            nodes: Vec::new(),
            stack: Vec::new(),
            fold: false,
            allocated: 0,
            free: Vec::new(),
            repeats: 1,
            sizing: false,
            measuring_height: false,
        }
    }

    fn parse(mut self) -> Result<(), Fault> {
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
                    self.op(Shape::Open {
                        capture: true,
                        fold: self.fold,
                    })?;
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
                    self.op(Shape::Leaf)?;
                    i += 1;
                }
                b'.' => {
                    self.op(Shape::Class)?;
                    i += 1;
                }
                b'[' => i = self.class(i)?,
                op @ (b'*' | b'+' | b'?') => {
                    let shape = match op {
                        b'*' => Shape::Star,
                        b'+' => Shape::Plus,
                        _ => Shape::Quest,
                    };
                    let start = i;
                    i = self.repeat(shape, i, i + 1, last_repeat)?;
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
                        i = self.repeat(Shape::Repeat { min, max }, i, after, last_repeat)?;
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
            self.op(Shape::Open {
                capture: true,
                fold: self.fold,
            })?;
            return Ok(i + end + 1);
        }
        // Flags: `i` folds case (`-i` stops), `m`, `s` and `U` change nothing the limits see;
        // `:` opens a group, `)` ends a flags-only group; a `-` needs a flag after it.
        let mut fold = self.fold;
        let mut negated = false;
        let mut saw_flag = false;
        let mut j = i + 2;
        while j < whole.len() {
            let c = char_at(whole, j);
            j += c.len_utf8();
            match c {
                'i' => {
                    fold = !negated;
                    saw_flag = true;
                }
                'm' | 's' | 'U' => saw_flag = true,
                '-' if !negated => {
                    negated = true;
                    saw_flag = false;
                }
                ':' | ')' if !negated || saw_flag => {
                    if c == ':' {
                        self.op(Shape::Open {
                            capture: false,
                            fold: self.fold,
                        })?;
                    }
                    self.fold = fold;
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
                self.op(Shape::Leaf)?;
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
        let id = self.allocate(Shape::Class, Vec::new());
        if let Some(next) = unicode_class(whole, i)? {
            self.push_class(id, Shape::Class)?;
            return Ok(next);
        }
        if let Some(next) = perl_class(whole, i) {
            self.push_class(id, Shape::Class)?;
            return Ok(next);
        }
        self.release(id);
        let (c, next) = escape(whole, i)?;
        self.literal(c)?;
        Ok(next)
    }

    /// `[…]`: its items in order, each checked as Go checks it.
    fn class(&mut self, start: usize) -> Result<usize, Fault> {
        let whole = self.whole;
        let b = whole.as_bytes();
        let id = self.allocate(Shape::Class, Vec::new());
        let mut i = start + 1;
        let negated = b.get(i) == Some(&b'^');
        if negated {
            i += 1;
        }
        let mut posix_close = NextMatch::new(":]");
        // The runes named one by one, while that is all the class has.
        let mut runes = Some(Runes::default());
        let mut first = true;
        while i >= b.len() || b[i] != b']' || first {
            first = false;
            let rest = &whole[i..];
            if rest.len() > 2
                && rest.starts_with("[:")
                && let Some(close) = posix_close.next(whole, i + 2)
            {
                let name = &whole[i..close + 2];
                let bare = &name[2..];
                if !POSIX_CLASSES.contains(&bare.strip_prefix('^').unwrap_or(bare)) {
                    return fault(Code::CharRange, name);
                }
                runes = None;
                i += name.len();
                continue;
            }
            if let Some(next) = unicode_class(whole, i)? {
                runes = None;
                i = next;
                continue;
            }
            if let Some(next) = perl_class(whole, i) {
                runes = None;
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
            if let Some(r) = &mut runes
                && !r.add(lo, hi)
            {
                runes = None;
            }
        }
        let shape = match runes.filter(|_| !negated).and_then(|r| r.single(self.fold)) {
            Some((rune, fold)) => Shape::Literal {
                first: rune,
                len: 1,
                fold,
            },
            None => Shape::Class,
        };
        self.push_class(id, shape)?;
        Ok(i + 1)
    }

    /// A node, from those freed first, as Go takes them (it counts only new ones).
    fn allocate(&mut self, shape: Shape, subs: Vec<usize>) -> usize {
        let node = Node {
            shape,
            subs,
            size: None,
            height: None,
        };
        if let Some(id) = self.free.pop() {
            self.nodes[id] = node;
            return id;
        }
        self.allocated += 1;
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    fn release(&mut self, id: usize) {
        self.nodes[id].subs = Vec::new();
        self.free.push(id);
    }

    /// Pushes a class allocated before it was read. One of a single rune arrives as a literal:
    /// Go joins it to a literal run below when it can, reusing the node that join frees, and
    /// then neither pushes nor measures anything more.
    fn push_class(&mut self, id: usize, shape: Shape) -> Result<(), Fault> {
        self.nodes[id].shape = shape;
        if matches!(shape, Shape::Literal { .. }) {
            if self.join_top(Some(shape)) {
                return Ok(());
            }
        } else {
            self.join_top(None);
        }
        self.stack.push(id);
        self.check_limits(id)
    }

    fn op(&mut self, shape: Shape) -> Result<(), Fault> {
        let id = self.allocate(shape, Vec::new());
        self.push(id)
    }

    fn literal(&mut self, rune: u32) -> Result<(), Fault> {
        let shape = Shape::Literal {
            first: rune,
            len: 1,
            fold: self.fold,
        };
        let id = self.allocate(shape, Vec::new());
        self.push(id)
    }

    fn push(&mut self, id: usize) -> Result<(), Fault> {
        self.join_top(None);
        self.stack.push(id);
        self.check_limits(id)
    }

    /// Go's incremental joining of literal runs: before a push, the two topmost literals with
    /// the same folding become one run. With `incoming` (a one-rune literal), the top node Go
    /// frees by the join is reused for it; `true` then.
    fn join_top(&mut self, incoming: Option<Shape>) -> bool {
        let n = self.stack.len();
        if n < 2 {
            return false;
        }
        let (top, below) = (self.stack[n - 1], self.stack[n - 2]);
        let (
            Shape::Literal {
                len: top_len,
                fold: top_fold,
                ..
            },
            Shape::Literal { first, len, fold },
        ) = (self.nodes[top].shape, self.nodes[below].shape)
        else {
            return false;
        };
        if top_fold != fold {
            return false;
        }
        self.nodes[below].shape = Shape::Literal {
            first,
            len: len.saturating_add(top_len),
            fold,
        };
        if let Some(incoming) = incoming {
            self.nodes[top].shape = incoming;
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
        shape: Shape,
        before: usize,
        mut after: usize,
        last_repeat: Option<usize>,
    ) -> Result<usize, Fault> {
        let whole = self.whole;
        if whole.as_bytes().get(after) == Some(&b'?') {
            after += 1;
        }
        if let Some(last) = last_repeat {
            return fault(Code::NestedRepeat, &whole[last..after]);
        }
        let Some(&top) = self.stack.last() else {
            return fault(Code::MissingArgument, &whole[before..after]);
        };
        if self.nodes[top].shape.is_marker() {
            return fault(Code::MissingArgument, &whole[before..after]);
        }
        let id = self.allocate(shape, vec![top]);
        if let Some(slot) = self.stack.last_mut() {
            *slot = id;
        }
        self.check_limits(id)?;
        if let Shape::Repeat { min, max } = shape
            && (min >= 2 || max >= 2)
            && !self.copies_within(id, MAX_COPIES)
        {
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
            if let Shape::Repeat { min, max } = self.nodes[id].shape {
                if max == 0 {
                    continue;
                }
                let m = if max < 0 { min } else { max };
                if m > n {
                    return false;
                }
                if m > 0 {
                    n /= m;
                }
            }
            todo.extend(self.nodes[id].subs.iter().map(|&s| (s, n)));
        }
        true
    }

    /// Everything above the topmost marker becomes one concatenation.
    fn concat(&mut self) -> Result<(), Fault> {
        self.join_top(None);
        let subs = self.take_above_marker();
        if subs.is_empty() {
            return self.op(Shape::Leaf);
        }
        let id = self.collapse(subs, Shape::Concat);
        self.push(id)
    }

    /// Everything above the topmost `(` becomes one alternation.
    fn alternate(&mut self) -> Result<(), Fault> {
        let subs = self.take_above_marker();
        if subs.is_empty() {
            return self.op(Shape::Leaf);
        }
        let id = self.collapse(subs, Shape::Alternate);
        self.push(id)
    }

    fn take_above_marker(&mut self) -> Vec<usize> {
        let keep = self
            .stack
            .iter()
            .rposition(|&id| self.nodes[id].shape.is_marker())
            .map_or(0, |p| p + 1);
        self.stack.split_off(keep)
    }

    /// One node over `subs`, taking in the subs of those of the same kind.
    fn collapse(&mut self, subs: Vec<usize>, shape: Shape) -> usize {
        if let [one] = subs[..] {
            return one;
        }
        let id = self.allocate(shape, Vec::new());
        let mut all = Vec::with_capacity(subs.len());
        for s in subs {
            if self.nodes[s].shape == shape {
                all.extend(self.nodes[s].subs.iter().copied());
                self.release(s);
            } else {
                all.push(s);
            }
        }
        self.nodes[id].subs = all;
        id
    }

    fn vertical_bar(&mut self) -> Result<(), Fault> {
        self.concat()?;
        if !self.swap_vertical_bar() {
            self.op(Shape::Bar)?;
        }
        Ok(())
    }

    /// Puts the alternative just read below the `|` on the stack, merging two one-character
    /// alternatives into one class; `false` when no `|` is there.
    fn swap_vertical_bar(&mut self) -> bool {
        let n = self.stack.len();
        if n >= 3
            && self.nodes[self.stack[n - 2]].shape == Shape::Bar
            && self.nodes[self.stack[n - 1]].shape.is_one_char()
            && self.nodes[self.stack[n - 3]].shape.is_one_char()
        {
            let (a, b) = (self.stack[n - 1], self.stack[n - 3]);
            let same = match (self.nodes[a].shape, self.nodes[b].shape) {
                (x @ Shape::Literal { .. }, y) => x == y,
                _ => false,
            };
            if !same {
                self.nodes[b].shape = Shape::Class;
            }
            self.stack.pop();
            self.release(a);
            return true;
        }
        if n >= 2 && self.nodes[self.stack[n - 2]].shape == Shape::Bar {
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
        let Shape::Open { capture, fold } = self.nodes[open].shape else {
            return fault(Code::UnexpectedParen, self.whole);
        };
        self.fold = fold;
        if !capture {
            return self.push(inner);
        }
        self.nodes[open].shape = Shape::Capture;
        self.nodes[open].subs = vec![inner];
        self.nodes[open].size = None;
        self.nodes[open].height = None;
        self.push(open)
    }

    fn check_limits(&mut self, id: usize) -> Result<(), Fault> {
        self.check_size(id)?;
        self.check_height(id)
    }

    /// Go measures program size only once allocations times the repeat counts seen could
    /// exceed the limit; from then on every node pushed is measured.
    fn check_size(&mut self, id: usize) -> Result<(), Fault> {
        if !self.sizing {
            if let Shape::Repeat { min, max } = self.nodes[id].shape {
                let n = if max == -1 { min } else { max }.max(1);
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
        let size = match self.nodes[id].shape {
            Shape::Literal { len, .. } => i64::from(len),
            Shape::Capture | Shape::Star => 2 + sub(self, 0),
            Shape::Plus | Shape::Quest => 1 + sub(self, 0),
            Shape::Concat => (0..subs.len()).map(|k| sub(self, k)).sum(),
            Shape::Alternate => {
                let total: i64 = (0..subs.len()).map(|k| sub(self, k)).sum();
                total + (subs.len() as i64 - 1).max(0)
            }
            Shape::Repeat { min, max } => {
                let s = sub(self, 0);
                match max {
                    -1 if min == 0 => 2 + s,
                    -1 => 1i64.saturating_add(min.saturating_mul(s)),
                    _ => max.saturating_mul(s).saturating_add(max - min),
                }
            }
            Shape::Class | Shape::Leaf | Shape::Open { .. } | Shape::Bar => 0,
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

/// `\p{Name}`, `\pN`, `\P…` at `i`: where it ends, `None` when no such escape starts there,
/// or Go's refusal of an unknown name (Go quotes up to the first `}`, or to the end).
fn unicode_class(whole: &str, i: usize) -> Result<Option<usize>, Fault> {
    let rest = &whole[i..];
    if !(rest.starts_with("\\p") || rest.starts_with("\\P")) {
        return Ok(None);
    }
    let (seq, name) = match rest[2..].chars().next() {
        Some('{') => match rest.find('}') {
            Some(end) => (&rest[..=end], &rest[3..end]),
            None => return fault(Code::CharRange, rest),
        },
        Some(c) => (&rest[..2 + c.len_utf8()], &rest[2..2 + c.len_utf8()]),
        None => (rest, ""),
    };
    let name = name.strip_prefix('^').unwrap_or(name);
    if names::NAMES
        .binary_search(&canonical(name).as_str())
        .is_err()
    {
        return fault(Code::CharRange, seq);
    }
    Ok(Some(i + seq.len()))
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

/// `\d`, `\D`, `\s`, `\S`, `\w`, `\W` at `i`: where it ends.
fn perl_class(whole: &str, i: usize) -> Option<usize> {
    let b = whole.as_bytes();
    (b.get(i) == Some(&b'\\') && b.get(i + 1).is_some_and(|c| b"dDsSwW".contains(c)))
        .then_some(i + 2)
}

/// The POSIX names Go knows inside a class (`[[:alpha:]]`, `[[:^alpha:]]`), with their `:]`.
const POSIX_CLASSES: [&str; 14] = [
    "alnum:]", "alpha:]", "ascii:]", "blank:]", "cntrl:]", "digit:]", "graph:]", "lower:]",
    "print:]", "punct:]", "space:]", "upper:]", "word:]", "xdigit:]",
];

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

/// The runes a class names one by one, while it names few: enough to tell a one-rune class
/// (Go turns it into a literal that joins its neighbours) from any other.
#[derive(Default)]
struct Runes {
    ranges: Vec<(u32, u32)>,
}

impl Runes {
    /// Adds `lo..=hi`; `false` once the class certainly holds more than two runes.
    fn add(&mut self, lo: u32, hi: u32) -> bool {
        if !self.ranges.contains(&(lo, hi)) {
            self.ranges.push((lo, hi));
        }
        self.ranges.len() <= 2 && hi - lo <= 1
    }

    /// The class's only rune and whether Go marks it case-folded (`[Aa]`), if it has one. With
    /// `fold` set, each rune brings its other cases.
    fn single(&self, fold: bool) -> Option<(u32, bool)> {
        let mut set: Vec<u32> = Vec::new();
        for &(lo, hi) in &self.ranges {
            for r in lo..=hi {
                let orbit = if fold { simple_fold_orbit(r)? } else { vec![r] };
                for f in orbit {
                    if !set.contains(&f) {
                        set.push(f);
                    }
                }
            }
        }
        set.sort_unstable();
        match set[..] {
            [r] => Some((r, false)),
            [a, b] if case_pair(a, b) => Some((a, true)),
            _ => None,
        }
    }
}

/// The runes `r` folds to, for ASCII (where Go's folding is known here): `k` and `s` also fold
/// to the Kelvin sign and the long s. `None` (not treated as one rune) elsewhere.
fn simple_fold_orbit(r: u32) -> Option<Vec<u32>> {
    let c = char::from_u32(r)?;
    if !c.is_ascii() {
        return None;
    }
    let mut orbit = vec![u32::from(c.to_ascii_lowercase())];
    if c.is_ascii_alphabetic() {
        orbit.push(u32::from(c.to_ascii_uppercase()));
    }
    match c.to_ascii_lowercase() {
        'k' => orbit.push(0x212A),
        's' => orbit.push(0x17F),
        _ => {}
    }
    Some(orbit)
}

/// Two runes that are each other's only other case (ASCII letters other than `k` and `s`).
fn case_pair(a: u32, b: u32) -> bool {
    let (Some(a), Some(b)) = (char::from_u32(a), char::from_u32(b)) else {
        return false;
    };
    a.is_ascii_uppercase() && b == a.to_ascii_lowercase() && !matches!(b, 'k' | 's')
}

#[cfg(test)]
mod tests;
