//! Explicit request traces (docs/workloads.md): per application, per rank,
//! the requests it issues, in order, so that any workload (one recorded by
//! Darshan's DXT, one written by hand, one exported from another
//! simulator) can be run and compared request by request.
//!
//! ```json
//! {"format": "concerto-trace", "version": 1,
//!  "apps": [{"name": "a", "files": ["out.dat"],
//!            "ranks": [[{"op": "write", "file": 0, "offset": 0, "length": 1048576, "at": 0.0}, ...], ...]}]}
//! ```
//!
//! A rank issues its requests one at a time: each when the previous one has
//! completed, after `compute` seconds when given, and no earlier than `at`
//! seconds after the application's start when given (a recorded start
//! time). Ranks run on their own: a trace has no barriers.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::scenario::DataOp;
use concerto_core::Time;

/// What `format` says.
pub const FORMAT: &str = "concerto-trace";
/// The version this simulator reads.
pub const VERSION: u32 = 1;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceFile {
    pub format: String,
    pub version: u32,
    pub apps: Vec<TraceApp>,
    /// Where it came from (an importer's note: the Darshan log, say); not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceApp {
    pub name: String,
    /// The files' names, for people; requests name files by index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    pub ranks: Vec<Vec<TraceRequest>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceRequest {
    pub op: DataOp,
    pub file: u32,
    pub offset: u64,
    pub length: u64,
    /// Issued no earlier than this many seconds after the application's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<f64>,
    /// Issued this many seconds after the rank's previous request completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<f64>,
}

impl TraceRequest {
    /// When it may be issued, the previous request having completed at
    /// `done` and the application having started at `start`.
    pub fn issue_at(&self, start: Time, done: Time) -> Time {
        let after = done + Time::from_secs_f64(self.compute.unwrap_or(0.0));
        let at = self
            .at
            .map_or(Time::ZERO, |s| start + Time::from_secs_f64(s));
        after.max(at)
    }
}

impl TraceApp {
    /// How many files its requests name (the largest index plus one, at
    /// least the names given).
    pub fn file_count(&self) -> u32 {
        let named = self.files.len() as u32;
        self.ranks
            .iter()
            .flatten()
            .map(|r| r.file.saturating_add(1))
            .fold(named, u32::max)
    }

    /// The requests of all ranks.
    pub fn requests(&self) -> usize {
        self.ranks.iter().map(Vec::len).sum()
    }
}

/// Reads a trace file; an error names the file and the record
/// (`t.json: apps[0].ranks[3][17].length: invalid type: ...`).
pub fn load(path: &Path) -> Result<TraceFile, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: cannot read ({e})"))?;
    let mut de = serde_json::Deserializer::from_str(&text);
    let trace: TraceFile = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let at = e.path().to_string();
        let message = e.into_inner().to_string();
        if at == "." {
            format!("{shown}: {message}")
        } else {
            format!("{shown}: {at}: {message}")
        }
    })?;
    check(&trace).map_err(|(at, m)| format!("{shown}: {at}: {m}"))?;
    Ok(trace)
}

/// Values the types allow but a trace cannot mean.
fn check(t: &TraceFile) -> Result<(), (String, String)> {
    if t.format != FORMAT {
        return Err(("format".into(), format!("{:?} is not {FORMAT:?}", t.format)));
    }
    if t.version != VERSION {
        return Err((
            "version".into(),
            format!(
                "{} is not a version this simulator reads ({VERSION})",
                t.version
            ),
        ));
    }
    if t.apps.is_empty() {
        return Err((
            "apps".into(),
            "a trace needs at least one application".into(),
        ));
    }
    for (a, app) in t.apps.iter().enumerate() {
        if t.apps[..a].iter().any(|o| o.name == app.name) {
            return Err((
                format!("apps[{a}].name"),
                format!("{:?} appears twice", app.name),
            ));
        }
        if app.ranks.is_empty() {
            return Err((format!("apps[{a}].ranks"), "needs at least one rank".into()));
        }
        for (r, rank) in app.ranks.iter().enumerate() {
            for (i, q) in rank.iter().enumerate() {
                let at = |field: &str| format!("apps[{a}].ranks[{r}][{i}].{field}");
                if q.length == 0 {
                    return Err((at("length"), "must be > 0".into()));
                }
                if q.offset.checked_add(q.length).is_none() {
                    return Err((
                        at("offset"),
                        "offset + length is past the largest file".into(),
                    ));
                }
                for (field, v) in [("at", q.at), ("compute", q.compute)] {
                    if let Some(s) = v {
                        if !(s.is_finite() && (0.0..=1e9).contains(&s)) {
                            return Err((at(field), format!("{s} is not a time in seconds >= 0")));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(at: Option<f64>, compute: Option<f64>) -> TraceRequest {
        TraceRequest {
            op: DataOp::Read,
            file: 0,
            offset: 0,
            length: 1,
            at,
            compute,
        }
    }

    #[test]
    fn a_request_goes_after_its_compute_and_not_before_its_time() {
        let start = Time::from_secs(10);
        let done = Time::from_secs(11);
        assert_eq!(request(None, None).issue_at(start, done), done);
        assert_eq!(
            request(None, Some(0.5)).issue_at(start, done),
            Time::from_millis(11_500)
        );
        // Recorded at 3 s after the start: it waits until 13 s.
        assert_eq!(
            request(Some(3.0), None).issue_at(start, done),
            Time::from_secs(13)
        );
        // Recorded earlier than the previous request's end: it goes at once.
        assert_eq!(request(Some(0.2), None).issue_at(start, done), done);
    }
}
