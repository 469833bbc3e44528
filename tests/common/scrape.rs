//! Scraping a metrics endpoint as Prometheus does, and reading what it
//! answers: every line checked for its form.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use retry_storm::net::metrics::MetricsEndpoint;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What Prometheus asks for.
pub const OPENMETRICS: &str = "application/openmetrics-text;version=1.0.0,\
                           text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// A raw HTTP/1.1 request to `addr`, with an `Accept` header if given:
/// the status line, the headers (lower-cased) and the body.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    accept: Option<&str>,
) -> (String, String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    let request =
        format!("{method} {path} HTTP/1.1\r\nHost: x\r\n{accept}Connection: close\r\n\r\n");
    s.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_lowercase(), body.to_string())
}

/// Whether `name` is a metric or label name as Prometheus takes them.
pub fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses an exposition, failing on any line that is not well-formed:
/// `# HELP`, `# TYPE` or (OpenMetrics) `# UNIT` of a family, then its
/// samples, each `name{label="value",...} number`; in OpenMetrics, `# EOF`
/// last. Returns the samples, `name{labels}` to value.
pub fn parse(text: &str, openmetrics: bool) -> BTreeMap<String, f64> {
    let mut samples = BTreeMap::new();
    let mut family: Option<String> = None;
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.last() == Some(&"# EOF"),
        openmetrics,
        "# EOF ends OpenMetrics only"
    );
    if openmetrics {
        lines.pop();
    }
    for line in &lines {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut words = comment.splitn(3, ' ');
            let (kind, name) = (words.next().unwrap(), words.next().unwrap());
            let rest = words.next().unwrap_or("");
            assert!(is_name(name), "{line}");
            match kind {
                "HELP" => family = Some(name.to_string()),
                "TYPE" => assert!(["counter", "gauge", "histogram"].contains(&rest), "{line}"),
                "UNIT" if openmetrics => assert!(name.ends_with(&format!("_{rest}")), "{line}"),
                _ => panic!("unknown comment: {line}"),
            }
            assert_eq!(Some(name), family.as_deref(), "{line}");
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => (name, labels.strip_suffix('}').unwrap()),
            None => (series, ""),
        };
        assert!(is_name(name), "{line}");
        let family = family.as_deref().expect("a sample after its family");
        assert!(name.starts_with(family), "{name} outside {family}");
        for label in labels.split(',').filter(|l| !l.is_empty()) {
            let (key, quoted) = label.split_once('=').unwrap();
            assert!(is_name(key), "{line}");
            assert!(
                quoted.len() >= 2 && quoted.starts_with('"') && quoted.ends_with('"'),
                "{line}"
            );
        }
        assert!(
            samples.insert(series.to_string(), value).is_none(),
            "{line}"
        );
    }
    samples
}

/// Scrapes `endpoint` as Prometheus does (OpenMetrics), or as curl does
/// (the Prometheus text format): checks the answer and parses it.
pub async fn scrape_as(endpoint: &MetricsEndpoint, openmetrics: bool) -> BTreeMap<String, f64> {
    let accept = openmetrics.then_some(OPENMETRICS);
    let (status, headers, body) = http(endpoint.local_addr(), "GET", "/metrics", accept).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let media = if openmetrics {
        "content-type: application/openmetrics-text; version=1.0.0"
    } else {
        "content-type: text/plain; version=0.0.4"
    };
    assert!(headers.contains(media), "{headers}");
    parse(&body, openmetrics)
}

pub async fn scrape(endpoint: &MetricsEndpoint) -> BTreeMap<String, f64> {
    scrape_as(endpoint, true).await
}

pub fn get(samples: &BTreeMap<String, f64>, series: &str) -> u64 {
    let v = *samples.get(series).unwrap_or_else(|| panic!("no {series}"));
    assert!(v >= 0.0 && v.fract() == 0.0, "{series} = {v}");
    v as u64
}
