//! Bounds on what one event may carry, so that every event fits the transport limit with room
//! to spare and `StreamEvents` works from any `after_seq`, whatever a provider or a tool sent.
//!
//! - A user message longer than [`EventBounds::user_message`] is refused by `SendMessage`.
//! - Assistant text streams as `assistant_delta` events of at most [`EventBounds::delta`]
//!   bytes each (a provider's long fragment is split at character boundaries), so the deltas
//!   carry every byte of the reply.
//! - Any event still larger than [`EventBounds::event`] — an `assistant_message` of a long
//!   reply, a big tool result or tool arguments, a large proposal diff — is cut by
//!   [`bound_event`]: its longest strings are shortened and marked
//!   `…[truncated: KEPT of TOTAL bytes kept]`, and very long lists shortened, until it fits.
//!   The model and the history always get the whole text; only the event is bounded.

use ploke_proto::session::v1::{Notice, NoticeLevel, SessionEvent, session_event};
use prost::Message;
use prost_reflect::{DynamicMessage, MessageDescriptor, Value};

/// Largest event at the default 16 MiB transport limit.
const EVENT_MAX: usize = 2 * 1024 * 1024;
/// Largest assistant delta.
const DELTA_MAX: usize = 64 * 1024;
/// Largest user message.
const USER_MESSAGE_MAX: usize = 1024 * 1024;

/// What one event may carry, derived from the transport limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventBounds {
    /// Largest encoded event.
    pub event: usize,
    /// Largest `assistant_delta` text.
    pub delta: usize,
    /// Largest `SendMessage` content.
    pub user_message: usize,
}

impl EventBounds {
    /// Bounds well below `max_message_bytes` (an eighth of it, at most 2 MiB).
    pub fn for_transport(max_message_bytes: usize) -> Self {
        let event = (max_message_bytes / 8).clamp(4096, EVENT_MAX);
        Self {
            event,
            delta: (event / 8).min(DELTA_MAX),
            user_message: (event / 2).min(USER_MESSAGE_MAX),
        }
    }
}

impl Default for EventBounds {
    fn default() -> Self {
        Self::for_transport(16 * 1024 * 1024)
    }
}

/// `text` in pieces of at most `max` bytes, split at character boundaries.
pub fn split_text(text: &str, max: usize) -> Vec<&str> {
    let max = max.max(4);
    let mut out = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut end = max;
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (piece, tail) = rest.split_at(end);
        out.push(piece);
        rest = tail;
    }
    if !rest.is_empty() || out.is_empty() {
        out.push(rest);
    }
    out
}

/// `s` cut to about `max` bytes with a marker saying how much was kept.
fn cut(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let total = s.len();
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push_str(&format!("…[truncated: {end} of {total} bytes kept]"));
}

fn shrink(message: &mut DynamicMessage, text: usize, list: usize) {
    for (_, value) in message.fields_mut() {
        shrink_value(value, text, list);
    }
}

fn shrink_value(value: &mut Value, text: usize, list: usize) {
    match value {
        Value::String(s) => cut(s, text),
        Value::Bytes(b) if b.len() > text => *b = b.slice(..text),
        Value::Message(m) => shrink(m, text, list),
        Value::List(items) => {
            items.truncate(list);
            for item in items {
                shrink_value(item, text, list);
            }
        }
        Value::Map(map) => {
            if map.len() > list {
                let mut keys: Vec<_> = map.keys().cloned().collect();
                keys.sort();
                for k in keys.into_iter().skip(list) {
                    map.remove(&k);
                }
            }
            for v in map.values_mut() {
                shrink_value(v, text, list);
            }
        }
        _ => {}
    }
}

fn descriptor() -> Option<MessageDescriptor> {
    ploke_proto::registry::ToolRegistry::global()
        .ok()?
        .pool()
        .get_message_by_name("ploke.session.v1.SessionEvent")
}

/// `event` if it fits in `max` bytes; else the same event with its longest strings (and
/// longest lists) cut until it does. Returns whether it was cut.
pub fn bound_event(event: SessionEvent, max: usize) -> (SessionEvent, bool) {
    if event.encoded_len() <= max {
        return (event, false);
    }
    let mut original = descriptor().map(DynamicMessage::new);
    if let Some(m) = original.as_mut()
        && m.transcode_from(&event).is_err()
    {
        original = None;
    }
    if let Some(original) = original {
        // Caps shrink by 4 each round; each round starts from the original so that markers
        // report the real size.
        let (mut text, mut list) = (max / 4, 4096usize);
        loop {
            let mut m = original.clone();
            shrink(&mut m, text, list);
            if m.encoded_len() <= max
                && let Ok(bounded) = m.transcode_to::<SessionEvent>()
            {
                return (bounded, true);
            }
            if text == 0 && list == 0 {
                break;
            }
            (text, list) = (text / 4, list / 4);
        }
    }
    // Not reachable with the compiled-in descriptors; keeps the bound unconditional.
    let size = event.encoded_len();
    let bounded = SessionEvent {
        event: Some(session_event::Event::Notice(Notice {
            level: NoticeLevel::Error as i32,
            text: format!("an event of {size} bytes was too large to record"),
        })),
        ..event
    };
    (bounded, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ploke_proto::session::v1::{AssistantMessage, ToolCallCompleted};
    use ploke_proto::tools::v1::{ListDirResult, ReadFileResult, ToolResult, tool_result};

    #[test]
    fn text_is_split_at_character_boundaries() {
        let text = "é".repeat(10); // 20 bytes
        let pieces = split_text(&text, 5);
        assert!(pieces.iter().all(|p| p.len() <= 5));
        assert_eq!(pieces.concat(), text);
        assert_eq!(split_text("", 5), vec![""]);
        assert_eq!(split_text("abc", 5), vec!["abc"]);
    }

    #[test]
    fn bounds_follow_the_transport_limit() {
        let b = EventBounds::default();
        assert_eq!(
            (b.event, b.delta, b.user_message),
            (2 << 20, 64 << 10, 1 << 20)
        );
        let small = EventBounds::for_transport(1 << 20);
        assert_eq!(
            (small.event, small.delta, small.user_message),
            (128 << 10, 16 << 10, 64 << 10)
        );
    }

    #[test]
    fn a_long_assistant_message_is_cut_with_a_marker() {
        let text = "x".repeat(20 << 20);
        let event = SessionEvent {
            seq: 7,
            session_id: "s".into(),
            event: Some(session_event::Event::AssistantMessage(AssistantMessage {
                text,
                finish_reason: "stop".into(),
                usage: None,
                model: "m".into(),
            })),
            ..SessionEvent::default()
        };
        let (bounded, cut) = bound_event(event, 2 << 20);
        assert!(cut);
        assert!(bounded.encoded_len() <= 2 << 20);
        let Some(session_event::Event::AssistantMessage(m)) = bounded.event else {
            panic!("{bounded:?}")
        };
        assert_eq!(
            (bounded.seq, m.finish_reason.as_str(), m.model.as_str()),
            (7, "stop", "m")
        );
        assert!(m.text.starts_with("xxx"));
        assert!(
            m.text.ends_with(&format!(
                "…[truncated: {} of {} bytes kept]",
                512 << 10,
                20 << 20
            )),
            "{}",
            &m.text[m.text.len() - 60..]
        );
    }

    #[test]
    fn tool_results_with_many_or_long_parts_fit() {
        let read = ToolCallCompleted {
            call_id: "c".into(),
            name: "read_file".into(),
            result: Some(ToolResult {
                result: Some(tool_result::Result::ReadFile(ReadFileResult {
                    content: "y".repeat(5 << 20),
                    ..ReadFileResult::default()
                })),
            }),
            duration_ms: 3,
        };
        let listing = ToolCallCompleted {
            result: Some(ToolResult {
                result: Some(tool_result::Result::ListDir(ListDirResult {
                    entries: (0..200_000)
                        .map(|i| ploke_proto::tools::v1::DirEntry {
                            name: format!("file-{i}.rs"),
                            ..Default::default()
                        })
                        .collect(),
                    ..ListDirResult::default()
                })),
            }),
            ..read.clone()
        };
        for completed in [read, listing] {
            let event = SessionEvent {
                event: Some(session_event::Event::ToolCallCompleted(completed)),
                ..SessionEvent::default()
            };
            let (bounded, cut) = bound_event(event, 256 << 10);
            assert!(cut);
            assert!(bounded.encoded_len() <= 256 << 10);
            let Some(session_event::Event::ToolCallCompleted(c)) = bounded.event else {
                panic!()
            };
            assert_eq!((c.call_id.as_str(), c.duration_ms), ("c", 3));
        }
    }

    #[test]
    fn small_events_are_untouched() {
        let event = SessionEvent {
            seq: 1,
            event: Some(session_event::Event::Notice(Notice {
                level: 1,
                text: "hi".into(),
            })),
            ..SessionEvent::default()
        };
        assert_eq!(bound_event(event.clone(), 4096), (event, false));
    }
}
