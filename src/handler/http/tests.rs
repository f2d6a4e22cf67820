use super::*;
use reqwest::header::HeaderValue;

#[test]
fn retry_after_reads_seconds_and_dates() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let mut h = HeaderMap::new();
    assert_eq!(retry_after(&h, now), None);
    h.insert(RETRY_AFTER, HeaderValue::from_static("7"));
    assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
    let later = httpdate::fmt_http_date(now + Duration::from_secs(90));
    h.insert(RETRY_AFTER, HeaderValue::from_str(&later).unwrap());
    assert_eq!(retry_after(&h, now), Some(Duration::from_secs(90)));
    h.insert(RETRY_AFTER, HeaderValue::from_static("999999"));
    assert_eq!(retry_after(&h, now), Some(MAX_RETRY_AFTER));
    h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
    assert_eq!(retry_after(&h, now), None);
}

#[test]
fn http_and_https_urls_only() {
    let e = HttpHandler::new(HttpConfig::new("ftp://example.com/")).unwrap_err();
    assert!(e.to_string().contains("is not http or https"), "{e}");
    let e = HttpHandler::new(HttpConfig::new("not a url")).unwrap_err();
    assert!(e.to_string().contains("invalid handler URL"), "{e}");
    assert!(HttpHandler::new(HttpConfig::new("http://127.0.0.1:9/hook")).is_ok());
    let mut c = HttpConfig::new("https://127.0.0.1:9/hook");
    c.ca_file = Some("/nonexistent/ca.pem".into());
    let e = HttpHandler::new(c).unwrap_err().to_string();
    assert!(
        e.starts_with("cannot read the CA file /nonexistent/ca.pem"),
        "{e}"
    );
}

#[test]
fn debug_output_redacts_secrets() {
    let mut c = HttpConfig::new("http://127.0.0.1:9/hook");
    c.headers
        .push(HttpHeader::secret("X-Key", Secret::new("hunter2")).unwrap());
    c.headers
        .push(HttpHeader::new("Authorization", "Bearer hunter3").unwrap());
    c.sign_secret = Some(Secret::new("hunter4"));
    let h = HttpHandler::new(c).unwrap();
    let shown = format!("{h:?}");
    assert!(!shown.contains("hunter"), "{shown}");
    assert!(shown.contains("x-key: <redacted>"), "{shown}");
}
