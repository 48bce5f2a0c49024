/* SPDX-License-Identifier: MIT */
/*
 * spyre.h - libspyre, the runtime for spyre dataflow inference accelerators.
 *
 * Conventions (in the manner of liburing and libbpf):
 *  - Every function returns 0 (or a non-negative count) on success and a
 *    negative errno-style status on failure. spyre_last_error() then holds a
 *    human-readable detail for the calling thread.
 *  - Handles are opaque. Structures the library fills start with a size field
 *    the caller sets to sizeof(the structure), so they can grow compatibly.
 */
#ifndef LIBSPYRE_SPYRE_H
#define LIBSPYRE_SPYRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LIBSPYRE_VERSION_MAJOR 0
#define LIBSPYRE_VERSION_MINOR 1

/** An open spyre device. */
typedef struct spyre_device spyre_device_t;

/** Properties of a device, as reported by its driver. */
struct spyre_device_props {
	uint32_t size;			/**< In: sizeof(struct spyre_device_props). */
	uint32_t index;			/**< Device index (0 .. count-1). */
	char pci_address[32];		/**< PCI address, e.g. "0000:00:04.0". */
	char devnode[64];		/**< Device node, e.g. "/dev/accel/accel0". */
	uint16_t pci_vendor;		/**< PCI vendor ID. */
	uint16_t pci_device;		/**< PCI device ID. */
	uint32_t hw_version;		/**< Hardware interface version, major << 16 | minor. */
	uint32_t num_cores;		/**< Compute cores. */
	uint32_t scratchpad_bytes;	/**< Scratchpad bytes per core. */
	uint32_t stick_bytes;		/**< Bytes per stick. */
	uint32_t num_queues;		/**< Hardware command queues. */
	uint32_t clock_mhz;		/**< Core clock in MHz. */
	uint32_t pad;			/**< Zero. */
	uint64_t mem_size;		/**< Device memory in bytes. */
	uint64_t features;		/**< SPYRE_FEAT_* bits of spyre_hw.h. */
};

/**
 * spyre_device_count() - number of spyre devices bound to the spyre driver.
 * Return: the count (0 when there are none), or a negative status.
 */
int spyre_device_count(void);

/**
 * spyre_device_open() - open device @index (0 .. count-1).
 * @index: device index, ordered by accel minor number.
 * @out: receives the handle; close it with spyre_device_close().
 * Return: 0, -ENODEV for an index with no device, or another negative status.
 */
int spyre_device_open(int index, spyre_device_t **out);

/** spyre_device_close() - close a handle from spyre_device_open(); NULL is a no-op. */
void spyre_device_close(spyre_device_t *dev);

/**
 * spyre_device_get_props() - fill @props for @dev.
 * @props: caller sets props->size = sizeof(*props) before the call.
 * Return: 0, or -EINVAL when props->size is too small to hold the base fields.
 */
int spyre_device_get_props(spyre_device_t *dev, struct spyre_device_props *props);

/**
 * spyre_device_get_param() - read one DRM_SPYRE_PARAM_* value from the driver.
 * Return: 0, or a negative status (-EINVAL for an unknown parameter).
 */
int spyre_device_get_param(spyre_device_t *dev, uint32_t param, uint64_t *value);

/** spyre_device_fd() - the device's file descriptor (for libdrm calls). */
int spyre_device_fd(const spyre_device_t *dev);

/**
 * spyre_last_error() - detail of the calling thread's last failed call.
 * Return: a string owned by the library, valid until the thread's next call.
 */
const char *spyre_last_error(void);

/** spyre_strerror() - short description of a status code. */
const char *spyre_strerror(int status);

#ifdef __cplusplus
}
#endif

#endif /* LIBSPYRE_SPYRE_H */
