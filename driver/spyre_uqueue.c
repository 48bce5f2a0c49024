// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_uqueue.c - user queues (DRM_IOCTL_SPYRE_QUEUE_CREATE / _DESTROY /
 * _ERROR): a scheduler entity on the hardware queue of its priority class.
 *
 * Locking: the context's uqueues xarray lock guards lookups (a lookup takes
 * a reference under it); uq->submit_lock makes a job's arm + push atomic per
 * queue and orders it against destruction (uq->dead).
 */
#include <linux/slab.h>
#include <linux/xarray.h>

#include <drm/drm_file.h>
#include <drm/drm_print.h>

#include "spyre_accel.h"
#include "spyre_ctx.h"
#include "spyre_drv.h"
#include "spyre_hw.h"
#include "spyre_sched.h"
#include "spyre_uqueue.h"

static void spyre_uqueue_release(struct kref *kref)
{
	struct spyre_uqueue *uq = container_of(kref, struct spyre_uqueue, ref);

	atomic_dec(&uq->hwq->nr_uqueues);
	mutex_destroy(&uq->submit_lock);
	kfree(uq);
}

/**
 * spyre_uqueue_put() - drop a reference to a user queue
 * @uq: the queue
 */
void spyre_uqueue_put(struct spyre_uqueue *uq)
{
	kref_put(&uq->ref, spyre_uqueue_release);
}

/**
 * spyre_uqueue_get() - look a user queue up by id and take a reference
 * @ctx: the file's context
 * @id: the queue id
 *
 * Return: the queue, or NULL when @ctx has no queue @id.
 */
struct spyre_uqueue *spyre_uqueue_get(struct spyre_ctx *ctx, u32 id)
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
	uq->last_error.fault.core = ~0u;
	uq->last_error.fault.pc = ~0u;
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
	spyre_uqueue_put(uq);
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
	spyre_uqueue_put(uq);
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
 * spyre_uqueue_errors() - a queue's error count and last failed job
 * @ctx: the file's context
 * @id: the queue's id
 * @count: jobs of the queue that failed so far
 * @rec: the last failed job's record
 *
 * What DRM_IOCTL_SPYRE_QUEUE_ERROR and SUBMIT with
 * %DRM_SPYRE_SUBMIT_QUEUE_ERROR report.
 *
 * Return: 0, or -ENOENT for an unknown queue.
 */
int spyre_uqueue_errors(struct spyre_ctx *ctx, u32 id, u64 *count,
			struct spyre_fault_record *rec)
{
	struct spyre_uqueue *uq;
	unsigned long flags;

	uq = spyre_uqueue_get(ctx, id);
	if (!uq)
		return -ENOENT;
	spin_lock_irqsave(&uq->err_lock, flags);
	*count = uq->error_count;
	*rec = uq->last_error;
	spin_unlock_irqrestore(&uq->err_lock, flags);
	spyre_uqueue_put(uq);
	return 0;
}

int spyre_queue_error_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
{
	struct drm_spyre_queue_error *args = data;
	struct spyre_fault_record rec;
	int ret;

	if (args->pad)
		return -EINVAL;
	ret = spyre_uqueue_errors(file->driver_priv, args->queue_id, &args->error_count, &rec);
	if (ret)
		return ret;
	args->job_seq = rec.seq;
	args->fault = rec.fault;
	return 0;
}
