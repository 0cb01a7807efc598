//! Reading Concerto's TOML files with errors that say where: the key path
//! of a bad value (`server.listen: invalid socket address syntax`), or the
//! line and column of a syntax error.

/// Parses `text`; an error names the key, or the line and column.
pub fn parse<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.inner().message().trim().to_string();
        let place = match e.inner().span() {
            Some(span) => {
                let (line, column) = line_column(text, span.start);
                format!("line {line}, column {column}: ")
            }
            None => String::new(),
        };
        if path == "." {
            format!("{place}{msg}")
        } else {
            format!("{place}{path}: {msg}")
        }
    })
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct File {
        section: Section,
    }
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Section {
        size: u32,
    }

    #[test]
    fn a_syntax_error_names_its_line_and_column() {
        let err = parse::<File>("[section]\nsize = = 3\n").unwrap_err();
        assert!(err.starts_with("line 2, column 8: "), "{err}");
    }

    #[test]
    fn a_bad_value_names_its_key_and_line() {
        let err = parse::<File>("[section]\nsize = \"big\"\n").unwrap_err();
        assert!(err.starts_with("line 2, column 8: section.size: "), "{err}");
    }
}
