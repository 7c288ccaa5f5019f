//! The plugin templates `axle plugins new` writes, embedded in the binary so the command
//! works wherever the binary is. Each one is a real, minimal strategy of its kind
//! (`crates/cli/templates/<lang>/<kind>/`): selector round-robin, router tag filter, health
//! scorer success rate, limiter fixed window, serializer a binary encoding of the value
//! model, interceptor an access check on the provider (deny list, required tag).
//! `{{name}}`, `{{crate}}`, `{{kind}}` and `{{sdk}}` are filled in when written.

/// The languages a template exists in.
pub const LANGS: [&str; 4] = ["rust", "c", "python", "js"];

/// The plugin kinds (the worlds of `sdk/wit/kinds.wit`).
pub const KINDS: [&str; 6] = [
    "serializer",
    "selector",
    "router",
    "health-scorer",
    "limiter",
    "interceptor",
];

/// One file of a template: its path inside the generated directory and its text.
pub struct TemplateFile {
    pub path: &'static str,
    pub text: &'static str,
}

macro_rules! per_kind {
    // The selector of C, Python and JS is the example plugin itself
    // (plugins/examples/<lang>/round-robin), so the template and the example CI tests are
    // one file.
    ($lang:literal, $file:literal, $kind:expr) => {
        per_kind!(
            $lang,
            $file,
            $kind,
            concat!("../../templates/", $lang, "/selector/", $file)
        )
    };
    ($lang:literal, $file:literal, $kind:expr, $selector:expr) => {
        match $kind {
            "serializer" => include_str!(concat!("../../templates/", $lang, "/serializer/", $file)),
            "selector" => include_str!($selector),
            "router" => include_str!(concat!("../../templates/", $lang, "/router/", $file)),
            "health-scorer" => {
                include_str!(concat!("../../templates/", $lang, "/health-scorer/", $file))
            }
            "limiter" => include_str!(concat!("../../templates/", $lang, "/limiter/", $file)),
            "interceptor" => {
                include_str!(concat!("../../templates/", $lang, "/interceptor/", $file))
            }
            _ => return None,
        }
    };
}

/// The source files of the `lang` template of `kind` (the build and manifest files are
/// written by `cli::new`, which knows the paths); `None` for an unknown language or kind.
pub fn sources(lang: &str, kind: &str) -> Option<Vec<TemplateFile>> {
    let files = match lang {
        "rust" => vec![
            TemplateFile {
                path: "Cargo.toml",
                text: include_str!("../../templates/rust/Cargo.toml"),
            },
            TemplateFile {
                path: "src/lib.rs",
                text: per_kind!("rust", "src/lib.rs", kind),
            },
        ],
        "c" => vec![TemplateFile {
            path: "plugin.c",
            text: per_kind!(
                "c",
                "plugin.c",
                kind,
                "../../../../plugins/examples/c/round-robin/round_robin.c"
            ),
        }],
        "python" => vec![TemplateFile {
            path: "app.py",
            text: per_kind!(
                "python",
                "app.py",
                kind,
                "../../../../plugins/examples/python/round-robin/app.py"
            ),
        }],
        "js" => vec![TemplateFile {
            path: "app.js",
            text: per_kind!(
                "js",
                "app.js",
                kind,
                "../../../../plugins/examples/js/round-robin/app.js"
            ),
        }],
        _ => return None,
    };
    Some(files)
}

/// What a kind's README says beyond the build and check commands (the same in every
/// language): for an interceptor, where each point runs and what it sees, why reading only
/// non-per-call parts matters, and what happens when it fails.
pub fn readme_notes(kind: &str) -> Option<&'static str> {
    match kind {
        "interceptor" => Some(include_str!("../../templates/notes/interceptor.md")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_has_every_kind() {
        for lang in LANGS {
            for kind in KINDS {
                let files = sources(lang, kind).expect("template");
                assert!(files.iter().all(|f| !f.text.is_empty()), "{lang}/{kind}");
            }
        }
        assert!(sources("go", "selector").is_none());
        assert!(sources("c", "balancer").is_none());
    }
}
