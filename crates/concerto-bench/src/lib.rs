//! Benchmarks live in `benches/`; this crate has no code of its own.
