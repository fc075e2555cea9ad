//! The log lines a test reads: what the services (running as tasks of the test's one-thread
//! runtime) log under one target while the capture lives.

use ploke_runtime::testing::Captured;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;

/// Lines logged under a target while this lives.
pub(super) struct Logs {
    /// What was written.
    pub lines: Captured,
    _anchor: tracing::Dispatch,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Logs {
    /// Lines of `target` at `level` and above, as text (`json`: one JSON object a line, its
    /// fields flattened).
    pub(super) fn capture(target: &str, level: tracing::Level, json: bool) -> Self {
        let lines = Captured::default();
        let writer = lines.clone();
        let filter = tracing_subscriber::filter::Targets::new().with_target(target, level);
        // A second live dispatcher: callsites are then asked of every dispatcher, this one
        // included, whichever thread registers them first (as in session/spans.rs).
        let anchor = tracing::Dispatch::new(tracing_subscriber::registry());
        let layer = tracing_subscriber::fmt::layer().with_writer(move || writer.clone());
        let guard = if json {
            tracing::subscriber::set_default(
                tracing_subscriber::registry()
                    .with(layer.json().flatten_event(true).with_filter(filter)),
            )
        } else {
            tracing::subscriber::set_default(
                tracing_subscriber::registry().with(layer.with_filter(filter)),
            )
        };
        tracing::callsite::rebuild_interest_cache();
        Self {
            lines,
            _anchor: anchor,
            _guard: guard,
        }
    }

    /// Everything written so far.
    pub(super) fn text(&self) -> String {
        self.lines.text()
    }

    /// Waits until a line holding `needle` was written.
    pub(super) async fn wait_for(&self, needle: &str) {
        ploke_e2e::wait::poll(|| {
            let text = self.text();
            async move {
                if text.contains(needle) {
                    Ok(())
                } else {
                    Err(format!("no line with {needle:?} yet:\n{text}"))
                }
            }
        })
        .await;
    }
}
