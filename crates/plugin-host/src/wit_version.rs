//! Which version of the plugin interface a component was built against. A component
//! built against another `axle:spi` version names that version in its imports (and in
//! any interface it exports); the linker would refuse it anyway, but with a message about
//! a missing import. This says what happened and what to do instead.

use wasmtime::component::Component;
use wasmtime::Engine;

/// The package version this kernel speaks (`package axle:spi@…` in `sdk/wit/kinds.wit`).
pub const SPI_VERSION: &str = "0.3.0";

/// `Err` naming the other version when `component` imports or exports an `axle:spi`
/// interface of a version other than [`SPI_VERSION`].
pub fn check(engine: &Engine, component: &Component) -> Result<(), String> {
    let ty = component.component_type();
    let imports = ty.imports(engine).map(|(name, _)| name);
    let exports = ty.exports(engine).map(|(name, _)| name);
    let other = imports
        .chain(exports)
        .find_map(|name| other_version(name).map(str::to_string));
    match other {
        Some(version) => Err(mismatch(&version)),
        None => Ok(()),
    }
}

/// The version of an `axle:spi/<interface>@<version>` name, when it is not ours.
fn other_version(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("axle:spi/")?;
    let (_, version) = rest.split_once('@')?;
    (version != SPI_VERSION).then_some(version)
}

fn mismatch(version: &str) -> String {
    format!(
        "built against axle:spi@{version}; this axle speaks axle:spi@{SPI_VERSION}: rebuild \
         against the current SDK"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_constant_is_the_version_of_the_shipped_wit() {
        let wit = include_str!("../../../sdk/wit/kinds.wit");
        assert!(
            wit.contains(&format!("package axle:spi@{SPI_VERSION};")),
            "sdk/wit/kinds.wit declares another version than SPI_VERSION"
        );
    }

    /// A component that imports an empty instance under `name`.
    fn importing(name: &str) -> Vec<u8> {
        use wasm_encoder::{ComponentImportSection, ComponentTypeRef, ComponentTypeSection};
        let mut types = ComponentTypeSection::new();
        types.instance(&wasm_encoder::InstanceType::new());
        let mut imports = ComponentImportSection::new();
        imports.import(name, ComponentTypeRef::Instance(0));
        let mut component = wasm_encoder::Component::new();
        component.section(&types).section(&imports);
        component.finish()
    }

    #[test]
    fn a_component_of_another_version_is_named_with_what_to_do() {
        let engine = Engine::new(&wasmtime::Config::new()).expect("engine");
        let old = Component::from_binary(&engine, &importing("axle:spi/host@0.1.0"))
            .expect("a valid component");
        assert_eq!(check(&engine, &old).unwrap_err(), mismatch("0.1.0"));
        let current = Component::from_binary(&engine, &importing("axle:spi/host@0.3.0"))
            .expect("a valid component");
        assert!(check(&engine, &current).is_ok());
    }

    #[test]
    fn only_other_versions_of_our_package_are_named() {
        assert_eq!(other_version("axle:spi/host@0.1.0"), Some("0.1.0"));
        assert_eq!(other_version("axle:spi/types@0.3.0"), None);
        assert_eq!(other_version("wasi:io/streams@0.2.0"), None);
        assert_eq!(other_version("axle:spi/host"), None);
        assert_eq!(
            mismatch("0.1.0"),
            "built against axle:spi@0.1.0; this axle speaks axle:spi@0.3.0: rebuild against \
             the current SDK"
        );
    }
}
