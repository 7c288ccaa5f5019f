//! `msgpack`: `application/msgpack`. Every value of the model maps one to one (binary and
//! non-text map keys included); extension types are refused on decode.

use axle_sdk::{Config, Serializer, Tree, Value, MAX_DEPTH};
use rmpv::Value as Mp;

/// The MessagePack serializer.
pub struct MsgpackSerializer;

fn to_mp(tree: &Tree) -> Mp {
    match tree {
        Tree::Null => Mp::Nil,
        Tree::Boolean(b) => Mp::Boolean(*b),
        Tree::Signed(i) => Mp::from(*i),
        Tree::Unsigned(u) => Mp::from(*u),
        Tree::Float(f) => Mp::F64(*f),
        Tree::Text(s) => Mp::from(s.as_str()),
        Tree::Binary(b) => Mp::Binary(b.clone()),
        Tree::Array(items) => Mp::Array(items.iter().map(to_mp).collect()),
        Tree::Mapping(entries) => {
            Mp::Map(entries.iter().map(|(k, v)| (to_mp(k), to_mp(v))).collect())
        }
    }
}

fn from_mp(mp: Mp) -> Result<Tree, String> {
    Ok(match mp {
        Mp::Nil => Tree::Null,
        Mp::Boolean(b) => Tree::Boolean(b),
        Mp::Integer(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Tree::Signed(i),
            (None, Some(u)) => Tree::Unsigned(u),
            _ => return Err("integer out of range".to_string()),
        },
        Mp::F32(f) => Tree::Float(f64::from(f)),
        Mp::F64(f) => Tree::Float(f),
        Mp::String(s) => match s.into_str() {
            Some(s) => Tree::Text(s),
            None => return Err("string is not valid UTF-8".to_string()),
        },
        Mp::Binary(b) => Tree::Binary(b),
        Mp::Array(items) => Tree::Array(items.into_iter().map(from_mp).collect::<Result<_, _>>()?),
        Mp::Map(entries) => Tree::Mapping(
            entries
                .into_iter()
                .map(|(k, v)| Ok((from_mp(k)?, from_mp(v)?)))
                .collect::<Result<_, String>>()?,
        ),
        Mp::Ext(tag, _) => return Err(format!("extension type {tag} is not supported")),
    })
}

impl Serializer for MsgpackSerializer {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&[])?;
        Ok(MsgpackSerializer)
    }

    fn content_type(&self) -> String {
        "application/msgpack".to_string()
    }

    fn encode(&mut self, value: &Value) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, &to_mp(&value.to_tree()?))
            .map_err(|e| e.to_string())?;
        Ok(out)
    }

    fn decode(&mut self, bytes: &[u8]) -> Result<Value, String> {
        let mut input = bytes;
        let mp = rmpv::decode::read_value_with_max_depth(&mut input, MAX_DEPTH)
            .map_err(|e| format!("invalid MessagePack: {e}"))?;
        if !input.is_empty() {
            return Err(format!(
                "invalid MessagePack: {} trailing byte(s)",
                input.len()
            ));
        }
        Ok(Value::from_tree(&from_mp(mp)?))
    }
}

axle_sdk::export_serializer!(MsgpackSerializer);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_nested_values() {
        let mut s = MsgpackSerializer::new(&Config::default()).unwrap();
        let tree = Tree::Mapping(vec![
            (
                Tree::Text("a".into()),
                Tree::Array(vec![Tree::Signed(-1), Tree::Float(2.5), Tree::Null]),
            ),
            (Tree::Signed(7), Tree::Binary(vec![0, 255])),
            (Tree::Text("u".into()), Tree::Unsigned(u64::MAX)),
            (
                Tree::Text("m".into()),
                Tree::Mapping(vec![(Tree::Boolean(true), Tree::Text("yes".into()))]),
            ),
        ]);
        let value = Value::from_tree(&tree);
        let bytes = s.encode(&value).unwrap();
        assert_eq!(s.decode(&bytes).unwrap().to_tree().unwrap(), tree);
    }

    #[test]
    fn rejects_garbage() {
        let mut s = MsgpackSerializer::new(&Config::default()).unwrap();
        assert!(
            s.decode(&[0xa5, b'a']).is_err(),
            "a 5-byte string cut after 1"
        );
        assert!(s.decode(&[]).is_err(), "empty input");
        assert!(s.decode(&[0x01, 0x02]).unwrap_err().contains("trailing"));
        assert!(
            s.decode(&[0xdd, 0xff, 0xff, 0xff, 0xff]).is_err(),
            "array longer than input"
        );
    }
}
