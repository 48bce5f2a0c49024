// SPDX-License-Identifier: MIT
/*
 * Device and pinned host memory: a caching sub-allocator over driver BOs
 * (size classes of 128 B .. 1 MiB carved from 2 MiB chunks; larger sizes get
 * their own BO, kept in a cache when freed), and the allocation table behind
 * pointer attributes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xf86drm.h>

#include "spyre_accel.h"
#include "internal.h"

int spyre_bo_new(struct spyre_device *dev, uint64_t size, uint32_t flags, struct spyre_buf *bo)
{
	struct drm_spyre_bo_create c = { .size = size, .flags = flags };

	memset(bo, 0, sizeof(*bo));
	if (drmIoctl(dev->fd, DRM_IOCTL_SPYRE_BO_CREATE, &c))
		return spyre_error(-errno, "%s: creating a %llu-byte %s buffer failed",
				   dev->props.devnode, (unsigned long long)size,
				   flags & DRM_SPYRE_BO_HOST ? "host" : "device");
	bo->handle = c.handle;
	bo->va = c.va;
	bo->size = size;
	if (flags & DRM_SPYRE_BO_HOST) {
		bo->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, dev->fd,
			       (off_t)c.mmap_offset);
		if (bo->map == MAP_FAILED) {
			int ret = -errno;

			bo->map = NULL;
			spyre_bo_del(dev, bo);
			return spyre_error(ret, "mapping a host buffer failed");
		}
	}
	return 0;
}

/*
 * Peer imports: a device BO of one device imported into another through
 * the driver's peer-to-peer dma-buf (docs/driver.md "Peer-to-peer"), made
 * on first use by a peer copy (peer.c) and kept until the exporter deletes
 * the BO (spyre_bo_del()) or either device closes (spyre_peer_forget()).
 * peer_lock protects peer_imports; it is innermost, taken under any
 * device's lock, and nothing is taken under it.
 */
struct peer_import {
	struct spyre_device *exporter, *importer;
	uint32_t exp_handle;		/* the BO on the exporter */
	uint32_t handle;		/* its import on the importer */
	uint64_t va;			/* ... at this address of the importer */
	struct peer_import *next;
};

static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static struct peer_import *peer_imports;

/*
 * Under peer_lock: close the imports of @dev's BO @handle (0: of every BO of
 * @dev) and, with @importer_too, every import into @dev. Closing an import
 * waits for the importer's jobs (the driver unmaps only then).
 */
static void peer_forget_locked(struct spyre_device *dev, uint32_t handle, bool importer_too)
{
	struct peer_import **pp = &peer_imports, *p;

	while ((p = *pp)) {
		if ((p->exporter == dev && (!handle || p->exp_handle == handle)) ||
		    (importer_too && p->importer == dev)) {
			struct drm_gem_close c = { .handle = p->handle };

			drmIoctl(p->importer->fd, DRM_IOCTL_GEM_CLOSE, &c);
			*pp = p->next;
			free(p);
		} else {
			pp = &p->next;
		}
	}
}

void spyre_peer_forget(struct spyre_device *dev)
{
	pthread_mutex_lock(&peer_lock);
	peer_forget_locked(dev, 0, true);
	pthread_mutex_unlock(&peer_lock);
}

/* Under peer_lock: @exporter's BO @bo imported into @importer, made on first use. */
static int peer_import_locked(struct spyre_device *importer, struct spyre_device *exporter,
			      const struct spyre_buf *bo, uint64_t *va)
{
	struct drm_prime_handle exp = { 0 }, imp = { 0 };
	struct drm_spyre_bo_info info = { 0 };
	struct drm_gem_close c = { 0 };
	struct peer_import *p;
	int fd, ret;

	for (p = peer_imports; p; p = p->next)
		if (p->exporter == exporter && p->importer == importer && p->exp_handle == bo->handle) {
			*va = p->va;
			return 0;
		}
	p = calloc(1, sizeof(*p));
	if (!p)
		return spyre_error(-ENOMEM, "peer import: out of memory");
	exp.handle = bo->handle;
	exp.flags = DRM_CLOEXEC | DRM_RDWR;
	exp.fd = -1;
	if (drmIoctl(exporter->fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &exp)) {
		ret = -errno;
		free(p);
		return spyre_error(ret, "%s cannot export its memory to peers%s", exporter->props.devnode,
				   ret == -EOPNOTSUPP ? " (it has no peer BAR: SPYRE_FEAT_PEER_BAR)" : "");
	}
	fd = exp.fd;
	imp.fd = fd;
	ret = drmIoctl(importer->fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &imp) ? -errno : 0;
	info.handle = imp.handle;
	close(fd);
	if (ret) {
		free(p);
		return spyre_error(ret, "%s cannot reach the memory of %s%s", importer->props.devnode,
				   exporter->props.devnode, ret == -EXDEV ?
				   " (no peer-to-peer path on the PCI bus between them)" : "");
	}
	if (drmIoctl(importer->fd, DRM_IOCTL_SPYRE_BO_INFO, &info)) {
		ret = -errno;
		c.handle = info.handle;
		drmIoctl(importer->fd, DRM_IOCTL_GEM_CLOSE, &c);
		free(p);
		return spyre_error(ret, "peer import: BO_INFO failed");
	}
	p->exporter = exporter;
	p->importer = importer;
	p->exp_handle = bo->handle;
	p->handle = info.handle;
	p->va = info.va;
	p->next = peer_imports;
	peer_imports = p;
	*va = p->va;
	return 0;
}

int spyre_peer_import(struct spyre_device *importer, struct spyre_device *exporter, uint64_t ptr,
		      uint64_t size, uint64_t *va)
{
	const struct spyre_alloc *a;
	const struct spyre_buf *bo;
	uint64_t base = 0;
	int ret;

	pthread_mutex_lock(&exporter->lock);
	a = spyre_alloc_find_locked(exporter, ptr);
	if (!a || a->type != SPYRE_MEMORY_DEVICE || ptr + size > a->base + a->size) {
		pthread_mutex_unlock(&exporter->lock);
		return spyre_error(-EINVAL, "0x%llx + %llu is not inside one device allocation of %s",
				   (unsigned long long)ptr, (unsigned long long)size,
				   exporter->props.devnode);
	}
	bo = a->cls < 0 ? &a->bo : &a->chunk->bo;
	pthread_mutex_lock(&peer_lock);
	ret = peer_import_locked(importer, exporter, bo, &base);
	pthread_mutex_unlock(&peer_lock);
	if (!ret)
		*va = base + (ptr - bo->va);
	pthread_mutex_unlock(&exporter->lock);
	return ret;
}

/* @exporter's whole BO @bo (device or host memory) in @importer's address space, kept. */
int spyre_bo_import(struct spyre_device *importer, struct spyre_device *exporter,
		    const struct spyre_buf *bo, uint64_t *va)
{
	int ret;

	pthread_mutex_lock(&peer_lock);
	ret = peer_import_locked(importer, exporter, bo, va);
	pthread_mutex_unlock(&peer_lock);
	return ret;
}

void spyre_bo_del(struct spyre_device *dev, struct spyre_buf *bo)
{
	struct drm_gem_close c = { .handle = bo->handle };

	if (bo->handle) {
		pthread_mutex_lock(&peer_lock);
		peer_forget_locked(dev, bo->handle, false);
		pthread_mutex_unlock(&peer_lock);
	}
	if (bo->map)
		munmap(bo->map, bo->size);
	if (bo->handle)
		drmIoctl(dev->fd, DRM_IOCTL_GEM_CLOSE, &c);
	memset(bo, 0, sizeof(*bo));
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	void *p;
	size_t n;

	if (need <= *cap)
		return 0;
	n = *cap ? *cap * 2 : 16;
	while (n < need)
		n *= 2;
	p = realloc(*arr, n * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

/* Index of the first allocation with base > ptr. */
static size_t upper(struct spyre_device *dev, uint64_t ptr)
{
	size_t lo = 0, hi = dev->nallocs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (dev->allocs[mid].base <= ptr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct spyre_alloc *spyre_alloc_find_locked(struct spyre_device *dev, uint64_t ptr)
{
	size_t i = upper(dev, ptr);

	if (!i)
		return NULL;
	if (ptr < dev->allocs[i - 1].base + dev->allocs[i - 1].span)
		return &dev->allocs[i - 1];
	return NULL;
}

const struct spyre_alloc *spyre_alloc_find_host_locked(struct spyre_device *dev, const void *p)
{
	size_t i;

	for (i = 0; i < dev->nallocs; i++) {
		const struct spyre_alloc *a = &dev->allocs[i];

		if (a->type == SPYRE_MEMORY_HOST && (const char *)p >= (char *)a->bo.map &&
		    (const char *)p < (char *)a->bo.map + a->span)
			return a;
	}
	return NULL;
}

static int insert_locked(struct spyre_device *dev, const struct spyre_alloc *a)
{
	size_t i;

	if (grow((void **)&dev->allocs, &dev->cap_allocs, dev->nallocs + 1, sizeof(*a)))
		return -ENOMEM;
	i = upper(dev, a->base);
	memmove(&dev->allocs[i + 1], &dev->allocs[i], (dev->nallocs - i) * sizeof(*a));
	dev->allocs[i] = *a;
	dev->nallocs++;
	return 0;
}

static int size_class(size_t size)
{
	int c = 0;

	while (c < SPYRE_NCLASSES && ((size_t)SPYRE_STICK_BYTES << c) < size)
		c++;
	return c < SPYRE_NCLASSES ? c : -1;
}

/* A free block of class @c, carving a new chunk when there is none. */
static int class_get_locked(struct spyre_device *dev, int c, struct spyre_free_block *out)
{
	uint64_t bsize = (uint64_t)SPYRE_STICK_BYTES << c, off;
	struct spyre_chunk *ch;
	int ret;

	if (!dev->nfree[c]) {
		ch = calloc(1, sizeof(*ch));
		if (!ch)
			return spyre_error(-ENOMEM, "out of memory");
		/* Room for every block of every chunk: spyre_free() never grows it. */
		if (grow((void **)&dev->free[c], &dev->cap_free[c],
			 dev->nblocks[c] + SPYRE_CHUNK_SIZE / bsize, sizeof(**dev->free))) {
			free(ch);
			return spyre_error(-ENOMEM, "out of memory");
		}
		ret = spyre_bo_new(dev, SPYRE_CHUNK_SIZE, 0, &ch->bo);
		if (ret) {
			free(ch);
			return ret;
		}
		dev->stats.bo_creates++;
		dev->stats.reserved += SPYRE_CHUNK_SIZE;
		dev->nblocks[c] += SPYRE_CHUNK_SIZE / bsize;
		/* Push in reverse so blocks are handed out in address order. */
		for (off = SPYRE_CHUNK_SIZE; off; off -= bsize) {
			dev->free[c][dev->nfree[c]].va = ch->bo.va + off - bsize;
			dev->free[c][dev->nfree[c]].chunk = ch;
			dev->nfree[c]++;
		}
		ch->next = dev->chunks[c];
		dev->chunks[c] = ch;
	}
	*out = dev->free[c][--dev->nfree[c]];
	out->chunk->used++;
	return 0;
}

SPYRE_EXPORT int spyre_malloc(spyre_device_t *dev, size_t size, spyre_dptr_t *ptr)
{
	struct spyre_alloc a = { .type = SPYRE_MEMORY_DEVICE, .size = size };
	struct spyre_free_block b = { 0 };
	size_t i;
	int ret;

	if (!dev || !ptr || !size)
		return spyre_error(-EINVAL, "spyre_malloc: %s", !size ? "size is 0" : "NULL argument");
	pthread_mutex_lock(&dev->lock);
	dev->stats.alloc_calls++;
	a.cls = size_class(size);
	if (a.cls >= 0) {
		ret = class_get_locked(dev, a.cls, &b);
		if (ret)
			goto out;
		a.base = b.va;
		a.chunk = b.chunk;
		a.span = (uint64_t)SPYRE_STICK_BYTES << a.cls;
	} else {
		uint64_t span = (size + 4095) & ~(uint64_t)4095;

		for (i = 0; i < dev->nlarge; i++)
			if (dev->large_cache[i].size == span)
				break;
		if (i < dev->nlarge) {
			a.bo = dev->large_cache[i];
			dev->large_cache[i] = dev->large_cache[--dev->nlarge];
		} else {
			ret = spyre_bo_new(dev, span, 0, &a.bo);
			if (ret)
				goto out;
			dev->stats.bo_creates++;
			dev->stats.reserved += span;
		}
		a.base = a.bo.va;
		a.span = span;
	}
	ret = insert_locked(dev, &a);
	if (ret) {
		ret = spyre_error(ret, "out of memory");
		goto out;
	}
	dev->stats.allocated += size;
	if (dev->stats.allocated > dev->stats.peak_allocated)
		dev->stats.peak_allocated = dev->stats.allocated;
	*ptr = a.base;
out:
	pthread_mutex_unlock(&dev->lock);
	return ret;
}

SPYRE_EXPORT int spyre_free(spyre_device_t *dev, spyre_dptr_t ptr)
{
	struct spyre_alloc a;
	size_t i;
	int ret = 0;

	if (!dev)
		return spyre_error(-EINVAL, "spyre_free: NULL device");
	if (!ptr)
		return 0;
	pthread_mutex_lock(&dev->lock);
	i = upper(dev, ptr);
	if (!i || dev->allocs[i - 1].base != ptr || dev->allocs[i - 1].type != SPYRE_MEMORY_DEVICE) {
		ret = spyre_error(-EINVAL, "spyre_free: 0x%llx is not an allocation of %s",
				  (unsigned long long)ptr, dev->props.devnode);
		goto out;
	}
	a = dev->allocs[i - 1];
	memmove(&dev->allocs[i - 1], &dev->allocs[i], (dev->nallocs - i) * sizeof(a));
	dev->nallocs--;
	dev->stats.allocated -= a.size;
	/*
	 * Reuse is stream-ordered, as in CUDA's caching allocator: work queued
	 * on one stream before the free still runs before work that reuses it.
	 */
	if (a.cls >= 0) {
		/* Room for every block of the class exists since its chunk was carved. */
		dev->free[a.cls][dev->nfree[a.cls]].va = a.base;
		dev->free[a.cls][dev->nfree[a.cls]].chunk = a.chunk;
		dev->nfree[a.cls]++;
		a.chunk->used--;
	} else if (!a.bo.exported && !grow((void **)&dev->large_cache, &dev->cap_large, dev->nlarge + 1,
			 sizeof(*dev->large_cache))) {
		dev->large_cache[dev->nlarge++] = a.bo;
	} else {
		dev->stats.reserved -= a.bo.size;
		spyre_bo_del(dev, &a.bo);
	}
out:
	pthread_mutex_unlock(&dev->lock);
	return ret;
}

SPYRE_EXPORT int spyre_empty_cache(spyre_device_t *dev)
{
	struct spyre_chunk **pp, *ch;
	size_t i, k;
	int c;

	if (!dev)
		return spyre_error(-EINVAL, "spyre_empty_cache: NULL device");
	pthread_mutex_lock(&dev->lock);
	for (i = 0; i < dev->nlarge; i++) {
		dev->stats.reserved -= dev->large_cache[i].size;
		spyre_bo_del(dev, &dev->large_cache[i]);
	}
	dev->nlarge = 0;
	for (c = 0; c < SPYRE_NCLASSES; c++) {
		for (pp = &dev->chunks[c]; (ch = *pp);) {
			if (ch->used) {
				pp = &ch->next;
				continue;
			}
			/* Drop the chunk's blocks from the free list, then the chunk. */
			for (i = 0, k = 0; i < dev->nfree[c]; i++)
				if (dev->free[c][i].chunk != ch)
					dev->free[c][k++] = dev->free[c][i];
			dev->nfree[c] = k;
			*pp = ch->next;
			dev->nblocks[c] -= SPYRE_CHUNK_SIZE / ((size_t)SPYRE_STICK_BYTES << c);
			dev->stats.reserved -= ch->bo.size;
			spyre_bo_del(dev, &ch->bo);
			free(ch);
		}
	}
	pthread_mutex_unlock(&dev->lock);
	return 0;
}

SPYRE_EXPORT int spyre_mem_get_stats(spyre_device_t *dev, struct spyre_mem_stats *stats)
{
	uint32_t size;

	if (!dev || !stats || stats->size < 8)
		return spyre_error(-EINVAL, "spyre_mem_get_stats: NULL argument or size not set");
	size = stats->size < sizeof(*stats) ? stats->size : sizeof(*stats);
	pthread_mutex_lock(&dev->lock);
	memcpy((char *)stats + 8, (char *)&dev->stats + 8, size - 8);
	pthread_mutex_unlock(&dev->lock);
	return 0;
}

SPYRE_EXPORT int spyre_malloc_host(spyre_device_t *dev, size_t size, void **host)
{
	struct spyre_alloc a = { .type = SPYRE_MEMORY_HOST, .size = size, .cls = -1 };
	int ret;

	if (!dev || !host || !size)
		return spyre_error(-EINVAL, "spyre_malloc_host: %s",
				   !size ? "size is 0" : "NULL argument");
	a.span = (size + 4095) & ~(uint64_t)4095;
	ret = spyre_bo_new(dev, a.span, DRM_SPYRE_BO_HOST, &a.bo);
	if (ret)
		return ret;
	a.base = a.bo.va;
	pthread_mutex_lock(&dev->lock);
	ret = insert_locked(dev, &a);
	pthread_mutex_unlock(&dev->lock);
	if (ret) {
		spyre_bo_del(dev, &a.bo);
		return spyre_error(ret, "out of memory");
	}
	*host = a.bo.map;
	return 0;
}

SPYRE_EXPORT int spyre_free_host(spyre_device_t *dev, void *host)
{
	const struct spyre_alloc *found;
	struct spyre_alloc a;
	size_t i;

	if (!dev)
		return spyre_error(-EINVAL, "spyre_free_host: NULL device");
	if (!host)
		return 0;
	pthread_mutex_lock(&dev->lock);
	found = spyre_alloc_find_host_locked(dev, host);
	if (!found || found->bo.map != host) {
		pthread_mutex_unlock(&dev->lock);
		return spyre_error(-EINVAL, "spyre_free_host: %p is not from spyre_malloc_host", host);
	}
	i = (size_t)(found - dev->allocs);
	a = *found;
	memmove(&dev->allocs[i], &dev->allocs[i + 1], (dev->nallocs - i - 1) * sizeof(a));
	dev->nallocs--;
	pthread_mutex_unlock(&dev->lock);
	spyre_bo_del(dev, &a.bo);
	return 0;
}

SPYRE_EXPORT int spyre_pointer_get_attributes(spyre_device_t *dev, uint64_t ptr,
					       struct spyre_pointer_attributes *attr)
{
	const struct spyre_alloc *a;
	struct spyre_pointer_attributes r = { .size = sizeof(r), .device = -1 };
	uint32_t size;

	if (!dev || !attr || attr->size < 8)
		return spyre_error(-EINVAL, "spyre_pointer_get_attributes: NULL argument or size not set");
	pthread_mutex_lock(&dev->lock);
	a = spyre_alloc_find_locked(dev, ptr);
	if (!a)
		a = spyre_alloc_find_host_locked(dev, (const void *)(uintptr_t)ptr);
	if (a) {
		r.type = a->type;
		r.device = (int32_t)dev->props.index;
		r.device_base = a->base;
		r.host_base = a->type == SPYRE_MEMORY_HOST ? a->bo.map : NULL;
		r.alloc_size = a->size;
	}
	pthread_mutex_unlock(&dev->lock);
	size = attr->size < sizeof(r) ? attr->size : sizeof(r);
	memcpy((char *)attr + 4, (char *)&r + 4, size - 4);
	return 0;
}

void spyre_memory_fini(struct spyre_device *dev)
{
	size_t i;
	int c;

	spyre_empty_cache(dev);
	for (i = 0; i < dev->nallocs; i++)
		if (dev->allocs[i].cls < 0)
			spyre_bo_del(dev, &dev->allocs[i].bo);
	for (c = 0; c < SPYRE_NCLASSES; c++) {
		while (dev->chunks[c]) {
			struct spyre_chunk *ch = dev->chunks[c];

			dev->chunks[c] = ch->next;
			spyre_bo_del(dev, &ch->bo);
			free(ch);
		}
		free(dev->free[c]);
	}
	free(dev->allocs);
	free(dev->large_cache);
	if (dev->staging.handle)
		spyre_bo_del(dev, &dev->staging);
	if (dev->values.handle)
		spyre_bo_del(dev, &dev->values);
}

int spyre_alloc_export(struct spyre_device *dev, uint64_t ptr, uint32_t *handle)
{
	struct spyre_alloc *a;
	size_t i;
	int ret = 0;

	pthread_mutex_lock(&dev->lock);
	i = upper(dev, ptr);
	a = i ? &dev->allocs[i - 1] : NULL;
	if (!a || a->base != ptr || a->type != SPYRE_MEMORY_DEVICE)
		ret = spyre_error(-EINVAL, "0x%llx is not a device allocation of %s",
				  (unsigned long long)ptr, dev->props.devnode);
	else if (a->cls >= 0)
		ret = spyre_error(-EINVAL, "0x%llx (%llu bytes) shares its buffer with other "
				  "allocations: only allocations of more than 1 MiB can be exported",
				  (unsigned long long)ptr, (unsigned long long)a->size);
	if (!ret) {
		a->bo.exported = true;
		*handle = a->bo.handle;
	}
	pthread_mutex_unlock(&dev->lock);
	return ret;
}
