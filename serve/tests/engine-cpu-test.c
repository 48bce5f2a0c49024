// SPDX-License-Identifier: MIT
/*
 * Description: the engine over the CPU runner (serve/runner_cpu.h) on the
 * seeded tiny model (model/configs/tiny, weights from seed 1 as
 * spyre-generate makes them): 6 greedy requests of ragged prompt lengths
 * (3 to 100 tokens: beyond one block of 16 and one chunk of 64) batched
 * together give, sequence by sequence, token for token, what spyre_ref alone
 * gives (prefill, then decode steps); the same with preemption forced by a
 * cache of 12 blocks (preemptions counted > 0), with prompts sharing a
 * 48-token prefix (prefix-cache hits counted, blocks shared), in fp16, and
 * on the engine's own thread. Seeded sampling (temperature 1.5, top-p
 * 0.95): the same seed gives the same 24 tokens in one batch and in another,
 * another seed other tokens. The runner's errors: an unknown dtype, a
 * missing model directory, a batch it rejects (-EINVAL named).
 */
#include <errno.h>
#include <time.h>

#include "ref.h"
#include "runner_cpu.h"
#include "weights.h"
#include "engine-test-util.h"

#define NREQ 6
#define GEN 12

static const uint32_t lens[NREQ] = { 3, 17, 40, 70, 100, 9 };
static int32_t prompts[NREQ][128];
static int32_t want[NREQ][GEN];
static struct spyre_model_config cfg;
static struct spyre_model_weights weights;

/* What spyre_ref alone generates for each prompt (greedy, GEN tokens, EOS ignored). */
static void reference(unsigned int dtype)
{
	float *logits = malloc(cfg.vocab * sizeof(float));

	for (int i = 0; i < NREQ; i++) {
		struct spyre_ref *ref = spyre_ref_new(&cfg, &weights, dtype);

		if (!ref || spyre_ref_prefill(ref, prompts[i], lens[i], logits))
			tap_bail("spyre_ref");
		for (int g = 0; g < GEN; g++) {
			want[i][g] = spyre_argmax(logits, cfg.vocab);
			if (g + 1 < GEN && spyre_ref_decode(ref, want[i][g], logits))
				tap_bail("spyre_ref decode");
		}
		spyre_ref_free(ref);
	}
	free(logits);
}

static void fill_prompts(uint32_t shared)
{
	for (int i = 0; i < NREQ; i++)
		for (uint32_t j = 0; j < lens[i]; j++)
			prompts[i][j] = (int32_t)(j < shared ? (j * 13 + 5) % cfg.vocab
					: (j * 7 + (uint32_t)i * 31 + 1) % cfg.vocab);
}

struct run_opts {
	uint32_t num_blocks;
	unsigned int dtype;
	bool threaded;
	bool staggered;		/* the first request alone first (its prefix cached) */
};

static void run(const struct run_opts *ro, struct spyre_engine_stats *st)
{
	struct spyre_runner *rn;
	struct spyre_engine *e;
	struct spyre_engine_opts o = { .max_num_seqs = 8, .max_num_batched_tokens = 64, .seed = 1 };
	struct recorder *rec = malloc(sizeof(*rec));
	char err[256];
	uint64_t id[NREQ];
	uint32_t bad = 0;

	rec_init(rec);
	if (spyre_runner_cpu_new_from(&cfg, &weights, ro->dtype, ro->num_blocks, 16, &rn, err, sizeof(err)))
		tap_bail("runner: %s", err);
	TAP_EQ(0, spyre_engine_new(rn, &o, &e, err, sizeof(err)));
	if (ro->threaded)
		TAP_EQ(0, spyre_engine_start(e));
	for (int i = 0; i < NREQ; i++) {
		struct spyre_request_params p = req_params(prompts[i], lens[i], GEN);

		p.ignore_eos = true;
		TAP_EQ(0, spyre_engine_add(e, &p, rec_event, rec, &id[i], err, sizeof(err)));
		if (ro->staggered && i == 0)
			while (!ro->threaded && spyre_engine_step(e) > 0)
				;
	}
	if (ro->threaded) {
		TAP_EQ(-EBUSY, spyre_engine_step(e));
		for (int ms = 0; ms < 60000; ms++) {
			uint32_t done = 0;
			struct timespec ts = { 0, 1000000 };

			pthread_mutex_lock(&rec->lock);
			for (int i = 0; i < NREQ; i++)
				done += rec->req[id[i]].finished;
			pthread_mutex_unlock(&rec->lock);
			if (done == NREQ)
				break;
			nanosleep(&ts, NULL);
		}
	} else {
		for (int s = 0; s < 1000 && spyre_engine_step(e) > 0; s++)
			;
	}
	spyre_engine_get_stats(e, st);
	for (int i = 0; i < NREQ; i++) {
		const struct rec_req *q = &rec->req[id[i]];

		TAP_CHECK(q->finished == 1 && q->reason == SPYRE_FINISH_LENGTH && q->ntok == GEN,
			  "request %d: %u FINISHED (reason %d), %u tokens", i, q->finished, q->reason, q->ntok);
		for (int g = 0; g < GEN && g < (int)q->ntok; g++)
			if (q->tokens[g] != want[i][g]) {
				bad++;
				tap_diag("request %d (prompt %u): token %d is %d, spyre_ref says %d", i, lens[i], g,
					 q->tokens[g], want[i][g]);
				break;
			}
	}
	TAP_EQ(0u, bad);
	TAP_EQ(0u, st->blocks_used);
	TAP_EQ((uint64_t)NREQ, st->requests_finished[SPYRE_FINISH_LENGTH]);
	spyre_engine_free(e);
	spyre_runner_free(rn);
	free(rec);
}

static void test_batched(void)
{
	struct run_opts ro = { .num_blocks = 64 };
	struct spyre_engine_stats st;

	fill_prompts(0);
	reference(SPYRE_REF_FP32);
	run(&ro, &st);
	TAP_EQ(0ull, st.preemptions);
	TAP_EQ((uint64_t)NREQ * GEN, st.generation_tokens_total);
	TAP_EQ(3ull + 17 + 40 + 70 + 100 + 9, st.prompt_tokens_total);
}

static void test_preempted(void)
{
	/* 12 blocks of 16 = 192 positions; the prompts alone need 3+17+40+70+100+9 = 239 */
	struct run_opts ro = { .num_blocks = 12 };
	struct spyre_engine_stats st;

	fill_prompts(0);
	reference(SPYRE_REF_FP32);
	run(&ro, &st);
	TAP_CMP(st.preemptions, >, 0ull);
	tap_diag("%llu preemptions, %llu steps", (unsigned long long)st.preemptions, (unsigned long long)st.steps);
}

static void test_shared_prefix(void)
{
	struct run_opts ro = { .num_blocks = 64, .staggered = true };
	struct spyre_engine_stats st;

	fill_prompts(48);
	reference(SPYRE_REF_FP32);
	run(&ro, &st);
	/* request 0 (3 tokens) caches nothing; 1 (17) one block; later ones hit what 2+ computed */
	TAP_CMP(st.prefix_cache_hits, >=, 16ull * 3);
	tap_diag("prefix cache: %llu of %llu tokens hit", (unsigned long long)st.prefix_cache_hits,
		 (unsigned long long)st.prefix_cache_queries);
}

static void test_fp16(void)
{
	struct run_opts ro = { .num_blocks = 64, .dtype = SPYRE_REF_FP16 };
	struct spyre_engine_stats st;

	fill_prompts(16);
	reference(SPYRE_REF_FP16);
	run(&ro, &st);
}

static void test_threaded(void)
{
	struct run_opts ro = { .num_blocks = 20, .threaded = true };
	struct spyre_engine_stats st;

	fill_prompts(32);
	reference(SPYRE_REF_FP32);
	run(&ro, &st);
}

/* Seeded sampling on the real model: the same seed gives the same tokens in one batch; another seed others. */
static void test_seeded(void)
{
	struct spyre_runner *rn;
	struct spyre_engine *e;
	struct spyre_engine_opts o = { .max_num_seqs = 8, .max_num_batched_tokens = 64, .seed = 1 };
	struct recorder *rec = malloc(sizeof(*rec));
	char err[256];
	uint64_t id[4];
	const uint64_t seeds[4] = { 7, 7, 8, 7 };
	int32_t p[20];

	rec_init(rec);
	for (int i = 0; i < 20; i++)
		p[i] = (i * 11 + 2) % 512;
	TAP_EQ(0, spyre_runner_cpu_new_from(&cfg, &weights, 0, 32, 16, &rn, err, sizeof(err)));
	TAP_EQ(0, spyre_engine_new(rn, &o, &e, err, sizeof(err)));
	for (int i = 0; i < 4; i++) {
		struct spyre_request_params q = req_params(p, 20, 24);

		q.ignore_eos = true;
		q.sampling.temperature = 1.5f;
		q.sampling.top_p = 0.95f;
		q.sampling.has_seed = true;
		q.sampling.seed = seeds[i];
		TAP_EQ(0, spyre_engine_add(e, &q, rec_event, rec, &id[i], err, sizeof(err)));
		if (i == 2)	/* the fourth arrives later, batched with other company */
			for (int s = 0; s < 5; s++)
				spyre_engine_step(e);
	}
	while (spyre_engine_step(e) > 0)
		;
	TAP_EQ(24u, rec->req[id[0]].ntok);
	TAP_CHECK(!memcmp(rec->req[id[0]].tokens, rec->req[id[1]].tokens, 24 * sizeof(int32_t)), "same seed differs");
	TAP_CHECK(!memcmp(rec->req[id[0]].tokens, rec->req[id[3]].tokens, 24 * sizeof(int32_t)),
		  "same seed differs in another batch");
	TAP_CHECK(memcmp(rec->req[id[0]].tokens, rec->req[id[2]].tokens, 24 * sizeof(int32_t)),
		  "another seed gives the same 24 tokens");
	spyre_engine_free(e);
	spyre_runner_free(rn);
	free(rec);
}

static void test_runner_errors(void)
{
	struct spyre_runner *rn;
	struct spyre_runner_cpu_opts o = { .config = "tiny", .num_blocks = 4, .block_size = 16 };
	char err[256];
	int32_t tok = 5, pos = 0, tbl = 9, am;
	int64_t slot = 0;
	uint32_t qs[2] = { 0, 1 }, ctx = 1;
	struct spyre_runner_batch b = { 1, &tok, &pos, &slot, 1, qs, &ctx, &tbl, 1, NULL, &am };

	o.act_dtype = 9;
	TAP_EQ(-EINVAL, spyre_runner_cpu_new(&o, &rn, err, sizeof(err)));
	TAP_CHECK(rn == NULL && strstr(err, "dtype"), "'%s'", err);
	o.act_dtype = 0;
	o.config = NULL;
	o.model_dir = "/nonexistent/model";
	TAP_EQ(-EINVAL, spyre_runner_cpu_new(&o, &rn, err, sizeof(err)));
	TAP_CHECK(strstr(err, "/nonexistent/model"), "'%s'", err);
	o.model_dir = NULL;
	o.config = "granite-3.3-8b";
	TAP_EQ(-E2BIG, spyre_runner_cpu_new(&o, &rn, err, sizeof(err)));
	o.config = "tiny";
	TAP_EQ(0, spyre_runner_cpu_new(&o, &rn, err, sizeof(err)));
	TAP_EQ(512u, rn->vocab);
	TAP_EQ(16u, rn->block_size);
	TAP_EQ(4u, rn->num_blocks);
	TAP_EQ(256u, rn->max_model_len);
	TAP_EQ(-EINVAL, rn->ops->step(rn->self, &b, NULL, err, sizeof(err)));
	TAP_CHECK(strstr(err, "block_tables[0][0]"), "'%s'", err);
	tbl = 3;
	TAP_EQ(0, rn->ops->step(rn->self, &b, NULL, err, sizeof(err)));
	spyre_runner_free(rn);
}

static const struct tap_case cases[] = {
	{ "batched", test_batched },
	{ "preempted", test_preempted },
	{ "shared-prefix", test_shared_prefix },
	{ "fp16", test_fp16 },
	{ "threaded", test_threaded },
	{ "seeded", test_seeded },
	{ "runner-errors", test_runner_errors },
};

int main(int argc, char **argv)
{
	cfg = spyre_model_config_tiny();
	if (spyre_model_weights_random(&cfg, 1, &weights))
		tap_bail("weights");
	{
		int rc = TAP_RUN(cases, argc, argv);

		spyre_model_weights_free(&weights);
		return rc;
	}
}
