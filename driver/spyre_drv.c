// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_drv.c - PCI probe/remove, DRM accel registration and the ioctl table.
 */
#include <linux/compat.h>
#include <linux/devcoredump.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/uaccess.h>

#include <drm/drm_accel.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_managed.h>
#include <drm/drm_prime.h>
#include <drm/drm_print.h>

#include "spyre_accel.h"
#include "spyre_ctx.h"
#include "spyre_drv.h"
#include "spyre_hw.h"
#include "spyre_kq.h"
#include "spyre_mmu.h"
#include "spyre_sched.h"
#include "spyre_submit.h"
#include "spyre_uqueue.h"

static int spyre_get_param_ioctl(struct drm_device *dev, void *data,
				 struct drm_file *file)
{
	struct spyre_device *sdev = to_spyre_device(dev);
	struct pci_dev *pdev = to_pci_dev(dev->dev);
	struct drm_spyre_get_param *args = data;
	const struct spyre_hw_caps *caps = &sdev->caps;
	int idx, ret = 0;

	if (args->reserved) {
		drm_dbg(dev, "GET_PARAM: reserved is 0x%x, must be 0\n", args->reserved);
		return -EINVAL;
	}
	if (!drm_dev_enter(dev, &idx))
		return -ENODEV;

	switch (args->param) {
	case DRM_SPYRE_PARAM_DEVICE_ID:
		args->value = (u32)pdev->vendor << 16 | pdev->device;
		break;
	case DRM_SPYRE_PARAM_HW_VERSION:
		args->value = caps->version;
		break;
	case DRM_SPYRE_PARAM_NUM_CORES:
		args->value = caps->cores;
		break;
	case DRM_SPYRE_PARAM_SCRATCHPAD_BYTES:
		args->value = caps->scratchpad_bytes;
		break;
	case DRM_SPYRE_PARAM_STICK_BYTES:
		args->value = caps->stick_bytes;
		break;
	case DRM_SPYRE_PARAM_NUM_QUEUES:
		args->value = caps->queues;
		break;
	case DRM_SPYRE_PARAM_MEM_SIZE:
		args->value = caps->mem_size;
		break;
	case DRM_SPYRE_PARAM_CLOCK_MHZ:
		args->value = caps->clock_mhz;
		break;
	case DRM_SPYRE_PARAM_FEATURES:
		args->value = caps->features;
		break;
	default:
		drm_dbg(dev, "GET_PARAM: unknown param %u\n", args->param);
		ret = -EINVAL;
		break;
	}

	drm_dev_exit(idx);
	return ret;
}

static const struct drm_ioctl_desc spyre_drm_ioctls[] = {
	DRM_IOCTL_DEF_DRV(SPYRE_GET_PARAM, spyre_get_param_ioctl, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_BO_CREATE, spyre_bo_create_ioctl, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_BO_INFO, spyre_bo_info_ioctl, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_BO_WAIT, spyre_bo_wait_ioctl, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_QUEUE_CREATE, spyre_queue_create_ioctl, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_QUEUE_DESTROY, spyre_queue_destroy_ioctl, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_SUBMIT, spyre_submit_ioctl, 0),
	DRM_IOCTL_DEF_DRV(SPYRE_QUEUE_ERROR, spyre_queue_error_ioctl, 0),
};

static int spyre_open(struct drm_device *dev, struct drm_file *file)
{
	struct spyre_ctx *ctx;
	int idx;

	if (!drm_dev_enter(dev, &idx))
		return -ENODEV;
	ctx = spyre_ctx_create(to_spyre_device(dev));
	drm_dev_exit(idx);
	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	file->driver_priv = ctx;
	return 0;
}

/* GEM handles are gone already (drm_gem_release runs before postclose). */
static void spyre_postclose(struct drm_device *dev, struct drm_file *file)
{
	struct spyre_ctx *ctx = file->driver_priv;

	spyre_ctx_queues_fini(ctx);
	spyre_ctx_wait_idle(ctx);
	spyre_ctx_put(ctx);
}

/*
 * fdinfo (Documentation/gpu/drm-usage-stats.rst); drm_show_fdinfo() prints
 * drm-driver, drm-client-id and drm-pdev first. One engine class, "compute":
 * every user hardware queue runs every packet type, concurrently, so its
 * capacity is the number of user hardware queues. No drm-cycles or
 * drm-maxfreq: the card counts no busy cycles of a job, and its clock does
 * not change. Memory per region: "device" and "host".
 */
static void spyre_show_fdinfo(struct drm_printer *p, struct drm_file *file)
{
	struct spyre_device *sdev = to_spyre_device(file->minor->dev);
	struct spyre_ctx *ctx = file->driver_priv;

	drm_printf(p, "drm-engine-compute:\t%llu ns\n", spyre_sched_ctx_busy_ns(sdev, ctx));
	if (sdev->nr_hwq > 1)
		drm_printf(p, "drm-engine-capacity-compute:\t%u\n", sdev->nr_hwq);
	spyre_gem_show_memory_stats(p, file);
}

static struct drm_gem_object *
spyre_gem_prime_import_sg_table(struct drm_device *dev, struct dma_buf_attachment *attach,
				struct sg_table *sgt)
{
	return drm_gem_shmem_prime_import_sg_table(dev, attach, sgt);
}

/*
 * The generic DRM ioctls an accel file may use. drm_ioctl() lets an accel
 * file reach every core ioctl that does not need DRM_MASTER or a render
 * node, including legacy ones that dereference a drm_master accel files do
 * not have (GET_UNIQUE, GET_MAGIC: NULL-pointer oopses in 6.12). Anything
 * not listed here never reaches DRM core. The syncobj ioctls that take an
 * array have their count bounded: DRM core sizes a kmalloc() by it, and an
 * order above MAX_PAGE_ORDER WARNs in the page allocator.
 */
static int spyre_ioctl_allowed(unsigned int cmd, void __user *argp)
{
	unsigned int nr = DRM_IOCTL_NR(cmd);
	size_t off;
	u32 count;

	if (nr >= DRM_COMMAND_BASE && nr < DRM_COMMAND_END)
		return 0;	/* the driver's own: checked by its handlers */

	switch (nr) {
	case DRM_IOCTL_NR(DRM_IOCTL_VERSION):
	case DRM_IOCTL_NR(DRM_IOCTL_GET_CAP):
	case DRM_IOCTL_NR(DRM_IOCTL_GEM_CLOSE):
	case DRM_IOCTL_NR(DRM_IOCTL_PRIME_HANDLE_TO_FD):
	case DRM_IOCTL_NR(DRM_IOCTL_PRIME_FD_TO_HANDLE):
	case DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_CREATE):
	case DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_DESTROY):
	case DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD):
	case DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE):
	case DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_TRANSFER):
	case DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_EVENTFD):
		return 0;
	case DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_WAIT):
		off = offsetof(struct drm_syncobj_wait, count_handles);
		break;
	case DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT):
		off = offsetof(struct drm_syncobj_timeline_wait, count_handles);
		break;
	case DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_RESET):
	case DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_SIGNAL):
		off = offsetof(struct drm_syncobj_array, count_handles);
		break;
	case DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_QUERY):
	case DRM_IOCTL_NR(DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL):
		off = offsetof(struct drm_syncobj_timeline_array, count_handles);
		break;
	default:
		return -ENOTTY;
	}

	/* drm_ioctl() zero-extends a shorter argument: the count is then 0. */
	if (!(_IOC_DIR(cmd) & _IOC_WRITE) || _IOC_SIZE(cmd) < off + sizeof(count))
		return 0;
	if (copy_from_user(&count, argp + off, sizeof(count)))
		return -EFAULT;
	return count > DRM_SPYRE_MAX_SYNCOBJ_HANDLES ? -EINVAL : 0;
}

static long spyre_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	int ret = spyre_ioctl_allowed(cmd, (void __user *)arg);

	return ret ? ret : drm_ioctl(filp, cmd, arg);
}

#ifdef CONFIG_COMPAT
/* drm_compat_ioctl() translates legacy ioctls itself: filter before it too. */
static long spyre_compat_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	int ret = spyre_ioctl_allowed(cmd, compat_ptr(arg));

	return ret ? ret : drm_compat_ioctl(filp, cmd, arg);
}
#else
#define spyre_compat_ioctl NULL
#endif

/*
 * Before drm_release(): from here on a job of the file's context that waits
 * on the device within its wait bound counts as hung at the next job timeout,
 * so closing its buffers and the file (which wait for its jobs) takes seconds,
 * not the bound.
 */
static int spyre_file_release(struct inode *inode, struct file *filp)
{
	struct drm_file *file = filp->private_data;
	struct spyre_ctx *ctx = file->driver_priv;

	WRITE_ONCE(ctx->closing, true);
	return drm_release(inode, filp);
}

static const struct file_operations spyre_fops = {
	.owner		= THIS_MODULE,
	.open		= accel_open,
	.release	= spyre_file_release,
	.unlocked_ioctl	= spyre_ioctl,
	.compat_ioctl	= spyre_compat_ioctl,
	.poll		= drm_poll,
	.read		= drm_read,
	.llseek		= noop_llseek,
	.mmap		= drm_gem_mmap,
	.show_fdinfo	= drm_show_fdinfo,
	.fop_flags	= FOP_UNSIGNED_OFFSET,
};

static const struct drm_driver spyre_drm_driver = {
	.driver_features = DRIVER_GEM | DRIVER_COMPUTE_ACCEL | DRIVER_SYNCOBJ |
			   DRIVER_SYNCOBJ_TIMELINE,
	.open = spyre_open,
	.postclose = spyre_postclose,
	.show_fdinfo = spyre_show_fdinfo,
	.gem_create_object = spyre_gem_create_object,
	.gem_prime_import = spyre_gem_prime_import,
	.gem_prime_import_sg_table = spyre_gem_prime_import_sg_table,
	.fops = &spyre_fops,
	.ioctls = spyre_drm_ioctls,
	.num_ioctls = ARRAY_SIZE(spyre_drm_ioctls),
	.name = DRIVER_NAME,
	.desc = DRIVER_DESC,
	.date = "20261202",
	.major = DRIVER_MAJOR,
	.minor = DRIVER_MINOR,
};

/* Runs when the last reference to the DRM device goes (after the last close). */
static void spyre_release(struct drm_device *dev, void *arg)
{
	struct spyre_device *sdev = to_spyre_device(dev);

	spyre_sched_fini(sdev);
	spyre_mmu_fini(sdev);
	spyre_gem_fini(sdev);
}

static int spyre_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct spyre_device *sdev;
	void __iomem *regs;
	int ret;

	sdev = devm_drm_dev_alloc(&pdev->dev, &spyre_drm_driver,
				  struct spyre_device, drm);
	if (IS_ERR(sdev))
		return PTR_ERR(sdev);
	pci_set_drvdata(pdev, sdev);
	INIT_LIST_HEAD(&sdev->vf_blocks);

	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;

	regs = pcim_iomap_region(pdev, SPYRE_BAR_REGS, DRIVER_NAME);
	if (IS_ERR(regs))
		return PTR_ERR(regs);
	if (pci_resource_len(pdev, SPYRE_BAR_REGS) < SPYRE_REGS_SIZE) {
		drm_err(&sdev->drm, "BAR%d is %llu bytes, need %u\n", SPYRE_BAR_REGS,
			(u64)pci_resource_len(pdev, SPYRE_BAR_REGS), SPYRE_REGS_SIZE);
		return -ENODEV;
	}
	sdev->regs = regs;

	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		return ret;
	pci_set_master(pdev);

	ret = spyre_hw_init(sdev);
	if (ret)
		return ret;
	/* Start from a clean device: no queue, context or injection left over. */
	spyre_hw_reg_write(sdev, SPYRE_REG_RESET, SPYRE_RESET_DEVICE);

	/*
	 * Schedulers, page tables and the memory allocator outlive the PCI
	 * device while files are open: spyre_release() frees them with the
	 * DRM device, whatever part of the set-up below succeeded.
	 */
	ret = drmm_add_action(&sdev->drm, spyre_release, NULL);
	if (ret)
		return ret;
	ret = spyre_gem_init(sdev);
	if (ret)
		return ret;
	ret = spyre_mmu_init(sdev);
	if (ret)
		return ret;
	ret = spyre_sched_init(sdev);
	if (ret)
		goto err_stop;

	ret = drm_dev_register(&sdev->drm, 0);
	if (ret) {
		drm_err(&sdev->drm, "drm_dev_register failed: %d\n", ret);
		goto err_stop;
	}
	spyre_debugfs_init(sdev);
	ret = spyre_sysfs_accel_init(sdev);
	if (ret) {
		drm_dev_unregister(&sdev->drm);
		goto err_stop;
	}
	spyre_pm_init(sdev);
	return 0;

err_stop:
	spyre_sched_stop(sdev);
	return ret;
}

static void spyre_remove(struct pci_dev *pdev)
{
	struct spyre_device *sdev = pci_get_drvdata(pdev);

	/* The PCI core resumed the card for remove; keep it awake from now. */
	spyre_pm_fini(sdev);
	/* The VFs go first: their memory is the PF's. */
	spyre_sriov_fini(sdev);
	spyre_sysfs_accel_fini(sdev);
	/* Open files keep the drm_device alive; their ioctls now get -ENODEV. */
	drm_dev_unplug(&sdev->drm);
	/* Resets and error handling that began before the unplug finish first. */
	flush_workqueue(sdev->reset_wq);
	/* Stop the device, then fail whatever was still in flight. */
	spyre_hw_reg_write(sdev, SPYRE_REG_RESET, SPYRE_RESET_DEVICE);
	spyre_sched_stop(sdev);
	/* A pending coredump refers to the card: drop it with the driver. */
	dev_coredump_put(&pdev->dev);
}

/*
 * The PCI core's function reset (/sys/bus/pci/devices/<pci>/reset, FLR)
 * with files open: the card lost its registers; recover as a device reset
 * does (jobs on the rings fail, the card is programmed again).
 */
static void spyre_pci_reset_done(struct pci_dev *pdev)
{
	spyre_reset_device(pci_get_drvdata(pdev));
}

static const struct pci_error_handlers spyre_pci_err_handlers = {
	.reset_done = spyre_pci_reset_done,
};

static const struct pci_device_id spyre_pci_ids[] = {
	{ PCI_DEVICE(SPYRE_PCI_VENDOR_ID, SPYRE_PCI_DEVICE_ID) },
	{ PCI_DEVICE(SPYRE_PCI_VENDOR_ID, SPYRE_PCI_VF_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, spyre_pci_ids);

static struct pci_driver spyre_pci_driver = {
	.name = DRIVER_NAME,
	.dev_groups = spyre_sysfs_groups,
	.id_table = spyre_pci_ids,
	.probe = spyre_probe,
	.remove = spyre_remove,
	.sriov_configure = spyre_sriov_configure,
	.driver.pm = pm_ptr(&spyre_pm_ops),
	.err_handler = &spyre_pci_err_handlers,
};
module_pci_driver(spyre_pci_driver);

MODULE_DESCRIPTION(DRIVER_DESC);
MODULE_IMPORT_NS(DMA_BUF);
MODULE_LICENSE("GPL");
MODULE_AUTHOR("The spyre authors");
