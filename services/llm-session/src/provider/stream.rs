//! Server-sent events and the assembly of a streamed completion: `data:` lines split into
//! events, chunks folded into text, tool calls assembled by index, usage and finish reason kept.

use std::collections::BTreeMap;

use super::wire::{Chunk, WireFunction, WireToolCall, WireUsage};

/// Splits a byte stream into SSE `data` payloads.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buffer: Vec<u8>,
    data: Vec<String>,
}

impl SseDecoder {
    /// Feeds bytes; returns the payloads of the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buffer.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    out.push(self.data.join("\n"));
                    self.data.clear();
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                self.data
                    .push(value.strip_prefix(' ').unwrap_or(value).to_owned());
            }
            // `:` comments (OpenRouter's keep-alives), `event:`, `id:` and `retry:` are ignored.
        }
        out
    }

    /// Bytes held for events not complete yet.
    pub fn buffered(&self) -> usize {
        self.buffer.len() + self.data.iter().map(String::len).sum::<usize>()
    }

    /// The payload of an event the stream ended in without its blank line.
    pub fn finish(&mut self) -> Option<String> {
        let rest = String::from_utf8_lossy(&std::mem::take(&mut self.buffer)).into_owned();
        if let Some(value) = rest.trim_end().strip_prefix("data:") {
            self.data.push(value.trim_start().to_owned());
        }
        (!self.data.is_empty()).then(|| std::mem::take(&mut self.data).join("\n"))
    }
}

/// A tool call as assembled from its fragments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AssembledCall {
    /// Provider's call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments JSON text.
    pub arguments: String,
}

impl AssembledCall {
    /// The call as it goes back into the history.
    pub fn to_wire(&self) -> WireToolCall {
        WireToolCall {
            id: self.id.clone(),
            kind: "function".to_owned(),
            function: WireFunction {
                name: self.name.clone(),
                arguments: self.arguments.clone(),
            },
        }
    }
}

/// A finished completion.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Completion {
    /// Assistant text.
    pub text: String,
    /// Tool calls in index order.
    pub tool_calls: Vec<AssembledCall>,
    /// `stop`, `tool_calls`, `length`, ...
    pub finish_reason: String,
    /// Usage, when reported.
    pub usage: Option<WireUsage>,
    /// Model that answered.
    pub model: String,
}

/// Folds chunks into a [`Completion`].
#[derive(Debug, Default)]
pub struct Assembler {
    text: String,
    calls: BTreeMap<u32, AssembledCall>,
    finish_reason: Option<String>,
    usage: Option<WireUsage>,
    model: String,
}

impl Assembler {
    /// Adds a chunk; returns its text fragment, if any.
    pub fn push(&mut self, chunk: Chunk) -> Option<String> {
        if let Some(m) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = m;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        let mut text = String::new();
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(t) = choice.delta.content {
                text.push_str(&t);
            }
            for fragment in choice.delta.tool_calls {
                let call = self.calls.entry(fragment.index).or_default();
                if let Some(id) = fragment.id.filter(|i| !i.is_empty()) {
                    call.id = id;
                }
                if let Some(f) = fragment.function {
                    if let Some(name) = f.name {
                        call.name.push_str(&name);
                    }
                    if let Some(args) = f.arguments {
                        call.arguments.push_str(&args);
                    }
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
        }
        self.text.push_str(&text);
        (!text.is_empty()).then_some(text)
    }

    /// Bytes of text, tool names and tool arguments so far.
    pub fn output_bytes(&self) -> usize {
        self.text.len()
            + self
                .calls
                .values()
                .map(|c| c.name.len() + c.arguments.len())
                .sum::<usize>()
    }

    /// Whether a finish reason arrived.
    pub fn finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// The completion.
    pub fn finish(self) -> Completion {
        let tool_calls: Vec<AssembledCall> = self.calls.into_values().collect();
        let finish_reason = self.finish_reason.unwrap_or_else(|| {
            if tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }
            .to_owned()
        });
        Completion {
            text: self.text,
            tool_calls,
            finish_reason,
            usage: self.usage,
            model: self.model,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_reads_and_comments_are_handled() {
        let mut d = SseDecoder::default();
        assert!(
            d.feed(b": OPENROUTER PROCESSING\n\ndata: {\"a\"")
                .is_empty()
        );
        assert_eq!(
            d.feed(b":1}\r\n\r\ndata: [DONE]\n\n"),
            vec!["{\"a\":1}", "[DONE]"]
        );
        assert_eq!(d.feed(b"data: x\ndata: y\n\n"), vec!["x\ny"]);
        assert!(d.feed(b"data: tail").is_empty());
        assert_eq!(d.finish().as_deref(), Some("tail"));
    }

    fn chunk(json: &str) -> Chunk {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn tool_calls_are_assembled_by_index_across_chunks() {
        let mut a = Assembler::default();
        a.push(chunk(r#"{"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","type":"function","function":{"name":"list_dir","arguments":"{\"pa"}}]}}]}"#));
        a.push(chunk(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"read_file","arguments":""}}]}}]}"#));
        a.push(chunk(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"file\":\"a"}},{"index":1,"function":{"arguments":"th\":\"src\"}"}}]}}]}"#));
        a.push(chunk(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":".rs\"}"}}]},"finish_reason":"tool_calls"}]}"#));
        a.push(chunk(r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#));
        assert_eq!(
            a.finish(),
            Completion {
                text: String::new(),
                tool_calls: vec![
                    AssembledCall {
                        id: "c1".into(),
                        name: "read_file".into(),
                        arguments: r#"{"file":"a.rs"}"#.into()
                    },
                    AssembledCall {
                        id: "c2".into(),
                        name: "list_dir".into(),
                        arguments: r#"{"path":"src"}"#.into()
                    },
                ],
                finish_reason: "tool_calls".into(),
                usage: Some(WireUsage {
                    prompt_tokens: 10,
                    completion_tokens: 5
                }),
                model: "m".into(),
            }
        );
    }

    #[test]
    fn text_deltas_are_returned_and_joined() {
        let mut a = Assembler::default();
        assert_eq!(
            a.push(chunk(
                r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#
            )),
            None
        );
        assert_eq!(
            a.push(chunk(
                r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#
            ))
            .as_deref(),
            Some("Hel")
        );
        a.push(chunk(
            r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}"#,
        ));
        assert!(a.finished());
        let c = a.finish();
        assert_eq!(
            (c.text.as_str(), c.finish_reason.as_str()),
            ("Hello", "stop")
        );
    }
}
