use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::model::outcome::{AttemptRecord, Outcome, RequestRecord};
use crate::model::server::{PoolModel, ServerConfig, Shape};
use crate::model::service::{Exit, Gauges, Refusal};
use crate::policy::defence::{LimiterConfig, LimiterKind};
use crate::report::counts::{ClientRecorder, Interval, ServerCounts};

/// The samples of an exposition, `name{labels}` to value, after checking
/// every line's shape: a family's HELP, TYPE and (with a unit) UNIT lines
/// before its samples, each sample named after its family, `# EOF` last.
fn samples(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut family = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "# EOF" {
            assert!(lines.peek().is_none(), "# EOF is the last line");
            assert!(text.ends_with("# EOF\n"));
            return out;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            family = rest.split(' ').next().unwrap().to_string();
            assert!(rest.len() > family.len() + 1, "help text: {line}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(name, family, "{line}");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# UNIT ") {
            assert_eq!(rest, format!("{family} seconds"), "{line}");
            assert!(family.ends_with("_seconds"), "{line}");
            continue;
        }
        let (key, value) = line.rsplit_once(' ').unwrap();
        let name = key.split('{').next().unwrap();
        let suffix = name.strip_prefix(family.as_str()).unwrap_or_else(|| {
            panic!("{name} outside its family {family}");
        });
        assert!(
            ["", "_total", "_sum", "_count", "_bucket"].contains(&suffix),
            "{line}"
        );
        assert!(name.starts_with("retry_storm_"), "{line}");
        value.parse::<f64>().unwrap();
        assert!(out.insert(key.to_string(), value.to_string()).is_none());
    }
    panic!("no # EOF at the end");
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn attempt(outcome: Outcome, is_retry: bool, latency: Duration) -> AttemptRecord {
    AttemptRecord {
        outcome,
        is_retry,
        rejected_locally: false,
        latency,
        lateness: Duration::ZERO,
    }
}

#[test]
fn a_client_counts_as_its_recorder_does() {
    let metrics = Arc::new(ClientMetrics::new());
    let recorder = ClientRecorder::with_metrics(Some(metrics.clone()));
    // Latencies exact in binary: 7.8125 ms, 31.25 ms, 1.5 s.
    let ok = [
        (false, Duration::from_nanos(7_812_500)),
        (false, Duration::from_nanos(31_250_000)),
        (true, ms(1_500)),
    ];
    for (is_retry, latency) in ok {
        recorder.attempt_started();
        recorder.attempt_finished(attempt(Outcome::Ok, is_retry, latency));
    }
    recorder.attempt_started();
    recorder.attempt_finished(attempt(Outcome::Timeout, false, ms(2_000)));
    recorder.attempt_started();
    recorder.attempt_finished(attempt(Outcome::Error, true, ms(3)));
    recorder.attempt_started();
    recorder.attempt_finished(attempt(Outcome::Cancelled, true, ms(9)));
    // A retry a throttle rejected: never sent, never started.
    recorder.attempt_finished(AttemptRecord {
        rejected_locally: true,
        ..attempt(Outcome::Error, true, Duration::ZERO)
    });
    // Still in flight at the scrape.
    recorder.attempt_started();
    // Open traffic: three sessions admitted, one left, two refused.
    for _ in 0..3 {
        recorder.session_arrived();
    }
    recorder.session_left();
    recorder.arrival_refused();
    recorder.arrival_refused();
    for (latency, throttled) in [(Some(ms(250)), false), (None, true), (None, false)] {
        recorder.request_finished(RequestRecord {
            attempts: 2,
            latency,
            throttled,
        });
    }

    let text = metrics.render();
    let s = samples(&text);
    let at = |key: &str| s.get(key).unwrap_or_else(|| panic!("no {key}")).as_str();
    let c = "retry_storm_client_";
    assert_eq!(at(&format!("{c}attempts_total{{outcome=\"ok\"}}")), "3");
    assert_eq!(at(&format!("{c}attempts_total{{outcome=\"error\"}}")), "2");
    assert_eq!(
        at(&format!("{c}attempts_total{{outcome=\"timeout\"}}")),
        "1"
    );
    assert_eq!(
        at(&format!("{c}attempts_total{{outcome=\"cancelled\"}}")),
        "1"
    );
    assert_eq!(at(&format!("{c}retries_total")), "4");
    assert_eq!(at(&format!("{c}requests_started_total")), "3");
    assert_eq!(at(&format!("{c}requests_given_up_total")), "2");
    // The rejected retry, and the request a throttle gave up.
    assert_eq!(at(&format!("{c}throttled_total")), "2");
    assert_eq!(at(&format!("{c}rejected_locally_total")), "1");
    assert_eq!(at(&format!("{c}in_flight")), "1");
    let h = format!("{c}attempt_duration_seconds");
    assert_eq!(at(&format!("{h}_count")), "3");
    assert_eq!(at(&format!("{h}_sum")), "1.5390625");
    for (le, n) in [
        ("0.005", "0"),
        ("0.01", "1"),
        ("0.02", "1"),
        ("0.05", "2"),
        ("1.0", "2"),
        ("2.0", "3"),
        ("+Inf", "3"),
    ] {
        assert_eq!(at(&format!("{h}_bucket{{le=\"{le}\"}}")), n, "le {le}");
    }
    let h = format!("{c}request_duration_seconds");
    assert_eq!(at(&format!("{h}_count")), "1");
    assert_eq!(at(&format!("{h}_sum")), "0.25");
    assert_eq!(at(&format!("{h}_bucket{{le=\"0.2\"}}")), "0");
    assert_eq!(at(&format!("{h}_bucket{{le=\"0.5\"}}")), "1");
    assert_eq!(at(&format!("{c}sessions_arrived_total")), "3");
    assert_eq!(at(&format!("{c}arrivals_refused_total")), "2");
    assert_eq!(at(&format!("{c}outstanding")), "2");
    // 11 counter series, 2 gauges, 2 histograms of 20 buckets, sum, count.
    assert_eq!(s.len(), 11 + 2 + 2 * 22);

    // The recorder's own tally says the same.
    let mut counts = Interval::default();
    recorder.take_interval(&mut counts);
    let t = counts.tally;
    assert_eq!(
        (
            t.ok,
            t.errors,
            t.timeouts,
            t.cancelled,
            t.retries,
            t.started
        ),
        (3, 2, 1, 1, 4, 3)
    );
    assert_eq!((t.gave_up, t.throttled, t.rejected), (2, 2, 1));
    assert_eq!((t.arrived, t.refused), (3, 2));
    assert_eq!(recorder.in_flight(), 1);
    assert_eq!(recorder.outstanding(), 2);
    // Counters are cumulative: taking the interval resets nothing.
    assert_eq!(metrics.render(), text);
}

#[test]
fn the_exposition_names_units_and_totals_as_prometheus_asks() {
    let text = ClientMetrics::new().render();
    assert!(text.starts_with(
        "# HELP retry_storm_client_attempts Attempts ended, by outcome: ok (2xx in time), "
    ));
    let expected = "# TYPE retry_storm_client_attempts counter\n\
                    retry_storm_client_attempts_total{outcome=\"ok\"} 0\n\
                    retry_storm_client_attempts_total{outcome=\"error\"} 0\n\
                    retry_storm_client_attempts_total{outcome=\"timeout\"} 0\n\
                    retry_storm_client_attempts_total{outcome=\"cancelled\"} 0\n\
                    # HELP retry_storm_client_retries Attempts that were retries (not the \
                    first of their request).\n\
                    # TYPE retry_storm_client_retries counter\n\
                    retry_storm_client_retries_total 0\n";
    assert!(text.contains(expected), "{text}");
    let histogram = "# TYPE retry_storm_client_request_duration_seconds histogram\n\
                     # UNIT retry_storm_client_request_duration_seconds seconds\n\
                     retry_storm_client_request_duration_seconds_sum 0.0\n\
                     retry_storm_client_request_duration_seconds_count 0\n\
                     retry_storm_client_request_duration_seconds_bucket{le=\"0.001\"} 0\n";
    assert!(text.contains(histogram), "{text}");
    assert!(
        text.ends_with(
            "retry_storm_client_request_duration_seconds_bucket{le=\"+Inf\"} 0\n# EOF\n"
        )
    );
    // Help texts continued across source lines keep one space at the
    // break.
    for help in text.lines().filter(|l| l.starts_with("# HELP")) {
        assert!(!help.contains("  "), "{help}");
    }
    // Every family once, counters without `_total` in their TYPE line.
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .collect();
    assert_eq!(
        families,
        [
            "retry_storm_client_attempts counter",
            "retry_storm_client_retries counter",
            "retry_storm_client_requests_started counter",
            "retry_storm_client_requests_given_up counter",
            "retry_storm_client_throttled counter",
            "retry_storm_client_rejected_locally counter",
            "retry_storm_client_in_flight gauge",
            "retry_storm_client_sessions_arrived counter",
            "retry_storm_client_arrivals_refused counter",
            "retry_storm_client_outstanding gauge",
            "retry_storm_client_attempt_duration_seconds histogram",
            "retry_storm_client_request_duration_seconds histogram",
        ]
    );
}

fn pool_with_limiter() -> ServerConfig {
    ServerConfig {
        shape: Shape::Pool(PoolModel::default()),
        limiter: Some(LimiterConfig::new(LimiterKind::Aimd)),
        ..ServerConfig::default()
    }
}

#[test]
fn a_server_counts_as_its_counts_do() {
    let metrics = ServerMetrics::new(&pool_with_limiter());
    let mut counts = ServerCounts::default();
    for _ in 0..4 {
        metrics.admitted();
    }
    for why in [
        Refusal::Shed,
        Refusal::Shed,
        Refusal::Full,
        Refusal::Limited,
        Refusal::Rejected,
        Refusal::Failed,
    ] {
        metrics.refused(why);
        counts.refused(why);
    }
    for (exit, received, held) in [
        (Exit::Served, true, ms(250)),
        (Exit::Served, false, ms(2_000)),
        (Exit::Cancelled, false, ms(500)),
        (Exit::Dropped, true, ms(125)),
    ] {
        metrics.departed(exit, received, held);
        counts.departed(exit, received, held);
    }
    let gauges = Gauges {
        queue: 3,
        busy: 4,
        limit: Some(5),
    };
    // 4 in flight from 1 s to 1.5 s, 10 to 3.5 s: 2 + 20 request-seconds.
    for (at, concurrency) in [(0, 0), (1_000, 4), (1_500, 10), (3_500, 7)] {
        metrics.state(ms(at), concurrency, ms(750), gauges);
    }

    let s = samples(&metrics.render());
    let at = |key: &str| s.get(key).unwrap_or_else(|| panic!("no {key}")).as_str();
    let p = "retry_storm_server_";
    assert_eq!(at(&format!("{p}admitted_total")), "4");
    assert_eq!(at(&format!("{p}completed_total")), "1");
    assert_eq!(at(&format!("{p}abandoned_total")), "2");
    assert_eq!(at(&format!("{p}shed_total")), "2");
    for reason in DROP_REASONS {
        assert_eq!(
            at(&format!("{p}dropped_total{{reason=\"{reason}\"}}")),
            "1",
            "{reason}"
        );
    }
    assert_eq!(at(&format!("{p}concurrency")), "7");
    assert_eq!(at(&format!("{p}concurrency_seconds_total")), "22.0");
    assert_eq!(at(&format!("{p}queue_length")), "3");
    assert_eq!(at(&format!("{p}busy_workers")), "4");
    assert_eq!(at(&format!("{p}concurrency_limit")), "5");
    assert_eq!(at(&format!("{p}modelled_delay_seconds")), "0.75");
    let h = format!("{p}time_in_model_seconds");
    let series = |what: &str, outcome: &str| format!("{h}_{what}{{outcome=\"{outcome}\"}}");
    assert_eq!(at(&series("count", "completed")), "1");
    assert_eq!(at(&series("sum", "completed")), "0.25");
    assert_eq!(at(&series("count", "abandoned")), "2");
    assert_eq!(at(&series("sum", "abandoned")), "2.5");
    assert_eq!(at(&series("count", "dropped")), "1");
    assert_eq!(at(&series("sum", "dropped")), "0.125");
    let bucket = |le: &str, outcome: &str| {
        at(&format!("{h}_bucket{{le=\"{le}\",outcome=\"{outcome}\"}}")).to_string()
    };
    assert_eq!(bucket("0.2", "completed"), "0");
    assert_eq!(bucket("0.5", "completed"), "1");
    assert_eq!(bucket("0.5", "abandoned"), "1");
    assert_eq!(bucket("1.0", "abandoned"), "1");
    assert_eq!(bucket("2.0", "abandoned"), "2");
    assert_eq!(bucket("0.1", "dropped"), "0");
    assert_eq!(bucket("0.2", "dropped"), "1");

    // The interval's counts say the same.
    assert_eq!((counts.completed, counts.abandoned, counts.shed), (1, 2, 2));
    assert_eq!(
        (
            counts.refused,
            counts.limited,
            counts.rejected,
            counts.dropped
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(counts.failed, 1);
    assert_eq!(counts.abandoned_time, ms(2_500));
}

#[test]
fn a_curve_has_no_workers_and_no_limit() {
    let text = ServerMetrics::new(&ServerConfig::default()).render();
    let s = samples(&text);
    assert!(!text.contains("busy_workers") && !text.contains("concurrency_limit"));
    assert!(s.contains_key("retry_storm_server_queue_length"));
    // 5 counters and 5 drop reasons, 3 gauges, 3 histograms of 22 series.
    assert_eq!(s.len(), 5 + 5 + 3 + 3 * 22);
    let with = ServerMetrics::new(&pool_with_limiter()).render();
    assert_eq!(samples(&with).len(), s.len() + 2);
}

#[test]
fn a_scraper_gets_the_format_it_asks_for() {
    // What Prometheus 2.42 sends.
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                      version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert_eq!(Format::accepted(Some(prometheus)), Format::OpenMetrics);
    assert_eq!(
        Format::accepted(Some("text/plain, application/openmetrics-text; q=0.2")),
        Format::OpenMetrics
    );
    for other in [
        None,
        Some("*/*"),
        Some("text/plain;version=0.0.4"),
        Some("application/openmetrics-text;q=0"),
        Some("application/openmetrics-text; q=0.0, text/plain"),
    ] {
        assert_eq!(Format::accepted(other), Format::Prometheus, "{other:?}");
    }
    assert!(
        Format::OpenMetrics
            .content_type()
            .starts_with("application/openmetrics-text")
    );
    assert_eq!(
        Format::Prometheus.content_type(),
        "text/plain; version=0.0.4; charset=utf-8"
    );
}

#[test]
fn the_prometheus_format_names_counters_by_their_samples_and_has_no_unit_or_eof() {
    let metrics = ClientMetrics::new();
    metrics.attempt_started();
    metrics.attempt_finished(&attempt(Outcome::Ok, false, ms(250)));
    let open = metrics.render();
    let text = Format::Prometheus.encode(open.clone());
    assert_eq!(Format::OpenMetrics.encode(open.clone()), open);
    assert!(
        !text.contains("# EOF") && !text.contains("# UNIT"),
        "{text}"
    );
    let expected = "# HELP retry_storm_client_retries_total Attempts that were retries (not \
                    the first of their request).\n\
                    # TYPE retry_storm_client_retries_total counter\n\
                    retry_storm_client_retries_total 0\n";
    assert!(text.contains(expected), "{text}");
    let histogram = "# TYPE retry_storm_client_attempt_duration_seconds histogram\n\
                     retry_storm_client_attempt_duration_seconds_sum 0.25\n\
                     retry_storm_client_attempt_duration_seconds_count 1\n";
    assert!(text.contains(histogram), "{text}");
    assert!(
        text.contains(
            "# TYPE retry_storm_client_in_flight gauge\nretry_storm_client_in_flight 0\n"
        )
    );
    // The samples are the same, line for line.
    let samples = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(samples(&text), samples(&open));
    // Every TYPE line of a counter names `_total`, as its samples do.
    for line in text.lines().filter(|l| l.ends_with(" counter")) {
        assert!(line.ends_with("_total counter"), "{line}");
    }
}

#[test]
fn a_tier_labels_every_series_and_a_plain_server_or_client_carries_no_label() {
    let config = pool_with_limiter();
    // A server that calls nothing serves its metrics as they are.
    let plain = ServerExposition::plain(&config);
    assert!(plain.calls.is_none());
    assert_eq!(plain.render(), ServerMetrics::new(&config).render());
    assert!(!plain.render().contains("tier=") && !ClientMetrics::new().render().contains("tier="));
    assert!(!ClientMetrics::new().render().contains("callers_gone"));

    let tier = ServerExposition::tier(&config, "edge");
    tier.server.admitted();
    tier.server.refused(Refusal::Shed);
    let recorder = ClientRecorder::with_metrics(tier.calls.clone());
    for outcome in [Outcome::Error, Outcome::Ok] {
        recorder.attempt_started();
        recorder.attempt_finished(attempt(outcome, outcome == Outcome::Ok, ms(5)));
    }
    recorder.session_arrived();
    recorder.session_arrived();
    recorder.caller_gone();
    let text = tier.render();
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    let s = samples(&text);
    // Every series, the server's and the calls', carries the label first.
    for key in s.keys() {
        let (_, labels) = key.split_once('{').unwrap_or_else(|| panic!("{key}"));
        assert!(labels.starts_with("tier=\"edge\""), "{key}");
    }
    let at = |key: &str| s.get(key).unwrap_or_else(|| panic!("no {key}")).as_str();
    let t = "tier=\"edge\"";
    assert_eq!(
        at(&format!("retry_storm_server_admitted_total{{{t}}}")),
        "1"
    );
    assert_eq!(at(&format!("retry_storm_server_shed_total{{{t}}}")), "1");
    let c = "retry_storm_client_";
    assert_eq!(at(&format!("{c}attempts_total{{{t},outcome=\"ok\"}}")), "1");
    assert_eq!(
        at(&format!("{c}attempts_total{{{t},outcome=\"error\"}}")),
        "1"
    );
    assert_eq!(at(&format!("{c}retries_total{{{t}}}")), "1");
    assert_eq!(at(&format!("{c}outstanding{{{t}}}")), "2");
    assert_eq!(at(&format!("{c}callers_gone_total{{{t}}}")), "1");
    // The server's families, then the calls' (the client's and one of a
    // tier's own), each once.
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .collect();
    let server = ServerMetrics::new(&config).render();
    let client = ClientMetrics::new().render();
    let mut expected: Vec<&str> = [&server, &client]
        .into_iter()
        .flat_map(|t| t.lines().filter_map(|l| l.strip_prefix("# TYPE ")))
        .collect();
    expected.push("retry_storm_client_callers_gone counter");
    assert_eq!(families, expected);
    // A name that needs escaping is escaped.
    let quoted = ServerExposition::tier(&config, "a \"b\"").render();
    assert!(
        quoted.contains("retry_storm_server_admitted_total{tier=\"a \\\"b\\\"\"} 0"),
        "{quoted}"
    );
}
