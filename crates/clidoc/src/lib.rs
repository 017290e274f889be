//! Man pages and shell completions generated from a binary's clap
//! definitions, so they cannot drift from the options the binary accepts.
//! `meridian` and `meridian-probe` both print theirs through this crate.
//!
//! One page per binary, laid out as man-pages(7) asks and as knotc(8) and
//! gdnsd(8) do: NAME, one SYNOPSIS with a line per command, DESCRIPTION,
//! OPTIONS, COMMANDS (a subsection per command with its options), then the
//! sections the binary supplies (EXIT STATUS, ENVIRONMENT, FILES, SIGNALS,
//! SEE ALSO, ...), which clap cannot know.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::io::Write;

use clap::ArgAction;
pub use clap_complete::Shell;
use roff::{bold, italic, roman, Inline, Roff};

/// A section clap cannot generate: a title, an optional paragraph, then
/// tagged paragraphs (term, text), e.g. a signal and what it does.
pub struct Section<'a> {
    /// The heading, upper case by convention (`EXIT STATUS`).
    pub title: &'a str,
    /// A paragraph before the items (may be empty).
    pub text: &'a str,
    /// (term, text) pairs, the term set in bold.
    pub items: &'a [(&'a str, &'a str)],
}

/// Write the man page of `cmd` in `section`, with `extra` sections after
/// the commands.
pub fn man_page(
    cmd: clap::Command,
    section: &str,
    extra: &[Section<'_>],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let name = cmd.get_name().to_string();
    // Not built: the commands have no `--help` yet, so `quiet` copies get none.
    let cmd = cmd.disable_help_subcommand(true);
    let man = clap_mangen::Man::new(cmd.clone()).section(section);
    let mut page = String::new();
    // The title brings the apostrophe string (`Aq`) every fragment uses.
    page += &render(|w| man.render_title(w))?;
    page += &fragment(|w| man.render_name_section(w), false)?;

    // One SYNOPSIS: a line per command that takes arguments.
    let mut r = Roff::default();
    r.control("SH", ["SYNOPSIS"]);
    for (i, (full, c)) in commands(&cmd, &name).into_iter().enumerate() {
        if i > 0 {
            r.control("br", []);
        }
        r.text(synopsis(c, &full));
    }
    page += &fragment(|w| r.to_writer(w), false)?;
    page += &fragment(|w| man.render_description_section(w), false)?;
    page += &fragment(|w| man.render_options_section(w), false)?;

    let mut r = Roff::default();
    r.control("SH", ["COMMANDS"]);
    page += &fragment(|w| r.to_writer(w), false)?;
    for (full, c) in commands(&cmd, &name).into_iter().skip(1) {
        let mut r = Roff::default();
        r.control("SS", [full.as_str()]);
        page += &fragment(|w| r.to_writer(w), false)?;
        let m = clap_mangen::Man::new(quiet(c, &full));
        page += &fragment(|w| m.render_description_section(w), true)?;
        if c.get_arguments().any(|a| !a.is_hide_set()) {
            page += &fragment(|w| m.render_options_section(w), true)?;
        }
    }
    for s in extra {
        let mut r = Roff::default();
        r.control("SH", [s.title]);
        if !s.text.is_empty() {
            r.text([roman(s.text)]);
        }
        for (term, text) in s.items {
            r.control("TP", []);
            r.text([bold(*term)]);
            r.text([roman(*text)]);
        }
        page += &fragment(|w| r.to_writer(w), false)?;
    }
    out.write_all(page.as_bytes())
}

/// The synopsis line of `c`: its options with their values (`[--listen
/// ADDR:PORT]...`), the required ones without brackets, a required group
/// as `{--key FILE | --config FILE}`, then positionals and `COMMAND`.
fn synopsis(c: &clap::Command, full: &str) -> Vec<Inline> {
    let mut line = vec![bold(full)];
    let grouped: Vec<&clap::Id> = c
        .get_groups()
        .filter(|g| g.is_required_set())
        .flat_map(|g| g.get_args())
        .collect();
    let args: Vec<&clap::Arg> = c.get_arguments().filter(|a| !a.is_hide_set()).collect();
    for a in args.iter().filter(|a| !a.is_positional()) {
        if grouped.contains(&a.get_id()) {
            continue;
        }
        line.push(roman(" "));
        let req = a.is_required_set();
        if !req {
            line.push(roman("["));
        }
        line.extend(flag(a));
        if !req {
            line.push(roman("]"));
        }
        if matches!(a.get_action(), ArgAction::Append) {
            line.push(roman("..."));
        }
    }
    for g in c.get_groups().filter(|g| g.is_required_set()) {
        line.push(roman(" {"));
        for (i, id) in g.get_args().enumerate() {
            if i > 0 {
                line.push(roman(" | "));
            }
            if let Some(a) = args.iter().find(|a| a.get_id() == id) {
                line.extend(flag(a));
            }
        }
        line.push(roman("}"));
    }
    for a in args.iter().filter(|a| a.is_positional()) {
        let v = value_name(a);
        line.push(roman(if a.is_required_set() { " " } else { " [" }));
        line.push(italic(v));
        if !a.is_required_set() {
            line.push(roman("]"));
        }
    }
    if c.has_subcommands() {
        line.push(roman(" "));
        line.push(italic("COMMAND"));
    }
    line
}

/// `--long VALUE` (or `-s VALUE`), the value in italics when it takes one.
fn flag(a: &clap::Arg) -> Vec<Inline> {
    let f = match (a.get_long(), a.get_short()) {
        (Some(l), _) => format!("--{l}"),
        (None, Some(s)) => format!("-{s}"),
        (None, None) => return vec![italic(value_name(a))],
    };
    let mut v = vec![bold(f)];
    if a.get_action().takes_values() {
        v.push(roman(" "));
        v.push(italic(value_name(a)));
    }
    v
}

/// The value's name as `--help` shows it: its value_name, else the id in
/// capitals.
fn value_name(a: &clap::Arg) -> String {
    match a.get_value_names() {
        Some(v) if !v.is_empty() => v.join(" "),
        _ => a.get_id().as_str().to_uppercase(),
    }
}

/// Every command with its full name (`meridian ctl reload`), depth first,
/// the binary itself first; a command that only groups others and takes
/// no argument of its own (`meridian dnssec`) is left out.
fn commands<'a>(cmd: &'a clap::Command, name: &str) -> Vec<(String, &'a clap::Command)> {
    let mut out = vec![(name.to_string(), cmd)];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let full = format!("{name} {}", sub.get_name());
        let own = sub.get_arguments().any(|a| !a.is_hide_set());
        let rest = commands(sub, &full);
        if own || !sub.has_subcommands() {
            out.push(rest[0].clone());
        }
        out.extend(rest.into_iter().skip(1));
    }
    out
}

/// `c` named `full`, without the `--help` every command has (the page
/// says it once, under OPTIONS).
fn quiet(c: &clap::Command, full: &str) -> clap::Command {
    c.clone()
        .name(full.to_string())
        .bin_name(full.to_string())
        .disable_help_flag(true)
        .disable_version_flag(true)
}

/// What `render` writes, as text.
fn render(f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> std::io::Result<String> {
    let mut buf = Vec::new();
    f(&mut buf)?;
    String::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// A rendered fragment without the apostrophe preamble roff repeats in
/// each (the title's is enough) and, with `headless`, without its `.SH`
/// line (clap_mangen gives every section one; a command's description and
/// options go under its `.SS` instead).
fn fragment(
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    headless: bool,
) -> std::io::Result<String> {
    let text = render(f)?;
    let mut out = String::new();
    let mut head = headless;
    for l in text.lines() {
        if l.starts_with(".ie \\n(.g .ds Aq") || l.starts_with(".el .ds Aq") {
            continue;
        }
        if head && l.starts_with(".SH") {
            head = false;
            continue;
        }
        out += l;
        out.push('\n');
    }
    Ok(out)
}

/// Write the completion script of `cmd` for `shell`.
pub fn completions(mut cmd: clap::Command, shell: Shell, out: &mut dyn Write) {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, out);
}
