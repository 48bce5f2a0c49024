// SPDX-License-Identifier: MIT
/*
 * Description: the spyre device in timed mode (timed=on; docs/timed-mode.md)
 * through qtest, whose virtual clock moves only on clock_step: a COPY
 * completes exactly dma-latency-ns + bytes / dma-mbps after its queue reached
 * it (not 1 ns earlier: no completion word, HEAD, DONE or interrupt before),
 * two queues' COPYs share the DMA engine, a WAIT released by another queue's
 * SIGNAL completes at the SIGNAL's time and one on a CPU store at the device's
 * next re-read (1, 2, 4 us ... apart), a WAIT released by another card's
 * SIGNAL (both on one word of host memory) at that SIGNAL's time, not at a
 * re-read, the device clock is virtual time; a
 * queue reset, a device reset and an FLR with a completion pending drop it
 * and leave the device usable, a disabled queue finishes its packet and
 * stops; a seeded storm of garbage packets, register writes, resets and
 * clock steps leaves QEMU running and the device usable. The device's other
 * qtest suites cover the packets' functional effects.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyre-dev.h"

#define MiB		(1ull << 20)
/* The defaults (docs/timed-mode.md). */
#define LAT		1000
#define XFER_1M		20972	/* ceil(2^20 * 1000 / 50000) */

static struct sdev D;
static struct sdev E;		/* a second timed card, driven through its BAR0 as a VF is */

#define CARD_B_DEV	5		/* -device spyre,addr=05.0 */
#define CARD_B_BAR0	0xe2000000u

static int64_t step(int64_t ns)
{
	return qtest_clock_step(&D.qt, ns);
}

/* A fresh ring on queue @q, whatever state an earlier case left it in. */
static void qinit(unsigned q, unsigned prio)
{
	sdev_qwr(&D, q, SPYRE_Q_CTRL, SPYRE_QCTRL_RESET);
	sdev_queue_init(&D, q, 16, prio);
}

static void zero_compl(unsigned q)
{
	sdev_wr64(&D, D.q[q].compl, 0);
}

/*
 * The MSI-X mailbox of @vector, watched for up to 200 ms: an interrupt sent
 * too early (from a bottom half) shows up by then. sdev_irq() waits seconds
 * for one that is due, all of which a check for none would spend.
 */
static uint32_t irq_early(unsigned vector)
{
	uint64_t end = now_ns() + 200000000ull;
	uint32_t v;

	while (!(v = qtest_readl(&D.qt, D.mailbox + 4 * vector)) && now_ns() < end)
		usleep(100);
	return v;
}

/* A COPY of 1 MiB host -> device memory completes at reach + LAT + XFER_1M. */
static void test_copy_exact(void)
{
	uint64_t h = sdev_alloc(&D, MiB, 4096);
	uint8_t p[64], in[256], out[256];
	unsigned i;

	for (i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 7 + 1);
	sdev_memwrite(&D, h, in, sizeof(in));
	qinit(0, 0);
	sdev_irq_clear(&D, 0);
	zero_compl(0);
	pkt_copy(p, 11, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, 0, MiB);
	((struct spyre_pkt_hdr *)p)->flags = SPYRE_PKT_F_IRQ;
	sdev_submit(&D, 0, p);
	step(LAT + XFER_1M - 1);
	TAP_EQ(0, sdev_qrd(&D, 0, SPYRE_Q_HEAD));
	TAP_EQ(0, sdev_qrd(&D, 0, SPYRE_Q_DONE));
	TAP_EQ(SPYRE_QSTAT_ENABLED | SPYRE_QSTAT_BUSY, sdev_qrd(&D, 0, SPYRE_Q_STATUS));
	TAP_EQ(0, sdev_rd64(&D, D.q[0].compl));
	TAP_EQ(0, irq_early(0));
	step(1);
	TAP_EQ(1, sdev_qrd(&D, 0, SPYRE_Q_HEAD));
	TAP_EQ(1, sdev_qrd(&D, 0, SPYRE_Q_DONE));
	TAP_EQ(SPYRE_QSTAT_ENABLED, sdev_qrd(&D, 0, SPYRE_Q_STATUS));
	TAP_EQ(11, sdev_rd64(&D, D.q[0].compl));
	TAP_EQ(0x1000, sdev_irq(&D, 0));
	sdev_memread(&D, SDEV_BAR2, out, sizeof(out));
	TAP_CHECK(!memcmp(in, out, sizeof(in)), "the data arrived");

	/* NOP and TIMESTAMP take no time: done without a clock step. */
	pkt_nop(p, 12, 0);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	TAP_EQ(12, sdev_rd64(&D, D.q[0].compl));
}

/* Two queues' COPYs at the same time: one DMA engine, first come first. */
static void test_dma_shared(void)
{
	uint64_t h = sdev_alloc(&D, 2 * MiB, 4096);
	uint8_t p[64];

	qinit(0, 0);
	qinit(1, 3);	/* priority is not modeled in timed mode */
	zero_compl(0);
	zero_compl(1);
	pkt_copy(p, 21, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, 0, MiB);
	sdev_submit(&D, 0, p);
	pkt_copy(p, 22, 0, SPYRE_AS_HOST, h + MiB, SPYRE_AS_DEVPHYS, MiB, MiB);
	sdev_submit(&D, 1, p);
	step(LAT + XFER_1M - 1);
	TAP_EQ(0, sdev_rd64(&D, D.q[0].compl));
	step(1);
	TAP_EQ(21, sdev_rd64(&D, D.q[0].compl));
	TAP_EQ(0, sdev_rd64(&D, D.q[1].compl));
	step(XFER_1M - 1);
	TAP_EQ(0, sdev_rd64(&D, D.q[1].compl));
	step(1);
	TAP_EQ(22, sdev_rd64(&D, D.q[1].compl));
}

/* A WAIT released by another queue's SIGNAL completes at the SIGNAL's time. */
static void test_wait_signal(void)
{
	uint64_t h = sdev_alloc(&D, MiB, 4096), sem = sdev_alloc(&D, 64, 64);
	uint8_t p[64];

	qinit(0, 0);
	qinit(1, 0);
	zero_compl(0);
	sdev_wr64(&D, sem, 0);
	pkt_sem(p, SPYRE_PKT_OP_WAIT, 31, 0, SPYRE_AS_HOST, sem, 1);
	sdev_submit(&D, 0, p);
	TAP_EQ(SPYRE_QSTAT_ENABLED | SPYRE_QSTAT_BUSY | SPYRE_QSTAT_WAITING,
	       sdev_qrd(&D, 0, SPYRE_Q_STATUS));
	pkt_copy(p, 32, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, 0, MiB);
	sdev_push(&D, 1, p);
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 33, 0, SPYRE_AS_HOST, sem, 1);
	sdev_push(&D, 1, p);
	sdev_doorbell(&D, 1);
	step(LAT + XFER_1M - 1);
	TAP_EQ(0, sdev_rd64(&D, D.q[0].compl));
	step(1);
	TAP_EQ(31, sdev_rd64(&D, D.q[0].compl));
	TAP_EQ(33, sdev_rd64(&D, D.q[1].compl));
	TAP_EQ(SPYRE_QSTAT_ENABLED, sdev_qrd(&D, 0, SPYRE_Q_STATUS));
}

/* A WAIT on a CPU store: seen at the re-read after it (t + 1, 3, 7 us ...). */
static void test_wait_cpu_store(void)
{
	uint64_t sem = sdev_alloc(&D, 64, 64);
	uint8_t p[64];

	qinit(0, 0);
	zero_compl(0);
	sdev_wr64(&D, sem, 0);
	pkt_sem(p, SPYRE_PKT_OP_WAIT, 41, 0, SPYRE_AS_HOST, sem, 5);
	sdev_submit(&D, 0, p);
	step(5000);
	sdev_wr64(&D, sem, 5);
	step(1999);		/* t + 6999 */
	TAP_EQ(0, sdev_rd64(&D, D.q[0].compl));
	step(1);		/* t + 7000: the third re-read */
	TAP_EQ(41, sdev_rd64(&D, D.q[0].compl));
}

/*
 * Card B waits on a word of host memory; 10 us later card A SIGNALs it: B's
 * WAIT completes at the SIGNAL's time (every card's waiters re-read then),
 * where a re-read alone would see it only at +15 us (1, 3, 7, 15 us).
 */
static void test_wait_signal_other_card(void)
{
	uint64_t sem = sdev_alloc(&D, 64, 64);
	uint8_t p[64];

	qinit(0, 0);
	sdev_qwr(&E, 0, SPYRE_Q_CTRL, SPYRE_QCTRL_RESET);
	sdev_queue_init(&E, 0, 16, 0);
	zero_compl(0);
	sdev_wr64(&D, E.q[0].compl, 0);
	sdev_wr64(&D, sem, 0);
	pkt_sem(p, SPYRE_PKT_OP_WAIT, 51, 0, SPYRE_AS_HOST, sem, 9);
	sdev_submit(&E, 0, p);
	step(10000);
	TAP_EQ(SPYRE_QSTAT_ENABLED | SPYRE_QSTAT_BUSY | SPYRE_QSTAT_WAITING,
	       sdev_qrd(&E, 0, SPYRE_Q_STATUS));
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 52, 0, SPYRE_AS_HOST, sem, 9);
	sdev_submit(&D, 0, p);
	step(1);
	TAP_EQ(52, sdev_rd64(&D, D.q[0].compl));
	TAP_EQ(51, sdev_rd64(&D, E.q[0].compl));
	TAP_EQ(SPYRE_QSTAT_ENABLED, sdev_qrd(&E, 0, SPYRE_Q_STATUS));
}

/* Card B's registers at CARD_B_BAR0, its DMA on; half of its queues. */
static void card_b_setup(void)
{
	qpci_map_bar32(&D.qt, CARD_B_DEV, 0, CARD_B_BAR0);
	sdev_vf_init(&D, &E, CARD_B_BAR0, 4 * MiB);
}

/* The device clock is virtual time since the last reset. */
static void test_device_clock(void)
{
	uint32_t a, b;

	a = sdev_rd(&D, SPYRE_REG_CLOCK_LO);
	step(123457);
	b = sdev_rd(&D, SPYRE_REG_CLOCK_LO);
	TAP_EQ(123457, b - a);
}

/* Start a 1 MiB COPY on queue 0 and go halfway through it. */
static void copy_half(uint64_t seq)
{
	uint64_t h = sdev_alloc(&D, MiB, 4096);
	uint8_t p[64];

	zero_compl(0);
	pkt_copy(p, seq, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, 0, MiB);
	sdev_submit(&D, 0, p);
	step((LAT + XFER_1M) / 2);
	TAP_EQ(SPYRE_QSTAT_ENABLED | SPYRE_QSTAT_BUSY, sdev_qrd(&D, 0, SPYRE_Q_STATUS));
}

static void usable(const char *what)
{
	uint8_t p[64];

	qinit(0, 0);
	pkt_nop(p, 99, 0);
	sdev_submit(&D, 0, p);
	TAP_CHECK(sdev_wait(&D, 0, 2000) == 0 && sdev_rd64(&D, D.q[0].compl) == 99,
		  "a NOP completes after %s", what);
}

/* Resets with a completion pending drop it; the device stays usable. */
static void test_resets_pending(void)
{
	int exp;

	qinit(0, 0);
	copy_half(51);
	sdev_qwr(&D, 0, SPYRE_Q_CTRL, SPYRE_QCTRL_RESET);
	TAP_EQ(0, sdev_qrd(&D, 0, SPYRE_Q_STATUS));
	step(10 * (LAT + XFER_1M));
	TAP_EQ(0, sdev_rd64(&D, D.q[0].compl));
	TAP_EQ(0, sdev_qrd(&D, 0, SPYRE_Q_HEAD));
	usable("a queue reset");

	copy_half(52);
	sdev_wr(&D, SPYRE_REG_RESET, SPYRE_RESET_DEVICE);
	step(10 * (LAT + XFER_1M));
	TAP_EQ(0, sdev_rd64(&D, D.q[0].compl));
	TAP_EQ(0, sdev_qrd(&D, 0, SPYRE_Q_STATUS));
	usable("a device reset");

	copy_half(53);
	exp = qpci_find_cap(&D.qt, SDEV_PCI_DEV, 0x10);
	qpci_cfg_writew(&D.qt, SDEV_PCI_DEV, exp + 8,
			qpci_cfg_readw(&D.qt, SDEV_PCI_DEV, exp + 8) | 0x8000);
	sdev_pci_setup(&D);
	step(10 * (LAT + XFER_1M));
	TAP_EQ(0, sdev_rd64(&D, D.q[0].compl));
	TAP_EQ(0, sdev_qrd(&D, 0, SPYRE_Q_STATUS));
	usable("an FLR");
}

/* A queue disabled with a packet in progress finishes it, then stops. */
static void test_disable_pending(void)
{
	uint8_t p[64];

	qinit(0, 0);
	copy_half(61);
	pkt_nop(p, 62, 0);
	sdev_submit(&D, 0, p);
	sdev_qwr(&D, 0, SPYRE_Q_CTRL, 0);
	step(LAT + XFER_1M);
	TAP_EQ(61, sdev_rd64(&D, D.q[0].compl));
	TAP_EQ(1, sdev_qrd(&D, 0, SPYRE_Q_HEAD));
	TAP_EQ(0, sdev_qrd(&D, 0, SPYRE_Q_STATUS));
	step(10000);
	TAP_EQ(1, sdev_qrd(&D, 0, SPYRE_Q_HEAD));
	sdev_qwr(&D, 0, SPYRE_Q_CTRL, SPYRE_QCTRL_ENABLE);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	TAP_EQ(62, sdev_rd64(&D, D.q[0].compl));
}

/*
 * Garbage: random packets (a valid header half the time), register writes,
 * resets, injections and clock steps on four queues, seeded. QEMU must keep
 * answering and the device must work afterwards.
 */
static uint64_t rnd_state = 0x5eed1234abcdull;

static uint64_t rnd(void)
{
	rnd_state = rnd_state * 6364136223846793005ull + 1442695040888963407ull;
	return rnd_state >> 17;
}

static void test_garbage(void)
{
	uint64_t buf = sdev_alloc(&D, 4 * MiB, 4096), sem = sdev_alloc(&D, 64, 64);
	uint8_t p[64];
	unsigned i, j, q;

	for (q = 0; q < 4; q++)
		qinit(q, q);
	for (i = 0; i < 3000; i++) {
		q = rnd() % 4;
		switch (rnd() % 10) {
		case 0: case 1: case 2: case 3:
			for (j = 0; j < 64; j++)
				p[j] = (uint8_t)rnd();
			if (rnd() % 2) {
				struct spyre_pkt_hdr *h = (void *)p;

				h->opcode = rnd() % 6;
				h->version = SPYRE_PKT_VERSION;
				h->flags = rnd() % 2;
				h->reserved = 0;
				memset(p + 40, 0, 24);
				if (h->opcode == SPYRE_PKT_OP_COPY) {
					pkt_copy(p, i, 0, rnd() % 4, buf + (rnd() % 64) * 4096,
						 rnd() % 4, (rnd() % 64) * 4096, (1 + rnd() % 64) * 128);
				} else if (h->opcode >= SPYRE_PKT_OP_SIGNAL) {
					pkt_sem(p, h->opcode, i, 0, rnd() % 3, sem,
						h->opcode == SPYRE_PKT_OP_TIMESTAMP ? 0 : rnd() % 3);
				}
			}
			sdev_submit(&D, q, p);
			break;
		case 4:
			step(rnd() % 50000);
			break;
		case 5:
			sdev_qwr(&D, q, SPYRE_Q_CTRL, (uint32_t)rnd() & 0x33);
			break;
		case 6:
			sdev_queue_skip(&D, q);
			break;
		case 7:
			if (rnd() % 8 == 0)
				sdev_queue_restart(&D, q);
			else
				sdev_wr64(&D, sem, rnd() % 3);
			break;
		case 8:
			if (rnd() % 16 == 0)
				sdev_wr(&D, SPYRE_REG_INJECT, SPYRE_INJECT(q, 1 + rnd() % 4));
			else
				sdev_qwr(&D, q, SPYRE_Q_TAIL, (uint32_t)rnd());
			break;
		case 9:
			if (rnd() % 50 == 0) {
				sdev_wr(&D, SPYRE_REG_RESET, SPYRE_RESET_DEVICE);
				for (j = 0; j < 4; j++)
					sdev_queue_init(&D, j, 8, j);
			} else {
				(void)sdev_qrd(&D, q, SPYRE_Q_STATUS);
			}
			break;
		}
	}
	step(-1);
	TAP_EQ(SPYRE_ID_MAGIC, sdev_rd(&D, SPYRE_REG_ID));
	sdev_wr(&D, SPYRE_REG_RESET, SPYRE_RESET_DEVICE);
	usable("the storm and a device reset");
}

static const struct tap_case cases[] = {
	{ "copy_exact", test_copy_exact },
	{ "dma_shared", test_dma_shared },
	{ "wait_signal", test_wait_signal },
	{ "wait_cpu_store", test_wait_cpu_store },
	{ "wait_signal_other_card", test_wait_signal_other_card },
	{ "device_clock", test_device_clock },
	{ "resets_pending", test_resets_pending },
	{ "disable_pending", test_disable_pending },
	{ "garbage", test_garbage },
};

int main(int argc, char **argv)
{
	int ret;

	qtest_require_qemu();
	if (sdev_start_with(&D, "timed=on,queues=8", "-device spyre,addr=05.0,timed=on,queues=2", 256))
		tap_bail("QEMU with two timed spyre cards did not start");
	card_b_setup();
	ret = tap_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
	sdev_stop(&D);
	return ret;
}
