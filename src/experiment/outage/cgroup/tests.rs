use std::fs::File;

use super::*;

// The cgroups the integration tests make, made and removed the same way.
#[allow(dead_code)]
#[path = "../../../../tests/common/cgroup.rs"]
mod test_cgroup;

use test_cgroup::{TestCgroup, skip, writable_freezers};

/// A directory that looks like a cgroup to the checks: `files` written
/// into it; removed when dropped.
struct Fake(PathBuf);

impl Fake {
    fn new(name: &str, files: &[(&str, &str)]) -> Fake {
        let dir = std::env::temp_dir().join(format!(
            "retry-storm-fake-cgroup-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, text) in files {
            std::fs::write(dir.join(file), text).unwrap();
        }
        Fake(dir)
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A log into a scratch file, and the file's path.
fn log(name: &str) -> (Log, PathBuf) {
    let path = std::env::temp_dir().join(format!(
        "retry-storm-cgroup-log-{}-{name}",
        std::process::id()
    ));
    let file = File::create(&path).unwrap();
    (Log::new(&file, "fixed").unwrap(), path)
}

#[test]
fn what_is_not_a_cgroup_with_a_freezer_and_a_process_is_refused() {
    let me = std::process::id().to_string();
    let none = Fake::new("none", &[]);
    let v2_root = Fake::new("v2-root", &[("cgroup.procs", "")]);
    let frozen_v1 = Fake::new(
        "frozen-v1",
        &[("cgroup.procs", "4242\n"), ("freezer.state", "FREEZING\n")],
    );
    let frozen_above = Fake::new(
        "frozen-above",
        &[
            ("cgroup.procs", "4242\n"),
            ("cgroup.freeze", "0\n"),
            ("cgroup.events", "populated 1\nfrozen 1\n"),
        ],
    );
    let empty = Fake::new(
        "empty",
        &[("cgroup.procs", ""), ("freezer.state", "THAWED\n")],
    );
    let mine = Fake::new(
        "mine",
        &[
            ("cgroup.procs", ""),
            ("cgroup.freeze", "0\n"),
            ("cgroup.events", "populated 1\nfrozen 0\n"),
        ],
    );
    // This process in a cgroup below: frozen with it.
    let below = mine.0.join("below");
    std::fs::create_dir(&below).unwrap();
    std::fs::write(below.join("cgroup.procs"), format!("4242\n{me}\n")).unwrap();
    let cases: [(&Path, &str); 7] = [
        (&none.0.join("absent"), "no such directory"),
        (&none.0, "not a cgroup"),
        (&v2_root.0, "without a freezer"),
        (&frozen_v1.0, "frozen already"),
        (&frozen_above.0, "frozen already"),
        (&empty.0, "holds no process"),
        (&mine.0, &format!("holds process {me}, this storm")),
    ];
    for (dir, said) in cases {
        let err = Cgroup::open(dir).unwrap_err();
        assert!(err.contains(said), "{}: {said}: {err}", dir.display());
    }
}

#[test]
fn a_v1_freezer_is_written_frozen_and_thawed_whatever_ends_it() {
    // A regular file reads back what was written: FROZEN at once.
    let fake = Fake::new(
        "v1",
        &[("cgroup.procs", "4242\n"), ("freezer.state", "THAWED\n")],
    );
    let state = || std::fs::read_to_string(fake.0.join("freezer.state")).unwrap();
    let (mut log, path) = log("v1");
    let frozen = Cgroup::open(&fake.0).unwrap().freeze(&mut log).unwrap();
    assert_eq!(state(), "FROZEN");
    let thaw = format!("write THAWED to {}", fake.0.join("freezer.state").display());
    assert!(link::held().contains(&thaw));
    let err = Cgroup::open(&fake.0).unwrap_err();
    assert!(err.contains("echo THAWED > freezer.state"), "{err}");
    frozen.thaw();
    assert_eq!(state(), "THAWED");
    assert!(!link::held().contains(&thaw));
    // Dropped on the way out of a pause cut short.
    drop(Cgroup::open(&fake.0).unwrap().freeze(&mut log).unwrap());
    assert_eq!(state(), "THAWED");
    let said = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let shown = fake.0.display();
    assert!(
        said.starts_with(&format!(
            "# fixed: froze the cgroup {shown} (cgroup v1) in 0.0"
        )),
        "{said}"
    );
    assert!(said.contains(": 1 process(es): 4242 ("), "{said}");
}

/// The state letter of process `pid` (`S`, `D`...).
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, after) = stat.rsplit_once(") ").unwrap();
    after.chars().next().unwrap()
}

#[test]
fn a_real_cgroup_holding_a_sleep_is_frozen_and_thawed() {
    let (freezers, reasons) = writable_freezers();
    if freezers.is_empty() {
        return skip(
            "a_real_cgroup_holding_a_sleep_is_frozen_and_thawed",
            &reasons,
        );
    }
    for hierarchy in freezers {
        let mut cgroup = TestCgroup::new(&hierarchy).unwrap();
        let sleeping = cgroup.sleeper();
        let v = hierarchy.version;
        let (mut log, path) = log(&format!("real-{v}"));
        let frozen = Cgroup::open(&cgroup.dir).unwrap().freeze(&mut log).unwrap();
        assert!(cgroup.frozen(), "{v}: the kernel says frozen");
        // A v1 freezer holds its tasks in an uninterruptible sleep; v2's
        // in a sleep of its own, which /proc shows as S.
        if v == "v1" {
            assert_eq!(state(sleeping), 'D', "{v}");
        }
        let err = Cgroup::open(&cgroup.dir).unwrap_err();
        assert!(err.contains("frozen already"), "{v}: {err}");
        frozen.thaw();
        assert!(!cgroup.frozen(), "{v}: thawed");
        assert_ne!(state(sleeping), 'D', "{v}");
        // Dropped rather than thawed: a stop during the pause.
        drop(Cgroup::open(&cgroup.dir).unwrap().freeze(&mut log).unwrap());
        assert!(!cgroup.frozen(), "{v}: thawed when dropped");
        let said = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(
            said.contains(&format!("(cgroup {v}) in 0.")) && said.contains("(sleep)"),
            "{said}"
        );
        assert!(said.contains(&format!("{sleeping} (sleep)")), "{said}");
    }
}

#[test]
fn an_exit_while_frozen_thaws_the_cgroup() {
    if let Some(dir) = link::exiting::passed() {
        let mut log = Log::new(&File::create("/dev/null").unwrap(), "fixed").unwrap();
        let _frozen = Cgroup::open(Path::new(&dir))
            .unwrap()
            .freeze(&mut log)
            .unwrap();
        std::process::exit(0);
    }
    let (freezers, reasons) = writable_freezers();
    if freezers.is_empty() {
        return skip("an_exit_while_frozen_thaws_the_cgroup", &reasons);
    }
    for hierarchy in freezers {
        let mut cgroup = TestCgroup::new(&hierarchy).unwrap();
        cgroup.sleeper();
        link::exiting::run_child(
            concat!(module_path!(), "::an_exit_while_frozen_thaws_the_cgroup"),
            cgroup.dir.to_str().unwrap(),
        );
        assert!(
            !cgroup.frozen(),
            "{}: thawed at the exit",
            hierarchy.version
        );
    }
}
