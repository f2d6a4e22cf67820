//! URLs: secrets kept out of logs, errors and stored messages, and whether a Redis URL
//! names this machine.

/// Query parameters whose values are secrets: matched case-insensitively, whole or as a
/// part of the name (`db_password`, `x-api-key`, `access_token`).
const SECRET_PARAMS: &[&str] = &[
    "pass",
    "pwd",
    "password",
    "secret",
    "token",
    "key",
    "auth",
    "credential",
    "signature",
    "sig",
];

/// Whether a query parameter named `name` carries a secret.
fn secret_param(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_PARAMS.iter().any(|p| name.contains(p))
}

/// The URL with its secrets replaced by `***`, safe for logs, errors and anything stored:
/// the userinfo's password (or a lone user name, which Redis URLs use for a token) and
/// the values of password-like query parameters (`pass`, `password`, `token`, `secret`, `key`, ...). Any URL: Redis,
/// `redis+unix://…?pass=`, a handler's `http://user:pass@host/?api_key=`. A URL that does
/// not parse is redacted by its shape: everything between `://` and the last `@` goes,
/// and so do the secret parameters' values.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) if u.has_host() || u.scheme().contains("unix") || !u.username().is_empty() => {
            redact_parsed(url, u)
        }
        _ => redact_shape(url),
    }
}

fn redact_parsed(original: &str, mut u: url::Url) -> String {
    let mut changed = false;
    if u.password().is_some() {
        changed |= u.set_password(Some("***")).is_ok();
    } else if !u.username().is_empty() {
        changed |= u.set_username("***").is_ok();
    }
    if u.query().is_some() {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        if pairs.iter().any(|(k, _)| secret_param(k)) {
            changed = true;
            let query = redact_query(u.query().unwrap_or(""));
            u.set_query(Some(&query));
        }
    }
    if !changed {
        return original.to_owned();
    }
    // `set_password` percent-encodes the stars.
    u.to_string().replace("%2A%2A%2A", "***")
}

/// `a=1&api_key=x` -> `a=1&api_key=***`, by the raw text (no re-encoding).
fn redact_query(q: &str) -> String {
    q.split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if secret_param(&percent_decoded(k)) => format!("{k}=***"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn percent_decoded(s: &str) -> String {
    url::form_urlencoded::parse(format!("k={s}").as_bytes())
        .next()
        .map_or_else(|| s.to_owned(), |(_, v)| v.into_owned())
}

/// For a URL the parser refuses (a password holding `/`, `#` or `?`, say): keep the
/// scheme, drop everything up to the last `@`, redact the secret parameters.
fn redact_shape(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let rest = match rest.rfind('@') {
        Some(at) => format!("***@{}", &rest[at + 1..]),
        None => rest.to_owned(),
    };
    let rest = match rest.split_once('?') {
        Some((before, q)) => format!("{before}?{}", redact_query(q)),
        None => rest,
    };
    format!("{}://{rest}", &url[..scheme_end])
}

/// `text` (an error message about `url`) with `url` and each of its secrets replaced:
/// for messages of libraries that quote a URL, or part of one, as they got it.
pub fn redact_in(text: &str, url: &str) -> String {
    let mut out = text.replace(url, &redact_url(url));
    for secret in secrets(url) {
        out = out.replace(&secret, "***");
    }
    out
}

/// The secret pieces of `url`, as written: the userinfo and its password part, and the
/// secret parameters' values (longest first, so no part of one is left).
fn secrets(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(scheme_end) = url.find("://") {
        let rest = &url[scheme_end + 3..];
        let auth_end = rest.find('?').unwrap_or(rest.len());
        if let Some(at) = rest[..auth_end].rfind('@') {
            let userinfo = &rest[..at];
            found.push(userinfo.to_owned());
            if let Some((_, pw)) = userinfo.split_once(':') {
                found.push(pw.to_owned());
            }
        }
        if let Some((_, q)) = rest.split_once('?') {
            for pair in q.split(['&', '#']) {
                if let Some((k, v)) = pair.split_once('=')
                    && secret_param(&percent_decoded(k))
                {
                    found.push(v.to_owned());
                    found.push(percent_decoded(v));
                }
            }
        }
    }
    found.retain(|s| s.len() >= 3);
    found.sort_by_key(|s| std::cmp::Reverse(s.len()));
    found
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
    use super::{on_this_machine, redact_in, redact_url};

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact_url("redis://:secret@h:6379/0"), "redis://:***@h:6379/0");
        assert_eq!(redact_url("rediss://user:pw@h/1"), "rediss://user:***@h/1");
        assert_eq!(redact_url("redis://token@h"), "redis://***@h");
        assert_eq!(redact_url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact_url("http://h:8080/email"), "http://h:8080/email");
    }

    #[test]
    fn every_form_of_secret_is_redacted() {
        let cases = [
            // base64 with '/' and '+': the parser refuses it, the shape does not.
            (
                "redis://:ab/cd+ef==@h:6379/0",
                "ab/cd+ef==",
                "redis://***@h:6379/0",
            ),
            ("redis://weir:a/b#c?d@h:6379", "a/b#c?d", "redis://***@h:6379"),
            (
                "redis+unix:///run/redis.sock?db=2&pass=s3cretpw",
                "s3cretpw",
                "redis+unix:///run/redis.sock?db=2&pass=***",
            ),
            (
                "unix:///run/redis.sock?password=s3cretpw",
                "s3cretpw",
                "unix:///run/redis.sock?password=***",
            ),
            (
                "http://bob:hunter2pw@127.0.0.1:9/hook?api_key=K3yK3y&x=1",
                "hunter2pw",
                "http://bob:***@127.0.0.1:9/hook?api_key=***&x=1",
            ),
            (
                "https://h/p?access_token=T0kenT0ken",
                "T0kenT0ken",
                "https://h/p?access_token=***",
            ),
            (
                "http://h/p?Secret=abcdef&SIG=zzzz",
                "abcdef",
                "http://h/p?Secret=***&SIG=***",
            ),
        ];
        for (url, secret, want) in cases {
            let got = redact_url(url);
            assert_eq!(got, want, "{url}");
            assert!(!got.contains(secret), "{got}");
        }
        assert!(!redact_url("http://h/p?api_key=K3yK3y").contains("K3yK3y"));
    }

    #[test]
    fn secrets_quoted_in_messages_are_redacted() {
        let url = "redis://:ab/cd+ef==@h:6379/0";
        let msg = format!("Redis URL did not parse - {url} (password ab/cd+ef==, part cd+ef==@h)");
        let got = redact_in(&msg, url);
        assert!(!got.contains("ab/cd+ef=="), "{got}");
        let url = "http://u:pw1234@h/x?api_key=K3yK3y";
        let got = redact_in(
            "error sending request for url (http://u:pw1234@h/x?api_key=K3yK3y)",
            url,
        );
        assert!(!got.contains("pw1234") && !got.contains("K3yK3y"), "{got}");
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
