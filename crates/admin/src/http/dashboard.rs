//! The live dashboard at `GET /`: one HTML page, its script and its style, compiled into
//! the binary (`assets/`), so it works offline, behind a firewall, and always matches the
//! kernel it is served by. No build step: plain HTML, CSS and JavaScript that polls
//! `/stats`, `/plugins` and `/events` once a second and draws what they say.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{header, Response, StatusCode};

use super::Answer;

const PAGE: &str = include_str!("../../assets/dashboard.html");
const SCRIPT: &str = include_str!("../../assets/dashboard.js");
const STYLE: &str = include_str!("../../assets/dashboard.css");

/// What the page says about swapping; replaced when it is served.
const SWAP_MARK: &str = "data-swap=\"off\"";

/// The asset at `path` and its content type, if there is one.
pub fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/" => Some((PAGE, "text/html; charset=utf-8")),
        "/dashboard.js" => Some((SCRIPT, "text/javascript; charset=utf-8")),
        "/dashboard.css" => Some((STYLE, "text/css; charset=utf-8")),
        _ => None,
    }
}

/// Serves the asset at `path` (a 404 for any other). `swap`: the kernel takes HTTP swaps
/// (a token is configured), so the page shows its swap control.
pub fn serve(path: &str, swap: bool) -> Answer {
    let Some((body, content_type)) = asset(path) else {
        return super::error(StatusCode::NOT_FOUND, "not_found", "no such asset");
    };
    let body = if path == "/" && swap {
        Bytes::from(body.replacen(SWAP_MARK, "data-swap=\"on\"", 1))
    } else {
        Bytes::from_static(body.as_bytes())
    };
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = StatusCode::OK;
    let headers = r.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    // The assets change with the binary: never serve a stale one after an upgrade.
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_links_its_assets_and_shows_swapping_only_when_offered() {
        assert!(PAGE.contains(SWAP_MARK), "the page carries the swap mark");
        assert!(PAGE.contains("dashboard.js") && PAGE.contains("dashboard.css"));
        for path in ["/", "/dashboard.js", "/dashboard.css"] {
            assert_eq!(serve(path, false).status(), StatusCode::OK, "{path}");
        }
        assert_eq!(serve("/nope", false).status(), StatusCode::NOT_FOUND);
        let on = serve("/", true);
        let off = serve("/", false);
        let text = |r: Answer| {
            let body = futures::executor::block_on(http_body_util::BodyExt::collect(r.into_body()))
                .unwrap()
                .to_bytes();
            String::from_utf8(body.to_vec()).unwrap()
        };
        assert!(text(on).contains("data-swap=\"on\""));
        assert!(text(off).contains(SWAP_MARK));
    }
}
