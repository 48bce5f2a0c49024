/* SPDX-License-Identifier: MIT */
/*
 * openai.h - the OpenAI API's requests and responses, as vLLM's server
 * speaks them: parsing and validation of request bodies (util/json), the
 * JSON of responses, stream chunks and errors (util/jsonw), and stop strings
 * on generated text. Pure functions: no engine, tokenizer or HTTP here.
 *
 * Errors are {"error": {"message", "type", "param", "code"}} with the HTTP
 * status as code; spyre_oai_error_type() names the type of a status.
 */
#ifndef SPYRE_SERVE_OPENAI_H
#define SPYRE_SERVE_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jsonw.h"

#define SPYRE_OAI_MAX_STOP 16		/* stop strings, and stop token ids, per request */
#define SPYRE_OAI_MAX_STOP_LEN 256	/* bytes of one stop string */
#define SPYRE_OAI_MAX_MESSAGES 1024

struct spyre_oai_error {
	unsigned int status;		/* HTTP status; 0: no error */
	char param[64];			/* the offending field, "" if none */
	char message[320];
};

__attribute__((format(printf, 4, 5)))
void spyre_oai_fail(struct spyre_oai_error *e, unsigned int status, const char *param, const char *fmt, ...);
const char *spyre_oai_error_type(unsigned int status);	/* "BadRequestError", "NotFoundError", ... */
/* The error object's JSON, malloc'ed (NULL: out of memory). */
char *spyre_oai_error_json(const struct spyre_oai_error *e, size_t *len);

enum spyre_oai_kind { SPYRE_OAI_COMPLETION, SPYRE_OAI_CHAT };

struct spyre_oai_message {
	const char *role;		/* system, user, assistant, developer, tool */
	const char *content;		/* the text (parts joined), NUL-terminated */
	size_t content_len;
};

/* A generation request, validated. Strings point into the parsed document. */
struct spyre_oai_gen {
	enum spyre_oai_kind kind;
	struct spyre_json *doc;
	const char *model;		/* NULL: not given */
	/* completions: the prompt as text, or as ids */
	const char *prompt_text;
	size_t prompt_text_len;
	int32_t *prompt_ids;		/* malloc'ed */
	size_t n_prompt_ids;
	/* chat */
	struct spyre_oai_message *messages;	/* malloc'ed */
	size_t n_messages;
	bool has_max_tokens;
	uint32_t max_tokens;
	float temperature;		/* default 1 */
	float top_p;			/* default 1 */
	int32_t top_k;			/* -1 or 0: off */
	bool has_seed;
	uint64_t seed;
	const char *stop[SPYRE_OAI_MAX_STOP];
	size_t stop_len[SPYRE_OAI_MAX_STOP];
	size_t n_stop;
	int32_t stop_ids[SPYRE_OAI_MAX_STOP];
	size_t n_stop_ids;
	bool stream;
	bool include_usage;		/* stream_options.include_usage */
	bool ignore_eos;
	bool skip_special_tokens;	/* default true */
	bool return_token_ids;		/* token ids in the choices (vLLM's return_token_ids) */
	bool add_special_tokens;	/* default true for completions (the BOS), for chat too (no template adds it) */
};

/* Parse and validate a body. 0, or -1 with @e (400 and the field). Free with spyre_oai_gen_free. */
int spyre_oai_parse_gen(enum spyre_oai_kind kind, const char *body, size_t len, struct spyre_oai_gen *g,
			struct spyre_oai_error *e);
void spyre_oai_gen_free(struct spyre_oai_gen *g);

/* /tokenize: {"prompt": text} or {"messages": [...]}, "add_special_tokens"; /detokenize: {"tokens": [ids]}. */
struct spyre_oai_tok {
	struct spyre_json *doc;
	const char *model;
	const char *prompt;
	size_t prompt_len;
	struct spyre_oai_message *messages;
	size_t n_messages;
	bool add_special_tokens;
	int32_t *tokens;
	size_t n_tokens;
};
int spyre_oai_parse_tokenize(const char *body, size_t len, struct spyre_oai_tok *t, struct spyre_oai_error *e);
int spyre_oai_parse_detokenize(const char *body, size_t len, struct spyre_oai_tok *t, struct spyre_oai_error *e);
void spyre_oai_tok_free(struct spyre_oai_tok *t);

/*
 * /v1/embeddings: {"model", "input", "encoding_format"}. "input" is a
 * string, an array of strings, an array of token ids, or an array of arrays
 * of token ids; at most SPYRE_OAI_MAX_EMBED_INPUTS inputs, none empty.
 * "encoding_format": "float" (default) or "base64" (little-endian float32s).
 * "dimensions" is refused unless it is absent or null.
 */
#define SPYRE_OAI_MAX_EMBED_INPUTS 256
struct spyre_oai_embed_input {
	const char *text;		/* a string input, or NULL */
	size_t text_len;
	int32_t *ids;			/* token ids (malloc'ed), or NULL */
	size_t n_ids;
};
struct spyre_oai_embed {
	struct spyre_json *doc;
	const char *model;		/* NULL: not given */
	struct spyre_oai_embed_input *in;	/* malloc'ed */
	size_t n;
	bool base64;
};
int spyre_oai_parse_embed(const char *body, size_t len, struct spyre_oai_embed *x, struct spyre_oai_error *e);
void spyre_oai_embed_free(struct spyre_oai_embed *x);
/*
 * The response: @n vectors of @dim floats (@vec [n][dim]), as floats or
 * base64, {"object":"list","data":[{"object":"embedding","index":i,
 * "embedding":...}],"model":...,"usage":{"prompt_tokens","total_tokens"}}.
 */
void spyre_oai_embed_response(const char *model, const float *vec, size_t n, uint32_t dim, bool base64,
			      uint32_t prompt_tokens, struct spyre_buf *out);

/*
 * The default chat template (spyre-serve runs no Jinja): each message as
 * "<|role|>\n" content "\n", then "<|assistant|>\n" for the reply. With the
 * Granite roles' special tokens in the vocabulary (@granite), Granite's:
 * "<|start_of_role|>" role "<|end_of_role|>" content "<|end_of_text|>\n" ...,
 * then "<|start_of_role|>assistant<|end_of_role|>". Into @out.
 */
void spyre_oai_chat_prompt(const struct spyre_oai_message *m, size_t n, bool granite, struct spyre_buf *out);

/* What a response says about the request. */
struct spyre_oai_resp {
	enum spyre_oai_kind kind;
	const char *id;			/* "cmpl-..." / "chatcmpl-..." */
	int64_t created;		/* unix seconds */
	const char *model;
	bool return_token_ids;
};

/* "stop", "length", "abort", "error" */
const char *spyre_oai_finish_name(int finish);	/* enum spyre_finish_reason */

/*
 * A whole response: text, its token ids, the finish reason and the stop
 * string that ended it (NULL if none), and the usage block.
 */
void spyre_oai_response(const struct spyre_oai_resp *r, const char *text, size_t text_len, const int32_t *ids,
			size_t n_ids, const char *finish, const char *stop_str, uint32_t prompt_tokens,
			struct spyre_buf *out);
/*
 * One server-sent event of a stream ("data: {...}\n\n"): @text (and @ids)
 * with @finish NULL while it goes on, the last with its finish reason. Chat
 * streams begin with a chunk of the role (@role_chunk). A usage chunk (empty
 * choices) when @usage; "data: [DONE]\n\n" from spyre_oai_sse_done.
 */
void spyre_oai_chunk(const struct spyre_oai_resp *r, bool role_chunk, const char *text, size_t text_len,
		     const int32_t *ids, size_t n_ids, const char *finish, const char *stop_str,
		     struct spyre_buf *out);
/*
 * spyre_oai_chunk() in two parts: the head, the same for every chunk of a
 * stream ("data: {\"id\": ... \"choices\":[", rendered once per request),
 * and the tail (the choice and the closing bytes).
 */
void spyre_oai_chunk_head(const struct spyre_oai_resp *r, struct spyre_buf *out);
void spyre_oai_chunk_tail(const struct spyre_oai_resp *r, bool role_chunk, const char *text, size_t text_len,
			  const int32_t *ids, size_t n_ids, const char *finish, const char *stop_str,
			  struct spyre_buf *out);
void spyre_oai_usage_chunk(const struct spyre_oai_resp *r, uint32_t prompt_tokens, uint32_t completion_tokens,
			   struct spyre_buf *out);
void spyre_oai_sse_done(struct spyre_buf *out);
/* An error inside a stream (after the 200): data: {"error": ...} */
void spyre_oai_sse_error(const struct spyre_oai_error *e, struct spyre_buf *out);

/*
 * Stop strings on generated text. Text goes in as it is decoded; what can
 * still be the start of a stop string is held back. spyre_oai_stop_feed()
 * appends @n bytes to @pending and returns how many leading bytes of it may
 * be released now; *@hit is set to the index of the first stop string found
 * (-1: none), and then the release ends just before it (the stop string and
 * anything after it are never sent).
 */
size_t spyre_oai_stop_feed(const struct spyre_oai_gen *g, struct spyre_buf *pending, const char *text, size_t n,
			   int *hit);

#endif /* SPYRE_SERVE_OPENAI_H */
