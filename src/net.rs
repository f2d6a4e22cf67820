//! What weir's HTTP endpoints (the metrics endpoint, the UI) share: the Host check that
//! keeps a page of another site, rebinding its name to 127.0.0.1, from reading an
//! endpoint bound to loopback.

/// Whether a `Host` header names this machine: `localhost`, `127.x.x.x` or `[::1]`, with
/// or without a port.
pub fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::loopback_host;

    #[test]
    fn loopback_names_with_and_without_ports() {
        for ok in [
            "localhost:9465",
            "127.0.0.1:9465",
            "[::1]:9465",
            "127.0.0.2",
            "LOCALHOST",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in ["evil.example:9465", "10.0.0.1:9465", "localhost.evil.example", ""] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }
}
