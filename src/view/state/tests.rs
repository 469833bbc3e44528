use super::*;
use crate::report::counts::{ClientCounts, ServerCounts};
use crate::report::rows::ServerState;

fn client_row(unix_ms: u64, elapsed_s: f64, ok: u64, timeouts: u64) -> ClientRow {
    let mut counts = ClientCounts::default();
    counts.tally.ok = ok;
    counts.tally.timeouts = timeouts;
    ClientRow::new(
        &counts,
        Duration::from_secs(1),
        3,
        unix_ms,
        Duration::from_secs_f64(elapsed_s),
    )
}

fn server_row(unix_ms: u64) -> ServerRow {
    ServerRow::new(
        ServerCounts::default(),
        Duration::from_secs(1),
        ServerState::default(),
        unix_ms,
        Duration::from_millis(unix_ms - 10_000),
    )
}

fn plan() -> Plan {
    Plan {
        warmup: Duration::from_secs(2),
        pause: Duration::from_secs(1),
        observe: Duration::from_secs(4),
        confirm: Duration::from_secs(1),
        rest: Duration::from_secs(6),
    }
}

fn storm(batches: usize) -> Board {
    let mut board = Board::new(
        Setup::Storm {
            title: "storm".into(),
            batches,
        },
        0,
    );
    board.apply(
        Feed::Batch {
            index: 0,
            names: vec!["fixed".into(), "exponential".into()],
            start_ms: 100_000,
            plan: plan(),
        },
        |_, _| String::new(),
    );
    board
}

#[test]
fn a_storm_projects_its_phases_until_they_happen() {
    let mut board = storm(3);
    let t = board.batch.unwrap().timeline();
    assert_eq!(
        (t.stop_ms, t.resume_ms, t.end_ms, t.confirm_ms),
        (102_000, 103_000, 107_000, 108_000)
    );
    assert_eq!(
        board.time_left(100_500),
        Some(("start", 1_500, 8_500 + 2 * 9_000))
    );
    // The stop comes late: what follows moves with it.
    let late = |phase, at_ms| Feed::Phase { phase, at_ms };
    board.apply(late(Phase::Pause, 102_200), |_, _| String::new());
    let t = board.batch.unwrap().timeline();
    assert_eq!((t.stop_ms, t.resume_ms), (102_200, 103_200));
    assert_eq!(board.time_left(102_700).unwrap().0, "pause");
    assert_eq!(board.time_left(102_700).unwrap().1, 500);
    // The pause is shaded up to now, then up to the resume.
    let (shade, spans) = board.shaded(0, 102_700);
    assert_eq!(shade, Shade::Paused);
    assert_eq!(spans[0].to_ms, 102_700);
    board.apply(late(Phase::Observe, 103_300), |_, _| String::new());
    assert_eq!(board.shaded(1, 200_000).1[0].to_ms, 103_300);
    assert_eq!(board.x_max(0, 100_000), 9.3);
}

#[test]
fn a_new_batch_keeps_the_last_one_verdicts_and_the_selection_in_range() {
    let mut board = storm(2);
    board.select(-1);
    assert_eq!(board.selected, 1);
    board.apply(
        Feed::Status {
            run: 1,
            status: Status::ClientRow(client_row(101_000, 1.0, 90, 0)),
        },
        |_, _| String::new(),
    );
    assert_eq!(board.runs[1].client.len(), 1);
    board.apply(
        Feed::Batch {
            index: 1,
            names: vec!["fixed.run2".into()],
            start_ms: 200_000,
            plan: plan(),
        },
        |b, i| format!("{} rows", b.runs[i].client.len()),
    );
    assert_eq!(
        board.finished,
        vec![
            ("fixed".to_string(), "0 rows".to_string()),
            ("exponential".to_string(), "1 rows".to_string())
        ]
    );
    assert_eq!(board.selected, 0);
    assert_eq!(board.origin_ms(0), 200_000);
}

#[test]
fn a_tiers_rows_go_to_its_run_and_a_hand_run_tiers_calls_to_its_own() {
    let mut board = storm(1);
    let no = |_: &Board, _: usize| String::new();
    let calls = || Status::CallRow(client_row(101_000, 1.0, 40, 0));
    let server = || Status::ServerRow(server_row(101_000));
    // Tier 2 reports first: tier 1 waits, empty, in its place.
    for (tier, status) in [(2, calls()), (2, server()), (1, server())] {
        board.apply(
            Feed::Tier {
                run: 1,
                tier,
                status,
            },
            no,
        );
    }
    let tiers = &board.runs[1].tiers;
    assert_eq!(tiers.len(), 2);
    assert_eq!((tiers[0].server.len(), tiers[0].calls.len()), (1, 0));
    assert_eq!((tiers[1].server.len(), tiers[1].calls.len()), (1, 1));
    assert!(board.runs[1].server.is_empty() && board.runs[0].tiers.is_empty());
    // No tier 0, no run 5: nothing.
    board.apply(
        Feed::Tier {
            run: 1,
            tier: 0,
            status: server(),
        },
        no,
    );
    board.apply(
        Feed::Tier {
            run: 5,
            tier: 1,
            status: server(),
        },
        no,
    );
    assert_eq!(board.runs[1].tiers.len(), 2);
    // A server run by hand as a tier keeps its calls' rows beside its own.
    let mut tier = Board::new(
        Setup::Server {
            title: String::new(),
            interval: Duration::from_secs(1),
        },
        0,
    );
    tier.apply(
        Feed::Status {
            run: 0,
            status: calls(),
        },
        no,
    );
    tier.apply(
        Feed::Status {
            run: 0,
            status: server(),
        },
        no,
    );
    assert_eq!(
        (tier.runs[0].server.len(), tier.runs[0].calls.len()),
        (1, 1)
    );
}

#[test]
fn a_client_shows_time_left_and_its_unanswered_intervals() {
    let mut board = Board::new(
        Setup::Client {
            title: String::new(),
            interval: Duration::from_secs(1),
            duration: Some(Duration::from_secs(30)),
        },
        50_000,
    );
    assert_eq!(board.time_left(60_000), Some(("run", 20_000, 20_000)));
    for (at, ok, timeouts) in [(1, 90, 0), (2, 0, 40), (3, 0, 45), (4, 80, 0)] {
        board.apply(
            Feed::Status {
                run: 0,
                status: Status::ClientRow(client_row(
                    100_000 + at * 1_000,
                    at as f64,
                    ok,
                    timeouts,
                )),
            },
            |_, _| String::new(),
        );
    }
    // The origin comes from the rows once there are some.
    assert_eq!(board.origin_ms(0), 100_000);
    assert_eq!(board.time_left(110_000), Some(("run", 20_000, 20_000)));
    assert_eq!(
        board.shaded(0, 0),
        (
            Shade::Unanswered,
            vec![Span {
                from_ms: 101_000,
                to_ms: 103_000
            }]
        )
    );
    assert_eq!(board.x_max(0, 105_000), 30.0);
}

#[test]
fn a_server_silent_for_longer_than_its_interval_was_stopped() {
    let rows: Vec<ServerRow> = [11_000, 12_000, 13_050, 33_000, 34_000]
        .into_iter()
        .map(server_row)
        .collect();
    assert_eq!(
        silences(&rows, 1_000),
        vec![Span {
            from_ms: 13_050,
            to_ms: 32_000
        }]
    );
    let board = Board::new(
        Setup::Server {
            title: String::new(),
            interval: Duration::from_secs(1),
        },
        9_000,
    );
    assert_eq!(board.time_left(10_000), None);
    assert_eq!(board.shaded(0, 10_000), (Shade::Stopped, Vec::new()));
    assert_eq!(board.x_max(0, 12_000), 10.0, "ten intervals at least");
}
