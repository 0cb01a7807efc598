//! Lustre NRS TBF's rule expressions (the Lustre Operations Manual,
//! "TBF policy"): which requests a rule applies to, written as Lustre's
//! administrators write them.
//!
//! ```text
//! jobid={1 4-7}&opcode={write}, nid={192.168.1.[1-128]@tcp} & uid={500}
//! ```
//!
//! An expression is conditions joined by `&` (all must hold), and such
//! conjunctions joined by `,` (one must hold). A condition is a field and
//! a set of values in braces, any of which may match:
//! - `jobid`, `uid`, `gid`: numbers, or ranges `a-b` (Lustre's job ids are
//!   strings such as `dd.500`; Concerto's jobs are numbered applications);
//! - `opcode`: `read`, `write`, `metadata`, Lustre's `ost_read` and
//!   `ost_write`, or one metadata operation (`create`, `mkdir`, `getattr`,
//!   `readdir`, `remove`, `rmdir`, `rename`, `setattr`);
//! - `nid`: the client's network id, Lustre's `address@network`: on a real
//!   cluster the peer's IPv4 address on `tcp` (`192.168.1.5@tcp`), in the
//!   simulator a node's index on `sim` (`3@sim`). Each part of an address
//!   may be a number, `*`, or a list of numbers and ranges in brackets
//!   (`192.168.1.[1-128,200]@tcp`); `*@tcp` is any address on tcp, `*`
//!   any NID at all.
//!
//! A request that does not carry a field (no user, no group, no NID) never
//! satisfies a condition on it. Parsing names the column of the problem.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use super::qos::OpClass;
use crate::request::{MetaOp, Op, Request};

/// A client's network id: an IPv4 address on tcp, or a simulated node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Nid {
    Tcp([u8; 4]),
    Sim(u32),
}

impl Nid {
    /// The NID of a peer at `addr`; an IPv6 peer has none (Lustre's TCP
    /// network is IPv4), unless it is an IPv4 address mapped into IPv6.
    pub fn of_peer(addr: IpAddr) -> Option<Nid> {
        match addr {
            IpAddr::V4(v4) => Some(Nid::Tcp(v4.octets())),
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(|v4| Nid::Tcp(v4.octets())),
        }
    }
}

impl fmt::Display for Nid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Nid::Tcp(a) => write!(f, "{}@tcp", Ipv4Addr::from(*a)),
            Nid::Sim(n) => write!(f, "{n}@sim"),
        }
    }
}

/// Numbers: single ones and inclusive ranges.
#[derive(Clone, Debug, PartialEq)]
struct Numbers(Vec<(u32, u32)>);

impl Numbers {
    fn has(&self, v: u32) -> bool {
        self.0.iter().any(|&(lo, hi)| lo <= v && v <= hi)
    }
}

/// One part of a NID pattern's address.
#[derive(Clone, Debug, PartialEq)]
enum Part {
    Any,
    Some(Numbers),
}

#[derive(Clone, Debug, PartialEq)]
enum NidPattern {
    /// `*`: every NID.
    Any,
    Tcp([Part; 4]),
    Sim(Part),
}

impl NidPattern {
    fn matches(&self, nid: Nid) -> bool {
        let part = |p: &Part, v: u32| match p {
            Part::Any => true,
            Part::Some(n) => n.has(v),
        };
        match (self, nid) {
            (NidPattern::Any, _) => true,
            (NidPattern::Tcp(parts), Nid::Tcp(addr)) => {
                parts.iter().zip(addr).all(|(p, a)| part(p, a as u32))
            }
            (NidPattern::Sim(p), Nid::Sim(n)) => part(p, n),
            _ => false,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Opcode {
    Class(OpClass),
    Meta(MetaOp),
}

#[derive(Clone, Debug, PartialEq)]
enum Condition {
    Job(Numbers),
    Uid(Numbers),
    Gid(Numbers),
    Opcode(Vec<Opcode>),
    Nid(Vec<NidPattern>),
}

impl Condition {
    fn holds(&self, req: &Request) -> bool {
        match self {
            Condition::Job(n) => n.has(req.app.0),
            Condition::Uid(n) => req.user.is_some_and(|u| n.has(u)),
            Condition::Gid(n) => req.group.is_some_and(|g| n.has(g)),
            Condition::Opcode(ops) => ops.iter().any(|o| match o {
                Opcode::Class(c) => *c == OpClass::of(req.op),
                Opcode::Meta(m) => req.op == Op::Meta(*m),
            }),
            Condition::Nid(ps) => req.nid.is_some_and(|nid| ps.iter().any(|p| p.matches(nid))),
        }
    }
}

/// A parsed expression: one of the conjunctions must hold.
#[derive(Clone, Debug, PartialEq)]
pub struct TbfMatch {
    any_of: Vec<Vec<Condition>>,
}

impl TbfMatch {
    /// Matches no request.
    pub const NOTHING: TbfMatch = TbfMatch { any_of: Vec::new() };

    pub fn matches(&self, req: &Request) -> bool {
        self.any_of
            .iter()
            .any(|all| all.iter().all(|c| c.holds(req)))
    }

    /// Parses `text`; the error names the column (counted from 1).
    pub fn parse(text: &str) -> Result<TbfMatch, String> {
        let mut p = Parser { text, pos: 0 };
        let mut any_of = vec![p.conjunction()?];
        loop {
            p.skip_space();
            match p.peek() {
                None => break,
                Some(',') => {
                    p.pos += 1;
                    any_of.push(p.conjunction()?);
                }
                Some(c) => {
                    return Err(p.error(&format!("expected '&', ',' or the end, found {c:?}")))
                }
            }
        }
        Ok(TbfMatch { any_of })
    }
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

const FIELDS: &str = "jobid, uid, gid, opcode, nid";

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn error(&self, what: &str) -> String {
        format!(
            "at column {}: {what}",
            self.text[..self.pos].chars().count() + 1
        )
    }

    fn conjunction(&mut self) -> Result<Vec<Condition>, String> {
        let mut all = vec![self.condition()?];
        loop {
            self.skip_space();
            if self.peek() != Some('&') {
                return Ok(all);
            }
            self.pos += 1;
            all.push(self.condition()?);
        }
    }

    fn condition(&mut self) -> Result<Condition, String> {
        self.skip_space();
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.pos += 1;
        }
        let field = &self.text[start..self.pos];
        if field.is_empty() {
            return Err(self.error(&format!("expected a field ({FIELDS})")));
        }
        self.skip_space();
        if self.peek() != Some('=') {
            return Err(self.error(&format!("expected '=' after {field}")));
        }
        self.pos += 1;
        self.skip_space();
        if self.peek() != Some('{') {
            return Err(self.error("expected '{' and a list of values"));
        }
        self.pos += 1;
        let values_at = self.pos;
        let Some(len) = self.text[self.pos..].find('}') else {
            return Err(self.error("no '}' closes the list"));
        };
        let values: Vec<&str> = self.text[self.pos..self.pos + len]
            .split_whitespace()
            .collect();
        if values.is_empty() {
            return Err(self.error("an empty list matches nothing"));
        }
        let at = |p: &Parser, e: String| {
            Parser {
                text: p.text,
                pos: values_at,
            }
            .error(&e)
        };
        let cond = match field {
            "jobid" => Condition::Job(numbers(&values).map_err(|e| at(self, e))?),
            "uid" => Condition::Uid(numbers(&values).map_err(|e| at(self, e))?),
            "gid" => Condition::Gid(numbers(&values).map_err(|e| at(self, e))?),
            "opcode" => Condition::Opcode(
                values
                    .iter()
                    .map(|v| opcode(v))
                    .collect::<Result<_, _>>()
                    .map_err(|e| at(self, e))?,
            ),
            "nid" => Condition::Nid(
                values
                    .iter()
                    .map(|v| nid_pattern(v))
                    .collect::<Result<_, _>>()
                    .map_err(|e| at(self, e))?,
            ),
            other => {
                self.pos = start;
                return Err(self.error(&format!("unknown field {other:?} (fields: {FIELDS})")));
            }
        };
        self.pos += len + 1;
        Ok(cond)
    }
}

fn number(v: &str) -> Result<u32, String> {
    v.parse().map_err(|_| format!("{v:?} is not a number"))
}

/// `5`, `4-7`.
fn range(v: &str) -> Result<(u32, u32), String> {
    match v.split_once('-') {
        Some((lo, hi)) => {
            let (lo, hi) = (number(lo)?, number(hi)?);
            if lo > hi {
                return Err(format!("{v:?} runs backwards"));
            }
            Ok((lo, hi))
        }
        None => number(v).map(|n| (n, n)),
    }
}

fn numbers(values: &[&str]) -> Result<Numbers, String> {
    values
        .iter()
        .map(|v| range(v))
        .collect::<Result<_, _>>()
        .map(Numbers)
}

fn opcode(v: &str) -> Result<Opcode, String> {
    Ok(match v {
        "read" | "ost_read" => Opcode::Class(OpClass::Read),
        "write" | "ost_write" => Opcode::Class(OpClass::Write),
        "metadata" => Opcode::Class(OpClass::Metadata),
        "create" => Opcode::Meta(MetaOp::Create),
        "mkdir" => Opcode::Meta(MetaOp::Mkdir),
        "getattr" => Opcode::Meta(MetaOp::Getattr),
        "readdir" => Opcode::Meta(MetaOp::Readdir),
        "remove" => Opcode::Meta(MetaOp::Remove),
        "rmdir" => Opcode::Meta(MetaOp::Rmdir),
        "rename" => Opcode::Meta(MetaOp::Rename),
        "setattr" => Opcode::Meta(MetaOp::Setattr),
        other => {
            return Err(format!(
                "no opcode {other:?} (read, write, metadata, ost_read, ost_write, create, mkdir, \
                 getattr, readdir, remove, rmdir, rename, setattr)"
            ))
        }
    })
}

/// `*`, a number, or `[1-3,7]`.
fn part(v: &str) -> Result<Part, String> {
    if v == "*" {
        return Ok(Part::Any);
    }
    if let Some(inner) = v.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        let list: Vec<&str> = inner.split(',').collect();
        return numbers(&list).map(Part::Some);
    }
    number(v).map(|n| Part::Some(Numbers(vec![(n, n)])))
}

fn nid_pattern(v: &str) -> Result<NidPattern, String> {
    if v == "*" {
        return Ok(NidPattern::Any);
    }
    let Some((addr, net)) = v.rsplit_once('@') else {
        return Err(format!(
            "{v:?} is not a NID (address@network, such as 192.168.1.5@tcp or 3@sim)"
        ));
    };
    match net {
        "tcp" => {
            let parts: Vec<&str> = addr.split('.').collect();
            if addr == "*" {
                return Ok(NidPattern::Tcp([
                    Part::Any,
                    Part::Any,
                    Part::Any,
                    Part::Any,
                ]));
            }
            if parts.len() != 4 {
                return Err(format!("{v:?}: a tcp address has four parts"));
            }
            let mut out = [Part::Any, Part::Any, Part::Any, Part::Any];
            for (slot, p) in out.iter_mut().zip(parts) {
                let parsed = part(p)?;
                if let Part::Some(n) = &parsed {
                    if n.0.iter().any(|&(_, hi)| hi > 255) {
                        return Err(format!("{v:?}: an address part is at most 255"));
                    }
                }
                *slot = parsed;
            }
            Ok(NidPattern::Tcp(out))
        }
        "sim" => part(addr).map(NidPattern::Sim),
        other => Err(format!("{v:?}: no network {other:?} here (tcp, sim)")),
    }
}

#[cfg(test)]
mod tests;
