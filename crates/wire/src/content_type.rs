//! A payload's content type (`raw`, `application/json`, ...): metadata tag 6.
//!
//! Every request and every response carries one, so reading it off the wire must not
//! allocate on the steady-state path (docs/performance.md, "Where the allocations go"). The
//! names this process serves — the built-in ones and each loaded serializer's, interned when
//! it loads — are kept once for the life of the process and borrowed by every frame that
//! names them; any other name read off the wire is one shared allocation. The interned set is
//! bounded ([`MAX_INTERNED`] names of at most [`MAX_LEN`] bytes), so a peer that sends
//! arbitrary names grows nothing but the frames it sends.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, RwLock};

/// The longest content type a serializer may declare.
pub const MAX_LEN: usize = 255;

/// How many names [`ContentType::intern`] keeps beyond the built-in ones.
pub const MAX_INTERNED: usize = 64;

/// Names every process knows: `raw` and the shipped serializers'.
const BUILT_IN: &[&str] = &["raw", "application/json", "application/msgpack"];

/// Names interned at run time (serializers' declared content types), leaked on purpose:
/// at most `MAX_INTERNED` × `MAX_LEN` bytes for the life of the process.
static INTERNED: RwLock<Vec<&'static str>> = RwLock::new(Vec::new());

/// A content type name. Cheap to clone, compared and hashed as the name.
#[derive(Clone)]
pub struct ContentType(Repr);

#[derive(Clone)]
enum Repr {
    Known(&'static str),
    Other(Arc<str>),
}

impl ContentType {
    /// Bytes that need no serializer.
    pub const RAW: ContentType = ContentType(Repr::Known("raw"));

    /// A name as read off the wire or given by a caller: borrowed when the process knows
    /// it, one allocation otherwise.
    pub fn new(name: &str) -> ContentType {
        match known(name) {
            Some(k) => ContentType(Repr::Known(k)),
            None => ContentType(Repr::Other(Arc::from(name))),
        }
    }

    /// A name this process serves (a loaded serializer's): from now on frames naming it
    /// are decoded without allocating. Past [`MAX_INTERNED`] names, or for a name longer
    /// than [`MAX_LEN`], this is [`ContentType::new`].
    pub fn intern(name: &str) -> ContentType {
        match known(name).or_else(|| intern_into(&INTERNED, name)) {
            Some(k) => ContentType(Repr::Known(k)),
            None => ContentType::new(name),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Known(k) => k,
            Repr::Other(s) => s,
        }
    }
}

/// The process's own copy of `name`, if it has one.
fn known(name: &str) -> Option<&'static str> {
    if let Some(k) = BUILT_IN.iter().copied().find(|k| *k == name) {
        return Some(k);
    }
    let interned = INTERNED.read().unwrap_or_else(|e| e.into_inner());
    interned.iter().copied().find(|k| *k == name)
}

/// Keeps `name` in `table` unless it is too long or the table is full.
fn intern_into(table: &RwLock<Vec<&'static str>>, name: &str) -> Option<&'static str> {
    if name.len() > MAX_LEN {
        return None;
    }
    let mut table = table.write().unwrap_or_else(|e| e.into_inner());
    // Another thread may have interned it since the caller looked.
    if let Some(k) = table.iter().copied().find(|k| *k == name) {
        return Some(k);
    }
    if table.len() >= MAX_INTERNED {
        return None;
    }
    let k: &'static str = Box::leak(name.to_owned().into_boxed_str());
    table.push(k);
    Some(k)
}

impl Default for ContentType {
    /// `raw`: a frame without a content type carries bytes.
    fn default() -> Self {
        ContentType::RAW
    }
}

impl Deref for ContentType {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for ContentType {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for ContentType {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for ContentType {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ContentType {}

impl Hash for ContentType {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialOrd for ContentType {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ContentType {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialEq<str> for ContentType {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ContentType {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for ContentType {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl fmt::Debug for ContentType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for ContentType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for ContentType {
    fn from(name: &str) -> Self {
        ContentType::new(name)
    }
}

impl From<String> for ContentType {
    fn from(name: String) -> Self {
        ContentType::new(&name)
    }
}

impl From<ContentType> for String {
    fn from(ct: ContentType) -> Self {
        ct.as_str().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_known(ct: &ContentType) -> bool {
        matches!(ct.0, Repr::Known(_))
    }

    #[test]
    fn built_in_names_are_borrowed_and_others_are_not() {
        assert!(is_known(&ContentType::new("raw")));
        assert!(is_known(&ContentType::new("application/json")));
        assert!(!is_known(&ContentType::new("application/x-unheard-of")));
        assert_eq!(
            ContentType::new("application/x-unheard-of"),
            "application/x-unheard-of"
        );
        assert_eq!(ContentType::default(), ContentType::RAW);
    }

    #[test]
    fn an_interned_name_is_borrowed_from_then_on_and_interned_once() {
        let name = "application/x-axle-content-type-test";
        assert!(!is_known(&ContentType::new(name)));
        let a = ContentType::intern(name);
        let b = ContentType::intern(name);
        assert!(is_known(&a) && is_known(&ContentType::new(name)));
        match (&a.0, &b.0) {
            (Repr::Known(x), Repr::Known(y)) => assert!(std::ptr::eq(*x, *y)),
            _ => unreachable!(),
        }
        let interned = INTERNED.read().unwrap();
        assert_eq!(interned.iter().filter(|k| **k == name).count(), 1);
    }

    #[test]
    fn interning_is_bounded() {
        // A table of its own: the process's is shared with the other tests.
        let table = RwLock::new(Vec::new());
        assert_eq!(intern_into(&table, &"x".repeat(MAX_LEN + 1)), None);
        for i in 0..MAX_INTERNED {
            assert!(intern_into(&table, &format!("application/x-flood-{i}")).is_some());
        }
        assert!(
            intern_into(&table, "application/x-flood-0").is_some(),
            "already there"
        );
        assert_eq!(intern_into(&table, "application/x-past-the-bound"), None);
        assert_eq!(table.read().unwrap().len(), MAX_INTERNED);
    }

    #[test]
    fn compares_and_hashes_as_its_name() {
        use std::collections::HashMap;
        let mut by_type: HashMap<ContentType, u8> = HashMap::new();
        by_type.insert(ContentType::new("application/x-a"), 1);
        assert_eq!(by_type.get("application/x-a"), Some(&1));
        assert_eq!(ContentType::from("raw".to_string()), ContentType::RAW);
        assert_eq!(ContentType::RAW.to_string(), "raw");
        assert_eq!(format!("{:?}", ContentType::RAW), "\"raw\"");
    }
}
