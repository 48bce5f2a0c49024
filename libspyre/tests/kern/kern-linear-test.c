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
 *
 * Tolerance, per element: the reference is computed in double from the
 * rounded inputs (kh_round), so the kernel's error is its fp32 accumulation,
 * at most (k + 2) * 2^-24 * sum_p |x_ip w_pj| (+ |bias_j|) (k products and
 * sums and the bias add, each one fp32 rounding of a partial sum bounded by
 * that sum), plus the one rounding of the output to its dtype, kh_tol(dt) *
 * |y| (fp16 2^-10, bf16 2^-7, dl16 2^-9, fp32 2^-20), plus 1e-6 for dl16's
 * flush of magnitudes below 2^-31.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

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

/* Run one LINEAR case; returns false if it failed. @cores_used (optional): the cores it ran on. */
static bool run_linear_on(const struct lcase *c, uint32_t *cores_used)
{
	uint64_t m = c->m, n = c->n, k = c->k;
	bool bias = c->flags & SPYRE_KF_BIAS;
	float *x = kh_alloc(4 * m * k), *w = kh_alloc(4 * k * n), *b = kh_alloc(4 * n), *y = kh_alloc(4 * m * n);
	double *ref = kh_alloc(8 * m * n), *s = kh_alloc(8 * m * n);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_LINEAR, .dtype = c->dt, .cores = c->cores,
				 .strategy = c->strategy, .flags = c->flags, .m = m, .n = n, .k = k,
				 .in_group = c->in_group, .out_group = c->out_group, .sp_bytes = c->sp_bytes };
	struct kh_slot sl[4] = {
		KH_IN_G(x, m, k, c->in_group), KH_IN_G(w, k, n, c->out_group),
	};
	uint32_t ns = 2;
	struct spyre_kernel_info info;
	char what[160];
	bool ok = false;

	if (bias)
		sl[ns++] = (struct kh_slot){ .kind = KH_KIND_IN, .data = b, .rows = 1, .cols = n,
					     .group = c->out_group, .dtype = SPYRE_DT_FP32 };
	sl[ns++] = (struct kh_slot)KH_OUT_G(y, m, n, c->out_group);
	kh_fill(x, m * k, -1, 1);
	kh_fill(w, k * n, -1, 1);
	kh_fill(b, n, -2, 2);
	reference(x, w, bias ? b : NULL, m, n, k, c->dt, ref, s);
	snprintf(what, sizeof(what), "linear %s %llux%llux%llu c%u %s%s%s ig%u og%u sp%u", spyre_dtype_name(c->dt),
		 (unsigned long long)m, (unsigned long long)n, (unsigned long long)k, c->cores, stn(c->strategy),
		 bias ? " bias" : "", (c->flags & SPYRE_KF_RELOC) ? " reloc" : "", c->in_group, c->out_group,
		 c->sp_bytes);
	if (kh_run(&d, sl, ns, NULL, 0, &info) == 0) {
		ok = check(what, y, ref, s, m * n, c->dt);
		if (cores_used)
			*cores_used = info.cores;
		if (c->strategy)
			ok &= TAP_CHECK(info.strategy == c->strategy, "%s: built %s", what, stn(info.strategy));
	}
	free(x);
	free(w);
	free(b);
	free(y);
	free(ref);
	free(s);
	return ok;
}

static bool run_linear(const struct lcase *c)
{
	return run_linear_on(c, NULL);
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
			struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_LINEAR, .dtype = c.dt, .cores = 32,
						 .strategy = c.strategy, .m = c.m, .n = c.n, .k = c.k };
			struct spyre_kernel_info info = { .size = sizeof(info) };
			void *img;
			size_t sz;

			if (!run_linear(&c) || spyre_kernel_build(&d, &img, &sz, &info))
				continue;
			free(img);
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
};

int main(int argc, char **argv)
{
	return KH_MAIN(cases, argc, argv);
}
