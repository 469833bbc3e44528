//! Which implementation and release a shipped strategy follows, where
//! implementations or releases differ in a way that moves a storm's
//! outcome. Each is checked against the library itself
//! (`scripts/libraries-check.sh`, `scripts/grpc-check.sh`).

use std::fmt;

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

    /// The name on the command line (a results folder's `commands.txt`
    /// and `scenario.toml` record it).
    pub fn name(self) -> &'static str {
        match self {
            Implementation::Botocore144 => "botocore-1.44",
            Implementation::Botocore143 => "botocore-1.43",
            Implementation::GrpcCore => "grpc-core",
            Implementation::GrpcJs => "grpc-js",
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
}

impl fmt::Display for Implementation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
