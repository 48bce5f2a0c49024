// SPDX-License-Identifier: MIT
/*
 * Launch: a stream's argument ring and launch records, spyre_launch() on
 * either path of a program (program.c), and the per-stream statistics the
 * records add up to. A launch is one job (struct spyre_job): its LAUNCH,
 * after the patch path's upload of a re-patched image; the job names its
 * launch record, so that an observer (trace.c) reads it without mapping the
 * packets back. Calls go down only: to program.c, stream.c, memory.c and
 * patch.c.
 *
 * The patch path keeps one device image per program for every stream: a
 * launch with new bindings waits for every queued launch of the program,
 * patches the host copy and uploads it in its own job; one with the same
 * bindings runs the image as is on the stream of that upload (stream order),
 * or once the upload is known done without failure, and otherwise waits for
 * it on the host and uploads again if it failed (image_current_locked()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_hw.h"
#include "internal.h"

/*
 * A stream's launch state (struct spyre_stream.launch), under the stream's
 * lock, in one host buffer (internal.h): a ring of argument blocks, with what
 * the last launch bound, so that a launch with unchanged bindings reuses its
 * block; and a ring of launch records the device writes, one per launch,
 * folded into the stream's totals once the launch is done.
 */
struct spyre_launch_state {
	struct spyre_buf bo;		/* SPYRE_ARG_BUF_BYTES: blocks, then records */
	uint32_t next;			/* the block new bindings take next */
	uint64_t point[SPYRE_ARG_SLOTS];	/* stream point of the last launch reading each */
	uint32_t reader[SPYRE_ARG_SLOTS];	/* the record of that launch */
	int last_slot;			/* block of the last launch, -1 if none */
	uint64_t last_prog;		/* id of the program of the last launch, 0 if none */
	uint64_t last_args[SPYRE_ARG_WORDS];
	uint32_t last_nargs;
	uint32_t rec_next;		/* the record the next launch takes */
	int last_rec;			/* record of the last launch, -1 if none */
	/* stream point of the launch writing each record; 0 once folded (or never used) */
	uint64_t rec_point[SPYRE_ARG_RECORDS];
	uint64_t done;			/* stream points up to this one are known done */
};

/* Released with its stream (struct spyre_stream.launch_release). */
static void launch_state_free(struct spyre_device *dev, struct spyre_launch_state *r)
{
	if (!r)
		return;
	spyre_bo_del(dev, &r->bo);
	free(r);
}

static int launch_state_get_locked(struct spyre_stream *s, struct spyre_launch_state **out)
{
	struct spyre_launch_state *r = s->launch;
	int ret;

	*out = NULL;
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return spyre_error(-ENOMEM, "out of memory");
		ret = spyre_bo_new(s->dev, SPYRE_ARG_BUF_BYTES, DRM_SPYRE_BO_HOST, &r->bo);
		if (ret) {
			free(r);
			return ret;
		}
		r->last_slot = -1;
		r->last_rec = -1;
		s->launch = r;
		s->launch_release = launch_state_free;
	}
	*out = r;
	return 0;
}

/* Offset of argument block @slot in the buffer. */
static size_t block_off(uint32_t slot)
{
	return (size_t)slot * SPYRE_ARG_SLOT_BYTES;
}

/* Offset of launch record @i in the buffer. */
static size_t record_off(uint32_t i)
{
	return SPYRE_ARG_RECORDS_OFF + (size_t)i * sizeof(struct spyre_launch_record);
}

static struct spyre_launch_record *record_at(struct spyre_launch_state *r, uint32_t i)
{
	return (struct spyre_launch_record *)((char *)r->bo.map + record_off(i));
}

/* Add the record of a done launch to the stream's totals. */
static void fold_record_locked(struct spyre_stream *s, const struct spyre_launch_record *rec)
{
	struct spyre_stream_stats *t = &s->stats;
	uint32_t i;

	if (rec->status == SPYRE_RECORD_UNWRITTEN)
		return;
	t->launches++;
	if (rec->status != SPYRE_ENGINE_FAULT_NONE)
		t->failed_launches++;
	t->device_ns += rec->device_ns;
	t->device_cycles += rec->device_cycles;
	t->insns += rec->insns;
	for (i = 0; i < SPYRE_MAX_CORES; i++)
		t->core_busy_cycles += rec->core_busy_cycles[i];
	t->core_cycles += rec->device_cycles * rec->cores_run;
}

/* Fold the records of every launch up to stream point @done, each once. */
static void fold_done_locked(struct spyre_stream *s, struct spyre_launch_state *r, uint64_t done)
{
	uint32_t i;

	if (done > r->done)
		r->done = done;
	spyre_trace_harvest_locked(s, r->done);		/* before these records are reused */
	for (i = 0; i < SPYRE_ARG_RECORDS; i++)
		if (r->rec_point[i] && r->rec_point[i] <= r->done) {
			fold_record_locked(s, record_at(r, i));
			r->rec_point[i] = 0;
		}
}

/*
 * Free record @i for the next launch: the ring wrapped onto the record of a
 * launch that may still be queued. Wait for it, then fold it with every
 * other record known done by then, so that the next records are free
 * without a wait as long as the device keeps up.
 */
static int record_free_locked(struct spyre_stream *s, struct spyre_launch_state *r, uint32_t i)
{
	uint64_t done;
	int ret;

	if (!r->rec_point[i])
		return 0;
	done = r->done;
	if (r->rec_point[i] > done) {
		/* It may be in the stream's pending batch job (stream.c): the thread's batches are submitted before the wait. */
		ret = spyre_batches_flush(s) ?: spyre_stream_wait_done(s, r->rec_point[i], &done);
		if (ret)
			return spyre_error(ret, "waiting for a launch record failed");
	}
	fold_done_locked(s, r, done);
	return 0;
}

/*
 * The ring wrapped onto argument block @slot, which a queued launch may still
 * read. Free without a wait when that launch is known done, or when its
 * record, still its own, is written: the device writes it after the launch,
 * which read its arguments at its start.
 */
static int block_free_locked(struct spyre_stream *s, struct spyre_launch_state *r, uint32_t slot)
{
	uint32_t i = r->reader[slot];
	int ret;

	if (r->point[slot] <= r->done)
		return 0;
	if (r->rec_point[i] == r->point[slot] &&
	    ((volatile const struct spyre_launch_record *)record_at(r, i))->status != SPYRE_RECORD_UNWRITTEN)
		return 0;
	ret = spyre_batches_flush(s) ?: spyre_stream_wait_point(s, r->point[slot]);
	if (ret)
		return spyre_error(ret, "waiting for an argument block failed");
	return 0;
}

/* Each binding must lie in an allocation of this device, big enough. */
int spyre_launch_check_bindings(struct spyre_program *pr, const spyre_dptr_t *slots)
{
	struct spyre_device *dev = pr->dev;
	const struct spyre_alloc *a;
	uint32_t i;
	int ret = 0;

	pthread_mutex_lock(&dev->lock);
	for (i = 0; i < pr->hdr.num_syms && !ret; i++) {
		a = spyre_alloc_find_locked(dev, slots[i]);
		if (!a)
			ret = spyre_error(-EINVAL, "slot %u '%s': 0x%llx is not device memory of %s",
					  i, pr->syms[i].name, (unsigned long long)slots[i],
					  dev->props.devnode);
		else if (a->base + a->span - slots[i] < pr->syms[i].size)
			ret = spyre_error(-EINVAL, "slot %u '%s' needs %llu bytes, the binding has %llu",
					  i, pr->syms[i].name,
					  (unsigned long long)pr->syms[i].size,
					  (unsigned long long)(a->base + a->span - slots[i]));
		else if (slots[i] % SPYRE_STICK_BYTES)
			ret = spyre_error(-EINVAL, "slot %u '%s': 0x%llx is not 128-byte aligned", i,
					  pr->syms[i].name, (unsigned long long)slots[i]);
	}
	pthread_mutex_unlock(&dev->lock);
	return ret;
}

/*
 * Every launch of the program queued so far on any stream: they run the one
 * device image (and read the host copy when they upload it), so new bindings
 * may be patched in only after they are done.
 */
static int wait_users_locked(struct spyre_program *pr)
{
	struct spyre_device *dev = pr->dev;
	uint32_t i;
	int ret = 0;

	for (i = 0; i < pr->nusers && !ret; i++) {
		/*
		 * The stream by its id (a pointer may have been freed and reused),
		 * referenced while waiting: another thread may destroy it meanwhile.
		 * A destroyed stream finished its work. The caller's own stream
		 * counts too: a queued upload there still reads the host copy.
		 */
		uint64_t id = pr->users[i].id;
		struct spyre_stream *s = spyre_stream_next(dev, id - 1, id);

		if (s) {
			ret = spyre_stream_wait_point(s, pr->users[i].point);
			spyre_stream_put(s);
		}
	}
	if (ret)
		return spyre_error(ret, "waiting for earlier launches of the program failed");
	return 0;
}

static void note_user_locked(struct spyre_program *pr, struct spyre_stream *s)
{
	uint32_t i;

	for (i = 0; i < pr->nusers; i++)
		if (pr->users[i].s == s && pr->users[i].id == s->id)
			break;
	if (i == pr->nusers) {
		if (pr->nusers == sizeof(pr->users) / sizeof(pr->users[0]))
			i = s->id % pr->nusers;		/* evict one: it is waited for below */
		else
			pr->nusers++;
	}
	pr->users[i].s = s;
	pr->users[i].id = s->id;
	pr->users[i].point = s->point;
}

/* Patch path, step 1-2: patch the relocations of changed slots into the host copy. */
static int patch_locked(struct spyre_program *pr, const spyre_dptr_t *slots, bool *changed)
{
	int ret;

	*changed = !pr->patched || memcmp(pr->bound, slots, pr->hdr.num_syms * sizeof(*slots));
	if (!*changed)
		return 0;
	ret = wait_users_locked(pr);
	if (ret)
		return ret;
	spyre_patch_apply(pr->host.map, pr->relocs, pr->hdr.num_relocs, slots,
			  pr->patched ? pr->bound : NULL);
	memcpy(pr->bound, slots, pr->hdr.num_syms * sizeof(*slots));
	pr->patched = true;
	return 0;
}

/*
 * Patch path, bindings unchanged: may a launch on @s run the device image
 * without uploading it again? Yes once the job that uploaded the bindings is
 * known done without failure, and on that job's own stream, which orders
 * the launch after it (and is poisoned if it fails). On another stream, the
 * stream of the upload is waited for on the host and its queue asked: the
 * upload is redone if its job or a later one of that queue failed (a device
 * reset canceled it, say), if its stream is gone, or if no submitted job
 * carries it. Re-uploading is always correct; a stale image never is.
 */
static int image_current_locked(struct spyre_program *pr, struct spyre_stream *s, bool *current)
{
	struct spyre_stream *u;
	int ret;

	*current = pr->image_ok || (pr->up_id && pr->up_id == s->id);
	if (*current || !pr->up_id)
		return 0;
	u = spyre_stream_next(pr->dev, pr->up_id - 1, pr->up_id);
	if (!u)
		return 0;
	ret = spyre_stream_point_ok(u, pr->up_point, pr->up_errors);
	spyre_stream_put(u);
	if (ret < 0)
		return spyre_error(ret, "waiting for the upload of the program's image failed");
	pr->image_ok = *current = ret == 1;
	return 0;
}

/*
 * While @s captures: the launch as a node of the graph, with its argument
 * block; no ring block, no record. The patch path's shared image cannot be
 * replayed with bindings of its own.
 */
static int capture_launch_locked(struct spyre_stream *s, struct spyre_program *pr, uint32_t core_mask,
				 const spyre_dptr_t *slots, const uint64_t *scalars)
{
	struct spyre_pkt_launch pk;
	uint64_t args[SPYRE_ARG_WORDS];
	uint32_t nsyms = pr->hdr.num_syms, nscal = pr->hdr.num_scalars;
	struct spyre_job job = { .packets = &pk, .count = 1, .what = "launch", .core_mask = core_mask,
				 .node = SPYRE_GRAPH_NODE_LAUNCH, .prog = pr, .args = args,
				 .nslots = nsyms, .nargs = nsyms + nscal };

	if (pr->path != SPYRE_LAUNCH_FAST)
		return spyre_error(-ENOTSUP, "spyre_launch: the stream is capturing a graph, and the "
				   "program has relocations (the patch path): only patch-free "
				   "programs can be captured");
	memcpy(args, slots, nsyms * sizeof(*args));
	if (nscal)
		memcpy(args + nsyms, scalars, nscal * sizeof(*args));
	memset(&pk, 0, sizeof(pk));
	spyre_prep_launch(&pk, pr->image.va, 0, core_mask, 0);
	return spyre_stream_submit_locked(s, &job);
}

int spyre_launch_records_take_locked(struct spyre_stream *s, void *packets, uint32_t count,
				     uint32_t *recs, uint32_t *n)
{
	struct spyre_launch_state *r = NULL;
	uint32_t i, rec;
	int ret = 0;

	*n = 0;
	/* A job's records must be distinct: the ring may not wrap within it. */
	if (count > SPYRE_ARG_RECORDS)
		return spyre_error(-E2BIG, "a job of %u packets", count);
	for (i = 0; i < count && !ret; i++) {
		struct spyre_pkt_launch *l = (struct spyre_pkt_launch *)((char *)packets + (size_t)i * SPYRE_PKT_SIZE);

		if (l->hdr.opcode != SPYRE_PKT_OP_LAUNCH)
			continue;
		if (!r) {
			ret = launch_state_get_locked(s, &r);
			if (ret)
				break;
		}
		rec = r->rec_next;
		ret = record_free_locked(s, r, rec);
		if (ret)
			break;
		record_at(r, rec)->status = SPYRE_RECORD_UNWRITTEN;
		l->record = spyre_cpu_to_le64(r->bo.va + record_off(rec));
		r->rec_next = (rec + 1) % SPYRE_ARG_RECORDS;
		recs[(*n)++] = rec;
	}
	return ret;
}

void spyre_launch_records_submitted_locked(struct spyre_stream *s, const uint32_t *recs, uint32_t n)
{
	struct spyre_launch_state *r = s->launch;
	uint32_t i;

	for (i = 0; i < n; i++) {
		r->rec_point[recs[i]] = s->point;
		r->last_rec = (int)recs[i];
	}
}

static int launch(spyre_stream_t *s, spyre_program_t *pr, uint32_t core_mask,
		  const spyre_dptr_t *slots, uint32_t nslots, const uint64_t *scalars, uint32_t nscalars)
{
	struct {
		struct spyre_pkt_copy upload;
		struct spyre_pkt_launch launch;
	} pk;
	struct spyre_job job = { .what = "launch", .core_mask = core_mask };
	struct spyre_launch_state *r;
	uint32_t nargs, slot, rec, arg_bytes = 0, nsyms, nscal;
	bool changed = false, current = true, same;
	uint64_t *args;
	int ret;

	if (!s || !pr || (nslots && !slots) || (nscalars && !scalars))
		return spyre_error(-EINVAL, "spyre_launch: NULL argument");
	if (s->dev != pr->dev)
		return spyre_error(-EINVAL, "spyre_launch: the stream and the program are on different devices");
	nsyms = pr->hdr.num_syms;
	nscal = pr->hdr.num_scalars;
	if (nslots != nsyms || nscalars != nscal)
		return spyre_error(-EINVAL, "spyre_launch: the program takes %u slots and %u scalars, "
				   "got %u and %u", nsyms, nscal, nslots, nscalars);
	if (!core_mask)
		return spyre_error(-EINVAL, "spyre_launch: empty core mask");
	ret = spyre_launch_check_bindings(pr, slots);
	if (ret)
		return ret;
	nargs = nsyms + nscal;

	pthread_mutex_lock(&s->lock);
	if (s->capture) {
		ret = capture_launch_locked(s, pr, core_mask, slots, scalars);
		goto out;
	}
	ret = launch_state_get_locked(s, &r);
	if (ret)
		goto out;
	/* Every launch writes a record of its own. */
	rec = r->rec_next;
	ret = record_free_locked(s, r, rec);
	if (ret)
		goto out;
	/* Unchanged bindings of the same program: reuse the last argument block. */
	same = r->last_prog == pr->id && r->last_slot >= 0 && r->last_nargs == nargs &&
	       !memcmp(r->last_args, slots, nsyms * 8) &&
	       !memcmp(r->last_args + nsyms, scalars ? scalars : r->last_args, nscal * 8);
	if (same) {
		slot = (uint32_t)r->last_slot;
	} else {
		slot = r->next;
		r->next = (r->next + 1) % SPYRE_ARG_SLOTS;
		ret = block_free_locked(s, r, slot);
		if (ret)
			goto out;
		args = (uint64_t *)((char *)r->bo.map + block_off(slot));
		memcpy(args, slots, nsyms * 8);
		if (nscal)
			memcpy(args + nsyms, scalars, nscal * 8);
		memcpy(r->last_args, args, nargs * 8);
		arg_bytes = nargs * 8;
		r->last_nargs = nargs;
		r->last_slot = (int)slot;
		r->last_prog = pr->id;
	}

	memset(&pk, 0, sizeof(pk));
	job.packets = &pk.launch;
	job.count = 1;
	if (pr->path == SPYRE_LAUNCH_PATCH) {
		/* Its waits for earlier launches may wait for pending batch jobs: submitted first. */
		ret = spyre_batches_flush(s);
		if (ret)
			goto out;
		pthread_mutex_lock(&pr->lock);
		/* A full table cannot track one more stream: drain everything first. */
		if (pr->nusers == sizeof(pr->users) / sizeof(pr->users[0]))
			ret = wait_users_locked(pr);
		ret = ret ?: patch_locked(pr, slots, &changed);
		if (!ret && !changed)
			ret = image_current_locked(pr, s, &current);
		if (!ret && (changed || !current)) {
			/* Step 3: upload the patched copy, in the same job as the launch. */
			spyre_program_prep_upload(pr, &pk.upload);
			job.packets = &pk.upload;
			job.count = 2;
			job.bytes = pr->upload_size;
		}
		if (ret) {
			pthread_mutex_unlock(&pr->lock);
			goto out;
		}
	}
	job.record = record_at(r, rec);
	record_at(r, rec)->status = SPYRE_RECORD_UNWRITTEN;
	spyre_prep_launch(&pk.launch, pr->image.va, r->bo.va + block_off(slot), core_mask,
			  r->bo.va + record_off(rec));
	ret = spyre_stream_submit_locked(s, &job);
	if (!ret) {
		r->point[slot] = s->point;
		r->reader[slot] = rec;
		r->rec_point[rec] = s->point;
		r->rec_next = (rec + 1) % SPYRE_ARG_RECORDS;
		r->last_rec = (int)rec;
		s->stats.arg_bytes += arg_bytes;
		if (job.count == 2)
			s->stats.upload_bytes += pr->upload_size;
	}
	if (pr->path == SPYRE_LAUNCH_PATCH) {
		if (job.count == 2) {
			/* The job to wait for, or none: the next launch uploads. */
			pr->up_id = ret ? 0 : s->id;
			pr->up_point = s->point;
			pr->up_errors = s->errors_seen;
			pr->image_ok = false;
		}
		if (!ret)
			note_user_locked(pr, s);
		pthread_mutex_unlock(&pr->lock);
	}
out:
	pthread_mutex_unlock(&s->lock);
	return ret;
}

SPYRE_EXPORT int spyre_launch(spyre_stream_t *s, spyre_program_t *pr, uint32_t core_mask,
			      const spyre_dptr_t *slots, uint32_t nslots, const uint64_t *scalars,
			      uint32_t nscalars)
{
	SPYRE_TRACED("spyre_launch", "launch", launch(s, pr, core_mask, slots, nslots, scalars, nscalars),
		     "core_mask", core_mask);
}

SPYRE_EXPORT int spyre_stream_last_launch(spyre_stream_t *s, struct spyre_launch_stats *st)
{
	struct spyre_launch_stats r = { .size = sizeof(r) };
	struct spyre_launch_record rec;
	uint32_t n, i;
	int ret, have = 0;

	if (!s || !st || st->size < 8)
		return spyre_error(-EINVAL, "spyre_stream_last_launch: NULL argument or size not set");
	ret = spyre_stream_synchronize(s);
	if (ret && ret != -EIO)
		return ret;
	/* A copy: another thread's launches reuse records. */
	pthread_mutex_lock(&s->lock);
	if (s->launch && s->launch->last_rec >= 0) {
		rec = *record_at(s->launch, (uint32_t)s->launch->last_rec);
		have = 1;
	}
	pthread_mutex_unlock(&s->lock);
	if (!have)
		return spyre_error(-ENOENT, "no launch on this stream yet");
	if (rec.status == SPYRE_RECORD_UNWRITTEN)
		return ret ?: spyre_error(-EBUSY, "the stream's last launch, enqueued by another "
					  "thread meanwhile, has not run yet");
	r.status = rec.status;
	r.device_ns = rec.device_ns;
	r.device_cycles = rec.device_cycles;
	r.insns = rec.insns;
	r.cores_run = rec.cores_run;
	r.fault_core = rec.fault_core;
	r.fault_pc = rec.fault_pc;
	static_assert(sizeof(r.core_busy_cycles) / sizeof(r.core_busy_cycles[0]) == SPYRE_MAX_CORES,
		      "spyre.h reports every core of the launch record");
	for (i = 0; i < SPYRE_MAX_CORES; i++)
		r.core_busy_cycles[i] = rec.core_busy_cycles[i];
	n = st->size < sizeof(r) ? st->size : sizeof(r);
	memcpy((char *)st + 4, (char *)&r + 4, n - 4);
	return ret;
}

/*
 * Wait for the work enqueued on @s so far, even on a poisoned stream (its
 * jobs still end), and tell in *@point how far that is. Return: 0, -EIO for
 * a poisoned stream (waited for all the same), another status on failure.
 */
static int stats_wait(struct spyre_stream *s, uint64_t *point)
{
	int ret, w;

	pthread_mutex_lock(&s->lock);
	*point = s->point;
	pthread_mutex_unlock(&s->lock);
	ret = spyre_stream_synchronize(s);
	if (ret == -EIO) {
		/* It may have failed before its wait. */
		w = spyre_stream_wait_point(s, *point);
		if (w)
			return spyre_error(w, "waiting for the stream failed");
	}
	return ret;
}

/*
 * Wait for the work enqueued on @s so far and fold its launches; later ones,
 * enqueued by other threads meanwhile, are folded by a later call or by the
 * launch that reuses their record. Return: 0 or -EIO (a poisoned stream,
 * folded all the same) with s->lock held, another status without.
 */
static int stats_settle_lock(struct spyre_stream *s)
{
	uint64_t point;
	int ret = stats_wait(s, &point);

	if (ret && ret != -EIO)
		return ret;
	pthread_mutex_lock(&s->lock);
	if (s->launch)
		fold_done_locked(s, s->launch, point);
	return ret;
}

static int stream_get_stats(spyre_stream_t *s, struct spyre_stream_stats *st)
{
	struct spyre_stream_stats r;
	uint32_t n;
	int ret;

	if (!s || !st || st->size < 8)
		return spyre_error(-EINVAL, "spyre_stream_get_stats: NULL argument or size not set");
	ret = stats_settle_lock(s);
	if (ret && ret != -EIO)
		return ret;
	r = s->stats;
	pthread_mutex_unlock(&s->lock);
	r.size = sizeof(r);
	r.pad = 0;
	n = st->size < sizeof(r) ? st->size : sizeof(r);
	memcpy((char *)st + 4, (char *)&r + 4, n - 4);
	return ret;
}

/* Traced with the totals it returns: a trace's launches of a step add up to them. */
SPYRE_EXPORT int spyre_stream_get_stats(spyre_stream_t *s, struct spyre_stream_stats *st)
{
	const struct spyre_trace_hooks *th = spyre_tracer_get();
	uint64_t e = spyre_error_count();
	struct spyre_trace_call tc;
	bool full;
	int ret;

	if (__builtin_expect(!th, 1))
		return spyre_error_ensure(stream_get_stats(s, st), e, "spyre_stream_get_stats");
	th->call_begin(&tc, "spyre_stream_get_stats", NULL);
	ret = spyre_error_ensure(stream_get_stats(s, st), e, "spyre_stream_get_stats");
	full = (!ret || ret == -EIO) && st->size >= offsetof(struct spyre_stream_stats, device_cycles);
	th->call_end(&tc, ret, "launches", full ? st->launches : 0, "device_ns", full ? st->device_ns : 0);
	return ret;
}

static int stream_reset_stats(spyre_stream_t *s)
{
	int ret;

	if (!s)
		return spyre_error(-EINVAL, "spyre_stream_reset_stats: NULL stream");
	ret = stats_settle_lock(s);
	if (ret && ret != -EIO)
		return ret;
	/* What is done now counts toward no later total. */
	memset(&s->stats, 0, sizeof(s->stats));
	pthread_mutex_unlock(&s->lock);
	return ret;
}

SPYRE_EXPORT int spyre_stream_reset_stats(spyre_stream_t *s)
{
	SPYRE_TRACED("spyre_stream_reset_stats", NULL, stream_reset_stats(s), NULL, 0);
}
