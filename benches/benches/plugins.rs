//! Plugin call costs, for developers: the floor (an empty scalar component call), a
//! selector at 10 and 10,000 endpoints, a router, a serializer at three payload sizes and
//! on a record of short fields, a limiter — wasm through the real host, beside the native
//! twin of the same code.
//! `axle bench plugins` reports the same for any manifest.

use std::hint::black_box;

use axle::manifest::Manifest;
use axle::plugin::selfcheck::sample_table;
use axle::plugin::{LoadedPlugin, Plugin, PluginHost};
use axle::spi::LimitKey;
use axle_bench::native;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn load(host: &PluginHost, name: &str) -> LoadedPlugin {
    let manifest = Manifest::embedded().expect("embedded manifest");
    host.load(&manifest.plugins[name]).expect("plugin loads")
}

fn floor(c: &mut Criterion, host: &PluginHost) {
    let mut floor = host.floor().expect("floor component");
    c.bench_function("floor/noop", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            black_box(floor.call("noop", |f, s| f.call_noop(s, i)).ok())
        })
    });
}

fn selectors(c: &mut Criterion, host: &PluginHost) {
    axle_bench::sample_facts(host);
    let mut group = c.benchmark_group("select");
    for name in ["round-robin", "weighted-random", "p2c-ewma"] {
        let loaded = load(host, name);
        let Plugin::Selector(s) = &loaded.plugin else {
            unreachable!()
        };
        let config = native::config(Vec::new());
        for n in [10u32, 10_000] {
            let table = sample_table(1, n);
            s.endpoints_changed(&table);
            s.define_set(0, (0..n).collect());
            group.bench_with_input(BenchmarkId::new(format!("{name}/wasm"), n), &n, |b, _| {
                let mut k = 0u64;
                b.iter(|| {
                    k += 1;
                    black_box(s.select(0, k))
                })
            });
            let mut twin = native::selector(name, &config).expect("native twin");
            twin.endpoints_changed(table.clone());
            twin.define_set(0, (0..n).collect());
            group.bench_with_input(BenchmarkId::new(format!("{name}/native"), n), &n, |b, _| {
                let mut k = 0u64;
                b.iter(|| {
                    k += 1;
                    black_box(twin.select(0, k))
                })
            });
        }
    }
    group.finish();
}

fn serializers(c: &mut Criterion, host: &PluginHost) {
    let mut group = c.benchmark_group("encode");
    for name in ["json", "msgpack"] {
        let loaded = load(host, name);
        let Plugin::Serializer(s) = &loaded.plugin else {
            unreachable!()
        };
        for sample in axle_bench::samples() {
            group.bench_with_input(
                BenchmarkId::new(format!("{name}/wasm"), sample.label),
                &sample.value,
                |b, value| b.iter(|| black_box(s.encode(value).ok())),
            );
        }
    }
    group.finish();
}

fn limiter(c: &mut Criterion, host: &PluginHost) {
    let loaded = load(host, "token-bucket");
    let Plugin::Limiter(l) = &loaded.plugin else {
        unreachable!()
    };
    let key = l.key_id(&LimitKey {
        service: "bench".into(),
        method: "call".into(),
        consumer_app: String::new(),
        consumer_ip: "127.0.0.1".into(),
    });
    c.bench_function("acquire/token-bucket/wasm", |b| {
        b.iter(|| black_box(l.acquire(key, 1)))
    });
}

fn all(c: &mut Criterion) {
    let cache = tempfile::tempdir().expect("temp dir");
    let host = PluginHost::new(Some(cache.path().to_path_buf())).expect("plugin host");
    floor(c, &host);
    selectors(c, &host);
    serializers(c, &host);
    limiter(c, &host);
}

criterion_group!(benches, all);
criterion_main!(benches);
