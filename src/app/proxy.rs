//! The `storm proxy` program: the fault proxy, from its flags to its exit
//! code, as `server` is run (its start-up line, report lines or live view,
//! CSV, status lines, metrics), its fault switched by SIGUSR1 and SIGUSR2,
//! the live view's `f` and the control endpoint.

use std::process::ExitCode;

use super::start::run_program;
use super::{live, metrics};
use crate::cli::ProxyArgs;
use crate::net::proxy::{self, Proxy};
use crate::net::server::outside_loopback;
use crate::net::signals::{self, UserSignals};
use crate::report::metrics::ProxyMetrics;
use crate::report::output::say;
use crate::report::status::StatusSink;
use crate::view::{OwnKey, Setup};

/// The live view's key that turns the fault on or off.
const TOGGLE: char = 'f';

/// Runs the proxy until SIGINT or SIGTERM.
pub(super) fn proxy(args: ProxyArgs) -> ExitCode {
    let (tui, status_fd) = (args.view.tui, args.report.status_fd);
    run_program(tui, status_fd, |status| serve(args, status))
}

async fn serve(args: ProxyArgs, status: Option<StatusSink>) -> ExitCode {
    let mut config = args.config().unwrap_or_else(|e| e.exit());
    let tui = args.view.tui;
    config.quiet |= tui;
    let why = "this proxy forwards whatever reaches it to --upstream";
    if let Some(warning) = outside_loopback(config.listen, why) {
        eprintln!("{warning}");
    }
    let served = match metrics::Served::start(args.report.metrics_listen, ProxyMetrics::new) {
        Ok(served) => served,
        Err(code) => return code,
    };
    let proxy = match Proxy::bind(config.clone(), served.metrics.clone()) {
        Ok(proxy) => proxy,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // Signals are handled from before the first line, so that anyone who
    // waits for it may switch the fault, or stop the proxy in order.
    let shutdown = signals::requested();
    let switches = match UserSignals::install() {
        Ok(switches) => switches,
        Err(e) => {
            eprintln!("error: cannot handle SIGUSR1 and SIGUSR2: {e}");
            return ExitCode::FAILURE;
        }
    };
    let description = proxy::describe(&config, &proxy.url());
    let control = proxy
        .control_url()
        .map_or(String::new(), |url| format!("; control at {url}"));
    say(format!("{description}{}{control}", served.note()));
    let switch = proxy.switch();
    let key = OwnKey {
        key: TOGGLE,
        help: format!("{TOGGLE}: fault on/off"),
        action: Box::new(move || switch.toggle()),
    };
    let setup = || Setup::Proxy {
        title: description,
        interval: config.report_interval,
    };
    let view = match live::open_with(tui, setup, Some(key)) {
        Ok(view) => view,
        Err(code) => return code,
    };
    let proxy = match live::sink(status, view.as_ref()) {
        Some(sink) => proxy.with_status(sink),
        None => proxy,
    };
    let summary = proxy.run(shutdown, switches).await;
    drop(view);
    say(summary);
    if signals::second_arrived() {
        signals::second();
    }
    ExitCode::SUCCESS
}
