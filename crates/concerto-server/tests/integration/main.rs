//! The server's integration tests, one binary: each file a module (what
//! it proves is in its own opening comment), `common` what they share.
//! One binary links the server, the client and tokio once, where twelve
//! binaries took about 180 s of the test build's CPU between them
//! (docs/contributing.md). Run one file's tests with its module's name:
//! `cargo test --release -p concerto-server --test integration fuzz::`.

mod common;

mod auth;
mod coordinator;
mod data_server;
mod faults;
mod file_system;
mod fuzz;
mod integrity;
mod limits;
mod permissions;
mod profile;
mod rules;
mod toml_readers;
