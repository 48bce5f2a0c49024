/* SPDX-License-Identifier: MIT */
/*
 * spyre_gemm.h - the engine's fast inner kernels (internal): the fp32 and
 * int8 GEMMs behind MATMUL. Named apart from libspyre's public
 * spyre_kernels.h (the kernel library), which it has nothing to do with.
 */
#ifndef SPYRE_GEMM_H
#define SPYRE_GEMM_H

#include <stddef.h>
#include <stdint.h>

#define SPYRE_SGEMM_KC		256	/* k block */
#define SPYRE_SGEMM_NR		16	/* micro-tile columns */
#define SPYRE_SGEMM_MR		6	/* micro-tile rows */
#define SPYRE_SGEMM_MC		96	/* rows of A per L2 block */

/* Floats of packing buffer spyre_sgemm() needs for n columns (B's panels, then A's). */
#define SPYRE_SGEMM_PACK_FLOATS(n) \
	((size_t)SPYRE_SGEMM_KC * (((size_t)(n) + SPYRE_SGEMM_NR - 1) / SPYRE_SGEMM_NR * SPYRE_SGEMM_NR + \
				   SPYRE_SGEMM_MC))

/*
 * C[m,n] = (acc ? C : 0) + A[m,k] B[k,n], row-major with leading dimensions
 * in elements, fp32 with fp32 accumulation. pack holds
 * SPYRE_SGEMM_PACK_FLOATS(n) floats, 64-byte aligned.
 */
void spyre_sgemm(size_t m, size_t n, size_t k, const float *a, size_t lda,
		 const float *b, size_t ldb, float *c, size_t ldc, int acc, float *pack);

/*
 * B[k,n] packed as spyre_sgemm() packs it, all k at once:
 * SPYRE_SGEMM_PACKED_FLOATS(n, k) floats, 64-byte aligned. spyre_sgemm_packed()
 * is spyre_sgemm() on it (the same results, bit for bit); its pack holds
 * SPYRE_SGEMM_KC * SPYRE_SGEMM_MC floats (A's packing).
 */
#define SPYRE_SGEMM_PACKED_FLOATS(n, k) \
	((size_t)(k) * (((size_t)(n) + SPYRE_SGEMM_NR - 1) / SPYRE_SGEMM_NR * SPYRE_SGEMM_NR))
void spyre_sgemm_pack_b(size_t n, size_t k, const float *b, size_t ldb, float *packed);
/*
 * Row p of that B (n floats at row) into its packed layout, and back out to
 * row (any alignment): packing every row one at a time gives the bytes
 * spyre_sgemm_pack_b() gives.
 */
void spyre_sgemm_pack_b_row(size_t n, size_t k, size_t p, const float *row, float *packed);
void spyre_sgemm_unpack_b_row(size_t n, size_t k, size_t p, const float *packed, void *row);
void spyre_sgemm_packed(size_t m, size_t n, size_t k, const float *a, size_t lda,
			const float *bpacked, float *c, size_t ldc, int acc, float *pack);

/* C[m,n] = (acc ? C : 0) + A B, int8 inputs, int32 accumulation (wrapping). */
void spyre_igemm(size_t m, size_t n, size_t k, const int8_t *a, size_t lda,
		 const int8_t *b, size_t ldb, int32_t *c, size_t ldc, int acc);

#endif /* SPYRE_GEMM_H */
