//! JSON text ↔ `Value`: binary values become arrays of byte numbers (JSON has no bytes);
//! map keys must be text; non-finite floats are refused. Kept apart from the plugin's
//! export so that a test fixture can speak the same JSON (`#[path]` include).

use axle_sdk::{Tree, Value};
use serde_json::{Map, Number, Value as Json};

/// Value → JSON bytes.
pub fn encode(value: &Value) -> Result<Vec<u8>, String> {
    let json = to_json(&value.to_tree()?)?;
    serde_json::to_vec(&json).map_err(|e| e.to_string())
}

/// JSON bytes → value.
pub fn decode(bytes: &[u8]) -> Result<Value, String> {
    let json: Json = serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON: {e}"))?;
    Ok(Value::from_tree(&from_json(json)))
}

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
