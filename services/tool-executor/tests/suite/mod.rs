//! Shared harness: a workspace on disk, rag-search (BM25 only) and tool-executor in process on
//! 127.0.0.1:0, and real gRPC clients.

mod binary;
mod edits;
mod failures;
mod files;
mod limits;
mod metrics;
mod retrieval;
mod security;
mod storage;

use std::path::{Path, PathBuf};

use ploke_proto::common::v1::Correlation;
use ploke_proto::rag::v1::IndexWorkspaceRequest;
use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_proto::tools::v1::*;
use ploke_runtime::config::PlokeConfig;
use ploke_runtime::shutdown::Shutdown;
use ploke_tool_executor::edits::FaultHook;
use tonic::transport::Channel;

/// How to start the harness.
#[derive(Default)]
pub(crate) struct Options {
    pub auto_approve: bool,
    pub fault: Option<FaultHook>,
    pub approval_timeout_secs: Option<u64>,
    pub read_max_bytes: Option<usize>,
    pub max_file_bytes: Option<u64>,
}

pub(crate) struct Harness {
    _workspace: tempfile::TempDir,
    pub root: PathBuf,
    _data: tempfile::TempDir,
    pub tools: ToolExecutorClient<Channel>,
    pub rag: RagSearchClient<Channel>,
    options_config: PlokeConfig,
    tool_shutdown: Shutdown,
    tool_task: tokio::task::JoinHandle<Result<(), ploke_tool_executor::StartError>>,
    rag_shutdown: Shutdown,
    fault: Option<FaultHook>,
}

pub(crate) const LIB_RS: &str = "\
//! A small crate.

/// Settings.
pub struct Config {
    pub name: String,
}

impl Config {
    /// Loads the settings.
    pub fn load(name: &str) -> Config {
        Config { name: name.to_owned() }
    }

    pub fn shout(&self) -> String {
        self.name.to_uppercase()
    }
}

impl std::fmt::Display for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, \"{}\", self.name)
    }
}

pub fn helper() -> u32 {
    41
}
";

pub(crate) const NET_RS: &str = "\
pub fn connect_socket(addr: &str) -> bool {
    !addr.is_empty()
}
";

/// A workspace with a small crate, a README, a hidden file and an ignored directory.
pub(crate) fn write_workspace(root: &Path) {
    let files = [
        (
            "Cargo.toml",
            "[package]\nname = \"demo\"\nversion = \"0.1.0\"\n",
        ),
        ("src/lib.rs", LIB_RS),
        ("src/net.rs", NET_RS),
        ("README.md", "# demo\n\nConnects sockets.\n"),
        (".hidden", "secret\n"),
        (".gitignore", "target/\n"),
        ("target/debug/out.rs", "pub fn connect_socket() {}\n"),
    ];
    for (path, text) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

impl Harness {
    pub(crate) async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    /// A harness whose proposals are applied at once (`auto_approve`).
    pub(crate) async fn auto_approving() -> Self {
        Self::start_with(Options {
            auto_approve: true,
            ..Options::default()
        })
        .await
    }

    pub(crate) async fn start_with(options: Options) -> Self {
        let workspace = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(workspace.path()).unwrap();
        write_workspace(&root);
        let data = tempfile::tempdir().unwrap();
        let mut config = PlokeConfig {
            workspaces: vec![root.clone()],
            data_dir: data.path().join("rag"),
            ..PlokeConfig::default()
        };
        config.tool_executor.auto_approve = options.auto_approve;
        if let Some(s) = options.approval_timeout_secs {
            config.tool_executor.approval_timeout_secs = s;
        }
        if let Some(n) = options.read_max_bytes {
            config.tool_executor.read_max_bytes = n;
        }
        if let Some(n) = options.max_file_bytes {
            config.tool_executor.max_file_bytes = n;
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let rag_url = format!("http://{}", listener.local_addr().unwrap());
        let rag_shutdown = Shutdown::new();
        tokio::spawn(ploke_rag_search::serve(
            ploke_rag_search::Config::from(&config),
            listener,
            rag_shutdown.wait(),
        ));
        let mut rag = RagSearchClient::connect(rag_url.clone()).await.unwrap();
        let mut progress = rag
            .index_workspace(IndexWorkspaceRequest {
                workspace_root: String::new(),
                force: false,
            })
            .await
            .unwrap()
            .into_inner();
        while progress.message().await.unwrap().is_some() {}
        config.upstreams.rag_search_url = rag_url.clone();
        config.data_dir = data.path().join("tools");
        let (tool_shutdown, tool_task, tools) = start_tools(&config, options.fault.clone()).await;
        Self {
            _workspace: workspace,
            root,
            _data: data,
            tools,
            rag,
            options_config: config,
            tool_shutdown,
            tool_task,
            rag_shutdown,
            fault: options.fault,
        }
    }

    /// Stops tool-executor and starts it again on the same data directory.
    pub(crate) async fn restart_tools(&mut self) {
        self.tool_shutdown.trigger();
        (&mut self.tool_task).await.unwrap().unwrap();
        let (shutdown, task, client) = start_tools(&self.options_config, self.fault.clone()).await;
        self.tool_shutdown = shutdown;
        self.tool_task = task;
        self.tools = client;
    }

    /// Where tool-executor keeps its undo records.
    pub(crate) fn undo_dir(&self) -> PathBuf {
        self.options_config.data_dir.join("undo")
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub(crate) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    /// Runs one call and collects every event of its stream.
    pub(crate) async fn events(
        &self,
        call_id: &str,
        args: tool_call::Args,
    ) -> Vec<execute_tool_event::Event> {
        self.events_with(request("req-1", call_id, args)).await
    }

    pub(crate) async fn events_with(
        &self,
        request: ExecuteToolRequest,
    ) -> Vec<execute_tool_event::Event> {
        let mut stream = self
            .tools
            .clone()
            .execute_tool(request)
            .await
            .unwrap()
            .into_inner();
        let mut out = Vec::new();
        while let Some(e) = stream.message().await.unwrap() {
            out.push(e.event.unwrap());
        }
        out
    }

    /// The result of a call that must succeed.
    pub(crate) async fn ok(&self, args: tool_call::Args) -> tool_result::Result {
        let events = self.events("call-1", args).await;
        match events.last() {
            Some(execute_tool_event::Event::Result(r)) => r.result.clone().unwrap(),
            other => panic!("expected a result, got {other:?}"),
        }
    }

    /// The error of a call that must fail.
    pub(crate) async fn err(&self, args: tool_call::Args) -> ToolError {
        let events = self.events("call-1", args).await;
        match events.last() {
            Some(execute_tool_event::Event::Error(e)) => e.clone(),
            other => panic!("expected an error, got {other:?}"),
        }
    }

    /// Starts an edit call and returns its stream after the proposal arrived.
    pub(crate) async fn propose(
        &self,
        request_id: &str,
        call_id: &str,
        args: tool_call::Args,
    ) -> (EditProposal, tonic::Streaming<ExecuteToolEvent>) {
        let mut stream = self
            .tools
            .clone()
            .execute_tool(request(request_id, call_id, args))
            .await
            .unwrap()
            .into_inner();
        loop {
            match stream.message().await.unwrap().and_then(|e| e.event) {
                Some(execute_tool_event::Event::EditProposed(p)) => return (p, stream),
                Some(execute_tool_event::Event::Progress(_)) => continue,
                other => panic!("expected edit_proposed, got {other:?}"),
            }
        }
    }

    pub(crate) async fn decide(
        &self,
        id: &str,
        decision: Decision,
        indices: &[u32],
    ) -> EditProposal {
        self.tools
            .clone()
            .decide_edit(DecideEditRequest {
                proposal_id: id.into(),
                decision: decision as i32,
                edit_indices: indices.to_vec(),
                reason: String::new(),
            })
            .await
            .unwrap()
            .into_inner()
            .proposal
            .unwrap()
    }

    pub(crate) async fn stop(self) {
        self.tool_shutdown.trigger();
        self.tool_task.await.unwrap().unwrap();
        self.rag_shutdown.trigger();
    }
}

/// The end of an edit call's stream: its last event.
pub(crate) async fn finish(
    mut stream: tonic::Streaming<ExecuteToolEvent>,
) -> execute_tool_event::Event {
    let mut last = None;
    while let Some(e) = stream.message().await.unwrap() {
        last = e.event;
    }
    last.unwrap()
}

async fn start_tools(
    config: &PlokeConfig,
    fault: Option<FaultHook>,
) -> (
    Shutdown,
    tokio::task::JoinHandle<Result<(), ploke_tool_executor::StartError>>,
    ToolExecutorClient<Channel>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = Shutdown::new();
    let mut tool_config = ploke_tool_executor::Config::from(config);
    tool_config.fault = fault;
    let task = tokio::spawn(ploke_tool_executor::serve(
        tool_config,
        listener,
        shutdown.wait(),
    ));
    let client = ToolExecutorClient::connect(url).await.unwrap();
    (shutdown, task, client)
}

pub(crate) fn request(
    request_id: &str,
    call_id: &str,
    args: tool_call::Args,
) -> ExecuteToolRequest {
    ExecuteToolRequest {
        correlation: Some(Correlation {
            session_id: "session-1".into(),
            request_id: request_id.into(),
            parent_id: "parent-1".into(),
            call_id: call_id.into(),
        }),
        workspace_root: String::new(),
        call: Some(ToolCall { args: Some(args) }),
        user_message: "how does Config load settings?".into(),
        timeout_ms: 0,
    }
}

pub(crate) fn search_replace(file: &str, search: &str, replace: &str) -> CodeEdit {
    CodeEdit {
        edit: Some(code_edit::Edit::SearchReplace(SearchReplaceEdit {
            file_path: file.into(),
            search: search.into(),
            replace: replace.into(),
        })),
    }
}

pub(crate) fn replace_item(canon: &str, code: &str) -> CodeEdit {
    CodeEdit {
        edit: Some(code_edit::Edit::ReplaceItem(ReplaceItemEdit {
            canon_path: canon.into(),
            new_code: code.into(),
            file_path: None,
        })),
    }
}

pub(crate) fn edit_call(edits: Vec<CodeEdit>) -> tool_call::Args {
    tool_call::Args::ApplyCodeEdit(ApplyCodeEditArgs { edits })
}

pub(crate) fn code(e: &ToolError) -> ToolErrorCode {
    e.code()
}
