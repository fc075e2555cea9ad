//! What a model reads back from each tool, in tokens, as JSON (`[session] tool_results =
//! "json"`, the default) and as text: the whole stack in this process (the Sandbox) serving a
//! copy of `--workspace` (default: this repository's `services/`), each tool called through the
//! gateway's `ExecuteTool` as llm-session calls it, both renderings counted with tiktoken's
//! o200k_base. For docs/RETRIEVAL.md. Not a test.
//!
//!   cargo bench -p ploke-e2e --bench tool_tokens -- [--workspace DIR] [--queries FILE]
//!
//! `--queries`: one search term per line for request_code_context (default: a fixed dozen).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ploke_e2e::Sandbox;
use ploke_e2e::bench::{arg, copy_of};
use ploke_proto::registry::ToolRegistry;
use ploke_proto::tools::v1::{
    CodeItemLookupArgs, ExecuteToolRequest, ListDirArgs, ReadFileArgs, RequestCodeContextArgs,
    SearchCodeArgs, ToolCall, ToolResult, code_item_lookup_args, execute_tool_event, tool_call,
    tool_result,
};

const QUERIES: &[&str] = &[
    "index a workspace in the background",
    "how are edits approved",
    "reciprocal rank fusion of bm25 and dense",
    "parse tool arguments from json",
    "retry a provider request after a rate limit",
    "stream session events to a subscriber",
    "path policy for symlinks",
    "embed a batch of texts",
    "overlay of a developer's changed files",
    "load the config file and environment variables",
    "shut down the server gracefully",
    "count tokens of a message",
];

async fn call(sandbox: &Sandbox, args: tool_call::Args) -> Option<ToolResult> {
    let mut events = sandbox
        .gateway()
        .execute_tool(ExecuteToolRequest {
            call: Some(ToolCall { args: Some(args) }),
            ..Default::default()
        })
        .await
        .ok()?
        .into_inner();
    while let Some(e) = events.message().await.ok()? {
        match e.event {
            Some(execute_tool_event::Event::Result(r)) => return Some(r),
            Some(execute_tool_event::Event::Error(_)) => return None,
            _ => {}
        }
    }
    None
}

fn median(mut v: Vec<usize>) -> usize {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workspace = ploke_e2e::bench::workspace(&args);
    let queries: Vec<String> = match arg(&args, "--queries") {
        Some(f) => std::fs::read_to_string(f)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect(),
        None => QUERIES.iter().map(|q| (*q).to_owned()).collect(),
    };
    let served = copy_of(&workspace);
    let root = served.path().to_owned();
    let sandbox = Sandbox::start_with(move |c| {
        c.workspaces = vec![root];
        c.rag_search.watch = false;
    })
    .await
    .unwrap();
    sandbox.index().await.unwrap();
    let registry = ToolRegistry::global().unwrap();
    let bpe = tiktoken_rs::o200k_base().unwrap();
    let tokens = |s: &str| bpe.encode_ordinary(s).len();

    // Calls of every read-only tool: context for each query, then the other tools on what it
    // found (the first part's file, item and directory).
    let mut calls: Vec<(&str, tool_call::Args)> = Vec::new();
    for q in &queries {
        calls.push((
            "request_code_context",
            tool_call::Args::RequestCodeContext(RequestCodeContextArgs {
                search_term: Some(q.clone()),
                token_budget: None,
                languages: vec![],
            }),
        ));
    }
    let mut by_tool: std::collections::BTreeMap<&str, (Vec<usize>, Vec<usize>)> =
        std::collections::BTreeMap::new();
    let mut follow_ups = Vec::new();
    for (tool, a) in calls {
        let Some(r) = call(&sandbox, a).await else {
            continue;
        };
        if let Some(tool_result::Result::RequestCodeContext(c)) = &r.result
            && let Some(p) = c.parts.first()
        {
            follow_ups.push(p.file_path.clone());
            follow_ups.push(format!("canon:{}", p.canon_path));
        }
        let e = by_tool.entry(tool).or_default();
        e.0.push(tokens(&ploke_proto::tool_text::result(&r)));
        e.1.push(tokens(&registry.model_json(&r).unwrap()));
    }
    for f in follow_ups {
        let (tool, a) = match f.strip_prefix("canon:") {
            Some(canon) => (
                "code_item_lookup",
                tool_call::Args::CodeItemLookup(CodeItemLookupArgs {
                    target: Some(code_item_lookup_args::Target::CanonPath(canon.to_owned())),
                    kind: None,
                }),
            ),
            None => (
                "read_file",
                tool_call::Args::ReadFile(ReadFileArgs {
                    file: f.clone(),
                    start_line: None,
                    end_line: Some(80),
                }),
            ),
        };
        if let Some(r) = call(&sandbox, a).await {
            let e = by_tool.entry(tool).or_default();
            e.0.push(tokens(&ploke_proto::tool_text::result(&r)));
            e.1.push(tokens(&registry.model_json(&r).unwrap()));
        }
    }
    for (tool, a) in [
        (
            "list_dir",
            tool_call::Args::ListDir(ListDirArgs {
                path: None,
                include_hidden: None,
                max_entries: None,
            }),
        ),
        (
            "search_code",
            tool_call::Args::SearchCode(SearchCodeArgs {
                pattern: "fn new".into(),
                max_matches: Some(20),
                ..Default::default()
            }),
        ),
    ] {
        if let Some(r) = call(&sandbox, a).await {
            let e = by_tool.entry(tool).or_default();
            e.0.push(tokens(&ploke_proto::tool_text::result(&r)));
            e.1.push(tokens(&registry.model_json(&r).unwrap()));
        }
    }
    println!(
        "tool_tokens: {} ({} queries), o200k_base tokens per result",
        workspace.display(),
        queries.len()
    );
    println!("  tool                   calls  text p50  json p50  json/text (sum)");
    for (tool, (text, json)) in by_tool {
        let ratio = json.iter().sum::<usize>() as f64 / text.iter().sum::<usize>().max(1) as f64;
        println!(
            "  {tool:<22} {:>5}  {:>8}  {:>8}  {ratio:.2}",
            text.len(),
            median(text.clone()),
            median(json.clone())
        );
    }
    sandbox.stop().await.unwrap();
}
