//! What every server answers before a handler runs: a body that is not the method's message is
//! INVALID_ARGUMENT, not INTERNAL.

use bytes::{Buf as _, BufMut as _, Bytes};
use ploke_runtime::config::LimitsConfig;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

use super::fixtures::{channel, start, telemetry};

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

async fn raw(ch: &Channel, path: &'static str, body: &'static [u8], stream: bool) -> Status {
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
