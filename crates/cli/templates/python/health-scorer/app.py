"""`{{name}}`, a success-rate health scorer in Python. Refusals (`rejected`) are signs of
load, not faults, so they count neither way; below `min-samples` calls the window says
nothing and the previous state stands.

Config (defaults in brackets): `min-samples` [20], `subhealthy-below` [0.9],
`dead-below` [0.5]; 0 <= dead-below <= subhealthy-below <= 1.

Built by `xtask build-plugin --lang python` (see README.md), which runs componentize-py
on this directory for world `axle:spi/health-scorer`. An exception escaping `score`
traps the instance (the previous verdict then stands), so nothing there raises.
"""

from typing import List, Tuple

import wit_world
from wit_world.imports import health, types
from componentize_py_types import Err

KNOWN_KEYS = ("dead-below", "min-samples", "subhealthy-below")

_min_samples = 20
_subhealthy_below = 0.9
_dead_below = 0.5

_WEIGHT = {
    health.HealthState.HEALTHY: 1000,
    health.HealthState.SUBHEALTHY: 500,
    health.HealthState.DEAD: 0,
}


def _number(name: str, value: types.ConfigValue) -> float:
    if isinstance(value, (types.ConfigValue_Int, types.ConfigValue_Float)):
        return float(value.value)
    raise Err(f"key `{name}`: expected a number")


class WitWorld(wit_world.WitWorld):
    def init(self, config: List[Tuple[str, types.ConfigValue]]) -> None:
        global _min_samples, _subhealthy_below, _dead_below
        min_samples, sub, dead = 20, 0.9, 0.5
        for name, value in config:
            if name == "min-samples":
                if not isinstance(value, types.ConfigValue_Int) or value.value < 0:
                    raise Err("key `min-samples`: expected a non-negative integer")
                min_samples = value.value
            elif name == "subhealthy-below":
                sub = _number(name, value)
            elif name == "dead-below":
                dead = _number(name, value)
            else:
                raise Err(f"unknown key `{name}` (known keys: {', '.join(KNOWN_KEYS)})")
        if not 0.0 <= sub <= 1.0:
            raise Err("key `subhealthy-below`: must be between 0 and 1")
        if not 0.0 <= dead <= sub:
            raise Err("key `dead-below`: must be between 0 and `subhealthy-below`")
        _min_samples, _subhealthy_below, _dead_below = min_samples, sub, dead

    def score(self, stats: health.WindowStats) -> health.Verdict:
        counted = max(stats.total - stats.rejected, 0)
        state = stats.previous
        if counted > 0 and counted >= _min_samples:
            faults = min(stats.timeouts + stats.failures, counted)
            rate = (counted - faults) / counted
            if rate < _dead_below:
                state = health.HealthState.DEAD
            elif rate < _subhealthy_below:
                state = health.HealthState.SUBHEALTHY
            else:
                state = health.HealthState.HEALTHY
        return health.Verdict(state=state, weight_permille=_WEIGHT[state])
