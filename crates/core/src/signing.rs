//! Standard Webhooks signing (<https://www.standardwebhooks.com/>, "Signature scheme").
//!
//! Each attempt is signed when it is sent, not when it is enqueued, because verifiers reject a
//! `webhook-timestamp` more than 5 minutes old. The signature is
//! `v1,` + base64(HMAC-SHA256(secret, "{webhook-id}.{webhook-timestamp}.{body}")), computed by
//! the `standardwebhooks` crate (the reference library), so any Standard Webhooks verifier
//! accepts it.

use base64::Engine;
use rand::RngCore;

/// Prefix of Standard Webhooks secrets.
pub const SECRET_PREFIX: &str = "whsec_";

/// A fresh signing secret: `whsec_` + base64 of 24 random bytes.
pub fn generate_secret() -> String {
    let mut bytes = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// The three headers of a signed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHeaders {
    /// `webhook-id`: the delivery id (stable across attempts, for the receiver's dedup).
    pub id: String,
    /// `webhook-timestamp`: seconds since the Unix epoch, at signing.
    pub timestamp: i64,
    /// `webhook-signature`: `v1,<base64>`.
    pub signature: String,
}

/// Signs `body` for message `msg_id` at `timestamp` (Unix seconds) with `secret` (`whsec_…`).
///
/// Errors if the secret is not valid base64 or the body is not UTF-8 (Standard Webhooks signs
/// text).
pub fn sign(
    secret: &str,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<SignedHeaders, standardwebhooks::WebhookError> {
    let wh = standardwebhooks::Webhook::new(secret)?;
    let signature = wh.sign(msg_id, timestamp, body)?;
    Ok(SignedHeaders {
        id: msg_id.to_string(),
        timestamp,
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published test vector of the Standard Webhooks libraries.
    #[test]
    fn reproduces_the_standard_webhooks_test_vector() {
        let h = sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        )
        .unwrap();
        assert_eq!(
            h.signature,
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn generated_secrets_sign() {
        let s = generate_secret();
        assert!(s.starts_with(SECRET_PREFIX));
        let a = sign(&s, "id", 1, b"{}").unwrap();
        let b = sign(&s, "id", 2, b"{}").unwrap();
        assert_ne!(
            a.signature, b.signature,
            "timestamp is part of what is signed"
        );
    }
}
