/* SPDX-License-Identifier: MIT */
/*
 * tokenizer_impl.h - the tokenizer's insides, shared by its files:
 * tokenizer.c (loading tokenizer.json, added tokens, the pipeline,
 * post-processors, decoders, streaming), tokenizer_text.c (normalizers and
 * pre-tokenizers), tokenizer_model.c (BPE, WordPiece, the hash tables) and
 * tokenizer_unicode.c (UTF-8 and the generated Unicode tables). Not a public
 * header.
 */
#ifndef SPYRE_SERVE_TOKENIZER_IMPL_H
#define SPYRE_SERVE_TOKENIZER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "tokenizer.h"

/* ---- growable buffers (tokenizer_unicode.c) ---- */
struct tok_buf {
	char *p;
	size_t n, cap;
};
struct tok_ids {
	int32_t *p;
	size_t n, cap;
};
int tok_buf_put(struct tok_buf *b, const void *s, size_t n);	/* 0 or -ENOMEM */
int tok_buf_put_cp(struct tok_buf *b, uint32_t cp);
int tok_ids_push(struct tok_ids *v, int32_t id);

/* ---- UTF-8 and Unicode (tokenizer_unicode.c) ---- */
/* Decode the character at s[*i] (the text is valid UTF-8) and advance *i. */
uint32_t tok_utf8_next(const char *s, size_t *i);
/* The length of a valid UTF-8 prefix, or the offset of the first bad byte. */
size_t tok_utf8_valid_len(const char *s, size_t n);
/*
 * Rust's String::from_utf8_lossy on @n bytes, appended to @out: each maximal
 * ill-formed subsequence becomes U+FFFD. With @hold, an incomplete sequence
 * at the very end that later bytes could complete is not converted: its
 * length is returned in *held (the caller keeps those bytes).
 */
int tok_utf8_lossy(const char *s, size_t n, bool hold, size_t *held, struct tok_buf *out);

int tok_category(uint32_t cp);		/* TOK_Lu... of the generated table */
bool tok_is_letter(uint32_t cp);	/* \p{L} */
bool tok_is_number(uint32_t cp);	/* \p{N} (Nd, Nl, No): Rust's char::is_numeric */
bool tok_is_digit(uint32_t cp);		/* Nd */
bool tok_is_punct(uint32_t cp);		/* \p{P} */
bool tok_is_mark(uint32_t cp);		/* \p{M} */
bool tok_is_mn(uint32_t cp);		/* Mn */
bool tok_is_other(uint32_t cp);		/* Cc, Cf, Co, Cs (unicode_categories' is_other as tokenizers runs it) */
bool tok_is_space(uint32_t cp);		/* the White_Space property: Rust's is_whitespace, regex \s */
bool tok_is_word(uint32_t cp);		/* regex \w: L, M, Nd, Nl, Pc, ZWNJ/ZWJ */
/* Lowercase of one character (1 to 3 characters) into out[]; the count. */
int tok_lower(uint32_t cp, uint32_t out[3]);
/* NFD of UTF-8 text (canonical decomposition and ordering), appended to @out. */
int tok_nfd(const char *s, size_t n, struct tok_buf *out);
const char *tok_unicode_version(void);

/* ---- hash tables (tokenizer_model.c) ---- */
/* A string -> id map over a table of strings indexed by id. */
struct tok_strmap {
	uint32_t *slot;		/* id + 1, 0: empty */
	size_t mask;
	const char *const *str;	/* by id */
	const uint32_t *len;
};
int tok_strmap_init(struct tok_strmap *m, size_t count);
void tok_strmap_fini(struct tok_strmap *m);
/* Insert @id (its string is str[id]): 0, or -EEXIST when the string is there. */
int tok_strmap_add(struct tok_strmap *m, int32_t id);
int32_t tok_strmap_get(const struct tok_strmap *m, const char *s, size_t n);	/* -1 if none */

/* ---- models (tokenizer_model.c) ---- */
struct tok_model;
/* Parse "model": 0 or -errno with @err naming the field. The vocabulary's
 * strings go into tokens[] (the caller's table, indexed by id). */
int tok_model_new(const struct spyre_json_node *m, struct tok_model **out, char *err, size_t errlen);
void tok_model_free(struct tok_model *m);
int32_t tok_model_max_id(const struct tok_model *m);	/* -1: empty */
/* id -> string of the model's vocabulary (NULL: hole) */
const char *tok_model_id_to_token(const struct tok_model *m, int32_t id, size_t *len);
int32_t tok_model_token_to_id(const struct tok_model *m, const char *s, size_t n);
/* Tokenize one pre-token; the ids are appended. */
int tok_model_tokenize(const struct tok_model *m, const char *s, size_t n, struct tok_ids *out);

/* ---- normalizers and pre-tokenizers (tokenizer_text.c) ---- */
struct tok_norm;
struct tok_pretok;
int tok_norm_new(const struct spyre_json_node *v, struct tok_norm **out, char *err, size_t errlen);
void tok_norm_free(struct tok_norm *n);
/* Normalize @n bytes into @out (replacing its contents). */
int tok_norm_apply(const struct tok_norm *nm, const char *s, size_t n, struct tok_buf *out);

int tok_pretok_new(const struct spyre_json_node *v, struct tok_pretok **out, char *err, size_t errlen);
void tok_pretok_free(struct tok_pretok *p);
/* Split @n bytes into pre-tokens, each passed to @emit (stops at its first error). */
typedef int (*tok_emit_fn)(void *ctx, const char *s, size_t n);
int tok_pretok_apply(const struct tok_pretok *p, const char *s, size_t n, tok_emit_fn emit, void *ctx);

/* GPT-2's byte <-> character mapping (ByteLevel). */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp);	/* -1 if not one of the 256 */

/* "<what>: <detail>" into @err; returns @rc. */
int tok_errf(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif /* SPYRE_SERVE_TOKENIZER_IMPL_H */
