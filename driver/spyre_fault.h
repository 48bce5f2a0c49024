/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spyre_fault.h - device errors: the error interrupt, per-queue error
 * records, the fault log.
 */
#ifndef __SPYRE_FAULT_H__
#define __SPYRE_FAULT_H__

#include <linux/types.h>

struct spyre_device;
struct spyre_uqueue;

/**
 * struct spyre_fault_record - why a job failed (DRM_IOCTL_SPYRE_QUEUE_ERROR)
 * @seq: the job's sequence number on its queue
 * @error: DRM_SPYRE_ERROR_*
 * @hw_error: SPYRE_ERR_* from the device, 0 if none
 * @addr: faulting address
 * @info: SPYRE_FAULT_INFO()
 * @packet: index of the failing packet in the job
 * @core: faulting core of a LAUNCH, or ~0
 * @pc: faulting instruction of a LAUNCH, or ~0
 */
struct spyre_fault_record {
	u64 seq;
	u32 error;
	u32 hw_error;
	u64 addr;
	u32 info;
	u32 packet;
	u32 core;
	u32 pc;
};

int spyre_fault_init(struct spyre_device *sdev);
void spyre_uq_record(struct spyre_uqueue *uq, const struct spyre_fault_record *rec);
void spyre_uq_fail(struct spyre_uqueue *uq, u64 seq, u32 error);
void spyre_fault_log(struct spyre_device *sdev, u32 ctx, u64 seq, u32 hwq, u32 error,
		     u64 addr, u32 info);

#endif /* __SPYRE_FAULT_H__ */
