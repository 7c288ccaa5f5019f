// `{{name}}`, a tag filter in JavaScript. A request tagged `<key>=<value>` reaches only the
// candidates whose endpoint carries the same tag; a request without the tag, or one that
// no candidate matches, keeps every candidate (the filter narrows, it never empties).
//
// Config: `key` (text, default "lane"): the tag that routes.
//
// Built by `xtask build-plugin --lang js` (QuickJS) or `--lang js-starlingmonkey` (see
// README.md) for world `axle:spi/router`. The exports are this module's exported
// functions in camelCase; `init` fails by throwing a string. An exception escaping any
// other export traps the instance (the kernel then ignores the router for the call).

const KNOWN_KEYS = ["key"];

// The tag that routes.
let tagKey = "lane";
// Endpoint id -> its value of the routing tag (endpoints without it are left out).
let tags = new Map();

// `config` is a list of [key, value] pairs; a value is `{ tag, val }`.
export function init(config) {
  let key = "lane";
  for (const [name, value] of config) {
    if (name === "key") {
      if (value.tag !== "text" || value.val === "") {
        throw "key `key`: expected a non-empty string";
      }
      key = value.val;
    } else {
      throw `unknown key \`${name}\` (known keys: ${KNOWN_KEYS.join(", ")})`;
    }
  }
  // A successful init starts afresh.
  tagKey = key;
  tags = new Map();
}

// Only the routing tag: the kernel fills nothing else and asks once per value of it.
export function declare() {
  return {
    tags: { tag: "keys", val: [tagKey] },
    consumerApp: false,
    callerAddress: false,
    method: false,
    fields: [],
  };
}

export function endpointsChanged(table) {
  tags = new Map();
  for (const endpoint of table.endpoints) {
    for (const [k, v] of endpoint.tags) {
      if (k === tagKey) {
        tags.set(endpoint.id, v);
      }
    }
  }
}

export function route(candidates, request) {
  let wanted;
  for (const [k, v] of request.tags) {
    if (k === tagKey) {
      wanted = v;
    }
  }
  const all = Array.from(candidates);
  if (wanted === undefined) {
    return all;
  }
  const matching = all.filter((id) => tags.get(id) === wanted);
  return matching.length > 0 ? matching : all;
}
