// SPDX-License-Identifier: MIT
/*
 * Programs: load, info, slots. A program image (uapi/spyre_isa.h) is checked
 * once - its container by the ISA library (patch.c), or by the kernel library
 * that built it (spyre_program_load_checked()) - its counts and tables read
 * from the checked view, and it is uploaded to a device buffer once. Its
 * launches (launch.c) take one of two paths:
 *  - patch (baseline): the bound slot addresses are patched into a host copy
 *    of the image through its relocation table and the copy is uploaded
 *    before the LAUNCH - three sequential steps, skipped when the bindings
 *    are unchanged, re-patching only the relocations of changed slots;
 *  - fast (patch-free): the image is never touched again; a launch writes
 *    only its argument block into the stream's ring, and reuses the previous
 *    block when the bindings are unchanged.
 * Calls go down only: to stream.c (the upload, synchronize), memory.c, patch.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_hw.h"
#include "spyre_isa_codec.h"
#include "internal.h"

static uint64_t next_program_id;	/* atomic */

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

void spyre_program_prep_upload(const struct spyre_program *pr, struct spyre_pkt_copy *p)
{
	spyre_prep_copy_va(p, pr->host.va, pr->image.va, pr->upload_size);
}

static int upload_work(struct spyre_stream *s, void *arg)
{
	struct spyre_pkt_copy p;

	spyre_program_prep_upload(arg, &p);
	return spyre_stream_copy(s, &p, SPYRE_MEMCPY_H2D);
}

/* Load the image @v viewed, its container checked. */
static int program_load(struct spyre_device *dev, const struct spyre_prog_view *v,
			spyre_program_t **out)
{
	struct spyre_program *pr;
	int ret;

	pr = calloc(1, sizeof(*pr));
	if (!pr)
		return spyre_error(-ENOMEM, "out of memory");
	pr->dev = dev;
	pr->id = __atomic_add_fetch(&next_program_id, 1, __ATOMIC_RELAXED);
	pr->size = v->size;
	pr->upload_size = (pr->size + SPYRE_STICK_BYTES - 1) & ~(size_t)(SPYRE_STICK_BYTES - 1);
	pr->hdr = v->hdr;
	pthread_mutex_init(&pr->lock, NULL);
	ret = spyre_image_tables(v, &pr->syms, &pr->relocs);
	pr->path = pr->hdr.num_relocs ? SPYRE_LAUNCH_PATCH : SPYRE_LAUNCH_FAST;
	pr->bound = calloc(pr->hdr.num_syms + 1, sizeof(*pr->bound));
	if (!ret && !pr->bound)
		ret = spyre_error(-ENOMEM, "out of memory");
	/* The host copy: the patch path's source, and the first upload's. */
	ret = ret ?: spyre_bo_new(dev, pr->upload_size, DRM_SPYRE_BO_HOST, &pr->host);
	ret = ret ?: spyre_bo_new(dev, pr->upload_size, 0, &pr->image);
	if (ret) {
		program_free(pr);
		return ret;
	}
	memcpy(pr->host.map, v->image, pr->size);
	/* Upload once; a fast-path program is never written again. */
	ret = spyre_internal_sync(dev, upload_work, pr);
	if (ret) {
		program_free(pr);
		return ret;
	}
	*out = pr;
	return 0;
}

static int program_load_image(spyre_device_t *dev, const void *image, size_t size,
			      spyre_program_t **out)
{
	struct spyre_prog_view v;
	int ret;

	if (!dev || !image || !out)
		return spyre_error(-EINVAL, "spyre_program_load: NULL argument");
	ret = spyre_image_check(image, size, &v);
	return ret ?: program_load(dev, &v, out);
}

SPYRE_EXPORT int spyre_program_load(spyre_device_t *dev, const void *image, size_t size,
				    spyre_program_t **out)
{
	SPYRE_TRACED("spyre_program_load", "program upload", program_load_image(dev, image, size, out),
		     "bytes", size);
}

static int program_load_view(struct spyre_device *dev, const struct spyre_prog_view *v,
			     struct spyre_program **out)
{
	if (!dev || !v || !out)
		return spyre_error(-EINVAL, "spyre_program_load: NULL argument");
	return program_load(dev, v, out);
}

/* Traced as the spyre_program_load() it stands for. */
int spyre_program_load_checked(struct spyre_device *dev, const struct spyre_prog_view *v,
			       struct spyre_program **out)
{
	SPYRE_TRACED("spyre_program_load", "program upload", program_load_view(dev, v, out),
		     "bytes", v ? v->size : 0);
}

/*
 * Streams may still run it: let them finish. A stream's launch state names
 * its last program by id (never reused), so nothing there refers to it.
 */
static int program_unload(spyre_program_t *pr)
{
	if (!pr)
		return 0;
	spyre_device_synchronize(pr->dev);
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
	r.num_slots = pr->hdr.num_syms;
	r.num_scalars = pr->hdr.num_scalars;
	r.num_relocs = pr->hdr.num_relocs;
	r.num_cores = pr->hdr.num_cores;
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
	for (i = 0; i < pr->hdr.num_syms; i++)
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
	if (index >= pr->hdr.num_syms)
		return spyre_error(-EINVAL, "slot %u does not exist (%u slots)", index, pr->hdr.num_syms);
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
