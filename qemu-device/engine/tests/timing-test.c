// SPDX-License-Identifier: MIT
/*
 * Description: properties of the engine's timing model (no wall-clock
 * timing): a ring transfer over more hops is never cheaper and the ring
 * takes the shorter direction; doubling the data of a LOAD, a SEND, a
 * MATMUL or an elementwise op never halves the time and never more than
 * doubles it past fixed costs; 16-bit matmul is faster than fp32 and int8
 * faster than 16-bit (peak rates); LPDDR bandwidth is shared, so the same
 * LOAD takes longer when all 32 cores load at once; busy <= end clock for
 * every core and a waiting core is not busy; device_ns follows clock_mhz;
 * identical launches give identical results (determinism).
 */
#include <string.h>

#include "flatmem.h"
#include "spyre_progbuild.h"

static struct spyre_engine_config cfg;
static struct spyre_engine *E;
static struct flatmem M;
static uint64_t buf;

static uint64_t cycles(struct spyre_pb *pb, uint32_t mask, struct spyre_launch_result *out)
{
	struct spyre_launch_result r;
	void *img;
	size_t sz;

	if (spyre_pb_finish(pb, &img, &sz))
		return 0;
	spyre_pb_free(pb);
	if (flatmem_run(&M, E, img, sz, (uint64_t[]){ buf }, 1, NULL, 0, mask, &r))
		r.device_cycles = 0;
	free(img);
	if (out)
		*out = r;
	return r.device_cycles;
}

static struct spyre_pb *newpb(void)
{
	struct spyre_pb *pb = spyre_pb_new();

	spyre_pb_sym(pb, "buf", SPYRE_DT_INT8, 1, (uint64_t[]){ 4u << 20 }, 4u << 20, SPYRE_SYM_IN);
	return pb;
}

static uint64_t send_cost(uint32_t to, uint32_t bytes)
{
	struct spyre_pb *pb = newpb();

	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_SEND, 0, to, 0, bytes);
	spyre_pb_ring(pb, to, SPYRE_ISA_OP_RECV, 0, 0, 0, bytes);
	return cycles(pb, 1u | (1u << to), NULL);
}

static uint64_t load_cost(uint32_t bytes, uint32_t mask)
{
	struct spyre_pb *pb = newpb();

	for (uint32_t c = 0; c < 32; c++)
		if (mask >> c & 1)
			spyre_pb_dma(pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0 },
				.row_bytes = bytes });
	return cycles(pb, mask, NULL);
}

static uint64_t mm_cost(unsigned dt, uint32_t m, uint32_t n, uint32_t k)
{
	struct spyre_pb *pb = newpb();
	unsigned dt2 = dt == SPYRE_DT_INT8 ? SPYRE_DT_INT32 : SPYRE_DT_FP32;
	uint32_t lda = spyre_sticks(k, dt), ldb = spyre_sticks(n, dt), ldc = spyre_sticks(n, dt2);

	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = dt, .dt2 = dt2, .d = 0,
		.a = m * lda * 128, .b = m * lda * 128 + k * ldb * 128, .rows = m, .cols = n, .k = k,
		.ldd = ldc, .lda = lda, .ldb = ldb });
	return cycles(pb, 1, NULL);
}

static uint64_t ew_cost(unsigned op, uint32_t rows)
{
	struct spyre_pb *pb = newpb();

	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = op, .dt = SPYRE_DT_FP16, .dt2 = SPYRE_DT_FP16,
		.rows = rows, .cols = 64 });
	return cycles(pb, 1, NULL);
}

static void test_hops(void)
{
	uint64_t prev = 0;
	int good = 1;

	for (uint32_t d = 1; d <= 16; d++) {
		uint64_t c = send_cost(d, 4096);

		if (c < prev || !c)
			good = 0;
		prev = c;
	}
	TAP_CHECK(good && send_cost(16, 4096) > send_cost(1, 4096), "more ring hops are never cheaper (1..16 hops)");
}

static void test_shorter_direction(void)
{
	int good = 1;

	for (uint32_t d = 1; d < 16; d++)
		if (send_cost(d, 4096) != send_cost(32 - d, 4096))
			good = 0;
	TAP_CHECK(good && send_cost(31, 4096) == send_cost(1, 4096), "the ring takes the shorter direction (d and 32-d cost the same)");
}

static void test_doubling_load(void)
{
	int good = 1;

	/* doubling */
	for (uint32_t b = 128; b < (1u << 20); b *= 2) {
		uint64_t t1 = load_cost(b, 1), t2 = load_cost(2 * b, 1);

		if (!(t2 >= t1 && 2 * t1 >= t2 / 2 && t2 <= 2 * t1))
			good = 0;
	}
	TAP_CHECK(good, "LOAD: doubling the bytes never halves the time, at most doubles it");
}

static void test_doubling_send(void)
{
	int good = 1;

	for (uint32_t b = 128; b < (1u << 20); b *= 2) {
		uint64_t t1 = send_cost(5, b), t2 = send_cost(5, 2 * b);

		if (!(t2 >= t1 && t2 <= 2 * t1))
			good = 0;
	}
	TAP_CHECK(good, "SEND: doubling the bytes never halves the time, at most doubles it");
}

static void test_doubling_matmul(void)
{
	int good = 1;

	for (uint32_t s = 8; s <= 128; s *= 2) {
		uint64_t t1 = mm_cost(SPYRE_DT_FP16, s, s, s), t2 = mm_cost(SPYRE_DT_FP16, 2 * s, s, s);
		uint64_t t3 = mm_cost(SPYRE_DT_FP16, s, s, 2 * s);

		if (!(t2 >= t1 && t3 >= t1 && t2 <= 2 * t1 && t3 <= 2 * t1))
			good = 0;
	}
	TAP_CHECK(good, "MATMUL: doubling m or k never halves the time, at most doubles it");
}

static void test_matmul_row_passes(void)
{
	TAP_CHECK(mm_cost(SPYRE_DT_FP16, 9, 256, 256) == mm_cost(SPYRE_DT_FP16, 16, 256, 256),
		  "MATMUL: rows are padded to the PE array's 8-row passes");
}

static void test_doubling_elementwise(void)
{
	int good = 1;

	for (uint32_t rows = 1; rows < 4096; rows *= 2)
		if (!(ew_cost(SPYRE_ISA_OP_EXP, 2 * rows) >= ew_cost(SPYRE_ISA_OP_EXP, rows)))
			good = 0;
	TAP_CHECK(good, "elementwise: doubling rows never halves the time");
}

static void test_transcendental_cost(void)
{
	static const unsigned tr[] = { SPYRE_ISA_OP_LOG, SPYRE_ISA_OP_TANH, SPYRE_ISA_OP_SIGMOID, SPYRE_ISA_OP_SQRT,
				       SPYRE_ISA_OP_RECIP, SPYRE_ISA_OP_GELU_TANH, SPYRE_ISA_OP_POW, SPYRE_ISA_OP_DIV };
	uint64_t relu = ew_cost(SPYRE_ISA_OP_RELU, 1024), exp_ = ew_cost(SPYRE_ISA_OP_EXP, 1024);

	TAP_CHECK(exp_ > relu, "exp (transcendental) costs more than relu");
	/* the functions of 0.5 through the same SFU path; abs, min, the masked move and tril do not */
	for (unsigned i = 0; i < sizeof(tr) / sizeof(tr[0]); i++)
		TAP_CHECK(ew_cost(tr[i], 1024) == exp_, "%s costs what exp does", spyre_opcode_name(tr[i]));
	TAP_CHECK(ew_cost(SPYRE_ISA_OP_ABS, 1024) == relu, "abs costs what relu does");
	TAP_CHECK(ew_cost(SPYRE_ISA_OP_MIN, 1024) == ew_cost(SPYRE_ISA_OP_MAX, 1024), "min costs what max does");
	TAP_CHECK(ew_cost(SPYRE_ISA_OP_TRIL, 1024) == relu, "tril costs what relu does");
	TAP_CHECK(ew_cost(SPYRE_ISA_OP_MOVM, 1024) >= ew_cost(SPYRE_ISA_OP_ADD, 1024) &&
		  ew_cost(SPYRE_ISA_OP_MOVM, 1024) < exp_, "movm: a binary op's cost, reading d too");
}

static void test_peak_rates(void)
{
	/* peak rates by type */
	uint64_t f32 = mm_cost(SPYRE_DT_FP32, 256, 256, 256), f16 = mm_cost(SPYRE_DT_FP16, 256, 256, 256);
	uint64_t i8 = mm_cost(SPYRE_DT_INT8, 256, 256, 256);

	TAP_CHECK(f32 > f16 && f16 > i8, "matmul 256^3: fp32 %llu > fp16 %llu > int8 %llu cycles", (unsigned long long)f32,
		  (unsigned long long)f16, (unsigned long long)i8);
	/* 16-bit: 256^3 MACs at 1536 MAC/ns and 1500 MHz = 1024 MAC/cycle -> 16384 cycles + issue */
	TAP_CHECK(f16 == 16384 + cfg.issue_cycles, "fp16 256^3 matmul at the published peak: %llu cycles", (unsigned long long)f16);
}

static void test_shared_lpddr(void)
{
	/* shared LPDDR */
	uint64_t one = load_cost(1u << 20, 1), all = load_cost(1u << 20, 0xffffffff);

	TAP_CHECK(all > 16 * one / 2 && all > one, "LPDDR shared: 1 MiB LOAD on 1 core %llu cycles, on each of 32 cores %llu",
		  (unsigned long long)one, (unsigned long long)all);
	/* 1 MiB in 256 bursts of 4 KiB + 64 bytes at 204.8 GB/s = 5200 ns = 7800 cycles at 1.5 GHz (+ latency + issue) */
	TAP_CHECK(one == 7800 + cfg.dma_latency_cycles + cfg.issue_cycles, "1 MiB LOAD on one core at 204.8 GB/s: %llu cycles",
		  (unsigned long long)one);
}

static void test_busy_and_device_time(void)
{
	struct spyre_pb *pb = newpb();
	struct spyre_launch_result r1;
	int good;

	/* utilization: the receiver waits, it is not busy */
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .row_bytes = 1u << 20 });
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_SEND, 0, 1, 0, 128);
	spyre_pb_ring(pb, 1, SPYRE_ISA_OP_RECV, 0, 0, 0, 128);
	cycles(pb, 3, &r1);
	good = r1.core_busy_cycles[0] <= r1.core_end_cycles[0] && r1.core_busy_cycles[1] <= r1.core_end_cycles[1];
	TAP_CHECK(good && r1.core_busy_cycles[1] < r1.core_end_cycles[1] / 10 && r1.core_end_cycles[1] > r1.core_end_cycles[0],
		  "busy <= end clock; a waiting receiver is idle (busy %llu of %llu)",
		  (unsigned long long)r1.core_busy_cycles[1], (unsigned long long)r1.core_end_cycles[1]);
	TAP_CHECK(r1.device_cycles == r1.core_end_cycles[1] && r1.device_ns == (r1.device_cycles * 1000 + 1499) / 1500,
		  "device time = last core's end; ns from clock_mhz (%llu ns)", (unsigned long long)r1.device_ns);
}

static void test_determinism(void)
{
	struct spyre_launch_result r1, r2;
	struct spyre_pb *pb = newpb();
	void *img;
	size_t sz;

	/* 32 cores load, send, receive and meet at a barrier, twice */
	for (int c = 0; c < 32; c++) {
		spyre_pb_dma(pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .row_bytes = 4096 });
		spyre_pb_ring(pb, c, SPYRE_ISA_OP_SEND, 0, (c + 7) % 32, 0, 4096);
		spyre_pb_ring(pb, c, SPYRE_ISA_OP_RECV, 8192, (c + 25) % 32, 0, 4096);
		spyre_pb_ring(pb, c, SPYRE_ISA_OP_BARRIER, 0, 0, 0, 0);
	}
	spyre_pb_finish(pb, &img, &sz);
	spyre_pb_free(pb);
	flatmem_run(&M, E, img, sz, (uint64_t[]){ buf }, 1, NULL, 0, 0xffffffff, &r1);
	flatmem_run(&M, E, img, sz, (uint64_t[]){ buf }, 1, NULL, 0, 0xffffffff, &r2);
	free(img);
	TAP_CHECK(r1.status == 0 && !memcmp(&r1, &r2, sizeof(r1)), "identical launches give identical results (%llu cycles)",
		  (unsigned long long)r1.device_cycles);
}

static const struct tap_case cases[] = {
	{ "hops", test_hops },
	{ "shorter_direction", test_shorter_direction },
	{ "doubling_load", test_doubling_load },
	{ "doubling_send", test_doubling_send },
	{ "doubling_matmul", test_doubling_matmul },
	{ "matmul_row_passes", test_matmul_row_passes },
	{ "doubling_elementwise", test_doubling_elementwise },
	{ "transcendental_cost", test_transcendental_cost },
	{ "peak_rates", test_peak_rates },
	{ "shared_lpddr", test_shared_lpddr },
	{ "busy_and_device_time", test_busy_and_device_time },
	{ "determinism", test_determinism },
};

static void setup(void)
{
	buf = flatmem_alloc(&M, 4u << 20);
}

int main(int argc, char **argv)
{
	static const struct flatmem_test t = {
		.engine = &E, .config = &cfg, .mem = &M, .base = 0x400000000ull, .size = 16u << 20,
		.setup = setup,
	};

	spyre_engine_config_default(&cfg);
	return FLATMEM_TEST_MAIN(&t, cases, argc, argv);
}
