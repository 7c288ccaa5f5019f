// `{{name}}`, a tag filter in C. A request tagged `<key>=<value>` reaches only the
// candidates whose endpoint carries the same tag; a request without the tag, or one that
// no candidate matches, keeps every candidate (the filter narrows, it never empties).
//
// Config: `key` (text, default "lane"): the tag that routes.
//
// Built by `xtask build-plugin --lang c` (see README.md), which generates `router.h`
// (wit-bindgen C bindings for world `axle:spi/router`) next to this file's build.
//
// Ownership (canonical ABI): list and string arguments are allocated in our memory by the
// host and belong to us: each export frees them with the generated `*_free` functions, or
// hands them back as its result. A returned list or string is freed by the generated
// post-return function, so it must come from malloc/realloc. Only malloc, realloc, free,
// memcpy and memcmp are used: the component imports nothing but the world's `host`.

#include <stdlib.h>
#include <string.h>

#include "router.h"

// Endpoint ids at or above this are not indexed; such endpoints never match a tag.
#define MAX_ID 1048576u

// One endpoint's value of the routing tag.
typedef struct {
  bool present;
  uint8_t *ptr;  // our own copy
  size_t len;
} tag_value;

static uint8_t *key_ptr;  // the routing tag's name (our own copy)
static size_t key_len;
static tag_value *tags;   // indexed by endpoint id
static size_t tags_len;

// Whether `s` holds exactly the text `lit`.
static bool equals(const uint8_t *p, size_t len, const char *lit) {
  return len == strlen(lit) && memcmp(p, lit, len) == 0;
}

// A malloc'd copy of `len` bytes (never NULL: running out of memory traps).
static uint8_t *copy(const void *p, size_t len) {
  uint8_t *c = malloc(len > 0 ? len : 1);
  if (c == NULL) {
    abort();  // a trap: the kernel treats the call as failed
  }
  memcpy(c, p, len);
  return c;
}

// Sets `err` to `head` + `mid` + `tail`, malloc'd (the post-return function frees it).
static void fail(router_string_t *err, const char *head, const uint8_t *mid, size_t mid_len,
                 const char *tail) {
  size_t h = strlen(head), t = strlen(tail);
  uint8_t *msg = malloc(h + mid_len + t);
  if (msg == NULL) {
    abort();
  }
  memcpy(msg, head, h);
  memcpy(msg + h, mid, mid_len);
  memcpy(msg + h + mid_len, tail, t);
  err->ptr = msg;
  err->len = h + mid_len + t;
}

static void forget_tags(void) {
  for (size_t i = 0; i < tags_len; i++) {
    free(tags[i].ptr);
  }
  free(tags);
  tags = NULL;
  tags_len = 0;
}

bool exports_router_init(router_config_t *config, router_string_t *err) {
  const uint8_t *key = (const uint8_t *)"lane";
  size_t len = 4;
  bool ok = true;
  for (size_t i = 0; i < config->len && ok; i++) {
    router_string_t *name = &config->ptr[i].f0;
    axle_spi_types_config_value_t *value = &config->ptr[i].f1;
    if (equals(name->ptr, name->len, "key")) {
      if (value->tag != AXLE_SPI_TYPES_CONFIG_VALUE_TEXT || value->val.text.len == 0) {
        fail(err, "key `key`: expected a non-empty string", (const uint8_t *)"", 0, "");
        ok = false;
      } else {
        key = value->val.text.ptr;
        len = value->val.text.len;
      }
    } else {
      fail(err, "unknown key `", name->ptr, name->len, "` (known keys: key)");
      ok = false;
    }
  }
  if (ok) {
    // A successful init starts afresh.
    free(key_ptr);
    key_ptr = copy(key, len);
    key_len = len;
    forget_tags();
  }
  router_config_free(config);
  return ok;
}

// Only the routing tag: the kernel fills nothing else and asks once per value of it. The
// key list and its string are malloc'd: the post-return function frees them.
void exports_router_declare(router_route_reads_t *ret) {
  router_string_t *keys = malloc(sizeof *keys);
  if (keys == NULL) {
    abort();
  }
  keys[0] = (router_string_t){.ptr = copy(key_ptr, key_len), .len = key_len};
  memset(ret, 0, sizeof *ret);
  ret->tags.tag = AXLE_SPI_ROUTING_TAG_READS_KEYS;
  ret->tags.val.keys = (router_list_string_t){.ptr = keys, .len = 1};
}

void exports_router_endpoints_changed(router_endpoint_table_t *table) {
  forget_tags();
  size_t needed = 0;
  for (size_t i = 0; i < table->endpoints.len; i++) {
    uint32_t id = table->endpoints.ptr[i].id;
    if (id < MAX_ID && (size_t)id + 1 > needed) {
      needed = (size_t)id + 1;
    }
  }
  if (needed > 0) {
    tags = calloc(needed, sizeof *tags);
    if (tags == NULL) {
      abort();
    }
    tags_len = needed;
  }
  for (size_t i = 0; i < table->endpoints.len; i++) {
    axle_spi_types_endpoint_t *e = &table->endpoints.ptr[i];
    if (e->id >= tags_len) {
      continue;
    }
    for (size_t t = 0; t < e->tags.len; t++) {
      router_string_t *k = &e->tags.ptr[t].f0;
      router_string_t *v = &e->tags.ptr[t].f1;
      if (k->len == key_len && memcmp(k->ptr, key_ptr, key_len) == 0) {
        free(tags[e->id].ptr);
        tags[e->id] = (tag_value){.present = true, .ptr = copy(v->ptr, v->len), .len = v->len};
      }
    }
  }
  router_endpoint_table_free(table);
}

// Whether endpoint `id` carries the routing tag with value `want`.
static bool matches(uint32_t id, const router_string_t *want) {
  if (id >= tags_len || !tags[id].present) {
    return false;
  }
  return tags[id].len == want->len && memcmp(tags[id].ptr, want->ptr, want->len) == 0;
}

void exports_router_route(router_list_endpoint_id_t *candidates, router_request_t *request,
                          router_list_endpoint_id_t *ret) {
  const router_string_t *want = NULL;
  for (size_t t = 0; t < request->tags.len; t++) {
    router_string_t *k = &request->tags.ptr[t].f0;
    if (k->len == key_len && memcmp(k->ptr, key_ptr, key_len) == 0) {
      want = &request->tags.ptr[t].f1;
    }
  }
  size_t kept = 0;
  if (want != NULL) {
    for (size_t i = 0; i < candidates->len; i++) {
      kept += matches(candidates->ptr[i], want);
    }
  }
  if (kept > 0) {
    // Compact the matching ids to the front of the list we own, in order.
    size_t j = 0;
    for (size_t i = 0; i < candidates->len; i++) {
      if (matches(candidates->ptr[i], want)) {
        candidates->ptr[j++] = candidates->ptr[i];
      }
    }
    candidates->len = kept;
  }
  // The candidates' buffer becomes the answer: the post-return function frees it.
  *ret = *candidates;
  router_request_free(request);
}
