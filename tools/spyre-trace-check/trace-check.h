/* SPDX-License-Identifier: MIT */
/*
 * trace-check.h - checks of a trace written by libspyre (spyre_trace_start()),
 * shared by the spyre-trace-check tool and libspyre's trace test. Times are
 * compared in whole ns (the file has ns resolution).
 *
 *  1. the file is strict JSON: {"displayTimeUnit":"ns","traceEvents":[...]}; every
 *     event has a ph; every X event a name, pid, tid, ts >= 0 and dur >= 0;
 *     every lane (pid, tid) of an X event and every pid is named (M events);
 *  2. on every lane the spans nest: none overlaps another partly;
 *  3. device jobs: on its queue's "jobs" lane no job nests in or overlaps
 *     another, none starts before its submit; its "device clock" span starts
 *     no earlier than its submit and ends no later than the host saw it done;
 *  4. per-core spans of a LAUNCH lie inside its job span, and on each core
 *     its busy and idle spans add up to the job's duration;
 *  5. steps (outermost spans of a host thread with a spyre_stream_get_stats
 *     call inside, e.g. "decode step, position 9"): every launch job of the
 *     step was submitted inside it; the step has as many launch jobs as
 *     spyre_launch calls and as the statistics' launches; and the durations
 *     of its launch jobs add up to the statistics' device_ns within 1 ns per
 *     launch.
 */
#ifndef SPYRE_TRACE_CHECK_H
#define SPYRE_TRACE_CHECK_H

#include <stddef.h>
#include <stdio.h>

struct trace_check_opts {
	long launches;		/* launch jobs expected, or -1 for any number */
	long min_steps;		/* steps expected at least */
	long min_jobs;		/* device jobs expected at least */
	int summary;		/* print each step's time by name, device time, utilization */
	FILE *out;		/* diagnostics ("# ..." lines) and the summary */
};

struct trace_check_result {
	size_t events, spans, api_calls, user_spans, submits, threads;
	size_t jobs, launch_jobs, core_spans, steps;
	size_t errors;
};

/* Check the trace in @path (or in @text of @len bytes); 0 when it passes. */
int trace_check_file(const char *path, const struct trace_check_opts *o, struct trace_check_result *r);
int trace_check_text(const char *text, size_t len, const struct trace_check_opts *o,
		     struct trace_check_result *r);

#endif
