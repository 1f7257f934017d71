//! What the real binary tells clients about types: every tool's input and
//! output schema as `tools/list` publishes it passes a strict JSON Schema
//! 2020-12 validator (meta-schema, unknown formats refused, only standard
//! keywords, bounded integers, no `type` arrays, optional inputs nullable
//! and optional outputs never null), the structuredContent of real calls
//! validates against its outputSchema, and a strict client (every argument
//! sent, `null` for the ones it leaves out) can call every tool.

use crate::common;
use crate::definitions;
use crate::strict;

use std::collections::BTreeMap;

use common::{BIN, Client, Fixture, HttpServer, call, http_client, lifecycles};
use rmcp::ServiceExt;
use rmcp::model::ReadResourceRequestParams;
use serde_json::{Map, Value, json};

/// JSON Schema 2020-12 keywords (core, applicator, validation, format,
/// content and meta-data vocabularies): what a strict validator such as
/// Ajv in strict mode knows.
const KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "$ref",
    "$defs",
    "$comment",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "patternProperties",
    "propertyNames",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "format",
    "contentEncoding",
    "contentMediaType",
];

/// The keywords the server's own argument check understands.
const ARGUMENT_KEYWORDS: &[&str] =
    &["type", "description", "default", "minimum", "maximum", "minLength", "maxLength"];

fn types(schema: &Map<String, Value>) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}

/// Whether `property` is `anyOf: [{…}, {"type": "null"}]`.
fn nullable(property: &Map<String, Value>) -> bool {
    property
        .get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|s| s.get("type") == Some(&json!("null"))))
}

/// The schema of a property's non-null values.
fn values(property: &Value) -> &Map<String, Value> {
    let p = property.as_object().unwrap();
    let branch = p.get("anyOf").and_then(Value::as_array).and_then(|a| {
        a.iter().filter_map(Value::as_object).find(|s| s.get("type") != Some(&json!("null")))
    });
    branch.unwrap_or(p)
}

/// Ajv-strict-like checks on `schema` and every subschema; `at` names the
/// place for messages. Optional properties are nullable in an `input`,
/// never in an output.
fn audit(schema: &Value, at: &str) {
    let input = at.contains(" input");
    let Some(object) = schema.as_object() else { panic!("{at}: not an object schema") };
    for key in object.keys() {
        assert!(KEYWORDS.contains(&key.as_str()), "{at}: unknown keyword {key}");
    }
    if types(object).contains(&"integer") {
        assert!(!object.contains_key("format"), "{at}: integer with format");
        for bound in ["minimum", "maximum"] {
            assert!(object.get(bound).is_some_and(Value::is_number), "{at}: no {bound}");
        }
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        let required: Vec<&str> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (name, property) in properties {
            let place = format!("{at}.{name}");
            let p = property.as_object().unwrap();
            assert!(!types(p).contains(&"null"), "{place}: a type array with null");
            if !required.contains(&name.as_str()) {
                if input {
                    assert!(nullable(p), "{place}: optional input not nullable");
                } else {
                    assert!(!nullable(p), "{place}: optional output nullable");
                }
            }
            audit(property, &place);
        }
    }
    for key in ["$defs"] {
        for (name, sub) in object.get(key).and_then(Value::as_object).into_iter().flatten() {
            audit(sub, &format!("{at}.{key}.{name}"));
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        for (i, sub) in object.get(key).and_then(Value::as_array).into_iter().flatten().enumerate()
        {
            audit(sub, &format!("{at}.{key}[{i}]"));
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub) = object.get(key).filter(|s| s.is_object()) {
            audit(sub, &format!("{at}.{key}"));
        }
    }
}

fn strict_validator(schema: &Value, at: &str) -> jsonschema::Validator {
    jsonschema::draft202012::meta::validate(schema)
        .unwrap_or_else(|e| panic!("{at}: not a valid 2020-12 schema: {e}"));
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .should_ignore_unknown_formats(false)
        .build(schema)
        .unwrap_or_else(|e| panic!("{at}: refused by the strict validator: {e}"))
}

/// Published tools: name → (input validator, output validator).
async fn published(client: &Client) -> BTreeMap<String, (Value, Value)> {
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 6);
    tools
        .into_iter()
        .map(|t| {
            let input = Value::Object((*t.input_schema).clone());
            let output = Value::Object((*t.output_schema.expect("outputSchema")).clone());
            (t.name.to_string(), (input, output))
        })
        .collect()
}

#[tokio::test]
async fn schemas_are_strict_2020_12_and_results_match_them() {
    let fx = Fixture::new();
    std::fs::write(fx.root().join("empty.txt"), "").unwrap();
    let server = HttpServer::start(&["--workdir", &fx.workdir_arg()]);
    let mut eras = Vec::new();
    for (era, lifecycle) in lifecycles() {
        let client = http_client(&server.url, lifecycle).await;
        eras.push((era, published(&client).await, client));
    }
    let (_, tools, client) = &eras[0];
    assert_eq!(tools, &eras[1].1, "both eras publish the same schemas");

    let mut validators = BTreeMap::new();
    for (name, (input, output)) in tools {
        audit(input, &format!("{name} input"));
        audit(output, &format!("{name} output"));
        strict::assert_portable(input, &format!("{name} input"));
        strict::assert_portable(output, &format!("{name} output"));
        assert_eq!(input["type"], "object", "{name}");
        assert_eq!(input["additionalProperties"], false, "{name}: unknown arguments allowed");
        assert!(input["properties"].is_object(), "{name}: no properties");
        for (arg, property) in input["properties"].as_object().unwrap() {
            for key in values(property).keys() {
                assert!(ARGUMENT_KEYWORDS.contains(&key.as_str()), "{name}.{arg}: {key}");
            }
            assert!(values(property)["type"].is_string(), "{name}.{arg}: one type");
        }
        let v = (
            strict_validator(input, &format!("{name} input")),
            strict_validator(output, &format!("{name} output")),
            strict_validator(&strict::strict(input), &format!("{name} strict input")),
        );
        validators.insert(name.clone(), v);
    }

    // The limits an agent needs, in the schema rather than in an error.
    let limit_max =
        |tool: &str, arg: &str| values(&tools[tool].0["properties"][arg])["maximum"].clone();
    assert_eq!(limit_max("list_directory", "limit"), 500);
    assert_eq!(limit_max("list_directory", "offset"), 10_000);
    assert_eq!(limit_max("find_files", "limit"), 100);
    assert_eq!(limit_max("search_text", "limit"), 100);
    assert_eq!(limit_max("read_text_file", "max_lines"), 500);
    assert_eq!(tools["stat_file"].0["required"], json!(["workdir", "path"]));

    let calls = [
        ("list_workdirs", json!({})),
        ("list_directory", json!({"workdir": "test"})),
        ("list_directory", json!({"workdir": "test", "limit": 1})),
        ("find_files", json!({"workdir": "test", "pattern": "*"})),
        ("find_files", json!({"workdir": "test", "pattern": "*", "limit": 1})),
        ("search_text", json!({"workdir": "test", "query": "hello"})),
        ("search_text", json!({"workdir": "test", "query": "o", "limit": 1})),
        ("search_text", json!({"workdir": "test", "query": "nowhere to be found"})),
        ("read_text_file", json!({"workdir": "test", "path": "README.md"})),
        ("read_text_file", json!({"workdir": "test", "path": "README.md", "max_lines": 1})),
        ("read_text_file", json!({"workdir": "test", "path": "README.md", "start_line": 99})),
        ("read_text_file", json!({"workdir": "test", "path": "empty.txt"})),
        ("stat_file", json!({"workdir": "test", "path": "README.md"})),
        ("stat_file", json!({"workdir": "test", "path": "project"})),
        ("stat_file", json!({"workdir": "test", "path": "etc-link"})),
        ("search_text", json!({"workdir": "test", "query": "hello", "glob": "*.md"})),
    ];
    for (tool, args) in calls {
        let (input, output, strict_input) = &validators[tool];
        // As sent by a client that leaves arguments out, and by a strict
        // one that sends null for them.
        let strict_args = strict::with_nulls(&args, &tools[tool].0);
        assert!(strict_input.is_valid(&strict_args), "{tool}: strict mode refuses {strict_args}");
        for args in [args, strict_args] {
            assert!(input.is_valid(&args), "{tool}: the schema refuses {args}");
            let (is_error, result) = call(client, tool, args.clone()).await;
            assert!(!is_error, "{tool} {args}: {result}");
            if let Err(e) = output.validate(&result) {
                panic!("{tool} {args}: result does not match outputSchema: {e}\n{result}");
            }
        }
    }
    // A strict client has no way to leave `cursor` or `glob` out but null
    // or "": both mean "not given".
    let empty = json!({"workdir": "test", "query": "hello", "glob": "", "cursor": ""});
    let (is_error, result) = call(client, "search_text", empty).await;
    assert!(!is_error && result["returned"] != 0, "{result}");
    let empty = json!({"workdir": "test", "pattern": "*", "cursor": ""});
    assert!(!call(client, "find_files", empty).await.0);
    let empty = json!({"workdir": "test", "cursor": ""});
    assert!(!call(client, "list_directory", empty).await.0);
    for (_, _, client) in eras {
        client.cancel().await.unwrap();
    }
}

/// A configured maximum is what tools/list publishes.
#[tokio::test]
async fn configured_maxima_are_published() {
    let fx = Fixture::new();
    let server = HttpServer::start_with_env(
        &["--workdir", &fx.workdir_arg()],
        &[
            ("SERVERFS_MAX_SEARCH_RESULTS", "7"),
            ("SERVERFS_DEFAULT_SEARCH_RESULTS", "5"),
            ("SERVERFS_MAX_LIST_ENTRIES", "1000"),
            ("SERVERFS_MAX_READ_LINES", "20"),
        ],
    );
    let client = http_client(&server.url, lifecycles().remove(0).1).await;
    let tools = published(&client).await;
    let max = |tool: &str, arg: &str| values(&tools[tool].0["properties"][arg])["maximum"].clone();
    assert_eq!(max("find_files", "limit"), 7);
    assert_eq!(max("search_text", "limit"), 7);
    assert_eq!(max("list_directory", "limit"), 1000);
    assert_eq!(max("read_text_file", "max_lines"), 20);
    let (is_error, text) =
        call(&client, "find_files", json!({"workdir": "test", "pattern": "*", "limit": 8})).await;
    assert!(is_error);
    assert_eq!(text, "INVALID_ARGUMENT: limit: expected an integer from 1 to 7; got 8.");
    let (is_error, _) =
        call(&client, "find_files", json!({"workdir": "test", "pattern": "*", "limit": 7})).await;
    assert!(!is_error);
    client.cancel().await.unwrap();
}

/// resources/read and stat_file say what a file holds: text, even when
/// the name gives no type.
#[tokio::test]
async fn resource_text_without_a_known_type_is_plain_text() {
    let fx = Fixture::new();
    std::fs::write(fx.root().join("NOTES"), "plain\n").unwrap();
    std::fs::write(fx.root().join("run.log.zzz"), "plain\n").unwrap();
    let server = HttpServer::start(&["--workdir", &fx.workdir_arg()]);
    let client = http_client(&server.url, lifecycles().remove(0).1).await;
    for (uri, mime) in [
        ("serverfs://test/NOTES", "text/plain; charset=utf-8"),
        ("serverfs://test/run.log.zzz", "text/plain; charset=utf-8"),
        ("serverfs://test/README.md", "text/markdown"),
        ("serverfs://test/project/main.py", "text/x-python"),
    ] {
        let read = client.read_resource(ReadResourceRequestParams::new(uri)).await.unwrap();
        let contents = serde_json::to_value(&read.contents).unwrap();
        assert_eq!(contents[0]["mimeType"], mime, "{uri}");
    }
    // stat_file agrees: a name that says nothing, text inside, is text; a
    // NUL or invalid UTF-8 in the head is not.
    std::fs::write(fx.root().join("BLOB"), b"ab\0cd").unwrap();
    std::fs::write(fx.root().join("LATIN1"), b"caf\xe9\n").unwrap();
    std::fs::write(fx.root().join("EMPTY"), b"").unwrap();
    // Only the first 8 KiB are looked at: a NUL after them, or a character
    // cut by their end, leaves the file text.
    let mut long = vec![b'a'; 8192];
    long.push(0);
    std::fs::write(fx.root().join("LONG"), &long).unwrap();
    let mut cut = vec![b'a'; 8191];
    cut.extend_from_slice("é\n".as_bytes());
    std::fs::write(fx.root().join("CUT"), &cut).unwrap();
    for (path, mime) in [
        ("NOTES", "text/plain; charset=utf-8"),
        ("EMPTY", "text/plain; charset=utf-8"),
        ("LONG", "text/plain; charset=utf-8"),
        ("CUT", "text/plain; charset=utf-8"),
        ("BLOB", "application/octet-stream"),
        ("LATIN1", "application/octet-stream"),
        ("README.md", "text/markdown"),
    ] {
        let (is_error, stat) =
            call(&client, "stat_file", json!({"workdir": "test", "path": path})).await;
        assert!(!is_error, "{stat}");
        assert_eq!(stat["mime_type"], mime, "{path}");
    }
    // serverfs-mcp stays text-only: no hashes (serverfs-dev has them).
    let (is_error, text) =
        call(&client, "stat_file", json!({"workdir": "test", "path": "NOTES", "sha256": true}))
            .await;
    assert!(is_error && text.as_str().unwrap().starts_with("INVALID_ARGUMENT: sha256:"), "{text}");
    client.cancel().await.unwrap();
}

/// What a model reads of the six tools on every turn (name, description
/// and inputSchema as compact JSON, as scripts/tool_bytes.py counts them)
/// stays within the 5,970 bytes it was before issue 36, and no description
/// holds a line break.
#[tokio::test]
async fn tool_definitions_stay_small_and_on_one_line() {
    let fx = Fixture::new();
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["--stdio", "--workdir", &fx.workdir_arg()]);
    let transport = serverfs_test_support::stdio_transport(cmd);
    let client: Client = rmcp::model::ClientConfig::default().serve(transport).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 6);
    tools.iter().for_each(definitions::assert_one_line_descriptions);
    let total: usize = tools.iter().map(definitions::definition_bytes).sum();
    assert!(total <= 5_970, "the tool definitions are {total} bytes");
    client.cancel().await.unwrap();
}
