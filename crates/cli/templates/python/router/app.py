"""`{{name}}`, a tag filter in Python. A request tagged `<key>=<value>` reaches only the
candidates whose endpoint carries the same tag; a request without the tag, or one that no
candidate matches, keeps every candidate (the filter narrows, it never empties).

Config: `key` (text, default "lane"): the tag that routes.

Built by `xtask build-plugin --lang python` (see README.md), which runs componentize-py
on this directory for world `axle:spi/router`; componentize-py generates the `wit_world`
package imported below. An exception escaping an export traps the instance (the kernel
then ignores the router for the call), so nothing here raises except `init`'s `Err`.
"""

from typing import Dict, List, Tuple

import wit_world
from wit_world.imports import routing, types
from componentize_py_types import Err

KNOWN_KEYS = ("key",)

# The tag that routes.
_key = "lane"
# Endpoint id -> its value of the routing tag (endpoints without it are left out).
_tags: Dict[int, str] = {}


class WitWorld(wit_world.WitWorld):
    def init(self, config: List[Tuple[str, types.ConfigValue]]) -> None:
        global _key
        key = "lane"
        for name, value in config:
            if name == "key":
                if not isinstance(value, types.ConfigValue_Text) or not value.value:
                    raise Err("key `key`: expected a non-empty string")
                key = value.value
            else:
                raise Err(f"unknown key `{name}` (known keys: {', '.join(KNOWN_KEYS)})")
        # A successful init starts afresh.
        _key = key
        _tags.clear()

    def declare(self) -> routing.RouteReads:
        # Only the routing tag: the kernel fills nothing else and asks once per value of it.
        return routing.RouteReads(
            tags=routing.TagReads_Keys([_key]),
            consumer_app=False,
            caller_address=False,
            method=False,
            fields=[],
        )

    def endpoints_changed(self, table: types.EndpointTable) -> None:
        _tags.clear()
        for endpoint in table.endpoints:
            for k, v in endpoint.tags:
                if k == _key:
                    _tags[endpoint.id] = v

    def route(self, candidates: List[int], request: routing.Request) -> List[int]:
        wanted = None
        for k, v in request.tags:
            if k == _key:
                wanted = v
        if wanted is None:
            return candidates
        matching = [c for c in candidates if _tags.get(c) == wanted]
        return matching if matching else candidates
