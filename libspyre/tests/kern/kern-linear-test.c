// SPDX-License-Identifier: MIT
/*
 * Description: the kernel library's LINEAR (Y = X W + bias) and BMM kernels
 * on the engine against a CPU reference: the edge sizes 1, 7, 8, 9, 63, 64,
 * 65, 127, 128, 129 in each of m, n and k (every value at least once per
 * dtype and strategy), every dtype, 1, 7 and 32 cores, bias on and off,
 * SPLIT_M, SPLIT_N and AUTO, both addressing forms; grouped layouts
 * (in_group / out_group 32 and 64, odd group counts, a partial last group);
 * shapes tiled through a 64 KiB and a 16 KiB scratchpad, k and n beyond a
 * tile op's 65535; shapes split over all of 7 and 32 cores; BMM with batch 1,
 * 3 and 8; what AUTO picks for decode and prefill shapes; descriptor errors.
 * SPYRE_KF_WEIGHT_NK (W given as [n x k]) over the same edge sizes, dtypes,
 * strategies and 1, 7, 32 cores, grouped and tiled shapes, with W written
 * by the harness or by spyre_kernel_pack_weight() from a host W [n, k] or
 * [k, n] in fp32, fp16, bf16 or dl16 (both flags; the bias too); the
 * helper's sizes and errors.
 *
 * Tolerance, per element: the reference is computed in double from the
 * rounded inputs (kh_round), so the kernel's error is its fp32 accumulation,
 * at most (k + 2) * 2^-24 * sum_p |x_ip w_pj| (+ |bias_j|) (k products and
 * sums and the bias add, each one fp32 rounding of a partial sum bounded by
 * that sum), plus the one rounding of the output to its dtype, kh_tol(dt) *
 * |y| (fp16 2^-10, bf16 2^-7, dl16 2^-9, fp32 2^-20), plus 1e-6 for dl16's
 * flush of magnitudes below 2^-31.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "spyre_dtype.h"

static const char *stn(uint32_t s)
{
	return s == SPYRE_KSTRAT_SPLIT_M ? "split-m" : s == SPYRE_KSTRAT_SPLIT_N ? "split-n" : "auto";
}

/*
 * Y = X W (+ bias) in double from the rounded inputs, and each element's
 * bound of the header comment: (k + 2) 2^-24 sum |x w| (+ |bias|).
 */
static void reference(const float *x, const float *w, const float *bias, uint64_t m, uint64_t n, uint64_t k,
		      uint32_t dt, double *y, double *bound)
{
	float *xr = kh_alloc(4 * m * k), *wr = kh_alloc(4 * k * n);

	for (uint64_t i = 0; i < m * k; i++)
		xr[i] = kh_round(x[i], dt);
	for (uint64_t i = 0; i < k * n; i++)
		wr[i] = kh_round(w[i], dt);
	for (uint64_t i = 0; i < m; i++)
		for (uint64_t j = 0; j < n; j++) {
			double acc = bias ? bias[j] : 0, abs = bias ? fabs(bias[j]) : 0;

			for (uint64_t p = 0; p < k; p++) {
				double t = (double)xr[i * k + p] * wr[p * n + j];

				acc += t;
				abs += fabs(t);
			}
			y[i * n + j] = acc;
			bound[i * n + j] = (double)(k + 2) * ldexp(abs, -24);
		}
	free(xr);
	free(wr);
}

/* The header comment's tolerance: the bound, one rounding of the output, dl16's flush. */
static bool check(const char *what, const float *got, const double *want, const double *bound, uint64_t cnt,
		  uint32_t dt)
{
	return kh_close_bound(what, got, want, bound, cnt, kh_tol(dt), 1e-6);
}

struct lcase {
	uint32_t dt, cores, strategy, flags;
	uint64_t m, n, k;
	uint32_t in_group, out_group, sp_bytes;
};

/* W (and the bias) by spyre_kernel_pack_weight() from a host W in @layout and dtype @dt1 - 1 (0: by the harness) */
struct wsrc {
	uint32_t dt1, layout;
};

/*
 * Slot @slot of @d packed by spyre_kernel_pack_weight() from @w (the
 * weight as [out x in] fp32 values exact in @src_dt), given to the helper
 * as [out x in] or [in x out] (@layout) in @src_dt: a KH_RAW slot. *@buf
 * is the host copy to free; false after a failed check.
 */
static bool packed_slot(const struct spyre_kdesc *d, uint32_t slot, const float *w, uint64_t out, uint64_t in,
			uint32_t layout, uint32_t src_dt, struct kh_slot *sl, void **buf)
{
	uint8_t *src = kh_alloc(4 * out * in);
	size_t need = 0, got;
	bool ok;

	for (uint64_t o = 0; o < out; o++)
		for (uint64_t i = 0; i < in; i++)
			spyre_store_f32(src, src_dt, layout == SPYRE_KW_OUT_IN ? o * in + i : i * out + o, w[o * in + i]);
	ok = TAP_CHECK(spyre_kernel_pack_weight(d, slot, layout, src, src_dt, NULL, &need) == 0 && need,
		       "pack_weight size of slot %u: %s", slot, spyre_last_error());
	*buf = kh_alloc(need + 1);
	got = need;
	if (ok)
		ok = TAP_CHECK(spyre_kernel_pack_weight(d, slot, layout, src, src_dt, *buf, &got) == 0,
			       "pack_weight slot %u: %s", slot, spyre_last_error());
	free(src);
	*sl = (struct kh_slot)KH_RAW(*buf, need);
	return ok;
}

/* Run one LINEAR case; returns false if it failed. @cores_used (optional): the cores it ran on. */
static bool run_linear_src(const struct lcase *c, struct wsrc ws, uint32_t *cores_used)
{
	uint64_t m = c->m, n = c->n, k = c->k;
	bool bias = c->flags & SPYRE_KF_BIAS, nk = c->flags & SPYRE_KF_WEIGHT_NK;
	float *x = kh_alloc(4 * m * k), *w = kh_alloc(4 * k * n), *b = kh_alloc(4 * n), *y = kh_alloc(4 * m * n);
	float *wnk = kh_alloc(4 * k * n);	/* W as [n x k]: the weight as [out x in] */
	double *ref = kh_alloc(8 * m * n), *s = kh_alloc(8 * m * n);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_LINEAR, .dtype = c->dt, .cores = c->cores,
				 .strategy = c->strategy, .flags = c->flags, .m = m, .n = n, .k = k,
				 .in_group = c->in_group, .out_group = c->out_group, .sp_bytes = c->sp_bytes };
	struct kh_slot sl[4] = {
		KH_IN_G(x, m, k, c->in_group),
		nk ? (struct kh_slot)KH_IN_G(wnk, n, k, c->in_group) : (struct kh_slot)KH_IN_G(w, k, n, c->out_group),
	};
	uint32_t ns = 2, src_dt = ws.dt1 ? ws.dt1 - 1 : SPYRE_DT_FP32;
	struct spyre_kernel_info info;
	void *wbuf = NULL, *bbuf = NULL;
	char what[192];
	bool ok = false, packed = true;

	kh_fill(x, m * k, -1, 1);
	kh_fill(w, k * n, -1, 1);
	kh_fill(b, n, -2, 2);
	for (uint64_t p = 0; p < k; p++)
		for (uint64_t j = 0; j < n; j++) {
			w[p * n + j] = kh_round(w[p * n + j], src_dt);	/* exact in the source dtype */
			wnk[j * k + p] = w[p * n + j];
		}
	if (ws.dt1)
		packed &= packed_slot(&d, 1, wnk, n, k, ws.layout, src_dt, &sl[1], &wbuf);
	if (bias) {
		sl[ns++] = (struct kh_slot){ .kind = KH_KIND_IN, .data = b, .rows = 1, .cols = n,
					     .group = c->out_group, .dtype = SPYRE_DT_FP32 };
		if (ws.dt1)
			packed &= packed_slot(&d, 2, b, n, 1, ws.layout, SPYRE_DT_FP32, &sl[2], &bbuf);
	}
	sl[ns++] = (struct kh_slot)KH_OUT_G(y, m, n, c->out_group);
	reference(x, w, bias ? b : NULL, m, n, k, c->dt, ref, s);
	snprintf(what, sizeof(what), "linear %s %llux%llux%llu c%u %s%s%s%s ig%u og%u sp%u%s%s%s",
		 spyre_dtype_name(c->dt), (unsigned long long)m, (unsigned long long)n, (unsigned long long)k,
		 c->cores, stn(c->strategy), bias ? " bias" : "", (c->flags & SPYRE_KF_RELOC) ? " reloc" : "",
		 nk ? " w-nk" : "", c->in_group, c->out_group, c->sp_bytes, ws.dt1 ? " packed from " : "",
		 ws.dt1 ? spyre_dtype_name(src_dt) : "",
		 ws.dt1 ? (ws.layout == SPYRE_KW_OUT_IN ? " [out, in]" : " [in, out]") : "");
	if (packed && kh_run(&d, sl, ns, NULL, 0, &info) == 0) {
		ok = check(what, y, ref, s, m * n, c->dt);
		if (cores_used)
			*cores_used = info.cores;
		if (c->strategy)
			ok &= TAP_CHECK(info.strategy == c->strategy, "%s: built %s", what, stn(info.strategy));
	}
	free(x);
	free(w);
	free(wnk);
	free(b);
	free(y);
	free(ref);
	free(s);
	free(wbuf);
	free(bbuf);
	return ok;
}

static bool run_linear_on(const struct lcase *c, uint32_t *cores_used)
{
	return run_linear_src(c, (struct wsrc){ 0, 0 }, cores_used);
}

static bool run_linear(const struct lcase *c)
{
	return run_linear_on(c, NULL);
}

/* Run @c (kh_last_device_ns: the engine's time) and give its kernel's info; false if it failed. */
static bool run_modeled(const struct lcase *c, struct spyre_kernel_info *info)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_LINEAR, .dtype = c->dt, .cores = c->cores,
				 .strategy = c->strategy, .flags = c->flags, .m = c->m, .n = c->n, .k = c->k };
	void *img;
	size_t sz;

	*info = (struct spyre_kernel_info){ .size = sizeof(*info) };
	if (!run_linear(c) || spyre_kernel_build(&d, &img, &sz, info))
		return false;
	free(img);
	return true;
}

static const uint32_t strategies[3] = { SPYRE_KSTRAT_AUTO, SPYRE_KSTRAT_SPLIT_M, SPYRE_KSTRAT_SPLIT_N };

/*
 * Every edge value in each of m, n, k for every dtype and strategy: case i
 * takes m = edge[i], n = edge[(3i + s + 1) % 10], k = edge[(7i + 2s + 5) % 10]
 * (both permutations of 0..9), cores, bias and addressing cycling.
 */
static void test_edges(void)
{
	for (uint32_t di = 0; di < 4; di++)
		for (uint32_t si = 0; si < 3; si++)
			for (uint32_t i = 0; i < 10; i++) {
				struct lcase c = {
					.dt = kh_dtypes[di], .cores = kh_cores[(i + si + di) % 3],
					.strategy = strategies[si],
					.flags = ((i + di) & 1 ? SPYRE_KF_BIAS : 0) | ((i / 2 + si) & 1 ? SPYRE_KF_RELOC : 0),
					.m = kh_edge[i], .n = kh_edge[(3 * i + si + 1) % 10],
					.k = kh_edge[(7 * i + 2 * si + 5) % 10],
				};

				run_linear(&c);
			}
}

/* Grouped layouts: heads of 32 and 64, odd head counts, both sides, a partial group. */
static void test_grouped(void)
{
	static const struct {
		uint64_t m, n, k;
		uint32_t ig, og;
	} g[] = {
		{ 9, 3 * 32, 65, 0, 32 },	/* out_group 32: 64 of 128 bytes per fp16 head */
		{ 7, 5 * 64, 33, 0, 64 },
		{ 17, 40, 3 * 32, 32, 0 },	/* in_group 32 */
		{ 3, 129, 5 * 64, 64, 0 },
		{ 65, 7 * 32, 3 * 64, 64, 32 },	/* both */
		{ 8, 3 * 64, 5 * 32, 32, 64 },
		{ 5, 2 * 32 + 16, 2 * 32 + 16, 32, 32 },	/* a partial last group */
		{ 129, 9 * 32, 9 * 32, 32, 32 },
	};

	for (uint32_t di = 0; di < 4; di++)
		for (uint32_t i = 0; i < sizeof(g) / sizeof(g[0]); i++)
			for (uint32_t si = 0; si < 3; si++) {
				struct lcase c = {
					.dt = kh_dtypes[di], .cores = kh_cores[(i + si) % 3], .strategy = strategies[si],
					.flags = ((i + si) & 1 ? SPYRE_KF_BIAS : 0) | ((i + di) & 1 ? SPYRE_KF_RELOC : 0),
					.m = g[i].m, .n = g[i].n, .k = g[i].k, .in_group = g[i].ig, .out_group = g[i].og,
				};

				run_linear(&c);
			}
}

/* Shapes that must be tiled (k, n and m) through a small scratchpad. */
static void test_tiled(void)
{
	static const struct lcase t[] = {
		{ SPYRE_DT_FP16, 1, SPYRE_KSTRAT_SPLIT_M, SPYRE_KF_BIAS, 129, 300, 700, 0, 0, 64 << 10 },
		{ SPYRE_DT_FP16, 7, SPYRE_KSTRAT_SPLIT_N, 0, 129, 300, 700, 0, 0, 64 << 10 },
		{ SPYRE_DT_BF16, 2, SPYRE_KSTRAT_AUTO, SPYRE_KF_BIAS | SPYRE_KF_RELOC, 200, 129, 1000, 0, 0, 64 << 10 },
		{ SPYRE_DT_FP32, 3, SPYRE_KSTRAT_SPLIT_N, SPYRE_KF_BIAS, 65, 257, 513, 0, 0, 64 << 10 },
		{ SPYRE_DT_DL16, 1, SPYRE_KSTRAT_SPLIT_M, SPYRE_KF_BIAS, 63, 200, 600, 0, 0, 16 << 10 },
		{ SPYRE_DT_FP16, 5, SPYRE_KSTRAT_SPLIT_N, SPYRE_KF_BIAS | SPYRE_KF_RELOC, 40, 11 * 32, 9 * 32, 32, 32,
		  16 << 10 },
		{ SPYRE_DT_FP32, 1, SPYRE_KSTRAT_SPLIT_M, 0, 1, 2000, 3000, 0, 0, 64 << 10 },
		/* beyond a tile op's 65535 columns / k */
		{ SPYRE_DT_FP16, 2, SPYRE_KSTRAT_AUTO, SPYRE_KF_BIAS, 3, 7, 100000, 0, 0, 0 },
		{ SPYRE_DT_BF16, 1, SPYRE_KSTRAT_SPLIT_M, SPYRE_KF_BIAS, 2, 70000, 5, 0, 0, 0 },
	};

	for (uint32_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		run_linear(&t[i]);
}

/*
 * The split over many cores: each shape on at least @least cores (all asked
 * for where that is fastest; the generator uses fewer when that is as fast:
 * small shapes, and LPDDR-bound ones, where fewer cores read W's column
 * slices in longer rows, with fewer bursts: 8 of 32 for the first two).
 */
static void test_many_cores(void)
{
	static const struct lcase t[] = {
		{ SPYRE_DT_FP16, 32, SPYRE_KSTRAT_SPLIT_N, SPYRE_KF_BIAS, 1, 2048, 1024, 0, 0, 0 },
		{ SPYRE_DT_FP32, 32, SPYRE_KSTRAT_SPLIT_N, SPYRE_KF_BIAS | SPYRE_KF_RELOC, 4, 1024, 2048, 0, 0, 0 },
		{ SPYRE_DT_FP16, 32, SPYRE_KSTRAT_SPLIT_M, SPYRE_KF_BIAS, 8192, 64, 64, 0, 0, 0 },
		{ SPYRE_DT_BF16, 7, SPYRE_KSTRAT_SPLIT_N, SPYRE_KF_RELOC, 1, 448, 1024, 0, 0, 0 },
		{ SPYRE_DT_DL16, 7, SPYRE_KSTRAT_SPLIT_M, SPYRE_KF_BIAS, 2048, 64, 64, 0, 0, 0 },
	};

	static const uint32_t least[] = { 8, 8, 32, 7, 7 };

	for (uint32_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint32_t used = 0;

		if (run_linear_on(&t[i], &used))
			TAP_CHECK(used >= least[i] && used <= t[i].cores, "linear %llux%llux%llu %s ran on %u cores, want %u..%u",
				  (unsigned long long)t[i].m, (unsigned long long)t[i].n, (unsigned long long)t[i].k,
				  stn(t[i].strategy), used, least[i], t[i].cores);
	}
}

/*
 * SPYRE_KF_WEIGHT_NK: every edge value in each of m, n, k per dtype and
 * strategy as test_edges, cores 1, 7, 32 cycling; every other case packs W
 * (and the bias) with spyre_kernel_pack_weight() from each source dtype and
 * both orientations in turn.
 */
static void test_weight_nk_edges(void)
{
	for (uint32_t di = 0; di < 4; di++)
		for (uint32_t si = 0; si < 3; si++)
			for (uint32_t i = 0; i < 10; i++) {
				struct lcase c = {
					.dt = kh_dtypes[di], .cores = kh_cores[(i + 2 * si + di) % 3],
					.strategy = strategies[si],
					.flags = SPYRE_KF_WEIGHT_NK | ((i + di + si) & 1 ? SPYRE_KF_BIAS : 0) |
						 ((i / 2 + di) & 1 ? SPYRE_KF_RELOC : 0),
					.m = kh_edge[(i + si) % 10], .n = kh_edge[(3 * i + si + 2) % 10],
					.k = kh_edge[(7 * i + 2 * si + 4) % 10],
				};
				struct wsrc ws = { i & 1 ? 1 + kh_dtypes[(i / 2 + si) % 4] : 0,
						   (i / 2) & 1 ? SPYRE_KW_IN_OUT : SPYRE_KW_OUT_IN };

				run_linear_src(&c, ws, NULL);
			}
}

/* SPYRE_KF_WEIGHT_NK with grouped layouts (W's k grouped like X's), tiled through small scratchpads, many cores. */
static void test_weight_nk_shapes(void)
{
	static const struct {
		struct lcase c;
		struct wsrc ws;
	} t[] = {
		/* { dt, cores, strategy, flags, m, n, k, in_group, out_group, sp_bytes }, { src dtype + 1, layout } */
		{ { SPYRE_DT_FP16, 7, SPYRE_KSTRAT_SPLIT_N, SPYRE_KF_BIAS, 9, 3 * 32, 65, 0, 32, 0 }, { 0, 0 } },
		{ { SPYRE_DT_FP32, 1, SPYRE_KSTRAT_SPLIT_M, 0, 17, 40, 3 * 32, 32, 0, 0 },
		  { 1 + SPYRE_DT_FP32, SPYRE_KW_OUT_IN } },
		{ { SPYRE_DT_BF16, 32, SPYRE_KSTRAT_AUTO, SPYRE_KF_RELOC, 65, 7 * 32, 3 * 64, 64, 32, 0 },
		  { 1 + SPYRE_DT_BF16, SPYRE_KW_IN_OUT } },
		{ { SPYRE_DT_DL16, 7, SPYRE_KSTRAT_SPLIT_N, SPYRE_KF_BIAS, 5, 2 * 32 + 16, 2 * 32 + 16, 32, 32, 0 },
		  { 1 + SPYRE_DT_FP16, SPYRE_KW_OUT_IN } },
		{ { SPYRE_DT_FP32, 32, SPYRE_KSTRAT_SPLIT_M, SPYRE_KF_BIAS, 129, 9 * 24, 9 * 24, 24, 24, 0 },
		  { 0, 0 } },
		/* tiled: k, n and m through 64 KiB and 32 KiB (16 KiB cannot hold W's staging tile beside its transpose) */
		{ { SPYRE_DT_FP16, 1, SPYRE_KSTRAT_SPLIT_M, SPYRE_KF_BIAS, 129, 300, 700, 0, 0, 64 << 10 }, { 0, 0 } },
		{ { SPYRE_DT_FP16, 7, SPYRE_KSTRAT_SPLIT_N, 0, 129, 300, 700, 0, 0, 64 << 10 },
		  { 1 + SPYRE_DT_FP32, SPYRE_KW_OUT_IN } },
		{ { SPYRE_DT_BF16, 2, SPYRE_KSTRAT_AUTO, SPYRE_KF_BIAS | SPYRE_KF_RELOC, 200, 129, 1000, 0, 0, 64 << 10 },
		  { 0, 0 } },
		{ { SPYRE_DT_FP32, 3, SPYRE_KSTRAT_SPLIT_N, SPYRE_KF_BIAS, 65, 257, 513, 0, 0, 64 << 10 }, { 0, 0 } },
		{ { SPYRE_DT_DL16, 1, SPYRE_KSTRAT_SPLIT_M, SPYRE_KF_BIAS, 63, 200, 600, 0, 0, 32 << 10 }, { 0, 0 } },
		{ { SPYRE_DT_FP16, 5, SPYRE_KSTRAT_SPLIT_N, SPYRE_KF_BIAS | SPYRE_KF_RELOC, 40, 11 * 32, 9 * 32, 32, 32,
		    32 << 10 }, { 0, 0 } },
		/* decode and prefill shapes over all cores */
		{ { SPYRE_DT_FP16, 32, SPYRE_KSTRAT_AUTO, SPYRE_KF_BIAS, 1, 2048, 1024, 0, 0, 0 },
		  { 1 + SPYRE_DT_BF16, SPYRE_KW_OUT_IN } },
		{ { SPYRE_DT_BF16, 32, SPYRE_KSTRAT_AUTO, 0, 64, 512, 768, 0, 0, 0 }, { 0, 0 } },
		/* the old layout packed by the helper from either orientation */
		{ { SPYRE_DT_FP16, 7, SPYRE_KSTRAT_AUTO, SPYRE_KF_BIAS, 9, 3 * 32, 65, 0, 32, 0 },
		  { 1 + SPYRE_DT_FP32, SPYRE_KW_OUT_IN } },
		{ { SPYRE_DT_BF16, 32, SPYRE_KSTRAT_SPLIT_N, 0, 7, 129, 63, 0, 0, 0 },
		  { 1 + SPYRE_DT_DL16, SPYRE_KW_IN_OUT } },
		{ { SPYRE_DT_FP32, 1, SPYRE_KSTRAT_SPLIT_M, SPYRE_KF_BIAS, 8, 40, 3 * 32, 32, 0, 0 },
		  { 1 + SPYRE_DT_FP16, SPYRE_KW_IN_OUT } },
	};

	for (uint32_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct lcase c = t[i].c;

		if (i < 13)
			c.flags |= SPYRE_KF_WEIGHT_NK;
		run_linear_src(&c, t[i].ws, NULL);
	}
	/* the estimate: W [n x k] costs its transposes, a few per cent on a decode shape */
	for (uint32_t si = 1; si < 3; si++) {
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_LINEAR, .dtype = SPYRE_DT_FP16, .cores = 32,
					 .strategy = strategies[si], .m = 1, .n = 4096, .k = 4096 };
		struct spyre_kernel_info a = { .size = sizeof(a) }, b = { .size = sizeof(b) };
		void *img;
		size_t sz;

		if (spyre_kernel_build(&d, &img, &sz, &a) == 0)
			free(img);
		d.flags = SPYRE_KF_WEIGHT_NK;
		if (TAP_CHECK(spyre_kernel_build(&d, &img, &sz, &b) == 0, "build %s: %s", b.name, spyre_last_error()))
			free(img);
		tap_diag("linear fp16 1x4096x4096 %s c32: est %llu ns with W [k x n], %llu ns with W [n x k] (%s)",
			 stn(si == 1 ? SPYRE_KSTRAT_SPLIT_M : SPYRE_KSTRAT_SPLIT_N), (unsigned long long)a.est_ns,
			 (unsigned long long)b.est_ns, b.name);
	}
	/* the engine's modeled time, both layouts, AUTO (docs/kernels.md) */
	static const struct {
		uint64_t m, n, k;
	} sh[] = { { 1, 1024, 1024 }, { 64, 1024, 1024 }, { 256, 256, 1024 } };

	for (uint32_t i = 0; i < sizeof(sh) / sizeof(sh[0]); i++) {
		uint64_t ns[2] = { 0, 0 };
		uint32_t strat[2] = { 0, 0 };

		for (uint32_t f = 0; f < 2; f++) {
			struct lcase c = { .dt = SPYRE_DT_FP16, .cores = 32, .flags = f ? SPYRE_KF_WEIGHT_NK : 0,
					   .m = sh[i].m, .n = sh[i].n, .k = sh[i].k };
			struct spyre_kernel_info info;

			if (!run_modeled(&c, &info))
				continue;
			ns[f] = kh_last_device_ns;
			strat[f] = info.strategy;
		}
		tap_diag("linear fp16 %llux%llux%llu auto c32: %llu ns (%s) with W [k x n], %llu ns (%s) with W [n x k]",
			 (unsigned long long)sh[i].m, (unsigned long long)sh[i].n, (unsigned long long)sh[i].k,
			 (unsigned long long)ns[0], stn(strat[0]), (unsigned long long)ns[1], stn(strat[1]));
	}
}

/* spyre_kernel_pack_weight(): sizes as the kernel's slots, the MLP's weights, errors. */
static void test_pack_weight(void)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_LINEAR, .dtype = SPYRE_DT_FP16, .cores = 7,
				 .flags = SPYRE_KF_BIAS, .m = 3, .n = 100, .k = 70, .out_group = 32 };
	float src[8 * 8] = { 0 };
	uint8_t dst[64];
	size_t need;

	for (uint32_t f = 0; f < 2; f++) {
		struct spyre_kernel_info info = { .size = sizeof(info) };
		void *img;
		size_t sz;

		d.flags = SPYRE_KF_BIAS | (f ? SPYRE_KF_WEIGHT_NK : 0);
		if (!TAP_CHECK(spyre_kernel_build(&d, &img, &sz, &info) == 0, "build: %s", spyre_last_error()))
			continue;
		free(img);
		for (uint32_t slot = 1; slot <= 2; slot++)
			TAP_CHECK(spyre_kernel_pack_weight(&d, slot, SPYRE_KW_OUT_IN, src, SPYRE_DT_FP32, NULL, &need) == 0 &&
				  need == info.slot_bytes[slot], "%s: slot %u takes %zu bytes, the kernel %llu", info.name,
				  slot, need, (unsigned long long)info.slot_bytes[slot]);
	}
	{
		struct spyre_kdesc m = { .size = sizeof(m), .op = SPYRE_KOP_MLP, .dtype = SPYRE_DT_BF16, .cores = 7,
					 .m = 5, .n = 200, .k = 72 };
		struct spyre_kernel_info info = { .size = sizeof(info) };
		void *img;
		size_t sz;

		for (uint32_t gelu = 0; gelu < 2; gelu++) {
			m.flags = gelu ? SPYRE_KF_GELU : 0;
			if (!TAP_CHECK(spyre_kernel_build(&m, &img, &sz, &info) == 0, "build: %s", spyre_last_error()))
				continue;
			free(img);
			for (uint32_t slot = 1; slot <= (gelu ? 2u : 3u); slot++)
				TAP_CHECK(spyre_kernel_pack_weight(&m, slot, SPYRE_KW_IN_OUT, src, SPYRE_DT_FP16, NULL,
								   &need) == 0 && need == info.slot_bytes[slot],
					  "%s: slot %u takes %zu bytes, the kernel %llu", info.name, slot, need,
					  (unsigned long long)info.slot_bytes[slot]);
			TAP_CHECK(spyre_kernel_pack_weight(&m, gelu ? 3 : 4, 0, src, SPYRE_DT_FP32, NULL, &need) == -EINVAL &&
				  strstr(spyre_last_error(), "is not a weight"), "mlp y is not a weight: %s",
				  spyre_last_error());
		}
	}
	d.flags = 0;
	TAP_CHECK(spyre_kernel_pack_weight(&d, 0, 0, src, SPYRE_DT_FP32, NULL, &need) == -EINVAL &&
		  strstr(spyre_last_error(), "slot 0 of linear is not a weight"), "x is not a weight: %s", spyre_last_error());
	TAP_CHECK(spyre_kernel_pack_weight(&d, 2, 0, src, SPYRE_DT_FP32, NULL, &need) == -EINVAL,
		  "no bias slot without SPYRE_KF_BIAS");
	TAP_CHECK(spyre_kernel_pack_weight(&d, 1, 2, src, SPYRE_DT_FP32, NULL, &need) == -EINVAL &&
		  strstr(spyre_last_error(), "layout 2"), "layout 2: %s", spyre_last_error());
	TAP_CHECK(spyre_kernel_pack_weight(&d, 1, 0, src, SPYRE_DT_INT8, NULL, &need) == -EINVAL &&
		  strstr(spyre_last_error(), "source dtype"), "int8 source: %s", spyre_last_error());
	need = sizeof(dst);
	TAP_CHECK(spyre_kernel_pack_weight(&d, 1, 0, src, SPYRE_DT_FP32, dst, &need) == -EINVAL &&
		  strstr(spyre_last_error(), "64 given"), "small dst: %s", spyre_last_error());
	d.flags = SPYRE_KF_WEIGHT_NK;
	d.sp_bytes = 16 << 10;	/* a 64 x 64 staging tile and its transpose take all of it */
	kh_expect_einval(&d, "no tiling fits a scratchpad of 16384 bytes");
	d.sp_bytes = 0;
	d.op = SPYRE_KOP_BMM;
	kh_expect_einval(&d, "applies to linear only");
}

/* BMM @d on random inputs against the reference; true when it ran and matched. */
static bool run_bmm(const struct spyre_kdesc *d, const char *what, struct spyre_kernel_info *info)
{
	uint64_t m = d->m, n = d->n, k = d->k, batch = d->batch;
	float *a = kh_alloc(4 * batch * m * k), *b = kh_alloc(4 * batch * k * n), *y = kh_alloc(4 * batch * m * n);
	double *ref = kh_alloc(8 * batch * m * n), *bound = kh_alloc(8 * batch * m * n);
	struct kh_slot sl[] = { KH_IN(a, batch * m, k), KH_IN(b, batch * k, n), KH_OUT(y, batch * m, n) };
	bool ok = false;

	kh_fill(a, batch * m * k, -1, 1);
	kh_fill(b, batch * k * n, -1, 1);
	for (uint64_t q = 0; q < batch; q++)
		reference(a + q * m * k, b + q * k * n, NULL, m, n, k, d->dtype, ref + q * m * n, bound + q * m * n);
	if (kh_run(d, sl, 3, NULL, 0, info) == 0)
		ok = check(what, y, ref, bound, batch * m * n, d->dtype);
	free(a);
	free(b);
	free(y);
	free(ref);
	free(bound);
	return ok;
}

/* BMM: Y[b] = A[b] B[b] with batch 1, 3, 8. */
static void test_bmm(void)
{
	static const uint32_t batches[3] = { 1, 3, 8 };

	for (uint32_t di = 0; di < 4; di++)
		for (uint32_t bi = 0; bi < 3; bi++)
			for (uint32_t si = 0; si < 3; si++) {
				uint32_t dt = kh_dtypes[di], batch = batches[bi], cores = kh_cores[(bi + si + di) % 3];
				uint64_t m = kh_edge[(3 * bi + si + di) % 10], n = kh_edge[(bi + 2 * si + 3 * di + 4) % 10];
				uint64_t k = kh_edge[(5 * bi + si + di + 1) % 10];
				struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_BMM, .dtype = dt, .cores = cores,
							 .strategy = strategies[si], .m = m, .n = n, .k = k, .batch = batch,
							 .flags = (bi + si) & 1 ? SPYRE_KF_RELOC : 0 };
				char what[128];

				snprintf(what, sizeof(what), "bmm %s %ux%llux%llux%llu c%u %s", spyre_dtype_name(dt), batch,
					 (unsigned long long)m, (unsigned long long)n, (unsigned long long)k, cores,
					 stn(strategies[si]));
				run_bmm(&d, what, NULL);
			}
	/* more cores than (batch x row blocks), a tiled batch */
	{
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_BMM, .dtype = SPYRE_DT_FP16, .cores = 32,
					 .strategy = SPYRE_KSTRAT_SPLIT_M, .m = 20, .n = 150, .k = 300, .batch = 3,
					 .sp_bytes = 32 << 10 };

		run_bmm(&d, "bmm fp16 3x20x150x300 c32 split-m sp32K", NULL);
	}
}

static uint64_t est(uint32_t op, uint32_t dt, uint64_t m, uint64_t n, uint64_t k, uint32_t strategy,
		    uint32_t *chosen)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = op, .dtype = dt, .cores = 32, .strategy = strategy,
				 .m = m, .n = n, .k = k };
	struct spyre_kernel_info info = { .size = sizeof(info) };
	void *img;
	size_t sz;

	if (!TAP_CHECK(spyre_kernel_build(&d, &img, &sz, &info) == 0, "build %llux%llux%llu %s: %s",
		       (unsigned long long)m, (unsigned long long)n, (unsigned long long)k, stn(strategy),
		       spyre_last_error()))
		return 0;
	free(img);
	if (chosen)
		*chosen = info.strategy;
	return info.est_ns;
}

/*
 * AUTO: decode (m = 1) takes SPLIT_N, a prefill with few columns SPLIT_M; the
 * cost model's estimates of both for the Granite-8B layer shapes.
 */
static void test_auto_choice(void)
{
	static const struct {
		uint64_t m, n, k;
		uint32_t want;
	} s[] = {
		{ 1, 4096, 4096, SPYRE_KSTRAT_SPLIT_N },
		{ 1, 1024, 4096, SPYRE_KSTRAT_SPLIT_N },
		{ 1, 12800, 4096, SPYRE_KSTRAT_SPLIT_N },
		{ 1024, 4096, 4096, 0 },
		{ 1024, 1024, 4096, 0 },
		{ 1024, 12800, 4096, 0 },
		{ 4096, 128, 4096, SPYRE_KSTRAT_SPLIT_M },
		{ 2048, 64, 2048, SPYRE_KSTRAT_SPLIT_M },
	};

	for (uint32_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		uint32_t chosen = 0;
		uint64_t em = est(SPYRE_KOP_LINEAR, SPYRE_DT_FP16, s[i].m, s[i].n, s[i].k, SPYRE_KSTRAT_SPLIT_M, NULL);
		uint64_t en = est(SPYRE_KOP_LINEAR, SPYRE_DT_FP16, s[i].m, s[i].n, s[i].k, SPYRE_KSTRAT_SPLIT_N, NULL);
		uint64_t ea = est(SPYRE_KOP_LINEAR, SPYRE_DT_FP16, s[i].m, s[i].n, s[i].k, SPYRE_KSTRAT_AUTO, &chosen);

		tap_diag("linear fp16 m=%llu n=%llu k=%llu c32: est split-m %llu ns, split-n %llu ns; auto: %s",
			 (unsigned long long)s[i].m, (unsigned long long)s[i].n, (unsigned long long)s[i].k,
			 (unsigned long long)em, (unsigned long long)en, stn(chosen));
		TAP_CHECK(ea == (em < en ? em : en), "auto takes the lower estimate");
		if (s[i].want)
			TAP_CHECK(chosen == s[i].want, "m=%llu n=%llu: auto chose %s, want %s", (unsigned long long)s[i].m,
				  (unsigned long long)s[i].n, stn(chosen), stn(s[i].want));
	}
}

/* The engine's modeled time and utilization next to the estimate, for a few shapes that run in moments. */
static void test_modeled(void)
{
	static const struct {
		uint64_t m, n, k;
	} s[] = { { 1, 1024, 1024 }, { 64, 1024, 1024 }, { 256, 256, 1024 }, { 512, 64, 1024 } };

	for (uint32_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		for (uint32_t si = 1; si < 3; si++) {
			struct lcase c = { .dt = SPYRE_DT_FP16, .cores = 32, .strategy = strategies[si],
					   .m = s[i].m, .n = s[i].n, .k = s[i].k };
			struct spyre_kernel_info info;

			if (!run_modeled(&c, &info))
				continue;
			tap_diag("linear fp16 %llux%llux%llu %s: %llu ns (est %llu) on %u cores, utilization %.1f %%",
				 (unsigned long long)c.m, (unsigned long long)c.n, (unsigned long long)c.k,
				 stn(c.strategy), (unsigned long long)kh_last_device_ns, (unsigned long long)info.est_ns,
				 info.cores, 100 * kh_last_utilization);
		}
	for (uint32_t si = 1; si < 3; si++) {
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_BMM, .dtype = SPYRE_DT_FP16, .cores = 32,
					 .strategy = strategies[si], .m = 128, .n = 128, .k = 64, .batch = 8 };
		struct spyre_kernel_info info;

		if (run_bmm(&d, "bmm fp16 8x128x128x64 c32", &info))
			tap_diag("bmm fp16 8x128x128x64 %s: %llu ns (est %llu) on %u cores, utilization %.1f %%",
				 stn(d.strategy), (unsigned long long)kh_last_device_ns, (unsigned long long)info.est_ns,
				 info.cores, 100 * kh_last_utilization);
	}
}

static void test_errors(void)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_LINEAR, .dtype = SPYRE_DT_FP16, .m = 0, .n = 8,
				 .k = 8 };

	kh_expect_einval(&d, "m, n and k must be non-zero");
	d.m = 8;
	d.k = 0;
	kh_expect_einval(&d, "m, n and k must be non-zero");
	d.k = 100000;
	d.sp_bytes = 2048;	/* 16 sticks: not even one stick-wide tile of W fits */
	kh_expect_einval(&d, "no tiling fits");
	d.sp_bytes = 0;
	d.k = 8;
	d.flags = SPYRE_KF_GELU;
	kh_expect_einval(&d, "do not apply to linear");
	d.flags = 0;
	d.op = SPYRE_KOP_BMM;
	d.in_group = 4;
	kh_expect_einval(&d, "in_group and out_group do not apply to bmm");
	d.in_group = 0;
	d.strategy = SPYRE_KSTRAT_FUSED;
	kh_expect_einval(&d, "strategy");
}

static const struct tap_case cases[] = {
	{ "edges", test_edges },
	{ "grouped", test_grouped },
	{ "tiled", test_tiled },
	{ "many_cores", test_many_cores },
	{ "bmm", test_bmm },
	{ "auto_choice", test_auto_choice },
	{ "modeled", test_modeled },
	{ "errors", test_errors },
	{ "weight_nk_edges", test_weight_nk_edges },
	{ "weight_nk_shapes", test_weight_nk_shapes },
	{ "pack_weight", test_pack_weight },
};

int main(int argc, char **argv)
{
	return KH_MAIN(cases, argc, argv);
}
