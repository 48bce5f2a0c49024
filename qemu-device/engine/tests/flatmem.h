/* SPDX-License-Identifier: MIT */
/*
 * flatmem.h - a flat device memory for host tests of the engine: one
 * buffer mapped at VA [base, base + size), with an optional "hole" that
 * faults like an unmapped page, plus helpers to place a built program and
 * its argument block and launch it.
 */
#ifndef FLATMEM_H
#define FLATMEM_H

#include <stddef.h>
#include <stdint.h>

#include "spyre_engine.h"

#define FLATMEM_FAULT	1	/* the code the callbacks return for an unmapped VA */

struct flatmem {
	uint8_t *buf;
	uint64_t base, size;
	uint64_t hole_lo, hole_hi;	/* [lo, hi) faults; empty if lo == hi */
	uint64_t next;			/* bump allocator, offset from base */
	uint64_t reads, writes;		/* callback counts */
};

extern const struct spyre_engine_mem_ops flatmem_ops;

int flatmem_init(struct flatmem *m, uint64_t base, uint64_t size);
void flatmem_fini(struct flatmem *m);
/* Allocate len bytes (128-byte aligned, zeroed); returns the VA. Aborts when full. */
uint64_t flatmem_alloc(struct flatmem *m, uint64_t len);
void *flatmem_ptr(struct flatmem *m, uint64_t va);

/*
 * Copy image into memory, write the argument block (num_slots VAs then
 * num_scalars scalars) and launch on core_mask. Returns the launch status.
 */
int flatmem_run(struct flatmem *m, struct spyre_engine *e, const void *image, size_t size,
		const uint64_t *slots, uint32_t num_slots, const uint64_t *scalars,
		uint32_t num_scalars, uint32_t core_mask, struct spyre_launch_result *res);

#endif /* FLATMEM_H */
