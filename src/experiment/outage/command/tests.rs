use super::*;

#[test]
fn a_command_is_run_timed_and_its_output_kept() {
    let ran = run("echo out; echo err >&2; exit 3", LIMIT);
    assert!(!ran.ok());
    let summary = ran.summary();
    assert!(
        summary.starts_with("'echo out; echo err >&2; exit 3' exited with status 3 after 0."),
        "{summary}"
    );
    assert_eq!(
        ran.report(),
        format!("{summary}\nstdout:\nout\nstderr:\nerr")
    );
    assert_eq!(ran.stderr_tail(), "; its stderr ends:\nerr");
    let ran = run("true", LIMIT);
    assert!(ran.ok() && ran.stderr_tail().is_empty(), "{}", ran.report());
    assert_eq!(ran.report(), ran.summary());
    // A long output keeps its last lines.
    let ran = run("seq 1 1000 >&2", LIMIT);
    let tail: Vec<String> = (981..=1000).map(|n| n.to_string()).collect();
    assert_eq!(ran.stderr, format!("...\n{}", tail.join("\n")));
    let ran = run("kill -9 $$", LIMIT);
    assert!(
        ran.summary().contains("was killed by signal 9"),
        "{}",
        ran.summary()
    );
}

#[test]
fn a_command_past_its_limit_is_killed_with_its_group() {
    let path = std::env::temp_dir().join(format!("retry-storm-limit-{}", std::process::id()));
    let pids = path.to_str().unwrap();
    // A child in the background, and the shell waiting past the limit.
    let command = format!("sleep 30 & echo $! > {pids}; wait");
    let started = Instant::now();
    let ran = run(&command, Duration::from_millis(300));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!ran.ok());
    assert!(
        ran.summary()
            .contains("at its time limit of 0.3 s, and was killed"),
        "{}",
        ran.summary()
    );
    let child: i32 = std::fs::read_to_string(&path)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    // Gone, or a zombie until whoever adopted it reaps it. SIGKILL is
    // delivered at once but a process dies in its own time: seen still
    // running (state R, adopted by init) right after the run returned
    // on a loaded machine, so its death is waited for, within 5 s; a
    // child left out of the kill would sleep on for 30 s.
    let dead = |stat: &str| stat.is_empty() || stat.contains(") Z ");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
    while !dead(&stat) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
    }
    assert!(dead(&stat), "{stat}");
}
