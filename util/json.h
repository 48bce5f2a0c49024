/* SPDX-License-Identifier: MIT */
/*
 * json.h - a small, strict JSON parser (RFC 8259): util/, the home of small
 * libraries that several rooms share and that depend on nothing of the
 * project. Used by the model runner (config.json, the safetensors header),
 * spyre-trace-check and spyre-json-get.
 *
 * Strict: one value with optional whitespace around it; no comments, trailing
 * commas, NaN/Infinity, leading zeros or '+'; strings must be valid UTF-8
 * without raw control characters; \uXXXX escapes must pair surrogates;
 * numbers must be finite as doubles; an object may not repeat a key. Nesting
 * is limited to SPYRE_JSON_MAX_DEPTH arrays/objects. The parser never reads
 * text[len] or beyond (the text need not be NUL-terminated and may contain
 * NULs, which are an error outside strings and must be escaped inside).
 *
 * Errors: "<what> at byte <offset>", e.g. "expected ':' after an object key at
 * byte 17" (offset from the start of the text).
 *
 * The parsed document owns every node and string; nodes stay valid until
 * spyre_json_free(). Strings are decoded (escapes resolved) and
 * NUL-terminated; spyre_json_string() also gives their length, as a string
 * may contain "\u0000".
 */
#ifndef SPYRE_MODEL_JSON_H
#define SPYRE_MODEL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPYRE_JSON_MAX_DEPTH 64

enum spyre_json_type {
	SPYRE_JSON_NULL,
	SPYRE_JSON_BOOL,
	SPYRE_JSON_NUMBER,
	SPYRE_JSON_STRING,
	SPYRE_JSON_ARRAY,
	SPYRE_JSON_OBJECT,
};

struct spyre_json;		/* a parsed document */
struct spyre_json_node;		/* one value in it */

/* Parse @len bytes at @text. 0 and *@doc set, or -1 and a message in @err. */
int spyre_json_parse(const char *text, size_t len, struct spyre_json **doc, char *err, size_t errlen);
void spyre_json_free(struct spyre_json *doc);
const struct spyre_json_node *spyre_json_root(const struct spyre_json *doc);

enum spyre_json_type spyre_json_type(const struct spyre_json_node *v);
/* "null", "boolean", "number", "string", "array", "object" */
const char *spyre_json_type_name(enum spyre_json_type t);
/* Byte offset of the value's first character in the parsed text. */
size_t spyre_json_offset(const struct spyre_json_node *v);
/* Members of an object, elements of an array; 0 for the other types. */
size_t spyre_json_count(const struct spyre_json_node *v);

/* Object member @key (exact, NUL-terminated), or NULL (absent / @obj not an object). */
const struct spyre_json_node *spyre_json_get(const struct spyre_json_node *obj, const char *key);
/* Member or element @i in document order, or NULL; for objects *@key (if
 * non-NULL) is set to the member's key. */
const struct spyre_json_node *spyre_json_at(const struct spyre_json_node *v, size_t i, const char **key);

/* The key of an object member (a node spyre_json_at/get returned from an
 * object) and its length (it may hold a NUL), or NULL for other nodes. */
const char *spyre_json_key(const struct spyre_json_node *member, size_t *len);

/* The value as a number / bool / string: 0, or -1 when it has another type.
 * spyre_json_u64() also fails (-1) unless the number is an integer literal
 * (no fraction or exponent) from 0 to UINT64_MAX, read exactly. */
int spyre_json_number(const struct spyre_json_node *v, double *out);
int spyre_json_u64(const struct spyre_json_node *v, uint64_t *out);
int spyre_json_bool(const struct spyre_json_node *v, bool *out);
/* The decoded, NUL-terminated string (and its length), or NULL. */
const char *spyre_json_string(const struct spyre_json_node *v, size_t *len);

#endif /* SPYRE_MODEL_JSON_H */
