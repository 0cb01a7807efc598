//! Reading Concerto's TOML files (server files, cluster files, scenarios,
//! experiments) with errors that say where: the line and column, and the
//! key path of a bad value (`line 2, column 10: server.listen: invalid
//! socket address syntax`). The caller adds the file's name.

/// Parses `text`; an error names the key, or the line and column.
pub fn parse<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
        let mut path = e.path().to_string();
        let msg = e.inner().message().trim().to_string();
        // A bad value inside a tagged table (`[policy]`) is reported at the
        // table: serde reads the table whole before it knows its kind, and
        // loses the key. Find the key that alone gives the same error.
        let blamed = blame_key::<T>(text, &path, &msg);
        if let Some(key) = &blamed {
            path = key.clone();
        }
        let at_key = || blamed.as_deref().and_then(|key| locate(text, key));
        let at_span = || e.inner().span().map(|span| line_column(text, span.start));
        let place = match locate_unknown_key(text, &path, &msg)
            .or_else(at_key)
            .or_else(at_span)
        {
            Some((line, column)) => format!("line {line}, column {column}: "),
            None => String::new(),
        };
        if path == "." {
            format!("{place}{msg}")
        } else {
            format!("{place}{path}: {msg}")
        }
    })
}

/// The key under the table at `path` that alone reproduces `message`:
/// the table is cut to that key (and its `kind`) and read again. `None`
/// when `path` is not a table or no single key gives the error.
fn blame_key<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &str,
    message: &str,
) -> Option<String> {
    blame_key_in::<T>(&toml::from_str(text).ok()?, path, message)
}

/// As `blame_key`, in a document already read (and changed by overrides):
/// a bad value inside a tagged table (`[policy]`) is reported at the table,
/// because serde reads the table whole before it knows its kind and loses
/// the key; this finds the key.
pub fn blame_key_in<T: serde::de::DeserializeOwned>(
    doc: &toml::Table,
    path: &str,
    message: &str,
) -> Option<String> {
    if path == "." || message.starts_with("unknown field") || message.starts_with("missing field") {
        return None;
    }
    let keys: Vec<String> = table_at(&mut doc.clone(), path)?.keys().cloned().collect();
    keys.into_iter().filter(|k| k != "kind").find_map(|key| {
        let mut cut = doc.clone();
        table_at(&mut cut, path)?.retain(|k, _| k == "kind" || *k == key);
        let err = serde_path_to_error::deserialize::<_, T>(toml::Value::Table(cut)).err()?;
        (err.inner().message().trim() == message).then(|| format!("{path}.{key}"))
    })
}

/// The table at `path` (`a.b[1].c`) in `doc`.
fn table_at<'a>(doc: &'a mut toml::Table, path: &str) -> Option<&'a mut toml::Table> {
    let mut table = doc;
    for (key, indices) in segments(path) {
        let mut value = table.get_mut(key)?;
        for n in indices {
            value = value.as_array_mut()?.get_mut(n?)?;
        }
        table = value.as_table_mut()?;
    }
    Some(table)
}

/// A key path (`a.b[1][2].c`) cut into its keys, each with the array
/// indices after it (`None` for an index that is not a number).
fn segments(path: &str) -> impl Iterator<Item = (&str, Vec<Option<usize>>)> {
    path.split('.').map(|segment| {
        let (key, indices) = match segment.find('[') {
            Some(i) => (&segment[..i], &segment[i..]),
            None => (segment, ""),
        };
        let indices = indices
            .split(']')
            .filter(|s| !s.is_empty())
            .map(|index| index.trim_start_matches('[').parse().ok())
            .collect();
        (key, indices)
    })
}

/// The key path of the key serde refused in `message` ("unknown field
/// \`window\`, expected ...") at `path`: `path` itself when it already
/// ends at the key (a struct's field), else the key under it (the table of
/// an internally tagged enum, like a `[policy]`).
pub fn unknown_key(path: &str, message: &str) -> Option<String> {
    let (field, _) = message.strip_prefix("unknown field `")?.split_once('`')?;
    let last = path.rsplit_once('.').map_or(path, |(_, last)| last);
    Some(if last == field {
        path.to_string()
    } else {
        format!("{path}.{field}")
    })
}

/// Where an unknown key that `message` names at `path` is written in
/// `text`: the key itself, not the table around it. `None` for any other
/// error, or when the text does not hold the key.
pub fn locate_unknown_key(text: &str, path: &str, message: &str) -> Option<(usize, usize)> {
    locate_key(text, &unknown_key(path, message)?)
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
    let span = match item_at(doc.as_item(), path)? {
        toml_edit::Item::Value(v) => v.span(),
        other => other.span(),
    }?;
    Some(line_column(text, span.start))
}

/// Where the key at `path` (`policy.window`) is written in `text`, rather
/// than its value: what an unknown key's error points at.
pub fn locate_key(text: &str, path: &str) -> Option<(usize, usize)> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let (parent, key) = path.rsplit_once('.').unwrap_or(("", path));
    let table = if parent.is_empty() {
        doc.as_item()
    } else {
        item_at(doc.as_item(), parent)?
    };
    let (key, _) = table.as_table_like()?.get_key_value(key)?;
    Some(line_column(text, key.span()?.start))
}

/// The item at `path` (`a.b[1].c`) under `root`.
fn item_at<'a>(root: &'a toml_edit::Item, path: &str) -> Option<&'a toml_edit::Item> {
    let mut item = root;
    for (key, indices) in segments(path) {
        if !key.is_empty() {
            item = item.get(key)?;
        }
        for n in indices {
            item = item.get(n?)?;
        }
    }
    Some(item)
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

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Tagged {
        policy: Policy,
    }
    #[derive(Debug, serde::Deserialize)]
    #[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
    #[allow(dead_code)]
    enum Policy {
        Plain {},
        Windowed { window: u32 },
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Strict {
        section: StrictSection,
    }
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct StrictSection {
        size: u32,
    }

    #[test]
    fn an_unknown_key_is_pointed_at_not_its_table() {
        // A tagged enum's error stops at the table; a struct's at the key.
        let text = "[policy]\nkind = \"plain\"\nwindow = 3\n";
        let err = parse::<Tagged>(text).unwrap_err();
        assert!(
            err.starts_with("line 3, column 1: policy: unknown field `window`"),
            "{err}"
        );
        let err = parse::<Strict>("[section]\nsize = 1\nextra = 2\n").unwrap_err();
        assert!(
            err.starts_with("line 3, column 1: section.extra: unknown field `extra`"),
            "{err}"
        );
        assert_eq!(
            unknown_key("policy", "unknown field `window`, there are no fields"),
            Some("policy.window".to_string())
        );
        assert_eq!(
            unknown_key("cluster.bogus", "unknown field `bogus`, expected one of"),
            Some("cluster.bogus".to_string())
        );
        assert_eq!(unknown_key("policy", "invalid type: string"), None);
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Apps {
        apps: Vec<Tagged>,
    }

    #[test]
    fn a_bad_value_in_a_tagged_table_names_its_key_and_line() {
        let text = "[policy]\nkind = \"windowed\"\nwindow = \"long\"\n";
        let err = parse::<Tagged>(text).unwrap_err();
        assert!(
            err.starts_with("line 3, column 10: policy.window: invalid type: string"),
            "{err}"
        );
        // Under an array of tables too; an unknown kind is the kind's.
        let text = "[[apps]]\n[apps.policy]\nkind = \"plain\"\n[[apps]]\n[apps.policy]\nkind = \"windowed\"\nwindow = -1\n";
        let err = parse::<Apps>(text).unwrap_err();
        assert!(
            err.starts_with("line 7, column 10: apps[1].policy.window: "),
            "{err}"
        );
        let err = parse::<Tagged>("[policy]\nkind = \"bogus\"\n").unwrap_err();
        assert!(
            err.starts_with("line 2, column 8: policy.kind: unknown variant `bogus`"),
            "{err}"
        );
    }
}
