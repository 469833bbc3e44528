//! A chain's figures per layer, from the rows each layer wrote: every
//! tier's server rows and its calls' rows, and the backend's server rows
//! (docs/chains.md, "Figures per layer"). Both engines write the same
//! rows, so both give the same figures.

use serde::Serialize;

use super::estimate::Spread;
use super::rows::{ClientRow, ServerRow};

/// A tier's rows over a run: its server's, and its calls'.
pub type TierRows = (Vec<ServerRow>, Vec<ClientRow>);

/// One layer of a chain over a run: a tier, or the backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TierFigures {
    /// Requests that reached it: served, refused at its door, dropped,
    /// worked on for callers that had gone, and held at its last report.
    pub attempts_received: u64,
    /// Attempts its calls sent inward (absent for the backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts_sent: Option<u64>,
    /// Requests it answered OK (a tier: its call succeeded).
    pub ok: u64,
    /// Requests it answered with an error: refused at its door (a failing
    /// backend's failures included) or dropped from its queue, or (a
    /// tier) its call failed or timed out.
    pub failed: u64,
    /// Requests it worked on for callers that had gone: its own work
    /// finished or dropped for nobody (or still held for nobody at its last
    /// report), and (a tier) calls whose caller went before their answer.
    pub work_for_gone_callers: u64,
    /// The most requests in its own work at once. A tier's calls waiting
    /// inward are not in it: see `peak_calls_in_flight`.
    pub peak_concurrency: u64,
    /// A tier's most calls in flight at a report (absent for the backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_calls_in_flight: Option<u64>,
}

/// A chain over a run: each layer from the client inward, the backend
/// last, and the attempts that reached the backend per request the
/// client started.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChainFigures {
    /// The layers, from the client inward; the backend last.
    pub tiers: Vec<TierFigures>,
    /// Attempts the backend received per logical request the client
    /// started (none if it started none).
    pub backend_attempts_per_request: Option<f64>,
}

/// A layer's figures over a case's runs: each one's median and range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TierSpread {
    /// See [`TierFigures::attempts_received`].
    pub attempts_received: Option<Spread>,
    /// See [`TierFigures::attempts_sent`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts_sent: Option<Spread>,
    /// See [`TierFigures::ok`].
    pub ok: Option<Spread>,
    /// See [`TierFigures::failed`].
    pub failed: Option<Spread>,
    /// See [`TierFigures::work_for_gone_callers`].
    pub work_for_gone_callers: Option<Spread>,
    /// See [`TierFigures::peak_concurrency`].
    pub peak_concurrency: Option<Spread>,
    /// See [`TierFigures::peak_calls_in_flight`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_calls_in_flight: Option<Spread>,
}

/// A chain's figures over a case's runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChainSpread {
    /// The layers, from the client inward; the backend last.
    pub tiers: Vec<TierSpread>,
    /// See [`ChainFigures::backend_attempts_per_request`].
    pub backend_attempts_per_request: Option<Spread>,
}

impl ChainSpread {
    /// The chain's figures over `runs` (each of the same chain); `None`
    /// without runs.
    pub fn of(runs: &[&ChainFigures]) -> Option<ChainSpread> {
        let layers = runs.first()?.tiers.len();
        let tiers = (0..layers)
            .map(|i| {
                let spread = |f: fn(&TierFigures) -> Option<u64>| {
                    Spread::of(
                        runs.iter()
                            .map(|r| r.tiers.get(i).and_then(f).map(|v| v as f64)),
                    )
                };
                TierSpread {
                    attempts_received: spread(|t| Some(t.attempts_received)),
                    attempts_sent: spread(|t| t.attempts_sent),
                    ok: spread(|t| Some(t.ok)),
                    failed: spread(|t| Some(t.failed)),
                    work_for_gone_callers: spread(|t| Some(t.work_for_gone_callers)),
                    peak_concurrency: spread(|t| Some(t.peak_concurrency)),
                    peak_calls_in_flight: spread(|t| t.peak_calls_in_flight),
                }
            })
            .collect();
        Some(ChainSpread {
            tiers,
            backend_attempts_per_request: Spread::of(
                runs.iter().map(|r| r.backend_attempts_per_request),
            ),
        })
    }
}

/// Each row's length in seconds: from the previous row's time, the first
/// from the start.
fn spans<R>(rows: &[R], elapsed: impl Fn(&R) -> f64) -> impl Iterator<Item = (&R, f64)> {
    let mut previous = 0.0;
    rows.iter().map(move |row| {
        let at = elapsed(row);
        let secs = (at - previous).max(0.0);
        previous = at;
        (row, secs)
    })
}

/// A rate column summed over the rows, as a count.
fn total<R>(rows: &[R], elapsed: impl Fn(&R) -> f64, rate: impl Fn(&R) -> f64) -> u64 {
    spans(rows, elapsed)
        .map(|(row, secs)| rate(row) * secs)
        .sum::<f64>()
        .round() as u64
}

/// A layer's figures from its server rows and, for a tier, its calls'.
pub fn tier_figures(server: &[ServerRow], calls: Option<&[ClientRow]>) -> TierFigures {
    let at = |r: &ServerRow| r.elapsed_s;
    let served = total(server, at, |r| r.completed_per_s);
    let abandoned = total(server, at, |r| r.abandoned_per_s);
    let turned_away = total(server, at, |r| {
        r.shed_per_s
            + r.refused_per_s.unwrap_or(0.0)
            + r.limited_per_s.unwrap_or(0.0)
            + r.rejected_per_s.unwrap_or(0.0)
            + r.dropped_per_s.unwrap_or(0.0)
            + r.failed_per_s.unwrap_or(0.0)
    });
    let last = server.last();
    let held = last.map_or(0, |r| r.concurrency);
    let held_for_nobody = last.map_or(0, |r| r.abandoned_held);
    let peak_concurrency = server.iter().map(|r| r.max_concurrency).max().unwrap_or(0);
    let received = served + abandoned + turned_away + held;
    match calls {
        None => TierFigures {
            attempts_received: received,
            attempts_sent: None,
            ok: served,
            failed: turned_away,
            work_for_gone_callers: abandoned + held_for_nobody,
            peak_concurrency,
            peak_calls_in_flight: None,
        },
        Some(calls) => {
            let at = |r: &ClientRow| r.elapsed_s;
            let gone = total(calls, at, |r| r.gone_per_s.unwrap_or(0.0));
            TierFigures {
                attempts_received: received,
                attempts_sent: Some(total(calls, at, |r| r.sent_per_s)),
                // A call's request succeeds with exactly one OK attempt.
                ok: total(calls, at, |r| r.ok_per_s),
                failed: turned_away + total(calls, at, |r| r.gave_up_per_s),
                work_for_gone_callers: abandoned + held_for_nobody + gone,
                peak_concurrency,
                peak_calls_in_flight: Some(
                    calls
                        .iter()
                        .filter_map(|r| r.outstanding)
                        .max()
                        .unwrap_or(0),
                ),
            }
        }
    }
}

/// A chain's figures: `tiers` (each one's server rows and calls' rows)
/// from the client inward, the `backend`'s server rows, and the `client`'s
/// rows for the requests it started.
pub fn chain_figures(
    tiers: &[TierRows],
    backend: &[ServerRow],
    client: &[ClientRow],
) -> ChainFigures {
    let mut layers: Vec<TierFigures> = tiers
        .iter()
        .map(|(server, calls)| tier_figures(server, Some(calls)))
        .collect();
    layers.push(tier_figures(backend, None));
    let started = total(client, |r| r.elapsed_s, |r| r.requests_per_s);
    let reached = layers.last().map_or(0, |b| b.attempts_received);
    ChainFigures {
        tiers: layers,
        backend_attempts_per_request: (started > 0)
            .then(|| (reached as f64 / started as f64 * 100.0).round() / 100.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(elapsed_s: f64, completed: f64, shed: f64, concurrency: u64) -> ServerRow {
        ServerRow {
            elapsed_s,
            completed_per_s: completed,
            shed_per_s: shed,
            concurrency,
            max_concurrency: concurrency + 1,
            ..ServerRow::default()
        }
    }

    fn calls(elapsed_s: f64, sent: f64, ok: f64, gave_up: f64, gone: f64) -> ClientRow {
        ClientRow {
            elapsed_s,
            sent_per_s: sent,
            ok_per_s: ok,
            gave_up_per_s: gave_up,
            requests_per_s: ok + gave_up,
            outstanding: Some(3),
            gone_per_s: Some(gone),
            ..ClientRow::default()
        }
    }

    #[test]
    fn a_layers_figures_are_its_rates_times_its_intervals() {
        // Two half-second rows: 10 + 20 served a second, 4 shed a second in
        // the second; 2 held at the end.
        let rows = [server(0.5, 10.0, 0.0, 1), server(1.0, 20.0, 4.0, 2)];
        let backend = tier_figures(&rows, None);
        assert_eq!(
            backend,
            TierFigures {
                attempts_received: 5 + 10 + 2 + 2,
                attempts_sent: None,
                ok: 15,
                failed: 2,
                work_for_gone_callers: 0,
                peak_concurrency: 3,
                peak_calls_in_flight: None,
            }
        );
        // A tier: its calls sent 60 attempts a second over one second, 8
        // OK, 2 given up, 1 whose caller had gone.
        let call_rows = [calls(1.0, 60.0, 8.0, 2.0, 1.0)];
        let tier = tier_figures(&rows, Some(&call_rows));
        assert_eq!(tier.attempts_sent, Some(60));
        assert_eq!((tier.ok, tier.failed), (8, 2 + 2));
        assert_eq!(tier.work_for_gone_callers, 1);
        assert_eq!(tier.peak_calls_in_flight, Some(3));
    }

    #[test]
    fn the_backends_attempts_per_request_are_over_the_clients_requests() {
        let client = [ClientRow {
            elapsed_s: 2.0,
            requests_per_s: 5.0,
            ..ClientRow::default()
        }];
        // 10 requests; the backend received 80 (shed) in 2 s.
        let backend = [server(2.0, 0.0, 40.0, 0)];
        let tier = (
            vec![server(2.0, 0.0, 0.0, 0)],
            vec![calls(2.0, 40.0, 0.0, 10.0, 0.0)],
        );
        let chain = chain_figures(&[tier], &backend, &client);
        assert_eq!(chain.tiers.len(), 2);
        assert_eq!(chain.tiers[1].attempts_received, 80);
        assert_eq!(chain.backend_attempts_per_request, Some(8.0));
        assert_eq!(
            chain_figures(&[], &backend, &[]).backend_attempts_per_request,
            None
        );
    }
}
