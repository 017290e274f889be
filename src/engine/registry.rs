//! Pool members from a registry (issue #31): the members registered under
//! the fleet's `{prefix}members/POOL/ID` keys, a value the fleet link fills
//! from its watch of etcd and the daemon owns like the runtime weights, and
//! how a build adds them to the pools with `members_from = "etcd"`.
//!
//! Churn is damped: a new registration enters as [`Hold::Unproven`] (out
//! until its first passing check); a vanished one stays as [`Hold::Gone`]
//! (ejected, so the cap and panic bound a mass expiry) and leaves only
//! after the pool's grace, when the filter really ejects it and a
//! registered member of its family remains. Everything here runs off the
//! query path: a change marks the registry due, and the daemon rebuilds
//! the engine at most once a second.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::config::pools::MembersFrom;
use crate::health::{CheckSpec, HealthTable, UP};
use crate::pool::{Hold, Member, Pool, Standing, MAX_MEMBERS};

/// One registration: where the member is and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// The member's address.
    pub addr: IpAddr,
    /// The port its check probes (None: the check's).
    pub port: Option<u16>,
    /// Its relative weight, 1..=65535 (default 1).
    pub weight: u32,
}

/// A registration as a build sees it.
#[derive(Debug, Clone)]
pub struct Slot {
    /// The full etcd key.
    pub key: String,
    /// The last valid value of the key.
    pub reg: Registered,
    /// When the key vanished (None: registered).
    pub gone_since: Option<Instant>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Pool name → key → slot.
    pools: BTreeMap<String, BTreeMap<String, Slot>>,
    /// (key, value) pairs already warned about.
    warned: HashSet<(String, String)>,
    /// When a build wants to look again (a grace ends).
    wake_at: Option<Instant>,
}

/// The registered members of every pool, as last seen in etcd.
#[derive(Debug, Default)]
pub struct Registry {
    inner: Mutex<Inner>,
    /// A change since the last build.
    dirty: AtomicBool,
}

/// A registration's value: `ADDRESS`, `ADDRESS:PORT` (`[V6]:PORT`), or
/// JSON `{"address": "ADDRESS[:PORT]", "port": N, "weight": N}`.
pub fn parse_value(v: &[u8]) -> Result<Registered, String> {
    let text = std::str::from_utf8(v)
        .map_err(|_| "not UTF-8".to_string())?
        .trim();
    if text.starts_with('{') {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct J {
            address: String,
            #[serde(default)]
            port: Option<u16>,
            #[serde(default)]
            weight: Option<i64>,
        }
        let j: J = serde_json::from_str(text).map_err(|e| format!("bad JSON: {e}"))?;
        let mut r = parse_addr(&j.address)?;
        if j.port.is_some() {
            if r.port.is_some() {
                return Err("a port both in the address and in \"port\"".into());
            }
            r.port = j.port;
        }
        if let Some(w) = j.weight {
            if !(1..=65535).contains(&w) {
                return Err(format!("weight must be 1..=65535, not {w}"));
            }
            r.weight = w as u32;
        }
        if r.port == Some(0) {
            return Err("port 0".into());
        }
        return Ok(r);
    }
    parse_addr(text)
}

fn parse_addr(s: &str) -> Result<Registered, String> {
    let (addr, port) = match (s.parse::<IpAddr>(), s.parse::<SocketAddr>()) {
        (Ok(a), _) => (a, None),
        (_, Ok(sa)) if sa.port() != 0 => (sa.ip(), Some(sa.port())),
        _ => return Err(format!("bad address {s:?}: want ADDRESS or ADDRESS:PORT")),
    };
    Ok(Registered {
        addr,
        port,
        weight: 1,
    })
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn warn_once(inner: &mut Inner, key: &str, value: &str, why: &str) {
        if inner.warned.insert((key.to_string(), value.to_string())) {
            tracing::warn!("registry: ignoring {key}: {why}");
        }
    }

    /// Ignore `key` holding `value`, with a warning saying `why` (once
    /// per key and value).
    pub fn ignore(&self, key: &str, value: &str, why: &str) {
        Self::warn_once(&mut self.lock(), key, value, why);
    }

    /// `key` (the full etcd key of `pool`) holds `value`. A malformed
    /// value is ignored with a warning (once per key and value); the
    /// key's last valid value, if any, stays.
    pub fn put(&self, key: &str, pool: &str, value: &[u8]) {
        let mut inner = self.lock();
        let reg = match parse_value(value) {
            Ok(r) => r,
            Err(why) => {
                let v = String::from_utf8_lossy(value).into_owned();
                Self::warn_once(&mut inner, key, &v, &why);
                return;
            }
        };
        let slots = inner.pools.entry(pool.to_string()).or_default();
        let new = Slot {
            key: key.to_string(),
            reg,
            gone_since: None,
        };
        let same = slots
            .get(key)
            .is_some_and(|s| s.gone_since.is_none() && s.reg == new.reg);
        if !same {
            slots.insert(key.to_string(), new);
            self.dirty.store(true, Ordering::Release);
        }
    }

    /// `key` of `pool` vanished (deleted, or its lease ran out).
    pub fn remove(&self, key: &str, pool: &str) {
        let mut inner = self.lock();
        if let Some(s) = inner.pools.get_mut(pool).and_then(|p| p.get_mut(key)) {
            if s.gone_since.is_none() {
                s.gone_since = Some(Instant::now());
                self.dirty.store(true, Ordering::Release);
            }
        }
    }

    /// After a full read: every key not in `seen` vanished meanwhile.
    pub fn keep_only(&self, seen: &HashSet<String>) {
        let gone: Vec<(String, String)> = self
            .lock()
            .pools
            .iter()
            .flat_map(|(p, s)| s.keys().map(move |k| (k.clone(), p.clone())))
            .filter(|(k, _)| !seen.contains(k))
            .collect();
        for (k, p) in gone {
            self.remove(&k, &p);
        }
    }

    /// The registrations of `pool`, in key order.
    pub fn slots(&self, pool: &str) -> Vec<Slot> {
        self.lock()
            .pools
            .get(pool)
            .map(|s| s.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Should the engine be rebuilt now: a registration changed, or a
    /// grace a build waits for ended? Clears what it reports.
    pub fn due(&self, now: Instant) -> bool {
        let mut inner = self.lock();
        let woke = inner.wake_at.is_some_and(|t| t <= now);
        if woke {
            inner.wake_at = None;
        }
        self.dirty.swap(false, Ordering::AcqRel) | woke
    }

    /// A build wants to look again at `t` (the earliest one wins).
    fn wake_at(&self, t: Instant) {
        let mut inner = self.lock();
        inner.wake_at = Some(inner.wake_at.map_or(t, |w| w.min(t)));
    }

    /// Forget slots that left every pool (a gone key no build keeps).
    fn forget(&self, pool: &str, keys: &HashSet<String>) {
        if let Some(s) = self.lock().pools.get_mut(pool) {
            s.retain(|k, slot| slot.gone_since.is_none() || keys.contains(k));
        }
    }
}

/// What the build of one registry pool needs from the engine it replaces.
pub struct Prev<'a> {
    /// The pool of the same name.
    pub pool: &'a Pool,
    /// That engine's health table.
    pub health: &'a HealthTable,
}

/// Add `reg`'s members to `pool` (its config members come first and win
/// an address both have). Returns (address, key) of each member added.
pub fn extend(
    pool: &mut Pool,
    from: &MembersFrom,
    reg: &Registry,
    prev: Option<Prev<'_>>,
    specs: &mut Vec<CheckSpec>,
    spec_index: &mut HashMap<CheckSpec, u32>,
) -> Vec<(IpAddr, String)> {
    let now = Instant::now();
    let slots = reg.slots(&pool.name);
    // A family with a live registration (or a config member) may lose its
    // vanished ones; one without keeps them: never an empty pool.
    let live = |v6: bool| {
        !pool.family(v6).is_empty()
            || slots
                .iter()
                .any(|s| s.gone_since.is_none() && s.reg.addr.is_ipv6() == v6)
    };
    let live = [live(false), live(true)];
    let mut added = Vec::new();
    let mut kept = HashSet::new();
    for s in slots {
        let (addr, v6) = (s.reg.addr, s.reg.addr.is_ipv6());
        let fam = pool.family(v6);
        if fam.iter().any(|m| m.addr == addr) || fam.len() >= MAX_MEMBERS {
            continue;
        }
        let old = prev.as_ref().and_then(|p| {
            let i = p.pool.family(v6).iter().position(|m| m.addr == addr)?;
            let standing = p.pool.report[v6 as usize]
                .snapshot()
                .get(i)
                .map(|r| r.standing);
            Some((&p.pool.family(v6)[i], standing, p.health))
        });
        let proven =
            old.is_some_and(|(m, _, h)| m.hold != Hold::Unproven || h.state(m.health) == UP);
        let hold = match s.gone_since {
            None if proven => Hold::None,
            None => Hold::Unproven,
            // Never answered: nothing to drain.
            Some(_) if !proven => continue,
            Some(t) if now >= t + from.grace => {
                let ejected = old.is_some_and(|(_, st, _)| st == Some(Standing::Gone));
                if ejected && live[v6 as usize] {
                    continue;
                }
                // Kept by the cap or panic, or the last of its family:
                // look again after another grace.
                reg.wake_at(now + from.grace);
                Hold::Gone
            }
            Some(t) => {
                reg.wake_at(t + from.grace);
                Hold::Gone
            }
        };
        let spec = CheckSpec::new(addr, s.reg.port, Some(from.check.clone()));
        if spec.effective_port().is_none() {
            let mut inner = reg.lock();
            let why = format!(
                "check {:?} is tcp and the registration has no port",
                from.check.name
            );
            Registry::warn_once(&mut inner, &s.key, &format!("{addr}"), &why);
            continue;
        }
        let h = *spec_index.entry(spec.clone()).or_insert_with(|| {
            specs.push(spec);
            (specs.len() - 1) as u32
        });
        let mut m = Member::new(addr, s.reg.weight, h);
        m.hold = hold;
        if v6 {
            pool.v6.push(m);
        } else {
            pool.v4.push(m);
        }
        kept.insert(s.key.clone());
        added.push((addr, s.key));
    }
    reg.forget(&pool.name, &kept);
    pool.seal();
    added
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "fleet")]
    use crate::engine::Engine;

    #[test]
    fn values() {
        let r = parse_value(b"192.0.2.1").unwrap();
        assert_eq!(
            (r.addr.to_string(), r.port, r.weight),
            ("192.0.2.1".into(), None, 1)
        );
        let r = parse_value(b"[2001:db8::1]:8080").unwrap();
        assert_eq!(
            (r.addr.to_string(), r.port),
            ("2001:db8::1".into(), Some(8080))
        );
        let r = parse_value(br#"{"address":"192.0.2.2:81","weight":5}"#).unwrap();
        assert_eq!((r.port, r.weight), (Some(81), 5));
        for bad in [
            &b"192.0.2.300"[..],
            b"192.0.2.1:0",
            b"host:80",
            br#"{"address":"192.0.2.1","weight":0}"#,
            br#"{"address":"192.0.2.1","weight":"x"}"#,
            br#"{"address":"192.0.2.1:80","port":81}"#,
            b"\xff",
        ] {
            assert!(
                parse_value(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// A config beside the bundled example zone: `[fleet]` (unless
    /// `fleet` is false), check `c`, and `pool` as the pool's keys.
    #[cfg(feature = "fleet")]
    fn config(dir: &std::path::Path, fleet: bool, pool: &str) -> std::path::PathBuf {
        let zone = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("zones/example.test.zone");
        let fleet = if fleet {
            "[fleet]\netcd = [\"http://127.0.0.1:2379\"]\nnode = \"a\"\n\n"
        } else {
            ""
        };
        let text = format!(
            "{fleet}[[zone]]\norigin = \"example.test.\"\nfile = {:?}\n\n\
             [check.c]\ntype = \"tcp\"\nport = 80\n\n[pool.web]\n{pool}\n",
            zone.display().to_string()
        );
        std::fs::create_dir_all(dir).unwrap();
        let p = dir.join("meridian.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    #[cfg(feature = "fleet")]
    fn config_errors_name_the_line() {
        let dir = std::env::temp_dir().join(format!("meridian-registry-{}", std::process::id()));
        for (fleet, pool, line, want) in [
            (
                true,
                "members_from = \"etcd\"",
                14,
                "needs the pool's check",
            ),
            (
                false,
                "members_from = \"etcd\"\ncheck = \"c\"",
                10,
                "needs fleet mode",
            ),
            (
                true,
                "members_from = \"consul\"\ncheck = \"c\"",
                14,
                "must be \"etcd\"",
            ),
            (
                true,
                "members_from = \"etcd\"\ncheck = \"c\"\nmembers_grace = \"2d\"",
                16,
                "members_grace must be",
            ),
            (
                true,
                "members = [\"192.0.2.1\"]\nmembers_grace = 5",
                15,
                "members_grace without members_from",
            ),
            (true, "members = []", 13, "is empty"),
        ] {
            let e = match Engine::load(&config(&dir, fleet, pool)) {
                Ok(_) => panic!("{pool} loads"),
                Err(e) => e.to_string(),
            };
            let at = format!("meridian.toml:{line}:");
            assert!(e.contains(&at) && e.contains(want), "{pool}: {e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What each member of `web` holds in `e`, by address.
    #[cfg(feature = "fleet")]
    fn holds(e: &Engine) -> Vec<(String, Hold)> {
        let p = e.pools.iter().find(|p| p.name == "web").unwrap();
        p.v4.iter().map(|m| (m.addr.to_string(), m.hold)).collect()
    }

    #[test]
    #[cfg(feature = "fleet")]
    fn builds_hold_new_and_vanished_members() {
        let dir = std::env::temp_dir().join(format!("meridian-registry-b-{}", std::process::id()));
        let cfg = config(
            &dir,
            true,
            "members_from = \"etcd\"\ncheck = \"c\"\nmembers_grace = 1",
        );
        let e0 = Engine::load(&cfg).unwrap();
        assert!(holds(&e0).is_empty(), "an empty registry pool loads");
        e0.registry.put("/m/members/web/a", "web", b"192.0.2.1");
        e0.registry.put("/m/members/web/b", "web", b"192.0.2.2:81");
        let e1 = Engine::load_with(&cfg, Some(&e0)).unwrap();
        let unproven = vec![
            ("192.0.2.1".into(), Hold::Unproven),
            ("192.0.2.2".into(), Hold::Unproven),
        ];
        assert_eq!(holds(&e1), unproven);
        // a passes its first check; both vanish.
        let a = e1.pools.iter().find(|p| p.name == "web").unwrap().v4[0].health;
        e1.health.set_state(a, UP);
        e1.registry.remove("/m/members/web/a", "web");
        e1.registry.remove("/m/members/web/b", "web");
        let e2 = Engine::load_with(&cfg, Some(&e1)).unwrap();
        // b never answered: it leaves at once; a is gone, ejected, kept.
        assert_eq!(holds(&e2), vec![("192.0.2.1".into(), Hold::Gone)]);
        assert_eq!(
            e2.health
                .state(e2.pools.iter().find(|p| p.name == "web").unwrap().v4[0].health),
            UP,
            "health carried over"
        );
        // Past the grace, the last of its family stays: never empty.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let e3 = Engine::load_with(&cfg, Some(&e2)).unwrap();
        assert_eq!(holds(&e3), vec![("192.0.2.1".into(), Hold::Gone)]);
        // Registered again: proven, so no hold.
        e3.registry.put("/m/members/web/a", "web", b"192.0.2.1");
        let e4 = Engine::load_with(&cfg, Some(&e3)).unwrap();
        assert_eq!(holds(&e4), vec![("192.0.2.1".into(), Hold::None)]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_value_keeps_the_last_good_one() {
        let r = Registry::default();
        r.put("p/members/web/a", "web", b"192.0.2.1");
        assert!(r.due(Instant::now()));
        r.put("p/members/web/a", "web", b"nonsense");
        assert!(!r.due(Instant::now()));
        assert_eq!(r.slots("web")[0].reg.addr.to_string(), "192.0.2.1");
        r.remove("p/members/web/a", "web");
        assert!(r.due(Instant::now()) && r.slots("web")[0].gone_since.is_some());
    }
}
