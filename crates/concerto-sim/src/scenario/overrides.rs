//! `--set key.path=value`: changes one key of a scenario before it is read.
//!
//! Paths use dots for tables and `[i]` for array elements
//! (`apps[0].processes=32`). The value is read as a TOML value when it is
//! one (`32`, `true`, `"x"`, `[1, 2]`) and as a string otherwise (`250ms`).

use crate::scenario::ConfigError;

enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

fn parse_path(path: &str) -> Result<Vec<Segment<'_>>, String> {
    let mut segments = Vec::new();
    for part in path.split('.') {
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if name.is_empty() {
            return Err(format!("empty key in \"{path}\""));
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("\"{name}\" is not a key name"));
        }
        segments.push(Segment::Key(name));
        while !rest.is_empty() {
            let close = rest
                .find(']')
                .ok_or_else(|| format!("unclosed '[' in \"{path}\""))?;
            let index: usize = rest[1..close]
                .parse()
                .map_err(|_| format!("\"{}\" is not an array index", &rest[1..close]))?;
            segments.push(Segment::Index(index));
            rest = &rest[close + 1..];
            if !rest.is_empty() && !rest.starts_with('[') {
                return Err(format!("unexpected \"{rest}\" in \"{path}\""));
            }
        }
    }
    Ok(segments)
}

fn parse_value(text: &str) -> toml::Value {
    let text = text.trim();
    match format!("v = {text}").parse::<toml::Table>() {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(text.to_string())),
        Err(_) => toml::Value::String(text.to_string()),
    }
}

/// Applies one `key.path=value` assignment to a parsed document.
pub fn apply(doc: &mut toml::Table, assignment: &str) -> Result<(), ConfigError> {
    let (path, value) = assignment.split_once('=').ok_or_else(|| {
        ConfigError::Syntax(format!("--set \"{assignment}\": expected key.path=value"))
    })?;
    let path = path.trim();
    let segments = parse_path(path)
        .map_err(|m| ConfigError::Syntax(format!("--set \"{assignment}\": {m}")))?;
    let value = parse_value(value);
    let bad = |m: String| ConfigError::at(path, m);

    let mut current: &mut toml::Value = {
        let Some(Segment::Key(first)) = segments.first() else {
            return Err(bad("empty path".into()));
        };
        if segments.len() == 1 {
            doc.insert(first.to_string(), value);
            return Ok(());
        }
        if !doc.contains_key(*first) && matches!(segments[1], Segment::Index(_)) {
            return Err(bad(format!("there is no array \"{first}\" to index")));
        }
        doc.entry(first.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
    };
    for (i, seg) in segments.iter().enumerate().skip(1) {
        let last = i + 1 == segments.len();
        current = match (seg, current) {
            (Segment::Key(k), toml::Value::Table(t)) => {
                if last {
                    t.insert(k.to_string(), value);
                    return Ok(());
                }
                if !t.contains_key(*k) && matches!(segments[i + 1], Segment::Index(_)) {
                    return Err(bad(format!("there is no array \"{k}\" to index")));
                }
                t.entry(k.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            }
            (Segment::Index(n), toml::Value::Array(a)) => {
                let len = a.len();
                let slot = a.get_mut(*n).ok_or_else(|| {
                    bad(format!(
                        "index {n} is out of range (the array has {len} elements)"
                    ))
                })?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                slot
            }
            (Segment::Key(k), _) => {
                return Err(bad(format!(
                    "cannot set \"{k}\": its parent is not a table"
                )))
            }
            (Segment::Index(n), _) => return Err(bad(format!("cannot index [{n}]: not an array"))),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> toml::Table {
        "name = \"x\"\n[cluster]\nservers = 4\n[[apps]]\nprocesses = 2\n[[apps]]\nprocesses = 3\n"
            .parse()
            .unwrap()
    }

    #[test]
    fn sets_nested_keys_and_array_elements() {
        let mut d = doc();
        apply(&mut d, "cluster.servers=16").unwrap();
        apply(&mut d, "apps[1].processes = 32").unwrap();
        apply(&mut d, "policy.kind=coordinated").unwrap();
        apply(&mut d, "policy.window=250ms").unwrap();
        assert_eq!(d["cluster"]["servers"].as_integer(), Some(16));
        assert_eq!(d["apps"][1]["processes"].as_integer(), Some(32));
        assert_eq!(d["policy"]["kind"].as_str(), Some("coordinated"));
        assert_eq!(d["policy"]["window"].as_str(), Some("250ms"));
    }

    #[test]
    fn errors_name_the_path() {
        let mut d = doc();
        let e = apply(&mut d, "apps[5].processes=1")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("apps[5].processes: index 5 is out of range"),
            "{e}"
        );
        assert!(apply(&mut d, "name.x=1")
            .unwrap_err()
            .to_string()
            .contains("not a table"));
        let e = apply(&mut d, "files[0].x=1").unwrap_err().to_string();
        assert!(e.contains("no array \"files\""), "{e}");
        assert!(apply(&mut d, "noequals")
            .unwrap_err()
            .to_string()
            .contains("expected key.path=value"));
        assert!(apply(&mut d, "apps[x].y=1")
            .unwrap_err()
            .to_string()
            .contains("not an array index"));
        assert!(apply(&mut d, "a..b=1")
            .unwrap_err()
            .to_string()
            .contains("empty key"));
    }
}
