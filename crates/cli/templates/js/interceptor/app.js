// `{{name}}`, an access check on the provider, in JavaScript. At `server-before` (after
// the trust boundary, before the limiter and the handler) it refuses with `forbidden` a
// caller whose application is in `deny`, and with `bad-request` a request without the
// `require-tag` tag; every other call passes unchanged.
//
// It reads only parts that are the same for every call of one shape (the caller's
// application, and the tags when `require-tag` is set), never a per-call part (trace,
// deadline, payload): the kernel then memoises each answer per distinct caller and tags,
// and this code runs once per shape, not once per call. So `intercept` must depend on
// nothing but the config and those parts (no clock, no counters).
//
// Config (defaults in brackets): `deny` [none]: application names, an array of strings
// (or one string); `deny-unnamed` [false]: also refuse callers that name no application;
// `require-tag` [none]: a tag key every request must carry.
//
// Built by `xtask build-plugin --lang js` (QuickJS) or `--lang js-starlingmonkey` (see
// README.md) for world `axle:spi/interceptor`. An enum is its kebab-case name
// (`"server-before"`), flags an object of booleans in camelCase, a variant `{ tag }` or
// `{ tag, val }`. `init` fails by throwing a string; an exception escaping `intercept`
// traps the instance (the manifest's `on-error` then decides), so nothing there throws.

const KNOWN_KEYS = ["deny", "deny-unnamed", "require-tag"];

let deny = new Set();
let denyUnnamed = false;
let requireTag; // undefined: no tag required

function names(value) {
  const list = value.tag === "text" ? [value.val] : value.tag === "texts" ? value.val : [""];
  if (list.some((n) => n === "")) {
    throw "key `deny`: expected an array of non-empty strings (use `deny-unnamed = true` for callers that name no application)";
  }
  return Array.from(list);
}

function refuse(klass, message) {
  return { tag: "refuse", val: { class: klass, message } };
}

export function init(config) {
  let denied = [];
  let unnamed = false;
  let tag;
  for (const [name, value] of config) {
    if (name === "deny") {
      denied = names(value);
    } else if (name === "deny-unnamed") {
      if (value.tag !== "flag") {
        throw "key `deny-unnamed`: expected true or false";
      }
      unnamed = value.val;
    } else if (name === "require-tag") {
      if (value.tag !== "text" || value.val === "") {
        throw "key `require-tag`: expected a non-empty string";
      }
      tag = value.val;
    } else {
      throw `unknown key \`${name}\` (known keys: ${KNOWN_KEYS.join(", ")})`;
    }
  }
  // A successful init starts afresh.
  deny = new Set(denied);
  denyUnnamed = unnamed;
  requireTag = tag;
}

export function declare() {
  // Only what the config needs: every part read multiplies the shapes memoised.
  return {
    points: ["server-before"],
    reads: { consumer: true, tags: requireTag !== undefined },
  };
}

export function intercept(call) {
  if (call.point !== "server-before") {
    return { tag: "pass" };
  }
  const target = `${call.service}/${call.method}`;
  const app = call.consumerApp;
  if ((app === "" && denyUnnamed) || deny.has(app)) {
    const who = app === "" ? "a caller that names no application" : `application \`${app}\``;
    return refuse("forbidden", `${who} may not call ${target}`);
  }
  if (requireTag !== undefined && !call.tags.some(([k]) => k === requireTag)) {
    return refuse("bad-request", `${target} needs the tag \`${requireTag}\``);
  }
  return { tag: "pass" };
}
