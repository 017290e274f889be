//! `meridian-sim`: runs meridian's own balancing decisions and answers
//! against a model of resolvers and backends, to show what each rule of
//! issue #16 (ejection cap, panic, latency awareness, slow start, sticky
//! answers, spillover, p2c, reported load) does to traffic.
//!
//! **Nothing is copied from the server.** Each variant builds a real
//! [`meridian::engine::Engine`] with `Engine::load` from a real config file
//! (written to a temporary folder); health results go into the engine's
//! `HealthTable` (`set_state`, with `last_change` on a synthetic wall
//! clock, so the ejection cap's "down longest" order is the simulated
//! one); the decisions are `Engine::rebalance_with` at a synthetic
//! balancing clock; every answer is `Engine::answer` on real query bytes
//! (hickory-proto, with ECS), parsed back for its address, TTL and scope.
//!
//! **The model** (small on purpose):
//! - Resolvers (`--resolvers`, default 2,000), each with its own client
//!   /24 sent as ECS, and a TTL cache keyed by (name, scope block) that
//!   honours the TTL and ECS scope of meridian's answers. A SERVFAIL is
//!   kept 5 s; a NODATA for its SOA's TTL. At the start every cache holds
//!   an answer expiring at a random point of its TTL.
//! - Clients behind each resolver send a steady rate (total load ÷
//!   resolvers, requests per second, as a fluid); every request goes to
//!   the first address of the resolver's cached answer (`mode = "one"`,
//!   `ttl = 30`).
//! - Backends have a capacity (requests/s) and an idle latency; latency is
//!   idle ÷ (1 − utilisation), and 5 s (the queue grows) at or above full
//!   utilisation. A backend fails the requests above its capacity; a
//!   failed deploy fails them all. "Bad" requests are those: sent to a
//!   failed member, beyond a member's capacity, or left without an address.
//! - Health checks follow the engine's own parsed check (TCP every 2 s,
//!   timeout 1 s, rise 2, fall 3), each member at its own phase: a check
//!   fails when the backend is failed, when its latency is over the
//!   timeout, or in the broken-checks scenario; rise and fall apply in
//!   simulated time.
//! - The `rtt` handed to `rebalance_with` is the server's own
//!   `health::PeakEwma` (10 s time constant, the default `latency_decay`)
//!   fed with the simulated checks' round-trip times on the synthetic
//!   clock; the latency factor itself is the engine's.
//! - Where a scenario has backends report load, each passing check feeds
//!   the backend's utilisation (requests ÷ capacity of the last second) to
//!   the server's own `health::DampedLoad` (default damping: smoothing
//!   0.5, at most 0.1 per check), handed to `rebalance_with` as `load`.
//! - The spillover scenario binds the name as a geo name whose `default`
//!   failover list is `["web", "backup"]` (no database: every client gets
//!   the default); the members of both pools are backends.
//! - Time steps of 1 s; a few simulated minutes per variant, seconds of
//!   real time for everything.

mod model;
mod out;
mod scenarios;
mod scenarios_errors;
mod scenarios_noise;
mod scenarios_registry;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use scenarios::Opts;

#[derive(Parser)]
#[command(
    name = "meridian-sim",
    version,
    about = "Run meridian's real balancing decisions against simulated resolvers and backends"
)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
    /// Where the CSVs and SVGs go.
    #[arg(long, global = true, default_value = "target/sim")]
    out: PathBuf,
    /// Resolvers in the population.
    #[arg(long, global = true, default_value_t = 2000)]
    resolvers: usize,
    /// Seed of every random choice (the engine's member picks included).
    #[arg(long, global = true, default_value_t = 16)]
    seed: u64,
}

#[derive(Subcommand, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// 3 of 10 members fail at 80 % load: no cap, max_ejected = 0.1, panic_below = 0.5.
    BadDeploy,
    /// Every check fails at once while the backends are fine: with and without panic_below.
    BrokenChecks,
    /// One member at half speed: latency_aware off and on.
    SlowMember,
    /// A member returns with cold caches: with and without slow_start.
    ReturningMember,
    /// Removing one member of ten under sticky answers, against hash mod n.
    StickyRemoval,
    /// 2 of 5 primary members fail: hard failover against spillover = 1.4.
    Spillover,
    /// One member at a third of the speed: plain one, latency_aware, pick = "p2c".
    P2c,
    /// One member with half the capacity: without and with reported load.
    ReportedLoad,
    /// Four identical members under check noise: the noise floor against the rule before #31.
    Noise,
    /// Registrations vanish at once (a broken agent): with and without the registry's rule.
    RegistryChurn,
    /// A member failing every other check: without and with the error penalty, and outliers.
    FlappingMember,
    /// A member failing requests fast: shallow check, deep check without and with the penalty.
    FailFast,
    /// Every scenario above.
    All,
}

fn main() {
    let cli = Cli::parse();
    let o = Opts {
        resolvers: cli.resolvers.max(1),
        seed: cli.seed,
    };
    let t0 = std::time::Instant::now();
    let want = |s: Scenario| cli.scenario == s || cli.scenario == Scenario::All;
    let mut reports = Vec::new();
    if want(Scenario::BadDeploy) {
        reports.push(scenarios::bad_deploy(o));
    }
    if want(Scenario::BrokenChecks) {
        reports.push(scenarios::broken_checks(o));
    }
    if want(Scenario::SlowMember) {
        reports.push(scenarios::slow_member(o));
    }
    if want(Scenario::ReturningMember) {
        reports.push(scenarios::returning_member(o));
    }
    if want(Scenario::Spillover) {
        reports.push(scenarios::spillover(o));
    }
    if want(Scenario::P2c) {
        reports.push(scenarios::p2c(o));
    }
    if want(Scenario::ReportedLoad) {
        reports.push(scenarios::reported_load(o));
    }
    if want(Scenario::Noise) {
        reports.push(scenarios_noise::noise(o));
    }
    if want(Scenario::RegistryChurn) {
        reports.push(scenarios_registry::registry_churn(o));
    }
    if want(Scenario::FlappingMember) {
        reports.push(scenarios_errors::flapping_member(o));
    }
    if want(Scenario::FailFast) {
        reports.push(scenarios_errors::fail_fast(o));
    }
    for r in &reports {
        if let Err(e) = out::write(r, &cli.out) {
            eprintln!("meridian-sim: writing to {}: {e}", cli.out.display());
            std::process::exit(1);
        }
    }
    if want(Scenario::StickyRemoval) {
        if let Some(r) = scenarios::sticky_removal(o) {
            if let Err(e) = out::write(&r, &cli.out) {
                eprintln!("meridian-sim: writing to {}: {e}", cli.out.display());
                std::process::exit(1);
            }
        }
    }
    eprintln!(
        "\nmeridian-sim: wrote {} in {:.1} s",
        cli.out.display(),
        t0.elapsed().as_secs_f64()
    );
}
