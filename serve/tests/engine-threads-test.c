// SPDX-License-Identifier: MIT
/*
 * Description: the engine under threads (built plain with ASan/UBSan and
 * again under ThreadSanitizer as serve-engine-threads-tsan-test). The
 * engine's thread steps a fake runner (a small cache, so requests wait,
 * preempt and share prefixes) while 4 client threads each add 150 requests
 * (fixed seeds: prompt lengths, max_tokens, sampling) and abort every third
 * one at once or after a few events, one thread polls get_stats and
 * debug_state, and an event callback adds and aborts from inside the
 * engine's thread. At the end: every accepted request got exactly one
 * FINISHED and no event after it, every rejected add was -EAGAIN, the
 * greedy requests that were not aborted have the model's tokens, and every
 * block is free. Then spyre_engine_free with requests still queued delivers
 * FINISHED(ABORT) to each.
 */
#include <errno.h>
#include <time.h>

#include "engine-test-util.h"
#include "sample.h"

#define V 61
#define THREADS 4
#define PER_THREAD 150

struct shared {
	struct spyre_engine *e;
	struct recorder *rec;
	int32_t prompts[THREADS * PER_THREAD + 64][40];
	uint32_t lens[THREADS * PER_THREAD + 64];
	bool greedy[REC_MAX_REQ + 1], aborted[REC_MAX_REQ + 1];
	uint32_t plen_of_id[REC_MAX_REQ + 1];
	int32_t *prompt_of_id[REC_MAX_REQ + 1];
	uint32_t max_of_id[REC_MAX_REQ + 1];
	pthread_mutex_t lock;		/* protects the maps above and the counters */
	uint32_t accepted, rejected, other_errors;
	int done;
};

static struct shared *S;

static void *client(void *arg)
{
	uint32_t t = (uint32_t)(uintptr_t)arg;
	uint64_t rng = 1000 + t;

	for (uint32_t i = 0; i < PER_THREAD; i++) {
		uint32_t k = t * PER_THREAD + i, n = 1 + (uint32_t)(spyre_splitmix64(&rng) % 39);
		struct spyre_request_params p;
		uint64_t id;
		int rc;

		for (uint32_t j = 0; j < n; j++)	/* shared prefixes: the first 8 tokens of half */
			S->prompts[k][j] = (int32_t)((j < 8 && (k & 1) ? j : (j * 7 + k)) % V);
		S->lens[k] = n;
		p = req_params(S->prompts[k], n, 1 + (uint32_t)(spyre_splitmix64(&rng) % 12));
		if (i % 4 == 1) {
			p.sampling.temperature = 0.8f;
			p.sampling.top_k = 5;
			p.sampling.has_seed = true;
			p.sampling.seed = k;
		}
		p.ignore_eos = true;
		rc = spyre_engine_add(S->e, &p, rec_event, S->rec, &id, NULL, 0);
		pthread_mutex_lock(&S->lock);
		if (!rc) {
			S->accepted++;
			if (id <= REC_MAX_REQ) {
				S->greedy[id] = i % 4 != 1;
				S->prompt_of_id[id] = S->prompts[k];
				S->plen_of_id[id] = n;
				S->max_of_id[id] = p.max_tokens;
			}
		} else if (rc == -EAGAIN) {
			S->rejected++;
		} else {
			S->other_errors++;
		}
		pthread_mutex_unlock(&S->lock);
		if (!rc && i % 3 == 0) {
			if (i % 2) {
				struct timespec ts = { 0, 200000 };

				nanosleep(&ts, NULL);
			}
			if (!spyre_engine_abort(S->e, id)) {
				pthread_mutex_lock(&S->lock);
				S->aborted[id] = true;
				pthread_mutex_unlock(&S->lock);
			}
		}
		if (rc == -EAGAIN) {
			struct timespec ts = { 0, 500000 };

			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

static void *poller(void *arg)
{
	static struct spyre_engine_debug d;
	struct spyre_engine_stats st;

	(void)arg;
	while (!__atomic_load_n(&S->done, __ATOMIC_ACQUIRE)) {
		struct timespec ts = { 0, 300000 };

		spyre_engine_get_stats(S->e, &st);
		spyre_engine_debug_state(S->e, &d);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* An event callback on the engine's thread that adds and aborts (no deadlock). */
static void reentrant_event(void *user, const struct spyre_event *ev)
{
	static int32_t prompt[3] = { 1, 2, 3 };
	struct spyre_request_params p = req_params(prompt, 3, 2);
	uint64_t id;

	rec_event(user, ev);
	if (ev->kind == SPYRE_EVENT_FINISHED && ev->id % 50 == 0) {
		if (!spyre_engine_add(S->e, &p, rec_event, S->rec, &id, NULL, 0)) {
			pthread_mutex_lock(&S->lock);
			S->accepted++;
			pthread_mutex_unlock(&S->lock);
			spyre_engine_abort(S->e, id);
		}
	}
}

static void test_threads(void)
{
	struct fake_runner *f = fake_new(V, 4, 24, 64, -1);
	struct spyre_engine_opts o = { .max_num_seqs = 6, .max_num_batched_tokens = 16, .max_waiting = 40, .seed = 9 };
	pthread_t th[THREADS], poll;
	char err[256];
	uint32_t finished = 0, twice = 0, after = 0, wrong = 0, checked = 0;
	struct spyre_engine_stats st;

	S = calloc(1, sizeof(*S));
	S->rec = malloc(sizeof(*S->rec));
	rec_init(S->rec);
	pthread_mutex_init(&S->lock, NULL);
	TAP_EQ(0, spyre_engine_new(&f->r, &o, &S->e, err, sizeof(err)));
	TAP_EQ(0, spyre_engine_start(S->e));
	TAP_EQ(-EBUSY, spyre_engine_start(S->e));
	pthread_create(&poll, NULL, poller, NULL);
	for (uintptr_t t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, client, (void *)t);
	/* one request whose events re-enter the engine */
	{
		int32_t pr[4] = { 4, 5, 6, 7 };
		struct spyre_request_params p = req_params(pr, 4, 3);
		uint64_t id;

		while (spyre_engine_add(S->e, &p, reentrant_event, S->rec, &id, NULL, 0) == -EAGAIN)
			;
		pthread_mutex_lock(&S->lock);
		S->accepted++;
		pthread_mutex_unlock(&S->lock);
	}
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	/* wait (bounded) until everything accepted has finished */
	for (int ms = 0; ms < 120000; ms++) {
		struct timespec ts = { 0, 1000000 };

		spyre_engine_get_stats(S->e, &st);
		if (!st.running && !st.waiting)
			break;
		nanosleep(&ts, NULL);
	}
	__atomic_store_n(&S->done, 1, __ATOMIC_RELEASE);
	pthread_join(poll, NULL);
	spyre_engine_get_stats(S->e, &st);
	TAP_EQ(0u, st.running);
	TAP_EQ(0u, st.waiting);
	TAP_EQ(0u, st.blocks_used);
	pthread_mutex_lock(&S->rec->lock);
	for (uint32_t id = 1; id <= REC_MAX_REQ; id++) {
		const struct rec_req *q = &S->rec->req[id];

		finished += q->finished == 1;
		twice += q->finished > 1;
		after += q->after_finish;
		if (S->prompt_of_id[id] && S->greedy[id] && !S->aborted[id] && q->reason != SPYRE_FINISH_ABORT) {
			int32_t w[REC_MAX_TOK];
			uint32_t n = fake_expect(S->prompt_of_id[id], S->plen_of_id[id], S->max_of_id[id], V, -1, w);

			checked++;
			if (q->ntok != n || memcmp(q->tokens, w, n * sizeof(int32_t)))
				wrong++;
		}
	}
	pthread_mutex_unlock(&S->rec->lock);
	TAP_EQ(S->accepted, finished);
	TAP_EQ(0u, twice);
	TAP_EQ(0u, after);
	TAP_EQ(0u, wrong);
	TAP_EQ(0u, S->other_errors);
	TAP_EQ(0u, f->bad);
	TAP_CMP(checked, >, 50u);
	tap_diag("%u accepted, %u rejected (-EAGAIN), %u greedy checked, %llu preemptions, %llu prefix hits",
		 S->accepted, S->rejected, checked, (unsigned long long)st.preemptions,
		 (unsigned long long)st.prefix_cache_hits);

	/* free with requests queued: each gets FINISHED(ABORT) */
	{
		int32_t pr[5] = { 1, 2, 3, 4, 5 };
		struct spyre_request_params p = req_params(pr, 5, 10);
		uint64_t ids[5];

		f->sleep_us = 2000;
		for (int i = 0; i < 5; i++)
			TAP_EQ(0, spyre_engine_add(S->e, &p, rec_event, S->rec, &ids[i], NULL, 0));
		spyre_engine_free(S->e);
		for (int i = 0; i < 5; i++)
			if (ids[i] <= REC_MAX_REQ)
				TAP_EQ(1u, S->rec->req[ids[i]].finished);
	}
	spyre_runner_free(&f->r);
	free(S->rec);
	free(S);
}

static const struct tap_case cases[] = {
	{ "threads", test_threads },
};

int main(int argc, char **argv)
{
	return TAP_RUN(cases, argc, argv);
}
