"""`{{name}}`, a fixed-window limiter in Python. Each key may take `permits` units per
window of `window-ms` milliseconds; a request over the limit is refused with the time left
until the window turns. Time comes from the kernel: `acquire` is given its clock, and
`key_defined` reads the same clock (`host.now_ns`); a plugin has no other.

Config (defaults in brackets): `permits` [100], `window-ms` [1000], both at least 1.

Built by `xtask build-plugin --lang python` (see README.md), which runs componentize-py
on this directory for world `axle:spi/limiter`. An exception escaping `acquire` traps the
instance (the manifest's `on-error` then decides), so nothing there raises.
"""

from typing import Dict, List, Tuple

import wit_world
from wit_world.imports import host, limits, types
from componentize_py_types import Err

KNOWN_KEYS = ("permits", "window-ms")

_permits = 100
_window_ns = 1000 * 1_000_000
# Key id -> [window start (ns), units used in it].
_windows: Dict[int, List[int]] = {}


def _int(name: str, value: types.ConfigValue, most: int) -> int:
    if not isinstance(value, types.ConfigValue_Int) or not 1 <= value.value <= most:
        raise Err(f"key `{name}`: expected an integer between 1 and {most}")
    return value.value


class WitWorld(wit_world.WitWorld):
    def init(self, config: List[Tuple[str, types.ConfigValue]]) -> None:
        global _permits, _window_ns
        permits, window_ms = 100, 1000
        for name, value in config:
            if name == "permits":
                permits = _int(name, value, (1 << 63) - 1)
            elif name == "window-ms":
                window_ms = _int(name, value, (1 << 32) - 1)
            else:
                raise Err(f"unknown key `{name}` (known keys: {', '.join(KNOWN_KEYS)})")
        # A successful init starts afresh.
        _permits, _window_ns = permits, window_ms * 1_000_000
        _windows.clear()

    def key_defined(self, key: int, attributes: limits.LimitKey) -> None:
        # The same limit for every key: the attributes are not needed.
        _windows[key] = [host.now_ns(), 0]

    def acquire(self, key: int, permits: int, now_ns: int) -> int:
        w = _windows.get(key)
        if w is None:
            return 0  # admitted
        now = now_ns
        if now - w[0] >= _window_ns or now < w[0]:
            w[0], w[1] = now, 0
        if w[1] + permits <= _permits:
            w[1] += permits
            return 0  # admitted
        left_ms = -(-(w[0] + _window_ns - now) // 1_000_000)  # rounded up
        return min(max(left_ms, 1), (1 << 32) - 1)  # refused: retry after this many ms
