/* SPDX-License-Identifier: MIT */
/*
 * server.h - spyre-serve's routes: the OpenAI-compatible API over the engine
 * (engine.h) and the tokenizer, behind the HTTP layer (http.h). It only
 * translates: a request is parsed and checked (openai.h), its prompt
 * tokenized, handed to the engine; the engine's events (on the engine's
 * thread) are queued on the request and wake its connection; the server
 * thread turns them into text (streaming detokenizer, stop strings) and
 * responses or server-sent events. A client that goes away aborts its
 * request in the engine, which frees its blocks.
 */
#ifndef SPYRE_SERVE_SERVER_H
#define SPYRE_SERVE_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "http.h"
#include "tokenizer.h"

struct spyre_server;

struct spyre_server_opts {
	const char *model_name;			/* the served name ("model" in requests and responses) */
	const struct spyre_tokenizer *tok;	/* borrowed */
	struct spyre_engine *engine;		/* borrowed, running (spyre_engine_start) */
	uint32_t max_model_len;
	uint32_t vocab;
	/*
	 * The embedding model (--embedding-model), or embed_name NULL: its
	 * served name, tokenizer (borrowed), vector size, longest input, and
	 * the encoder: @embed(@embed_ctx, packed ids, lens, batch, out
	 * [batch][embed_dim], err) -> 0, -EINVAL (a bad batch) or -errno. It is
	 * called on the HTTP thread, one call at a time (the server's lock).
	 */
	const char *embed_name;
	const struct spyre_tokenizer *embed_tok;
	uint32_t embed_dim, embed_max_len, embed_vocab;
	int (*embed)(void *ctx, const int32_t *ids, const uint32_t *lens, uint32_t batch, float *out, char *err,
		     size_t errlen);
	void *embed_ctx;
};

struct spyre_server *spyre_server_new(const struct spyre_server_opts *o);
/* After spyre_http_stop() (no request is open) and spyre_engine_free() (no event comes). */
void spyre_server_free(struct spyre_server *s);
/* The HTTP layer's callbacks; their user pointer is the server. */
extern const struct spyre_http_ops spyre_server_http_ops;

#endif /* SPYRE_SERVE_SERVER_H */
