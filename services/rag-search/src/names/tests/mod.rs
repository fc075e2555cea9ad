use super::*;

fn keys(text: &str) -> Vec<(String, f32)> {
    query_names(text)
        .names
        .into_iter()
        .map(|n| (n.key, n.strength))
        .collect()
}

#[test]
fn plain_words_that_spell_a_name_together_are_a_name() {
    let phrases =
        |text: &str| -> Vec<String> { phrases(text).into_iter().map(|n| n.key).collect() };
    // Two and three words in a row; function words join none, except those names begin
    // with.
    assert_eq!(
        phrases("forward the max level hint of the stack"),
        ["maxlevel", "levelhint", "maxlevelhint"]
    );
    assert_eq!(
        phrases("check is empty first"),
        ["isempty", "emptyfirst", "isemptyfirst"]
    );
    // Punctuation, brackets, identifiers and numbers end a run: no `readbody` from
    // `poll_read_body` nor across the sentence, no `wrongsend`, no `errortimes`.
    assert_eq!(
        phrases("poll_read_body read. Body wrong (send error) 200 times"),
        ["bodywrong", "senderror"]
    );
    // Short joins are noise.
    assert_eq!(phrases("an ok day"), Vec::<String>::new());
    // In the query's names: weaker than code, stronger than a plain word, each key once.
    assert_eq!(
        keys("`send_error` fails; send error"),
        [
            ("senderror".to_owned(), CODE_STRENGTH),
            ("fails".to_owned(), WORD_STRENGTH),
            ("send".to_owned(), WORD_STRENGTH),
            ("error".to_owned(), WORD_STRENGTH),
        ]
    );
    assert_eq!(
        keys("fix span data of new events")
            .into_iter()
            .filter(|(_, s)| *s == PHRASE_STRENGTH)
            .collect::<Vec<_>>(),
        [
            ("fixspan".to_owned(), PHRASE_STRENGTH),
            ("spandata".to_owned(), PHRASE_STRENGTH),
            ("newevents".to_owned(), PHRASE_STRENGTH),
            ("fixspandata".to_owned(), PHRASE_STRENGTH),
        ]
    );
}

#[test]
fn names_written_as_code_are_strongest_and_plain_words_weakest() {
    assert_eq!(
        keys("fix(armv7): split record_header_indices loop to work around a Token bug"),
        vec![
            ("recordheaderindices".into(), CODE_STRENGTH),
            ("towork".into(), PHRASE_STRENGTH),
            ("workaround".into(), PHRASE_STRENGTH),
            ("tokenbug".into(), PHRASE_STRENGTH),
            ("toworkaround".into(), PHRASE_STRENGTH),
            ("token".into(), CAPITALISED_STRENGTH),
            ("split".into(), WORD_STRENGTH),
            ("loop".into(), WORD_STRENGTH),
            ("work".into(), WORD_STRENGTH),
            ("around".into(), WORD_STRENGTH),
            ("bug".into(), WORD_STRENGTH),
        ]
    );
    // Backticks, a call, CamelCase and a path are code; the commit prefix is not a name.
    assert_eq!(
        keys("feat!: make `poll` and read_buf() use HttpConnector::new"),
        vec![
            ("poll".into(), CODE_STRENGTH),
            ("readbuf".into(), CODE_STRENGTH),
            ("new".into(), CODE_STRENGTH),
            ("make".into(), WORD_STRENGTH),
            ("use".into(), WORD_STRENGTH),
        ]
    );
    // Inside an inline code span every identifier is code, even apart from the backticks;
    // a fenced block (output, examples) is not.
    assert_eq!(
        keys("`fn headers ` for wasm::multipart"),
        vec![
            ("headers".into(), CODE_STRENGTH),
            ("multipart".into(), CODE_STRENGTH),
        ]
    );
    assert_eq!(
        keys("say which:\n```\nwarning: level disabled\n```"),
        vec![
            ("leveldisabled".into(), PHRASE_STRENGTH),
            ("say".into(), WORD_STRENGTH),
            ("warning".into(), WORD_STRENGTH),
            ("level".into(), WORD_STRENGTH),
            ("disabled".into(), WORD_STRENGTH),
        ]
    );
    // Backticks pair line by line: a stray one does not make the prose after it code.
    assert_eq!(
        keys("a ` stray\n`parse` and `read` then"),
        vec![
            ("parse".into(), CODE_STRENGTH),
            ("read".into(), CODE_STRENGTH),
            ("stray".into(), WORD_STRENGTH),
        ]
    );
    let q = query_names("use crate::client::HttpConnector::new here").names;
    let new = q.iter().find(|n| n.key == "new").unwrap();
    assert_eq!(
        new.qualifiers,
        vec!["client".to_owned(), "httpconnector".to_owned()]
    );
}

#[test]
fn short_names_count_when_written_as_code_or_qualified_and_plain_short_words_do_not() {
    let code = |text: &str| -> Vec<(String, Vec<String>)> {
        query_names(text)
            .names
            .into_iter()
            .filter(|n| n.strength >= CODE_STRENGTH)
            .map(|n| (n.key, n.qualifiers))
            .collect()
    };
    assert_eq!(
        code("fix `MethodFilter::or` and Error::tx, or if it is an io error (e.g. `id`)"),
        vec![
            ("or".into(), vec!["methodfilter".into()]),
            ("tx".into(), vec!["error".into()]),
            ("id".into(), vec![]),
        ]
    );
    // Plain short words, prose run together at a full stop, and one letter however it is
    // written, name nothing.
    let all: Vec<String> = query_names("or if io, e.g. `x` or a::b, failed.It")
        .names
        .into_iter()
        .map(|n| n.key)
        .collect();
    assert_eq!(all, Vec::<String>::new());
}

#[test]
fn dotted_paths_are_names_and_file_names_are_their_stem() {
    let named = |text: &str| -> Vec<(String, Vec<String>, f32)> {
        query_names(text)
            .names
            .into_iter()
            .map(|n| (n.key, n.qualifiers, n.strength))
            .collect()
    };
    assert_eq!(
        named("Why does Session.request retry? See sessions.py, e.g. v1.2."),
        vec![
            ("request".into(), vec!["session".into()], CODE_STRENGTH),
            ("see".into(), vec![], CAPITALISED_STRENGTH),
            ("why".into(), vec![], WORD_STRENGTH),
            ("retry".into(), vec![], WORD_STRENGTH),
            ("sessions".into(), vec![], WORD_STRENGTH),
        ]
    );
    assert_eq!(
        named("requests.api.get"),
        vec![(
            "get".into(),
            vec!["requests".into(), "api".into()],
            CODE_STRENGTH
        )]
    );
}

fn item(id: u64, canon_path: &str, kind: Kind) -> ItemRecord {
    let name = canon_path
        .rsplit("::")
        .next()
        .unwrap_or(canon_path)
        .to_owned();
    ItemRecord {
        id,
        file: format!("src/f{id}.rs"),
        language: "rust".into(),
        file_hash: String::new(),
        item: crate::parse::ParsedItem {
            canon_path: canon_path.into(),
            name: name.clone(),
            qualname: name,
            kind,
            byte_start: 0,
            byte_end: 0,
            line_start: 1,
            line_end: 1,
            signature: String::new(),
            doc: String::new(),
            crate_name: String::new(),
            test: false,
        },
        embed_hash: String::new(),
    }
}

/// An index of `items`.
fn indexed(items: &[ItemRecord]) -> NameIndex {
    let mut index = NameIndex::default();
    for i in items {
        index.insert(i);
    }
    index
}

/// The ids and name scores `query` finds among `items` that `keep` lets through, best first
/// (ties by id).
fn found(
    index: &NameIndex,
    items: &[ItemRecord],
    query: &str,
    keep: &dyn Fn(u64) -> bool,
) -> Vec<(u64, f32)> {
    let names = query_names(query);
    let resolved = index.resolve(&names, &|_| false);
    let mut found: Vec<(u64, f32)> = index
        .matches(
            &names,
            &resolved,
            |id| items.iter().find(|i| i.id == id).filter(|_| keep(id)),
            &|r| index.at_root(r, &|_| false),
        )
        .into_iter()
        .map(|(r, s)| (r.id, s))
        .collect();
    found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    found
}

const ALL: &dyn Fn(u64) -> bool = &|_| true;

#[test]
fn a_name_spelled_in_words_finds_its_item_above_the_single_words() {
    let items = [
        item(1, "crate::body::Sender::send_error", Kind::Method),
        item(2, "crate::body::Sender::send", Kind::Method),
        item(3, "crate::error::error", Kind::Function),
    ];
    let index = indexed(&items);
    // `send_error` by the phrase, its path word `body` counting as context (×2); `send`
    // (capitalised, sentence start: a plain word) also with `body`; `error` plainly.
    assert_eq!(
        found(
            &index,
            &items,
            "Send error on the body when reading fails",
            ALL
        ),
        [
            (1, PHRASE_STRENGTH * 2.0),
            (2, WORD_STRENGTH * 2.0),
            (3, WORD_STRENGTH)
        ]
    );
}

#[test]
fn words_spelling_a_name_in_another_form_find_it() {
    let items = [
        item(1, "crate::de::parse_escape", Kind::Function),
        item(2, "crate::de::escape", Kind::Function),
    ];
    let mut index = indexed(&items);
    let query = "avoid allocating when parsing escapes";
    assert_eq!(
        found(&index, &items, query, ALL),
        [
            (1, PHRASE_STRENGTH * OTHER_FORM),
            (2, WORD_STRENGTH * PLURAL)
        ]
    );
    // Removed, it is found no more.
    index.remove(&items[0]);
    assert_eq!(
        found(&index, &items, query, ALL),
        [(2, WORD_STRENGTH * PLURAL)]
    );
}

#[test]
fn words_spelling_part_of_a_longer_name_find_it() {
    let items = [
        item(1, "crate::env::Dynamics::has_value_filters", Kind::Method),
        item(2, "crate::env::value_filters_of", Kind::Function),
        item(3, "crate::env::value_filters", Kind::Function),
    ];
    let mut index = indexed(&items);
    let query = "fix level hint not considering value filters";
    // A name the words spell whole is what they mean.
    assert_eq!(found(&index, &items, query, ALL), [(3, PHRASE_STRENGTH)]);
    // Without it, the names holding the words in a row, at PART (shared by two); each
    // forgotten on removal.
    index.remove(&items[2]);
    let by_two = 1.0 / (1.0 + 2f32.ln());
    assert_eq!(
        found(&index, &items, query, ALL),
        [
            (1, PHRASE_STRENGTH * PART * by_two),
            (2, PHRASE_STRENGTH * PART * by_two)
        ]
    );
    index.remove(&items[0]);
    assert_eq!(
        found(&index, &items, query, ALL),
        [(2, PHRASE_STRENGTH * PART)]
    );
    // Two words of a two-word name are the name itself, not a part of it.
    assert_eq!(
        parts_of(&["value".into(), "filter".into()]),
        Vec::<String>::new()
    );
    assert_eq!(
        parts_of(&["has".into(), "valu".into(), "filter".into()]),
        ["hasvalu", "valufilter"]
    );
}

#[test]
fn the_named_item_whose_path_holds_the_query_s_words_scores_highest() {
    let items = [
        item(
            1,
            "crate::blocking::response::Response::bytes",
            Kind::Method,
        ),
        item(
            2,
            "crate::async_impl::response::Response::bytes",
            Kind::Method,
        ),
        item(3, "crate::wasm::response::Response::bytes", Kind::Method),
        item(4, "crate::blocking::response::Response", Kind::Struct),
        item(5, "crate::util::read_mem", Kind::Function),
    ];
    let mut index = indexed(&items);
    let score = |index: &NameIndex, query: &str, keep: &dyn Fn(u64) -> bool| {
        found(index, &items, query, keep)
    };
    let all = ALL;
    let found = score(&index, "Add `bytes` to blocking::Response", all);
    let order: Vec<u64> = found.iter().map(|(id, _)| *id).collect();
    assert_eq!(order, vec![1, 4, 2, 3]);
    // Three items named `bytes`; "blocking::Response" tells the path of one of them
    // ([`super::apart`]): it fits by its path, alone (x1.5), the other two fit nothing (x0.4)
    // and share the name three ways, 1/(1+ln 3). Each gains 1 + the words of the path around
    // it that the query has (blocking, response / response).
    let specificity = 1.0 / (1.0 + 3f32.ln());
    assert!((found[0].1 - QUALIFIED * 3.0).abs() < 1e-6, "{found:?}");
    let others = OTHERWISE_QUALIFIED * specificity * 2.0;
    assert!((found[2].1 - others).abs() < 1e-6, "{found:?}");
    // The struct is named as `blocking::Response`: qualified (its qualifier is not counted
    // again as context), and a type (half).
    assert!(
        (found[1].1 - QUALIFIED * NOT_A_FUNCTION).abs() < 1e-6,
        "{found:?}"
    );
    // Case and `_` do not matter; a filtered-out item is not found; removal forgets it.
    assert_eq!(score(&index, "why does ReadMem block", all).len(), 1);
    assert!(score(&index, "why does read_mem block", &|id| id != 5).is_empty());
    index.remove(&items[4]);
    assert!(score(&index, "read_mem", all).is_empty());
}

#[test]
fn a_qualified_name_is_shared_only_by_the_items_its_qualifiers_fit() {
    let method = |id: u64, path: &str| {
        let mut record = item(id, path, Kind::Method);
        let mut segments = path.rsplit("::");
        let (name, owner) = (segments.next().unwrap(), segments.next().unwrap());
        record.item.qualname = format!("{owner}::{name}");
        record
    };
    let items = [
        method(1, "crate::fmt::format::Writer::new"),
        method(2, "crate::fmt::Layer::new"),
        method(3, "crate::registry::Registry::new"),
        method(4, "crate::filter::Targets::new"),
        method(5, "crate::reload::Handle::new"),
    ];
    let index = indexed(&items);
    let found = found(&index, &items, "make `format::Writer::new` public", ALL);
    // `new` is shared by five items, but `format::Writer::new` by one: that one counts as a
    // name of its own (specificity 1), its owner named (x2); the others have none of the
    // qualifiers and share the name five ways.
    assert_eq!(found[0].0, 1);
    assert!((found[0].1 - OWNER_QUALIFIED).abs() < 1e-6, "{found:?}");
    let five_ways = 1.0 / (1.0 + 5f32.ln());
    for (_, score) in &found[1..] {
        assert!(
            (score - OTHERWISE_QUALIFIED * five_ways).abs() < 1e-6,
            "{found:?}"
        );
    }
}

#[test]
fn a_better_fit_of_the_qualifiers_never_ranks_below_a_worse_one() {
    let method = |id: u64, path: &str, qualname: &str| {
        let mut record = item(id, path, Kind::Method);
        record.item.qualname = qualname.into();
        record
    };
    let items = [
        method(
            1,
            "crate::async_impl::request::Request::new",
            "Request::new",
        ),
        method(2, "crate::blocking::request::Request::new", "Request::new"),
        method(3, "crate::wasm::request::Request::new", "Request::new"),
        // In module `request`: a qualifier in its path, not its owner.
        method(4, "crate::request::Builder::new", "Builder::new"),
    ];
    let index = indexed(&items);
    // Three items whose owner the query names share the name among themselves; the one
    // whose path merely has the qualifier shares it with them too, so it stays below.
    let found = found(&index, &items, "fix `Request::new`", ALL);
    let order: Vec<u64> = found.iter().map(|(id, _)| *id).collect();
    assert_eq!(order, vec![1, 2, 3, 4]);
    let owners = 1.0 / (1.0 + 3f32.ln());
    let all = 1.0 / (1.0 + 4f32.ln());
    assert!(
        (found[0].1 - OWNER_QUALIFIED * owners).abs() < 1e-6,
        "{found:?}"
    );
    assert!((found[3].1 - QUALIFIED * all).abs() < 1e-6, "{found:?}");
}

#[test]
fn the_crate_a_query_writes_is_part_of_the_path() {
    let method = |id: u64, krate: &str, path: &str| {
        let mut record = item(id, path, Kind::Method);
        record.item.qualname = "Client::get".into();
        record.item.crate_name = krate.into();
        record
    };
    let items = [
        method(1, "reqwest", "crate::async_impl::client::Client::get"),
        method(2, "reqwest", "crate::blocking::client::Client::get"),
        method(3, "ureq", "crate::client::Client::get"),
    ];
    let index = indexed(&items);
    let order = |query: &str| -> Vec<u64> {
        found(&index, &items, query, ALL)
            .iter()
            .map(|(id, _)| *id)
            .collect()
    };
    // Crate and module written: only the blocking client fits the whole path.
    assert_eq!(order("`reqwest::blocking::Client::get`")[0], 2);
    // The crate alone: its two clients before the other crate's.
    assert_eq!(order("`ureq::Client::get`"), vec![3, 1, 2]);
    let reqwest = order("`reqwest::Client::get`");
    assert_eq!(reqwest[2], 3, "{reqwest:?}");
    // The crate alone fits no item better than another (each of its items has it).
    let found = found(&index, &items, "`reqwest::get`", ALL);
    assert!(found.iter().all(|(_, s)| *s == found[0].1), "{found:?}");
}

#[test]
fn a_name_written_as_code_prefers_the_item_spelled_so() {
    let items = [
        item(1, "cobra.Command.execute", Kind::Method),
        item(2, "cobra.Command.Execute", Kind::Method),
        item(3, "requests.sessions.Session.__init__", Kind::Method),
    ];
    let mut items = items;
    for record in &mut items {
        // Dotted paths: the name is the last segment.
        let name = record
            .item
            .canon_path
            .rsplit('.')
            .next()
            .unwrap()
            .to_owned();
        record.item.name = name.clone();
        record.item.qualname = format!("Command.{name}");
    }
    let index = indexed(&items);
    let found_for = |query: &str| found(&index, &items, query, ALL);
    let by_case = found_for("why does `Execute` fail");
    assert_eq!(
        by_case.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        vec![2, 1]
    );
    assert!(
        (by_case[1].1 / by_case[0].1 - OTHER_SPELLING).abs() < 1e-6,
        "{by_case:?}"
    );
    // Underscores around a name are part of its spelling.
    let init = found_for("`__init__` of a session");
    assert_eq!(init.len(), 1);
    let plain = found_for("`init` of a session");
    assert!(
        (plain[0].1 / init[0].1 - OTHER_SPELLING).abs() < 1e-6,
        "{init:?} {plain:?}"
    );
}

#[test]
fn the_owner_of_an_item_is_its_type_or_trait() {
    fn of(q: &str) -> Vec<&str> {
        owners(q).collect()
    }
    assert_eq!(of("Type::method"), vec!["Type"]);
    assert_eq!(
        of("<Filtered<L, F> as Layer<S>>::on_exit"),
        vec!["Filtered", "Layer"]
    );
    assert_eq!(
        of("<&'a mut Serializer as ser::Serializer>::collect_str"),
        vec!["Serializer", "Serializer"]
    );
    assert_eq!(of("Outer.Cart.add_item"), vec!["Cart"]);
    assert!(of("free_function").is_empty());
    // `blocking::Request::try_clone` names `Request::try_clone` more than
    // `RequestBuilder::try_clone` in module `request`, and either more than an item with
    // none of the qualifiers.
    let mut own = item(
        1,
        "crate::blocking::request::Request::try_clone",
        Kind::Method,
    );
    own.item.qualname = "Request::try_clone".into();
    let mut near = item(
        2,
        "crate::blocking::request::RequestBuilder::try_clone",
        Kind::Method,
    );
    near.item.qualname = "RequestBuilder::try_clone".into();
    let mut other = item(3, "crate::wasm::Body::try_clone", Kind::Method);
    other.item.qualname = "Body::try_clone".into();
    let mut elsewhere = item(
        4,
        "crate::async_impl::request::Request::try_clone",
        Kind::Method,
    );
    elsewhere.item.qualname = "Request::try_clone".into();
    let qualifiers = vec!["blocking".to_owned(), "request".to_owned()];
    assert_eq!(
        [&own, &elsewhere, &near, &other].map(|r| Fit::of(r, &qualifiers)),
        [Fit::Whole, Fit::Owner, Fit::Path, Fit::Nothing]
    );
    assert_eq!(
        [Fit::Exact, Fit::Whole, Fit::Owner, Fit::Path, Fit::Nothing].map(|f| f.factor(true)),
        [
            OWNER_QUALIFIED,
            OWNER_QUALIFIED,
            OWNER_QUALIFIED,
            QUALIFIED,
            OTHERWISE_QUALIFIED
        ]
    );
    // A free item at the exact path weighs what its module written does.
    assert_eq!(Fit::Exact.factor(false), QUALIFIED);
}

#[test]
fn a_sentence_is_not_a_commit_prefix() {
    assert_eq!(strip_commit_prefix("fix(h1): reduce logs"), "reduce logs");
    assert_eq!(strip_commit_prefix("docs: typo"), "typo");
    assert_eq!(
        strip_commit_prefix("Note: HttpConnector keeps alive"),
        "Note: HttpConnector keeps alive"
    );
    assert_eq!(strip_commit_prefix("no prefix here"), "no prefix here");
}

#[test]
fn quoted_text_names_nothing() {
    // Asked for as written (crate::quotes): neither the phrase nor the identifier in it.
    let got = keys("where does \"setting h1 header_read_timeout timer\" come from");
    assert_eq!(
        got,
        vec![
            ("where".to_owned(), WORD_STRENGTH),
            ("come".to_owned(), WORD_STRENGTH)
        ]
    );
    assert_eq!(
        keys("`Conn::poll` logs \"header read timeout\""),
        vec![
            ("poll".to_owned(), CODE_STRENGTH),
            ("logs".to_owned(), WORD_STRENGTH)
        ]
    );
    // A quoted name alone is a name.
    assert_eq!(keys("\"header_read_timeout\"").len(), 1);
}

mod impls;
mod modules_apart;
mod public_paths;
mod written_apart;
