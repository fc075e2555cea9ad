//! `ploke search`, `ask`, `sessions` and `edits` as a user runs them.

use ploke_e2e::Sandbox;
use ploke_e2e::fake_provider::{FakeProvider, Reply};
use ploke_proto::common::v1::Correlation;
use ploke_proto::tools::v1::*;

use ploke_runtime::ServiceKind;

use super::{env, text};

#[tokio::test]
async fn search_prints_ranked_hits() {
    let e = env().await;
    let out = e
        .ploke(&["search", "add two numbers", "--strategy", "bm25"])
        .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("  1. src/lib.rs:1-4  crate::add (function)  score "),
        "{stdout}"
    );
    assert!(
        stdout.contains("pub fn add(a: i32, b: i32) -> i32 {"),
        "{stdout}"
    );
    e.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn search_keeps_the_languages_asked_for_and_names_an_unknown_one() {
    let e = env().await;
    let out = e
        .ploke(&[
            "search",
            "add two numbers",
            "--strategy",
            "bm25",
            "--lang",
            "python",
        ])
        .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "no matches\n");
    let out = e
        .ploke(&[
            "search",
            "add two numbers",
            "--lang",
            "rust",
            "--path",
            "src",
        ])
        .await;
    assert!(text(&out.stdout).starts_with("  1. src/lib.rs:1-4  crate::add (function)"));
    let out = e
        .ploke(&["search", "add two numbers", "--lang", "pyhton"])
        .await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("filters.languages[0]: unknown language `pyhton`; known: c,"),
        "{}",
        text(&out.stderr)
    );
    e.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn ask_streams_the_answer_and_summarises_tool_calls() {
    let e = env().await;
    e.fake.push([
        Reply::tool_calls(&[("call_1", "read_file", r#"{"file": "src/lib.rs"}"#)]),
        Reply::text(&["`add` returns ", "`a + b`."]),
    ]);
    let out = e.ploke(&["ask", "what does add return?"]).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(text(&out.stdout), "`add` returns `a + b`.\n");
    assert!(
        stderr.contains("→ read_file {\"file\":\"src/lib.rs\"}"),
        "{stderr}"
    );
    assert!(stderr.contains("  ✓ read_file ("), "{stderr}");
    assert!(
        stderr.contains("(2 round(s), 300 tokens in, 22 out,"),
        "{stderr}"
    );
    let sessions = e.ploke(&["sessions"]).await;
    assert!(
        text(&sessions.stdout).contains("fake/fake-model"),
        "{}",
        text(&sessions.stdout)
    );
    assert!(text(&sessions.stdout).contains("what does add return?"));
    // When it was last used (seconds ago, here), one workspace: none named.
    assert!(
        text(&sessions.stdout).contains("s ago  ") && !text(&sessions.stdout).contains("  ["),
        "{}",
        text(&sessions.stdout)
    );
    e.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_piped_answer_holds_only_the_retry_that_completed() {
    let e = env().await;
    // The first stream breaks after its first piece; the retry answers whole.
    e.fake.push([
        Reply::text(&["Half an ", "answer."]).cut_after(1),
        Reply::text(&["The whole ", "answer."]),
    ]);
    let out = e.ploke(&["ask", "what does add return?"]).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(text(&out.stdout), "The whole answer.\n");
    assert!(stderr.contains("retrying in"), "{stderr}");
    e.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_piped_answer_larger_than_one_event_is_printed_whole() {
    let e = env().await;
    // 3 MiB of text: more than one stored message event holds (2 MiB), within the turn's
    // output limit (4 MiB).
    let piece = "0123456789abcdef\n".repeat(64 * 1024);
    e.fake.push([Reply::text(&[
        piece.as_str(),
        piece.as_str(),
        piece.as_str(),
    ])]);
    let out = e.ploke(&["ask", "print a lot"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout.len(), piece.len() * 3);
    assert!(text(&out.stdout) == piece.repeat(3));
    e.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn ask_without_a_terminal_denies_edits_and_says_so() {
    let e = env().await;
    let edit = r#"{"edits": [{"search_replace": {"file_path": "src/lib.rs", "search": "a + b", "replace": "a - b"}}]}"#;
    e.fake.push([
        Reply::tool_calls(&[("call_1", "apply_code_edit", edit)]),
        Reply::text(&["Left it alone."]),
    ]);
    let out = e.ploke(&["ask", "subtract instead"]).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("-    a + b\n+    a - b"), "{stderr}");
    assert!(stderr.contains("not a terminal: denied"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(e.sandbox.workspace_root().join("src/lib.rs")).unwrap(),
        super::LIB_RS
    );
    // With --approve the same edit is applied.
    e.fake.push([
        Reply::tool_calls(&[("call_1", "apply_code_edit", edit)]),
        Reply::text(&["Done."]),
    ]);
    let out = e.ploke(&["ask", "subtract instead", "--approve"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        std::fs::read_to_string(e.sandbox.workspace_root().join("src/lib.rs"))
            .unwrap()
            .contains("a - b")
    );
    e.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn ask_under_auto_approve_shows_the_edit_asks_nothing_and_says_what_the_policy_did() {
    let e = super::env_with(|c| c.tool_executor.auto_approve = true).await;
    let edit = r#"{"edits": [{"search_replace": {"file_path": "src/lib.rs", "search": "a + b", "replace": "a - b"}}]}"#;
    e.fake.push([
        Reply::tool_calls(&[("call_1", "apply_code_edit", edit)]),
        Reply::text(&["Done."]),
    ]);
    let out = e.ploke(&["ask", "subtract instead"]).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The proposal says the policy decides it: no denial is sent (it would race the
    // policy's decision) and nothing is asked.
    assert!(stderr.contains("-    a + b\n+    a - b"), "{stderr}");
    assert!(
        stderr.contains(
            "(the deployment's auto_approve policy decides this proposal; nothing to answer)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(" is applied: decided by the auto_approve policy)"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("denied") && !stderr.contains("[y/N]"),
        "{stderr}"
    );
    assert!(
        std::fs::read_to_string(e.sandbox.workspace_root().join("src/lib.rs"))
            .unwrap()
            .contains("a - b")
    );
    e.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn a_failed_turn_exits_non_zero() {
    let e = env().await;
    e.fake.push([
        Reply::status(500, "down"),
        Reply::status(500, "down"),
        Reply::status(500, "down"),
    ]);
    let out = e.ploke(&["ask", "hello"]).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains(&format!(
            "the turn failed (provider): provider {} answered HTTP 500: down",
            e.fake.url()
        )),
        "{}",
        text(&out.stderr)
    );
    e.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn ctrl_c_cancels_the_turn_on_the_server_and_the_provider_request_with_it() {
    let e = env().await;
    e.fake.push([Reply::deltas_forever(
        "more ",
        std::time::Duration::from_millis(20),
    )]);
    let first_byte = e.fake.first_byte();
    let started = first_byte.notified();
    let url = e.sandbox.addrs().url(ServiceKind::Gateway);
    let child = super::command(
        e.sandbox.workspace_root(),
        vec![
            "ask".into(),
            "tell me everything".into(),
            "--gateway".into(),
            url,
        ],
        &[("PLOKE_TOKEN", ploke_e2e::TOKEN)],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    started.await;
    let pid = child.id().to_string();
    let signalled = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(signalled.success());
    // The provider sees its client leave: the model request is dropped, not left running.
    e.fake.disconnected().await;
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("(cancelling the turn; Ctrl-C again to stop waiting)")
            && stderr.contains("the turn failed (cancelled): cancelled with Ctrl-C in `ploke ask`"),
        "{stderr}"
    );
    // Nothing runs any more: the session can be deleted at once.
    let listed = e.ploke(&["sessions"]).await;
    let id = text(&listed.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    assert!(!text(&listed.stdout).contains("(running)"));
    // The list says how the session's last turn ended.
    assert!(
        text(&listed.stdout)
            .trim_end()
            .ends_with("(last turn cancelled: cancelled with Ctrl-C in `ploke ask`)"),
        "{}",
        text(&listed.stdout)
    );
    let cancel = e.ploke(&["sessions", "cancel", &id]).await;
    assert_eq!(
        text(&cancel.stdout),
        format!("{id} is not running a turn\n")
    );
    let rm = e.ploke(&["sessions", "rm", &id]).await;
    assert!(rm.status.success(), "{}", text(&rm.stderr));
    e.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn edits_lists_pending_proposals_and_approves_them() {
    let e = env().await;
    let request = ExecuteToolRequest {
        correlation: Some(Correlation {
            call_id: "c1".into(),
            request_id: "r1".into(),
            ..Default::default()
        }),
        call: Some(ToolCall {
            args: Some(tool_call::Args::ApplyCodeEdit(ApplyCodeEditArgs {
                edits: vec![CodeEdit {
                    edit: Some(code_edit::Edit::SearchReplace(SearchReplaceEdit {
                        file_path: "src/lib.rs".into(),
                        search: "a + b".into(),
                        replace: "b + a".into(),
                    })),
                }],
            })),
        }),
        ..Default::default()
    };
    let mut stream = e
        .sandbox
        .tools()
        .execute_tool(request)
        .await
        .unwrap()
        .into_inner();
    let Some(execute_tool_event::Event::EditProposed(p)) =
        stream.message().await.unwrap().unwrap().event
    else {
        panic!()
    };
    let listed = e.ploke(&["edits"]).await;
    let stdout = text(&listed.stdout);
    assert!(
        stdout.starts_with(&format!(
            "{}  pending  apply_code_edit  1 edit(s)\n    [0] search/replace in src/lib.rs\n",
            p.proposal_id
        )),
        "{stdout}"
    );
    assert!(stdout.contains("-    a + b\n+    b + a\n"), "{stdout}");
    let approved = e.ploke(&["edits", "approve", &p.proposal_id]).await;
    assert!(approved.status.success(), "{}", text(&approved.stderr));
    assert!(
        text(&approved.stdout).contains("applied"),
        "{}",
        text(&approved.stdout)
    );
    assert!(
        std::fs::read_to_string(e.sandbox.workspace_root().join("src/lib.rs"))
            .unwrap()
            .contains("b + a")
    );
    let again = e.ploke(&["edits", "deny", &p.proposal_id]).await;
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("only a pending proposal can be decided"),
        "{}",
        text(&again.stderr)
    );
    e.sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn search_without_a_gateway_runs_the_services_in_process() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), super::LIB_RS).unwrap();
    let out = super::run(
        dir.path(),
        vec![
            "search".into(),
            "add".into(),
            "--strategy".into(),
            "bm25".into(),
        ],
        &[("OPENAI_API_KEY", ""), ("OPENROUTER_API_KEY", "")],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("src/lib.rs:1-4  crate::add (function)"),
        "{}",
        text(&out.stdout)
    );
    // The services index the workspace on their own as they start; the command waits for
    // that run (or its own, when the first one ended before it asked) to be searchable and
    // reports it: done, or its items searchable while it embeds.
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(", 1 items,") || stderr.contains("  1 items searchable by keywords"),
        "{stderr}"
    );
    assert!(dir.path().join(".ploke").is_dir());
}

/// State kept inside the workspace (not in `.ploke`) would be indexed and read by the model's
/// tools: refused, naming both.
#[tokio::test]
async fn a_data_dir_inside_the_workspace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), super::LIB_RS).unwrap();
    std::fs::write(root.join("ploke.toml"), "data_dir = \"state\"\n").unwrap();
    let out = super::run(
        &root,
        ["search", "add", "--strategy", "bm25"]
            .map(String::from)
            .to_vec(),
        &[("OPENAI_API_KEY", ""), ("OPENROUTER_API_KEY", "")],
    )
    .await;
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "error: data_dir {} is inside the workspace {}: its index, sessions and logs would be indexed and read by the model's tools",
            root.join("state").display(),
            root.display()
        )),
        "{stderr}"
    );
    assert!(!root.join("state").exists());
}

/// `ploke search … | head -0`: the reader is gone before the answer is written. The command
/// ends as `cat` does (exit 141), not with a panic in `println!`.
#[tokio::test]
async fn a_command_whose_reader_went_away_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), super::LIB_RS).unwrap();
    let mut command = super::command(
        dir.path(),
        ["search", "add", "--strategy", "bm25"]
            .map(String::from)
            .to_vec(),
        &[("OPENAI_API_KEY", ""), ("OPENROUTER_API_KEY", "")],
    );
    command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().unwrap();
        drop(child.stdout.take());
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    // 128 + SIGPIPE, as `cat` ends, and no panic said.
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test]
async fn an_in_process_search_answers_while_the_run_still_embeds() {
    // An embedding endpoint that answers rag-search's probe, then nothing until released: the
    // run stays embedding.
    let fake = ploke_e2e::fake_embeddings::FakeEmbeddings::start(8)
        .await
        .unwrap();
    fake.hold_after(1);
    let endpoint = fake.config();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), super::LIB_RS).unwrap();
    std::fs::write(
        dir.path().join("ploke.toml"),
        format!(
            "[embedding]\nbase_url = \"{}\"\nmodel = \"{}\"\n",
            endpoint.base_url, endpoint.model
        ),
    )
    .unwrap();
    let out = super::run(
        dir.path(),
        vec!["search".into(), "add two numbers".into()],
        &[
            ("OPENAI_API_KEY", ""),
            ("OPENROUTER_API_KEY", ""),
            ("PLOKE_EMBED_MODEL", ""),
        ],
    )
    .await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Two items (the function and ploke.toml's lines), none embedded; and the command ends
    // cleanly while the run still waits on the endpoint.
    assert!(
        stderr.contains("2 items searchable by keywords; embedding 0/2 goes on in the background"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        text(&out.stdout).contains("src/lib.rs:1-4  crate::add (function)"),
        "{}",
        text(&out.stdout)
    );
    fake.release();
}

#[tokio::test]
async fn ask_without_any_provider_says_how_to_get_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README.md"), "# empty\n").unwrap();
    let out = super::run(
        dir.path(),
        vec!["ask".into(), "hello".into()],
        &[("OPENAI_API_KEY", ""), ("OPENROUTER_API_KEY", "")],
    )
    .await;
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    // (An Ollama answering on 127.0.0.1:11434 would be picked up instead; none runs here.)
    assert!(
        stderr.contains("error: no model provider is reachable: set OPENAI_API_KEY or OPENROUTER_API_KEY, start Ollama on 127.0.0.1:11434, or add [providers.NAME] to the workspace's ploke.toml or to ~/.config/ploke/config.toml"),
        "{stderr}"
    );
    // Said before any indexing, and as one line: no backtrace even when asked for one.
    assert!(!stderr.contains("indexing"), "{stderr}");
    let out = super::run(
        dir.path(),
        vec!["ask".into(), "hello".into()],
        &[
            ("OPENAI_API_KEY", ""),
            ("OPENROUTER_API_KEY", ""),
            ("RUST_BACKTRACE", "1"),
        ],
    )
    .await;
    assert_eq!(
        text(&out.stderr).lines().count(),
        1,
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn an_empty_query_or_question_is_refused_before_any_service_starts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), "pub fn tally() {}\n").unwrap();
    let mut said = Vec::new();
    for args in [["search", "  "], ["ask", ""]] {
        let out = super::run(dir.path(), args.map(String::from).to_vec(), &[]).await;
        said.push((out.status.success(), text(&out.stderr)));
    }
    assert_eq!(
        said,
        [
            (
                false,
                "error: the query is empty: ploke search \"retry backoff\"\n".to_owned()
            ),
            (
                false,
                "error: the question is empty: ploke ask \"what does parse_config return?\"\n"
                    .to_owned()
            ),
        ]
    );
    // Nothing was indexed for it.
    assert!(!dir.path().join(".ploke").exists());
}

/// The workspace's `ploke.toml` and the user's `config.toml` are found without `--config`;
/// `ploke config` says which value came from where.
#[tokio::test]
async fn config_files_are_discovered_and_ploke_config_names_each_values_source() {
    let fake = ploke_e2e::fake_provider::FakeProvider::start()
        .await
        .unwrap();
    fake.push([Reply::text(&["from the workspace's provider"])]);
    let dir = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::write(workspace.join("src/lib.rs"), super::LIB_RS).unwrap();
    let user = dir.path().join("xdg");
    std::fs::create_dir_all(user.join("ploke")).unwrap();
    std::fs::write(
        user.join("ploke/config.toml"),
        "[session]\ndefault_provider = \"fake\"\n[gateway]\nlisten = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    std::fs::write(
        workspace.join("ploke.toml"),
        format!(
            "[providers.fake]\nbase_url = \"{}\"\ndefault_model = \"fake-model\"\n[gateway]\nlisten = \"127.0.0.1:0\"\n",
            fake.url()
        ),
    )
    .unwrap();
    let env = [
        ("OPENAI_API_KEY", ""),
        ("OPENROUTER_API_KEY", ""),
        ("XDG_CONFIG_HOME", user.to_str().unwrap()),
    ];
    let out = super::run(&workspace, vec!["ask".into(), "hi".into()], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "from the workspace's provider\n");

    let out = super::run(&workspace, vec!["config".into()], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let line = |key: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key}:\n{stdout}"))
            .split("  # ")
            .nth(1)
            .unwrap()
            .to_owned()
    };
    let ws_file = workspace.join("ploke.toml").display().to_string();
    let user_file = user.join("ploke/config.toml").display().to_string();
    assert_eq!(line("providers.fake.base_url"), ws_file);
    assert_eq!(line("gateway.listen"), ws_file);
    assert_eq!(line("session.default_provider"), user_file);
    assert_eq!(line("data_dir"), "derived");
    assert_eq!(line("llm_session.listen"), "default");
    assert!(
        stdout.starts_with(&format!(
            "# ploke config for {}\n# files, lowest first (a later one wins key by key):\n#   {user_file}\n#   {ws_file}\n# model provider: fake (config file)\n",
            workspace.display()
        )),
        "{stdout}"
    );
}

#[tokio::test]
async fn workspaces_are_added_listed_and_removed_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), super::LIB_RS).unwrap();
    let other = tempfile::tempdir().unwrap();
    let other_root = std::fs::canonicalize(other.path()).unwrap().join("ledger");
    std::fs::create_dir(&other_root).unwrap();
    std::fs::write(other_root.join("notes.rs"), "pub fn tally() {}\n").unwrap();
    let env = [("OPENAI_API_KEY", ""), ("OPENROUTER_API_KEY", "")];
    let ploke = |args: &[&str]| {
        super::run(
            dir.path(),
            args.iter().map(|a| (*a).to_owned()).collect(),
            &env,
        )
    };

    let out = ploke(&["workspaces", "add", &other_root.display().to_string()]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with(&format!("{}  added  ", other_root.display())),
        "{}",
        text(&out.stdout)
    );
    // Kept in the data dir: the next run (new services) lists it after the configured one.
    let out = ploke(&["workspaces"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| l.split("  ").take(2).collect::<Vec<_>>().join("  "))
        .collect();
    let here = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        listed,
        vec![
            format!("{}  configured", here.display()),
            format!("{}  added", other_root.display()),
        ]
    );
    let out = ploke(&["workspaces", "add", "not/absolute"]).await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("path: must be an absolute path"),
        "{}",
        text(&out.stderr)
    );
    // Removed by its name, as the list shows it; a name served nowhere is refused with the list.
    let out = ploke(&["workspaces", "remove", "ledgers"]).await;
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: workspaces remove ledgers: the gateway serves you no such workspace (yours: \
             {} ({}), ledger ({}))",
            here.file_name().unwrap().to_string_lossy(),
            here.display(),
            other_root.display()
        ) + "\n"
    );
    let out = ploke(&["workspaces", "remove", "ledger"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with(&format!("removed {}  added", other_root.display())),
        "{}",
        text(&out.stdout)
    );
    let out = ploke(&["workspaces"]).await;
    assert_eq!(
        text(&out.stdout).lines().count(),
        1,
        "{}",
        text(&out.stdout)
    );
}

#[tokio::test]
async fn ask_from_a_checkout_of_a_shared_workspace_sends_its_changes_and_writes_approved_edits_there()
 {
    let fake = FakeProvider::start().await.unwrap();
    let sandbox = Sandbox::start_with_provider(fake.provider_config(None), |c| {
        c.tool_executor.apply_to = ploke_runtime::config::ApplyTo::Overlay;
    })
    .await
    .unwrap();
    // The developer's checkout: the served tree plus a change of their own.
    let mine = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(mine.path().join("src")).unwrap();
    let local = format!(
        "{}\npub fn mine_only() -> u8 {{\n    7\n}}\n",
        super::LIB_RS
    );
    std::fs::write(mine.path().join("src/lib.rs"), &local).unwrap();
    let edit = r#"{"edits": [{"search_replace": {"file_path": "src/lib.rs", "search": "    7\n", "replace": "    8\n"}}]}"#;
    fake.push([
        Reply::tool_calls(&[("call_1", "apply_code_edit", edit)]),
        Reply::text(&["Done."]),
    ]);
    let url = sandbox.addrs().url(ServiceKind::Gateway);
    // The client's own state (undo records) goes here, never into the checkout.
    let state = tempfile::tempdir().unwrap();
    let env = [
        ("PLOKE_TOKEN", ploke_e2e::TOKEN),
        ("XDG_STATE_HOME", &state.path().display().to_string()),
    ];
    let ask = |url: &str| {
        vec![
            "ask".into(),
            "make mine_only return 8".into(),
            "--approve".into(),
            "--gateway".into(),
            url.to_owned(),
        ]
    };
    // Asked from a subdirectory, whose paths are not the served tree's: refused, nothing sent.
    let src = mine.path().join("src");
    let out = super::run(&src, ask(&url), &env).await;
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: {} does not line up with the served workspace: none of the 1 file(s) here has a path of the served tree, and all 1 of its file(s) are missing here; run from the directory of your checkout that is the served workspace's root, or name it with --workspace DIR (--no-overlay sends no changes); nothing was uploaded\n",
            src.display()
        )
    );
    assert_eq!(fake.received().len(), 0);
    // The session it opened for the question is gone with it.
    let sessions = |args: &[&str]| {
        let mut v: Vec<String> = vec!["sessions".into()];
        v.extend(args.iter().map(|a| (*a).to_owned()));
        v.extend(["--gateway".into(), url.clone()]);
        v
    };
    let listed = super::run(mine.path(), sessions(&[]), &env).await;
    assert_eq!(
        text(&listed.stdout),
        "no sessions\n",
        "{}",
        text(&listed.stderr)
    );
    let out = super::run(mine.path(), ask(&url), &env).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("(your changes: 1 changed, 0 deleted file(s); 1 uploaded"),
        "{stderr}"
    );
    assert!(stderr.contains("(wrote src/lib.rs)"), "{stderr}");
    // The edit was planned against the developer's version (the served tree has no mine_only)
    // and written into the checkout; the served tree is untouched.
    assert_eq!(
        std::fs::read_to_string(mine.path().join("src/lib.rs")).unwrap(),
        local.replace("    7\n", "    8\n")
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.workspace_root().join("src/lib.rs")).unwrap(),
        super::LIB_RS
    );
    assert!(!mine.path().join(".ploke").exists());

    // `ploke sessions rm` deletes it by the start of its id; an id nobody has is an error.
    let listed = text(&super::run(mine.path(), sessions(&[]), &env).await.stdout);
    let id = listed.split_whitespace().next().unwrap().to_owned();
    let events = listed
        .split("  ")
        .find(|f| f.ends_with(" events"))
        .unwrap()
        .to_owned();
    let rm = super::run(mine.path(), sessions(&["rm", &id[..13]]), &env).await;
    assert!(rm.status.success(), "{}", text(&rm.stderr));
    assert_eq!(text(&rm.stdout), format!("deleted {id}  ({events})\n"));
    let listed = super::run(mine.path(), sessions(&[]), &env).await;
    assert_eq!(text(&listed.stdout), "no sessions\n");
    let rm = super::run(mine.path(), sessions(&["rm", &id]), &env).await;
    assert!(!rm.status.success());
    assert_eq!(
        text(&rm.stderr),
        format!("error: no session {id} (`ploke sessions` lists them)\n")
    );
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_gateway_is_one_line_each_cause_said_once() {
    // A port bound but not listening: connecting is refused, and no other test's server can
    // take the port meanwhile (a port freed before the call could be).
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = held.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let out = super::run(
        dir.path(),
        vec!["sessions".into(), "--gateway".into(), url.clone()],
        &[("PLOKE_TOKEN", "t")],
    )
    .await;
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: connecting to the gateway at {url}: transport error: tcp connect error: \
             Connection refused (os error 111)\n"
        )
    );
}
