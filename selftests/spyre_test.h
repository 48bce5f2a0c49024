/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Helpers shared by the spyre kselftests: find the device, create BOs and
 * queues, build packets, submit, and wait on syncobjs — raw ioctls only, so
 * the tests exercise the ABI itself.
 */
#ifndef SPYRE_TEST_H
#define SPYRE_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "spyre_accel.h"
#include "spyre_hw.h"

/* accel node of the index-th device bound to spyre, or -ENODEV */
static inline int spyre_node(int index, char *path, size_t len)
{
	char link[PATH_MAX], target[PATH_MAX];
	int minor, found = 0;
	ssize_t n;

	for (minor = 0; minor < 64; minor++) {
		snprintf(link, sizeof(link), "/sys/class/accel/accel%d/device/driver", minor);
		n = readlink(link, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = '\0';
		if (strcmp(strrchr(target, '/') + 1, "spyre"))
			continue;
		if (found++ == index) {
			snprintf(path, len, "/dev/accel/accel%d", minor);
			return 0;
		}
	}
	return -ENODEV;
}

static inline int spyre_open(int index)
{
	char path[64];

	if (spyre_node(index, path, sizeof(path)))
		return -1;
	return open(path, O_RDWR | O_CLOEXEC);
}

/* CLOCK_MONOTONIC in ns: the clock of the kernel's ktime_get_ns(). */
static inline int64_t spyre_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* ioctl returning 0 or -errno */
static inline int xioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg) ? -errno : 0;
}

struct sbo {
	uint32_t handle;
	uint64_t va;
	uint64_t size;
	uint64_t mmap_offset;
	void *map;
};

static inline int sbo_create(int fd, uint64_t size, uint32_t flags, struct sbo *bo)
{
	struct drm_spyre_bo_create c = { .size = size, .flags = flags };
	int ret = xioctl(fd, DRM_IOCTL_SPYRE_BO_CREATE, &c);

	memset(bo, 0, sizeof(*bo));
	if (ret)
		return ret;
	bo->handle = c.handle;
	bo->va = c.va;
	bo->size = size;
	bo->mmap_offset = c.mmap_offset;
	if (c.mmap_offset) {
		bo->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, c.mmap_offset);
		if (bo->map == MAP_FAILED)
			return -errno;
	}
	return 0;
}

static inline int sbo_close(int fd, struct sbo *bo)
{
	struct drm_gem_close c = { .handle = bo->handle };

	if (bo->map)
		munmap(bo->map, bo->size);
	bo->map = NULL;
	return xioctl(fd, DRM_IOCTL_GEM_CLOSE, &c);
}

static inline int squeue_create(int fd, uint32_t prio, uint32_t *id)
{
	struct drm_spyre_queue_create q = { .priority = prio };
	int ret = xioctl(fd, DRM_IOCTL_SPYRE_QUEUE_CREATE, &q);

	*id = q.queue_id;
	return ret;
}

static inline int ssyncobj_create(int fd, uint32_t *handle)
{
	struct drm_syncobj_create c = { 0 };
	int ret = xioctl(fd, DRM_IOCTL_SYNCOBJ_CREATE, &c);

	*handle = c.handle;
	return ret;
}

/*
 * How long a test waits for work that must complete: a hang detector, not a
 * budget. A loaded 2-core TCG host (the debug VM beside the Python boot in
 * make check) runs the guest many times slower than an idle one, and a job
 * that first has to time out (the driver's 2 s) and reset waits longer still.
 */
#define SPYRE_DONE_MS 60000

/* Wait for a binary syncobj (point 0) or a timeline point. */
static inline int ssyncobj_wait(int fd, uint32_t handle, uint64_t point, int64_t timeout_ms)
{
	struct timespec ts;
	struct drm_syncobj_timeline_wait w = {
		.handles = (uintptr_t)&handle,
		.points = (uintptr_t)&point,
		.count_handles = 1,
		.flags = DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
	};

	clock_gettime(CLOCK_MONOTONIC, &ts);
	w.timeout_nsec = ts.tv_sec * 1000000000LL + ts.tv_nsec + timeout_ms * 1000000LL;
	return xioctl(fd, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &w);
}

/* Packets: the preparers of spyre_hw.h (spyre_prep_*). */

struct ssubmit {
	uint32_t queue;
	const void *packets;
	uint32_t count;
	const uint32_t *bos;
	uint32_t nbos;
	const struct drm_spyre_sync *in;
	uint32_t nin;
	uint32_t out;
	uint64_t out_point;
	uint32_t wait_bound_ms;	/* DRM_SPYRE_SUBMIT_WAIT_BOUND when not 0 */
	uint64_t job_seq;	/* out */
};

static inline int ssubmit(int fd, struct ssubmit *s)
{
	struct drm_spyre_submit a = {
		.queue_id = s->queue,
		.packets = (uintptr_t)s->packets,
		.packet_count = s->count,
		.bo_count = s->nbos,
		.bo_handles = (uintptr_t)s->bos,
		.in_syncs = (uintptr_t)s->in,
		.in_sync_count = s->nin,
		.out_sync_handle = s->out,
		.out_sync_point = s->out_point,
		.flags = s->wait_bound_ms ? DRM_SPYRE_SUBMIT_WAIT_BOUND : 0,
		.wait_bound_ms = s->wait_bound_ms,
	};
	int ret = xioctl(fd, DRM_IOCTL_SPYRE_SUBMIT, &a);

	s->job_seq = a.job_seq;
	return ret;
}

/* Submit @count packets on @queue and wait for them (5 s). */
static inline int srun(int fd, uint32_t queue, const void *packets, uint32_t count)
{
	struct ssubmit s = { .queue = queue, .packets = packets, .count = count };
	uint32_t sync;
	int ret;

	ret = ssyncobj_create(fd, &sync);
	if (ret)
		return ret;
	s.out = sync;
	ret = ssubmit(fd, &s);
	if (!ret)
		ret = ssyncobj_wait(fd, sync, 0, SPYRE_DONE_MS);
	{
		struct drm_syncobj_destroy d = { .handle = sync };

		ioctl(fd, DRM_IOCTL_SYNCOBJ_DESTROY, &d);
	}
	return ret;
}

static inline int squeue_error(int fd, uint32_t queue, struct drm_spyre_queue_error *e)
{
	memset(e, 0, sizeof(*e));
	e->queue_id = queue;
	return xioctl(fd, DRM_IOCTL_SPYRE_QUEUE_ERROR, e);
}

static inline long read_sysfs_long(const char *fmt, const char *pci)
{
	char path[256], buf[64];
	FILE *f;
	long v = -1;

	snprintf(path, sizeof(path), fmt, pci);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f))
		v = strtol(buf, NULL, 0);
	fclose(f);
	return v;
}

/* "device waits N" from the first card's debugfs faults file, or -1. */
static inline long device_waits(void)
{
	char link[PATH_MAX], target[PATH_MAX], path[PATH_MAX + 64], line[256];
	long v = -1;
	ssize_t n;
	FILE *f;

	snprintf(link, sizeof(link), "/sys/class/accel/accel0/device");
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return -1;
	target[n] = '\0';
	snprintf(path, sizeof(path), "/sys/kernel/debug/accel/%s/faults", strrchr(target, '/') + 1);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f) && strstr(line, "device waits "))
		v = strtol(strstr(line, "device waits ") + 13, NULL, 10);
	fclose(f);
	return v;
}

/* A TAP diagnostic line ("# ..."), flushed: tests print their figures with it. */
static inline void spyre_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void spyre_diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("# ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	fflush(stdout);
	va_end(ap);
}

/* Read a small text file (sysfs, debugfs, procfs) into @buf; 0 or -errno. */
static inline int read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t off = 0;
	ssize_t n = 0;

	buf[0] = '\0';
	if (fd < 0)
		return -errno;
	while (off < len - 1 && (n = read(fd, buf + off, len - 1 - off)) > 0)
		off += n;
	buf[off] = '\0';
	close(fd);
	return n < 0 ? -1 : 0;
}

static inline int write_text(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* PCI function @pci's sysfs attribute @attr (one line, no newline); 0 or -1. */
static inline int pci_attr(const char *pci, const char *attr, char *buf, size_t len)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", pci, attr);
	if (read_text(path, buf, len))
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static inline int pci_attr_write(const char *pci, const char *attr, const char *val)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", pci, attr);
	return write_text(path, val);
}

/* Wait up to @ms for @pci's power/runtime_status to read @want; 0 or -1. */
static inline int wait_runtime_status(const char *pci, const char *want, int ms)
{
	char st[64];

	for (; ms > 0; ms -= 20) {
		if (!pci_attr(pci, "power/runtime_status", st, sizeof(st)) && !strcmp(st, want))
			return 0;
		usleep(20000);
	}
	return -1;
}

/*
 * Arm a hang on hardware queues 0 .. @nq - 1 of card @pci (debugfs "inject":
 * each queue's next job never completes); 0 or -errno. The driver refuses a
 * queue past the last user queue with -EINVAL, which ends the walk.
 */
static inline int inject_hang_all(const char *pci, int nq)
{
	char path[256], cmd[32];
	int q, ret = 0;

	snprintf(path, sizeof(path), "/sys/kernel/debug/accel/%s/inject", pci);
	for (q = 0; q < nq && !ret; q++) {
		snprintf(cmd, sizeof(cmd), "%d 1", q);
		ret = write_text(path, cmd);
		if (ret == -EINVAL)
			return 0;	/* past the last user queue */
	}
	return ret;
}

/* Disarm card @pci's injected hangs; 0 or -errno. */
static inline int inject_disarm(const char *pci)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/kernel/debug/accel/%s/inject", pci);
	return write_text(path, "0 0");
}

/* The last component of the target of symlink @link (a PCI name); 0 or -errno. */
static inline int link_name(const char *link, char *name, size_t len)
{
	char target[PATH_MAX];
	ssize_t n;

	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	snprintf(name, len, "%s", strrchr(target, '/') + 1);
	return 0;
}

/* PCI name ("0000:00:04.0") of the index-th spyre card; 0 or -errno. */
static inline int card_pci(int index, char *pci, size_t len)
{
	char node[64], link[PATH_MAX];

	if (spyre_node(index, node, sizeof(node)))
		return -ENODEV;
	snprintf(link, sizeof(link), "/sys/class/accel/%s/device", strrchr(node, '/') + 1);
	return link_name(link, pci, len);
}

#define SPYRE_SNAP_CARDS 2

/*
 * What must come back to its starting value after a test: per card the
 * memory counters and the debugfs listings of contexts and BOs, and the
 * kernel's taint flags.
 */
struct spyre_snap {
	int ncards;
	struct {
		char pci[32];
		long mem_used, host_used;
		char contexts[4096], bos[4096];
	} c[SPYRE_SNAP_CARDS];
	unsigned long tainted;
};

static inline void spyre_snap_take(struct spyre_snap *s)
{
	char path[PATH_MAX], buf[64];
	int i;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < SPYRE_SNAP_CARDS && !card_pci(i, s->c[i].pci, sizeof(s->c[i].pci)); i++) {
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/mem_used", s->c[i].pci);
		s->c[i].mem_used = read_text(path, buf, sizeof(buf)) ? -1 : strtol(buf, NULL, 0);
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/host_mem_used", s->c[i].pci);
		s->c[i].host_used = read_text(path, buf, sizeof(buf)) ? -1 : strtol(buf, NULL, 0);
		snprintf(path, sizeof(path), "/sys/kernel/debug/accel/%s/contexts", s->c[i].pci);
		read_text(path, s->c[i].contexts, sizeof(s->c[i].contexts));
		snprintf(path, sizeof(path), "/sys/kernel/debug/accel/%s/bos", s->c[i].pci);
		read_text(path, s->c[i].bos, sizeof(s->c[i].bos));
	}
	s->ncards = i;
	s->tainted = read_text("/proc/sys/kernel/tainted", buf, sizeof(buf)) ? 0 :
		     strtoul(buf, NULL, 0);
}

static inline int spyre_snap_same(const struct spyre_snap *a, const struct spyre_snap *b)
{
	int i;

	if (a->ncards != b->ncards || a->tainted != b->tainted)
		return 0;
	for (i = 0; i < a->ncards; i++)
		if (a->c[i].mem_used != b->c[i].mem_used ||
		    a->c[i].host_used != b->c[i].host_used ||
		    strcmp(a->c[i].contexts, b->c[i].contexts) || strcmp(a->c[i].bos, b->c[i].bos))
			return 0;
	return 1;
}

/*
 * Take @now until it equals @start or @seconds passed: files are released
 * and jobs freed asynchronously, so give them a moment.
 */
static inline void spyre_snap_settle(struct spyre_snap *now, const struct spyre_snap *start,
				     int seconds)
{
	int64_t end = spyre_now_ns() + seconds * 1000000000ll;

	for (;;) {
		spyre_snap_take(now);
		if (spyre_snap_same(now, start) || spyre_now_ns() > end)
			return;
		usleep(100000);
	}
}

/* Which parts of two snapshots differ, in words (a static buffer). */
static inline const char *spyre_snap_diff(const struct spyre_snap *a, const struct spyre_snap *b)
{
	static char buf[512];
	size_t n = 0;
	int i;

	buf[0] = '\0';
#define SNAP_SAY(...) (n += snprintf(buf + (n < sizeof(buf) ? n : sizeof(buf) - 1), \
				     n < sizeof(buf) ? sizeof(buf) - n : 1, __VA_ARGS__))
	if (a->ncards != b->ncards)
		SNAP_SAY(" cards %d -> %d", a->ncards, b->ncards);
	if (a->tainted != b->tainted)
		SNAP_SAY(" taint %#lx -> %#lx", a->tainted, b->tainted);
	for (i = 0; i < a->ncards && i < b->ncards; i++) {
		if (a->c[i].mem_used != b->c[i].mem_used)
			SNAP_SAY(" card %d mem_used %ld -> %ld", i, a->c[i].mem_used, b->c[i].mem_used);
		if (a->c[i].host_used != b->c[i].host_used)
			SNAP_SAY(" card %d host_mem_used %ld -> %ld", i, a->c[i].host_used,
				 b->c[i].host_used);
		if (strcmp(a->c[i].contexts, b->c[i].contexts))
			SNAP_SAY(" card %d contexts", i);
		if (strcmp(a->c[i].bos, b->c[i].bos))
			SNAP_SAY(" card %d bos", i);
	}
#undef SNAP_SAY
	return n ? buf + 1 : "nothing";
}

static inline void fill_pattern(uint8_t *p, size_t n, unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed * 17 + (i >> 12));
}

/* host -> device -> host through two COPYs, checked byte for byte */
static inline int scopy_round_trip(int fd, uint32_t q, uint64_t size, unsigned int seed)
{
	struct sbo in, dev, out;
	uint8_t p[2][64];
	int ret;

	ret = sbo_create(fd, size, DRM_SPYRE_BO_HOST, &in);
	ret = ret ?: sbo_create(fd, size, 0, &dev);
	ret = ret ?: sbo_create(fd, size, DRM_SPYRE_BO_HOST, &out);
	if (ret)
		return ret;
	fill_pattern(in.map, size, seed);
	spyre_prep_copy_va(p[0], in.va, dev.va, size);
	spyre_prep_copy_va(p[1], dev.va, out.va, size);
	ret = srun(fd, q, p, 2);
	if (!ret && memcmp(in.map, out.map, size))
		ret = -EBADMSG;
	sbo_close(fd, &in);
	sbo_close(fd, &dev);
	sbo_close(fd, &out);
	return ret;
}

#endif
