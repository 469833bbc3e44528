//! The model's shipped retry policies fed the sequences that the libraries
//! themselves are fed in `scripts/libraries-check.sh` (botocore),
//! `scripts/grpc-check.sh` (@grpc/grpc-js) and `scripts/grpc-core-check.sh`
//! (grpcio, C-core); the decisions written as JSON for the scripts to
//! compare.
//!
//!   cargo run --example policy_trace -- MODE GENERATION < sequences.json > decisions.json
//!   cargo run --example policy_trace -- grpc-core|grpc-js < sequences.json > decisions.json
//!
//! MODE is `standard` or `adaptive` (`aws-standard`, `aws-adaptive`);
//! GENERATION is `1.43` (`--implementation botocore-1.43`) or `1.44`
//! (`--implementation botocore-1.44`, the default). `grpc-core` and
//! `grpc-js` drive the gRPC retry policy or hedging as that implementation
//! does them (`--implementation`).

mod aws;
mod grpc;

use std::convert::Infallible;
use std::io::Read;

use rand::TryRng;
use retry_storm::policy::shipped::GrpcImplementation;

/// A generator that returns one pinned value `u` (a multiple of 2^-53 in
/// [0, 1)): `u * 2^53` in the top 53 bits, which `random::<f64>()` turns
/// back into `u`, and `random_range` into `low + u * (high - low)` when `u`
/// is a multiple of 2^-52. The low 11 bits are zero, so an exponential
/// draw (a think time) takes its tail's branch and ends.
pub struct Pinned(u64);

impl Pinned {
    /// The generator that returns `u`.
    pub fn new(u: f64) -> Pinned {
        Pinned(((u * (1u64 << 53) as f64) as u64) << 11)
    }
}

impl TryRng for Pinned {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok((self.0 >> 32) as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.0)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        dst.fill(0);
        Ok(())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).expect("stdin");
    let out = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["grpc-core"] => grpc::trace(GrpcImplementation::Core, &input),
        ["grpc-js"] => grpc::trace(GrpcImplementation::Js, &input),
        [mode, generation] => aws::trace(mode, generation, &input),
        _ => None,
    };
    match out {
        Some(out) => println!("{out}"),
        None => usage(),
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: policy_trace standard|adaptive 1.43|1.44 < sequences.json\n       \
         policy_trace grpc-core|grpc-js < sequences.json"
    );
    std::process::exit(2);
}
