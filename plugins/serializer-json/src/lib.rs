//! `json`: `application/json`. Binary values become arrays of byte numbers (JSON has no
//! bytes); map keys must be text; non-finite floats are refused. Values cross packed and
//! are streamed both ways (`convert.rs`).

mod convert;

use axle_sdk::{Config, Serializer, Value};

/// The JSON serializer.
pub struct JsonSerializer;

impl Serializer for JsonSerializer {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&[])?;
        Ok(JsonSerializer)
    }

    fn content_type(&self) -> String {
        "application/json".to_string()
    }

    fn encode(&mut self, value: &Value) -> Result<Vec<u8>, String> {
        convert::encode(value)
    }

    fn decode(&mut self, bytes: &[u8]) -> Result<Value, String> {
        convert::decode(bytes)
    }

    fn encode_packed(&mut self, value: &[u8]) -> Result<Vec<u8>, String> {
        convert::encode_packed(value)
    }

    fn decode_packed(&mut self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        convert::decode_packed(bytes)
    }
}

axle_sdk::export_serializer!(JsonSerializer);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::Tree;

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
        let err = s.decode(b"[\"caf\xc3\", 1]").unwrap_err();
        assert_eq!(err, "invalid JSON: not UTF-8 at byte 5");
    }

    #[test]
    fn text_past_ascii_survives_both_ways() {
        let mut s = JsonSerializer::new(&Config::default()).unwrap();
        // Longer than one 32-byte step of the ASCII check, non-ASCII in the middle.
        let text = format!("{}é€😀 \"quoted\"{}", "a".repeat(40), "z".repeat(40));
        let value = Value::from_tree(&Tree::Array(vec![Tree::Text(text.clone())]));
        let bytes = s.encode(&value).unwrap();
        assert_eq!(
            s.decode(&bytes).unwrap().to_tree(),
            Ok(Tree::Array(vec![Tree::Text(text)]))
        );
    }

    #[test]
    fn members_keep_their_order_and_repeats() {
        let mut s = JsonSerializer::new(&Config::default()).unwrap();
        let value = s.decode(br#" {"b":1,"a":2,"b":3} "#).unwrap();
        let bytes = s.encode(&value).unwrap();
        assert_eq!(bytes, br#"{"b":1,"a":2,"b":3}"#);
        assert!(s.decode(br#"{"a":1} x"#).unwrap_err().contains("trailing"));
    }

    #[test]
    fn nesting_is_bounded_both_ways() {
        let mut s = JsonSerializer::new(&Config::default()).unwrap();
        let deep = format!("{}null{}", "[".repeat(200), "]".repeat(200));
        assert!(s.decode(deep.as_bytes()).is_err());
        let mut nodes = vec![axle_sdk::Node::Array(1); 200];
        nodes.push(axle_sdk::Node::Null);
        let err = s.encode(&Value { nodes }).unwrap_err();
        assert!(err.contains("nests deeper"), "{err}");
    }
}
