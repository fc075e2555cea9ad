//! `[rag_search]`: the retrieval service's settings.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::ServiceKind;

/// `[rag_search]`.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RagSearchConfig {
    /// Listen address.
    pub listen: SocketAddr,
    /// Local embedding model directory (config.json, tokenizer.json, model.safetensors).
    pub embed_model: Option<PathBuf>,
    /// The `k` of reciprocal rank fusion.
    pub rrf_k: f32,
    /// Weight of BM25 ranks in hybrid fusion.
    pub bm25_weight: f32,
    /// Weight of dense ranks in hybrid fusion.
    pub dense_weight: f32,
    /// Weight of the items the query names (identifiers, paths, `Type::method`) in fusion.
    pub name_weight: f32,
    /// How many of the lexical ranking's first hits (BM25 and names) HYBRID keeps first: the
    /// dense side may reorder them among themselves and ranks what follows (docs/RETRIEVAL.md);
    /// 0 = plain reciprocal rank fusion.
    pub lexical_top: u32,
    /// HYBRID skips its dense side (the query embedding) when the query names an item in code
    /// form or quotes text (`"error decoding response body"`): BM25 and names decide those.
    pub skip_dense_when_named: bool,
    /// Tokens of a query the local model embeds (the rest is left to BM25 and names): the
    /// forward pass costs in proportion, and HYBRID ranked the same with 16 to 128 on the
    /// evaluation sets (docs/RETRIEVAL.md). 3 to 128.
    pub query_max_tokens: u32,
    /// Watch the workspaces and refresh changed files.
    pub watch: bool,
    /// Bring every workspace's index up to date in the background at start (searches answer
    /// from the last commit meanwhile).
    pub index_on_start: bool,
    /// Fetch git workspaces (AddWorkspace with a repository) every this many seconds and
    /// re-index those that moved; 0 = only when added again.
    pub git_poll_secs: u64,
    /// Where git workspaces are cloned (default `<data_dir>/repos`). In a shared deployment,
    /// a volume tool-executor mounts at the same path, so its tools see the clones.
    pub repos_dir: Option<PathBuf>,
    /// Most bytes of content one session's overlay (the developer's changed files over the
    /// indexed base) may hold; a sync or put past it is refused.
    pub overlay_max_bytes: u64,
    /// Most paths (changed, deleted or awaited) one session's overlay may hold.
    pub overlay_max_files: u64,
    /// An overlay nobody synced, put or read for this many seconds is dropped; 0 = never.
    pub overlay_idle_secs: u64,
    /// Most sessions with an overlay one principal may have at once.
    pub overlay_max_per_principal: u64,
}

impl Default for RagSearchConfig {
    fn default() -> Self {
        Self {
            listen: ServiceKind::RagSearch.default_listen(),
            embed_model: None,
            rrf_k: 10.0,
            bm25_weight: 1.0,
            dense_weight: 0.2,
            name_weight: 1.0,
            lexical_top: 1,
            skip_dense_when_named: true,
            query_max_tokens: 16,
            watch: true,
            index_on_start: true,
            git_poll_secs: 300,
            repos_dir: None,
            overlay_max_bytes: 64 * 1024 * 1024,
            overlay_max_files: 20_000,
            overlay_idle_secs: 86_400,
            overlay_max_per_principal: 16,
        }
    }
}

impl RagSearchConfig {
    /// Settings that cannot work.
    pub fn validate(&self) -> Result<(), String> {
        if !(3..=128).contains(&self.query_max_tokens) {
            return Err(format!(
                "[rag_search] query_max_tokens = {} is outside 3..=128 (the model's window; [CLS] and [SEP] take two)",
                self.query_max_tokens
            ));
        }
        Ok(())
    }
}
