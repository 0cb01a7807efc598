//! No code. This crate's dependencies name the union of the features the
//! workspace's builds turn on, so that `make build`, maturin and `cargo
//! test` compile each shared crate once (see Cargo.toml).
