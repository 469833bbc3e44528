//! The screen: a header with the program's start-up line, the phase and
//! the time left; the charts; the last interval's figures (and a storm
//! run's verdict so far); a footer with the keys. It adapts to the
//! terminal: the figures go beside the charts when there is room, below
//! them when not, and a terminal too small for charts gets the figures
//! alone.

use std::time::Duration;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::Style;
use ratatui::text::{Line as Text, Span};
use ratatui::widgets::{Block, Paragraph, Row, Table, Wrap};

use super::charts::{self, Plot};
use super::feed::Setup;
use super::figures::{client_figures, storm_figures, tier_figures};
use super::forming::{Tone, verdict};
use super::proxy;
use super::state::{Board, RunState};
use super::style::Look;

/// Width of the figures beside the charts.
const SIDE: u16 = 40;

fn left(ms: u64) -> String {
    format!("{:.0}s", (ms as f64 / 1e3).ceil())
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, board: &Board, look: Look, now_ms: u64) {
    let area = frame.area();
    // The start-up line wraps to as many lines as it needs (up to three),
    // the status line below it.
    let width = usize::from(area.width.saturating_sub(2)).max(1);
    let title = board.setup.title().chars().count();
    let title_lines = title.div_ceil(width).clamp(1, 3) as u16;
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(title_lines + 3),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(self::header(board, look, now_ms), header);
    frame.render_widget(self::footer(board, look), footer);
    let body = match board.setup {
        Setup::Storm { .. } if board.runs.is_empty() => {
            frame.render_widget(Paragraph::new("starting the servers..."), body);
            return;
        }
        Setup::Storm { .. } => {
            let height = (board.runs.len() + board.finished.len()) as u16 + 3;
            let [runs, rest] = Layout::vertical([
                Constraint::Length(height.min(body.height / 3).max(4)),
                Constraint::Fill(1),
            ])
            .areas(body);
            frame.render_widget(self::runs(board, look, now_ms), runs);
            rest
        }
        _ => body,
    };
    let run = board.selected.min(board.runs.len() - 1);
    let (plots, figures) = match board.setup {
        Setup::Server { .. } => (
            [charts::concurrency, charts::answers].map(|p| p(board, run, now_ms)),
            tier_figures(&board.runs[run], look),
        ),
        Setup::Client { .. } => (
            [charts::attempts, charts::in_flight].map(|p| p(board, run, now_ms)),
            client_figures(board.runs[run].client.last()),
        ),
        Setup::Proxy { .. } => (
            [proxy::traffic, proxy::occupancy].map(|p| p(board, run, now_ms)),
            proxy::proxy_figures(board.runs[run].proxy.last(), look),
        ),
        Setup::Storm { .. } => (
            [charts::attempts, charts::concurrency].map(|p| p(board, run, now_ms)),
            storm_figures(board, run, look, now_ms),
        ),
    };
    let name = match board.setup {
        Setup::Storm { .. } => format!("{}: ", board.runs[run].name),
        _ => String::new(),
    };
    let title = |plot: &Plot| Block::bordered().title(format!(" {name}{} ", plot.title));
    let figures_block = Block::bordered().title(format!(" {name}last interval "));
    if body.height < 10 || body.width < 30 {
        frame.render_widget(Paragraph::new(figures).wrap(Wrap { trim: true }), body);
        return;
    }
    let (graphs, side) = if body.width >= SIDE + 40 {
        let [graphs, side] =
            Layout::horizontal([Constraint::Fill(1), Constraint::Length(SIDE)]).areas(body);
        (graphs, Some(side))
    } else if body.height >= 24 {
        let [graphs, below] = Layout::vertical([
            Constraint::Fill(1),
            Constraint::Length(figures.len() as u16 + 2),
        ])
        .areas(body);
        (graphs, Some(below))
    } else {
        (body, None)
    };
    let [top, bottom] = Layout::vertical([Constraint::Fill(3), Constraint::Fill(2)]).areas(graphs);
    charts::render(&plots[0], title(&plots[0]), look, top, frame.buffer_mut());
    charts::render(
        &plots[1],
        title(&plots[1]),
        look,
        bottom,
        frame.buffer_mut(),
    );
    if let Some(side) = side {
        frame.render_widget(
            Paragraph::new(figures)
                .block(figures_block)
                .wrap(Wrap { trim: true }),
            side,
        );
    }
}

fn header(board: &Board, look: Look, now_ms: u64) -> Paragraph<'static> {
    let (program, title) = (board.setup.program(), board.setup.title());
    let elapsed = Duration::from_millis(now_ms.saturating_sub(board.origin_ms(board.selected)));
    let mut status = vec![Span::styled(
        format!("running {}", charts::clock(elapsed.as_secs_f64())),
        look.strong(),
    )];
    if let (Setup::Storm { batches, .. }, Some(batch)) = (&board.setup, &board.batch) {
        status.push(Span::raw(format!(
            " · batch {} of {batches}",
            batch.index + 1
        )));
    }
    if let Some((phase, in_phase, all)) = board.time_left(now_ms) {
        if phase != "run" {
            status.push(Span::styled(format!(" · {phase}"), look.strong()));
            status.push(Span::raw(format!(", {} left in it", left(in_phase))));
        }
        status.push(Span::raw(format!(" · {} left", left(all))));
    }
    if let Some(interval) = board.interval() {
        status.push(Span::raw(format!(
            " · a row every {}",
            humantime::format_duration(interval)
        )));
    }
    if board.stopping {
        status.push(Span::styled(" · stopping", look.bad()));
    }
    Paragraph::new(vec![Text::raw(title.to_string()), Text::from(status)])
        .wrap(Wrap { trim: true })
        .block(Block::bordered().title(Span::styled(format!(" {program} "), look.strong())))
}

fn footer(board: &Board, look: Look) -> Paragraph<'static> {
    let mut keys = "q or Ctrl-C: stop, as Ctrl-C does · Ctrl-Z: suspend".to_string();
    if board.runs.len() > 1 {
        keys.push_str(" · Tab: next run");
    }
    if let Some(own) = &board.own_key {
        keys.push_str(&format!(" · {own}"));
    }
    if board.stopping {
        keys = "stopping: q again ends at once".to_string();
    }
    let mut line = vec![Span::styled(keys, look.dim())];
    if let Some(message) = &board.message {
        line.push(Span::raw(" · "));
        line.push(Span::styled(message.clone(), look.bad()));
    }
    Paragraph::new(Text::from(line))
}

/// The storm's runs: the batch's live figures and verdicts so far, then
/// the earlier batches' verdicts.
fn runs(board: &Board, look: Look, now_ms: u64) -> Table<'static> {
    let tone = |t: Tone| match t {
        Tone::Good => look.good(),
        Tone::Bad => look.bad(),
        Tone::Open => Style::new(),
    };
    // A column of the tiers once one has reported.
    let chains = board.runs.iter().any(|r| !r.tiers.is_empty());
    let mut rows = Vec::new();
    for (i, run) in board.runs.iter().enumerate() {
        let client = run.client.last();
        let verdict = verdict(board, i, now_ms).expect("a storm's run");
        let mut cells = vec![
            format!(
                "{} {}",
                if i == board.selected { '>' } else { ' ' },
                run.name
            ),
            client.map_or("-".into(), |r| format!("{:.1}", r.ok_per_s)),
            client.map_or("-".into(), |r| format!("{:.1}", r.timeouts_per_s)),
            run.server
                .last()
                .map_or("-".into(), |r| r.concurrency.to_string()),
        ];
        if chains {
            cells.push(tiers_cell(run));
        }
        cells.push(verdict.headline);
        let style = if i == board.selected {
            look.selected()
        } else {
            Style::new()
        };
        rows.push(Row::new(cells).style(style.patch(tone(verdict.tone))));
    }
    for (name, verdict) in &board.finished {
        let mut cells = vec![format!("  {name}")];
        cells.resize(if chains { 5 } else { 4 }, String::new());
        cells.push(verdict.clone());
        rows.push(Row::new(cells));
    }
    let names = board
        .runs
        .iter()
        .map(|r| &r.name)
        .chain(board.finished.iter().map(|(name, _)| name))
        .map(|name| name.chars().count())
        .max()
        .unwrap_or(0);
    let mut widths = vec![
        Constraint::Length(names.max(3) as u16 + 2),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(12),
    ];
    let mut header = vec!["  run", "OK/s", "timeouts/s", "concurrency"];
    if chains {
        let cells = board.runs.iter().map(|r| tiers_cell(r).chars().count());
        let width = cells.chain([TIERS.len()]).max().unwrap_or(0);
        widths.push(Constraint::Length(width as u16 + 2));
        header.push(TIERS);
    }
    widths.push(Constraint::Fill(1));
    header.push("verdict so far");
    Table::new(rows, widths)
        .header(Row::new(header).style(look.strong()))
        .block(Block::bordered().title(" runs "))
}

/// The runs table's column of a storm through chains.
const TIERS: &str = "tiers: conc./calls";

/// A run's tiers in the runs table, from the client's side inward: each
/// one's concurrency and calls in flight (`-` where it has not reported).
fn tiers_cell(run: &RunState) -> String {
    let tiers: Vec<String> = run
        .tiers
        .iter()
        .map(|t| {
            let figure = |n: Option<u64>| n.map_or("-".to_string(), |n| n.to_string());
            let concurrency = figure(t.server.last().map(|r| r.concurrency));
            let calls = figure(t.calls.last().map(|r| r.outstanding.unwrap_or(0)));
            format!("{concurrency}/{calls}")
        })
        .collect();
    if tiers.is_empty() {
        "-".into()
    } else {
        tiers.join(" ")
    }
}

/// The screen `board` draws at `now_ms` on a terminal of `width` by
/// `height`, without colour, as text.
#[cfg(test)]
pub(super) fn rendered(board: &Board, width: u16, height: u16, now_ms: u64) -> String {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|frame| draw(frame, board, Look { colour: false }, now_ms))
        .unwrap();
    let buffer = terminal.backend().buffer();
    buffer.content().iter().map(|c| c.symbol()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::counts::ServerCounts;
    use crate::report::rows::{ClientRow, ServerRow, ServerState};
    use crate::report::status::Status;
    use crate::view::feed::{Feed, Phase, Plan};

    /// A storm in its pause, two runs with a row each.
    fn storm() -> Board {
        let mut board = Board::new(
            Setup::Storm {
                title: "storm: fixed, exponential for a quick run".into(),
                batches: 2,
            },
            0,
        );
        let plan = Plan {
            warmup: Duration::from_secs(2),
            pause: Duration::from_secs(2),
            observe: Duration::from_secs(6),
            confirm: Duration::from_secs(1),
            rest: Duration::from_secs(7),
        };
        let no = |_: &Board, _: usize| String::new();
        let names = vec!["fixed".into(), "exponential".into()];
        let batch = Feed::Batch {
            index: 0,
            names,
            start_ms: 10_000,
            plan,
        };
        board.apply(batch, no);
        for run in 0..2 {
            let row = ClientRow {
                unix_ms: 11_000,
                elapsed_s: 1.0,
                ok_per_s: 95.0,
                errors_per_s: 0.0,
                timeouts_per_s: 0.0,
                retries_per_s: 0.0,
                in_flight: 10,
                p50_ms: Some(101.0),
                p99_ms: Some(104.5),
                max_ms: Some(110.0),
                gave_up_per_s: 0.0,
                throttled_per_s: 0.0,
                attempts_per_request: Some(1.0),
                requests_per_s: 95.0,
                sent_per_s: 95.0,
                cancelled_per_s: None,
                outstanding: None,
                refused_per_s: None,
                gone_per_s: None,
                connections: None,
            };
            let status = Status::ClientRow(row);
            board.apply(Feed::Status { run, status }, no);
        }
        let pause = Feed::Phase {
            phase: Phase::Pause,
            at_ms: 12_000,
        };
        board.apply(pause, no);
        board
    }

    fn screen(board: &Board, width: u16, height: u16) -> String {
        rendered(board, width, height, 13_000)
    }

    #[test]
    fn the_screen_follows_the_terminal_size() {
        let board = storm();
        let wide = screen(&board, 120, 40);
        for text in [
            "batch 1 of 2",
            "pause",
            "fixed: attempts per second",
            "fixed: server concurrency",
            "verdict so far",
            "latency p99   104.5 ms",
            "░ paused",
            "Tab: next run",
        ] {
            assert!(wide.contains(text), "{text}: {wide}");
        }
        // Narrow and tall: the figures below the charts.
        let narrow = screen(&board, 70, 50);
        assert!(
            narrow.contains("fixed: last interval") && narrow.contains("░"),
            "{narrow}"
        );
        // Small: the figures alone, no chart.
        let small = screen(&board, 40, 14);
        assert!(small.contains("OK") && !small.contains("░"), "{small}");
        // Tiny: no panic.
        screen(&board, 10, 3);
    }

    #[test]
    fn open_traffic_shows_its_sessions_held_and_arrivals_refused() {
        let mut board = storm();
        assert!(!screen(&board, 120, 40).contains("outstanding"));
        let row = ClientRow {
            outstanding: Some(4321),
            refused_per_s: Some(12.5),
            ..board.runs[0].client.last().unwrap().clone()
        };
        let status = Status::ClientRow(row);
        board.apply(Feed::Status { run: 0, status }, |_: &Board, _: usize| {
            String::new()
        });
        let text = screen(&board, 120, 40);
        assert!(text.contains("outstanding   4321"), "{text}");
        assert!(text.contains("refused       12.50"), "{text}");
    }

    #[test]
    fn the_selected_run_is_the_one_charted() {
        let mut board = storm();
        board.select(1);
        let text = screen(&board, 120, 40);
        assert!(text.contains("exponential: attempts per second"), "{text}");
        assert!(!text.contains("fixed: attempts per second"), "{text}");
    }

    fn server_row(concurrency: u64) -> ServerRow {
        let state = ServerState {
            concurrency,
            ..ServerState::default()
        };
        let counts = ServerCounts::default();
        let second = Duration::from_secs(1);
        ServerRow::new(counts, second, state, 11_000, second)
    }

    /// A tier's row of its calls: `ok` calls a second, 3 in flight, one
    /// caller gone a second.
    fn calls_row(ok: f64) -> ClientRow {
        ClientRow {
            ok_per_s: ok,
            requests_per_s: ok + 2.0,
            gave_up_per_s: 2.0,
            outstanding: Some(3),
            refused_per_s: Some(0.0),
            gone_per_s: Some(1.0),
            ..storm().runs[0].client[0].clone()
        }
    }

    #[test]
    fn a_tier_run_by_hand_shows_its_calls_beside_its_server() {
        let no = |_: &Board, _: usize| String::new();
        let mut board = Board::new(
            Setup::Server {
                title: "listening on http://127.0.0.1:8071/api: ..., then calls ...".into(),
                interval: Duration::from_secs(1),
            },
            10_000,
        );
        let status = Status::ServerRow(server_row(7));
        board.apply(Feed::Status { run: 0, status }, no);
        let plain = screen(&board, 120, 40);
        assert!(plain.contains("concurrency   7") && !plain.contains("calls inward"));
        let status = Status::CallRow(calls_row(95.0));
        board.apply(Feed::Status { run: 0, status }, no);
        let text = screen(&board, 120, 40);
        for figure in [
            "concurrency   7",
            "calls inward",
            "calls         97.00/s",
            "OK            95.00/s",
            "failed        2.00/s",
            "in flight     3",
            "callers gone  1.00/s",
        ] {
            assert!(text.contains(figure), "{figure}: {text}");
        }
    }

    #[test]
    fn a_storm_through_a_chain_shows_each_tiers_concurrency_and_calls() {
        let mut board = storm();
        assert!(!screen(&board, 120, 40).contains("tiers:"));
        let no = |_: &Board, _: usize| String::new();
        for (tier, concurrency) in [(1, 12), (2, 4)] {
            let status = Status::ServerRow(server_row(concurrency));
            board.apply(
                Feed::Tier {
                    run: 0,
                    tier,
                    status,
                },
                no,
            );
        }
        let status = Status::CallRow(calls_row(95.0));
        board.apply(
            Feed::Tier {
                run: 0,
                tier: 1,
                status,
            },
            no,
        );
        let text = screen(&board, 140, 50);
        // The runs table: tier 1 with 3 calls in flight, tier 2 not yet
        // reporting its calls; a run without tiers.
        assert!(text.contains("tiers: conc./calls"), "{text}");
        assert!(text.contains("12/3 4/-"), "{text}");
        // The selected run's figures, each tier's.
        for figure in [
            "tier 1        concurrency 12",
            "calls         95.0 OK/s, 2.0 failed/s",
            "in flight     3, callers gone 1.0/s",
            "tier 2        concurrency 4",
        ] {
            assert!(text.contains(figure), "{figure}: {text}");
        }
    }
}
