//! `ploke search` and `ploke index`.

use ploke_proto::common::v1::ItemKind;
use ploke_proto::rag::v1::{SearchFilters, SearchRequest, Strategy};

use super::{Conn, Target, up};

/// Search strategies on the command line.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum StrategyArg {
    /// Keywords (tantivy BM25).
    Bm25,
    /// Embeddings.
    Dense,
    /// Both, fused with RRF.
    Hybrid,
}

/// `ploke search`.
pub async fn search(
    target: &Target,
    query: &str,
    (strategy, top_k): (StrategyArg, u32),
    filters: SearchFilters,
) -> anyhow::Result<()> {
    let mut conn = Conn::open(target).await?;
    let strategy = match strategy {
        StrategyArg::Bm25 => Strategy::Bm25,
        StrategyArg::Dense => Strategy::Dense,
        StrategyArg::Hybrid => Strategy::Hybrid,
    };
    let found = conn
        .gateway
        .search(SearchRequest {
            query: query.to_owned(),
            strategy: strategy as i32,
            top_k,
            filters: Some(filters),
            ..Default::default()
        })
        .await
        .map_err(|s| anyhow::anyhow!("search: {}", s.message()))?
        .into_inner();
    if !found.dense_used && !matches!(strategy, Strategy::Bm25) {
        eprintln!("(keywords only: {})", found.dense_unavailable_reason);
    }
    if found.hits.is_empty() {
        println!("no matches");
    }
    for (i, hit) in found.hits.iter().enumerate() {
        let part = hit.part.clone().unwrap_or_default();
        let span = part.span.unwrap_or_default();
        let kind = ItemKind::try_from(part.kind)
            .map(|k| crate::describe::lower(k.as_str_name(), "ITEM_KIND_"))
            .unwrap_or_default();
        let name = if part.canon_path.is_empty() {
            kind.clone()
        } else {
            format!("{} ({kind})", part.canon_path)
        };
        println!(
            "{:>3}. {}:{}-{}  {name}  score {:.3}",
            i + 1,
            part.file_path,
            span.line_start,
            span.line_end,
            hit.score
        );
        if let Some(first) = part
            .snippet
            .lines()
            .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with("///"))
        {
            println!("       {}", first.trim());
        }
    }
    conn.close().await
}

/// `ploke index`.
pub async fn index(target: &Target, force: bool) -> anyhow::Result<()> {
    let mut conn = Conn::open_indexing(target, Some(up::Until::Done)).await?;
    // In-process services have just indexed; a remote or running one is asked to.
    if !conn.indexed || force {
        up::index(&mut conn.gateway, (force, up::Until::Done), false).await?;
    }
    conn.close().await
}
