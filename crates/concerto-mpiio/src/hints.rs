//! Hints, as MPI programs give them (`MPI_Info` at open, `set_view` and
//! `set_info`): which collective strategy, with which options, and the
//! layout of a file being created. ROMIO's names where ROMIO has the hint;
//! Concerto's own start with `concerto_`.

use concerto_core::client::collective::{Buffering, Direction, PlannerChoice, Strategy};
use concerto_core::Time;

/// Hints MPI reserves or ROMIO reads that Concerto accepts and does not
/// use (a program written for ROMIO sets them); any other name is a
/// mistake and refused.
pub const ACCEPTED_UNUSED: [&str; 25] = [
    "access_style",
    "collective_buffering",
    "cb_block_size",
    "cb_config_list",
    "chunked",
    "chunked_item",
    "chunked_size",
    "filename",
    "file_perm",
    "io_node_list",
    "nb_proc",
    "num_io_nodes",
    "ind_rd_buffer_size",
    "ind_wr_buffer_size",
    "romio_ds_read",
    "romio_ds_write",
    "romio_no_indep_rw",
    "romio_cb_pfr",
    "romio_cb_fr_types",
    "romio_cb_fr_alignment",
    "romio_cb_ds_threshold",
    "romio_cb_alltoall",
    "romio_filesystem_type",
    "romio_aggregator_list",
    "romio_visibility_immediate",
];

/// The hints Concerto uses.
pub const USED: [&str; 10] = [
    "concerto_strategy",
    "cb_nodes",
    "cb_buffer_size",
    "romio_cb_write",
    "romio_cb_read",
    "concerto_max_segments",
    "concerto_group_delay_us",
    "concerto_agents_per_server",
    "striping_factor",
    "striping_unit",
];

/// The hints in effect on a file.
#[derive(Clone, Debug, PartialEq)]
pub struct Hints {
    pub strategy: Strategy,
    pub cb_nodes: Option<u32>,
    pub cb_buffer_size: Option<u64>,
    pub cb_write: Buffering,
    pub cb_read: Buffering,
    pub max_segments: Option<usize>,
    pub group_delay: Option<Time>,
    pub agents_per_server: Option<u32>,
    pub striping_factor: Option<u32>,
    pub striping_unit: Option<u64>,
}

/// The strategy a collective call uses when no hint names one: resonant
/// I/O, which measured fastest on the resonance experiment (docs/performance.md).
pub const DEFAULT_STRATEGY: Strategy = Strategy::Resonant;

impl Default for Hints {
    fn default() -> Hints {
        Hints {
            strategy: DEFAULT_STRATEGY,
            cb_nodes: None,
            cb_buffer_size: None,
            cb_write: Buffering::Automatic,
            cb_read: Buffering::Automatic,
            max_segments: None,
            group_delay: None,
            agents_per_server: None,
            striping_factor: None,
            striping_unit: None,
        }
    }
}

fn positive<T: std::str::FromStr + PartialOrd + Default>(
    key: &str,
    value: &str,
) -> Result<T, String> {
    match value.trim().parse::<T>() {
        Ok(v) if v > T::default() => Ok(v),
        _ => Err(format!("hint {key}={value:?}: not a whole number > 0")),
    }
}

impl Hints {
    /// These hints with `pairs` applied, in order; the error names the
    /// hint and, for an unknown one, the names Concerto knows.
    pub fn with(&self, pairs: &[(String, String)]) -> Result<Hints, String> {
        let mut h = self.clone();
        for (key, value) in pairs {
            let v = value.as_str();
            match key.as_str() {
                "concerto_strategy" => {
                    // ROMIO-style spellings with underscores are accepted too.
                    h.strategy = Strategy::parse(&v.trim().replace('_', "-"))
                        .map_err(|e| format!("hint {key}: {e}"))?
                }
                "cb_nodes" => h.cb_nodes = Some(positive(key, v)?),
                "cb_buffer_size" => h.cb_buffer_size = Some(positive(key, v)?),
                "romio_cb_write" => h.cb_write = parse_buffering(key, v)?,
                "romio_cb_read" => h.cb_read = parse_buffering(key, v)?,
                "concerto_max_segments" => h.max_segments = Some(positive(key, v)?),
                "concerto_group_delay_us" => {
                    h.group_delay = Some(Time::from_micros(v.trim().parse::<u64>().map_err(
                        |_| format!("hint {key}={v:?}: not a whole number of microseconds"),
                    )?))
                }
                "concerto_agents_per_server" => h.agents_per_server = Some(positive(key, v)?),
                "striping_factor" => h.striping_factor = Some(positive(key, v)?),
                "striping_unit" => h.striping_unit = Some(positive(key, v)?),
                k if ACCEPTED_UNUSED.contains(&k) => {}
                k => {
                    return Err(format!(
                        "unknown hint {k:?} (Concerto uses {}; ROMIO's and MPI's reserved names are accepted)",
                        USED.join(", ")
                    ))
                }
            }
        }
        h.planner(concerto_core::client::collective::Direction::Write)?;
        Ok(h)
    }

    /// `romio_cb_write` or `romio_cb_read`, as `direction` asks: whether a
    /// collective call runs as each rank's own independent call instead
    /// of a plan (core's `Buffering`, the rule the simulator's collective
    /// applications follow too).
    pub fn buffering(&self, direction: Direction) -> Buffering {
        match direction {
            Direction::Write => self.cb_write,
            Direction::Read => self.cb_read,
        }
    }

    /// The planner a collective call in `direction` uses, with the options
    /// of its strategy (options of the others are left out, as ROMIO's
    /// drivers ignore hints they do not read).
    pub fn planner(&self, direction: Direction) -> Result<PlannerChoice, String> {
        let strategy = match self.buffering(direction) {
            Buffering::Disable => Strategy::Independent,
            Buffering::Enable if self.strategy == Strategy::Independent => Strategy::TwoPhase,
            _ => self.strategy,
        };
        let choice = PlannerChoice {
            strategy,
            max_segments: self.max_segments,
            cb_nodes: self.cb_nodes.filter(|_| strategy == Strategy::TwoPhase),
            cb_buffer_size: self
                .cb_buffer_size
                .filter(|_| strategy != Strategy::Independent)
                .map(concerto_core::units::Bytes),
            align: false,
            agents_per_server: self
                .agents_per_server
                .filter(|_| strategy == Strategy::Resonant),
            group_delay: self.group_delay.filter(|_| strategy == Strategy::Resonant),
            romio_cb: Some(self.buffering(direction)),
        };
        choice.validate().map_err(|e| format!("hints: {e}"))?;
        Ok(choice)
    }

    /// The hints as `MPI_File_get_info` reports them: every one Concerto
    /// uses, with its value in effect (`layout`: the file's stripe unit
    /// and server count).
    pub fn report(&self, layout: (u64, u32)) -> Vec<(String, String)> {
        let auto = |b: Buffering| b.name();
        let d = concerto_core::client::collective::Resonant::default();
        let mut out = vec![
            ("concerto_strategy", self.strategy.name().to_string()),
            ("romio_cb_write", auto(self.cb_write).to_string()),
            ("romio_cb_read", auto(self.cb_read).to_string()),
            (
                "cb_buffer_size",
                self.cb_buffer_size.unwrap_or(d.cb_buffer_size).to_string(),
            ),
            (
                "concerto_max_segments",
                self.max_segments.unwrap_or(d.max_segments).to_string(),
            ),
            (
                "concerto_group_delay_us",
                (self.group_delay.unwrap_or(d.group_delay).as_nanos() / 1000).to_string(),
            ),
            (
                "concerto_agents_per_server",
                self.agents_per_server
                    .unwrap_or(d.agents_per_server)
                    .to_string(),
            ),
            ("striping_unit", layout.0.to_string()),
            ("striping_factor", layout.1.to_string()),
        ];
        if let Some(n) = self.cb_nodes {
            out.push(("cb_nodes", n.to_string()));
        }
        out.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }
}

fn parse_buffering(key: &str, value: &str) -> Result<Buffering, String> {
    Buffering::parse(value.trim())
        .map_err(|_| format!("hint {key}={value:?}: one of enable, disable, automatic"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use concerto_core::client::collective::Direction;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn strategy_and_its_options_come_from_the_hints() {
        let h = Hints::default()
            .with(&pairs(&[
                ("concerto_strategy", "two_phase"),
                ("cb_nodes", "2"),
                ("cb_buffer_size", "1048576"),
            ]))
            .unwrap();
        let p = h.planner(Direction::Write).unwrap();
        assert_eq!(p.strategy, Strategy::TwoPhase);
        assert_eq!(p.cb_nodes, Some(2));
        // cb_nodes is two-phase's alone: resonant leaves it out
        let r = h
            .with(&pairs(&[("concerto_strategy", "resonant")]))
            .unwrap();
        assert_eq!(r.planner(Direction::Write).unwrap().cb_nodes, None);
    }

    #[test]
    fn romio_cb_disable_makes_collective_calls_independent_in_that_direction() {
        let h = Hints::default()
            .with(&pairs(&[("romio_cb_write", "disable")]))
            .unwrap();
        assert_eq!(
            h.planner(Direction::Write).unwrap().strategy,
            Strategy::Independent
        );
        assert_eq!(
            h.planner(Direction::Read).unwrap().strategy,
            DEFAULT_STRATEGY
        );
    }

    #[test]
    fn unknown_hints_and_bad_values_name_the_hint() {
        let e = Hints::default()
            .with(&pairs(&[("concerto_stratgy", "resonant")]))
            .unwrap_err();
        assert!(
            e.contains("\"concerto_stratgy\"") && e.contains("concerto_strategy"),
            "{e}"
        );
        let e = Hints::default()
            .with(&pairs(&[("cb_nodes", "zero")]))
            .unwrap_err();
        assert!(e.contains("cb_nodes"), "{e}");
        let e = Hints::default()
            .with(&pairs(&[("concerto_strategy", "fastest")]))
            .unwrap_err();
        assert!(
            e.contains("concerto_strategy") && e.contains("resonant"),
            "{e}"
        );
        let e = Hints::default()
            .with(&pairs(&[("romio_cb_read", "yes")]))
            .unwrap_err();
        assert!(e.contains("romio_cb_read"), "{e}");
        // ROMIO's own hints are accepted
        Hints::default()
            .with(&pairs(&[("romio_ds_write", "disable")]))
            .unwrap();
    }

    #[test]
    fn collective_calls_run_independent_as_romio_cb_says() {
        let h = Hints::default();
        assert_eq!(
            h.buffering(Direction::Write),
            Buffering::Automatic,
            "automatic by default"
        );
        let h = h
            .with(&pairs(&[
                ("romio_cb_write", "enable"),
                ("romio_cb_read", "disable"),
            ]))
            .unwrap();
        assert_eq!(h.buffering(Direction::Write), Buffering::Enable);
        assert_eq!(h.buffering(Direction::Read), Buffering::Disable);
        // The planner the call would use carries the setting, as the
        // simulator's collective applications read it.
        assert_eq!(
            h.planner(Direction::Read).unwrap().romio_cb,
            Some(Buffering::Disable)
        );
    }

    #[test]
    fn get_info_reports_every_hint_in_effect() {
        let h = Hints::default().with(&pairs(&[("cb_nodes", "3")])).unwrap();
        let r = h.report((65536, 4));
        let get = |k: &str| r.iter().find(|p| p.0 == k).map(|p| p.1.clone());
        assert_eq!(get("concerto_strategy").as_deref(), Some("resonant"));
        assert_eq!(get("striping_unit").as_deref(), Some("65536"));
        assert_eq!(get("cb_nodes").as_deref(), Some("3"));
    }
}
