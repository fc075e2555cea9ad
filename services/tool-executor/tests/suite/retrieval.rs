//! The tools backed by rag-search: request_code_context and code_item_lookup.

use ploke_proto::common::v1::ItemKind;
use ploke_proto::tools::v1::*;

use super::{Harness, code, request};

#[tokio::test]
async fn request_code_context_returns_parts_in_the_snippet_format() {
    let h = Harness::start().await;
    let args = RequestCodeContextArgs {
        search_term: Some("connect socket".into()),
        token_budget: Some(200),
        languages: vec![],
    };
    let tool_result::Result::RequestCodeContext(r) =
        h.ok(tool_call::Args::RequestCodeContext(args)).await
    else {
        panic!()
    };
    assert_eq!(
        (r.search_term.as_str(), r.token_budget),
        ("connect socket", 200)
    );
    assert!(r.total_tokens > 0 && r.total_tokens <= 200, "{r:?}");
    let first = &r.parts[0];
    assert_eq!(
        first,
        &ContextSnippet {
            file_path: "src/net.rs".into(),
            canon_path: "crate::net::connect_socket".into(),
            line_start: 1,
            line_end: 3,
            snippet: format!(
                "<code=\"{}\" #0:{}>\n{}\n</code>\n",
                h.path("src/net.rs").display(),
                super::NET_RS.trim_end().len(),
                super::NET_RS.trim_end()
            ),
            name: "connect_socket".into(),
            kind: ItemKind::Function as i32,
            // The fixture's Cargo.toml names the package `demo`.
            crate_name: "demo".into(),
        }
    );
    h.stop().await;
}

#[tokio::test]
async fn request_code_context_defaults_to_the_user_message_and_config_budget() {
    let h = Harness::start().await;
    let args = tool_call::Args::RequestCodeContext(RequestCodeContextArgs::default());
    let tool_result::Result::RequestCodeContext(r) = h.ok(args.clone()).await else {
        panic!()
    };
    assert_eq!(
        (r.search_term.as_str(), r.token_budget),
        ("how does Config load settings?", 4000)
    );
    assert!(
        r.parts
            .iter()
            .any(|p| p.canon_path == "crate::Config::load"),
        "{r:?}"
    );

    let mut no_message = request("req-1", "call-1", args.clone());
    no_message.user_message = String::new();
    let events = h.events_with(no_message).await;
    let Some(execute_tool_event::Event::Error(e)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(
        (code(e), e.field.as_str()),
        (ToolErrorCode::MissingField, "search_term")
    );
    // A user message without a word is no term to default to either.
    let mut no_word = request("req-1", "call-2", args);
    no_word.user_message = "???".into();
    let events = h.events_with(no_word).await;
    let Some(execute_tool_event::Event::Error(e)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(
        (code(e), e.field.as_str(), e.message.as_str()),
        (
            ToolErrorCode::MissingField,
            "search_term",
            "no search term given and the user's message holds no word to search for"
        )
    );

    let tiny = RequestCodeContextArgs {
        search_term: Some("x".into()),
        token_budget: Some(1),
        languages: vec![],
    };
    let e = h.err(tool_call::Args::RequestCodeContext(tiny)).await;
    assert_eq!(
        (code(&e), e.field.as_str()),
        (ToolErrorCode::OutOfRange, "token_budget")
    );

    // Punctuation alone is no search term (a model retries with words).
    let no_word = RequestCodeContextArgs {
        search_term: Some("\"?\"".into()),
        token_budget: None,
        languages: vec![],
    };
    let e = h.err(tool_call::Args::RequestCodeContext(no_word)).await;
    assert_eq!(
        e,
        ToolError {
            code: ToolErrorCode::InvalidArgument as i32,
            field: "search_term".into(),
            message: "holds no word to search for (no letter or digit)".into(),
            retry_hint: "describe the code to find in words, or name it".into(),
        }
    );
    h.stop().await;
}

#[tokio::test]
async fn code_item_lookup_finds_items_and_answers_not_found_without_error() {
    let h = Harness::start().await;
    let lookup = |target, kind: Option<ItemKind>| {
        tool_call::Args::CodeItemLookup(CodeItemLookupArgs {
            target: Some(target),
            kind: kind.map(|k| k as i32),
        })
    };
    let found = |r: tool_result::Result| match r {
        tool_result::Result::CodeItemLookup(l) => (
            l.found,
            l.items
                .into_iter()
                .map(|i| i.canon_path)
                .collect::<Vec<_>>(),
        ),
        other => panic!("{other:?}"),
    };
    use code_item_lookup_args::Target;
    assert_eq!(
        found(
            h.ok(lookup(
                Target::CanonPath("crate::Config::shout".into()),
                None
            ))
            .await
        ),
        (true, vec!["crate::Config::shout".to_owned()])
    );
    assert_eq!(
        found(
            h.ok(lookup(Target::Name("fmt".into()), Some(ItemKind::Method)))
                .await
        ),
        (
            true,
            vec!["crate::<Config as std::fmt::Display>::fmt".to_owned()]
        )
    );
    assert_eq!(
        found(h.ok(lookup(Target::Name("no_such_fn".into()), None)).await),
        (false, vec![])
    );
    let e = h
        .err(tool_call::Args::CodeItemLookup(
            CodeItemLookupArgs::default(),
        ))
        .await;
    assert_eq!(code(&e), ToolErrorCode::MissingField);
    h.stop().await;
}
