//! The retry policies that real clients ship, as their source code does
//! them (docs/policies.md): the AWS SDKs' backoff and retry quota, gRPC's
//! retry backoff, Envoy's router backoff and retry budget, tower's and
//! Finagle's budgets, Finagle's and Polly's jittered backoffs. Pure: time
//! and random draws are passed in, so golden tests can give fixed draws
//! and check exact delays and decisions.

mod adaptive;
mod backoff;
mod budget;
mod grpc;
mod throttle;

pub use adaptive::{AdaptiveLimiter, Cubic};
pub use backoff::{
    AWS_HINT_CAP, ShippedBackoff, aws_delay, aws_retries, aws_throttling, envoy_bound,
    finagle_next, grpc_delay, polly_v2_next,
};
pub use budget::{AwsQuota, AwsQuotaConfig, EnvoyRetryBudget, FinagleBudget, TpsBudget};
pub use grpc::{GrpcImplementation, grpc_retryable};
pub use throttle::{Answer, AttemptKind, ShippedThrottle, ShippedThrottleConfig};
