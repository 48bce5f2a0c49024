/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spyre_mmu.h - the device MMU: context table, page tables, invalidation.
 */
#ifndef __SPYRE_MMU_H__
#define __SPYRE_MMU_H__

#include <linux/types.h>

struct spyre_ctx;
struct spyre_device;

int spyre_mmu_init(struct spyre_device *sdev);
void spyre_mmu_fini(struct spyre_device *sdev);
int spyre_mmu_ctx_init(struct spyre_ctx *ctx);
void spyre_mmu_ctx_fini(struct spyre_ctx *ctx);
int spyre_mmu_map(struct spyre_ctx *ctx, u64 va, u64 addr, u64 size, u64 flags);
void spyre_mmu_unmap(struct spyre_ctx *ctx, u64 va, u64 size);
void spyre_mmu_invalidate(struct spyre_device *sdev);
void spyre_mmu_restore(struct spyre_device *sdev);

#endif /* __SPYRE_MMU_H__ */
