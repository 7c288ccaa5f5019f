// A round-robin selector in C: each candidate set keeps its own cursor, so every member
// gets its turn in order, whatever other sets the kernel defines. Same behaviour as the
// Rust plugin in plugins/selector-round-robin, including before `init` and after a failed
// one. Config: none (any key is refused). Also the C template of `axle plugins new --kind
// selector`.
//
// Built for world `axle:spi/selector` by the command in README.md next to this file, which
// generates `selector.h` (wit-bindgen C bindings) for the build.
//
// Ownership (canonical ABI): every list and string argument is allocated in our memory by
// the host through `cabi_realloc` and belongs to us, so each export frees its arguments
// with the generated `*_free` functions. The error string `init` returns is freed by the
// generated post-return function, so it must come from malloc/realloc too.
//
// Only malloc, realloc, free, memcpy and memset are used: nothing here needs WASI, so the
// component imports nothing but the world's `host` interface.

#include <stdlib.h>
#include <string.h>

#include "selector.h"

// Set ids are small integers the kernel hands out densely from 0; like the Rust SDK
// (`MAX_SETS`), ids at or above this are ignored and `select` on them answers no pick.
#define MAX_SETS 65536u

// What `select` answers for "no pick": the kernel then picks at random. The one id the
// kernel never gives an endpoint (`sdk/wit/kinds.wit`).
#define NO_PICK 0xFFFFFFFFu

typedef struct {
  bool defined;
  uint32_t *members;  // our own copy; NULL when the set is empty
  size_t len;
  // The index of the next pick, taken modulo `len`. `size_t` is 32 bits on wasm32, so it
  // wraps exactly like the Rust plugin's `usize` cursor.
  size_t cursor;
} candidate_set;

static bool initialized;     // `init` has succeeded at least once
static candidate_set *sets;  // indexed by set id
static size_t sets_len;      // number of slots in `sets`

// Forgets every set (keeps nothing allocated).
static void forget_sets(void) {
  for (size_t i = 0; i < sets_len; i++) {
    free(sets[i].members);
  }
  free(sets);
  sets = NULL;
  sets_len = 0;
}

// Returns `dst` advanced past `len` bytes copied from `src`.
static uint8_t *append(uint8_t *dst, const void *src, size_t len) {
  memcpy(dst, src, len);
  return dst + len;
}

// This plugin has no config keys: the first key present is an error, as in
// `Config::reject_unknown(&[])`: "unknown key `K` (known keys: none)".
bool exports_selector_init(selector_config_t *config, selector_string_t *err) {
  bool ok = config->len == 0;
  if (!ok) {
    static const char head[] = "unknown key `";
    static const char tail[] = "` (known keys: none)";
    const selector_string_t *key = &config->ptr[0].f0;
    size_t len = (sizeof head - 1) + key->len + (sizeof tail - 1);
    uint8_t *msg = malloc(len);
    if (msg == NULL) {
      abort();  // a trap: the kernel treats the plugin as failed
    }
    uint8_t *p = append(msg, head, sizeof head - 1);
    p = append(p, key->ptr, key->len);
    append(p, tail, sizeof tail - 1);
    err->ptr = msg;
    err->len = len;
  } else {
    // A successful init starts afresh, like the SDK's new `SelectorRuntime`.
    forget_sets();
    initialized = true;
  }
  selector_config_free(config);
  return ok;
}

void exports_selector_endpoints_changed(selector_endpoint_table_t *table) {
  // The kernel defines again every set it needs after a table change.
  forget_sets();
  selector_endpoint_table_free(table);
}

// Makes sure slot `id` exists; false if memory ran out.
static bool reserve_slot(uint32_t id) {
  if (id < sets_len) {
    return true;
  }
  size_t new_len = (size_t)id + 1;
  candidate_set *grown = realloc(sets, new_len * sizeof *grown);
  if (grown == NULL) {
    return false;
  }
  memset(grown + sets_len, 0, (new_len - sets_len) * sizeof *grown);
  sets = grown;
  sets_len = new_len;
  return true;
}

void exports_selector_define_set(selector_set_id_t set, selector_list_endpoint_id_t *members) {
  // Before a successful `init` there is no plugin state to define sets in (as in the SDK).
  if (initialized && set < MAX_SETS && reserve_slot(set)) {
    candidate_set *s = &sets[set];
    free(s->members);
    *s = (candidate_set){0};
    uint32_t *copy = NULL;
    if (members->len > 0) {
      copy = malloc(members->len * sizeof *copy);
    }
    // Out of memory leaves the set undefined: `select` answers no pick.
    if (members->len == 0 || copy != NULL) {
      if (copy != NULL) {
        memcpy(copy, members->ptr, members->len * sizeof *copy);
      }
      *s = (candidate_set){.defined = true, .members = copy, .len = members->len, .cursor = 0};
    }
  }
  selector_list_endpoint_id_free(members);
}

selector_endpoint_id_t exports_selector_select(selector_set_id_t set, uint64_t hash_key) {
  (void)hash_key;  // round-robin has no affinity
  if (set >= sets_len || !sets[set].defined || sets[set].len == 0) {
    return NO_PICK;  // the kernel picks at random
  }
  candidate_set *s = &sets[set];
  selector_endpoint_id_t pick = s->members[s->cursor % s->len];
  s->cursor++;
  return pick;
}
