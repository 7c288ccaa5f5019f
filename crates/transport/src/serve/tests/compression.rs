//! Compression over real loopback sockets: a provider compresses answers only for a
//! caller that accepts the encoding, a caller compresses requests only after its peer said
//! it accepts it, a peer that never says so always gets plain payloads, and a compressed
//! payload past the bounds is the request's `bad_request`, never the connection's end.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::Framed;

use super::{connect, meta, serve, ServeLimits};
use crate::connection::Connection;
use crate::Keepalive;
use axle_wire::{Compression, Encoding, ErrorClass, Frame, FrameCodec, Kind, Limits};

fn lz4() -> Limits {
    Limits {
        compression: Compression::new(Some(Encoding::Lz4), 1024),
        ..Limits::default()
    }
}

/// 64 KiB that compress well; the first byte 0 (the sleeper answers at once).
fn repetitive() -> Bytes {
    let mut v: Vec<u8> = b"axle! ".iter().copied().cycle().take(64 << 10).collect();
    v[0] = 0;
    Bytes::from(v)
}

async fn raw(addr: std::net::SocketAddr) -> Framed<TcpStream, FrameCodec> {
    let stream = TcpStream::connect(addr).await.unwrap();
    Framed::new(stream, FrameCodec::new(Limits::default()))
}

async fn answer(frames: &mut Framed<TcpStream, FrameCodec>, request: Frame) -> Frame {
    frames.send(request).await.unwrap();
    frames.next().await.unwrap().unwrap()
}

#[tokio::test]
async fn a_provider_compresses_answers_only_for_a_caller_that_accepts() {
    let limits = ServeLimits {
        frame: lz4(),
        ..ServeLimits::default()
    };
    let (addr, _open, _closing) = serve(limits, Arc::default()).await;
    let mut frames = raw(addr).await;
    let body = repetitive();
    // A caller that says nothing (an old one): plain.
    let plain = answer(&mut frames, Frame::request(1, meta("m"), body.clone())).await;
    assert_eq!(plain.meta.content_encoding, None);
    assert_eq!(plain.payload, body);
    assert_eq!(
        plain.meta.accept_encoding, 1,
        "the provider says it accepts lz4"
    );
    // One that accepts lz4: compressed on the wire, the same bytes once decompressed.
    let mut request = Frame::request(2, meta("m"), body.clone());
    request.meta.accept_encoding = 1;
    let packed = answer(&mut frames, request).await;
    assert_eq!(packed.meta.content_encoding, Some(Encoding::Lz4 as u8));
    assert!(
        packed.payload.len() < body.len() / 10,
        "{}",
        packed.payload.len()
    );
    let code = packed.meta.content_encoding.unwrap();
    assert_eq!(
        axle_wire::decompress(code, &packed.payload, 1 << 20).unwrap(),
        body
    );
    // Under the threshold: plain even for a caller that accepts.
    let mut small = Frame::request(3, meta("m"), Bytes::from_static(&[0; 100]));
    small.meta.accept_encoding = 1;
    assert_eq!(answer(&mut frames, small).await.meta.content_encoding, None);
    // A pong says it too.
    let pong = answer(&mut frames, Frame::bare(Kind::Ping, 4)).await;
    assert_eq!(pong.meta.accept_encoding, 1);
}

#[tokio::test]
async fn a_bomb_is_the_requests_bad_request_and_the_connection_carries_on() {
    let limits = ServeLimits {
        frame: lz4(),
        ..ServeLimits::default()
    };
    let (addr, _open, _closing) = serve(limits, Arc::default()).await;
    let mut frames = raw(addr).await;
    // 14 bytes claiming 1 GiB decompressed.
    let mut bomb = (1u32 << 30).to_le_bytes().to_vec();
    bomb.extend_from_slice(&[0x1f, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
    let mut request = Frame::request(1, meta("m"), Bytes::from(bomb));
    request.meta.content_encoding = Some(Encoding::Lz4 as u8);
    let refused = answer(&mut frames, request).await;
    assert_eq!(refused.meta.error_class, Some(ErrorClass::BadRequest));
    let next = answer(
        &mut frames,
        Frame::request(2, meta("m"), Bytes::from_static(&[0])),
    )
    .await;
    assert_eq!(next.meta.error_class, None);
}

/// What a scripted provider saw of each request: its `content-encoding` and wire size.
type Seen = Arc<Mutex<Vec<(Option<u8>, usize)>>>;

/// A provider that echoes (decompressing what came compressed, answering plain) and says
/// it accepts lz4 only if `advertise` (an old provider says nothing).
async fn scripted(advertise: bool) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut frames = Framed::new(stream, FrameCodec::new(Limits::default()));
        while let Some(Ok(frame)) = frames.next().await {
            let mut answer = match frame.kind {
                Kind::Ping => Frame::bare(Kind::Pong, frame.id),
                Kind::Request => {
                    let (code, len) = (frame.meta.content_encoding, frame.payload.len());
                    log.lock().unwrap().push((code, len));
                    let payload = match code {
                        Some(c) => axle_wire::decompress(c, &frame.payload, 1 << 24).unwrap(),
                        None => frame.payload,
                    };
                    Frame::response(frame.id, None, payload)
                }
                _ => continue,
            };
            answer.meta.accept_encoding = u8::from(advertise);
            if frames.send(answer).await.is_err() {
                return;
            }
        }
    });
    (addr, seen)
}

async fn caller(addr: &str) -> Arc<Connection> {
    Connection::connect(addr, lz4(), Keepalive::default(), None)
        .await
        .unwrap()
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

#[tokio::test]
async fn a_caller_compresses_only_after_its_peer_said_it_accepts() {
    let body = repetitive();
    // An old provider: never told, never sent a compressed payload.
    let (addr, seen) = scripted(false).await;
    let conn = caller(&addr).await;
    for _ in 0..3 {
        let got = conn.call(0, meta("m"), body.clone(), soon()).await.unwrap();
        assert_eq!(got.payload, body);
    }
    assert_eq!(*seen.lock().unwrap(), vec![(None, body.len()); 3]);
    // A provider that accepts lz4: the first request goes before it said so, the next
    // ones go compressed.
    let (addr, seen) = scripted(true).await;
    let conn = caller(&addr).await;
    for _ in 0..2 {
        let got = conn.call(0, meta("m"), body.clone(), soon()).await.unwrap();
        assert_eq!(got.payload, body);
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], (None, body.len()));
    assert_eq!(seen[1].0, Some(Encoding::Lz4 as u8));
    assert!(seen[1].1 < body.len() / 10, "{seen:?}");
}

#[tokio::test]
async fn a_caller_without_compression_and_a_provider_with_it_interoperate() {
    let limits = ServeLimits {
        frame: lz4(),
        ..ServeLimits::default()
    };
    let (addr, _open, _closing) = serve(limits, Arc::default()).await;
    // `connect` uses the default limits: compression off, so nothing says it accepts.
    let conn = connect(addr).await;
    let body = repetitive();
    for _ in 0..2 {
        let got = conn.call(0, meta("m"), body.clone(), soon()).await.unwrap();
        assert_eq!(got.payload, body);
        assert_eq!(got.meta.content_encoding, None);
    }
}
