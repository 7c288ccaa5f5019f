"""A round-robin selector in Python: each candidate set keeps its own cursor, so every
member gets its turn in order, whatever other sets the kernel defines. Same behaviour as
the Rust plugin in plugins/selector-round-robin, including before `init` and after a
failed one. Config: none (any key is refused). Also the Python template of
`axle plugins new --kind selector`.

Built by the command in README.md next to this file, which runs componentize-py on this
directory for the world named in `plugin.toml` (`axle:spi/selector`). componentize-py
generates the `wit_world` package imported below and calls the methods of the class
`WitWorld`; module-level state lives as long as the plugin instance.

An exception escaping an export traps the instance (the kernel then counts a fault and
falls back to a random pick), so nothing here raises except `init`'s `Err`.
"""

from typing import List, Tuple

import wit_world
from wit_world.imports import types
from componentize_py_types import Err

# Set ids are small integers the kernel hands out densely from 0; like the Rust SDK
# (`MAX_SETS`), ids at or above this are ignored and `select` on them answers no pick.
MAX_SETS = 1 << 16

# What `select` answers for "no pick": the kernel then picks at random. The one id the
# kernel never gives an endpoint (`sdk/wit/kinds.wit`).
NO_PICK = 0xFFFFFFFF

# This plugin has no config keys.
KNOWN_KEYS: Tuple[str, ...] = ()

# `init` has succeeded at least once.
_initialized = False
# Set id -> [members, cursor]. A list, not a tuple, so `select` updates the cursor in place.
_sets: dict = {}


class WitWorld(wit_world.WitWorld):
    def init(self, config: List[Tuple[str, types.ConfigValue]]) -> None:
        global _initialized
        for key, _value in config:
            if key not in KNOWN_KEYS:
                known = ", ".join(KNOWN_KEYS) or "none"
                raise Err(f"unknown key `{key}` (known keys: {known})")
        # A successful init starts afresh, like the SDK's new `SelectorRuntime`.
        _sets.clear()
        _initialized = True

    def endpoints_changed(self, table: types.EndpointTable) -> None:
        # The kernel defines again every set it needs after a table change.
        _sets.clear()

    def define_set(self, set: int, members: List[int]) -> None:
        # Before a successful `init` there is no plugin state to define sets in.
        if _initialized and set < MAX_SETS:
            _sets[set] = [members, 0]

    def select(self, set: int, hash_key: int) -> int:
        # `hash_key` is ignored: round-robin has no affinity.
        entry = _sets.get(set)
        if entry is None or not entry[0]:
            return NO_PICK  # the kernel picks at random
        members, cursor = entry
        entry[1] = cursor + 1
        return members[cursor % len(members)]
