// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_sched.c - hardware queues: one DRM GPU scheduler feeds each hardware
 * queue but the last (the kernel's, spyre_kq.c); the backend writes a job's
 * packets to the ring, hardware fences signal from the completion
 * interrupt, a job that times out resets its queue and innocent jobs run
 * again. The ring numbering is in spyre_job.h.
 *
 * Locking: q->lock (spinlock, IRQ-safe) protects a queue's in-flight list,
 * its busy accounting and its hardware fences (it is their fence lock);
 * sdev->busy_lock, the device's busy accounting, nests inside it.
 * The scheduler serializes run_job and timedout_job per queue.
 */
#include <linux/dma-fence.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/iopoll.h>
#include <linux/pm_runtime.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>

#include "spyre_accel.h"
#include "spyre_coredump.h"
#include "spyre_ctx.h"
#include "spyre_drv.h"
#include "spyre_fault.h"
#include "spyre_hw.h"
#include "spyre_job.h"
#include "spyre_kq.h"
#include "spyre_sched.h"
#include "spyre_uqueue.h"

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

/*
 * Busy accounting, all under q->lock. A hardware queue is busy while its
 * in-flight list is not empty; the device is busy while any user queue is.
 * The job at the head of the list is the one the queue works on: it is
 * charged to its context from q->head_since until it leaves the list, so
 * the contexts' busy times add up to the queue's.
 */
static void spyre_hwq_busy_begin_locked(struct spyre_hwq *q, u64 now)
{
	struct spyre_device *sdev = q->sdev;

	lockdep_assert_held(&q->lock);
	q->busy_since = now;
	q->head_since = now;
	/* The device's clock read under its lock: its periods never overlap. */
	spin_lock(&sdev->busy_lock);
	if (!sdev->busy_queues++)
		sdev->busy_since = ktime_get_ns();
	spin_unlock(&sdev->busy_lock);
}

/*
 * The head job leaves the in-flight list (done, failed or canceled) and
 * drops the runtime PM reference spyre_run_job() took for it: the card may
 * autosuspend once no job is in flight.
 */
static void spyre_hwq_retire_locked(struct spyre_hwq *q, struct spyre_job *job, u64 now)
{
	struct device *dev = q->sdev->drm.dev;

	lockdep_assert_held(&q->lock);
	list_del_init(&job->link);
	atomic64_add(now - q->head_since, &job->ctx->busy_ns);
	q->head_since = now;
	pm_runtime_mark_last_busy(dev);
	pm_runtime_put_autosuspend(dev);
}

static void spyre_hwq_busy_end_locked(struct spyre_hwq *q, u64 now)
{
	struct spyre_device *sdev = q->sdev;

	lockdep_assert_held(&q->lock);
	if (!list_empty(&q->inflight) || !q->busy_since)
		return;
	q->busy_ns += now - q->busy_since;
	q->busy_since = 0;
	spin_lock(&sdev->busy_lock);
	if (!--sdev->busy_queues)
		sdev->busy_ns += ktime_get_ns() - sdev->busy_since;
	spin_unlock(&sdev->busy_lock);
}

/**
 * spyre_hwq_remove_locked() - take a failed job off the in-flight list
 * @q: its hardware queue
 * @job: the job at the head of @q's in-flight list
 *
 * For the error handler (spyre_fault.c), which fails the job itself: the
 * job's time is charged and the queue goes idle if it was the last.
 */
void spyre_hwq_remove_locked(struct spyre_hwq *q, struct spyre_job *job)
{
	u64 now = ktime_get_ns();

	spyre_hwq_retire_locked(q, job, now);
	spyre_hwq_busy_end_locked(q, now);
}

/* Completion interrupt: signal every job whose last packet completed. */
void spyre_hwq_signal(struct spyre_hwq *q)
{
	struct spyre_job *job, *tmp;
	unsigned long flags;
	u64 done, now;

	spin_lock_irqsave(&q->lock, flags);
	done = le64_to_cpu(READ_ONCE(*q->compl));
	now = ktime_get_ns();
	list_for_each_entry_safe(job, tmp, &q->inflight, link) {
		if (done < (job->hw_fence->seqno << 16 | SPYRE_SEQ_LAST))
			break;
		spyre_hwq_retire_locked(q, job, now);
		dma_fence_signal_locked(job->hw_fence);
		q->jobs_done++;
	}
	spyre_hwq_busy_end_locked(q, now);
	spin_unlock_irqrestore(&q->lock, flags);
}

/**
 * spyre_hwq_stats() - a hardware queue's busy time and completed jobs
 * @q: the queue
 * @busy_ns: time with at least one job in flight, the current period included
 * @jobs_done: jobs completed
 */
void spyre_hwq_stats(struct spyre_hwq *q, u64 *busy_ns, u64 *jobs_done)
{
	unsigned long flags;

	spin_lock_irqsave(&q->lock, flags);
	*busy_ns = q->busy_ns + (q->busy_since ? ktime_get_ns() - q->busy_since : 0);
	*jobs_done = q->jobs_done;
	spin_unlock_irqrestore(&q->lock, flags);
}

/**
 * spyre_sched_busy_ns() - time the device had at least one user job in flight
 * @sdev: the device
 *
 * Return: nanoseconds since probe with at least one user hardware queue
 * busy, the current busy period included.
 */
u64 spyre_sched_busy_ns(struct spyre_device *sdev)
{
	unsigned long flags;
	u64 busy;

	spin_lock_irqsave(&sdev->busy_lock, flags);
	busy = sdev->busy_ns;
	if (sdev->busy_queues)
		busy += ktime_get_ns() - sdev->busy_since;
	spin_unlock_irqrestore(&sdev->busy_lock, flags);
	return busy;
}

/**
 * spyre_sched_ctx_busy_ns() - engine time of a context's jobs
 * @sdev: the device
 * @ctx: the context
 *
 * The jobs that left the queues, plus the running time so far of each job
 * of @ctx at the head of a queue. A job that completes between the two
 * reads is missed once (never counted twice): the next read catches up,
 * as drm-usage-stats allows.
 *
 * Return: nanoseconds.
 */
u64 spyre_sched_ctx_busy_ns(struct spyre_device *sdev, struct spyre_ctx *ctx)
{
	u64 busy = atomic64_read(&ctx->busy_ns);
	unsigned long flags;
	unsigned int i;

	for (i = 0; i < sdev->nr_hwq; i++) {
		struct spyre_hwq *q = &sdev->hwq[i];
		struct spyre_job *head;

		spin_lock_irqsave(&q->lock, flags);
		head = list_first_entry_or_null(&q->inflight, struct spyre_job, link);
		if (head && head->ctx == ctx)
			busy += ktime_get_ns() - q->head_since;
		spin_unlock_irqrestore(&q->lock, flags);
	}
	return busy;
}

static irqreturn_t spyre_hwq_irq(int irq, void *arg)
{
	spyre_hwq_signal(arg);
	return IRQ_HANDLED;
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
		spyre_uq_fail(job->uq, job->user_seq, DRM_SPYRE_ERROR_CANCELED);
		return ERR_PTR(-ECANCELED);
	}
	if (sched_job->s_fence->finished.error)
		return ERR_PTR(sched_job->s_fence->finished.error);
	if (READ_ONCE(sdev->state) == SPYRE_DEV_STATE_WEDGED) {
		spyre_uq_fail(job->uq, job->user_seq, DRM_SPYRE_ERROR_RESET);
		return ERR_PTR(-EIO);
	}
	if (!drm_dev_enter(&sdev->drm, &idx))
		return ERR_PTR(-ENODEV);

	fence = kzalloc(sizeof(*fence), GFP_KERNEL);
	if (!fence) {
		drm_dev_exit(idx);
		return ERR_PTR(-ENOMEM);
	}
	/* Wake the card; held until the job leaves the ring (retire). */
	if (pm_runtime_resume_and_get(sdev->drm.dev) < 0) {
		kfree(fence);
		drm_dev_exit(idx);
		return ERR_PTR(-EIO);
	}

	spin_lock_irqsave(&q->lock, flags);
	dma_fence_init(fence, &spyre_fence_ops, &q->lock, q->fence_ctx, ++q->seqno);
	dma_fence_put(job->hw_fence);
	job->hw_fence = dma_fence_get(fence);
	job->ring_start = q->tail;
	/* Its progress counts from its first packet (spyre_job_progressed()). */
	job->tdr_done = job->ring_start;
	job->tdr_rearms = 0;
	job->tdr_idle = false;
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
		spyre_prep_sem(w, SPYRE_PKT_OP_WAIT, SPYRE_AS_HOST, pq->compl_dma,
			       parent->seqno << 16 | SPYRE_SEQ_LAST);
		w->hdr.seq = cpu_to_le64(fence->seqno << 16 | job->nwaits);
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
	if (list_empty(&q->inflight))
		spyre_hwq_busy_begin_locked(q, ktime_get_ns());
	list_add_tail(&job->link, &q->inflight);
	spin_unlock_irqrestore(&q->lock, flags);

	/* writel() orders the ring stores before the doorbell. */
	spyre_hw_reg_write(sdev, SPYRE_QREG(q->idx, SPYRE_Q_TAIL), q->tail);
	drm_dev_exit(idx);
	return fence;
}

/**
 * spyre_job_release() - free a job and drop everything it holds
 * @job: a job from spyre_submit_ioctl(), at any stage: not yet given to
 *	the scheduler (a failed submit) or done (the scheduler's free_job)
 */
void spyre_job_release(struct spyre_job *job)
{
	u32 i;

	if (job->base.s_fence)	/* drm_sched_job_init() ran: armed or not */
		drm_sched_job_cleanup(&job->base);
	for (i = 0; i < job->ndev_deps; i++)
		dma_fence_put(&job->dev_deps[i]->finished);
	for (i = 0; i < job->nbos; i++)
		drm_gem_object_put(job->bos[i]);
	kvfree(job->bos);
	kvfree(job->packets);
	dma_fence_put(job->hw_fence);
	spyre_uqueue_put(job->uq);
	spyre_ctx_put(job->ctx);
	kfree(job);
}

static void spyre_free_job(struct drm_sched_job *sched_job)
{
	spyre_job_release(to_spyre_job(sched_job));
}

/**
 * spyre_hwq_reset() - reset a hardware queue, fail what it had in flight
 * @q: the queue; the caller has stopped its scheduler
 * @error: the fences' error
 * @record: DRM_SPYRE_ERROR_* to record for each failed job's user queue,
 *	or DRM_SPYRE_ERROR_NONE to record nothing (the timeout handler
 *	records the guilty job itself and runs the others again)
 *
 * Takes q->lock. Restarts the queue with an empty ring.
 */
void spyre_hwq_reset(struct spyre_hwq *q, int error, u32 record)
{
	struct spyre_job *job, *tmp;
	unsigned long flags;
	u64 now;

	spyre_hw_queue_reset(q->sdev, q->idx);
	spin_lock_irqsave(&q->lock, flags);
	now = ktime_get_ns();
	list_for_each_entry_safe(job, tmp, &q->inflight, link) {
		if (record != DRM_SPYRE_ERROR_NONE)
			spyre_uq_fail(job->uq, job->user_seq, record);
		spyre_hwq_retire_locked(q, job, now);
		dma_fence_set_error(job->hw_fence, error);
		dma_fence_signal_locked(job->hw_fence);
	}
	spyre_hwq_busy_end_locked(q, now);
	q->tail = 0;
	/*
	 * Device-side waiters on this queue wait for completion values of jobs
	 * that were just canceled (or will run again with new numbers): count
	 * every number handed out so far as done, so no waiter hangs.
	 */
	WRITE_ONCE(*q->compl, cpu_to_le64(q->seqno << 16 | SPYRE_SEQ_LAST));
	spin_unlock_irqrestore(&q->lock, flags);
	spyre_hw_ring_start(q->sdev, q->idx, q->ring_dma, q->compl_dma, q->prio);
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

/*
 * A job that completed packets of its own (its device-side WAITs included)
 * since it reached the head of its queue, or since its last timeout, is
 * not hung: a long graph replay, an emulated card on a loaded host. A job
 * that only ever progresses is still stopped after SPYRE_JOB_MAX_REARMS
 * such timeouts; a card that fell off the bus (reads all ones) shows none.
 */
static bool spyre_job_progressed(struct spyre_hwq *q, struct spyre_job *job)
{
	u32 done = spyre_hw_reg_read(q->sdev, SPYRE_QREG(q->idx, SPYRE_Q_DONE));

	/*
	 * SPYRE_Q_DONE and the ring positions both count packets since the
	 * queue was enabled; @tdr_done starts at the job's first packet (what
	 * completed before it was the jobs ahead of it, whose end restarted
	 * the timeout) and moves with each timeout that found progress.
	 */
	if ((s32)(done - job->tdr_done) <= 0 || job->tdr_rearms >= SPYRE_JOB_MAX_REARMS)
		return false;
	job->tdr_done = done;
	job->tdr_rearms++;
	return true;
}

/*
 * A job submitted with a wait bound (SUBMIT's wait_bound_ms: a device-side
 * WAIT for a value another process or card writes later) is not hung within
 * that bound, counted once from the start of the first timeout that found it
 * idle (progress later does not restart it). Only while its hardware queue
 * is its own: a job of another user queue behind it on the ring (the FIFO is
 * shared; it may even be the writer) ends the exemption, and so does the
 * closing of its file.
 */
static bool spyre_job_within_wait_bound(struct spyre_hwq *q, struct spyre_job *job)
{
	struct drm_sched_job *s;
	bool shared = false;

	if (!job->wait_bound_ms || READ_ONCE(job->ctx->closing))
		return false;
	spin_lock(&q->sched.job_list_lock);
	list_for_each_entry(s, &q->sched.pending_list, list) {
		if (to_spyre_job(s)->uq != job->uq) {
			shared = true;
			break;
		}
	}
	spin_unlock(&q->sched.job_list_lock);
	if (shared)
		return false;
	if (!job->tdr_idle) {
		job->tdr_idle = true;
		job->tdr_idle_since = jiffies - msecs_to_jiffies(SPYRE_JOB_TIMEOUT_MS);
	}
	return time_before(jiffies, job->tdr_idle_since + msecs_to_jiffies(job->wait_bound_ms));
}

static enum drm_gpu_sched_stat spyre_timedout_job(struct drm_sched_job *sched_job)
{
	struct spyre_job *job = to_spyre_job(sched_job);
	struct spyre_hwq *q = job->hwq;
	struct spyre_device *sdev = q->sdev;
	unsigned long flags;
	bool on_ring;
	int idx;

	if (!drm_dev_enter(&sdev->drm, &idx))
		return DRM_GPU_SCHED_STAT_ENODEV;

	/*
	 * The scheduler arms the timeout before it calls run_job(), so a job
	 * whose run_job() has not yet put it on the ring (the card waking
	 * from runtime suspend, the worker preempted on a loaded host) has no
	 * hardware fence yet; run_job() sets it under q->lock.
	 */
	spin_lock_irqsave(&q->lock, flags);
	on_ring = job->hw_fence && !dma_fence_is_signaled_locked(job->hw_fence);
	spin_unlock_irqrestore(&q->lock, flags);

	/*
	 * A job not on the ring yet, or that completed while the timeout
	 * fired, is not hung; a job blocked on the device behind a producer
	 * of another queue is not hung itself: the producer's own timeout
	 * decides; nor is one whose queue made progress, nor one idle within
	 * its wait bound. Put it back on the pending list (the scheduler took
	 * it off) and re-arm.
	 */
	if (!on_ring || spyre_job_waiting_on_producer(job) || spyre_job_progressed(q, job) ||
	    spyre_job_within_wait_bound(q, job)) {
		spin_lock(&q->sched.job_list_lock);
		list_add(&sched_job->list, &q->sched.pending_list);
		spin_unlock(&q->sched.job_list_lock);
		drm_dev_exit(idx);
		return DRM_GPU_SCHED_STAT_NOMINAL;
	}

	/* The card is awake: the hung job holds a reference until the reset. */
	pm_runtime_get_noresume(sdev->drm.dev);
	drm_sched_stop(&q->sched, sched_job);
	spyre_coredump_hang(sdev, job);
	/*
	 * The job that hung fails; the context is banned after repeated hangs.
	 * Recorded before the reset signals its fence: whoever that wakes (a
	 * consumer on another queue, a waiter) reads the error at once.
	 */
	job->guilty = true;
	spyre_uq_fail(job->uq, job->user_seq, DRM_SPYRE_ERROR_TIMEOUT);
	spyre_fault_log(sdev, job->ctx->id, job->user_seq, q->idx, 0, 0, 0);
	spyre_hwq_reset(q, -ECANCELED, DRM_SPYRE_ERROR_NONE);
	atomic_inc(&sdev->resets);
	spyre_hwq_check_quiet(q);
	if (atomic_inc_return(&job->ctx->hangs) >= SPYRE_BAN_HANGS)
		WRITE_ONCE(job->ctx->banned, true);
	drm_dbg(&sdev->drm, "hwq %u: job %llu of context %u timed out; queue reset\n",
		q->idx, job->user_seq, job->ctx->id);

	/* Everything else that was pending runs again. */
	drm_sched_resubmit_jobs(&q->sched);
	drm_sched_start(&q->sched);
	spyre_reset_uevent(sdev, "queue", q->idx, "timeout");
	pm_runtime_mark_last_busy(sdev->drm.dev);
	pm_runtime_put_autosuspend(sdev->drm.dev);
	drm_dev_exit(idx);
	return DRM_GPU_SCHED_STAT_NOMINAL;
}

/*
 * A queue reset aborts the packet in progress; the device keeps
 * Q_STATUS.BUSY until it has stopped. If it never does, the queue cannot
 * be used safely: the device is wedged until a device reset (sysfs
 * "reset"), and jobs fail meanwhile (spyre_run_job()).
 */
void spyre_hwq_check_quiet(struct spyre_hwq *q)
{
	struct spyre_device *sdev = q->sdev;
	u32 st;

	if (!readl_poll_timeout(sdev->regs + SPYRE_QREG(q->idx, SPYRE_Q_STATUS), st,
				!(st & SPYRE_QSTAT_BUSY), 100, 500 * USEC_PER_MSEC))
		return;
	drm_err(&sdev->drm, "hwq %u still busy after its reset: device wedged\n", q->idx);
	WRITE_ONCE(sdev->state, SPYRE_DEV_STATE_WEDGED);
	spyre_reset_uevent(sdev, "needed", q->idx, "wedged");
}

static const struct drm_sched_backend_ops spyre_sched_ops = {
	.run_job = spyre_run_job,
	.timedout_job = spyre_timedout_job,
	.free_job = spyre_free_job,
};

static int spyre_hwq_init(struct spyre_device *sdev, struct spyre_hwq *q, unsigned int idx)
{
	struct pci_dev *pdev = to_pci_dev(sdev->drm.dev);
	struct drm_sched_init_args args = {
		.ops = &spyre_sched_ops,
		.num_rqs = DRM_SCHED_PRIORITY_COUNT,
		.credit_limit = SPYRE_RING_PACKETS - 1,
		.hang_limit = 0,
		.timeout = msecs_to_jiffies(SPYRE_JOB_TIMEOUT_MS),
		/* Ordered: one timeout, error or device reset at a time. */
		.timeout_wq = sdev->reset_wq,
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
	spyre_hw_ring_start(sdev, idx, q->ring_dma, q->compl_dma, q->prio);

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

int spyre_sched_init(struct spyre_device *sdev)
{
	struct pci_dev *pdev = to_pci_dev(sdev->drm.dev);
	unsigned int nvec = sdev->caps.queues + 1, i;
	int ret;

	spin_lock_init(&sdev->busy_lock);
	ret = spyre_reset_init(sdev);
	if (ret)
		return ret;
	if (sdev->caps.queues < 2) {
		drm_err(&sdev->drm, "need at least 2 hardware queues, device has %u\n",
			sdev->caps.queues);
		return -ENODEV;
	}
	ret = pci_alloc_irq_vectors(pdev, nvec, nvec, PCI_IRQ_MSIX);
	if (ret < 0) {
		drm_err(&sdev->drm, "cannot get %u MSI-X vectors: %d\n", nvec, ret);
		return ret;
	}
	ret = spyre_fault_init(sdev);
	if (ret)
		return ret;

	ret = spyre_kq_init(sdev);
	if (ret)
		return ret;

	/*
	 * Freed by spyre_sched_fini() when the DRM device goes (schedulers
	 * outlive an unplugged card). Not drmm: managed memory allocated after
	 * the release action was added would be freed before it runs.
	 */
	sdev->hwq = kcalloc(sdev->caps.queues - 1, sizeof(*sdev->hwq), GFP_KERNEL);
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

/**
 * spyre_hwq_restart() - program an idle hardware queue again
 * @q: the queue, nothing in flight (after a runtime or system resume, whose
 *	D3hot to D0 transition reset the device)
 */
void spyre_hwq_restart(struct spyre_hwq *q)
{
	unsigned long flags;

	spin_lock_irqsave(&q->lock, flags);
	q->tail = 0;
	spin_unlock_irqrestore(&q->lock, flags);
	spyre_hw_ring_start(q->sdev, q->idx, q->ring_dma, q->compl_dma, q->prio);
}

/*
 * Device gone (remove) or probe failed: stop feeding the hardware and fail
 * everything in flight. The schedulers stay allocated for open files.
 */
void spyre_sched_stop(struct spyre_device *sdev)
{
	unsigned int i;

	cancel_work_sync(&sdev->error_work);
	for (i = 0; i < sdev->nr_hwq; i++) {
		struct spyre_hwq *q = &sdev->hwq[i];
		struct spyre_job *job, *tmp;
		unsigned long flags;
		u64 now;

		if (!q->sched_ready)
			continue;
		drm_sched_wqueue_stop(&q->sched);
		spin_lock_irqsave(&q->lock, flags);
		now = ktime_get_ns();
		list_for_each_entry_safe(job, tmp, &q->inflight, link) {
			spyre_hwq_retire_locked(q, job, now);
			dma_fence_set_error(job->hw_fence, -ENODEV);
			dma_fence_signal_locked(job->hw_fence);
		}
		spyre_hwq_busy_end_locked(q, now);
		spin_unlock_irqrestore(&q->lock, flags);
	}
}

/* Last reference to the DRM device gone: free the schedulers. */
void spyre_sched_fini(struct spyre_device *sdev)
{
	struct drm_sched_job *job, *tmp;
	unsigned int i;

	for (i = 0; i < sdev->nr_hwq; i++) {
		struct drm_gpu_scheduler *sched = &sdev->hwq[i].sched;

		if (!sdev->hwq[i].sched_ready)
			continue;
		/*
		 * spyre_sched_stop() stopped the scheduler's work with jobs on
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
	kfree(sdev->hwq);
	sdev->hwq = NULL;
	sdev->nr_hwq = 0;
	if (sdev->reset_wq)
		destroy_workqueue(sdev->reset_wq);
	sdev->reset_wq = NULL;
}
