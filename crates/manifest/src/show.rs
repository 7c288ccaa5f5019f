//! `axle config show`: the effective manifest as TOML, each value followed by the file it
//! came from, so a reader of a layered manifest sees what runs and who decided it.

use std::fmt::Write;

use crate::Layered;

impl Layered {
    /// The merged table as TOML; every value ends in `# from FILE`. Reads back as the same
    /// table (the comments aside).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let names: Vec<String> = self.layers.iter().map(|l| l.file.clone()).collect();
        let _ = writeln!(out, "# layers, most general first: {}", names.join(" <- "));
        self.table_section(&mut out, &self.table, &mut Vec::new());
        out
    }

    /// The plain values of `table` under its header, then its subtables.
    fn table_section(&self, out: &mut String, table: &toml::Table, path: &mut Vec<String>) {
        let plain: Vec<_> = table.iter().filter(|(_, v)| !v.is_table()).collect();
        if !path.is_empty() && (!plain.is_empty() || table.is_empty()) {
            let header: Vec<String> = path.iter().map(|k| key(k)).collect();
            let _ = writeln!(out, "\n[{}]", header.join("."));
        }
        for (k, v) in plain {
            path.push(k.clone());
            let from = self
                .origins
                .get(path.as_slice())
                .and_then(|i| self.layers.get(*i))
                .map_or("?", |l| l.file.as_str());
            let _ = writeln!(out, "{} = {v}  # from {from}", key(k));
            path.pop();
        }
        for (k, v) in table {
            if let toml::Value::Table(t) = v {
                path.push(k.clone());
                self.table_section(out, t, path);
                path.pop();
            }
        }
    }
}

/// A key as TOML writes it: bare when it can be, quoted otherwise.
fn key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare {
        k.to_string()
    } else {
        toml::Value::String(k.to_string()).to_string()
    }
}
