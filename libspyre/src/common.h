/* SPDX-License-Identifier: MIT */
#ifndef LIBSPYRE_COMMON_H
#define LIBSPYRE_COMMON_H

/*
 * What both wings of libspyre share: the runtime (runtime/, the device,
 * memory, programs and streams) and the kernel library (kernels/, which
 * otherwise sees only the public spyre.h). The error detail, the export
 * attribute and the load of a checked program live here, nothing that needs
 * the runtime's structures.
 */
#include <stdint.h>
#include <time.h>

#define SPYRE_EXPORT __attribute__((visibility("default")))

/* CLOCK_MONOTONIC in ns: host time of calls, traces and kernel builds. */
static inline uint64_t spyre_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Record a detail for spyre_last_error() and return @status. */
int spyre_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Details this thread recorded so far. */
uint64_t spyre_error_count(void);
/*
 * Return @status; a failure of public call @call that recorded no detail
 * since the count was @count0 records "@call failed (<status>)", so that a
 * failing call never leaves an empty or another call's stale detail.
 */
int spyre_error_ensure(int status, uint64_t count0, const char *call);

/*
 * spyre_program_load() of an image whose container the caller checked
 * (spyre_prog_check_container() of isa/spyre_isa_codec.h into @v, v->size
 * its bytes): the runtime reads the view and does not check it again. The
 * kernel library loads the kernels it built, and checked, through it.
 */
struct spyre_device;
struct spyre_program;
struct spyre_prog_view;
int spyre_program_load_checked(struct spyre_device *dev, const struct spyre_prog_view *v,
			       struct spyre_program **out);

/*
 * Batches of a stream's jobs (stream.c), for the kernel library's
 * collectives (kernels/coll.c): between spyre_stream_batch_begin(@s) and
 * spyre_stream_batch_end(@s) the jobs the calls on @s submit - copies,
 * launches, event records, waits for another card's event - are appended to
 * one pending job, submitted when it is full (DRM_SPYRE_MAX_JOB_PACKETS),
 * before a job that cannot join it (a graph replay's, a traced one: while
 * tracing nothing is batched), before the host may wait for its work (a
 * synchronize or query of @s, a host callback, a launch that must wait for a
 * ring slot, a record of an event that is not SPYRE_EVENT_CROSS_DEVICE),
 * after a record of a SPYRE_EVENT_CROSS_DEVICE event (so that every WAIT for
 * its SIGNAL is submitted after it), and at the end. A host wait for a batching stream, or for an event, first
 * submits the pending jobs of every stream the thread batches: one may
 * WAIT for another's SIGNAL (spyre_batches_flush(), internal.h). The stream's order is unchanged: the packets run in the order
 * the calls made them; a call that returned 0 may have its failure reported
 * by a later call, or the end (the SUBMIT's error; the point is then
 * signaled with no work so that host waits end). A pending job's stream
 * point is that of every job in it: its launch records, its event records.
 * Only the thread that began the batch appends to it: another thread's calls
 * on @s submit the pending job first and then their own (its begin and end
 * are no-ops), and its host waits for @s submit the pending job first.
 * Begins nest; the end of the outermost submits. 0 or a negative errno with
 * a detail.
 */
struct spyre_stream;
int spyre_stream_batch_begin(struct spyre_stream *s);
int spyre_stream_batch_end(struct spyre_stream *s);

/* The name of code @i in the table @names, or @unknown past its end or in a gap. */
#define SPYRE_NAME_OF(names, i, unknown)						\
	((i) < sizeof(names) / sizeof((names)[0]) && (names)[i] ? (names)[i] : (unknown))

#endif
