/* SPDX-License-Identifier: MIT */
/*
 * tokenizer.h - Hugging Face tokenizer.json in C: byte-level BPE (GPT-2,
 * Llama 3, Granite) and WordPiece (BERT), with their normalizers,
 * pre-tokenizers, post-processors, decoders, and special/added tokens.
 * Encodes and decodes as Hugging Face `tokenizers` does (checked against it
 * on the host). Depends on util/json only. A loaded tokenizer is read-only:
 * any number of threads may use it at once.
 */
#ifndef SPYRE_SERVE_TOKENIZER_H
#define SPYRE_SERVE_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct spyre_tokenizer;

/* From a tokenizer.json's text (@len bytes) or a file. 0, or -errno with a message naming the field. */
int spyre_tokenizer_new(const char *json, size_t len, struct spyre_tokenizer **out, char *err, size_t errlen);
int spyre_tokenizer_load(const char *path, struct spyre_tokenizer **out, char *err, size_t errlen);
void spyre_tokenizer_free(struct spyre_tokenizer *t);

/*
 * Encode @len bytes of UTF-8 (invalid UTF-8: -EILSEQ). @add_special: the
 * post-processor's special tokens (BOS, [CLS] ... [SEP]) as HF's
 * add_special_tokens. *ids is malloc'ed (free()), *n its length.
 */
int spyre_tokenizer_encode(const struct spyre_tokenizer *t, const char *text, size_t len, bool add_special,
			   int32_t **ids, size_t *n, char *err, size_t errlen);
/* Decode to malloc'ed NUL-terminated UTF-8 (as HF's decode, skip_special_tokens as given). */
int spyre_tokenizer_decode(const struct spyre_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
			   char **text, size_t *len, char *err, size_t errlen);

uint32_t spyre_tokenizer_vocab_size(const struct spyre_tokenizer *t);	/* highest id + 1, added tokens included */
int32_t spyre_tokenizer_token_to_id(const struct spyre_tokenizer *t, const char *token);	/* -1 if none */
bool spyre_tokenizer_is_special(const struct spyre_tokenizer *t, int32_t id);

/*
 * Streaming detokenization: feed ids one at a time, get the text they add.
 * Text is only released when it is whole UTF-8 (a byte-level token may end
 * inside a character) and as HF's decode of the whole sequence would print it,
 * so the concatenation of every piece equals decode(all ids).
 */
struct spyre_detok;
struct spyre_detok *spyre_detok_new(const struct spyre_tokenizer *t, bool skip_special);
/* Appends the new text (NUL-terminated, valid until the next call) to *piece; 0 or -errno. */
int spyre_detok_push(struct spyre_detok *d, int32_t id, const char **piece, size_t *len);
/* What is still held back (an incomplete character at the end: as decode() would print it). */
int spyre_detok_flush(struct spyre_detok *d, const char **piece, size_t *len);
void spyre_detok_free(struct spyre_detok *d);

#endif /* SPYRE_SERVE_TOKENIZER_H */
