//! `GET /assets/common.js`, `GET /assets/common.css`: what the operator page ([`super::admin`])
//! and the tenant portal ([`super::portal`]) share, embedded in the binary like them (no build
//! step, no CDN). The script defines `window.Breakwater` (`$`, `el`, `toast`, `allPages`); each
//! page loads it before its own script, and the stylesheet before its own.
//!
//! The pages' HTML skeleton is here too ([`page`]): each page's file holds only its body.
//!
//! Public and without data, like the pages. The responses are never documents: their CSP allows
//! nothing (`default-src 'none'`, no framing), `nosniff` keeps a browser from reading them as
//! anything but their type, and they send no `Referer`.

use crate::AppState;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

const JS: &str = include_str!("../../assets/common.js");
const CSS: &str = include_str!("../../assets/common.css");

/// Subresources only: nothing to run or frame.
const CSP: &str = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A whole page: the shared skeleton (`<head>` with the shared and the page's stylesheet and
/// script, `/{name}/{name}.css` and `/{name}/{name}.js`; the `#toast` that `toast()` fills)
/// around `body`, the page's own markup. Built once per page at first use.
pub(crate) fn page(title: &str, name: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n<title>{title}</title>\n\
         <link rel=\"stylesheet\" href=\"/assets/common.css\">\n\
         <link rel=\"stylesheet\" href=\"/{name}/{name}.css\">\n\
         <script src=\"/assets/common.js\" defer></script>\n\
         <script src=\"/{name}/{name}.js\" defer></script>\n</head>\n<body>\n{body}\
         <div id=\"toast\" class=\"toast\" role=\"status\" hidden></div>\n</body>\n</html>\n"
    )
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/assets/common.js", get(script))
        .route("/assets/common.css", get(stylesheet))
}

asset_route!(
    /// The script the admin page and the portal share (`window.Breakwater`).
    script = "/assets/common.js", "pages", "common_page_script", "The script.",
        "text/javascript", JS, asset
);
asset_route!(
    /// The stylesheet the admin page and the portal share.
    stylesheet = "/assets/common.css", "pages", "common_page_stylesheet", "The stylesheet.",
        "text/css", CSS, asset
);

fn asset(_: &AppState, content_type: &'static str, body: &'static str) -> Response {
    respond(content_type, body, HeaderValue::from_static(CSP), false)
}

/// A page's or an asset's response, the same for every page: `body` as `content_type` with
/// `csp` as its `Content-Security-Policy`, `nosniff`, no `Referer` sent anywhere, revalidated
/// on each load (`no-cache`: a new binary's assets are seen at once); `X-Frame-Options: DENY`
/// too when `deny_framing` (for browsers that predate `frame-ancestors`).
pub(crate) fn respond(
    content_type: &'static str,
    body: &'static str,
    csp: HeaderValue,
    deny_framing: bool,
) -> Response {
    let mut r = (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CONTENT_SECURITY_POLICY, csp),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response();
    if deny_framing {
        r.headers_mut()
            .insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    r
}
