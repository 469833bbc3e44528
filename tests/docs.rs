//! The documents generated from the code are current: `docs/cli.md` is
//! every program's `--help` as the flags define it today.

use std::path::Path;

#[test]
fn the_flag_reference_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    let current = retry_storm::cli::reference();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &current).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == current,
        "docs/cli.md is stale: run `UPDATE_DOCS=1 cargo test --test docs` and commit it"
    );
    for page in [
        "## server",
        "## client plan",
        "## storm run",
        "## storm sweep",
        "## storm calibrate",
        "## storm merge",
        "## storm proxy",
    ] {
        assert!(current.contains(page), "{page}");
    }
    assert!(current.contains("--dump-scenario") && current.contains("--shed-above"));
    assert!(!current.contains("--status-fd"), "hidden flags stay hidden");
}
