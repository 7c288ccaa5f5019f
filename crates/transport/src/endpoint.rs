//! One endpoint's link: a single multiplexed connection, dialled on first use and again
//! after it breaks, with exponential backoff between failed dials so an unreachable
//! endpoint costs callers a fast error, not a connect timeout each.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;

use super::connection::Connection;
use super::{Keepalive, TransportError};
use crate::defaults::{RECONNECT_BACKOFF_MAX, RECONNECT_BACKOFF_MIN};
use crate::tls::ClientTls;
use axle_wire::Limits;

struct Backoff {
    next_attempt: Option<Instant>,
    delay: Duration,
    last_error: String,
}

/// The link to one endpoint.
pub struct EndpointLink {
    addr: String,
    limits: Limits,
    keepalive: Keepalive,
    /// Dial over TLS with this, when set.
    tls: Option<ClientTls>,
    current: ArcSwapOption<Connection>,
    /// Single-flight dialling: one caller dials, the others wait for its result.
    dial: tokio::sync::Mutex<()>,
    backoff: Mutex<Backoff>,
}

impl EndpointLink {
    pub fn new(addr: impl Into<String>, limits: Limits, keepalive: Keepalive) -> Self {
        EndpointLink {
            addr: addr.into(),
            limits,
            keepalive,
            tls: None,
            current: ArcSwapOption::empty(),
            dial: tokio::sync::Mutex::new(()),
            backoff: Mutex::new(Backoff {
                next_attempt: None,
                delay: RECONNECT_BACKOFF_MIN,
                last_error: String::new(),
            }),
        }
    }

    /// Dials over TLS with `tls` (plain TCP when `None`).
    pub fn with_tls(mut self, tls: Option<ClientTls>) -> Self {
        self.tls = tls;
        self
    }

    /// The endpoint's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The connection, if one was made and is not closed (it may be draining).
    pub fn current(&self) -> Option<Arc<Connection>> {
        self.current.load_full().filter(|c| !c.closed())
    }

    /// Whether a connection was made and has since closed.
    pub fn lost(&self) -> bool {
        self.current.load().as_ref().is_some_and(|c| c.closed())
    }

    fn live(&self) -> Option<Arc<Connection>> {
        self.current.load_full().filter(|c| c.usable())
    }

    /// A usable connection, dialling if there is none (unless backing off).
    pub async fn connection(&self) -> Result<Arc<Connection>, TransportError> {
        if let Some(c) = self.live() {
            return Ok(c);
        }
        let _dialling = self.dial.lock().await;
        if let Some(c) = self.live() {
            return Ok(c);
        }
        {
            let b = self.backoff.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(at) = b.next_attempt {
                if Instant::now() < at {
                    return Err(TransportError::Connect {
                        addr: self.addr.clone(),
                        reason: format!(
                            "{} (next attempt in {:?})",
                            b.last_error,
                            at - Instant::now()
                        ),
                    });
                }
            }
        }
        match Connection::connect(&self.addr, self.limits, self.keepalive, self.tls.as_ref()).await
        {
            Ok(c) => {
                let mut b = self.backoff.lock().unwrap_or_else(|e| e.into_inner());
                b.next_attempt = None;
                b.delay = RECONNECT_BACKOFF_MIN;
                self.current.store(Some(c.clone()));
                Ok(c)
            }
            Err(e) => {
                let mut b = self.backoff.lock().unwrap_or_else(|e| e.into_inner());
                b.next_attempt = Some(Instant::now() + b.delay);
                b.delay = (b.delay * 2).min(RECONNECT_BACKOFF_MAX);
                b.last_error = match &e {
                    TransportError::Connect { reason, .. } => reason.clone(),
                    other => other.to_string(),
                };
                Err(e)
            }
        }
    }
}
