// SPDX-License-Identifier: MIT
/*
 * Description: the spyre device's command queues through qtest, without a
 * guest kernel: every packet type (NOP, COPY in all directions including
 * scatter-gather, SIGNAL, WAIT across queues and on host memory, TIMESTAMP,
 * LAUNCH), completion words and MSI-X per queue, the error vector, LAUNCH running a program on the compute engine through the MMU
 * (result checked, launch record, precise engine faults), ring wrap-around,
 * concurrent queues, priorities, and the BAR2
 * device-memory window.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyre-dev.h"
#include "spyre_progbuild.h"

#define MiB (1ull << 20)

static struct sdev D;

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 131 + seed * 7 + (i >> 8));
}

static void test_nop_completion_irq(void)
{
	uint8_t p[64];

	sdev_queue_init(&D, 0, 16, 0);
	sdev_irq_clear(&D, 0);
	pkt_nop(p, 0x1234567890abcdefull, SPYRE_PKT_F_IRQ);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	TAP_EQ(0x1234567890abcdefull, sdev_rd64(&D, D.q[0].compl));
	TAP_EQ(1, sdev_qrd(&D, 0, SPYRE_Q_HEAD));
	TAP_EQ(1, sdev_qrd(&D, 0, SPYRE_Q_DONE));
	TAP_EQ(0x1000, sdev_irq(&D, 0));
	TAP_EQ(SPYRE_QSTAT_ENABLED, sdev_qrd(&D, 0, SPYRE_Q_STATUS));

	/* Without the IRQ flag: completion word, no interrupt. */
	sdev_irq_clear(&D, 0);
	pkt_nop(p, 77, 0);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	TAP_EQ(77, sdev_rd64(&D, D.q[0].compl));
	usleep(20000);
	TAP_EQ(0, qtest_readl(&D.qt, D.mailbox));
}

static void test_copy_directions(void)
{
	const uint64_t n = 3 * 4096 + 128 * 5;
	uint8_t *in = malloc(n), *out = malloc(n);
	uint64_t h1 = sdev_alloc(&D, n, 4096), h2 = sdev_alloc(&D, n, 4096);
	uint8_t p[64];

	fill(in, n, 1);
	sdev_memwrite(&D, h1, in, n);
	/* host -> device, device -> device, device -> host */
	pkt_copy(p, 1, 0, SPYRE_AS_HOST, h1, SPYRE_AS_DEVPHYS, 0x100000, n);
	sdev_submit(&D, 0, p);
	pkt_copy(p, 2, 0, SPYRE_AS_DEVPHYS, 0x100000, SPYRE_AS_DEVPHYS, 0x7f00080, n);
	sdev_submit(&D, 0, p);
	pkt_copy(p, 3, 0, SPYRE_AS_DEVPHYS, 0x7f00080, SPYRE_AS_HOST, h2 + 0, n);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 5000));
	TAP_EQ(3, sdev_rd64(&D, D.q[0].compl));
	sdev_memread(&D, h2, out, n);
	TAP_CHECK(!memcmp(in, out, n), "H2D/D2D/D2H round trip differs");

	/* The same bytes are visible through BAR2 (window at offset 0). */
	memset(out, 0, n);
	sdev_memread(&D, SDEV_BAR2 + 0x100000, out, n);
	TAP_CHECK(!memcmp(in, out, n), "BAR2 window shows different bytes");

	/* host -> host through the device, unaligned host addresses */
	pkt_copy(p, 4, 0, SPYRE_AS_HOST, h1 + 3, SPYRE_AS_HOST, h2 + 5, 1280);
	sdev_memset(&D, h2, 0, n);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 5000));
	sdev_memread(&D, h2 + 5, out, 1280);
	TAP_CHECK(!memcmp(in + 3, out, 1280), "H2H copy differs");
	free(in);
	free(out);
}

static void test_copy_sgl(void)
{
	/* Gather 3 host pieces of odd sizes into device memory, scatter back. */
	static const uint64_t len[3] = { 1000, 3000, 4096 + 96 };
	const uint64_t total = 1000 + 3000 + 4096 + 96;	/* 8192: whole sticks */
	uint8_t *in = malloc(total), *out = malloc(total);
	struct spyre_sge sg[3], sg2[3];
	uint64_t list = sdev_alloc(&D, sizeof(sg), 64), list2 = sdev_alloc(&D, sizeof(sg), 64);
	uint64_t off = 0, back = sdev_alloc(&D, total, 4096);
	uint8_t p[64];
	int i;

	fill(in, total, 9);
	for (i = 0; i < 3; i++) {
		sg[i].addr = sdev_alloc(&D, len[i] + 64, 64) + 7;
		sg[i].len = len[i];
		sdev_memwrite(&D, sg[i].addr, in + off, len[i]);
		off += len[i];
	}
	sdev_memwrite(&D, list, sg, sizeof(sg));
	pkt_copy(p, 10, 0, SPYRE_AS_HOST_SGL, list, SPYRE_AS_DEVPHYS, 0x200000, total);
	sdev_submit(&D, 0, p);
	pkt_copy(p, 11, 0, SPYRE_AS_DEVPHYS, 0x200000, SPYRE_AS_HOST, back, total);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 5000));
	sdev_memread(&D, back, out, total);
	TAP_CHECK(!memcmp(in, out, total), "SGL gather differs");

	/* Scatter: device -> 3 host pieces at other places. */
	for (i = 0; i < 3; i++) {
		sg2[i].addr = sdev_alloc(&D, len[i], 64);
		sg2[i].len = len[i];
	}
	sdev_memwrite(&D, list2, sg2, sizeof(sg2));
	pkt_copy(p, 12, 0, SPYRE_AS_DEVPHYS, 0x200000, SPYRE_AS_HOST_SGL, list2, total);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 5000));
	off = 0;
	for (i = 0; i < 3; i++) {
		sdev_memread(&D, sg2[i].addr, out + off, len[i]);
		off += len[i];
	}
	TAP_CHECK(!memcmp(in, out, total), "SGL scatter differs");
	free(in);
	free(out);
}

static void test_copy_large(void)
{
	/* 8 MiB crosses many DMA chunks; check both ends and the middle. */
	const uint64_t n = 8 * MiB;
	uint64_t h = sdev_alloc(&D, n, 4096);
	uint8_t p[64], a[256], b[256];

	fill(a, sizeof(a), 3);
	sdev_memset(&D, h, 0x5a, n);
	sdev_memwrite(&D, h + n - 256, a, 256);
	pkt_copy(p, 20, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, 64 * MiB, n);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 10000));
	sdev_memread(&D, SDEV_BAR2 + 64 * MiB + n - 256, b, 256);
	TAP_CHECK(!memcmp(a, b, 256), "tail of 8 MiB copy differs");
	sdev_memread(&D, SDEV_BAR2 + 64 * MiB + n / 2, b, 16);
	TAP_EQ(0x5a5a5a5a5a5a5a5aull, *(uint64_t *)b);
}

static void test_signal_timestamp(void)
{
	uint64_t sem = sdev_alloc(&D, 64, 64), t1, t2, c;
	uint8_t p[64];

	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 30, 0, SPYRE_AS_HOST, sem, 0xfeedface12345678ull);
	sdev_submit(&D, 0, p);
	pkt_sem(p, SPYRE_PKT_OP_TIMESTAMP, 31, 0, SPYRE_AS_HOST, sem + 8, 0);
	sdev_submit(&D, 0, p);
	/* The first TIMESTAMP is written before the 2 ms start: a lower bound. */
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	usleep(2000);
	pkt_sem(p, SPYRE_PKT_OP_TIMESTAMP, 32, 0, SPYRE_AS_HOST, sem + 16, 0);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	TAP_EQ(0xfeedface12345678ull, sdev_rd64(&D, sem));
	t1 = sdev_rd64(&D, sem + 8);
	t2 = sdev_rd64(&D, sem + 16);
	c = sdev_rd(&D, SPYRE_REG_CLOCK_LO);
	c |= (uint64_t)sdev_rd(&D, SPYRE_REG_CLOCK_HI) << 32;
	TAP_CHECK(t1 > 0 && t2 > t1, "timestamps not increasing: %llu %llu",
		  (unsigned long long)t1, (unsigned long long)t2);
	/* The second TIMESTAMP was submitted 2 ms after the first completed. */
	TAP_CHECK(t2 - t1 >= 2000000, "timestamps %llu ns apart", (unsigned long long)(t2 - t1));
	TAP_CHECK(c >= t2, "CLOCK register %llu behind timestamp %llu",
		  (unsigned long long)c, (unsigned long long)t2);

	/* SIGNAL into device memory, read back through BAR2. */
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 33, 0, SPYRE_AS_DEVPHYS, 0x3000, 42);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	TAP_EQ(42, sdev_rd64(&D, SDEV_BAR2 + 0x3000));
}

static void test_wait_cross_queue(void)
{
	uint64_t hsem = sdev_alloc(&D, 8, 64);
	uint8_t p[64];

	/* Queue 1 waits on a device-memory semaphore that queue 2 signals. */
	sdev_queue_init(&D, 1, 8, 0);
	sdev_queue_init(&D, 2, 8, 0);
	sdev_wr64(&D, SDEV_BAR2 + 0x4000, 0);
	pkt_sem(p, SPYRE_PKT_OP_WAIT, 40, 0, SPYRE_AS_DEVPHYS, 0x4000, 5);
	sdev_submit(&D, 1, p);
	pkt_nop(p, 41, 0);
	sdev_submit(&D, 1, p);
	TAP_CHECK(sdev_wait_status(&D, 1, SPYRE_QSTAT_WAITING, 2000), "queue 1 not WAITING");
	TAP_EQ(0, sdev_qrd(&D, 1, SPYRE_Q_HEAD));
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 42, 0, SPYRE_AS_DEVPHYS, 0x4000, 4);	/* not enough */
	sdev_submit(&D, 2, p);
	TAP_EQ(0, sdev_wait(&D, 2, 2000));
	usleep(20000);
	TAP_EQ(0, sdev_qrd(&D, 1, SPYRE_Q_HEAD));
	pkt_sem(p, SPYRE_PKT_OP_SIGNAL, 43, 0, SPYRE_AS_DEVPHYS, 0x4000, 5);
	sdev_submit(&D, 2, p);
	TAP_EQ(0, sdev_wait(&D, 1, 2000));
	TAP_EQ(41, sdev_rd64(&D, D.q[1].compl));

	/* A WAIT on host memory is released by a CPU store (polled). */
	pkt_sem(p, SPYRE_PKT_OP_WAIT, 44, 0, SPYRE_AS_HOST, hsem, 0x100000000ull);
	sdev_submit(&D, 1, p);
	usleep(10000);
	TAP_EQ(2, sdev_qrd(&D, 1, SPYRE_Q_HEAD));
	sdev_wr64(&D, hsem, 0x100000001ull);
	TAP_EQ(0, sdev_wait(&D, 1, 2000));
	TAP_EQ(44, sdev_rd64(&D, D.q[1].compl));
}

static void test_launch(void)
{
	/* VA layout of context 0: program, arguments and record in host pages,
	 * tensors in a 2 MiB device-memory page. */
	const uint64_t va_prog = 0x100000, va_args = 0x110000, va_rec = 0x111000,
		       va_dev = 0x200000, dev_off = 0xa00000;
	uint64_t h_prog = sdev_alloc(&D, 0x10000, 4096), h_args = sdev_alloc(&D, 4096, 4096),
		 h_rec = sdev_alloc(&D, 4096, 4096), args[2] = { va_dev, va_dev + 0x1000 };
	struct spyre_pkt_launch *l;
	struct spyre_launch_record rec;
	float x[32], y[32];
	size_t size = 0;
	uint8_t p[64];
	void *img;
	int i;

	img = spyre_pb_relu_image(SPYRE_PB_ADDR_SLOT, 1, 128, &size);	/* y = relu(x) */
	TAP_CHECK(img && size <= 0x10000, "building the program failed");
	if (!img)
		return;
	sdev_mmu_init(&D, 1);
	for (i = 0; i < 16; i++)
		sdev_map(&D, 0, va_prog + 4096ull * i, h_prog + 4096ull * i, SPYRE_PTE_READ);
	sdev_map(&D, 0, va_args, h_args, SPYRE_PTE_READ);
	sdev_map(&D, 0, va_rec, h_rec, SPYRE_PTE_READ | SPYRE_PTE_WRITE);
	sdev_map(&D, 0, va_dev, dev_off, SPYRE_PTE_READ | SPYRE_PTE_WRITE | SPYRE_PTE_DEVMEM |
		 SPYRE_PTE_LEAF);
	sdev_memwrite(&D, h_prog, img, size);
	sdev_memwrite(&D, h_args, args, sizeof(args));
	for (i = 0; i < 32; i++)
		x[i] = (float)(i - 16) * 0.5f;
	sdev_memwrite(&D, SDEV_BAR2 + dev_off, x, sizeof(x));

	sdev_queue_init(&D, 3, 8, 0);
	memset(p, 0, sizeof(p));
	l = (void *)p;
	l->hdr.opcode = SPYRE_PKT_OP_LAUNCH;
	l->hdr.version = SPYRE_PKT_VERSION;
	l->hdr.seq = 50;
	l->program = va_prog;
	l->args = va_args;
	l->core_mask = 1;
	l->record = va_rec;
	sdev_submit(&D, 3, p);
	TAP_EQ(0, sdev_wait(&D, 3, 5000));
	sdev_memread(&D, SDEV_BAR2 + dev_off + 0x1000, y, sizeof(y));
	for (i = 0; i < 32; i++)
		TAP_CHECK(y[i] == (x[i] > 0 ? x[i] : 0.0f), "y[%d] = %f, x = %f", i, y[i], x[i]);
	sdev_memread(&D, h_rec, &rec, sizeof(rec));
	TAP_EQ(0, rec.status);
	TAP_EQ(1, rec.cores_run);
	TAP_CHECK(rec.insns >= 3, "insns %llu", (unsigned long long)rec.insns);
	TAP_CHECK(rec.device_ns > 0 && rec.core_busy_cycles[0] > 0, "no modeled time");

	/* A program reading beyond its slot faults precisely: engine error,
	 * the core and pc in QE_*, the cause in Q_FAULT_INFO and the record. */
	free(img);
	img = spyre_pb_relu_image(SPYRE_PB_ADDR_SLOT, 1, 64, &size);		/* "x" claims 64 bytes, reads 128 */
	sdev_memwrite(&D, h_prog, img, size);
	l->hdr.seq = 51;
	sdev_submit(&D, 3, p);
	TAP_EQ(-1, sdev_wait(&D, 3, 5000));
	TAP_EQ(SPYRE_ERR_ENGINE, sdev_qrd(&D, 3, SPYRE_Q_ERROR));
	TAP_EQ(51, sdev_qrd(&D, 3, SPYRE_Q_ERR_SEQ_LO));
	TAP_EQ(SPYRE_ENGINE_FAULT_MEM_RANGE, SPYRE_FAULT_CAUSE(sdev_qrd(&D, 3, SPYRE_Q_FAULT_INFO)));
	TAP_EQ(SPYRE_SOURCE_PROGRAM, SPYRE_FAULT_SOURCE(sdev_qrd(&D, 3, SPYRE_Q_FAULT_INFO)));
	TAP_EQ(0, sdev_rd(&D, SPYRE_QENG(3, SPYRE_QE_CORE)));
	TAP_EQ(0, sdev_rd(&D, SPYRE_QENG(3, SPYRE_QE_PC)));
	sdev_memread(&D, h_rec, &rec, sizeof(rec));
	TAP_EQ(SPYRE_ENGINE_FAULT_MEM_RANGE, rec.status);
	sdev_queue_skip(&D, 3);
	TAP_EQ(0, sdev_wait(&D, 3, 2000));

	/* Program fetch through an unmapped VA: an engine fault naming the VA. */
	l->program = 0x7000000;
	l->hdr.seq = 52;
	sdev_submit(&D, 3, p);
	TAP_EQ(-1, sdev_wait(&D, 3, 5000));
	TAP_EQ(SPYRE_ERR_ENGINE, sdev_qrd(&D, 3, SPYRE_Q_ERROR));
	TAP_EQ(0x7000000, sdev_qrd(&D, 3, SPYRE_Q_FAULT_LO));
	sdev_queue_skip(&D, 3);
	free(img);
}

static void test_error_vector(void)
{
	uint8_t p[64];
	unsigned ev = D.queues;

	sdev_queue_init(&D, 5, 8, 0);
	sdev_irq_clear(&D, ev);
	pkt_nop(p, 55, 0);
	p[0] = 0x66;				/* bad opcode */
	sdev_submit(&D, 5, p);
	TAP_EQ(-1, sdev_wait(&D, 5, 2000));
	TAP_EQ(SPYRE_ERR_BAD_OPCODE, sdev_qrd(&D, 5, SPYRE_Q_ERROR));
	TAP_EQ(55, sdev_qrd(&D, 5, SPYRE_Q_ERR_SEQ_LO));
	TAP_EQ(1u << 5, sdev_rd(&D, SPYRE_REG_ERR_QUEUES_LO));
	TAP_EQ(0x1000 + ev, sdev_irq(&D, ev));
	TAP_EQ(0, sdev_qrd(&D, 5, SPYRE_Q_HEAD));
	/* RW1C */
	sdev_wr(&D, SPYRE_REG_ERR_QUEUES_LO, 1u << 5);
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_ERR_QUEUES_LO));
	/* Restart past the failed packet: the queue works again. */
	pkt_nop(p, 56, 0);
	sdev_push(&D, 5, p);
	sdev_queue_skip(&D, 5);
	sdev_doorbell(&D, 5);
	TAP_EQ(0, sdev_wait(&D, 5, 2000));
	TAP_EQ(56, sdev_rd64(&D, D.q[5].compl));
	TAP_EQ(SPYRE_ERR_NONE, sdev_qrd(&D, 5, SPYRE_Q_ERROR));
}

static void test_ring_wrap(void)
{
	uint8_t p[64];
	uint32_t i;

	sdev_queue_init(&D, 4, 4, 0);
	for (i = 0; i < 11; i++) {
		pkt_nop(p, 100 + i, 0);
		sdev_submit(&D, 4, p);
		if (i % 3 == 2)
			TAP_EQ(0, sdev_wait(&D, 4, 2000));
	}
	TAP_EQ(0, sdev_wait(&D, 4, 2000));
	TAP_EQ(11, sdev_qrd(&D, 4, SPYRE_Q_HEAD));
	TAP_EQ(110, sdev_rd64(&D, D.q[4].compl));
}

static void test_concurrent_queues(void)
{
	/* Four queues, each copying its own pattern in 16 packets. */
	uint8_t p[64], in[4][4096], out[4096];
	uint64_t h[4], r[4];
	unsigned q, i;

	for (q = 0; q < 4; q++) {
		sdev_queue_init(&D, 8 + q, 32, q % 4);
		fill(in[q], 4096, 20 + q);
		h[q] = sdev_alloc(&D, 4096, 4096);
		r[q] = sdev_alloc(&D, 4096, 4096);
		sdev_memwrite(&D, h[q], in[q], 4096);
		for (i = 0; i < 16; i++) {
			pkt_copy(p, 1000 * q + i, 0, SPYRE_AS_HOST, h[q], SPYRE_AS_DEVPHYS,
				 (128 + q) * MiB + i * 4096ull, 4096);
			sdev_push(&D, 8 + q, p);
		}
		pkt_copy(p, 1000 * q + 99, 0, SPYRE_AS_DEVPHYS, (128 + q) * MiB + 15 * 4096ull,
			 SPYRE_AS_HOST, r[q], 4096);
		sdev_push(&D, 8 + q, p);
	}
	for (q = 0; q < 4; q++)
		sdev_doorbell(&D, 8 + q);
	for (q = 0; q < 4; q++) {
		TAP_EQ(0, sdev_wait(&D, 8 + q, 10000));
		TAP_EQ(1000 * q + 99, sdev_rd64(&D, D.q[8 + q].compl));
		sdev_memread(&D, r[q], out, 4096);
		TAP_CHECK(!memcmp(in[q], out, 4096), "queue %u data differs", 8 + q);
	}
}

static void test_priority(void)
{
	/*
	 * Low-priority 512 MiB copies are under way when a high-priority queue
	 * submits a small one: the DMA engine serves the high-priority queue
	 * between chunks, so it finishes while the big copies are still running.
	 * A TIMESTAMP behind each queue's copies orders the two on the device
	 * clock, so how late this process gets to look does not matter, and 64
	 * big copies (seconds of memmove, not one copy's ~100 ms) leave the
	 * small one ample time to be submitted and picked up on a slow or
	 * loaded host. Once it is done, the rest is dropped: no slower when it
	 * passes.
	 */
	uint64_t ts = sdev_alloc(&D, 64, 64), hi, lo;
	uint8_t p[64];
	unsigned i;

	sdev_queue_init(&D, 12, 128, 0);
	sdev_queue_init(&D, 13, 4, 3);
	for (i = 0; i < 64; i++) {
		pkt_copy(p, 100 + i, 0, SPYRE_AS_DEVPHYS, 0, SPYRE_AS_DEVPHYS, 512 * MiB,
			 512 * MiB);
		sdev_push(&D, 12, p);
	}
	pkt_sem(p, SPYRE_PKT_OP_TIMESTAMP, 60, 0, SPYRE_AS_HOST, ts, 0);
	sdev_push(&D, 12, p);
	sdev_doorbell(&D, 12);
	TAP_CHECK(sdev_wait_status(&D, 12, SPYRE_QSTAT_BUSY, 5000),
		  "the low-priority queue did not start");
	pkt_copy(p, 61, 0, SPYRE_AS_DEVPHYS, 0, SPYRE_AS_DEVPHYS, 4096, 4096);
	sdev_push(&D, 13, p);
	pkt_sem(p, SPYRE_PKT_OP_TIMESTAMP, 62, 0, SPYRE_AS_HOST, ts + 8, 0);
	sdev_push(&D, 13, p);
	sdev_doorbell(&D, 13);
	TAP_EQ(0, sdev_wait(&D, 13, 10000));
	/* Read in this order: a low-priority TIMESTAMP not written yet is later. */
	hi = sdev_rd64(&D, ts + 8);
	lo = sdev_rd64(&D, ts);
	TAP_CHECK(hi && (!lo || hi < lo),
		  "the low-priority copies finished first: TIMESTAMP %llu >= %llu ns",
		  (unsigned long long)hi, (unsigned long long)lo);
	/* A reset abandons the copy in progress at its next chunk. */
	sdev_queue_restart(&D, 12);
	TAP_EQ(0, sdev_wait(&D, 12, 5000));
}

static void test_window(void)
{
	uint8_t p[64];

	/* Move BAR2 to device memory offset 256 MiB and write through it. */
	sdev_wr(&D, SPYRE_REG_WINDOW_LO, 256 * MiB);
	sdev_wr(&D, SPYRE_REG_WINDOW_HI, 0);
	TAP_EQ(256 * MiB, sdev_rd(&D, SPYRE_REG_WINDOW_LO));
	sdev_wr64(&D, SDEV_BAR2 + 0x80, 0x0123456789abcdefull);
	pkt_copy(p, 70, 0, SPYRE_AS_DEVPHYS, 256 * MiB, SPYRE_AS_DEVPHYS, 0x5000, 256);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	sdev_wr(&D, SPYRE_REG_WINDOW_LO, 0);
	sdev_wr(&D, SPYRE_REG_WINDOW_HI, 0);
	TAP_EQ(0x0123456789abcdefull, sdev_rd64(&D, SDEV_BAR2 + 0x5080));
	/* Misaligned or out-of-range windows are refused and logged. */
	sdev_wr(&D, SPYRE_REG_WINDOW_LO, 4096);
	sdev_wr(&D, SPYRE_REG_WINDOW_HI, 0);
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_WINDOW_LO));
	sdev_wr(&D, SPYRE_REG_WINDOW_LO, 0);
	sdev_wr(&D, SPYRE_REG_WINDOW_HI, 1);	/* 4 GiB > mem-size 1 GiB */
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_WINDOW_HI));
	TAP_CHECK(qtest_log_contains(&D.qt, "WINDOW: 0x100000000 is not"), "no guest error");
	/* An offset whose window would wrap past 2^64 is refused too. */
	sdev_wr(&D, SPYRE_REG_WINDOW_LO, 0xf0000000u);
	sdev_wr(&D, SPYRE_REG_WINDOW_HI, 0xffffffffu);
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_WINDOW_HI));
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_WINDOW_LO));
	TAP_CHECK(qtest_log_contains(&D.qt, "WINDOW: 0xfffffffff0000000 is not"), "no guest error");
}

static const struct tap_case cases[] = {
	{ "nop_completion_irq", test_nop_completion_irq },
	{ "copy_directions", test_copy_directions },
	{ "copy_sgl", test_copy_sgl },
	{ "copy_large", test_copy_large },
	{ "signal_timestamp", test_signal_timestamp },
	{ "wait_cross_queue", test_wait_cross_queue },
	{ "launch", test_launch },
	{ "error_vector", test_error_vector },
	{ "ring_wrap", test_ring_wrap },
	{ "concurrent_queues", test_concurrent_queues },
	{ "priority", test_priority },
	{ "window", test_window },
};

int main(int argc, char **argv)
{
	return SDEV_RUN(&D, "mem-size=2G", 256, NULL, cases, argc, argv);
}
