//! Reading manifests: files, directories (recursively), standard input; multi-document YAML or
//! JSON; Lists; AdmissionReviews. Every object keeps where it came from (file, document, line),
//! so a report and an error can point at it.

use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use admission_kit::Operation;
use serde::Deserialize as _;
use serde_json::Value;

use crate::schema::Node;

/// Where an object was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The file as given (or found under a given directory); `-` for standard input.
    pub file: String,
    /// The document's number in the file, from 1 (empty documents are not counted).
    pub document: usize,
    /// The line the document starts on, from 1.
    pub line: usize,
    /// The object's position in a List's `items`, from 0.
    pub item: Option<usize>,
    /// The object's place in its document, as a field path: empty for the document itself,
    /// `items[2]` in a List, `[2]` in a JSON array, `request.object` in an AdmissionReview.
    pub path: String,
    /// The whole file's text, to locate a finding's field in (`crate::locate`).
    pub text: Option<std::sync::Arc<str>>,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.document)?;
        if let Some(i) = self.item {
            write!(f, "[{i}]")?;
        }
        Ok(())
    }
}

/// What an AdmissionReview said about its object beyond the object itself.
#[derive(Debug, Clone, PartialEq)]
pub struct FromReview {
    /// The operation.
    pub operation: Operation,
    /// The subresource, if any.
    pub sub_resource: Option<String>,
    /// The existing object (UPDATE, DELETE).
    pub old_object: Option<Value>,
    /// The request's namespace.
    pub namespace: Option<String>,
    /// The request's userInfo.
    pub user_info: Option<Value>,
}

/// One object to check.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Where it was read.
    pub source: Source,
    /// The object, with `apiVersion` and `kind`.
    pub object: Value,
    /// Set when the object came from an AdmissionReview.
    pub review: Option<FromReview>,
    /// Label and annotation values YAML typed as booleans or numbers, read as the strings
    /// they spell: the API server refuses them as written (API-1).
    pub retyped: Vec<crate::apiserver::Retyped>,
    /// Keys the document gives twice, as field paths: kubectl keeps the last value.
    pub duplicates: Vec<String>,
    /// Set when the document is no Kubernetes object but a tool's configuration: what it is.
    pub not_an_object: Option<String>,
}

impl Manifest {
    /// What reading the manifest found that the API server never sees: a warning per key
    /// given twice.
    pub fn reader_warnings(&self) -> Vec<String> {
        self.duplicates
            .iter()
            .map(|d| format!("{d}: the key is given twice; kubectl sends only the last value"))
            .collect()
    }
}

/// Why input could not be read: the run stops with exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A document is not YAML or JSON, or not a Kubernetes object.
    #[error("{file}: document {document} (line {line}): {message}")]
    Parse {
        /// The file.
        file: String,
        /// The document's number, from 1.
        document: usize,
        /// The line where the problem is, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

impl InputError {
    /// The file (or directory) that could not be read.
    pub fn file(&self) -> &str {
        match self {
            InputError::Read { path, .. } => path,
            InputError::Parse { file, .. } => file,
        }
    }

    /// The document and the line the problem is at, when it is in a document.
    pub fn document_line(&self) -> Option<(usize, usize)> {
        match self {
            InputError::Read { .. } => None,
            InputError::Parse { document, line, .. } => Some((*document, *line)),
        }
    }

    /// What is wrong, without the file's name.
    pub fn reason(&self) -> String {
        match self {
            InputError::Read { source, .. } => source.to_string(),
            InputError::Parse { message, .. } => message.clone(),
        }
    }
}

/// Whether a file under a directory is read: YAML and JSON files only.
fn is_manifest(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), InputError> {
    let read_err = |source| InputError::Read {
        path: dir.display().to_string(),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_err)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_err)?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if is_manifest(&p) {
            out.push(p);
        }
    }
    Ok(())
}

/// The files named by `paths`: files as given, directories walked in name order (YAML and JSON
/// files only), `-` for standard input.
pub fn files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, InputError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Reads every object of `paths` (see [`files`]); the first file that cannot be read stops it.
pub fn read(paths: &[PathBuf]) -> Result<Vec<Manifest>, InputError> {
    let mut out = Vec::new();
    for f in files(paths)? {
        out.extend(read_file(&f)?);
    }
    Ok(out)
}

/// Reads every object of `paths`, file by file, as the caller asks for them: a file that cannot
/// be read is an `Err` among the files and every other file is still read (a chart's
/// `Chart.yaml` or a template in a directory of manifests must not hide the rest). One file's
/// objects are in memory at a time, so a run over thousands of files holds what it reports, not
/// every object it read.
pub fn read_each(
    paths: &[PathBuf],
) -> impl Iterator<Item = Result<Vec<Manifest>, InputError>> + Send + use<> {
    let (files, listing) = match files(paths) {
        Ok(f) => (f, None),
        Err(e) => (Vec::new(), Some(Err(e))),
    };
    listing
        .into_iter()
        .chain(files.into_iter().map(|f| read_file(&f)))
}

fn read_file(f: &Path) -> Result<Vec<Manifest>, InputError> {
    let name = f.display().to_string();
    let text = if name == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|source| InputError::Read {
                path: "standard input".into(),
                source,
            })?;
        s
    } else {
        std::fs::read_to_string(f).map_err(|source| InputError::Read {
            path: name.clone(),
            source,
        })?
    };
    if let Some(line) = template_line(&text) {
        return Err(InputError::Parse {
            file: name,
            document: 1,
            line,
            message: "a Go or Helm template, not a manifest: render it first (`helm template`, \
                      `kustomize build`) and check the output"
                .into(),
        });
    }
    parse(&name, &text)
}

/// The first line holding an unquoted Go template action (`{{ … }}` as a value, a list item or
/// a line of its own), if any: such a file is a template (Helm's `templates/`, an e2e suite's
/// manifest), which no YAML reader reads as its author meant. An action inside a quoted string
/// is text.
fn template_line(text: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let t = l.trim_start();
            let t = t.strip_prefix("- ").map_or(t, str::trim_start);
            !t.starts_with('#')
                && t.contains("}}")
                && (t.starts_with("{{") || t.contains(": {{") || t.contains(":{{"))
        })
        .map(|i| i + 1)
}

/// A document's text and the line it starts on.
struct Doc<'a> {
    text: &'a str,
    line: usize,
}

/// Splits a YAML stream at its `---` and `...` marker lines. Done by hand rather than by
/// serde_yaml_ng's multi-document deserializer because that one reports neither where a
/// document starts nor, after an error, where the next begins: both are needed to name the
/// document and line of every object.
fn split_yaml(text: &str) -> Vec<Doc<'_>> {
    let mut docs = Vec::new();
    let (mut start, mut start_line) = (0usize, 1usize);
    let mut offset = 0usize;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let bare = line.trim_end_matches(['\n', '\r']);
        let marker =
            bare == "---" || bare.starts_with("--- ") || bare.starts_with("---\t") || bare == "...";
        if marker {
            docs.push(Doc {
                text: &text[start..offset],
                line: start_line,
            });
            // Content after `--- ` on the marker line belongs to the new document.
            start = if bare.starts_with("---") && bare.len() > 3 {
                offset + 4
            } else {
                offset + line.len()
            };
            start_line = if start == offset + line.len() {
                i + 2
            } else {
                i + 1
            };
        }
        offset += line.len();
    }
    docs.push(Doc {
        text: &text[start..],
        line: start_line,
    });
    docs
}

/// A JSON value read with every mapping's keys checked: a key given twice keeps its last value,
/// as kubectl's reader (Go's `yaml.v2` and `encoding/json` into a map) keeps it, and is
/// remembered, so that the check warns of it: the API server never sees the first value.
struct Strict {
    value: Value,
    /// The field paths of the keys given twice (`metadata.name`, `spec.containers[0].image`).
    duplicates: Vec<String>,
}

impl Strict {
    fn leaf(value: Value) -> Self {
        Self {
            value,
            duplicates: Vec::new(),
        }
    }
}

/// `head` then `rest`, as a field path (`a.b`, `a[0]`).
fn join_path(head: &str, rest: &str) -> String {
    if rest.starts_with('[') {
        format!("{head}{rest}")
    } else {
        format!("{head}.{rest}")
    }
}

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Strict;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON or YAML value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Strict, E> {
                Ok(Strict::leaf(Value::Bool(b)))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Strict, E> {
                Ok(Strict::leaf(Value::from(n)))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Strict, E> {
                Ok(Strict::leaf(Value::from(n)))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Strict, E> {
                // kubectl sends a whole float (`10.0`) as Go's encoding/json prints it: `10`.
                if n.fract() == 0.0 && n.abs() < 9.0e15 {
                    return Ok(Strict::leaf(Value::from(n as i64)));
                }
                Ok(Strict::leaf(Value::from(n)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Strict, E> {
                Ok(Strict::leaf(Value::String(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Strict, E> {
                Ok(Strict::leaf(Value::String(s)))
            }
            fn visit_unit<E>(self) -> Result<Strict, E> {
                Ok(Strict::leaf(Value::Null))
            }
            fn visit_none<E>(self) -> Result<Strict, E> {
                Ok(Strict::leaf(Value::Null))
            }
            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Strict, D::Error> {
                Strict::deserialize(d)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Strict, A::Error> {
                let mut v = Vec::new();
                let mut duplicates = Vec::new();
                while let Some(item) = a.next_element::<Strict>()? {
                    let i = v.len();
                    duplicates.extend(
                        item.duplicates
                            .iter()
                            .map(|d| join_path(&format!("[{i}]"), d)),
                    );
                    v.push(item.value);
                }
                Ok(Strict {
                    value: Value::Array(v),
                    duplicates,
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Strict, A::Error> {
                let mut m = serde_json::Map::new();
                let mut duplicates = Vec::new();
                while let Some(k) = a.next_key::<String>()? {
                    let v: Strict = a.next_value()?;
                    duplicates.extend(v.duplicates.iter().map(|d| join_path(&k, d)));
                    if m.insert(k.clone(), v.value).is_some() {
                        duplicates.push(k);
                    }
                }
                Ok(Strict {
                    value: Value::Object(m),
                    duplicates,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// The values of a JSON text (one or a stream), each with its line.
fn json_values(text: &str) -> Result<Vec<(usize, Strict)>, (usize, usize, String)> {
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Strict>();
    loop {
        let at = stream.byte_offset();
        let line = line_of(text, at);
        match stream.next() {
            None => return Ok(values),
            Some(Ok(v)) => values.push((line, v)),
            Some(Err(e)) => return Err((values.len() + 1, e.line(), format!("not JSON: {e}"))),
        }
    }
}

/// The objects of one file's text (YAML or JSON; a UTF-8 byte-order mark is skipped).
pub fn parse(file: &str, text: &str) -> Result<Vec<Manifest>, InputError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut values: Vec<(usize, Strict)> = Vec::new();
    let err = |document: usize, line: usize, message: String| InputError::Parse {
        file: file.to_owned(),
        document,
        line,
        message,
    };
    let looks_json = matches!(text.trim_start().as_bytes().first(), Some(b'{' | b'['));
    // JSON first when it looks like JSON; flow-style YAML (`{apiVersion: v1, …}`) looks alike
    // and is read as YAML when it is not JSON.
    let json = looks_json.then(|| json_values(text));
    match json {
        Some(Ok(v)) => values = v,
        Some(Err(_)) | None => {
            for doc in split_yaml(text) {
                let de = serde_yaml_ng::Deserializer::from_str(doc.text);
                match Strict::deserialize(de) {
                    Ok(Strict {
                        value: Value::Null, ..
                    }) => {}
                    Ok(mut v) => {
                        as_go_reads_it(doc.text, &mut v.value);
                        values.push((doc.line, v));
                    }
                    Err(e) => {
                        if let Some(Err((document, line, msg))) = json {
                            // Neither: JSON's error, since it looked like JSON.
                            return Err(err(document, line, msg));
                        }
                        let line =
                            doc.line + e.location().map_or(0, |l| l.line().saturating_sub(1));
                        let msg = format!("not YAML: {e}");
                        return Err(err(values.len() + 1, line, msg));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    let shared: std::sync::Arc<str> = std::sync::Arc::from(text);
    for (i, (line, v)) in values.into_iter().enumerate() {
        let source = Source {
            file: file.to_owned(),
            document: i + 1,
            line,
            item: None,
            path: String::new(),
            text: Some(shared.clone()),
        };
        expand(source, v.value, &v.duplicates, &mut out).map_err(|m| err(i + 1, line, m))?;
    }
    Ok(out)
}

/// Types the plain scalars of a YAML document as kubectl's reader does. kubectl (and the API
/// server's own YAML input) read YAML 1.1 through sigs.k8s.io/yaml: an unquoted `yes`, `no`,
/// `on`, `off`, `y` or `n` is a boolean, `0777` is octal 511, `1_000` is 1000. serde_yaml_ng
/// reads YAML 1.2, where all of these are strings, so the manifest we would check is not the
/// one the cluster receives: a label `a: yes` the API server refuses, a `defaultMode: 0777` it
/// takes as 511. Only quoted text stays text.
fn as_go_reads_it(text: &str, v: &mut Value) {
    // Most documents hold no word YAML 1.1 reads differently: skip the second parse for them.
    let candidate = text
        .split(|c: char| c.is_whitespace() || ",[]{}:\"'#".contains(c))
        .any(|w| !w.is_empty() && yaml_1_1(w).is_some());
    if !candidate {
        return;
    }
    for (path, plain) in crate::locate::plain_scalars(text) {
        let Some(go) = yaml_1_1(&plain) else { continue };
        let mut at = Some(&mut *v);
        for key in &path {
            at = match at {
                Some(Value::Object(m)) => m.get_mut(key.as_str()),
                Some(Value::Array(a)) => key.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
                _ => None,
            };
        }
        if let Some(slot @ Value::String(_)) = at
            && slot.as_str() == Some(plain.as_str())
        {
            *slot = go;
        }
    }
}

/// The value YAML 1.1 (Go's `yaml.v2` resolver) gives a plain scalar where YAML 1.2 gives a
/// string; None where the two agree.
fn yaml_1_1(plain: &str) -> Option<Value> {
    match plain {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => return Some(Value::Bool(true)),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => return Some(Value::Bool(false)),
        _ => {}
    }
    // Integers as Go's strconv.ParseInt(s, 0, 64) reads them once `_` is dropped.
    let digits: String = plain.chars().filter(|c| *c != '_').collect();
    let (negative, body) = match digits.as_bytes().first() {
        Some(b'-') => (true, &digits[1..]),
        Some(b'+') => (false, &digits[1..]),
        _ => (false, digits.as_str()),
    };
    let (radix, rest) = match body.get(..2) {
        Some("0x" | "0X") => (16, &body[2..]),
        Some("0o" | "0O") => (8, &body[2..]),
        Some("0b" | "0B") => (2, &body[2..]),
        _ if body.len() > 1 && body.starts_with('0') => (8, &body[1..]),
        _ => (10, body),
    };
    if rest.is_empty() || (radix == 10 && !plain.contains('_')) {
        return None;
    }
    // `08` is no octal number: Go's resolver then reads it as the float 8.
    let magnitude = i64::from_str_radix(rest, radix)
        .ok()
        .or_else(|| (radix == 8).then(|| body.parse::<i64>().ok()).flatten())?;
    Some(Value::from(if negative { -magnitude } else { magnitude }))
}

fn line_of(text: &str, byte: usize) -> usize {
    let skip = text[byte.min(text.len())..]
        .find(|c: char| !c.is_whitespace())
        .map_or(byte, |n| byte + n);
    text.as_bytes()[..skip.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Adds the object(s) of one document: a List's items, a review's object, or the object.
/// The paths of `duplicates` under `prefix` (an item's place in its document), relative to it.
fn under(duplicates: &[String], prefix: &str) -> Vec<String> {
    if prefix.is_empty() {
        return duplicates.to_vec();
    }
    duplicates
        .iter()
        .filter_map(|d| {
            let rest = d.strip_prefix(prefix)?;
            Some(rest.strip_prefix('.').unwrap_or(rest).to_owned())
        })
        .filter(|d| !d.is_empty())
        .collect()
}

fn expand(
    source: Source,
    v: Value,
    duplicates: &[String],
    out: &mut Vec<Manifest>,
) -> Result<(), String> {
    if let Value::Array(items) = v {
        for (i, item) in items.into_iter().enumerate() {
            let s = Source {
                item: Some(i),
                path: format!("[{i}]"),
                ..source.clone()
            };
            let d = under(duplicates, &s.path);
            out.push(object(s, item, None, d)?);
        }
        return Ok(());
    }
    let kind = str_of(&v, "kind").unwrap_or_default().to_owned();
    if kind.ends_with("List") && v.get("items").is_some_and(Value::is_array) {
        let api_version = str_of(&v, "apiVersion").unwrap_or_default().to_owned();
        let item_kind = kind.trim_end_matches("List").to_owned();
        let Value::Object(mut list) = v else {
            return Ok(());
        };
        let Some(Value::Array(items)) = list.remove("items") else {
            return Ok(());
        };
        for (i, mut item) in items.into_iter().enumerate() {
            // A typed list (PodList) may leave its items' apiVersion and kind out.
            if let Value::Object(m) = &mut item
                && kind != "List"
            {
                m.entry("apiVersion")
                    .or_insert_with(|| Value::String(api_version.clone()));
                m.entry("kind")
                    .or_insert_with(|| Value::String(item_kind.clone()));
            }
            let s = Source {
                item: Some(i),
                path: format!("items[{i}]"),
                ..source.clone()
            };
            let d = under(duplicates, &s.path);
            out.push(object(s, item, None, d)?);
        }
        return Ok(());
    }
    if kind == "AdmissionReview" {
        out.push(from_review(source, v, duplicates)?);
        return Ok(());
    }
    out.push(object(source, v, None, duplicates.to_vec())?);
    Ok(())
}

fn from_review(mut source: Source, v: Value, duplicates: &[String]) -> Result<Manifest, String> {
    let Some(req) = v.get("request") else {
        return Err("an AdmissionReview without a request".into());
    };
    let operation: Operation = req
        .get("operation")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| format!("request.operation: {e}"))?
        .unwrap_or(Operation::Create);
    let present = |k: &str| req.get(k).filter(|o| !o.is_null()).cloned();
    let (obj, old) = if operation == Operation::Delete {
        source.path = "request.oldObject".into();
        (present("oldObject"), None)
    } else {
        source.path = "request.object".into();
        (present("object"), present("oldObject"))
    };
    let Some(obj) = obj else {
        return Err(format!(
            "the AdmissionReview's request carries no object for {}",
            operation.as_str()
        ));
    };
    let review = FromReview {
        operation,
        sub_resource: str_of(req, "subResource").map(str::to_owned),
        old_object: old,
        namespace: str_of(req, "namespace").map(str::to_owned),
        user_info: present("userInfo"),
    };
    let d = under(duplicates, &source.path);
    object(source, obj, Some(review), d)
}

/// Checks that `v` is an object with apiVersion and kind, and reads label and annotation
/// values that YAML typed as booleans or numbers as the strings they spell, remembering each
/// (the API server refuses them unquoted: API-1).
fn object(
    source: Source,
    mut v: Value,
    review: Option<FromReview>,
    duplicates: Vec<String>,
) -> Result<Manifest, String> {
    if !v.is_object() {
        return Err(format!(
            "not a Kubernetes object (a {}, not a mapping)",
            kind_of(&v)
        ));
    }
    if let Some(what) = tool_configuration(&v) {
        return Ok(Manifest {
            source,
            object: v,
            review,
            retyped: Vec::new(),
            duplicates,
            not_an_object: Some(format!(
                "not a Kubernetes object but {what}: ignored (the API server never receives it)"
            )),
        });
    }
    for key in ["apiVersion", "kind"] {
        match v.get(key) {
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(other) => return Err(format!("{key} must be a string, not {}", kind_of(other))),
            None => return Err(format!("not a Kubernetes object: no {key}")),
        }
    }
    let mut retyped = Vec::new();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["labels", "annotations"] {
            let Some(map) = meta.get_mut(field).and_then(Value::as_object_mut) else {
                continue;
            };
            for (k, val) in map.iter_mut() {
                let text = match val {
                    Value::Bool(b) => b.to_string(),
                    Value::Number(n) => n.to_string(),
                    _ => continue,
                };
                retyped.push(crate::apiserver::Retyped {
                    field: format!("metadata.{field}[{k}]"),
                    text: text.clone(),
                    was: kind_of(val),
                });
                *val = Value::String(text);
            }
        }
    }
    Ok(Manifest {
        source,
        object: v,
        review,
        retyped,
        duplicates,
        not_an_object: None,
    })
}

/// What a document is when it is a tool's configuration rather than a Kubernetes object:
/// kustomize's Kustomization and Component, a kind, k3d or ctlptl cluster, a component's
/// configuration file (`*.config.k8s.io`, kubeadm's), a KRM function's configuration, a
/// Skaffold file, a kubeconfig, a Helm chart's Chart.yaml. Found beside manifests in
/// repositories, never sent to the API server.
fn tool_configuration(v: &Value) -> Option<String> {
    let api_version = v["apiVersion"].as_str().unwrap_or_default();
    let kind = v["kind"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    Some(match group {
        "kustomize.config.k8s.io" => format!("kustomize's {kind}"),
        "kind.x-k8s.io" => "a kind cluster's configuration".to_owned(),
        "k3d.io" => "a k3d cluster's configuration".to_owned(),
        "ctlptl.dev" => "a ctlptl cluster's configuration".to_owned(),
        "kubeadm.k8s.io" => format!("kubeadm's {kind}"),
        "config.kubernetes.io" | "fn.kpt.dev" => format!("a KRM function's {kind}"),
        g if g.ends_with(".config.k8s.io") => format!("a Kubernetes component's {kind} file"),
        _ if api_version.starts_with("skaffold/") => "a Skaffold configuration".to_owned(),
        "" if kind == "Config" && v.get("clusters").is_some() => "a kubeconfig".to_owned(),
        "" if kind.is_empty()
            && matches!(api_version, "v1" | "v2")
            && v.get("name").is_some()
            && v.get("version").is_some() =>
        {
            "a Helm chart's Chart.yaml".to_owned()
        }
        _ => return None,
    })
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "sequence",
        Value::Object(_) => "mapping",
    }
}

/// Identifies an object across `--old`, the state and the manifests: API group, kind,
/// namespace (`default_ns` when it names none) and name; `None` for an object named only by
/// `generateName`, which is a new object each time.
pub fn identity(v: &Value, default_ns: &str) -> Option<(String, String, String, String)> {
    let name = v["metadata"]["name"].as_str().filter(|n| !n.is_empty())?;
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let ns = v["metadata"]["namespace"]
        .as_str()
        .unwrap_or(default_ns)
        .to_owned();
    // One object whatever the version it is written in: the group, not the apiVersion.
    let api_version = v["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    Some((group.to_owned(), s(&v["kind"]), ns, name.to_owned()))
}

/// What `kubectl apply` makes of `stored` (the object as the cluster holds it, after the
/// webhooks' changes) when the manifest `last` is applied again as `new`: every field `new`
/// sets is set, maps merged key by key, a field `last` set and `new` leaves out removed, and
/// what neither set (the API server's and the webhooks' additions) kept. A built-in kind's
/// lists are merged as kubectl's strategic merge merges them, by the merge keys of the API
/// server's schema (containers by `name`, ports by `containerPort`, finalizers as a set): an
/// item of `new` is merged into the stored item with its key, an item `last` had and `new`
/// leaves out is removed, and an item only the stored object has is kept. Other lists, and
/// every list of a custom resource, are replaced whole, as the JSON merge patch kubectl sends
/// for custom resources replaces them.
pub fn apply_merge(stored: &Value, last: Option<&Value>, new: &Value) -> Value {
    let schemas = crate::schema::built_in();
    let root = match (new["apiVersion"].as_str(), new["kind"].as_str()) {
        (Some(v), Some(k)) => schemas.kind(v, k),
        _ => None,
    };
    let mut out = stored.clone();
    Merge { schemas }.merge(&mut out, last, new, root);
    out
}

/// A three-way merge of one object, reading merge keys from `schemas`.
struct Merge<'a> {
    schemas: &'a crate::schema::Schemas,
}

impl<'a> Merge<'a> {
    fn merge(&self, live: &mut Value, last: Option<&Value>, new: &Value, node: Option<&'a Node>) {
        let node = node.map(|n| self.schemas.resolve(n));
        match (live, new) {
            (Value::Object(l), Value::Object(n)) => {
                if let Some(Value::Object(before)) = last {
                    for k in before.keys() {
                        if !n.contains_key(k) {
                            l.remove(k);
                        }
                    }
                }
                for (k, nv) in n {
                    let child = node.and_then(|n| n.properties.get(k).or(n.values.as_deref()));
                    match l.get_mut(k) {
                        Some(lv)
                            if (lv.is_object() && nv.is_object())
                                || (lv.is_array() && nv.is_array()) =>
                        {
                            self.merge(lv, last.and_then(|x| x.get(k)), nv, child);
                        }
                        _ => {
                            l.insert(k.clone(), nv.clone());
                        }
                    }
                }
            }
            (Value::Array(l), Value::Array(n)) => {
                let Some(key) = node.and_then(|n| n.merge_key.as_deref()) else {
                    *l = n.clone();
                    return;
                };
                let before = last.and_then(Value::as_array);
                let was_applied = |item: &Value| {
                    before.is_some_and(|b| b.iter().any(|x| same_item(x, item, key)))
                };
                let items = node.and_then(|n| n.items.as_deref());
                let mut merged = Vec::with_capacity(n.len());
                for item in n {
                    match l.iter().find(|x| same_item(x, item, key)) {
                        Some(stored) if !key.is_empty() => {
                            let mut stored = stored.clone();
                            let previous =
                                before.and_then(|b| b.iter().find(|x| same_item(x, item, key)));
                            self.merge(&mut stored, previous, item, items);
                            merged.push(stored);
                        }
                        _ => merged.push(item.clone()),
                    }
                }
                // What only the stored object has (the API server's or a webhook's) stays.
                for stored in l.iter() {
                    if !n.iter().any(|x| same_item(x, stored, key)) && !was_applied(stored) {
                        merged.push(stored.clone());
                    }
                }
                *l = merged;
            }
            (live, new) => *live = new.clone(),
        }
    }
}

/// Whether two items of a merged list are the same item: the same merge key's value, or, for a
/// list of values (no key), the same value.
fn same_item(a: &Value, b: &Value, key: &str) -> bool {
    if key.is_empty() {
        a == b
    } else {
        a.get(key).is_some() && a.get(key) == b.get(key)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn template_actions_are_found_only_unquoted() {
        use super::template_line;
        assert_eq!(template_line("a: 1\n  image: {{.BusyBoxImage}}\n"), Some(2));
        assert_eq!(template_line("- {{ include \"x\" . }}\n"), Some(1));
        assert_eq!(template_line("{{- if .Values.x }}\n"), Some(1));
        assert_eq!(template_line("description: \"use {{ var }}\"\n"), None);
        assert_eq!(template_line("# {{ comment }}\n"), None);
    }

    use super::*;

    /// Apply's three-way merge: a built-in kind's lists by merge key, what the stored object
    /// alone has kept, what the last manifest had and the new one drops removed.
    #[test]
    fn apply_merges_a_built_in_kinds_lists_by_key() {
        let pod = |containers: Value, finalizers: Value| {
            serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "finalizers": finalizers},
                "spec": {"containers": containers, "tolerations": [{"key": "t"}]}})
        };
        let last = pod(
            serde_json::json!([{"name": "app", "image": "i:1"}, {"name": "gone", "image": "g"}]),
            serde_json::json!(["mine"]),
        );
        // As stored: a webhook set the app's resources and added a sidecar and a finalizer.
        let mut stored = pod(
            serde_json::json!([
                {"name": "app", "image": "i:1", "resources": {"requests": {"cpu": "1"}}},
                {"name": "gone", "image": "g"},
                {"name": "sidecar", "image": "s"}]),
            serde_json::json!(["mine", "theirs"]),
        );
        stored["spec"]["tolerations"] = serde_json::json!([{"key": "t"}, {"key": "added"}]);
        let new = pod(
            serde_json::json!([{"name": "app", "image": "i:2"}]),
            serde_json::json!(["mine"]),
        );
        let merged = apply_merge(&stored, Some(&last), &new);
        assert_eq!(
            merged["spec"]["containers"],
            serde_json::json!([
                {"name": "app", "image": "i:2", "resources": {"requests": {"cpu": "1"}}},
                {"name": "sidecar", "image": "s"}])
        );
        assert_eq!(
            merged["metadata"]["finalizers"],
            serde_json::json!(["mine", "theirs"])
        );
        // A list without a merge strategy is replaced whole.
        assert_eq!(
            merged["spec"]["tolerations"],
            serde_json::json!([{"key": "t"}])
        );
        // A custom resource's lists are replaced whole (kubectl sends a JSON merge patch).
        let thing = |items: Value| {
            serde_json::json!({"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "t"},
                "spec": {"containers": items}})
        };
        let merged = apply_merge(
            &thing(serde_json::json!([{"name": "a", "x": 1}, {"name": "b"}])),
            Some(&thing(serde_json::json!([{"name": "a"}]))),
            &thing(serde_json::json!([{"name": "a", "y": 2}])),
        );
        assert_eq!(
            merged["spec"]["containers"],
            serde_json::json!([{"name": "a", "y": 2}])
        );
    }

    #[test]
    fn yaml_streams_keep_document_numbers_and_lines() {
        let text = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n";
        let m = parse("f.yaml", text).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].source.document, m[0].source.line), (1, 2));
        assert_eq!((m[1].source.document, m[1].source.line), (2, 8));
        assert_eq!(m[1].source.to_string(), "f.yaml:2");
    }

    #[test]
    fn lists_json_streams_and_reviews_give_their_objects() {
        let list = r#"{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#;
        let m = parse("l.json", list).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].object["kind"], "Pod");
        assert_eq!(m[1].source.to_string(), "l.json:1[1]");

        let stream =
            "{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}\n{\"apiVersion\":\"v1\",\"kind\":\"Node\"}\n";
        let m = parse("s.json", stream).unwrap();
        assert_eq!((m[1].source.document, m[1].source.line), (2, 2));

        let review = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"UPDATE","subResource":"status","object":{"apiVersion":"v1","kind":"Node"},"oldObject":{"apiVersion":"v1","kind":"Node"}}}"#;
        let m = parse("r.json", review).unwrap();
        let r = m[0].review.as_ref().unwrap();
        assert_eq!(r.operation, Operation::Update);
        assert_eq!(r.sub_resource.as_deref(), Some("status"));
        assert!(r.old_object.is_some());
    }

    #[test]
    fn unreadable_documents_name_file_document_and_line() {
        let text = "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: [unclosed\n";
        let e = parse("bad.yaml", text).unwrap_err().to_string();
        assert!(e.starts_with("bad.yaml: document 2 (line "), "{e}");
        let e = parse("x.yaml", "just a string\n").unwrap_err().to_string();
        assert!(
            e.contains("document 1") && e.contains("not a mapping"),
            "{e}"
        );
        let e = parse("x.yaml", "kind: Pod\n").unwrap_err().to_string();
        assert!(e.contains("no apiVersion"), "{e}");
        let e = parse("x.json", "{\"kind\": ").unwrap_err().to_string();
        assert!(
            e.starts_with("x.json: document 1") && e.contains("not JSON"),
            "{e}"
        );
    }

    #[test]
    fn yaml_1_1_scalars_are_typed_as_kubectl_types_them() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  labels: {a: yes, b: 'no'}\nspec:\n  x: [on, off, Y, n, 0777, 0x1f, 1_000, '0777', 08, 10, -012, 0o17, 0b101, yesno]\n";
        let m = parse("p.yaml", text).unwrap();
        assert_eq!(
            m[0].object["spec"]["x"],
            serde_json::json!([
                true, false, true, false, 511, 31, 1000, "0777", 8, 10, -10, 15, 5, "yesno"
            ])
        );
        // The boolean label is one the API server refuses (API-1); the quoted one is text.
        assert_eq!(m[0].object["metadata"]["labels"]["b"], "no");
        assert_eq!(m[0].retyped.len(), 1);
        assert_eq!(m[0].retyped[0].text, "true");
        // JSON is JSON.
        let m = parse(
            "p.json",
            "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"x\": \"yes\"}",
        )
        .unwrap();
        assert_eq!(m[0].object["x"], "yes");
    }

    #[test]
    fn unquoted_label_booleans_are_read_as_strings_and_remembered() {
        let text =
            "apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    a: true\n    b: '1'\n    c: 2\n";
        let m = parse("p.yaml", text).unwrap();
        assert_eq!(m[0].object["metadata"]["labels"]["a"], "true");
        assert_eq!(m[0].object["metadata"]["labels"]["c"], "2");
        let fields: Vec<&str> = m[0].retyped.iter().map(|r| r.field.as_str()).collect();
        assert_eq!(fields, ["metadata.labels[a]", "metadata.labels[c]"]);
        assert_eq!(m[0].retyped[1].was, "number");
    }
}
