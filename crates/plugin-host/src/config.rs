//! Turns a `[plugins.<name>.config]` table into the `config` list a plugin's `init` gets:
//! nested tables become dotted keys, arrays become lists of text.

use axle_spi::ConfigValue;

/// Flattens `table` in key order.
pub fn flatten(table: &toml::Table) -> Vec<(String, ConfigValue)> {
    let mut out = Vec::new();
    walk("", table, &mut out);
    out
}

fn walk(prefix: &str, table: &toml::Table, out: &mut Vec<(String, ConfigValue)>) {
    for (key, value) in table {
        let key = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let value = match value {
            toml::Value::Table(t) => {
                walk(&key, t, out);
                continue;
            }
            toml::Value::Boolean(b) => ConfigValue::Flag(*b),
            toml::Value::Integer(i) => ConfigValue::Int(*i),
            toml::Value::Float(f) => ConfigValue::Float(*f),
            toml::Value::String(s) => ConfigValue::Text(s.clone()),
            toml::Value::Datetime(d) => ConfigValue::Text(d.to_string()),
            toml::Value::Array(items) => ConfigValue::Texts(items.iter().map(text).collect()),
        };
        out.push((key, value));
    }
}

fn text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_tables_become_dotted_keys() {
        let table: toml::Table = "rate = 5\nkeys = [\"lane\", 3]\n[service.kv]\nburst = 2.5"
            .parse()
            .unwrap();
        let flat = flatten(&table);
        let keys: Vec<_> = flat.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["keys", "rate", "service.kv.burst"]);
        assert!(matches!(&flat[0].1, ConfigValue::Texts(t) if t == &["lane", "3"]));
        assert!(matches!(flat[2].1, ConfigValue::Float(f) if f == 2.5));
    }
}
