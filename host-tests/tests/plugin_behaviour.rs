//! Each shipped plugin's behaviour, through the real host and the real components (the
//! same bytes the `axle` binary embeds), asserted with numbers.

use axle::plugin::kinds::health_scorer::{HealthState, Verdict, WindowStats};
use axle::plugin::kinds::serializer::SerializerPlugin;
use axle::plugin::{LoadedPlugin, Plugin};
use axle::spi::RouteRequest;
use axle::spi::{Admission, LimitKey};
use axle::spi::{Node, Value};
use axle_host_tests::{assert_round_robin, manifest, selector, table, TestHost};

#[test]
fn round_robin_visits_candidates_in_order() {
    let t = TestHost::new();
    let p = t
        .load(&manifest("rr", "selector", "builtin:round-robin", ""), "rr")
        .unwrap();
    assert_round_robin(&p);
}

#[test]
fn weighted_random_follows_weights_within_three_percent() {
    let t = TestHost::new();
    let p = t
        .load(
            &manifest(
                "wr",
                "selector",
                "builtin:weighted-random",
                "[plugins.wr.config]\nseed = 42",
            ),
            "wr",
        )
        .unwrap();
    let s = selector(&p);
    let weights = [100u32, 200, 300, 400];
    s.endpoints_changed(&table(&weights));
    s.define_set(0, vec![0, 1, 2, 3]);
    let mut counts = [0u32; 4];
    let n = 100_000;
    for i in 0..n {
        let sel = s.select(0, i).unwrap();
        assert!(sel.by_plugin);
        counts[sel.endpoint as usize] += 1;
    }
    for (i, w) in weights.iter().enumerate() {
        let expected = f64::from(*w) / 1000.0;
        let got = f64::from(counts[i]) / n as f64;
        assert!(
            (got - expected).abs() <= 0.03 * expected,
            "endpoint {i}: share {got:.4}, weight share {expected:.4} ({counts:?})"
        );
    }
}

#[test]
fn least_active_duels_on_load_per_weight() {
    let t = TestHost::new();
    let p = t
        .load(
            &manifest("la", "selector", "builtin:least-active", ""),
            "la",
        )
        .unwrap();
    let facts = t.host.facts();
    for id in 0..3 {
        facts.register(id, 100);
    }
    // Endpoints 0 and 2 are busy; 1 is idle.
    for _ in 0..4 {
        facts.get(0).unwrap().started();
    }
    facts.get(2).unwrap().started();
    let s = selector(&p);
    s.endpoints_changed(&table(&[100; 3]));
    s.define_set(0, vec![0, 1, 2]);
    let mut counts = [0u32; 3];
    for i in 0..3_000 {
        counts[s.select(0, i).unwrap().endpoint as usize] += 1;
    }
    // Power of two choices over uniform pairs: the busiest loses both of its pairs, the
    // idle one wins both of its own (two pairs of three), 2 wins only against 0.
    assert_eq!(counts[0], 0, "{counts:?}");
    assert!((1_850..2_150).contains(&counts[1]), "{counts:?}");
    // Once 1 is the busiest, it loses every duel.
    for _ in 0..5 {
        facts.get(1).unwrap().started();
    }
    assert!((0..1_000).all(|i| s.select(0, i).unwrap().endpoint != 1));
    // In flight is read per unit of effective weight (the kernel's, as the table gives it):
    // 5 on weight 600 beats 4 on weight 100.
    facts.get(1).unwrap().set_weight(600);
    s.endpoints_changed(&table(&[100, 600]));
    s.define_set(0, vec![0, 1]);
    assert!((0..1_000).all(|i| s.select(0, i).unwrap().endpoint == 1));
}

#[test]
fn p2c_ewma_avoids_the_slow_endpoint() {
    let t = TestHost::new();
    let p = t
        .load(&manifest("p2c", "selector", "builtin:p2c-ewma", ""), "p2c")
        .unwrap();
    let facts = t.host.facts();
    for id in 0..3 {
        let cell = facts.register(id, 100);
        cell.started();
        cell.finished(
            if id == 0 { 80_000_000 } else { 1_000_000 },
            axle::spi::OutcomeClass::Success,
        );
    }
    let s = selector(&p);
    s.endpoints_changed(&table(&[100; 3]));
    s.define_set(0, vec![0, 1, 2]);
    let slow = (0..3000)
        .filter(|i| s.select(0, *i).unwrap().endpoint == 0)
        .count();
    assert_eq!(slow, 0, "endpoint 0 loses every duel it is drawn into");
}

#[test]
fn token_bucket_admits_its_burst_then_its_rate() {
    let t = TestHost::new();
    // 0.5 tokens per second: the burst is all a test run can see, and the retry-after
    // of a rejection is the time to the next token (2 s).
    let extra = "[plugins.tb.config]\nrate = 0.5\nburst = 5\n[plugins.tb.config.service.kv]\nrate = 1000\nburst = 1";
    let p = t
        .load(
            &manifest("tb", "limiter", "builtin:token-bucket", extra),
            "tb",
        )
        .unwrap();
    let Plugin::Limiter(l) = &p.plugin else {
        panic!("not a limiter")
    };
    let key = |service: &str, ip: &str| LimitKey {
        service: service.into(),
        method: "get".into(),
        consumer_app: String::new(),
        consumer_ip: ip.into(),
    };
    let a = l.key_id(&key("echo", "127.0.0.1"));
    let b = l.key_id(&key("echo", "127.0.0.2"));
    assert_ne!(a, b);
    assert_eq!(a, l.key_id(&key("echo", "127.0.0.1")), "keys are interned");
    let admitted = (0..50)
        .filter(|_| l.acquire(a, 1).admission == Admission::Admit)
        .count();
    assert_eq!(admitted, 5, "the burst, then nothing at 0.5/s");
    match l.acquire(a, 1).admission {
        Admission::Reject { retry_after_ms: ms } => {
            assert!((1_000..=2_000).contains(&ms), "retry after {ms} ms")
        }
        Admission::Admit => panic!("admitted beyond the burst"),
    }
    let other = (0..50)
        .filter(|_| l.acquire(b, 1).admission == Admission::Admit)
        .count();
    assert_eq!(other, 5, "every key has its own bucket");
    // The per-service override: burst 1 at 1000/s, so a pause of 20 ms refills it.
    let kv = l.key_id(&key("kv", "127.0.0.1"));
    assert_eq!(
        (0..10)
            .filter(|_| l.acquire(kv, 1).admission == Admission::Admit)
            .count(),
        1
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        (0..10)
            .filter(|_| l.acquire(kv, 1).admission == Admission::Admit)
            .count(),
        1
    );
    assert_eq!(p.stats.snapshot().faults(), 0);
}

fn stats(total: u32, failures: u32, previous: HealthState) -> WindowStats {
    WindowStats {
        endpoint: 0,
        window_ms: 10_000,
        total,
        timeouts: 0,
        failures,
        rejected: 0,
        consecutive_failures: failures,
        heartbeat_failures: 0,
        ewma_latency_ns: 1_000_000,
        previous,
    }
}

#[test]
fn availability_ignores_a_window_below_the_minimum_samples() {
    let t = TestHost::new();
    let p = t
        .load(
            &manifest(
                "av",
                "health-scorer",
                "builtin:availability",
                "[plugins.av.config]\nmin-samples = 10",
            ),
            "av",
        )
        .unwrap();
    let Plugin::HealthScorer(h) = &p.plugin else {
        panic!("not a scorer")
    };
    let previous = Verdict {
        state: HealthState::Healthy,
        weight_permille: 1000,
    };
    // 2 of 3 failed, below 10 samples: no change.
    let v = h.score(&stats(3, 2, HealthState::Healthy), previous);
    assert!(v.by_plugin);
    assert_eq!(v.verdict.state, HealthState::Healthy);
    // 40 of 100 failed: subhealthy, weight 600‰.
    let v = h
        .score(&stats(100, 40, HealthState::Healthy), previous)
        .verdict;
    assert_eq!((v.state, v.weight_permille), (HealthState::Subhealthy, 600));
    // 95 of 100 failed: dead.
    assert_eq!(
        h.score(&stats(100, 95, HealthState::Healthy), previous)
            .verdict
            .state,
        HealthState::Dead
    );
}

#[test]
fn tag_router_keeps_requests_in_their_lane() {
    let t = TestHost::new();
    let p = t
        .load(&manifest("tag", "router", "builtin:tag", ""), "tag")
        .unwrap();
    let Plugin::Router(r) = &p.plugin else {
        panic!("not a router")
    };
    let mut endpoints = table(&[100; 4]).endpoints().to_vec();
    endpoints[0].tags = vec![("lane".into(), "canary".into())];
    endpoints[2].tags = vec![("lane".into(), "canary".into())];
    r.endpoints_changed(&axle::spi::EndpointTable::new(1, endpoints));
    let request = |lane: Option<&str>| RouteRequest {
        service: "echo".into(),
        method: "say".into(),
        tags: lane
            .map(|l| vec![("lane".to_string(), l.to_string())])
            .unwrap_or_default(),
        ..RouteRequest::default()
    };
    assert_eq!(
        r.route(&[0, 1, 2, 3], &request(Some("canary"))).endpoints,
        [0, 2]
    );
    assert_eq!(r.route(&[1, 2, 3], &request(Some("canary"))).endpoints, [2]);
    assert_eq!(
        r.route(&[0, 1, 2, 3], &request(Some("blue"))).endpoints,
        [1, 3],
        "falls back to untagged"
    );
    assert_eq!(
        r.route(&[0, 1, 2, 3], &request(None)).endpoints,
        [0, 1, 2, 3]
    );
}

fn nested() -> Value {
    // {"user": {"id": 7, "tags": ["a", "b"], "score": 2.5, "none": null}, "ok": true}
    Value {
        nodes: vec![
            Node::Mapping(2),
            Node::Text("user".into()),
            Node::Mapping(4),
            Node::Text("id".into()),
            Node::Signed(7),
            Node::Text("tags".into()),
            Node::Array(2),
            Node::Text("a".into()),
            Node::Text("b".into()),
            Node::Text("score".into()),
            Node::Float(2.5),
            Node::Text("none".into()),
            Node::Null,
            Node::Text("ok".into()),
            Node::Boolean(true),
        ],
    }
}

/// The shipped serializer `name`, loaded through the real host.
fn builtin_serializer(t: &TestHost, name: &str) -> LoadedPlugin {
    let manifest = manifest(name, "serializer", &format!("builtin:{name}"), "");
    t.load(&manifest, name).unwrap()
}

fn serializer(p: &LoadedPlugin) -> &SerializerPlugin {
    match &p.plugin {
        Plugin::Serializer(s) => s,
        _ => panic!("{} is not a serializer", p.name),
    }
}

#[test]
fn json_and_msgpack_round_trip_nested_values() {
    let t = TestHost::new();
    for (name, content_type) in [
        ("json", "application/json"),
        ("msgpack", "application/msgpack"),
    ] {
        let p = builtin_serializer(&t, name);
        let s = serializer(&p);
        assert_eq!(s.content_type(), content_type);
        let bytes = s.encode(&nested()).unwrap();
        assert_eq!(s.decode(&bytes).unwrap(), nested(), "{name}");
        if name == "json" {
            let text = String::from_utf8(bytes).unwrap();
            let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(parsed["user"]["tags"][1], "b");
        }
        // Garbage is a clean error, not a fault.
        let err = s.decode(&[0xc1, 0xff, 0x00]).unwrap_err();
        assert!(
            matches!(
                err,
                axle::plugin::kinds::serializer::SerializeError::Rejected(_)
            ),
            "{err}"
        );
        assert_eq!(p.stats.snapshot().faults(), 0);
    }
}

/// Texts of every length from 0 to past the in-line copy's longest (`axle_spi::copy`),
/// as keys and as values, each byte distinct from its neighbours: a copy that dropped,
/// repeated or shifted a byte at any length would not come back the same through the
/// component's encode and decode, nor parse to the same strings.
#[test]
fn texts_of_every_short_length_cross_the_serializers_intact() {
    let t = TestHost::new();
    let text = |n: usize| -> String { (0..n).map(|i| char::from(b'!' + (i % 90) as u8)).collect() };
    let lengths = 0..=axle::spi::copy::SHORT + 9;
    let mut nodes = vec![Node::Mapping(lengths.clone().count() as u32)];
    for n in lengths.clone() {
        nodes.push(Node::Text(format!("k{}", text(n))));
        nodes.push(Node::Text(text(n)));
    }
    let value = Value { nodes };
    for name in ["json", "msgpack"] {
        let p = builtin_serializer(&t, name);
        let s = serializer(&p);
        let bytes = s.encode(&value).unwrap();
        assert_eq!(s.decode(&bytes).unwrap(), value, "{name}");
        if name == "json" {
            let parsed: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            for n in lengths.clone() {
                assert_eq!(parsed[format!("k{}", text(n))], text(n), "length {n}");
            }
        }
    }
}

/// The components scan texts 16 bytes to a WebAssembly vector instruction
/// (`axle_spi::lanes`, built with `simd128`): a JSON escape and a non-ASCII character at
/// every offset of texts up to past two 32-byte steps, so each falls in every lane of both
/// halves of a step and in the tail scanned a word at a time. `json`'s text must be
/// serde_json's byte for byte, and both serializers must give the texts back.
#[test]
fn escapes_and_non_ascii_at_every_offset_match_serde_json() {
    let t = TestHost::new();
    let inserts = ["\"", "\\", "\n", "\u{1}", "\u{1f}", "\u{7f}", "é", "😀"];
    let mut texts = Vec::new();
    for len in 0..=70 {
        for insert in inserts {
            for at in 0..=len {
                let mut s: String = (0..len)
                    .map(|i| char::from(b'a' + (i % 26) as u8))
                    .collect();
                s.insert_str(at, insert);
                texts.push(s);
            }
        }
    }
    let mut nodes = vec![Node::Array(texts.len() as u32)];
    nodes.extend(texts.iter().cloned().map(Node::Text));
    let value = Value { nodes };
    for name in ["json", "msgpack"] {
        let p = builtin_serializer(&t, name);
        let s = serializer(&p);
        let bytes = s.encode(&value).unwrap();
        if name == "json" {
            assert_eq!(
                String::from_utf8(bytes.clone()).unwrap(),
                serde_json::to_string(&texts).unwrap()
            );
        }
        assert_eq!(s.decode(&bytes).unwrap(), value, "{name}");
    }
}

/// A packed answer is written into the buffer of the answer before last
/// (`axle_sdk::answer_buffer`), so each answer starts where a longer or a shorter one
/// was, and past the size the SDK keeps (1 MiB) the buffer is freed instead. Sizes going
/// up and down across both edges, through one instance in one order and another in the
/// reverse: a byte left over from an earlier answer, or a length taken from one, would
/// break a round trip or make the two instances' bytes differ.
#[test]
fn answers_written_into_an_earlier_answers_buffer_are_exact() {
    let t = TestHost::new();
    let text = |n: usize| -> String { (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect() };
    let sizes = [65_536, 3, 1_024, 0, 1_200_000, 17, 65_536, 2_000, 5];
    let value = |i: usize, n: usize| Value {
        nodes: vec![
            Node::Mapping(2),
            Node::Text("id".into()),
            Node::Text(i.to_string()),
            Node::Text("text".into()),
            Node::Text(text(n)),
        ],
    };
    for name in ["json", "msgpack"] {
        let (forward, backward) = (builtin_serializer(&t, name), builtin_serializer(&t, name));
        let (a, b) = (serializer(&forward), serializer(&backward));
        let mut bytes_a = Vec::new();
        for (i, n) in sizes.iter().enumerate() {
            let bytes = a.encode(&value(i, *n)).unwrap();
            assert_eq!(a.decode(&bytes).unwrap(), value(i, *n), "{name}, {n} bytes");
            bytes_a.push(bytes);
        }
        for (i, n) in sizes.iter().enumerate().rev() {
            let bytes = b.encode(&value(i, *n)).unwrap();
            assert_eq!(bytes, bytes_a[i], "{name}, {n} bytes");
            assert_eq!(b.decode(&bytes).unwrap(), value(i, *n), "{name}, {n} bytes");
        }
    }
}

#[test]
fn a_flood_of_consumer_names_grows_no_keys_past_the_bound_and_stays_limited() {
    let t = TestHost::new();
    let extra = "key-on = [\"consumer-app\"]\n[plugins.tb.config]\nrate = 0.5\nburst = 5";
    let p = t
        .load(
            &manifest("tb", "limiter", "builtin:token-bucket", extra),
            "tb",
        )
        .unwrap();
    let Plugin::Limiter(l) = &p.plugin else {
        panic!("not a limiter")
    };
    let max = axle::plugin::kinds::limiter::MAX_KEYS;
    let key = |app: &str| LimitKey {
        service: "echo".into(),
        method: "get".into(),
        consumer_app: app.into(),
        consumer_ip: "127.0.0.1".into(),
    };
    let first = l.key_id(&key("app-0"));
    for i in 1..max + 5_000 {
        l.key_id(&key(&format!("app-{i}")));
    }
    assert_eq!(
        l.key_count(),
        max + 1,
        "the bound, plus the method's overflow key"
    );
    assert_eq!(
        l.key_id(&key("app-0")),
        first,
        "known keys keep their own bucket"
    );
    // Every new name past the bound shares the overflow key: limited, not open.
    let late: Vec<u32> = (0..50)
        .map(|i| l.key_id(&key(&format!("late-{i}"))))
        .collect();
    assert!(late.iter().all(|id| *id == late[0]));
    let admitted = late
        .iter()
        .filter(|id| l.acquire(**id, 1).admission == Admission::Admit)
        .count();
    assert_eq!(
        admitted, 5,
        "the overflow key is one bucket: its burst, then rejections"
    );
}

#[test]
fn a_limiter_keys_on_the_consumer_ip_but_not_its_chosen_name_by_default() {
    let t = TestHost::new();
    let p = t
        .load(&manifest("tb", "limiter", "builtin:token-bucket", ""), "tb")
        .unwrap();
    let Plugin::Limiter(l) = &p.plugin else {
        panic!("not a limiter")
    };
    let key = |app: &str, ip: &str| LimitKey {
        service: "echo".into(),
        method: "get".into(),
        consumer_app: app.into(),
        consumer_ip: ip.into(),
    };
    assert_eq!(
        l.key_id(&key("a", "127.0.0.1")),
        l.key_id(&key("b", "127.0.0.1")),
        "a caller renaming itself gets no fresh bucket"
    );
    assert_ne!(
        l.key_id(&key("a", "127.0.0.1")),
        l.key_id(&key("a", "127.0.0.2"))
    );
}

#[test]
fn set_ids_past_65536_still_reach_the_plugin() {
    let t = TestHost::new();
    let p = t
        .load(&manifest("rr", "selector", "builtin:round-robin", ""), "rr")
        .unwrap();
    let s = selector(&p);
    s.endpoints_changed(&table(&[100; 3]));
    // A long-running kernel's set ids climb with every table; the plugin still answers.
    for id in [70_000u32, 1 << 20, u32::MAX - 1] {
        s.define_set(id, vec![0, 1, 2]);
        let picks: Vec<_> = (0..3).map(|_| s.select(id, 0).unwrap()).collect();
        assert!(picks.iter().all(|p| p.by_plugin), "set {id}: {picks:?}");
    }
    assert_eq!(p.stats.snapshot().faults(), 0);
}
