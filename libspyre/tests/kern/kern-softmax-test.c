// SPDX-License-Identifier: MIT
/*
 * Description: the kernel library's row-wise SOFTMAX on the engine against a
 * CPU reference in double (from the kh_round()ed inputs): both strategies
 * (SCRATCHPAD, NAIVE) forced and AUTO, the edge shapes (rows x columns, each
 * of 1, 7, 8, 9, 63, 64, 65, 127, 128, 129), every dtype, 1, 7 and 32
 * cores, both addressing forms (alternating); rows too wide for the
 * scratchpad (64 KiB and 4 KiB scratchpads; n = 70000 > a tile op's 65535
 * columns) for both strategies, including rows whose maximum grows from
 * column tile to column tile and rows whose first column tile is all -inf
 * (masks); bad descriptors; the modeled time of both strategies at
 * Granite-like shapes (diagnostics).
 *
 * Tolerance: |got - want| <= rtol |want| + atol with rtol = kh_tol(dt) (the
 * one rounding of the output) + (4 sqrt(n) + 16) 2^-24 (fp32 inside: exp
 * and the reciprocal within a few ulp, the row sum a sequential fp32 sum of
 * n positive terms, whose error grows like sqrt(n) 2^-24 relative, the
 * probabilistic bound of Higham & Mary 2019), atol = 6e-8: fp16 outputs
 * below 2^-14 are subnormal, spaced 2^-24 apart (dl16 flushes below 2^-31).
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"

static const char *stn(uint32_t s)
{
	return s == SPYRE_KSTRAT_NAIVE ? "naive" : s == SPYRE_KSTRAT_SCRATCHPAD ? "scratchpad" : "auto";
}

static void ref_softmax(uint32_t dt, const float *x, float *y, uint64_t m, uint64_t n)
{
	for (uint64_t i = 0; i < m; i++) {
		double mx = -INFINITY, s = 0;

		for (uint64_t j = 0; j < n; j++)
			mx = fmax(mx, kh_round(x[i * n + j], dt));
		for (uint64_t j = 0; j < n; j++)
			s += exp(kh_round(x[i * n + j], dt) - mx);
		for (uint64_t j = 0; j < n; j++)
			y[i * n + j] = (float)(exp(kh_round(x[i * n + j], dt) - mx) / s);
	}
}

/* x is filled by the caller */
static void check(uint32_t strat, uint32_t dt, uint32_t cores, uint64_t m, uint64_t n, uint32_t flags,
		  uint32_t sp_bytes, float *x, const char *tag)
{
	float *y = kh_alloc(4 * m * n), *r = kh_alloc(4 * m * n);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_SOFTMAX, .dtype = dt, .cores = cores,
				 .m = m, .n = n, .flags = flags, .strategy = strat, .sp_bytes = sp_bytes };
	struct kh_slot s2[] = { KH_IN(x, m, n), KH_OUT(y, m, n) };
	struct kh_slot s3[] = { KH_IN(x, m, n), KH_OUT(y, m, n), KH_WORK() };
	struct spyre_kernel_info info = { .size = sizeof(info) };
	int naive = strat == SPYRE_KSTRAT_NAIVE;

	ref_softmax(dt, x, r, m, n);
	if (kh_run(&d, naive ? s3 : s2, naive ? 3 : 2, NULL, 0, &info) == 0) {
		char what[128];

		snprintf(what, sizeof(what), "softmax %s %s %llux%llu c%u%s%s", stn(strat), spyre_dtype_name(dt),
			 (unsigned long long)m, (unsigned long long)n, cores, flags & SPYRE_KF_RELOC ? " reloc" : "",
			 tag);
		TAP_CHECK(info.strategy == (strat ? strat : SPYRE_KSTRAT_SCRATCHPAD), "%s: strategy %u", what,
			  info.strategy);
		kh_close(what, y, r, m * n, kh_tol(dt) + (4 * sqrt((double)n) + 16) * ldexp(1, -24), 6e-8);
	}
	free(y);
	free(r);
}

static void run(uint32_t strat, uint32_t dt, uint32_t cores, uint64_t m, uint64_t n, uint32_t flags,
		uint32_t sp_bytes, float lo, float hi, const char *tag)
{
	float *x = kh_alloc(4 * m * n);

	kh_fill(x, m * n, lo, hi);
	check(strat, dt, cores, m, n, flags, sp_bytes, x, tag);
	free(x);
}

/* kh_edges(): @ctx points to the strategy */
static void edge(void *ctx, uint32_t dt, uint32_t cores, uint64_t m, uint64_t n, uint32_t flags)
{
	run(*(const uint32_t *)ctx, dt, cores, m, n, flags, 0, -6, 6, "");
}

static void test_scratchpad(void) { kh_edges(edge, &(uint32_t){ SPYRE_KSTRAT_SCRATCHPAD }); }
static void test_naive(void) { kh_edges(edge, &(uint32_t){ SPYRE_KSTRAT_NAIVE }); }
static void test_auto(void) { kh_edges(edge, &(uint32_t){ SPYRE_KSTRAT_AUTO }); }

/* rows wider than the scratchpad: the online form (SCRATCHPAD), column tiles in every pass (NAIVE) */
static void test_wide(void)
{
	static const uint32_t strats[] = { SPYRE_KSTRAT_SCRATCHPAD, SPYRE_KSTRAT_NAIVE, SPYRE_KSTRAT_AUTO };

	for (unsigned si = 0; si < 3; si++)
		for (unsigned di = 0; di < 4; di++) {
			run(strats[si], kh_dtypes[di], 3, 5, 40000, di & 1 ? SPYRE_KF_RELOC : 0, 64 << 10, -8, 8,
			    " sp64k");
			run(strats[si], kh_dtypes[di], 32, 40, 3001, di & 1 ? 0 : SPYRE_KF_RELOC, 4 << 10, -8, 8,
			    " sp4k");
		}
	run(SPYRE_KSTRAT_SCRATCHPAD, SPYRE_DT_FP16, 2, 3, 70000, 0, 0, -8, 8, " n>65535");
	run(SPYRE_KSTRAT_NAIVE, SPYRE_DT_BF16, 2, 3, 70000, SPYRE_KF_RELOC, 0, -8, 8, " n>65535");
}

/*
 * The online form's rescaling: the row maximum grows tile after tile (a
 * ramp), and masked rows whose first column tiles are all -inf (dl16 has no
 * infinity: -1e9 there).
 */
static void test_online(void)
{
	uint64_t m = 6, n = 9000;
	float *x = kh_alloc(4 * m * n);

	for (unsigned di = 0; di < 4; di++)
		for (unsigned si = 0; si < 2; si++) {
			uint32_t dt = kh_dtypes[di], st = si ? SPYRE_KSTRAT_NAIVE : SPYRE_KSTRAT_SCRATCHPAD;
			float neg = dt == SPYRE_DT_DL16 ? -1e9f : -INFINITY;

			kh_fill(x, m * n, -1, 1);
			for (uint64_t i = 0; i < m * n; i++)
				x[i] += 12.0f * (float)(i % n) / (float)n;
			check(st, dt, 2, m, n, 0, 16 << 10, x, " ramp");
			kh_fill(x, m * n, -4, 4);
			for (uint64_t i = 0; i < m; i++)
				for (uint64_t j = 0; j < (i + 1) * n / (m + 1); j++)
					x[i * n + j] = neg;
			check(st, dt, 2, m, n, SPYRE_KF_RELOC, 16 << 10, x, " masked");
		}
	free(x);
}

static void test_errors(void)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_SOFTMAX, .dtype = SPYRE_DT_FP16, .m = 0,
				 .n = 64 };

	kh_expect_einval(&d, "m (rows)");
	d.m = 4;
	d.n = 0;
	d.strategy = SPYRE_KSTRAT_NAIVE;
	kh_expect_einval(&d, "n (columns)");
	d.n = 64;
	d.strategy = SPYRE_KSTRAT_RING;
	kh_expect_einval(&d, "strategy");
}

/* modeled time, both strategies, Granite-like shapes (decode: 32 heads x 1 query row; prefill 1024 x 1024) */
static void test_timing(void)
{
	static const uint64_t shapes[][2] = { { 32, 1024 }, { 1024, 1024 } };

	for (unsigned i = 0; i < 2; i++) {
		uint64_t m = shapes[i][0], n = shapes[i][1];
		float *x = kh_alloc(4 * m * n), *y = kh_alloc(4 * m * n);

		kh_fill(x, m * n, -6, 6);
		for (uint32_t st = SPYRE_KSTRAT_NAIVE; st <= SPYRE_KSTRAT_SCRATCHPAD; st++) {
			struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_SOFTMAX, .dtype = SPYRE_DT_FP16,
						 .cores = 32, .m = m, .n = n, .strategy = st };
			struct kh_slot s[] = { KH_IN(x, m, n), KH_OUT(y, m, n), KH_WORK() };
			struct spyre_kernel_info info = { .size = sizeof(info) };

			if (kh_run(&d, s, st == SPYRE_KSTRAT_NAIVE ? 3 : 2, NULL, 0, &info) == 0)
				kh_diag_timing(&info);
		}
		free(x);
		free(y);
	}
}

static const struct tap_case cases[] = {
	{ "scratchpad", test_scratchpad },
	{ "naive", test_naive },
	{ "auto", test_auto },
	{ "wide", test_wide },
	{ "online", test_online },
	{ "errors", test_errors },
	{ "timing", test_timing },
};

int main(int argc, char **argv)
{
	return KH_MAIN(cases, argc, argv);
}
