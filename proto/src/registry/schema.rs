//! JSON Schema of tool arguments, derived from message descriptors, their comments and the
//! `(ploke.tools.v1.rules)` field option.

use prost_reflect::{
    EnumDescriptor, FieldDescriptor, FileDescriptor, Kind, MessageDescriptor, ReflectMessage,
};
use serde_json::{Map, Value, json};

use super::ToolRegistry;

/// Rules of one field, as read from its `(ploke.tools.v1.rules)` option.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rules {
    pub required: bool,
    pub min: Option<i64>,
    pub max: Option<i64>,
    pub min_len: Option<u32>,
    pub max_len: Option<u32>,
}

pub(crate) fn rules_of(registry: &ToolRegistry, field: &FieldDescriptor) -> Rules {
    let options = field.options();
    if !options.has_extension(&registry.rules) {
        return Rules::default();
    }
    let value = options.get_extension(&registry.rules);
    let Some(m) = value.as_message() else {
        return Rules::default();
    };
    let present = |name: &str| {
        m.descriptor()
            .get_field_by_name(name)
            .filter(|f| m.has_field(f))
            .map(|f| m.get_field(&f).into_owned())
    };
    Rules {
        required: present("required")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
        min: present("min").and_then(|v| v.as_i64()),
        max: present("max").and_then(|v| v.as_i64()),
        min_len: present("min_len").and_then(|v| v.as_u32()),
        max_len: present("max_len").and_then(|v| v.as_u32()),
    }
}

/// The leading comment of the element at `path` in `file`, trimmed, lines joined with spaces
/// (paragraphs kept).
pub(crate) fn comment_of(file: FileDescriptor, path: &[i32]) -> String {
    let proto = file.file_descriptor_proto();
    let Some(info) = proto.source_code_info.as_ref() else {
        return String::new();
    };
    info.location
        .iter()
        .find(|l| l.path == path)
        .and_then(|l| l.leading_comments.as_deref())
        .map(tidy_comment)
        .unwrap_or_default()
}

fn tidy_comment(raw: &str) -> String {
    let mut out = String::new();
    for line in raw.lines().map(str::trim) {
        if line.is_empty() {
            if !out.is_empty() && !out.ends_with("\n\n") {
                out.push_str("\n\n");
            }
            continue;
        }
        if !out.is_empty() && !out.ends_with('\n') {
            out.push(' ');
        }
        out.push_str(line);
    }
    out.trim().to_owned()
}

/// `ITEM_KIND_FUNCTION` of enum `ItemKind` → `function`.
pub(crate) fn enum_value_json_name(enum_desc: &EnumDescriptor, value_name: &str) -> String {
    let prefix = screaming_snake(enum_desc.name()) + "_";
    value_name
        .strip_prefix(&prefix)
        .unwrap_or(value_name)
        .to_ascii_lowercase()
}

/// The values of an enum a model may send: every value except the zero (`*_UNSPECIFIED`) one.
pub(crate) fn enum_choices(enum_desc: &EnumDescriptor) -> Vec<(String, i32, String)> {
    enum_desc
        .values()
        .filter(|v| v.number() != 0)
        .map(|v| {
            (
                enum_value_json_name(enum_desc, v.name()),
                v.number(),
                comment_of(v.parent_file(), v.path()),
            )
        })
        .collect()
}

fn screaming_snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// The schema of a message as a JSON object schema.
pub(crate) fn message_schema(registry: &ToolRegistry, message: &MessageDescriptor) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for field in message.fields() {
        let rules = rules_of(registry, &field);
        let mut schema = field_schema(registry, &field, &rules);
        if let Some(oneof) = real_oneof(&field) {
            let names: Vec<String> = oneof.fields().map(|f| format!("`{}`", f.name())).collect();
            append_description(
                &mut schema,
                &format!("Give exactly one of {}.", names.join(", ")),
            );
        }
        if rules.required {
            required.push(Value::String(field.name().to_owned()));
        }
        properties.insert(field.name().to_owned(), schema);
    }
    let mut object = Map::new();
    object.insert("type".into(), json!("object"));
    let description = comment_of(message.parent_file(), message.path());
    if !description.is_empty() {
        object.insert("description".into(), Value::String(description));
    }
    object.insert("properties".into(), Value::Object(properties));
    object.insert("required".into(), Value::Array(required));
    object.insert("additionalProperties".into(), Value::Bool(false));
    Value::Object(object)
}

/// The oneof a field belongs to, unless it is the synthetic oneof of a proto3 `optional`.
pub(crate) fn real_oneof(field: &FieldDescriptor) -> Option<prost_reflect::OneofDescriptor> {
    field.containing_oneof().filter(|o| !o.is_synthetic())
}

fn append_description(schema: &mut Value, extra: &str) {
    if let Value::Object(map) = schema {
        let text = match map.get("description").and_then(Value::as_str) {
            Some(d) if !d.is_empty() => format!("{d} {extra}"),
            _ => extra.to_owned(),
        };
        map.insert("description".into(), Value::String(text));
    }
}

fn field_schema(registry: &ToolRegistry, field: &FieldDescriptor, rules: &Rules) -> Value {
    let description = comment_of(field.parent_file(), field.path());
    let item = kind_schema(registry, &field.kind(), rules, !field.is_list());
    let mut schema = if field.is_list() {
        let mut map = Map::new();
        map.insert("type".into(), json!("array"));
        map.insert("items".into(), item);
        if let Some(n) = rules.min_len {
            map.insert("minItems".into(), json!(n));
        }
        if let Some(n) = rules.max_len {
            map.insert("maxItems".into(), json!(n));
        }
        Value::Object(map)
    } else {
        item
    };
    if !description.is_empty()
        && let Value::Object(map) = &mut schema
    {
        map.insert("description".into(), Value::String(description));
    }
    if let Kind::Enum(e) = field.kind() {
        let explained: Vec<String> = enum_choices(&e)
            .into_iter()
            .filter(|(_, _, c)| !c.is_empty())
            .map(|(n, _, c)| format!("`{n}`: {}", c.trim_end_matches('.')))
            .collect();
        if !explained.is_empty() {
            append_description(&mut schema, &format!("Values: {}.", explained.join("; ")));
        }
    }
    schema
}

fn kind_schema(registry: &ToolRegistry, kind: &Kind, rules: &Rules, scalar_rules: bool) -> Value {
    let mut map = Map::new();
    match kind {
        Kind::String => {
            map.insert("type".into(), json!("string"));
            if scalar_rules {
                if let Some(n) = rules.min_len {
                    map.insert("minLength".into(), json!(n));
                }
                if let Some(n) = rules.max_len {
                    map.insert("maxLength".into(), json!(n));
                }
            }
        }
        Kind::Bool => {
            map.insert("type".into(), json!("boolean"));
        }
        Kind::Int32
        | Kind::Sint32
        | Kind::Sfixed32
        | Kind::Int64
        | Kind::Sint64
        | Kind::Sfixed64 => {
            map.insert("type".into(), json!("integer"));
            if let Some(n) = rules.min {
                map.insert("minimum".into(), json!(n));
            }
            if let Some(n) = rules.max {
                map.insert("maximum".into(), json!(n));
            }
        }
        Kind::Uint32 | Kind::Fixed32 | Kind::Uint64 | Kind::Fixed64 => {
            map.insert("type".into(), json!("integer"));
            map.insert("minimum".into(), json!(rules.min.unwrap_or(0).max(0)));
            if let Some(n) = rules.max {
                map.insert("maximum".into(), json!(n));
            }
        }
        Kind::Float | Kind::Double => {
            map.insert("type".into(), json!("number"));
        }
        Kind::Bytes => {
            map.insert("type".into(), json!("string"));
            map.insert("contentEncoding".into(), json!("base64"));
        }
        Kind::Enum(e) => {
            let choices = enum_choices(e);
            map.insert("type".into(), json!("string"));
            map.insert(
                "enum".into(),
                Value::Array(choices.iter().map(|(n, _, _)| json!(n)).collect()),
            );
        }
        Kind::Message(m) => return message_schema(registry, m),
    }
    Value::Object(map)
}
