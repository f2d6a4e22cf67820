//! Extra request headers for the HTTP handler, and the one type that keeps secrets out
//! of logs, errors and `Debug` output ([`Secret`]).
//!
//! A header is given as `Name: value`, where the value may name environment variables
//! (`$VAR` or `${VAR}`; `$$` is a literal `$`), so a token stays out of the command
//! line and the shell history: `--header 'Authorization: Bearer $TOKEN'` (single quotes:
//! the shell leaves `$TOKEN` alone, weir reads it). A value that took anything from the
//! environment is secret, and so is every value of `Authorization`,
//! `Proxy-Authorization` and `Cookie`: it shows as `<redacted>` and is sent marked
//! sensitive (never put in an HTTP/2 compression table).

use crate::error::HttpError;
use reqwest::header::{HeaderName, HeaderValue};

/// A value that never shows: its `Debug` prints `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret read from the environment variable `var`: an error (naming the
    /// variable, never a value) if it is unset, empty or not UTF-8.
    pub fn from_env(var: &str) -> Result<Self, HttpError> {
        env_value(var, &|v: &str| std::env::var(v).ok()).map(Self)
    }

    /// The value itself, for the code that sends it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The signature header's name (lowercase, as HTTP/2 sends it): see `sign.rs`.
pub const SIGNATURE_HEADER: &str = "x-weir-signature";

/// Headers weir sets itself; a configured header may not replace them.
const RESERVED: &[&str] = &[
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
    "idempotency-key",
    SIGNATURE_HEADER,
];

/// Headers whose values are always treated as secret.
const ALWAYS_SECRET: &[&str] = &["authorization", "proxy-authorization", "cookie"];

/// One extra header sent with every request.
#[derive(Clone)]
pub struct HttpHeader {
    name: HeaderName,
    value: HeaderValue,
}

impl HttpHeader {
    /// A header with a literal `value` (secret if the name says so: `Authorization`,
    /// `Proxy-Authorization`, `Cookie`).
    pub fn new(name: &str, value: &str) -> Result<Self, HttpError> {
        Self::build(name, value, false)
    }

    /// A header whose value is secret whatever its name.
    pub fn secret(name: &str, value: Secret) -> Result<Self, HttpError> {
        Self::build(name, value.expose(), true)
    }

    /// Parses `Name: value`, expanding `$VAR` and `${VAR}` from the environment (`$$` is
    /// a literal `$`). A value that used a variable is secret.
    pub fn parse(spec: &str) -> Result<Self, HttpError> {
        Self::parse_with(spec, |v| std::env::var(v).ok())
    }

    /// [`HttpHeader::parse`] reading variables through `lookup`.
    pub fn parse_with(spec: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, HttpError> {
        let Some((name, value)) = spec.split_once(':') else {
            return Err(HttpError::Header {
                name: spec.chars().take(64).collect(),
                reason: "write it as 'Name: value'".into(),
            });
        };
        let (name, value) = (name.trim(), value.trim());
        let (value, from_env) = expand(value, &lookup).map_err(|reason| HttpError::Header {
            name: name.to_owned(),
            reason,
        })?;
        Self::build(name, &value, from_env)
    }

    fn build(name: &str, value: &str, secret: bool) -> Result<Self, HttpError> {
        let bad = |reason: &str| HttpError::Header {
            name: name.chars().take(64).collect(),
            reason: reason.into(),
        };
        let parsed = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("not a valid header name"))?;
        if RESERVED.contains(&parsed.as_str()) {
            return Err(bad("weir sets this header itself"));
        }
        // The error says nothing of the value: it may be a secret.
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| bad("the value has characters a header cannot carry"))?;
        value.set_sensitive(secret || ALWAYS_SECRET.contains(&parsed.as_str()));
        Ok(Self { name: parsed, value })
    }

    /// The header's name (lowercase).
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// Whether the value is secret (shown as `<redacted>`).
    pub fn is_secret(&self) -> bool {
        self.value.is_sensitive()
    }

    pub(crate) fn pair(&self) -> (&HeaderName, &HeaderValue) {
        (&self.name, &self.value)
    }
}

impl std::fmt::Debug for HttpHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.value.to_str() {
            Ok(v) if !self.is_secret() => write!(f, "{}: {v}", self.name),
            _ => write!(f, "{}: <redacted>", self.name),
        }
    }
}

/// The value of environment variable `var`, or an error naming it.
fn env_value(var: &str, lookup: &impl Fn(&str) -> Option<String>) -> Result<String, HttpError> {
    match lookup(var) {
        Some(v) if !v.is_empty() => Ok(v),
        Some(_) => Err(HttpError::Env(format!("environment variable {var} is empty"))),
        None => Err(HttpError::Env(format!(
            "environment variable {var} is not set (or not UTF-8)"
        ))),
    }
}

/// Expands `$VAR`, `${VAR}` and `$$` in `s`; returns the text and whether a variable
/// was used. An unset or empty variable is an error naming it.
fn expand(s: &str, lookup: &impl Fn(&str) -> Option<String>) -> Result<(String, bool), String> {
    let is_var = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let (mut out, mut used, mut rest) = (String::new(), false, s);
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (var, next) = if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
            continue;
        } else if let Some(r) = after.strip_prefix('{') {
            let end = r.find('}').ok_or("an unclosed ${ in the value")?;
            (&r[..end], &r[end + 1..])
        } else {
            let end = after.find(|c| !is_var(c)).unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        if var.is_empty() || !var.chars().all(is_var) {
            return Err("a $ not followed by a variable name (write $$ for a literal $)".into());
        }
        out.push_str(&env_value(var, lookup).map_err(|e| e.to_string())?);
        used = true;
        rest = next;
    }
    out.push_str(rest);
    Ok((out, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(v: &str) -> Option<String> {
        match v {
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_expand_and_make_the_value_secret() {
        let h = HttpHeader::parse_with("X-Api: Bearer $TOKEN", env).unwrap();
        assert_eq!(h.pair().1, "Bearer s3cret");
        assert!(h.is_secret());
        assert_eq!(format!("{h:?}"), "x-api: <redacted>");
        let h = HttpHeader::parse_with("X-Api: a${TOKEN}b $$5", env).unwrap();
        assert_eq!(h.pair().1, "as3cretb $5");
        let h = HttpHeader::parse_with("X-Team: blue $$", env).unwrap();
        assert!(!h.is_secret());
        assert_eq!(format!("{h:?}"), "x-team: blue $");
        let h = HttpHeader::parse_with("authorization: Basic abc", env).unwrap();
        assert!(h.is_secret(), "authorization is always secret");
    }

    #[test]
    fn bad_headers_are_refused_without_showing_values() {
        let cases = [
            ("X-Api: $MISSING", "environment variable MISSING is not set"),
            ("X-Api: $EMPTY", "environment variable EMPTY is empty"),
            ("X-Api: ${TOKEN", "unclosed"),
            ("X-Api: 5$", "not followed by a variable name"),
            ("X-Api: ${A-B}", "not followed by a variable name"),
            ("no colon", "'Name: value'"),
            ("Bad Name: x", "not a valid header name"),
            ("Content-Type: text/plain", "sets this header itself"),
            ("X-Weir-Signature: x", "sets this header itself"),
            ("X-Api: $TOKEN\u{7f}", "characters a header cannot carry"),
        ];
        for (spec, want) in cases {
            let e = HttpHeader::parse_with(spec, env).unwrap_err().to_string();
            assert!(e.contains(want), "{spec:?}: {e}");
            assert!(!e.contains("s3cret"), "{spec:?} leaks: {e}");
        }
    }

    #[test]
    fn secrets_never_show() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "<redacted>");
        let h = HttpHeader::secret("X-Key", s).unwrap();
        assert_eq!(format!("{h:?}"), "x-key: <redacted>");
    }
}
