// `{{name}}`, an access check on the provider, in C. At `server-before` (after the trust
// boundary, before the limiter and the handler) it refuses with `forbidden` a caller whose
// application is in `deny`, and with `bad-request` a request without the `require-tag`
// tag; every other call passes unchanged.
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
// Built by `xtask build-plugin --lang c` (see README.md), which generates `interceptor.h`
// (wit-bindgen C bindings for world `axle:spi/interceptor`).
//
// Ownership (canonical ABI): record, list and string arguments belong to us and are freed
// with the generated `*_free` functions. What we return (the `init` error, the declared
// points, a refusal's class and message) is freed by the generated post-return functions,
// so it must come from malloc.

#include <stdlib.h>
#include <string.h>

#include "interceptor.h"

// An owned byte string.
typedef struct {
  uint8_t *ptr;
  size_t len;
} text;

static text *deny;  // the denied applications (our own copies)
static size_t deny_len;
static bool deny_unnamed;
static bool has_require_tag;
static text require_tag;

static bool equals(const uint8_t *p, size_t len, const char *lit) {
  return len == strlen(lit) && memcmp(p, lit, len) == 0;
}

static bool same(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len) {
  return a_len == b_len && memcmp(a, b, a_len) == 0;
}

// A malloc'd buffer (never NULL: running out of memory traps, and the kernel applies the
// manifest's `on-error`).
static uint8_t *alloc(size_t len) {
  uint8_t *p = malloc(len > 0 ? len : 1);
  if (p == NULL) {
    abort();
  }
  return p;
}

static text copy(const uint8_t *p, size_t len) {
  text t = {alloc(len), len};
  memcpy(t.ptr, p, len);
  return t;
}

// Sets `out` to the concatenation of `parts` (pointer, length pairs), malloc'd.
static void join(interceptor_string_t *out, const text *parts, size_t n) {
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    len += parts[i].len;
  }
  uint8_t *p = alloc(len);
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    memcpy(p + at, parts[i].ptr, parts[i].len);
    at += parts[i].len;
  }
  out->ptr = p;
  out->len = len;
}

static text lit(const char *s) {
  return (text){(uint8_t *)s, strlen(s)};
}

static void fail(interceptor_string_t *err, const char *head, const uint8_t *mid, size_t mid_len,
                 const char *tail) {
  text parts[3] = {lit(head), {(uint8_t *)mid, mid_len}, lit(tail)};
  join(err, parts, 3);
}

static void forget(void) {
  for (size_t i = 0; i < deny_len; i++) {
    free(deny[i].ptr);
  }
  free(deny);
  deny = NULL;
  deny_len = 0;
  free(require_tag.ptr);
  require_tag = (text){NULL, 0};
  has_require_tag = false;
}

bool exports_interceptor_init(interceptor_config_t *config, interceptor_string_t *err) {
  // Validate everything first; only a valid config replaces the current one.
  axle_spi_types_config_value_t *deny_value = NULL, *tag_value = NULL;
  bool unnamed = false;
  bool ok = true;
  for (size_t i = 0; i < config->len && ok; i++) {
    interceptor_string_t *k = &config->ptr[i].f0;
    axle_spi_types_config_value_t *v = &config->ptr[i].f1;
    if (equals(k->ptr, k->len, "deny")) {
      if (v->tag == AXLE_SPI_TYPES_CONFIG_VALUE_TEXT) {
        ok = v->val.text.len > 0;
      } else if (v->tag == AXLE_SPI_TYPES_CONFIG_VALUE_TEXTS) {
        for (size_t j = 0; j < v->val.texts.len; j++) {
          ok = ok && v->val.texts.ptr[j].len > 0;
        }
      } else {
        ok = false;
      }
      if (ok) {
        deny_value = v;
      } else {
        fail(err,
             "key `deny`: expected an array of non-empty strings (use `deny-unnamed = true` "
             "for callers that name no application)",
             (const uint8_t *)"", 0, "");
      }
    } else if (equals(k->ptr, k->len, "deny-unnamed")) {
      ok = v->tag == AXLE_SPI_TYPES_CONFIG_VALUE_FLAG;
      if (ok) {
        unnamed = v->val.flag;
      } else {
        fail(err, "key `deny-unnamed`: expected true or false", (const uint8_t *)"", 0, "");
      }
    } else if (equals(k->ptr, k->len, "require-tag")) {
      ok = v->tag == AXLE_SPI_TYPES_CONFIG_VALUE_TEXT && v->val.text.len > 0;
      if (ok) {
        tag_value = v;
      } else {
        fail(err, "key `require-tag`: expected a non-empty string", (const uint8_t *)"", 0, "");
      }
    } else {
      fail(err, "unknown key `", k->ptr, k->len,
           "` (known keys: deny, deny-unnamed, require-tag)");
      ok = false;
    }
  }
  if (ok) {
    // A successful init starts afresh.
    forget();
    if (deny_value != NULL && deny_value->tag == AXLE_SPI_TYPES_CONFIG_VALUE_TEXT) {
      deny = malloc(sizeof *deny);
      if (deny == NULL) {
        abort();
      }
      deny[0] = copy(deny_value->val.text.ptr, deny_value->val.text.len);
      deny_len = 1;
    } else if (deny_value != NULL && deny_value->val.texts.len > 0) {
      deny_len = deny_value->val.texts.len;
      deny = malloc(deny_len * sizeof *deny);
      if (deny == NULL) {
        abort();
      }
      for (size_t j = 0; j < deny_len; j++) {
        deny[j] = copy(deny_value->val.texts.ptr[j].ptr, deny_value->val.texts.ptr[j].len);
      }
    }
    deny_unnamed = unnamed;
    if (tag_value != NULL) {
      has_require_tag = true;
      require_tag = copy(tag_value->val.text.ptr, tag_value->val.text.len);
    }
  }
  interceptor_config_free(config);
  return ok;
}

void exports_interceptor_declare(interceptor_declaration_t *ret) {
  ret->points.ptr = (axle_spi_interception_point_t *)alloc(sizeof *ret->points.ptr);
  ret->points.ptr[0] = AXLE_SPI_INTERCEPTION_POINT_SERVER_BEFORE;
  ret->points.len = 1;
  // Only what the config needs: every part read multiplies the shapes memoised.
  ret->reads = AXLE_SPI_INTERCEPTION_READS_CONSUMER;
  if (has_require_tag) {
    ret->reads |= AXLE_SPI_INTERCEPTION_READS_TAGS;
  }
}

static bool denied(const interceptor_string_t *app) {
  if (app->len == 0) {
    return deny_unnamed;
  }
  for (size_t i = 0; i < deny_len; i++) {
    if (same(deny[i].ptr, deny[i].len, app->ptr, app->len)) {
      return true;
    }
  }
  return false;
}

static bool carries_required_tag(const interceptor_call_t *call) {
  for (size_t i = 0; i < call->tags.len; i++) {
    const interceptor_string_t *k = &call->tags.ptr[i].f0;
    if (same(k->ptr, k->len, require_tag.ptr, require_tag.len)) {
      return true;
    }
  }
  return false;
}

static void refuse(interceptor_verdict_t *ret, const char *class_, const text *parts, size_t n) {
  ret->tag = AXLE_SPI_INTERCEPTION_VERDICT_REFUSE;
  text c = lit(class_);
  join(&ret->val.refuse.class_, &c, 1);
  join(&ret->val.refuse.message, parts, n);
}

void exports_interceptor_intercept(interceptor_call_t *call, interceptor_verdict_t *ret) {
  ret->tag = AXLE_SPI_INTERCEPTION_VERDICT_PASS;
  text method[3] = {
      {call->service.ptr, call->service.len}, lit("/"), {call->method.ptr, call->method.len}};
  if (call->point != AXLE_SPI_INTERCEPTION_POINT_SERVER_BEFORE) {
    // Not declared: the kernel does not call it there.
  } else if (denied(&call->consumer_app)) {
    if (call->consumer_app.len == 0) {
      text parts[4] = {lit("a caller that names no application may not call "), method[0],
                       method[1], method[2]};
      refuse(ret, "forbidden", parts, 4);
    } else {
      text parts[6] = {lit("application `"), {call->consumer_app.ptr, call->consumer_app.len},
                       lit("` may not call "), method[0], method[1], method[2]};
      refuse(ret, "forbidden", parts, 6);
    }
  } else if (has_require_tag && !carries_required_tag(call)) {
    text parts[6] = {method[0], method[1], method[2], lit(" needs the tag `"), require_tag,
                     lit("`")};
    refuse(ret, "bad-request", parts, 6);
  }
  interceptor_call_free(call);
}
