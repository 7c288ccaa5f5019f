//! The writing half of a connection: a task that takes frames from a channel, encodes a
//! batch of them into one buffer and writes it with one syscall. Callers never touch the
//! socket, so a slow reader on the other side blocks only the channel, never a caller's
//! lock.

use bytes::BytesMut;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use axle_wire::{codec_encode, Frame, Limits, WireError};

/// Frames written per syscall at most (and bytes, roughly).
const BATCH_FRAMES: usize = 64;
const BATCH_BYTES: usize = 256 << 10;

/// Writes frames from `rx` until the channel closes or the socket fails. Returns why it
/// stopped (for the log). A frame that cannot be encoded (over the size limit) is handed
/// to `unencodable`, which may return a frame to send in its place (the provider answers
/// an error instead of a too-large response; the caller fails the waiting call).
pub async fn run<W: AsyncWrite + Unpin>(
    mut socket: W,
    mut rx: mpsc::Receiver<Frame>,
    limits: Limits,
    mut unencodable: impl FnMut(Frame, WireError) -> Option<Frame>,
) -> String {
    let mut buf = BytesMut::with_capacity(64 << 10);
    while let Some(first) = rx.recv().await {
        buf.clear();
        let mut n = encode_batch(first, &mut rx, &limits, &mut buf, &mut unencodable);
        // Under load (more than one frame was waiting), let the other tasks run once and
        // take what they queued too: fewer, fuller writes mean fewer syscalls per frame.
        if n > 1 && n < BATCH_FRAMES {
            tokio::task::yield_now().await;
            if let Ok(next) = rx.try_recv() {
                n += encode_batch(next, &mut rx, &limits, &mut buf, &mut unencodable);
            }
        }
        let _ = n;
        // Flushed every batch: over TLS, written bytes wait in the session's buffer until
        // a flush (over plain TCP it costs nothing).
        if let Err(e) = socket.write_all(&buf).await {
            return format!("write failed: {e}");
        }
        if let Err(e) = socket.flush().await {
            return format!("write failed: {e}");
        }
    }
    let _ = socket.shutdown().await;
    "closed".to_string()
}

/// Encodes `first` and whatever else is queued, up to the batch limits. Returns how many
/// frames it took.
fn encode_batch(
    first: Frame,
    rx: &mut mpsc::Receiver<Frame>,
    limits: &Limits,
    buf: &mut BytesMut,
    unencodable: &mut impl FnMut(Frame, WireError) -> Option<Frame>,
) -> usize {
    let mut frame = Some(first);
    let mut n = 0;
    while let Some(f) = frame.take() {
        if let Err(e) = codec_encode(limits, &f, buf) {
            if let Some(instead) = unencodable(f, e) {
                let _ = codec_encode(limits, &instead, buf);
            }
        }
        n += 1;
        if n < BATCH_FRAMES && buf.len() < BATCH_BYTES {
            frame = rx.try_recv().ok();
        }
    }
    n
}
