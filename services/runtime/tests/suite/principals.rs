//! The calling principal crosses service hops the way the gateway sends it: a backend trusts
//! `x-ploke-principal-bin` only from a caller that presented the internal token, makes it the
//! handler's current principal, and the next hop carries it on; an undecodable principal is
//! refused before any handler runs.

use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_proto::tools::v1::{EditProposal, GetEditDeliveryRequest};
use ploke_runtime::config::{InternalConfig, LimitsConfig, Secret};
use ploke_runtime::internal::HEADER;
use ploke_runtime::principal::{self, Principal, Role};
use tonic::{Code, Request};

use super::fixtures::{channel, start_with, telemetry};

const TOKEN: &str = "0123456789abcdef-principal-token";

fn internal() -> InternalConfig {
    InternalConfig {
        tokens: vec![Secret::new(TOKEN)],
        ..InternalConfig::default()
    }
}

fn alice() -> Principal {
    Principal {
        name: "alice".into(),
        role: Role::User,
        workspaces: vec!["app".into(), "/srv/other".into()],
        read_only: false,
    }
}

fn request(token: Option<&str>, principal: Option<&Principal>) -> Request<GetEditDeliveryRequest> {
    let mut r = Request::new(GetEditDeliveryRequest::default());
    let mut headers = std::mem::take(r.metadata_mut()).into_headers();
    if let Some(p) = principal {
        p.write_headers(&mut headers);
    }
    if let Some(t) = token {
        headers.insert(HEADER, t.parse().unwrap());
    }
    *r.metadata_mut() = tonic::metadata::MetadataMap::from_headers(headers);
    r
}

/// (owner, "role:workspaces") the last hop's handler saw.
fn seen(p: Option<EditProposal>) -> (String, String) {
    let p = p.unwrap_or_default();
    (p.owner, p.decided_by)
}

#[tokio::test]
async fn the_principal_crosses_two_hops_and_is_trusted_only_with_the_token() {
    let (exporter, provider) = telemetry();
    let b = start_with(None, true, LimitsConfig::default(), &internal()).await;
    let a = start_with(Some(&b.url), true, LimitsConfig::default(), &internal()).await;
    let mut client = ToolExecutorClient::new(channel(&a.url).await);

    // With the token: A's handler runs as alice, and its call to B carries her on.
    let r = client
        .get_edit_delivery(request(Some(TOKEN), Some(&alice())))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        seen(r.proposal),
        ("alice".to_owned(), "user:app,/srv/other".to_owned())
    );
    // Both hops' server spans name her.
    provider.force_flush().unwrap();
    let named: Vec<String> = exporter
        .get_finished_spans()
        .unwrap()
        .iter()
        .filter(|s| s.name == "ploke.tools.v1.ToolExecutor/GetEditDelivery")
        .filter_map(|s| {
            s.attributes
                .iter()
                .find(|kv| kv.key.as_str() == "enduser.id")
                .map(|kv| kv.value.to_string())
        })
        .collect();
    assert_eq!(named, vec!["alice".to_owned(), "alice".to_owned()]);
    // Without a principal: a trusted service's own call, nobody in particular.
    let r = client
        .get_edit_delivery(request(Some(TOKEN), None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(seen(r.proposal), (String::new(), String::new()));
    // A principal without the token is never read: the call is refused first.
    let s = client
        .get_edit_delivery(request(None, Some(&alice())))
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::Unauthenticated);
    // Garbage where the principal goes is refused, not ignored.
    let mut bad = request(Some(TOKEN), None);
    bad.metadata_mut().insert_bin(
        principal::HEADER,
        tonic::metadata::MetadataValue::from_bytes(b"\xff\x01"),
    );
    let s = client.get_edit_delivery(bad).await.unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (
            Code::Unauthenticated,
            "the x-ploke-principal-bin metadata is not an encoded ploke.common.v1.Principal"
        )
    );

    for s in [a, b] {
        s.shutdown.trigger();
        s.task.await.unwrap().unwrap();
    }
}
