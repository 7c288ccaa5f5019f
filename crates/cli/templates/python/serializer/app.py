"""`{{name}}`, a small binary encoding of the value model in Python that round-trips
every value. Each node in pre-order is one tag byte (0 null, 1 boolean, 2 signed,
3 unsigned, 4 float, 5 text, 6 binary, 7 array, 8 mapping) followed by its payload,
little-endian: a byte for a boolean, 8 bytes for numbers, a u32 length and the bytes for
text and binary, a u32 count for arrays and mappings. `decode` checks that the bytes hold
exactly one complete value.

Config: none (any key is refused, so a typo in the manifest fails the load).

Built by `xtask build-plugin --lang python` (see README.md), which runs componentize-py
on this directory for world `axle:spi/serializer`. `encode` and `decode` fail with
`raise Err(...)`; any other exception traps the instance.
"""

import struct
from typing import List, Tuple

import wit_world
from wit_world.imports import types, values
from componentize_py_types import Err

CONTENT_TYPE = "application/x-axle-tlv"

_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
_F64 = struct.Struct("<d")


class WitWorld(wit_world.WitWorld):
    def init(self, config: List[Tuple[str, types.ConfigValue]]) -> None:
        for key, _value in config:
            raise Err(f"unknown key `{key}` (known keys: none)")

    def content_type(self) -> str:
        return CONTENT_TYPE

    def encode(self, value: values.Value) -> bytes:
        out = bytearray()
        for node in value.nodes:
            if isinstance(node, values.Node_Null):
                out.append(0)
            elif isinstance(node, values.Node_Boolean):
                out += bytes((1, 1 if node.value else 0))
            elif isinstance(node, values.Node_Signed):
                out.append(2)
                out += _I64.pack(node.value)
            elif isinstance(node, values.Node_Unsigned):
                out.append(3)
                out += _U64.pack(node.value)
            elif isinstance(node, values.Node_Float):
                out.append(4)
                out += _F64.pack(node.value)
            elif isinstance(node, values.Node_Text):
                data = node.value.encode("utf-8")
                out.append(5)
                out += _U32.pack(len(data)) + data
            elif isinstance(node, values.Node_Binary):
                out.append(6)
                out += _U32.pack(len(node.value)) + node.value
            elif isinstance(node, values.Node_Array):
                out.append(7)
                out += _U32.pack(node.value)
            else:
                out.append(8)
                out += _U32.pack(node.value)
        return bytes(out)

    def decode(self, bytes: bytes) -> values.Value:
        data = bytes
        at = 0
        nodes = []
        # Subtrees still to read: the root, then what each array or mapping announces.
        pending = 1

        def take(n: int):
            nonlocal at
            if len(data) - at < n:
                raise Err(f"byte {at}: the input ends inside a value")
            chunk = data[at : at + n]
            at += n
            return chunk

        while pending > 0:
            pending -= 1
            start = at
            tag = take(1)[0]
            if tag == 0:
                nodes.append(values.Node_Null())
            elif tag == 1:
                b = take(1)[0]
                if b > 1:
                    raise Err(f"byte {start + 1}: boolean {b} is neither 0 nor 1")
                nodes.append(values.Node_Boolean(b == 1))
            elif tag == 2:
                nodes.append(values.Node_Signed(_I64.unpack(take(8))[0]))
            elif tag == 3:
                nodes.append(values.Node_Unsigned(_U64.unpack(take(8))[0]))
            elif tag == 4:
                nodes.append(values.Node_Float(_F64.unpack(take(8))[0]))
            elif tag == 5:
                raw = take(_U32.unpack(take(4))[0])
                try:
                    nodes.append(values.Node_Text(raw.decode("utf-8")))
                except UnicodeDecodeError as e:
                    raise Err(f"byte {start}: text is not UTF-8: {e}")
            elif tag == 6:
                nodes.append(values.Node_Binary(take(_U32.unpack(take(4))[0])))
            elif tag in (7, 8):
                n = _U32.unpack(take(4))[0]
                pending += n if tag == 7 else 2 * n
                nodes.append(values.Node_Array(n) if tag == 7 else values.Node_Mapping(n))
            else:
                raise Err(f"byte {start}: unknown tag {tag}")
        if at != len(data):
            raise Err(f"byte {at}: trailing bytes after the value")
        return values.Value(nodes)
