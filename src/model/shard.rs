//! A shard: one of N processes that together do the work of one. A
//! client shard runs users I, I+N, I+2N, ... of the whole population; a
//! sweep or a storm shard runs the settings or runs whose index is I
//! modulo N. Each user and each run keeps its global index (and so its
//! seed), so the union of the shards is exactly what one process does.
//!
//! Where a cluster engine starts the processes, the shard comes from its
//! environment ([`Shard::from_env`]): a Slurm job array, the tasks of a
//! Slurm job step, or a Kubernetes Indexed Job.

use std::fmt;

/// The environment variables a cluster engine names a shard with, which
/// [`Shard::from_env`] reads.
pub const ENV_VARS: [&str; 7] = [
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "JOB_COMPLETION_INDEX",
    "JOB_COMPLETIONS",
];

/// Shard `index` of `count` (`index < count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    /// Which shard, from 0.
    pub index: u32,
    /// How many shards share the work.
    pub count: u32,
}

impl Default for Shard {
    /// The whole work in one process.
    fn default() -> Self {
        Shard::WHOLE
    }
}

/// Where a shard came from, for the start line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardSource {
    /// Nowhere: no flag, no cluster engine; the whole work.
    Whole,
    /// The `--shard` flag.
    Flag,
    /// A Slurm job array: `SLURM_ARRAY_TASK_ID` and `SLURM_ARRAY_TASK_COUNT`.
    SlurmArray,
    /// The tasks of a Slurm job step: `SLURM_PROCID` and `SLURM_NTASKS`.
    SlurmTasks,
    /// A Kubernetes Indexed Job: `JOB_COMPLETION_INDEX` and
    /// `JOB_COMPLETIONS` (which the Job's manifest sets to its completions;
    /// Kubernetes sets only the index).
    KubernetesJob,
}

impl fmt::Display for ShardSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShardSource::Whole => "one process",
            ShardSource::Flag => "--shard",
            ShardSource::SlurmArray => "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT",
            ShardSource::SlurmTasks => "SLURM_PROCID/SLURM_NTASKS",
            ShardSource::KubernetesJob => "JOB_COMPLETION_INDEX/JOB_COMPLETIONS",
        })
    }
}

impl Shard {
    /// The whole work: shard 0 of 1.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Shard `index` of `count`, if that is one.
    pub fn new(index: u32, count: u32) -> Result<Shard, String> {
        if count == 0 {
            return Err("the number of shards must be at least 1".to_string());
        }
        if index >= count {
            return Err(format!(
                "shard {index} of {count}: the index counts from 0 and must be below the count"
            ));
        }
        Ok(Shard { index, count })
    }

    /// Parses `I/N`.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let (i, n) = text
            .split_once('/')
            .ok_or_else(|| format!("'{text}' is not I/N (shard I of N, counting from 0)"))?;
        let number = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("'{text}' is not I/N (shard I of N, counting from 0)"))
        };
        Shard::new(number(i)?, number(n)?)
    }

    /// The shard a cluster engine's environment names, read with `var`,
    /// and which variables named it; `None` when none does. A Slurm array
    /// counts from `SLURM_ARRAY_TASK_MIN`, whatever the first task's ID.
    pub fn from_env(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<(Shard, ShardSource)>, String> {
        let number = |name: &str| -> Result<Option<u32>, String> {
            match var(name) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("{name}={v} is not a whole number")),
            }
        };
        let pair = |index: &str, count: &str| -> Result<Option<(u32, u32)>, String> {
            match (number(index)?, number(count)?) {
                (Some(i), Some(n)) => Ok(Some((i, n))),
                (Some(_), None) => Err(format!("{index} is set but {count} is not")),
                _ => Ok(None),
            }
        };
        let found = if let Some((id, n)) = pair("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT")? {
            let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let i = id.checked_sub(min).ok_or_else(|| {
                format!("SLURM_ARRAY_TASK_ID={id} is below SLURM_ARRAY_TASK_MIN={min}")
            })?;
            Some((i, n, ShardSource::SlurmArray))
        } else if let Some((i, n)) = pair("SLURM_PROCID", "SLURM_NTASKS")? {
            Some((i, n, ShardSource::SlurmTasks))
        } else {
            pair("JOB_COMPLETION_INDEX", "JOB_COMPLETIONS")?
                .map(|(i, n)| (i, n, ShardSource::KubernetesJob))
        };
        found
            .map(|(i, n, source)| {
                Shard::new(i, n)
                    .map(|s| (s, source))
                    .map_err(|e| format!("{source}: {e}"))
            })
            .transpose()
    }

    /// The shard given by the flag, else by the environment, else the
    /// whole work; and where it came from.
    pub fn resolve(
        flag: Option<Shard>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<(Shard, ShardSource), String> {
        match flag {
            Some(s) => Ok((s, ShardSource::Flag)),
            None => Ok(Shard::from_env(var)?.unwrap_or((Shard::WHOLE, ShardSource::Whole))),
        }
    }

    /// Whether this is the whole work.
    pub fn is_whole(self) -> bool {
        self.count == 1
    }

    /// Whether item `index` (a user, a setting, a run) is this shard's.
    pub fn owns(self, index: u64) -> bool {
        index % u64::from(self.count) == u64::from(self.index)
    }

    /// This shard's items among `total`: I, I+N, I+2N, ...
    pub fn indices(self, total: u32) -> impl Iterator<Item = u32> {
        (self.index..total).step_by(self.count as usize)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn parses_i_of_n_and_refuses_what_is_not_one() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(Shard::parse("0/1"), Ok(Shard::WHOLE));
        for bad in ["4/4", "1/0", "x/2", "3", "-1/2", "1/2/3"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shards_partition_the_items_and_keep_their_indices() {
        let all: Vec<u32> = (0..4)
            .flat_map(|i| Shard::new(i, 4).unwrap().indices(10))
            .collect();
        let mut sorted = all.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        assert_eq!(
            Shard::new(1, 4).unwrap().indices(10).collect::<Vec<_>>(),
            [1, 5, 9]
        );
        let s = Shard::new(3, 4).unwrap();
        assert!(s.owns(7) && s.owns(11) && !s.owns(8));
        // More shards than items: some shards have none.
        assert_eq!(Shard::new(5, 8).unwrap().indices(3).count(), 0);
    }

    #[test]
    fn the_environment_names_the_shard_in_order_of_precedence() {
        assert_eq!(Shard::from_env(env(&[])), Ok(None));
        let array = [
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("SLURM_ARRAY_TASK_MIN", "4"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
        ];
        assert_eq!(
            Shard::from_env(env(&array)),
            Ok(Some((Shard::new(1, 3).unwrap(), ShardSource::SlurmArray)))
        );
        let tasks = [("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2")];
        assert_eq!(
            Shard::from_env(env(&tasks)),
            Ok(Some((Shard::new(1, 2).unwrap(), ShardSource::SlurmTasks)))
        );
        let job = [("JOB_COMPLETION_INDEX", "3"), ("JOB_COMPLETIONS", "4")];
        assert_eq!(
            Shard::from_env(env(&job)),
            Ok(Some((
                Shard::new(3, 4).unwrap(),
                ShardSource::KubernetesJob
            )))
        );
        // The flag wins over the environment.
        assert_eq!(
            Shard::resolve(Some(Shard::WHOLE), env(&job)),
            Ok((Shard::WHOLE, ShardSource::Flag))
        );
        assert_eq!(
            Shard::resolve(None, env(&[])),
            Ok((Shard::WHOLE, ShardSource::Whole))
        );
    }

    #[test]
    fn an_environment_that_names_no_shard_clearly_is_refused() {
        let half = [("JOB_COMPLETION_INDEX", "3")];
        let err = Shard::from_env(env(&half)).unwrap_err();
        assert!(err.contains("JOB_COMPLETIONS"), "{err}");
        let out_of_range = [("SLURM_PROCID", "2"), ("SLURM_NTASKS", "2")];
        let err = Shard::from_env(env(&out_of_range)).unwrap_err();
        assert!(err.contains("SLURM_PROCID/SLURM_NTASKS"), "{err}");
        let garbage = [("SLURM_PROCID", "one"), ("SLURM_NTASKS", "2")];
        assert!(Shard::from_env(env(&garbage)).is_err());
    }
}
