//! A closed-loop load on one method (`workers` tasks calling in a loop), and waiting for a
//! health event: what the health tests and the simulator's faithfulness tests both drive
//! real providers with.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axle::client::{CallOptions, Client};
use axle::health::{HealthChange, HealthEvent};
use bytes::Bytes;
use tokio::sync::broadcast::{error::RecvError, Receiver};

/// Calls made and failed by a [`Load`].
#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    failed: AtomicU64,
}

/// `workers` tasks calling `service/method` with a small raw body in a loop until stopped
/// (or `max` calls in all). The first three failures are printed.
pub struct Load {
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Starts the workers on the current Tokio runtime.
    pub fn start(client: &Client, service: &str, workers: usize, max: u64) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let tasks = (0..workers)
            .map(|_| {
                let (client, stop, counts) = (client.clone(), stop.clone(), counts.clone());
                let service = service.to_string();
                tokio::spawn(async move {
                    while !stop.load(Relaxed)
                        && counts.ok.load(Relaxed) + counts.failed.load(Relaxed) < max
                    {
                        let body = Bytes::from_static(b"ping");
                        let r = client
                            .call_raw(&service, "x", body, &CallOptions::default())
                            .await;
                        match r {
                            Ok(_) => counts.ok.fetch_add(1, Relaxed),
                            Err(e) => {
                                if counts.failed.fetch_add(1, Relaxed) < 3 {
                                    eprintln!("call failed: {e}");
                                }
                                0
                            }
                        };
                    }
                })
            })
            .collect();
        Load {
            stop,
            counts,
            tasks,
        }
    }

    /// Calls made so far, answered or failed.
    pub fn total(&self) -> u64 {
        self.counts.ok.load(Relaxed) + self.counts.failed.load(Relaxed)
    }

    /// Calls failed so far.
    pub fn failed(&self) -> u64 {
        self.counts.failed.load(Relaxed)
    }

    /// Waits until `n` calls were made in all (panics after 60 s: a stalled load is a
    /// failure, not a hang).
    pub async fn wait_until(&self, n: u64) {
        let until = Instant::now() + Duration::from_secs(60);
        while self.total() < n {
            assert!(
                Instant::now() < until,
                "the load stalled at {} calls",
                self.total()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops the workers and waits for them: (answered, failed).
    pub async fn finish(self) -> (u64, u64) {
        self.stop.store(true, Relaxed);
        for t in self.tasks {
            let _ = t.await;
        }
        (
            self.counts.ok.load(Relaxed),
            self.counts.failed.load(Relaxed),
        )
    }
}

/// Waits for `change` of the endpoint at `addr`; when it came, or `None` after `limit`.
pub async fn event(
    rx: &mut Receiver<HealthEvent>,
    addr: &str,
    change: HealthChange,
    limit: Duration,
) -> Option<Instant> {
    let until = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(until, rx.recv()).await {
            Ok(Ok(e)) if e.address == addr && e.change == change => return Some(Instant::now()),
            Ok(Ok(_)) | Ok(Err(RecvError::Lagged(_))) => {}
            Ok(Err(_)) | Err(_) => return None,
        }
    }
}
