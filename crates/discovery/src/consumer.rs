//! Consumers: a client that follows a service through a registry says so, so operators
//! can see who calls a service before they change or retire it.
//!
//! On etcd a consumer is the key `/axle/<namespace>/consumers/<service>/<group>/<id>`
//! beside the providers' prefix, its value a [`Consumer`] as JSON, under a lease like a
//! provider's registration: a consumer killed without deregistering disappears when the
//! lease runs out. What a listing reads back is checked like a provider entry
//! ([`Consumer::admit`]): whoever can write under `/axle/` must not be able to make
//! `axle consumers` print control characters or huge values.

use serde::{Deserialize, Serialize};

use crate::admit::shown;
use crate::{check_name, unix_ms, ServiceKey};

/// One consumer of a service, as registered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consumer {
    /// Unique per process: `<address>-<pid>-<start ms>` with the address's `:`/`[]`
    /// replaced, so it is one key segment.
    pub id: String,
    /// The consumer's application (`--app`, else `axle`).
    pub application: String,
    /// The IP address the consumer reaches the registry from (no port: a consumer does
    /// not listen).
    pub address: String,
    /// The consumer's process id, for operators.
    pub pid: u32,
    /// When it started following (ms since the Unix epoch).
    pub start_ms: u64,
}

impl Consumer {
    /// This process as a consumer from `address` (an IP) for `application`.
    pub fn this_process(application: &str, address: std::net::IpAddr) -> Consumer {
        let start_ms = unix_ms();
        let pid = std::process::id();
        let host: String = address
            .to_string()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '.' })
            .collect();
        Consumer {
            id: format!("{host}-{pid}-{start_ms}"),
            application: application.to_string(),
            address: address.to_string(),
            pid,
            start_ms,
        }
    }

    /// Checks a consumer before it is registered or shown: the id and application are
    /// names (one key segment, printable), the address an IP address.
    pub fn check(&self) -> Result<(), String> {
        // The kernel's message quotes the value whole: quote it shortened and escaped.
        let name = |what: &'static str, v: &str| {
            check_name(what, v).map_err(|_| {
                format!(
                    "the {what} `{}` is not a name (1..=128 ASCII letters, digits, `-`, `_`, `.`)",
                    shown(v)
                )
            })
        };
        name("consumer id", &self.id)?;
        name("application", &self.application)?;
        self.address
            .parse::<std::net::IpAddr>()
            .map_err(|_| format!("`{}` is not an IP address", shown(&self.address)))?;
        Ok(())
    }

    /// Parses and checks one registry entry: `name` is the last segment of its key (the
    /// id), `value` the stored bytes, at most `max_bytes` of them.
    pub fn admit(name: &str, value: &[u8], max_bytes: usize) -> Result<Consumer, String> {
        if value.len() > max_bytes {
            return Err(format!(
                "a value of {} bytes, over max-value-bytes ({max_bytes})",
                value.len()
            ));
        }
        let c: Consumer = serde_json::from_slice(value).map_err(|e| {
            let mut e = e.to_string();
            e.truncate(160);
            format!("not a consumer's JSON: {e}")
        })?;
        if c.id != name {
            return Err(format!(
                "the key names `{}` but the value's id is `{}`",
                shown(name),
                shown(&c.id)
            ));
        }
        c.check()?;
        Ok(c)
    }

    /// The value a backend stores.
    pub fn encode(&self) -> Vec<u8> {
        // A struct of strings and integers always serialises.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The consumers of one discovery key, as listed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerListing {
    pub namespace: String,
    pub service: String,
    pub group: String,
    /// The valid entries, by id.
    pub consumers: Vec<Consumer>,
    /// Entries skipped as invalid: `key: reason`.
    pub skipped: Vec<String>,
}

impl ConsumerListing {
    /// An empty listing of `key`.
    pub fn of(key: &ServiceKey) -> ConsumerListing {
        ConsumerListing {
            namespace: key.namespace.clone(),
            service: key.service.clone(),
            group: key.group.clone(),
            ..ConsumerListing::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_a_valid_entry_and_round_trips() {
        let c = Consumer::this_process("web", "::1".parse().unwrap());
        assert!(c.id.starts_with("..1-"), "{}", c.id);
        let back = Consumer::admit(&c.id, &c.encode(), 16384).expect("admitted");
        assert_eq!(back, c);
    }

    #[test]
    fn hostile_entries_are_refused_with_a_reason() {
        let good = Consumer::this_process("web", "127.0.0.1".parse().unwrap());
        let cases: Vec<(String, Vec<u8>, &str)> = vec![
            (
                good.id.clone(),
                b"{not json".to_vec(),
                "not a consumer's JSON",
            ),
            ("other".into(), good.encode(), "the key names"),
            (good.id.clone(), vec![b' '; 20000], "over max-value-bytes"),
            (
                good.id.clone(),
                Consumer {
                    application: "a\u{1b}[2J".into(),
                    ..good.clone()
                }
                .encode(),
                "application",
            ),
            (
                good.id.clone(),
                Consumer {
                    address: "evil.example:80".into(),
                    ..good.clone()
                }
                .encode(),
                "not an IP address",
            ),
        ];
        for (name, value, expected) in cases {
            let e = Consumer::admit(&name, &value, 16384).expect_err(expected);
            assert!(e.contains(expected), "{e} (expected {expected})");
        }
    }
}
