/* SPDX-License-Identifier: MIT */
/*
 * spyre_progbuild.h - the ISA library's program builder: spyre program
 * images (uapi/spyre_isa.h) from C, and the runtime's relocation. Used by
 * the assembler, the kernel library, spyre-run, and the engine's, device's
 * and libspyre's tests. Includes the codec (spyre_isa_codec.h).
 *
 *	struct spyre_pb *pb = spyre_pb_new();
 *	int x = spyre_pb_sym(pb, "x", SPYRE_DT_FP32, 1, (uint64_t[]){ 32 }, 128, SPYRE_SYM_IN);
 *	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = x }, .row_bytes = 128 });
 *	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_RELU, .dt = SPYRE_DT_FP32,
 *		.dt2 = SPYRE_DT_FP32, .rows = 1, .cols = 32 });
 *	...
 *	spyre_pb_finish(pb, &image, &size);	// malloc'd image
 *
 * Emitters return the instruction's pc (>= 0) or -1; an error also sticks
 * in the builder and makes spyre_pb_finish() fail, so callers may check once.
 * spyre_pb_emit() takes any encoding as it is (tests of malformed programs).
 */
#ifndef SPYRE_PROGBUILD_H
#define SPYRE_PROGBUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spyre_isa_codec.h"

struct spyre_pb;

struct spyre_pb *spyre_pb_new(void);
void spyre_pb_free(struct spyre_pb *pb);

/* Add a tensor slot; returns its index. */
int spyre_pb_sym(struct spyre_pb *pb, const char *name, unsigned dtype, unsigned rank,
		 const uint64_t *shape, uint64_t size, unsigned flags);
void spyre_pb_set_scalars(struct spyre_pb *pb, uint32_t n);
/* Append constant data (padded to 128 bytes); returns its offset in the constant section. */
int64_t spyre_pb_const(struct spyre_pb *pb, const void *data, size_t len);
/* Make core's stream exist (possibly empty) so num_cores covers it. */
void spyre_pb_core(struct spyre_pb *pb, unsigned core);

int spyre_pb_emit(struct spyre_pb *pb, unsigned core, const union spyre_insn *in);
int spyre_pb_reloc(struct spyre_pb *pb, unsigned core, unsigned pc, unsigned sym, uint64_t addend);

/* Control (NOP, HALT, LI, ADDI, LDARG, BNZ) and ring (SEND, RECV, SIGNAL, WAIT, BARRIER). */
int spyre_pb_ctl(struct spyre_pb *pb, unsigned core, unsigned op, unsigned reg, uint64_t imm, unsigned reg2);
/*
 * LDX: r[reg] = scale * the int32 at scratchpad @sp_off (+ r[ridx] when
 * @ridx is SPYRE_PB_REG(n)), checked 0 <= index < @bound (0: unchecked);
 * @flags SPYRE_IF_SKIPNEG: a negative index skips the next instruction.
 */
int spyre_pb_ldx(struct spyre_pb *pb, unsigned core, unsigned reg, uint32_t sp_off, unsigned ridx, uint32_t bound,
		 uint32_t scale, unsigned flags);
/* BNZ with SPYRE_IF_GTZ: branch to @target when (int64)r[reg] > 0. */
int spyre_pb_bgtz(struct spyre_pb *pb, unsigned core, unsigned reg, uint32_t target);
int spyre_pb_ring(struct spyre_pb *pb, unsigned core, unsigned op, uint32_t sp, uint32_t peer,
		  uint32_t tag, uint32_t bytes);

/*
 * LOAD/STORE and tensor instructions take a descriptor. Designated
 * initializers leave unused fields 0, which means "none" or "tight" everywhere:
 *
 *	spyre_pb_dma(pb, core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
 *		.sp = 0, .mem = { .sym = x, .off = 0, .reg = SPYRE_PB_REG(3) },
 *		.rows = 4, .row_bytes = 256 });
 *	spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL,
 *		.dt = SPYRE_DT_FP16, .dt2 = SPYRE_DT_FP32, .d = c, .a = a, .b = b,
 *		.rows = m, .cols = n, .k = k });	// ldd/lda/ldb tight
 */

/* A register operand: 0 is "none", SPYRE_PB_REG(n) is register n. */
#define SPYRE_PB_REG(n)		((uint8_t)((n) + 1))
/* spyre_pb_mem.sym values that are not tensor slots */
#define SPYRE_PB_CONST		(-1)	/* the image's constant data (read-only) */
#define SPYRE_PB_RAW		(-2)	/* .off is an absolute device VA, never relocated */

/* The memory operand of a LOAD/STORE: slot sym at byte offset off (+ r[reg - 1]). */
struct spyre_pb_mem {
	int sym;		/* symbol index, SPYRE_PB_CONST or SPYRE_PB_RAW */
	uint64_t off;		/* byte offset in the slot (SPYRE_PB_RAW: the VA) */
	uint8_t reg;		/* SPYRE_PB_REG(n): add r[n] at run time (SPYRE_IF_RMEM) */
};

/* LOAD/STORE; a stride really 0 over several rows (one row again) takes spyre_pb_emit(). */
struct spyre_pb_dma {
	uint32_t sp;		/* scratchpad offset */
	uint8_t sp_reg;		/* SPYRE_PB_REG(n): add r[n] to sp at run time (SPYRE_IF_RSP) */
	struct spyre_pb_mem mem;
	uint32_t rows;		/* 0 is taken as 1 */
	uint32_t row_bytes;
	uint32_t mem_stride;	/* 0 with rows > 1: row_bytes (contiguous) */
	uint32_t sp_stride;	/* likewise */
	bool async;		/* SPYRE_IF_ASYNC: completes on token SPYRE_TOKEN_DMA */
};

/*
 * How spyre_pb_dma() addresses slots: the two forms of docs/spyre-isa.md §2.1.
 * It applies to the instructions emitted after it is set.
 */
enum spyre_pb_addressing {
	SPYRE_PB_ADDR_SLOT = 0,	/* slot-relative operands: the patch-free path (default) */
	SPYRE_PB_ADDR_RELOC = 1,/* absolute operands + relocations: the patch path */
};
void spyre_pb_set_addressing(struct spyre_pb *pb, enum spyre_pb_addressing mode);

int spyre_pb_dma(struct spyre_pb *pb, unsigned core, unsigned op, const struct spyre_pb_dma *d);

/* Any tensor instruction; ld* of a tile operand left 0 means tight (one row's sticks). */
struct spyre_pb_op {
	unsigned op;		/* SPYRE_ISA_OP_MATMUL ... SPYRE_ISA_OP_ARGMAX */
	unsigned dt, dt2;	/* input and output dtype */
	unsigned flags;		/* SPYRE_IF_* of the op */
	uint32_t d, a, b;	/* scratchpad offsets */
	uint32_t rows, cols, k;
	uint32_t ldd, lda, ldb;	/* row strides in sticks */
	float scale, bias;	/* SCALE; POW: the exponent in scale */
	uint32_t imm;		/* FILL: value bits (fp32, or int32 for int types); TRIL: int32 diagonal */
	uint32_t ext;		/* TRIL: first row's index in its matrix of k rows; dense TRANSPOSE: d's offset */
};

int spyre_pb_op(struct spyre_pb *pb, unsigned core, const struct spyre_pb_op *o);

/* Lay out the image; *image is malloc'd. Returns 0 or -1 (after any earlier error). */
int spyre_pb_finish(struct spyre_pb *pb, void **image, size_t *size);

/*
 * The smallest complete program, the known workload of the device's, the
 * driver's and libspyre's tests and of spyre-run: y = relu(x) on core 0 over
 * rows sticks of 32 fp32 values, slots "x" (x_bytes: a test may declare less
 * than the load reads) and "y", addressed in the given form. Returns the
 * malloc'd image, or NULL.
 */
void *spyre_pb_relu_image(enum spyre_pb_addressing form, uint32_t rows, uint64_t x_bytes, size_t *size);

/*
 * The runtime's patch path: write slot_va[sym] + addend into every relocated
 * operand of a (validated) image. Returns the number patched or -1.
 */
int spyre_prog_relocate(void *image, size_t size, const uint64_t *slot_va, uint32_t num_slots);

/* Sticks (128-byte units) a row of n elements of dtype dt needs. */
static inline uint32_t spyre_sticks(uint64_t n, unsigned dt)
{
	return (uint32_t)((n * SPYRE_DT_SIZE(dt) + SPYRE_STICK_BYTES - 1) / SPYRE_STICK_BYTES);
}

#endif /* SPYRE_PROGBUILD_H */
