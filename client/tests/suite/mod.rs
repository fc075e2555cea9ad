//! Runs the real `ploke` binary against a Sandbox (all four services) whose provider is the
//! fake OpenAI server.

mod checkouts;
mod commands;
mod mcp;
mod tui;
mod up;

use std::path::Path;
use std::process::Output;

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::FakeProvider;
use ploke_runtime::ServiceKind;

pub(crate) use ploke_e2e::LIB_RS;

pub(crate) struct Env {
    pub sandbox: Sandbox,
    pub fake: FakeProvider,
}

pub(crate) async fn env() -> Env {
    env_with(|_| {}).await
}

/// [`env`] with the deployment's configuration adjusted.
pub(crate) async fn env_with(adjust: impl FnOnce(&mut ploke_runtime::PlokeConfig)) -> Env {
    let fake = FakeProvider::start().await.unwrap();
    let provider = fake.provider_config(None);
    let sandbox = Sandbox::start_with_provider(provider, adjust)
        .await
        .unwrap();
    Env { sandbox, fake }
}

impl Env {
    /// Runs `ploke ARGS --gateway URL` with the Sandbox token.
    pub(crate) async fn ploke(&self, args: &[&str]) -> Output {
        let url = self.sandbox.addrs().url(ServiceKind::Gateway);
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        all.extend(["--gateway".to_owned(), url]);
        run(
            self.sandbox.workspace_root(),
            all,
            &[("PLOKE_TOKEN", ploke_e2e::TOKEN)],
        )
        .await
    }
}

/// Runs the binary in `dir` (a blocking wait on another thread: the services run on this
/// test's runtime).
pub(crate) async fn run(dir: &Path, args: Vec<String>, env: &[(&str, &str)]) -> Output {
    let mut command = command(dir, args, env);
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// `ploke ARGS` in `dir` with only the environment a test sets, stdin closed.
pub(crate) fn command(
    dir: &Path,
    args: Vec<String>,
    env: &[(&str, &str)],
) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ploke"));
    // Only what the test sets: none of the environment's PLOKE_* (a gateway, a config, …)
    // but the model scripts/test fetched.
    for (key, _) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        if key_text.starts_with("PLOKE_") && key_text != "PLOKE_EMBED_MODEL" {
            command.env_remove(key);
        }
    }
    command
        .args(args)
        .current_dir(dir)
        // The developer's own ~/.config/ploke is not the test's (a test may set its own).
        .env("XDG_CONFIG_HOME", dir.join(".no-user-config"));
    // A `PLOKE_*` variable given empty is left out (PLOKE_EMBED_MODEL, to use an endpoint).
    for (k, v) in env {
        if v.is_empty() && k.starts_with("PLOKE_") {
            command.env_remove(k);
        } else {
            command.env(k, v);
        }
    }
    command.stdin(std::process::Stdio::null());
    command
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
