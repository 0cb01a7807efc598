//! The bounds every frame's fields are held to before a server acts on
//! them ([`Envelope::validate`]), and the checks clients share with it
//! (stripe units, layouts, modes, extent lists).

use concerto_core::server::ServiceReport;
use concerto_core::{Extent, FieldError};

use super::{
    Envelope, LayoutRequest, Message, MetaRequest, ProtocolError, Tags, MAX_CLOSES, MAX_IO,
    MAX_MODE, MAX_OBJECT_END, MAX_PEERS, MAX_PHASE_WAIT_MS, MAX_REMOVE, MAX_REPORT_APPS,
    MAX_SEGMENTS, MAX_STRIPE_UNIT, MAX_TEXT, MIN_STRIPE_UNIT, VERSION,
};
use crate::auth::{self, Principal};
use crate::namespace;

/// A stripe unit a file or directory may have; the message says why not.
pub fn check_stripe_unit(unit: u64) -> Result<(), String> {
    if !(MIN_STRIPE_UNIT..=MAX_STRIPE_UNIT).contains(&unit) || unit % MIN_STRIPE_UNIT != 0 {
        return Err(format!(
            "stripe unit {unit}: must be a multiple of {MIN_STRIPE_UNIT} bytes (4 KiB), from 4 KiB to 1 GiB{}",
            decimal_unit_hint(unit)
        ));
    }
    Ok(())
}

/// When `bytes` is a whole number of a decimal unit (`4000` is 4 KB), the
/// size probably meant: written in that unit, it was read as powers of 1000.
fn decimal_unit_hint(bytes: u64) -> String {
    concerto_core::units::as_decimal(bytes).map_or(String::new(), |(n, decimal, binary)| {
        format!(" ({n}{decimal} is {bytes} bytes, since KB, MB and GB are powers of 1000; write {n}{binary} for a power of two)")
    })
}

/// A layout a client may ask for: a valid stripe unit, a count above 0.
pub fn check_layout_request(l: &LayoutRequest) -> Result<(), String> {
    if let Some(u) = l.unit {
        check_stripe_unit(u)?;
    }
    if l.count == Some(0) {
        return Err("stripe count 0: must be at least 1".into());
    }
    Ok(())
}

/// A mode a client may give: permission bits only (no file type).
pub fn check_mode_bits(mode: u32) -> Result<(), String> {
    if mode > MAX_MODE {
        return Err(format!(
            "mode {mode:#o} has bits beyond the permission bits {MAX_MODE:#o}"
        ));
    }
    Ok(())
}

fn field<T>(field: &'static str, message: String) -> Result<T, ProtocolError> {
    Err(ProtocolError::Field { field, message })
}

fn check_tags(t: &Tags) -> Result<(), ProtocolError> {
    match t.weight {
        Some(w) if !(w.is_finite() && w > 0.0) => {
            field("tags.weight", format!("{w} is not a number > 0"))
        }
        _ => Ok(()),
    }
}

/// Extents of one request: at least one, at most [`MAX_SEGMENTS`], ascending
/// and disjoint, at most [`MAX_IO`] bytes in all, none overflowing. Returns the total.
pub fn check_extents(extents: &[Extent]) -> Result<u64, ProtocolError> {
    if extents.is_empty() {
        return field("extents", "a request needs at least one extent".into());
    }
    if extents.len() > MAX_SEGMENTS {
        return field(
            "extents",
            format!(
                "{} extents is over the limit of {MAX_SEGMENTS}",
                extents.len()
            ),
        );
    }
    let total = ordered_total(extents).map_err(|e| ProtocolError::Field {
        field: if e.field == "offset" {
            "offset"
        } else {
            "extents"
        },
        message: e.message,
    })?;
    if total > MAX_IO {
        return field(
            "len",
            format!("{total} bytes is over the {MAX_IO}-byte limit per request"),
        );
    }
    let end = extents.last().map_or(0, |e| e.offset + e.len);
    if end > MAX_OBJECT_END {
        return field(
            "offset",
            format!("the request reaches byte {end} of its object, past the server's bound of {MAX_OBJECT_END}"),
        );
    }
    Ok(total)
}

/// Extents ascending, disjoint and none overflowing (what the client checks
/// of a caller's list too): their total length, or the field at fault and why.
pub fn ordered_total(extents: &[Extent]) -> Result<u64, FieldError> {
    let mut total = 0u64;
    let mut end = 0u64;
    for (i, e) in extents.iter().enumerate() {
        let e_end = e.offset.checked_add(e.len).ok_or_else(|| {
            FieldError::new(
                "offset",
                format!("extent {i}: {} + {} overflows", e.offset, e.len),
            )
        })?;
        if i > 0 && e.offset < end {
            return Err(FieldError::new(
                "extents",
                format!("extent {i}: extents must be ascending and must not overlap"),
            ));
        }
        end = e_end;
        // Ascending ends that do not overflow bound the sum.
        total += e.len;
    }
    Ok(total)
}

fn check_layout(l: &LayoutRequest) -> Result<(), ProtocolError> {
    check_layout_request(l).map_err(|message| ProtocolError::Field {
        field: "layout",
        message,
    })
}

fn check_mode(mode: u32) -> Result<(), ProtocolError> {
    check_mode_bits(mode).map_err(|message| ProtocolError::Field {
        field: "mode",
        message,
    })
}

fn check_text(name: &'static str, text: &str) -> Result<(), ProtocolError> {
    if text.len() > MAX_TEXT {
        return field(
            name,
            format!(
                "text of {} bytes is over the {MAX_TEXT}-byte limit",
                text.len()
            ),
        );
    }
    Ok(())
}

impl Envelope {
    /// Checks every field against its bounds.
    pub fn validate(&self) -> Result<(), ProtocolError> {
        if self.version != VERSION {
            return Err(ProtocolError::Version { got: self.version });
        }
        match &self.message {
            Message::Write {
                tags,
                extents,
                data,
                ..
            } => {
                check_tags(tags)?;
                let total = check_extents(extents)?;
                if total != data.len() as u64 {
                    return field(
                        "data",
                        format!("{} bytes of data for extents of {total} bytes", data.len()),
                    );
                }
                Ok(())
            }
            Message::Read { tags, extents, .. } => {
                check_tags(tags)?;
                check_extents(extents).map(|_| ())
            }
            Message::Fsync { tags, .. }
            | Message::ObjectSize { tags, .. }
            | Message::EndPhase { tags } => check_tags(tags),
            Message::RemoveObjects { tags, objects } => {
                check_tags(tags)?;
                check_count("objects", objects.len(), MAX_REMOVE, "objects")
            }
            Message::Truncate { tags, size, .. } => {
                check_tags(tags)?;
                if *size > MAX_OBJECT_END {
                    return field(
                        "size",
                        format!(
                            "{size} is past the server's bound on an object of {MAX_OBJECT_END}"
                        ),
                    );
                }
                Ok(())
            }
            Message::Meta { tags, op, user } => {
                check_tags(tags)?;
                check_meta(op, user.as_ref())
            }
            Message::BeginPhase { tags, wait_ms } => {
                check_tags(tags)?;
                if *wait_ms > MAX_PHASE_WAIT_MS {
                    return field("wait_ms", format!("{wait_ms}: at most {MAX_PHASE_WAIT_MS}"));
                }
                Ok(())
            }
            other => check_control(other),
        }
    }
}

/// A namespace request: the user it names, its paths, and its operation's
/// own fields.
fn check_meta(op: &MetaRequest, user: Option<&Principal>) -> Result<(), ProtocolError> {
    if let Some(u) = user {
        check_count("user", u.groups.len(), auth::MAX_GROUPS, "groups")?;
    }
    for path in op.paths() {
        namespace::components(path).map_err(|message| ProtocolError::Field {
            field: "path",
            message,
        })?;
    }
    match op {
        MetaRequest::Create { layout, mode, .. } => {
            check_mode(*mode)?;
            check_layout(layout)
        }
        MetaRequest::SetStripe { layout, .. } => check_layout(layout),
        MetaRequest::Mkdir { mode, .. }
        | MetaRequest::SetAttr {
            mode: Some(mode), ..
        } => check_mode(*mode),
        MetaRequest::Access { mask, .. } if *mask > 7 => field(
            "mask",
            format!("{mask} is not a combination of read (4), write (2) and search (1)"),
        ),
        MetaRequest::Readdir {
            after: Some(name), ..
        } => check_text("after", name),
        MetaRequest::Truncate { size, .. } => check_file_size("size", *size),
        MetaRequest::Close { files } => {
            check_count("files", files.len(), MAX_CLOSES, "closes")?;
            files
                .iter()
                .try_for_each(|c| check_file_size("written_end", c.written_end))
        }
        _ => Ok(()),
    }
}

/// Requests to a server itself and replies: their texts, lists and
/// numbers.
fn check_control(message: &Message) -> Result<(), ProtocolError> {
    match message {
        Message::SetPolicy { policy } => check_text("policy", policy),
        Message::SetSets { sets } => check_text("sets", sets),
        Message::SetRules { rules, .. } | Message::RulesReply { rules } => {
            check_text("rules", rules)
        }
        Message::Hello { key_id, .. } => {
            auth::check_key_id(key_id).map_err(|message| ProtocolError::Field {
                field: "key_id",
                message,
            })
        }
        Message::ServiceReport(report) => check_report(report),
        Message::SetGrants { grants } => {
            if grants.len() > MAX_REPORT_APPS {
                return field(
                    "grants",
                    format!("more than {MAX_REPORT_APPS} applications"),
                );
            }
            match grants.iter().find(|(_, p)| !(p.is_finite() && *p > 0.0)) {
                Some((app, p)) => field(
                    "grants",
                    format!("application {app}: priority {p} is not > 0"),
                ),
                None => Ok(()),
            }
        }
        Message::Granted { priority, .. } if !(priority.is_finite() && *priority > 0.0) => {
            field("priority", format!("{priority} is not > 0"))
        }
        Message::SetCluster { servers } if servers.len() > MAX_PEERS => {
            field("servers", format!("more than {MAX_PEERS} servers"))
        }
        Message::Error { message, .. } => check_text("message", message),
        Message::Data { data } if data.len() as u64 > MAX_IO => {
            field("data", "over the size limit".into())
        }
        _ => Ok(()),
    }
}

fn check_report(report: &ServiceReport) -> Result<(), ProtocolError> {
    if report.served.len() > MAX_REPORT_APPS {
        return field(
            "served",
            format!("more than {MAX_REPORT_APPS} applications"),
        );
    }
    for s in &report.served {
        let app = s.app.0;
        if !(s.weight.is_finite() && s.weight > 0.0) {
            return field(
                "served",
                format!("application {app}: weight {} is not > 0", s.weight),
            );
        }
        if s.reserved_bytes > s.bytes || s.reserved_requests > s.requests {
            return field(
                "served",
                format!("application {app}: more served by reservations than served"),
            );
        }
    }
    Ok(())
}

/// At most `max` things in a list.
fn check_count(
    name: &'static str,
    n: usize,
    max: usize,
    things: &str,
) -> Result<(), ProtocolError> {
    if n > max {
        return field(name, format!("{n} {things} is over the limit of {max}"));
    }
    Ok(())
}

/// A size or offset a file can have (an `off_t`).
fn check_file_size(name: &'static str, size: u64) -> Result<(), ProtocolError> {
    if size > i64::MAX as u64 {
        return field(name, format!("{size} is larger than a file can be"));
    }
    Ok(())
}
