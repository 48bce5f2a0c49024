// SPDX-License-Identifier: MIT
/* metrics.c - Prometheus text of spyre-serve (metrics.h), vLLM's names and buckets. */
#include "metrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "openai.h"

#define MAX_BUCKETS 32

struct hist {
	const char *name, *help;
	size_t n;			/* bounds, +Inf not counted */
	double le[MAX_BUCKETS];
	uint64_t count[MAX_BUCKETS + 1];	/* per bucket (not cumulative), last +Inf */
	double sum;
	uint64_t total;
};

enum { H_TTFT, H_ITL, H_E2E, H_QUEUE, H_PROMPT, H_GEN, H_COUNT };

struct spyre_metrics {
	char *model;			/* as a label value, escaped */
	pthread_mutex_t lock;		/* Protects everything below */
	struct hist h[H_COUNT];
	uint64_t prompt_tokens, generation_tokens;
	uint64_t finished[SPYRE_FINISH_ERROR + 1];
};

/* vLLM's bounds (vllm/v1/metrics/loggers.py). */
static const double ttft_le[] = { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
				  2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0 };
static const double itl_le[] = { 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
				 5.0, 7.5, 10.0, 20.0, 40.0, 80.0 };
static const double lat_le[] = { 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
				 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0 };

static void hist_init(struct hist *h, const char *name, const char *help, const double *le, size_t n)
{
	h->name = name;
	h->help = help;
	h->n = n < MAX_BUCKETS ? n : MAX_BUCKETS;
	memcpy(h->le, le, h->n * sizeof(*le));
}

/* 1, 2, 5, 10, 20, 50, ... up to @max (vLLM's build_1_2_5_buckets). */
static void hist_init_125(struct hist *h, const char *name, const char *help, uint32_t max)
{
	static const double m[] = { 1, 2, 5 };
	double le[MAX_BUCKETS], scale = 1;
	size_t n = 0, i;

	for (;;) {
		for (i = 0; i < 3 && n < MAX_BUCKETS; i++) {
			if (m[i] * scale > max)
				goto done;
			le[n++] = m[i] * scale;
		}
		scale *= 10;
	}
done:
	hist_init(h, name, help, le, n);
}

static void observe(struct hist *h, double v)
{
	size_t i;

	for (i = 0; i < h->n && v > h->le[i]; i++)
		;
	h->count[i]++;
	h->sum += v;
	h->total++;
}

struct spyre_metrics *spyre_metrics_new(const char *model_name, uint32_t max_model_len)
{
	struct spyre_metrics *m = calloc(1, sizeof(*m));
	struct spyre_buf b;

	if (!m)
		return NULL;
	/* A label value escapes '\\', '"' and newlines. */
	spyre_buf_init(&b);
	for (; *model_name; model_name++) {
		if (*model_name == '\\' || *model_name == '"')
			spyre_buf_add(&b, "\\", 1);
		if (*model_name == '\n')
			spyre_buf_puts(&b, "\\n");
		else
			spyre_buf_add(&b, model_name, 1);
	}
	m->model = spyre_buf_steal(&b, NULL);
	if (!m->model) {
		free(m);
		return NULL;
	}
	pthread_mutex_init(&m->lock, NULL);
	hist_init(&m->h[H_TTFT], "time_to_first_token_seconds", "Histogram of time to first token in seconds.",
		  ttft_le, sizeof(ttft_le) / sizeof(ttft_le[0]));
	hist_init(&m->h[H_ITL], "inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
		  itl_le, sizeof(itl_le) / sizeof(itl_le[0]));
	hist_init(&m->h[H_E2E], "e2e_request_latency_seconds",
		  "Histogram of e2e request latency in seconds.", lat_le, sizeof(lat_le) / sizeof(lat_le[0]));
	hist_init(&m->h[H_QUEUE], "request_queue_time_seconds",
		  "Histogram of time spent in WAITING phase for request.", lat_le,
		  sizeof(lat_le) / sizeof(lat_le[0]));
	hist_init_125(&m->h[H_PROMPT], "request_prompt_tokens", "Number of prefill tokens processed.",
		      max_model_len);
	hist_init_125(&m->h[H_GEN], "request_generation_tokens", "Number of generation tokens processed.",
		      max_model_len);
	return m;
}

void spyre_metrics_free(struct spyre_metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m->model);
	free(m);
}

void spyre_metrics_first_token(struct spyre_metrics *m, double ttft_s, double queue_s, uint32_t prompt_tokens)
{
	pthread_mutex_lock(&m->lock);
	observe(&m->h[H_TTFT], ttft_s);
	observe(&m->h[H_QUEUE], queue_s);
	m->prompt_tokens += prompt_tokens;
	pthread_mutex_unlock(&m->lock);
}

void spyre_metrics_token(struct spyre_metrics *m, double itl_s)
{
	pthread_mutex_lock(&m->lock);
	m->generation_tokens++;
	if (itl_s >= 0)
		observe(&m->h[H_ITL], itl_s);
	pthread_mutex_unlock(&m->lock);
}

void spyre_metrics_finished(struct spyre_metrics *m, int reason, double e2e_s, uint32_t prompt_tokens,
			    uint32_t generation_tokens, bool had_first_token)
{
	pthread_mutex_lock(&m->lock);
	if (reason > 0 && reason <= SPYRE_FINISH_ERROR)
		m->finished[reason]++;
	observe(&m->h[H_E2E], e2e_s);
	observe(&m->h[H_PROMPT], prompt_tokens);
	observe(&m->h[H_GEN], generation_tokens);
	if (!had_first_token)
		m->prompt_tokens += prompt_tokens;
	pthread_mutex_unlock(&m->lock);
}

/* ns: "vllm" for vLLM's metrics, "spyre" for the engine's own */
static void metric(struct spyre_buf *o, const char *ns, const char *name, const char *type, const char *help)
{
	spyre_buf_printf(o, "# HELP %s:%s %s\n# TYPE %s:%s %s\n", ns, name, help, ns, name, type);
}

static void value(struct spyre_buf *o, const char *ns, const char *model, const char *name, double v)
{
	spyre_buf_printf(o, "%s:%s{model_name=\"%s\"} %.17g\n", ns, name, model, v);
}

void spyre_metrics_render(struct spyre_metrics *m, const struct spyre_engine_stats *st, struct spyre_buf *o)
{
	const char *mn = m->model;
	size_t i, k;
	int r;

	metric(o, "vllm", "num_requests_running", "gauge", "Number of requests in model execution batches.");
	value(o, "vllm", mn, "num_requests_running", st->running);
	metric(o, "vllm", "num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
	value(o, "vllm", mn, "num_requests_waiting", st->waiting);
	metric(o, "vllm", "kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
	value(o, "vllm", mn, "kv_cache_usage_perc", st->blocks_total ? (double)st->blocks_used / st->blocks_total : 0.0);
	metric(o, "vllm", "prefix_cache_queries", "counter", "Prefix cache queries, in terms of number of queried tokens.");
	value(o, "vllm", mn, "prefix_cache_queries_total", (double)st->prefix_cache_queries);
	metric(o, "vllm", "prefix_cache_hits", "counter", "Prefix cache hits, in terms of number of cached tokens.");
	value(o, "vllm", mn, "prefix_cache_hits_total", (double)st->prefix_cache_hits);
	metric(o, "vllm", "num_preemptions", "counter", "Cumulative number of preemption from the engine.");
	value(o, "vllm", mn, "num_preemptions_total", (double)st->preemptions);
	metric(o, "spyre", "engine_steps", "counter", "Engine steps run (one runner call each).");
	value(o, "spyre", mn, "engine_steps_total", (double)st->steps);
	metric(o, "spyre", "runner_host_seconds", "counter", "Host time spent in the runner's steps.");
	value(o, "spyre", mn, "runner_host_seconds_total", st->runner_host_ns * 1e-9);
	metric(o, "spyre", "runner_device_seconds", "counter",
	       "Modeled device time of the runner's steps (card runner; 0 on the CPU).");
	value(o, "spyre", mn, "runner_device_seconds_total", st->runner_device_ns * 1e-9);
	metric(o, "spyre", "runner_kernel_builds", "counter",
	       "Kernels the runner built while serving (shapes the warm-up did not cover).");
	value(o, "spyre", mn, "runner_kernel_builds_total", (double)st->runner_builds);
	metric(o, "spyre", "runner_graph_replays", "counter",
	       "Steps the runner replayed as a captured launch graph (card runner: decode steps).");
	value(o, "spyre", mn, "runner_graph_replays_total", (double)st->runner_replays);
	metric(o, "spyre", "engine_thread_cpu_seconds", "counter",
	       "CPU time of the engine's thread (the steps: runner, sampling, events).");
	value(o, "spyre", mn, "engine_thread_cpu_seconds_total", st->thread_cpu_ns * 1e-9);

	pthread_mutex_lock(&m->lock);
	metric(o, "vllm", "prompt_tokens", "counter", "Number of prefill tokens processed.");
	value(o, "vllm", mn, "prompt_tokens_total", (double)m->prompt_tokens);
	metric(o, "vllm", "generation_tokens", "counter", "Number of generation tokens processed.");
	value(o, "vllm", mn, "generation_tokens_total", (double)m->generation_tokens);
	metric(o, "vllm", "request_success", "counter", "Count of successfully processed requests.");
	for (r = SPYRE_FINISH_LENGTH; r <= SPYRE_FINISH_ERROR; r++)
		spyre_buf_printf(o, "vllm:request_success_total{finished_reason=\"%s\",model_name=\"%s\"} %llu\n",
				 spyre_oai_finish_name(r), mn, (unsigned long long)m->finished[r]);
	for (k = 0; k < H_COUNT; k++) {
		const struct hist *h = &m->h[k];
		uint64_t cum = 0;

		metric(o, "vllm", h->name, "histogram", h->help);
		for (i = 0; i < h->n; i++) {
			cum += h->count[i];
			spyre_buf_printf(o, "vllm:%s_bucket{le=\"%g\",model_name=\"%s\"} %llu\n", h->name, h->le[i],
					 mn, (unsigned long long)cum);
		}
		spyre_buf_printf(o, "vllm:%s_bucket{le=\"+Inf\",model_name=\"%s\"} %llu\n", h->name, mn,
				 (unsigned long long)h->total);
		spyre_buf_printf(o, "vllm:%s_sum{model_name=\"%s\"} %.17g\n", h->name, mn, h->sum);
		spyre_buf_printf(o, "vllm:%s_count{model_name=\"%s\"} %llu\n", h->name, mn,
				 (unsigned long long)h->total);
	}
	pthread_mutex_unlock(&m->lock);
}

void spyre_metrics_render_http_cpu(struct spyre_metrics *m, double http_cpu_s, struct spyre_buf *o)
{
	metric(o, "spyre", "http_thread_cpu_seconds", "counter",
	       "CPU time of the HTTP thread (requests, streamed chunks, sockets).");
	value(o, "spyre", m->model, "http_thread_cpu_seconds_total", http_cpu_s);
}
