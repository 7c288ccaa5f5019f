//! Layering, `extends`, and errors that point at a line.

use std::path::Path;

use crate::Manifest;

/// Writes `files` (name, text) into a fresh folder.
fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

#[test]
fn a_manifest_holds_only_what_differs_from_the_embedded_defaults() {
    let dir = folder(&[(
        "m.toml",
        "[services.echo]\nendpoints = [\"127.0.0.1:7400\"]\n",
    )]);
    let m = Manifest::load(&dir.path().join("m.toml")).unwrap();
    assert_eq!(m.endpoints["echo"][0].address, "127.0.0.1:7400", "replaced");
    let embedded = Manifest::embedded().unwrap();
    assert_eq!(m.slots_for("echo").selector, embedded.slots.selector);
    assert_eq!(m.slots.limiter.as_deref(), Some("token-bucket"));
    assert!(m.plugins.contains_key("p2c-ewma"));
    assert!(
        m.governance("echo", "x").idempotent,
        "embedded [services.echo.governance]"
    );
    assert_eq!(m.file, dir.path().join("m.toml").display().to_string());
}

#[test]
fn tables_merge_key_by_key_and_arrays_and_scalars_are_replaced() {
    let text = "[plugins.tag.config]\nextra = 1\n[slots]\nrouters = []\nlimiter = \"\"\n";
    let dir = folder(&[("m.toml", text)]);
    let layered = Manifest::layered(Some(&dir.path().join("m.toml"))).unwrap();
    let config = layered.table["plugins"]["tag"]["config"]
        .as_table()
        .unwrap();
    assert_eq!(config["extra"].as_integer(), Some(1));
    assert!(config.contains_key("keys"), "kept from the embedded layer");
    assert!(layered.written(&["plugins", "tag"]), "changed by the file");
    assert!(
        !layered.written(&["plugins", "json"]),
        "the embedded defaults alone"
    );
    let m = Manifest::from_layers(&layered).unwrap();
    assert_eq!(m.slots.routers, Some(vec![]));
    assert_eq!(m.slots.limiter, None, "an empty name empties the slot");
    let shown = layered.render();
    assert!(shown.contains("extra = 1  # from "), "{shown}");
    assert!(
        shown.contains("keys = [\"lane\"]  # from <embedded plugins.toml>"),
        "{shown}"
    );
    let back: toml::Table = shown.parse().unwrap();
    assert_eq!(back, layered.table, "show prints the effective table");
}

#[test]
fn extends_chains_lay_each_file_over_the_one_it_names() {
    let dir = folder(&[
        ("base.toml", "[governance]\ntimeout-ms = 300\nretries = 1\n[plugins.mine]\nkind = \"selector\"\ncomponent = \"sel.wasm\"\n"),
        ("team.toml", "extends = \"base.toml\"\n[governance]\nretries = 0\n"),
    ]);
    std::fs::create_dir(dir.path().join("app")).unwrap();
    std::fs::write(
        dir.path().join("app/m.toml"),
        "extends = \"../team.toml\"\n[governance]\ntimeout-ms = 700\n",
    )
    .unwrap();
    let layered = Manifest::layered(Some(&dir.path().join("app/m.toml"))).unwrap();
    assert_eq!(layered.layers.len(), 4, "embedded, base, team, m");
    let m = Manifest::from_layers(&layered).unwrap();
    let g = m.governance("echo", "x");
    assert_eq!((g.timeout_ms, g.retries), (700, 0));
    // A path in an extended file stays relative to that file.
    let crate::ComponentSource::File(component) = &m.plugins["mine"].component else {
        panic!("a file component");
    };
    assert!(
        component.ends_with("sel.wasm") && component.is_absolute(),
        "{component:?}"
    );
    assert_eq!(
        component.parent().unwrap().canonicalize().unwrap(),
        dir.path().canonicalize().unwrap()
    );
    let shown = layered.render();
    assert!(
        shown.contains("retries = 0  # from ") && shown.contains("team.toml"),
        "{shown}"
    );
}

#[test]
fn an_extends_cycle_is_refused_naming_the_files() {
    let dir = folder(&[
        ("a.toml", "extends = \"b.toml\"\n"),
        ("b.toml", "# b\nextends = \"a.toml\"\n"),
    ]);
    let e = Manifest::load(&dir.path().join("a.toml")).unwrap_err();
    assert_eq!(e.key, "extends");
    assert!(
        e.reason.contains("circle") && e.reason.contains("a.toml → "),
        "{e}"
    );
    assert!(e.to_string().contains("b.toml:2:1: extends: "), "{e}");
    let e = Manifest::load(&dir.path().join("c.toml")).unwrap_err();
    assert!(e.reason.contains("cannot read"), "{e}");
    let dir = folder(&[("a.toml", "extends = \"gone.toml\"\n")]);
    let e = Manifest::load(&dir.path().join("a.toml")).unwrap_err();
    assert!(
        e.to_string().contains("a.toml:1:1: extends: cannot read"),
        "{e}"
    );
}

#[test]
fn an_unknown_key_in_an_endpoint_is_named_with_its_line_and_the_near_miss() {
    let text =
        "[services.echo]\nendpoints = [\n  { address = \"127.0.0.1:7300\", wieght = 5 },\n]\n";
    let e = Manifest::parse(text, "m.toml", Path::new("/")).unwrap_err();
    assert_eq!(e.key, "services.echo.endpoints[0].wieght");
    assert_eq!(e.at, Some((3, 33)));
    assert!(
        e.reason
            .contains("unknown field `wieght`; did you mean `weight`?"),
        "{e}"
    );
    assert!(
        e.to_string()
            .starts_with("m.toml:3:33: services.echo.endpoints[0].wieght: "),
        "{e}"
    );
}

#[test]
fn unknown_keys_anywhere_are_refused_with_a_suggestion() {
    let cases = [
        (
            "[slots]\nselecter = \"random\"\n",
            "slots.selecter",
            (2, 1),
            "`selector`",
        ),
        (
            "[serve.flaky]\nfail-rat = 0.1\n",
            "serve.flaky.fail-rat",
            (2, 1),
            "`fail-rate`",
        ),
        (
            "[governance]\ntimeout = 5\n",
            "governance.timeout",
            (2, 1),
            "`timeout-ms`",
        ),
        (
            "[services.kv.methods.get]\nretrys = 1\n",
            "services.kv.methods.get.retrys",
            (2, 1),
            "`retries`",
        ),
        (
            "[discovery.etcd]\nca = \"x\"\n",
            "discovery.etcd.ca",
            (2, 1),
            "allowed: ",
        ),
        (
            "[plugins.x]\nkind = \"selecter\"\ncomponent = \"a.wasm\"\n",
            "plugins.x.kind",
            (2, 1),
            "`selector`",
        ),
        (
            "[slots]\nselector = \"round-robn\"\n",
            "slots.selector",
            (2, 1),
            "`round-robin`",
        ),
    ];
    for (text, key, at, hint) in cases {
        let dir = folder(&[("m.toml", text)]);
        let e = Manifest::load(&dir.path().join("m.toml")).unwrap_err();
        assert_eq!((e.key.as_str(), e.at), (key, Some(at)), "{e}");
        assert!(e.reason.contains(hint), "{e}");
        assert!(e.file.ends_with("m.toml"), "{e}");
    }
}

#[test]
fn a_syntax_error_points_at_its_line_and_column() {
    let e = Manifest::parse("[slots]\nselector = \n", "m.toml", Path::new("/")).unwrap_err();
    assert_eq!(e.at.map(|(line, _)| line), Some(2), "{e}");
    assert!(e.reason.starts_with("not valid TOML"), "{e}");
}

#[test]
fn check_finds_every_missing_file_and_passes_a_complete_manifest() {
    let text = "[tls]\ncert-file = \"c.pem\"\nkey-file = \"k.pem\"\n[plugins.x]\nkind = \"selector\"\ncomponent = \"x.wasm\"\n";
    let dir = folder(&[("m.toml", text), ("c.pem", "")]);
    let errors = Manifest::check(Some(&dir.path().join("m.toml"))).unwrap_err();
    let keys: Vec<_> = errors.iter().map(|e| (e.key.as_str(), e.at)).collect();
    assert_eq!(
        keys,
        [
            ("plugins.x.component", Some((6, 1))),
            ("tls.key-file", Some((3, 1)))
        ]
    );
    std::fs::write(dir.path().join("k.pem"), "").unwrap();
    std::fs::write(dir.path().join("x.wasm"), "").unwrap();
    assert!(Manifest::check(Some(&dir.path().join("m.toml"))).is_ok());
    assert!(Manifest::check(None).is_ok(), "the embedded manifest");
}
