// SPDX-License-Identifier: MIT
/*
 * Device discovery (libudev: accel nodes whose PCI parent is bound to the
 * spyre driver), open, and queries (libdrm's drmIoctl on GET_PARAM).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <libudev.h>
#include <xf86drm.h>

#include "spyre_accel.h"
#include "internal.h"

#define SPYRE_MAX_DEVICES 64

struct found {
	unsigned int minor;
	int numa_node;
	char devnode[64];
	char pci_address[32];
};

static int cmp_found(const void *a, const void *b)
{
	const struct found *x = a, *y = b;

	return (x->minor > y->minor) - (x->minor < y->minor);
}

/* List spyre accel nodes, sorted by minor. Returns the count or a status. */
static int discover(struct found *out, int max)
{
	struct udev *udev;
	struct udev_enumerate *en;
	struct udev_list_entry *entry;
	int n = 0, ret;

	udev = udev_new();
	if (!udev)
		return spyre_error(-ENOMEM, "udev_new failed");
	en = udev_enumerate_new(udev);
	if (!en) {
		udev_unref(udev);
		return spyre_error(-ENOMEM, "udev_enumerate_new failed");
	}
	udev_enumerate_add_match_subsystem(en, "accel");
	ret = udev_enumerate_scan_devices(en);
	if (ret < 0) {
		udev_enumerate_unref(en);
		udev_unref(udev);
		return spyre_error(ret, "scanning the accel subsystem failed");
	}

	udev_list_entry_foreach(entry, udev_enumerate_get_list_entry(en)) {
		struct udev_device *d, *pci;
		const char *drv, *node, *numa;

		d = udev_device_new_from_syspath(udev, udev_list_entry_get_name(entry));
		if (!d)
			continue;
		pci = udev_device_get_parent_with_subsystem_devtype(d, "pci", NULL);
		drv = pci ? udev_device_get_driver(pci) : NULL;
		node = udev_device_get_devnode(d);
		if (drv && node && !strcmp(drv, "spyre") && n < max) {
			out[n].minor = minor(udev_device_get_devnum(d));
			snprintf(out[n].devnode, sizeof(out[n].devnode), "%s", node);
			snprintf(out[n].pci_address, sizeof(out[n].pci_address), "%s",
				 udev_device_get_sysname(pci));
			numa = udev_device_get_sysattr_value(pci, "numa_node");
			out[n].numa_node = numa ? atoi(numa) : -1;
			n++;
		}
		udev_device_unref(d);
	}
	udev_enumerate_unref(en);
	udev_unref(udev);

	qsort(out, (size_t)n, sizeof(*out), cmp_found);
	return n;
}

/* Never fails (as a PrivateUse1 backend needs): 0 when discovery fails. */
SPYRE_EXPORT int spyre_device_count(void)
{
	struct found f[SPYRE_MAX_DEVICES];
	int n = discover(f, SPYRE_MAX_DEVICES);

	return n < 0 ? 0 : n;
}

static __thread int current_device;

SPYRE_EXPORT int spyre_set_device(int index)
{
	int n = spyre_device_count();

	if (index < 0 || index >= n)
		return spyre_error(-ENODEV, "no spyre device %d (%d present)", index, n);
	current_device = index;
	return 0;
}

SPYRE_EXPORT int spyre_get_device(int *index)
{
	if (!index)
		return spyre_error(-EINVAL, "spyre_get_device: NULL argument");
	*index = current_device;
	return 0;
}

static int get_param(int fd, uint32_t param, uint64_t *value)
{
	struct drm_spyre_get_param gp = { .param = param };

	if (drmIoctl(fd, DRM_IOCTL_SPYRE_GET_PARAM, &gp))
		return -errno;
	*value = gp.value;
	return 0;
}

SPYRE_EXPORT int spyre_device_open(int index, spyre_device_t **out)
{
	struct found f[SPYRE_MAX_DEVICES];
	static const uint32_t params[] = {
		DRM_SPYRE_PARAM_DEVICE_ID, DRM_SPYRE_PARAM_HW_VERSION,
		DRM_SPYRE_PARAM_NUM_CORES, DRM_SPYRE_PARAM_SCRATCHPAD_BYTES,
		DRM_SPYRE_PARAM_STICK_BYTES, DRM_SPYRE_PARAM_NUM_QUEUES,
		DRM_SPYRE_PARAM_MEM_SIZE, DRM_SPYRE_PARAM_CLOCK_MHZ,
		DRM_SPYRE_PARAM_FEATURES,
	};
	uint64_t v[sizeof(params) / sizeof(params[0])];
	struct spyre_device *dev;
	int n, fd, ret;
	size_t i;

	if (!out)
		return spyre_error(-EINVAL, "spyre_device_open: out is NULL");
	*out = NULL;
	n = discover(f, SPYRE_MAX_DEVICES);
	if (n < 0)
		return n;
	if (index < 0 || index >= n)
		return spyre_error(-ENODEV, "no spyre device %d (%d present)", index, n);

	fd = open(f[index].devnode, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return spyre_error(-errno, "cannot open %s", f[index].devnode);

	for (i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
		ret = get_param(fd, params[i], &v[i]);
		if (ret) {
			close(fd);
			return spyre_error(ret, "%s: GET_PARAM %u failed",
					   f[index].devnode, params[i]);
		}
	}

	dev = calloc(1, sizeof(*dev));
	if (!dev) {
		close(fd);
		return spyre_error(-ENOMEM, "out of memory");
	}
	dev->fd = fd;
	pthread_mutex_init(&dev->lock, NULL);
	pthread_mutex_init(&dev->staging_lock, NULL);
	pthread_mutex_init(&dev->internal_lock, NULL);
	dev->stats.size = sizeof(dev->stats);
	dev->props.size = sizeof(dev->props);
	dev->props.index = (uint32_t)index;
	memcpy(dev->props.devnode, f[index].devnode, sizeof(dev->props.devnode));
	memcpy(dev->props.pci_address, f[index].pci_address, sizeof(dev->props.pci_address));
	dev->props.pci_vendor = (uint16_t)(v[0] >> 16);
	dev->props.pci_device = (uint16_t)v[0];
	dev->props.hw_version = (uint32_t)v[1];
	dev->props.num_cores = (uint32_t)v[2];
	dev->props.scratchpad_bytes = (uint32_t)v[3];
	dev->props.stick_bytes = (uint32_t)v[4];
	dev->props.num_queues = (uint32_t)v[5];
	dev->props.mem_size = v[6];
	dev->props.clock_mhz = (uint32_t)v[7];
	dev->props.features = v[8];
	dev->props.numa_node = f[index].numa_node;
	*out = dev;
	return 0;
}

SPYRE_EXPORT void spyre_device_close(spyre_device_t *dev)
{
	if (!dev)
		return;
	spyre_streams_fini(dev);
	spyre_peer_forget(dev);
	spyre_ipc_forget(dev);
	spyre_memory_fini(dev);
	close(dev->fd);
	pthread_mutex_destroy(&dev->lock);
	pthread_mutex_destroy(&dev->staging_lock);
	pthread_mutex_destroy(&dev->internal_lock);
	free(dev);
}

SPYRE_EXPORT int spyre_device_get_props(spyre_device_t *dev, struct spyre_device_props *props)
{
	size_t n;

	if (!dev || !props)
		return spyre_error(-EINVAL, "spyre_device_get_props: NULL argument");
	if (props->size < sizeof(props->size) + sizeof(props->index))
		return spyre_error(-EINVAL, "spyre_device_get_props: props->size %u is too small "
				   "(set it to sizeof(struct spyre_device_props))", props->size);
	/* Copy what both sides know: older callers get a prefix. */
	n = props->size < sizeof(dev->props) ? props->size : sizeof(dev->props);
	memcpy((char *)props + sizeof(props->size), (char *)&dev->props + sizeof(props->size),
	       n - sizeof(props->size));
	return 0;
}

SPYRE_EXPORT int spyre_device_get_param(spyre_device_t *dev, uint32_t param, uint64_t *value)
{
	int ret;

	if (!dev || !value)
		return spyre_error(-EINVAL, "spyre_device_get_param: NULL argument");
	ret = get_param(dev->fd, param, value);
	if (ret)
		return spyre_error(ret, "%s: GET_PARAM %u failed", dev->props.devnode, param);
	return 0;
}

SPYRE_EXPORT int spyre_device_fd(const spyre_device_t *dev)
{
	return dev ? dev->fd : -EINVAL;
}
