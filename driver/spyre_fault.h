/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spyre_fault.h - device errors: the error interrupt, per-queue error
 * records, the fault log.
 */
#ifndef __SPYRE_FAULT_H__
#define __SPYRE_FAULT_H__

#include <linux/types.h>

#include "spyre_accel.h"

struct spyre_device;
struct spyre_uqueue;

/**
 * struct spyre_fault_record - a failed job and why (DRM_IOCTL_SPYRE_QUEUE_ERROR)
 * @seq: the job's sequence number on its queue
 * @fault: why it failed, as the uapi reports it
 */
struct spyre_fault_record {
	u64 seq;
	struct drm_spyre_fault fault;
};

int spyre_fault_init(struct spyre_device *sdev);
void spyre_uq_record(struct spyre_uqueue *uq, const struct spyre_fault_record *rec);
void spyre_uq_fail(struct spyre_uqueue *uq, u64 seq, u32 error);
void spyre_fault_log(struct spyre_device *sdev, u32 ctx, u64 seq, u32 hwq, u32 error,
		     u64 addr, u32 info);

#endif /* __SPYRE_FAULT_H__ */
