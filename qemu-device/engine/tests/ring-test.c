// SPDX-License-Identifier: MIT
/*
 * Description: ring transfers between all 992 ordered pairs of the 32
 * cores in one launch (each core sends a stick tagged with its pair to
 * every other core, then receives from each; every stick must arrive
 * intact and in place), in-order delivery of several messages on one pair,
 * a send to oneself, a large message, a pipeline through all 32 cores,
 * token SIGNAL/WAIT across cores, and a barrier that aligns every core's
 * modeled clock.
 */
#include <string.h>

#include "flatmem.h"
#include "spyre_progbuild.h"

#define N 32

static struct spyre_engine *E;
static struct flatmem M;

static int run(struct spyre_pb *pb, const uint64_t *slots, uint32_t ns, uint32_t mask, struct spyre_launch_result *r)
{
	void *img;
	size_t sz;
	int rc;

	if (spyre_pb_finish(pb, &img, &sz))
		return -1;
	spyre_pb_free(pb);
	rc = flatmem_run(&M, E, img, sz, slots, ns, NULL, 0, mask, r);
	free(img);
	return rc;
}

static void test_all_pairs(void)
{
	struct spyre_launch_result r;
	struct spyre_pb *pb;
	int rc;

	/* all pairs: core i's stick for j holds bytes (i, j, i^j, ...); received into slot i of its buffer */
	uint64_t in = flatmem_alloc(&M, N * 128), out = flatmem_alloc(&M, (uint64_t)N * N * 128);
	uint8_t *ip = flatmem_ptr(&M, in);

	for (int i = 0; i < N; i++)
		for (int b = 0; b < 128; b++)
			ip[i * 128 + b] = (uint8_t)(i * 131 + b);
	pb = spyre_pb_new();
	spyre_pb_sym(pb, "in", SPYRE_DT_INT8, 1, (uint64_t[]){ N * 128 }, N * 128, SPYRE_SYM_IN);
	spyre_pb_sym(pb, "out", SPYRE_DT_INT8, 1, (uint64_t[]){ N * N * 128 }, N * N * 128, SPYRE_SYM_OUT);
	for (int i = 0; i < N; i++) {
		spyre_pb_dma(pb, i, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0, .off = i * 128u },
			.row_bytes = 128 });
		for (int k = 1; k < N; k++)
			spyre_pb_ring(pb, i, SPYRE_ISA_OP_SEND, 0, (i + k) % N, (uint32_t)(i * N + (i + k) % N), 128);
		for (int k = 1; k < N; k++) {
			int j = (i + N - k) % N;

			spyre_pb_ring(pb, i, SPYRE_ISA_OP_RECV, 128 * (1 + j), j, (uint32_t)(j * N + i), 128);
		}
		spyre_pb_dma(pb, i, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 128,
			.mem = { .sym = 1, .off = (uint64_t)i * N * 128 }, .row_bytes = N * 128 });
	}
	rc = run(pb, (uint64_t[]){ in, out }, 2, 0xffffffff, &r);
	int bad = 0;
	const uint8_t *op = flatmem_ptr(&M, out);

	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			if (i == j)
				continue;
			if (memcmp(op + ((size_t)i * N + j) * 128, ip + j * 128, 128))
				bad++;
		}
	TAP_CHECK(rc == 0 && bad == 0 && r.insns == N * (2 + 2 * (N - 1)),
		  "all %d ordered pairs: %d sticks wrong, status %s", N * (N - 1), bad, spyre_fault_name(r.status));
}

static void test_order_self_and_large(void)
{
	struct spyre_launch_result r;
	struct spyre_pb *pb;
	int rc;

	/* in-order delivery on one pair, a self-send and a 1 MiB message */
	uint64_t o2 = flatmem_alloc(&M, 8 * 128 + (1u << 20));

	pb = spyre_pb_new();
	spyre_pb_sym(pb, "out", SPYRE_DT_INT8, 1, (uint64_t[]){ 8 * 128 + (1u << 20) }, 8 * 128 + (1u << 20),
		     SPYRE_SYM_OUT);
	for (int k = 0; k < 4; k++) {
		spyre_pb_op(pb, 3, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_INT32,
			.dt2 = SPYRE_DT_INT32, .rows = 1, .cols = 32, .imm = (uint32_t)(100 + k) });
		spyre_pb_ring(pb, 3, SPYRE_ISA_OP_SEND, 0, 29, 5, 128);
		spyre_pb_ring(pb, 29, SPYRE_ISA_OP_RECV, 128 * (uint32_t)k, 3, 5, 128);
	}
	spyre_pb_op(pb, 29, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_INT32,
		.dt2 = SPYRE_DT_INT32, .d = 4096, .rows = 1, .cols = 32, .imm = 777 });
	spyre_pb_ring(pb, 29, SPYRE_ISA_OP_SEND, 4096, 29, 9, 128);
	spyre_pb_ring(pb, 29, SPYRE_ISA_OP_RECV, 4 * 128, 29, 9, 128);
	spyre_pb_op(pb, 3, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_INT8,
		.dt2 = SPYRE_DT_INT8, .d = 8192, .rows = 8192, .cols = 128, .imm = 0x5a });
	spyre_pb_ring(pb, 3, SPYRE_ISA_OP_SEND, 8192, 29, 1, 1u << 20);
	spyre_pb_ring(pb, 29, SPYRE_ISA_OP_RECV, 8192, 3, 1, 1u << 20);
	spyre_pb_dma(pb, 29, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .row_bytes = 5 * 128 });
	spyre_pb_dma(pb, 29, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 8192, .mem = { .sym = 0, .off = 8 * 128 },
		.row_bytes = 1u << 20 });
	rc = run(pb, (uint64_t[]){ o2 }, 1, (1u << 3) | (1u << 29), &r);
	int32_t v[5];
	int order = 1, big = 1;
	const uint8_t *o2p = flatmem_ptr(&M, o2);

	for (int k = 0; k < 5; k++) {
		memcpy(&v[k], o2p + 128 * k + 124, 4);
		if (v[k] != (k < 4 ? 100 + k : 777))
			order = 0;
	}
	for (uint32_t b = 0; b < (1u << 20); b++)
		if (o2p[8 * 128 + b] != 0x5a)
			big = 0;
	TAP_CHECK(rc == 0 && order, "4 messages on one pair arrive in order; self-send delivers");
	TAP_CHECK(rc == 0 && big, "1 MiB message across the ring arrives intact");
}

static void test_pipeline(void)
{
	struct spyre_launch_result r;
	struct spyre_pb *pb;
	int rc;

	/* pipeline: core 0 -> 1 -> ... -> 31, each adds 1 */
	uint64_t o3 = flatmem_alloc(&M, 128);

	pb = spyre_pb_new();
	spyre_pb_sym(pb, "out", SPYRE_DT_FP32, 1, (uint64_t[]){ 32 }, 128, SPYRE_SYM_OUT);
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_FP32, .rows = 1, .cols = 32, .imm = 0 });
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_FP32, .d = 128, .rows = 1, .cols = 32, .imm = 0x3f800000 });
	for (int i = 0; i < N; i++) {
		if (i) {
			spyre_pb_op(pb, i, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
				.dt2 = SPYRE_DT_FP32, .d = 128, .rows = 1, .cols = 32, .imm = 0x3f800000 });
			spyre_pb_ring(pb, i, SPYRE_ISA_OP_RECV, 0, i - 1, 0, 128);
		}
		spyre_pb_op(pb, i, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32,
			.dt2 = SPYRE_DT_FP32, .d = 0, .a = 0, .b = 128, .rows = 1, .cols = 32 });
		if (i < N - 1)
			spyre_pb_ring(pb, i, SPYRE_ISA_OP_SEND, 0, i + 1, 0, 128);
	}
	spyre_pb_dma(pb, N - 1, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .row_bytes = 128 });
	rc = run(pb, (uint64_t[]){ o3 }, 1, 0xffffffff, &r);
	float f;

	memcpy(&f, flatmem_ptr(&M, o3 + 64), 4);
	TAP_CHECK(rc == 0 && f == 32.0f, "32-core pipeline: %g == 32", f);
	TAP_CHECK(r.core_end_cycles[31] > r.core_end_cycles[0], "pipeline: the last core ends after the first");
}

static void test_tokens(void)
{
	struct spyre_launch_result r;
	struct spyre_pb *pb;
	int rc;

	/* tokens: cores 1..31 signal core 0 token 2; core 0 waits for 31 */
	pb = spyre_pb_new();
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_WAIT, 0, 0, 2, 31);
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_WAIT, 0, 0, 2, 0);
	for (int i = 1; i < N; i++) {
		for (int k = 0; k < i; k++)
			spyre_pb_ctl(pb, i, SPYRE_ISA_OP_NOP, 0, 0, 0);
		spyre_pb_ring(pb, i, SPYRE_ISA_OP_SIGNAL, 0, 0, 2, 0);
	}
	rc = run(pb, NULL, 0, 0xffffffff, &r);
	TAP_CHECK(rc == 0 && r.core_end_cycles[0] >= r.core_end_cycles[31], "tokens: core 0 waits for 31 signals (ends %llu >= %llu)",
		  (unsigned long long)r.core_end_cycles[0], (unsigned long long)r.core_end_cycles[31]);
}

static void test_barrier(void)
{
	struct spyre_launch_result r;
	struct spyre_pb *pb;
	int rc;

	/* barrier: unequal work before it, every clock equal after */
	pb = spyre_pb_new();
	for (int i = 0; i < N; i++) {
		spyre_pb_op(pb, i, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
			.dt2 = SPYRE_DT_FP32, .rows = (uint32_t)(1 + 40 * i), .cols = 32, .imm = 0 });
		spyre_pb_ring(pb, i, SPYRE_ISA_OP_BARRIER, 0, 0, 0, 0);
	}
	rc = run(pb, NULL, 0, 0xffffffff, &r);
	int same = 1;

	for (int i = 1; i < N; i++)
		same &= r.core_end_cycles[i] == r.core_end_cycles[0];
	TAP_CHECK(rc == 0 && same && r.core_busy_cycles[0] < r.core_busy_cycles[N - 1],
		  "barrier: all 32 clocks equal after it (%llu), busy differs", (unsigned long long)r.core_end_cycles[0]);
}

static void test_barrier_groups(void)
{
	struct spyre_launch_result r;
	struct spyre_pb *pb;
	int rc;

	/* sub-group barriers: {0,1} and {2,3} independently */
	pb = spyre_pb_new();
	for (int i = 0; i < 4; i++)
		spyre_pb_ring(pb, (unsigned)i, SPYRE_ISA_OP_BARRIER, 0, 0, 0, i < 2 ? 0x3 : 0xc);
	rc = run(pb, NULL, 0, 0xf, &r);
	TAP_CHECK(rc == 0, "two disjoint barrier groups complete");
}

static const struct tap_case cases[] = {
	{ "all_pairs", test_all_pairs },
	{ "order_self_and_large", test_order_self_and_large },
	{ "pipeline", test_pipeline },
	{ "tokens", test_tokens },
	{ "barrier", test_barrier },
	{ "barrier_groups", test_barrier_groups },
};

int main(int argc, char **argv)
{
	static const struct flatmem_test t = {
		.engine = &E, .mem = &M, .base = 0x300000000ull, .size = 64u << 20,
	};

	return FLATMEM_TEST_MAIN(&t, cases, argc, argv);
}
