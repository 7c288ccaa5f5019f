//! `encode-packed` and `decode-packed`, written by hand rather than generated, so that the
//! component needs no post-return function for them.
//!
//! Why: an export that returns a list makes the host call a second export after every
//! call (`cabi_post_<name>`), for the guest to free what it returned; in wasmtime that is
//! one more entry into the guest per call, with its own lookup of the function
//! (`docs/performance.md`, "Packed answers kept until the next call"). Here the answer
//! is kept until the next call of either export, which frees it, so the component
//! declares no post-return and each call is one entry. The host reads the answer before
//! it calls the instance again (a call's result is lifted before the call returns), so
//! keeping it until then is enough.

use std::cell::RefCell;

use super::serializer::{Slot, NOT_INITIALISED};

/// A serializer's packed function: `encode_packed` or `decode_packed`.
pub type PackedFn<P> = fn(&mut P, &[u8]) -> Result<Vec<u8>, String>;

/// The last call's answer, and the record of it the host reads: the canonical ABI lays a
/// `result<list<u8>, string>` out as a discriminant byte at offset 0 (0: `ok`), then the
/// bytes' address and length, 4 bytes each, at offsets 4 and 8. With them, the buffer of
/// the answer before, which the next answer is written into ([`spare`]).
struct Kept {
    record: [u32; 3],
    answer: Result<Vec<u8>, String>,
    spare: Vec<u8>,
}

thread_local! {
    static KEPT: RefCell<Kept> = const {
        RefCell::new(Kept {
            record: [0; 3],
            answer: Ok(Vec::new()),
            spare: Vec::new(),
        })
    };
}

/// A spare buffer larger than this is freed rather than kept: an instance holds at most
/// this much beside its last answer after one large message.
const SPARE_LIMIT: usize = 1 << 20;

/// An empty buffer of at least `capacity` bytes for the answer being written: the one the
/// answer before last was written into, when there is one (`crate::answer_buffer`). In a
/// component an allocation and a free cost about 25 ns each (wasi-libc's `dlmalloc`,
/// compiled to wasm), and a serializer call otherwise makes one of each for its answer.
pub fn spare(capacity: usize) -> Vec<u8> {
    let mut buffer = KEPT.with(|kept| std::mem::take(&mut kept.borrow_mut().spare));
    buffer.clear();
    buffer.reserve(capacity);
    buffer
}

/// A packed export's body: runs `f` on the argument (`len` bytes at `ptr`) and answers
/// the address of the kept answer's record.
///
/// # Safety
///
/// `ptr` and `len` must be what the canonical ABI passes for a `list<u8>` argument: `len`
/// bytes the host allocated for this call with the component's `cabi_realloc`
/// (alignment 1), which the callee owns.
pub unsafe fn call<S: Slot>(ptr: *mut u8, len: usize, f: PackedFn<S::Plugin>) -> *mut u8 {
    // SAFETY: wit-bindgen's `cabi_realloc` allocates through the global allocator with
    // the layout of `len` bytes at alignment 1 (or answers a dangling pointer for none),
    // the layout a `Vec<u8>` of capacity `len` frees with; the bytes are this call's.
    let input = unsafe { Vec::from_raw_parts(ptr, len, len) };
    let answer = S::with(|slot| match slot {
        Some(p) => f(p, &input),
        None => Err(NOT_INITIALISED.to_string()),
    });
    drop(input);
    let (tag, bytes) = match &answer {
        Ok(bytes) => (0, bytes.as_slice()),
        Err(message) => (1, message.as_bytes()),
    };
    // A wasm32 address and length fit 32 bits. Moving the answer below does not move the
    // bytes they point at.
    let record = [tag, bytes.as_ptr() as u32, bytes.len() as u32];
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        kept.record = record;
        // The previous call's answer: the host has read it, so its buffer is free for the
        // next answer (an error's text is freed).
        if let Ok(bytes) = std::mem::replace(&mut kept.answer, answer) {
            if bytes.capacity() <= SPARE_LIMIT {
                kept.spare = bytes;
            }
        }
        kept.record.as_mut_ptr().cast()
    })
}
