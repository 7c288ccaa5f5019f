//! "Did you mean `weight`?": the nearest known name to a misspelt one, by edit distance.

/// Levenshtein distance between `a` and `b`, in characters.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// The candidate closest to `wrong`, if it is close enough to be a slip of the keyboard
/// (at most a third of the name's length in edits, and at least one) or a name cut short
/// (`timeout` for `timeout-ms`).
pub fn nearest<'a>(wrong: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let most = (wrong.chars().count() / 3).max(1);
    let cut_short = |c: &str| wrong.len() >= 4 && c.starts_with(wrong);
    candidates
        .into_iter()
        .map(|c| (distance(wrong, c), c))
        .filter(|(d, c)| *d <= most || cut_short(c))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// ` (did you mean `x`?)`, or nothing.
pub fn hint<'a>(wrong: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    nearest(wrong, candidates)
        .map(|c| format!("; did you mean `{c}`?"))
        .unwrap_or_default()
}

/// serde's `unknown field `x`, expected one of `a`, `b`` (or variant) made into a
/// message a person acts on: the name refused, the nearest known one, the known ones.
/// Other messages are returned as they are.
pub fn unknown_name(message: &str) -> String {
    for (what, noun) in [("unknown field `", "field"), ("unknown variant `", "value")] {
        let Some(rest) = message.strip_prefix(what) else {
            continue;
        };
        let Some((wrong, tail)) = rest.split_once('`') else {
            continue;
        };
        let known: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
        if known.is_empty() {
            return format!("unknown {noun} `{wrong}` (nothing is allowed here)");
        }
        return format!(
            "unknown {noun} `{wrong}`{} (allowed: {})",
            hint(wrong, known.iter().copied()),
            known.join(", ")
        );
    }
    message.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses_are_suggested_and_strangers_are_not() {
        assert_eq!(distance("wieght", "weight"), 2);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(
            nearest("wieght", ["address", "weight", "tags"]),
            Some("weight")
        );
        assert_eq!(nearest("colour", ["address", "weight", "tags"]), None);
        assert_eq!(
            unknown_name("unknown field `wieght`, expected one of `address`, `weight`, `tags`"),
            "unknown field `wieght`; did you mean `weight`? (allowed: address, weight, tags)"
        );
        assert_eq!(
            unknown_name("unknown variant `selecter`, expected one of `serializer`, `selector`"),
            "unknown value `selecter`; did you mean `selector`? (allowed: serializer, selector)"
        );
        assert_eq!(unknown_name("invalid type: string"), "invalid type: string");
    }
}
