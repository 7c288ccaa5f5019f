use super::*;
use axle_sdk::{testing, ConfigValue, LimiterRuntime};

const MS: u64 = 1_000_000;

fn runtime(pairs: Vec<(&str, ConfigValue)>) -> LimiterRuntime<SlidingWindow> {
    testing::reset();
    testing::set_now_ns(1_000 * MS);
    LimiterRuntime::new(&Config::from_pairs(pairs)).unwrap()
}

fn key(service: &str, app: &str) -> LimitKey {
    LimitKey {
        service: service.into(),
        method: "get".into(),
        consumer_app: app.into(),
        consumer_ip: "127.0.0.1".into(),
    }
}

fn admitted(rt: &mut LimiterRuntime<SlidingWindow>, key: u32, tries: usize) -> usize {
    (0..tries)
        .filter(|_| rt.acquire(key, 1) == Admission::Admit)
        .count()
}

#[test]
fn admits_the_rate_per_window_and_no_burst_beyond_it() {
    let mut rt = runtime(vec![
        ("rate", ConfigValue::Int(10)),
        ("window-ms", ConfigValue::Int(1000)),
    ]);
    rt.key_defined(0, key("echo", ""));
    assert_eq!(admitted(&mut rt, 0, 50), 10, "10 per second over 1 s");
    // Half a window on, the current window is still full.
    testing::advance_ns(500 * MS);
    assert_eq!(admitted(&mut rt, 0, 50), 0);
    // 1.5 s: the previous window's 10 count for half: 5 free.
    testing::advance_ns(1000 * MS);
    assert_eq!(admitted(&mut rt, 0, 50), 5);
    // Quiet for two windows: nothing carried, the whole rate again.
    testing::advance_ns(2000 * MS);
    assert_eq!(admitted(&mut rt, 0, 50), 10);
}

#[test]
fn retry_after_is_when_the_window_has_room_again() {
    let mut rt = runtime(vec![("rate", ConfigValue::Int(10))]);
    rt.key_defined(0, key("echo", ""));
    assert_eq!(admitted(&mut rt, 0, 10), 10);
    // Full at the window's start: the next window, then a tenth of it fades the
    // previous count from 10 to 9.
    assert_eq!(
        rt.acquire(0, 1),
        Admission::Reject {
            retry_after_ms: 1100
        }
    );
    testing::advance_ns(1100 * MS);
    assert_eq!(rt.acquire(0, 1), Admission::Admit, "room when it said so");
    assert!(matches!(rt.acquire(0, 1), Admission::Reject { .. }));
    // Mid-window with the previous window's share in the way: 10 × 0.9 + 1 = 10, so the
    // next request waits for a further tenth (100 ms).
    assert_eq!(
        rt.acquire(0, 1),
        Admission::Reject {
            retry_after_ms: 100
        }
    );
}

#[test]
fn quotas_give_each_consumer_app_its_rate_and_services_their_own() {
    let mut rt = runtime(vec![
        ("rate", ConfigValue::Int(100)),
        (
            "quotas",
            ConfigValue::Texts(vec!["billing=20".into(), "*=5".into()]),
        ),
        ("service.kv.rate", ConfigValue::Int(3)),
    ]);
    rt.key_defined(0, key("echo", "billing"));
    rt.key_defined(1, key("echo", "reports"));
    rt.key_defined(2, key("echo", ""));
    assert_eq!(admitted(&mut rt, 0, 100), 20, "billing's quota");
    assert_eq!(admitted(&mut rt, 1, 100), 5, "any other app: `*`");
    assert_eq!(admitted(&mut rt, 2, 100), 5, "no name is an app not listed");

    let mut plain = runtime(vec![
        ("rate", ConfigValue::Int(7)),
        ("quotas", ConfigValue::Texts(vec!["billing=20".into()])),
        ("service.kv.rate", ConfigValue::Int(3)),
    ]);
    plain.key_defined(0, key("echo", "reports"));
    plain.key_defined(1, key("kv", ""));
    assert_eq!(admitted(&mut plain, 0, 100), 7, "no `*`: the rate");
    assert_eq!(admitted(&mut plain, 1, 100), 3, "the service's rate");
}

#[test]
fn hands_its_counts_to_its_next_version() {
    let config = Config::from_pairs([("rate", ConfigValue::Int(4))]);
    let mut old = runtime(vec![("rate", ConfigValue::Int(4))]);
    old.key_defined(0, key("echo", ""));
    assert_eq!(admitted(&mut old, 0, 10), 4);
    let state = old.export_state();
    let mut new = LimiterRuntime::<SlidingWindow>::new(&config).unwrap();
    new.import_state(&state);
    new.key_defined(5, key("echo", ""));
    assert!(
        matches!(new.acquire(5, 1), Admission::Reject { .. }),
        "still spent"
    );
    let mut fresh = LimiterRuntime::<SlidingWindow>::new(&config).unwrap();
    fresh.import_state(&[9, 9, 9]);
    fresh.key_defined(0, key("echo", ""));
    assert_eq!(admitted(&mut fresh, 0, 10), 4, "garbage: a fresh start");
}

#[test]
fn rejects_config_that_cannot_work_naming_the_key() {
    let err = |pairs: Vec<(&str, ConfigValue)>| {
        LimiterRuntime::<SlidingWindow>::new(&Config::from_pairs(pairs))
            .err()
            .unwrap()
    };
    assert!(err(vec![("rate", ConfigValue::Int(0))]).contains("`rate`"));
    let e = err(vec![
        ("rate", ConfigValue::Float(0.5)),
        ("window-ms", ConfigValue::Int(1000)),
    ]);
    assert!(e.contains("less than one request per window"), "{e}");
    assert!(err(vec![("window-ms", ConfigValue::Int(0))]).contains("window-ms"));
    for bad in ["billing", "=5", "billing=0", "billing=x"] {
        let e = err(vec![("quotas", ConfigValue::Texts(vec![bad.into()]))]);
        assert!(e.contains("quotas") && e.contains(bad), "{bad}: {e}");
    }
    let twice = err(vec![(
        "quotas",
        ConfigValue::Texts(vec!["a=1".into(), "a=2".into()]),
    )]);
    assert!(twice.contains("twice"), "{twice}");
    assert!(err(vec![("burst", ConfigValue::Int(3))]).contains("unknown key `burst`"));
}
