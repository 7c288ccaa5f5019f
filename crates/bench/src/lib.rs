//! `axle bench plugins`: what each plugin's hot functions cost per call, beside the floor
//! (an empty scalar component call) measured in the same run, and beside the native twin
//! of each shipped algorithm. Numbers are best-of-N of calibrated loops: ratios within one
//! run are the point, absolute figures move with the machine.

pub mod alloc_count;
pub mod cpu;
pub mod gateway;
pub mod hostile;
pub mod intercept;
pub mod languages;
pub mod native;
pub mod pki;
pub mod rpc;
pub mod swap;

use std::hint::black_box;
use std::time::{Duration, Instant};

use axle::manifest::{ComponentSource, Manifest, PluginKind};
use axle::plugin::kinds::health_scorer::{HealthState, Verdict, WindowStats};
use axle::plugin::kinds::router::RouteRequest;
use axle::plugin::kinds::serializer::{Node, Value};
use axle::plugin::selfcheck::sample_table;
use axle::plugin::{LoadError, Plugin, PluginHost};
use axle::spi::LimitKey;

/// Endpoint counts selectors and routers are measured at.
pub const ENDPOINT_COUNTS: [u32; 3] = [10, 1_000, 10_000];

/// Payload sizes serializers are measured at, each a [`sample_value`].
pub const PAYLOADS: [(&str, usize); 3] = [("64B", 64), ("1KiB", 1024), ("64KiB", 64 * 1024)];

/// Fields of the [`sample_record`] serializers are also measured on.
pub const RECORD_FIELDS: usize = 20;

/// One measured function.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub name: String,
    pub kind: String,
    pub function: String,
    pub param: String,
    pub wasm_ns: f64,
    /// The native twin's cost (shipped algorithms only).
    pub native_ns: Option<f64>,
    /// The floor measured beside this plugin's rows (for a selector or a limiter, timed in
    /// turns with its calls; otherwise the lower of a reading just before them and one
    /// just after): what `x floor` divides by. A floor read once at the start of a run
    /// moved ±20% against rows measured seconds later on a shared machine.
    pub floor_ns: f64,
}

/// The whole run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub floor_ns: f64,
    /// The byte floor at each sample's size ([`samples`]): a call that carries that many
    /// bytes in and the same back, doing nothing else. What a serializer or an
    /// interceptor pays for the boundary before its own work. The best reading of the
    /// run: one at the start, and one per round of each serializer's rows, taken in turns
    /// with them.
    pub bytes_floor: Vec<BytesFloor>,
    pub plugins: Vec<Row>,
}

/// The byte floor at one size.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BytesFloor {
    pub param: String,
    pub ns: f64,
}

/// How long one timing loop runs, and how many loops (the best is kept).
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub loop_time: Duration,
    pub loops: u32,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            loop_time: Duration::from_millis(30),
            loops: 3,
        }
    }
}

/// Nanoseconds per call of `f`, best of `budget.loops` calibrated loops.
pub fn ns_per_call(budget: Budget, mut f: impl FnMut(u64)) -> f64 {
    // Calibrate: double the batch until it fills a tenth of the loop time.
    let mut batch = 1u64;
    loop {
        let start = Instant::now();
        for i in 0..batch {
            f(i);
        }
        if start.elapsed() >= budget.loop_time / 10 || batch >= 1 << 30 {
            break;
        }
        batch *= 2;
    }
    let mut best = f64::INFINITY;
    for _ in 0..budget.loops.max(1) {
        let start = Instant::now();
        let mut calls = 0u64;
        while start.elapsed() < budget.loop_time {
            for i in 0..batch {
                f(i);
            }
            calls += batch;
        }
        best = best.min(start.elapsed().as_nanos() as f64 / calls as f64);
    }
    best
}

/// A value of about `size` bytes once encoded: a small record around a text payload.
pub fn sample_value(size: usize) -> Value {
    let text = "x".repeat(size.saturating_sub(32));
    Value {
        nodes: vec![
            Node::Mapping(3),
            Node::Text("id".into()),
            Node::Signed(1),
            Node::Text("name".into()),
            Node::Text("axle".into()),
            Node::Text("payload".into()),
            Node::Text(text),
        ],
    }
}

/// A record of [`RECORD_FIELDS`] short fields (a name each; a number, a short text or a
/// boolean as value): what a typical request carries, where a serializer's time goes per
/// node rather than per byte (`docs/performance.md`, "A call per container, not per node").
pub fn sample_record() -> Value {
    let mut nodes = vec![Node::Mapping(RECORD_FIELDS as u32)];
    for i in 0..RECORD_FIELDS {
        nodes.push(Node::Text(format!("field_{i}")));
        nodes.push(match i % 3 {
            0 => Node::Signed(i as i64 * 1000),
            1 => Node::Text(format!("value {i}")),
            _ => Node::Boolean(i % 2 == 0),
        });
    }
    Value { nodes }
}

/// One value serializers are measured on.
pub struct Sample {
    /// The rows' `param`.
    pub label: &'static str,
    pub value: Value,
    /// The byte floor's size beside it: the payload's size, or the record's packed size.
    pub floor_bytes: usize,
}

/// The serializers' samples: [`sample_value`] at each of [`PAYLOADS`], then
/// [`sample_record`] (param `record`).
pub fn samples() -> Vec<Sample> {
    let mut samples: Vec<Sample> = PAYLOADS
        .into_iter()
        .map(|(label, size)| Sample {
            label,
            value: sample_value(size),
            floor_bytes: size,
        })
        .collect();
    let record = sample_record();
    samples.push(Sample {
        label: "record",
        floor_bytes: record.pack().map_or(0, |p| p.len()),
        value: record,
    });
    samples
}

fn sdk_value(v: &Value) -> axle_sdk::Value {
    axle_sdk::Value {
        nodes: v
            .nodes
            .iter()
            .map(|n| match n {
                Node::Null => axle_sdk::Node::Null,
                Node::Boolean(b) => axle_sdk::Node::Boolean(*b),
                Node::Signed(i) => axle_sdk::Node::Signed(*i),
                Node::Unsigned(u) => axle_sdk::Node::Unsigned(*u),
                Node::Float(f) => axle_sdk::Node::Float(*f),
                Node::Text(s) => axle_sdk::Node::Text(s.clone()),
                Node::Binary(b) => axle_sdk::Node::Binary(b.clone()),
                Node::Array(n) => axle_sdk::Node::Array(*n),
                Node::Mapping(n) => axle_sdk::Node::Mapping(*n),
            })
            .collect(),
    }
}

/// A request with every part filled; each router is measured with the parts it
/// declared (what the client hands it), so a router reading less crosses less.
fn route_request() -> RouteRequest {
    RouteRequest {
        service: "bench".into(),
        method: "getUser".into(),
        tags: vec![("lane".into(), "canary".into())],
        consumer_app: "billing".into(),
        caller_address: "10.1.2.3".into(),
        fields: vec![("user.tier".into(), "gold".into())],
    }
}

fn window_stats() -> WindowStats {
    WindowStats {
        endpoint: 0,
        window_ms: 10_000,
        total: 200,
        timeouts: 3,
        failures: 2,
        rejected: 1,
        consecutive_failures: 0,
        heartbeat_failures: 0,
        ewma_latency_ns: 1_500_000,
        previous: HealthState::Healthy,
    }
}

/// The loop and the number of rounds for timing in turns: short loops, many rounds, in
/// the time `budget` gives each reading. A reading is the best of its loops, and a busy
/// spell of the machine (another guest on these cores) lasts longer than a 30 ms loop:
/// five 30 ms loops could all fall in one, and one run read `consistent-hash` at 1.01×
/// the floor and the next at 1.50×, where fifteen of 10 ms each leave more of them clear.
fn turns(budget: Budget) -> (Budget, u32) {
    let one_loop = Budget {
        loop_time: budget.loop_time / 3,
        loops: 1,
    };
    (one_loop, 3 * (budget.loops.max(1) + 2))
}

/// Times `f` and the floor in turns, one loop each per round, and keeps the best of each:
/// their ratio then compares readings taken under the same conditions, where a busy
/// spell of the machine between two readings taken one after the other moved a ratio by
/// a third. Returns (floor ns, `f`'s ns).
fn timed_in_turns(
    budget: Budget,
    floor_ns: &mut impl FnMut(Budget) -> f64,
    mut f: impl FnMut(u64),
) -> (f64, f64) {
    let (one_loop, rounds) = turns(budget);
    let (mut floor, mut ns) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..rounds {
        floor = floor.min(floor_ns(one_loop));
        ns = ns.min(ns_per_call(one_loop, &mut f));
    }
    (floor, ns)
}

/// Gives the sample endpoints (ids 0 to the largest of [`ENDPOINT_COUNTS`]) facts, as a
/// client's endpoints have: a two-choice selector's pick reads its two candidates' facts
/// in the kernel, and an id without them takes a slower fallback no client path takes.
pub fn sample_facts(host: &PluginHost) {
    let largest = sample_table(0, ENDPOINT_COUNTS[ENDPOINT_COUNTS.len() - 1]);
    let endpoints: Vec<(&str, u32)> = largest
        .endpoints()
        .iter()
        .map(|e| (e.address.as_str(), e.weight))
        .collect();
    host.facts().allocate_all(&endpoints);
}

/// Runs the benchmark over every plugin of `manifest`.
pub fn run(host: &PluginHost, manifest: &Manifest, budget: Budget) -> Result<Report, LoadError> {
    sample_facts(host);
    let mut floor = host.floor()?;
    // An instance of its own: the scalar floor's is lent to `floor_ns` below for the run.
    let mut echo = host.floor()?;
    let mut bytes_floor_ns = |budget: Budget, size: usize| {
        let bytes = vec![b'x'; size];
        ns_per_call(budget, |_| {
            let _ = black_box(echo.call("echo", |b, s| b.call_echo(s, &bytes)));
        })
    };
    let samples = samples();
    let mut bytes_floor: Vec<BytesFloor> = samples
        .iter()
        .map(|sample| BytesFloor {
            param: sample.label.to_string(),
            ns: bytes_floor_ns(budget, sample.floor_bytes),
        })
        .collect();
    let mut floor_ns = |budget: Budget| {
        ns_per_call(budget, |i| {
            let _ = black_box(floor.call("noop", |b, s| b.call_noop(s, i)));
        })
    };
    let first_floor_ns = floor_ns(budget);

    let mut rows = Vec::new();
    for spec in manifest.plugins.values() {
        // Selectors and limiters read the floor in turns with their own calls (see below);
        // the others, just before and just after their rows.
        let in_turns = matches!(spec.kind, PluginKind::Selector | PluginKind::Limiter);
        let floor_before = (!in_turns).then(|| floor_ns(budget));
        let first_row = rows.len();
        let mut floor_in_turns = None;
        let loaded = host.load(spec)?;
        let builtin = match &spec.component {
            ComponentSource::Builtin(name) => Some(name.as_str()),
            ComponentSource::File(_) => None,
        };
        let config = native::config(axle::plugin::config::flatten(&spec.config));
        let mut row = |function: &str, param: String, wasm_ns: f64, native_ns: Option<f64>| {
            rows.push(Row {
                name: spec.name.clone(),
                kind: spec.kind.to_string(),
                function: function.to_string(),
                param,
                wasm_ns,
                native_ns,
                floor_ns: 0.0,
            })
        };
        match &loaded.plugin {
            Plugin::Selector(p) => {
                // The floor and the three sizes are timed in turns, one loop each per
                // round, and the best of each kept: their ratios (the targets) then
                // compare readings taken under the same conditions, where timing them one
                // after the other let a busy spell of the machine move a ratio by half.
                let (one_loop, rounds) = turns(budget);
                let mut wasm_ns = [f64::INFINITY; ENDPOINT_COUNTS.len()];
                let mut near = f64::INFINITY;
                for _ in 0..rounds {
                    near = near.min(floor_ns(one_loop));
                    for (best, n) in wasm_ns.iter_mut().zip(ENDPOINT_COUNTS) {
                        p.endpoints_changed(&sample_table(u64::from(n), n));
                        p.define_set(0, (0..n).collect());
                        // The call itself, every time, run-selector or not.
                        let ns = ns_per_call(one_loop, |i| {
                            black_box(p.ask(0, i));
                        });
                        *best = best.min(ns);
                    }
                }
                floor_in_turns = Some(near);
                for (wasm, n) in wasm_ns.into_iter().zip(ENDPOINT_COUNTS) {
                    let table = sample_table(u64::from(n), n);
                    let native = builtin
                        .and_then(|b| native::selector(b, &config))
                        .map(|mut s| {
                            s.endpoints_changed(table.clone());
                            s.define_set(0, (0..n).collect());
                            ns_per_call(budget, |i| {
                                black_box(s.select(0, i));
                            })
                        });
                    row("select", n.to_string(), wasm, native);
                }
                if p.runs() || p.pairs() {
                    // What a pick pays through runs at 10 endpoints: a call per run of
                    // four picks (or two pairs), the others taken from the set's run.
                    let n = ENDPOINT_COUNTS[0];
                    p.endpoints_changed(&sample_table(u64::from(n), n));
                    p.define_set(0, (0..n).collect());
                    let (_, ns) = timed_in_turns(budget, &mut floor_ns, |i| {
                        black_box(p.select(0, i));
                    });
                    row("select", "run".into(), ns, None);
                }
            }
            Plugin::Router(p) => {
                let request = p.reads().narrow(&route_request());
                for n in ENDPOINT_COUNTS {
                    let table = sample_table(u64::from(n), n);
                    let candidates: Vec<u32> = (0..n).collect();
                    p.endpoints_changed(&table);
                    let wasm = ns_per_call(budget, |_| {
                        black_box(p.route(&candidates, &request));
                    });
                    let native = builtin
                        .and_then(|b| native::router(b, &config))
                        .map(|mut r| {
                            r.endpoints_changed(table.clone());
                            let req = request.clone();
                            ns_per_call(budget, |_| {
                                black_box(r.route(&candidates, &req));
                            })
                        });
                    row("route", n.to_string(), wasm, native);
                }
            }
            Plugin::Serializer(p) => {
                // `bytes_floor` holds one reading per sample, in `samples`' order.
                for (at, sample) in samples.iter().enumerate() {
                    let value = &sample.value;
                    let Ok(bytes) = p.encode(value) else {
                        continue;
                    };
                    let mut twin = builtin.and_then(|b| native::serializer(b, &config));
                    let v = sdk_value(value);
                    // The component and its twin in turns, one loop each per round, and
                    // the best of each kept: their ratio is the target, and timed one
                    // after the other a busy spell of the machine between the two moved
                    // it by half (`timed_in_turns`). The byte floor at this size runs in
                    // the same rounds: what any call carrying these bytes pays.
                    let (one_loop, rounds) = turns(budget);
                    let [mut enc, mut dec, mut nenc, mut ndec] = [f64::INFINITY; 4];
                    for _ in 0..rounds {
                        let floor_here = &mut bytes_floor[at].ns;
                        *floor_here = floor_here.min(bytes_floor_ns(one_loop, sample.floor_bytes));
                        enc = enc.min(ns_per_call(one_loop, |_| {
                            let _ = black_box(p.encode(value));
                        }));
                        dec = dec.min(ns_per_call(one_loop, |_| {
                            let _ = black_box(p.decode(&bytes));
                        }));
                        if let Some(s) = twin.as_mut() {
                            nenc = nenc.min(ns_per_call(one_loop, |_| {
                                let _ = black_box(s.encode(&v));
                            }));
                            ndec = ndec.min(ns_per_call(one_loop, |_| {
                                let _ = black_box(s.decode(&bytes));
                            }));
                        }
                    }
                    let native = |ns: f64| twin.is_some().then_some(ns);
                    row("encode", sample.label.to_string(), enc, native(nenc));
                    row("decode", sample.label.to_string(), dec, native(ndec));
                }
            }
            Plugin::HealthScorer(p) => {
                let stats = window_stats();
                let previous = Verdict {
                    state: HealthState::Healthy,
                    weight_permille: 1000,
                };
                let wasm = ns_per_call(budget, |_| {
                    black_box(p.score(&stats, previous));
                });
                let native =
                    builtin
                        .and_then(|b| native::health_scorer(b, &config))
                        .map(|mut s| {
                            let st = axle_sdk::WindowStats {
                                total: stats.total,
                                timeouts: stats.timeouts,
                                failures: stats.failures,
                                rejected: stats.rejected,
                                ewma_latency_ns: stats.ewma_latency_ns,
                                window_ms: stats.window_ms,
                                ..Default::default()
                            };
                            ns_per_call(budget, |_| {
                                black_box(native::score(&mut s, &st));
                            })
                        });
                row("score", "-".into(), wasm, native);
            }
            Plugin::Limiter(p) => {
                let key = p.key_id(&LimitKey {
                    service: "bench".into(),
                    method: "call".into(),
                    consumer_app: String::new(),
                    consumer_ip: "127.0.0.1".into(),
                });
                if p.wants_release() {
                    // A concurrency limiter hears every admission's end: timed as the
                    // request path calls it, acquire and release alternating (per call).
                    let (near, wasm) = timed_in_turns(budget, &mut floor_ns, |i| {
                        if i % 2 == 0 {
                            black_box(p.acquire(key, 1));
                        } else {
                            p.release(key, 1, 1_000_000, false);
                        }
                    });
                    floor_in_turns = Some(near);
                    let native = builtin
                        .and_then(|b| native::limiter(b, &config))
                        .map(|mut l| {
                            ns_per_call(budget, |i| {
                                if i % 2 == 0 {
                                    black_box(l.acquire(0, 1, axle_sdk::host::now_ns()));
                                } else {
                                    l.release(0, 1, 1_000_000, false);
                                }
                            })
                        });
                    row("acquire+release", "-".into(), wasm, native);
                } else {
                    // The call itself, every time, lease or not.
                    let (near, wasm) = timed_in_turns(budget, &mut floor_ns, |_| {
                        black_box(p.ask_at(key, 1, axle::core::now_ns()));
                    });
                    floor_in_turns = Some(near);
                    let native = builtin
                        .and_then(|b| native::limiter(b, &config))
                        .map(|mut l| {
                            ns_per_call(budget, |_| {
                                black_box(l.acquire(0, 1, axle_sdk::host::now_ns()));
                            })
                        });
                    row("acquire", "-".into(), wasm, native);
                    if p.leases() {
                        // What a request pays through the kernel's leases, at a steady
                        // 200,000 requests a second on the plugin's clock (a loop runs
                        // far faster, and would drain any bucket to where it leases
                        // nothing): one call per lease, the rest a count on the thread.
                        let mut at_ns = axle::core::now_ns();
                        let (_, leased) = timed_in_turns(budget, &mut floor_ns, |_| {
                            at_ns += 5_000;
                            black_box(p.acquire_at(key, 1, at_ns));
                        });
                        row("acquire", "leased".into(), leased, None);
                    }
                }
            }
            Plugin::Interceptor(p) => {
                intercept::rows(
                    p,
                    builtin,
                    &config,
                    budget,
                    &mut |f, param, wasm, native| row(f, param, wasm, native),
                );
            }
        }
        let floor_beside = floor_in_turns
            .or(floor_before.map(|before| before.min(floor_ns(budget))))
            .unwrap_or(first_floor_ns);
        for row in &mut rows[first_row..] {
            row.floor_ns = floor_beside;
        }
    }
    Ok(Report {
        floor_ns: first_floor_ns,
        bytes_floor,
        plugins: rows,
    })
}
