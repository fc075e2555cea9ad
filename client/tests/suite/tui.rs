//! The real `ploke chat` in tmux (send-keys / capture-pane) against the Sandbox and the fake
//! provider: a question typed, the streamed answer on screen, an edit approved by keyboard,
//! Ctrl-C to leave.

use std::process::Command;
use std::time::{Duration, Instant};

use ploke_e2e::fake_provider::Reply;
use ploke_runtime::ServiceKind;

use super::env;

struct Tmux(String);

impl Tmux {
    fn run(args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(args)
            .output()
            .expect("tmux is installed (the TUI test drives it)")
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.0];
        args.extend_from_slice(keys);
        assert!(Self::run(&args).status.success());
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&Self::run(&["capture-pane", "-p", "-t", &self.0]).stdout)
            .into_owned()
    }

    /// Polls the pane (an external program: there is nothing to wait on but its screen).
    async fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "`{text}` never appeared:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Self::run(&["kill-session", "-t", &self.0]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_in_tmux_asks_streams_and_approves_an_edit() {
    let e = env().await;
    let edit = r#"{"edits": [{"search_replace": {"file_path": "src/lib.rs", "search": "a + b", "replace": "b + a"}}]}"#;
    e.fake.push([
        Reply::text(&["`add` returns ", "`a + b`."]),
        Reply::tool_calls(&[("call_1", "apply_code_edit", edit)]),
        Reply::text(&["Swapped."]),
    ]);
    let url = e.sandbox.addrs().url(ServiceKind::Gateway);
    let name = format!("ploke-test-{}", std::process::id());
    let command = format!(
        "PLOKE_TOKEN={} {} chat --gateway {url}",
        ploke_e2e::TOKEN,
        env!("CARGO_BIN_EXE_ploke")
    );
    let started = Tmux::run(&[
        "new-session",
        "-d",
        "-s",
        &name,
        "-x",
        "120",
        "-y",
        "32",
        // In the served workspace itself: a gateway serving this very tree (no overlay).
        "-c",
        &e.sandbox.workspace_root().display().to_string(),
        &command,
    ]);
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let tmux = Tmux(name);
    tmux.wait_for("tool calls").await;
    tmux.keys(&["what does add return?", "Enter"]);
    let screen = tmux.wait_for("`add` returns `a + b`.").await;
    assert!(screen.contains("you› what does add return?"), "{screen}");
    tmux.wait_for("tokens · index: ready").await;
    // Input history brings the question back; replace it with a new one.
    tmux.keys(&["Up"]);
    tmux.wait_for("› what does add return?").await;
    tmux.keys(&["C-u"]);
    for _ in 0.."what does add return?".len() {
        tmux.keys(&["BSpace"]);
    }
    tmux.keys(&["swap the operands", "Enter"]);
    tmux.wait_for("edit proposal").await;
    tmux.wait_for("+    b + a").await;
    tmux.keys(&["a"]);
    tmux.wait_for("Swapped.").await;
    assert!(
        std::fs::read_to_string(e.sandbox.workspace_root().join("src/lib.rs"))
            .unwrap()
            .contains("b + a")
    );
    tmux.keys(&["C-c"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Tmux::run(&["has-session", "-t", &tmux.0]).status.success() {
        assert!(
            Instant::now() < deadline,
            "ploke chat did not exit on Ctrl-C"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    e.sandbox.stop().await.unwrap();
}
