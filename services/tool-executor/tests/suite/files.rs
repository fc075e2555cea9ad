//! The catalogue and the file tools: read_file, list_dir, get_file_metadata, search_code.

use ploke_proto::tools::v1::*;

use super::{Harness, LIB_RS, Options, code};

fn read(file: &str, start: Option<u32>, end: Option<u32>) -> tool_call::Args {
    tool_call::Args::ReadFile(ReadFileArgs {
        file: file.into(),
        start_line: start,
        end_line: end,
    })
}

#[tokio::test]
async fn list_tools_returns_all_eight_with_schema_side_effect_and_timeout() {
    let h = Harness::start().await;
    let tools = h
        .tools
        .clone()
        .list_tools(ListToolsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tools;
    let summary: Vec<(String, SideEffect, u32, bool)> = tools
        .iter()
        .map(|t| {
            let schema: serde_json::Value =
                serde_json::from_str(&t.parameters_json_schema).unwrap();
            (
                t.name.clone(),
                t.side_effect(),
                t.default_timeout_ms,
                schema["type"] == "object" && !t.description.is_empty(),
            )
        })
        .collect();
    let s = |n: &str, e, ms| (n.to_owned(), e, ms, true);
    use SideEffect::{ReadOnly, Writes};
    assert_eq!(
        summary,
        vec![
            s("request_code_context", ReadOnly, 30000),
            s("get_file_metadata", ReadOnly, 30000),
            s("apply_code_edit", Writes, 600000),
            s("read_file", ReadOnly, 30000),
            s("list_dir", ReadOnly, 30000),
            s("search_code", ReadOnly, 30000),
            s("code_item_lookup", ReadOnly, 30000),
            s("create_file", Writes, 600000),
        ]
    );
    h.stop().await;
}

#[tokio::test]
async fn read_file_returns_ranges_with_the_whole_file_hash() {
    let h = Harness::start().await;
    let hash = blake3::hash(LIB_RS.as_bytes()).to_hex().to_string();
    let total = LIB_RS.lines().count() as u32;
    let whole = h.ok(read("src/lib.rs", None, None)).await;
    assert_eq!(
        whole,
        tool_result::Result::ReadFile(ReadFileResult {
            file_path: "src/lib.rs".into(),
            start_line: 1,
            end_line: total,
            total_lines: total,
            content: LIB_RS.into(),
            file_hash: hash.clone(),
            truncated: false,
        })
    );
    let lines: Vec<&str> = LIB_RS.split_inclusive('\n').collect();
    let part = h.ok(read("./src/lib.rs", Some(3), Some(5))).await;
    assert_eq!(
        part,
        tool_result::Result::ReadFile(ReadFileResult {
            file_path: "src/lib.rs".into(),
            start_line: 3,
            end_line: 5,
            total_lines: total,
            content: lines[2..5].concat(),
            file_hash: hash,
            truncated: false,
        })
    );
    h.stop().await;
}

#[tokio::test]
async fn read_file_stops_at_the_byte_cap_on_a_line_boundary() {
    let h = Harness::start_with(Options {
        read_max_bytes: Some(40),
        ..Options::default()
    })
    .await;
    let tool_result::Result::ReadFile(r) = h.ok(read("src/lib.rs", None, None)).await else {
        panic!()
    };
    assert!(r.truncated);
    assert_eq!(r.content, "//! A small crate.\n\n/// Settings.\n");
    assert_eq!((r.start_line, r.end_line), (1, 3));
    h.stop().await;
}

#[tokio::test]
async fn read_file_errors_are_typed() {
    let h = Harness::start_with(Options {
        max_file_bytes: Some(1000),
        ..Options::default()
    })
    .await;
    std::fs::write(h.path("bin.dat"), [0xff, 0xfe, 0x00, 0x80]).unwrap();
    std::fs::write(h.path("big.txt"), "x".repeat(2000)).unwrap();
    let cases = [
        (
            read("missing.rs", None, None),
            ToolErrorCode::NotFound,
            "file",
        ),
        (
            read("src", None, None),
            ToolErrorCode::InvalidArgument,
            "file",
        ),
        (read("bin.dat", None, None), ToolErrorCode::NotUtf8, "file"),
        (read("big.txt", None, None), ToolErrorCode::TooLarge, "file"),
        (
            read("src/lib.rs", Some(500), None),
            ToolErrorCode::OutOfRange,
            "start_line",
        ),
        (
            read("src/lib.rs", Some(5), Some(2)),
            ToolErrorCode::InvalidArgument,
            "end_line",
        ),
    ];
    for (args, want, field) in cases {
        let e = h.err(args.clone()).await;
        assert_eq!(
            (code(&e), e.field.as_str()),
            (want, field),
            "{args:?}: {e:?}"
        );
        assert!(!e.message.is_empty());
    }
    h.stop().await;
}

#[tokio::test]
async fn list_dir_is_sorted_capped_and_hides_dot_files_unless_asked() {
    let h = Harness::start().await;
    let list = |path: Option<&str>, hidden: Option<bool>, max: Option<u32>| {
        tool_call::Args::ListDir(ListDirArgs {
            path: path.map(str::to_owned),
            include_hidden: hidden,
            max_entries: max,
        })
    };
    let names = |r: tool_result::Result| match r {
        tool_result::Result::ListDir(l) => (
            l.entries
                .iter()
                .map(|e| (e.name.clone(), e.kind()))
                .collect::<Vec<_>>(),
            l.truncated,
        ),
        other => panic!("{other:?}"),
    };
    use EntryKind::{Dir, File};
    assert_eq!(
        names(h.ok(list(None, None, None)).await),
        (
            vec![
                ("Cargo.toml".into(), File),
                ("README.md".into(), File),
                ("src".into(), Dir),
                ("target".into(), Dir)
            ],
            false
        )
    );
    let (all, _) = names(h.ok(list(Some("."), Some(true), None)).await);
    assert_eq!(all.first().unwrap().0, ".gitignore");
    assert_eq!(all.len(), 6);
    assert_eq!(
        names(h.ok(list(Some("src"), None, Some(1))).await),
        (vec![("lib.rs".into(), File)], true)
    );
    // A name that is not UTF-8 could not be named back: left out.
    std::fs::write(
        h.root.join(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"src/bad\xffname.rs"),
        ),
        "pub fn b() {}\n",
    )
    .unwrap();
    // A FIFO is listed as what it is, not as a file some tool could read.
    let made = std::process::Command::new("mkfifo")
        .arg(h.root.join("src/pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    assert_eq!(
        names(h.ok(list(Some("src"), None, None)).await),
        (
            vec![
                ("lib.rs".into(), File),
                ("net.rs".into(), File),
                ("pipe".into(), EntryKind::Other)
            ],
            false
        )
    );
    let e = h.err(list(Some("src/lib.rs"), None, None)).await;
    assert_eq!(
        (code(&e), e.field.as_str()),
        (ToolErrorCode::InvalidArgument, "path")
    );
    let e = h.err(list(Some("nope"), None, None)).await;
    assert_eq!(code(&e), ToolErrorCode::NotFound);
    h.stop().await;
}

#[tokio::test]
async fn get_file_metadata_reports_facts_and_index_count() {
    let h = Harness::start().await;
    let meta = |p: &str| {
        tool_call::Args::GetFileMetadata(GetFileMetadataArgs {
            file_path: p.into(),
        })
    };
    let tool_result::Result::GetFileMetadata(m) = h.ok(meta("src/lib.rs")).await else {
        panic!()
    };
    let modified = std::fs::metadata(h.path("src/lib.rs"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(
        m,
        GetFileMetadataResult {
            file_path: "src/lib.rs".into(),
            exists: true,
            size_bytes: LIB_RS.len() as u64,
            line_count: LIB_RS.lines().count() as u64,
            file_hash: blake3::hash(LIB_RS.as_bytes()).to_hex().to_string(),
            modified_at: Some(prost_types::Timestamp::from(modified)),
            language: "rust".into(),
            // Config, impl Config, load, shout, impl Display, fmt, helper.
            indexed_items: 7,
            is_dir: false,
        }
    );
    let tool_result::Result::GetFileMetadata(m) = h.ok(meta("src/nope.rs")).await else {
        panic!()
    };
    assert_eq!(
        m,
        GetFileMetadataResult {
            file_path: "src/nope.rs".into(),
            language: "rust".into(),
            ..Default::default()
        }
    );
    let tool_result::Result::GetFileMetadata(m) = h.ok(meta("src")).await else {
        panic!()
    };
    assert!(m.exists && m.is_dir && m.file_hash.is_empty());
    h.stop().await;
}

fn search(pattern: &str) -> SearchCodeArgs {
    SearchCodeArgs {
        pattern: pattern.into(),
        ..Default::default()
    }
}

fn matches(r: tool_result::Result) -> (Vec<(String, u32, String)>, bool) {
    match r {
        tool_result::Result::SearchCode(s) => (
            s.matches
                .into_iter()
                .map(|m| (m.file_path, m.line_number, m.line))
                .collect(),
            s.truncated,
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn search_code_finds_regex_and_literal_matches_honouring_gitignore() {
    let h = Harness::start().await;
    let (found, truncated) = matches(
        h.ok(tool_call::Args::SearchCode(search(r"fn \w+_socket")))
            .await,
    );
    // target/ is ignored by .gitignore.
    assert_eq!(
        found,
        vec![(
            "src/net.rs".into(),
            1,
            "pub fn connect_socket(addr: &str) -> bool {".into()
        )]
    );
    assert!(!truncated);

    let literal = SearchCodeArgs {
        literal: Some(true),
        case_insensitive: Some(true),
        ..search("CONFIG {")
    };
    let (found, _) = matches(h.ok(tool_call::Args::SearchCode(literal)).await);
    assert_eq!(
        found.iter().map(|m| m.1).collect::<Vec<_>>(),
        vec![4, 8, 10, 11, 19]
    );

    let capped = SearchCodeArgs {
        max_matches: Some(2),
        path: Some("src".into()),
        ..search("fn ")
    };
    let (found, truncated) = matches(h.ok(tool_call::Args::SearchCode(capped)).await);
    assert_eq!((found.len(), truncated), (2, true));
    h.stop().await;
}

#[tokio::test]
async fn search_code_returns_context_lines() {
    let h = Harness::start().await;
    let args = SearchCodeArgs {
        context_lines: Some(1),
        ..search("41")
    };
    let tool_result::Result::SearchCode(r) = h.ok(tool_call::Args::SearchCode(args)).await else {
        panic!()
    };
    assert_eq!(
        r.matches,
        vec![CodeMatch {
            file_path: "src/lib.rs".into(),
            line_number: 26,
            line: "    41".into(),
            before: vec!["pub fn helper() -> u32 {".into()],
            after: vec!["}".into()],
        }]
    );
    h.stop().await;
}

#[tokio::test]
async fn search_code_refuses_a_bad_regex_and_bad_bounds() {
    let h = Harness::start().await;
    let e = h.err(tool_call::Args::SearchCode(search("fn (("))).await;
    assert_eq!(
        (code(&e), e.field.as_str()),
        (ToolErrorCode::InvalidArgument, "pattern")
    );
    assert!(e.retry_hint.contains("literal"), "{e:?}");
    let e = h
        .err(tool_call::Args::SearchCode(SearchCodeArgs {
            max_matches: Some(0),
            ..search("x")
        }))
        .await;
    assert_eq!(
        (code(&e), e.field.as_str()),
        (ToolErrorCode::OutOfRange, "max_matches")
    );
    let e = h
        .err(tool_call::Args::SearchCode(SearchCodeArgs {
            context_lines: Some(11),
            ..search("x")
        }))
        .await;
    assert_eq!(
        (code(&e), e.field.as_str()),
        (ToolErrorCode::OutOfRange, "context_lines")
    );
    h.stop().await;
}
