// SPDX-License-Identifier: MIT
/*
 * Program builder: collects per-core instruction streams, symbols,
 * relocations and constant data, then lays out a program image in the
 * format of uapi/spyre_isa.h (header, core table, code, symbols,
 * relocations, constants; each section 8-byte aligned, constants 128).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_dtype.h"
#include "spyre_isa_codec.h"
#include "spyre_progbuild.h"

struct stream {
	uint8_t *code;
	uint32_t n, cap;
};

struct spyre_pb {
	struct stream s[SPYRE_MAX_CORES];
	uint32_t num_cores;
	struct spyre_prog_sym syms[SPYRE_PROG_MAX_SYMS];
	uint32_t num_syms, num_scalars;
	struct spyre_prog_reloc *rel;
	uint32_t num_rel, rel_cap;
	uint8_t *cst;
	size_t cst_len;
	enum spyre_pb_addressing addressing;
	int err;
};

struct spyre_pb *spyre_pb_new(void)
{
	return calloc(1, sizeof(struct spyre_pb));
}

void spyre_pb_free(struct spyre_pb *pb)
{
	if (!pb)
		return;
	for (int i = 0; i < SPYRE_MAX_CORES; i++)
		free(pb->s[i].code);
	free(pb->rel);
	free(pb->cst);
	free(pb);
}

static int fail(struct spyre_pb *pb)
{
	pb->err = 1;
	return -1;
}

int spyre_pb_sym(struct spyre_pb *pb, const char *name, unsigned dtype, unsigned rank,
		 const uint64_t *shape, uint64_t size, unsigned flags)
{
	struct spyre_prog_sym *s;

	if (pb->num_syms >= SPYRE_PROG_MAX_SYMS || !name || strlen(name) >= SPYRE_SYM_NAME_LEN ||
	    rank > SPYRE_SYM_MAX_RANK || dtype >= SPYRE_DT_COUNT)
		return fail(pb);
	s = &pb->syms[pb->num_syms];
	memset(s, 0, sizeof(*s));
	strcpy(s->name, name);
	s->dtype = (uint8_t)dtype;
	s->rank = (uint8_t)rank;
	s->flags = (uint16_t)flags;
	s->size = size;
	for (unsigned i = 0; i < rank; i++)
		s->shape[i] = shape[i];
	return (int)pb->num_syms++;
}

void spyre_pb_set_scalars(struct spyre_pb *pb, uint32_t n)
{
	if (n > SPYRE_PROG_MAX_SCALARS)
		fail(pb);
	else
		pb->num_scalars = n;
}

int64_t spyre_pb_const(struct spyre_pb *pb, const void *data, size_t len)
{
	size_t pad = (len + SPYRE_PROG_ALIGN - 1) / SPYRE_PROG_ALIGN * SPYRE_PROG_ALIGN;
	uint8_t *n = realloc(pb->cst, pb->cst_len + pad);
	int64_t off = (int64_t)pb->cst_len;

	if (!n)
		return fail(pb);
	pb->cst = n;
	memcpy(n + pb->cst_len, data, len);
	memset(n + pb->cst_len + len, 0, pad - len);
	pb->cst_len += pad;
	return off;
}

void spyre_pb_core(struct spyre_pb *pb, unsigned core)
{
	if (core >= SPYRE_MAX_CORES)
		fail(pb);
	else if (core + 1 > pb->num_cores)
		pb->num_cores = core + 1;
}

int spyre_pb_emit(struct spyre_pb *pb, unsigned core, const union spyre_insn *in)
{
	struct stream *s;

	if (core >= SPYRE_MAX_CORES)
		return fail(pb);
	s = &pb->s[core];
	if (s->n >= SPYRE_PROG_MAX_INSNS)
		return fail(pb);
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 64;
		uint8_t *n = realloc(s->code, (size_t)cap * SPYRE_INSN_BYTES);

		if (!n)
			return fail(pb);
		s->code = n;
		s->cap = cap;
	}
	spyre_insn_encode(in, s->code + (size_t)s->n * SPYRE_INSN_BYTES);
	spyre_pb_core(pb, core);
	return (int)s->n++;
}

int spyre_pb_reloc(struct spyre_pb *pb, unsigned core, unsigned pc, unsigned sym, uint64_t addend)
{
	if (pb->num_rel >= SPYRE_PROG_MAX_RELOCS)
		return fail(pb);
	if (pb->num_rel == pb->rel_cap) {
		uint32_t cap = pb->rel_cap ? pb->rel_cap * 2 : 16;
		struct spyre_prog_reloc *n = realloc(pb->rel, cap * sizeof(*n));

		if (!n)
			return fail(pb);
		pb->rel = n;
		pb->rel_cap = cap;
	}
	pb->rel[pb->num_rel++] = (struct spyre_prog_reloc){ .core = core, .pc = pc, .sym = sym, .addend = addend };
	return 0;
}

int spyre_pb_ctl(struct spyre_pb *pb, unsigned core, unsigned op, unsigned reg, uint64_t imm, unsigned reg2)
{
	union spyre_insn in = { .ctl = { .opcode = (uint8_t)op, .reg = reg, .imm = imm, .reg2 = reg2 } };

	return spyre_pb_emit(pb, core, &in);
}

int spyre_pb_ldx(struct spyre_pb *pb, unsigned core, unsigned reg, uint32_t sp_off, unsigned ridx, uint32_t bound,
		 uint32_t scale, unsigned flags)
{
	union spyre_insn in = { .ctl = { .opcode = SPYRE_ISA_OP_LDX, .reg = reg, .imm = sp_off, .bound = bound,
					 .scale = scale } };

	in.ctl.flags = (uint8_t)(flags & SPYRE_IF_SKIPNEG);
	if (ridx) {
		in.ctl.flags |= SPYRE_IF_RIDX;
		in.ctl.reg2 = ridx - 1;
	}
	return spyre_pb_emit(pb, core, &in);
}

int spyre_pb_bgtz(struct spyre_pb *pb, unsigned core, unsigned reg, uint32_t target)
{
	union spyre_insn in = { .ctl = { .opcode = SPYRE_ISA_OP_BNZ, .flags = SPYRE_IF_GTZ, .reg = reg,
					 .imm = target } };

	return spyre_pb_emit(pb, core, &in);
}

int spyre_pb_ring(struct spyre_pb *pb, unsigned core, unsigned op, uint32_t sp, uint32_t peer,
		  uint32_t tag, uint32_t bytes)
{
	union spyre_insn in = { .ring = { .opcode = (uint8_t)op, .sp = sp, .peer = peer, .tag = tag,
					  .bytes = bytes } };

	return spyre_pb_emit(pb, core, &in);
}

void spyre_pb_set_addressing(struct spyre_pb *pb, enum spyre_pb_addressing mode)
{
	pb->addressing = mode;
}

int spyre_pb_dma(struct spyre_pb *pb, unsigned core, unsigned op, const struct spyre_pb_dma *d)
{
	uint32_t rows = d->rows ? d->rows : 1;
	union spyre_insn in = { .dma = {
		.opcode = (uint8_t)op, .sp = d->sp, .rows = rows, .row_bytes = d->row_bytes,
		.mem_stride = d->mem_stride ? d->mem_stride : (rows > 1 ? d->row_bytes : 0),
		.sp_stride = d->sp_stride ? d->sp_stride : (rows > 1 ? d->row_bytes : 0) } };
	bool reloc = false;
	int pc;

	if ((op != SPYRE_ISA_OP_LOAD && op != SPYRE_ISA_OP_STORE) || d->mem.reg > SPYRE_NUM_REGS ||
	    d->sp_reg > SPYRE_NUM_REGS)
		return fail(pb);
	if (d->mem.reg) {
		in.dma.flags |= SPYRE_IF_RMEM;
		in.dma.rmem = (uint8_t)(d->mem.reg - 1);
	}
	if (d->sp_reg) {
		in.dma.flags |= SPYRE_IF_RSP;
		in.dma.rsp = (uint8_t)(d->sp_reg - 1);
	}
	if (d->async)
		in.dma.flags |= SPYRE_IF_ASYNC;
	if (d->mem.sym == SPYRE_PB_RAW) {
		in.dma.mem = d->mem.off;
	} else if (d->mem.sym == SPYRE_PB_CONST) {
		if (d->mem.off > SPYRE_SLOT_OFF(~0ull))
			return fail(pb);
		in.dma.flags |= SPYRE_IF_SLOT;
		in.dma.mem = SPYRE_SLOT_ADDR(SPYRE_SLOT_CONST, d->mem.off);
	} else if (d->mem.sym < 0 || (uint32_t)d->mem.sym >= pb->num_syms ||
		   d->mem.off > SPYRE_SLOT_OFF(~0ull)) {
		return fail(pb);
	} else if (pb->addressing == SPYRE_PB_ADDR_RELOC) {
		/* the unpatched operand holds the addend: validators see an aligned value */
		in.dma.mem = d->mem.off;
		reloc = true;
	} else {
		in.dma.flags |= SPYRE_IF_SLOT;
		in.dma.mem = SPYRE_SLOT_ADDR(d->mem.sym, d->mem.off);
	}
	pc = spyre_pb_emit(pb, core, &in);
	if (pc >= 0 && reloc && spyre_pb_reloc(pb, core, (unsigned)pc, (unsigned)d->mem.sym, d->mem.off) < 0)
		return -1;
	return pc;
}

static uint32_t tight(uint32_t ld, uint64_t cols, unsigned dt)
{
	return ld ? ld : spyre_sticks(cols, dt);
}

int spyre_pb_op(struct spyre_pb *pb, unsigned core, const struct spyre_pb_op *o)
{
	uint32_t ldd = o->ldd, lda = o->lda, ldb = o->ldb, b = o->b;
	uint16_t ext = 0;

	/* a tensor opcode and flags that fit their bytes; the rest is the validator's */
	if (o->op > 0xff || o->flags > 0xff || o->op < SPYRE_ISA_OP_MATMUL || o->op >= SPYRE_ISA_OP_SEND)
		return fail(pb);
	switch (o->op) {
	case SPYRE_ISA_OP_MATMUL:
		ldd = tight(ldd, o->cols, o->dt2);
		lda = tight(lda, o->k, o->dt);
		ldb = tight(ldb, o->cols, o->dt);
		break;
	case SPYRE_ISA_OP_ADD:
	case SPYRE_ISA_OP_SUB:
	case SPYRE_ISA_OP_MUL:
	case SPYRE_ISA_OP_MAX:
	case SPYRE_ISA_OP_DIV:
	case SPYRE_ISA_OP_MIN:
		ldd = tight(ldd, o->cols, o->dt2);
		lda = tight(lda, o->cols, o->dt);
		if (!(o->flags & (SPYRE_IF_BCAST_ROW | SPYRE_IF_BCAST_COL)))
			ldb = tight(ldb, o->cols, o->dt);
		break;
	case SPYRE_ISA_OP_MOVM:
		ldd = tight(ldd, o->cols, o->dt2);
		lda = tight(lda, o->cols, o->dt);
		ldb = tight(ldb, o->cols, SPYRE_DT_INT8);
		break;
	case SPYRE_ISA_OP_POW:
		b = spyre_f32_bits(o->scale);
		ldd = tight(ldd, o->cols, o->dt2);
		lda = tight(lda, o->cols, o->dt);
		break;
	case SPYRE_ISA_OP_TRIL:
		b = o->imm;
		ext = (uint16_t)o->ext;
		ldd = tight(ldd, o->cols, o->dt2);
		lda = tight(lda, o->cols, o->dt);
		break;
	case SPYRE_ISA_OP_SCALE:
		b = spyre_f32_bits(o->scale);
		ldb = (uint16_t)spyre_f32_bits(o->bias);
		ext = (uint16_t)(spyre_f32_bits(o->bias) >> 16);
		ldd = tight(ldd, o->cols, o->dt2);
		lda = tight(lda, o->cols, o->dt);
		break;
	case SPYRE_ISA_OP_FILL:
		b = o->imm;
		ldd = tight(ldd, o->cols, o->dt2);
		break;
	case SPYRE_ISA_OP_REDSUM:
	case SPYRE_ISA_OP_REDMAX:
		lda = tight(lda, o->cols, o->dt);
		break;
	case SPYRE_ISA_OP_TRANSPOSE:
		if (o->flags & SPYRE_IF_DENSE) {
			ext = (uint16_t)o->ext;
			break;
		}
		ldd = tight(ldd, o->rows, o->dt2);
		lda = tight(lda, o->cols, o->dt);
		break;
	case SPYRE_ISA_OP_ARGMAX:
		lda = tight(lda, o->cols, o->dt);
		if (o->flags & SPYRE_IF_INDEX)
			ldb = tight(ldb, o->cols, o->dt2);
		break;
	default:	/* unary, cast, softmax */
		ldd = tight(ldd, o->cols, o->dt2);
		lda = tight(lda, o->cols, o->dt);
		break;
	}
	if (o->cols > 0xffff || o->k > 0xffff || o->ext > 0xffff || ldd > 0xffff || lda > 0xffff || ldb > 0xffff ||
	    o->dt >= SPYRE_DT_COUNT || o->dt2 >= SPYRE_DT_COUNT)
		return fail(pb);

	union spyre_insn in = { .t = { .opcode = (uint8_t)o->op, .dtype = (uint8_t)o->dt,
				       .dtype2 = (uint8_t)o->dt2, .flags = (uint8_t)o->flags, .d = o->d,
				       .a = o->a, .b = b, .rows = o->rows, .cols = (uint16_t)o->cols,
				       .k = (uint16_t)o->k, .ldd = (uint16_t)ldd, .lda = (uint16_t)lda,
				       .ldb = (uint16_t)ldb, .ext = ext } };

	return spyre_pb_emit(pb, core, &in);
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

int spyre_pb_finish(struct spyre_pb *pb, void **image, size_t *size)
{
	size_t off = sizeof(struct spyre_prog_hdr), core_off, code_off[SPYRE_MAX_CORES], sym_off, rel_off,
	       cst_off, total;
	uint8_t *p;

	*image = NULL;
	*size = 0;
	if (pb->err)
		return -1;
	if (!pb->num_cores)
		pb->num_cores = 1;
	core_off = off;
	off = align_up(off + 8 * pb->num_cores, 8);
	for (uint32_t c = 0; c < pb->num_cores; c++) {
		code_off[c] = off;
		off += (size_t)pb->s[c].n * SPYRE_INSN_BYTES;
	}
	sym_off = off;
	off += (size_t)pb->num_syms * sizeof(struct spyre_prog_sym);
	rel_off = off;
	off += (size_t)pb->num_rel * sizeof(struct spyre_prog_reloc);
	cst_off = align_up(off, SPYRE_PROG_ALIGN);
	total = align_up(cst_off + pb->cst_len, SPYRE_PROG_ALIGN);
	if (total > SPYRE_PROG_MAX_BYTES)
		return fail(pb);
	p = calloc(1, total);
	if (!p)
		return fail(pb);

	spyre_prog_hdr_encode(&(struct spyre_prog_hdr){
		.magic = SPYRE_PROG_MAGIC, .version = SPYRE_PROG_VERSION, .total_size = (uint32_t)total,
		.num_cores = pb->num_cores, .core_off = (uint32_t)core_off, .sym_off = (uint32_t)sym_off,
		.num_syms = pb->num_syms, .num_scalars = pb->num_scalars, .reloc_off = (uint32_t)rel_off,
		.num_relocs = pb->num_rel, .const_off = (uint32_t)cst_off, .const_size = (uint32_t)pb->cst_len }, p);
	for (uint32_t c = 0; c < pb->num_cores; c++) {
		spyre_prog_core_encode(&(struct spyre_prog_core){ .code_off = (uint32_t)code_off[c],
								  .num_insns = pb->s[c].n },
				       p + core_off + c * sizeof(struct spyre_prog_core));
		if (pb->s[c].n)
			memcpy(p + code_off[c], pb->s[c].code, (size_t)pb->s[c].n * SPYRE_INSN_BYTES);
	}
	for (uint32_t i = 0; i < pb->num_syms; i++)
		spyre_prog_sym_encode(&pb->syms[i], p + sym_off + i * sizeof(struct spyre_prog_sym));
	for (uint32_t i = 0; i < pb->num_rel; i++)
		spyre_prog_reloc_encode(&pb->rel[i], p + rel_off + i * sizeof(struct spyre_prog_reloc));
	if (pb->cst_len)
		memcpy(p + cst_off, pb->cst, pb->cst_len);
	*image = p;
	*size = total;
	return 0;
}

void *spyre_pb_relu_image(enum spyre_pb_addressing form, uint32_t rows, uint64_t x_bytes, size_t *size)
{
	const uint32_t cols = SPYRE_STICK_BYTES / 4;
	struct spyre_pb *pb = spyre_pb_new();
	void *img = NULL;

	*size = 0;
	if (!pb)
		return NULL;
	spyre_pb_set_addressing(pb, form);
	spyre_pb_sym(pb, "x", SPYRE_DT_FP32, 1, (uint64_t[]){ (uint64_t)rows * cols }, x_bytes, SPYRE_SYM_IN);
	spyre_pb_sym(pb, "y", SPYRE_DT_FP32, 1, (uint64_t[]){ (uint64_t)rows * cols },
		     (uint64_t)rows * SPYRE_STICK_BYTES, SPYRE_SYM_OUT);
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .rows = rows,
		.row_bytes = SPYRE_STICK_BYTES });
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_RELU, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
		.rows = rows, .cols = cols });
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .mem = { .sym = 1 }, .rows = rows,
		.row_bytes = SPYRE_STICK_BYTES });
	if (spyre_pb_finish(pb, &img, size))
		img = NULL;
	spyre_pb_free(pb);
	return img;
}

int spyre_prog_relocate(void *image, size_t size, const uint64_t *slot_va, uint32_t num_slots)
{
	struct spyre_prog_view v;

	if (spyre_prog_check_container(image, size, &v))
		return -1;
	for (uint32_t i = 0; i < v.hdr.num_relocs; i++) {
		struct spyre_prog_reloc r;

		spyre_prog_get_reloc(&v, i, &r);
		if (r.sym >= num_slots)
			return -1;
		spyre_st64((uint8_t *)image + spyre_prog_reloc_site(&v, &r), slot_va[r.sym] + r.addend);
	}
	return (int)v.hdr.num_relocs;
}
