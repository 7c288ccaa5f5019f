// `{{name}}`, a small binary encoding of the value model in JavaScript that round-trips
// every value. Each node in pre-order is one tag byte (0 null, 1 boolean, 2 signed,
// 3 unsigned, 4 float, 5 text, 6 binary, 7 array, 8 mapping) followed by its payload,
// little-endian: a byte for a boolean, 8 bytes for numbers, a u32 length and the bytes
// for text and binary, a u32 count for arrays and mappings. `decode` checks that the
// bytes hold exactly one complete value, with UTF-8 text.
//
// Config: none (any key is refused, so a typo in the manifest fails the load).
//
// Built by `xtask build-plugin --lang js` (QuickJS) or `--lang js-starlingmonkey` (see
// README.md) for world `axle:spi/serializer`. A node is `{ tag, val }` (`s64`/`u64` as
// BigInt on StarlingMonkey but as a plain number on QuickJS, `list<u8>` as Uint8Array);
// `encode` and `decode` fail by throwing a string. UTF-8 is done by hand: QuickJS has no
// TextEncoder.

import { nowNs } from "axle:spi/host@0.3.0";

const CONTENT_TYPE = "application/x-axle-tlv";
const TAGS = ["null", "boolean", "signed", "unsigned", "float", "text", "binary", "array", "mapping"];

// How this engine represents `s64`/`u64` (BigInt or Number): probed in `init` on the
// one 64-bit value at hand, the host clock.
let int64 = BigInt;

export function init(config) {
  for (const [key] of config) {
    throw `unknown key \`${key}\` (known keys: none)`;
  }
  int64 = typeof nowNs() === "bigint" ? BigInt : Number;
}

export function contentType() {
  return CONTENT_TYPE;
}

// The UTF-8 bytes of a string (a WIT string never holds lone surrogates).
function utf8(s) {
  const out = [];
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (c < 0x80) {
      out.push(c);
    } else if (c < 0x800) {
      out.push(0xc0 | (c >> 6), 0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
    } else {
      out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 0x3f), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
    }
  }
  return out;
}

// The string in well-formed UTF-8 bytes, or undefined.
function fromUtf8(b) {
  let s = "";
  let i = 0;
  while (i < b.length) {
    const first = b[i];
    let n;
    let c;
    if (first < 0x80) {
      s += String.fromCharCode(first);
      i += 1;
      continue;
    } else if ((first & 0xe0) === 0xc0) {
      n = 1;
      c = first & 0x1f;
    } else if ((first & 0xf0) === 0xe0) {
      n = 2;
      c = first & 0x0f;
    } else if ((first & 0xf8) === 0xf0) {
      n = 3;
      c = first & 0x07;
    } else {
      return undefined;
    }
    if (i + n >= b.length) {
      return undefined;
    }
    for (let k = 1; k <= n; k++) {
      if ((b[i + k] & 0xc0) !== 0x80) {
        return undefined;
      }
      c = (c << 6) | (b[i + k] & 0x3f);
    }
    if (c < [0, 0x80, 0x800, 0x10000][n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
      return undefined;
    }
    s += String.fromCodePoint(c);
    i += n + 1;
  }
  return s;
}

export function encode(value) {
  const out = [];
  const scratch = new DataView(new ArrayBuffer(8));
  const u32 = (v) => out.push(v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff);
  const eight = () => {
    for (let i = 0; i < 8; i++) {
      out.push(scratch.getUint8(i));
    }
  };
  for (const node of value.nodes) {
    out.push(TAGS.indexOf(node.tag));
    switch (node.tag) {
      case "null":
        break;
      case "boolean":
        out.push(node.val ? 1 : 0);
        break;
      case "signed":
        scratch.setBigInt64(0, BigInt(node.val), true);
        eight();
        break;
      case "unsigned":
        scratch.setBigUint64(0, BigInt(node.val), true);
        eight();
        break;
      case "float":
        scratch.setFloat64(0, node.val, true);
        eight();
        break;
      case "text": {
        const bytes = utf8(node.val);
        u32(bytes.length);
        for (const b of bytes) {
          out.push(b);
        }
        break;
      }
      case "binary":
        u32(node.val.length);
        for (const b of node.val) {
          out.push(b);
        }
        break;
      default: // array, mapping
        u32(node.val);
    }
  }
  return new Uint8Array(out);
}

export function decode(bytes) {
  const data = bytes instanceof Uint8Array ? bytes : Uint8Array.from(bytes);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let at = 0;
  const take = (n) => {
    if (data.length - at < n) {
      throw `byte ${at}: the input ends inside a value`;
    }
    at += n;
    return at - n;
  };
  const nodes = [];
  // Subtrees still to read: the root, then what each array or mapping announces.
  let pending = 1;
  while (pending > 0) {
    pending -= 1;
    const start = take(1);
    const tag = TAGS[data[start]];
    switch (tag) {
      case "null":
        nodes.push({ tag });
        break;
      case "boolean": {
        const b = data[take(1)];
        if (b > 1) {
          throw `byte ${start + 1}: boolean ${b} is neither 0 nor 1`;
        }
        nodes.push({ tag, val: b === 1 });
        break;
      }
      case "signed":
        nodes.push({ tag, val: int64(view.getBigInt64(take(8), true)) });
        break;
      case "unsigned":
        nodes.push({ tag, val: int64(view.getBigUint64(take(8), true)) });
        break;
      case "float":
        nodes.push({ tag, val: view.getFloat64(take(8), true) });
        break;
      case "text":
      case "binary": {
        const len = view.getUint32(take(4), true);
        const from = take(len);
        const raw = data.slice(from, from + len);
        if (tag === "binary") {
          nodes.push({ tag, val: raw });
        } else {
          const text = fromUtf8(raw);
          if (text === undefined) {
            throw `byte ${start}: text is not UTF-8`;
          }
          nodes.push({ tag, val: text });
        }
        break;
      }
      case "array":
      case "mapping": {
        const n = view.getUint32(take(4), true);
        pending += tag === "array" ? n : 2 * n;
        nodes.push({ tag, val: n });
        break;
      }
      default:
        throw `byte ${start}: unknown tag ${data[start]}`;
    }
  }
  if (at !== data.length) {
    throw `byte ${at}: trailing bytes after the value`;
  }
  return { nodes };
}
