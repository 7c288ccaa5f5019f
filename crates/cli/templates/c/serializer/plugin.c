// `{{name}}`, a small binary encoding of the value model in C that round-trips every
// value. Each node in pre-order is one tag byte (0 null, 1 boolean, 2 signed, 3 unsigned,
// 4 float, 5 text, 6 binary, 7 array, 8 mapping) followed by its payload, little-endian:
// a byte for a boolean, 8 bytes for numbers, a u32 length and the bytes for text and
// binary, a u32 count for arrays and mappings. `decode` checks that the bytes hold
// exactly one complete value, with UTF-8 text.
//
// Config: none (any key is refused, so a typo in the manifest fails the load).
//
// Built by `xtask build-plugin --lang c` (see README.md), which generates `serializer.h`
// (wit-bindgen C bindings for world `axle:spi/serializer`).
//
// Ownership (canonical ABI): the value and byte-list arguments belong to us and are freed
// with the generated `*_free` functions; every returned list and string (the encoding,
// the decoded nodes and their texts, error messages, the content type) must come from
// malloc, because the generated post-return functions free them.

#include <stdlib.h>
#include <string.h>

#include "serializer.h"

static const char CONTENT_TYPE[] = "application/x-axle-tlv";

// A malloc'd copy of `len` bytes; NULL only when `len` is 0 (running out of memory traps).
static uint8_t *copy(const void *p, size_t len) {
  if (len == 0) {
    return NULL;
  }
  uint8_t *c = malloc(len);
  if (c == NULL) {
    abort();  // a trap: the kernel treats the call as failed
  }
  memcpy(c, p, len);
  return c;
}

static void error(serializer_string_t *err, const char *msg) {
  err->len = strlen(msg);
  err->ptr = copy(msg, err->len);
}

bool exports_serializer_init(serializer_config_t *config, serializer_string_t *err) {
  bool ok = config->len == 0;
  if (!ok) {
    static const char head[] = "unknown key `";
    static const char tail[] = "` (known keys: none)";
    const serializer_string_t *key = &config->ptr[0].f0;
    size_t len = (sizeof head - 1) + key->len + (sizeof tail - 1);
    uint8_t *msg = malloc(len);
    if (msg == NULL) {
      abort();
    }
    memcpy(msg, head, sizeof head - 1);
    memcpy(msg + sizeof head - 1, key->ptr, key->len);
    memcpy(msg + sizeof head - 1 + key->len, tail, sizeof tail - 1);
    err->ptr = msg;
    err->len = len;
  }
  serializer_config_free(config);
  return ok;
}

void exports_serializer_content_type(serializer_string_t *ret) {
  ret->len = sizeof CONTENT_TYPE - 1;
  ret->ptr = copy(CONTENT_TYPE, ret->len);
}

static uint8_t *put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) {
    *p++ = (uint8_t)(v >> (8 * i));
  }
  return p;
}

static uint8_t *put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) {
    *p++ = (uint8_t)(v >> (8 * i));
  }
  return p;
}

bool exports_serializer_encode(serializer_value_t *value, serializer_list_u8_t *ret,
                               serializer_string_t *err) {
  (void)err;  // every value has an encoding
  const axle_spi_values_node_t *nodes = value->nodes.ptr;
  size_t count = value->nodes.len;
  size_t size = 0;
  for (size_t i = 0; i < count; i++) {
    switch (nodes[i].tag) {
      case AXLE_SPI_VALUES_NODE_NULL: size += 1; break;
      case AXLE_SPI_VALUES_NODE_BOOLEAN: size += 2; break;
      case AXLE_SPI_VALUES_NODE_TEXT: size += 5 + nodes[i].val.text.len; break;
      case AXLE_SPI_VALUES_NODE_BINARY: size += 5 + nodes[i].val.binary.len; break;
      case AXLE_SPI_VALUES_NODE_ARRAY:
      case AXLE_SPI_VALUES_NODE_MAPPING: size += 5; break;
      default: size += 9; break;  // signed, unsigned, float
    }
  }
  uint8_t *out = malloc(size > 0 ? size : 1);
  if (out == NULL) {
    abort();
  }
  uint8_t *p = out;
  for (size_t i = 0; i < count; i++) {
    const axle_spi_values_node_t *n = &nodes[i];
    *p++ = n->tag;
    switch (n->tag) {
      case AXLE_SPI_VALUES_NODE_NULL: break;
      case AXLE_SPI_VALUES_NODE_BOOLEAN: *p++ = n->val.boolean ? 1 : 0; break;
      case AXLE_SPI_VALUES_NODE_SIGNED: p = put_u64(p, (uint64_t)n->val.signed_); break;
      case AXLE_SPI_VALUES_NODE_UNSIGNED: p = put_u64(p, n->val.unsigned_); break;
      case AXLE_SPI_VALUES_NODE_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &n->val.float_, sizeof bits);
        p = put_u64(p, bits);
        break;
      }
      case AXLE_SPI_VALUES_NODE_TEXT:
        p = put_u32(p, (uint32_t)n->val.text.len);
        memcpy(p, n->val.text.ptr, n->val.text.len);
        p += n->val.text.len;
        break;
      case AXLE_SPI_VALUES_NODE_BINARY:
        p = put_u32(p, (uint32_t)n->val.binary.len);
        memcpy(p, n->val.binary.ptr, n->val.binary.len);
        p += n->val.binary.len;
        break;
      case AXLE_SPI_VALUES_NODE_ARRAY: p = put_u32(p, n->val.array); break;
      case AXLE_SPI_VALUES_NODE_MAPPING: p = put_u32(p, n->val.mapping); break;
    }
  }
  ret->ptr = out;
  ret->len = size;
  serializer_value_free(value);
  return true;
}

// Whether `len` bytes at `p` are well-formed UTF-8 (what a WIT string must be).
static bool utf8(const uint8_t *p, size_t len) {
  size_t i = 0;
  while (i < len) {
    uint8_t b = p[i];
    size_t n;
    uint32_t cp;
    if (b < 0x80) { i++; continue; }
    if ((b & 0xe0) == 0xc0) { n = 1; cp = b & 0x1f; }
    else if ((b & 0xf0) == 0xe0) { n = 2; cp = b & 0x0f; }
    else if ((b & 0xf8) == 0xf0) { n = 3; cp = b & 0x07; }
    else { return false; }
    if (len - i <= n) { return false; }
    for (size_t k = 1; k <= n; k++) {
      if ((p[i + k] & 0xc0) != 0x80) { return false; }
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    static const uint32_t min[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) { return false; }
    i += n + 1;
  }
  return true;
}

// The input being decoded and how far we are.
typedef struct {
  const uint8_t *p;
  size_t len;
  size_t at;
} reader;

static bool take(reader *r, size_t n, const uint8_t **out) {
  if (r->len - r->at < n) {
    return false;
  }
  *out = r->p + r->at;
  r->at += n;
  return true;
}

static bool get_u32(reader *r, uint32_t *v) {
  const uint8_t *b;
  if (!take(r, 4, &b)) { return false; }
  *v = 0;
  for (int i = 0; i < 4; i++) { *v |= (uint32_t)b[i] << (8 * i); }
  return true;
}

static bool get_u64(reader *r, uint64_t *v) {
  const uint8_t *b;
  if (!take(r, 8, &b)) { return false; }
  *v = 0;
  for (int i = 0; i < 8; i++) { *v |= (uint64_t)b[i] << (8 * i); }
  return true;
}

// Decodes one node into `n`; NULL on success, else what went wrong.
static const char *node(reader *r, axle_spi_values_node_t *n, uint64_t *pending) {
  const uint8_t *b;
  if (!take(r, 1, &b)) { return "the input ends inside a value"; }
  const uint8_t tag = b[0];
  *n = (axle_spi_values_node_t){.tag = tag};
  uint64_t u;
  uint32_t len;
  switch (tag) {
    case AXLE_SPI_VALUES_NODE_NULL: return NULL;
    case AXLE_SPI_VALUES_NODE_BOOLEAN:
      if (!take(r, 1, &b)) { return "the input ends inside a value"; }
      if (b[0] > 1) { return "a boolean is neither 0 nor 1"; }
      n->val.boolean = b[0] == 1;
      return NULL;
    case AXLE_SPI_VALUES_NODE_SIGNED:
    case AXLE_SPI_VALUES_NODE_UNSIGNED:
    case AXLE_SPI_VALUES_NODE_FLOAT:
      if (!get_u64(r, &u)) { return "the input ends inside a value"; }
      if (tag == AXLE_SPI_VALUES_NODE_SIGNED) { n->val.signed_ = (int64_t)u; }
      else if (tag == AXLE_SPI_VALUES_NODE_UNSIGNED) { n->val.unsigned_ = u; }
      else { memcpy(&n->val.float_, &u, sizeof u); }
      return NULL;
    case AXLE_SPI_VALUES_NODE_TEXT:
    case AXLE_SPI_VALUES_NODE_BINARY:
      if (!get_u32(r, &len) || !take(r, len, &b)) { return "the input ends inside a value"; }
      if (tag == AXLE_SPI_VALUES_NODE_TEXT) {
        if (!utf8(b, len)) { return "text is not UTF-8"; }
        n->val.text = (serializer_string_t){.ptr = copy(b, len), .len = len};
      } else {
        n->val.binary = (serializer_list_u8_t){.ptr = copy(b, len), .len = len};
      }
      return NULL;
    case AXLE_SPI_VALUES_NODE_ARRAY:
    case AXLE_SPI_VALUES_NODE_MAPPING:
      if (!get_u32(r, &len)) { return "the input ends inside a value"; }
      if (tag == AXLE_SPI_VALUES_NODE_ARRAY) {
        n->val.array = len;
        *pending += len;
      } else {
        n->val.mapping = len;
        *pending += 2 * (uint64_t)len;
      }
      return NULL;
    default:
      n->tag = AXLE_SPI_VALUES_NODE_NULL;  // nothing to free
      return "unknown tag";
  }
}

bool exports_serializer_decode(serializer_list_u8_t *bytes, serializer_value_t *ret,
                               serializer_string_t *err) {
  reader r = {.p = bytes->ptr, .len = bytes->len, .at = 0};
  axle_spi_values_list_node_t nodes = {.ptr = NULL, .len = 0};
  size_t cap = 0;
  const char *problem = NULL;
  // Subtrees still to read: the root, then what each array or mapping announces.
  uint64_t pending = 1;
  while (pending > 0 && problem == NULL) {
    pending--;
    if (nodes.len == cap) {
      cap = cap ? 2 * cap : 8;
      axle_spi_values_node_t *grown = realloc(nodes.ptr, cap * sizeof *grown);
      if (grown == NULL) {
        abort();
      }
      nodes.ptr = grown;
    }
    problem = node(&r, &nodes.ptr[nodes.len], &pending);
    nodes.len++;
  }
  if (problem == NULL && r.at != r.len) {
    problem = "trailing bytes after the value";
  }
  serializer_list_u8_free(bytes);
  if (problem != NULL) {
    axle_spi_values_list_node_free(&nodes);
    error(err, problem);
    return false;
  }
  ret->nodes = nodes;
  return true;
}
