/* SPDX-License-Identifier: MIT */
/*
 * spyre_isa_codec.h - the ISA library's codec (isa/decode.c): instructions
 * encoded and decoded, every static rule of an instruction and of the program
 * container (uapi/spyre_isa.h) checked, the container read through accessors,
 * mnemonics and fault names. Plain C, no state, total: any bytes give a
 * verdict, never a crash.
 *
 * Used by the engine (qemu-device/engine/, which runs the same instruction
 * checks at execution time), the builder, the assembler and disassembler, the
 * fuzzer and libspyre's container parsing. docs/spyre-isa.md §7 lists the
 * library's parts and who links them.
 */
#ifndef SPYRE_ISA_CODEC_H
#define SPYRE_ISA_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "spyre_isa.h"

/* ---- little-endian fields ------------------------------------------------ */

static inline uint16_t spyre_ld16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t spyre_ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t spyre_ld64(const uint8_t *p)
{
	return (uint64_t)spyre_ld32(p) | (uint64_t)spyre_ld32(p + 4) << 32;
}

static inline void spyre_st16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void spyre_st32(uint8_t *p, uint32_t v)
{
	spyre_st16(p, (uint16_t)v);
	spyre_st16(p + 2, (uint16_t)(v >> 16));
}

static inline void spyre_st64(uint8_t *p, uint64_t v)
{
	spyre_st32(p, (uint32_t)v);
	spyre_st32(p + 4, (uint32_t)(v >> 32));
}

/* ---- opcodes and names --------------------------------------------------- */

/* The encoding and operand rules an opcode follows. */
enum spyre_opclass {
	SPYRE_CLS_NONE,		/* unknown opcode */
	SPYRE_CLS_CTL,
	SPYRE_CLS_DMA,
	SPYRE_CLS_MATMUL,
	SPYRE_CLS_BINARY,
	SPYRE_CLS_UNARY,	/* RELU, GELU, SILU, EXP, RSQRT, LOG, TANH, SIGMOID, SQRT, RECIP, ABS, GELU_TANH */
	SPYRE_CLS_SCALE,	/* SCALE, POW: fp32 immediates */
	SPYRE_CLS_CAST,
	SPYRE_CLS_FILL,
	SPYRE_CLS_REDUCE,
	SPYRE_CLS_SOFTMAX,
	SPYRE_CLS_TRANSPOSE,
	SPYRE_CLS_ARGMAX,
	SPYRE_CLS_MOVM,
	SPYRE_CLS_TRIL,
	SPYRE_CLS_RING,		/* after every tensor class (SPYRE_CLS_MATMUL .. SPYRE_CLS_RING - 1) */
};

enum spyre_opclass spyre_opclass(uint32_t opcode);

/* Mnemonics: "matmul", ...; NULL for an unknown opcode or dtype. */
const char *spyre_opcode_name(uint32_t opcode);
const char *spyre_dtype_name(uint32_t dt);
/* "bad-operand", ...; "unknown" past SPYRE_ENGINE_FAULT_COUNT. */
const char *spyre_fault_name(uint32_t cause);

/* ---- instructions -------------------------------------------------------- */

/* Decode 32 little-endian bytes into a host-order instruction. */
void spyre_insn_decode(const uint8_t raw[SPYRE_INSN_BYTES], union spyre_insn *in);
void spyre_insn_encode(const union spyre_insn *in, uint8_t raw[SPYRE_INSN_BYTES]);

/*
 * Static checks of one instruction that do not depend on the launch:
 * opcode, dtypes, flags, reserved fields, registers, sizes, alignment and
 * scratchpad bounds (for sp_bytes), branch target within num_insns.
 * Returns SPYRE_ENGINE_FAULT_NONE or the cause; *addr (may be NULL) gets the
 * offending address.
 */
uint32_t spyre_insn_check(const union spyre_insn *in, uint32_t sp_bytes, uint32_t num_insns,
			  uint64_t *addr);

/* Bytes spanned by a tile of rows x cols elements of esz bytes, ld sticks apart. */
uint64_t spyre_tile_extent(uint64_t rows, uint64_t cols, uint32_t esz, uint32_t ld);

/* ---- the container --------------------------------------------------------- */

/* The container's records in and out of their little-endian bytes (uapi/spyre_isa.h). */
void spyre_prog_hdr_decode(const uint8_t *p, struct spyre_prog_hdr *h);
void spyre_prog_hdr_encode(const struct spyre_prog_hdr *h, uint8_t *p);
void spyre_prog_core_decode(const uint8_t *p, struct spyre_prog_core *c);
void spyre_prog_core_encode(const struct spyre_prog_core *c, uint8_t *p);
void spyre_prog_sym_decode(const uint8_t *p, struct spyre_prog_sym *s);
void spyre_prog_sym_encode(const struct spyre_prog_sym *s, uint8_t *p);
void spyre_prog_reloc_decode(const uint8_t *p, struct spyre_prog_reloc *r);
void spyre_prog_reloc_encode(const struct spyre_prog_reloc *r, uint8_t *p);

#define SPYRE_PROG_WHERE_NONE	0xffffffffu

/*
 * An image whose container passed spyre_prog_check_container(): the header
 * and core table in host order, the rest read through the accessors below.
 * After a BAD_PROGRAM verdict, why/part/where say what was wrong.
 */
struct spyre_prog_view {
	const uint8_t *image;
	uint64_t size;		/* the header's total_size */
	struct spyre_prog_hdr hdr;
	struct spyre_prog_core cores[SPYRE_MAX_CORES];
	const char *why;	/* the rule broken; NULL when the container is valid */
	const char *part;	/* "core", "symbol", "relocation", or NULL: the image as a whole */
	uint32_t where;		/* which one of part; SPYRE_PROG_WHERE_NONE without a part */
};

/*
 * Check a whole image's container (header, tables, sections, symbols,
 * relocations): SPYRE_ENGINE_FAULT_NONE and *v filled, or
 * SPYRE_ENGINE_FAULT_BAD_PROGRAM with v->why set.
 */
uint32_t spyre_prog_check_container(const void *image, uint64_t size, struct spyre_prog_view *v);
/* What the check found, as text: "relocation 3: names a slot past the symbol table". */
int spyre_prog_describe(const struct spyre_prog_view *v, char *buf, size_t len);

/* Symbol i and relocation i (i below the header's count) of a checked image. */
void spyre_prog_get_sym(const struct spyre_prog_view *v, uint32_t i, struct spyre_prog_sym *s);
void spyre_prog_get_reloc(const struct spyre_prog_view *v, uint32_t i, struct spyre_prog_reloc *r);
/* Byte offsets in the image: instruction pc of core; the 8-byte operand a relocation patches. */
uint64_t spyre_prog_insn_off(const struct spyre_prog_view *v, uint32_t core, uint32_t pc);
uint64_t spyre_prog_reloc_site(const struct spyre_prog_view *v, const struct spyre_prog_reloc *r);

/*
 * Validate a program image: the container and, for every stream, every
 * instruction with spyre_insn_check() (plus LDARG indices and slots against
 * the header). Returns SPYRE_ENGINE_FAULT_NONE or the first fault, with
 * *core and *pc set (SPYRE_ENGINE_FAULT_CORE_NONE/PC_NONE for container
 * faults).
 */
uint32_t spyre_prog_validate(const void *image, uint64_t size, uint32_t sp_bytes,
			     uint32_t *core, uint32_t *pc);

#endif /* SPYRE_ISA_CODEC_H */
