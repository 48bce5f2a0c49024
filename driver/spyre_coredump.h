/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spyre_coredump.h - device coredumps of hung and faulting jobs
 * (format: uapi/spyre_devcoredump.h, docs/coredump.md).
 */
#ifndef __SPYRE_COREDUMP_H__
#define __SPYRE_COREDUMP_H__

#include <linux/types.h>

#include "spyre_devcoredump.h"
#include "spyre_fault.h"

struct spyre_ctx;
struct spyre_device;
struct spyre_hwq;
struct spyre_job;

/**
 * struct spyre_coredump_job - what a dump needs of the job
 * @ctx: its context (referenced by the caller for the call)
 * @uqueue: its user queue id
 * @rec: the error recorded for it
 * @hw_seqno: its job number on the hardware queue
 * @npackets: its own packets
 * @nwaits: device-side WAITs in front of them
 * @ring_start: its first ring counter
 * @ring_end: one past its last
 */
struct spyre_coredump_job {
	struct spyre_ctx *ctx;
	u32 uqueue;
	struct spyre_fault_record rec;
	u64 hw_seqno;
	u32 npackets;
	u32 nwaits;
	u32 ring_start;
	u32 ring_end;
};

void spyre_coredump_capture(struct spyre_device *sdev, u32 reason, struct spyre_hwq *q,
			    const struct spyre_coredump_job *job);
void spyre_coredump_hang(struct spyre_device *sdev, struct spyre_job *job);

#endif /* __SPYRE_COREDUMP_H__ */
