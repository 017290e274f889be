//! `meridian check ... | head -1`: a reader that goes away before the
//! output is written is not a crash. Every subcommand that prints exits 0
//! with nothing on stderr (before: `println!` panicked, "failed printing
//! to stdout: Broken pipe", exit 101).

use std::io::Read;
use std::process::{Command, Stdio};

use crate::common::*;

/// Run `meridian args` with stdout to a pipe whose reading end is closed
/// at once: (exit code, stderr).
fn closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (child.wait().unwrap().code(), err)
}

#[test]
fn printing_commands_exit_quietly_on_a_closed_pipe() {
    let cfg = example_config();
    let cfg = cfg.to_str().unwrap();
    for args in [
        vec!["check", "--config", cfg],
        vec![
            "lookup",
            "--config",
            cfg,
            "--name",
            "geo.example.test",
            "--client",
            "8.8.8.0/24",
        ],
        vec!["man"],
        vec!["completions", "bash"],
    ] {
        let (code, err) = closed_stdout(&args);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

#[test]
fn the_first_line_then_a_closed_pipe() {
    // As `| head -1` does: read one line, then close.
    let mut child = Command::new(BIN)
        .args(["check", "--config", example_config().to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut b = [0u8; 1];
    let mut line = Vec::new();
    while out.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
        line.push(b[0]);
    }
    drop(out);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!line.is_empty());
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(status.code(), Some(0), "{err}");
}
