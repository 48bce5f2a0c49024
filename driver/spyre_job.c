// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_job.c - job submission: hardware queues, the DRM GPU scheduler,
 * hardware fences, completion and error interrupts, timeouts and recovery,
 * and the kernel queue the driver uses to clear device memory.
 *
 * One drm_gpu_scheduler feeds each hardware queue but the last, which the
 * kernel keeps for itself. A user queue is a scheduler entity on one
 * hardware queue of its priority class. A job's packets go to the ring with
 * seq = (job << 16) | packet index; the last packet uses index 0xffff and
 * asks for an interrupt, so the completion word passes (job << 16) | 0xffff
 * exactly when the whole job is done, and a failed packet's seq names both
 * the job and the packet.
 */
#include <linux/delay.h>
#include <linux/dma-fence.h>
#include <linux/dma-fence-chain.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/interrupt.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>
#include <drm/drm_syncobj.h>

#include "spyre_accel.h"
#include "spyre_drv.h"
#include "spyre_gem.h"
#include "spyre_hw.h"

#define SPYRE_SEQ_LAST	0xffff
#define SPYRE_MAX_DEV_WAITS 8

static bool device_deps = true;
module_param(device_deps, bool, 0644);
MODULE_PARM_DESC(device_deps,
		 "Turn dependencies on jobs of another hardware queue of the card into device-side WAIT packets (default: on)");

struct spyre_job {
	struct drm_sched_job base;
	struct spyre_uqueue *uq;
	struct spyre_ctx *ctx;
	struct spyre_hwq *hwq;
	struct dma_fence *hw_fence;
	struct list_head link;		/* in hwq->inflight */
	u8 *packets;
	u32 npackets;
	struct drm_gem_object **bos;
	u32 nbos;
	u32 ring_start;
	u32 ring_end;
	u64 user_seq;
	bool guilty;
	/* Producers on other hardware queues this job waits for on the device. */
	struct drm_sched_fence *dev_deps[SPYRE_MAX_DEV_WAITS];
	u32 ndev_deps;
	u32 nwaits;		/* WAIT packets written before the job's own */
};

static inline struct spyre_job *to_spyre_job(struct drm_sched_job *j)
{
	return container_of(j, struct spyre_job, base);
}

static const char *spyre_fence_driver_name(struct dma_fence *f)
{
	return DRIVER_NAME;
}

static const char *spyre_fence_timeline_name(struct dma_fence *f)
{
	return "spyre-hwq";
}

static const struct dma_fence_ops spyre_fence_ops = {
	.get_driver_name = spyre_fence_driver_name,
	.get_timeline_name = spyre_fence_timeline_name,
};

/* Completion interrupt: signal every job whose last packet completed. */
static void spyre_hwq_signal(struct spyre_hwq *q)
{
	struct spyre_job *job, *tmp;
	unsigned long flags;
	u64 done;

	spin_lock_irqsave(&q->lock, flags);
	done = le64_to_cpu(READ_ONCE(*q->compl));
	list_for_each_entry_safe(job, tmp, &q->inflight, link) {
		if (done < (job->hw_fence->seqno << 16 | SPYRE_SEQ_LAST))
			break;
		list_del_init(&job->link);
		dma_fence_signal_locked(job->hw_fence);
		q->jobs_done++;
	}
	if (list_empty(&q->inflight) && q->busy_since) {
		q->busy_ns += ktime_get_ns() - q->busy_since;
		q->busy_since = 0;
	}
	spin_unlock_irqrestore(&q->lock, flags);
}

static irqreturn_t spyre_hwq_irq(int irq, void *arg)
{
	spyre_hwq_signal(arg);
	return IRQ_HANDLED;
}

static irqreturn_t spyre_error_irq(int irq, void *arg)
{
	struct spyre_device *sdev = arg;

	queue_work(system_unbound_wq, &sdev->error_work);
	return IRQ_HANDLED;
}

static void spyre_uq_record(struct spyre_uqueue *uq, u64 seq, u32 error, u32 hw_error,
			    u64 addr, u32 info, u32 packet, u32 core, u32 pc)
{
	unsigned long flags;

	spin_lock_irqsave(&uq->err_lock, flags);
	uq->error_count++;
	uq->err_seq = seq;
	uq->error = error;
	uq->hw_error = hw_error;
	uq->fault_addr = addr;
	uq->fault_info = info;
	uq->packet = packet;
	uq->core = core;
	uq->pc = pc;
	spin_unlock_irqrestore(&uq->err_lock, flags);
}

static void spyre_fault_log(struct spyre_device *sdev, struct spyre_job *job, u32 hwq,
			    u32 error, u64 addr, u32 info)
{
	unsigned long flags;
	unsigned int i;

	spin_lock_irqsave(&sdev->fault_log_lock, flags);
	i = sdev->fault_log_next++ % SPYRE_FAULT_LOG;
	sdev->fault_log[i].ctx = job ? job->ctx->id : 0;
	sdev->fault_log[i].hwq = hwq;
	sdev->fault_log[i].error = error;
	sdev->fault_log[i].fault_info = info;
	sdev->fault_log[i].seq = job ? job->user_seq : 0;
	sdev->fault_log[i].addr = addr;
	spin_unlock_irqrestore(&sdev->fault_log_lock, flags);
}

/* A queue stopped on a packet error: fail that job only and restart after it. */
static void spyre_hwq_handle_error(struct spyre_hwq *q)
{
	struct spyre_device *sdev = q->sdev;
	struct spyre_job *job = NULL, *j;
	u32 base = SPYRE_QREG(q->idx, 0), error, info, head, pkt, core, pc;
	unsigned long flags;
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

	spin_lock_irqsave(&q->lock, flags);
	list_for_each_entry(j, &q->inflight, link) {
		/* The job whose ring range holds HEAD failed. */
		if ((s32)(head - j->ring_start) >= 0 && (s32)(head - j->ring_end) < 0) {
			job = j;
			break;
		}
	}
	if (job)
		list_del_init(&job->link);
	spin_unlock_irqrestore(&q->lock, flags);

	pkt = seq & 0xffff;
	if (job && pkt == SPYRE_SEQ_LAST)
		pkt = job->npackets - 1;
	else if (job && pkt >= job->nwaits)
		pkt -= job->nwaits;
	atomic_inc(&sdev->faults);
	spyre_fault_log(sdev, job, q->idx, error, addr, info);
	if (job) {
		/* Record first: whoever the fence wakes reads the error at once. */
		spyre_uq_record(job->uq, job->user_seq, DRM_SPYRE_ERROR_FAULT, error, addr,
				info, pkt, core, pc);
		dma_fence_set_error(job->hw_fence, -EIO);
		dma_fence_signal(job->hw_fence);
	}
	drm_dbg(&sdev->drm, "hwq %u: job %llu packet %u failed: error %u addr 0x%llx info 0x%x\n",
		q->idx, job ? job->user_seq : 0, pkt, error, addr, info);

	/* Restart after the failed job (or the failed packet if none owns it). */
	spyre_hw_reg_write(sdev, base + SPYRE_Q_CTRL, q->prio << SPYRE_QCTRL_PRIO_SHIFT);
	spyre_hw_reg_write(sdev, base + SPYRE_Q_HEAD, job ? job->ring_end : head + 1);
	spyre_hw_reg_write(sdev, base + SPYRE_Q_CTRL,
			   SPYRE_QCTRL_ENABLE | q->prio << SPYRE_QCTRL_PRIO_SHIFT);
}

static void spyre_error_work(struct work_struct *work)
{
	struct spyre_device *sdev = container_of(work, struct spyre_device, error_work);
	unsigned int i;
	u64 bits;
	int idx;

	if (!drm_dev_enter(&sdev->drm, &idx))
		return;
	bits = spyre_hw_reg_read(sdev, SPYRE_REG_ERR_QUEUES_LO) |
	       (u64)spyre_hw_reg_read(sdev, SPYRE_REG_ERR_QUEUES_HI) << 32;
	for (i = 0; i < sdev->nr_hwq; i++) {
		if (!(bits & BIT_ULL(i)))
			continue;
		spyre_hwq_handle_error(&sdev->hwq[i]);
	}
	/* Acknowledge only what was handled; the kernel queue polls its own. */
	bits &= GENMASK_ULL(sdev->nr_hwq - 1, 0);
	spyre_hw_reg_write(sdev, SPYRE_REG_ERR_QUEUES_LO, lower_32_bits(bits));
	spyre_hw_reg_write(sdev, SPYRE_REG_ERR_QUEUES_HI, upper_32_bits(bits));
	drm_dev_exit(idx);
}

static struct dma_fence *spyre_run_job(struct drm_sched_job *sched_job)
{
	struct spyre_job *job = to_spyre_job(sched_job);
	struct spyre_hwq *q = job->hwq;
	struct spyre_device *sdev = q->sdev;
	unsigned long flags;
	struct dma_fence *fence;
	u32 i, slot;
	int idx;

	if (job->guilty)
		return ERR_PTR(-ETIMEDOUT);
	if (READ_ONCE(job->ctx->banned)) {
		spyre_uq_record(job->uq, job->user_seq, DRM_SPYRE_ERROR_CANCELED, 0, 0, 0, 0,
				~0u, ~0u);
		return ERR_PTR(-ECANCELED);
	}
	if (sched_job->s_fence->finished.error)
		return ERR_PTR(sched_job->s_fence->finished.error);
	if (!drm_dev_enter(&sdev->drm, &idx))
		return ERR_PTR(-ENODEV);

	fence = kzalloc(sizeof(*fence), GFP_KERNEL);
	if (!fence) {
		drm_dev_exit(idx);
		return ERR_PTR(-ENOMEM);
	}

	spin_lock_irqsave(&q->lock, flags);
	dma_fence_init(fence, &spyre_fence_ops, &q->lock, q->fence_ctx, ++q->seqno);
	dma_fence_put(job->hw_fence);
	job->hw_fence = dma_fence_get(fence);
	job->ring_start = q->tail;
	job->nwaits = 0;
	for (i = 0; i < job->ndev_deps; i++) {
		struct drm_sched_fence *dep = job->dev_deps[i];
		struct dma_fence *parent = READ_ONCE(dep->parent);
		struct spyre_hwq *pq = container_of(dep->sched, struct spyre_hwq, sched);
		struct spyre_pkt_sem *w;

		/* Producer done, failed or never run: nothing to wait for. */
		if (!parent || dma_fence_is_signaled(parent))
			continue;
		w = q->ring + (size_t)(q->tail++ % SPYRE_RING_PACKETS) * SPYRE_PKT_SIZE;
		memset(w, 0, sizeof(*w));
		w->hdr.opcode = SPYRE_OP_WAIT;
		w->hdr.version = SPYRE_PKT_VERSION;
		w->hdr.seq = cpu_to_le64(fence->seqno << 16 | job->nwaits);
		w->addr = cpu_to_le64(pq->compl_dma);
		w->value = cpu_to_le64(parent->seqno << 16 | SPYRE_SEQ_LAST);
		w->space = SPYRE_AS_HOST;
		job->nwaits++;
		atomic_inc(&sdev->device_waits);
	}
	for (i = 0; i < job->npackets; i++) {
		struct spyre_pkt_hdr *h;

		slot = q->tail++ % SPYRE_RING_PACKETS;
		h = q->ring + (size_t)slot * SPYRE_PKT_SIZE;
		memcpy(h, job->packets + (size_t)i * SPYRE_PKT_SIZE, SPYRE_PKT_SIZE);
		h->ctx = cpu_to_le16(job->ctx->id);
		if (i == job->npackets - 1) {
			h->seq = cpu_to_le64(fence->seqno << 16 | SPYRE_SEQ_LAST);
			h->flags = cpu_to_le16(SPYRE_PKT_F_IRQ);
		} else {
			h->seq = cpu_to_le64(fence->seqno << 16 | (job->nwaits + i));
		}
	}
	job->ring_end = q->tail;
	list_add_tail(&job->link, &q->inflight);
	if (!q->busy_since)
		q->busy_since = ktime_get_ns();
	spin_unlock_irqrestore(&q->lock, flags);

	/* writel() orders the ring stores before the doorbell. */
	spyre_hw_reg_write(sdev, SPYRE_QREG(q->idx, SPYRE_Q_TAIL), q->tail);
	drm_dev_exit(idx);
	return fence;
}

static void spyre_uqueue_release(struct kref *kref);

static void spyre_free_job(struct drm_sched_job *sched_job)
{
	struct spyre_job *job = to_spyre_job(sched_job);
	u32 i;

	drm_sched_job_cleanup(sched_job);
	for (i = 0; i < job->ndev_deps; i++)
		dma_fence_put(&job->dev_deps[i]->finished);
	for (i = 0; i < job->nbos; i++)
		drm_gem_object_put(job->bos[i]);
	kvfree(job->bos);
	kvfree(job->packets);
	dma_fence_put(job->hw_fence);
	kref_put(&job->uq->ref, spyre_uqueue_release);
	spyre_ctx_put(job->ctx);
	kfree(job);
}

/* Reset a hardware queue and fail whatever it still had in flight. */
static void spyre_hwq_reset_locked(struct spyre_hwq *q, int error)
{
	struct spyre_job *job, *tmp;
	unsigned long flags;

	spyre_hw_queue_reset(q);
	spin_lock_irqsave(&q->lock, flags);
	list_for_each_entry_safe(job, tmp, &q->inflight, link) {
		list_del_init(&job->link);
		dma_fence_set_error(job->hw_fence, error);
		dma_fence_signal_locked(job->hw_fence);
	}
	if (q->busy_since) {
		q->busy_ns += ktime_get_ns() - q->busy_since;
		q->busy_since = 0;
	}
	q->tail = 0;
	/*
	 * Device-side waiters on this queue wait for completion values of jobs
	 * that were just canceled (or will run again with new numbers): count
	 * every number handed out so far as done, so no waiter hangs.
	 */
	WRITE_ONCE(*q->compl, cpu_to_le64(q->seqno << 16 | SPYRE_SEQ_LAST));
	spin_unlock_irqrestore(&q->lock, flags);
	spyre_hw_queue_start(q);
}

/* Still waiting on the device for a producer on another queue? */
static bool spyre_job_waiting_on_producer(struct spyre_job *job)
{
	struct dma_fence *parent;
	u32 i;

	for (i = 0; i < job->ndev_deps; i++) {
		parent = READ_ONCE(job->dev_deps[i]->parent);
		if (parent && !dma_fence_is_signaled(parent))
			return true;
	}
	return false;
}

static enum drm_gpu_sched_stat spyre_timedout_job(struct drm_sched_job *sched_job)
{
	struct spyre_job *job = to_spyre_job(sched_job);
	struct spyre_hwq *q = job->hwq;
	struct spyre_device *sdev = q->sdev;
	int idx;

	if (!drm_dev_enter(&sdev->drm, &idx))
		return DRM_GPU_SCHED_STAT_ENODEV;

	/*
	 * A job that completed while the timeout fired is not hung; a job
	 * blocked on the device behind a producer of another queue is not
	 * hung itself: the producer's own timeout decides. Put it back on the
	 * pending list (the scheduler took it off) and re-arm.
	 */
	if (dma_fence_is_signaled(job->hw_fence) || spyre_job_waiting_on_producer(job)) {
		spin_lock(&q->sched.job_list_lock);
		list_add(&sched_job->list, &q->sched.pending_list);
		spin_unlock(&q->sched.job_list_lock);
		drm_dev_exit(idx);
		return DRM_GPU_SCHED_STAT_NOMINAL;
	}

	drm_sched_stop(&q->sched, sched_job);
	spyre_hwq_reset_locked(q, -ECANCELED);
	atomic_inc(&sdev->resets);

	/* The job that hung fails; the context is banned after repeated hangs. */
	job->guilty = true;
	spyre_uq_record(job->uq, job->user_seq, DRM_SPYRE_ERROR_TIMEOUT, 0, 0, 0, 0, ~0u, ~0u);
	spyre_fault_log(sdev, job, q->idx, 0, 0, 0);
	if (atomic_inc_return(&job->ctx->hangs) >= SPYRE_BAN_HANGS)
		WRITE_ONCE(job->ctx->banned, true);
	drm_dbg(&sdev->drm, "hwq %u: job %llu of context %u timed out; queue reset\n",
		q->idx, job->user_seq, job->ctx->id);

	/* Everything else that was pending runs again. */
	drm_sched_resubmit_jobs(&q->sched);
	drm_sched_start(&q->sched);
	drm_dev_exit(idx);
	return DRM_GPU_SCHED_STAT_NOMINAL;
}

static const struct drm_sched_backend_ops spyre_sched_ops = {
	.run_job = spyre_run_job,
	.timedout_job = spyre_timedout_job,
	.free_job = spyre_free_job,
};

/* ---- the kernel queue: clearing device memory -------------------------- */

#define SPYRE_ZERO_CHUNK	SZ_2M
#define SPYRE_ZERO_SGES		128	/* one COPY clears up to 256 MiB */

static void spyre_kq_start(struct spyre_device *sdev)
{
	struct spyre_kq *kq = &sdev->kq;
	u32 base = SPYRE_QREG(kq->idx, 0);

	spyre_hw_reg_write(sdev, base + SPYRE_Q_CTRL, SPYRE_QCTRL_RESET);
	kq->tail = 0;
	spyre_hw_reg_write(sdev, base + SPYRE_Q_BASE_LO, lower_32_bits(kq->ring_dma));
	spyre_hw_reg_write(sdev, base + SPYRE_Q_BASE_HI, upper_32_bits(kq->ring_dma));
	spyre_hw_reg_write(sdev, base + SPYRE_Q_SIZE, SPYRE_RING_PACKETS);
	spyre_hw_reg_write(sdev, base + SPYRE_Q_COMPL_LO, lower_32_bits(kq->compl_dma));
	spyre_hw_reg_write(sdev, base + SPYRE_Q_COMPL_HI, upper_32_bits(kq->compl_dma));
	spyre_hw_reg_write(sdev, base + SPYRE_Q_CTRL, SPYRE_QCTRL_ENABLE);
}

static int spyre_kq_copy(struct spyre_device *sdev, u64 dst, u64 size)
{
	struct spyre_kq *kq = &sdev->kq;
	u32 base = SPYRE_QREG(kq->idx, 0);
	struct spyre_pkt_copy *p;
	unsigned long end;

	lockdep_assert_held(&kq->lock);
	p = kq->ring + (kq->tail % SPYRE_RING_PACKETS) * SPYRE_PKT_SIZE;
	memset(p, 0, sizeof(*p));
	p->hdr.opcode = SPYRE_OP_COPY;
	p->hdr.version = SPYRE_PKT_VERSION;
	p->hdr.seq = cpu_to_le64(++kq->seq);
	p->src = cpu_to_le64(kq->sgl_dma);
	p->src_space = SPYRE_AS_HOST_SGL;
	p->dst = cpu_to_le64(dst);
	p->dst_space = SPYRE_AS_DEVPHYS;
	p->size = cpu_to_le64(size);
	kq->tail++;
	spyre_hw_reg_write(sdev, base + SPYRE_Q_TAIL, kq->tail);

	end = jiffies + msecs_to_jiffies(10000);
	while (le64_to_cpu(READ_ONCE(*kq->compl)) != kq->seq) {
		if (spyre_hw_reg_read(sdev, base + SPYRE_Q_STATUS) & SPYRE_QSTAT_ERROR)
			return -EIO;
		if (time_after(jiffies, end))
			return -ETIMEDOUT;
		usleep_range(20, 100);
	}
	return 0;
}

/**
 * spyre_kq_zero() - clear device memory blocks with the device's DMA engine
 * @sdev: the device
 * @blocks: gpu_buddy blocks
 *
 * COPYs from a scatter-gather list that repeats one 2 MiB zero buffer, on
 * the queue the kernel keeps for itself. Synchronous.
 *
 * Return: 0, -EIO when the device failed the copy, -ETIMEDOUT, -ENODEV.
 */
int spyre_kq_zero(struct spyre_device *sdev, struct list_head *blocks)
{
	const u64 max = (u64)SPYRE_ZERO_CHUNK * SPYRE_ZERO_SGES;
	struct spyre_kq *kq = &sdev->kq;
	struct gpu_buddy_block *block;
	int ret = 0, idx;

	if (!drm_dev_enter(&sdev->drm, &idx))
		return -ENODEV;
	mutex_lock(&kq->lock);
	list_for_each_entry(block, blocks, link) {
		u64 off = gpu_buddy_block_offset(block);
		u64 end = off + gpu_buddy_block_size(&sdev->mem, block);

		for (; off < end && !ret; off += max)
			ret = spyre_kq_copy(sdev, off, min(max, end - off));
		if (ret)
			break;
	}
	if (ret) {
		drm_err(&sdev->drm, "clearing device memory failed: %d\n", ret);
		spyre_kq_start(sdev);
	}
	mutex_unlock(&kq->lock);
	drm_dev_exit(idx);
	return ret;
}

static int spyre_kq_init(struct spyre_device *sdev)
{
	struct device *dev = sdev->drm.dev;
	struct spyre_kq *kq = &sdev->kq;
	struct spyre_sge *sge;
	int i;

	mutex_init(&kq->lock);
	kq->idx = sdev->caps.queues - 1;
	kq->ring = dmam_alloc_coherent(dev, SPYRE_RING_PACKETS * SPYRE_PKT_SIZE, &kq->ring_dma,
				       GFP_KERNEL);
	kq->compl = dmam_alloc_coherent(dev, sizeof(u64), &kq->compl_dma, GFP_KERNEL);
	kq->zero = dmam_alloc_coherent(dev, SPYRE_ZERO_CHUNK, &kq->zero_dma, GFP_KERNEL);
	kq->sgl = dmam_alloc_coherent(dev, SPYRE_ZERO_SGES * sizeof(*sge), &kq->sgl_dma,
				      GFP_KERNEL);
	if (!kq->ring || !kq->compl || !kq->zero || !kq->sgl)
		return -ENOMEM;
	sge = kq->sgl;
	for (i = 0; i < SPYRE_ZERO_SGES; i++) {
		sge[i].addr = cpu_to_le64(kq->zero_dma);
		sge[i].len = cpu_to_le64(SPYRE_ZERO_CHUNK);
	}
	spyre_kq_start(sdev);
	return 0;
}

/* ---- hardware queues ----------------------------------------------------- */

static int spyre_hwq_init(struct spyre_device *sdev, struct spyre_hwq *q, unsigned int idx)
{
	struct pci_dev *pdev = to_pci_dev(sdev->drm.dev);
	struct drm_sched_init_args args = {
		.ops = &spyre_sched_ops,
		.num_rqs = DRM_SCHED_PRIORITY_COUNT,
		.credit_limit = SPYRE_RING_PACKETS - 1,
		.hang_limit = 0,
		.timeout = msecs_to_jiffies(SPYRE_JOB_TIMEOUT_MS),
		.name = "spyre",
		.dev = sdev->drm.dev,
	};
	int ret;

	q->sdev = sdev;
	q->idx = idx;
	/* Spread the device priorities 0..3 over the queues. */
	q->prio = idx % (SPYRE_QCTRL_MAX_PRIO + 1);
	spin_lock_init(&q->lock);
	INIT_LIST_HEAD(&q->inflight);
	q->fence_ctx = dma_fence_context_alloc(1);
	q->ring = dmam_alloc_coherent(sdev->drm.dev, SPYRE_RING_PACKETS * SPYRE_PKT_SIZE,
				      &q->ring_dma, GFP_KERNEL);
	q->compl = dmam_alloc_coherent(sdev->drm.dev, sizeof(u64), &q->compl_dma, GFP_KERNEL);
	if (!q->ring || !q->compl)
		return -ENOMEM;
	spyre_hw_queue_start(q);

	ret = devm_request_irq(&pdev->dev, pci_irq_vector(pdev, idx), spyre_hwq_irq, 0,
			       "spyre-queue", q);
	if (ret)
		return ret;
	ret = drm_sched_init(&q->sched, &args);
	if (ret)
		return ret;
	q->sched_ready = true;
	return 0;
}

int spyre_job_init(struct spyre_device *sdev)
{
	struct pci_dev *pdev = to_pci_dev(sdev->drm.dev);
	unsigned int nvec = sdev->caps.queues + 1, i;
	int ret;

	if (sdev->caps.queues < 2) {
		drm_err(&sdev->drm, "need at least 2 hardware queues, device has %u\n",
			sdev->caps.queues);
		return -ENODEV;
	}
	INIT_WORK(&sdev->error_work, spyre_error_work);
	spin_lock_init(&sdev->fault_log_lock);

	ret = pci_alloc_irq_vectors(pdev, nvec, nvec, PCI_IRQ_MSIX);
	if (ret < 0) {
		drm_err(&sdev->drm, "cannot get %u MSI-X vectors: %d\n", nvec, ret);
		return ret;
	}
	ret = devm_request_irq(&pdev->dev, pci_irq_vector(pdev, sdev->caps.queues),
			       spyre_error_irq, 0, "spyre-error", sdev);
	if (ret)
		return ret;

	ret = spyre_kq_init(sdev);
	if (ret)
		return ret;

	/* Freed with the DRM device: schedulers outlive an unplugged card. */
	sdev->hwq = drmm_kcalloc(&sdev->drm, sdev->caps.queues - 1, sizeof(*sdev->hwq),
				 GFP_KERNEL);
	if (!sdev->hwq)
		return -ENOMEM;
	for (i = 0; i < sdev->caps.queues - 1; i++) {
		sdev->nr_hwq = i + 1;
		ret = spyre_hwq_init(sdev, &sdev->hwq[i], i);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Device gone (remove) or probe failed: stop feeding the hardware and fail
 * everything in flight. The schedulers stay allocated for open files.
 */
void spyre_job_stop(struct spyre_device *sdev)
{
	unsigned int i;

	cancel_work_sync(&sdev->error_work);
	for (i = 0; i < sdev->nr_hwq; i++) {
		struct spyre_hwq *q = &sdev->hwq[i];
		struct spyre_job *job, *tmp;
		unsigned long flags;

		if (!q->sched_ready)
			continue;
		drm_sched_wqueue_stop(&q->sched);
		spin_lock_irqsave(&q->lock, flags);
		list_for_each_entry_safe(job, tmp, &q->inflight, link) {
			list_del_init(&job->link);
			dma_fence_set_error(job->hw_fence, -ENODEV);
			dma_fence_signal_locked(job->hw_fence);
		}
		spin_unlock_irqrestore(&q->lock, flags);
	}
}

/* Last reference to the DRM device gone: free the schedulers. */
void spyre_job_fini(struct spyre_device *sdev)
{
	struct drm_sched_job *job, *tmp;
	unsigned int i;

	for (i = 0; i < sdev->nr_hwq; i++) {
		struct drm_gpu_scheduler *sched = &sdev->hwq[i].sched;

		if (!sdev->hwq[i].sched_ready)
			continue;
		/*
		 * spyre_job_stop() stopped the scheduler's work with jobs on
		 * its pending list (signaled with -ENODEV, never freed): free
		 * them, which drops their BO and context references.
		 */
		cancel_delayed_work_sync(&sched->work_tdr);
		list_for_each_entry_safe(job, tmp, &sched->pending_list, list) {
			list_del_init(&job->list);
			spyre_free_job(job);
		}
		drm_sched_fini(sched);
	}
}

/* ---- user queues --------------------------------------------------------- */

static void spyre_uqueue_release(struct kref *kref)
{
	struct spyre_uqueue *uq = container_of(kref, struct spyre_uqueue, ref);

	atomic_dec(&uq->hwq->nr_uqueues);
	mutex_destroy(&uq->submit_lock);
	kfree(uq);
}

static struct spyre_uqueue *spyre_uqueue_get(struct spyre_ctx *ctx, u32 id)
{
	struct spyre_uqueue *uq;

	xa_lock(&ctx->uqueues);
	uq = xa_load(&ctx->uqueues, id);
	if (uq)
		kref_get(&uq->ref);
	xa_unlock(&ctx->uqueues);
	return uq;
}

int spyre_queue_create_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
{
	static const enum drm_sched_priority prio_map[] = {
		DRM_SCHED_PRIORITY_LOW, DRM_SCHED_PRIORITY_NORMAL,
		DRM_SCHED_PRIORITY_HIGH, DRM_SCHED_PRIORITY_KERNEL,
	};
	struct spyre_device *sdev = to_spyre_device(dev);
	struct drm_spyre_queue_create *args = data;
	struct spyre_ctx *ctx = file->driver_priv;
	struct drm_gpu_scheduler *sched;
	struct spyre_uqueue *uq;
	unsigned int i, pick = 0, seen = 0;
	u32 want;
	int ret;

	if (args->flags || args->pad || args->priority > DRM_SPYRE_PRIO_REALTIME)
		return -EINVAL;
	if (args->priority == DRM_SPYRE_PRIO_REALTIME && !capable(CAP_SYS_NICE))
		return -EPERM;

	/*
	 * The hardware queue of the matching device priority (any queue when
	 * the device has too few to give each priority its own) that serves
	 * the fewest user queues. User queues sharing a hardware queue run in
	 * one FIFO, so a device-side WAIT in one of them also holds up the
	 * others: spreading them keeps that rare.
	 */
	want = sdev->nr_hwq > SPYRE_QCTRL_MAX_PRIO ? args->priority : U32_MAX;
	for (i = 0; i < sdev->nr_hwq; i++) {
		if (want != U32_MAX && sdev->hwq[i].prio != want)
			continue;
		if (!seen++ || atomic_read(&sdev->hwq[i].nr_uqueues) <
			       atomic_read(&sdev->hwq[pick].nr_uqueues))
			pick = i;
	}

	uq = kzalloc(sizeof(*uq), GFP_KERNEL);
	if (!uq)
		return -ENOMEM;
	kref_init(&uq->ref);
	uq->ctx = ctx;
	uq->hwq = &sdev->hwq[pick];
	atomic_inc(&uq->hwq->nr_uqueues);
	mutex_init(&uq->submit_lock);
	spin_lock_init(&uq->err_lock);
	uq->core = ~0u;
	uq->pc = ~0u;
	sched = &uq->hwq->sched;
	ret = drm_sched_entity_init(&uq->entity, prio_map[args->priority], &sched, 1, NULL);
	if (ret)
		goto err_free;
	ret = xa_alloc(&ctx->uqueues, &uq->id, uq, XA_LIMIT(1, SPYRE_MAX_UQUEUES), GFP_KERNEL);
	if (ret) {
		ret = ret == -EBUSY ? -ENOSPC : ret;
		goto err_entity;
	}
	args->queue_id = uq->id;
	return 0;

err_entity:
	drm_sched_entity_destroy(&uq->entity);
err_free:
	kref_put(&uq->ref, spyre_uqueue_release);
	return ret;
}

static void spyre_uqueue_destroy(struct spyre_uqueue *uq)
{
	/*
	 * A submit that already looked the queue up must not push to the
	 * entity once it is being destroyed: drm_sched drops such a job
	 * ("Trying to push to a killed entity") and its fences never signal.
	 */
	mutex_lock(&uq->submit_lock);
	uq->dead = true;
	mutex_unlock(&uq->submit_lock);
	/* Waits until the entity's queued jobs reached the scheduler. */
	drm_sched_entity_destroy(&uq->entity);
	kref_put(&uq->ref, spyre_uqueue_release);
}

int spyre_queue_destroy_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
{
	struct drm_spyre_queue_destroy *args = data;
	struct spyre_ctx *ctx = file->driver_priv;
	struct spyre_uqueue *uq;

	if (args->pad)
		return -EINVAL;
	uq = xa_erase(&ctx->uqueues, args->queue_id);
	if (!uq)
		return -ENOENT;
	spyre_uqueue_destroy(uq);
	return 0;
}

void spyre_ctx_queues_fini(struct spyre_ctx *ctx)
{
	struct spyre_uqueue *uq;
	unsigned long id;

	xa_for_each(&ctx->uqueues, id, uq) {
		xa_erase(&ctx->uqueues, id);
		spyre_uqueue_destroy(uq);
	}
}

/**
 * spyre_ctx_wait_idle() - wait for every job the context submitted so far
 * @ctx: the context
 *
 * Jobs reach buffers by address, not only through bo_handles, so nothing
 * the context maps may be unmapped or freed before this returns. The
 * context's reservation object holds the newest job fence of each of its
 * queues (jobs of one queue complete in order), including queues destroyed
 * since. Bounded: a hung job is reset after SPYRE_JOB_TIMEOUT_MS.
 */
void spyre_ctx_wait_idle(struct spyre_ctx *ctx)
{
	dma_resv_wait_timeout(ctx->jobs->resv, DMA_RESV_USAGE_BOOKKEEP, false,
			      MAX_SCHEDULE_TIMEOUT);
}

int spyre_queue_error_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
{
	struct drm_spyre_queue_error *args = data;
	struct spyre_ctx *ctx = file->driver_priv;
	struct spyre_uqueue *uq;
	unsigned long flags;

	if (args->pad)
		return -EINVAL;
	uq = spyre_uqueue_get(ctx, args->queue_id);
	if (!uq)
		return -ENOENT;
	spin_lock_irqsave(&uq->err_lock, flags);
	args->error_count = uq->error_count;
	args->job_seq = uq->err_seq;
	args->error = uq->error;
	args->hw_error = uq->hw_error;
	args->fault_addr = uq->fault_addr;
	args->fault_info = uq->fault_info;
	args->packet = uq->packet;
	args->core = uq->core;
	args->pc = uq->pc;
	spin_unlock_irqrestore(&uq->err_lock, flags);
	kref_put(&uq->ref, spyre_uqueue_release);
	return 0;
}

/* ---- submission ------------------------------------------------------------ */

static bool spyre_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

/* User packets: known opcode, driver-owned fields zero, only VIRT operands. */
static int spyre_validate_packet(const u8 *raw)
{
	const struct spyre_pkt_hdr *h = (const void *)raw;
	const struct spyre_pkt_copy *c = (const void *)raw;
	const struct spyre_pkt_launch *l = (const void *)raw;
	const struct spyre_pkt_sem *m = (const void *)raw;

	if (h->version != SPYRE_PKT_VERSION || h->flags || h->ctx || h->reserved || h->seq)
		return -EINVAL;
	switch (h->opcode) {
	case SPYRE_OP_NOP:
		/* No body: zero, so a later version can give it one. */
		return spyre_zero(raw + sizeof(*h), SPYRE_PKT_SIZE - sizeof(*h)) ? 0 : -EINVAL;
	case SPYRE_OP_LAUNCH:
		if (l->reserved0 || !spyre_zero(l->reserved, sizeof(l->reserved)))
			return -EINVAL;
		return 0;
	case SPYRE_OP_COPY:
		if (c->src_space != SPYRE_AS_VIRT || c->dst_space != SPYRE_AS_VIRT)
			return -EINVAL;
		return spyre_zero(c->reserved, sizeof(c->reserved)) ? 0 : -EINVAL;
	case SPYRE_OP_SIGNAL:
	case SPYRE_OP_WAIT:
	case SPYRE_OP_TIMESTAMP:
		if (m->space != SPYRE_AS_VIRT)
			return -EINVAL;
		return spyre_zero(m->reserved, sizeof(m->reserved)) ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}

static int spyre_cmp_resv(const void *a, const void *b)
{
	const struct drm_gem_object *x = *(struct drm_gem_object * const *)a;
	const struct drm_gem_object *y = *(struct drm_gem_object * const *)b;

	if (x->resv == y->resv)
		return 0;
	return x->resv < y->resv ? -1 : 1;
}

/*
 * Look the job's BOs up and keep each reservation object once: a handle may
 * be listed twice (or two handles share a dma-buf's resv), and locking one
 * resv twice in an acquire context fails with -EALREADY.
 */
static int spyre_job_add_bos(struct spyre_job *job, struct drm_file *file,
			     struct drm_spyre_submit *args)
{
	u32 i, n = 0;
	int ret;

	if (!args->bo_count)
		return 0;
	ret = drm_gem_objects_lookup(file, u64_to_user_ptr(args->bo_handles), args->bo_count,
				     &job->bos);
	if (ret) {
		/* The array holds what was found before the failure; NULL after. */
		for (i = 0; job->bos && i < args->bo_count && job->bos[i]; i++)
			drm_gem_object_put(job->bos[i]);
		kvfree(job->bos);
		job->bos = NULL;
		return ret;
	}
	sort(job->bos, args->bo_count, sizeof(*job->bos), spyre_cmp_resv, NULL);
	for (i = 0; i < args->bo_count; i++) {
		if (n && job->bos[n - 1]->resv == job->bos[i]->resv)
			drm_gem_object_put(job->bos[i]);
		else
			job->bos[n++] = job->bos[i];
	}
	job->nbos = n;
	return 0;
}

/*
 * Lock the reservation objects of the job's BOs and of its context's job
 * tracker together (one ww acquire context) and reserve a fence slot in
 * each, before the job is armed: once armed it must be pushed, so nothing
 * may fail after. On success the caller unlocks with
 * drm_gem_unlock_reservations(*objs, n, acquire) and frees *objs.
 */
static int spyre_job_lock(struct spyre_job *job, struct drm_gem_object ***objs, u32 *n,
			  struct ww_acquire_ctx *acquire)
{
	struct drm_gem_object **o;
	u32 i, count = job->nbos + 1;
	int ret;

	o = kvmalloc_array(count, sizeof(*o), GFP_KERNEL);
	if (!o)
		return -ENOMEM;
	for (i = 0; i < job->nbos; i++)
		o[i] = job->bos[i];
	o[job->nbos] = job->ctx->jobs;

	ret = drm_gem_lock_reservations(o, count, acquire);
	if (ret) {
		kvfree(o);
		return ret;
	}
	for (i = 0; i < count; i++) {
		ret = dma_resv_reserve_fences(o[i]->resv, 1);
		if (ret) {
			drm_gem_unlock_reservations(o, count, acquire);
			kvfree(o);
			return ret;
		}
	}
	*objs = o;
	*n = count;
	return 0;
}

/*
 * A fence of a job on another hardware queue of this card: wait only until
 * that job is on its ring, then let the device wait for its completion word.
 */
static struct drm_sched_fence *spyre_device_dep(struct spyre_job *job, struct dma_fence *f)
{
	struct spyre_device *sdev = job->hwq->sdev;
	struct drm_sched_fence *sf;
	unsigned int i;

	if (!device_deps || job->ndev_deps == SPYRE_MAX_DEV_WAITS)
		return NULL;
	sf = to_drm_sched_fence(dma_fence_chain_contained(f));
	if (!sf || sf->sched == &job->hwq->sched)
		return NULL;	/* same queue: FIFO already orders them */
	for (i = 0; i < sdev->nr_hwq; i++)
		if (sf->sched == &sdev->hwq[i].sched)
			return sf;
	return NULL;
}

static int spyre_job_add_in_syncs(struct spyre_job *job, struct drm_file *file,
				  struct drm_spyre_submit *args)
{
	struct drm_spyre_sync __user *user = u64_to_user_ptr(args->in_syncs);
	struct drm_sched_fence *sf;
	struct drm_spyre_sync s;
	struct dma_fence *f;
	u32 i;
	int ret;

	for (i = 0; i < args->in_sync_count; i++) {
		if (copy_from_user(&s, &user[i], sizeof(s)))
			return -EFAULT;
		if (s.flags)
			return -EINVAL;
		ret = drm_syncobj_find_fence(file, s.handle, s.point, 0, &f);
		if (ret)
			return ret;
		sf = dma_fence_is_signaled(f) ? NULL : spyre_device_dep(job, f);
		if (sf) {
			job->dev_deps[job->ndev_deps++] = sf;
			dma_fence_get(&sf->finished);
			ret = drm_sched_job_add_dependency(&job->base,
							   dma_fence_get(&sf->scheduled));
			dma_fence_put(f);
		} else {
			ret = drm_sched_job_add_dependency(&job->base, f);
		}
		if (ret)
			return ret;
	}
	return 0;
}

/* Free a job that was never pushed (armed or not). */
static void spyre_job_abort(struct spyre_job *job, bool sched_init)
{
	u32 i;

	for (i = 0; i < job->ndev_deps; i++)
		dma_fence_put(&job->dev_deps[i]->finished);
	if (sched_init)
		drm_sched_job_cleanup(&job->base);
	for (i = 0; i < job->nbos; i++)
		drm_gem_object_put(job->bos[i]);
	kvfree(job->bos);
	kvfree(job->packets);
	kref_put(&job->uq->ref, spyre_uqueue_release);
	spyre_ctx_put(job->ctx);
	kfree(job);
}

static int spyre_job_copy_packets(struct spyre_job *job, struct drm_spyre_submit *args)
{
	u32 i;
	int ret;

	job->npackets = args->packet_count;
	job->packets = kvmalloc_array(job->npackets, SPYRE_PKT_SIZE, GFP_KERNEL);
	if (!job->packets)
		return -ENOMEM;
	if (copy_from_user(job->packets, u64_to_user_ptr(args->packets),
			   (size_t)job->npackets * SPYRE_PKT_SIZE))
		return -EFAULT;
	for (i = 0; i < job->npackets; i++) {
		ret = spyre_validate_packet(job->packets + (size_t)i * SPYRE_PKT_SIZE);
		if (ret) {
			drm_dbg(&job->hwq->sdev->drm, "SUBMIT: packet %u rejected\n", i);
			return ret;
		}
	}
	return 0;
}

int spyre_submit_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
{
	struct drm_spyre_submit *args = data;
	struct spyre_ctx *ctx = file->driver_priv;
	struct dma_fence_chain *chain = NULL;
	struct drm_gem_object **locked;
	struct ww_acquire_ctx acquire;
	struct drm_syncobj *out = NULL;
	struct dma_fence *finished;
	struct spyre_uqueue *uq;
	struct spyre_job *job;
	u32 i, credits, nlocked;
	bool sched_init = false;
	int ret;

	if (args->flags || !args->packet_count ||
	    args->packet_count > DRM_SPYRE_MAX_JOB_PACKETS ||
	    args->bo_count > DRM_SPYRE_MAX_JOB_BOS ||
	    args->in_sync_count > DRM_SPYRE_MAX_JOB_IN_SYNCS ||
	    (!args->out_sync_handle && args->out_sync_point))
		return -EINVAL;
	if (READ_ONCE(ctx->banned))
		return -ECANCELED;
	uq = spyre_uqueue_get(ctx, args->queue_id);
	if (!uq)
		return -ENOENT;

	job = kzalloc(sizeof(*job), GFP_KERNEL);
	if (!job) {
		kref_put(&uq->ref, spyre_uqueue_release);
		return -ENOMEM;
	}
	INIT_LIST_HEAD(&job->link);
	job->uq = uq;		/* the job owns this reference now */
	job->ctx = spyre_ctx_get(ctx);
	job->hwq = uq->hwq;

	ret = spyre_job_copy_packets(job, args);
	if (ret)
		goto err_job;
	ret = spyre_job_add_bos(job, file, args);
	if (ret)
		goto err_job;

	if (args->out_sync_handle) {
		out = drm_syncobj_find(file, args->out_sync_handle);
		if (!out) {
			ret = -ENOENT;
			goto err_job;
		}
		if (args->out_sync_point) {
			chain = dma_fence_chain_alloc();
			if (!chain) {
				ret = -ENOMEM;
				goto err_job;
			}
		}
	}

	/* Credits are ring slots: the packets plus any device-side WAITs. */
	credits = job->npackets + min_t(u32, args->in_sync_count, SPYRE_MAX_DEV_WAITS);
	ret = drm_sched_job_init(&job->base, &uq->entity, credits, ctx, file->client_id);
	if (ret)
		goto err_job;
	sched_init = true;
	ret = spyre_job_add_in_syncs(job, file, args);
	if (ret)
		goto err_job;
	ret = spyre_job_lock(job, &locked, &nlocked, &acquire);
	if (ret)
		goto err_job;

	mutex_lock(&uq->submit_lock);
	if (uq->dead) {
		mutex_unlock(&uq->submit_lock);
		drm_gem_unlock_reservations(locked, nlocked, &acquire);
		kvfree(locked);
		ret = -ENOENT;
		goto err_job;
	}
	drm_sched_job_arm(&job->base);
	finished = dma_fence_get(&job->base.s_fence->finished);
	job->user_seq = ++uq->seq;
	args->job_seq = job->user_seq;
	for (i = 0; i < job->nbos; i++)
		dma_resv_add_fence(job->bos[i]->resv, finished, DMA_RESV_USAGE_WRITE);
	dma_resv_add_fence(ctx->jobs->resv, finished, DMA_RESV_USAGE_BOOKKEEP);
	drm_sched_entity_push_job(&job->base);
	mutex_unlock(&uq->submit_lock);
	drm_gem_unlock_reservations(locked, nlocked, &acquire);
	kvfree(locked);

	if (out) {
		if (chain)
			drm_syncobj_add_point(out, chain, finished, args->out_sync_point);
		else
			drm_syncobj_replace_fence(out, finished);
		drm_syncobj_put(out);
	}
	dma_fence_put(finished);
	return 0;

err_job:
	dma_fence_chain_free(chain);
	if (out)
		drm_syncobj_put(out);
	spyre_job_abort(job, sched_init);
	return ret;
}
