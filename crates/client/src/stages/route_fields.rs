//! The request fields routers declared (`user.tier`), as text, for the route stage.
//!
//! A typed call has its value before encoding, so a field is a walk over its node list
//! (no decoding, no plugin call). A call whose payload is already bytes is decoded with
//! the serializer of its content type — only when some router of the service declared a
//! field, and then on every such call: one serializer call, as costly as decoding the
//! answer. Raw payloads (`raw`) have no fields.

use axle_core::payload;
use axle_plugin_host::kinds::serializer::{Node, Value};

use crate::state::ClientState;
use crate::Call;

/// The declared `paths` present in the call's request, in declaration order (none
/// declared: nothing read).
pub fn of(state: &ClientState, call: &Call<'_>, paths: &[String]) -> Vec<(String, String)> {
    if paths.is_empty() {
        return Vec::new();
    }
    match call.value {
        Some(value) => extract(value, paths),
        None if call.content_type == payload::RAW => Vec::new(),
        None => {
            let loadout = state.loadout.load();
            match loadout
                .serializers
                .get(call.content_type)
                .map(|s| s.decode(call.body))
            {
                Some(Ok(value)) => extract(&value, paths),
                // Undecodable: the provider will say so; the route sees no fields.
                _ => Vec::new(),
            }
        }
    }
}

/// The scalar values at `paths` in `value`; a path that is missing or leads to null,
/// bytes, an array or a map is left out.
pub fn extract(value: &Value, paths: &[String]) -> Vec<(String, String)> {
    paths
        .iter()
        .filter_map(|path| {
            let at = find(&value.nodes, path)?;
            Some((path.clone(), text(&value.nodes[at])?))
        })
        .collect()
}

/// A scalar as routing text: strings as they are, numbers and booleans as written.
fn text(node: &Node) -> Option<String> {
    match node {
        Node::Text(s) => Some(s.clone()),
        Node::Signed(i) => Some(i.to_string()),
        Node::Unsigned(u) => Some(u.to_string()),
        Node::Float(f) => Some(f.to_string()),
        Node::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The index of the node at dotted `path`: map keys by text, array items by index.
fn find(nodes: &[Node], path: &str) -> Option<usize> {
    let mut at = 0;
    for part in path.split('.') {
        at = match nodes.get(at)? {
            Node::Mapping(n) => {
                let mut pos = at + 1;
                let mut found = None;
                for _ in 0..*n {
                    let is_key = matches!(nodes.get(pos)?, Node::Text(k) if k == part);
                    let value = skip(nodes, pos)?;
                    if is_key {
                        found = Some(value);
                        break;
                    }
                    pos = skip(nodes, value)?;
                }
                found?
            }
            Node::Array(n) => {
                let index: u32 = part.parse().ok()?;
                if index >= *n {
                    return None;
                }
                let mut pos = at + 1;
                for _ in 0..index {
                    pos = skip(nodes, pos)?;
                }
                pos
            }
            _ => return None,
        };
    }
    Some(at)
}

/// The index just past the subtree starting at `pos` (`None` if the list ends early).
fn skip(nodes: &[Node], mut pos: usize) -> Option<usize> {
    let mut pending: u64 = 1;
    while pending > 0 {
        pending += match nodes.get(pos)? {
            Node::Array(n) => u64::from(*n),
            Node::Mapping(n) => 2 * u64::from(*n),
            _ => 0,
        };
        pending -= 1;
        pos += 1;
    }
    Some(pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// {"user": {"id": 7, "tier": "gold"}, "items": [{"sku": "a"}, {"sku": "b"}],
    ///  "amount": 1200.5, "ok": true, "none": null}
    fn value() -> Value {
        Value {
            nodes: vec![
                Node::Mapping(5),
                Node::Text("user".into()),
                Node::Mapping(2),
                Node::Text("id".into()),
                Node::Signed(7),
                Node::Text("tier".into()),
                Node::Text("gold".into()),
                Node::Text("items".into()),
                Node::Array(2),
                Node::Mapping(1),
                Node::Text("sku".into()),
                Node::Text("a".into()),
                Node::Mapping(1),
                Node::Text("sku".into()),
                Node::Text("b".into()),
                Node::Text("amount".into()),
                Node::Float(1200.5),
                Node::Text("ok".into()),
                Node::Boolean(true),
                Node::Text("none".into()),
                Node::Null,
            ],
        }
    }

    fn paths(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn scalars_are_found_by_dotted_path() {
        let got = extract(
            &value(),
            &paths(&["user.tier", "user.id", "items.1.sku", "amount", "ok"]),
        );
        let want: Vec<(String, String)> = [
            ("user.tier", "gold"),
            ("user.id", "7"),
            ("items.1.sku", "b"),
            ("amount", "1200.5"),
            ("ok", "true"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn missing_and_non_scalar_fields_are_absent() {
        let got = extract(
            &value(),
            &paths(&[
                "none",
                "user",
                "items",
                "items.2.sku",
                "user.tier.x",
                "nope",
            ]),
        );
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn a_truncated_list_finds_nothing_and_does_not_panic() {
        let mut v = value();
        v.nodes.truncate(9);
        assert!(extract(&v, &paths(&["items.1.sku", "amount"])).is_empty());
        assert_eq!(
            extract(&v, &paths(&["user.tier"])),
            vec![("user.tier".to_string(), "gold".to_string())]
        );
    }
}
