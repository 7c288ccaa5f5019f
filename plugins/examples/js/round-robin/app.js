// A round-robin selector in JavaScript: each candidate set keeps its own cursor, so every
// member gets its turn in order, whatever other sets the kernel defines. Same behaviour as
// the Rust plugin in plugins/selector-round-robin, including before `init` and after a
// failed one. Config: none (any key is refused). Also the JS template of `axle plugins new
// --kind selector`.
//
// Built by the command in README.md next to this file for the world named in
// `plugin.toml` (`axle:spi/selector`), with componentize-qjs (QuickJS) or componentize-js
// (StarlingMonkey). The exports of the world are this module's exported
// functions, in camelCase; `u64` arguments arrive as BigInt on StarlingMonkey and as a
// plain number on QuickJS (`hashKey` is unused here), `option<T>` is a value or
// `undefined`, and a `result<_, string>` export returns normally for `ok` and throws for
// `err`. Module-level state lives as long as the plugin instance.
//
// An exception escaping any other export traps the instance (the kernel then counts a
// fault and falls back to a random pick), so nothing else here throws.

// Set ids are small integers the kernel hands out densely from 0; like the Rust SDK
// (`MAX_SETS`), ids at or above this are ignored and `select` on them answers no pick.
const MAX_SETS = 1 << 16;

// What `select` answers for "no pick": the kernel then picks at random. The one id the
// kernel never gives an endpoint (`sdk/wit/kinds.wit`).
const NO_PICK = 0xffffffff;

// This plugin has no config keys.
const KNOWN_KEYS = [];

// `init` has succeeded at least once.
let initialized = false;
// Set id -> { members, cursor }.
let sets = new Map();

// `config` is a list of [key, value] pairs; a value is `{ tag, val }`.
export function init(config) {
  for (const [key] of config) {
    if (!KNOWN_KEYS.includes(key)) {
      const known = KNOWN_KEYS.length ? KNOWN_KEYS.join(", ") : "none";
      throw `unknown key \`${key}\` (known keys: ${known})`;
    }
  }
  // A successful init starts afresh, like the SDK's new `SelectorRuntime`.
  sets = new Map();
  initialized = true;
}

export function endpointsChanged(table) {
  // The kernel defines again every set it needs after a table change.
  sets = new Map();
}

export function defineSet(set, members) {
  // Before a successful `init` there is no plugin state to define sets in.
  if (initialized && set < MAX_SETS) {
    sets.set(set, { members: Array.from(members), cursor: 0 });
  }
}

export function select(set, hashKey) {
  // `hashKey` is ignored: round-robin has no affinity.
  const s = sets.get(set);
  if (s === undefined || s.members.length === 0) {
    return NO_PICK; // the kernel picks at random
  }
  const pick = s.members[s.cursor % s.members.length];
  s.cursor += 1;
  return pick;
}
