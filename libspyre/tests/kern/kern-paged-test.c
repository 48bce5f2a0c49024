// SPDX-License-Identifier: MIT
/*
 * Description: the paged KV cache's kernels on the engine (issue 22):
 * PAGED_KV_WRITE (rows to their slots, -1 rows skipped, the rows nobody
 * names untouched), PAGED_ATTENTION as batched decode (ragged context
 * lengths at the boundaries of a block and of the context, block tables
 * with holes and a block two sequences share, GQA) and as a prefill chunk
 * (a chunk attending to its cached prefix and causally to itself), the
 * indexed EMBEDDING (ids in device memory, a row gather) and ROPE (a
 * position per row), in fp32 and fp16 against the CPU reference
 * (model/ref.c's attention over each row's gathered positions); hostile
 * tables (a block id past num_blocks, a context past max_pos, a slot past
 * the cache, a token past the vocabulary) end the launch with the engine
 * fault bad-index, with nothing written through them; descriptors the ops
 * cannot take are -EINVAL naming the field.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ref.h"

/* Tolerances: fp32 relative 1e-5 (+1e-6 absolute); fp16 outputs rounded once, inputs as stored: 4e-3 (+2e-3). */
static double rtol(uint32_t dt)
{
	return dt == SPYRE_DT_FP32 ? 1e-5 : 4e-3;
}

static double atol_(uint32_t dt)
{
	return dt == SPYRE_DT_FP32 ? 1e-6 : 2e-3;
}

/* An int32 stick-layout matrix [rows x cols] (tables), malloc'd, padding -7 (never read as data). */
static int32_t *itab(const int32_t *v, uint32_t rows, uint32_t cols, uint64_t *bytes)
{
	uint64_t pitch = spyre_kernel_pitch(cols, SPYRE_DT_INT32);
	int32_t *t = kh_alloc(rows * pitch);

	for (uint64_t i = 0; i < rows * pitch / 4; i++)
		t[i] = -7;
	for (uint32_t r = 0; r < rows; r++)
		memcpy((uint8_t *)t + r * pitch, v + (uint64_t)r * cols, (size_t)cols * 4);
	*bytes = rows * pitch;
	return t;
}

static void round_all(float *p, uint64_t n, uint32_t dt)
{
	for (uint64_t i = 0; i < n; i++)
		p[i] = kh_round(p[i], dt);
}

/* ---- PAGED_KV_WRITE ------------------------------------------------------ */

static void kv_write_case(uint32_t dt, uint32_t cores, uint32_t bs, uint32_t nb, uint32_t kvh, uint32_t hd,
			  const int32_t *slot, uint32_t m)
{
	uint32_t w = kvh * hd, nslots = nb * bs;
	float *k = kh_alloc((uint64_t)m * w * 4), *v = kh_alloc((uint64_t)m * w * 4);
	float *kc = kh_alloc((uint64_t)nslots * w * 4), *vc = kh_alloc((uint64_t)nslots * w * 4);
	float *kw = kh_alloc((uint64_t)nslots * w * 4), *vw = kh_alloc((uint64_t)nslots * w * 4);
	uint64_t tb;
	int32_t *t = itab(slot, 1, m, &tb);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_PAGED_KV_WRITE, .dtype = dt, .cores = cores,
				 .m = m, .kv_heads = kvh, .head_dim = hd, .block_size = bs, .num_blocks = nb };
	struct kh_slot s[] = {
		KH_IN_G(k, m, w, hd), KH_IN_G(v, m, w, hd), KH_RAW(t, tb),
		{ .kind = KH_KIND_INOUT, .data = kc, .rows = nslots, .cols = w, .group = hd, .dtype = -1 },
		{ .kind = KH_KIND_INOUT, .data = vc, .rows = nslots, .cols = w, .group = hd, .dtype = -1 },
	};

	kh_fill(k, (uint64_t)m * w, -2, 2);
	kh_fill(v, (uint64_t)m * w, -3, 3);
	kh_fill(kc, (uint64_t)nslots * w, 5, 6);
	kh_fill(vc, (uint64_t)nslots * w, 7, 8);
	round_all(k, (uint64_t)m * w, dt);
	round_all(v, (uint64_t)m * w, dt);
	round_all(kc, (uint64_t)nslots * w, dt);
	round_all(vc, (uint64_t)nslots * w, dt);
	memcpy(kw, kc, (uint64_t)nslots * w * 4);
	memcpy(vw, vc, (uint64_t)nslots * w * 4);
	for (uint32_t r = 0; r < m; r++)
		if (slot[r] >= 0) {
			memcpy(kw + (uint64_t)slot[r] * w, k + (uint64_t)r * w, (size_t)w * 4);
			memcpy(vw + (uint64_t)slot[r] * w, v + (uint64_t)r * w, (size_t)w * 4);
		}
	if (kh_run(&d, s, 5, NULL, 0, NULL) == 0) {
		char what[96];

		snprintf(what, sizeof(what), "kv write %s c%u bs %u m %u: K cache (exact)", spyre_dtype_name(dt),
			 cores, bs, m);
		kh_close(what, kc, kw, (uint64_t)nslots * w, 0, 0);
		snprintf(what, sizeof(what), "kv write %s c%u bs %u m %u: V cache (exact)", spyre_dtype_name(dt),
			 cores, bs, m);
		kh_close(what, vc, vw, (uint64_t)nslots * w, 0, 0);
	}
	free(k);
	free(v);
	free(kc);
	free(vc);
	free(kw);
	free(vw);
	free(t);
}

static void test_kv_write(void)
{
	/* block boundaries (15 | 16, 63 | 64), a -1 padding row, the last slot, rows out of order */
	static const int32_t s1[] = { 15, 16, -1, 79, 0, 40 };
	static const int32_t s2[] = { 63, 64, 127, -1, -1, 5, 200, 255, 128 };

	kv_write_case(SPYRE_DT_FP32, 1, 16, 5, 2, 64, s1, 6);
	kv_write_case(SPYRE_DT_FP16, 7, 16, 5, 2, 64, s1, 6);
	kv_write_case(SPYRE_DT_FP16, 32, 64, 4, 4, 80, s2, 9);	/* head_dim 80: a head is 2 sticks */
	kv_write_case(SPYRE_DT_FP32, 3, 64, 4, 1, 128, s2, 9);
}

/* ---- PAGED_ATTENTION ----------------------------------------------------- */

struct pa {
	uint32_t dt, heads, kvh, hd, bs, nb, n, qps, max_pos, cores;
	const int32_t *ctx;	/* [n] */
	const int32_t *bt;	/* [n][max_blocks] */
};

/* Reference: each row's positions gathered through the table, then model/ref.c's attention. */
static void pa_ref(const struct pa *p, const float *q, const float *kc, const float *vc, float *o)
{
	uint32_t w = p->kvh * p->hd, mb = (p->max_pos + p->bs - 1) / p->bs;
	float *kg = kh_alloc((uint64_t)p->max_pos * w * 4), *vg = kh_alloc((uint64_t)p->max_pos * w * 4);
	float *scratch = kh_alloc((uint64_t)p->max_pos * 4);
	float scale = (float)(1.0 / sqrt((double)p->hd));

	for (uint32_t s = 0; s < p->n; s++)
		for (uint32_t i = 0; i < p->qps; i++) {
			uint32_t pos = (uint32_t)p->ctx[s] - p->qps + i, row = s * p->qps + i;

			for (uint32_t t = 0; t <= pos; t++) {
				uint64_t slot = (uint64_t)p->bt[s * mb + t / p->bs] * p->bs + t % p->bs;

				memcpy(kg + (uint64_t)t * w, kc + slot * w, (size_t)w * 4);
				memcpy(vg + (uint64_t)t * w, vc + slot * w, (size_t)w * 4);
			}
			spyre_ref_attention(q + (uint64_t)row * p->heads * p->hd, kg, vg, pos + 1, p->heads, p->kvh,
					    p->hd, scale, o + (uint64_t)row * p->heads * p->hd, scratch);
			for (uint32_t j = 0; j < p->heads * p->hd; j++)
				o[(uint64_t)row * p->heads * p->hd + j] =
					kh_round(o[(uint64_t)row * p->heads * p->hd + j], p->dt);
		}
	free(kg);
	free(vg);
	free(scratch);
}

/* Run @p; returns the engine status (0 checked against the reference). */
static int pa_case(const char *name, const struct pa *p)
{
	uint32_t m = p->n * p->qps, wq = p->heads * p->hd, w = p->kvh * p->hd, nslots = p->nb * p->bs;
	uint32_t mb = (p->max_pos + p->bs - 1) / p->bs;
	float *q = kh_alloc((uint64_t)m * wq * 4), *o = kh_alloc((uint64_t)m * wq * 4);
	float *want = kh_alloc((uint64_t)m * wq * 4);
	float *kc = kh_alloc((uint64_t)nslots * w * 4), *vc = kh_alloc((uint64_t)nslots * w * 4);
	uint64_t btb, ctb;
	int32_t *bt = itab(p->bt, p->n, mb, &btb), *ct = itab(p->ctx, 1, p->n, &ctb);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_PAGED_ATTENTION, .dtype = p->dt,
				 .cores = p->cores, .m = m, .n = p->n, .heads = p->heads, .kv_heads = p->kvh,
				 .head_dim = p->hd, .max_pos = p->max_pos, .block_size = p->bs,
				 .num_blocks = p->nb };
	struct kh_slot s[] = {
		KH_IN_G(q, m, wq, p->hd), KH_IN_G(kc, nslots, w, p->hd), KH_IN_G(vc, nslots, w, p->hd),
		KH_RAW(bt, btb), KH_RAW(ct, ctb), KH_OUT_G(o, m, wq, p->hd),
	};
	struct spyre_kernel_info info = { .size = sizeof(info) };
	int rc;

	kh_fill(q, (uint64_t)m * wq, -1.5f, 1.5f);
	kh_fill(kc, (uint64_t)nslots * w, -1.5f, 1.5f);
	kh_fill(vc, (uint64_t)nslots * w, -2, 2);
	round_all(q, (uint64_t)m * wq, p->dt);
	round_all(kc, (uint64_t)nslots * w, p->dt);
	round_all(vc, (uint64_t)nslots * w, p->dt);
	rc = kh_run(&d, s, 6, NULL, 0, &info);
	if (rc == 0) {
		char what[160];

		pa_ref(p, q, kc, vc, want);
		snprintf(what, sizeof(what), "%s: %s", name, info.name);
		kh_close(what, o, want, (uint64_t)m * wq, rtol(p->dt), atol_(p->dt));
		kh_diag_timing(&info);
	}
	free(q);
	free(o);
	free(want);
	free(kc);
	free(vc);
	free(bt);
	free(ct);
	return rc;
}

/*
 * Batched decode, blocks of 16: contexts 1 (one key), 16 (a whole block),
 * 17 (one past), 33, 64 (the whole context), 40; block tables with holes
 * (-1 entries past each context: never read) and block 3 shared by
 * sequences 1 and 4 (a common prefix).
 */
static void test_decode_ragged(void)
{
	static const int32_t ctx[] = { 1, 16, 17, 33, 64, 40 };
	static const int32_t bt[6 * 4] = {
		7, -1, -1, -1,
		3, -1, -1, -1,
		0, 9, -1, -1,
		11, 2, 5, -1,
		3, 1, 8, 10,
		4, 6, 12, -1,
	};
	static const uint32_t dts[] = { SPYRE_DT_FP32, SPYRE_DT_FP16 };
	static const uint32_t cores[] = { 1, 5, 32 };

	for (size_t i = 0; i < 2; i++)
		for (size_t c = 0; c < 3; c++) {
			struct pa p = { .dt = dts[i], .heads = 8, .kvh = 2, .hd = 64, .bs = 16, .nb = 13, .n = 6,
					.qps = 1, .max_pos = 64, .cores = cores[c], .ctx = ctx, .bt = bt };

			pa_case("decode ragged, GQA 8/2", &p);
		}
}

/* Decode with the default block of 64, MHA, head_dim 80 (not whole sticks), a long context. */
static void test_decode_bs64(void)
{
	static const int32_t ctx[] = { 65, 200, 128 };
	static const int32_t bt[3 * 4] = {
		2, 0, -1, -1,
		5, 4, 1, 3,
		1, 2, -1, -1,
	};
	struct pa p = { .dt = SPYRE_DT_FP16, .heads = 4, .kvh = 4, .hd = 80, .bs = 64, .nb = 6, .n = 3,
			.qps = 1, .max_pos = 256, .cores = 32, .ctx = ctx, .bt = bt };

	pa_case("decode bs 64, MHA, head_dim 80", &p);
	p.dt = SPYRE_DT_FP32;
	p.heads = 8;
	p.kvh = 1;
	pa_case("decode bs 64, MQA 8/1, fp32", &p);
	/* 32 KV heads on one core: groups of at most 16 per unit */
	p.heads = 32;
	p.kvh = 32;
	p.hd = 32;
	p.cores = 1;
	pa_case("decode bs 64, MHA 32 heads, one core", &p);
}

/* A prefill chunk: 20 rows at positions 25..44 over a cached prefix, blocks of 16. */
static void test_prefill_chunk(void)
{
	static const int32_t ctx1[] = { 45 };
	static const int32_t bt1[4] = { 6, 2, 4, -1 };
	static const int32_t ctx0[] = { 20 };	/* the first chunk: no prefix */
	static const int32_t bt0[4] = { 1, 0, -1, -1 };
	static const uint32_t dts[] = { SPYRE_DT_FP32, SPYRE_DT_FP16 };

	for (size_t i = 0; i < 2; i++) {
		struct pa p = { .dt = dts[i], .heads = 4, .kvh = 2, .hd = 64, .bs = 16, .nb = 7, .n = 1, .qps = 20,
				.max_pos = 64, .cores = 7, .ctx = ctx1, .bt = bt1 };

		pa_case("prefill chunk 25..44", &p);
		p.ctx = ctx0;
		p.bt = bt0;
		p.cores = 32;
		pa_case("prefill chunk 0..19", &p);
	}
}

/* Two sequences of 3 rows each (n = 2, m = 6): the general form. */
static void test_multi_row(void)
{
	static const int32_t ctx[] = { 3, 18 };
	static const int32_t bt[2 * 2] = { 1, -1, 0, 2 };
	struct pa p = { .dt = SPYRE_DT_FP32, .heads = 4, .kvh = 2, .hd = 32, .bs = 16, .nb = 3, .n = 2, .qps = 3,
			.max_pos = 32, .cores = 3, .ctx = ctx, .bt = bt };

	pa_case("two sequences of 3 rows", &p);
}

/*
 * A Granite-8B layer's shapes (heads 32, kv_heads 8, head_dim 128, fp16,
 * blocks of 64, 32 cores): 16 decodes at contexts 130..1024 over blocks
 * scattered through the pool, and a prefill chunk of 512 rows after 512
 * cached; checked like the others, the modeled times reported.
 */
static void test_granite_shapes(void)
{
	enum { N = 16, MB = 16 };
	int32_t ctx[N], bt[N * MB], ctx1[1] = { 1024 }, bt1[MB];

	for (int s = 0; s < N; s++) {
		ctx[s] = 1024 - 56 * s;
		for (int i = 0; i < MB; i++)
			bt[s * MB + i] = (i * N + s * 7 + i * 3) % (N * MB);	/* a permutation per column */
	}
	for (int i = 0; i < MB; i++)
		bt1[i] = 255 - 3 * i;
	struct pa p = { .dt = SPYRE_DT_FP16, .heads = 32, .kvh = 8, .hd = 128, .bs = 64, .nb = N * MB, .n = N,
			.qps = 1, .max_pos = 1024, .cores = 32, .ctx = ctx, .bt = bt };

	pa_case("granite decode x16, contexts 1024..184", &p);
	p.n = 1;
	p.qps = 512;
	p.ctx = ctx1;
	p.bt = bt1;
	pa_case("granite prefill chunk 512..1023", &p);
}

/* Hostile tables: the fault bad-index, named, never a read outside the slots. */
static void test_hostile(void)
{
	static const int32_t ctx_ok[] = { 20, 5 };
	static const int32_t ctx_long[] = { 20, 65 };	/* max_pos 64 */
	static const int32_t bt_bad[2 * 4] = { 0, 13, -1, -1, 1, -1, -1, -1 };	/* 13 = num_blocks */
	static const int32_t bt_neg[2 * 4] = { 0, -1, -1, -1, 1, -1, -1, -1 };	/* seq 0 needs 2 blocks */
	static const int32_t bt_ok[2 * 4] = { 0, 2, -1, -1, 1, 3, 4, 5 };
	struct pa p = { .dt = SPYRE_DT_FP32, .heads = 2, .kvh = 1, .hd = 32, .bs = 16, .nb = 13, .n = 2, .qps = 1,
			.max_pos = 64, .cores = 2, .ctx = ctx_ok, .bt = bt_bad };
	int rc;

	kh_fault_expected = true;
	rc = pa_case("block id = num_blocks", &p);
	TAP_CHECK(rc == SPYRE_ENGINE_FAULT_INDEX && kh_last_result.fault_addr == 13,
		  "block id 13 of 13: fault %s addr %llu (want bad-index 13)", spyre_fault_name(kh_last_result.status),
		  (unsigned long long)kh_last_result.fault_addr);
	p.bt = bt_neg;
	rc = pa_case("a hole where a block is needed", &p);
	TAP_CHECK(rc == SPYRE_ENGINE_FAULT_INDEX && kh_last_result.fault_addr == (uint64_t)-1,
		  "block id -1 inside the context: fault %s (want bad-index)", spyre_fault_name(kh_last_result.status));
	p.bt = bt_ok;
	p.ctx = ctx_long;
	rc = pa_case("context past max_pos", &p);
	TAP_CHECK(rc == SPYRE_ENGINE_FAULT_INDEX && kh_last_result.fault_addr == 65,
		  "context 65 of max_pos 64: fault %s addr %llu (want bad-index 65)",
		  spyre_fault_name(kh_last_result.status), (unsigned long long)kh_last_result.fault_addr);

	/* a slot past the cache: nothing written, not even the good rows' after it on that core */
	{
		static const int32_t sl[] = { 3, 64 };	/* 4 blocks of 16: 64 slots */
		uint64_t tb;
		int32_t *t = itab(sl, 1, 2, &tb);
		float k[2 * 32], v[2 * 32], kc[64 * 32], vc[64 * 32];
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_PAGED_KV_WRITE, .dtype = SPYRE_DT_FP32,
					 .cores = 1, .m = 2, .kv_heads = 1, .head_dim = 32, .block_size = 16,
					 .num_blocks = 4 };
		struct kh_slot s[] = {
			KH_IN(k, 2, 32), KH_IN(v, 2, 32), KH_RAW(t, tb), KH_INOUT(kc, 64, 32), KH_INOUT(vc, 64, 32),
		};

		kh_fill(k, 64, 0, 1);
		kh_fill(v, 64, 0, 1);
		kh_fill(kc, 64 * 32, 0, 1);
		kh_fill(vc, 64 * 32, 0, 1);
		rc = kh_run(&d, s, 5, NULL, 0, NULL);
		TAP_CHECK(rc == SPYRE_ENGINE_FAULT_INDEX && kh_last_result.fault_addr == 64,
			  "slot 64 of 64: fault %s addr %llu (want bad-index 64)",
			  spyre_fault_name(kh_last_result.status), (unsigned long long)kh_last_result.fault_addr);
		free(t);
	}
	kh_fault_expected = false;
}

/* ---- indexed EMBEDDING and ROPE ------------------------------------------- */

/* ids from device memory: rows of the table, exactly; the same program for any ids. */
static void test_embedding_indexed(void)
{
	static const int32_t ids[] = { 5, 0, 99, 5, 42, 98, 1 };
	static const uint32_t dts[] = { SPYRE_DT_FP32, SPYRE_DT_FP16 };
	uint32_t m = 7, n = 100, k = 96;

	for (size_t di = 0; di < 2; di++) {
		float *tab = kh_alloc((uint64_t)n * k * 4), *y = kh_alloc((uint64_t)m * k * 4);
		float *want = kh_alloc((uint64_t)m * k * 4);
		uint64_t ib;
		int32_t *it = itab(ids, 1, m, &ib);
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_EMBEDDING, .dtype = dts[di], .cores = 3,
					 .flags = SPYRE_KF_INDEXED, .m = m, .n = n, .k = k };
		struct kh_slot s[] = { KH_IN(tab, n, k), KH_RAW(it, ib), KH_OUT(y, m, k) };

		kh_fill(tab, (uint64_t)n * k, -4, 4);
		round_all(tab, (uint64_t)n * k, dts[di]);
		for (uint32_t r = 0; r < m; r++)
			memcpy(want + (uint64_t)r * k, tab + (uint64_t)ids[r] * k, (size_t)k * 4);
		if (kh_run(&d, s, 3, NULL, 0, NULL) == 0)
			kh_close(dts[di] == SPYRE_DT_FP32 ? "embedding indexed fp32 (exact)" :
				 "embedding indexed fp16 (exact)", y, want, (uint64_t)m * k, 0, 0);
		/* hostile ids: past the vocabulary, negative */
		kh_fault_expected = true;
		for (int bad = 0; bad < 2; bad++) {
			int32_t b[7];

			memcpy(b, ids, sizeof(b));
			b[4] = bad ? -1 : 100;
			free(it);
			it = itab(b, 1, m, &ib);
			s[1].raw = it;
			TAP_CHECK(kh_run(&d, s, 3, NULL, 0, NULL) == SPYRE_ENGINE_FAULT_INDEX &&
				  kh_last_result.fault_addr == (uint64_t)(int64_t)b[4],
				  "id %d of a vocabulary of 100: %s (want bad-index)", b[4],
				  spyre_fault_name(kh_last_result.status));
		}
		kh_fault_expected = false;
		free(tab);
		free(y);
		free(want);
		free(it);
	}
	{
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_EMBEDDING, .dtype = SPYRE_DT_FP16,
					 .flags = SPYRE_KF_INDEXED, .m = 1, .n = 10, .k = 64 };
		uint64_t sc;

		TAP_CHECK(spyre_kernel_embedding_scalars(&d, (int32_t[]){ 1 }, &sc) == -EINVAL,
			  "embedding scalars of an indexed descriptor: -EINVAL");
	}
	/* more tokens than the scalar form allows (198): ids in memory have no such limit */
	{
		uint32_t big = 500, vk = 64;
		int32_t *bi = kh_alloc((uint64_t)big * 4);
		float *tab = kh_alloc(50ull * vk * 4), *y = kh_alloc((uint64_t)big * vk * 4);
		float *want = kh_alloc((uint64_t)big * vk * 4);
		uint64_t ib;
		int32_t *it;
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_EMBEDDING, .dtype = SPYRE_DT_FP32,
					 .flags = SPYRE_KF_INDEXED, .m = big, .n = 50, .k = vk };

		for (uint32_t r = 0; r < big; r++)
			bi[r] = (int32_t)((r * 7) % 50);
		it = itab(bi, 1, big, &ib);
		kh_fill(tab, 50ull * vk, -1, 1);
		for (uint32_t r = 0; r < big; r++)
			memcpy(want + (uint64_t)r * vk, tab + (uint64_t)bi[r] * vk, (size_t)vk * 4);
		struct kh_slot s[] = { KH_IN(tab, 50, vk), KH_RAW(it, ib), KH_OUT(y, big, vk) };

		if (kh_run(&d, s, 3, NULL, 0, NULL) == 0)
			kh_close("embedding indexed, 500 rows (exact)", y, want, (uint64_t)big * vk, 0, 0);
		free(bi);
		free(it);
		free(tab);
		free(y);
		free(want);
	}
}

/*
 * ROPE with a position per row: each row equals the (checked) scalar ROPE
 * of that row alone at its position, bit for bit.
 */
static void rope_indexed_case(uint32_t dt, uint32_t cores, uint32_t heads, uint32_t hd)
{
	static const int32_t pos[] = { 0, 17, 5, 299, 64, 64, 1, 150, 2 };
	uint32_t m = 9, max_pos = 300, w = heads * hd;
	uint64_t tb = (uint64_t)max_pos * spyre_kernel_pitch(hd, SPYRE_DT_FP32), pb;
	void *ct = kh_alloc(tb), *st = kh_alloc(tb);
	float *x = kh_alloc((uint64_t)m * w * 4), *y = kh_alloc((uint64_t)m * w * 4);
	float *want = kh_alloc((uint64_t)m * w * 4);
	int32_t *pt = itab(pos, 1, m, &pb);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ROPE, .dtype = dt, .cores = cores,
				 .flags = SPYRE_KF_INDEXED, .m = m, .heads = heads, .head_dim = hd,
				 .max_pos = max_pos };
	struct spyre_kdesc d1 = d;
	char what[96];
	bool ok = true;

	spyre_kernel_rope_tables(ct, st, max_pos, hd, 10000.0f);
	kh_fill(x, (uint64_t)m * w, -2, 2);
	d1.flags = 0;
	d1.m = 1;
	d1.cores = 1;
	for (uint32_t r = 0; r < m && ok; r++) {
		struct kh_slot s1[] = { KH_IN_G(x + (uint64_t)r * w, 1, w, hd), KH_RAW(ct, tb), KH_RAW(st, tb),
					KH_OUT_G(want + (uint64_t)r * w, 1, w, hd) };
		uint64_t sc = spyre_kernel_rope_scalar(&d1, (uint32_t)pos[r]);

		ok = kh_run(&d1, s1, 4, &sc, 1, NULL) == 0;
	}
	struct kh_slot s[] = { KH_IN_G(x, m, w, hd), KH_RAW(ct, tb), KH_RAW(st, tb), KH_RAW(pt, pb),
			       KH_OUT_G(y, m, w, hd) };

	snprintf(what, sizeof(what), "rope indexed %s c%u h%u hd%u = per-row scalar rope (exact)",
		 spyre_dtype_name(dt), cores, heads, hd);
	if (ok && kh_run(&d, s, 5, NULL, 0, NULL) == 0)
		kh_close(what, y, want, (uint64_t)m * w, 0, 0);
	/* a position past the table */
	{
		int32_t bad[9];

		memcpy(bad, pos, sizeof(bad));
		bad[8] = 300;
		free(pt);
		pt = itab(bad, 1, m, &pb);
		s[3].raw = pt;
		kh_fault_expected = true;
		TAP_CHECK(kh_run(&d, s, 5, NULL, 0, NULL) == SPYRE_ENGINE_FAULT_INDEX &&
			  kh_last_result.fault_addr == 300, "position 300 of max_pos 300: %s (want bad-index)",
			  spyre_fault_name(kh_last_result.status));
		kh_fault_expected = false;
	}
	free(ct);
	free(st);
	free(x);
	free(y);
	free(want);
	free(pt);
}

static void test_rope_indexed(void)
{
	rope_indexed_case(SPYRE_DT_FP32, 1, 2, 64);
	rope_indexed_case(SPYRE_DT_FP16, 7, 4, 64);
	rope_indexed_case(SPYRE_DT_FP16, 32, 3, 96);	/* rotate_half by the matrix R */
	rope_indexed_case(SPYRE_DT_BF16, 4, 8, 128);
}

static void test_errors(void)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_PAGED_ATTENTION, .dtype = SPYRE_DT_FP16,
				 .m = 5, .n = 2, .heads = 4, .kv_heads = 2, .head_dim = 64, .max_pos = 64,
				 .num_blocks = 4 };

	kh_expect_einval(&d, "whole number per sequence");
	d.m = 4;
	d.heads = 3;
	kh_expect_einval(&d, "multiple of kv_heads");
	d.heads = 4;
	d.num_blocks = 0;
	kh_expect_einval(&d, "num_blocks");
	d.num_blocks = 4;
	d.alpha = 1;
	kh_expect_einval(&d, "alpha");
	d.alpha = 0;
	d.m = 2 * 65;
	kh_expect_einval(&d, "max_pos");
	d = (struct spyre_kdesc){ .size = sizeof(d), .op = SPYRE_KOP_SILU, .dtype = SPYRE_DT_FP16, .m = 1, .n = 1,
				  .block_size = 64 };
	kh_expect_einval(&d, "paged ops");
	d = (struct spyre_kdesc){ .size = sizeof(d), .op = SPYRE_KOP_PAGED_KV_WRITE, .dtype = SPYRE_DT_FP16, .m = 1,
				  .kv_heads = 1, .head_dim = 64, .num_blocks = 1, .heads = 4 };
	kh_expect_einval(&d, "unused");
}

static const struct tap_case cases[] = {
	{ "kv_write", test_kv_write },
	{ "decode_ragged", test_decode_ragged },
	{ "decode_bs64", test_decode_bs64 },
	{ "prefill_chunk", test_prefill_chunk },
	{ "multi_row", test_multi_row },
	{ "granite_shapes", test_granite_shapes },
	{ "hostile", test_hostile },
	{ "embedding_indexed", test_embedding_indexed },
	{ "rope_indexed", test_rope_indexed },
	{ "errors", test_errors },
};

int main(int argc, char **argv)
{
	return KH_MAIN(cases, argc, argv);
}
