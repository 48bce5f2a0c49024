// SPDX-License-Identifier: MIT
/*
 * Description: device memory is backed sparsely: a card with 128 GiB of
 * device memory costs QEMU almost nothing until it is touched, and QEMU's
 * resident memory then grows by about what the device wrote (here 256 MiB
 * at the top of the 128 GiB). Data written at the last stick of the 128 GiB
 * reads back, through COPY and through the BAR2 window moved to the top.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyre-dev.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static long rss_mib(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb / 1024;
}

static struct sdev D;
static const uint64_t top = 128 * GiB, touch = 256 * MiB;
static long before;

static void test_idle_card_is_small(void)
{
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_CAP_MEM_LO));
	TAP_EQ(32, sdev_rd(&D, SPYRE_REG_CAP_MEM_HI));
	before = rss_mib(D.qt.pid);
	tap_diag("QEMU RSS with an idle 128 GiB card: %ld MiB", before);
	TAP_CHECK(before > 0 && before < 1024, "idle RSS %ld MiB", before);
}

static void test_written_memory_costs_what_was_written(void)
{
	uint64_t h, i;
	long after;
	uint8_t p[64];

	/* Fill 256 MiB at the top from a 1 MiB host buffer, 1 MiB per COPY. */
	sdev_queue_init(&D, 0, 512, 0);
	h = sdev_alloc(&D, MiB, 4096);
	sdev_memset(&D, h, 0xa5, MiB);
	for (i = 0; i < touch / MiB; i++) {
		pkt_copy(p, i + 1, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, top - touch + i * MiB, MiB);
		sdev_push(&D, 0, p);
	}
	/* The very last stick gets a marker. */
	sdev_wr64(&D, h + MiB - 128, 0x1122334455667788ull);
	sdev_doorbell(&D, 0);
	TAP_EQ(0, sdev_wait(&D, 0, 60000));
	pkt_copy(p, 1000, 0, SPYRE_AS_HOST, h + MiB - 128, SPYRE_AS_DEVPHYS, top - 128, 128);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));

	after = rss_mib(D.qt.pid);
	tap_diag("after the device wrote 256 MiB: %ld MiB (+%ld)", after, after - before);
	TAP_CHECK(after - before >= 240 && after - before < 400,
		  "RSS grew by %ld MiB for 256 MiB touched", after - before);
}

/* Read the marker back through BAR2 moved to the last 256 MiB. */
static void test_top_through_the_window(void)
{
	sdev_wr(&D, SPYRE_REG_WINDOW_LO, (uint32_t)(top - 256 * MiB));
	sdev_wr(&D, SPYRE_REG_WINDOW_HI, (uint32_t)((top - 256 * MiB) >> 32));
	TAP_EQ(0x1122334455667788ull, sdev_rd64(&D, SDEV_BAR2 + 256 * MiB - 128));
	TAP_EQ(0xa5a5a5a5a5a5a5a5ull, sdev_rd64(&D, SDEV_BAR2));
}

static const struct tap_case cases[] = {
	{ "idle_card_is_small", test_idle_card_is_small },
	{ "written_memory_costs_what_was_written", test_written_memory_costs_what_was_written },
	{ "top_through_the_window", test_top_through_the_window },
};

int main(int argc, char **argv)
{
	return SDEV_RUN(&D, "mem-size=128G", 64, NULL, cases, argc, argv);
}
