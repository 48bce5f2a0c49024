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
