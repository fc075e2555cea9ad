//! `ploke search` and `ploke index`.

use ploke_proto::rag::v1::{SearchFilters, SearchRequest, Strategy};

use super::{Conn, Target, up};

/// Search strategies on the command line.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum StrategyArg {
    /// Keywords (tantivy BM25).
    Bm25,
    /// Embeddings.
    Dense,
    /// Both, fused with RRF.
    Hybrid,
}

/// `ploke search`.
pub(crate) async fn search(
    target: &Target,
    query: &str,
    (strategy, top_k): (StrategyArg, u32),
    filters: SearchFilters,
) -> anyhow::Result<()> {
    // Before any service is started or reached for it.
    if query.trim().is_empty() {
        anyhow::bail!("the query is empty: ploke search \"retry backoff\"");
    }
    let mut conn = Conn::open(target).await?;
    let strategy = match strategy {
        StrategyArg::Bm25 => Strategy::Bm25,
        StrategyArg::Dense => Strategy::Dense,
        StrategyArg::Hybrid => Strategy::Hybrid,
    };
    let workspace_root = conn.workspace_root().await?;
    let found = conn
        .gateway
        .search(SearchRequest {
            workspace_root,
            query: query.to_owned(),
            strategy: strategy as i32,
            top_k,
            filters: Some(filters),
            ..Default::default()
        })
        .await
        .map_err(|s| anyhow::anyhow!("search: {}", s.message()))?
        .into_inner();
    // The note on dense retrieval goes to stderr: stdout holds the hits alone.
    let dense_asked = !matches!(strategy, Strategy::Bm25);
    if let Some(note) = crate::describe::search_note(&found, dense_asked) {
        eprintln!("{note}");
    }
    for line in crate::describe::search_hits(&found) {
        println!("{line}");
    }
    conn.close().await
}

/// `ploke index`.
pub(crate) async fn index(target: &Target, force: bool) -> anyhow::Result<()> {
    let mut conn = Conn::open_indexing(target, Some(up::Until::Done)).await?;
    // In-process services have just indexed; a remote or running one is asked to.
    if !conn.indexed || force {
        let root = conn.workspace_root().await?;
        up::index(&mut conn.gateway, &root, (force, up::Until::Done), false).await?;
    }
    conn.close().await
}
