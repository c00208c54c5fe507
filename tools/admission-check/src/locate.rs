//! The line of a field in the manifest text, so that a denial points at the field it names
//! (`spec.template.spec.containers[0].resources`) and not at its document's first line.
//!
//! The document is read again with an event parser that reports where each node starts
//! (`granit-parser`, the parser under `serde-saphyr`, already in the dependency tree through
//! kube); serde's YAML and JSON readers keep no positions. JSON is read by the same parser: a
//! JSON text is a YAML flow document. Only findings are located, so the second read is paid only
//! for denials and warnings.

use std::collections::HashMap;

use granit_parser::{Event, Parser, ScalarStyle};

/// The segments of a field path as Kubernetes prints it: `a.b[0][key.with.dots].c` is
/// `a`, `b`, `0`, `key.with.dots`, `c`.
fn segments(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
            }
            '[' => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
                let inside: String = chars.by_ref().take_while(|c| *c != ']').collect();
                out.push(inside);
            }
            _ => current.push(c),
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Where one container is in the walk: a mapping waiting for its next key or value, or a
/// sequence counting its items.
enum Frame {
    Mapping {
        path: Vec<String>,
        key: Option<String>,
    },
    Sequence {
        path: Vec<String>,
        next: usize,
    },
}

/// A position in the text: line and column, both from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The line.
    pub line: usize,
    /// The column (in characters).
    pub column: usize,
}

/// What one read of a document finds.
struct Walk {
    /// Where each node starts (a mapping value at its key).
    at: HashMap<Vec<String>, Position>,
    /// Every plain (unquoted, untagged) scalar value, with its path.
    plain: Vec<(Vec<String>, String)>,
}

/// Reads the first document of `text`, counting lines from `first_line`.
fn walk(text: &str, first_line: usize) -> Walk {
    let mut found = HashMap::new();
    let mut plain = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut started = false;
    for next in Parser::new_from_str(text) {
        // What was read before an error is still right; the document is already known to
        // parse (it was read before it was checked).
        let Ok((event, span)) = next else { break };
        let here = Position {
            line: span.start.line() + first_line - 1,
            column: span.start.col() + 1,
        };
        let opens = match &event {
            Event::MappingStart(..) => Some(true),
            Event::SequenceStart(..) => Some(false),
            Event::Scalar(..) | Event::Alias(..) => None,
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                if started && stack.is_empty() {
                    break;
                }
                continue;
            }
            Event::DocumentEnd if started => break,
            _ => continue,
        };
        // The node's path, or None when it is a mapping key.
        let path = match stack.last_mut() {
            None => Some(Vec::new()),
            Some(Frame::Mapping { path, key }) => match key.take() {
                None => {
                    let name = match &event {
                        Event::Scalar(text, ..) => text.to_string(),
                        _ => String::new(),
                    };
                    let mut p = path.clone();
                    p.push(name.clone());
                    found.entry(p).or_insert(here);
                    *key = Some(name);
                    None
                }
                Some(name) => {
                    let mut p = path.clone();
                    p.push(name);
                    Some(p)
                }
            },
            Some(Frame::Sequence { path, next }) => {
                let mut p = path.clone();
                p.push(next.to_string());
                *next += 1;
                Some(p)
            }
        };
        if let (Some(p), Event::Scalar(value, ScalarStyle::Plain, _, None)) = (&path, &event) {
            plain.push((p.clone(), value.to_string()));
        }
        match (path, opens) {
            (Some(p), open) => {
                found.entry(p.clone()).or_insert(here);
                started = true;
                match open {
                    Some(true) => stack.push(Frame::Mapping { path: p, key: None }),
                    Some(false) => stack.push(Frame::Sequence { path: p, next: 0 }),
                    None if stack.is_empty() => break,
                    None => {}
                }
            }
            // A complex key (a mapping or sequence as a key): its contents are not fields.
            (None, Some(true)) => stack.push(Frame::Mapping {
                path: Vec::new(),
                key: None,
            }),
            (None, Some(false)) => stack.push(Frame::Sequence {
                path: Vec::new(),
                next: 0,
            }),
            (None, None) => {}
        }
    }
    Walk { at: found, plain }
}

/// The position of `field` (as a rule names it) of the object at `object_path` (`items[2]`,
/// `request.object`, or empty) in the document of `text` that starts on line `doc_line`: the
/// field's own position, else that of the nearest enclosing field the text has (a finding may
/// name a field that is absent), else the object's start (`doc_line`, column 1, if none is
/// found).
pub fn position_of(text: &str, doc_line: usize, object_path: &str, field: &str) -> Position {
    let start: usize = text
        .split_inclusive('\n')
        .take(doc_line.saturating_sub(1))
        .map(str::len)
        .sum();
    let fallback = Position {
        line: doc_line,
        column: 1,
    };
    let Some(rest) = text.get(start..) else {
        return fallback;
    };
    let found = walk(rest, doc_line).at;
    let mut path = segments(object_path);
    path.extend(segments(field));
    while !path.is_empty() {
        if let Some(p) = found.get(&path) {
            return *p;
        }
        path.pop();
    }
    found.get(&path).copied().unwrap_or(fallback)
}

/// The line of `field`, as [`position_of`].
pub fn line_of(text: &str, doc_line: usize, object_path: &str, field: &str) -> usize {
    position_of(text, doc_line, object_path, field).line
}

/// The plain (unquoted, untagged) scalar values of the YAML document `text`, each with its
/// path: the values a YAML 1.1 reader may type differently (`crate::input`).
pub fn plain_scalars(text: &str) -> Vec<(Vec<String>, String)> {
    walk(text, 1).plain
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPLOYMENT: &str = "# Source: chart/templates/web.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, koordinator.sh/qosClass: BE}
spec:
  template:
    spec:
      containers:
      - name: a
        image: x
      - name: b
        resources:
          limits:
            cpu: 1
";

    #[test]
    fn fields_are_found_at_their_lines() {
        let at = |f| line_of(DEPLOYMENT, 1, "", f);
        assert_eq!(at("spec.template"), 8);
        assert_eq!(at("spec.template.spec.containers[1].resources.limits"), 15);
        assert_eq!(
            at("spec.template.spec.containers[1].resources.limits[cpu]"),
            16
        );
        assert_eq!(at("spec.template.spec.containers[0].image"), 12);
        assert_eq!(at("metadata.labels[koordinator.sh/qosClass]"), 6);
        // Absent: the nearest enclosing field that is there; nothing: the object's first line
        // (after the comment the document starts with).
        assert_eq!(at("spec.template.spec.containers[0].resources"), 11);
        assert_eq!(at("status.phase"), 2);
        assert_eq!(at(""), 2);
        // Columns from 1: the key of a mapping value, the dash's item of a sequence.
        let pos = |f| position_of(DEPLOYMENT, 1, "", f);
        assert_eq!(
            pos("spec.template.spec.containers[0].image"),
            Position {
                line: 12,
                column: 9
            }
        );
        assert_eq!(
            pos("metadata.labels[koordinator.sh/qosClass]"),
            Position {
                line: 6,
                column: 22
            }
        );
    }

    #[test]
    fn plain_scalars_are_told_from_quoted_ones() {
        let text = "a: yes\nb: 'no'\nc: [on, \"off\", 0777]\nd: |\n  y\n";
        let plain: Vec<(String, String)> = plain_scalars(text)
            .into_iter()
            .map(|(p, v)| (p.join("."), v))
            .collect();
        assert_eq!(
            plain,
            [
                ("a".to_owned(), "yes".to_owned()),
                ("c.0".to_owned(), "on".to_owned()),
                ("c.2".to_owned(), "0777".to_owned())
            ]
        );
    }

    #[test]
    fn documents_lists_reviews_and_json_are_located() {
        let stream = "kind: A\nspec: {x: 1}\n---\nkind: B\nspec:\n  y: 2\n";
        assert_eq!(line_of(stream, 3, "", "spec.y"), 6);
        let list = "{\"kind\": \"List\", \"items\": [\n  {\"spec\": {}},\n  {\"spec\": {\n    \"y\": 2}}]}\n";
        assert_eq!(line_of(list, 1, "items[1]", "spec.y"), 4);
        let review = "{\"request\": {\n \"object\": {\n  \"spec\": {\"z\": 1}}}}";
        assert_eq!(line_of(review, 1, "request.object", "spec.z"), 3);
        // A JSON stream: the second value, read from its first line, stops at its end.
        let json_stream = "{\"a\": 1}\n{\"spec\":\n {\"b\": 2}}\n{\"c\": 3}\n";
        assert_eq!(line_of(json_stream, 2, "", "spec.b"), 3);
    }

    #[test]
    fn segments_read_kubernetes_field_paths() {
        assert_eq!(
            segments("a.b[0][key.with.dots].c"),
            ["a", "b", "0", "key.with.dots", "c"]
        );
        assert!(segments("").is_empty());
    }
}
