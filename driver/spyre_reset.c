// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_reset.c - the device's state machine (docs/driver.md, "Device
 * states"), device resets from user space (sysfs "reset"), the reset
 * uevents, runtime PM (autosuspend to D3hot, wake on submit) and system
 * suspend/resume.
 *
 * Every reset runs on sdev->reset_wq, an ordered workqueue the queues'
 * timeout handlers and the error handler share: one at a time, never
 * concurrently with each other.
 *
 * The card loses its register state when it leaves D3hot (the device's
 * PM capability says No_Soft_Reset = 0) and on a device reset; device
 * memory keeps its contents. spyre_hw_restore() programs it again: the
 * MMU context table (page tables live in host memory and survive), the
 * kernel queue and every user queue, rings empty.
 */
#include <linux/delay.h>
#include <linux/kobject.h>
#include <linux/pci.h>
#include <linux/pm_runtime.h>
#include <linux/workqueue.h>

#include <drm/drm_accel.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_print.h>

#include "spyre_accel.h"
#include "spyre_coredump.h"
#include "spyre_drv.h"
#include "spyre_hw.h"
#include "spyre_kq.h"
#include "spyre_mmu.h"
#include "spyre_sched.h"

static unsigned int autosuspend_ms = 2000;
module_param(autosuspend_ms, uint, 0444);
MODULE_PARM_DESC(autosuspend_ms,
		 "Idle time before the card is runtime suspended to D3hot, ms (default 2000; power/autosuspend_delay_ms changes it per card)");

#define SPYRE_SUSPEND_WAIT_MS	5000	/* jobs in flight get this long to finish */

static const char * const spyre_state_names[] = SPYRE_DEV_STATE_NAMES;

/**
 * spyre_dev_state() - the device's state
 * @sdev: the device
 *
 * Return: SPYRE_DEV_STATE_*: the driver's state, or SUSPENDED when it is
 * ACTIVE and the PM core has runtime suspended the card.
 */
int spyre_dev_state(struct spyre_device *sdev)
{
	int state = READ_ONCE(sdev->state);

	if (state == SPYRE_DEV_STATE_ACTIVE && pm_runtime_suspended(sdev->drm.dev))
		return SPYRE_DEV_STATE_SUSPENDED;
	return state;
}

/**
 * spyre_dev_state_name() - a state's name, as sysfs "state" prints it
 * @state: SPYRE_DEV_STATE_*
 *
 * Return: the name.
 */
const char *spyre_dev_state_name(int state)
{
	if (state < 0 || state >= ARRAY_SIZE(spyre_state_names))
		return "unknown";
	return spyre_state_names[state];
}

/**
 * spyre_reset_uevent() - tell user space about a reset
 * @sdev: the device
 * @kind: "queue", "device", or "needed" (the device is wedged)
 * @hwq: the hardware queue, or -1 for the whole device
 * @reason: "timeout", "user", "wedged"
 *
 * A KOBJ_CHANGE uevent of the accel device (SUBSYSTEM=accel,
 * DEVNAME=accel/accelN) with SPYRE_RESET=@kind, SPYRE_RESET_QUEUE=@hwq (or
 * "all"), SPYRE_RESET_REASON=@reason and SPYRE_RESETS=<resets so far>.
 */
void spyre_reset_uevent(struct spyre_device *sdev, const char *kind, int hwq,
			const char *reason)
{
	char e_kind[32], e_queue[32], e_reason[48], e_count[32];
	char *envp[5] = { e_kind, e_queue, e_reason, e_count, NULL };
	struct device *kdev = sdev->drm.accel ? sdev->drm.accel->kdev : NULL;

	if (!kdev)
		return;
	snprintf(e_kind, sizeof(e_kind), "SPYRE_RESET=%s", kind);
	if (hwq < 0)
		snprintf(e_queue, sizeof(e_queue), "SPYRE_RESET_QUEUE=all");
	else
		snprintf(e_queue, sizeof(e_queue), "SPYRE_RESET_QUEUE=%d", hwq);
	snprintf(e_reason, sizeof(e_reason), "SPYRE_RESET_REASON=%s", reason);
	snprintf(e_count, sizeof(e_count), "SPYRE_RESETS=%d", atomic_read(&sdev->resets));
	kobject_uevent_env(&kdev->kobj, KOBJ_CHANGE, envp);
}

/**
 * spyre_hw_restore() - program a card whose registers were reset
 * @sdev: the device, awake; no job in flight on any queue
 *
 * After a D3hot to D0 transition or a device reset: the MMU context table,
 * the kernel queue and the user queues, rings empty. Completion words are
 * left alone (they only grow).
 */
void spyre_hw_restore(struct spyre_device *sdev)
{
	unsigned int i;

	spyre_mmu_restore(sdev);
	mutex_lock(&sdev->kq.lock);
	spyre_kq_start_locked(sdev);
	mutex_unlock(&sdev->kq.lock);
	for (i = 0; i < sdev->nr_hwq; i++)
		spyre_hwq_restart(&sdev->hwq[i]);
}

/* sdev->reset_work: a device reset, on the ordered reset workqueue. */
static void spyre_reset_work(struct work_struct *work)
{
	struct spyre_device *sdev = container_of(work, struct spyre_device, reset_work);
	struct device *dev = sdev->drm.dev;
	unsigned int i;
	int idx, ret;

	if (!drm_dev_enter(&sdev->drm, &idx)) {
		sdev->reset_ret = -ENODEV;
		return;
	}
	ret = pm_runtime_resume_and_get(dev);
	if (ret < 0) {
		drm_err(&sdev->drm, "device reset: cannot resume the card: %d\n", ret);
		sdev->reset_ret = ret;
		drm_dev_exit(idx);
		return;
	}
	WRITE_ONCE(sdev->state, SPYRE_DEV_STATE_RESETTING);
	/* Nothing new reaches the rings; timeouts are off until the restart. */
	for (i = 0; i < sdev->nr_hwq; i++)
		drm_sched_stop(&sdev->hwq[i].sched, NULL);
	/* The error handler runs on this queue: at most pending, now dropped. */
	cancel_work_sync(&sdev->error_work);

	/* The kernel queue's user (clearing memory) waits on its lock. */
	mutex_lock(&sdev->kq.lock);
	spyre_hw_reg_write(sdev, SPYRE_REG_RESET, SPYRE_RESET_DEVICE);
	mutex_unlock(&sdev->kq.lock);
	/* Every job on a ring fails with a reset error its queue records. */
	for (i = 0; i < sdev->nr_hwq; i++)
		spyre_hwq_reset(&sdev->hwq[i], -EIO, DRM_SPYRE_ERROR_RESET);
	spyre_hw_restore(sdev);
	atomic_inc(&sdev->resets);
	atomic_inc(&sdev->device_resets);
	WRITE_ONCE(sdev->state, SPYRE_DEV_STATE_ACTIVE);
	for (i = 0; i < sdev->nr_hwq; i++)
		drm_sched_start(&sdev->hwq[i].sched);
	drm_info(&sdev->drm, "device reset by user space (%d device resets)\n",
		 atomic_read(&sdev->device_resets));
	spyre_reset_uevent(sdev, "device", -1, "user");
	sdev->reset_ret = 0;
	pm_runtime_mark_last_busy(dev);
	pm_runtime_put_autosuspend(dev);
	drm_dev_exit(idx);
}

/**
 * spyre_reset_device() - reset the whole card, as sysfs "reset" asks
 * @sdev: the device
 *
 * Jobs on the rings fail (fences -EIO, DRM_SPYRE_ERROR_RESET recorded for
 * their queues); files stay open, their buffers and mappings stay, and
 * work submitted afterwards runs. Leaves the WEDGED state.
 *
 * Return: 0, -ENODEV after an unplug, or the error of resuming the card.
 */
int spyre_reset_device(struct spyre_device *sdev)
{
	queue_work(sdev->reset_wq, &sdev->reset_work);
	flush_work(&sdev->reset_work);
	return sdev->reset_ret;
}

/**
 * spyre_reset_init() - the reset workqueue and the device state
 * @sdev: the device
 *
 * Return: 0 or -ENOMEM.
 */
int spyre_reset_init(struct spyre_device *sdev)
{
	sdev->state = SPYRE_DEV_STATE_ACTIVE;
	INIT_WORK(&sdev->reset_work, spyre_reset_work);
	/* Destroyed by spyre_sched_fini(), after the schedulers that use it. */
	sdev->reset_wq = alloc_ordered_workqueue("spyre-reset", 0);
	return sdev->reset_wq ? 0 : -ENOMEM;
}

/* ---- power management ------------------------------------------------------- */

/*
 * Runtime suspend: no job is in flight (each holds a reference) and the
 * kernel queue is idle (its users hold one too). The PCI core saves the
 * configuration and puts the card in D3hot.
 */
static int spyre_runtime_suspend(struct device *dev)
{
	struct spyre_device *sdev = dev_get_drvdata(dev);

	drm_dbg(&sdev->drm, "runtime suspend\n");
	return 0;
}

static int spyre_runtime_resume(struct device *dev)
{
	struct spyre_device *sdev = dev_get_drvdata(dev);

	drm_dbg(&sdev->drm, "runtime resume\n");
	spyre_hw_restore(sdev);
	return 0;
}

/* Wait until no job of any queue is in flight. */
static bool spyre_wait_idle(struct spyre_device *sdev, unsigned long timeout)
{
	unsigned long end = jiffies + timeout;
	unsigned int i;

	for (i = 0; i < sdev->nr_hwq; i++) {
		struct spyre_hwq *q = &sdev->hwq[i];

		while (!list_empty_careful(&q->inflight)) {
			if (time_after(jiffies, end))
				return false;
			usleep_range(2000, 5000);
		}
	}
	return true;
}

/*
 * System suspend: stop feeding the rings, let the jobs in flight finish
 * (or fail them by resetting their queues), then the PCI core takes the
 * card to D3hot. Device memory keeps its contents (docs/driver.md).
 */
static int spyre_pm_suspend(struct device *dev)
{
	struct spyre_device *sdev = dev_get_drvdata(dev);
	unsigned int i;
	int ret;

	ret = pm_runtime_resume_and_get(dev);
	if (ret < 0)
		return ret;
	flush_workqueue(sdev->reset_wq);
	for (i = 0; i < sdev->nr_hwq; i++)
		drm_sched_wqueue_stop(&sdev->hwq[i].sched);
	if (!spyre_wait_idle(sdev, msecs_to_jiffies(SPYRE_SUSPEND_WAIT_MS))) {
		drm_warn(&sdev->drm, "suspend: jobs still running after %u ms: reset\n",
			 SPYRE_SUSPEND_WAIT_MS);
		for (i = 0; i < sdev->nr_hwq; i++) {
			struct spyre_hwq *q = &sdev->hwq[i];

			drm_sched_stop(&q->sched, NULL);
			spyre_hwq_reset(q, -EIO, DRM_SPYRE_ERROR_RESET);
			drm_sched_start(&q->sched);
			drm_sched_wqueue_stop(&q->sched);
		}
	}
	/* The kernel queue's users are ioctls: their tasks are frozen. */
	drm_dbg(&sdev->drm, "system suspend\n");
	return 0;
}

static int spyre_pm_resume(struct device *dev)
{
	struct spyre_device *sdev = dev_get_drvdata(dev);
	unsigned int i;

	drm_dbg(&sdev->drm, "system resume\n");
	spyre_hw_restore(sdev);
	for (i = 0; i < sdev->nr_hwq; i++)
		drm_sched_wqueue_start(&sdev->hwq[i].sched);
	pm_runtime_mark_last_busy(dev);
	pm_runtime_put_autosuspend(dev);
	return 0;
}

const struct dev_pm_ops spyre_pm_ops = {
	SYSTEM_SLEEP_PM_OPS(spyre_pm_suspend, spyre_pm_resume)
	RUNTIME_PM_OPS(spyre_runtime_suspend, spyre_runtime_resume, NULL)
};

/**
 * spyre_pm_init() - let the card autosuspend when idle
 * @sdev: the device, probed
 *
 * The PCI core calls probe with a runtime PM reference held and runtime PM
 * forbidden; this allows it and drops that reference.
 */
void spyre_pm_init(struct spyre_device *sdev)
{
	struct device *dev = sdev->drm.dev;

	pm_runtime_set_autosuspend_delay(dev, autosuspend_ms);
	pm_runtime_use_autosuspend(dev);
	pm_runtime_mark_last_busy(dev);
	pm_runtime_allow(dev);
	pm_runtime_put_autosuspend(dev);
}

/**
 * spyre_pm_fini() - undo spyre_pm_init() before the driver lets go
 * @sdev: the device
 */
void spyre_pm_fini(struct spyre_device *sdev)
{
	struct device *dev = sdev->drm.dev;

	pm_runtime_get_noresume(dev);
	pm_runtime_dont_use_autosuspend(dev);
	pm_runtime_forbid(dev);
}
