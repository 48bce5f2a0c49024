// SPDX-License-Identifier: MIT
/*
 * Description: the kernel library's EMBEDDING, ARGMAX, IADD and TRANSPOSE on the
 * engine against CPU references (from the kh_round()ed inputs), every
 * dtype, 1, 7 and 32 cores, both addressing forms (alternating), edge
 * shapes (rows x columns, each of 1, 7, 8, 9, 63, 64, 65, 127, 128, 129;
 * EMBEDDING: those token counts and 198 x those hidden sizes), shapes tiled
 * through small scratchpads, bad descriptors, and the modeled time of
 * representative shapes (diagnostics).
 *
 * EMBEDDING: token ids as launch scalars (spyre_kernel_embedding_scalars),
 *	repeated ids, the first and last vocabulary rows, 198 tokens (the most a
 *	launch takes), hidden sizes wider than the scratchpad; multiplier 1
 *	(exact copy: tolerance 0) and 0.37 (one fp32 multiply, one rounding:
 *	kh_tol(dt) relative).
 * ARGMAX: exact index against a CPU argmax that skips NaN and keeps the
 *	lowest index on ties; ties inside a column tile, across column tiles of
 *	a core and across cores, NaN where the maximum would be, a core's whole
 *	block of NaN, a row of NaN (index 0); vocab 49159 on 32 cores.
 * IADD: exact against a CPU add of the constant (int32, saturating), 1, 7 and
 *	32 cores, the edge shapes, constants 1, -3 and 2^24 - 1,
 *	a column count past one stick, tiled through a small scratchpad, and
 *	its bad descriptors (a fractional or too large constant, a dtype, SPYRE_DT_INT32 too).
 * TRANSPOSE: both strategies forced and AUTO, exact (tolerance 0: data
 *	only moves), whole blocks and chunked (8 and 16 KiB scratchpads).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static uint64_t rng = 88172645463325252ull;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* ---- EMBEDDING ---- */

static void emb_run(uint32_t dt, uint32_t cores, uint64_t m, uint64_t vocab, uint64_t k, float scale,
		    uint32_t flags, uint32_t sp_bytes, const char *tag)
{
	float *tab = kh_alloc(4 * vocab * k), *y = kh_alloc(4 * m * k), *r = kh_alloc(4 * m * k);
	int32_t *tok = kh_alloc(4 * m);
	uint64_t *sc = kh_alloc(8 * m);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_EMBEDDING, .dtype = dt, .cores = cores,
				 .m = m, .n = vocab, .k = k, .scale = scale, .flags = flags, .sp_bytes = sp_bytes };
	struct kh_slot s[] = { KH_IN(tab, vocab, k), KH_OUT(y, m, k) };
	double sv = scale == 0 ? 1 : scale;
	char what[128];

	kh_fill(tab, vocab * k, -4, 4);
	for (uint64_t i = 0; i < m; i++)
		tok[i] = i == 0 ? (int32_t)vocab - 1 : i == 1 ? 0 : i % 5 == 4 ? tok[i - 3] : (int32_t)rnd((uint32_t)vocab);
	for (uint64_t i = 0; i < m; i++)
		for (uint64_t j = 0; j < k; j++)
			r[i * k + j] = kh_round((float)(kh_round(tab[tok[i] * k + j], dt) * sv), dt);
	snprintf(what, sizeof(what), "embedding %s %llu tokens vocab %llu hidden %llu x%g c%u%s%s", spyre_dtype_name(dt),
		 (unsigned long long)m, (unsigned long long)vocab, (unsigned long long)k, sv, cores,
		 flags & SPYRE_KF_RELOC ? " reloc" : "", tag);
	if (TAP_CHECK(spyre_kernel_embedding_scalars(&d, tok, sc) == 0, "%s: scalars: %s", what, spyre_last_error()) &&
	    kh_run(&d, s, 2, sc, (uint32_t)m, NULL) == 0)
		kh_close(what, y, r, m * k, sv == 1 ? 0 : kh_tol(dt), 0);
	free(tab);
	free(y);
	free(r);
	free(tok);
	free(sc);
}

static void test_embedding(void)
{
	static const uint32_t ms[] = { 1, 7, 8, 9, 63, 64, 65, 127, 128, 129, 198 };
	unsigned i = 0;

	for (unsigned di = 0; di < 4; di++)
		for (unsigned ci = 0; ci < 3; ci++)
			for (unsigned mi = 0; mi < 11; mi++)
				for (unsigned ki = 0; ki < 10; ki++, i++)
					emb_run(kh_dtypes[di], kh_cores[ci], ms[mi], 77, kh_edge[ki], i % 3 ? 0 : 0.37f,
						(i & 1) ? SPYRE_KF_RELOC : 0, 0, "");
	/* hidden rows wider than the scratchpad: column tiles */
	emb_run(SPYRE_DT_FP32, 3, 11, 40, 20000, 0, 0, 64 << 10, " sp64k");
	emb_run(SPYRE_DT_BF16, 7, 11, 40, 70000, 0.5f, SPYRE_KF_RELOC, 0, " wider than a tile op");
	emb_run(SPYRE_DT_FP16, 32, 40, 49159, 257, 0, 0, 4 << 10, " sp4k");
}

static void test_embedding_errors(void)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_EMBEDDING, .dtype = SPYRE_DT_FP16, .m = 199,
				 .n = 100, .k = 64 };
	int32_t tok[3] = { 5, 99, 100 };
	uint64_t sc[3];
	int rc;

	kh_expect_einval(&d, "at most 198");
	d.m = 3;
	d.k = 0;
	kh_expect_einval(&d, "k (hidden)");
	d.k = 64;
	rc = spyre_kernel_embedding_scalars(&d, tok, sc);
	TAP_CHECK(rc == -EINVAL && strstr(spyre_last_error(), "token 2 is id 100"), "id = vocab: rc %d, %s", rc,
		  spyre_last_error());
	tok[2] = -1;
	rc = spyre_kernel_embedding_scalars(&d, tok, sc);
	TAP_CHECK(rc == -EINVAL && strstr(spyre_last_error(), "id -1"), "id -1: rc %d, %s", rc, spyre_last_error());
	tok[2] = 0;
	rc = spyre_kernel_embedding_scalars(&d, tok, sc);
	TAP_CHECK(rc == 0 && sc[0] == 5 * 128 && sc[1] == 99 * 128 && sc[2] == 0, "ids 5 99 0: rc %d, %llu %llu %llu",
		  rc, (unsigned long long)sc[0], (unsigned long long)sc[1], (unsigned long long)sc[2]);
	d.op = SPYRE_KOP_ARGMAX;
	rc = spyre_kernel_embedding_scalars(&d, tok, sc);
	TAP_CHECK(rc == -EINVAL && strstr(spyre_last_error(), "EMBEDDING"), "wrong op: rc %d, %s", rc,
		  spyre_last_error());
}

/* ---- ARGMAX ---- */

static void am_ref(uint32_t dt, const float *x, int32_t *r, uint64_t m, uint64_t n)
{
	for (uint64_t i = 0; i < m; i++) {
		float mx = 0;
		int any = 0;

		r[i] = 0;
		for (uint64_t j = 0; j < n; j++) {
			float v = kh_round(x[i * n + j], dt);

			if (v == v && (!any || v > mx)) {
				mx = v;
				r[i] = (int32_t)j;
				any = 1;
			}
		}
	}
}

/* x filled by the caller */
static void am_check(uint32_t dt, uint32_t cores, uint64_t m, uint64_t n, uint32_t flags, uint32_t sp_bytes,
		     float *x, const char *tag)
{
	int32_t *y = kh_alloc(4 * m), *r = kh_alloc(4 * m);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ARGMAX, .dtype = dt, .cores = cores, .m = m,
				 .n = n, .flags = flags, .sp_bytes = sp_bytes };
	struct kh_slot s[] = { KH_IN(x, m, n), KH_OUT_I32(y, m) };

	am_ref(dt, x, r, m, n);
	if (kh_run(&d, s, 2, NULL, 0, NULL) == 0) {
		uint64_t bad = 0, first = 0;

		for (uint64_t i = 0; i < m; i++)
			if (y[i] != r[i] && !bad++)
				first = i;
		TAP_CHECK(!bad, "argmax %s %llux%llu c%u%s%s: %llu rows wrong, row %llu: got %d want %d", spyre_dtype_name(dt),
			  (unsigned long long)m, (unsigned long long)n, cores, flags & SPYRE_KF_RELOC ? " reloc" : "",
			  tag, (unsigned long long)bad, (unsigned long long)first, bad ? y[first] : 0,
			  bad ? r[first] : 0);
	}
	free(y);
	free(r);
}

/* kh_edges() */
static void am_edge(void *ctx, uint32_t dt, uint32_t cores, uint64_t m, uint64_t n, uint32_t flags)
{
	float *x = kh_alloc(4 * m * n);

	(void)ctx;
	/* few distinct values: ties everywhere */
	kh_fill(x, m * n, -1, 1);
	for (uint64_t e = 0; e < m * n; e++)
		x[e] = roundf(x[e] * 8) / 8;
	am_check(dt, cores, m, n, flags, 0, x, "");
	free(x);
}

static void test_argmax(void)
{
	kh_edges(am_edge, NULL);
}

/*
 * Vocabulary 49159 on 32 cores (fp16: core 0 takes 1600 columns, the others
 * 1536, the last 1479), ties across core boundaries and NaN; also with a
 * scratchpad small enough for column tiles within a core and several row
 * tiles.
 */
static void vocab_case(uint32_t dt, uint32_t cores, uint64_t m, uint32_t sp_bytes, uint32_t flags, const char *tag)
{
	uint64_t n = 49159;
	float *x = kh_alloc(4 * m * n);

	kh_fill(x, m * n, -10, 10);
	for (uint64_t i = 0; i < m; i++) {
		float *row = x + i * n;

		switch (i % 8) {
		case 0:	/* tie between core 1 and core 30 blocks (and a later one) */
			row[1700] = row[47000] = row[49158] = 50;
			break;
		case 1:	/* tie at the boundary: last column of core 0, first of core 1 */
			row[1599] = row[1600] = 50;
			break;
		case 2:	/* NaN beats nothing: the max is elsewhere */
			row[100] = NAN;
			row[30000] = NAN;
			row[30001] = 40;
			break;
		case 3:	/* a whole core block of NaN, the max in a later core */
			for (uint64_t j = 1600; j < 3136; j++)
				row[j] = NAN;
			row[40000] = 33;
			break;
		case 4:	/* every element NaN: index 0 */
			for (uint64_t j = 0; j < n; j++)
				row[j] = NAN;
			break;
		case 5:	/* the maximum at the very end */
			row[49158] = 99;
			break;
		case 6:	/* all equal: index 0 */
			for (uint64_t j = 0; j < n; j++)
				row[j] = 1;
			break;
		default:
			break;
		}
	}
	am_check(dt, cores, m, n, flags, sp_bytes, x, tag);
	free(x);
}

static void test_argmax_vocab(void)
{
	for (unsigned di = 0; di < 4; di++) {
		vocab_case(kh_dtypes[di], 32, 9, 0, di & 1 ? SPYRE_KF_RELOC : 0, " vocab");
		vocab_case(kh_dtypes[di], 7, 70, 32 << 10, di & 1 ? 0 : SPYRE_KF_RELOC, " vocab sp32k");
	}
	vocab_case(SPYRE_DT_FP16, 1, 8, 0, 0, " vocab 1 core");
	vocab_case(SPYRE_DT_BF16, 32, 1, 0, 0, " vocab 1 row");
}

static void test_argmax_errors(void)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ARGMAX, .dtype = SPYRE_DT_FP16, .m = 0,
				 .n = 100 };

	kh_expect_einval(&d, "m (rows)");
	d.m = 1;
	d.n = 0;
	kh_expect_einval(&d, "n (columns)");
	/* 32 rows of a stick, their fp32 copy and the merge buffers need ~22 KiB */
	d.m = 64;
	d.n = 49159;
	d.sp_bytes = 16 << 10;
	kh_expect_einval(&d, "do not fit the 16384-byte scratchpad");
}

/* ---- IADD ---- */

/* The ISA's int32 add saturates. */
static int32_t sat_add(int32_t a, int32_t b)
{
	int64_t v = (int64_t)a + b;

	return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}

/* Y = X + alpha on int32 [m x n], against the CPU. */
static void iadd_case(uint32_t cores, uint64_t m, uint64_t n, float alpha, uint32_t sp_bytes)
{
	uint64_t pitch = spyre_kernel_pitch(n, SPYRE_DT_INT32);
	uint8_t *xs = kh_alloc(m * pitch);
	int32_t *x = kh_alloc(4 * m * n), *y = kh_alloc(4 * m * n);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_IADD, .cores = cores, .m = m, .n = n,
				 .alpha = alpha, .sp_bytes = sp_bytes };
	struct kh_slot s[] = { KH_RAW(xs, m * pitch), KH_OUT_I32M(y, m, n) };
	uint64_t bad = 0, first = 0;

	memset(xs, 0, m * pitch);
	for (uint64_t i = 0; i < m * n; i++) {
		/* around the int32 limits too: the sum saturates */
		x[i] = i % 11 == 3 ? INT32_MAX - (int32_t)rnd(3) : i % 13 == 5 ? INT32_MIN + (int32_t)rnd(3) :
		       (int32_t)rnd(1u << 30) - (1 << 29);
		memcpy(xs + i / n * pitch + i % n * 4, &x[i], 4);
	}
	if (kh_run(&d, s, 2, NULL, 0, NULL) == 0) {
		for (uint64_t i = 0; i < m * n; i++)
			if (y[i] != sat_add(x[i], (int32_t)alpha) && !bad++)
				first = i;
		TAP_CHECK(!bad, "iadd %llux%llu %+g c%u sp%u: %llu elements wrong, element %llu: got %d want %d",
			  (unsigned long long)m, (unsigned long long)n, (double)alpha, cores, sp_bytes,
			  (unsigned long long)bad, (unsigned long long)first, bad ? y[first] : 0,
			  bad ? sat_add(x[first], (int32_t)alpha) : 0);
	}
	free(xs);
	free(x);
	free(y);
}

static void test_iadd(void)
{
	static const float alphas[] = { 1, -3, 16777215 };

	for (unsigned ci = 0; ci < 3; ci++)
		for (unsigned ri = 0; ri < 10; ri++)
			for (unsigned ki = 0; ki < 10; ki += 3)
				iadd_case(kh_cores[ci], kh_edge[ri], kh_edge[ki], alphas[(ri + ki) % 3], 0);
	/* the decode counters of the model: position and context length, one column each */
	iadd_case(1, 2, 1, 1, 0);
	iadd_case(32, 1, 1, 1, 0);
	/* row tiles: 16 KiB of scratchpad hold 31 rows of 129 columns */
	iadd_case(7, 300, 129, -3, 16 << 10);
}

static void test_iadd_errors(void)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_IADD, .m = 2, .n = 1, .alpha = 0.5f };

	kh_expect_einval(&d, "must be an integer");
	d.alpha = 16777216.0f;
	kh_expect_einval(&d, "must be an integer");
	d.alpha = 1;
	d.dtype = SPYRE_DT_FP16;
	kh_expect_einval(&d, "dtype must be 0");
	d.dtype = SPYRE_DT_INT32;	/* what the tensors are, but not the descriptor's convention */
	kh_expect_einval(&d, "dtype must be 0");
	d.dtype = SPYRE_DT_FP32;
	d.n = 0;
	kh_expect_einval(&d, "n (columns)");
	d.n = 1;
	d.beta = 1;
	kh_expect_einval(&d, "beta must be 0");
}

/* ---- TRANSPOSE ---- */

static const char *tpn(uint32_t s)
{
	return s == SPYRE_KSTRAT_VIA_MEMORY ? "via-memory" : s == SPYRE_KSTRAT_RING ? "ring" : "auto";
}

static void tp_run(uint32_t strat, uint32_t dt, uint32_t cores, uint64_t m, uint64_t n, uint32_t flags,
		   uint32_t sp_bytes, const char *tag)
{
	float *x = kh_alloc(4 * m * n), *y = kh_alloc(4 * m * n), *r = kh_alloc(4 * m * n);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_TRANSPOSE, .dtype = dt, .cores = cores,
				 .m = m, .n = n, .flags = flags, .strategy = strat, .sp_bytes = sp_bytes };
	struct kh_slot s[] = { KH_IN(x, m, n), KH_OUT(y, n, m), KH_WORK() };
	struct spyre_kernel_info info = { .size = sizeof(info) };
	int via = strat == SPYRE_KSTRAT_VIA_MEMORY;

	kh_fill(x, m * n, -100, 100);
	for (uint64_t i = 0; i < m; i++)
		for (uint64_t j = 0; j < n; j++)
			r[j * m + i] = kh_round(x[i * n + j], dt);
	if (kh_run(&d, s, via ? 3 : 2, NULL, 0, &info) == 0) {
		char what[128];

		snprintf(what, sizeof(what), "transpose %s %s %llux%llu c%u%s%s", tpn(strat), spyre_dtype_name(dt),
			 (unsigned long long)m, (unsigned long long)n, cores, flags & SPYRE_KF_RELOC ? " reloc" : "",
			 tag);
		TAP_CHECK(info.strategy == (strat ? strat : SPYRE_KSTRAT_RING), "%s: strategy %u", what, info.strategy);
		kh_close(what, y, r, m * n, 0, 0);
	}
	free(x);
	free(y);
	free(r);
}

/* kh_edges(): @ctx points to the strategy */
static void tp_edge(void *ctx, uint32_t dt, uint32_t cores, uint64_t m, uint64_t n, uint32_t flags)
{
	tp_run(*(const uint32_t *)ctx, dt, cores, m, n, flags, 0, "");
}

static void test_transpose_via_memory(void) { kh_edges(tp_edge, &(uint32_t){ SPYRE_KSTRAT_VIA_MEMORY }); }
static void test_transpose_ring(void) { kh_edges(tp_edge, &(uint32_t){ SPYRE_KSTRAT_RING }); }
static void test_transpose_auto(void) { kh_edges(tp_edge, &(uint32_t){ SPYRE_KSTRAT_AUTO }); }

/* blocks larger than the scratchpad: chunked pieces */
static void test_transpose_chunked(void)
{
	for (uint32_t st = SPYRE_KSTRAT_VIA_MEMORY; st <= SPYRE_KSTRAT_RING; st++)
		for (unsigned di = 0; di < 4; di++) {
			tp_run(st, kh_dtypes[di], 5, 300, 517, di & 1 ? SPYRE_KF_RELOC : 0, 16 << 10, " sp16k");
			tp_run(st, kh_dtypes[di], 32, 1000, 1031, di & 1 ? 0 : SPYRE_KF_RELOC, 16 << 10, " sp16k");
		}
	/* fp32: two 32 x 32 blocks are 8 KiB */
	tp_run(SPYRE_KSTRAT_VIA_MEMORY, SPYRE_DT_FP32, 1, 129, 700, 0, 8 << 10, " sp8k");
	tp_run(SPYRE_KSTRAT_RING, SPYRE_DT_FP32, 3, 129, 700, SPYRE_KF_RELOC, 8 << 10, " sp8k");
	/* wider than a tile op's 65535 columns */
	tp_run(SPYRE_KSTRAT_RING, SPYRE_DT_FP16, 2, 3, 70000, 0, 0, " n>65535");
	tp_run(SPYRE_KSTRAT_VIA_MEMORY, SPYRE_DT_FP16, 2, 70000, 3, SPYRE_KF_RELOC, 0, " m>65535");
}

static void test_transpose_errors(void)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_TRANSPOSE, .dtype = SPYRE_DT_FP16, .m = 4,
				 .n = 0 };

	kh_expect_einval(&d, "n (columns)");
	d.n = 4;
	d.strategy = SPYRE_KSTRAT_SCRATCHPAD;
	kh_expect_einval(&d, "strategy");
	/* two 64 x 64 fp16 blocks are 16 KiB */
	d.strategy = SPYRE_KSTRAT_RING;
	d.m = d.n = 1000;
	d.sp_bytes = 8 << 10;
	kh_expect_einval(&d, "stick x stick block");
}

/* ---- modeled time ---- */

static void test_timing(void)
{
	uint64_t m = 1024, n = 1024;
	float *x = kh_alloc(4 * m * n), *y = kh_alloc(4 * m * n);
	struct spyre_kernel_info info = { .size = sizeof(info) };

	kh_fill(x, m * n, -1, 1);
	for (uint32_t st = SPYRE_KSTRAT_VIA_MEMORY; st <= SPYRE_KSTRAT_RING; st++) {
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_TRANSPOSE, .dtype = SPYRE_DT_FP16,
					 .cores = 32, .m = m, .n = n, .strategy = st };
		struct kh_slot s[] = { KH_IN(x, m, n), KH_OUT(y, n, m), KH_WORK() };

		if (kh_run(&d, s, st == SPYRE_KSTRAT_VIA_MEMORY ? 3 : 2, NULL, 0, &info) == 0)
			kh_diag_timing(&info);
	}
	{
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ARGMAX, .dtype = SPYRE_DT_FP16,
					 .cores = 32, .m = 1, .n = 49159 };
		int32_t yi[1];
		struct kh_slot s[] = { KH_IN(x, 1, 49159), KH_OUT_I32(yi, 1) };

		if (kh_run(&d, s, 2, NULL, 0, &info) == 0)
			kh_diag_timing(&info);
	}
	{
		int32_t tok[32];
		uint64_t sc[32];
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_EMBEDDING, .dtype = SPYRE_DT_FP16,
					 .cores = 32, .m = 32, .n = 256, .k = 4096 };
		float *tab = kh_alloc(4ull * 256 * 4096), *ye = kh_alloc(4ull * 32 * 4096);
		struct kh_slot s[] = { KH_IN(tab, 256, 4096), KH_OUT(ye, 32, 4096) };

		for (int i = 0; i < 32; i++)
			tok[i] = (int32_t)rnd(256);
		if (spyre_kernel_embedding_scalars(&d, tok, sc) == 0 && kh_run(&d, s, 2, sc, 32, &info) == 0)
			kh_diag_timing(&info);
		free(tab);
		free(ye);
	}
	free(x);
	free(y);
}

static const struct tap_case cases[] = {
	{ "embedding", test_embedding },
	{ "embedding_errors", test_embedding_errors },
	{ "argmax", test_argmax },
	{ "argmax_vocab", test_argmax_vocab },
	{ "argmax_errors", test_argmax_errors },
	{ "iadd", test_iadd },
	{ "iadd_errors", test_iadd_errors },
	{ "transpose_via_memory", test_transpose_via_memory },
	{ "transpose_ring", test_transpose_ring },
	{ "transpose_auto", test_transpose_auto },
	{ "transpose_chunked", test_transpose_chunked },
	{ "transpose_errors", test_transpose_errors },
	{ "timing", test_timing },
};

int main(int argc, char **argv)
{
	return KH_MAIN(cases, argc, argv);
}
