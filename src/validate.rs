//! Tool inputs and outputs against their JSON Schemas (draft 2020-12).
//!
//! A [`Schemas`] is compiled once per manifest. Inputs get the schema's
//! `default`s filled in (top-level and nested object properties) before
//! they are validated, and every violation is reported with its JSON
//! pointer; outputs are checked the same way but their violations are only
//! warnings (the seed says the output is still returned).

use jsonschema::Validator;
use serde::Serialize;
use serde_json::{Map, Value};

/// Errors compiling a schema.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// The schema is not a valid 2020-12 schema.
    #[error("{which} is not a valid JSON Schema: {message}")]
    InvalidSchema {
        which: &'static str,
        message: String,
    },
}

impl ValidateError {
    /// The Outcome's error kind: the manifest's schemas are broken.
    pub fn kind(&self) -> crate::kind::ErrorKind {
        crate::kind::ErrorKind::ManifestInvalid
    }
}

/// One way an instance breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// JSON pointer to the offending value ("" for the whole document).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

/// The compiled schemas of one tool.
pub struct Schemas {
    input: Validator,
    input_schema: Value,
    output: Option<Validator>,
}

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schemas").finish_non_exhaustive()
    }
}

fn compile(which: &'static str, schema: &Value) -> Result<Validator, ValidateError> {
    jsonschema::draft202012::new(schema).map_err(|e| ValidateError::InvalidSchema {
        which,
        message: e.to_string(),
    })
}

impl Schemas {
    /// Compiles `inputs.schema` and, if any, `outputs.schema`.
    pub fn compile(input: &Value, output: Option<&Value>) -> Result<Schemas, ValidateError> {
        Ok(Schemas {
            input: compile("inputs.schema", input)?,
            input_schema: input.clone(),
            output: output.map(|s| compile("outputs.schema", s)).transpose()?,
        })
    }

    /// Fills defaults into `params`, then validates it. Returns the
    /// completed parameters or every violation.
    pub fn check_input(&self, mut params: Value) -> Result<Value, Vec<Violation>> {
        apply_defaults(&self.input_schema, &mut params);
        let violations = violations(&self.input, &params);
        if violations.is_empty() {
            Ok(params)
        } else {
            Err(violations)
        }
    }

    /// Violations of `outputs.schema` (empty when there is none).
    pub fn check_output(&self, output: &Value) -> Vec<Violation> {
        self.output
            .as_ref()
            .map(|v| violations(v, output))
            .unwrap_or_default()
    }
}

fn violations(validator: &Validator, instance: &Value) -> Vec<Violation> {
    validator
        .iter_errors(instance)
        .map(|e| Violation {
            pointer: e.instance_path().as_str().to_owned(),
            message: e.to_string(),
        })
        .collect()
}

/// Fills the `default` of every absent property of an object schema,
/// recursing into object properties that are present (or just defaulted).
fn apply_defaults(schema: &Value, instance: &mut Value) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let Some(obj) = instance.as_object_mut() else {
        return;
    };
    for (name, sub) in props {
        if !obj.contains_key(name) {
            if let Some(d) = sub.get("default") {
                obj.insert(name.clone(), d.clone());
            }
        }
        if let Some(child) = obj.get_mut(name) {
            apply_defaults(sub, child);
        }
    }
}

/// Parameters as an object map (`null` and absent mean `{}`).
pub fn as_object(params: &Value) -> Option<&Map<String, Value>> {
    params.as_object()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemas() -> Schemas {
        Schemas::compile(
            &json!({
                "type": "object", "additionalProperties": false, "required": ["query"],
                "properties": {
                    "query": {"type": "string"},
                    "count": {"type": "integer", "default": 10},
                    "opts": {"type": "object", "properties": {"deep": {"type": "boolean", "default": true}}, "default": {}}
                }
            }),
            Some(&json!({"type": "array"})),
        )
        .unwrap()
    }

    #[test]
    fn defaults_are_filled_before_validation() {
        let out = schemas().check_input(json!({"query": "x"})).unwrap();
        assert_eq!(
            out,
            json!({"query": "x", "count": 10, "opts": {"deep": true}})
        );
    }

    #[test]
    fn every_violation_has_its_pointer() {
        let v = schemas()
            .check_input(json!({"count": "ten", "extra": 1}))
            .unwrap_err();
        let pointers: Vec<&str> = v.iter().map(|v| v.pointer.as_str()).collect();
        assert!(pointers.contains(&"/count"), "{v:?}");
        assert!(pointers.contains(&""), "{v:?}"); // missing query, extra property
        assert!(v.len() >= 3, "{v:?}");
    }

    #[test]
    fn output_violations_are_reported() {
        let s = schemas();
        assert!(s.check_output(&json!([1])).is_empty());
        assert_eq!(s.check_output(&json!({"a": 1})).len(), 1);
    }

    #[test]
    fn an_invalid_schema_is_an_error() {
        assert!(Schemas::compile(&json!({"type": 12}), None).is_err());
    }
}
