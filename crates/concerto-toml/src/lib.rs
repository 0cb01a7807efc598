//! Reading Concerto's TOML files (server files, cluster files, scenarios,
//! experiments) with errors that say where: the line and column, and the
//! key path of a bad value (`line 2, column 10: server.listen: invalid
//! socket address syntax`). The caller adds the file's name.

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

/// A syntax error's message with its place: `line L, column C: message`.
pub fn syntax_message(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim();
    match e.span() {
        Some(span) => {
            let (line, column) = line_column(text, span.start);
            format!("line {line}, column {column}: {msg}")
        }
        None => msg.to_string(),
    }
}

/// Where the value at `path` (`scenario.cluster.servers`, `apps[1].weight`)
/// is written in `text`: 1-based line and column; `None` when the text does
/// not hold it (a default, or a value set by an override).
pub fn locate(text: &str, path: &str) -> Option<(usize, usize)> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut item: &toml_edit::Item = doc.as_item();
    for segment in path.split('.') {
        let (key, indices) = match segment.find('[') {
            Some(i) => (&segment[..i], &segment[i..]),
            None => (segment, ""),
        };
        if !key.is_empty() {
            item = item.get(key)?;
        }
        for index in indices.split(']').filter(|s| !s.is_empty()) {
            let n: usize = index.trim_start_matches('[').parse().ok()?;
            item = item.get(n)?;
        }
    }
    let span = match item {
        toml_edit::Item::Value(v) => v.span(),
        other => other.span(),
    }?;
    Some(line_column(text, span.start))
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
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
    fn values_are_located_through_tables_and_arrays() {
        let text = "[scenario]\nname = \"x\"\n[scenario.cluster]\nservers = 4\n[[scenario.apps]]\nweight = 1\n[[scenario.apps]]\nweight = 2\n";
        assert_eq!(locate(text, "scenario.cluster.servers"), Some((4, 11)));
        assert_eq!(locate(text, "scenario.apps[1].weight"), Some((8, 10)));
        assert_eq!(locate(text, "scenario.cluster.depth"), None);
        assert_eq!(locate("a = [1, 2]", "a[1]"), Some((1, 9)));
    }

    #[test]
    fn a_bad_value_names_its_key_and_line() {
        let err = parse::<File>("[section]\nsize = \"big\"\n").unwrap_err();
        assert!(err.starts_with("line 2, column 8: section.size: "), "{err}");
    }
}
