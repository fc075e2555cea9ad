//! Relaying a session's event stream to one subscriber through a bounded buffer: the upstream
//! is read as fast as it comes, so a subscriber that stops reading never slows llm-session, the
//! turn or other subscribers. When its buffer is full its stream ends, after what was buffered,
//! with RESOURCE_EXHAUSTED naming the seq to resume from. The gateway keeps no session state.

use std::pin::Pin;
use std::time::Duration;

use futures::StreamExt as _;
use ploke_proto::session::v1::SessionEvent;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

/// A stream of relayed events.
pub(crate) type EventStream = Pin<Box<dyn Stream<Item = Result<SessionEvent, Status>> + Send>>;

/// Relays `upstream` through a buffer of `buffer` events; a full buffer is given `grace` to
/// drain (a burst, such as a replay, is not a slow reader) before the subscriber is cut off.
pub(crate) fn relay<S>(upstream: S, buffer: usize, grace: Duration, after_seq: u64) -> EventStream
where
    S: Stream<Item = Result<SessionEvent, Status>> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(buffer.max(1));
    let (end_tx, end_rx) = oneshot::channel::<Status>();
    tokio::spawn(async move {
        let _subscriber = ploke_runtime::metrics::record::Subscriber::open("gateway");
        let mut upstream = Box::pin(upstream);
        let mut last_seq = after_seq;
        loop {
            let item = tokio::select! {
                item = upstream.next() => item,
                () = tx.closed() => return,
            };
            match item {
                None => return,
                Some(Err(status)) => {
                    let _ = end_tx.send(status);
                    return;
                }
                Some(Ok(event)) => {
                    let seq = event.seq;
                    match tx.send_timeout(Ok(event), grace).await {
                        Ok(()) => last_seq = seq,
                        Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                            tracing::info!(last_seq, "slow subscriber cut off");
                            let _ = end_tx.send(Status::resource_exhausted(format!(
                                "subscriber too slow: {buffer} events unread; resume with \
                                 after_seq = {last_seq}"
                            )));
                            return;
                        }
                        Err(mpsc::error::SendTimeoutError::Closed(_)) => return,
                    }
                }
            }
        }
    });
    // Everything buffered first, then the reason the stream ended, if it did not end cleanly.
    let tail = futures::stream::once(end_rx).filter_map(|end| async move { end.ok().map(Err) });
    Box::pin(ReceiverStream::new(rx).chain(tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64) -> Result<SessionEvent, Status> {
        Ok(SessionEvent {
            seq,
            ..Default::default()
        })
    }

    #[tokio::test]
    async fn a_reader_that_keeps_up_gets_everything_and_a_clean_end() {
        let upstream = futures::stream::iter((1..=5).map(event));
        let got: Vec<_> = relay(upstream, 2, Duration::from_secs(5), 0)
            .collect()
            .await;
        let seqs: Vec<u64> = got.into_iter().map(|e| e.unwrap().seq).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
    }

    #[tokio::test]
    async fn a_full_buffer_ends_the_stream_with_the_seq_to_resume_from() {
        let (tx, rx) = mpsc::channel(16);
        let mut out = relay(ReceiverStream::new(rx), 2, Duration::from_millis(20), 10);
        for seq in 11..=14 {
            tx.try_send(event(seq)).unwrap();
        }
        // Nothing is read until the upstream has been drained into the full buffer.
        tx.closed().await;
        let mut got = Vec::new();
        while let Some(item) = out.next().await {
            got.push(
                item.map(|e| e.seq)
                    .map_err(|s| (s.code(), s.message().to_owned())),
            );
        }
        assert_eq!(
            got,
            vec![
                Ok(11),
                Ok(12),
                Err((
                    tonic::Code::ResourceExhausted,
                    "subscriber too slow: 2 events unread; resume with after_seq = 12".to_owned()
                ))
            ]
        );
    }
}
