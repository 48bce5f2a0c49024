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

#include "spyre_hw.h"
#include "spyre_kq.h"

#define DRIVER_NAME	"spyre"
#define DRIVER_DESC	"Spyre-class dataflow inference accelerator"
#define DRIVER_MAJOR	0
#define DRIVER_MINOR	2

#define SPYRE_RING_PACKETS	512	/* per hardware queue */
/* A power of 2 no larger than the device allows. */
static_assert(SPYRE_Q_SIZE_MAX % SPYRE_RING_PACKETS == 0);

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

struct dma_buf;
struct drm_printer;
struct spyre_hwq;

/**
 * struct spyre_device - one spyre card
 * @drm: the DRM device (accel node)
 * @regs: BAR0 register window
 * @caps: capabilities, read once at probe; constant afterwards
 * @mem: allocator of device memory
 * @peer_bar: BAR4 shows all device memory at a bus address (device BOs can
 *	be exported as dma-bufs to peers), docs/driver.md "Peer-to-peer"
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
 * @busy_lock: protects @busy_queues, @busy_ns and @busy_since
 * @busy_queues: user hardware queues with a job in flight
 * @busy_ns: accumulated time with at least one user hardware queue busy
 * @busy_since: start of the current device busy period (valid while
 *	@busy_queues is non-zero)
 * @fault_log: the last SPYRE_FAULT_LOG faults, for debugfs
 * @fault_log_next: total faults logged (next slot modulo SPYRE_FAULT_LOG)
 * @fault_log_lock: protects @fault_log and @fault_log_next
 * @state: SPYRE_DEV_STATE_ACTIVE, _RESETTING or _WEDGED (spyre_coredump.h;
 *	runtime suspension is the PM core's status), docs/driver.md
 * @reset_wq: ordered: the queues' timeout handlers, the error handler and
 *	device resets run on it one at a time
 * @reset_work: a device reset (sysfs "reset")
 * @reset_ret: the result of the last device reset
 * @device_resets: device resets since probe
 * @coredumps: device coredumps taken since probe
 * @vf_blocks: PF: the device memory its SR-IOV VFs hold, out of @mem
 * @vf_part_base: PF: VF 0's partition; VF v's is @vf_part_size further each
 * @vf_part_size: PF: bytes of each VF's partition, 0 while VFs are disabled
 */
struct spyre_device {
	struct drm_device drm;
	void __iomem *regs;
	struct spyre_hw_caps caps;

	struct gpu_buddy mem;
	bool mem_ready;
	bool peer_bar;
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

	/* Protects busy_queues, busy_ns and busy_since; taken inside hwq->lock */
	spinlock_t busy_lock;
	unsigned int busy_queues;
	u64 busy_ns;
	u64 busy_since;

#define SPYRE_FAULT_LOG 16
	struct {
		u32 ctx, hwq, error, fault_info;
		u64 seq, addr;
	} fault_log[SPYRE_FAULT_LOG];
	unsigned int fault_log_next;
	/* Protects fault_log and fault_log_next */
	spinlock_t fault_log_lock;

	int state;
	struct workqueue_struct *reset_wq;
	struct work_struct reset_work;
	int reset_ret;
	atomic_t device_resets;
	atomic_t coredumps;

	struct list_head vf_blocks;
	u64 vf_part_base;
	u64 vf_part_size;
};

static inline struct spyre_device *to_spyre_device(struct drm_device *drm)
{
	return container_of(drm, struct spyre_device, drm);
}

/* spyre_hw.c */
int spyre_hw_init(struct spyre_device *sdev);
u32 spyre_hw_reg_read(struct spyre_device *sdev, u32 reg);
void spyre_hw_reg_write(struct spyre_device *sdev, u32 reg, u32 val);
void spyre_hw_ring_start(struct spyre_device *sdev, unsigned int idx, dma_addr_t ring,
			 dma_addr_t compl, unsigned int prio);
void spyre_hw_queue_reset(struct spyre_device *sdev, unsigned int idx);

/* spyre_gem.c */
struct drm_gem_object *spyre_gem_create_object(struct drm_device *dev, size_t size);
struct drm_gem_object *spyre_gem_resv_object_create(struct spyre_device *sdev);
struct drm_gem_object *spyre_gem_prime_import(struct drm_device *dev, struct dma_buf *dma_buf);
int spyre_bo_create_ioctl(struct drm_device *dev, void *data, struct drm_file *file);
int spyre_bo_info_ioctl(struct drm_device *dev, void *data, struct drm_file *file);
int spyre_bo_wait_ioctl(struct drm_device *dev, void *data, struct drm_file *file);
void spyre_gem_show_memory_stats(struct drm_printer *p, struct drm_file *file);
int spyre_gem_init(struct spyre_device *sdev);
void spyre_gem_fini(struct spyre_device *sdev);

/* spyre_sriov.c */
int spyre_sriov_configure(struct pci_dev *pdev, int numvfs);
void spyre_sriov_fini(struct spyre_device *sdev);

/* spyre_reset.c */
int spyre_reset_init(struct spyre_device *sdev);
int spyre_reset_device(struct spyre_device *sdev);
void spyre_reset_uevent(struct spyre_device *sdev, const char *kind, int hwq,
			const char *reason);
int spyre_dev_state(struct spyre_device *sdev);
const char *spyre_dev_state_name(int state);
void spyre_hw_restore(struct spyre_device *sdev);
void spyre_pm_init(struct spyre_device *sdev);
void spyre_pm_fini(struct spyre_device *sdev);
extern const struct dev_pm_ops spyre_pm_ops;

/* spyre_debugfs.c, spyre_sysfs.c */
void spyre_debugfs_init(struct spyre_device *sdev);
extern const struct attribute_group *spyre_sysfs_groups[];
int spyre_sysfs_accel_init(struct spyre_device *sdev);
void spyre_sysfs_accel_fini(struct spyre_device *sdev);

#endif /* __SPYRE_DRV_H__ */
