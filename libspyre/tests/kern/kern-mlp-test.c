// SPDX-License-Identifier: MIT
/*
 * Description: the kernel library's MLP kernel (SwiGLU and GELU), FUSED
 * (one program, intermediates in the scratchpad, partials summed over the
 * ring), UNFUSED (passes through the work slot) and AUTO, on the engine
 * against a CPU reference and against each other: the edge sizes 1, 7, 8,
 * 9, 63, 64, 65, 127, 128, 129 in each of m, hidden (k) and ffn (n) (every
 * value at least once per dtype and activation), every dtype, 1, 7 and 32
 * cores, both addressing forms; shapes tiled through small
 * scratchpads of 32 and 64 KiB (row tiles, k tiles, sub-blocks of the FFN block in rounds,
 * chunks sent in several messages); descriptor errors; the modeled time and
 * engine utilization of both strategies; Wg, Wu and Wd written by
 * spyre_kernel_pack_weight() from a checkpoint's [out x in] (or [in x out])
 * in fp32 or the kernel's dtype, the unfused kernels launched without their
 * work slot's size known to the test beyond spyre_kernel_info.work_bytes.
 *
 * Tolerance, per output element, from the reference's own intermediates
 * (double, from the rounded inputs): G and U are fp32 sums of k products,
 * error eG_j <= (k + 2) 2^-24 sum_p |x_p wg_pj| (likewise eU_j); the
 * activation passes it on with slope <= 1.13 (SiLU 1.10, GELU 1.13) plus a
 * few ulps of its own (8 * 2^-24 |act|, GELU's 1 + erf cancellation
 * |u| 2^-22); H = act * U adds |U| e_act + |act| eU + 2^-24 |H|; Y's fp32
 * sum adds sum_j |wd_jl| eH_j + (n + 2) 2^-24 sum_j |h_j wd_jl|. The check
 * allows twice that plus one rounding of Y to the dtype (kh_tol) and 1e-6.
 * Fused and unfused results must agree within two output roundings plus
 * twice the bound.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "spyre_dtype.h"

static const char *stn(uint32_t s)
{
	return s == SPYRE_KSTRAT_FUSED ? "fused" : s == SPYRE_KSTRAT_UNFUSED ? "unfused" : "auto";
}

struct mcase {
	uint32_t dt, cores, flags, sp_bytes;
	uint64_t m, k, n;	/* rows, hidden, ffn */
};

struct mref {
	double *y, *bound;
};

static double silu(double x)
{
	return x / (1 + exp(-x));
}

static double gelu(double x)
{
	return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}

/* Y and its error bound (header comment) from the rounded inputs. */
static void reference(const struct mcase *c, const float *x, const float *wg, const float *wu, const float *wd,
		      struct mref *r)
{
	uint64_t m = c->m, k = c->k, n = c->n;
	bool ge = c->flags & SPYRE_KF_GELU;
	double *h = kh_alloc(8 * n), *eh = kh_alloc(8 * n);
	float *xr = kh_alloc(4 * m * k), *gr = kh_alloc(4 * k * n), *ur = kh_alloc(4 * k * n), *dr = kh_alloc(4 * n * k);
	const double u24 = ldexp(1, -24);

	for (uint64_t i = 0; i < m * k; i++)
		xr[i] = kh_round(x[i], c->dt);
	for (uint64_t i = 0; i < k * n; i++) {
		gr[i] = ge ? 0 : kh_round(wg[i], c->dt);
		ur[i] = kh_round(wu[i], c->dt);
		dr[i] = kh_round(wd[i], c->dt);
	}
	for (uint64_t i = 0; i < m; i++) {
		for (uint64_t j = 0; j < n; j++) {
			double g = 0, sg = 0, u = 0, su = 0;

			for (uint64_t p = 0; p < k; p++) {
				double a = xr[i * k + p];

				g += a * gr[p * n + j];
				sg += fabs(a * gr[p * n + j]);
				u += a * ur[p * n + j];
				su += fabs(a * ur[p * n + j]);
			}
			double eg = (k + 2) * u24 * sg, eu = (k + 2) * u24 * su;

			if (ge) {
				h[j] = gelu(u);
				eh[j] = 1.13 * eu + 8 * u24 * fabs(h[j]) + 4 * u24 * fabs(u);
			} else {
				double s = silu(g), es = 1.10 * eg + 8 * u24 * fabs(s);

				h[j] = s * u;
				eh[j] = fabs(u) * es + fabs(s) * eu + es * eu + u24 * fabs(h[j]);
			}
		}
		for (uint64_t l = 0; l < k; l++) {
			double y = 0, e = 0, s = 0;

			for (uint64_t j = 0; j < n; j++) {
				double w = dr[j * k + l];

				y += h[j] * w;
				e += fabs(w) * eh[j];
				s += fabs(h[j] * w);
			}
			r->y[i * k + l] = y;
			r->bound[i * k + l] = 2 * (e + (n + 2) * u24 * s);
		}
	}
	free(h);
	free(eh);
	free(xr);
	free(gr);
	free(ur);
	free(dr);
}

/* Y within its bound, one rounding to the dtype and 1e-6 (header comment). */
static bool check(const char *what, const float *got, const struct mref *r, uint64_t cnt, uint32_t dt)
{
	return kh_close_bound(what, got, r->y, r->bound, cnt, kh_tol(dt), 1e-6);
}

/* Random inputs of @c and their reference. */
struct minputs {
	float *x, *wg, *wu, *wd;
	struct mref r;
};

static void inputs_make(const struct mcase *c, struct minputs *in)
{
	uint64_t m = c->m, k = c->k, n = c->n;

	in->x = kh_alloc(4 * m * k);
	in->wg = kh_alloc(4 * k * n);
	in->wu = kh_alloc(4 * k * n);
	in->wd = kh_alloc(4 * n * k);
	in->r = (struct mref){ kh_alloc(8 * m * k), kh_alloc(8 * m * k) };
	kh_fill(in->x, m * k, -1, 1);
	kh_fill(in->wg, k * n, -0.5f, 0.5f);
	kh_fill(in->wu, k * n, -0.5f, 0.5f);
	kh_fill(in->wd, n * k, -0.5f, 0.5f);
	reference(c, in->x, in->wg, in->wu, in->wd, &in->r);
}

static void inputs_free(struct minputs *in)
{
	free(in->x);
	free(in->wg);
	free(in->wu);
	free(in->wd);
	free(in->r.y);
	free(in->r.bound);
}

/* |fused - unfused| within two output roundings and twice the bound. */
static bool agree(const char *what, const float *a, const float *b, const struct mref *r, uint64_t cnt, uint32_t dt)
{
	uint64_t bad = 0, worst = 0;

	for (uint64_t i = 0; i < cnt; i++) {
		double lim = 2 * kh_tol(dt) * fabs(r->y[i]) + 2 * r->bound[i] + 2e-6;

		if (!(fabs((double)a[i] - b[i]) <= lim)) {
			if (!bad)
				worst = i;
			bad++;
		}
	}
	return TAP_CHECK(!bad, "%s: fused and unfused differ in %llu of %llu, e.g. [%llu] %.8g vs %.8g", what,
			 (unsigned long long)bad, (unsigned long long)cnt, (unsigned long long)worst,
			 cnt ? a[worst] : 0.0, cnt ? b[worst] : 0.0);
}

static uint32_t last_cores;

/* Weights by spyre_kernel_pack_weight() (when on) from a host matrix in @layout and @dt. */
static struct {
	bool on;
	uint32_t layout, dt;
} packed;

/*
 * @w [rows x cols] (a kernel-layout weight: [in x out]) given to
 * spyre_kernel_pack_weight() as slot @slot of @d; a KH_RAW slot in *@sl, its
 * buffer in *@buf (to free).
 */
static void pack_slot(const struct spyre_kdesc *d, uint32_t slot, const float *w, uint64_t in, uint64_t out,
		      struct kh_slot *sl, void **buf)
{
	uint8_t *src = kh_alloc(4 * in * out);
	size_t need = 0;

	for (uint64_t i = 0; i < in; i++)
		for (uint64_t o = 0; o < out; o++)
			spyre_store_f32(src, packed.dt, packed.layout == SPYRE_KW_OUT_IN ? o * in + i : i * out + o,
					w[i * out + o]);
	TAP_CHECK(spyre_kernel_pack_weight(d, slot, packed.layout, src, packed.dt, NULL, &need) == 0,
		  "pack_weight size: %s", spyre_last_error());
	*buf = kh_alloc(need + 1);
	TAP_CHECK(spyre_kernel_pack_weight(d, slot, packed.layout, src, packed.dt, *buf, &need) == 0,
		  "pack_weight: %s", spyre_last_error());
	*sl = (struct kh_slot)KH_RAW(*buf, need);
	free(src);
}

/* Run @c with @strategy on @in into y; 0 or -1. */
static int run(const struct mcase *c, uint32_t strategy, const struct minputs *in, float *y,
	       struct spyre_kernel_info *info)
{
	uint64_t m = c->m, k = c->k, n = c->n;
	bool ge = c->flags & SPYRE_KF_GELU;
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_MLP, .dtype = c->dt, .cores = c->cores,
				 .strategy = strategy, .flags = c->flags, .m = m, .n = n, .k = k,
				 .sp_bytes = c->sp_bytes };
	struct kh_slot sl[6];
	uint32_t ns = 0;

	sl[ns++] = (struct kh_slot)KH_IN(in->x, m, k);
	if (!ge)
		sl[ns++] = (struct kh_slot)KH_IN(in->wg, k, n);
	sl[ns++] = (struct kh_slot)KH_IN(in->wu, k, n);
	sl[ns++] = (struct kh_slot)KH_IN(in->wd, n, k);
	sl[ns++] = (struct kh_slot)KH_OUT(y, m, k);
	if (strategy == SPYRE_KSTRAT_UNFUSED)
		sl[ns++] = (struct kh_slot)KH_WORK();
	void *bufs[3] = { NULL, NULL, NULL };

	if (packed.on) {	/* Wg, Wu [k x n] and Wd [n x k] of the kernel: [in x out] */
		if (!ge)
			pack_slot(&d, 1, in->wg, k, n, &sl[1], &bufs[0]);
		pack_slot(&d, ge ? 1 : 2, in->wu, k, n, &sl[ge ? 1 : 2], &bufs[1]);
		pack_slot(&d, ge ? 2 : 3, in->wd, n, k, &sl[ge ? 2 : 3], &bufs[2]);
	}
	struct spyre_kernel_info tmp;
	int rc = kh_run(&d, sl, ns, NULL, 0, info ? info : &tmp);

	last_cores = (info ? info : &tmp)->cores;
	for (int i = 0; i < 3; i++)
		free(bufs[i]);
	return rc;
}

static uint32_t fused_cores;

/* Fused, unfused (and AUTO if @with_auto) against the reference and each other. */
static void run_case(const struct mcase *c, bool with_auto)
{
	uint64_t m = c->m, k = c->k, n = c->n;
	float *yf = kh_alloc(4 * m * k), *yu = kh_alloc(4 * m * k), *ya = kh_alloc(4 * m * k);
	struct minputs in;
	const struct mref *r = &in.r;
	struct spyre_kernel_info info;
	char what[160];
	int okf, oku;

	inputs_make(c, &in);
	snprintf(what, sizeof(what), "mlp %s %s m%llu k%llu n%llu c%u%s sp%u", (c->flags & SPYRE_KF_GELU) ? "gelu" : "swiglu",
		 spyre_dtype_name(c->dt), (unsigned long long)m, (unsigned long long)k, (unsigned long long)n, c->cores,
		 (c->flags & SPYRE_KF_RELOC) ? " reloc" : "", c->sp_bytes);
	okf = run(c, SPYRE_KSTRAT_FUSED, &in, yf, NULL);
	if (okf == 0)
		check(what, yf, r, m * k, c->dt);
	fused_cores = last_cores;
	oku = run(c, SPYRE_KSTRAT_UNFUSED, &in, yu, &info);
	if (oku == 0) {
		check(what, yu, r, m * k, c->dt);
		TAP_CHECK(info.slot_bytes[info.num_slots - 1] ==
				  ((c->flags & SPYRE_KF_GELU) ? 1 : 2) * m * spyre_kernel_pitch(n, SPYRE_DT_FP32) &&
			  info.work_bytes == info.slot_bytes[info.num_slots - 1],
			  "%s: work slot of %llu bytes (info: %llu)", what,
			  (unsigned long long)info.slot_bytes[info.num_slots - 1], (unsigned long long)info.work_bytes);
	}
	if (okf == 0 && oku == 0)
		agree(what, yf, yu, r, m * k, c->dt);
	if (with_auto && run(c, SPYRE_KSTRAT_AUTO, &in, ya, &info) == 0) {
		check(what, ya, r, m * k, c->dt);
		TAP_CHECK(info.strategy == SPYRE_KSTRAT_FUSED, "%s: auto is %s", what, stn(info.strategy));
	}
	inputs_free(&in);
	free(yf);
	free(yu);
	free(ya);
}

/* Every edge value in each of m, k, n per dtype and activation (permutations of 0..9). */
static void edges(uint32_t act)
{
	for (uint32_t di = 0; di < 4; di++)
		for (uint32_t i = 0; i < 10; i++) {
			struct mcase c = {
				.dt = kh_dtypes[di], .cores = kh_cores[(i + di) % 3],
				.flags = act | ((i + di) & 1 ? SPYRE_KF_RELOC : 0),
				.m = kh_edge[i], .k = kh_edge[(3 * i + di + 1) % 10], .n = kh_edge[(7 * i + 2 * di + 5) % 10],
			};

			run_case(&c, i % 3 == 0);
		}
}

/*
 * The weights by spyre_kernel_pack_weight() from [out x in] and [in x out],
 * in fp32 and in the kernel's dtype (exact: the reference rounds the fp32
 * values once to it, as the helper does), every dtype, 1, 7, 32 cores, odd shapes.
 */
static void test_packed_weights(void)
{
	for (uint32_t di = 0; di < 4; di++)
		for (uint32_t i = 0; i < 4; i++) {
			struct mcase c = {
				.dt = kh_dtypes[di], .cores = kh_cores[(i + di) % 3],
				.flags = (i & 1 ? SPYRE_KF_GELU : 0) | ((i + di) & 2 ? SPYRE_KF_RELOC : 0),
				.m = kh_edge[(i + di) % 10], .k = kh_edge[(3 * i + di + 2) % 10],
				.n = kh_edge[(7 * i + 2 * di + 3) % 10],
			};

			packed.on = true;
			packed.layout = i & 2 ? SPYRE_KW_IN_OUT : SPYRE_KW_OUT_IN;
			packed.dt = (i + di) & 1 ? c.dt : SPYRE_DT_FP32;
			run_case(&c, i == 0);
			packed.on = false;
		}
}

static void test_swiglu(void) { edges(0); }
static void test_gelu(void) { edges(SPYRE_KF_GELU); }

/* Shapes tiled through small scratchpads: rounds, row and k tiles, several messages per chunk. */
static void test_tiled(void)
{
	static const struct mcase t[] = {
		{ SPYRE_DT_FP16, 1, 0, 32 << 10, 40, 300, 700 },
		{ SPYRE_DT_FP16, 3, SPYRE_KF_RELOC, 32 << 10, 40, 300, 700 },
		{ SPYRE_DT_BF16, 7, SPYRE_KF_GELU, 32 << 10, 65, 520, 900 },
		{ SPYRE_DT_FP32, 2, 0, 64 << 10, 33, 257, 513 },
		{ SPYRE_DT_DL16, 32, SPYRE_KF_RELOC, 64 << 10, 129, 1100, 2100 },
		{ SPYRE_DT_FP16, 4, 0, 64 << 10, 200, 2048, 128 },
		/* beyond a tile op's 65535 columns / k */
		{ SPYRE_DT_FP16, 1, 0, 0, 2, 70000, 64 },
		{ SPYRE_DT_BF16, 2, SPYRE_KF_GELU, 0, 2, 64, 70000 },
	};

	for (uint32_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		run_case(&t[i], false);
}

/* Rings of all the cores asked for (the generator uses fewer when that is as fast: small shapes). */
static void test_many_cores(void)
{
	static const struct mcase t[] = {
		{ SPYRE_DT_FP16, 32, 0, 0, 1, 2048, 2048 },
		{ SPYRE_DT_FP32, 32, SPYRE_KF_RELOC, 0, 1, 1024, 1024 },
		{ SPYRE_DT_FP16, 7, SPYRE_KF_RELOC, 0, 1, 1024, 448 },
		{ SPYRE_DT_DL16, 7, SPYRE_KF_GELU, 0, 3, 1024, 448 },
	};

	for (uint32_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		fused_cores = 0;
		run_case(&t[i], false);
		TAP_CHECK(fused_cores == t[i].cores, "mlp m%llu k%llu n%llu: the fused ring has %u cores, want %u",
			  (unsigned long long)t[i].m, (unsigned long long)t[i].k, (unsigned long long)t[i].n,
			  fused_cores, t[i].cores);
	}
}

static uint64_t est(uint64_t m, uint64_t k, uint64_t n, uint32_t strategy)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_MLP, .dtype = SPYRE_DT_FP16, .cores = 32,
				 .strategy = strategy, .m = m, .n = n, .k = k };
	struct spyre_kernel_info info = { .size = sizeof(info) };
	void *img;
	size_t sz;

	if (!TAP_CHECK(spyre_kernel_build(&d, &img, &sz, &info) == 0, "build mlp m%llu: %s", (unsigned long long)m,
		       spyre_last_error()))
		return 0;
	free(img);
	return info.est_ns;
}

/* Modeled time and engine utilization of both strategies; the estimates for Granite-8B's MLP. */
static void test_modeled(void)
{
	static const uint64_t ms[2] = { 1, 1024 };

	for (int i = 0; i < 2; i++) {
		uint64_t f = est(ms[i], 4096, 12800, SPYRE_KSTRAT_FUSED), u = est(ms[i], 4096, 12800, SPYRE_KSTRAT_UNFUSED);

		tap_diag("mlp swiglu fp16 m=%llu hidden=4096 ffn=12800 c32: est fused %llu ns, unfused %llu ns (%+.1f %%)",
			 (unsigned long long)ms[i], (unsigned long long)f, (unsigned long long)u,
			 u ? 100.0 * ((double)f - (double)u) / (double)u : 0.0);
	}
	{
		struct mcase c = { .dt = SPYRE_DT_FP16, .cores = 32, .m = 64, .k = 512, .n = 1408 };
		uint64_t m = c.m, k = c.k;
		float *yf = kh_alloc(4 * m * k), *yu = kh_alloc(4 * m * k);
		struct minputs in;
		struct spyre_kernel_info fi, ui;
		uint64_t fns = 0, uns = 0;
		double futil = 0, uutil = 0;

		inputs_make(&c, &in);
		if (run(&c, SPYRE_KSTRAT_FUSED, &in, yf, &fi) == 0) {
			fns = kh_last_device_ns;
			futil = kh_last_utilization;
			check("mlp swiglu fp16 m64 k512 n1408 c32 fused", yf, &in.r, m * k, c.dt);
		}
		if (run(&c, SPYRE_KSTRAT_UNFUSED, &in, yu, &ui) == 0) {
			uns = kh_last_device_ns;
			uutil = kh_last_utilization;
			check("mlp swiglu fp16 m64 k512 n1408 c32 unfused", yu, &in.r, m * k, c.dt);
		}
		tap_diag("mlp swiglu fp16 m=64 hidden=512 ffn=1408 c32: fused %llu ns (est %llu) on %u cores, utilization "
			 "%.1f %%; unfused %llu ns (est %llu) on %u cores, utilization %.1f %%", (unsigned long long)fns,
			 (unsigned long long)fi.est_ns, fi.cores, 100 * futil, (unsigned long long)uns,
			 (unsigned long long)ui.est_ns, ui.cores, 100 * uutil);
		TAP_CHECK(fns && uns && fns < uns, "fused (%llu ns) is faster than unfused (%llu ns)",
			  (unsigned long long)fns, (unsigned long long)uns);
		inputs_free(&in);
		free(yf);
		free(yu);
	}
}

static void test_errors(void)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_MLP, .dtype = SPYRE_DT_FP16, .m = 8, .n = 0,
				 .k = 8 };

	kh_expect_einval(&d, "must be non-zero");
	d.n = 64;
	d.flags = SPYRE_KF_BIAS;
	kh_expect_einval(&d, "do not apply to mlp");
	d.flags = 0;
	d.out_group = 32;
	kh_expect_einval(&d, "do not apply to mlp");
	d.out_group = 0;
	d.k = 200000;
	d.sp_bytes = 2048;
	d.strategy = SPYRE_KSTRAT_FUSED;
	kh_expect_einval(&d, "no tiling fits");
	d.strategy = SPYRE_KSTRAT_UNFUSED;
	kh_expect_einval(&d, "no tiling fits");
	d.strategy = SPYRE_KSTRAT_SPLIT_M;
	d.sp_bytes = 0;
	kh_expect_einval(&d, "strategy");
}

static const struct tap_case cases[] = {
	{ "swiglu", test_swiglu },
	{ "gelu", test_gelu },
	{ "tiled", test_tiled },
	{ "many_cores", test_many_cores },
	{ "modeled", test_modeled },
	{ "errors", test_errors },
	{ "packed_weights", test_packed_weights },
};

int main(int argc, char **argv)
{
	return KH_MAIN(cases, argc, argv);
}
