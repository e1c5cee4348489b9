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
pub(crate) const SECRET_PREFIX: &str = "whsec_";

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
    /// `webhook-id`: the message id of a fanned-out message, else the delivery id (stable across
    /// attempts, for the receiver's dedup).
    pub id: String,
    /// `webhook-timestamp`: seconds since the Unix epoch, at signing.
    pub timestamp: i64,
    /// `webhook-signature`: `v1,<base64>`, or several space-separated (see [`sign_all`]).
    pub signature: String,
}

/// Signs `body` for message `msg_id` at `timestamp` (Unix seconds) with `secret` (`whsec_…`).
///
/// Errors if the secret is not valid base64 or the body is not UTF-8 (Standard Webhooks signs
/// text).
pub(crate) fn sign(
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

/// Signs `body` for message `msg_id` at `timestamp` with each of `secrets` (the channel's
/// current secret first, then, during a rotation's grace period, the previous one): the
/// signatures are joined with a space, `v1,<new> v1,<old>`, as the Standard Webhooks spec allows
/// ("the signature header can contain multiple space delimited signatures"); a verifier accepts
/// the request if any of them verifies, so a receiver holding either secret accepts it.
///
/// Errors as [`sign`] on the first secret that is not valid base64.
///
/// # Panics
/// If `secrets` is empty.
pub fn sign_all(
    secrets: &[&str],
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<SignedHeaders, standardwebhooks::WebhookError> {
    let (first, rest) = secrets.split_first().expect("at least one secret");
    let mut headers = sign(first, msg_id, timestamp, body)?;
    for s in rest {
        headers.signature.push(' ');
        headers
            .signature
            .push_str(&sign(s, msg_id, timestamp, body)?.signature);
    }
    Ok(headers)
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
    fn two_secrets_give_the_new_signature_then_the_old() {
        let (new, old) = (generate_secret(), generate_secret());
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let h = sign_all(&[&new, &old], "msg_1", ts, b"{}").unwrap();
        let parts: Vec<&str> = h.signature.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], sign(&new, "msg_1", ts, b"{}").unwrap().signature);
        assert_eq!(parts[1], sign(&old, "msg_1", ts, b"{}").unwrap().signature);
        // (That a Standard Webhooks verifier accepts either is tested end to end, tests/e2e.)
        assert_eq!(
            sign_all(&[&new], "msg_1", ts, b"{}").unwrap(),
            sign(&new, "msg_1", ts, b"{}").unwrap()
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
