//! Warnings and errors as one-line notices for a user: a `tracing` layer that sends each
//! WARN or ERROR event (`message`, then its fields) down a channel, for a terminal UI whose
//! logs go to a file to show in its status area.

use std::fmt::Write as _;

use tokio::sync::mpsc::UnboundedSender;
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

/// Sends WARN and ERROR events as text.
#[derive(Debug)]
pub struct NoticeLayer(UnboundedSender<String>);

impl NoticeLayer {
    /// A layer sending to `tx` (a closed receiver is fine: notices are then dropped).
    pub fn new(tx: UnboundedSender<String>) -> Self {
        Self(tx)
    }
}

#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for NoticeLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let level = *event.metadata().level();
        if level > tracing::Level::WARN {
            return;
        }
        let mut text = Text::default();
        event.record(&mut text);
        let level = if level == tracing::Level::ERROR {
            "error"
        } else {
            "warning"
        };
        let _ = self
            .0
            .send(format!("{level}: {}{}", text.message, text.fields));
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt as _;

    #[test]
    fn warnings_and_errors_become_one_line_each_and_info_does_not() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let subscriber = tracing_subscriber::registry().with(super::NoticeLayer::new(tx));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("indexed");
            tracing::warn!(path = "src/a.rs", "file skipped");
            tracing::error!(code = 3, "search failed");
        });
        let mut got = Vec::new();
        while let Ok(n) = rx.try_recv() {
            got.push(n);
        }
        assert_eq!(
            got,
            vec![
                "warning: file skipped path=src/a.rs".to_owned(),
                "error: search failed code=3".to_owned()
            ]
        );
    }
}
