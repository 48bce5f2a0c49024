// SPDX-License-Identifier: MIT
/*
 * server.c - the OpenAI-compatible routes of spyre-serve (server.h).
 *
 * A generation request is a struct job with two references: the HTTP
 * layer's (its ctx, dropped in closed()) and the engine's (dropped at its
 * FINISHED event). Events arrive on the engine's thread: they are counted in
 * the metrics, queued under j->lock, and wake the connection; everything
 * else of a job runs on the server thread (pump).
 */
#include "server.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jsonw.h"
#include "metrics.h"
#include "openai.h"
#include "spyre.h"

struct spyre_server {
	struct spyre_server_opts o;
	struct spyre_metrics *metrics;
	bool granite_template;
	int64_t created;
	uint64_t next_id;		/* atomic */
	pthread_mutex_t embed_lock;	/* one encoder call at a time */
};

struct qev {
	int32_t token;
	bool is_stop;
};

struct job {
	struct spyre_server *s;
	struct spyre_http_conn *c;	/* a reference of ours */
	struct spyre_oai_gen g;
	uint64_t id;			/* the engine's */
	char rid[48];			/* "cmpl-..." */
	uint32_t prompt_tokens;
	/* engine thread only */
	bool m_first;
	uint64_t m_prev;
	pthread_mutex_t lock;		/* Protects what follows */
	unsigned int refs;
	struct qev *q;
	size_t nq, capq;
	bool engine_done;
	int reason;			/* enum spyre_finish_reason, once engine_done */
	char error[256];
	bool stop_hit;			/* ended by a stop string (the engine saw an abort) */
	/* server thread only */
	struct qev *spare;		/* the other event buffer (pump swaps the two) */
	size_t capspare;
	struct spyre_buf chunk_head;	/* a stream's chunks' constant start (spyre_oai_chunk_head) */
	struct spyre_buf chunk;		/* the chunk being rendered */
	struct spyre_detok *detok;
	struct spyre_buf pending;	/* decoded text not yet released (stop strings) */
	struct spyre_buf text;		/* released text (whole responses) */
	int32_t *ids;			/* every generated token, stop tokens included */
	size_t nids, capids;
	bool role_sent, final_sent;
	const char *stop_str;
};

static double secs(uint64_t a, uint64_t b)
{
	return b > a ? (double)(b - a) * 1e-9 : 0.0;
}

static void job_put(struct job *j)
{
	unsigned int refs;

	pthread_mutex_lock(&j->lock);
	refs = --j->refs;
	pthread_mutex_unlock(&j->lock);
	if (refs)
		return;
	spyre_http_conn_put(j->c);
	spyre_oai_gen_free(&j->g);
	if (j->detok)
		spyre_detok_free(j->detok);
	spyre_buf_free(&j->pending);
	spyre_buf_free(&j->text);
	free(j->ids);
	free(j->q);
	free(j->spare);
	spyre_buf_free(&j->chunk_head);
	spyre_buf_free(&j->chunk);
	pthread_mutex_destroy(&j->lock);
	free(j);
}

/* ---- replies ------------------------------------------------------------------------------------ */

static void reply_buf(struct spyre_http_conn *c, unsigned int status, const char *ctype, struct spyre_buf *b)
{
	if (b->oom)
		spyre_http_reply(c, 500, "text/plain", "out of memory", 13, NULL);
	else
		spyre_http_reply(c, status, ctype, b->p ? b->p : "", b->len, NULL);
	spyre_buf_free(b);
}

static void reply_error(struct spyre_http_conn *c, const struct spyre_oai_error *e, const char *const *headers)
{
	size_t len;
	char *body = spyre_oai_error_json(e, &len);

	if (!body) {
		spyre_http_reply(c, 500, "text/plain", "out of memory", 13, NULL);
		return;
	}
	spyre_http_reply(c, e->status, "application/json", body, len, headers);
	free(body);
}

static void on_error(void *user, struct spyre_http_conn *c, unsigned int status, const char *message)
{
	struct spyre_oai_error e;

	(void)user;
	spyre_oai_fail(&e, status, NULL, "%s", message);
	reply_error(c, &e, NULL);
}

static bool model_ok(struct spyre_server *s, const char *model, struct spyre_oai_error *e)
{
	if (!model || !strcmp(model, s->o.model_name))
		return true;
	if (s->o.embed_name && !strcmp(model, s->o.embed_name)) {
		spyre_oai_fail(e, 400, "model", "The model `%s` is an embedding model: use /v1/embeddings", model);
		return false;
	}
	spyre_oai_fail(e, 404, "model", "The model `%s` does not exist.", model);
	return false;
}

/* ---- generation --------------------------------------------------------------------------------- */

static void on_event(void *user, const struct spyre_event *ev)
{
	struct job *j = user;
	struct spyre_server *s = j->s;
	int reason;

	if (ev->kind == SPYRE_EVENT_TOKEN) {
		if (!j->m_first) {
			j->m_first = true;
			spyre_metrics_first_token(s->metrics, secs(ev->t_arrival, ev->t_first_token),
						  secs(ev->t_arrival, ev->t_scheduled), ev->prompt_tokens);
			spyre_metrics_token(s->metrics, -1);
		} else {
			spyre_metrics_token(s->metrics, secs(j->m_prev, ev->t_now));
		}
		j->m_prev = ev->t_now;
	}
	pthread_mutex_lock(&j->lock);
	if (ev->kind == SPYRE_EVENT_TOKEN) {
		if (j->nq == j->capq) {
			size_t cap = j->capq ? 2 * j->capq : 16;
			struct qev *q = realloc(j->q, cap * sizeof(*q));

			if (q) {
				j->q = q;
				j->capq = cap;
			}
		}
		if (j->nq < j->capq)
			j->q[j->nq++] = (struct qev){ ev->token, ev->is_stop };
	} else {
		j->engine_done = true;
		j->reason = ev->reason;
		if (ev->error)
			snprintf(j->error, sizeof(j->error), "%s", ev->error);
	}
	if (ev->kind == SPYRE_EVENT_FINISHED && ev->reason == SPYRE_FINISH_ERROR)	/* the operator's to see */
		fprintf(stderr, "spyre-serve: a request failed in the model runner: %s\n",
			ev->error ? ev->error : "(no detail)");
	reason = j->stop_hit && ev->reason == SPYRE_FINISH_ABORT ? SPYRE_FINISH_STOP : (int)ev->reason;
	pthread_mutex_unlock(&j->lock);
	if (ev->kind == SPYRE_EVENT_FINISHED)
		spyre_metrics_finished(s->metrics, reason, secs(ev->t_arrival, ev->t_now), ev->prompt_tokens,
				       ev->generated_tokens, j->m_first);
	spyre_http_wake_later(j->c);	/* spyre_http_flush() after the step's events (spyre-serve.c) */
	if (ev->kind == SPYRE_EVENT_FINISHED)
		job_put(j);
}

static struct spyre_oai_resp resp_of(const struct job *j)
{
	return (struct spyre_oai_resp){
		.kind = j->g.kind, .id = j->rid, .created = j->s->created, .model = j->s->o.model_name,
		.return_token_ids = j->g.return_token_ids,
	};
}

/* Text released by the stop-string filter: to the stream, or kept for the whole response. */
static void emit(struct job *j, const int32_t *ids, size_t nids, const char *finish)
{
	struct spyre_oai_resp r = resp_of(j);
	size_t release = 0;
	struct spyre_buf *out = &j->chunk;
	int hit = -1;

	release = spyre_oai_stop_feed(&j->g, &j->pending, "", 0, &hit);
	if (hit >= 0) {
		j->stop_str = j->g.stop[hit];
		finish = "stop";
	}
	if (finish && hit < 0)
		release = j->pending.len;	/* the end: nothing can match any more */
	if (!j->g.stream) {
		spyre_buf_add(&j->text, j->pending.p, release);
		spyre_buf_consume(&j->pending, hit >= 0 ? j->pending.len : release);
		return;
	}
	/* the chunk: the request's head, rendered once, and this token's tail, in a buffer kept */
	out->len = 0;
	if (release || finish || (nids && j->g.return_token_ids)) {
		if (!j->chunk_head.len)
			spyre_oai_chunk_head(&r, &j->chunk_head);
		spyre_buf_add(out, j->chunk_head.p, j->chunk_head.len);
		spyre_oai_chunk_tail(&r, false, j->pending.p ? j->pending.p : "", release, ids, nids, finish,
				     j->stop_str, out);
	}
	spyre_buf_consume(&j->pending, hit >= 0 ? j->pending.len : release);
	if (out->len && !out->oom)
		spyre_http_write(j->c, out->p, out->len);
}

static void finish(struct job *j, const char *reason, const char *error)
{
	struct spyre_oai_resp r = resp_of(j);
	struct spyre_oai_error e;
	struct spyre_buf out;

	j->final_sent = true;
	spyre_buf_init(&out);
	if (error) {
		spyre_oai_fail(&e, 500, NULL, "%s", error);
		if (!j->g.stream) {
			reply_error(j->c, &e, NULL);
			return;
		}
		spyre_oai_sse_error(&e, &out);
	} else if (!j->g.stream) {
		spyre_oai_response(&r, j->text.p ? j->text.p : "", j->text.len, j->ids, j->nids, reason,
				   j->stop_str, j->prompt_tokens, &out);
		reply_buf(j->c, 200, "application/json", &out);
		return;
	}
	if (j->g.include_usage && !error)
		spyre_oai_usage_chunk(&r, j->prompt_tokens, (uint32_t)j->nids, &out);
	spyre_oai_sse_done(&out);
	spyre_http_write(j->c, out.p, out.len);
	spyre_buf_free(&out);
	spyre_http_end(j->c);
}

static void token(struct job *j, const struct qev *ev)
{
	const char *piece = "";
	size_t len = 0;

	if (j->nids == j->capids) {
		size_t cap = j->capids ? 2 * j->capids : 64;
		int32_t *ids = realloc(j->ids, cap * sizeof(*ids));

		if (!ids)
			return;
		j->ids = ids;
		j->capids = cap;
	}
	j->ids[j->nids++] = ev->token;
	/* The EOS or stop token ends the text; it is counted, not printed. */
	if (!ev->is_stop && !spyre_detok_push(j->detok, ev->token, &piece, &len))
		spyre_buf_add(&j->pending, piece, len);
	emit(j, &ev->token, 1, NULL);
	if (j->stop_str) {
		pthread_mutex_lock(&j->lock);
		j->stop_hit = true;
		pthread_mutex_unlock(&j->lock);
		spyre_engine_abort(j->s->o.engine, j->id);
		finish(j, "stop", NULL);
	}
}

static void pump(void *user, struct spyre_http_conn *c, void *ctx)
{
	struct job *j = ctx;
	struct qev *q;
	size_t nq, cap, i;
	bool done;
	int reason;
	char error[256];

	(void)user;
	(void)c;
	pthread_mutex_lock(&j->lock);
	/* the events so far; the engine goes on in the other buffer (no allocation per token) */
	q = j->q;
	nq = j->nq;
	cap = j->capq;
	j->q = j->spare;
	j->capq = j->capspare;
	j->nq = 0;
	done = j->engine_done;
	reason = j->reason;
	memcpy(error, j->error, sizeof(error));
	pthread_mutex_unlock(&j->lock);
	for (i = 0; i < nq && !j->final_sent; i++)
		token(j, &q[i]);
	j->spare = q;
	j->capspare = cap;
	if (j->final_sent)
		return;
	if (done) {
		const char *piece;
		size_t len;

		if (reason == SPYRE_FINISH_ERROR) {
			finish(j, NULL, error[0] ? error : "the model runner failed");
			return;
		}
		if (!spyre_detok_flush(j->detok, &piece, &len))
			spyre_buf_add(&j->pending, piece, len);
		emit(j, NULL, 0, spyre_oai_finish_name(reason));
		finish(j, j->stop_str ? "stop" : spyre_oai_finish_name(reason), NULL);
	}
	/* Not done: the HTTP layer suspends the connection until the next event. */
}

/* The prompt's token ids: given, or the text (or chat messages) tokenized. 0, or -1 with @e. */
static int prompt_ids(struct spyre_server *s, struct spyre_oai_gen *g, int32_t **ids, size_t *n,
		      struct spyre_oai_error *e)
{
	struct spyre_buf chat;
	char err[160];
	size_t i;
	int rc;

	if (g->prompt_ids) {
		*ids = g->prompt_ids;
		*n = g->n_prompt_ids;
		g->prompt_ids = NULL;
	} else {
		spyre_buf_init(&chat);
		if (g->kind == SPYRE_OAI_CHAT)
			spyre_oai_chat_prompt(g->messages, g->n_messages, s->granite_template, &chat);
		rc = spyre_tokenizer_encode(s->o.tok, g->kind == SPYRE_OAI_CHAT ? chat.p : g->prompt_text,
					    g->kind == SPYRE_OAI_CHAT ? chat.len : g->prompt_text_len,
					    g->add_special_tokens, ids, n, err, sizeof(err));
		spyre_buf_free(&chat);
		if (rc) {
			spyre_oai_fail(e, rc == -ENOMEM ? 500 : 400, "prompt", "cannot tokenize the prompt: %s", err);
			return -1;
		}
	}
	for (i = 0; i < *n; i++)
		if ((uint32_t)(*ids)[i] >= s->o.vocab) {
			spyre_oai_fail(e, 400, "prompt", "token id %d at %zu is outside the vocabulary (%u tokens)",
				       (*ids)[i], i, s->o.vocab);
			free(*ids);
			*ids = NULL;
			return -1;
		}
	if (!*n) {
		spyre_oai_fail(e, 400, "prompt", "the prompt is empty");
		free(*ids);
		*ids = NULL;
		return -1;
	}
	return 0;
}

static void generate(struct spyre_server *s, struct spyre_http_conn *c, const struct spyre_http_request *rq,
		     enum spyre_oai_kind kind)
{
	struct spyre_request_params p = { 0 };
	struct spyre_oai_error e = { 0 };
	static const char *const retry[] = { "Retry-After: 1", NULL };
	struct job *j;
	int32_t *ids = NULL;
	size_t n = 0;
	uint32_t max_tokens;
	char err[256];
	int rc;

	j = calloc(1, sizeof(*j));
	if (!j) {
		on_error(s, c, 500, "out of memory");
		return;
	}
	pthread_mutex_init(&j->lock, NULL);
	j->s = s;
	j->c = c;
	spyre_http_conn_get(c);
	j->refs = 1;
	if (spyre_oai_parse_gen(kind, rq->body, rq->body_len, &j->g, &e) || !model_ok(s, j->g.model, &e) ||
	    prompt_ids(s, &j->g, &ids, &n, &e))
		goto fail;
	if (n >= s->o.max_model_len) {
		spyre_oai_fail(&e, 400, kind == SPYRE_OAI_CHAT ? "messages" : "prompt",
			       "This model's maximum context length is %u tokens. However, your request has %zu "
			       "input tokens. Please reduce the length of the input.", s->o.max_model_len, n);
		goto fail;
	}
	max_tokens = j->g.has_max_tokens ? j->g.max_tokens : s->o.max_model_len - (uint32_t)n;
	if (max_tokens > s->o.max_model_len - n) {
		spyre_oai_fail(&e, 400, "max_tokens", "This model's maximum context length is %u tokens. However, "
			       "you requested %zu tokens (%zu in the input, %u for the completion). Please reduce "
			       "the length of the input or of max_tokens.", s->o.max_model_len,
			       n + max_tokens, n, max_tokens);
		goto fail;
	}
	j->detok = spyre_detok_new(s->o.tok, j->g.skip_special_tokens);
	if (!j->detok) {
		spyre_oai_fail(&e, 500, NULL, "out of memory");
		goto fail;
	}
	snprintf(j->rid, sizeof(j->rid), "%s-%016" PRIx64, kind == SPYRE_OAI_CHAT ? "chatcmpl" : "cmpl",
		 __atomic_add_fetch(&s->next_id, 1, __ATOMIC_RELAXED));
	j->prompt_tokens = (uint32_t)n;
	p.prompt = ids;
	p.prompt_len = (uint32_t)n;
	p.max_tokens = max_tokens;
	p.sampling.temperature = j->g.temperature;
	p.sampling.top_p = j->g.top_p;
	p.sampling.top_k = j->g.top_k > 0 ? (uint32_t)j->g.top_k : 0;
	p.sampling.seed = j->g.seed;
	p.sampling.has_seed = j->g.has_seed;
	p.stop_ids = j->g.stop_ids;
	p.n_stop_ids = (uint32_t)j->g.n_stop_ids;
	p.ignore_eos = j->g.ignore_eos;
	j->refs = 2;		/* events may come before add returns */
	rc = spyre_engine_add(s->o.engine, &p, on_event, j, &j->id, err, sizeof(err));
	free(ids);
	ids = NULL;
	if (rc) {
		j->refs = 1;
		spyre_oai_fail(&e, rc == -EAGAIN ? 429 : rc == -EINVAL || rc == -E2BIG ? 400 : 500, NULL, "%s", err);
		reply_error(c, &e, rc == -EAGAIN ? retry : NULL);
		job_put(j);
		return;
	}
	spyre_http_set_ctx(c, j);
	if (!j->g.stream) {
		spyre_http_defer(c);
		return;
	}
	spyre_http_stream(c, 200, "text/event-stream");
	if (kind == SPYRE_OAI_CHAT) {
		struct spyre_oai_resp r = resp_of(j);
		struct spyre_buf out;

		spyre_buf_init(&out);
		spyre_oai_chunk(&r, true, "", 0, NULL, 0, NULL, NULL, &out);
		spyre_http_write(c, out.p, out.len);
		spyre_buf_free(&out);
	}
	return;
fail:
	free(ids);
	reply_error(c, &e, NULL);
	job_put(j);
}

static void closed(void *user, void *ctx, bool ok)
{
	struct spyre_server *s = user;
	struct job *j = ctx;
	bool done;

	(void)ok;
	pthread_mutex_lock(&j->lock);
	done = j->engine_done;
	pthread_mutex_unlock(&j->lock);
	/* The client is gone (or has its answer): its request stops, its blocks go back. */
	if (!done)
		spyre_engine_abort(s->o.engine, j->id);
	job_put(j);
}

/* ---- the other routes --------------------------------------------------------------------------- */

/* One entry of GET /v1/models. */
static void model_card(struct spyre_jw *w, const struct spyre_server *s, const char *name, uint32_t max_len)
{
	spyre_jw_obj(w);
	spyre_jw_key(w, "id");
	spyre_jw_str(w, name);
	spyre_jw_key(w, "object");
	spyre_jw_str(w, "model");
	spyre_jw_key(w, "created");
	spyre_jw_int(w, s->created);
	spyre_jw_key(w, "owned_by");
	spyre_jw_str(w, "spyre");
	spyre_jw_key(w, "root");
	spyre_jw_str(w, name);
	spyre_jw_key(w, "max_model_len");
	spyre_jw_uint(w, max_len);
	spyre_jw_obj_end(w);
}

static void models(struct spyre_server *s, struct spyre_http_conn *c)
{
	struct spyre_buf b;
	struct spyre_jw w;

	spyre_buf_init(&b);
	spyre_jw_init(&w, &b);
	spyre_jw_obj(&w);
	spyre_jw_key(&w, "object");
	spyre_jw_str(&w, "list");
	spyre_jw_key(&w, "data");
	spyre_jw_arr(&w);
	model_card(&w, s, s->o.model_name, s->o.max_model_len);
	if (s->o.embed_name) {
		model_card(&w, s, s->o.embed_name, s->o.embed_max_len);
	}
	spyre_jw_arr_end(&w);
	spyre_jw_obj_end(&w);
	reply_buf(c, 200, "application/json", &b);
}

static void version(struct spyre_server *s, struct spyre_http_conn *c)
{
	char body[64];
	int n = snprintf(body, sizeof(body), "{\"version\":\"%d.%d\"}", LIBSPYRE_VERSION_MAJOR,
			 LIBSPYRE_VERSION_MINOR);

	(void)s;
	spyre_http_reply(c, 200, "application/json", body, (size_t)n, NULL);
}

static void metrics(struct spyre_server *s, struct spyre_http_conn *c)
{
	struct spyre_engine_stats st;
	struct spyre_buf b;
	struct timespec ts;

	spyre_engine_get_stats(s->o.engine, &st);
	spyre_buf_init(&b);
	spyre_metrics_render(s->metrics, &st, &b);
	/* the HTTP layer's one thread serves /metrics too: its CPU time is this thread's */
	if (!clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		spyre_metrics_render_http_cpu(s->metrics, (double)ts.tv_sec + ts.tv_nsec * 1e-9, &b);
	reply_buf(c, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
}

static void tokenize(struct spyre_server *s, struct spyre_http_conn *c, const struct spyre_http_request *rq)
{
	struct spyre_oai_error e = { 0 };
	struct spyre_oai_tok t;
	struct spyre_buf b, chat;
	struct spyre_jw w;
	int32_t *ids = NULL;
	size_t n = 0, i;
	char err[160];
	int rc;

	if (spyre_oai_parse_tokenize(rq->body, rq->body_len, &t, &e)) {
		reply_error(c, &e, NULL);
		return;
	}
	if (!model_ok(s, t.model, &e)) {
		spyre_oai_tok_free(&t);
		reply_error(c, &e, NULL);
		return;
	}
	spyre_buf_init(&chat);
	if (t.messages)
		spyre_oai_chat_prompt(t.messages, t.n_messages, s->granite_template, &chat);
	rc = spyre_tokenizer_encode(s->o.tok, t.messages ? chat.p : t.prompt, t.messages ? chat.len : t.prompt_len,
				    t.add_special_tokens, &ids, &n, err, sizeof(err));
	spyre_buf_free(&chat);
	spyre_oai_tok_free(&t);
	if (rc) {
		spyre_oai_fail(&e, rc == -ENOMEM ? 500 : 400, "prompt", "cannot tokenize: %s", err);
		reply_error(c, &e, NULL);
		return;
	}
	spyre_buf_init(&b);
	spyre_jw_init(&w, &b);
	spyre_jw_obj(&w);
	spyre_jw_key(&w, "count");
	spyre_jw_uint(&w, n);
	spyre_jw_key(&w, "max_model_len");
	spyre_jw_uint(&w, s->o.max_model_len);
	spyre_jw_key(&w, "tokens");
	spyre_jw_arr(&w);
	for (i = 0; i < n; i++)
		spyre_jw_int(&w, ids[i]);
	spyre_jw_arr_end(&w);
	spyre_jw_obj_end(&w);
	free(ids);
	reply_buf(c, 200, "application/json", &b);
}

static void detokenize(struct spyre_server *s, struct spyre_http_conn *c, const struct spyre_http_request *rq)
{
	struct spyre_oai_error e = { 0 };
	struct spyre_oai_tok t;
	struct spyre_buf b;
	struct spyre_jw w;
	char *text = NULL, err[160];
	size_t len = 0, i;
	int rc;

	if (spyre_oai_parse_detokenize(rq->body, rq->body_len, &t, &e)) {
		reply_error(c, &e, NULL);
		return;
	}
	if (!model_ok(s, t.model, &e))
		goto fail;
	for (i = 0; i < t.n_tokens; i++)
		if ((uint32_t)t.tokens[i] >= s->o.vocab) {
			spyre_oai_fail(&e, 400, "tokens", "token id %d is outside the vocabulary (%u tokens)",
				       t.tokens[i], s->o.vocab);
			goto fail;
		}
	rc = spyre_tokenizer_decode(s->o.tok, t.tokens, t.n_tokens, false, &text, &len, err, sizeof(err));
	if (rc) {
		spyre_oai_fail(&e, rc == -ENOMEM ? 500 : 400, "tokens", "cannot detokenize: %s", err);
		goto fail;
	}
	spyre_oai_tok_free(&t);
	spyre_buf_init(&b);
	spyre_jw_init(&w, &b);
	spyre_jw_obj(&w);
	spyre_jw_key(&w, "prompt");
	spyre_jw_strn(&w, text, len);
	spyre_jw_obj_end(&w);
	free(text);
	reply_buf(c, 200, "application/json", &b);
	return;
fail:
	spyre_oai_tok_free(&t);
	reply_error(c, &e, NULL);
}

/*
 * /v1/embeddings: parse, tokenize each text input ([CLS] ... [SEP]),
 * truncate to the model's longest input (a text keeps its last token, the
 * [SEP]; ids are cut), and run the whole request as one batch of the
 * encoder. The call runs on the HTTP thread (under embed_lock): other
 * connections wait for it (a batch of MiniLM is milliseconds to a few
 * hundred on the CPU; the card's handle has its own lock too).
 */
static void embeddings(struct spyre_server *s, struct spyre_http_conn *c, const struct spyre_http_request *rq)
{
	struct spyre_oai_error e = { 0 };
	struct spyre_oai_embed x;
	struct spyre_buf b;
	int32_t *ids = NULL;
	uint32_t *lens = NULL, total = 0, max = s->o.embed_max_len;
	float *vec = NULL;
	size_t i, k, o = 0;
	char err[256];
	int rc;

	if (spyre_oai_parse_embed(rq->body, rq->body_len, &x, &e)) {
		reply_error(c, &e, NULL);
		return;
	}
	if (x.model && !strcmp(x.model, s->o.model_name)) {
		spyre_oai_fail(&e, 400, "model", "The model `%s` does not support embeddings", x.model);
		goto out;
	}
	if (!s->o.embed_name) {
		if (x.model)
			spyre_oai_fail(&e, 404, "model", "The model `%s` does not exist.", x.model);
		else
			spyre_oai_fail(&e, 400, "model", "The model `%s` does not support embeddings",
				       s->o.model_name);
		goto out;
	}
	if (x.model && strcmp(x.model, s->o.embed_name)) {
		spyre_oai_fail(&e, 404, "model", "The model `%s` does not exist.", x.model);
		goto out;
	}
	ids = malloc(x.n * max * sizeof(*ids));
	lens = malloc(x.n * sizeof(*lens));
	vec = malloc(x.n * s->o.embed_dim * sizeof(*vec));
	if (!ids || !lens || !vec) {
		spyre_oai_fail(&e, 500, NULL, "out of memory");
		goto out;
	}
	for (i = 0; i < x.n; i++) {
		const int32_t *in = x.in[i].ids;
		int32_t *t = NULL;
		size_t n = x.in[i].n_ids;

		if (x.in[i].text) {
			rc = spyre_tokenizer_encode(s->o.embed_tok, x.in[i].text, x.in[i].text_len, true, &t, &n, err,
						    sizeof(err));
			if (rc) {
				spyre_oai_fail(&e, rc == -ENOMEM ? 500 : 400, "input", "cannot tokenize input %zu: %s",
					       i, err);
				goto out;
			}
			in = t;
		}
		if (!n) {
			free(t);
			spyre_oai_fail(&e, 400, "input", "input %zu has no tokens", i);
			goto out;
		}
		for (k = 0; k < n; k++)
			if ((uint32_t)in[k] >= s->o.embed_vocab) {
				spyre_oai_fail(&e, 400, "input", "input %zu: token id %d is outside the vocabulary "
					       "(%u tokens)", i, in[k], s->o.embed_vocab);
				free(t);
				goto out;
			}
		lens[i] = (uint32_t)(n < max ? n : max);
		memcpy(ids + o, in, lens[i] * sizeof(*ids));
		if (t && n > max)
			ids[o + max - 1] = t[n - 1];	/* the [SEP] stays, as the tokenizer's truncation */
		o += lens[i];
		total += lens[i];
		free(t);
	}
	pthread_mutex_lock(&s->embed_lock);
	rc = s->o.embed(s->o.embed_ctx, ids, lens, (uint32_t)x.n, vec, err, sizeof(err));
	pthread_mutex_unlock(&s->embed_lock);
	if (rc) {
		spyre_oai_fail(&e, rc == -EINVAL ? 400 : 500, rc == -EINVAL ? "input" : NULL, "%s", err);
		goto out;
	}
	spyre_buf_init(&b);
	spyre_oai_embed_response(s->o.embed_name, vec, x.n, s->o.embed_dim, x.base64, total, &b);
	reply_buf(c, 200, "application/json", &b);
out:
	if (e.status)
		reply_error(c, &e, NULL);
	free(ids);
	free(lens);
	free(vec);
	spyre_oai_embed_free(&x);
}

enum route { R_COMPLETIONS, R_CHAT, R_EMBEDDINGS, R_MODELS, R_HEALTH, R_VERSION, R_TOKENIZE, R_DETOKENIZE,
	     R_METRICS };

static const struct {
	const char *path, *method;
	enum route r;
} routes[] = {
	{ "/v1/completions", "POST", R_COMPLETIONS },
	{ "/v1/chat/completions", "POST", R_CHAT },
	{ "/v1/embeddings", "POST", R_EMBEDDINGS },
	{ "/v1/models", "GET", R_MODELS },
	{ "/health", "GET", R_HEALTH },
	{ "/version", "GET", R_VERSION },
	{ "/tokenize", "POST", R_TOKENIZE },
	{ "/detokenize", "POST", R_DETOKENIZE },
	{ "/metrics", "GET", R_METRICS },
};

static void request(void *user, struct spyre_http_conn *c, const struct spyre_http_request *rq)
{
	struct spyre_server *s = user;
	struct spyre_oai_error e;
	char allow[32];
	const char *const hdrs[] = { allow, NULL };
	size_t i;
	bool get;

	for (i = 0; i < sizeof(routes) / sizeof(routes[0]) && strcmp(routes[i].path, rq->path); i++)
		;
	if (i == sizeof(routes) / sizeof(routes[0])) {
		spyre_oai_fail(&e, 404, NULL, "no route %s", rq->path);
		reply_error(c, &e, NULL);
		return;
	}
	get = !strcmp(routes[i].method, "GET");
	if (strcmp(rq->method, routes[i].method) && !(get && !strcmp(rq->method, "HEAD"))) {
		snprintf(allow, sizeof(allow), "Allow: %s", routes[i].method);
		spyre_oai_fail(&e, 405, NULL, "method %s is not allowed on %s (use %s)", rq->method, rq->path,
			       routes[i].method);
		reply_error(c, &e, hdrs);
		return;
	}
	switch (routes[i].r) {
	case R_COMPLETIONS: generate(s, c, rq, SPYRE_OAI_COMPLETION); break;
	case R_CHAT: generate(s, c, rq, SPYRE_OAI_CHAT); break;
	case R_EMBEDDINGS: embeddings(s, c, rq); break;
	case R_MODELS: models(s, c); break;
	case R_HEALTH: spyre_http_reply(c, 200, "text/plain", "", 0, NULL); break;
	case R_VERSION: version(s, c); break;
	case R_TOKENIZE: tokenize(s, c, rq); break;
	case R_DETOKENIZE: detokenize(s, c, rq); break;
	case R_METRICS: metrics(s, c); break;
	}
}

const struct spyre_http_ops spyre_server_http_ops = {
	.request = request,
	.pump = pump,
	.error = on_error,
	.closed = closed,
};

struct spyre_server *spyre_server_new(const struct spyre_server_opts *o)
{
	struct spyre_server *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->o = *o;
	pthread_mutex_init(&s->embed_lock, NULL);
	s->metrics = spyre_metrics_new(o->model_name, o->max_model_len);
	if (!s->metrics) {
		pthread_mutex_destroy(&s->embed_lock);
		free(s);
		return NULL;
	}
	s->granite_template = spyre_tokenizer_token_to_id(o->tok, "<|start_of_role|>") >= 0 &&
			      spyre_tokenizer_token_to_id(o->tok, "<|end_of_role|>") >= 0 &&
			      spyre_tokenizer_token_to_id(o->tok, "<|end_of_text|>") >= 0;
	s->created = (int64_t)time(NULL);
	return s;
}

void spyre_server_free(struct spyre_server *s)
{
	if (!s)
		return;
	spyre_metrics_free(s->metrics);
	pthread_mutex_destroy(&s->embed_lock);
	free(s);
}
