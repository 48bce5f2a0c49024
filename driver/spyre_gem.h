/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef __SPYRE_GEM_H__
#define __SPYRE_GEM_H__

#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_mm.h>

struct spyre_ctx;

/**
 * struct spyre_bo_map - a BO's mapping in one context
 * @link: in spyre_bo.maps
 * @ctx: the context
 * @va: its device virtual address range
 * @refs: handles of that context's file that refer to the BO
 */
struct spyre_bo_map {
	struct list_head link;
	struct spyre_ctx *ctx;
	struct drm_mm_node va;
	unsigned int refs;
};

/**
 * struct spyre_bo - a buffer object
 * @base: shmem GEM object (device BOs use only base.base)
 * @flags: DRM_SPYRE_BO_* it was created with
 * @is_device: placed in device memory
 * @blocks: gpu_buddy blocks of a device BO
 * @map_lock: protects @maps
 * @maps: struct spyre_bo_map, one per context holding a handle
 * @pin_mm: process charged for a host BO's pinned pages (NULL otherwise)
 * @pin_charged: @pin_mm's pinned_vm was charged (it lacked CAP_IPC_LOCK)
 * @pinned_pages: pages charged
 */
struct spyre_bo {
	struct drm_gem_shmem_object base;
	u32 flags;
	bool is_device;
	struct list_head blocks;
	/* Protects maps */
	struct mutex map_lock;
	struct list_head maps;
	struct mm_struct *pin_mm;
	bool pin_charged;
	u64 pinned_pages;
};

static inline struct spyre_bo *to_spyre_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct spyre_bo, base.base);
}

#endif
