// SPDX-License-Identifier: MIT
/*
 * The ISA library's codec (spyre_isa_codec.h): decoding and validation of
 * spyre programs, the container (header, core table, symbols, relocations,
 * constant data) and every instruction's static rules. The engine runs the
 * same instruction checks at execution time; the assembler, disassembler,
 * fuzzer and libspyre use spyre_prog_validate() or the container check.
 * Everything here is total: any bytes give a verdict, never a crash.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "spyre_isa_codec.h"

static const struct {
	uint8_t opcode;
	uint8_t cls;
	const char *name;
} optab[] = {
	{ SPYRE_ISA_OP_NOP, SPYRE_CLS_CTL, "nop" },
	{ SPYRE_ISA_OP_HALT, SPYRE_CLS_CTL, "halt" },
	{ SPYRE_ISA_OP_LI, SPYRE_CLS_CTL, "li" },
	{ SPYRE_ISA_OP_ADDI, SPYRE_CLS_CTL, "addi" },
	{ SPYRE_ISA_OP_LDARG, SPYRE_CLS_CTL, "ldarg" },
	{ SPYRE_ISA_OP_BNZ, SPYRE_CLS_CTL, "bnz" },
	{ SPYRE_ISA_OP_LDX, SPYRE_CLS_CTL, "ldx" },
	{ SPYRE_ISA_OP_LOAD, SPYRE_CLS_DMA, "load" },
	{ SPYRE_ISA_OP_STORE, SPYRE_CLS_DMA, "store" },
	{ SPYRE_ISA_OP_MATMUL, SPYRE_CLS_MATMUL, "matmul" },
	{ SPYRE_ISA_OP_ADD, SPYRE_CLS_BINARY, "add" },
	{ SPYRE_ISA_OP_SUB, SPYRE_CLS_BINARY, "sub" },
	{ SPYRE_ISA_OP_MUL, SPYRE_CLS_BINARY, "mul" },
	{ SPYRE_ISA_OP_MAX, SPYRE_CLS_BINARY, "max" },
	{ SPYRE_ISA_OP_DIV, SPYRE_CLS_BINARY, "div" },
	{ SPYRE_ISA_OP_MIN, SPYRE_CLS_BINARY, "min" },
	{ SPYRE_ISA_OP_MOVM, SPYRE_CLS_MOVM, "movm" },
	{ SPYRE_ISA_OP_RELU, SPYRE_CLS_UNARY, "relu" },
	{ SPYRE_ISA_OP_GELU, SPYRE_CLS_UNARY, "gelu" },
	{ SPYRE_ISA_OP_SILU, SPYRE_CLS_UNARY, "silu" },
	{ SPYRE_ISA_OP_EXP, SPYRE_CLS_UNARY, "exp" },
	{ SPYRE_ISA_OP_RSQRT, SPYRE_CLS_UNARY, "rsqrt" },
	{ SPYRE_ISA_OP_SCALE, SPYRE_CLS_SCALE, "scale" },
	{ SPYRE_ISA_OP_CAST, SPYRE_CLS_CAST, "cast" },
	{ SPYRE_ISA_OP_FILL, SPYRE_CLS_FILL, "fill" },
	{ SPYRE_ISA_OP_LOG, SPYRE_CLS_UNARY, "log" },
	{ SPYRE_ISA_OP_TANH, SPYRE_CLS_UNARY, "tanh" },
	{ SPYRE_ISA_OP_SIGMOID, SPYRE_CLS_UNARY, "sigmoid" },
	{ SPYRE_ISA_OP_SQRT, SPYRE_CLS_UNARY, "sqrt" },
	{ SPYRE_ISA_OP_RECIP, SPYRE_CLS_UNARY, "recip" },
	{ SPYRE_ISA_OP_ABS, SPYRE_CLS_UNARY, "abs" },
	{ SPYRE_ISA_OP_GELU_TANH, SPYRE_CLS_UNARY, "gelu_tanh" },
	{ SPYRE_ISA_OP_POW, SPYRE_CLS_SCALE, "pow" },
	{ SPYRE_ISA_OP_REDSUM, SPYRE_CLS_REDUCE, "redsum" },
	{ SPYRE_ISA_OP_REDMAX, SPYRE_CLS_REDUCE, "redmax" },
	{ SPYRE_ISA_OP_SOFTMAX, SPYRE_CLS_SOFTMAX, "softmax" },
	{ SPYRE_ISA_OP_TRANSPOSE, SPYRE_CLS_TRANSPOSE, "transpose" },
	{ SPYRE_ISA_OP_ARGMAX, SPYRE_CLS_ARGMAX, "argmax" },
	{ SPYRE_ISA_OP_TRIL, SPYRE_CLS_TRIL, "tril" },
	{ SPYRE_ISA_OP_SEND, SPYRE_CLS_RING, "send" },
	{ SPYRE_ISA_OP_RECV, SPYRE_CLS_RING, "recv" },
	{ SPYRE_ISA_OP_SIGNAL, SPYRE_CLS_RING, "signal" },
	{ SPYRE_ISA_OP_WAIT, SPYRE_CLS_RING, "wait" },
	{ SPYRE_ISA_OP_BARRIER, SPYRE_CLS_RING, "barrier" },
};

static const char *const dtnames[SPYRE_DT_COUNT] = SPYRE_DT_NAMES;
static const char *const faultnames[SPYRE_ENGINE_FAULT_COUNT] = SPYRE_ENGINE_FAULT_NAMES;

enum spyre_opclass spyre_opclass(uint32_t opcode)
{
	for (size_t i = 0; i < sizeof(optab) / sizeof(optab[0]); i++)
		if (optab[i].opcode == opcode)
			return (enum spyre_opclass)optab[i].cls;
	return SPYRE_CLS_NONE;
}

const char *spyre_opcode_name(uint32_t opcode)
{
	for (size_t i = 0; i < sizeof(optab) / sizeof(optab[0]); i++)
		if (optab[i].opcode == opcode)
			return optab[i].name;
	return NULL;
}

const char *spyre_dtype_name(uint32_t dt)
{
	return dt < SPYRE_DT_COUNT ? dtnames[dt] : NULL;
}

const char *spyre_fault_name(uint32_t cause)
{
	return cause < SPYRE_ENGINE_FAULT_COUNT ? faultnames[cause] : "unknown";
}

/* ---- instruction encoding --------------------------------------------- */

/*
 * The four encodings differ only in how bytes 4..31 are grouped; decode by
 * the opcode's class so host-order fields are right on any host.
 */
void spyre_insn_decode(const uint8_t raw[SPYRE_INSN_BYTES], union spyre_insn *in)
{
	memset(in, 0, sizeof(*in));
	in->raw[0] = raw[0];
	in->raw[1] = raw[1];
	in->raw[2] = raw[2];
	in->raw[3] = raw[3];
	switch (spyre_opclass(raw[0])) {
	case SPYRE_CLS_CTL:
		in->ctl.reg = spyre_ld32(raw + 4);
		in->ctl.imm = spyre_ld64(raw + 8);
		in->ctl.reg2 = spyre_ld32(raw + 16);
		in->ctl.bound = spyre_ld32(raw + 20);
		in->ctl.scale = spyre_ld32(raw + 24);
		in->ctl.reserved = spyre_ld32(raw + 28);
		break;
	case SPYRE_CLS_DMA:
		in->dma.sp = spyre_ld32(raw + 4);
		in->dma.mem = spyre_ld64(raw + 8);
		in->dma.rows = spyre_ld32(raw + 16);
		in->dma.row_bytes = spyre_ld32(raw + 20);
		in->dma.mem_stride = spyre_ld32(raw + 24);
		in->dma.sp_stride = spyre_ld32(raw + 28);
		break;
	case SPYRE_CLS_RING:
		in->ring.sp = spyre_ld32(raw + 4);
		in->ring.peer = spyre_ld32(raw + 8);
		in->ring.tag = spyre_ld32(raw + 12);
		in->ring.bytes = spyre_ld32(raw + 16);
		for (int i = 0; i < 3; i++)
			in->ring.reserved[i] = spyre_ld32(raw + 20 + 4 * i);
		break;
	case SPYRE_CLS_NONE:
		memcpy(in->raw, raw, SPYRE_INSN_BYTES);
		break;
	default:
		in->t.d = spyre_ld32(raw + 4);
		in->t.a = spyre_ld32(raw + 8);
		in->t.b = spyre_ld32(raw + 12);
		in->t.rows = spyre_ld32(raw + 16);
		in->t.cols = spyre_ld16(raw + 20);
		in->t.k = spyre_ld16(raw + 22);
		in->t.ldd = spyre_ld16(raw + 24);
		in->t.lda = spyre_ld16(raw + 26);
		in->t.ldb = spyre_ld16(raw + 28);
		in->t.ext = spyre_ld16(raw + 30);
		break;
	}
}

void spyre_insn_encode(const union spyre_insn *in, uint8_t raw[SPYRE_INSN_BYTES])
{
	memcpy(raw, in->raw, 4);
	switch (spyre_opclass(in->raw[0])) {
	case SPYRE_CLS_CTL:
		spyre_st32(raw + 4, in->ctl.reg);
		spyre_st64(raw + 8, in->ctl.imm);
		spyre_st32(raw + 16, in->ctl.reg2);
		spyre_st32(raw + 20, in->ctl.bound);
		spyre_st32(raw + 24, in->ctl.scale);
		spyre_st32(raw + 28, in->ctl.reserved);
		break;
	case SPYRE_CLS_DMA:
		spyre_st32(raw + 4, in->dma.sp);
		spyre_st64(raw + 8, in->dma.mem);
		spyre_st32(raw + 16, in->dma.rows);
		spyre_st32(raw + 20, in->dma.row_bytes);
		spyre_st32(raw + 24, in->dma.mem_stride);
		spyre_st32(raw + 28, in->dma.sp_stride);
		break;
	case SPYRE_CLS_RING:
		spyre_st32(raw + 4, in->ring.sp);
		spyre_st32(raw + 8, in->ring.peer);
		spyre_st32(raw + 12, in->ring.tag);
		spyre_st32(raw + 16, in->ring.bytes);
		for (int i = 0; i < 3; i++)
			spyre_st32(raw + 20 + 4 * i, in->ring.reserved[i]);
		break;
	case SPYRE_CLS_NONE:
		memcpy(raw, in->raw, SPYRE_INSN_BYTES);
		break;
	default:
		spyre_st32(raw + 4, in->t.d);
		spyre_st32(raw + 8, in->t.a);
		spyre_st32(raw + 12, in->t.b);
		spyre_st32(raw + 16, in->t.rows);
		spyre_st16(raw + 20, in->t.cols);
		spyre_st16(raw + 22, in->t.k);
		spyre_st16(raw + 24, in->t.ldd);
		spyre_st16(raw + 26, in->t.lda);
		spyre_st16(raw + 28, in->t.ldb);
		spyre_st16(raw + 30, in->t.ext);
		break;
	}
}

/* ---- instruction checks ------------------------------------------------ */

uint64_t spyre_tile_extent(uint64_t rows, uint64_t cols, uint32_t esz, uint32_t ld)
{
	uint64_t row = (cols * esz + SPYRE_STICK_BYTES - 1) / SPYRE_STICK_BYTES * SPYRE_STICK_BYTES;

	return (rows - 1) * (uint64_t)ld * SPYRE_STICK_BYTES + row;
}

static uint32_t sticks(uint64_t elems, uint32_t esz)
{
	return (uint32_t)((elems * esz + SPYRE_STICK_BYTES - 1) / SPYRE_STICK_BYTES);
}

/* A tile at off: aligned, ld wide enough, inside the scratchpad. */
static uint32_t check_tile(uint32_t off, uint64_t rows, uint64_t cols, uint32_t esz, uint32_t ld,
			   uint32_t sp_bytes, uint64_t *addr)
{
	*addr = off;
	if (off % SPYRE_STICK_BYTES)
		return SPYRE_ENGINE_FAULT_ALIGN;
	if (rows > 1 && ld < sticks(cols, esz))
		return SPYRE_ENGINE_FAULT_BAD_OPERAND;
	if ((uint64_t)off + spyre_tile_extent(rows, cols, esz, ld) > sp_bytes)
		return SPYRE_ENGINE_FAULT_SP_RANGE;
	return SPYRE_ENGINE_FAULT_NONE;
}

/* A contiguous vector of n elements at off. */
static uint32_t check_vec(uint32_t off, uint64_t n, uint32_t esz, uint32_t sp_bytes, uint64_t *addr)
{
	return check_tile(off, 1, n, esz, 0, sp_bytes, addr);
}

static uint32_t check_ctl(const struct spyre_insn_ctl *c, uint32_t sp_bytes, uint32_t num_insns, uint64_t *addr)
{
	if (c->dtype || c->dtype2 || c->reserved)
		return SPYRE_ENGINE_FAULT_BAD_OPERAND;
	if (c->opcode == SPYRE_ISA_OP_LDX) {
		/* the static part: the offset without the index register */
		if ((c->flags & ~(SPYRE_IF_SKIPNEG | SPYRE_IF_RIDX)) || c->reg >= SPYRE_NUM_REGS ||
		    ((c->flags & SPYRE_IF_RIDX) ? c->reg2 >= SPYRE_NUM_REGS : c->reg2 != 0))
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		*addr = c->imm;
		if (c->imm % 4)
			return SPYRE_ENGINE_FAULT_ALIGN;
		if (c->imm + 4 > sp_bytes)
			return SPYRE_ENGINE_FAULT_SP_RANGE;
		return SPYRE_ENGINE_FAULT_NONE;
	}
	if (c->bound || c->scale || (c->flags & ~(c->opcode == SPYRE_ISA_OP_BNZ ? SPYRE_IF_GTZ : 0u)))
		return SPYRE_ENGINE_FAULT_BAD_OPERAND;
	switch (c->opcode) {
	case SPYRE_ISA_OP_NOP:
	case SPYRE_ISA_OP_HALT:
		return c->reg || c->imm || c->reg2 ? SPYRE_ENGINE_FAULT_BAD_OPERAND : SPYRE_ENGINE_FAULT_NONE;
	case SPYRE_ISA_OP_LI:
		return c->reg >= SPYRE_NUM_REGS || c->reg2 ? SPYRE_ENGINE_FAULT_BAD_OPERAND : SPYRE_ENGINE_FAULT_NONE;
	case SPYRE_ISA_OP_ADDI:
		return c->reg >= SPYRE_NUM_REGS || c->reg2 >= SPYRE_NUM_REGS ?
			SPYRE_ENGINE_FAULT_BAD_OPERAND : SPYRE_ENGINE_FAULT_NONE;
	case SPYRE_ISA_OP_LDARG:
		return c->reg >= SPYRE_NUM_REGS || c->reg2 || c->imm >= SPYRE_PROG_MAX_SCALARS ?
			SPYRE_ENGINE_FAULT_BAD_OPERAND : SPYRE_ENGINE_FAULT_NONE;
	default: /* BNZ */
		return c->reg >= SPYRE_NUM_REGS || c->reg2 || c->imm >= num_insns ?
			SPYRE_ENGINE_FAULT_BAD_OPERAND : SPYRE_ENGINE_FAULT_NONE;
	}
}

static uint32_t check_dma(const struct spyre_insn_dma *d, uint32_t sp_bytes, uint64_t *addr)
{
	if ((d->flags & ~(SPYRE_IF_SLOT | SPYRE_IF_RMEM | SPYRE_IF_RSP | SPYRE_IF_ASYNC)) || !d->rows || !d->row_bytes)
		return SPYRE_ENGINE_FAULT_BAD_OPERAND;
	if ((d->flags & SPYRE_IF_RMEM) ? d->rmem >= SPYRE_NUM_REGS : d->rmem)
		return SPYRE_ENGINE_FAULT_BAD_OPERAND;
	if ((d->flags & SPYRE_IF_RSP) ? d->rsp >= SPYRE_NUM_REGS : d->rsp)
		return SPYRE_ENGINE_FAULT_BAD_OPERAND;
	*addr = d->sp;
	if (d->sp % SPYRE_STICK_BYTES)
		return SPYRE_ENGINE_FAULT_ALIGN;
	*addr = d->row_bytes % SPYRE_STICK_BYTES ? d->row_bytes : d->mem_stride % SPYRE_STICK_BYTES ? d->mem_stride : d->sp_stride;
	if (d->row_bytes % SPYRE_STICK_BYTES || d->mem_stride % SPYRE_STICK_BYTES || d->sp_stride % SPYRE_STICK_BYTES)
		return SPYRE_ENGINE_FAULT_ALIGN;
	if ((d->flags & SPYRE_IF_SLOT) && SPYRE_SLOT_OFF(d->mem) % SPYRE_STICK_BYTES) {
		*addr = d->mem;
		return SPYRE_ENGINE_FAULT_ALIGN;
	}
	*addr = d->sp;
	if ((uint64_t)d->sp + (uint64_t)(d->rows - 1) * d->sp_stride + d->row_bytes > sp_bytes)
		return SPYRE_ENGINE_FAULT_SP_RANGE;
	/* one DMA moves at most a scratchpad's worth (bounds the work of any instruction) */
	if ((uint64_t)d->rows * d->row_bytes > sp_bytes)
		return SPYRE_ENGINE_FAULT_BAD_OPERAND;
	return SPYRE_ENGINE_FAULT_NONE;
}

static uint32_t check_ring(const struct spyre_insn_ring *r, uint32_t sp_bytes, uint64_t *addr)
{
	if (r->dtype || r->dtype2 || r->flags || r->reserved[0] || r->reserved[1] || r->reserved[2])
		return SPYRE_ENGINE_FAULT_BAD_OPERAND;
	switch (r->opcode) {
	case SPYRE_ISA_OP_SEND:
	case SPYRE_ISA_OP_RECV:
		if (r->peer >= SPYRE_MAX_CORES)
			return SPYRE_ENGINE_FAULT_BAD_PEER;
		if (!r->bytes)
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		*addr = r->sp % SPYRE_STICK_BYTES ? r->sp : r->bytes;
		if (r->sp % SPYRE_STICK_BYTES || r->bytes % SPYRE_STICK_BYTES)
			return SPYRE_ENGINE_FAULT_ALIGN;
		*addr = r->sp;
		if ((uint64_t)r->sp + r->bytes > sp_bytes)
			return SPYRE_ENGINE_FAULT_SP_RANGE;
		return SPYRE_ENGINE_FAULT_NONE;
	case SPYRE_ISA_OP_SIGNAL:
		if (r->peer >= SPYRE_MAX_CORES)
			return SPYRE_ENGINE_FAULT_BAD_PEER;
		/* the DMA completion token is the DMA queue's alone */
		return r->sp || r->bytes || r->tag >= SPYRE_NUM_TOKENS || r->tag == SPYRE_TOKEN_DMA ?
			SPYRE_ENGINE_FAULT_BAD_OPERAND : SPYRE_ENGINE_FAULT_NONE;
	case SPYRE_ISA_OP_WAIT:
		return r->sp || r->peer || r->tag >= SPYRE_NUM_TOKENS ?
			SPYRE_ENGINE_FAULT_BAD_OPERAND : SPYRE_ENGINE_FAULT_NONE;
	default: /* BARRIER */
		return r->sp || r->peer || r->tag ? SPYRE_ENGINE_FAULT_BAD_OPERAND : SPYRE_ENGINE_FAULT_NONE;
	}
}

static uint32_t check_tensor(const struct spyre_insn_tensor *t, enum spyre_opclass cls,
			     uint32_t sp_bytes, uint64_t *addr)
{
	unsigned dt = t->dtype, dt2 = t->dtype2;
	uint32_t f;

	*addr = 0;
	if (dt >= SPYRE_DT_COUNT || dt2 >= SPYRE_DT_COUNT)
		return SPYRE_ENGINE_FAULT_BAD_DTYPE;
	if (!t->rows || !t->cols)
		return SPYRE_ENGINE_FAULT_BAD_OPERAND;
	uint32_t e1 = SPYRE_DT_SIZE(dt), e2 = SPYRE_DT_SIZE(dt2);

	switch (cls) {
	case SPYRE_CLS_MATMUL:
		if (SPYRE_DT_IS_FLOAT(dt) ? (dt2 != SPYRE_DT_FP32 && dt2 != dt) :
		    (dt != SPYRE_DT_INT8 || dt2 != SPYRE_DT_INT32))
			return SPYRE_ENGINE_FAULT_BAD_DTYPE;
		if ((t->flags & ~SPYRE_IF_ACC) || !t->k || t->ext)
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		if ((f = check_tile(t->a, t->rows, t->k, e1, t->lda, sp_bytes, addr)) ||
		    (f = check_tile(t->b, t->k, t->cols, e1, t->ldb, sp_bytes, addr)))
			return f;
		return check_tile(t->d, t->rows, t->cols, e2, t->ldd, sp_bytes, addr);
	case SPYRE_CLS_BINARY:
		if (t->opcode == SPYRE_ISA_OP_DIV && (!SPYRE_DT_IS_FLOAT(dt) || !SPYRE_DT_IS_FLOAT(dt2)))
			return SPYRE_ENGINE_FAULT_BAD_DTYPE;
		f = t->flags & (SPYRE_IF_BCAST_ROW | SPYRE_IF_BCAST_COL);
		if ((t->flags & ~(f | SPYRE_IF_SWAP)) || f == (SPYRE_IF_BCAST_ROW | SPYRE_IF_BCAST_COL) || t->k ||
		    t->ext || (f && t->ldb))
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		if (f == SPYRE_IF_BCAST_ROW)
			f = check_vec(t->b, t->cols, e1, sp_bytes, addr);
		else if (f == SPYRE_IF_BCAST_COL)
			f = check_vec(t->b, t->rows, e1, sp_bytes, addr);
		else
			f = check_tile(t->b, t->rows, t->cols, e1, t->ldb, sp_bytes, addr);
		break;
	case SPYRE_CLS_UNARY:
	case SPYRE_CLS_SCALE:
		if (t->opcode != SPYRE_ISA_OP_RELU && !SPYRE_DT_IS_FLOAT(dt))
			return SPYRE_ENGINE_FAULT_BAD_DTYPE;
		if (t->flags || t->k || (cls == SPYRE_CLS_UNARY && (t->b || t->ldb || t->ext)) ||
		    (t->opcode == SPYRE_ISA_OP_POW && (t->ldb || t->ext)))
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		f = 0;
		break;
	case SPYRE_CLS_CAST:
		if (t->flags || t->k || t->b || t->ldb || t->ext)
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		f = 0;
		break;
	case SPYRE_CLS_FILL:
		if (dt != dt2)
			return SPYRE_ENGINE_FAULT_BAD_DTYPE;
		if (t->flags || t->k || t->a || t->lda || t->ldb || t->ext)
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		return check_tile(t->d, t->rows, t->cols, e2, t->ldd, sp_bytes, addr);
	case SPYRE_CLS_REDUCE:
		if ((t->flags & ~SPYRE_IF_AXIS0) || t->k || t->b || t->ldb || t->ext || t->ldd)
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		if ((f = check_tile(t->a, t->rows, t->cols, e1, t->lda, sp_bytes, addr)))
			return f;
		return check_vec(t->d, (t->flags & SPYRE_IF_AXIS0) ? t->cols : t->rows, e2, sp_bytes, addr);
	case SPYRE_CLS_SOFTMAX:
		if (!SPYRE_DT_IS_FLOAT(dt) || !SPYRE_DT_IS_FLOAT(dt2))
			return SPYRE_ENGINE_FAULT_BAD_DTYPE;
		if ((t->flags & ~SPYRE_IF_LOG) || t->k || t->b || t->ldb || t->ext)
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		f = 0;
		break;
	case SPYRE_CLS_TRANSPOSE:
		if (dt != dt2)
			return SPYRE_ENGINE_FAULT_BAD_DTYPE;
		if (t->flags == SPYRE_IF_DENSE) {
			/* two dense runs of k + rows * cols and ext + rows * cols elements */
			if (t->b || t->ldb || t->lda || t->ldd)
				return SPYRE_ENGINE_FAULT_BAD_OPERAND;
			if ((f = check_vec(t->a, t->k + (uint64_t)t->rows * t->cols, e1, sp_bytes, addr)))
				return f;
			return check_vec(t->d, t->ext + (uint64_t)t->rows * t->cols, e2, sp_bytes, addr);
		}
		if (t->flags || t->k || t->b || t->ldb || t->ext)
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		if ((f = check_tile(t->a, t->rows, t->cols, e1, t->lda, sp_bytes, addr)))
			return f;
		return check_tile(t->d, t->cols, t->rows, e2, t->ldd, sp_bytes, addr);
	case SPYRE_CLS_ARGMAX:
		if (!SPYRE_DT_IS_FLOAT(dt) || dt2 != SPYRE_DT_INT32)
			return SPYRE_ENGINE_FAULT_BAD_DTYPE;
		if ((t->flags & ~SPYRE_IF_INDEX) || t->k || t->ext || t->ldd ||
		    (!(t->flags & SPYRE_IF_INDEX) && (t->b || t->ldb)))
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		if ((f = check_tile(t->a, t->rows, t->cols, e1, t->lda, sp_bytes, addr)))
			return f;
		if ((t->flags & SPYRE_IF_INDEX) &&
		    (f = check_tile(t->b, t->rows, t->cols, e2, t->ldb, sp_bytes, addr)))
			return f;
		return check_vec(t->d, t->rows, e2, sp_bytes, addr);
	case SPYRE_CLS_MOVM:
		if (SPYRE_DT_IS_FLOAT(dt) != SPYRE_DT_IS_FLOAT(dt2))
			return SPYRE_ENGINE_FAULT_BAD_DTYPE;
		if (t->flags || t->k || t->ext)
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		f = check_tile(t->b, t->rows, t->cols, 1, t->ldb, sp_bytes, addr);
		break;
	case SPYRE_CLS_TRIL:
		if (dt != dt2)
			return SPYRE_ENGINE_FAULT_BAD_DTYPE;
		if ((t->flags & ~(SPYRE_IF_UPPER | SPYRE_IF_RDIAG)) ||
		    ((t->flags & SPYRE_IF_RDIAG) ? t->ldb >= SPYRE_NUM_REGS : t->ldb != 0) ||
		    (t->k ? t->ext >= t->k : t->ext != 0))
			return SPYRE_ENGINE_FAULT_BAD_OPERAND;
		f = 0;
		break;
	default:
		return SPYRE_ENGINE_FAULT_BAD_OPCODE;
	}
	/* elementwise shapes: a and d are rows x cols */
	if (f)
		return f;
	if ((f = check_tile(t->a, t->rows, t->cols, e1, t->lda, sp_bytes, addr)))
		return f;
	return check_tile(t->d, t->rows, t->cols, e2, t->ldd, sp_bytes, addr);
}

uint32_t spyre_insn_check(const union spyre_insn *in, uint32_t sp_bytes, uint32_t num_insns,
			  uint64_t *addr)
{
	enum spyre_opclass cls = spyre_opclass(in->raw[0]);
	uint64_t dummy;

	if (!addr)
		addr = &dummy;
	*addr = 0;
	switch (cls) {
	case SPYRE_CLS_NONE:
		return SPYRE_ENGINE_FAULT_BAD_OPCODE;
	case SPYRE_CLS_CTL:
		return check_ctl(&in->ctl, sp_bytes, num_insns, addr);
	case SPYRE_CLS_DMA:
		return check_dma(&in->dma, sp_bytes, addr);
	case SPYRE_CLS_RING:
		return check_ring(&in->ring, sp_bytes, addr);
	default:
		return check_tensor(&in->t, cls, sp_bytes, addr);
	}
}

/* ---- container --------------------------------------------------------- */

#define HDR(f)		offsetof(struct spyre_prog_hdr, f)
#define SYM(f)		offsetof(struct spyre_prog_sym, f)
#define RELOC(f)	offsetof(struct spyre_prog_reloc, f)

void spyre_prog_hdr_decode(const uint8_t *p, struct spyre_prog_hdr *h)
{
	h->magic = spyre_ld32(p + HDR(magic));
	h->version = spyre_ld16(p + HDR(version));
	h->flags = spyre_ld16(p + HDR(flags));
	h->total_size = spyre_ld32(p + HDR(total_size));
	h->num_cores = spyre_ld32(p + HDR(num_cores));
	h->core_off = spyre_ld32(p + HDR(core_off));
	h->sym_off = spyre_ld32(p + HDR(sym_off));
	h->num_syms = spyre_ld32(p + HDR(num_syms));
	h->num_scalars = spyre_ld32(p + HDR(num_scalars));
	h->reloc_off = spyre_ld32(p + HDR(reloc_off));
	h->num_relocs = spyre_ld32(p + HDR(num_relocs));
	h->const_off = spyre_ld32(p + HDR(const_off));
	h->const_size = spyre_ld32(p + HDR(const_size));
	for (int i = 0; i < 4; i++)
		h->reserved[i] = spyre_ld32(p + HDR(reserved) + 4 * i);
}

void spyre_prog_hdr_encode(const struct spyre_prog_hdr *h, uint8_t *p)
{
	spyre_st32(p + HDR(magic), h->magic);
	spyre_st16(p + HDR(version), h->version);
	spyre_st16(p + HDR(flags), h->flags);
	spyre_st32(p + HDR(total_size), h->total_size);
	spyre_st32(p + HDR(num_cores), h->num_cores);
	spyre_st32(p + HDR(core_off), h->core_off);
	spyre_st32(p + HDR(sym_off), h->sym_off);
	spyre_st32(p + HDR(num_syms), h->num_syms);
	spyre_st32(p + HDR(num_scalars), h->num_scalars);
	spyre_st32(p + HDR(reloc_off), h->reloc_off);
	spyre_st32(p + HDR(num_relocs), h->num_relocs);
	spyre_st32(p + HDR(const_off), h->const_off);
	spyre_st32(p + HDR(const_size), h->const_size);
	for (int i = 0; i < 4; i++)
		spyre_st32(p + HDR(reserved) + 4 * i, h->reserved[i]);
}

void spyre_prog_core_decode(const uint8_t *p, struct spyre_prog_core *c)
{
	c->code_off = spyre_ld32(p + offsetof(struct spyre_prog_core, code_off));
	c->num_insns = spyre_ld32(p + offsetof(struct spyre_prog_core, num_insns));
}

void spyre_prog_core_encode(const struct spyre_prog_core *c, uint8_t *p)
{
	spyre_st32(p + offsetof(struct spyre_prog_core, code_off), c->code_off);
	spyre_st32(p + offsetof(struct spyre_prog_core, num_insns), c->num_insns);
}

void spyre_prog_sym_decode(const uint8_t *p, struct spyre_prog_sym *s)
{
	memcpy(s->name, p + SYM(name), SPYRE_SYM_NAME_LEN);
	s->dtype = p[SYM(dtype)];
	s->rank = p[SYM(rank)];
	s->flags = spyre_ld16(p + SYM(flags));
	s->reserved = spyre_ld32(p + SYM(reserved));
	s->size = spyre_ld64(p + SYM(size));
	for (int d = 0; d < SPYRE_SYM_MAX_RANK; d++)
		s->shape[d] = spyre_ld64(p + SYM(shape) + 8 * d);
}

void spyre_prog_sym_encode(const struct spyre_prog_sym *s, uint8_t *p)
{
	memcpy(p + SYM(name), s->name, SPYRE_SYM_NAME_LEN);
	p[SYM(dtype)] = s->dtype;
	p[SYM(rank)] = s->rank;
	spyre_st16(p + SYM(flags), s->flags);
	spyre_st32(p + SYM(reserved), s->reserved);
	spyre_st64(p + SYM(size), s->size);
	for (int d = 0; d < SPYRE_SYM_MAX_RANK; d++)
		spyre_st64(p + SYM(shape) + 8 * d, s->shape[d]);
}

void spyre_prog_reloc_decode(const uint8_t *p, struct spyre_prog_reloc *r)
{
	r->core = spyre_ld32(p + RELOC(core));
	r->pc = spyre_ld32(p + RELOC(pc));
	r->sym = spyre_ld32(p + RELOC(sym));
	r->reserved = spyre_ld32(p + RELOC(reserved));
	r->addend = spyre_ld64(p + RELOC(addend));
}

void spyre_prog_reloc_encode(const struct spyre_prog_reloc *r, uint8_t *p)
{
	spyre_st32(p + RELOC(core), r->core);
	spyre_st32(p + RELOC(pc), r->pc);
	spyre_st32(p + RELOC(sym), r->sym);
	spyre_st32(p + RELOC(reserved), r->reserved);
	spyre_st64(p + RELOC(addend), r->addend);
}

void spyre_prog_get_sym(const struct spyre_prog_view *v, uint32_t i, struct spyre_prog_sym *s)
{
	spyre_prog_sym_decode(v->image + v->hdr.sym_off + (uint64_t)i * sizeof(*s), s);
}

void spyre_prog_get_reloc(const struct spyre_prog_view *v, uint32_t i, struct spyre_prog_reloc *r)
{
	spyre_prog_reloc_decode(v->image + v->hdr.reloc_off + (uint64_t)i * sizeof(*r), r);
}

uint64_t spyre_prog_insn_off(const struct spyre_prog_view *v, uint32_t core, uint32_t pc)
{
	return v->cores[core].code_off + (uint64_t)pc * SPYRE_INSN_BYTES;
}

uint64_t spyre_prog_reloc_site(const struct spyre_prog_view *v, const struct spyre_prog_reloc *r)
{
	return spyre_prog_insn_off(v, r->core, r->pc) + offsetof(struct spyre_insn_dma, mem);
}

int spyre_prog_describe(const struct spyre_prog_view *v, char *buf, size_t len)
{
	if (!v->why)
		return snprintf(buf, len, "valid");
	if (v->where == SPYRE_PROG_WHERE_NONE)
		return snprintf(buf, len, "%s", v->why);
	return snprintf(buf, len, "%s %u: %s", v->part, v->where, v->why);
}

/* The container is malformed: say where and why (for spyre_prog_describe). */
static uint32_t bad(struct spyre_prog_view *v, const char *part, uint32_t where, const char *why)
{
	v->part = part;
	v->where = where;
	v->why = why;
	return SPYRE_ENGINE_FAULT_BAD_PROGRAM;
}

#define NOWHERE		SPYRE_PROG_WHERE_NONE

/* Sections in the image: [off, off+len) inside the image, aligned, disjoint. */
struct span {
	uint64_t off, len;
};

static int span_ok(const struct span *s, uint64_t size, uint64_t align)
{
	return s->off % align == 0 && s->off <= size && s->len <= size - s->off;
}

static int overlaps(const struct span *a, const struct span *b)
{
	return a->len && b->len && a->off < b->off + b->len && b->off < a->off + a->len;
}

static int valid_name(const char *n)
{
	size_t i;

	for (i = 0; i < SPYRE_SYM_NAME_LEN && n[i]; i++) {
		char c = n[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.'))
			return 0;
	}
	if (i == 0 || i == SPYRE_SYM_NAME_LEN)
		return 0;
	for (; i < SPYRE_SYM_NAME_LEN; i++)	/* padding after the NUL is zero */
		if (n[i])
			return 0;
	return 1;
}

/* The header's own fields, before any offset in it is followed. */
static uint32_t check_hdr(struct spyre_prog_view *v, uint64_t size)
{
	const struct spyre_prog_hdr *h = &v->hdr;

	if (h->magic != SPYRE_PROG_MAGIC)
		return bad(v, NULL, NOWHERE, "not a spyre program (bad magic)");
	if (h->version != SPYRE_PROG_VERSION)
		return bad(v, NULL, NOWHERE, "unsupported format version");
	if (h->flags || h->reserved[0] || h->reserved[1] || h->reserved[2] || h->reserved[3])
		return bad(v, NULL, NOWHERE, "reserved header field not zero");
	if (h->total_size < sizeof(*h) || h->total_size > size || h->total_size > SPYRE_PROG_MAX_BYTES)
		return bad(v, NULL, NOWHERE, "total_size is not the image's (or over 16 MiB)");
	if (!h->num_cores || h->num_cores > SPYRE_MAX_CORES)
		return bad(v, NULL, NOWHERE, "core count not 1..32");
	if (h->num_syms > SPYRE_PROG_MAX_SYMS || h->num_scalars > SPYRE_PROG_MAX_SCALARS ||
	    h->num_relocs > SPYRE_PROG_MAX_RELOCS)
		return bad(v, NULL, NOWHERE, "more symbols, scalars or relocations than a program may have");
	if (h->const_size % SPYRE_PROG_ALIGN)
		return bad(v, NULL, NOWHERE, "constant data not a multiple of 128 bytes");
	return SPYRE_ENGINE_FAULT_NONE;
}

static uint32_t check_sym(struct spyre_prog_view *v, uint32_t i)
{
	struct spyre_prog_sym s;

	spyre_prog_get_sym(v, i, &s);
	if (!valid_name(s.name))
		return bad(v, "symbol", i, "name not 1..31 characters of [A-Za-z0-9_.], NUL-padded");
	if (s.dtype >= SPYRE_DT_COUNT)
		return bad(v, "symbol", i, "unknown dtype");
	if (s.rank > SPYRE_SYM_MAX_RANK)
		return bad(v, "symbol", i, "rank over 4");
	if ((s.flags & ~SPYRE_SYM_F_MASK) || s.reserved)
		return bad(v, "symbol", i, "unknown flag or reserved field not zero");
	for (int d = s.rank; d < SPYRE_SYM_MAX_RANK; d++)
		if (s.shape[d])
			return bad(v, "symbol", i, "shape beyond its rank not zero");
	for (uint32_t j = 0; j < i; j++) {
		const uint8_t *o = v->image + v->hdr.sym_off + (uint64_t)j * sizeof(s);

		if (!strncmp((const char *)o, s.name, SPYRE_SYM_NAME_LEN))
			return bad(v, "symbol", i, "name used by an earlier symbol");
	}
	return SPYRE_ENGINE_FAULT_NONE;
}

static uint32_t check_reloc(struct spyre_prog_view *v, uint32_t i)
{
	struct spyre_prog_reloc r;

	spyre_prog_get_reloc(v, i, &r);
	if (r.core >= v->hdr.num_cores)
		return bad(v, "relocation", i, "names a core past the core table");
	if (r.pc >= v->cores[r.core].num_insns)
		return bad(v, "relocation", i, "names an instruction past its core's stream");
	if (r.sym >= v->hdr.num_syms)
		return bad(v, "relocation", i, "names a slot past the symbol table");
	if (r.reserved)
		return bad(v, "relocation", i, "reserved field not zero");
	const uint8_t *insn = v->image + spyre_prog_insn_off(v, r.core, r.pc);

	if (spyre_opclass(insn[0]) != SPYRE_CLS_DMA || (insn[3] & SPYRE_IF_SLOT))
		return bad(v, "relocation", i, "names an instruction that is not a LOAD/STORE with an absolute address");
	return SPYRE_ENGINE_FAULT_NONE;
}

uint32_t spyre_prog_check_container(const void *image, uint64_t size, struct spyre_prog_view *v)
{
	const uint8_t *p = image;
	struct spyre_prog_hdr *h = &v->hdr;
	struct span sp[5 + SPYRE_MAX_CORES];	/* header, core table, streams, symbols, relocations, constants */
	unsigned n = 0;
	uint32_t f;

	memset(v, 0, sizeof(*v));
	v->image = p;
	v->size = size;
	if (!image || size < sizeof(*h))
		return bad(v, NULL, NOWHERE, "shorter than the 64-byte header");
	spyre_prog_hdr_decode(p, h);
	if ((f = check_hdr(v, size)))
		return f;
	size = h->total_size;
	v->size = size;

	sp[n++] = (struct span){ 0, sizeof(*h) };
	sp[n++] = (struct span){ h->core_off, (uint64_t)h->num_cores * sizeof(struct spyre_prog_core) };
	struct span syms = { h->sym_off, (uint64_t)h->num_syms * sizeof(struct spyre_prog_sym) };
	struct span rel = { h->reloc_off, (uint64_t)h->num_relocs * sizeof(struct spyre_prog_reloc) };
	struct span cst = { h->const_off, h->const_size };

	if (!span_ok(&sp[1], size, 8) || !span_ok(&syms, size, 8) || !span_ok(&rel, size, 8) ||
	    !span_ok(&cst, size, SPYRE_PROG_ALIGN))
		return bad(v, NULL, NOWHERE, "a table or the constant data lies outside the image or is misaligned");
	for (uint32_t c = 0; c < h->num_cores; c++) {
		spyre_prog_core_decode(p + h->core_off + (uint64_t)c * sizeof(struct spyre_prog_core), &v->cores[c]);
		struct span s = { v->cores[c].code_off, (uint64_t)v->cores[c].num_insns * SPYRE_INSN_BYTES };

		if (v->cores[c].num_insns > SPYRE_PROG_MAX_INSNS || !span_ok(&s, size, 8))
			return bad(v, "core", c, "stream outside the image, misaligned or over 65536 instructions");
		sp[n++] = s;
	}
	sp[n++] = syms;
	sp[n++] = rel;
	sp[n++] = cst;
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = i + 1; j < n; j++)
			if (overlaps(&sp[i], &sp[j]))
				return bad(v, NULL, NOWHERE, "sections overlap");

	for (uint32_t i = 0; i < h->num_syms; i++)
		if ((f = check_sym(v, i)))
			return f;
	for (uint32_t i = 0; i < h->num_relocs; i++)
		if ((f = check_reloc(v, i)))
			return f;
	return SPYRE_ENGINE_FAULT_NONE;
}

uint32_t spyre_prog_validate(const void *image, uint64_t size, uint32_t sp_bytes,
			     uint32_t *core, uint32_t *pc)
{
	struct spyre_prog_view v;
	uint32_t f;

	*core = SPYRE_ENGINE_FAULT_CORE_NONE;
	*pc = SPYRE_ENGINE_FAULT_PC_NONE;
	f = spyre_prog_check_container(image, size, &v);
	if (f)
		return f;
	for (uint32_t c = 0; c < v.hdr.num_cores; c++) {
		for (uint32_t i = 0; i < v.cores[c].num_insns; i++) {
			union spyre_insn in;

			spyre_insn_decode(v.image + spyre_prog_insn_off(&v, c, i), &in);
			f = spyre_insn_check(&in, sp_bytes, v.cores[c].num_insns, NULL);
			if (!f && in.raw[0] == SPYRE_ISA_OP_LDARG && in.ctl.imm >= v.hdr.num_scalars)
				f = SPYRE_ENGINE_FAULT_BAD_OPERAND;
			if (!f && spyre_opclass(in.raw[0]) == SPYRE_CLS_DMA && (in.dma.flags & SPYRE_IF_SLOT)) {
				uint32_t slot = SPYRE_SLOT_OF(in.dma.mem);

				if (slot == SPYRE_SLOT_CONST ? in.raw[0] == SPYRE_ISA_OP_STORE : slot >= v.hdr.num_syms)
					f = SPYRE_ENGINE_FAULT_BAD_SLOT;
			}
			if (f) {
				*core = c;
				*pc = i;
				return f;
			}
		}
	}
	return SPYRE_ENGINE_FAULT_NONE;
}
