/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - spyre-serve's /metrics: Prometheus text format 0.0.4 with
 * vLLM's names (prefix "vllm:", label model_name) and bucket bounds.
 *
 * The server counts what its clients see (tokens streamed, requests finished
 * by reason, latencies from the engine's event times); the engine's gauges
 * and counters (running, waiting, KV cache usage, prefix cache, preemptions)
 * come from spyre_engine_get_stats() at render time. Any thread may call any
 * function (one mutex).
 */
#ifndef SPYRE_SERVE_METRICS_H
#define SPYRE_SERVE_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "jsonw.h"

struct spyre_metrics;

struct spyre_metrics *spyre_metrics_new(const char *model_name, uint32_t max_model_len);
void spyre_metrics_free(struct spyre_metrics *m);

/* A request's first token: its time to first token and time in the queue (seconds). */
void spyre_metrics_first_token(struct spyre_metrics *m, double ttft_s, double queue_s, uint32_t prompt_tokens);
/* One generated token; @itl_s the gap since the previous one (< 0: the first token, none). */
void spyre_metrics_token(struct spyre_metrics *m, double itl_s);
/* A request finished (@reason: enum spyre_finish_reason; stop strings count as STOP). */
void spyre_metrics_finished(struct spyre_metrics *m, int reason, double e2e_s, uint32_t prompt_tokens,
			    uint32_t generation_tokens, bool had_first_token);

/* The whole text into @out. */
void spyre_metrics_render(struct spyre_metrics *m, const struct spyre_engine_stats *st, struct spyre_buf *out);
/* The HTTP thread's CPU seconds, read after the rest was rendered (so a scrape's rendering falls outside
 * the difference of two scrapes). */
void spyre_metrics_render_http_cpu(struct spyre_metrics *m, double http_cpu_s, struct spyre_buf *out);

#endif /* SPYRE_SERVE_METRICS_H */
