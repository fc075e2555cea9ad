//! A trait impl named by its type and its trait ("Display for Error") finds its methods.

use super::*;

/// A method of `module` with the qualified name `qualname` (`<Error as fmt::Display>::fmt`).
fn method(id: u64, module: &str, qualname: &str) -> ItemRecord {
    let mut record = item(id, &format!("{module}::{qualname}"), Kind::Method);
    record.item.qualname = qualname.to_owned();
    record
}

/// `found`, scores to four decimals.
fn rounded(found: Vec<(u64, f32)>) -> Vec<(u64, f32)> {
    found
        .into_iter()
        .map(|(id, s)| (id, (s * 1e4).round() / 1e4))
        .collect()
}

#[test]
fn a_type_and_a_trait_written_together_find_the_methods_of_that_impl() {
    let items = [
        item(1, "crate::error::Error", Kind::Struct),
        method(2, "crate::error", "<Error as fmt::Display>::fmt"),
        method(3, "crate::error", "<Error as fmt::Debug>::fmt"),
        method(4, "crate::error", "Error::description"),
        method(5, "crate::other", "<Other as fmt::Display>::fmt"),
    ];
    let index = indexed(&items);
    // "Display" opens the sentence (alone a plain word, 0.1), but as one impl with "Error"
    // (capitalised, 0.3) it counts as capitalised too: the pair counts 0.6, for the one method
    // of that impl. The type alone counts 0.3, halved as no function. Neither the other
    // trait's impl of the type nor the trait's impl for another type is found.
    let want = vec![
        (2, CAPITALISED_STRENGTH + CAPITALISED_STRENGTH),
        (1, CAPITALISED_STRENGTH * NOT_A_FUNCTION),
    ];
    assert_eq!(
        rounded(found(
            &index,
            &items,
            "Display for Error shows better info",
            ALL
        )),
        rounded(want)
    );
    // Either order, written as code or not; the other trait when it is the one written.
    assert_eq!(
        rounded(found(
            &index,
            &items,
            "refactor: update Debug for Error to output the kind",
            ALL
        ))[0]
            .0,
        3
    );
    assert_eq!(
        rounded(found(
            &index,
            &items,
            "the `Error` `Display` impl drops the source",
            ALL
        ))[0]
            .0,
        2
    );
    // Filters apply: with the impl filtered out, only the type is left.
    assert_eq!(
        found(
            &index,
            &items,
            "Display for Error shows better info",
            &|id| id != 2
        )
        .into_iter()
        .map(|(id, _)| id)
        .collect::<Vec<_>>(),
        vec![1]
    );
}

#[test]
fn a_method_written_outranks_the_other_methods_of_the_impl_the_query_names() {
    let items = [
        item(1, "crate::task::local::LocalSet", Kind::Struct),
        method(2, "crate::task::local", "<LocalSet as Drop>::drop"),
        method(3, "crate::task::local", "LocalSet::block_on"),
        method(4, "crate::codec", "<Buffer<T> as Sink<T>>::poll_ready"),
        method(5, "crate::codec", "<Buffer<T> as Sink<T>>::start_send"),
    ];
    let index = indexed(&items);
    // The type as code and the trait capitalised: the impl's one method above the type.
    let ids = |q: &str| -> Vec<u64> {
        found(&index, &items, q, ALL)
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    };
    assert_eq!(
        ids("task: ignore failure to set TLS in `LocalSet` Drop"),
        vec![2, 1]
    );
    // Both written as code with one of the impl's methods: that method first (its own type
    // written, x2), its sibling after it (the pair, shared by the impl's two methods).
    let q = "fix `start_send` in `Buffer`: the `Sink` impl dropped items";
    let scores = rounded(found(&index, &items, q, ALL));
    let shared_by_two = 1.0 / (1.0 + 2f32.ln());
    assert_eq!(
        scores.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        vec![5, 4]
    );
    assert_eq!(scores[1], rounded(vec![(4, shared_by_two)])[0]);
}

#[test]
fn a_type_implementing_a_trait_of_its_own_name_is_not_a_pair() {
    let items = [
        method(
            1,
            "crate::de",
            "<SeqAccess as de::SeqAccess<'de>>::next_element_seed",
        ),
        method(
            2,
            "crate::de",
            "<MapAccess as de::MapAccess<'de>>::next_key_seed",
        ),
    ];
    let index = indexed(&items);
    // Each name is both a type and a trait here; neither pair of the two is an impl.
    assert_eq!(
        found(
            &index,
            &items,
            "Reduce duplicative logic in SeqAccess and MapAccess",
            ALL
        ),
        vec![]
    );
}

#[test]
fn a_type_and_a_trait_are_an_impl_when_written_as_types_side_by_side_or_with_impl() {
    let items = [
        method(1, "crate::routing", "<Router as Service<Request>>::call"),
        method(
            2,
            "crate::routing",
            "<Router as Service<Request>>::poll_ready",
        ),
    ];
    let index = indexed(&items);
    let ids = |q: &str| -> Vec<u64> {
        let mut ids: Vec<u64> = found(&index, &items, q, ALL)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        ids.sort_unstable();
        ids
    };
    let none = Vec::<u64>::new();
    // Apart, or one of them a plain word: two things the query speaks of.
    assert_eq!(
        ids("Convert `Router` into an owned `Service` with a fixed body"),
        none
    );
    assert_eq!(
        ids("Convert the router into an owned `Service` with a fixed body"),
        none
    );
    assert_eq!(ids("Create a service from `Router`"), none);
    assert_eq!(ids("the router's `Service` impl takes a fixed body"), none);
    // Side by side, or anywhere with `impl`.
    assert_eq!(ids("make the Router Service take a fixed body"), vec![1, 2]);
    assert_eq!(
        ids("Convert the Router's `Service` impl to a fixed body"),
        vec![1, 2]
    );
}

#[test]
fn a_query_of_thousands_of_capitalised_words_still_finds_the_impl_it_names() {
    let items = [
        item(1, "crate::error::Error", Kind::Struct),
        method(2, "crate::error", "<Error as fmt::Display>::fmt"),
    ];
    let index = indexed(&items);
    // As long as a query may be (4,096 characters), nearly all of it capitalised words that
    // name nothing: the pair written in it is still read, and only it.
    let filler: String = (0..680).map(|i| format!("W{i} ")).collect();
    let query = format!("{filler}Display for Error");
    assert!(query.chars().count() <= 4096);
    let ids: Vec<u64> = found(&index, &items, &query, ALL)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, vec![2, 1]);
}

#[test]
fn a_type_also_written_with_a_path_still_names_the_impl() {
    let items = [
        item(1, "crate::error::Error", Kind::Struct),
        method(2, "crate::error", "<Error as fmt::Display>::fmt"),
        method(3, "crate::error", "<Error as fmt::Debug>::fmt"),
    ];
    let index = indexed(&items);
    // `hyper::Error` is the strongest writing of `Error` (code), and a path: "Debug for
    // Error" still says the impl. Its methods' score is the pair's, capped at a code name's.
    let written = found(
        &index,
        &items,
        "refactor(error): update Debug for Error to output 'hyper::Error'",
        ALL,
    );
    assert_eq!(written.first().map(|(id, _)| *id), Some(3), "{written:?}");
    let impl_score = written.iter().find(|(id, _)| *id == 3).map(|(_, s)| *s);
    assert_eq!(impl_score, Some(1.0), "{written:?}");
}
