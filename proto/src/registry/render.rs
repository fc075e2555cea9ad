//! Rendering a dynamic message to JSON in the shape the parser accepts: proto field names,
//! enums as their short lowercase names, only the fields that are set.

use prost_reflect::{DynamicMessage, Kind, Value};
use serde_json::{Map, Value as Json, json};

use super::ToolRegistry;
use super::schema::enum_value_json_name;

/// The JSON form of `message`.
pub(crate) fn to_json(registry: &ToolRegistry, message: &DynamicMessage) -> Json {
    let mut object = Map::new();
    for (field, value) in message.fields() {
        let kind = field.kind();
        object.insert(field.name().to_owned(), value_json(registry, &kind, value));
    }
    Json::Object(object)
}

fn value_json(registry: &ToolRegistry, kind: &Kind, value: &Value) -> Json {
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
        Value::Message(m) => to_json(registry, m),
        Value::List(items) => Json::Array(
            items
                .iter()
                .map(|v| value_json(registry, kind, v))
                .collect(),
        ),
        Value::Map(_) => Json::Null,
    }
}
