//! What tenancy costs a shared deployment, for docs/PERFORMANCE.md: the whole stack in this
//! process (the Sandbox) serving `--workspace` (default: this repository's `services/`),
//! measured through the gateway with real gRPC clients.
//!
//! 1. Authentication: GetSystemStatus and BM25 Search p50/p99 through the gateway with a plain
//!    token, and with a token of a principals file of `--principals` (50) entries.
//! 2. A developer's overlay: their checkout is a copy of the workspace with `--changed` (10)
//!    files edited; the client's first sync (scan + hash the checkout, manifest, upload what
//!    the server lacks, index it), a sync with nothing changed, a sync after one more edit; then
//!    a `read_file` of a changed file and a `request_code_context` through the session (direct
//!    ExecuteTool calls, p50 over `--rounds`).
//!
//! Not a test.
//!
//!   cargo bench -p ploke-e2e --bench tenancy -- [--workspace DIR] [--principals N]
//!       [--changed N] [--rounds N] [--embed-model DIR]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use ploke_e2e::Sandbox;
use ploke_e2e::bench::{arg, number, pct};
use ploke_proto::gateway::v1::GetSystemStatusRequest;
use ploke_proto::rag::v1::{SearchRequest, Strategy};
use ploke_proto::session::v1::CreateSessionRequest;
use ploke_proto::tools::v1::{ReadFileArgs, RequestCodeContextArgs, tool_call};
use ploke_runtime::ServiceKind;
use ploke_runtime::config::ApplyTo;

fn hash(token: &str) -> String {
    ploke_gateway::auth::principals::token_sha256(token)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Copies the files of `from` (not `.ploke`, not `target`) into `to`.
fn copy_tree(from: &Path, to: &Path) -> Vec<String> {
    let mut copied = Vec::new();
    let mut dirs = vec![from.to_owned()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = e.path();
            let rel = path.strip_prefix(from).unwrap().to_owned();
            let name = e.file_name().to_string_lossy().into_owned();
            if name == ".ploke" || name == "target" || name == ".git" {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.is_file() {
                let dest = to.join(&rel);
                std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                std::fs::copy(&path, &dest).unwrap();
                copied.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    copied.sort();
    copied
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workspace = ploke_e2e::bench::workspace(&args);
    let workspace = std::fs::canonicalize(workspace).unwrap();
    let principals = number(&args, "--principals", 50);
    let changed = number(&args, "--changed", 10) as usize;
    let rounds = number(&args, "--rounds", 200) as usize;
    let model = arg(&args, "--embed-model").map(PathBuf::from);

    // A copy of the workspace is served (the bench writes nothing into the original).
    let served = tempfile::tempdir().unwrap();
    let files = copy_tree(&workspace, served.path());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("principals.toml");
    let mut text = String::new();
    for i in 0..principals {
        text.push_str(&format!(
            "[[principal]]\nname = \"dev{i}\"\ntoken_sha256 = \"{}\"\nworkspaces = [\"*\"]\n\n",
            hash(&format!("developer-token-{i:04}-abcdef"))
        ));
    }
    std::fs::write(&file, text).unwrap();
    let me = format!("developer-token-{:04}-abcdef", principals - 1);
    let root = served.path().to_owned();
    let fake = ploke_e2e::fake_provider::FakeProvider::start()
        .await
        .unwrap();
    let provider = fake.provider_config(Some(128_000));
    let sandbox = Sandbox::start_with(move |c| {
        c.providers = std::collections::BTreeMap::from([("fake".to_owned(), provider)]);
        c.workspaces = vec![root];
        c.rag_search.watch = false;
        c.gateway.principals_file = Some(file);
        c.tool_executor.apply_to = ApplyTo::Overlay;
        c.rag_search.embed_model = model;
    })
    .await
    .unwrap();
    sandbox.index().await.unwrap();
    println!(
        "tenancy: {} files served ({}), {principals} principals, {}",
        files.len(),
        workspace.display(),
        if arg(&args, "--embed-model").is_some() {
            "with the embedding model"
        } else {
            "BM25 only"
        }
    );

    // 1. Authentication.
    for (label, mut gw) in [
        ("plain token", sandbox.gateway()),
        ("principals file", sandbox.gateway_with_token(Some(&me))),
    ] {
        let mut status = Vec::with_capacity(rounds);
        let mut search = Vec::with_capacity(rounds);
        for i in 0..rounds {
            let t = Instant::now();
            gw.get_system_status(GetSystemStatusRequest {})
                .await
                .unwrap();
            status.push(t.elapsed());
            let t = Instant::now();
            gw.search(SearchRequest {
                query: ["spawn task", "read file", "error status", "index"][i % 4].into(),
                strategy: Strategy::Bm25 as i32,
                top_k: 10,
                ..Default::default()
            })
            .await
            .unwrap();
            search.push(t.elapsed());
        }
        let (s50, s99) = pct(status);
        let (q50, q99) = pct(search);
        println!(
            "  {label:>15}: GetSystemStatus p50 {s50:.2} ms p99 {s99:.2} ms; BM25 Search p50 {q50:.2} ms p99 {q99:.2} ms"
        );
    }

    // 2. A developer's overlay.
    let mine = tempfile::tempdir().unwrap();
    copy_tree(served.path(), mine.path());
    let rust: Vec<&String> = files.iter().filter(|f| f.ends_with(".rs")).collect();
    let edited: Vec<&String> = rust
        .iter()
        .step_by((rust.len() / changed).max(1))
        .take(changed)
        .copied()
        .collect();
    for (i, f) in edited.iter().enumerate() {
        let path = mine.path().join(f);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(
            &path,
            format!("{text}\n/// Only in this checkout.\npub fn bench_local_{i}(n: u32) -> u32 {{\n    n + {i}\n}}\n"),
        )
        .unwrap();
    }
    let gw = sandbox.gateway_with_token(Some(&me));
    let session = || {
        let mut gw = gw.clone();
        async move {
            gw.create_session(CreateSessionRequest::default())
                .await
                .unwrap()
                .into_inner()
                .session_id
        }
    };
    let plain = session().await;
    let session = session().await;
    let url = sandbox.addrs().url(ServiceKind::Gateway);
    let mut client = ploke_client::gateway::connect(&url, Some(me.clone()))
        .await
        .unwrap();
    let t = Instant::now();
    let first = ploke_client::overlay::sync(&mut client, &session, mine.path())
        .await
        .unwrap();
    let first_ms = t.elapsed().as_secs_f64() * 1000.0;
    let manifest_t = Instant::now();
    let manifest = ploke_client::overlay::manifest(mine.path());
    let manifest_ms = manifest_t.elapsed().as_secs_f64() * 1000.0;
    let mut unchanged = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        ploke_client::overlay::sync(&mut client, &session, mine.path())
            .await
            .unwrap();
        unchanged.push(t.elapsed());
    }
    let path = mine.path().join(edited[0]);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}\n// one more line\n")).unwrap();
    let t = Instant::now();
    let one = ploke_client::overlay::sync(&mut client, &session, mine.path())
        .await
        .unwrap();
    let one_ms = t.elapsed().as_secs_f64() * 1000.0;
    let (u50, u99) = pct(unchanged);
    println!(
        "  overlay: {} files in the checkout (manifest {manifest_ms:.0} ms); first sync {first_ms:.0} ms ({first}); unchanged sync p50 {u50:.0} ms p99 {u99:.0} ms; one more edit {one_ms:.0} ms ({one})",
        manifest.len()
    );

    // Tools through a session with the overlay and one without: a changed file read, and the
    // context that finds its new item.
    for (label, session) in [
        ("without an overlay", &plain),
        ("through the overlay", &session),
    ] {
        let mut tools = sandbox.tools();
        let mut read = Vec::with_capacity(rounds);
        let mut context = Vec::with_capacity(rounds);
        for i in 0..rounds {
            let call = |args| ploke_e2e::tool_request(session, &format!("c{i}"), args);
            let t = Instant::now();
            let mut s = tools
                .execute_tool(call(tool_call::Args::ReadFile(ReadFileArgs {
                    file: edited[i % edited.len()].clone(),
                    start_line: None,
                    end_line: None,
                })))
                .await
                .unwrap()
                .into_inner();
            while s.message().await.unwrap().is_some() {}
            read.push(t.elapsed());
            let t = Instant::now();
            let mut s = tools
                .execute_tool(call(tool_call::Args::RequestCodeContext(
                    RequestCodeContextArgs {
                        search_term: Some(format!("bench_local_{}", i % edited.len())),
                        token_budget: None,
                        languages: vec![],
                    },
                )))
                .await
                .unwrap()
                .into_inner();
            while s.message().await.unwrap().is_some() {}
            context.push(t.elapsed());
        }
        let (r50, r99) = pct(read);
        let (c50, c99) = pct(context);
        println!(
            "  {label:>20}: read_file p50 {r50:.2} ms p99 {r99:.2} ms; request_code_context p50 {c50:.2} ms p99 {c99:.2} ms"
        );
    }
    sandbox.stop().await.unwrap();
}
