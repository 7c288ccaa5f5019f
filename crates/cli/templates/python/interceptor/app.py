"""`{{name}}`, an access check on the provider, in Python. At `server-before` (after the
trust boundary, before the limiter and the handler) it refuses with `forbidden` a caller
whose application is in `deny`, and with `bad-request` a request without the
`require-tag` tag; every other call passes unchanged.

It reads only parts that are the same for every call of one shape (the caller's
application, and the tags when `require-tag` is set), never a per-call part (trace,
deadline, payload): the kernel then memoises each answer per distinct caller and tags, and
this code runs once per shape, not once per call. So `intercept` must depend on nothing
but the config and those parts (no clock, no counters).

Config (defaults in brackets): `deny` [none]: application names, an array of strings (or
one string); `deny-unnamed` [false]: also refuse callers that name no application;
`require-tag` [none]: a tag key every request must carry.

Built by `xtask build-plugin --lang python` (see README.md), which runs componentize-py
on this directory for world `axle:spi/interceptor`. An exception escaping `intercept`
traps the instance (the manifest's `on-error` then decides), so nothing there raises.
"""

from typing import FrozenSet, List, Optional, Tuple

import wit_world
from wit_world.imports import interception, types
from componentize_py_types import Err

KNOWN_KEYS = ("deny", "deny-unnamed", "require-tag")

_deny: FrozenSet[str] = frozenset()
_deny_unnamed = False
_require_tag: Optional[str] = None


def _names(value: types.ConfigValue) -> List[str]:
    if isinstance(value, types.ConfigValue_Text):
        names = [value.value]
    elif isinstance(value, types.ConfigValue_Texts):
        names = list(value.value)
    else:
        names = [""]
    if "" in names:
        raise Err(
            "key `deny`: expected an array of non-empty strings "
            "(use `deny-unnamed = true` for callers that name no application)"
        )
    return names


def _refuse(class_: str, message: str) -> interception.Verdict:
    return interception.Verdict_Refuse(interception.Refusal(class_=class_, message=message))


class WitWorld(wit_world.WitWorld):
    def init(self, config: List[Tuple[str, types.ConfigValue]]) -> None:
        global _deny, _deny_unnamed, _require_tag
        deny: List[str] = []
        deny_unnamed = False
        require_tag = None
        for name, value in config:
            if name == "deny":
                deny = _names(value)
            elif name == "deny-unnamed":
                if not isinstance(value, types.ConfigValue_Flag):
                    raise Err("key `deny-unnamed`: expected true or false")
                deny_unnamed = value.value
            elif name == "require-tag":
                if not isinstance(value, types.ConfigValue_Text) or not value.value:
                    raise Err("key `require-tag`: expected a non-empty string")
                require_tag = value.value
            else:
                raise Err(f"unknown key `{name}` (known keys: {', '.join(KNOWN_KEYS)})")
        # A successful init starts afresh.
        _deny, _deny_unnamed, _require_tag = frozenset(deny), deny_unnamed, require_tag

    def declare(self) -> interception.Declaration:
        # Only what the config needs: every part read multiplies the shapes memoised.
        reads = interception.Reads.CONSUMER
        if _require_tag is not None:
            reads |= interception.Reads.TAGS
        return interception.Declaration(points=[interception.Point.SERVER_BEFORE], reads=reads)

    def intercept(self, call: interception.Call) -> interception.Verdict:
        if call.point != interception.Point.SERVER_BEFORE:
            return interception.Verdict_Pass()
        target = f"{call.service}/{call.method}"
        app = call.consumer_app
        if (app == "" and _deny_unnamed) or app in _deny:
            who = f"application `{app}`" if app else "a caller that names no application"
            return _refuse("forbidden", f"{who} may not call {target}")
        if _require_tag is not None and all(k != _require_tag for k, _ in call.tags):
            return _refuse("bad-request", f"{target} needs the tag `{_require_tag}`")
        return interception.Verdict_Pass()
