//! Rules at run time: one document per service at `/axle/<namespace>/rules/<service>` in
//! etcd, changed without restarting anyone. Versions are etcd's own: a rule's version is
//! the key's mod revision, and its history is read back through the revisions etcd keeps
//! (until it compacts them), so there is no second store to keep in step.
//!
//! This module only stores and follows the text; what a rule may say, and checking it
//! before use, belongs to the manifest (`axle_manifest::rules`), since a rule is a piece
//! of manifest. Only an etcd registry holds rules: the static and file registries refuse.

// Without etcd no `Rules` exists, and the bodies end in `match self.never {}`.
#![cfg_attr(not(feature = "etcd"), allow(unused_variables))]

use tokio::sync::watch;

use crate::{check_name, BackendOptions, DiscoveryError, RegistryUrl};

/// One version of a service's rule.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RuleVersion {
    /// etcd's mod revision of the key: the version.
    pub revision: i64,
    /// The document; empty when the rule was deleted at this revision.
    pub text: String,
}

/// The largest rule document stored or read, in bytes.
pub const MAX_RULE_BYTES: usize = 64 * 1024;

/// The key of `service`'s rule in `namespace`.
pub fn key(namespace: &str, service: &str) -> String {
    format!("/axle/{namespace}/rules/{service}")
}

/// The rules of one namespace in an etcd registry.
pub struct Rules {
    namespace: String,
    #[cfg(feature = "etcd")]
    pub(crate) etcd: crate::etcd::Etcd,
    /// Without etcd no `Rules` can exist.
    #[cfg(not(feature = "etcd"))]
    never: std::convert::Infallible,
}

impl Rules {
    /// The rules of `namespace` at `url`; refused unless `url` is an etcd registry.
    pub fn open(
        url: &RegistryUrl,
        options: BackendOptions,
        namespace: &str,
    ) -> Result<Rules, DiscoveryError> {
        check_name("namespace", namespace)?;
        match url {
            #[cfg(feature = "etcd")]
            RegistryUrl::Etcd(hosts) => Ok(Rules {
                namespace: namespace.to_string(),
                etcd: crate::etcd::Etcd::new(hosts.clone(), options)?,
            }),
            #[cfg(not(feature = "etcd"))]
            RegistryUrl::Etcd(hosts) => {
                let _ = options;
                Err(DiscoveryError::BadUrl {
                    url: format!("etcd://{}", hosts.join(",")),
                    reason:
                        "this axle was built without etcd support (build with `--features etcd`)"
                            .into(),
                })
            }
            other => Err(DiscoveryError::BadUrl {
                url: format!("{other:?}"),
                reason: "rules live in etcd: use --registry etcd://HOST:PORT".into(),
            }),
        }
    }

    /// The key of `service`'s rule.
    pub fn key(&self, service: &str) -> Result<String, DiscoveryError> {
        check_name("service", service)?;
        Ok(key(&self.namespace, service))
    }

    /// The rule in force now, if any.
    pub async fn get(&self, service: &str) -> Result<Option<RuleVersion>, DiscoveryError> {
        let key = self.key(service)?;
        #[cfg(feature = "etcd")]
        return crate::etcd_rules::get(&self.etcd, &key, 0).await;
        #[cfg(not(feature = "etcd"))]
        match self.never {}
    }

    /// The rule as it was at `revision` (what `rollback` puts back).
    pub async fn at(
        &self,
        service: &str,
        revision: i64,
    ) -> Result<Option<RuleVersion>, DiscoveryError> {
        let key = self.key(service)?;
        #[cfg(feature = "etcd")]
        return crate::etcd_rules::get(&self.etcd, &key, revision).await;
        #[cfg(not(feature = "etcd"))]
        match self.never {}
    }

    /// Stores `text` as `service`'s rule; its revision. The caller checks it first.
    pub async fn put(&self, service: &str, text: &str) -> Result<i64, DiscoveryError> {
        let key = self.key(service)?;
        #[cfg(feature = "etcd")]
        return crate::etcd_rules::put(&self.etcd, &key, text).await;
        #[cfg(not(feature = "etcd"))]
        match self.never {}
    }

    /// Up to `most` versions, newest first, as far back as etcd still keeps them.
    pub async fn history(
        &self,
        service: &str,
        most: usize,
    ) -> Result<Vec<RuleVersion>, DiscoveryError> {
        let key = self.key(service)?;
        #[cfg(feature = "etcd")]
        return crate::etcd_rules::history(&self.etcd, &key, most).await;
        #[cfg(not(feature = "etcd"))]
        match self.never {}
    }

    /// Follows `service`'s rule: the receiver holds the latest version (`None`: no rule,
    /// or not read yet) for as long as it lives. Must run inside a tokio runtime.
    pub fn follow(
        &self,
        service: &str,
    ) -> Result<watch::Receiver<Option<RuleVersion>>, DiscoveryError> {
        let key = self.key(service)?;
        #[cfg(feature = "etcd")]
        return Ok(crate::etcd_rules::follow(&self.etcd, key));
        #[cfg(not(feature = "etcd"))]
        match self.never {}
    }
}
