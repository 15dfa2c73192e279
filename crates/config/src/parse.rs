//! Reads one JSONC config file into a [`Layer`], checking it against the schema as it
//! goes so that every mistake (an unknown key, a wrong type) is reported with the file,
//! line and column, and for unknown keys the closest valid key.

use std::path::Path;

use jsonc_parser::{
    ast::{Object, Value},
    common::Ranged,
    CollectOptions, ParseOptions,
};

use crate::{
    keys::{section_keys, BOOL_KEYS, LIST_KEYS, MODE_KEY, NUMBER_LISTS, TOP_KEYS, VALUE_KEYS},
    suggest, CommandRule, ConfigError, Layer, LayerKind, Location, Network, Origin, Sourced,
};

/// Parses `text` (the contents of `path`) as one configuration layer.
pub fn parse_layer(text: &str, path: &Path, kind: LayerKind) -> Result<Layer, ConfigError> {
    let reader = Reader { text, path, kind, line_starts: line_starts(text) };
    let parse_options = ParseOptions {
        allow_loose_object_property_names: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_missing_commas: false,
        ..ParseOptions::default()
    };
    let parsed = jsonc_parser::parse_to_ast(text, &CollectOptions::default(), &parse_options).map_err(|err| {
        ConfigError::Invalid {
            path: path.to_owned(),
            line: err.line_display(),
            column: err.column_display(),
            message: err.kind().to_string(),
        }
    })?;
    let mut layer = Layer::default();
    let Some(value) = parsed.value else {
        return Ok(layer); // an empty file is an empty layer
    };
    let root = reader.object(&value, "the configuration")?;
    for prop in &root.properties {
        let key = prop.name.as_str();
        match key {
            "$schema" => {}
            // The older form: the mode alone.
            "network" if matches!(prop.value, Value::StringLit(_)) => {
                layer.network = Some(reader.mode(&prop.value, "network")?);
            }
            "project" => {
                let text = reader.string(&prop.value, "project")?;
                let read_only = match text {
                    "ro" => true,
                    "rw" => false,
                    _ => {
                        return Err(
                            reader.error(&prop.value, format!("project: expected \"ro\" or \"rw\", got {text:?}"))
                        )
                    }
                };
                layer.project_read_only = Some(reader.sourced(&prop.value, read_only));
            }
            "commands" => {
                let object = reader.object(&prop.value, "commands")?;
                for prop in &object.properties {
                    let name = prop.name.as_str();
                    crate::check_command_name(name)
                        .map_err(|message| reader.error(&prop.name, format!("commands: {message}")))?;
                    let rule = match &prop.value {
                        Value::BooleanLit(lit) if lit.value => CommandRule::Allow,
                        Value::BooleanLit(_) => CommandRule::Deny,
                        Value::StringLit(lit) if lit.value == "true" || lit.value == "false" => {
                            return Err(reader
                                .error(&prop.value, format!("commands.{name}: write {} without quotes", lit.value)))
                        }
                        Value::StringLit(lit) if !lit.value.is_empty() => CommandRule::parse(&lit.value),
                        other => {
                            return Err(reader.error(
                                other,
                                format!("commands.{name}: expected true, false, \"@preset\" or a wrapper script path"),
                            ))
                        }
                    };
                    layer.commands.push((name.to_owned(), reader.sourced(&prop.value, rule)));
                }
            }
            section if TOP_KEYS.contains(&section) => {
                let what = if section == "network" { "network: expected a string or an object" } else { section };
                let object = reader.object(&prop.value, what)?;
                for prop in &object.properties {
                    let key = format!("{section}.{}", prop.name.as_str());
                    if key == MODE_KEY {
                        layer.network = Some(reader.mode(&prop.value, MODE_KEY)?);
                    } else if let Some(list_key) = LIST_KEYS.iter().find(|list_key| list_key.key == key) {
                        reader.strings(&prop.value, &key, (list_key.layer)(&mut layer))?;
                    } else if let Some(bool_key) = BOOL_KEYS.iter().find(|bool_key| bool_key.key == key) {
                        let Value::BooleanLit(lit) = &prop.value else {
                            return Err(reader.error(&prop.value, format!("{key}: expected true or false")));
                        };
                        *(bool_key.layer)(&mut layer) = Some(reader.sourced(&prop.value, lit.value));
                    } else if let Some(value_key) = VALUE_KEYS.iter().find(|value_key| value_key.key == key) {
                        let text = match &prop.value {
                            Value::StringLit(lit) => lit.value.to_string(),
                            Value::NumberLit(number) => number.value.to_owned(),
                            other => return Err(reader.error(other, format!("{key}: expected a string or a number"))),
                        };
                        crate::limits::parse(&text, value_key.unit)
                            .map_err(|message| reader.error(&prop.value, format!("{key}: {message}")))?;
                        *(value_key.layer)(&mut layer) = Some(reader.sourced(&prop.value, text));
                    } else {
                        let valid = section_keys(section);
                        return Err(reader.unknown_key(prop, &format!("{section}."), prop.name.as_str(), &valid));
                    }
                }
            }
            other => return Err(reader.unknown_key(prop, "", other, TOP_KEYS)),
        }
    }
    Ok(layer)
}

struct Reader<'a> {
    text: &'a str,
    path: &'a Path,
    kind: LayerKind,
    /// Where each line starts ([`line_starts`]): every value is located, so looking one
    /// up must not scan the text from its start.
    line_starts: Vec<usize>,
}

/// The byte offset at which each line of `text` starts, counted as jsonc-parser counts
/// lines for its syntax errors: `\n` and a lone `\r` end a line.
fn line_starts(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let ends = bytes
        .iter()
        .enumerate()
        .filter(|&(idx, &byte)| byte == b'\n' || (byte == b'\r' && bytes.get(idx + 1) != Some(&b'\n')));
    std::iter::once(0).chain(ends.map(|(idx, _)| idx + 1)).collect()
}

impl Reader<'_> {
    /// 1-based, counted as jsonc-parser counts for its syntax errors (a lone `\r` ends a
    /// line too), so that every position in one file means the same place.
    fn line_column(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let line_start = self.line_starts[line - 1];
        (line, self.text[line_start..offset].chars().count() + 1)
    }

    fn error(&self, node: &impl Ranged, message: String) -> ConfigError {
        let (line, column) = self.line_column(node.start());
        ConfigError::Invalid { path: self.path.to_owned(), line, column, message }
    }

    fn unknown_key(
        &self,
        prop: &jsonc_parser::ast::ObjectProp<'_>,
        prefix: &str,
        key: &str,
        valid: &[&str],
    ) -> ConfigError {
        let hint = match suggest(key, valid) {
            Some(best) => format!(" (did you mean \"{prefix}{best}\"?)"),
            None => format!(" (valid keys: {})", valid.join(", ")),
        };
        self.error(&prop.name, format!("unknown key \"{prefix}{key}\"{hint}"))
    }

    fn sourced<T>(&self, node: &impl Ranged, value: T) -> Sourced<T> {
        let location = match self.kind {
            LayerKind::Default => Location::Builtin,
            _ => {
                let (line, column) = self.line_column(node.start());
                Location::File { path: self.path.to_owned(), line, column }
            }
        };
        Sourced { value, origin: Origin { layer: self.kind.clone(), location } }
    }

    fn object<'v, 'a>(&self, value: &'v Value<'a>, what: &str) -> Result<&'v Object<'a>, ConfigError> {
        match value {
            Value::Object(object) => Ok(object),
            other if what.contains(": expected") => Err(self.error(other, what.to_owned())),
            other => Err(self.error(other, format!("{what}: expected an object"))),
        }
    }

    fn mode(&self, value: &Value<'_>, what: &str) -> Result<Sourced<Network>, ConfigError> {
        let text = self.string(value, what)?;
        let network = Network::parse(text)
            .ok_or_else(|| self.error(value, format!("{what}: {}, got {text:?}", Network::EXPECTED)))?;
        Ok(self.sourced(value, network))
    }

    fn string<'v>(&self, value: &'v Value<'_>, what: &str) -> Result<&'v str, ConfigError> {
        match value {
            Value::StringLit(lit) => Ok(&lit.value),
            other => Err(self.error(other, format!("{what}: expected a string"))),
        }
    }

    fn strings(&self, value: &Value<'_>, what: &str, out: &mut Vec<Sourced<String>>) -> Result<(), ConfigError> {
        let Value::Array(array) = value else {
            return Err(self.error(value, format!("{what}: expected an array of strings")));
        };
        for element in &array.elements {
            if let (Value::NumberLit(number), true) = (element, NUMBER_LISTS.contains(&what)) {
                out.push(self.sourced(element, number.value.to_owned()));
                continue;
            }
            let text = self.string(element, what)?;
            if text.is_empty() {
                return Err(self.error(element, format!("{what}: empty string")));
            }
            out.push(self.sourced(element, text.to_owned()));
        }
        Ok(())
    }
}
