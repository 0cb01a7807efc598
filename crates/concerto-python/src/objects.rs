//! What crosses the boundary: results go to Python as its own objects
//! (dicts, lists, numbers, strings) and structures Python built come back
//! the same way, each through its serde form; only the files users write
//! (scenarios, cluster files, key rings, workload files) cross as text.
//!
//! The shapes are declared once, as `TypedDict`s in
//! `python/concerto/_native.pyi`, and `tests/test_native_stub.py` checks
//! the objects the module returns against them.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::ConcertoConfigError;

/// `value` as a Python object. It goes through serde_json's value so the
/// numbers are the ones JSON gave before this boundary was typed: a
/// non-finite float is `None` and every map key a string, so a result
/// written back out with `json.dump` is valid JSON, as it always was.
pub fn to_py<T: Serialize>(py: Python<'_>, value: &T) -> PyResult<PyObject> {
    let value = serde_json::to_value(value).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(pythonize::pythonize(py, &value)?.unbind())
}

/// A structure Python built (`what` names the argument), read as `T`; an
/// error names the key path inside it (`phases[2].start_s: ...`).
pub fn from_py<T: DeserializeOwned>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    let mut de = pythonize::Depythonizer::from_object(obj);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            what.to_string()
        } else if path.starts_with('[') {
            format!("{what}{path}")
        } else {
            format!("{what}.{path}")
        };
        ConcertoConfigError::new_err(format!("{at}: {}", e.inner()))
    })
}
