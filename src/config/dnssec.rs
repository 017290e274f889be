//! `[[zone]] dnssec = { keys, signature_validity, refresh, denial }`: the
//! zone's key pairs loaded and checked (every error at the key's line in the
//! config, with the key file's own message), and the signing settings.
//! Nothing is signed here.

use std::sync::Arc;
use std::time::Duration;

use toml::Spanned;

use super::{DnssecCfg, Source};
use crate::dnssec::keys::{self, KeyPair};
use crate::error::LocatedError;

/// How a signed zone proves that a name or type does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// Compact denial of existence (RFC 9824): one NSEC made per query.
    Compact,
}

/// A zone's checked `dnssec` table.
#[derive(Debug)]
pub struct ZoneDnssec {
    /// The key pairs, in config order; none is expired.
    pub keys: Vec<Arc<KeyPair>>,
    /// How long an RRSIG is valid (1 h to 90 days).
    pub validity: Duration,
    /// Re-sign once a signature has this long left (less than `validity`).
    pub refresh: Duration,
    /// The denial of existence.
    pub denial: Denial,
    /// Keys published in the DNSKEY RRset that do not sign (`publish`).
    pub publish: Vec<Arc<KeyPair>>,
    /// Most RRsets one `some K` pool family may need signed (`max_subsets`).
    pub max_subsets: u64,
}

/// Default `max_subsets`.
pub const MAX_SUBSETS: u64 = 4096;

impl ZoneDnssec {
    /// The keys whose DS goes to the parent (CDS, CDNSKEY, `dnssec ds`):
    /// every KSK or CSK (flags 257), or every key when the zone has none.
    pub fn entry_keys(&self) -> Vec<&Arc<KeyPair>> {
        let ksk: Vec<&Arc<KeyPair>> = self.keys.iter().filter(|k| k.is_ksk()).collect();
        if ksk.is_empty() {
            self.keys.iter().collect()
        } else {
            ksk
        }
    }

    /// The keys that sign the key RRsets (DNSKEY, CDS, CDNSKEY): the KSKs,
    /// and every key of an algorithm that has no KSK, since each algorithm
    /// in the DNSKEY set must sign it (RFC 4035 §2.2).
    pub fn key_set_keys(&self) -> Vec<&Arc<KeyPair>> {
        self.per_algorithm(|k| k.is_ksk())
    }

    /// The keys that sign everything else (RFC 6781 §3.1): the ZSKs, and
    /// every key of an algorithm that has no ZSK (a CSK), so that each
    /// algorithm signs every RRset (RFC 4035 §2.2).
    pub fn zone_keys(&self) -> Vec<&Arc<KeyPair>> {
        self.per_algorithm(|k| !k.is_ksk())
    }

    /// The keys `role` picks, and all keys of each algorithm it picks none of.
    fn per_algorithm(&self, role: impl Fn(&KeyPair) -> bool) -> Vec<&Arc<KeyPair>> {
        let alg = |k: &KeyPair| k.dnskey.algorithm;
        self.keys
            .iter()
            .filter(|k| role(k) || !self.keys.iter().any(|o| alg(o) == alg(k) && role(o)))
            .collect()
    }
}

const HOUR: u64 = 3600;
const DAY: u64 = 86_400;

/// Checks the `dnssec` table of the zone `origin` (absolute, as text):
/// loads every key for the zone, refuses an expired one (at `now`, Unix
/// seconds), and checks the durations and the denial. The keys' warnings
/// (a `.private` file others can read) are added to `warnings`.
pub fn check(
    src: &Source,
    origin: &str,
    cfg: &Spanned<DnssecCfg>,
    now: i64,
    warnings: &mut Vec<String>,
) -> Result<ZoneDnssec, LocatedError> {
    let d = cfg.get_ref();
    let zone_err = |span: std::ops::Range<usize>, m: String| {
        src.err(span, format!("zone {origin}: dnssec {m}"))
    };
    if d.keys.get_ref().is_empty() {
        return Err(zone_err(
            d.keys.span(),
            "keys is empty: list at least one key (meridian dnssec keygen makes one)".into(),
        ));
    }
    let mut out: Vec<Arc<KeyPair>> = Vec::new();
    let mut publish: Vec<Arc<KeyPair>> = Vec::new();
    let mut published_at = Vec::new();
    let listed = d.keys.get_ref().iter().map(|k| (k, false));
    let published = d
        .publish
        .iter()
        .flat_map(|p| p.get_ref().iter().map(|k| (k, true)));
    for (k, publish_only) in listed.chain(published) {
        let path = src.resolve(k.get_ref());
        let key_err = |m: String| zone_err(k.span(), format!("key {:?}: {m}", k.get_ref()));
        let (key, key_warnings) =
            keys::load_shared(&path, origin).map_err(|e| key_err(e.to_string()))?;
        let timing = key.timing;
        if timing.expired(now) {
            let (what, at) = match timing.inactive.filter(|&t| t <= now) {
                Some(t) => ("Inactive", t),
                None => ("Delete", timing.delete.unwrap_or_default()),
            };
            return Err(key_err(format!(
                "the key expired: {}: {what} {} is past; remove it from keys or make a new one",
                key.private_file.display(),
                keys::format_timestamp(at)
            )));
        }
        if let Some(dup) = out
            .iter()
            .chain(publish.iter())
            .find(|o| o.tag == key.tag && o.dnskey.algorithm == key.dnskey.algorithm)
        {
            return Err(key_err(format!(
                "the same key as {} is listed twice",
                dup.key_file.display()
            )));
        }
        // Rollovers go by the keys/publish lists and reloads, not by the
        // files' times: say so when the times mean something else.
        let later = |t: Option<i64>| t.filter(|&t| t > now).map(keys::format_timestamp);
        let scheduled = match (later(timing.activate), later(timing.publish)) {
            (Some(t), _) if !publish_only => Some(format!(
                "Activate {t} is in the future, but a key under keys signs from now \
                 (meridian does not schedule by the key's times); list it under publish until then"
            )),
            (_, Some(t)) => Some(format!(
                "Publish {t} is in the future, but the key is published from now \
                 (meridian does not schedule by the key's times)"
            )),
            _ => None,
        };
        for w in key_warnings.into_iter().chain(scheduled) {
            let m = format!("warning: zone {origin}: dnssec key {:?}: {w}", k.get_ref());
            warnings.push(src.err(k.span(), m).to_string());
        }
        if publish_only {
            published_at.push((k.span(), k.get_ref().clone()));
            publish.push(key);
        } else {
            out.push(key);
        }
    }
    // RFC 4035 §2.2: every algorithm in the DNSKEY set signs every RRset.
    for (key, (span, name)) in publish.iter().zip(published_at) {
        let alg = key.dnskey.algorithm;
        if !out.iter().any(|k| k.dnskey.algorithm == alg) {
            let m = format!(
                "warning: zone {origin}: dnssec key {name:?} is published only, and no key under \
                 keys has its algorithm {alg}: the DNSKEY set holds an algorithm that signs \
                 nothing (RFC 4035 §2.2), which DNSViz reports; list a key of algorithm {alg} \
                 under keys first (RFC 6781 §4.1.4)"
            );
            warnings.push(src.err(span, m).to_string());
        }
    }
    let validity = duration(
        src,
        origin,
        "signature_validity",
        d.signature_validity.as_ref(),
        14 * DAY,
    )?;
    if !(HOUR..=90 * DAY).contains(&validity.as_secs()) {
        let span = d
            .signature_validity
            .as_ref()
            .map_or(cfg.span(), |s| s.span());
        return Err(zone_err(
            span,
            format!(
                "signature_validity must be from 1h to 90d, not {}",
                humantime::format_duration(validity)
            ),
        ));
    }
    let refresh = duration(src, origin, "refresh", d.refresh.as_ref(), 7 * DAY)?;
    if refresh.is_zero() || refresh >= validity {
        let span = d.refresh.as_ref().map_or(cfg.span(), |s| s.span());
        return Err(zone_err(
            span,
            format!(
                "refresh must be more than 0 and less than signature_validity ({}), not {}",
                humantime::format_duration(validity),
                humantime::format_duration(refresh)
            ),
        ));
    }
    let denial = match d.denial.as_ref().map(|s| s.get_ref().as_str()) {
        None | Some("compact") => Denial::Compact,
        Some(other) => {
            let span = d.denial.as_ref().map_or(cfg.span(), |s| s.span());
            return Err(zone_err(
                span,
                format!(
                    "denial {other:?} is not supported: the only one is \"compact\" (RFC 9824)"
                ),
            ));
        }
    };
    let max_subsets = d.max_subsets.as_ref().map_or(MAX_SUBSETS, |m| *m.get_ref());
    if max_subsets == 0 {
        let span = d.max_subsets.as_ref().map_or(cfg.span(), |s| s.span());
        return Err(zone_err(span, "max_subsets must be at least 1".into()));
    }
    Ok(ZoneDnssec {
        keys: out,
        validity,
        refresh,
        denial,
        publish,
        max_subsets,
    })
}

/// A duration such as "14d", "36h" or "90m"; `default` when absent.
fn duration(
    src: &Source,
    origin: &str,
    key: &str,
    v: Option<&Spanned<String>>,
    default: u64,
) -> Result<Duration, LocatedError> {
    let Some(v) = v else {
        return Ok(Duration::from_secs(default));
    };
    humantime::parse_duration(v.get_ref().trim()).map_err(|e| {
        src.err(
            v.span(),
            format!(
                "zone {origin}: dnssec {key} {:?} is not a duration ({e}; write \"14d\" or \"36h\")",
                v.get_ref()
            ),
        )
    })
}

/// The current time in Unix seconds.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
