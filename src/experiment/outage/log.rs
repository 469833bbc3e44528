//! `commands.txt`, where an outage says what it did: comment lines, each
//! naming the runs the outage was for.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The runs' names and `commands.txt`, for an outage's lines.
#[derive(Debug)]
pub(crate) struct Log {
    file: File,
    names: String,
    /// The file's path, for the guardian's lines (`None` if unknown).
    path: Option<PathBuf>,
}

impl Log {
    /// Lines about the runs `names` into `file` (its own handle on the
    /// same open file: lines from both stay in order).
    pub(crate) fn new(file: &File, names: &str) -> io::Result<Log> {
        // The path the descriptor is open on, as the kernel names it: the
        // guardian, another process, appends to the file by its path.
        let path = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok();
        Ok(Log {
            file: file.try_clone()?,
            names: names.to_string(),
            path,
        })
    }

    /// Where the guardian says, about these runs, what it undid.
    pub(crate) fn note(&self) -> Option<Note> {
        Some(Note {
            path: self.path.clone()?,
            names: self.names.clone(),
        })
    }

    /// The runs' names, comma-separated.
    pub(crate) fn names(&self) -> &str {
        &self.names
    }

    /// Writes `text` as a comment about the runs: its first line after
    /// their names, the others indented.
    pub(crate) fn say(&mut self, text: &str) -> Result<(), String> {
        let mut lines = text.lines();
        let mut out = format!("# {}: {}\n", self.names, lines.next().unwrap_or(""));
        for line in lines {
            out.push_str(&format!("#     {line}\n"));
        }
        self.file
            .write_all(out.as_bytes())
            .map_err(|e| format!("cannot write commands.txt: {e}"))
    }
}

/// Where the guardian says what it undid: a run's `commands.txt`, as a
/// comment about its runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Note {
    /// The file, appended to.
    pub path: PathBuf,
    /// The runs' names.
    pub names: String,
}

impl Note {
    /// Appends `line` as a comment about the runs; a file gone is passed
    /// over (stderr has the line too).
    pub(crate) fn say(&self, line: &str) {
        if let Ok(mut file) = std::fs::OpenOptions::new().append(true).open(&self.path) {
            let _ = writeln!(file, "# {}: {line}", self.names);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_the_runs_and_indent_what_follows() {
        let path = std::env::temp_dir().join(format!("retry-storm-log-{}", std::process::id()));
        let mut file = File::create(&path).unwrap();
        let mut log = Log::new(&file, "fixed, no-retry").unwrap();
        assert_eq!(log.names(), "fixed, no-retry");
        log.say("started\nstdout: a\nb").unwrap();
        file.write_all(b"after\n").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            text,
            "# fixed, no-retry: started\n#     stdout: a\n#     b\nafter\n"
        );
    }
}
