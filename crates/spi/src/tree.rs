//! A recursive view of a serializer [`Value`], for formats that want a tree.
//!
//! WIT has no recursive types, so values cross the boundary as pre-order node lists; this
//! converts both ways with explicit bounds, because a node list can come from untrusted
//! bytes: counts are checked against what is left and nesting is limited.

use crate::{Node, Value};

/// Nesting deeper than this is refused (as serde_json does by default).
pub const MAX_DEPTH: usize = 128;

/// A value as a tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Tree {
    Null,
    Boolean(bool),
    Signed(i64),
    Unsigned(u64),
    Float(f64),
    Text(String),
    Binary(Vec<u8>),
    Array(Vec<Tree>),
    Mapping(Vec<(Tree, Tree)>),
}

impl Value {
    /// Rebuilds the tree; fails on a list that ends early, has trailing nodes, or nests
    /// deeper than [`MAX_DEPTH`].
    pub fn to_tree(&self) -> Result<Tree, String> {
        let mut pos = 0;
        let tree = read(&self.nodes, &mut pos, 0)?;
        if pos != self.nodes.len() {
            return Err(format!(
                "value has {} trailing node(s) after the root",
                self.nodes.len() - pos
            ));
        }
        Ok(tree)
    }

    /// Flattens a tree into pre-order nodes.
    pub fn from_tree(tree: &Tree) -> Value {
        let mut nodes = Vec::new();
        write(tree, &mut nodes);
        Value { nodes }
    }
}

fn read(nodes: &[Node], pos: &mut usize, depth: usize) -> Result<Tree, String> {
    if depth > MAX_DEPTH {
        return Err(format!("value nests deeper than {MAX_DEPTH} levels"));
    }
    let node = nodes
        .get(*pos)
        .ok_or_else(|| format!("value ends early at node {pos}"))?;
    *pos += 1;
    Ok(match node {
        Node::Null => Tree::Null,
        Node::Boolean(b) => Tree::Boolean(*b),
        Node::Signed(i) => Tree::Signed(*i),
        Node::Unsigned(u) => Tree::Unsigned(*u),
        Node::Float(f) => Tree::Float(*f),
        Node::Text(s) => Tree::Text(s.clone()),
        Node::Binary(b) => Tree::Binary(b.clone()),
        Node::Array(n) => {
            let n = *n as usize;
            // Every item takes at least one node: a count above what is left is a lie.
            if n > nodes.len() - *pos {
                return Err(format!("array of {n} items exceeds the nodes left"));
            }
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(read(nodes, pos, depth + 1)?);
            }
            Tree::Array(items)
        }
        Node::Mapping(n) => {
            let n = *n as usize;
            if n.saturating_mul(2) > nodes.len() - *pos {
                return Err(format!("mapping of {n} entries exceeds the nodes left"));
            }
            let mut entries = Vec::with_capacity(n);
            for _ in 0..n {
                let k = read(nodes, pos, depth + 1)?;
                let v = read(nodes, pos, depth + 1)?;
                entries.push((k, v));
            }
            Tree::Mapping(entries)
        }
    })
}

fn write(tree: &Tree, out: &mut Vec<Node>) {
    match tree {
        Tree::Null => out.push(Node::Null),
        Tree::Boolean(b) => out.push(Node::Boolean(*b)),
        Tree::Signed(i) => out.push(Node::Signed(*i)),
        Tree::Unsigned(u) => out.push(Node::Unsigned(*u)),
        Tree::Float(f) => out.push(Node::Float(*f)),
        Tree::Text(s) => out.push(Node::Text(s.clone())),
        Tree::Binary(b) => out.push(Node::Binary(b.clone())),
        Tree::Array(items) => {
            out.push(Node::Array(items.len() as u32));
            for item in items {
                write(item, out);
            }
        }
        Tree::Mapping(entries) => {
            out.push(Node::Mapping(entries.len() as u32));
            for (k, v) in entries {
                write(k, out);
                write(v, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_nested_values() {
        let tree = Tree::Mapping(vec![
            (
                Tree::Text("a".into()),
                Tree::Array(vec![Tree::Signed(1), Tree::Null]),
            ),
            (Tree::Signed(2), Tree::Mapping(vec![])),
        ]);
        let value = Value::from_tree(&tree);
        assert_eq!(value.nodes.len(), 7);
        assert_eq!(value.to_tree().unwrap(), tree);
    }

    #[test]
    fn rejects_lying_counts_and_trailing_nodes() {
        let short = Value {
            nodes: vec![Node::Array(u32::MAX)],
        };
        assert!(short.to_tree().unwrap_err().contains("exceeds"));
        let trailing = Value {
            nodes: vec![Node::Null, Node::Null],
        };
        assert!(trailing.to_tree().unwrap_err().contains("trailing"));
        let deep = Value {
            nodes: vec![Node::Array(1); 200]
                .into_iter()
                .chain([Node::Null])
                .collect(),
        };
        assert!(deep.to_tree().unwrap_err().contains("deeper"));
    }
}
