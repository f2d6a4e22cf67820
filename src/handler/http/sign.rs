//! Request signatures: with a signing secret, every POST carries
//!
//! ```text
//! X-Weir-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//! ```
//!
//! as webhook senders do (Stripe's scheme): the receiver recomputes the HMAC over the
//! timestamp, a dot and the raw body bytes, compares in constant time, and refuses a `t`
//! too far from its clock (5 minutes, say) so a captured request cannot be replayed
//! later. `v1` names the scheme, so another can be added beside it. The header's name is
//! [`SIGNATURE_HEADER`](super::SIGNATURE_HEADER), among the headers weir sets itself
//! (`headers.rs`).

use super::headers::Secret;
use ring::hmac;

/// Signs request bodies with one secret.
#[derive(Clone)]
pub(crate) struct Signer(hmac::Key);

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(HMAC-SHA256, <redacted>)")
    }
}

impl Signer {
    pub(crate) fn new(secret: &Secret) -> Self {
        Self(hmac::Key::new(hmac::HMAC_SHA256, secret.expose().as_bytes()))
    }

    /// The header value for `body` sent at `unix_secs`.
    pub(crate) fn header(&self, unix_secs: u64, body: &[u8]) -> String {
        let t = unix_secs.to_string();
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(t.as_bytes());
        ctx.update(b".");
        ctx.update(body);
        format!("t={t},v1={}", hex(ctx.sign().as_ref()))
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_timestamp_dot_body() {
        // The HMAC of "<t>.<body>", computed directly.
        let s = Signer::new(&Secret::new("Jefe"));
        let got = s.header(1_700_000_000, b"{\"id\":\"a\"}");
        let want = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, b"Jefe"),
            b"1700000000.{\"id\":\"a\"}",
        );
        assert_eq!(got, format!("t=1700000000,v1={}", hex(want.as_ref())));
        assert_eq!(got.len(), "t=1700000000,v1=".len() + 64);
        assert_eq!(format!("{s:?}"), "Signer(HMAC-SHA256, <redacted>)");
    }

    #[test]
    fn hex_matches_a_known_vector() {
        // RFC 4231, test case 2.
        let tag = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, b"Jefe"),
            b"what do ya want for nothing?",
        );
        assert_eq!(
            hex(tag.as_ref()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
