//! Parsing a provider's `arguments` JSON into a dynamic message of a tool's `*Args` type,
//! enforcing types, field rules, oneofs and unknown fields, with errors that name the field.

use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, Value};
use serde_json::Value as Json;

use super::ToolRegistry;
use super::error::{ArgError, ArgErrorKind};
use super::schema::{Rules, enum_choices, rules_of};

/// Parses `arguments` (a JSON object as text; empty text = `{}`) into `desc`.
pub(crate) fn parse_arguments(
    registry: &ToolRegistry,
    desc: &MessageDescriptor,
    arguments: &str,
) -> Result<DynamicMessage, ArgError> {
    let text = arguments.trim();
    let json: Json = if text.is_empty() {
        Json::Object(serde_json::Map::new())
    } else {
        serde_json::from_str(text).map_err(|e| {
            ArgError::new(
                ArgErrorKind::BadJson,
                "",
                format!("arguments are not valid JSON: {e}"),
            )
        })?
    };
    if !json.is_object() {
        return Err(ArgError::new(
            ArgErrorKind::BadJson,
            "",
            format!("arguments must be a JSON object, got {}", json_type(&json)),
        ));
    }
    parse_message(registry, desc, &json, "")
}

pub(super) fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

fn json_type(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn parse_message(
    registry: &ToolRegistry,
    desc: &MessageDescriptor,
    json: &Json,
    path: &str,
) -> Result<DynamicMessage, ArgError> {
    let Json::Object(object) = json else {
        return Err(wrong_type(path, "an object", json));
    };
    let mut message = DynamicMessage::new(desc.clone());
    // Unknown fields first: the most useful message when a model misnames a field.
    for key in object.keys() {
        if desc.get_field_by_name(key).is_none() {
            let known: Vec<String> = desc.fields().map(|f| f.name().to_owned()).collect();
            return Err(ArgError::new(
                ArgErrorKind::UnknownField,
                &join(path, key),
                format!("unknown field; the fields are: {}", known.join(", ")),
            ));
        }
    }
    for field in desc.fields() {
        let field_path = join(path, field.name());
        let rules = rules_of(registry, &field);
        match object.get(field.name()) {
            None | Some(Json::Null) => {
                if rules.required {
                    return Err(ArgError::new(
                        ArgErrorKind::MissingField,
                        &field_path,
                        "required field is missing",
                    ));
                }
            }
            Some(value) => {
                let parsed = parse_field(registry, &field, &rules, value, &field_path)?;
                message.set_field(&field, parsed);
            }
        }
    }
    for oneof in desc.oneofs().filter(|o| !o.is_synthetic()) {
        let set: Vec<String> = oneof
            .fields()
            .filter(|f| matches!(object.get(f.name()), Some(v) if !v.is_null()))
            .map(|f| f.name().to_owned())
            .collect();
        let names: Vec<String> = oneof.fields().map(|f| f.name().to_owned()).collect();
        match set.len() {
            1 => {}
            0 => {
                return Err(ArgError::new(
                    ArgErrorKind::MissingField,
                    &join(path, &names.join("|")),
                    format!("give exactly one of: {}", names.join(", ")),
                ));
            }
            _ => {
                return Err(ArgError::new(
                    ArgErrorKind::Invalid,
                    &join(path, &set.join("|")),
                    format!(
                        "give exactly one of: {}; got {}",
                        names.join(", "),
                        set.join(" and ")
                    ),
                ));
            }
        }
    }
    Ok(message)
}

fn wrong_type(path: &str, expected: &str, got: &Json) -> ArgError {
    ArgError::new(
        ArgErrorKind::WrongType,
        path,
        format!("expected {expected}, got {}", json_type(got)),
    )
}

fn parse_field(
    registry: &ToolRegistry,
    field: &FieldDescriptor,
    rules: &Rules,
    value: &Json,
    path: &str,
) -> Result<Value, ArgError> {
    if field.is_list() {
        let Json::Array(items) = value else {
            return Err(wrong_type(path, "an array", value));
        };
        check_len(items.len(), rules, path, "items")?;
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{i}]");
            if item.is_null() {
                return Err(wrong_type(&item_path, "a value", item));
            }
            out.push(parse_single(
                registry,
                &field.kind(),
                rules,
                item,
                &item_path,
                false,
            )?);
        }
        return Ok(Value::List(out));
    }
    if field.is_map() {
        return Err(ArgError::internal(format!(
            "map field `{path}` is not supported"
        )));
    }
    parse_single(registry, &field.kind(), rules, value, path, true)
}

pub(super) fn check_len(len: usize, rules: &Rules, path: &str, unit: &str) -> Result<(), ArgError> {
    if let Some(min) = rules.min_len
        && len < min as usize
    {
        return Err(ArgError::new(
            ArgErrorKind::OutOfRange,
            path,
            format!("must have at least {min} {unit}, got {len}"),
        ));
    }
    if let Some(max) = rules.max_len
        && len > max as usize
    {
        return Err(ArgError::new(
            ArgErrorKind::OutOfRange,
            path,
            format!("must have at most {max} {unit}, got {len}"),
        ));
    }
    Ok(())
}

pub(super) fn check_range(n: i128, rules: &Rules, path: &str) -> Result<(), ArgError> {
    if let Some(min) = rules.min
        && n < i128::from(min)
    {
        return Err(ArgError::new(
            ArgErrorKind::OutOfRange,
            path,
            format!("must be at least {min}, got {n}"),
        ));
    }
    if let Some(max) = rules.max
        && n > i128::from(max)
    {
        return Err(ArgError::new(
            ArgErrorKind::OutOfRange,
            path,
            format!("must be at most {max}, got {n}"),
        ));
    }
    Ok(())
}

fn integer(value: &Json, path: &str) -> Result<i128, ArgError> {
    let Json::Number(n) = value else {
        return Err(wrong_type(path, "an integer", value));
    };
    if let Some(i) = n.as_i64() {
        return Ok(i128::from(i));
    }
    if let Some(u) = n.as_u64() {
        return Ok(i128::from(u));
    }
    Err(ArgError::new(
        ArgErrorKind::WrongType,
        path,
        format!("expected an integer, got {n}"),
    ))
}

fn bounded<T: TryFrom<i128>>(n: i128, path: &str, type_name: &str) -> Result<T, ArgError> {
    T::try_from(n).map_err(|_| {
        ArgError::new(
            ArgErrorKind::OutOfRange,
            path,
            format!("{n} does not fit in {type_name}"),
        )
    })
}

fn parse_single(
    registry: &ToolRegistry,
    kind: &Kind,
    rules: &Rules,
    value: &Json,
    path: &str,
    scalar_rules: bool,
) -> Result<Value, ArgError> {
    Ok(match kind {
        Kind::String => {
            let Json::String(s) = value else {
                return Err(wrong_type(path, "a string", value));
            };
            if scalar_rules {
                check_len(s.chars().count(), rules, path, "characters")?;
            }
            Value::String(s.clone())
        }
        Kind::Bool => {
            let Json::Bool(b) = value else {
                return Err(wrong_type(path, "a boolean", value));
            };
            Value::Bool(*b)
        }
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            let n = integer(value, path)?;
            check_range(n, rules, path)?;
            Value::I32(bounded(n, path, "a 32-bit signed integer")?)
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
            let n = integer(value, path)?;
            check_range(n, rules, path)?;
            Value::I64(bounded(n, path, "a 64-bit signed integer")?)
        }
        Kind::Uint32 | Kind::Fixed32 => {
            let n = integer(value, path)?;
            let n32: u32 = bounded(n, path, "a non-negative 32-bit integer")?;
            check_range(n, rules, path)?;
            Value::U32(n32)
        }
        Kind::Uint64 | Kind::Fixed64 => {
            let n = integer(value, path)?;
            let n64: u64 = bounded(n, path, "a non-negative 64-bit integer")?;
            check_range(n, rules, path)?;
            Value::U64(n64)
        }
        Kind::Float | Kind::Double => {
            let Some(f) = value.as_f64() else {
                return Err(wrong_type(path, "a number", value));
            };
            if matches!(kind, Kind::Float) {
                #[allow(clippy::cast_possible_truncation)]
                Value::F32(f as f32)
            } else {
                Value::F64(f)
            }
        }
        Kind::Bytes => {
            return Err(ArgError::internal(format!(
                "bytes field `{path}` is not supported"
            )));
        }
        Kind::Enum(e) => {
            let Json::String(s) = value else {
                return Err(wrong_type(path, "a string", value));
            };
            let choices = enum_choices(e);
            let wanted = s.trim().to_ascii_lowercase();
            let found = choices.iter().find(|(name, number, _)| {
                *name == wanted
                    || e.get_value(*number)
                        .is_some_and(|v| v.name().eq_ignore_ascii_case(s.trim()))
            });
            match found {
                Some((_, number, _)) => Value::EnumNumber(*number),
                None => {
                    let names: Vec<&str> = choices.iter().map(|(n, _, _)| n.as_str()).collect();
                    return Err(ArgError::new(
                        ArgErrorKind::OutOfRange,
                        path,
                        format!("`{s}` is not one of: {}", names.join(", ")),
                    ));
                }
            }
        }
        Kind::Message(m) => Value::Message(parse_message(registry, m, value, path)?),
    })
}
