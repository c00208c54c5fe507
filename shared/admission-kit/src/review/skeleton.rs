//! Whether a JSON Patch applies to a raw object, without building the whole object.
//!
//! A mutator's patch is computed on typed values; before it is sent it must be known to apply
//! to the raw JSON the API server holds. Parsing that JSON into a [`Value`] only to try the patch
//! cost a fifth of a mutation (every string and map of the object allocated, then dropped). The
//! patch reads only the containers along its paths, so this builds a *skeleton*: those
//! containers with their keys and lengths, every other value a `null` placeholder, and tries the
//! patch on it. Hand-written because no crate builds a partial document from a set of pointers.
//!
//! The answer is exact one way: `true` means `json_patch::patch` succeeds on the full parse too
//! (same keys, same array lengths on every container a path goes through; a path never goes
//! through a placeholder because every container on it is built). `false` may also mean "not
//! sure"; callers then parse the whole object as before, so answers do not change.
//!
//! The text is read by a scanner, not by serde_json's visitor (which cost a quarter of a node
//! status mutation): the raw object is a [`RawValue`], whose text serde_json has already
//! accepted as JSON, so the scanner only finds where values start and end (`memchr` inside
//! strings) and says "not sure" wherever a [`Value`] parse could still refuse: a number with an
//! exponent or of 300 characters or more (it may be out of range), a `\u` escape of a surrogate
//! that is not part of a pair, nesting deeper than [`MAX_DEPTH`]. A key with an escape is
//! decoded by serde_json itself.

use json_patch::Patch;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Nesting the scanner answers for; serde_json refuses 128 levels, deeper objects are "not sure".
const MAX_DEPTH: usize = 100;

/// Whether `patch` applies to `raw` as it stands (see the module docs for what `false` means).
pub(crate) fn applies(raw: &RawValue, patch: &Patch) -> bool {
    let paths: Vec<Vec<String>> = patch
        .0
        .iter()
        .map(|op| tokens(op.path().as_str()))
        .collect();
    // A container is built when it is a strict ancestor of some operation's target.
    let wanted: Vec<&[String]> = paths
        .iter()
        .filter_map(|p| p.split_last().map(|(_, parents)| parents))
        .collect();
    let mut scan = Scan {
        text: raw.get(),
        at: 0,
        depth: 0,
    };
    let Some(mut doc) = scan.node(&wanted) else {
        return false;
    };
    scan.ws();
    scan.at == scan.text.len() && json_patch::patch(&mut doc, &patch.0).is_ok()
}

/// RFC 6901 reference tokens of a JSON pointer.
pub(crate) fn tokens(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// The paths that go on through the child named `token` of a value `wanted` go through.
fn child<'w>(wanted: &[&'w [String]], token: &str) -> Option<Vec<&'w [String]>> {
    let below: Vec<&[String]> = wanted
        .iter()
        .filter_map(|p| p.split_first())
        .filter(|(first, _)| first.as_str() == token)
        .map(|(_, rest)| rest)
        .collect();
    (!below.is_empty()).then_some(below)
}

/// A reading position in JSON text serde_json has accepted. Every method returns `None` for
/// "not sure" (or for text that is not what it expects, which an accepted text never is).
struct Scan<'t> {
    text: &'t str,
    at: usize,
    depth: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.at += 1;
        }
    }

    /// Steps into the container whose opening is the current byte.
    fn open(&mut self) -> Option<()> {
        self.depth += 1;
        self.at += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// After a container's opening or one of its members: `true` when `end` closes it here,
    /// `false` when a member follows (after its comma, if any).
    fn closes(&mut self, end: u8) -> Option<bool> {
        self.ws();
        match self.peek()? {
            b',' => {
                self.at += 1;
                Some(false)
            }
            b if b == end => {
                self.at += 1;
                self.depth -= 1;
                Some(true)
            }
            _ => Some(false),
        }
    }

    /// One value: built when paths go through it (`wanted` holds their remaining tokens; an
    /// empty one ends here), a placeholder otherwise.
    fn node(&mut self, wanted: &[&[String]]) -> Option<Value> {
        self.ws();
        let built = match self.peek()? {
            b'{' => {
                self.open()?;
                let mut out = Map::new();
                while !self.closes(b'}')? {
                    self.ws();
                    let key = self.key()?;
                    self.ws();
                    if self.peek()? != b':' {
                        return None;
                    }
                    self.at += 1;
                    let v = self.member(wanted, &key)?;
                    // A later duplicate wins, as in a `Value` parse.
                    out.insert(key, v);
                }
                Value::Object(out)
            }
            b'[' => {
                self.open()?;
                let mut items = Vec::new();
                while !self.closes(b']')? {
                    items.push(self.member(wanted, &items.len().to_string())?);
                }
                Value::Array(items)
            }
            _ => {
                self.skip()?;
                Value::Null
            }
        };
        Some(built)
    }

    /// The member named `token` of a built container.
    fn member(&mut self, wanted: &[&[String]], token: &str) -> Option<Value> {
        match child(wanted, token) {
            Some(below) => self.node(&below),
            None => self.skip().map(|()| Value::Null),
        }
    }

    /// Passes over one value, containers and all, without building it.
    fn skip(&mut self) -> Option<()> {
        let base = self.depth;
        loop {
            self.ws();
            match self.peek()? {
                b'"' => self.string()?,
                b'{' | b'[' => self.open()?,
                b'}' | b']' => {
                    self.depth = self.depth.checked_sub(1)?;
                    self.at += 1;
                }
                b',' | b':' => {
                    self.at += 1;
                    continue;
                }
                b'-' | b'0'..=b'9' => self.number()?,
                b't' | b'n' => self.at += 4,
                b'f' => self.at += 5,
                _ => return None,
            }
            if self.depth == base {
                return Some(());
            }
        }
    }

    /// A number; "not sure" when a `Value` parse might find it out of range.
    fn number(&mut self) -> Option<()> {
        let start = self.at;
        while let Some(b'0'..=b'9' | b'-' | b'.') = self.peek() {
            self.at += 1;
        }
        // An exponent is all that could follow the digits.
        (self.at - start < 300 && !matches!(self.peek(), Some(b'e' | b'E'))).then_some(())
    }

    /// A string, from its opening quote; "not sure" about a `\u` surrogate outside a pair.
    fn string(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        self.at += 1;
        loop {
            self.at += memchr::memchr2(b'"', b'\\', bytes.get(self.at..)?)?;
            if bytes[self.at] == b'"' {
                self.at += 1;
                return Some(());
            }
            if bytes.get(self.at + 1) != Some(&b'u') {
                self.at += 2;
                continue;
            }
            match self.hex(self.at + 2)? {
                0xD800..=0xDBFF => {
                    let paired = bytes.get(self.at + 6..self.at + 8)? == b"\\u"
                        && (0xDC00..=0xDFFF).contains(&self.hex(self.at + 8)?);
                    if !paired {
                        return None;
                    }
                    self.at += 12;
                }
                0xDC00..=0xDFFF => return None,
                _ => self.at += 6,
            }
        }
    }

    /// The four hex digits at `at`.
    fn hex(&self, at: usize) -> Option<u32> {
        let digits = self.text.get(at..at + 4)?;
        digits
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
            .then(|| u32::from_str_radix(digits, 16).ok())?
    }

    /// A member's key, decoded.
    fn key(&mut self) -> Option<String> {
        let start = self.at;
        if self.peek()? != b'"' {
            return None;
        }
        self.string()?;
        let quoted = self.text.get(start..self.at)?;
        let inner = quoted.get(1..quoted.len() - 1)?;
        if inner.contains('\\') {
            serde_json::from_str(quoted).ok()
        } else {
            Some(inner.to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The reference: parse the whole object and try the patch on it.
    fn full(raw: &str, patch: &Patch) -> bool {
        serde_json::from_str::<Value>(raw)
            .is_ok_and(|mut doc| json_patch::patch(&mut doc, &patch.0).is_ok())
    }

    fn patch(ops: Value) -> Patch {
        serde_json::from_value(ops).unwrap()
    }

    #[test]
    fn answers_as_the_full_parse() {
        let objects = [
            r#"{"metadata":{"name":"m","labels":{"a":"1"}},"spec":{"backends":[{"name":"b","env":[{"name":"x"}]},{"name":"c"}],"n":1.5,"t":true,"z":null}}"#,
            r#"{"spec":{"backends":[]}}"#,
            r#"{"spec":{"backends":"not a list"}}"#,
            r#"{"spec":null}"#,
            r#"{"spec":{"a/b":{"c~d":1},"backends":[{"name":"b"}]},"spec":{"backends":[{},{},{}]}}"#,
            r#"{"metadata":{"name":"\u00e9\"q"},"spec":{"k\n":"v","backends":[[1,[2,{}]]]}}"#,
            r#"{"spec":{"backends":[{"name":"b"}]},"x":1e400}"#,
            r#"{"spec":{"backends":[{"name":"b"}]},"x":"\ud800"}"#,
            r#"[{"a":1},{"b":2}]"#,
            "3",
        ];
        let patches = [
            json!([{"op": "add", "path": "/spec/backends/0/grace", "value": "30s"}]),
            json!([{"op": "add", "path": "/spec/backends/1/grace", "value": "30s"},
                   {"op": "add", "path": "/spec/cost", "value": 200}]),
            json!([{"op": "replace", "path": "/metadata/labels/a", "value": "2"}]),
            json!([{"op": "remove", "path": "/metadata/labels"}]),
            json!([{"op": "remove", "path": "/spec/backends/1"},
                   {"op": "remove", "path": "/spec/backends/0"}]),
            json!([{"op": "add", "path": "/spec/backends/2", "value": {}},
                   {"op": "add", "path": "/spec/backends/3", "value": {}}]),
            json!([{"op": "add", "path": "/spec/backends/-", "value": {}}]),
            json!([{"op": "add", "path": "/spec/backends/01", "value": {}}]),
            json!([{"op": "add", "path": "/spec/new", "value": {}},
                   {"op": "add", "path": "/spec/new/inner", "value": 1}]),
            json!([{"op": "replace", "path": "/spec", "value": {}},
                   {"op": "add", "path": "/spec/x", "value": 1}]),
            json!([{"op": "add", "path": "/spec/a~1b/c~0d", "value": 2}]),
            json!([{"op": "replace", "path": "/spec/k\n", "value": 2}]),
            json!([{"op": "add", "path": "/spec/backends/0/0/1/1/x", "value": 2}]),
            json!([{"op": "add", "path": "/spec/n/x", "value": 2}]),
            json!([{"op": "replace", "path": "/spec/z", "value": 2}]),
            json!([{"op": "add", "path": "/spec/z/x", "value": 2}]),
            json!([{"op": "add", "path": "/1/c", "value": 3}]),
            json!([{"op": "replace", "path": "", "value": 3}]),
            json!([{"op": "remove", "path": "/metadata/name"}]),
        ];
        let mut agreed = [0, 0];
        for raw in objects {
            let rv = RawValue::from_string(raw.to_owned()).unwrap();
            for ops in &patches {
                let p = patch(ops.clone());
                let want = full(raw, &p);
                assert_eq!(applies(&rv, &p), want, "{raw} with {ops}");
                agreed[usize::from(want)] += 1;
            }
        }
        // Both answers are exercised, not only one.
        assert!(agreed[0] > 20 && agreed[1] > 20, "{agreed:?}");
    }

    /// What a `Value` parse might still refuse is "not sure": never `true` where the full parse
    /// fails, and `false` for these even where it succeeds (the caller parses them whole).
    #[test]
    fn not_sure_where_a_value_parse_might_refuse() {
        let p = patch(json!([{"op": "add", "path": "/spec/x", "value": 1}]));
        for raw in [
            r#"{"spec":{},"n":1e5}"#,
            r#"{"spec":{},"n":1E400}"#,
            r#"{"spec":{"n":-2.5e-3}}"#,
            r#"{"spec":{},"s":"\ud800"}"#,
            r#"{"spec":{},"s":"\udc00\udc00"}"#,
            r#"{"spec":{},"s":"\ud800\u0041"}"#,
            r#"{"spec":{},"\ud800":1}"#,
        ] {
            let rv = RawValue::from_string(raw.to_owned()).unwrap();
            assert!(!applies(&rv, &p), "{raw}");
        }
        let long = format!(r#"{{"spec":{{}},"n":{}}}"#, "9".repeat(400));
        let rv = RawValue::from_string(long.clone()).unwrap();
        assert!(!full(&long, &p) && !applies(&rv, &p));
    }

    /// Whitespace, escaped keys and well-formed escapes are followed (a path through
    /// `"sp\u0065c"` goes through `spec`), and numbers a `Value` parse keeps in range are sure.
    #[test]
    fn follows_whitespace_escapes_and_numbers() {
        let objects = [
            " {\n \"sp\\u0065c\" : { \"a\" :\t[ 1 , -0.5 , 18446744073709551616 ] } } \r\n",
            r#"{"spec":{"s":"\ud83d\ude00 \u00e9 \\ \" \/ \n","a":[true,false,null,{}]}}"#,
            r#"{"spec":{"a":[],"b":"]}"},"spec":{"a":[[],{"x":[]}]}}"#,
        ];
        let patches = [
            json!([{"op": "add", "path": "/spec/a/1", "value": 2}]),
            json!([{"op": "add", "path": "/spec/a/3", "value": 2}]),
            json!([{"op": "remove", "path": "/spec/s"}]),
            json!([{"op": "add", "path": "/spec/a/1/x/0", "value": 2}]),
        ];
        let mut agreed = [0, 0];
        for raw in objects {
            let rv = RawValue::from_string(raw.to_owned()).unwrap();
            for ops in &patches {
                let p = patch(ops.clone());
                let want = full(raw, &p);
                assert_eq!(applies(&rv, &p), want, "{raw} with {ops}");
                agreed[usize::from(want)] += 1;
            }
        }
        assert!(agreed[0] > 0 && agreed[1] > 0, "{agreed:?}");
    }

    /// Generated objects, written compact or pretty, some with a key escaped, against patches
    /// through paths they have and paths they lack: the same answer as the full parse.
    #[test]
    fn answers_as_the_full_parse_on_generated_objects() {
        fn value(rng: &mut fastrand::Rng, depth: u32) -> Value {
            let scalars = [
                json!(null),
                json!(true),
                json!(-3),
                json!(0.25),
                json!("x\"]"),
            ];
            let keys = ["a", "b", "c/d", "0"];
            match rng.u32(0..if depth == 0 { 1 } else { 4 }) {
                0 => scalars[rng.usize(0..scalars.len())].clone(),
                1 => Value::Array(
                    (0..rng.usize(0..4))
                        .map(|_| value(rng, depth - 1))
                        .collect(),
                ),
                _ => Value::Object(
                    (0..rng.usize(0..4))
                        .map(|_| (keys[rng.usize(0..4)].to_owned(), value(rng, depth - 1)))
                        .collect(),
                ),
            }
        }
        let mut rng = fastrand::Rng::with_seed(7);
        let mut agreed = [0, 0];
        for _ in 0..5_000 {
            let doc = value(&mut rng, 4);
            let mut raw = if rng.bool() {
                serde_json::to_string(&doc).unwrap()
            } else {
                serde_json::to_string_pretty(&doc).unwrap()
            };
            if rng.bool() {
                raw = raw.replace(r#""a""#, r#""\u0061""#);
            }
            let rv = RawValue::from_string(raw.clone()).unwrap();
            let path: String = (0..rng.usize(1..4))
                .map(|_| ["/a", "/b", "/c~1d", "/0", "/1", "/-"][rng.usize(0..6)])
                .collect();
            let op = ["add", "remove", "replace"][rng.usize(0..3)];
            let p = patch(json!([{"op": op, "path": path, "value": 1}]));
            let want = full(&raw, &p);
            assert_eq!(applies(&rv, &p), want, "{raw} with {op} {path}");
            agreed[usize::from(want)] += 1;
        }
        assert!(agreed[0] > 1_000 && agreed[1] > 500, "{agreed:?}");
    }

    #[test]
    fn nesting_is_refused_where_the_full_parse_refuses_it() {
        let p = patch(json!([{"op": "add", "path": "/b", "value": 1}]));
        let mut compared = 0;
        for depth in 90..140 {
            let deep = format!("{{\"a\":{}1{}}}", "[".repeat(depth), "]".repeat(depth));
            // Raw capture may itself refuse the depth; such an object never reaches a patch.
            if let Ok(rv) = RawValue::from_string(deep.clone()) {
                let got = applies(&rv, &p);
                // Sure up to the scanner's depth; beyond it "not sure" (false) at worst.
                if depth < MAX_DEPTH {
                    assert_eq!(got, full(&deep, &p), "depth {depth}");
                } else {
                    assert!(!got, "depth {depth}");
                }
                compared += 1;
            }
        }
        assert!(compared > 0);
    }
}
