/* SPDX-License-Identifier: MIT */
/* spyre_internal.h - shared between the engine's source files (not API). */
#ifndef SPYRE_INTERNAL_H
#define SPYRE_INTERNAL_H

#include <stdint.h>

#include "spyre_engine.h"

enum spyre_opclass {
	SPYRE_CLS_NONE,		/* unknown opcode */
	SPYRE_CLS_CTL,
	SPYRE_CLS_DMA,
	SPYRE_CLS_MATMUL,
	SPYRE_CLS_BINARY,
	SPYRE_CLS_UNARY,	/* RELU, GELU, SILU, EXP, RSQRT */
	SPYRE_CLS_SCALE,
	SPYRE_CLS_CAST,
	SPYRE_CLS_FILL,
	SPYRE_CLS_REDUCE,
	SPYRE_CLS_SOFTMAX,
	SPYRE_CLS_TRANSPOSE,
	SPYRE_CLS_ARGMAX,
	SPYRE_CLS_RING,
};

enum spyre_opclass spyre_opclass(uint32_t opcode);
/* exp, gelu, silu, rsqrt: run through the SFU's transcendental path */
int spyre_op_transcendental(uint32_t opcode);

/* Bytes spanned by a tile of rows x cols elements of esz bytes, ld sticks apart. */
uint64_t spyre_tile_extent(uint64_t rows, uint64_t cols, uint32_t esz, uint32_t ld);

/* Check a whole image's container; on success fill the sections. */
struct spyre_prog_view {
	const uint8_t *image;
	uint64_t size;
	struct spyre_prog_hdr hdr;
	struct spyre_prog_core cores[SPYRE_MAX_CORES];
};
uint32_t spyre_prog_check_container(const void *image, uint64_t size, struct spyre_prog_view *v);
void spyre_prog_get_sym(const struct spyre_prog_view *v, uint32_t i, struct spyre_prog_sym *s);

static inline uint32_t spyre_ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t spyre_ld64(const uint8_t *p)
{
	return (uint64_t)spyre_ld32(p) | (uint64_t)spyre_ld32(p + 4) << 32;
}

static inline uint16_t spyre_ld16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

#endif /* SPYRE_INTERNAL_H */
