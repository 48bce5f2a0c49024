// SPDX-License-Identifier: MIT
/*
 * The program container as the runtime needs it: symbols and relocation
 * sites, and the patch step of the three-step launch path. Pure functions:
 * host tests check them against the engine's own relocation and against the
 * patch-free path's address resolution.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_isa.h"
#include "internal.h"

static uint32_t ld32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* Bounds checks of the container; the device validates everything else. */
int spyre_image_parse(const void *image, size_t size, struct spyre_image *im)
{
	const uint8_t *img = image;
	const struct spyre_prog_hdr *h = image;
	const struct spyre_prog_reloc *r;
	uint32_t i, code;

	memset(im, 0, sizeof(*im));
	if (size < sizeof(*h) || h->magic != SPYRE_PROG_MAGIC || h->version != SPYRE_PROG_VERSION ||
	    h->total_size != size || !h->num_cores || h->num_cores > SPYRE_MAX_CORES ||
	    h->num_syms > SPYRE_PROG_MAX_SYMS || h->num_scalars > SPYRE_PROG_MAX_SCALARS ||
	    h->num_relocs > SPYRE_PROG_MAX_RELOCS ||
	    (uint64_t)h->core_off + 8ull * h->num_cores > size ||
	    (uint64_t)h->sym_off + sizeof(struct spyre_prog_sym) * (uint64_t)h->num_syms > size ||
	    (uint64_t)h->reloc_off + sizeof(*r) * (uint64_t)h->num_relocs > size)
		return spyre_error(-EINVAL, "not a valid spyre program image (%zu bytes)", size);
	if (h->num_syms + h->num_scalars > SPYRE_ARG_WORDS)
		return spyre_error(-E2BIG, "program has %u slots and %u scalars; at most %u in all",
				   h->num_syms, h->num_scalars, SPYRE_ARG_WORDS);
	im->num_syms = h->num_syms;
	im->num_scalars = h->num_scalars;
	im->num_cores = h->num_cores;
	im->num_relocs = h->num_relocs;
	im->syms = calloc(h->num_syms + 1, sizeof(*im->syms));
	im->relocs = calloc(h->num_relocs + 1, sizeof(*im->relocs));
	if (!im->syms || !im->relocs) {
		free(im->syms);
		free(im->relocs);
		return spyre_error(-ENOMEM, "out of memory");
	}
	memcpy(im->syms, img + h->sym_off, sizeof(*im->syms) * h->num_syms);
	for (i = 0; i < h->num_syms; i++)
		im->syms[i].name[SPYRE_SYM_NAME_LEN - 1] = '\0';
	r = (const void *)(img + h->reloc_off);
	for (i = 0; i < h->num_relocs; i++) {
		if (r[i].core >= h->num_cores || r[i].sym >= h->num_syms) {
			free(im->syms);
			free(im->relocs);
			return spyre_error(-EINVAL, "relocation %u names core %u / slot %u", i,
					   r[i].core, r[i].sym);
		}
		code = ld32(img + h->core_off + 8 * r[i].core);
		if (r[i].pc >= ld32(img + h->core_off + 8 * r[i].core + 4) ||
		    (uint64_t)code + (uint64_t)r[i].pc * SPYRE_INSN_BYTES + 16 > size) {
			free(im->syms);
			free(im->relocs);
			return spyre_error(-EINVAL, "relocation %u is outside the code", i);
		}
		im->relocs[i].off = code + r[i].pc * SPYRE_INSN_BYTES + 8;
		im->relocs[i].sym = r[i].sym;
		im->relocs[i].addend = r[i].addend;
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
		memcpy((uint8_t *)image + sites[i].off, &v, 8);
		written++;
	}
	return written;
}
