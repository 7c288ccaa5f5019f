//! What a kernel knows of the run-time rules it follows (`axle rules`): per service, the
//! revision in force and the last one refused, so `axle stats` shows a bad rule that
//! clients (or a provider, for its limits) are ignoring instead of leaving it to the logs.
//! The book only keeps this record; following etcd and checking each version is the
//! caller's (the CLI's).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// One service's rule as this client applies it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleStatus {
    pub service: String,
    /// The revision of the rule in force; none: no rule (the manifest alone).
    pub revision: Option<i64>,
    /// The newest version refused, if it is newer than the one in force.
    pub refused: Option<RefusedRule>,
}

/// A version that failed its check; the rule before it stays in force.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedRule {
    pub revision: i64,
    pub error: String,
}

/// The statuses, shared by a client's clones (or by a provider and its admin endpoint).
#[derive(Clone, Default)]
pub struct RuleBook(Arc<Mutex<BTreeMap<String, RuleStatus>>>);

impl RuleBook {
    /// Records how `status.service`'s rule stands now.
    pub fn set(&self, status: RuleStatus) {
        let mut book = self.0.lock().unwrap_or_else(|e| e.into_inner());
        book.insert(status.service.clone(), status);
    }

    /// `service`'s rule as recorded (a service never recorded: no rule in force).
    pub fn get(&self, service: &str) -> RuleStatus {
        let book = self.0.lock().unwrap_or_else(|e| e.into_inner());
        book.get(service).cloned().unwrap_or_else(|| RuleStatus {
            service: service.to_string(),
            ..RuleStatus::default()
        })
    }

    /// Every service's status, by name.
    pub fn all(&self) -> Vec<RuleStatus> {
        let book = self.0.lock().unwrap_or_else(|e| e.into_inner());
        book.values().cloned().collect()
    }
}
