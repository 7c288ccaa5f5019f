//! A plugin's manifest config (`[plugins.<name>.config]`), flattened to dotted keys, with
//! typed getters whose errors name the key — the kernel prefixes the plugin's name and the
//! manifest file, so a user sees `plugins.tb.config: key `rate`: expected ...`.

pub use axle_spi::ConfigValue;

/// A plugin's config: dotted key → value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    /// The entries, in manifest order.
    pub entries: Vec<(String, ConfigValue)>,
}

impl Config {
    /// Builds a config from `(key, value)` pairs (handy in tests).
    pub fn from_pairs<K: Into<String>>(pairs: impl IntoIterator<Item = (K, ConfigValue)>) -> Self {
        Config {
            entries: pairs.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        }
    }

    /// The raw value of `key`.
    pub fn get(&self, key: &str) -> Option<&ConfigValue> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Every key, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// A non-negative integer, or `default` when absent.
    pub fn u64_or(&self, key: &str, default: u64) -> Result<u64, String> {
        match self.get(key) {
            None => Ok(default),
            Some(ConfigValue::Int(i)) if *i >= 0 => Ok(*i as u64),
            Some(other) => Err(format!(
                "key `{key}`: expected a non-negative integer, got {}",
                describe(other)
            )),
        }
    }

    /// A number (integer or float), or `default` when absent.
    pub fn f64_or(&self, key: &str, default: f64) -> Result<f64, String> {
        match self.get(key) {
            None => Ok(default),
            Some(ConfigValue::Int(i)) => Ok(*i as f64),
            Some(ConfigValue::Float(f)) if f.is_finite() => Ok(*f),
            Some(other) => Err(format!(
                "key `{key}`: expected a number, got {}",
                describe(other)
            )),
        }
    }

    /// A boolean, or `default` when absent.
    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.get(key) {
            None => Ok(default),
            Some(ConfigValue::Flag(b)) => Ok(*b),
            Some(other) => Err(format!(
                "key `{key}`: expected true or false, got {}",
                describe(other)
            )),
        }
    }

    /// A string, or `default` when absent.
    pub fn text_or(&self, key: &str, default: &str) -> Result<String, String> {
        match self.get(key) {
            None => Ok(default.to_string()),
            Some(ConfigValue::Text(s)) => Ok(s.clone()),
            Some(other) => Err(format!(
                "key `{key}`: expected a string, got {}",
                describe(other)
            )),
        }
    }

    /// A list of strings (a TOML array, or a single string), or empty when absent.
    pub fn texts(&self, key: &str) -> Result<Vec<String>, String> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(ConfigValue::Texts(v)) => Ok(v.clone()),
            Some(ConfigValue::Text(s)) => Ok(vec![s.clone()]),
            Some(other) => Err(format!(
                "key `{key}`: expected an array of strings, got {}",
                describe(other)
            )),
        }
    }

    /// Fails on the first key that matches none of `known`. A pattern segment `*` matches
    /// any one segment (`service.*.rate` matches `service.echo.rate`).
    pub fn reject_unknown(&self, known: &[&str]) -> Result<(), String> {
        for key in self.keys() {
            if !known.iter().any(|pattern| matches_pattern(pattern, key)) {
                return Err(format!(
                    "unknown key `{key}` (known keys: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            }
        }
        Ok(())
    }
}

fn describe(v: &ConfigValue) -> String {
    match v {
        ConfigValue::Flag(b) => format!("{} `{b}`", v.kind()),
        ConfigValue::Int(i) => format!("{} `{i}`", v.kind()),
        ConfigValue::Float(f) => format!("{} `{f}`", v.kind()),
        ConfigValue::Text(s) => format!("{} `{s}`", v.kind()),
        ConfigValue::Texts(_) => v.kind().to_string(),
    }
}

fn matches_pattern(pattern: &str, key: &str) -> bool {
    let mut p = pattern.split('.');
    let mut k = key.split('.');
    loop {
        match (p.next(), k.next()) {
            (None, None) => return true,
            (Some(ps), Some(ks)) if ps == "*" || ps == ks => {}
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getters_name_the_key_and_the_type() {
        let c = Config::from_pairs([("rate", ConfigValue::Text("fast".into()))]);
        let err = c.u64_or("rate", 1).unwrap_err();
        assert!(
            err.contains("`rate`") && err.contains("a string `fast`"),
            "{err}"
        );
        assert_eq!(c.u64_or("burst", 7), Ok(7));
    }

    #[test]
    fn unknown_keys_are_rejected_with_patterns() {
        let c = Config::from_pairs([
            ("rate", ConfigValue::Int(1)),
            ("service.echo.rate", ConfigValue::Int(2)),
        ]);
        assert!(c.reject_unknown(&["rate", "service.*.rate"]).is_ok());
        let err = c.reject_unknown(&["rate"]).unwrap_err();
        assert!(err.contains("service.echo.rate"), "{err}");
    }
}
