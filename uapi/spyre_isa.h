/* SPDX-License-Identifier: MIT */
/*
 * spyre_isa.h - the spyre compute engine's program container format, ISA
 * encoding, argument block and fault codes. Shared by the ISA library (isa/:
 * codec, validator, builder, assembler), the engine (qemu-device/engine/) and
 * libspyre.
 * Plain C, fixed-width types, no kernel or QEMU types. docs/spyre-isa.md is
 * the prose specification; this header is the only place the numbers live.
 *
 * Everything is little-endian. Offsets inside a program image are bytes from
 * the start of the image.
 */
#ifndef SPYRE_ISA_H
#define SPYRE_ISA_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

#include "spyre_hw.h"	/* SPYRE_STICK_BYTES, SPYRE_MAX_CORES */

/* ---- program container ------------------------------------------------ */

#define SPYRE_PROG_MAGIC		0x47525053u	/* "SPRG" in memory order */
#define SPYRE_PROG_VERSION		1
#define SPYRE_PROG_MAX_BYTES		(16u << 20)	/* largest image */
#define SPYRE_PROG_MAX_INSNS		65536u		/* per core stream */
#define SPYRE_PROG_MAX_SYMS		256u
#define SPYRE_PROG_MAX_SCALARS		256u
#define SPYRE_PROG_MAX_RELOCS		65536u
#define SPYRE_PROG_ALIGN		128u		/* image, sections, const data */

/*
 * The image starts with this header. Sections (core table, code streams,
 * symbols, relocations, constant data) may appear in any order but must lie
 * inside total_size, be 8-byte aligned (constant data: 128-byte aligned) and
 * not overlap. Unused reserved fields must be zero.
 */
struct spyre_prog_hdr {
	uint32_t magic;		/* SPYRE_PROG_MAGIC */
	uint16_t version;	/* SPYRE_PROG_VERSION */
	uint16_t flags;		/* 0 */
	uint32_t total_size;	/* bytes of the whole image, <= SPYRE_PROG_MAX_BYTES */
	uint32_t num_cores;	/* entries in the core table, 1..SPYRE_MAX_CORES */
	uint32_t core_off;	/* -> struct spyre_prog_core[num_cores] */
	uint32_t sym_off;	/* -> struct spyre_prog_sym[num_syms] */
	uint32_t num_syms;	/* tensor slots, <= SPYRE_PROG_MAX_SYMS */
	uint32_t num_scalars;	/* u64 scalars after the slots in the argument block */
	uint32_t reloc_off;	/* -> struct spyre_prog_reloc[num_relocs] */
	uint32_t num_relocs;	/* <= SPYRE_PROG_MAX_RELOCS */
	uint32_t const_off;	/* constant data, 128-byte aligned */
	uint32_t const_size;	/* bytes, multiple of 128 */
	uint32_t reserved[4];
};					/* 64 bytes */

/*
 * Core table entry i is the instruction stream of core i. A stream of zero
 * instructions leaves the core idle; so does a launched core >= num_cores.
 */
struct spyre_prog_core {
	uint32_t code_off;	/* -> struct spyre_insn[num_insns], 8-byte aligned */
	uint32_t num_insns;	/* <= SPYRE_PROG_MAX_INSNS */
};

/* Symbol: a named tensor slot, i.e. one u64 device VA in the argument block. */
#define SPYRE_SYM_NAME_LEN		32
#define SPYRE_SYM_MAX_RANK		4
#define SPYRE_SYM_IN			(1u << 0)	/* read by the program */
#define SPYRE_SYM_OUT			(1u << 1)	/* written by the program */
#define SPYRE_SYM_F_MASK		(SPYRE_SYM_IN | SPYRE_SYM_OUT)

struct spyre_prog_sym {
	char name[SPYRE_SYM_NAME_LEN];	/* NUL-terminated, [A-Za-z0-9_.] */
	uint8_t dtype;			/* SPYRE_DT_* */
	uint8_t rank;			/* 0..SPYRE_SYM_MAX_RANK */
	uint16_t flags;			/* SPYRE_SYM_* */
	uint32_t reserved;
	uint64_t size;			/* bytes of the slot's buffer (bounds slot-relative access) */
	uint64_t shape[SPYRE_SYM_MAX_RANK]; /* host shape, unused dims 0 */
};					/* 80 bytes */

/*
 * Relocation: the absolute address operand (struct spyre_insn_dma.mem) of
 * instruction pc of core's stream is patched by the runtime to
 * args.slot[sym] + addend before launch. The instruction must be a LOAD or
 * STORE without SPYRE_IF_SLOT. The engine does not apply relocations; it
 * executes absolute addresses as they are in the image.
 */
struct spyre_prog_reloc {
	uint32_t core;
	uint32_t pc;
	uint32_t sym;		/* symbol index */
	uint32_t reserved;
	uint64_t addend;	/* byte offset into the slot */
};

/*
 * Argument block (per launch, at the LAUNCH packet's args VA, 8-byte
 * aligned): num_syms u64 device VAs (one per symbol, in symbol order)
 * followed by num_scalars u64 scalars (read by the LDARG instruction).
 */
#define SPYRE_ARGS_BYTES(num_syms, num_scalars) \
	(8u * ((uint64_t)(num_syms) + (uint64_t)(num_scalars)))

/* ---- data types ------------------------------------------------------- */

#define SPYRE_DT_FP32			0	/* IEEE binary32 */
#define SPYRE_DT_FP16			1	/* IEEE binary16 */
#define SPYRE_DT_BF16			2	/* bfloat16 */
#define SPYRE_DT_DL16			3	/* DLFloat16: s1 e6 (bias 31) f9 */
#define SPYRE_DT_INT8			4
#define SPYRE_DT_INT32			5
#define SPYRE_DT_COUNT			6

/* The names of the SPYRE_DT_* (assembler syntax, tools, messages), the only copy. */
#define SPYRE_DT_NAMES {							\
	[SPYRE_DT_FP32] = "fp32", [SPYRE_DT_FP16] = "fp16", [SPYRE_DT_BF16] = "bf16",	\
	[SPYRE_DT_DL16] = "dl16", [SPYRE_DT_INT8] = "int8", [SPYRE_DT_INT32] = "int32",	\
}

#define SPYRE_DT_SIZE(dt)		((dt) == SPYRE_DT_INT8 ? 1u : \
					 ((dt) == SPYRE_DT_FP32 || (dt) == SPYRE_DT_INT32) ? 4u : 2u)
#define SPYRE_DT_IS_FLOAT(dt)		((dt) <= SPYRE_DT_DL16)

/* DLFloat16 special values: 0x7fff (and 0xffff) is the one NaN/infinity. */
#define SPYRE_DL16_NAN			0x7fffu
#define SPYRE_DL16_BIAS			31

/* ---- instructions ----------------------------------------------------- */

/*
 * Every instruction is 32 bytes; byte 0 is the opcode. Four encodings share
 * the first 4 bytes {opcode, dtype, dtype2, flags}. Fields an instruction
 * does not use, and all reserved fields, must be zero.
 */
#define SPYRE_INSN_BYTES		32

enum spyre_opcode {
	/* control (struct spyre_insn_ctl) */
	SPYRE_ISA_OP_NOP = 0x00,		/* nothing */
	SPYRE_ISA_OP_HALT = 0x01,		/* core finished (also: running off the end) */
	SPYRE_ISA_OP_LI = 0x02,		/* r[reg] = imm */
	SPYRE_ISA_OP_ADDI = 0x03,		/* r[reg] = r[reg2] + imm (mod 2^64) */
	SPYRE_ISA_OP_LDARG = 0x04,		/* r[reg] = args.scalar[imm] */
	SPYRE_ISA_OP_BNZ = 0x05,		/* if r[reg] != 0: pc = imm (SPYRE_IF_GTZ: if (int64)r[reg] > 0) */
	SPYRE_ISA_OP_LDX = 0x06,		/* r[reg] = int32 index at sp imm (+ r[reg2]), bounds-checked, scaled */
	/* stick DMA (struct spyre_insn_dma) */
	SPYRE_ISA_OP_LOAD = 0x10,		/* device memory -> scratchpad */
	SPYRE_ISA_OP_STORE = 0x11,		/* scratchpad -> device memory */
	/* tensor ops in the scratchpad (struct spyre_insn_tensor) */
	SPYRE_ISA_OP_MATMUL = 0x20,	/* C[m,n] (+)= A[m,k] B[k,n] */
	SPYRE_ISA_OP_ADD = 0x30,		/* binary elementwise: d = a op b */
	SPYRE_ISA_OP_SUB = 0x31,
	SPYRE_ISA_OP_MUL = 0x32,
	SPYRE_ISA_OP_MAX = 0x33,		/* NaN propagates (torch.maximum) */
	SPYRE_ISA_OP_DIV = 0x34,		/* a / b, float dtypes (IEEE: x/0 = +-inf, 0/0 = NaN) */
	SPYRE_ISA_OP_MIN = 0x35,		/* NaN propagates (torch.minimum) */
	SPYRE_ISA_OP_MOVM = 0x36,		/* masked move: d = b (int8 mask) != 0 ? a : d */
	SPYRE_ISA_OP_RELU = 0x40,		/* unary elementwise: d = f(a) */
	SPYRE_ISA_OP_GELU = 0x41,		/* x/2 (1 + erf(x/sqrt 2)) */
	SPYRE_ISA_OP_SILU = 0x42,		/* x / (1 + exp(-x)) */
	SPYRE_ISA_OP_EXP = 0x43,
	SPYRE_ISA_OP_RSQRT = 0x44,		/* 1 / sqrt(x) */
	SPYRE_ISA_OP_SCALE = 0x45,		/* d = a * imm + imm2 (fp32 immediates) */
	SPYRE_ISA_OP_CAST = 0x46,		/* d (dtype2) = a (dtype) */
	SPYRE_ISA_OP_FILL = 0x47,		/* d = imm (fp32 bits, or int32 for int types) */
	SPYRE_ISA_OP_LOG = 0x48,		/* natural log (log 0 = -inf, log x<0 = NaN) */
	SPYRE_ISA_OP_TANH = 0x49,
	SPYRE_ISA_OP_SIGMOID = 0x4a,		/* 1 / (1 + exp(-x)) */
	SPYRE_ISA_OP_SQRT = 0x4b,
	SPYRE_ISA_OP_RECIP = 0x4c,		/* 1 / x */
	SPYRE_ISA_OP_ABS = 0x4d,
	SPYRE_ISA_OP_GELU_TANH = 0x4e,	/* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
	SPYRE_ISA_OP_POW = 0x4f,		/* d = a ^ imm (fp32 exponent in b, as powf) */
	SPYRE_ISA_OP_REDSUM = 0x50,	/* reductions, see SPYRE_IF_AXIS0 */
	SPYRE_ISA_OP_REDMAX = 0x51,
	SPYRE_ISA_OP_SOFTMAX = 0x52,	/* row-wise softmax along the stick dimension */
	SPYRE_ISA_OP_TRANSPOSE = 0x53,	/* d[c,r] = a[r,c] */
	SPYRE_ISA_OP_ARGMAX = 0x54,	/* d[r] = index of the max of row r (int32) */
	SPYRE_ISA_OP_TRIL = 0x55,		/* d[r,c] = c - r <= imm ? a[r,c] : 0 (SPYRE_IF_UPPER: >=) */
	/* ring and synchronisation (struct spyre_insn_ring) */
	SPYRE_ISA_OP_SEND = 0x60,		/* bytes from sp to core peer, with tag */
	SPYRE_ISA_OP_RECV = 0x61,		/* wait for the next message from peer into sp */
	SPYRE_ISA_OP_SIGNAL = 0x62,	/* token[tag] of core peer += 1 */
	SPYRE_ISA_OP_WAIT = 0x63,		/* wait until own token[tag] >= count; subtract count */
	SPYRE_ISA_OP_BARRIER = 0x64,	/* wait for every core of mask (0: all launched) */
};

/* flags (byte 3) */
#define SPYRE_IF_SLOT			(1u << 0)	/* LOAD/STORE: mem is slot-relative */
#define SPYRE_IF_ACC			(1u << 1)	/* MATMUL: C += A B */
#define SPYRE_IF_ASYNC			(1u << 1)	/* LOAD/STORE: complete on token SPYRE_TOKEN_DMA */
#define SPYRE_IF_BCAST_ROW		(1u << 2)	/* binary: b is one row, for every row */
#define SPYRE_IF_BCAST_COL		(1u << 3)	/* binary: b is a vector of rows elements */
#define SPYRE_IF_AXIS0			(1u << 4)	/* REDSUM/REDMAX: over rows (-> one row of cols) */
#define SPYRE_IF_RMEM			(1u << 5)	/* LOAD/STORE: mem offset += r[rmem] */
#define SPYRE_IF_RSP			(1u << 6)	/* LOAD/STORE: sp += r[rsp] */
#define SPYRE_IF_INDEX			(1u << 7)	/* ARGMAX: b holds int32 indices; d[r] = b[r][argmax] */
#define SPYRE_IF_SWAP			(1u << 1)	/* binary: d = b op a (b still the broadcast one) */
#define SPYRE_IF_LOG			(1u << 1)	/* SOFTMAX: log_softmax, x - max - log(sum(exp(x - max))) */
#define SPYRE_IF_UPPER			(1u << 1)	/* TRIL: keep c - r >= imm (triu) */
#define SPYRE_IF_DENSE			(1u << 1)	/* TRANSPOSE: a and d without row padding (see below) */
#define SPYRE_IF_GTZ			(1u << 1)	/* BNZ: branch if (int64)r[reg] > 0 */
#define SPYRE_IF_SKIPNEG		(1u << 1)	/* LDX: a negative index skips the next instruction */
#define SPYRE_IF_RIDX			(1u << 6)	/* LDX: the scratchpad offset += r[reg2] */
#define SPYRE_IF_RDIAG			(1u << 2)	/* TRIL: the diagonal += (int64)r[ldb] */

/*
 * Slot-relative memory operand: bits 63..48 slot (symbol index, or
 * SPYRE_SLOT_CONST for the image's constant data), bits 47..0 byte offset.
 * The engine resolves it from the argument block and checks the whole
 * access lies inside the slot's size (the constant data's const_size).
 */
#define SPYRE_SLOT_CONST		0xffffu
#define SPYRE_SLOT_ADDR(slot, off)	(((uint64_t)(slot) << 48) | ((uint64_t)(off) & 0xffffffffffffull))
#define SPYRE_SLOT_OF(mem)		((uint32_t)((mem) >> 48))
#define SPYRE_SLOT_OFF(mem)		((mem) & 0xffffffffffffull)

#define SPYRE_NUM_REGS			16
#define SPYRE_NUM_TOKENS		16
/*
 * Asynchronous DMA: a LOAD/STORE with SPYRE_IF_ASYNC is queued on its core's
 * DMA queue and the core goes on at once; when the transfer has completed
 * (data in the scratchpad or in device memory) the core's own token
 * SPYRE_TOKEN_DMA gets 1. A core's DMAs complete in issue order, so
 * "WAIT SPYRE_TOKEN_DMA, n" waits for its n oldest outstanding ones. The data
 * moves when the transfer completes: a program must not touch the scratchpad
 * range of an outstanding LOAD or STORE. A LOAD/STORE without the flag waits
 * for its own completion (and so for every earlier one of its core). At most
 * SPYRE_DMA_QUEUE_DEPTH are outstanding per core; one more stalls the core.
 * SIGNAL may not target SPYRE_TOKEN_DMA.
 */
#define SPYRE_TOKEN_DMA			(SPYRE_NUM_TOKENS - 1)
#define SPYRE_DMA_QUEUE_DEPTH		8

/*
 * NOP, HALT, LI, ADDI, LDARG, BNZ, LDX.
 *
 * LDX (gathered addressing: a table in device memory drives the addresses
 * of later LOAD/STOREs): v = the int32 at scratchpad offset imm (+ r[reg2]
 * with SPYRE_IF_RIDX), 4-byte aligned (ALIGN) and inside the scratchpad
 * (SP_RANGE). With bound != 0, v must be 0 <= v < bound, else the launch
 * ends with SPYRE_ENGINE_FAULT_INDEX (address: v sign-extended); with
 * SPYRE_IF_SKIPNEG a negative v is allowed and skips the next instruction
 * (a padding row of a slot mapping). r[reg] = v * scale (sign-extended,
 * mod 2^64; scale 0 is 1). A program loads its table (block table, slot
 * mapping, positions) into the scratchpad with a LOAD, then turns entries
 * into byte offsets for RMEM/RSP address registers: every address stays
 * checked against its slot, and every index against its bound.
 */
struct spyre_insn_ctl {
	uint8_t opcode, dtype, dtype2, flags;	/* dtype, dtype2: 0; flags: BNZ GTZ, LDX SKIPNEG|RIDX */
	uint32_t reg;		/* destination (BNZ: tested) register */
	uint64_t imm;		/* LI/ADDI value, LDARG scalar index, BNZ target pc, LDX scratchpad offset */
	uint32_t reg2;		/* ADDI source register, LDX index register (SPYRE_IF_RIDX) */
	uint32_t bound;		/* LDX: indices must be < bound (0: unchecked); else 0 */
	uint32_t scale;		/* LDX: r[reg] = index * scale (0: 1); else 0 */
	uint32_t reserved;
};

/*
 * LOAD/STORE: rows rows of row_bytes bytes; row r is at mem + r*mem_stride
 * and sp + r*sp_stride. mem (absolute VA or the resolved slot address), sp,
 * row_bytes and both strides must be multiples of SPYRE_STICK_BYTES, and
 * rows * row_bytes must not exceed the scratchpad size.
 *
 * Address registers: with SPYRE_IF_RMEM the value of register rmem is added
 * to the memory operand (to the byte offset of a slot-relative operand, or to
 * the patched absolute VA); with SPYRE_IF_RSP register rsp is added to sp.
 * Both sums are checked at run time (alignment, slot and scratchpad bounds).
 * This is how one program serves every decode position: the runtime passes
 * byte offsets as scalars (LDARG) instead of rebuilding the program.
 * Without the flag the register field must be 0.
 */
struct spyre_insn_dma {
	uint8_t opcode;
	uint8_t rmem;		/* register added to mem with SPYRE_IF_RMEM, else 0 */
	uint8_t rsp;		/* register added to sp with SPYRE_IF_RSP, else 0 */
	uint8_t flags;		/* SPYRE_IF_SLOT, SPYRE_IF_RMEM, SPYRE_IF_RSP, SPYRE_IF_ASYNC */
	uint32_t sp;		/* scratchpad byte offset */
	uint64_t mem;		/* device VA, or SPYRE_SLOT_ADDR() with SPYRE_IF_SLOT */
	uint32_t rows;		/* >= 1 */
	uint32_t row_bytes;	/* >= 128 */
	uint32_t mem_stride;	/* bytes */
	uint32_t sp_stride;	/* bytes */
};

/*
 * Tensor ops on row-major 2-D tiles in the scratchpad. A tile is rows rows
 * of cols elements; each row starts on a stick and rows are ld sticks apart
 * (ld * 128 >= cols * element size). Elements past cols in a row (the
 * padding of the last stick) are neither read nor written.
 *
 * MATMUL: d = C (m=rows x n=cols, dtype2), a = A (m x k, dtype), b = B
 *         (k x n, dtype). dtype fp32/fp16/bf16/dl16 accumulate in fp32 and
 *         dtype2 is fp32 or dtype; int8 accumulates in int32, dtype2 int32.
 * binary: d = a op b, all rows x cols (b: see BCAST flags; SPYRE_IF_SWAP:
 *         d = b op a); unary: d = f(a). Computed in fp32 (float dtypes) or
 *         int64 saturated to the output type (int dtypes); result converted
 *         to dtype2. DIV and the unary ops but RELU take float dtypes only.
 *         MAX and MIN propagate NaN. POW: d = powf(a, imm), the fp32
 *         exponent in b (ldb, ext 0).
 * MOVM:   masked move, d[r][j] = b[r][j] != 0 ? a[r][j] : d[r][j]: b is an
 *         int8 mask tile (rows x cols, ldb; PyTorch's bool), a is dtype, d
 *         dtype2 (read where the mask is 0, so both float or both int). The
 *         unselected element is never read into the result: no NaN or
 *         infinity leaks from it (torch.where / masked_fill).
 * TRIL:   d[r][c] = a[r][c] where c - r' <= imm, else 0 (SPYRE_IF_UPPER:
 *         c - r' >= imm); imm is the int32 diagonal offset in b. r' is the
 *         row within its matrix: with k != 0 the tile holds matrices of k
 *         rows and its first row is row ext of its matrix (ext < k),
 *         r' = (ext + r) mod k; with k 0, r' = r (ext 0). dtype2 == dtype.
 *         With SPYRE_IF_RDIAG the diagonal is imm + (int64)r[ldb] (a
 *         position read at run time: causal masks of paged attention).
 * REDSUM/REDMAX: default reduces each row (-> a vector of rows elements at d);
 *         with SPYRE_IF_AXIS0 each column (-> one row of cols elements).
 * SOFTMAX: each row of cols; dtype in, dtype2 out, fp32 inside. With
 *         SPYRE_IF_LOG: log_softmax, x - max - log(sum(exp(x - max))).
 * TRANSPOSE: d is cols x rows; dtype2 == dtype. With SPYRE_IF_DENSE, a
 *         and d are dense row-major matrices (no padding between rows; lda
 *         and ldd 0): a[r][j] is element k + r * cols + j counted from a,
 *         d[j][r] element ext + j * rows + r from d (k and ext: where a
 *         matrix starts inside its first stick, so a relayout of PyTorch's
 *         contiguous tensors needs no stick alignment). Elements of d's
 *         sticks outside the matrix are left as they are.
 * ARGMAX: d = a vector of rows int32 (dtype2 INT32): the column of each row's
 *         maximum, the lowest on ties, NaN never chosen (0 for a row of NaN).
 *         With SPYRE_IF_INDEX, b is an int32 tile of rows x cols (ldb) and
 *         d[r] = b[r][that column] (combining per-core partial results).
 * FILL: d = imm converted to dtype2 (imm is fp32 bits, int32 for int types).
 */
struct spyre_insn_tensor {
	uint8_t opcode, dtype, dtype2, flags;
	uint32_t d;		/* destination scratchpad offset, stick aligned */
	uint32_t a;		/* source 1 (FILL: 0) */
	uint32_t b;		/* source 2 (MOVM: mask); SCALE, POW: imm (fp32 bits); FILL: value bits;
				   TRIL: int32 diagonal offset */
	uint32_t rows;		/* m; >= 1 */
	uint16_t cols;		/* n; >= 1 */
	uint16_t k;		/* MATMUL inner dimension; TRIL rows per matrix (0: one); dense TRANSPOSE: a's
				   element offset; else 0 */
	uint16_t ldd, lda;	/* row strides in sticks */
	uint16_t ldb;		/* MATMUL, binary, MOVM; else 0 */
	uint16_t ext;		/* SCALE: high 16 bits of fp32 bias; TRIL: first row's index in its matrix;
				   dense TRANSPOSE: d's element offset; else 0 */
};
/* SCALE keeps its fp32 bias in ldb (low 16 bits) and ext (high 16 bits). */
#define SPYRE_SCALE_BIAS_BITS(t)	(((uint32_t)(t)->ext << 16) | (t)->ldb)

/*
 * SEND/RECV: bytes (multiple of 128) at scratchpad sp to/from core peer.
 * Messages between a pair of cores arrive in order; a RECV takes the next
 * message from peer, which must carry the same tag and size.
 * SIGNAL: token tag of core peer += 1. WAIT: tag, count (own tokens).
 * BARRIER: mask of participating cores (0: every launched core).
 */
struct spyre_insn_ring {
	uint8_t opcode, dtype, dtype2, flags;	/* dtype, dtype2, flags: 0 */
	uint32_t sp;
	uint32_t peer;		/* core number */
	uint32_t tag;		/* message tag; token index < SPYRE_NUM_TOKENS */
	uint32_t bytes;		/* SEND/RECV size; WAIT count; BARRIER core mask */
	uint32_t reserved[3];
};

union spyre_insn {
	uint8_t raw[SPYRE_INSN_BYTES];
	struct spyre_insn_ctl ctl;
	struct spyre_insn_dma dma;
	struct spyre_insn_tensor t;
	struct spyre_insn_ring ring;
};

/* ---- timing model defaults -------------------------------------------- */

/*
 * The device properties of the timing model (docs/spyre-isa.md §6 gives each
 * one's source or marks it an assumption). The engine's
 * spyre_engine_config_default() and the kernel library's cost model both
 * start from these.
 */
#define SPYRE_TM_CORES			32
#define SPYRE_TM_SCRATCHPAD_BYTES	(2u << 20)
#define SPYRE_TM_CLOCK_MHZ		1500
#define SPYRE_TM_MAC_PER_NS_16		1536	/* fp16, bf16, dl16, per core */
#define SPYRE_TM_MAC_PER_NS_INT8	3072
#define SPYRE_TM_MAC_PER_NS_FP32	384
#define SPYRE_TM_MEM_BW_MBPS		204800	/* LPDDR5, shared by the cores */
#define SPYRE_TM_DMA_LATENCY_CYCLES	200
#define SPYRE_TM_DMA_BURST_BYTES	4096	/* a DMA moves 128-byte words in bursts of this */
#define SPYRE_TM_DMA_BURST_OVERHEAD_BYTES 64	/* LPDDR time per burst beyond its data, in bytes */
#define SPYRE_TM_RING_BYTES_PER_CYCLE	128
#define SPYRE_TM_RING_HOP_CYCLES	2
#define SPYRE_TM_SP_BYTES_PER_CYCLE	256
#define SPYRE_TM_SFU_ELEMS_PER_CYCLE	64
#define SPYRE_TM_SFU_TRANSCENDENTAL_CYCLES 4
#define SPYRE_TM_ISSUE_CYCLES		1
#define SPYRE_TM_BARRIER_CYCLES		16
#define SPYRE_TM_PE_ROWS		8	/* matmul rows are padded to 8-row passes */

/* ---- faults ----------------------------------------------------------- */

/* A launch ends with status SPYRE_ENGINE_FAULT_NONE or one of these causes. */
#define SPYRE_ENGINE_FAULT_NONE		0
#define SPYRE_ENGINE_FAULT_BAD_PROGRAM		1	/* container malformed (core, pc: ~0) */
#define SPYRE_ENGINE_FAULT_BAD_OPCODE		2
#define SPYRE_ENGINE_FAULT_BAD_OPERAND		3	/* reserved field, flag, register, size, branch target */
#define SPYRE_ENGINE_FAULT_BAD_DTYPE		4	/* data type not valid for the opcode */
#define SPYRE_ENGINE_FAULT_ALIGN		5	/* operand not on a stick boundary */
#define SPYRE_ENGINE_FAULT_SP_RANGE		6	/* scratchpad access beyond the scratchpad */
#define SPYRE_ENGINE_FAULT_MEM_RANGE		7	/* slot-relative access beyond the slot, or VA overflow */
#define SPYRE_ENGINE_FAULT_MEM			8	/* memory callback failed: address = faulting VA */
#define SPYRE_ENGINE_FAULT_BAD_PEER		9	/* ring peer or barrier mask names a core not launched */
#define SPYRE_ENGINE_FAULT_RING_MISMATCH	10	/* RECV tag or size differs from the message */
#define SPYRE_ENGINE_FAULT_DEADLOCK		11	/* every unfinished core waits for something that cannot come */
#define SPYRE_ENGINE_FAULT_BUDGET		12	/* instruction budget exhausted */
#define SPYRE_ENGINE_FAULT_BAD_SLOT		13	/* slot index >= num_syms */
#define SPYRE_ENGINE_FAULT_INDEX		14	/* LDX: an index read from memory outside its bound */
#define SPYRE_ENGINE_FAULT_COUNT		15

/*
 * The names of the causes, the only copy: array initializers indexed by
 * cause. SPYRE_ENGINE_FAULT_NAMES are short words (the ISA tools and the
 * engine's tests), SPYRE_ENGINE_FAULT_TEXTS the words of an error message
 * (libspyre's spyre_engine_fault_name()).
 */
#define SPYRE_ENGINE_FAULT_NAMES {						\
	[SPYRE_ENGINE_FAULT_NONE] = "none",					\
	[SPYRE_ENGINE_FAULT_BAD_PROGRAM] = "bad-program",			\
	[SPYRE_ENGINE_FAULT_BAD_OPCODE] = "bad-opcode",				\
	[SPYRE_ENGINE_FAULT_BAD_OPERAND] = "bad-operand",			\
	[SPYRE_ENGINE_FAULT_BAD_DTYPE] = "bad-dtype",				\
	[SPYRE_ENGINE_FAULT_ALIGN] = "align",					\
	[SPYRE_ENGINE_FAULT_SP_RANGE] = "sp-range",				\
	[SPYRE_ENGINE_FAULT_MEM_RANGE] = "mem-range",				\
	[SPYRE_ENGINE_FAULT_MEM] = "mem",					\
	[SPYRE_ENGINE_FAULT_BAD_PEER] = "bad-peer",				\
	[SPYRE_ENGINE_FAULT_RING_MISMATCH] = "ring-mismatch",			\
	[SPYRE_ENGINE_FAULT_DEADLOCK] = "deadlock",				\
	[SPYRE_ENGINE_FAULT_BUDGET] = "budget",					\
	[SPYRE_ENGINE_FAULT_BAD_SLOT] = "bad-slot",				\
	[SPYRE_ENGINE_FAULT_INDEX] = "bad-index",				\
}

#define SPYRE_ENGINE_FAULT_TEXTS {						\
	[SPYRE_ENGINE_FAULT_NONE] = "no fault",					\
	[SPYRE_ENGINE_FAULT_BAD_PROGRAM] = "malformed program",			\
	[SPYRE_ENGINE_FAULT_BAD_OPCODE] = "bad opcode",				\
	[SPYRE_ENGINE_FAULT_BAD_OPERAND] = "bad operand",			\
	[SPYRE_ENGINE_FAULT_BAD_DTYPE] = "data type not valid for the opcode",	\
	[SPYRE_ENGINE_FAULT_ALIGN] = "operand not on a stick boundary",		\
	[SPYRE_ENGINE_FAULT_SP_RANGE] = "scratchpad access out of range",	\
	[SPYRE_ENGINE_FAULT_MEM_RANGE] = "memory access outside its slot",	\
	[SPYRE_ENGINE_FAULT_MEM] = "memory access failed",			\
	[SPYRE_ENGINE_FAULT_BAD_PEER] = "ring peer not launched",		\
	[SPYRE_ENGINE_FAULT_RING_MISMATCH] = "ring message tag or size mismatch", \
	[SPYRE_ENGINE_FAULT_DEADLOCK] = "deadlock",				\
	[SPYRE_ENGINE_FAULT_BUDGET] = "instruction budget exhausted",		\
	[SPYRE_ENGINE_FAULT_BAD_SLOT] = "no such slot",				\
	[SPYRE_ENGINE_FAULT_INDEX] = "index out of bounds",			\
}

#define SPYRE_ENGINE_FAULT_CORE_NONE		0xffffffffu	/* fault not tied to a core */
#define SPYRE_ENGINE_FAULT_PC_NONE		0xffffffffu

#endif /* SPYRE_ISA_H */
