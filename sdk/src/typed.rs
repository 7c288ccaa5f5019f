//! A plugin's config read into a serde struct (crate feature `serde`): the dotted keys
//! are laid out as nested tables again, the struct is deserialised from them, and any key
//! the struct does not read is refused, as [`Config::reject_unknown`] does for the
//! getters. Errors name the key: `key `limits.rate`: invalid type: ...`.

use serde::de::value::{Error, MapDeserializer, SeqDeserializer};
use serde::de::{DeserializeOwned, Error as _, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;

use crate::{Config, ConfigValue};

impl Config {
    /// The config as `T`. Absent keys take `T`'s defaults (`#[serde(default)]`); a key
    /// `T` does not read is an error, whether or not `T` denies unknown fields.
    ///
    /// ```
    /// # use axle_sdk::{Config, ConfigValue};
    /// #[derive(serde::Deserialize)]
    /// struct Limits { rate: u32, #[serde(default)] burst: Option<u32> }
    ///
    /// let c = Config::from_pairs([("rate", ConfigValue::Int(100))]);
    /// let limits: Limits = c.parse().unwrap();
    /// assert_eq!((limits.rate, limits.burst), (100, None));
    /// let typo = Config::from_pairs([("rate", ConfigValue::Int(1)), ("brust", ConfigValue::Int(2))]);
    /// assert_eq!(typo.parse::<Limits>().err().unwrap(), "unknown key `brust`");
    /// ```
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, String> {
        let tree = Node::tree(&self.entries)?;
        let mut unknown = Vec::new();
        let mut note = |path: serde_ignored::Path| unknown.push(path.to_string());
        let ignoring = serde_ignored::Deserializer::new(NodeDe(&tree), &mut note);
        let parsed: Result<T, _> = serde_path_to_error::deserialize(ignoring);
        let value = parsed.map_err(|e| match e.path().to_string().as_str() {
            "." => e.into_inner().to_string(),
            key => format!("key `{key}`: {}", e.into_inner()),
        })?;
        match unknown.first() {
            Some(key) => Err(format!("unknown key `{key}`")),
            None => Ok(value),
        }
    }
}

/// The config as a tree: a dotted key's segments are nested tables.
enum Node<'a> {
    Leaf(&'a ConfigValue),
    Table(Vec<(&'a str, Node<'a>)>),
}

impl<'a> Node<'a> {
    fn tree(entries: &'a [(String, ConfigValue)]) -> Result<Node<'a>, String> {
        let mut root = Node::Table(Vec::new());
        for (key, value) in entries {
            root.insert(key, key.split('.'), value)?;
        }
        Ok(root)
    }

    fn insert(
        &mut self,
        key: &str,
        mut path: std::str::Split<'a, char>,
        value: &'a ConfigValue,
    ) -> Result<(), String> {
        let Node::Table(children) = self else {
            return Err(format!("key `{key}`: a value cannot also be a table"));
        };
        let segment = path.next().unwrap_or_default();
        let rest_is_empty = path.clone().next().is_none();
        let at = children.iter().position(|(name, _)| *name == segment);
        match (at, rest_is_empty) {
            (None, true) => children.push((segment, Node::Leaf(value))),
            (Some(_), true) => return Err(format!("key `{key}` is given twice")),
            (None, false) => {
                children.push((segment, Node::Table(Vec::new())));
                let last = children.len() - 1;
                children[last].1.insert(key, path, value)?;
            }
            (Some(i), false) => children[i].1.insert(key, path, value)?,
        }
        Ok(())
    }
}

/// A node as a serde deserializer.
#[derive(Clone, Copy)]
struct NodeDe<'a>(&'a Node<'a>);

impl<'de> IntoDeserializer<'de, Error> for NodeDe<'_> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> serde::Deserializer<'de> for NodeDe<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Node::Leaf(ConfigValue::Flag(b)) => visitor.visit_bool(*b),
            Node::Leaf(ConfigValue::Int(i)) => visitor.visit_i64(*i),
            Node::Leaf(ConfigValue::Float(f)) => visitor.visit_f64(*f),
            Node::Leaf(ConfigValue::Text(s)) => visitor.visit_str(s),
            Node::Leaf(ConfigValue::Texts(v)) => {
                visitor.visit_seq(SeqDeserializer::new(v.iter().map(String::as_str)))
            }
            Node::Table(children) => visitor.visit_map(MapDeserializer::new(
                children.iter().map(|(k, v)| (*k, NodeDe(v))),
            )),
        }
    }

    /// A present key is `Some`; an absent one never gets here (serde's default).
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    /// Unit variants by name: `mode = "strict"`.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Node::Leaf(ConfigValue::Text(s)) => visitor.visit_enum(s.as_str().into_deserializer()),
            _ => Err(Error::custom("expected a variant name as a string")),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(rename_all = "kebab-case")]
    enum Mode {
        Strict,
        Lenient,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(rename_all = "kebab-case")]
    struct Settings {
        rate: u32,
        #[serde(default)]
        ratio: f64,
        mode: Mode,
        tags: Vec<String>,
        #[serde(default)]
        per_service: std::collections::BTreeMap<String, Limit>,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Limit {
        rate: u32,
    }

    fn config(pairs: &[(&str, ConfigValue)]) -> Config {
        Config::from_pairs(pairs.iter().cloned())
    }

    #[test]
    fn dotted_keys_fill_nested_structs_maps_enums_and_lists() {
        let c = config(&[
            ("rate", ConfigValue::Int(100)),
            ("ratio", ConfigValue::Int(1)),
            ("mode", ConfigValue::Text("lenient".into())),
            ("tags", ConfigValue::Texts(vec!["a".into(), "b".into()])),
            ("per-service.echo.rate", ConfigValue::Int(5)),
        ]);
        let s: Settings = c.parse().unwrap();
        assert_eq!(s.rate, 100);
        assert_eq!(s.ratio, 1.0, "an integer where a float is read");
        assert_eq!(s.mode, Mode::Lenient);
        assert_eq!(s.tags, ["a", "b"]);
        assert_eq!(s.per_service["echo"], Limit { rate: 5 });
    }

    #[test]
    fn unknown_keys_and_wrong_types_name_the_key() {
        let base = [
            ("rate", ConfigValue::Int(1)),
            ("mode", ConfigValue::Text("strict".into())),
            ("tags", ConfigValue::Texts(vec![])),
        ];
        let mut typo = base.to_vec();
        typo.push(("per-service.echo.rte", ConfigValue::Int(5)));
        typo.push(("per-service.echo.rate", ConfigValue::Int(5)));
        assert_eq!(
            config(&typo).parse::<Settings>().unwrap_err(),
            "unknown key `per-service.echo.rte`"
        );
        let mut negative = base.to_vec();
        negative[0] = ("rate", ConfigValue::Int(-1));
        let err = config(&negative).parse::<Settings>().unwrap_err();
        assert!(err.starts_with("key `rate`: invalid value"), "{err}");
        let mut bad_mode = base.to_vec();
        bad_mode[1] = ("mode", ConfigValue::Text("loose".into()));
        let err = config(&bad_mode).parse::<Settings>().unwrap_err();
        assert!(err.contains("`mode`") && err.contains("loose"), "{err}");
        let err = config(&base[1..]).parse::<Settings>().unwrap_err();
        assert!(err.contains("missing field `rate`"), "{err}");
    }

    #[test]
    fn a_key_cannot_be_both_a_value_and_a_table() {
        let c = config(&[
            ("rate", ConfigValue::Int(1)),
            ("rate.max", ConfigValue::Int(2)),
        ]);
        let err = c.parse::<Limit>().unwrap_err();
        assert!(err.contains("`rate.max`"), "{err}");
    }
}
