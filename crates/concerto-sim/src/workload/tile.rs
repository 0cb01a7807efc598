//! MPI-TILE-IO: a grid of processes, each reading or writing its tile of a
//! 2-D dataset (or, with `planes`, of every plane of a 3-D one) in a call.

use concerto_core::client::collective::patterns::tile_extents;

use super::{required, Access, Steps, Workload};
use crate::scenario::{positive, AppSpec, ConfigError};

pub struct MpiTileIo;

impl Workload for MpiTileIo {
    fn keys(&self) -> &'static [&'static str] {
        &["grid", "tile", "planes", "element_size"]
    }

    fn check(&self, at: &str, app: &AppSpec) -> Result<(), ConfigError> {
        let key = |k: &str| format!("{at}.{k}");
        if let Some(planes) = app.planes {
            positive(&key("planes"), planes as u64)?;
        }
        required(at, app, "grid", app.grid.is_some())?;
        required(at, app, "tile", app.tile.is_some())?;
        required(at, app, "element_size", app.element_size.is_some())?;
        let [px, py] = app.grid.unwrap_or_default();
        let [tx, ty] = app.tile.unwrap_or_default();
        for (name, v) in [("grid", px), ("grid", py), ("tile", tx), ("tile", ty)] {
            positive(&key(name), v as u64)?;
        }
        positive(&key("element_size"), app.element_size.map_or(0, |b| b.0))?;
        if px as u64 * py as u64 != app.processes as u64 {
            return Err(ConfigError::at(
                key("grid"),
                format!(
                    "{px} x {py} tiles does not match processes = {}",
                    app.processes
                ),
            ));
        }
        Ok(())
    }

    fn bytes_per_call(&self, app: &AppSpec) -> u64 {
        let [x, y] = app.tile.unwrap_or([0, 0]);
        x as u64 * y as u64 * app.planes.unwrap_or(1) as u64 * app.element_size.map_or(0, |b| b.0)
    }

    fn steps(&self, app: &AppSpec, rank: u32, call: u32, steps: &mut Steps) {
        steps.data(app.op, access(app, rank, call));
    }
}

/// Process `rank`'s tile in call `call`: the same tiles the collective
/// planners read (core's patterns).
pub(super) fn access(app: &AppSpec, rank: u32, call: u32) -> Access {
    let extents = tile_extents(
        app.grid.unwrap_or([1, 1]).map(u64::from),
        app.tile.unwrap_or([1, 1]).map(u64::from),
        app.planes.unwrap_or(1) as u64,
        app.element_size.map_or(1, |b| b.0),
        rank as u64,
        call as u64,
    );
    Access {
        file: 0,
        extents: extents.into(),
    }
}
