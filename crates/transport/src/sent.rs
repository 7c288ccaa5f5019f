//! A call whose request is queued, waiting for its answer: what it holds while it waits
//! and what it does if it stops waiting.
//!
//! It holds its answer's slot (`answer.rs`) and the serial number of its connection, and
//! nothing else of the connection. A call that held the connection's `Arc` while it waited
//! wrote that count twice, a line every core's calls share (`docs/performance.md`, "A call
//! holds its answer, not its connection"). Whoever sent it says how to find the connection
//! again if the call is dropped before its answer: the connection itself
//! ([`crate::connection::Connection::call`]), or the endpoint's link, which keeps every
//! connection that may still answer ([`crate::endpoint::EndpointLink::call`]).
//!
//! The wait is a future of its own rather than an `async` block: a caller's futures nest
//! it and are moved by copying, and a block would keep what it was given beside what it
//! moved out of it (`docs/performance.md`, "The size of a call's future").

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use futures::future::BoxFuture;

use crate::answer::Answer;
use crate::TransportError;
use axle_wire::Frame;

/// A request queued for the writer, and where its answer will arrive.
pub(crate) struct Sent {
    id: u64,
    /// The serial number of the connection it was sent on.
    pub(crate) conn: u64,
    answer: Answer<'static>,
    /// The send still waiting for room when the writer's queue was full (boxed, with its
    /// own handle on the queue: only then is there one).
    room: Option<BoxFuture<'static, Result<(), ()>>>,
}

impl Sent {
    pub(crate) fn new(
        id: u64,
        conn: u64,
        answer: Answer<'static>,
        room: Option<BoxFuture<'static, Result<(), ()>>>,
    ) -> Self {
        Sent {
            id,
            conn,
            answer,
            room,
        }
    }

    /// Waits for the answer, or for the timeout the connection's timer delivers at the
    /// deadline (having taken the call out of its table and cancelled it at the peer).
    /// Dropped before the answer came, polled or not, it calls `abandon` with the call's
    /// id, to forget the call and tell the peer to cancel it.
    ///
    /// `addr` names the endpoint in errors, and is read only for one: in a profile of the
    /// `axle` row, reading it on every call waited for its line, which the endpoint's
    /// other fields share.
    pub(crate) fn answer<'a, A, F>(self, addr: &'a A, abandon: F) -> Answering<'a, A, F>
    where
        A: AsRef<str> + ?Sized,
        F: FnOnce(u64) + Unpin,
    {
        Answering {
            answer: self.answer,
            room: self.room,
            abandon: Abandon::new(self.id, abandon),
            addr,
        }
    }
}

/// A sent call's wait for its answer ([`Sent::answer`]).
pub(crate) struct Answering<'a, A: ?Sized, F: FnOnce(u64)> {
    answer: Answer<'static>,
    room: Option<BoxFuture<'static, Result<(), ()>>>,
    abandon: Abandon<F>,
    addr: &'a A,
}

impl<A, F> Future for Answering<'_, A, F>
where
    A: AsRef<str> + ?Sized,
    F: FnOnce(u64) + Unpin,
{
    type Output = Result<Frame, TransportError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Some(room) = &mut this.room {
            let queued = ready!(room.as_mut().poll(cx));
            this.room = None;
            if queued.is_err() {
                // The queue closed before there was room: the connection is going, and
                // the request was not sent.
                this.abandon.now();
                return Poll::Ready(Err(TransportError::Draining {
                    addr: this.addr.as_ref().to_string(),
                }));
            }
        }
        let answer = ready!(Pin::new(&mut this.answer).poll(cx));
        this.abandon.disarm();
        // The sender was dropped without an answer: the connection failed.
        Poll::Ready(answer.unwrap_or_else(|_| Err(lost(this.addr.as_ref()))))
    }
}

/// The error of a connection that went away.
pub(crate) fn lost(addr: &str) -> TransportError {
    TransportError::Reset {
        addr: addr.to_string(),
        reason: "connection closed".into(),
    }
}

/// Calls `then` with the call's id when dropped armed: the call stopped waiting before
/// its answer came.
pub(crate) struct Abandon<F: FnOnce(u64)> {
    id: u64,
    then: Option<F>,
}

impl<F: FnOnce(u64)> Abandon<F> {
    pub(crate) fn new(id: u64, then: F) -> Self {
        Abandon {
            id,
            then: Some(then),
        }
    }

    /// The call ended with its answer: nothing to abandon.
    fn disarm(&mut self) {
        self.then = None;
    }

    /// Abandons the call now rather than when dropped.
    fn now(&mut self) {
        if let Some(then) = self.then.take() {
            then(self.id);
        }
    }
}

impl<F: FnOnce(u64)> Drop for Abandon<F> {
    fn drop(&mut self) {
        self.now();
    }
}

/// A call that was refused before anything was sent: its error, as the future a sent
/// call's wait would have been.
pub(crate) struct NotSent(Option<TransportError>);

impl From<TransportError> for NotSent {
    fn from(e: TransportError) -> Self {
        NotSent(Some(e))
    }
}

impl Future for NotSent {
    type Output = Result<Frame, TransportError>;

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        // Polled again after it ended (a caller's mistake): an error, not a panic.
        let e = self.0.take().unwrap_or_else(|| TransportError::Reset {
            addr: String::new(),
            reason: "a refused call polled after it ended".into(),
        });
        Poll::Ready(Err(e))
    }
}
