// SPDX-License-Identifier: MIT
/*
 * Traces: spyre_trace_start() records what libspyre does, spyre_trace_stop()
 * (or exit) writes it as a Chrome/Perfetto trace (JSON trace event format):
 *
 *  - host: one lane per thread with the traced public calls (spans), the
 *    caller's spans (spyre_trace_span_begin/end) and each job's submit
 *    (an instant event with its queue and timeline point);
 *  - per device: two lanes per traced queue - "jobs", each job from when the
 *    device started it, a LAUNCH for its modeled time (its launch record's
 *    device_ns), other jobs for what the device clock measured; and "device
 *    clock", each job from its first to its last packet as the device clock
 *    measured it - and one lane per core with each LAUNCH's busy span (its
 *    busy cycles, from the launch's start) and idle span (to its end).
 *
 * While tracing, each job gets a TIMESTAMP packet before and after its
 * packets (the device clock, ns since the device's reset), written into a
 * host buffer of its stream; when the job is known done (a synchronize, a
 * launch record folded into the stream's totals, the stream's destruction,
 * spyre_trace_stop()) the two stamps and, for a LAUNCH, a copy of its
 * launch record are kept. The device clock is put on the host clock
 * (CLOCK_MONOTONIC) when the file is written, by causality: the device
 * cannot start a job before the host submitted it, so, per device, the
 * offset is the largest (submit time - device start) over the jobs that
 * started within a second of a job (a running maximum, which follows slow
 * drift between the two clocks); the job that started soonest after its
 * submit is drawn starting at its submit. The device clock restarts at a
 * reset of the card (a runtime resume from D3hot, a recovery): each run of
 * the clock (an epoch, clock_epochs()) gets its own offsets.
 *
 * An observer: spyre_trace_start() installs the hooks (internal.h) the
 * runtime calls with what it already has - each traced call, each job before
 * and after its SUBMIT (its packets, kind, bytes, launch record), the stream
 * points known done - and spyre_trace_stop() removes them. This file calls
 * down only (stream.c to wait for and let go of a stream, memory.c for its
 * buffers); nothing calls it but through the hooks.
 *
 * Locks: ctl_lock (start/stop) is outermost, taken under nothing; a
 * stream's lock, then reg_lock (the traced streams), then buf.lock (the
 * events) - buf.lock is a leaf. Off, the hooks cost one branch each.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <xf86drm.h>

#include "spyre_accel.h"
#include "spyre_hw.h"
#include "internal.h"

#define NAME_LEN	48		/* span names are cut to 47 bytes */
#define MAX_DEPTH	16		/* deeper spans are not recorded */
#define Q_SLOTS		1024		/* jobs in flight per traced stream */
#define MAX_HOST_EVENTS	(1u << 20)	/* beyond: dropped and counted */
#define MAX_JOBS	(1u << 18)
#define TS_UNWRITTEN	UINT64_MAX	/* a TIMESTAMP slot the device has not written */
#define ALIGN_WINDOW_NS	1000000000ull	/* the offset follows drift over this window */
#define HOST_PID_NAME	"host: libspyre calls (CLOCK_MONOTONIC)"
#define DEV_PID_BASE	1000000000	/* device "processes": beyond any pid */

static const struct spyre_trace_hooks hooks;

enum hkind { H_SPAN, H_CALL, H_SUBMIT };

/* A host event: a span of the caller, a traced call, a submit. */
struct hev {
	uint8_t kind;
	int32_t tid, ret;
	uint32_t depth, queue, packets;
	uint64_t t0, t1;		/* CLOCK_MONOTONIC ns; t1 unused for H_SUBMIT */
	uint64_t id;			/* H_SPAN: the span's id; H_SUBMIT: the job's */
	uint64_t point, jobs;		/* H_CALL: its last job's point, jobs submitted */
	const char *api, *k0, *k1;	/* H_CALL: name, annotations (static strings) */
	uint64_t v0, v1;
	char name[NAME_LEN];		/* H_SPAN */
};

/* A job submitted while tracing, until it is known done (a stream's ring). */
struct pend {
	uint64_t id, point, t_submit;
	int32_t tid;
	const char *what;
	char span[NAME_LEN], step[NAME_LEN];	/* innermost and outermost span of the submitter */
	uint64_t span_id, step_id;
	uint32_t packets, core_mask;
	uint64_t bytes;
	const struct spyre_launch_record *rec;	/* a LAUNCH's, or NULL */
};

/* A done job. */
struct jev {
	struct pend p;
	uint32_t lane, dev;		/* indices into buf.lanes, buf.devs */
	uint64_t t_seen;		/* host time the job was known done */
	uint64_t d_begin, d_end;	/* device clock; d_end TS_UNWRITTEN if the job failed */
	bool launch;
	struct spyre_launch_record rec;
	/* layout, when written */
	uint32_t epoch;			/* the device clock restarted @epoch times before it (clock_epochs()) */
	int64_t offset;
	uint64_t s, d;			/* drawn start (host ns) and duration */
};

struct spyre_trace_queue {
	struct spyre_buf bo;		/* Q_SLOTS pairs of u64: device clock at a job's start, end */
	struct pend pend[Q_SLOTS];	/* ring: the oldest at @head */
	uint32_t head, count, lane;
	uint64_t first_point, last_point;	/* jobs with a TIMESTAMP in front */
};

struct tthread {
	int32_t tid;
	char name[32];
};

struct tdev {
	uint32_t index, num_cores;
	char pci[32], devnode[64];
};

struct tlane {
	uint32_t dev, queue;
	uint64_t stream_id;
};

/* What a session recorded (buf's, then the writer's). */
struct events {
	struct hev *hev;
	size_t nhev, caphev;
	struct jev *jev;
	size_t njev, capjev;
	struct tthread *thr;
	size_t nthr, capthr;
	struct tdev *devs;
	size_t ndevs, capdevs;
	struct tlane *lanes;
	size_t nlanes, caplanes;
	uint64_t dropped, not_run, t_start;
};

static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static bool tracing, atexit_set;
static FILE *trace_file;
static char trace_path[4096];

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct spyre_stream **reg;
static size_t nreg, capreg;

static struct {
	pthread_mutex_t lock;
	bool collecting;
	struct events ev;
} buf = { .lock = PTHREAD_MUTEX_INITIALIZER };

static unsigned int session;		/* read relaxed; written under ctl_lock */
static uint64_t next_id;		/* span and job ids, atomic */

static __thread struct {
	int32_t tid;
	unsigned int named, session;	/* session of the name / of the span stack */
	uint32_t depth;
	struct {
		uint64_t t0, id;
		char name[NAME_LEN];
	} stack[MAX_DEPTH];
	const char *what;		/* job kind of the traced call in progress */
	uint64_t jobs, last_point;
	uint32_t last_queue;
} T;

static unsigned int cur_session(void)
{
	return __atomic_load_n(&session, __ATOMIC_ACQUIRE);
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 64;
	void *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*arr, n * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = n;
	return 0;
}

#define GROW(arr, n, cap) grow((void **)&(arr), &(cap), (n) + 1, sizeof(*(arr)))

static void copy_name(char *dst, const char *src)
{
	snprintf(dst, NAME_LEN, "%s", src ? src : "(null)");
}

static void events_free(struct events *e)
{
	free(e->hev);
	free(e->jev);
	free(e->thr);
	free(e->devs);
	free(e->lanes);
	memset(e, 0, sizeof(*e));
}

/* ---- recording (under buf.lock) ------------------------------------------------------ */

/* The calling thread's id; named in this session's events once. */
static int32_t thread_locked(void)
{
	struct events *e = &buf.ev;

	if (!T.tid)
		T.tid = (int32_t)syscall(SYS_gettid);
	if (T.named != cur_session() && !GROW(e->thr, e->nthr, e->capthr)) {
		struct tthread *t = &e->thr[e->nthr++];

		t->tid = T.tid;
		if (pthread_getname_np(pthread_self(), t->name, sizeof(t->name)))
			t->name[0] = 0;
		T.named = cur_session();
	}
	return T.tid;
}

/* A new host event, or NULL (not collecting, started before the trace, full). */
static struct hev *hev_new_locked(uint64_t t0)
{
	struct events *e = &buf.ev;
	struct hev *h;

	if (!buf.collecting || t0 < e->t_start)
		return NULL;
	if (e->nhev >= MAX_HOST_EVENTS || GROW(e->hev, e->nhev, e->caphev)) {
		e->dropped++;
		return NULL;
	}
	h = &e->hev[e->nhev++];
	memset(h, 0, sizeof(*h));
	h->tid = thread_locked();
	h->t0 = t0;
	return h;
}

/* The span stack of an earlier session is stale. */
static void sync_stack(void)
{
	unsigned int s = cur_session();

	if (T.session != s) {
		T.session = s;
		T.depth = 0;
	}
}

/* ---- the public calls ---------------------------------------------------------------- */

SPYRE_EXPORT int spyre_trace_active(void)
{
	return SPYRE_TRACE_ON() ? 1 : 0;
}

SPYRE_EXPORT void spyre_trace_span_begin(const char *name)
{
	uint32_t d;

	if (!SPYRE_TRACE_ON())
		return;
	sync_stack();
	d = T.depth++;
	if (d < MAX_DEPTH) {
		copy_name(T.stack[d].name, name);
		T.stack[d].id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
		T.stack[d].t0 = spyre_now_ns();
	}
}

SPYRE_EXPORT void spyre_trace_span_end(void)
{
	uint64_t t1;
	struct hev *h;
	uint32_t d;

	if (!SPYRE_TRACE_ON())
		return;
	sync_stack();
	if (!T.depth)
		return;
	d = --T.depth;
	t1 = spyre_now_ns();
	pthread_mutex_lock(&buf.lock);
	if (d >= MAX_DEPTH)
		buf.ev.dropped++;
	else if ((h = hev_new_locked(T.stack[d].t0))) {
		h->kind = H_SPAN;
		h->t1 = t1;
		h->depth = d;
		h->id = T.stack[d].id;
		memcpy(h->name, T.stack[d].name, NAME_LEN);
	}
	pthread_mutex_unlock(&buf.lock);
}

static void call_begin(struct spyre_trace_call *c, const char *name, const char *what)
{
	c->name = name;
	c->prev_what = T.what;
	T.what = what;
	c->jobs0 = T.jobs;
	c->session = cur_session();
	c->t0 = spyre_now_ns();
}

static void call_end(struct spyre_trace_call *c, int ret, const char *k0, uint64_t v0,
		     const char *k1, uint64_t v1)
{
	uint64_t t1 = spyre_now_ns();
	struct hev *h;

	T.what = c->prev_what;
	pthread_mutex_lock(&buf.lock);
	if (c->session == cur_session() && (h = hev_new_locked(c->t0))) {
		h->kind = H_CALL;
		h->t1 = t1;
		h->api = c->name;
		h->ret = ret;
		h->jobs = T.jobs - c->jobs0;
		if (h->jobs) {
			h->queue = T.last_queue;
			h->point = T.last_point;
		}
		h->k0 = k0;
		h->v0 = v0;
		h->k1 = k1;
		h->v1 = v1;
	}
	pthread_mutex_unlock(&buf.lock);
}

/* ---- traced streams ------------------------------------------------------------------ */

static void unregister(struct spyre_stream *s)
{
	size_t i;

	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < nreg; i++)
		if (reg[i] == s) {
			reg[i] = reg[--nreg];
			break;
		}
	pthread_mutex_unlock(&reg_lock);
}

/* Under s->lock: trace @s from its next job on; NULL when tracing stopped meanwhile or on failure. */
static struct spyre_trace_queue *queue_new(struct spyre_stream *s)
{
	struct spyre_device *dev = s->dev;
	struct spyre_trace_queue *q = calloc(1, sizeof(*q));
	struct events *e = &buf.ev;
	bool ok = false;
	size_t i;

	if (!q)
		return NULL;
	if (spyre_bo_new(dev, Q_SLOTS * 16, DRM_SPYRE_BO_HOST, &q->bo)) {
		free(q);
		return NULL;
	}
	pthread_mutex_lock(&reg_lock);
	if (spyre_tracer_get() && !GROW(reg, nreg, capreg)) {
		pthread_mutex_lock(&buf.lock);
		for (i = 0; i < e->ndevs && e->devs[i].index != dev->props.index; i++)
			;
		if (i == e->ndevs && !GROW(e->devs, e->ndevs, e->capdevs)) {
			struct tdev *d = &e->devs[e->ndevs++];

			d->index = dev->props.index;
			d->num_cores = dev->props.num_cores;
			memcpy(d->pci, dev->props.pci_address, sizeof(d->pci));
			memcpy(d->devnode, dev->props.devnode, sizeof(d->devnode));
		}
		if (i < e->ndevs && !GROW(e->lanes, e->nlanes, e->caplanes)) {
			q->lane = (uint32_t)e->nlanes;
			e->lanes[e->nlanes++] = (struct tlane){ .dev = (uint32_t)i, .queue = s->queue,
								.stream_id = s->id };
			ok = true;
		}
		pthread_mutex_unlock(&buf.lock);
		if (ok)
			reg[nreg++] = s;
	}
	pthread_mutex_unlock(&reg_lock);
	if (!ok) {
		spyre_bo_del(dev, &q->bo);
		free(q);
		return NULL;
	}
	s->tracer = &hooks;
	s->trace = q;
	return q;
}

/* Under s->lock: stop tracing @s; its jobs not recorded yet never ran (or are given up). */
static void queue_free_locked(struct spyre_stream *s)
{
	struct spyre_trace_queue *q = s->trace;

	if (!q)
		return;
	if (q->count) {
		pthread_mutex_lock(&buf.lock);
		buf.ev.not_run += q->count;
		pthread_mutex_unlock(&buf.lock);
	}
	unregister(s);
	spyre_bo_del(s->dev, &q->bo);
	free(q);
	s->tracer = NULL;
	s->trace = NULL;
}

static void harvest_locked(struct spyre_stream *s, uint64_t done);

/* The job's slot of the stream's ring, taken by job_submitted(). */
static uint32_t job_slot(const struct spyre_trace_queue *q)
{
	return (q->head + q->count) % Q_SLOTS;
}

/* Bracket the job with TIMESTAMPs into the stream's ring - taking the stream on first - if it fits. */
static bool job_begin(struct spyre_stream *s, const struct spyre_job *job, void *pre, void *post)
{
	struct spyre_trace_queue *q = s->trace;
	uint32_t n = job->count, slot;
	volatile uint64_t *ts;
	uint64_t done;

	if (n + 2 > DRM_SPYRE_MAX_JOB_PACKETS)
		return false;
	if (!q)
		q = queue_new(s);
	if (!q)
		return false;
	if (q->count == Q_SLOTS) {
		/* The ring is full: wait for its oldest job (or give it up). */
		if (!spyre_stream_wait_done(s, q->pend[q->head].point, &done))
			harvest_locked(s, done);
		if (q->count == Q_SLOTS) {
			q->head = (q->head + 1) % Q_SLOTS;
			q->count--;
			pthread_mutex_lock(&buf.lock);
			buf.ev.not_run++;
			pthread_mutex_unlock(&buf.lock);
		}
	}
	slot = job_slot(q);
	ts = (volatile uint64_t *)q->bo.map + 2 * slot;
	ts[0] = TS_UNWRITTEN;
	ts[1] = TS_UNWRITTEN;
	spyre_prep_timestamp(pre, SPYRE_AS_VIRT, q->bo.va + 16ull * slot);
	spyre_prep_timestamp(post, SPYRE_AS_VIRT, q->bo.va + 16ull * slot + 8);
	return true;
}

/* The job bracketed by job_begin() was submitted as stream point @point at @t. */
static void job_submitted(struct spyre_stream *s, const struct spyre_job *job, uint64_t point,
			  uint64_t t)
{
	struct spyre_trace_queue *q = s->trace;
	struct pend *p = &q->pend[job_slot(q)];
	uint32_t depth;
	struct hev *h;

	memset(p, 0, sizeof(*p));
	p->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
	p->point = point;
	p->t_submit = t;
	p->packets = job->count;
	p->what = T.what ? T.what : job->what;
	sync_stack();
	depth = T.depth < MAX_DEPTH ? T.depth : MAX_DEPTH;
	if (depth) {
		memcpy(p->span, T.stack[depth - 1].name, NAME_LEN);
		p->span_id = T.stack[depth - 1].id;
		memcpy(p->step, T.stack[0].name, NAME_LEN);
		p->step_id = T.stack[0].id;
	}
	p->bytes = job->bytes;
	p->rec = job->record;
	p->core_mask = job->record ? job->core_mask : 0;
	if (!q->first_point)
		q->first_point = p->point;
	q->last_point = p->point;
	q->count++;
	T.jobs++;
	T.last_queue = s->queue;
	T.last_point = p->point;

	pthread_mutex_lock(&buf.lock);
	p->tid = thread_locked();
	if ((h = hev_new_locked(t))) {
		h->kind = H_SUBMIT;
		h->id = p->id;
		h->queue = s->queue;
		h->point = p->point;
		h->packets = job->count;
	}
	pthread_mutex_unlock(&buf.lock);
}

static void harvest_locked(struct spyre_stream *s, uint64_t done)
{
	struct spyre_trace_queue *q = s->trace;
	struct events *e = &buf.ev;
	uint64_t t_seen;

	if (!q || !q->count || q->pend[q->head].point > done)
		return;
	t_seen = spyre_now_ns();
	pthread_mutex_lock(&buf.lock);
	while (q->count && q->pend[q->head].point <= done) {
		const struct pend *p = &q->pend[q->head];
		volatile const uint64_t *ts = (volatile const uint64_t *)q->bo.map + 2 * q->head;
		uint64_t b = ts[0], end = ts[1];
		struct jev *j;

		q->head = (q->head + 1) % Q_SLOTS;
		q->count--;
		if (!buf.collecting)
			continue;
		if (b == TS_UNWRITTEN || (p->rec && p->rec->status == SPYRE_RECORD_UNWRITTEN)) {
			e->not_run++;		/* failed before it ran */
			continue;
		}
		if (e->njev >= MAX_JOBS || GROW(e->jev, e->njev, e->capjev)) {
			e->dropped++;
			continue;
		}
		j = &e->jev[e->njev++];
		memset(j, 0, sizeof(*j));
		j->p = *p;
		j->lane = q->lane;
		j->dev = e->lanes[q->lane].dev;
		j->t_seen = t_seen;
		j->d_begin = b;
		j->d_end = end;
		if (p->rec) {
			j->launch = true;
			j->rec = *p->rec;
		}
	}
	pthread_mutex_unlock(&buf.lock);
}

static void stream_gone_locked(struct spyre_stream *s)
{
	if (!s->trace)
		return;
	harvest_locked(s, UINT64_MAX);
	queue_free_locked(s);
}

static uint32_t packet_locked(struct spyre_stream *s, uint64_t job_seq, uint32_t packet)
{
	const struct spyre_trace_queue *q = s->trace;

	if (!q || !q->first_point || job_seq < q->first_point || job_seq > q->last_point)
		return packet;
	return packet ? packet - 1 : 0;
}

/* What the runtime calls while tracing (internal.h). */
static const struct spyre_trace_hooks hooks = {
	.call_begin = call_begin,
	.call_end = call_end,
	.job_begin = job_begin,
	.job_submitted = job_submitted,
	.harvest = harvest_locked,
	.stream_gone = stream_gone_locked,
	.packet = packet_locked,
};

/* ---- the file ------------------------------------------------------------------------ */

/* Bytes of the valid UTF-8 sequence at @p, or 0. */
static int utf8_len(const unsigned char *p)
{
	unsigned int c = p[0], lo = 0x80, hi = 0xbf;
	int n, i;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/* @s as a JSON string: escaped, invalid UTF-8 bytes as '?'. */
static void put_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	int n;

	fputc('"', f);
	while (*p) {
		if (*p == '"' || *p == '\\') {
			fputc('\\', f);
			fputc(*p++, f);
		} else if (*p < 0x20) {
			fprintf(f, "\\u%04x", *p++);
		} else if (*p < 0x80) {
			fputc(*p++, f);
		} else if ((n = utf8_len(p))) {
			fwrite(p, 1, (size_t)n, f);
			p += n;
		} else {
			fputc('?', f);
			p++;
		}
	}
	fputc('"', f);
}

/* A time in host ns as microseconds since the trace's start, to the ns. */
static void put_us(FILE *f, uint64_t t, uint64_t t_start)
{
	uint64_t d = t > t_start ? t - t_start : 0;

	fprintf(f, "%" PRIu64 ".%03u", d / 1000, (unsigned int)(d % 1000));
}

static void put_dur(FILE *f, uint64_t d)
{
	fprintf(f, "%" PRIu64 ".%03u", d / 1000, (unsigned int)(d % 1000));
}

static int host_pid(void)
{
	return (int)getpid();
}

static int dev_pid(const struct events *e, uint32_t dev)
{
	return DEV_PID_BASE + (int)e->devs[dev].index;
}

/* Lanes of a device: queue lane L has "jobs" 2L and "device clock" 2L+1; core c 100000 + c. */
#define TID_JOBS(l)	(2 * (int)(l) + 2)
#define TID_CLOCK(l)	(2 * (int)(l) + 3)
#define TID_CORE(c)	(100000 + (int)(c))

static void put_meta(FILE *f, const char *what, int pid, int tid, const char *key, const char *name,
		     long long sort, long *count)
{
	fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d", what, pid);
	if (tid >= 0)
		fprintf(f, ",\"tid\":%d", tid);
	fprintf(f, ",\"args\":{\"%s\":", key);
	if (name)
		put_str(f, name);
	else
		fprintf(f, "%lld", sort);
	fputs("}}", f);
	(*count)++;
}

static int cmp_submit(const void *a, const void *b)
{
	const struct jev *x = *(struct jev *const *)a, *y = *(struct jev *const *)b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->p.t_submit != y->p.t_submit)
		return x->p.t_submit < y->p.t_submit ? -1 : 1;
	return x->p.id < y->p.id ? -1 : x->p.id > y->p.id;
}

/*
 * Number the runs of each device's clock: in submit order, a job submitted
 * after the host saw every earlier job of its device done found the device
 * idle, so on one clock it starts after all of their ends; starting before
 * one of them, it runs on a clock that restarted (a reset in between).
 */
static void clock_epochs(struct jev **order, size_t n)
{
	uint64_t seen = 0, dend = 0;
	uint32_t epoch = 0;
	size_t k;

	qsort(order, n, sizeof(*order), cmp_submit);
	for (k = 0; k < n; k++) {
		struct jev *j = order[k];

		if (k && j->dev != order[k - 1]->dev) {
			seen = dend = 0;
			epoch = 0;
		} else if (k && seen <= j->p.t_submit && j->d_begin < dend) {
			epoch++;
			dend = 0;
		}
		j->epoch = epoch;
		if (j->t_seen > seen)
			seen = j->t_seen;
		if (j->d_end != TS_UNWRITTEN && j->d_end > dend)
			dend = j->d_end;
		if (j->d_begin > dend)
			dend = j->d_begin;
	}
}

static int cmp_job(const void *a, const void *b)
{
	const struct jev *x = *(struct jev *const *)a, *y = *(struct jev *const *)b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->epoch != y->epoch)
		return x->epoch < y->epoch ? -1 : 1;
	if (x->d_begin != y->d_begin)
		return x->d_begin < y->d_begin ? -1 : 1;
	return x->p.id < y->p.id ? -1 : x->p.id > y->p.id;
}

struct devsum {
	int64_t off_min, off_max;
	uint64_t late_ends, jobs;
};

/*
 * Put every job of @e on the host clock and lay it out: the offset per
 * device and clock epoch by causality (the file comment), a LAUNCH for its modeled time
 * from max(its aligned start, the end of the previous job of its queue, the
 * end of the device's previous LAUNCH: the engine runs one at a time).
 */
static int layout(struct events *e, struct jev **order, struct devsum *sum)
{
	uint64_t *lane_end = calloc(e->nlanes + 1, sizeof(*lane_end));
	size_t i, g0, g1, nb, b, k;
	int64_t *bm = NULL;

	if (!lane_end)
		return -ENOMEM;
	for (i = 0; i < e->njev; i++)
		order[i] = &e->jev[i];
	for (i = 0; i < e->ndevs; i++) {
		sum[i].off_min = INT64_MAX;
		sum[i].off_max = INT64_MIN;
	}
	clock_epochs(order, e->njev);
	qsort(order, e->njev, sizeof(*order), cmp_job);
	for (g0 = 0; g0 < e->njev; g0 = g1) {
		uint64_t base = order[g0]->d_begin, engine_end = 0;
		struct devsum *ds = &sum[order[g0]->dev];

		for (g1 = g0; g1 < e->njev && order[g1]->dev == order[g0]->dev &&
		     order[g1]->epoch == order[g0]->epoch; g1++)
			;
		nb = (size_t)((order[g1 - 1]->d_begin - base) / ALIGN_WINDOW_NS) + 1;
		free(bm);
		bm = malloc(nb * sizeof(*bm));
		if (!bm) {
			free(lane_end);
			return -ENOMEM;
		}
		for (b = 0; b < nb; b++)
			bm[b] = INT64_MIN;
		for (k = g0; k < g1; k++) {
			int64_t lo = (int64_t)(order[k]->p.t_submit - order[k]->d_begin);

			b = (size_t)((order[k]->d_begin - base) / ALIGN_WINDOW_NS);
			if (lo > bm[b])
				bm[b] = lo;
		}
		for (k = g0; k < g1; k++) {
			struct jev *j = order[k];
			int64_t off;
			uint64_t a;

			b = (size_t)((j->d_begin - base) / ALIGN_WINDOW_NS);
			off = bm[b];
			if (b > 0 && bm[b - 1] > off)
				off = bm[b - 1];
			if (b + 1 < nb && bm[b + 1] > off)
				off = bm[b + 1];
			j->offset = off;
			if (off < ds->off_min)
				ds->off_min = off;
			if (off > ds->off_max)
				ds->off_max = off;
			ds->jobs++;
			if (j->d_end != TS_UNWRITTEN && (int64_t)j->d_end + off > (int64_t)j->t_seen)
				ds->late_ends++;
			a = (uint64_t)((int64_t)j->d_begin + off);
			if (a < lane_end[j->lane])
				a = lane_end[j->lane];
			if (j->launch && a < engine_end)
				a = engine_end;
			j->s = a;
			if (j->launch)
				j->d = j->rec.device_ns;
			else
				j->d = j->d_end != TS_UNWRITTEN && j->d_end > j->d_begin ? j->d_end - j->d_begin : 0;
			lane_end[j->lane] = j->s + j->d;
			if (j->launch)
				engine_end = j->s + j->d;
		}
	}
	free(bm);
	free(lane_end);
	return 0;
}

static void put_job(FILE *f, const struct events *e, const struct jev *j, long *count)
{
	const struct tlane *l = &e->lanes[j->lane];
	int pid = dev_pid(e, l->dev);
	const char *name = j->launch ? (j->p.span[0] ? j->p.span : "launch") : j->p.what;
	uint64_t t0 = e->t_start, measured = 0;
	uint32_t c, ncores = e->devs[l->dev].num_cores;

	if (j->d_end != TS_UNWRITTEN && j->d_end > j->d_begin)
		measured = j->d_end - j->d_begin;
	fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"job\",\"name\":");
	put_str(f, name);
	fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":", pid, TID_JOBS(j->lane));
	put_us(f, j->s, t0);
	fputs(",\"dur\":", f);
	put_dur(f, j->d);
	fprintf(f, ",\"args\":{\"id\":%" PRIu64 ",\"what\":", j->p.id);
	put_str(f, j->p.what);
	fprintf(f, ",\"queue\":%u,\"stream\":%" PRIu64 ",\"point\":%" PRIu64 ",\"packets\":%u,\"bytes\":%" PRIu64,
		l->queue, l->stream_id, j->p.point, j->p.packets, j->p.bytes);
	if (j->p.span_id) {
		fputs(",\"span\":", f);
		put_str(f, j->p.span);
		fprintf(f, ",\"span_id\":%" PRIu64 ",\"step\":", j->p.span_id);
		put_str(f, j->p.step);
		fprintf(f, ",\"step_id\":%" PRIu64, j->p.step_id);
	}
	fputs(",\"submit_us\":", f);
	put_us(f, j->p.t_submit, t0);
	fputs(",\"seen_done_us\":", f);
	put_us(f, j->t_seen, t0);
	fprintf(f, ",\"device_clock_begin_ns\":%" PRIu64, j->d_begin);
	if (j->d_end != TS_UNWRITTEN)
		fprintf(f, ",\"device_clock_end_ns\":%" PRIu64 ",\"measured_ns\":%" PRIu64, j->d_end, measured);
	else
		fputs(",\"failed\":true", f);
	fprintf(f, ",\"clock_offset_ns\":%" PRId64, j->offset);
	if (j->launch) {
		uint64_t busy = 0;

		for (c = 0; c < SPYRE_MAX_CORES; c++)
			busy += j->rec.core_busy_cycles[c];
		fprintf(f, ",\"device_ns\":%" PRIu64 ",\"device_cycles\":%" PRIu64 ",\"insns\":%" PRIu64
			",\"cores_run\":%u,\"core_mask\":\"0x%x\",\"utilization\":%.4f,\"status\":%u,\"fault\":",
			(uint64_t)j->rec.device_ns, (uint64_t)j->rec.device_cycles, (uint64_t)j->rec.insns,
			j->rec.cores_run, j->p.core_mask,
			j->rec.cores_run && j->rec.device_cycles ?
			(double)busy / ((double)j->rec.cores_run * (double)j->rec.device_cycles) : 0.0,
			j->rec.status);
		put_str(f, spyre_engine_fault_name(j->rec.status));
	}
	fputs("}}", f);
	/* the arrow from the submit */
	fprintf(f, ",\n{\"ph\":\"f\",\"cat\":\"flow\",\"name\":\"submit\",\"id\":%" PRIu64
		",\"pid\":%d,\"tid\":%d,\"ts\":", j->p.id, pid, TID_JOBS(j->lane));
	put_us(f, j->s, t0);
	fputs("}", f);
	*count += 2;
	if (j->d_end != TS_UNWRITTEN) {
		fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"device\",\"name\":");
		put_str(f, name);
		fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":", pid, TID_CLOCK(j->lane));
		put_us(f, (uint64_t)((int64_t)j->d_begin + j->offset), t0);
		fputs(",\"dur\":", f);
		put_dur(f, measured);
		fprintf(f, ",\"args\":{\"job\":%" PRIu64 "}}", j->p.id);
		(*count)++;
	}
	if (!j->launch)
		return;
	for (c = 0; c < ncores && c < SPYRE_MAX_CORES; c++) {
		uint64_t busy = 0;

		if (!(j->p.core_mask & (1u << c)))
			continue;
		if (j->rec.device_cycles)
			busy = (uint64_t)((unsigned __int128)j->rec.core_busy_cycles[c] * j->d /
					  j->rec.device_cycles);
		if (busy > j->d)
			busy = j->d;
		if (busy) {
			fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"core\",\"name\":");
			put_str(f, name);
			fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":", pid, TID_CORE(c));
			put_us(f, j->s, t0);
			fputs(",\"dur\":", f);
			put_dur(f, busy);
			fprintf(f, ",\"args\":{\"job\":%" PRIu64 ",\"busy_cycles\":%" PRIu64 "}}", j->p.id,
				(uint64_t)j->rec.core_busy_cycles[c]);
			(*count)++;
		}
		if (busy < j->d) {
			fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"core\",\"name\":\"idle\",\"pid\":%d,\"tid\":%d,\"ts\":",
				pid, TID_CORE(c));
			put_us(f, j->s + busy, t0);
			fputs(",\"dur\":", f);
			put_dur(f, j->d - busy);
			fprintf(f, ",\"args\":{\"job\":%" PRIu64 "}}", j->p.id);
			(*count)++;
		}
	}
}

static void put_host(FILE *f, const struct events *e, const struct hev *h, long *count)
{
	uint64_t t0 = e->t_start;

	if (h->kind == H_SUBMIT) {
		fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"submit\",\"name\":\"submit\",\"pid\":%d,"
			"\"tid\":%d,\"ts\":", host_pid(), h->tid);
		put_us(f, h->t0, t0);
		fprintf(f, ",\"args\":{\"job\":%" PRIu64 ",\"queue\":%u,\"point\":%" PRIu64 ",\"packets\":%u}}",
			h->id, h->queue, h->point, h->packets);
		fprintf(f, ",\n{\"ph\":\"s\",\"cat\":\"flow\",\"name\":\"submit\",\"id\":%" PRIu64
			",\"pid\":%d,\"tid\":%d,\"ts\":", h->id, host_pid(), h->tid);
		put_us(f, h->t0, t0);
		fputs("}", f);
		*count += 2;
		return;
	}
	fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", h->kind == H_SPAN ? "span" : "api");
	put_str(f, h->kind == H_SPAN ? h->name : h->api);
	fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":", host_pid(), h->tid);
	put_us(f, h->t0, t0);
	fputs(",\"dur\":", f);
	put_dur(f, h->t1 > h->t0 ? h->t1 - h->t0 : 0);
	if (h->kind == H_SPAN) {
		fprintf(f, ",\"args\":{\"id\":%" PRIu64 ",\"depth\":%u}}", h->id, h->depth);
	} else {
		fprintf(f, ",\"args\":{\"ret\":%d,\"jobs\":%" PRIu64, h->ret, h->jobs);
		if (h->jobs)
			fprintf(f, ",\"queue\":%u,\"point\":%" PRIu64, h->queue, h->point);
		if (h->k0)
			fprintf(f, ",\"%s\":%" PRIu64, h->k0, h->v0);
		if (h->k1)
			fprintf(f, ",\"%s\":%" PRIu64, h->k1, h->v1);
		fputs("}}", f);
	}
	(*count)++;
}

/* Write @e to @f as a trace; the number of events, or a negative status. */
static long write_trace(FILE *f, struct events *e)
{
	struct jev **order = calloc(e->njev + 1, sizeof(*order));
	struct devsum *sum = calloc(e->ndevs + 1, sizeof(*sum));
	long count = 0;
	size_t i;
	uint32_t c;
	char name[160];

	if (!order || !sum || layout(e, order, sum)) {
		free(order);
		free(sum);
		return -ENOMEM;
	}
	fprintf(f, "{\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"producer\":\"libspyre %d.%d\","
		"\"host_clock\":\"CLOCK_MONOTONIC, ts 0 = spyre_trace_start()\",\"trace_start_ns\":%" PRIu64
		",\"dropped_events\":%" PRIu64 ",\"jobs_not_run\":%" PRIu64,
		LIBSPYRE_VERSION_MAJOR, LIBSPYRE_VERSION_MINOR, e->t_start, e->dropped, e->not_run);
	for (i = 0; i < e->ndevs; i++)
		if (sum[i].jobs)
			fprintf(f, ",\"spyre%u_clock_offset_ns\":\"%" PRId64 "..%" PRId64 "\""
				",\"spyre%u_jobs_ending_after_seen\":%" PRIu64, e->devs[i].index, sum[i].off_min,
				sum[i].off_max, e->devs[i].index, sum[i].late_ends);
	fputs("},\n\"traceEvents\":[\n", f);
	fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":", host_pid());
	put_str(f, HOST_PID_NAME);
	fputs("}}", f);
	count++;
	put_meta(f, "process_sort_index", host_pid(), -1, "sort_index", NULL, 0, &count);
	for (i = 0; i < e->nthr; i++) {
		snprintf(name, sizeof(name), "thread %d%s%s", e->thr[i].tid, e->thr[i].name[0] ? " " : "",
			 e->thr[i].name);
		put_meta(f, "thread_name", host_pid(), e->thr[i].tid, "name", name, 0, &count);
		put_meta(f, "thread_sort_index", host_pid(), e->thr[i].tid, "sort_index", NULL, (long long)i,
			 &count);
	}
	for (i = 0; i < e->ndevs; i++) {
		int pid = DEV_PID_BASE + (int)e->devs[i].index;

		snprintf(name, sizeof(name), "spyre%u %s (%s): device time on the host clock",
			 e->devs[i].index, e->devs[i].devnode, e->devs[i].pci);
		put_meta(f, "process_name", pid, -1, "name", name, 0, &count);
		put_meta(f, "process_sort_index", pid, -1, "sort_index", NULL, 1 + (long long)e->devs[i].index,
			 &count);
		for (c = 0; c < e->devs[i].num_cores && c < SPYRE_MAX_CORES; c++) {
			snprintf(name, sizeof(name), "core %u", c);
			put_meta(f, "thread_name", pid, TID_CORE(c), "name", name, 0, &count);
			put_meta(f, "thread_sort_index", pid, TID_CORE(c), "sort_index", NULL, TID_CORE(c), &count);
		}
	}
	for (i = 0; i < e->nlanes; i++) {
		const struct tlane *l = &e->lanes[i];
		int pid = dev_pid(e, l->dev);

		snprintf(name, sizeof(name), "queue %u (stream %" PRIu64 "): jobs, LAUNCH = modeled time",
			 l->queue, l->stream_id);
		put_meta(f, "thread_name", pid, TID_JOBS(i), "name", name, 0, &count);
		put_meta(f, "thread_sort_index", pid, TID_JOBS(i), "sort_index", NULL, TID_JOBS(i), &count);
		snprintf(name, sizeof(name), "queue %u (stream %" PRIu64 "): device clock", l->queue,
			 l->stream_id);
		put_meta(f, "thread_name", pid, TID_CLOCK(i), "name", name, 0, &count);
		put_meta(f, "thread_sort_index", pid, TID_CLOCK(i), "sort_index", NULL, TID_CLOCK(i), &count);
	}
	for (i = 0; i < e->nhev; i++)
		put_host(f, e, &e->hev[i], &count);
	for (i = 0; i < e->njev; i++)
		put_job(f, e, order[i], &count);
	fputs("\n]}\n", f);
	free(order);
	free(sum);
	return count;
}

static int stop_locked(void)
{
	struct spyre_stream **list = NULL;
	struct events ev;
	size_t i, n = 0;
	long count;
	int ret;

	/* No new job is traced from here on; every traced stream is let go of. */
	pthread_mutex_lock(&reg_lock);
	spyre_tracer_set(NULL);
	if (nreg)
		list = malloc(nreg * sizeof(*list));
	if (list) {
		n = nreg;
		for (i = 0; i < n; i++) {
			list[i] = reg[i];
			pthread_mutex_lock(&reg[i]->dev->lock);
			reg[i]->refs++;
			pthread_mutex_unlock(&reg[i]->dev->lock);
		}
		nreg = 0;
	}
	pthread_mutex_unlock(&reg_lock);
	for (i = 0; i < n; i++) {
		struct spyre_stream *s = list[i];

		pthread_mutex_lock(&s->lock);
		if (s->trace) {
			uint64_t done = 0;

			if (spyre_stream_wait_done(s, s->trace->last_point, &done))
				done = 0;
			harvest_locked(s, done);
			queue_free_locked(s);
		}
		pthread_mutex_unlock(&s->lock);
		spyre_stream_put(s);
	}
	free(list);

	pthread_mutex_lock(&buf.lock);
	buf.collecting = false;
	ev = buf.ev;
	memset(&buf.ev, 0, sizeof(buf.ev));
	pthread_mutex_unlock(&buf.lock);

	count = write_trace(trace_file, &ev);
	events_free(&ev);
	ret = ferror(trace_file) ? -EIO : 0;
	if (fclose(trace_file) && !ret)
		ret = -errno;
	trace_file = NULL;
	tracing = false;
	if (count < 0)
		return spyre_error((int)count, "writing the trace %s failed", trace_path);
	if (ret)
		return spyre_error(ret, "writing the trace %s failed", trace_path);
	return count > INT32_MAX ? INT32_MAX : (int)count;
}

SPYRE_EXPORT int spyre_trace_stop(void)
{
	int ret;

	pthread_mutex_lock(&ctl_lock);
	if (!tracing)
		ret = spyre_error(-EINVAL, "spyre_trace_stop: no trace is being recorded");
	else
		ret = stop_locked();
	pthread_mutex_unlock(&ctl_lock);
	return ret;
}

/* A forked child records nothing and writes no file (its parent does). */
static void trace_atfork_child(void)
{
	pthread_mutex_init(&ctl_lock, NULL);
	pthread_mutex_init(&reg_lock, NULL);
	pthread_mutex_init(&buf.lock, NULL);
	spyre_tracer_set(NULL);
	buf.collecting = false;
	tracing = false;
	trace_file = NULL;
	nreg = 0;
}

static void trace_atexit(void)
{
	pthread_mutex_lock(&ctl_lock);
	if (tracing && stop_locked() < 0)
		fprintf(stderr, "libspyre: %s\n", spyre_last_error());
	pthread_mutex_unlock(&ctl_lock);
}

SPYRE_EXPORT int spyre_trace_start(const char *path)
{
	FILE *f;
	int ret = 0;

	if (!path || !*path)
		return spyre_error(-EINVAL, "spyre_trace_start: no file name");
	pthread_mutex_lock(&ctl_lock);
	if (tracing) {
		ret = spyre_error(-EBUSY, "spyre_trace_start: a trace to %s is being recorded", trace_path);
		goto out;
	}
	f = fopen(path, "w");
	if (!f) {
		ret = spyre_error(-errno, "spyre_trace_start: cannot create %s", path);
		goto out;
	}
	if (!atexit_set) {
		if (atexit(trace_atexit) || pthread_atfork(NULL, NULL, trace_atfork_child)) {
			fclose(f);
			ret = spyre_error(-ENOMEM, "spyre_trace_start: cannot register the exit handler");
			goto out;
		}
		atexit_set = true;
	}
	trace_file = f;
	snprintf(trace_path, sizeof(trace_path), "%s", path);
	pthread_mutex_lock(&buf.lock);
	events_free(&buf.ev);
	buf.ev.t_start = spyre_now_ns();
	buf.collecting = true;
	__atomic_store_n(&session, session + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&buf.lock);
	tracing = true;
	pthread_mutex_lock(&reg_lock);
	spyre_tracer_set(&hooks);
	pthread_mutex_unlock(&reg_lock);
out:
	pthread_mutex_unlock(&ctl_lock);
	return ret;
}

/* SPYRE_TRACE=FILE in the environment: trace the whole process into FILE. */
__attribute__((constructor)) static void trace_from_env(void)
{
	const char *p = getenv("SPYRE_TRACE");

	if (p && *p && spyre_trace_start(p))
		fprintf(stderr, "libspyre: SPYRE_TRACE=%s: %s\n", p, spyre_last_error());
}
