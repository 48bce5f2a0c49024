// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_gem.c - buffer objects.
 *
 * Device BOs live in the card's memory (allocated with the gpu_buddy
 * allocator, zeroed by the device before first use); host BOs are shmem
 * pages pinned and DMA-mapped for the device. Every GEM handle a file holds
 * maps the BO into that file's device address space (gem open/close), so
 * created, imported and self-imported BOs all behave alike.
 */
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pci-p2pdma.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_prime.h>
#include <drm/drm_print.h>

#include "spyre_accel.h"
#include "spyre_ctx.h"
#include "spyre_drv.h"
#include "spyre_gem.h"
#include "spyre_hw.h"
#include "spyre_kq.h"
#include "spyre_mmu.h"

static unsigned int max_pinned_mb;
module_param(max_pinned_mb, uint, 0644);
MODULE_PARM_DESC(max_pinned_mb,
		 "Host memory all spyre host BOs together may pin, in MiB (default 0: half of RAM)");

/* Host memory pinned by host BOs of every spyre device, in pages. */
static atomic64_t spyre_pinned_pages = ATOMIC64_INIT(0);

static u64 spyre_pinned_cap_pages(void)
{
	unsigned int mb = READ_ONCE(max_pinned_mb);

	return mb ? (u64)mb << (20 - PAGE_SHIFT) : totalram_pages() / 2;
}

/*
 * Charge @npages pinned pages to the calling process (RLIMIT_MEMLOCK, as
 * RDMA and VFIO do, unless it has CAP_IPC_LOCK) and to the driver-wide cap.
 * The charge is an atomic on mm->pinned_vm, never mmap_lock: a BO can be
 * freed from munmap() with that lock held.
 */
static int spyre_pin_charge(struct spyre_device *sdev, struct spyre_bo *bo, u64 npages)
{
	struct mm_struct *mm = current->mm;
	u64 limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	bool charge = !capable(CAP_IPC_LOCK);

	if (!mm)
		return -EINVAL;
	if (charge && (u64)atomic64_add_return(npages, &mm->pinned_vm) > limit) {
		atomic64_sub(npages, &mm->pinned_vm);
		drm_dbg(&sdev->drm, "BO_CREATE: %llu pages above RLIMIT_MEMLOCK\n", npages);
		return -ENOMEM;
	}
	if ((u64)atomic64_add_return(npages, &spyre_pinned_pages) > spyre_pinned_cap_pages()) {
		atomic64_sub(npages, &spyre_pinned_pages);
		if (charge)
			atomic64_sub(npages, &mm->pinned_vm);
		drm_dbg(&sdev->drm, "BO_CREATE: %llu pages above max_pinned_mb\n", npages);
		return -ENOMEM;
	}
	mmgrab(mm);
	bo->pin_mm = mm;
	bo->pin_charged = charge;
	bo->pinned_pages = npages;
	return 0;
}

static void spyre_pin_uncharge(struct spyre_bo *bo)
{
	if (!bo->pin_mm)
		return;
	atomic64_sub(bo->pinned_pages, &spyre_pinned_pages);
	if (bo->pin_charged)
		atomic64_sub(bo->pinned_pages, &bo->pin_mm->pinned_vm);
	mmdrop(bo->pin_mm);
	bo->pin_mm = NULL;
}

static struct spyre_bo_map *spyre_bo_find_map(struct spyre_bo *bo, struct spyre_ctx *ctx)
{
	struct spyre_bo_map *m;

	lockdep_assert_held(&bo->map_lock);
	list_for_each_entry(m, &bo->maps, link)
		if (m->ctx == ctx)
			return m;
	return NULL;
}

/* Map every page of @bo at @va in @ctx. Caller holds ctx->lock. */
static int spyre_bo_map_pages(struct spyre_bo *bo, struct spyre_ctx *ctx, u64 va)
{
	u64 flags = SPYRE_PTE_READ | SPYRE_PTE_WRITE;
	struct gpu_buddy_block *block;
	struct scatterlist *sg;
	struct sg_table *sgt;
	int ret, i;

	if (bo->is_device) {
		list_for_each_entry(block, &bo->blocks, link) {
			u64 len = gpu_buddy_block_size(&ctx->sdev->mem, block);

			ret = spyre_mmu_map(ctx, va, gpu_buddy_block_offset(block), len,
					    flags | SPYRE_PTE_DEVMEM);
			if (ret)
				return ret;
			va += len;
		}
		return 0;
	}

	sgt = drm_gem_shmem_get_pages_sgt(&bo->base);
	if (IS_ERR(sgt))
		return PTR_ERR(sgt);
	for_each_sgtable_dma_sg(sgt, sg, i) {
		ret = spyre_mmu_map(ctx, va, sg_dma_address(sg), sg_dma_len(sg), flags);
		if (ret)
			return ret;
		va += sg_dma_len(sg);
	}
	return 0;
}

/* GEM open: a handle for @file now exists; map the BO into its context. */
static int spyre_bo_open(struct drm_gem_object *obj, struct drm_file *file)
{
	struct spyre_bo *bo = to_spyre_bo(obj);
	struct spyre_ctx *ctx = file->driver_priv;
	struct spyre_bo_map *m;
	u64 align;
	int ret;

	mutex_lock(&bo->map_lock);
	m = spyre_bo_find_map(bo, ctx);
	if (m) {
		m->refs++;
		mutex_unlock(&bo->map_lock);
		return 0;
	}
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m) {
		ret = -ENOMEM;
		goto err_unlock;
	}
	m->ctx = ctx;
	m->refs = 1;
	align = obj->size >= SZ_2M ? SZ_2M : SPYRE_PAGE_SIZE;

	mutex_lock(&ctx->lock);
	ret = drm_mm_insert_node_generic(&ctx->va_mm, &m->va, obj->size, align, 0,
					 DRM_MM_INSERT_BEST);
	if (ret) {
		mutex_unlock(&ctx->lock);
		goto err_free;
	}
	ret = spyre_bo_map_pages(bo, ctx, m->va.start);
	if (ret) {
		spyre_mmu_unmap(ctx, m->va.start, obj->size);
		drm_mm_remove_node(&m->va);
		mutex_unlock(&ctx->lock);
		goto err_free;
	}
	mutex_unlock(&ctx->lock);
	spyre_mmu_invalidate(ctx->sdev);
	atomic64_add(obj->size, bo->is_device ? &ctx->dev_bytes : &ctx->host_bytes);
	list_add_tail(&m->link, &bo->maps);
	mutex_unlock(&bo->map_lock);
	return 0;

err_free:
	kfree(m);
err_unlock:
	mutex_unlock(&bo->map_lock);
	return ret;
}

/* GEM close: @file dropped its handle; unmap once no job of it can run. */
static void spyre_bo_close(struct drm_gem_object *obj, struct drm_file *file)
{
	struct spyre_bo *bo = to_spyre_bo(obj);
	struct spyre_ctx *ctx = file->driver_priv;
	struct spyre_bo_map *m;

	mutex_lock(&bo->map_lock);
	m = spyre_bo_find_map(bo, ctx);
	if (!m || --m->refs) {
		mutex_unlock(&bo->map_lock);
		return;
	}
	list_del(&m->link);
	mutex_unlock(&bo->map_lock);
	atomic64_sub(obj->size, bo->is_device ? &ctx->dev_bytes : &ctx->host_bytes);

	/*
	 * Jobs reach the BO by address, listed in bo_handles or not: let every
	 * job the context submitted so far finish with the BO mapped (like
	 * cudaFree, closing synchronizes), then unmap. A job submitted while
	 * this ran may still hold a translation of the pages (docs/spyre-device.md
	 * §7.2), so wait once more before the pages or the addresses can be
	 * reused.
	 */
	spyre_ctx_wait_idle(ctx);
	mutex_lock(&ctx->lock);
	spyre_mmu_unmap(ctx, m->va.start, obj->size);
	mutex_unlock(&ctx->lock);
	spyre_mmu_invalidate(ctx->sdev);
	spyre_ctx_wait_idle(ctx);
	mutex_lock(&ctx->lock);
	drm_mm_remove_node(&m->va);
	mutex_unlock(&ctx->lock);
	kfree(m);
}

static void spyre_bo_free(struct drm_gem_object *obj)
{
	struct spyre_bo *bo = to_spyre_bo(obj);
	struct spyre_device *sdev = to_spyre_device(obj->dev);

	drm_WARN_ON(obj->dev, !list_empty(&bo->maps));
	mutex_destroy(&bo->map_lock);
	if (bo->is_device) {
		mutex_lock(&sdev->mem_lock);
		gpu_buddy_free_list(&sdev->mem, &bo->blocks, 0);
		sdev->mem_used -= obj->size;
		mutex_unlock(&sdev->mem_lock);
		drm_gem_object_release(obj);
		kfree(bo);
		return;
	}
	if (!obj->import_attach)
		atomic64_sub(obj->size, &sdev->host_used);
	spyre_pin_uncharge(bo);
	drm_gem_shmem_free(&bo->base);
}

static int spyre_dev_bo_mmap(struct drm_gem_object *obj, struct vm_area_struct *vma)
{
	struct spyre_bo *bo = to_spyre_bo(obj);

	/*
	 * vm_pgoff still holds the fake offset: only whole-object maps. Only
	 * shared ones, as for shmem BOs: a private (copy-on-write) mapping of
	 * device memory has no meaning, and vmf_insert_pfn() BUGs on one.
	 */
	if (!(bo->flags & DRM_SPYRE_BO_MAPPABLE) ||
	    vma->vm_pgoff != drm_vma_node_start(&obj->vma_node) ||
	    vma->vm_end - vma->vm_start != obj->size || is_cow_mapping(vma->vm_flags))
		return -EINVAL;
	vma->vm_pgoff = 0;
	/* drm_gem_mmap_obj() took a reference for the VMA. */
	vm_flags_set(vma, VM_PFNMAP | VM_IO | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_page_prot = pgprot_writecombine(vm_get_page_prot(vma->vm_flags));
	return 0;
}

/*
 * Pages of a mappable device BO are inserted when first touched, not all at
 * mmap() time: no eager remap whose page-table allocation failure leaves a
 * half-built mapping, and after an unplug (which zaps the mappings) a touch
 * is SIGBUS instead of an access to a BAR that is gone.
 */
static vm_fault_t spyre_dev_bo_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct drm_gem_object *obj = vma->vm_private_data;
	struct spyre_device *sdev = to_spyre_device(obj->dev);
	struct spyre_bo *bo = to_spyre_bo(obj);
	u64 off = vmf->address - vma->vm_start, bar;
	struct gpu_buddy_block *block;
	vm_fault_t ret = VM_FAULT_SIGBUS;
	int idx;

	if (!drm_dev_enter(obj->dev, &idx))
		return VM_FAULT_SIGBUS;
	bar = pci_resource_start(to_pci_dev(sdev->drm.dev), SPYRE_BAR_MEM);
	list_for_each_entry(block, &bo->blocks, link) {
		u64 len = gpu_buddy_block_size(&sdev->mem, block);

		if (off < len) {
			u64 pfn = (bar + gpu_buddy_block_offset(block) + off) >> PAGE_SHIFT;

			ret = vmf_insert_pfn(vma, vmf->address, pfn);
			break;
		}
		off -= len;
	}
	drm_dev_exit(idx);
	return ret;
}

/*
 * Peer-to-peer: a device BO is exported as a dma-buf whose mapping is the
 * bus addresses of its blocks in the exporter's peer BAR (BAR4,
 * docs/spyre-device.md §3.3), as amdgpu exports VRAM. Device memory has no
 * struct pages, so only importers that take bus addresses (attachments with
 * peer2peer set) on a PCI path that carries peer-to-peer may attach; the
 * importer's device MMU maps those addresses as host pages and its COPYs
 * reach this card's memory directly. The BO's blocks stay allocated while
 * any dma-buf or attachment holds it (the dma-buf holds a GEM reference).
 */

/* ACS redirection (P2P request or completion redirect, egress control) below @stop. */
static bool spyre_p2p_acs_redirects(struct pci_dev *dev, struct pci_dev *stop)
{
	u16 ctrl;

	for (; dev && dev != stop; dev = pci_upstream_bridge(dev)) {
		if (!dev->acs_cap)
			continue;
		pci_read_config_word(dev, dev->acs_cap + PCI_ACS_CTRL, &ctrl);
		if (ctrl & (PCI_ACS_RR | PCI_ACS_CR | PCI_ACS_EC))
			return true;
	}
	return false;
}

/* The nearest bridge above both @a and @b (a PCIe switch's upstream port), or NULL. */
static struct pci_dev *spyre_p2p_common_bridge(struct pci_dev *a, struct pci_dev *b)
{
	struct pci_dev *up, *bb;

	for (up = pci_upstream_bridge(a); up; up = pci_upstream_bridge(up))
		for (bb = pci_upstream_bridge(b); bb; bb = pci_upstream_bridge(bb))
			if (up == bb)
				return up;
	return NULL;
}

/**
 * spyre_p2p_path() - can @client's DMA reach @provider's BARs
 * @provider: the exporting card
 * @client: the importing device
 * @switched: set when the path stays below one bridge (the switch routes
 *	it; bus addresses need no mapping)
 *
 * pci_p2pdma_distance() decides where the kernel has CONFIG_PCI_P2PDMA
 * (its host-bridge whitelist included). Without it (Debian's 6.12 kernel),
 * only the path pci_p2pdma accepts on every platform: both devices below
 * one upstream bridge, with no ACS redirection between them.
 *
 * Return: true if peer-to-peer DMA works between them.
 */
static bool spyre_p2p_path(struct pci_dev *provider, struct pci_dev *client, bool *switched)
{
	struct pci_dev *common = spyre_p2p_common_bridge(provider, client);

	*switched = common && !spyre_p2p_acs_redirects(provider, common) &&
		    !spyre_p2p_acs_redirects(client, common);
	if (IS_ENABLED(CONFIG_PCI_P2PDMA))
		return pci_p2pdma_distance(provider, &client->dev, false) >= 0;
	return *switched;
}

static int spyre_dev_dmabuf_attach(struct dma_buf *dmabuf, struct dma_buf_attachment *attach)
{
	struct drm_gem_object *obj = dmabuf->priv;
	bool switched;

	if (!attach->peer2peer) {
		drm_dbg(obj->dev, "dma-buf of device memory: importer %s takes no bus addresses\n",
			dev_name(attach->dev));
		return -EOPNOTSUPP;
	}
	if (!dev_is_pci(attach->dev) ||
	    !spyre_p2p_path(to_pci_dev(obj->dev->dev), to_pci_dev(attach->dev), &switched)) {
		drm_dbg(obj->dev, "dma-buf of device memory: no peer-to-peer path to %s\n",
			dev_name(attach->dev));
		return -EXDEV;
	}
	return 0;
}

static void spyre_dev_dmabuf_unmap(struct dma_buf_attachment *attach, struct sg_table *sgt,
				   enum dma_data_direction dir)
{
	struct drm_gem_object *obj = attach->dmabuf->priv;
	struct scatterlist *sg;
	bool switched;
	int i;

	spyre_p2p_path(to_pci_dev(obj->dev->dev), to_pci_dev(attach->dev), &switched);
	if (!switched)
		for_each_sgtable_dma_sg(sgt, sg, i)
			dma_unmap_resource(attach->dev, sg_dma_address(sg), sg_dma_len(sg), dir,
					   DMA_ATTR_SKIP_CPU_SYNC);
	sg_free_table(sgt);
	kfree(sgt);
}

/*
 * One entry per buddy block: below a switch the PCI bus address itself
 * (pci_p2pdma's PCI_P2PDMA_MAP_BUS_ADDR); through a host bridge the
 * address dma_map_resource() gives the importer (..._THRU_HOST_BRIDGE).
 */
static struct sg_table *spyre_dev_dmabuf_map(struct dma_buf_attachment *attach,
					     enum dma_data_direction dir)
{
	struct drm_gem_object *obj = attach->dmabuf->priv;
	struct spyre_device *sdev = to_spyre_device(obj->dev);
	struct pci_dev *pdev = to_pci_dev(obj->dev->dev);
	struct spyre_bo *bo = to_spyre_bo(obj);
	struct gpu_buddy_block *block;
	struct scatterlist *sg;
	struct sg_table *sgt;
	unsigned int n = 0;
	bool switched;
	int ret;

	spyre_p2p_path(pdev, to_pci_dev(attach->dev), &switched);
	list_for_each_entry(block, &bo->blocks, link)
		n++;
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(sgt, n, GFP_KERNEL);
	if (ret)
		goto err_free;
	sg = sgt->sgl;
	n = 0;
	list_for_each_entry(block, &bo->blocks, link) {
		u64 off = gpu_buddy_block_offset(block);
		u64 len = gpu_buddy_block_size(&sdev->mem, block);
		dma_addr_t addr;

		if (switched) {
			addr = pci_bus_address(pdev, SPYRE_BAR_PEER) + off;
		} else {
			addr = dma_map_resource(attach->dev,
						pci_resource_start(pdev, SPYRE_BAR_PEER) + off,
						len, dir, DMA_ATTR_SKIP_CPU_SYNC);
			if (dma_mapping_error(attach->dev, addr)) {
				ret = -EIO;
				goto err_unmap;
			}
		}
		sg_set_page(sg, NULL, len, 0);
		sg_dma_address(sg) = addr;
		sg_dma_len(sg) = len;
		sg = sg_next(sg);
		n++;
	}
	return sgt;

err_unmap:
	sgt->nents = n;
	spyre_dev_dmabuf_unmap(attach, sgt, dir);
	return ERR_PTR(ret);
err_free:
	kfree(sgt);
	return ERR_PTR(ret);
}

/* No CPU access through the dma-buf: the exporter's BO has its own mmap. */
static const struct dma_buf_ops spyre_dev_dmabuf_ops = {
	.attach = spyre_dev_dmabuf_attach,
	.map_dma_buf = spyre_dev_dmabuf_map,
	.unmap_dma_buf = spyre_dev_dmabuf_unmap,
	.release = drm_gem_dmabuf_release,
};

static struct dma_buf *spyre_dev_bo_export(struct drm_gem_object *obj, int flags)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp_info);

	if (!to_spyre_device(obj->dev)->peer_bar) {
		drm_dbg(obj->dev, "PRIME export of a device-memory BO: the card has no peer BAR\n");
		return ERR_PTR(-EOPNOTSUPP);
	}
	exp_info.ops = &spyre_dev_dmabuf_ops;
	exp_info.size = obj->size;
	exp_info.flags = flags;
	exp_info.priv = obj;
	exp_info.resv = obj->resv;
	return drm_gem_dmabuf_export(obj->dev, &exp_info);
}

/* The exporter pins device BOs (they never move): nothing to do. */
static void spyre_p2p_move_notify(struct dma_buf_attachment *attach)
{
}

static const struct dma_buf_attach_ops spyre_p2p_importer_ops = {
	.allow_peer2peer = true,
	.move_notify = spyre_p2p_move_notify,
};

/**
 * spyre_gem_prime_import() - drm_driver.gem_prime_import
 * @dev: the importing device
 * @dma_buf: the dma-buf
 *
 * A device BO of this card: the BO itself (mapped into the importing file's
 * context as device memory). A device BO of another spyre card: attached as
 * a peer (bus addresses in its peer BAR) and imported as a BO whose pages
 * are those addresses; the exporter refuses (%-EXDEV) where no path exists.
 * Anything else: drm_gem_prime_import().
 *
 * Return: the GEM object or an ERR_PTR.
 */
struct drm_gem_object *spyre_gem_prime_import(struct drm_device *dev, struct dma_buf *dma_buf)
{
	struct dma_buf_attachment *attach;
	struct drm_gem_object *obj;
	struct sg_table *sgt;
	int ret;

	if (dma_buf->ops != &spyre_dev_dmabuf_ops)
		return drm_gem_prime_import(dev, dma_buf);
	obj = dma_buf->priv;
	if (obj->dev == dev) {
		drm_gem_object_get(obj);
		return obj;
	}

	attach = dma_buf_dynamic_attach(dma_buf, dev->dev, &spyre_p2p_importer_ops, NULL);
	if (IS_ERR(attach))
		return ERR_CAST(attach);
	get_dma_buf(dma_buf);
	sgt = dma_buf_map_attachment_unlocked(attach, DMA_BIDIRECTIONAL);
	if (IS_ERR(sgt)) {
		ret = PTR_ERR(sgt);
		goto err_detach;
	}
	obj = drm_gem_shmem_prime_import_sg_table(dev, attach, sgt);
	if (IS_ERR(obj)) {
		ret = PTR_ERR(obj);
		goto err_unmap;
	}
	obj->import_attach = attach;
	obj->resv = dma_buf->resv;
	return obj;

err_unmap:
	dma_buf_unmap_attachment_unlocked(attach, sgt, DMA_BIDIRECTIONAL);
err_detach:
	dma_buf_detach(dma_buf, attach);
	dma_buf_put(dma_buf);
	return ERR_PTR(ret);
}

/* fdinfo: device memory is allocated (and cleared) when the BO is created. */
static enum drm_gem_object_status spyre_dev_bo_status(struct drm_gem_object *obj)
{
	return DRM_GEM_OBJECT_RESIDENT;
}

/*
 * fdinfo: a host BO's pages are pinned from creation to free; an imported
 * one's from import to free. Called under the file's table_lock: no locks.
 */
static enum drm_gem_object_status spyre_host_bo_status(struct drm_gem_object *obj)
{
	struct drm_gem_shmem_object *shmem = &to_spyre_bo(obj)->base;

	return READ_ONCE(shmem->pages) || READ_ONCE(shmem->sgt) ? DRM_GEM_OBJECT_RESIDENT : 0;
}

static const struct vm_operations_struct spyre_dev_bo_vm_ops = {
	.fault = spyre_dev_bo_fault,
	.open = drm_gem_vm_open,
	.close = drm_gem_vm_close,
};

static const struct drm_gem_object_funcs spyre_dev_bo_funcs = {
	.free = spyre_bo_free,
	.open = spyre_bo_open,
	.close = spyre_bo_close,
	.mmap = spyre_dev_bo_mmap,
	.export = spyre_dev_bo_export,
	.status = spyre_dev_bo_status,
	.vm_ops = &spyre_dev_bo_vm_ops,
};

static const struct drm_gem_object_funcs spyre_host_bo_funcs = {
	.free = spyre_bo_free,
	.open = spyre_bo_open,
	.close = spyre_bo_close,
	.print_info = drm_gem_shmem_object_print_info,
	.pin = drm_gem_shmem_object_pin,
	.unpin = drm_gem_shmem_object_unpin,
	.get_sg_table = drm_gem_shmem_object_get_sg_table,
	.vmap = drm_gem_shmem_object_vmap,
	.vunmap = drm_gem_shmem_object_vunmap,
	.mmap = drm_gem_shmem_object_mmap,
	.status = spyre_host_bo_status,
	.vm_ops = &drm_gem_shmem_vm_ops,
};

static void spyre_bo_init_common(struct spyre_bo *bo)
{
	mutex_init(&bo->map_lock);
	INIT_LIST_HEAD(&bo->maps);
	INIT_LIST_HEAD(&bo->blocks);
}

/* drm_driver.gem_create_object: shmem (host and imported) BOs. */
struct drm_gem_object *spyre_gem_create_object(struct drm_device *dev, size_t size)
{
	struct spyre_bo *bo = kzalloc(sizeof(*bo), GFP_KERNEL);

	if (!bo)
		return ERR_PTR(-ENOMEM);
	spyre_bo_init_common(bo);
	bo->flags = DRM_SPYRE_BO_HOST;
	bo->base.map_wc = false;
	bo->base.base.funcs = &spyre_host_bo_funcs;
	return &bo->base.base;
}

static struct spyre_bo *spyre_dev_bo_create(struct spyre_device *sdev, u64 size, u32 flags)
{
	bool mappable = flags & DRM_SPYRE_BO_MAPPABLE;
	u64 end = mappable ? min_t(u64, SPYRE_MEM_WINDOW_SIZE, sdev->caps.mem_size) :
			     sdev->caps.mem_size;
	struct spyre_bo *bo;
	int ret;

	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo)
		return ERR_PTR(-ENOMEM);
	spyre_bo_init_common(bo);
	bo->is_device = true;
	bo->flags = flags;
	bo->base.base.funcs = &spyre_dev_bo_funcs;
	drm_gem_private_object_init(&sdev->drm, &bo->base.base, size);

	mutex_lock(&sdev->mem_lock);
	ret = gpu_buddy_alloc_blocks(&sdev->mem, 0, end, size, SPYRE_PAGE_SIZE, &bo->blocks,
				     mappable ? GPU_BUDDY_RANGE_ALLOCATION : 0);
	if (!ret)
		sdev->mem_used += size;
	mutex_unlock(&sdev->mem_lock);
	if (ret) {
		drm_gem_object_release(&bo->base.base);
		kfree(bo);
		return ERR_PTR(ret == -ENOSPC ? -ENOMEM : ret);
	}

	/* Nothing of a previous owner may be read back. */
	ret = spyre_kq_zero(sdev, &bo->blocks);
	if (!ret && (flags & DRM_SPYRE_BO_MAPPABLE))
		ret = drm_gem_create_mmap_offset(&bo->base.base);
	if (ret) {
		drm_gem_object_put(&bo->base.base);
		return ERR_PTR(ret);
	}
	return bo;
}

static struct spyre_bo *spyre_host_bo_create(struct spyre_device *sdev, u64 size)
{
	struct drm_gem_shmem_object *shmem;
	struct sg_table *sgt;
	int ret;

	shmem = drm_gem_shmem_create(&sdev->drm, size);
	if (IS_ERR(shmem))
		return ERR_CAST(shmem);
	/* Counted from here: spyre_bo_free() subtracts it on every path. */
	atomic64_add(size, &sdev->host_used);
	ret = spyre_pin_charge(sdev, to_spyre_bo(&shmem->base), size >> PAGE_SHIFT);
	if (ret) {
		drm_gem_object_put(&shmem->base);
		return ERR_PTR(ret);
	}
	/* Pin and DMA-map now: device access never waits for page-in. */
	sgt = drm_gem_shmem_get_pages_sgt(shmem);
	if (IS_ERR(sgt)) {
		drm_gem_object_put(&shmem->base);
		return ERR_CAST(sgt);
	}
	return to_spyre_bo(&shmem->base);
}

static u64 spyre_bo_va(struct spyre_bo *bo, struct spyre_ctx *ctx)
{
	struct spyre_bo_map *m;
	u64 va = 0;

	mutex_lock(&bo->map_lock);
	m = spyre_bo_find_map(bo, ctx);
	if (m)
		va = m->va.start;
	mutex_unlock(&bo->map_lock);
	return va;
}

static u64 spyre_bo_mmap_offset(struct spyre_bo *bo)
{
	if (bo->is_device && !(bo->flags & DRM_SPYRE_BO_MAPPABLE))
		return 0;
	if (drm_gem_create_mmap_offset(&bo->base.base))
		return 0;
	return drm_vma_node_offset_addr(&bo->base.base.vma_node);
}

int spyre_bo_create_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
{
	struct spyre_device *sdev = to_spyre_device(dev);
	struct drm_spyre_bo_create *args = data;
	u64 size = round_up(args->size, SPYRE_PAGE_SIZE);
	struct spyre_bo *bo;
	int ret;

	if (args->flags & ~DRM_SPYRE_BO_FLAGS ||
	    (args->flags & DRM_SPYRE_BO_HOST && args->flags & DRM_SPYRE_BO_MAPPABLE)) {
		drm_dbg(dev, "BO_CREATE: bad flags 0x%x\n", args->flags);
		return -EINVAL;
	}
	if (!args->size || args->size > sdev->caps.mem_size ||
	    size >= SPYRE_MMU_VA_SIZE / 2) {
		drm_dbg(dev, "BO_CREATE: bad size %llu\n", args->size);
		return -EINVAL;
	}

	if (args->flags & DRM_SPYRE_BO_HOST)
		bo = spyre_host_bo_create(sdev, size);
	else
		bo = spyre_dev_bo_create(sdev, size, args->flags);
	if (IS_ERR(bo))
		return PTR_ERR(bo);

	/* Creating the handle maps the BO into this file's context (open). */
	ret = drm_gem_handle_create(file, &bo->base.base, &args->handle);
	if (!ret) {
		args->va = spyre_bo_va(bo, file->driver_priv);
		args->mmap_offset = spyre_bo_mmap_offset(bo);
	}
	drm_gem_object_put(&bo->base.base);
	return ret;
}

int spyre_bo_info_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
{
	struct drm_spyre_bo_info *args = data;
	struct drm_gem_object *obj;
	struct spyre_bo *bo;

	if (args->pad)
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	bo = to_spyre_bo(obj);
	args->flags = bo->flags;
	args->size = obj->size;
	args->va = spyre_bo_va(bo, file->driver_priv);
	args->mmap_offset = spyre_bo_mmap_offset(bo);
	drm_gem_object_put(obj);
	return 0;
}

int spyre_bo_wait_ioctl(struct drm_device *dev, void *data, struct drm_file *file)
{
	struct drm_spyre_bo_wait *args = data;
	struct drm_gem_object *obj;
	unsigned long timeout;
	long ret;

	if (args->pad || args->timeout_ns < 0)
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	timeout = nsecs_to_jiffies(args->timeout_ns);
	ret = dma_resv_wait_timeout(obj->resv, DMA_RESV_USAGE_READ, true, timeout);
	drm_gem_object_put(obj);
	if (ret == 0)
		return -ETIME;
	return ret < 0 ? ret : 0;
}

/**
 * spyre_gem_show_memory_stats() - fdinfo memory keys of a file, per region
 * @p: the fdinfo printer
 * @file: the file
 *
 * drm_show_memory_stats() with the file's BOs split by placement: region
 * "device" (the card's memory) and region "host" (pinned host memory,
 * imported dma-bufs included). Every BO the file holds a handle to counts,
 * created or imported; one with handles in more than one file, or exported
 * as a dma-buf, counts as shared. No key for purgeable: BOs never are.
 */
void spyre_gem_show_memory_stats(struct drm_printer *p, struct drm_file *file)
{
	struct drm_memory_stats stats[2] = {};
	struct drm_gem_object *obj;
	int id;

	spin_lock(&file->table_lock);
	idr_for_each_entry(&file->object_idr, obj, id) {
		struct drm_memory_stats *s = &stats[to_spyre_bo(obj)->is_device ? 0 : 1];

		if (drm_gem_object_is_shared_for_memory_stats(obj))
			s->shared += obj->size;
		else
			s->private += obj->size;
		if (obj->funcs->status(obj) & DRM_GEM_OBJECT_RESIDENT)
			s->resident += obj->size;
		if (!dma_resv_test_signaled(obj->resv, dma_resv_usage_rw(true)))
			s->active += obj->size;
	}
	spin_unlock(&file->table_lock);

	drm_print_memory_stats(p, &stats[0], DRM_GEM_OBJECT_RESIDENT, "device");
	drm_print_memory_stats(p, &stats[1], DRM_GEM_OBJECT_RESIDENT, "host");
}

static void spyre_resv_object_free(struct drm_gem_object *obj)
{
	drm_gem_object_release(obj);
	kfree(obj);
}

static const struct drm_gem_object_funcs spyre_resv_object_funcs = {
	.free = spyre_resv_object_free,
};

/**
 * spyre_gem_resv_object_create() - a GEM object that is only a dma_resv
 * @sdev: the device
 *
 * A context keeps the newest fence of each of its queues in this object's
 * reservation object, and submit locks it together with the job's BOs.
 * It has no handle, no pages and no mmap offset.
 *
 * Return: the object or an ERR_PTR.
 */
struct drm_gem_object *spyre_gem_resv_object_create(struct spyre_device *sdev)
{
	struct drm_gem_object *obj = kzalloc(sizeof(*obj), GFP_KERNEL);

	if (!obj)
		return ERR_PTR(-ENOMEM);
	obj->funcs = &spyre_resv_object_funcs;
	drm_gem_private_object_init(&sdev->drm, obj, 0);
	return obj;
}

int spyre_gem_init(struct spyre_device *sdev)
{
	struct pci_dev *pdev = to_pci_dev(sdev->drm.dev);
	int ret;

	/* Exports of device BOs need the whole of device memory in BAR4. */
	sdev->peer_bar = (sdev->caps.features & SPYRE_FEAT_PEER_BAR) &&
			 (pci_resource_flags(pdev, SPYRE_BAR_PEER) & IORESOURCE_MEM) &&
			 !(pci_resource_flags(pdev, SPYRE_BAR_PEER) & IORESOURCE_UNSET) &&
			 pci_resource_len(pdev, SPYRE_BAR_PEER) >= sdev->caps.mem_size;
	if ((sdev->caps.features & SPYRE_FEAT_PEER_BAR) && !sdev->peer_bar)
		drm_info(&sdev->drm, "peer BAR not assigned: no peer-to-peer exports\n");
	mutex_init(&sdev->mem_lock);
	ret = gpu_buddy_init(&sdev->mem, sdev->caps.mem_size, SPYRE_PAGE_SIZE);
	if (!ret)
		sdev->mem_ready = true;
	return ret;
}

void spyre_gem_fini(struct spyre_device *sdev)
{
	if (sdev->mem_ready)
		gpu_buddy_fini(&sdev->mem);
}
