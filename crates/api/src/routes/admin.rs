//! `GET /admin`: the operator's live page (HTML, one script, one stylesheet, all embedded in the
//! binary: no build step, no CDN; the skeleton, script and style it shares with the portal are
//! [`super::assets`]).
//!
//! The page itself is public and holds no data: it asks for the operator key, keeps it in the
//! tab's `sessionStorage` (never in a URL or a cookie), and reads and acts only through the
//! operator API with `Authorization: Bearer`, polling every two seconds. Polling rather than
//! server-sent events because `EventSource` cannot send an `Authorization` header: the key
//! would have to travel in the URL or a cookie.
//!
//! The responses forbid inline script, framing and any origin but this one (CSP), so text a
//! tenant controls (names) can only ever be shown as text.

use crate::AppState;
use axum::http::HeaderValue;
use axum::response::Response;
use axum::routing::get;
use axum::Router;

/// The page: its body in the pages' shared skeleton ([`super::assets::page`]).
static HTML: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    super::assets::page(
        "Breakwater · operator",
        "admin",
        include_str!("../../assets/admin.html"),
    )
});
const JS: &str = include_str!("../../assets/admin.js");
const CSS: &str = include_str!("../../assets/admin.css");

/// Same-origin only; no inline script or style; no framing; no form posts (the key form is
/// handled by the script and never submitted as a form).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/admin", get(page))
        .route("/admin/admin.js", get(script))
        .route("/admin/admin.css", get(stylesheet))
}

asset_route!(
    /// The operator's live page.
    page = "/admin", "admin page", "admin_page", "The page.", "text/html", HTML.as_str(), asset
);
asset_route!(
    /// The admin page's script.
    script = "/admin/admin.js", "admin page", "admin_page_script", "The script.",
        "text/javascript", JS, asset
);
asset_route!(
    /// The admin page's stylesheet.
    stylesheet = "/admin/admin.css", "admin page", "admin_page_stylesheet", "The stylesheet.",
        "text/css", CSS, asset
);

fn asset(_: &AppState, content_type: &'static str, body: &'static str) -> Response {
    super::assets::respond(content_type, body, HeaderValue::from_static(CSP), true)
}
