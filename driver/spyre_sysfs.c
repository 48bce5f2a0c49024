// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_sysfs.c - attributes of the PCI device: identity, memory, queue
 * activity and resets (/sys/bus/pci/devices/<addr>/).
 */
#include <linux/device.h>
#include <linux/sysfs.h>

#include <drm/drm_file.h>

#include "spyre_devcoredump.h"
#include "spyre_drv.h"
#include "spyre_sched.h"

static struct spyre_device *dev_to_sdev(struct device *dev)
{
	return dev_get_drvdata(dev);
}

static ssize_t cores_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", dev_to_sdev(dev)->caps.cores);
}
static DEVICE_ATTR_RO(cores);

static ssize_t mem_total_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", dev_to_sdev(dev)->caps.mem_size);
}
static DEVICE_ATTR_RO(mem_total);

static ssize_t mem_used_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct spyre_device *sdev = dev_to_sdev(dev);
	u64 used;

	mutex_lock(&sdev->mem_lock);
	used = sdev->mem_used;
	mutex_unlock(&sdev->mem_lock);
	return sysfs_emit(buf, "%llu\n", used);
}
static DEVICE_ATTR_RO(mem_used);

static ssize_t host_mem_used_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%lld\n", atomic64_read(&dev_to_sdev(dev)->host_used));
}
static DEVICE_ATTR_RO(host_mem_used);

static ssize_t resets_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&dev_to_sdev(dev)->resets));
}
static DEVICE_ATTR_RO(resets);

static ssize_t faults_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&dev_to_sdev(dev)->faults));
}
static DEVICE_ATTR_RO(faults);

/*
 * Nanoseconds since probe during which at least one user hardware queue had
 * a job in flight: sampled twice, the difference over the interval is the
 * device's utilization (spyre-smi).
 */
static ssize_t busy_ns_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", spyre_sched_busy_ns(dev_to_sdev(dev)));
}
static DEVICE_ATTR_RO(busy_ns);

/* One line per hardware queue: "<busy ms> <jobs done>". */
static ssize_t queue_busy_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct spyre_device *sdev = dev_to_sdev(dev);
	unsigned int i;
	int len = 0;

	for (i = 0; i < sdev->nr_hwq; i++) {
		u64 busy, done;

		spyre_hwq_stats(&sdev->hwq[i], &busy, &done);
		len += sysfs_emit_at(buf, len, "%llu %llu\n", busy / NSEC_PER_MSEC, done);
	}
	return len;
}
static DEVICE_ATTR_RO(queue_busy);

/* The device state (docs/driver.md): active, suspended, resetting, wedged. */
static ssize_t state_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n", spyre_dev_state_name(spyre_dev_state(dev_to_sdev(dev))));
}
static DEVICE_ATTR_RO(state);

static ssize_t device_resets_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&dev_to_sdev(dev)->device_resets));
}
static DEVICE_ATTR_RO(device_resets);

/*
 * /sys/class/accel/accelN/reset, write 1 (root only, 0200): reset the whole
 * card with files open. Jobs on the rings fail with DRM_SPYRE_ERROR_RESET;
 * later work runs. On the accel device, as the reset uevents: the PCI
 * device's own "reset" is the PCI core's function reset.
 */
static ssize_t reset_store(struct device *dev, struct device_attribute *attr,
			   const char *buf, size_t count)
{
	struct drm_minor *minor = dev_get_drvdata(dev);
	bool on;
	int ret;

	ret = kstrtobool(buf, &on);
	if (ret)
		return ret;
	if (!on)
		return -EINVAL;
	ret = spyre_reset_device(to_spyre_device(minor->dev));
	return ret ? ret : count;
}
static DEVICE_ATTR_WO(reset);

/**
 * spyre_sysfs_accel_init() - the accel device's "reset" attribute
 * @sdev: the device, registered
 *
 * Return: 0 or a negative errno.
 */
int spyre_sysfs_accel_init(struct spyre_device *sdev)
{
	return device_create_file(sdev->drm.accel->kdev, &dev_attr_reset);
}

/**
 * spyre_sysfs_accel_fini() - remove it, before the unplug
 * @sdev: the device
 */
void spyre_sysfs_accel_fini(struct spyre_device *sdev)
{
	device_remove_file(sdev->drm.accel->kdev, &dev_attr_reset);
}

static struct attribute *spyre_attrs[] = {
	&dev_attr_cores.attr,
	&dev_attr_mem_total.attr,
	&dev_attr_mem_used.attr,
	&dev_attr_host_mem_used.attr,
	&dev_attr_resets.attr,
	&dev_attr_faults.attr,
	&dev_attr_queue_busy.attr,
	&dev_attr_busy_ns.attr,
	&dev_attr_state.attr,
	&dev_attr_device_resets.attr,
	NULL,
};

static const struct attribute_group spyre_attr_group = {
	.attrs = spyre_attrs,
};

const struct attribute_group *spyre_sysfs_groups[] = {
	&spyre_attr_group,
	NULL,
};
