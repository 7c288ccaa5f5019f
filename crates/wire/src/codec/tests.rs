use super::*;
use crate::{ContentType, ErrorClass};
use bytes::Bytes;
use proptest::prelude::*;

fn encode(frame: &Frame) -> BytesMut {
    let mut buf = BytesMut::new();
    FrameCodec::default()
        .encode(frame.clone(), &mut buf)
        .unwrap();
    buf
}

fn sample() -> Frame {
    Frame::request(
        7,
        Metadata {
            service: Some("echo".into()),
            method: Some("say".into()),
            deadline_us: Some(1_500_000),
            tags: vec![("lane".into(), "canary".into())],
            content_type: Some("application/json".into()),
            trace_id: Some([9; 16]),
            span_id: Some([5; 8]),
            trace_flags: 1,
            request_id: Some([3; 16]),
            ..Metadata::default()
        },
        Bytes::from_static(b"{\"x\":1}"),
    )
}

#[test]
fn decodes_from_byte_by_byte_reads() {
    let bytes = encode(&sample());
    let mut codec = FrameCodec::default();
    let mut buf = BytesMut::new();
    let mut out = None;
    for (i, b) in bytes.iter().enumerate() {
        buf.put_u8(*b);
        out = codec.decode(&mut buf).unwrap();
        if out.is_some() {
            assert_eq!(i, bytes.len() - 1, "complete only at the last byte");
        }
    }
    assert_eq!(out.unwrap(), sample());
    assert!(buf.is_empty());
}

#[test]
fn two_frames_in_one_read() {
    let mut buf = encode(&sample());
    buf.extend_from_slice(&encode(&Frame::error(
        8,
        ErrorClass::RateLimited,
        "slow down",
    )));
    let mut codec = FrameCodec::default();
    assert_eq!(codec.decode(&mut buf).unwrap().unwrap().id, 7);
    let second = codec.decode(&mut buf).unwrap().unwrap();
    assert_eq!(second.meta.error_class, Some(ErrorClass::RateLimited));
    assert_eq!(second.meta.error_code, None);
    assert!(codec.decode(&mut buf).unwrap().is_none());
}

#[test]
fn rejects_bad_magic_version_kind_and_sizes() {
    let good = encode(&sample());
    let mut codec = FrameCodec::new(Limits {
        max_frame: 64,
        max_metadata: 16,
        ..Limits::default()
    });
    let mut bad = good.clone();
    bad[0] = b'G';
    assert!(matches!(
        codec.decode(&mut bad),
        Err(WireError::BadMagic(_))
    ));
    let mut bad = good.clone();
    bad[2] = 2;
    let err = codec.decode(&mut bad).unwrap_err();
    assert!(
        err.to_string().contains("unsupported protocol version 2"),
        "{err}"
    );
    let mut bad = good.clone();
    bad[3] = 42;
    assert!(matches!(
        codec.decode(&mut bad),
        Err(WireError::UnknownKind(42))
    ));
    // The sample's metadata exceeds 16 bytes: refused from the header alone.
    let mut header_only = BytesMut::from(&good[..HEADER_LEN]);
    assert!(matches!(
        codec.decode(&mut header_only),
        Err(WireError::MetadataTooLarge { .. })
    ));
    // A header announcing 4 GiB is refused before anything is reserved.
    let mut huge = BytesMut::from(&good[..HEADER_LEN]);
    huge[14..18].copy_from_slice(&0u32.to_be_bytes());
    huge[18..22].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(
        codec.decode(&mut huge),
        Err(WireError::FrameTooLarge { .. })
    ));
    assert!(huge.capacity() < 1 << 20);
}

#[test]
fn the_sender_refuses_frames_over_its_limit_and_writes_nothing() {
    let mut codec = FrameCodec::new(Limits {
        max_frame: 100,
        max_metadata: 1000,
        ..Limits::default()
    });
    let mut buf = BytesMut::from(&b"already here"[..]);
    let big = Frame::response(1, None, Bytes::from(vec![0u8; 200]));
    assert!(matches!(
        codec.encode(big, &mut buf),
        Err(WireError::FrameTooLarge {
            size: 222,
            limit: 100
        })
    ));
    assert_eq!(&buf[..], b"already here");
}

#[test]
fn a_requests_names_are_read_in_place_and_checked() {
    let mut buf = encode(&sample());
    let range = buf.as_ptr_range();
    let frame = FrameCodec::default().decode(&mut buf).unwrap().unwrap();
    for name in [frame.meta.service.as_ref(), frame.meta.method.as_ref()] {
        let name = name.expect("named");
        assert!(
            range.contains(&name.as_ptr()),
            "{name:?} is a slice of the frame it came in, not a copy"
        );
    }
    // Still checked UTF-8: a name that is not is refused, not sliced.
    let mut bytes = encode(&sample());
    // The service's first byte (tag 1, then a two-byte length).
    bytes[HEADER_LEN + 3] = 0xff;
    assert!(matches!(
        FrameCodec::default().decode(&mut bytes),
        Err(WireError::Malformed(m)) if m.contains("not UTF-8")
    ));
}

#[test]
fn malformed_metadata_is_an_error() {
    let mut bytes = encode(&sample());
    // Make the first field claim more bytes than the metadata holds.
    bytes[HEADER_LEN + 1] = 0xff;
    assert!(matches!(
        FrameCodec::default().decode(&mut bytes),
        Err(WireError::Malformed(_))
    ));
}

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 _./-]{0,24}"
}

fn metadata() -> impl Strategy<Value = Metadata> {
    (
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(any::<u64>()),
        proptest::option::of(text()),
        proptest::collection::vec(("[a-z]{1,8}", text()), 0..4),
        proptest::option::of(text()),
        proptest::option::of(any::<[u8; 16]>()),
        proptest::option::of(proptest::sample::select(ErrorClass::ALL.to_vec())),
        proptest::option::of(text()),
        proptest::option::of(any::<u32>()),
        (
            proptest::option::of(any::<[u8; 16]>()),
            proptest::option::of(text()),
            proptest::option::of(any::<([u8; 8], u8)>()),
            proptest::option::of(any::<u8>()),
            any::<u8>(),
        ),
    )
        .prop_map(
            |(s, m, d, a, t, c, tr, e, em, r, (id, code, span, enc, accept))| Metadata {
                service: s.map(Into::into),
                method: m.map(Into::into),
                deadline_us: d,
                consumer_app: a,
                tags: t,
                content_type: c.map(ContentType::from),
                trace_id: tr,
                error_class: e,
                error_message: em,
                retry_after_ms: r,
                request_id: id,
                error_code: code,
                span_id: span.map(|(id, _)| id),
                trace_flags: span.map_or(0, |(_, flags)| flags),
                content_encoding: enc,
                accept_encoding: accept,
                encoded: Default::default(),
            },
        )
}

fn frame() -> impl Strategy<Value = Frame> {
    (
        proptest::sample::select(vec![
            Kind::Request,
            Kind::Response,
            Kind::Ping,
            Kind::Pong,
            Kind::Goaway,
            Kind::Cancel,
        ]),
        any::<u16>(),
        any::<u64>(),
        metadata(),
        proptest::collection::vec(any::<u8>(), 0..512),
    )
        .prop_map(|(kind, flags, id, meta, payload)| Frame {
            kind,
            flags,
            id,
            meta,
            payload: Bytes::from(payload),
        })
}

proptest! {
    #[test]
    fn any_frame_round_trips_through_any_split(f in frame(), split in any::<prop::sample::Index>()) {
        let bytes = encode(&f);
        let cut = split.index(bytes.len() + 1);
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::from(&bytes[..cut]);
        let first = codec.decode(&mut buf).unwrap();
        if cut < bytes.len() {
            prop_assert!(first.is_none());
            buf.extend_from_slice(&bytes[cut..]);
            prop_assert_eq!(codec.decode(&mut buf).unwrap(), Some(f));
        } else {
            prop_assert_eq!(first, Some(f));
        }
    }

    #[test]
    fn any_bytes_decode_or_error_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::from(&data[..]);
        // Either frames, "need more", or an error — repeatedly until one of the latter.
        for _ in 0..16 {
            match codec.decode(&mut buf) {
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => break,
            }
        }
    }

    #[test]
    fn valid_header_garbage_metadata_errors_cleanly(meta in proptest::collection::vec(any::<u8>(), 0..128)) {
        let mut buf = BytesMut::new();
        buf.put_slice(&crate::MAGIC);
        buf.put_u8(crate::VERSION);
        buf.put_u8(Kind::Request as u8);
        buf.put_u16(0);
        buf.put_u64(1);
        buf.put_u32(meta.len() as u32);
        buf.put_u32(0);
        buf.put_slice(&meta);
        let _ = FrameCodec::default().decode(&mut buf);
    }
}

#[test]
fn a_frame_limit_beyond_the_length_fields_is_refused() {
    let l = Limits::default();
    assert!(l.with_max_frame(MAX_FRAME_LIMIT).is_ok());
    let err = l.with_max_frame(MAX_FRAME_LIMIT + 1).unwrap_err();
    assert!(err.contains("32 bits"), "{err}");
    assert!(l.with_max_frame(10).is_err());
}

#[test]
fn lengths_that_would_wrap_are_too_large_not_small() {
    // A header claiming u32::MAX bytes of metadata and of payload: the sum is past any
    // limit, even one set above what the fields hold.
    let limits = Limits {
        max_frame: usize::MAX,
        max_metadata: usize::MAX,
        ..Limits::default()
    };
    let mut header = BytesMut::new();
    header.put_slice(&crate::MAGIC);
    header.put_u8(crate::VERSION);
    header.put_u8(Kind::Request as u8);
    header.put_u16(0);
    header.put_u64(1);
    header.put_u32(u32::MAX);
    header.put_u32(u32::MAX);
    let err = FrameCodec::new(limits).decode(&mut header).unwrap_err();
    assert!(matches!(err, WireError::FrameTooLarge { limit, .. } if limit == MAX_FRAME_LIMIT));
}

#[test]
fn a_business_error_carries_its_code() {
    let mut frame = Frame::error(3, ErrorClass::Business, "the version moved on");
    frame.meta.error_code = Some("conflict".into());
    let decoded = FrameCodec::default()
        .decode(&mut encode(&frame))
        .unwrap()
        .unwrap();
    assert_eq!(decoded.meta.error_code.as_deref(), Some("conflict"));
    assert_eq!(decoded, frame);
}
