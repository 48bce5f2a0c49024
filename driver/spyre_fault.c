// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_fault.c - device errors. A packet error stops only its hardware
 * queue and raises the error interrupt; the handler fails that job alone
 * (its fences carry -EIO, its user queue records why for
 * DRM_IOCTL_SPYRE_QUEUE_ERROR), logs it for debugfs and restarts the queue
 * after the job.
 *
 * Locking: uq->err_lock protects a user queue's error record;
 * sdev->fault_log_lock the fault log. Both are leaf locks (IRQ-safe).
 */
#include <linux/dma-fence.h>
#include <linux/interrupt.h>
#include <linux/pci.h>
#include <linux/pm_runtime.h>
#include <linux/workqueue.h>

#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include "spyre_accel.h"
#include "spyre_coredump.h"
#include "spyre_ctx.h"
#include "spyre_drv.h"
#include "spyre_fault.h"
#include "spyre_hw.h"
#include "spyre_job.h"
#include "spyre_sched.h"
#include "spyre_uqueue.h"

static irqreturn_t spyre_error_irq(int irq, void *arg)
{
	struct spyre_device *sdev = arg;

	/* On the ordered reset queue: never during a timeout or device reset. */
	queue_work(sdev->reset_wq, &sdev->error_work);
	return IRQ_HANDLED;
}

/**
 * spyre_uq_record() - record why a job of @uq failed
 * @uq: the job's user queue
 * @rec: the record; DRM_IOCTL_SPYRE_QUEUE_ERROR reports the last one
 */
void spyre_uq_record(struct spyre_uqueue *uq, const struct spyre_fault_record *rec)
{
	unsigned long flags;

	spin_lock_irqsave(&uq->err_lock, flags);
	uq->error_count++;
	uq->last_error = *rec;
	spin_unlock_irqrestore(&uq->err_lock, flags);
}

/**
 * spyre_uq_fail() - record a failure the device did not report
 * @uq: the job's user queue
 * @seq: the job's sequence number
 * @error: DRM_SPYRE_ERROR_TIMEOUT or DRM_SPYRE_ERROR_CANCELED
 */
void spyre_uq_fail(struct spyre_uqueue *uq, u64 seq, u32 error)
{
	struct spyre_fault_record rec = {
		.seq = seq, .fault = { .error = error, .core = ~0u, .pc = ~0u },
	};

	spyre_uq_record(uq, &rec);
}

void spyre_fault_log(struct spyre_device *sdev, u32 ctx, u64 seq, u32 hwq, u32 error,
		     u64 addr, u32 info)
{
	unsigned long flags;
	unsigned int i;

	spin_lock_irqsave(&sdev->fault_log_lock, flags);
	i = sdev->fault_log_next++ % SPYRE_FAULT_LOG;
	sdev->fault_log[i].ctx = ctx;
	sdev->fault_log[i].hwq = hwq;
	sdev->fault_log[i].error = error;
	sdev->fault_log[i].fault_info = info;
	sdev->fault_log[i].seq = seq;
	sdev->fault_log[i].addr = addr;
	spin_unlock_irqrestore(&sdev->fault_log_lock, flags);
}

/* What the error handler needs of the failed job, copied under q->lock. */
struct spyre_failed_job {
	struct dma_fence *fence;	/* referenced */
	struct spyre_uqueue *uq;	/* referenced */
	struct spyre_ctx *ctxp;		/* referenced */
	u64 seq;
	u32 ctx;
	u64 hw_seqno;
	u32 npackets;
	u32 nwaits;
	u32 ring_start;
	u32 ring_end;
};

/*
 * Take the job whose ring range holds @head off the in-flight list. Once its
 * fence signals, the scheduler may free it at any moment, so everything the
 * handler uses afterwards is copied here, with references, under q->lock.
 */
static bool spyre_take_failed_job(struct spyre_hwq *q, u32 head, struct spyre_failed_job *out)
{
	struct spyre_job *job;
	unsigned long flags;
	bool found = false;

	spin_lock_irqsave(&q->lock, flags);
	list_for_each_entry(job, &q->inflight, link) {
		if ((s32)(head - job->ring_start) >= 0 && (s32)(head - job->ring_end) < 0) {
			spyre_hwq_remove_locked(q, job);
			out->fence = dma_fence_get(job->hw_fence);
			kref_get(&job->uq->ref);
			out->uq = job->uq;
			out->ctxp = spyre_ctx_get(job->ctx);
			out->seq = job->user_seq;
			out->ctx = job->ctx->id;
			out->npackets = job->npackets;
			out->nwaits = job->nwaits;
			out->ring_start = job->ring_start;
			out->ring_end = job->ring_end;
			out->hw_seqno = job->hw_fence->seqno;
			found = true;
			break;
		}
	}
	spin_unlock_irqrestore(&q->lock, flags);
	return found;
}

/*
 * The device never writes a failed job's completion value: the queue
 * restarts after it. Device-side WAITs of other queues on that value (a
 * consumer of the failed job, spyre_sched.c) would block until the next job
 * of this queue completes, or time out and be blamed for a hang. The queue
 * is stopped, so write the value for the device; it only grows.
 */
static void spyre_hwq_complete_failed(struct spyre_hwq *q, u64 hw_seqno)
{
	u64 done = hw_seqno << 16 | SPYRE_SEQ_LAST;
	unsigned long flags;

	spin_lock_irqsave(&q->lock, flags);
	if (le64_to_cpu(READ_ONCE(*q->compl)) < done)
		WRITE_ONCE(*q->compl, cpu_to_le64(done));
	spin_unlock_irqrestore(&q->lock, flags);
}

/* A queue stopped on a packet error: fail that job only and restart after it. */
static void spyre_hwq_handle_error(struct spyre_hwq *q)
{
	struct spyre_device *sdev = q->sdev;
	u32 base = SPYRE_QREG(q->idx, 0), error, info, head, pkt, core, pc;
	struct spyre_failed_job job = { };
	bool found;
	u64 seq, addr;

	/* Completed jobs before the failed one get their fences first. */
	spyre_hwq_signal(q);

	error = spyre_hw_reg_read(sdev, base + SPYRE_Q_ERROR);
	seq = spyre_hw_reg_read(sdev, base + SPYRE_Q_ERR_SEQ_LO) |
	      (u64)spyre_hw_reg_read(sdev, base + SPYRE_Q_ERR_SEQ_HI) << 32;
	addr = spyre_hw_reg_read(sdev, base + SPYRE_Q_FAULT_LO) |
	       (u64)spyre_hw_reg_read(sdev, base + SPYRE_Q_FAULT_HI) << 32;
	info = spyre_hw_reg_read(sdev, base + SPYRE_Q_FAULT_INFO);
	head = spyre_hw_reg_read(sdev, base + SPYRE_Q_HEAD);
	core = spyre_hw_reg_read(sdev, SPYRE_QENG(q->idx, SPYRE_QE_CORE));
	pc = spyre_hw_reg_read(sdev, SPYRE_QENG(q->idx, SPYRE_QE_PC));

	found = spyre_take_failed_job(q, head, &job);
	pkt = seq & 0xffff;
	if (found && pkt == SPYRE_SEQ_LAST)
		pkt = job.npackets - 1;
	else if (found && pkt >= job.nwaits)
		pkt -= job.nwaits;
	atomic_inc(&sdev->faults);
	spyre_fault_log(sdev, job.ctx, job.seq, q->idx, error, addr, info);
	if (found) {
		struct spyre_fault_record rec = {
			.seq = job.seq,
			.fault = { .error = DRM_SPYRE_ERROR_FAULT, .hw_error = error, .addr = addr,
				   .info = info, .packet = pkt, .core = core, .pc = pc },
		};

		/* Before the fence: once it signals, the job's BOs may go. */
		if (error == SPYRE_ERR_ENGINE) {
			struct spyre_coredump_job cj = {
				.ctx = job.ctxp, .uqueue = job.uq->id, .rec = rec,
				.hw_seqno = job.hw_seqno, .npackets = job.npackets,
				.nwaits = job.nwaits, .ring_start = job.ring_start,
				.ring_end = job.ring_end,
			};

			spyre_coredump_capture(sdev, SPYRE_DUMP_REASON_ENGINE_FAULT, q, &cj);
		}
		/* Record first: whoever the fence wakes reads the error at once. */
		spyre_uq_record(job.uq, &rec);
		dma_fence_set_error(job.fence, -EIO);
		spyre_hwq_complete_failed(q, job.hw_seqno);
		dma_fence_signal(job.fence);
		dma_fence_put(job.fence);
		spyre_uqueue_put(job.uq);
		spyre_ctx_put(job.ctxp);
	}
	drm_dbg(&sdev->drm, "hwq %u: job %llu packet %u failed: error %u addr 0x%llx info 0x%x\n",
		q->idx, job.seq, pkt, error, addr, info);

	/* Restart after the failed job (or the failed packet if none owns it). */
	spyre_hw_reg_write(sdev, base + SPYRE_Q_CTRL, q->prio << SPYRE_QCTRL_PRIO_SHIFT);
	spyre_hw_reg_write(sdev, base + SPYRE_Q_HEAD, found ? job.ring_end : head + 1);
	spyre_hw_reg_write(sdev, base + SPYRE_Q_CTRL,
			   SPYRE_QCTRL_ENABLE | q->prio << SPYRE_QCTRL_PRIO_SHIFT);
}

static void spyre_error_work(struct work_struct *work)
{
	struct spyre_device *sdev = container_of(work, struct spyre_device, error_work);
	unsigned int i;
	u64 bits;
	int idx, pm;

	if (!drm_dev_enter(&sdev->drm, &idx))
		return;
	/*
	 * Suspended (or suspending): the resume resets the device anyway. A
	 * negative value means runtime PM is off (disabled, or a kernel
	 * without CONFIG_PM): the card is powered, handle the error.
	 */
	pm = pm_runtime_get_if_active(sdev->drm.dev);
	if (!pm) {
		drm_dev_exit(idx);
		return;
	}
	/*
	 * Acknowledge only what is handled (the kernel queue polls its own),
	 * and before it is handled: the handler restarts the queue, whose next
	 * packet may fail at once and set its bit again, raising a new error
	 * interrupt that queues this work again. Acknowledged after the
	 * restart, that second error was cleared unseen and its queue stayed
	 * stopped until the job timeout blamed it for a hang (seen as a
	 * TIMEOUT among the DMA errors of copies from a peer card during its
	 * FLR).
	 */
	bits = spyre_hw_reg_read(sdev, SPYRE_REG_ERR_QUEUES_LO) |
	       (u64)spyre_hw_reg_read(sdev, SPYRE_REG_ERR_QUEUES_HI) << 32;
	bits &= GENMASK_ULL(sdev->nr_hwq - 1, 0);
	spyre_hw_reg_write(sdev, SPYRE_REG_ERR_QUEUES_LO, lower_32_bits(bits));
	spyre_hw_reg_write(sdev, SPYRE_REG_ERR_QUEUES_HI, upper_32_bits(bits));
	for (i = 0; i < sdev->nr_hwq; i++) {
		if (!(bits & BIT_ULL(i)))
			continue;
		spyre_hwq_handle_error(&sdev->hwq[i]);
	}
	if (pm > 0) {
		pm_runtime_mark_last_busy(sdev->drm.dev);
		pm_runtime_put_autosuspend(sdev->drm.dev);
	}
	drm_dev_exit(idx);
}

/**
 * spyre_fault_init() - the error interrupt and the fault log
 * @sdev: the device, MSI-X vectors allocated (the error vector follows the
 *	queues' vectors)
 *
 * Return: 0 or a negative errno from requesting the interrupt.
 */
int spyre_fault_init(struct spyre_device *sdev)
{
	struct pci_dev *pdev = to_pci_dev(sdev->drm.dev);

	INIT_WORK(&sdev->error_work, spyre_error_work);
	spin_lock_init(&sdev->fault_log_lock);
	return devm_request_irq(&pdev->dev, pci_irq_vector(pdev, sdev->caps.queues),
				spyre_error_irq, 0, "spyre-error", sdev);
}
