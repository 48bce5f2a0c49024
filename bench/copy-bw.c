// SPDX-License-Identifier: MIT
/*
 * copy-bw: COPY bandwidth of the emulated spyre device, host->device (H2D)
 * and device->device (D2D), for 4 KiB .. 256 MiB, each printed as a ratio to
 * plain memcpy() of the same sizes measured in the same run (the machines
 * are noisy, so only same-run ratios mean anything).
 *
 * The device is driven through qtest (no guest kernel): for each size a batch
 * of COPY packets moving >= 64 MiB in total is submitted with one doorbell,
 * and the time runs from the doorbell to the last completion word. Each
 * measurement runs once to warm up (first touch of device memory) and is then
 * repeated; the best of 3 counts.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyre-dev.h"

#define MiB (1ull << 20)

static struct sdev D;

static double device_gbps(int h2d, uint64_t size, uint64_t src_host)
{
	uint64_t batch = (64 * MiB + size - 1) / size, i, t0, t1, seq = 0;
	double best = 0;
	uint8_t p[64];
	int rep;

	if (batch > 1000)
		batch = 1000;
	for (rep = 0; rep < 4; rep++) {
		for (i = 0; i < batch; i++) {
			seq++;
			if (h2d)
				pkt_copy(p, seq, 0, SPYRE_AS_HOST, src_host, SPYRE_AS_DEVPHYS,
					 (i % 2) * 256 * MiB, size);
			else
				pkt_copy(p, seq, 0, SPYRE_AS_DEVPHYS, 0, SPYRE_AS_DEVPHYS,
					 512 * MiB, size);
			sdev_push(&D, 0, p);
		}
		t0 = now_ns();
		sdev_doorbell(&D, 0);
		while (sdev_rd64(&D, D.q[0].compl) != seq)
			;
		t1 = now_ns();
		if (sdev_qrd(&D, 0, SPYRE_Q_STATUS) & SPYRE_QSTAT_ERROR) {
			fprintf(stderr, "copy-bw: device error %u\n", sdev_qrd(&D, 0, SPYRE_Q_ERROR));
			exit(1);
		}
		if (rep > 0 && (double)(size * batch) / (double)(t1 - t0) > best)
			best = (double)(size * batch) / (double)(t1 - t0);
	}
	return best;
}

static double memcpy_gbps(uint64_t size, uint8_t *a, uint8_t *b)
{
	uint64_t batch = (64 * MiB + size - 1) / size, i, t0, t1;
	double best = 0;
	int rep;

	if (batch > 1000)
		batch = 1000;
	for (rep = 0; rep < 4; rep++) {
		t0 = now_ns();
		for (i = 0; i < batch; i++) {
			memcpy(b, a, size);
			__asm__ volatile("" ::: "memory");
		}
		t1 = now_ns();
		if (rep > 0 && (double)(size * batch) / (double)(t1 - t0) > best)
			best = (double)(size * batch) / (double)(t1 - t0);
	}
	return best;
}

int main(void)
{
	static const uint64_t sizes[] = {
		4096, 64 * 1024, 1 * MiB, 16 * MiB, 256 * MiB,
	};
	uint8_t *a = malloc(256 * MiB), *b = malloc(256 * MiB);
	uint64_t host;
	unsigned i;

	if (!a || !b)
		return 1;
	memset(a, 1, 256 * MiB);
	memset(b, 2, 256 * MiB);
	if (sdev_start(&D, "mem-size=1G", 1024))
		return 1;
	host = sdev_alloc(&D, 256 * MiB, 4096);
	sdev_queue_init(&D, 0, 1024, 0);

	printf("%-10s %10s %10s %12s %11s %11s\n", "size", "H2D GB/s", "D2D GB/s",
	       "memcpy GB/s", "H2D/memcpy", "D2D/memcpy");
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		double m = memcpy_gbps(sizes[i], a, b);
		double h = device_gbps(1, sizes[i], host);
		double d = device_gbps(0, sizes[i], host);
		char label[32];

		if (sizes[i] >= MiB)
			snprintf(label, sizeof(label), "%llu MiB", (unsigned long long)(sizes[i] / MiB));
		else
			snprintf(label, sizeof(label), "%llu KiB", (unsigned long long)(sizes[i] / 1024));
		printf("%-10s %10.2f %10.2f %12.2f %11.2f %11.2f\n", label, h, d, m, h / m, d / m);
	}
	sdev_stop(&D);
	free(a);
	free(b);
	return 0;
}
