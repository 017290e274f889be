//! `GET /members/POOL` (#31): each member of a pool, where it came from
//! (the config, or its etcd registration key), its hold, checks and
//! standing, for `meridian ctl members POOL`.

use hyper::StatusCode;

use super::{error, json, Admin, Reply};
use crate::pool::{Hold, Standing};

/// The reply for `pool` (its name, percent-decoded by the caller).
pub(crate) fn members(admin: &Admin, pool: &str) -> Reply {
    let e = admin.server.engine.load_full();
    admin.weights.catch_up(&e);
    let Some(p) = e.pools.iter().find(|p| p.name == pool) else {
        return error(StatusCode::NOT_FOUND, format!("no pool {pool:?}"));
    };
    let mut list = Vec::new();
    for v6 in [false, true] {
        let report = p.report[v6 as usize].snapshot();
        for (i, m) in p.family(v6).iter().enumerate() {
            let key = e.registered.get(&(p.name.clone(), m.addr));
            let spec = &e.checks[m.health as usize];
            list.push(serde_json::json!({
                "address": m.addr,
                "port": spec.effective_port(),
                "weight": m.weight,
                "source": key.map_or("config", |_| "etcd"),
                "key": key,
                // Proven by a pass since the build that added it: what
                // the filter decided, not the hold the build set.
                "hold": match (m.hold, report.get(i).map(|r| r.standing)) {
                    (Hold::Gone, _) => "gone",
                    (_, Some(Standing::Unproven)) => "unproven",
                    _ => "none",
                },
                "health": crate::health::state_name(e.health.state(m.health)),
                "standing": report.get(i).map(|r| r.standing.name()),
            }));
        }
    }
    json(
        StatusCode::OK,
        &serde_json::json!({ "pool": p.name, "members": list }),
    )
}
