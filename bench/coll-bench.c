// SPDX-License-Identifier: MIT
/*
 * coll-bench: libspyre's collectives over every card of the VM (one
 * communicator, one stream per card), as nccl-tests reports them: for each
 * size, the time of one operation (best of REPS, the streams synchronized
 * at the end), algorithm bandwidth algbw = bytes / time and bus bandwidth
 * busbw = algbw x factor, the factor nccl-tests uses so that busbw is
 * comparable with the link's speed: all-reduce 2 (n - 1) / n, all-gather
 * and reduce-scatter (n - 1) / n, broadcast 1. The reference is the peer
 * copy's own bandwidth between two cards (spyre_memcpy_peer, the same size):
 * busbw / that is the ratio printed. fp32; bytes is the per-rank buffer
 * (all-gather, reduce-scatter: the whole n-chunk buffer, as nccl-tests).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "coll-bench"
#include "bench-vm.h"
#include "spyre.h"
#include "spyre_kernels.h"
#include "spyre_isa.h"

#define MAXR	8
#define REPS	3

enum op { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST, PEER, NOPS };

static int n;
static spyre_device_t *dev[MAXR];
static spyre_stream_t *st[MAXR];
static spyre_comm_t *comm;
static spyre_dptr_t a[MAXR], b[MAXR];

static void run(enum op op, size_t bytes)
{
	size_t count = bytes / 4;
	int r, ret = 0;

	switch (op) {
	case ALL_REDUCE:
		ret = spyre_all_reduce(comm, a, b, count, SPYRE_DT_FP32, SPYRE_RED_SUM, st);
		break;
	case ALL_GATHER:
		ret = spyre_all_gather(comm, a, b, count / (size_t)n, SPYRE_DT_FP32, st);
		break;
	case REDUCE_SCATTER:
		ret = spyre_reduce_scatter(comm, a, b, count / (size_t)n, SPYRE_DT_FP32, SPYRE_RED_SUM, st);
		break;
	case BROADCAST:
		ret = spyre_broadcast(comm, a, count, SPYRE_DT_FP32, 0, st);
		break;
	case PEER:
		ret = spyre_memcpy_peer(dev[1], a[1], dev[0], a[0], bytes);
		break;
	default:
		break;
	}
	if (ret)
		die("collective");
	for (r = 0; r < n; r++)
		if (spyre_stream_synchronize(st[r]))
			die("synchronize");
}

static double best(enum op op, size_t bytes)
{
	double bst = 1e30, t;
	int i;

	for (i = 0; i < REPS; i++) {
		t = now_ms();
		run(op, bytes);
		t = now_ms() - t;
		if (t < bst)
			bst = t;
	}
	return bst;
}

int main(void)
{
	static const char *const names[NOPS] = { "all_reduce", "all_gather", "reduce_scatter",
						 "broadcast", "peer copy" };
	static const size_t sizes[] = { 1u << 20, 16u << 20 };
	size_t s, max = 16u << 20;
	int r, op;

	n = spyre_device_count();
	if (n > MAXR)
		n = MAXR;
	if (n < 2) {
		fprintf(stderr, "coll-bench: two cards needed (tools/vm/run --devices 2)\n");
		return 1;
	}
	for (r = 0; r < n; r++) {
		if (spyre_device_open(r, &dev[r]) ||
		    spyre_stream_create(dev[r], SPYRE_STREAM_PRIORITY_NORMAL, &st[r]) ||
		    spyre_malloc(dev[r], max, &a[r]) || spyre_malloc(dev[r], max, &b[r]))
			die("set-up");
		if (spyre_memset_async(st[r], a[r], 0x3c, max) || spyre_stream_synchronize(st[r]))
			die("fill");
	}
	if (spyre_comm_init(&comm, dev, n))
		die("spyre_comm_init");
	printf("collectives over %d cards below one PCIe switch, fp32 (%s mode; best of %d)\n", n,
	       timed_mode() ? "timed" : "functional", REPS);
	printf("%-15s %10s %10s %10s %10s %14s\n", "op", "bytes", "time ms", "algbw GB/s",
	       "busbw GB/s", "busbw vs peer");
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		double peer_ms = best(PEER, sizes[s]), peer_bw = (double)sizes[s] / (peer_ms * 1e6);

		for (op = 0; op < NOPS; op++) {
			double ms = op == PEER ? peer_ms : best((enum op)op, sizes[s]);
			double alg = (double)sizes[s] / (ms * 1e6), f;

			f = op == ALL_REDUCE ? 2.0 * (n - 1) / n :
			    op == ALL_GATHER || op == REDUCE_SCATTER ? (double)(n - 1) / n : 1.0;
			printf("%-15s %10zu %10.3f %10.2f %10.2f %13.2fx\n", names[op], sizes[s], ms, alg,
			       alg * f, alg * f / peer_bw);
		}
	}
	spyre_comm_destroy(comm);
	for (r = 0; r < n; r++) {
		spyre_free(dev[r], a[r]);
		spyre_free(dev[r], b[r]);
		spyre_stream_destroy(st[r]);
		spyre_device_close(dev[r]);
	}
	return 0;
}
