//! The registry-churn scenario (#31 item 5) at a reduced scale: the
//! direction of each result that must hold, read from the summary the run
//! wrote, never from constants.

use std::collections::HashMap;
use std::process::Command;

#[test]
fn registry_rule_bounds_a_mass_expiry() {
    let dir = std::env::temp_dir().join(format!("meridian-sim-registry-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_meridian-sim"))
        .args(["registry-churn", "--resolvers", "500", "--out"])
        .arg(&dir)
        .output()
        .expect("run meridian-sim");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.join("registry-churn-summary.csv")).unwrap();
    let s: HashMap<(String, String), f64> = text
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            ((f[0].to_string(), f[1].to_string()), f[2].parse().unwrap())
        })
        .collect();
    let get = |v: &str, m: &str| s[&(v.to_string(), m.to_string())];
    let bad = "bad while vanished %";
    for n in ["7 of 10", "10 of 10"] {
        let none = get(&format!("{n} vanish: no rule"), bad);
        let panic = get(&format!("{n}: panic_below = 0.5"), bad);
        assert!(
            none > 50.0 && panic < 1.0,
            "{n}: no rule {none} %, panic {panic} %"
        );
        let usable = get(&format!("{n}: panic_below = 0.5"), "min usable members");
        assert_eq!(usable, 10.0, "{n}: panic keeps every member");
    }
    // All gone and no registration left: the cap's members never leave.
    assert_eq!(
        get("10 of 10: max_ejected = 0.2", "min usable members"),
        8.0
    );
    assert!(get("10 of 10: max_ejected = 0.2", bad) < 1.0);
    // Some left: the cap only slows the drain (one cap's worth a grace).
    assert!(get("7 of 10: max_ejected = 0.2", bad) < get("7 of 10 vanish: no rule", bad));
    let _ = std::fs::remove_dir_all(&dir);
}
