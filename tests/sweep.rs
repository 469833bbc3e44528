//! The sweep through its public API, in virtual time: its settings, its
//! bisection against the grid beside it, and its refusals.

use std::time::Duration;

use clap::Parser;
use retry_storm::cli::{ProgramFlags, StormCli, StormCommand};
use retry_storm::experiment::StormError;
use retry_storm::experiment::sweep::{Outside, Point, Search, SweepConfig, run, write};
use retry_storm::report::search::EdgeSearch;

/// A sweep of fixed retries and the 2014 client, seed 1, from the storm's
/// own flags.
fn sweep(clients: Vec<u32>) -> SweepConfig {
    let flags = [
        "storm",
        "--engine",
        "sim",
        "--strategies",
        "fixed,exponential-2014",
        "--seed",
        "1",
        "--quiet",
        "--out",
        "unused",
    ];
    let args = StormCli::try_parse_from(flags).expect("valid flags").run;
    let storm = args
        .exec
        .storm(args.scenario().unwrap(), "storm".into(), None);
    SweepConfig {
        storm,
        clients,
        rates: vec![],
        thinks: vec![],
        timeouts: vec![Duration::from_secs(2)],
        limits: vec![30],
        seeds: 1,
        search: Search::Grid,
        precision: Duration::from_secs(1),
        max_runs: 100,
        pause: None,
        max_pause: Duration::from_secs(40),
        resolution: Duration::from_secs(5),
        step: Duration::from_secs(10),
        threads: 2,
        shard: retry_storm::model::shard::Shard::WHOLE,
    }
}

#[test]
fn settings_cover_every_combination_in_order() {
    let mut c = sweep(vec![100, 200]);
    c.limits = vec![30, 60];
    let s = c.settings();
    assert_eq!(s.len(), 2 * 2 * 2);
    assert_eq!((s[0].case, s[0].clients, s[0].limit), (0, Some(100), 30));
    assert_eq!(s[0].arrival_rate, None, "a closed case");
    assert_eq!((s[1].clients, s[1].limit), (Some(100), 60));
    assert_eq!(s[7].case, 1, "the second case, exponential-2014");
}

#[test]
fn a_run_repaused_is_the_run_its_flags_give() {
    // The sweep parses each seed's flags once and gives the other pauses'
    // runs that configuration with their own pause and length: it must be
    // what parsing gives, in compressed time too, for a server that draws
    // (its seed is the run's) and one that does not (its unused seed is
    // drawn anew at each parse).
    let mut storm = sweep(vec![100]).storm;
    storm.time_scale = 10.0;
    storm.scenario.cases[1].server = vec!["--model".into(), "pool".into()];
    let at = |pause: u64| {
        let mut s = storm.clone();
        // Milliseconds: the client's length is whole ones, rounded.
        s.scenario.protocol.pause = Duration::from_micros(pause * 1_000 + 500);
        s
    };
    for case in &storm.scenario.cases {
        let first = at(5_000).sim_config(case, 0, &ProgramFlags).unwrap();
        for pause in [0, 7_000, 40_000, 12_345] {
            let s = at(pause);
            let run = s.repaused(&first);
            let mut parsed = s.sim_config(case, 0, &ProgramFlags).unwrap();
            parsed.server.unused_seed_as(&run.server);
            assert_eq!(run, parsed, "case {}, pause {pause} ms", case.name);
            assert_ne!(run.client.duration, first.client.duration);
        }
    }
}

#[test]
fn bisection_finds_the_edge_that_the_grid_shows() {
    // Few clients so that the runs are quick; the 2014 client keeps
    // sending little while the server is down, fixed retries do not.
    let c = sweep(vec![300]);
    let report = run(&c, &ProgramFlags, |_| {}).unwrap();
    assert_eq!(report.critical.len(), 2);
    for critical in &report.critical {
        let grid: Vec<&Point> = report
            .points
            .iter()
            .filter(|p| p.case == critical.case && p.pause_s % 10.0 == 0.0)
            .collect();
        assert_eq!(grid.len(), 5, "0, 10, ... 40 s");
        // Every grid pause at or under the critical one recovers, and the
        // first one past it (if tried) does not.
        for p in &grid {
            if p.pause_s <= critical.critical_pause_s {
                assert!(p.recovered(), "{critical}: {p:?}");
            } else if p.pause_s <= critical.critical_pause_s + 5.0 {
                assert!(!p.recovered(), "{critical}: {p:?}");
            }
        }
        // With one run a pause, the share is 0 or 1, and T50 falls between
        // the critical pause and the next the bisection tried.
        let t50 = critical.t50_s.expect("the edge is within 40 s");
        assert!(
            (critical.critical_pause_s..=critical.critical_pause_s + 5.0).contains(&t50),
            "{critical}"
        );
        let (low, high) = (critical.t50_ci_low_s, critical.t50_ci_high_s);
        assert!(low.is_none() || low <= Some(t50), "{critical}");
        assert!(high.is_none() || high >= Some(t50), "{critical}");
    }
    let fixed = &report.critical[0];
    let original = &report.critical[1];
    assert_eq!(
        (fixed.case.as_str(), original.case.as_str()),
        ("fixed", "exponential-2014")
    );
    assert!(!fixed.overloaded && !original.overloaded);
    assert!(
        original.critical_pause_s > fixed.critical_pause_s,
        "{fixed} / {original}"
    );
    assert!(report.runs >= 10 && report.events > 0);
}

#[test]
fn bad_sweep_flags_are_refused_before_running() {
    let flags = ProgramFlags;
    let mut c = sweep(vec![100]);
    c.seeds = 0;
    assert!(matches!(c.validate(&flags), Err(StormError::Flags(_))));
    let mut c = sweep(vec![0]);
    c.seeds = 1;
    assert!(matches!(c.validate(&flags), Err(StormError::Flags(_))));
    let mut c = sweep(vec![100]);
    c.resolution = Duration::from_secs(60);
    assert!(matches!(c.validate(&flags), Err(StormError::Flags(_))));
    // The adaptive search holds T50 to a 400th of 40 s at best: 0.1 s.
    c.resolution = Duration::from_secs(5);
    c.search = Search::Adaptive;
    c.precision = Duration::from_millis(100);
    assert!(c.validate(&flags).is_ok());
    c.precision = Duration::from_millis(99);
    let refused = c.validate(&flags).unwrap_err().to_string();
    assert!(refused.contains("--precision: at least 0.1 s"), "{refused}");
}

#[test]
fn fixed_retries_at_1000_clients_recover_from_a_short_pause_only() {
    // The reference reading, on a smaller grid: P(recover) near 1
    // at a 1 s pause and near 0 from 10 s on.
    let mut c = sweep(vec![1000]);
    c.storm.scenario.cases.truncate(1);
    c.seeds = 5;
    c.max_pause = Duration::from_secs(12);
    c.resolution = Duration::from_secs(1);
    c.step = Duration::from_secs(1);
    let report = run(&c, &ProgramFlags, |_| {}).unwrap();
    let share = |pause: f64| {
        report
            .points
            .iter()
            .find(|p| p.pause_s == pause)
            .map(|p| p.p_recovered)
            .unwrap()
    };
    assert!(share(1.0) >= 0.8, "1 s: {}", share(1.0));
    for pause in 10..=12 {
        assert!(share(f64::from(pause)) <= 0.2, "{pause} s");
    }
    let edge = &report.critical[0];
    let t50 = edge.t50_s.unwrap();
    assert!((1.0..10.0).contains(&t50), "{edge}");
    assert!(
        edge.t90_s.unwrap() <= t50 && t50 <= edge.t10_s.unwrap(),
        "{edge:?}"
    );
    // Five runs a pause bound the interval: 5 of 5 is above one half at
    // 95 % (0.57-1.00), 0 of 5 below it (0.00-0.43).
    let (low, high) = (edge.t50_ci_low_s.unwrap(), edge.t50_ci_high_s.unwrap());
    assert!(
        1.0 <= low && low <= t50 && t50 <= high && high <= 10.0,
        "{edge}"
    );
    assert_eq!(edge.t50_outside, None);
}

#[test]
fn the_adaptive_search_finds_within_the_grids_interval_in_fewer_runs() {
    // Fixed retries at 1,000 clients, pauses to 12 s: the grid of every
    // second with 5 seeds each, and the adaptive search to a 1 s interval
    // with at most 60 runs, a seed each.
    let mut c = sweep(vec![1000]);
    c.storm.scenario.cases.truncate(1);
    c.seeds = 5;
    c.max_pause = Duration::from_secs(12);
    c.resolution = Duration::from_secs(1);
    c.step = Duration::from_secs(1);
    let grid = run(&c, &ProgramFlags, |_| {}).unwrap();
    c.search = Search::Adaptive;
    c.max_runs = 60;
    let adaptive = run(&c, &ProgramFlags, |_| {}).unwrap();
    let (g, a) = (&grid.critical[0], &adaptive.critical[0]);
    let t50 = a.t50_s.expect("the edge is within 12 s");
    let (low, high) = (g.t50_ci_low_s.unwrap(), g.t50_ci_high_s.unwrap());
    assert!(low <= t50 && t50 <= high, "adaptive {a} / grid {g}");
    assert!(
        adaptive.runs <= 60 && adaptive.runs < grid.runs / 2,
        "{} / {}",
        adaptive.runs,
        grid.runs
    );
    // Its interval holds its T50, and is as narrow as asked unless the
    // runs ran out; every run is in phase.csv, and critical.csv counts them.
    let (a_low, a_high) = (a.t50_ci_low_s.unwrap(), a.t50_ci_high_s.unwrap());
    assert!(a_low <= t50 && t50 <= a_high, "{a}");
    assert!(a_high - a_low <= 1.0 || adaptive.runs == 60, "{a}");
    let runs: u32 = adaptive.points.iter().map(|p| p.runs).sum();
    assert_eq!((u64::from(runs), a.seeds), (adaptive.runs, runs));
    assert!(a.t90_s.unwrap() <= t50 && t50 <= a.t10_s.unwrap(), "{a:?}");
    assert_eq!(
        a.critical_pause_s,
        t50.floor(),
        "T50 down to the resolution"
    );
    // The same search again gives the same answer: every run is seeded.
    let again = run(&c, &ProgramFlags, |_| {}).unwrap();
    assert_eq!(again.critical[0].t50_s, a.t50_s);
    assert_eq!(again.runs, adaptive.runs);
}

#[test]
fn each_load_starts_its_search_from_its_neighbours_t50() {
    // One run a load: the first load's at the middle of the pauses, the
    // second's where the first's posterior puts T50 after that run.
    let mut c = sweep(vec![300, 2000]);
    c.storm.scenario.cases.truncate(1);
    c.search = Search::Adaptive;
    c.max_runs = 1;
    c.max_pause = Duration::from_secs(40);
    let report = run(&c, &ProgramFlags, |_| {}).unwrap();
    let [first, second] = &report.points[..] else {
        panic!("one point a load: {:?}", report.points);
    };
    assert_eq!(first.pause_s, 20.0, "the middle of 0-40 s");
    let mut search = EdgeSearch::new(40.0, 0.5);
    search.observe(20.0, first.recovered_runs == 1);
    let t50 = search.found().t50.clamp(0.0, 40.0);
    assert_eq!(
        second.pause_s,
        search.nearest(t50),
        "{first:?} / {second:?}"
    );
    assert_ne!(second.pause_s, 20.0, "not the middle again");
}

#[test]
fn the_adaptive_search_says_where_an_edge_lies_beyond_the_pauses() {
    // 250 clients whose timeout is under the server's 100 ms base delay
    // never recover; with a 2 s timeout they always do after a pause of
    // 10 s at most (their edge is past 12 s).
    let mut c = sweep(vec![250]);
    c.storm.scenario.cases.truncate(1);
    c.search = Search::Adaptive;
    c.max_pause = Duration::from_secs(10);
    c.resolution = Duration::from_secs(1);
    c.timeouts = vec![Duration::from_millis(50), Duration::from_secs(2)];
    let report = run(&c, &ProgramFlags, |_| {}).unwrap();
    let (never, always) = (&report.critical[0], &report.critical[1]);
    assert!(never.overloaded && never.t50_s.is_none(), "{never:?}");
    assert_eq!(never.t50_outside, Some(Outside::Shorter), "{never:?}");
    assert!(always.at_least && always.t50_s.is_none(), "{always:?}");
    assert_eq!(always.t50_outside, Some(Outside::Longer), "{always:?}");
    assert_eq!(always.t50_ci_low_s, Some(10.0), "{always:?}");
    assert!(report.runs <= 2 * 20, "{} runs", report.runs);
}

#[test]
fn one_pause_judges_each_setting_once_and_finds_no_edge() {
    // Fixed retries after a 6 s pause: 300 clients recover (their edge is
    // past 10 s), 2,000 do not (theirs is under 3 s).
    let mut c = sweep(vec![300, 2000]);
    c.storm.scenario.cases.truncate(1);
    c.seeds = 4;
    c.pause = Some(Duration::from_secs(6));
    // The grid's flags are not used, so not checked.
    c.step = Duration::from_secs(600);
    let report = run(&c, &ProgramFlags, |_| {}).unwrap();
    assert!(report.critical.is_empty(), "no edge at one pause");
    assert_eq!(report.runs, 2 * 4);
    let shares: Vec<(Option<u32>, f64, u32)> = report
        .points
        .iter()
        .map(|p| (p.clients, p.pause_s, p.recovered_runs))
        .collect();
    assert_eq!(shares.len(), 2, "{shares:?}");
    assert_eq!((shares[0].0, shares[0].1), (Some(300), 6.0));
    assert!(shares[0].2 >= 3, "300 clients mostly recover: {shares:?}");
    assert_eq!(shares[1].0, Some(2000));
    assert!(shares[1].2 <= 1, "2,000 clients mostly do not: {shares:?}");
    assert!(report.points[0].to_string().contains("pause 6 s: "));
}

#[test]
fn a_setting_that_fails_without_a_pause_says_so() {
    // A timeout below the server's 100 ms base delay: every attempt times
    // out, pause or none.
    let mut c = sweep(vec![50]);
    c.storm.scenario.cases.truncate(1);
    c.timeouts = vec![Duration::from_millis(50)];
    c.seeds = 4;
    c.max_pause = Duration::from_secs(10);
    c.resolution = Duration::from_secs(5);
    c.step = Duration::from_secs(5);
    let report = run(&c, &ProgramFlags, |_| {}).unwrap();
    let edge = &report.critical[0];
    assert!(edge.overloaded, "{edge:?}");
    assert_eq!(edge.t50_s, None);
    assert_eq!(edge.t50_outside, Some(Outside::Shorter), "{edge:?}");
    assert!(edge.to_string().contains("fewer than half"), "{edge}");
    // Four runs that all failed put T50 below the shortest pause.
    assert_eq!(edge.t50_ci_high_s, Some(0.0), "{edge:?}");
}

#[test]
fn arrival_rates_are_a_load_axis_and_a_higher_rate_breaks_sooner() {
    // Fixed retries under open traffic: at 5 arrivals a second a 10 s
    // pause leaves a backlog the server clears; at 100 it does not.
    let mut c = sweep(vec![1000]);
    c.storm.scenario.cases.truncate(1);
    c.rates = vec![5.0, 100.0];
    c.seeds = 4;
    c.max_pause = Duration::from_secs(20);
    c.resolution = Duration::from_secs(10);
    c.step = Duration::from_secs(10);
    let settings = c.settings();
    assert_eq!(settings.len(), 2, "the rates replace the clients");
    assert!(settings.iter().all(|s| s.clients.is_none()));
    let report = run(&c, &ProgramFlags, |_| {}).unwrap();
    let rates: Vec<(Option<u32>, Option<f64>)> = report
        .critical
        .iter()
        .map(|c| (c.clients, c.arrival_rate))
        .collect();
    assert_eq!(rates, [(None, Some(5.0)), (None, Some(100.0))]);
    let share = |rate: f64| {
        let p = report
            .points
            .iter()
            .find(|p| p.arrival_rate == Some(rate) && p.pause_s == 10.0)
            .unwrap();
        assert!(p.to_string().contains(&format!("{rate} arrivals/s")), "{p}");
        p.p_recovered
    };
    assert!(share(5.0) >= 0.75, "5/s after 10 s: {}", share(5.0));
    assert!(share(100.0) <= 0.25, "100/s after 10 s: {}", share(100.0));
}

/// A temporary folder of this test's own.
fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sweep-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `storm sweep ARGS`'s configuration, or clap's refusal.
fn sweep_args(args: &[&str]) -> Result<SweepConfig, String> {
    let cli = StormCli::try_parse_from(["storm", "sweep"].iter().chain(args))
        .map_err(|e| e.to_string())?;
    let Some(StormCommand::Sweep(args)) = cli.command else {
        panic!("a sweep");
    };
    args.config().map_err(|e| e.to_string())
}

/// Closed, open and partly-open cases of one demand (30 requests a second),
/// swept by seconds: a few seeds, a coarse grid.
const MIXED: &str = "seed = 1\n\
    [[case]]\nname = \"closed\"\nclient = \"--strategy exponential-2014\"\n\
    [[case]]\nname = \"open\"\nclient = \"--strategy exponential-2014 --arrival-rate 30\"\n\
    [[case]]\nname = \"partly-open\"\n\
    client = \"--strategy exponential-2014 --arrival-rate 10 --session-requests 3\"\n";

const QUICK: &[&str] = &[
    "--search",
    "grid",
    "--seeds",
    "2",
    "--max-pause",
    "20s",
    "--step",
    "10s",
    "--resolution",
    "10s",
    "--threads",
    "2",
    "--quiet",
];

#[test]
fn a_scenario_of_closed_and_open_cases_sweeps_each_at_its_own_load() {
    let dir = temp_dir("mixed");
    let file = dir.join("mixed.toml");
    std::fs::write(&file, MIXED).unwrap();
    let out = dir.join("out");
    let mut args = vec![file.to_str().unwrap(), "--clients", "300"];
    args.extend(QUICK);
    args.extend(["--out", out.to_str().unwrap()]);
    let c = sweep_args(&args).unwrap();
    let report = run(&c, &ProgramFlags, |_| {}).unwrap();
    let loads: Vec<(&str, Option<u32>, Option<f64>)> = report
        .critical
        .iter()
        .map(|c| (c.case.as_str(), c.clients, c.arrival_rate))
        .collect();
    assert_eq!(
        loads,
        [
            ("closed", Some(300), None),
            ("open", None, Some(30.0)),
            ("partly-open", None, Some(10.0)),
        ]
    );
    // Every case holds its load without a pause.
    for p in report.points.iter().filter(|p| p.pause_s == 0.0) {
        assert!(p.recovered_runs > 0, "{p}");
    }
    write(&c, &report, "storm sweep mixed.toml").unwrap();
    let critical = std::fs::read_to_string(out.join("critical.csv")).unwrap();
    let rows: Vec<&str> = critical.lines().collect();
    assert!(rows[0].starts_with("case,clients,arrival_rate,lambda_s,"));
    assert!(rows[1].starts_with("closed,300,,,2.0,30,"), "{critical}");
    assert!(rows[2].starts_with("open,,30.0,,2.0,30,"), "{critical}");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("| case | clients | arrival rate (/s) |"));
    assert!(
        summary.contains("| partly-open | - | 10 | - | 2 | 30 |"),
        "{summary}"
    );
    let heat = std::fs::read_to_string(out.join("heatmap.svg")).unwrap();
    for label in ["closed, 300 clients", "open, 30 arrivals/s"] {
        assert!(heat.contains(label), "{label}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_sweeps_rate_refuses_its_clients_and_a_case_with_its_own_load() {
    let e = sweep_args(&["--clients", "300", "--arrival-rate", "30"]).unwrap_err();
    assert!(
        e.contains("'--clients <N,...>' cannot be used with '--arrival-rate"),
        "{e}"
    );
    // Closed cases of a file run open at the sweep's rate; an open case
    // of its own is refused before anything runs.
    let dir = temp_dir("own-rate");
    let file = dir.join("mixed.toml");
    std::fs::write(&file, MIXED).unwrap();
    let c = sweep_args(&[file.to_str().unwrap(), "--arrival-rate", "30,60"]).unwrap();
    let e = c.validate(&ProgramFlags).unwrap_err();
    assert!(matches!(e, StormError::Flags(_)), "{e}");
    assert!(e.to_string().contains("case open sets its own load"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sweep_of_a_target_is_a_real_search_with_its_own_defaults_and_refusals() {
    let target = ["--target", "http://127.0.0.1:1/api", "--outage", "stall"];
    let c = sweep_args(&[&target[..], &["--quick"]].concat()).unwrap();
    assert_eq!(
        c.storm.engine,
        retry_storm::experiment::scenario::Engine::Real
    );
    assert_eq!(c.storm.time_scale, 10.0);
    assert_eq!(c.threads, 1, "one storm at a time");
    assert_eq!(c.limits, [retry_storm::experiment::sweep::NO_LIMIT]);
    // A storm costs a minute or two: a coarser interval and fewer runs.
    assert_eq!((c.precision, c.max_runs), (Duration::from_secs(4), 30));
    assert!(c.measures());
    c.validate(&ProgramFlags).unwrap();
    // A twin's file (its cases' server flags the model's) is measured as
    // it is: no project server runs, its flags are left out.
    let dir = temp_dir("twin-target");
    let twin = dir.join("twin.toml");
    std::fs::write(
        &twin,
        "seed = 1\n[[case]]\nname = \"fixed\"\nclient = \"--strategy fixed --clients 50\"\n\
         server = \"--model pool --workers 20 --service-time 100ms --queue 1000\"\n",
    )
    .unwrap();
    let c = sweep_args(&[&[twin.to_str().unwrap()][..], &target[..]].concat()).unwrap();
    c.validate(&ProgramFlags).unwrap();
    assert_eq!(c.settings().len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
    // Without a target, the model's defaults.
    let model = sweep_args(&[]).unwrap();
    assert_eq!(
        (model.precision, model.max_runs, model.limits.clone()),
        (Duration::from_secs(1), 100, vec![30])
    );
    assert!(!model.measures());

    // Refused before any storm: what only the model or the project's
    // server has, several storms at once, and a target without its outage.
    let refused = |extra: &[&str]| -> String {
        match sweep_args(&[&target[..], extra].concat()) {
            Err(e) => e,
            Ok(c) => c.validate(&ProgramFlags).unwrap_err().to_string(),
        }
    };
    for (extra, says) in [
        (&["--limit", "40"][..], "--limit sets the project's server"),
        (
            &["--server-args", "--limit 40"][..],
            "no project server runs",
        ),
        (&["--search", "grid"][..], "measured by the adaptive search"),
        (&["--pause", "5s"][..], "measured by the adaptive search"),
        (&["--threads", "2"][..], "one at a time"),
    ] {
        let e = refused(extra);
        assert!(e.contains(says), "{extra:?}: {e}");
    }
    let e = sweep_args(&["--target", "http://127.0.0.1:1/api"])
        .unwrap()
        .validate(&ProgramFlags)
        .unwrap_err()
        .to_string();
    assert!(e.contains("say how to cause its outage"), "{e}");
    for alone in [&["--quick"][..], &["--calm", "1s"][..]] {
        let e = sweep_args(alone).unwrap_err();
        assert!(e.contains("--target"), "{alone:?}: {e}");
    }
}
