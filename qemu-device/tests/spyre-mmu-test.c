// SPDX-License-Identifier: MIT
/*
 * Description: the spyre device MMU through qtest: per-context page tables
 * map scattered host pages and device memory (4 KiB and 2 MiB pages) into a
 * 128 GiB virtual address space; COPY and semaphores translate through them;
 * every fault kind (not present, permission, bad context, out of range,
 * device memory beyond mem-size) fails only the faulting packet with a
 * precise fault record; contexts are isolated; invalidation takes effect.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyre-dev.h"

#define MiB (1ull << 20)
#define RW (SPYRE_PTE_READ | SPYRE_PTE_WRITE)

static struct sdev D;

static void expect_fault(unsigned q, uint64_t seq, uint64_t addr, unsigned ctx,
			 unsigned access, unsigned source, unsigned cause)
{
	uint32_t info;
	uint64_t fa;

	TAP_EQ(-1, sdev_wait(&D, q, 2000));
	TAP_EQ(SPYRE_ERR_FAULT, sdev_qrd(&D, q, SPYRE_Q_ERROR));
	TAP_EQ(seq, sdev_qrd(&D, q, SPYRE_Q_ERR_SEQ_LO));
	fa = sdev_qrd(&D, q, SPYRE_Q_FAULT_LO) | (uint64_t)sdev_qrd(&D, q, SPYRE_Q_FAULT_HI) << 32;
	TAP_EQ(addr, fa);
	info = sdev_qrd(&D, q, SPYRE_Q_FAULT_INFO);
	TAP_EQ(ctx, SPYRE_FAULT_CTX(info));
	TAP_EQ(access, SPYRE_FAULT_ACCESS(info));
	TAP_EQ(source, SPYRE_FAULT_SOURCE(info));
	TAP_EQ(cause, SPYRE_FAULT_CAUSE(info));
	sdev_queue_skip(&D, q);
	TAP_EQ(0, sdev_wait(&D, q, 2000));
}

static void test_translate_copy(void)
{
	/* 4 host pages, deliberately out of order, mapped at VA 16 GiB + 0..4 pages. */
	const uint64_t va_host = 16ull << 30, va_dev = 1ull << 30;
	uint8_t in[4 * 4096], out[4 * 4096], p[64];
	uint64_t pg[4], back = sdev_alloc(&D, sizeof(out), 4096);
	int i;

	for (i = 0; i < 4; i++)
		pg[i] = sdev_alloc(&D, 4096, 4096);
	for (i = 0; i < (int)sizeof(in); i++)
		in[i] = (uint8_t)(i * 7 + i / 4096);
	for (i = 0; i < 4; i++) {
		sdev_map(&D, 0, va_host + 4096ull * i, pg[3 - i], RW);
		sdev_memwrite(&D, pg[3 - i], in + 4096 * i, 4096);
	}
	/* A 2 MiB device-memory page at VA 1 GiB -> device offset 6 MiB. */
	sdev_map(&D, 0, va_dev, 6 * MiB, RW | SPYRE_PTE_DEVMEM | SPYRE_PTE_LEAF);

	pkt_copy(p, 1, 0, SPYRE_AS_VIRT, va_host, SPYRE_AS_VIRT, va_dev + 128, sizeof(in));
	sdev_submit(&D, 0, p);
	pkt_copy(p, 2, 0, SPYRE_AS_DEVPHYS, 6 * MiB + 128, SPYRE_AS_HOST, back, sizeof(in));
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	sdev_memread(&D, back, out, sizeof(out));
	TAP_CHECK(!memcmp(in, out, sizeof(in)), "VIRT copy through scattered pages differs");

	/* Semaphores translate too: SIGNAL to a VA in device memory. */
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 3, 0, SPYRE_AS_VIRT, va_dev + 0x1000, 99);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	TAP_EQ(99, sdev_rd64(&D, SDEV_BAR2 + 6 * MiB + 0x1000));
}

static void test_faults(void)
{
	const uint64_t ro = 32ull << 30, dev_oob = 2ull << 30;
	uint8_t p[64];
	uint64_t pg = sdev_alloc(&D, 4096, 4096);

	sdev_map(&D, 0, ro, pg, SPYRE_PTE_READ);
	/* mem-size is 1 GiB: a device PTE at 1 GiB + 2 MiB is out of range */
	sdev_map(&D, 0, dev_oob, (1ull << 30) + 2 * MiB, RW | SPYRE_PTE_DEVMEM | SPYRE_PTE_LEAF);

	/* Not present: unmapped source. */
	pkt_copy(p, 10, 0, SPYRE_AS_VIRT, 0x7000, SPYRE_AS_DEVPHYS, 0, 128);
	sdev_submit(&D, 1, p);
	expect_fault(1, 10, 0x7000, 0, SPYRE_ACCESS_READ, SPYRE_SOURCE_COPY_SRC,
		     SPYRE_MMU_FAULT_NOT_PRESENT);
	/* Permission: writing a read-only page; the fault names the exact VA. */
	pkt_copy(p, 11, 0, SPYRE_AS_DEVPHYS, 0, SPYRE_AS_VIRT, ro + 256, 128);
	sdev_submit(&D, 1, p);
	expect_fault(1, 11, ro + 256, 0, SPYRE_ACCESS_WRITE, SPYRE_SOURCE_COPY_DST,
		     SPYRE_MMU_FAULT_PERMISSION);
	/* Reading it is fine. */
	pkt_copy(p, 12, 0, SPYRE_AS_VIRT, ro, SPYRE_AS_DEVPHYS, 0, 128);
	sdev_submit(&D, 1, p);
	TAP_EQ(0, sdev_wait(&D, 1, 2000));
	/* Context beyond MMU_CTX_COUNT (2). */
	pkt_copy(p, 13, 5, SPYRE_AS_VIRT, ro, SPYRE_AS_DEVPHYS, 0, 128);
	sdev_submit(&D, 1, p);
	expect_fault(1, 13, ro, 5, SPYRE_ACCESS_READ, SPYRE_SOURCE_COPY_SRC, SPYRE_MMU_FAULT_BAD_CTX);
	/* VA beyond 128 GiB. */
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 14, 0, SPYRE_AS_VIRT, 1ull << 37, 1);
	sdev_submit(&D, 1, p);
	expect_fault(1, 14, 1ull << 37, 0, SPYRE_ACCESS_WRITE, SPYRE_SOURCE_SEMAPHORE,
		     SPYRE_MMU_FAULT_RANGE);
	/* A device PTE beyond mem-size. */
	pkt_copy(p, 15, 0, SPYRE_AS_VIRT, dev_oob, SPYRE_AS_DEVPHYS, 0, 128);
	sdev_submit(&D, 1, p);
	expect_fault(1, 15, dev_oob, 0, SPYRE_ACCESS_READ, SPYRE_SOURCE_COPY_SRC,
		     SPYRE_MMU_FAULT_RANGE);
	/* DEVPHYS beyond mem-size. */
	pkt_copy(p, 16, 0, SPYRE_AS_DEVPHYS, 1ull << 30, SPYRE_AS_DEVPHYS, 0, 128);
	sdev_submit(&D, 1, p);
	expect_fault(1, 16, 1ull << 30, 0, SPYRE_ACCESS_READ, SPYRE_SOURCE_COPY_SRC,
		     SPYRE_MMU_FAULT_RANGE);
	/* A copy running off the end of a mapping faults at the first unmapped byte. */
	pkt_copy(p, 17, 0, SPYRE_AS_VIRT, ro, SPYRE_AS_DEVPHYS, 0, 8192);
	sdev_submit(&D, 1, p);
	expect_fault(1, 17, ro + 4096, 0, SPYRE_ACCESS_READ, SPYRE_SOURCE_COPY_SRC,
		     SPYRE_MMU_FAULT_NOT_PRESENT);
}

static void test_isolation_and_invalidate(void)
{
	const uint64_t va = 48ull << 30;
	uint64_t a = sdev_alloc(&D, 4096, 4096), b = sdev_alloc(&D, 4096, 4096);
	uint8_t p[64];

	/* Context 0 maps va; context 1 does not: only context 1's packet faults. */
	sdev_map(&D, 0, va, a, RW);
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 20, 0, SPYRE_AS_VIRT, va, 7);
	sdev_submit(&D, 0, p);
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 21, 1, SPYRE_AS_VIRT, va, 8);
	sdev_submit(&D, 2, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	expect_fault(2, 21, va, 1, SPYRE_ACCESS_WRITE, SPYRE_SOURCE_SEMAPHORE,
		     SPYRE_MMU_FAULT_NOT_PRESENT);
	TAP_EQ(7, sdev_rd64(&D, a));

	/* Remap va to b; after MMU_INVALIDATE the device uses the new page. */
	sdev_map(&D, 0, va, b, RW);
	sdev_wr(&D, SPYRE_REG_MMU_INVALIDATE, 1);
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 22, 0, SPYRE_AS_VIRT, va, 9);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	TAP_EQ(9, sdev_rd64(&D, b));
	TAP_EQ(7, sdev_rd64(&D, a));

	/* Unmapping (invalid context entry) takes effect after invalidation too. */
	sdev_ctx_set(&D, 0, false);
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 23, 0, SPYRE_AS_VIRT, va, 10);
	sdev_submit(&D, 0, p);
	expect_fault(0, 23, va, 0, SPYRE_ACCESS_WRITE, SPYRE_SOURCE_SEMAPHORE,
		     SPYRE_MMU_FAULT_BAD_CTX);
	TAP_EQ(9, sdev_rd64(&D, b));
}

static const struct tap_case cases[] = {
	{ "translate_copy", test_translate_copy },
	{ "faults", test_faults },
	{ "isolation_and_invalidate", test_isolation_and_invalidate },
};

/* Two contexts, three queues. */
static void setup(void)
{
	sdev_mmu_init(&D, 2);
	sdev_queue_init(&D, 0, 16, 0);
	sdev_queue_init(&D, 1, 16, 0);
	sdev_queue_init(&D, 2, 16, 0);
}

int main(int argc, char **argv)
{
	return SDEV_RUN(&D, "", 128, setup, cases, argc, argv);
}
