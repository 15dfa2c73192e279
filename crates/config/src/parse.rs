//! Reads one JSONC config file into a [`Layer`], checking it against the schema as it
//! goes so that every mistake (an unknown key, a wrong type) is reported with the file,
//! line and column, and for unknown keys the closest valid key.

use std::path::Path;

use jsonc_parser::{
    ast::{Object, Value},
    common::Ranged,
    CollectOptions, ParseOptions,
};

use crate::{suggest, CommandRule, ConfigError, Layer, LayerKind, Location, Network, Origin, Sourced};

const TOP_KEYS: &[&str] = &["network", "filesystem", "secrets", "env", "commands", "git", "checks", "$schema"];
const FILESYSTEM_KEYS: &[&str] = &["presets", "ro", "rw", "exclude"];
const SECRETS_KEYS: &[&str] = &["patterns", "allow"];
const ENV_KEYS: &[&str] = &["secretPatterns", "allow", "block"];
const GIT_KEYS: &[&str] = &["allowBranchDeletion", "allowPlumbingCommits"];
const CHECKS_KEYS: &[&str] = &["commands", "protectedPaths", "humans"];

/// Parses `text` (the contents of `path`) as one configuration layer.
pub fn parse_layer(text: &str, path: &Path, kind: LayerKind) -> Result<Layer, ConfigError> {
    let reader = Reader { text, path, kind };
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
            "network" => {
                let text = reader.string(&prop.value, "network")?;
                let network = Network::parse(text).ok_or_else(|| {
                    reader.error(&prop.value, format!("network: expected \"on\" or \"off\", got {text:?}"))
                })?;
                layer.network = Some(reader.sourced(&prop.value, network));
            }
            "filesystem" => {
                let object = reader.object(&prop.value, "filesystem")?;
                for prop in &object.properties {
                    let list = match prop.name.as_str() {
                        "presets" => &mut layer.presets,
                        "ro" => &mut layer.ro,
                        "rw" => &mut layer.rw,
                        "exclude" => &mut layer.exclude,
                        other => return Err(reader.unknown_key(prop, "filesystem.", other, FILESYSTEM_KEYS)),
                    };
                    reader.strings(&prop.value, &format!("filesystem.{}", prop.name.as_str()), list)?;
                }
            }
            "secrets" => {
                let object = reader.object(&prop.value, "secrets")?;
                for prop in &object.properties {
                    let list = match prop.name.as_str() {
                        "patterns" => &mut layer.secret_patterns,
                        "allow" => &mut layer.secret_allow,
                        other => return Err(reader.unknown_key(prop, "secrets.", other, SECRETS_KEYS)),
                    };
                    reader.strings(&prop.value, &format!("secrets.{}", prop.name.as_str()), list)?;
                }
            }
            "env" => {
                let object = reader.object(&prop.value, "env")?;
                for prop in &object.properties {
                    let list = match prop.name.as_str() {
                        "secretPatterns" => &mut layer.env_secret_patterns,
                        "allow" => &mut layer.env_allow,
                        "block" => &mut layer.env_block,
                        other => return Err(reader.unknown_key(prop, "env.", other, ENV_KEYS)),
                    };
                    reader.strings(&prop.value, &format!("env.{}", prop.name.as_str()), list)?;
                }
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
            "git" => {
                let object = reader.object(&prop.value, "git")?;
                for prop in &object.properties {
                    let slot = match prop.name.as_str() {
                        "allowBranchDeletion" => &mut layer.git_allow_branch_deletion,
                        "allowPlumbingCommits" => &mut layer.git_allow_plumbing_commits,
                        other => return Err(reader.unknown_key(prop, "git.", other, GIT_KEYS)),
                    };
                    let Value::BooleanLit(lit) = &prop.value else {
                        let message = format!("git.{}: expected true or false", prop.name.as_str());
                        return Err(reader.error(&prop.value, message));
                    };
                    *slot = Some(reader.sourced(&prop.value, lit.value));
                }
            }
            "checks" => {
                let object = reader.object(&prop.value, "checks")?;
                for prop in &object.properties {
                    match prop.name.as_str() {
                        "commands" => reader.strings(&prop.value, "checks.commands", &mut layer.check_commands)?,
                        "protectedPaths" => {
                            reader.strings(&prop.value, "checks.protectedPaths", &mut layer.protected_paths)?
                        }
                        "humans" => {
                            let Value::BooleanLit(lit) = &prop.value else {
                                return Err(reader.error(&prop.value, "checks.humans: expected true or false".into()));
                            };
                            layer.check_humans = Some(reader.sourced(&prop.value, lit.value));
                        }
                        other => return Err(reader.unknown_key(prop, "checks.", other, CHECKS_KEYS)),
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
}

impl Reader<'_> {
    /// 1-based, counted as jsonc-parser counts for its syntax errors (a lone `\r` ends a
    /// line too), so that every position in one file means the same place.
    fn line_column(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let ends_line =
            |(idx, c): &(usize, char)| *c == '\n' || (*c == '\r' && self.text.as_bytes().get(idx + 1) != Some(&b'\n'));
        let line = before.char_indices().filter(ends_line).count() + 1;
        let line_start = before.char_indices().rfind(ends_line).map_or(0, |(idx, _)| idx + 1);
        (line, before[line_start..].chars().count() + 1)
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
        let (line, column) = self.line_column(node.start());
        Sourced {
            value,
            origin: Origin {
                layer: self.kind.clone(),
                location: match self.kind {
                    LayerKind::Default => Location::Builtin,
                    _ => Location::File { path: self.path.to_owned(), line, column },
                },
            },
        }
    }

    fn object<'v, 'a>(&self, value: &'v Value<'a>, what: &str) -> Result<&'v Object<'a>, ConfigError> {
        match value {
            Value::Object(object) => Ok(object),
            other => Err(self.error(other, format!("{what}: expected an object"))),
        }
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
            let text = self.string(element, what)?;
            if text.is_empty() {
                return Err(self.error(element, format!("{what}: empty string")));
            }
            out.push(self.sourced(element, text.to_owned()));
        }
        Ok(())
    }
}
