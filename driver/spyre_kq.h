/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spyre_kq.h - the hardware queue the kernel keeps for itself (clearing
 * device memory before a BO's first use).
 */
#ifndef __SPYRE_KQ_H__
#define __SPYRE_KQ_H__

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/types.h>

struct spyre_device;

#define SPYRE_KQ_BOUNCE		4096

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
 * @bounce: SPYRE_KQ_BOUNCE bytes the device copies into (spyre_kq_read_va())
 * @bounce_dma: bus address of @bounce
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
	void *bounce;
	dma_addr_t bounce_dma;
	u32 tail;
	u64 seq;
};

int spyre_kq_init(struct spyre_device *sdev);
int spyre_kq_zero(struct spyre_device *sdev, struct list_head *blocks);
int spyre_kq_read_va(struct spyre_device *sdev, u32 ctx, u64 va, void *buf, size_t len);
void spyre_kq_start_locked(struct spyre_device *sdev);

#endif /* __SPYRE_KQ_H__ */
