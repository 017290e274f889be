//! The man pages and completions are generated from the clap definitions:
//! they must name every subcommand and option the binaries accept.

use std::process::Command;

fn run(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .output()
        .expect("run the binary");
    assert!(out.status.success(), "{bin} {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn meridian_man_page_covers_every_command() {
    let man = run(env!("CARGO_BIN_EXE_meridian"), &["man"]);
    assert!(man.contains(".TH meridian 8"), "section 8: {man}");
    for word in [
        "serve",
        "check",
        "lookup",
        "completions",
        "MERIDIAN CTL RELOAD",
        "MERIDIAN DNSSEC KEYGEN",
        "MERIDIAN DNSSEC DS",
        "\\-\\-ksk",
        "\\-\\-token\\-file",
        "\\-\\-config",
        "\\-\\-listen",
        "\\-\\-allow\\-root",
    ] {
        assert!(man.contains(word), "man page lacks {word}");
    }
}

#[test]
fn probe_man_page_covers_every_command() {
    // Built beside meridian by `cargo test --workspace`, as tests/lab_probe.rs expects.
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
