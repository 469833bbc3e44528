//! The async runtime each program's calling thread runs.

use std::future::Future;
use std::process::ExitCode;

/// Runs `program` (the server, the client or a storm) to its end on a
/// current-thread tokio runtime on the calling thread. That thread is the
/// program's first lane: the server and the client start their other lanes
/// themselves (`--threads`, [`super::lanes`]).
pub fn block_on(program: impl Future<Output = ExitCode>) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
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

    #[test]
    fn the_program_runs_on_a_current_thread_runtime() {
        let mut seen = None;
        let code = block_on(async {
            seen = Some(Handle::current().runtime_flavor());
            ExitCode::SUCCESS
        });
        assert_eq!(code, ExitCode::SUCCESS);
        assert_eq!(seen, Some(RuntimeFlavor::CurrentThread));
    }
}
