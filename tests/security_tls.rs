//! TLS: weir against a redis-server that speaks only TLS on loopback, with certificates
//! this test generates (a CA, a server certificate for 127.0.0.1 and localhost, a client
//! certificate). `rediss://` with `--tls-ca` works; without the CA the server is not
//! trusted; with `tls-auth-clients yes` a client certificate is required and accepted.

mod common;
mod faults;

use faults::run_weir;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair,
};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // Distinct subjects: with rcgen's default one everywhere, OpenSSL takes a leaf for
        // a self-signed certificate and refuses it.
        ca.distinguished_name = subject("weir test CA");
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose, name: &str| {
            let mut p = CertificateParams::new(names).unwrap();
            p.extended_key_usages.push(usage);
            p.distinguished_name = subject(name);
            let key = KeyPair::generate().unwrap();
            let cert = p.signed_by(&key, &issuer).unwrap();
            std::fs::write(dir.path().join(format!("{name}.pem")), cert.pem()).unwrap();
            std::fs::write(dir.path().join(format!("{name}.key")), key.serialize_pem()).unwrap();
        };
        leaf(
            vec!["127.0.0.1".into(), "localhost".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
            "server",
        );
        leaf(
            vec!["weir-client".into()],
            ExtendedKeyUsagePurpose::ClientAuth,
            "client",
        );
        std::fs::write(dir.path().join("ca.pem"), ca_cert.pem()).unwrap();
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn subject(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

/// A TLS-only redis-server on loopback, killed (by PID) on drop.
struct TlsRedis {
    child: Child,
    port: u16,
}

impl TlsRedis {
    fn start(pki: &Pki, auth_clients: &str) -> Self {
        let port = common::free_port();
        let p = |n: &str| pki.path(n).to_string_lossy().into_owned();
        let child = Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args([
                "--tls-cert-file",
                &p("server.pem"),
                "--tls-key-file",
                &p("server.key"),
            ])
            .args([
                "--tls-ca-cert-file",
                &p("ca.pem"),
                "--tls-auth-clients",
                auth_clients,
            ])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(pki.dir.path())
            .args(["--logfile", "redis.log"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server");
        let mut server = Self { child, port };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                server.child.try_wait().unwrap().is_none(),
                "redis-server exited (TLS build?)"
            );
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.port)
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn weir(url: &str, tls: &[&str], args: &[&str], input: Option<&[u8]>) -> (i32, String, String) {
    let mut all = args.to_vec();
    all.extend(["--redis-url", url, "-q", "tls"]);
    all.extend(tls);
    run_weir(&all, input, T)
}

/// enqueue → work --drain → stats, all over TLS with `tls` options.
fn round_trip(url: &str, tls: &[&str]) {
    let lines: String = (0..100)
        .map(|i| format!("{{\"kind\":\"a\",\"payload\":{i}}}\n"))
        .collect();
    let (code, out, err) = weir(url, tls, &["enqueue"], Some(lines.as_bytes()));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("enqueued 100 jobs"), "{out}");
    let (code, out, err) = weir(
        url,
        tls,
        &["work", "--handler", "noop", "--drain", "--no-metrics"],
        None,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("100 acked"), "{out}");
    let (code, out, err) = weir(url, tls, &["stats"], None);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("acked") && out.contains("100"), "{out}");
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn rediss_with_a_ca_file() {
    let pki = Pki::new();
    let redis = TlsRedis::start(&pki, "no");
    let ca = pki.path("ca.pem");
    round_trip(&redis.url(), &["--tls-ca", s(&ca)]);
    // Without the CA the server's certificate is not trusted: a clear failure.
    let (code, _, err) = weir(&redis.url(), &[], &["stats"], None);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("error: cannot reach Redis at rediss://127.0.0.1"),
        "{err}"
    );
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    // Plain redis:// to a TLS port fails too, it does not hang.
    let plain = redis.url().replace("rediss://", "redis://");
    let (code, _, err) = weir(&plain, &[], &["stats"], None);
    assert_eq!(code, 1, "{err}");
}

#[test]
fn rediss_with_a_client_certificate() {
    let pki = Pki::new();
    let redis = TlsRedis::start(&pki, "yes");
    let (ca, cert, key) = (pki.path("ca.pem"), pki.path("client.pem"), pki.path("client.key"));
    round_trip(
        &redis.url(),
        &["--tls-ca", s(&ca), "--tls-cert", s(&cert), "--tls-key", s(&key)],
    );
    // The server requires a client certificate: without one, a clear failure.
    let (code, _, err) = weir(&redis.url(), &["--tls-ca", s(&ca)], &["stats"], None);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("error: cannot reach Redis at rediss://127.0.0.1"),
        "{err}"
    );
    println!("TLS: rediss:// with CA file and with client certificate OK; without either refused");
}
