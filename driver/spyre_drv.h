/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spyre.ko - DRM accel driver for the spyre dataflow inference accelerator.
 */
#ifndef __SPYRE_DRV_H__
#define __SPYRE_DRV_H__

#include <linux/gpu_buddy.h>
#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <drm/drm_device.h>
#include <drm/drm_file.h>
#include <drm/drm_mm.h>
#include <drm/gpu_scheduler.h>

#define DRIVER_NAME	"spyre"
#define DRIVER_DESC	"Spyre-class dataflow inference accelerator"
#define DRIVER_MAJOR	0
#define DRIVER_MINOR	2

#define SPYRE_RING_PACKETS	512	/* per hardware queue */
#define SPYRE_MAX_UQUEUES	64	/* user queues per file */
#define SPYRE_BAN_HANGS		3	/* hangs before a context is banned */
#define SPYRE_JOB_TIMEOUT_MS	2000

/**
 * struct spyre_hw_caps - capabilities read from the device at probe
 * @version: hardware interface version (major << 16 | minor)
 * @cores: number of compute cores
 * @scratchpad_bytes: scratchpad bytes per core
 * @stick_bytes: bytes per stick
 * @queues: number of hardware command queues
 * @mem_size: device memory in bytes
 * @clock_mhz: core clock in MHz
 * @features: SPYRE_FEAT_* bits
 */
struct spyre_hw_caps {
	u32 version;
	u32 cores;
	u32 scratchpad_bytes;
	u32 stick_bytes;
	u32 queues;
	u64 mem_size;
	u32 clock_mhz;
	u32 features;
};

struct spyre_device;

/**
 * struct spyre_kq - the hardware queue the kernel keeps (clearing memory)
 * @idx: hardware queue index (the last one)
 * @lock: serializes use of the queue
 * @ring: packet ring
 * @ring_dma: bus address of @ring
 * @compl: completion word
 * @compl_dma: bus address of @compl
 * @zero: 2 MiB of zeros
 * @zero_dma: bus address of @zero
 * @sgl: scatter-gather list repeating @zero
 * @sgl_dma: bus address of @sgl
 * @tail: next ring slot
 * @seq: last packet sequence number
 */
struct spyre_kq {
	unsigned int idx;
	/* Serializes use of the kernel queue */
	struct mutex lock;
	void *ring;
	dma_addr_t ring_dma;
	__le64 *compl;
	dma_addr_t compl_dma;
	void *zero;
	dma_addr_t zero_dma;
	void *sgl;
	dma_addr_t sgl_dma;
	u32 tail;
	u64 seq;
};

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
	u64 jobs_done;
	atomic_t nr_uqueues;
};

/**
 * struct spyre_device - one spyre card
 * @drm: the DRM device (accel node)
 * @regs: BAR0 register window
 * @caps: capabilities, read once at probe; constant afterwards
 * @mem: allocator of device memory
 * @mem_ready: @mem is initialized
 * @mem_lock: protects @mem and @mem_used
 * @mem_used: bytes of device memory allocated to BOs
 * @host_used: bytes of host memory pinned for BOs
 * @ctx_table: MMU context table (DMA coherent)
 * @ctx_table_dma: bus address of @ctx_table
 * @ctx_ids: allocator of MMU context ids (1 .. SPYRE_MMU_MAX_CTX - 1)
 * @mmu_lock: serializes context table updates and invalidations
 * @kq: the kernel's own hardware queue
 * @hwq: hardware queues for user jobs
 * @nr_hwq: number of entries in @hwq
 * @error_work: handles queues stopped on an error
 * @resets: queue resets after timeouts
 * @faults: jobs failed by device errors
 * @device_waits: dependencies turned into device-side WAIT packets
 * @fault_log: the last SPYRE_FAULT_LOG faults, for debugfs
 * @fault_log_next: total faults logged (next slot modulo SPYRE_FAULT_LOG)
 * @fault_log_lock: protects @fault_log and @fault_log_next
 */
struct spyre_device {
	struct drm_device drm;
	void __iomem *regs;
	struct spyre_hw_caps caps;

	struct gpu_buddy mem;
	bool mem_ready;
	/* Protects mem and mem_used */
	struct mutex mem_lock;
	u64 mem_used;
	atomic64_t host_used;

	__le64 *ctx_table;
	dma_addr_t ctx_table_dma;
	struct ida ctx_ids;
	/* Serializes context table updates and MMU invalidations */
	struct mutex mmu_lock;

	struct spyre_kq kq;
	struct spyre_hwq *hwq;
	unsigned int nr_hwq;
	struct work_struct error_work;
	atomic_t resets;
	atomic_t faults;
	atomic_t device_waits;

#define SPYRE_FAULT_LOG 16
	struct {
		u32 ctx, hwq, error, fault_info;
		u64 seq, addr;
	} fault_log[SPYRE_FAULT_LOG];
	unsigned int fault_log_next;
	/* Protects fault_log and fault_log_next */
	spinlock_t fault_log_lock;
};

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
 * @lock: protects @va_mm, the page tables and @uqueues
 * @va_mm: allocator of device virtual addresses
 * @l0: level-0 table
 * @l1: level-1 tables (128)
 * @l2: level-2 tables (128 arrays of 512, allocated on demand)
 * @uqueues: user queues by id
 * @hangs: jobs of this context that timed out
 * @banned: set after SPYRE_BAN_HANGS hangs; submissions fail
 * @jobs: a GEM object that exists only for its reservation object, which
 *	holds the newest job fence of every queue of this context (as
 *	drm_gpuvm's resv object does): waiting on it waits for every job the
 *	context has submitted, whatever queue it went to
 * @dev_bytes: device memory mapped in this context
 * @host_bytes: host memory mapped in this context
 */
struct spyre_ctx {
	struct kref ref;
	struct spyre_device *sdev;
	u32 id;
	/* Protects va_mm, the page tables and uqueues */
	struct mutex lock;
	struct drm_mm va_mm;
	struct spyre_pt l0;
	struct spyre_pt l1[128];
	struct spyre_pt *l2[128];
	struct xarray uqueues;
	atomic_t hangs;
	bool banned;
	struct drm_gem_object *jobs;
	atomic64_t dev_bytes;
	atomic64_t host_bytes;
};

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
 * @err_lock: protects the error fields
 * @error_count: jobs that failed
 * @err_seq: the last failed job
 * @error: its DRM_SPYRE_ERROR_*
 * @hw_error: its SPYRE_ERR_* from the device
 * @fault_addr: its faulting address
 * @fault_info: its SPYRE_FAULT_INFO()
 * @packet: index of the failing packet in the job
 * @core: faulting core of a LAUNCH, or ~0
 * @pc: faulting instruction of a LAUNCH, or ~0
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
	/* Protects the error fields below */
	spinlock_t err_lock;
	u64 error_count;
	u64 err_seq;
	u32 error;
	u32 hw_error;
	u64 fault_addr;
	u32 fault_info;
	u32 packet;
	u32 core;
	u32 pc;
};

static inline struct spyre_device *to_spyre_device(struct drm_device *drm)
{
	return container_of(drm, struct spyre_device, drm);
}

/* spyre_hw.c */
int spyre_hw_init(struct spyre_device *sdev);
u32 spyre_hw_reg_read(struct spyre_device *sdev, u32 reg);
void spyre_hw_reg_write(struct spyre_device *sdev, u32 reg, u32 val);
void spyre_hw_queue_start(struct spyre_hwq *q);
void spyre_hw_queue_reset(struct spyre_hwq *q);

/* spyre_mmu.c */
int spyre_mmu_init(struct spyre_device *sdev);
void spyre_mmu_fini(struct spyre_device *sdev);
struct spyre_ctx *spyre_ctx_create(struct spyre_device *sdev);
void spyre_ctx_release(struct kref *ref);

static inline struct spyre_ctx *spyre_ctx_get(struct spyre_ctx *ctx)
{
	kref_get(&ctx->ref);
	return ctx;
}

static inline void spyre_ctx_put(struct spyre_ctx *ctx)
{
	kref_put(&ctx->ref, spyre_ctx_release);
}

int spyre_mmu_map(struct spyre_ctx *ctx, u64 va, u64 addr, u64 size, u64 flags);
void spyre_mmu_unmap(struct spyre_ctx *ctx, u64 va, u64 size);
void spyre_mmu_invalidate(struct spyre_device *sdev);

/* spyre_job.c */
int spyre_job_init(struct spyre_device *sdev);
void spyre_job_stop(struct spyre_device *sdev);
void spyre_job_fini(struct spyre_device *sdev);
void spyre_ctx_queues_fini(struct spyre_ctx *ctx);
void spyre_ctx_wait_idle(struct spyre_ctx *ctx);
int spyre_queue_create_ioctl(struct drm_device *dev, void *data, struct drm_file *file);
int spyre_queue_destroy_ioctl(struct drm_device *dev, void *data, struct drm_file *file);
int spyre_submit_ioctl(struct drm_device *dev, void *data, struct drm_file *file);
int spyre_queue_error_ioctl(struct drm_device *dev, void *data, struct drm_file *file);

/* spyre_gem.c */
struct drm_gem_object *spyre_gem_create_object(struct drm_device *dev, size_t size);
int spyre_bo_create_ioctl(struct drm_device *dev, void *data, struct drm_file *file);
int spyre_bo_info_ioctl(struct drm_device *dev, void *data, struct drm_file *file);
int spyre_bo_wait_ioctl(struct drm_device *dev, void *data, struct drm_file *file);
struct drm_gem_object *spyre_gem_resv_object_create(struct spyre_device *sdev);
int spyre_gem_init(struct spyre_device *sdev);
void spyre_gem_fini(struct spyre_device *sdev);

/* spyre_debugfs.c, spyre_sysfs.c */
void spyre_debugfs_init(struct spyre_device *sdev);
extern const struct attribute_group *spyre_sysfs_groups[];

#endif /* __SPYRE_DRV_H__ */
