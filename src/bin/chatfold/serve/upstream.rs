//! The way upstream: a pooled HTTP/1 client (TLS by rustls), the request's
//! headers as they came less the hop-by-hop ones, and the response's
//! headers on the way back.

use bytes::Bytes;
use http_body_util::BodyExt as _;
use http_body_util::combinators::BoxBody;
use hyper::header::HeaderValue;
use hyper::header::{self, HeaderName};
use hyper::{HeaderMap, Response, StatusCode};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as Legacy;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::config::Config;

/// A body either way: the client's or upstream's, streamed, or bytes of
/// the proxy's own.
pub(crate) type Body = BoxBody<Bytes, chatfold::BoxError>;

/// The client to the upstreams.
pub(crate) type Client = Legacy<HttpsConnector<HttpConnector>, Body>;

/// `bytes` as a body.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    http_body_util::Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A response of the proxy's own.
pub(crate) fn plain(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The client: connections pooled and kept alive, `config`'s connect
/// time-out, no redirects followed (the client follows none).
pub(crate) fn client(config: &Config) -> Client {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(config.connect_timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Legacy::builder(TokioExecutor::new())
        .pool_max_idle_per_host(256)
        // Shorter than the idle time-outs of most servers and load
        // balancers in front of them: a POST on a connection they closed
        // fails, and is not retried.
        .pool_idle_timeout(std::time::Duration::from_secs(30))
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(https)
}

/// Headers that belong to one connection, not to the request (RFC 9110
/// 7.6.1), and those the proxy sets itself.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Removes the hop-by-hop headers, and those `Connection` names.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in HOP_BY_HOP.iter().chain(&named) {
        headers.remove(name);
    }
}

/// The client's headers made ready for upstream: hop-by-hop ones, `Host`
/// (the client sets the upstream's) and the proxy's own `x-chatfold-*`
/// gone; `Content-Length` set for a body of `len` bytes when the proxy
/// rewrote it; `Expect` gone when the proxy read the body whole.
pub(crate) fn request_headers(headers: &mut HeaderMap, rewritten: Option<usize>, buffered: bool) {
    strip_hop_by_hop(headers);
    headers.remove(header::HOST);
    let ours: Vec<HeaderName> = headers
        .keys()
        .filter(|name| name.as_str().starts_with("x-chatfold-"))
        .cloned()
        .collect();
    for name in ours {
        headers.remove(name);
    }
    if let Some(len) = rewritten {
        headers.insert(header::CONTENT_LENGTH, len.into());
    }
    if buffered {
        // The proxy holds the whole body: nothing to wait for.
        headers.remove(header::EXPECT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_own_headers_stay_behind() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, x-secret-hop"),
            ("x-secret-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("host", "127.0.0.1:8080"),
            ("authorization", "Bearer sk-1"),
            ("x-chatfold-budget", "100"),
            ("content-length", "10"),
            ("openai-organization", "org-1"),
        ] {
            h.append(k, v.parse().unwrap());
        }
        h.append("expect", "100-continue".parse().unwrap());
        request_headers(&mut h, Some(42), true);
        let mut names: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["authorization", "content-length", "openai-organization"]);
        assert_eq!(h["content-length"], "42");
    }
}
