// SPDX-License-Identifier: MIT
/*
 * p2p-bench: peer-to-peer bandwidth between two cards, in the VM (two cards
 * below one PCIe switch, tools/vm/run --devices 2): spyre_memcpy_peer() of
 * 64 MiB card 0 -> card 1 (card 1 pulls through card 0's peer BAR) and
 * card 1 -> card 0 (card 1 pushes), against a device-to-device copy within
 * card 0 (spyre_memcpy D2D) and against the path without P2P, D2H then H2D
 * through pinned host memory. The figures are ratios to the D2D copy; the
 * best of REPS counts; the data is checked once per direction.
 *
 * Functional mode: the emulated cards move bytes at the host's memcpy
 * speed, so the ratios are what the path costs in the emulator. Timed mode
 * (--timed, docs/timed-mode.md): a peer copy is charged to the copying
 * card as host traffic (dma-mbps, 50 GB/s by default) and D2D as
 * mem-copy-mbps (75 GB/s): the modeled ratio is their quotient.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "p2p-bench"
#include "bench-vm.h"
#include "spyre.h"

#define SIZE	(64ull << 20)
#define REPS	3

enum path { D2D, PEER_01, PEER_10, STAGED_01, NPATHS };

struct ctx {
	spyre_device_t *dev[2];
	spyre_dptr_t a0, b0, a1;	/* 64 MiB each: two on card 0, one on card 1 */
	uint8_t *pinned;		/* pinned on card 0 */
	uint8_t *pinned1;		/* pinned on card 1 */
};

static void run(struct ctx *c, enum path p)
{
	int ret = 0;

	switch (p) {
	case D2D:
		ret = spyre_memcpy(c->dev[0], c->b0, c->a0, SIZE, SPYRE_MEMCPY_D2D);
		break;
	case PEER_01:
		ret = spyre_memcpy_peer(c->dev[1], c->a1, c->dev[0], c->a0, SIZE);
		break;
	case PEER_10:
		ret = spyre_memcpy_peer(c->dev[0], c->b0, c->dev[1], c->a1, SIZE);
		break;
	case STAGED_01:
		/* Without P2P: through the host, both copies pinned (no staging buffer). */
		ret = spyre_memcpy(c->dev[0], (uintptr_t)c->pinned, c->a0, SIZE, SPYRE_MEMCPY_D2H);
		if (!ret) {
			memcpy(c->pinned1, c->pinned, SIZE);
			ret = spyre_memcpy(c->dev[1], c->a1, (uintptr_t)c->pinned1, SIZE,
					   SPYRE_MEMCPY_H2D);
		}
		break;
	default:
		break;
	}
	if (ret)
		die("copy");
}

static double best(struct ctx *c, enum path p)
{
	double b = 1e30, t;
	int r;

	for (r = 0; r < REPS; r++) {
		t = now_ms();
		run(c, p);
		t = now_ms() - t;
		if (t < b)
			b = t;
	}
	return b;
}

/* @dev's @d holds @want. */
static void check(spyre_device_t *dev, spyre_dptr_t d, const uint8_t *want, uint8_t *buf,
		  const char *what)
{
	if (spyre_memcpy(dev, (uintptr_t)buf, d, SIZE, SPYRE_MEMCPY_D2H))
		die("read back");
	if (memcmp(buf, want, SIZE)) {
		fprintf(stderr, "p2p-bench: %s: the data differs\n", what);
		exit(1);
	}
}

int main(void)
{
	static const char *const names[NPATHS] = {
		"D2D within card 0", "P2P card 0 -> 1 (pull)", "P2P card 1 -> 0 (push)",
		"via host (D2H+memcpy+H2D)",
	};
	const int timed = timed_mode();
	struct ctx c;
	uint8_t *data, *buf;
	double ms[NPATHS];
	int can01 = 0, can10 = 0, p;
	size_t i;

	if (spyre_device_count() < 2) {
		fprintf(stderr, "p2p-bench: two cards needed (tools/vm/run --devices 2)\n");
		return 1;
	}
	if (spyre_device_open(0, &c.dev[0]) || spyre_device_open(1, &c.dev[1]))
		die("spyre_device_open");
	if (spyre_device_can_access_peer(c.dev[1], c.dev[0], &can01) ||
	    spyre_device_can_access_peer(c.dev[0], c.dev[1], &can10))
		die("spyre_device_can_access_peer");
	if (!can01 && !can10) {
		fprintf(stderr, "p2p-bench: neither card reaches the other (tools/vm/run --flat?)\n");
		return 1;
	}
	if (spyre_malloc(c.dev[0], SIZE, &c.a0) || spyre_malloc(c.dev[0], SIZE, &c.b0) ||
	    spyre_malloc(c.dev[1], SIZE, &c.a1))
		die("spyre_malloc");
	if (spyre_malloc_host(c.dev[0], SIZE, (void **)&c.pinned) ||
	    spyre_malloc_host(c.dev[1], SIZE, (void **)&c.pinned1))
		die("spyre_malloc_host");
	data = malloc(SIZE);
	buf = malloc(SIZE);
	if (!data || !buf) {
		fprintf(stderr, "p2p-bench: out of memory\n");
		return 1;
	}
	for (i = 0; i < SIZE; i += 8)
		*(uint64_t *)(data + i) = i * 0x9e3779b97f4a7c15ull;
	if (spyre_memcpy(c.dev[0], c.a0, (uintptr_t)data, SIZE, SPYRE_MEMCPY_H2D))
		die("fill");

	for (p = 0; p < NPATHS; p++)
		ms[p] = best(&c, (enum path)p);
	/* After the last path card 1 holds card 0's bytes; one more pull and push checked. */
	run(&c, PEER_01);
	check(c.dev[1], c.a1, data, buf, "card 0 -> 1");
	run(&c, PEER_10);
	check(c.dev[0], c.b0, data, buf, "card 1 -> 0");

	printf("peer-to-peer copies of 64 MiB between two cards below one PCIe switch (%s mode; "
	       "best of %d)\n", timed ? "timed" : "functional", REPS);
	printf("access: card 1 -> card 0's memory %s, card 0 -> card 1's memory %s\n",
	       can01 ? "yes" : "no", can10 ? "yes" : "no");
	printf("%-28s %10s %8s %10s\n", "copy", "ms", "GB/s", "vs D2D");
	for (p = 0; p < NPATHS; p++)
		printf("%-28s %10.3f %8.2f %9.2fx\n", names[p], ms[p], (double)SIZE / (ms[p] * 1e6),
		       ms[D2D] / ms[p]);
	if (timed)
		printf("modeled: P2P is host traffic for the copying card (dma-mbps 50000) and D2D "
		       "is mem-copy-mbps 75000: expected ratio 0.67x\n");
	spyre_free_host(c.dev[0], c.pinned);
	spyre_free_host(c.dev[1], c.pinned1);
	spyre_free(c.dev[0], c.a0);
	spyre_free(c.dev[0], c.b0);
	spyre_free(c.dev[1], c.a1);
	spyre_device_close(c.dev[1]);
	spyre_device_close(c.dev[0]);
	free(data);
	free(buf);
	return 0;
}
