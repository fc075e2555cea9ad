//! A real PostgreSQL server for tests: Debian's `postgresql` binaries (installed by
//! `scripts/test` when missing) run a fresh cluster in a temp dir on a free loopback port,
//! its unix socket in the temp dir too, trusting local connections. Dropping it stops the
//! server and removes the cluster.
//!
//! Running as root, `initdb` and `postgres` refuse to start, so they run as the `postgres`
//! user (`runuser`), which owns the temp dir.
//!
//! [`Postgres::for_test`] is what tests call: it fails the test when the server cannot be
//! started in CI (`CI=true`) and skips it (returns `None`, printing why) elsewhere.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The role the cluster is created with (trusted, no password).
const ROLE: &str = "ploke";

/// PostgreSQL could not be started.
#[derive(Debug, thiserror::Error)]
pub enum PostgresError {
    /// No `initdb` was found.
    #[error(
        "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); scripts/test installs Debian's postgresql"
    )]
    NotInstalled,
    /// A file operation failed.
    #[error("postgres temp dir: {0}")]
    Io(#[from] std::io::Error),
    /// A command failed.
    #[error("{command} failed: {output}")]
    Command {
        /// What ran.
        command: String,
        /// Its stderr and stdout.
        output: String,
    },
}

/// A running PostgreSQL cluster.
#[derive(Debug)]
pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

/// The newest installed PostgreSQL's bin directory.
fn bin_dir() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let version = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn run(mut command: Command) -> Result<Output, PostgresError> {
    let shown = format!("{command:?}");
    let output = command.output()?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(PostgresError::Command {
            command: shown,
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&output.stderr),
                String::from_utf8_lossy(&output.stdout)
            ),
        })
    }
}

/// A free loopback port that stays free while the server is stopped between
/// [`Postgres::stop`] and [`Postgres::restart`] ([`crate::ports`]).
fn free_port() -> Result<u16, PostgresError> {
    crate::ports::free_run(1).ok_or_else(|| {
        PostgresError::Io(std::io::Error::other(
            "no free loopback port below the ephemeral range",
        ))
    })
}

impl Postgres {
    /// Initialises a cluster in a temp dir and starts it on a free loopback port.
    pub fn start() -> Result<Self, PostgresError> {
        let bin = bin_dir().ok_or(PostgresError::NotInstalled)?;
        let dir = tempfile::Builder::new().prefix("ploke-pg-").tempdir()?;
        let as_postgres = is_root();
        if as_postgres {
            run(Self::plain(
                "chown",
                &["postgres", &dir.path().display().to_string()],
            ))?;
        }
        let mut pg = Self {
            dir,
            bin,
            port: 0,
            as_postgres,
        };
        pg.watch();
        let data = pg.data().display().to_string();
        run(pg.tool(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                ROLE,
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        ))?;
        // A port found free can be taken before the server binds it: try a few.
        let mut last = None;
        for _ in 0..5 {
            pg.port = free_port()?;
            match pg.start_server() {
                Ok(()) => return Ok(pg),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(PostgresError::NotInstalled))
    }

    /// Starts the server of the initialised cluster on `self.port`.
    fn start_server(&self) -> Result<(), PostgresError> {
        let data = self.data().display().to_string();
        let options = format!(
            "-p {} -k {} -h 127.0.0.1 -F -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log").display().to_string();
        run(self.tool(
            "pg_ctl",
            &["-D", &data, "-o", &options, "-l", &log, "-w", "start"],
        ))
        .map(|_| ())
    }

    /// A watchdog that stops the server and removes the cluster if this process dies without
    /// dropping it (a test killed by a timeout), so no server outlives its test.
    fn watch(&self) {
        let dir = self.dir.path().display().to_string();
        let pg_ctl = self.bin.join("pg_ctl").display().to_string();
        let as_postgres = if self.as_postgres {
            "runuser -u postgres -- "
        } else {
            ""
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null && [ -d '{dir}' ]; do sleep 1; done; \
             [ -d '{dir}' ] && {as_postgres}'{pg_ctl}' -D '{dir}/data' -m immediate -w stop; \
             rm -rf '{dir}'",
            pid = std::process::id()
        );
        // Best effort: without it a killed test leaves a server behind, nothing worse.
        let _ = Command::new("sh")
            .args(["-c", &script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }

    /// Starts the server again after [`Self::stop`], on the same port with the same data.
    pub fn restart(&self) -> Result<(), PostgresError> {
        self.start_server()
    }

    /// A server for a test: `Some` when it started; when it cannot start, the test fails in
    /// CI (`CI=true`) and is skipped elsewhere (`None`, with the reason printed).
    pub fn for_test() -> Option<Self> {
        match Self::start() {
            Ok(pg) => Some(pg),
            Err(e) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
                panic!("PostgreSQL is required in CI and could not be started: {e}")
            }
            Err(e) => {
                eprintln!("skipped: PostgreSQL could not be started: {e}");
                None
            }
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn plain(program: &str, args: &[&str]) -> Command {
        let mut c = Command::new(program);
        c.args(args);
        c
    }

    fn tool(&self, name: &str, args: &[&str]) -> Command {
        let program = self.bin.join(name);
        let mut c = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        };
        c.args(args).current_dir(self.dir.path());
        c
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of the `postgres` database.
    pub fn url(&self) -> String {
        self.url_of("postgres")
    }

    /// The URL of database `name` (see [`Self::create_database`]).
    pub fn url_of(&self, name: &str) -> String {
        format!("postgres://{ROLE}@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates database `name` and returns its URL.
    pub fn create_database(&self, name: &str) -> Result<String, PostgresError> {
        let port = self.port.to_string();
        run(self.tool(
            "createdb",
            &["-h", "127.0.0.1", "-p", &port, "-U", ROLE, name],
        ))?;
        Ok(self.url_of(name))
    }

    /// Runs `sql` in database `db` with `psql` and returns its unaligned, tuples-only output
    /// (one row a line, columns separated by `|`).
    pub fn sql(&self, db: &str, sql: &str) -> Result<String, PostgresError> {
        let port = self.port.to_string();
        let out = run(self.tool(
            "psql",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                ROLE,
                "-d",
                db,
                "-v",
                "ON_ERROR_STOP=1",
                "-At",
                "-c",
                sql,
            ],
        ))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The server's log so far (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Stops the server at once (as a crash or an operator would), keeping the cluster.
    pub fn stop(&self) -> Result<(), PostgresError> {
        let data = self.data().display().to_string();
        run(self.tool("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"])).map(|_| ())
    }

    /// The temp dir holding the cluster.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // Already stopped is fine; the temp dir goes with `dir`.
        let _ = self.stop();
    }
}
