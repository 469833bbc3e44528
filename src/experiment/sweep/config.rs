//! What a sweep covers: its settings, and the case and storm of each run.

use std::time::Duration;

use super::super::scenario::{Case, format_duration};
use super::super::storm::{Storm, flag_value};
use crate::model::shard::Shard;
use crate::model::units::parse_duration;

/// A whole sweep.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// The experiment every point runs (cases, protocol, base seed); its
    /// pause is set per point, its engine is virtual.
    pub storm: Storm,
    /// Numbers of clients to sweep, for each closed case (one whose
    /// client flags hold no `--arrival-rate`) when `rates` is empty.
    pub clients: Vec<u32>,
    /// Arrival rates to sweep (sessions a second): every case then runs as
    /// open traffic at each (none: each case's own load).
    pub rates: Vec<f64>,
    /// Mean think times to sweep (none: the cases' own).
    pub thinks: Vec<Duration>,
    /// Client timeouts to sweep.
    pub timeouts: Vec<Duration>,
    /// Server limits (concurrency where latency starts to grow) to sweep.
    pub limits: Vec<u64>,
    /// Seeds per pause (base seed, base + 1, ...) of the grid and of one
    /// pause.
    pub seeds: u32,
    /// How each setting's runs are placed along the pause.
    pub search: Search,
    /// The adaptive search stops a setting once T50's 95 % interval is no
    /// wider than this.
    pub precision: Duration,
    /// The adaptive search stops a setting after this many runs, settled
    /// or not.
    pub max_runs: u32,
    /// One pause only: each setting is then a single point, and the map is
    /// over the settings instead of the pause (no edge, no bisection).
    pub pause: Option<Duration>,
    /// Longest pause tried.
    pub max_pause: Duration,
    /// Precision of the bisection's critical pause.
    pub resolution: Duration,
    /// Pause step of the grid.
    pub step: Duration,
    /// Worker threads.
    pub threads: usize,
    /// The share of the settings this process runs.
    pub shard: Shard,
}

/// How a sweep places each setting's runs along the pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Search {
    /// Each next run, with a seed of its own, where it tells most about
    /// T50 and the slope, until T50 is known to the precision asked
    /// ([`crate::report::search`]); a map's next load starts from its
    /// neighbour's T50.
    #[default]
    Adaptive,
    /// Every pause of a grid with every seed, and a bisection of the
    /// critical pause.
    Grid,
}

/// One line of the map: a case under one setting. Its load is either a
/// number of clients (closed) or an arrival rate (open), never both.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    /// The case, by its place in the scenario.
    pub case: usize,
    /// Number of clients (none: open traffic).
    pub clients: Option<u32>,
    /// Sessions arriving a second (none: a closed population).
    pub arrival_rate: Option<f64>,
    /// Mean think time, if the sweep sets it.
    pub think: Option<Duration>,
    /// Client timeout.
    pub timeout: Duration,
    /// Server limit.
    pub limit: u64,
}

/// The 2014 server's limit, the sweep's default.
pub const DEFAULT_LIMIT: u64 = 30;

/// The model of `case`'s server when it has no limit (a thread pool, the
/// linear curve): only the exponential curve, the default, has one.
pub(super) fn without_limit(case: &Case) -> Option<&str> {
    flag_value(&case.server, "--model").filter(|&model| model != "exponential")
}

/// The number of clients `case`'s own client flags give, if they give
/// one: the case keeps its own load (a twin written by `storm
/// calibrate` does). A value that is not a number reads as none here, and
/// the client's own parse refuses it when the settings are checked.
fn own_clients(case: &Case) -> Option<u32> {
    flag_value(&case.client, "--clients").and_then(|n| n.parse().ok())
}

/// The client timeout `case`'s own flags give, if they give one.
fn own_timeout(case: &Case) -> Option<Duration> {
    flag_value(&case.client, TIMEOUT).and_then(|d| parse_duration(d).ok())
}

/// The server limit `case`'s own server flags give, if they give one.
fn own_limit(case: &Case) -> Option<u64> {
    flag_value(&case.server, LIMIT).and_then(|n| n.parse().ok())
}

/// The client's flag of its timeout.
const TIMEOUT: &str = "--timeout";

/// The server's flag of its limit.
const LIMIT: &str = "--limit";

/// The arrival rate `case`'s own client flags give, if they give one: the
/// case is open (or partly open) traffic. A value that is not a number
/// reads as NaN, and the client's own parse refuses it when the sweep's
/// settings are checked.
fn own_rate(case: &Case) -> Option<f64> {
    flag_value(&case.client, ARRIVAL_RATE).map(|r| r.parse().unwrap_or(f64::NAN))
}

/// The client's flag of open traffic.
pub(super) const ARRIVAL_RATE: &str = "--arrival-rate";

/// A setting's load: clients, or sessions arriving a second.
type Load = (Option<u32>, Option<f64>);

pub(super) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl SweepConfig {
    /// The loads `case` runs under: the sweep's arrival rates if it has
    /// any; else the case's own rate or number of clients, once, if its
    /// flags give one; else the sweep's numbers of clients.
    fn loads(&self, case: &Case) -> Vec<Load> {
        if !self.rates.is_empty() {
            return self.rates.iter().map(|&r| (None, Some(r))).collect();
        }
        match (own_rate(case), own_clients(case)) {
            (Some(rate), _) => vec![(None, Some(rate))],
            (None, Some(n)) => vec![(Some(n), None)],
            (None, None) => self.clients.iter().map(|&n| (Some(n), None)).collect(),
        }
    }

    /// The timeouts `case` runs under: its own, once, if its flags give
    /// one; else the sweep's.
    fn timeouts(&self, case: &Case) -> Vec<Duration> {
        own_timeout(case).map_or_else(|| self.timeouts.clone(), |t| vec![t])
    }

    /// The server limits `case` runs under: its own, once, if its flags
    /// give one; else the sweep's (a pool's stand for no limit).
    fn limits(&self, case: &Case) -> Vec<u64> {
        own_limit(case).map_or_else(|| self.limits.clone(), |l| vec![l])
    }

    /// Every setting, cases outermost, then the load.
    pub fn settings(&self) -> Vec<Setting> {
        let thinks: Vec<Option<Duration>> = if self.thinks.is_empty() {
            vec![None]
        } else {
            self.thinks.iter().copied().map(Some).collect()
        };
        let mut out = Vec::new();
        for (case, flags) in self.storm.scenario.cases.iter().enumerate() {
            for (clients, arrival_rate) in self.loads(flags) {
                for &think in &thinks {
                    for timeout in self.timeouts(flags) {
                        for limit in self.limits(flags) {
                            out.push(Setting {
                                case,
                                clients,
                                arrival_rate,
                                think,
                                timeout,
                                limit,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// The order `settings` (all of them) are run in, as units a thread
    /// and a shard take whole: with the adaptive search, the loads of a
    /// case under the same think time, timeout and limit, in the order
    /// given, so that each starts from its neighbour's T50 as in one
    /// process however the sweep is sharded; else each setting alone.
    /// Places among `settings`.
    pub(super) fn units(&self, settings: &[Setting]) -> Vec<Vec<usize>> {
        if self.pause.is_some() || self.search == Search::Grid {
            return (0..settings.len()).map(|i| vec![i]).collect();
        }
        let mut units: Vec<(Setting, Vec<usize>)> = Vec::new();
        for (i, s) in settings.iter().enumerate() {
            let same = |u: &Setting| {
                u.case == s.case
                    && u.think == s.think
                    && u.timeout == s.timeout
                    && u.limit == s.limit
            };
            match units.iter_mut().find(|(u, _)| same(u)) {
                Some((_, unit)) => unit.push(i),
                None => units.push((*s, vec![i])),
            }
        }
        units.into_iter().map(|(_, unit)| unit).collect()
    }

    /// The name of a setting's case.
    pub(super) fn name(&self, setting: &Setting) -> &str {
        &self.storm.scenario.cases[setting.case].name
    }

    /// A setting's case: the scenario's, with the setting's load (its
    /// clients, or the sweep's arrival rate), think time, timeout and
    /// server limit, each unless the case's own flags give it already.
    pub(super) fn case_for(&self, setting: &Setting) -> Case {
        let mut case = self.storm.scenario.cases[setting.case].clone();
        if let Some(clients) = setting.clients
            && own_clients(&case).is_none()
        {
            case.client
                .extend(["--clients".to_string(), clients.to_string()]);
        }
        if let Some(rate) = setting.arrival_rate
            && !self.rates.is_empty()
        {
            case.client
                .extend([ARRIVAL_RATE.to_string(), rate.to_string()]);
        }
        if own_timeout(&case).is_none() {
            case.client
                .extend([TIMEOUT.to_string(), format_duration(setting.timeout)]);
        }
        if let Some(think) = setting.think {
            case.client
                .extend(["--lambda".to_string(), format_duration(think)]);
        }
        // A pool or a linear curve has no limit: the sweep's (its default,
        // as validation refuses any other) does not apply to it.
        if !self.measures() && without_limit(&case).is_none() && own_limit(&case).is_none() {
            case.server
                .extend([LIMIT.to_string(), setting.limit.to_string()]);
        }
        case
    }

    /// The lattice of pauses the adaptive search may try: the finer of
    /// the resolution and half the precision, so that a sharp edge can be
    /// held to the precision between two of them.
    pub(super) fn lattice(&self) -> Duration {
        self.resolution.min(self.precision / 2)
    }

    /// Whether the sweep measures a target (`--target`, or the scenario's)
    /// with real storms rather than the model in virtual time.
    pub fn measures(&self) -> bool {
        self.storm.scenario.target.is_some()
    }

    /// The storm of one run: the sweep's, with this pause and seed.
    pub(super) fn storm_for(&self, pause: Duration, seed: u64) -> Storm {
        let mut storm = self.storm.clone();
        storm.scenario.protocol.pause = pause;
        // The verdict does not read the tail; a sweep has no use for it.
        storm.scenario.protocol.tail = Duration::ZERO;
        storm.scenario.seed = seed;
        storm
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::super::folder::Existing;
    use super::super::super::scenario::{Engine, Scenario};
    use super::super::super::stop::Stop;
    use super::super::super::storm::Flags;
    use super::*;
    use crate::model::client::ClientConfig;
    use crate::model::server::ServerConfig;

    /// A sweep of `cases` (TOML) over 500 and 1,000 clients.
    fn sweep(cases: &str) -> SweepConfig {
        let scenario = Scenario::from_toml(&format!("seed = 1\n{cases}")).unwrap();
        SweepConfig {
            storm: Storm {
                scenario,
                engine: Engine::Sim,
                time_scale: 1.0,
                parallel: 0,
                out: PathBuf::new(),
                existing: Existing::Refuse,
                png: false,
                progress: false,
                watch: None,
                verbose: false,
                program: PathBuf::new(),
                shard: Shard::WHOLE,
                stop: Stop::new(),
            },
            clients: vec![500, 1000],
            rates: Vec::new(),
            thinks: Vec::new(),
            timeouts: vec![Duration::from_secs(2)],
            limits: vec![DEFAULT_LIMIT],
            seeds: 1,
            search: Search::Grid,
            precision: Duration::from_secs(1),
            max_runs: 100,
            pause: None,
            max_pause: Duration::from_secs(60),
            resolution: Duration::from_secs(1),
            step: Duration::from_secs(5),
            threads: 1,
            shard: Shard::WHOLE,
        }
    }

    const MIXED: &str = "[[case]]\nname = \"closed\"\nclient = \"--strategy fixed\"\n\
         [[case]]\nname = \"partly-open\"\n\
         client = \"--strategy fixed --arrival-rate 20 --session-requests 5\"\n";

    /// Flags that are never asked for.
    struct Unused;

    impl Flags for Unused {
        fn server(&self, _: &[String]) -> Result<ServerConfig, String> {
            Err("unused".into())
        }
        fn client(&self, _: &[String]) -> Result<ClientConfig, String> {
            Err("unused".into())
        }
    }

    fn client(c: &SweepConfig, s: &Setting) -> String {
        c.case_for(s).client.join(" ")
    }

    #[test]
    fn the_adaptive_search_runs_a_cases_loads_in_one_line() {
        // Two cases, loads 500 and 1,000, timeouts 1 s and 2 s: settings in
        // the order case, load, timeout. A line holds a case's loads under
        // one timeout, in the order given.
        let mut c = sweep(MIXED);
        c.timeouts = vec![Duration::from_secs(1), Duration::from_secs(2)];
        let all = c.settings();
        assert_eq!(
            c.units(&all),
            (0..all.len()).map(|i| vec![i]).collect::<Vec<_>>()
        );
        c.search = Search::Adaptive;
        // The closed case: 500/1 s, 500/2 s, 1000/1 s, 1000/2 s; the open
        // case at its own rate: 1 s, 2 s.
        assert_eq!(
            c.units(&all),
            vec![vec![0, 2], vec![1, 3], vec![4], vec![5]]
        );
        c.pause = Some(Duration::from_secs(10));
        assert_eq!(
            c.units(&all).len(),
            all.len(),
            "one pause: each setting alone"
        );
    }

    #[test]
    fn a_case_with_its_own_rate_keeps_it_and_gets_no_clients() {
        let c = sweep(MIXED);
        let s = c.settings();
        let loads: Vec<(usize, Option<u32>, Option<f64>)> = s
            .iter()
            .map(|s| (s.case, s.clients, s.arrival_rate))
            .collect();
        assert_eq!(
            loads,
            [
                (0, Some(500), None),
                (0, Some(1000), None),
                (1, None, Some(20.0))
            ]
        );
        assert_eq!(
            client(&c, &s[1]),
            "--strategy fixed --clients 1000 --timeout 2s"
        );
        assert_eq!(
            client(&c, &s[2]),
            "--strategy fixed --arrival-rate 20 --session-requests 5 --timeout 2s"
        );
    }

    #[test]
    fn the_sweeps_rates_make_every_case_open_at_each() {
        let mut c = sweep(
            "[[case]]\nname = \"closed\"\nclient = \"--strategy fixed\"\n\
             [[case]]\nname = \"sessions\"\nclient = \"--strategy fixed --session-requests 5\"\n",
        );
        c.rates = vec![50.0, 12.5];
        let s = c.settings();
        assert_eq!(s.len(), 4, "two cases at two rates; no clients: {s:?}");
        assert!(s.iter().all(|s| s.clients.is_none()));
        assert_eq!(s[1].arrival_rate, Some(12.5));
        assert_eq!(
            client(&c, &s[1]),
            "--strategy fixed --arrival-rate 12.5 --timeout 2s"
        );
        assert_eq!(
            client(&c, &s[2]),
            "--strategy fixed --session-requests 5 --arrival-rate 50 --timeout 2s"
        );
    }

    #[test]
    fn the_sweeps_rates_refuse_a_case_that_sets_its_own_load() {
        for own in ["--arrival-rate 20", "--clients=300"] {
            let mut c = sweep(&format!(
                "[[case]]\nname = \"own\"\nclient = \"--strategy fixed {own}\"\n"
            ));
            c.rates = vec![50.0];
            let e = c.validate(&Unused).unwrap_err().to_string();
            assert!(e.contains("case own sets its own load"), "{own}: {e}");
        }
    }

    #[test]
    fn a_case_keeps_its_own_clients_timeout_and_limit() {
        let mut c = sweep(
            "[[case]]\nname = \"twin\"\n\
             client = \"--strategy fixed --clients=300 --timeout 500ms\"\n\
             server = \"--limit 12 --base-delay 20ms\"\n\
             [[case]]\nname = \"plain\"\nclient = \"--strategy fixed\"\n",
        );
        c.timeouts = vec![Duration::from_secs(1), Duration::from_secs(2)];
        c.limits = vec![DEFAULT_LIMIT, 60];
        let s = c.settings();
        // The first case once, with its own values; the second under 2
        // loads, 2 timeouts and 2 limits.
        assert_eq!(s.len(), 1 + 2 * 2 * 2, "{s:?}");
        assert_eq!(
            (s[0].clients, s[0].timeout, s[0].limit),
            (Some(300), Duration::from_millis(500), 12)
        );
        let twin = c.case_for(&s[0]);
        assert_eq!(
            twin.client.join(" "),
            "--strategy fixed --clients=300 --timeout 500ms"
        );
        assert_eq!(twin.server.join(" "), "--limit 12 --base-delay 20ms");
        assert_eq!(
            c.case_for(&s[1]).server.join(" "),
            "--limit 30",
            "the sweep's limit still goes to a case without its own"
        );
        assert_eq!(
            client(&c, &s[8]),
            "--strategy fixed --clients 1000 --timeout 2s"
        );
    }

    #[test]
    fn a_pool_or_a_linear_curve_gets_no_limit_and_refuses_one() {
        let mut c = sweep(
            "[[case]]\nname = \"linear\"\nclient = \"--strategy fixed\"\n\
             server = \"--model linear --slope 1ms\"\n\
             [[case]]\nname = \"curve\"\nclient = \"--strategy fixed\"\n\
             server = \"--model exponential\"\n",
        );
        let s = c.settings();
        assert_eq!(
            c.case_for(&s[0]).server.join(" "),
            "--model linear --slope 1ms"
        );
        assert_eq!(
            c.case_for(&s[2]).server.join(" "),
            "--model exponential --limit 30"
        );
        c.limits = vec![20, 40];
        let e = c.validate(&Unused).unwrap_err().to_string();
        assert!(
            e.contains("--limit does not apply to case linear, a linear server"),
            "{e}"
        );
    }

    #[test]
    fn a_scenarios_target_is_measured_by_the_adaptive_search_only() {
        let c = sweep(
            "target = \"http://127.0.0.1:1/\"\noutage = \"sigstop=4321\"\n\
             [[case]]\nname = \"fixed\"\nclient = \"--strategy fixed\"\n",
        );
        assert!(c.measures());
        let e = c.validate(&Unused).unwrap_err().to_string();
        assert!(e.contains("measured by the adaptive search"), "{e}");
    }
}
