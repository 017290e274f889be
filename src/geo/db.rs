//! MaxMind DB access: open (read into memory), look up one address, iterate
//! every network, and read records in either of the two common schemas
//! into one [`Location`]. The networks feed the partition (RFC 7871 §7.2.1:
//! scopes come from merged database networks, never from guesses).

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::str::FromStr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use maxminddb::{LookupResult, PathElement, Reader, WithinOptions};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use super::continents::continent_of;

/// Record layout of a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schema {
    /// Decide from metadata `database_type`, else by probing records.
    #[default]
    Auto,
    /// GeoIP2/GeoLite2 Country/City, DB-IP Lite: `country.iso_code`,
    /// `continent.code`, `subdivisions[].iso_code`, `location.latitude`.
    MaxMind,
    /// IPinfo Lite, ip-location-db: top-level `country_code`,
    /// `continent_code`, optional `latitude`/`longitude`.
    Flat,
}

impl FromStr for Schema {
    type Err = String;
    fn from_str(s: &str) -> Result<Schema, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Schema::Auto),
            "maxmind" | "geoip2" | "geolite2" => Ok(Schema::MaxMind),
            "flat" | "ipinfo" => Ok(Schema::Flat),
            _ => Err(format!(
                "unknown geo database schema {s:?} (auto, maxmind, flat)"
            )),
        }
    }
}

/// Where the database places an address. Codes are upper case.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Location {
    /// ISO 3166-1 alpha-2.
    pub country: Option<String>,
    /// AF, AN, AS, EU, NA, OC, SA (derived from the country if missing).
    pub continent: Option<String>,
    /// "US-CA": country, "-", subdivision code; largest first as in the DB.
    pub subdivisions: Vec<String>,
    /// (latitude, longitude) in degrees.
    pub coords: Option<(f64, f64)>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dash = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
        write!(
            f,
            "country {} continent {}",
            dash(&self.country),
            dash(&self.continent)
        )?;
        if !self.subdivisions.is_empty() {
            write!(f, " subdivisions {}", self.subdivisions.join(","))?;
        }
        if let Some((lat, lon)) = self.coords {
            write!(f, " coords {lat:.4},{lon:.4}")?;
        }
        Ok(())
    }
}

/// An open geolocation database.
pub struct GeoDb {
    reader: Reader<Vec<u8>>,
    schema: Schema,
    /// IPv4 addresses have their own subtree (IPv4 DB, or IPv6 DB with ::/96).
    v4: bool,
    /// IPv6 ranges that only alias the IPv4 subtree (::/96 itself and, in
    /// MaxMind builds, ::ffff:0:0/96, 2001::/32, 2002::/16). Networks there
    /// are reported once, as IPv4, so IPv6 lookups there find nothing.
    v6_aliases: Vec<Ipv6Net>,
}

impl fmt::Debug for GeoDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeoDb")
            .field("database_type", &self.database_type())
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl GeoDb {
    /// Read `path` into memory. The file is read, not memory-mapped: a
    /// database rewritten in place (`cp` over it) while a reload reads it
    /// would raise SIGBUS through a mapping once it shrinks; read, it is at
    /// worst a torn copy, which the reader refuses or the build reports.
    /// The bytes live only as long as a build (serving keeps the compiled
    /// decision blocks, not the database).
    pub fn open(path: &Path, schema: Schema) -> Result<GeoDb, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_source(bytes, schema).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Use an in-memory copy of a database file.
    pub fn from_bytes(bytes: Vec<u8>, schema: Schema) -> Result<GeoDb, String> {
        Self::from_source(bytes, schema)
    }

    fn from_source(src: Vec<u8>, schema: Schema) -> Result<GeoDb, String> {
        let reader = Reader::from_source(src).map_err(|e| format!("not a MaxMind DB: {e}"))?;
        let ip_version = reader.metadata().ip_version;
        let v4 = ip_version == 4
            || matches!(
                reader.lookup(IpAddr::V4(Ipv4Addr::UNSPECIFIED)).map(|r| r.network()),
                Ok(Ok(n)) if n.is_ipv4()
            );
        let mut v6_aliases = Vec::new();
        if ip_version == 6 && v4 {
            v6_aliases.push("::/96".parse().unwrap());
            for root in ["::ffff:0:0/96", "2001::/32", "2002::/16"] {
                if is_alias(&reader, root) {
                    v6_aliases.push(root.parse().unwrap());
                }
            }
        }
        let schema = match schema {
            Schema::Auto => detect(&reader),
            s => s,
        };
        Ok(GeoDb {
            reader,
            schema,
            v4,
            v6_aliases,
        })
    }

    /// The schema in use (never `Auto` after open).
    pub fn schema(&self) -> Schema {
        self.schema
    }

    /// The `database_type` of the file's metadata (e.g. "GeoLite2-City").
    pub fn database_type(&self) -> &str {
        &self.reader.metadata().database_type
    }

    /// When the database was built, in seconds since the Unix epoch (metadata `build_epoch`).
    pub fn build_epoch(&self) -> u64 {
        self.reader.metadata().build_epoch
    }

    /// Full structural check of the file (slow: walks every network).
    pub fn verify(&self) -> Result<(), String> {
        self.reader.verify().map_err(|e| e.to_string())
    }

    /// The location of `ip` and the prefix length of the database network
    /// holding it; None where the database has no data.
    pub fn lookup(&self, ip: IpAddr) -> Option<(Location, u8)> {
        match ip {
            IpAddr::V4(_) if !self.v4 => return None,
            IpAddr::V6(_) if self.reader.metadata().ip_version == 4 => return None,
            IpAddr::V6(a) if self.v6_aliases.iter().any(|n| n.contains(&a)) => return None,
            _ => {}
        }
        let r = self.reader.lookup(ip).ok()?;
        if !r.has_data() {
            return None;
        }
        let len = r.network().ok()?.prefix();
        Some((self.decode(&r), len))
    }

    /// Call `f` for every network with data, in address order, IPv4
    /// networks as IPv4. Alias ranges are skipped.
    pub fn for_each_network(&self, mut f: impl FnMut(IpNet, &Location)) {
        let mut cache: HashMap<usize, Location> = HashMap::new();
        self.for_each_leaf(|net, offset, decode| {
            f(net, cache.entry(offset).or_insert_with(decode))
        });
    }

    /// Every network with data, in address order, with its record offset
    /// and a decoder for its record: callers that cache by offset decode
    /// each record once and keep no `Location` they do not need.
    pub(crate) fn for_each_leaf(
        &self,
        mut f: impl FnMut(IpNet, usize, &mut dyn FnMut() -> Location),
    ) {
        let iter = match self.reader.networks(WithinOptions::default()) {
            Ok(it) => it,
            Err(e) => {
                tracing::warn!("geo database: cannot iterate networks: {e}");
                return;
            }
        };
        for item in iter {
            let r = match item {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!("geo database: iteration stopped early: {e}");
                    return;
                }
            };
            let (Some(offset), Ok(n)) = (r.offset(), r.network()) else {
                continue;
            };
            let net = match n.network() {
                IpAddr::V4(a) if self.v4 => IpNet::V4(Ipv4Net::new(a, n.prefix()).unwrap()),
                IpAddr::V6(a) if !self.v6_aliases.iter().any(|x| x.contains(&a)) => {
                    IpNet::V6(Ipv6Net::new(a, n.prefix()).unwrap())
                }
                _ => continue,
            };
            f(net, offset, &mut || self.decode(&r));
        }
    }

    /// Read one record; a record that does not decode counts as "no
    /// location", the same for lookup and iteration.
    fn decode(&self, r: &LookupResult<'_, Vec<u8>>) -> Location {
        let res = match self.schema {
            Schema::Flat => r
                .decode::<FlatRecord>()
                .map(|o| o.map(FlatRecord::location)),
            _ => r.decode::<MmRecord>().map(|o| o.map(MmRecord::location)),
        };
        match res {
            Ok(loc) => loc.unwrap_or_default(),
            Err(e) => {
                tracing::debug!("geo database: undecodable record: {e}");
                Location::default()
            }
        }
    }
}

/// A MaxMind-built alias: the range leads to the IPv4 subtree, which the
/// default iteration skips there but alias-including iteration does not.
fn is_alias(reader: &Reader<Vec<u8>>, root: &str) -> bool {
    let cidr = root.parse().unwrap();
    let plain = reader.within(cidr, WithinOptions::default());
    let aliased = reader.within(cidr, WithinOptions::default().include_aliased_networks());
    match (plain, aliased) {
        (Ok(mut p), Ok(mut a)) => p.next().is_none() && a.next().is_some(),
        _ => false,
    }
}

/// Schema from the metadata, else from the first records that say.
fn detect(reader: &Reader<Vec<u8>>) -> Schema {
    let t = reader.metadata().database_type.to_ascii_lowercase();
    if ["geoip2", "geolite2", "dbip", "db-ip"]
        .iter()
        .any(|k| t.contains(k))
    {
        return Schema::MaxMind;
    }
    if t.contains("ipinfo") {
        return Schema::Flat;
    }
    let has = |r: &LookupResult<'_, Vec<u8>>, path: &[&str]| {
        let p: Vec<PathElement> = path.iter().map(|k| PathElement::Key(k)).collect();
        matches!(r.decode_path::<&str>(&p), Ok(Some(_)))
    };
    if let Ok(iter) = reader.networks(WithinOptions::default()) {
        for r in iter.take(256).flatten() {
            if has(&r, &["country", "iso_code"]) || has(&r, &["continent", "code"]) {
                return Schema::MaxMind;
            }
            if has(&r, &["country_code"]) || has(&r, &["continent_code"]) {
                return Schema::Flat;
            }
        }
    }
    Schema::MaxMind
}

#[derive(Deserialize)]
struct Code<'a> {
    #[serde(borrow)]
    iso_code: Option<&'a str>,
    #[serde(borrow)]
    code: Option<&'a str>,
}

#[derive(Deserialize)]
struct MmLocation {
    latitude: Option<Num>,
    longitude: Option<Num>,
}

#[derive(Deserialize)]
struct MmRecord<'a> {
    #[serde(borrow)]
    country: Option<Code<'a>>,
    #[serde(borrow)]
    continent: Option<Code<'a>>,
    #[serde(borrow)]
    subdivisions: Option<Vec<Code<'a>>>,
    location: Option<MmLocation>,
}

impl MmRecord<'_> {
    fn location(self) -> Location {
        let loc = self.location.unwrap_or(MmLocation {
            latitude: None,
            longitude: None,
        });
        let subs: Vec<&str> = self
            .subdivisions
            .unwrap_or_default()
            .into_iter()
            .filter_map(|s| s.iso_code)
            .collect();
        build(
            self.country.and_then(|c| c.iso_code),
            self.continent.and_then(|c| c.code),
            &subs,
            loc.latitude,
            loc.longitude,
        )
    }
}

#[derive(Deserialize)]
struct FlatRecord<'a> {
    #[serde(borrow)]
    country_code: Option<&'a str>,
    #[serde(borrow)]
    continent_code: Option<&'a str>,
    latitude: Option<Num>,
    longitude: Option<Num>,
}

impl FlatRecord<'_> {
    fn location(self) -> Location {
        build(
            self.country_code,
            self.continent_code,
            &[],
            self.latitude,
            self.longitude,
        )
    }
}

/// Normalise codes to upper case; derive continent; check coordinates.
fn build(
    country: Option<&str>,
    continent: Option<&str>,
    subs: &[&str],
    lat: Option<Num>,
    lon: Option<Num>,
) -> Location {
    let clean = |s: &str| Some(s.trim().to_ascii_uppercase()).filter(|s| !s.is_empty());
    let country = country.and_then(clean);
    let continent = continent.and_then(clean).or_else(|| {
        country
            .as_deref()
            .and_then(continent_of)
            .map(str::to_string)
    });
    let subdivisions = match &country {
        Some(c) => subs
            .iter()
            .filter_map(|s| clean(s))
            .map(|s| format!("{c}-{s}"))
            .collect(),
        None => Vec::new(),
    };
    let coords = match (lat, lon) {
        (Some(Num(la)), Some(Num(lo)))
            if la.is_finite() && lo.is_finite() && la.abs() <= 90.0 && lo.abs() <= 180.0 =>
        {
            Some((la, lo))
        }
        _ => None,
    };
    Location {
        country,
        continent,
        subdivisions,
        coords,
    }
}

/// A coordinate stored as double, float, integer or string, depending on
/// who built the database.
struct Num(f64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_f32<E: de::Error>(self, v: f32) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                v.trim().parse().map(Num).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}
