//! Tool inputs and outputs of the shared read tools, free of any notion of
//! workdir: paths are relative to the workdir root a binary located them in (a
//! binary that names several roots adds its own `workdir`, as serverfs-mcp
//! does). The JSON Schemas clients see are derived from these types (never
//! written by hand) by [`input_schema`] and [`output_schema`]; unknown
//! arguments are rejected.
//!
//! Guarantees of every published schema (so that strict JSON Schema 2020-12
//! validators and schema converters of all clients accept it):
//! - no integer carries a `format` (`uint64` and friends are not standard
//!   formats); every integer carries `minimum` and `maximum`: the argument's
//!   real limits, or the range of its Rust type cut to the integers JSON
//!   numbers hold exactly (±(2^53 − 1)), never 18446744073709551615;
//! - no `type` is an array (`["string", "null"]`): a value that may be
//!   `null` is `anyOf: [{…}, {"type": "null"}]`;
//! - every optional input is nullable that way, `null` meaning "not given":
//!   a client that converts schemas for strict function
//!   calling (every property required) can then leave any of them out by
//!   sending `null`;
//! - an output field that may be absent is never also `null` (outputs skip
//!   it rather than write `null`); only fields always present may be;
//! - no `$schema`: MCP's default dialect is 2020-12, and every keyword used
//!   means the same in draft-07, which older clients assume;
//! - no `description` holds a line break (a doc comment's wrapping is
//!   source layout; a model reads these on every turn).
//!
//! The maxima of `limit` and `max_lines` written here are the defaults'
//! ceilings; a server publishes its configured maxima instead
//! ([`publish_configured_maxima`]).

use std::sync::Arc;

use rmcp::model::JsonObject;
use schemars::generate::SchemaSettings;
use schemars::transform::{Transform, transform_subschemas};
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serverfs_core::EntryKind;
pub use serverfs_search::{FoundEntry, TextMatch, TruncatedReason};

/// The `inputSchema` of a tool whose arguments are `T` (what `T`
/// deserialises from).
pub fn input_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let mut schema = tool_schema::<T>(SchemaSettings::draft2020_12());
    // A tool without arguments still lists its (empty) properties: some
    // clients' converters require the key.
    let object = Arc::make_mut(&mut schema);
    object.entry("properties").or_insert_with(|| Value::Object(JsonObject::new()));
    // Unknown arguments are refused (the `Args` extractor enforces it); said
    // here once for every tool, also for argument types flattened into a
    // binary's own (serverfs-mcp's `workdir`).
    object.insert("additionalProperties".into(), Value::Bool(false));
    schema
}

/// Publishes the configured maxima in `router`'s input schemas (the
/// schema types carry the defaults' ceilings), so that [`crate::Args`]
/// enforces exactly what `tools/list` tells clients. Every router that
/// serves the shared read tools calls it once.
///
/// # Panics
/// If `router` lacks one of the read tools or its argument (a wiring bug
/// every server's tests catch at once).
pub fn publish_configured_maxima<S>(
    router: &mut rmcp::handler::server::router::tool::ToolRouter<S>,
    limits: &crate::Limits,
) {
    let maxima = [
        ("list_directory", "limit", limits.max_list_entries),
        ("find_files", "limit", limits.max_search_results),
        ("search_text", "limit", limits.max_search_results),
        ("read_text_file", "max_lines", limits.max_read_lines),
    ];
    for (tool, argument, max) in maxima {
        let route = router.map.get_mut(tool).expect("a configured tool");
        let schema = Arc::make_mut(&mut route.attr.input_schema);
        let property = schema
            .get_mut("properties")
            .and_then(|p| p.get_mut(argument))
            .and_then(Value::as_object_mut)
            .expect("a configured argument");
        value_schema_mut(property).insert("maximum".into(), max.into());
    }
}

/// Writes configured values into `router`'s tool descriptions: every
/// `placeholder` (e.g. `%MAX_FILE_BYTES%`) in a description becomes its
/// text, so a description never states a size the configuration changed.
pub fn publish_in_descriptions<S>(
    router: &mut rmcp::handler::server::router::tool::ToolRouter<S>,
    values: &[(&str, String)],
) {
    for route in router.map.values_mut() {
        let Some(description) = route.attr.description.as_mut() else { continue };
        if values.iter().any(|(placeholder, _)| description.contains(placeholder)) {
            let mut text = description.to_string();
            for (placeholder, value) in values {
                text = text.replace(placeholder, value);
            }
            *description = text.into();
        }
    }
}

/// A byte count as a person writes it: `256 KiB`, `1 MiB`, else `1000
/// bytes`.
pub fn bytes_text(bytes: u64) -> String {
    const KIB: u64 = 1024;
    match bytes {
        b if b >= KIB * KIB && b % (KIB * KIB) == 0 => format!("{} MiB", b / (KIB * KIB)),
        b if b >= KIB && b % KIB == 0 => format!("{} KiB", b / KIB),
        1 => "1 byte".to_owned(),
        b => format!("{b} bytes"),
    }
}

/// The `outputSchema` of a tool whose structured result is `T` (what `T`
/// serialises to).
pub fn output_schema<T: JsonSchema>() -> Arc<JsonObject> {
    tool_schema::<T>(SchemaSettings::draft2020_12().for_serialize())
}

/// The schema of the values a property takes besides `null`: its non-null
/// `anyOf` branch when it is nullable, else the property itself.
pub fn value_schema(property: &JsonObject) -> &JsonObject {
    let branch = property.get("anyOf").and_then(Value::as_array).and_then(|branches| {
        branches.iter().filter_map(Value::as_object).find(|b| !is_null_type(b))
    });
    branch.unwrap_or(property)
}

/// [`value_schema`], to change.
fn value_schema_mut(property: &mut JsonObject) -> &mut JsonObject {
    let branch = property.get("anyOf").and_then(Value::as_array).and_then(|branches| {
        branches.iter().position(|b| b.as_object().is_some_and(|b| !is_null_type(b)))
    });
    match branch {
        Some(i) => property["anyOf"][i].as_object_mut().expect("an object branch"),
        None => property,
    }
}

fn is_null_type(schema: &JsonObject) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

fn tool_schema<T: JsonSchema>(mut settings: SchemaSettings) -> Arc<JsonObject> {
    let input = !settings.contract.is_serialize();
    // 57 bytes per schema that say what MCP says anyway.
    settings.meta_schema = None;
    let schema =
        settings.with_transform(Portable { input }).into_generator().into_root_schema_for::<T>();
    let Value::Object(mut object) = schema.to_value() else {
        unreachable!("a derived schema of a struct is an object")
    };
    // The type's own name and doc comment say nothing to a model; the tool's
    // description does (as rmcp's own schema helpers do).
    object.remove("title");
    object.remove("description");
    Arc::new(object)
}

/// The transform behind the module's guarantees, applied to every subschema
/// (an object's own keywords first, then its subschemas).
#[derive(Clone, Copy)]
struct Portable {
    /// An input schema (else an output schema).
    input: bool,
}

impl Transform for Portable {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(object) = schema.as_object_mut() {
            one_line_description(object);
            integer_bounds(object);
            if self.input {
                optional_nullable(object);
            } else {
                optional_not_null(object);
            }
            no_type_array(object);
        }
        transform_subschemas(self, schema);
    }
}

/// A description's whitespace runs, line breaks included, become one space.
fn one_line_description(object: &mut JsonObject) {
    if let Some(Value::String(text)) = object.get_mut("description")
        && text.contains(char::is_whitespace)
    {
        *text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    }
}

/// Keywords that describe a property rather than its values: they stay
/// beside an `anyOf` when its values move into a branch.
const ANNOTATIONS: &[&str] = &["description", "title", "default"];

/// `type: [X, "null"]` becomes `anyOf: [{type: X, …}, {type: null}]`.
fn no_type_array(object: &mut JsonObject) {
    let Some(Value::Array(types)) = object.get("type") else { return };
    let mut types: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
    let nullable = types.len() < object.get("type").and_then(Value::as_array).map_or(0, Vec::len);
    let one = match types.len() {
        1 => types.remove(0),
        // Never derived here: a Rust type has one JSON type besides null.
        _ => return,
    };
    object.insert("type".into(), one);
    if nullable {
        make_nullable(object);
    }
}

/// Moves `object`'s value keywords into `anyOf: [{…}, {type: null}]`
/// (annotations stay where they are).
fn make_nullable(object: &mut JsonObject) {
    let keys: Vec<String> =
        object.keys().filter(|k| !ANNOTATIONS.contains(&k.as_str())).cloned().collect();
    let mut branch = JsonObject::new();
    for key in keys {
        if let Some(value) = object.remove(&key) {
            branch.insert(key, value);
        }
    }
    let null = serde_json::json!({"type": "null"});
    object.insert("anyOf".into(), Value::Array(vec![Value::Object(branch), null]));
}

/// The names in `object`'s `required`.
fn required_names(object: &JsonObject) -> Vec<String> {
    object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Input properties left out of `required` become nullable (once: an
/// `Option<T>`'s own `null` is folded in), and lose a `default: null`.
fn optional_nullable(object: &mut JsonObject) {
    let required = required_names(object);
    let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        let Some(property) = property.as_object_mut() else { continue };
        if required.contains(name) {
            continue;
        }
        if property.get("default") == Some(&Value::Null) {
            property.remove("default");
        }
        if let Some(Value::Array(types)) = property.get_mut("type") {
            types.retain(|t| t != "null");
            if let [only] = types.as_slice() {
                let only = only.clone();
                property.insert("type".into(), only);
            }
        }
        let already = property
            .get("anyOf")
            .and_then(Value::as_array)
            .is_some_and(|b| b.iter().filter_map(Value::as_object).any(is_null_type));
        if !already {
            make_nullable(property);
        }
    }
}

/// The largest integer every JSON client reads exactly (2^53 − 1): the
/// published bound of 64-bit integers, whose own range no client can use.
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// An integer loses its `format` and gains the bounds of the Rust type the
/// format names (64-bit ones cut to [`MAX_SAFE_INTEGER`]) where no
/// attribute set tighter ones.
fn integer_bounds(object: &mut serde_json::Map<String, Value>) {
    let integer = match object.get("type") {
        Some(Value::String(t)) => t == "integer",
        // `Option<u64>`, always present: `["integer", "null"]`.
        Some(Value::Array(types)) => types.iter().any(|t| t == "integer"),
        _ => false,
    };
    if !integer {
        return;
    }
    let (min, max): (Value, Value) = match object.remove("format").as_ref().and_then(Value::as_str)
    {
        Some("uint8") => (0.into(), u8::MAX.into()),
        Some("uint16") => (0.into(), u16::MAX.into()),
        Some("uint32") => (0.into(), u32::MAX.into()),
        Some("uint64" | "uint") => (0.into(), MAX_SAFE_INTEGER.into()),
        Some("int8") => (i8::MIN.into(), i8::MAX.into()),
        Some("int16") => (i16::MIN.into(), i16::MAX.into()),
        Some("int32") => (i32::MIN.into(), i32::MAX.into()),
        Some("int64" | "int") => ((-MAX_SAFE_INTEGER).into(), MAX_SAFE_INTEGER.into()),
        // No other integer type is used here; the schema test requires
        // both bounds on every integer.
        _ => return,
    };
    object.entry("minimum").or_insert(min);
    object.entry("maximum").or_insert(max);
}

/// Output properties left out of `required` lose their `null` alternative
/// (and a `default: null`).
fn optional_not_null(object: &mut serde_json::Map<String, Value>) {
    let required = required_names(object);
    let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        if required.contains(name) {
            continue;
        }
        let Some(property) = property.as_object_mut() else { continue };
        if property.get("default") == Some(&Value::Null) {
            property.remove("default");
        }
        match property.get_mut("type") {
            Some(Value::Array(types)) => {
                types.retain(|t| t != "null");
                if let [only] = types.as_slice() {
                    let only = only.clone();
                    property.insert("type".into(), only);
                }
            }
            _ => {
                // `Option<Enum>`: `anyOf: [{$ref}, {type: null}]`.
                if let Some(Value::Array(any_of)) = property.get_mut("anyOf") {
                    any_of.retain(|s| s.get("type").and_then(Value::as_str) != Some("null"));
                    if let [only] = any_of.as_slice() {
                        let only = only.clone();
                        property.remove("anyOf");
                        if let Value::Object(only) = only {
                            property.extend(only);
                        }
                    }
                }
            }
        }
    }
}

/// Arguments of list_directory.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListDirectoryArgs {
    /// Directory; "" is the root.
    #[serde(default)]
    pub path: String,
    /// Entries to skip; past 10000 use cursor.
    #[serde(default)]
    #[schemars(range(max = serverfs_core::entries::MAX_LIST_OFFSET))]
    pub offset: u64,
    /// next_cursor of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Page size; defaults to the server's list limit.
    // The schema's description is empty: the name and the bounds say it,
    // and a model reads every byte on every turn.
    #[schemars(description = "")]
    #[serde(default)]
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u64>,
}

/// One directory entry.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DirectoryEntry {
    /// Entry name.
    pub name: String,
    /// Path relative to the workdir root.
    pub path: String,
    /// Type, size, modification time.
    #[serde(flatten)]
    pub meta: EntryMeta,
}

/// What listings and stat_file say of an entry (never owner, inode, device
/// or link target).
#[derive(Debug, Serialize, JsonSchema)]
pub struct EntryMeta {
    /// Entry type (a symlink is reported as such, never followed).
    #[serde(rename = "type")]
    pub kind: EntryKind,
    /// Size in bytes (files only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Last modification, RFC 3339 UTC.
    pub modified_at: Option<String>,
}

impl From<serverfs_core::entries::EntryInfo> for EntryMeta {
    fn from(info: serverfs_core::entries::EntryInfo) -> Self {
        Self { kind: info.kind, size: info.size, modified_at: info.modified_at }
    }
}

/// One page of a directory.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListDirectoryResult {
    /// Normalised directory path.
    pub path: String,
    /// Entries, sorted by name; hidden and denied entries are left out.
    pub entries: Vec<DirectoryEntry>,
    /// Offset used.
    pub offset: u64,
    /// Limit used.
    pub limit: u64,
    /// Number of entries returned.
    pub returned: u64,
    /// More entries follow; call again with `cursor` = `next_cursor` (or
    /// offset + returned).
    pub has_more: bool,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next_cursor: Option<String>,
    /// Entries left out because their names are not valid UTF-8.
    pub omitted: u64,
}

/// Arguments of find_files.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FindFilesArgs {
    /// Directory to search (default the root).
    #[serde(default)]
    pub path: String,
    /// Glob on names (*.py, {a,b}.txt); with a / it matches the path below
    /// path (** allowed).
    pub pattern: String,
    /// Maximum matches; defaults to the server's search limit.
    #[schemars(description = "")]
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u64>,
    /// next_cursor of a truncated answer.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// What find_files and search_text return.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "{T}Matches")]
pub struct Matches<T> {
    /// Matches in walk order (depth-first, names in byte order), then line
    /// order.
    pub matches: Vec<T>,
    /// Number of matches returned.
    pub returned: u64,
    /// True when more may exist.
    pub truncated: bool,
    /// Why the search stopped, when truncated.
    pub truncated_reason: Option<TruncatedReason>,
    /// What was passed over without being searched: a search with no match
    /// but a non-zero count here did not see everything.
    pub skipped: SkippedCounts,
    /// When truncated: pass as `cursor`, with the same other arguments, to
    /// continue exactly where this answer stopped (no duplicate, no gap);
    /// null otherwise.
    pub next_cursor: Option<String>,
}

/// Files and directories a find/search passed over, by reason.
#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct SkippedCounts {
    /// Could not be read by the server (permissions, a path too long, a line
    /// over 8 MiB).
    pub unreadable: u64,
    /// Larger than SERVERFS_SEARCH_MAX_FILE_BYTES (search_text).
    pub too_large: u64,
    /// Contain NUL bytes (search_text).
    pub binary: u64,
}

impl From<serverfs_search::Skipped> for SkippedCounts {
    fn from(s: serverfs_search::Skipped) -> Self {
        Self { unreadable: s.unreadable, too_large: s.too_large, binary: s.binary }
    }
}

impl<T> Matches<T> {
    /// From the search library's outcome (its match types are the wire's).
    pub(crate) fn from_outcome(outcome: serverfs_search::Outcome<T>) -> Self {
        let matches = outcome.matches;
        Self {
            returned: matches.len() as u64,
            matches,
            truncated: outcome.truncated_reason.is_some(),
            truncated_reason: outcome.truncated_reason,
            skipped: outcome.skipped.into(),
            next_cursor: outcome.next_cursor,
        }
    }
}

/// find_files result.
pub type FindFilesResult = Matches<FoundEntry>;

/// Arguments of search_text.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchTextArgs {
    /// Directory or file to search (default the root).
    #[serde(default)]
    pub path: String,
    /// Literal text, not a regular expression.
    #[schemars(length(min = 1, max = serverfs_search::MAX_QUERY_CHARS))]
    pub query: String,
    /// Glob on file names (*.rs).
    #[serde(default)]
    pub glob: Option<String>,
    /// Match case exactly.
    #[schemars(description = "")]
    #[serde(default = "yes")]
    pub case_sensitive: bool,
    /// Maximum matches; defaults to the server's search limit.
    #[schemars(description = "")]
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u64>,
    /// next_cursor of a truncated answer.
    #[serde(default)]
    pub cursor: Option<String>,
}

fn yes() -> bool {
    true
}

/// search_text result.
pub type SearchTextResult = Matches<TextMatch>;

/// Arguments of read_text_file.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadTextFileArgs {
    /// File path relative to the workdir root.
    #[schemars(description = "")]
    pub path: String,
    /// First line (default 1); negative counts from the end (-1 is the
    /// last line).
    #[serde(default)]
    // JSON's exactly representable integers: what every client can send.
    #[schemars(range(min = -9_007_199_254_740_991_i64, max = 9_007_199_254_740_991_i64))]
    pub start_line: Option<i64>,
    /// Lines to return (default 200).
    #[serde(default)]
    #[schemars(range(min = 1, max = 500))]
    pub max_lines: Option<u64>,
}

/// One page of a text file.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadTextFileResult {
    /// Normalised file path.
    pub path: String,
    /// First line of the page: the one asked for, or (asked from the end)
    /// the first line's negative position when the file has fewer lines.
    /// Positions are negative whenever `start_line` was.
    pub start_line: i64,
    /// Last line returned (-1 is the file's last line); null when nothing
    /// was returned.
    pub end_line: Option<i64>,
    /// The lines, with their original terminators.
    pub content: String,
    /// UTF-8 length of `content`.
    pub bytes_returned: u64,
    /// More lines follow `end_line`.
    pub has_more: bool,
    /// Pass as `start_line` to continue forward; null at the end.
    pub next_start_line: Option<i64>,
}

/// Arguments of stat_file.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct StatFileArgs {
    /// Path; "" is the root.
    pub path: String,
}

/// Metadata of one entry.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StatFileResult {
    /// Normalised path.
    pub path: String,
    /// Type, size, modification time.
    #[serde(flatten)]
    pub meta: EntryMeta,
    /// Best guess from the name for files (text/plain for UTF-8 text whose
    /// name says nothing); null otherwise.
    pub mime_type: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_written_as_people_write_them() {
        assert_eq!(bytes_text(262_144), "256 KiB");
        assert_eq!(bytes_text(1 << 20), "1 MiB");
        assert_eq!(bytes_text(1536 * 1024), "1536 KiB");
        assert_eq!(bytes_text(1000), "1000 bytes");
        assert_eq!(bytes_text(1), "1 byte");
    }

    #[derive(Deserialize, JsonSchema)]
    struct Wrapped {
        /// A doc comment
        /// wrapped  over lines.
        #[allow(dead_code, reason = "only its schema is used")]
        field: Option<String>,
    }

    #[test]
    fn descriptions_are_one_line_and_no_dialect_is_named() {
        let schema = input_schema::<Wrapped>();
        let field = &schema["properties"]["field"];
        assert_eq!(field["description"], "A doc comment wrapped over lines.", "{field}");
        assert!(!schema.contains_key("$schema"), "{schema:?}");
    }
}
