//! The twin as the storm takes it: the fitted shape's server flags, with
//! what the probe found of work for clients that have gone, in every case
//! of a scenario (`twin.toml`) that `storm run` and `storm sweep` read.

use crate::experiment::scenario::{Scenario, join_flags};
use crate::model::fit::gone::Gone;
use crate::model::fit::{Fits, Twin};
use crate::model::wire::Transport;

/// The server flags of `twin`, the shape the fit chose, given what the
/// probe of gone clients found: `--on-disconnect cancel` where the service
/// dropped the work of clients that went; nothing where it went on with
/// it (the server's default) or where the probe could not tell (the
/// default again, said in the twin's notes).
///
/// Over HTTP/2 the twin reads every stream waiting at a resume, without
/// the project's server's GOAWAY past 20 streams reset before accept
/// (`--max-pending-resets`, h2's limit): the probe cannot see an HTTP/2
/// stack's limit, and the proxy's stall, the outage `--verify` stands
/// for a stop with by default, takes every stream in the same way.
pub fn server_flags(twin: &Twin, gone: Option<Gone>, transport: Transport) -> Vec<String> {
    let mut flags = twin.flags();
    if gone == Some(Gone::Cancels) {
        flags.extend(["--on-disconnect".to_string(), "cancel".to_string()]);
    }
    if transport == Transport::Http2 {
        flags.extend(["--max-pending-resets".to_string(), u32::MAX.to_string()]);
    }
    flags
}

/// The twin's scenario: `cases` (one per policy, with their client flags
/// and any server flags the user added) each given the fitted server's
/// flags before their own, so that the user's come last.
pub fn scenario(cases: &Scenario, server: &[String]) -> Scenario {
    let mut twin = cases.clone();
    for case in &mut twin.cases {
        let own = std::mem::take(&mut case.server);
        case.server = server.iter().cloned().chain(own).collect();
    }
    twin
}

/// `twin.toml`: the scenario with a header saying what it is the twin of,
/// how well it fits, and the commands that use it.
pub fn file(twin: &Scenario, fits: &Fits, target: &str, folder: &str) -> String {
    let best = fits.best();
    let server = twin
        .cases
        .first()
        .map(|c| join_flags(&c.server))
        .unwrap_or_default();
    let mut header = vec![
        format!("A virtual twin of {target}, made by storm calibrate:"),
        format!(
            "the {} shape fitted best of {} levels probed (error {:.3}, a log ratio:",
            best.twin.name(),
            fits.levels,
            best.score.error
        ),
        "about the relative error of latency and throughput together).".to_string(),
        format!("Its server: {server}"),
        String::new(),
        "Predict where each policy breaks, in virtual time:".to_string(),
        format!("  storm sweep {folder}/twin.toml --out {folder}/predict"),
        "Run it as one storm, in virtual time or as a real server:".to_string(),
        format!("  storm run {folder}/twin.toml --engine sim"),
    ];
    for note in &best.notes {
        header.push(format!("Note: {note}"));
    }
    let mut text: String = header
        .iter()
        .map(|line| {
            if line.is_empty() {
                "#\n".to_string()
            } else {
                format!("# {line}\n")
            }
        })
        .collect();
    text.push_str(&twin.to_toml());
    text
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::fit::{FitOptions, Level, fit};

    fn pool() -> Twin {
        Twin::Pool {
            workers: 4,
            service_time: Duration::from_millis(10),
            distribution: crate::model::fit::Family::Constant,
            queue: 1000,
        }
    }

    #[test]
    fn a_service_that_drops_gone_clients_work_gets_cancel() {
        let flags = |gone| server_flags(&pool(), gone, Transport::Http1).join(" ");
        let base = "--model pool --workers 4 --service-time 10ms \
                    --service-distribution constant --queue 1000";
        assert_eq!(
            flags(Some(Gone::Cancels)),
            format!("{base} --on-disconnect cancel")
        );
        assert_eq!(flags(Some(Gone::Continues)), base);
        assert_eq!(flags(Some(Gone::Unclear)), base);
        assert_eq!(flags(None), base);
    }

    #[test]
    fn over_http2_the_twin_reads_every_stream_at_a_resume() {
        let flags = server_flags(&pool(), None, Transport::Http2).join(" ");
        assert!(
            flags.ends_with(" --max-pending-resets 4294967295"),
            "{flags}"
        );
    }

    #[test]
    fn every_case_gets_the_twins_server_before_its_own_flags() {
        let cases = Scenario::from_toml(
            "seed = 7\n[[case]]\nname = \"fixed\"\nclient = \"--strategy fixed --clients 50\"\n\
             server = \"--queue-timeout codel\"\n\
             [[case]]\nname = \"none\"\nclient = \"--strategy fixed --max-attempts 1\"\n",
        )
        .unwrap();
        let server = server_flags(&pool(), None, Transport::Http1);
        let twin = scenario(&cases, &server);
        assert_eq!(
            join_flags(&twin.cases[0].server),
            format!("{} --queue-timeout codel", join_flags(&server))
        );
        assert_eq!(twin.cases[1].server, server);
        assert_eq!(twin.cases[0].client, cases.cases[0].client);
        assert_eq!(twin.seed, 7);
    }

    #[test]
    fn the_file_says_what_it_is_and_reads_back_as_the_scenario() {
        // Levels a pool of 4 workers at 10 ms gives in a closed loop.
        let levels: Vec<Level> = [1u32, 2, 4, 8, 16, 32]
            .iter()
            .map(|&n| {
                let r = 0.010 * f64::from(n.max(4)) / 4.0;
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
        let cases = Scenario::from_toml(
            "seed = 3\n[[case]]\nname = \"fixed\"\nclient = \"--strategy fixed\"\n",
        )
        .unwrap();
        let twin = scenario(
            &cases,
            &server_flags(&fits.best().twin, None, Transport::Http1),
        );
        let text = file(&twin, &fits, "http://127.0.0.1:8080/", "out");
        assert!(
            text.starts_with("# A virtual twin of http://127.0.0.1:8080/"),
            "{text}"
        );
        assert!(
            text.contains("the pool shape fitted best of 6 levels"),
            "{text}"
        );
        assert!(
            text.contains("storm sweep out/twin.toml --out out/predict"),
            "{text}"
        );
        let back = Scenario::from_toml(&text).unwrap();
        assert_eq!(back.cases, twin.cases);
        assert!(join_flags(&back.cases[0].server).starts_with("--model pool --workers 4"));
    }
}
