//! Fitting the history into the model's context window: tokens counted with tiktoken for
//! OpenAI-family models (chars/4 otherwise); the system prompt and the current turn always go
//! in; older turns are dropped whole, oldest first; a current turn that alone is too large
//! (many tool calls in one reply) has its oldest tool results left out, each replaced by a
//! line saying so; what was dropped is reported.

use ploke_proto::session::v1::{ContextPlan, DroppedMessage};

use crate::provider::wire::ChatMessage;
use crate::store::{SessionStore, StoreError, StoredMessage};

/// Counts tokens the way the model's tokenizer does, or approximately.
#[derive(Clone, Copy)]
pub struct TokenCounter {
    bpe: Option<&'static tiktoken_rs::CoreBPE>,
    name: &'static str,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl TokenCounter {
    /// The counter for `model` (a provider prefix such as `openai/` is ignored).
    pub fn for_model(model: &str) -> Self {
        use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};
        let bare = model.rsplit('/').next().unwrap_or(model);
        match get_tokenizer(bare) {
            Some(Tokenizer::O200kBase | Tokenizer::O200kHarmony) => Self {
                bpe: Some(tiktoken_rs::o200k_base_singleton()),
                name: "o200k_base",
            },
            Some(Tokenizer::Cl100kBase) => Self {
                bpe: Some(tiktoken_rs::cl100k_base_singleton()),
                name: "cl100k_base",
            },
            _ => Self {
                bpe: None,
                name: "chars/4",
            },
        }
    }

    /// The tokenizer's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Tokens of `text`.
    pub fn count(&self, text: &str) -> u32 {
        let n = match self.bpe {
            Some(bpe) => bpe.encode_with_special_tokens(text).len(),
            None => text.chars().count().div_ceil(4),
        };
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Tokens of one message, with the per-message overhead of the chat format.
    pub fn message(&self, m: &ChatMessage) -> u32 {
        let mut n = 4 + self.count(m.content.as_deref().unwrap_or(""));
        for c in &m.tool_calls {
            n += 4 + self.count(&c.function.name) + self.count(&c.function.arguments);
        }
        n
    }
}

/// The messages of one request and what went into choosing them.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// System prompt, then history.
    pub messages: Vec<ChatMessage>,
    /// The plan to report.
    pub plan: ContextPlan,
}

/// Fits `system` (always kept), `history` (older turns dropped whole, oldest first; the
/// turn `current_parent` always kept, its oldest tool results left out while it does not fit)
/// and `tools_tokens` into `window - reserve`.
pub fn fit(
    counter: &TokenCounter,
    system: &[ChatMessage],
    history: &[StoredMessage],
    current_parent: &str,
    tools_tokens: u32,
    window: u32,
    reserve: u32,
) -> Fitted {
    let budget = window.saturating_sub(reserve);
    let fixed: u32 = system.iter().map(|m| counter.message(m)).sum::<u32>() + tools_tokens;
    // Turns in order, each a run of messages with one parent_id.
    let mut turns: Vec<Vec<(&StoredMessage, u32)>> = Vec::new();
    for m in history {
        let tokens = counter.message(&m.message);
        match turns.last_mut() {
            Some(t) if t[0].0.parent_id == m.parent_id => t.push((m, tokens)),
            _ => turns.push(vec![(m, tokens)]),
        }
    }
    let cost = |t: &Vec<(&StoredMessage, u32)>| t.iter().map(|(_, n)| *n).sum::<u32>();
    let mut used = fixed;
    let mut keep = vec![false; turns.len()];
    // The current turn first, then older turns newest first while they fit.
    for (i, t) in turns.iter().enumerate().rev() {
        let is_current = t[0].0.parent_id == current_parent;
        if is_current || used + cost(t) <= budget {
            keep[i] = true;
            used += cost(t);
        } else {
            break;
        }
    }
    // Tool results of the current turn left out, oldest first, while it does not fit.
    let mut left_out = std::collections::HashMap::new();
    if used > budget
        && let Some(current) = turns.iter().find(|t| t[0].0.parent_id == current_parent)
    {
        for (m, tokens) in current.iter().filter(|(m, _)| m.message.role == "tool") {
            if used <= budget {
                break;
            }
            let stub = ChatMessage {
                content: Some(format!(
                    "[this tool result ({tokens} tokens) was left out to fit the context window; \
                     call the tool again, asking for less, if you still need it]"
                )),
                ..m.message.clone()
            };
            let smaller = counter.message(&stub);
            if smaller < *tokens {
                used -= tokens - smaller;
                left_out.insert(m.seq, stub);
            }
        }
    }
    let mut messages = system.to_vec();
    let mut dropped = Vec::new();
    let mut included = 0;
    for (t, kept) in turns.iter().zip(&keep) {
        for (m, tokens) in t {
            if let Some(stub) = left_out.remove(&m.seq) {
                messages.push(stub);
                included += 1;
                dropped.push(DroppedMessage {
                    seq: m.seq,
                    role: m.message.role.clone(),
                    tokens: *tokens,
                });
            } else if *kept {
                messages.push(m.message.clone());
                included += 1;
            } else {
                dropped.push(DroppedMessage {
                    seq: m.seq,
                    role: m.message.role.clone(),
                    tokens: *tokens,
                });
            }
        }
    }
    Fitted {
        messages,
        plan: ContextPlan {
            context_window: window,
            reply_reserve: reserve,
            prompt_tokens: used,
            tokenizer: counter.name().to_owned(),
            messages_included: included,
            dropped,
            auto_context: Vec::new(),
            auto_context_tokens: 0,
        },
    }
}

/// Answers, with `text`, every tool call of turn `parent_id` that has no tool message yet, so
/// that the history stays a well-formed request (a cancelled, interrupted or cut-off turn).
pub async fn answer_open_calls(
    store: &dyn SessionStore,
    session_id: &str,
    parent_id: &str,
    text: &str,
) -> Result<(), StoreError> {
    let history = store.messages(session_id).await?;
    // Only the turn's last step can be open (each step's calls are answered before the next):
    // its calls minus the tool messages after it (ids are not unique across steps everywhere).
    let turn: Vec<&StoredMessage> = history
        .iter()
        .filter(|m| m.parent_id == parent_id)
        .collect();
    let Some(last) = turn.iter().rposition(|m| !m.message.tool_calls.is_empty()) else {
        return Ok(());
    };
    let open = answers_missing(turn[last], turn[last + 1..].iter().copied(), text);
    if open.is_empty() {
        return Ok(());
    }
    store.append_messages(session_id, &open).await
}

/// Tool messages answering, with `text`, each call of `step` that none of `after` answers.
fn answers_missing<'a>(
    step: &StoredMessage,
    after: impl IntoIterator<Item = &'a StoredMessage>,
    text: &str,
) -> Vec<StoredMessage> {
    let answered: Vec<&str> = after
        .into_iter()
        .filter_map(|m| m.message.tool_call_id.as_deref())
        .collect();
    step.message
        .tool_calls
        .iter()
        .filter(|c| !answered.contains(&c.id.as_str()))
        .map(|c| StoredMessage {
            seq: step.seq,
            parent_id: step.parent_id.clone(),
            message: ChatMessage::tool(&c.id, text),
        })
        .collect()
}

/// What the model reads for a call [`close_open_calls`] answers.
pub const NEVER_ANSWERED: &str = "not run: the turn ended before this call was answered";

/// Answers, in `history` as loaded, every tool call that has no tool message after it with
/// [`NEVER_ANSWERED`], placed with the step's other answers. A turn that ends early answers its
/// open calls in the store ([`answer_open_calls`]); when that write fails (the store went away
/// with the turn) the history keeps them open, and every provider refuses a request holding a
/// call without its answer: the session could never take another turn. Between two steps no
/// call is open, so anything found here is such a leftover.
pub fn close_open_calls(history: &mut Vec<StoredMessage>) {
    let mut i = 0;
    while i < history.len() {
        if history[i].message.tool_calls.is_empty() {
            i += 1;
            continue;
        }
        let step = &history[i];
        // The step's answers follow it, before any other message of the turn or the next.
        let answers_end = history[i + 1..]
            .iter()
            .position(|m| m.message.tool_call_id.is_none() || m.parent_id != step.parent_id)
            .map_or(history.len(), |n| i + 1 + n);
        let open = answers_missing(step, &history[i + 1..answers_end], NEVER_ANSWERED);
        let added = open.len();
        history.splice(answers_end..answers_end, open);
        i = answers_end + added;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(seq: u64, parent: &str, role: &str, text: &str) -> StoredMessage {
        StoredMessage {
            seq,
            parent_id: parent.into(),
            message: ChatMessage::text(role, text),
        }
    }

    #[test]
    fn known_models_use_tiktoken_and_others_chars_over_four() {
        assert_eq!(TokenCounter::for_model("gpt-4o-mini").name(), "o200k_base");
        assert_eq!(
            TokenCounter::for_model("openai/gpt-4.1").name(),
            "o200k_base"
        );
        assert_eq!(TokenCounter::for_model("gpt-4").name(), "cl100k_base");
        let other = TokenCounter::for_model("qwen2.5-coder:7b");
        assert_eq!((other.name(), other.count("abcdefghi")), ("chars/4", 3));
        assert_eq!(TokenCounter::for_model("gpt-4o").count("hello world"), 2);
    }

    #[test]
    fn older_turns_are_dropped_whole_and_the_current_turn_kept() {
        let counter = TokenCounter::for_model("unknown");
        let long = "x".repeat(400); // 100 tokens + 4
        let history = vec![
            stored(1, "t1", "user", &long),
            stored(2, "t1", "assistant", &long),
            stored(3, "t2", "user", &long),
            stored(4, "t2", "assistant", &long),
            stored(5, "t3", "user", &long),
        ];
        let system = vec![ChatMessage::text("system", "sys")]; // 1 + 4
        // Budget 400: system 5 + current 104 + t2 208 = 317 fits; t1 would not.
        let f = fit(&counter, &system, &history, "t3", 0, 500, 100);
        assert_eq!(f.messages.len(), 4);
        assert_eq!(f.plan.messages_included, 3);
        assert_eq!(
            f.plan.dropped,
            vec![
                DroppedMessage {
                    seq: 1,
                    role: "user".into(),
                    tokens: 104
                },
                DroppedMessage {
                    seq: 2,
                    role: "assistant".into(),
                    tokens: 104
                },
            ]
        );
        assert_eq!(
            (f.plan.prompt_tokens, f.plan.tokenizer.as_str()),
            (317, "chars/4")
        );
        // Even a current turn over budget is sent whole.
        let f = fit(&counter, &system, &history, "t3", 0, 50, 40);
        assert_eq!((f.messages.len(), f.plan.dropped.len()), (2, 4));
    }

    #[test]
    fn a_current_turn_too_large_leaves_out_its_oldest_tool_results() {
        let counter = TokenCounter::for_model("unknown");
        let result = "r".repeat(4000); // 1,000 tokens + 4
        let mut history = vec![stored(1, "t1", "user", "question")];
        let mut calls = ChatMessage::text("assistant", "");
        calls.tool_calls = (0..3)
            .map(|i| crate::provider::wire::WireToolCall {
                id: format!("c{i}"),
                kind: "function".into(),
                function: crate::provider::wire::WireFunction {
                    name: "read_file".into(),
                    arguments: "{}".into(),
                },
            })
            .collect();
        history.push(StoredMessage {
            seq: 2,
            parent_id: "t1".into(),
            message: calls,
        });
        for i in 0..3u64 {
            history.push(StoredMessage {
                seq: 3 + i,
                parent_id: "t1".into(),
                message: ChatMessage::tool(&format!("c{i}"), result.clone()),
            });
        }
        // Room for about one result and a half: the two oldest are left out.
        let f = fit(&counter, &[], &history, "t1", 0, 1700, 100);
        let stubbed: Vec<(u64, u32)> = f.plan.dropped.iter().map(|d| (d.seq, d.tokens)).collect();
        assert_eq!(stubbed, vec![(3, 1004), (4, 1004)]);
        assert_eq!(f.messages.len(), 5);
        assert!(
            f.messages[2].content.as_deref().unwrap().starts_with(
                "[this tool result (1004 tokens) was left out to fit the context window"
            )
        );
        assert_eq!(f.messages[2].tool_call_id.as_deref(), Some("c0"));
        assert_eq!(f.messages[4].content.as_deref(), Some(result.as_str()));
        assert!(f.plan.prompt_tokens <= 1600, "{}", f.plan.prompt_tokens);
    }

    fn calls(seq: u64, parent: &str, ids: &[&str]) -> StoredMessage {
        let mut message = ChatMessage::text("assistant", "");
        message.tool_calls = ids
            .iter()
            .map(|id| crate::provider::wire::WireToolCall {
                id: (*id).into(),
                kind: "function".into(),
                function: crate::provider::wire::WireFunction {
                    name: "read_file".into(),
                    arguments: "{}".into(),
                },
            })
            .collect();
        StoredMessage {
            seq,
            parent_id: parent.into(),
            message,
        }
    }

    fn answer(seq: u64, parent: &str, id: &str, text: &str) -> StoredMessage {
        StoredMessage {
            seq,
            parent_id: parent.into(),
            message: ChatMessage::tool(id, text),
        }
    }

    #[test]
    fn calls_left_open_by_an_earlier_turn_are_answered_in_the_request() {
        // t1 ended with its store gone: c2 and c3 were never answered, nor closed.
        let mut history = vec![
            stored(1, "t1", "user", "q1"),
            calls(2, "t1", &["c1"]),
            answer(3, "t1", "c1", "r1"),
            calls(4, "t1", &["c2", "c3"]),
            answer(5, "t1", "c2", "r2"),
            stored(7, "t2", "user", "q2"),
            calls(8, "t2", &["c4"]),
        ];
        close_open_calls(&mut history);
        assert_eq!(
            history,
            vec![
                stored(1, "t1", "user", "q1"),
                calls(2, "t1", &["c1"]),
                answer(3, "t1", "c1", "r1"),
                calls(4, "t1", &["c2", "c3"]),
                answer(5, "t1", "c2", "r2"),
                answer(4, "t1", "c3", NEVER_ANSWERED),
                stored(7, "t2", "user", "q2"),
                calls(8, "t2", &["c4"]),
                answer(8, "t2", "c4", NEVER_ANSWERED),
            ]
        );
        // A well-formed history is left as it is.
        let whole = history.clone();
        close_open_calls(&mut history);
        assert_eq!(history, whole);
    }
}
