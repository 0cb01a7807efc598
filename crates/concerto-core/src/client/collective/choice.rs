//! Which planner a caller wants, with its options, as a scenario file, the
//! command line and the MPI-IO layer name it: one place that turns names
//! and options into a [`Planner`], with each option's default.

use serde::{Deserialize, Serialize};

use super::{Buffering, Independent, PlanError, Planner, Resonant, TwoPhase};
use crate::time::Time;
use crate::units::Bytes;
use crate::FieldError;

/// The planners by name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Each process alone ([`Independent`]).
    Independent,
    /// ROMIO's collective buffering ([`TwoPhase`]).
    #[default]
    TwoPhase,
    /// Resonant I/O ([`Resonant`]).
    Resonant,
}

impl Strategy {
    pub const ALL: [Strategy; 3] = [
        Strategy::Independent,
        Strategy::TwoPhase,
        Strategy::Resonant,
    ];

    /// Its name in scenario files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Independent => "independent",
            Strategy::TwoPhase => "two-phase",
            Strategy::Resonant => "resonant",
        }
    }

    pub fn parse(name: &str) -> Result<Strategy, String> {
        Self::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|s| s.name()).collect();
                format!("unknown strategy {name:?} (known: {})", known.join(", "))
            })
    }
}

/// A planner and its options; an option a strategy does not use is an
/// error, not silently ignored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlannerChoice {
    pub strategy: Strategy,
    /// Most extents per list-I/O request (independent: 1, the others: 64).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_segments: Option<usize>,
    /// Two-phase: aggregators (default: every process).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cb_nodes: Option<u32>,
    /// Two-phase: bytes of a file domain per round; resonant: bytes a
    /// write's agent holds per round (default 16 MiB).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cb_buffer_size: Option<Bytes>,
    /// Two-phase: file domains start on stripe-unit boundaries.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub align: bool,
    /// Resonant: agents per server's access set (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents_per_server: Option<u32>,
    /// Resonant: delay between timed groups, and between the agents of one
    /// server (default 500 us).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_delay: Option<Time>,
    /// ROMIO's `romio_cb_write`/`romio_cb_read` for the call's direction:
    /// whether a call runs as each rank's independent call
    /// ([`Buffering`]). Absent: every call goes through the planner (the
    /// simulator's collective applications as the papers ran them; the
    /// MPI-IO library, as ROMIO, defaults to `automatic`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub romio_cb: Option<Buffering>,
}

impl PlannerChoice {
    /// Checks the options against the strategy; the error's field is the
    /// option as written (`cb_nodes`).
    pub fn validate(&self) -> Result<(), FieldError> {
        let not_for = |option: &'static str, given: bool, strategies: &[Strategy]| {
            if given && !strategies.contains(&self.strategy) {
                Err(FieldError::new(
                    option,
                    format!("does not apply to strategy {:?}", self.strategy.name()),
                ))
            } else {
                Ok(())
            }
        };
        not_for("cb_nodes", self.cb_nodes.is_some(), &[Strategy::TwoPhase])?;
        not_for(
            "cb_buffer_size",
            self.cb_buffer_size.is_some(),
            &[Strategy::TwoPhase, Strategy::Resonant],
        )?;
        not_for("align", self.align, &[Strategy::TwoPhase])?;
        not_for(
            "agents_per_server",
            self.agents_per_server.is_some(),
            &[Strategy::Resonant],
        )?;
        not_for(
            "group_delay",
            self.group_delay.is_some(),
            &[Strategy::Resonant],
        )?;
        let positive = |option: &'static str, v: Option<u64>| match v {
            Some(0) => Err(FieldError::new(option, "must be > 0".into())),
            _ => Ok(()),
        };
        positive("max_segments", self.max_segments.map(|n| n as u64))?;
        positive("cb_nodes", self.cb_nodes.map(u64::from))?;
        positive("cb_buffer_size", self.cb_buffer_size.map(|b| b.0))?;
        positive("agents_per_server", self.agents_per_server.map(u64::from))?;
        Ok(())
    }

    /// The planner, with the defaults filled in.
    pub fn planner(&self) -> Result<Box<dyn Planner + Send + Sync>, PlanError> {
        self.validate()
            .map_err(|e| PlanError::Invalid(e.to_string()))?;
        Ok(match self.strategy {
            Strategy::Independent => Box::new(Independent {
                max_segments: self
                    .max_segments
                    .unwrap_or(Independent::default().max_segments),
            }),
            Strategy::TwoPhase => {
                let d = TwoPhase::default();
                Box::new(TwoPhase {
                    cb_nodes: self.cb_nodes,
                    cb_buffer_size: self.cb_buffer_size.map_or(d.cb_buffer_size, |b| b.0),
                    align: self.align,
                    max_segments: self.max_segments.unwrap_or(d.max_segments),
                })
            }
            Strategy::Resonant => {
                let d = Resonant::default();
                Box::new(Resonant {
                    cb_buffer_size: self.cb_buffer_size.map_or(d.cb_buffer_size, |b| b.0),
                    max_segments: self.max_segments.unwrap_or(d.max_segments),
                    agents_per_server: self.agents_per_server.unwrap_or(d.agents_per_server),
                    group_delay: self.group_delay.unwrap_or(d.group_delay),
                })
            }
        })
    }

    /// Whether a call whose processes access `accesses` (ascending lists)
    /// runs as each process's independent call rather than as planned, on
    /// a file of stripe unit `unit` (`romio_cb`).
    pub fn runs_independent(&self, accesses: &[Vec<crate::request::Extent>], unit: u64) -> bool {
        self.romio_cb
            .unwrap_or(Buffering::Enable)
            .runs_independent(&mut super::spans(accesses), unit)
    }

    /// Whether its plans ever make one process wait for another (an
    /// exchange or an order between processes): only independent I/O
    /// never does.
    pub fn synchronizes(&self) -> bool {
        self.strategy != Strategy::Independent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_that_do_not_apply_are_named() {
        let c: PlannerChoice = toml::from_str("strategy = \"resonant\"\ncb_nodes = 2").unwrap();
        let err = c.validate().unwrap_err();
        assert_eq!(err.field, "cb_nodes");
        assert_eq!(
            err.to_string(),
            "cb_nodes: does not apply to strategy \"resonant\""
        );
        let c: PlannerChoice =
            toml::from_str("strategy = \"two-phase\"\nmax_segments = 0").unwrap();
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "max_segments: must be > 0"
        );
        assert!(toml::from_str::<PlannerChoice>("strategy = \"elevator\"").is_err());
    }

    #[test]
    fn defaults_are_the_planners_own() {
        let c: PlannerChoice =
            toml::from_str("strategy = \"two-phase\"\ncb_buffer_size = \"4MiB\"").unwrap();
        assert!(c.planner().is_ok());
        assert_eq!(c.cb_buffer_size, Some(Bytes(4 << 20)));
        assert_eq!(Strategy::parse("resonant"), Ok(Strategy::Resonant));
        // The names the command line takes are the ones scenario files take.
        for s in Strategy::ALL {
            let c: PlannerChoice = toml::from_str(&format!("strategy = \"{}\"", s.name())).unwrap();
            assert_eq!(c.strategy, s);
        }
        assert!(Strategy::parse("x")
            .unwrap_err()
            .contains("independent, two-phase"));
    }
}
