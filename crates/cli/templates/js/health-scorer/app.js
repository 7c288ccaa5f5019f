// `{{name}}`, a success-rate health scorer in JavaScript. Refusals (`rejected`) are signs
// of load, not faults, so they count neither way; below `min-samples` calls the window
// says nothing and the previous state stands.
//
// Config (defaults in brackets): `min-samples` [20], `subhealthy-below` [0.9],
// `dead-below` [0.5]; 0 <= dead-below <= subhealthy-below <= 1.
//
// Built by `xtask build-plugin --lang js` (QuickJS) or `--lang js-starlingmonkey` (see
// README.md) for world `axle:spi/health-scorer`. Records are objects with camelCase
// fields, enums are strings. An exception escaping `score` traps the instance (the
// previous verdict then stands), so nothing there throws.

const KNOWN_KEYS = ["dead-below", "min-samples", "subhealthy-below"];
const WEIGHT = { healthy: 1000, subhealthy: 500, dead: 0 };

let minSamples = 20;
let subhealthyBelow = 0.9;
let deadBelow = 0.5;

// A number from an `int` (BigInt) or `float` config value.
function number(name, value) {
  if (value.tag === "int" || value.tag === "float") {
    return Number(value.val);
  }
  throw `key \`${name}\`: expected a number`;
}

export function init(config) {
  let min = 20;
  let sub = 0.9;
  let dead = 0.5;
  for (const [name, value] of config) {
    if (name === "min-samples") {
      if (value.tag !== "int" || Number(value.val) < 0) {
        throw "key `min-samples`: expected a non-negative integer";
      }
      min = Number(value.val);
    } else if (name === "subhealthy-below") {
      sub = number(name, value);
    } else if (name === "dead-below") {
      dead = number(name, value);
    } else {
      throw `unknown key \`${name}\` (known keys: ${KNOWN_KEYS.join(", ")})`;
    }
  }
  if (!(sub >= 0 && sub <= 1)) {
    throw "key `subhealthy-below`: must be between 0 and 1";
  }
  if (!(dead >= 0 && dead <= sub)) {
    throw "key `dead-below`: must be between 0 and `subhealthy-below`";
  }
  minSamples = min;
  subhealthyBelow = sub;
  deadBelow = dead;
}

export function score(stats) {
  const counted = Math.max(stats.total - stats.rejected, 0);
  let state = stats.previous;
  if (counted > 0 && counted >= minSamples) {
    const faults = Math.min(stats.timeouts + stats.failures, counted);
    const rate = (counted - faults) / counted;
    if (rate < deadBelow) {
      state = "dead";
    } else if (rate < subhealthyBelow) {
      state = "subhealthy";
    } else {
      state = "healthy";
    }
  }
  return { state, weightPermille: WEIGHT[state] };
}
