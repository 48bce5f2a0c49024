// SPDX-License-Identifier: MIT
/*
 * The engine's matmul kernels. spyre_sgemm is a blocked GEMM in the style of
 * GotoBLAS/BLIS: B is packed into 16-column panels of SPYRE_SGEMM_KC rows, a
 * 6x16 register-blocked micro-kernel written with GCC vector extensions
 * broadcasts A and accumulates in 12 vector registers. target_clones builds
 * AVX2+FMA and baseline versions and picks one at load time, so QEMU (built
 * without -march) still gets the fast path.
 */
#include <string.h>

#include "spyre_gemm.h"

typedef float v8f __attribute__((vector_size(32), aligned(4)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(SPYRE_NO_CLONES)
#define SPYRE_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SPYRE_CLONES
#endif

static void pack_b(size_t kc, size_t n, const float *b, size_t ldb, float *pack)
{
	size_t np = (n + SPYRE_SGEMM_NR - 1) / SPYRE_SGEMM_NR;

	for (size_t jp = 0; jp < np; jp++) {
		size_t j0 = jp * SPYRE_SGEMM_NR, w = n - j0 < SPYRE_SGEMM_NR ? n - j0 : SPYRE_SGEMM_NR;
		float *dst = pack + jp * kc * SPYRE_SGEMM_NR;

		for (size_t p = 0; p < kc; p++) {
			const float *src = b + p * ldb + j0;

			if (w == SPYRE_SGEMM_NR) {
				memcpy(dst + p * SPYRE_SGEMM_NR, src, SPYRE_SGEMM_NR * sizeof(float));
			} else {
				memset(dst + p * SPYRE_SGEMM_NR, 0, SPYRE_SGEMM_NR * sizeof(float));
				memcpy(dst + p * SPYRE_SGEMM_NR, src, w * sizeof(float));
			}
		}
	}
}

/*
 * 6x16 micro-kernel: t = A[0:6, 0:kc] * Bpanel[0:kc, 0:16]. Rows of A beyond
 * the tile's height point at row 0 (valid memory) and their results are
 * discarded by the caller.
 */
static inline __attribute__((always_inline)) void
micro_6x16(size_t kc, const float *const ar[SPYRE_SGEMM_MR], const float *bp,
	   float t[SPYRE_SGEMM_MR][SPYRE_SGEMM_NR])
{
	v8f c00 = { 0 }, c01 = { 0 }, c10 = { 0 }, c11 = { 0 }, c20 = { 0 }, c21 = { 0 };
	v8f c30 = { 0 }, c31 = { 0 }, c40 = { 0 }, c41 = { 0 }, c50 = { 0 }, c51 = { 0 };
	const float *a0 = ar[0], *a1 = ar[1], *a2 = ar[2], *a3 = ar[3], *a4 = ar[4], *a5 = ar[5];

	for (size_t p = 0; p < kc; p++) {
		v8f b0, b1;

		memcpy(&b0, bp + p * SPYRE_SGEMM_NR, sizeof(b0));
		memcpy(&b1, bp + p * SPYRE_SGEMM_NR + 8, sizeof(b1));
		v8f x;

		x = (v8f){ 0 } + a0[p]; c00 += x * b0; c01 += x * b1;
		x = (v8f){ 0 } + a1[p]; c10 += x * b0; c11 += x * b1;
		x = (v8f){ 0 } + a2[p]; c20 += x * b0; c21 += x * b1;
		x = (v8f){ 0 } + a3[p]; c30 += x * b0; c31 += x * b1;
		x = (v8f){ 0 } + a4[p]; c40 += x * b0; c41 += x * b1;
		x = (v8f){ 0 } + a5[p]; c50 += x * b0; c51 += x * b1;
	}
	memcpy(&t[0][0], &c00, 32); memcpy(&t[0][8], &c01, 32);
	memcpy(&t[1][0], &c10, 32); memcpy(&t[1][8], &c11, 32);
	memcpy(&t[2][0], &c20, 32); memcpy(&t[2][8], &c21, 32);
	memcpy(&t[3][0], &c30, 32); memcpy(&t[3][8], &c31, 32);
	memcpy(&t[4][0], &c40, 32); memcpy(&t[4][8], &c41, 32);
	memcpy(&t[5][0], &c50, 32); memcpy(&t[5][8], &c51, 32);
}

SPYRE_CLONES
void spyre_sgemm(size_t m, size_t n, size_t k, const float *a, size_t lda,
		 const float *b, size_t ldb, float *c, size_t ldc, int acc, float *pack)
{
	size_t np = (n + SPYRE_SGEMM_NR - 1) / SPYRE_SGEMM_NR;

	if (!acc)
		for (size_t i = 0; i < m; i++)
			memset(c + i * ldc, 0, n * sizeof(float));
	for (size_t p0 = 0; p0 < k; p0 += SPYRE_SGEMM_KC) {
		size_t kc = k - p0 < SPYRE_SGEMM_KC ? k - p0 : SPYRE_SGEMM_KC;

		pack_b(kc, n, b + p0 * ldb, ldb, pack);
		/* BLIS order: a block of A rows stays in L2, one packed B panel in L1 */
		for (size_t ib = 0; ib < m; ib += SPYRE_SGEMM_MC) {
			size_t mc = m - ib < SPYRE_SGEMM_MC ? m - ib : SPYRE_SGEMM_MC;

			for (size_t jp = 0; jp < np; jp++) {
				size_t j0 = jp * SPYRE_SGEMM_NR;
				size_t w = n - j0 < SPYRE_SGEMM_NR ? n - j0 : SPYRE_SGEMM_NR;
				const float *bp = pack + jp * kc * SPYRE_SGEMM_NR;

				for (size_t i0 = ib; i0 < ib + mc; i0 += SPYRE_SGEMM_MR) {
					size_t h = ib + mc - i0 < SPYRE_SGEMM_MR ? ib + mc - i0 : SPYRE_SGEMM_MR;
					const float *ar[SPYRE_SGEMM_MR];
					float t[SPYRE_SGEMM_MR][SPYRE_SGEMM_NR];

					for (size_t r = 0; r < SPYRE_SGEMM_MR; r++)
						ar[r] = a + (i0 + (r < h ? r : 0)) * lda + p0;
					micro_6x16(kc, ar, bp, t);
					for (size_t r = 0; r < h; r++) {
						float *cr = c + (i0 + r) * ldc + j0;

						for (size_t j = 0; j < w; j++)
							cr[j] += t[r][j];
					}
				}
			}
		}
	}
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
