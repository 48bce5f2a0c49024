// SPDX-License-Identifier: MIT
/*
 * serve-bench - a load client for spyre-serve with the metrics of
 * `vllm bench serve` (docs/serve.md, "serve-bench"): N streamed completions
 * of an exact prompt length (token-id lists, seeded) and an exact output
 * length (ignore_eos, max_tokens), at each concurrency level (at most that
 * many in flight); per level successful requests, duration, request /
 * output-token / total-token throughput and the mean, median and p99 of TTFT,
 * TPOT = (E2EL - TTFT) / (out - 1), ITL (gaps between streamed chunks that
 * carry tokens) and E2EL. A request fails unless it answers 200, ends with
 * [DONE] and streams exactly --output-len tokens.
 *
 * Loopback only (plain sockets, serve/tests/http-client.h, kept alive and
 * driven by one thread's epoll; the SSE chunks scanned, or parsed with
 * util/json.c). Exit status: 0 every request of every level
 * succeeded, 1 some failed, 2 bad usage or the server unreachable.
 */
#include <inttypes.h>
#include <math.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "http-client.h"
#include "json.h"

#define MAX_LEVELS 16

struct opts {
	int port;
	const char *model;
	int num_prompts, input_len, output_len, vocab;
	uint64_t seed;
	int levels[MAX_LEVELS], nlevels;
	const char *json;
	int timeout_s;
};

struct req {
	char *body;
	/* results */
	bool ok;
	int out_tokens;
	double ttft, e2el;	/* seconds */
	double *itl;		/* gaps, seconds */
	int n_itl;
	char err[128];
};

struct level {
	int conc;
	struct req *reqs;
	int next;		/* the next request to start */
	const struct opts *o;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* splitmix64: the prompts' token ids */
static uint64_t mix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static char *body_of(const struct opts *o, int i)
{
	size_t cap = (size_t)o->input_len * 12 + strlen(o->model) + 512;
	char *b = malloc(cap);
	uint64_t s = o->seed * 1000003u + (uint64_t)i;
	int k, n;

	n = snprintf(b, cap, "{\"model\":\"%s\",\"prompt\":[", o->model);
	for (k = 0; k < o->input_len; k++)
		n += snprintf(b + n, cap - n, "%s%d", k ? "," : "", 1 + (int)(mix(&s) % (uint64_t)(o->vocab - 1)));
	snprintf(b + n, cap - n, "],\"max_tokens\":%d,\"ignore_eos\":true,\"temperature\":0,\"stream\":true,"
		 "\"return_token_ids\":true,\"stream_options\":{\"include_usage\":true}}", o->output_len);
	return b;
}

/*
 * The client shares the CPU with the server when both run in one VM (the
 * card's run in timed mode), so a chunk is first scanned, not parsed: the
 * number of ids in its "token_ids" array. A key can only occur unescaped as a
 * key (inside a JSON string its quotes are escaped). 0, or -1 when the chunk
 * needs a full parse (no "token_ids", an "error" or a "usage" key).
 */
static int scan_chunk(const char *d, size_t n, int *got)
{
	const char *p = memmem(d, n, "\"token_ids\":", 12), *end = d + n;
	int count = 0;
	bool in_num = false;

	if (!p || memmem(d, n, "\"error\":", 8) || memmem(d, n, "\"usage\":", 8))
		return -1;
	for (p += 12; p < end && (*p == ' ' || *p == '\t'); p++)
		;
	if (p == end || *p++ != '[')
		return -1;
	for (; p < end && *p != ']'; p++) {
		bool digit = *p >= '0' && *p <= '9';

		if (digit && !in_num)
			count++;
		else if (!digit && *p != ',' && *p != ' ' && *p != '-')
			return -1;
		in_num = digit;
	}
	if (p == end)
		return -1;
	*got = count;
	return 0;
}

/* ---- one streamed request ------------------------------------------------------------------ */

struct stream {
	char *raw;		/* bytes received */
	size_t rlen, rcap, rpos;	/* rpos: body bytes consumed (after the head) */
	bool head_done, chunked, body_end;
	long clen;		/* Content-Length of a body that is not chunked, -1 none */
	char *body;		/* decoded body */
	size_t blen, bcap, bpos;	/* bpos: SSE bytes consumed */
	int status;
};

static void grow(char **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return;
	while (*cap < need)
		*cap = *cap ? *cap * 2 : 4096;
	*p = realloc(*p, *cap);
}

/* Move what is complete of the body from raw to body (undoing chunked encoding). */
static void decode(struct stream *s)
{
	if (!s->head_done) {
		char *end;

		s->raw[s->rlen] = '\0';
		end = strstr(s->raw, "\r\n\r\n");
		if (!end)
			return;
		*end = '\0';
		if (sscanf(s->raw, "HTTP/1.%*d %d", &s->status) != 1)
			s->status = -1;
		s->chunked = strcasestr(s->raw, "Transfer-Encoding: chunked") != NULL;
		{
			const char *cl = strcasestr(s->raw, "\r\nContent-Length:");

			s->clen = cl ? strtol(cl + 17, NULL, 10) : -1;
		}
		*end = '\r';
		s->head_done = true;
		s->rpos = (size_t)(end - s->raw) + 4;
	}
	for (;;) {
		size_t avail = s->rlen - s->rpos;
		char *p = s->raw + s->rpos, *nl, *end;
		unsigned long n;

		if (!avail || s->body_end)
			return;
		if (!s->chunked) {
			grow(&s->body, &s->bcap, s->blen + avail + 1);
			memcpy(s->body + s->blen, p, avail);
			s->blen += avail;
			s->rpos += avail;
			s->body[s->blen] = '\0';
			if (s->clen >= 0 && s->blen >= (size_t)s->clen)
				s->body_end = true;
			return;
		}
		nl = memmem(p, avail, "\r\n", 2);
		if (!nl)
			return;
		n = strtoul(p, &end, 16);
		if (end == p) {
			s->body_end = true;	/* malformed */
			return;
		}
		if (!n) {
			s->body_end = true;
			return;
		}
		if ((size_t)(nl + 2 - p) + n + 2 > avail)
			return;
		grow(&s->body, &s->bcap, s->blen + n + 1);
		memcpy(s->body + s->blen, nl + 2, n);
		s->blen += n;
		s->body[s->blen] = '\0';
		s->rpos += (size_t)(nl + 2 - p) + n + 2;
	}
}

/*
 * The requests of a level run on one thread, as vLLM's client runs them on
 * one asyncio event loop: up to the level's concurrency of connections, each
 * kept alive from one request to the next (vLLM pools its connections), an
 * epoll over them. A connection carries one request at a time; its next
 * request is sent as soon as the last one's stream has ended. A kept
 * connection the server closed meanwhile (nothing came back) is reopened
 * once for the request; a connection is closed after an error or a
 * response that is not a whole 200 stream.
 */
struct conn {
	int fd;
	struct req *r;			/* in flight, or NULL */
	bool reused;			/* the request went out on a kept connection */
	struct stream s;
	double t0, last;
	int itl_cap, usage_tokens;
	bool done, bad;
};

/* Send @c's request (its t0 set); 0, or -1 with the request failed. */
static int send_req(struct conn *c, const struct opts *o, int ep)
{
	struct req *r = c->r;
	size_t n, blen = strlen(r->body);
	char *msg = malloc(blen + 256);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	int ret = -1;

	n = (size_t)snprintf(msg, 256, "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
			     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", blen);
	memcpy(msg + n, r->body, blen);
	n += blen;
	c->reused = c->fd >= 0;
	if (c->fd < 0) {
		c->fd = hconnect(o->port, o->timeout_s);
		if (c->fd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev)) {
			close(c->fd);
			c->fd = -1;
		}
	}
	if (c->fd >= 0 && !hsend(c->fd, msg, n))
		ret = 0;
	free(msg);
	return ret;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);	/* leaves the epoll set */
	c->fd = -1;
}

/* Start request @r on @c (t0 now). */
static void start_req(struct conn *c, struct req *r, const struct opts *o, int ep)
{
	memset(&c->s, 0, sizeof(c->s));
	c->r = r;
	c->t0 = now();
	c->last = 0;
	c->itl_cap = 0;
	c->usage_tokens = -1;
	c->done = c->bad = false;
	r->ok = false;
	r->out_tokens = 0;
	r->ttft = -1;
	if (!send_req(c, o, ep))
		return;
	conn_close(c);
	if (c->reused && !send_req(c, o, ep))	/* the kept connection was gone: a new one */
		return;
	conn_close(c);
	snprintf(r->err, sizeof(r->err), "cannot connect or send");
	r->e2el = now() - c->t0;
	c->r = NULL;
}

/* The stream of @c's request has ended (or its connection): judge it. */
static void end_req(struct conn *c, const struct opts *o)
{
	struct req *r = c->r;
	struct stream *s = &c->s;

	r->e2el = now() - c->t0;
	if (!s->head_done || s->status != 200)
		snprintf(r->err, sizeof(r->err), "HTTP status %d%s%.60s", s->status, s->body ? ": " : "",
			 s->body ? s->body : "");
	else if (c->bad)
		;
	else if (!c->done)
		snprintf(r->err, sizeof(r->err), "no [DONE] (after %d tokens)", r->out_tokens);
	else if (r->out_tokens != o->output_len)
		snprintf(r->err, sizeof(r->err), "%d tokens, not %d", r->out_tokens, o->output_len);
	else if (c->usage_tokens >= 0 && c->usage_tokens != r->out_tokens)
		snprintf(r->err, sizeof(r->err), "usage says %d tokens, %d streamed", c->usage_tokens, r->out_tokens);
	else
		r->ok = true;
	if (!(s->body_end && s->status == 200 && c->done))
		conn_close(c);
	free(s->raw);
	free(s->body);
	memset(s, 0, sizeof(*s));
	c->r = NULL;
}

/* The complete server-sent events received so far on @c, at time @t. */
static void events(struct conn *c, double t)
{
	struct req *r = c->r;
	struct stream *s = &c->s;

	for (;;) {
		char *ev = s->body ? s->body + s->bpos : NULL, *end, *data, err[128];
		struct spyre_json *doc;
		const struct spyre_json_node *root, *ch, *ids, *u;
		int got;

		if (!ev || !(end = strstr(ev, "\n\n")))
			break;
		s->bpos = (size_t)(end + 2 - s->body);
		data = strstr(ev, "data: ");
		if (!data || data > end)
			continue;
		data += 6;
		if (!strncmp(data, "[DONE]", 6)) {
			c->done = true;
			continue;
		}
		if (!scan_chunk(data, (size_t)(end - data), &got))
			goto counted;
		if (spyre_json_parse(data, (size_t)(end - data), &doc, err, sizeof(err))) {
			snprintf(r->err, sizeof(r->err), "bad chunk: %.60s", err);
			c->bad = true;
			continue;
		}
		root = spyre_json_root(doc);
		if (spyre_json_get(root, "error")) {	/* an error event in the stream */
			const char *m = spyre_json_string(spyre_json_get(spyre_json_get(root, "error"),
									 "message"), NULL);

			snprintf(r->err, sizeof(r->err), "error event: %.100s", m ? m : "(no message)");
			c->bad = true;
		}
		ch = spyre_json_at(spyre_json_get(root, "choices"), 0, NULL);
		ids = spyre_json_get(ch, "token_ids");
		got = (int)spyre_json_count(ids);
		u = spyre_json_get(spyre_json_get(root, "usage"), "completion_tokens");
		if (u) {
			double d;

			if (!spyre_json_number(u, &d))
				c->usage_tokens = (int)d;
		}
		spyre_json_free(doc);
counted:
		if (got > 0) {
			if (r->ttft < 0) {
				r->ttft = t - c->t0;
			} else {
				if (r->n_itl == c->itl_cap)
					r->itl = realloc(r->itl, sizeof(double) *
							 (size_t)(c->itl_cap = c->itl_cap ? c->itl_cap * 2 : 64));
				r->itl[r->n_itl++] = t - c->last;
			}
			c->last = t;
			r->out_tokens += got;
		}
	}
}

/* @c's socket is readable: read (times taken when recv returns); true when its request ended. */
static bool on_readable(struct conn *c, const struct opts *o, int ep)
{
	struct stream *s = &c->s;
	ssize_t k;
	double t;

	grow(&s->raw, &s->rcap, s->rlen + 16384 + 1);
	k = recv(c->fd, s->raw + s->rlen, s->rcap - s->rlen - 1, MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return false;
	if (k <= 0) {
		if (!s->rlen && c->reused) {	/* a kept connection the server had closed: once more */
			struct req *r = c->r;
			double t0 = c->t0;

			conn_close(c);
			start_req(c, r, o, ep);
			c->t0 = t0;
			c->reused = false;
			return !c->r;
		}
		conn_close(c);
		end_req(c, o);
		return true;
	}
	t = now();
	s->rlen += (size_t)k;
	decode(s);
	if (!s->head_done || s->status == 200)
		events(c, t);
	if (!s->body_end)
		return false;
	end_req(c, o);
	return true;
}

/* Run every request of @l; at most l->conc in flight. */
static void run_requests(struct level *l)
{
	const struct opts *o = l->o;
	struct conn *cs = calloc((size_t)l->conc, sizeof(*cs));
	struct epoll_event *evs = calloc((size_t)l->conc, sizeof(*evs));
	int ep = epoll_create1(EPOLL_CLOEXEC), i, inflight = 0;

	if (!cs || !evs || ep < 0) {
		fprintf(stderr, "serve-bench: out of memory or epoll\n");
		exit(2);
	}
	for (i = 0; i < l->conc; i++)
		cs[i].fd = -1;
	for (;;) {
		int n;

		/* every idle connection takes the next request */
		for (i = 0; i < l->conc && l->next < o->num_prompts; i++)
			if (!cs[i].r) {
				start_req(&cs[i], &l->reqs[l->next++], o, ep);
				inflight += cs[i].r != NULL;
			}
		if (!inflight)
			break;
		n = epoll_wait(ep, evs, l->conc, o->timeout_s * 1000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {	/* nothing for timeout_s: every request in flight fails */
			for (i = 0; i < l->conc; i++)
				if (cs[i].r) {
					conn_close(&cs[i]);
					snprintf(cs[i].r->err, sizeof(cs[i].r->err), "no answer for %d s", o->timeout_s);
					end_req(&cs[i], o);
					inflight--;
				}
			continue;
		}
		for (i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;

			if (c->r && on_readable(c, o, ep))
				inflight -= !c->r;
		}
	}
	for (i = 0; i < l->conc; i++)
		conn_close(&cs[i]);
	close(ep);
	free(cs);
	free(evs);
}

/* ---- statistics -------------------------------------------------------------------------------- */

struct stat3 {
	double mean, p50, p99;
};

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* numpy.percentile's default (linear interpolation); values in ms */
static double pct(const double *v, int n, double q)
{
	double pos = q / 100.0 * (n - 1), f = floor(pos);
	int i = (int)f;

	if (i + 1 >= n)
		return v[n - 1];
	return v[i] + (v[i + 1] - v[i]) * (pos - f);
}

static struct stat3 stats(double *v, int n)
{
	struct stat3 s = { 0, 0, 0 };
	int i;

	if (!n)
		return s;
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	for (i = 0; i < n; i++)
		s.mean += v[i];
	s.mean = s.mean / n * 1e3;
	s.p50 = pct(v, n, 50) * 1e3;
	s.p99 = pct(v, n, 99) * 1e3;
	return s;
}

struct result {
	int conc, completed, failed;
	long input_tokens, output_tokens;
	double duration, req_tp, out_tp, tot_tp;
	struct stat3 ttft, tpot, itl, e2el;
	/* from spyre-serve's /metrics around the level (-1: not served) */
	double steps, host_s, device_s, queue_s, server_ttft_s;
	double engine_cpu_s, http_cpu_s;	/* the server's engine and HTTP threads (-1: not served) */
	double replays;				/* steps the runner replayed as launch graphs (-1: not served) */
	double client_cpu_s;			/* this process's CPU time over the level */
};

/*
 * The server's counters around a level: spyre-serve's engine (docs/serve.md,
 * "Metrics") and vLLM's queue time and TTFT sums and counts; -1 each where a
 * server has none.
 */
#define NCOUNTERS 10
static void engine_counters(int port, double v[NCOUNTERS])
{
	static const char *const names[NCOUNTERS] = {
		"spyre:engine_steps_total", "spyre:runner_host_seconds_total", "spyre:runner_device_seconds_total",
		"vllm:request_queue_time_seconds_sum", "vllm:request_queue_time_seconds_count",
		"vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_count",
		"spyre:engine_thread_cpu_seconds_total", "spyre:http_thread_cpu_seconds_total",
		"spyre:runner_graph_replays_total",
	};
	int i;

	for (i = 0; i < NCOUNTERS; i++)
		v[i] = get_metric(port, names[i]);
}

/* this process's CPU time (user + system), seconds */
static double cpu_self(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec * 1e-6;
}

/* c1 - c0 of counter @i, -1 without it */
static double delta(const double *c0, const double *c1, int i)
{
	return c0[i] >= 0 && c1[i] >= 0 ? c1[i] - c0[i] : -1;
}

/* (a1 - a0) / (n1 - n0) of two counters around a level, -1 without them */
static double delta_mean(const double *c0, const double *c1, int sum, int count)
{
	double n = c1[count] - c0[count];

	return c0[sum] >= 0 && c1[sum] >= 0 && c0[count] >= 0 && n > 0 ? (c1[sum] - c0[sum]) / n : -1;
}

static int run_level(const struct opts *o, int conc, struct result *res)
{
	struct level l = { .conc = conc, .o = o };
	double *ttft, *tpot, *e2el, *itl, t0, cpu0, c0[NCOUNTERS], c1[NCOUNTERS];
	int i, k, nt = 0, ntpot = 0, nitl = 0, nitl_all = 0, shown = 0;

	l.reqs = calloc((size_t)o->num_prompts, sizeof(*l.reqs));
	for (i = 0; i < o->num_prompts; i++)
		l.reqs[i].body = body_of(o, i);
	engine_counters(o->port, c0);
	cpu0 = cpu_self();
	t0 = now();
	run_requests(&l);
	memset(res, 0, sizeof(*res));
	res->conc = conc;
	res->duration = now() - t0;
	res->client_cpu_s = cpu_self() - cpu0;
	engine_counters(o->port, c1);
	res->steps = delta(c0, c1, 0);
	res->host_s = delta(c0, c1, 1);
	res->device_s = delta(c0, c1, 2);
	res->engine_cpu_s = delta(c0, c1, 7);
	res->http_cpu_s = delta(c0, c1, 8);
	res->replays = delta(c0, c1, 9);
	res->queue_s = delta_mean(c0, c1, 3, 4);
	res->server_ttft_s = delta_mean(c0, c1, 5, 6);
	for (i = 0; i < o->num_prompts; i++)
		nitl_all += l.reqs[i].n_itl;
	ttft = calloc((size_t)o->num_prompts + 1, sizeof(double));
	tpot = calloc((size_t)o->num_prompts + 1, sizeof(double));
	e2el = calloc((size_t)o->num_prompts + 1, sizeof(double));
	itl = calloc((size_t)nitl_all + 1, sizeof(double));
	for (i = 0; i < o->num_prompts; i++) {
		struct req *r = &l.reqs[i];

		if (!r->ok) {
			res->failed++;
			if (shown++ < 3)
				fprintf(stderr, "serve-bench: c=%d request %d failed: %s\n", conc, i, r->err);
			continue;
		}
		res->completed++;
		res->input_tokens += o->input_len;
		res->output_tokens += r->out_tokens;
		ttft[nt] = r->ttft;
		e2el[nt++] = r->e2el;
		if (r->out_tokens > 1)
			tpot[ntpot++] = (r->e2el - r->ttft) / (r->out_tokens - 1);
		for (k = 0; k < r->n_itl; k++)
			itl[nitl++] = r->itl[k];
	}
	res->req_tp = res->completed / res->duration;
	res->out_tp = res->output_tokens / res->duration;
	res->tot_tp = (res->input_tokens + res->output_tokens) / res->duration;
	res->ttft = stats(ttft, nt);
	res->tpot = stats(tpot, ntpot);
	res->itl = stats(itl, nitl);
	res->e2el = stats(e2el, nt);
	for (i = 0; i < o->num_prompts; i++) {
		free(l.reqs[i].body);
		free(l.reqs[i].itl);
	}
	free(l.reqs);
	free(ttft);
	free(tpot);
	free(e2el);
	free(itl);
	return res->failed ? 1 : 0;
}

/* ---- output ------------------------------------------------------------------------------------ */

static void table(const struct opts *o, const struct result *r, int n)
{
	int i;

#define ROW(label, fmt, expr)                                   \
	do {                                                    \
		printf("%-34s", label);                         \
		for (i = 0; i < n; i++)                         \
			printf(" %12" fmt, expr);               \
		printf("\n");                                   \
	} while (0)
#define STAT(name, f)                                           \
	ROW(name " mean (ms)", ".2f", r[i].f.mean);             \
	ROW(name " p50 (ms)", ".2f", r[i].f.p50);               \
	ROW(name " p99 (ms)", ".2f", r[i].f.p99)

	printf("serve-bench: model %s, %d prompts, %d tokens in, %d out\n", o->model, o->num_prompts, o->input_len,
	       o->output_len);
	printf("%-34s", "concurrency");
	for (i = 0; i < n; i++)
		printf(" %12d", r[i].conc);
	printf("\n");
	ROW("successful requests", "d", r[i].completed);
	ROW("failed requests", "d", r[i].failed);
	ROW("duration (s)", ".3f", r[i].duration);
	ROW("total input tokens", "ld", r[i].input_tokens);
	ROW("total generated tokens", "ld", r[i].output_tokens);
	ROW("request throughput (req/s)", ".2f", r[i].req_tp);
	ROW("output token throughput (tok/s)", ".1f", r[i].out_tp);
	ROW("total token throughput (tok/s)", ".1f", r[i].tot_tp);
	STAT("TTFT", ttft);
	STAT("TPOT", tpot);
	STAT("ITL", itl);
	STAT("E2EL", e2el);
	if (r[0].steps > 0) {	/* spyre-serve: what the engine did */
		ROW("engine steps", ".0f", r[i].steps);
		ROW("steps replayed as graphs", ".0f", r[i].replays > 0 ? r[i].replays : 0);
		ROW("tokens per step (in + out)", ".2f",
		    r[i].steps > 0 ? (r[i].input_tokens + r[i].output_tokens) / r[i].steps : 0);
		ROW("runner host time per step (ms)", ".3f", r[i].steps > 0 ? r[i].host_s * 1e3 / r[i].steps : 0);
		ROW("device time per step (ms)", ".3f", r[i].steps > 0 ? r[i].device_s * 1e3 / r[i].steps : 0);
		ROW("wall time per step (ms)", ".3f", r[i].steps > 0 ? r[i].duration * 1e3 / r[i].steps : 0);
		ROW("server: queue time mean (ms)", ".2f", r[i].queue_s * 1e3);
		ROW("server: TTFT mean (ms)", ".2f", r[i].server_ttft_s * 1e3);
		ROW("engine thread CPU per step (ms)", ".3f",
		    r[i].steps > 0 && r[i].engine_cpu_s >= 0 ? r[i].engine_cpu_s * 1e3 / r[i].steps : 0);
		ROW("HTTP thread CPU per token (us)", ".1f",
		    r[i].output_tokens && r[i].http_cpu_s >= 0 ? r[i].http_cpu_s * 1e6 / r[i].output_tokens : 0);
	}
	ROW("client CPU per token (us)", ".1f", r[i].output_tokens ? r[i].client_cpu_s * 1e6 / r[i].output_tokens : 0);
#undef STAT
#undef ROW
}

static int write_json(const struct opts *o, const struct result *r, int n)
{
	FILE *f = strcmp(o->json, "-") ? fopen(o->json, "w") : stdout;
	int i;

	if (!f) {
		fprintf(stderr, "serve-bench: %s: %s\n", o->json, strerror(errno));
		return -1;
	}
	fprintf(f, "{\"model\":\"%s\",\"num_prompts\":%d,\"input_len\":%d,\"output_len\":%d,\"seed\":%" PRIu64
		",\"levels\":[", o->model, o->num_prompts, o->input_len, o->output_len, o->seed);
	for (i = 0; i < n; i++) {
		const struct result *x = &r[i];

		fprintf(f, "%s\n{\"max_concurrency\":%d,\"completed\":%d,\"failed\":%d,\"duration\":%.6f,"
			"\"total_input_tokens\":%ld,\"total_output_tokens\":%ld,\"request_throughput\":%.6f,"
			"\"output_throughput\":%.6f,\"total_token_throughput\":%.6f", i ? "," : "", x->conc,
			x->completed, x->failed, x->duration, x->input_tokens, x->output_tokens, x->req_tp, x->out_tp,
			x->tot_tp);
#define J(name, m) \
		fprintf(f, ",\"mean_" name "_ms\":%.6f,\"median_" name "_ms\":%.6f,\"p99_" name "_ms\":%.6f", \
			x->m.mean, x->m.p50, x->m.p99)
		J("ttft", ttft);
		J("tpot", tpot);
		J("itl", itl);
		J("e2el", e2el);
#undef J
		if (x->steps >= 0)
			fprintf(f, ",\"engine_steps\":%.0f,\"runner_host_s\":%.6f,\"device_s\":%.6f", x->steps,
				x->host_s, x->device_s);
		if (x->replays >= 0)
			fprintf(f, ",\"graph_replays\":%.0f", x->replays);
		if (x->engine_cpu_s >= 0)
			fprintf(f, ",\"engine_thread_cpu_s\":%.6f", x->engine_cpu_s);
		if (x->http_cpu_s >= 0)
			fprintf(f, ",\"http_thread_cpu_s\":%.6f", x->http_cpu_s);
		fprintf(f, ",\"client_cpu_s\":%.6f}", x->client_cpu_s);
	}
	fprintf(f, "]}\n");
	if (f != stdout && fclose(f)) {
		fprintf(stderr, "serve-bench: %s: %s\n", o->json, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- command line ------------------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: serve-bench [options]\n"
		"  --url URL            the server, http://127.0.0.1:PORT or http://localhost:PORT (loopback only;\n"
		"                       default http://127.0.0.1:8000)\n"
		"  --model NAME         the served model name (default tiny)\n"
		"  --num-prompts N      requests per concurrency level (default 64)\n"
		"  --input-len N        prompt tokens, exact (default 32)\n"
		"  --output-len N       generated tokens, exact: ignore_eos, max_tokens (default 32)\n"
		"  --concurrency LIST   levels, comma-separated: at most that many in flight (default 1,4,16,32)\n"
		"  --vocab N            prompt token ids drawn from 1..N-1 (default 512: the tiny model's)\n"
		"  --seed N             seed of the prompts' token ids (default 0)\n"
		"  --timeout S          socket timeout per request in seconds (default 300)\n"
		"  --json FILE          the results as JSON too (- : stdout)\n");
}

static int posint(const char *opt, const char *s, int min, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > 1000000) {
		fprintf(stderr, "serve-bench: %s: '%s' is not a number from %d to 1000000\n", opt, s, min);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int parse_url(const char *u, int *port)
{
	const char *p;

	if (!strncmp(u, "http://", 7))
		u += 7;
	if (!strncmp(u, "127.0.0.1:", 10))
		p = u + 10;
	else if (!strncmp(u, "localhost:", 10))
		p = u + 10;
	else
		return -1;
	if (posint("--url port", strtok(strdup(p), "/"), 1, port) || *port > 65535)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .port = 8000, .model = "tiny", .num_prompts = 64, .input_len = 32, .output_len = 32,
			  .vocab = 512, .levels = { 1, 4, 16, 32 }, .nlevels = 4, .timeout_s = 300 };
	struct result res[MAX_LEVELS];
	int i, failed = 0;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (!v) {
			fprintf(stderr, "serve-bench: %s: unknown option or missing value\n", a);
			usage(stderr);
			return 2;
		}
		i++;
		if (!strcmp(a, "--url"))
			bad = parse_url(v, &o.port);
		else if (!strcmp(a, "--model"))
			o.model = v;
		else if (!strcmp(a, "--num-prompts"))
			bad = posint(a, v, 1, &o.num_prompts);
		else if (!strcmp(a, "--input-len"))
			bad = posint(a, v, 1, &o.input_len);
		else if (!strcmp(a, "--output-len"))
			bad = posint(a, v, 1, &o.output_len);
		else if (!strcmp(a, "--vocab"))
			bad = posint(a, v, 2, &o.vocab);
		else if (!strcmp(a, "--timeout"))
			bad = posint(a, v, 1, &o.timeout_s);
		else if (!strcmp(a, "--seed")) {
			char *end;

			o.seed = strtoull(v, &end, 0);
			bad = end == v || *end;
		} else if (!strcmp(a, "--json"))
			o.json = v;
		else if (!strcmp(a, "--concurrency")) {
			char *s = strdup(v), *tok, *save;

			o.nlevels = 0;
			for (tok = strtok_r(s, ",", &save); tok && !bad; tok = strtok_r(NULL, ",", &save)) {
				if (o.nlevels == MAX_LEVELS) {
					fprintf(stderr, "serve-bench: at most %d concurrency levels\n", MAX_LEVELS);
					bad = 1;
				} else {
					bad = posint(a, tok, 1, &o.levels[o.nlevels++]);
				}
			}
			bad = bad || !o.nlevels;
			free(s);
		} else {
			fprintf(stderr, "serve-bench: %s: unknown option\n", a);
			bad = 1;
		}
		if (bad) {
			if (!strcmp(a, "--url"))
				fprintf(stderr, "serve-bench: --url: '%s': loopback only, http://127.0.0.1:PORT\n", v);
			usage(stderr);
			return 2;
		}
	}
	/* the server answers at all */
	{
		struct hresp r;

		if (http_do(o.port, "GET", "/health", NULL, &r) || r.status != 200) {
			fprintf(stderr, "serve-bench: no healthy server at 127.0.0.1:%d (status %d)\n", o.port,
				r.status);
			hresp_free(&r);
			return 2;
		}
		hresp_free(&r);
	}
	for (i = 0; i < o.nlevels; i++)
		failed |= run_level(&o, o.levels[i], &res[i]);
	table(&o, res, o.nlevels);
	if (o.json && write_json(&o, res, o.nlevels))
		return 2;
	return failed ? 1 : 0;
}
