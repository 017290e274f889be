//! Who the process runs as. Started as root, meridian binds every socket
//! and then switches to `[server] user` (its uid and primary group, no
//! other groups) before it serves a query; as root with no `user` it
//! refuses to start. `allow_root` (or `--allow-root`) keeps root, for tests
//! and containers. Started as another user it keeps that user. Secrets
//! (the API token file, `[fleet]`'s password, CA, certificate and key) are
//! read before the switch; `check_readable` names, after it, every file
//! the user cannot read.

use std::path::Path;

use nix::unistd::{getegid, geteuid, setgid, setgroups, setuid, Gid, Uid, User};

use crate::engine::Engine;

/// The user to switch to after binding, as resolved from the passwd database.
#[derive(Debug, Clone)]
pub struct SwitchUser {
    /// The name in `[server] user`.
    pub name: String,
    /// Its uid.
    pub uid: Uid,
    /// Its primary group.
    pub gid: Gid,
}

/// The message when root is neither dropped nor allowed.
pub const ROOT_REFUSED: &str = "meridian: refusing to run as root. Set `user = \"nobody\"` (or another unprivileged user) in [server] to bind as root and then switch to that user, or set `allow_root = true` in [server] (or pass --allow-root) to keep running as root.";

/// Decide what to do about the user we run as. Returns the user to switch
/// to after binding (None: stay as we are).
pub fn privileges(engine: &Engine, cli_allow_root: bool) -> Result<Option<SwitchUser>, String> {
    let euid = geteuid();
    if !euid.is_root() {
        if let Some(name) = &engine.settings.user {
            // Already unprivileged (e.g. systemd DynamicUser): nothing to switch.
            tracing::info!(
                "not started as root: keeping uid {euid}, `user = {name:?}` not applied"
            );
        }
        return Ok(None);
    }
    // Root is explicitly allowed: stay root (`user` is not applied). The
    // command-line flag overrides the config, as the other flags do.
    if engine.settings.allow_root || cli_allow_root {
        match &engine.settings.user {
            Some(name) => tracing::warn!(
                "running as root: allowed by allow_root / --allow-root, so `user = {name:?}` is not applied"
            ),
            None => tracing::warn!("running as root (allowed by allow_root / --allow-root)"),
        }
        return Ok(None);
    }
    match &engine.settings.user {
        Some(name) => {
            let u = lookup_user(name)?;
            if u.uid.is_root() {
                return Err(format!(
                    "meridian: user {name:?} is root; name an unprivileged user, or use allow_root = true"
                ));
            }
            Ok(Some(u))
        }
        None => Err(ROOT_REFUSED.to_string()),
    }
}

/// Look a user up in the passwd database.
pub fn lookup_user(name: &str) -> Result<SwitchUser, String> {
    match User::from_name(name) {
        Ok(Some(u)) => Ok(SwitchUser {
            name: name.to_string(),
            uid: u.uid,
            gid: u.gid,
        }),
        Ok(None) => Err(format!(
            "meridian: unknown user {name:?} in [server] user (create it, or name another)"
        )),
        Err(e) => Err(format!("meridian: cannot look up user {name:?}: {e}")),
    }
}

/// setgroups (to the primary group alone), setgid, setuid, in that order,
/// then check that root cannot be regained. glibc applies each call to
/// every thread of the process.
pub fn drop_privileges(u: &SwitchUser) -> Result<(), String> {
    let fail = |what: &str, e: nix::Error| {
        format!("meridian: cannot switch to user {:?} ({what}): {e}", u.name)
    };
    setgroups(&[u.gid]).map_err(|e| fail("setgroups", e))?;
    setgid(u.gid).map_err(|e| fail("setgid", e))?;
    setuid(u.uid).map_err(|e| fail("setuid", e))?;
    let regained = setuid(Uid::from_raw(0)).is_ok();
    if regained || geteuid().is_root() || (getegid().as_raw() == 0 && u.gid.as_raw() != 0) {
        return Err(format!(
            "meridian: still privileged after switching to {:?}",
            u.name
        ));
    }
    tracing::info!("switched to user {} (uid {}, gid {})", u.name, u.uid, u.gid);
    Ok(())
}

/// After switching users, what the user cannot read, one warning a file:
/// the files a reload reads (the reload would fail), then the secrets read
/// at start (the API token file, `[fleet]` password, CA, certificate and
/// key: their copy read at start is kept, so a change applies at restart).
pub(super) fn check_readable(engine: &Engine, u: &SwitchUser) -> Vec<String> {
    let mut files: Vec<&Path> = vec![&engine.config_path];
    if let Some(g) = &engine.geo_path {
        files.push(g);
    }
    for z in &engine.zones {
        for f in z.sources.iter().map(|s| s.path.as_path()) {
            if !files.contains(&f) {
                files.push(f);
            }
        }
    }
    let mut out = Vec::new();
    for f in files {
        if let Err(e) = std::fs::File::open(f) {
            out.push(format!(
                "meridian: after switching to user {:?}, {} cannot be read ({e}); reloads would fail. Make it (and its folders) readable by that user.",
                u.name,
                f.display()
            ));
        }
    }
    for (what, f) in secrets(engine) {
        if let Err(e) = std::fs::File::open(f) {
            out.push(format!(
                "meridian: after switching to user {:?}, {what} {} cannot be read ({e}); the copy read at start is used, and a change to it applies only at restart. To change it on reload, make it readable by that user (e.g. its group, mode 640).",
                u.name,
                f.display()
            ));
        }
    }
    out
}

/// The secret files read at start: the API token file and `[fleet]`'s.
fn secrets(engine: &Engine) -> Vec<(&'static str, &Path)> {
    let mut v: Vec<(&'static str, &Path)> = Vec::new();
    if let Some(t) = &engine.api.token_file {
        v.push(("the API token file", t));
    }
    if let Some(f) = &engine.fleet {
        if let Some((_, pw)) = &f.user {
            v.push(("[fleet] password_file", pw));
        }
        if let Some(t) = &f.tls {
            if let Some(ca) = &t.ca {
                v.push(("[fleet] ca", ca));
            }
            if let Some((cert, key)) = &t.identity {
                v.push(("[fleet] cert", cert));
                v.push(("[fleet] key", key));
            }
        }
    }
    v
}
