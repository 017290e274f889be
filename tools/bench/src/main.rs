//! `meridian-loadgen`: batched UDP DNS load generator for meridian (loopback only),
//! and `meridian-loadgen gen` to write the standard query files.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use meridian_bench::{gen, load, query};

#[derive(Parser)]
#[command(
    name = "meridian-loadgen",
    version,
    about = "Batched (sendmmsg/recvmmsg) UDP DNS load generator, loopback servers only",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Args)]
struct RunArgs {
    /// Server address (127.0.0.1:PORT or `[::1]:PORT`).
    #[arg(long, required = true)]
    server: Option<SocketAddr>,
    /// Query file: lines `NAME TYPE [ECS-SUBNET]`.
    #[arg(long, required = true)]
    queries: Option<PathBuf>,
    /// Length of the run in seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Maximum outstanding queries.
    #[arg(long, default_value_t = 200)]
    inflight: usize,
    /// Queries per sendmmsg / replies per recvmmsg (max 256).
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Fixed offered load in queries per second (default: as fast as the window allows).
    #[arg(long)]
    rate: Option<f64>,
    /// UDP sockets (source ports) to spread the queries over.
    #[arg(long, default_value_t = 1)]
    sockets: usize,
    /// Seconds without a reply after which a query is lost.
    #[arg(long, default_value_t = 1.0)]
    timeout: f64,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Set the DO bit (DNSSEC OK, RFC 3225) in every query's OPT record, to
    /// ask for signed answers (RRSIGs, NSEC/NSEC3).
    #[arg(long)]
    dnssec_ok: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write static.txt, pool.txt, geo-noecs.txt and geo-ecs.txt (reproducible for a seed).
    Gen {
        /// Output directory.
        #[arg(long, default_value = ".")]
        out: PathBuf,
        /// Zone the names live in.
        #[arg(long, default_value = "example.test")]
        zone: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Distinct client subnets in geo-ecs.txt.
        #[arg(long, default_value_t = 10_000)]
        subnets: usize,
        /// Share of IPv6 /56 subnets in geo-ecs.txt, percent.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100))]
        v6_percent: u32,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Some(Cmd::Gen {
            out,
            zone,
            seed,
            subnets,
            v6_percent,
        }) => gen::write(&out, &zone, seed, subnets, v6_percent)
            .map(|paths| {
                for p in paths {
                    eprintln!("wrote {p}");
                }
            })
            .map_err(|e| format!("{}: {e}", out.display())),
        None => run(cli.run),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("meridian-loadgen: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(a: RunArgs) -> Result<(), String> {
    let (server, path) = (a.server.expect("required"), a.queries.expect("required"));
    if !(a.duration > 0.0 && a.timeout > 0.0) {
        return Err("--duration and --timeout must be positive".into());
    }
    if a.rate.is_some_and(|r| r <= 0.0 || !r.is_finite()) {
        return Err("--rate must be positive".into());
    }
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let qs = query::parse_file(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let wires: Vec<Vec<u8>> = qs.iter().map(|q| q.to_wire_do(a.dnssec_ok)).collect();
    let wire = load::Wire::new(wires.iter().map(Vec::as_slice));
    let cfg = load::Config {
        server,
        duration: Duration::from_secs_f64(a.duration),
        inflight: a.inflight,
        batch: a.batch,
        rate: a.rate,
        sockets: a.sockets,
        timeout: Duration::from_secs_f64(a.timeout),
    };
    let r = load::run(&cfg, &wire).map_err(|e| format!("{server}: {e}"))?;
    if a.json {
        println!("{}", serde_json::to_string(&r).expect("report serializes"));
    } else {
        print_text(&r, &path);
    }
    Ok(())
}

fn print_text(r: &load::Report, path: &std::path::Path) {
    let pct = |n: u64| {
        if r.sent > 0 {
            100.0 * n as f64 / r.sent as f64
        } else {
            0.0
        }
    };
    let rate = r.rate.map_or("max".to_string(), |q| format!("{q}/s"));
    println!(
        "meridian-loadgen: {} <- {} ({} queries), {:.1} s, inflight {}, batch {}, sockets {}, rate {}",
        r.server,
        path.display(),
        r.queries,
        r.run_s,
        r.inflight,
        r.batch,
        r.sockets,
        rate
    );
    println!("  sent        {}", r.sent);
    println!("  received    {} ({:.2} %)", r.received, pct(r.received));
    println!("  lost        {} ({:.2} %)", r.lost, pct(r.lost));
    if r.unmatched + r.errors > 0 {
        println!("  unmatched   {}   errors {}", r.unmatched, r.errors);
    }
    println!("  qps         {:.0}", r.qps);
    println!(
        "  reply size  {:.0} octets avg, {} truncated (TC)",
        r.reply_bytes_avg, r.truncated
    );
    println!(
        "  latency ms  avg {:.3}  p50 {:.3}  p99 {:.3}  max {:.3}",
        r.lat_avg_ms, r.lat_p50_ms, r.lat_p99_ms, r.lat_max_ms
    );
    println!(
        "  in flight   {:.1} avg (of {})   client CPU {:.0} %",
        r.inflight_avg, r.inflight, r.client_cpu_pct
    );
    let rc: Vec<String> = r.rcodes.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!("  rcodes      {}", rc.join(", "));
}
