// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_kq.c - the kernel queue: the device's last hardware queue, which the
 * driver keeps for itself to clear device memory with the DMA engine before
 * a BO's first use (nothing of a previous owner can be read back). Used
 * synchronously, polled, under kq->lock; no scheduler.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/gpu_buddy.h>
#include <linux/jiffies.h>

#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include "spyre_drv.h"
#include "spyre_hw.h"
#include "spyre_kq.h"

#define SPYRE_ZERO_CHUNK	SZ_2M
#define SPYRE_ZERO_SGES		128	/* one COPY clears up to 256 MiB */

static void spyre_kq_start(struct spyre_device *sdev)
{
	struct spyre_kq *kq = &sdev->kq;

	kq->tail = 0;
	spyre_hw_ring_start(sdev, kq->idx, kq->ring_dma, kq->compl_dma, 0);
}

static int spyre_kq_copy(struct spyre_device *sdev, u64 dst, u64 size)
{
	struct spyre_kq *kq = &sdev->kq;
	u32 base = SPYRE_QREG(kq->idx, 0);
	struct spyre_pkt_copy *p;
	unsigned long end;

	lockdep_assert_held(&kq->lock);
	p = kq->ring + (kq->tail % SPYRE_RING_PACKETS) * SPYRE_PKT_SIZE;
	spyre_prep_copy(p, SPYRE_AS_HOST_SGL, kq->sgl_dma, SPYRE_AS_DEVPHYS, dst, size);
	p->hdr.seq = cpu_to_le64(++kq->seq);
	kq->tail++;
	spyre_hw_reg_write(sdev, base + SPYRE_Q_TAIL, kq->tail);

	end = jiffies + msecs_to_jiffies(10000);
	while (le64_to_cpu(READ_ONCE(*kq->compl)) != kq->seq) {
		if (spyre_hw_reg_read(sdev, base + SPYRE_Q_STATUS) & SPYRE_QSTAT_ERROR)
			return -EIO;
		if (time_after(jiffies, end))
			return -ETIMEDOUT;
		usleep_range(20, 100);
	}
	return 0;
}

/**
 * spyre_kq_zero() - clear device memory blocks with the device's DMA engine
 * @sdev: the device
 * @blocks: gpu_buddy blocks
 *
 * COPYs from a scatter-gather list that repeats one 2 MiB zero buffer, on
 * the queue the kernel keeps for itself. Synchronous.
 *
 * Return: 0, -EIO when the device failed the copy, -ETIMEDOUT, -ENODEV.
 */
int spyre_kq_zero(struct spyre_device *sdev, struct list_head *blocks)
{
	const u64 max = (u64)SPYRE_ZERO_CHUNK * SPYRE_ZERO_SGES;
	struct spyre_kq *kq = &sdev->kq;
	struct gpu_buddy_block *block;
	int ret = 0, idx;

	if (!drm_dev_enter(&sdev->drm, &idx))
		return -ENODEV;
	mutex_lock(&kq->lock);
	list_for_each_entry(block, blocks, link) {
		u64 off = gpu_buddy_block_offset(block);
		u64 end = off + gpu_buddy_block_size(&sdev->mem, block);

		for (; off < end && !ret; off += max)
			ret = spyre_kq_copy(sdev, off, min(max, end - off));
		if (ret)
			break;
	}
	if (ret) {
		drm_err(&sdev->drm, "clearing device memory failed: %d\n", ret);
		spyre_kq_start(sdev);
	}
	mutex_unlock(&kq->lock);
	drm_dev_exit(idx);
	return ret;
}

/**
 * spyre_kq_init() - set up the kernel queue (the device's last queue)
 * @sdev: the device
 *
 * Return: 0 or -ENOMEM.
 */
int spyre_kq_init(struct spyre_device *sdev)
{
	struct device *dev = sdev->drm.dev;
	struct spyre_kq *kq = &sdev->kq;
	struct spyre_sge *sge;
	int i;

	mutex_init(&kq->lock);
	kq->idx = sdev->caps.queues - 1;
	kq->ring = dmam_alloc_coherent(dev, SPYRE_RING_PACKETS * SPYRE_PKT_SIZE, &kq->ring_dma,
				       GFP_KERNEL);
	kq->compl = dmam_alloc_coherent(dev, sizeof(u64), &kq->compl_dma, GFP_KERNEL);
	kq->zero = dmam_alloc_coherent(dev, SPYRE_ZERO_CHUNK, &kq->zero_dma, GFP_KERNEL);
	kq->sgl = dmam_alloc_coherent(dev, SPYRE_ZERO_SGES * sizeof(*sge), &kq->sgl_dma,
				      GFP_KERNEL);
	if (!kq->ring || !kq->compl || !kq->zero || !kq->sgl)
		return -ENOMEM;
	sge = kq->sgl;
	for (i = 0; i < SPYRE_ZERO_SGES; i++) {
		sge[i].addr = cpu_to_le64(kq->zero_dma);
		sge[i].len = cpu_to_le64(SPYRE_ZERO_CHUNK);
	}
	spyre_kq_start(sdev);
	return 0;
}
