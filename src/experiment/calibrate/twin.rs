//! The twin as the storm takes it: the fitted shape's server flags, with
//! what the probe found of work for clients that have gone, in every case
//! of a scenario (`twin.toml`) that `storm run` and `storm sweep` read.

use crate::experiment::scenario::{Scenario, join_flags};
use crate::model::fit::gone::Gone;
use crate::model::fit::queue::{Listen, Queue};
use crate::model::fit::{Fits, Twin};
use crate::model::wire::Transport;

/// The server flags of `twin`, the shape the fit chose, given what the
/// probe of gone clients found: `--on-disconnect cancel` where the service
/// dropped the work of clients that went; nothing where it went on with
/// it (the server's default) or where the probe could not tell (the
/// default again, said in the twin's notes).
///
/// And given where the burst probe found the service keeps requests
/// ([`Queue`]): a pool's queue is its listen backlog (`--queue backlog
/// --backlog D`), or an application queue of the places found (`--queue
/// K`; where it held them all, the burst's count is a lower bound, and
/// the fit's queue, if longer, stays); a curve
/// has no queue of its own, but a backlog found is its `--backlog`, the
/// kernel's queue while it is stopped. A backlog cannot drop the work of
/// a client that went (the server refuses `--on-disconnect cancel` with
/// `--queue backlog`): where both were found, cancelling weighs more, and
/// the pool's queue is an application queue as deep as the backlog.
///
/// Where the kernel told the service's listen queue (`listen`), that is
/// the twin's `--backlog` whatever its other queue: the connections the
/// kernel holds while the service is stopped, which the server's default
/// (`net.core.somaxconn`) would otherwise stand for.
///
/// Over HTTP/2 the twin reads every stream waiting at a resume, without
/// the project's server's GOAWAY past 20 streams reset before accept
/// (`--max-pending-resets`, h2's limit): the probe cannot see an HTTP/2
/// stack's limit, and the proxy's stall, the outage `--verify` stands
/// for a stop with by default, takes every stream in the same way.
pub fn server_flags(
    twin: &Twin,
    gone: Option<Gone>,
    queue: Option<Queue>,
    listen: Option<Listen>,
    transport: Transport,
) -> Vec<String> {
    let cancels = gone == Some(Gone::Cancels);
    // The kernel's queue while stopped; and whether the pool's queue is it.
    let mut backlog = listen.map(|l| l.holds().saturating_sub(1));
    let mut in_backlog = false;
    let mut shaped = *twin;
    if let Twin::Pool { queue: places, .. } = &mut shaped {
        match queue {
            Some(Queue::Backlog { depth }) if !cancels => {
                backlog = Some(depth);
                in_backlog = true;
            }
            Some(Queue::Backlog { depth: n }) | Some(Queue::Refuses { places: n }) => *places = n,
            // A lower bound: the fit's queue stays if it is longer.
            Some(Queue::Holds { places: n }) => *places = (*places).max(n),
            None => {}
        }
    } else if let Some(Queue::Backlog { depth }) = queue {
        backlog = Some(depth);
    }
    let mut flags = shaped.flags();
    if in_backlog && let Some(i) = flags.iter().position(|f| f == "--queue") {
        flags[i + 1] = "backlog".to_string();
    }
    if let Some(depth) = backlog {
        flags.extend(["--backlog".to_string(), depth.to_string()]);
    }
    if cancels {
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
            "the {} shape, chosen of those fitted to {} levels probed (error {:.3}, a log ratio:",
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
        let flags = |gone| server_flags(&pool(), gone, None, None, Transport::Http1).join(" ");
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
    fn the_queue_the_burst_found_is_the_twins() {
        let flags = |queue, gone| {
            server_flags(&pool(), gone, Some(queue), None, Transport::Http1).join(" ")
        };
        let base = "--model pool --workers 4 --service-time 10ms --service-distribution constant";
        assert_eq!(
            flags(Queue::Backlog { depth: 1000 }, None),
            format!("{base} --queue backlog --backlog 1000")
        );
        assert_eq!(
            flags(Queue::Refuses { places: 8 }, None),
            format!("{base} --queue 8")
        );
        assert_eq!(
            flags(Queue::Holds { places: 2044 }, None),
            format!("{base} --queue 2044")
        );
        // A burst smaller than the fit's queue does not shorten it.
        assert_eq!(
            flags(Queue::Holds { places: 480 }, None),
            format!("{base} --queue 1000")
        );
        // The server takes no cancel with a backlog: an application queue
        // as deep, and the cancel.
        assert_eq!(
            flags(Queue::Backlog { depth: 100 }, Some(Gone::Cancels)),
            format!("{base} --queue 100 --on-disconnect cancel")
        );
        // A curve's backlog is the kernel's while it is stopped; it has no
        // other queue.
        let curve = Twin::Linear {
            base: Duration::from_millis(5),
            slope: Duration::from_millis(1),
        };
        let curve_flags =
            |queue| server_flags(&curve, None, Some(queue), None, Transport::Http1).join(" ");
        assert_eq!(
            curve_flags(Queue::Backlog { depth: 300 }),
            "--model linear --base-delay 5ms --slope 1ms --backlog 300"
        );
        assert_eq!(
            curve_flags(Queue::Holds { places: 2048 }),
            "--model linear --base-delay 5ms --slope 1ms"
        );
    }

    #[test]
    fn the_kernels_listen_queue_is_the_twins_backlog_whatever_its_queue() {
        let told = Some(Listen {
            listeners: 1,
            backlog: 128,
        });
        let flags = |queue, gone| {
            server_flags(&pool(), gone, Some(queue), told, Transport::Http1).join(" ")
        };
        let base = "--model pool --workers 4 --service-time 10ms --service-distribution constant";
        // An application queue in front of listen(128): the kernel's 129
        // wait while it is stopped, not somaxconn's.
        assert_eq!(
            flags(Queue::Refuses { places: 8 }, None),
            format!("{base} --queue 8 --backlog 128")
        );
        assert_eq!(
            flags(Queue::Holds { places: 2044 }, None),
            format!("{base} --queue 2044 --backlog 128")
        );
        // A backlog found is the kernel's already; with a cancel, the
        // application queue as deep and the kernel's behind it.
        assert_eq!(
            flags(Queue::Backlog { depth: 128 }, None),
            format!("{base} --queue backlog --backlog 128")
        );
        assert_eq!(
            flags(Queue::Backlog { depth: 128 }, Some(Gone::Cancels)),
            format!("{base} --queue 128 --backlog 128 --on-disconnect cancel")
        );
        // Two listeners sharing the port hold 2 × 129: a backlog of 257.
        let two = Some(Listen {
            listeners: 2,
            backlog: 256,
        });
        let curve = Twin::Linear {
            base: Duration::from_millis(5),
            slope: Duration::from_millis(1),
        };
        assert_eq!(
            server_flags(
                &curve,
                None,
                Some(Queue::Holds { places: 64 }),
                two,
                Transport::Http1
            )
            .join(" "),
            "--model linear --base-delay 5ms --slope 1ms --backlog 257"
        );
    }

    #[test]
    fn over_http2_the_twin_reads_every_stream_at_a_resume() {
        let flags = server_flags(&pool(), None, None, None, Transport::Http2).join(" ");
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
        let server = server_flags(&pool(), None, None, None, Transport::Http1);
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
            &server_flags(&fits.best().twin, None, None, None, Transport::Http1),
        );
        let text = file(&twin, &fits, "http://127.0.0.1:8080/", "out");
        assert!(
            text.starts_with("# A virtual twin of http://127.0.0.1:8080/"),
            "{text}"
        );
        assert!(
            text.contains("the pool shape, chosen of those fitted to 6 levels"),
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
