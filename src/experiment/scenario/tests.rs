use super::*;

const FILE: &str = r#"
seed = 7
engine = "sim"
runs = 3

[protocol]
warmup = "10s"
pause = "0s"

[[case]]
name = "fixed+budget"
client = "--strategy fixed --throttle budget"

[[case]]
name = "shedding"
client = "--strategy fixed --url 'http://127.0.0.1:1/api'"
server = "--shed-above 200"
"#;

#[test]
fn a_file_reads_with_defaults_for_what_it_leaves_out() {
    let s = Scenario::from_toml(FILE).unwrap();
    assert_eq!(s.seed, 7);
    assert_eq!(s.engine, Some(Engine::Sim));
    assert_eq!(s.runs, Some(3));
    assert_eq!(
        s.protocol,
        Protocol {
            warmup: Duration::from_secs(10),
            pause: Duration::ZERO,
            observe: Duration::from_secs(60),
            report_interval: Duration::from_secs(5),
            tail: Duration::from_secs(60),
            calm: DEFAULT_CALM,
        }
    );
    assert_eq!(s.cases.len(), 2);
    assert_eq!(s.cases[0].name, "fixed+budget");
    assert_eq!(
        s.cases[0].client,
        ["--strategy", "fixed", "--throttle", "budget"]
    );
    assert!(s.cases[0].server.is_empty());
    assert_eq!(
        s.cases[1].client,
        ["--strategy", "fixed", "--url", "http://127.0.0.1:1/api"]
    );
    assert_eq!(s.cases[1].server, ["--shed-above", "200"]);
}

#[test]
fn a_scenario_written_out_reads_back_the_same() {
    let s = Scenario::from_toml(FILE).unwrap();
    let text = s.to_toml();
    assert!(text.contains("[[case]]"), "{text}");
    assert_eq!(Scenario::from_toml(&text).unwrap(), s);
    let without_engine = Scenario { engine: None, ..s };
    let text = without_engine.to_toml();
    assert!(!text.contains("engine"), "{text}");
    assert_eq!(Scenario::from_toml(&text).unwrap(), without_engine);
}

#[test]
fn mistakes_are_named() {
    let cases: &[(&str, &str)] = &[
        ("engine = \"sim\"\n[[case]]\nname = \"a\"", "seed"),
        ("seed = 1", "no cases"),
        ("seed = 1\n[[case]]\nname = \"a b\"", "case name 'a b'"),
        (
            "seed = 1\n[[case]]\nname = \"a\"\n[[case]]\nname = \"a\"",
            "used twice",
        ),
        (
            "seed = 1\n[[case]]\nname = \"goodput\"",
            "taken by a file of the results folder",
        ),
        (
            "seed = 1\n[[case]]\nname = \"recovery\"",
            "'recovery' is taken",
        ),
        (
            &format!("seed = 1\n[[case]]\nname = \"{}\"", "a".repeat(101)),
            "101 characters, more than the 100",
        ),
        (
            "seed = 1\nruns = 1000000000\n[[case]]\nname = \"a\"",
            "1000000000 is more than 100000",
        ),
        (
            "seed = 1\n[protocol]\nwarmup = \"18446744073709551615s\"\n[[case]]\nname = \"a\"",
            "protocol.warmup: '18446744073709551615s' is longer than a year",
        ),
        (
            "seed = 1\n[protocol]\npause = \"1000000h\"\n[[case]]\nname = \"a\"",
            "longer than a year",
        ),
        (
            "seed = 1\n[protocol]\npause = \"25h\"\n[[case]]\nname = \"a\"",
            "pause (--pause, protocol.pause): 1day 1h is longer than a day",
        ),
        (
            "seed = 1\n[protocol]\nwarmup = \"9s\"\n[[case]]\nname = \"a\"",
            "shorter than two report intervals",
        ),
        (
            "seed = 1\n[protocol]\nobserve = \"4s\"\n[[case]]\nname = \"a\"",
            "shorter than a report interval",
        ),
        (
            "seed = 1\n[protocol]\nreport_interval = \"1ms\"\n[[case]]\nname = \"a\"",
            "over 100000 intervals",
        ),
        (
            "seed = 1\n[protocol]\nwarmup = \"soon\"\n[[case]]\nname = \"a\"",
            "protocol.warmup",
        ),
        (
            "seed = 1\n[protocol]\nobserve = \"0s\"\n[[case]]\nname = \"a\"",
            "protocol.observe",
        ),
        (
            "seed = 1\nengine = \"fast\"\n[[case]]\nname = \"a\"",
            "engine",
        ),
        (
            "seed = 1\nruns = 0\n[[case]]\nname = \"a\"",
            "runs: must be at least 1",
        ),
        ("seed = 1\nrepeat = 3\n[[case]]\nname = \"a\"", "repeat"),
        (
            "seed = 1\n[[case]]\nname = \"a\"\nclient = \"--url 'x\"",
            "unbalanced quotes",
        ),
    ];
    for (text, needle) in cases {
        let err = Scenario::from_toml(text).expect_err(text).to_string();
        assert!(err.contains(needle), "{text:?}: {err}");
    }
}

const CHAIN: &str = r#"
seed = 1
[protocol]
pause = "0s"

[[case]]
name = "retry-everywhere"
client = "--strategy fixed --max-attempts 3"
server = "--fail-rate 1"
pause = 2
[[case.tier]]
server = "--base-delay 10ms"
client = "--strategy fixed --max-attempts 3 --timeout 1s"
[[case.tier]]
server = "--base-delay 10ms --propagate-deadline"
client = "--strategy fixed --max-attempts 3 --timeout 500ms"
"#;

#[test]
fn a_chains_tiers_read_from_the_client_inward_and_write_back_the_same() {
    let s = Scenario::from_toml(CHAIN).unwrap();
    let case = &s.cases[0];
    assert_eq!(case.server, ["--fail-rate", "1"]);
    assert_eq!(case.pause, Some(2));
    assert_eq!(case.tiers.len(), 2);
    assert_eq!(case.tiers[0].server, ["--base-delay", "10ms"]);
    assert_eq!(
        case.tiers[1].client,
        [
            "--strategy",
            "fixed",
            "--max-attempts",
            "3",
            "--timeout",
            "500ms"
        ]
    );
    assert_eq!(case.tiers[1].server[2], "--propagate-deadline");
    let text = s.to_toml();
    assert!(text.contains("[[case.tier]]"), "{text}");
    assert_eq!(Scenario::from_toml(&text).unwrap(), s);
    // A direct case writes no tiers and no pause.
    let direct = Scenario::from_toml(FILE).unwrap().to_toml();
    assert!(
        !direct.contains("tier") && !direct.contains("pause = 1"),
        "{direct}"
    );
}

#[test]
fn a_pause_names_a_tier_the_case_has() {
    let past = CHAIN.replace("pause = 2", "pause = 3");
    let err = Scenario::from_toml(&past).unwrap_err().to_string();
    assert!(
        err.contains("pause = 3, but the case has 2 tier(s)"),
        "{err}"
    );
    let zero = CHAIN.replace("pause = 2", "pause = 0");
    let err = Scenario::from_toml(&zero).unwrap_err().to_string();
    assert!(err.contains("count from 1"), "{err}");
    let stray = CHAIN.replace("server = \"--base-delay 10ms\"\n", "servers = \"x\"\n");
    assert!(Scenario::from_toml(&stray).is_err());
}

const TARGET: &str = "seed = 1\ntarget = \"http://127.0.0.1:8000/\"\noutage = \"sigstop=4321\"\n\
    [[case]]\nname = \"fixed\"\nclient = \"--strategy fixed\"\n";

#[test]
fn a_target_and_its_outage_read_and_write_back_the_same() {
    let s = Scenario::from_toml(TARGET).unwrap();
    assert_eq!(s.target.as_deref(), Some("http://127.0.0.1:8000/"));
    assert_eq!(s.outage, Some(Outage::Sigstop { pid: 4321 }));
    let text = s.to_toml();
    assert!(
        text.contains("target = \"http://127.0.0.1:8000/\"") && text.contains("sigstop=4321"),
        "{text}"
    );
    assert_eq!(Scenario::from_toml(&text).unwrap(), s);
    let without = Scenario::from_toml(FILE).unwrap().to_toml();
    assert!(
        !without.contains("target") && !without.contains("outage"),
        "{without}"
    );
}

#[test]
fn a_target_takes_cases_of_client_flags_only_and_a_known_outage() {
    let cases: &[(&str, &str)] = &[
        ("server = \"--limit 40\"\n", "case fixed: server flags"),
        ("pause = 1\n", "case fixed: pause = N"),
        (
            "[[case.tier]]\nserver = \"--base-delay 10ms\"\n",
            "case fixed: tiers",
        ),
    ];
    for (extra, needle) in cases {
        let err = Scenario::from_toml(&format!("{TARGET}{extra}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{extra}: {err}");
        assert!(err.contains("no project server runs"), "{extra}: {err}");
    }
    let stall = TARGET.replace("sigstop=4321", "stall,fraction=0.5");
    let scenario = Scenario::from_toml(&stall).unwrap();
    assert_eq!(scenario.outage.unwrap().to_string(), "stall,fraction=0.5");
    // An https:// service is stormed as its clients reach it; another
    // scheme is refused.
    let https = TARGET.replace("http://", "https://");
    assert!(Scenario::from_toml(&https).is_ok());
    let ftp = TARGET.replace("http://", "ftp://");
    let err = Scenario::from_toml(&ftp).unwrap_err().to_string();
    assert!(err.contains("target (--target)"), "{err}");
}

#[test]
fn an_exec_outage_takes_its_commands_at_the_top_and_writes_them_back() {
    let exec = TARGET.replace(
        "outage = \"sigstop=4321\"\n",
        "outage = \"exec\"\noutage_start = \"docker pause 'my web'\"\n\
         outage_end = \"docker unpause 'my web'\"\n",
    );
    let s = Scenario::from_toml(&exec).unwrap();
    let commands = s.outage.as_ref().and_then(Outage::commands);
    assert_eq!(
        commands,
        Some(("docker pause 'my web'", "docker unpause 'my web'"))
    );
    let text = s.to_toml();
    assert!(
        text.contains("outage = \"exec\"")
            && text.contains("outage_start = \"docker pause 'my web'\"")
            && text.contains("outage_end = \"docker unpause 'my web'\""),
        "{text}"
    );
    assert_eq!(Scenario::from_toml(&text).unwrap(), s);
    let refused = [
        (
            exec.replace("outage_end = \"docker unpause 'my web'\"\n", ""),
            "outage: --outage exec needs --outage-end (outage_end)",
        ),
        (
            exec.replace("outage = \"exec\"", "outage = \"sigstop=5\""),
            "go with --outage exec, not with sigstop=5",
        ),
        (
            exec.replace("outage = \"exec\"\n", ""),
            "outage_start and outage_end go with outage = \"exec\"",
        ),
        (
            TARGET.replace("sigstop=4321", "freeze=mygroup"),
            "absolute path of a cgroup's directory",
        ),
        (
            exec.replace("outage_start", "outage_begin"),
            "unknown field `outage_begin`",
        ),
    ];
    for (text, said) in refused {
        let err = Scenario::from_toml(&text).unwrap_err().to_string();
        assert!(err.contains(said), "{said}: {err}");
    }
    let freeze = TARGET.replace("sigstop=4321", "freeze=/sys/fs/cgroup/web");
    let s = Scenario::from_toml(&freeze).unwrap();
    assert!(
        s.to_toml()
            .contains("outage = \"freeze=/sys/fs/cgroup/web\"")
    );
    assert_eq!(Scenario::from_toml(&s.to_toml()).unwrap(), s);
}
