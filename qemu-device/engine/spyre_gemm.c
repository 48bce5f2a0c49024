// SPDX-License-Identifier: MIT
/*
 * The engine's matmul kernels. spyre_sgemm is a blocked GEMM in the style of
 * GotoBLAS/BLIS: for each block of SPYRE_SGEMM_KC rows of B, B is packed
 * into 16-column panels (p-major: the micro-kernel reads them sequentially)
 * and a block of A's rows copied as 0.0f + a (vector adds); a 6x16 register-blocked
 * micro-kernel written with GCC vector extensions broadcasts A from memory
 * and accumulates in 12 vector registers, then adds its tile to C.
 * target_clones builds AVX2+FMA and baseline versions and picks one at load
 * time, so QEMU (built without -march) still gets the fast path.
 *
 * The numerics are fixed (the engine's results are compared bit for bit):
 * each element of C is, per KC block of k in order, a chain
 * t = t + a[i][p] * b[p][j] from t = +0 (contracted to FMA where the target
 * has it), added to C as C + t (C starting at +0 without SPYRE_IF_ACC). A
 * enters the chain as 0.0f + a, which the packing applies. Blocking along m
 * and n, the panel shapes and the loop order beyond that are free.
 */
#include <string.h>

#include "spyre_gemm.h"

typedef float v8f __attribute__((vector_size(32), aligned(4)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(SPYRE_NO_CLONES)
#define SPYRE_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SPYRE_CLONES
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
 * 6x16 micro-kernel: C[0:h, 0:w] = (first ? +0 : C) + Apacked[0:h, 0:kc] * Bpanel[0:kc]
 * (h <= 6, w <= 16; rows beyond h repeat row 0, columns beyond w are the
 * panel's padding: computed and dropped). Its shape is part of the numerics:
 * with NaNs in two of an FMA's operands, the one the instruction's operand
 * order puts first comes out, and GCC compiles this kernel to vfmadd231ps
 * (accumulator first) throughout; a kernel of fewer rows, or another tile
 * shape, may get vfmadd132ps for some and other NaNs (objdump to check).
 */
static inline __attribute__((always_inline)) void
micro_6x16(size_t kc, const float *ap, const float *bp, float *c, size_t ldc, size_t h, size_t w, int first)
{
	v8f c00 = { 0 }, c01 = { 0 }, c10 = { 0 }, c11 = { 0 }, c20 = { 0 }, c21 = { 0 };
	v8f c30 = { 0 }, c31 = { 0 }, c40 = { 0 }, c41 = { 0 }, c50 = { 0 }, c51 = { 0 };
	const float *a0 = ap, *a1 = ap + (h > 1) * kc, *a2 = ap + (h > 2) * 2 * kc, *a3 = ap + (h > 3) * 3 * kc;
	const float *a4 = ap + (h > 4) * 4 * kc, *a5 = ap + (h > 5) * 5 * kc;

	for (size_t p = 0; p < kc; p++) {
		v8f b0, b1, x;

		LD8(b0, bp);
		LD8(b1, bp + 8);
		x = BCAST(a0 + p); c00 += x * b0; c01 += x * b1;
		x = BCAST(a1 + p); c10 += x * b0; c11 += x * b1;
		x = BCAST(a2 + p); c20 += x * b0; c21 += x * b1;
		x = BCAST(a3 + p); c30 += x * b0; c31 += x * b1;
		x = BCAST(a4 + p); c40 += x * b0; c41 += x * b1;
		x = BCAST(a5 + p); c50 += x * b0; c51 += x * b1;
		bp += NR;
	}
	v8f t[MR][2] = { { c00, c01 }, { c10, c11 }, { c20, c21 }, { c30, c31 }, { c40, c41 }, { c50, c51 } };

	if (w == NR) {
		for (size_t r = 0; r < h; r++) {
			float *cr = c + r * ldc;
			v8f u0 = { 0 }, u1 = { 0 };

			if (!first) {
				LD8(u0, cr);
				LD8(u1, cr + 8);
			}
			u0 += t[r][0];
			u1 += t[r][1];
			ST8(cr, u0);
			ST8(cr + 8, u1);
		}
		return;
	}
	for (size_t r = 0; r < h; r++) {
		float *cr = c + r * ldc, tt[NR];

		memcpy(tt, t[r], sizeof(tt));
		for (size_t j = 0; j < w; j++)
			cr[j] = (first ? 0.0f : cr[j]) + tt[j];
	}
}

SPYRE_CLONES
void spyre_sgemm_pack_b(size_t n, size_t k, const float *b, size_t ldb, float *packed)
{
	size_t np = (n + NR - 1) / NR;

	for (size_t p0 = 0; p0 < k; p0 += KC)
		pack_b(k - p0 < KC ? k - p0 : KC, n, b + p0 * ldb, ldb, packed + p0 * np * NR);
}

/* spyre_sgemm() and spyre_sgemm_packed(): B packed here per KC block (bpacked NULL) or all of it before */
static inline __attribute__((always_inline)) void
sgemm(size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b, size_t ldb, const float *bpacked,
      float *c, size_t ldc, int acc, float *pack)
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
			size_t mc = m - ib < MC ? m - ib : MC;

			pack_a(mc, kc, a + ib * lda + p0, lda, apack);
			for (size_t jp = 0; jp < np; jp++) {
				size_t j0 = jp * NR, w = n - j0 < NR ? n - j0 : NR;
				const float *bp = bpk + jp * kc * NR;

				for (size_t i0 = 0; i0 < mc; i0 += MR)
					micro_6x16(kc, apack + i0 * kc, bp, c + (ib + i0) * ldc + j0, ldc,
						   mc - i0 < MR ? mc - i0 : MR, w, first);
			}
		}
	}
}

SPYRE_CLONES
void spyre_sgemm(size_t m, size_t n, size_t k, const float *a, size_t lda,
		 const float *b, size_t ldb, float *c, size_t ldc, int acc, float *pack)
{
	sgemm(m, n, k, a, lda, b, ldb, NULL, c, ldc, acc, pack);
}

SPYRE_CLONES
void spyre_sgemm_packed(size_t m, size_t n, size_t k, const float *a, size_t lda,
			const float *bpacked, float *c, size_t ldc, int acc, float *pack)
{
	sgemm(m, n, k, a, lda, NULL, 0, bpacked, c, ldc, acc, pack);
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
