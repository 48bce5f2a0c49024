// SPDX-License-Identifier: MIT
/*
 * Description: every compute instruction of the spyre engine on every data
 * type it accepts, against a plain CPU reference in double precision
 * computed from the same (already rounded) inputs. Shapes include ones that
 * are not multiples of a stick; padding bytes past a row must stay intact.
 * Tolerances: |got - ref| <= eps(out) * |ref| + atol, with eps = 2^-22 for
 * fp32 (2^-20 for transcendentals), 2^-10 fp16, 2^-7 bf16, 2^-9 dl16 (one
 * rounding of the output), atol = 1e-6 (elementwise) or 1e-6 * sum|a*b|
 * (matmul, fp32 accumulation error) and exact for int8/int32.
 * MOVM, TRIL and dense TRANSPOSE (exact), MAX / MIN with NaN, the SWAP
 * flag, log_softmax (atol 2e-5: x - max - log sum, absolute fp32 errors).
 * fp32 MATMUL with NaNs: the same bits for a row wherever it sits in the
 * tile, and bit for bit against the GEMM's chain where it uses FMA; B
 * packed row by row as packed whole.
 * Also: control instructions (li, addi, ldarg, bnz loop), strided DMA, both
 * address forms (slot-relative and relocated absolute) and constant data.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flatmem.h"
#include "spyre_gemm.h"
#include "spyre_dtype.h"
#include "spyre_progbuild.h"

#define SPB	(256u << 10)	/* scratchpad bytes the tests shuttle in and out */
#define SENT	0xa5

static struct spyre_engine *E;
static struct flatmem M;
static uint8_t spin[SPB], spout[SPB];
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 32);
}

static float frnd(float lo, float hi)
{
	return lo + (hi - lo) * (float)(rnd() & 0xffffff) / 16777216.0f;
}

/* Start a program: LOAD the SPB-byte scratchpad image from slot 0. */
static struct spyre_pb *begin(void)
{
	struct spyre_pb *pb = spyre_pb_new();

	spyre_pb_sym(pb, "in", SPYRE_DT_INT8, 1, (uint64_t[]){ SPB }, SPB, SPYRE_SYM_IN);
	spyre_pb_sym(pb, "out", SPYRE_DT_INT8, 1, (uint64_t[]){ SPB }, SPB, SPYRE_SYM_OUT);
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .row_bytes = SPB });
	return pb;
}

/* STORE the scratchpad to slot 1, run on core 0, copy the result to spout. */
static int finish(struct spyre_pb *pb, struct spyre_launch_result *res)
{
	void *img;
	size_t sz;
	int rc;

	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .mem = { .sym = 1 }, .row_bytes = SPB });
	if (spyre_pb_finish(pb, &img, &sz)) {
		spyre_pb_free(pb);
		return -1;
	}
	spyre_pb_free(pb);
	uint64_t in = flatmem_alloc(&M, SPB), out = flatmem_alloc(&M, SPB);

	memcpy(flatmem_ptr(&M, in), spin, SPB);
	rc = flatmem_run(&M, E, img, sz, (uint64_t[]){ in, out }, 2, NULL, 0, 1, res);
	memcpy(spout, flatmem_ptr(&M, out), SPB);
	M.next = 0;
	free(img);
	return rc;
}

static double eps_of(unsigned dt, int transc)
{
	switch (dt) {
	case SPYRE_DT_FP32:
		return transc ? 1.0 / (1 << 20) : 1.0 / (1 << 22);
	case SPYRE_DT_FP16:
		return 1.0 / (1 << 10);
	case SPYRE_DT_BF16:
		return 1.0 / (1 << 7);
	case SPYRE_DT_DL16:
		return 1.0 / (1 << 9);
	default:
		return 0;
	}
}

static const char *dn(unsigned dt)
{
	return spyre_dtype_name(dt);
}

/* Fill a tile in spin with random values of dt; return nothing (read back with load). */
static void gen_tile(uint32_t off, uint32_t rows, uint32_t cols, uint32_t ld, unsigned dt, float lo, float hi)
{
	for (uint32_t r = 0; r < rows; r++)
		for (uint32_t j = 0; j < cols; j++) {
			uint8_t *row = spin + off + (size_t)r * ld * 128;

			if (SPYRE_DT_IS_FLOAT(dt))
				spyre_store_f32(row, dt, j, frnd(lo, hi));
			else
				spyre_store_int(row, dt, j, (int64_t)(lo + (float)(rnd() % (uint32_t)(hi - lo + 1))));
		}
}

static double val(const uint8_t *sp, uint32_t off, uint32_t r, uint32_t ld, unsigned dt, uint32_t j)
{
	const uint8_t *row = sp + off + (size_t)r * ld * 128;

	return SPYRE_DT_IS_FLOAT(dt) ? (double)spyre_load_f32(row, dt, j) : (double)spyre_load_int(row, dt, j);
}

/* Reference result rounded to an int type like the engine (saturating). */
static double sat(double v, unsigned dt)
{
	double lo = dt == SPYRE_DT_INT8 ? -128 : -2147483648.0, hi = dt == SPYRE_DT_INT8 ? 127 : 2147483647.0;

	v = nearbyint(v);
	return v < lo ? lo : v > hi ? hi : v;
}

static int close_to(double got, double ref, unsigned dt, double atol, int transc)
{
	if (!SPYRE_DT_IS_FLOAT(dt))
		return got == sat(ref, dt);
	if (isnan(ref))
		return isnan(got);
	if (dt == SPYRE_DT_DL16 && fabs(ref) < 4.7e-10)
		atol += 4.7e-10;	/* below DL16's smallest normal: flushes to 0 */
	return fabs(got - ref) <= eps_of(dt, transc) * fabs(ref) + atol;
}

/* Bytes past cols in each row of a tile must still hold SENT. */
static int padding_intact(uint32_t off, uint32_t rows, uint32_t cols, uint32_t ld, unsigned dt)
{
	for (uint32_t r = 0; r < rows; r++)
		for (uint32_t b = cols * SPYRE_DT_SIZE(dt); b < ld * 128u; b++)
			if (spout[off + (size_t)r * ld * 128 + b] != SENT)
				return 0;
	return 1;
}

/* ---- matmul ---------------------------------------------------------------- */

static void test_matmul(unsigned dt, unsigned dt2, uint32_t m, uint32_t n, uint32_t k, int acc)
{
	struct spyre_launch_result res;
	uint32_t lda = spyre_sticks(k, dt), ldb = spyre_sticks(n, dt), ldc = spyre_sticks(n, dt2) + 1;
	uint32_t A = 0, B = A + m * lda * 128, C = B + k * ldb * 128;
	int isint = dt == SPYRE_DT_INT8, good = 1;
	double worst = 0;

	memset(spin, SENT, SPB);
	gen_tile(A, m, k, lda, dt, isint ? -128 : -1, isint ? 127 : 1);
	gen_tile(B, k, n, ldb, dt, isint ? -128 : -1, isint ? 127 : 1);
	if (acc)
		gen_tile(C, m, n, ldc, dt2, isint ? -1000 : -1, isint ? 1000 : 1);
	struct spyre_pb *pb = begin();

	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = dt, .dt2 = dt2,
		.flags = acc ? SPYRE_IF_ACC : 0, .d = C, .a = A, .b = B, .rows = m, .cols = n, .k = k,
		.ldd = ldc, .lda = lda, .ldb = ldb });
	int rc = finish(pb, &res);

	for (uint32_t i = 0; i < m && rc == 0; i++)
		for (uint32_t j = 0; j < n; j++) {
			double ref = acc ? val(spin, C, i, ldc, dt2, j) : 0, mag = 0;

			for (uint32_t p = 0; p < k; p++) {
				double x = val(spin, A, i, lda, dt, p) * val(spin, B, p, ldb, dt, j);

				ref += x;
				mag += fabs(x);
			}
			double got = val(spout, C, i, ldc, dt2, j);

			if (isint)
				ref = (double)(int32_t)(int64_t)ref;	/* int32 wraps; here it never overflows */
			if (!close_to(got, ref, dt2, 1e-6 * mag + 1e-30, 0))
				good = 0;
			if (fabs(got - ref) > worst)
				worst = fabs(got - ref);
		}
	TAP_CHECK(rc == 0 && good && padding_intact(C, m, n, ldc, dt2),
		  "matmul %s->%s m=%u n=%u k=%u%s (max err %.3g)", dn(dt), dn(dt2), m, n, k, acc ? " acc" : "", worst);
}

/* ---- elementwise ---------------------------------------------------------- */

static double ref_unary(unsigned op, double x, float s, float b)
{
	switch (op) {
	case SPYRE_ISA_OP_RELU: return x > 0 ? x : 0;
	case SPYRE_ISA_OP_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
	case SPYRE_ISA_OP_SILU: return x / (1 + exp(-x));
	case SPYRE_ISA_OP_EXP: return exp(x);
	case SPYRE_ISA_OP_RSQRT: return 1 / sqrt(x);
	case SPYRE_ISA_OP_SCALE: return x * s + b;
	case SPYRE_ISA_OP_LOG: return log(x);
	case SPYRE_ISA_OP_TANH: return tanh(x);
	case SPYRE_ISA_OP_SIGMOID: return 1 / (1 + exp(-x));
	case SPYRE_ISA_OP_SQRT: return sqrt(x);
	case SPYRE_ISA_OP_RECIP: return 1 / x;
	case SPYRE_ISA_OP_ABS: return fabs(x);
	case SPYRE_ISA_OP_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
	case SPYRE_ISA_OP_POW: return pow(x, s);
	default: return x;
	}
}

static double ref_binary(unsigned op, double x, double y)
{
	switch (op) {
	case SPYRE_ISA_OP_ADD: return x + y;
	case SPYRE_ISA_OP_SUB: return x - y;
	case SPYRE_ISA_OP_MUL: return x * y;
	case SPYRE_ISA_OP_DIV: return x / y;
	case SPYRE_ISA_OP_MIN: return isnan(x) || isnan(y) ? NAN : x < y ? x : y;
	default: return isnan(x) || isnan(y) ? NAN : x > y ? x : y;
	}
}

static void test_binary(unsigned op, unsigned dt, unsigned flags, uint32_t rows, uint32_t cols)
{
	struct spyre_launch_result res;
	uint32_t ld = spyre_sticks(cols, dt) + 1;
	uint32_t A = 0, B = rows * ld * 128, D = 2 * B;
	int isint = !SPYRE_DT_IS_FLOAT(dt), good = 1;
	float lo = isint ? (dt == SPYRE_DT_INT8 ? -128 : -100000) : -3, hi = -lo;

	memset(spin, SENT, SPB);
	gen_tile(A, rows, cols, ld, dt, lo, hi);
	unsigned bc = flags & (SPYRE_IF_BCAST_ROW | SPYRE_IF_BCAST_COL);
	int swap = !!(flags & SPYRE_IF_SWAP);

	if (op == SPYRE_ISA_OP_DIV)	/* divisors away from 0 */
		lo = 0.5f;
	if (bc == SPYRE_IF_BCAST_ROW)
		gen_tile(B, 1, cols, 0, dt, lo, hi);
	else if (bc == SPYRE_IF_BCAST_COL)
		gen_tile(B, 1, rows, 0, dt, lo, hi);
	else
		gen_tile(B, rows, cols, ld, dt, lo, hi);
	struct spyre_pb *pb = begin();

	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = op, .dt = dt, .dt2 = dt, .flags = flags, .d = D, .a = A,
		.b = B, .rows = rows, .cols = cols, .ldd = ld, .lda = ld, .ldb = bc ? 0 : ld });
	int rc = finish(pb, &res);

	for (uint32_t r = 0; r < rows && !rc; r++)
		for (uint32_t j = 0; j < cols; j++) {
			double b = bc == SPYRE_IF_BCAST_ROW ? val(spin, B, 0, 0, dt, j) :
				   bc == SPYRE_IF_BCAST_COL ? val(spin, B, 0, 0, dt, r) : val(spin, B, r, ld, dt, j);
			double a = val(spin, A, r, ld, dt, j);
			double ref = swap ? ref_binary(op, b, a) : ref_binary(op, a, b);

			if (!close_to(val(spout, D, r, ld, dt, j), ref, dt, 1e-6, op == SPYRE_ISA_OP_DIV))
				good = 0;
		}
	TAP_CHECK(rc == 0 && good && padding_intact(D, rows, cols, ld, dt), "%s.%s %ux%u%s%s", spyre_opcode_name(op),
		  dn(dt), rows, cols, bc == SPYRE_IF_BCAST_ROW ? " bcast-row" : bc ? " bcast-col" : "",
		  swap ? " swap" : "");
}

static void test_unary(unsigned op, unsigned dt, unsigned dt2, uint32_t rows, uint32_t cols)
{
	struct spyre_launch_result res;
	uint32_t lda = spyre_sticks(cols, dt), ldd = spyre_sticks(cols, dt2) + 1;
	uint32_t A = 0, D = rows * lda * 128 + 128;
	int isint = !SPYRE_DT_IS_FLOAT(dt), good = 1, transc = op != SPYRE_ISA_OP_RELU && op != SPYRE_ISA_OP_CAST &&
								 op != SPYRE_ISA_OP_SCALE && op != SPYRE_ISA_OP_ABS;
	int pos = op == SPYRE_ISA_OP_RSQRT || op == SPYRE_ISA_OP_LOG || op == SPYRE_ISA_OP_SQRT ||
		  op == SPYRE_ISA_OP_RECIP || op == SPYRE_ISA_OP_POW;	/* defined (or finite) for x > 0 */
	float lo = pos ? 0.01f : -4, hi = 4, s = 1.5f, b = -0.25f;

	if (isint) {
		lo = dt == SPYRE_DT_INT8 ? -128 : -60000;	/* fp16 overflows past 65504 */
		hi = -lo - 1;
	}
	if (op == SPYRE_ISA_OP_CAST && SPYRE_DT_IS_FLOAT(dt) && !SPYRE_DT_IS_FLOAT(dt2)) {
		lo = -200;	/* exercise int8 saturation and rounding */
		hi = 200;
	}
	memset(spin, SENT, SPB);
	gen_tile(A, rows, cols, lda, dt, lo, hi);
	struct spyre_pb *pb = begin();

	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = op, .dt = dt, .dt2 = dt2, .d = D, .a = A, .rows = rows,
		.cols = cols, .ldd = ldd, .lda = lda, .scale = s, .bias = b });	/* scale: SCALE, POW; bias: SCALE */
	int rc = finish(pb, &res);

	for (uint32_t r = 0; r < rows && !rc; r++)
		for (uint32_t j = 0; j < cols; j++) {
			double x = val(spin, A, r, lda, dt, j), ref = ref_unary(op, x, s, b);

			if (op == SPYRE_ISA_OP_CAST && SPYRE_DT_IS_FLOAT(dt2))
				ref = (float)ref;	/* an int32 source is first rounded to fp32 */
			if (!close_to(val(spout, D, r, ldd, dt2, j), ref, dt2, 1e-6, transc))
				good = 0;
		}
	TAP_CHECK(rc == 0 && good && padding_intact(D, rows, cols, ldd, dt2), "%s.%s->%s %ux%u",
		  spyre_opcode_name(op), dn(dt), dn(dt2), rows, cols);
}

static void test_fill(unsigned dt)
{
	struct spyre_launch_result res;
	uint32_t rows = 5, cols = 77, ld = spyre_sticks(cols, dt) + 1;
	float f = -2.5f;
	uint32_t bits;
	int good = 1;

	if (SPYRE_DT_IS_FLOAT(dt))
		memcpy(&bits, &f, 4);
	else
		bits = (uint32_t)-100;
	memset(spin, SENT, SPB);
	struct spyre_pb *pb = begin();

	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = dt, .dt2 = dt, .d = 256, .rows = rows,
		.cols = cols, .ldd = ld, .imm = bits });
	int rc = finish(pb, &res);

	for (uint32_t r = 0; r < rows && !rc; r++)
		for (uint32_t j = 0; j < cols; j++)
			if (val(spout, 256, r, ld, dt, j) != (SPYRE_DT_IS_FLOAT(dt) ? -2.5 : -100))
				good = 0;
	TAP_CHECK(rc == 0 && good && padding_intact(256, rows, cols, ld, dt), "fill.%s %ux%u", dn(dt), rows, cols);
}

static void test_reduce(unsigned op, unsigned dt, unsigned dt2, int axis0, uint32_t rows, uint32_t cols)
{
	struct spyre_launch_result res;
	uint32_t lda = spyre_sticks(cols, dt), A = 0, D = rows * lda * 128 + 128;
	uint32_t outn = axis0 ? cols : rows;
	int isint = !SPYRE_DT_IS_FLOAT(dt), good = 1;

	memset(spin, SENT, SPB);
	gen_tile(A, rows, cols, lda, dt, isint ? -128 : -2, isint ? 127 : 2);
	struct spyre_pb *pb = begin();

	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = op, .dt = dt, .dt2 = dt2, .flags = axis0 ? SPYRE_IF_AXIS0 : 0,
		.d = D, .a = A, .rows = rows, .cols = cols, .lda = lda });
	int rc = finish(pb, &res);

	for (uint32_t o = 0; o < outn && !rc; o++) {
		double ref = op == SPYRE_ISA_OP_REDSUM ? 0 : -INFINITY, mag = 0;

		for (uint32_t i = 0; i < (axis0 ? rows : cols); i++) {
			double x = axis0 ? val(spin, A, i, lda, dt, o) : val(spin, A, o, lda, dt, i);

			ref = op == SPYRE_ISA_OP_REDSUM ? ref + x : (x > ref ? x : ref);
			mag += fabs(x);
		}
		if (!close_to(val(spout, D, 0, 0, dt2, o), ref, dt2, 1e-6 * mag, 0))
			good = 0;
	}
	/* the vector's last stick keeps its padding */
	int pad = 1;

	for (uint32_t b = outn * SPYRE_DT_SIZE(dt2); b % 128; b++)
		if (spout[D + b] != SENT)
			pad = 0;
	TAP_CHECK(rc == 0 && good && pad, "%s.%s->%s %ux%u axis%d", spyre_opcode_name(op), dn(dt), dn(dt2), rows, cols,
		  axis0 ? 0 : 1);
}

static void test_softmax(unsigned dt, unsigned dt2, uint32_t rows, uint32_t cols, int lg)
{
	struct spyre_launch_result res;
	uint32_t lda = spyre_sticks(cols, dt), ldd = spyre_sticks(cols, dt2), A = 0, D = rows * lda * 128;
	int good = 1;

	memset(spin, SENT, SPB);
	gen_tile(A, rows, cols, lda, dt, -8, 8);
	struct spyre_pb *pb = begin();

	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SOFTMAX, .dt = dt, .dt2 = dt2,
		.flags = lg ? SPYRE_IF_LOG : 0, .d = D, .a = A, .rows = rows, .cols = cols, .ldd = ldd, .lda = lda });
	int rc = finish(pb, &res);

	for (uint32_t r = 0; r < rows && !rc; r++) {
		double mx = -INFINITY, sum = 0;

		for (uint32_t j = 0; j < cols; j++)
			mx = fmax(mx, val(spin, A, r, lda, dt, j));
		for (uint32_t j = 0; j < cols; j++)
			sum += exp(val(spin, A, r, lda, dt, j) - mx);
		for (uint32_t j = 0; j < cols; j++) {
			double x = val(spin, A, r, lda, dt, j) - mx;
			double ref = lg ? x - log(sum) : exp(x) / sum;

			/* log_softmax: the fp32 errors of x - max and log sum are absolute (|y| < 16 + log n) */
			if (!close_to(val(spout, D, r, ldd, dt2, j), ref, dt2, lg ? 2e-5 : 1e-7, 1))
				good = 0;
		}
	}
	TAP_CHECK(rc == 0 && good && padding_intact(D, rows, cols, ldd, dt2), "softmax%s.%s->%s %ux%u", lg ? " log" : "",
		  dn(dt), dn(dt2), rows, cols);
}

static void test_transpose(unsigned dt, uint32_t rows, uint32_t cols)
{
	struct spyre_launch_result res;
	uint32_t lda = spyre_sticks(cols, dt), ldd = spyre_sticks(rows, dt), A = 0, D = rows * lda * 128;
	int good = 1;

	memset(spin, SENT, SPB);
	gen_tile(A, rows, cols, lda, dt, -100, 100);
	struct spyre_pb *pb = begin();

	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRANSPOSE, .dt = dt, .dt2 = dt, .d = D, .a = A,
		.rows = rows, .cols = cols, .ldd = ldd, .lda = lda });
	int rc = finish(pb, &res);

	for (uint32_t r = 0; r < rows && !rc; r++)
		for (uint32_t j = 0; j < cols; j++)
			if (memcmp(spout + D + (size_t)j * ldd * 128 + r * SPYRE_DT_SIZE(dt),
				   spin + A + (size_t)r * lda * 128 + j * SPYRE_DT_SIZE(dt), SPYRE_DT_SIZE(dt)))
				good = 0;
	TAP_CHECK(rc == 0 && good && padding_intact(D, cols, rows, ldd, dt), "transpose.%s %ux%u", dn(dt), rows, cols);
}

/* dense: a and d unpadded matrices at element offsets ka and kd inside their first stick */
static void test_transpose_dense(unsigned dt, uint32_t rows, uint32_t cols, uint32_t ka, uint32_t kd)
{
	struct spyre_launch_result res;
	uint32_t esz = SPYRE_DT_SIZE(dt), A = 0, D = ((ka + rows * cols) * esz + 127) / 128 * 128 + 256;
	int good = 1;

	memset(spin, SENT, SPB);
	gen_tile(A, 1, ka + rows * cols, 0, dt, -100, 100);
	struct spyre_pb *pb = begin();

	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRANSPOSE, .dt = dt, .dt2 = dt,
		.flags = SPYRE_IF_DENSE, .d = D, .a = A, .rows = rows, .cols = cols, .k = ka, .ext = kd });
	int rc = finish(pb, &res);

	for (uint32_t r = 0; r < rows && !rc; r++)
		for (uint32_t j = 0; j < cols; j++)
			if (memcmp(spout + D + (kd + (size_t)j * rows + r) * esz, spin + A + (ka + (size_t)r * cols + j) * esz,
				   esz))
				good = 0;
	/* the elements before and after the matrix in d's sticks are untouched */
	for (uint32_t b = 0; b < kd * esz; b++)
		if (spout[D + b] != SENT)
			good = 0;
	for (uint32_t b = (kd + rows * cols) * esz; b % 128; b++)
		if (spout[D + b] != SENT)
			good = 0;
	TAP_CHECK(rc == 0 && good, "transpose dense.%s %ux%u at +%u -> +%u", dn(dt), rows, cols, ka, kd);
}

/* MOVM: d = mask ? a : d, NaN and inf of the side not taken never show */
static void test_movm(unsigned dt, unsigned dt2, uint32_t rows, uint32_t cols)
{
	struct spyre_launch_result res;
	uint32_t lda = spyre_sticks(cols, dt) + 1, ldd = spyre_sticks(cols, dt2), ldm = spyre_sticks(cols, SPYRE_DT_INT8);
	uint32_t A = 0, M0 = rows * lda * 128, D = M0 + rows * ldm * 128;
	int good = 1, fl = SPYRE_DT_IS_FLOAT(dt);

	memset(spin, SENT, SPB);
	gen_tile(A, rows, cols, lda, dt, fl ? -3 : -100, fl ? 3 : 100);
	gen_tile(D, rows, cols, ldd, dt2, fl ? -3 : -100, fl ? 3 : 100);
	for (uint32_t r = 0; r < rows; r++)
		for (uint32_t j = 0; j < cols; j++) {
			spin[M0 + r * ldm * 128 + j] = (uint8_t)((r * 7 + j * 3) % 5 == 0 ? 0 : (r + j) % 3 ? 1 : 0x80);
			if (fl && (r + j) % 4 == 0)	/* a NaN / -inf on each side */
				spyre_store_f32(spin + A + r * lda * 128, dt, j, NAN);
			if (fl && (r + j) % 4 == 1)
				spyre_store_f32(spin + D + r * ldd * 128, dt2, j, -INFINITY);
		}
	struct spyre_pb *pb = begin();

	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MOVM, .dt = dt, .dt2 = dt2, .d = D, .a = A,
		.b = M0, .rows = rows, .cols = cols, .ldd = ldd, .lda = lda, .ldb = ldm });
	int rc = finish(pb, &res);

	for (uint32_t r = 0; r < rows && !rc; r++)
		for (uint32_t j = 0; j < cols; j++) {
			double ref = spin[M0 + r * ldm * 128 + j] ? val(spin, A, r, lda, dt, j) : val(spin, D, r, ldd, dt2, j);
			double got = val(spout, D, r, ldd, dt2, j);

			if (fl ? !(isnan(ref) ? isnan(got) : got == ref) : got != sat(ref, dt2))
				good = 0;
		}
	TAP_CHECK(rc == 0 && good && padding_intact(D, rows, cols, ldd, dt2), "movm.%s->%s %ux%u", dn(dt), dn(dt2), rows,
		  cols);
}

/* TRIL: keep c - r' <= diag (UPPER: >=), r' = (first + r) mod k (k 0: r), else 0 */
static void test_tril(unsigned dt, unsigned flags, uint32_t rows, uint32_t cols, int32_t diag, uint32_t k,
		      uint32_t first)
{
	struct spyre_launch_result res;
	uint32_t ld = spyre_sticks(cols, dt), A = 0, D = rows * ld * 128 + 128;
	int good = 1;

	memset(spin, SENT, SPB);
	gen_tile(A, rows, cols, ld, dt, SPYRE_DT_IS_FLOAT(dt) ? -3 : -100, SPYRE_DT_IS_FLOAT(dt) ? 3 : 100);
	struct spyre_pb *pb = begin();

	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRIL, .dt = dt, .dt2 = dt, .flags = flags, .d = D,
		.a = A, .rows = rows, .cols = cols, .ldd = ld, .lda = ld, .imm = (uint32_t)diag, .k = k, .ext = first });
	int rc = finish(pb, &res);

	for (uint32_t r = 0; r < rows && !rc; r++)
		for (uint32_t j = 0; j < cols; j++) {
			int64_t rr = k ? (first + r) % k : r, dc = (int64_t)j - rr;
			int keep = (flags & SPYRE_IF_UPPER) ? dc >= diag : dc <= diag;

			if (val(spout, D, r, ld, dt, j) != (keep ? val(spin, A, r, ld, dt, j) : 0))
				good = 0;
		}
	TAP_CHECK(rc == 0 && good && padding_intact(D, rows, cols, ld, dt), "tril.%s%s %ux%u diag %d k %u first %u",
		  dn(dt), (flags & SPYRE_IF_UPPER) ? " upper" : "", rows, cols, diag, k, first);
}

/* ---- control, DMA and addressing -------------------------------------------- */

/* acc = 0; repeat n (from a scalar) times: acc += x. */
static void test_control(void)
{
	struct spyre_launch_result res;
	struct spyre_pb *pb = begin();
	int good = 1;

	memset(spin, 0, SPB);
	gen_tile(0, 1, 32, 1, SPYRE_DT_FP32, -1, 1);
	memcpy(spin + 128, spin, 128);	/* acc starts as x: 10 more adds give 11 x */
	spyre_pb_set_scalars(pb, 1);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LDARG, 3, 0, 0);		/* r3 = n */
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LI, 4, 7, 0);		/* r4 = 7 (unused, li) */
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_NOP, 0, 0, 0);
	int loop = spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_FP32, .d = 128, .a = 128, .b = 0, .rows = 1, .cols = 32 });
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_ADDI, 3, (uint64_t)-1, 3);	/* r3 -= 1 */
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_BNZ, 3, (uint64_t)loop, 0);
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .mem = { .sym = 1 }, .row_bytes = SPB });
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_HALT, 0, 0, 0);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_FILL, 0, 0, 0);	/* never reached (and invalid) */

	void *img;
	size_t sz;

	spyre_pb_finish(pb, &img, &sz);
	spyre_pb_free(pb);
	uint64_t in = flatmem_alloc(&M, SPB), out = flatmem_alloc(&M, SPB);

	memcpy(flatmem_ptr(&M, in), spin, SPB);
	int rc = flatmem_run(&M, E, img, sz, (uint64_t[]){ in, out }, 2, (uint64_t[]){ 10 }, 1, 1, &res);

	memcpy(spout, flatmem_ptr(&M, out), SPB);
	M.next = 0;
	free(img);
	/* r3 counted 10 iterations: acc = x + 10 x, summed in fp32 */
	for (uint32_t j = 0; j < 32; j++) {
		float x = (float)val(spin, 0, 0, 1, SPYRE_DT_FP32, j), a = 0;

		for (int i = 0; i < 11; i++)
			a += x;
		if ((float)val(spout, 128, 0, 1, SPYRE_DT_FP32, j) != a)
			good = 0;
	}
	/* 1 load + 3 + 10 * 3 loop + store + halt */
	TAP_CHECK(rc == 0 && good && res.insns == 1 + 3 + 30 + 1 + 1, "control: ldarg/li/nop/addi/bnz loop x10, halt (%llu insns)",
		  (unsigned long long)res.insns);
}

/* Strided LOAD/STORE through both address forms and constant data. */
static void test_dma(void)
{
	struct spyre_launch_result res;
	uint8_t cdata[256];
	const uint32_t rows = 6, rb = 256, mstride = 384, sstride = 512;
	uint64_t src = flatmem_alloc(&M, rows * mstride), dst = flatmem_alloc(&M, rows * mstride);
	uint64_t dst2 = flatmem_alloc(&M, rows * mstride), cout = flatmem_alloc(&M, 256);
	uint8_t *s = flatmem_ptr(&M, src);

	for (uint32_t i = 0; i < rows * mstride; i++)
		s[i] = (uint8_t)(i * 7 + 3);
	for (int i = 0; i < 256; i++)
		cdata[i] = (uint8_t)(255 - i);
	struct spyre_pb *pb = spyre_pb_new();
	int sx = spyre_pb_sym(pb, "src", SPYRE_DT_INT8, 2, (uint64_t[]){ rows, mstride }, rows * mstride, SPYRE_SYM_IN);
	int sd = spyre_pb_sym(pb, "dst", SPYRE_DT_INT8, 2, (uint64_t[]){ rows, mstride }, rows * mstride, SPYRE_SYM_OUT);
	int sd2 = spyre_pb_sym(pb, "dst2", SPYRE_DT_INT8, 2, (uint64_t[]){ rows, mstride }, rows * mstride, SPYRE_SYM_OUT);
	int sc = spyre_pb_sym(pb, "cout", SPYRE_DT_INT8, 1, (uint64_t[]){ 256 }, 256, SPYRE_SYM_OUT);
	int64_t coff = spyre_pb_const(pb, cdata, sizeof(cdata));

	struct spyre_pb_dma strided = { .sp = 1024, .rows = rows, .row_bytes = rb, .mem_stride = mstride,
					.sp_stride = sstride };

	strided.mem.sym = sx;
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &strided);
	strided.mem.sym = sd;
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &strided);
	strided.mem.sym = sd2;
	spyre_pb_set_addressing(pb, SPYRE_PB_ADDR_RELOC);	/* this one through the relocation table */
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &strided);
	spyre_pb_set_addressing(pb, SPYRE_PB_ADDR_SLOT);
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
		.mem = { .sym = SPYRE_PB_CONST, .off = (uint64_t)coff }, .row_bytes = 256 });
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .mem = { .sym = sc }, .row_bytes = 256 });
	void *img;
	size_t sz;
	uint64_t slots[4] = { src, dst, dst2, cout };
	uint32_t vc, vp;

	spyre_pb_finish(pb, &img, &sz);
	spyre_pb_free(pb);
	TAP_CHECK(spyre_prog_validate(img, sz, 2u << 20, &vc, &vp) == 0, "dma: image validates");
	TAP_CHECK(spyre_prog_relocate(img, sz, slots, 4) == 1, "dma: one relocation patched");
	int rc = flatmem_run(&M, E, img, sz, slots, 4, NULL, 0, 1, &res);
	int good = 1, good2 = 1, pad = 1;
	const uint8_t *d = flatmem_ptr(&M, dst), *d2 = flatmem_ptr(&M, dst2);

	for (uint32_t r = 0; r < rows; r++)
		for (uint32_t b = 0; b < mstride; b++) {
			uint8_t want = b < rb ? s[r * mstride + b] : 0;

			good &= d[r * mstride + b] == want;
			good2 &= d2[r * mstride + b] == want;
			if (b >= rb && d[r * mstride + b])
				pad = 0;
		}
	TAP_CHECK(rc == 0 && good && pad, "dma: strided load/store, slot-relative (rows %u, row %u B, strides %u/%u)",
		  rows, rb, mstride, sstride);
	TAP_CHECK(rc == 0 && good2, "dma: absolute address patched through the relocation table");
	TAP_CHECK(rc == 0 && !memcmp(flatmem_ptr(&M, cout), cdata, 256), "dma: load from the constant slot");
	free(img);
	M.next = 0;
}

/*
 * Address registers (SPYRE_IF_RMEM/RSP): one program, the row chosen by a
 * scalar, in both addressing forms; a register offset past the slot faults.
 */
static void test_dma_registers(void)
{
	const uint32_t rows = 8, rb = 128;
	uint64_t src = flatmem_alloc(&M, rows * rb), dst = flatmem_alloc(&M, rows * rb);
	uint8_t *s = flatmem_ptr(&M, src), *d = flatmem_ptr(&M, dst);

	for (uint32_t i = 0; i < rows * rb; i++)
		s[i] = (uint8_t)(i / rb + 1);
	for (int form = 0; form < 2; form++) {
		struct spyre_pb *pb = spyre_pb_new();
		struct spyre_launch_result res;
		void *img;
		size_t sz;

		spyre_pb_set_addressing(pb, form ? SPYRE_PB_ADDR_RELOC : SPYRE_PB_ADDR_SLOT);
		int sx = spyre_pb_sym(pb, "src", SPYRE_DT_INT8, 1, (uint64_t[]){ rows * rb }, rows * rb, SPYRE_SYM_IN);
		int sd = spyre_pb_sym(pb, "dst", SPYRE_DT_INT8, 1, (uint64_t[]){ rows * rb }, rows * rb, SPYRE_SYM_OUT);

		spyre_pb_set_scalars(pb, 2);
		spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LDARG, 1, 0, 0);	/* r1 = source row offset */
		spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LDARG, 2, 1, 0);	/* r2 = scratchpad offset */
		spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = 0, .sp_reg = SPYRE_PB_REG(2), .mem = { .sym = sx, .reg = SPYRE_PB_REG(1) },
			.row_bytes = rb });
		spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
			.sp = 0, .sp_reg = SPYRE_PB_REG(2), .mem = { .sym = sd, .off = rb }, .row_bytes = rb });
		TAP_EQ(0, spyre_pb_finish(pb, &img, &sz));
		spyre_pb_free(pb);
		uint64_t slots[2] = { src, dst };

		if (form)
			TAP_EQ(2, spyre_prog_relocate(img, sz, slots, 2));
		memset(d, 0, rows * rb);
		TAP_EQ(0, flatmem_run(&M, E, img, sz, slots, 2, (uint64_t[]){ 5 * rb, 3 * rb }, 2, 1, &res));
		TAP_CHECK(d[rb] == 6 && d[2 * rb - 1] == 6 && d[0] == 0, "form %d: row 5 copied to row 1", form);
		/* an offset one row past the slot: MEM_RANGE (slot) or MEM (flat memory ends later: no fault) */
		int rc = flatmem_run(&M, E, img, sz, slots, 2, (uint64_t[]){ rows * rb, 0 }, 2, 1, &res);

		if (!form)
			TAP_EQ(SPYRE_ENGINE_FAULT_MEM_RANGE, rc);
		TAP_EQ(SPYRE_ENGINE_FAULT_ALIGN, flatmem_run(&M, E, img, sz, slots, 2, (uint64_t[]){ 0, 64 }, 2, 1, &res));
		TAP_EQ(SPYRE_ENGINE_FAULT_SP_RANGE,
		       flatmem_run(&M, E, img, sz, slots, 2, (uint64_t[]){ 0, 2u << 20 }, 2, 1, &res));
		/* a register that wraps the scratchpad offset (found by review: once a heap overflow) */
		TAP_EQ(SPYRE_ENGINE_FAULT_SP_RANGE,
		       flatmem_run(&M, E, img, sz, slots, 2, (uint64_t[]){ 0, 0xffffffffffffff80ull }, 2, 1, &res));
		TAP_EQ(SPYRE_ENGINE_FAULT_SP_RANGE,
		       flatmem_run(&M, E, img, sz, slots, 2, (uint64_t[]){ 0, 1ull << 63 }, 2, 1, &res));
		free(img);
	}
	M.next = 0;
}

/* ARGMAX: lowest index on ties, NaN never chosen, and the INDEX form. */
static void test_argmax(void)
{
	for (unsigned i = 0; i < 4; i++) {
		unsigned dt = (unsigned[]){ SPYRE_DT_FP32, SPYRE_DT_FP16, SPYRE_DT_BF16, SPYRE_DT_DL16 }[i];
		const uint32_t rows = 5, cols = 300, lda = spyre_sticks(cols, dt), ldb = spyre_sticks(cols, SPYRE_DT_INT32);
		const uint32_t a = 0, b = 64 * 1024, d = 128 * 1024, d2 = 129 * 1024;
		struct spyre_launch_result res;
		uint32_t want[5];

		memset(spin, 0, sizeof(spin));
		for (uint32_t r = 0; r < rows; r++) {
			for (uint32_t j = 0; j < cols; j++) {
				spyre_store_f32(spin + a + r * lda * 128, dt, j, frnd(-4, 4));
				spyre_store_int(spin + b + r * ldb * 128, SPYRE_DT_INT32, j, 1000 + j);
			}
			want[r] = (r * 61 + 7) % cols;
			spyre_store_f32(spin + a + r * lda * 128, dt, want[r], 100.0f);
		}
		spyre_store_f32(spin + a + 2 * lda * 128, dt, 299, 100.0f);	/* tie after: lower wins */
		spyre_store_f32(spin + a + 3 * lda * 128, dt, 0, NAN);		/* NaN before: ignored */
		struct spyre_pb *pb = begin();

		spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ARGMAX, .dt = dt,
			    .dt2 = SPYRE_DT_INT32, .d = d, .a = a, .rows = rows, .cols = cols });
		spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ARGMAX, .dt = dt,
			    .dt2 = SPYRE_DT_INT32, .flags = SPYRE_IF_INDEX, .d = d2, .a = a, .b = b,
			    .rows = rows, .cols = cols });
		TAP_EQ(0, finish(pb, &res));
		for (uint32_t r = 0; r < rows; r++) {
			TAP_CHECK(spyre_load_int(spout + d, SPYRE_DT_INT32, r) == want[r], "%s row %u: argmax %lld, want %u",
				  spyre_dtype_name(dt), r, (long long)spyre_load_int(spout + d, SPYRE_DT_INT32, r), want[r]);
			TAP_EQ(1000 + want[r], (uint32_t)spyre_load_int(spout + d2, SPYRE_DT_INT32, r));
		}
	}
}

static const unsigned fl[] = { SPYRE_DT_FP32, SPYRE_DT_FP16, SPYRE_DT_BF16, SPYRE_DT_DL16 };

/* Every input type, both output choices, odd shapes, k > the kernel's k block. */
static void test_matmuls(void)
{
	static const uint32_t shapes[][3] = { { 1, 1, 1 }, { 7, 33, 65 }, { 16, 64, 64 }, { 13, 100, 300 } };

	for (unsigned s = 0; s < 4; s++) {
		const uint32_t *sh = shapes[s];

		for (unsigned i = 0; i < 4; i++) {
			test_matmul(fl[i], SPYRE_DT_FP32, sh[0], sh[1], sh[2], 0);
			if (fl[i] != SPYRE_DT_FP32)
				test_matmul(fl[i], fl[i], sh[0], sh[1], sh[2], 0);
		}
		test_matmul(SPYRE_DT_INT8, SPYRE_DT_INT32, sh[0], sh[1], sh[2], 0);
	}
}

static void test_matmuls_accumulate(void)
{
	test_matmul(SPYRE_DT_FP32, SPYRE_DT_FP32, 9, 40, 20, 1);
	test_matmul(SPYRE_DT_BF16, SPYRE_DT_FP32, 9, 40, 20, 1);
	test_matmul(SPYRE_DT_DL16, SPYRE_DT_DL16, 9, 40, 20, 1);
	test_matmul(SPYRE_DT_INT8, SPYRE_DT_INT32, 9, 40, 20, 1);
}

/*
 * fp32 MATMUL with NaN payloads (quiet NaNs, no infinities) in A, B and, with
 * ACC, C: a row of C has the same bits wherever it sits in the tile, m = 1..13
 * (the GEMM's 6-row tiles and its kernels for the last 1..5 rows), n = 101
 * (panels of 16 in groups and a partial one), k = 300 (two of its k blocks).
 * Rows alternate between A with NaNs and A without. Which NaN comes out of
 * an operation on two is the host CPU's (Intel and AMD differ), so against
 * the reference of the GEMM's chain (spyre_gemm.c: per k block
 * t = fma(a, b, t) from +0, then C + t) only NaN or not is checked there, and
 * every other element bit for bit where the GEMM uses FMA (x86-64-v3).
 */
#define NAN_M 13
#define NAN_N 101
#define NAN_K 300

static float qnan(uint32_t payload)
{
	uint32_t u = 0x7fc00000u | payload;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint32_t bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static void test_matmul_nan_case(int acc, float a[2][NAN_K], float b[NAN_K][NAN_N], float c0[2][NAN_N],
				 float want[2][NAN_N], int pinned)
{
	uint32_t lda = spyre_sticks(NAN_K, SPYRE_DT_FP32), ldb = spyre_sticks(NAN_N, SPYRE_DT_FP32), ldc = ldb;
	uint32_t A = 0, B = A + NAN_M * lda * 128, C = B + NAN_K * ldb * 128;
	float got6[2][NAN_N];

	for (uint32_t m = 6; m; m = m == 6 ? 1 : m == 5 ? 7 : m == NAN_M ? 0 : m + 1) {	/* 6 first, then 1..13 */
		struct spyre_launch_result res;
		unsigned bad = 0, badpin = 0;

		memset(spin, 0, SPB);
		for (uint32_t i = 0; i < m; i++) {
			memcpy(spin + A + i * lda * 128, a[i % 2], sizeof(a[0]));
			if (acc)
				memcpy(spin + C + i * ldc * 128, c0[i % 2], sizeof(c0[0]));
		}
		for (uint32_t p = 0; p < NAN_K; p++)
			memcpy(spin + B + p * ldb * 128, b[p], sizeof(b[0]));
		struct spyre_pb *pb = begin();

		spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = SPYRE_DT_FP32,
			.dt2 = SPYRE_DT_FP32, .flags = acc ? SPYRE_IF_ACC : 0, .d = C, .a = A, .b = B, .rows = m,
			.cols = NAN_N, .k = NAN_K, .ldd = ldc, .lda = lda, .ldb = ldb });
		int rc = finish(pb, &res);

		if (m == 6)
			for (uint32_t i = 0; i < 2; i++)
				memcpy(got6[i], spout + C + i * ldc * 128, sizeof(got6[0]));
		for (uint32_t i = 0; i < m; i++)
			for (uint32_t j = 0; j < NAN_N; j++) {
				float g;

				memcpy(&g, spout + C + i * ldc * 128 + 4 * j, 4);
				bad += bits(g) != bits(got6[i % 2][j]);
				badpin += isnan(g) != isnan(want[i % 2][j]) ||
					  (pinned && !isnan(g) && bits(g) != bits(want[i % 2][j]));
			}
		TAP_CHECK(rc == 0 && !bad && !badpin, "matmul.fp32 with NaNs m=%u%s: %u elements differ from the "
			  "6-row tile's, %u from the reference chain%s", m, acc ? " acc" : "", bad, badpin,
			  pinned ? "" : " (NaN or not only: no FMA)");
	}
}

static void test_matmul_nan(void)
{
	static float a[2][NAN_K], b[NAN_K][NAN_N], c0[2][NAN_N], want[2][NAN_N];
	int pinned = 0;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
	pinned = __builtin_cpu_supports("x86-64-v3");	/* spyre_gemm.c's FMA path */
#endif
	for (uint32_t p = 0; p < NAN_K; p++) {
		a[0][p] = a[1][p] = frnd(-1, 1);
		for (uint32_t j = 0; j < NAN_N; j++)
			b[p][j] = frnd(-1, 1);
	}
	a[0][40] = qnan(0xa001);	/* row kind 0: NaNs in A, in both k blocks */
	a[0][280] = qnan(0xa002);
	for (uint32_t j = 0; j < NAN_N; j += 3)	/* B's NaNs before, at and after A's, in both blocks */
		b[(j * 37) % NAN_K][j] = qnan(0xb000 | j);
	for (uint32_t j = 0; j < NAN_N; j++) {
		c0[0][j] = c0[1][j] = frnd(-1, 1);
		if (j % 5 == 0)
			c0[1][j] = qnan(0xc000 | j);
	}
	for (int acc = 0; acc < 2; acc++) {
		for (uint32_t r = 0; r < 2; r++)
			for (uint32_t j = 0; j < NAN_N; j++) {
				float c = acc ? c0[r][j] : 0.0f;

				for (uint32_t p0 = 0; p0 < NAN_K; p0 += SPYRE_SGEMM_KC) {
					float t = 0.0f;

					for (uint32_t p = p0; p < NAN_K && p < p0 + SPYRE_SGEMM_KC; p++)
						t = fmaf(a[r][p], b[p][j], t);
					c += t;
				}
				want[r][j] = c;
			}
		test_matmul_nan_case(acc, a, b, c0, want, pinned);
	}
}

/* B packed row by row (the engine's copies of LOADed B) is B packed whole, and unpacks to B. */
static void test_gemm_pack_rows(void)
{
	static const size_t shapes[][2] = { { 101, 300 }, { 16, 2 }, { 512, 512 }, { 5, 257 }, { 33, 1 } };

	for (unsigned s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		size_t n = shapes[s][0], k = shapes[s][1], nf = SPYRE_SGEMM_PACKED_FLOATS(n, k);
		float *b = malloc(n * k * sizeof(float)), *row = malloc(n * sizeof(float));
		float *whole = aligned_alloc(64, (nf * sizeof(float) + 63) / 64 * 64);
		float *rows = aligned_alloc(64, (nf * sizeof(float) + 63) / 64 * 64);
		int unpacked = 1;

		if (!b || !row || !whole || !rows)
			tap_bail("out of memory");
		for (size_t i = 0; i < n * k; i++)
			b[i] = frnd(-1, 1);
		memset(whole, 0xa5, nf * sizeof(float));
		memset(rows, 0x5a, nf * sizeof(float));
		spyre_sgemm_pack_b(n, k, b, n, whole);
		for (size_t p = 0; p < k; p++)
			spyre_sgemm_pack_b_row(n, k, p, b + p * n, rows);
		for (size_t p = 0; p < k; p++) {
			spyre_sgemm_unpack_b_row(n, k, p, rows, row);
			unpacked &= !memcmp(row, b + p * n, n * sizeof(float));
		}
		TAP_CHECK(!memcmp(whole, rows, nf * sizeof(float)) && unpacked,
			  "B %zu x %zu packed row by row: the bytes packed whole, and unpacked: B", k, n);
		free(b);
		free(row);
		free(whole);
		free(rows);
	}
}

static void test_binaries(void)
{
	static const unsigned bin[] = { SPYRE_ISA_OP_ADD, SPYRE_ISA_OP_SUB, SPYRE_ISA_OP_MUL, SPYRE_ISA_OP_MAX,
					SPYRE_ISA_OP_DIV, SPYRE_ISA_OP_MIN };

	for (unsigned o = 0; o < 6; o++) {
		for (unsigned dt = 0; dt < SPYRE_DT_COUNT; dt++)
			if (bin[o] != SPYRE_ISA_OP_DIV || SPYRE_DT_IS_FLOAT(dt))	/* DIV: float only */
				test_binary(bin[o], dt, 0, 3, 70);
		test_binary(bin[o], SPYRE_DT_FP32, SPYRE_IF_BCAST_ROW, 5, 33);
		test_binary(bin[o], SPYRE_DT_DL16, SPYRE_IF_BCAST_COL, 5, 33);
		test_binary(bin[o], SPYRE_DT_FP16, SPYRE_IF_SWAP, 4, 65);
		test_binary(bin[o], SPYRE_DT_BF16, SPYRE_IF_SWAP | SPYRE_IF_BCAST_ROW, 4, 65);
		test_binary(bin[o], SPYRE_DT_FP32, SPYRE_IF_SWAP | SPYRE_IF_BCAST_COL, 4, 65);
	}
	test_binary(SPYRE_ISA_OP_SUB, SPYRE_DT_INT32, SPYRE_IF_SWAP, 3, 40);
}

/* max and min propagate NaN from either side (torch.maximum / torch.minimum) */
static void test_binary_nan(void)
{
	struct spyre_launch_result res;
	float a[4] = { NAN, 1, 2, NAN }, b[4] = { 1, NAN, 3, NAN };

	for (unsigned o = 0; o < 2; o++) {
		unsigned op = o ? SPYRE_ISA_OP_MIN : SPYRE_ISA_OP_MAX;
		struct spyre_pb *pb = begin();

		memset(spin, 0, SPB);
		memcpy(spin, a, sizeof(a));
		memcpy(spin + 128, b, sizeof(b));
		spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = op, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32, .d = 256,
			.a = 0, .b = 128, .rows = 1, .cols = 4 });
		int rc = finish(pb, &res);
		float y[4];

		memcpy(y, spout + 256, sizeof(y));
		TAP_CHECK(rc == 0 && isnan(y[0]) && isnan(y[1]) && y[2] == (o ? 2 : 3) && isnan(y[3]),
			  "%s.fp32 with NaN: %g %g %g %g", spyre_opcode_name(op), y[0], y[1], y[2], y[3]);
	}
}

static void test_movms(void)
{
	for (unsigned i = 0; i < 4; i++)
		test_movm(fl[i], fl[i], 5, 77);
	test_movm(SPYRE_DT_FP16, SPYRE_DT_FP32, 3, 200);
	test_movm(SPYRE_DT_INT8, SPYRE_DT_INT8, 3, 129);
	test_movm(SPYRE_DT_INT32, SPYRE_DT_INT32, 2, 33);
}

static void test_trils(void)
{
	for (unsigned dt = 0; dt < SPYRE_DT_COUNT; dt++) {
		test_tril(dt, 0, 9, 70, 0, 0, 0);
		test_tril(dt, SPYRE_IF_UPPER, 9, 70, 1, 0, 0);
	}
	test_tril(SPYRE_DT_FP16, 0, 20, 7, -2, 6, 4);
	test_tril(SPYRE_DT_BF16, SPYRE_IF_UPPER, 20, 7, 0, 3, 2);
	test_tril(SPYRE_DT_FP32, 0, 4, 3, 100, 0, 0);
	test_tril(SPYRE_DT_FP32, SPYRE_IF_UPPER, 4, 3, -100, 0, 0);
}

static void test_transposes_dense(void)
{
	for (unsigned dt = 0; dt < SPYRE_DT_COUNT; dt++)
		test_transpose_dense(dt, 7, 5, 0, 0);
	test_transpose_dense(SPYRE_DT_FP16, 13, 11, 17, 63);
	test_transpose_dense(SPYRE_DT_FP32, 1, 9, 31, 1);
	test_transpose_dense(SPYRE_DT_INT8, 100, 3, 127, 5);
}

static void test_unaries(void)
{
	static const unsigned un[] = { SPYRE_ISA_OP_RELU, SPYRE_ISA_OP_GELU, SPYRE_ISA_OP_SILU, SPYRE_ISA_OP_EXP,
				       SPYRE_ISA_OP_RSQRT, SPYRE_ISA_OP_SCALE, SPYRE_ISA_OP_LOG, SPYRE_ISA_OP_TANH,
				       SPYRE_ISA_OP_SIGMOID, SPYRE_ISA_OP_SQRT, SPYRE_ISA_OP_RECIP, SPYRE_ISA_OP_ABS,
				       SPYRE_ISA_OP_GELU_TANH, SPYRE_ISA_OP_POW };

	for (unsigned o = 0; o < sizeof(un) / sizeof(un[0]); o++)
		for (unsigned i = 0; i < 4; i++)
			test_unary(un[o], fl[i], fl[i], 4, 100);
	test_unary(SPYRE_ISA_OP_RELU, SPYRE_DT_INT8, SPYRE_DT_INT8, 3, 129);
	test_unary(SPYRE_ISA_OP_RELU, SPYRE_DT_INT32, SPYRE_DT_INT32, 3, 33);
	test_unary(SPYRE_ISA_OP_GELU, SPYRE_DT_DL16, SPYRE_DT_FP32, 2, 50);	/* fused output cast */
}

static void test_casts(void)
{
	for (unsigned a = 0; a < SPYRE_DT_COUNT; a++)
		for (unsigned b = 0; b < SPYRE_DT_COUNT; b++)
			test_unary(SPYRE_ISA_OP_CAST, a, b, 3, 45);
}

static void test_fills(void)
{
	for (unsigned dt = 0; dt < SPYRE_DT_COUNT; dt++)
		test_fill(dt);
}

static void test_reductions(void)
{
	for (unsigned dt = 0; dt < SPYRE_DT_COUNT; dt++) {
		unsigned out = SPYRE_DT_IS_FLOAT(dt) ? SPYRE_DT_FP32 : SPYRE_DT_INT32;

		test_reduce(SPYRE_ISA_OP_REDSUM, dt, out, 0, 6, 75);
		test_reduce(SPYRE_ISA_OP_REDSUM, dt, out, 1, 6, 75);
		test_reduce(SPYRE_ISA_OP_REDMAX, dt, dt, 0, 6, 75);
		test_reduce(SPYRE_ISA_OP_REDMAX, dt, dt, 1, 6, 75);
	}
}

static void test_softmaxes(void)
{
	for (unsigned i = 0; i < 4; i++) {
		test_softmax(fl[i], fl[i], 5, 100, 0);
		test_softmax(fl[i], fl[i], 5, 100, 1);
	}
	test_softmax(SPYRE_DT_DL16, SPYRE_DT_FP32, 3, 1024, 0);
	test_softmax(SPYRE_DT_FP16, SPYRE_DT_FP32, 3, 1024, 1);
}

static void test_transposes(void)
{
	for (unsigned dt = 0; dt < SPYRE_DT_COUNT; dt++)
		test_transpose(dt, 7, 45);
	test_transpose(SPYRE_DT_FP32, 64, 3);
}

static const struct tap_case cases[] = {
	{ "matmul", test_matmuls },
	{ "matmul_accumulate", test_matmuls_accumulate },
	{ "matmul_nan", test_matmul_nan },
	{ "gemm_pack_rows", test_gemm_pack_rows },
	{ "binary", test_binaries },
	{ "unary", test_unaries },
	{ "cast", test_casts },
	{ "fill", test_fills },
	{ "reduce", test_reductions },
	{ "softmax", test_softmaxes },
	{ "transpose", test_transposes },
	{ "transpose_dense", test_transposes_dense },
	{ "binary_nan", test_binary_nan },
	{ "movm", test_movms },
	{ "tril", test_trils },
	{ "control", test_control },
	{ "dma", test_dma },
	{ "dma_registers", test_dma_registers },
	{ "argmax", test_argmax },
};

int main(int argc, char **argv)
{
	static const struct flatmem_test t = {
		.engine = &E, .mem = &M, .base = 0x100000000ull, .size = 16u << 20,
	};

	return FLATMEM_TEST_MAIN(&t, cases, argc, argv);
}
