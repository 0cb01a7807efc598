//! Collective I/O (resonant-io.txt): each call, every process asks for
//! what the `access` pattern gives it, and the `collective` planner decides
//! who sends which requests, in which order, and what the processes
//! exchange over the network. The model runs a call from its plan
//! (model/collective.rs), not from steps.

use super::{required, Steps, Workload};
use concerto_core::client::collective::patterns::Pattern as AccessPattern;
use concerto_core::client::collective::Planner;

use crate::scenario::{AppSpec, ConfigError};

pub struct Collective;

impl Workload for Collective {
    fn keys(&self) -> &'static [&'static str] {
        &["access", "collective"]
    }

    /// An access pattern the planner can plan, and a barrier.
    fn check(&self, at: &str, app: &AppSpec) -> Result<(), ConfigError> {
        let key = |k: &str| format!("{at}.{k}");
        required(at, app, "access", app.access.is_some())?;
        AccessPattern::parse(app.access.as_deref().unwrap_or_default())
            .map_err(|e| ConfigError::at(key("access"), e))?;
        let choice = app.collective.clone().unwrap_or_default();
        choice
            .validate()
            .map_err(|e| ConfigError::field(e.under("collective").under(at)))?;
        // Whether the processes' writes overlap does not depend on the
        // layout or the call: plan the first call once, here.
        if let (Some(pattern), Ok(planner)) = (app.access_pattern(), choice.planner()) {
            let layout = concerto_core::StripeLayout::round_robin(1 << 16, 1, 0, 1)
                .expect("one server, a non-zero unit");
            planner
                .plan(
                    app.op.direction(),
                    &pattern.accesses(app.processes, 0),
                    &layout,
                )
                .map_err(|e| ConfigError::at(key("access"), e.to_string()))?;
        }
        if !app.barrier {
            return Err(ConfigError::at(
                key("barrier"),
                "must be true for workload \"collective\" (a collective call synchronizes its processes)",
            ));
        }
        if app.ordering.is_some() {
            return Err(ConfigError::at(
                key("ordering"),
                "does not apply to workload \"collective\" (its planner orders the requests)",
            ));
        }
        Ok(())
    }

    /// The first call's bytes, per process.
    fn bytes_per_call(&self, app: &AppSpec) -> u64 {
        self.bytes_of_call(app, 0) / app.processes.max(1) as u64
    }

    fn bytes_of_call(&self, app: &AppSpec, call: u32) -> u64 {
        app.access_pattern().map_or(0, |p| {
            p.accesses(app.processes, call as u64)
                .iter()
                .map(|a| a.iter().map(|e| e.len).sum::<u64>())
                .sum()
        })
    }

    fn steps(&self, _app: &AppSpec, _rank: u32, _call: u32, _steps: &mut Steps) {}

    fn planner(&self, app: &AppSpec) -> Option<Box<dyn Planner + Send + Sync>> {
        let choice = app.collective.clone().unwrap_or_default();
        Some(choice.planner().expect("validated: the planner's options"))
    }
}
