// SPDX-License-Identifier: MIT
/*
 * Description: libspyre's device-wide walks against streams destroyed on
 * other threads, on the host without a card: libspyre (built with
 * AddressSanitizer) runs over a fake driver defined here - libudev finds one
 * "card", whose file is a memfd (so host buffers map), and the libdrm calls
 * libspyre makes (drmIoctl, syncobjs) keep queues, syncobjs and buffers in
 * tables, with handles never reused so a stale one is caught. Jobs complete
 * at submit; a COPY from FAULT_VA fails its queue like a device page fault.
 *
 * A thread's syncobj wait can be held until the test releases it, which
 * makes the races deterministic:
 *  1. spyre_device_synchronize() holds a stream in its wait while another
 *     thread destroys that stream; once released it must neither touch freed
 *     memory (AddressSanitizer aborts) nor fail, and the stream's queue and
 *     syncobj are released after the walk let go of it;
 *  2. a synchronous copy holds the internal stream while another thread's
 *     failing copy replaces (destroys) it;
 * then a fault is reported by the next SUBMIT itself, with the detail
 * QUEUE_ERROR gives and no second ioctl per job;
 * then a patch-path program's image, uploaded by a job that failed, is
 * uploaded again by a launch with the same bindings on another stream;
 * then a stream's batch (spyre_stream_batch_begin(), the collectives'):
 * its jobs one SUBMIT at its end, split at DRM_SPYRE_MAX_JOB_PACKETS,
 * submitted early by a synchronize and by a record of a plain event, a
 * fault named by its step, a SUBMIT that fails at the end signaling the
 * point so that the stream's synchronize fails instead of waiting forever;
 * then 3 - 4 threads create, use and destroy streams, events, programs and
 * copies for a fixed number of iterations while others call
 * spyre_device_synchronize() and spyre_program_unload() (both walk every
 * stream) and launch a program whose earlier users are being destroyed;
 * then events outlive their streams: the stream's syncobj kept while an event
 * or a pending wait names it, freed with the last; recorders on several
 * threads destroying the streams of a shared event others query and wait for.
 * Every call must succeed, no stale handle may reach the driver, and after
 * spyre_device_close() no queue, syncobj or buffer may be left.
 * TAP (tests/tap.h); arguments name the cases to run (sync, internal,
 * submit_fault, patch_reupload, batch, xthread_batch, batch_nop_sync,
 * xthread_callback, shared_batch, storm, event_outlives, event_race, close;
 * default all).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <libudev.h>
#include <xf86drm.h>

#include "spyre.h"
#include "spyre_accel.h"
#include "../src/common.h"	/* the batches (internal) */
#include "spyre_hw.h"
#include "spyre_progbuild.h"
#include "../../tests/tap.h"

#define FAULT_VA	(127ull << 30)
#define MAX_OBJS	(1 << 18)

/* ---- the fake driver ------------------------------------------------------------ */

static pthread_mutex_t mk = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mkc = PTHREAD_COND_INITIALIZER;
static int memfd = -1;
static char devnode[64];
static uint64_t file_size, next_va = 1ull << 30;

static struct {
	uint32_t next;			/* handles 1.. in creation order, never reused */
	uint32_t live;
	bool alive[MAX_OBJS];
} syncobjs, queues, bos;
static uint64_t timeline[MAX_OBJS];	/* signaled point of each syncobj */
static uint64_t queue_errors[MAX_OBJS], queue_fail_seq[MAX_OBJS];
static uint32_t queue_fail_packet[MAX_OBJS];	/* the failed job's faulting packet */
static unsigned int stale;		/* calls naming a handle that is not alive */
static unsigned int submits, queue_errors_asked;	/* SUBMIT and QUEUE_ERROR calls */
static unsigned int signals;		/* timeline points the host signaled (a batch whose SUBMIT failed) */
static uint32_t last_packets;		/* packets of the last accepted SUBMIT */
static bool fail_next_job;		/* the next accepted job fails (a reset cancels it) */

/* Held waits: a thread with hold_waits set blocks in its waits while the hold is on. */
static __thread bool hold_waits;
static bool hold_on;
static unsigned int held;

static void hold(bool on)
{
	pthread_mutex_lock(&mk);
	hold_on = on;
	if (on)
		held = 0;
	pthread_cond_broadcast(&mkc);
	pthread_mutex_unlock(&mk);
}

static void wait_held(unsigned int n)
{
	pthread_mutex_lock(&mk);
	while (held < n)
		pthread_cond_wait(&mkc, &mk);
	pthread_mutex_unlock(&mk);
}

static uint32_t obj_new(typeof(syncobjs) *t)
{
	uint32_t h = ++t->next;

	if (h >= MAX_OBJS)
		abort();
	t->alive[h] = true;
	t->live++;
	return h;
}

static bool obj_del(typeof(syncobjs) *t, uint32_t h)
{
	if (h >= MAX_OBJS || !t->alive[h]) {
		stale++;
		return false;
	}
	t->alive[h] = false;
	t->live--;
	return true;
}

static bool obj_ok(typeof(syncobjs) *t, uint32_t h)
{
	if (h < MAX_OBJS && t->alive[h])
		return true;
	stale++;
	return false;
}

static int fail_errno(int e)
{
	errno = e;
	return -1;
}

/* QUEUE_ERROR's record of queue @q, as the driver keeps it. */
static void fake_queue_error(uint32_t q, struct drm_spyre_queue_error *e)
{
	memset(e, 0, sizeof(*e));
	e->queue_id = q;
	e->error_count = queue_errors[q];
	if (queue_errors[q]) {
		e->job_seq = queue_fail_seq[q];
		e->fault.packet = queue_fail_packet[q];
		e->fault.hw_error = SPYRE_ERR_FAULT;
		e->fault.addr = FAULT_VA;
		e->fault.info = SPYRE_FAULT_INFO(1, SPYRE_ACCESS_READ, SPYRE_SOURCE_COPY_SRC,
						 SPYRE_MMU_FAULT_NOT_PRESENT);
	}
}

static int fake_submit(struct drm_spyre_submit *a)
{
	const struct spyre_pkt_copy *p = (const void *)(uintptr_t)a->packets;
	const struct drm_spyre_sync *in = (const void *)(uintptr_t)a->in_syncs;
	struct drm_spyre_queue_error e;
	uint32_t i;

	if (!obj_ok(&queues, a->queue_id) || !obj_ok(&syncobjs, a->out_sync_handle))
		return fail_errno(ENOENT);
	if (a->flags & ~DRM_SPYRE_SUBMIT_FLAGS ||
	    (!(a->flags & DRM_SPYRE_SUBMIT_QUEUE_ERROR) && a->errors_seen))
		return fail_errno(EINVAL);
	if (a->flags & DRM_SPYRE_SUBMIT_QUEUE_ERROR) {
		fake_queue_error(a->queue_id, &e);
		a->error_count = e.error_count;
		a->error_job_seq = e.job_seq;
		a->fault = e.fault;
		if (a->errors_seen > e.error_count)
			return fail_errno(EINVAL);
		if (a->errors_seen != e.error_count)
			return fail_errno(EIO);
	}
	for (i = 0; i < a->in_sync_count; i++)
		if (!obj_ok(&syncobjs, in[i].handle))
			return fail_errno(ENOENT);
	if (a->out_sync_point <= timeline[a->out_sync_handle])
		return fail_errno(EINVAL);
	/* The job runs at once; a COPY from FAULT_VA faults it. */
	for (i = 0; i < a->packet_count; i++)
		if (p[i].hdr.opcode == SPYRE_PKT_OP_COPY && p[i].src == FAULT_VA) {
			queue_errors[a->queue_id]++;
			queue_fail_seq[a->queue_id] = a->out_sync_point;
			queue_fail_packet[a->queue_id] = i;
		}
	if (fail_next_job) {
		fail_next_job = false;
		queue_errors[a->queue_id]++;
		queue_fail_seq[a->queue_id] = a->out_sync_point;
		queue_fail_packet[a->queue_id] = 0;
	}
	last_packets = a->packet_count;
	timeline[a->out_sync_handle] = a->out_sync_point;
	return 0;
}

int drmIoctl(int fd, unsigned long request, void *arg)
{
	int ret = 0;

	(void)fd;
	pthread_mutex_lock(&mk);
	if (request == DRM_IOCTL_SPYRE_GET_PARAM) {
		static const uint64_t v[] = { 0x12345350, 0x3, 32, 2u << 20, 128, 8, 1ull << 30,
					      1000, 0 };
		struct drm_spyre_get_param *g = arg;

		if (g->param < sizeof(v) / sizeof(v[0]))
			g->value = v[g->param];
		else
			ret = fail_errno(EINVAL);
	} else if (request == DRM_IOCTL_SPYRE_BO_CREATE) {
		struct drm_spyre_bo_create *c = arg;
		uint64_t size = (c->size + 4095) & ~4095ull;

		c->handle = obj_new(&bos);
		c->va = next_va;
		next_va += size;
		c->mmap_offset = 0;
		if (c->flags & DRM_SPYRE_BO_HOST) {
			c->mmap_offset = file_size;
			file_size += size;
			if (ftruncate(memfd, (off_t)file_size))
				abort();
		}
	} else if (request == DRM_IOCTL_GEM_CLOSE) {
		struct drm_gem_close *c = arg;

		if (!obj_del(&bos, c->handle))
			ret = fail_errno(EINVAL);
	} else if (request == DRM_IOCTL_SPYRE_QUEUE_CREATE) {
		struct drm_spyre_queue_create *q = arg;

		q->queue_id = obj_new(&queues);
		queue_errors[q->queue_id] = 0;
	} else if (request == DRM_IOCTL_SPYRE_QUEUE_DESTROY) {
		struct drm_spyre_queue_destroy *q = arg;

		if (!obj_del(&queues, q->queue_id))
			ret = fail_errno(ENOENT);
	} else if (request == DRM_IOCTL_SPYRE_SUBMIT) {
		submits++;
		ret = fake_submit(arg);
	} else if (request == DRM_IOCTL_SPYRE_QUEUE_ERROR) {
		queue_errors_asked++;
		struct drm_spyre_queue_error *e = arg;

		if (!obj_ok(&queues, e->queue_id))
			ret = fail_errno(ENOENT);
		else
			fake_queue_error(e->queue_id, e);
	} else {
		ret = fail_errno(ENOTTY);
	}
	pthread_mutex_unlock(&mk);
	return ret;
}

int drmSyncobjCreate(int fd, uint32_t flags, uint32_t *handle)
{
	(void)fd;
	(void)flags;
	pthread_mutex_lock(&mk);
	*handle = obj_new(&syncobjs);
	timeline[*handle] = 0;
	pthread_mutex_unlock(&mk);
	return 0;
}

int drmSyncobjDestroy(int fd, uint32_t handle)
{
	int ret = 0;

	(void)fd;
	pthread_mutex_lock(&mk);
	if (!obj_del(&syncobjs, handle))
		ret = -EINVAL;
	pthread_mutex_unlock(&mk);
	return ret;
}

int drmSyncobjTimelineWait(int fd, uint32_t *handles, uint64_t *points, unsigned int num_handles,
			   int64_t timeout_nsec, unsigned int flags, uint32_t *first_signaled)
{
	unsigned int i;

	(void)fd;
	(void)timeout_nsec;
	(void)flags;
	(void)first_signaled;
	pthread_mutex_lock(&mk);
	for (i = 0; i < num_handles; i++) {
		/* As the kernel: the handles are looked up once, at the start. */
		if (!obj_ok(&syncobjs, handles[i]) || points[i] > timeline[handles[i]]) {
			pthread_mutex_unlock(&mk);
			errno = EINVAL;
			return -EINVAL;
		}
	}
	if (hold_waits && hold_on) {
		held++;
		pthread_cond_broadcast(&mkc);
		while (hold_on)
			pthread_cond_wait(&mkc, &mk);
	}
	pthread_mutex_unlock(&mk);
	return 0;
}

int drmSyncobjTimelineSignal(int fd, const uint32_t *handles, uint64_t *points, uint32_t handle_count)
{
	uint32_t i;
	int ret = 0;

	(void)fd;
	pthread_mutex_lock(&mk);
	for (i = 0; i < handle_count && !ret; i++) {
		if (obj_ok(&syncobjs, handles[i]))
			timeline[handles[i]] = points[i];
		else
			ret = -EINVAL;
	}
	signals += handle_count;
	pthread_mutex_unlock(&mk);
	return ret;
}

int drmSyncobjQuery(int fd, uint32_t *handles, uint64_t *points, uint32_t handle_count)
{
	uint32_t i;
	int ret = 0;

	(void)fd;
	pthread_mutex_lock(&mk);
	for (i = 0; i < handle_count && !ret; i++) {
		if (obj_ok(&syncobjs, handles[i]))
			points[i] = timeline[handles[i]];
		else
			ret = -EINVAL;
	}
	pthread_mutex_unlock(&mk);
	return ret;
}

/* libudev: one accel device, bound to spyre, whose node is the memfd. */
#include "fake-udev.h"

/* ---- the tests ------------------------------------------------------------------ */

static spyre_device_t *dev;

struct sync_arg {
	int ret;
};

static void *held_device_synchronize(void *arg)
{
	struct sync_arg *a = arg;

	hold_waits = true;
	a->ret = spyre_device_synchronize(dev);
	return NULL;
}

static void race_sync_destroy(void)
{
	struct sync_arg a = { 0 };
	spyre_stream_t *s;
	spyre_dptr_t d;
	unsigned int queues_before;
	pthread_t t;

	TAP_CHECK(!spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s), "%s", spyre_last_error());
	TAP_CHECK(!spyre_malloc(dev, 4096, &d), "%s", spyre_last_error());
	TAP_CHECK(!spyre_memset_async(s, d, 1, 4096), "%s", spyre_last_error());
	pthread_mutex_lock(&mk);
	queues_before = queues.live;
	pthread_mutex_unlock(&mk);

	hold(true);
	TAP_CHECK(!pthread_create(&t, NULL, held_device_synchronize, &a), "pthread_create");
	wait_held(1);			/* the walk waits for s */
	TAP_CHECK(!spyre_stream_destroy(s), "%s", spyre_last_error());
	hold(false);			/* ... and goes on with s destroyed */
	pthread_join(t, NULL);
	TAP_CHECK(a.ret == 0, "spyre_device_synchronize() = %d (%s) racing spyre_stream_destroy()",
		  a.ret, spyre_last_error());
	pthread_mutex_lock(&mk);
	TAP_CHECK(queues.live == queues_before - 1, "the destroyed stream's queue is %s",
		  queues.live == queues_before ? "still alive" : "gone twice");
	pthread_mutex_unlock(&mk);
	spyre_free(dev, d);
}

struct copy_arg {
	spyre_dptr_t a, b;
	int ret;
};

static void *held_memcpy(void *arg)
{
	struct copy_arg *c = arg;

	hold_waits = true;
	c->ret = spyre_memcpy(dev, c->b, c->a, 4096, SPYRE_MEMCPY_D2D);
	return NULL;
}

static void race_internal_replaced(void)
{
	struct copy_arg c = { 0 };
	pthread_t t;
	int ret;

	TAP_CHECK(!spyre_malloc(dev, 4096, &c.a) && !spyre_malloc(dev, 4096, &c.b), "%s",
		  spyre_last_error());
	TAP_CHECK(!spyre_memcpy(dev, c.b, c.a, 4096, SPYRE_MEMCPY_D2D), "%s", spyre_last_error());
	hold(true);
	TAP_CHECK(!pthread_create(&t, NULL, held_memcpy, &c), "pthread_create");
	wait_held(1);			/* its copy waits on the internal stream */
	ret = spyre_memcpy(dev, c.b, FAULT_VA, 4096, SPYRE_MEMCPY_D2D);
	TAP_CHECK(ret == -EIO, "a faulting copy returned %d (%s)", ret, spyre_last_error());
	TAP_CHECK(strstr(spyre_last_error(), "page fault at device address 0x1fc0000000 "
			 "(read, copy source: no translation)") != NULL, "detail: %s", spyre_last_error());
	hold(false);
	pthread_join(t, NULL);
	/* The stream it shared failed under it: success or that failure, nothing else. */
	TAP_CHECK(c.ret == 0 || c.ret == -EIO, "the held copy returned %d", c.ret);
	ret = spyre_memcpy(dev, c.b, c.a, 4096, SPYRE_MEMCPY_D2D);
	TAP_CHECK(ret == 0, "the next copy returned %d (%s)", ret, spyre_last_error());
	spyre_free(dev, c.a);
	spyre_free(dev, c.b);
}

/*
 * A failed job is reported by the next SUBMIT (refused, -EIO) with the text
 * QUEUE_ERROR's record gives at synchronize; a job costs one ioctl.
 */
static void submit_reports_fault(void)
{
	static const char detail[] = "stream job 2 failed at packet 0: page fault at device "
		"address 0x1fc0000000 (read, copy source: no translation) (stream poisoned) "
		"(Input/output error)";
	unsigned int sub0, qe0;
	char first[512];
	spyre_stream_t *s;
	spyre_dptr_t d;
	int ret;

	TAP_CHECK(!spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s), "%s",
		  spyre_last_error());
	TAP_CHECK(!spyre_malloc(dev, 4096, &d), "%s", spyre_last_error());
	pthread_mutex_lock(&mk);
	sub0 = submits;
	qe0 = queue_errors_asked;
	pthread_mutex_unlock(&mk);
	TAP_CHECK(!spyre_memset_async(s, d, 1, 4096), "%s", spyre_last_error());
	TAP_CHECK(!spyre_memcpy_async(s, d, FAULT_VA, 4096, SPYRE_MEMCPY_D2D), "%s",
		  spyre_last_error());
	ret = spyre_memset_async(s, d, 2, 4096);
	TAP_CHECK(ret == -EIO, "the submit after the fault returned %d", ret);
	TAP_CHECK(!strcmp(spyre_last_error(), detail), "detail: %s", spyre_last_error());
	pthread_mutex_lock(&mk);
	TAP_CHECK(submits - sub0 == 3 && queue_errors_asked == qe0,
		  "3 submits took %u SUBMIT and %u QUEUE_ERROR calls", submits - sub0,
		  queue_errors_asked - qe0);
	pthread_mutex_unlock(&mk);
	snprintf(first, sizeof(first), "%s", spyre_last_error());
	TAP_CHECK(spyre_stream_synchronize(s) == -EIO, "synchronize of a poisoned stream");
	TAP_CHECK(!strcmp(spyre_last_error(), first), "detail: %s", spyre_last_error());
	TAP_CHECK(spyre_memset_async(s, d, 3, 4096) == -EIO, "a poisoned stream takes no work");
	spyre_free(dev, d);
	TAP_CHECK(!spyre_stream_destroy(s), "%s", spyre_last_error());
}

/* SUBMIT calls so far, and the packets of the last accepted one. */
static unsigned int submitted(uint32_t *packets)
{
	unsigned int n;

	pthread_mutex_lock(&mk);
	n = submits;
	if (packets)
		*packets = last_packets;
	pthread_mutex_unlock(&mk);
	return n;
}

static void *sync_thread(void *arg)
{
	return (void *)(intptr_t)spyre_stream_synchronize(arg);
}

/* @fn(@arg) on a thread of its own: its return value. */
static int run_on_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	void *ret;

	if (pthread_create(&t, NULL, fn, arg))
		return -EAGAIN;
	pthread_join(t, &ret);
	return (int)(intptr_t)ret;
}

static void batch(void)
{
	spyre_event_t *xe, *e;
	spyre_stream_t *s, *s2;
	unsigned int sub0, sig0;
	uint32_t pk = 0;
	spyre_dptr_t d, d2;
	int i, ret;

	TAP_CHECK(!spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s), "%s", spyre_last_error());
	TAP_CHECK(!spyre_malloc(dev, 4096, &d) && !spyre_malloc(dev, 4096, &d2), "%s", spyre_last_error());
	TAP_CHECK(!spyre_event_create_flags(dev, SPYRE_EVENT_CROSS_DEVICE, &xe), "%s", spyre_last_error());
	TAP_CHECK(!spyre_event_create(dev, &e), "%s", spyre_last_error());
	TAP_CHECK(spyre_stream_batch_end(s) == -EINVAL, "an end without a begin");

	/*
	 * A memset of 32 sticks (6 COPYs), a copy (1), a cross-device record
	 * (TIMESTAMP, SIGNAL): one job, submitted by the record (a SIGNAL
	 * another card may wait for is never left pending).
	 */
	sub0 = submitted(NULL);
	TAP_CHECK(!spyre_stream_batch_begin(s) && !spyre_stream_batch_begin(s), "begin, nested");
	TAP_CHECK(!spyre_memset_async(s, d, 1, 4096), "%s", spyre_last_error());
	TAP_CHECK(!spyre_memcpy_async(s, d2, d, 4096, SPYRE_MEMCPY_D2D), "%s", spyre_last_error());
	TAP_CHECK(!spyre_event_record(xe, s), "%s", spyre_last_error());
	TAP_CHECK(!spyre_stream_batch_end(s), "%s", spyre_last_error());
	TAP_CHECK(submitted(&pk) == sub0 + 1 && pk == 9, "the record submits the job: %u SUBMITs, the last of %u packets",
		  submitted(NULL) - sub0, pk);
	TAP_CHECK(!spyre_stream_batch_end(s), "%s", spyre_last_error());
	TAP_CHECK(submitted(&pk) == sub0 + 1 && pk == 9, "the batch: %u SUBMITs, the last of %u packets",
		  submitted(NULL) - sub0, pk);
	TAP_CHECK(!spyre_stream_query(s) && !spyre_event_query(xe), "the job and its record are done");

	/* A host wait submits the pending job; the end then has nothing to submit. */
	sub0 = submitted(NULL);
	TAP_CHECK(!spyre_stream_batch_begin(s), "begin");
	TAP_CHECK(!spyre_memset_async(s, d, 2, 4096), "%s", spyre_last_error());
	TAP_CHECK(!spyre_stream_synchronize(s), "%s", spyre_last_error());
	TAP_CHECK(submitted(&pk) == sub0 + 1 && pk == 6, "synchronize: %u SUBMITs, the last of %u packets",
		  submitted(NULL) - sub0, pk);
	/* A plain event is waited for by its point: its record ends the pending job. */
	TAP_CHECK(!spyre_memset_async(s, d, 3, 4096) && !spyre_event_record(e, s), "%s",
		  spyre_last_error());
	TAP_CHECK(submitted(&pk) == sub0 + 2 && pk == 7, "a plain record: %u SUBMITs, the last of %u packets",
		  submitted(NULL) - sub0, pk);
	TAP_CHECK(!spyre_event_synchronize(e), "%s", spyre_last_error());
	TAP_CHECK(!spyre_stream_batch_end(s) && submitted(NULL) == sub0 + 2, "an empty end: %u SUBMITs",
		  submitted(NULL) - sub0);

	/* 50 memsets of 6 COPYs: 42 fill a job of 252 (one more would pass 256), then 8. */
	sub0 = submitted(NULL);
	TAP_CHECK(!spyre_stream_batch_begin(s), "begin");
	for (i = 0, ret = 0; i < 50 && !ret; i++)
		ret = spyre_memset_async(s, d, (uint8_t)i, 4096);
	TAP_CHECK(!ret, "%s", spyre_last_error());
	TAP_CHECK(submitted(&pk) == sub0 + 1 && pk == 252, "a full job: %u SUBMITs, the last of %u packets",
		  submitted(NULL) - sub0, pk);
	TAP_CHECK(!spyre_stream_batch_end(s), "%s", spyre_last_error());
	TAP_CHECK(submitted(&pk) == sub0 + 2 && pk == 48, "the rest: %u SUBMITs, the last of %u packets",
		  submitted(NULL) - sub0, pk);

	/*
	 * A host wait for one stream submits the pending jobs of every stream
	 * the thread batches first (its job may WAIT for theirs), and a
	 * thread's batches are its own: another thread's wait submits none.
	 */
	TAP_CHECK(!spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s2), "%s", spyre_last_error());
	sub0 = submitted(NULL);
	TAP_CHECK(!spyre_stream_batch_begin(s) && !spyre_stream_batch_begin(s2), "begin both");
	TAP_CHECK(!spyre_memset_async(s, d, 8, 4096) && !spyre_memset_async(s2, d2, 9, 4096), "%s",
		  spyre_last_error());
	TAP_CHECK(!run_on_thread(sync_thread, s2) && submitted(NULL) == sub0 + 1,
		  "another thread's synchronize: %u SUBMITs (its own stream's pending job)",
		  submitted(NULL) - sub0);
	TAP_CHECK(!spyre_memset_async(s2, d2, 10, 4096), "%s", spyre_last_error());
	TAP_CHECK(!spyre_stream_synchronize(s2) && submitted(NULL) == sub0 + 3,
		  "the batching thread's synchronize of one: %u SUBMITs", submitted(NULL) - sub0);
	TAP_CHECK(!spyre_stream_batch_end(s) && !spyre_stream_batch_end(s2) && submitted(NULL) == sub0 + 3,
		  "the ends: %u SUBMITs", submitted(NULL) - sub0);
	TAP_CHECK(!spyre_stream_destroy(s2), "%s", spyre_last_error());

	/* A fault in a batched job names its step: the copy, step 2 of 3, its packet 0 (packet 6 of the job). */
	TAP_CHECK(!spyre_stream_batch_begin(s), "begin");
	TAP_CHECK(!spyre_memset_async(s, d, 4, 4096), "%s", spyre_last_error());
	TAP_CHECK(!spyre_memcpy_async(s, d, FAULT_VA, 4096, SPYRE_MEMCPY_D2D), "%s", spyre_last_error());
	TAP_CHECK(!spyre_memset_async(s, d, 5, 4096), "%s", spyre_last_error());
	TAP_CHECK(!spyre_stream_batch_end(s), "%s", spyre_last_error());
	TAP_CHECK(spyre_stream_synchronize(s) == -EIO, "the faulted batch");
	TAP_CHECK(strstr(spyre_last_error(), ", batched step 2 of 3 (copy, its packet 0) failed at packet 6: "
			 "page fault") != NULL, "detail: %s", spyre_last_error());
	TAP_CHECK(!spyre_stream_batch_begin(s) && spyre_memset_async(s, d, 6, 4096) == -EIO &&
		  !spyre_stream_batch_end(s), "a poisoned stream takes no batched work");

	/*
	 * A batch whose SUBMIT fails (the queue failed before it): the end says
	 * so, the point is signaled, and a synchronize reports the failure
	 * instead of waiting for a point no job holds.
	 */
	TAP_CHECK(!spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s2), "%s", spyre_last_error());
	TAP_CHECK(!spyre_memcpy_async(s2, d, FAULT_VA, 4096, SPYRE_MEMCPY_D2D), "%s", spyre_last_error());
	pthread_mutex_lock(&mk);
	sig0 = signals;
	pthread_mutex_unlock(&mk);
	TAP_CHECK(!spyre_stream_batch_begin(s2) && !spyre_memset_async(s2, d, 7, 4096), "%s",
		  spyre_last_error());
	ret = spyre_stream_batch_end(s2);
	TAP_CHECK(ret == -EIO && strstr(spyre_last_error(), "stream job 1 failed at packet 0: page fault"),
		  "end: %d %s", ret, spyre_last_error());
	pthread_mutex_lock(&mk);
	TAP_CHECK(signals == sig0 + 1, "%u points signaled", signals - sig0);
	pthread_mutex_unlock(&mk);
	TAP_CHECK(spyre_stream_synchronize(s2) == -EIO && strstr(spyre_last_error(), "stream job 1 failed"),
		  "synchronize: %s", spyre_last_error());
	spyre_event_destroy(e);
	spyre_event_destroy(xe);
	spyre_free(dev, d);
	spyre_free(dev, d2);
	TAP_CHECK(!spyre_stream_destroy(s2) && !spyre_stream_destroy(s), "%s", spyre_last_error());
}

static void *relu_image(int abs, size_t *size);
static spyre_dptr_t shared_d;

/* Another thread batches a stream this thread batches: its begin and end are no-ops, its work goes as it comes. */
static void *foreign_batch_thread(void *arg)
{
	spyre_stream_t *s = arg;
	intptr_t ret = spyre_stream_batch_begin(s);

	ret = ret ?: spyre_memset_async(s, shared_d, 2, 4096);
	ret = ret ?: spyre_stream_batch_end(s);
	return (void *)ret;
}

static void *end_thread(void *arg)
{
	return (void *)(intptr_t)spyre_stream_batch_end(arg);
}

static void shared_batch(void)
{
	spyre_stream_t *s;
	unsigned int sub0;

	TAP_CHECK(!spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s), "%s", spyre_last_error());
	TAP_CHECK(!spyre_malloc(dev, 4096, &shared_d), "%s", spyre_last_error());
	TAP_CHECK(!spyre_stream_batch_begin(s), "begin: %s", spyre_last_error());
	TAP_CHECK(!spyre_memset_async(s, shared_d, 1, 4096), "%s", spyre_last_error());
	sub0 = submitted(NULL);
	TAP_CHECK(!run_on_thread(foreign_batch_thread, s), "another thread's batch of it: %s", spyre_last_error());
	TAP_CHECK(submitted(NULL) == sub0 + 2, "its memset after this thread's pending job: %u SUBMITs",
		  submitted(NULL) - sub0);
	TAP_CHECK(run_on_thread(end_thread, s) == -EINVAL, "an end in a thread without a begin");
	TAP_CHECK(!spyre_stream_batch_end(s), "end: %s", spyre_last_error());
	TAP_CHECK(!spyre_stream_batch_begin(s), "begin again: %s", spyre_last_error());
	TAP_CHECK(!spyre_stream_synchronize(s), "synchronize: %s", spyre_last_error());
	TAP_CHECK(!spyre_stream_batch_end(s), "end again: %s", spyre_last_error());
	spyre_free(dev, shared_d);
	spyre_stream_destroy(s);
}

static int cb_ran;
static unsigned int cb_submits_seen;

static void cb_fn(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mk);
	cb_submits_seen = submits;
	pthread_mutex_unlock(&mk);
	__atomic_store_n(&cb_ran, 1, __ATOMIC_RELEASE);
}

static void *addcb_thread(void *arg)
{
	return (void *)(intptr_t)spyre_stream_add_callback(arg, cb_fn, NULL);
}

/* A callback another thread adds to a batching stream runs after the pending job is submitted. */
static void xthread_callback(void)
{
	spyre_stream_t *s;
	spyre_dptr_t d;
	unsigned int sub0;
	int i;

	TAP_CHECK(!spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s), "%s", spyre_last_error());
	TAP_CHECK(!spyre_malloc(dev, 4096, &d), "%s", spyre_last_error());
	TAP_CHECK(!spyre_stream_batch_begin(s), "begin");
	TAP_CHECK(!spyre_memset_async(s, d, 1, 4096), "%s", spyre_last_error());
	pthread_mutex_lock(&mk);
	sub0 = submits;
	pthread_mutex_unlock(&mk);
	TAP_CHECK(!run_on_thread(addcb_thread, s), "add_callback from another thread: %s", spyre_last_error());
	for (i = 0; i < 500 && !__atomic_load_n(&cb_ran, __ATOMIC_ACQUIRE); i++)
		usleep(10000);
	pthread_mutex_lock(&mk);
	TAP_CHECK(__atomic_load_n(&cb_ran, __ATOMIC_ACQUIRE) && cb_submits_seen == sub0 + 1,
		  "the callback ran after the pending job's SUBMIT (ran %d, SUBMITs before it: %u)",
		  __atomic_load_n(&cb_ran, __ATOMIC_ACQUIRE), cb_submits_seen - sub0);
	pthread_mutex_unlock(&mk);
	TAP_CHECK(!spyre_stream_batch_end(s), "%s", spyre_last_error());
	spyre_stream_synchronize(s);
	spyre_free(dev, d);
	spyre_stream_destroy(s);
}

/* synchronize() of a stream this thread batches, with a pending event wait: the NOP is submitted, not left pending. */
static void batch_nop_sync(void)
{
	spyre_stream_t *s, *s2;
	spyre_event_t *e;
	spyre_dptr_t d;
	int ret;

	TAP_CHECK(!spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s) &&
		  !spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s2), "%s", spyre_last_error());
	TAP_CHECK(!spyre_malloc(dev, 4096, &d) && !spyre_event_create(dev, &e), "%s", spyre_last_error());
	TAP_CHECK(!spyre_memset_async(s2, d, 1, 4096) && !spyre_event_record(e, s2), "%s", spyre_last_error());
	TAP_CHECK(!spyre_stream_batch_begin(s), "begin");
	TAP_CHECK(!spyre_stream_wait_event(s, e), "%s", spyre_last_error());
	ret = spyre_stream_synchronize(s);
	TAP_CHECK(!ret, "synchronize of a batching stream with a pending event wait: %d %s", ret, spyre_last_error());
	TAP_CHECK(!spyre_stream_batch_end(s), "%s", spyre_last_error());
	spyre_stream_synchronize(s);
	spyre_event_destroy(e);
	spyre_free(dev, d);
	spyre_stream_destroy(s2);
	spyre_stream_destroy(s);
}

struct xlaunch {
	spyre_stream_t *s;
	spyre_program_t *p;
	spyre_dptr_t *bufs;
	int n, failed_at;
};

static void *xlaunch_thread(void *arg)
{
	struct xlaunch *x = arg;
	int i, ret = 0;

	x->failed_at = -1;
	for (i = 0; i < x->n && !ret; i++) {
		spyre_dptr_t b[2] = { x->bufs[i], x->bufs[i + 1] };

		ret = spyre_launch(x->s, x->p, 1, b, 2, NULL, 0);
		if (ret)
			x->failed_at = i;
	}
	return (void *)(intptr_t)ret;
}

/*
 * Another thread's 40 launches with new bindings (more than the 32 argument
 * slots, whose reuse waits for a point) on a stream this thread batches:
 * its jobs are submitted as they come, never waiting for the pending job.
 */
static void xthread_batch(void)
{
	spyre_stream_t *s;
	spyre_program_t *p;
	spyre_dptr_t bufs[41];
	struct xlaunch x;
	size_t size;
	void *img;
	int i, ret;

	img = relu_image(0, &size);
	TAP_CHECK(img && !spyre_program_load(dev, img, size, &p), "%s", spyre_last_error());
	free(img);
	for (i = 0; i < 41; i++)
		TAP_CHECK(!spyre_malloc(dev, 4096, &bufs[i]), "%s", spyre_last_error());
	TAP_CHECK(!spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s), "%s", spyre_last_error());
	TAP_CHECK(!spyre_stream_batch_begin(s), "begin");
	x = (struct xlaunch){ .s = s, .p = p, .bufs = bufs, .n = 40 };
	ret = run_on_thread(xlaunch_thread, &x);
	TAP_CHECK(!ret, "another thread's 40 launches on a stream the main thread batches: %d at launch %d: %s",
		  ret, x.failed_at, spyre_last_error());
	TAP_CHECK(!spyre_stream_batch_end(s), "%s", spyre_last_error());
	spyre_stream_synchronize(s);
	spyre_stream_destroy(s);
	spyre_program_unload(p);
	for (i = 0; i < 41; i++)
		spyre_free(dev, bufs[i]);
}

/* A launch of @p on @s; tell its packets and the SUBMIT and QUEUE_ERROR calls it made. */
static int counted_launch(spyre_stream_t *s, spyre_program_t *p, const spyre_dptr_t *b,
			  unsigned int *pk, unsigned int *sub, unsigned int *qe)
{
	unsigned int sub0, qe0;
	int ret;

	pthread_mutex_lock(&mk);
	sub0 = submits;
	qe0 = queue_errors_asked;
	pthread_mutex_unlock(&mk);
	ret = spyre_launch(s, p, 1, b, 2, NULL, 0);
	pthread_mutex_lock(&mk);
	*pk = last_packets;
	*sub = submits - sub0;
	*qe = queue_errors_asked - qe0;
	pthread_mutex_unlock(&mk);
	return ret;
}

/*
 * The patch path's one device image: a launch with unchanged bindings on
 * another stream uploads again when the job that uploaded them failed (a
 * reset canceled it, say) or its stream is gone; it runs the image as is,
 * after one check, once that job is known done without failure; and on the
 * uploading stream, or once the image is known, it costs one SUBMIT.
 */
static void patch_reupload(void)
{
	unsigned int pk, sub, qe;
	spyre_stream_t *s1, *s2, *s3;
	spyre_dptr_t b[2], c[2];
	spyre_program_t *p;
	size_t size;
	void *img;
	int i;

	img = relu_image(1, &size);
	TAP_CHECK(img && !spyre_program_load(dev, img, size, &p), "%s", spyre_last_error());
	free(img);
	for (i = 0; i < 2; i++)
		TAP_CHECK(!spyre_malloc(dev, 4096, &b[i]) && !spyre_malloc(dev, 4096, &c[i]), "%s",
			  spyre_last_error());
	TAP_CHECK(!spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s1) &&
		  !spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s2) &&
		  !spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s3), "%s", spyre_last_error());

	/* New bindings on s1: upload and launch, in a job that fails. */
	pthread_mutex_lock(&mk);
	fail_next_job = true;
	pthread_mutex_unlock(&mk);
	TAP_CHECK(!counted_launch(s1, p, b, &pk, &sub, &qe), "%s", spyre_last_error());
	TAP_CHECK(pk == 2 && sub == 1 && qe == 0, "new bindings: %u packets, %u SUBMIT, %u QUEUE_ERROR",
		  pk, sub, qe);
	/* The same bindings on s2: the upload failed, so s2 uploads. */
	TAP_CHECK(!counted_launch(s2, p, b, &pk, &sub, &qe), "%s", spyre_last_error());
	TAP_CHECK(pk == 2 && sub == 1 && qe == 1, "after a failed upload: %u packets, %u SUBMIT, "
		  "%u QUEUE_ERROR", pk, sub, qe);
	/* On s3: s2's upload is known good after one check, then not checked again. */
	TAP_CHECK(!counted_launch(s3, p, b, &pk, &sub, &qe), "%s", spyre_last_error());
	TAP_CHECK(pk == 1 && sub == 1 && qe == 1, "after a good upload: %u packets, %u SUBMIT, "
		  "%u QUEUE_ERROR", pk, sub, qe);
	for (i = 0; i < 3; i++) {
		TAP_CHECK(!counted_launch(i % 2 ? s2 : s3, p, b, &pk, &sub, &qe), "%s", spyre_last_error());
		TAP_CHECK(pk == 1 && sub == 1 && qe == 0, "a known image: %u packets, %u SUBMIT, "
			  "%u QUEUE_ERROR", pk, sub, qe);
	}
	/* One stream: new bindings upload once, repeats cost one SUBMIT each. */
	for (i = 0; i < 3; i++) {
		TAP_CHECK(!counted_launch(s3, p, c, &pk, &sub, &qe), "%s", spyre_last_error());
		TAP_CHECK(pk == (i ? 1u : 2u) && sub == 1 && qe == 0, "one stream, launch %d: %u packets, "
			  "%u SUBMIT, %u QUEUE_ERROR", i, pk, sub, qe);
	}
	/* The uploading stream destroyed: the next stream uploads. */
	TAP_CHECK(!counted_launch(s2, p, b, &pk, &sub, &qe) && pk == 2, "%s", spyre_last_error());
	TAP_CHECK(!spyre_stream_destroy(s2), "%s", spyre_last_error());
	TAP_CHECK(!counted_launch(s3, p, b, &pk, &sub, &qe), "%s", spyre_last_error());
	TAP_CHECK(pk == 2 && sub == 1 && qe == 0, "uploader gone: %u packets, %u SUBMIT, %u QUEUE_ERROR",
		  pk, sub, qe);

	TAP_CHECK(spyre_stream_synchronize(s1) == -EIO, "s1 poisoned by its failed job");
	TAP_CHECK(!spyre_stream_destroy(s1) && !spyre_stream_destroy(s3), "%s", spyre_last_error());
	TAP_CHECK(!spyre_program_unload(p), "%s", spyre_last_error());
	for (i = 0; i < 2; i++) {
		spyre_free(dev, b[i]);
		spyre_free(dev, c[i]);
	}
}

/* ---- the storm ---- */

#define CHURNERS	3
#define WALKERS		2
#define ITERS		300

static int churners_left;
static spyre_program_t *shared_prog;	/* patch path: its users are destroyed streams */
static spyre_dptr_t shared_slots[2];

static void *relu_image(int abs, size_t *size)
{
	return spyre_pb_relu_image(abs ? SPYRE_PB_ADDR_RELOC : SPYRE_PB_ADDR_SLOT, 32, 4096, size);
}

static void nop_cb(void *arg)
{
	(void)arg;
}

/* A libspyre call succeeds; else its status and detail are printed. */
#define STORM_CHECK(call) do {							\
		int r_ = (call);						\
		TAP_CHECK(r_ == 0, "%s = %d (%s)", #call, r_, spyre_last_error());	\
	} while (0)

static void *churner(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg;
	spyre_dptr_t d, slots[2];
	uint8_t buf[1000];
	int i;

	STORM_CHECK(spyre_malloc(dev, 1 << 16, &d));
	slots[0] = shared_slots[0];
	STORM_CHECK(spyre_malloc(dev, 4096, &slots[1]));
	for (i = 0; i < ITERS; i++) {
		spyre_stream_t *s;
		spyre_event_t *e;

		STORM_CHECK(spyre_stream_create(dev, i % 3, &s));
		STORM_CHECK(spyre_memset_async(s, d, (uint8_t)i, 1 << 16));
		switch (rand_r(&seed) % 4) {
		case 0:
			STORM_CHECK(spyre_stream_add_callback(s, nop_cb, NULL));
			break;
		case 1:
			STORM_CHECK(spyre_event_create(dev, &e));
			STORM_CHECK(spyre_event_record(e, s));
			STORM_CHECK(spyre_event_synchronize(e));
			STORM_CHECK(spyre_event_destroy(e));
			break;
		case 2:
			/* A patch-path launch with our own output: the next one re-patches. */
			STORM_CHECK(spyre_launch(s, shared_prog, 1, slots, 2, NULL, 0));
			break;
		default:
			STORM_CHECK(spyre_memcpy(dev, d, (uintptr_t)buf, sizeof(buf), SPYRE_MEMCPY_H2D));
			break;
		}
		STORM_CHECK(spyre_stream_destroy(s));
	}
	spyre_free(dev, slots[1]);
	spyre_free(dev, d);
	__atomic_sub_fetch(&churners_left, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void *walker(void *arg)
{
	struct spyre_mem_stats st = { .size = sizeof(st) };
	spyre_stream_t *s;
	spyre_dptr_t slots[2];
	size_t size;
	void *img;
	int n = 0;

	(void)arg;
	STORM_CHECK(spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s));
	STORM_CHECK(spyre_malloc(dev, 4096, &slots[0]));
	STORM_CHECK(spyre_malloc(dev, 4096, &slots[1]));
	img = relu_image(n & 1, &size);
	while (__atomic_load_n(&churners_left, __ATOMIC_SEQ_CST)) {
		spyre_program_t *p;

		STORM_CHECK(spyre_device_synchronize(dev));
		STORM_CHECK(spyre_mem_get_stats(dev, &st));
		STORM_CHECK(spyre_program_load(dev, img, size, &p));
		STORM_CHECK(spyre_launch(s, p, 1, slots, 2, NULL, 0));
		STORM_CHECK(spyre_program_unload(p));	/* walks every stream too */
		n++;
	}
	free(img);
	spyre_free(dev, slots[0]);
	spyre_free(dev, slots[1]);
	STORM_CHECK(spyre_stream_destroy(s));
	return NULL;
}

static void storm(void)
{
	pthread_t c[CHURNERS], w[WALKERS];
	size_t size;
	void *img;
	int i;

	img = relu_image(1, &size);
	TAP_CHECK(img != NULL, "relu image");
	STORM_CHECK(spyre_program_load(dev, img, size, &shared_prog));
	free(img);
	STORM_CHECK(spyre_malloc(dev, 4096, &shared_slots[0]));
	churners_left = CHURNERS;
	for (i = 0; i < WALKERS; i++)
		TAP_CHECK(!pthread_create(&w[i], NULL, walker, NULL), "pthread_create");
	for (i = 0; i < CHURNERS; i++)
		TAP_CHECK(!pthread_create(&c[i], NULL, churner, (void *)(uintptr_t)(i + 1)), "pthread_create");
	for (i = 0; i < CHURNERS; i++)
		pthread_join(c[i], NULL);
	for (i = 0; i < WALKERS; i++)
		pthread_join(w[i], NULL);
	STORM_CHECK(spyre_program_unload(shared_prog));
	spyre_free(dev, shared_slots[0]);
	tap_diag("%d threads x %d stream lifetimes against %d threads of device-wide calls",
		 CHURNERS, ITERS, WALKERS);
}

/* ---- events outlive their stream ---- */

static unsigned int syncobjs_live(void)
{
	unsigned int n;

	pthread_mutex_lock(&mk);
	n = syncobjs.live;
	pthread_mutex_unlock(&mk);
	return n;
}

static unsigned int stale_calls(void)
{
	unsigned int n;

	pthread_mutex_lock(&mk);
	n = stale;
	pthread_mutex_unlock(&mk);
	return n;
}

/*
 * Events recorded on a stream that is then destroyed: the stream's syncobj
 * lives on while an event or a pending wait names it, every call on the
 * events succeeds with no stale handle, and it is destroyed with the last.
 */
static void event_outlives_stream(void)
{
	spyre_stream_t *a, *b, *c, *w, *w2;
	spyre_event_t *e1, *e2, *e3;
	unsigned int stale0 = stale_calls(), live;
	uint32_t word;
	spyre_dptr_t d;
	float ms = -1;

	STORM_CHECK(spyre_malloc(dev, 4096, &d));
	STORM_CHECK(spyre_event_create(dev, &e1));
	STORM_CHECK(spyre_event_create(dev, &e2));
	STORM_CHECK(spyre_event_create(dev, &e3));
	STORM_CHECK(spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &w));
	STORM_CHECK(spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &a));
	STORM_CHECK(spyre_memset_async(a, d, 1, 4096));
	STORM_CHECK(spyre_event_record(e1, a));
	STORM_CHECK(spyre_memset_async(a, d, 2, 4096));
	STORM_CHECK(spyre_event_record(e2, a));
	STORM_CHECK(spyre_stream_wait_event(w, e2));	/* pending until w's next job */
	live = syncobjs_live();
	STORM_CHECK(spyre_stream_destroy(a));
	TAP_CHECK(syncobjs_live() == live, "the destroyed stream's syncobj lives on with its events: "
		  "%u live, expected %u", syncobjs_live(), live);
	STORM_CHECK(spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &b));
	STORM_CHECK(spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &c));
	STORM_CHECK(spyre_memset_async(b, d, 3, 4096));
	STORM_CHECK(spyre_memcpy(dev, (uintptr_t)&word, d, 4, SPYRE_MEMCPY_D2H));	/* the internal stream */
	STORM_CHECK(spyre_event_synchronize(e1));
	STORM_CHECK(spyre_event_query(e1));
	STORM_CHECK(spyre_event_query(e2));
	STORM_CHECK(spyre_memset_async(w, d, 4, 4096));	/* submits the pending wait */
	STORM_CHECK(spyre_stream_synchronize(w));
	STORM_CHECK(spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &w2));
	STORM_CHECK(spyre_stream_wait_event(w2, e1));
	STORM_CHECK(spyre_memset_async(c, d, 5, 4096));
	STORM_CHECK(spyre_stream_synchronize(w2));	/* its pending wait: a NOP */
	STORM_CHECK(spyre_event_elapsed_ms(e1, e2, &ms));
	TAP_CHECK(ms == 0.0f, "elapsed between two events of a destroyed stream: %f ms, expected 0 "
		  "(the fake driver writes no timestamps)", ms);
	/* A re-record drops the old timeline: the last event on a destroyed stream frees its syncobj. */
	live = syncobjs_live();
	STORM_CHECK(spyre_event_destroy(e1));
	TAP_CHECK(syncobjs_live() == live, "e2 keeps the syncobj: %u live, expected %u", syncobjs_live(), live);
	STORM_CHECK(spyre_event_record(e2, b));
	TAP_CHECK(syncobjs_live() == live - 1, "re-recording the last event frees the destroyed stream's "
		  "syncobj: %u live, expected %u", syncobjs_live(), live - 1);
	STORM_CHECK(spyre_event_record(e3, c));
	STORM_CHECK(spyre_stream_destroy(c));
	live = syncobjs_live();
	STORM_CHECK(spyre_event_destroy(e3));
	TAP_CHECK(syncobjs_live() == live - 1, "destroying the last event frees the syncobj: %u live, expected %u",
		  syncobjs_live(), live - 1);
	STORM_CHECK(spyre_event_destroy(e2));
	STORM_CHECK(spyre_stream_destroy(b));
	STORM_CHECK(spyre_stream_destroy(w));
	STORM_CHECK(spyre_stream_destroy(w2));
	spyre_free(dev, d);
	TAP_CHECK(stale_calls() == stale0, "%u calls named a handle no longer alive", stale_calls() - stale0);
}

#define RECORDERS	3
#define WAITERS		2

static spyre_event_t *shared_event;
static int recorders_left;

/* Record the shared event on a new stream, then destroy the stream, ITERS times. */
static void *recorder(void *arg)
{
	spyre_dptr_t d;
	int i;

	(void)arg;
	STORM_CHECK(spyre_malloc(dev, 4096, &d));
	for (i = 0; i < ITERS; i++) {
		spyre_stream_t *s;

		STORM_CHECK(spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s));
		STORM_CHECK(spyre_memset_async(s, d, (uint8_t)i, 4096));
		STORM_CHECK(spyre_event_record(shared_event, s));
		STORM_CHECK(spyre_stream_destroy(s));
	}
	spyre_free(dev, d);
	__atomic_sub_fetch(&recorders_left, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Query, synchronize and wait for the shared event while recorders destroy its streams. */
static void *event_waiter(void *arg)
{
	spyre_stream_t *s;
	spyre_dptr_t d;
	int n = 0;

	(void)arg;
	STORM_CHECK(spyre_malloc(dev, 4096, &d));
	while (__atomic_load_n(&recorders_left, __ATOMIC_SEQ_CST)) {
		/* Jobs of the fake driver are done at submit: a recorded event is reached. */
		STORM_CHECK(spyre_event_query(shared_event));
		STORM_CHECK(spyre_event_synchronize(shared_event));
		STORM_CHECK(spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s));
		STORM_CHECK(spyre_stream_wait_event(s, shared_event));
		if (n++ & 1)
			STORM_CHECK(spyre_memset_async(s, d, 0, 4096));
		STORM_CHECK(spyre_stream_synchronize(s));
		STORM_CHECK(spyre_stream_destroy(s));
	}
	spyre_free(dev, d);
	return NULL;
}

static void event_race(void)
{
	pthread_t r[RECORDERS], w[WAITERS];
	unsigned int stale0 = stale_calls(), live0;
	spyre_stream_t *s;
	int i;

	STORM_CHECK(spyre_event_create(dev, &shared_event));
	STORM_CHECK(spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s));
	STORM_CHECK(spyre_event_record(shared_event, s));
	STORM_CHECK(spyre_stream_destroy(s));
	live0 = syncobjs_live();
	recorders_left = RECORDERS;
	for (i = 0; i < WAITERS; i++)
		TAP_CHECK(!pthread_create(&w[i], NULL, event_waiter, NULL), "pthread_create");
	for (i = 0; i < RECORDERS; i++)
		TAP_CHECK(!pthread_create(&r[i], NULL, recorder, NULL), "pthread_create");
	for (i = 0; i < RECORDERS; i++)
		pthread_join(r[i], NULL);
	for (i = 0; i < WAITERS; i++)
		pthread_join(w[i], NULL);
	TAP_CHECK(syncobjs_live() == live0, "one syncobj kept for the event: %u live, expected %u",
		  syncobjs_live(), live0);
	STORM_CHECK(spyre_event_destroy(shared_event));
	TAP_CHECK(syncobjs_live() == live0 - 1, "the event's destroy frees it: %u live, expected %u",
		  syncobjs_live(), live0 - 1);
	TAP_CHECK(stale_calls() == stale0, "%u calls named a handle no longer alive", stale_calls() - stale0);
	tap_diag("%d threads x %d records on streams destroyed after, %d threads querying and waiting",
		 RECORDERS, ITERS, WAITERS);
}

/* After spyre_device_close(): no stale handle reached the driver, nothing is left. */
static void close_leaves_nothing(void)
{
	spyre_device_close(dev);
	dev = NULL;
	pthread_mutex_lock(&mk);
	TAP_CHECK(stale == 0, "%u calls named a handle that was no longer alive", stale);
	TAP_CHECK(queues.live == 0 && syncobjs.live == 0 && bos.live == 0,
		      "left behind after spyre_device_close(): %u queues, %u syncobjs, %u buffers",
		      queues.live, syncobjs.live, bos.live);
	tap_diag("%u queues, %u syncobjs, %u buffers created", queues.next, syncobjs.next, bos.next);
	pthread_mutex_unlock(&mk);
}

static const struct tap_case cases[] = {
	{ "sync", race_sync_destroy },
	{ "internal", race_internal_replaced },
	{ "submit_fault", submit_reports_fault },
	{ "patch_reupload", patch_reupload },
	{ "batch", batch },
	{ "xthread_batch", xthread_batch },
	{ "batch_nop_sync", batch_nop_sync },
	{ "xthread_callback", xthread_callback },
	{ "shared_batch", shared_batch },
	{ "storm", storm },
	{ "event_outlives", event_outlives_stream },
	{ "event_race", event_race },
	{ "close", close_leaves_nothing },
};

int main(int argc, char **argv)
{
	int ret;

	memfd = memfd_create("fake-spyre", MFD_CLOEXEC);
	if (memfd < 0)
		tap_bail("memfd_create: %m");
	snprintf(devnode, sizeof(devnode), "/proc/self/fd/%d", memfd);
	ret = spyre_device_open(0, &dev);
	if (ret)
		tap_bail("opening the fake device failed: %s", spyre_last_error());
	ret = TAP_RUN(cases, argc, argv);
	spyre_device_close(dev);	/* when "close" did not run */
	return ret;
}
