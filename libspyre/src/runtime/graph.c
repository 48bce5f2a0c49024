// SPDX-License-Identifier: MIT
/*
 * Graphs: a stream's work captured (stream.c turns each job a capturing
 * stream would submit into a node of struct spyre_graph), instantiated as an
 * exec, and replayed with one SUBMIT per job. Calls go down only: to
 * launch.c (binding checks), stream.c and memory.c.
 *
 * An exec holds every node's packets, built once, in capture order, split
 * into jobs of at most SPYRE_GRAPH_JOB_PACKETS (a node never straddles two);
 * the argument blocks of its launches live in device memory of its own, and
 * its LAUNCH packets point there. Updates (spyre_graph_exec_set_kernel_args())
 * write a host shadow of the blocks; the next replay copies the shadow into
 * a staging buffer (one of SPYRE_GRAPH_STAGES, reused once the replay that
 * read it is done) and its first job begins with a COPY of the staging
 * buffer to the blocks: queue order puts it after the previous replay and
 * before this one's launches, so an update never reaches a replay enqueued
 * before it. Replays of one exec are ordered, also across streams: a replay
 * on another stream than the last waits for the last one on the device.
 * A job that carried an update may be canceled after its SUBMIT (a device
 * reset): a replay on another stream sends the update again unless that
 * job is known done without a failure (its own stream is poisoned then).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_hw.h"
#include "internal.h"

/* Packets of one job of a replay: room for the update COPY and a trace's two TIMESTAMPs. */
#define SPYRE_GRAPH_JOB_PACKETS (DRM_SPYRE_MAX_JOB_PACKETS - 3)
/* Staging buffers of the argument updates of one exec. */
#define SPYRE_GRAPH_STAGES 4

static const char *node_kind_name(uint32_t kind)
{
	static const char *const names[] = {
		[SPYRE_GRAPH_NODE_LAUNCH] = "launch",
		[SPYRE_GRAPH_NODE_COPY] = "copy",
		[SPYRE_GRAPH_NODE_MEMSET] = "memset",
		[SPYRE_GRAPH_NODE_EVENT_RECORD] = "event record",
	};

	return SPYRE_NAME_OF(names, kind, "?");
}

/*
 * What the packets of an exec's jobs are (struct spyre_job_names), shared
 * with the streams that may report a failed job of it. A job's cookie is its
 * index << 1, | 1 when it begins with the update COPY.
 */
struct graph_names {
	struct spyre_job_names base;
	uint32_t npackets, njobs;
	uint32_t *node_of;		/* the node of each packet of the exec (index 1 ..) */
	uint32_t *kind_of;		/* the kind of each node */
	uint32_t *job_first;		/* the first packet of each job */
};

static void names_describe(const struct spyre_job_names *n, uint64_t cookie, uint32_t packet,
			   char *buf, size_t size)
{
	const struct graph_names *g = (const struct graph_names *)n;
	uint32_t job = (uint32_t)(cookie >> 1), upd = cookie & 1, i;

	if (upd && !packet) {
		snprintf(buf, size, "the graph's argument update");
		return;
	}
	i = job < g->njobs ? g->job_first[job] + packet - upd : 0;
	if (!i || i > g->npackets) {
		snprintf(buf, size, "graph job %u packet %u", job, packet);
		return;
	}
	snprintf(buf, size, "graph node %u (%s)", g->node_of[i], node_kind_name(g->kind_of[g->node_of[i]]));
}

static void names_release(struct spyre_job_names *n)
{
	struct graph_names *g = (struct graph_names *)n;

	free(g->node_of);
	free(g->kind_of);
	free(g->job_first);
	free(g);
}

/* A launch node of an exec: where its argument block is in the shadow (and on the card). */
struct exec_node {
	uint32_t kind;
	uint32_t word;			/* its block's first u64 in the shadow */
	uint32_t nslots, nargs;
	struct spyre_program *prog;
};

struct exec_job {
	uint32_t first, count;		/* its packets, @packets[first ..], first >= 1 */
};

struct exec_event {
	uint32_t job;
	struct spyre_event *e;
};

struct spyre_graph_exec {
	struct spyre_device *dev;
	struct graph_names *names;	/* referenced */
	struct exec_node *nodes;
	uint32_t nnodes, njobs, npackets, nevents;
	struct exec_job *jobs;
	struct exec_event *events;
	uint8_t *packets;		/* 1 + @npackets: [0] is the update COPY */
	uint64_t bytes[SPYRE_MEMCPY_D2D + 1];	/* copy bytes of a replay per enum spyre_memcpy_kind */
	uint64_t memset_bytes;
	spyre_dptr_t dev_args;		/* the argument blocks on the card */
	uint64_t args_bytes;		/* their bytes, whole sticks; 0: no launch */

	/* Protects everything below; taken after a stream's lock (graph_launch()) */
	pthread_mutex_t lock;
	uint64_t *shadow;		/* the blocks as the next replay has them */
	bool dirty;			/* the next replay copies @shadow to the card first */
	struct spyre_buf stage;		/* SPYRE_GRAPH_STAGES x @args_bytes, host memory */
	uint32_t stage_next;
	struct {
		uint64_t id, point;	/* the stream and point of the replay that read it, 0 if none */
	} stage_use[SPYRE_GRAPH_STAGES];
	uint64_t last_id, last_point;	/* the stream and point of the last replay's last job */
	/* The job that carried the last update (stream id, point, errors seen), until known done; id 0: none */
	uint64_t upd_id, upd_point, upd_errors;
};

/* ---- capture ------------------------------------------------------------------- */

static int begin_capture(spyre_stream_t *s)
{
	struct spyre_graph *g;
	int ret = 0;

	if (!s)
		return spyre_error(-EINVAL, "spyre_stream_begin_capture: NULL stream");
	g = calloc(1, sizeof(*g));
	if (!g)
		return spyre_error(-ENOMEM, "out of memory");
	g->dev = s->dev;
	g->stream = s;
	pthread_mutex_lock(&s->lock);
	if (s->capture)
		ret = spyre_error(-EBUSY, "spyre_stream_begin_capture: the stream is capturing already");
	else
		s->capture = g;
	pthread_mutex_unlock(&s->lock);
	if (ret)
		free(g);
	return ret;
}

SPYRE_EXPORT int spyre_stream_begin_capture(spyre_stream_t *s)
{
	SPYRE_TRACED("spyre_stream_begin_capture", NULL, begin_capture(s), NULL, 0);
}

static int end_capture(spyre_stream_t *s, spyre_graph_t **out)
{
	struct spyre_graph *g;

	if (!s || !out)
		return spyre_error(-EINVAL, "spyre_stream_end_capture: NULL argument");
	pthread_mutex_lock(&s->lock);
	g = s->capture;
	s->capture = NULL;
	pthread_mutex_unlock(&s->lock);
	if (!g)
		return spyre_error(-EINVAL, "spyre_stream_end_capture: the stream is not capturing");
	g->stream = NULL;
	*out = g;
	return 0;
}

SPYRE_EXPORT int spyre_stream_end_capture(spyre_stream_t *s, spyre_graph_t **out)
{
	SPYRE_TRACED("spyre_stream_end_capture", NULL, end_capture(s, out), NULL, 0);
}

SPYRE_EXPORT int spyre_stream_is_capturing(spyre_stream_t *s)
{
	int ret;

	if (!s)
		return spyre_error(-EINVAL, "spyre_stream_is_capturing: NULL stream");
	pthread_mutex_lock(&s->lock);
	ret = s->capture != NULL;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

SPYRE_EXPORT int spyre_graph_node_count(const spyre_graph_t *g)
{
	if (!g)
		return spyre_error(-EINVAL, "spyre_graph_node_count: NULL graph");
	return (int)g->nnodes;
}

SPYRE_EXPORT int spyre_graph_get_node(const spyre_graph_t *g, uint32_t index,
				      struct spyre_graph_node_info *info)
{
	struct spyre_graph_node_info r = { .size = sizeof(r) };
	const struct spyre_graph_node *n;
	uint32_t sz;

	if (!g || !info || info->size < 8)
		return spyre_error(-EINVAL, "spyre_graph_get_node: NULL argument or size not set");
	if (index >= g->nnodes)
		return spyre_error(-EINVAL, "spyre_graph_get_node: no node %u: the graph has %u",
				   index, g->nnodes);
	n = &g->nodes[index];
	r.kind = n->kind;
	r.num_slots = n->nslots;
	r.num_scalars = n->nargs - n->nslots;
	r.packets = n->count;
	r.bytes = n->bytes;
	sz = info->size < sizeof(r) ? info->size : sizeof(r);
	memcpy((char *)info + 4, (char *)&r + 4, sz - 4);
	return 0;
}

SPYRE_EXPORT int spyre_graph_destroy(spyre_graph_t *g)
{
	spyre_graph_free(g);
	return 0;
}

/* ---- instantiate ----------------------------------------------------------------- */

static int exec_alloc(struct spyre_graph_exec *x, const struct spyre_graph *g)
{
	struct graph_names *nm;

	x->nodes = calloc(g->nnodes + 1, sizeof(*x->nodes));
	x->jobs = calloc(g->nnodes + 1, sizeof(*x->jobs));
	x->events = calloc(g->nnodes + 1, sizeof(*x->events));
	x->packets = calloc((size_t)g->npackets + 1, SPYRE_PKT_SIZE);
	x->names = nm = calloc(1, sizeof(*nm));
	if (nm) {
		/* Referenced at once: exec_free() releases it whatever failed. */
		nm->base.refs = 1;
		nm->base.describe = names_describe;
		nm->base.release = names_release;
	}
	if (!x->nodes || !x->jobs || !x->events || !x->packets || !nm)
		return spyre_error(-ENOMEM, "out of memory");
	nm->node_of = calloc((size_t)g->npackets + 1, sizeof(*nm->node_of));
	nm->kind_of = calloc(g->nnodes + 1, sizeof(*nm->kind_of));
	nm->job_first = calloc(g->nnodes + 1, sizeof(*nm->job_first));
	if (!nm->node_of || !nm->kind_of || !nm->job_first)
		return spyre_error(-ENOMEM, "out of memory");
	return 0;
}

/* Lay out the argument blocks, the jobs and their packets of @g in @x; LAUNCHes point at the card's blocks. */
static void exec_build(struct spyre_graph_exec *x, const struct spyre_graph *g)
{
	struct graph_names *nm = x->names;
	struct exec_job *j = NULL;
	uint32_t i, k, at = 1, word = 0;

	for (i = 0; i < g->nnodes; i++) {
		const struct spyre_graph_node *n = &g->nodes[i];
		struct exec_node *xn = &x->nodes[i];

		xn->kind = nm->kind_of[i] = n->kind;
		if (!j || j->count + n->count > SPYRE_GRAPH_JOB_PACKETS) {
			j = &x->jobs[x->njobs++];
			j->first = nm->job_first[x->njobs - 1] = at;
		}
		memcpy(x->packets + (size_t)at * SPYRE_PKT_SIZE, g->packets + (size_t)n->first * SPYRE_PKT_SIZE,
		       (size_t)n->count * SPYRE_PKT_SIZE);
		for (k = 0; k < n->count; k++)
			nm->node_of[at + k] = i;
		if (n->kind == SPYRE_GRAPH_NODE_LAUNCH) {
			struct spyre_pkt_launch *l = (struct spyre_pkt_launch *)(x->packets + (size_t)at * SPYRE_PKT_SIZE);

			xn->word = word;
			xn->nslots = n->nslots;
			xn->nargs = n->nargs;
			xn->prog = n->prog;
			memcpy(x->shadow + word, g->args + n->arg0, (size_t)n->nargs * 8);
			l->args = spyre_cpu_to_le64(x->dev_args + (uint64_t)word * 8);
			word += n->nargs;
		} else if (n->kind == SPYRE_GRAPH_NODE_EVENT_RECORD) {
			x->events[x->nevents].job = x->njobs - 1;
			x->events[x->nevents++].e = n->event;
		} else if (n->kind == SPYRE_GRAPH_NODE_COPY) {
			x->bytes[n->copy_kind] += n->bytes;
		} else if (n->kind == SPYRE_GRAPH_NODE_MEMSET) {
			x->memset_bytes += n->bytes;
		}
		j->count += n->count;
		at += n->count;
	}
	x->nnodes = g->nnodes;
	x->npackets = nm->npackets = g->npackets;
	nm->njobs = x->njobs;
	x->dirty = x->args_bytes != 0;	/* the first replay puts the blocks on the card */
}

static void exec_free(struct spyre_graph_exec *x)
{
	if (x->dev_args)
		spyre_free(x->dev, x->dev_args);
	if (x->stage.handle)
		spyre_bo_del(x->dev, &x->stage);
	if (x->names)
		spyre_job_names_put(&x->names->base);
	pthread_mutex_destroy(&x->lock);
	free(x->shadow);
	free(x->packets);
	free(x->events);
	free(x->jobs);
	free(x->nodes);
	free(x);
}

static int graph_instantiate(spyre_graph_t *g, spyre_graph_exec_t **out)
{
	struct spyre_graph_exec *x;
	int ret;

	if (!g || !out)
		return spyre_error(-EINVAL, "spyre_graph_instantiate: NULL argument");
	if (g->stream)
		return spyre_error(-EINVAL, "spyre_graph_instantiate: the graph is still being captured");
	x = calloc(1, sizeof(*x));
	if (!x)
		return spyre_error(-ENOMEM, "out of memory");
	x->dev = g->dev;
	pthread_mutex_init(&x->lock, NULL);
	ret = exec_alloc(x, g);
	if (!ret && g->nargs) {
		x->args_bytes = ((uint64_t)g->nargs * 8 + SPYRE_STICK_BYTES - 1) & ~(uint64_t)(SPYRE_STICK_BYTES - 1);
		x->shadow = calloc(1, x->args_bytes);
		ret = x->shadow ? 0 : spyre_error(-ENOMEM, "out of memory");
		ret = ret ?: spyre_malloc(x->dev, x->args_bytes, &x->dev_args);
		ret = ret ?: spyre_bo_new(x->dev, SPYRE_GRAPH_STAGES * x->args_bytes, DRM_SPYRE_BO_HOST,
					  &x->stage);
	}
	if (ret) {
		exec_free(x);
		return ret;
	}
	exec_build(x, g);
	*out = x;
	return 0;
}

SPYRE_EXPORT int spyre_graph_instantiate(spyre_graph_t *g, spyre_graph_exec_t **out)
{
	SPYRE_TRACED("spyre_graph_instantiate", NULL, graph_instantiate(g, out), "nodes", g ? g->nnodes : 0);
}

SPYRE_EXPORT int spyre_graph_exec_get_info(const spyre_graph_exec_t *x, struct spyre_graph_exec_info *info)
{
	struct spyre_graph_exec_info r = { .size = sizeof(r) };
	uint32_t sz;

	if (!x || !info || info->size < 8)
		return spyre_error(-EINVAL, "spyre_graph_exec_get_info: NULL argument or size not set");
	r.num_nodes = x->nnodes;
	r.num_jobs = x->njobs;
	r.num_packets = x->npackets;
	r.arg_bytes = x->args_bytes;
	sz = info->size < sizeof(r) ? info->size : sizeof(r);
	memcpy((char *)info + 4, (char *)&r + 4, sz - 4);
	return 0;
}

/* ---- replay ------------------------------------------------------------------------ */

/* Wait for point @point of the stream with id @id, unless it is gone (it finished its work). */
static int wait_stream_point(struct spyre_device *dev, uint64_t id, uint64_t point)
{
	struct spyre_stream *u;
	int ret = 0;

	if (!id)
		return 0;
	u = spyre_stream_next(dev, id - 1, id);
	if (u) {
		ret = spyre_stream_wait_point(u, point);
		spyre_stream_put(u);
	}
	return ret;
}

/* Under s->lock and x->lock: the update COPY of the next replay into @x->packets[0], from a free staging buffer. */
static int stage_update_locked(struct spyre_graph_exec *x, uint32_t *stage)
{
	uint32_t g = x->stage_next;
	uint64_t off = g * x->args_bytes;
	int ret;

	ret = wait_stream_point(x->dev, x->stage_use[g].id, x->stage_use[g].point);
	if (ret)
		return spyre_error(ret, "waiting for a replay that read the graph's arguments failed");
	memcpy((char *)x->stage.map + off, x->shadow, x->args_bytes);
	spyre_prep_copy_va(x->packets, x->stage.va + off, x->dev_args, x->args_bytes);
	*stage = g;
	return 0;
}

/*
 * Under x->lock: may the last update have missed the card, for a replay on
 * @s? Its job may have been canceled after its SUBMIT (a device reset): on
 * its own stream, later jobs are refused then (the stream is poisoned); on
 * another, the update is sent again unless its job is known done without a
 * failure, without waiting for it.
 */
static bool update_lost_locked(struct spyre_graph_exec *x, struct spyre_stream *s)
{
	struct spyre_stream *u;
	int ok = 0;

	if (!x->upd_id || x->upd_id == s->id)
		return false;
	u = spyre_stream_next(x->dev, x->upd_id - 1, x->upd_id);
	if (u) {
		ok = spyre_stream_point_ok_now(u, x->upd_point, x->upd_errors);
		spyre_stream_put(u);
	}
	if (ok)
		x->upd_id = 0;		/* on the card: no more checks */
	return !ok;
}

/* Under s->lock: replay @x's jobs on @s; the first begins with the update COPY if @upd. */
static int submit_jobs_locked(struct spyre_graph_exec *x, struct spyre_stream *s, bool upd, uint32_t stage)
{
	uint32_t j, e = 0;
	int ret = 0;

	for (j = 0; j < x->njobs && !ret; j++) {
		bool u = upd && j == 0;
		struct spyre_job job = {
			.packets = x->packets + (size_t)(x->jobs[j].first - u) * SPYRE_PKT_SIZE,
			.count = x->jobs[j].count + u,
			.what = "graph",
			.names = &x->names->base,
			.cookie = (uint64_t)j << 1 | u,
		};
		uint32_t recs[SPYRE_GRAPH_JOB_PACKETS], nrecs;

		/* Its launches write records of @s: the stream's statistics count them. */
		ret = spyre_launch_records_take_locked(s, x->packets + (size_t)x->jobs[j].first * SPYRE_PKT_SIZE,
						       x->jobs[j].count, recs, &nrecs);
		ret = ret ?: spyre_stream_submit_locked(s, &job);
		if (ret)
			break;
		spyre_launch_records_submitted_locked(s, recs, nrecs);
		if (u) {
			x->stage_use[stage].id = s->id;
			x->stage_use[stage].point = s->point;
			x->stage_next = (stage + 1) % SPYRE_GRAPH_STAGES;
			x->dirty = false;
			x->upd_id = s->id;
			x->upd_point = s->point;
			x->upd_errors = s->errors_seen;
			s->stats.arg_bytes += x->args_bytes;
		}
		for (; e < x->nevents && x->events[e].job == j; e++)
			spyre_event_mark_locked(x->events[e].e, s, s->point);
		x->last_id = s->id;
		x->last_point = s->point;
	}
	if (ret)
		return ret;
	for (j = SPYRE_MEMCPY_H2D; j <= SPYRE_MEMCPY_D2D; j++)
		if (x->bytes[j])
			spyre_stream_count_copy_locked(s, (enum spyre_memcpy_kind)j, x->bytes[j]);
	s->stats.memset_bytes += x->memset_bytes;
	return 0;
}

static int graph_launch(spyre_graph_exec_t *x, spyre_stream_t *s)
{
	struct spyre_stream *prev = NULL;
	uint32_t stage = 0;
	bool upd;
	int ret;

	if (!x || !s)
		return spyre_error(-EINVAL, "spyre_graph_launch: NULL argument");
	if (x->dev != s->dev)
		return spyre_error(-EINVAL, "spyre_graph_launch: the exec and the stream are on different devices");
	/*
	 * The stream's lock, then the exec's, once the stream's pending host
	 * callbacks are done: one may update or replay the exec, and would wait
	 * for its lock while this replay waited for the callback.
	 */
	pthread_mutex_lock(&s->lock);
	ret = spyre_stream_capturing_locked(s, "spyre_graph_launch");
	if (ret) {
		pthread_mutex_unlock(&s->lock);
		return ret;
	}
	spyre_stream_wait_callbacks_locked(s);
	pthread_mutex_lock(&x->lock);
	upd = x->njobs && (x->dirty || update_lost_locked(x, s));
	if (upd)
		ret = stage_update_locked(x, &stage);
	/* After the last replay, on the device: its stream, referenced while this one is submitted. */
	if (!ret && x->last_id && x->last_id != s->id)
		prev = spyre_stream_next(x->dev, x->last_id - 1, x->last_id);
	if (!ret && prev)
		ret = spyre_stream_add_wait_locked(s, prev->tl, x->last_point);
	ret = ret ?: submit_jobs_locked(x, s, upd, stage);
	pthread_mutex_unlock(&x->lock);
	pthread_mutex_unlock(&s->lock);
	if (prev)
		spyre_stream_put(prev);
	return ret;
}

SPYRE_EXPORT int spyre_graph_launch(spyre_graph_exec_t *x, spyre_stream_t *s)
{
	SPYRE_TRACED("spyre_graph_launch", "graph", graph_launch(x, s), "nodes", x ? x->nnodes : 0);
}

/* ---- update ------------------------------------------------------------------------ */

static int set_kernel_args(spyre_graph_exec_t *x, uint32_t node, const spyre_dptr_t *slots,
			   uint32_t nslots, const uint64_t *scalars, uint32_t nscalars)
{
	const struct exec_node *n;
	uint32_t nscal;
	int ret;

	if (!x || (nslots && !slots) || (nscalars && !scalars))
		return spyre_error(-EINVAL, "spyre_graph_exec_set_kernel_args: NULL argument");
	if (node >= x->nnodes)
		return spyre_error(-EINVAL, "spyre_graph_exec_set_kernel_args: no node %u: the graph has %u",
				   node, x->nnodes);
	n = &x->nodes[node];
	if (n->kind != SPYRE_GRAPH_NODE_LAUNCH)
		return spyre_error(-EINVAL, "spyre_graph_exec_set_kernel_args: graph node %u is a%s %s, "
				   "not a launch", node, n->kind == SPYRE_GRAPH_NODE_EVENT_RECORD ? "n" : "",
				   node_kind_name(n->kind));
	nscal = n->nargs - n->nslots;
	if ((nslots && nslots != n->nslots) || (nscalars && nscalars != nscal))
		return spyre_error(-EINVAL, "spyre_graph_exec_set_kernel_args: graph node %u takes %u slots "
				   "and %u scalars (0: keep them), got %u and %u", node, n->nslots, nscal,
				   nslots, nscalars);
	if (nslots) {
		char why[256];

		ret = spyre_launch_check_bindings(n->prog, slots);
		if (ret) {
			snprintf(why, sizeof(why), "%s", spyre_last_error());
			return spyre_error(ret, "graph node %u: %s", node, why);
		}
	}
	pthread_mutex_lock(&x->lock);
	if (nslots)
		memcpy(x->shadow + n->word, slots, (size_t)nslots * 8);
	if (nscalars)
		memcpy(x->shadow + n->word + n->nslots, scalars, (size_t)nscalars * 8);
	x->dirty |= nslots || nscalars;
	pthread_mutex_unlock(&x->lock);
	return 0;
}

SPYRE_EXPORT int spyre_graph_exec_set_kernel_args(spyre_graph_exec_t *x, uint32_t node,
						  const spyre_dptr_t *slots, uint32_t nslots,
						  const uint64_t *scalars, uint32_t nscalars)
{
	SPYRE_TRACED("spyre_graph_exec_set_kernel_args", NULL,
		     set_kernel_args(x, node, slots, nslots, scalars, nscalars), "node", node);
}

SPYRE_EXPORT int spyre_graph_exec_destroy(spyre_graph_exec_t *x)
{
	int ret;

	if (!x)
		return 0;
	/* Replays are ordered: once the last is done, none reads the blocks or a staging buffer. */
	ret = wait_stream_point(x->dev, x->last_id, x->last_point);
	exec_free(x);
	return ret;
}
