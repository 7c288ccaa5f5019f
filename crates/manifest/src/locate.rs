//! Key paths and where they are written: an error names `file:line:column`, found from the
//! spans of toml's own parser, so a reader goes straight to the line at fault.

use toml::de::{DeTable, DeValue};

/// One step of a key path: a table key or an array index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A 1-based line and column.
pub type LineCol = (usize, usize);

/// `a.b[0].c`.
pub fn dotted(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The path of `a.b[0].c` (keys holding dots cannot be told apart; the nearest enclosing
/// key is found instead).
pub fn parse_dotted(key: &str) -> Vec<Seg> {
    let mut path = Vec::new();
    for part in key.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        if let Some(open) = rest.find('[') {
            path.push(Seg::Key(rest[..open].to_string()));
            rest = &rest[open..];
            while let Some(close) = rest.find(']') {
                match rest[1..close].parse() {
                    Ok(i) => path.push(Seg::Index(i)),
                    Err(_) => break,
                }
                rest = &rest[close + 1..];
            }
        } else {
            path.push(Seg::Key(rest.to_string()));
        }
    }
    path
}

/// The line and column of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> LineCol {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

/// Where `path` is written in `text`: the key itself (an array element: the element).
pub fn in_text(text: &str, path: &[Seg]) -> Option<LineCol> {
    let doc = DeTable::parse(text).ok()?;
    let mut table = doc.get_ref();
    let mut value: Option<&DeValue> = None;
    let mut span = None;
    for seg in path {
        match (seg, value) {
            (Seg::Key(k), None | Some(DeValue::Table(_))) => {
                if let Some(DeValue::Table(t)) = value {
                    table = t;
                }
                let (key, v) = table.iter().find(|(key, _)| key.get_ref() == k)?;
                span = Some(key.span());
                value = Some(v.get_ref());
            }
            (Seg::Index(i), Some(DeValue::Array(items))) => {
                let item = items.get(*i)?;
                span = Some(item.span());
                value = Some(item.get_ref());
            }
            _ => return None,
        }
    }
    span.map(|s| line_col(text, s.start))
}

/// Where `path` is written, or else the nearest enclosing key that is.
pub fn nearest(text: &str, path: &[Seg]) -> Option<LineCol> {
    (1..=path.len())
        .rev()
        .find_map(|n| in_text(text, &path[..n]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_keys_and_elements_in_tables_and_inline_tables() {
        let text = "[services.echo]\nendpoints = [\"a:1\",\n  { address = \"b:2\", wieght = 5 }]\n";
        let path = parse_dotted("services.echo.endpoints[1].wieght");
        assert_eq!(dotted(&path), "services.echo.endpoints[1].wieght");
        assert_eq!(in_text(text, &path), Some((3, 22)));
        assert_eq!(in_text(text, &path[..3]), Some((2, 1)));
        assert_eq!(
            nearest(text, &parse_dotted("services.echo.nope")),
            Some((1, 11))
        );
        assert_eq!(in_text(text, &parse_dotted("services.kv")), None);
    }
}
