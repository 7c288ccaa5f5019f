//! Comparing names on the request path.
//!
//! Two empty strings compared with `==` cost about 140 ns on the development machine (an
//! AMD EPYC, Debian 12's glibc), against about 1 ns for two four-byte names. An empty
//! `String` or `&str` points at the dangling address 1, and `==` calls libc's `memcmp`
//! even for zero bytes. That `memcmp` (`__memcmp_evex_movbe`) reads the first 32 bytes
//! with a masked load whose mask is empty; masking a load from an unmapped page is
//! correct, but the CPU takes a slow assist to do it. Names that are empty on most
//! requests (the consumer application when the caller gives none, the parts of a memo
//! key a plugin does not read) were compared so on every request: the limiter's key
//! lookup alone was 1.5% of all CPU in `axle bench rpc` (`docs/performance.md`, "Empty
//! names").

/// `a == b`, without calling `memcmp` when both are empty.
#[inline]
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_is_equality() {
        let empty = String::new();
        for (a, b) in [
            ("", ""),
            (empty.as_str(), ""),
            ("a", ""),
            ("", "a"),
            ("echo", "echo"),
            ("echo", "ecHo"),
            ("echo", "echo2"),
        ] {
            assert_eq!(same(a, b), a == b, "{a:?} {b:?}");
        }
    }
}
