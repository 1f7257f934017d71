//! Tool arguments as a handler receives them: checked against the tool's
//! published `inputSchema`, then deserialised.
//!
//! Guarantees: every malformed call (an unknown argument, a missing required
//! one, a wrong JSON type, a negative, fractional or out-of-range number) is
//! `INVALID_ARGUMENT: <argument>: <what was expected>` — the same tool error
//! as every other failure, whatever the transport or protocol era (rmcp's
//! own extractor answers `failed to deserialize parameters: …` with no
//! code). The check reads the schema that `tools/list` publishes, so what a
//! client is told and what the server enforces cannot drift apart, and
//! configured limits are enforced as published. `null` for an optional
//! argument means "not given" (clients that convert schemas for strict
//! function calling send it); `null` for a required one is refused. No
//! message quotes more than a few dozen characters of what was sent.

use rmcp::ErrorData;
use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::JsonObject;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use serverfs_core::FsError;

use crate::schema::value_schema;

/// A handler that publishes its tools' input schemas: what [`Args`] checks
/// calls against.
pub trait PublishedSchemas {
    /// The `inputSchema` that `tools/list` publishes for `tool`.
    fn input_schema(&self, tool: &str) -> Option<std::sync::Arc<JsonObject>>;
}

/// The arguments of one call: `T`, or why they are not acceptable.
pub struct Args<T>(pub Result<T, FsError>);

impl<S, T> FromContextPart<ToolCallContext<'_, S>> for Args<T>
where
    S: PublishedSchemas,
    T: DeserializeOwned,
{
    fn from_context_part(context: &mut ToolCallContext<'_, S>) -> Result<Self, ErrorData> {
        let arguments = context.arguments.take().unwrap_or_default();
        // Never a JSON-RPC error: a refusal is a value the handler reports
        // (and logs) as the tool's result.
        Ok(Self(match context.service.input_schema(&context.name) {
            Some(schema) => parse(arguments, &schema, &context.name),
            None => Err(FsError::invalid(format!("{}: no such tool.", shown(&context.name)))),
        }))
    }
}

impl<T> Args<T> {
    /// The arguments, or their `CODE: message` for the tool's result,
    /// logged as the call's outcome (a refused call never waits for a
    /// slot).
    ///
    /// # Errors
    /// The refusal's `CODE: message`.
    // A `String`: the tool error's text, as `ToolResult`'s.
    pub fn accept(self, tool: &'static str) -> Result<T, String> {
        self.0.map_err(|e| {
            let text = e.to_string();
            crate::CallLog { tool, workdir: None, path: None }.refused(e);
            text
        })
    }
}

/// `arguments` checked against `schema` (the flat object schema of one
/// tool's inputs), then deserialised.
pub(crate) fn parse<T: DeserializeOwned>(
    mut arguments: JsonObject,
    schema: &JsonObject,
    tool: &str,
) -> Result<T, FsError> {
    check(&mut arguments, schema, tool)?;
    // The check covers everything `T` refuses; a refusal here would be a
    // schema that disagrees with its type, still reported with the code.
    serde_json::from_value(Value::Object(arguments))
        .map_err(|e| FsError::invalid(format!("arguments: {}", shown(&e.to_string()))))
}

/// Validates `arguments` in place: nulls of optional arguments are dropped
/// and integral floats (`5.0`, an integer to JSON Schema) become integers.
fn check(arguments: &mut JsonObject, schema: &JsonObject, tool: &str) -> Result<(), FsError> {
    let empty = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let required = |name: &str| {
        schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|n| n.as_str() == Some(name)))
    };
    if let Some(unknown) = arguments.keys().find(|k| !properties.contains_key(*k)) {
        let names: Vec<&str> = properties.keys().map(String::as_str).collect();
        let expected = if names.is_empty() {
            format!("unknown argument; {tool} takes none")
        } else {
            format!("unknown argument; {tool} takes {}", names.join(", "))
        };
        return Err(invalid(unknown, &expected));
    }
    arguments.retain(|name, value| !value.is_null() || required(name));
    for (name, property) in properties {
        let Some(property) = property.as_object().map(value_schema) else { continue };
        let Some(value) = arguments.get_mut(name) else {
            if required(name) {
                let expected = format!("required, expected {}", expected(property));
                return Err(invalid(name, &expected));
            }
            continue;
        };
        if !accepts(property, value) {
            let got = format!("expected {}; got {}", expected(property), describe(value));
            return Err(invalid(name, &got));
        }
    }
    Ok(())
}

fn invalid(argument: &str, expected: &str) -> FsError {
    FsError::invalid(format!("{}: {expected}.", shown(argument)))
}

/// Whether `value` is what `property` (its values' schema) allows (the
/// keywords input schemas use: `type`, `enum` of strings, `minimum`, `maximum`, `minLength`,
/// `maxLength`; a schema test keeps them to these). An integral float is
/// rewritten as an integer.
fn accepts(property: &Map<String, Value>, value: &mut Value) -> bool {
    let length = |key: &str| property.get(key).and_then(Value::as_u64);
    match property.get("type").and_then(Value::as_str) {
        Some("string") => value.as_str().is_some_and(|s| {
            let chars = s.chars().count() as u64;
            length("minLength").is_none_or(|min| chars >= min)
                && length("maxLength").is_none_or(|max| chars <= max)
                && property
                    .get("enum")
                    .and_then(Value::as_array)
                    .is_none_or(|names| names.iter().any(|n| n.as_str() == Some(s)))
        }),
        Some("boolean") => value.is_boolean(),
        Some("integer") => {
            if value.is_f64()
                && let Some(n) = value.as_f64().and_then(as_integer)
            {
                *value = n;
            }
            let in_range = |n: i128| {
                let bound = |key: &str| property.get(key).and_then(as_i128);
                bound("minimum").is_none_or(|min| n >= min)
                    && bound("maximum").is_none_or(|max| n <= max)
            };
            as_i128(value).is_some_and(in_range)
        }
        // No other type is used by the input schemas.
        _ => false,
    }
}

/// `f` as a JSON integer, when it has no fractional part.
fn as_integer(f: f64) -> Option<Value> {
    // Beyond 2^53 a float no longer says which integer was meant.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    (f.fract() == 0.0 && f.abs() <= EXACT).then(|| Value::from(f as i64))
}

fn as_i128(value: &Value) -> Option<i128> {
    value.as_u64().map(i128::from).or_else(|| value.as_i64().map(i128::from))
}

/// What a property expects, in words.
fn expected(property: &Map<String, Value>) -> String {
    let get = |key: &str| property.get(key).map(Value::to_string);
    match property.get("type").and_then(Value::as_str) {
        Some("integer") => {
            // The range of a Rust type says nothing to a reader.
            let huge = property.get("maximum").and_then(as_i128).is_none_or(|m| m >= 1 << 53);
            match (get("minimum"), get("maximum")) {
                (Some(min), Some(max)) if !huge => format!("an integer from {min} to {max}"),
                (Some(min), _) => format!("an integer of at least {min}"),
                _ => "an integer".to_owned(),
            }
        }
        Some("boolean") => "true or false".to_owned(),
        Some("string") if property.contains_key("enum") => {
            let names = property.get("enum").and_then(Value::as_array).into_iter().flatten();
            let names: Vec<&str> = names.filter_map(Value::as_str).collect();
            format!("one of {}", names.join(", "))
        }
        Some("string") => match (get("minLength"), get("maxLength")) {
            (Some(min), Some(max)) => format!("a string of {min} to {max} characters"),
            _ => "a string".to_owned(),
        },
        _ => "a value this server cannot describe".to_owned(),
    }
}

/// A sent value, briefly.
fn describe(value: &Value) -> String {
    match value {
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
        other => shown(&other.to_string()),
    }
}

/// At most 40 characters of `text`, controls replaced, `…` when cut.
fn shown(text: &str) -> String {
    let mut out: String =
        text.chars().take(40).map(|c| if c.is_control() { '?' } else { c }).collect();
    if text.chars().nth(40).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::{ReadTextFileArgs, SearchTextArgs, input_schema};

    /// A tool without arguments.
    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    struct NoArgs {}

    fn read(args: Value) -> Result<ReadTextFileArgs, String> {
        let Value::Object(args) = args else { panic!() };
        parse(args, &input_schema::<ReadTextFileArgs>(), "read_text_file")
            .map_err(|e| e.to_string())
    }

    #[test]
    fn accepts_good_arguments() {
        let a = read(json!({"path": "p", "max_lines": 5.0, "start_line": null})).unwrap();
        assert_eq!((a.max_lines, a.start_line), (Some(5), None));
    }

    #[test]
    fn names_the_argument_and_what_was_expected() {
        let cases = [
            (json!({}), "path: required, expected a string."),
            (json!({"path": null}), "path: expected a string; got null."),
            (json!({"path": 1}), "path: expected a string; got 1."),
            (
                json!({"path": "p", "max_lines": -1}),
                "max_lines: expected an integer from 1 to 500; got -1.",
            ),
            (
                json!({"path": "p", "start_line": 1.5}),
                "start_line: expected an integer from -9007199254740991 to 9007199254740991; got 1.5.",
            ),
            (
                json!({"path": "p", "max_lines": "5"}),
                "max_lines: expected an integer from 1 to 500; got \"5\".",
            ),
            (
                json!({"path": "p", "follow": true}),
                "follow: unknown argument; read_text_file takes max_lines, path, start_line.",
            ),
        ];
        for (args, message) in cases {
            assert_eq!(read(args).unwrap_err(), format!("INVALID_ARGUMENT: {message}"));
        }
    }

    #[test]
    fn never_echoes_long_input() {
        let long = "x".repeat(10_000);
        let err = read(json!({"path": "p", "max_lines": long})).unwrap_err();
        let got = format!("got \"{}…", "x".repeat(39));
        assert!(err.len() < 200 && err.ends_with(&format!("{got}.")), "{err}");
        let err = read(json!({"path": "p", long: 1})).unwrap_err();
        assert!(err.len() < 200 && err.contains(&format!("{}…: unknown", "x".repeat(40))), "{err}");
    }

    #[test]
    fn no_arguments_and_optional_booleans() {
        let Value::Object(args) = json!({"x": 1}) else { panic!() };
        let err = parse::<NoArgs>(args, &input_schema::<NoArgs>(), "t");
        assert_eq!(
            err.unwrap_err().to_string(),
            "INVALID_ARGUMENT: x: unknown argument; t takes none."
        );
        let Value::Object(args) = json!({"query": "q", "case_sensitive": "no"}) else { panic!() };
        let err = parse::<SearchTextArgs>(args, &input_schema::<SearchTextArgs>(), "t");
        assert_eq!(
            err.unwrap_err().to_string(),
            "INVALID_ARGUMENT: case_sensitive: expected true or false; got \"no\"."
        );
    }
}
