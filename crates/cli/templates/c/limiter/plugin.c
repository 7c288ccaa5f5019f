// `{{name}}`, a fixed-window limiter in C. Each key may take `permits` units per window of
// `window-ms` milliseconds; a request over the limit is refused with the time left until
// the window turns. Time comes from the kernel: `acquire` is given its clock, and
// `key-defined` reads the same clock (`axle_spi_host_now_ns`); a plugin has no other.
//
// Config (defaults in brackets): `permits` [100], `window-ms` [1000], both at least 1.
//
// Built by `xtask build-plugin --lang c` (see README.md), which generates `limiter.h`
// (wit-bindgen C bindings for world `axle:spi/limiter`).
//
// Ownership (canonical ABI): list, record and string arguments belong to us and are freed
// with the generated `*_free` functions; the error string `init` returns must come from
// malloc (the post-return function frees it).

#include <stdlib.h>
#include <string.h>

#include "limiter.h"

// Key ids are small integers the kernel hands out densely from 0; ids at or above this
// are admitted without counting (like the Rust SDK's `MAX_KEYS`).
#define MAX_KEYS 1048576u

typedef struct {
  bool defined;
  uint64_t start_ns;
  uint64_t used;
} window;

static uint64_t limit = 100;
static uint64_t window_ns = 1000u * 1000000u;
static window *windows;  // indexed by key id
static size_t windows_len;

static bool equals(const uint8_t *p, size_t len, const char *lit) {
  return len == strlen(lit) && memcmp(p, lit, len) == 0;
}

// Sets `err` to `head` + `mid` + `tail`, malloc'd (the post-return function frees it).
static void fail(limiter_string_t *err, const char *head, const uint8_t *mid, size_t mid_len,
                 const char *tail) {
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

bool exports_limiter_init(limiter_config_t *config, limiter_string_t *err) {
  int64_t permits = 100, window_ms = 1000;
  bool ok = true;
  for (size_t i = 0; i < config->len && ok; i++) {
    limiter_string_t *k = &config->ptr[i].f0;
    axle_spi_types_config_value_t *v = &config->ptr[i].f1;
    if (equals(k->ptr, k->len, "permits")) {
      ok = v->tag == AXLE_SPI_TYPES_CONFIG_VALUE_INT && v->val.int_ >= 1;
      if (ok) {
        permits = v->val.int_;
      } else {
        fail(err, "key `permits`: expected an integer, at least 1", (const uint8_t *)"", 0, "");
      }
    } else if (equals(k->ptr, k->len, "window-ms")) {
      ok = v->tag == AXLE_SPI_TYPES_CONFIG_VALUE_INT && v->val.int_ >= 1 &&
           v->val.int_ <= 4294967295LL;
      if (ok) {
        window_ms = v->val.int_;
      } else {
        fail(err, "key `window-ms`: expected an integer between 1 and 4294967295",
             (const uint8_t *)"", 0, "");
      }
    } else {
      fail(err, "unknown key `", k->ptr, k->len, "` (known keys: permits, window-ms)");
      ok = false;
    }
  }
  if (ok) {
    // A successful init starts afresh.
    limit = (uint64_t)permits;
    window_ns = (uint64_t)window_ms * 1000000u;
    free(windows);
    windows = NULL;
    windows_len = 0;
  }
  limiter_config_free(config);
  return ok;
}

void exports_limiter_key_defined(uint32_t key, limiter_limit_key_t *attributes) {
  // The same limit for every key: the attributes are not needed.
  limiter_limit_key_free(attributes);
  if (key >= MAX_KEYS) {
    return;
  }
  if (key >= windows_len) {
    size_t new_len = (size_t)key + 1;
    window *grown = realloc(windows, new_len * sizeof *grown);
    if (grown == NULL) {
      return;  // out of memory: the key is admitted without counting
    }
    memset(grown + windows_len, 0, (new_len - windows_len) * sizeof *grown);
    windows = grown;
    windows_len = new_len;
  }
  windows[key] = (window){.defined = true, .start_ns = axle_spi_host_now_ns(), .used = 0};
}

// 0 admits; any other value refuses, and is the retry-after in milliseconds.
uint32_t exports_limiter_acquire(uint32_t key, uint32_t permits, uint64_t now) {
  if (key >= windows_len || !windows[key].defined) {
    return 0;
  }
  window *w = &windows[key];
  if (now - w->start_ns >= window_ns || now < w->start_ns) {
    w->start_ns = now;
    w->used = 0;
  }
  if (w->used + permits <= limit) {
    w->used += permits;
    return 0;
  }
  uint64_t left_ns = w->start_ns + window_ns - now;
  uint64_t ms = (left_ns + 999999u) / 1000000u;
  return ms < 1 ? 1 : (ms > 4294967295u ? 4294967295u : (uint32_t)ms);
}
