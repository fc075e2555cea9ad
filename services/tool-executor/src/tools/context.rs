//! The tools backed by rag-search: `request_code_context`, `code_item_lookup` and the index
//! count of `get_file_metadata`.

use ploke_proto::common::v1::ItemKind;
use ploke_proto::tools::v1::{
    CodeItemLookupArgs, CodeItemLookupResult, ContextSnippet, RequestCodeContextArgs,
    RequestCodeContextResult, ToolErrorCode, code_item_lookup_args,
};

use ploke_runtime::language::{self, LANGUAGES};
use ploke_runtime::text::{NO_WORD, has_word};

use super::ReadContext;
use crate::failure::ToolFailure;
use crate::rag::Lookup;

/// Most items `code_item_lookup` returns.
const LOOKUP_LIMIT: u32 = 20;
const BUDGET_MIN: u32 = 64;
const BUDGET_MAX: u32 = 64_000;

/// `request_code_context`: the search term (or the user's message) through rag-search's
/// GetContext, each part with its path, canonical path, lines and rendered snippet.
pub(super) async fn request_code_context(
    ctx: &ReadContext,
    args: &RequestCodeContextArgs,
) -> Result<RequestCodeContextResult, ToolFailure> {
    let term = match args.search_term.as_deref().map(str::trim) {
        Some("") => return Err(ToolFailure::invalid("search_term", "must not be blank")),
        Some(t) if !has_word(t) => {
            return Err(ToolFailure::invalid("search_term", NO_WORD)
                .hint("describe the code to find in words, or name it"));
        }
        Some(t) => t.to_owned(),
        None if has_word(&ctx.user_message) => ctx.user_message.trim().to_owned(),
        None => {
            let message = if ctx.user_message.trim().is_empty() {
                "no search term given and the turn has no user message to default to"
            } else {
                "no search term given and the user's message holds no word to search for"
            };
            return Err(
                ToolFailure::new(ToolErrorCode::MissingField, "search_term", message)
                    .hint("pass search_term"),
            );
        }
    };
    let budget = args.token_budget.unwrap_or(ctx.limits.default_token_budget);
    if !(BUDGET_MIN..=BUDGET_MAX).contains(&budget) {
        return Err(ToolFailure::out_of_range(
            "token_budget",
            format!("must be between {BUDGET_MIN} and {BUDGET_MAX}, got {budget}"),
        ));
    }
    let mut languages = Vec::with_capacity(args.languages.len());
    for (i, l) in args.languages.iter().enumerate() {
        let Some(language) = language::named(l) else {
            return Err(ToolFailure::invalid(
                &format!("languages[{i}]"),
                format!("unknown language `{}`", ploke_runtime::text::shown(l)),
            )
            .hint(format!("use some of: {}", LANGUAGES.join(", "))));
        };
        languages.push(language.to_owned());
    }
    let assembled = ctx
        .rag
        .context(&ctx.root, &ctx.session, &term, (budget, &languages))
        .await?;
    let stats = assembled.stats.unwrap_or_default();
    let parts = assembled
        .parts
        .into_iter()
        .map(|mut p| {
            let span = p.span.clone().unwrap_or_default();
            // rag-search rendered the part as it counted its tokens against the budget; an
            // older rag-search (a rolling upgrade) sends none, and the part is rendered here.
            let snippet = if p.rendered.is_empty() {
                ploke_proto::snippet::render(
                    &ctx.root,
                    &p.file_path,
                    span.byte_start,
                    span.byte_end,
                    &p.snippet,
                )
            } else {
                std::mem::take(&mut p.rendered)
            };
            // An older rag-search sends no name: it is read off a Rust canonical path.
            let name = if p.name.is_empty() {
                item_name(&p.canon_path, p.kind())
            } else {
                std::mem::take(&mut p.name)
            };
            ContextSnippet {
                snippet,
                name,
                kind: p.kind,
                crate_name: p.crate_name,
                file_path: p.file_path,
                canon_path: p.canon_path,
                line_start: span.line_start,
                line_end: span.line_end,
            }
        })
        .collect();
    Ok(RequestCodeContextResult {
        search_term: term,
        parts,
        total_tokens: stats.total_tokens,
        token_budget: budget,
        truncated: !stats.cut.is_empty(),
        index_note: index_note(&stats.index_state),
    })
}

/// An item's name from its Rust canonical path (`method` of `crate::a::<T as Tr>::method`);
/// none for a text window.
fn item_name(canon_path: &str, kind: ItemKind) -> String {
    if kind == ItemKind::TextWindow {
        return String::new();
    }
    canon_path
        .rsplit("::")
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// What the model should know about the index that answered.
fn index_note(state: &str) -> String {
    match state {
        "indexing" => "the workspace index is still being built: files not indexed yet are \
                       missing from these results; read_file, list_dir and search_code see \
                       every file now"
            .to_owned(),
        "failed" => "the last index run failed: results come from the index before it".to_owned(),
        _ => String::new(),
    }
}

/// `code_item_lookup`: exact canonical path or bare name; nothing found is `found: false`.
pub(super) async fn code_item_lookup(
    ctx: &ReadContext,
    args: &CodeItemLookupArgs,
) -> Result<CodeItemLookupResult, ToolFailure> {
    use code_item_lookup_args::Target;
    let target = match &args.target {
        Some(Target::CanonPath(p)) if !p.trim().is_empty() => {
            Lookup::CanonPath(p.trim().to_owned())
        }
        Some(Target::Name(n)) if !n.trim().is_empty() => Lookup::Name(n.trim().to_owned()),
        Some(Target::CanonPath(_)) => {
            return Err(ToolFailure::invalid("canon_path", "must not be blank"));
        }
        Some(Target::Name(_)) => return Err(ToolFailure::invalid("name", "must not be blank")),
        None => {
            return Err(ToolFailure::new(
                ToolErrorCode::MissingField,
                "canon_path",
                "give exactly one of canon_path or name",
            ));
        }
    };
    let kind = match args.kind {
        None => ItemKind::Unspecified,
        Some(k) => ItemKind::try_from(k)
            .map_err(|_| ToolFailure::invalid("kind", format!("unknown item kind {k}")))?,
    };
    let found = ctx
        .rag
        .lookup(&ctx.root, &ctx.session, target, kind, LOOKUP_LIMIT)
        .await?;
    Ok(CodeItemLookupResult {
        found: !found.items.is_empty(),
        items: found.items,
    })
}

/// Items the index holds for `file`; 0 when the index cannot say.
pub(super) async fn indexed_items(ctx: &ReadContext, file: &str) -> u32 {
    match ctx
        .rag
        .lookup(
            &ctx.root,
            &ctx.session,
            Lookup::File(file.to_owned()),
            ItemKind::Unspecified,
            1,
        )
        .await
    {
        Ok(found) => found.total,
        Err(e) => {
            tracing::debug!(file, error = %e, "index count unavailable");
            0
        }
    }
}
