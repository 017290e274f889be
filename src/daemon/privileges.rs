//! Who the process runs as. Started as root, meridian binds every socket
//! and then switches to `[server] user` (its uid and primary group, no
//! other groups) before it serves a query; as root with no `user` it
//! refuses to start. `allow_root` (or `--allow-root`) keeps root, for tests
//! and containers. Started as another user it keeps that user.

use std::path::Path;

use crate::engine::Engine;

/// The user to switch to after binding, as resolved from the passwd database.
#[derive(Debug, Clone)]
pub struct SwitchUser {
    pub name: String,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
}

/// The message when root is neither dropped nor allowed.
pub const ROOT_REFUSED: &str = "meridian: refusing to run as root. Set `user = \"nobody\"` (or another unprivileged user) in [server] to bind as root and then switch to that user, or set `allow_root = true` in [server] (or pass --allow-root) to keep running as root.";

/// Decide what to do about the user we run as. Returns the user to switch
/// to after binding (None: stay as we are).
pub fn privileges(engine: &Engine, cli_allow_root: bool) -> Result<Option<SwitchUser>, String> {
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
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
            if u.uid == 0 {
                return Err(format!(
                    "meridian: user {name:?} is root; name an unprivileged user, or use allow_root = true"
                ));
            }
            Ok(Some(u))
        }
        None => Err(ROOT_REFUSED.to_string()),
    }
}

/// Look a user up in the passwd database (getpwnam_r).
pub fn lookup_user(name: &str) -> Result<SwitchUser, String> {
    let cname =
        std::ffi::CString::new(name).map_err(|_| format!("meridian: bad user name {name:?}"))?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut res: *mut libc::passwd = std::ptr::null_mut();
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut res,
        )
    };
    if rc != 0 || res.is_null() {
        return Err(format!(
            "meridian: unknown user {name:?} in [server] user (create it, or name another)"
        ));
    }
    Ok(SwitchUser {
        name: name.to_string(),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    })
}

/// setgroups, setgid, setuid, in that order, then check that root cannot be
/// regained. glibc applies each call to every thread of the process.
pub fn drop_privileges(u: &SwitchUser) -> Result<(), String> {
    let fail = |what: &str| {
        format!(
            "meridian: cannot switch to user {:?} ({what}): {}",
            u.name,
            std::io::Error::last_os_error()
        )
    };
    unsafe {
        if libc::setgroups(1, &u.gid) != 0 {
            return Err(fail("setgroups"));
        }
        if libc::setgid(u.gid) != 0 {
            return Err(fail("setgid"));
        }
        if libc::setuid(u.uid) != 0 {
            return Err(fail("setuid"));
        }
        if libc::setuid(0) == 0 || libc::geteuid() == 0 || libc::getegid() == 0 && u.gid != 0 {
            return Err(format!(
                "meridian: still privileged after switching to {:?}",
                u.name
            ));
        }
    }
    tracing::info!("switched to user {} (uid {}, gid {})", u.name, u.uid, u.gid);
    Ok(())
}

/// After switching users, the files a reload reads should still be readable.
pub(super) fn check_readable(engine: &Engine, u: &SwitchUser) -> Result<(), String> {
    let mut files: Vec<&Path> = vec![&engine.config_path];
    if let Some(g) = &engine.geo_path {
        files.push(g);
    }
    for z in &engine.zones {
        for n in &z.nodes {
            for (_, f, _) in &n.origins {
                if !files.contains(&f.as_path()) {
                    files.push(f);
                }
            }
        }
    }
    for f in files {
        if let Err(e) = std::fs::File::open(f) {
            return Err(format!(
                "meridian: after switching to user {:?}, {} cannot be read ({e}); reloads would fail. Make it (and its folders) readable by that user.",
                u.name,
                f.display()
            ));
        }
    }
    Ok(())
}
