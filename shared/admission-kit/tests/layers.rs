//! The kit's layering, checked on its source: each module uses only its own layer and the layers
//! below it (compat < review < server < cluster < cli, as the crate documentation lists them),
//! and no modules import each other in a circle. Test code (from a file's first `#[cfg(test)]`)
//! and comments are not counted: tests may reach anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const LAYERS: [&str; 5] = ["compat", "review", "server", "cluster", "cli"];

/// Every module of the kit by its path (`review/handler`, `cli`), with the modules its production
/// code names through `crate::…` or `super::…`. A module kept in a directory (`compat/go/`,
/// its `mod.rs` and the files beside it) is one module: what its files name of each other stays
/// inside it.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // The module a path inside the kit belongs to: its layer and, below it, its first part.
    let module_of = |path: &str| path.split('/').take(2).collect::<Vec<_>>().join("/");
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in walk(&src) {
        let rel = file.strip_prefix(&src).unwrap().with_extension("");
        let rel = rel.to_string_lossy().replace('\\', "/");
        let full = rel.strip_suffix("/mod").unwrap_or(&rel).to_owned();
        // lib.rs and the layers' own mod.rs only declare modules.
        if full == "lib" || (rel.ends_with("/mod") && !full.contains('/')) {
            continue;
        }
        let module = module_of(&full);
        // What `super::` names from this file.
        let parent = full.rsplit_once('/').map_or("", |(p, _)| p).to_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let mut used = BTreeSet::new();
        for line in text.lines() {
            // The test module, also when it needs a feature.
            if line.starts_with("#[cfg(test)]") || line.starts_with("#[cfg(all(test,") {
                break;
            }
            let code = line.split("//").next().unwrap_or("");
            for (prefix, base) in [("crate::", None), ("super::", Some(parent.as_str()))] {
                for (at, _) in code.match_indices(prefix) {
                    let path: Vec<&str> = code[at + prefix.len()..]
                        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                        .next()
                        .unwrap_or("")
                        .split("::")
                        .collect();
                    let target = match (base, path.as_slice()) {
                        (None, ["cli", ..]) => "cli".to_owned(),
                        (None, [layer, module, ..]) if LAYERS.contains(layer) => {
                            format!("{layer}/{module}")
                        }
                        (Some(parent), [module, ..]) if !module.is_empty() => {
                            module_of(&format!("{parent}/{module}"))
                        }
                        // `super::*` inside a module's directory.
                        (Some(parent), [""]) if parent.contains('/') => module_of(parent),
                        _ => panic!(
                            "{rel}: `{prefix}{}` does not name a module by its layer path",
                            path.join("::")
                        ),
                    };
                    if target != module {
                        used.insert(target);
                    }
                }
            }
        }
        out.entry(module).or_default().extend(used);
    }
    // compat is a crate of its own (`admission-compat`), which cannot import the kit: its
    // modules, as the kit names them, import nothing here.
    let compat: Vec<String> = out
        .values()
        .flatten()
        .filter(|m| m.starts_with("compat/"))
        .cloned()
        .collect();
    for m in compat {
        out.entry(m).or_default();
    }
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

fn rank(module: &str) -> usize {
    let layer = module.split('/').next().unwrap();
    LAYERS
        .iter()
        .position(|l| *l == layer)
        .unwrap_or_else(|| panic!("{module} is in no layer of {LAYERS:?}"))
}

/// Imports that reach a higher layer, as `from -> to`.
fn upward(imports: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (module, used) in imports {
        for target in used {
            assert!(
                imports.contains_key(target),
                "{module} names {target}, which is no module"
            );
            if rank(target) > rank(module) {
                out.push(format!("{module} -> {target}"));
            }
        }
    }
    out
}

/// Import circles, each as the path that closes it.
fn circles(imports: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    // Depth-first; a module met again while on the current path closes a circle.
    fn visit<'a>(
        m: &'a str,
        imports: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        found: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|p| *p == m) {
            found.push(format!("{} -> {m}", path[at..].join(" -> ")));
            return;
        }
        if !done.insert(m) {
            return;
        }
        path.push(m);
        for next in &imports[m] {
            visit(next, imports, path, done, found);
        }
        path.pop();
    }
    let mut found = Vec::new();
    let mut done = BTreeSet::new();
    for m in imports.keys() {
        visit(m, imports, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

#[test]
fn each_module_uses_only_its_layer_and_those_below() {
    let imports = imports();
    // The reader sees imports of both forms (a sample known to exist).
    assert!(
        imports["review/handler"].contains("review/lookup"),
        "{imports:#?}"
    );
    assert!(
        imports["cluster/state"].contains("review/app"),
        "{imports:#?}"
    );
    assert!(
        imports["server/http"].contains("server/budget"),
        "{imports:#?}"
    );
    // compat, its own crate, is named and imports nothing of the kit.
    assert!(
        imports["review/field"].contains("compat/go"),
        "{imports:#?}"
    );
    assert!(imports["compat/go"].is_empty(), "{imports:#?}");
    assert_eq!(upward(&imports), Vec::<String>::new());
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    assert_eq!(circles(&imports()), Vec::<String>::new());
}

/// The checks themselves, on a made-up graph with one circle and one upward import.
#[test]
fn the_checks_find_a_circle_and_an_upward_import() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("compat/go", &["review/field"][..]),
        ("review/field", &["review/handler"][..]),
        ("review/handler", &["review/field"][..]),
    ]
    .into_iter()
    .map(|(m, used)| (m.to_owned(), used.iter().map(|u| (*u).to_owned()).collect()))
    .collect();
    assert_eq!(upward(&graph), ["compat/go -> review/field"]);
    assert_eq!(
        circles(&graph),
        ["review/field -> review/handler -> review/field"]
    );
}
