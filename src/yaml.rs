//! YAML with positions: parses a document with saphyr's marked nodes and turns
//! it into a [`serde_json::Value`] plus a [`PositionIndex`] that maps every
//! JSON pointer of the value to the line and column of its key and its value.
//!
//! Everything downstream (schema validation, lint rules, the model) works on
//! JSON; the index brings each finding back to `file:line:col`.

use std::collections::HashMap;

use saphyr::{MarkedYaml, Scalar, ScanError, YamlData, YamlLoader};
use saphyr_parser::{Event, Parser, SpannedEventReceiver};
use serde_json::{Map, Number, Value};

/// Largest YAML document glovebox decodes, in bytes. A tool manifest or a
/// config file is a few kilobytes; anything bigger is refused unread.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// Deepest nesting of mappings and sequences glovebox accepts. Real
/// manifests stay under ten levels; the cap bounds every recursion that
/// later walks the value (schema compilation, validation, serde).
pub const MAX_DEPTH: usize = 100;

/// A 1-based line and column in a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, serde::Serialize)]
pub struct Position {
    /// Line, counted from 1.
    pub line: usize,
    /// Column in characters, counted from 1.
    pub col: usize,
}

impl Position {
    /// The start of a file (1:1).
    pub const START: Position = Position { line: 1, col: 1 };

    fn from_marker(marker: &saphyr::Marker) -> Self {
        Position {
            line: marker.line().max(1),
            col: marker.col() + 1,
        }
    }
}

/// Where a node sits in the source: its key (absent for the root and for
/// sequence items) and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodePosition {
    /// Position of the mapping key that introduces the node, if any.
    pub key: Option<Position>,
    /// Position of the node's value.
    pub value: Position,
}

/// JSON pointer (RFC 6901) → position of the node in the YAML source.
#[derive(Debug, Clone, Default)]
pub struct PositionIndex {
    nodes: HashMap<String, NodePosition>,
}

impl PositionIndex {
    /// The exact entry for `pointer`, if the document has that node.
    pub fn get(&self, pointer: &str) -> Option<NodePosition> {
        self.nodes.get(pointer).copied()
    }

    /// Position of the value at `pointer`, or of its nearest existing
    /// ancestor's value when the node itself is absent.
    pub fn value(&self, pointer: &str) -> Position {
        self.nearest(pointer).value
    }

    /// Position of the key that introduces `pointer` (its value for the root
    /// and sequence items), or of its nearest existing ancestor.
    pub fn key(&self, pointer: &str) -> Position {
        let node = self.nearest(pointer);
        node.key.unwrap_or(node.value)
    }

    /// Records `at` as the position of `pointer` (used when one document
    /// is derived from another, e.g. a Glee v1 file mapped to the v2 model,
    /// so findings about the derived value point into the original file).
    pub fn insert(&mut self, pointer: &str, at: NodePosition) {
        self.nodes.insert(pointer.to_owned(), at);
    }

    /// The position of `pointer`, or of its nearest existing ancestor.
    pub fn node(&self, pointer: &str) -> NodePosition {
        self.nearest(pointer)
    }

    /// Copies every position of `from` at or below `src` to the same
    /// relative pointer below `dst`.
    pub fn graft(&mut self, from: &PositionIndex, src: &str, dst: &str) {
        self.insert(dst, from.nearest(src));
        for (pointer, at) in &from.nodes {
            if let Some(rest) = pointer.strip_prefix(src) {
                if rest.starts_with('/') {
                    self.nodes.insert(format!("{dst}{rest}"), *at);
                }
            }
        }
    }

    fn nearest(&self, pointer: &str) -> NodePosition {
        let mut current = pointer;
        loop {
            if let Some(found) = self.nodes.get(current) {
                return *found;
            }
            match current.rfind('/') {
                Some(cut) => current = &current[..cut],
                None => {
                    return NodePosition {
                        key: None,
                        value: Position::START,
                    }
                }
            }
        }
    }
}

/// A parsed YAML document: its JSON value and where each node came from.
#[derive(Debug, Clone)]
pub struct Document {
    /// The document as JSON (an empty document is `null`).
    pub value: Value,
    /// JSON pointer → source position.
    pub positions: PositionIndex,
}

/// Why a YAML document could not be turned into JSON.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// The text is not valid YAML.
    #[error("{message}")]
    Syntax {
        /// Where the scanner or loader stopped.
        at: Position,
        /// The parser's explanation, lowercase.
        message: String,
    },
    /// A construct that has no JSON equivalent (complex key, NaN, bad tag).
    #[error("{message}")]
    Unsupported {
        /// Where the construct starts.
        at: Position,
        /// What is unsupported and what to write instead.
        message: String,
    },
    /// The file holds more than one YAML document.
    #[error("found several yaml documents; keep one document per file (remove the extra `---`)")]
    SeveralDocuments {
        /// Where the second document starts.
        at: Position,
    },
    /// The input exceeds [`MAX_DOCUMENT_BYTES`].
    #[error("file is {size} bytes, larger than the {limit}-byte limit; shrink it", limit = MAX_DOCUMENT_BYTES)]
    TooLarge {
        /// Size of the input in bytes.
        size: usize,
    },
}

impl YamlError {
    /// Where in the source the problem is.
    pub fn position(&self) -> Position {
        match self {
            YamlError::Syntax { at, .. }
            | YamlError::Unsupported { at, .. }
            | YamlError::SeveralDocuments { at } => *at,
            YamlError::TooLarge { .. } => Position::START,
        }
    }
}

impl From<ScanError> for YamlError {
    fn from(err: ScanError) -> Self {
        YamlError::Syntax {
            at: Position::from_marker(err.marker()),
            message: lowercase_first(err.info()),
        }
    }
}

/// Parses one YAML document into JSON plus a position index.
pub fn parse(source: &str) -> Result<Document, YamlError> {
    if source.len() > MAX_DOCUMENT_BYTES {
        return Err(YamlError::TooLarge { size: source.len() });
    }
    let docs = load_bounded(source)?;
    let mut docs = docs.into_iter();
    let Some(root) = docs.next() else {
        return Ok(Document {
            value: Value::Null,
            positions: PositionIndex::default(),
        });
    };
    if let Some(extra) = docs.next() {
        return Err(YamlError::SeveralDocuments {
            at: Position::from_marker(&extra.span.start),
        });
    }
    let mut positions = PositionIndex::default();
    let mut pointer = String::new();
    let value = convert(&root, None, 0, &mut pointer, &mut positions)?;
    Ok(Document { value, positions })
}

/// Loads marked nodes, driving the parser event by event so nesting deeper
/// than [`MAX_DEPTH`] is refused before anything recurses on it (saphyr's
/// own loader recurses once per level, which a line of `- - - …` turns into
/// a stack overflow).
fn load_bounded(source: &str) -> Result<Vec<MarkedYaml<'_>>, YamlError> {
    let mut loader = YamlLoader::<MarkedYaml<'_>>::default();
    let mut depth = 0usize;
    for item in Parser::new_from_str(source) {
        let (event, span) = item?;
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(YamlError::Unsupported {
                        at: Position::from_marker(&span.start),
                        message: format!(
                            "nesting deeper than {MAX_DEPTH} levels; flatten the document"
                        ),
                    });
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
        loader.on_event(event, span);
        if let Some(err) = loader.error() {
            return Err(err.clone().into());
        }
    }
    Ok(loader.into_documents())
}

/// Appends one reference token to a JSON pointer, escaping `~` and `/`.
pub fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            _ => pointer.push(c),
        }
    }
}

/// Builds a JSON pointer from unescaped tokens.
pub fn pointer_of<'a>(tokens: impl IntoIterator<Item = &'a str>) -> String {
    let mut pointer = String::new();
    for token in tokens {
        push_token(&mut pointer, token);
    }
    pointer
}

fn convert(
    node: &MarkedYaml<'_>,
    key: Option<Position>,
    depth: usize,
    pointer: &mut String,
    positions: &mut PositionIndex,
) -> Result<Value, YamlError> {
    let at = Position::from_marker(&node.span.start);
    if depth > MAX_DEPTH {
        return Err(YamlError::Unsupported {
            at,
            message: format!("nesting deeper than {MAX_DEPTH} levels; flatten the document"),
        });
    }
    positions
        .nodes
        .insert(pointer.clone(), NodePosition { key, value: at });
    match &node.data {
        YamlData::Value(scalar) => scalar_to_json(scalar, at),
        YamlData::Representation(text, _, _) => Ok(Value::String(text.to_string())),
        YamlData::Tagged(_, inner) => convert(inner, key, depth, pointer, positions),
        YamlData::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                push_token(pointer, &i.to_string());
                let converted = convert(item, None, depth + 1, pointer, positions);
                pointer.truncate(len);
                out.push(converted?);
            }
            Ok(Value::Array(out))
        }
        YamlData::Mapping(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                let key_at = Position::from_marker(&k.span.start);
                let name = key_to_string(k, key_at)?;
                let len = pointer.len();
                push_token(pointer, &name);
                let converted = convert(v, Some(key_at), depth + 1, pointer, positions);
                pointer.truncate(len);
                out.insert(name, converted?);
            }
            Ok(Value::Object(out))
        }
        YamlData::Alias(_) => Err(YamlError::Unsupported {
            at,
            message: "unresolved alias; define the anchor before using it".to_owned(),
        }),
        YamlData::BadValue => Err(YamlError::Unsupported {
            at,
            message: "value does not match its tag; remove the tag or fix the value".to_owned(),
        }),
    }
}

fn scalar_to_json(scalar: &Scalar<'_>, at: Position) -> Result<Value, YamlError> {
    Ok(match scalar {
        Scalar::Null => Value::Null,
        Scalar::Boolean(b) => Value::Bool(*b),
        Scalar::Integer(i) => Value::Number(Number::from(*i)),
        Scalar::FloatingPoint(f) => match Number::from_f64(f.into_inner()) {
            Some(n) => Value::Number(n),
            None => {
                return Err(YamlError::Unsupported {
                    at,
                    message: "infinite or NaN numbers have no JSON form; quote the value"
                        .to_owned(),
                })
            }
        },
        Scalar::String(s) => Value::String(s.to_string()),
    })
}

fn key_to_string(key: &MarkedYaml<'_>, at: Position) -> Result<String, YamlError> {
    match &key.data {
        YamlData::Value(Scalar::String(s)) => Ok(s.to_string()),
        YamlData::Value(Scalar::Integer(i)) => Ok(i.to_string()),
        YamlData::Value(Scalar::Boolean(b)) => Ok(b.to_string()),
        YamlData::Value(Scalar::Null) => Ok("null".to_owned()),
        YamlData::Value(Scalar::FloatingPoint(f)) => Ok(f.into_inner().to_string()),
        YamlData::Representation(text, _, _) => Ok(text.to_string()),
        YamlData::Tagged(_, inner) => key_to_string(inner, at),
        _ => Err(YamlError::Unsupported {
            at,
            message: "mapping keys must be plain scalars; use a string key".to_owned(),
        }),
    }
}

/// Renders a JSON value as a YAML document (block style, literal blocks for
/// multi-line strings), without the leading `---`.
pub fn emit(value: &Value) -> Result<String, YamlError> {
    let yaml = to_yaml(value);
    let mut out = String::new();
    let mut emitter = saphyr::YamlEmitter::new(&mut out);
    emitter.multiline(true);
    emitter.dump(&yaml).map_err(|e| YamlError::Unsupported {
        at: Position::START,
        message: format!("cannot render yaml: {e}"),
    })?;
    let body = out.strip_prefix("---\n").unwrap_or(&out);
    let mut body = body.to_owned();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    Ok(body)
}

fn to_yaml(value: &Value) -> saphyr::Yaml<'static> {
    use saphyr::Yaml;
    match value {
        Value::Null => Yaml::Value(Scalar::Null),
        Value::Bool(b) => Yaml::Value(Scalar::Boolean(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Yaml::Value(Scalar::Integer(i)),
            (None, Some(f)) => Yaml::Value(Scalar::FloatingPoint(f.into())),
            (None, None) => Yaml::Value(Scalar::String(n.to_string().into())),
        },
        Value::String(s) => Yaml::Value(Scalar::String(s.clone().into())),
        Value::Array(items) => Yaml::Sequence(items.iter().map(to_yaml).collect()),
        Value::Object(map) => {
            let mut out = saphyr::Mapping::new();
            for (k, v) in map {
                out.insert(Yaml::Value(Scalar::String(k.clone().into())), to_yaml(v));
            }
            Yaml::Mapping(out)
        }
    }
}

/// `text` with its first character lowercased: diagnostics are lowercase
/// sentences, whatever library produced the underlying message.
pub(crate) fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn positions_of_keys_and_values() {
        let doc = parse("name: x\nexec:\n  command:\n    args: [\"a\", b]\n").unwrap();
        assert_eq!(doc.value["exec"]["command"]["args"][1], "b");
        let name = doc.positions.get("/name").unwrap();
        assert_eq!(name.key, Some(Position { line: 1, col: 1 }));
        assert_eq!(name.value, Position { line: 1, col: 7 });
        let args = doc.positions.get("/exec/command/args").unwrap();
        assert_eq!(args.key, Some(Position { line: 4, col: 5 }));
        assert_eq!(
            doc.positions.value("/exec/command/args/1"),
            Position { line: 4, col: 17 }
        );
        // Missing nodes fall back to the nearest ancestor.
        assert_eq!(doc.positions.key("/exec/command/nope").line, 3);
    }

    #[test]
    fn syntax_error_has_position() {
        let err = parse("a: b\n  c: [\n").unwrap_err();
        assert!(matches!(err, YamlError::Syntax { .. }));
        assert!(err.position().line >= 2);
    }

    #[test]
    fn duplicate_key_is_an_error() {
        let err = parse("a: 1\na: 2\n").unwrap_err();
        assert_eq!(err.position().line, 2);
    }

    #[test]
    fn pointer_escaping() {
        let doc = parse("\"a/b~c\": 1\n").unwrap();
        assert!(doc.positions.get("/a~1b~0c").is_some());
        assert_eq!(pointer_of(["a/b~c"]), "/a~1b~0c");
    }

    #[test]
    fn several_documents_rejected() {
        let err = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(matches!(err, YamlError::SeveralDocuments { .. }));
    }

    #[test]
    fn emit_round_trips() {
        let text = "a: 1\nb:\n  - \"x\"\n  - \"true\"\nc: |\n  two\n  lines\nd: {}\n";
        let doc = parse(text).unwrap();
        let emitted = emit(&doc.value).unwrap();
        assert_eq!(parse(&emitted).unwrap().value, doc.value, "{emitted}");
    }

    #[test]
    fn nesting_is_capped() {
        let mut text = String::new();
        for i in 0..=MAX_DEPTH + 1 {
            text.push_str(&"  ".repeat(i));
            text.push_str("k:\n");
        }
        let err = parse(&text).unwrap_err();
        assert!(matches!(err, YamlError::Unsupported { .. }), "{err}");
    }

    #[test]
    fn deep_block_sequences_are_refused_without_recursing() {
        let text = format!("{}x\n", "- ".repeat(200_000));
        let err = parse(&text).unwrap_err();
        assert!(matches!(err, YamlError::Unsupported { .. }), "{err}");
    }

    #[test]
    fn anchors_and_aliases_resolve() {
        let doc = parse("a: &x {k: 1}\nb: *x\n").unwrap();
        assert_eq!(doc.value["b"]["k"], 1);
    }

    #[test]
    fn empty_is_null() {
        assert_eq!(parse("").unwrap().value, Value::Null);
    }
}
