//! The bearer token that guards the admin's changing routes (`POST /swap`): read from a
//! file (`--admin-token-file`) or `AXLE_ADMIN_TOKEN`, compared in constant time. Without
//! one, those routes are refused: reading is harmless, changing a kernel is not.

use std::path::Path;

use crate::AdminError;

/// The environment variable a token may come from (a file, when given, wins).
pub const TOKEN_ENV: &str = "AXLE_ADMIN_TOKEN";

/// A configured admin token.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// Why a request may not change the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No token is configured: changing routes are off (403).
    NotConfigured,
    /// The request carries no `Authorization: Bearer ...` (401).
    Missing,
    /// It carries another token (403).
    Wrong,
}

impl Token {
    /// A token from text (surrounding whitespace, such as a file's last newline, dropped).
    pub fn new(text: &str) -> Result<Token, AdminError> {
        let t = text.trim();
        if t.is_empty() || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(AdminError::Token(
                "the token must be one non-empty word of visible characters".into(),
            ));
        }
        Ok(Token(t.to_string()))
    }

    /// The token of `file` if given, else of [`TOKEN_ENV`] if set; none: changing routes
    /// are refused.
    pub fn configured(file: Option<&Path>) -> Result<Option<Token>, AdminError> {
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| AdminError::Token(format!("cannot read {}: {e}", path.display())))?;
            return Token::new(&text).map(Some);
        }
        match std::env::var(TOKEN_ENV) {
            Ok(text) => Token::new(&text)
                .map(Some)
                .map_err(|e| AdminError::Token(format!("{TOKEN_ENV}: {e}"))),
            Err(_) => Ok(None),
        }
    }
}

/// Whether `authorization` (the request's header, if any) carries `expected`.
pub fn check(expected: Option<&Token>, authorization: Option<&[u8]>) -> Result<(), Refusal> {
    let Some(expected) = expected else {
        return Err(Refusal::NotConfigured);
    };
    let Some(given) = authorization.and_then(|h| h.strip_prefix(b"Bearer ")) else {
        return Err(Refusal::Missing);
    };
    if same(given.trim_ascii(), expected.0.as_bytes()) {
        Ok(())
    } else {
        Err(Refusal::Wrong)
    }
}

/// Compares without stopping at the first difference (the time taken does not tell how
/// much of a guess was right).
fn same(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i % b.len().max(1)).copied().unwrap_or(0));
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_right_bearer_token_passes() {
        let t = Token::new("s3cret\n").unwrap();
        assert_eq!(check(Some(&t), Some(b"Bearer s3cret")), Ok(()));
        assert_eq!(check(Some(&t), Some(b"Bearer s3cre")), Err(Refusal::Wrong));
        assert_eq!(
            check(Some(&t), Some(b"Bearer s3cretX")),
            Err(Refusal::Wrong)
        );
        assert_eq!(check(Some(&t), Some(b"Bearer ")), Err(Refusal::Wrong));
        assert_eq!(
            check(Some(&t), Some(b"Basic s3cret")),
            Err(Refusal::Missing)
        );
        assert_eq!(check(Some(&t), None), Err(Refusal::Missing));
        assert_eq!(
            check(None, Some(b"Bearer s3cret")),
            Err(Refusal::NotConfigured)
        );
    }

    #[test]
    fn an_empty_or_spaced_token_is_refused() {
        for bad in ["", "  \n", "two words", "tab\there"] {
            assert!(Token::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_token_file_is_read_and_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "abc123\n").unwrap();
        let t = Token::configured(Some(&path)).unwrap().unwrap();
        assert_eq!(check(Some(&t), Some(b"Bearer abc123")), Ok(()));
        let missing = Token::configured(Some(&dir.path().join("none"))).unwrap_err();
        assert!(missing.to_string().contains("cannot read"), "{missing}");
    }
}
