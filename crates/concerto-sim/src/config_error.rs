//! Configuration errors: the key path a problem concerns, placed at the
//! line and column where the scenario writes it (or named as set by `--set`).

use thiserror::Error;

/// A configuration problem, with the key path it concerns.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ConfigError {
    /// A bad value: its key path, and its line and column when the text holds it.
    #[error("{}{path}: {message}", position.map_or(String::new(), |(l, c)| format!("line {l}, column {c}: ")))]
    Invalid {
        path: String,
        message: String,
        position: Option<(usize, usize)>,
    },
    #[error("{0}")]
    Syntax(String),
}

/// Whether key path `inner` is `outer` or lies inside it (`a.b` in `a`, `a[0]` in `a`).
pub(crate) fn within(outer: &str, inner: &str) -> bool {
    inner == outer
        || inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with(['.', '[']))
}

impl ConfigError {
    /// A value's check failed: its key (relative to the scenario) and why.
    pub fn field(e: concerto_core::FieldError) -> ConfigError {
        ConfigError::at(e.field, e.message)
    }

    pub fn at(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: path.into(),
            message: message.into(),
            position: None,
        }
    }

    /// Points a bad value's error at where `text` (the scenario, found at
    /// `table` if given) writes it; a value an override set says so instead.
    /// An unknown key is pointed at itself, not at its table: when an
    /// override changed the table (`--set policy.kind=...` under a file's
    /// `window`), the key still came from the file, and the error names
    /// both.
    pub(crate) fn placed(
        self,
        text: &str,
        table: Option<&str>,
        overrides: &[String],
    ) -> ConfigError {
        let ConfigError::Invalid {
            path,
            message,
            position: None,
        } = self
        else {
            return self;
        };
        // The override that set the value, a table above it, or a key inside it.
        let set_by_override = |key: &str| {
            overrides
                .iter()
                .filter_map(|o| o.split_once('=').map(|(p, _)| p.trim()))
                .find(|p| within(p, key) || within(key, p))
        };
        let unknown_key = concerto_toml::unknown_key(&path, &message);
        let message = match set_by_override(&path) {
            None => message,
            // The table came from an override, the unknown key in it from the file.
            Some(set)
                if unknown_key
                    .as_deref()
                    .is_some_and(|k| set_by_override(k).is_none()) =>
            {
                format!("{message} (with {set} set by --set)")
            }
            Some(_) => {
                return ConfigError::Invalid {
                    path,
                    message: format!("{message} (as set by --set)"),
                    position: None,
                }
            }
        };
        let full = match table {
            Some(t) => format!("{t}.{path}"),
            None => path.clone(),
        };
        let position = concerto_toml::locate_unknown_key(text, &full, &message)
            .or_else(|| concerto_toml::locate(text, &full));
        ConfigError::Invalid {
            path,
            message,
            position,
        }
    }
}

pub(crate) fn positive(path: &str, v: u64) -> Result<(), ConfigError> {
    if v == 0 {
        return Err(ConfigError::at(path, "must be > 0"));
    }
    Ok(())
}

pub(crate) fn positive_f(path: &str, v: f64) -> Result<(), ConfigError> {
    if !(v.is_finite() && v > 0.0) {
        return Err(ConfigError::at(path, "must be > 0"));
    }
    Ok(())
}
