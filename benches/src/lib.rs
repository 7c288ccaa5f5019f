//! Criterion benchmarks live in `benches/`; run them with
//! `cargo bench -p axle-benches`. `axle bench plugins` prints the same figures for a
//! user's own manifest.
