//! The results folder, claimed before anything is written into it. A
//! command never writes into a folder it reads (a merge into one of its
//! shards would truncate the files it is about to read), and never mixes
//! its files with an earlier run's: a folder that already holds files is
//! refused unless the user asks for them to be replaced, and then only if
//! every file in it is one this tool writes.

use std::path::{Path, PathBuf};

use super::error::{StormError, io_err};

/// Files whose presence shows a folder holds this tool's results: a
/// storm's scenario and summary, a shard's manifest, a sweep's tables, a
/// client merge's summaries and interval logs.
const MARKS: [&str; 5] = [
    "scenario.toml",
    "summary.json",
    "shard.json",
    "phase.csv",
    "summary.md",
];

/// Other names of files only this tool's results hold: the runner's
/// command lines, a check script's verdicts.
const OWN_NAMES: [&str; 2] = ["commands.txt", "checks.txt"];

/// Endings of the data files a run writes under its case's name: report
/// rows, interval logs, a child's output, the plots.
const OWN_ENDINGS: [&str; 6] = [".csv", ".hlog", ".err", ".log", ".svg", ".png"];

/// What the user said of an existing results folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Existing {
    /// Refuse a folder that holds anything.
    #[default]
    Refuse,
    /// Remove an earlier run's results first (`--replace`).
    Replace,
}

/// Makes `out` ready for a command that reads `inputs`: refuses it if it
/// is one of them (or, to be replaced, holds one), or if it already holds
/// files and `existing` does not say to replace them; with
/// [`Existing::Replace`], removes what it holds if that is results (all
/// but hidden files, such as a committed folder's `.gitignore`). `flag`
/// names the option in messages.
pub fn claim(
    out: &Path,
    inputs: &[PathBuf],
    existing: Existing,
    flag: &str,
) -> Result<(), StormError> {
    let here = std::fs::canonicalize(out).ok();
    for input in inputs {
        let Ok(input) = std::fs::canonicalize(input) else {
            continue;
        };
        if here.as_ref() == Some(&input) {
            return Err(StormError::Flags(format!(
                "{flag} {}: is one of the folders read; writing there would overwrite \
                 them (choose another folder)",
                out.display()
            )));
        }
        if existing == Existing::Replace && here.as_ref().is_some_and(|h| input.starts_with(h)) {
            return Err(StormError::Flags(format!(
                "{flag} {}: holds {}, which is read; --replace would remove it",
                out.display(),
                input.display()
            )));
        }
    }
    // A hidden file (a committed folder's .gitignore) is the folder's,
    // not a run's: none of a run's files starts with a dot. It is neither
    // counted nor removed.
    let entries = match std::fs::read_dir(out) {
        Ok(entries) => entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| !is_hidden(p))
            .collect::<Vec<_>>(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) if out.exists() && !out.is_dir() => {
            return Err(StormError::Flags(format!(
                "{flag} {}: exists and is not a folder ({e})",
                out.display()
            )));
        }
        Err(e) => return Err(StormError::Io(format!("read {}", out.display()), e)),
    };
    if entries.is_empty() {
        return Ok(());
    }
    if existing == Existing::Refuse {
        return Err(StormError::Flags(format!(
            "{flag} {}: already holds {} file(s); choose a new folder, or add --replace to \
             remove an earlier run's results first",
            out.display(),
            entries.len()
        )));
    }
    if !entries.iter().any(|p| is_mark(p)) {
        return Err(StormError::Flags(format!(
            "{flag} {}: holds files that are not results of this tool (no {} or \
             NAME.summary.json); not removing them",
            out.display(),
            MARKS.join(", ")
        )));
    }
    // Only what this tool writes is removed, and only if nothing else is
    // there: no folder (no run writes one), no file of another kind.
    if let Some(other) = entries.iter().find(|p| !is_own(p)) {
        return Err(StormError::Flags(format!(
            "{flag} {}: holds {}, which is not a file this tool writes; not removing \
             anything (move it, or choose another folder)",
            out.display(),
            other.display()
        )));
    }
    for path in &entries {
        std::fs::remove_file(path).map_err(io_err(format!("remove {}", path.display())))?;
    }
    Ok(())
}

/// Whether `path` is a file of a kind this tool writes into a results
/// folder.
fn is_own(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    path.is_file()
        && (is_mark(path)
            || OWN_NAMES.contains(&name.as_ref())
            || OWN_ENDINGS.iter().any(|e| name.ends_with(e)))
}

/// Whether `path` names a hidden file: one whose name starts with a dot.
fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

/// Whether `path` is a file only this tool's results hold.
fn is_mark(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    MARKS.contains(&name.as_ref()) || name.ends_with(".summary.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("retry-storm-folder-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn refused(result: Result<(), StormError>) -> String {
        match result {
            Err(StormError::Flags(msg)) => msg,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_new_or_empty_folder_is_taken_as_it_is() {
        let out = scratch("new");
        claim(&out, &[], Existing::Refuse, "--out").unwrap();
        assert!(!out.exists(), "claiming creates nothing");
        std::fs::create_dir_all(&out).unwrap();
        claim(&out, &[], Existing::Refuse, "--out").unwrap();
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn a_folder_read_by_the_command_is_refused_under_any_name() {
        let root = scratch("input");
        let shard = root.join("shard-0");
        std::fs::create_dir_all(&shard).unwrap();
        std::fs::write(shard.join("run.csv"), "x").unwrap();
        let other_name = root.join("shard-0/../shard-0/.");
        for existing in [Existing::Refuse, Existing::Replace] {
            let msg = refused(claim(
                &other_name,
                std::slice::from_ref(&shard),
                existing,
                "--out",
            ));
            assert!(msg.contains("is one of the folders read"), "{msg}");
        }
        // Replacing a folder that holds an input would remove the input.
        std::fs::write(root.join("summary.json"), "{}").unwrap();
        let msg = refused(claim(
            &root,
            std::slice::from_ref(&shard),
            Existing::Replace,
            "--out",
        ));
        assert!(msg.contains("would remove"), "{msg}");
        assert!(shard.join("run.csv").exists());
        // A file read (a merge's --server-csv) likewise.
        let server_csv = root.join("server.csv");
        std::fs::write(&server_csv, "unix_ms\n").unwrap();
        let msg = refused(claim(
            &root,
            std::slice::from_ref(&server_csv),
            Existing::Replace,
            "--out",
        ));
        assert!(msg.contains("server.csv, which is read"), "{msg}");
        assert!(server_csv.exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn earlier_results_are_refused_unless_replaced_and_then_removed() {
        let out = scratch("earlier");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("scenario.toml"), "seed = 1").unwrap();
        std::fs::write(out.join("fixed.client.csv"), "x").unwrap();
        let msg = refused(claim(&out, &[], Existing::Refuse, "--out"));
        assert!(msg.contains("already holds 2 file(s)"), "{msg}");
        assert!(out.join("fixed.client.csv").exists(), "untouched");
        // A committed folder's own hidden files stay.
        std::fs::write(out.join(".gitignore"), "*.csv\n").unwrap();
        claim(&out, &[], Existing::Replace, "--out").unwrap();
        assert!(out.is_dir());
        let left: Vec<_> = std::fs::read_dir(&out).unwrap().flatten().collect();
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(out.join(".gitignore").exists());
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn beside_results_anything_else_stops_the_replacement_and_nothing_is_removed() {
        let out = scratch("mixed");
        std::fs::create_dir_all(out.join("notebooks")).unwrap();
        std::fs::write(out.join("summary.md"), "old").unwrap();
        std::fs::write(out.join("fixed.client.csv"), "old").unwrap();
        let msg = refused(claim(&out, &[], Existing::Replace, "--out"));
        assert!(
            msg.contains("notebooks, which is not a file this tool writes"),
            "{msg}"
        );
        std::fs::remove_dir_all(out.join("notebooks")).unwrap();
        std::fs::write(out.join("notes.md"), "mine").unwrap();
        let msg = refused(claim(&out, &[], Existing::Replace, "--out"));
        assert!(msg.contains("notes.md, which is not"), "{msg}");
        assert!(out.join("summary.md").exists() && out.join("fixed.client.csv").exists());
        // A folder holding only hidden files is empty to a run.
        let bare = scratch("hidden");
        std::fs::create_dir_all(&bare).unwrap();
        std::fs::write(bare.join(".gitignore"), "*.csv\n").unwrap();
        claim(&bare, &[], Existing::Refuse, "--out").unwrap();
        std::fs::remove_dir_all(&out).unwrap();
        std::fs::remove_dir_all(&bare).unwrap();
    }

    #[test]
    fn files_that_are_not_results_are_never_removed() {
        let out = scratch("foreign");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("notes.txt"), "mine").unwrap();
        let msg = refused(claim(&out, &[], Existing::Replace, "--out"));
        assert!(msg.contains("not results of this tool"), "{msg}");
        assert!(out.join("notes.txt").exists());
        let file = out.join("notes.txt");
        let msg = refused(claim(&file, &[], Existing::Refuse, "--out"));
        assert!(msg.contains("not a folder"), "{msg}");
        std::fs::remove_dir_all(&out).unwrap();
    }
}
