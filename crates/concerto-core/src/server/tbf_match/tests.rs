//! Lustre TBF's expressions: what they match, and how a mistake is named.

use super::*;
use crate::request::{AppId, MetaOp};
use crate::time::Time;

fn req(app: u32, op: Op, user: Option<u32>, group: Option<u32>, nid: Option<Nid>) -> Request {
    Request {
        user,
        group,
        nid,
        ..Request::data(0, app, 0, Time::ZERO, op, 1, 0, 4096)
    }
}

fn parse(text: &str) -> TbfMatch {
    TbfMatch::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn a_conjunction_needs_every_condition_and_a_list_any_of_its_values() {
    let m = parse("jobid={1 4-7}&opcode={ost_write}");
    assert!(m.matches(&req(5, Op::Write, None, None, None)));
    assert!(m.matches(&req(1, Op::Write, None, None, None)));
    assert!(
        !m.matches(&req(5, Op::Read, None, None, None)),
        "wrong opcode"
    );
    assert!(
        !m.matches(&req(3, Op::Write, None, None, None)),
        "job 3 not listed"
    );
}

#[test]
fn conjunctions_joined_by_a_comma_are_alternatives() {
    let m = parse("uid={500} & gid={100}, jobid={9}");
    assert!(m.matches(&req(1, Op::Read, Some(500), Some(100), None)));
    assert!(!m.matches(&req(1, Op::Read, Some(500), Some(101), None)));
    assert!(m.matches(&req(9, Op::Read, None, None, None)));
    assert!(
        !m.matches(&req(1, Op::Read, None, Some(100), None)),
        "a request without a user satisfies no uid condition"
    );
}

#[test]
fn nids_match_lustres_address_patterns() {
    let m = parse("nid={192.168.1.[1-128,200]@tcp 0@sim}");
    let tcp = |a: [u8; 4]| req(1, Op::Read, None, None, Some(Nid::Tcp(a)));
    assert!(m.matches(&tcp([192, 168, 1, 7])));
    assert!(m.matches(&tcp([192, 168, 1, 200])));
    assert!(!m.matches(&tcp([192, 168, 1, 129])));
    assert!(!m.matches(&tcp([192, 168, 2, 7])));
    assert!(m.matches(&req(1, Op::Read, None, None, Some(Nid::Sim(0)))));
    assert!(!m.matches(&req(1, Op::Read, None, None, Some(Nid::Sim(1)))));
    assert!(
        !m.matches(&req(1, Op::Read, None, None, None)),
        "no NID known"
    );
    let any_tcp = parse("nid={*@tcp}");
    assert!(any_tcp.matches(&tcp([10, 0, 0, 1])));
    assert!(!any_tcp.matches(&req(1, Op::Read, None, None, Some(Nid::Sim(3)))));
    assert!(parse("nid={*}").matches(&req(1, Op::Read, None, None, Some(Nid::Sim(3)))));
}

#[test]
fn an_opcode_may_name_one_metadata_operation() {
    let m = parse("opcode={create mkdir}");
    assert!(m.matches(&req(1, Op::Meta(MetaOp::Create), None, None, None)));
    assert!(!m.matches(&req(1, Op::Meta(MetaOp::Getattr), None, None, None)));
    assert!(parse("opcode={metadata}").matches(&req(
        1,
        Op::Meta(MetaOp::Getattr),
        None,
        None,
        None
    )));
}

#[test]
fn a_peer_address_becomes_its_nid() {
    let v4: IpAddr = "192.168.1.5".parse().unwrap();
    assert_eq!(Nid::of_peer(v4), Some(Nid::Tcp([192, 168, 1, 5])));
    assert_eq!(Nid::of_peer(v4).unwrap().to_string(), "192.168.1.5@tcp");
    let mapped: IpAddr = "::ffff:10.0.0.2".parse().unwrap();
    assert_eq!(Nid::of_peer(mapped), Some(Nid::Tcp([10, 0, 0, 2])));
    assert_eq!(Nid::of_peer("::1".parse().unwrap()), None);
    assert_eq!(Nid::Sim(3).to_string(), "3@sim");
    assert_eq!(AppId(1), req(1, Op::Read, None, None, None).app);
}

#[test]
fn mistakes_are_named_with_their_column() {
    let err = |t: &str| TbfMatch::parse(t).unwrap_err();
    assert_eq!(
        err("jobid={1}&colour={red}"),
        "at column 11: unknown field \"colour\" (fields: jobid, uid, gid, opcode, nid)"
    );
    assert_eq!(
        err("jobid=1"),
        "at column 7: expected '{' and a list of values"
    );
    assert_eq!(err("uid={7-3}"), "at column 6: \"7-3\" runs backwards");
    assert_eq!(
        err("opcode={ost_punch}").split(" (").next().unwrap(),
        "at column 9: no opcode \"ost_punch\""
    );
    assert_eq!(
        err("nid={192.168.1.300@tcp}"),
        "at column 6: \"192.168.1.300@tcp\": an address part is at most 255"
    );
    assert_eq!(
        err("nid={10.0.0.1@o2ib}"),
        "at column 6: \"10.0.0.1@o2ib\": no network \"o2ib\" here (tcp, sim)"
    );
    assert_eq!(err("uid={}"), "at column 6: an empty list matches nothing");
    assert_eq!(err("uid={1"), "at column 6: no '}' closes the list");
    assert_eq!(
        err("uid={1} gid={2}"),
        "at column 9: expected '&', ',' or the end, found 'g'"
    );
    assert_eq!(
        err(""),
        "at column 1: expected a field (jobid, uid, gid, opcode, nid)"
    );
}
