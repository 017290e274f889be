//! Command line of meridian-probe: parses arguments, runs the chosen check, prints the report and
//! sets the exit status (0 the probe ran, 1 no server gave a usable answer, 2 usage error).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use hickory_proto::rr::{Name, RecordType};
use ipnet::IpNet;

use meridian_probe::lookup::Target;
use meridian_probe::query::QueryOptions;
use meridian_probe::report::{EcsReport, Mode, RotationReport};
use meridian_probe::servers::{Discovery, ServerSpec};
use meridian_probe::{ecs, rotation};

const ABOUT: &str = "Probe a DNS name for ECS tailoring (ecs) and answer rotation (rotation).";

const LONG_ABOUT: &str = "\
Probe a DNS name for ECS tailoring (ecs) and answer rotation (rotation).

Without --server the probe finds the zone's NS set through the system resolver, resolves the name
servers' addresses and asks an authoritative server directly (RD=0), skipping lame servers (REFUSED
or no AA flag). A CNAME that leaves the zone is followed to the target zone's own servers, and the
chain is reported. With --server HOST[:PORT] that one server is asked (RD=1, so resolvers work too).

Queries use random 16-bit IDs and a fresh random source port per try; replies must carry the same
ID and question. Each question gets --tries UDP tries of --timeout ms; a truncated reply (TC) is
asked again over TCP.

Exit status: 0 the probe ran (whatever the verdict), 1 no server gave a usable answer (every query
timed out, was unreachable, REFUSED, SERVFAIL or lame), 2 usage error.";

const ECS_LONG_ABOUT: &str = "\
Ask NAME once per client subnet with an EDNS Client Subnet option (RFC 7871) and compare.

Default subnets: real, publicly routed networks in four countries on four continents, so that a
geo server has four different places to map them to, then two that fall to its default answer: a
network in a country geo rules rarely name, and a documentation block that no geolocation database
holds (country \"none\").
  A:    8.8.8.0/24 (US), 85.214.0.0/24 (DE), 133.242.0.0/24 (JP), 200.160.0.0/24 (BR),
        41.0.0.0/24 (ZA), 192.0.2.0/24 (none)
  AAAA: 2001:4860::/48 (US), 2a00:1450:4001::/48 (DE), 2001:200::/48 (JP), 2804:14c::/48 (BR),
        2c0f:f000::/48 (ZA), 2001:db8::/48 (none)
/24 is what resolvers send for IPv4 by default; /48 is a typical IPv6 site allocation (resolvers
default to /56, which lies inside it). Only these subnets are sent, never this machine's address.
--subnet replaces the defaults (their country shows as \"custom\").

For each subnet the report shows the rcode, the answers (sorted), the TTL and the scope the server
returned (or \"no ECS in response\"), then a verdict:
  tailored      different answers for different subnets, with non-zero scopes
  uniform       the same answers for every subnet with scope /0
  no-ecs        no ECS echoed (the server ignores or strips it), same answers
  broken-scope  scope /0 on an answer that differs from another subnet's answer: the answer
                depends on the client but claims to be good for every client (RFC 7871 §7.3.1),
                so a resolver caches it once and serves it to every region. Typical of a
                default answer scoped /0. When a /0 answer differs, every subnet is asked
                once more: answers that change then are rotation, not a wrong scope (mixed)
  mixed         anything in between, explained (same answers but non-zero scope, different
                answers without ECS as with rotation, some subnets failed)
  failed        no subnet got an answer (exit status 1); when the zone's servers are found
                through a resolver and it fails, the error names the resolver and what the
                operating system said when asked directly";

const ROTATION_LONG_ABOUT: &str = "\
Ask NAME --count times in a row (no ECS) and report the distinct addresses, the answer-set sizes and
how often the first address changed. Verdict:
  client-chooses  the whole set every time, reordered: the client picks
  server-chooses  one or a few addresses per answer, changing: the server picks
  static          the same answer every time
  failed          no query got an answer (exit status 1)";

/// `meridian-probe --version`: the package version and the git commit it was built from
/// (build.rs: short hash, `+dirty`, or `unknown` outside a checkout).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("MERIDIAN_GIT_COMMIT"),
    ")"
);

#[derive(Parser, Debug)]
#[command(name = "meridian-probe", version = VERSION, about = ABOUT, long_about = LONG_ABOUT)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compare the answers for six client subnets (US, DE, JP, BR, ZA, none) sent as ECS.
    #[command(long_about = ECS_LONG_ABOUT)]
    Ecs(EcsArgs),
    /// Send the same query N times and see who picks the address.
    #[command(long_about = ROTATION_LONG_ABOUT)]
    Rotation(RotationArgs),
    /// Print the man page (roff, section 1) on standard output.
    Man,
    /// Print a shell completion script on standard output.
    Completions {
        /// The shell: bash, elvish, fish, powershell or zsh.
        shell: meridian_clidoc::Shell,
    },
}

#[derive(Args, Debug)]
struct EcsArgs {
    /// The name to probe.
    #[arg(value_parser = parse_name)]
    name: Name,
    /// Client subnet to send (repeatable); replaces the default six.
    #[arg(long = "subnet", value_name = "CIDR", value_parser = parse_subnet)]
    subnets: Vec<IpNet>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
struct RotationArgs {
    /// The name to probe.
    #[arg(value_parser = parse_name)]
    name: Name,
    /// Number of queries.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10000))]
    count: u32,
    /// Pause between queries, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    interval: u64,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
struct Common {
    /// Record type to ask for.
    #[arg(long = "type", value_enum, ignore_case = true, default_value = "A")]
    qtype: QType,
    /// Ask this server (resolver or authoritative) instead of the zone's authoritative servers.
    /// HOST is an IP address (IPv6 in brackets when a port follows) or a host name; port 53 by default.
    #[arg(long, value_name = "HOST[:PORT]")]
    server: Option<ServerSpec>,
    /// Time to wait for each reply, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=60000))]
    timeout: u64,
    /// UDP tries per question and server.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10))]
    tries: u32,
    /// Print one JSON document instead of text.
    #[arg(long)]
    json: bool,
    /// Recursive resolver used to find the authoritative servers (default: the system's, from
    /// /etc/resolv.conf). Ignored with --server.
    #[arg(long, value_name = "HOST[:PORT]")]
    resolver: Option<ServerSpec>,
    /// Port to ask the discovered authoritative servers on (for tests against local servers).
    #[arg(long, hide = true, default_value_t = 53)]
    ns_port: u16,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum QType {
    #[value(name = "A")]
    A,
    #[value(name = "AAAA")]
    Aaaa,
}

impl QType {
    fn record_type(self) -> RecordType {
        match self {
            QType::A => RecordType::A,
            QType::Aaaa => RecordType::AAAA,
        }
    }
}

fn parse_name(s: &str) -> Result<Name, String> {
    if s.is_empty() {
        return Err("empty name".into());
    }
    let mut name = Name::from_utf8(s).map_err(|e| format!("{s:?} is not a valid name: {e}"))?;
    name.set_fqdn(true);
    if name.is_root() {
        return Err("the root name cannot be probed".into());
    }
    Ok(name)
}

fn parse_subnet(s: &str) -> Result<IpNet, String> {
    let net: IpNet = s
        .parse()
        .map_err(|_| format!("{s:?} is not a CIDR subnet such as 192.0.2.0/24 or 2001:db8::/48"))?;
    Ok(net.trunc())
}

/// The man page's sections clap cannot know.
const MAN_SECTIONS: &[meridian_clidoc::Section<'static>] = &[
    meridian_clidoc::Section {
        title: "EXIT STATUS",
        text: "",
        items: &[
            ("0", "The probe ran, whatever the verdict."),
            ("1", "No server gave a usable answer: every query timed out, was unreachable, REFUSED, SERVFAIL or lame."),
            ("2", "Usage error."),
        ],
    },
    meridian_clidoc::Section {
        title: "FILES",
        text: "",
        items: &[(
            "/etc/resolv.conf",
            "Without --server or --resolver: the system resolver that finds the zone's name servers.",
        )],
    },
    meridian_clidoc::Section {
        title: "SEE ALSO",
        text: "meridian(8), dig(1).",
        items: &[],
    },
];

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ecs(args) => run_ecs(args),
        Command::Rotation(args) => run_rotation(args),
        Command::Man => {
            meridian_clidoc::man_page(Cli::command(), "1", MAN_SECTIONS, &mut std::io::stdout())
                .map(|()| ExitCode::SUCCESS)
                .map_err(|e| e.to_string())
        }
        Command::Completions { shell } => {
            meridian_clidoc::completions(Cli::command(), shell, &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("meridian-probe: {msg}");
            ExitCode::from(1)
        }
    }
}

fn target(common: &Common) -> Result<(Target, Mode), String> {
    let timeout = Duration::from_millis(common.timeout);
    match &common.server {
        Some(spec) => Ok((
            Target::Fixed {
                addrs: spec.resolve()?,
            },
            Mode::Server,
        )),
        None => {
            let resolver: Option<Vec<SocketAddr>> =
                common.resolver.as_ref().map(|r| r.resolve()).transpose()?;
            let discovery = Discovery::new(resolver.as_deref(), common.ns_port, timeout)?;
            Ok((
                Target::Authoritative {
                    discovery: Box::new(discovery),
                    preferred: Default::default(),
                },
                Mode::Authoritative,
            ))
        }
    }
}

fn options(common: &Common) -> QueryOptions {
    QueryOptions {
        timeout: Duration::from_millis(common.timeout),
        tries: common.tries,
    }
}

fn emit<T: serde::Serialize>(json: bool, doc: &T, text: impl FnOnce() -> String) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(doc).expect("report serializes")
        );
    } else {
        print!("{}", text());
    }
}

fn run_ecs(args: EcsArgs) -> Result<ExitCode, String> {
    let qtype = args.common.qtype.record_type();
    let (mut target, mode) = target(&args.common)?;
    let subnets = ecs::subnets(&args.subnets, qtype);
    let results = ecs::run(
        &mut target,
        &args.name,
        qtype,
        &subnets,
        &options(&args.common),
    );
    let report = EcsReport::new(args.name.to_string(), qtype.to_string(), mode, results);
    emit(args.common.json, &report, || report.to_text());
    if report.answered() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "meridian-probe: no server answered: {}",
            report.verdict_text
        );
        Ok(ExitCode::from(1))
    }
}

fn run_rotation(args: RotationArgs) -> Result<ExitCode, String> {
    let qtype = args.common.qtype.record_type();
    let (mut target, mode) = target(&args.common)?;
    let outcomes = rotation::run(
        &mut target,
        &args.name,
        qtype,
        args.count,
        Duration::from_millis(args.interval),
        &options(&args.common),
    );
    let report = RotationReport::new(
        args.name.to_string(),
        qtype.to_string(),
        mode,
        args.count,
        args.interval,
        &outcomes,
    );
    emit(args.common.json, &report, || report.to_text());
    if report.answered() {
        Ok(ExitCode::SUCCESS)
    } else {
        let why = outcomes
            .iter()
            .rev()
            .find_map(|o| o.error.clone())
            .unwrap_or_else(|| report.summary.verdict_text.clone());
        eprintln!("meridian-probe: no server answered: {why}");
        Ok(ExitCode::from(1))
    }
}
