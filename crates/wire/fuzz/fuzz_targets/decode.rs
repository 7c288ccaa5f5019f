//! Feeds arbitrary bytes to the frame decoder, in arbitrary read sizes: it must return
//! frames, "need more", or an error — never panic, never reserve beyond one max frame.
//!
//! Run: `cargo +nightly fuzz run decode fuzz/corpus/decode` (from `crates/wire`).

#![no_main]

use axle_wire::{FrameCodec, Limits};
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, data)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk).max(1);
    let limits = Limits {
        max_frame: 1 << 16,
        max_metadata: 1 << 12,
        ..Limits::default()
    };
    let mut codec = FrameCodec::new(limits);
    let mut buf = BytesMut::new();
    for piece in data.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(_) => return,
            }
        }
        assert!(buf.capacity() <= 2 * limits.max_frame + 4096);
    }
});
