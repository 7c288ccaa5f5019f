//! Condition rules, Dubbo style: `WHEN => THEN`. Each side is conditions joined by `&`;
//! a condition is `KEY = VALUES` or `KEY != VALUES`, VALUES a comma list of patterns
//! (`pattern.rs`).
//!
//! WHEN keys (the request): `method`, `app` (the calling application), `address` (the
//! caller's IP), `tag:<key>` (a request tag), `field:<path>` (a request field,
//! `field:user.tier`). An empty WHEN matches every request.
//!
//! THEN keys (the endpoints): `address` (`host:port`; a CIDR matches its host) or any
//! endpoint tag key (`lane`, `zone`, `version`). An empty THEN blocks: the request may
//! reach no endpoint.
//!
//! A part the request lacks (no such tag, no such field, no app) matches only `!=`.

use crate::pattern::Pattern;

/// What a WHEN condition looks at.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Method,
    App,
    Address,
    Tag(String),
    Field(String),
}

/// What a THEN condition looks at.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Address,
    Tag(String),
}

/// `key = values` or `key != values`.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition<K> {
    pub key: K,
    pub negated: bool,
    pub values: Vec<Pattern>,
}

impl<K> Condition<K> {
    /// Whether `value` (`None`: the part is missing) satisfies the condition.
    pub fn holds(&self, value: Option<&str>) -> bool {
        let any = value.is_some_and(|v| self.values.iter().any(|p| p.matches(v)));
        any != self.negated
    }
}

/// One parsed rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub text: String,
    pub when: Vec<Condition<Part>>,
    pub then: Vec<Condition<Target>>,
}

/// Parses rule number `index` (1-based, for messages); the error names the rule and the
/// byte position in it where things went wrong.
pub fn parse(index: usize, text: &str) -> Result<Rule, String> {
    let fail = |at: usize, why: String| format!("rule {index} (`{text}`), at byte {at}: {why}");
    let Some(arrow) = text.find("=>") else {
        return Err(fail(
            0,
            "no `=>` between the request side and the endpoint side".into(),
        ));
    };
    if text[arrow + 2..].contains("=>") {
        let second = arrow + 2 + text[arrow + 2..].find("=>").unwrap_or(0);
        return Err(fail(second, "a second `=>`".into()));
    }
    let when = side(&text[..arrow], 0, when_key).map_err(|(at, why)| fail(at, why))?;
    let then = side(&text[arrow + 2..], arrow + 2, then_key).map_err(|(at, why)| fail(at, why))?;
    Ok(Rule {
        text: text.to_string(),
        when,
        then,
    })
}

fn when_key(key: &str) -> Result<Part, String> {
    match key {
        "method" => Ok(Part::Method),
        "app" => Ok(Part::App),
        "address" => Ok(Part::Address),
        _ => {
            if let Some(k) = key.strip_prefix("tag:") {
                return (!k.is_empty())
                    .then(|| Part::Tag(k.to_string()))
                    .ok_or_else(|| "`tag:` needs a tag key (`tag:lane`)".to_string());
            }
            if let Some(path) = key.strip_prefix("field:") {
                if path.is_empty() || path.split('.').any(str::is_empty) {
                    return Err(format!(
                        "`{key}`: a field path is dotted names (`field:user.tier`)"
                    ));
                }
                return Ok(Part::Field(path.to_string()));
            }
            Err(format!(
                "unknown request key `{key}` (method, app, address, tag:<key>, field:<path>)"
            ))
        }
    }
}

fn then_key(key: &str) -> Result<Target, String> {
    if key == "address" {
        return Ok(Target::Address);
    }
    if ["method", "app"].contains(&key) || key.contains(':') {
        return Err(format!(
            "`{key}` is a request key; the endpoint side matches endpoint tags or `address`"
        ));
    }
    Ok(Target::Tag(key.to_string()))
}

/// Parses one side (`offset`: where it starts in the rule, for positions).
fn side<K>(
    text: &str,
    offset: usize,
    key_of: impl Fn(&str) -> Result<K, String>,
) -> Result<Vec<Condition<K>>, (usize, String)> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut start = 0;
    for piece in text.split('&') {
        let at = offset + start + (piece.len() - piece.trim_start().len());
        start += piece.len() + 1;
        if piece.trim().is_empty() {
            return Err((
                at,
                "an empty condition (two `&` in a row, or one at an end)".into(),
            ));
        }
        out.push(condition(piece.trim(), at, &key_of)?);
    }
    Ok(out)
}

fn condition<K>(
    text: &str,
    at: usize,
    key_of: &impl Fn(&str) -> Result<K, String>,
) -> Result<Condition<K>, (usize, String)> {
    let (key, negated, values, values_at) = match (text.find("!="), text.find('=')) {
        (Some(i), _) => (&text[..i], true, &text[i + 2..], i + 2),
        (None, Some(i)) => (&text[..i], false, &text[i + 1..], i + 1),
        (None, None) => {
            return Err((
                at,
                format!("`{text}`: expected `KEY = VALUES` or `KEY != VALUES`"),
            ))
        }
    };
    let key_text = key.trim();
    if key_text.is_empty() {
        return Err((at, "a condition without a key".into()));
    }
    if key_text.contains(char::is_whitespace) {
        return Err((at, format!("`{key_text}`: a key has no spaces")));
    }
    let key = key_of(key_text).map_err(|why| (at, why))?;
    let mut patterns = Vec::new();
    let mut pos = at + values_at;
    for value in values.split(',') {
        let value_at = pos + (value.len() - value.trim_start().len());
        pos += value.len() + 1;
        let pattern = Pattern::parse(value.trim()).map_err(|why| (value_at, why))?;
        patterns.push(pattern);
    }
    Ok(Condition {
        key,
        negated,
        values: patterns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_parse() {
        let r = parse(1, "app = billing & method = get*,list* => lane = canary").unwrap();
        assert_eq!(r.when.len(), 2);
        assert_eq!(r.when[0].key, Part::App);
        assert_eq!(r.when[1].values.len(), 2);
        assert_eq!(r.then[0].key, Target::Tag("lane".into()));
        let r = parse(2, "=> version = 2.*").unwrap();
        assert!(r.when.is_empty() && r.then.len() == 1);
        let r = parse(3, "field:user.tier != gold,silver =>").unwrap();
        assert!(r.when[0].negated && r.then.is_empty());
        assert_eq!(r.when[0].key, Part::Field("user.tier".into()));
    }

    #[test]
    fn a_missing_part_matches_only_not_equal() {
        let r = parse(1, "tag:lane = canary & tag:zone != eu => x = y").unwrap();
        assert!(!r.when[0].holds(None));
        assert!(r.when[1].holds(None));
        assert!(r.when[0].holds(Some("canary")) && !r.when[1].holds(Some("eu")));
    }

    #[test]
    fn errors_name_the_rule_and_the_position() {
        for (text, expected) in [
            (
                "app = billing",
                "rule 4 (`app = billing`), at byte 0: no `=>`",
            ),
            ("app = a => b = c => d = e", "at byte 17: a second `=>`"),
            (
                "colour = red => lane = a",
                "at byte 0: unknown request key `colour`",
            ),
            (
                "app = a && method = b => lane = x",
                "at byte 9: an empty condition",
            ),
            (
                "app = a => method = b",
                "at byte 11: `method` is a request key",
            ),
            (
                "address = 10.0.0.0/40 => lane = a",
                "at byte 10: `10.0.0.0/40`",
            ),
            ("app = a,,b => lane = x", "at byte 8: empty value"),
            ("field:user..tier = 1 => lane = x", "field path"),
            (
                "app billing => lane = x",
                "at byte 0: `app billing`: expected",
            ),
            ("tag: = x => lane = y", "`tag:` needs a tag key"),
        ] {
            let e = parse(4, text).unwrap_err();
            assert!(e.contains(expected), "{text}: {e}");
        }
    }
}
