// SPDX-License-Identifier: MIT
/*
 * Description: gathered addressing (issue 22, the paged KV cache): LDX
 * turns an int32 table entry in the scratchpad into a scaled register that
 * addresses later LOAD/STOREs (a block table gathers blocks, a slot mapping
 * scatters rows and skips -1 entries with SPYRE_IF_SKIPNEG), BNZ with
 * SPYRE_IF_GTZ loops while a count is positive, TRIL with SPYRE_IF_RDIAG
 * takes its diagonal from a register. A table entry outside its bound is
 * the fault bad-index naming core, pc and the entry, never an access; the
 * validator and the assembler agree with the engine.
 */
#include <string.h>

#include "flatmem.h"
#include "spyre_asm.h"
#include "spyre_dtype.h"
#include "spyre_progbuild.h"

static struct spyre_engine *E;
static struct flatmem M;
static uint64_t tbl, src, dst;	/* slots 0 (int32 table, 128 B), 1 (4 blocks of 128 B), 2 (4 blocks) */
static struct spyre_launch_result r;

static struct spyre_pb *newpb(void)
{
	struct spyre_pb *pb = spyre_pb_new();

	spyre_pb_sym(pb, "tbl", SPYRE_DT_INT32, 1, (uint64_t[]){ 32 }, 128, SPYRE_SYM_IN);
	spyre_pb_sym(pb, "src", SPYRE_DT_FP32, 2, (uint64_t[]){ 4, 32 }, 512, SPYRE_SYM_IN);
	spyre_pb_sym(pb, "dst", SPYRE_DT_FP32, 2, (uint64_t[]){ 4, 32 }, 512, SPYRE_SYM_IN | SPYRE_SYM_OUT);
	return pb;
}

/* Table entries, src block b = 100 b + element, dst = -1 everywhere. */
static void fill(const int32_t *t, int n)
{
	memset(flatmem_ptr(&M, tbl), 0, 128);
	memcpy(flatmem_ptr(&M, tbl), t, (size_t)n * 4);
	for (int b = 0; b < 4; b++)
		for (int i = 0; i < 32; i++) {
			float *s = flatmem_ptr(&M, src + (uint64_t)b * 128 + (uint64_t)i * 4);
			float *d = flatmem_ptr(&M, dst + (uint64_t)b * 128 + (uint64_t)i * 4);

			*s = (float)(100 * b + i);
			*d = -1.0f;
		}
}

static float dst_at(int b, int i)
{
	float v;

	memcpy(&v, flatmem_ptr(&M, dst + (uint64_t)b * 128 + (uint64_t)i * 4), 4);
	return v;
}

static uint32_t run(struct spyre_pb *pb, uint32_t *vcause)
{
	void *img;
	size_t sz;
	uint64_t next = M.next;
	uint32_t vcore, vpc;

	memset(&r, 0, sizeof(r));
	if (spyre_pb_finish(pb, &img, &sz)) {
		spyre_pb_free(pb);
		return ~0u;
	}
	spyre_pb_free(pb);
	if (vcause)
		*vcause = spyre_prog_validate(img, sz, spyre_engine_get_config(E)->scratchpad_bytes, &vcore, &vpc);
	flatmem_run(&M, E, img, sz, (uint64_t[]){ tbl, src, dst }, 3, NULL, 0, 1, &r);
	M.next = next;
	free(img);
	return r.status;
}

/* The table into sp 0. */
static void load_table(struct spyre_pb *pb)
{
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .sp = 0, .mem = { .sym = 0 }, .row_bytes = 128 });
}

/* Block table: dst block i = src block tbl[i], unrolled. */
static void test_gather_unrolled(void)
{
	struct spyre_pb *pb = newpb();
	uint32_t vc = ~0u;

	fill((int32_t[]){ 3, 0, 2 }, 3);
	load_table(pb);
	for (uint32_t i = 0; i < 3; i++) {
		spyre_pb_ldx(pb, 0, 1, i * 4, 0, 4, 128, 0);
		spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = 0x1000 + i * 128, .mem = { .sym = 1, .reg = SPYRE_PB_REG(1) }, .row_bytes = 128 });
	}
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 0x1000, .mem = { .sym = 2 },
									  .row_bytes = 384 });
	TAP_CHECK(run(pb, &vc) == 0 && vc == 0, "launch ok (status %u, validator %u)", r.status, vc);
	TAP_CHECK(dst_at(0, 5) == 305.0f && dst_at(1, 0) == 0.0f && dst_at(2, 31) == 231.0f && dst_at(3, 0) == -1.0f,
		  "gathered blocks 3, 0, 2: got %g %g %g, block 3 untouched %g", dst_at(0, 5), dst_at(1, 0),
		  dst_at(2, 31), dst_at(3, 0));
}

/* The same as a loop: index register (RIDX), sp register, count down with BNZ GTZ. */
static void test_gather_loop(void)
{
	struct spyre_pb *pb = newpb();

	fill((int32_t[]){ 1, 1, 3, 2 }, 4);
	load_table(pb);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LI, 2, 0, 0);		/* r2: entry offset */
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LI, 3, 0x1000, 0);	/* r3: sp of block i */
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LI, 4, 4, 0);		/* r4: blocks left */
	/* pc 4: */
	spyre_pb_ldx(pb, 0, 1, 0, SPYRE_PB_REG(2), 4, 128, 0);
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
		.sp = 0, .sp_reg = SPYRE_PB_REG(3), .mem = { .sym = 1, .reg = SPYRE_PB_REG(1) }, .row_bytes = 128 });
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_ADDI, 2, 4, 2);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_ADDI, 3, 128, 3);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_ADDI, 4, (uint64_t)-1, 4);
	spyre_pb_bgtz(pb, 0, 4, 4);
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 0x1000, .mem = { .sym = 2 },
									  .row_bytes = 512 });
	TAP_CHECK(run(pb, NULL) == 0, "launch ok (status %u)", r.status);
	TAP_CHECK(dst_at(0, 1) == 101.0f && dst_at(1, 2) == 102.0f && dst_at(2, 3) == 303.0f && dst_at(3, 4) == 204.0f,
		  "looped gather 1, 1, 3, 2: got %g %g %g %g", dst_at(0, 1), dst_at(1, 2), dst_at(2, 3), dst_at(3, 4));
	TAP_CHECK(r.core_busy_cycles[0] > 0, "the loop took time (%llu cycles)",
		  (unsigned long long)r.core_busy_cycles[0]);
}

/* GTZ on a negative count does not branch; plain BNZ would. */
static void test_gtz_negative(void)
{
	struct spyre_pb *pb = newpb();

	fill((int32_t[]){ 0 }, 1);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LI, 4, (uint64_t)-5, 0);
	spyre_pb_bgtz(pb, 0, 4, 3);		/* not taken */
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 0x1000, .mem = { .sym = 2 },
									  .row_bytes = 128 });
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_NOP, 0, 0, 0);
	TAP_CHECK(run(pb, NULL) == 0 && dst_at(0, 0) == 0.0f, "r = -5: GTZ falls through (the store ran: %g)",
		  dst_at(0, 0));
}

/* Slot mapping: row i of sp to dst block map[i]; -1 rows skipped (SKIPNEG skips the store). */
static void test_scatter_skip(void)
{
	struct spyre_pb *pb = newpb();

	fill((int32_t[]){ 2, -1, 0 }, 3);
	load_table(pb);
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .sp = 0x1000, .mem = { .sym = 1 },
									 .row_bytes = 384 });
	for (uint32_t i = 0; i < 3; i++) {
		spyre_pb_ldx(pb, 0, 1, i * 4, 0, 4, 128, SPYRE_IF_SKIPNEG);
		spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
			.sp = 0x1000 + i * 128, .mem = { .sym = 2, .reg = SPYRE_PB_REG(1) }, .row_bytes = 128 });
	}
	TAP_CHECK(run(pb, NULL) == 0, "launch ok (status %u)", r.status);
	TAP_CHECK(dst_at(2, 7) == 7.0f && dst_at(0, 7) == 207.0f && dst_at(1, 7) == -1.0f && dst_at(3, 7) == -1.0f,
		  "rows to 2, skipped, 0: got %g %g, untouched %g %g", dst_at(2, 7), dst_at(0, 7), dst_at(1, 7),
		  dst_at(3, 7));
}

/* A last-instruction skip ends the stream cleanly. */
static void test_skip_at_end(void)
{
	struct spyre_pb *pb = newpb();

	fill((int32_t[]){ -1 }, 1);
	load_table(pb);
	spyre_pb_ldx(pb, 0, 1, 0, 0, 4, 128, SPYRE_IF_SKIPNEG);
	TAP_CHECK(run(pb, NULL) == 0, "skip past the last instruction: status %u", r.status);
}

/* Hostile entries: past the bound, negative without SKIPNEG; the access never happens. */
static void test_bad_index(void)
{
	static const struct {
		int32_t v;
		unsigned flags;
		const char *what;
	} c[] = {
		{ 4, 0, "entry = bound" },
		{ 0x7fffffff, 0, "entry INT32_MAX" },
		{ -3, 0, "negative entry" },
		{ 9, SPYRE_IF_SKIPNEG, "entry past the bound with SKIPNEG" },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct spyre_pb *pb = newpb();

		fill((int32_t[]){ 1, c[i].v }, 2);
		load_table(pb);
		spyre_pb_ldx(pb, 0, 1, 0, 0, 4, 128, 0);
		spyre_pb_ldx(pb, 0, 1, 4, 0, 4, 128, c[i].flags);
		spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
			.sp = 0x1000, .mem = { .sym = 2, .reg = SPYRE_PB_REG(1) }, .row_bytes = 128 });
		run(pb, NULL);
		TAP_CHECK(r.status == SPYRE_ENGINE_FAULT_INDEX && r.fault_core == 0 && r.fault_pc == 2 &&
			  r.fault_addr == (uint64_t)(int64_t)c[i].v && !strcmp(spyre_fault_name(r.status), "bad-index"),
			  "%s: %s core %u pc %u addr 0x%llx (want bad-index core 0 pc 2)", c[i].what,
			  spyre_fault_name(r.status), r.fault_core, r.fault_pc, (unsigned long long)r.fault_addr);
		TAP_CHECK(dst_at(1, 0) == -1.0f && dst_at(0, 0) == -1.0f, "%s: nothing stored", c[i].what);
	}
}

/* Bound 0 is unchecked: the slot's bounds still hold (mem-range, not a read past it). */
static void test_unchecked_still_slot_bounded(void)
{
	struct spyre_pb *pb = newpb();

	fill((int32_t[]){ 1000 }, 1);
	load_table(pb);
	spyre_pb_ldx(pb, 0, 1, 0, 0, 0, 128, 0);
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
		.sp = 0x1000, .mem = { .sym = 1, .reg = SPYRE_PB_REG(1) }, .row_bytes = 128 });
	run(pb, NULL);
	TAP_CHECK(r.status == SPYRE_ENGINE_FAULT_MEM_RANGE && r.fault_pc == 2 && r.fault_addr == src + 128000,
		  "unchecked entry 1000: %s pc %u addr 0x%llx (want mem-range pc 2 at src + 128000)",
		  spyre_fault_name(r.status), r.fault_pc, (unsigned long long)r.fault_addr);
}

/* Operand rules: engine and validator agree. */
static void test_operands(void)
{
	static const struct {
		union spyre_insn in;
		uint32_t cause;
		const char *what;
	} c[] = {
		{ { .ctl = { .opcode = SPYRE_ISA_OP_LDX, .reg = 1, .imm = 2 } }, SPYRE_ENGINE_FAULT_ALIGN,
		  "LDX offset not 4-byte aligned" },
		{ { .ctl = { .opcode = SPYRE_ISA_OP_LDX, .reg = 1, .imm = 2u << 20 } }, SPYRE_ENGINE_FAULT_SP_RANGE,
		  "LDX past the scratchpad" },
		{ { .ctl = { .opcode = SPYRE_ISA_OP_LDX, .reg = 16 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND,
		  "LDX register 16" },
		{ { .ctl = { .opcode = SPYRE_ISA_OP_LDX, .reg = 1, .reg2 = 3 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND,
		  "LDX index register without RIDX" },
		{ { .ctl = { .opcode = SPYRE_ISA_OP_LDX, .flags = 0x80, .reg = 1 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND,
		  "LDX unknown flag" },
		{ { .ctl = { .opcode = SPYRE_ISA_OP_LDX, .reg = 1, .reserved = 1 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND,
		  "LDX reserved field" },
		{ { .ctl = { .opcode = SPYRE_ISA_OP_LI, .reg = 1, .bound = 4 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND,
		  "LI with a bound" },
		{ { .ctl = { .opcode = SPYRE_ISA_OP_ADDI, .reg = 1, .scale = 4 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND,
		  "ADDI with a scale" },
		{ { .ctl = { .opcode = SPYRE_ISA_OP_BNZ, .flags = SPYRE_IF_SKIPNEG << 1, .reg = 1 } },
		  SPYRE_ENGINE_FAULT_BAD_OPERAND, "BNZ with a flag not GTZ" },
		{ { .ctl = { .opcode = SPYRE_ISA_OP_LI, .flags = SPYRE_IF_GTZ, .reg = 1 } },
		  SPYRE_ENGINE_FAULT_BAD_OPERAND, "LI with GTZ" },
		{ { .t = { .opcode = SPYRE_ISA_OP_TRIL, .flags = SPYRE_IF_RDIAG, .rows = 1, .cols = 1, .ldb = 16 } },
		  SPYRE_ENGINE_FAULT_BAD_OPERAND, "TRIL RDIAG register 16" },
		{ { .t = { .opcode = SPYRE_ISA_OP_TRIL, .rows = 1, .cols = 1, .ldb = 3 } },
		  SPYRE_ENGINE_FAULT_BAD_OPERAND, "TRIL ldb without RDIAG" },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct spyre_pb *pb = newpb();
		uint32_t vc = 0;

		spyre_pb_emit(pb, 0, &c[i].in);
		run(pb, &vc);
		TAP_CHECK(r.status == c[i].cause && r.fault_pc == 0 && vc == c[i].cause,
			  "%s: engine %s, validator %s (want %s)", c[i].what, spyre_fault_name(r.status),
			  spyre_fault_name(vc), spyre_fault_name(c[i].cause));
	}
	/* an LDX whose register-added offset runs past the scratchpad faults at run time */
	struct spyre_pb *pb = newpb();

	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LI, 2, (2u << 20) - 2, 0);
	spyre_pb_ldx(pb, 0, 1, 0, SPYRE_PB_REG(2), 0, 0, 0);
	run(pb, NULL);
	TAP_CHECK(r.status == SPYRE_ENGINE_FAULT_ALIGN && r.fault_pc == 1, "LDX r2 misaligned: %s pc %u",
		  spyre_fault_name(r.status), r.fault_pc);
	pb = newpb();
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LI, 2, 2u << 20, 0);
	spyre_pb_ldx(pb, 0, 1, 0, SPYRE_PB_REG(2), 0, 0, 0);
	run(pb, NULL);
	TAP_CHECK(r.status == SPYRE_ENGINE_FAULT_SP_RANGE && r.fault_pc == 1 && r.fault_addr == 2u << 20,
		  "LDX r2 past the scratchpad: %s pc %u", spyre_fault_name(r.status), r.fault_pc);
}

/* TRIL with a register diagonal: rows r, cols c kept where c - r <= -1 + r6 (= 2). */
static void test_tril_rdiag(void)
{
	struct spyre_pb *pb = newpb();
	int ok = 1;

	fill((int32_t[]){ 0 }, 1);
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .d = 0x1000, .rows = 4, .cols = 32, .imm = spyre_f32_bits(1.0f) });
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LI, 6, 3, 0);
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRIL, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .flags = SPYRE_IF_RDIAG, .d = 0x1000, .a = 0x1000, .rows = 4,
						 .cols = 32, .imm = (uint32_t)-1, .ldb = 6 });
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 0x1000, .mem = { .sym = 2 },
									  .row_bytes = 512 });
	TAP_CHECK(run(pb, NULL) == 0, "launch ok (status %u)", r.status);
	for (int row = 0; row < 4; row++)
		for (int col = 0; col < 32; col++)
			ok &= dst_at(row, col) == (col - row <= 2 ? 1.0f : 0.0f);
	TAP_CHECK(ok, "diagonal -1 + r6 (3) = 2: row 0 keeps 0..2 (%g %g %g), row 3 keeps 0..5 (%g %g)",
		  dst_at(0, 2), dst_at(0, 3), dst_at(0, 4), dst_at(3, 5), dst_at(3, 6));
}

/* The text form: ldx and bnz flags print and read back into the same bytes. */
static void test_asm_roundtrip(void)
{
	static const char text[] =
		".sym tbl int32 flags=0x1 size=128 shape=32\n"
		".core 0\n"
		"\tldx reg=1 imm=0x8 reg2=2 flags=0x42 bound=64 scale=4096\n"
		"\tbnz reg=1 imm=0x0 reg2=0 flags=0x2\n"
		"\ttril.fp32.fp32 d=0x0 a=0x0 b=0x5 rows=1 cols=1 k=0 ldd=1 lda=1 ldb=7 ext=0 flags=0x4\n";
	void *img = NULL;
	size_t sz = 0;
	char err[256] = "", buf[256] = "";
	union spyre_insn in;
	struct spyre_prog_view v;
	int rc = spyre_asm_text(text, &img, &sz, err, sizeof(err));

	TAP_CHECK(rc == 0, "assembled (%s)", err);
	if (rc)
		return;
	TAP_CHECK(spyre_prog_check_container(img, sz, &v) == SPYRE_ENGINE_FAULT_NONE, "container ok");
	spyre_insn_decode((const uint8_t *)img + spyre_prog_insn_off(&v, 0, 0), &in);
	TAP_CHECK(in.ctl.opcode == SPYRE_ISA_OP_LDX && in.ctl.reg == 1 && in.ctl.imm == 8 && in.ctl.reg2 == 2 &&
		  in.ctl.flags == (SPYRE_IF_SKIPNEG | SPYRE_IF_RIDX) && in.ctl.bound == 64 && in.ctl.scale == 4096,
		  "ldx fields decoded");
	spyre_disasm_insn(&in, (const uint8_t *)img + spyre_prog_insn_off(&v, 0, 0), buf, sizeof(buf));
	TAP_CHECK(!strcmp(buf, "ldx reg=1 imm=0x8 reg2=2 flags=0x42 bound=64 scale=4096"), "disassembly: %s", buf);
	uint32_t vcore, vpc;

	TAP_CHECK(spyre_prog_validate(img, sz, 2u << 20, &vcore, &vpc) == 0, "validator accepts the three");
	free(img);
}

static const struct tap_case cases[] = {
	{ "gather_unrolled", test_gather_unrolled },
	{ "gather_loop", test_gather_loop },
	{ "gtz_negative", test_gtz_negative },
	{ "scatter_skip", test_scatter_skip },
	{ "skip_at_end", test_skip_at_end },
	{ "bad_index", test_bad_index },
	{ "unchecked_still_slot_bounded", test_unchecked_still_slot_bounded },
	{ "operands", test_operands },
	{ "tril_rdiag", test_tril_rdiag },
	{ "asm_roundtrip", test_asm_roundtrip },
};

static void setup(void)
{
	tbl = flatmem_alloc(&M, 128);
	src = flatmem_alloc(&M, 512);
	dst = flatmem_alloc(&M, 512);
	M.next = 8192;
}

int main(int argc, char **argv)
{
	struct flatmem_test t = { .engine = &E, .mem = &M, .base = 0x200000000ull, .size = 8u << 20,
				  .setup = setup };

	return FLATMEM_TEST_MAIN(&t, cases, argc, argv);
}
