//! Values a configuration file may hold that are valid but almost surely
//! mistakes ("traps"): a duration written as a bare integer (`window =
//! 1000` is 1000 ns, not 1000 ms), a stripe unit in decimal units (`"4KB"`
//! is 4000 bytes). They are accepted, because they can be meant, and warned
//! about with the fix.
//!
//! A trap is seen where the value is read (a unit's deserializer), which
//! does not know the key; the loader knows keys only for errors (it names
//! the key path and line of a value that fails). So [`read_warned`] reads a
//! file once collecting how many traps it holds, then once more per trap
//! with that trap turned into an error: each warning is that error, with
//! the key, line and column the loader gives any bad value. Outside
//! [`read_warned`] (JSON from Python, values built in code) traps are not
//! looked for.

use std::cell::RefCell;

/// How the traps met while reading are treated.
struct Watch {
    /// Traps met so far in this read.
    seen: usize,
    /// Fail at the trap with this index (counting from 0), and after it at
    /// every trap with the same message (the loader may read parts again
    /// to name the key).
    fail_from: Option<usize>,
    /// The message of the trap that failed.
    failed: Option<String>,
}

thread_local! {
    static WATCH: RefCell<Option<Watch>> = const { RefCell::new(None) };
}

/// Called by a deserializer that meets a trap described by `message`
/// (what the value means and how to write what was probably meant). An
/// error when the current read asks for this trap to fail.
pub(crate) fn spring(message: impl FnOnce() -> String) -> Result<(), String> {
    WATCH.with(|w| {
        let mut w = w.borrow_mut();
        let Some(watch) = w.as_mut() else {
            return Ok(());
        };
        let index = watch.seen;
        watch.seen += 1;
        match watch.fail_from {
            Some(from) if index == from => {
                let message = message();
                watch.failed = Some(message.clone());
                Err(message)
            }
            Some(from) if index > from => {
                let message = message();
                match &watch.failed {
                    Some(failed) if *failed == message => Err(message),
                    _ => Ok(()),
                }
            }
            _ => Ok(()),
        }
    })
}

/// Runs `read` with traps watched as `fail_from` says; returns its result
/// and the number of traps it met. Restores whatever watch was set before.
fn watched<T>(fail_from: Option<usize>, read: impl FnOnce() -> T) -> (T, usize) {
    let before = WATCH.with(|w| {
        w.borrow_mut().replace(Watch {
            seen: 0,
            fail_from,
            failed: None,
        })
    });
    let out = read();
    let seen = WATCH.with(|w| {
        let mut w = w.borrow_mut();
        let seen = w.as_ref().map_or(0, |watch| watch.seen);
        *w = before;
        seen
    });
    (out, seen)
}

/// Reads with `read` (a loader that names the place of a bad value in its
/// error); returns the value and one warning per trap it holds, each the
/// loader's error for that trap (so it names the key, line and column).
/// An error of the first read is returned as it is.
pub fn read_warned<T, E: PartialEq>(read: impl Fn() -> Result<T, E>) -> Result<(T, Vec<E>), E> {
    let (value, traps) = watched(None, &read);
    let value = value?;
    let mut warnings: Vec<E> = Vec::new();
    for index in 0..traps {
        // A value read twice (an untagged enum tries each variant) is the
        // same trap: say it once.
        if let (Err(warning), _) = watched(Some(index), &read) {
            if !warnings.contains(&warning) {
                warnings.push(warning);
            }
        }
    }
    Ok((value, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Time;

    #[derive(Debug, serde::Deserialize)]
    struct File {
        #[allow(dead_code)]
        window: Time,
        #[allow(dead_code)]
        lease: Time,
    }

    fn read(text: &str) -> Result<File, String> {
        toml::from_str(text).map_err(|e: toml::de::Error| e.message().to_string())
    }

    #[test]
    fn a_bare_integer_duration_is_warned_about_once_per_key() {
        let (_, warnings) = read_warned(|| read("window = 1000\nlease = \"1s\"\n")).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("1000 has no unit"), "{}", warnings[0]);
        assert!(warnings[0].contains("\"1000ms\""), "{}", warnings[0]);
        let (_, warnings) = read_warned(|| read("window = 1000\nlease = 5\n")).unwrap();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[1].starts_with("5 has no unit"), "{}", warnings[1]);
    }

    #[test]
    fn values_with_units_and_zero_give_no_warning() {
        let (_, warnings) = read_warned(|| read("window = \"1000ns\"\nlease = 0\n")).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn an_error_is_returned_as_the_loader_gives_it() {
        let err = read_warned(|| read("window = 1000\nlease = \"1 fortnight\"\n")).unwrap_err();
        assert!(err.contains("unknown time unit"), "{err}");
    }

    #[test]
    fn outside_a_warned_read_traps_are_not_looked_for() {
        assert!(read("window = 1000\nlease = 5\n").is_ok());
        assert_eq!(spring(|| unreachable!()), Ok(()));
    }
}
