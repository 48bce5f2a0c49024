// SPDX-License-Identifier: MIT
/*
 * Description: the kernel library's elementwise kernels (ADD with alpha,
 * MUL, SILU, GELU, RELU) on the engine against a CPU reference: the edge shapes
 * (rows and columns 1, 7, 8, 9, 63, 64, 65, 127, 128, 129), every dtype,
 * 1, 7 and 32 cores, both addressing forms. Reference from the rounded
 * inputs in double; tolerance one rounding of the output (kh_tol) + 1e-6,
 * transcendentals 4x that.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "harness.h"

static double ref1(uint32_t op, double a, double b, double alpha)
{
	switch (op) {
	case SPYRE_KOP_ADD:
		return a + alpha * b;
	case SPYRE_KOP_MUL:
		return a * b;
	case SPYRE_KOP_SILU:
		return a / (1 + exp(-a));
	case SPYRE_KOP_RELU:
		return a > 0 ? a : 0;
	default:
		return 0.5 * a * (1 + erf(a / sqrt(2.0)));
	}
}

static void run_op(uint32_t op, float alpha)
{
	for (unsigned di = 0; di < 4; di++)
		for (unsigned ci = 0; ci < 3; ci++)
			for (unsigned ri = 0; ri < 10; ri += 3)
				for (unsigned ki = 0; ki < 10; ki++) {
					uint32_t dt = kh_dtypes[di], m = kh_edge[ri], n = kh_edge[ki];
					float *a = kh_alloc(4ull * m * n), *b = kh_alloc(4ull * m * n);
					float *y = kh_alloc(4ull * m * n), *r = kh_alloc(4ull * m * n);
					int bin = op == SPYRE_KOP_ADD || op == SPYRE_KOP_MUL;
					struct spyre_kdesc d = { .size = sizeof(d), .op = op, .dtype = dt,
								 .cores = kh_cores[ci], .m = m, .n = n,
								 .alpha = alpha,
								 .flags = (ki & 1) ? SPYRE_KF_RELOC : 0 };
					struct kh_slot s2[] = { KH_IN(a, m, n), KH_IN(b, m, n), KH_OUT(y, m, n) };
					struct kh_slot s1[] = { KH_IN(a, m, n), KH_OUT(y, m, n) };

					kh_fill(a, (uint64_t)m * n, -3, 3);
					kh_fill(b, (uint64_t)m * n, -3, 3);
					for (uint64_t i = 0; i < (uint64_t)m * n; i++)
						r[i] = (float)ref1(op, kh_round(a[i], dt), kh_round(b[i], dt),
								   alpha == 0 ? 1 : alpha);
					if (kh_run(&d, bin ? s2 : s1, bin ? 3 : 2, NULL, 0, NULL) == 0) {
						char what[96];

						snprintf(what, sizeof(what), "%s %s %ux%u c%u", spyre_kernel_op_name(op),
							 spyre_dtype_name(dt), m, n, kh_cores[ci]);
						kh_close(what, y, r, (uint64_t)m * n,
							 (bin ? 1 : 4) * kh_tol(dt) + 1e-6, 1e-5);
					}
					free(a);
					free(b);
					free(y);
					free(r);
				}
}

static void test_add(void) { run_op(SPYRE_KOP_ADD, 0); }
static void test_add_alpha(void) { run_op(SPYRE_KOP_ADD, 0.22f); }
static void test_mul(void) { run_op(SPYRE_KOP_MUL, 0); }
static void test_silu(void) { run_op(SPYRE_KOP_SILU, 0); }
static void test_gelu(void) { run_op(SPYRE_KOP_GELU, 0); }
static void test_relu(void) { run_op(SPYRE_KOP_RELU, 0); }

/* a row wider than the scratchpad holds is tiled in whole sticks */
static void test_wide_rows(void)
{
	uint32_t m = 3, n = 300000;
	float *a = kh_alloc(4ull * m * n), *b = kh_alloc(4ull * m * n), *y = kh_alloc(4ull * m * n);
	float *r = kh_alloc(4ull * m * n);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ADD, .dtype = SPYRE_DT_FP32, .cores = 2,
				 .m = m, .n = n, .sp_bytes = 256 << 10 };
	struct kh_slot s[] = { KH_IN(a, m, n), KH_IN(b, m, n), KH_OUT(y, m, n) };

	kh_fill(a, (uint64_t)m * n, -1, 1);
	kh_fill(b, (uint64_t)m * n, -1, 1);
	for (uint64_t i = 0; i < (uint64_t)m * n; i++)
		r[i] = a[i] + b[i];
	if (kh_run(&d, s, 3, NULL, 0, NULL) == 0)
		kh_close("add 3x300000 in a 256 KiB scratchpad", y, r, (uint64_t)m * n, 1e-6, 0);
	free(a);
	free(b);
	free(y);
	free(r);
}

/*
 * The library's descriptor handling (found by review): AUTO falls back when
 * the preferred strategy cannot be built; -0.0f and 0.0f are one key.
 */
static void test_descriptor_handling(void)
{
	struct spyre_kernel_info info = { .size = sizeof(info) }, i2 = { .size = sizeof(i2) };
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_MLP, .dtype = SPYRE_DT_FP16, .cores = 1,
				 .m = 64, .n = 12288, .k = 4096, .sp_bytes = 256 << 10 };
	void *img, *img2;
	size_t sz, sz2;

	d.strategy = SPYRE_KSTRAT_FUSED;
	TAP_EQ(-EINVAL, spyre_kernel_build(&d, &img, &sz, &info));
	d.strategy = 0;
	TAP_EQ(0, spyre_kernel_build(&d, &img, &sz, &info));
	TAP_EQ((uint32_t)SPYRE_KSTRAT_UNFUSED, info.strategy);
	TAP_STREQ("mlp fp16 64x12288x4096 unfused c1", info.name);
	free(img);
	d = (struct spyre_kdesc){ .size = sizeof(d), .op = SPYRE_KOP_ADD, .dtype = SPYRE_DT_FP16, .m = 3, .n = 5,
				  .alpha = -0.0f };
	TAP_EQ(0, spyre_kernel_build(&d, &img, &sz, &info));
	TAP_STREQ("add fp16 3x5 c32", info.name);	/* no k: not "3x5x0" */
	d.alpha = 0.0f;
	TAP_EQ(0, spyre_kernel_build(&d, &img2, &sz2, &i2));
	TAP_CHECK(sz == sz2 && !memcmp(img, img2, sz), "alpha -0.0 builds the image of alpha 0.0");
	free(img);
	free(img2);
}

static const struct tap_case cases[] = {
	{ "descriptor_handling", test_descriptor_handling },
	{ "add", test_add },
	{ "add_alpha", test_add_alpha },
	{ "mul", test_mul },
	{ "silu", test_silu },
	{ "gelu", test_gelu },
	{ "relu", test_relu },
	{ "wide_rows", test_wide_rows },
};

int main(int argc, char **argv)
{
	return KH_MAIN(cases, argc, argv);
}
