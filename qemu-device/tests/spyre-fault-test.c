// SPDX-License-Identifier: MIT
/*
 * Description: spyre device error paths and recovery through qtest: every
 * malformed packet kind, ring overflow and misconfiguration, host DMA to
 * nowhere, each injected fault (hang, DMA error, page fault, corrupt
 * completion), per-queue reset of a blocked queue, and whole-device reset by
 * register and by PCIe FLR with work in flight. Each failure stops only its
 * queue, records the packet's seq, and the device stays usable afterwards.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyre-dev.h"

static struct sdev D;

/* A reset aborts the running packet; BUSY clears once the device stopped it. */
static uint32_t status_settled(unsigned q)
{
	uint64_t end = now_ns() + 2000000000ull;
	uint32_t st;

	while ((st = sdev_qrd(&D, q, SPYRE_Q_STATUS)) && now_ns() < end)
		usleep(1000);
	return st;
}

/* Submit @p on @q, expect it to fail with @err, then skip it and go on. */
static void expect_error(unsigned q, const uint8_t *p, uint32_t err)
{
	const struct spyre_pkt_hdr *h = (const void *)p;
	uint8_t nop[64];

	sdev_submit(&D, q, p);
	TAP_EQ(-1, sdev_wait(&D, q, 2000));
	TAP_EQ(err, sdev_qrd(&D, q, SPYRE_Q_ERROR));
	TAP_EQ((uint32_t)h->seq, sdev_qrd(&D, q, SPYRE_Q_ERR_SEQ_LO));
	TAP_CHECK(sdev_rd(&D, SPYRE_REG_ERR_QUEUES_LO) & (1u << q), "ERR_QUEUES bit %u", q);
	pkt_nop(nop, h->seq + 1000, 0);
	sdev_push(&D, q, nop);
	sdev_queue_skip(&D, q);
	sdev_doorbell(&D, q);
	TAP_EQ(0, sdev_wait(&D, q, 2000));
	TAP_EQ(h->seq + 1000, sdev_rd64(&D, D.q[q].compl));
	TAP_CHECK(!(sdev_rd(&D, SPYRE_REG_ERR_QUEUES_LO) & (1u << q)), "ERR_QUEUES bit stays");
}

static void test_malformed(void)
{
	uint64_t h = sdev_alloc(&D, 4096, 4096);
	struct spyre_pkt_copy *c;
	struct spyre_pkt_sem *m;
	uint8_t p[64];

	sdev_queue_init(&D, 0, 8, 0);
	pkt_nop(p, 1, 0);
	p[0] = 0x77;
	expect_error(0, p, SPYRE_ERR_BAD_OPCODE);
	pkt_nop(p, 2, 0);
	p[1] = 2;
	expect_error(0, p, SPYRE_ERR_BAD_VERSION);
	pkt_nop(p, 3, 0x8000);
	expect_error(0, p, SPYRE_ERR_RESERVED);
	pkt_nop(p, 4, 0);
	p[63] = 1;
	expect_error(0, p, SPYRE_ERR_RESERVED);
	pkt_copy(p, 5, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, 64, 128);
	expect_error(0, p, SPYRE_ERR_ALIGN);
	pkt_copy(p, 6, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, 0, 100);
	expect_error(0, p, SPYRE_ERR_SIZE);
	pkt_copy(p, 7, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, 0, 0);
	expect_error(0, p, SPYRE_ERR_SIZE);
	pkt_copy(p, 8, 0, SPYRE_AS_HOST, h, 9, 0, 128);
	expect_error(0, p, SPYRE_ERR_SPACE);
	pkt_copy(p, 9, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, 0, 128);
	c = (void *)p;
	c->reserved[5] = 1;
	expect_error(0, p, SPYRE_ERR_RESERVED);
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 10, 0, SPYRE_AS_HOST, h + 4, 1);
	expect_error(0, p, SPYRE_ERR_ALIGN);
	pkt_sem(p, SPYRE_PKT_OP_WAIT, 11, 0, SPYRE_AS_HOST_SGL, h, 1);
	expect_error(0, p, SPYRE_ERR_SPACE);
	pkt_sem(p, SPYRE_PKT_OP_TIMESTAMP, 12, 0, SPYRE_AS_HOST, h, 5);
	m = (void *)p;
	TAP_EQ(5, m->value);
	expect_error(0, p, SPYRE_ERR_RESERVED);
	/* Host DMA to an address with nothing behind it. */
	pkt_copy(p, 13, 0, SPYRE_AS_HOST, 0xfff00000000ull, SPYRE_AS_DEVPHYS, 0, 128);
	expect_error(0, p, SPYRE_ERR_DMA);
	/* A scatter-gather entry of length zero. */
	sdev_wr64(&D, h, h + 512);
	sdev_wr64(&D, h + 8, 0);
	pkt_copy(p, 14, 0, SPYRE_AS_HOST_SGL, h, SPYRE_AS_DEVPHYS, 0, 128);
	expect_error(0, p, SPYRE_ERR_SGL);
}

static void test_ring_errors(void)
{
	uint8_t p[64];

	/* Overflow: the doorbell claims more packets than the ring holds. */
	sdev_queue_init(&D, 1, 4, 0);
	pkt_nop(p, 1, 0);
	sdev_push(&D, 1, p);
	sdev_qwr(&D, 1, SPYRE_Q_TAIL, 6);
	TAP_EQ(-1, sdev_wait(&D, 1, 2000));
	TAP_EQ(SPYRE_ERR_RING_OVERFLOW, sdev_qrd(&D, 1, SPYRE_Q_ERROR));
	TAP_EQ(0, sdev_qrd(&D, 1, SPYRE_Q_HEAD));

	/* Bad ring configuration is refused at enable. */
	sdev_qwr(&D, 2, SPYRE_Q_BASE_LO, 0x1234);	/* not 64-byte aligned */
	sdev_qwr(&D, 2, SPYRE_Q_SIZE, 3);		/* not a power of two */
	sdev_qwr(&D, 2, SPYRE_Q_CTRL, SPYRE_QCTRL_ENABLE);
	TAP_EQ(SPYRE_ERR_RING_CONFIG, sdev_qrd(&D, 2, SPYRE_Q_ERROR));
	TAP_CHECK(sdev_qrd(&D, 2, SPYRE_Q_STATUS) & SPYRE_QSTAT_ERROR, "queue 2 not in error");
	TAP_CHECK(qtest_log_contains(&D.qt, "queue 2: enable with bad ring base 0x1234"),
		  "no guest error for bad ring");

	/* Ring registers cannot change under a running queue. */
	sdev_queue_init(&D, 2, 4, 0);
	sdev_qwr(&D, 2, SPYRE_Q_SIZE, 64);
	TAP_EQ(4, sdev_qrd(&D, 2, SPYRE_Q_SIZE));
	TAP_CHECK(qtest_log_contains(&D.qt, "queue 2: register 0x8 written while enabled"),
		  "no guest error for size change");

	/* Queue reset returns everything to zero. */
	sdev_qwr(&D, 1, SPYRE_Q_CTRL, SPYRE_QCTRL_RESET);
	TAP_EQ(0, sdev_qrd(&D, 1, SPYRE_Q_STATUS));
	TAP_EQ(0, sdev_qrd(&D, 1, SPYRE_Q_ERROR));
	TAP_EQ(0, sdev_qrd(&D, 1, SPYRE_Q_TAIL));
	TAP_EQ(0, sdev_qrd(&D, 1, SPYRE_Q_SIZE));
}

static void test_inject(void)
{
	uint64_t h = sdev_alloc(&D, 4096, 4096);
	uint8_t p[64];

	sdev_queue_init(&D, 3, 8, 0);

	/* DMA error: the next DMA fails, the one after works. */
	sdev_wr(&D, SPYRE_REG_INJECT, SPYRE_INJECT(3, SPYRE_INJECT_DMA_ERROR));
	TAP_EQ(1u << SPYRE_INJECT_DMA_ERROR, sdev_rd(&D, SPYRE_REG_INJECT));
	pkt_copy(p, 30, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, 0, 128);
	expect_error(3, p, SPYRE_ERR_DMA);
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_INJECT));

	/* Page fault on the next operand, whatever its space. */
	sdev_wr(&D, SPYRE_REG_INJECT, SPYRE_INJECT(3, SPYRE_INJECT_PAGE_FAULT));
	pkt_copy(p, 31, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, 0, 128);
	expect_error(3, p, SPYRE_ERR_FAULT);

	/* Corrupt completion: the completion word is seq ^ ~0. */
	sdev_wr(&D, SPYRE_REG_INJECT, SPYRE_INJECT(3, SPYRE_INJECT_BAD_COMPLETION));
	pkt_nop(p, 32, 0);
	sdev_submit(&D, 3, p);
	TAP_EQ(0, sdev_wait(&D, 3, 2000));
	TAP_EQ(~32ull, sdev_rd64(&D, D.q[3].compl));

	/* Hang: the queue stops consuming until it is reset. */
	sdev_wr(&D, SPYRE_REG_INJECT, SPYRE_INJECT(3, SPYRE_INJECT_HANG));
	pkt_nop(p, 33, 0);
	sdev_submit(&D, 3, p);
	/*
	 * The queue's thread takes the packet (BUSY) whenever the host gets
	 * to it: poll for that, then it must not finish it.
	 */
	TAP_CHECK(sdev_wait_status(&D, 3, SPYRE_QSTAT_BUSY, 5000), "hung queue not BUSY");
	TAP_EQ(-2, sdev_wait(&D, 3, 100));
	sdev_qwr(&D, 3, SPYRE_Q_CTRL, SPYRE_QCTRL_RESET);
	TAP_EQ(0, sdev_qrd(&D, 3, SPYRE_Q_STATUS));
	sdev_queue_init(&D, 3, 8, 0);
	pkt_nop(p, 34, 0);
	sdev_submit(&D, 3, p);
	TAP_EQ(0, sdev_wait(&D, 3, 2000));
	TAP_EQ(34, sdev_rd64(&D, D.q[3].compl));

	/* Bad injection values are refused; INJECT_NONE disarms. */
	sdev_wr(&D, SPYRE_REG_INJECT, SPYRE_INJECT(60, SPYRE_INJECT_HANG));
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_INJECT));
	TAP_CHECK(qtest_log_contains(&D.qt, "INJECT: bad value"), "no guest error for INJECT");
	sdev_wr(&D, SPYRE_REG_INJECT, SPYRE_INJECT(4, SPYRE_INJECT_HANG));
	sdev_wr(&D, SPYRE_REG_INJECT, SPYRE_INJECT_NONE);
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_INJECT));
}

static void test_queue_reset_unblocks_wait(void)
{
	uint64_t sem = sdev_alloc(&D, 8, 64);
	uint8_t p[64];

	sdev_queue_init(&D, 5, 8, 0);
	pkt_sem(p, SPYRE_PKT_OP_WAIT, 50, 0, SPYRE_AS_HOST, sem, 1);
	sdev_submit(&D, 5, p);
	TAP_CHECK(sdev_wait_status(&D, 5, SPYRE_QSTAT_WAITING, 2000), "not waiting");
	sdev_qwr(&D, 5, SPYRE_Q_CTRL, SPYRE_QCTRL_RESET);
	TAP_EQ(0, status_settled(5));
	TAP_EQ(0, sdev_qrd(&D, 5, SPYRE_Q_HEAD));
	/* The abandoned WAIT writes no completion, even when released later. */
	sdev_wr64(&D, sem, 1);
	usleep(10000);
	TAP_EQ(0, sdev_rd64(&D, D.q[5].compl));
}

static void device_usable(const char *how)
{
	uint8_t p[64];

	TAP_EQ(SPYRE_STATUS_READY, sdev_rd(&D, SPYRE_REG_STATUS));
	sdev_queue_init(&D, 0, 8, 0);
	pkt_nop(p, 77, SPYRE_PKT_F_IRQ);
	sdev_irq_clear(&D, 0);
	sdev_submit(&D, 0, p);
	TAP_CHECK(sdev_wait(&D, 0, 2000) == 0, "device unusable after %s", how);
	TAP_EQ(77, sdev_rd64(&D, D.q[0].compl));
	TAP_EQ(0x1000, sdev_irq(&D, 0));
}

static void test_device_reset(void)
{
	uint64_t sem = sdev_alloc(&D, 8, 64);
	uint32_t count = sdev_rd(&D, SPYRE_REG_RESET_COUNT);
	uint8_t p[64];
	unsigned q;

	/* Work in flight on several queues: a blocked WAIT and a hung queue. */
	sdev_queue_init(&D, 6, 8, 0);
	sdev_queue_init(&D, 7, 8, 0);
	pkt_sem(p, SPYRE_PKT_OP_WAIT, 60, 0, SPYRE_AS_HOST, sem, 1);
	sdev_submit(&D, 6, p);
	sdev_wr(&D, SPYRE_REG_INJECT, SPYRE_INJECT(7, SPYRE_INJECT_HANG));
	pkt_nop(p, 61, 0);
	sdev_submit(&D, 7, p);
	sdev_wr64(&D, SDEV_BAR2 + 0x100, 0xabcdef);
	sdev_wr(&D, SPYRE_REG_MMU_CTX_COUNT, 3);
	usleep(10000);

	sdev_wr(&D, SPYRE_REG_RESET, SPYRE_RESET_DEVICE);
	TAP_EQ(count + 1, sdev_rd(&D, SPYRE_REG_RESET_COUNT));
	for (q = 0; q < D.queues; q++)
		TAP_CHECK(status_settled(q) == 0, "queue %u status after reset", q);
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_MMU_CTX_COUNT));
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_ERR_QUEUES_LO));
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_INJECT));
	/* Device memory keeps its contents, as DRAM does. */
	TAP_EQ(0xabcdef, sdev_rd64(&D, SDEV_BAR2 + 0x100));
	device_usable("register reset");

	/* PCIe FLR: the same, plus configuration space (BARs, MSI-X) is reset. */
	sdev_submit(&D, 6, p);
	{
		int exp = qpci_find_cap(&D.qt, SDEV_PCI_DEV, 0x10);

		qpci_cfg_writew(&D.qt, SDEV_PCI_DEV, exp + 8,
				qpci_cfg_readw(&D.qt, SDEV_PCI_DEV, exp + 8) | 0x8000);
	}
	TAP_EQ(0, qpci_cfg_readl(&D.qt, SDEV_PCI_DEV, 0x10) & ~0xfu);
	sdev_pci_setup(&D);
	TAP_EQ(count + 2, sdev_rd(&D, SPYRE_REG_RESET_COUNT));
	TAP_EQ(0, status_settled(6));
	device_usable("FLR");
}

static const struct tap_case cases[] = {
	{ "malformed_packets", test_malformed },
	{ "ring_errors", test_ring_errors },
	{ "inject", test_inject },
	{ "queue_reset_unblocks_wait", test_queue_reset_unblocks_wait },
	{ "device_reset", test_device_reset },
};

int main(int argc, char **argv)
{
	return SDEV_RUN(&D, "queues=8", 128, NULL, cases, argc, argv);
}
