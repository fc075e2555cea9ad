//! Helpers for test suites that run a real service binary: start it on `127.0.0.1:0` with JSON
//! logs, learn the bound address from its `serving` log line, stop it with SIGTERM.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A service binary running under test.
#[derive(Debug)]
pub struct RunningBinary {
    child: Child,
    /// The address it serves on.
    pub addr: SocketAddr,
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
    if !line.contains("\"message\":\"serving\"") {
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
        loop {
            match rx.recv_timeout(timeout) {
                Ok(line) => {
                    if let Some(addr) = serving_addr(&line) {
                        return Ok(Self {
                            child,
                            addr,
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
        Ok((exit, self.lines.try_iter().collect()))
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

#[cfg(test)]
mod tests {
    use super::serving_addr;

    #[test]
    fn finds_the_serving_line() {
        let line = r#"{"timestamp":"t","level":"INFO","fields":{"message":"serving","service":"x","addr":"127.0.0.1:4321"}}"#;
        assert_eq!(serving_addr(line), Some("127.0.0.1:4321".parse().unwrap()));
        assert_eq!(serving_addr(r#"{"fields":{"message":"other"}}"#), None);
    }
}
