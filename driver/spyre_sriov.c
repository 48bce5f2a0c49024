// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_sriov.c - SR-IOV on the PF: `echo N > sriov_numvfs` carves N equal
 * partitions from the top of the PF's device memory (vf_mem_mb each, or an
 * even split between the PF and its VFs), clears them, programs the
 * device's partition registers and enables the VFs, which this driver binds
 * as cards of their own (docs/driver.md, "SR-IOV").
 */
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/pm_runtime.h>

#include <drm/drm_print.h>

#include "spyre_drv.h"
#include "spyre_kq.h"

static unsigned int vf_mem_mb;
module_param(vf_mem_mb, uint, 0644);
MODULE_PARM_DESC(vf_mem_mb,
		 "Device memory of each SR-IOV VF in MiB, a multiple of 2 (default 0: the card split evenly between the PF and its VFs)");

/* The bytes each of @numvfs VFs gets: whole 2 MiB pieces. */
static u64 spyre_sriov_part_size(struct spyre_device *sdev, int numvfs)
{
	u64 size = vf_mem_mb ? (u64)vf_mem_mb << 20 :
			       div_u64(sdev->caps.mem_size, numvfs + 1);

	return round_down(size, SPYRE_VF_PART_ALIGN);
}

/* VF v's partition registers; VFs past @numvfs get no memory. */
static void spyre_sriov_program(struct spyre_device *sdev, int numvfs)
{
	int total = pci_sriov_get_totalvfs(to_pci_dev(sdev->drm.dev));
	int v;

	for (v = 0; v < total; v++) {
		u64 base = v < numvfs ? sdev->vf_part_base + v * sdev->vf_part_size : 0;
		u64 size = v < numvfs ? sdev->vf_part_size : 0;

		spyre_hw_reg_write(sdev, SPYRE_VF_PART(v, SPYRE_VF_BASE_LO), lower_32_bits(base));
		spyre_hw_reg_write(sdev, SPYRE_VF_PART(v, SPYRE_VF_BASE_HI), upper_32_bits(base));
		spyre_hw_reg_write(sdev, SPYRE_VF_PART(v, SPYRE_VF_SIZE_LO), lower_32_bits(size));
		spyre_hw_reg_write(sdev, SPYRE_VF_PART(v, SPYRE_VF_SIZE_HI), upper_32_bits(size));
	}
}

static void spyre_sriov_release(struct spyre_device *sdev)
{
	mutex_lock(&sdev->mem_lock);
	gpu_buddy_free_list(&sdev->mem, &sdev->vf_blocks, 0);
	mutex_unlock(&sdev->mem_lock);
	INIT_LIST_HEAD(&sdev->vf_blocks);
	sdev->vf_part_size = 0;
}

static int spyre_sriov_enable(struct spyre_device *sdev, int numvfs)
{
	struct pci_dev *pdev = to_pci_dev(sdev->drm.dev);
	u64 part = spyre_sriov_part_size(sdev, numvfs), total;
	int ret;

	if (!(sdev->caps.features & SPYRE_FEAT_SRIOV))
		return -ENODEV;
	if (!part || part * numvfs >= sdev->caps.mem_size) {
		pci_dbg(pdev, "%d VFs of %llu MiB do not fit in %llu MiB\n", numvfs,
			part >> 20, sdev->caps.mem_size >> 20);
		return -ENOSPC;
	}
	/*
	 * The PF stays in D0 while its VFs exist: a VF's config space and
	 * BARs go with the PF's power state. Dropped in spyre_sriov_fini().
	 */
	ret = pm_runtime_resume_and_get(&pdev->dev);
	if (ret < 0)
		return ret;
	total = part * numvfs;
	sdev->vf_part_base = sdev->caps.mem_size - total;

	/* The top of the card, which the PF's own BOs must not hold. */
	mutex_lock(&sdev->mem_lock);
	ret = gpu_buddy_alloc_blocks(&sdev->mem, sdev->vf_part_base, sdev->caps.mem_size,
				     total, SPYRE_PAGE_SIZE, &sdev->vf_blocks,
				     GPU_BUDDY_RANGE_ALLOCATION);
	mutex_unlock(&sdev->mem_lock);
	if (ret) {
		pci_dbg(pdev, "device memory above %#llx is in use: %d\n",
			sdev->vf_part_base, ret);
		INIT_LIST_HEAD(&sdev->vf_blocks);
		ret = -EBUSY;
		goto err_put;
	}
	sdev->vf_part_size = part;

	/* Nothing the PF's BOs left there may be read by a VF. */
	ret = spyre_kq_zero(sdev, &sdev->vf_blocks);
	if (ret)
		goto err_release;
	spyre_sriov_program(sdev, numvfs);
	ret = pci_enable_sriov(pdev, numvfs);
	if (ret) {
		spyre_sriov_program(sdev, 0);
		goto err_release;
	}
	pci_info(pdev, "%d VFs, %llu MiB of device memory each from %#llx\n", numvfs,
		 part >> 20, sdev->vf_part_base);
	return numvfs;

err_release:
	spyre_sriov_release(sdev);
err_put:
	pm_runtime_mark_last_busy(&pdev->dev);
	pm_runtime_put_autosuspend(&pdev->dev);
	return ret;
}

/*
 * spyre_sriov_configure() - the PCI core's sriov_numvfs: enable @numvfs VFs,
 * or disable them (0). Disabling removes the VF devices: their open files
 * get -ENODEV as after a hot unplug, then their partitions return to the PF.
 */
int spyre_sriov_configure(struct pci_dev *pdev, int numvfs)
{
	struct spyre_device *sdev = pci_get_drvdata(pdev);

	if (!numvfs) {
		spyre_sriov_fini(sdev);
		return 0;
	}
	return spyre_sriov_enable(sdev, numvfs);
}

/* Disable the VFs, if any, give their memory back to the PF and let it sleep. */
void spyre_sriov_fini(struct spyre_device *sdev)
{
	struct pci_dev *pdev = to_pci_dev(sdev->drm.dev);

	if (!sdev->vf_part_size)
		return;
	pci_disable_sriov(pdev);
	spyre_sriov_program(sdev, 0);
	spyre_sriov_release(sdev);
	pm_runtime_mark_last_busy(&pdev->dev);
	pm_runtime_put_autosuspend(&pdev->dev);
}
