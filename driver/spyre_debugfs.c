// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_debugfs.c - /sys/kernel/debug/accel/<PCI name>/: queues and their rings,
 * contexts, memory, the fault log, reset counts, and fault injection.
 */
#include <linux/debugfs.h>
#include <linux/pm_runtime.h>
#include <linux/seq_file.h>

#include <drm/drm_buddy.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_print.h>

#include "spyre_accel.h"
#include "spyre_ctx.h"
#include "spyre_drv.h"
#include "spyre_gem.h"
#include "spyre_hw.h"
#include "spyre_sched.h"

static int spyre_queues_show(struct seq_file *m, void *unused)
{
	struct spyre_device *sdev = m->private;
	unsigned int i;
	int idx;

	if (!drm_dev_enter(&sdev->drm, &idx))
		return -ENODEV;
	if (pm_runtime_resume_and_get(sdev->drm.dev) < 0) {
		drm_dev_exit(idx);
		return -EIO;
	}
	seq_puts(m, "hwq prio     head     tail   status error   jobs_done  busy_ms\n");
	for (i = 0; i < sdev->nr_hwq; i++) {
		struct spyre_hwq *q = &sdev->hwq[i];
		u64 busy, done;

		/* Under the queue's lock, as sysfs reads them. */
		spyre_hwq_stats(q, &busy, &done);
		seq_printf(m, "%3u %4u %8u %8u %#8x %5u %11llu %8llu\n", i, q->prio,
			   spyre_hw_reg_read(sdev, SPYRE_QREG(i, SPYRE_Q_HEAD)),
			   spyre_hw_reg_read(sdev, SPYRE_QREG(i, SPYRE_Q_TAIL)),
			   spyre_hw_reg_read(sdev, SPYRE_QREG(i, SPYRE_Q_STATUS)),
			   spyre_hw_reg_read(sdev, SPYRE_QREG(i, SPYRE_Q_ERROR)),
			   done, busy / NSEC_PER_MSEC);
	}
	seq_printf(m, "kernel queue %u: tail %u seq %llu\n", sdev->kq.idx, sdev->kq.tail,
		   sdev->kq.seq);
	pm_runtime_mark_last_busy(sdev->drm.dev);
	pm_runtime_put_autosuspend(sdev->drm.dev);
	drm_dev_exit(idx);
	return 0;
}

static int spyre_contexts_show(struct seq_file *m, void *unused)
{
	struct spyre_device *sdev = m->private;
	struct drm_device *dev = &sdev->drm;
	struct drm_file *file;

	seq_puts(m, "ctx   pid hangs banned    dev_bytes   host_bytes\n");
	mutex_lock(&dev->filelist_mutex);
	list_for_each_entry(file, &dev->filelist, lhead) {
		struct spyre_ctx *ctx = file->driver_priv;

		if (!ctx)
			continue;
		seq_printf(m, "%3u %5d %5d %6d %12lld %12lld\n", ctx->id,
			   pid_nr(rcu_access_pointer(file->pid)), atomic_read(&ctx->hangs),
			   READ_ONCE(ctx->banned), atomic64_read(&ctx->dev_bytes),
			   atomic64_read(&ctx->host_bytes));
	}
	mutex_unlock(&dev->filelist_mutex);
	return 0;
}

static int spyre_memory_show(struct seq_file *m, void *unused)
{
	struct spyre_device *sdev = m->private;
	struct drm_printer p = drm_seq_file_printer(m);

	mutex_lock(&sdev->mem_lock);
	seq_printf(m, "device memory: %llu of %llu bytes used\n", sdev->mem_used,
		   sdev->caps.mem_size);
	drm_buddy_print(&sdev->mem, &p);
	mutex_unlock(&sdev->mem_lock);
	drm_printf(&p, "host memory pinned: %lld bytes\n", atomic64_read(&sdev->host_used));
	return 0;
}

static int spyre_faults_show(struct seq_file *m, void *unused)
{
	struct spyre_device *sdev = m->private;
	unsigned int i, n;

	seq_printf(m, "faults %d, resets %d, device waits %d, device resets %d, coredumps %d\n",
		   atomic_read(&sdev->faults), atomic_read(&sdev->resets),
		   atomic_read(&sdev->device_waits), atomic_read(&sdev->device_resets),
		   atomic_read(&sdev->coredumps));
	seq_puts(m, "ctx hwq error     job_seq               addr       info\n");
	spin_lock(&sdev->fault_log_lock);
	n = min_t(unsigned int, sdev->fault_log_next, SPYRE_FAULT_LOG);
	for (i = 0; i < n; i++) {
		unsigned int k = (sdev->fault_log_next - n + i) % SPYRE_FAULT_LOG;

		seq_printf(m, "%3u %3u %5u %11llu %#18llx %#10x\n", sdev->fault_log[k].ctx,
			   sdev->fault_log[k].hwq, sdev->fault_log[k].error,
			   sdev->fault_log[k].seq, sdev->fault_log[k].addr,
			   sdev->fault_log[k].fault_info);
	}
	spin_unlock(&sdev->fault_log_lock);
	return 0;
}

static int spyre_bos_show_one(int id, void *ptr, void *data)
{
	struct drm_gem_object *obj = ptr;
	struct spyre_bo *bo = to_spyre_bo(obj);
	struct seq_file *m = data;

	seq_printf(m, "  handle %4d size %12zu %s%s%s refs %u\n", id, obj->size,
		   bo->is_device ? "device" : "host",
		   bo->flags & DRM_SPYRE_BO_MAPPABLE ? " mappable" : "",
		   obj->import_attach ? " imported" : "", kref_read(&obj->refcount));
	return 0;
}

/* Every file's BOs, by handle. */
static int spyre_bos_show(struct seq_file *m, void *unused)
{
	struct spyre_device *sdev = m->private;
	struct drm_device *dev = &sdev->drm;
	struct drm_file *file;

	mutex_lock(&dev->filelist_mutex);
	list_for_each_entry(file, &dev->filelist, lhead) {
		struct spyre_ctx *ctx = file->driver_priv;

		if (!ctx)
			continue;
		seq_printf(m, "context %u:\n", ctx->id);
		spin_lock(&file->table_lock);
		idr_for_each(&file->object_idr, spyre_bos_show_one, m);
		spin_unlock(&file->table_lock);
	}
	mutex_unlock(&dev->filelist_mutex);
	return 0;
}

DEFINE_SHOW_ATTRIBUTE(spyre_bos);
DEFINE_SHOW_ATTRIBUTE(spyre_queues);
DEFINE_SHOW_ATTRIBUTE(spyre_contexts);
DEFINE_SHOW_ATTRIBUTE(spyre_memory);
DEFINE_SHOW_ATTRIBUTE(spyre_faults);

/* "inject": write "<hwq> <kind>" (SPYRE_INJECT_* kinds), as the device defines. */
static ssize_t spyre_inject_write(struct file *f, const char __user *ubuf, size_t len,
				  loff_t *pos)
{
	struct spyre_device *sdev = file_inode(f)->i_private;
	unsigned int q, kind;
	char buf[32];
	int idx;

	if (len >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, len))
		return -EFAULT;
	buf[len] = '\0';
	if (sscanf(buf, "%u %u", &q, &kind) != 2 || q >= sdev->nr_hwq ||
	    kind >= SPYRE_INJECT_KINDS)
		return -EINVAL;
	if (!drm_dev_enter(&sdev->drm, &idx))
		return -ENODEV;
	/*
	 * Awake: leaving D3hot resets the card, which disarms injections, so
	 * an injection armed now fires if work follows within the autosuspend
	 * delay.
	 */
	if (pm_runtime_resume_and_get(sdev->drm.dev) < 0) {
		drm_dev_exit(idx);
		return -EIO;
	}
	spyre_hw_reg_write(sdev, SPYRE_REG_INJECT, SPYRE_INJECT(q, kind));
	pm_runtime_mark_last_busy(sdev->drm.dev);
	pm_runtime_put_autosuspend(sdev->drm.dev);
	drm_dev_exit(idx);
	return len;
}

static const struct file_operations spyre_inject_fops = {
	.owner = THIS_MODULE,
	.write = spyre_inject_write,
};

void spyre_debugfs_init(struct spyre_device *sdev)
{
	struct dentry *root = sdev->drm.debugfs_root;

	debugfs_create_file("queues", 0444, root, sdev, &spyre_queues_fops);
	debugfs_create_file("contexts", 0444, root, sdev, &spyre_contexts_fops);
	debugfs_create_file("memory", 0444, root, sdev, &spyre_memory_fops);
	debugfs_create_file("bos", 0444, root, sdev, &spyre_bos_fops);
	debugfs_create_file("faults", 0444, root, sdev, &spyre_faults_fops);
	debugfs_create_file("inject", 0200, root, sdev, &spyre_inject_fops);
}
