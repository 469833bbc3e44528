//! The metrics' names as the programs serve them, as docs/metrics.md
//! lists them and as the Grafana dashboard queries them: the same.

use std::collections::BTreeSet;
use std::path::Path;

use retry_storm::model::server::{PoolModel, ServerConfig, Shape};
use retry_storm::policy::defence::{LimiterConfig, LimiterKind};
use retry_storm::report::metrics::{
    ClientMetrics, Exposition, Format, ProxyMetrics, ServerExposition, ServerMetrics,
};

fn read(file: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap()
}

/// Every metric the programs can serve, named as in Prometheus's text
/// format (a counter with `_total`), with its type.
fn served() -> BTreeSet<(String, String)> {
    let server = ServerConfig {
        shape: Shape::Pool(PoolModel::default()),
        limiter: Some(LimiterConfig::new(LimiterKind::Gradient2)),
        ..ServerConfig::default()
    };
    [
        ClientMetrics::new().render(),
        ServerMetrics::new(&server).render(),
        ServerExposition::tier(&server, "tier-1").render(),
        ProxyMetrics::new().render(),
    ]
    .into_iter()
    .flat_map(|open| {
        Format::Prometheus
            .encode(open)
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| {
                let (name, kind) = l.split_once(' ').unwrap();
                (name.to_string(), kind.to_string())
            })
            .collect::<Vec<_>>()
    })
    .collect()
}

/// The `retry_storm_` names in `text`.
fn names_in(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("retry_storm_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

#[test]
fn the_documentation_lists_every_metric_with_its_type() {
    let doc = read("docs/metrics.md");
    let mut listed = BTreeSet::new();
    for row in doc.lines().filter(|l| l.starts_with("| `retry_storm_")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_string();
        listed.insert((name, cells[2].to_string()));
    }
    assert_eq!(listed, served());
    // Every name the page mentions is a metric or one of its series (or
    // the prefixes).
    let served: BTreeSet<String> = served().into_iter().map(|(n, _)| n).collect();
    for name in names_in(&doc).into_iter().filter(|n| !n.ends_with('_')) {
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(&name);
        assert!(
            served.contains(&name) || served.contains(family),
            "docs/metrics.md names {name}"
        );
    }
}

#[test]
fn the_dashboard_queries_only_served_metrics_through_its_datasource_variable() {
    let text = read("deploy/grafana/dashboard.json");
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let datasource = variables
        .iter()
        .find(|v| v["type"] == "datasource")
        .expect("a datasource variable");
    assert_eq!(datasource["query"], "prometheus");
    let name = format!("${{{}}}", datasource["name"].as_str().unwrap());
    let served: BTreeSet<String> = served().into_iter().map(|(n, _)| n).collect();
    let mut queried = BTreeSet::new();
    let panels = dashboard["panels"].as_array().unwrap();
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        let title = panel["title"].as_str().unwrap();
        assert_eq!(panel["datasource"]["uid"], name.as_str(), "{title}");
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}");
        for target in targets {
            assert_eq!(target["datasource"]["uid"], name.as_str(), "{title}");
            let expr = target["expr"].as_str().unwrap();
            for metric in names_in(expr) {
                let family = metric.strip_suffix("_bucket").unwrap_or(&metric);
                assert!(served.contains(family), "{title}: {metric}");
                queried.insert(family.to_string());
            }
        }
    }
    // What the issue asks to see: outcomes, retries and given up, the
    // server's concurrency and queue, the modelled delay, latency
    // percentiles.
    for metric in [
        "retry_storm_client_attempts_total",
        "retry_storm_client_retries_total",
        "retry_storm_client_requests_given_up_total",
        "retry_storm_server_concurrency",
        "retry_storm_server_queue_length",
        "retry_storm_server_modelled_delay_seconds",
        "retry_storm_client_attempt_duration_seconds",
        "retry_storm_client_request_duration_seconds",
    ] {
        assert!(queried.contains(metric), "the dashboard shows {metric}");
    }
    assert!(text.contains("histogram_quantile(0.99"));
}
