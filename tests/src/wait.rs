//! Waiting in tests for what can only be watched (an external program's screen or log file,
//! an index filling in the background): a probe polled until it holds, with a deadline that
//! only bounds a failing test.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How long a probe may keep failing before the test fails (a loaded 2-core machine runs
/// external programs slowly).
const DEADLINE: Duration = Duration::from_secs(60);
/// Between two probes.
const EVERY: Duration = Duration::from_millis(50);

/// Runs `probe` until it answers, for 60 s at most, then fails with its last reason.
pub async fn poll<T, F, Fut>(mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + DEADLINE;
    loop {
        match probe().await {
            Ok(found) => return found,
            Err(why) => assert!(Instant::now() < deadline, "{why}"),
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// Runs `probe` until it holds, for 60 s at most, then fails naming `what`.
pub async fn eventually<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let probe = || {
        let holds = probe();
        async move {
            if holds.await {
                Ok(())
            } else {
                Err(format!("never: {what}"))
            }
        }
    };
    poll(probe).await;
}
