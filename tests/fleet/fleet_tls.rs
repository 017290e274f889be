//! A fleet on an etcd that wants TLS client certificates (#18 item 6):
//! with `ca`, `cert` and `key` a node follows etcd over https and shares
//! its writes; without its certificate it never gets in and says so,
//! while still answering DNS. Why, in `/status` and in `fleet status`
//! (#26 item 5): a client certificate is required; and a node trusting
//! another CA says etcd's certificate is from an unknown CA.
//! Certificates are made per run with openssl.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::fleet_support::{
    connected, fleet_ready, shared_but_not_with, wait_fleet_error, within, Node,
};

fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, and a certificate signed by it for `name` with `ext` extensions.
fn cert(dir: &std::path::Path, name: &str, ext: &str) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={name}"),
        ],
    );
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &format!("{name}.pem"),
            "-days",
            "1",
            "-extfile",
            &format!("{name}.ext"),
        ],
    );
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn tls_client_certificates_to_etcd() {
    if !fleet_ready("tls_client_certificates_to_etcd") {
        return;
    }
    if Command::new("openssl").arg("version").output().is_err() {
        crate::common::skip(
            "tls_client_certificates_to_etcd",
            "openssl is not installed",
        );
        return;
    }
    let dir = crate::common::TempDir::new("fleet-tls");
    let d = &dir.0;
    openssl(
        d,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "1",
            "-subj",
            "/CN=meridian-test-ca",
        ],
    );
    cert(
        d,
        "etcd",
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
    );
    cert(d, "node", "extendedKeyUsage=clientAuth\n");
    let (cp, pp) = (crate::common::free_port(), crate::common::free_port());
    let client = format!("https://127.0.0.1:{cp}");
    let peer = format!("http://127.0.0.1:{pp}");
    let _etcd = Killed(
        Command::new("etcd")
            .current_dir(d)
            .args(["--name", "e0", "--data-dir", "data"])
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("e0={peer}")])
            .args(["--cert-file", "etcd.pem", "--key-file", "etcd.key"])
            .args(["--client-cert-auth", "--trusted-ca-file", "ca.pem"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start etcd"),
    );
    let eps = vec![client.clone()];
    let with_cert = format!(
        "ca = \"{0}/ca.pem\"\ncert = \"{0}/node.pem\"\nkey = \"{0}/node.key\"\n",
        d.display()
    );
    let without = format!("ca = \"{}/ca.pem\"\n", d.display());
    let a = Node::start_with("a", &eps, &with_cert, "");
    let b = Node::start_with("b", &eps, &with_cert, "");
    let x = Node::start_with("x", &eps, &without, "");
    for n in [&a, &b] {
        assert!(
            within(Duration::from_secs(15), || connected(n) == Some(true)).is_some(),
            "{:?}",
            n.server.stderr.lock().unwrap()
        );
    }
    shared_but_not_with(&a, &b, &x);
    let err = wait_fleet_error(&x, "client certificate", Duration::from_secs(5));
    assert!(
        err.contains("etcd requires a client certificate"),
        "/status fleet.error: {err:?}"
    );
    let (code, _, stderr) =
        crate::common::run(&["fleet", "status", "--config", x.config.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("etcd requires a client certificate"),
        "{stderr}"
    );
    // A node that trusts another CA: etcd's certificate is not signed by it.
    openssl(
        d,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "other.key",
            "-out",
            "other.pem",
            "-days",
            "1",
            "-subj",
            "/CN=another-ca",
        ],
    );
    let other_ca = format!(
        "ca = \"{0}/other.pem\"\ncert = \"{0}/node.pem\"\nkey = \"{0}/node.key\"\n",
        d.display()
    );
    let y = Node::start_with("y", &eps, &other_ca, "");
    let err = wait_fleet_error(&y, "unknown CA", Duration::from_secs(5));
    assert!(
        err.contains("not signed by the CA in ca") && err.contains("other.pem"),
        "/status fleet.error: {err:?}"
    );
    assert_eq!(connected(&y), Some(false));
}
