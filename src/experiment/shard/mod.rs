//! What a shard of a storm or a sweep leaves beside its results
//! (`shard.json`), so that `storm merge` can check that the shards are
//! parts of one piece of work, and whole, and put their rows back in the
//! order one process would have written them.

mod manifest;
mod runs;
mod sweep;

pub use manifest::{MANIFEST, Manifest, ShardKind, whole};
pub use runs::merge_runs;
pub use sweep::merge_sweep;
