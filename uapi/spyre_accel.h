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
 */

#define DRM_SPYRE_GET_PARAM		0x00

#define DRM_IOCTL_SPYRE_GET_PARAM \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SPYRE_GET_PARAM, struct drm_spyre_get_param)

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

#if defined(__cplusplus)
}
#endif

#endif /* __UAPI_SPYRE_ACCEL_H__ */
