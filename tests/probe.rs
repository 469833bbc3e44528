//! The probe of a real service against the project's own `server`, started
//! here at known shapes with every time divided by ten: the closed loop
//! measures what the shape predicts and the fit gives the shape back; the
//! probe stops at its bounds and when told; the second probe tells a
//! server that goes on with abandoned work from one that drops it.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{LINEAR_CURVE, ServerChild};
use retry_storm::model::fit::gone::Gone;
use retry_storm::model::fit::{FitOptions, Twin, fit};
use retry_storm::model::wire::{Transport, Wire};
use retry_storm::net::probe::{
    GoneConfig, LevelReport, Probe, ProbeConfig, ProbeEnd, ProbeEvent, gone, run,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The project's server with `shape`, every time divided by ten, its
/// draws seeded, its report lines rare (nobody reads them).
fn server(shape: &[&str]) -> ServerChild {
    ServerChild::quick(&[&["--seed", "7"][..], shape].concat())
}

/// A pool of 4 workers serving each request in exactly 10 ms.
const POOL: [&str; 8] = [
    "--model",
    "pool",
    "--workers",
    "4",
    "--service-time",
    "100ms",
    "--service-distribution",
    "constant",
];

fn config(target: &str, levels: &[u32], warmup: u64, hold: u64) -> ProbeConfig {
    ProbeConfig {
        target: target.to_string(),
        wire: Wire::default(),
        levels: levels.to_vec(),
        warmup: ms(warmup),
        hold: ms(hold),
        max_latency: Duration::from_secs(10),
        max_error_share: 0.01,
        timeout: Duration::from_secs(5),
    }
}

/// Runs the probe, never stopped, and says what each level measured.
fn probe(config: &ProbeConfig) -> Probe {
    let probe = run(config, &AtomicBool::new(false), &mut |_| {}).unwrap();
    for r in &probe.levels {
        eprintln!("{}", show(r));
    }
    probe
}

fn show(r: &LevelReport) -> String {
    let l = &r.level;
    format!(
        "N {:>3}: X {:7.1}/s, mean {:6.2} ms, p50 {:6.2} ms, p99 {:6.2} ms, \
         errors {:.3}, Little {:.3}, prober busy {:.3}",
        l.concurrency,
        l.throughput,
        l.latency_mean_s * 1e3,
        l.latency_p50_s * 1e3,
        l.latency_p99_s * 1e3,
        l.error_share,
        r.little_ratio,
        r.prober_busy,
    )
}

fn near(measured: f64, expected: f64, tolerance: f64) -> bool {
    (measured / expected - 1.0).abs() <= tolerance
}

#[test]
fn a_pool_is_measured_as_its_shape_predicts_and_fitted_back() {
    let server = server(&POOL);
    let probe = probe(&config(&server.url, &[1, 2, 4, 8, 16], 200, 800));
    assert_eq!(probe.end, ProbeEnd::Done);
    let n: Vec<u32> = probe.levels.iter().map(|r| r.level.concurrency).collect();
    assert_eq!(n, [1, 2, 4, 8, 16]);
    for r in &probe.levels {
        let l = &r.level;
        let clients = f64::from(l.concurrency);
        // X = min(N, W) / S, R = S max(1, N / W).
        let x = clients.min(4.0) / 0.010;
        let latency = 0.010 * (clients / 4.0).max(1.0);
        assert!(near(l.throughput, x, 0.25), "{}", show(r));
        assert!(near(l.latency_mean_s, latency, 0.25), "{}", show(r));
        assert!(l.latency_p50_s <= l.latency_p99_s, "{}", show(r));
        assert_eq!((r.errors, l.error_share), (0, 0.0), "{}", show(r));
        assert_eq!(r.attempts, r.ok);
        assert!(near(r.little_ratio, 1.0, 0.05), "{}", show(r));
        assert!(!r.prober_bound, "{}", show(r));
    }
    let fits = fit(
        &probe.levels.iter().map(|r| r.level).collect::<Vec<_>>(),
        &FitOptions::default(),
    )
    .unwrap();
    let best = fits.best();
    eprintln!("{:?} error {:.3}", best.twin, best.score.error);
    match best.twin {
        Twin::Pool {
            workers,
            service_time,
            ..
        } => {
            assert!((3..=5).contains(&workers), "{workers} workers");
            assert!(near(service_time.as_secs_f64(), 0.010, 0.25));
        }
        ref other => panic!("a pool fitted as {other:?}"),
    }
}

#[test]
fn a_linear_curve_is_fitted_back() {
    // 10 ms + 2 ms for each request in flight.
    let server = server(&LINEAR_CURVE);
    let probe = probe(&config(&server.url, &[1, 2, 4, 8, 16], 100, 500));
    assert_eq!(probe.end, ProbeEnd::Done);
    for r in &probe.levels {
        let latency = 0.010 + 0.002 * f64::from(r.level.concurrency);
        assert!(near(r.level.latency_mean_s, latency, 0.25), "{}", show(r));
        assert!(near(r.little_ratio, 1.0, 0.05), "{}", show(r));
    }
    let levels: Vec<_> = probe.levels.iter().map(|r| r.level).collect();
    let fits = fit(&levels, &FitOptions::default()).unwrap();
    eprintln!(
        "{:?} error {:.3}",
        fits.best().twin,
        fits.best().score.error
    );
    match fits.best().twin {
        Twin::Linear { base, slope } => {
            assert!(near(base.as_secs_f64(), 0.010, 0.2), "base {base:?}");
            assert!(near(slope.as_secs_f64(), 0.002, 0.2), "slope {slope:?}");
        }
        ref other => panic!("a linear curve fitted as {other:?}"),
    }
}

#[test]
fn the_probe_stops_after_the_first_level_past_its_latency_bound() {
    let server = server(&POOL);
    // 10 ms up to 4 clients, 40 ms at 16: the bound of 30 ms stops it
    // there, 20 ms above the levels before (a stray request of a loaded
    // machine passed 17 ms at one client).
    let config = ProbeConfig {
        max_latency: ms(30),
        ..config(&server.url, &[1, 2, 4, 16, 32], 100, 300)
    };
    let probe = probe(&config);
    assert_eq!(probe.end, ProbeEnd::LatencyBound);
    let last = probe.levels.last().unwrap();
    assert_eq!(probe.levels.len(), 4, "{}", show(last));
    assert!(last.level.latency_p99_s > 0.030, "{}", show(last));
}

#[test]
fn the_probe_stops_after_the_first_level_that_fails() {
    // Every request answered 500 at once.
    let server = server(&["--fail-rate", "1"]);
    let probe = probe(&config(&server.url, &[1, 2, 4, 8], 50, 100));
    assert_eq!(probe.end, ProbeEnd::Errors);
    assert_eq!(probe.levels.len(), 1);
    let r = &probe.levels[0];
    assert!(r.errors > 0 && r.ok == 0, "{}", show(r));
    assert_eq!((r.level.throughput, r.level.error_share), (0.0, 1.0));
    // Still a level the fit reads: positive times, p50 at most p99.
    let l = &r.level;
    assert!(l.latency_mean_s > 0.0 && l.latency_p50_s > 0.0 && l.latency_p50_s <= l.latency_p99_s);
}

#[test]
fn a_stop_drops_the_level_in_progress_and_keeps_those_before() {
    let server = server(&POOL);
    let stop = AtomicBool::new(false);
    let mut events = Vec::new();
    let mut stopped_at = None;
    // Each level would take 600 ms; the stop comes as the second starts.
    let config = config(&server.url, &[1, 2, 4], 200, 400);
    let probe = run(&config, &stop, &mut |event| match event {
        ProbeEvent::LevelStarted { concurrency } => {
            events.push(format!("started {concurrency}"));
            if concurrency == 2 {
                stop.store(true, Ordering::Relaxed);
                stopped_at = Some(Instant::now());
            }
        }
        ProbeEvent::LevelDone(r) => events.push(format!("done {}", r.level.concurrency)),
    })
    .unwrap();
    let took = stopped_at.unwrap().elapsed();
    assert_eq!(probe.end, ProbeEnd::Interrupted);
    assert_eq!(events, ["started 1", "done 1", "started 2"]);
    assert_eq!(probe.levels.len(), 1);
    assert_eq!(probe.levels[0].level.concurrency, 1);
    assert!(took < ms(400), "the level was dropped after {took:?}");

    // Set before the start: nothing is probed.
    let probe = run(&config, &stop, &mut |_| panic!("no event")).unwrap();
    assert_eq!((probe.levels.len(), probe.end), (0, ProbeEnd::Interrupted));
}

#[test]
fn a_target_that_cannot_be_probed_is_refused() {
    let stop = AtomicBool::new(false);
    for (target, levels) in [
        ("ftp://127.0.0.1:1/", vec![1]),
        ("http://127.0.0.1:1/", vec![1, 0]),
    ] {
        let config = config(target, &levels, 10, 10);
        let e = run(&config, &stop, &mut |_| {}).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    }
}

#[test]
fn a_stopped_gone_probe_says_so() {
    let config = GoneConfig {
        target: "http://127.0.0.1:1/".to_string(),
        wire: Wire::default(),
        abandon: 1,
        hold_open: ms(10),
        repeats: 1,
        timeout: ms(100),
    };
    let e = gone(&config, &AtomicBool::new(true)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "{e}");
    let e = gone(
        &GoneConfig {
            repeats: 0,
            ..config
        },
        &AtomicBool::new(false),
    )
    .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
}

/// The second probe against a pool of 2 workers at 20 ms: 40 abandoned
/// requests are 400 ms of work, some 290 ms of it left when their clients
/// go after 110 ms, mid-way through the requests in progress (which a
/// cancelling pool still finishes: up to 10 ms more for the lone request
/// after them).
fn abandoned(on_disconnect: &str, transport: Transport) -> retry_storm::net::probe::GoneProbe {
    let server = server(&[
        "--model",
        "pool",
        "--workers",
        "2",
        "--service-time",
        "200ms",
        "--service-distribution",
        "constant",
        "--on-disconnect",
        on_disconnect,
    ]);
    let config = GoneConfig {
        target: server.url.clone(),
        wire: Wire {
            transport,
            ..Wire::default()
        },
        abandon: 40,
        hold_open: ms(110),
        repeats: 3,
        timeout: Duration::from_secs(5),
    };
    let probe = gone(&config, &AtomicBool::new(false)).unwrap();
    eprintln!("{on_disconnect}: {probe:?}");
    let median = |v: &[f64]| retry_storm::model::fit::gone::median(v).unwrap();
    assert!(near(median(&probe.baseline_s), 0.020, 0.25), "{probe:?}");
    // 40 ahead of it on 2 workers, then its own: 420 ms from theirs,
    // 310 from its own, sent 110 ms after them.
    assert!(near(probe.loaded_s, 0.310, 0.25), "{probe:?}");
    assert_eq!((probe.baseline_s.len(), probe.after_s.len()), (3, 3));
    probe
}

#[test]
fn a_server_that_goes_on_with_abandoned_work_continues() {
    let probe = abandoned("continue", Transport::Http1);
    assert_eq!(probe.verdict, Gone::Continues, "{probe:?}");
    assert_eq!(probe.verdict.flag(), Some("continue"));
}

#[test]
fn a_server_that_drops_abandoned_work_cancels() {
    let probe = abandoned("cancel", Transport::Http1);
    assert_eq!(probe.verdict, Gone::Cancels, "{probe:?}");
    assert_eq!(probe.verdict.flag(), Some("cancel"));
}

#[test]
fn over_http2_streams_reset_on_a_live_connection_tell_the_two_apart() {
    // The same probe with the abandoned requests as streams of one h2c
    // connection, each reset as its client goes, the connection kept.
    let probe = abandoned("continue", Transport::Http2);
    assert_eq!(probe.verdict, Gone::Continues, "{probe:?}");
    let probe = abandoned("cancel", Transport::Http2);
    assert_eq!(probe.verdict, Gone::Cancels, "{probe:?}");
}
