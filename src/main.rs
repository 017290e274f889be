//! The `meridian` command: the clap definitions of `serve`, `check`,
//! `lookup`, `ctl`, `dnssec`, `man` and `completions`, each handed to the library.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use meridian_clidoc::{Section, Shell};

use meridian::engine::Engine;

/// `meridian --version`: the package version and the git commit it was built
/// from (build.rs: short hash, `+dirty`, or `unknown` outside a checkout).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("MERIDIAN_GIT_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "meridian",
    version = VERSION,
    about = "Authoritative geo-DNS server",
    long_about = "meridian answers DNS from zone files, balances load through address pools \
(all, rotate, one, some), picks pools by where the client is (a MaxMind-format database \
keyed by EDNS Client Subnet, with exact scopes) and leaves out members that health \
checks mark down. The manual is in docs/ (an mdBook)."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve DNS over UDP and TCP.
    Serve {
        /// The config file (TOML).
        #[arg(long, short)]
        config: PathBuf,
        /// Listen address (repeatable); replaces the config's addresses.
        #[arg(long, value_name = "ADDR:PORT")]
        listen: Vec<String>,
        /// UDP worker threads per address (default: the config's, or one per core).
        #[arg(long)]
        workers: Option<usize>,
        /// HTTP listener for /metrics and /status ("none" turns it off); replaces the config's.
        #[arg(long, value_name = "ADDR:PORT")]
        http_listen: Option<String>,
        /// Allow running as root (for tests and containers): the same as
        /// `allow_root = true` in [server]; `user` is then not applied.
        #[arg(long)]
        allow_root: bool,
        /// Take over from a meridian already serving these addresses: start
        /// alongside it, then, once ready, send it SIGTERM. Without this flag
        /// an address another `meridian serve` holds is refused.
        #[arg(long)]
        replace: bool,
    },
    /// Load and validate the config, zones and geo database, then exit.
    Check {
        /// The config file (TOML).
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Show how a name is answered for a client, and why: from the config
    /// alone, or from a running server with --server.
    ///
    /// Without --server it builds the config's engine and answers one query
    /// through it: no health check has run, and the operator's overrides
    /// and runtime weights, which only the running server holds, are not
    /// applied, so a drained or failed member may show as usable. With
    /// --server ADDR it asks that server's HTTP API (GET /lookup), which
    /// answers from the engine it is serving, with live health, overrides
    /// and runtime weights; --config then only supplies the token file, as
    /// for ctl.
    Lookup {
        /// The config file (TOML); with --server, only for its [api] tokens.
        #[arg(long, short, required_unless_present = "server")]
        config: Option<PathBuf>,
        /// Ask the running server whose HTTP API is at HOST:PORT (or http://HOST:PORT).
        #[arg(long, value_name = "URL")]
        server: Option<String>,
        /// With --server: a token file (lines of NAME SCOPE SECRET; default: the config's [api] tokens).
        #[arg(long, value_name = "PATH", requires = "server")]
        token_file: Option<PathBuf>,
        /// With --server: the token to use, by name.
        #[arg(long, value_name = "NAME", requires = "server")]
        token: Option<String>,
        /// The name to look up, e.g. geo.example.test.
        #[arg(long)]
        name: String,
        /// A or AAAA.
        #[arg(long = "type", default_value = "A")]
        qtype: String,
        /// The client address or subnet, e.g. 8.8.8.0/24.
        #[arg(long)]
        client: String,
    },
    /// Control a running server through its HTTP API (as gdnsdctl and knotc do).
    ///
    /// The API address and the token come from the server's config
    /// (`[server] http_listen`, `[api] tokens`) given with --config, or from
    /// --api and --token-file. Writes (override, weight, reload, stop) need a token
    /// of write scope. Exits 1 when the server refuses or fails.
    Ctl {
        /// The server's config file, for the API address and the token file.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// The API address, HOST:PORT or http://HOST:PORT (default: the config's http_listen).
        #[arg(long, value_name = "URL")]
        api: Option<String>,
        /// A token file (lines of NAME SCOPE SECRET; default: the config's [api] tokens).
        #[arg(long, value_name = "PATH")]
        token_file: Option<PathBuf>,
        /// The token to use, by name (default: the first that allows the command).
        #[arg(long, value_name = "NAME")]
        token: Option<String>,
        #[command(subcommand)]
        action: CtlCmd,
    },
    /// DNSSEC key files: make a key pair, print the DS record for the parent.
    Dnssec {
        #[command(subcommand)]
        action: DnssecCmd,
    },
    /// Fleet mode: the nodes sharing state through etcd (built with the
    /// `fleet` feature).
    #[cfg(feature = "fleet")]
    Fleet {
        #[command(subcommand)]
        action: FleetCmd,
    },
    /// Print the man page (roff, section 8) on standard output.
    Man,
    /// Print a shell completion script on standard output.
    Completions {
        /// The shell: bash, elvish, fish, powershell or zsh.
        shell: Shell,
    },
}

#[derive(Subcommand)]
enum CtlCmd {
    /// Print the server's /status as tables: each member's health, override, standing, weights and share; each pool family; the overrides and weights in force.
    Status {
        /// Print the /status JSON document instead (every field, for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Force a member's state: up, down, drain, or none to clear it.
    Override {
        /// The member's address (an IPv4 or IPv6 address, or ADDRESS:PORT, [v6]:PORT).
        address: String,
        /// up, down, drain or none.
        #[arg(value_parser = ["up", "down", "drain", "none"])]
        state: String,
        /// Only the entries checked on this port.
        #[arg(long)]
        port: Option<u16>,
    },
    /// Set a member's runtime weight: a factor on its configured weight, kept across reloads.
    ///
    /// 0 gives the member no share while another member of its pool is
    /// usable, 2 doubles its share; 1 or clear removes the factor. Applies to
    /// one, some and rotate pools.
    Weight {
        /// The member's address (an IPv4 or IPv6 address, or ADDRESS:PORT, [v6]:PORT).
        address: String,
        /// A number from 0 to 100, or clear.
        #[arg(value_parser = parse_weight_arg)]
        weight: String,
        /// Only the members checked on this port.
        #[arg(long)]
        port: Option<u16>,
    },
    /// List a pool's members: each one's source (the config, or its etcd registration key in fleet mode), hold, health and standing.
    Members {
        /// The pool's name.
        pool: String,
        /// Print the JSON document instead (every field, for scripts).
        #[arg(long)]
        json: bool,
    },
    /// Reload the config, zones and geo database (as SIGHUP does); fails if the new config does not load.
    Reload,
    /// Stop the server (as SIGTERM does).
    Stop,
}

#[derive(Subcommand)]
enum DnssecCmd {
    /// Write a new key pair (BIND format: K<zone>.+<alg>+<tag>.key and .private) and print its base name.
    ///
    /// The .private file is created with mode 0600. Without --ksk the key
    /// is a zone-signing key (flags 256); with it a key-signing key (257).
    Keygen {
        /// The zone, e.g. example.test.
        #[arg(long)]
        zone: String,
        /// ed25519 (algorithm 15) or ecdsap256 (algorithm 13).
        #[arg(long, value_parser = ["ed25519", "ecdsap256"])]
        algorithm: String,
        /// A key-signing key (flags 257, the secure entry point).
        #[arg(long)]
        ksk: bool,
        /// The directory to write into (default: the current directory).
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Print the DS record of a key, or of a configured zone's KSKs, for the parent zone.
    ///
    /// With --config and --zone: one DS per key of the zone's `dnssec` keys
    /// with flags 257 (KSK or CSK), or per key when none has them; the keys
    /// are checked as `meridian check` does.
    #[command(group(clap::ArgGroup::new("source").required(true).args(["key", "config"])))]
    Ds {
        /// The key's .key file (or its base name).
        #[arg(long, value_name = "FILE.key", conflicts_with_all = ["config", "zone"])]
        key: Option<PathBuf>,
        /// The config file whose zone's keys to use (with --zone).
        #[arg(long, value_name = "FILE", requires = "zone")]
        config: Option<PathBuf>,
        /// The zone in the config, e.g. example.test (with --config).
        #[arg(long, requires = "config")]
        zone: Option<String>,
        /// The digest: sha256 (type 2) or sha384 (type 4).
        #[arg(long, default_value = "sha256", value_parser = ["sha256", "sha384"])]
        digest: String,
    },
}

/// `meridian fleet ...`.
#[cfg(feature = "fleet")]
#[derive(Subcommand)]
enum FleetCmd {
    /// List the nodes registered in etcd: last contact, the engine
    /// generation and config each serves, and its view of member health;
    /// then each checked member's shared results (who reported what, when).
    Status {
        /// A config file whose [fleet] table says where etcd is.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
    /// Check a config as `meridian check` does and store it, with its zone
    /// files, in etcd as a new revision that every node then serves (each
    /// keeping its own [server], [api] and [fleet] tables, key files and
    /// geo database, which must match the checksum pushed); prune the
    /// revisions past [fleet] keep_revisions; then wait for the nodes
    /// registered to serve or refuse it, printing a line for each. Exits 0
    /// only if every node serves it, 3 if it was stored but a node refused
    /// it or did not answer.
    Push {
        /// The config to push; its [fleet] table says where etcd is.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Return once the revision is stored, without waiting for the
        /// nodes.
        #[arg(long)]
        no_wait: bool,
        /// How long to wait for the nodes to answer (as "30s", "2m").
        #[arg(long, value_name = "DURATION", default_value = "30s",
              value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
    },
}

/// The man page's sections clap cannot know: what `main` exits with, the
/// environment and files read, the signals `serve` handles (`daemon::serve`).
const MAN_SECTIONS: &[Section<'static>] = &[
    Section {
        title: "EXIT STATUS",
        text: "",
        items: &[
            ("0", "Success: check found the config valid; serve stopped on SIGTERM, SIGINT or ctl stop; a command did what it was asked."),
            ("1", "Failure: check found an error (the message names the file and line); serve could not load the config, bind an address (another meridian holds it: see --replace) or start; ctl's request was refused or failed (a reload whose config did not load); lookup could not answer; a dnssec or fleet command failed."),
            ("2", "Usage error: an unknown command or option, or a bad argument value (also a bad --listen address)."),
            ("3", "fleet push stored the revision, but a registered node refused it or did not answer within --timeout (one line per node says which, and why)."),
        ],
    },
    Section {
        title: "ENVIRONMENT",
        text: "",
        items: &[
            ("RUST_LOG", "A log filter (target=level, comma-separated, as [server] log takes) that replaces the config's log setting for serve."),
            ("NO_COLOR", "Any non-empty value turns off colour in the log (which is only coloured when standard error is a terminal)."),
            ("USER", "fleet push records it, with the host name, as who pushed a revision (builds with the fleet feature)."),
        ],
    },
    Section {
        title: "FILES",
        text: "Paths in the config are relative to the config file's directory.",
        items: &[
            ("/etc/meridian/meridian.toml", "The config (TOML), given with --config; the systemd unit in contrib/ and the packages use this path."),
            ("zone files", "Master files named by [[zone]] file, with their $INCLUDE files; a reload rereads those whose size, mtime or inode changed."),
            ("geo database", "The MaxMind-format database of [geo] database; serve reloads when its mtime changes."),
            ("token file", "[api] tokens: lines of NAME SCOPE SECRET for the HTTP API (and for ctl and lookup --server). Keep it mode 0600: check warns when every user can read it."),
            ("K<zone>.+<alg>+<tag>.key, .private", "DNSSEC key pairs (BIND format) a signed zone's dnssec keys name; dnssec keygen writes them, the .private file mode 0600."),
            ("query log", "[server] query_log = \"file:PATH\": the dnstap query log, reopened on reload (or unix:PATH, a collector's socket)."),
            ("fleet-state/", "[fleet] state_dir (default fleet-state beside the config): the config revisions fleet push stored (rev-N/, the last [fleet] keep_revisions of them), which a fleet node serves."),
            ("@meridian:ADDR:PORT", "Not a file: the abstract Unix socket serve holds per listen address so that a second instance refuses to start (ss -xlp shows it)."),
        ],
    },
    Section {
        title: "SIGNALS",
        text: "serve handles:",
        items: &[
            ("SIGHUP", "Reload the config, zones and geo database, as ctl reload does. A new config that does not load is logged and the running one kept."),
            ("SIGTERM, SIGINT", "Stop: the listeners close, queries already received are answered (TCP answers in flight get up to 2 s), the query log is flushed, and the process exits 0. --replace sends SIGTERM to the instance it takes over from."),
        ],
    },
    Section {
        title: "SEE ALSO",
        text: "meridian-probe(1), dig(1), knotc(8), gdnsd(8). The manual (an mdBook in docs/) covers the config keys, the HTTP API, reloads and DNSSEC.",
        items: &[],
    },
];

/// A runtime weight as `ctl weight` takes it, checked before it is sent.
fn parse_weight_arg(s: &str) -> Result<String, String> {
    meridian::engine::parse_weight(s).map(|_| s.trim().to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Man => {
            let mut page = Vec::new();
            match meridian_clidoc::man_page(Cli::command(), "8", MAN_SECTIONS, &mut page) {
                Ok(()) => print_out(&page),
                Err(e) => {
                    eprintln!("meridian: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Cmd::Completions { shell } => {
            let mut script = Vec::new();
            meridian_clidoc::completions(Cli::command(), shell, &mut script);
            print_out(&script)
        }
        Cmd::Check { config } => match Engine::load(&config) {
            Ok(e) => {
                for w in &e.api.warnings {
                    eprintln!("warning: {w}");
                }
                for w in &e.warnings {
                    eprintln!("{w}");
                }
                print_out(format!("{}\n", meridian::cli::check::summary(&e)).as_bytes())
            }
            Err(err) => {
                eprintln!("{err}");
                ExitCode::from(1)
            }
        },
        Cmd::Serve {
            config,
            listen,
            workers,
            http_listen,
            allow_root,
            replace,
        } => {
            let mut addrs: Vec<SocketAddr> = Vec::new();
            for l in &listen {
                match meridian::config::parse_listen(l) {
                    Some(a) => addrs.push(a),
                    None => {
                        eprintln!("meridian: bad --listen address {l:?}");
                        return ExitCode::from(2);
                    }
                }
            }
            match meridian::daemon::serve(&config, addrs, workers, http_listen, allow_root, replace)
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(1)
                }
            }
        }
        Cmd::Ctl {
            config,
            api,
            token_file,
            token,
            action,
        } => {
            use meridian::cli::ctl::{run, Action, Target};
            let action = match action {
                CtlCmd::Status { json } => Action::Status { json },
                CtlCmd::Override {
                    address,
                    state,
                    port,
                } => Action::Override {
                    address,
                    state,
                    port,
                },
                CtlCmd::Weight {
                    address,
                    weight,
                    port,
                } => Action::Weight {
                    address,
                    weight,
                    port,
                },
                CtlCmd::Members { pool, json } => Action::Members { pool, json },
                CtlCmd::Reload => Action::Reload,
                CtlCmd::Stop => Action::Stop,
            };
            let target = Target {
                config,
                api,
                token_file,
                token,
            };
            match run(&target, &action) {
                Ok(text) => print_out(format!("{text}\n").as_bytes()),
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(1)
                }
            }
        }
        Cmd::Dnssec { action } => dnssec(action),
        #[cfg(feature = "fleet")]
        Cmd::Fleet { action } => fleet(action),
        Cmd::Lookup {
            config,
            server,
            token_file,
            token,
            name,
            qtype,
            client,
        } => {
            let out = match (server, config) {
                (Some(api), config) => {
                    let target = meridian::cli::ctl::Target {
                        config,
                        api: Some(api),
                        token_file,
                        token,
                    };
                    let action = meridian::cli::ctl::Action::Lookup {
                        name,
                        qtype,
                        client,
                    };
                    meridian::cli::ctl::run(&target, &action).map(|t| t + "\n")
                }
                (None, Some(config)) => {
                    meridian::cli::lookup::lookup(&config, &name, &qtype, &client)
                }
                // clap requires --config without --server.
                (None, None) => Err("lookup: give --config, or --server".into()),
            };
            match out {
                Ok(text) => print_out(text.as_bytes()),
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

/// `meridian dnssec keygen` and `meridian dnssec ds`.
fn dnssec(action: DnssecCmd) -> ExitCode {
    use meridian::dnssec::keys::{DigestType, GenAlgorithm};
    let out = match action {
        DnssecCmd::Keygen {
            zone,
            algorithm,
            ksk,
            dir,
        } => {
            let alg = match algorithm.as_str() {
                "ed25519" => GenAlgorithm::Ed25519,
                _ => GenAlgorithm::EcdsaP256,
            };
            meridian::cli::dnssec::keygen(&zone, alg, ksk, &dir)
        }
        DnssecCmd::Ds {
            key,
            config,
            zone,
            digest,
        } => {
            let digest = match digest.as_str() {
                "sha384" => DigestType::Sha384,
                _ => DigestType::Sha256,
            };
            match (key, config, zone) {
                (Some(key), _, _) => meridian::cli::dnssec::ds(&key, digest),
                (None, Some(config), Some(zone)) => {
                    meridian::cli::dnssec::ds_config(&config, &zone, digest)
                }
                // clap requires --key, or --config with --zone.
                _ => Err("give --key, or --config and --zone".into()),
            }
        }
    };
    match out {
        Ok(text) => print_out(format!("{text}\n").as_bytes()),
        Err(e) => {
            eprintln!("meridian: {e}");
            ExitCode::from(1)
        }
    }
}

/// Write a command's output to stdout. A reader that went away (`meridian
/// check ... | head -1`) is not an error: exit 0 quietly, as `cat` would
/// have been stopped by SIGPIPE (Rust ignores SIGPIPE, so `println!` would
/// panic instead).
fn print_out(bytes: &[u8]) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("meridian: cannot write to standard output: {e}");
            ExitCode::from(1)
        }
    }
}

/// `meridian fleet push`: 0 when every registered node serves the
/// revision, 1 when nothing was stored, 3 when it was stored but a node
/// refused it or did not answer.
#[cfg(feature = "fleet")]
async fn fleet_push(
    config: &std::path::Path,
    no_wait: bool,
    timeout: std::time::Duration,
) -> ExitCode {
    let fail = |e: String| {
        eprintln!("meridian: fleet push: {e}");
        ExitCode::from(1)
    };
    let stored = match meridian::fleet::push(config).await {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let rev = stored.revision;
    let line = |t: &str| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{t}").and_then(|_| out.flush());
    };
    line(&format!("pushed {} as revision {rev}", config.display()));
    // The push stands even when pruning fails (say, a user who may not
    // compact a shared etcd).
    if let Err(e) = &stored.pruned {
        eprintln!("meridian: fleet push: older revisions not pruned: {e}");
    }
    if no_wait {
        return ExitCode::SUCCESS;
    }
    let settings = match meridian::fleet::settings_of(config) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    match meridian::fleet::await_nodes(&settings, rev, timeout, line).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(3),
        Err(e) => {
            eprintln!("meridian: fleet push: revision {rev} stored, but: {e}");
            ExitCode::from(3)
        }
    }
}

/// `meridian fleet status` and `push`.
#[cfg(feature = "fleet")]
fn fleet(action: FleetCmd) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("meridian: {e}");
            return ExitCode::from(1);
        }
    };
    let (what, r) = match action {
        FleetCmd::Status { config } => (
            "status",
            rt.block_on(async {
                let settings = meridian::fleet::settings_of(&config)?;
                meridian::fleet::status_table(&settings).await
            }),
        ),
        FleetCmd::Push {
            config,
            no_wait,
            timeout,
        } => return rt.block_on(fleet_push(&config, no_wait, timeout)),
    };
    match r {
        Ok(t) => print_out(t.as_bytes()),
        Err(e) => {
            eprintln!("meridian: fleet {what}: {e}");
            ExitCode::from(1)
        }
    }
}
