/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spyre_sched.h - hardware queues, their DRM GPU schedulers and hardware
 * fences, timeouts and recovery.
 */
#ifndef __SPYRE_SCHED_H__
#define __SPYRE_SCHED_H__

#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <drm/gpu_scheduler.h>

#define SPYRE_JOB_TIMEOUT_MS	2000	/* a job running longer without progress is hung */
#define SPYRE_JOB_MAX_REARMS	14	/* ... and one progressing runs at most 15 timeouts */
#define SPYRE_BAN_HANGS		3	/* hangs before a context is banned */

struct spyre_ctx;
struct spyre_device;
struct spyre_job;

/**
 * struct spyre_hwq - one hardware command queue and its scheduler
 * @sdev: the device
 * @idx: queue index on the device
 * @prio: device priority of the queue (0..3)
 * @sched: the DRM GPU scheduler feeding this queue
 * @sched_ready: @sched is initialized
 * @ring: packet ring (DMA coherent)
 * @ring_dma: bus address of @ring
 * @compl: completion word (DMA coherent)
 * @compl_dma: bus address of @compl
 * @tail: next ring slot software writes (free-running)
 * @seqno: last job sequence number handed out
 * @fence_ctx: dma_fence context of the hardware fences
 * @lock: protects @inflight and the hardware fences' signaling
 * @inflight: submitted jobs in ring order
 * @busy_ns: accumulated time with at least one job in flight
 * @busy_since: start of the current busy period (0 when idle)
 * @head_since: when the job at the head of @inflight began to be charged to
 *	its context (see &spyre_ctx.busy_ns)
 * @jobs_done: jobs completed
 * @nr_uqueues: user queues feeding this hardware queue
 */
struct spyre_hwq {
	struct spyre_device *sdev;
	unsigned int idx;
	unsigned int prio;
	struct drm_gpu_scheduler sched;
	bool sched_ready;
	void *ring;
	dma_addr_t ring_dma;
	__le64 *compl;
	dma_addr_t compl_dma;
	u32 tail;
	u64 seqno;
	u64 fence_ctx;
	/* Protects inflight, busy accounting and hardware fence signaling */
	spinlock_t lock;
	struct list_head inflight;
	u64 busy_ns;
	u64 busy_since;
	u64 head_since;
	u64 jobs_done;
	atomic_t nr_uqueues;
};

int spyre_sched_init(struct spyre_device *sdev);
void spyre_sched_stop(struct spyre_device *sdev);
void spyre_sched_fini(struct spyre_device *sdev);
void spyre_hwq_signal(struct spyre_hwq *q);
void spyre_hwq_remove_locked(struct spyre_hwq *q, struct spyre_job *job);
void spyre_hwq_reset(struct spyre_hwq *q, int error, u32 record);
void spyre_hwq_restart(struct spyre_hwq *q);
void spyre_hwq_check_quiet(struct spyre_hwq *q);
void spyre_hwq_stats(struct spyre_hwq *q, u64 *busy_ns, u64 *jobs_done);
u64 spyre_sched_busy_ns(struct spyre_device *sdev);
u64 spyre_sched_ctx_busy_ns(struct spyre_device *sdev, struct spyre_ctx *ctx);

#endif /* __SPYRE_SCHED_H__ */
