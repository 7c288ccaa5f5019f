//! The packed form of a serializer [`Value`]: the same pre-order nodes as the WIT node
//! list, written into one byte string (`sdk/wit/kinds.wit`, world `packed-serializer`).
//!
//! Why: a node list crosses the component boundary node by node, and every text or binary
//! node costs the plugin an allocation (a call into it) before it has read a byte. A
//! packed value crosses as one copy, and a format can read it as it writes, borrowing
//! each string from it, with no tree in between.
//!
//! Each node is a tag byte, then (little-endian):
//!
//! | tag | node | then |
//! |---|---|---|
//! | 0 | null | — |
//! | 1 / 2 | false / true | — |
//! | 3 | signed | 8 bytes, `i64` |
//! | 4 | unsigned | 8 bytes, `u64` |
//! | 5 | float | 8 bytes, `f64` bits |
//! | 6 | text | `u32` length, then that many bytes of UTF-8 |
//! | 7 | binary | `u32` length, then that many bytes |
//! | 8 | array | `u32` item count; the items follow |
//! | 9 | mapping | `u32` entry count; key and value subtrees follow, in turn |
//!
//! Both sides read a packed value as untrusted: [`Reader`] checks every length and count
//! against what is left and every text for UTF-8, and [`Value::unpack`] also checks
//! nesting ([`MAX_DEPTH`]) and that exactly one value is present.

use crate::{Node, Value, MAX_DEPTH};

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const SIGNED: u8 = 3;
const UNSIGNED: u8 = 4;
const FLOAT: u8 = 5;
const TEXT: u8 = 6;
const BINARY: u8 = 7;
const ARRAY: u8 = 8;
const MAPPING: u8 = 9;

/// One node read from a packed value; text and binary borrow from it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Item<'a> {
    Null,
    Boolean(bool),
    Signed(i64),
    Unsigned(u64),
    Float(f64),
    Text(&'a str),
    Binary(&'a [u8]),
    /// The next `n` subtrees are its items.
    Array(u32),
    /// The next `n` pairs of subtrees are its entries.
    Mapping(u32),
}

/// Writes nodes in pre-order into a packed value.
#[derive(Debug, Default)]
pub struct Writer {
    bytes: Vec<u8>,
}

/// Where an array or mapping whose count is not known yet was begun ([`Writer::begin`]).
#[derive(Debug, Clone, Copy)]
pub struct Open(usize);

impl Writer {
    /// An empty writer with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Writer {
        Writer {
            bytes: Vec::with_capacity(capacity),
        }
    }

    /// A writer into `buffer`, emptied first: a buffer kept from an earlier value saves
    /// an allocation (`axle_sdk::answer_buffer`).
    pub fn from_buffer(mut buffer: Vec<u8>) -> Writer {
        buffer.clear();
        Writer { bytes: buffer }
    }

    /// The packed value written so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    #[inline]
    pub fn null(&mut self) {
        self.bytes.push(NULL);
    }

    #[inline]
    pub fn boolean(&mut self, b: bool) {
        self.bytes.push(if b { TRUE } else { FALSE });
    }

    #[inline]
    pub fn signed(&mut self, i: i64) {
        self.word(SIGNED, i.to_le_bytes());
    }

    #[inline]
    pub fn unsigned(&mut self, u: u64) {
        self.word(UNSIGNED, u.to_le_bytes());
    }

    #[inline]
    pub fn float(&mut self, f: f64) {
        self.word(FLOAT, f.to_bits().to_le_bytes());
    }

    /// A text node; a string longer than `u32::MAX` bytes is refused.
    #[inline]
    pub fn text(&mut self, s: &str) -> Result<(), String> {
        self.run(TEXT, s.as_bytes())
    }

    /// A binary node; longer than `u32::MAX` bytes is refused.
    #[inline]
    pub fn binary(&mut self, b: &[u8]) -> Result<(), String> {
        self.run(BINARY, b)
    }

    /// An array of the next `n` subtrees.
    #[inline]
    pub fn array(&mut self, n: u32) {
        self.count(ARRAY, n);
    }

    /// A mapping of the next `n` key/value subtree pairs.
    #[inline]
    pub fn mapping(&mut self, n: u32) {
        self.count(MAPPING, n);
    }

    /// Begins an array (`mapping` false) or a mapping whose count is given by
    /// [`Writer::end`] once its items are written (a streaming parser learns it last).
    pub fn begin(&mut self, mapping: bool) -> Open {
        let at = self.bytes.len();
        self.count(if mapping { MAPPING } else { ARRAY }, 0);
        Open(at)
    }

    /// Writes the count of what [`Writer::begin`] opened.
    pub fn end(&mut self, open: Open, n: u32) {
        self.bytes[open.0 + 1..open.0 + 5].copy_from_slice(&n.to_le_bytes());
    }

    #[inline]
    fn word(&mut self, tag: u8, word: [u8; 8]) {
        self.bytes.push(tag);
        self.bytes.extend_from_slice(&word);
    }

    #[inline]
    fn count(&mut self, tag: u8, n: u32) {
        self.bytes.push(tag);
        self.bytes.extend_from_slice(&n.to_le_bytes());
    }

    #[inline]
    fn run(&mut self, tag: u8, run: &[u8]) -> Result<(), String> {
        let Ok(n) = u32::try_from(run.len()) else {
            return Err(over_4_gib(run.len()));
        };
        self.count(tag, n);
        crate::copy::extend(&mut self.bytes, run);
        Ok(())
    }
}

/// Reads the nodes of a packed value one at a time, checking each against what is left.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next node; an error says what was cut short or malformed.
    ///
    /// Inlined, with every error made out of line: a plugin calls this once per node, and
    /// as a call of its own in a component it was about a quarter of a `msgpack` encode of
    /// a record of twenty fields (`docs/performance.md`, "A packed node read in line").
    #[inline(always)]
    pub fn item(&mut self) -> Result<Item<'a>, String> {
        let Some((&tag, rest)) = self.rest.split_first() else {
            return Err(malformed("packed value ends early"));
        };
        self.rest = rest;
        Ok(match tag {
            NULL => Item::Null,
            FALSE => Item::Boolean(false),
            TRUE => Item::Boolean(true),
            SIGNED => Item::Signed(i64::from_le_bytes(self.take()?)),
            UNSIGNED => Item::Unsigned(u64::from_le_bytes(self.take()?)),
            FLOAT => Item::Float(f64::from_bits(u64::from_le_bytes(self.take()?))),
            TEXT => match crate::utf8_text(self.run()?) {
                Ok(text) => Item::Text(text),
                Err(e) => return Err(not_utf8(e)),
            },
            BINARY => Item::Binary(self.run()?),
            ARRAY => Item::Array(self.counted(1)?),
            MAPPING => Item::Mapping(self.counted(2)?),
            other => return Err(unknown_tag(other)),
        })
    }

    #[inline]
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let Some((word, rest)) = self.rest.split_first_chunk::<N>() else {
            return Err(malformed("packed value ends inside a node"));
        };
        self.rest = rest;
        Ok(*word)
    }

    #[inline]
    fn run(&mut self) -> Result<&'a [u8], String> {
        let n = u32::from_le_bytes(self.take()?) as usize;
        let Some((run, rest)) = self.rest.split_at_checked(n) else {
            return Err(run_too_long(n, self.rest.len()));
        };
        self.rest = rest;
        Ok(run)
    }

    /// A count whose subtrees take at least `per` bytes each: one above what is left is a
    /// lie, refused before anyone sizes a buffer by it.
    #[inline]
    fn counted(&mut self, per: usize) -> Result<u32, String> {
        let n = u32::from_le_bytes(self.take()?);
        if (n as usize).saturating_mul(per) > self.rest.len() {
            return Err(count_too_big(n));
        }
        Ok(n)
    }
}

// The writer's and the reader's errors, out of line: rare, and each an allocation and a
// format, which kept the calls they sat in from being inlined.

#[cold]
#[inline(never)]
fn over_4_gib(len: usize) -> String {
    format!("a node of {len} bytes exceeds 4 GiB")
}

#[cold]
#[inline(never)]
fn malformed(what: &str) -> String {
    what.to_string()
}

#[cold]
#[inline(never)]
fn not_utf8(e: std::str::Utf8Error) -> String {
    format!("packed text: {e}")
}

#[cold]
#[inline(never)]
fn unknown_tag(tag: u8) -> String {
    format!("packed value has an unknown tag {tag}")
}

#[cold]
#[inline(never)]
fn run_too_long(n: usize, left: usize) -> String {
    format!("packed node of {n} bytes exceeds the {left} left")
}

#[cold]
#[inline(never)]
fn count_too_big(n: u32) -> String {
    format!("packed count {n} exceeds the bytes left")
}

impl Value {
    /// The packed form of this value (written in one pass, no tree).
    pub fn pack(&self) -> Result<Vec<u8>, String> {
        self.pack_into(Vec::new())
    }

    /// [`Value::pack`] into `buffer`, emptied first: a buffer kept from an earlier value
    /// saves an allocation.
    pub fn pack_into(&self, mut buffer: Vec<u8>) -> Result<Vec<u8>, String> {
        buffer.clear();
        buffer.reserve(self.packed_len());
        let mut w = Writer::from_buffer(buffer);
        for node in &self.nodes {
            match node {
                Node::Null => w.null(),
                Node::Boolean(b) => w.boolean(*b),
                Node::Signed(i) => w.signed(*i),
                Node::Unsigned(u) => w.unsigned(*u),
                Node::Float(f) => w.float(*f),
                Node::Text(s) => w.text(s)?,
                Node::Binary(b) => w.binary(b)?,
                Node::Array(n) => w.array(*n),
                Node::Mapping(n) => w.mapping(*n),
            }
        }
        Ok(w.into_bytes())
    }

    /// Reads a packed value back; fails on a value that ends early, nests deeper than
    /// [`MAX_DEPTH`], or is followed by more bytes.
    pub fn unpack(bytes: &[u8]) -> Result<Value, String> {
        let mut r = Reader::new(bytes);
        let mut nodes = Vec::new();
        each_node(|| unpack_one(&mut r, &mut nodes))?;
        if !r.is_empty() {
            return Err("packed value has bytes after its root".to_string());
        }
        Ok(Value { nodes })
    }

    fn packed_len(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| match n {
                Node::Null | Node::Boolean(_) => 1,
                Node::Signed(_) | Node::Unsigned(_) | Node::Float(_) => 9,
                Node::Text(s) => 5 + s.len(),
                Node::Binary(b) => 5 + b.len(),
                Node::Array(_) | Node::Mapping(_) => 5,
            })
            .sum()
    }
}

/// Reads one node into `out`; answers how many children follow it.
#[inline(always)]
fn unpack_one(r: &mut Reader<'_>, out: &mut Vec<Node>) -> Result<u64, String> {
    let (node, children) = match r.item()? {
        Item::Null => (Node::Null, 0),
        Item::Boolean(b) => (Node::Boolean(b), 0),
        Item::Signed(i) => (Node::Signed(i), 0),
        Item::Unsigned(u) => (Node::Unsigned(u), 0),
        Item::Float(f) => (Node::Float(f), 0),
        Item::Text(s) => (Node::Text(s.to_owned()), 0),
        Item::Binary(b) => (Node::Binary(b.to_vec()), 0),
        Item::Array(n) => (Node::Array(n), u64::from(n)),
        Item::Mapping(n) => (Node::Mapping(n), 2 * u64::from(n)),
    };
    out.push(node);
    // The count was checked against the bytes left, so this reserves no more than they
    // can hold.
    out.reserve(children as usize);
    Ok(children)
}

/// Calls `node` once for each node of one value, in order: `node` reads (or writes) one
/// node and answers how many children follow it. Fails, as [`Value::unpack`] does, on a
/// node deeper than [`MAX_DEPTH`].
///
/// One call per container, looping over its children, not one call per node: in a
/// component every call pays a stack check, the epoch check and saved registers, and a
/// record of twenty fields is forty-one nodes in two containers (`docs/performance.md`,
/// "A call per container, not per node"). The kernel's unpacking and `msgpack`'s both
/// directions walk a value with it.
pub fn each_node(mut node: impl FnMut() -> Result<u64, String>) -> Result<(), String> {
    nodes(1, 0, &mut node)
}

/// `n` sibling nodes at `depth`, each followed by its children.
fn nodes(
    n: u64,
    depth: usize,
    node: &mut impl FnMut() -> Result<u64, String>,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    for _ in 0..n {
        let children = node()?;
        if children > 0 {
            nodes(children, depth + 1, node)?;
        }
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn too_deep() -> String {
    format!("value nests deeper than {MAX_DEPTH} levels")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tree;

    fn sample() -> Value {
        Value::from_tree(&Tree::Mapping(vec![
            (
                Tree::Text("a".into()),
                Tree::Array(vec![Tree::Signed(-1), Tree::Float(2.5), Tree::Null]),
            ),
            (Tree::Signed(7), Tree::Binary(vec![0, 255])),
            (Tree::Text("u".into()), Tree::Unsigned(u64::MAX)),
            (Tree::Boolean(true), Tree::Boolean(false)),
            (Tree::Text("é".into()), Tree::Mapping(vec![])),
        ]))
    }

    #[test]
    fn a_value_survives_packing() {
        let value = sample();
        let packed = value.pack().unwrap();
        assert_eq!(packed.len(), value.packed_len(), "the size guess is exact");
        assert_eq!(Value::unpack(&packed).unwrap(), value);
    }

    #[test]
    fn a_count_written_last_reads_the_same() {
        let mut w = Writer::default();
        let open = w.begin(true);
        w.text("k").unwrap();
        let inner = w.begin(false);
        w.signed(1);
        w.signed(2);
        w.end(inner, 2);
        w.end(open, 1);
        let expected = Value::from_tree(&Tree::Mapping(vec![(
            Tree::Text("k".into()),
            Tree::Array(vec![Tree::Signed(1), Tree::Signed(2)]),
        )]));
        assert_eq!(Value::unpack(&w.into_bytes()).unwrap(), expected);
    }

    #[test]
    fn every_cut_of_a_packed_value_is_refused() {
        let packed = sample().pack().unwrap();
        for cut in 0..packed.len() {
            assert!(Value::unpack(&packed[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = packed.clone();
        longer.push(NULL);
        assert!(Value::unpack(&longer)
            .unwrap_err()
            .contains("after its root"));
    }

    #[test]
    fn lies_and_garbage_are_refused() {
        // An array claiming four billion items in five bytes.
        let err = Value::unpack(&[ARRAY, 0xff, 0xff, 0xff, 0xff]).unwrap_err();
        assert!(err.contains("exceeds the bytes left"), "{err}");
        // A text of invalid UTF-8.
        let err = Value::unpack(&[TEXT, 1, 0, 0, 0, 0xff]).unwrap_err();
        assert!(err.contains("packed text"), "{err}");
        // A run longer than the input.
        let err = Value::unpack(&[BINARY, 9, 0, 0, 0, 1]).unwrap_err();
        assert!(err.contains("exceeds the 1 left"), "{err}");
        assert!(Value::unpack(&[42]).unwrap_err().contains("unknown tag 42"));
        // Nested deeper than the limit.
        let mut deep = Vec::new();
        for _ in 0..=MAX_DEPTH + 1 {
            deep.extend_from_slice(&[ARRAY, 1, 0, 0, 0]);
        }
        deep.push(NULL);
        assert!(Value::unpack(&deep).unwrap_err().contains("nests deeper"));
    }

    /// Arrays nested `levels` deep around a null, then a sibling of the outermost: the
    /// walk has to climb all the way back down before it reads the sibling.
    fn nested(levels: usize) -> Value {
        let mut nodes = vec![Node::Array(2)];
        nodes.extend((1..levels).map(|_| Node::Array(1)));
        nodes.push(Node::Null);
        nodes.push(Node::Text("sibling".into()));
        Value { nodes }
    }

    #[test]
    fn nesting_is_refused_one_level_past_the_limit_and_not_before() {
        // The innermost null sits at depth `levels`; the root is at depth 0.
        let deepest = nested(MAX_DEPTH);
        assert_eq!(Value::unpack(&deepest.pack().unwrap()), Ok(deepest));
        let past = nested(MAX_DEPTH + 1).pack().unwrap();
        assert!(Value::unpack(&past).unwrap_err().contains("nests deeper"));
    }

    #[test]
    fn each_node_visits_in_order_and_stops_at_the_root_end() {
        // [[1, []], {2: 3}] as child counts, in pre-order, then one node too many.
        let counts = [2, 2, 0, 0, 2, 0, 0, 99];
        let mut seen = 0;
        each_node(|| {
            seen += 1;
            Ok(counts[seen - 1])
        })
        .unwrap();
        assert_eq!(
            seen, 7,
            "the root's subtree is seven nodes; the eighth is not read"
        );
    }
}
