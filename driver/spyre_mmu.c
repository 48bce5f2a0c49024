// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre_mmu.c - device MMU: the context table and per-context page tables.
 *
 * Every open file gets an MMU context: an id in the device's context table
 * and three levels of page tables in DMA-coherent host memory (format:
 * docs/spyre-device.md, "Device MMU"). Buffers are mapped with 4 KiB pages.
 */
#include <linux/dma-mapping.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include "spyre_ctx.h"
#include "spyre_drv.h"
#include "spyre_hw.h"
#include "spyre_mmu.h"

static int spyre_pt_alloc(struct spyre_device *sdev, struct spyre_pt *pt)
{
	pt->cpu = dma_alloc_coherent(sdev->drm.dev, SPYRE_PAGE_SIZE, &pt->dma, GFP_KERNEL);
	return pt->cpu ? 0 : -ENOMEM;
}

static void spyre_pt_free(struct spyre_device *sdev, struct spyre_pt *pt)
{
	if (pt->cpu)
		dma_free_coherent(sdev->drm.dev, SPYRE_PAGE_SIZE, pt->cpu, pt->dma);
	pt->cpu = NULL;
}

/**
 * spyre_mmu_invalidate() - make the device drop cached translations
 * @sdev: the device
 *
 * Page-table writes are plain stores to coherent memory; writel() orders
 * them before the invalidation reaches the device.
 */
void spyre_mmu_invalidate(struct spyre_device *sdev)
{
	int idx;

	if (!drm_dev_enter(&sdev->drm, &idx))
		return;		/* unplugged: the device runs nothing any more */
	mutex_lock(&sdev->mmu_lock);
	spyre_hw_reg_write(sdev, SPYRE_REG_MMU_INVALIDATE, 1);
	mutex_unlock(&sdev->mmu_lock);
	drm_dev_exit(idx);
}

/**
 * spyre_mmu_restore() - give a reset card the context table again
 * @sdev: the device, awake
 *
 * The table and the page tables are in host memory and survive any reset.
 */
void spyre_mmu_restore(struct spyre_device *sdev)
{
	spyre_hw_reg_write(sdev, SPYRE_REG_MMU_CTX_TABLE_LO, lower_32_bits(sdev->ctx_table_dma));
	spyre_hw_reg_write(sdev, SPYRE_REG_MMU_CTX_TABLE_HI, upper_32_bits(sdev->ctx_table_dma));
	spyre_hw_reg_write(sdev, SPYRE_REG_MMU_CTX_COUNT, SPYRE_MMU_MAX_CTX);
	spyre_mmu_invalidate(sdev);
}

int spyre_mmu_init(struct spyre_device *sdev)
{
	size_t size = SPYRE_MMU_MAX_CTX * sizeof(u64);

	mutex_init(&sdev->mmu_lock);
	ida_init(&sdev->ctx_ids);
	sdev->ctx_table = dma_alloc_coherent(sdev->drm.dev, size, &sdev->ctx_table_dma,
					     GFP_KERNEL);
	if (!sdev->ctx_table)
		return -ENOMEM;
	spyre_mmu_restore(sdev);
	return 0;
}

void spyre_mmu_fini(struct spyre_device *sdev)
{
	int idx;

	if (!sdev->ctx_table)
		return;
	if (drm_dev_enter(&sdev->drm, &idx)) {
		spyre_hw_reg_write(sdev, SPYRE_REG_MMU_CTX_COUNT, 0);
		drm_dev_exit(idx);
	}
	dma_free_coherent(sdev->drm.dev, SPYRE_MMU_MAX_CTX * sizeof(u64), sdev->ctx_table,
			  sdev->ctx_table_dma);
	sdev->ctx_table = NULL;
	ida_destroy(&sdev->ctx_ids);
}

/**
 * spyre_mmu_ctx_init() - give a context an MMU context id and a level-0 table
 * @ctx: the context
 *
 * Return: 0, -ENOMEM, or -ENOSPC when every context id is taken.
 */
int spyre_mmu_ctx_init(struct spyre_ctx *ctx)
{
	struct spyre_device *sdev = ctx->sdev;
	int id, ret;

	ret = spyre_pt_alloc(sdev, &ctx->l0);
	if (ret)
		return ret;
	id = ida_alloc_range(&sdev->ctx_ids, 1, SPYRE_MMU_MAX_CTX - 1, GFP_KERNEL);
	if (id < 0) {
		spyre_pt_free(sdev, &ctx->l0);
		return id;
	}
	ctx->id = id;
	sdev->ctx_table[id] = cpu_to_le64(ctx->l0.dma | SPYRE_CTX_VALID);
	spyre_mmu_invalidate(sdev);
	return 0;
}

/**
 * spyre_mmu_ctx_fini() - retire a context's id and free its page tables
 * @ctx: the context; no job of it runs any more
 */
void spyre_mmu_ctx_fini(struct spyre_ctx *ctx)
{
	struct spyre_device *sdev = ctx->sdev;
	int i, j;

	sdev->ctx_table[ctx->id] = 0;
	spyre_mmu_invalidate(sdev);
	ida_free(&sdev->ctx_ids, ctx->id);

	for (i = 0; i < SPYRE_PT_L0_USED; i++) {
		if (ctx->l2[i]) {
			for (j = 0; j < SPYRE_PT_ENTRIES; j++)
				spyre_pt_free(sdev, &ctx->l2[i][j]);
			kfree(ctx->l2[i]);
		}
		spyre_pt_free(sdev, &ctx->l1[i]);
	}
	spyre_pt_free(sdev, &ctx->l0);
}

/* The level-2 table covering @va, allocated on first use. Caller holds ctx->lock. */
static __le64 *spyre_l2_table(struct spyre_ctx *ctx, u64 va)
{
	struct spyre_device *sdev = ctx->sdev;
	unsigned int i0 = SPYRE_PT_INDEX(va, 0), i1 = SPYRE_PT_INDEX(va, 1);
	struct spyre_pt *l2;

	lockdep_assert_held(&ctx->lock);
	if (!ctx->l1[i0].cpu) {
		if (spyre_pt_alloc(sdev, &ctx->l1[i0]))
			return NULL;
		ctx->l0.cpu[i0] = cpu_to_le64(ctx->l1[i0].dma | SPYRE_PTE_VALID);
	}
	if (!ctx->l2[i0]) {
		ctx->l2[i0] = kcalloc(SPYRE_PT_ENTRIES, sizeof(struct spyre_pt), GFP_KERNEL);
		if (!ctx->l2[i0])
			return NULL;
	}
	l2 = &ctx->l2[i0][i1];
	if (!l2->cpu) {
		if (spyre_pt_alloc(sdev, l2))
			return NULL;
		ctx->l1[i0].cpu[i1] = cpu_to_le64(l2->dma | SPYRE_PTE_VALID);
	}
	return l2->cpu;
}

/**
 * spyre_mmu_map() - map [@va, @va + @size) to @addr in @ctx
 * @ctx: the context; caller holds ctx->lock
 * @va: device virtual address, page aligned
 * @addr: device memory offset (SPYRE_PTE_DEVMEM in @flags) or host bus address
 * @size: bytes, page aligned
 * @flags: SPYRE_PTE_READ / _WRITE / _DEVMEM
 *
 * Return: 0 or -ENOMEM (the part mapped so far stays; unmap it).
 */
int spyre_mmu_map(struct spyre_ctx *ctx, u64 va, u64 addr, u64 size, u64 flags)
{
	u64 end = va + size;
	__le64 *l2;

	lockdep_assert_held(&ctx->lock);
	for (; va < end; va += SPYRE_PAGE_SIZE, addr += SPYRE_PAGE_SIZE) {
		l2 = spyre_l2_table(ctx, va);
		if (!l2)
			return -ENOMEM;
		l2[SPYRE_PT_INDEX(va, 2)] = cpu_to_le64((addr & SPYRE_PTE_ADDR_MASK) | flags |
						   SPYRE_PTE_VALID);
	}
	return 0;
}

/**
 * spyre_mmu_unmap() - remove [@va, @va + @size) from @ctx
 * @ctx: the context; caller holds ctx->lock
 * @va: device virtual address, page aligned
 * @size: bytes, page aligned
 *
 * The caller invalidates the device's translations afterwards.
 */
void spyre_mmu_unmap(struct spyre_ctx *ctx, u64 va, u64 size)
{
	unsigned int i0, i1;
	u64 end = va + size;

	lockdep_assert_held(&ctx->lock);
	for (; va < end; va += SPYRE_PAGE_SIZE) {
		i0 = SPYRE_PT_INDEX(va, 0);
		i1 = SPYRE_PT_INDEX(va, 1);
		if (ctx->l2[i0] && ctx->l2[i0][i1].cpu)
			ctx->l2[i0][i1].cpu[SPYRE_PT_INDEX(va, 2)] = 0;
	}
}
