// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_ctx.c - a file's device context: created at open, it owns the MMU
 * context (spyre_mmu.c), the device virtual address allocator, the user
 * queues (spyre_uqueue.c) and the fences of every job it submitted. The file
 * and each job hold a reference; the last one frees the page tables, so the
 * device never walks freed tables.
 *
 * Lock order: bo->map_lock -> ctx->lock -> sdev->mmu_lock.
 */
#include <linux/dma-resv.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include <drm/drm_gem.h>

#include "spyre_ctx.h"
#include "spyre_drv.h"
#include "spyre_hw.h"
#include "spyre_mmu.h"

/* Device VAs below 1 MiB stay unmapped so a null address always faults. */
#define SPYRE_VA_START	SZ_1M

/**
 * spyre_ctx_create() - a new context for a file
 * @sdev: the device
 *
 * Return: the context (one reference, the file's) or an ERR_PTR.
 */
struct spyre_ctx *spyre_ctx_create(struct spyre_device *sdev)
{
	struct spyre_ctx *ctx;
	int ret;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!ctx)
		return ERR_PTR(-ENOMEM);
	kref_init(&ctx->ref);
	ctx->sdev = sdev;
	ctx->pid = task_tgid_nr(current);
	get_task_comm(ctx->comm, current);
	mutex_init(&ctx->lock);
	xa_init_flags(&ctx->uqueues, XA_FLAGS_ALLOC1);
	drm_mm_init(&ctx->va_mm, SPYRE_VA_START, SPYRE_MMU_VA_SIZE - SPYRE_VA_START);

	ctx->jobs = spyre_gem_resv_object_create(sdev);
	if (IS_ERR(ctx->jobs)) {
		ret = PTR_ERR(ctx->jobs);
		goto err_free;
	}
	ret = spyre_mmu_ctx_init(ctx);
	if (ret)
		goto err_jobs;
	return ctx;

err_jobs:
	drm_gem_object_put(ctx->jobs);
err_free:
	drm_mm_takedown(&ctx->va_mm);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
	return ERR_PTR(ret);
}

/**
 * spyre_ctx_release() - free a context; the kref release of spyre_ctx_put()
 * @ref: the context's reference count
 *
 * The file is closed (its BOs unmapped, its queues destroyed) and every job
 * of the context has been freed.
 */
void spyre_ctx_release(struct kref *ref)
{
	struct spyre_ctx *ctx = container_of(ref, struct spyre_ctx, ref);

	spyre_mmu_ctx_fini(ctx);
	drm_mm_takedown(&ctx->va_mm);
	drm_gem_object_put(ctx->jobs);
	xa_destroy(&ctx->uqueues);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
}

/**
 * spyre_ctx_wait_idle() - wait for every job the context submitted so far
 * @ctx: the context
 *
 * Jobs reach buffers by address, not only through bo_handles, so nothing
 * the context maps may be unmapped or freed before this returns. The
 * context's reservation object holds the newest job fence of each of its
 * queues (jobs of one queue complete in order), including queues destroyed
 * since. Bounded: a hung job is reset after SPYRE_JOB_TIMEOUT_MS, one with a
 * wait bound after at most DRM_SPYRE_MAX_WAIT_BOUND_MS (a minute; the next
 * job timeout once the file is closing).
 */
void spyre_ctx_wait_idle(struct spyre_ctx *ctx)
{
	dma_resv_wait_timeout(ctx->jobs->resv, DMA_RESV_USAGE_BOOKKEEP, false,
			      MAX_SCHEDULE_TIMEOUT);
}
