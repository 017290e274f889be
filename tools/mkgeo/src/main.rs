//! mkgeo: build a GeoLite2-City-shaped MaxMind DB from a committed CSV, so
//! meridian's example database is reproducible (same input, same bytes).
//!
//! Usage: `mkgeo INPUT.csv OUTPUT.mmdb`
//!
//! CSV columns: `network,continent,country,subdivision,latitude,longitude`.
//! Lines starting with `#` are comments; `# build_epoch: N` sets the
//! metadata build time (default below), never the wall clock.

mod writer;

use std::process::ExitCode;

use ipnet::IpNet;
use writer::{Meta, Tree, Value};

/// 2025-01-01T00:00:00Z: used when the CSV does not name an epoch.
const DEFAULT_BUILD_EPOCH: u64 = 1_735_689_600;
const HEADER: &str = "network,continent,country,subdivision,latitude,longitude";
const CONTINENTS: [&str; 7] = ["AF", "AN", "AS", "EU", "NA", "OC", "SA"];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: mkgeo INPUT.csv OUTPUT.mmdb");
        return ExitCode::from(2);
    }
    match run(&args[1], &args[2]) {
        Ok(n) => {
            eprintln!("mkgeo: wrote {} ({n} networks)", args[2]);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mkgeo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(input: &str, output: &str) -> Result<usize, String> {
    let text = std::fs::read_to_string(input).map_err(|e| format!("{input}: {e}"))?;
    let (tree, meta, count) = build(&text).map_err(|e| format!("{input}:{e}"))?;
    let bytes = tree.finish(&meta);
    // Write beside the target and rename: a server that memory-maps the
    // old file never sees it half written.
    let tmp = format!("{output}.tmp");
    std::fs::write(&tmp, &bytes).map_err(|e| format!("{tmp}: {e}"))?;
    std::fs::rename(&tmp, output).map_err(|e| format!("{output}: {e}"))?;
    Ok(count)
}

/// Parse the CSV into a tree. Errors are prefixed with the line number.
fn build(text: &str) -> Result<(Tree, Meta, usize), String> {
    let mut tree = Tree::default();
    let mut epoch = DEFAULT_BUILD_EPOCH;
    let mut seen_header = false;
    let mut count = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let at = |msg: String| format!("{}: {msg}", i + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            if let Some(v) = comment.trim().strip_prefix("build_epoch:") {
                epoch = v
                    .trim()
                    .parse()
                    .map_err(|_| at(format!("bad build_epoch {v:?}")))?;
            }
            continue;
        }
        if !seen_header {
            if line != HEADER {
                return Err(at(format!("expected header {HEADER:?}")));
            }
            seen_header = true;
            continue;
        }
        let (key, len, value) = parse_row(line).map_err(at)?;
        tree.insert(key, len, &value)
            .map_err(|e| at(format!("{line}: {e}")))?;
        count += 1;
    }
    let meta = Meta {
        database_type: "meridian-example-City".into(),
        description: "meridian example geo data (hand-written, illustrative, CC0)".into(),
        build_epoch: epoch,
    };
    Ok((tree, meta, count))
}

/// One row -> (128-bit key, prefix length, GeoLite2-City-shaped record).
fn parse_row(line: &str) -> Result<(u128, u8, Value), String> {
    let f: Vec<&str> = line.split(',').map(str::trim).collect();
    if f.len() != 6 {
        return Err(format!("expected 6 fields, got {}", f.len()));
    }
    let net: IpNet = f[0]
        .parse()
        .map_err(|_| format!("bad network {:?}", f[0]))?;
    if net.trunc() != net {
        return Err(format!("{net} has host bits set"));
    }
    // IPv4 goes to the ::/96 subtree, where readers expect it.
    let (key, len) = match net {
        IpNet::V4(n) => (u32::from(n.network()) as u128, n.prefix_len() + 96),
        IpNet::V6(n) => (u128::from(n.network()), n.prefix_len()),
    };
    let (continent, country, subdivision) = (f[1], f[2], f[3]);
    if !CONTINENTS.contains(&continent) {
        return Err(format!("bad continent {continent:?}"));
    }
    if country.len() != 2 || !country.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(format!("bad country {country:?}"));
    }
    let sub_ok = |s: &str| {
        (1..=3).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
    };
    if !subdivision.is_empty() && !sub_ok(subdivision) {
        return Err(format!("bad subdivision {subdivision:?}"));
    }
    let lat: f64 = f[4]
        .parse()
        .map_err(|_| format!("bad latitude {:?}", f[4]))?;
    let lon: f64 = f[5]
        .parse()
        .map_err(|_| format!("bad longitude {:?}", f[5]))?;
    if !(-90.0..=90.0).contains(&lat) || !(-180.0..=180.0).contains(&lon) {
        return Err(format!("coordinates out of range: {lat},{lon}"));
    }

    let mut record = vec![
        ("continent", Value::map([("code", Value::str(continent))])),
        ("country", Value::map([("iso_code", Value::str(country))])),
        (
            "location",
            Value::map([
                ("latitude", Value::Double(lat)),
                ("longitude", Value::Double(lon)),
            ]),
        ),
    ];
    if !subdivision.is_empty() {
        let sub = Value::map([("iso_code", Value::str(subdivision))]);
        record.push(("subdivisions", Value::Array(vec![sub])));
    }
    Ok((key, len, Value::map(record)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# build_epoch: 7\n\
        network,continent,country,subdivision,latitude,longitude\n\
        8.0.0.0/9,NA,US,,37.751,-97.822\n\
        2a00:1450:4000::/37,EU,DE,,51.2993,9.491\n";

    #[test]
    fn output_is_deterministic() {
        let a = build(SAMPLE).unwrap();
        let b = build(SAMPLE).unwrap();
        assert_eq!(a.1.build_epoch, 7);
        assert_eq!(a.0.finish(&a.1), b.0.finish(&b.1));
    }

    #[test]
    fn bad_rows_name_their_line() {
        let bad =
            "network,continent,country,subdivision,latitude,longitude\n8.0.0.1/9,NA,US,,1,1\n";
        assert!(build(bad).err().unwrap().starts_with("2: "));
    }
}
