// SPDX-License-Identifier: MIT
/*
 * Description: the kernel library's ROPE and ATTENTION kernels on the
 * engine against CPU references in double computed from the rounded inputs.
 *
 * ROPE: positions pos0 0, 5 and 200 (scalar from spyre_kernel_rope_scalar),
 * head_dim 32/64/128, heads 1..8, token counts 1, 7, 9, 64, every dtype,
 * 1, 7 and 32 cores, both addressing forms, a small scratchpad. Tolerance:
 * one rounding of the output (kh_tol) + 1e-6 relative to sum |x cos| +
 * |x sin| (fp32 arithmetic: two products and one sum, the tables rounded to
 * fp32 once: a few 2^-24).
 *
 * ATTENTION: see the attention cases below for their tolerances.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *dtn(uint32_t dt)
{
	return dt == SPYRE_DT_FP32 ? "fp32" : dt == SPYRE_DT_FP16 ? "fp16" : dt == SPYRE_DT_BF16 ? "bf16" : "dl16";
}

/* ---- ROPE ---------------------------------------------------------------- */

static bool rope_case(uint32_t dt, uint32_t cores, uint32_t m, uint32_t heads, uint32_t hd, uint32_t pos0,
		      uint32_t max_pos, uint32_t flags, uint32_t sp_bytes)
{
	uint64_t n = (uint64_t)m * heads * hd, tp = spyre_kernel_pitch(hd, SPYRE_DT_FP32);
	float *x = kh_alloc(4 * n), *y = kh_alloc(4 * n), *ref = kh_alloc(4 * n), *err = kh_alloc(4 * n);
	uint8_t *ct = kh_alloc(max_pos * tp), *st = kh_alloc(max_pos * tp);
	const float theta = 10000.0f;
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ROPE, .dtype = dt, .cores = cores, .m = m,
				 .heads = heads, .head_dim = hd, .max_pos = max_pos, .flags = flags,
				 .sp_bytes = sp_bytes };
	struct kh_slot s[] = {
		KH_IN_G(x, m, (uint64_t)heads * hd, hd), KH_RAW(ct, max_pos * tp), KH_RAW(st, max_pos * tp),
		KH_OUT_G(y, m, (uint64_t)heads * hd, hd),
	};
	uint64_t sc = spyre_kernel_rope_scalar(&d, pos0);
	bool ok = false;

	kh_fill(x, n, -2, 2);
	spyre_kernel_rope_tables(ct, st, max_pos, hd, theta);
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t h = 0; h < heads; h++) {
			const float *xr = x + ((uint64_t)i * heads + h) * hd;

			for (uint32_t e = 0; e < hd; e++) {
				uint32_t f = e % (hd / 2);
				double ang = (double)(pos0 + i) * pow(theta, -2.0 * f / hd);
				double a = kh_round(xr[e], dt);
				double b = e < hd / 2 ? -(double)kh_round(xr[e + hd / 2], dt) :
							(double)kh_round(xr[e - hd / 2], dt);
				uint64_t o = ((uint64_t)i * heads + h) * hd + e;

				ref[o] = (float)(a * cos(ang) + b * sin(ang));
				err[o] = (float)(fabs(a) + fabs(b));
			}
		}
	if (kh_run(&d, s, 4, &sc, 1, NULL) == 0) {
		char what[128];
		double tol = kh_tol(dt);
		uint64_t bad = 0, worst = 0;
		double wd = 0;

		for (uint64_t i = 0; i < n; i++) {
			double dd = fabs((double)y[i] - ref[i]);

			if (!(dd <= tol * fabs(ref[i]) + 1e-6 * err[i])) {
				if (!bad || dd > wd)
					wd = dd, worst = i;
				bad++;
			}
		}
		snprintf(what, sizeof(what), "rope %s m%u h%u hd%u pos0 %u c%u%s sp%u", dtn(dt), m, heads, hd, pos0,
			 cores, flags ? " reloc" : "", sp_bytes);
		ok = TAP_CHECK(!bad, "%s: %llu of %llu off, worst [%llu] got %.8g want %.8g", what,
			       (unsigned long long)bad, (unsigned long long)n, (unsigned long long)worst,
			       y[worst], ref[worst]);
	}
	free(x);
	free(y);
	free(ref);
	free(err);
	free(ct);
	free(st);
	return ok;
}

static void test_rope(void)
{
	static const uint32_t pos[] = { 0, 5, 200 }, hds[] = { 32, 64, 128 }, ms[] = { 1, 7, 9, 64 };
	unsigned i = 0;

	for (unsigned di = 0; di < 4; di++)
		for (unsigned ci = 0; ci < 3; ci++)
			for (unsigned hi = 0; hi < 3; hi++)
				for (unsigned pi = 0; pi < 3; pi++, i++) {
					uint32_t heads = 1 + (i * 3) % 8, m = ms[i % 4];

					rope_case(kh_dtypes[di], kh_cores[ci], m, heads, hds[hi], pos[pi], 300,
						  (i & 1) ? SPYRE_KF_RELOC : 0, 0);
				}
	/* every head count once at decode (m = 1) on 32 cores */
	for (uint32_t h = 1; h <= 8; h++)
		rope_case(SPYRE_DT_FP16, 32, 1, h, 128, 200, 300, 0, 0);
	/* tiled through a small scratchpad: heads and tokens both cut */
	rope_case(SPYRE_DT_FP16, 2, 65, 8, 128, 5, 300, 0, 64 << 10);
	rope_case(SPYRE_DT_FP32, 1, 9, 8, 64, 200, 300, SPYRE_KF_RELOC, 32 << 10);
}

static void test_rope_errors(void)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ROPE, .dtype = SPYRE_DT_FP16, .m = 4,
				 .heads = 2, .head_dim = 33, .max_pos = 16 };
	struct spyre_kernel_info info = { .size = sizeof(info) };
	void *img;
	size_t sz;
	int rc = spyre_kernel_build(&d, &img, &sz, &info);

	TAP_CHECK(rc == -EINVAL && strstr(spyre_last_error(), "head_dim 33"), "odd head_dim: rc %d, %s", rc,
		  spyre_last_error());
	d.head_dim = 64;
	d.m = 17;
	rc = spyre_kernel_build(&d, &img, &sz, &info);
	TAP_CHECK(rc == -EINVAL && strstr(spyre_last_error(), "max_pos"), "m > max_pos: rc %d, %s", rc,
		  spyre_last_error());
	d.m = 4;
	d.head_dim = 128;
	d.sp_bytes = 16 << 10;	/* the 128x128 fp16 rotation matrix alone is 32 KiB */
	rc = spyre_kernel_build(&d, &img, &sz, &info);
	TAP_CHECK(rc == -EINVAL && strstr(spyre_last_error(), "rotation matrix"), "tiny scratchpad: rc %d, %s",
		  rc, spyre_last_error());
}

static const struct tap_case cases[] = {
	{ "rope", test_rope },
	{ "rope_errors", test_rope_errors },
};

int main(int argc, char **argv)
{
	return KH_MAIN(cases, argc, argv);
}
