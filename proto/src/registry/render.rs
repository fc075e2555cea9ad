//! Rendering a dynamic message to JSON in the shape the parser accepts: proto field names,
//! enums as their short lowercase names, only the fields that are set (and those marked
//! `(always_shown)`, such as `found: false`). For a model, fields
//! marked `(model_omits)` are left out and times are RFC 3339 text.

use prost_reflect::{DynamicMessage, Kind, ReflectMessage as _, Value};
use serde_json::{Map, Value as Json, json};

use super::ToolRegistry;
use super::schema::enum_value_json_name;

/// Who reads the JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    /// A client: every field, in the shape of the result's JSON Schema.
    Client,
    /// A session's model: what helps it.
    Model,
}

/// The JSON form of `message`.
pub(crate) fn to_json(registry: &ToolRegistry, message: &DynamicMessage) -> Json {
    message_json(registry, message, Reader::Client)
}

/// The JSON form of `message` for a model.
pub(crate) fn to_model_json(registry: &ToolRegistry, message: &DynamicMessage) -> Json {
    message_json(registry, message, Reader::Model)
}

fn message_json(registry: &ToolRegistry, message: &DynamicMessage, reader: Reader) -> Json {
    if reader == Reader::Model && message.descriptor().full_name() == "google.protobuf.Timestamp" {
        return timestamp_text(message);
    }
    let mut object = Map::new();
    for (field, value) in message.fields() {
        let options = field.options();
        if reader == Reader::Model
            && options.has_extension(&registry.model_omits)
            && options.get_extension(&registry.model_omits).as_bool() == Some(true)
        {
            continue;
        }
        let kind = field.kind();
        object.insert(
            field.name().to_owned(),
            value_json(registry, &kind, value, reader),
        );
    }
    // Fields marked `(always_shown)` at their default (`found: false`), which `fields()` skips.
    for field in message.descriptor().fields() {
        let options = field.options();
        if !object.contains_key(field.name())
            && options.has_extension(&registry.always_shown)
            && options.get_extension(&registry.always_shown).as_bool() == Some(true)
        {
            let value = message.get_field(&field);
            object.insert(
                field.name().to_owned(),
                value_json(registry, &field.kind(), &value, reader),
            );
        }
    }
    Json::Object(object)
}

/// `google.protobuf.Timestamp` as RFC 3339 (`2026-11-25T10:00:00Z`).
fn timestamp_text(message: &DynamicMessage) -> Json {
    let get = |name: &str| {
        message
            .descriptor()
            .get_field_by_name(name)
            .map(|f| message.get_field(&f).into_owned())
    };
    let seconds = get("seconds").and_then(|v| v.as_i64()).unwrap_or(0);
    let nanos = get("nanos").and_then(|v| v.as_i32()).unwrap_or(0);
    json!(prost_types::Timestamp { seconds, nanos }.to_string())
}

fn value_json(registry: &ToolRegistry, kind: &Kind, value: &Value, reader: Reader) -> Json {
    match value {
        Value::Bool(b) => json!(b),
        Value::I32(n) => json!(n),
        Value::I64(n) => json!(n),
        Value::U32(n) => json!(n),
        Value::U64(n) => json!(n),
        Value::F32(n) => json!(n),
        Value::F64(n) => json!(n),
        Value::String(s) => json!(s),
        Value::Bytes(b) => json!(b.len()),
        Value::EnumNumber(n) => match kind {
            Kind::Enum(e) => match e.get_value(*n) {
                Some(v) => json!(enum_value_json_name(e, v.name())),
                None => json!(n),
            },
            _ => json!(n),
        },
        Value::Message(m) => message_json(registry, m, reader),
        Value::List(items) => Json::Array(
            items
                .iter()
                .map(|v| value_json(registry, kind, v, reader))
                .collect(),
        ),
        Value::Map(_) => Json::Null,
    }
}
