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
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let full = format!("{name} {}", sub.get_name());
        writeln!(out, ".SH \"{}\"", full.to_uppercase())?;
        let man = clap_mangen::Man::new(sub.clone().name(full));
        man.render_synopsis_section(out)?;
        man.render_description_section(out)?;
        man.render_options_section(out)?;
    }
    Ok(())
}

/// Write the completion script of `cmd` for `shell`.
pub fn completions(mut cmd: clap::Command, shell: Shell, out: &mut dyn Write) {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, out);
}
