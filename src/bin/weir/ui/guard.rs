//! The UI's protections: authentication (`--auth`), the Host check that keeps a page of
//! another site from reaching an unauthenticated loopback UI through DNS rebinding, the
//! CSRF check of every action ([`Posted`]), and the headers every answer carries.
//!
//! CSRF: each process draws a random 256-bit token at start; every form carries it in a
//! hidden field, and an action runs only if the field matches (compared in constant time)
//! and the request does not come from another site: `Sec-Fetch-Site` (when sent) is
//! `same-origin` or `none`, and `Origin` (when sent) is this server's own. Another site
//! cannot read the token (the same-origin policy), so it cannot forge the form.

use super::state::{App, Failure};
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use subtle::ConstantTimeEq;

/// Who may use the UI.
#[derive(Clone)]
pub(crate) enum Auth {
    /// HTTP basic auth with this user and password.
    Basic { user: String, pass: String },
    /// `Authorization: Bearer TOKEN`, or basic auth with any user and TOKEN as password.
    Token(String),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        match self {
            Auth::Basic { user, .. } => write!(f, "Basic({user})"),
            Auth::Token(_) => f.write_str("Token"),
        }
    }
}

/// The shortest `--auth token:VAR` token accepted: a token is the whole secret (no user
/// name to guess as well), so it must not be one a client can try through.
pub(crate) const MIN_TOKEN: usize = 16;

impl Auth {
    /// Parses `basic:USER:PASSWORD_VAR` or `token:TOKEN_VAR`, reading the secret from the
    /// environment variable named. The secret never comes from the command line, where
    /// other users of the machine could read it (`ps`).
    pub(crate) fn from_spec(spec: &str) -> crate::error::Result<Self> {
        Self::from_spec_with(spec, |v| std::env::var(v).ok())
    }

    fn from_spec_with(spec: &str, var: impl Fn(&str) -> Option<String>) -> crate::error::Result<Self> {
        let bad = |why: String| {
            crate::usage(format!(
                "--auth {spec:?}: {why}; write basic:USER:PASSWORD_VAR or token:TOKEN_VAR \
                 (the secret is read from that environment variable)"
            ))
        };
        let secret = |name: &str| match var(name) {
            Some(v) if !v.is_empty() => Ok(v),
            Some(_) => Err(bad(format!("the environment variable {name} is empty"))),
            None => Err(bad(format!("the environment variable {name} is not set"))),
        };
        let parts: Vec<&str> = spec.splitn(3, ':').collect();
        match parts.as_slice() {
            ["basic", user, var] if !user.is_empty() && !var.is_empty() => Ok(Auth::Basic {
                user: (*user).to_owned(),
                pass: secret(var)?,
            }),
            ["token", var] if !var.is_empty() => {
                let token = secret(var)?;
                if token.chars().count() < MIN_TOKEN {
                    return Err(bad(format!(
                        "the token in {var} is {} characters long; a token needs at least \
                         {MIN_TOKEN} (e.g. `openssl rand -hex 16`)",
                        token.chars().count()
                    )));
                }
                Ok(Auth::Token(token))
            }
            _ => Err(bad("not a form weir knows".into())),
        }
    }

    /// Whether the `Authorization` header lets the request in.
    fn allows(&self, header: Option<&HeaderValue>) -> bool {
        let Some(value) = header.and_then(|h| h.to_str().ok()) else {
            return false;
        };
        let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
        let rest = rest.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            return matches!(self, Auth::Token(t) if same(rest, t));
        }
        if !scheme.eq_ignore_ascii_case("basic") {
            return false;
        }
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(rest) else {
            return false;
        };
        let text = String::from_utf8_lossy(&decoded);
        let Some((user, pass)) = text.split_once(':') else {
            return false;
        };
        match self {
            // Both compared, whatever the first gives: no early exit to time.
            Auth::Basic { user: u, pass: p } => same(user, u) & same(pass, p),
            Auth::Token(t) => same(pass, t),
        }
    }
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// The middleware: the Host check (without auth), then authentication (with it).
pub(crate) async fn check(State(app): State<App>, req: Request, next: Next) -> Response {
    match app.auth() {
        None => {
            if let Some(host) = req.headers().get(header::HOST)
                && !loopback_host(host.to_str().unwrap_or(""))
            {
                return refuse(
                    StatusCode::MISDIRECTED_REQUEST,
                    "this UI answers loopback host names only (localhost, 127.0.0.1, [::1]); \
                     serve it with --auth to reach it by another name",
                );
            }
        }
        Some(auth) => {
            if !auth.allows(req.headers().get(header::AUTHORIZATION)) {
                let mut r = refuse(StatusCode::UNAUTHORIZED, "authentication required");
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"weir\", charset=\"UTF-8\""),
                );
                return r;
            }
        }
    }
    next.run(req).await
}

use weir::net::loopback_host;

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, format!("{message}\n")).into_response()
}

/// Headers on every answer: no framing, no sniffing, scripts and styles from this server
/// only, nothing cached (pages show live state).
pub(crate) async fn headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    let set = [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in set {
        h.insert(name, HeaderValue::from_static(value));
    }
    r
}

/// The fields of an action's form, once its CSRF token and origin have been checked:
/// taking a `Posted` is what makes a handler safe to run.
#[derive(Debug)]
pub(crate) struct Posted(Vec<(String, String)>);

impl Posted {
    /// The field `name`, trimmed; `None` when absent or blank.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// Every non-blank value of the field `name` (checkboxes).
    pub(crate) fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, v)| k == name && !v.trim().is_empty())
            .map(|(_, v)| v.trim().to_owned())
            .collect()
    }

    /// The `queue` field (required).
    pub(crate) fn queue(&self) -> Result<&str, Failure> {
        self.get("queue")
            .ok_or_else(|| Failure::bad_request("the form names no queue"))
    }

    /// Whether the confirmation step was passed.
    pub(crate) fn confirmed(&self) -> bool {
        self.get("confirmed") == Some("yes")
    }

    /// Every field, for a confirmation form to post again (its token is the form's own).
    pub(crate) fn fields(&self) -> impl Iterator<Item = &(String, String)> {
        self.0.iter().filter(|(k, _)| k != "csrf" && k != "confirmed")
    }
}

impl FromRequest<App> for Posted {
    type Rejection = Response;

    async fn from_request(req: Request, app: &App) -> Result<Self, Response> {
        let forbidden = |why: &str| refuse(StatusCode::FORBIDDEN, why);
        if let Err(why) = same_origin(req.headers()) {
            return Err(forbidden(&why));
        }
        let axum::Form(fields) = axum::Form::<Vec<(String, String)>>::from_request(req, app)
            .await
            .map_err(IntoResponse::into_response)?;
        let token = fields.iter().find(|(k, _)| k == "csrf").map(|(_, v)| v.as_str());
        match token {
            Some(t) if same(t, app.csrf()) => Ok(Posted(fields)),
            Some(_) => Err(forbidden(
                "the form's CSRF token is not this server's (was the UI restarted? reload the page)",
            )),
            None => Err(forbidden("the form carries no CSRF token")),
        }
    }
}

/// Refuses a request a browser marks as coming from another site.
fn same_origin(h: &HeaderMap) -> Result<(), String> {
    let text = |name| h.get(name).map(|v: &HeaderValue| v.to_str().unwrap_or("?"));
    if let Some(site) = text(header::HeaderName::from_static("sec-fetch-site"))
        && !matches!(site, "same-origin" | "none")
    {
        return Err(format!("cross-site request refused (Sec-Fetch-Site: {site})"));
    }
    if let Some(origin) = text(header::ORIGIN) {
        let host = text(header::HOST).unwrap_or("");
        let ours = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(|o| !host.is_empty() && o.eq_ignore_ascii_case(host));
        if !ours {
            return Err(format!("cross-origin request refused (Origin: {origin})"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, pass: &str) -> HeaderValue {
        let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        HeaderValue::from_str(&format!("Basic {b}")).unwrap()
    }

    #[test]
    fn specs_read_secrets_from_the_environment() {
        let env = |v: &str| match v {
            "PW" => Some("s3cret".to_owned()),
            "TOK" => Some("s3cret-s3cret-s3cret".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let a = Auth::from_spec_with("basic:admin:PW", env).unwrap();
        assert!(a.allows(Some(&basic("admin", "s3cret"))));
        assert!(!a.allows(Some(&basic("admin", "wrong"))));
        assert!(!a.allows(Some(&basic("root", "s3cret"))));
        assert!(!a.allows(None));
        let t = Auth::from_spec_with("token:TOK", env).unwrap();
        assert!(t.allows(Some(&HeaderValue::from_static("Bearer s3cret-s3cret-s3cret"))));
        assert!(t.allows(Some(&basic("anyone", "s3cret-s3cret-s3cret"))));
        assert!(!t.allows(Some(&HeaderValue::from_static("Bearer s3cret-s3cret-s3cre"))));
        for (spec, says) in [
            ("basic:admin:MISSING", "is not set"),
            ("token:EMPTY", "is empty"),
            ("token:PW", "is 6 characters long; a token needs at least 16"),
            ("basic:admin", "not a form"),
            ("password:x", "not a form"),
        ] {
            let e = Auth::from_spec_with(spec, env).unwrap_err().to_string();
            assert!(e.contains(says), "{spec}: {e}");
        }
    }

    #[test]
    fn loopback_origins() {
        // (loopback host names: net.rs's own test)
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:9465"));
        assert!(same_origin(&h).is_ok());
        h.insert(header::ORIGIN, HeaderValue::from_static("http://127.0.0.1:9465"));
        assert!(same_origin(&h).is_ok());
        h.insert(header::ORIGIN, HeaderValue::from_static("http://evil.example"));
        assert!(same_origin(&h).is_err());
        h.remove(header::ORIGIN);
        h.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(same_origin(&h).is_err());
    }
}
