// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_hw.c - register access, identification and capability discovery.
 */
#include <linux/io.h>

#include <drm/drm_print.h>

#include "spyre_drv.h"
#include "spyre_hw.h"

u32 spyre_hw_reg_read(struct spyre_device *sdev, u32 reg)
{
	return readl(sdev->regs + reg);
}

void spyre_hw_reg_write(struct spyre_device *sdev, u32 reg, u32 val)
{
	writel(val, sdev->regs + reg);
}

/**
 * spyre_hw_init() - identify the device and read its capabilities
 * @sdev: the device, with BAR0 mapped
 *
 * Return: 0, or -ENODEV when the registers do not identify a spyre device
 * of a hardware major version this driver speaks.
 */
int spyre_hw_init(struct spyre_device *sdev)
{
	struct spyre_hw_caps *caps = &sdev->caps;
	u32 id, major;

	id = spyre_hw_reg_read(sdev, SPYRE_REG_ID);
	if (id != SPYRE_ID_MAGIC) {
		drm_err(&sdev->drm, "unexpected ID register 0x%08x\n", id);
		return -ENODEV;
	}
	caps->version = spyre_hw_reg_read(sdev, SPYRE_REG_VERSION);
	major = SPYRE_HW_VERSION_GET_MAJOR(caps->version);
	if (major != SPYRE_HW_VERSION_MAJOR) {
		drm_err(&sdev->drm, "hardware version %u.%u not supported (need %u.x)\n",
			major, SPYRE_HW_VERSION_GET_MINOR(caps->version),
			SPYRE_HW_VERSION_MAJOR);
		return -ENODEV;
	}

	caps->cores = spyre_hw_reg_read(sdev, SPYRE_REG_CAP_CORES);
	caps->scratchpad_bytes = spyre_hw_reg_read(sdev, SPYRE_REG_CAP_SCRATCHPAD);
	caps->stick_bytes = spyre_hw_reg_read(sdev, SPYRE_REG_CAP_STICK);
	caps->queues = spyre_hw_reg_read(sdev, SPYRE_REG_CAP_QUEUES);
	caps->mem_size = spyre_hw_reg_read(sdev, SPYRE_REG_CAP_MEM_LO) |
			 (u64)spyre_hw_reg_read(sdev, SPYRE_REG_CAP_MEM_HI) << 32;
	caps->clock_mhz = spyre_hw_reg_read(sdev, SPYRE_REG_CAP_CLOCK_MHZ);
	caps->features = spyre_hw_reg_read(sdev, SPYRE_REG_CAP_FEATURES);

	if (!caps->cores || caps->cores > SPYRE_MAX_CORES ||
	    caps->stick_bytes != SPYRE_STICK_BYTES || !caps->queues ||
	    caps->queues > SPYRE_MAX_QUEUES || !caps->mem_size) {
		drm_err(&sdev->drm, "implausible capabilities: cores %u stick %u queues %u mem %llu\n",
			caps->cores, caps->stick_bytes, caps->queues, caps->mem_size);
		return -ENODEV;
	}

	drm_info(&sdev->drm, "spyre hw %u.%u: %u cores, %u KiB scratchpad, %llu MiB memory, %u queues, %u MHz\n",
		 major, SPYRE_HW_VERSION_GET_MINOR(caps->version), caps->cores,
		 caps->scratchpad_bytes >> 10, caps->mem_size >> 20, caps->queues,
		 caps->clock_mhz);
	return 0;
}

/**
 * spyre_hw_ring_start() - program a hardware queue's ring and enable it
 * @sdev: the device
 * @idx: queue index
 * @ring: bus address of its ring of SPYRE_RING_PACKETS packets (empty: the
 *	software tail is 0)
 * @compl: bus address of its completion word
 * @prio: device priority, 0..SPYRE_QCTRL_MAX_PRIO
 *
 * The reset leaves the completion word alone: it only grows, and device-side
 * waiters rely on that.
 */
void spyre_hw_ring_start(struct spyre_device *sdev, unsigned int idx, dma_addr_t ring,
			 dma_addr_t compl, unsigned int prio)
{
	u32 base = SPYRE_QREG(idx, 0);

	spyre_hw_reg_write(sdev, base + SPYRE_Q_CTRL, SPYRE_QCTRL_RESET);
	spyre_hw_reg_write(sdev, base + SPYRE_Q_BASE_LO, lower_32_bits(ring));
	spyre_hw_reg_write(sdev, base + SPYRE_Q_BASE_HI, upper_32_bits(ring));
	spyre_hw_reg_write(sdev, base + SPYRE_Q_SIZE, SPYRE_RING_PACKETS);
	spyre_hw_reg_write(sdev, base + SPYRE_Q_COMPL_LO, lower_32_bits(compl));
	spyre_hw_reg_write(sdev, base + SPYRE_Q_COMPL_HI, upper_32_bits(compl));
	spyre_hw_reg_write(sdev, base + SPYRE_Q_CTRL,
			   SPYRE_QCTRL_ENABLE | prio << SPYRE_QCTRL_PRIO_SHIFT);
}

/**
 * spyre_hw_queue_reset() - abort everything on a hardware queue
 * @sdev: the device
 * @idx: queue index
 */
void spyre_hw_queue_reset(struct spyre_device *sdev, unsigned int idx)
{
	spyre_hw_reg_write(sdev, SPYRE_QREG(idx, SPYRE_Q_CTRL), SPYRE_QCTRL_RESET);
}
