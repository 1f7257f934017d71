//! What a model reads of a server's tools on every turn, for the servers'
//! tests (included with `#[path]`): each tool's name, description and
//! inputSchema as compact JSON, counted as `scripts/tool_bytes.py` counts
//! them, and descriptions without line breaks.

use rmcp::model::Tool;
use serde_json::{Map, Value};

/// Bytes of `tool`'s `{name, description, inputSchema}` as compact JSON.
pub(crate) fn definition_bytes(tool: &Tool) -> usize {
    let mut definition = Map::new();
    definition.insert("name".into(), tool.name.as_ref().into());
    if let Some(description) = &tool.description {
        definition.insert("description".into(), description.as_ref().into());
    }
    definition.insert("inputSchema".into(), Value::Object((*tool.input_schema).clone()));
    serde_json::to_vec(&definition).unwrap().len()
}

/// No description of `tool` (its own, or one in its input or output
/// schema) holds a line break.
pub(crate) fn assert_one_line_descriptions(tool: &Tool) {
    let one_line = |at: &str, text: &str| {
        assert!(!text.contains(['\n', '\r']), "{} {at}: {text:?}", tool.name);
    };
    if let Some(description) = &tool.description {
        one_line("description", description);
    }
    descriptions_in(&tool.input_schema, &mut |d| one_line("input", d));
    if let Some(output) = &tool.output_schema {
        descriptions_in(output, &mut |d| one_line("output", d));
    }
}

/// Calls `check` with every `description` string in `schema` and its
/// subschemas.
fn descriptions_in(schema: &Map<String, Value>, check: &mut impl FnMut(&str)) {
    for (key, value) in schema {
        match value {
            Value::String(text) if key == "description" => check(text),
            Value::Object(sub) => descriptions_in(sub, check),
            Value::Array(items) => {
                for sub in items.iter().filter_map(Value::as_object) {
                    descriptions_in(sub, check);
                }
            }
            _ => {}
        }
    }
}
