//! The serializer slot. Safe default: none — a failed encode or decode is an error to the
//! caller (there is no safe guess at bytes).
//!
//! A component of the `packed-serializer` world is called through `encode-packed` and
//! `decode-packed`: the value crosses as one byte string (`axle_spi::packed`) instead of
//! a node list whose every string costs an allocation inside the plugin.

use std::borrow::Cow;
use std::time::Duration;

use wasmtime::component::{ComponentExportIndex, Func, InstancePre, TypedFunc, WasmList};
use wasmtime::Store;

use crate::bindings::serializer as wit_serializer;
use crate::bindings::wit;
use crate::host_state::HostState;
use crate::pool::Pool;
use crate::sandbox::Instance;
use crate::stats::Fault;
use axle_wire::ContentType;

pub use axle_spi::{Node, Value};

/// Marker for the serializer world (and its extension, `packed-serializer`).
pub struct SerializerKind;

/// `encode-packed` and `decode-packed` share one signature, and the kernel lifts their
/// answer in one of two ways: as a view into the plugin's memory, read after the call
/// returns (one copy, straight into the kernel's own), when the export declares no
/// post-return and so keeps its answer until its next call; else as a `Vec` copied
/// inside the call, before the post-return may free or reuse it (`post_return.rs`).
type KeptFunc<'a> = TypedFunc<(&'a [u8],), (Result<WasmList<u8>, String>,)>;
type CopiedFunc<'a> = TypedFunc<(&'a [u8],), (Result<Vec<u8>, String>,)>;

thread_local! {
    /// The buffer the last value this thread encoded was packed into, for the next: a
    /// value is packed only to be copied into the plugin, so one buffer a thread serves
    /// every encode (an allocation and a free a call fewer).
    static PACKED: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A packing buffer larger than this is freed after its call rather than kept: every
/// thread that encodes keeps one.
const PACKED_KEPT: usize = 64 << 10;

/// Which of the packed pair, as indexes into [`Packed`]'s arrays.
const ENCODE: usize = 0;
const DECODE: usize = 1;
const PACKED_NAMES: [&str; 2] = ["encode-packed", "decode-packed"];

/// A component's packed pair: their indexes, and whether each keeps its answer (declares
/// no post-return), read from the component's bytes once.
#[derive(Clone, Copy)]
pub struct PackedPre {
    exports: [ComponentExportIndex; 2],
    kept: [bool; 2],
}

/// An instance's packed pair, typed (as [`KeptFunc`] or [`CopiedFunc`], by `kept`) once
/// per instance.
struct Packed {
    funcs: [Func; 2],
    kept: [bool; 2],
}

/// A serializer instance's exports: its world's, and the packed pair when the component
/// has both.
pub struct SerializerExports {
    world: wit_serializer::Serializer,
    packed: Option<Packed>,
}

impl SerializerExports {
    /// Calls the packed export `which` with `input` and hands its answer to `read`:
    /// borrowed from the plugin's memory when the export keeps it, else owned.
    fn call_packed<T>(
        &self,
        store: &mut Store<HostState>,
        which: usize,
        input: &[u8],
        read: impl FnOnce(Cow<'_, [u8]>) -> T,
    ) -> wasmtime::Result<Result<T, String>> {
        let Some(packed) = &self.packed else {
            wasmtime::bail!("the component has no packed exports");
        };
        let func = packed.funcs[which];
        if packed.kept[which] {
            // SAFETY: type-checked as `KeptFunc` when the instance was made
            // (`instantiate`), which is what `new_unchecked` asks of its caller.
            let func: KeptFunc<'_> = unsafe { TypedFunc::new_unchecked(func) };
            // The list's place was checked against the memory's size as it was lifted,
            // and nothing runs in the instance between here and the read: the export has
            // no post-return.
            let answer = func.call(&mut *store, (input,))?.0;
            Ok(answer.map(|list| read(Cow::Borrowed(list.as_le_slice(&*store)))))
        } else {
            // SAFETY: type-checked as `CopiedFunc` when the instance was made.
            let func: CopiedFunc<'_> = unsafe { TypedFunc::new_unchecked(func) };
            Ok(func
                .call(store, (input,))?
                .0
                .map(|bytes| read(Cow::Owned(bytes))))
        }
    }

    /// Calls `encode-packed` with `input`.
    fn encode_packed(
        &self,
        store: &mut Store<HostState>,
        input: &[u8],
    ) -> wasmtime::Result<Result<Vec<u8>, String>> {
        self.call_packed(store, ENCODE, input, |answer| answer.into_owned())
    }

    /// Calls `decode-packed` with `input` and unpacks its answer. `Ok(Err)`: the plugin
    /// refused the input; `Ok(Ok(Err))`: its answer is malformed.
    fn decode_packed(
        &self,
        store: &mut Store<HostState>,
        input: &[u8],
    ) -> wasmtime::Result<Result<Result<Value, String>, String>> {
        self.call_packed(store, DECODE, input, |answer| Value::unpack(&answer))
    }
}

/// A packed export, type-checked as the kernel will call it: [`KeptFunc`] when `kept`,
/// else [`CopiedFunc`].
fn typed_packed(
    instance: &wasmtime::component::Instance,
    store: &mut Store<HostState>,
    index: &ComponentExportIndex,
    kept: bool,
) -> wasmtime::Result<Func> {
    Ok(if kept {
        let func: KeptFunc<'_> = instance.get_typed_func(store, index)?;
        *func.func()
    } else {
        let func: CopiedFunc<'_> = instance.get_typed_func(store, index)?;
        *func.func()
    })
}

impl crate::sandbox::Kind for SerializerKind {
    type Pre = (wit_serializer::SerializerPre<HostState>, Option<PackedPre>);
    type Bindings = SerializerExports;

    fn pre(pre: InstancePre<HostState>, component: &[u8]) -> wasmtime::Result<Self::Pre> {
        let find = |name| pre.component().get_export_index(None, name);
        let packed = match PACKED_NAMES.map(find) {
            [Some(e), Some(d)] => Some(PackedPre {
                exports: [e, d],
                kept: crate::post_return::lifted_without_post_return(component, PACKED_NAMES),
            }),
            [None, None] => None,
            _ => {
                wasmtime::bail!("a packed serializer exports both encode-packed and decode-packed")
            }
        };
        Ok((wit_serializer::SerializerPre::new(pre)?, packed))
    }

    fn instantiate(
        (pre, packed): &Self::Pre,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<(Self::Bindings, wasmtime::component::Instance)> {
        let instance = pre.instance_pre().instantiate(&mut *store)?;
        let world = wit_serializer::Serializer::new(&mut *store, &instance)?;
        // A packed export of another type is refused here, so the component does not load.
        let packed = match packed {
            Some(PackedPre { exports, kept }) => Some(Packed {
                funcs: [
                    typed_packed(&instance, store, &exports[ENCODE], kept[ENCODE])?,
                    typed_packed(&instance, store, &exports[DECODE], kept[DECODE])?,
                ],
                kept: *kept,
            }),
            None => None,
        };
        Ok((SerializerExports { world, packed }, instance))
    }

    fn init(
        bindings: &Self::Bindings,
        store: &mut Store<HostState>,
        config: &Vec<(String, wit::ConfigValue)>,
    ) -> wasmtime::Result<Result<(), String>> {
        bindings.world.call_init(store, config)
    }
}

/// Why a payload could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SerializeError {
    /// The plugin refused the input (its message says why).
    #[error("{0}")]
    Rejected(String),
    /// The plugin failed (trap, timeout, memory).
    #[error("serializer failed: {0}")]
    Fault(#[from] Fault),
}

/// A loaded serializer.
pub struct SerializerPlugin {
    pool: Pool<Instance<SerializerKind>>,
    content_type: ContentType,
    /// How long a call waits for a dead instance's replacement (the plugin's
    /// `timeout-ms`): a serializer has no safe default but an error.
    replacement_wait: Duration,
    /// Whether the component is a `packed-serializer` (the same for all its instances).
    packed: bool,
}

impl SerializerPlugin {
    /// The plugin's counters now (calls, faults by cause, quarantine, log lines).
    pub fn counters(&self) -> crate::PluginCounters {
        self.pool.counters()
    }

    pub(crate) fn new(mut instances: Vec<Instance<SerializerKind>>) -> Result<Self, Fault> {
        let (packed, content_type) = instances[0].call("content-type", |b, s| {
            Ok((b.packed.is_some(), b.world.call_content_type(s)?))
        })?;
        if content_type.is_empty() || content_type.len() > 255 {
            return Err(Fault::Invalid(format!(
                "content type must be 1..=255 bytes, got {content_type:?}"
            )));
        }
        let owner = instances[0].pool_owner();
        Ok(SerializerPlugin {
            replacement_wait: Duration::from_millis(owner.timeout_ms),
            pool: Pool::new(instances, owner),
            content_type: ContentType::intern(&content_type),
            packed,
        })
    }

    /// The content type the plugin declared at load (interned: frames naming it are read
    /// without allocating).
    pub fn content_type(&self) -> &ContentType {
        &self.content_type
    }

    /// Value → bytes.
    pub fn encode(&self, value: &Value) -> Result<Vec<u8>, SerializeError> {
        self.pool.with(|inst| {
            inst.ensure_within(0, self.replacement_wait, |_, _| Ok(()))?;
            if self.packed {
                let packed = value
                    .pack_into(PACKED.take())
                    .map_err(SerializeError::Rejected)?;
                let encoded = inst.call("encode-packed", |b, s| b.encode_packed(s, &packed));
                if packed.capacity() <= PACKED_KEPT {
                    PACKED.set(packed);
                }
                return encoded?.map_err(SerializeError::Rejected);
            }
            let value = crate::convert::value_in(value);
            inst.call("encode", |b, s| b.world.call_encode(s, &value))?
                .map_err(SerializeError::Rejected)
        })?
    }

    /// Bytes → value.
    pub fn decode(&self, bytes: &[u8]) -> Result<Value, SerializeError> {
        self.pool.with(|inst| {
            inst.ensure_within(0, self.replacement_wait, |_, _| Ok(()))?;
            if self.packed {
                let unpacked = inst
                    .call("decode-packed", |b, s| b.decode_packed(s, bytes))?
                    .map_err(SerializeError::Rejected)?;
                // The plugin's answer is untrusted: a malformed one is its fault.
                return unpacked.map_err(|e| {
                    let fault = Fault::Invalid(format!("decode-packed answered {e}"));
                    inst.fault("decode-packed", &fault);
                    SerializeError::Fault(fault)
                });
            }
            inst.call("decode", |b, s| b.world.call_decode(s, bytes))?
                .map(crate::convert::value_out)
                .map_err(SerializeError::Rejected)
        })?
    }
}
