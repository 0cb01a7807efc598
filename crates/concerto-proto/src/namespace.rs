//! Path names as the metadata service accepts them: absolute, `/`-separated,
//! without `.` or `..` (clients resolve those), each name at most
//! [`MAX_NAME`] bytes, the whole at most [`MAX_PATH`]. Repeated and trailing
//! slashes are ignored, as POSIX does.

pub const MAX_PATH: usize = 4096;
pub const MAX_NAME: usize = 255;

/// The names along `path`, root first; empty for `/`.
pub fn components(path: &str) -> Result<Vec<&str>, String> {
    if path.len() > MAX_PATH {
        return Err(format!(
            "path of {} bytes is over the {MAX_PATH}-byte limit",
            path.len()
        ));
    }
    if !path.starts_with('/') {
        return Err(format!(
            "{path:?} is not an absolute path (it must start with '/')"
        ));
    }
    if path.contains('\0') {
        return Err(format!("{path:?} contains a NUL byte"));
    }
    let mut names = Vec::new();
    for name in path.split('/').filter(|n| !n.is_empty()) {
        if name == "." || name == ".." {
            return Err(format!(
                "{path:?}: '.' and '..' are not accepted; give the path without them"
            ));
        }
        if name.len() > MAX_NAME {
            let start: String = name.chars().take(16).collect();
            return Err(format!(
                "{path:?}: the name {start:?}... is over the {MAX_NAME}-byte limit"
            ));
        }
        names.push(name);
    }
    Ok(names)
}

/// The parent's names and the last name; an error for `/`, which has no parent.
pub fn parent_and_name(path: &str) -> Result<(Vec<&str>, &str), String> {
    let mut names = components(path)?;
    match names.pop() {
        Some(name) => Ok((names, name)),
        None => Err("the root directory cannot be created, removed or renamed".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_split_and_bad_ones_named() {
        assert_eq!(components("/").unwrap(), Vec::<&str>::new());
        assert_eq!(components("//a///b/").unwrap(), vec!["a", "b"]);
        assert!(components("a/b").unwrap_err().contains("absolute"));
        assert!(components("/a/../b").unwrap_err().contains("'..'"));
        assert!(components(&format!("/{}", "x".repeat(300)))
            .unwrap_err()
            .contains("255"));
        assert!(components(&"/x".repeat(3000)).unwrap_err().contains("4096"));
        assert_eq!(parent_and_name("/a/b").unwrap(), (vec!["a"], "b"));
        assert!(parent_and_name("/").is_err());
    }
}
