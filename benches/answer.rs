//! Regression guard for the answer function: one query's bytes in, the
//! response's bytes out, on the bundled example config. Run with
//! `cargo bench --bench answer`. Baseline numbers are in tools/bench/README.md.
//! The rows of the weighted and sticky modes use `benches/modes.toml`.

use std::net::IpAddr;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsOption};
use hickory_proto::rr::{Name, RecordType};
use meridian::answer::{Outcome, Scratch, Transport};
use meridian::engine::Engine;

fn main() {
    divan::main();
}

fn engine() -> Engine {
    engine_at(concat!(env!("CARGO_MANIFEST_DIR"), "/zones/meridian.toml"))
}

fn engine_at(cfg: &str) -> Engine {
    meridian::answer::load(std::path::Path::new(cfg), None).expect("bench config loads")
}

const MODES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/modes.toml");

fn query(name: &str, t: RecordType, ecs: Option<(IpAddr, u8)>) -> Vec<u8> {
    query_with(name, t, ecs, false)
}

fn query_with(name: &str, t: RecordType, ecs: Option<(IpAddr, u8)>, dnssec_ok: bool) -> Vec<u8> {
    let mut m = Message::new(0x1234, MessageType::Query, OpCode::Query);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
    let mut e = Edns::new();
    e.set_max_payload(1232);
    e.set_dnssec_ok(dnssec_ok);
    if let Some((a, l)) = ecs {
        e.options_mut()
            .insert(EdnsOption::Subnet(ClientSubnet::new(a, l, 0)));
    }
    m.set_edns(e);
    m.to_vec().unwrap()
}

/// A UDP query from 127.0.0.1.
fn loopback() -> Transport {
    Transport {
        src: "127.0.0.1".parse().unwrap(),
        tcp: false,
    }
}

fn run(bencher: divan::Bencher, queries: Vec<Vec<u8>>) {
    run_on(bencher, engine(), queries)
}

fn run_on(bencher: divan::Bencher, e: Engine, queries: Vec<Vec<u8>>) {
    let mut scratch = Scratch::default();
    let mut out = vec![0u8; 4096];
    let mut outcome = Outcome::default();
    let t = loopback();
    let mut i = 0usize;
    bencher.bench_local(|| {
        let q = &queries[i % queries.len()];
        i += 1;
        let n = e.answer(q, t, &mut scratch, &mut out, &mut outcome);
        divan::black_box(n)
    });
}

#[divan::bench(sample_count = 200, sample_size = 1000)]
fn static_a(b: divan::Bencher) {
    run(b, vec![query("www.example.test.", RecordType::A, None)]);
}

#[divan::bench(sample_count = 200, sample_size = 1000)]
fn nxdomain(b: divan::Bencher) {
    run(b, vec![query("nope.example.test.", RecordType::A, None)]);
}

#[divan::bench(sample_count = 200, sample_size = 1000)]
fn pool_one(b: divan::Bencher) {
    run(b, vec![query("one.example.test.", RecordType::A, None)]);
}

#[divan::bench(sample_count = 200, sample_size = 1000)]
fn pool_all(b: divan::Bencher) {
    run(b, vec![query("shuffle.example.test.", RecordType::A, None)]);
}

#[divan::bench(sample_count = 200, sample_size = 1000)]
fn pool_rotate(b: divan::Bencher) {
    run(b, vec![query("rotate.example.test.", RecordType::A, None)]);
}

/// `all` over four members weighted 5/3/1/1: the weighted shuffle.
#[divan::bench(sample_count = 200, sample_size = 1000)]
fn pool_all_weighted(b: divan::Bencher) {
    let q = query("allw.example.test.", RecordType::A, None);
    run_on(b, engine_at(MODES), vec![q]);
}

/// `one` over 16 members of unequal weights: the row sticky compares with.
/// Same ECS queries as `pool_sticky_16`, so only the pick differs.
#[divan::bench(sample_count = 200, sample_size = 1000)]
fn pool_one_16(b: divan::Bencher) {
    run_on(b, engine_at(MODES), ecs_queries("one16.example.test."));
}

/// Sticky `one` over the same 16 members, with an ECS /24 that varies per
/// query (4096 blocks, as `geo_ecs_many_subnets`): a block hash and 16
/// rendezvous ranks per answer, plus the scope in the echo.
#[divan::bench(sample_count = 200, sample_size = 1000)]
fn pool_sticky_16(b: divan::Bencher) {
    run_on(b, engine_at(MODES), ecs_queries("sticky16.example.test."));
}

/// `one` with `pick = "p2c"` over the same 16 members: two weighted draws
/// and a comparison of round-trip estimate ÷ weight (each member given an
/// estimate, as its checks would, through the engine's own refresh).
#[divan::bench(sample_count = 200, sample_size = 1000)]
fn pool_p2c_16(b: divan::Bencher) {
    let e = engine_at(MODES);
    e.rebalance_with(
        &Default::default(),
        meridian::balance::now_ms(),
        &|i| Some(0.001 * f64::from(i % 7 + 1)),
        &|_| None,
        |_| true,
    );
    run_on(b, e, ecs_queries("p2c16.example.test."));
}

/// 4096 ECS /24s spread over the IPv4 space (deterministic), for `name`.
fn ecs_queries(name: &str) -> Vec<Vec<u8>> {
    ecs_queries_with(name, false)
}

/// [`ecs_queries`], with the DO bit or not.
fn ecs_queries_with(name: &str, dnssec_ok: bool) -> Vec<Vec<u8>> {
    let mut x: u32 = 0x9E37_79B9;
    (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let a = IpAddr::from((x & 0xFFFF_FF00).to_be_bytes());
            query_with(name, RecordType::A, Some((a, 24)), dnssec_ok)
        })
        .collect()
}

/// 4096 /24s spread over the IPv4 space (deterministic).
fn geo_queries() -> Vec<Vec<u8>> {
    ecs_queries("geo.example.test.")
}

#[divan::bench(sample_count = 200, sample_size = 1000)]
fn geo_ecs_many_subnets(b: divan::Bencher) {
    run(b, geo_queries());
}

/// The answer path shares nothing written per query (each worker has its
/// own scratch, buffers, random generator and cursors), so the time per
/// answer stays flat with a thread per core: answers per second grow with
/// the threads. On 2 cores, `threads = 2` should match `threads = 1`.
#[divan::bench(threads = [1, 2], sample_count = 100, sample_size = 1000)]
fn geo_ecs_threads(b: divan::Bencher) {
    let e = engine();
    let qs = geo_queries();
    let t = loopback();
    b.with_inputs(|| {
        (
            Scratch::default(),
            vec![0u8; 4096],
            Outcome::default(),
            0usize,
        )
    })
    .bench_local_refs(|(scratch, out, outcome, i)| {
        *i += 1;
        let q = &qs[*i % qs.len()];
        divan::black_box(e.answer(q, t, scratch, out, outcome))
    });
}

/// The bundled example signed (#17): a KSK and a ZSK (ECDSA P-256) made
/// into a temporary folder, the example's zone and database by absolute
/// path, and a `dnssec` table.
fn signed_engine() -> Engine {
    signed_engine_with("")
}

/// [`signed_engine`] with `extra` tables appended to the config.
fn signed_engine_with(extra: &str) -> Engine {
    use meridian::dnssec::keys::{generate, GenAlgorithm};
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = std::env::temp_dir().join(format!("meridian-bench-signed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut names = Vec::new();
    for ksk in [true, false] {
        let g = generate("example.test", GenAlgorithm::EcdsaP256, ksk, 0).unwrap();
        std::fs::write(dir.join(format!("{}.key", g.base)), &g.key_text).unwrap();
        std::fs::write(dir.join(format!("{}.private", g.base)), &g.private_text).unwrap();
        names.push(format!("\"{}/{}\"", dir.display(), g.base));
    }
    let cfg = std::fs::read_to_string(format!("{root}/zones/meridian.toml"))
        .unwrap()
        .replace("../geo/example.mmdb", &format!("{root}/geo/example.mmdb"))
        .replace(
            "file = \"example.test.zone\"",
            &format!(
                "file = \"{root}/zones/example.test.zone\"\ndnssec = {{ keys = [{}] }}",
                names.join(", ")
            ),
        );
    let path = dir.join("meridian.toml");
    std::fs::write(&path, cfg + extra).unwrap();
    let e = engine_at(path.to_str().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    e
}

/// `query` with the DO bit (RFC 3225).
fn query_do(name: &str, t: RecordType, ecs: Option<(IpAddr, u8)>) -> Vec<u8> {
    query_with(name, t, ecs, true)
}

/// DO=1 to the signed example: the A record and its RRSIG (copied from
/// the published table). Compare with `static_a`.
#[divan::bench(sample_count = 200, sample_size = 1000)]
fn signed_static(b: divan::Bencher) {
    let q = query_do("www.example.test.", RecordType::A, None);
    run_on(b, signed_engine(), vec![q]);
}

/// DO=1 `all` over four members: the set's key summed, its RRSIG looked
/// up. Compare with `pool_all`.
#[divan::bench(sample_count = 200, sample_size = 1000)]
fn signed_pool_all(b: divan::Bencher) {
    let q = query_do("shuffle.example.test.", RecordType::A, None);
    run_on(b, signed_engine(), vec![q]);
}

/// DO=1 `one`. Compare with `pool_one`.
#[divan::bench(sample_count = 200, sample_size = 1000)]
fn signed_pool_one(b: divan::Bencher) {
    let q = query_do("one.example.test.", RecordType::A, None);
    run_on(b, signed_engine(), vec![q]);
}

/// DO=1 geo over 4096 ECS subnets. Compare with `geo_ecs_many_subnets`.
#[divan::bench(sample_count = 200, sample_size = 1000)]
fn signed_geo(b: divan::Bencher) {
    run_on(
        b,
        signed_engine(),
        ecs_queries_with("geo.example.test.", true),
    );
}

/// DO=1 NXDOMAIN: the compact NSEC, its RRSIG from the thread's cache
/// (signed once), and the signed SOA. Compare with `nxdomain`.
#[divan::bench(sample_count = 200, sample_size = 1000)]
fn signed_nxdomain(b: divan::Bencher) {
    let q = query_do("nope.example.test.", RecordType::A, None);
    run_on(b, signed_engine(), vec![q]);
}

/// One online signature per answer (a compact NSEC missing from the
/// cache): every query a new name.
#[divan::bench(sample_count = 20, sample_size = 100)]
fn signed_nxdomain_miss(b: divan::Bencher) {
    let qs = (0..100_000)
        .map(|i| query_do(&format!("n{i}.example.test."), RecordType::A, None))
        .collect();
    run_on(b, signed_engine(), qs);
}

/// Re-signing after a health change (#17): 1,000 names answered `all`
/// from one four-member pool, every set signed afresh (as when a member
/// of that pool goes down): one ECDSA signature per name, plus the table.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn resign_1000_pool_names(b: divan::Bencher) {
    use meridian::engine::signed::{unix_now, DynSigs, Keys};
    use std::fmt::Write;
    let mut extra = String::from(
        "\n[pool.big]\nmembers = [\"192.0.2.1\", \"192.0.2.2\", \"192.0.2.3\", \"192.0.2.4\"]\n",
    );
    for i in 0..1000 {
        let _ = write!(
            extra,
            "\n[name.\"p{i}.example.test\"]\npool = \"big\"\nmode = \"all\"\n"
        );
    }
    let e = signed_engine_with(&extra);
    let zi = 0;
    let s = e.signer(zi).expect("signed");
    let keys = Keys::of(&e.zones[zi].origin, &s.cfg);
    let empty = DynSigs::default();
    b.bench_local(|| {
        let d = e
            .sign_dynamic(
                zi,
                &keys,
                &empty,
                s.cfg.max_subsets,
                e.member_state(),
                unix_now(),
            )
            .unwrap();
        assert!(d.made >= 1000);
        divan::black_box(d)
    });
}
