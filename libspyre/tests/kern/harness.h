/* SPDX-License-Identifier: MIT */
/*
 * harness.h - host tests of the kernel library: generate a kernel with
 * spyre_kernel_build(), run it on the compute engine over flat memory
 * (no device, no VM), and compare with a CPU reference.
 *
 *	float x[...], y[...];
 *	struct kh_slot s[] = {
 *		KH_IN(x, m, n), KH_OUT(y, m, n),
 *	};
 *	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_SILU, .dtype = dt,
 *				 .cores = 7, .m = m, .n = n };
 *	if (kh_run(&d, s, 2, NULL, 0, NULL) == 0)
 *		kh_close("silu", y, ref, m * n, kh_tol(dt), 1e-6);
 *
 * Inputs are packed into the stick layout in the kernel's dtype (so they are
 * rounded as the device would see them: compute the reference from
 * kh_round()ed values), outputs unpacked to fp32.
 */
#ifndef KERN_HARNESS_H
#define KERN_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "spyre_kernels.h"
#include "spyre_isa.h"
#include "spyre_engine.h"	/* struct spyre_launch_result */
#include "spyre_isa_codec.h"	/* spyre_dtype_name(): "fp32", "fp16", ... in the tests' messages */
#include "../../../tests/tap.h"

enum kh_kind { KH_KIND_IN, KH_KIND_OUT, KH_KIND_INOUT, KH_KIND_RAW, KH_KIND_WORK };

struct kh_slot {
	enum kh_kind kind;
	float *data;		/* host fp32 [rows x cols] (IN: read, OUT: written) */
	uint64_t rows, cols, group;
	int dtype;		/* -1: the kernel's dtype */
	const void *raw;	/* KH_KIND_RAW: bytes copied as they are */
	uint64_t raw_bytes;	/* RAW and WORK: bytes */
	int32_t *idata;		/* int32 output (ARGMAX), dtype SPYRE_DT_INT32 */
	bool imat;		/* idata is [rows x cols] in stick-layout rows (IADD), not one row of @rows */
};

#define KH_IN(p, r, c)		{ .kind = KH_KIND_IN, .data = (p), .rows = (r), .cols = (c), .dtype = -1 }
#define KH_IN_DT(p, r, c, dt)	{ .kind = KH_KIND_IN, .data = (p), .rows = (r), .cols = (c), .dtype = (dt) }
#define KH_IN_G(p, r, c, g)	{ .kind = KH_KIND_IN, .data = (p), .rows = (r), .cols = (c), .group = (g), .dtype = -1 }
#define KH_OUT(p, r, c)		{ .kind = KH_KIND_OUT, .data = (p), .rows = (r), .cols = (c), .dtype = -1 }
#define KH_OUT_G(p, r, c, g)	{ .kind = KH_KIND_OUT, .data = (p), .rows = (r), .cols = (c), .group = (g), .dtype = -1 }
#define KH_INOUT(p, r, c)	{ .kind = KH_KIND_INOUT, .data = (p), .rows = (r), .cols = (c), .dtype = -1 }
#define KH_OUT_I32(p, r)	{ .kind = KH_KIND_OUT, .idata = (p), .rows = (r), .cols = 1, .dtype = SPYRE_DT_INT32 }
#define KH_OUT_I32M(p, r, c)	{ .kind = KH_KIND_OUT, .idata = (p), .rows = (r), .cols = (c), .dtype = SPYRE_DT_INT32, \
				  .imat = true }
#define KH_RAW(p, n)		{ .kind = KH_KIND_RAW, .raw = (p), .raw_bytes = (n) }
#define KH_WORK()		{ .kind = KH_KIND_WORK }

/*
 * Build @d, check the slot count and sizes against @slots, run it on the
 * cores it asks for, unpack the outputs. Returns the engine status (0), or
 * -1 after reporting a failed check. @info (optional) gets the kernel info,
 * @device_ns (optional) the modeled time.
 */
int kh_run(const struct spyre_kdesc *d, struct kh_slot *slots, uint32_t nslots, const uint64_t *scalars,
	   uint32_t nscalars, struct spyre_kernel_info *info);
/*
 * With kh_fault_expected set, an engine fault is not a failed check: kh_run
 * returns its status and kh_last_result holds where (hostile-input tests).
 */
extern bool kh_fault_expected;
extern struct spyre_launch_result kh_last_result;
/* The last kh_run's modeled device ns and per-core busy cycles sum / (cycles x cores). */
extern uint64_t kh_last_device_ns;
extern double kh_last_utilization;

/* x rounded to dtype as stored (identity for fp32). */
float kh_round(float x, uint32_t dtype);
/* Relative tolerance of one rounding to dtype: 2^-10 fp16, 2^-7 bf16, 2^-9 dl16, 2^-20 fp32. */
double kh_tol(uint32_t dtype);
/*
 * TAP check that |got - want| <= rtol * |want| + atol for all n; reports the
 * worst element. Returns true when close.
 */
bool kh_close(const char *what, const float *got, const float *want, uint64_t n, double rtol, double atol);

/*
 * TAP check that |got - want| <= rtol * |want| + bound[i] + atol for all n
 * (a per-element error bound from the reference); reports the element
 * furthest past its limit. Returns true when close.
 */
bool kh_close_bound(const char *what, const float *got, const double *want, const double *bound, uint64_t n,
		    double rtol, double atol);

/* TAP check that building @d fails with -EINVAL and an error naming @needle. */
void kh_expect_einval(const struct spyre_kdesc *d, const char *needle);

/* "# <info->name>: est N ns, engine N ns, utilization U" after a kh_run() with @info. */
void kh_diag_timing(const struct spyre_kernel_info *info);

/*
 * The edge cases of an op over rows x columns: @fn(@ctx, dt, cores, m, n,
 * flags) for every dtype (kh_dtypes), core count (kh_cores) and m, n in
 * kh_edge, the cases alternating between the two addressing forms (flags 0
 * and SPYRE_KF_RELOC).
 */
void kh_edges(void (*fn)(void *ctx, uint32_t dt, uint32_t cores, uint64_t m, uint64_t n, uint32_t flags), void *ctx);

/* Deterministic uniform floats in [lo, hi). */
void kh_fill(float *p, uint64_t n, float lo, float hi);
/* malloc that bails out the test on failure. */
void *kh_alloc(uint64_t bytes);

/* The test's main(): engine + memory set-up, cases, teardown. */
int kh_main(const struct tap_case *cases, size_t n, int argc, char **argv);
#define KH_MAIN(cases, argc, argv) kh_main(cases, sizeof(cases) / sizeof((cases)[0]), argc, argv)

/* The shapes, core counts and dtypes every op is tested over (issue 11). */
extern const uint32_t kh_edge[10];		/* 1 7 8 9 63 64 65 127 128 129 */
extern const uint32_t kh_cores[3];		/* 1 7 32 */
extern const uint32_t kh_dtypes[4];		/* fp32 fp16 bf16 dl16 */

#endif /* KERN_HARNESS_H */
