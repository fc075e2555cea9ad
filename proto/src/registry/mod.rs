//! The typed tool registry: the tools a model may call, derived from the `ToolCall` oneof of
//! `ploke.tools.v1` and the `*Args` messages it holds. Descriptions come from the proto
//! comments, rules from the `(ploke.tools.v1.rules)` field option, side effects and timeouts
//! from the `(ploke.tools.v1.tool)` message option — one source of truth for the JSON Schema a
//! provider sees, for parsing the arguments it sends back, and for checking typed arguments
//! that arrive over gRPC.

mod error;
mod parse;
mod render;
mod schema;
mod validate;

use std::sync::LazyLock;

use prost_reflect::{
    DescriptorPool, DynamicMessage, ExtensionDescriptor, FieldDescriptor, MessageDescriptor, Value,
};

pub use error::{ArgError, ArgErrorKind, RegistryError};

use crate::tools::v1::{SideEffect, ToolCall, ToolDefinition, ToolResult, tool_call};

const TOOL_CALL: &str = "ploke.tools.v1.ToolCall";
const TOOL_RESULT: &str = "ploke.tools.v1.ToolResult";
const RULES_EXT: &str = "ploke.tools.v1.rules";
const MODEL_OMITS_EXT: &str = "ploke.tools.v1.model_omits";
const ALWAYS_SHOWN_EXT: &str = "ploke.tools.v1.always_shown";
const TOOL_EXT: &str = "ploke.tools.v1.tool";

/// One tool of the registry.
#[derive(Debug, Clone)]
pub struct Tool {
    definition: ToolDefinition,
    /// Field of the `ToolCall` oneof that carries this tool's arguments.
    call_field: FieldDescriptor,
    args: MessageDescriptor,
}

impl Tool {
    /// The tool's name, as the model calls it.
    pub fn name(&self) -> &str {
        &self.definition.name
    }

    /// The catalogue entry (name, description, JSON Schema, side effect, default timeout).
    pub fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    /// The side effect of running the tool.
    pub fn side_effect(&self) -> SideEffect {
        self.definition.side_effect()
    }

    /// The descriptor of the tool's arguments message.
    pub fn args_descriptor(&self) -> &MessageDescriptor {
        &self.args
    }
}

/// Every tool, with their schemas and argument parsers.
#[derive(Debug)]
pub struct ToolRegistry {
    pool: DescriptorPool,
    tool_call: MessageDescriptor,
    tool_result: MessageDescriptor,
    rules: ExtensionDescriptor,
    model_omits: ExtensionDescriptor,
    always_shown: ExtensionDescriptor,
    tools: Vec<Tool>,
}

static GLOBAL: LazyLock<Result<ToolRegistry, RegistryError>> = LazyLock::new(ToolRegistry::load);

impl ToolRegistry {
    /// The process-wide registry built from [`crate::FILE_DESCRIPTOR_SET`].
    pub fn global() -> Result<&'static ToolRegistry, RegistryError> {
        GLOBAL.as_ref().map_err(Clone::clone)
    }

    /// Builds the registry from [`crate::FILE_DESCRIPTOR_SET`].
    pub fn load() -> Result<Self, RegistryError> {
        let pool = DescriptorPool::decode(crate::FILE_DESCRIPTOR_SET)
            .map_err(|e| RegistryError::Descriptor(e.to_string()))?;
        let tool_call = pool
            .get_message_by_name(TOOL_CALL)
            .ok_or(RegistryError::Missing(TOOL_CALL))?;
        let tool_result = pool
            .get_message_by_name(TOOL_RESULT)
            .ok_or(RegistryError::Missing(TOOL_RESULT))?;
        let rules = pool
            .get_extension_by_name(RULES_EXT)
            .ok_or(RegistryError::Missing(RULES_EXT))?;
        let tool_ext = pool
            .get_extension_by_name(TOOL_EXT)
            .ok_or(RegistryError::Missing(TOOL_EXT))?;
        let model_omits = pool
            .get_extension_by_name(MODEL_OMITS_EXT)
            .ok_or(RegistryError::Missing(MODEL_OMITS_EXT))?;
        let always_shown = pool
            .get_extension_by_name(ALWAYS_SHOWN_EXT)
            .ok_or(RegistryError::Missing(ALWAYS_SHOWN_EXT))?;
        let mut registry = ToolRegistry {
            pool,
            tool_call: tool_call.clone(),
            tool_result: tool_result.clone(),
            rules,
            model_omits,
            always_shown,
            tools: Vec::new(),
        };
        let mut tools = Vec::new();
        for field in tool_call.fields() {
            let args = match field.kind() {
                prost_reflect::Kind::Message(m) => m,
                _ => return Err(RegistryError::NotAMessage(field.name().to_owned())),
            };
            let spec = args.options();
            if !spec.has_extension(&tool_ext) {
                return Err(RegistryError::NoToolSpec(args.full_name().to_owned()));
            }
            let spec = spec.get_extension(&tool_ext);
            let (side_effect, timeout) = match spec.as_message() {
                Some(m) => (
                    m.get_field_by_name("side_effect")
                        .and_then(|v| v.as_enum_number())
                        .unwrap_or_default(),
                    m.get_field_by_name("default_timeout_ms")
                        .and_then(|v| v.as_u32())
                        .unwrap_or_default(),
                ),
                None => (0, 0),
            };
            let schema = registry.schema_for(&args);
            // The result of tool `x` is the `x` field of the `ToolResult` oneof.
            let result = match tool_result
                .get_field_by_name(field.name())
                .map(|f| f.kind())
            {
                Some(prost_reflect::Kind::Message(m)) => m,
                Some(_) | None => return Err(RegistryError::NoResult(field.name().to_owned())),
            };
            let result_schema = schema::message_schema(&registry, &result);
            let definition = ToolDefinition {
                name: field.name().to_owned(),
                description: schema::comment_of(args.parent_file(), args.path()),
                parameters_json_schema: schema.to_string(),
                side_effect,
                default_timeout_ms: timeout,
                result_json_schema: result_schema.to_string(),
            };
            tools.push(Tool {
                definition,
                call_field: field,
                args,
            });
        }
        registry.tools = tools;
        Ok(registry)
    }

    /// Every tool, in `ToolCall` field order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Every tool's catalogue entry.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools.iter().map(|t| t.definition.clone()).collect()
    }

    /// The tool of this name.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// The descriptor pool of every ploke proto.
    pub fn pool(&self) -> &DescriptorPool {
        &self.pool
    }

    /// Parses a provider's `arguments` JSON for tool `name` into a typed call.
    pub fn parse_call(&self, name: &str, arguments: &str) -> Result<ToolCall, ArgError> {
        let tool = self
            .get(name)
            .ok_or_else(|| ArgError::unknown_tool(name, self))?;
        let args = parse::parse_arguments(self, &tool.args, arguments)?;
        let mut call = DynamicMessage::new(self.tool_call.clone());
        call.set_field(&tool.call_field, Value::Message(args));
        call.transcode_to::<ToolCall>()
            .map_err(|e| ArgError::internal(format!("transcoding arguments: {e}")))
    }

    /// Checks a typed call against the rules `parse_call` enforces on JSON (counts, lengths,
    /// ranges, required fields, oneofs, enum values), with the same errors and field paths.
    pub fn check_call(&self, call: &ToolCall) -> Result<(), ArgError> {
        match &call.args {
            Some(args) => self.check_args(args),
            None => Err(ArgError::new(
                ArgErrorKind::MissingField,
                "",
                "the call holds no tool's arguments",
            )),
        }
    }

    /// [`ToolRegistry::check_call`] for the arguments of a call.
    pub fn check_args(&self, args: &tool_call::Args) -> Result<(), ArgError> {
        let name = args_tool_name(args);
        let tool = self
            .get(name)
            .ok_or_else(|| ArgError::unknown_tool(name, self))?;
        // A oneof encodes as the message holding it: these bytes are a `ToolCall`.
        let mut bytes = Vec::with_capacity(args.encoded_len());
        args.encode(&mut bytes);
        let dynamic = DynamicMessage::decode(self.tool_call.clone(), bytes.as_slice())
            .map_err(|e| ArgError::internal(format!("transcoding the typed call: {e}")))?;
        let args = dynamic.get_field(&tool.call_field);
        let args = args
            .as_message()
            .ok_or_else(|| ArgError::internal(format!("`{name}` arguments are not a message")))?;
        validate::check_message(self, args, "")
    }

    /// A typed result as JSON in the shape of the tool's `result_json_schema` (proto field
    /// names, enums by their short names, unset fields left out), with the tool's name. `None`
    /// when the result holds no tool's.
    pub fn result_json(&self, result: &ToolResult) -> Option<(&str, serde_json::Value)> {
        let bytes = prost::Message::encode_to_vec(result);
        let dynamic = DynamicMessage::decode(self.tool_result.clone(), bytes.as_slice()).ok()?;
        let (field, value) = dynamic.fields().next()?;
        let message = value.as_message()?;
        let name = self.get(field.name())?.name();
        Some((name, render::to_json(self, message)))
    }

    /// A typed result as a session's model reads it: [`Self::result_json`] without the fields
    /// marked `(model_omits)` and with times as RFC 3339 text, as one line of JSON. `None` when
    /// the result holds no tool's.
    pub fn model_json(&self, result: &ToolResult) -> Option<String> {
        let bytes = prost::Message::encode_to_vec(result);
        let dynamic = DynamicMessage::decode(self.tool_result.clone(), bytes.as_slice()).ok()?;
        let (_, value) = dynamic.fields().next()?;
        let message = value.as_message()?;
        Some(render::to_model_json(self, message).to_string())
    }

    /// Any ploke message (`full_name` in this registry's pool) as JSON in the shape of results:
    /// proto field names, enums by their short names, unset fields left out. `None` when the
    /// name is not a message of the pool.
    pub fn message_json(
        &self,
        full_name: &str,
        message: &impl prost::Message,
    ) -> Option<serde_json::Value> {
        let descriptor = self.pool.get_message_by_name(full_name)?;
        let bytes = message.encode_to_vec();
        let dynamic = DynamicMessage::decode(descriptor, bytes.as_slice()).ok()?;
        Some(render::to_json(self, &dynamic))
    }

    /// The JSON arguments text of a typed call, in the shape `parse_call` accepts, with the tool's
    /// name. `None` when the call holds no tool.
    pub fn render_call(&self, call: &ToolCall) -> Option<(&str, String)> {
        let name = tool_name(call)?;
        let tool = self.get(name)?;
        let dynamic = call.transcode_to_dynamic_with(&self.tool_call)?;
        let args = dynamic.get_field(&tool.call_field);
        let args = args.as_message()?;
        Some((tool.name(), render::to_json(self, args).to_string()))
    }

    fn schema_for(&self, message: &MessageDescriptor) -> serde_json::Value {
        schema::message_schema(self, message)
    }
}

/// The name of the tool a call holds.
pub fn tool_name(call: &ToolCall) -> Option<&'static str> {
    call.args.as_ref().map(args_tool_name)
}

/// The name of the tool these arguments are for.
pub fn args_tool_name(args: &tool_call::Args) -> &'static str {
    use tool_call::Args;
    match args {
        Args::RequestCodeContext(_) => "request_code_context",
        Args::GetFileMetadata(_) => "get_file_metadata",
        Args::ApplyCodeEdit(_) => "apply_code_edit",
        Args::ReadFile(_) => "read_file",
        Args::ListDir(_) => "list_dir",
        Args::SearchCode(_) => "search_code",
        Args::CodeItemLookup(_) => "code_item_lookup",
        Args::CreateFile(_) => "create_file",
    }
}

/// Transcoding a generated message into a dynamic one of a known descriptor.
trait TranscodeWith {
    fn transcode_to_dynamic_with(&self, desc: &MessageDescriptor) -> Option<DynamicMessage>;
}

impl<T: prost::Message> TranscodeWith for T {
    fn transcode_to_dynamic_with(&self, desc: &MessageDescriptor) -> Option<DynamicMessage> {
        DynamicMessage::decode(desc.clone(), self.encode_to_vec().as_slice()).ok()
    }
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod result_tests;
#[cfg(test)]
mod tests;
