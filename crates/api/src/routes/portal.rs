//! `GET /portal`: the tenant portal page (HTML, one script, one stylesheet, embedded in the
//! binary like the admin page, [`super::admin`]: no build step, no CDN; the skeleton, script and
//! style both pages share are [`super::assets`]).
//!
//! The page is public and holds no data. It is opened with a portal session's URL
//! (`/portal#token=bwp_…`, [`super::portal_sessions`]): the script takes the token from the
//! fragment (never sent to a server, so never in an access log), keeps it in the tab's
//! `sessionStorage`, strips it from the address bar (`history.replaceState`) and speaks to the
//! tenant API with `Authorization: Bearer <token>`, as the session's scope allows.
//!
//! The responses forbid inline script and any origin but this one (CSP), send no `Referer`
//! anywhere (`Referrer-Policy: no-referrer`), and may be framed only by the origins of
//! `api.portal_frame_ancestors` (CSP `frame-ancestors`, default `'self'`), so a platform can
//! embed the portal in its own dashboard.

use crate::AppState;
use axum::http::HeaderValue;
use axum::response::Response;
use axum::routing::get;
use axum::Router;

/// The page: its body in the pages' shared skeleton ([`super::assets::page`]).
static HTML: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    super::assets::page(
        "Webhooks · portal",
        "portal",
        include_str!("../../assets/portal.html"),
    )
});
const JS: &str = include_str!("../../assets/portal.js");
const CSS: &str = include_str!("../../assets/portal.css");

/// Same-origin only; no inline script or style; no form posts; framing as configured.
const CSP_BASE: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                        connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                        form-action 'none'; frame-ancestors ";

/// The `Content-Security-Policy` of the portal's responses with `frame_ancestors` (the value of
/// `api.portal_frame_ancestors`, checked at start-up by [`check_frame_ancestors`]).
pub fn csp(frame_ancestors: &str) -> String {
    format!("{CSP_BASE}{}", frame_ancestors.trim())
}

/// Checks a `frame-ancestors` source list (`api.portal_frame_ancestors`): not empty, printable
/// ASCII, no `;` or `,` (which would end the directive or the policy and let the value add
/// others). A source like `https://dashboard.example.com`, `'self'` or `'none'`, several
/// separated by spaces (CSP Level 3, `frame-ancestors`).
pub fn check_frame_ancestors(value: &str) -> Result<(), String> {
    let v = value.trim();
    if v.is_empty() {
        return Err(
            "api.portal_frame_ancestors must not be empty (use 'none' to forbid framing)".into(),
        );
    }
    if v.chars()
        .any(|c| !(' '..='~').contains(&c) || c == ';' || c == ',')
    {
        return Err(
            "api.portal_frame_ancestors: sources separated by spaces, printable ASCII without ; or ,"
                .into(),
        );
    }
    Ok(())
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/portal", get(page))
        .route("/portal/portal.js", get(script))
        .route("/portal/portal.css", get(stylesheet))
}

asset_route!(
    /// The tenant portal page (open it with a portal session's `url`).
    page = "/portal", "portal page", "portal_page", "The page.", "text/html", HTML.as_str(), asset
);
asset_route!(
    /// The portal page's script.
    script = "/portal/portal.js", "portal page", "portal_page_script", "The script.",
        "text/javascript", JS, asset
);
asset_route!(
    /// The portal page's stylesheet.
    stylesheet = "/portal/portal.css", "portal page", "portal_page_stylesheet", "The stylesheet.",
        "text/css", CSS, asset
);

fn asset(state: &AppState, content_type: &'static str, body: &'static str) -> Response {
    let csp = csp(&state.settings().config.portal_frame_ancestors);
    // Checked at start-up; a value that still cannot be a header falls back to no framing.
    let csp = HeaderValue::try_from(csp)
        .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"));
    super::assets::respond(content_type, body, csp, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_ancestors_are_one_directive() {
        for ok in [
            "'self'",
            "'none'",
            "https://a.example https://b.example:8443",
            " 'self' ",
        ] {
            assert!(check_frame_ancestors(ok).is_ok(), "{ok}");
        }
        for bad in ["", "  ", "'self'; script-src *", "a,b", "a\nb", "é"] {
            assert!(check_frame_ancestors(bad).is_err(), "{bad:?}");
        }
        assert!(csp("'self'").ends_with("frame-ancestors 'self'"));
    }
}
