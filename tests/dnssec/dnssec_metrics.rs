//! What `/metrics` says of a signed zone (#17): the RRsets signed ahead of
//! queries (static and pool sets), when the first signature expires (what
//! an operator alerts on), how long signing took, and the compact-denial
//! NSECs signed on the query path, which a name asked again does not add
//! to. The exposition passes `promtool check metrics` when it is on PATH.

use crate::common::Q;
use crate::health_support::{http, serve};
use crate::signed_common::Signed;
use hickory_proto::rr::RecordType;

fn metric(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn signed_zone_metrics() {
    let z = Signed::new("signed-metrics", "ecdsap256", "");
    let (s, api) = serve(&z.config);
    let ask = |name: &str| {
        let mut q = Q::new(name, RecordType::A).edns(1232);
        q.dnssec_ok = true;
        s.dig(&q)
    };
    let online = |t: &str| {
        metric(
            t,
            "meridian_dnssec_online_signatures_total{zone=\"example.test.\"}",
        )
        .unwrap()
    };
    let (_, before) = http(api, "GET", "/metrics");
    assert_eq!(online(&before), 0.0);
    let statics = metric(
        &before,
        "meridian_dnssec_signed_rrsets{zone=\"example.test.\",kind=\"static\"}",
    )
    .unwrap();
    // SOA, NS, MX, DNSKEY, CDS, CDNSKEY, A/AAAA/TXT of www, ... at least 10.
    assert!(statics >= 10.0, "{before}");
    let pools = metric(
        &before,
        "meridian_dnssec_signed_rrsets{zone=\"example.test.\",kind=\"pool\"}",
    )
    .unwrap();
    assert!(pools >= 10.0, "{before}");
    let expiry = metric(
        &before,
        "meridian_dnssec_expiry_timestamp_seconds{zone=\"example.test.\"}",
    )
    .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // Default validity 14 days, less at most a day of jitter.
    assert!(
        expiry > now + 12.0 * 86400.0 && expiry <= now + 14.0 * 86400.0 + 60.0,
        "{expiry} vs {now}"
    );

    ask("nope1.example.test.");
    ask("nope2.example.test.");
    ask("nope1.example.test.");
    let (_, after) = http(api, "GET", "/metrics");
    assert_eq!(online(&after), 2.0, "one signature per new name");

    match crate::common::promtool_check(&after) {
        Some((ok, out)) => assert!(ok, "promtool check metrics failed:\n{out}"),
        None => crate::common::skip(
            "signed_zone_metrics (promtool part)",
            "promtool is not on PATH",
        ),
    }
}
