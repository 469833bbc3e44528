//! The shape of the code: each layer imports only the layers below it, no
//! file imports itself back through others, the pure layers and the
//! virtual engine use neither hyper nor tokio, and no source file passes
//! 700 lines. Read from the source itself, so a change that breaks the
//! rule fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first; folders of one rank may not import each
/// other, except the two pure folders at the bottom.
const RANKS: &[(&str, u32)] = &[
    ("model", 0),
    ("policy", 0),
    ("report", 1),
    ("net", 2),
    ("sim", 2),
    ("plot", 3),
    // Presentation beside the plots: rows in, a screen out; the
    // experiment feeds it a storm's batches and phases.
    ("view", 3),
    ("experiment", 4),
    ("cli", 5),
    ("app", 6),
    ("fuzz", 6),
];

/// Folders whose code may not touch the network runtime.
const WITHOUT_RUNTIME: &[&str] = &["model", "policy", "report", "sim", "plot", "view"];

const MAX_LINES: usize = 700;

fn rank(layer: &str) -> Option<u32> {
    RANKS.iter().find(|(l, _)| *l == layer).map(|&(_, r)| r)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A source file's module path: `src/experiment/mod.rs` is `experiment`,
/// `src/experiment/sweep.rs` is `experiment::sweep`.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// The code that is compiled outside tests: the file up to its test
/// module, without comments (a `//` inside a string literal is not one).
fn code_text(text: &str) -> String {
    let body = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |at| &text[..at]);
    body.lines()
        .map(|line| {
            let mut in_string = false;
            let mut escaped = false;
            for (at, c) in line.char_indices() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' if in_string => escaped = true,
                    '"' => in_string = !in_string,
                    '/' if !in_string && line[at..].starts_with("//") => return &line[..at],
                    _ => {}
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Reads a path or a use-tree at `text[at..]` (`a::b`, `a::{b, c::d}`),
/// adding every full path to `out`, each prefixed with `prefix`.
fn use_tree(text: &[u8], mut at: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix;
    loop {
        while at < text.len() && (text[at] as char).is_whitespace() {
            at += 1;
        }
        if at < text.len() && text[at] == b'{' {
            at += 1;
            loop {
                at = use_tree(text, at, path.clone(), out);
                while at < text.len() && (text[at] as char).is_whitespace() {
                    at += 1;
                }
                match text.get(at) {
                    Some(b',') => at += 1,
                    Some(b'}') => return at + 1,
                    _ => return at,
                }
                while at < text.len() && (text[at] as char).is_whitespace() {
                    at += 1;
                }
                if text.get(at) == Some(&b'}') {
                    return at + 1;
                }
            }
        }
        let start = at;
        while at < text.len() && is_ident(text[at] as char) {
            at += 1;
        }
        if at == start {
            out.push(path);
            return at;
        }
        path.push(String::from_utf8_lossy(&text[start..at]).into_owned());
        if text[at..].starts_with(b"::") {
            at += 2;
        } else {
            out.push(path);
            return at;
        }
    }
}

/// Every module path a file's code names through `crate::`, `super::`,
/// `self::` or one of its own child modules (`child::`, as a folder's
/// `mod.rs` names its files), made absolute from `module` (the file's own
/// module path, so that `super` is always its parent: `a` for `a/b.rs`,
/// the crate for `a/mod.rs`). `children` are the file's child modules.
fn named_paths(code: &str, module: &[String], children: &[String]) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        // Inside a character of several bytes (`·` in a string): no path
        // starts there.
        if !code.is_char_boundary(at) {
            at += 1;
            continue;
        }
        let boundary = at == 0 || !is_ident(bytes[at - 1] as char) && bytes[at - 1] != b':';
        let rest = &code[at..];
        if boundary
            && let Some(child) = children
                .iter()
                .find(|c| rest.starts_with(c.as_str()) && rest[c.len()..].starts_with("::"))
        {
            let mut found = Vec::new();
            let mut base = module.to_vec();
            base.push(child.clone());
            at = use_tree(bytes, at + child.len() + 2, base, &mut found);
            out.extend(found);
            continue;
        }
        if boundary {
            for root in ["crate::", "super::", "self::"] {
                if !rest.starts_with(root) {
                    continue;
                }
                let mut base: Vec<String> = match root {
                    "crate::" => Vec::new(),
                    _ => module.to_vec(),
                };
                let mut next = at + root.len();
                if root == "super::" {
                    base.pop();
                    while code[next..].starts_with("super::") {
                        base.pop();
                        next += "super::".len();
                    }
                }
                let mut found = Vec::new();
                next = use_tree(bytes, next, base, &mut found);
                out.extend(found);
                at = next;
                break;
            }
        }
        at += 1;
    }
    out
}

struct Source {
    relative: PathBuf,
    code: String,
}

fn sources() -> BTreeMap<Vec<String>, Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut out = BTreeMap::new();
    for path in files {
        let relative = path.strip_prefix(&root).unwrap().to_path_buf();
        if relative.starts_with("bin") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        out.insert(
            module_of(&relative),
            Source {
                relative,
                code: code_text(&text),
            },
        );
    }
    out
}

/// The import graph between source files: module path to the module
/// paths (files) it names.
fn imports(
    sources: &BTreeMap<Vec<String>, Source>,
) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut graph = BTreeMap::new();
    for (module, source) in sources {
        let mut targets = BTreeSet::new();
        // The file's child modules: the files one level below it.
        let children: Vec<String> = sources
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .map(|m| m[module.len()].clone())
            .collect();
        for path in named_paths(&source.code, module, &children) {
            // The longest prefix that is a file: `a::b::Item` is in `a::b`,
            // `crate::Item` in lib.rs.
            let target = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| sources.contains_key(p));
            if let Some(target) = target
                && &target != module
            {
                targets.insert(target);
            }
        }
        graph.insert(module.clone(), targets);
    }
    graph
}

fn layer(module: &[String]) -> &str {
    module.first().map_or("lib", String::as_str)
}

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let sources = sources();
    let graph = imports(&sources);
    let mut wrong = Vec::new();
    for (from, targets) in &graph {
        if from.is_empty() {
            continue; // lib.rs declares the layers
        }
        let from_layer = layer(from);
        let from_rank = rank(from_layer).unwrap_or_else(|| panic!("{from_layer} has no rank"));
        for to in targets {
            let to_layer = layer(to);
            if to_layer == from_layer {
                continue;
            }
            let to_rank = rank(to_layer).unwrap_or(u32::MAX);
            let pure_pair = from_rank == 0 && to_rank == 0;
            if to_rank >= from_rank && !pure_pair {
                wrong.push(format!("{} imports {}", from.join("::"), to.join("::")));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
    // The check sees imports: the engines use the model, the CLI the
    // experiment, the virtual engine none of the networked one.
    let names = |m: &str| -> Vec<String> { m.split("::").map(str::to_string).collect() };
    assert!(graph[&names("sim::engine")].contains(&names("model::user")));
    assert!(graph[&names("net::client")].contains(&names("model::client")));
    assert!(
        graph[&names("cli::storm")]
            .iter()
            .any(|m| m[0] == "experiment")
    );
    assert!(graph[&names("experiment::runner")].contains(&names("experiment::children")));
}

#[test]
fn no_file_imports_itself_back() {
    let graph = imports(&sources());
    // Tarjan's strongly connected components over the files.
    struct State<'a> {
        graph: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        cycles: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Vec<String>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        for w in &s.graph[v] {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.stack.contains(&w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                component.push(w.join("::"));
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.cycles.push(component);
            }
        }
    }
    let mut state = State {
        graph: &graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        cycles: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    assert!(state.cycles.is_empty(), "import cycles: {:?}", state.cycles);
}

#[test]
fn the_pure_layers_and_the_virtual_engine_use_no_network_runtime() {
    let mut wrong = Vec::new();
    for (module, source) in sources() {
        if !WITHOUT_RUNTIME.contains(&layer(&module)) {
            continue;
        }
        for runtime in ["tokio::", "hyper::", "hyper_util::"] {
            if source.code.contains(runtime) {
                wrong.push(format!("{} uses {runtime}", source.relative.display()));
            }
        }
        if source.code.contains("crate::net") {
            wrong.push(format!(
                "{} imports the networked engine",
                source.relative.display()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_source_file_passes_700_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "examples", "fuzz/fuzz_targets"] {
        rust_files(&root.join(dir), &mut files);
    }
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
        .filter(|&(_, n)| n > MAX_LINES)
        .map(|(f, n)| format!("{} has {n} lines", f.strip_prefix(root).unwrap().display()))
        .collect();
    assert!(long.is_empty(), "{}", long.join("\n"));
    assert!(files.len() > 40, "the walk found the sources");
}

#[test]
fn the_reader_finds_imports_as_the_compiler_does() {
    let module = |s: &str| -> Vec<String> { s.split("::").map(str::to_string).collect() };
    let code = "use crate::{a::b, c::{d::E, f}};\nuse super::g::H;\n\
                let x = crate::i::j(\"http://h\", crate::l::m); // crate::k\n";
    let paths: Vec<String> = named_paths(&code_text(code), &module("x::y"), &[])
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        paths,
        ["a::b", "c::d::E", "c::f", "x::g::H", "i::j", "l::m"]
    );
    // From a folder's mod.rs, `super` is the folder's parent, and its own
    // files are named without a root.
    let children = ["host".to_string()];
    let paths = named_paths(
        "use super::z;\npub use host::{Host, Delivery};\nlet h = ghost::x;",
        &module("x"),
        &children,
    );
    assert_eq!(
        paths,
        [
            module("z"),
            module("x::host::Host"),
            module("x::host::Delivery")
        ]
    );
}
