// `{{name}}`, a fixed-window limiter in JavaScript. Each key may take `permits` units per
// window of `window-ms` milliseconds; a request over the limit is refused with the time
// left until the window turns. Time comes from the kernel, in nanoseconds: `acquire` is
// given its clock, and `keyDefined` reads the same clock (`nowNs`); a plugin has no
// other. `u64`/`s64` values are BigInt on StarlingMonkey and plain numbers on
// QuickJS: everything 64-bit here goes through `BigInt(...)` so the code runs on both.
//
// Config (defaults in brackets): `permits` [100], `window-ms` [1000], both at least 1.
//
// Built by `xtask build-plugin --lang js` (QuickJS) or `--lang js-starlingmonkey` (see
// README.md) for world `axle:spi/limiter`. A variant is `{ tag }` or `{ tag, val }`. An
// exception escaping `acquire` traps the instance, so nothing there throws.

import { nowNs } from "axle:spi/host@0.3.0";

const KNOWN_KEYS = ["permits", "window-ms"];
const MAX_U32 = 4294967295;

let limit = 100n;
let windowNs = 1000n * 1000000n;
// Key id -> { start: BigInt ns, used: BigInt }.
let windows = new Map();

function integer(name, value, most) {
  if (value.tag !== "int" || value.val < 1n || value.val > most) {
    throw `key \`${name}\`: expected an integer between 1 and ${most}`;
  }
  return BigInt(value.val);
}

export function init(config) {
  let permits = 100n;
  let windowMs = 1000n;
  for (const [name, value] of config) {
    if (name === "permits") {
      permits = integer(name, value, 9223372036854775807n);
    } else if (name === "window-ms") {
      windowMs = integer(name, value, BigInt(MAX_U32));
    } else {
      throw `unknown key \`${name}\` (known keys: ${KNOWN_KEYS.join(", ")})`;
    }
  }
  // A successful init starts afresh.
  limit = permits;
  windowNs = windowMs * 1000000n;
  windows = new Map();
}

export function keyDefined(key, attributes) {
  // The same limit for every key: the attributes are not needed.
  windows.set(key, { start: BigInt(nowNs()), used: 0n });
}

export function acquire(key, permits, nowNsAtCall) {
  const w = windows.get(key);
  if (w === undefined) {
    return 0; // admitted
  }
  const now = BigInt(nowNsAtCall);
  if (now - w.start >= windowNs || now < w.start) {
    w.start = now;
    w.used = 0n;
  }
  if (w.used + BigInt(permits) <= limit) {
    w.used += BigInt(permits);
    return 0; // admitted
  }
  const leftMs = Number((w.start + windowNs - now + 999999n) / 1000000n);
  return Math.min(Math.max(leftMs, 1), MAX_U32); // refused: retry after this many ms
}
