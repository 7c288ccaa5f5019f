//! Instances are replaced off the request path. A call that finds its instance dead (it
//! trapped, timed out, ran out of memory) gets the kind's safe default at once, and the
//! replacement — instantiation, `init`, and replaying what the kernel had pushed to the
//! old one — runs here, on two background threads shared by every plugin, under the
//! start-up deadline. The next call after it is done finds a live instance.

use std::cell::{Cell, RefCell};
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

thread_local! {
    /// How many plugin locks this thread holds ([`Held`]).
    static HELD: Cell<u32> = const { Cell::new(0) };
    /// Jobs spawned while it held one, sent when it lets go of the last.
    static WAITING: RefCell<Vec<Job>> = const { RefCell::new(Vec::new()) };
}

/// Marks a plugin's lock as held by this thread while it lives: a job spawned meanwhile
/// is sent to a rebuild thread only once the thread holds no plugin lock. Waking a
/// rebuild thread from under the lock could let it preempt the lock holder on a busy core
/// (a thread that slept is favoured when it wakes), and every other caller of the plugin
/// would then wait for the lock, its core idle, for as long as the replacement took.
pub(crate) struct Held(());

impl Held {
    pub(crate) fn enter() -> Held {
        HELD.with(|held| held.set(held.get() + 1));
        Held(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let outermost = HELD.with(|held| {
            held.set(held.get() - 1);
            held.get() == 0
        });
        if outermost && !WAITING.with(|waiting| waiting.borrow().is_empty()) {
            let jobs = WAITING.with(|waiting| std::mem::take(&mut *waiting.borrow_mut()));
            jobs.into_iter().for_each(send);
        }
    }
}

/// Runs `job` on a rebuild thread (inline if none could be started); from under a
/// plugin's lock, once the lock is released ([`Held`]).
pub fn spawn(job: impl FnOnce() + Send + 'static) {
    let job: Job = Box::new(job);
    if HELD.with(Cell::get) > 0 {
        WAITING.with(|waiting| waiting.borrow_mut().push(job));
        return;
    }
    send(job);
}

/// Runs `job` on a rebuild thread at once, even from under a plugin's lock: for a caller
/// that will wait for what it makes.
pub fn spawn_now(job: impl FnOnce() + Send + 'static) {
    send(Box::new(job));
}

fn send(job: Job) {
    let job = match queue() {
        Some(q) => match q.lock().unwrap_or_else(|e| e.into_inner()).send(job) {
            Ok(()) => return,
            Err(mpsc::SendError(job)) => job,
        },
        None => job,
    };
    job();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn job(tx: &mpsc::Sender<&'static str>, name: &'static str) -> impl FnOnce() + Send {
        let tx = tx.clone();
        move || {
            let _ = tx.send(name);
        }
    }

    #[test]
    fn a_job_spawned_under_a_lock_is_sent_when_the_last_lock_is_released() {
        let (tx, rx) = mpsc::channel();
        let outer = Held::enter();
        let inner = Held::enter();
        spawn(job(&tx, "deferred"));
        // Not queued anywhere a rebuild thread can see while a lock is held.
        assert!(WAITING.with(|w| w.borrow().len()) == 1);
        spawn_now(job(&tx, "now"));
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok("now"));
        drop(inner);
        assert!(
            WAITING.with(|w| w.borrow().len()) == 1,
            "still under the outer lock"
        );
        drop(outer);
        assert!(WAITING.with(|w| w.borrow().is_empty()));
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok("deferred"));
        // With no lock held, a job goes at once.
        spawn(job(&tx, "free"));
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok("free"));
    }
}
