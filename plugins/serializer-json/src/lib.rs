//! `json`: `application/json`. Binary values become arrays of byte numbers (JSON has no
//! bytes); map keys must be text; non-finite floats are refused.

use axle_sdk::{Config, Serializer, Tree, Value};
use serde_json::{Map, Number, Value as Json};

/// The JSON serializer.
pub struct JsonSerializer;

fn to_json(tree: &Tree) -> Result<Json, String> {
    Ok(match tree {
        Tree::Null => Json::Null,
        Tree::Boolean(b) => Json::Bool(*b),
        Tree::Signed(i) => Json::Number((*i).into()),
        Tree::Unsigned(u) => Json::Number((*u).into()),
        Tree::Float(f) => Json::Number(
            Number::from_f64(*f).ok_or_else(|| format!("JSON cannot hold the float {f}"))?,
        ),
        Tree::Text(s) => Json::String(s.clone()),
        Tree::Binary(b) => Json::Array(b.iter().map(|x| Json::Number((*x).into())).collect()),
        Tree::Array(items) => Json::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Tree::Mapping(entries) => {
            let mut map = Map::with_capacity(entries.len());
            for (k, v) in entries {
                let Tree::Text(k) = k else {
                    return Err(format!("JSON object keys must be text, got {k:?}"));
                };
                map.insert(k.clone(), to_json(v)?);
            }
            Json::Object(map)
        }
    })
}

fn from_json(json: Json) -> Tree {
    match json {
        Json::Null => Tree::Null,
        Json::Bool(b) => Tree::Boolean(b),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Tree::Signed(i),
            (None, Some(u), _) => Tree::Unsigned(u),
            (_, _, f) => Tree::Float(f.unwrap_or(f64::NAN)),
        },
        Json::String(s) => Tree::Text(s),
        Json::Array(items) => Tree::Array(items.into_iter().map(from_json).collect()),
        Json::Object(map) => Tree::Mapping(
            map.into_iter()
                .map(|(k, v)| (Tree::Text(k), from_json(v)))
                .collect(),
        ),
    }
}

impl Serializer for JsonSerializer {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&[])?;
        Ok(JsonSerializer)
    }

    fn content_type(&self) -> String {
        "application/json".to_string()
    }

    fn encode(&mut self, value: &Value) -> Result<Vec<u8>, String> {
        let json = to_json(&value.to_tree()?)?;
        serde_json::to_vec(&json).map_err(|e| e.to_string())
    }

    fn decode(&mut self, bytes: &[u8]) -> Result<Value, String> {
        let json: Json = serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON: {e}"))?;
        Ok(Value::from_tree(&from_json(json)))
    }
}

axle_sdk::export_serializer!(JsonSerializer);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_nested_values() {
        let mut s = JsonSerializer::new(&Config::default()).unwrap();
        let text =
            br#"{"a":[1,-2,3.5,"x",null,true],"b":{"c":{"d":[]}},"big":18446744073709551615}"#;
        let value = s.decode(text).unwrap();
        let bytes = s.encode(&value).unwrap();
        let again = s.decode(&bytes).unwrap();
        assert_eq!(value, again);
        let tree = value.to_tree().unwrap();
        let Tree::Mapping(entries) = tree else {
            panic!("not a map")
        };
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[2].1, Tree::Unsigned(u64::MAX));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let mut s = JsonSerializer::new(&Config::default()).unwrap();
        assert!(s
            .decode(b"{\"a\":")
            .unwrap_err()
            .starts_with("invalid JSON"));
        let non_text_key = Value::from_tree(&Tree::Mapping(vec![(Tree::Signed(1), Tree::Null)]));
        assert!(s
            .encode(&non_text_key)
            .unwrap_err()
            .contains("keys must be text"));
        let nan = Value::from_tree(&Tree::Float(f64::NAN));
        assert!(s.encode(&nan).is_err());
    }
}
