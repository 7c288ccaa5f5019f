//! The interceptor kind's contract, checked where its values cross into the kernel:
//! declarations (and the payload grant) and answers (set-tags bounds, the classes a
//! refusal may claim). Kept apart from the slot (`interceptor.rs`) so the rules read in
//! one place.

use crate::bindings::interceptor::axle::spi::interception as wi;
pub use axle_spi::{refusal_class, REFUSAL_CLASSES};
use axle_spi::{InterceptDeclaration, InterceptPoint, InterceptReads, InterceptVerdict, Refusal};

/// Most tags a `set-tags` answer may carry.
pub const MAX_TAGS: usize = 64;
/// Longest tag key, in bytes.
pub const MAX_TAG_KEY: usize = 128;
/// Longest tag value, in bytes.
pub const MAX_TAG_VALUE: usize = 1024;
/// Longest refusal message kept, in bytes (longer ones are cut, not refused).
pub const MAX_MESSAGE: usize = 1024;

axle_spi::intercept_point_conversions!(pub(crate) wi::Point);

pub(crate) fn declaration(d: &wi::Declaration) -> InterceptDeclaration {
    let mut points: Vec<InterceptPoint> = Vec::new();
    for p in d.points.iter().map(|p| point_in(*p)) {
        if !points.contains(&p) {
            points.push(p);
        }
    }
    let r = d.reads;
    InterceptDeclaration {
        points,
        reads: InterceptReads {
            tags: r.contains(wi::Reads::TAGS),
            consumer: r.contains(wi::Reads::CONSUMER),
            peer: r.contains(wi::Reads::PEER),
            trace: r.contains(wi::Reads::TRACE),
            deadline: r.contains(wi::Reads::DEADLINE),
            payload_size: r.contains(wi::Reads::PAYLOAD_SIZE),
            payload: r.contains(wi::Reads::PAYLOAD),
            outcome: r.contains(wi::Reads::OUTCOME),
        },
    }
}

/// A plugin reading payloads loads only where the manifest entry grants them.
pub(crate) fn check_grant(d: &InterceptDeclaration, granted: bool) -> Result<(), String> {
    if d.reads.payload && !granted {
        return Err(
            "declares that it reads `payload`, which its manifest entry does not grant: set \
             `grant-payload = true` in its [plugins.<name>] entry to allow it"
                .into(),
        );
    }
    Ok(())
}

/// Checks an answer against the contract; a refusal comes back with its class in the
/// kernel's spelling and its message cut to [`MAX_MESSAGE`].
pub(crate) fn check_verdict(
    point: InterceptPoint,
    v: wi::Verdict,
) -> Result<InterceptVerdict, String> {
    match v {
        wi::Verdict::Pass => Ok(InterceptVerdict::Pass),
        wi::Verdict::SetTags(_) if !point.is_before() => Err(format!(
            "set-tags at {}: tags can change only before the call",
            point.name()
        )),
        wi::Verdict::SetTags(tags) => {
            check_tags(&tags)?;
            Ok(InterceptVerdict::SetTags(tags))
        }
        wi::Verdict::Refuse(r) => {
            let class = refusal_class(&r.class).ok_or_else(|| {
                format!(
                    "refused with class `{}`, which is not one of {}",
                    r.class,
                    REFUSAL_CLASSES.join(", ")
                )
            })?;
            let mut message = r.message;
            if message.len() > MAX_MESSAGE {
                let mut cut = MAX_MESSAGE;
                while !message.is_char_boundary(cut) {
                    cut -= 1;
                }
                message.truncate(cut);
            }
            Ok(InterceptVerdict::Refuse(Refusal {
                class: class.to_string(),
                message,
            }))
        }
    }
}

fn check_tags(tags: &[(String, String)]) -> Result<(), String> {
    if tags.len() > MAX_TAGS {
        return Err(format!("{} tags set (at most {MAX_TAGS})", tags.len()));
    }
    for (i, (k, v)) in tags.iter().enumerate() {
        if k.is_empty() {
            return Err("a tag with an empty key".into());
        }
        if k.len() > MAX_TAG_KEY || v.len() > MAX_TAG_VALUE {
            return Err(format!(
                "tag `{}` is too long (keys up to {MAX_TAG_KEY} bytes, values up to {MAX_TAG_VALUE})",
                k.chars().take(32).collect::<String>()
            ));
        }
        if tags[..i].iter().any(|(seen, _)| seen == k) {
            return Err(format!("tag `{k}` set twice"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(n: usize) -> Vec<(String, String)> {
        (0..n).map(|i| (format!("k{i}"), "v".into())).collect()
    }

    #[test]
    fn set_tags_only_before_and_bounded() {
        let before = InterceptPoint::ClientBefore;
        assert!(check_verdict(before, wi::Verdict::SetTags(tags(3))).is_ok());
        let after = check_verdict(InterceptPoint::ServerAfter, wi::Verdict::SetTags(tags(1)));
        assert!(after.unwrap_err().contains("server-after"));
        let many = check_verdict(before, wi::Verdict::SetTags(tags(MAX_TAGS + 1)));
        assert!(many.unwrap_err().contains("at most"));
        let empty = wi::Verdict::SetTags(vec![(String::new(), "v".into())]);
        assert!(check_verdict(before, empty)
            .unwrap_err()
            .contains("empty key"));
        let long = wi::Verdict::SetTags(vec![("k".repeat(MAX_TAG_KEY + 1), "v".into())]);
        assert!(check_verdict(before, long)
            .unwrap_err()
            .contains("too long"));
        let twice = wi::Verdict::SetTags(vec![("k".into(), "1".into()), ("k".into(), "2".into())]);
        assert!(check_verdict(before, twice).unwrap_err().contains("twice"));
    }

    #[test]
    fn refusals_name_a_class_the_plugin_may_claim() {
        let refuse = |class: &str, message: String| {
            check_verdict(
                InterceptPoint::ServerBefore,
                wi::Verdict::Refuse(wi::Refusal {
                    class: class.into(),
                    message,
                }),
            )
        };
        assert_eq!(
            refuse("bad-request", "no".into()).unwrap(),
            InterceptVerdict::Refuse(Refusal {
                class: "bad_request".into(),
                message: "no".into()
            })
        );
        assert!(refuse("deadline-exceeded", "x".into())
            .unwrap_err()
            .contains("not one of"));
        assert!(refuse("teapot", "x".into()).is_err());
        let Ok(InterceptVerdict::Refuse(r)) = refuse("forbidden", "é".repeat(MAX_MESSAGE)) else {
            panic!("a long message is cut, not refused");
        };
        assert!(r.message.len() <= MAX_MESSAGE && !r.message.is_empty());
    }

    #[test]
    fn a_payload_reader_needs_the_grant() {
        let d = InterceptDeclaration {
            points: vec![InterceptPoint::ServerBefore],
            reads: InterceptReads {
                payload: true,
                ..InterceptReads::default()
            },
        };
        assert!(check_grant(&d, false)
            .unwrap_err()
            .contains("grant-payload"));
        assert!(check_grant(&d, true).is_ok());
    }
}
