//! The gRPC adapter: field-level INVALID_ARGUMENT, workspace resolution errors, and the
//! capability each unfinished RPC still lacks.

use ploke_proto::rag::v1::rag_search_client::RagSearchClient;
use ploke_proto::rag::v1::*;
use ploke_proto::status::field_violations;
use ploke_runtime::config::PlokeConfig;
use ploke_runtime::shutdown::Shutdown;
use tonic::Code;
use tonic::transport::Channel;

struct Server {
    client: RagSearchClient<Channel>,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<Result<(), ploke_rag_search::StartError>>,
    workspace: tempfile::TempDir,
    addr: std::net::SocketAddr,
}

async fn start() -> Server {
    start_indexing(true).await
}

async fn start_indexing(index_on_start: bool) -> Server {
    start_with(|c| c.rag_search.index_on_start = index_on_start).await
}

async fn start_with(adjust: impl FnOnce(&mut PlokeConfig)) -> Server {
    let workspace = tempfile::tempdir().unwrap();
    let mut config = PlokeConfig {
        workspaces: vec![workspace.path().to_owned()],
        data_dir: workspace.path().join(".ploke"),
        ..PlokeConfig::default()
    };
    adjust(&mut config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("http://{addr}");
    let shutdown = Shutdown::new();
    let task = tokio::spawn(ploke_rag_search::serve(
        ploke_rag_search::Config::from(&config),
        listener,
        shutdown.wait(),
    ));
    let client = RagSearchClient::connect(url).await.unwrap();
    Server {
        client,
        shutdown,
        task,
        workspace,
        addr,
    }
}

/// A server with the real model and no watcher (only RPCs and the recovery index).
async fn start_unwatched_with_model() -> Server {
    let model = super::overlay::model_dir();
    start_with(|c| {
        c.rag_search.watch = false;
        c.rag_search.embed_model = Some(model);
    })
    .await
}

impl Server {
    /// IndexStatus of the default workspace.
    async fn status(&mut self) -> IndexStatusResponse {
        self.client
            .index_status(IndexStatusRequest::default())
            .await
            .unwrap()
            .into_inner()
    }

    /// RefreshFiles of one file, expected to fail: its status.
    async fn refresh_failing(&mut self, path: &str) -> tonic::Status {
        self.client
            .refresh_files(RefreshFilesRequest {
                workspace_root: String::new(),
                paths: vec![path.into()],
            })
            .await
            .unwrap_err()
    }

    /// Indexes the workspace and waits for the run to end.
    async fn index(&mut self) {
        let mut progress = self
            .client
            .index_workspace(IndexWorkspaceRequest::default())
            .await
            .unwrap()
            .into_inner();
        while progress.message().await.unwrap().is_some() {}
    }

    /// The canonical paths a search for `query` finds (at most 5).
    async fn found(&mut self, query: &str) -> Vec<String> {
        self.client
            .search(search(query, 5))
            .await
            .unwrap()
            .into_inner()
            .hits
            .into_iter()
            .filter_map(|h| h.part.map(|p| p.canon_path))
            .collect()
    }

    /// The faults the service lists now (`ploke.runtime.v1.Faults`).
    async fn faults(&self) -> Vec<ploke_proto::runtime::v1::Fault> {
        let channel = Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        ploke_proto::runtime::v1::faults_client::FaultsClient::new(channel)
            .list_faults(ploke_proto::runtime::v1::ListFaultsRequest {})
            .await
            .unwrap()
            .into_inner()
            .faults
    }

    /// Asserts that the service is SERVING, degraded by the one fault `index_storage` (its
    /// index cannot be written), whose reason names the failed write.
    async fn assert_degraded_by_index_storage(&self) {
        use tonic_health::pb::health_check_response::ServingStatus;
        assert_eq!(self.health().await, ServingStatus::Serving);
        let faults = self.faults().await;
        let [fault] = faults.as_slice() else {
            panic!("one fault: {faults:?}");
        };
        assert_eq!(
            (fault.name.as_str(), fault.degraded),
            ("index_storage", true),
            "{fault:?}"
        );
        assert!(
            fault
                .reason
                .starts_with("the index cannot be written (index storage unavailable")
                && fault
                    .reason
                    .ends_with("; searches answer from the last committed index"),
            "{fault:?}"
        );
    }

    /// The service's health now.
    async fn health(&self) -> tonic_health::pb::health_check_response::ServingStatus {
        let channel = Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        tonic_health::pb::health_client::HealthClient::new(channel)
            .check(tonic_health::pb::HealthCheckRequest {
                service: "ploke.rag.v1.RagSearch".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status()
    }

    async fn stop(self) {
        self.shutdown.trigger();
        self.task.await.unwrap().unwrap();
    }
}

fn search(query: &str, top_k: u32) -> SearchRequest {
    SearchRequest {
        query: query.into(),
        top_k,
        ..Default::default()
    }
}

#[tokio::test]
async fn bad_search_arguments_name_the_field() {
    let mut s = start().await;
    let cases = [
        (search("", 10), "query", "must not be empty"),
        (search("   ", 10), "query", "must not be empty"),
        (
            search("\"?!\"", 10),
            "query",
            "holds no word to search for (no letter or digit)",
        ),
        (
            search("x", 1001),
            "top_k",
            "must be between 1 and 1000 (0 = 10), got 1001",
        ),
        (
            SearchRequest {
                query: "x".into(),
                strategy: 42,
                ..Default::default()
            },
            "strategy",
            "unknown value 42; use STRATEGY_BM25, STRATEGY_DENSE or STRATEGY_HYBRID",
        ),
        (
            SearchRequest {
                query: "x".into(),
                filters: Some(SearchFilters {
                    languages: vec!["Python".into(), "pyhton".into()],
                    ..Default::default()
                }),
                ..Default::default()
            },
            "filters.languages[1]",
            "unknown language `pyhton`; known: c, cpp, css, go, gomod, html, java, javascript, json, markdown, protobuf, python, rust, shell, sql, text, toml, typescript, yaml",
        ),
    ];
    for (request, field, reason) in cases {
        let status = s.client.search(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(status.message(), format!("{field}: {reason}"));
        assert_eq!(
            field_violations(&status),
            vec![(field.to_owned(), reason.to_owned())]
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn workspace_errors_are_not_found_or_invalid() {
    let mut s = start().await;
    let status = s
        .client
        .index_status(IndexStatusRequest {
            workspace_root: "/definitely/not/served".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::NotFound, "workspace /definitely/not/served not found")
    );
    let status = s
        .client
        .index_status(IndexStatusRequest {
            workspace_root: "relative/path".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(field_violations(&status)[0].0, "workspace_root".to_owned());
    s.stop().await;
}

#[tokio::test]
async fn other_bad_arguments() {
    let mut s = start().await;
    let status = s
        .client
        .lookup_item(LookupItemRequest::default())
        .await
        .unwrap_err();
    assert_eq!(
        status.message(),
        "target: set canon_path, name or file_path"
    );
    let status = s
        .client
        .get_snippets(GetSnippetsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.message(), "spans: must not be empty");
    let status = s
        .client
        .refresh_files(RefreshFilesRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.message(), "paths: must not be empty");
    s.stop().await;
}

#[tokio::test]
async fn an_unindexed_workspace_says_so() {
    // Only when indexing at start is turned off can a configured workspace be unindexed.
    let mut s = start_indexing(false).await;
    let root = s.workspace.path().to_string_lossy().into_owned();
    let status = s
        .client
        .index_status(IndexStatusRequest {
            workspace_root: root,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.state, IndexState::NotIndexed as i32);
    assert!(!status.dense_available);
    assert_eq!(
        status.dense_unavailable_reason,
        "no embedding model is configured (--embed-model DIR, or an [embedding] endpoint)"
    );
    let err = s
        .client
        .search(search("config loading", 0))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message()
            .ends_with("is not indexed yet; call IndexWorkspace first"),
        "{}",
        err.message()
    );
    s.stop().await;
}

#[tokio::test]
async fn an_unreachable_embedding_endpoint_or_two_embedders_stop_the_start() {
    // A port nothing listens on (discard): a port bound and dropped could be another test's.
    let port = 9;
    let mut config = PlokeConfig::default();
    config.embedding = Some(ploke_runtime::config::EmbeddingConfig {
        tries: 1,
        ..ploke_runtime::config::EmbeddingConfig::new(
            format!("http://127.0.0.1:{port}/v1"),
            "text-embedding-3-small",
        )
    });
    let start = |config: &PlokeConfig| {
        let config = ploke_rag_search::Config::from(config);
        async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            ploke_rag_search::serve(config, listener, std::future::pending())
                .await
                .unwrap_err()
                .to_string()
        }
    };
    let err = start(&config).await;
    assert!(
        err.starts_with(&format!(
            "embedding endpoint unavailable: http://127.0.0.1:{port}/v1/embeddings after 1 tries: could not connect"
        )),
        "{err}"
    );
    config.rag_search.embed_model = Some("/models/minilm".into());
    assert_eq!(
        start(&config).await,
        "both a local model (--embed-model) and an [embedding] endpoint are configured; keep one"
    );
}

#[tokio::test]
async fn a_configured_workspace_that_is_not_there_stops_the_start_naming_it() {
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("file.rs");
    std::fs::write(&file, "fn x() {}\n").unwrap();
    let mut config = PlokeConfig {
        data_dir: data.path().join("data"),
        ..PlokeConfig::default()
    };
    // Roots written with a comma instead of `:` are one root that does not exist.
    let typo = data.path().join("api,web");
    for (root, reason) in [
        (typo.clone(), "No such file or directory (os error 2)"),
        (file.clone(), "is not a directory"),
    ] {
        config.workspaces = vec![data.path().to_path_buf(), root.clone()];
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = ploke_rag_search::serve((&config).into(), listener, std::future::pending())
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "workspace {}: {reason} (configured by --workspace, by PLOKE_WORKSPACES with `:` between roots, or by `workspaces` in ploke.toml)",
                root.display()
            )
        );
    }
}

/// rag-search's answer to a write its index storage could not take.
fn assert_storage_unavailable(e: &tonic::Status) {
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    assert!(
        e.message().starts_with("index storage unavailable"),
        "{e:?}"
    );
}

#[tokio::test]
async fn an_index_that_cannot_be_written_is_unavailable_and_degraded_but_still_searched() {
    let mut s = start().await;
    std::fs::write(
        s.workspace.path().join("lib.rs"),
        "pub fn load_settings() {}\n",
    )
    .unwrap();
    s.index().await;
    use tonic_health::pb::health_check_response::ServingStatus;
    assert_eq!(s.health().await, ServingStatus::Serving);
    // The index directory vanishes under the running service.
    std::fs::remove_dir_all(s.workspace.path().join(".ploke")).unwrap();
    let e = s.refresh_failing("lib.rs").await;
    assert_storage_unavailable(&e);
    // Still SERVING (a replica's full disk is no outage of search), degraded with the reason.
    s.assert_degraded_by_index_storage().await;
    // Searches still answer from the last committed index.
    let hits = s
        .client
        .search(search("load_settings", 5))
        .await
        .unwrap()
        .into_inner()
        .hits;
    assert_eq!(
        hits[0].part.as_ref().unwrap().canon_path,
        "crate::load_settings"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_workspace_added_where_no_index_can_be_written_is_unavailable() {
    let mut s = start().await;
    s.index().await;
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("a.rs"), "pub fn a() {}\n").unwrap();
    // The data dir is no directory at all (as a full disk, the new index cannot be written).
    let data = s.workspace.path().join(".ploke");
    std::fs::rename(&data, s.workspace.path().join(".ploke-away")).unwrap();
    std::fs::write(&data, "").unwrap();
    let e = s
        .client
        .add_workspace(AddWorkspaceRequest {
            source: Some(add_workspace_request::Source::Path(
                other.path().display().to_string(),
            )),
        })
        .await
        .unwrap_err();
    assert_storage_unavailable(&e);
    s.assert_degraded_by_index_storage().await;
    s.stop().await;
}

/// A server without a watcher (nothing but a recovery may index the file a failed refresh
/// missed) over an indexed `lib.rs`; then `break_storage(data dir)` and a refresh of a new
/// `later.rs`, which fails: the server, the workspace root and the refresh's status.
async fn refresh_failing_once(
    break_storage: impl FnOnce(&std::path::Path),
) -> (Server, std::path::PathBuf, tonic::Status) {
    let mut s = start_with(|c| c.rag_search.watch = false).await;
    let root = s.workspace.path().to_owned();
    std::fs::write(root.join("lib.rs"), "pub fn load_settings() {}\n").unwrap();
    s.index().await;
    break_storage(&root.join(".ploke"));
    std::fs::write(root.join("later.rs"), "pub fn recovered_later() {}\n").unwrap();
    let e = s.refresh_failing("later.rs").await;
    (s, root, e)
}

/// Index storage that fails and then works again (a full disk freed, a data dir put back) is
/// recovered without anyone calling an RPC or touching a file: health is SERVING again and the
/// file whose refresh failed meanwhile is indexed.
#[tokio::test]
async fn an_index_whose_storage_works_again_recovers_by_itself_with_what_it_missed() {
    // The data dir goes away; a refresh of a new file fails.
    let (mut s, root, e) = refresh_failing_once(|data| {
        std::fs::rename(data, data.with_file_name(".ploke-away")).unwrap()
    })
    .await;
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    s.assert_degraded_by_index_storage().await;
    // It comes back: nothing else is done here.
    std::fs::rename(root.join(".ploke-away"), root.join(".ploke")).unwrap();
    serving_and_found(&mut s, "recovered_later", "later.rs").await;
    let status_now = s.status().await;
    assert_eq!(status_now.state(), IndexState::Ready, "{status_now:?}");
    s.stop().await;
}

/// Index files removed under the running service (`.ploke` deleted to start over) are made
/// again by the service itself: a new index, built whole, with the file whose refresh failed.
#[tokio::test]
async fn an_index_whose_files_are_removed_is_built_again_by_itself() {
    let (mut s, root, e) =
        refresh_failing_once(|data| std::fs::remove_dir_all(data).unwrap()).await;
    assert_storage_unavailable(&e);
    s.assert_degraded_by_index_storage().await;
    serving_and_found(&mut s, "recovered_later", "later.rs").await;
    serving_and_found(&mut s, "load_settings", "lib.rs").await;
    assert!(root.join(".ploke").is_dir());
    let status = s.status().await;
    assert_eq!(
        (status.state(), status.files, status.items),
        (IndexState::Ready, 2, 2),
        "{status:?}"
    );
    s.stop().await;
}

/// After a storage fault, the run that recovers clears it once its keywords are committed: the
/// fault is gone while that run still embeds (it used to stay raised for the whole run,
/// minutes on a large workspace, though searches answered).
#[tokio::test]
async fn a_recovering_run_serves_again_once_it_has_committed_while_it_still_embeds() {
    use ploke_proto::rag::v1::IndexPhase;
    use tonic_health::pb::health_check_response::ServingStatus;
    let mut s = start_unwatched_with_model().await;
    let root = s.workspace.path().to_owned();
    std::fs::write(root.join("lib.rs"), "pub fn load_settings() {}\n").unwrap();
    s.index().await;
    std::fs::rename(root.join(".ploke"), root.join(".ploke-away")).unwrap();
    let many: String = (0..400)
        .map(|i| format!("/// Stage {i} of the pipeline.\npub fn stage_{i}() -> u32 {{ {i} }}\n\n"))
        .collect();
    std::fs::write(root.join("stages.rs"), many).unwrap();
    let e = s.refresh_failing("stages.rs").await;
    assert_storage_unavailable(&e);
    s.assert_degraded_by_index_storage().await;
    std::fs::rename(root.join(".ploke-away"), root.join(".ploke")).unwrap();
    // The recovery's run parses, commits, then embeds 400 items: the fault is cleared while
    // IndexStatus still says it embeds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let serving = s.health().await == ServingStatus::Serving && s.faults().await.is_empty();
        let status = s.status().await;
        let embedding = status.state() == IndexState::Indexing
            && status
                .progress
                .as_ref()
                .is_some_and(|p| p.phase() == IndexPhase::Embedding);
        if serving && embedding {
            break;
        }
        assert!(
            status.state() != IndexState::Ready || !serving,
            "serving only once the run ended: {status:?}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "never serving while embedding: {status:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    s.stop().await;
}

/// A workspace directory replaced under the running service (the repository deleted and
/// cloned again) is watched and indexed again: its new files are found and later edits seen.
#[tokio::test]
async fn a_workspace_directory_replaced_under_the_service_is_watched_and_indexed_again() {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_owned();
    let mut s = start_with(move |c| c.data_dir = data_dir).await;
    let root = s.workspace.path().to_owned();
    std::fs::write(root.join("lib.rs"), "pub fn old_version() {}\n").unwrap();
    s.index().await;
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("lib.rs"), "pub fn fresh_version() {}\n").unwrap();
    serving_and_found(&mut s, "fresh_version", "lib.rs").await;
    // The new directory is watched: an edit after it is found too.
    std::fs::write(root.join("more.rs"), "pub fn edited_after() {}\n").unwrap();
    serving_and_found(&mut s, "edited_after", "more.rs").await;
    let old = s.found("old_version").await;
    assert!(!old.contains(&"crate::old_version".to_owned()), "{old:?}");
    s.stop().await;
}

/// A workspace root that is a symbolic link is served through the link: pointed at another
/// tree (git-sync swaps its link to each new worktree and deletes the old one), the service
/// follows it under the same root, indexes the new tree and watches it.
#[tokio::test]
async fn a_workspace_root_link_pointed_at_another_tree_is_followed() {
    let trees = tempfile::tempdir().unwrap();
    let trees_dir = std::fs::canonicalize(trees.path()).unwrap();
    let (first, second) = (trees_dir.join("worktree-1"), trees_dir.join("worktree-2"));
    std::fs::create_dir(&first).unwrap();
    std::fs::write(first.join("lib.rs"), "pub fn old_version() {}\n").unwrap();
    let link = trees_dir.join("repo");
    std::os::unix::fs::symlink(&first, &link).unwrap();
    let (mut s, _data) = start_serving(&link).await;
    s.index().await;
    serving_and_found(&mut s, "old_version", "lib.rs").await;
    // The root is the link, not where it points.
    assert_eq!(s.status().await.workspace_root, link.display().to_string());
    // git-sync's swap: a new link renamed over the old one, then the old tree deleted.
    std::fs::create_dir(&second).unwrap();
    std::fs::write(second.join("lib.rs"), "pub fn fresh_version() {}\n").unwrap();
    repoint(&link, &second);
    std::fs::remove_dir_all(&first).unwrap();
    serving_and_found(&mut s, "fresh_version", "lib.rs").await;
    // The new tree is watched: an edit in it is found too.
    std::fs::write(second.join("more.rs"), "pub fn edited_after() {}\n").unwrap();
    serving_and_found(&mut s, "edited_after", "more.rs").await;
    let old = s.found("old_version").await;
    assert!(!old.contains(&"crate::old_version".to_owned()), "{old:?}");
    let status = s.status().await;
    assert_eq!(
        (status.workspace_root, status.files),
        (link.display().to_string(), 2)
    );
    s.stop().await;
}

/// A root below a link (a monorepo's service in a deploy's `current` release) follows the link
/// too; the tree the link points at is the same workspace, asked by either name, and adding it
/// again under another name is refused, naming the root it is served as.
#[tokio::test]
async fn a_workspace_root_below_a_link_is_followed_and_not_added_twice() {
    let trees = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(trees.path()).unwrap();
    let (first, second) = (top.join("release-1"), top.join("release-2"));
    for (tree, name) in [(&first, "old_version"), (&second, "fresh_version")] {
        std::fs::create_dir_all(tree.join("services/api")).unwrap();
        let code = format!("pub fn {name}() {{}}\n");
        std::fs::write(tree.join("services/api/lib.rs"), code).unwrap();
    }
    std::os::unix::fs::symlink(&first, top.join("current")).unwrap();
    let root = top.join("current/services/api");
    let (mut s, _data) = start_serving(&root).await;
    s.index().await;
    serving_and_found(&mut s, "old_version", "lib.rs").await;
    let add = |path: &std::path::Path| AddWorkspaceRequest {
        source: Some(add_workspace_request::Source::Path(
            path.display().to_string(),
        )),
    };
    let target = first.join("services/api");
    let e = s.client.add_workspace(add(&target)).await.unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (
            Code::AlreadyExists,
            format!(
                "workspace {} is served already as {} (the same directory)",
                target.display(),
                root.display()
            )
            .as_str()
        )
    );
    // Asked by where the link points, the served root answers.
    let by_target = s
        .client
        .index_status(IndexStatusRequest {
            workspace_root: target.display().to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(by_target.workspace_root, root.display().to_string());
    // The deploy moves `current` to the next release and deletes the first.
    repoint(&top.join("current"), &second);
    std::fs::remove_dir_all(&first).unwrap();
    serving_and_found(&mut s, "fresh_version", "lib.rs").await;
    let old = s.found("old_version").await;
    assert!(!old.contains(&"crate::old_version".to_owned()), "{old:?}");
    // The new release is watched: an edit in it is found.
    let edited = second.join("services/api/more.rs");
    std::fs::write(&edited, "pub fn edited_after() {}\n").unwrap();
    serving_and_found(&mut s, "edited_after", "more.rs").await;
    let e = s
        .client
        .add_workspace(add(&second.join("services/api")))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::AlreadyExists, "{e:?}");
    assert_eq!(s.status().await.workspace_root, root.display().to_string());
    s.stop().await;
}

/// A server for the one workspace `root` with its data in a directory of its own (kept while
/// the returned guard lives).
async fn start_serving(root: &std::path::Path) -> (Server, tempfile::TempDir) {
    let data = tempfile::tempdir().unwrap();
    let (root, data_dir) = (root.to_owned(), data.path().to_owned());
    let s = start_with(move |c| {
        c.workspaces = vec![root];
        c.data_dir = data_dir;
    })
    .await;
    (s, data)
}

/// Points the symbolic link `link` at `target` as git-sync and deploys do: a new link renamed
/// over the old one, so that the link is never missing.
fn repoint(link: &std::path::Path, target: &std::path::Path) {
    let swap = link.with_extension("new");
    std::os::unix::fs::symlink(target, &swap).unwrap();
    std::fs::rename(&swap, link).unwrap();
}

/// Waits (up to two minutes) until the service reports SERVING without a fault and a search
/// for `query` finds the item of that name in `file` first (the name, not the file alone: a
/// file that kept its name over a swap of trees holds other items).
async fn serving_and_found(s: &mut Server, query: &str, file: &str) {
    use tonic_health::pb::health_check_response::ServingStatus;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let serving = s.health().await == ServingStatus::Serving && s.faults().await.is_empty();
        let hits = s
            .client
            .search(search(query, 5))
            .await
            .unwrap()
            .into_inner()
            .hits;
        let first = hits
            .first()
            .and_then(|h| h.part.as_ref())
            .map(|p| (p.file_path.as_str(), p.canon_path.as_str()));
        let found = first
            .is_some_and(|(path, canon)| path == file && canon.rsplit("::").next() == Some(query));
        if serving && found {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not recovered (serving {serving}, first hit for {query}: {first:?})"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A refresh of a file with many items answers once they are searchable by keywords; their
/// vectors come in the background, and DENSE search finds them then.
#[tokio::test]
async fn a_refresh_of_many_items_answers_before_they_are_embedded_and_they_are_embedded_later() {
    let mut s = start_unwatched_with_model().await;
    let root = s.workspace.path().to_owned();
    std::fs::write(root.join("lib.rs"), "pub fn load_settings() {}\n").unwrap();
    s.index().await;
    let many: String = (0..60)
        .map(|i| format!("/// Stage {i} of the pipeline.\npub fn stage_{i}() -> u32 {{ {i} }}\n\n"))
        .collect();
    std::fs::write(root.join("stages.rs"), many).unwrap();
    let refreshed = s
        .client
        .refresh_files(RefreshFilesRequest {
            workspace_root: String::new(),
            paths: vec!["stages.rs".into()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (refreshed.items_added, refreshed.items_embedded),
        (60, 0),
        "{refreshed:?}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let status = s.status().await;
        // 61 items: while a run holds the index, IndexStatus counts none (0 of 0 is not done).
        if (status.items, status.embedded_items) == (61, 61) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never embedded: {status:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let dense = SearchRequest {
        strategy: Strategy::Dense as i32,
        ..search("stage 41 of the pipeline", 60)
    };
    let hits = s.client.search(dense).await.unwrap().into_inner().hits;
    assert!(
        hits.iter()
            .any(|h| h.part.as_ref().is_some_and(|p| p.file_path == "stages.rs")),
        "{hits:?}"
    );
    s.stop().await;
}

/// Two forced IndexWorkspace calls at once (one may join the other's run, then run its own):
/// each summary counts every file once, and reuses each vector at most once.
#[tokio::test]
async fn two_forced_runs_at_once_each_count_every_file_once() {
    let s = start_with(|c| c.rag_search.watch = false).await;
    let root = s.workspace.path().to_owned();
    for i in 0..12 {
        std::fs::write(
            root.join(format!("m{i}.rs")),
            format!("pub fn item_{i}() {{}}\n"),
        )
        .unwrap();
    }
    let forced = || {
        let mut client = s.client.clone();
        async move {
            let mut stream = client
                .index_workspace(IndexWorkspaceRequest {
                    force: true,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner();
            let mut last = None;
            while let Some(p) = stream.message().await.unwrap() {
                last = p.summary.or(last);
            }
            last.unwrap()
        }
    };
    let (a, b) = tokio::join!(forced(), forced());
    for summary in [a, b] {
        assert_eq!(
            (summary.files_indexed, summary.items_total),
            (12, 12),
            "{summary:?}"
        );
    }
    s.stop().await;
}
