//! URLs of Redis: passwords kept out of logs and errors, and whether one names this machine.

/// The URL with any password replaced by `***`, safe for logs and errors.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let auth_end = rest.find('/').unwrap_or(rest.len());
    match rest[..auth_end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split(':').next().unwrap_or("");
            let user = if rest[..at].contains(':') {
                format!("{user}:***")
            } else {
                "***".to_owned()
            };
            format!("{}://{user}@{}", &url[..scheme_end], &rest[at + 1..])
        }
        None => url.to_owned(),
    }
}

/// Whether `url` names this machine: a loopback address (`localhost`, `127.0.0.0/8`,
/// `::1`) or a Unix socket. A URL that does not parse does not.
pub(crate) fn on_this_machine(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(host, _) | redis::ConnectionAddr::TcpTls { host, .. } => is_loopback(host),
        redis::ConnectionAddr::Unix(_) => true,
        _ => false,
    }
}

/// A host name or address that is this machine: `localhost` or a loopback address.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::{on_this_machine, redact_url};

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact_url("redis://:secret@h:6379/0"), "redis://:***@h:6379/0");
        assert_eq!(redact_url("rediss://user:pw@h/1"), "rediss://user:***@h/1");
        assert_eq!(redact_url("redis://token@h"), "redis://***@h");
        assert_eq!(redact_url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }

    #[test]
    fn loopback_and_socket_urls_are_on_this_machine() {
        for url in [
            "redis://127.0.0.1:6379",
            "redis://localhost",
            "redis://LOCALHOST:7000/2",
            "redis://[::1]:6379",
            "redis://127.3.2.1:1",
            "redis+unix:///tmp/redis.sock",
            "unix:///var/run/redis.sock",
        ] {
            assert!(on_this_machine(url), "{url}");
        }
        for url in [
            "redis://10.0.0.5:7000",
            "redis://cache.internal:6379",
            "not a url",
        ] {
            assert!(!on_this_machine(url), "{url}");
        }
    }
}
