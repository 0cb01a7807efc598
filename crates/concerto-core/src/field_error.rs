//! The one error a value's check gives: the key at fault, as its table
//! names it, and why. Readers place it (a file's line and column, the
//! table the key is in, the option it came from); nothing parses its
//! message to find the key.

/// A value that fails its check: its key (`depth`, `groups[1].mu_s`)
/// relative to the table that was checked, and the problem.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: String) -> FieldError {
        FieldError {
            field: field.into(),
            message,
        }
    }

    /// The same error one table up: `groups[1]` + `mu_s` is `groups[1].mu_s`.
    pub fn under(self, table: &str) -> FieldError {
        FieldError {
            field: format!("{table}.{}", self.field),
            message: self.message,
        }
    }

    /// The error with its key under `table`: `policy.depth: must be > 0`.
    pub fn within(&self, table: &str) -> String {
        format!("{table}.{}: {}", self.field, self.message)
    }
}
