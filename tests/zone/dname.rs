//! DNAME (RFC 6672) is not implemented, so it is refused at load in any
//! form, RFC 3597 `\#` included, with the file and line: served as plain
//! data it would answer NXDOMAIN for every name below it.

use crate::common::*;

fn setup(record: &str) -> (TempDir, std::path::PathBuf) {
    let dir = TempDir::new("dname");
    dir.write(
        "d.test.zone",
        &format!(
            "$ORIGIN d.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 7200 1800 1209600 300\n\
             @ IN NS ns1\nns1 IN A 192.0.2.53\n{record}\n"
        ),
    );
    let cfg = dir.write(
        "d.toml",
        "[server]\nlisten = [\"127.0.0.1:5380\"]\n\n[[zone]]\norigin = \"d.test.\"\nfile = \"d.test.zone\"\n",
    );
    (dir, cfg)
}

#[test]
fn dname_is_refused_at_load_in_every_form() {
    // old.d.test DNAME new.d.test: text form, and RFC 3597 form (type 39,
    // "new.d.test." in wire form, 12 octets).
    for record in [
        "old IN DNAME new",
        "old IN DNAME \\# 12 036e6577 01640474657374 00",
        "old IN TYPE39 \\# 12 036e657701640474657374 00",
    ] {
        let (_dir, cfg) = setup(record);
        let (code, out, err) = run(&["check", "--config", cfg.to_str().unwrap()]);
        assert_eq!(code, 1, "{record}: check passed\n{out}\n{err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.contains("d.test.zone:6") && first.contains("DNAME is not supported"),
            "{record}: {err}"
        );
        assert!(
            !first.contains("\\#"),
            "no advice to use the \\# form: {first}"
        );
    }
}
