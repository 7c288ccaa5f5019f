"""A least-active selector in Python, as a two-choice selector: the plugin draws two
distinct members by weight, and the kernel keeps the one with fewer requests in flight
per unit of effective weight (the first on a tie), from the counts it keeps. A pick makes
no host call whatever the set size, which matters most in an interpreted guest. The same
strategy as the Rust plugin in plugins/selector-least-active and the C example in
plugins/examples/c/least-active. Config: `seed` (a non-negative integer; without it the
generator is seeded from the host).

Built by the command in README.md next to this file, which runs componentize-py on this
directory for the world named in `plugin.toml` (`axle:spi/two-choice-selector`).

An exception escaping an export traps the instance (the kernel then counts a fault and
falls back to a random pick), so nothing here raises except `init`'s `Err`.
"""

from bisect import bisect_right
from itertools import accumulate
from typing import Dict, List, Optional, Tuple

import wit_world
from wit_world.imports import balancing, host, types
from componentize_py_types import Err

# Set ids at or above this are ignored, and `select-two` on them answers no pick (the
# Rust SDK's `MAX_SETS`).
MAX_SETS = 1 << 16

# The one id the kernel never gives an endpoint: "no pick" (`sdk/wit/kinds.wit`).
NO_PICK = 0xFFFFFFFF

# Redraws allowed when the second draw repeats the first; then the next drawable member
# after a random position is taken (as the Rust plugin does).
REDRAWS = 32

MASK64 = (1 << 64) - 1


class _Rng:
    """splitmix64, as the Rust SDK's `Rng`: the same seed draws the same numbers."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """A uniform number in 0..n (n > 0), by multiply-shift."""
        if n <= 0xFFFFFFFF:
            return ((self.next() >> 32) * n) >> 32
        return (self.next() * n) >> 64


class _Set:
    """A candidate set: its members, their cumulative weights, the drawable ones."""

    __slots__ = ("members", "cumulative", "drawable", "few")

    def __init__(self, members: List[int], weights: List[int]) -> None:
        # When every weight is 0 there is no preference: each member counts 1, so a set of
        # drained endpoints is still served evenly rather than not at all.
        if not any(weights):
            weights = [1] * len(members)
        self.members = members
        # A draw is a ticket below the total, found by binary search: O(log n).
        self.cumulative = list(accumulate(weights))
        drawable = [i for i, w in enumerate(weights) if w > 0]
        self.drawable = len(drawable)
        self.few = drawable[:2]

    def weight(self, i: int) -> int:
        return self.cumulative[i] - (self.cumulative[i - 1] if i else 0)

    def sample(self, rng: _Rng) -> int:
        return bisect_right(self.cumulative, rng.below(self.cumulative[-1]))

    def two(self, rng: _Rng) -> Optional[Tuple[int, int]]:
        """Two distinct positions, the first drawn by weight, the second by weight among
        the rest; one drawable member comes back twice; none, `None`."""
        if self.drawable == 0:
            return None
        if self.drawable <= 2:
            a, b = self.few[0], self.few[-1]
            wa = self.weight(a)
            if self.drawable == 2 and rng.below(wa + self.weight(b)) >= wa:
                a, b = b, a
            return a, b
        first = self.sample(rng)
        for _ in range(REDRAWS + 1):
            second = self.sample(rng)
            if second != first:
                return first, second
        n = len(self.members)
        start = rng.below(n)
        for offset in range(n):
            p = (start + offset) % n
            if p != first and self.weight(p) > 0:
                return first, p
        return first, start


# `init` has succeeded at least once.
_initialized = False
_rng = _Rng(0)
# Endpoint id -> effective weight, from the last table.
_weights: Dict[int, int] = {}
# Set id -> its `_Set`.
_sets: Dict[int, _Set] = {}


class WitWorld(wit_world.WitWorld):
    def init(self, config: List[Tuple[str, types.ConfigValue]]) -> None:
        global _initialized, _rng
        seed = None
        for key, value in config:
            if key != "seed":
                raise Err(f"unknown key `{key}` (known keys: seed)")
            if not isinstance(value, types.ConfigValue_Int) or value.value < 0:
                raise Err("key `seed`: expected a non-negative integer")
            seed = value.value
        # A successful init starts afresh, like the SDK's new `SelectorRuntime`.
        _sets.clear()
        _rng = _Rng(host.random() if seed is None else seed)
        _initialized = True

    def measure(self) -> Optional[balancing.LoadMeasure]:
        # In flight per unit of weight, compared by the kernel.
        return balancing.LoadMeasure(per_weight=True, latency=False, default_latency_ns=0)

    def endpoints_changed(self, table: types.EndpointTable) -> None:
        # The kernel defines again every set it needs after a table change.
        _sets.clear()
        _weights.clear()
        _weights.update((e.id, e.weight) for e in table.endpoints)

    def define_set(self, set: int, members: List[int]) -> None:
        # Before a successful `init` there is no plugin state to define sets in.
        if _initialized and set < MAX_SETS:
            _sets[set] = _Set(members, [_weights.get(m, 0) for m in members])

    def select_two(self, set: int, hash_key: int) -> int:
        # Two candidates in one scalar, the first in the high half; NO_PICK there is no
        # pick. `hash_key` is ignored: no affinity.
        s = _sets.get(set)
        pair = s.two(_rng) if s is not None and s.members else None
        if pair is None:
            return NO_PICK << 32
        return s.members[pair[0]] << 32 | s.members[pair[1]]

    def select(self, set: int, hash_key: int) -> int:
        # Not called while `measure` answers a measure; a host that calls it anyway gets
        # the same strategy, comparing the pair through `host.facts` (two host calls).
        pair = self.select_two(set, hash_key)
        first, second = pair >> 32, pair & 0xFFFFFFFF
        if first == NO_PICK or second == first:
            return first
        a, b = host.facts(first), host.facts(second)
        fa, wa = (a.in_flight, max(a.weight, 1)) if a else (0, 1)
        fb, wb = (b.in_flight, max(b.weight, 1)) if b else (0, 1)
        return first if fa * wb <= fb * wa else second
