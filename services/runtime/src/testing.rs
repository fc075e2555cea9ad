//! Helpers for test suites: run a real service binary (start it on `127.0.0.1:0` with JSON
//! logs, learn the bound address from its `serving` log line and its metrics endpoint from
//! `serving metrics`, stop it with SIGTERM), scrape a metrics endpoint over real HTTP, and
//! capture the log lines a subscriber writes.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A service binary running under test.
#[derive(Debug)]
pub struct RunningBinary {
    child: Child,
    /// The address it serves on.
    pub addr: SocketAddr,
    /// Where it serves its metrics, when `[telemetry] metrics_listen` is set.
    pub metrics_addr: Option<SocketAddr>,
    /// Every log line it wrote to stderr so far is collected here after [`RunningBinary::terminate`].
    lines: mpsc::Receiver<String>,
}

/// The binary did not come up.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// It could not be started.
    #[error("spawning {0}: {1}")]
    Spawn(String, std::io::Error),
    /// It exited or closed stderr before logging `serving`.
    #[error("{binary} did not report serving; its output:\n{output}")]
    NoServing {
        /// The binary.
        binary: String,
        /// What it printed.
        output: String,
    },
}

fn serving_addr(line: &str) -> Option<SocketAddr> {
    logged_addr(line, "serving")
}

/// The `addr` field of a JSON log line whose message is `message`.
fn logged_addr(line: &str, message: &str) -> Option<SocketAddr> {
    if !line.contains(&format!("\"message\":\"{message}\"")) {
        return None;
    }
    let start = line.find("\"addr\":\"")? + "\"addr\":\"".len();
    let rest = &line[start..];
    rest[..rest.find('"')?].parse().ok()
}

impl RunningBinary {
    /// Starts `binary` with `args` plus `--listen 127.0.0.1:0 --log-format json` and waits (up to
    /// `timeout`) for its `serving` log line.
    pub fn start(binary: &Path, args: &[&str], timeout: Duration) -> Result<Self, SpawnError> {
        let name = binary.display().to_string();
        let mut command = Command::new(binary);
        // The child sees none of the developer's PLOKE_* settings: the test defines its config.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("PLOKE_") {
                command.env_remove(key);
            }
        }
        let mut child = command
            .args(args)
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| SpawnError::Spawn(name.clone(), e))?;
        let (tx, rx) = mpsc::channel();
        if let Some(stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let mut seen = Vec::new();
        let mut metrics_addr = None;
        loop {
            match rx.recv_timeout(timeout) {
                Ok(line) => {
                    if let Some(addr) = logged_addr(&line, "serving metrics") {
                        metrics_addr = Some(addr);
                    }
                    if let Some(addr) = serving_addr(&line) {
                        return Ok(Self {
                            child,
                            addr,
                            metrics_addr,
                            lines: rx,
                        });
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(SpawnError::NoServing {
                        binary: name,
                        output: seen.join("\n"),
                    });
                }
            }
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sends SIGTERM and waits for the exit; returns the status and every log line it wrote
    /// after `serving`.
    pub fn terminate(mut self) -> std::io::Result<(ExitStatus, Vec<String>)> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        if !status.success() {
            self.child.kill()?;
        }
        let exit = self.child.wait()?;
        // Every line up to the end of its stderr: the reader thread may not have passed on
        // the last ones yet when the exit is seen (bounded, should a grandchild hold it open).
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut lines = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => lines.push(line),
                Err(_) => break,
            }
        }
        Ok((exit, lines))
    }
}

impl Drop for RunningBinary {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs the operator-contract smoke check of a service binary: it starts with nothing but
/// `--data-dir` (plus `extra_args`), reports SERVING for `service`, lists it through reflection
/// v1 and v1alpha, and on SIGTERM drains and exits 0 without waiting out the drain deadline.
pub async fn check_binary(
    binary: &Path,
    service: &str,
    data_dir: &Path,
    extra_args: &[&str],
) -> Result<(), String> {
    let data = data_dir.to_string_lossy().into_owned();
    let mut args = vec!["--data-dir", data.as_str()];
    args.extend_from_slice(extra_args);
    let bin =
        RunningBinary::start(binary, &args, Duration::from_secs(30)).map_err(|e| e.to_string())?;
    let channel = tonic::transport::Endpoint::from_shared(bin.url())
        .map_err(|e| e.to_string())?
        .connect()
        .await
        .map_err(|e| format!("connecting: {e}"))?;
    let status = crate::probe::health(channel.clone(), service)
        .await
        .map_err(|e| format!("health: {e}"))?;
    if status != tonic_health::pb::health_check_response::ServingStatus::Serving {
        return Err(format!("health of {service} is {status:?}"));
    }
    for version in [
        crate::probe::ReflectionVersion::V1,
        crate::probe::ReflectionVersion::V1Alpha,
    ] {
        let services = crate::probe::reflected_services(channel.clone(), version)
            .await
            .map_err(|e| format!("reflection {version:?}: {e}"))?;
        if !services.iter().any(|s| s == service) {
            return Err(format!(
                "reflection {version:?} lists {services:?}, not {service}"
            ));
        }
    }
    // Terminate off the runtime thread: the client's connection must keep running to see the
    // server's GOAWAY, or the server would wait out its whole drain deadline.
    let (exit, lines) = tokio::task::spawn_blocking(move || bin.terminate())
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    if !exit.success() {
        return Err(format!("exit {exit:?}: {lines:#?}"));
    }
    if !lines
        .iter()
        .any(|l| l.contains("shutdown requested, draining"))
    {
        return Err(format!("no drain logged: {lines:#?}"));
    }
    if lines.iter().any(|l| l.contains("drain deadline passed")) {
        return Err(format!("an idle connection held up shutdown: {lines:#?}"));
    }
    Ok(())
}

/// One scrape of a metrics endpoint.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// The HTTP status code.
    pub status: u16,
    /// The `Content-Type` header.
    pub content_type: String,
    /// The body.
    pub body: String,
}

/// `GET {path}` from `addr` over a fresh HTTP/1.1 connection, as Prometheus scrapes.
pub async fn scrape(addr: SocketAddr, path: &str) -> std::io::Result<Scrape> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let raw = String::from_utf8_lossy(&raw);
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| bad("no header end"))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let content_type = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default();
    Ok(Scrape {
        status,
        content_type,
        body: body.to_owned(),
    })
}

/// The sum of the samples of `name` in the Prometheus text `exposition` whose labels include
/// every pair of `labels`; `None` when no sample matches.
pub fn metric(exposition: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut total = None;
    for line in exposition.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (sample_name, sample_labels) = match series.split_once('{') {
            Some((n, rest)) => (n, parse_labels(rest.trim_end_matches('}'))),
            None => (series, Vec::new()),
        };
        if sample_name != name
            || !labels
                .iter()
                .all(|(k, v)| sample_labels.iter().any(|(sk, sv)| sk == k && sv == v))
        {
            continue;
        }
        if let Ok(value) = value.parse::<f64>() {
            *total.get_or_insert(0.0) += value;
        }
    }
    total
}

/// `a="x",b="y\"z"` → [(a, x), (b, y"z)].
fn parse_labels(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, e)) = chars.next() {
                        value.push(if e == 'n' { '\n' } else { e });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.push((key.trim_start_matches(',').trim().to_owned(), value));
        rest = &after[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{metric, serving_addr};

    #[test]
    fn reads_samples_by_name_and_labels() {
        let text = "# TYPE x_total counter\n\
                    x_total{a=\"1\",b=\"q\\\"r\"} 2\n\
                    x_total{a=\"1\",b=\"s\"} 3\n\
                    x_total_other 7\n\
                    y 5\n";
        assert_eq!(metric(text, "x_total", &[("a", "1")]), Some(5.0));
        assert_eq!(metric(text, "x_total", &[("b", "q\"r")]), Some(2.0));
        assert_eq!(metric(text, "x_total", &[("a", "2")]), None);
        assert_eq!(metric(text, "y", &[]), Some(5.0));
    }

    #[test]
    fn finds_the_serving_line() {
        let line = r#"{"timestamp":"t","level":"INFO","fields":{"message":"serving","service":"x","addr":"127.0.0.1:4321"}}"#;
        assert_eq!(serving_addr(line), Some("127.0.0.1:4321".parse().unwrap()));
        assert_eq!(serving_addr(r#"{"fields":{"message":"other"}}"#), None);
    }
}

/// A log writer that keeps what is written, for tests that read the lines a subscriber
/// writes (`fmt::layer().with_writer(move || captured.clone())`).
#[derive(Debug, Clone, Default)]
pub struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        self.0
            .lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
