// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_coredump.c - a device coredump (dev_coredumpv(), as ivpu and msm
 * take theirs) when a job hangs or a LAUNCH faults: the device's registers
 * and every queue's state, the job and its packets as the device saw them
 * on the ring, the launch records of its LAUNCHes, a summary of its
 * context's page tables and the walk of the faulting address. Format:
 * uapi/spyre_devcoredump.h (docs/coredump.md); tools/spyre-coredump decodes it.
 *
 * Taken on the ordered reset workqueue (timeout or error handler) before
 * the job's fence signals, so its buffers are still mapped. The devcoredump
 * core keeps one dump per device until it is read and deleted (a write to
 * its data file) or five minutes pass; later ones are dropped meanwhile.
 */
#include <linux/devcoredump.h>
#include <linux/pm_runtime.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <linux/vmalloc.h>

#include <drm/drm_print.h>

#include "spyre_accel.h"
#include "spyre_coredump.h"
#include "spyre_ctx.h"
#include "spyre_drv.h"
#include "spyre_hw.h"
#include "spyre_job.h"
#include "spyre_kq.h"
#include "spyre_sched.h"
#include "spyre_uqueue.h"

static bool coredump = true;
module_param(coredump, bool, 0644);
MODULE_PARM_DESC(coredump, "Take a device coredump when a job hangs or a program faults (default: on)");

#define SPYRE_DUMP_MAX_LAUNCH	16	/* launch records read per dump */
#define SPYRE_DUMP_MAX_BYTES	SZ_128K

struct spyre_dump_buf {
	u8 *base;
	size_t len;
	u32 sections;
};

/* Room for a section of @size bytes: its payload, zeroed, or NULL when full. */
static void *spyre_dump_section(struct spyre_dump_buf *b, u32 type, u32 size)
{
	struct spyre_dump_section *h;
	size_t need = sizeof(*h) + ALIGN(size, 8);

	if (b->len + need > SPYRE_DUMP_MAX_BYTES)
		return NULL;
	h = (struct spyre_dump_section *)(b->base + b->len);
	h->type = type;
	h->size = size;
	b->len += need;
	b->sections++;
	return h + 1;
}

static u64 spyre_reg64(struct spyre_device *sdev, u32 lo, u32 hi)
{
	return spyre_hw_reg_read(sdev, lo) | (u64)spyre_hw_reg_read(sdev, hi) << 32;
}

static void spyre_dump_device(struct spyre_device *sdev, struct spyre_dump_buf *b)
{
	struct spyre_dump_device *d = spyre_dump_section(b, SPYRE_DUMP_SEC_DEVICE, sizeof(*d));

	if (!d)
		return;
	d->hw_version = sdev->caps.version;
	d->cores = sdev->caps.cores;
	d->queues = sdev->caps.queues;
	d->clock_mhz = sdev->caps.clock_mhz;
	d->mem_size = sdev->caps.mem_size;
	d->status = spyre_hw_reg_read(sdev, SPYRE_REG_STATUS);
	d->reset_count = spyre_hw_reg_read(sdev, SPYRE_REG_RESET_COUNT);
	d->err_queues = spyre_reg64(sdev, SPYRE_REG_ERR_QUEUES_LO, SPYRE_REG_ERR_QUEUES_HI);
	d->clock_ns = spyre_reg64(sdev, SPYRE_REG_CLOCK_LO, SPYRE_REG_CLOCK_HI);
	d->inject_armed = spyre_hw_reg_read(sdev, SPYRE_REG_INJECT);
	d->resets = atomic_read(&sdev->resets);
	d->faults = atomic_read(&sdev->faults);
	d->state = spyre_dev_state(sdev);
}

static void spyre_dump_queues(struct spyre_device *sdev, struct spyre_dump_buf *b)
{
	unsigned int i, r;

	for (i = 0; i < sdev->caps.queues; i++) {
		struct spyre_dump_queue *d = spyre_dump_section(b, SPYRE_DUMP_SEC_QUEUE,
								sizeof(*d));
		unsigned long flags;

		if (!d)
			return;
		d->idx = i;
		for (r = 0; r < ARRAY_SIZE(d->regs); r++)
			d->regs[r] = spyre_hw_reg_read(sdev, SPYRE_QREG(i, r * 4));
		d->qe_core = spyre_hw_reg_read(sdev, SPYRE_QENG(i, SPYRE_QE_CORE));
		d->qe_pc = spyre_hw_reg_read(sdev, SPYRE_QENG(i, SPYRE_QE_PC));
		if (i == sdev->kq.idx) {
			d->kernel = 1;
			d->sw_tail = sdev->kq.tail;
			d->seqno = sdev->kq.seq;
			d->completion = le64_to_cpu(READ_ONCE(*sdev->kq.compl));
		} else if (i < sdev->nr_hwq) {
			struct spyre_hwq *q = &sdev->hwq[i];
			struct spyre_job *job;

			spin_lock_irqsave(&q->lock, flags);
			d->sw_tail = q->tail;
			d->seqno = q->seqno;
			d->completion = le64_to_cpu(READ_ONCE(*q->compl));
			list_for_each_entry(job, &q->inflight, link)
				d->inflight++;
			spin_unlock_irqrestore(&q->lock, flags);
		}
	}
}

/* The job's ring slots, then the launch records its LAUNCHes name. */
static void spyre_dump_packets(struct spyre_device *sdev, struct spyre_dump_buf *b,
			       struct spyre_hwq *q, const struct spyre_coredump_job *job)
{
	u32 n = job->ring_end - job->ring_start, i, launches = 0;
	u8 *pk;

	if (n > SPYRE_RING_PACKETS)
		return;
	pk = spyre_dump_section(b, SPYRE_DUMP_SEC_PACKETS, n * SPYRE_PKT_SIZE);
	if (!pk)
		return;
	/* The device does not write the ring; the driver writes it in run_job only. */
	for (i = 0; i < n; i++)
		memcpy(pk + (size_t)i * SPYRE_PKT_SIZE,
		       q->ring + (size_t)((job->ring_start + i) % SPYRE_RING_PACKETS) *
		       SPYRE_PKT_SIZE, SPYRE_PKT_SIZE);

	for (i = job->nwaits; i < n && launches < SPYRE_DUMP_MAX_LAUNCH; i++) {
		const struct spyre_pkt_launch *l = (const void *)(pk + (size_t)i * SPYRE_PKT_SIZE);
		struct spyre_dump_launch *d;
		u64 va = le64_to_cpu(l->record);

		if (l->hdr.opcode != SPYRE_PKT_OP_LAUNCH || !va)
			continue;
		d = spyre_dump_section(b, SPYRE_DUMP_SEC_LAUNCH, sizeof(*d));
		if (!d)
			return;
		/* b->base may not move: sections are carved from one buffer. */
		d->packet = i - job->nwaits;
		d->record_va = va;
		d->valid = !spyre_kq_read_va(sdev, job->ctx->id, va, &d->record,
					     sizeof(d->record));
		launches++;
	}
}

/* Runs of contiguous pages with the same flags, from the level-2 tables. */
static void spyre_dump_pt(struct spyre_dump_buf *b, struct spyre_ctx *ctx)
{
	const u64 fl_mask = SPYRE_PTE_READ | SPYRE_PTE_WRITE | SPYRE_PTE_DEVMEM;
	struct spyre_dump_range *r = NULL, *ranges;
	struct spyre_dump_pt *pt;
	unsigned int i0, i1, i2;
	u32 dropped = 0, n = 0;

	pt = spyre_dump_section(b, SPYRE_DUMP_SEC_PT, sizeof(*pt) +
				SPYRE_DUMP_MAX_RANGES * sizeof(*ranges));
	if (!pt)
		return;
	ranges = (struct spyre_dump_range *)(pt + 1);
	pt->ctx = ctx->id;
	pt->l0_dma = ctx->l0.dma;
	mutex_lock(&ctx->lock);
	for (i0 = 0; i0 < SPYRE_PT_L0_USED; i0++) {
		if (!ctx->l1[i0].cpu)
			continue;
		pt->l1_tables++;
		if (!ctx->l2[i0])
			continue;
		for (i1 = 0; i1 < SPYRE_PT_ENTRIES; i1++) {
			__le64 *l2 = ctx->l2[i0][i1].cpu;

			if (!l2)
				continue;
			pt->l2_tables++;
			for (i2 = 0; i2 < SPYRE_PT_ENTRIES; i2++) {
				u64 pte = le64_to_cpu(l2[i2]);
				u64 va = ((u64)i0 << 30) | ((u64)i1 << 21) | ((u64)i2 << 12);
				u64 addr = pte & SPYRE_PTE_ADDR_MASK;

				if (!(pte & SPYRE_PTE_VALID))
					continue;
				if (pte & SPYRE_PTE_DEVMEM)
					pt->dev_pages++;
				else
					pt->host_pages++;
				if (r && r->va + r->size == va && r->flags == (pte & fl_mask) &&
				    r->addr + r->size == addr) {
					r->size += SPYRE_PAGE_SIZE;
					continue;
				}
				if (n == SPYRE_DUMP_MAX_RANGES) {
					dropped++;
					r = NULL;
					continue;
				}
				r = &ranges[n++];
				r->va = va;
				r->size = SPYRE_PAGE_SIZE;
				r->addr = addr;
				r->flags = pte & fl_mask;
			}
		}
	}
	mutex_unlock(&ctx->lock);
	pt->ranges = n;
	pt->ranges_dropped = dropped;
	/* Give back the room of the ranges not used. */
	((struct spyre_dump_section *)pt - 1)->size = sizeof(*pt) + n * sizeof(*ranges);
	b->len -= (SPYRE_DUMP_MAX_RANGES - n) * sizeof(*ranges);
}

static void spyre_dump_walk(struct spyre_dump_buf *b, struct spyre_ctx *ctx, u64 va)
{
	struct spyre_dump_walk *w;
	unsigned int i0 = SPYRE_PT_INDEX(va, 0), i1 = SPYRE_PT_INDEX(va, 1);

	if (va >= SPYRE_MMU_VA_SIZE)
		return;
	w = spyre_dump_section(b, SPYRE_DUMP_SEC_WALK, sizeof(*w));
	if (!w)
		return;
	w->va = va;
	w->ctx = ctx->id;
	mutex_lock(&ctx->lock);
	w->pte[0] = le64_to_cpu(ctx->l0.cpu[i0]);
	w->levels = 1;
	if (ctx->l1[i0].cpu) {
		w->pte[1] = le64_to_cpu(ctx->l1[i0].cpu[i1]);
		w->levels = 2;
		if (ctx->l2[i0] && ctx->l2[i0][i1].cpu) {
			w->pte[2] = le64_to_cpu(ctx->l2[i0][i1].cpu[SPYRE_PT_INDEX(va, 2)]);
			w->levels = 3;
		}
	}
	mutex_unlock(&ctx->lock);
}

/**
 * spyre_coredump_capture() - take a device coredump for a failed job
 * @sdev: the device, awake (the job holds a runtime PM reference)
 * @reason: SPYRE_DUMP_REASON_*
 * @q: the job's hardware queue, stopped (hung or on an error)
 * @job: the job
 *
 * Called from the ordered reset workqueue before the job's fence signals.
 * Nothing fails: a dump that cannot be taken is not taken.
 */
void spyre_coredump_capture(struct spyre_device *sdev, u32 reason, struct spyre_hwq *q,
			    const struct spyre_coredump_job *job)
{
	struct pci_dev *pdev = to_pci_dev(sdev->drm.dev);
	struct spyre_dump_buf b = { };
	struct spyre_dump_header *h;
	struct spyre_dump_job *j;

	if (!READ_ONCE(coredump))
		return;
	b.base = vzalloc(SPYRE_DUMP_MAX_BYTES);
	if (!b.base)
		return;
	h = (struct spyre_dump_header *)b.base;
	b.len = sizeof(*h);
	h->magic = SPYRE_DUMP_MAGIC;
	h->version = SPYRE_DUMP_VERSION;
	h->header_size = sizeof(*h);
	h->reason = reason;
	h->time_ns = ktime_get_real_ns();
	snprintf(h->driver, sizeof(h->driver), "%s %d.%d", DRIVER_NAME, DRIVER_MAJOR,
		 DRIVER_MINOR);
	strscpy(h->pci, pci_name(pdev), sizeof(h->pci));

	spyre_dump_device(sdev, &b);
	spyre_dump_queues(sdev, &b);
	j = spyre_dump_section(&b, SPYRE_DUMP_SEC_JOB, sizeof(*j));
	if (j) {
		j->hwq = q->idx;
		j->ctx = job->ctx->id;
		j->pid = job->ctx->pid;
		j->uqueue = job->uqueue;
		j->job_seq = job->rec.seq;
		j->hw_seqno = job->hw_seqno;
		j->npackets = job->npackets;
		j->nwaits = job->nwaits;
		j->ring_start = job->ring_start;
		j->ring_end = job->ring_end;
		j->fault = job->rec.fault;
		memcpy(j->comm, job->ctx->comm, sizeof(j->comm));
		j->comm[sizeof(j->comm) - 1] = '\0';
	}
	spyre_dump_packets(sdev, &b, q, job);
	spyre_dump_pt(&b, job->ctx);
	if (job->rec.fault.hw_error == SPYRE_ERR_FAULT ||
	    job->rec.fault.hw_error == SPYRE_ERR_ENGINE)
		spyre_dump_walk(&b, job->ctx, job->rec.fault.addr);
	h->sections = b.sections;
	h->total_size = b.len;

	atomic_inc(&sdev->coredumps);
	drm_dbg(&sdev->drm, "coredump: reason %u, hwq %u, job %llu, %zu bytes\n", reason,
		q->idx, job->rec.seq, b.len);
	/* Takes the buffer (vfree()), also when a dump of the card is pending. */
	dev_coredumpv(&pdev->dev, b.base, b.len, GFP_KERNEL);
}

/**
 * spyre_coredump_hang() - the coredump of a job that timed out
 * @sdev: the device
 * @job: the hung job, still on its queue's in-flight list
 */
void spyre_coredump_hang(struct spyre_device *sdev, struct spyre_job *job)
{
	struct spyre_coredump_job cj = {
		.ctx = job->ctx, .uqueue = job->uq->id,
		.rec = { .seq = job->user_seq,
			 .fault = { .error = DRM_SPYRE_ERROR_TIMEOUT, .packet = ~0u, .core = ~0u,
				    .pc = ~0u } },
		.hw_seqno = job->hw_fence ? job->hw_fence->seqno : 0,
		.npackets = job->npackets, .nwaits = job->nwaits,
		.ring_start = job->ring_start, .ring_end = job->ring_end,
	};

	spyre_coredump_capture(sdev, SPYRE_DUMP_REASON_HANG, job->hwq, &cj);
}
