//! Checking typed tool arguments — a `ToolCall` that arrives as protobuf, not as a model's JSON —
//! against the same `(ploke.tools.v1.rules)` the JSON parser enforces, with the same checks,
//! messages and field paths: a caller of `ExecuteTool` is held to exactly what the model is.
//!
//! Protobuf cannot tell an unset string, list or number from its zero value. Presence rules
//! apply where presence is known (messages, `optional` fields, oneofs); a required string or
//! list whose rules forbid it to be empty is missing when empty (`MISSING_FIELD`, as an absent
//! key in JSON); otherwise a string's or list's length rules apply to its value, set or not, and
//! a number's when it is set.

use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, ReflectMessage, Value};

use super::ToolRegistry;
use super::error::{ArgError, ArgErrorKind};
use super::parse::{check_len, check_range, join};
use super::schema::{Rules, enum_choices, rules_of};

/// Checks `message` (the arguments of one tool, or a message inside them) at `path`.
pub(crate) fn check_message(
    registry: &ToolRegistry,
    message: &DynamicMessage,
    path: &str,
) -> Result<(), ArgError> {
    let desc = message.descriptor();
    for field in desc.fields() {
        let field_path = join(path, field.name());
        let rules = rules_of(registry, &field);
        check_field(registry, message, &field, &rules, &field_path)?;
    }
    for oneof in desc.oneofs().filter(|o| !o.is_synthetic()) {
        if !oneof.fields().any(|f| message.has_field(&f)) {
            let names: Vec<String> = oneof.fields().map(|f| f.name().to_owned()).collect();
            return Err(ArgError::new(
                ArgErrorKind::MissingField,
                &join(path, &names.join("|")),
                format!("give exactly one of: {}", names.join(", ")),
            ));
        }
    }
    Ok(())
}

fn check_field(
    registry: &ToolRegistry,
    message: &DynamicMessage,
    field: &FieldDescriptor,
    rules: &Rules,
    path: &str,
) -> Result<(), ArgError> {
    let value = message.get_field(field);
    let empty_forbidden = rules.required && rules.min_len.is_some_and(|n| n > 0);
    let missing = || {
        ArgError::new(
            ArgErrorKind::MissingField,
            path,
            "required field is missing",
        )
    };
    if field.is_list() {
        let items = value.as_list().unwrap_or_default();
        if items.is_empty() && empty_forbidden {
            return Err(missing());
        }
        check_len(items.len(), rules, path, "items")?;
        for (i, item) in items.iter().enumerate() {
            check_single(
                registry,
                &field.kind(),
                rules,
                item,
                &format!("{path}[{i}]"),
                false,
            )?;
        }
        return Ok(());
    }
    if field.is_map() {
        return Err(ArgError::internal(format!(
            "map field `{path}` is not supported"
        )));
    }
    let present = message.has_field(field);
    if field.supports_presence() && !present {
        if rules.required {
            return Err(missing());
        }
        return Ok(());
    }
    if empty_forbidden && value.as_str() == Some("") {
        return Err(missing());
    }
    // A string's length rules hold for its value even when unset (see the module comment);
    // other kinds are checked when set.
    if present || matches!(field.kind(), Kind::String) {
        check_single(registry, &field.kind(), rules, &value, path, true)?;
    }
    Ok(())
}

fn check_single(
    registry: &ToolRegistry,
    kind: &Kind,
    rules: &Rules,
    value: &Value,
    path: &str,
    scalar_rules: bool,
) -> Result<(), ArgError> {
    match (kind, value) {
        (Kind::String, Value::String(s)) if scalar_rules => {
            check_len(s.chars().count(), rules, path, "characters")?;
        }
        (_, Value::I32(n)) => check_range(i128::from(*n), rules, path)?,
        (_, Value::I64(n)) => check_range(i128::from(*n), rules, path)?,
        (_, Value::U32(n)) => check_range(i128::from(*n), rules, path)?,
        (_, Value::U64(n)) => check_range(i128::from(*n), rules, path)?,
        (Kind::Enum(e), Value::EnumNumber(n)) => {
            let choices = enum_choices(e);
            if *n != 0 && !choices.iter().any(|(_, number, _)| number == n) {
                let names: Vec<&str> = choices.iter().map(|(n, _, _)| n.as_str()).collect();
                return Err(ArgError::new(
                    ArgErrorKind::OutOfRange,
                    path,
                    format!("`{n}` is not one of: {}", names.join(", ")),
                ));
            }
        }
        (Kind::Message(_), Value::Message(m)) => check_message(registry, m, path)?,
        _ => {}
    }
    Ok(())
}
