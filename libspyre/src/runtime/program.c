// SPDX-License-Identifier: MIT
/*
 * Programs and launch. A program image (uapi/spyre_isa.h) is uploaded to a
 * device buffer once. Two launch paths:
 *  - patch (baseline): the bound slot addresses are patched into a host copy
 *    of the image through its relocation table and the copy is uploaded
 *    before the LAUNCH - three sequential steps, skipped when the bindings
 *    are unchanged, re-patching only the relocations of changed slots;
 *  - fast (patch-free): the image is never touched again; a launch writes
 *    only its argument block into the stream's ring, and reuses the previous
 *    block when the bindings are unchanged.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_hw.h"
#include "spyre_isa.h"
#include "internal.h"

struct spyre_program {
	struct spyre_device *dev;
	size_t size, upload_size;
	uint32_t num_syms, num_scalars, num_cores;
	struct spyre_prog_sym *syms;
	struct spyre_reloc_site *relocs;
	uint32_t num_relocs;
	enum spyre_launch_path path;
	struct spyre_buf image;		/* device copy the engine runs */
	/* patch path */
	pthread_mutex_t lock;		/* Protects the patch state */
	struct spyre_buf host;		/* patched host copy, the upload source */
	uint64_t *bound;		/* slot addresses patched into @host */
	bool patched;
	/* The last launch of the program on each stream that ran it. */
	struct {
		struct spyre_stream *s;
		uint64_t id, point;
	} users[16];
	uint32_t nusers;
};

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
	int last_slot;			/* block of the last launch, -1 if none */
	struct spyre_program *last_prog;
	uint64_t last_args[SPYRE_ARG_WORDS];
	uint32_t last_nargs;
	uint32_t rec_next;		/* the record the next launch takes */
	int last_rec;			/* record of the last launch, -1 if none */
	/* stream point of the launch writing each record; 0 once folded (or never used) */
	uint64_t rec_point[SPYRE_ARG_RECORDS];
	uint64_t done;			/* stream points up to this one are known done */
};

/*
 * The status a record holds until the device writes it: no engine fault
 * cause. A record that still holds it once its launch's job is done belongs
 * to a launch that never ran (its job failed before it, or was reset).
 */
#define RECORD_UNWRITTEN 0xffffffffu
static_assert(SPYRE_ENGINE_FAULT_COUNT < RECORD_UNWRITTEN, "no engine fault looks unwritten");

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
	}
	*out = r;
	return 0;
}

void spyre_launch_state_free(struct spyre_device *dev, struct spyre_launch_state *r)
{
	if (!r)
		return;
	spyre_bo_del(dev, &r->bo);
	free(r);
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

const struct spyre_launch_record *spyre_launch_record_at(struct spyre_stream *s, uint64_t va)
{
	struct spyre_launch_state *r = s->launch;

	if (!r || va < r->bo.va + record_off(0) || va >= r->bo.va + record_off(SPYRE_ARG_RECORDS))
		return NULL;
	return (const struct spyre_launch_record *)((char *)r->bo.map + (va - r->bo.va));
}

/* Add the record of a done launch to the stream's totals. */
static void fold_record_locked(struct spyre_stream *s, const struct spyre_launch_record *rec)
{
	struct spyre_stream_stats *t = &s->stats;
	uint32_t i;

	if (rec->status == RECORD_UNWRITTEN)
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
	if (s->trace)		/* before these records are reused */
		spyre_trace_harvest_locked(s, r->done);
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
		ret = spyre_stream_wait_done(s, r->rec_point[i], &done);
		if (ret)
			return spyre_error(ret, "waiting for a launch record failed");
	}
	fold_done_locked(s, r, done);
	return 0;
}

static int parse(struct spyre_program *pr, const uint8_t *img, size_t size)
{
	struct spyre_image im;
	int ret = spyre_image_parse(img, size, &im);

	if (ret)
		return ret;
	pr->num_syms = im.num_syms;
	pr->num_scalars = im.num_scalars;
	pr->num_cores = im.num_cores;
	pr->num_relocs = im.num_relocs;
	pr->syms = im.syms;
	pr->relocs = im.relocs;
	return 0;
}

static void program_free(struct spyre_program *pr)
{
	if (pr->image.handle)
		spyre_bo_del(pr->dev, &pr->image);
	if (pr->host.handle)
		spyre_bo_del(pr->dev, &pr->host);
	free(pr->syms);
	free(pr->relocs);
	free(pr->bound);
	pthread_mutex_destroy(&pr->lock);
	free(pr);
}

/* The COPY of the host copy to the device image: at load, and after a re-patch. */
static void prep_upload(const struct spyre_program *pr, struct spyre_pkt_copy *p)
{
	spyre_prep_copy_va(p, pr->host.va, pr->image.va, pr->upload_size);
}

static int upload_work(struct spyre_stream *s, void *arg)
{
	struct spyre_pkt_copy p;

	prep_upload(arg, &p);
	return spyre_stream_submit(s, &p, 1);
}

static int program_load(spyre_device_t *dev, const void *image, size_t size, spyre_program_t **out)
{
	struct spyre_program *pr;
	int ret;

	if (!dev || !image || !out)
		return spyre_error(-EINVAL, "spyre_program_load: NULL argument");
	pr = calloc(1, sizeof(*pr));
	if (!pr)
		return spyre_error(-ENOMEM, "out of memory");
	pr->dev = dev;
	pr->size = size;
	pr->upload_size = (size + SPYRE_STICK_BYTES - 1) & ~(size_t)(SPYRE_STICK_BYTES - 1);
	pthread_mutex_init(&pr->lock, NULL);
	ret = parse(pr, image, size);
	pr->path = pr->num_relocs ? SPYRE_LAUNCH_PATCH : SPYRE_LAUNCH_FAST;
	pr->bound = calloc(pr->num_syms + 1, sizeof(*pr->bound));
	if (!ret && !pr->bound)
		ret = spyre_error(-ENOMEM, "out of memory");
	/* The host copy: the patch path's source, and the first upload's. */
	ret = ret ?: spyre_bo_new(dev, pr->upload_size, DRM_SPYRE_BO_HOST, &pr->host);
	ret = ret ?: spyre_bo_new(dev, pr->upload_size, 0, &pr->image);
	if (ret) {
		program_free(pr);
		return ret;
	}
	memcpy(pr->host.map, image, size);
	/* Upload once; a fast-path program is never written again. */
	ret = spyre_internal_sync(dev, upload_work, pr);
	if (ret) {
		program_free(pr);
		return ret;
	}
	*out = pr;
	return 0;
}

SPYRE_EXPORT int spyre_program_load(spyre_device_t *dev, const void *image, size_t size,
				    spyre_program_t **out)
{
	SPYRE_TRACED("spyre_program_load", "program upload", program_load(dev, image, size, out),
		     "bytes", size);
}

static int program_unload(spyre_program_t *pr)
{
	struct spyre_device *dev;
	struct spyre_stream *s;
	uint64_t id = 0, last;

	if (!pr)
		return 0;
	dev = pr->dev;
	/* Streams may still run it: let them finish, and forget it. */
	spyre_device_synchronize(dev);
	pthread_mutex_lock(&dev->lock);
	last = dev->next_stream_id;
	pthread_mutex_unlock(&dev->lock);
	while ((s = spyre_stream_next(dev, id, last))) {
		pthread_mutex_lock(&s->lock);
		if (s->launch && s->launch->last_prog == pr)
			s->launch->last_prog = NULL;
		pthread_mutex_unlock(&s->lock);
		id = s->id;
		spyre_stream_put(s);
	}
	program_free(pr);
	return 0;
}

SPYRE_EXPORT int spyre_program_unload(spyre_program_t *pr)
{
	SPYRE_TRACED("spyre_program_unload", NULL, program_unload(pr), NULL, 0);
}

SPYRE_EXPORT int spyre_program_get_info(spyre_program_t *pr, struct spyre_program_info *info)
{
	struct spyre_program_info r = { .size = sizeof(r) };
	uint32_t n;

	if (!pr || !info || info->size < 8)
		return spyre_error(-EINVAL, "spyre_program_get_info: NULL argument or size not set");
	r.path = pr->path;
	r.num_slots = pr->num_syms;
	r.num_scalars = pr->num_scalars;
	r.num_relocs = pr->num_relocs;
	r.num_cores = pr->num_cores;
	r.image_bytes = pr->size;
	n = info->size < sizeof(r) ? info->size : sizeof(r);
	memcpy((char *)info + 4, (char *)&r + 4, n - 4);
	return 0;
}

SPYRE_EXPORT int spyre_program_find_slot(spyre_program_t *pr, const char *name, uint32_t *index)
{
	uint32_t i;

	if (!pr || !name || !index)
		return spyre_error(-EINVAL, "spyre_program_find_slot: NULL argument");
	for (i = 0; i < pr->num_syms; i++)
		if (!strcmp(pr->syms[i].name, name)) {
			*index = i;
			return 0;
		}
	return spyre_error(-ENOENT, "the program has no slot named '%s'", name);
}

SPYRE_EXPORT int spyre_program_slot_info(spyre_program_t *pr, uint32_t index,
					 struct spyre_slot_info *info)
{
	struct spyre_slot_info r = { .size = sizeof(r) };
	const struct spyre_prog_sym *y;
	uint32_t n, d;

	if (!pr || !info || info->size < 8)
		return spyre_error(-EINVAL, "spyre_program_slot_info: NULL argument or size not set");
	if (index >= pr->num_syms)
		return spyre_error(-EINVAL, "slot %u does not exist (%u slots)", index, pr->num_syms);
	y = &pr->syms[index];
	r.index = index;
	memcpy(r.name, y->name, sizeof(r.name));
	r.dtype = y->dtype;
	r.rank = y->rank;
	for (d = 0; d < 4; d++)
		r.shape[d] = y->shape[d];
	r.bytes = y->size;
	r.flags = y->flags;
	n = info->size < sizeof(r) ? info->size : sizeof(r);
	memcpy((char *)info + 4, (char *)&r + 4, n - 4);
	return 0;
}

/* Each binding must lie in an allocation of this device, big enough. */
static int check_bindings(struct spyre_program *pr, const spyre_dptr_t *slots)
{
	struct spyre_device *dev = pr->dev;
	const struct spyre_alloc *a;
	uint32_t i;
	int ret = 0;

	pthread_mutex_lock(&dev->lock);
	for (i = 0; i < pr->num_syms && !ret; i++) {
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
	return ret;
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

	*changed = !pr->patched || memcmp(pr->bound, slots, pr->num_syms * sizeof(*slots));
	if (!*changed)
		return 0;
	ret = wait_users_locked(pr);
	if (ret)
		return spyre_error(ret, "waiting for earlier launches of the program failed");
	spyre_patch_apply(pr->host.map, pr->relocs, pr->num_relocs, slots,
			  pr->patched ? pr->bound : NULL);
	memcpy(pr->bound, slots, pr->num_syms * sizeof(*slots));
	pr->patched = true;
	return 0;
}

static int launch(spyre_stream_t *s, spyre_program_t *pr, uint32_t core_mask,
		  const spyre_dptr_t *slots, uint32_t nslots, const uint64_t *scalars, uint32_t nscalars)
{
	struct {
		struct spyre_pkt_copy upload;
		struct spyre_pkt_launch launch;
	} job;
	struct spyre_launch_state *r;
	uint32_t nargs, slot, rec, arg_bytes = 0, first = 1;
	bool changed = false, same;
	uint64_t *args;
	int ret;

	if (!s || !pr || (nslots && !slots) || (nscalars && !scalars))
		return spyre_error(-EINVAL, "spyre_launch: NULL argument");
	if (s->dev != pr->dev)
		return spyre_error(-EINVAL, "spyre_launch: the stream and the program are on different devices");
	if (nslots != pr->num_syms || nscalars != pr->num_scalars)
		return spyre_error(-EINVAL, "spyre_launch: the program takes %u slots and %u scalars, "
				   "got %u and %u", pr->num_syms, pr->num_scalars, nslots, nscalars);
	if (!core_mask)
		return spyre_error(-EINVAL, "spyre_launch: empty core mask");
	ret = check_bindings(pr, slots);
	if (ret)
		return ret;
	nargs = pr->num_syms + pr->num_scalars;

	pthread_mutex_lock(&s->lock);
	ret = launch_state_get_locked(s, &r);
	if (ret)
		goto out;
	/* Every launch writes a record of its own. */
	rec = r->rec_next;
	ret = record_free_locked(s, r, rec);
	if (ret)
		goto out;
	/* Unchanged bindings of the same program: reuse the last argument block. */
	same = r->last_prog == pr && r->last_slot >= 0 && r->last_nargs == nargs &&
	       !memcmp(r->last_args, slots, pr->num_syms * 8) &&
	       !memcmp(r->last_args + pr->num_syms, scalars ? scalars : r->last_args,
		       pr->num_scalars * 8);
	if (same) {
		slot = (uint32_t)r->last_slot;
	} else {
		slot = r->next;
		r->next = (r->next + 1) % SPYRE_ARG_SLOTS;
		/* The ring wrapped onto a block a queued launch may still read. */
		ret = spyre_stream_wait_point(s, r->point[slot]);
		if (ret) {
			ret = spyre_error(ret, "waiting for an argument block failed");
			goto out;
		}
		args = (uint64_t *)((char *)r->bo.map + block_off(slot));
		memcpy(args, slots, pr->num_syms * 8);
		if (pr->num_scalars)
			memcpy(args + pr->num_syms, scalars, pr->num_scalars * 8);
		memcpy(r->last_args, args, nargs * 8);
		arg_bytes = nargs * 8;
		r->last_nargs = nargs;
		r->last_slot = (int)slot;
		r->last_prog = pr;
	}

	memset(&job, 0, sizeof(job));
	if (pr->path == SPYRE_LAUNCH_PATCH) {
		pthread_mutex_lock(&pr->lock);
		/* A full table cannot track one more stream: drain everything first. */
		if (pr->nusers == sizeof(pr->users) / sizeof(pr->users[0]))
			ret = wait_users_locked(pr);
		ret = ret ?: patch_locked(pr, slots, &changed);
		if (!ret && changed) {
			/* Step 3: upload the patched copy, in the same job as the launch. */
			prep_upload(pr, &job.upload);
			first = 0;
		}
		if (ret) {
			pthread_mutex_unlock(&pr->lock);
			goto out;
		}
	}
	record_at(r, rec)->status = RECORD_UNWRITTEN;
	spyre_prep_launch(&job.launch, pr->image.va, r->bo.va + block_off(slot), core_mask,
			  r->bo.va + record_off(rec));
	ret = spyre_stream_submit_locked(s, (const uint8_t *)&job + first * SPYRE_PKT_SIZE, 2 - first);
	if (!ret) {
		r->point[slot] = s->point;
		r->rec_point[rec] = s->point;
		r->rec_next = (rec + 1) % SPYRE_ARG_RECORDS;
		r->last_rec = (int)rec;
		s->stats.arg_bytes += arg_bytes;
		if (!first)
			s->stats.upload_bytes += pr->upload_size;
	}
	if (pr->path == SPYRE_LAUNCH_PATCH) {
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
	if (rec.status == RECORD_UNWRITTEN)
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
 * Launches up to @point are done: fold them. Later ones, enqueued by other
 * threads meanwhile, are folded by a later call or by the launch that reuses
 * their record.
 */
static void stats_fold_locked(struct spyre_stream *s, uint64_t point)
{
	if (s->launch)
		fold_done_locked(s, s->launch, point);
}

static int stream_get_stats(spyre_stream_t *s, struct spyre_stream_stats *st)
{
	struct spyre_stream_stats r;
	uint64_t point;
	uint32_t n;
	int ret;

	if (!s || !st || st->size < 8)
		return spyre_error(-EINVAL, "spyre_stream_get_stats: NULL argument or size not set");
	ret = stats_wait(s, &point);
	if (ret && ret != -EIO)
		return ret;
	pthread_mutex_lock(&s->lock);
	stats_fold_locked(s, point);
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
	struct spyre_trace_call tc;
	bool full;
	int ret;

	if (!SPYRE_TRACE_ON())
		return stream_get_stats(s, st);
	spyre_trace_call_begin(&tc, "spyre_stream_get_stats", NULL);
	ret = stream_get_stats(s, st);
	full = (!ret || ret == -EIO) && st->size >= offsetof(struct spyre_stream_stats, device_cycles);
	spyre_trace_call_end(&tc, ret, "launches", full ? st->launches : 0, "device_ns", full ? st->device_ns : 0);
	return ret;
}

static int stream_reset_stats(spyre_stream_t *s)
{
	uint64_t point;
	int ret;

	if (!s)
		return spyre_error(-EINVAL, "spyre_stream_reset_stats: NULL stream");
	ret = stats_wait(s, &point);
	if (ret && ret != -EIO)
		return ret;
	/* What is done now counts toward no later total. */
	pthread_mutex_lock(&s->lock);
	stats_fold_locked(s, point);
	memset(&s->stats, 0, sizeof(s->stats));
	pthread_mutex_unlock(&s->lock);
	return ret;
}

SPYRE_EXPORT int spyre_stream_reset_stats(spyre_stream_t *s)
{
	SPYRE_TRACED("spyre_stream_reset_stats", NULL, stream_reset_stats(s), NULL, 0);
}
