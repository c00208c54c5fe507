//! Collects the rule documentation `admission-check rules` and `explain` print from the rules
//! themselves: every doc-comment paragraph of the services' sources (and of this tool's API
//! rules) that starts with a rule id list and a colon (`/// MV-03: …`, `/// MV-01, MV-02: …`,
//! `/// AP-22..AP-27: …`) documents those ids. One source of truth: the text a reader sees
//! above the rule's function is the text the command prints.
//!
//! Hand-written rather than parsed with `syn`: a doc paragraph and the item after it are all
//! that is read, line by line, and a build dependency on a full Rust parser would cost more
//! build time than these 150 lines.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One documented paragraph.
struct Doc {
    service: String,
    ids: Vec<String>,
    text: String,
    file: String,
    line: usize,
    item: String,
    /// The examples after it, in order: the `Expect` variant their label stands for and the
    /// manifest (YAML flow style).
    examples: Vec<(&'static str, String)>,
    /// `Options: `--name=value …`` paragraphs: the service's options the examples run with.
    options: Vec<String>,
    /// `State: `…`` paragraphs: objects in the cluster the examples are checked against.
    state: Vec<String>,
}

/// The example labels and the `rules::Expect` variant each stands for.
const EXAMPLES: &[(&str, &str)] = &[
    ("Refused:", "Refused"),
    ("Admitted:", "Admitted"),
    ("Mutated:", "Mutated"),
    ("Warned:", "Warned"),
    ("Refused on delete:", "RefusedOnDelete"),
    ("Admitted on delete:", "AdmittedOnDelete"),
    ("Refused on update:", "RefusedOnUpdate"),
    ("Admitted on update:", "AdmittedOnUpdate"),
    ("Refused on status update:", "RefusedOnStatus"),
    ("Admitted on status update:", "AdmittedOnStatus"),
    ("Mutated on status update:", "MutatedOnStatus"),
];

/// The manifest of a `Refused: `{…}`` / `Admitted: `{…}`` / `State: `{…}`` paragraph.
fn example<'a>(paragraph: &'a str, label: &str) -> Option<&'a str> {
    paragraph
        .strip_prefix(label)?
        .trim()
        .strip_prefix('`')?
        .strip_suffix('`')
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

include!("src/rule_id.rs");

/// `MV-07..MV-17` or `AP-1..27`: every id between, keeping the first's zero padding.
fn range(from: &str, to: &str) -> Option<Vec<String>> {
    let (prefix, first) = from.rsplit_once('-')?;
    let last = to.rsplit_once('-').map_or(to, |(_, n)| n);
    let (a, b): (usize, usize) = (first.parse().ok()?, last.parse().ok()?);
    if b < a || b - a > 100 {
        return None;
    }
    Some(
        (a..=b)
            .map(|n| format!("{prefix}-{n:0width$}", width = first.len()))
            .collect(),
    )
}

/// The ids a paragraph's first line lists before its colon, if it starts with a list of them.
fn ids_of(line: &str) -> Option<(Vec<String>, &str)> {
    let (head, rest) = line.split_once(": ")?;
    let mut ids = Vec::new();
    for part in head
        .split(", ")
        .flat_map(|p| p.split(" and "))
        .flat_map(|p| p.split(" / "))
    {
        let part = part.trim();
        if let Some((a, b)) = part.split_once("..").or_else(|| part.split_once(" to ")) {
            if !is_rule_id(a) {
                return None;
            }
            ids.extend(range(a, b)?);
        } else if is_rule_id(part) {
            ids.push(part.to_owned());
        } else {
            return None;
        }
    }
    (!ids.is_empty()).then_some((ids, rest))
}

/// The item a doc block documents: `fn name`, `struct Name`, … from the line after it.
fn item_of(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        let keyword = matches!(
            *w,
            "fn" | "struct" | "enum" | "const" | "static" | "impl" | "mod"
        );
        if keyword && let Some(name) = words.get(i + 1) {
            let name: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            return format!("{w} {name}");
        }
    }
    String::new()
}

fn scan(rel: &str, service: &str, file: &Path, out: &mut Vec<Doc>) {
    let Ok(text) = std::fs::read_to_string(file) else {
        return;
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        // Rules are not documented inside test modules.
        if lines[i].trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        if !lines[i].trim_start().starts_with("///") {
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && lines[i].trim_start().starts_with("///") {
            i += 1;
        }
        let block: Vec<&str> = lines[start..i]
            .iter()
            .map(|l| {
                let l = l.trim_start().trim_start_matches("///");
                l.strip_prefix(' ').unwrap_or(l)
            })
            .collect();
        let mut after = i;
        while after < lines.len() && lines[after].trim_start().starts_with("#[") {
            after += 1;
        }
        let item = lines.get(after).map(|l| item_of(l)).unwrap_or_default();
        let mut p = 0;
        let mut documented = false;
        while p < block.len() {
            let first = p;
            while p < block.len() && !block[p].trim().is_empty() {
                p += 1;
            }
            let paragraph = block[first..p].join(" ");
            if documented && let Some(last) = out.last_mut() {
                if let Some(e) = example(&paragraph, "Options:") {
                    last.options.push(e.to_owned());
                    p += 1;
                    continue;
                }
                if let Some(e) = example(&paragraph, "State:") {
                    last.state.push(e.to_owned());
                    p += 1;
                    continue;
                }
                if let Some((variant, e)) = EXAMPLES
                    .iter()
                    .find_map(|(label, variant)| Some((*variant, example(&paragraph, label)?)))
                {
                    last.examples.push((variant, e.to_owned()));
                    p += 1;
                    continue;
                }
            }
            if let Some((ids, rest)) = block.get(first).and_then(|l| ids_of(l)) {
                documented = true;
                let mut text = rest.trim().to_owned();
                for l in &block[first + 1..p] {
                    text.push(' ');
                    text.push_str(l.trim());
                }
                out.push(Doc {
                    service: service.to_owned(),
                    ids,
                    text,
                    file: rel.to_owned(),
                    line: start + first + 1,
                    item: item.clone(),
                    examples: Vec::new(),
                    options: Vec::new(),
                    state: Vec::new(),
                });
            }
            p += 1;
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest.join("../..");
    let mut docs = Vec::new();
    let services = root.join("services");
    println!("cargo:rerun-if-changed=src/apiserver");
    println!("cargo:rerun-if-changed=src/rule_id.rs");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&services)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.sort();
    for dir in dirs {
        let service = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The sources only: tests write and remove files in a package's directory, and a
        // directory watched whole would rebuild this crate after every test run.
        println!("cargo:rerun-if-changed={}", dir.join("src").display());
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for f in files {
            let rel = f.strip_prefix(&root).unwrap_or(&f).display().to_string();
            scan(&rel, &service, &f, &mut docs);
        }
    }
    // The quota tree rules quota-state runs live in the crate it shares with the webhook.
    let protocol = root.join("shared/quota-protocol/src");
    println!("cargo:rerun-if-changed={}", protocol.display());
    let mut files = Vec::new();
    rust_files(&protocol, &mut files);
    for f in files {
        let rel = f.strip_prefix(&root).unwrap_or(&f).display().to_string();
        scan(&rel, "quota-state", &f, &mut docs);
    }
    let mut files = Vec::new();
    rust_files(&manifest.join("src/apiserver"), &mut files);
    for f in files {
        let rel = f
            .strip_prefix(&manifest)
            .unwrap_or(&f)
            .display()
            .to_string();
        scan(
            &format!("tools/admission-check/{rel}"),
            "kube-apiserver",
            &f,
            &mut docs,
        );
    }
    let mut out = String::from(
        "/// Generated by build.rs from the rules' doc comments.\npub static RULE_DOCS: &[RuleDoc] = &[\n",
    );
    for d in &docs {
        let examples: Vec<String> = d
            .examples
            .iter()
            .map(|(variant, manifest)| format!("(Expect::{variant}, {manifest:?})"))
            .collect();
        let _ = writeln!(
            out,
            "    RuleDoc {{ service: {:?}, ids: &{:?}, text: {:?}, file: {:?}, line: {}, item: {:?}, examples: &[{}], options: &{:?}, state: &{:?} }},",
            d.service,
            d.ids,
            d.text,
            d.file.replace('\\', "/"),
            d.line,
            d.item,
            examples.join(", "),
            d.options,
            d.state
        );
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("rule_docs.rs");
    if let Err(e) = std::fs::write(&dest, out) {
        println!("cargo:warning=cannot write {}: {e}", dest.display());
    }
}
