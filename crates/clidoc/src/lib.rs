//! Man pages and shell completions generated from a binary's clap
//! definitions, so they cannot drift from the options the binary accepts.
//! `meridian` and `meridian-probe` both print theirs through this crate.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::io::Write;

pub use clap_complete::Shell;

/// Write the man page of `cmd` in `section`: the top-level page, then each
/// subcommand's synopsis, description and options (clap_mangen renders one
/// command at a time).
pub fn man_page(cmd: clap::Command, section: &str, out: &mut dyn Write) -> std::io::Result<()> {
    let name = cmd.get_name().to_string();
    clap_mangen::Man::new(cmd.clone())
        .section(section)
        .render(out)?;
    subcommands(&cmd, &name, out)
}

/// A section per subcommand, then per subcommand of each (`meridian ctl
/// reload`), depth first.
fn subcommands(cmd: &clap::Command, prefix: &str, out: &mut dyn Write) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let full = format!("{prefix} {}", sub.get_name());
        writeln!(out, ".SH \"{}\"", full.to_uppercase())?;
        let man = clap_mangen::Man::new(sub.clone().name(full.clone()));
        man.render_synopsis_section(out)?;
        man.render_description_section(out)?;
        man.render_options_section(out)?;
        subcommands(sub, &full, out)?;
    }
    Ok(())
}

/// Write the completion script of `cmd` for `shell`.
pub fn completions(mut cmd: clap::Command, shell: Shell, out: &mut dyn Write) {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, out);
}
