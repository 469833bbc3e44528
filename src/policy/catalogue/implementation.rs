//! Which implementation and release a shipped strategy follows, where
//! implementations or releases differ in a way that moves a storm's
//! outcome. Each is checked against the library itself
//! (`scripts/libraries-check.sh`).

use std::fmt;

use super::strategy::StrategyKind;

/// An implementation (and the releases of it) that a shipped strategy
/// follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Implementation {
    /// botocore 1.44 and later: the SDKs' 2026 retry behaviour, always on
    /// (the AWS strategies' default).
    Botocore144,
    /// botocore up to 1.43: the retry behaviour before 2026.
    Botocore143,
}

impl Implementation {
    /// Every implementation, in the catalogue's order.
    pub const ALL: [Implementation; 2] = [Implementation::Botocore144, Implementation::Botocore143];

    /// The name on the command line and in every result.
    pub fn name(self) -> &'static str {
        match self {
            Implementation::Botocore144 => "botocore-1.44",
            Implementation::Botocore143 => "botocore-1.43",
        }
    }

    /// The implementation named `name`, if any.
    pub fn from_name(name: &str) -> Option<Implementation> {
        Implementation::ALL.into_iter().find(|i| i.name() == name)
    }

    /// Whether strategy `kind` can follow this implementation.
    pub fn applies_to(self, kind: StrategyKind) -> bool {
        match self {
            Implementation::Botocore144 | Implementation::Botocore143 => {
                matches!(kind, StrategyKind::AwsStandard | StrategyKind::AwsAdaptive)
            }
        }
    }

    /// What `kind` follows unless told: the current release of its
    /// library; none for a strategy that follows no library's variants.
    pub fn default_for(kind: StrategyKind) -> Option<Implementation> {
        Implementation::ALL.into_iter().find(|i| i.applies_to(kind))
    }
}

impl fmt::Display for Implementation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
