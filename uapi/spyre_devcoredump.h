/* SPDX-License-Identifier: MIT */
/*
 * spyre_devcoredump.h - the format of spyre.ko's device coredump
 * (/sys/class/devcoredump/devcdN/data), written by driver/spyre_coredump.c
 * and read by tools/spyre-coredump and the kselftests. docs/coredump.md is
 * the prose; this header is the only place the layout is written.
 *
 * A dump is a struct spyre_dump_header, then sections until total_size:
 * each a struct spyre_dump_section followed by @size bytes of payload, the
 * next section starting at the following 8-byte boundary. All values are
 * little-endian. Readers skip section types they do not know and must
 * check every size against the bytes they have.
 */
#ifndef __UAPI_SPYRE_DEVCOREDUMP_H__
#define __UAPI_SPYRE_DEVCOREDUMP_H__

#include <linux/types.h>

#include "spyre_accel.h"
#include "spyre_hw.h"

#if defined(__cplusplus)
extern "C" {
#endif

/** SPYRE_DUMP_MAGIC - "SPYRDUMP" in memory order */
#define SPYRE_DUMP_MAGIC		0x504d554452595053ULL
/** SPYRE_DUMP_VERSION - a new version may add sections and append fields */
#define SPYRE_DUMP_VERSION		1

/* spyre_dump_header.reason */
#define SPYRE_DUMP_REASON_HANG		1	/* a job timed out; its queue was reset */
#define SPYRE_DUMP_REASON_ENGINE_FAULT	2	/* a LAUNCH faulted (SPYRE_ERR_ENGINE) */

/* spyre_dump_device.state: the driver's device state (docs/driver.md) */
#define SPYRE_DEV_STATE_ACTIVE		0	/* powered, running jobs */
#define SPYRE_DEV_STATE_SUSPENDED	1	/* runtime suspended (D3hot); wakes on submit */
#define SPYRE_DEV_STATE_RESETTING	2	/* a device reset is in progress */
#define SPYRE_DEV_STATE_WEDGED		3	/* a reset failed: jobs fail until sysfs reset */
/* Their names (sysfs "state", spyre-coredump), the only copy: an array initializer. */
#define SPYRE_DEV_STATE_NAMES {						\
	[SPYRE_DEV_STATE_ACTIVE] = "active",				\
	[SPYRE_DEV_STATE_SUSPENDED] = "suspended",			\
	[SPYRE_DEV_STATE_RESETTING] = "resetting",			\
	[SPYRE_DEV_STATE_WEDGED] = "wedged",				\
}

/* spyre_dump_section.type */
#define SPYRE_DUMP_SEC_DEVICE		1	/* struct spyre_dump_device */
#define SPYRE_DUMP_SEC_QUEUE		2	/* struct spyre_dump_queue, one per hardware queue */
#define SPYRE_DUMP_SEC_JOB		3	/* struct spyre_dump_job */
#define SPYRE_DUMP_SEC_PACKETS		4	/* the job's ring slots, SPYRE_PKT_SIZE bytes each */
#define SPYRE_DUMP_SEC_LAUNCH		5	/* struct spyre_dump_launch, one per LAUNCH with a record */
#define SPYRE_DUMP_SEC_PT		6	/* struct spyre_dump_pt, then its ranges */
#define SPYRE_DUMP_SEC_WALK		7	/* struct spyre_dump_walk: the fault address */

/** SPYRE_DUMP_MAX_RANGES - mapped ranges listed in a SPYRE_DUMP_SEC_PT at most */
#define SPYRE_DUMP_MAX_RANGES		256

/**
 * struct spyre_dump_header - start of a dump
 */
struct spyre_dump_header {
	/** @magic: %SPYRE_DUMP_MAGIC. */
	__u64 magic;
	/** @version: %SPYRE_DUMP_VERSION. */
	__u32 version;
	/** @header_size: sizeof(struct spyre_dump_header): sections start here. */
	__u32 header_size;
	/** @total_size: bytes of the whole dump. */
	__u64 total_size;
	/** @reason: %SPYRE_DUMP_REASON_*. */
	__u32 reason;
	/** @sections: number of sections that follow. */
	__u32 sections;
	/** @time_ns: wall clock (CLOCK_REALTIME) when the dump was taken, ns. */
	__u64 time_ns;
	/** @driver: driver name and version, NUL-terminated. */
	char driver[24];
	/** @pci: the card's PCI address, NUL-terminated. */
	char pci[16];
};

/**
 * struct spyre_dump_section - header of one section
 */
struct spyre_dump_section {
	/** @type: %SPYRE_DUMP_SEC_*. */
	__u32 type;
	/** @size: bytes of payload after this header (before padding to 8). */
	__u32 size;
};

/**
 * struct spyre_dump_device - device-wide registers and driver counters
 */
struct spyre_dump_device {
	/** @hw_version: VERSION register. */
	__u32 hw_version;
	/** @cores: CAP_CORES. */
	__u32 cores;
	/** @queues: CAP_QUEUES (the last one is the kernel's). */
	__u32 queues;
	/** @clock_mhz: CAP_CLOCK_MHZ. */
	__u32 clock_mhz;
	/** @mem_size: device memory, bytes. */
	__u64 mem_size;
	/** @status: STATUS register. */
	__u32 status;
	/** @reset_count: RESET_COUNT register. */
	__u32 reset_count;
	/** @err_queues: ERR_QUEUES_HI:LO, a bit per queue stopped on an error. */
	__u64 err_queues;
	/** @clock_ns: device clock (CLOCK_HI:LO) when the dump was taken. */
	__u64 clock_ns;
	/** @inject_armed: INJECT register: fault injections still armed. */
	__u32 inject_armed;
	/** @resets: driver: queue and device resets since probe. */
	__u32 resets;
	/** @faults: driver: jobs failed by device errors since probe. */
	__u32 faults;
	/** @state: driver: device state, %SPYRE_DEV_STATE_*. */
	__u32 state;
};

/**
 * struct spyre_dump_queue - one hardware queue
 */
struct spyre_dump_queue {
	/** @idx: queue index. */
	__u32 idx;
	/** @kernel: 1 for the kernel's queue (clearing memory), else 0. */
	__u32 kernel;
	/**
	 * @regs: the queue's 16 registers in offset order, SPYRE_Q_BASE_LO
	 * (0x00) to SPYRE_Q_DONE (0x3c): regs[off / 4].
	 */
	__u32 regs[16];
	/** @qe_core: QE_CORE: core of the queue's last engine fault, ~0 if none. */
	__u32 qe_core;
	/** @qe_pc: QE_PC: its instruction index, ~0 if none. */
	__u32 qe_pc;
	/** @sw_tail: the driver's tail (next ring slot it writes). */
	__u32 sw_tail;
	/** @inflight: jobs the driver has on the ring, not yet completed. */
	__u32 inflight;
	/** @seqno: the last job number the driver handed out on this queue. */
	__u64 seqno;
	/** @completion: the completion word: (job number << 16) | packet. */
	__u64 completion;
};

/**
 * struct spyre_dump_job - the job that hung or faulted
 */
struct spyre_dump_job {
	/** @hwq: its hardware queue. */
	__u32 hwq;
	/** @ctx: its MMU context id. */
	__u32 ctx;
	/** @pid: the process that opened the file (thread group id). */
	__s32 pid;
	/** @uqueue: its user queue id in that file. */
	__u32 uqueue;
	/** @job_seq: its sequence number on the user queue (SUBMIT's job_seq). */
	__u64 job_seq;
	/** @hw_seqno: its job number on the hardware queue. */
	__u64 hw_seqno;
	/** @npackets: the job's own packets. */
	__u32 npackets;
	/** @nwaits: device-side WAIT packets the driver put in front of them. */
	__u32 nwaits;
	/** @ring_start: first ring counter of the job (a WAIT, or its first packet). */
	__u32 ring_start;
	/** @ring_end: one past its last packet. */
	__u32 ring_end;
	/**
	 * @fault: the error recorded for the job (as QUEUE_ERROR reports it):
	 * hw_error is Q_ERROR (SPYRE_ERR_*), 0 for a hang; addr Q_FAULT_HI:LO;
	 * info Q_FAULT_INFO; packet the failing one among the job's own, ~0
	 * if unknown; core and pc those of a faulting LAUNCH, ~0 if none.
	 */
	struct drm_spyre_fault fault;
	/** @comm: that process's command name, NUL-terminated. */
	char comm[16];
};

/**
 * struct spyre_dump_launch - the launch record of one LAUNCH packet of the job
 */
struct spyre_dump_launch {
	/** @packet: index of the LAUNCH among the job's own packets. */
	__u32 packet;
	/** @valid: 1 when @record was read from the context's memory, else 0. */
	__u32 valid;
	/** @record_va: the packet's record address (a context VA). */
	__u64 record_va;
	/** @record: the record as the device wrote it (status, fault core/pc, per-core busy cycles). */
	struct spyre_launch_record record;
};

/**
 * struct spyre_dump_pt - summary of the job context's page tables
 *
 * Followed by @ranges struct spyre_dump_range: the mapped VA ranges, in
 * address order, each a run of contiguous pages with the same flags.
 */
struct spyre_dump_pt {
	/** @ctx: MMU context id. */
	__u32 ctx;
	/** @l1_tables: level-1 tables allocated. */
	__u32 l1_tables;
	/** @l0_dma: bus address of the level-0 table. */
	__u64 l0_dma;
	/** @l2_tables: level-2 tables allocated. */
	__u32 l2_tables;
	/** @ranges: ranges that follow (at most %SPYRE_DUMP_MAX_RANGES). */
	__u32 ranges;
	/** @ranges_dropped: ranges beyond %SPYRE_DUMP_MAX_RANGES, not listed. */
	__u32 ranges_dropped;
	/** @pad: zero. */
	__u32 pad;
	/** @dev_pages: 4 KiB pages mapped to device memory. */
	__u64 dev_pages;
	/** @host_pages: 4 KiB pages mapped to host memory. */
	__u64 host_pages;
};

/**
 * struct spyre_dump_range - a run of mapped pages
 */
struct spyre_dump_range {
	/** @va: first address. */
	__u64 va;
	/** @size: bytes. */
	__u64 size;
	/** @addr: where the first page goes (device memory offset or host bus address). */
	__u64 addr;
	/** @flags: SPYRE_PTE_READ, _WRITE and _DEVMEM of the run's pages. */
	__u64 flags;
};

/**
 * struct spyre_dump_walk - the page-table walk of the faulting address
 */
struct spyre_dump_walk {
	/** @va: the address (Q_FAULT of the failed packet). */
	__u64 va;
	/** @ctx: the context walked. */
	__u32 ctx;
	/** @levels: entries valid in @pte: 1..3 (the walk stops at a missing table). */
	__u32 levels;
	/** @pte: the level-0, level-1 and level-2 entries on the way. */
	__u64 pte[3];
};

#if defined(__cplusplus)
}
#endif

#endif /* __UAPI_SPYRE_DEVCOREDUMP_H__ */
