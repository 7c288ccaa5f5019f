//! The requests a `leasing-limiter` admitted ahead: each thread holds at most one lease,
//! for one key of one limiter, until it is used up or [`axle_spi::LEASE_NS`] after the
//! plugin gave it. Per thread, so a leased admission writes nothing another core reads.
//! Also where a component's `acquire-lease` is found, once per load.

use std::cell::Cell;

/// One lease: whose, for which key, how many requests are left and until when.
#[derive(Clone, Copy)]
struct Lease {
    /// The limiter's serial (`SERIALS`; 0 is never one, so the empty lease matches none).
    serial: u64,
    key: u32,
    left: u32,
    until_ns: u64,
}

const NONE: Lease = Lease {
    serial: 0,
    key: 0,
    left: 0,
    until_ns: 0,
};

thread_local! {
    static LEASE: Cell<Lease> = const { Cell::new(NONE) };
}

/// Admits one request under `key` of limiter `serial` from this thread's lease, if it
/// holds one for them with a request left at `at_ns`.
pub(super) fn take(serial: u64, key: u32, at_ns: u64) -> bool {
    LEASE.with(|cell| {
        let mut lease = cell.get();
        if lease.serial != serial || lease.key != key || lease.left == 0 || at_ns >= lease.until_ns
        {
            return false;
        }
        lease.left -= 1;
        cell.set(lease);
        true
    })
}

/// Holds `left` more requests under `key` of limiter `serial`, given at `now_ns`, in place
/// of whatever this thread held (a lease replaced is dropped, as the contract allows).
pub(super) fn hold(serial: u64, key: u32, left: u32, now_ns: u64) {
    LEASE.set(Lease {
        serial,
        key,
        left,
        until_ns: now_ns.saturating_add(axle_spi::LEASE_NS),
    });
}

/// Where a component's `acquire-lease` is, if it exports one of the contract's type
/// (`func(u32, u64) -> u64`). One of another type is not called: the limiter is asked as a
/// plain one, once per request, and the log says why.
pub(super) fn export(
    plugin: &str,
    component: &wasmtime::component::Component,
) -> Option<wasmtime::component::ComponentExportIndex> {
    use wasmtime::component::{types::ComponentItem, Type};
    let (item, index) = component.get_export(None, "acquire-lease")?;
    let typed = match &item {
        ComponentItem::ComponentFunc(f) => {
            f.params().map(|(_, t)| t).eq([Type::U32, Type::U64]) && f.results().eq([Type::U64])
        }
        _ => false,
    };
    if !typed {
        tracing::warn!(
            plugin,
            "the limiter's `acquire-lease` is not `func(key: u32, now-ns: u64) -> u64`: \
             not called, every request asks `acquire`"
        );
        return None;
    }
    Some(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_serves_its_limiter_and_key_until_used_or_expired() {
        hold(7, 3, 2, 1_000);
        assert!(!take(8, 3, 1_000), "another limiter");
        assert!(!take(7, 4, 1_000), "another key");
        assert!(take(7, 3, 1_000));
        assert!(take(7, 3, 1_000 + axle_spi::LEASE_NS - 1));
        assert!(!take(7, 3, 1_000), "used up");
        hold(7, 3, 5, 1_000);
        assert!(!take(7, 3, 1_000 + axle_spi::LEASE_NS), "expired");
        // Another thread holds nothing of this one's.
        hold(7, 3, 5, 1_000);
        std::thread::spawn(|| assert!(!take(7, 3, 1_000)))
            .join()
            .unwrap();
        assert!(take(7, 3, 1_000));
    }
}
