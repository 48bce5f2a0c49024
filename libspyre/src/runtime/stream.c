// SPDX-License-Identifier: MIT
/*
 * Streams and events over driver queues and libdrm syncobjs: each stream is
 * a driver queue plus a timeline syncobj whose point n is the end of the
 * n-th job; an event is a (timeline, point) pair plus a device TIMESTAMP,
 * the timeline referenced so that the event outlives its stream.
 * Copies and memsets are jobs of COPY packets. Every job goes through one
 * submit that takes its descriptor (struct spyre_job): its packets and what
 * an observer needs to know of them. The bottom of the launch path: it calls
 * memory.c only, and the tracer through the hooks it installed (internal.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xf86drm.h>

#include "spyre_accel.h"
#include "spyre_hw.h"
#include "internal.h"

struct spyre_event {
	struct spyre_device *dev;
	struct spyre_buf ts;		/* 8-byte device timestamp, host memory */
	/* Protects @tl and @point: a record on one thread, a query or wait on another */
	pthread_mutex_t lock;
	struct spyre_timeline *tl;	/* of the last record, referenced; NULL: never recorded */
	uint64_t point;
	unsigned int flags;		/* SPYRE_EVENT_* */
	/*
	 * SPYRE_EVENT_CROSS_DEVICE: a record also SIGNALs the 64-bit word at
	 * ts.va + EVENT_SEM_OFF with the next value (atomic, never reset), and
	 * a stream of another card WAITs there for the value of the last
	 * record, through its import of the buffer.
	 */
	uint64_t sem_next;		/* the last value handed to a record */
	uint64_t sem_value;		/* the value of the last record submitted */
};

/* The cross-device semaphore's place in the event's host buffer (apart from the timestamp). */
#define EVENT_SEM_OFF 64

/* ---- timelines ------------------------------------------------------------------ */

static int timeline_new(struct spyre_device *dev, struct spyre_timeline **out)
{
	struct spyre_timeline *tl = calloc(1, sizeof(*tl));

	if (!tl)
		return spyre_error(-ENOMEM, "out of memory");
	if (drmSyncobjCreate(dev->fd, 0, &tl->handle)) {
		int err = errno;

		free(tl);
		return spyre_error(-err, "creating a syncobj failed");
	}
	tl->fd = dev->fd;
	tl->refs = 1;
	*out = tl;
	return 0;
}

struct spyre_timeline *spyre_timeline_get(struct spyre_timeline *tl)
{
	__atomic_add_fetch(&tl->refs, 1, __ATOMIC_RELAXED);
	return tl;
}

void spyre_timeline_put(struct spyre_timeline *tl)
{
	if (tl && !__atomic_sub_fetch(&tl->refs, 1, __ATOMIC_ACQ_REL)) {
		drmSyncobjDestroy(tl->fd, tl->handle);
		free(tl);
	}
}

/* Drop the references of @n pending waits' timelines, and the waits. */
static void waits_put(struct spyre_timeline **tl, uint32_t *n)
{
	uint32_t i;

	for (i = 0; i < *n; i++)
		spyre_timeline_put(tl[i]);
	*n = 0;
}

/*
 * The timeline and point of @e's last record, *@tl referenced (the caller
 * drops it: the event may be recorded again, its stream destroyed,
 * meanwhile); false when it was never recorded.
 */
static bool event_get(struct spyre_event *e, struct spyre_timeline **tl, uint64_t *point)
{
	pthread_mutex_lock(&e->lock);
	*tl = e->tl ? spyre_timeline_get(e->tl) : NULL;
	*point = e->point;
	pthread_mutex_unlock(&e->lock);
	return *tl != NULL;
}

/* ---- the tracer's hooks --------------------------------------------------------- */

const struct spyre_trace_hooks *spyre_tracer;

void spyre_tracer_set(const struct spyre_trace_hooks *hooks)
{
	__atomic_store_n(&spyre_tracer, hooks, __ATOMIC_RELEASE);
}

/* ---- errors ------------------------------------------------------------------ */

static const char *hw_error_name(uint32_t e)
{
	static const char *const names[] = SPYRE_ERR_TEXTS;
	static_assert(sizeof(names) / sizeof(names[0]) == SPYRE_ERR_COUNT,
		      "a name for every SPYRE_ERR_* of spyre_hw.h");

	return SPYRE_NAME_OF(names, e, "unknown");
}

/* What the device MMU says of a fault (SPYRE_Q_FAULT_INFO of spyre_hw.h). */
static const char *fault_source_name(uint32_t src)
{
	static const char *const names[] = {
		[0] = "unknown source",
		[SPYRE_SOURCE_RING] = "packet fetch",
		[SPYRE_SOURCE_COPY_SRC] = "copy source",
		[SPYRE_SOURCE_COPY_DST] = "copy destination",
		[SPYRE_SOURCE_SEMAPHORE] = "semaphore",
		[SPYRE_SOURCE_COMPLETION] = "completion write",
		[SPYRE_SOURCE_SGL] = "scatter-gather list",
		[SPYRE_SOURCE_PROGRAM] = "program",
	};

	return SPYRE_NAME_OF(names, src, "unknown source");
}

static const char *mmu_fault_name(uint32_t cause)
{
	static const char *const names[] = {
		[0] = "unknown cause",
		[SPYRE_MMU_FAULT_NOT_PRESENT] = "no translation",
		[SPYRE_MMU_FAULT_PERMISSION] = "permission",
		[SPYRE_MMU_FAULT_BAD_CTX] = "bad context",
		[SPYRE_MMU_FAULT_RANGE] = "beyond the address space",
		[SPYRE_MMU_FAULT_WALK] = "page table walk failed",
		[SPYRE_MMU_FAULT_DMA] = "host memory access failed",
	};

	return SPYRE_NAME_OF(names, cause, "unknown cause");
}

/*
 * Into @buf: "stream job N", and for a named job (a graph replay's) still in
 * the ring, ", graph node 7 (launch)": what its failing @packet is.
 */
static void job_where_locked(struct spyre_stream *s, uint64_t job_seq, uint32_t packet, char *buf,
			     size_t size)
{
	int n = snprintf(buf, size, "stream job %llu", (unsigned long long)job_seq);
	uint32_t i;

	for (i = 0; i < SPYRE_NAMED_JOBS; i++)
		if (s->named[i].point == job_seq && s->named[i].names && n > 0 && (size_t)n + 2 < size) {
			memcpy(buf + n, ", ", 2);
			s->named[i].names->describe(s->named[i].names, s->named[i].cookie, packet,
						    buf + n + 2, size - (size_t)n - 2);
			break;
		}
}

/* Poison the stream with the failure @e the driver recorded on its queue. */
static int poison_locked(struct spyre_stream *s, struct drm_spyre_queue_error e)
{
	char job[128];
	uint32_t cause;

	s->poisoned = 1;
	cause = SPYRE_FAULT_CAUSE(e.fault.info);
	if (s->trace)
		e.fault.packet = spyre_trace_packet_locked(s, e.job_seq, e.fault.packet);
	job_where_locked(s, e.job_seq, e.fault.packet, job, sizeof(job));
	if (e.fault.error == DRM_SPYRE_ERROR_TIMEOUT)
		snprintf(s->poison, sizeof(s->poison), "%s hung and was reset (stream poisoned)", job);
	else if (e.fault.error == DRM_SPYRE_ERROR_RESET)
		snprintf(s->poison, sizeof(s->poison), "%s canceled by a device reset (stream poisoned)",
			 job);
	else if (e.fault.error == DRM_SPYRE_ERROR_CANCELED)
		snprintf(s->poison, sizeof(s->poison), "%s canceled: the context is banned", job);
	else if (e.fault.hw_error == SPYRE_ERR_ENGINE)
		snprintf(s->poison, sizeof(s->poison),
			 "%s: program fault on core %u at instruction %u: %s "
			 "(engine fault %u), address 0x%llx (stream poisoned)",
			 job, e.fault.core, e.fault.pc,
			 spyre_engine_fault_name(cause), cause,
			 (unsigned long long)e.fault.addr);
	else if (e.fault.info)
		snprintf(s->poison, sizeof(s->poison),
			 "%s failed at packet %u: %s at device address 0x%llx"
			 " (%s, %s: %s) (stream poisoned)",
			 job, e.fault.packet,
			 hw_error_name(e.fault.hw_error), (unsigned long long)e.fault.addr,
			 SPYRE_FAULT_ACCESS(e.fault.info) == SPYRE_ACCESS_WRITE ? "write" : "read",
			 fault_source_name(SPYRE_FAULT_SOURCE(e.fault.info)),
			 mmu_fault_name(cause));
	else
		snprintf(s->poison, sizeof(s->poison),
			 "%s failed at packet %u: %s (stream poisoned)",
			 job, e.fault.packet, hw_error_name(e.fault.hw_error));
	return spyre_error(-EIO, "%s", s->poison);
}

/* Poison the stream if the driver recorded a new failure on its queue. */
static int check_errors_locked(struct spyre_stream *s)
{
	struct drm_spyre_queue_error e = { .queue_id = s->queue };

	if (s->poisoned)
		return spyre_error(-EIO, "%s", s->poison);
	if (drmIoctl(s->dev->fd, DRM_IOCTL_SPYRE_QUEUE_ERROR, &e))
		return spyre_error(-errno, "querying queue %u failed", s->queue);
	if (e.error_count == s->errors_seen)
		return 0;
	return poison_locked(s, e);
}

/* ---- host callbacks ----------------------------------------------------------- */

static void *callback_thread(void *arg)
{
	struct spyre_stream *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct spyre_callback *cb;
		uint64_t point;

		while (!s->cb_head && !s->quit)
			pthread_cond_wait(&s->cond, &s->lock);
		if (!s->cb_head)
			break;
		cb = s->cb_head;
		point = cb->point;
		pthread_mutex_unlock(&s->lock);
		if (point)
			drmSyncobjTimelineWait(s->dev->fd, &s->tl->handle, &point, 1, INT64_MAX,
					       DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, NULL);
		cb->fn(cb->arg);
		pthread_mutex_lock(&s->lock);
		s->cb_head = cb->next;
		if (!s->cb_head)
			s->cb_tail = NULL;
		s->cb_done++;
		free(cb);
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* Work enqueued after a callback starts after it: wait for pending ones. */
static void wait_callbacks_locked(struct spyre_stream *s)
{
	while (s->cb_done != s->cb_queued)
		pthread_cond_wait(&s->cond, &s->lock);
}

void spyre_stream_wait_callbacks_locked(struct spyre_stream *s)
{
	wait_callbacks_locked(s);
}

SPYRE_EXPORT int spyre_stream_add_callback(spyre_stream_t *s, void (*fn)(void *arg), void *arg)
{
	struct spyre_callback *cb;
	int ret;

	if (!s || !fn)
		return spyre_error(-EINVAL, "spyre_stream_add_callback: NULL argument");
	cb = calloc(1, sizeof(*cb));
	if (!cb)
		return spyre_error(-ENOMEM, "out of memory");
	cb->fn = fn;
	cb->arg = arg;
	pthread_mutex_lock(&s->lock);
	if (s->capture) {
		ret = spyre_stream_capturing_locked(s, "spyre_stream_add_callback");
		pthread_mutex_unlock(&s->lock);
		free(cb);
		return ret;
	}
	if (!s->thread_started) {
		if (pthread_create(&s->thread, NULL, callback_thread, s)) {
			pthread_mutex_unlock(&s->lock);
			free(cb);
			return spyre_error(-EAGAIN, "cannot start the callback thread");
		}
		s->thread_started = true;
	}
	/* The callback thread waits for s->point: pending batch jobs are submitted first. */
	ret = spyre_batches_flush(s);
	if (ret) {
		pthread_mutex_unlock(&s->lock);
		free(cb);
		return ret;
	}
	cb->point = s->point;
	if (s->cb_tail)
		s->cb_tail->next = cb;
	else
		s->cb_head = cb;
	s->cb_tail = cb;
	s->cb_queued++;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* ---- capture ------------------------------------------------------------------ */

int spyre_stream_capturing_locked(struct spyre_stream *s, const char *call)
{
	if (!s->capture)
		return 0;
	return spyre_error(-EBUSY, "%s: the stream is capturing a graph "
			   "(spyre_stream_end_capture() first)", call);
}

static int stream_capturing(struct spyre_stream *s, const char *call)
{
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = spyre_stream_capturing_locked(s, call);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* Room for @n more of @size bytes in the array *@p of *@cap, holding @used. */
static int grow(void *p, uint32_t *cap, uint32_t used, uint32_t n, size_t size)
{
	uint32_t want = *cap ? *cap : 16;
	void *q;

	if (used + n <= *cap)
		return 0;
	while (want < used + n)
		want *= 2;
	q = realloc(*(void **)p, (size_t)want * size);
	if (!q)
		return spyre_error(-ENOMEM, "out of memory");
	*(void **)p = q;
	*cap = want;
	return 0;
}

/*
 * While @s captures: add @job to the graph as a node, instead of submitting
 * it. A LAUNCH keeps its argument block; its args and record operands are
 * left 0, for each exec to place (graph.c).
 */
static int capture_locked(struct spyre_stream *s, const struct spyre_job *job)
{
	struct spyre_graph *g = s->capture;
	struct spyre_graph_node *n;
	int ret;

	/*
	 * Not a node (a staged copy: its packets read or write the device's
	 * shared staging buffer, and the caller waits for it): the capture
	 * began after the caller's check, on another thread. Refused.
	 */
	if (!job->node)
		return spyre_error(-EBUSY, "a %s of staged host memory cannot be captured: the stream "
				   "began capturing a graph meanwhile", job->what);
	ret = grow(&g->nodes, &g->cap_nodes, g->nnodes, 1, sizeof(*g->nodes));
	ret = ret ?: grow(&g->packets, &g->cap_packets, g->npackets, job->count, SPYRE_PKT_SIZE);
	ret = ret ?: grow(&g->args, &g->cap_args, g->nargs, job->nargs, sizeof(*g->args));
	if (ret)
		return ret;
	n = &g->nodes[g->nnodes++];
	memset(n, 0, sizeof(*n));
	n->kind = job->node;
	n->first = g->npackets;
	n->count = job->count;
	n->copy_kind = job->copy_kind;
	n->bytes = job->bytes;
	n->event = job->event;
	memcpy(g->packets + (size_t)g->npackets * SPYRE_PKT_SIZE, job->packets,
	       (size_t)job->count * SPYRE_PKT_SIZE);
	g->npackets += job->count;
	if (job->node == SPYRE_GRAPH_NODE_LAUNCH) {
		struct spyre_pkt_launch *l =
			(struct spyre_pkt_launch *)(g->packets + (size_t)n->first * SPYRE_PKT_SIZE);

		l->args = 0;
		l->record = 0;
		n->prog = job->prog;
		n->arg0 = g->nargs;
		n->nslots = job->nslots;
		n->nargs = job->nargs;
		memcpy(g->args + g->nargs, job->args, (size_t)job->nargs * sizeof(*job->args));
		g->nargs += job->nargs;
	}
	return 0;
}

/* A named job was submitted as stream point s->point: keep its names for a fault report. */
static void name_job_locked(struct spyre_stream *s, const struct spyre_job *job)
{
	uint32_t i = s->named_next;

	spyre_job_names_put(s->named[i].names);
	spyre_job_names_get(job->names);
	s->named[i].point = s->point;
	s->named[i].names = job->names;
	s->named[i].cookie = job->cookie;
	s->named_next = (i + 1) % SPYRE_NAMED_JOBS;
}

/* ---- streams ---------------------------------------------------------------- */

static int wait_point(struct spyre_stream *s, uint64_t point, int64_t timeout_ns);

/* ---- batches ------------------------------------------------------------------ */

/* Where one job of a batch begins among the pending job's packets, and what it is. */
struct batch_step {
	uint32_t first;
	const char *what;		/* struct spyre_job's, a string literal */
};

/*
 * A stream's pending job while it batches (struct spyre_stream.pending):
 * the packets of the jobs submitted since it began, the event waits that
 * were pending then (the first job's), and where each job begins.
 */
struct spyre_batch {
	uint8_t packets[DRM_SPYRE_MAX_JOB_PACKETS * SPYRE_PKT_SIZE];
	uint32_t count;			/* packets; 0: no pending job */
	uint32_t nsteps;
	struct batch_step steps[DRM_SPYRE_MAX_JOB_PACKETS];
	struct drm_spyre_sync waits[SPYRE_MAX_WAITS];
	struct spyre_timeline *wait_tl[SPYRE_MAX_WAITS];	/* each wait's, referenced */
	uint32_t nwaits;
};

/* The steps of a submitted batch job, for its fault report (struct spyre_job_names). */
struct batch_names {
	struct spyre_job_names base;
	uint32_t nsteps;
	struct batch_step steps[];
};

static void batch_describe(const struct spyre_job_names *n, uint64_t cookie, uint32_t packet,
			   char *buf, size_t size)
{
	const struct batch_names *b = (const struct batch_names *)n;
	uint32_t i = 0;

	(void)cookie;
	while (i + 1 < b->nsteps && b->steps[i + 1].first <= packet)
		i++;
	snprintf(buf, size, "batched step %u of %u (%s, its packet %u)", i + 1, b->nsteps,
		 b->steps[i].what, packet - b->steps[i].first);
}

static void batch_names_release(struct spyre_job_names *n)
{
	free(n);
}

static void name_job_locked(struct spyre_stream *s, const struct spyre_job *job);
static int poison_locked(struct spyre_stream *s, struct drm_spyre_queue_error e);

/*
 * The SUBMIT of @count @packets on @s's queue after @nwaits @waits, as
 * stream point @point: 0, or the failure (the stream poisoned when it is the
 * queue's record of a failed job this stream had not seen).
 */
static int submit_ioctl_locked(struct spyre_stream *s, const void *packets, uint32_t count,
			       const struct drm_spyre_sync *waits, uint32_t nwaits, uint64_t point,
			       uint32_t wait_bound_ms)
{
	struct drm_spyre_submit a = {
		.queue_id = s->queue,
		.flags = DRM_SPYRE_SUBMIT_QUEUE_ERROR | (wait_bound_ms ? DRM_SPYRE_SUBMIT_WAIT_BOUND : 0),
		.wait_bound_ms = wait_bound_ms,
		.packets = (uintptr_t)packets,
		.packet_count = count,
		.in_syncs = (uintptr_t)waits,
		.in_sync_count = nwaits,
		.out_sync_handle = s->tl->handle,
		.out_sync_point = point,
		.errors_seen = s->errors_seen,
	};
	int err;

	if (!drmIoctl(s->dev->fd, DRM_IOCTL_SPYRE_SUBMIT, &a))
		return 0;
	err = errno;
	if (err == EIO && a.error_count != s->errors_seen) {
		struct drm_spyre_queue_error e = {
			.queue_id = s->queue, .error_count = a.error_count,
			.job_seq = a.error_job_seq, .fault = a.fault,
		};

		return poison_locked(s, e);
	}
	return spyre_error(-err, "%s: submitting %u packets failed", s->dev->props.devnode, count);
}

int spyre_stream_flush_locked(struct spyre_stream *s)
{
	struct spyre_batch *b = s->pending;
	struct spyre_job job = { .what = "batch" };
	struct batch_names *nm;
	uint64_t point = s->point;
	int ret;

	if (!b || !b->count)
		return 0;
	ret = s->poisoned ? spyre_error(-EIO, "%s", s->poison) :
	      submit_ioctl_locked(s, b->packets, b->count, b->waits, b->nwaits, point, 0);
	if (ret) {
		/* No job holds the point: signal it, so that waits for it end (the failure is the caller's). */
		drmSyncobjTimelineSignal(s->dev->fd, &s->tl->handle, &point, 1);
		/* ... and the batch's end returns it, also when another call's host wait submitted the job. */
		if (s->batch && !s->batch_status) {
			s->batch_status = ret;
			snprintf(s->batch_detail, sizeof(s->batch_detail), "%s", spyre_last_error());
		}
	} else {
		s->stats.jobs++;
		/* A job of several: a fault report names the step of its packet. */
		nm = b->nsteps > 1 ? malloc(sizeof(*nm) + b->nsteps * sizeof(nm->steps[0])) : NULL;
		if (nm) {
			nm->base.refs = 1;
			nm->base.describe = batch_describe;
			nm->base.release = batch_names_release;
			nm->nsteps = b->nsteps;
			memcpy(nm->steps, b->steps, b->nsteps * sizeof(nm->steps[0]));
			job.names = &nm->base;
			name_job_locked(s, &job);
			spyre_job_names_put(&nm->base);
		}
	}
	b->count = 0;
	b->nsteps = 0;
	waits_put(b->wait_tl, &b->nwaits);
	return ret;
}

/*
 * Append @job to @s's pending job (a new one, stream point s->point + 1,
 * with the stream's pending event waits, when there is none or it is full).
 */
static int batch_append_locked(struct spyre_stream *s, const struct spyre_job *job)
{
	struct spyre_batch *b = s->pending;
	int ret;

	if (b && b->count + job->count > DRM_SPYRE_MAX_JOB_PACKETS) {
		ret = spyre_stream_flush_locked(s);
		if (ret)
			return ret;
	}
	if (!b) {
		b = s->pending = calloc(1, sizeof(*b));
		if (!b)
			return spyre_error(-ENOMEM, "out of memory");
	}
	if (!b->count) {
		/* The waits and their references move to the pending job. */
		memcpy(b->waits, s->waits, s->nwaits * sizeof(s->waits[0]));
		memcpy(b->wait_tl, s->wait_tl, s->nwaits * sizeof(s->wait_tl[0]));
		b->nwaits = s->nwaits;
		s->nwaits = 0;
		s->point++;
	}
	b->steps[b->nsteps].first = b->count;
	b->steps[b->nsteps].what = job->what;
	b->nsteps++;
	memcpy(b->packets + (size_t)b->count * SPYRE_PKT_SIZE, job->packets,
	       (size_t)job->count * SPYRE_PKT_SIZE);
	b->count += job->count;
	return 0;
}

/* The streams this thread batches, linked through struct spyre_stream.batch_next. */
static __thread struct spyre_stream *batching;
/* Streams in a batch, in any thread: while none, a host wait skips the thread's list (atomic). */
static unsigned int batches_open;

/*
 * Whether this thread holds @s's batch (it is on the thread's list). Another
 * thread's calls on @s submit @s's pending job first and then their own job
 * (never appended: only the holder appends, so only the holder's host waits
 * can meet its own unsubmitted work, and those flush it); another thread's
 * batch_begin on it is a no-op, and so is its batch_end.
 */
static bool batch_mine(const struct spyre_stream *s)
{
	const struct spyre_stream *p;

	for (p = batching; p; p = p->batch_next)
		if (p == s)
			return true;
	return false;
}

/* This thread's no-op begins (streams another thread batched then), for their ends. */
#define FOREIGN_MAX 64
static __thread struct { const struct spyre_stream *s; unsigned int n; } foreign[FOREIGN_MAX];

/* Count a no-op begin of @s (+1) or take one back (-1): false if there is no room or none to take. */
static bool foreign_count(const struct spyre_stream *s, int d)
{
	int i, free_at = -1;

	for (i = 0; i < FOREIGN_MAX; i++) {
		if (foreign[i].n && foreign[i].s == s) {
			foreign[i].n += d;
			return true;
		}
		if (!foreign[i].n && free_at < 0)
			free_at = i;
	}
	if (d < 0 || free_at < 0)
		return false;
	foreign[free_at].s = s;
	foreign[free_at].n = 1;
	return true;
}

int spyre_stream_batch_begin(struct spyre_stream *s)
{
	if (!s)
		return spyre_error(-EINVAL, "spyre_stream_batch_begin: NULL stream");
	pthread_mutex_lock(&s->lock);
	if (s->batch && !batch_mine(s)) {
		/* another thread's batch: this thread's jobs go as they come */
		bool ok = foreign_count(s, 1);

		pthread_mutex_unlock(&s->lock);
		return ok ? 0 : spyre_error(-EBUSY, "spyre_stream_batch_begin: %d streams of other threads' "
					    "batches begun in this thread", FOREIGN_MAX);
	}
	if (!s->batch++) {
		s->batch_next = batching;
		batching = s;
		__atomic_add_fetch(&batches_open, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int spyre_batches_flush(struct spyre_stream *held)
{
	struct spyre_stream *s;
	int ret = 0, r;

	/* The common case, no batch anywhere: no thread-local lookup. */
	if (!__atomic_load_n(&batches_open, __ATOMIC_RELAXED))
		return 0;
	for (s = batching; s; s = s->batch_next) {
		if (s != held)
			pthread_mutex_lock(&s->lock);
		r = spyre_stream_flush_locked(s);
		if (s != held)
			pthread_mutex_unlock(&s->lock);
		else
			ret = r;
	}
	/* @held in another thread's batch: the host waits for its point, so its pending job goes too. */
	if (held && held->pending && !batch_mine(held))
		ret = spyre_stream_flush_locked(held);
	return ret;
}

int spyre_stream_batch_end(struct spyre_stream *s)
{
	int ret = 0;

	if (!s)
		return spyre_error(-EINVAL, "spyre_stream_batch_end: NULL stream");
	pthread_mutex_lock(&s->lock);
	if (!batch_mine(s) && foreign_count(s, -1))
		ret = 0;	/* its batch_begin was a no-op (another thread's batch) */
	else if (!s->batch || !batch_mine(s))
		ret = spyre_error(-EINVAL, "spyre_stream_batch_end: the stream has no batch of this thread");
	else if (!--s->batch)
		ret = spyre_stream_flush_locked(s);
	if (!s->batch && s->batch_status) {
		if (!ret)
			ret = spyre_error(s->batch_status, "%s", s->batch_detail);
		s->batch_status = 0;
	}
	if (!s->batch && batching) {
		struct spyre_stream **p = &batching;

		while (*p && *p != s)
			p = &(*p)->batch_next;
		if (*p) {
			*p = s->batch_next;
			__atomic_sub_fetch(&batches_open, 1, __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/*
 * Submit @job on @s: its packets, waiting for the stream's pending event
 * waits, as stream point s->point + 1 - or, while @s batches, append them to
 * its pending job. One ioctl per job: SUBMIT itself refuses the job while
 * the queue has a failure this stream has not seen, and returns QUEUE_ERROR's
 * record of it. While tracing, nothing is batched, and the tracer's hooks
 * see the job before and after its SUBMIT, and may bracket its packets with
 * two TIMESTAMPs of theirs.
 */
static int submit_locked(struct spyre_stream *s, const struct spyre_job *job)
{
	const struct spyre_trace_hooks *th = spyre_tracer_get();
	uint8_t stack_pk[66 * SPYRE_PKT_SIZE], *pk = NULL;
	const void *packets = job->packets;
	uint32_t count = job->count;
	uint64_t t_submit = 0;
	int ret;

	if (s->poisoned)
		return spyre_error(-EIO, "%s", s->poison);
	if (s->capture)
		return capture_locked(s, job);
	wait_callbacks_locked(s);
	if (s->batch && !th && !job->names && !job->wait_bound_ms &&
	    job->count <= DRM_SPYRE_MAX_JOB_PACKETS && batch_mine(s))
		return batch_append_locked(s, job);
	ret = s->pending ? spyre_stream_flush_locked(s) : 0;
	if (ret)
		return ret;
	if (__builtin_expect(th != NULL, 0)) {
		uint8_t pre[SPYRE_PKT_SIZE], post[SPYRE_PKT_SIZE];

		if (!th->job_begin(s, job, pre, post)) {
			th = NULL;
		} else {
			size_t n = job->count;

			pk = n + 2 <= sizeof(stack_pk) / SPYRE_PKT_SIZE ? stack_pk :
			     malloc((n + 2) * SPYRE_PKT_SIZE);
			if (!pk)
				return spyre_error(-ENOMEM, "%s: submitting %u packets failed",
						   s->dev->props.devnode, job->count);
			memcpy(pk, pre, SPYRE_PKT_SIZE);
			memcpy(pk + SPYRE_PKT_SIZE, job->packets, n * SPYRE_PKT_SIZE);
			memcpy(pk + (n + 1) * SPYRE_PKT_SIZE, post, SPYRE_PKT_SIZE);
			packets = pk;
			count = job->count + 2;
			t_submit = spyre_now_ns();
		}
	}
	ret = submit_ioctl_locked(s, packets, count, s->waits, s->nwaits, s->point + 1,
				  job->wait_bound_ms);
	if (pk != stack_pk)
		free(pk);
	if (ret)
		return ret;
	if (th)
		th->job_submitted(s, job, s->point + 1, t_submit);
	s->point++;
	waits_put(s->wait_tl, &s->nwaits);
	s->stats.jobs++;
	if (job->names)
		name_job_locked(s, job);
	return 0;
}

int spyre_stream_submit_locked(struct spyre_stream *s, const struct spyre_job *job)
{
	return submit_locked(s, job);
}

int spyre_stream_wait_point(struct spyre_stream *s, uint64_t point)
{
	return wait_point(s, point, INT64_MAX);
}

/*
 * Wait until @point of @s is done; *@done is then the stream's newest done
 * point (at least @point), so that what completed meanwhile is known done too.
 * A point already done costs one query and no wait.
 */
int spyre_stream_wait_done(struct spyre_stream *s, uint64_t point, uint64_t *done)
{
	uint64_t d = 0;
	int ret;

	if (drmSyncobjQuery(s->dev->fd, &s->tl->handle, &d, 1))
		d = 0;
	if (d < point) {
		ret = wait_point(s, point, INT64_MAX);
		if (ret)
			return ret;
		d = point;
	}
	*done = d;
	return 0;
}

int spyre_stream_point_ok(struct spyre_stream *s, uint64_t point, uint64_t errors)
{
	struct drm_spyre_queue_error e = { .queue_id = s->queue };
	int ret = wait_point(s, point, INT64_MAX);

	if (ret)
		return ret;
	/* The driver records a job's failure before its fence signals. */
	if (drmIoctl(s->dev->fd, DRM_IOCTL_SPYRE_QUEUE_ERROR, &e))
		return spyre_error(-errno, "querying queue %u failed", s->queue);
	return e.error_count == errors;
}

int spyre_stream_point_ok_now(struct spyre_stream *s, uint64_t point, uint64_t errors)
{
	struct drm_spyre_queue_error e = { .queue_id = s->queue };
	uint64_t done = 0;

	if (drmSyncobjQuery(s->dev->fd, &s->tl->handle, &done, 1) || done < point)
		return 0;
	/* The driver records a job's failure before its fence signals. */
	if (drmIoctl(s->dev->fd, DRM_IOCTL_SPYRE_QUEUE_ERROR, &e))
		return 0;
	return e.error_count == errors;
}

int spyre_stream_submit(struct spyre_stream *s, const struct spyre_job *job)
{
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = submit_locked(s, job);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int spyre_stream_copy(struct spyre_stream *s, const struct spyre_pkt_copy *p, enum spyre_memcpy_kind kind)
{
	struct spyre_job job = { .packets = p, .count = 1, .what = "copy", .bytes = p->size,
				 .node = SPYRE_GRAPH_NODE_COPY, .copy_kind = kind };

	return spyre_stream_submit(s, &job);
}

/* A job of one NOP: it flushes the stream's pending event waits. */
static int submit_nop_locked(struct spyre_stream *s)
{
	uint8_t nop[SPYRE_PKT_SIZE] = { SPYRE_PKT_OP_NOP, SPYRE_PKT_VERSION };
	struct spyre_job job = { .packets = nop, .count = 1, .what = "nop" };

	return submit_locked(s, &job);
}

SPYRE_EXPORT int spyre_stream_create(spyre_device_t *dev, int priority, spyre_stream_t **out)
{
	struct drm_spyre_queue_create q = { .priority = (uint32_t)priority };
	struct spyre_stream *s, **arr;
	int ret;

	if (!dev || !out || priority < SPYRE_STREAM_PRIORITY_LOW ||
	    priority > SPYRE_STREAM_PRIORITY_HIGH)
		return spyre_error(-EINVAL, "spyre_stream_create: bad argument (priority %d)", priority);
	s = calloc(1, sizeof(*s));
	if (!s)
		return spyre_error(-ENOMEM, "out of memory");
	s->dev = dev;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	if (drmIoctl(dev->fd, DRM_IOCTL_SPYRE_QUEUE_CREATE, &q)) {
		free(s);
		return spyre_error(-errno, "%s: creating a queue failed", dev->props.devnode);
	}
	s->queue = q.queue_id;
	ret = timeline_new(dev, &s->tl);
	if (ret) {
		struct drm_spyre_queue_destroy d = { .queue_id = s->queue };

		drmIoctl(dev->fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &d);
		free(s);
		return ret;
	}
	s->refs = 1;			/* the device list's */
	pthread_mutex_lock(&dev->lock);
	s->id = ++dev->next_stream_id;
	arr = realloc(dev->streams, (dev->nstreams + 1) * sizeof(*arr));
	if (arr) {
		dev->streams = arr;
		dev->streams[dev->nstreams++] = s;
	}
	pthread_mutex_unlock(&dev->lock);
	if (!arr) {
		struct drm_spyre_queue_destroy d = { .queue_id = s->queue };

		spyre_timeline_put(s->tl);
		drmIoctl(dev->fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &d);
		free(s);
		return spyre_error(-ENOMEM, "out of memory");
	}
	*out = s;
	return 0;
}

static int wait_point(struct spyre_stream *s, uint64_t point, int64_t timeout_ns)
{
	if (!point)
		return 0;
	if (drmSyncobjTimelineWait(s->dev->fd, &s->tl->handle, &point, 1, timeout_ns,
				   DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, NULL))
		return spyre_error(-errno, "waiting for point %llu of queue %u failed",
				   (unsigned long long)point, s->queue);
	return 0;
}

static int stream_synchronize(spyre_stream_t *s)
{
	bool batching_s;
	uint64_t point;
	int ret;

	if (!s)
		return spyre_error(-EINVAL, "spyre_stream_synchronize: NULL stream");
	/*
	 * The host waits for a batching stream: the jobs of this thread's
	 * batches first, which its job may WAIT for. (Another stream, the
	 * internal one of a kernel's upload say, waits for none of them.)
	 */
	if (__atomic_load_n(&batches_open, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&s->lock);
		batching_s = s->batch != 0;
		pthread_mutex_unlock(&s->lock);
		if (batching_s)
			spyre_batches_flush(NULL);
	}
	pthread_mutex_lock(&s->lock);
	ret = spyre_stream_capturing_locked(s, "spyre_stream_synchronize");
	if (ret) {
		pthread_mutex_unlock(&s->lock);
		return ret;
	}
	if (s->nwaits && !s->poisoned)
		/* Pending event waits are stream work too: flush them into a NOP (appended when batching). */
		ret = submit_nop_locked(s);
	ret = ret ?: spyre_stream_flush_locked(s);
	if (ret) {
		pthread_mutex_unlock(&s->lock);
		return ret;
	}
	point = s->point;
	wait_callbacks_locked(s);
	pthread_mutex_unlock(&s->lock);
	ret = wait_point(s, point, INT64_MAX);
	if (ret)
		return spyre_error(ret, "waiting for the stream failed");
	pthread_mutex_lock(&s->lock);
	ret = check_errors_locked(s);
	spyre_trace_harvest_locked(s, point);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

SPYRE_EXPORT int spyre_stream_synchronize(spyre_stream_t *s)
{
	SPYRE_TRACED("spyre_stream_synchronize", "flush", stream_synchronize(s), NULL, 0);
}

SPYRE_EXPORT int spyre_stream_query(spyre_stream_t *s)
{
	uint64_t done = 0;
	int ret;

	if (!s)
		return spyre_error(-EINVAL, "spyre_stream_query: NULL stream");
	pthread_mutex_lock(&s->lock);
	ret = spyre_stream_capturing_locked(s, "spyre_stream_query");
	ret = ret ?: spyre_stream_flush_locked(s);
	ret = ret ?: check_errors_locked(s);
	if (!ret && drmSyncobjQuery(s->dev->fd, &s->tl->handle, &done, 1))
		ret = spyre_error(-errno, "querying the stream failed");
	if (!ret && (done < s->point || s->cb_done != s->cb_queued))
		ret = -EBUSY;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/*
 * @s waits for @e of another card on the device: a WAIT packet on the
 * event's semaphore (its host buffer imported into @s's card) for the value
 * of the event's last record. A value that never comes is a hung job: the
 * driver's job timeout fails it and the stream is poisoned.
 */
static int wait_event_cross(struct spyre_stream *s, struct spyre_event *e)
{
	struct spyre_pkt_sem p;
	struct spyre_job job = { .packets = &p, .count = 1, .what = "wait" };
	uint64_t va, want = __atomic_load_n(&e->sem_value, __ATOMIC_ACQUIRE);
	int ret;

	if (!(e->flags & SPYRE_EVENT_CROSS_DEVICE))
		return spyre_error(-EINVAL, "spyre_stream_wait_event: the event is of another device "
				   "(create it with SPYRE_EVENT_CROSS_DEVICE)");
	ret = spyre_bo_import(s->dev, e->dev, &e->ts, &va);
	if (ret)
		return ret;
	spyre_prep_sem(&p, SPYRE_PKT_OP_WAIT, SPYRE_AS_VIRT, va + EVENT_SEM_OFF, want);
	pthread_mutex_lock(&s->lock);
	ret = spyre_stream_capturing_locked(s, "spyre_stream_wait_event (another device's event)");
	ret = ret ?: submit_locked(s, &job);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/*
 * A SIGNAL (@op SPYRE_PKT_OP_SIGNAL) or WAIT of the 64-bit word at @addr of
 * @s's card, as one job: the stream memory operations (CUDA's
 * cuStreamWriteValue64/cuStreamWaitValue64).
 */
static int stream_value_op(struct spyre_stream *s, uint32_t op, spyre_dptr_t addr, uint64_t value,
			   unsigned int timeout_ms, const char *call)
{
	struct spyre_pkt_sem p;
	struct spyre_job job = { .packets = &p, .count = 1, .wait_bound_ms = timeout_ms,
				 .what = op == SPYRE_PKT_OP_WAIT ? "wait" : "signal" };
	int ret;

	if (!s)
		return spyre_error(-EINVAL, "%s: NULL stream", call);
	if (!addr || addr % 8)
		return spyre_error(-EINVAL, "%s: address 0x%llx is not a non-zero multiple of 8", call,
				   (unsigned long long)addr);
	if (timeout_ms > DRM_SPYRE_MAX_WAIT_BOUND_MS)
		return spyre_error(-EINVAL, "%s: timeout %u ms is beyond the driver's %u ms", call,
				   timeout_ms, DRM_SPYRE_MAX_WAIT_BOUND_MS);
	spyre_prep_sem(&p, op, SPYRE_AS_VIRT, addr, value);
	pthread_mutex_lock(&s->lock);
	ret = spyre_stream_capturing_locked(s, call);
	ret = ret ?: submit_locked(s, &job);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

SPYRE_EXPORT int spyre_stream_write_value64(spyre_stream_t *s, spyre_dptr_t addr, uint64_t value)
{
	return stream_value_op(s, SPYRE_PKT_OP_SIGNAL, addr, value, 0, "spyre_stream_write_value64");
}

SPYRE_EXPORT int spyre_stream_wait_value64(spyre_stream_t *s, spyre_dptr_t addr, uint64_t value,
					   unsigned int timeout_ms)
{
	return stream_value_op(s, SPYRE_PKT_OP_WAIT, addr, value, timeout_ms,
			       "spyre_stream_wait_value64");
}

SPYRE_EXPORT int spyre_stream_wait_event(spyre_stream_t *s, spyre_event_t *e)
{
	struct spyre_timeline *tl;
	uint64_t point;
	int ret = 0;

	if (!s || !e)
		return spyre_error(-EINVAL, "spyre_stream_wait_event: NULL argument");
	if (!event_get(e, &tl, &point))
		return 0;	/* as in CUDA: waiting for an unrecorded event is a no-op */
	if (s->dev != e->dev) {
		ret = wait_event_cross(s, e);
	} else {
		pthread_mutex_lock(&s->lock);
		ret = spyre_stream_capturing_locked(s, "spyre_stream_wait_event");
		ret = ret ?: spyre_stream_add_wait_locked(s, tl, point);
		pthread_mutex_unlock(&s->lock);
	}
	spyre_timeline_put(tl);
	return ret;
}

int spyre_stream_add_wait_locked(struct spyre_stream *s, struct spyre_timeline *tl, uint64_t point)
{
	/* A pending batch job does not wait for it: only the jobs after it do. */
	int ret = spyre_stream_flush_locked(s);

	if (!ret && s->nwaits == SPYRE_MAX_WAITS)
		ret = submit_nop_locked(s);	/* too many pending waits: flush them into an empty job */
	if (!ret) {
		s->waits[s->nwaits].handle = tl->handle;
		s->waits[s->nwaits].flags = 0;
		s->waits[s->nwaits].point = point;
		s->wait_tl[s->nwaits] = spyre_timeline_get(tl);
		s->nwaits++;
	}
	return ret;
}

/* The last reference is gone: give the queue back, drop the timeline and the waits' timelines, free. */
static void stream_release(struct spyre_stream *s)
{
	struct drm_spyre_queue_destroy d = { .queue_id = s->queue };
	struct spyre_device *dev = s->dev;

	uint32_t i;

	if (s->launch)
		s->launch_release(dev, s->launch);
	for (i = 0; i < SPYRE_NAMED_JOBS; i++)
		spyre_job_names_put(s->named[i].names);
	drmIoctl(dev->fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &d);
	/* Events recorded on the stream keep its timeline. */
	waits_put(s->wait_tl, &s->nwaits);
	if (s->pending)
		waits_put(s->pending->wait_tl, &s->pending->nwaits);
	spyre_timeline_put(s->tl);
	free(s->pending);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void spyre_stream_put(struct spyre_stream *s)
{
	struct spyre_device *dev = s->dev;
	unsigned int refs;

	pthread_mutex_lock(&dev->lock);
	refs = --s->refs;
	pthread_mutex_unlock(&dev->lock);
	if (!refs)
		stream_release(s);
}

/*
 * A device-wide walk: the live stream of @dev with the smallest id in
 * (@after, @last], with a reference the caller drops with spyre_stream_put(),
 * or NULL when there is none. The stream stays valid while referenced, even
 * if another thread destroys it meanwhile; a walk visits each stream at most
 * once, whatever is created or destroyed during it.
 */
struct spyre_stream *spyre_stream_next(struct spyre_device *dev, uint64_t after, uint64_t last)
{
	struct spyre_stream *best = NULL;
	size_t i;

	pthread_mutex_lock(&dev->lock);
	for (i = 0; i < dev->nstreams; i++) {
		struct spyre_stream *s = dev->streams[i];

		if (s->id > after && s->id <= last && (!best || s->id < best->id))
			best = s;
	}
	if (best)
		best->refs++;
	pthread_mutex_unlock(&dev->lock);
	return best;
}

/* Destroy @s, also while it captures (spyre_streams_fini(): the capture is dropped). */
static int stream_destroy(struct spyre_stream *s)
{
	struct spyre_device *dev = s->dev;
	struct spyre_graph *g;
	size_t i;

	pthread_mutex_lock(&s->lock);
	g = s->capture;
	s->capture = NULL;
	pthread_mutex_unlock(&s->lock);
	spyre_graph_free(g);
	spyre_stream_synchronize(s);
	pthread_mutex_lock(&s->lock);
	spyre_trace_stream_gone_locked(s);
	s->quit = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (s->thread_started)
		pthread_join(s->thread, NULL);
	/*
	 * No new walk finds it now. One that holds it (a spyre_device_synchronize()
	 * on another thread, say) drops the last reference and releases it.
	 */
	pthread_mutex_lock(&dev->lock);
	for (i = 0; i < dev->nstreams; i++)
		if (dev->streams[i] == s)
			dev->streams[i] = dev->streams[--dev->nstreams];
	pthread_mutex_unlock(&dev->lock);
	spyre_stream_put(s);
	return 0;
}

SPYRE_EXPORT int spyre_stream_destroy(spyre_stream_t *s)
{
	if (!s)
		return 0;
	if (stream_capturing(s, "spyre_stream_destroy"))
		return -EBUSY;
	return stream_destroy(s);
}

static int device_synchronize(spyre_device_t *dev)
{
	struct spyre_stream *s;
	uint64_t last, id = 0;
	int ret = 0, r;

	if (!dev)
		return spyre_error(-EINVAL, "spyre_device_synchronize: NULL device");
	/* Every stream that exists now; streams created meanwhile are not waited for. */
	pthread_mutex_lock(&dev->lock);
	last = dev->next_stream_id;
	pthread_mutex_unlock(&dev->lock);
	while ((s = spyre_stream_next(dev, id, last))) {
		r = spyre_stream_synchronize(s);
		if (r && !ret)
			ret = r;
		id = s->id;
		spyre_stream_put(s);
	}
	return ret;
}

SPYRE_EXPORT int spyre_device_synchronize(spyre_device_t *dev)
{
	SPYRE_TRACED("spyre_device_synchronize", NULL, device_synchronize(dev), NULL, 0);
}

void spyre_streams_fini(struct spyre_device *dev)
{
	while (dev->nstreams)
		stream_destroy(dev->streams[dev->nstreams - 1]);
	free(dev->streams);
}

/* ---- events ----------------------------------------------------------------- */

static int event_create(spyre_device_t *dev, unsigned int flags, spyre_event_t **out)
{
	struct spyre_event *e;
	int ret;

	if (!dev || !out)
		return spyre_error(-EINVAL, "spyre_event_create: NULL argument");
	if (flags & ~SPYRE_EVENT_CROSS_DEVICE)
		return spyre_error(-EINVAL, "spyre_event_create_flags: unknown flags 0x%x",
				   flags & ~SPYRE_EVENT_CROSS_DEVICE);
	e = calloc(1, sizeof(*e));
	if (!e)
		return spyre_error(-ENOMEM, "out of memory");
	e->dev = dev;
	e->flags = flags;
	ret = spyre_bo_new(dev, 4096, DRM_SPYRE_BO_HOST, &e->ts);
	if (ret) {
		free(e);
		return ret;
	}
	pthread_mutex_init(&e->lock, NULL);
	*out = e;
	return 0;
}

SPYRE_EXPORT int spyre_event_create(spyre_device_t *dev, spyre_event_t **out)
{
	return event_create(dev, 0, out);
}

SPYRE_EXPORT int spyre_event_create_flags(spyre_device_t *dev, unsigned int flags, spyre_event_t **out)
{
	return event_create(dev, flags, out);
}

SPYRE_EXPORT int spyre_event_destroy(spyre_event_t *e)
{
	if (!e)
		return 0;
	spyre_event_synchronize(e);
	spyre_bo_del(e->dev, &e->ts);
	spyre_timeline_put(e->tl);
	pthread_mutex_destroy(&e->lock);
	free(e);
	return 0;
}

void spyre_event_prep_record(struct spyre_event *e, void *pkt)
{
	spyre_prep_timestamp(pkt, SPYRE_AS_VIRT, e->ts.va);
}

void spyre_event_mark_locked(struct spyre_event *e, struct spyre_stream *s, uint64_t point)
{
	struct spyre_timeline *old;

	pthread_mutex_lock(&e->lock);
	old = e->tl;
	e->tl = spyre_timeline_get(s->tl);
	e->point = point;
	pthread_mutex_unlock(&e->lock);
	spyre_timeline_put(old);
}

static bool event_recorded(struct spyre_event *e)
{
	struct spyre_timeline *tl;
	uint64_t point;

	if (!event_get(e, &tl, &point))
		return false;
	spyre_timeline_put(tl);
	return true;
}

static int event_record(spyre_event_t *e, spyre_stream_t *s)
{
	struct spyre_pkt_sem p[2];
	struct spyre_job job = { .packets = p, .count = 1, .what = "timestamp",
				 .node = SPYRE_GRAPH_NODE_EVENT_RECORD, .event = e };
	uint64_t value = 0;
	int ret = 0;

	if (!e || !s || e->dev != s->dev)
		return spyre_error(-EINVAL, "spyre_event_record: NULL argument or another device");
	spyre_event_prep_record(e, &p[0]);
	if (e->flags & SPYRE_EVENT_CROSS_DEVICE) {
		/* Then the semaphore: its value only grows, so the event is reusable without resets. */
		value = __atomic_add_fetch(&e->sem_next, 1, __ATOMIC_RELAXED);
		spyre_prep_sem(&p[1], SPYRE_PKT_OP_SIGNAL, SPYRE_AS_VIRT, e->ts.va + EVENT_SEM_OFF, value);
		job.count = 2;
	}
	pthread_mutex_lock(&s->lock);
	if (e->flags & SPYRE_EVENT_CROSS_DEVICE)
		ret = spyre_stream_capturing_locked(s, "spyre_event_record (SPYRE_EVENT_CROSS_DEVICE)");
	ret = ret ?: submit_locked(s, &job);
	/*
	 * A cross-device record ends its batch job: submitted now, so every
	 * WAIT for it (appended after this returns, in any stream) is
	 * submitted after its SIGNAL. Jobs that wait for SIGNALs still
	 * unsubmitted could deadlock where user queues share a hardware
	 * queue's FIFO (two callers' jobs interleaved on two cards), and a
	 * SUBMIT refused here fails the caller before anyone waits for it.
	 */
	if (!ret && value && s->pending)
		ret = spyre_stream_flush_locked(s);
	if (!ret && !s->capture) {
		if (value)
			__atomic_store_n(&e->sem_value, value, __ATOMIC_RELEASE);
		spyre_event_mark_locked(e, s, s->point);
		/*
		 * In a batch, only another card's device waits for a cross-device
		 * event's SIGNAL; any other event is waited for by its point:
		 * submitted now, as the host and same-device streams need it.
		 */
		if (!(e->flags & SPYRE_EVENT_CROSS_DEVICE))
			ret = spyre_stream_flush_locked(s);
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

SPYRE_EXPORT int spyre_event_record(spyre_event_t *e, spyre_stream_t *s)
{
	SPYRE_TRACED("spyre_event_record", "event record", event_record(e, s), NULL, 0);
}

SPYRE_EXPORT int spyre_event_query(spyre_event_t *e)
{
	struct spyre_timeline *tl;
	uint64_t point, done = 0;
	int ret = 0;

	if (!e || !event_get(e, &tl, &point))
		return spyre_error(-EINVAL, "spyre_event_query: %s", e ? "never recorded" : "NULL event");
	if (drmSyncobjQuery(tl->fd, &tl->handle, &done, 1))
		ret = spyre_error(-errno, "querying the event failed");
	else if (done < point)
		ret = -EBUSY;
	spyre_timeline_put(tl);
	return ret;
}

static int event_synchronize(spyre_event_t *e)
{
	struct spyre_timeline *tl;
	uint64_t point;
	int ret = 0;

	if (!e)
		return spyre_error(-EINVAL, "spyre_event_synchronize: NULL event");
	if (!event_get(e, &tl, &point))
		return 0;
	spyre_batches_flush(NULL);
	if (drmSyncobjTimelineWait(tl->fd, &tl->handle, &point, 1, INT64_MAX,
				   DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, NULL))
		ret = spyre_error(-errno, "waiting for the event failed");
	spyre_timeline_put(tl);
	return ret;
}

SPYRE_EXPORT int spyre_event_synchronize(spyre_event_t *e)
{
	SPYRE_TRACED("spyre_event_synchronize", NULL, event_synchronize(e), NULL, 0);
}

SPYRE_EXPORT int spyre_event_elapsed_ms(spyre_event_t *a, spyre_event_t *b, float *ms)
{
	uint64_t ta, tb;

	if (!a || !b || !ms || !event_recorded(a) || !event_recorded(b))
		return spyre_error(-EINVAL, "spyre_event_elapsed_ms: NULL or unrecorded event");
	if (spyre_event_query(a) || spyre_event_query(b))
		return spyre_error(-EBUSY, "spyre_event_elapsed_ms: an event has not been reached");
	ta = *(volatile uint64_t *)a->ts.map;
	tb = *(volatile uint64_t *)b->ts.map;
	*ms = (float)((double)((int64_t)(tb - ta)) / 1e6);
	return 0;
}

/* ---- copies ------------------------------------------------------------------- */

/*
 * The stream of synchronous operations, referenced: another thread's failure
 * may replace it (internal_failed()) while the caller still uses it.
 */
static int internal_get(struct spyre_device *dev, struct spyre_stream **out)
{
	int ret = 0;

	*out = NULL;
	pthread_mutex_lock(&dev->internal_lock);
	if (!dev->internal)
		ret = spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &dev->internal);
	if (!ret) {
		*out = dev->internal;
		pthread_mutex_lock(&dev->lock);
		(*out)->refs++;
		pthread_mutex_unlock(&dev->lock);
	}
	pthread_mutex_unlock(&dev->internal_lock);
	return ret;
}

/* Device address of host memory from spyre_malloc_host(), or 0. */
static uint64_t pinned_va(struct spyre_device *dev, const void *p, size_t size)
{
	const struct spyre_alloc *a;
	uint64_t va = 0;

	pthread_mutex_lock(&dev->lock);
	a = spyre_alloc_find_host_locked(dev, p);
	if (a && (const char *)p + size <= (char *)a->bo.map + a->span)
		va = a->base + (uint64_t)((const char *)p - (char *)a->bo.map);
	pthread_mutex_unlock(&dev->lock);
	return va;
}

/* Device address of @size bytes at @p, whole sticks of spyre_malloc_host() memory (copied in place), or 0. */
static uint64_t pinned_sticks_va(struct spyre_device *dev, const void *p, size_t size)
{
	uint64_t va = pinned_va(dev, p, size);

	return va && !(va % SPYRE_STICK_BYTES) && !(size % SPYRE_STICK_BYTES) ? va : 0;
}

/* A COPY through the device's staging buffer: a job of its own, which no capture takes (capture_locked()). */
static int staged_copy(struct spyre_stream *s, const struct spyre_pkt_copy *p)
{
	struct spyre_job job = { .packets = p, .count = 1, .what = "copy", .bytes = p->size };

	return spyre_stream_submit(s, &job);
}

static int staging_get_locked(struct spyre_device *dev)
{
	if (dev->staging.handle)
		return 0;
	return spyre_bo_new(dev, SPYRE_STAGING_SIZE, DRM_SPYRE_BO_HOST, &dev->staging);
}

static int copy_run(struct spyre_stream *s, uint64_t dst, uint64_t src, size_t size,
		    enum spyre_memcpy_kind kind)
{
	struct spyre_device *dev = s->dev;
	struct spyre_pkt_copy p;
	uint64_t va;
	size_t off, n;
	int ret = 0;

	if (!size)
		return 0;
	switch (kind) {
	case SPYRE_MEMCPY_D2D:
		if (dst % SPYRE_STICK_BYTES || src % SPYRE_STICK_BYTES || size % SPYRE_STICK_BYTES)
			return spyre_error(-EINVAL, "device-to-device copies move whole 128-byte sticks "
					   "(dst 0x%llx src 0x%llx size %zu)", (unsigned long long)dst,
					   (unsigned long long)src, size);
		spyre_prep_copy_va(&p, src, dst, size);
		return spyre_stream_copy(s, &p, kind);
	case SPYRE_MEMCPY_H2D:
		if (dst % SPYRE_STICK_BYTES)
			return spyre_error(-EINVAL, "device address 0x%llx is not 128-byte aligned",
					   (unsigned long long)dst);
		va = pinned_sticks_va(dev, (const void *)(uintptr_t)src, size);
		if (va) {
			spyre_prep_copy_va(&p, va, dst, size);
			return spyre_stream_copy(s, &p, kind);
		}
		/* Stage: the tail stick keeps its device bytes beyond size. */
		pthread_mutex_lock(&dev->staging_lock);
		ret = staging_get_locked(dev);
		for (off = 0; !ret && off < size; off += n) {
			size_t whole;

			n = size - off < SPYRE_STAGING_SIZE ? size - off : SPYRE_STAGING_SIZE;
			whole = (n + SPYRE_STICK_BYTES - 1) & ~(size_t)(SPYRE_STICK_BYTES - 1);
			if (whole != n) {
				spyre_prep_copy_va(&p, dst + off + whole - SPYRE_STICK_BYTES,
					 dev->staging.va + whole - SPYRE_STICK_BYTES, SPYRE_STICK_BYTES);
				ret = staged_copy(s, &p);
				ret = ret ?: spyre_stream_synchronize(s);
				if (ret)
					break;
			}
			memcpy(dev->staging.map, (const char *)(uintptr_t)src + off, n);
			spyre_prep_copy_va(&p, dev->staging.va, dst + off, whole);
			ret = staged_copy(s, &p);
			/* The staging buffer is reused: wait before refilling it. */
			ret = ret ?: spyre_stream_synchronize(s);
		}
		pthread_mutex_unlock(&dev->staging_lock);
		return ret;
	case SPYRE_MEMCPY_D2H:
		if (src % SPYRE_STICK_BYTES)
			return spyre_error(-EINVAL, "device address 0x%llx is not 128-byte aligned",
					   (unsigned long long)src);
		va = pinned_sticks_va(dev, (const void *)(uintptr_t)dst, size);
		if (va) {
			spyre_prep_copy_va(&p, src, va, size);
			return spyre_stream_copy(s, &p, kind);
		}
		pthread_mutex_lock(&dev->staging_lock);
		ret = staging_get_locked(dev);
		for (off = 0; !ret && off < size; off += n) {
			n = size - off < SPYRE_STAGING_SIZE ? size - off : SPYRE_STAGING_SIZE;
			spyre_prep_copy_va(&p, src + off, dev->staging.va,
				 (n + SPYRE_STICK_BYTES - 1) & ~(size_t)(SPYRE_STICK_BYTES - 1));
			ret = staged_copy(s, &p);
			ret = ret ?: spyre_stream_synchronize(s);
			if (!ret)
				memcpy((char *)(uintptr_t)dst + off, dev->staging.map, n);
		}
		pthread_mutex_unlock(&dev->staging_lock);
		return ret;
	}
	return spyre_error(-EINVAL, "unknown copy kind %d", (int)kind);
}

/*
 * A copy, counted on its stream and its device once enqueued (or done); while
 * the stream captures, a node (counted when replayed), if it is one packet.
 */
static int copy_impl(struct spyre_stream *s, uint64_t dst, uint64_t src, size_t size,
		     enum spyre_memcpy_kind kind)
{
	uint64_t host = kind == SPYRE_MEMCPY_H2D ? src : dst;
	bool capturing;
	int ret;

	pthread_mutex_lock(&s->lock);
	capturing = s->capture != NULL;
	pthread_mutex_unlock(&s->lock);
	if (capturing && kind != SPYRE_MEMCPY_D2D && size &&
	    !pinned_sticks_va(s->dev, (const void *)(uintptr_t)host, size))
		return spyre_error(-EBUSY, "spyre_memcpy_async: the stream is capturing a graph: a "
				   "captured copy of host memory needs whole sticks of "
				   "spyre_malloc_host() memory");
	ret = copy_run(s, dst, src, size, kind);
	if (ret || !size || capturing)
		return ret;
	pthread_mutex_lock(&s->lock);
	spyre_stream_count_copy_locked(s, kind, size);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void spyre_stream_count_copy_locked(struct spyre_stream *s, enum spyre_memcpy_kind kind, uint64_t size)
{
	struct spyre_device *dev = s->dev;

	if (kind == SPYRE_MEMCPY_H2D)
		s->stats.h2d_bytes += size;
	else if (kind == SPYRE_MEMCPY_D2H)
		s->stats.d2h_bytes += size;
	else
		s->stats.d2d_bytes += size;
	pthread_mutex_lock(&dev->lock);
	if (kind == SPYRE_MEMCPY_H2D)
		dev->stats.h2d_bytes += size;
	else if (kind == SPYRE_MEMCPY_D2H)
		dev->stats.d2h_bytes += size;
	else
		dev->stats.d2d_bytes += size;
	pthread_mutex_unlock(&dev->lock);
}

static const char *copy_what(enum spyre_memcpy_kind kind)
{
	return kind == SPYRE_MEMCPY_H2D ? "copy H2D" : kind == SPYRE_MEMCPY_D2H ? "copy D2H" : "copy D2D";
}

static int memcpy_async(spyre_stream_t *s, uint64_t dst, uint64_t src, size_t size,
			enum spyre_memcpy_kind kind)
{
	if (!s)
		return spyre_error(-EINVAL, "spyre_memcpy_async: NULL stream");
	if (kind != SPYRE_MEMCPY_H2D && kind != SPYRE_MEMCPY_D2H && kind != SPYRE_MEMCPY_D2D)
		return spyre_error(-EINVAL, "unknown copy kind %d", (int)kind);
	return copy_impl(s, dst, src, size, kind);
}

SPYRE_EXPORT int spyre_memcpy_async(spyre_stream_t *s, uint64_t dst, uint64_t src, size_t size,
				    enum spyre_memcpy_kind kind)
{
	SPYRE_TRACED("spyre_memcpy_async", copy_what(kind), memcpy_async(s, dst, src, size, kind),
		     "bytes", size);
}

/*
 * A synchronous operation reports its failure to its caller; the internal
 * stream it ran on must not stay poisoned for the next one: replace it.
 * The caller still holds its reference from internal_get().
 */
static void internal_failed(struct spyre_device *dev, struct spyre_stream *s)
{
	pthread_mutex_lock(&dev->internal_lock);
	if (dev->internal == s)
		dev->internal = NULL;
	else
		s = NULL;
	pthread_mutex_unlock(&dev->internal_lock);
	if (s)
		spyre_stream_destroy(s);
}

/*
 * A synchronous operation: @work enqueues on the device's internal stream,
 * then this waits for it. A device failure is the caller's and replaces the
 * stream, so the next synchronous operation starts on a clean one.
 */
int spyre_internal_sync(struct spyre_device *dev, int (*work)(struct spyre_stream *s, void *arg),
			void *arg)
{
	struct spyre_stream *s;
	int ret;

	ret = internal_get(dev, &s);
	if (ret)
		return ret;
	ret = work(s, arg);
	ret = ret ?: spyre_stream_synchronize(s);
	if (ret == -EIO)
		internal_failed(dev, s);
	spyre_stream_put(s);
	return ret;
}

struct copy_args {
	uint64_t dst, src;
	size_t size;
	enum spyre_memcpy_kind kind;
};

static int copy_work(struct spyre_stream *s, void *arg)
{
	const struct copy_args *c = arg;

	return copy_impl(s, c->dst, c->src, c->size, c->kind);
}

static int memcpy_sync(spyre_device_t *dev, uint64_t dst, uint64_t src, size_t size,
		       enum spyre_memcpy_kind kind)
{
	struct copy_args c = { .dst = dst, .src = src, .size = size, .kind = kind };

	if (!dev)
		return spyre_error(-EINVAL, "spyre_memcpy: NULL device");
	if (kind != SPYRE_MEMCPY_H2D && kind != SPYRE_MEMCPY_D2H && kind != SPYRE_MEMCPY_D2D)
		return spyre_error(-EINVAL, "unknown copy kind %d", (int)kind);
	if (!size)
		return 0;
	return spyre_internal_sync(dev, copy_work, &c);
}

SPYRE_EXPORT int spyre_memcpy(spyre_device_t *dev, uint64_t dst, uint64_t src, size_t size,
			      enum spyre_memcpy_kind kind)
{
	SPYRE_TRACED("spyre_memcpy", copy_what(kind), memcpy_sync(dev, dst, src, size, kind), "bytes", size);
}

static int memset_async(spyre_stream_t *s, spyre_dptr_t dst, uint8_t value, size_t size)
{
	struct spyre_pkt_copy p[64];
	struct spyre_job job = { .packets = p, .what = "copy", .node = SPYRE_GRAPH_NODE_MEMSET };
	struct spyre_device *dev;
	size_t done, n = 0;
	uint64_t values;
	int ret = 0, v;

	if (!s || dst % SPYRE_STICK_BYTES || size % SPYRE_STICK_BYTES)
		return spyre_error(-EINVAL, "spyre_memset_async: %s", !s ? "NULL stream" :
				   "address and size must be whole 128-byte sticks");
	if (!size)
		return 0;
	dev = s->dev;
	/* 256 host sticks, stick v filled with byte v: written once, read-only after. */
	pthread_mutex_lock(&dev->lock);
	if (!dev->values.handle) {
		ret = spyre_bo_new(dev, 256 * SPYRE_STICK_BYTES, DRM_SPYRE_BO_HOST, &dev->values);
		for (v = 0; !ret && v < 256; v++)
			memset((char *)dev->values.map + v * SPYRE_STICK_BYTES, v, SPYRE_STICK_BYTES);
	}
	values = dev->values.va;
	pthread_mutex_unlock(&dev->lock);
	if (ret)
		return ret;
	/* One stick of the value, then double what is done: log2(size) packets. */
	spyre_prep_copy_va(&p[n++], values + (uint64_t)value * SPYRE_STICK_BYTES, dst, SPYRE_STICK_BYTES);
	for (done = SPYRE_STICK_BYTES; done < size; done *= 2)
		spyre_prep_copy_va(&p[n++], dst, dst + done, done < size - done ? done : size - done);
	job.count = (uint32_t)n;
	job.bytes = size;		/* what the packets move: a stick, then doubling to @size */
	pthread_mutex_lock(&s->lock);
	ret = submit_locked(s, &job);
	if (!ret && !s->capture)
		s->stats.memset_bytes += size;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

SPYRE_EXPORT int spyre_memset_async(spyre_stream_t *s, spyre_dptr_t dst, uint8_t value,
				    size_t size)
{
	SPYRE_TRACED("spyre_memset_async", "memset", memset_async(s, dst, value, size), "bytes", size);
}
