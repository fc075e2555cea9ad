//! Shutdown signals: SIGTERM or Ctrl-C for binaries, a trigger for tests and `ploke up`.

use tokio::sync::watch;

/// [`signal`], boxed so that it can be named.
pub type SignalFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Resolves on SIGTERM or Ctrl-C.
pub async fn signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("ctrl-c received, draining"),
        () = term => tracing::info!("sigterm received, draining"),
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
