/* SPDX-License-Identifier: MIT */
/*
 * The card's hang injection (debugfs "inject") and reset (sysfs "reset")
 * for libspyre's VM tests: a job made to hang, then a device reset.
 */
#ifndef SPYRE_INJECT_H
#define SPYRE_INJECT_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "spyre.h"

/* Write @text to the file @path: 0 or a negative errno. */
static inline int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int ret = 0;

	if (!f)
		return -errno;
	if (fputs(text, f) < 0)
		ret = -EIO;
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
}

/* The paths of @dev's inject and reset files (256 bytes each): 0, or -EACCES when either is not writable (debugfs, root). */
static inline int inject_paths(spyre_device_t *dev, char *inject, char *reset)
{
	struct spyre_device_props props = { .size = sizeof(props) };
	int ret = spyre_device_get_props(dev, &props);

	if (ret)
		return ret;
	snprintf(inject, 256, "/sys/kernel/debug/accel/%s/inject", props.pci_address);
	snprintf(reset, 256, "/sys/class/accel/%s/reset", strrchr(props.devnode, '/') + 1);
	return access(inject, W_OK) || access(reset, W_OK) ? -EACCES : 0;
}

/* Every hardware queue's next job hangs (the driver refuses a queue past the last): the queues armed. */
static inline int inject_hang_all(const char *inject)
{
	char cmd[32];
	int q;

	for (q = 0; q < 16; q++) {
		snprintf(cmd, sizeof(cmd), "%d 1", q);
		if (write_file(inject, cmd))
			break;
	}
	return q;
}

#endif
