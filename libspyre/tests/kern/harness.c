// SPDX-License-Identifier: MIT
/* The kernel library's host test harness: see harness.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "flatmem.h"
#include "spyre_engine.h"
#include "spyre_dtype.h"
#include "spyre_progbuild.h"

const uint32_t kh_edge[10] = { 1, 7, 8, 9, 63, 64, 65, 127, 128, 129 };
const uint32_t kh_cores[3] = { 1, 7, 32 };
const uint32_t kh_dtypes[4] = { SPYRE_DT_FP32, SPYRE_DT_FP16, SPYRE_DT_BF16, SPYRE_DT_DL16 };

uint64_t kh_last_device_ns;
double kh_last_utilization;

static struct spyre_engine *E;
static struct flatmem M;
static uint64_t rng = 0x243f6a8885a308d3ull;

void *kh_alloc(uint64_t bytes)
{
	void *p = calloc(1, bytes ? bytes : 1);

	if (!p)
		tap_bail("out of host memory (%llu bytes)", (unsigned long long)bytes);
	return p;
}

void kh_fill(float *p, uint64_t n, float lo, float hi)
{
	for (uint64_t i = 0; i < n; i++) {
		rng ^= rng >> 12;
		rng ^= rng << 25;
		rng ^= rng >> 27;
		p[i] = lo + (hi - lo) * (float)((rng * 0x2545f4914f6cdd1dull) >> 40) / 16777216.0f;
	}
}

float kh_round(float x, uint32_t dtype)
{
	uint8_t b[4];

	spyre_store_f32(b, dtype, 0, x);
	return spyre_load_f32(b, dtype, 0);
}

double kh_tol(uint32_t dtype)
{
	switch (dtype) {
	case SPYRE_DT_FP16:
		return 1.0 / 1024;
	case SPYRE_DT_BF16:
		return 1.0 / 128;
	case SPYRE_DT_DL16:
		return 1.0 / 512;
	default:
		return 1.0 / (1 << 20);
	}
}

bool kh_close(const char *what, const float *got, const float *want, uint64_t n, double rtol, double atol)
{
	uint64_t worst = 0, bad = 0;
	double wd = -1;

	for (uint64_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - (double)want[i]), lim = rtol * fabs((double)want[i]) + atol;

		if (!(d <= lim)) {
			if (d > wd || isnan(d)) {
				wd = d;
				worst = i;
			}
			bad++;
		}
	}
	TAP_CHECK(!bad, "%s: %llu of %llu elements off, worst [%llu] got %.8g want %.8g (rtol %.3g atol %.3g)",
		  what, (unsigned long long)bad, (unsigned long long)n, (unsigned long long)worst,
		  n ? got[worst] : 0.0, n ? want[worst] : 0.0, rtol, atol);
	return !bad;
}

bool kh_close_bound(const char *what, const float *got, const double *want, const double *bound, uint64_t n,
		    double rtol, double atol)
{
	uint64_t bad = 0, worst = 0;
	double wr = 0;

	for (uint64_t i = 0; i < n; i++) {
		double lim = rtol * fabs(want[i]) + bound[i] + atol, e = fabs((double)got[i] - want[i]);

		if (!(e <= lim)) {
			bad++;
			if (isnan(e) || e / lim > wr) {
				wr = isnan(e) ? INFINITY : e / lim;
				worst = i;
			}
		}
	}
	return TAP_CHECK(!bad, "%s: %llu of %llu elements off, worst [%llu] got %.8g want %.8g (bound %.3g)", what,
			 (unsigned long long)bad, (unsigned long long)n, (unsigned long long)worst,
			 n ? got[worst] : 0.0, n ? want[worst] : 0.0, n ? bound[worst] : 0.0);
}

void kh_expect_einval(const struct spyre_kdesc *d, const char *needle)
{
	struct spyre_kernel_info info = { .size = sizeof(info) };
	void *img = NULL;
	size_t sz;
	int rc = spyre_kernel_build(d, &img, &sz, &info);

	TAP_CHECK(rc == -EINVAL && strstr(spyre_last_error(), needle), "rc %d, error \"%s\" should name \"%s\"", rc,
		  spyre_last_error(), needle);
	free(img);
}

void kh_diag_timing(const struct spyre_kernel_info *info)
{
	tap_diag("%s: est %llu ns, engine %llu ns, utilization %.3f", info->name, (unsigned long long)info->est_ns,
		 (unsigned long long)kh_last_device_ns, kh_last_utilization);
}

void kh_edges(void (*fn)(void *ctx, uint32_t dt, uint32_t cores, uint64_t m, uint64_t n, uint32_t flags), void *ctx)
{
	unsigned i = 0;

	for (unsigned di = 0; di < 4; di++)
		for (unsigned ci = 0; ci < 3; ci++)
			for (unsigned ri = 0; ri < 10; ri++)
				for (unsigned ki = 0; ki < 10; ki++, i++)
					fn(ctx, kh_dtypes[di], kh_cores[ci], kh_edge[ri], kh_edge[ki],
					   (i & 1) ? SPYRE_KF_RELOC : 0);
}

bool kh_fault_expected;
struct spyre_launch_result kh_last_result;

int kh_run(const struct spyre_kdesc *d, struct kh_slot *slots, uint32_t nslots, const uint64_t *scalars,
	   uint32_t nscalars, struct spyre_kernel_info *infop)
{
	struct spyre_kernel_info info = { .size = sizeof(info) };
	struct spyre_launch_result res;
	uint64_t va[16];
	void *img;
	size_t sz;
	int rc;

	rc = spyre_kernel_build(d, &img, &sz, &info);
	if (!TAP_CHECK(rc == 0, "build: %s", spyre_last_error()))
		return -1;
	if (infop)
		*infop = info;
	if (!TAP_CHECK(info.num_slots == nslots && info.num_scalars == nscalars,
		       "%s: %u slots / %u scalars, test passes %u / %u", info.name, info.num_slots,
		       info.num_scalars, nslots, nscalars)) {
		free(img);
		return -1;
	}
	M.next = 0;
	for (uint32_t i = 0; i < nslots; i++) {
		struct kh_slot *s = &slots[i];
		uint32_t dt = s->dtype < 0 ? d->dtype : (uint32_t)s->dtype;
		uint64_t bytes = info.slot_bytes[i];

		va[i] = flatmem_alloc(&M, bytes);
		void *p = flatmem_ptr(&M, va[i]);

		switch (s->kind) {
		case KH_KIND_IN:
		case KH_KIND_INOUT:
			if (!TAP_CHECK(bytes >= s->rows * spyre_kernel_grouped_pitch(s->cols, s->group, dt),
				       "%s: slot %u has %llu bytes, the test's tensor needs more", info.name, i,
				       (unsigned long long)bytes)) {
				free(img);
				return -1;
			}
			spyre_kernel_pack(p, s->data, s->rows, s->cols, s->group, dt);
			break;
		case KH_KIND_RAW:
			memcpy(p, s->raw, s->raw_bytes < bytes ? s->raw_bytes : bytes);
			break;
		default:
			/* outputs and work start as garbage: kernels must not rely on zeroes */
			memset(p, 0x7b, bytes);
			break;
		}
	}
	/* the patch path: the runtime writes the slots' addresses into the image */
	if ((d->flags & SPYRE_KF_RELOC) && !TAP_CHECK(spyre_prog_relocate(img, sz, va, nslots) >= 0,
						       "%s: relocation failed", info.name)) {
		free(img);
		return -1;
	}
	rc = flatmem_run(&M, E, img, sz, va, nslots, scalars, nscalars, info.core_mask, &res);
	free(img);
	kh_last_result = res;
	if (rc && kh_fault_expected)
		return rc;
	kh_last_device_ns = res.device_ns;
	{
		uint64_t busy = 0;

		for (uint32_t c = 0; c < SPYRE_MAX_CORES; c++)
			busy += res.core_busy_cycles[c];
		kh_last_utilization = res.device_cycles && res.cores_run ?
			(double)busy / ((double)res.device_cycles * res.cores_run) : 0;
	}
	if (!TAP_CHECK(rc == 0, "%s: engine fault %s at core %u pc %u addr 0x%llx", info.name,
		       spyre_fault_name(res.status), res.fault_core, res.fault_pc,
		       (unsigned long long)res.fault_addr))
		return rc ? rc : -1;
	for (uint32_t i = 0; i < nslots; i++) {
		struct kh_slot *s = &slots[i];
		uint32_t dt = s->dtype < 0 ? d->dtype : (uint32_t)s->dtype;
		const uint8_t *p = flatmem_ptr(&M, va[i]);

		if (s->kind != KH_KIND_OUT && s->kind != KH_KIND_INOUT)
			continue;
		if (s->idata && s->imat) {
			for (uint64_t r = 0; r < s->rows; r++)
				for (uint64_t c = 0; c < s->cols; c++)
					s->idata[r * s->cols + c] = (int32_t)spyre_load_int(
						p + r * spyre_kernel_pitch(s->cols, SPYRE_DT_INT32), SPYRE_DT_INT32, c);
			continue;
		}
		if (s->idata) {
			for (uint64_t r = 0; r < s->rows; r++)
				s->idata[r] = (int32_t)spyre_load_int(p, SPYRE_DT_INT32, r);
			continue;
		}
		spyre_kernel_unpack(s->data, p, s->rows, s->cols, s->group, dt);
	}
	return 0;
}

int kh_main(const struct tap_case *cases, size_t n, int argc, char **argv)
{
	static const struct flatmem_test t = {
		.engine = &E, .mem = &M, .base = 0x100000000ull, .size = 512ull << 20,
	};

	return flatmem_test_main(&t, cases, n, argc, argv);
}
