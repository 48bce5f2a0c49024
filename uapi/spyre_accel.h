/* SPDX-License-Identifier: GPL-2.0-only WITH Linux-syscall-note */
/*
 * spyre_accel.h - the ioctl ABI of spyre.ko, the DRM accel driver for the
 * spyre dataflow inference accelerator (/dev/accel/accelN).
 */
#ifndef __UAPI_SPYRE_ACCEL_H__
#define __UAPI_SPYRE_ACCEL_H__

#ifdef __KERNEL__
#include <drm/drm.h>
#else
#include <drm.h>	/* libdrm's copy: pkg-config --cflags libdrm */
#endif

#if defined(__cplusplus)
extern "C" {
#endif

/**
 * DOC: spyre ioctl conventions
 *
 * Every structure is a multiple of 8 bytes, uses only fixed-width types and
 * carries pointers as __u64. Fields named ``reserved`` or ``pad`` must be
 * zero, and unknown flags or parameter values are rejected with -EINVAL, so
 * they can be given a meaning later without breaking old binaries. A device
 * that has been unplugged answers every ioctl with -ENODEV.
 *
 * Of the generic DRM ioctls an accel file reaches, spyre accepts only those
 * an accelerator uses: DRM_IOCTL_VERSION, DRM_IOCTL_GET_CAP,
 * DRM_IOCTL_GEM_CLOSE, DRM_IOCTL_PRIME_HANDLE_TO_FD / _FD_TO_HANDLE and the
 * DRM_IOCTL_SYNCOBJ_* family, the latter with at most
 * %DRM_SPYRE_MAX_SYNCOBJ_HANDLES handles per call (-EINVAL above). Every
 * other generic ioctl (the legacy, master and KMS ones) fails with -ENOTTY
 * before it reaches DRM core.
 */

/**
 * DOC: spyre peer-to-peer
 *
 * A device BO of a card whose %DRM_SPYRE_PARAM_FEATURES has
 * SPYRE_FEAT_PEER_BAR (spyre_hw.h; the card shows all its memory in a PCI
 * BAR) can be exported with DRM_IOCTL_PRIME_HANDLE_TO_FD; on a card without
 * it the export fails with -EOPNOTSUPP. The dma-buf has no CPU mapping
 * (mmap() on it fails) and carries the BO's bus addresses, not pages.
 *
 * DRM_IOCTL_PRIME_FD_TO_HANDLE of such a dma-buf on another file of the
 * same card gives the BO itself. On another spyre card it gives a BO
 * mapped in the importer's address space whose pages are the exporter's
 * memory: the importer's COPYs (and semaphores) at that address read and
 * write the exporter's memory across the PCI bus, and BO_INFO reports it
 * as a host BO of the exporter's size. The import fails with -EXDEV when
 * the PCI topology gives no peer-to-peer path between the two cards (on a
 * kernel without CONFIG_PCI_P2PDMA: unless both sit below one PCIe switch),
 * and any importer that cannot take bus addresses is refused with
 * -EOPNOTSUPP. The exporter's memory stays allocated until every import and
 * the dma-buf are gone, whichever process closes first.
 */

/** Largest handle count of one DRM_IOCTL_SYNCOBJ_* call on a spyre file. */
#define DRM_SPYRE_MAX_SYNCOBJ_HANDLES	4096

#define DRM_SPYRE_GET_PARAM		0x00
#define DRM_SPYRE_BO_CREATE		0x01
#define DRM_SPYRE_BO_INFO		0x02
#define DRM_SPYRE_BO_WAIT		0x03
#define DRM_SPYRE_QUEUE_CREATE		0x04
#define DRM_SPYRE_QUEUE_DESTROY		0x05
#define DRM_SPYRE_SUBMIT		0x06
#define DRM_SPYRE_QUEUE_ERROR		0x07

#define DRM_IOCTL_SPYRE_GET_PARAM \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_GET_PARAM, struct drm_spyre_get_param)
#define DRM_IOCTL_SPYRE_BO_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_BO_CREATE, struct drm_spyre_bo_create)
#define DRM_IOCTL_SPYRE_BO_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_BO_INFO, struct drm_spyre_bo_info)
#define DRM_IOCTL_SPYRE_BO_WAIT \
	DRM_IOW(DRM_COMMAND_BASE + DRM_SPYRE_BO_WAIT, struct drm_spyre_bo_wait)
#define DRM_IOCTL_SPYRE_QUEUE_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_QUEUE_CREATE, struct drm_spyre_queue_create)
#define DRM_IOCTL_SPYRE_QUEUE_DESTROY \
	DRM_IOW(DRM_COMMAND_BASE + DRM_SPYRE_QUEUE_DESTROY, struct drm_spyre_queue_destroy)
#define DRM_IOCTL_SPYRE_SUBMIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_SUBMIT, struct drm_spyre_submit)
#define DRM_IOCTL_SPYRE_QUEUE_ERROR \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_QUEUE_ERROR, struct drm_spyre_queue_error)

/**
 * DOC: GET_PARAM parameters
 *
 * %DRM_SPYRE_PARAM_DEVICE_ID:
 *	PCI vendor ID in bits 31:16, PCI device ID in bits 15:0.
 * %DRM_SPYRE_PARAM_HW_VERSION:
 *	Hardware interface version: major in bits 31:16, minor in bits 15:0.
 * %DRM_SPYRE_PARAM_NUM_CORES:
 *	Number of compute cores on the ring (32 on a Spyre card).
 * %DRM_SPYRE_PARAM_SCRATCHPAD_BYTES:
 *	Scratchpad bytes per core (2 MiB on a Spyre card).
 * %DRM_SPYRE_PARAM_STICK_BYTES:
 *	Bytes per stick, the unit of data movement and alignment (128).
 * %DRM_SPYRE_PARAM_NUM_QUEUES:
 *	Number of hardware command queues.
 * %DRM_SPYRE_PARAM_MEM_SIZE:
 *	Device memory (LPDDR) in bytes.
 * %DRM_SPYRE_PARAM_CLOCK_MHZ:
 *	Core clock in MHz.
 * %DRM_SPYRE_PARAM_FEATURES:
 *	Feature bits the device implements (SPYRE_FEAT_* in spyre_hw.h).
 */
#define DRM_SPYRE_PARAM_DEVICE_ID		0
#define DRM_SPYRE_PARAM_HW_VERSION		1
#define DRM_SPYRE_PARAM_NUM_CORES		2
#define DRM_SPYRE_PARAM_SCRATCHPAD_BYTES	3
#define DRM_SPYRE_PARAM_STICK_BYTES		4
#define DRM_SPYRE_PARAM_NUM_QUEUES		5
#define DRM_SPYRE_PARAM_MEM_SIZE		6
#define DRM_SPYRE_PARAM_CLOCK_MHZ		7
#define DRM_SPYRE_PARAM_FEATURES		8
/* Number of defined parameters; not a parameter itself. */
#define DRM_SPYRE_PARAM_COUNT			9

/**
 * struct drm_spyre_get_param - query a device parameter
 *
 * Read one of the device's capabilities or identification values.
 * Returns -EINVAL for an unknown @param or a non-zero @reserved.
 */
struct drm_spyre_get_param {
	/** @param: In. Which value to read: one of %DRM_SPYRE_PARAM_*. */
	__u32 param;

	/** @reserved: In. Must be zero. */
	__u32 reserved;

	/** @value: Out. The parameter's value. */
	__u64 value;
};

/**
 * DOC: buffers and the device address space
 *
 * Each open file of /dev/accel/accelN is one context with its own 128 GiB
 * device virtual address space and its own device page tables. A buffer
 * object (BO) is created in device memory (the default) or in host memory
 * (%DRM_SPYRE_BO_HOST: pinned system pages the device reaches by DMA) and is
 * mapped at once into the creating file's address space; BO_CREATE and
 * BO_INFO return that device virtual address. Packets name memory only by
 * these addresses (address space %SPYRE_AS_VIRT), so a context can reach
 * nothing but its own buffers: any other address faults, failing only the
 * job that used it.
 *
 * Host BOs can always be mmapped. Device BOs can be mmapped only when created
 * with %DRM_SPYRE_BO_MAPPABLE, which places them in the 256 MiB of device
 * memory the CPU sees through BAR2.
 */

/* drm_spyre_bo_create.flags */
#define DRM_SPYRE_BO_HOST	0x00000001	/* host memory instead of device memory */
#define DRM_SPYRE_BO_MAPPABLE	0x00000002	/* device BO the CPU can mmap */
#define DRM_SPYRE_BO_FLAGS	(DRM_SPYRE_BO_HOST | DRM_SPYRE_BO_MAPPABLE)

/**
 * struct drm_spyre_bo_create - create a buffer object
 *
 * Returns -EINVAL for a zero size, a size above the device's memory, unknown
 * flags or %DRM_SPYRE_BO_MAPPABLE with %DRM_SPYRE_BO_HOST; -ENOMEM when the
 * placement or the address space is full, or when a host BO would exceed the
 * caller's RLIMIT_MEMLOCK (pinned pages are charged to the creating process
 * unless it has CAP_IPC_LOCK) or the driver-wide pinned-memory cap
 * (module parameter max_pinned_mb; default half of the system's RAM).
 *
 * Host BOs can be exported as dma-bufs (PRIME) on every card; device BOs
 * as described in "spyre peer-to-peer" below.
 */
struct drm_spyre_bo_create {
	/** @size: In. Bytes; rounded up to a multiple of 4 KiB. */
	__u64 size;

	/** @flags: In. %DRM_SPYRE_BO_HOST, %DRM_SPYRE_BO_MAPPABLE. */
	__u32 flags;

	/** @handle: Out. GEM handle of the new BO. */
	__u32 handle;

	/** @va: Out. Device virtual address in the caller's context. */
	__u64 va;

	/** @mmap_offset: Out. Offset for mmap() on the device fd; 0 if not mappable. */
	__u64 mmap_offset;
};

/**
 * struct drm_spyre_bo_info - describe a buffer object
 *
 * Returns -ENOENT for an unknown handle, -EINVAL for a non-zero @pad.
 */
struct drm_spyre_bo_info {
	/** @handle: In. GEM handle. */
	__u32 handle;

	/** @flags: Out. The flags it was created with. */
	__u32 flags;

	/** @size: Out. Size in bytes. */
	__u64 size;

	/** @va: Out. Device virtual address in the caller's context. */
	__u64 va;

	/** @mmap_offset: Out. Offset for mmap(); 0 if not mappable. */
	__u64 mmap_offset;

	/** @pad: In. Must be zero. */
	__u64 pad;
};

/**
 * struct drm_spyre_bo_wait - wait until no submitted job uses a BO
 *
 * Returns 0 when idle, -ETIME when @timeout_ns passed first, -ENOENT for an
 * unknown handle, -EINVAL for a non-zero @pad or a negative timeout.
 */
struct drm_spyre_bo_wait {
	/** @handle: In. GEM handle. */
	__u32 handle;

	/** @pad: In. Must be zero. */
	__u32 pad;

	/** @timeout_ns: In. Relative timeout in nanoseconds; 0 polls. */
	__s64 timeout_ns;
};

/* Queue priorities */
#define DRM_SPYRE_PRIO_LOW	0
#define DRM_SPYRE_PRIO_NORMAL	1
#define DRM_SPYRE_PRIO_HIGH	2
#define DRM_SPYRE_PRIO_REALTIME	3	/* needs CAP_SYS_NICE */

/**
 * struct drm_spyre_queue_create - create a submission queue
 *
 * A queue is an ordered stream of jobs. Jobs of one queue run in submission
 * order; jobs of different queues are independent unless syncobjs order
 * them. Returns -EINVAL for an unknown priority, non-zero flags or pad,
 * -EPERM for %DRM_SPYRE_PRIO_REALTIME without CAP_SYS_NICE, -ENOSPC past
 * 64 queues per file.
 */
struct drm_spyre_queue_create {
	/** @priority: In. %DRM_SPYRE_PRIO_LOW .. %DRM_SPYRE_PRIO_REALTIME. */
	__u32 priority;

	/** @flags: In. Must be zero. */
	__u32 flags;

	/** @queue_id: Out. Identifies the queue in this file. */
	__u32 queue_id;

	/** @pad: In. Must be zero. */
	__u32 pad;
};

/**
 * struct drm_spyre_queue_destroy - destroy a queue
 *
 * Jobs already submitted still run. Returns -ENOENT for an unknown queue.
 */
struct drm_spyre_queue_destroy {
	/** @queue_id: In. */
	__u32 queue_id;

	/** @pad: In. Must be zero. */
	__u32 pad;
};

/**
 * struct drm_spyre_sync - a syncobj and a timeline point
 */
struct drm_spyre_sync {
	/** @handle: In. Syncobj handle. */
	__u32 handle;

	/** @flags: In. Must be zero. */
	__u32 flags;

	/** @point: In. Timeline point; 0 for a binary syncobj. */
	__u64 point;
};

/* drm_spyre_fault.error */
#define DRM_SPYRE_ERROR_NONE		0
#define DRM_SPYRE_ERROR_FAULT		1	/* the device reported a packet error;
						 * SPYRE_ERR_ENGINE: the program faulted
						 */
#define DRM_SPYRE_ERROR_TIMEOUT		2	/* the job hung and was reset */
#define DRM_SPYRE_ERROR_CANCELED	3	/* not run: the context is banned */
#define DRM_SPYRE_ERROR_RESET		4	/* canceled by a device reset (sysfs
						 * "reset"), or not run: the
						 * device is wedged
						 */

/**
 * struct drm_spyre_fault - why a job failed
 *
 * The one record of a failed job: DRM_IOCTL_SPYRE_QUEUE_ERROR and SUBMIT
 * (%DRM_SPYRE_SUBMIT_QUEUE_ERROR) report it, and a device coredump carries
 * it (struct spyre_dump_job in spyre_devcoredump.h). 32 bytes.
 */
struct drm_spyre_fault {
	/** @error: %DRM_SPYRE_ERROR_*. */
	__u32 error;

	/** @hw_error: The device's packet error (SPYRE_ERR_* in spyre_hw.h), 0 if none. */
	__u32 hw_error;

	/** @addr: Faulting device virtual address, if any. */
	__u64 addr;

	/** @info: SPYRE_FAULT_INFO() fields: access, source, cause. */
	__u32 info;

	/** @packet: Index of the failing packet within the job, if known. */
	__u32 packet;

	/** @core: For a LAUNCH that faulted: the faulting core, else ~0. */
	__u32 core;

	/** @pc: For a LAUNCH that faulted: the instruction index, else ~0. */
	__u32 pc;
};

/** Largest number of packets in one job. */
#define DRM_SPYRE_MAX_JOB_PACKETS	256
/** Largest number of BO handles in one job. */
#define DRM_SPYRE_MAX_JOB_BOS		1024
/** Largest number of in-syncs of one job. */
#define DRM_SPYRE_MAX_JOB_IN_SYNCS	64

/* drm_spyre_submit.flags */
#define DRM_SPYRE_SUBMIT_QUEUE_ERROR	0x00000001	/* report errors, refuse on unseen ones */
#define DRM_SPYRE_SUBMIT_WAIT_BOUND	0x00000002	/* @wait_bound_ms applies */
#define DRM_SPYRE_SUBMIT_FLAGS		(DRM_SPYRE_SUBMIT_QUEUE_ERROR | DRM_SPYRE_SUBMIT_WAIT_BOUND)
/** Largest drm_spyre_submit.wait_bound_ms: a minute. */
#define DRM_SPYRE_MAX_WAIT_BOUND_MS	60000

/**
 * struct drm_spyre_submit - submit a job: a list of packets
 *
 * Packets use the device's format (struct spyre_pkt_* in spyre_hw.h) with
 * these rules: every address operand is %SPYRE_AS_VIRT (an address in the
 * caller's context); header @ctx, @seq and the %SPYRE_PKT_F_IRQ flag are
 * set by the driver and must be zero; reserved fields must be zero. The job
 * starts when every in-sync has signaled; when it finishes, @out_sync is
 * signaled (replaced for a binary syncobj, @out_point added to a timeline).
 * A job that faults or times out completes with an error: its fences carry
 * it, and DRM_IOCTL_SPYRE_QUEUE_ERROR describes it.
 *
 * With %DRM_SPYRE_SUBMIT_QUEUE_ERROR, SUBMIT also does what QUEUE_ERROR
 * does, so a caller that stops at a queue's first failure needs no second
 * ioctl per job: it passes in @errors_seen the queue's error count it has
 * seen (0 for a new queue), and SUBMIT returns in @error_count,
 * @error_job_seq and @fault what QUEUE_ERROR would return as its
 * @error_count, @job_seq and @fault, read as the call starts. When jobs
 * failed that the caller has not seen (@error_count differs from
 * @errors_seen), the job is not submitted and SUBMIT fails with -EIO; the
 * out fields then describe the last failure. A job that fails after the
 * check is reported by the next SUBMIT or by QUEUE_ERROR. Without the flag
 * (old callers: the fields after @job_seq are zero) nothing changes and the
 * out fields are not written.
 *
 * A packet is malformed when its opcode or version is unknown, an address
 * space is not %SPYRE_AS_VIRT, a driver-owned header field is set, or any
 * reserved byte is non-zero: the reserved bytes of COPY, ``reserved0`` and
 * ``reserved`` of LAUNCH, those of SIGNAL/WAIT/TIMESTAMP, and the whole body
 * (the 48 bytes after the header) of a NOP.
 *
 * BOs named in @bo_handles may repeat (each is reserved once). A BO a job
 * reaches by address only is not kept busy, but it is never unmapped or
 * freed under the job: closing its last handle (and closing the file)
 * waits until every job the file submitted before, on any of its queues,
 * has completed.
 *
 * Returns -EINVAL for malformed packets, counts, flags or pad, and for an
 * in-sync naming a timeline point that has no fence yet (a point nobody
 * has submitted: spyre does not wait for submission); -ENOENT for
 * unknown queue, BO or syncobj handles, and for a queue destroyed while the
 * job was being submitted; -EFAULT for bad user pointers; -ECANCELED when
 * this file's context has been banned for repeated hangs; -ENOMEM when
 * memory for the job or its fence slots runs out; -EINTR/-ERESTARTSYS when a
 * signal arrives while the job's BOs are being locked. With
 * %DRM_SPYRE_SUBMIT_QUEUE_ERROR: -EIO when jobs of the queue failed that
 * @errors_seen does not count (checked before the ban: a banned context's
 * canceled jobs are such failures); -EINVAL when @errors_seen is above the
 * queue's error count, or non-zero without the flag.
 */
struct drm_spyre_submit {
	/** @queue_id: In. Queue from DRM_IOCTL_SPYRE_QUEUE_CREATE. */
	__u32 queue_id;

	/** @flags: In. %DRM_SPYRE_SUBMIT_QUEUE_ERROR or zero. */
	__u32 flags;

	/** @packets: In. Pointer to @packet_count packets of 64 bytes. */
	__u64 packets;

	/** @packet_count: In. 1 .. %DRM_SPYRE_MAX_JOB_PACKETS. */
	__u32 packet_count;

	/** @bo_count: In. Entries in @bo_handles, up to %DRM_SPYRE_MAX_JOB_BOS. */
	__u32 bo_count;

	/**
	 * @bo_handles: In. Pointer to __u32 GEM handles of the BOs the job
	 * uses; they stay alive and busy (BO_WAIT) until the job is done.
	 */
	__u64 bo_handles;

	/** @in_syncs: In. Pointer to @in_sync_count struct drm_spyre_sync. */
	__u64 in_syncs;

	/** @in_sync_count: In. Up to %DRM_SPYRE_MAX_JOB_IN_SYNCS. */
	__u32 in_sync_count;

	/** @out_sync_handle: In. Syncobj to signal, or 0 for none. */
	__u32 out_sync_handle;

	/** @out_sync_point: In. Timeline point, or 0 for a binary syncobj. */
	__u64 out_sync_point;

	/** @job_seq: Out. The job's sequence number on its queue (1, 2, ...). */
	__u64 job_seq;

	/**
	 * @errors_seen: In. With %DRM_SPYRE_SUBMIT_QUEUE_ERROR: the queue's
	 * error count the caller has seen (its last @error_count). Without
	 * the flag: must be zero.
	 */
	__u64 errors_seen;

	/**
	 * @error_count: Out, with %DRM_SPYRE_SUBMIT_QUEUE_ERROR: jobs of the
	 * queue that failed so far (QUEUE_ERROR's @error_count).
	 */
	__u64 error_count;

	/**
	 * @error_job_seq: Out, with %DRM_SPYRE_SUBMIT_QUEUE_ERROR: the last
	 * failed job, 0 if none (QUEUE_ERROR's @job_seq).
	 */
	__u64 error_job_seq;

	/**
	 * @fault: Out, with %DRM_SPYRE_SUBMIT_QUEUE_ERROR: why the last failed
	 * job failed (QUEUE_ERROR's @fault).
	 */
	struct drm_spyre_fault fault;

	/**
	 * @wait_bound_ms: In, with %DRM_SPYRE_SUBMIT_WAIT_BOUND: how long the
	 * job may go without progress before it counts as hung, in
	 * milliseconds, 1 .. %DRM_SPYRE_MAX_WAIT_BOUND_MS: for a job that
	 * WAITs on the device for a value another job, process or card
	 * writes later. The driver looks at its 2 s job timeouts: the job
	 * fails (%DRM_SPYRE_ERROR_TIMEOUT) at the first one that finds it
	 * idle longer than the bound. The bound holds only while no job of
	 * another queue is behind the job on its hardware queue (they share
	 * its FIFO) and until its file is closed. Without the flag: must be
	 * zero, and a job is hung after 2 s without progress. Callers built
	 * with the 120-byte struct pass zero.
	 */
	__u32 wait_bound_ms;

	/** @pad: In. Must be zero. */
	__u32 pad;
};

/**
 * struct drm_spyre_queue_error - the last error of a queue
 *
 * Returns -ENOENT for an unknown queue, -EINVAL for non-zero pad.
 */
struct drm_spyre_queue_error {
	/** @queue_id: In. */
	__u32 queue_id;

	/** @pad: In. Must be zero. */
	__u32 pad;

	/** @error_count: Out. Jobs of this queue that failed so far. */
	__u64 error_count;

	/** @job_seq: Out. The failed job (its @job_seq from SUBMIT). */
	__u64 job_seq;

	/** @fault: Out. Why it failed; all zero but core and pc (~0) if none did. */
	struct drm_spyre_fault fault;
};

#if defined(__cplusplus)
}
#endif

#endif /* __UAPI_SPYRE_ACCEL_H__ */
