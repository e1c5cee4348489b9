//! A small client of the service's HTTP API.

use anyhow::{bail, Context};
use serde_json::{json, Value};
use std::time::Duration;

/// An API client.
#[derive(Clone)]
pub struct Api {
    /// Base URL.
    pub base: String,
    /// HTTP client (shared connection pool).
    pub http: reqwest::Client,
    operator_key: String,
}

/// One tenant as the harness uses it.
#[derive(Debug, Clone)]
pub struct TenantKey {
    /// Tenant id.
    pub id: String,
    /// Its API key.
    pub key: String,
}

impl Api {
    /// A client of the API at `base` with the operator key.
    pub fn new(base: &str, operator_key: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(512)
            .no_proxy()
            .build()?;
        Ok(Self {
            base: base.trim_end_matches('/').to_string(),
            http,
            operator_key: operator_key.to_string(),
        })
    }

    /// POSTs `body`; a 429 (the per-tenant ingress limit) is retried after its `Retry-After`
    /// (at most 1 s at a time, at most 50 times).
    async fn post(&self, key: &str, path: &str, body: &Value) -> anyhow::Result<Value> {
        let mut tries = 0;
        let r = loop {
            let r = self
                .http
                .post(format!("{}{path}", self.base))
                .bearer_auth(key)
                .json(body)
                .send()
                .await
                .with_context(|| format!("POST {path}"))?;
            if r.status() != reqwest::StatusCode::TOO_MANY_REQUESTS || tries >= 50 {
                break r;
            }
            tries += 1;
            let wait = r
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.1)
                .clamp(0.01, 1.0);
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        };
        let status = r.status();
        let text = r.text().await?;
        if !status.is_success() {
            bail!("POST {path} → {status}: {text}");
        }
        Ok(serde_json::from_str(&text)?)
    }

    /// Creates a tenant (`tier`: high | default | bulk).
    pub async fn create_tenant(&self, name: &str, tier: &str) -> anyhow::Result<TenantKey> {
        let v = self
            .post(
                &self.operator_key,
                "/api/v1/tenants",
                &json!({"name": name, "tier": tier}),
            )
            .await?;
        Ok(TenantKey {
            id: v["id"].as_str().context("tenant id")?.to_string(),
            key: v["api_key"].as_str().context("api_key")?.to_string(),
        })
    }

    /// Creates a channel to `url`; returns its id.
    pub async fn create_channel(
        &self,
        t: &TenantKey,
        name: &str,
        url: &str,
    ) -> anyhow::Result<String> {
        self.create_channel_with(t, name, url, json!({})).await
    }

    /// Creates a channel to `url` with the further fields of `extra` (a JSON object, e.g.
    /// `{"ordering": "fifo"}`) in its body; returns its id.
    pub async fn create_channel_with(
        &self,
        t: &TenantKey,
        name: &str,
        url: &str,
        extra: Value,
    ) -> anyhow::Result<String> {
        let mut body = json!({"url": url, "name": name});
        if let (Some(b), Value::Object(more)) = (body.as_object_mut(), extra) {
            b.extend(more);
        }
        let v = self.post(&t.key, "/api/v1/channels", &body).await?;
        Ok(v["id"].as_str().context("channel id")?.to_string())
    }

    /// Creates one channel of tenant `t` per `(name, url)`, at most `concurrency` requests at
    /// once (the channel API takes one per request); returns their ids in the same order. The
    /// first failure (by index) fails the whole call, after every request has finished.
    pub async fn create_channels(
        &self,
        t: &TenantKey,
        channels: &[(String, String)],
        concurrency: usize,
    ) -> anyhow::Result<Vec<String>> {
        let channels = std::sync::Arc::new(channels.to_vec());
        crate::join_bounded(channels.len(), concurrency, |i| {
            let (api, t, channels) = (self.clone(), t.clone(), channels.clone());
            async move {
                let (name, url) = &channels[i];
                api.create_channel(&t, name, url)
                    .await
                    .with_context(|| format!("creating channel {name}"))
            }
        })
        .await
    }

    /// Enqueues one delivery; `Ok(true)` on 202.
    pub async fn enqueue(
        &self,
        t: &TenantKey,
        channel: &str,
        payload: &Value,
    ) -> anyhow::Result<bool> {
        Ok(self.enqueue_status(t, channel, payload).await? == reqwest::StatusCode::ACCEPTED)
    }

    /// Enqueues one delivery and returns the API's status (202 when accepted); the body is
    /// read and dropped. Transport errors (and the client's 60-s timeout) are errors.
    pub async fn enqueue_status(
        &self,
        t: &TenantKey,
        channel: &str,
        payload: &Value,
    ) -> anyhow::Result<reqwest::StatusCode> {
        let r = self
            .http
            .post(format!(
                "{}/api/v1/channels/{channel}/deliveries",
                self.base
            ))
            .bearer_auth(&t.key)
            .json(&json!({"event_type": "loadtest.event", "payload": payload}))
            .send()
            .await?;
        let status = r.status();
        let _ = r.bytes().await;
        Ok(status)
    }

    /// Enqueues a batch (≤ 1000) of payloads; returns how many were accepted (all or none).
    pub async fn enqueue_batch(
        &self,
        t: &TenantKey,
        channel: &str,
        payloads: &[Value],
    ) -> anyhow::Result<usize> {
        let deliveries: Vec<Value> = payloads
            .iter()
            .map(|p| json!({"event_type": "loadtest.event", "payload": p}))
            .collect();
        let v = self
            .post(
                &t.key,
                &format!("/api/v1/channels/{channel}/deliveries/batch"),
                &json!({ "deliveries": deliveries }),
            )
            .await?;
        Ok(v["data"].as_array().map_or(0, Vec::len))
    }

    /// `GET /api/v1/channels/{id}`.
    pub async fn channel(&self, t: &TenantKey, channel: &str) -> anyhow::Result<Value> {
        let r = self
            .http
            .get(format!("{}/api/v1/channels/{channel}", self.base))
            .bearer_auth(&t.key)
            .send()
            .await?;
        let status = r.status();
        let text = r.text().await?;
        if !status.is_success() {
            bail!("GET channel → {status}: {text}");
        }
        Ok(serde_json::from_str(&text)?)
    }
}
