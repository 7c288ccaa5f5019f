//! `axle bench plugins` rows of an interceptor: per declared point, what the kernel pays
//! per call with the memo answering (`memo`), what entering the component costs when it
//! cannot (`plugin`: call shapes past the memo's bound), and the native twin's cost of
//! the same answer.

use std::hint::black_box;

use axle::plugin::kinds::interceptor::{CallView, InterceptorPlugin, MEMO_MAX};
use axle_sdk::{call_at, Config};

use crate::{native, ns_per_call, Budget};

/// Distinct call shapes: the first [`MEMO_MAX`] fill the memo, the rest always miss it.
const SHAPES: usize = MEMO_MAX * 2;

/// Where rows go: `(function, param, wasm_ns, native_ns)`.
pub type RowSink<'a> = dyn FnMut(&str, String, f64, Option<f64>) + 'a;

/// Measures `p` and reports each row through `row(function, param, wasm_ns, native_ns)`.
pub fn rows(
    p: &InterceptorPlugin,
    builtin: Option<&str>,
    config: &Config,
    budget: Budget,
    row: &mut RowSink<'_>,
) {
    let apps: Vec<String> = (0..SHAPES).map(|i| format!("app-{i}")).collect();
    let tags: Vec<Vec<(String, String)>> = (0..SHAPES)
        .map(|i| vec![("x-lane".to_string(), format!("lane-{i}"))])
        .collect();
    for point in p.declaration().points {
        let view = |i: usize| CallView {
            tags: &tags[i],
            consumer_app: &apps[i],
            ..CallView::new(point, "bench", "call")
        };
        p.clear_memo();
        let memo = ns_per_call(budget, |_| {
            black_box(p.intercept(&view(0)));
        });
        for i in 0..MEMO_MAX {
            black_box(p.intercept(&view(i)));
        }
        let entered = ns_per_call(budget, |i| {
            black_box(p.intercept(&view(MEMO_MAX + (i as usize % MEMO_MAX))));
        });
        let twin = builtin
            .and_then(|b| native::interceptor(b, config))
            .map(|mut twin| {
                let mut call = call_at(point, "bench", "call");
                call.consumer_app = apps[0].clone();
                call.tags = tags[0].clone();
                ns_per_call(budget, |_| {
                    black_box(twin(&call));
                })
            });
        row("intercept", format!("{} memo", point.name()), memo, twin);
        row(
            "intercept",
            format!("{} plugin", point.name()),
            entered,
            twin,
        );
    }
    p.clear_memo();
}
