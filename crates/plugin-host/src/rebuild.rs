//! Instances are replaced off the request path. A call that finds its instance dead (it
//! trapped, timed out, ran out of memory) gets the kind's safe default at once, and the
//! replacement — instantiation, `init`, and replaying what the kernel had pushed to the
//! old one — runs here, on two background threads shared by every plugin, under the
//! start-up deadline. The next call after it is done finds a live instance.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

/// Threads that replace instances (two: one slow `init` does not hold up the others).
const THREADS: usize = 2;

fn queue() -> Option<&'static Mutex<Sender<Job>>> {
    static QUEUE: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let rx = std::sync::Arc::new(Mutex::new(rx));
            let mut started = 0;
            for i in 0..THREADS {
                let rx = rx.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("axle-rebuild-{i}"))
                    .spawn(move || work(&rx));
                match spawned {
                    Ok(_) => started += 1,
                    Err(e) => tracing::error!("cannot start a plugin rebuild thread: {e}"),
                }
            }
            (started > 0).then(|| Mutex::new(tx))
        })
        .as_ref()
}

fn work(rx: &Mutex<Receiver<Job>>) {
    loop {
        let job = match rx.lock().unwrap_or_else(|e| e.into_inner()).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        job();
    }
}

/// Runs `job` on a rebuild thread (inline if none could be started).
pub fn spawn(job: impl FnOnce() + Send + 'static) {
    let job: Job = Box::new(job);
    let job = match queue() {
        Some(q) => match q.lock().unwrap_or_else(|e| e.into_inner()).send(job) {
            Ok(()) => return,
            Err(mpsc::SendError(job)) => job,
        },
        None => job,
    };
    job();
}
