//! The run's cast, created before the warm-up: the dead tenants and their channels (all on the
//! dead endpoint), the healthy tenant and its channel, and with `--prune-rows` the old finished
//! deliveries the pruner deletes during the loaded stream.

use super::options::DeadOrdering;
use super::Options;
use crate::api::TenantKey;
use crate::receiver::DeadEndpoint;
use crate::Stage;
use anyhow::Context;
use breakwater_core::Tier;
use sqlx::PgPool;

/// Who takes part in a run.
pub(super) struct Cast {
    /// The dead tenants; the first is tenant A, and dead channel `i` belongs to tenant `i mod T`.
    pub dead_tenants: Vec<TenantKey>,
    /// Tenant B, the healthy one.
    pub healthy_tenant: TenantKey,
    /// The dead channels' ids, in order.
    pub dead_chs: Vec<String>,
    /// Tenant B's healthy channel's id.
    pub healthy_ch: String,
    /// A one-connection pool on the run's database for the harness's pruner.
    pub prune_pool: PgPool,
    /// How long the seeding of the old rows took, s (0 without `--prune-rows`).
    pub seed_s: f64,
}

impl Cast {
    /// Creates the tenants and channels through the API, opens the pruner's pool and seeds the
    /// old rows (with `o.prune_rows`).
    pub(super) async fn create(
        o: &Options,
        tier: Tier,
        stage: &Stage<'_>,
        dead: &DeadEndpoint,
        pool: &PgPool,
    ) -> anyhow::Result<Self> {
        let (api, healthy) = (&stage.api, stage.healthy);
        let multi = o.multi();
        let mut dead_tenants = vec![api.create_tenant("lt-dead-tenant", tier.as_str()).await?];
        for j in 1..o.dead_tenants {
            dead_tenants.push(
                api.create_tenant(&format!("lt-dead-tenant-{j}"), tier.as_str())
                    .await?,
            );
        }
        let tb = api
            .create_tenant("lt-healthy-tenant", tier.as_str())
            .await?;
        // Dead channel `i` belongs to dead tenant `i mod T`; with one channel, as before.
        let mut dead_chs: Vec<String> = Vec::with_capacity(o.dead_channels);
        for i in 0..o.dead_channels {
            let (name, url) = if multi {
                (format!("dead-{i}"), dead.url_for(i))
            } else {
                ("dead".to_string(), dead.url.clone())
            };
            dead_chs.push(
                api.create_channel_with(
                    &dead_tenants[i % o.dead_tenants],
                    &name,
                    &url,
                    // The field only when not the default: a build from before ordered
                    // channels (the old side of loadtest/compare.sh) refuses it.
                    match o.dead_ordering {
                        DeadOrdering::None => serde_json::json!({}),
                        DeadOrdering::Fifo => serde_json::json!({ "ordering": "fifo" }),
                    },
                )
                .await?,
            );
        }
        let healthy_ch = api
            .create_channel(&tb, "healthy", &healthy.url("healthy"))
            .await?;
        let prune_pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect_with((*pool.connect_options()).clone())
            .await?;
        let mut seed_s = 0.0;
        if o.prune_rows > 0 {
            let tc = api.create_tenant("lt-old-tenant", tier.as_str()).await?;
            let old_ch = api.create_channel(&tc, "old", &healthy.url("old")).await?;
            o.run.log(&format!(
                "seeding {} old finished deliveries (with attempts and jobs)",
                o.prune_rows
            ));
            seed_s = crate::prune::seed_old(pool, tc.id.parse()?, old_ch.parse()?, o.prune_rows)
                .await
                .context("seeding old rows")?;
        }
        Ok(Self {
            dead_tenants,
            healthy_tenant: tb,
            dead_chs,
            healthy_ch,
            prune_pool,
            seed_s,
        })
    }
}
