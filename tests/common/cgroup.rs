//! Cgroups of a test's own, with a freezer, removed at the end whatever
//! happens (a drop guard). Used by `tests/outages.rs` and, through a
//! `#[path]` module, by the freezer's unit tests, so that both make and
//! remove their cgroups the same way.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A hierarchy with a freezer: its name (`v1` or `v2`) and its root.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    pub version: &'static str,
    pub root: PathBuf,
}

/// The freezers mounted here, from `/proc/self/mounts`: cgroup v2
/// hierarchies and v1 hierarchies of the freezer controller.
fn mounted() -> Vec<Hierarchy> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (root, kind, options) = (fields.get(1)?, fields.get(2)?, fields.get(3)?);
            let version = match *kind {
                "cgroup2" => "v2",
                "cgroup" if options.split(',').any(|o| o == "freezer") => "v1",
                _ => return None,
            };
            Some(Hierarchy {
                version,
                root: PathBuf::from(root),
            })
        })
        .collect()
}

/// The freezers in which this test may make a cgroup, and why each other
/// one cannot be used: the reasons make the skip's message.
pub fn writable_freezers() -> (Vec<Hierarchy>, Vec<String>) {
    let mut usable = Vec::new();
    let mut reasons = Vec::new();
    for hierarchy in mounted() {
        match TestCgroup::new(&hierarchy) {
            Ok(probe) if probe.control().is_file() => usable.push(hierarchy),
            Ok(_) => reasons.push(format!(
                "{} at {}: a new cgroup has no freezer",
                hierarchy.version,
                hierarchy.root.display()
            )),
            Err(e) => reasons.push(format!(
                "{} at {}: {e}",
                hierarchy.version,
                hierarchy.root.display()
            )),
        }
    }
    if usable.is_empty() && reasons.is_empty() {
        reasons.push("no cgroup hierarchy with a freezer is mounted".into());
    }
    (usable, reasons)
}

/// Says why a test that needs a writable freezer does not run.
pub fn skip(test: &str, reasons: &[String]) {
    println!(
        "skipped {test}: no writable cgroup freezer here ({})",
        reasons.join("; ")
    );
}

/// A cgroup made for one test: thawed, emptied and removed when dropped,
/// with the children it started killed.
pub struct TestCgroup {
    pub dir: PathBuf,
    pub hierarchy: Hierarchy,
    children: Vec<Child>,
}

impl TestCgroup {
    /// A new cgroup of a unique name in `hierarchy`.
    pub fn new(hierarchy: &Hierarchy) -> std::io::Result<TestCgroup> {
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let dir = hierarchy.root.join(format!(
            "retry-storm-test-{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir)?;
        Ok(TestCgroup {
            dir,
            hierarchy: hierarchy.clone(),
            children: Vec::new(),
        })
    }

    /// The file that freezes it: `freezer.state` or `cgroup.freeze`.
    pub fn control(&self) -> PathBuf {
        self.dir.join(match self.hierarchy.version {
            "v1" => "freezer.state",
            _ => "cgroup.freeze",
        })
    }

    /// Whether the kernel says it is frozen.
    pub fn frozen(&self) -> bool {
        match self.hierarchy.version {
            "v1" => read(&self.control()).trim() == "FROZEN",
            _ => read(&self.dir.join("cgroup.events"))
                .lines()
                .any(|l| l == "frozen 1"),
        }
    }

    /// Moves process `pid` into it.
    pub fn add(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    /// Starts `sleep 60` in it, killed when the cgroup goes.
    pub fn sleeper(&mut self) -> u32 {
        let child = Command::new("sleep").arg("60").spawn().unwrap();
        let pid = child.id();
        self.children.push(child);
        self.add(pid);
        pid
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // A frozen process takes no SIGKILL before it is thawed.
        let thawed = if self.hierarchy.version == "v1" {
            "THAWED"
        } else {
            "0"
        };
        let _ = std::fs::write(self.control(), thawed);
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Whatever else is in it (a server the test owns) goes back to the
        // hierarchy's root, so that the directory can go.
        for pid in read(&self.dir.join("cgroup.procs")).split_whitespace() {
            let _ = std::fs::write(self.hierarchy.root.join("cgroup.procs"), pid);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Err(e) = std::fs::remove_dir(&self.dir) {
            if Instant::now() >= deadline {
                eprintln!("cannot remove {}: {e}", self.dir.display());
                break;
            }
            // A process just killed leaves its cgroup a moment later.
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
