//! A node of a cell (docs/cells.md) without the router: the keys and portal tokens it
//! mints name its cell, a request naming another cell is refused (421), and a node without a
//! cell mints the keys it always did. The router in front of two cells is tested in
//! tests/chaos/cells.rs.

use breakwater_core::api_key::{credential_cell, KEY_RANDOM_CHARS, TENANT_KEY_PREFIX};
use breakwater_core::portal::{TOKEN_PREFIX, TOKEN_RANDOM_CHARS};
use breakwater_e2e::{TestApp, OPERATOR_KEY};
use serde_json::json;
use sqlx::PgPool;

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_node_of_a_cell_names_it_in_every_credential_and_refuses_another_cells_requests(
    pool: PgPool,
) {
    let app = TestApp::spawn_with(pool, |s| s.cell = Some("eu1".into())).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    assert!(key.starts_with("bw_eu1_"), "{}", &key[..7]);
    assert_eq!(
        credential_cell(&key, TENANT_KEY_PREFIX, KEY_RANDOM_CHARS),
        Some("eu1")
    );
    let second = app.create_key(&key, json!({ "name": "ci" })).await;
    let second_key = second["api_key"].as_str().unwrap();
    assert!(second_key.starts_with("bw_eu1_"));
    // The listed prefix shows the cell and four random characters.
    assert_eq!(second["prefix"].as_str().unwrap(), &second_key[..11]);
    let (_, token) = app.portal_session(tenant, "read").await;
    assert_eq!(
        credential_cell(&token, TOKEN_PREFIX, TOKEN_RANDOM_CHARS),
        Some("eu1")
    );
    let (s, v) = app.get("/api/v1/channels", &token).await;
    assert_eq!(s, 200, "the token works on its cell: {v}");

    // The router's header naming this cell passes; naming another is refused, whatever the key.
    for (cell, want) in [("eu1", 200), ("us2", 421)] {
        for k in [key.as_str(), OPERATOR_KEY] {
            let path = if k == OPERATOR_KEY {
                "/api/v1/tenants"
            } else {
                "/api/v1/tenant"
            };
            let r = app
                .http
                .get(format!("{}{path}", app.api))
                .bearer_auth(k)
                .header("Breakwater-Cell", cell)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), want, "{path} for cell {cell}");
            if want == 421 {
                let v: serde_json::Value = r.json().await.unwrap();
                assert_eq!(v["code"], "misdirected_request", "{v}");
            }
        }
    }
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_node_without_a_cell_mints_plain_keys_and_ignores_the_cell_header(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    assert_eq!(key.len(), TENANT_KEY_PREFIX.len() + KEY_RANDOM_CHARS);
    assert_eq!(
        credential_cell(&key, TENANT_KEY_PREFIX, KEY_RANDOM_CHARS),
        None
    );
    let (_, token) = app.portal_session(tenant, "read").await;
    assert_eq!(token.len(), TOKEN_PREFIX.len() + TOKEN_RANDOM_CHARS);
    let r = app
        .http
        .get(format!("{}/api/v1/tenant", app.api))
        .bearer_auth(&key)
        .header("Breakwater-Cell", "us2")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
