//! A shard's manifest, and the check that shards make a whole.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::super::error::{StormError, io_err};
use super::super::sweep::LineRows;
use crate::model::shard::Shard;

/// The file a shard's manifest is written to, in its results folder.
pub const MANIFEST: &str = "shard.json";

/// What a shard ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShardKind {
    /// A share of a sweep's settings.
    Sweep,
    /// A share of a storm's runs.
    Run,
}

/// A shard's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// What it ran.
    pub kind: ShardKind,
    /// Which shard it was.
    pub shard: Shard,
    /// Its command line, program first; a scenario file's path made
    /// absolute.
    pub command: Vec<String>,
    /// A sweep's settings in all (all shards').
    #[serde(default)]
    pub settings: usize,
    /// A sweep shard's rows, setting by setting.
    #[serde(default)]
    pub lines: Vec<LineRows>,
    /// Virtual-time runs it made.
    #[serde(default)]
    pub runs: u64,
    /// Events they processed.
    #[serde(default)]
    pub events: u64,
    /// Seconds it took.
    #[serde(default)]
    pub wall_s: f64,
    /// How a sweep shard placed its runs, `adaptive` or `grid`; absent
    /// from a storm shard's, and from a sweep shard's written before the
    /// adaptive search, when every sweep ran the grid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
}

impl Manifest {
    /// Writes the manifest into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), StormError> {
        let path = dir.join(MANIFEST);
        let json = serde_json::to_string_pretty(self).expect("a manifest serializes");
        std::fs::write(&path, json + "\n").map_err(io_err(format!("write {}", path.display())))
    }

    /// The manifest in `dir`, if there is one.
    pub fn read(dir: &Path) -> Result<Option<Manifest>, StormError> {
        let path = dir.join(MANIFEST);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StormError::Io(format!("read {}", path.display()), e)),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            StormError::Flags(format!("{}: not a shard manifest: {e}", path.display()))
        })
    }

    /// The command without what differs between shards: the program's
    /// path (`storm` stands for it), `--shard` and `--out`.
    pub fn common_command(&self) -> Vec<String> {
        let mut out = vec!["storm".to_string()];
        let mut words = self.command.iter().skip(1);
        while let Some(word) = words.next() {
            if word == "--shard" || word == "--out" {
                words.next();
            } else if !(word.starts_with("--shard=") || word.starts_with("--out=")) {
                out.push(word.clone());
            }
        }
        // A sweep from before the adaptive search ran the grid, which is
        // no longer the default.
        if self.kind == ShardKind::Sweep && self.search.is_none() {
            out.extend(["--search".to_string(), "grid".to_string()]);
        }
        out
    }
}

/// Reads the manifests of `dirs` and checks that they are the shards of
/// one piece of work, every one of them once: the same kind and command,
/// indices 0 to N-1. Returns them with their folders, by index.
pub fn whole(dirs: &[PathBuf]) -> Result<Vec<(PathBuf, Manifest)>, StormError> {
    let mut parts = Vec::new();
    for dir in dirs {
        let manifest = Manifest::read(dir)?.ok_or_else(|| {
            StormError::Flags(format!(
                "{}: no {MANIFEST}; not the folder of a storm or sweep shard",
                dir.display()
            ))
        })?;
        parts.push((dir.clone(), manifest));
    }
    parts.sort_by_key(|(_, m)| m.shard.index);
    let Some((first_dir, first)) = parts.first() else {
        return Err(StormError::Flags("no shard folders given".to_string()));
    };
    let count = first.shard.count;
    for (dir, m) in &parts {
        let differs = |what: &str| {
            StormError::Flags(format!(
                "{} and {}: not shards of the same work ({what} differs)",
                first_dir.display(),
                dir.display()
            ))
        };
        if m.kind != first.kind {
            return Err(differs("kind"));
        }
        if m.shard.count != count {
            return Err(differs("number of shards"));
        }
        if m.common_command() != first.common_command() {
            return Err(differs("command"));
        }
    }
    let indices: Vec<u32> = parts.iter().map(|(_, m)| m.shard.index).collect();
    if indices != (0..count).collect::<Vec<_>>() {
        let missing: Vec<String> = (0..count)
            .filter(|i| !indices.contains(i))
            .map(|i| i.to_string())
            .collect();
        return Err(StormError::Flags(format!(
            "the shards are not whole: {count} expected, got indices {indices:?}{}",
            if missing.is_empty() {
                String::new()
            } else {
                format!(" (missing {})", missing.join(", "))
            }
        )));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(index: u32, count: u32, extra: &[&str]) -> Manifest {
        let mut command: Vec<String> = ["/bin/storm", "sweep", "--clients", "500,1000"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        command.extend(extra.iter().map(|s| s.to_string()));
        Manifest {
            kind: ShardKind::Sweep,
            shard: Shard::new(index, count).unwrap(),
            command,
            settings: 4,
            lines: Vec::new(),
            runs: 0,
            events: 0,
            wall_s: 0.0,
            search: Some("grid".into()),
        }
    }

    #[test]
    fn a_sweep_shard_from_before_the_adaptive_search_is_merged_as_the_grid() {
        let mut m = manifest(0, 2, &["--seeds", "3"]);
        m.search = None;
        assert_eq!(
            m.common_command(),
            [
                "storm",
                "sweep",
                "--clients",
                "500,1000",
                "--seeds",
                "3",
                "--search",
                "grid"
            ]
        );
        let json = serde_json::to_string(&m).unwrap();
        assert!(!json.contains("search"), "{json}");
        let read: Manifest = serde_json::from_str(&json).unwrap();
        assert_eq!(read.search, None);
    }

    #[test]
    fn the_common_command_drops_what_differs_between_shards() {
        let m = manifest(1, 2, &["--shard", "1/2", "--out=a", "--seeds", "3"]);
        assert_eq!(
            m.common_command(),
            ["storm", "sweep", "--clients", "500,1000", "--seeds", "3"]
        );
    }

    #[test]
    fn only_every_shard_of_one_work_is_whole() {
        let dir = std::env::temp_dir().join(format!("shards-{}", std::process::id()));
        let write = |name: &str, m: &Manifest| {
            let d = dir.join(name);
            std::fs::create_dir_all(&d).unwrap();
            m.write(&d).unwrap();
            d
        };
        let a = write("a", &manifest(1, 2, &["--shard", "1/2"]));
        let b = write("b", &manifest(0, 2, &["--shard", "0/2"]));
        let c = write("c", &manifest(0, 2, &["--seeds", "9"]));
        let parts = whole(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(parts[0].0, b, "sorted by index");
        assert!(whole(std::slice::from_ref(&a)).is_err(), "shard 0 missing");
        assert!(whole(&[a.clone(), c]).is_err(), "another command");
        assert!(whole(&[a.clone(), a]).is_err(), "one shard twice");
        assert!(whole(&[dir.join("none")]).is_err(), "no manifest");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
