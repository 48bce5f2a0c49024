// SPDX-License-Identifier: MIT
/*
 * dma-bench: DMA through the whole stack, in the VM: spyre_memcpy() of
 * 256 MiB host to device and device to host (libspyre, spyre.ko, the card's
 * DMA engine), from pinned host memory (spyre_malloc_host(): one COPY, in
 * place) and from pageable memory (malloc(): staged by libspyre through its
 * 4 MiB pinned bounce buffer, a memcpy and a synchronous COPY per piece).
 * The best of REPS copies counts; the data is checked once.
 *
 * Functional mode: the baseline is a plain memcpy() of the same 256 MiB in
 * the same run (the emulated card moves data at the host's memcpy speed, so
 * the ratio is what the stack adds or saves). Timed mode (tools/vm/run
 * --timed, docs/timed-mode.md): the baseline is the modeled link,
 * dma-latency-ns + bytes / dma-mbps with the device's defaults (1 us, 50 GB/s
 * — assumptions for PCIe Gen5 x16); guest CPU work counts 1 ns per
 * instruction, so a staged copy pays for its memcpy.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "dma-bench"
#include "bench-vm.h"
#include "spyre.h"

#define SIZE		(256ull << 20)
#define REPS		3
/* The device's timed-mode defaults (qemu-device/spyre.c). */
#define LINK_MBPS	50000
#define LINK_LAT_NS	1000

/* Best time of REPS synchronous copies, in ms. */
static double best_copy(spyre_device_t *dev, uint64_t dst, uint64_t src, enum spyre_memcpy_kind kind)
{
	double best = 1e30, t;
	int r;

	for (r = 0; r < REPS; r++) {
		t = now_ms();
		if (spyre_memcpy(dev, dst, src, SIZE, kind))
			die("spyre_memcpy");
		t = now_ms() - t;
		if (t < best)
			best = t;
	}
	return best;
}

static double best_memcpy(void *dst, const void *src)
{
	double best = 1e30, t;
	int r;

	for (r = 0; r < REPS; r++) {
		t = now_ms();
		memcpy(dst, src, SIZE);
		__asm__ __volatile__("" : : "r"(dst) : "memory");
		t = now_ms() - t;
		if (t < best)
			best = t;
	}
	return best;
}

static double gbps(double ms)
{
	return (double)SIZE / (ms * 1e6);
}

int main(void)
{
	const int timed = timed_mode();
	const double link_ms = (LINK_LAT_NS + (double)SIZE * 1000 / LINK_MBPS) / 1e6;
	spyre_device_t *dev;
	spyre_dptr_t d;
	uint8_t *pinned, *pageable, *check;
	double ms[4], base;
	size_t i;
	static const char *const names[4] = { "H2D  pinned", "H2D  pageable", "D2H  pinned",
					       "D2H  pageable" };

	if (spyre_device_open(0, &dev))
		die("spyre_device_open");
	if (spyre_malloc(dev, SIZE, &d))
		die("spyre_malloc");
	if (spyre_malloc_host(dev, SIZE, (void **)&pinned))
		die("spyre_malloc_host");
	pageable = malloc(SIZE);
	check = malloc(SIZE);
	if (!pageable || !check) {
		fprintf(stderr, "dma-bench: out of memory\n");
		return 1;
	}
	for (i = 0; i < SIZE; i += 8)
		*(uint64_t *)(pageable + i) = i * 0x9e3779b97f4a7c15ull;
	memset(check, 0, SIZE);
	memcpy(pinned, pageable, SIZE);

	ms[0] = best_copy(dev, d, (uintptr_t)pinned, SPYRE_MEMCPY_H2D);
	ms[1] = best_copy(dev, d, (uintptr_t)pageable, SPYRE_MEMCPY_H2D);
	ms[2] = best_copy(dev, (uintptr_t)pinned, d, SPYRE_MEMCPY_D2H);
	ms[3] = best_copy(dev, (uintptr_t)check, d, SPYRE_MEMCPY_D2H);
	if (memcmp(check, pageable, SIZE) || memcmp(pinned, pageable, SIZE)) {
		fprintf(stderr, "dma-bench: the data did not survive the round trip\n");
		return 1;
	}
	base = best_memcpy(check, pageable);

	printf("spyre_memcpy of 256 MiB through libspyre, spyre.ko and the card (%s mode; best of %d)\n",
	       timed ? "timed" : "functional", REPS);
	if (timed)
		printf("baseline: the modeled link, %d ns + bytes / %d MB/s = %.3f ms (%.2f GB/s); "
		       "guest memcpy of 256 MiB %.3f ms (%.2f GB/s, 1 ns per instruction)\n",
		       LINK_LAT_NS, LINK_MBPS, link_ms, gbps(link_ms), base, gbps(base));
	else
		printf("baseline: memcpy() of 256 MiB in the same guest: %.3f ms (%.2f GB/s)\n", base,
		       gbps(base));
	printf("%-15s %10s %8s %12s\n", "copy", "ms", "GB/s", timed ? "vs link" : "vs memcpy");
	for (i = 0; i < 4; i++)
		printf("%-15s %10.3f %8.2f %11.2fx\n", names[i], ms[i], gbps(ms[i]),
		       (timed ? link_ms : base) / ms[i]);
	spyre_free_host(dev, pinned);
	spyre_free(dev, d);
	spyre_device_close(dev);
	free(pageable);
	free(check);
	return 0;
}
