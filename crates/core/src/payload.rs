//! Typed payloads ↔ the serializer plugins' value model (flattened pre-order nodes).
//!
//! Typed calls go `T` → serde → value nodes → serializer plugin → bytes, and back. The
//! content type `raw` skips all of it: bytes travel as they are and no plugin runs.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Number, Value as Json};

use axle_spi::{Node, Value};

/// The content type of payloads that are already bytes.
pub const RAW: &str = "raw";

/// A typed value as serializer nodes.
pub fn to_value<T: Serialize + ?Sized>(v: &T) -> Result<Value, String> {
    let json = serde_json::to_value(v).map_err(|e| e.to_string())?;
    let mut nodes = Vec::new();
    flatten(&json, &mut nodes);
    Ok(Value { nodes })
}

/// Serializer nodes as a typed value.
pub fn from_value<T: DeserializeOwned>(v: &Value) -> Result<T, String> {
    serde_json::from_value(to_json(v)?).map_err(|e| e.to_string())
}

/// Serializer nodes as JSON (what `axle call` prints).
pub fn to_json(v: &Value) -> Result<Json, String> {
    let mut pos = 0;
    let json = read(&v.nodes, &mut pos, 0)?;
    if pos != v.nodes.len() {
        return Err(format!(
            "{} trailing node(s) after the value",
            v.nodes.len() - pos
        ));
    }
    Ok(json)
}

fn flatten(json: &Json, out: &mut Vec<Node>) {
    match json {
        Json::Null => out.push(Node::Null),
        Json::Bool(b) => out.push(Node::Boolean(*b)),
        Json::Number(n) => out.push(match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Node::Signed(i),
            (None, Some(u), _) => Node::Unsigned(u),
            (_, _, f) => Node::Float(f.unwrap_or(f64::NAN)),
        }),
        Json::String(s) => out.push(Node::Text(s.clone())),
        Json::Array(items) => {
            out.push(Node::Array(items.len() as u32));
            for item in items {
                flatten(item, out);
            }
        }
        Json::Object(map) => {
            out.push(Node::Mapping(map.len() as u32));
            for (k, v) in map {
                out.push(Node::Text(k.clone()));
                flatten(v, out);
            }
        }
    }
}

const MAX_DEPTH: usize = 128;

fn read(nodes: &[Node], pos: &mut usize, depth: usize) -> Result<Json, String> {
    if depth > MAX_DEPTH {
        return Err(format!("value nests deeper than {MAX_DEPTH} levels"));
    }
    let node = nodes.get(*pos).ok_or("value ends early")?;
    *pos += 1;
    Ok(match node {
        Node::Null => Json::Null,
        Node::Boolean(b) => Json::Bool(*b),
        Node::Signed(i) => Json::Number((*i).into()),
        Node::Unsigned(u) => Json::Number((*u).into()),
        Node::Float(f) => Json::Number(Number::from_f64(*f).ok_or("a float that is not finite")?),
        Node::Text(s) => Json::String(s.clone()),
        Node::Binary(b) => Json::Array(b.iter().map(|x| Json::Number((*x).into())).collect()),
        Node::Array(n) => {
            let n = *n as usize;
            if n > nodes.len() - *pos {
                return Err("an array longer than the value".into());
            }
            Json::Array(
                (0..n)
                    .map(|_| read(nodes, pos, depth + 1))
                    .collect::<Result<_, _>>()?,
            )
        }
        Node::Mapping(n) => {
            let n = *n as usize;
            if n.saturating_mul(2) > nodes.len() - *pos {
                return Err("a mapping longer than the value".into());
            }
            let mut map = Map::with_capacity(n);
            for _ in 0..n {
                let key = match read(nodes, pos, depth + 1)? {
                    Json::String(s) => s,
                    other => other.to_string(),
                };
                map.insert(key, read(nodes, pos, depth + 1)?);
            }
            Json::Object(map)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Req {
        key: String,
        n: u64,
        tags: Vec<String>,
        inner: Option<Box<Req>>,
    }

    #[test]
    fn typed_values_round_trip() {
        let r = Req {
            key: "k".into(),
            n: u64::MAX,
            tags: vec!["a".into()],
            inner: Some(Box::new(Req {
                key: "i".into(),
                n: 1,
                tags: vec![],
                inner: None,
            })),
        };
        let v = to_value(&r).unwrap();
        assert_eq!(v.nodes[0], Node::Mapping(4));
        assert_eq!(from_value::<Req>(&v).unwrap(), r);
    }

    #[test]
    fn lying_node_lists_are_errors() {
        assert!(to_json(&Value {
            nodes: vec![Node::Array(5)]
        })
        .is_err());
        assert!(to_json(&Value {
            nodes: vec![Node::Null, Node::Null]
        })
        .is_err());
        assert!(to_json(&Value { nodes: vec![] }).is_err());
    }
}
