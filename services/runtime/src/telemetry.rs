//! Telemetry init, once per process: `tracing` logs (text or JSON, filtered by `RUST_LOG` or
//! `[telemetry] log_filter`) plus an OpenTelemetry trace pipeline exporting over OTLP when the
//! standard `OTEL_EXPORTER_OTLP_*` variables ask for it. Returns a guard that flushes spans on
//! shutdown.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{LogFormat, TelemetryConfig};

pub mod status_line;

/// Telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The log filter does not parse.
    #[error("log filter `{filter}`: {message}")]
    Filter {
        /// The filter text.
        filter: String,
        /// Why.
        message: String,
    },
    /// The OTLP exporter could not be built.
    #[error("otlp exporter: {0}")]
    Exporter(String),
    /// The log file could not be opened.
    #[error("log file {path}: {message}")]
    LogFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        message: String,
    },
    /// A global subscriber was already installed.
    #[error("installing the subscriber: {0}")]
    Install(String),
}

/// Flushes and shuts down the trace pipeline when dropped or on [`TelemetryGuard::shutdown`].
#[derive(Debug)]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    /// Flushes pending spans and stops the exporter.
    pub fn shutdown(mut self) {
        self.flush_and_stop();
    }

    fn flush_and_stop(&mut self) {
        if let Some(provider) = self.provider.take() {
            if let Err(e) = provider.force_flush() {
                eprintln!("telemetry: flushing spans failed: {e}");
            }
            if let Err(e) = provider.shutdown() {
                eprintln!("telemetry: shutting down the exporter failed: {e}");
            }
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        self.flush_and_stop();
    }
}

/// Whether the standard OpenTelemetry environment asks for OTLP trace export.
pub fn otlp_requested(env: &dyn Fn(&str) -> Option<String>) -> bool {
    let set = |k: &str| env(k).is_some_and(|v| !v.trim().is_empty());
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// The `tracing` layer that turns spans into OpenTelemetry spans of `provider`.
pub fn otel_layer<S>(
    provider: &SdkTracerProvider,
    service_name: &str,
) -> tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(service_name.to_owned()))
        .with_tracked_inactivity(false)
}

/// A resource naming the service (`OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` win).
pub fn resource(service_name: &str) -> Resource {
    let from_env = Resource::builder().build();
    let named = from_env
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_some_and(|v| !v.as_str().starts_with("unknown_service"));
    if named {
        from_env
    } else {
        Resource::builder()
            .with_service_name(service_name.to_owned())
            .build()
    }
}

/// Whether log lines on stderr may be coloured: only for a person reading a terminal, and not
/// when `NO_COLOR` asks for plain text.
pub(crate) fn stderr_wants_colour() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Installs the global subscriber for `service_name` and, when requested by the environment,
/// the OTLP trace exporter. Call once, early in `main`.
pub fn init(
    service_name: &str,
    config: &TelemetryConfig,
) -> Result<TelemetryGuard, TelemetryError> {
    init_to(service_name, config, None)
}

/// Where a process that draws on its terminal (the TUI) sends its logs instead of stderr.
#[derive(Debug)]
pub struct LogSink {
    /// Directory of the log files: `ploke.YYYY-MM-DD.log`, a new one each day, the last
    /// [`LOG_FILES_KEPT`] kept.
    pub dir: std::path::PathBuf,
    /// Where warnings and errors are also sent, as one line each, for the user to see.
    pub notices: Option<tokio::sync::mpsc::UnboundedSender<String>>,
}

/// Daily log files a [`LogSink`] keeps.
pub const LOG_FILES_KEPT: usize = 7;

/// [`init`], logging into `sink` (rotated files, no colours; warnings also as notices) instead
/// of stderr when given: a process that draws on its terminal must not have logs written
/// over it.
pub fn init_to(
    service_name: &str,
    config: &TelemetryConfig,
    sink: Option<LogSink>,
) -> Result<TelemetryGuard, TelemetryError> {
    let (file, notices) = match sink {
        Some(sink) => {
            let appender = tracing_appender::rolling::RollingFileAppender::builder()
                .rotation(tracing_appender::rolling::Rotation::DAILY)
                .filename_prefix("ploke")
                .filename_suffix("log")
                .max_log_files(LOG_FILES_KEPT)
                .build(&sink.dir)
                .map_err(|e| TelemetryError::LogFile {
                    path: sink.dir.clone(),
                    message: e.to_string(),
                })?;
            (Some(appender), sink.notices)
        }
        None => (None, None),
    };
    // Colours only for a person reading a terminal: a redirected stderr (an operator's log
    // file, journald, a CI log) gets plain text, as NO_COLOR asks too.
    let ansi = file.is_none() && stderr_wants_colour();
    let writer = match file {
        Some(f) => tracing_subscriber::fmt::writer::BoxMakeWriter::new(f),
        None => tracing_subscriber::fmt::writer::BoxMakeWriter::new(status_line::Stderr),
    };
    let filter_text = std::env::var("RUST_LOG").unwrap_or_else(|_| config.log_filter.clone());
    let filter = parse_filter(&filter_text).map_err(|message| TelemetryError::Filter {
        filter: filter_text.clone(),
        message,
    })?;
    let fmt = match config.log_format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(ansi)
            .with_target(false)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(writer)
            .with_current_span(true)
            .boxed(),
    };
    let provider = if otlp_requested(&|k| std::env::var(k).ok()) {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        Some(
            SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(resource(service_name))
                .build(),
        )
    } else {
        None
    };
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let otel = provider.as_ref().map(|p| otel_layer(p, service_name));
    let notices = notices.map(crate::notices::NoticeLayer::new);
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .with(notices)
        .try_init()
        .map_err(|e| TelemetryError::Install(e.to_string()))?;
    if provider.is_some() {
        tracing::info!(service = service_name, "otlp trace export enabled");
    }
    Ok(TelemetryGuard { provider })
}

/// Parses a log filter. A bare word is a module name to `EnvFilter` (logged at every level, all
/// else off), so a level misspelt — `warning`, `verbose` — would silence every log without a
/// word: such words are refused, naming the levels.
fn parse_filter(text: &str) -> Result<EnvFilter, String> {
    const LEVELISH: &[&str] = &[
        "warning",
        "warnings",
        "err",
        "errors",
        "information",
        "informational",
        "verbose",
        "debugging",
        "critical",
        "fatal",
        "all",
        "none",
        "notice",
        "quiet",
        "silent",
    ];
    const LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];
    for directive in text.split(',').map(str::trim) {
        let word = directive.to_ascii_lowercase();
        // A bare word a typo away from a level (`inof`, `debugg`, `warnn`) is one too.
        let misspelt = !directive.contains(['=', ':', '['])
            && !LEVELS.contains(&word.as_str())
            && LEVELS.iter().any(|l| edit_distance(&word, l) <= 2);
        if misspelt || LEVELISH.contains(&word.as_str()) {
            return Err(format!(
                "`{directive}` is not a level; the levels are off, error, warn, info, debug and \
                 trace (a bare word names a module, logged at every level while all else is off)"
            ));
        }
    }
    // The file watcher's crate warns once per directory removed from a watched tree (its
    // watch is gone with it: `WatchNotFound`), which reads as a fault in a terminal and the
    // TUI. Its own failures reach ploke as errors; its log is kept to errors unless named.
    let text = if text.contains("notify") {
        text.to_owned()
    } else if text.trim().is_empty() {
        "notify=error".to_owned()
    } else {
        format!("{text},notify=error")
    };
    EnvFilter::try_new(&text).map_err(|e| e.to_string())
}

/// Levenshtein distance of two short words.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::{otlp_requested, parse_filter};

    #[test]
    fn a_misspelt_level_is_refused_rather_than_silencing_every_log() {
        for good in [
            "info",
            "warn,ploke_gateway=debug",
            "tantivy",
            "off",
            "ploke=trace",
        ] {
            assert!(parse_filter(good).is_ok(), "{good}");
        }
        assert_eq!(
            parse_filter("info, Warning").err(),
            Some(
                "`Warning` is not a level; the levels are off, error, warn, info, debug and trace \
                 (a bare word names a module, logged at every level while all else is off)"
                    .to_owned()
            )
        );
        assert!(parse_filter("verbose").is_err());
        for typo in ["inof", "debugg", "warnn", "eror", "tarce"] {
            assert!(parse_filter(typo).is_err(), "{typo}");
        }
        for module in ["tokio", "hyper", "h2", "notify", "tower", "sqlx", "tonic"] {
            assert!(parse_filter(module).is_ok(), "{module}");
        }
        // A level after `=` is EnvFilter's to check.
        assert!(parse_filter("ploke=bogus").is_err());
    }

    #[test]
    fn otlp_only_when_the_environment_asks() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert!(!otlp_requested(&env(&[])));
        assert!(otlp_requested(&env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4317"
        )])));
        assert!(otlp_requested(&env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:4317"
        )])));
        assert!(!otlp_requested(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_SDK_DISABLED", "true"),
        ])));
        assert!(!otlp_requested(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ])));
    }
}
