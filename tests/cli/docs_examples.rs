//! Every ```toml block in README.md and docs/**/*.md goes through the real
//! `meridian check`, so the documented examples cannot rot.
//!
//! Info strings:
//! - `toml`: a complete config, written as `zones/doc-N.toml` in a copy of
//!   the bundled layout (zones/, geo/); check must exit 0.
//! - `toml,fragment`: deep-merged onto zones/meridian.toml (the fragment
//!   wins); the result must pass check.
//! - `toml,invalid`: a complete config that check must reject (exit 1). If
//!   the next fenced block starts with `FILE:LINE: message`, check's output
//!   must contain `:LINE: message`.
//!
//! Any other `toml...` info string fails the test, so no block escapes.
//! No network traffic: check only reads files.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Full,
    Fragment,
    Invalid,
}

struct Block {
    doc: PathBuf,
    /// 1-based line of the opening fence.
    line: usize,
    kind: Result<Kind, String>,
    text: String,
    /// For invalid blocks: `:LINE: message` from an error block right after.
    expected_error: Option<String>,
}

struct Fence {
    ch: char,
    len: usize,
    info: String,
}

/// A fence opener or closer: 3+ backticks or tildes after at most 3 spaces
/// of indent (CommonMark), or more indent inside list items, which the docs
/// use too.
fn fence(line: &str) -> Option<Fence> {
    let t = line.trim_start();
    let ch = t.chars().next()?;
    if ch != '`' && ch != '~' {
        return None;
    }
    let len = t.chars().take_while(|&c| c == ch).count();
    if len < 3 {
        return None;
    }
    Some(Fence {
        ch,
        len,
        info: t[len..].trim().to_string(),
    })
}

fn kind_of(info: &str) -> Option<Result<Kind, String>> {
    // The language is the first word of the info string (mdBook and code
    // hosts split on commas and spaces).
    let lang = info
        .split(|c: char| c == ',' || c.is_whitespace())
        .next()
        .unwrap_or("");
    if !lang.eq_ignore_ascii_case("toml") {
        return None;
    }
    Some(match info {
        "toml" => Ok(Kind::Full),
        "toml,fragment" => Ok(Kind::Fragment),
        "toml,invalid" => Ok(Kind::Invalid),
        other => Err(format!(
            "unknown info string {other:?}: use toml, toml,fragment or toml,invalid"
        )),
    })
}

/// `FILE:LINE: message` -> `:LINE: message`.
fn error_suffix(line: &str) -> Option<String> {
    let mut parts = line.trim().splitn(3, ':');
    let file = parts.next()?;
    let num = parts.next()?;
    let msg = parts.next()?;
    if file.is_empty() || num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    msg.strip_prefix(' ')?;
    Some(format!(":{num}:{msg}"))
}

fn extract(doc: &Path, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(open) = fence(lines[i]) else {
            i += 1;
            continue;
        };
        let start = i;
        let mut body = String::new();
        i += 1;
        while i < lines.len() {
            if let Some(close) = fence(lines[i]) {
                if close.ch == open.ch && close.len >= open.len && close.info.is_empty() {
                    break;
                }
            }
            body.push_str(lines[i]);
            body.push('\n');
            i += 1;
        }
        i += 1; // past the closing fence
        let Some(kind) = kind_of(&open.info) else {
            continue;
        };
        let mut expected_error = None;
        if kind == Ok(Kind::Invalid) {
            let mut j = i;
            while j < lines.len() && lines[j].trim().is_empty() {
                j += 1;
            }
            if j + 1 < lines.len() && fence(lines[j]).is_some() {
                expected_error = error_suffix(lines[j + 1]);
            }
        }
        blocks.push(Block {
            doc: doc.to_path_buf(),
            line: start + 1,
            kind,
            text: body,
            expected_error,
        });
    }
    blocks
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            // docs/book is mdBook's output, not a source.
            if p.file_name().is_some_and(|n| n == "book") && p.parent() == Some(dir) {
                continue;
            }
            markdown_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "md") {
            out.push(p);
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Removes the scratch copy however the test ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Deep merge: tables merge key by key, anything else from `over` replaces
/// (so a fragment's `[[zone]]` list replaces the bundled one).
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn check(config: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_meridian"))
        .arg("check")
        .arg("--config")
        .arg(config)
        .output()
        .expect("run meridian check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn toml_examples_in_the_docs_pass_meridian_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md")];
    if root.join("docs").is_dir() {
        markdown_files(&root.join("docs"), &mut docs);
    }
    let mut blocks = Vec::new();
    for doc in &docs {
        let text = fs::read_to_string(doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
        blocks.extend(extract(doc.strip_prefix(root).unwrap(), &text));
    }

    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let tmp = TempDir(std::env::temp_dir().join(format!(
        "meridian-docs-examples-{}-{nanos}",
        std::process::id()
    )));
    copy_dir(&root.join("zones"), &tmp.0.join("zones"));
    copy_dir(&root.join("geo"), &tmp.0.join("geo"));
    let bundled: toml::Table = fs::read_to_string(root.join("zones/meridian.toml"))
        .unwrap()
        .parse()
        .expect("zones/meridian.toml parses");

    let mut failures = Vec::new();
    let (mut full, mut fragment, mut invalid) = (0, 0, 0);
    for (n, b) in blocks.iter().enumerate() {
        let at = format!("{}:{}", b.doc.display(), b.line);
        let kind = match &b.kind {
            Ok(k) => *k,
            Err(e) => {
                failures.push(format!("{at}: {e}"));
                continue;
            }
        };
        let config = tmp.0.join(format!("zones/doc-{n}.toml"));
        let contents = match kind {
            Kind::Full | Kind::Invalid => b.text.clone(),
            Kind::Fragment => {
                let frag: toml::Table = match b.text.parse() {
                    Ok(t) => t,
                    Err(e) => {
                        failures.push(format!("{at}: fragment is not valid TOML: {e}"));
                        continue;
                    }
                };
                let mut merged = bundled.clone();
                merge(&mut merged, frag);
                toml::to_string(&merged).expect("serialise the merged config")
            }
        };
        fs::write(&config, &contents).unwrap();
        let (code, output) = check(&config);
        match kind {
            Kind::Full => full += 1,
            Kind::Fragment => fragment += 1,
            Kind::Invalid => invalid += 1,
        }
        let what = match kind {
            Kind::Full => "complete config",
            Kind::Fragment => "fragment merged onto zones/meridian.toml",
            Kind::Invalid => "invalid example",
        };
        let want = if kind == Kind::Invalid { 1 } else { 0 };
        if code != Some(want) {
            failures.push(format!(
                "{at}: {what}: meridian check exited {code:?}, expected {want}\n\
                 --- config ---\n{contents}--- output ---\n{output}"
            ));
        } else if let Some(e) = &b.expected_error {
            // Errors name files by full path; the docs show them relative.
            let zones = format!("{}/", tmp.0.join("zones").display());
            if !output.replace(&zones, "").contains(e.as_str()) {
                failures.push(format!(
                    "{at}: {what}: expected the error {e:?}, check said:\n{output}"
                ));
            }
        }
    }

    println!(
        "checked {} toml blocks in {} files: {full} complete, {fragment} fragments, {invalid} invalid",
        full + fragment + invalid,
        docs.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} toml blocks failed:\n\n{}",
        failures.len(),
        blocks.len(),
        failures.join("\n\n")
    );
    assert!(full + fragment + invalid > 0, "no toml blocks found");
}

#[test]
fn extraction_sees_every_marking() {
    let doc = "\
intro
```toml
a = 1
```
````md
```toml,ignore
not a block of this page
```
````
  ```toml,fragment
  b = 2
  ```
```toml,invalid
c = [
```

```text
meridian.toml:1: some message
```
```toml,ignore
d = 4
```
```TOML
e = 5
```
";
    let blocks = extract(Path::new("x.md"), doc);
    let got: Vec<_> = blocks.iter().map(|b| (b.line, b.kind.clone())).collect();
    assert_eq!(
        got.len(),
        5,
        "{:?}",
        blocks.iter().map(|b| b.line).collect::<Vec<_>>()
    );
    assert_eq!(got[0], (2, Ok(Kind::Full)));
    assert_eq!(got[1], (10, Ok(Kind::Fragment)));
    assert_eq!(got[2], (13, Ok(Kind::Invalid)));
    assert!(got[3].1.is_err() && got[4].1.is_err());
    assert_eq!(blocks[0].text, "a = 1\n");
    assert_eq!(
        blocks[2].expected_error.as_deref(),
        Some(":1: some message")
    );
}

#[test]
fn fragments_merge_deeply_and_win() {
    let mut base: toml::Table =
        "[server]\nlog = \"info\"\nworkers = 0\n[[zone]]\norigin = \"a.\"\n"
            .parse()
            .unwrap();
    let frag: toml::Table = "[server]\nworkers = 2\n[server.rrl]\nresponses_per_second = 5\n"
        .parse()
        .unwrap();
    merge(&mut base, frag);
    let server = base["server"].as_table().unwrap();
    assert_eq!(server["log"].as_str(), Some("info"));
    assert_eq!(server["workers"].as_integer(), Some(2));
    assert!(server["rrl"].is_table());
    assert_eq!(base["zone"].as_array().unwrap().len(), 1);
}
