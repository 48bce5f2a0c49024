// SPDX-License-Identifier: MIT
/*
 * The engine's matmul kernels. spyre_sgemm is a blocked GEMM in the style of
 * GotoBLAS/BLIS: for each block of SPYRE_SGEMM_KC rows of B, B is packed
 * into 16-column panels (p-major: the micro-kernel reads them sequentially)
 * and a block of A's rows copied as 0.0f + a (vector adds); a 6x16 register-blocked
 * micro-kernel written with GCC vector extensions broadcasts A from memory
 * and accumulates in 12 vector registers, then adds its tile to C. A
 * block's last rows (fewer than 6) go through an R x 16P kernel of as many
 * accumulators (R = 1..5 rows, P = 6, 3, 2, 1, 1 panels), not through the
 * 6x16 one with rows computed and dropped.
 * The fp32 GEMM is built twice, for x86-64-v3 (AVX2+FMA) and the baseline,
 * and picks one at run time (__builtin_cpu_supports), so QEMU (built
 * without -march) still gets the fast path; the int8 GEMM and B's packing
 * use target_clones.
 *
 * The numerics are fixed (the engine's results are compared bit for bit):
 * each element of C is, per KC block of k in order, a chain
 * t = t + a[i][p] * b[p][j] from t = +0 (an FMA where the target has it),
 * added to C as C + t (C starting at +0 without SPYRE_IF_ACC). A
 * enters the chain as 0.0f + a, which the packing applies. Blocking along m
 * and n, the panel shapes and the loop order beyond that are free.
 * With NaNs in more than one operand, which comes out depends on the
 * instruction's operand order (and on the host CPU: Intel's and AMD's FMAs
 * differ): on x86-64-v3, FMA() is always vfmadd231ps acc, b, a and ADDV() /
 * ADDS() always C + t with C first, whatever registers the compiler picks, so
 * every kernel shape and every position of a row in a tile gives the same
 * NaNs (ops-test's matmul_nan).
 */
#include <string.h>

#include "spyre_gemm.h"

typedef float v8f __attribute__((vector_size(32), aligned(4)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(SPYRE_NO_CLONES)
#define SPYRE_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#define SPYRE_V3 __attribute__((target("arch=x86-64-v3")))
#define HAVE_V3 1
/* acc += x * b as one vfmadd231ps acc, b, x (AT&T operands reversed); fma is a constant once inlined */
#define FMA(acc, x, b) do { \
	if (fma) \
		__asm__("vfmadd231ps %2, %1, %0" : "+x"(acc) : "x"(b), "x"(x)); \
	else \
		(acc) += (x) * (b); \
} while (0)
/* c += t, vector (ADDV) or scalar (ADDS), as one vaddps / vaddss with c the first operand */
#define ADDV(c, t) do { \
	if (fma) \
		__asm__("vaddps %1, %0, %0" : "+x"(c) : "x"(t)); \
	else \
		(c) += (t); \
} while (0)
#define ADDS(c, t) do { \
	if (fma) \
		__asm__("vaddss %1, %0, %0" : "+x"(c) : "x"(t)); \
	else \
		(c) += (t); \
} while (0)
#else
#define SPYRE_CLONES
#define HAVE_V3 0
#define FMA(acc, x, b) ((void)fma, (acc) += (x) * (b))
#define ADDV(c, t) ((void)fma, (c) += (t))
#define ADDS(c, t) ((void)fma, (c) += (t))
#endif

#define MR SPYRE_SGEMM_MR
#define NR SPYRE_SGEMM_NR
#define KC SPYRE_SGEMM_KC
#define MC SPYRE_SGEMM_MC

/*
 * Loads, stores and broadcasts as macros, not functions: a helper taking or
 * returning v8f is compiled for the baseline ABI before it is inlined into
 * the AVX2 clone, and the clone gets the baseline's split code.
 * scalar - vector broadcasts; x - +0 is x (folded away): a vbroadcastss.
 */
#define LD8(v, p) memcpy(&(v), (p), sizeof(v8f))
#define ST8(p, v) memcpy((p), &(v), sizeof(v8f))
#define BCAST(p) (*(p) - (v8f){ 0 })

/*
 * B[0:kc, 0:n] into ceil(n/16) panels of kc x 16, p-major, zero-padded. B is
 * read along its rows, 8 panels' width at a time (sequential reads the
 * prefetchers follow; 8 write streams, not one a panel).
 */
#define PACK_GROUP 8

static inline __attribute__((always_inline)) void
pack_b(size_t kc, size_t n, const float *b, size_t ldb, float *pack)
{
	size_t np = (n + NR - 1) / NR, full = n / NR;

	for (size_t g = 0; g < full; g += PACK_GROUP) {
		size_t ge = g + PACK_GROUP < full ? g + PACK_GROUP : full;

		for (size_t p = 0; p < kc; p++) {
			const float *src = b + p * ldb;

			for (size_t jp = g; jp < ge; jp++) {
				float *dst = pack + jp * kc * NR + p * NR;
				v8f x0, x1;

				LD8(x0, src + jp * NR);
				LD8(x1, src + jp * NR + 8);
				ST8(dst, x0);
				ST8(dst + 8, x1);
			}
		}
	}
	if (full < np) {
		size_t j0 = full * NR, w = n - j0;
		float *dst = pack + full * kc * NR;

		for (size_t p = 0; p < kc; p++) {
			memset(dst + p * NR, 0, NR * sizeof(float));
			memcpy(dst + p * NR, b + p * ldb + j0, w * sizeof(float));
		}
	}
}

/* A[0:mc, 0:kc] as 0.0f + a, rows kc apart (a vector add and copy: the micro-kernel broadcasts from it). */
static inline __attribute__((always_inline)) void
pack_a(size_t mc, size_t kc, const float *a, size_t lda, float *pack)
{
	const v8f z = { 0 };

	for (size_t i = 0; i < mc; i++) {
		const float *src = a + i * lda;
		float *dst = pack + i * kc;
		size_t p = 0;

		for (; p + 8 <= kc; p += 8) {
			v8f x;

			LD8(x, src + p);
			x = z + x;
			ST8(dst + p, x);
		}
		for (; p < kc; p++)
			dst[p] = 0.0f + src[p];
	}
}

/*
 * C row cr[0:w] = (first ? +0 : cr) + the 16 columns o0, o1 (ADDV / ADDS: C
 * first), for every micro-kernel.
 */
#define PUT_ROW(cr, o0, o1, w, first) do { \
	if ((w) == NR) { \
		v8f c0_ = { 0 }, c1_ = { 0 }; \
		if (!(first)) { \
			LD8(c0_, (cr)); \
			LD8(c1_, (cr) + 8); \
		} \
		ADDV(c0_, o0); \
		ADDV(c1_, o1); \
		ST8((cr), c0_); \
		ST8((cr) + 8, c1_); \
	} else { \
		float tt_[NR]; \
		v8f p0_ = (o0), p1_ = (o1); \
		ST8(tt_, p0_); \
		ST8(tt_ + 8, p1_); \
		for (size_t j_ = 0; j_ < (w); j_++) { \
			float s_ = (first) ? 0.0f : (cr)[j_]; \
			ADDS(s_, tt_[j_]); \
			(cr)[j_] = s_; \
		} \
	} \
} while (0)

/*
 * 6x16 micro-kernel: C[0:h, 0:w] = (first ? +0 : C) + Apacked[0:h, 0:kc] * Bpanel[0:kc]
 * (h <= 6, w <= 16; rows beyond h repeat row 0, columns beyond w are the
 * panel's padding: computed and dropped).
 */
static inline __attribute__((always_inline)) void
micro_6x16(size_t kc, const float *ap, const float *bp, float *c, size_t ldc, size_t h, size_t w, int first,
	   const int fma)
{
	v8f c00 = { 0 }, c01 = { 0 }, c10 = { 0 }, c11 = { 0 }, c20 = { 0 }, c21 = { 0 };
	v8f c30 = { 0 }, c31 = { 0 }, c40 = { 0 }, c41 = { 0 }, c50 = { 0 }, c51 = { 0 };
	const float *a0 = ap, *a1 = ap + (h > 1) * kc, *a2 = ap + (h > 2) * 2 * kc, *a3 = ap + (h > 3) * 3 * kc;
	const float *a4 = ap + (h > 4) * 4 * kc, *a5 = ap + (h > 5) * 5 * kc;

	for (size_t p = 0; p < kc; p++) {
		v8f b0, b1, x;

		LD8(b0, bp);
		LD8(b1, bp + 8);
		x = BCAST(a0 + p); FMA(c00, x, b0); FMA(c01, x, b1);
		x = BCAST(a1 + p); FMA(c10, x, b0); FMA(c11, x, b1);
		x = BCAST(a2 + p); FMA(c20, x, b0); FMA(c21, x, b1);
		x = BCAST(a3 + p); FMA(c30, x, b0); FMA(c31, x, b1);
		x = BCAST(a4 + p); FMA(c40, x, b0); FMA(c41, x, b1);
		x = BCAST(a5 + p); FMA(c50, x, b0); FMA(c51, x, b1);
		bp += NR;
	}
	v8f t[MR][2] = { { c00, c01 }, { c10, c11 }, { c20, c21 }, { c30, c31 }, { c40, c41 }, { c50, c51 } };

	for (size_t r = 0; r < h; r++)
		PUT_ROW(c + r * ldc, t[r][0], t[r][1], w, first);
}

/*
 * Pair i (0..5) of micro_rem's named accumulators through OP(u, v): the
 * switch folds away once i is a constant (the loops below unrolled), and the
 * accumulators stay in registers, as an array's elements would not always.
 */
#define PAIR(i, OP) do { \
	switch (i) { \
	case 0: OP(u0, v0); break; \
	case 1: OP(u1, v1); break; \
	case 2: OP(u2, v2); break; \
	case 3: OP(u3, v3); break; \
	case 4: OP(u4, v4); break; \
	default: OP(u5, v5); break; \
	} \
} while (0)
#define REM_FMA(u, v) do { FMA(u, x, b0); FMA(v, x, b1); } while (0)
#define REM_OUT(u, v) do { o0 = (u); o1 = (v); } while (0)

/*
 * R x 16P micro-kernel for a block's last R (< 6) rows: P panels of B, kc * 16
 * floats apart, the last w columns wide (w < 16 only with P = 1), with
 * R * P <= 6 pairs of accumulators (pair r * P + q: row r, panel q). The
 * same chain per element as micro_6x16.
 */
static inline __attribute__((always_inline)) void
micro_rem(size_t kc, const float *ap, const float *bp, float *c, size_t ldc, size_t w, int first, const int fma,
	  const size_t R, const size_t P)
{
	v8f u0 = { 0 }, v0 = { 0 }, u1 = { 0 }, v1 = { 0 }, u2 = { 0 }, v2 = { 0 };
	v8f u3 = { 0 }, v3 = { 0 }, u4 = { 0 }, v4 = { 0 }, u5 = { 0 }, v5 = { 0 };

	for (size_t p = 0; p < kc; p++) {
#pragma GCC unroll 6
		for (size_t q = 0; q < P; q++) {
			v8f b0, b1;

			LD8(b0, bp + q * kc * NR + p * NR);
			LD8(b1, bp + q * kc * NR + p * NR + 8);
#pragma GCC unroll 6
			for (size_t r = 0; r < R; r++) {
				v8f x = BCAST(ap + r * kc + p);

				PAIR(r * P + q, REM_FMA);
			}
		}
	}
#pragma GCC unroll 6
	for (size_t q = 0; q < P; q++) {
#pragma GCC unroll 6
		for (size_t r = 0; r < R; r++) {
			v8f o0, o1;

			PAIR(r * P + q, REM_OUT);
			PUT_ROW(c + r * ldc + q * NR, o0, o1, w, first);
		}
	}
}

/*
 * The last R rows of a block over all np panels (n columns): P panels at a
 * time, then one at a time (the last may be narrower than 16).
 */
static inline __attribute__((always_inline)) void
rows_rem(size_t kc, size_t n, size_t np, const float *ap, const float *bpk, float *c, size_t ldc, int first,
	 const int fma, const size_t R, const size_t P)
{
	size_t full = n / NR, jp = 0;

	for (; P > 1 && jp + P <= full; jp += P)
		micro_rem(kc, ap, bpk + jp * kc * NR, c + jp * NR, ldc, NR, first, fma, R, P);
	for (; jp < np; jp++)
		micro_rem(kc, ap, bpk + jp * kc * NR, c + jp * NR, ldc, n - jp * NR < NR ? n - jp * NR : NR, first, fma,
			  R, 1);
}

SPYRE_CLONES
void spyre_sgemm_pack_b(size_t n, size_t k, const float *b, size_t ldb, float *packed)
{
	size_t np = (n + NR - 1) / NR;

	for (size_t p0 = 0; p0 < k; p0 += KC)
		pack_b(k - p0 < KC ? k - p0 : KC, n, b + p0 * ldb, ldb, packed + p0 * np * NR);
}

/* Where row p of B (n columns, k rows) starts in spyre_sgemm_pack_b()'s layout, and its k block's height. */
static float *packed_row(size_t n, size_t k, size_t p, const float *packed, size_t *kc)
{
	size_t np = (n + NR - 1) / NR, p0 = p / KC * KC;

	*kc = k - p0 < KC ? k - p0 : KC;
	return (float *)packed + p0 * np * NR + (p - p0) * NR;
}

void spyre_sgemm_pack_b_row(size_t n, size_t k, size_t p, const float *row, float *packed)
{
	size_t kc, full = n / NR;
	float *dst = packed_row(n, k, p, packed, &kc);

	for (size_t jp = 0; jp < full; jp++)
		memcpy(dst + jp * kc * NR, row + jp * NR, NR * sizeof(float));
	if (full * NR < n) {
		memset(dst + full * kc * NR, 0, NR * sizeof(float));
		memcpy(dst + full * kc * NR, row + full * NR, (n - full * NR) * sizeof(float));
	}
}

void spyre_sgemm_unpack_b_row(size_t n, size_t k, size_t p, const float *packed, void *row)
{
	size_t kc, np = (n + NR - 1) / NR;
	const float *src = packed_row(n, k, p, packed, &kc);

	for (size_t jp = 0; jp < np; jp++) {
		size_t w = n - jp * NR < NR ? n - jp * NR : NR;

		memcpy((uint8_t *)row + jp * NR * sizeof(float), src + jp * kc * NR, w * sizeof(float));
	}
}

/* spyre_sgemm() and spyre_sgemm_packed(): B packed here per KC block (bpacked NULL) or all of it before */
static inline __attribute__((always_inline)) void
sgemm(size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b, size_t ldb, const float *bpacked,
      float *c, size_t ldc, int acc, float *pack, const int fma)
{
	size_t np = (n + NR - 1) / NR;
	float *apack = bpacked ? pack : pack + (size_t)KC * np * NR;

	if (!k) {
		if (!acc)
			for (size_t i = 0; i < m; i++)
				memset(c + i * ldc, 0, n * sizeof(float));
		return;
	}
	for (size_t p0 = 0; p0 < k; p0 += KC) {
		size_t kc = k - p0 < KC ? k - p0 : KC;
		int first = !acc && !p0;

		const float *bpk = bpacked ? bpacked + p0 * np * NR : pack;

		if (!bpacked)
			pack_b(kc, n, b + p0 * ldb, ldb, pack);
		/* BLIS order: a packed block of A rows stays in L2, one packed B panel in L1 */
		for (size_t ib = 0; ib < m; ib += MC) {
			size_t mc = m - ib < MC ? m - ib : MC, m6 = mc / MR * MR;
			float *cb = c + ib * ldc;

			pack_a(mc, kc, a + ib * lda + p0, lda, apack);
			for (size_t jp = 0; m6 && jp < np; jp++) {
				size_t j0 = jp * NR, w = n - j0 < NR ? n - j0 : NR;
				const float *bp = bpk + jp * kc * NR;

				for (size_t i0 = 0; i0 < m6; i0 += MR)
					micro_6x16(kc, apack + i0 * kc, bp, cb + i0 * ldc + j0, ldc, MR, w, first, fma);
			}
			const float *ar = apack + m6 * kc;
			float *cr = cb + m6 * ldc;

			switch (mc - m6) {
			case 1:
				rows_rem(kc, n, np, ar, bpk, cr, ldc, first, fma, 1, 6);
				break;
			case 2:
				rows_rem(kc, n, np, ar, bpk, cr, ldc, first, fma, 2, 3);
				break;
			case 3:
				rows_rem(kc, n, np, ar, bpk, cr, ldc, first, fma, 3, 2);
				break;
			case 4:
				rows_rem(kc, n, np, ar, bpk, cr, ldc, first, fma, 4, 1);
				break;
			case 5:
				rows_rem(kc, n, np, ar, bpk, cr, ldc, first, fma, 5, 1);
				break;
			}
		}
	}
}

/* The GEMM for x86-64-v3 (FMA() an FMA) and for the baseline, and the choice between them. */
#define SGEMM_ARGS size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b, size_t ldb, \
	const float *bpacked, float *c, size_t ldc, int acc, float *pack

static void sgemm_base(SGEMM_ARGS)
{
	sgemm(m, n, k, a, lda, b, ldb, bpacked, c, ldc, acc, pack, 0);
}

#if HAVE_V3
SPYRE_V3 static void sgemm_v3(SGEMM_ARGS)
{
	sgemm(m, n, k, a, lda, b, ldb, bpacked, c, ldc, acc, pack, 1);
}
#endif

static void sgemm_any(SGEMM_ARGS)
{
#if HAVE_V3
	if (__builtin_cpu_supports("x86-64-v3")) {
		sgemm_v3(m, n, k, a, lda, b, ldb, bpacked, c, ldc, acc, pack);
		return;
	}
#endif
	sgemm_base(m, n, k, a, lda, b, ldb, bpacked, c, ldc, acc, pack);
}

void spyre_sgemm(size_t m, size_t n, size_t k, const float *a, size_t lda,
		 const float *b, size_t ldb, float *c, size_t ldc, int acc, float *pack)
{
	sgemm_any(m, n, k, a, lda, b, ldb, NULL, c, ldc, acc, pack);
}

void spyre_sgemm_packed(size_t m, size_t n, size_t k, const float *a, size_t lda,
			const float *bpacked, float *c, size_t ldc, int acc, float *pack)
{
	sgemm_any(m, n, k, a, lda, NULL, 0, bpacked, c, ldc, acc, pack);
}

SPYRE_CLONES
void spyre_igemm(size_t m, size_t n, size_t k, const int8_t *a, size_t lda,
		 const int8_t *b, size_t ldb, int32_t *c, size_t ldc, int acc)
{
	for (size_t i = 0; i < m; i++) {
		int32_t *cr = c + i * ldc;

		if (!acc)
			memset(cr, 0, n * sizeof(int32_t));
		for (size_t p = 0; p < k; p++) {
			/* int32 products of int8 cannot overflow; sums wrap (-fwrapv) */
			int32_t av = a[i * lda + p];
			const int8_t *br = b + p * ldb;

			for (size_t j = 0; j < n; j++)
				cr[j] = (int32_t)((uint32_t)cr[j] + (uint32_t)(av * br[j]));
		}
	}
}
