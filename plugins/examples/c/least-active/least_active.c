// A least-active selector in C, as a two-choice selector: the plugin draws two distinct
// members by weight, and the kernel keeps the one with fewer requests in flight per unit
// of effective weight (the first on a tie), from the counts it keeps. A pick makes no host
// call whatever the set size. The same strategy as the Rust plugin in
// plugins/selector-least-active. Config: `seed` (a non-negative integer; without it the
// generator is seeded from the host).
//
// Built for world `axle:spi/two-choice-selector` (plugin.toml) by the command in README.md
// next to this file, which generates `two_choice_selector.h` (wit-bindgen C bindings).
//
// Ownership (canonical ABI), as in ../round-robin: every list and string argument is ours
// and freed with the generated `*_free` function; the error string `init` returns is
// freed by the generated post-return function, so it comes from malloc.

#include <stdlib.h>
#include <string.h>

#include "two_choice_selector.h"

// Set ids at or above this are ignored, and `select-two` on them answers no pick (the
// Rust SDK's `MAX_SETS`).
#define MAX_SETS 65536u

// The one id the kernel never gives an endpoint: "no pick" (`sdk/wit/kinds.wit`).
#define NO_PICK 0xFFFFFFFFu

// Redraws allowed when the second draw repeats the first. A member holding a share p of
// the weight repeats with odds p per draw, so even at p = 0.75 the cap is reached about
// once in 10,000 picks; then the next drawable member after a random position is taken.
#define REDRAWS 32

// One endpoint of the last table: what a set needs to know of its members.
typedef struct {
  uint32_t id;
  uint32_t weight;  // effective weight: configured × warm-up × health factor
} endpoint_weight;

typedef struct {
  bool defined;
  size_t len;
  uint32_t *members;  // our own copy, in the kernel's order
  // cumulative[i]: the weight of members 0..=i. A draw is a ticket below the total,
  // found by binary search: O(log n), 14 steps at 10,000 members.
  uint64_t *cumulative;
  size_t drawable;     // members with a weight above 0
  size_t few[2];       // when drawable <= 2: their positions
} candidate_set;

static bool initialized;          // `init` has succeeded at least once
static uint64_t rng_state;        // splitmix64, as the Rust SDK's `Rng`
static endpoint_weight *table;    // the last table, sorted by id
static size_t table_len;
static candidate_set *sets;       // indexed by set id
static size_t sets_len;

// ---- randomness -------------------------------------------------------------------------

static uint64_t next_u64(void) {
  rng_state += 0x9E3779B97F4A7C15ull;
  uint64_t z = rng_state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A uniform number in 0..n (n > 0), by Lemire's multiply-shift.
static uint64_t below(uint64_t n) {
  uint64_t r = next_u64();
  if (n <= 0xFFFFFFFFull) {
    return ((r >> 32) * n) >> 32;
  }
  return (uint64_t)(((unsigned __int128)r * n) >> 64);
}

// ---- config -----------------------------------------------------------------------------

// A malloc'd copy of the concatenation of `parts` (NULL-terminated), as the error string.
static void set_error(two_choice_selector_string_t *err, const char *const *parts) {
  size_t len = 0;
  for (const char *const *p = parts; *p != NULL; p++) {
    len += strlen(*p);
  }
  uint8_t *msg = malloc(len + 1);
  if (msg == NULL) {
    abort();  // a trap: the kernel treats the plugin as failed
  }
  size_t at = 0;
  for (const char *const *p = parts; *p != NULL; p++) {
    memcpy(msg + at, *p, strlen(*p));
    at += strlen(*p);
  }
  err->ptr = msg;
  err->len = len;
}

// The key as a NUL-terminated copy (keys are short; a longer one is cut for the message).
static void key_text(const two_choice_selector_string_t *key, char *out, size_t cap) {
  size_t n = key->len < cap - 1 ? key->len : cap - 1;
  memcpy(out, key->ptr, n);
  out[n] = '\0';
}

// Reads `seed`; every other key is an error, worded as the Rust SDK's `Config`.
static bool read_config(const two_choice_selector_config_t *config, bool *seeded, uint64_t *seed,
                        two_choice_selector_string_t *err) {
  *seeded = false;
  for (size_t i = 0; i < config->len; i++) {
    char key[128];
    key_text(&config->ptr[i].f0, key, sizeof key);
    const axle_spi_types_config_value_t *value = &config->ptr[i].f1;
    if (strcmp(key, "seed") != 0 || config->ptr[i].f0.len != 4) {
      const char *parts[] = {"unknown key `", key, "` (known keys: seed)", NULL};
      set_error(err, parts);
      return false;
    }
    if (value->tag != AXLE_SPI_TYPES_CONFIG_VALUE_INT || value->val.int_ < 0) {
      const char *parts[] = {"key `seed`: expected a non-negative integer", NULL};
      set_error(err, parts);
      return false;
    }
    *seeded = true;
    *seed = (uint64_t)value->val.int_;
  }
  return true;
}

// ---- sets -------------------------------------------------------------------------------

static void forget_sets(void) {
  for (size_t i = 0; i < sets_len; i++) {
    free(sets[i].members);
    free(sets[i].cumulative);
  }
  free(sets);
  sets = NULL;
  sets_len = 0;
}

static int by_id(const void *a, const void *b) {
  uint32_t x = ((const endpoint_weight *)a)->id, y = ((const endpoint_weight *)b)->id;
  return (x > y) - (x < y);
}

// The weight the last table gives `id`; 0 for an id it does not have.
static uint32_t weight_of(uint32_t id) {
  endpoint_weight key = {.id = id};
  const endpoint_weight *e = bsearch(&key, table, table_len, sizeof *table, by_id);
  return e == NULL ? 0 : e->weight;
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

// Fills `s` from `members`; false if memory ran out (then `s` owns nothing).
static bool prepare(candidate_set *s, const uint32_t *members, size_t len) {
  *s = (candidate_set){.len = len};
  if (len == 0) {
    s->defined = true;
    return true;
  }
  s->members = malloc(len * sizeof *s->members);
  s->cumulative = malloc(len * sizeof *s->cumulative);
  if (s->members == NULL || s->cumulative == NULL) {
    free(s->members);
    free(s->cumulative);
    *s = (candidate_set){0};
    return false;
  }
  memcpy(s->members, members, len * sizeof *members);
  // When every weight is 0 there is no preference: each member counts 1, so a set of
  // drained endpoints is still served evenly rather than not at all.
  bool any = false;
  for (size_t i = 0; i < len && !any; i++) {
    any = weight_of(members[i]) > 0;
  }
  uint64_t total = 0;
  for (size_t i = 0; i < len; i++) {
    uint64_t w = any ? weight_of(members[i]) : 1;
    if (w > 0) {
      if (s->drawable < 2) {
        s->few[s->drawable] = i;
      }
      s->drawable++;
    }
    total += w;
    s->cumulative[i] = total;
  }
  s->defined = true;
  return true;
}

static uint64_t weight_at(const candidate_set *s, size_t i) {
  return s->cumulative[i] - (i == 0 ? 0 : s->cumulative[i - 1]);
}

// A position drawn with odds weight / total: the first whose cumulative weight is above a
// ticket drawn below the total.
static size_t sample(const candidate_set *s) {
  uint64_t ticket = below(s->cumulative[s->len - 1]);
  size_t lo = 0, hi = s->len - 1;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->cumulative[mid] > ticket) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// The first drawable member other than `taken`, from a random position on.
static size_t any_other(const candidate_set *s, size_t taken) {
  size_t start = (size_t)below(s->len);
  for (size_t offset = 0; offset < s->len; offset++) {
    size_t p = (start + offset) % s->len;
    if (p != taken && weight_at(s, p) > 0) {
      return p;
    }
  }
  return start;
}

// Two distinct positions, the first drawn by weight, the second by weight among the rest;
// false when nothing can be drawn. One drawable member comes back twice.
static bool two(const candidate_set *s, size_t *first, size_t *second) {
  if (s->drawable == 0) {
    return false;
  }
  if (s->drawable <= 2) {
    // Few enough to order by weight directly: the first with odds weight / both.
    size_t a = s->few[0], b = s->drawable == 2 ? s->few[1] : s->few[0];
    uint64_t wa = weight_at(s, a);
    bool swap = s->drawable == 2 && below(wa + weight_at(s, b)) >= wa;
    *first = swap ? b : a;
    *second = swap ? a : b;
    return true;
  }
  *first = sample(s);
  for (int i = 0; i <= REDRAWS; i++) {
    *second = sample(s);
    if (*second != *first) {
      return true;
    }
  }
  *second = any_other(s, *first);
  return true;
}

// The defined, non-empty set `set`, or NULL.
static const candidate_set *set_of(uint32_t set) {
  if (set >= sets_len || !sets[set].defined || sets[set].len == 0) {
    return NULL;
  }
  return &sets[set];
}

// ---- exports ----------------------------------------------------------------------------

bool exports_two_choice_selector_init(two_choice_selector_config_t *config,
                                      two_choice_selector_string_t *err) {
  bool seeded;
  uint64_t seed;
  bool ok = read_config(config, &seeded, &seed, err);
  if (ok) {
    // A successful init starts afresh, like the SDK's new `SelectorRuntime`.
    forget_sets();
    rng_state = seeded ? seed : axle_spi_host_random();
    initialized = true;
  }
  two_choice_selector_config_free(config);
  return ok;
}

// In flight per unit of weight, compared by the kernel: nothing else is asked of it.
bool exports_two_choice_selector_measure(two_choice_selector_load_measure_t *ret) {
  *ret = (two_choice_selector_load_measure_t){.per_weight = true};
  return true;
}

void exports_two_choice_selector_endpoints_changed(two_choice_selector_endpoint_table_t *t) {
  // The kernel defines again every set it needs after a table change.
  forget_sets();
  free(table);
  table_len = 0;
  table = malloc((t->endpoints.len + 1) * sizeof *table);
  if (table != NULL) {
    // Out of memory leaves no weights: every set is then served evenly.
    for (size_t i = 0; i < t->endpoints.len; i++) {
      table[i] = (endpoint_weight){t->endpoints.ptr[i].id, t->endpoints.ptr[i].weight};
    }
    table_len = t->endpoints.len;
    qsort(table, table_len, sizeof *table, by_id);
  }
  two_choice_selector_endpoint_table_free(t);
}

void exports_two_choice_selector_define_set(two_choice_selector_set_id_t set,
                                            two_choice_selector_list_endpoint_id_t *members) {
  // Before a successful `init` there is no plugin state to define sets in (as in the SDK).
  if (initialized && set < MAX_SETS && reserve_slot(set)) {
    candidate_set *s = &sets[set];
    free(s->members);
    free(s->cumulative);
    // Out of memory leaves the set undefined: the kernel then picks at random.
    prepare(s, members->ptr, members->len);
  }
  two_choice_selector_list_endpoint_id_free(members);
}

// What the kernel calls on every pick: two candidates in one scalar, the first in the high
// half; NO_PICK in the high half is no pick.
uint64_t exports_two_choice_selector_select_two(two_choice_selector_candidate_set_t set,
                                                uint64_t hash_key) {
  (void)hash_key;  // no affinity
  const candidate_set *s = set_of(set);
  size_t first, second;
  if (s == NULL || !two(s, &first, &second)) {
    return (uint64_t)NO_PICK << 32;
  }
  return (uint64_t)s->members[first] << 32 | s->members[second];
}

// Not called while `measure` answers a measure; a host that calls it anyway gets the same
// strategy, comparing the pair through `host.facts` (two host calls).
two_choice_selector_endpoint_id_t exports_two_choice_selector_select(
    two_choice_selector_set_id_t set, uint64_t hash_key) {
  uint64_t pair = exports_two_choice_selector_select_two(set, hash_key);
  uint32_t first = (uint32_t)(pair >> 32), second = (uint32_t)pair;
  if (first == NO_PICK || second == first) {
    return first;
  }
  axle_spi_host_endpoint_facts_t a = {0}, b = {0};
  axle_spi_host_facts(first, &a);
  axle_spi_host_facts(second, &b);
  // a.in_flight / a.weight <= b.in_flight / b.weight, without a division.
  uint64_t wa = a.weight > 0 ? a.weight : 1, wb = b.weight > 0 ? b.weight : 1;
  return (uint64_t)a.in_flight * wb <= (uint64_t)b.in_flight * wa ? first : second;
}
