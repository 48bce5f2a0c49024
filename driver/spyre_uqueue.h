/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spyre_uqueue.h - user queues: a scheduler entity on one hardware queue,
 * with the error record DRM_IOCTL_SPYRE_QUEUE_ERROR reports.
 */
#ifndef __SPYRE_UQUEUE_H__
#define __SPYRE_UQUEUE_H__

#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <drm/gpu_scheduler.h>

#include "spyre_fault.h"

#define SPYRE_MAX_UQUEUES	64	/* user queues per file */

struct drm_device;
struct drm_file;
struct spyre_ctx;
struct spyre_hwq;

/**
 * struct spyre_uqueue - a user queue: a scheduler entity on one hardware queue
 * @ref: held by the file's queue table and by each job
 * @ctx: owning context
 * @id: id in the file
 * @hwq: hardware queue it feeds
 * @entity: scheduler entity
 * @submit_lock: keeps job arm + push atomic per queue; protects @dead
 * @dead: destroyed: its entity takes no more jobs
 * @seq: jobs submitted
 * @err_lock: protects @error_count and @last_error
 * @error_count: jobs that failed
 * @last_error: the last failed job's record
 */
struct spyre_uqueue {
	struct kref ref;
	struct spyre_ctx *ctx;
	u32 id;
	struct spyre_hwq *hwq;
	struct drm_sched_entity entity;
	/* Keeps job arm + push atomic per queue; protects dead */
	struct mutex submit_lock;
	bool dead;
	u64 seq;
	/* Protects error_count and last_error */
	spinlock_t err_lock;
	u64 error_count;
	struct spyre_fault_record last_error;
};

struct spyre_uqueue *spyre_uqueue_get(struct spyre_ctx *ctx, u32 id);
void spyre_uqueue_put(struct spyre_uqueue *uq);
void spyre_ctx_queues_fini(struct spyre_ctx *ctx);
int spyre_queue_create_ioctl(struct drm_device *dev, void *data, struct drm_file *file);
int spyre_queue_destroy_ioctl(struct drm_device *dev, void *data, struct drm_file *file);
int spyre_uqueue_errors(struct spyre_ctx *ctx, u32 id, u64 *count,
			struct spyre_fault_record *rec);
int spyre_queue_error_ioctl(struct drm_device *dev, void *data, struct drm_file *file);

#endif /* __SPYRE_UQUEUE_H__ */
