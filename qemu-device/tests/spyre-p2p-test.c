// SPDX-License-Identifier: MIT
/*
 * Description: peer-to-peer between two spyre cards through qtest: card B's
 * BAR4 (the peer BAR) shows all its device memory, so card A's COPY with a
 * host bus address inside it (a HOST operand, or an MMU leaf without DEVMEM)
 * reads and writes B's memory through the PCI address space. Checked: the
 * BAR's size and type, the peer-bar property (on, off, auto), exact bytes in
 * both directions at odd offsets, through scattered MMU pages, and that every
 * failure is a DMA error of the packet that made it, never an abort: an
 * address past B's mem-size, B's memory decoding off, B after a device reset
 * and after a function-level reset (BAR unassigned until mapped again).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyre-dev.h"

#define MiB (1ull << 20)
#define RW (SPYRE_PTE_READ | SPYRE_PTE_WRITE)

#define PEER_DEV	5		/* card B: -device spyre,addr=05.0 */
#define PEER_BAR0	0xe2000000u
#define PEER_BAR4	0x4000000000ull	/* 256 GiB, in q35's PCI address space */
#define PEER_MEM	(192 * MiB)	/* B's mem-size: BAR4 is 256 MiB */

static struct sdev D;		/* card A, driven as in every device test */

static void peer_map(void)
{
	qpci_cfg_writel(&D.qt, PEER_DEV, 0x10 + 4 * SPYRE_BAR_PEER, (uint32_t)PEER_BAR4);
	qpci_cfg_writel(&D.qt, PEER_DEV, 0x14 + 4 * SPYRE_BAR_PEER, (uint32_t)(PEER_BAR4 >> 32));
	qpci_map_bar32(&D.qt, PEER_DEV, 0, PEER_BAR0);	/* also enables memory decoding */
}

static void pattern(uint8_t *buf, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(i * 131 + seed + i / 251);
}

static void expect_dma_error(unsigned q, uint64_t seq, uint64_t addr, unsigned access,
			     unsigned source)
{
	uint32_t info;
	uint64_t fa;

	TAP_EQ(-1, sdev_wait(&D, q, 2000));
	TAP_EQ(SPYRE_ERR_DMA, sdev_qrd(&D, q, SPYRE_Q_ERROR));
	TAP_EQ(seq, sdev_qrd(&D, q, SPYRE_Q_ERR_SEQ_LO));
	fa = sdev_qrd(&D, q, SPYRE_Q_FAULT_LO) | (uint64_t)sdev_qrd(&D, q, SPYRE_Q_FAULT_HI) << 32;
	TAP_EQ(addr, fa);
	info = sdev_qrd(&D, q, SPYRE_Q_FAULT_INFO);
	TAP_EQ(access, SPYRE_FAULT_ACCESS(info));
	TAP_EQ(source, SPYRE_FAULT_SOURCE(info));
	TAP_EQ(SPYRE_MMU_FAULT_DMA, SPYRE_FAULT_CAUSE(info));
	sdev_queue_skip(&D, q);
	TAP_EQ(0, sdev_wait(&D, q, 2000));
}

/* Size probe of a 64-bit BAR: the size, or 0 when the BAR is not implemented. */
static uint64_t bar64_size(struct qtest *qt, int dev, int bar, uint32_t *type)
{
	int off = 0x10 + 4 * bar;
	uint32_t lo = qpci_cfg_readl(qt, dev, off), hi = qpci_cfg_readl(qt, dev, off + 4);
	uint64_t v;

	qpci_cfg_writel(qt, dev, off, 0xffffffff);
	qpci_cfg_writel(qt, dev, off + 4, 0xffffffff);
	v = qpci_cfg_readl(qt, dev, off) | (uint64_t)qpci_cfg_readl(qt, dev, off + 4) << 32;
	qpci_cfg_writel(qt, dev, off, lo);
	qpci_cfg_writel(qt, dev, off + 4, hi);
	*type = (uint32_t)v & 0xf;
	v &= ~0xfull;
	return v ? ~v + 1 : 0;
}

static void test_peer_bar(void)
{
	uint32_t type = 0;

	TAP_EQ(256 * MiB, bar64_size(&D.qt, PEER_DEV, SPYRE_BAR_PEER, &type));
	TAP_EQ(0xc, type);	/* 64-bit, prefetchable */
	TAP_EQ(256 * MiB, bar64_size(&D.qt, SDEV_PCI_DEV, SPYRE_BAR_PEER, &type));
	TAP_CHECK(qtest_readl(&D.qt, PEER_BAR0 + SPYRE_REG_CAP_FEATURES) & SPYRE_FEAT_PEER_BAR,
		  "card B does not report SPYRE_FEAT_PEER_BAR");
	/* The CPU sees B's memory through it, at the device memory offset. */
	qtest_writeq(&D.qt, PEER_BAR4 + 5 * MiB, 0x1122334455667788ull);
	TAP_EQ(0x1122334455667788ull, qtest_readq(&D.qt, PEER_BAR4 + 5 * MiB));
}

/* peer-bar: auto up to 8 GiB, on and off by request. */
static void peer_bar_prop(const char *props, uint64_t size)
{
	struct qtest qt;
	char extra[128];
	uint32_t type;

	snprintf(extra, sizeof(extra), "-device spyre,addr=04.0,%s", props);
	if (!TAP_CHECK(qtest_start(&qt, extra) == 0, "QEMU with -device spyre,%s did not start", props))
		return;
	TAP_CHECK(bar64_size(&qt, 4, SPYRE_BAR_PEER, &type) == size,
		  "%s: peer BAR of 0x%llx bytes, expected 0x%llx", props,
		  (unsigned long long)bar64_size(&qt, 4, SPYRE_BAR_PEER, &type),
		  (unsigned long long)size);
	qpci_map_bar32(&qt, 4, 0, 0xe0000000u);
	TAP_EQ(size ? SPYRE_FEAT_PEER_BAR : 0,
	       qtest_readl(&qt, 0xe0000000u + SPYRE_REG_CAP_FEATURES) & SPYRE_FEAT_PEER_BAR);
	qtest_quit(&qt);
}

static void test_peer_bar_property(void)
{
	peer_bar_prop("mem-size=6G", 8ull << 30);
	peer_bar_prop("mem-size=16G", 0);
	peer_bar_prop("mem-size=16G,peer-bar=on", 16ull << 30);
	peer_bar_prop("mem-size=1G,peer-bar=off", 0);
}

/* A's device memory to B's: a DEVPHYS source, a HOST destination in B's BAR4. */
static void test_copy_to_peer(void)
{
	const uint64_t n = 64 * 1024 + 384, dst = 1 * MiB + 128;
	uint8_t *in = malloc(n), *out = malloc(n + 256), p[64];
	uint64_t src = sdev_alloc(&D, n, 4096);

	pattern(in, n, 1);
	sdev_memwrite(&D, src, in, n);
	qtest_memset(&D.qt, PEER_BAR4 + dst - 128, 0xee, n + 256);
	pkt_copy(p, 1, 0, SPYRE_AS_HOST, src, SPYRE_AS_DEVPHYS, 4096, n);
	sdev_submit(&D, 0, p);
	pkt_copy(p, 2, 0, SPYRE_AS_DEVPHYS, 4096, SPYRE_AS_HOST, PEER_BAR4 + dst, n);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 5000));
	qtest_memread(&D.qt, PEER_BAR4 + dst - 128, out, n + 256);
	TAP_CHECK(!memcmp(in, out + 128, n), "bytes in B differ from A's");
	TAP_EQ(0xee, out[127]);
	TAP_EQ(0xee, out[n + 128]);
	free(in);
	free(out);
}

/* B's memory to A's and back to the host: a HOST source in B's BAR4. */
static void test_copy_from_peer(void)
{
	const uint64_t n = 3 * 4096 + 128, src = 7 * MiB + 256;
	uint8_t *in = malloc(n), *out = malloc(n), p[64];
	uint64_t back = sdev_alloc(&D, n, 4096);

	pattern(in, n, 2);
	qtest_memwrite(&D.qt, PEER_BAR4 + src, in, n);
	pkt_copy(p, 3, 0, SPYRE_AS_HOST, PEER_BAR4 + src, SPYRE_AS_DEVPHYS, 2 * MiB + 128, n);
	sdev_submit(&D, 0, p);
	pkt_copy(p, 4, 0, SPYRE_AS_DEVPHYS, 2 * MiB + 128, SPYRE_AS_HOST, back, n);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 5000));
	sdev_memread(&D, back, out, n);
	TAP_CHECK(!memcmp(in, out, n), "bytes read from B differ");
	free(in);
	free(out);
}

/*
 * What an importing driver does: A's MMU maps VA pages (out of order) to
 * B's BAR4 as host bus addresses; a VIRT COPY lands in B's memory.
 */
static void test_mmu_to_peer(void)
{
	const uint64_t va = 8ull << 30, n = 4 * 4096;
	uint8_t in[4 * 4096], out[4 * 4096], p[64];
	uint64_t src = sdev_alloc(&D, n, 4096);
	int i;

	for (i = 0; i < 4; i++)
		sdev_map(&D, 0, va + 4096ull * i, PEER_BAR4 + 16 * MiB + 4096ull * (3 - i), RW);
	pattern(in, n, 3);
	sdev_memwrite(&D, src, in, n);
	pkt_copy(p, 5, 0, SPYRE_AS_HOST, src, SPYRE_AS_DEVPHYS, 0, n);
	sdev_submit(&D, 0, p);
	pkt_copy(p, 6, 0, SPYRE_AS_DEVPHYS, 0, SPYRE_AS_VIRT, va, n);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 5000));
	for (i = 0; i < 4; i++) {
		qtest_memread(&D.qt, PEER_BAR4 + 16 * MiB + 4096ull * (3 - i), out + 4096 * i, 4096);
	}
	TAP_CHECK(!memcmp(in, out, n), "VIRT copy into B through scattered pages differs");
	/* And a SIGNAL through the same mapping: a semaphore in B's memory. */
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 7, 0, SPYRE_AS_VIRT, va + 64, 42);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	TAP_EQ(42, qtest_readq(&D.qt, PEER_BAR4 + 16 * MiB + 3 * 4096 + 64));
}

static void test_errors(void)
{
	uint8_t p[64], buf[256];
	uint32_t cmd, count;
	int exp;

	/* Past B's mem-size, inside its BAR: nothing answers. */
	pkt_copy(p, 20, 0, SPYRE_AS_DEVPHYS, 0, SPYRE_AS_HOST, PEER_BAR4 + PEER_MEM, 128);
	sdev_submit(&D, 1, p);
	expect_dma_error(1, 20, PEER_BAR4 + PEER_MEM, SPYRE_ACCESS_WRITE, SPYRE_SOURCE_COPY_DST);
	pkt_copy(p, 21, 0, SPYRE_AS_HOST, PEER_BAR4 + 255 * MiB, SPYRE_AS_DEVPHYS, 0, 128);
	sdev_submit(&D, 1, p);
	expect_dma_error(1, 21, PEER_BAR4 + 255 * MiB, SPYRE_ACCESS_READ, SPYRE_SOURCE_COPY_SRC);

	/* B's memory decoding off: its BARs are gone from the bus. */
	cmd = qpci_cfg_readw(&D.qt, PEER_DEV, 0x04);
	qpci_cfg_writew(&D.qt, PEER_DEV, 0x04, cmd & ~0x2);
	pkt_copy(p, 22, 0, SPYRE_AS_HOST, PEER_BAR4, SPYRE_AS_DEVPHYS, 0, 256);
	sdev_submit(&D, 1, p);
	expect_dma_error(1, 22, PEER_BAR4, SPYRE_ACCESS_READ, SPYRE_SOURCE_COPY_SRC);
	qpci_cfg_writew(&D.qt, PEER_DEV, 0x04, cmd);

	/* A device reset of B keeps its memory and its BARs: copies go on. */
	memset(buf, 0x5a, sizeof(buf));
	qtest_memwrite(&D.qt, PEER_BAR4 + 32 * MiB, buf, sizeof(buf));
	count = qtest_readl(&D.qt, PEER_BAR0 + SPYRE_REG_RESET_COUNT);
	qtest_writel(&D.qt, PEER_BAR0 + SPYRE_REG_RESET, SPYRE_RESET_DEVICE);
	TAP_EQ(count + 1, qtest_readl(&D.qt, PEER_BAR0 + SPYRE_REG_RESET_COUNT));
	pkt_copy(p, 23, 0, SPYRE_AS_HOST, PEER_BAR4 + 32 * MiB, SPYRE_AS_DEVPHYS, 64 * MiB, 256);
	sdev_submit(&D, 1, p);
	TAP_EQ(0, sdev_wait(&D, 1, 2000));
	TAP_EQ(0x5a5a5a5a5a5a5a5aull, sdev_rd64(&D, SDEV_BAR2 + 64 * MiB + 248));

	/* An FLR of B resets its configuration: BAR4 is unassigned until mapped again. */
	exp = qpci_find_cap(&D.qt, PEER_DEV, 0x10);
	if (TAP_CHECK(exp != 0, "card B has no PCI Express capability")) {
		qpci_cfg_writew(&D.qt, PEER_DEV, exp + 8,
				qpci_cfg_readw(&D.qt, PEER_DEV, exp + 8) | 0x8000);
		pkt_copy(p, 24, 0, SPYRE_AS_DEVPHYS, 0, SPYRE_AS_HOST, PEER_BAR4 + 32 * MiB, 128);
		sdev_submit(&D, 1, p);
		expect_dma_error(1, 24, PEER_BAR4 + 32 * MiB, SPYRE_ACCESS_WRITE,
				 SPYRE_SOURCE_COPY_DST);
		peer_map();
		/* Device memory survived the FLR, as DRAM does. */
		TAP_EQ(0x5a5a5a5a5a5a5a5aull, qtest_readq(&D.qt, PEER_BAR4 + 32 * MiB + 8));
		pkt_copy(p, 25, 0, SPYRE_AS_DEVPHYS, 64 * MiB, SPYRE_AS_HOST, PEER_BAR4 + 33 * MiB,
			 256);
		sdev_submit(&D, 1, p);
		TAP_EQ(0, sdev_wait(&D, 1, 2000));
		TAP_EQ(0x5a5a5a5a5a5a5a5aull, qtest_readq(&D.qt, PEER_BAR4 + 33 * MiB + 128));
	}
	/* A is unharmed: its other queue still runs. */
	pkt_nop(p, 26, 0);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
}

static const struct tap_case cases[] = {
	{ "peer_bar", test_peer_bar },
	{ "peer_bar_property", test_peer_bar_property },
	{ "copy_to_peer", test_copy_to_peer },
	{ "copy_from_peer", test_copy_from_peer },
	{ "mmu_to_peer", test_mmu_to_peer },
	{ "errors", test_errors },
};

int main(int argc, char **argv)
{
	char peer[96];
	int ret;

	qtest_require_qemu();
	snprintf(peer, sizeof(peer), "-device spyre,addr=05.0,mem-size=%lluM",
		 (unsigned long long)(PEER_MEM / MiB));
	if (sdev_start_with(&D, "mem-size=256M", peer, 128))
		tap_bail("QEMU with two spyre cards did not start");
	peer_map();
	sdev_mmu_init(&D, 1);
	sdev_queue_init(&D, 0, 16, 0);
	sdev_queue_init(&D, 1, 16, 0);
	ret = TAP_RUN(cases, argc, argv);
	sdev_stop(&D);
	return ret;
}
