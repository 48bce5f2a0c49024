// SPDX-License-Identifier: MIT
/*
 * Description: every fault kind ends the launch with the precise (core, pc,
 * cause) and address: invalid opcode, reserved field, bad dtype, misaligned
 * stick (scratchpad and memory), scratchpad out of range, slot-relative
 * access beyond its slot, unknown slot, a memory fault reported by the
 * callback (exact faulting VA and code; earlier stores stay done), a
 * program or argument block that cannot be read, a malformed container, a
 * ring peer that is not launched, a RECV whose tag or size differs, a RECV
 * or BARRIER that can never be satisfied (deadlock), a runaway loop over the
 * instruction budget, an address register without its flag or numbered 16,
 * an ARGMAX to a non-int32 type or with its INDEX tile past the scratchpad.
 * The static validator agrees with the engine.
 */
#include <string.h>

#include "flatmem.h"
#include "spyre_progbuild.h"

static struct spyre_engine *E;
static struct flatmem M;
static uint64_t buf;	/* a 4 KiB buffer, slot 0 */
/* The last launch, and what the validator said of its program. */
static struct spyre_launch_result r;
static uint32_t vc, vcore, vpc;

static struct spyre_pb *newpb(void)
{
	struct spyre_pb *pb = spyre_pb_new();

	spyre_pb_sym(pb, "buf", SPYRE_DT_FP32, 1, (uint64_t[]){ 1024 }, 4096, SPYRE_SYM_IN | SPYRE_SYM_OUT);
	return pb;
}

static int run(struct spyre_pb *pb, uint32_t mask, struct spyre_launch_result *res, uint32_t *cause,
	       uint32_t *core, uint32_t *pc)
{
	void *img;
	size_t sz;
	int rc;

	if (spyre_pb_finish(pb, &img, &sz))
		return -1;
	spyre_pb_free(pb);
	if (cause)
		*cause = spyre_prog_validate(img, sz, spyre_engine_get_config(E)->scratchpad_bytes, core, pc);
	rc = flatmem_run(&M, E, img, sz, (uint64_t[]){ buf }, 1, NULL, 0, mask, res);
	free(img);
	return rc;
}

static void expect(const char *what, const struct spyre_launch_result *res, uint32_t cause, uint32_t core,
		   uint32_t pc, uint64_t addr, int check_addr)
{
	TAP_CHECK(res->status == cause && res->fault_core == core && res->fault_pc == pc &&
		  (!check_addr || res->fault_addr == addr),
		  "%s: %s core %d pc %d addr 0x%llx (want %s core %d pc %d)", what, spyre_fault_name(res->status),
		  (int)res->fault_core, (int)res->fault_pc, (unsigned long long)res->fault_addr, spyre_fault_name(cause),
		  (int)core, (int)pc);
}

static void test_decode(void)
{
	struct spyre_pb *pb;
	union spyre_insn in;

	/* invalid opcode on core 2 at pc 2; the validator finds the same place */
	pb = newpb();
	spyre_pb_ctl(pb, 2, SPYRE_ISA_OP_NOP, 0, 0, 0);
	spyre_pb_ctl(pb, 2, SPYRE_ISA_OP_NOP, 0, 0, 0);
	memset(&in, 0, sizeof(in));
	in.raw[0] = 0xee;
	spyre_pb_emit(pb, 2, &in);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_NOP, 0, 0, 0);
	run(pb, 0xffffffff, &r, &vc, &vcore, &vpc);
	expect("invalid opcode", &r, SPYRE_ENGINE_FAULT_BAD_OPCODE, 2, 2, 0, 0);
	TAP_CHECK(vc == SPYRE_ENGINE_FAULT_BAD_OPCODE && vcore == 2 && vpc == 2, "validator: bad-opcode at core 2 pc 2");

	/* reserved field non-zero */
	pb = newpb();
	in = (union spyre_insn){ .ring = { .opcode = SPYRE_ISA_OP_WAIT, .tag = 1, .bytes = 0, .reserved = { 0, 1, 0 } } };
	spyre_pb_emit(pb, 0, &in);
	run(pb, 1, &r, &vc, &vcore, &vpc);
	expect("reserved field", &r, SPYRE_ENGINE_FAULT_BAD_OPERAND, 0, 0, 0, 0);

	/* bad dtype: int8 matmul must produce int32 */
	pb = newpb();
	spyre_pb_ctl(pb, 1, SPYRE_ISA_OP_NOP, 0, 0, 0);
	spyre_pb_op(pb, 1, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = SPYRE_DT_INT8,
		.dt2 = SPYRE_DT_FP32, .rows = 1, .cols = 1, .k = 1 });
	run(pb, 2, &r, &vc, &vcore, &vpc);
	expect("bad dtype", &r, SPYRE_ENGINE_FAULT_BAD_DTYPE, 1, 1, 0, 0);
	TAP_CHECK(vc == SPYRE_ENGINE_FAULT_BAD_DTYPE && vcore == 1 && vpc == 1, "validator: bad-dtype at core 1 pc 1");
}

static void test_alignment(void)
{
	struct spyre_pb *pb;

	/* misaligned stick: scratchpad operand */
	pb = newpb();
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .sp = 64, .mem = { .sym = 0 }, .row_bytes = 128 });
	run(pb, 1, &r, NULL, NULL, NULL);
	expect("misaligned scratchpad", &r, SPYRE_ENGINE_FAULT_ALIGN, 0, 0, 64, 1);

	/* misaligned tensor operand */
	pb = newpb();
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_RELU, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_FP32, .a = 200, .rows = 1, .cols = 32 });
	run(pb, 1, &r, NULL, NULL, NULL);
	expect("misaligned tensor source", &r, SPYRE_ENGINE_FAULT_ALIGN, 0, 0, 200, 1);

	/* misaligned absolute memory operand (after relocation) */
	pb = newpb();
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_NOP, 0, 0, 0);
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
		.mem = { .sym = SPYRE_PB_RAW, .off = buf + 64 }, .row_bytes = 128 });
	run(pb, 1, &r, NULL, NULL, NULL);
	expect("misaligned memory VA", &r, SPYRE_ENGINE_FAULT_ALIGN, 0, 1, buf + 64, 1);
}

static void test_ranges(void)
{
	struct spyre_pb *pb;

	/* scratchpad out of range: a tile running past 2 MiB */
	pb = newpb();
	spyre_pb_op(pb, 3, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_FP32, .d = (2u << 20) - 256, .rows = 4, .cols = 32 });
	run(pb, 8, &r, &vc, &vcore, &vpc);
	expect("scratchpad out of range", &r, SPYRE_ENGINE_FAULT_SP_RANGE, 3, 0, (2u << 20) - 256, 1);
	TAP_CHECK(vc == SPYRE_ENGINE_FAULT_SP_RANGE && vcore == 3 && vpc == 0, "validator: sp-range at core 3 pc 0");

	/* DMA past the scratchpad */
	pb = newpb();
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .sp = (2u << 20) - 128,
		.mem = { .sym = 0 }, .row_bytes = 256 });
	run(pb, 1, &r, NULL, NULL, NULL);
	expect("DMA past the scratchpad", &r, SPYRE_ENGINE_FAULT_SP_RANGE, 0, 0, (2u << 20) - 128, 1);

	/* slot-relative access beyond the slot's 4 KiB */
	pb = newpb();
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0, .off = 3968 },
		.rows = 2, .row_bytes = 128 });
	run(pb, 1, &r, NULL, NULL, NULL);
	expect("beyond the slot", &r, SPYRE_ENGINE_FAULT_MEM_RANGE, 0, 0, buf + 3968, 1);

	/* unknown slot */
	pb = newpb();
	spyre_pb_emit(pb, 0, &(union spyre_insn){ .dma = { .opcode = SPYRE_ISA_OP_LOAD, .flags = SPYRE_IF_SLOT,
		.mem = SPYRE_SLOT_ADDR(7, 0), .rows = 1, .row_bytes = 128 } });	/* the builder refuses it */
	run(pb, 1, &r, &vc, &vcore, &vpc);
	expect("unknown slot", &r, SPYRE_ENGINE_FAULT_BAD_SLOT, 0, 0, 0, 0);
	TAP_CHECK(vc == SPYRE_ENGINE_FAULT_BAD_SLOT, "validator: bad-slot");
}

static void test_memory_fault_callback(void)
{
	struct spyre_pb *pb;
	float f0, f1, f2;

	/* memory fault from the callback: a hole in the middle of a strided store */
	pb = newpb();
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_FP32, .rows = 4, .cols = 32, .imm = 0x3f800000 });
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .rows = 4,
		.row_bytes = 128, .mem_stride = 1024 });
	M.hole_lo = buf + 2048;
	M.hole_hi = buf + 2048 + 4096;
	memset(flatmem_ptr(&M, buf), 0, 4096);
	run(pb, 1, &r, NULL, NULL, NULL);
	M.hole_lo = M.hole_hi = 0;
	expect("memory fault from the callback", &r, SPYRE_ENGINE_FAULT_MEM, 0, 1, buf + 2048, 1);
	memcpy(&f0, flatmem_ptr(&M, buf), 4);
	memcpy(&f1, flatmem_ptr(&M, buf + 1024), 4);
	memcpy(&f2, flatmem_ptr(&M, buf + 2048), 4);
	TAP_CHECK(r.fault_detail == FLATMEM_FAULT && f0 == 1.0f && f1 == 1.0f && f2 == 0.0f,
		  "memory fault: callback code passed through, rows before the fault written, none after");
}

static void test_unreadable_program_and_container(void)
{
	struct spyre_pb *pb;

	/* program not readable; argument block not readable */
	memset(&r, 0xff, sizeof(r));
	spyre_engine_launch(E, 0x10, 0, 1, &flatmem_ops, &M, &r);
	expect("program fetch fault", &r, SPYRE_ENGINE_FAULT_MEM, SPYRE_ENGINE_FAULT_CORE_NONE, SPYRE_ENGINE_FAULT_PC_NONE, 0x10, 1);
	{
		void *img;
		size_t sz;

		pb = newpb();
		spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_NOP, 0, 0, 0);
		spyre_pb_finish(pb, &img, &sz);
		spyre_pb_free(pb);
		uint64_t p = flatmem_alloc(&M, sz);

		memcpy(flatmem_ptr(&M, p), img, sz);
		spyre_engine_launch(E, p, 0x40, 1, &flatmem_ops, &M, &r);
		expect("argument block fault", &r, SPYRE_ENGINE_FAULT_MEM, SPYRE_ENGINE_FAULT_CORE_NONE, SPYRE_ENGINE_FAULT_PC_NONE, 0x40, 1);
		/* malformed container: a bad magic, then a core table pointing outside the image */
		((uint8_t *)flatmem_ptr(&M, p))[0] ^= 1;
		spyre_engine_launch(E, p, buf, 1, &flatmem_ops, &M, &r);
		expect("bad magic", &r, SPYRE_ENGINE_FAULT_BAD_PROGRAM, SPYRE_ENGINE_FAULT_CORE_NONE, SPYRE_ENGINE_FAULT_PC_NONE, 0, 0);
		((uint8_t *)flatmem_ptr(&M, p))[0] ^= 1;
		((uint8_t *)flatmem_ptr(&M, p))[19] = 0x7f;
		spyre_engine_launch(E, p, buf, 1, &flatmem_ops, &M, &r);
		expect("core table outside the image", &r, SPYRE_ENGINE_FAULT_BAD_PROGRAM, SPYRE_ENGINE_FAULT_CORE_NONE,
		       SPYRE_ENGINE_FAULT_PC_NONE, 0, 0);
		free(img);
		M.next = 8192;
	}
}

static void test_ring_peer_and_mismatch(void)
{
	struct spyre_pb *pb;

	/* ring peer not launched */
	pb = newpb();
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_SEND, 0, 5, 0, 128);
	run(pb, 1 | 2, &r, NULL, NULL, NULL);
	expect("send to a core not launched", &r, SPYRE_ENGINE_FAULT_BAD_PEER, 0, 0, 5, 1);

	/* RECV with a different tag */
	pb = newpb();
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_SEND, 0, 1, 7, 128);
	spyre_pb_ring(pb, 1, SPYRE_ISA_OP_RECV, 0, 0, 8, 128);
	run(pb, 3, &r, NULL, NULL, NULL);
	expect("recv tag mismatch", &r, SPYRE_ENGINE_FAULT_RING_MISMATCH, 1, 0, 0, 0);
}

static void test_deadlock(void)
{
	struct spyre_pb *pb;

	/* deadlock: core 1 waits for core 0, which halted without sending */
	pb = newpb();
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_NOP, 0, 0, 0);
	spyre_pb_ctl(pb, 1, SPYRE_ISA_OP_NOP, 0, 0, 0);
	spyre_pb_ring(pb, 1, SPYRE_ISA_OP_RECV, 0, 0, 0, 128);
	run(pb, 3, &r, NULL, NULL, NULL);
	expect("recv that can never be satisfied", &r, SPYRE_ENGINE_FAULT_DEADLOCK, 1, 1, 0, 0);

	/* deadlock: a cycle of receives */
	pb = newpb();
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_RECV, 0, 1, 0, 128);
	spyre_pb_ring(pb, 1, SPYRE_ISA_OP_RECV, 0, 0, 0, 128);
	run(pb, 3, &r, NULL, NULL, NULL);
	expect("receive cycle", &r, SPYRE_ENGINE_FAULT_DEADLOCK, 0, 0, 0, 0);

	/* deadlock: a barrier that a halted core never reaches; a token never signalled */
	pb = newpb();
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_BARRIER, 0, 0, 0, 0x3);
	spyre_pb_ctl(pb, 1, SPYRE_ISA_OP_HALT, 0, 0, 0);
	run(pb, 3, &r, NULL, NULL, NULL);
	expect("barrier never complete", &r, SPYRE_ENGINE_FAULT_DEADLOCK, 0, 0, 0, 0);
	pb = newpb();
	spyre_pb_ctl(pb, 4, SPYRE_ISA_OP_NOP, 0, 0, 0);
	spyre_pb_ring(pb, 4, SPYRE_ISA_OP_WAIT, 0, 0, 3, 1);
	run(pb, 1u << 4, &r, NULL, NULL, NULL);
	expect("token never signalled", &r, SPYRE_ENGINE_FAULT_DEADLOCK, 4, 1, 0, 0);
}

static void test_barrier_mask(void)
{
	struct spyre_pb *pb;

	/* barrier naming a core outside the launch */
	pb = newpb();
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_BARRIER, 0, 0, 0, 0x5);
	run(pb, 3, &r, NULL, NULL, NULL);
	expect("barrier mask outside the launch", &r, SPYRE_ENGINE_FAULT_BAD_PEER, 0, 0, 0x5, 1);
}

static void test_budget(void)
{
	struct spyre_pb *pb;

	/* runaway: an endless loop stops at the budget (10000 instructions) */
	pb = newpb();
	spyre_pb_ctl(pb, 6, SPYRE_ISA_OP_LI, 1, 1, 0);
	spyre_pb_ctl(pb, 6, SPYRE_ISA_OP_NOP, 0, 0, 0);
	spyre_pb_ctl(pb, 6, SPYRE_ISA_OP_BNZ, 1, 1, 0);
	run(pb, 1u << 6, &r, NULL, NULL, NULL);
	/* li + 4999 x (nop, bnz) + one nop = 10000 executed: the next one (a bnz at pc 2) faults */
	expect("runaway loop", &r, SPYRE_ENGINE_FAULT_BUDGET, 6, 2, 0, 0);
	TAP_CHECK(r.insns == 10000, "budget: exactly 10000 instructions ran (%llu)", (unsigned long long)r.insns);
}

/*
 * The address-register fields and ARGMAX (docs/spyre-isa.md §4): a register
 * number without its flag, register 16, an ARGMAX whose output is not int32,
 * an INDEX tile past the scratchpad. The validator agrees with the engine.
 */
static void test_registers_and_argmax(void)
{
	const uint32_t sp_end = 2u << 20;
	struct spyre_pb *pb;

	/* rmem set, SPYRE_IF_RMEM clear (the builder never writes that: spyre_pb_emit) */
	pb = newpb();
	spyre_pb_emit(pb, 0, &(union spyre_insn){ .dma = { .opcode = SPYRE_ISA_OP_LOAD, .rmem = 3,
		.flags = SPYRE_IF_SLOT, .rows = 1, .row_bytes = 128 } });
	run(pb, 1, &r, &vc, &vcore, &vpc);
	expect("rmem without RMEM", &r, SPYRE_ENGINE_FAULT_BAD_OPERAND, 0, 0, 0, 0);
	TAP_CHECK(vc == SPYRE_ENGINE_FAULT_BAD_OPERAND && vcore == 0 && vpc == 0, "validator: bad-operand (rmem)");

	/* register 16 with the flag, as rmem and as rsp */
	for (int field = 0; field < 2; field++) {
		pb = newpb();
		spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_NOP, 0, 0, 0);
		spyre_pb_emit(pb, 0, &(union spyre_insn){ .dma = { .opcode = SPYRE_ISA_OP_STORE,
			.rmem = field ? 0 : SPYRE_NUM_REGS, .rsp = field ? SPYRE_NUM_REGS : 0,
			.flags = SPYRE_IF_SLOT | (field ? SPYRE_IF_RSP : SPYRE_IF_RMEM), .rows = 1, .row_bytes = 128 } });
		run(pb, 1, &r, &vc, &vcore, &vpc);
		expect(field ? "rsp = 16" : "rmem = 16", &r, SPYRE_ENGINE_FAULT_BAD_OPERAND, 0, 1, 0, 0);
		TAP_CHECK(vc == SPYRE_ENGINE_FAULT_BAD_OPERAND && vpc == 1, "validator: bad-operand (register 16 in %s)",
			  field ? "rsp" : "rmem");
	}

	/* ARGMAX writes int32 indices: dtype2 fp32 is a bad dtype */
	pb = newpb();
	spyre_pb_op(pb, 2, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ARGMAX, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_FP32, .d = 4096, .rows = 4, .cols = 32 });
	run(pb, 4, &r, &vc, &vcore, &vpc);
	expect("argmax to fp32", &r, SPYRE_ENGINE_FAULT_BAD_DTYPE, 2, 0, 0, 0);
	TAP_CHECK(vc == SPYRE_ENGINE_FAULT_BAD_DTYPE && vcore == 2 && vpc == 0, "validator: bad-dtype (argmax)");

	/* INDEX: the int32 tile b (4 rows of 2 sticks) runs past the scratchpad */
	pb = newpb();
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ARGMAX, .dt = SPYRE_DT_FP16,
		.dt2 = SPYRE_DT_INT32, .flags = SPYRE_IF_INDEX, .d = 4096, .a = 0, .b = sp_end - 512,
		.rows = 4, .cols = 64 });
	run(pb, 1, &r, &vc, &vcore, &vpc);
	expect("argmax index tile past the scratchpad", &r, SPYRE_ENGINE_FAULT_SP_RANGE, 0, 0, sp_end - 512, 1);
	TAP_CHECK(vc == SPYRE_ENGINE_FAULT_SP_RANGE && vpc == 0, "validator: sp-range (argmax index tile)");
}

/*
 * The operand rules of the instructions of libspyre 0.5, each broken once:
 * engine and validator both fault, with the cause the ISA gives it.
 */
static void test_operand_rules_0_5(void)
{
	const uint32_t sp_end = 2u << 20;
	static const struct {
		const char *what;
		union spyre_insn in;
		uint32_t cause;
	} c[] = {
		{ "div of int32", { .t = { .opcode = SPYRE_ISA_OP_DIV, .dtype = SPYRE_DT_INT32,
			.dtype2 = SPYRE_DT_INT32, .b = 4096, .d = 8192, .rows = 1, .cols = 32 } },
		  SPYRE_ENGINE_FAULT_BAD_DTYPE },
		{ "min with an unknown flag", { .t = { .opcode = SPYRE_ISA_OP_MIN, .flags = SPYRE_IF_AXIS0,
			.b = 4096, .d = 8192, .rows = 1, .cols = 32 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND },
		{ "log of int8", { .t = { .opcode = SPYRE_ISA_OP_LOG, .dtype = SPYRE_DT_INT8, .dtype2 = SPYRE_DT_INT8,
			.d = 8192, .rows = 1, .cols = 32 } }, SPYRE_ENGINE_FAULT_BAD_DTYPE },
		{ "tanh with b", { .t = { .opcode = SPYRE_ISA_OP_TANH, .b = 128, .d = 8192, .rows = 1, .cols = 32 } },
		  SPYRE_ENGINE_FAULT_BAD_OPERAND },
		{ "pow with ldb", { .t = { .opcode = SPYRE_ISA_OP_POW, .b = 0x40000000, .ldb = 1, .d = 8192,
			.rows = 1, .cols = 32 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND },
		{ "movm fp32 into int32", { .t = { .opcode = SPYRE_ISA_OP_MOVM, .dtype2 = SPYRE_DT_INT32, .b = 4096,
			.d = 8192, .rows = 1, .cols = 32 } }, SPYRE_ENGINE_FAULT_BAD_DTYPE },
		{ "movm with k", { .t = { .opcode = SPYRE_ISA_OP_MOVM, .b = 4096, .k = 1, .d = 8192, .rows = 1,
			.cols = 32 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND },
		{ "movm mask past the scratchpad", { .t = { .opcode = SPYRE_ISA_OP_MOVM, .b = sp_end - 128, .ldb = 1,
			.d = 8192, .rows = 2, .cols = 32 } }, SPYRE_ENGINE_FAULT_SP_RANGE },
		{ "tril first row past k", { .t = { .opcode = SPYRE_ISA_OP_TRIL, .k = 4, .ext = 4, .d = 8192,
			.rows = 1, .cols = 32 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND },
		{ "tril first row without k", { .t = { .opcode = SPYRE_ISA_OP_TRIL, .ext = 1, .d = 8192, .rows = 1,
			.cols = 32 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND },
		{ "tril fp32 to fp16", { .t = { .opcode = SPYRE_ISA_OP_TRIL, .dtype2 = SPYRE_DT_FP16, .d = 8192,
			.rows = 1, .cols = 32 } }, SPYRE_ENGINE_FAULT_BAD_DTYPE },
		{ "softmax with a flag other than LOG", { .t = { .opcode = SPYRE_ISA_OP_SOFTMAX,
			.flags = SPYRE_IF_BCAST_ROW, .d = 8192, .rows = 1, .cols = 32 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND },
		{ "dense transpose with lda", { .t = { .opcode = SPYRE_ISA_OP_TRANSPOSE, .flags = SPYRE_IF_DENSE,
			.lda = 1, .d = 8192, .rows = 2, .cols = 3 } }, SPYRE_ENGINE_FAULT_BAD_OPERAND },
		{ "dense transpose past the scratchpad", { .t = { .opcode = SPYRE_ISA_OP_TRANSPOSE,
			.flags = SPYRE_IF_DENSE, .a = sp_end - 128, .k = 30, .d = 8192, .rows = 1, .cols = 3 } },
		  SPYRE_ENGINE_FAULT_SP_RANGE },
		{ "dense transpose d misaligned", { .t = { .opcode = SPYRE_ISA_OP_TRANSPOSE,
			.flags = SPYRE_IF_DENSE, .d = 8196, .rows = 2, .cols = 3 } }, SPYRE_ENGINE_FAULT_ALIGN },
	};

	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct spyre_pb *pb = newpb();

		spyre_pb_emit(pb, 0, &c[i].in);
		run(pb, 1, &r, &vc, &vcore, &vpc);
		TAP_CHECK(r.status == c[i].cause && r.fault_pc == 0 && vc == c[i].cause && vpc == 0,
			  "%s: engine %s, validator %s, want %s", c[i].what, spyre_fault_name(r.status),
			  spyre_fault_name(vc), spyre_fault_name(c[i].cause));
	}
}

static void test_branch_outside_the_stream(void)
{
	struct spyre_pb *pb;

	/* branch target outside the stream */
	pb = newpb();
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_BNZ, 0, 5, 0);
	run(pb, 1, &r, &vc, &vcore, &vpc);
	expect("branch outside the stream", &r, SPYRE_ENGINE_FAULT_BAD_OPERAND, 0, 0, 0, 0);
}

static void test_usable_after_faults(void)
{
	struct spyre_pb *pb;
	float f0;

	/* the engine is usable after all that */
	pb = newpb();
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_FP32, .rows = 1, .cols = 32, .imm = 0x40000000 });
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .row_bytes = 128 });
	run(pb, 1, &r, NULL, NULL, NULL);
	memcpy(&f0, flatmem_ptr(&M, buf + 124), 4);
	TAP_CHECK(r.status == 0 && f0 == 2.0f, "a good launch after faults succeeds");
}

static const struct tap_case cases[] = {
	{ "operand_rules_0_5", test_operand_rules_0_5 },
	{ "decode", test_decode },
	{ "alignment", test_alignment },
	{ "ranges", test_ranges },
	{ "memory_fault_callback", test_memory_fault_callback },
	{ "unreadable_program_and_container", test_unreadable_program_and_container },
	{ "ring_peer_and_mismatch", test_ring_peer_and_mismatch },
	{ "deadlock", test_deadlock },
	{ "barrier_mask", test_barrier_mask },
	{ "budget", test_budget },
	{ "registers_and_argmax", test_registers_and_argmax },
	{ "branch_outside_the_stream", test_branch_outside_the_stream },
	{ "usable_after_faults", test_usable_after_faults },
};

static void setup(void)
{
	buf = flatmem_alloc(&M, 4096);
	M.next = 8192;	/* programs go after buf */
}

int main(int argc, char **argv)
{
	struct spyre_engine_config cfg;
	struct flatmem_test t = {
		.engine = &E, .config = &cfg, .mem = &M, .base = 0x200000000ull, .size = 8u << 20,
		.setup = setup,
	};

	spyre_engine_config_default(&cfg);
	cfg.insn_budget = 10000;
	return FLATMEM_TEST_MAIN(&t, cases, argc, argv);
}
