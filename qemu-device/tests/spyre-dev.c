// SPDX-License-Identifier: MIT
/* Driving a spyre device through qtest; see spyre-dev.h. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spyre-dev.h"

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The function's registers: a VF's BAR0, else the PF's (even unset up). */
static uint64_t sdev_bar0(const struct sdev *d)
{
	return d->bar0 ? d->bar0 : SDEV_BAR0;
}

uint32_t sdev_rd(struct sdev *d, uint32_t reg)
{
	return qtest_readl(&d->qt, sdev_bar0(d) + reg);
}

void sdev_wr(struct sdev *d, uint32_t reg, uint32_t val)
{
	qtest_writel(&d->qt, sdev_bar0(d) + reg, val);
}

uint32_t sdev_qrd(struct sdev *d, unsigned q, uint32_t reg)
{
	return sdev_rd(d, SPYRE_QREG(q, reg));
}

void sdev_qwr(struct sdev *d, unsigned q, uint32_t reg, uint32_t val)
{
	sdev_wr(d, SPYRE_QREG(q, reg), val);
}

uint64_t sdev_alloc(struct sdev *d, uint64_t size, uint64_t align)
{
	uint64_t a = (d->ram_next + align - 1) & ~(align - 1);

	if (a + size > d->ram_end) {
		fprintf(stderr, "sdev_alloc: guest RAM exhausted\n");
		exit(1);
	}
	d->ram_next = a + size;
	sdev_memset(d, a, 0, size);
	return a;
}

void sdev_memwrite(struct sdev *d, uint64_t addr, const void *buf, uint64_t len)
{
	qtest_memwrite(&d->qt, addr, buf, len);
}

void sdev_memread(struct sdev *d, uint64_t addr, void *buf, uint64_t len)
{
	qtest_memread(&d->qt, addr, buf, len);
}

void sdev_memset(struct sdev *d, uint64_t addr, uint8_t val, uint64_t len)
{
	qtest_memset(&d->qt, addr, val, len);
}

uint64_t sdev_rd64(struct sdev *d, uint64_t addr)
{
	return qtest_readq(&d->qt, addr);
}

void sdev_wr64(struct sdev *d, uint64_t addr, uint64_t val)
{
	qtest_writeq(&d->qt, addr, val);
}

static void msix_setup(struct sdev *d)
{
	int cap = qpci_find_cap(&d->qt, SDEV_PCI_DEV, 0x11);
	unsigned v, n = d->queues + 1;

	d->mailbox = sdev_alloc(d, 4 * n, 64);
	/* Table in BAR1 (32-bit), at its start. */
	qpci_cfg_writel(&d->qt, SDEV_PCI_DEV, 0x10 + 4 * SPYRE_BAR_MSIX, (uint32_t)SDEV_BAR1);
	for (v = 0; v < n; v++) {
		uint64_t e = SDEV_BAR1 + 16ull * v;

		qtest_writel(&d->qt, e + 0, (uint32_t)(d->mailbox + 4 * v));
		qtest_writel(&d->qt, e + 4, 0);
		qtest_writel(&d->qt, e + 8, 0x1000 + v);
		qtest_writel(&d->qt, e + 12, 0);	/* unmasked */
	}
	/* MSI-X enable, function mask clear. */
	qpci_cfg_writew(&d->qt, SDEV_PCI_DEV, cap + 2,
			(qpci_cfg_readw(&d->qt, SDEV_PCI_DEV, cap + 2) & ~0x4000) | 0x8000);
}

int sdev_start(struct sdev *d, const char *props, unsigned ram_mb)
{
	return sdev_start_with(d, props, NULL, ram_mb);
}

int sdev_start_with(struct sdev *d, const char *props, const char *more, unsigned ram_mb)
{
	char extra[768];

	memset(d, 0, sizeof(*d));
	snprintf(extra, sizeof(extra), "-m %u -device spyre,addr=04.0%s%s%s%s", ram_mb,
		 props && *props ? "," : "", props ? props : "", more ? " " : "", more ? more : "");
	if (qtest_start(&d->qt, extra))
		return -1;
	d->ram_next = SDEV_RAM_BASE;
	d->ram_end = (uint64_t)ram_mb << 20;
	sdev_pci_setup(d);
	return 0;
}

void sdev_pci_setup(struct sdev *d)
{
	qpci_map_bar32(&d->qt, SDEV_PCI_DEV, 0, (uint32_t)SDEV_BAR0);
	qpci_cfg_writel(&d->qt, SDEV_PCI_DEV, 0x18, (uint32_t)SDEV_BAR2);
	qpci_cfg_writel(&d->qt, SDEV_PCI_DEV, 0x1c, 0);
	d->queues = sdev_rd(d, SPYRE_REG_CAP_QUEUES);
	msix_setup(d);
}

void sdev_vf_init(struct sdev *pf, struct sdev *vf, uint64_t bar0, uint64_t ram)
{
	*vf = *pf;
	vf->bar0 = bar0;
	vf->ram_next = sdev_alloc(pf, ram, 4096);
	vf->ram_end = vf->ram_next + ram;
	vf->mailbox = 0;
	memset(vf->q, 0, sizeof(vf->q));
	vf->queues = sdev_rd(vf, SPYRE_REG_CAP_QUEUES);
}

void sdev_stop(struct sdev *d)
{
	qtest_quit(&d->qt);
}

int sdev_run(struct sdev *d, const char *props, unsigned ram_mb, void (*setup)(void),
	     const struct tap_case *cases, size_t n, int argc, char **argv)
{
	int ret;

	qtest_require_qemu();
	if (sdev_start(d, props, ram_mb))
		tap_bail("QEMU with -device spyre%s%s did not start", *props ? "," : "", props);
	if (setup)
		setup();
	ret = tap_run(cases, n, argc, argv);
	sdev_stop(d);
	return ret;
}

void sdev_queue_init(struct sdev *d, unsigned q, uint32_t size, unsigned prio)
{
	struct sdev_queue *sq = &d->q[q];

	sq->ring = sdev_alloc(d, (uint64_t)size * SPYRE_PKT_SIZE, 4096);
	sq->compl = sdev_alloc(d, 8, 64);
	sq->size = size;
	sq->tail = 0;
	sdev_qwr(d, q, SPYRE_Q_BASE_LO, (uint32_t)sq->ring);
	sdev_qwr(d, q, SPYRE_Q_BASE_HI, (uint32_t)(sq->ring >> 32));
	sdev_qwr(d, q, SPYRE_Q_SIZE, size);
	sdev_qwr(d, q, SPYRE_Q_COMPL_LO, (uint32_t)sq->compl);
	sdev_qwr(d, q, SPYRE_Q_COMPL_HI, (uint32_t)(sq->compl >> 32));
	sdev_qwr(d, q, SPYRE_Q_HEAD, 0);
	sdev_qwr(d, q, SPYRE_Q_TAIL, 0);
	sdev_qwr(d, q, SPYRE_Q_CTRL, SPYRE_QCTRL_ENABLE | prio << SPYRE_QCTRL_PRIO_SHIFT);
}

void sdev_queue_restart(struct sdev *d, unsigned q)
{
	struct sdev_queue *sq = &d->q[q];
	uint32_t prio = sdev_qrd(d, q, SPYRE_Q_CTRL) & SPYRE_QCTRL_PRIO_MASK;

	sdev_qwr(d, q, SPYRE_Q_CTRL, SPYRE_QCTRL_RESET);
	sq->tail = 0;
	sdev_qwr(d, q, SPYRE_Q_BASE_LO, (uint32_t)sq->ring);
	sdev_qwr(d, q, SPYRE_Q_BASE_HI, (uint32_t)(sq->ring >> 32));
	sdev_qwr(d, q, SPYRE_Q_SIZE, sq->size);
	sdev_qwr(d, q, SPYRE_Q_COMPL_LO, (uint32_t)sq->compl);
	sdev_qwr(d, q, SPYRE_Q_COMPL_HI, (uint32_t)(sq->compl >> 32));
	sdev_qwr(d, q, SPYRE_Q_CTRL, SPYRE_QCTRL_ENABLE | prio);
}

uint32_t sdev_push(struct sdev *d, unsigned q, const void *pkt)
{
	struct sdev_queue *sq = &d->q[q];
	uint32_t idx = sq->tail++;

	sdev_memwrite(d, sq->ring + (uint64_t)(idx % sq->size) * SPYRE_PKT_SIZE, pkt,
		      SPYRE_PKT_SIZE);
	return idx;
}

void sdev_doorbell(struct sdev *d, unsigned q)
{
	sdev_qwr(d, q, SPYRE_Q_TAIL, d->q[q].tail);
}

void sdev_submit(struct sdev *d, unsigned q, const void *pkt)
{
	sdev_push(d, q, pkt);
	sdev_doorbell(d, q);
}

int sdev_wait(struct sdev *d, unsigned q, unsigned timeout_ms)
{
	uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ull;

	for (;;) {
		uint32_t st = sdev_qrd(d, q, SPYRE_Q_STATUS);

		if (st & SPYRE_QSTAT_ERROR)
			return -1;
		if (sdev_qrd(d, q, SPYRE_Q_HEAD) == d->q[q].tail && !(st & SPYRE_QSTAT_BUSY))
			return 0;
		if (now_ns() > end)
			return -2;
		usleep(100);
	}
}

bool sdev_wait_status(struct sdev *d, unsigned q, uint32_t bits, unsigned timeout_ms)
{
	uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ull;

	while ((sdev_qrd(d, q, SPYRE_Q_STATUS) & bits) != bits) {
		if (now_ns() > end)
			return false;
		usleep(200);
	}
	return true;
}

uint32_t sdev_irq(struct sdev *d, unsigned vector)
{
	/*
	 * MSI-X is sent from a bottom half, which a slow or loaded host may
	 * run late; one that came returns at once, so waiting long is free.
	 */
	uint64_t end = now_ns() + 5000000000ull;
	uint32_t v;

	while (!(v = qtest_readl(&d->qt, d->mailbox + 4 * vector)) && now_ns() < end)
		usleep(100);
	return v;
}

void sdev_irq_clear(struct sdev *d, unsigned vector)
{
	qtest_writel(&d->qt, d->mailbox + 4 * vector, 0);
}

void sdev_queue_skip(struct sdev *d, unsigned q)
{
	uint32_t head = sdev_qrd(d, q, SPYRE_Q_HEAD);
	uint32_t ctrl = sdev_qrd(d, q, SPYRE_Q_CTRL);

	sdev_qwr(d, q, SPYRE_Q_CTRL, ctrl & ~SPYRE_QCTRL_ENABLE);
	sdev_qwr(d, q, SPYRE_Q_HEAD, head + 1);
	sdev_qwr(d, q, SPYRE_Q_CTRL, ctrl | SPYRE_QCTRL_ENABLE);
}

/* The fields the driver owns; the preparers of spyre_hw.h leave them zero. */
static void hdr_own(void *p, uint64_t seq, uint16_t flags, uint16_t ctx)
{
	struct spyre_pkt_hdr *h = p;

	h->flags = flags;
	h->ctx = ctx;
	h->seq = seq;
}

void pkt_nop(void *p, uint64_t seq, uint16_t flags)
{
	spyre_prep_nop(p);
	hdr_own(p, seq, flags, 0);
}

void pkt_copy(void *p, uint64_t seq, uint16_t ctx, uint8_t src_space, uint64_t src,
	      uint8_t dst_space, uint64_t dst, uint64_t size)
{
	spyre_prep_copy(p, src_space, src, dst_space, dst, size);
	hdr_own(p, seq, 0, ctx);
}

void pkt_sem(void *p, uint8_t op, uint64_t seq, uint16_t ctx, uint8_t space,
	     uint64_t addr, uint64_t value)
{
	spyre_prep_sem(p, op, space, addr, value);
	hdr_own(p, seq, 0, ctx);
}

void pkt_launch(void *p, uint64_t seq, uint64_t program, uint64_t args, uint32_t mask)
{
	spyre_prep_launch(p, program, args, mask, 0);
	hdr_own(p, seq, 0, 0);
}

static uint64_t ctx_table;

void sdev_ctx_set(struct sdev *d, unsigned ctx, bool valid)
{
	uint64_t l0 = valid ? sdev_alloc(d, 4096, 4096) : 0;

	sdev_wr64(d, ctx_table + 8ull * ctx, valid ? l0 | SPYRE_CTX_VALID : 0);
	sdev_wr(d, SPYRE_REG_MMU_INVALIDATE, 1);
}

void sdev_mmu_init(struct sdev *d, unsigned nctx)
{
	unsigned c;

	ctx_table = sdev_alloc(d, 8ull * nctx, 4096);
	for (c = 0; c < nctx; c++)
		sdev_ctx_set(d, c, true);
	sdev_wr(d, SPYRE_REG_MMU_CTX_TABLE_LO, (uint32_t)ctx_table);
	sdev_wr(d, SPYRE_REG_MMU_CTX_TABLE_HI, (uint32_t)(ctx_table >> 32));
	sdev_wr(d, SPYRE_REG_MMU_CTX_COUNT, nctx);
}

/* The next-level table behind entry @e, allocated if missing. */
static uint64_t next_table(struct sdev *d, uint64_t e)
{
	uint64_t v = sdev_rd64(d, e);

	if (!(v & SPYRE_PTE_VALID)) {
		v = sdev_alloc(d, 4096, 4096) | SPYRE_PTE_VALID;
		sdev_wr64(d, e, v);
	}
	return v & SPYRE_PTE_ADDR_MASK;
}

void sdev_map(struct sdev *d, unsigned ctx, uint64_t va, uint64_t pa, uint64_t flags)
{
	uint64_t l0 = sdev_rd64(d, ctx_table + 8ull * ctx) & SPYRE_PTE_ADDR_MASK;
	uint64_t l1 = next_table(d, l0 + 8 * SPYRE_PT_INDEX(va, 0));

	if (flags & SPYRE_PTE_LEAF) {
		sdev_wr64(d, l1 + 8 * SPYRE_PT_INDEX(va, 1), pa | flags | SPYRE_PTE_VALID);
		return;
	}
	sdev_wr64(d, next_table(d, l1 + 8 * SPYRE_PT_INDEX(va, 1)) + 8 * SPYRE_PT_INDEX(va, 2),
		  pa | flags | SPYRE_PTE_VALID);
}
