//! The man pages and completions are generated from the clap definitions:
//! they must name every subcommand and option the binaries accept, be laid
//! out as a man page is (one SYNOPSIS, the sections clap cannot know:
//! EXIT STATUS, ENVIRONMENT, FILES, SIGNALS, SEE ALSO) and render without a
//! groff warning.

use std::process::Command;

fn run(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .output()
        .expect("run the binary");
    assert!(out.status.success(), "{bin} {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The `.SH` headings of a page, in order.
fn sections(man: &str) -> Vec<String> {
    man.lines()
        .filter_map(|l| l.strip_prefix(".SH "))
        .map(|h| h.trim_matches('"').to_string())
        .collect()
}

/// groff's warnings (all of them: `-ww`) for `page`; None without groff.
fn groff_warnings(test: &str, page: &str) -> Option<String> {
    use std::io::Write;
    let child = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        crate::common::skip(test, "groff is not installed");
        return None;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "groff failed: {out:?}");
    Some(String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn meridian_man_page_covers_every_command() {
    let man = run(env!("CARGO_BIN_EXE_meridian"), &["man"]);
    assert!(man.contains(".TH meridian 8"), "section 8: {man}");
    for word in [
        ".SS \"meridian serve\"",
        ".SS \"meridian check\"",
        ".SS \"meridian lookup\"",
        ".SS \"meridian ctl status\"",
        ".SS \"meridian ctl reload\"",
        ".SS \"meridian dnssec keygen\"",
        ".SS \"meridian dnssec ds\"",
        ".SS \"meridian completions\"",
        "\\-\\-ksk",
        "\\-\\-token\\-file",
        "\\-\\-config",
        "\\-\\-listen",
        "\\-\\-allow\\-root",
        "\\-\\-server",
        "\\-\\-json",
    ] {
        assert!(man.contains(word), "man page lacks {word}");
    }
}

#[test]
fn meridian_man_page_has_one_synopsis_and_the_daemon_sections() {
    let man = run(env!("CARGO_BIN_EXE_meridian"), &["man"]);
    let secs = sections(&man);
    let count = |s: &str| secs.iter().filter(|x| *x == s).count();
    assert_eq!(count("SYNOPSIS"), 1, "{secs:?}");
    for s in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "COMMANDS",
        "EXIT STATUS",
        "ENVIRONMENT",
        "FILES",
        "SIGNALS",
        "SEE ALSO",
    ] {
        assert_eq!(count(s), 1, "{s} in {secs:?}");
    }
    assert_eq!(
        secs.last().map(String::as_str),
        Some("SEE ALSO"),
        "{secs:?}"
    );
    // The synopsis has a line per command, with the option values.
    let synopsis: String = man
        .split(".SH SYNOPSIS\n")
        .nth(1)
        .and_then(|r| r.split("\n.SH ").next())
        .unwrap()
        .to_string();
    for cmd in [
        "meridian serve",
        "meridian ctl status",
        "meridian dnssec ds",
    ] {
        assert!(synopsis.contains(&format!("\\fB{cmd}\\fR")), "{synopsis}");
    }
    assert!(
        synopsis.contains("\\fB\\-\\-config\\fR \\fICONFIG\\fR"),
        "{synopsis}"
    );
    // What the daemon does on each signal, the variables it reads, its exits.
    for word in [
        "SIGHUP",
        "SIGTERM",
        "SIGINT",
        "RUST_LOG",
        "NO_COLOR",
        "meridian.toml",
    ] {
        assert!(man.contains(word), "man page lacks {word}");
    }
    let exit = man.split(".SH \"EXIT STATUS\"").nth(1).unwrap();
    for code in ["\\fB0\\fR", "\\fB1\\fR", "\\fB2\\fR"] {
        assert!(exit.contains(code), "EXIT STATUS lacks {code}");
    }
    if let Some(w) = groff_warnings("meridian_man_page_has_one_synopsis", &man) {
        assert!(w.is_empty(), "groff warns: {w}");
    }
}

#[test]
fn probe_man_page_covers_every_command() {
    // Built beside meridian by `cargo test --workspace`, as tests/lab/lab_probe.rs expects.
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_meridian")).with_file_name("meridian-probe");
    assert!(
        bin.exists(),
        "{} is missing: cargo build -p meridian-probe",
        bin.display()
    );
    let bin = bin.display().to_string();
    let man = run(&bin, &["man"]);
    assert!(man.contains(".TH meridian-probe 1"), "{man}");
    for word in ["ecs", "rotation", "\\-\\-server", "\\-\\-subnet"] {
        assert!(man.contains(word), "probe man page lacks {word}");
    }
    let secs = sections(&man);
    assert_eq!(
        secs.iter().filter(|s| *s == "SYNOPSIS").count(),
        1,
        "{secs:?}"
    );
    for s in ["EXIT STATUS", "FILES", "SEE ALSO"] {
        assert!(secs.iter().any(|x| x == s), "{s} in {secs:?}");
    }
    if let Some(w) = groff_warnings("probe_man_page_covers_every_command", &man) {
        assert!(w.is_empty(), "groff warns: {w}");
    }
}

#[test]
fn completions_name_the_subcommands() {
    let bash = run(env!("CARGO_BIN_EXE_meridian"), &["completions", "bash"]);
    assert!(bash.contains("_meridian()"), "{bash}");
    for sub in ["serve", "check", "lookup", "ctl", "dnssec", "keygen", "man"] {
        assert!(bash.contains(sub), "bash completion lacks {sub}");
    }
    let zsh = run(env!("CARGO_BIN_EXE_meridian"), &["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef meridian"), "{zsh}");
}
