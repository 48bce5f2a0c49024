// SPDX-License-Identifier: MIT
/*
 * Description: the kernel library's ops of 0.5 on the engine against a CPU
 * reference in double (from the kh_round()ed inputs): BINARY (every fn,
 * no / row / column broadcasting, REVERSE, alpha), UNARY (every fn), WHERE
 * (tensors and +-inf / NaN scalars), REDUCE (sum, mean, max; rows wider than
 * the scratchpad), SOFTMAX with SPYRE_KF_LOG (both strategies, the online
 * form, -inf masks), TRIL / TRIU, PERMUTE (its three plans) and CAT (whole
 * sticks and not), every dtype, 1, 7 and 32 cores, shapes that do not fill
 * a stick and m not a multiple of the core count, both addressing forms;
 * NaN semantics (max / min propagate it, where never takes it from the side
 * not selected); and the descriptor errors, each naming its field.
 *
 * Tolerances: |got - want| <= rtol |want| + atol. Exact ops (max, min,
 * abs, where, tril, permute, cat): 0. One rounding of the output
 * (add, sub, mul, div, scale): kh_tol(dt) + 2^-22. Transcendentals (exp, log,
 * tanh, sigmoid, sqrt, rsqrt, recip, gelu_tanh, pow): 4 kh_tol(dt) + 2^-20,
 * atol 1e-5 (fp16 / bf16 outputs near 0). Sums: the fp32 sum of n terms,
 * kh_tol(dt) + n 2^-24 relative to the sum of |x| (atol). log_softmax: the
 * softmax test's bound on the sum, relative to max(|y|, log n).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define NM 4
#define NN 3
static const uint32_t ms[NM] = { 1, 9, 65, 129 };
static const uint32_t ns[NN] = { 1, 63, 129 };

static const char *fname(uint32_t fn)
{
	static const char *const n[] = {
		[SPYRE_KFN_ADD] = "add", [SPYRE_KFN_SUB] = "sub", [SPYRE_KFN_MUL] = "mul", [SPYRE_KFN_DIV] = "div",
		[SPYRE_KFN_MAX] = "max", [SPYRE_KFN_MIN] = "min", [SPYRE_KFN_EXP] = "exp", [SPYRE_KFN_LOG] = "log",
		[SPYRE_KFN_TANH] = "tanh", [SPYRE_KFN_SIGMOID] = "sigmoid", [SPYRE_KFN_RSQRT] = "rsqrt",
		[SPYRE_KFN_SQRT] = "sqrt", [SPYRE_KFN_RECIP] = "recip", [SPYRE_KFN_ABS] = "abs",
		[SPYRE_KFN_GELU_TANH] = "gelu_tanh", [SPYRE_KFN_SCALE] = "scale", [SPYRE_KFN_POW] = "pow",
		[SPYRE_KFN_SUM] = "sum", [SPYRE_KFN_MEAN] = "mean", [SPYRE_KFN_RMAX] = "max",
	};

	return fn < sizeof(n) / sizeof(n[0]) && n[fn] ? n[fn] : "?";
}

/* NaN where want is NaN, else within rtol / atol: kh_close with NaN positions compared too */
static bool close_nan(const char *what, const float *got, const float *want, uint64_t n, double rtol, double atol)
{
	uint64_t bad = 0, worst = 0;

	for (uint64_t i = 0; i < n; i++) {
		bool ok;

		if (isnan(want[i]))
			ok = isnan(got[i]);
		else if (isinf(want[i]))
			ok = got[i] == want[i];
		else
			ok = fabs((double)got[i] - want[i]) <= rtol * fabs((double)want[i]) + atol;
		if (!ok && !bad++)
			worst = i;
	}
	TAP_CHECK(!bad, "%s: %llu of %llu elements off, first [%llu] got %.8g want %.8g (rtol %.3g atol %.3g)", what,
		  (unsigned long long)bad, (unsigned long long)n, (unsigned long long)worst, n ? got[worst] : 0.0,
		  n ? want[worst] : 0.0, rtol, atol);
	return !bad;
}

/* ---- BINARY -------------------------------------------------------------------- */

static double bin_ref(uint32_t fn, double x, double y)
{
	switch (fn) {
	case SPYRE_KFN_ADD:
		return x + y;
	case SPYRE_KFN_SUB:
		return x - y;
	case SPYRE_KFN_MUL:
		return x * y;
	case SPYRE_KFN_DIV:
		return x / y;
	case SPYRE_KFN_MAX:
		return isnan(x) || isnan(y) ? NAN : fmax(x, y);
	default:
		return isnan(x) || isnan(y) ? NAN : fmin(x, y);
	}
}

/* A [m x n] fn B (broadcast by flags) with alpha; REVERSE: B fn alpha A */
static void run_binary(uint32_t fn, uint32_t dt, uint32_t cores, uint32_t m, uint32_t n, uint32_t flags, float alpha,
		       bool nans)
{
	bool row = flags & SPYRE_KF_BCAST_ROW, col = flags & SPYRE_KF_BCAST_COL, rev = flags & SPYRE_KF_REVERSE;
	uint64_t br = row || col ? 1 : m, bc = row ? n : col ? m : n;
	float *a = kh_alloc(4ull * m * n), *b = kh_alloc(4ull * br * bc), *y = kh_alloc(4ull * m * n);
	float *r = kh_alloc(4ull * m * n);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_BINARY, .dtype = dt, .cores = cores, .m = m,
				 .n = n, .fn = fn, .flags = flags, .alpha = alpha };
	struct kh_slot s[] = { KH_IN(a, m, n), KH_IN(b, br, bc), KH_OUT(y, m, n) };
	double al = alpha == 0 ? 1 : alpha;

	kh_fill(a, (uint64_t)m * n, -3, 3);
	kh_fill(b, br * bc, -3, 3);
	if (fn == SPYRE_KFN_DIV)	/* divisors away from 0: the relative error stays that of one rounding */
		for (uint64_t i = 0; i < (rev ? (uint64_t)m * n : br * bc); i++) {
			float *v = rev ? a : b;

			v[i] = v[i] < 0 ? v[i] - 0.5f : v[i] + 0.5f;
		}
	if (nans) {
		a[0] = NAN;
		if (br * bc > 2)
			b[br * bc - 1] = NAN;
	}
	for (uint64_t i = 0; i < m; i++)
		for (uint64_t j = 0; j < n; j++) {
			double x = kh_round(a[i * n + j], dt);
			double z = kh_round(b[row ? j : col ? i : i * n + j], dt);

			if (fn == SPYRE_KFN_ADD || fn == SPYRE_KFN_SUB) {
				/* fp32 inside: alpha times the second operand rounded to fp32 first */
				if (rev)
					x = (float)(al * x);
				else
					z = (float)(al * z);
			}
			r[i * n + j] = (float)(rev ? bin_ref(fn, z, x) : bin_ref(fn, x, z));
		}
	if (kh_run(&d, s, 3, NULL, 0, NULL) == 0) {
		char what[128];

		snprintf(what, sizeof(what), "binary %s %s %ux%u c%u%s%s%s alpha %g%s", fname(fn), spyre_dtype_name(dt),
			 m, n, cores, row ? " bcast-row" : "", col ? " bcast-col" : "", rev ? " reverse" : "",
			 (double)alpha, nans ? " NaN" : "");
		close_nan(what, y, r, (uint64_t)m * n, fn >= SPYRE_KFN_MAX ? 0 : kh_tol(dt) + 1.0 / (1 << 22),
			  fn >= SPYRE_KFN_MAX ? 0 : 1e-6);
	}
	free(a);
	free(b);
	free(y);
	free(r);
}

static void test_binary(void)
{
	static const uint32_t fl[] = { 0, SPYRE_KF_BCAST_ROW, SPYRE_KF_BCAST_COL, SPYRE_KF_REVERSE,
				       SPYRE_KF_BCAST_ROW | SPYRE_KF_REVERSE, SPYRE_KF_BCAST_COL | SPYRE_KF_REVERSE };
	unsigned i = 0;

	for (uint32_t fn = SPYRE_KFN_ADD; fn <= SPYRE_KFN_MIN; fn++)
		for (unsigned di = 0; di < 4; di++)
			for (unsigned f = 0; f < sizeof(fl) / sizeof(fl[0]); f++)
				for (unsigned mi = 0; mi < NM; mi++)
					for (unsigned ni = 0; ni < NN; ni++, i++)
						run_binary(fn, kh_dtypes[di], kh_cores[i % 3], ms[mi], ns[ni],
							   fl[f] | ((i & 4) ? SPYRE_KF_RELOC : 0), 0, false);
}

static void test_binary_alpha(void)
{
	static const uint32_t fl[] = { 0, SPYRE_KF_BCAST_ROW, SPYRE_KF_BCAST_COL, SPYRE_KF_REVERSE,
				       SPYRE_KF_BCAST_ROW | SPYRE_KF_REVERSE, SPYRE_KF_BCAST_COL | SPYRE_KF_REVERSE };

	for (uint32_t fn = SPYRE_KFN_ADD; fn <= SPYRE_KFN_SUB; fn++)
		for (unsigned di = 0; di < 4; di++)
			for (unsigned f = 0; f < sizeof(fl) / sizeof(fl[0]); f++)
				run_binary(fn, kh_dtypes[di], 7, 65, 129, fl[f], -0.75f, false);
}

/* NaN in either operand gives NaN for every fn (torch.maximum / minimum propagate it) */
static void test_binary_nan(void)
{
	for (uint32_t fn = SPYRE_KFN_ADD; fn <= SPYRE_KFN_MIN; fn++)
		for (unsigned di = 0; di < 3; di++) {
			run_binary(fn, kh_dtypes[di], 7, 9, 63, 0, 0, true);
			run_binary(fn, kh_dtypes[di], 7, 9, 63, SPYRE_KF_BCAST_ROW, 0, true);
		}
}

/* wide rows (column tiles) and a broadcast column over rows split in whole sticks of it */
static void test_binary_wide(void)
{
	struct { uint32_t m, n, flags; } c[] = {
		{ 3, 70000, 0 }, { 3, 70000, SPYRE_KF_BCAST_ROW }, { 300, 1000, SPYRE_KF_BCAST_COL },
		{ 2000, 5, SPYRE_KF_BCAST_COL | SPYRE_KF_REVERSE },
	};

	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint32_t m = c[i].m, n = c[i].n;
		bool row = c[i].flags & SPYRE_KF_BCAST_ROW, col = c[i].flags & SPYRE_KF_BCAST_COL;
		uint64_t br = row || col ? 1 : m, bc = row ? n : col ? m : n;
		float *a = kh_alloc(4ull * m * n), *b = kh_alloc(4ull * br * bc), *y = kh_alloc(4ull * m * n);
		float *r = kh_alloc(4ull * m * n);
		struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_BINARY, .dtype = SPYRE_DT_FP16,
					 .cores = 5, .m = m, .n = n, .fn = SPYRE_KFN_SUB, .flags = c[i].flags,
					 .sp_bytes = 64 << 10 };
		struct kh_slot s[] = { KH_IN(a, m, n), KH_IN(b, br, bc), KH_OUT(y, m, n) };

		kh_fill(a, (uint64_t)m * n, -2, 2);
		kh_fill(b, br * bc, -2, 2);
		for (uint64_t p = 0; p < m; p++)
			for (uint64_t j = 0; j < n; j++) {
				double x = kh_round(a[p * n + j], SPYRE_DT_FP16);
				double z = kh_round(b[row ? j : col ? p : p * n + j], SPYRE_DT_FP16);

				r[p * n + j] = (float)((c[i].flags & SPYRE_KF_REVERSE) ? z - x : x - z);
			}
		if (kh_run(&d, s, 3, NULL, 0, NULL) == 0) {
			char what[96];

			snprintf(what, sizeof(what), "binary sub fp16 %ux%u flags 0x%x in 64 KiB", m, n, c[i].flags);
			kh_close(what, y, r, (uint64_t)m * n, kh_tol(SPYRE_DT_FP16), 0);
		}
		free(a);
		free(b);
		free(y);
		free(r);
	}
}

/* ---- UNARY --------------------------------------------------------------------- */

static double un_ref(uint32_t fn, double x, double alpha, double beta)
{
	switch (fn) {
	case SPYRE_KFN_EXP:
		return exp(x);
	case SPYRE_KFN_LOG:
		return log(x);
	case SPYRE_KFN_TANH:
		return tanh(x);
	case SPYRE_KFN_SIGMOID:
		return 1 / (1 + exp(-x));
	case SPYRE_KFN_RSQRT:
		return 1 / sqrt(x);
	case SPYRE_KFN_SQRT:
		return sqrt(x);
	case SPYRE_KFN_RECIP:
		return 1 / x;
	case SPYRE_KFN_ABS:
		return fabs(x);
	case SPYRE_KFN_GELU_TANH:
		return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
	case SPYRE_KFN_SCALE:
		return alpha * x + beta;
	default:
		return pow(x, alpha);
	}
}

static void run_unary(uint32_t fn, uint32_t dt, uint32_t cores, uint32_t m, uint32_t n, uint32_t flags, float alpha,
		      float beta, float lo, float hi)
{
	float *x = kh_alloc(4ull * m * n), *y = kh_alloc(4ull * m * n), *r = kh_alloc(4ull * m * n);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_UNARY, .dtype = dt, .cores = cores, .m = m,
				 .n = n, .fn = fn, .flags = flags, .alpha = alpha, .beta = beta };
	struct kh_slot s[] = { KH_IN(x, m, n), KH_OUT(y, m, n) };
	bool exact = fn == SPYRE_KFN_ABS, one = fn == SPYRE_KFN_SCALE;

	kh_fill(x, (uint64_t)m * n, lo, hi);
	for (uint64_t i = 0; i < (uint64_t)m * n; i++)
		r[i] = (float)un_ref(fn, kh_round(x[i], dt), alpha, beta);
	if (kh_run(&d, s, 2, NULL, 0, NULL) == 0) {
		char what[128];

		snprintf(what, sizeof(what), "unary %s %s %ux%u c%u alpha %g beta %g", fname(fn), spyre_dtype_name(dt),
			 m, n, cores, (double)alpha, (double)beta);
		close_nan(what, y, r, (uint64_t)m * n,
			  exact ? 0 : one ? kh_tol(dt) + 1.0 / (1 << 22) : 4 * kh_tol(dt) + 1.0 / (1 << 20),
			  exact ? 0 : 1e-5);
	}
	free(x);
	free(y);
	free(r);
}

static void test_unary(void)
{
	static const struct { uint32_t fn; float alpha, beta, lo, hi; } f[] = {
		{ SPYRE_KFN_EXP, 0, 0, -4, 4 },	{ SPYRE_KFN_LOG, 0, 0, 0.01f, 8 },
		{ SPYRE_KFN_TANH, 0, 0, -4, 4 }, { SPYRE_KFN_SIGMOID, 0, 0, -6, 6 },
		{ SPYRE_KFN_RSQRT, 0, 0, 0.01f, 8 }, { SPYRE_KFN_SQRT, 0, 0, 0, 8 },
		{ SPYRE_KFN_RECIP, 0, 0, 0.1f, 8 }, { SPYRE_KFN_ABS, 0, 0, -4, 4 },
		{ SPYRE_KFN_GELU_TANH, 0, 0, -5, 5 }, { SPYRE_KFN_SCALE, 1.5f, -0.25f, -4, 4 },
		{ SPYRE_KFN_SCALE, 0.125f, 0, -4, 4 }, { SPYRE_KFN_POW, 2, 0, -3, 3 },
		{ SPYRE_KFN_POW, 0.5f, 0, 0, 4 }, { SPYRE_KFN_POW, 3, 0, -2, 2 }, { SPYRE_KFN_POW, -1, 0, 0.5f, 3 },
	};
	unsigned i = 0;

	for (unsigned k = 0; k < sizeof(f) / sizeof(f[0]); k++)
		for (unsigned di = 0; di < 4; di++)
			for (unsigned mi = 0; mi < NM; mi++)
				for (unsigned ni = 0; ni < NN; ni++, i++)
					run_unary(f[k].fn, kh_dtypes[di], kh_cores[i % 3], ms[mi], ns[ni],
						  (i & 2) ? SPYRE_KF_RELOC : 0, f[k].alpha, f[k].beta, f[k].lo, f[k].hi);
}

/* the IEEE specials of the functions as PyTorch gives them */
static void test_unary_specials(void)
{
	static const struct { uint32_t fn; float alpha, x, want; } c[] = {
		{ SPYRE_KFN_LOG, 0, 0, -INFINITY }, { SPYRE_KFN_LOG, 0, -1, NAN },
		{ SPYRE_KFN_RSQRT, 0, 0, INFINITY }, { SPYRE_KFN_SQRT, 0, -1, NAN },
		{ SPYRE_KFN_RECIP, 0, 0, INFINITY }, { SPYRE_KFN_EXP, 0, -INFINITY, 0 },
		{ SPYRE_KFN_EXP, 0, NAN, NAN }, { SPYRE_KFN_TANH, 0, INFINITY, 1 },
		{ SPYRE_KFN_SIGMOID, 0, -INFINITY, 0 }, { SPYRE_KFN_ABS, 0, -INFINITY, INFINITY },
		{ SPYRE_KFN_POW, 0.5f, -1, NAN }, { SPYRE_KFN_POW, 2, -INFINITY, INFINITY },
	};

	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		for (unsigned di = 0; di < 3; di++) {
			uint32_t dt = kh_dtypes[di];
			float x[3] = { c[i].x, 1, c[i].x }, y[3], r[3];
			struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_UNARY, .dtype = dt, .cores = 2,
						 .m = 3, .n = 1, .fn = c[i].fn, .alpha = c[i].alpha };
			struct kh_slot s[] = { KH_IN(x, 3, 1), KH_OUT(y, 3, 1) };

			r[0] = r[2] = c[i].want;
			r[1] = kh_round((float)un_ref(c[i].fn, 1, c[i].alpha, 0), dt);
			if (kh_run(&d, s, 2, NULL, 0, NULL) == 0) {
				char what[96];

				snprintf(what, sizeof(what), "unary %s %s of %g", fname(c[i].fn), spyre_dtype_name(dt),
					 (double)c[i].x);
				close_nan(what, y, r, 3, 4 * kh_tol(dt), 0);
			}
		}
}

/* ---- REDUCE -------------------------------------------------------------------- */

static void run_reduce(uint32_t fn, uint32_t dt, uint32_t cores, uint32_t m, uint32_t n, uint32_t flags,
		       uint32_t sp_bytes, bool nans)
{
	float *x = kh_alloc(4ull * m * n), *y = kh_alloc(4ull * m), *r = kh_alloc(4ull * m);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_REDUCE, .dtype = dt, .cores = cores, .m = m,
				 .n = n, .fn = fn, .flags = flags, .sp_bytes = sp_bytes };
	struct kh_slot s[] = { KH_IN(x, m, n), KH_OUT(y, 1, m) };
	double atol = 0;

	kh_fill(x, (uint64_t)m * n, -2, 3);
	if (nans && m > 1)
		x[(uint64_t)n * (m / 2) + n / 2] = NAN;
	if (nans)
		x[0] = -INFINITY;
	for (uint64_t i = 0; i < m; i++) {
		double sm = 0, sa = 0, mx = -INFINITY;
		bool nan = false;

		for (uint64_t j = 0; j < n; j++) {
			double v = kh_round(x[i * n + j], dt);

			nan |= isnan(v);
			sm += v;
			sa += fabs(v);
			mx = fmax(mx, v);
		}
		r[i] = nan ? NAN : (float)(fn == SPYRE_KFN_SUM ? sm : fn == SPYRE_KFN_MEAN ? sm / n : mx);
		if (fn != SPYRE_KFN_RMAX)
			atol = fmax(atol, (fn == SPYRE_KFN_MEAN ? sa / n : sa) * (n + 2) / 16777216.0);
	}
	if (kh_run(&d, s, 2, NULL, 0, NULL) == 0) {
		char what[128];

		snprintf(what, sizeof(what), "reduce %s %s %ux%u c%u sp %u%s", fname(fn), spyre_dtype_name(dt), m, n,
			 cores, sp_bytes, nans ? " NaN/-inf" : "");
		close_nan(what, y, r, m, fn == SPYRE_KFN_RMAX ? 0 : kh_tol(dt), atol);
	}
	free(x);
	free(y);
	free(r);
}

static void test_reduce(void)
{
	unsigned i = 0;

	for (uint32_t fn = SPYRE_KFN_SUM; fn <= SPYRE_KFN_RMAX; fn++)
		for (unsigned di = 0; di < 4; di++) {
			for (unsigned mi = 0; mi < NM; mi++)
				for (unsigned ni = 0; ni < NN; ni++, i++)
					run_reduce(fn, kh_dtypes[di], kh_cores[i % 3], ms[mi], ns[ni],
						   (i & 1) ? SPYRE_KF_RELOC : 0, 0, false);
			run_reduce(fn, kh_dtypes[di], 7, 1000, 33, 0, 0, false);	/* rows in sticks of Y, 7 cores */
			run_reduce(fn, kh_dtypes[di], 3, 5, 70000, 0, 64 << 10, false);	/* column tiles */
			run_reduce(fn, kh_dtypes[di], 7, 9, 63, 0, 0, true);
		}
}

/* ---- log_softmax --------------------------------------------------------------- */

static void run_log_softmax(uint32_t strat, uint32_t dt, uint32_t cores, uint32_t m, uint32_t n, uint32_t sp_bytes,
			    bool masked)
{
	float *x = kh_alloc(4ull * m * n), *y = kh_alloc(4ull * m * n), *r = kh_alloc(4ull * m * n);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_SOFTMAX, .dtype = dt, .cores = cores, .m = m,
				 .n = n, .strategy = strat, .flags = SPYRE_KF_LOG, .sp_bytes = sp_bytes };
	struct kh_slot s1[] = { KH_IN(x, m, n), KH_OUT(y, m, n) }, s2[] = { KH_IN(x, m, n), KH_OUT(y, m, n), KH_WORK() };
	double rtol = kh_tol(dt) + (4 * sqrt((double)n) + 16) / 16777216.0;

	kh_fill(x, (uint64_t)m * n, -8, 8);
	if (masked)	/* a causal mask: -inf right of the diagonal */
		for (uint64_t i = 0; i < m; i++)
			for (uint64_t j = i % n + 1; j < n; j++)
				x[i * n + j] = -INFINITY;
	for (uint64_t i = 0; i < m; i++) {
		double mx = -INFINITY, sum = 0;

		for (uint64_t j = 0; j < n; j++)
			mx = fmax(mx, kh_round(x[i * n + j], dt));
		for (uint64_t j = 0; j < n; j++)
			sum += exp(kh_round(x[i * n + j], dt) - mx);
		for (uint64_t j = 0; j < n; j++)
			r[i * n + j] = (float)(kh_round(x[i * n + j], dt) - mx - log(sum));
	}
	if (kh_run(&d, strat == SPYRE_KSTRAT_NAIVE ? s2 : s1, strat == SPYRE_KSTRAT_NAIVE ? 3 : 2, NULL, 0, NULL) == 0) {
		char what[128];

		snprintf(what, sizeof(what), "log_softmax %s %s %ux%u c%u sp %u%s",
			 strat == SPYRE_KSTRAT_NAIVE ? "naive" : "scratchpad", spyre_dtype_name(dt), m, n, cores, sp_bytes,
			 masked ? " masked" : "");
		/* |y| ~ 8 + log n at most: the errors of x - max and log sum are absolute */
		close_nan(what, y, r, (uint64_t)m * n, rtol, rtol * (16 + log((double)n)));
	}
	free(x);
	free(y);
	free(r);
}

static void test_log_softmax(void)
{
	unsigned i = 0;

	for (unsigned st = 0; st < 2; st++) {
		uint32_t strat = st ? SPYRE_KSTRAT_NAIVE : SPYRE_KSTRAT_SCRATCHPAD;

		for (unsigned di = 0; di < 4; di++) {
			for (unsigned mi = 0; mi < NM; mi++)
				for (unsigned ni = 0; ni < NN; ni++, i++)
					run_log_softmax(strat, kh_dtypes[di], kh_cores[i % 3], ms[mi], ns[ni], 0, i & 1);
			run_log_softmax(strat, kh_dtypes[di], 3, 5, 70000, 64 << 10, false);	/* online / tiled */
			run_log_softmax(strat, kh_dtypes[di], 3, 9, 3000, 4096, true);
		}
	}
}

/* ---- WHERE --------------------------------------------------------------------- */

static void run_where(uint32_t dt, uint32_t cores, uint32_t m, uint32_t n, uint32_t flags, float alpha, float beta)
{
	bool sa = flags & SPYRE_KF_SCALAR_A, sb = flags & SPYRE_KF_SCALAR_B;
	float *c = kh_alloc(4ull * m * n), *a = kh_alloc(4ull * m * n), *b = kh_alloc(4ull * m * n);
	float *y = kh_alloc(4ull * m * n), *r = kh_alloc(4ull * m * n);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_WHERE, .dtype = dt, .cores = cores, .m = m, .n = n,
				 .flags = flags, .alpha = alpha, .beta = beta };
	struct kh_slot s[4] = { KH_IN_DT(c, m, n, SPYRE_DT_INT8) };
	uint32_t ns_ = 1;

	kh_fill(c, (uint64_t)m * n, -1, 1);
	kh_fill(a, (uint64_t)m * n, -3, 3);
	kh_fill(b, (uint64_t)m * n, -3, 3);
	for (uint64_t i = 0; i < (uint64_t)m * n; i++) {
		/* masks of 0 and of non-zero values other than 1 (any byte is true); NaN and inf on both sides */
		c[i] = c[i] < 0 ? 0 : c[i] < 0.5f ? 1 : -7;
		if (i % 5 == 1)
			a[i] = NAN;
		if (i % 7 == 2)
			b[i] = -INFINITY;
		r[i] = c[i] != 0 ? (sa ? kh_round(alpha, dt) : kh_round(a[i], dt)) : (sb ? kh_round(beta, dt) : kh_round(b[i], dt));
	}
	if (!sa)
		s[ns_++] = (struct kh_slot)KH_IN(a, m, n);
	if (!sb)
		s[ns_++] = (struct kh_slot)KH_IN(b, m, n);
	s[ns_++] = (struct kh_slot)KH_OUT(y, m, n);
	if (kh_run(&d, s, ns_, NULL, 0, NULL) == 0) {
		char what[128];

		snprintf(what, sizeof(what), "where %s %ux%u c%u%s%s alpha %g beta %g", spyre_dtype_name(dt), m, n, cores,
			 sa ? " scalar-a" : "", sb ? " scalar-b" : "", (double)alpha, (double)beta);
		close_nan(what, y, r, (uint64_t)m * n, 0, 0);
	}
	free(c);
	free(a);
	free(b);
	free(y);
	free(r);
}

static void test_where(void)
{
	static const struct { uint32_t flags; float alpha, beta; } v[] = {
		{ 0, 0, 0 }, { SPYRE_KF_SCALAR_A, -INFINITY, 0 }, { SPYRE_KF_SCALAR_B, 0, INFINITY },
		{ SPYRE_KF_SCALAR_A | SPYRE_KF_SCALAR_B, 2.5f, -INFINITY }, { SPYRE_KF_SCALAR_A, -1e4f, 0 },
		{ SPYRE_KF_SCALAR_B, 0, NAN },
	};
	unsigned i = 0;

	for (unsigned k = 0; k < sizeof(v) / sizeof(v[0]); k++)
		for (unsigned di = 0; di < 4; di++)
			for (unsigned mi = 0; mi < NM; mi++)
				for (unsigned ni = 0; ni < NN; ni++, i++)
					run_where(kh_dtypes[di], kh_cores[i % 3], ms[mi], ns[ni],
						  v[k].flags | ((i & 2) ? SPYRE_KF_RELOC : 0), v[k].alpha, v[k].beta);
}

/* ---- TRIL ---------------------------------------------------------------------- */

static void run_tril(uint32_t fn, uint32_t dt, uint32_t cores, uint32_t m, uint32_t n, uint32_t k, float diag,
		     uint32_t sp_bytes)
{
	float *x = kh_alloc(4ull * m * n), *y = kh_alloc(4ull * m * n), *r = kh_alloc(4ull * m * n);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_TRIL, .dtype = dt, .cores = cores, .m = m, .n = n,
				 .k = k, .fn = fn, .alpha = diag, .sp_bytes = sp_bytes };
	struct kh_slot s[] = { KH_IN(x, m, n), KH_OUT(y, m, n) };

	kh_fill(x, (uint64_t)m * n, -3, 3);
	x[0] = NAN;	/* a masked-out NaN is 0 too, a kept one NaN */
	for (uint64_t i = 0; i < m; i++)
		for (uint64_t j = 0; j < n; j++) {
			int64_t dc = (int64_t)j - (int64_t)(i % k);
			bool keep = fn == SPYRE_KFN_TRIU ? dc >= (int64_t)diag : dc <= (int64_t)diag;

			r[i * n + j] = keep ? kh_round(x[i * n + j], dt) : 0;
		}
	if (kh_run(&d, s, 2, NULL, 0, NULL) == 0) {
		char what[128];

		snprintf(what, sizeof(what), "%s %s %ux%u k %u diag %g c%u", fn == SPYRE_KFN_TRIU ? "triu" : "tril",
			 spyre_dtype_name(dt), m, n, k, (double)diag, cores);
		close_nan(what, y, r, (uint64_t)m * n, 0, 0);
	}
	free(x);
	free(y);
	free(r);
}

static void test_tril(void)
{
	static const float diags[] = { 0, 1, -1, 3 };
	static const uint32_t fns[] = { 0, SPYRE_KFN_TRIL, SPYRE_KFN_TRIU };
	unsigned i = 0;

	for (unsigned f = 0; f < 3; f++)
		for (unsigned di = 0; di < 4; di++)
			for (unsigned g = 0; g < 4; g++, i++) {
				run_tril(fns[f], kh_dtypes[di], kh_cores[i % 3], 65, 63, 65, diags[g], 0);
				run_tril(fns[f], kh_dtypes[di], kh_cores[(i + 1) % 3], 129, 9, 3, diags[g], 0);
				run_tril(fns[f], kh_dtypes[di], 7, 9, 129, 9, diags[g], 0);
				run_tril(fns[f], kh_dtypes[di], 32, 1, 1, 1, diags[g], 0);
			}
	/* column tiles (the diagonal shifted per tile) and matrices of more than 65535 rows */
	run_tril(SPYRE_KFN_TRIL, SPYRE_DT_FP16, 3, 6, 70000, 3, 65600, 64 << 10);
	run_tril(SPYRE_KFN_TRIU, SPYRE_DT_FP32, 2, 140000, 1, 70000, -69990, 0);
}

/* ---- PERMUTE ------------------------------------------------------------------- */

static void run_permute(uint32_t dt, uint32_t cores, uint32_t batch, uint32_t m, uint32_t n, uint32_t k,
			uint32_t sp_bytes)
{
	uint64_t tot = (uint64_t)batch * m * n * k;
	float *x = kh_alloc(4 * tot), *y = kh_alloc(4 * tot), *r = kh_alloc(4 * tot);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_PERMUTE, .dtype = dt, .cores = cores, .batch = batch,
				 .m = m, .n = n, .k = k, .sp_bytes = sp_bytes };
	struct kh_slot s[] = { KH_IN(x, 1, tot), KH_OUT(y, 1, tot) };

	kh_fill(x, tot, -3, 3);
	for (uint64_t b = 0; b < batch; b++)
		for (uint64_t i = 0; i < m; i++)
			for (uint64_t j = 0; j < n; j++)
				for (uint64_t e = 0; e < k; e++)
					r[((b * n + j) * m + i) * k + e] = kh_round(x[((b * m + i) * n + j) * k + e], dt);
	if (kh_run(&d, s, 2, NULL, 0, NULL) == 0) {
		char what[128];

		snprintf(what, sizeof(what), "permute %s %ux%ux%ux%u c%u sp %u", spyre_dtype_name(dt), batch, m, n, k,
			 cores, sp_bytes);
		close_nan(what, y, r, tot, 0, 0);
	}
	free(x);
	free(y);
	free(r);
}

static void test_permute(void)
{
	static const struct { uint32_t batch, m, n, k16, sp; } c[] = {
		/* rows of whole sticks: k * 2 bytes (fp16/bf16) a multiple of 128 */
		{ 2, 5, 3, 64, 0 }, { 1, 7, 9, 128, 0 }, { 3, 33, 4, 64, 4096 }, { 2, 3, 40, 64, 4096 },
		/* k 1, m and n whole sticks: tiles */
		{ 2, 64, 128, 1, 0 }, { 1, 192, 320, 1, 0 }, { 3, 128, 64, 1, 16384 },
		/* k 1 dense */
		{ 3, 7, 5, 1, 0 }, { 1, 1, 9, 1, 0 }, { 5, 9, 1, 1, 0 }, { 17, 13, 11, 1, 0 }, { 40, 3, 5, 1, 4096 },
		{ 2, 100, 33, 1, 0 },
		/* k 1 with m 1: a copy (whole sticks: by DMA rows) */
		{ 2, 1, 64, 1, 0 }, { 3, 128, 1, 1, 0 },
	};
	unsigned i = 0;

	for (unsigned k = 0; k < sizeof(c) / sizeof(c[0]); k++)
		for (unsigned di = 0; di < 4; di++, i++) {
			uint32_t dt = kh_dtypes[di], kk = c[k].k16;

			if (kk != 1 && dt == SPYRE_DT_FP32)
				kk /= 2;	/* the same bytes per row */
			run_permute(dt, kh_cores[i % 3], c[k].batch, c[k].m, c[k].n, kk, c[k].sp);
		}
}

/* ---- CAT ----------------------------------------------------------------------- */

static void run_cat(uint32_t dt, uint32_t cores, uint32_t m, uint32_t n, uint32_t k, uint32_t flags)
{
	float *x[8], *y = kh_alloc(4ull * m * n * k), *r = kh_alloc(4ull * m * n * k);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_CAT, .dtype = dt, .cores = cores, .m = m, .n = n,
				 .k = k, .flags = flags };
	struct kh_slot s[9];

	for (uint32_t p = 0; p < k; p++) {
		x[p] = kh_alloc(4ull * m * n);
		kh_fill(x[p], (uint64_t)m * n, -3, 3);
		s[p] = (struct kh_slot)KH_IN(x[p], m, n);
		for (uint64_t i = 0; i < m; i++)
			for (uint64_t j = 0; j < n; j++)
				r[i * n * k + p * n + j] = kh_round(x[p][i * n + j], dt);
	}
	s[k] = (struct kh_slot)KH_OUT(y, m, (uint64_t)n * k);
	if (kh_run(&d, s, k + 1, NULL, 0, NULL) == 0) {
		char what[96];

		snprintf(what, sizeof(what), "cat %s %u x [%ux%u] c%u", spyre_dtype_name(dt), k, m, n, cores);
		close_nan(what, y, r, (uint64_t)m * n * k, 0, 0);
	}
	for (uint32_t p = 0; p < k; p++)
		free(x[p]);
	free(y);
	free(r);
}

static void test_cat(void)
{
	unsigned i = 0;

	for (unsigned di = 0; di < 4; di++)
		for (uint32_t k = 2; k <= 8; k += 3)
			for (unsigned mi = 0; mi < NM; mi++)
				for (unsigned ni = 0; ni < NN; ni++, i++)
					run_cat(kh_dtypes[di], kh_cores[i % 3], ms[mi], ns[ni], k, (i & 2) ? SPYRE_KF_RELOC : 0);
	for (unsigned di = 0; di < 4; di++) {
		run_cat(kh_dtypes[di], 7, 65, 64, 2, 0);	/* whole sticks (fp16: 128 bytes) */
		run_cat(kh_dtypes[di], 5, 300, 32, 2, 0);	/* rotate_half of head_dim 64 */
		run_cat(kh_dtypes[di], 3, 9, 128, 8, 0);
	}
}

/* ---- descriptors ---------------------------------------------------------------- */

static void test_bad_descriptors(void)
{
	struct spyre_kdesc b = { .size = sizeof(b), .op = SPYRE_KOP_BINARY, .dtype = SPYRE_DT_FP16, .m = 4, .n = 8 };
	struct spyre_kdesc d;

	d = b, d.fn = 6;
	kh_expect_einval(&d, "fn 6 is not a function of binary");
	d = b, d.fn = SPYRE_KFN_EXP;
	kh_expect_einval(&d, "fn 16 is not a function of binary");
	d = b, d.op = SPYRE_KOP_UNARY, d.fn = SPYRE_KFN_ADD;
	kh_expect_einval(&d, "fn 0 is not a function of unary");
	d = b, d.op = SPYRE_KOP_REDUCE, d.fn = SPYRE_KFN_TRIL;
	kh_expect_einval(&d, "fn 48 is not a function of reduce");
	d = b, d.op = SPYRE_KOP_TRIL, d.fn = SPYRE_KFN_SUM, d.k = 4;
	kh_expect_einval(&d, "fn 32 is not a function of tril");
	d = b, d.op = SPYRE_KOP_ADD, d.fn = SPYRE_KFN_MUL;
	kh_expect_einval(&d, "fn must be 0");
	d = b, d.op = SPYRE_KOP_SOFTMAX, d.flags = SPYRE_KF_BCAST_ROW;
	kh_expect_einval(&d, "do not apply");
	d = b, d.flags = SPYRE_KF_LOG;
	kh_expect_einval(&d, "do not apply");
	d = b, d.op = SPYRE_KOP_UNARY, d.fn = SPYRE_KFN_EXP, d.flags = SPYRE_KF_SCALAR_A;
	kh_expect_einval(&d, "do not apply");
	d = b, d.flags = SPYRE_KF_BCAST_ROW | SPYRE_KF_BCAST_COL;
	kh_expect_einval(&d, "SPYRE_KF_BCAST_ROW and SPYRE_KF_BCAST_COL together");
	d = b, d.fn = SPYRE_KFN_MUL, d.alpha = 2;
	kh_expect_einval(&d, "alpha must be 0");
	d = b, d.beta = 1;
	kh_expect_einval(&d, "beta must be 0");
	d = b, d.op = SPYRE_KOP_ADD, d.beta = 1;
	kh_expect_einval(&d, "beta must be 0");
	d = b, d.k = 3;
	kh_expect_einval(&d, "k must be 0");
	d = b, d.op = SPYRE_KOP_UNARY, d.fn = SPYRE_KFN_EXP, d.alpha = 1;
	kh_expect_einval(&d, "alpha must be 0");
	d = b, d.op = SPYRE_KOP_WHERE, d.alpha = 1;
	kh_expect_einval(&d, "alpha must be 0");
	d = b, d.op = SPYRE_KOP_WHERE, d.flags = SPYRE_KF_SCALAR_A, d.beta = 1;
	kh_expect_einval(&d, "beta must be 0");
	d = b, d.op = SPYRE_KOP_REDUCE, d.fn = SPYRE_KFN_SUM, d.eps = 1e-5f;
	kh_expect_einval(&d, "eps and scale must be 0");
	d = b, d.batch = 2;
	kh_expect_einval(&d, "batch (but for permute)");
	d = b, d.op = SPYRE_KOP_TRIL, d.k = 4, d.alpha = 0.5f;
	kh_expect_einval(&d, "alpha (the diagonal) must be an integer");
	d = b, d.op = SPYRE_KOP_TRIL, d.k = 3;
	kh_expect_einval(&d, "k (rows per matrix) must divide m");
	d = b, d.op = SPYRE_KOP_TRIL, d.k = 0;
	kh_expect_einval(&d, "k (rows per matrix) must divide m");
	d = b, d.op = SPYRE_KOP_PERMUTE, d.k = 3;
	kh_expect_einval(&d, "must be a multiple of 128, or k 1");
	d = b, d.op = SPYRE_KOP_PERMUTE, d.k = 0;
	kh_expect_einval(&d, "m, n and k must be non-zero");
	d = b, d.op = SPYRE_KOP_PERMUTE, d.k = 1, d.m = 1000, d.n = 999;
	kh_expect_einval(&d, "needs");
	d = b, d.op = SPYRE_KOP_CAT, d.k = 1;
	kh_expect_einval(&d, "k (pieces) must be 2..8");
	d = b, d.op = SPYRE_KOP_CAT, d.k = 9;
	kh_expect_einval(&d, "k (pieces) must be 2..8");
	d = b, d.op = SPYRE_KOP_CAT, d.k = 2, d.alpha = 1;
	kh_expect_einval(&d, "alpha must be 0");
	d = b, d.m = 0;
	kh_expect_einval(&d, "m and n must be non-zero");
}

/* TRIL's fn 0 is TRIL (one key); -0.0 beta is 0.0; the names carry the function */
static void test_names_and_keys(void)
{
	struct spyre_kernel_info i1 = { .size = sizeof(i1) }, i2 = { .size = sizeof(i2) };
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_TRIL, .dtype = SPYRE_DT_FP16, .m = 4, .n = 8,
				 .k = 4, .cores = 2 };
	void *a, *b;
	size_t sa, sb;

	TAP_EQ(0, spyre_kernel_build(&d, &a, &sa, &i1));
	d.fn = SPYRE_KFN_TRIL;
	TAP_EQ(0, spyre_kernel_build(&d, &b, &sb, &i2));
	TAP_CHECK(sa == sb && !memcmp(a, b, sa), "tril fn 0 builds the image of SPYRE_KFN_TRIL");
	TAP_STREQ("tril-tril fp16 4x8x4 c2", i1.name);
	free(a);
	free(b);
	d = (struct spyre_kdesc){ .size = sizeof(d), .op = SPYRE_KOP_UNARY, .dtype = SPYRE_DT_BF16, .m = 3, .n = 5,
				  .fn = SPYRE_KFN_SCALE, .alpha = 2, .beta = -0.0f, .cores = 1 };
	TAP_EQ(0, spyre_kernel_build(&d, &a, &sa, &i1));
	TAP_STREQ("unary-scale bf16 3x5 c1", i1.name);
	d.beta = 0.0f;
	TAP_EQ(0, spyre_kernel_build(&d, &b, &sb, &i2));
	TAP_CHECK(sa == sb && !memcmp(a, b, sa), "beta -0.0 builds the image of beta 0.0");
	free(a);
	free(b);
	d = (struct spyre_kdesc){ .size = sizeof(d), .op = SPYRE_KOP_SOFTMAX, .dtype = SPYRE_DT_FP32, .m = 3, .n = 5,
				  .flags = SPYRE_KF_LOG, .cores = 1 };
	TAP_EQ(0, spyre_kernel_build(&d, &a, &sa, &i1));
	TAP_STREQ("softmax-log fp32 3x5 scratchpad c1", i1.name);
	free(a);
	/* BINARY's alpha 1 is 0 (a framework's default for every fn): one key, and not refused */
	for (uint32_t fn = SPYRE_KFN_ADD; fn <= SPYRE_KFN_MIN; fn++) {
		d = (struct spyre_kdesc){ .size = sizeof(d), .op = SPYRE_KOP_BINARY, .dtype = SPYRE_DT_FP16, .m = 3,
					  .n = 5, .fn = fn, .flags = SPYRE_KF_BCAST_ROW, .cores = 2 };
		TAP_EQ(0, spyre_kernel_build(&d, &a, &sa, &i1));
		d.alpha = 1;
		TAP_EQ(0, spyre_kernel_build(&d, &b, &sb, &i2));
		TAP_CHECK(sa == sb && !memcmp(a, b, sa), "binary %s: alpha 1 builds the image of alpha 0", fname(fn));
		free(a);
		free(b);
	}
	for (uint32_t op = SPYRE_KOP_BINARY; op <= SPYRE_KOP_CAT; op++)
		TAP_CHECK(strcmp(spyre_kernel_op_name(op), "?"), "op %u has a name", op);
	TAP_STREQ("permute", spyre_kernel_op_name(SPYRE_KOP_PERMUTE));
	TAP_STREQ("?", spyre_kernel_op_name(SPYRE_KOP_COUNT));
}

static const struct tap_case cases[] = {
	{ "bad_descriptors", test_bad_descriptors },
	{ "names_and_keys", test_names_and_keys },
	{ "binary", test_binary },
	{ "binary_alpha", test_binary_alpha },
	{ "binary_nan", test_binary_nan },
	{ "binary_wide", test_binary_wide },
	{ "unary", test_unary },
	{ "unary_specials", test_unary_specials },
	{ "reduce", test_reduce },
	{ "log_softmax", test_log_softmax },
	{ "where", test_where },
	{ "tril", test_tril },
	{ "permute", test_permute },
	{ "cat", test_cat },
};

int main(int argc, char **argv)
{
	return KH_MAIN(cases, argc, argv);
}
