// SPDX-License-Identifier: MIT
/*
 * trace-check.c - the checks of trace-check.h over the strict JSON parser of util/json.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "trace-check.h"

#define MAX_REPORTED 20		/* errors printed; the rest are counted */

/* An X event. Times in ns from the trace's start. */
struct xev {
	int64_t ts, end;
	double pid, tid;
	const char *name, *cat;
	const struct spyre_json_node *args;
	long parent;			/* enclosing X event on its lane, or -1 */
	int64_t child_ns;		/* time of its direct children */
};

struct job {
	uint64_t id;
	long x;				/* index in the X events */
	bool launch;
	int64_t submit, seen, core_sum[32];
	uint64_t step_id, core_mask;
	uint32_t core_seen;
};

struct ctx {
	const struct trace_check_opts *o;
	struct trace_check_result *r;
	struct xev *x;
	size_t nx;
	struct job *jobs;
	size_t njobs;
};

static void err(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void err(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->r->errors++ >= MAX_REPORTED)
		return;
	fputs("# error: ", c->o->out);
	va_start(ap, fmt);
	vfprintf(c->o->out, fmt, ap);
	va_end(ap);
	fputc('\n', c->o->out);
}

static const char *str_of(const struct spyre_json_node *obj, const char *key)
{
	return spyre_json_string(spyre_json_get(obj, key), NULL);
}

static bool num_of(const struct spyre_json_node *obj, const char *key, double *v)
{
	return !spyre_json_number(spyre_json_get(obj, key), v);
}

/* A time in microseconds (ns resolution) as ns. */
static int64_t us_ns(double us)
{
	return (int64_t)llround(us * 1000.0);
}

static bool arg_u64(const struct xev *e, const char *key, uint64_t *v)
{
	double d;

	if (!e->args || !num_of(e->args, key, &d) || d < 0)
		return false;
	*v = (uint64_t)llround(d);
	return true;
}

static bool arg_us(const struct xev *e, const char *key, int64_t *ns)
{
	double d;

	if (!e->args || !num_of(e->args, key, &d))
		return false;
	*ns = us_ns(d);
	return true;
}

static int cmp_lane(const void *a, const void *b)
{
	const struct xev *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	/* the longer one first: it encloses the other */
	return x->end > y->end ? -1 : x->end < y->end;
}

static int cmp_job(const void *a, const void *b)
{
	const struct job *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static struct job *find_job(struct ctx *c, uint64_t id)
{
	struct job key = { .id = id };

	return bsearch(&key, c->jobs, c->njobs, sizeof(key), cmp_job);
}

static bool is(const char *s, const char *want)
{
	return s && !strcmp(s, want);
}

/* 1. the events; X events into c->x. */
static int read_events(struct ctx *c, const struct spyre_json_node *root, double **named, size_t *nnamed)
{
	const struct spyre_json_node *evs = spyre_json_get(root, "traceEvents");
	size_t i, n, nn = 0;
	double *nm;

	if (spyre_json_type(root) != SPYRE_JSON_OBJECT || !evs || spyre_json_type(evs) != SPYRE_JSON_ARRAY) {
		err(c, "the file is not an object with a traceEvents array");
		return -1;
	}
	if (!is(str_of(root, "displayTimeUnit"), "ns"))
		err(c, "displayTimeUnit is not \"ns\"");
	n = spyre_json_count(evs);
	c->x = calloc(n + 1, sizeof(*c->x));
	nm = calloc(3 * n + 3, sizeof(*nm));
	if (!c->x || !nm) {
		free(nm);
		err(c, "out of memory");
		return -1;
	}
	c->r->events = n;
	for (i = 0; i < n; i++) {
		const struct spyre_json_node *e = spyre_json_at(evs, i, NULL);
		const char *ph = str_of(e, "ph"), *name = str_of(e, "name");
		double ts = 0, dur = 0, pid = 0, tid = 0;

		if (!ph) {
			err(c, "event %zu has no ph", i);
			continue;
		}
		if (is(ph, "M")) {
			const struct spyre_json_node *args = spyre_json_get(e, "args");

			if (!num_of(e, "pid", &pid) || !name || !args)
				err(c, "metadata event %zu lacks pid, name or args", i);
			else if (is(name, "thread_name") || is(name, "process_name")) {
				nm[3 * nn] = is(name, "thread_name");
				nm[3 * nn + 1] = pid;
				nm[3 * nn + 2] = -1;
				if (nm[3 * nn] && !num_of(e, "tid", &nm[3 * nn + 2]))
					err(c, "thread_name event %zu has no tid", i);
				if (!str_of(args, "name"))
					err(c, "%s event %zu has no args.name", name, i);
				nn++;
			}
			continue;
		}
		if (!num_of(e, "ts", &ts) || ts < 0) {
			err(c, "event %zu (%s) has no ts >= 0", i, ph);
			continue;
		}
		if (is(ph, "i"))
			c->r->submits += is(str_of(e, "cat"), "submit");
		if (!is(ph, "X"))
			continue;
		if (!name || !num_of(e, "pid", &pid) || !num_of(e, "tid", &tid) || !num_of(e, "dur", &dur) ||
		    dur < 0) {
			err(c, "X event %zu (%s) lacks a name, pid, tid or dur >= 0", i, name ? name : "?");
			continue;
		}
		c->x[c->nx++] = (struct xev){ .ts = us_ns(ts), .end = us_ns(ts) + us_ns(dur), .pid = pid,
					      .tid = tid, .name = name, .cat = str_of(e, "cat"),
					      .args = spyre_json_get(e, "args"), .parent = -1 };
	}
	*named = nm;
	*nnamed = nn;
	return 0;
}

/* 1-2. lanes named; spans nest on every lane. */
static void check_lanes(struct ctx *c, const double *nm, size_t nn)
{
	long *stack = calloc(c->nx + 1, sizeof(*stack));
	size_t i, k, depth = 0;

	if (!stack) {
		err(c, "out of memory");
		return;
	}
	qsort(c->x, c->nx, sizeof(*c->x), cmp_lane);
	for (i = 0; i < c->nx; i++) {
		struct xev *e = &c->x[i];
		bool new_lane = !i || e->pid != c->x[i - 1].pid || e->tid != c->x[i - 1].tid;

		if (new_lane) {
			bool thread = false, process = false;

			for (k = 0; k < nn; k++) {
				thread |= nm[3 * k] && nm[3 * k + 1] == e->pid && nm[3 * k + 2] == e->tid;
				process |= !nm[3 * k] && nm[3 * k + 1] == e->pid;
			}
			if (!thread || !process)
				err(c, "lane pid %.0f tid %.0f has no %s_name", e->pid, e->tid,
				    thread ? "process" : "thread");
			depth = 0;
		}
		while (depth && c->x[stack[depth - 1]].end <= e->ts)
			depth--;
		if (depth) {
			struct xev *p = &c->x[stack[depth - 1]];

			if (e->end > p->end)
				err(c, "on lane pid %.0f tid %.0f, '%s' [%" PRId64 ", %" PRId64 "] ns overlaps '%s' "
				    "[%" PRId64 ", %" PRId64 "] ns without nesting", e->pid, e->tid, e->name, e->ts,
				    e->end, p->name, p->ts, p->end);
			e->parent = stack[depth - 1];
			p->child_ns += e->end - e->ts;
		}
		stack[depth++] = (long)i;
	}
	free(stack);
}

/* 3-4. jobs, device-clock spans, core spans. */
static void check_device(struct ctx *c)
{
	size_t i, n = 0;
	uint32_t core;

	c->jobs = calloc(c->nx + 1, sizeof(*c->jobs));
	if (!c->jobs) {
		err(c, "out of memory");
		return;
	}
	for (i = 0; i < c->nx; i++) {
		struct xev *e = &c->x[i];
		struct job *j = &c->jobs[n];
		const char *what;

		if (!is(e->cat, "job"))
			continue;
		what = e->args ? str_of(e->args, "what") : NULL;
		if (!arg_u64(e, "id", &j->id) || !what || !arg_us(e, "submit_us", &j->submit) ||
		    !arg_us(e, "seen_done_us", &j->seen)) {
			err(c, "job '%s' lacks args id, what, submit_us or seen_done_us", e->name);
			continue;
		}
		j->x = (long)i;
		j->launch = is(what, "launch");
		if (j->launch) {
			const char *mask = str_of(e->args, "core_mask");

			j->core_mask = mask ? strtoull(mask, NULL, 0) : 0;
			c->r->launch_jobs++;
		}
		if (!arg_u64(e, "step_id", &j->step_id))
			j->step_id = 0;
		if (e->parent >= 0)
			err(c, "job %" PRIu64 " '%s' nests in '%s' on its queue's lane", j->id, e->name,
			    c->x[e->parent].name);
		if (e->ts < j->submit)
			err(c, "job %" PRIu64 " '%s' starts at %" PRId64 " ns, before its submit at %" PRId64 " ns",
			    j->id, e->name, e->ts, j->submit);
		n++;
	}
	c->njobs = n;
	c->r->jobs = n;
	qsort(c->jobs, n, sizeof(*c->jobs), cmp_job);
	for (i = 1; i < n; i++)
		if (c->jobs[i].id == c->jobs[i - 1].id)
			err(c, "job id %" PRIu64 " appears twice", c->jobs[i].id);

	for (i = 0; i < c->nx; i++) {
		struct xev *e = &c->x[i];
		struct job *j;
		uint64_t id;

		if (!is(e->cat, "device") && !is(e->cat, "core"))
			continue;
		if (!arg_u64(e, "job", &id) || !(j = find_job(c, id))) {
			err(c, "%s span '%s' names no job", e->cat, e->name);
			continue;
		}
		if (is(e->cat, "device")) {
			if (e->ts < j->submit || e->end > j->seen)
				err(c, "job %" PRIu64 ": its device clock span [%" PRId64 ", %" PRId64 "] ns is not "
				    "within its submit %" PRId64 " ns and its completion seen at %" PRId64 " ns",
				    id, e->ts, e->end, j->submit, j->seen);
			continue;
		}
		c->r->core_spans++;
		if (!j->launch || e->pid != c->x[j->x].pid ||
		    e->ts < c->x[j->x].ts || e->end > c->x[j->x].end) {
			err(c, "core span '%s' [%" PRId64 ", %" PRId64 "] ns is not inside its launch job %" PRIu64
			    " [%" PRId64 ", %" PRId64 "] ns", e->name, e->ts, e->end, id, c->x[j->x].ts,
			    c->x[j->x].end);
			continue;
		}
		core = (uint32_t)e->tid % 100000;
		if (core < 32) {
			j->core_sum[core] += e->end - e->ts;
			j->core_seen |= 1u << core;
		}
	}
	for (i = 0; i < n; i++) {
		struct job *j = &c->jobs[i];
		int64_t dur = c->x[j->x].end - c->x[j->x].ts;

		for (core = 0; core < 32 && j->launch; core++)
			if ((j->core_seen & (1u << core)) && j->core_sum[core] != dur)
				err(c, "job %" PRIu64 ": core %u's busy and idle spans add up to %" PRId64 " ns, the "
				    "job lasts %" PRId64 " ns", j->id, core, j->core_sum[core], dur);
	}
}

struct tally {
	const char *name;
	int64_t ns;
};

static int cmp_tally(const void *a, const void *b)
{
	const struct tally *x = a, *y = b;

	return x->ns > y->ns ? -1 : x->ns < y->ns;
}

/* Where the step's host time went: exclusive time by name, the largest first. */
static void summarize(struct ctx *c, size_t si, int64_t dev_ns, int64_t clock_ns, size_t launches,
		      double busy, double avail)
{
	const struct xev *s = &c->x[si];
	struct tally t[64];
	size_t nt = 0, i, k;

	for (i = si; i < c->nx && c->x[i].pid == s->pid && c->x[i].tid == s->tid && c->x[i].ts < s->end; i++) {
		const struct xev *e = &c->x[i];
		int64_t self = e->end - e->ts - e->child_ns;

		for (k = 0; k < nt && strcmp(t[k].name, e->name); k++)
			;
		if (k == nt && nt < 64)
			t[nt++] = (struct tally){ .name = e->name };
		if (k < nt)
			t[k].ns += self;
	}
	qsort(t, nt, sizeof(*t), cmp_tally);
	fprintf(c->o->out, "# %s: host %.3f ms; device: %zu launches, %.3f us modeled, %.3f us on the device "
		"clock (all jobs), %.0f%% core use\n", s->name, (s->end - s->ts) * 1e-6, launches, dev_ns * 1e-3,
		clock_ns * 1e-3, avail > 0 ? 100.0 * busy / avail : 0.0);
	fprintf(c->o->out, "#   host time by span (self):");
	for (k = 0; k < nt && k < 8; k++)
		fprintf(c->o->out, "%s %s %.3f ms (%.0f%%)", k ? "," : "", t[k].name, t[k].ns * 1e-6,
			100.0 * (double)t[k].ns / (double)(s->end - s->ts));
	fputc('\n', c->o->out);
}

/* 5. steps. */
static void check_steps(struct ctx *c)
{
	size_t i, k;

	for (i = 0; i < c->nx; i++) {
		const struct xev *s = &c->x[i];
		uint64_t sid, want_launches = 0, want_ns = 0, api_launches = 0, njl = 0;
		int64_t sum = 0, clock_ns = 0;
		double busy = 0, avail = 0;
		bool stats = false;

		if (!is(s->cat, "span") || s->parent >= 0 || !arg_u64(s, "id", &sid))
			continue;
		/* the events of the step's lane inside it */
		for (k = i + 1; k < c->nx && c->x[k].pid == s->pid && c->x[k].tid == s->tid &&
		     c->x[k].ts < s->end; k++) {
			const struct xev *e = &c->x[k];
			uint64_t l, ns;
			double ret = -1;

			if (!is(e->cat, "api"))
				continue;
			if (is(e->name, "spyre_launch") && e->args && num_of(e->args, "ret", &ret) && ret == 0)
				api_launches++;
			/* a step over several streams (tensor parallel: one per card) reads each once: summed */
			if (is(e->name, "spyre_stream_get_stats") && arg_u64(e, "launches", &l) &&
			    arg_u64(e, "device_ns", &ns)) {
				want_launches += l;
				want_ns += ns;
				stats = true;
			}
		}
		if (!stats)
			continue;
		c->r->steps++;
		for (k = 0; k < c->njobs; k++) {
			const struct job *j = &c->jobs[k];
			const struct xev *e = &c->x[j->x];
			uint64_t v;

			if (j->step_id != sid)
				continue;
			if (j->submit < s->ts || j->submit > s->end)
				err(c, "%s: job %" PRIu64 " '%s' of the step was submitted at %" PRId64 " ns, outside "
				    "the step [%" PRId64 ", %" PRId64 "] ns", s->name, j->id, e->name, j->submit, s->ts,
				    s->end);
			if (arg_u64(e, "measured_ns", &v))
				clock_ns += (int64_t)v;
			if (!j->launch)
				continue;
			njl++;
			sum += e->end - e->ts;
			if (arg_u64(e, "cores_run", &v)) {
				double u = 0;

				num_of(e->args, "utilization", &u);
				avail += (double)v * (double)(e->end - e->ts);
				busy += u * (double)v * (double)(e->end - e->ts);
			}
		}
		if (njl != want_launches || njl != api_launches)
			err(c, "%s: %" PRIu64 " launch jobs, %" PRIu64 " spyre_launch calls, the statistics count %"
			    PRIu64 " launches", s->name, njl, api_launches, want_launches);
		if ((uint64_t)llabs(sum - (int64_t)want_ns) > njl)
			err(c, "%s: its launch jobs last %" PRId64 " ns, the statistics' device_ns is %" PRIu64
			    " (tolerance %" PRIu64 " ns: 1 per launch)", s->name, sum, want_ns, njl);
		if (c->o->summary)
			summarize(c, i, sum, clock_ns, njl, busy, avail);
	}
}

int trace_check_text(const char *text, size_t len, const struct trace_check_opts *o,
		     struct trace_check_result *r)
{
	struct ctx c = { .o = o, .r = r };
	struct spyre_json *doc;
	double *named = NULL;
	size_t nnamed = 0, i;
	char msg[256];

	memset(r, 0, sizeof(*r));
	if (spyre_json_parse(text, len, &doc, msg, sizeof(msg))) {
		err(&c, "not JSON: %s", msg);
		return -1;
	}
	if (!read_events(&c, spyre_json_root(doc), &named, &nnamed)) {
		check_lanes(&c, named, nnamed);
		check_device(&c);
		check_steps(&c);
		for (i = 0; i < nnamed; i++)
			r->threads += named[3 * i] && named[3 * i + 1] == c.x[0].pid;
		for (i = 0; i < c.nx; i++) {
			r->spans++;
			r->api_calls += is(c.x[i].cat, "api");
			r->user_spans += is(c.x[i].cat, "span");
		}
		if (o->launches >= 0 && r->launch_jobs != (size_t)o->launches)
			err(&c, "%zu launch jobs, %ld expected", r->launch_jobs, o->launches);
		if ((long)r->steps < o->min_steps)
			err(&c, "%zu steps, at least %ld expected", r->steps, o->min_steps);
		if ((long)r->jobs < o->min_jobs)
			err(&c, "%zu device jobs, at least %ld expected", r->jobs, o->min_jobs);
	}
	free(named);
	free(c.x);
	free(c.jobs);
	spyre_json_free(doc);
	if (r->errors > MAX_REPORTED)
		fprintf(o->out, "# ... %zu errors in all\n", r->errors);
	return r->errors ? -1 : 0;
}

int trace_check_file(const char *path, const struct trace_check_opts *o, struct trace_check_result *r)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	size_t len = 0, cap = 0, n;
	int ret;

	memset(r, 0, sizeof(*r));
	if (!f) {
		fprintf(o->out, "# error: cannot open %s: %s\n", path, strerror(errno));
		r->errors = 1;
		return -1;
	}
	do {
		if (len == cap) {
			char *t = realloc(text, cap = cap ? 2 * cap : 1 << 20);

			if (!t) {
				free(text);
				fclose(f);
				fprintf(o->out, "# error: out of memory reading %s\n", path);
				r->errors = 1;
				return -1;
			}
			text = t;
		}
		n = fread(text + len, 1, cap - len, f);
		len += n;
	} while (n);
	fclose(f);
	ret = trace_check_text(text, len, o, r);
	free(text);
	return ret;
}
