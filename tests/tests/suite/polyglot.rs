//! A repository of several languages as the model sees it: `request_code_context` keeps the
//! languages it is asked for, each part names its item (a Python method by its dotted path),
//! `code_item_lookup` finds a Go function by its import path, and an unknown language is a
//! typed error naming the field.

use ploke_e2e::Sandbox;
use ploke_proto::common::v1::ItemKind;
use ploke_proto::tools::v1::{
    CodeItemLookupArgs, RequestCodeContextArgs, ToolErrorCode, code_item_lookup_args, tool_call,
    tool_result,
};

use crate::suite::faults::tool;

const FILES: [(&str, &str); 5] = [
    ("src/shop/__init__.py", ""),
    (
        "src/shop/cart.py",
        "class Cart:\n    \"\"\"A basket of items.\"\"\"\n\n    def add_item(self, sku, qty=1):\n        \"\"\"Adds an item to the cart.\"\"\"\n        self.items.append((sku, qty))\n",
    ),
    ("go.mod", "module example.com/shop\n"),
    (
        "pricing/total.go",
        "package pricing\n\n// CartTotal sums the prices of the items in a cart.\nfunc CartTotal(prices []int) int {\n\treturn 0\n}\n",
    ),
    (
        "src/cart.rs",
        "/// Adds an item to the cart.\npub fn add_item(cart: &mut Vec<u32>, sku: u32) {\n    cart.push(sku);\n}\n",
    ),
];

fn context(languages: &[&str]) -> tool_call::Args {
    tool_call::Args::RequestCodeContext(RequestCodeContextArgs {
        search_term: Some("add an item to the cart".into()),
        token_budget: None,
        languages: languages.iter().map(|l| (*l).to_owned()).collect(),
    })
}

#[tokio::test]
async fn the_model_asks_for_code_of_one_language_and_reads_each_item_s_name() {
    let sandbox = Sandbox::start_with(|c| c.rag_search.watch = false)
        .await
        .unwrap();
    sandbox.index_files(&FILES).await.unwrap();

    let result = tool(&sandbox, context(&["Python"])).await.unwrap();
    let Some(tool_result::Result::RequestCodeContext(python)) = result.result else {
        panic!("{result:?}")
    };
    let parts: Vec<(&str, &str, &str, ItemKind)> = python
        .parts
        .iter()
        .map(|p| {
            (
                p.file_path.as_str(),
                p.canon_path.as_str(),
                p.name.as_str(),
                p.kind(),
            )
        })
        .collect();
    assert_eq!(
        parts[0],
        (
            "src/shop/cart.py",
            "shop.cart.Cart.add_item",
            "add_item",
            ItemKind::Method
        )
    );
    assert!(parts.iter().all(|p| p.0.ends_with(".py")), "{parts:?}");
    // Without the filter the Rust function answers too.
    let result = tool(&sandbox, context(&[])).await.unwrap();
    let Some(tool_result::Result::RequestCodeContext(all)) = result.result else {
        panic!("{result:?}")
    };
    assert!(all.parts.iter().any(|p| p.file_path == "src/cart.rs"));

    let result = tool(
        &sandbox,
        tool_call::Args::CodeItemLookup(CodeItemLookupArgs {
            target: Some(code_item_lookup_args::Target::CanonPath(
                "example.com/shop/pricing.CartTotal".into(),
            )),
            kind: None,
        }),
    )
    .await
    .unwrap();
    let Some(tool_result::Result::CodeItemLookup(found)) = result.result else {
        panic!("{result:?}")
    };
    let items: Vec<(&str, &str, &str)> = found
        .items
        .iter()
        .map(|i| (i.name.as_str(), i.doc.as_str(), i.signature.as_str()))
        .collect();
    assert_eq!(
        items,
        vec![(
            "CartTotal",
            "CartTotal sums the prices of the items in a cart.",
            "func CartTotal(prices []int) int"
        )]
    );

    let error = tool(&sandbox, context(&["python", "cobol"]))
        .await
        .unwrap_err();
    assert_eq!(
        (error.code(), error.field.as_str(), error.message.as_str()),
        (
            ToolErrorCode::InvalidArgument,
            "languages[1]",
            "unknown language `cobol`"
        )
    );
    assert!(error.retry_hint.contains("python"), "{error:?}");
    sandbox.stop().await.unwrap();
}
