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
#include <linux/pm_runtime.h>

#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include "spyre_drv.h"
#include "spyre_hw.h"
#include "spyre_kq.h"

#define SPYRE_ZERO_CHUNK	SZ_2M
#define SPYRE_ZERO_SGES		128	/* one COPY clears up to 256 MiB */

/**
 * spyre_kq_start_locked() - program the kernel queue again, ring empty
 * @sdev: the device; the caller holds kq->lock
 */
void spyre_kq_start_locked(struct spyre_device *sdev)
{
	struct spyre_kq *kq = &sdev->kq;

	kq->tail = 0;
	spyre_hw_ring_start(sdev, kq->idx, kq->ring_dma, kq->compl_dma, 0);
}

/* Put @pkt on the kernel queue (stamped with the next seq) and poll for it. */
static int spyre_kq_run(struct spyre_device *sdev, const void *pkt)
{
	struct spyre_kq *kq = &sdev->kq;
	u32 base = SPYRE_QREG(kq->idx, 0);
	struct spyre_pkt_hdr *p;
	unsigned long end;

	lockdep_assert_held(&kq->lock);
	p = kq->ring + (kq->tail % SPYRE_RING_PACKETS) * SPYRE_PKT_SIZE;
	memcpy(p, pkt, SPYRE_PKT_SIZE);
	p->seq = cpu_to_le64(++kq->seq);
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

static int spyre_kq_copy(struct spyre_device *sdev, u64 dst, u64 size)
{
	u8 pkt[SPYRE_PKT_SIZE];

	spyre_prep_copy(pkt, SPYRE_AS_HOST_SGL, sdev->kq.sgl_dma, SPYRE_AS_DEVPHYS, dst, size);
	return spyre_kq_run(sdev, pkt);
}

/**
 * spyre_kq_read_va() - read a context's memory through its page tables
 * @sdev: the device, awake
 * @ctx: MMU context id
 * @va: context virtual address
 * @buf: where to put the bytes
 * @len: bytes, at most SPYRE_KQ_BOUNCE minus two sticks
 *
 * A COPY on the kernel queue from the sticks around [@va, @va + @len) into
 * a bounce buffer, for device coredumps (a job's launch records).
 *
 * Return: 0, -EIO when the device faulted (the address is not mapped),
 * -ETIMEDOUT, -EINVAL for a length too large.
 */
int spyre_kq_read_va(struct spyre_device *sdev, u32 ctx, u64 va, void *buf, size_t len)
{
	struct spyre_kq *kq = &sdev->kq;
	u64 start = round_down(va, SPYRE_STICK_BYTES);
	u64 end = round_up(va + len, SPYRE_STICK_BYTES);
	u8 pkt[SPYRE_PKT_SIZE];
	int ret;

	if (end - start > SPYRE_KQ_BOUNCE || end < start)
		return -EINVAL;
	spyre_prep_copy(pkt, SPYRE_AS_VIRT, start, SPYRE_AS_HOST, kq->bounce_dma, end - start);
	((struct spyre_pkt_hdr *)pkt)->ctx = cpu_to_le16(ctx);
	mutex_lock(&kq->lock);
	ret = spyre_kq_run(sdev, pkt);
	if (ret)
		spyre_kq_start_locked(sdev);
	else
		memcpy(buf, kq->bounce + (va - start), len);
	mutex_unlock(&kq->lock);
	return ret;
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
	ret = pm_runtime_resume_and_get(sdev->drm.dev);
	if (ret < 0) {
		drm_dev_exit(idx);
		return ret;
	}
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
		spyre_kq_start_locked(sdev);
	}
	mutex_unlock(&kq->lock);
	pm_runtime_mark_last_busy(sdev->drm.dev);
	pm_runtime_put_autosuspend(sdev->drm.dev);
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
	kq->bounce = dmam_alloc_coherent(dev, SPYRE_KQ_BOUNCE, &kq->bounce_dma, GFP_KERNEL);
	if (!kq->ring || !kq->compl || !kq->zero || !kq->sgl || !kq->bounce)
		return -ENOMEM;
	sge = kq->sgl;
	for (i = 0; i < SPYRE_ZERO_SGES; i++) {
		sge[i].addr = cpu_to_le64(kq->zero_dma);
		sge[i].len = cpu_to_le64(SPYRE_ZERO_CHUNK);
	}
	mutex_lock(&kq->lock);
	spyre_kq_start_locked(sdev);
	mutex_unlock(&kq->lock);
	return 0;
}
