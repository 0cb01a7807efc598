//! The QoS rules a server keeps (in its data directory, so a restart keeps
//! them) and the policy text `SetPolicy` carries: parsing, validation and
//! persistence, one place for both.

use std::io;

use concerto_core::server::QosRules;
use concerto_core::PolicyConfig;

fn other(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Where a server keeps its QoS rules, in its data directory.
pub const RULES_FILE: &str = "rules.toml";

/// QoS rules from TOML text (`[[rules]]` tables, `work_conserving`),
/// validated; an error names the key (`rules[0].bandwidth: ...`).
pub fn parse_rules(text: &str) -> Result<QosRules, String> {
    let r: QosRules = concerto_toml::parse(text)?;
    r.validate().map_err(|e| e.to_string())?;
    Ok(r)
}

pub(crate) fn rules_toml(rules: &QosRules) -> String {
    toml::to_string(rules).unwrap_or_default()
}

/// Writes the rules to the data directory, replacing the file atomically.
pub(crate) fn save_rules(dir: &std::path::Path, rules: &QosRules) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!("{RULES_FILE}.tmp"));
    std::fs::write(&tmp, rules_toml(rules))?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, dir.join(RULES_FILE))
}

/// The rules a server saved, if any; an error names the file.
pub(crate) fn load_rules(dir: &std::path::Path) -> io::Result<QosRules> {
    let path = dir.join(RULES_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_rules(&text).map_err(|e| other(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(QosRules::default()),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

/// A policy from TOML text (`kind = "sfq-d-plus"`, `depth = 8`, ...), validated.
pub fn parse_policy(text: &str) -> Result<PolicyConfig, String> {
    let p: PolicyConfig = concerto_toml::parse(text).map_err(|e| format!("policy: {e}"))?;
    p.validate().map_err(|e| e.within("policy"))?;
    Ok(p)
}
