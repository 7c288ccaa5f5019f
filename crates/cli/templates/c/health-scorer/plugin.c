// `{{name}}`, a success-rate health scorer in C. Refusals (`rejected`) are signs of load,
// not faults, so they count neither way; below `min-samples` calls the window says
// nothing and the previous state stands.
//
// Config (defaults in brackets): `min-samples` [20], `subhealthy-below` [0.9],
// `dead-below` [0.5]; 0 <= dead-below <= subhealthy-below <= 1.
//
// Built by `xtask build-plugin --lang c` (see README.md), which generates
// `health_scorer.h` (wit-bindgen C bindings for world `axle:spi/health-scorer`).
//
// Ownership (canonical ABI): the config list belongs to us and is freed with the
// generated `*_free` function; the error string `init` returns must come from malloc (the
// post-return function frees it). `score` takes and returns plain records.

#include <stdlib.h>
#include <string.h>

#include "health_scorer.h"

static uint64_t min_samples = 20;
static double subhealthy_below = 0.9;
static double dead_below = 0.5;

static bool equals(const uint8_t *p, size_t len, const char *lit) {
  return len == strlen(lit) && memcmp(p, lit, len) == 0;
}

// Sets `err` to `head` + `mid` + `tail`, malloc'd (the post-return function frees it).
static void fail(health_scorer_string_t *err, const char *head, const uint8_t *mid,
                 size_t mid_len, const char *tail) {
  size_t h = strlen(head), t = strlen(tail);
  uint8_t *msg = malloc(h + mid_len + t);
  if (msg == NULL) {
    abort();  // a trap: the kernel treats the plugin as failed
  }
  memcpy(msg, head, h);
  memcpy(msg + h, mid, mid_len);
  memcpy(msg + h + mid_len, tail, t);
  err->ptr = msg;
  err->len = h + mid_len + t;
}

// A number from an int or float value; false if it is neither.
static bool number(const axle_spi_types_config_value_t *v, double *out) {
  if (v->tag == AXLE_SPI_TYPES_CONFIG_VALUE_INT) {
    *out = (double)v->val.int_;
    return true;
  }
  if (v->tag == AXLE_SPI_TYPES_CONFIG_VALUE_FLOAT) {
    *out = v->val.float_;
    return true;
  }
  return false;
}

bool exports_health_scorer_init(health_scorer_config_t *config, health_scorer_string_t *err) {
  uint64_t min = 20;
  double sub = 0.9, dead = 0.5;
  bool ok = true;
  for (size_t i = 0; i < config->len && ok; i++) {
    health_scorer_string_t *k = &config->ptr[i].f0;
    axle_spi_types_config_value_t *v = &config->ptr[i].f1;
    if (equals(k->ptr, k->len, "min-samples")) {
      if (v->tag != AXLE_SPI_TYPES_CONFIG_VALUE_INT || v->val.int_ < 0) {
        fail(err, "key `min-samples`: expected a non-negative integer", (const uint8_t *)"", 0, "");
        ok = false;
      } else {
        min = (uint64_t)v->val.int_;
      }
    } else if (equals(k->ptr, k->len, "subhealthy-below")) {
      ok = number(v, &sub);
      if (!ok) {
        fail(err, "key `subhealthy-below`: expected a number", (const uint8_t *)"", 0, "");
      }
    } else if (equals(k->ptr, k->len, "dead-below")) {
      ok = number(v, &dead);
      if (!ok) {
        fail(err, "key `dead-below`: expected a number", (const uint8_t *)"", 0, "");
      }
    } else {
      fail(err, "unknown key `", k->ptr, k->len,
           "` (known keys: dead-below, min-samples, subhealthy-below)");
      ok = false;
    }
  }
  if (ok && !(sub >= 0.0 && sub <= 1.0)) {
    fail(err, "key `subhealthy-below`: must be between 0 and 1", (const uint8_t *)"", 0, "");
    ok = false;
  }
  if (ok && !(dead >= 0.0 && dead <= sub)) {
    fail(err, "key `dead-below`: must be between 0 and `subhealthy-below`", (const uint8_t *)"", 0, "");
    ok = false;
  }
  if (ok) {
    min_samples = min;
    subhealthy_below = sub;
    dead_below = dead;
  }
  health_scorer_config_free(config);
  return ok;
}

static uint32_t weight(axle_spi_health_health_state_t state) {
  switch (state) {
    case AXLE_SPI_HEALTH_HEALTH_STATE_HEALTHY:
      return 1000;
    case AXLE_SPI_HEALTH_HEALTH_STATE_SUBHEALTHY:
      return 500;
    default:
      return 0;
  }
}

void exports_health_scorer_score(health_scorer_window_stats_t *stats,
                                 health_scorer_verdict_t *ret) {
  uint32_t counted = stats->total > stats->rejected ? stats->total - stats->rejected : 0;
  axle_spi_health_health_state_t state = stats->previous;
  if (counted > 0 && (uint64_t)counted >= min_samples) {
    uint64_t faults = (uint64_t)stats->timeouts + stats->failures;
    if (faults > counted) {
      faults = counted;
    }
    double rate = (double)(counted - faults) / (double)counted;
    if (rate < dead_below) {
      state = AXLE_SPI_HEALTH_HEALTH_STATE_DEAD;
    } else if (rate < subhealthy_below) {
      state = AXLE_SPI_HEALTH_HEALTH_STATE_SUBHEALTHY;
    } else {
      state = AXLE_SPI_HEALTH_HEALTH_STATE_HEALTHY;
    }
  }
  ret->state = state;
  ret->weight_permille = weight(state);
}
