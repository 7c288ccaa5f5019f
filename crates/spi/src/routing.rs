//! The router kind's vocabulary (`interface routing` in `sdk/wit/kinds.wit`): what a
//! router reads of a request, and the request as it sees it.

/// Which request tags a router reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum TagReads {
    /// None: the request's tags stay empty.
    #[default]
    None,
    /// Only these keys.
    Keys(Vec<String>),
    /// Every tag.
    All,
}

impl TagReads {
    /// Whether tag `key` is read.
    pub fn reads(&self, key: &str) -> bool {
        match self {
            TagReads::None => false,
            TagReads::Keys(keys) => keys.iter().any(|k| k == key),
            TagReads::All => true,
        }
    }

    /// The tags of both (for a slot of several routers).
    pub fn union(&self, other: &TagReads) -> TagReads {
        match (self, other) {
            (TagReads::All, _) | (_, TagReads::All) => TagReads::All,
            (TagReads::None, x) | (x, TagReads::None) => x.clone(),
            (TagReads::Keys(a), TagReads::Keys(b)) => {
                let mut keys = a.clone();
                keys.extend(b.iter().filter(|k| !a.contains(k)).cloned());
                TagReads::Keys(keys)
            }
        }
    }
}

/// The parts of a request a router reads, declared once after `init`. The kernel fills
/// only these and memoises each answer per distinct value of exactly these parts, so a
/// router that reads less is asked less (declaring everything defeats the memo: every
/// distinct field value is a new shape).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RouteReads {
    /// The tags it reads.
    pub tags: TagReads,
    /// The calling application's name.
    pub consumer_app: bool,
    /// The caller's IP address.
    pub caller_address: bool,
    /// The method's name.
    pub method: bool,
    /// Request fields by dotted path (`user.tier`; an array index is a number).
    pub fields: Vec<String>,
}

impl RouteReads {
    /// What two routers read together (the key of a slot's memo).
    pub fn union(&self, other: &RouteReads) -> RouteReads {
        let mut fields = self.fields.clone();
        fields.extend(
            other
                .fields
                .iter()
                .filter(|f| !self.fields.contains(f))
                .cloned(),
        );
        RouteReads {
            tags: self.tags.union(&other.tags),
            consumer_app: self.consumer_app || other.consumer_app,
            caller_address: self.caller_address || other.caller_address,
            method: self.method || other.method,
            fields,
        }
    }

    /// Whether `request` holds nothing this declaration does not read (so narrowing it
    /// would change nothing, and can be skipped).
    pub fn keeps(&self, request: &RouteRequest) -> bool {
        (self.method || request.method.is_empty())
            && (self.consumer_app || request.consumer_app.is_empty())
            && (self.caller_address || request.caller_address.is_empty())
            && request.tags.iter().all(|(k, _)| self.tags.reads(k))
            && request.fields.iter().all(|(p, _)| self.fields.contains(p))
    }

    /// `request` with only the parts this declaration reads (the service stays).
    pub fn narrow(&self, request: &RouteRequest) -> RouteRequest {
        RouteRequest {
            service: request.service.clone(),
            method: if self.method {
                request.method.clone()
            } else {
                String::new()
            },
            tags: request
                .tags
                .iter()
                .filter(|(k, _)| self.tags.reads(k))
                .cloned()
                .collect(),
            consumer_app: if self.consumer_app {
                request.consumer_app.clone()
            } else {
                String::new()
            },
            caller_address: if self.caller_address {
                request.caller_address.clone()
            } else {
                String::new()
            },
            fields: request
                .fields
                .iter()
                .filter(|(path, _)| self.fields.contains(path))
                .cloned()
                .collect(),
        }
    }
}

/// The routing-relevant attributes of a request; parts the router did not declare are
/// empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RouteRequest {
    /// Service name.
    pub service: String,
    /// Method name.
    pub method: String,
    /// Request tags (the declared keys only).
    pub tags: Vec<(String, String)>,
    /// Calling application ("" if unknown).
    pub consumer_app: String,
    /// The caller's IP address as the provider would see it ("" if not declared).
    pub caller_address: String,
    /// The declared fields present with a scalar value, as text.
    pub fields: Vec<(String, String)>,
}

impl RouteRequest {
    /// The value of request tag `key`, if present.
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of declared field `path`, if the request has it.
    pub fn field(&self, path: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_narrows_a_request_to_what_it_reads() {
        let full = RouteRequest {
            service: "s".into(),
            method: "get".into(),
            tags: vec![
                ("lane".into(), "canary".into()),
                ("zone".into(), "eu".into()),
            ],
            consumer_app: "web".into(),
            caller_address: "10.0.0.1".into(),
            fields: vec![("user.tier".into(), "gold".into())],
        };
        let reads = RouteReads {
            tags: TagReads::Keys(vec!["zone".into()]),
            caller_address: true,
            ..RouteReads::default()
        };
        let narrow = reads.narrow(&full);
        assert!(!reads.keeps(&full) && reads.keeps(&narrow));
        assert_eq!(narrow.service, "s");
        assert_eq!(narrow.method, "");
        assert_eq!(narrow.tags, vec![("zone".to_string(), "eu".to_string())]);
        assert_eq!(narrow.consumer_app, "");
        assert_eq!(narrow.caller_address, "10.0.0.1");
        assert!(narrow.fields.is_empty());
        assert_eq!(full.field("user.tier"), Some("gold"));
    }

    #[test]
    fn unions_read_what_either_reads() {
        let a = RouteReads {
            tags: TagReads::Keys(vec!["lane".into()]),
            fields: vec!["a".into()],
            ..RouteReads::default()
        };
        let b = RouteReads {
            tags: TagReads::Keys(vec!["zone".into(), "lane".into()]),
            method: true,
            fields: vec!["b".into(), "a".into()],
            ..RouteReads::default()
        };
        let u = a.union(&b);
        assert_eq!(u.tags, TagReads::Keys(vec!["lane".into(), "zone".into()]));
        assert!(u.method && !u.consumer_app);
        assert_eq!(u.fields, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(a.tags.union(&TagReads::All), TagReads::All);
        assert_eq!(TagReads::None.union(&a.tags), a.tags);
    }
}
