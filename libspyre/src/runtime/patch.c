// SPDX-License-Identifier: MIT
/*
 * The program container as the runtime needs it: checked once per load by
 * the ISA library (isa/spyre_isa_codec.h) - by spyre_image_check(), or by
 * the kernel library that built it - then its symbols and relocation sites
 * read from the checked view; and the patch step of the three-step launch
 * path. Pure functions: host tests check them against the ISA library's
 * relocation and against the patch-free path's address resolution.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_isa_codec.h"
#include "internal.h"

/* The ISA library's container check (the same the device runs); the device checks the instructions. */
int spyre_image_check(const void *image, size_t size, struct spyre_prog_view *v)
{
	char why[160];

	if (spyre_prog_check_container(image, size, v)) {
		spyre_prog_describe(v, why, sizeof(why));
		return spyre_error(-EINVAL, "not a valid spyre program image (%zu bytes): %s", size, why);
	}
	if (v->size != size)
		return spyre_error(-EINVAL, "program image is %zu bytes but its header says %llu", size,
				   (unsigned long long)v->size);
	return 0;
}

/* The symbols and relocation sites of a checked image, read through the ISA library's accessors. */
int spyre_image_tables(const struct spyre_prog_view *v, struct spyre_prog_sym **syms,
		       struct spyre_reloc_site **relocs)
{
	struct spyre_prog_reloc r;
	uint32_t i;

	*syms = NULL;
	*relocs = NULL;
	if (v->hdr.num_syms + v->hdr.num_scalars > SPYRE_ARG_WORDS)
		return spyre_error(-E2BIG, "program has %u slots and %u scalars; at most %u in all",
				   v->hdr.num_syms, v->hdr.num_scalars, SPYRE_ARG_WORDS);
	*syms = calloc(v->hdr.num_syms + 1, sizeof(**syms));
	*relocs = calloc(v->hdr.num_relocs + 1, sizeof(**relocs));
	if (!*syms || !*relocs) {
		free(*syms);
		free(*relocs);
		*syms = NULL;
		*relocs = NULL;
		return spyre_error(-ENOMEM, "out of memory");
	}
	for (i = 0; i < v->hdr.num_syms; i++)
		spyre_prog_get_sym(v, i, &(*syms)[i]);	/* names checked NUL-terminated */
	for (i = 0; i < v->hdr.num_relocs; i++) {
		spyre_prog_get_reloc(v, i, &r);
		(*relocs)[i].off = (uint32_t)spyre_prog_reloc_site(v, &r);
		(*relocs)[i].sym = r.sym;
		(*relocs)[i].addend = r.addend;
	}
	return 0;
}

/*
 * Write slots[sym] + addend at every site; with @prev (the slots patched
 * last time), only at sites whose slot changed. Returns the sites written.
 */
size_t spyre_patch_apply(void *image, const struct spyre_reloc_site *sites, uint32_t n,
			 const uint64_t *slots, const uint64_t *prev)
{
	size_t written = 0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		uint64_t v = slots[sites[i].sym] + sites[i].addend;

		if (prev && prev[sites[i].sym] == slots[sites[i].sym])
			continue;
		spyre_st64((uint8_t *)image + sites[i].off, v);
		written++;
	}
	return written;
}
