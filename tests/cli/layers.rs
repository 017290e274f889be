//! Keeps the module layers pointing one way.
//!
//! `ARCHITECTURE.md` lists the top-level modules of `src/` in a fenced
//! ```` ```layers ```` block, one layer per line, top first: `N name name ...`.
//! A module may use itself and modules in strictly lower layers; this test
//! fails on every `crate::` path (or `super::` chain reaching the crate root)
//! that names a module in the same or a higher layer, and on any module that
//! `src/lib.rs` declares but the block does not list, or the reverse.
//! `src/main.rs` is exempt: the binary sees the whole library.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

const UNLISTED: &str = "is not listed in ARCHITECTURE.md";

/// Layer number of each module.
type Layers = BTreeMap<String, u32>;

/// Reads the ```` ```layers ```` block of `doc`.
fn parse_layers(doc: &str) -> Result<Layers, String> {
    let fence = |l: &str| l.trim().strip_prefix("```").map(str::trim) == Some("layers");
    let mut lines = doc.lines().zip(1..);
    if !lines.any(|(l, _)| fence(l)) {
        return Err("no ```layers block".into());
    }
    let (mut layers, mut last) = (Layers::new(), None);
    while let Some((l, n)) = lines.next() {
        let l = l.trim();
        if l.starts_with("```") {
            if lines.any(|(l, _)| fence(l)) {
                return Err("more than one ```layers block".into());
            }
            let empty = || "the ```layers block is empty".to_string();
            return (!layers.is_empty()).then_some(layers).ok_or_else(empty);
        }
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let mut words = l.split_whitespace();
        let num = words.next().unwrap_or_default();
        let Ok(num) = num.parse::<u32>() else {
            return Err(format!("line {n}: `{num}` is not a layer number"));
        };
        // Top first: a number that does not fall is most likely a typo.
        if last.is_some_and(|p| num >= p) {
            return Err(format!("line {n}: layer {num} is not below the line above"));
        }
        last = Some(num);
        for name in words {
            if layers.insert(name.to_string(), num).is_some() {
                return Err(format!("line {n}: module `{name}` is listed twice"));
            }
        }
    }
    Err("the ```layers block is not closed".into())
}

/// Splits Rust source into (line, token): identifiers, `::` and single
/// punctuation characters. Comments and string/char literals are dropped, so
/// paths in doc text or messages are not seen.
fn lex(src: &str) -> Vec<(usize, String)> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    // Line number of every character, so skipping needs no bookkeeping.
    let lines: Vec<usize> = (c.iter())
        .scan(1, |n, &ch| {
            Some(std::mem::replace(n, *n + usize::from(ch == '\n')))
        })
        .collect();
    // Index just past `end` (a closing quote and any hashes), searching from `i`.
    let skip = |mut i: usize, end: &[char], escapes: bool| {
        while i < c.len() && !c[i..].starts_with(end) {
            i += 1 + usize::from(escapes && c[i] == '\\');
        }
        i + end.len()
    };
    let word = |ch: char| ch.is_alphanumeric() || ch == '_';
    let (mut out, mut i) = (Vec::new(), 0);
    while i < c.len() {
        let (ch, line) = (c[i], lines[i]);
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            i = skip(i, &['\n'], false);
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0; // block comments nest
            while i < c.len() {
                match (c[i], at(i + 1)) {
                    ('/', '*') => (depth, i) = (depth + 1, i + 2),
                    ('*', '/') => (depth, i) = (depth - 1, i + 2),
                    _ => i += 1,
                }
                if depth == 0 {
                    break;
                }
            }
        } else if ch == '"' {
            i = skip(i + 1, &['"'], true);
        } else if ch == '\'' && at(i + 1) == '\\' {
            i = skip(i + 3, &['\''], false); // the escaped character may be a quote
        } else if ch == '\'' && at(i + 2) == '\'' {
            i += 3;
        } else if word(ch) {
            let w: String = c[i..].iter().take_while(|&&ch| word(ch)).collect();
            i += w.chars().count();
            // r"..", r#".."#, br"..": raw strings have no escapes, only hashes.
            let hashes = c[i..].iter().take_while(|&&h| h == '#').count();
            if matches!(w.as_str(), "r" | "br" | "cr") && at(i + hashes) == '"' {
                let end: Vec<char> = std::iter::once('"').chain(vec!['#'; hashes]).collect();
                i = skip(i + hashes + 1, &end, false);
            } else {
                out.push((line, w));
            }
        } else if ch == ':' && at(i + 1) == ':' {
            out.push((line, "::".into()));
            i += 2;
        } else {
            out.push((line, ch.to_string()));
            i += 1;
        }
    }
    out
}

fn is_ident(w: &str) -> bool {
    w.starts_with(|ch: char| ch.is_alphabetic() || ch == '_') && w != "self"
}

/// Every top-level module that `src` names from the crate root, as
/// (line, module): `crate::x`, `use crate::{x::A, y::{B, C}}`, and
/// `super::super::x` when the supers climb `depth` (the file's module depth,
/// 1 for `src/x.rs` or `src/x/mod.rs`) plus any inline `mod m { }` around it.
fn scan(src: &str, depth: usize) -> Vec<(usize, String)> {
    let t = lex(src);
    let is = |i: usize, s: &str| t.get(i).is_some_and(|x| x.1 == s);
    // One entry per open brace: does it open an inline `mod m { }`?
    let (mut out, mut braces) = (Vec::new(), Vec::new());
    for i in 0..t.len() {
        match t[i].1.as_str() {
            "{" => braces.push(i >= 2 && is(i - 2, "mod")),
            "}" => _ = braces.pop(),
            _ => {}
        }
        if i > 0 && is(i - 1, "::") {
            continue; // not the start of a path
        }
        let root = if is(i, "crate") && is(i + 1, "::") {
            i + 2
        } else {
            let mut j = i;
            while is(j, "super") && is(j + 1, "::") {
                j += 2;
            }
            if j == i || (j - i) / 2 != depth + braces.iter().filter(|&&m| m).count() {
                continue;
            }
            j
        };
        if !is(root, "{") {
            if t.get(root).is_some_and(|x| is_ident(&x.1)) {
                out.push(t[root].clone());
            }
            continue;
        }
        // A group: the first word of each item at its top level is a module.
        let mut level = 0;
        for (k, tok) in t.iter().enumerate().skip(root) {
            match tok.1.as_str() {
                "{" => level += 1,
                "}" if level == 1 => break,
                "}" => level -= 1,
                w if level == 1 && is_ident(w) && (is(k - 1, "{") || is(k - 1, ",")) => {
                    out.push(tok.clone())
                }
                _ => {}
            }
        }
    }
    out
}

/// Modules declared in `lib.rs` (`mod x;`, `pub mod x;`, `mod x { }`).
fn declared(lib: &str) -> Vec<String> {
    let t = lex(lib);
    t.windows(2)
        .filter(|w| w[0].1 == "mod")
        .map(|w| w[1].1.clone())
        .collect()
}

/// Modules listed but not declared, or declared but not listed.
fn check_listed(layers: &Layers, declared: &[String]) -> Vec<String> {
    let mut bad = Vec::new();
    for m in declared.iter().filter(|m| !layers.contains_key(*m)) {
        bad.push(format!("src/lib.rs: module {m} {UNLISTED}"));
    }
    for m in layers.keys().filter(|m| !declared.contains(m)) {
        bad.push(format!(
            "ARCHITECTURE.md: {m} is not declared in src/lib.rs"
        ));
    }
    bad
}

/// Violations in one file; `path` is relative to the crate, like `src/health/checker.rs`.
fn check_file(layers: &Layers, path: &str, src: &str) -> Vec<String> {
    let rel = path.strip_prefix("src/").unwrap_or(path);
    let parts: Vec<&str> = rel.split('/').collect();
    let module = parts[0].trim_end_matches(".rs");
    let depth = parts.len() - usize::from(parts.last() == Some(&"mod.rs"));
    let Some(&mine) = layers.get(module) else {
        return vec![format!("{path}: module {module} {UNLISTED}")];
    };
    let mut bad = Vec::new();
    for (line, other) in scan(src, depth) {
        let msg = match layers.get(&other) {
            _ if other == module => continue,
            Some(&theirs) if theirs < mine => continue,
            Some(&theirs) => format!("{module} (layer {mine}) uses {other} (layer {theirs})"),
            None => format!("{module} (layer {mine}) uses {other}, which is not listed"),
        };
        bad.push(format!("{path}:{line}: {msg}"));
    }
    bad.dedup(); // the same module twice on one line
    bad
}

/// `.rs` files under `dir`, as paths relative to `root`, like `src/zone/mod.rs`.
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for e in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p.strip_prefix(root).unwrap().to_string_lossy().into());
        }
    }
}

#[test]
fn layers_point_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| {
        fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("cannot read {p}: {e}"))
    };
    let layers =
        parse_layers(&read("ARCHITECTURE.md")).unwrap_or_else(|e| panic!("ARCHITECTURE.md: {e}"));
    let mut bad = check_listed(&layers, &declared(&read("src/lib.rs")));
    let mut files = Vec::new();
    rust_files(root, &root.join("src"), &mut files);
    files.sort();
    files.retain(|f| f != "src/main.rs" && f != "src/lib.rs");
    for f in &files {
        bad.extend(check_file(&layers, f, &read(f)));
    }
    assert!(
        bad.is_empty(),
        "{} layer violation(s); a module may use only itself and modules in strictly \
         lower layers of the ```layers block in ARCHITECTURE.md:\n{}\n\
         Either move the code down to a lower layer, or change the order in \
         ARCHITECTURE.md and write down the reason there.",
        bad.len(),
        bad.join("\n")
    );
}

// The checker itself, on synthetic input: it must be able to fail.

const DOC: &str = "intro\n\n```layers\n# top first\n3 daemon\n2 zone geo\n1 config\n```\n";

fn bad(path: &str, src: &str) -> Vec<String> {
    check_file(&parse_layers(DOC).unwrap(), path, src)
}

#[test]
fn parses_layers() {
    let l = parse_layers(DOC).unwrap();
    assert_eq!(
        [l["daemon"], l["zone"], l["geo"], l["config"]],
        [3, 2, 2, 1]
    );
    let err = |doc: &str| parse_layers(doc).unwrap_err();
    assert_eq!(err("no block"), "no ```layers block");
    assert!(err("```layers\n2 a\n1 a\n```").contains("module `a` is listed twice"));
    assert!(err("```layers\nx a\n```").contains("line 2: `x` is not a layer number"));
    assert!(err("```layers\n1 a\n2 b\n```").contains("line 3: layer 2 is not below"));
    assert!(err("```layers\n1 a\n").contains("not closed"));
    assert!(err("```layers\n```\n").contains("empty"));
    assert!(err("```layers\n1 a\n```\n```layers\n").contains("more than one"));
}

#[test]
fn reports_upward_use_with_its_line() {
    let src = "//! config\nuse std::fmt;\nuse crate::daemon::X;\n";
    assert_eq!(
        bad("src/config.rs", src),
        ["src/config.rs:3: config (layer 1) uses daemon (layer 3)"]
    );
}

#[test]
fn reports_one_upward_item_in_a_grouped_use() {
    let src =
        "use crate::{\n    config::A,\n    zone::{\n        B,\n        C},\n    daemon::D,\n};\n";
    assert_eq!(
        bad("src/geo/rules.rs", src),
        [
            "src/geo/rules.rs:3: geo (layer 2) uses zone (layer 2)",
            "src/geo/rules.rs:6: geo (layer 2) uses daemon (layer 3)"
        ]
    );
}

#[test]
fn reports_same_layer_inline_path() {
    let src = "fn f() {\n    let z = crate::zone::parse(b'x', 'y');\n}\n";
    assert_eq!(
        bad("src/geo/mod.rs", src),
        ["src/geo/mod.rs:2: geo (layer 2) uses zone (layer 2)"]
    );
}

#[test]
fn ignores_comments_and_literals() {
    let src = r####"
        //! See crate::daemon::X.
        /// [`crate::daemon::Y`]
        /* crate::daemon /* nested */ crate::daemon */
        fn f<'a>(x: &'a str) -> char {
            let _ = ("crate::daemon::a \" crate::daemon", r#"crate::daemon "#, br"crate::daemon");
            let _ = '"'; // crate::daemon
            '\''
        }
    "####;
    assert_eq!(bad("src/config.rs", src), [""; 0]);
}

#[test]
fn allows_downward_and_own_module() {
    let src = "use crate::config::C;\nuse crate::{zone::Z, config};\nfn f() { crate::daemon::g() }";
    assert_eq!(bad("src/daemon.rs", src), [""; 0]);
    let own = "use crate::geo::db::Db;\nuse super::rules;\n";
    assert_eq!(bad("src/geo/special.rs", own), [""; 0]);
}

#[test]
fn follows_super_chains_to_the_crate_root() {
    let src = "use super::super::daemon::X;\nmod tests {\n    use super::super::super::zone;\n    use super::super::rules;\n}\n";
    assert_eq!(
        bad("src/geo/db.rs", src),
        [
            "src/geo/db.rs:1: geo (layer 2) uses daemon (layer 3)",
            "src/geo/db.rs:3: geo (layer 2) uses zone (layer 2)"
        ]
    );
}

#[test]
fn reports_unlisted_modules() {
    assert_eq!(
        bad("src/extra/mod.rs", "use crate::config::C;"),
        ["src/extra/mod.rs: module extra is not listed in ARCHITECTURE.md"]
    );
    assert_eq!(
        bad("src/config.rs", "use crate::nowhere::C;"),
        ["src/config.rs:1: config (layer 1) uses nowhere, which is not listed"]
    );
    let lib = "//! mod fake;\npub mod config;\nmod daemon;\npub mod extra;\nmod zone {}\n";
    assert_eq!(declared(lib), ["config", "daemon", "extra", "zone"]);
    assert_eq!(
        check_listed(&parse_layers(DOC).unwrap(), &declared(lib)),
        [
            "src/lib.rs: module extra is not listed in ARCHITECTURE.md",
            "ARCHITECTURE.md: geo is not declared in src/lib.rs"
        ]
    );
}
