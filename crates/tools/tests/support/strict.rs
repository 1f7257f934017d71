//! What strict clients make of the published schemas, for the servers'
//! tests (included with `#[path]`): the OpenAI Agents SDK's strict mode
//! (`convert_schemas_to_strict=True`, its `ensure_strict_json_schema`)
//! requires every property of every object and forbids others, so a model
//! must send every argument and leaves one out by sending `null`; MCP
//! Inspector `--strict` warns on `type` arrays and on bounds no JSON number
//! holds exactly.

use serde_json::{Map, Value};

/// The largest integer JSON numbers hold exactly (2^53 − 1).
pub(crate) const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// `schema` as the Agents SDK's strict mode converts it: every object's
/// properties all required and `additionalProperties: false`, through
/// `properties`, `items`, `anyOf` and `$defs`; `default: null` dropped.
pub(crate) fn strict(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else { return schema.clone() };
    let mut out = Map::new();
    for (key, value) in object {
        let converted = match key.as_str() {
            "properties" | "$defs" => Value::Object(
                value
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(name, sub)| (name.clone(), strict(sub)))
                    .collect(),
            ),
            "items" => strict(value),
            "anyOf" => Value::Array(value.as_array().unwrap().iter().map(strict).collect()),
            "default" if value.is_null() => continue,
            _ => value.clone(),
        };
        out.insert(key.clone(), converted);
    }
    if object.get("type") == Some(&Value::from("object")) {
        assert_ne!(
            object.get("additionalProperties"),
            Some(&Value::Bool(true)),
            "strict mode refuses additionalProperties: true"
        );
        out.insert("additionalProperties".into(), Value::Bool(false));
        if let Some(properties) = object.get("properties").and_then(Value::as_object) {
            let names = properties.keys().cloned().map(Value::from).collect();
            out.insert("required".into(), Value::Array(names));
        }
    }
    Value::Object(out)
}

/// `args` as a strict model sends them: every argument of `schema` it
/// lacks is `null`.
pub(crate) fn with_nulls(args: &Value, schema: &Value) -> Value {
    let mut args = args.as_object().unwrap().clone();
    for name in schema["properties"].as_object().unwrap().keys() {
        args.entry(name.clone()).or_insert(Value::Null);
    }
    Value::Object(args)
}

/// Inspector-strict checks on `schema` and every subschema: no `type`
/// array, no bound beyond ±[`MAX_SAFE_INTEGER`].
pub(crate) fn assert_portable(schema: &Value, at: &str) {
    match schema {
        Value::Object(object) => {
            assert!(!object.get("type").is_some_and(Value::is_array), "{at}: type array");
            for bound in ["minimum", "maximum"] {
                if let Some(n) = object.get(bound) {
                    let exact = n.as_i64().is_some_and(|n| n.abs() <= MAX_SAFE_INTEGER);
                    assert!(exact, "{at}: {bound} {n} is not a safe integer");
                }
            }
            for (key, sub) in object {
                // The property named `type` or `maximum` is not a keyword.
                if key != "properties" {
                    assert_portable(sub, &format!("{at}.{key}"));
                } else {
                    for (name, p) in sub.as_object().into_iter().flatten() {
                        assert_portable(p, &format!("{at}.properties.{name}"));
                    }
                }
            }
        }
        Value::Array(items) => {
            for (i, sub) in items.iter().enumerate() {
                assert_portable(sub, &format!("{at}[{i}]"));
            }
        }
        _ => {}
    }
}
