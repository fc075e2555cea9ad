//! What every server answers before a handler runs: calls without the internal token are
//! UNAUTHENTICATED (health and reflection stay open), the token travels with calls to the next
//! service, and a body that is not the method's message is INVALID_ARGUMENT, not INTERNAL.

use bytes::{Buf as _, BufMut as _, Bytes};
use ploke_proto::tools::v1::tool_executor_client::ToolExecutorClient;
use ploke_proto::tools::v1::{ListEditsRequest, ListEditsResponse};
use ploke_runtime::config::{InternalConfig, LimitsConfig, Secret};
use ploke_runtime::internal::{HEADER, InternalTokens};
use ploke_runtime::probe::{ReflectionVersion, health, reflected_services};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_health::pb::health_check_response::ServingStatus;

use super::fixtures::{channel, start, start_with, telemetry};

const OLD: &str = "0123456789abcdef-old-token";
const NEW: &str = "0123456789abcdef-new-token";

fn internal(tokens: &[&str]) -> InternalConfig {
    InternalConfig {
        tokens: tokens.iter().map(|t| Secret::new(*t)).collect(),
        ..InternalConfig::default()
    }
}

fn with_token(token: Option<&str>) -> Request<ListEditsRequest> {
    let mut r = Request::new(ListEditsRequest::default());
    if let Some(t) = token {
        r.metadata_mut().insert(HEADER, t.parse().unwrap());
    }
    r
}

async fn list_edits(ch: &Channel, token: Option<&str>) -> Result<ListEditsResponse, Status> {
    ToolExecutorClient::new(ch.clone())
        .list_edits(with_token(token))
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn a_backend_refuses_calls_without_its_internal_token_but_not_probes() {
    telemetry();
    // Mid-rotation: the backend accepts the new and the old token.
    let server = start_with(None, true, LimitsConfig::default(), &internal(&[NEW, OLD])).await;
    let ch = channel(&server.url).await;
    let refused = |s: Status| (s.code(), s.message().to_owned());
    assert_eq!(
        refused(list_edits(&ch, None).await.unwrap_err()),
        (
            Code::Unauthenticated,
            "missing internal token (x-ploke-internal-token): this backend answers other ploke \
             services only; clients call the gateway"
                .to_owned()
        )
    );
    let wrong = "0123456789abcdef-not-the-token";
    let s = list_edits(&ch, Some(wrong)).await.unwrap_err();
    assert_eq!(
        refused(s.clone()),
        (
            Code::Unauthenticated,
            "invalid internal token (x-ploke-internal-token)".to_owned()
        )
    );
    assert!(!format!("{s:?}").contains(wrong), "{s:?}");
    for token in [NEW, OLD] {
        assert_eq!(
            list_edits(&ch, Some(token)).await.unwrap().proposals.len(),
            1
        );
    }
    assert_eq!(
        health(ch.clone(), "ploke.tools.v1.ToolExecutor")
            .await
            .unwrap(),
        ServingStatus::Serving
    );
    let listed = reflected_services(ch, ReflectionVersion::V1).await.unwrap();
    assert!(listed.contains(&"ploke.tools.v1.ToolExecutor".to_owned()));
    server.shutdown.trigger();
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_internal_token_travels_with_calls_to_the_next_service() {
    telemetry();
    let backend = start_with(None, true, LimitsConfig::default(), &internal(&[NEW])).await;
    // The caller sends the first of its tokens, NEW, and accepts OLD as well.
    let caller = start_with(
        Some(&backend.url),
        true,
        LimitsConfig::default(),
        &internal(&[NEW, OLD]),
    )
    .await;
    let via = list_edits(&channel(&caller.url).await, Some(OLD))
        .await
        .unwrap();
    assert_eq!(via.proposals.len(), 1);
    // A caller with another token is refused by the backend.
    let stranger = start_with(
        Some(&backend.url),
        true,
        LimitsConfig::default(),
        &internal(&[OLD]),
    )
    .await;
    let s = list_edits(&channel(&stranger.url).await, Some(OLD))
        .await
        .unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (
            Code::Unauthenticated,
            "invalid internal token (x-ploke-internal-token)"
        )
    );
    for s in [stranger, caller, backend] {
        s.shutdown.trigger();
        s.task.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn the_tokens_debug_shows_only_their_count() {
    let t = InternalTokens::load(&internal(&[NEW, OLD])).unwrap();
    assert_eq!(format!("{t:?}"), "InternalTokens { count: 2 }");
    assert!(!format!("{:?}", internal(&[NEW])).contains(NEW));
}

/// Sends and receives message bodies as they are: the bytes of a request no generated client
/// would send.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl Encoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Self;
    type Decoder = Self;

    fn encoder(&mut self) -> Self {
        *self
    }

    fn decoder(&mut self) -> Self {
        *self
    }
}

pub(super) async fn raw(
    ch: &Channel,
    path: &'static str,
    body: &'static [u8],
    stream: bool,
) -> Status {
    let mut grpc = tonic::client::Grpc::new(ch.clone());
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static(path);
    let request = Request::new(Bytes::from_static(body));
    if stream {
        grpc.server_streaming(request, path, RawCodec)
            .await
            .map(|_| ())
            .unwrap_err()
    } else {
        grpc.unary(request, path, RawCodec)
            .await
            .map(|_| ())
            .unwrap_err()
    }
}

#[tokio::test]
async fn undecodable_requests_are_invalid_argument() {
    telemetry();
    let server = start(None, true, LimitsConfig::default()).await;
    let ch = channel(&server.url).await;
    let list = "/ploke.tools.v1.ToolExecutor/ListEdits";
    let execute = "/ploke.tools.v1.ToolExecutor/ExecuteTool";
    // Field 1 (a string) sent as a varint; a length that runs past the end; a broken varint.
    for (path, body, stream, detail) in [
        (
            list,
            &[0x08, 0x01][..],
            false,
            "failed to decode Protobuf message: ListEditsRequest.session_id: invalid wire type: \
             Varint (expected LengthDelimited)",
        ),
        (
            execute,
            &[0x12, 0x10, 0x41][..],
            true,
            "failed to decode Protobuf message: ExecuteToolRequest.workspace_root: buffer underflow",
        ),
        (
            list,
            &[
                0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ][..],
            false,
            "failed to decode Protobuf message: ListEditsRequest.limit: invalid varint",
        ),
    ] {
        let s = raw(&ch, path, body, stream).await;
        assert_eq!(
            (s.code(), s.message().to_owned()),
            (
                Code::InvalidArgument,
                format!("the request is not a valid message for {path}: {detail}")
            )
        );
    }
    // A valid body still reaches the handler (which this fixture does not implement).
    let s = raw(&ch, execute, &[], true).await;
    assert_eq!(s.code(), Code::Unimplemented);
    server.shutdown.trigger();
    server.task.await.unwrap().unwrap();
}
