/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spyre_ctx.h - a file's device context: its MMU address space, its queues
 * and the fences of its jobs. spyre_ctx.c owns it.
 */
#ifndef __SPYRE_CTX_H__
#define __SPYRE_CTX_H__

#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/types.h>
#include <linux/xarray.h>
#include <drm/drm_mm.h>

#include "spyre_hw.h"

struct drm_gem_object;
struct spyre_device;

/**
 * struct spyre_pt - one page of device page table (DMA coherent)
 * @cpu: kernel address of its 512 entries
 * @dma: bus address
 */
struct spyre_pt {
	__le64 *cpu;
	dma_addr_t dma;
};

/**
 * struct spyre_ctx - a file's device context: address space and queues
 * @ref: held by the file and by each job of the context
 * @sdev: the device
 * @id: MMU context id
 * @pid: thread group id of the process that opened the file
 * @comm: its command name then (for device coredumps)
 * @lock: protects @va_mm and the page tables
 * @va_mm: allocator of device virtual addresses
 * @l0: level-0 table
 * @l1: level-1 tables, allocated on demand
 * @l2: arrays of level-2 tables, allocated on demand
 * @uqueues: user queues by id (the xarray's own lock protects it)
 * @hangs: jobs of this context that timed out
 * @banned: set after SPYRE_BAN_HANGS hangs; submissions fail
 * @closing: set as its file is released: a job waiting within its wait
 *	bound counts as hung at the next job timeout
 * @jobs: a GEM object that exists only for its reservation object, which
 *	holds the newest job fence of every queue of this context (as
 *	drm_gpuvm's resv object does): waiting on it waits for every job the
 *	context has submitted, whatever queue it went to
 * @dev_bytes: device memory mapped in this context
 * @host_bytes: host memory mapped in this context
 * @busy_ns: time the jobs of this context that left the hardware queues
 *	(completed, failed or canceled) spent at the head of their queue; a
 *	job is charged from the moment it reached the head of its queue
 *	(submitted to an idle queue, or the job before it completed) until it
 *	completes, so the busy time of a hardware queue is split among the
 *	contexts without overlap
 */
struct spyre_ctx {
	struct kref ref;
	struct spyre_device *sdev;
	u32 id;
	pid_t pid;
	char comm[TASK_COMM_LEN];
	/* Protects va_mm and the page tables */
	struct mutex lock;
	struct drm_mm va_mm;
	struct spyre_pt l0;
	struct spyre_pt l1[SPYRE_PT_L0_USED];
	struct spyre_pt *l2[SPYRE_PT_L0_USED];
	struct xarray uqueues;
	atomic_t hangs;
	bool banned;
	bool closing;
	struct drm_gem_object *jobs;
	atomic64_t dev_bytes;
	atomic64_t host_bytes;
	atomic64_t busy_ns;
};

struct spyre_ctx *spyre_ctx_create(struct spyre_device *sdev);
void spyre_ctx_release(struct kref *ref);
void spyre_ctx_wait_idle(struct spyre_ctx *ctx);

static inline struct spyre_ctx *spyre_ctx_get(struct spyre_ctx *ctx)
{
	kref_get(&ctx->ref);
	return ctx;
}

static inline void spyre_ctx_put(struct spyre_ctx *ctx)
{
	kref_put(&ctx->ref, spyre_ctx_release);
}

#endif /* __SPYRE_CTX_H__ */
