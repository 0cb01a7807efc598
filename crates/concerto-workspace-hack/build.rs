// Empty: a build script is what makes cargo resolve [build-dependencies]
// (see Cargo.toml), so the host's proc-macro crates share one feature set.
fn main() {}
