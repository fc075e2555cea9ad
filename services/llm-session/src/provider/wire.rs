//! The OpenAI chat-completions wire format (what OpenAI, OpenRouter, Ollama, vLLM and
//! llama.cpp's server accept and stream): requests, messages and streamed chunks.
//!
//! Chunks are read leniently, as the servers and proxies in front of them write them: an
//! optional field may be `null` (`"tool_calls": null`, `"delta": null`), and token counts may
//! be written as floats (`10.0`). An `error` object inside the stream (OpenAI's, and
//! OpenRouter's with `finish_reason: "error"`) is kept, so the reply is not taken as complete.

use ploke_runtime::config::ProviderPreferences;
use serde::{Deserialize, Serialize};

/// One chat message as the provider sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Text; absent on an assistant message that only calls tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<WireToolCall>,
    /// The call a tool message answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A message of `role` with `text`.
    pub fn text(role: &str, text: impl Into<String>) -> Self {
        Self {
            role: role.to_owned(),
            content: Some(text.into()),
            ..Self::default()
        }
    }

    /// A tool message answering `call_id`.
    pub fn tool(call_id: &str, text: impl Into<String>) -> Self {
        Self {
            role: "tool".to_owned(),
            content: Some(text.into()),
            tool_call_id: Some(call_id.to_owned()),
            ..Self::default()
        }
    }
}

/// A tool call inside an assistant message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireToolCall {
    /// The provider's call id.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Name and arguments.
    pub function: WireFunction,
}

/// Name and JSON arguments text of a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireFunction {
    /// Tool name.
    pub name: String,
    /// Arguments as JSON text.
    pub arguments: String,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The function.
    pub function: FunctionSpec,
}

/// Name, description and JSON Schema of a tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionSpec {
    /// Tool name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
}

/// `stream_options`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StreamOptions {
    /// Ask for a final chunk with token usage.
    pub include_usage: bool,
}

/// A streaming chat-completions request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest<'a> {
    /// Model id.
    pub model: &'a str,
    /// The conversation.
    pub messages: &'a [ChatMessage],
    /// Always true.
    pub stream: bool,
    /// Usage in the last chunk.
    pub stream_options: StreamOptions,
    /// Tools, when the model may call them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<&'a [ToolSpec]>,
    /// `auto` when tools are sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'static str>,
    /// OpenRouter routing preferences.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<&'a ProviderPreferences>,
}

/// Token usage as providers report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub struct WireUsage {
    /// Prompt tokens.
    #[serde(default, deserialize_with = "count")]
    pub prompt_tokens: u32,
    /// Completion tokens.
    #[serde(default, deserialize_with = "count")]
    pub completion_tokens: u32,
}

/// One streamed chunk.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
pub struct Chunk {
    /// Model that answered.
    #[serde(default)]
    pub model: Option<String>,
    /// Choices (one here); empty in the usage chunk.
    #[serde(default, deserialize_with = "or_default")]
    pub choices: Vec<ChunkChoice>,
    /// Usage (last chunk).
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// An error the provider reports inside the stream (the reply stops there).
    #[serde(default)]
    pub error: Option<serde_json::Value>,
}

/// A streamed choice.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
pub struct ChunkChoice {
    /// Choice index.
    #[serde(default, deserialize_with = "count")]
    pub index: u32,
    /// What this chunk adds.
    #[serde(default, deserialize_with = "or_default")]
    pub delta: Delta,
    /// Set on the choice's last chunk.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// OpenRouter's error of this choice (with `finish_reason: "error"`).
    #[serde(default)]
    pub error: Option<serde_json::Value>,
}

/// Text and tool-call fragments.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
pub struct Delta {
    /// Text fragment.
    #[serde(default)]
    pub content: Option<String>,
    /// Tool-call fragments, by index.
    #[serde(default, deserialize_with = "or_default")]
    pub tool_calls: Vec<ToolCallFragment>,
}

/// A fragment of one tool call; `index` says which.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
pub struct ToolCallFragment {
    /// Position of the call in the message.
    #[serde(default, deserialize_with = "count")]
    pub index: u32,
    /// Call id (first fragment).
    #[serde(default)]
    pub id: Option<String>,
    /// Name and arguments fragments.
    #[serde(default)]
    pub function: Option<FunctionFragment>,
}

/// Name (first fragment) and a piece of the arguments text.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
pub struct FunctionFragment {
    /// Tool name.
    #[serde(default)]
    pub name: Option<String>,
    /// Piece of the arguments JSON text.
    #[serde(default)]
    pub arguments: Option<String>,
}

/// A field that may be `null`: its default then.
fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A count written as an integer, a float with nothing after the point (`10.0`) or `null`
/// (0); a negative or fractional one is an error, a huge one saturates.
fn count<'de, D>(d: D) -> Result<u32, D::Error>
where
    D: serde::Deserializer<'de>,
{
    match Option::<serde_json::Number>::deserialize(d)? {
        None => Ok(0),
        Some(n) => {
            if let Some(u) = n.as_u64() {
                return Ok(u32::try_from(u).unwrap_or(u32::MAX));
            }
            match n.as_f64() {
                Some(f) if f >= 0.0 && f.fract() == 0.0 => Ok(if f >= f64::from(u32::MAX) {
                    u32::MAX
                } else {
                    // Whole, in range: exact.
                    f as u32
                }),
                _ => Err(serde::de::Error::custom(format!(
                    "expected a count, found {n}"
                ))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_with_nulls_and_float_counts_read_as_their_defaults() {
        let chunk: Chunk = serde_json::from_str(
            r#"{"model":null,"choices":[{"index":0,"delta":{"content":"hi","tool_calls":null},
                "finish_reason":null}],"usage":{"prompt_tokens":10.0,"completion_tokens":null}}"#,
        )
        .unwrap();
        assert_eq!(
            chunk,
            Chunk {
                model: None,
                choices: vec![ChunkChoice {
                    index: 0,
                    delta: Delta {
                        content: Some("hi".into()),
                        tool_calls: vec![],
                    },
                    finish_reason: None,
                    error: None,
                }],
                usage: Some(WireUsage {
                    prompt_tokens: 10,
                    completion_tokens: 0,
                }),
                error: None,
            }
        );
        let empty: Chunk = serde_json::from_str(r#"{"choices":null,"usage":null}"#).unwrap();
        assert_eq!(empty, Chunk::default());
        let no_delta: Chunk =
            serde_json::from_str(r#"{"choices":[{"index":null,"delta":null}]}"#).unwrap();
        assert_eq!(no_delta.choices, vec![ChunkChoice::default()]);
        for bad in [r#"{"prompt_tokens":-1}"#, r#"{"prompt_tokens":1.5}"#] {
            assert!(serde_json::from_str::<WireUsage>(bad).is_err(), "{bad}");
        }
        let huge: WireUsage = serde_json::from_str(r#"{"prompt_tokens":1e12}"#).unwrap();
        assert_eq!(huge.prompt_tokens, u32::MAX);
    }
}
