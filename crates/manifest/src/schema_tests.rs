use std::collections::BTreeSet;

use super::*;
use crate::Manifest;

/// One step into a probe manifest: a key, or the first element of an array.
#[derive(Clone)]
enum Step {
    Key(&'static str),
    Element,
}

/// Every closed table of the schema: where it is, and the keys the schema gives it.
fn tables(ty: &Ty, at: &[Step], out: &mut Vec<(Vec<Step>, BTreeSet<String>)>) {
    let mut inner = |ty: &Ty, step: Step| {
        let mut next = at.to_vec();
        next.push(step);
        tables(ty, &next, out);
    };
    match ty {
        Ty::Table(fields) => {
            for field in fields {
                inner(&field.ty, Step::Key(field.key));
            }
            out.push((
                at.to_vec(),
                fields.iter().map(|f| f.key.to_string()).collect(),
            ));
        }
        Ty::Map(item) => inner(item, Step::Key("probe")),
        Ty::Array(item) => inner(item, Step::Element),
        Ty::OneOf(options) => {
            let mut keys = BTreeSet::new();
            for option in options {
                if let Ty::Table(fields) = option {
                    for field in fields {
                        let mut next = at.to_vec();
                        next.push(Step::Key(field.key));
                        tables(&field.ty, &next, out);
                    }
                    keys.extend(fields.iter().map(|f| f.key.to_string()));
                }
            }
            if !keys.is_empty() {
                out.push((at.to_vec(), keys));
            }
        }
        _ => {}
    }
}

/// A manifest holding `zzzz = 1` at `at`, and nothing else.
fn probe(at: &[Step]) -> toml::Value {
    match at.split_first() {
        None => toml::Value::Table(toml::Table::from_iter([("zzzz".into(), 1.into())])),
        Some((Step::Key(k), rest)) => {
            toml::Value::Table(toml::Table::from_iter([(k.to_string(), probe(rest))]))
        }
        Some((Step::Element, rest)) => toml::Value::Array(vec![probe(rest)]),
    }
}

#[test]
fn the_schema_names_exactly_the_keys_the_manifest_reads() {
    let mut all = Vec::new();
    tables(&manifest(), &[], &mut all);
    assert!(all.len() > 20, "every table is probed");
    for (at, mut described) in all {
        let name: Vec<&str> = at
            .iter()
            .map(|s| match s {
                Step::Key(k) => *k,
                Step::Element => "[]",
            })
            .collect();
        let name = name.join(".");
        // Routes are read by the gateway's own parser, after the manifest's tables.
        if name.starts_with("gateway.routes") {
            continue;
        }
        let text = toml::to_string(&probe(&at)).unwrap();
        let e = Manifest::parse(&text, "probe.toml", std::path::Path::new("/")).unwrap_err();
        let allowed = e
            .reason
            .split_once("`zzzz`")
            .and_then(|(_, rest)| rest.split_once("(allowed: "))
            .and_then(|(_, rest)| rest.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{name}: not refused as unknown: {e}"));
        let read: BTreeSet<String> = allowed.split(", ").map(String::from).collect();
        if name.is_empty() {
            // Read by the layering, before the tables are.
            described.remove("extends");
        }
        if name == "discovery.etcd" {
            // Read only to refuse it with a message: a password is never written here.
            described.insert("password".into());
        }
        assert_eq!(
            read, described,
            "{name}: the schema and the manifest disagree"
        );
    }
}

#[test]
fn the_committed_schema_is_the_generated_one() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/manifest.schema.json"
    );
    // `AXLE_BLESS=1 cargo test -p axle-manifest` writes it anew.
    if std::env::var_os("AXLE_BLESS").is_some() {
        std::fs::write(path, json_schema()).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == json_schema(),
        "docs/manifest.schema.json is stale: run `axle config schema > docs/manifest.schema.json` \
         (or `AXLE_BLESS=1 cargo test -p axle-manifest`)"
    );
}
