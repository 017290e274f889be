//! `GET /metrics`: every metric family in the Prometheus text format 0.0.4,
//! written and escaped by `prometheus-client`. The server keeps its counts
//! in atomics (`metrics::Metrics`, the health table's `EntryStats`); a
//! [`Collector`] reads them at scrape time, so the query path is untouched.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::engine::Engine;
use crate::health::{override_name, state_name, CheckSpec, OVR_NONE};
use crate::metrics::QTYPES;
use crate::pool::Member;
use crate::transport::ServerState;

/// The `Content-Type` of the exposition.
pub(crate) const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The metrics registry of one HTTP API: built once, encoded per scrape.
pub(crate) struct Exposition {
    registry: Registry,
}

impl Exposition {
    /// A registry whose one collector reads `server`'s counters and the
    /// serving engine's health table.
    pub(crate) fn new(server: Arc<ServerState>) -> Exposition {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Counters { server }));
        Exposition { registry }
    }

    /// The whole `/metrics` page.
    pub(crate) fn render(&self) -> String {
        let mut s = String::new();
        // Writing to a String cannot fail, nor can the collector.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut s, &self.registry);
        s
    }
}

/// Reads the atomics at scrape time.
struct Counters {
    server: Arc<ServerState>,
}

impl fmt::Debug for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Counters")
    }
}

fn load(v: &AtomicU64) -> u64 {
    v.load(Ordering::Relaxed)
}

/// A family's descriptor. Counter names are given without `_total`: the
/// encoder appends it (to the HELP and TYPE lines too).
fn family<'s>(
    enc: &'s mut DescriptorEncoder<'_>,
    name: &'s str,
    help: &str,
    kind: MetricType,
) -> Result<MetricEncoder<'s>, fmt::Error> {
    enc.encode_descriptor(name, help, None, kind)
}

fn counter(m: &mut MetricEncoder<'_>, labels: &impl EncodeLabelSet, v: u64) -> fmt::Result {
    m.encode_family(labels)?
        .encode_counter::<NoLabelSet, _, u64>(&v, None)
}

fn gauge(m: &mut MetricEncoder<'_>, labels: &impl EncodeLabelSet, v: bool) -> fmt::Result {
    m.encode_family(labels)?.encode_gauge(&i64::from(v))
}

/// An unlabelled counter family.
fn single(enc: &mut DescriptorEncoder<'_>, name: &str, help: &str, v: u64) -> fmt::Result {
    family(enc, name, help, MetricType::Counter)?.encode_counter::<NoLabelSet, _, u64>(&v, None)
}

impl Collector for Counters {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let m = &self.server.metrics;
        let e = self.server.engine.load();
        single(
            &mut enc,
            "meridian_queries",
            "DNS queries received.",
            load(&m.queries),
        )?;
        single(
            &mut enc,
            "meridian_dropped",
            "DNS queries left without a response.",
            load(&m.dropped),
        )?;
        single(
            &mut enc,
            "meridian_truncated",
            "Responses sent truncated (TC set).",
            load(&m.truncated),
        )?;
        single(
            &mut enc,
            "meridian_ecs_queries",
            "Queries with an EDNS Client Subnet option.",
            load(&m.ecs),
        )?;

        let mut f = family(
            &mut enc,
            "meridian_responses",
            "Responses by rcode.",
            MetricType::Counter,
        )?;
        for (i, v) in m.rcode.iter().enumerate() {
            let v = load(v);
            if v > 0 {
                let name = meridian_wire::rcode_name(i as u16)
                    .map_or_else(|| i.to_string(), str::to_string);
                counter(&mut f, &[("rcode", name.as_str())], v)?;
            }
        }

        let mut f = family(
            &mut enc,
            "meridian_queries_by_type",
            "Answered queries by query type.",
            MetricType::Counter,
        )?;
        for (i, v) in m.qtype.iter().enumerate() {
            let v = load(v);
            if v > 0 {
                let name = QTYPES.get(i).map(|x| x.1).unwrap_or("other");
                counter(&mut f, &[("qtype", name)], v)?;
            }
        }

        let mut f = family(
            &mut enc,
            "meridian_ecs_scope",
            "ECS responses by returned scope prefix length.",
            MetricType::Counter,
        )?;
        for (i, v) in m.scope.iter().enumerate() {
            let v = load(v);
            if v > 0 {
                counter(&mut f, &[("scope", i.to_string())], v)?;
            }
        }

        let mut f = family(
            &mut enc,
            "meridian_pool_answers",
            "Dynamic answers by pool.",
            MetricType::Counter,
        )?;
        for (i, p) in e.pools.iter().enumerate() {
            counter(&mut f, &[("pool", p.name.as_str())], e.pool_answers.get(i))?;
        }

        let mut f = family(
            &mut enc,
            "meridian_reloads",
            "Config reloads by result.",
            MetricType::Counter,
        )?;
        counter(&mut f, &[("result", "ok")], load(&m.reloads_ok))?;
        counter(&mut f, &[("result", "failed")], load(&m.reloads_failed))?;

        single(
            &mut enc,
            "meridian_zone_loads",
            "Zone files read at start and by reloads (a reload keeps unchanged zones).",
            load(&m.zone_loads),
        )?;
        single(
            &mut enc,
            "meridian_geo_table_builds",
            "Geo decision tables compiled at start and by reloads.",
            load(&m.geo_table_builds),
        )?;
        single(
            &mut enc,
            "meridian_tcp_rejected",
            "TCP connections closed at once because every slot was taken.",
            load(&m.tcp_rejected),
        )?;
        single(
            &mut enc,
            "meridian_tcp_evicted",
            "Idle TCP connections closed to make room for a new one at the cap.",
            load(&m.tcp_evicted),
        )?;
        single(
            &mut enc,
            "meridian_tcp_timeouts",
            "TCP connections closed by the idle or read timeout.",
            load(&m.tcp_timeouts),
        )?;

        let mut f = family(
            &mut enc,
            "meridian_rrl_responses",
            "UDP responses over the rate limit: dropped, or sent truncated (slipped).",
            MetricType::Counter,
        )?;
        counter(&mut f, &[("action", "dropped")], load(&m.rrl_dropped))?;
        counter(&mut f, &[("action", "slipped")], load(&m.rrl_slipped))?;

        let mut f = family(
            &mut enc,
            "meridian_udp_dropped",
            "UDP datagrams dropped unanswered before parsing, by reason.",
            MetricType::Counter,
        )?;
        counter(
            &mut f,
            &[("reason", "truncated")],
            load(&m.udp_dropped_truncated),
        )?;
        counter(
            &mut f,
            &[("reason", "source_port_0")],
            load(&m.udp_dropped_port_0),
        )?;
        single(
            &mut enc,
            "meridian_query_log_frames",
            "Query log: dnstap frames written.",
            load(&m.query_log_frames),
        )?;
        single(
            &mut enc,
            "meridian_query_log_dropped",
            "Query log: sampled queries dropped (ring full, exchange too large, or the sink down).",
            load(&m.query_log_dropped),
        )?;

        health(&mut enc, &e)?;
        dnssec(&mut enc, &e)?;
        if e.fleet.is_some() {
            family(
                &mut enc,
                "meridian_fleet_config_revision",
                "Fleet mode: the etcd revision of the pushed config this node serves (0: its local config).",
                MetricType::Gauge,
            )?
            .encode_gauge(&self.server.fleet_revision.load(std::sync::atomic::Ordering::Relaxed))?;
            family(
                &mut enc,
                "meridian_fleet_local_probes",
                "Fleet mode: 1 while this node, cut off from etcd past fleet_grace, probes every member itself.",
                MetricType::Gauge,
            )?
            .encode_gauge(&i64::from(
                self.server
                    .fleet_local_probes
                    .load(std::sync::atomic::Ordering::Relaxed),
            ))?;
        }
        Ok(())
    }
}

/// Every pool member with its pool, in config order (IPv4 before IPv6).
fn members(e: &Engine) -> impl Iterator<Item = (&str, &Member)> {
    e.pools.iter().flat_map(|p| {
        p.v4.iter()
            .chain(p.v6.iter())
            .map(move |m| (p.name.as_str(), m))
    })
}

/// Every (pool, family) that has members.
fn families(e: &Engine) -> impl Iterator<Item = (&crate::pool::Pool, bool)> {
    e.pools
        .iter()
        .flat_map(|p| [false, true].map(|v6| (p, v6)))
        .filter(|(p, v6)| !p.family(*v6).is_empty())
}

/// Every member with its last balancing report, pool by pool.
fn reports(
    e: &Engine,
) -> impl Iterator<Item = (&crate::pool::Pool, &Member, crate::pool::MemberReport)> {
    families(e).flat_map(|(p, v6)| {
        p.family(v6)
            .iter()
            .zip(p.report[v6 as usize].snapshot())
            .map(move |(m, r)| (p, m, r))
    })
}

fn family_name(v6: bool) -> &'static str {
    if v6 {
        "ipv6"
    } else {
        "ipv4"
    }
}

/// The labels of one health entry: (address, port, check).
fn entry_labels(spec: &CheckSpec) -> [(&'static str, String); 3] {
    [
        ("address", spec.addr.to_string()),
        (
            "port",
            spec.effective_port()
                .map(|p| p.to_string())
                .unwrap_or_default(),
        ),
        ("check", spec.check_name().to_string()),
    ]
}

/// The health families: members, pools and the checks' counters; with
/// `[api] metrics_members = false`, the pools' only.
fn health(enc: &mut DescriptorEncoder<'_>, e: &Engine) -> fmt::Result {
    if e.api.metrics_members {
        member_families(enc, e)?;
    }
    pool_families(enc, e)?;
    if e.api.metrics_members {
        check_families(enc, e)?;
    }
    Ok(())
}

/// The series of each pool member: ten, and one more for each of an
/// override, a latency estimate and a reported load in force.
fn member_families(enc: &mut DescriptorEncoder<'_>, e: &Engine) -> fmt::Result {
    let t = &e.health;
    let mut f = family(
        enc,
        "meridian_member_up",
        "Whether a pool member is used in answers (override, check, ejection cap, panic), 1 or 0.",
        MetricType::Gauge,
    )?;
    for (pool, m) in members(e) {
        let labels = [("pool", pool.to_string()), ("address", m.addr.to_string())];
        gauge(&mut f, &labels, m.usable())?;
    }

    let mut f = family(
        enc,
        "meridian_member_standing",
        "Why a member is in or out of the answers (usable, ejected, kept: ejection cap, kept: panic, down (override), drained, ejected: outlier, unproven (registry), ejected: registration gone), one series set to 1.",
        MetricType::Gauge,
    )?;
    for (p, m, r) in reports(e) {
        let labels = [
            ("pool", p.name.clone()),
            ("address", m.addr.to_string()),
            ("standing", r.standing.name().to_string()),
        ];
        gauge(&mut f, &labels, true)?;
    }

    let mut f = family(
        enc,
        "meridian_member_weight_factor",
        "One factor of a member's effective weight (slow_start, latency, load, runtime, errors); 1 when its rule is off.",
        MetricType::Gauge,
    )?;
    for (p, m, r) in reports(e) {
        for (name, v) in [
            ("slow_start", r.slow_start),
            ("latency", r.latency),
            ("load", r.load),
            ("runtime", r.runtime),
            ("errors", r.errors),
        ] {
            let labels = [
                ("pool", p.name.clone()),
                ("address", m.addr.to_string()),
                ("factor", name.to_string()),
            ];
            f.encode_family(&labels)?.encode_gauge(&v)?;
        }
    }

    let mut f = family(
        enc,
        "meridian_member_health_state",
        "A member's check state (unknown, up or down), one series set to 1.",
        MetricType::Gauge,
    )?;
    for (pool, m) in members(e) {
        let st = state_name(t.state(m.health));
        for name in ["unknown", "up", "down"] {
            let labels = [
                ("pool", pool.to_string()),
                ("address", m.addr.to_string()),
                ("state", name.to_string()),
            ];
            gauge(&mut f, &labels, st == name)?;
        }
    }

    let mut f = family(
        enc,
        "meridian_member_override",
        "An operator override in force on a member (up, down or drain).",
        MetricType::Gauge,
    )?;
    for (pool, m) in members(e) {
        let o = t.override_of(m.health);
        if o != OVR_NONE {
            let labels = [
                ("pool", pool.to_string()),
                ("address", m.addr.to_string()),
                ("state", override_name(o).to_string()),
            ];
            gauge(&mut f, &labels, true)?;
        }
    }

    let mut f = family(
        enc,
        "meridian_member_weight",
        "A member's effective weight in its pool: configured weight times every factor (meridian_member_weight_factor).",
        MetricType::Gauge,
    )?;
    for (pool, m) in members(e) {
        let labels = [("pool", pool.to_string()), ("address", m.addr.to_string())];
        let w = m.effective() as f64 / crate::pool::WEIGHT_UNIT as f64;
        f.encode_family(&labels)?.encode_gauge(&w)?;
    }

    // The measured signals, for members whose check has produced one.
    let mut f = family(
        enc,
        "meridian_member_rtt_estimate_seconds",
        "Peak-EWMA of a member's passing health probe durations (latency_decay is its time constant).",
        MetricType::Gauge,
    )?;
    for (pool, m) in members(e) {
        if let Some(us) = t.rtt_estimate_us(m.health) {
            let labels = [("pool", pool.to_string()), ("address", m.addr.to_string())];
            f.encode_family(&labels)?.encode_gauge(&(us as f64 / 1e6))?;
        }
    }

    let mut f = family(
        enc,
        "meridian_member_load",
        "The load a member reports through its HTTP check, damped, from 0 to 1.",
        MetricType::Gauge,
    )?;
    for (pool, m) in members(e) {
        if let Some(l) = t.load(m.health) {
            let labels = [("pool", pool.to_string()), ("address", m.addr.to_string())];
            let v: f64 = l.to_string().parse().unwrap_or(l as f64);
            f.encode_family(&labels)?.encode_gauge(&v)?;
        }
    }
    Ok(())
}

/// One series set per pool and address family.
fn pool_families(enc: &mut DescriptorEncoder<'_>, e: &Engine) -> fmt::Result {
    let mut f = family(
        enc,
        "meridian_pool_up",
        "Whether a pool (per address family) has at least min_up members up.",
        MetricType::Gauge,
    )?;
    for (p, v6) in families(e) {
        let labels = [("pool", p.name.as_str()), ("family", family_name(v6))];
        gauge(&mut f, &labels, p.gate(v6).up)?;
    }

    let mut f = family(
        enc,
        "meridian_pool_panic",
        "Whether a pool (per address family) is in panic: too few members pass their checks (panic_below), so all answer.",
        MetricType::Gauge,
    )?;
    for (p, v6) in families(e) {
        let labels = [("pool", p.name.as_str()), ("family", family_name(v6))];
        gauge(&mut f, &labels, p.gate(v6).panic)?;
    }

    let mut f = family(
        enc,
        "meridian_pool_members_up",
        "Members of a pool (per address family) used in answers.",
        MetricType::Gauge,
    )?;
    for (p, v6) in families(e) {
        let labels = [("pool", p.name.as_str()), ("family", family_name(v6))];
        let n = p.family(v6).iter().filter(|m| m.usable()).count();
        f.encode_family(&labels)?.encode_gauge(&(n as i64))?;
    }
    Ok(())
}

/// One series set per checked entry (address, port, check).
fn check_families(enc: &mut DescriptorEncoder<'_>, e: &Engine) -> fmt::Result {
    let t = &e.health;
    // Entries that have a check, one series set per (address, port, check).
    let checked: Vec<(u32, &CheckSpec)> = e
        .checks
        .iter()
        .enumerate()
        .filter(|(_, sp)| sp.check.is_some())
        .map(|(i, sp)| (i as u32, sp))
        .collect();

    let mut f = family(
        enc,
        "meridian_health_checks",
        "Health probes run, per (address, port, check).",
        MetricType::Counter,
    )?;
    for (i, sp) in &checked {
        counter(&mut f, &entry_labels(sp), load(&t.stats(*i).checks))?;
    }

    let mut f = family(
        enc,
        "meridian_health_check_failures",
        "Health probes that failed.",
        MetricType::Counter,
    )?;
    for (i, sp) in &checked {
        counter(&mut f, &entry_labels(sp), load(&t.stats(*i).failures))?;
    }

    let mut f = family(
        enc,
        "meridian_health_transitions",
        "Health state changes, by the state entered.",
        MetricType::Counter,
    )?;
    for (i, sp) in &checked {
        let st = t.stats(*i);
        for (to, v) in [("up", &st.to_up), ("down", &st.to_down)] {
            let labels = (entry_labels(sp), [("to", to)]);
            counter(&mut f, &labels, load(v))?;
        }
    }

    let mut f = family(
        enc,
        "meridian_health_check_duration_seconds",
        "Health probe latency (failures included).",
        MetricType::Histogram,
    )?;
    for (i, sp) in &checked {
        let h = &t.stats(*i).latency;
        let buckets = h.buckets();
        // The +Inf bucket and the count agree even while probes record.
        let count = buckets.iter().map(|b| b.1).sum();
        f.encode_family(&entry_labels(sp))?
            .encode_histogram::<NoLabelSet>(h.sum_seconds(), count, &buckets, None)?;
    }
    Ok(())
}

/// Signed zones (#17): what is signed, when the first signature expires,
/// how long signing took, and the NSECs signed on the query path.
fn dnssec(enc: &mut DescriptorEncoder<'_>, e: &Engine) -> fmt::Result {
    let signed: Vec<(&str, &crate::engine::signed::ZoneSigner)> = e
        .zones
        .iter()
        .enumerate()
        .filter_map(|(i, z)| e.signer(i).map(|s| (z.origin_text.as_str(), s)))
        .collect();
    if signed.is_empty() {
        return Ok(());
    }
    let tables: Vec<_> = signed
        .iter()
        .map(|(z, s)| (*z, s.statics.load_full(), s.dynamic.load_full()))
        .collect();
    let mut f = family(
        enc,
        "meridian_dnssec_signed_rrsets",
        "RRsets signed ahead of queries: static records, and pool or geo member sets.",
        MetricType::Gauge,
    )?;
    for (z, st, dy) in &tables {
        for (kind, n) in [("static", st.count), ("pool", dy.count())] {
            f.encode_family(&[("zone", *z), ("kind", kind)])?
                .encode_gauge(&(n as i64))?;
        }
    }
    let mut f = family(
        enc,
        "meridian_dnssec_expiry_timestamp_seconds",
        "When the zone's first signature expires (Unix time); meridian signs again `refresh` before.",
        MetricType::Gauge,
    )?;
    for (z, st, dy) in &tables {
        let t = st.earliest.min(dy.earliest);
        if t != u64::MAX {
            f.encode_family(&[("zone", *z)])?
                .encode_gauge(&(t as i64))?;
        }
    }
    let mut f = family(
        enc,
        "meridian_dnssec_signing_seconds",
        "How long the last signing of the zone's static RRsets, or refresh of its pool sets, took.",
        MetricType::Gauge,
    )?;
    for (z, st, dy) in &tables {
        for (kind, ms) in [("static", st.ms), ("pool", dy.ms)] {
            f.encode_family(&[("zone", *z), ("kind", kind)])?
                .encode_gauge(&(ms as f64 / 1e3))?;
        }
    }
    let mut f = family(
        enc,
        "meridian_dnssec_online_signatures",
        "Compact-denial NSECs signed on the query path (per-thread cache misses).",
        MetricType::Counter,
    )?;
    for (z, s) in &signed {
        counter(&mut f, &[("zone", *z)], load(&s.online))?;
    }
    Ok(())
}
