/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spyre_job.h - a job: the packets of one SUBMIT, its fences and the
 * references it holds while the scheduler and the device have it.
 */
#ifndef __SPYRE_JOB_H__
#define __SPYRE_JOB_H__

#include <linux/list.h>
#include <linux/types.h>
#include <drm/gpu_scheduler.h>

/*
 * A job's packets go to the ring with seq = (job << 16) | packet index; the
 * last packet uses index SPYRE_SEQ_LAST and asks for an interrupt, so the
 * completion word passes (job << 16) | SPYRE_SEQ_LAST exactly when the whole
 * job is done, and a failed packet's seq names both the job and the packet.
 */
#define SPYRE_SEQ_LAST		0xffff
#define SPYRE_MAX_DEV_WAITS	8	/* device-side WAITs in front of one job */

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
	/* Hang detection: the queue's packets done when last looked at, */
	/* and the timeouts that found it had moved on. */
	u32 tdr_done;
	u32 tdr_rearms;
	/* SUBMIT's wait_bound_ms (0: none) and since when the job was idle. */
	u32 wait_bound_ms;
	bool tdr_idle;
	unsigned long tdr_idle_since;
};

static inline struct spyre_job *to_spyre_job(struct drm_sched_job *j)
{
	return container_of(j, struct spyre_job, base);
}

void spyre_job_release(struct spyre_job *job);

#endif /* __SPYRE_JOB_H__ */
