// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_submit.c - DRM_IOCTL_SPYRE_SUBMIT: check the packets, look the BOs
 * and syncobjs up, build the job, lock every reservation object it touches
 * (its BOs and its context's job tracker) in one ww acquire context, reserve
 * the fence slots, then arm and push it; nothing can fail after the arm.
 * Dependencies on jobs of another hardware queue of the card become
 * device-side WAIT packets (spyre_sched.c writes them).
 *
 * Lock order: BO reservations (ww) -> uq->submit_lock.
 */
#include <linux/dma-fence-chain.h>
#include <linux/dma-resv.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_print.h>
#include <drm/drm_syncobj.h>

#include "spyre_accel.h"
#include "spyre_ctx.h"
#include "spyre_drv.h"
#include "spyre_hw.h"
#include "spyre_job.h"
#include "spyre_sched.h"
#include "spyre_submit.h"
#include "spyre_uqueue.h"

static bool device_deps = true;
module_param(device_deps, bool, 0644);
MODULE_PARM_DESC(device_deps,
		 "Turn dependencies on jobs of another hardware queue of the card into device-side WAIT packets (default: on)");

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
	case SPYRE_PKT_OP_NOP:
		/* No body: zero, so a later version can give it one. */
		return spyre_zero(raw + sizeof(*h), SPYRE_PKT_SIZE - sizeof(*h)) ? 0 : -EINVAL;
	case SPYRE_PKT_OP_LAUNCH:
		if (l->reserved0 || !spyre_zero(l->reserved, sizeof(l->reserved)))
			return -EINVAL;
		return 0;
	case SPYRE_PKT_OP_COPY:
		if (c->src_space != SPYRE_AS_VIRT || c->dst_space != SPYRE_AS_VIRT)
			return -EINVAL;
		return spyre_zero(c->reserved, sizeof(c->reserved)) ? 0 : -EINVAL;
	case SPYRE_PKT_OP_SIGNAL:
	case SPYRE_PKT_OP_WAIT:
	case SPYRE_PKT_OP_TIMESTAMP:
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

/* Unlock what spyre_job_lock() locked and drop its references. */
static void spyre_job_unlock(struct drm_gem_object **o, u32 n, struct ww_acquire_ctx *acquire)
{
	u32 i;

	drm_gem_unlock_reservations(o, n, acquire);
	for (i = 0; i < n; i++)
		drm_gem_object_put(o[i]);
	kvfree(o);
}

/*
 * Lock the reservation objects of the job's BOs and of its context's job
 * tracker together (one ww acquire context) and reserve a fence slot in
 * each, before the job is armed: once armed it must be pushed, so nothing
 * may fail after. On success the caller unlocks with spyre_job_unlock().
 *
 * The array holds a reference to each object of its own: once pushed, the
 * job can run, complete and be freed before the caller unlocks, and when
 * the BOs' handles were closed meanwhile the job held their last references
 * (dropping them freed each BO, its dma_resv lock still held, and the unlock
 * wrote to freed memory: "DEBUG_LOCKS_WARN_ON(mutex_is_locked(lock))" from
 * drm_gem_object_release() in the free_job worker; selftests/
 * spyre_submit_test.c's close_racing_submit).
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
	for (i = 0; i < count; i++)
		drm_gem_object_get(o[i]);

	ret = drm_gem_lock_reservations(o, count, acquire);
	if (ret)
		goto err_put;
	for (i = 0; i < count; i++) {
		ret = dma_resv_reserve_fences(o[i]->resv, 1);
		if (ret) {
			spyre_job_unlock(o, count, acquire);
			return ret;
		}
	}
	*objs = o;
	*n = count;
	return 0;

err_put:
	for (i = 0; i < count; i++)
		drm_gem_object_put(o[i]);
	kvfree(o);
	return ret;
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

/*
 * DRM_SPYRE_SUBMIT_QUEUE_ERROR: report the queue's errors as QUEUE_ERROR
 * does, and refuse the job when some failed that the caller has not seen.
 */
static int spyre_submit_check_errors(struct spyre_ctx *ctx, struct drm_spyre_submit *args)
{
	struct spyre_fault_record rec;
	int ret;

	ret = spyre_uqueue_errors(ctx, args->queue_id, &args->error_count, &rec);
	if (ret)
		return ret;
	args->error_job_seq = rec.seq;
	args->fault = rec.fault;
	if (args->errors_seen > args->error_count)
		return -EINVAL;
	return args->errors_seen == args->error_count ? 0 : -EIO;
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
	int ret;

	if ((args->flags & ~DRM_SPYRE_SUBMIT_FLAGS) || !args->packet_count ||
	    args->packet_count > DRM_SPYRE_MAX_JOB_PACKETS ||
	    args->bo_count > DRM_SPYRE_MAX_JOB_BOS ||
	    args->in_sync_count > DRM_SPYRE_MAX_JOB_IN_SYNCS ||
	    (!args->out_sync_handle && args->out_sync_point) ||
	    (!(args->flags & DRM_SPYRE_SUBMIT_QUEUE_ERROR) && args->errors_seen) ||
	    !(args->flags & DRM_SPYRE_SUBMIT_WAIT_BOUND) != !args->wait_bound_ms ||
	    args->wait_bound_ms > DRM_SPYRE_MAX_WAIT_BOUND_MS || args->pad)
		return -EINVAL;
	if (args->flags & DRM_SPYRE_SUBMIT_QUEUE_ERROR) {
		ret = spyre_submit_check_errors(ctx, args);
		if (ret)
			return ret;
	}
	if (READ_ONCE(ctx->banned))
		return -ECANCELED;
	uq = spyre_uqueue_get(ctx, args->queue_id);
	if (!uq)
		return -ENOENT;

	job = kzalloc(sizeof(*job), GFP_KERNEL);
	if (!job) {
		spyre_uqueue_put(uq);
		return -ENOMEM;
	}
	INIT_LIST_HEAD(&job->link);
	/* The job's own reference; the ioctl keeps the lookup's until its end. */
	kref_get(&uq->ref);
	job->uq = uq;
	job->ctx = spyre_ctx_get(ctx);
	job->hwq = uq->hwq;
	job->wait_bound_ms = args->wait_bound_ms;

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
	ret = spyre_job_add_in_syncs(job, file, args);
	if (ret)
		goto err_job;
	ret = spyre_job_lock(job, &locked, &nlocked, &acquire);
	if (ret)
		goto err_job;

	mutex_lock(&uq->submit_lock);
	if (uq->dead) {
		mutex_unlock(&uq->submit_lock);
		spyre_job_unlock(locked, nlocked, &acquire);
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
	/* The job may be done and freed from here on: touch only our references. */
	mutex_unlock(&uq->submit_lock);
	spyre_job_unlock(locked, nlocked, &acquire);
	spyre_uqueue_put(uq);

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
	spyre_job_release(job);
	spyre_uqueue_put(uq);
	return ret;
}
