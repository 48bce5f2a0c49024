// SPDX-License-Identifier: MIT
/*
 * Description: the CPU reference of a serving step over a paged KV cache
 * (model/ref_paged.h). The kernels: store then gather through a block table
 * with holes and reused blocks returns the rows written (padding rows not
 * written); paged attention equals spyre_ref_attention over the same rows
 * bit for bit, at positions 0, a block's last and first, and the context's
 * end; RoPE of rows at their own positions equals spyre_ref_rope one by one.
 * The step: three sequences of ragged prompts (5, 19 and 40 tokens, block
 * size 8, blocks scattered over the cache in a shuffled order) prefilled in
 * chunks of different sizes batched with the others' decodes, then decoded
 * together for 12 steps: every sequence's logits equal spyre_ref alone
 * (prefill, then decode) bit for bit at every step, in fp32 and in fp16, and
 * the argmax output equals spyre_argmax of the logits. Bad batches (token
 * id, slot, block id, query_start, position >= context, context beyond the
 * table, a cache of another shape) are -EINVAL with the field named.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_paged.h"
#include "weights.h"
#include "../../tests/tap.h"

static char err[512];

/* ---- kernels ---- */

static void test_store_gather(void)
{
	enum { KVD = 6, BS = 4, NB = 5 };
	float kc[NB * BS * KVD], vc[NB * BS * KVD], k[10 * KVD], v[10 * KVD], ko[10 * KVD], vo[10 * KVD];
	/* positions 0..9 of a sequence in blocks 3, 0, 3 (reused: the second use overwrites) */
	const int32_t table[3] = { 4, 1, 2 };
	int64_t slots[10];

	memset(kc, 0, sizeof(kc));
	memset(vc, 0, sizeof(vc));
	for (int i = 0; i < 10 * KVD; i++) {
		k[i] = (float)i + 0.5f;
		v[i] = -(float)i;
	}
	for (int p = 0; p < 10; p++)
		slots[p] = (int64_t)table[p / BS] * BS + p % BS;
	slots[7] = -1;	/* a padding row: not written */
	spyre_ref_paged_store(kc, vc, KVD, slots, 10, k, v);
	spyre_ref_paged_gather(kc, vc, KVD, BS, table, 10, ko, vo);
	for (int p = 0; p < 10; p++) {
		int same = !memcmp(ko + p * KVD, k + p * KVD, KVD * sizeof(float)) &&
			   !memcmp(vo + p * KVD, v + p * KVD, KVD * sizeof(float));

		if (p == 7)
			TAP_CHECK(!same && ko[p * KVD] == 0.0f, "the padding row was written");
		else
			TAP_CHECK(same, "position %d: gathered row differs", p);
	}
	/* block 0 and 3 never touched */
	for (int i = 0; i < BS * KVD; i++) {
		TAP_CHECK(kc[i] == 0.0f && kc[3 * BS * KVD + i] == 0.0f, "unused block written at %d", i);
		if (kc[i] != 0.0f || kc[3 * BS * KVD + i] != 0.0f)
			break;
	}
	/* gather with one side NULL */
	memset(ko, 0, sizeof(ko));
	spyre_ref_paged_gather(kc, vc, KVD, BS, table, 3, ko, NULL);
	TAP_CHECK(!memcmp(ko, k, 3 * KVD * sizeof(float)), "K alone");
}

static uint64_t rng = 0x1234567;

static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 11) & 0xffff) / 32768.0f - 1.0f;
}

static void test_attention(void)
{
	enum { HEADS = 4, KVH = 2, HD = 8, BS = 4, NB = 6, NPOS = 17 };
	const uint32_t kvd = KVH * HD;
	float *kc = calloc(NB * BS * kvd, sizeof(float)), *vc = calloc(NB * BS * kvd, sizeof(float));
	float k[NPOS * KVH * HD], v[NPOS * KVH * HD], q[HEADS * HD], o1[HEADS * HD], o2[HEADS * HD];
	float scratch[NPOS * (2 * KVH * HD + 1)], p[NPOS];
	const int32_t table[5] = { 5, 2, 0, 3, 1 };
	int64_t slots[NPOS];
	const uint32_t at[] = { 0, 3, 4, 11, 16 };

	for (int i = 0; i < NPOS * (int)kvd; i++) {
		k[i] = frand();
		v[i] = frand();
	}
	for (int i = 0; i < HEADS * HD; i++)
		q[i] = frand();
	for (int i = 0; i < NPOS; i++)
		slots[i] = (int64_t)table[i / BS] * BS + i % BS;
	spyre_ref_paged_store(kc, vc, kvd, slots, NPOS, k, v);
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		spyre_ref_attention(q, k, v, at[i] + 1, HEADS, KVH, HD, 0.3f, o1, p);
		spyre_ref_paged_attention(q, kc, vc, BS, table, at[i], HEADS, KVH, HD, 0.3f, o2, scratch);
		TAP_CHECK(!memcmp(o1, o2, sizeof(o1)), "position %u: paged attention differs (%g vs %g)", at[i],
			  o2[0], o1[0]);
	}
	free(kc);
	free(vc);
}

static void test_rope_rows(void)
{
	float a[3 * 2 * 8], b[3 * 2 * 8];
	const int32_t pos[3] = { 7, 0, 130 };

	for (int i = 0; i < 48; i++)
		a[i] = b[i] = frand();
	spyre_ref_rope_rows(a, 3, 2, 8, pos, 10000.0f);
	for (int r = 0; r < 3; r++)
		spyre_ref_rope(b + r * 16, 2, 8, (uint32_t)pos[r], 10000.0f);
	TAP_CHECK(!memcmp(a, b, sizeof(a)), "rows rotated at their positions");
}

/* ---- the step against spyre_ref ---- */

#define NSEQ 3
#define BS 8
#define NB 24
#define MAXB 8

struct seq {
	int32_t tok[64];
	uint32_t len;		/* prompt */
	uint32_t done;		/* positions computed */
	int32_t table[MAXB];
	struct spyre_ref *ref;	/* the same sequence alone */
};

static void run_step_vs_ref(unsigned int dtype)
{
	struct spyre_model_config cfg = spyre_model_config_tiny();
	struct spyre_model_weights w;
	struct spyre_ref *ref;
	struct spyre_paged_kv kv;
	struct seq S[NSEQ] = { { .len = 5 }, { .len = 19 }, { .len = 40 } };
	/* blocks shuffled: sequence s's i-th block */
	const int32_t perm[NB] = { 17, 3, 9, 22, 0, 14, 6, 20, 11, 1, 19, 8, 23, 5, 12, 2, 16, 21, 7, 10, 4, 18, 13, 15 };
	/* prefill chunk of each step per sequence (0: that sequence decodes or waits) */
	const uint32_t chunk[][NSEQ] = { { 5, 8, 0 }, { 0, 11, 16 }, { 0, 0, 13 }, { 0, 0, 11 } };
	float *logits = malloc((size_t)NSEQ * cfg.vocab * sizeof(float)), *want = malloc(cfg.vocab * sizeof(float));
	uint32_t bad = 0, checked = 0;

	if (spyre_model_weights_random(&cfg, 1, &w))
		tap_bail("weights");
	ref = spyre_ref_new(&cfg, &w, dtype);
	TAP_EQ(0, spyre_paged_kv_alloc(&kv, &cfg, NB, BS));
	for (int s = 0; s < NSEQ; s++) {
		S[s].ref = spyre_ref_new(&cfg, &w, dtype);
		for (uint32_t i = 0; i < S[s].len; i++)
			S[s].tok[i] = (int32_t)((i * 37 + (uint32_t)s * 101 + 1) % cfg.vocab);
		for (int i = 0; i < MAXB; i++)
			S[s].table[i] = perm[s * MAXB + i];
	}
	for (uint32_t step = 0; step < 4 + 12; step++) {
		int32_t tokens[64], positions[64], tables[NSEQ * MAXB], am[NSEQ];
		int64_t slots[64];
		uint32_t qs[NSEQ + 1], ctx[NSEQ], n = 0, ns = 0, who[NSEQ];
		struct spyre_paged_batch b;

		for (int s = 0; s < NSEQ; s++) {
			struct seq *q = &S[s];
			uint32_t rows;

			if (q->done < q->len)
				rows = step < 4 ? chunk[step][s] : q->len - q->done;
			else
				rows = 1;
			if (!rows)
				continue;
			qs[ns] = n;
			who[ns] = (uint32_t)s;
			for (uint32_t r = 0; r < rows; r++) {
				uint32_t p = q->done + r;

				tokens[n] = q->tok[p];
				positions[n] = (int32_t)p;
				slots[n] = (int64_t)q->table[p / BS] * BS + p % BS;
				n++;
			}
			memcpy(tables + ns * MAXB, q->table, sizeof(q->table));
			ctx[ns] = q->done + rows;
			ns++;
		}
		qs[ns] = n;
		b = (struct spyre_paged_batch){ n, tokens, positions, slots, ns, qs, ctx, tables, MAXB };
		TAP_EQ(0, spyre_ref_paged_step(ref, &kv, &b, logits, am, err, sizeof(err)));
		for (uint32_t i = 0; i < ns; i++) {
			struct seq *q = &S[who[i]];
			uint32_t rows = qs[i + 1] - qs[i];

			TAP_EQ(0, spyre_ref_prefill(q->ref, q->tok + q->done, rows, want));
			q->done += rows;
			checked++;
			if (memcmp(want, logits + (size_t)i * cfg.vocab, cfg.vocab * sizeof(float))) {
				bad++;
				tap_diag("step %u sequence %u (%u rows to %u): logits differ", step, who[i], rows,
					 q->done);
			}
			TAP_EQ(spyre_argmax(want, cfg.vocab), am[i]);
			if (q->done >= q->len)	/* the next token: greedy */
				q->tok[q->done] = am[i];
		}
	}
	TAP_EQ(0, bad);
	TAP_CMP(checked, >=, 3u * 12);
	TAP_EQ(52u, S[2].done);
	/* logits NULL, argmax only; and neither */
	{
		int32_t t = 3, pos = 52, tbl[MAXB], am = -5;
		int64_t sl;
		uint32_t q2[2] = { 0, 1 }, c = 53;
		struct spyre_paged_batch b = { 1, &t, &pos, &sl, 1, q2, &c, tbl, MAXB };

		memcpy(tbl, S[2].table, sizeof(tbl));
		sl = (int64_t)tbl[52 / BS] * BS + 52 % BS;
		TAP_EQ(0, spyre_ref_paged_step(ref, &kv, &b, NULL, &am, err, sizeof(err)));
		TAP_EQ(0, spyre_ref_decode(S[2].ref, 3, want));
		TAP_EQ(spyre_argmax(want, cfg.vocab), am);
		TAP_EQ(0, spyre_ref_paged_step(ref, &kv, &b, NULL, NULL, err, sizeof(err)));
	}
	for (int s = 0; s < NSEQ; s++)
		spyre_ref_free(S[s].ref);
	spyre_paged_kv_free(&kv);
	spyre_ref_free(ref);
	spyre_model_weights_free(&w);
	free(logits);
	free(want);
}

static void test_step_fp32(void)
{
	run_step_vs_ref(SPYRE_REF_FP32);
}

static void test_step_fp16(void)
{
	run_step_vs_ref(SPYRE_REF_FP16);
}

static void test_bad_batches(void)
{
	struct spyre_model_config cfg = spyre_model_config_tiny(), other = cfg;
	struct spyre_model_weights w;
	struct spyre_ref *ref;
	struct spyre_paged_kv kv, kv2;
	int32_t tokens[3] = { 1, 2, 3 }, pos[3] = { 0, 1, 2 }, table[2] = { 1, 0 };
	int64_t slots[3] = { 8, 9, 10 };
	uint32_t qs[2] = { 0, 3 }, ctx = 3;
	struct spyre_paged_batch good = { 3, tokens, pos, slots, 1, qs, &ctx, table, 2 }, b;
	float logits[512];

	if (spyre_model_weights_random(&cfg, 1, &w))
		tap_bail("weights");
	ref = spyre_ref_new(&cfg, &w, 0);
	TAP_EQ(0, spyre_paged_kv_alloc(&kv, &cfg, 4, 8));
	TAP_EQ(0, spyre_ref_paged_step(ref, &kv, &good, logits, NULL, err, sizeof(err)));

#define BAD(what, field)								\
	do {										\
		TAP_EQ(-EINVAL, spyre_ref_paged_step(ref, &kv, &b, logits, NULL, err, sizeof(err)));	\
		TAP_CHECK(strstr(err, field), "%s: message '%s' does not name %s", what, err, field);	\
	} while (0)

	b = good; tokens[1] = 512; BAD("token", "tokens[1]"); tokens[1] = 2;
	b = good; tokens[1] = -1; BAD("token", "tokens[1]"); tokens[1] = 2;
	b = good; slots[2] = 32; BAD("slot", "slot_mapping[2]"); slots[2] = 10;
	b = good; slots[2] = -2; BAD("slot", "slot_mapping[2]"); slots[2] = 10;
	b = good; table[0] = 4; BAD("block", "block_tables[0][0]"); table[0] = 1;
	b = good; ctx = 9; table[1] = -1; BAD("block", "block_tables[0][1]"); ctx = 3; table[1] = 0;
	b = good; ctx = 17; BAD("context", "context_lens[0]"); ctx = 3;
	b = good; ctx = 0; BAD("context", "context_lens[0]"); ctx = 3;
	b = good; pos[2] = 3; BAD("position", "positions[2]"); pos[2] = 2;
	b = good; qs[1] = 2; BAD("query_start", "query_start"); qs[1] = 3;
	b = good; b.num_tokens = 0; BAD("rows", "empty");
	b = good; b.num_seqs = 0; BAD("seqs", "empty");
	b = good; b.block_tables = NULL; BAD("missing", "missing");
	{
		uint32_t qs3[3] = { 0, 0, 3 }, c2[2] = { 3, 3 };
		int32_t t2[4] = { 1, 0, 1, 0 };

		b = good;
		b.num_seqs = 2;
		b.query_start = qs3;
		b.context_lens = c2;
		b.block_tables = t2;
		BAD("empty sequence", "query_start[0..1]");
	}
	/* a cache of another shape */
	other.layers = 3;
	TAP_EQ(0, spyre_paged_kv_alloc(&kv2, &other, 4, 8));
	TAP_EQ(-EINVAL, spyre_ref_paged_step(ref, &kv2, &good, logits, NULL, err, sizeof(err)));
	TAP_CHECK(strstr(err, "KV cache"), "'%s'", err);
	spyre_paged_kv_free(&kv2);
	TAP_EQ(-EINVAL, spyre_paged_kv_alloc(&kv2, &cfg, 0, 8));
	TAP_EQ(-EINVAL, spyre_paged_kv_alloc(&kv2, &cfg, 4, 0));
	TAP_EQ(-EINVAL, spyre_paged_kv_alloc(&kv2, &cfg, UINT32_MAX, UINT32_MAX));
	spyre_paged_kv_free(&kv);
	spyre_ref_free(ref);
	spyre_model_weights_free(&w);
}

static const struct tap_case cases[] = {
	{ "store-gather", test_store_gather },
	{ "attention", test_attention },
	{ "rope-rows", test_rope_rows },
	{ "step-fp32", test_step_fp32 },
	{ "step-fp16", test_step_fp16 },
	{ "bad-batches", test_bad_batches },
};

int main(int argc, char **argv)
{
	return TAP_RUN(cases, argc, argv);
}
