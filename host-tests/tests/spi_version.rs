//! A component built against another version of the plugin interface is refused at load
//! with a message that says so and what to do, whatever its kind: not the linker's
//! "imports something the kernel does not grant".

use axle_host_tests::{manifest, TestHost};

/// A component importing `axle:spi/types` and `axle:spi/host` of `version` (empty
/// instances: the version check comes before any type is compared).
fn built_against(version: &str) -> Vec<u8> {
    use wasm_encoder::{ComponentImportSection, ComponentTypeRef, ComponentTypeSection};
    let mut types = ComponentTypeSection::new();
    types.instance(&wasm_encoder::InstanceType::new());
    let mut imports = ComponentImportSection::new();
    imports.import(
        format!("axle:spi/types@{version}").as_str(),
        ComponentTypeRef::Instance(0),
    );
    imports.import(
        format!("axle:spi/host@{version}").as_str(),
        ComponentTypeRef::Instance(0),
    );
    let mut component = wasm_encoder::Component::new();
    component.section(&types).section(&imports);
    component.finish()
}

#[test]
fn a_component_built_against_an_older_axle_spi_is_refused_with_a_rebuild_message() {
    let t = TestHost::new();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old-router.wasm");
    // 0.1.0 routers had no `declare`; 0.2.0 selectors answered `option<endpoint-id>`.
    for old in ["0.1.0", "0.2.0"] {
        std::fs::write(&path, built_against(old)).expect("write the component");
        for kind in ["router", "selector", "limiter"] {
            let e = t
                .load(
                    &manifest("old", kind, path.to_str().expect("utf-8 path"), ""),
                    "old",
                )
                .err()
                .unwrap_or_else(|| panic!("a {old} {kind} loaded"));
            assert_eq!(
                e.reason,
                format!(
                    "built against axle:spi@{old}; this axle speaks axle:spi@0.3.0: rebuild \
                     against the current SDK"
                ),
                "{kind}"
            );
        }
    }
    // The current version gets past the check (and fails later, on the missing exports).
    std::fs::write(&path, built_against("0.3.0")).expect("write the component");
    let e = t
        .load(
            &manifest("new", "router", path.to_str().expect("utf-8 path"), ""),
            "new",
        )
        .err()
        .expect("an empty component is no router");
    assert!(!e.reason.contains("built against"), "{}", e.reason);
}
