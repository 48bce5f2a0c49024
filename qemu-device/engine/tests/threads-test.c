// SPDX-License-Identifier: MIT
/*
 * Description: the engine's host threads (cfg.threads) change nothing but
 * the wall time. The same launches run on engines with 1, 2 and 4 threads,
 * each with its own copy of device memory, and must give byte-identical
 * launch results (status, fault fields, every core's modeled end and busy
 * cycles: the timeline), device memory and scratchpads: a 32-core blocked
 * matmul (matmul-bench's launch, smaller), 40 random 32-core programs
 * (LOAD/STORE sync and async, fp32 and fp16 MATMUL with and without ACC,
 * binary, unary, SCALE, SOFTMAX, REDSUM, TRANSPOSE, FILL, TRIL with a
 * run-time diagonal, LDX, ring exchanges between neighbours, barriers; some
 * fault), a core with more queued tensor ops than its queue holds, and a
 * fault in a LOAD after queued ops. An engine made anew for every launch
 * checks that what a launch leaves in the scratchpads never shows in the
 * next (their zeroing waits for a stick's first touch); two whose memory has
 * no probe, that reading a LOAD's bytes at its core's next touch rather
 * than at its completion changes nothing either. Also built with
 * ThreadSanitizer and AddressSanitizer (engine-threads-{t,a}san-test).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flatmem.h"
#include "spyre_progbuild.h"

#define NCORES 32
/*
 * FRESH is made anew for every launch: its scratchpads start as zeroes, never
 * as a previous launch's. The last two move a LOAD's bytes when it completes
 * (memory without probe), the others when its core next touches them.
 */
#define NENG 6
#define FRESH 3
static const uint32_t threads[NENG] = { 1, 2, 4, 1, 1, 2 };
static const char *const kind[NENG] = { "", "", "", " (new engine)", " (LOADs eager)", " (LOADs eager)" };
static struct spyre_engine *E[NENG];
static struct flatmem M[NENG];
static uint64_t IN, OUT;		/* the same VAs in every memory */
#define IN_BYTES (256u << 10)
#define OUT_BYTES (NCORES * 128u << 10)	/* 128 KiB a core */
#define TILE 2048u			/* 16 rows of 32 fp32 */
#define NTILES 16

static unsigned rnd(unsigned *s, unsigned n)
{
	*s = *s * 1103515245u + 12345u;
	return (*s >> 8) % n;
}

/*
 * Run image on every engine and compare with the first: launch result,
 * output memory and scratchpads. Returns the first engine's status.
 */
static uint32_t run_all(const char *what, void *img, size_t sz, int *diffs)
{
	struct spyre_launch_result r[NENG];
	const struct spyre_engine_config *cfg = spyre_engine_get_config(E[0]);

	for (int i = 0; i < NENG; i++) {
		if (i == FRESH) {
			struct spyre_engine_config c = *cfg;

			c.threads = threads[i];
			spyre_engine_free(E[i]);
			E[i] = spyre_engine_new(&c);
			if (!E[i])
				tap_bail("cannot create an engine");
		}
		memset(&r[i], 0, sizeof(r[i]));
		flatmem_run(&M[i], E[i], img, sz, (uint64_t[]){ IN, OUT }, 2, NULL, 0, 0xffffffff, &r[i]);
	}
	for (int i = 1; i < NENG; i++) {
		if (memcmp(&r[0], &r[i], sizeof(r[0]))) {
			tap_diag("%s: launch result differs at %u threads%s (status %s vs %s, %llu vs %llu cycles)", what,
				 threads[i], kind[i], spyre_fault_name(r[0].status), spyre_fault_name(r[i].status),
				 (unsigned long long)r[0].device_cycles, (unsigned long long)r[i].device_cycles);
			(*diffs)++;
		}
		if (memcmp(M[0].buf, M[i].buf, M[0].size)) {
			tap_diag("%s: device memory differs at %u threads%s", what, threads[i],
				 kind[i]);
			(*diffs)++;
		}
		for (uint32_t c = 0; c < cfg->cores; c++)
			if (memcmp(spyre_engine_scratchpad(E[0], c), spyre_engine_scratchpad(E[i], c),
				   cfg->scratchpad_bytes)) {
				tap_diag("%s: core %u's scratchpad differs at %u threads%s", what, c, threads[i],
					 kind[i]);
				(*diffs)++;
				break;
			}
	}
	return r[0].status;
}

static uint32_t finish_and_run(const char *what, struct spyre_pb *pb, int *diffs)
{
	void *img;
	size_t sz;
	uint32_t st;

	if (spyre_pb_finish(pb, &img, &sz)) {
		spyre_pb_free(pb);
		tap_diag("%s: the builder failed", what);
		(*diffs)++;
		return ~0u;
	}
	spyre_pb_free(pb);
	st = run_all(what, img, sz, diffs);
	free(img);
	return st;
}

static struct spyre_pb *new_pb(void)
{
	struct spyre_pb *pb = spyre_pb_new();

	spyre_pb_sym(pb, "in", SPYRE_DT_FP32, 1, (uint64_t[]){ IN_BYTES / 4 }, IN_BYTES, SPYRE_SYM_IN);
	spyre_pb_sym(pb, "out", SPYRE_DT_FP32, 1, (uint64_t[]){ OUT_BYTES / 4 }, OUT_BYTES, SPYRE_SYM_OUT);
	return pb;
}

static void test_matmul_grid(void)
{
	/* C (128 x 128) = A (128 x 256) B (256 x 128) over 8 x 4 cores, A and B from "in", C to "out" */
	const uint32_t M_ = 128, N_ = 128, K_ = 256, GR = 8, GC = 4, mb = M_ / GR, nb = N_ / GC;
	uint32_t lda = spyre_sticks(K_, 0), ldb = spyre_sticks(nb, 0);
	uint32_t B0 = mb * lda * 128, C0 = B0 + K_ * ldb * 128;
	struct spyre_pb *pb = new_pb();
	int diffs = 0;

	for (uint32_t i = 0; i < GR; i++)
		for (uint32_t j = 0; j < GC; j++) {
			unsigned core = i * GC + j;

			spyre_pb_dma(pb, core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
				.mem = { .sym = 0, .off = (uint64_t)i * mb * K_ * 4 }, .rows = mb, .row_bytes = K_ * 4,
				.mem_stride = K_ * 4, .sp_stride = lda * 128 });
			spyre_pb_dma(pb, core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .sp = B0,
				.mem = { .sym = 0, .off = (uint64_t)M_ * K_ * 4 + j * nb * 4 }, .rows = K_,
				.row_bytes = nb * 4, .mem_stride = N_ * 4, .sp_stride = ldb * 128 });
			spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .d = C0, .a = 0,
				.b = B0, .rows = mb, .cols = nb, .k = K_, .ldd = ldb, .lda = lda, .ldb = ldb });
			spyre_pb_dma(pb, core, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = C0,
				.mem = { .sym = 1, .off = ((uint64_t)i * mb * N_ + j * nb) * 4 }, .rows = mb,
				.row_bytes = nb * 4, .mem_stride = N_ * 4, .sp_stride = ldb * 128 });
		}
	uint32_t st = finish_and_run("matmul grid", pb, &diffs);

	TAP_CHECK(st == 0 && diffs == 0, "32-core matmul: status %s, %d differences", spyre_fault_name(st), diffs);
}

/* One random tensor op on tiles of 16 x 32 fp32 (2 KiB apart) of a core. */
static void random_op(struct spyre_pb *pb, unsigned core, unsigned *s)
{
	uint32_t d = rnd(s, NTILES - 1) * TILE, a = rnd(s, NTILES) * TILE, b = rnd(s, NTILES - 1) * TILE;
	static const unsigned unary[] = { SPYRE_ISA_OP_EXP, SPYRE_ISA_OP_TANH, SPYRE_ISA_OP_GELU,
					  SPYRE_ISA_OP_SILU, SPYRE_ISA_OP_RELU, SPYRE_ISA_OP_ABS };
	static const unsigned binary[] = { SPYRE_ISA_OP_ADD, SPYRE_ISA_OP_SUB, SPYRE_ISA_OP_MUL,
					   SPYRE_ISA_OP_MAX, SPYRE_ISA_OP_DIV };

	switch (rnd(s, 10)) {
	case 0:
	case 1:	/* b spans two tiles: 32 x 32 */
		spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .d = d, .a = a, .b = b,
			.rows = 16, .cols = 32, .k = 32, .flags = rnd(s, 2) ? SPYRE_IF_ACC : 0 });
		break;
	case 2:	/* fp16 in, fp32 out: a 16 x 64 fp16 tile, b 64 x 32 fp16 (2 tiles) */
		spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = SPYRE_DT_FP16,
			.dt2 = SPYRE_DT_FP32, .d = d, .a = a, .b = b, .rows = 16, .cols = 32, .k = 64, .lda = 1,
			.ldb = 1, .ldd = 1 });
		break;
	case 3:
		spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = binary[rnd(s, 5)], .d = d, .a = a, .b = b,
			.rows = 16, .cols = 32 });
		break;
	case 4:
		spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = unary[rnd(s, 6)], .d = d, .a = a, .rows = 16,
			.cols = 32 });
		break;
	case 5:
		spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SOFTMAX, .d = d, .a = a, .rows = 16,
			.cols = 32, .flags = rnd(s, 2) ? SPYRE_IF_LOG : 0 });
		break;
	case 6:
		spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SCALE, .d = d, .a = a, .rows = 16,
			.cols = 32, .scale = 0.5f + (float)rnd(s, 4), .bias = -1.0f });
		break;
	case 7:	/* 16 x 32 -> 32 x 16 (one stick a row): two tiles */
		spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRANSPOSE, .d = d, .a = a,
			.rows = 16, .cols = 32 });
		break;
	case 8:	/* TRIL with a run-time diagonal from r2 */
		spyre_pb_ctl(pb, core, SPYRE_ISA_OP_LI, 2, rnd(s, 8), 0);
		spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRIL, .d = d, .a = a, .rows = 16,
			.cols = 32, .imm = (uint32_t)(int32_t)-2, .flags = SPYRE_IF_RDIAG, .ldb = 2 });
		break;
	default:
		if (rnd(s, 2))
			spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_REDSUM, .d = d, .a = a,
				.rows = 16, .cols = 32 });
		else
			spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt2 = SPYRE_DT_FP32,
				.d = d, .rows = 16, .cols = 32, .imm = 0x3f800000u + rnd(s, 1u << 20) });
		break;
	}
}

static void test_random_programs(void)
{
	int diffs = 0, faulted = 0;

	for (unsigned p = 0; p < 40; p++) {
		unsigned s = 1000 + p, phases = 1 + rnd(&s, 4);
		struct spyre_pb *pb = new_pb();
		char what[32];

		for (unsigned core = 0; core < NCORES; core++) {
			unsigned cs = s + core * 7919;

			for (unsigned ph = 0; ph < phases; ph++) {
				unsigned n = rnd(&cs, 12), nasync = 0;
				bool async;

				for (unsigned i = 0; i < n; i++) {
					unsigned k = rnd(&cs, 8);

					if (k == 0) {
						async = rnd(&cs, 2);
						nasync += async;
						spyre_pb_dma(pb, core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
							.sp = rnd(&cs, NTILES) * TILE,
							.mem = { .sym = 0, .off = rnd(&cs, IN_BYTES / TILE) * (uint64_t)TILE },
							.row_bytes = TILE, .async = async });
					} else if (k == 1) {
						async = rnd(&cs, 2);
						nasync += async;
						spyre_pb_dma(pb, core, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
							.sp = rnd(&cs, NTILES) * TILE,
							.mem = { .sym = 1, .off = core * (128u << 10) + rnd(&cs, 32) * TILE },
							.row_bytes = TILE, .async = async });
					} else if (k == 2 && rnd(&cs, 4) == 0) {
						/* an index from the scratchpad (now and then bounded: may fault with INDEX) */
						spyre_pb_ldx(pb, core, 3, rnd(&cs, NTILES) * TILE, 0,
							     rnd(&cs, 16) ? 0 : 1u << 30, 1, 0);
					} else {
						random_op(pb, core, &cs);
					}
				}
				/* every async DMA done before the phase ends */
				spyre_pb_ring(pb, core, SPYRE_ISA_OP_WAIT, 0, 0, SPYRE_TOKEN_DMA, nasync);
				if (ph % 2) {
					spyre_pb_ring(pb, core, SPYRE_ISA_OP_BARRIER, 0, 0, 0, 0);
				} else {
					/* a ring exchange: send a tile on, receive one from behind */
					spyre_pb_ring(pb, core, SPYRE_ISA_OP_SEND, rnd(&cs, NTILES) * TILE, (core + 1) % NCORES,
						      ph, TILE);
					spyre_pb_ring(pb, core, SPYRE_ISA_OP_RECV, rnd(&cs, NTILES) * TILE,
						      (core + NCORES - 1) % NCORES, ph, TILE);
				}
			}
			spyre_pb_dma(pb, core, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 0,
				.mem = { .sym = 1, .off = core * (128u << 10) + 32 * TILE }, .row_bytes = NTILES * TILE });
		}
		snprintf(what, sizeof(what), "program %u", p);
		uint32_t st = finish_and_run(what, pb, &diffs);

		if (st)
			tap_diag("%s: %s", what, spyre_fault_name(st));
		faulted += st != 0;
	}
	tap_diag("40 random 32-core programs, %d of them faulted", faulted);
	TAP_CHECK(diffs == 0, "40 random 32-core programs (%d faulted): %d differences", faulted, diffs);
}

static void test_queue_overflow(void)
{
	/* 200 dependent ops on one core (more than its queue holds), then a store */
	struct spyre_pb *pb = new_pb();
	int diffs = 0;

	spyre_pb_dma(pb, 5, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .row_bytes = 4 * TILE });
	for (int i = 0; i < 200; i++)
		spyre_pb_op(pb, 5, &(struct spyre_pb_op){ .op = i % 2 ? SPYRE_ISA_OP_TANH : SPYRE_ISA_OP_MATMUL,
			.d = (uint32_t)(i % 3) * TILE, .a = (uint32_t)((i + 1) % 3) * TILE, .b = i % 2 ? 0 : 4 * TILE, .rows = 16,
			.cols = 32, .k = i % 2 ? 0 : 32, .flags = i % 4 == 0 ? SPYRE_IF_ACC : 0 });
	spyre_pb_dma(pb, 5, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .mem = { .sym = 1 }, .row_bytes = 3 * TILE });
	uint32_t st = finish_and_run("queue overflow", pb, &diffs);

	TAP_CHECK(st == 0 && diffs == 0, "200 queued ops on one core: status %s, %d differences",
		  spyre_fault_name(st), diffs);
}

static void test_fault_after_ops(void)
{
	/* every core queues ops, then core 7 LOADs past its slot (MEM_RANGE) while the others go on */
	struct spyre_pb *pb = new_pb();
	int diffs = 0;

	for (unsigned core = 0; core < NCORES; core++) {
		spyre_pb_dma(pb, core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0 },
			.row_bytes = 4 * TILE });
		for (int i = 0; i < 6; i++)
			spyre_pb_op(pb, core, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .d = 2 * TILE,
				.a = 0, .b = 4 * TILE, .rows = 16, .cols = 32, .k = 32, .flags = SPYRE_IF_ACC });
		if (core == 7)
			spyre_pb_dma(pb, core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
				.mem = { .sym = 0, .off = IN_BYTES - TILE }, .row_bytes = 2 * TILE });
		spyre_pb_dma(pb, core, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 2 * TILE,
			.mem = { .sym = 1, .off = core * (128u << 10) }, .row_bytes = TILE });
	}
	uint32_t st = finish_and_run("fault after ops", pb, &diffs);

	TAP_CHECK(st == SPYRE_ENGINE_FAULT_MEM_RANGE && diffs == 0, "a fault after queued ops: status %s, %d differences",
		  spyre_fault_name(st), diffs);
}

int main(int argc, char **argv)
{
	static const struct tap_case cases[] = {
		{ "matmul_grid", test_matmul_grid },
		{ "random_programs", test_random_programs },
		{ "queue_overflow", test_queue_overflow },
		{ "fault_after_ops", test_fault_after_ops },
	};
	struct spyre_engine_config cfg;
	int ret;

	spyre_engine_config_default(&cfg);
	for (int i = 0; i < NENG; i++) {
		unsigned s = 42;

		cfg.threads = threads[i];
		E[i] = spyre_engine_new(&cfg);
		if (!E[i] || flatmem_init(&M[i], 0x100000000ull, 8u << 20))
			tap_bail("cannot create engine %d or its memory", i);
		M[i].eager = i >= NENG - 2;
		IN = flatmem_alloc(&M[i], IN_BYTES);
		OUT = flatmem_alloc(&M[i], OUT_BYTES);
		/* small values: long chains of ops stay finite for a while */
		float *in = flatmem_ptr(&M[i], IN);

		for (uint32_t j = 0; j < IN_BYTES / 4; j++)
			in[j] = ((float)rnd(&s, 2001) - 1000.0f) / 4000.0f;
	}
	ret = TAP_RUN(cases, argc, argv);
	for (int i = 0; i < NENG; i++) {
		spyre_engine_free(E[i]);
		flatmem_fini(&M[i]);
	}
	return ret;
}
