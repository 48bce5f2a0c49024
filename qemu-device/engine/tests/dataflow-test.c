// SPDX-License-Identifier: MIT
/*
 * Description: the dataflow timing model (docs/spyre-isa.md §6). Asynchronous
 * LOAD/STORE overlap DMA with compute: a double-buffered loop costs the
 * longer of load and compute per tile plus the shorter once, the same loop
 * with synchronous DMA costs their sum. LPDDR is shared by the transfers in
 * flight at each moment (a staggered pair: the first runs alone, then both
 * at half rate, then the second alone; never the static even split). Ring
 * links are shared: two messages over one link in one direction queue, in
 * opposite directions or on other links they do not. DMA occupies LPDDR in
 * 4 KiB bursts with a per-burst overhead: 128-byte rows cost 1.5x contiguous
 * data. The data of an asynchronous LOAD lands when it completes (compute
 * before the WAIT reads the old bytes); a halted core's outstanding DMA
 * still completes and counts in the device time; a fault of an asynchronous
 * DMA names its instruction; a full DMA queue stalls the core until its
 * oldest DMA completes; misuse of the DMA token is refused.
 * Every expected number is derived here from the device properties.
 */
#include <string.h>

#include "flatmem.h"
#include "spyre_progbuild.h"

static struct spyre_engine_config cfg;
static struct spyre_engine *E;
static struct flatmem M;
static uint64_t buf;		/* 4 MiB, slot 0 */

#define BUF_BYTES (4u << 20)

static int launch(struct spyre_pb *pb, uint32_t mask, struct spyre_launch_result *r)
{
	void *img;
	size_t sz;
	int rc;

	memset(r, 0, sizeof(*r));
	if (spyre_pb_finish(pb, &img, &sz)) {
		spyre_pb_free(pb);
		return -1;
	}
	spyre_pb_free(pb);
	rc = flatmem_run(&M, E, img, sz, (uint64_t[]){ buf }, 1, NULL, 0, mask, r);
	free(img);
	return rc;
}

static struct spyre_pb *newpb(void)
{
	struct spyre_pb *pb = spyre_pb_new();

	spyre_pb_sym(pb, "buf", SPYRE_DT_INT8, 1, (uint64_t[]){ BUF_BYTES }, BUF_BYTES, SPYRE_SYM_IN);
	return pb;
}

static uint64_t cdiv(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

/* Cycles of the data phase of a contiguous transfer of @bytes alone on LPDDR. */
static uint64_t data_cycles(uint64_t bytes)
{
	uint64_t demand = bytes + cdiv(bytes, cfg.dma_burst_bytes) * cfg.dma_burst_overhead_bytes;

	return cdiv(demand * cfg.clock_mhz, cfg.mem_bw_mbps);
}

static void load(struct spyre_pb *pb, unsigned core, uint32_t sp, uint64_t off, uint32_t bytes, bool async)
{
	spyre_pb_dma(pb, core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .sp = sp, .mem = { .sym = 0, .off = off },
		.row_bytes = bytes, .async = async });
}

/* fp16 matmul d[64 x n] = a[64 x k] b[k x n]: a at sp a_off, b at 1 MiB, d at 1.5 MiB. */
static void matmul(struct spyre_pb *pb, uint32_t a_off, uint32_t n, uint32_t k)
{
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = SPYRE_DT_FP16,
		.dt2 = SPYRE_DT_FP32, .d = 3u << 19, .a = a_off, .b = 1u << 20, .rows = 64, .cols = n, .k = k });
}

#define TILES 8
#define K 256
#define TILE_BYTES (64u * K * 2)	/* a 64 x 256 fp16 tile */

/*
 * TILES tiles, each loaded then multiplied: synchronous, or double-buffered
 * (load tile i+1 asynchronously while tile i is multiplied).
 */
static uint64_t tiled_loop(uint32_t n, bool async)
{
	struct spyre_pb *pb = newpb();
	struct spyre_launch_result r;

	if (async)
		load(pb, 0, 0, 0, TILE_BYTES, true);
	for (uint32_t i = 0; i < TILES; i++) {
		uint32_t cur = (i % 2) * (256u << 10);

		if (!async) {
			load(pb, 0, cur, (uint64_t)i * TILE_BYTES, TILE_BYTES, false);
		} else {
			if (i + 1 < TILES)
				load(pb, 0, ((i + 1) % 2) * (256u << 10), (uint64_t)(i + 1) * TILE_BYTES, TILE_BYTES, true);
			spyre_pb_ring(pb, 0, SPYRE_ISA_OP_WAIT, 0, 0, SPYRE_TOKEN_DMA, 1);
		}
		matmul(pb, cur, n, K);
	}
	return launch(pb, 1, &r) ? 0 : r.device_cycles;
}

static void overlap_case(uint32_t n, const char *what)
{
	struct spyre_pb *pb;
	struct spyre_launch_result r;
	uint64_t L, C, sync, asy;

	pb = newpb();
	load(pb, 0, 0, 0, TILE_BYTES, false);
	L = launch(pb, 1, &r) ? 0 : r.device_cycles;
	pb = newpb();
	matmul(pb, 0, n, K);
	C = launch(pb, 1, &r) ? 0 : r.device_cycles;
	sync = tiled_loop(n, false);
	asy = tiled_loop(n, true);

	TAP_CHECK(L == data_cycles(TILE_BYTES) + cfg.dma_latency_cycles + cfg.issue_cycles,
		  "%s: one tile's LOAD alone %llu cycles", what, (unsigned long long)L);
	TAP_CHECK(sync == TILES * (L + C), "%s: synchronous loop = %u x (load %llu + compute %llu) = %llu", what,
		  TILES, (unsigned long long)L, (unsigned long long)C, (unsigned long long)sync);
	if (C > L) {
		/* compute-bound: every load but the first is hidden; per tile a LOAD issue and a WAIT on top */
		TAP_CHECK(asy >= TILES * C + L && asy <= TILES * (C + 2 * cfg.issue_cycles) + L,
			  "%s: double-buffered = %u x compute + one load (%llu, in [%llu, %llu])", what, TILES,
			  (unsigned long long)asy, (unsigned long long)(TILES * C + L),
			  (unsigned long long)(TILES * (C + 2 * cfg.issue_cycles) + L));
	} else {
		/* load-bound: every compute but the last is hidden; tiles come at least a data phase apart */
		uint64_t lo = TILES * data_cycles(TILE_BYTES) + cfg.dma_latency_cycles + C;

		TAP_CHECK(asy >= lo && asy <= TILES * L + C,
			  "%s: double-buffered = %u x load + one compute (%llu, in [%llu, %llu])", what, TILES,
			  (unsigned long long)asy, (unsigned long long)lo, (unsigned long long)(TILES * L + C));
	}
	TAP_CHECK(sync - asy >= (TILES - 1) * (L < C ? L : C) - TILES * 2 * cfg.issue_cycles,
		  "%s: overlap saves the shorter of load/compute per tile but one (%llu cycles)", what,
		  (unsigned long long)(sync - asy));
}

static void test_overlap_compute_bound(void)
{
	overlap_case(64, "64x64x256 matmul per tile (compute-bound)");
}

static void test_overlap_load_bound(void)
{
	overlap_case(8, "64x8x256 matmul per tile (load-bound)");
}

static void test_shared_bandwidth(void)
{
	struct spyre_pb *pb = newpb();
	struct spyre_launch_result r;
	const uint32_t bytes = 1u << 20;
	uint64_t D = data_cycles(bytes), lat = cfg.dma_latency_cycles, is = cfg.issue_cycles;
	uint64_t k = D / 4, start1 = is + 2 * k * is, e0, e1, stat0, stat1;

	/* core 0 loads at 0; core 1 counts down k (LI, then ADDI + BNZ per step), then loads */
	load(pb, 0, 0, 0, bytes, false);
	spyre_pb_ctl(pb, 1, SPYRE_ISA_OP_LI, 1, k, 0);
	spyre_pb_ctl(pb, 1, SPYRE_ISA_OP_ADDI, 1, (uint64_t)-1, 1);
	spyre_pb_ctl(pb, 1, SPYRE_ISA_OP_BNZ, 1, 1, 0);
	load(pb, 1, 0, bytes, bytes, false);
	TAP_CHECK(!launch(pb, 3, &r), "staggered pair runs");
	/* alone until start1, then half rate each: core 0 ends after 2 x its rest; core 1 finishes alone */
	e0 = start1 + 2 * (D - start1);
	e1 = e0 + (D - (e0 - start1) / 2);
	stat0 = 2 * D + lat + is;		/* what an even static split of the whole transfer would give */
	stat1 = start1 + 2 * D + lat + is;
	TAP_CHECK(r.core_end_cycles[0] + 2 >= e0 + lat + is && r.core_end_cycles[0] <= e0 + lat + is + 2,
		  "first load: alone for %llu cycles, then shared: ends at %llu (model %llu; static split %llu)",
		  (unsigned long long)start1, (unsigned long long)r.core_end_cycles[0],
		  (unsigned long long)(e0 + lat + is), (unsigned long long)stat0);
	TAP_CHECK(r.core_end_cycles[1] + 2 >= e1 + lat + is && r.core_end_cycles[1] <= e1 + lat + is + 2,
		  "second load: shared, then alone: ends at %llu (model %llu; static split %llu)",
		  (unsigned long long)r.core_end_cycles[1], (unsigned long long)(e1 + lat + is),
		  (unsigned long long)stat1);
	/* LPDDR never idles while both are pending: the pair's data takes exactly 2 D */
	TAP_CHECK(r.core_end_cycles[1] + 2 >= 2 * D + lat + is && r.core_end_cycles[1] <= 2 * D + lat + is + 2,
		  "the pair's bytes move at the full bandwidth: 2 x %llu cycles", (unsigned long long)D);
}

/* Core 2 receives one message from each of @a and @b (4 KiB, sent at cycle 0); its end clock. */
static uint64_t two_messages(uint32_t a, uint32_t b, uint32_t to)
{
	struct spyre_pb *pb = newpb();
	struct spyre_launch_result r;

	spyre_pb_ring(pb, a, SPYRE_ISA_OP_SEND, 0, to, 0, 4096);
	spyre_pb_ring(pb, b, SPYRE_ISA_OP_SEND, 0, to, 0, 4096);
	spyre_pb_ring(pb, to, SPYRE_ISA_OP_RECV, 0, a, 0, 4096);
	spyre_pb_ring(pb, to, SPYRE_ISA_OP_RECV, 4096, b, 0, 4096);
	return launch(pb, 1u << a | 1u << b | 1u << to, &r) ? 0 : r.core_end_cycles[to];
}

static void test_ring_contention(void)
{
	uint64_t x = cdiv(4096, cfg.ring_bytes_per_cycle), hop = cfg.ring_hop_cycles, is = cfg.issue_cycles;
	/* 0 -> 2 and 1 -> 2 share link 1 -> 2; 0 -> 2 and 4 -> 2 come from both sides */
	uint64_t shared = two_messages(0, 1, 2), sides = two_messages(0, 4, 2), apart;
	struct spyre_pb *pb = newpb();
	struct spyre_launch_result r;

	/* alone, 0 -> 2 lands at issue + 2 hops + transfer; two RECVs cost an issue each */
	TAP_CHECK(sides == is + 2 * hop + x + 2 * is, "messages from both sides do not meet: %llu cycles",
		  (unsigned long long)sides);
	/* the second over link 1 -> 2 waits for the first's transfer there */
	TAP_CHECK(shared == 2 * is + 2 * hop + 2 * x,
		  "two messages over one link queue: %llu cycles (one transfer, %llu cycles, later)",
		  (unsigned long long)shared, (unsigned long long)x);
	/* 0 -> 1 and 2 -> 3 use different links: both land as if alone */
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_SEND, 0, 1, 0, 4096);
	spyre_pb_ring(pb, 2, SPYRE_ISA_OP_SEND, 0, 3, 0, 4096);
	spyre_pb_ring(pb, 1, SPYRE_ISA_OP_RECV, 0, 0, 0, 4096);
	spyre_pb_ring(pb, 3, SPYRE_ISA_OP_RECV, 0, 2, 0, 4096);
	apart = launch(pb, 0xf, &r) ? 0 : r.device_cycles;
	TAP_CHECK(apart == is + hop + x + is && r.core_end_cycles[1] == r.core_end_cycles[3],
		  "messages on different links do not interfere: %llu cycles", (unsigned long long)apart);
}

static void test_bursts(void)
{
	struct spyre_pb *pb = newpb();
	struct spyre_launch_result r;
	uint64_t strided, contig, lat = cfg.dma_latency_cycles + cfg.issue_cycles;

	/* 64 rows of 128 bytes, 256 bytes apart in memory: 64 bursts */
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .rows = 64,
		.row_bytes = 128, .mem_stride = 256, .sp_stride = 128 });
	strided = launch(pb, 1, &r) ? 0 : r.device_cycles;
	pb = newpb();
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .rows = 64,
		.row_bytes = 128 });
	contig = launch(pb, 1, &r) ? 0 : r.device_cycles;
	TAP_CHECK(strided == cdiv(64 * (128 + cfg.dma_burst_overhead_bytes) * cfg.clock_mhz, cfg.mem_bw_mbps) + lat,
		  "64 strided 128-byte rows: 64 bursts, %llu cycles", (unsigned long long)strided);
	TAP_CHECK(contig == data_cycles(8192) + lat, "the same 8 KiB contiguous: 2 bursts, %llu cycles",
		  (unsigned long long)contig);
	TAP_CHECK(contig == lat + cdiv((8192 + 2 * cfg.dma_burst_overhead_bytes) * cfg.clock_mhz, cfg.mem_bw_mbps),
		  "a burst is %u bytes", cfg.dma_burst_bytes);
}

static void test_data_lands_on_completion(void)
{
	struct spyre_pb *pb = newpb();
	struct spyre_launch_result r;
	float *src = flatmem_ptr(&M, buf), *early, *late;
	int good = 1;

	for (int i = 0; i < 32; i++)
		src[i] = (float)(i + 1);
	memset(src + 1024, 0, 8192);
	/* async LOAD into sp 0; copy sp 0 (fp32 CAST) before the WAIT and after it; store both */
	load(pb, 0, 0, 0, 128, true);
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_CAST, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_FP32, .d = 4096, .a = 0, .rows = 1, .cols = 32 });
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_WAIT, 0, 0, SPYRE_TOKEN_DMA, 1);
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_CAST, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_FP32, .d = 8192, .a = 0, .rows = 1, .cols = 32 });
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 4096, .mem = { .sym = 0, .off = 4096 },
		.row_bytes = 128 });
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 8192, .mem = { .sym = 0, .off = 4224 },
		.row_bytes = 128 });
	TAP_CHECK(!launch(pb, 1, &r), "runs");
	early = src + 1024;
	late = src + 1056;
	for (int i = 0; i < 32; i++)
		if (early[i] != 0.0f || late[i] != (float)(i + 1))
			good = 0;
	TAP_CHECK(good, "compute before the WAIT reads the old scratchpad (0), after it the loaded data (1..32)");
}

static void test_halt_with_outstanding(void)
{
	struct spyre_pb *pb = newpb();
	struct spyre_launch_result r;
	uint8_t *m = flatmem_ptr(&M, buf);

	memset(m + (2u << 20), 0xee, 1u << 20);
	/* sp 0 is zero at launch: an async STORE of 1 MiB, then the stream ends */
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 0, .mem = { .sym = 0, .off = 2u << 20 },
		.row_bytes = 1u << 20, .async = true });
	TAP_CHECK(!launch(pb, 1, &r), "runs");
	TAP_CHECK(m[2u << 20] == 0 && m[(3u << 20) - 1] == 0, "the outstanding STORE landed before the launch ended");
	TAP_CHECK(r.device_cycles == data_cycles(1u << 20) + cfg.dma_latency_cycles &&
		  r.core_busy_cycles[0] == cfg.issue_cycles,
		  "device time includes it (%llu cycles); the core was busy only to issue it",
		  (unsigned long long)r.device_cycles);
}

static void test_async_fault_pc(void)
{
	struct spyre_pb *pb = newpb();
	struct spyre_launch_result r;
	int rc;

	M.hole_lo = buf + (1u << 20);
	M.hole_hi = M.hole_lo + 4096;
	load(pb, 0, 0, 1u << 20, 4096, true);	/* pc 0: into the hole */
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_FP32, .d = 8192, .rows = 1, .cols = 32 });
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_WAIT, 0, 0, SPYRE_TOKEN_DMA, 1);
	rc = launch(pb, 1, &r);
	M.hole_lo = M.hole_hi = 0;
	TAP_CHECK(rc == SPYRE_ENGINE_FAULT_MEM && r.fault_core == 0 && r.fault_pc == 0 &&
		  r.fault_addr == buf + (1u << 20),
		  "an async LOAD's fault names its instruction (pc %u) and address", r.fault_pc);
}

static void test_queue_full(void)
{
	struct spyre_pb *pb = newpb();
	struct spyre_launch_result r;
	uint64_t D = data_cycles(4096);
	int rc;

	/* 9 async LOADs of 4 KiB: the 9th waits for the oldest to complete */
	for (uint32_t i = 0; i <= SPYRE_DMA_QUEUE_DEPTH; i++)
		load(pb, 0, i * 4096, i * 4096, 4096, true);
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_WAIT, 0, 0, SPYRE_TOKEN_DMA, SPYRE_DMA_QUEUE_DEPTH + 1);
	rc = launch(pb, 1, &r);
	/* data phases back to back: the last ends at 9 D (+ latency), whatever the stall */
	TAP_CHECK(rc == 0 && r.device_cycles == (SPYRE_DMA_QUEUE_DEPTH + 1) * D + cfg.dma_latency_cycles +
						 cfg.issue_cycles,
		  "%u outstanding LOADs then one more: transfers back to back, %llu cycles",
		  SPYRE_DMA_QUEUE_DEPTH, (unsigned long long)r.device_cycles);
	TAP_CHECK(r.core_busy_cycles[0] == (SPYRE_DMA_QUEUE_DEPTH + 2) * cfg.issue_cycles,
		  "the stalled core was not busy (%llu busy cycles)", (unsigned long long)r.core_busy_cycles[0]);
}

static void test_token_misuse(void)
{
	struct spyre_pb *pb = newpb();
	struct spyre_launch_result r;
	int rc;

	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_SIGNAL, 0, 1, SPYRE_TOKEN_DMA, 0);
	rc = launch(pb, 3, &r);
	TAP_CHECK(rc == SPYRE_ENGINE_FAULT_BAD_OPERAND, "SIGNAL of the DMA token: bad operand (%d)", rc);
	pb = newpb();
	load(pb, 0, 0, 0, 4096, true);
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_WAIT, 0, 0, SPYRE_TOKEN_DMA, 2);
	rc = launch(pb, 1, &r);
	TAP_CHECK(rc == SPYRE_ENGINE_FAULT_DEADLOCK && r.fault_pc == 1,
		  "WAIT for more DMAs than were issued: deadlock at the WAIT (%d, pc %u)", rc, r.fault_pc);
}

static void test_wake_during_sync_dma(void)
{
	struct spyre_pb *pb = newpb();
	struct spyre_launch_result r;
	uint64_t D = data_cycles(1u << 20), is = cfg.issue_cycles;

	/* core 1 is in a 1 MiB LOAD when core 0's message comes: the LOAD runs once, then the RECV */
	load(pb, 1, 0, 0, 1u << 20, false);
	spyre_pb_ring(pb, 1, SPYRE_ISA_OP_RECV, 1u << 20, 0, 0, 128);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LI, 1, 100, 0);	/* core 0 sends after 201 cycles */
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_ADDI, 1, (uint64_t)-1, 1);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_BNZ, 1, 1, 0);
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_SEND, 0, 1, 0, 128);
	int rc = launch(pb, 3, &r);

	TAP_CHECK(!rc && r.insns == 3 + 1 + 200 && r.core_end_cycles[1] == D + cfg.dma_latency_cycles + 2 * is,
		  "a message during a synchronous LOAD does not repeat it (%llu instructions, core 1 ends at %llu)",
		  (unsigned long long)r.insns, (unsigned long long)r.core_end_cycles[1]);
}

static void test_failed_launch_reports_nothing(void)
{
	struct spyre_launch_result r;
	uint64_t good = tiled_loop(64, true), img_va;
	struct spyre_pb *pb = newpb();
	void *img = NULL;
	size_t sz = 0;
	int rc;

	/* after a launch that ran, one whose argument block cannot be read reports no figures of it */
	load(pb, 0, 0, 0, 4096, false);
	if (spyre_pb_finish(pb, &img, &sz))
		sz = 0;
	spyre_pb_free(pb);
	img_va = buf + (2u << 20);
	memcpy(flatmem_ptr(&M, img_va), img, sz);
	free(img);
	M.hole_lo = buf + (3u << 20);
	M.hole_hi = M.hole_lo + 4096;
	rc = spyre_engine_launch(E, img_va, M.hole_lo, 1, &flatmem_ops, &M, &r);
	M.hole_lo = M.hole_hi = 0;
	TAP_CHECK(good && sz && rc == SPYRE_ENGINE_FAULT_MEM && r.insns == 0 && r.device_cycles == 0 &&
		  r.core_busy_cycles[0] == 0 && r.cores_run == 0,
		  "an argument fault after a %llu-cycle launch: %llu instructions, %llu cycles reported",
		  (unsigned long long)good, (unsigned long long)r.insns, (unsigned long long)r.device_cycles);
}

static void test_determinism(void)
{
	uint64_t a = tiled_loop(64, true), b = tiled_loop(64, true);

	TAP_CHECK(a && a == b, "identical double-buffered launches take identical time (%llu cycles)",
		  (unsigned long long)a);
}

static const struct tap_case cases[] = {
	{ "overlap_compute_bound", test_overlap_compute_bound },
	{ "overlap_load_bound", test_overlap_load_bound },
	{ "shared_bandwidth", test_shared_bandwidth },
	{ "ring_contention", test_ring_contention },
	{ "bursts", test_bursts },
	{ "data_lands_on_completion", test_data_lands_on_completion },
	{ "halt_with_outstanding", test_halt_with_outstanding },
	{ "async_fault_pc", test_async_fault_pc },
	{ "queue_full", test_queue_full },
	{ "token_misuse", test_token_misuse },
	{ "wake_during_sync_dma", test_wake_during_sync_dma },
	{ "failed_launch_reports_nothing", test_failed_launch_reports_nothing },
	{ "determinism", test_determinism },
};

static void setup(void)
{
	buf = flatmem_alloc(&M, BUF_BYTES);
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
