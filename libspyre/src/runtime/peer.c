// SPDX-License-Identifier: MIT
/*
 * Peer-to-peer copies between two devices of the process (CUDA's
 * cudaMemcpyPeer): one device's COPY reads or writes the other's memory
 * through the driver's peer-to-peer dma-buf (docs/driver.md
 * "Peer-to-peer"); the buffer is imported once and kept (memory.c). The
 * device that runs the copy imports the other's buffer: the exporter must
 * show its memory to peers (SPYRE_FEAT_PEER_BAR) and the PCI topology must
 * carry the traffic. Calls memory.c and stream.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include <xf86drm.h>

#include "spyre_accel.h"
#include "internal.h"

/* @dev's own device memory [@ptr, @ptr + @size): one allocation of it. */
static int check_local(struct spyre_device *dev, uint64_t ptr, size_t size)
{
	const struct spyre_alloc *a;
	int ok;

	pthread_mutex_lock(&dev->lock);
	a = spyre_alloc_find_locked(dev, ptr);
	ok = a && a->type == SPYRE_MEMORY_DEVICE && ptr + size <= a->base + a->size;
	pthread_mutex_unlock(&dev->lock);
	return ok ? 0 : spyre_error(-EINVAL, "0x%llx + %zu is not inside one device allocation of %s",
				     (unsigned long long)ptr, size, dev->props.devnode);
}

/* Enqueue the copy on @s, whose device is @dst_dev or @src_dev. */
static int peer_copy(struct spyre_stream *s, struct spyre_device *dst_dev, uint64_t dst,
		     struct spyre_device *src_dev, uint64_t src, size_t size)
{
	struct spyre_device *dev = s->dev;
	struct spyre_pkt_copy p;
	int ret;

	if (dst % SPYRE_STICK_BYTES || src % SPYRE_STICK_BYTES || size % SPYRE_STICK_BYTES)
		return spyre_error(-EINVAL, "peer copies move whole 128-byte sticks (dst 0x%llx "
				   "src 0x%llx size %zu)", (unsigned long long)dst,
				   (unsigned long long)src, size);
	if (dev != dst_dev && dev != src_dev)
		return spyre_error(-EINVAL, "the stream's device %s is neither the source's nor the "
				   "destination's", dev->props.devnode);
	if (!size)
		return 0;
	if (dev == dst_dev) {
		ret = check_local(dst_dev, dst, size);
		if (!ret && src_dev != dev)
			ret = spyre_peer_import(dev, src_dev, src, size, &src);
		else if (!ret)
			ret = check_local(src_dev, src, size);
	} else {
		ret = check_local(src_dev, src, size);
		if (!ret)
			ret = spyre_peer_import(dev, dst_dev, dst, size, &dst);
	}
	if (ret)
		return ret;
	spyre_prep_copy_va(&p, src, dst, size);
	return spyre_stream_copy(s, &p, SPYRE_MEMCPY_D2D);
}

static int memcpy_peer_async(spyre_stream_t *s, spyre_device_t *dst_dev, spyre_dptr_t dst,
			     spyre_device_t *src_dev, spyre_dptr_t src, size_t size)
{
	if (!s || !dst_dev || !src_dev)
		return spyre_error(-EINVAL, "spyre_memcpy_peer_async: NULL %s",
				   !s ? "stream" : "device");
	return peer_copy(s, dst_dev, dst, src_dev, src, size);
}

SPYRE_EXPORT int spyre_memcpy_peer_async(spyre_stream_t *s, spyre_device_t *dst_dev, spyre_dptr_t dst,
					 spyre_device_t *src_dev, spyre_dptr_t src, size_t size)
{
	SPYRE_TRACED("spyre_memcpy_peer_async", "copy peer",
		     memcpy_peer_async(s, dst_dev, dst, src_dev, src, size), "bytes", size);
}

struct peer_args {
	struct spyre_device *dst_dev, *src_dev;
	uint64_t dst, src;
	size_t size;
};

static int peer_work(struct spyre_stream *s, void *arg)
{
	const struct peer_args *a = arg;

	return peer_copy(s, a->dst_dev, a->dst, a->src_dev, a->src, a->size);
}

/*
 * The destination's device pulls when the source shows its memory to
 * peers; else the source's device pushes. Either failing for want of a
 * path (-EXDEV, -EOPNOTSUPP), the other is tried.
 */
static int memcpy_peer(spyre_device_t *dst_dev, spyre_dptr_t dst, spyre_device_t *src_dev,
		       spyre_dptr_t src, size_t size)
{
	struct peer_args a = { dst_dev, src_dev, dst, src, size };
	struct spyre_device *first, *second;
	int ret;

	if (!dst_dev || !src_dev)
		return spyre_error(-EINVAL, "spyre_memcpy_peer: NULL device");
	first = (src_dev->props.features & SPYRE_FEAT_PEER_BAR) ? dst_dev : src_dev;
	second = first == dst_dev ? src_dev : dst_dev;
	ret = spyre_internal_sync(first, peer_work, &a);
	if ((ret == -EXDEV || ret == -EOPNOTSUPP) && second != first)
		ret = spyre_internal_sync(second, peer_work, &a);
	return ret;
}

SPYRE_EXPORT int spyre_memcpy_peer(spyre_device_t *dst_dev, spyre_dptr_t dst, spyre_device_t *src_dev,
				   spyre_dptr_t src, size_t size)
{
	SPYRE_TRACED("spyre_memcpy_peer", "copy peer", memcpy_peer(dst_dev, dst, src_dev, src, size),
		     "bytes", size);
}

/* Whether @dev can import a device buffer of @peer: a one-page buffer tried. */
static int can_access_peer(spyre_device_t *dev, spyre_device_t *peer, int *can)
{
	spyre_dptr_t probe;
	uint64_t va;
	int ret;

	if (!dev || !peer || !can)
		return spyre_error(-EINVAL, "spyre_device_can_access_peer: NULL argument");
	*can = 0;
	if (dev == peer) {
		*can = 1;
		return 0;
	}
	if (!(peer->props.features & SPYRE_FEAT_PEER_BAR))
		return 0;
	ret = spyre_malloc(peer, 4096, &probe);
	if (ret)
		return ret;
	ret = spyre_peer_import(dev, peer, probe, 4096, &va);
	spyre_free(peer, probe);
	if (ret == -EXDEV || ret == -EOPNOTSUPP)
		return 0;	/* no access: an answer, not a failure */
	*can = !ret;
	return ret;
}

SPYRE_EXPORT int spyre_device_can_access_peer(spyre_device_t *dev, spyre_device_t *peer, int *can)
{
	SPYRE_TRACED("spyre_device_can_access_peer", NULL, can_access_peer(dev, peer, can), NULL, 0);
}

/*
 * Memory shared between processes (CUDA's IPC memory handles): an
 * allocation exported as the driver's peer-to-peer dma-buf, imported by a
 * card of another process. ipc_lock protects ipc_imports; nothing is
 * taken under it but the importer's ioctls.
 */
struct ipc_import {
	struct spyre_device *dev;
	uint32_t handle;
	uint64_t va, size;
	/*
	 * DRM gives a buffer one handle per file, however often it is imported:
	 * @refs counts the imports sharing it (the handle closes with the last),
	 * and @own marks the device's own allocation come back (its handle is
	 * the allocation's, closed by spyre_free(), never here).
	 */
	int refs;
	bool own;
	struct ipc_import *next;
};

static pthread_mutex_t ipc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ipc_import *ipc_imports;

static int ipc_export(spyre_device_t *dev, spyre_dptr_t ptr, int *fd)
{
	struct drm_prime_handle exp = { .flags = DRM_CLOEXEC | DRM_RDWR, .fd = -1 };
	int ret;

	if (!dev || !fd)
		return spyre_error(-EINVAL, "spyre_ipc_export: NULL argument");
	*fd = -1;
	ret = spyre_alloc_export(dev, ptr, &exp.handle);
	if (ret)
		return ret;
	if (drmIoctl(dev->fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &exp)) {
		ret = -errno;
		return spyre_error(ret, "%s cannot export its memory%s", dev->props.devnode,
				   ret == -EOPNOTSUPP ? " (it has no peer BAR: SPYRE_FEAT_PEER_BAR)" : "");
	}
	*fd = exp.fd;
	return 0;
}

SPYRE_EXPORT int spyre_ipc_export(spyre_device_t *dev, spyre_dptr_t ptr, int *fd)
{
	SPYRE_TRACED("spyre_ipc_export", NULL, ipc_export(dev, ptr, fd), NULL, 0);
}

static int ipc_import(spyre_device_t *dev, int fd, spyre_dptr_t *ptr, size_t *size)
{
	struct drm_prime_handle imp = { .fd = fd };
	struct drm_spyre_bo_info info = { 0 };
	struct drm_gem_close c = { 0 };
	struct ipc_import *p, *q;
	int ret;

	if (!dev || !ptr || fd < 0)
		return spyre_error(-EINVAL, "spyre_ipc_import: %s", fd < 0 ? "negative file descriptor" :
				   "NULL argument");
	p = calloc(1, sizeof(*p));
	if (!p)
		return spyre_error(-ENOMEM, "spyre_ipc_import: out of memory");
	if (drmIoctl(dev->fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &imp)) {
		ret = -errno;
		free(p);
		return spyre_error(ret, "%s cannot import file descriptor %d%s", dev->props.devnode, fd,
				   ret == -EXDEV ? " (no peer-to-peer path on the PCI bus to its card)" :
				   ret == -EOPNOTSUPP ? " (its card does not show memory to peers)" : "");
	}
	info.handle = imp.handle;
	if (drmIoctl(dev->fd, DRM_IOCTL_SPYRE_BO_INFO, &info)) {
		ret = -errno;
		c.handle = imp.handle;
		drmIoctl(dev->fd, DRM_IOCTL_GEM_CLOSE, &c);
		free(p);
		return spyre_error(ret, "spyre_ipc_import: BO_INFO failed");
	}
	p->dev = dev;
	p->handle = imp.handle;
	p->va = info.va;
	p->size = info.size;
	p->refs = 1;
	pthread_mutex_lock(&dev->lock);
	p->own = spyre_alloc_find_locked(dev, info.va) != NULL;
	pthread_mutex_unlock(&dev->lock);
	pthread_mutex_lock(&ipc_lock);
	for (q = ipc_imports; q && !(q->dev == dev && q->handle == p->handle); q = q->next)
		;
	if (q) {
		q->refs++;	/* the same buffer again: the same handle and address */
		free(p);
		p = q;
	} else {
		p->next = ipc_imports;
		ipc_imports = p;
	}
	*ptr = p->va;
	if (size)
		*size = p->size;
	pthread_mutex_unlock(&ipc_lock);
	return 0;
}

SPYRE_EXPORT int spyre_ipc_import(spyre_device_t *dev, int fd, spyre_dptr_t *ptr, size_t *size)
{
	SPYRE_TRACED("spyre_ipc_import", NULL, ipc_import(dev, fd, ptr, size), NULL, 0);
}

/* Close the imports into @dev at @va (0: every one); the number closed. */
static int ipc_close(struct spyre_device *dev, uint64_t va)
{
	struct ipc_import **pp, *p;
	int n = 0;

	pthread_mutex_lock(&ipc_lock);
	pp = &ipc_imports;
	while ((p = *pp)) {
		if (p->dev == dev && (!va || p->va == va)) {
			struct drm_gem_close c = { .handle = p->handle };

			n++;
			if (va && --p->refs > 0) {
				pp = &p->next;
				continue;
			}
			if (!p->own)
				drmIoctl(dev->fd, DRM_IOCTL_GEM_CLOSE, &c);
			*pp = p->next;
			free(p);
		} else {
			pp = &p->next;
		}
	}
	pthread_mutex_unlock(&ipc_lock);
	return n;
}

void spyre_ipc_forget(struct spyre_device *dev)
{
	ipc_close(dev, 0);
}

static int ipc_close_call(spyre_device_t *dev, spyre_dptr_t ptr)
{
	if (!dev || !ptr)
		return spyre_error(-EINVAL, "spyre_ipc_close: NULL %s", !dev ? "device" : "address");
	return ipc_close(dev, ptr) ? 0 : spyre_error(-EINVAL, "spyre_ipc_close: 0x%llx is not an "
						      "import of %s", (unsigned long long)ptr,
						      dev->props.devnode);
}

SPYRE_EXPORT int spyre_ipc_close(spyre_device_t *dev, spyre_dptr_t ptr)
{
	SPYRE_TRACED("spyre_ipc_close", NULL, ipc_close_call(dev, ptr), NULL, 0);
}
