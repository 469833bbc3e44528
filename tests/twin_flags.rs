//! A fitted twin's `server` flags are real flags: the server's own parser
//! reads them into the shape and curve the fit describes. (The command
//! line is above the model in the layers, so the check is made here.)

use std::time::Duration;

use clap::Parser;
use retry_storm::cli::ServerArgs;
use retry_storm::model::fit::shapes::{DEFAULT_QUEUE, EXPONENTIAL_SCALE};
use retry_storm::model::fit::{Family, FitOptions, Level, Twin, fit};
use retry_storm::model::server::ServerConfig;

fn parsed(twin: &Twin) -> ServerConfig {
    let flags = twin.flags();
    let argv = std::iter::once("server".to_string()).chain(flags.iter().cloned());
    ServerArgs::try_parse_from(argv)
        .and_then(|args| args.config())
        .unwrap_or_else(|e| panic!("{}: {e}", flags.join(" ")))
}

fn assert_builds(twin: &Twin) {
    let config = parsed(twin);
    let wanted = twin.server_config();
    assert_eq!(config.shape, wanted.shape, "{}", twin.flags().join(" "));
    assert_eq!(config.model, wanted.model, "{}", twin.flags().join(" "));
    // The parsed server predicts what the twin does.
    if let Some(curve) = config.curve() {
        assert_eq!(Some(curve), twin.curve());
    }
}

#[test]
fn every_shape_writes_flags_the_server_reads() {
    let ms = Duration::from_millis;
    let twins = [
        Twin::Exponential {
            base: Duration::from_micros(20_130),
            limit: 32,
            factor: 1.30079,
            scale: EXPONENTIAL_SCALE,
        },
        Twin::Exponential {
            base: Duration::from_nanos(1),
            limit: 0,
            factor: 1.0,
            scale: EXPONENTIAL_SCALE,
        },
        Twin::Linear {
            base: ms(20),
            slope: Duration::from_nanos(993_600),
        },
        Twin::Linear {
            base: Duration::from_nanos(1),
            slope: Duration::from_nanos(7),
        },
        Twin::Pool {
            workers: 20,
            service_time: Duration::from_micros(49_760),
            distribution: Family::Exponential,
            queue: DEFAULT_QUEUE,
        },
        Twin::Pool {
            workers: 1,
            service_time: ms(3000),
            distribution: Family::Constant,
            queue: 5000,
        },
    ];
    for twin in &twins {
        assert_builds(twin);
    }
}

#[test]
fn a_fit_writes_flags_the_server_reads_for_every_shape() {
    // A linear service measured exactly: every shape's fit, good or bad,
    // must still be a server the flags build.
    let levels: Vec<Level> = [1u32, 2, 4, 8, 16, 32, 64, 128, 256, 512]
        .into_iter()
        .map(|n| {
            let r = 0.020 + 0.001 * f64::from(n);
            Level {
                concurrency: n,
                throughput: f64::from(n) / r,
                latency_mean_s: r,
                latency_p50_s: r,
                latency_p99_s: r,
                error_share: 0.0,
            }
        })
        .collect();
    let fits = fit(&levels, &FitOptions::default()).unwrap();
    assert_eq!(fits.best().twin.name(), "linear");
    assert_eq!(
        fits.best().twin.flags().join(" "),
        "--model linear --base-delay 20ms --slope 1ms"
    );
    for shape in &fits.shapes {
        assert_builds(&shape.twin);
    }
}
