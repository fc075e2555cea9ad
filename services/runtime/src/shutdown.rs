//! Shutdown signals: SIGTERM or Ctrl-C for binaries, a trigger for tests and `ploke up`.

use tokio::sync::watch;

/// [`signal`], boxed so that it can be named.
pub type SignalFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Resolves on SIGTERM or Ctrl-C. On Unix the handlers are installed by this call, not when
/// the future is first polled (elsewhere Ctrl-C's is installed on the first poll): a signal that comes in between (a process told to stop as soon as it
/// says it is ready) is not left to the default action, which ends the process with no drain.
/// Must be called inside a Tokio runtime.
pub fn signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt()).ok();
        let terminate = signal(SignalKind::terminate()).ok();
        // A handler that could not be installed never fires.
        async fn next(signal: Option<Signal>) {
            match signal {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        async move {
            tokio::select! {
                () = next(interrupt) => tracing::info!("ctrl-c received, draining"),
                () = next(terminate) => tracing::info!("sigterm received, draining"),
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
            tracing::info!("ctrl-c received, draining");
        }
    }
}

/// A shutdown trigger that any number of servers can wait on.
#[derive(Debug, Clone)]
pub struct Shutdown {
    tx: watch::Sender<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A trigger that has not fired.
    pub fn new() -> Self {
        Self {
            tx: watch::channel(false).0,
        }
    }

    /// Fires the trigger.
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    /// Resolves once the trigger has fired (immediately if it already has).
    pub fn wait(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.tx.subscribe();
        async move {
            let _ = rx.wait_for(|fired| *fired).await;
        }
    }
}
