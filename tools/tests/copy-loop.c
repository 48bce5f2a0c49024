// SPDX-License-Identifier: MIT
/*
 * spyre-copy-loop - a copy workload that checks every byte, for the live
 * migration test (tools/vm/migrate, selftests/guest/migrate-workload): on
 * card 0, STREAMS streams each move a buffer of patterned data host ->
 * card -> card -> host (H2D, D2D, D2H: three jobs a stream) every round,
 * with a pattern new each round. Rounds overlap: round r is submitted before
 * round r - 1 is checked (two sets of buffers, an event per stream and
 * round), so the card has work queued or running while the CPU fills and
 * checks, which is when a migration's switch-over usually comes. Every
 * destination byte of every round is compared with its pattern. Rounds go
 * on for SECONDS of guest time.
 *
 * Usage: spyre-copy-loop SECONDS [STREAMS [BYTES]]   (defaults 4 streams, 1 MiB)
 * Prints "spyre-copy-loop: looping" after the first round passed (a
 * migration may start then), and at the end the rounds, jobs and bytes
 * checked and the longest round (a migration's switch-over shows there).
 * Exit status: 0 every byte matched, 1 a mismatch or an error (named).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spyre.h"

#define MAX_STREAMS 16

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint8_t pattern(uint64_t round, unsigned s, size_t i)
{
	uint64_t x = (round * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)s << 40) ^ (i / 8);

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	return (uint8_t)(x >> (8 * (i % 8)));
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "spyre-copy-loop: %s: %s (%s)\n", what, spyre_strerror(err),
		spyre_last_error());
	return 1;
}

/* Buffers of one of the two rounds in flight. */
struct set {
	spyre_dptr_t d1[MAX_STREAMS], d2[MAX_STREAMS];
	uint8_t *src[MAX_STREAMS], *dst[MAX_STREAMS];
	spyre_event_t *done[MAX_STREAMS];
};

static spyre_stream_t *st[MAX_STREAMS];
static unsigned streams = 4;
static size_t bytes = 1 << 20;

static int submit(struct set *b, uint64_t round)
{
	unsigned s;
	size_t i;
	int ret;

	for (s = 0; s < streams; s++) {
		for (i = 0; i < bytes; i++)
			b->src[s][i] = pattern(round, s, i);
		memset(b->dst[s], 0, bytes);
		if ((ret = spyre_memcpy_async(st[s], b->d1[s], (uintptr_t)b->src[s], bytes,
					      SPYRE_MEMCPY_H2D)) ||
		    (ret = spyre_memcpy_async(st[s], b->d2[s], b->d1[s], bytes, SPYRE_MEMCPY_D2D)) ||
		    (ret = spyre_memcpy_async(st[s], (uintptr_t)b->dst[s], b->d2[s], bytes,
					      SPYRE_MEMCPY_D2H)) ||
		    (ret = spyre_event_record(b->done[s], st[s])))
			return fail("submit", ret);
	}
	return 0;
}

static int check(struct set *b, uint64_t round)
{
	unsigned s;
	size_t i;
	int ret;

	for (s = 0; s < streams; s++) {
		ret = spyre_event_synchronize(b->done[s]);
		if (ret)
			return fail("synchronize", ret);
		for (i = 0; i < bytes; i++) {
			if (b->dst[s][i] != pattern(round, s, i)) {
				fprintf(stderr, "spyre-copy-loop: round %llu stream %u byte %zu: "
					"0x%02x, expected 0x%02x\n", (unsigned long long)round, s, i,
					b->dst[s][i], pattern(round, s, i));
				return 1;
			}
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct set set[2];
	double seconds, start, t0, longest = 0;
	uint64_t round, longest_round = 0;
	spyre_device_t *dev;
	unsigned s, k;
	int ret;

	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: spyre-copy-loop SECONDS [STREAMS [BYTES]]\n");
		return 1;
	}
	seconds = strtod(argv[1], NULL);
	if (argc > 2)
		streams = (unsigned)strtoul(argv[2], NULL, 0);
	if (argc > 3)
		bytes = strtoull(argv[3], NULL, 0);
	if (seconds <= 0 || !streams || streams > MAX_STREAMS || !bytes || bytes % 128) {
		fprintf(stderr, "spyre-copy-loop: SECONDS > 0, STREAMS 1..%d, BYTES a multiple of 128\n",
			MAX_STREAMS);
		return 1;
	}
	ret = spyre_device_open(0, &dev);
	if (ret)
		return fail("open card 0", ret);
	for (s = 0; s < streams; s++) {
		ret = spyre_stream_create(dev, 0, &st[s]);
		for (k = 0; k < 2 && !ret; k++) {
			struct set *b = &set[k];

			if ((ret = spyre_malloc(dev, bytes, &b->d1[s])) ||
			    (ret = spyre_malloc(dev, bytes, &b->d2[s])) ||
			    (ret = spyre_malloc_host(dev, bytes, (void **)&b->src[s])) ||
			    (ret = spyre_malloc_host(dev, bytes, (void **)&b->dst[s])))
				break;
			ret = spyre_event_create(dev, &b->done[s]);
		}
		if (ret)
			return fail("set-up", ret);
	}

	/* Round r is submitted, then round r - 1 checked: two rounds in flight. */
	start = now_s();
	if (submit(&set[0], 0))
		return 1;
	for (round = 1;; round++) {
		t0 = now_s();
		if (submit(&set[round % 2], round) || check(&set[(round - 1) % 2], round - 1))
			return 1;
		if (now_s() - t0 > longest) {
			longest = now_s() - t0;
			longest_round = round;
		}
		if (round == 1) {
			printf("spyre-copy-loop: looping\n");
			fflush(stdout);
		}
		if (now_s() - start >= seconds)
			break;
	}
	if (check(&set[round % 2], round))
		return 1;
	round++;
	printf("spyre-copy-loop: %llu rounds, %llu jobs (%u streams x 3), %llu bytes checked, "
	       "0 mismatches; longest round %.0f ms (round %llu)\n", (unsigned long long)round,
	       (unsigned long long)round * streams * 3, streams,
	       (unsigned long long)(round * streams * bytes), longest * 1e3,
	       (unsigned long long)longest_round);
	for (k = 0; k < 2; k++) {
		for (s = 0; s < streams; s++) {
			spyre_event_destroy(set[k].done[s]);
			spyre_free_host(dev, set[k].src[s]);
			spyre_free_host(dev, set[k].dst[s]);
			spyre_free(dev, set[k].d1[s]);
			spyre_free(dev, set[k].d2[s]);
		}
	}
	for (s = 0; s < streams; s++)
		spyre_stream_destroy(st[s]);
	spyre_device_close(dev);
	return 0;
}
