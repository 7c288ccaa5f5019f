//! The zone split with numbers: healthy, degraded, empty zones, and config errors.

use super::*;
use axle_sdk::{ConfigValue, Endpoint, SelectorRuntime};

/// A table of one endpoint per `(zone, effective weight)`, ids 0.. in order.
fn zoned(endpoints: &[(&str, u32)]) -> EndpointTable {
    EndpointTable::new(
        1,
        endpoints
            .iter()
            .zip(0..)
            .map(|((zone, weight), id)| Endpoint {
                id,
                address: format!("127.0.0.1:{}", 7000 + id),
                weight: *weight,
                tags: vec![("zone".to_string(), zone.to_string())],
            })
            .collect(),
    )
}

fn config(pairs: &[(&str, ConfigValue)]) -> Config {
    Config::from_pairs(pairs.iter().map(|(k, v)| (*k, v.clone())))
}

fn runtime(table: EndpointTable) -> SelectorRuntime<ZoneAware> {
    let c = config(&[
        ("zone", ConfigValue::Text("a".into())),
        ("seed", ConfigValue::Int(7)),
    ]);
    let mut rt = SelectorRuntime::<ZoneAware>::new(&c).unwrap();
    let members: Vec<u32> = (0..table.endpoints().len() as u32).collect();
    rt.endpoints_changed(table);
    rt.define_set(0, members);
    rt
}

fn counts(rt: &mut SelectorRuntime<ZoneAware>, n: usize, picks: usize) -> Vec<usize> {
    let mut counts = vec![0; n];
    for _ in 0..picks {
        counts[rt.select(0, 0).unwrap() as usize] += 1;
    }
    counts
}

#[test]
fn a_healthy_zone_keeps_every_pick_smoothly_weighted() {
    let mut rt = runtime(zoned(&[("b", 100), ("a", 100), ("a", 300), ("b", 100)]));
    assert_eq!(counts(&mut rt, 4, 10_000), vec![0, 2_500, 7_500, 0]);
    // At 80% health (above min-healthy 0.7) the zone still keeps everything.
    let mut rt = runtime(zoned(&[("a", 80), ("a", 80), ("b", 100)]));
    assert_eq!(counts(&mut rt, 3, 10_000), vec![5_000, 5_000, 0]);
}

#[test]
fn a_zone_at_half_health_spills_its_shortfall() {
    // Health 0.5, min-healthy 0.7: 1 - 0.5/0.7 = 28.6% of the picks leave the zone.
    let mut rt = runtime(zoned(&[("a", 50), ("a", 50), ("b", 100), ("c", 100)]));
    let c = counts(&mut rt, 4, 10_000);
    let remote = c[2] + c[3];
    assert!((2_700..=3_020).contains(&remote), "{c:?}");
    // The remote picks are themselves smooth: the two remote members share them evenly.
    assert!(c[2].abs_diff(c[3]) <= 1, "{c:?}");
    assert!(c[0].abs_diff(c[1]) <= 1, "{c:?}");
    // The same zone recovered (the kernel republishes the table, redefines the set).
    rt.endpoints_changed(zoned(&[("a", 100), ("a", 100), ("b", 100), ("c", 100)]));
    rt.define_set(0, vec![0, 1, 2, 3]);
    assert_eq!(counts(&mut rt, 4, 1_000), vec![500, 500, 0, 0]);
}

#[test]
fn no_usable_local_member_sends_everything_away_and_no_remote_keeps_it() {
    let mut rt = runtime(zoned(&[("b", 100), ("c", 300)]));
    assert_eq!(counts(&mut rt, 2, 4_000), vec![1_000, 3_000]);
    let mut rt = runtime(zoned(&[("a", 0), ("b", 100)]));
    assert_eq!(counts(&mut rt, 2, 1_000), vec![0, 1_000]);
    // Only the own zone, however sick: it is all there is.
    let mut rt = runtime(zoned(&[("a", 10), ("a", 30)]));
    assert_eq!(counts(&mut rt, 2, 400), vec![100, 300]);
    // An empty set has nothing to pick.
    let mut rt = runtime(zoned(&[]));
    assert_eq!(rt.select(0, 0), None);
}

#[test]
fn the_tag_key_and_full_weight_are_configurable() {
    let table = EndpointTable::new(
        1,
        vec![
            Endpoint {
                id: 0,
                address: "127.0.0.1:7000".into(),
                weight: 200,
                tags: vec![("dc".into(), "east".into())],
            },
            Endpoint {
                id: 1,
                address: "127.0.0.1:7001".into(),
                weight: 200,
                tags: vec![("dc".into(), "west".into())],
            },
        ],
    );
    let c = config(&[
        ("zone", ConfigValue::Text("east".into())),
        ("key", ConfigValue::Text("dc".into())),
        ("full-weight", ConfigValue::Int(400)),
        ("min-healthy", ConfigValue::Float(1.0)),
        ("seed", ConfigValue::Int(3)),
    ]);
    let mut rt = SelectorRuntime::<ZoneAware>::new(&c).unwrap();
    rt.endpoints_changed(table);
    rt.define_set(0, vec![0, 1]);
    // Health 200/400 = 0.5 against min-healthy 1: half the picks stay.
    let c = counts(&mut rt, 2, 10_000);
    assert!((4_850..=5_150).contains(&c[0]), "{c:?}");
}

#[test]
fn config_errors_name_the_key() {
    let err = |pairs: &[(&str, ConfigValue)]| {
        SelectorRuntime::<ZoneAware>::new(&config(pairs))
            .err()
            .unwrap()
    };
    let zone = ("zone", ConfigValue::Text("a".into()));
    assert!(err(&[]).contains("key `zone`: required"));
    assert!(err(&[("zone", ConfigValue::Int(1))]).contains("key `zone`"));
    assert!(err(&[("zone", ConfigValue::Text(String::new()))]).contains("key `zone`"));
    for bad in [0.0, -0.5, 1.5] {
        let e = err(&[zone.clone(), ("min-healthy", ConfigValue::Float(bad))]);
        assert!(e.contains("key `min-healthy`"), "{e}");
    }
    let e = err(&[zone.clone(), ("full-weight", ConfigValue::Int(0))]);
    assert!(e.contains("key `full-weight`"), "{e}");
    let e = err(&[zone.clone(), ("key", ConfigValue::Text(String::new()))]);
    assert!(e.contains("key `key`"), "{e}");
    let e = err(&[zone, ("zones", ConfigValue::Text("b".into()))]);
    assert!(e.contains("unknown key `zones`"), "{e}");
}
