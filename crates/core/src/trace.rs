//! W3C trace context (`traceparent`): which trace a request belongs to and which span
//! caused it, so a call's hops can be put back together by whatever reads the logs. The
//! ids travel in frame metadata (`docs/wire.md`, tags 7 and 13) and in the gateway's
//! `traceparent` HTTP header; this module only holds, parses and prints them (the ids
//! are drawn where requests are made, by the crates that already draw random ids).

use std::fmt;

/// The trace a request belongs to and the span it runs in (the parent of the calls it
/// makes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceContext {
    /// The whole trace's id, the same at every hop; never all zeros.
    pub trace_id: [u8; 16],
    /// The current span's id; never all zeros.
    pub span_id: [u8; 8],
    /// W3C trace flags (bit 0: sampled).
    pub flags: u8,
}

/// The flag a new trace starts with: sampled, so a collector that reads the logs keeps it.
pub const SAMPLED: u8 = 1;

impl TraceContext {
    /// The same trace, in span `span_id` (a child of this one: the caller remembers
    /// `self.span_id` as its parent).
    pub fn child(&self, span_id: [u8; 8]) -> TraceContext {
        TraceContext { span_id, ..*self }
    }

    /// The W3C text form, `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`.
    pub fn traceparent(&self) -> String {
        self.to_string()
    }

    /// The trace id as 32 lowercase hex digits, formatted only when displayed (log fields
    /// cost nothing unless a subscriber records them).
    pub fn trace_hex(&self) -> Hex<'_> {
        Hex(&self.trace_id)
    }

    /// The span id as 16 lowercase hex digits, formatted only when displayed.
    pub fn span_hex(&self) -> Hex<'_> {
        Hex(&self.span_id)
    }

    /// Parses a W3C `traceparent` (version `00`; a later version's first four fields are
    /// read, as the recommendation asks). Says what is wrong with a bad one.
    pub fn parse(text: &str) -> Result<TraceContext, String> {
        let bad = |why: &str| format!("traceparent {text:?}: {why}");
        let text = text.trim();
        let mut parts = text.split('-');
        let (Some(version), Some(trace), Some(span), Some(flags)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("expected VERSION-TRACEID-SPANID-FLAGS"));
        };
        let [version] =
            unhex::<1>(version).ok_or_else(|| bad("the version is not 2 hex digits"))?;
        if version == 0xff {
            return Err(bad("version ff is invalid"));
        }
        if version == 0 && parts.next().is_some() {
            return Err(bad("version 00 has exactly four fields"));
        }
        let trace_id =
            unhex::<16>(trace).ok_or_else(|| bad("the trace id is not 32 hex digits"))?;
        let span_id = unhex::<8>(span).ok_or_else(|| bad("the span id is not 16 hex digits"))?;
        let [flags] = unhex::<1>(flags).ok_or_else(|| bad("the flags are not 2 hex digits"))?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return Err(bad("an all-zero id is invalid"));
        }
        Ok(TraceContext {
            trace_id,
            span_id,
            flags,
        })
    }
}

impl fmt::Display for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            self.trace_hex(),
            self.span_hex(),
            self.flags
        )
    }
}

/// Bytes shown as lowercase hex.
#[derive(Clone, Copy)]
pub struct Hex<'a>(pub &'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `N` bytes from exactly `2 * N` hex digits (either case, as W3C readers accept).
fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let mut out = [0; N];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        *byte = (hi * 16 + lo) as u8;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_and_prints_the_w3c_example() {
        let t = TraceContext::parse(EXAMPLE).unwrap();
        assert_eq!(t.trace_id[0], 0x4b);
        assert_eq!(t.span_id[7], 0xb7);
        assert_eq!(t.flags, SAMPLED);
        assert_eq!(t.traceparent(), EXAMPLE);
        let upper = EXAMPLE.to_uppercase();
        assert_eq!(TraceContext::parse(&upper).unwrap(), t);
    }

    #[test]
    fn a_child_keeps_the_trace_and_flags() {
        let t = TraceContext::parse(EXAMPLE).unwrap();
        let c = t.child([7; 8]);
        assert_eq!((c.trace_id, c.flags), (t.trace_id, t.flags));
        assert_eq!(
            c.traceparent(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0707070707070707-01"
        );
    }

    #[test]
    fn bad_input_is_an_error_naming_the_problem() {
        for (text, why) in [
            ("", "expected VERSION"),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                "expected",
            ),
            (
                "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "version",
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "ff",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
                "trace id",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
                "trace id",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902-01",
                "span id",
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "all-zero",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "all-zero",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
                "flags",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
                "four",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-é1",
                "flags",
            ),
        ] {
            let err = TraceContext::parse(text).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
        // A later version may add fields; the first four are read.
        let later = format!("{}-more", EXAMPLE.replacen("00", "01", 1));
        assert!(TraceContext::parse(&later).is_ok());
    }
}
