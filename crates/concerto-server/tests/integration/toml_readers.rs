//! Every TOML reader run on text it is given — the server file, the key
//! ring and a credential, the cluster file, the policy, QoS rules and set
//! rule that arrive on the wire from an administrator, and the simulator's
//! scenarios (the experiments' own files) — fuzzed from valid documents: characters deleted,
//! inserted (TOML's own punctuation first) and lines repeated or dropped.
//! Each reader answers with its value or an error, never a panic, and a
//! document it accepts is one it accepts again (no state between calls).

use proptest::prelude::*;

use concerto_proto::auth::{Credential, KeyRing};
use concerto_proto::cluster::ClusterFile;
use concerto_server::config::server_config;
use concerto_server::coordinator::parse_sets;
use concerto_server::rules::{parse_policy, parse_rules};
use concerto_sim::Scenario;

const SERVER: &str = r#"[server]
listen = "127.0.0.1:4100"
data_dir = "/tmp/concerto-fuzz-never-created"
roles = ["data", "metadata"]
keys = "/nonexistent/keys.toml"
depth = 4
connection_memory = "16MiB"
frame_timeout = "1s"
[policy]
kind = "sfq-d-plus"
depth = 8
[throttle]
preset = "hdd"
seek = "4ms"
[metadata]
data_servers = [0, 1]
stripe_unit = "1MiB"
"#;

const CLUSTER: &str = r#"[cluster]
timeout = "5s"
credential = "admin.key"

[[servers]]
id = 0
address = "10.0.0.1:4100"
roles = ["data", "metadata"]

[[servers]]
id = 1
address = "10.0.0.2:4100"
roles = ["data"]
metrics = "10.0.0.2:9100"
"#;

const RULES: &str = r#"work_conserving = false

[[rules]]
name = "job3-cap"
job = 3
op = "write"
weight = 2.0
bandwidth = "20MB/s"
requests_per_second = 200
burst = "4MiB"
burst_requests = 4

[[rules]]
name = "users"
user = 1001
op = "metadata"
requests_per_second = 50
"#;

const POLICY: &str = "kind = \"sfq-d-plus\"\ndepth = 4\nlarge_slots = 2\n";
const SETS: &str = "kind = \"log\"\nbase = 2\n";

/// What is inserted: TOML's punctuation, digits, letters, a quote of
/// each kind, a backslash, a control character and a multi-byte one.
const INSERTS: &[char] = &[
    '"', '\'', '=', '[', ']', '{', '}', ',', '.', '#', '\n', ' ', '-', '+', '_', '0', '9', 'e',
    'x', 'k', '\\', '\u{0}', 'é', ':',
];

/// One edit of a document's characters or lines.
#[derive(Clone, Debug)]
enum Edit {
    Delete(prop::sample::Index),
    Insert(prop::sample::Index, char),
    RepeatLine(prop::sample::Index),
    DropLine(prop::sample::Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Edit::Delete),
        (any::<prop::sample::Index>(), prop::sample::select(INSERTS))
            .prop_map(|(i, c)| Edit::Insert(i, c)),
        (any::<prop::sample::Index>(), any::<char>()).prop_map(|(i, c)| Edit::Insert(i, c)),
        any::<prop::sample::Index>().prop_map(Edit::RepeatLine),
        any::<prop::sample::Index>().prop_map(Edit::DropLine),
    ]
}

fn apply(doc: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = doc.chars().collect();
    for e in edits {
        match e {
            Edit::Delete(i) if !chars.is_empty() => {
                chars.remove(i.index(chars.len()));
            }
            Edit::Insert(i, c) => chars.insert(i.index(chars.len() + 1), *c),
            Edit::RepeatLine(i) | Edit::DropLine(i) => {
                let text: String = chars.iter().collect();
                let mut lines: Vec<&str> = text.lines().collect();
                if lines.is_empty() {
                    continue;
                }
                let at = i.index(lines.len());
                if matches!(e, Edit::RepeatLine(_)) {
                    lines.insert(at, lines[at]);
                } else {
                    lines.remove(at);
                }
                chars = lines.join("\n").chars().collect();
            }
            _ => {}
        }
    }
    chars.into_iter().collect()
}

/// Each reader, on `text`: the same answer twice, and no panic.
fn read_all(text: &str) {
    macro_rules! twice {
        ($read:expr) => {{
            let first = $read(text).is_ok();
            assert_eq!($read(text).is_ok(), first, "{text:?}");
        }};
    }
    twice!(server_config);
    twice!(KeyRing::parse);
    twice!(Credential::parse);
    twice!(ClusterFile::parse);
    twice!(parse_rules);
    twice!(parse_policy);
    twice!(parse_sets);
    twice!(|t| Scenario::from_toml(t, &[]));
}

/// Scenarios: the demo's (the experiments' others are sweeps, read by the
/// Python layer), and one with metadata and data workloads, QoS rules and
/// another device and policy.
const SCENARIOS: [&str; 2] = [
    include_str!("../../../../experiments/demo.toml"),
    r#"
seed = 7
[cluster]
servers = 4
stripe_unit = "64KiB"
device = { kind = "ssd" }

[policy]
kind = "sfq-d"
depth = 4

[qos]
[[qos.rules]]
name = "cap"
job = 2
bandwidth = "20MB/s"

[[apps]]
name = "md"
workload = "md-test"
processes = 2
items = 10

[[apps]]
name = "a"
workload = "ior"
processes = 2
requests = 2
request_size = "64KiB"
"#,
];
fn documents() -> Vec<String> {
    let ring = KeyRing::generate().unwrap();
    let admin = ring.get("admin").unwrap().credential();
    let mut docs: Vec<String> = SCENARIOS.iter().map(|s| s.to_string()).collect();
    docs.extend([
        SERVER.into(),
        CLUSTER.into(),
        RULES.into(),
        POLICY.into(),
        SETS.into(),
        ring.to_toml(),
        admin.to_toml(),
    ]);
    docs
}

#[test]
fn the_valid_documents_read() {
    let docs = documents();
    ClusterFile::parse(CLUSTER).unwrap();
    parse_rules(RULES).unwrap();
    parse_policy(POLICY).unwrap();
    parse_sets(SETS).unwrap();
    let n = SCENARIOS.len();
    KeyRing::parse(&docs[n + 5]).unwrap();
    Credential::parse(&docs[n + 6]).unwrap();
    for (i, s) in SCENARIOS.iter().enumerate() {
        if let Err(e) = Scenario::from_toml(s, &[]) {
            panic!("scenario {i}: {e}");
        }
    }
    // The server file names a key ring that does not exist: refused,
    // naming it, once it has read every other key.
    let e = server_config(SERVER).unwrap_err();
    assert!(e.contains("/nonexistent/keys.toml"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn edited_documents_are_read_or_refused_never_a_panic(
        doc in any::<prop::sample::Index>(),
        edits in proptest::collection::vec(edit(), 1..6),
    ) {
        let docs = documents();
        read_all(&apply(&docs[doc.index(docs.len())], &edits));
    }

    #[test]
    fn arbitrary_text_is_refused_never_a_panic(text in ".{0,200}") {
        read_all(&text);
    }
}
