//! The revisions a node wrote under its state dir (`rev-N/`): only the
//! last `keep_revisions` stay, and never the one it serves.

use super::*;

/// Delete the `rev-N` directories under `settings.state_dir` but the
/// `keep_revisions` highest and `serving_rev`'s; how many went. Other
/// entries are left alone.
pub(super) fn prune_state_dir(settings: &FleetSettings, serving_rev: i64) -> Result<usize, String> {
    let dir = &settings.state_dir;
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mut revs: Vec<(i64, std::path::PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name();
            let n = name.to_str()?.strip_prefix("rev-")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    revs.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut gone = 0;
    for (n, path) in revs.iter().skip(settings.keep_revisions) {
        if *n == serving_rev {
            continue;
        }
        std::fs::remove_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))?;
        gone += 1;
    }
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &std::path::Path, keep: usize) -> FleetSettings {
        FleetSettings {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            node: "a".into(),
            prefix: "/m/".into(),
            tls: None,
            user: None,
            timeout: Duration::from_secs(1),
            state_dir: dir.to_path_buf(),
            local_config: dir.join("meridian.toml"),
            checkers: 3,
            grace: Duration::from_secs(10),
            lease_secs: 5,
            keep_revisions: keep,
            compact_history: true,
        }
    }

    fn listing(dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// The last K stay, and the one served even when older; files and
    /// other directories are not touched.
    #[test]
    fn keeps_the_last_k_and_the_served_one() {
        let dir = std::env::temp_dir().join(format!("meridian-state-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for n in [7, 12, 30, 101, 250] {
            let d = dir.join(format!("rev-{n}"));
            std::fs::create_dir_all(d.join("zones")).unwrap();
            std::fs::write(d.join("meridian.toml"), "x").unwrap();
        }
        std::fs::create_dir_all(dir.join("other")).unwrap();
        std::fs::write(dir.join("rev-1"), "a file, not a revision").unwrap();
        let s = settings(&dir, 2);
        assert_eq!(prune_state_dir(&s, 12), Ok(2));
        assert_eq!(
            listing(&dir),
            ["other", "rev-1", "rev-101", "rev-12", "rev-250"]
        );
        // Serving the newest: the one kept for serving goes too.
        assert_eq!(prune_state_dir(&s, 250), Ok(1));
        assert_eq!(listing(&dir), ["other", "rev-1", "rev-101", "rev-250"]);
        assert_eq!(prune_state_dir(&s, 250), Ok(0));
        std::fs::remove_dir_all(&dir).unwrap();
        // No state dir yet: nothing to do.
        assert_eq!(prune_state_dir(&s, 1), Ok(0));
    }
}
