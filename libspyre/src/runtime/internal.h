/* SPDX-License-Identifier: MIT */
#ifndef LIBSPYRE_INTERNAL_H
#define LIBSPYRE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "spyre_accel.h"
#include "spyre_hw.h"
#include "spyre_isa.h"

#include "spyre.h"
#include "common.h"

#define SPYRE_NCLASSES		14	/* 128 B << 0 .. 128 B << 13 = 1 MiB */
#define SPYRE_CHUNK_SIZE	(2u << 20)
#define SPYRE_STAGING_SIZE	(4u << 20)

/* One buffer object of the driver. */
struct spyre_buf {
	uint32_t handle;
	uint64_t va;
	uint64_t size;
	void *map;		/* host BOs: the CPU mapping */
	bool exported;		/* shared with spyre_ipc_export(): never cached when freed */
};

/* A chunk of device memory carved into blocks of one size class. */
struct spyre_chunk {
	struct spyre_buf bo;
	uint32_t used;		/* blocks handed out */
	struct spyre_chunk *next;
};

/* One live allocation, for spyre_free() and pointer attributes. */
struct spyre_alloc {
	uint64_t base;		/* device address */
	uint64_t span;		/* bytes reserved for it */
	uint64_t size;		/* bytes requested */
	uint32_t type;		/* enum spyre_memory_type */
	int cls;		/* size class, or -1 for its own BO */
	struct spyre_chunk *chunk;
	struct spyre_buf bo;	/* own BO (cls == -1) */
};

struct spyre_free_block {
	uint64_t va;
	struct spyre_chunk *chunk;
};

/*
 * Locks nest only in these orders: staging_lock, a stream's lock, a
 * program's lock, the device's lock; internal_lock, the device's lock. The
 * device's lock is innermost: nothing else is taken under it. trace.c's
 * locks (a leaf after a stream's or a program's lock) are in its comment.
 */
struct spyre_device {
	int fd;
	struct spyre_device_props props;

	/* Protects everything below, up to @staging_lock */
	pthread_mutex_t lock;
	struct spyre_alloc *allocs;	/* sorted by base */
	size_t nallocs, cap_allocs;
	struct spyre_chunk *chunks[SPYRE_NCLASSES];
	struct spyre_free_block *free[SPYRE_NCLASSES];
	size_t nfree[SPYRE_NCLASSES], cap_free[SPYRE_NCLASSES];
	size_t nblocks[SPYRE_NCLASSES];	/* blocks of all chunks of the class */
	struct spyre_buf *large_cache;	/* freed large BOs */
	size_t nlarge, cap_large;
	struct spyre_mem_stats stats;
	/* memset sources, stick v holds byte v: created on first use, read-only after */
	struct spyre_buf values;
	/*
	 * Live streams. A stream is freed when its last reference is dropped:
	 * the list's (dropped by spyre_stream_destroy()) or one a device-wide
	 * walk took with spyre_stream_next() while it uses it.
	 */
	struct spyre_stream **streams;
	size_t nstreams;
	uint64_t next_stream_id;

	/*
	 * Protects @staging, the bounce buffer for pageable host memory; held
	 * for a whole staged copy, as the buffer is refilled chunk by chunk.
	 */
	pthread_mutex_t staging_lock;
	struct spyre_buf staging;

	/*
	 * Protects @internal, the stream of synchronous operations
	 * (spyre_internal_sync()): created on first use, replaced after a failure.
	 */
	pthread_mutex_t internal_lock;
	struct spyre_stream *internal;
};

/*
 * A stream's launches (launch.c), in one host buffer: a ring of
 * SPYRE_ARG_SLOTS argument blocks of SPYRE_ARG_SLOT_BYTES (SPYRE_ARG_WORDS u64
 * slot addresses and scalars at the most), then, at SPYRE_ARG_RECORDS_OFF, a
 * ring of SPYRE_ARG_RECORDS launch records the device writes. A launch with
 * unchanged bindings reuses the last argument block, but every launch takes a
 * record of its own: the records of done launches are folded into the
 * stream's totals (struct spyre_stream.stats) before a record is reused.
 */
#define SPYRE_ARG_SLOTS		32
#define SPYRE_ARG_WORDS		SPYRE_LAUNCH_MAX_ARGS
#define SPYRE_ARG_SLOT_BYTES	(SPYRE_ARG_WORDS * 8)
/* Two jobs of a graph replay's launches (graph.c): the host submits a job while the card runs the one before. */
#define SPYRE_ARG_RECORDS	512
#define SPYRE_ARG_RECORDS_OFF	(SPYRE_ARG_SLOTS * SPYRE_ARG_SLOT_BYTES)
#define SPYRE_ARG_BUF_BYTES	\
	(SPYRE_ARG_RECORDS_OFF + SPYRE_ARG_RECORDS * sizeof(struct spyre_launch_record))

static_assert(SPYRE_ARG_SLOT_BYTES % 8 == 0 && SPYRE_ARG_RECORDS_OFF % 8 == 0 &&
	      sizeof(struct spyre_launch_record) % 8 == 0,
	      "every argument block and launch record is 8-byte aligned");

/*
 * The status a launch record holds until the device writes it: no engine
 * fault cause. A record that still holds it once its launch's job is done
 * belongs to a launch that never ran (its job failed before it, or was reset).
 */
#define SPYRE_RECORD_UNWRITTEN 0xffffffffu
static_assert(SPYRE_ENGINE_FAULT_COUNT < SPYRE_RECORD_UNWRITTEN, "no engine fault looks unwritten");

#define SPYRE_MAX_WAITS 16

/*
 * Recent jobs of a stream whose packets have names (graph replays): the
 * fault report of a failed one names its packet's node. A failure is
 * reported by the stream's next SUBMIT or synchronize; one more than this
 * many named jobs later is reported without the name.
 */
#define SPYRE_NAMED_JOBS 64

/*
 * What the packets of a job are, for the fault report of a failed job (a
 * graph exec's, graph.c): shared by the jobs that submit them, referenced by
 * each stream entry that may report one (atomic @refs), released by the last.
 */
struct spyre_job_names {
	unsigned int refs;
	/* Into @buf: what @packet of the job with @cookie (its submitter's) is, e.g. "graph node 7 (launch)". */
	void (*describe)(const struct spyre_job_names *n, uint64_t cookie, uint32_t packet,
			 char *buf, size_t size);
	void (*release)(struct spyre_job_names *n);
};

static inline void spyre_job_names_get(struct spyre_job_names *n)
{
	__atomic_add_fetch(&n->refs, 1, __ATOMIC_RELAXED);
}

static inline void spyre_job_names_put(struct spyre_job_names *n)
{
	if (n && !__atomic_sub_fetch(&n->refs, 1, __ATOMIC_ACQ_REL))
		n->release(n);
}

struct spyre_callback {
	void (*fn)(void *arg);
	void *arg;
	uint64_t point;			/* runs after this timeline point */
	struct spyre_callback *next;
};

/*
 * A stream's timeline syncobj, whose point n is the end of the stream's n-th
 * job. Referenced by the stream, by each event last recorded on it and by
 * each pending wait for one of its points (struct spyre_stream.wait_tl): an
 * event outlives its stream, and the handle goes back to DRM, which hands
 * handles out lowest-free first, only when nothing can wait on it any more.
 */
struct spyre_timeline {
	int fd;				/* the device's */
	uint32_t handle;
	unsigned int refs;		/* atomic */
};

/* A new reference to @tl. */
struct spyre_timeline *spyre_timeline_get(struct spyre_timeline *tl);
/* Drop a reference to @tl (NULL: none); the last destroys the syncobj. */
void spyre_timeline_put(struct spyre_timeline *tl);

struct spyre_stream {
	struct spyre_device *dev;
	uint64_t id;			/* unique in the device's lifetime */
	uint32_t queue;
	struct spyre_timeline *tl;	/* referenced */
	unsigned int refs;		/* under dev->lock: the list's, and walks' */
	/* Protects everything below */
	pthread_mutex_t lock;
	uint64_t point;			/* last point handed out */
	struct drm_spyre_sync waits[SPYRE_MAX_WAITS];	/* for the next job */
	struct spyre_timeline *wait_tl[SPYRE_MAX_WAITS];	/* each wait's, referenced */
	uint32_t nwaits;
	uint64_t errors_seen;
	int poisoned;
	char poison[256];
	/* host callbacks */
	pthread_t thread;
	bool thread_started, quit;
	pthread_cond_t cond;
	struct spyre_callback *cb_head, *cb_tail;
	uint64_t cb_done;		/* callbacks finished (count) */
	uint64_t cb_queued;
	/* launch.c's state, released with the stream by @launch_release; NULL until the first launch */
	struct spyre_launch_state *launch;
	void (*launch_release)(struct spyre_device *dev, struct spyre_launch_state *launch);
	/*
	 * Totals of spyre_stream_get_stats() (@size unused): bytes as work is
	 * enqueued (stream.c, launch.c), launches as their records are folded
	 * (launch.c).
	 */
	struct spyre_stream_stats stats;
	/* The graph this stream captures (spyre_stream_begin_capture()), NULL when not capturing */
	struct spyre_graph *capture;
	/* Named jobs (graph replays), a ring: the stream point of each, 0 if free */
	struct {
		uint64_t point;
		struct spyre_job_names *names;	/* referenced */
		uint64_t cookie;
	} named[SPYRE_NAMED_JOBS];
	uint32_t named_next;
	/* The tracer's hooks and state for this stream; both NULL unless traced (spyre_trace_start()) */
	const struct spyre_trace_hooks *tracer;
	struct spyre_trace_queue *trace;
	/*
	 * A batch (spyre_stream_batch_begin(), common.h): @batch counts the
	 * begins not ended yet by the thread holding it (the stream is on that
 * thread's list, stream.c). Meanwhile its jobs are appended to @pending, one
	 * job of up to DRM_SPYRE_MAX_JOB_PACKETS packets that took stream point
	 * s->point at its first packet, submitted when full, before a job that
	 * cannot join it, before a host wait for it, after a cross-device record,
 * before another thread's job, and at the batch's end.
	 * @pending is allocated on first use and kept with the stream.
	 */
	unsigned int batch;
	struct spyre_batch *pending;
	/* The next stream the batching thread holds a batch of (stream.c's thread-local list) */
	struct spyre_stream *batch_next;
	/* A pending job's SUBMIT failed in the batch: the status (0: none) and detail its end returns */
	int batch_status;
	char batch_detail[256];
};


/*
 * patch.c: the program container, checked once, and relocation patching
 * (host-tested). The checked view (isa/spyre_isa_codec.h) is what a load
 * reads its counts and tables from.
 */
struct spyre_reloc_site {
	uint32_t off;		/* byte offset of the 8-byte operand in the image */
	uint32_t sym;
	uint64_t addend;
};

struct spyre_prog_sym;
struct spyre_prog_view;

/* Check @image's container (the ISA library's check) into *@v; 0, or -EINVAL with a detail. */
int spyre_image_check(const void *image, size_t size, struct spyre_prog_view *v);
/* The symbols and relocation sites of checked @v, malloc'd; 0, or -E2BIG / -ENOMEM with a detail. */
int spyre_image_tables(const struct spyre_prog_view *v, struct spyre_prog_sym **syms,
		       struct spyre_reloc_site **relocs);
size_t spyre_patch_apply(void *image, const struct spyre_reloc_site *sites, uint32_t n,
			 const uint64_t *slots, const uint64_t *prev);

/* memory.c */
int spyre_bo_new(struct spyre_device *dev, uint64_t size, uint32_t flags, struct spyre_buf *bo);
void spyre_bo_del(struct spyre_device *dev, struct spyre_buf *bo);
const struct spyre_alloc *spyre_alloc_find_locked(struct spyre_device *dev, uint64_t ptr);
const struct spyre_alloc *spyre_alloc_find_host_locked(struct spyre_device *dev, const void *p);
void spyre_memory_fini(struct spyre_device *dev);
/*
 * Peer-to-peer: the address in @importer's context of @exporter's device
 * memory [@ptr, @ptr + @size), one allocation of @exporter (imported once
 * per buffer, kept until the buffer is deleted); 0 or -errno with a detail.
 */
int spyre_peer_import(struct spyre_device *importer, struct spyre_device *exporter, uint64_t ptr,
		      uint64_t size, uint64_t *va);
/* Close every import of @dev's buffers and into @dev (device close). */
void spyre_peer_forget(struct spyre_device *dev);
int spyre_bo_import(struct spyre_device *importer, struct spyre_device *exporter,
		    const struct spyre_buf *bo, uint64_t *va);
/* Mark @dev's device allocation @ptr exported; its BO's handle in *@handle. */
int spyre_alloc_export(struct spyre_device *dev, uint64_t ptr, uint32_t *handle);
/* Close every spyre_ipc_import() into @dev (device close; peer.c). */
void spyre_ipc_forget(struct spyre_device *dev);

/*
 * The layers, each calling only those below it: stream.c (streams, events,
 * copies, the submit of one job), program.c (load, info, slots), launch.c
 * (argument ring, launch records, spyre_launch, stream statistics); trace.c
 * observes them through the hooks they call (struct spyre_trace_hooks).
 */

/* stream.c: one job of a stream, as its submitter built it. */
struct spyre_job {
	const void *packets;		/* @count packets of SPYRE_PKT_SIZE bytes */
	uint32_t count;
	const char *what;		/* its kind: "launch", "copy", "timestamp", "nop" */
	uint32_t wait_bound_ms;		/* SUBMIT's wait bound (0: the driver's 2 s); never batched */
	uint64_t bytes;			/* bytes its COPY packets move */
	const struct spyre_launch_record *record;	/* a LAUNCH's record (host mapping), or NULL */
	uint32_t core_mask;		/* a LAUNCH's cores */
	/* What a capture (struct spyre_graph) keeps of it beyond its packets, or of a replay's job */
	uint32_t node;			/* enum spyre_graph_node_kind */
	uint32_t copy_kind;		/* a copy: enum spyre_memcpy_kind */
	struct spyre_program *prog;	/* a LAUNCH: its program ... */
	const uint64_t *args;		/* ... and its argument block: @nslots slot addresses, then scalars */
	uint32_t nslots, nargs;
	struct spyre_event *event;	/* an event record */
	/* A replay's job: its packets' names and the cookie they take (graph.c) */
	struct spyre_job_names *names;
	uint64_t cookie;
};

/*
 * A graph: the jobs a capturing stream's calls built (stream.c adds them,
 * under the stream's lock), as nodes whose packets are kept one after another
 * and whose launches keep their argument blocks; graph.c instantiates it.
 * A LAUNCH's args and record operands are 0 in @packets: each exec places them.
 */
struct spyre_graph_node {
	uint32_t kind;			/* enum spyre_graph_node_kind */
	uint32_t first, count;		/* its packets, @packets[first .. first + count) */
	uint32_t arg0, nslots, nargs;	/* a launch: its block @args[arg0 .. arg0 + nargs), slots first */
	uint32_t copy_kind;		/* a copy: enum spyre_memcpy_kind */
	uint64_t bytes;			/* a copy's or a memset's bytes */
	struct spyre_program *prog;	/* a launch */
	struct spyre_event *event;	/* an event record */
};

struct spyre_graph {
	struct spyre_device *dev;
	struct spyre_stream *stream;	/* capturing it; NULL once captured */
	struct spyre_graph_node *nodes;
	uint32_t nnodes, cap_nodes;
	uint8_t *packets;		/* SPYRE_PKT_SIZE each */
	uint32_t npackets, cap_packets;
	uint64_t *args;
	uint32_t nargs, cap_args;
};

/* Free @g's storage (graph.c's spyre_graph_destroy(); stream.c's for a capture its stream outlived). */
static inline void spyre_graph_free(struct spyre_graph *g)
{
	if (!g)
		return;
	free(g->nodes);
	free(g->packets);
	free(g->args);
	free(g);
}

int spyre_stream_submit(struct spyre_stream *s, const struct spyre_job *job);
int spyre_stream_submit_locked(struct spyre_stream *s, const struct spyre_job *job);
/*
 * Under s->lock: submit @s's pending batch job now, if it has one (the batch
 * goes on in a new job). Before a host wait for one of its own points, by
 * any thread.
 */
int spyre_stream_flush_locked(struct spyre_stream *s);
/*
 * Before the host waits for a stream's work: submit the pending job of every
 * stream the calling thread batches (a stream's job may WAIT for another's
 * SIGNAL still pending: a host wait before both are submitted would wait
 * for the driver's job timeout). @held: the one of them whose lock the
 * caller holds, or NULL; the others' locks are taken one at a time under it
 * (a stream is in one thread's batch at a time, and only that thread nests
 * their locks so), and @held's own pending job when another thread holds its
 * batch. Returns @held's status (another stream's failure is returned by its
 * batch's end).
 */
int spyre_batches_flush(struct spyre_stream *held);
/* Submit the single COPY @p as a job of its own. */
int spyre_stream_copy(struct spyre_stream *s, const struct spyre_pkt_copy *p, enum spyre_memcpy_kind kind);
/* Count @size bytes copied in direction @kind on @s (under its lock) and its device. */
void spyre_stream_count_copy_locked(struct spyre_stream *s, enum spyre_memcpy_kind kind, uint64_t size);
/* Under s->lock: later jobs of @s wait for @point of timeline @tl (referenced until submitted). */
int spyre_stream_add_wait_locked(struct spyre_stream *s, struct spyre_timeline *tl, uint64_t point);
/* Under s->lock: wait until the host callbacks enqueued on @s so far have returned (the lock is dropped meanwhile). */
void spyre_stream_wait_callbacks_locked(struct spyre_stream *s);
/* -EBUSY with a detail naming @call when @s captures a graph (under s->lock), else 0. */
int spyre_stream_capturing_locked(struct spyre_stream *s, const char *call);
/* An event record: its TIMESTAMP; once the job that holds it is submitted, mark it recorded there. */
void spyre_event_prep_record(struct spyre_event *e, void *pkt);
void spyre_event_mark_locked(struct spyre_event *e, struct spyre_stream *s, uint64_t point);
int spyre_stream_wait_point(struct spyre_stream *s, uint64_t point);
int spyre_stream_wait_done(struct spyre_stream *s, uint64_t point, uint64_t *done);
/*
 * Wait for @point of @s, then tell whether the jobs of @s's queue ran
 * without a new failure since the queue counted @errors (s->errors_seen when
 * the first of them was submitted): 1 yes, 0 no (a failure, whichever job),
 * or a negative errno when the wait or the query failed. Takes no lock of @s.
 */
int spyre_stream_point_ok(struct spyre_stream *s, uint64_t point, uint64_t errors);
/* The same without waiting: 1 when @point is done and no new failure since @errors, else 0 (not known). */
int spyre_stream_point_ok_now(struct spyre_stream *s, uint64_t point, uint64_t errors);
int spyre_internal_sync(struct spyre_device *dev, int (*work)(struct spyre_stream *s, void *arg),
			void *arg);
struct spyre_stream *spyre_stream_next(struct spyre_device *dev, uint64_t after, uint64_t last);
void spyre_stream_put(struct spyre_stream *s);
void spyre_streams_fini(struct spyre_device *dev);

/*
 * Tracing as an observer (trace.c): while a trace is recorded, the tracer's
 * hooks are installed (spyre_tracer_set()) and the layers below call them
 * with what they already have - the traced public calls, each job before and
 * after its SUBMIT, the stream points known done. A stream the tracer took
 * on holds the hooks in s->tracer (and its state in s->trace) until the
 * tracer lets go of it, also after tracing stopped. Off, each hook costs one
 * branch: SPYRE_TRACE_ON() in the submit path and around the traced public
 * calls, a NULL test of s->tracer elsewhere.
 */
struct spyre_trace_call {
	uint64_t t0, jobs0;
	const char *name, *prev_what;
	unsigned int session;
};

struct spyre_trace_hooks {
	/* A traced public call @name begins and ends; its jobs are named @what (NULL: by kind). */
	void (*call_begin)(struct spyre_trace_call *c, const char *name, const char *what);
	void (*call_end)(struct spyre_trace_call *c, int ret, const char *k0, uint64_t v0,
			 const char *k1, uint64_t v1);
	/*
	 * Under s->lock, before @job's SUBMIT: true to bracket its packets with
	 * @pre and @post (TIMESTAMPs the tracer prepared); then, once the SUBMIT
	 * succeeded, job_submitted() with its stream point and the host time just
	 * before the SUBMIT.
	 */
	bool (*job_begin)(struct spyre_stream *s, const struct spyre_job *job,
			  void *pre, void *post);
	void (*job_submitted)(struct spyre_stream *s, const struct spyre_job *job,
			      uint64_t point, uint64_t t_submit);
	/* Under s->lock: the jobs of @s up to stream point @done are done (before their records are reused). */
	void (*harvest)(struct spyre_stream *s, uint64_t done);
	/* Under s->lock, after the stream's work is done (spyre_stream_destroy()): let go of @s. */
	void (*stream_gone)(struct spyre_stream *s);
	/* Under s->lock: @packet of job @job_seq as its submitter counted it (without a TIMESTAMP). */
	uint32_t (*packet)(struct spyre_stream *s, uint64_t job_seq, uint32_t packet);
};

/* stream.c: the installed hooks (NULL: not tracing). */
extern const struct spyre_trace_hooks *spyre_tracer;
void spyre_tracer_set(const struct spyre_trace_hooks *hooks);

static inline const struct spyre_trace_hooks *spyre_tracer_get(void)
{
	return __atomic_load_n(&spyre_tracer, __ATOMIC_RELAXED);
}

#define SPYRE_TRACE_ON() __builtin_expect(spyre_tracer_get() != NULL, 0)

/*
 * The body of a public call: return @call - with a detail when it fails
 * (spyre_error_ensure()) - inside a span named @name while tracing; jobs it
 * submits are named @what ("launch", "copy H2D", ...; NULL: by their kind);
 * @key (or NULL) and @val annotate the span.
 */
#define SPYRE_TRACED(name, what, call, key, val)					\
	do {										\
		const struct spyre_trace_hooks *th_ = spyre_tracer_get();		\
		uint64_t e_ = spyre_error_count();					\
		struct spyre_trace_call tc_;						\
		int r_;									\
											\
		if (__builtin_expect(!th_, 1))						\
			return spyre_error_ensure(call, e_, name);			\
		th_->call_begin(&tc_, name, what);					\
		r_ = spyre_error_ensure(call, e_, name);				\
		th_->call_end(&tc_, r_, key, val, NULL, 0);				\
		return r_;								\
	} while (0)

/* Under s->lock: the stream's jobs up to point @done are done; the tracer, if any, records them. */
static inline void spyre_trace_harvest_locked(struct spyre_stream *s, uint64_t done)
{
	if (s->tracer)
		s->tracer->harvest(s, done);
}

/* Under s->lock, @s's work done: the tracer, if any, lets go of it. */
static inline void spyre_trace_stream_gone_locked(struct spyre_stream *s)
{
	if (s->tracer)
		s->tracer->stream_gone(s);
}

/* Under s->lock: @packet of job @job_seq as its submitter counted (without the trace's TIMESTAMP). */
static inline uint32_t spyre_trace_packet_locked(struct spyre_stream *s, uint64_t job_seq,
						 uint32_t packet)
{
	return s->tracer ? s->tracer->packet(s, job_seq, packet) : packet;
}

/*
 * program.c: a loaded program. The patch path's state (@lock and below) is
 * launch.c's; program.c creates and frees it.
 */
struct spyre_program {
	struct spyre_device *dev;
	uint64_t id;			/* unique in the process: a launch state's last program */
	size_t size, upload_size;
	struct spyre_prog_hdr hdr;	/* the checked header: counts of slots, scalars, cores, relocations */
	struct spyre_prog_sym *syms;
	struct spyre_reloc_site *relocs;
	enum spyre_launch_path path;
	struct spyre_buf image;		/* device copy the engine runs */
	/* patch path */
	pthread_mutex_t lock;		/* Protects the patch state */
	struct spyre_buf host;		/* patched host copy, the upload source */
	uint64_t *bound;		/* slot addresses patched into @host */
	bool patched;
	/*
	 * The job that uploads @host, as patched with @bound, to @image: its
	 * stream's id (0 when no submitted job does: the next launch uploads),
	 * its point, and the stream's errors_seen at its submit. @image_ok once
	 * that job is known done without failure (launch.c).
	 */
	uint64_t up_id, up_point, up_errors;
	bool image_ok;
	/* The last launch of the program on each stream that ran it. */
	struct {
		struct spyre_stream *s;
		uint64_t id, point;
	} users[16];
	uint32_t nusers;
};

/* The COPY of @pr's host copy to its device image: at load, and after a re-patch. */
void spyre_program_prep_upload(const struct spyre_program *pr, struct spyre_pkt_copy *p);

/* launch.c: 0 when every slot binding of @pr lies in a big enough allocation of its device, else -EINVAL naming the slot. */
int spyre_launch_check_bindings(struct spyre_program *pr, const spyre_dptr_t *slots);
/*
 * launch.c, for a graph replay's job on @s (graph.c, under s->lock): point
 * each LAUNCH among its @count @packets at a launch record of @s's ring, the
 * records' indices into @recs (room for @count), their number into *@n; once
 * the job is submitted, spyre_launch_records_submitted_locked() makes them
 * count in the stream's statistics (and its last launch) as a spyre_launch()'s.
 */
int spyre_launch_records_take_locked(struct spyre_stream *s, void *packets, uint32_t count,
				     uint32_t *recs, uint32_t *n);
void spyre_launch_records_submitted_locked(struct spyre_stream *s, const uint32_t *recs, uint32_t n);


#endif
