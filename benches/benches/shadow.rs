//! What a shadow plugin adds to a call (`docs/shadow.md`): an unsampled call pays the
//! sampling draw; a sampled one a pick of the shadow selector (wasm, through the real
//! host) and the comparison and counting the select stage does with it.

use std::hint::black_box;

use axle::manifest::Manifest;
use axle::plugin::selfcheck::sample_table;
use axle::plugin::shadow::{unix_ms, Divergence, Sampler, ShadowCounters};
use axle::plugin::{Plugin, PluginHost};
use criterion::{criterion_group, criterion_main, Criterion};

fn shadow(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("cache dir");
    let host = PluginHost::new(Some(dir.path().to_path_buf())).expect("host");
    let mut group = c.benchmark_group("shadow");
    // The draw every call of a service with a shadow makes.
    let sampler = Sampler::new(0.01);
    group.bench_function("unsampled/draw", |b| b.iter(|| black_box(sampler.hit())));
    // What a sampled call adds: the shadow's pick among 10 endpoints, compared with the
    // live pick, counted (a divergence recorded with its detail).
    let manifest = Manifest::embedded().expect("embedded manifest");
    let loaded = host
        .load(&manifest.plugins["random"])
        .expect("random loads");
    let Plugin::Selector(selector) = &loaded.plugin else {
        unreachable!()
    };
    selector.endpoints_changed(&sample_table(1, 10));
    let set = selector.intern_set(&(0..10).collect::<Vec<u32>>());
    let counters = ShadowCounters::new("selector", "echo", "rr", "random", 1.0);
    group.bench_function("sampled/select-compare-count", |b| {
        let mut live = 0u32;
        b.iter(|| {
            live = (live + 1) % 10;
            match selector.select(set, u64::from(live)) {
                Some(s) if s.by_plugin && s.endpoint == live => counters.agreed(),
                Some(s) if s.by_plugin => counters.diverged(|| Divergence {
                    at_unix_ms: unix_ms(),
                    live: live.to_string(),
                    candidate: s.endpoint.to_string(),
                    ..Divergence::default()
                }),
                _ => counters.faulted(),
            }
        })
    });
    group.finish();
}

criterion_group!(benches, shadow);
criterion_main!(benches);
