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
 * Then the same collectives with one card per process, as nccl-tests' -p
 * mode and torch.distributed run them (spyre_comm_init_rank(): n forked
 * processes, their steps ordered by messages between the hosts): each
 * repetition starts after a barrier, and rank 0's time ends when its stream
 * has synchronized (its result needs every rank's part).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

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
static double peer_bw_of[2];	/* the peer copy's bandwidth at each size, GB/s */

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

/* Rank @r of the one-card-per-process rows: its rows printed by rank 0. */
static void rank_main(int r, const spyre_comm_id_t *id, const size_t *sizes, int nsizes, const char *const *names)
{
	spyre_device_t *d;
	spyre_stream_t *s;
	spyre_comm_t *c;
	spyre_dptr_t x, y;
	size_t max = sizes[nsizes - 1];
	int z, op, i;

	if (spyre_device_open(r, &d) || spyre_stream_create(d, SPYRE_STREAM_PRIORITY_NORMAL, &s) ||
	    spyre_malloc(d, max, &x) || spyre_malloc(d, max, &y) || spyre_memset_async(s, x, 0x3c, max) ||
	    spyre_stream_synchronize(s))
		die("rank set-up");
	if (spyre_comm_init_rank(&c, n, id, r, d))
		die("spyre_comm_init_rank");
	for (z = 0; z < nsizes; z++) {
		for (op = 0; op < PEER; op++) {
			size_t count = sizes[z] / 4;
			double bst = 1e30, t, alg, f;

			for (i = 0; i < REPS; i++) {
				int ret;

				if (spyre_comm_barrier(c))
					die("barrier");
				t = now_ms();
				ret = op == ALL_REDUCE ? spyre_comm_all_reduce(c, x, y, count, SPYRE_DT_FP32, SPYRE_RED_SUM, s) :
				      op == ALL_GATHER ? spyre_comm_all_gather(c, x + (size_t)r * (sizes[z] / (size_t)n), y,
									   count / (size_t)n, SPYRE_DT_FP32, s) :
				      op == REDUCE_SCATTER ? spyre_comm_reduce_scatter(c, x, y, count / (size_t)n,
										      SPYRE_DT_FP32, SPYRE_RED_SUM, s) :
				      spyre_comm_broadcast(c, x, count, SPYRE_DT_FP32, 0, s);
				if (ret || spyre_stream_synchronize(s))
					die(names[op]);
				t = now_ms() - t;
				if (t < bst)
					bst = t;
			}
			alg = (double)sizes[z] / (bst * 1e6);
			f = op == ALL_REDUCE ? 2.0 * (n - 1) / n :
			    op == ALL_GATHER || op == REDUCE_SCATTER ? (double)(n - 1) / n : 1.0;
			if (r == 0)
				printf("%-15s %10zu %10.3f %10.2f %10.2f %13.2fx\n", names[op], sizes[z], bst, alg,
				       alg * f, alg * f / peer_bw_of[z]);
		}
	}
	fflush(stdout);
	spyre_comm_destroy(c);
	spyre_stream_destroy(s);
	spyre_device_close(d);
	_exit(0);
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
	spyre_comm_id_t id;
	pid_t pid[MAXR];
	int r, op, st_r, bad = 0;

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

		peer_bw_of[s] = peer_bw;
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

	printf("\nthe same, one card per process (%d processes, spyre_comm_init_rank; busbw vs the peer copy above)\n", n);
	printf("%-15s %10s %10s %10s %10s %14s\n", "op", "bytes", "time ms", "algbw GB/s",
	       "busbw GB/s", "busbw vs peer");
	if (spyre_comm_get_unique_id(&id))
		die("spyre_comm_get_unique_id");
	fflush(NULL);
	for (r = 0; r < n; r++) {
		pid[r] = fork();
		if (pid[r] < 0)
			die("fork");
		if (!pid[r])
			rank_main(r, &id, sizes, (int)(sizeof(sizes) / sizeof(sizes[0])), names);
	}
	for (r = 0; r < n; r++) {
		waitpid(pid[r], &st_r, 0);
		bad += !WIFEXITED(st_r) || WEXITSTATUS(st_r);
	}
	return bad ? 1 : 0;
}
