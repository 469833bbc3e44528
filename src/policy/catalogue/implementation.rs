//! Which implementation and release a shipped strategy follows, where
//! implementations or releases differ in a way that moves a storm's
//! outcome. Each is checked against the library itself
//! (`scripts/libraries-check.sh`).

use std::fmt;

use super::strategy::StrategyKind;
use crate::policy::shipped::GrpcImplementation;

/// An implementation (and the releases of it) that a shipped strategy
/// follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Implementation {
    /// botocore 1.44 and later: the SDKs' 2026 retry behaviour, always on
    /// (the AWS strategies' default).
    Botocore144,
    /// botocore up to 1.43: the retry behaviour before 2026.
    Botocore143,
    /// grpc-go and C-core: the retry throttle decides at the failure;
    /// hedging as gRFC A6's text has it (the gRPC strategy's and
    /// hedging's default).
    GrpcCore,
    /// @grpc/grpc-js 1.14: the throttle decides when the backoff ends;
    /// hedges never ask it.
    GrpcJs,
}

impl Implementation {
    /// Every implementation, in the catalogue's order.
    pub const ALL: [Implementation; 4] = [
        Implementation::Botocore144,
        Implementation::Botocore143,
        Implementation::GrpcCore,
        Implementation::GrpcJs,
    ];

    /// The name on the command line and in every result.
    pub fn name(self) -> &'static str {
        match self {
            Implementation::Botocore144 => "botocore-1.44",
            Implementation::Botocore143 => "botocore-1.43",
            Implementation::GrpcCore => "grpc-core",
            Implementation::GrpcJs => "grpc-js",
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
            Implementation::GrpcCore | Implementation::GrpcJs => kind == StrategyKind::Grpc,
        }
    }

    /// The gRPC implementation this is, if it is one (hedging follows it
    /// too).
    pub fn grpc(self) -> Option<GrpcImplementation> {
        match self {
            Implementation::GrpcCore => Some(GrpcImplementation::Core),
            Implementation::GrpcJs => Some(GrpcImplementation::Js),
            _ => None,
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
