//! Server policies replayed: the order core's policy starts requests in,
//! for comparing a real server's arrival log with the code it runs.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::ConcertoConfigError;

/// The order in which core's policy `policy` (a `[policy]` table) starts
/// `requests` — `(app, rank, op, object, offset, len)` with `op` as the
/// servers' arrival logs name it — on a device serving one request at a
/// time: `requests[..held]` arrive one at a time, each started alone, the
/// last still in service when `requests[held..]` arrive together. Returns
/// the indices in start order: what a real server whose arrival log shows
/// these arrivals must have done, had it run the same code.
#[pyfunction]
pub(crate) fn replay_policy(
    policy: &Bound<'_, PyAny>,
    requests: Vec<(u32, u32, String, u64, u64, u64)>,
    held: usize,
) -> PyResult<Vec<usize>> {
    use concerto_core::server::{DeviceClass, DeviceDefaults, Driver, DEFAULT_CAPACITY};
    use concerto_core::{MetaOp, Op, Request, Time};

    let mut de = pythonize::Depythonizer::from_object(policy);
    let config: concerto_core::PolicyConfig = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| ConcertoConfigError::new_err(format!("policy.{}: {}", e.path(), e.inner())))?;
    config
        .validate()
        .map_err(|e| ConcertoConfigError::new_err(format!("policy.{}: {}", e.field, e.message)))?;
    let defaults = DeviceDefaults {
        class: DeviceClass::Rotational,
        depth: 1,
        capacity: DEFAULT_CAPACITY,
    };
    let mut driver = Driver::new(&config, defaults);
    let mut make = Vec::with_capacity(requests.len());
    for (i, (app, rank, op, object, offset, len)) in requests.into_iter().enumerate() {
        let op = match op.as_str() {
            "read" => Op::Read,
            "write" => Op::Write,
            "metadata" | "sync" => Op::Meta(MetaOp::Getattr),
            other => {
                return Err(PyValueError::new_err(format!(
                    "requests[{i}]: no operation {other:?}"
                )))
            }
        };
        make.push(Request::data(
            i as u64,
            app,
            rank,
            Time::ZERO,
            op,
            object,
            offset,
            len,
        ));
    }
    let (now, mut out, mut order) = (Time::ZERO, Vec::new(), Vec::new());
    let held = held.min(make.len());
    let mut in_service = None;
    for (i, req) in make.iter().enumerate() {
        driver.enqueue(req.clone(), now);
        if i >= held {
            continue;
        }
        // Alone in the queue: it starts at once, and is done before the
        // next arrives, but for the last, still in service.
        driver.dispatch(now, &mut out);
        for (req, ticket) in out.drain(..) {
            order.push(req.id.0 as usize);
            if i + 1 == held {
                in_service = Some((req, ticket));
            } else {
                driver.complete(&req, ticket, now);
            }
        }
    }
    if let Some((req, ticket)) = in_service {
        driver.complete(&req, ticket, now);
    }
    loop {
        driver.dispatch(now, &mut out);
        if out.is_empty() {
            break;
        }
        for (req, ticket) in out.drain(..) {
            order.push(req.id.0 as usize);
            driver.complete(&req, ticket, now);
        }
    }
    Ok(order)
}
