/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spyre.ko - DRM accel driver for the spyre dataflow inference accelerator.
 */
#ifndef __SPYRE_DRV_H__
#define __SPYRE_DRV_H__

#include <linux/pci.h>
#include <linux/types.h>
#include <drm/drm_device.h>

#define DRIVER_NAME	"spyre"
#define DRIVER_DESC	"Spyre-class dataflow inference accelerator"
#define DRIVER_MAJOR	0
#define DRIVER_MINOR	1

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

/**
 * struct spyre_device - one spyre card
 * @drm: the DRM device (accel node)
 * @regs: BAR0 register window
 * @caps: capabilities, read once at probe; constant afterwards
 */
struct spyre_device {
	struct drm_device drm;
	void __iomem *regs;
	struct spyre_hw_caps caps;
};

static inline struct spyre_device *to_spyre_device(struct drm_device *drm)
{
	return container_of(drm, struct spyre_device, drm);
}

static inline struct pci_dev *to_pci_dev_from_sdev(struct spyre_device *sdev)
{
	return to_pci_dev(sdev->drm.dev);
}

int spyre_hw_init(struct spyre_device *sdev);
u32 spyre_hw_reg_read(struct spyre_device *sdev, u32 reg);
void spyre_hw_reg_write(struct spyre_device *sdev, u32 reg, u32 val);

#endif /* __SPYRE_DRV_H__ */
