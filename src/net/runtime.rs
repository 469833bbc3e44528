//! The async runtime both programs run on.

use std::future::Future;
use std::process::ExitCode;

/// Runs `program` (the server or the client) to its end on a tokio runtime
/// with `threads` worker threads (`--threads`; `None` or zero is one per
/// core). The program's top-level future runs on the calling thread.
///
/// One thread is a current-thread runtime: its tasks never wake another
/// thread, which at 4,500 req/s saves a quarter to a third of each
/// program's CPU per request (results/bench.md); several threads share the
/// load of a busier run (a one-thread client collapsed at 40,000 req/s).
pub fn block_on(threads: Option<u32>, program: impl Future<Output = ExitCode>) -> ExitCode {
    let runtime = match threads {
        Some(1) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Some(n) if n > 1 => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n as usize)
            .enable_all()
            .build(),
        _ => tokio::runtime::Runtime::new(),
    };
    match runtime {
        Ok(runtime) => runtime.block_on(program),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::runtime::{Handle, RuntimeFlavor};

    /// Runs `block_on` and reports the flavor and worker count it ran on.
    fn ran_on(threads: Option<u32>) -> (RuntimeFlavor, usize) {
        let mut seen = None;
        let code = block_on(threads, async {
            let handle = Handle::current();
            seen = Some((handle.runtime_flavor(), handle.metrics().num_workers()));
            ExitCode::SUCCESS
        });
        assert_eq!(code, ExitCode::SUCCESS);
        seen.expect("the program ran")
    }

    #[test]
    fn one_thread_is_a_current_thread_runtime_and_more_are_workers() {
        assert_eq!(ran_on(Some(1)), (RuntimeFlavor::CurrentThread, 1));
        assert_eq!(ran_on(Some(3)), (RuntimeFlavor::MultiThread, 3));
        // tokio's default: one worker per core (or TOKIO_WORKER_THREADS).
        let default = ran_on(None);
        assert_eq!(default.0, RuntimeFlavor::MultiThread);
        assert_eq!(ran_on(Some(0)), default, "zero means the default");
    }
}
