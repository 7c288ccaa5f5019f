//! The admin endpoint's one listener, two protocols: every accepted connection's first
//! byte says which. An Axle frame starts with its magic (`0xA5`, `docs/wire.md`), which no
//! HTTP request can (they start with an ASCII method: `GET `, `POST `): frame connections
//! are handed to the admin's frame server, the rest are served HTTP/1.1 here. Reading the
//! byte is a peek: whichever side serves the connection reads it from the start.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};

use crate::http::{serve_connection, HttpAdmin};

/// A peer that sends nothing for this long is handed to the frame server, whose idle
/// and frame timeouts then apply (Axle callers speak first, so it only waits on a silent
/// client).
const SNIFF_TIMEOUT: Duration = Duration::from_secs(5);

/// HTTP connections served at once (scrapers and operators: a handful); past it a new
/// one is closed at once.
const MAX_HTTP_CONNECTIONS: usize = 64;

/// Which protocol a connection speaks.
#[derive(Debug, PartialEq, Eq)]
enum Protocol {
    Frames,
    Http,
    /// Closed (or broken) before its first byte.
    Gone,
}

/// What the first byte of a connection says (`None`: it closed before sending one).
fn protocol_of(first: Option<u8>) -> Protocol {
    match first {
        None => Protocol::Gone,
        Some(b) if b == axle_wire::MAGIC[0] => Protocol::Frames,
        Some(_) => Protocol::Http,
    }
}

async fn sniff(stream: &TcpStream) -> Protocol {
    let mut first = [0u8; 1];
    match tokio::time::timeout(SNIFF_TIMEOUT, stream.peek(&mut first)).await {
        Err(_) => Protocol::Frames,
        Ok(Ok(0)) | Ok(Err(_)) => protocol_of(None),
        Ok(Ok(_)) => protocol_of(Some(first[0])),
    }
}

/// Accepts on `listener` until dropped (aborted): frame connections go to `frames`,
/// HTTP ones to `http`.
pub async fn accept(
    listener: TcpListener,
    frames: mpsc::Sender<(TcpStream, SocketAddr)>,
    http: Arc<HttpAdmin>,
) {
    let slots = Arc::new(Semaphore::new(MAX_HTTP_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors and the like: what is open keeps being served.
                tracing::warn!("admin endpoint: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (frames, http, slots) = (frames.clone(), http.clone(), slots.clone());
        tokio::spawn(async move {
            match sniff(&stream).await {
                Protocol::Frames => {
                    let _ = frames.send((stream, peer)).await;
                }
                Protocol::Http => {
                    let Ok(_slot) = slots.try_acquire_owned() else {
                        tracing::warn!(%peer, "admin endpoint: too many HTTP connections, closing one");
                        return;
                    };
                    serve_connection(stream, http).await;
                }
                Protocol::Gone => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_byte_tells_frames_from_http() {
        assert_eq!(protocol_of(Some(0xA5)), Protocol::Frames);
        for b in b"GPHDOC" {
            assert_eq!(protocol_of(Some(*b)), Protocol::Http);
        }
        assert_eq!(
            protocol_of(Some(0x16)),
            Protocol::Http,
            "TLS gets HTTP's 400"
        );
        assert_eq!(protocol_of(None), Protocol::Gone);
    }
}
