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
#include "../../../tests/tap.h"

#define FLATMEM_FAULT	1	/* the code the callbacks return for an unmapped VA */

struct flatmem {
	uint8_t *buf;
	uint64_t base, size;
	uint64_t hole_lo, hole_hi;	/* [lo, hi) faults; empty if lo == hi */
	uint64_t next;			/* bump allocator, offset from base */
	uint64_t reads, writes;		/* callback counts */
	int eager;			/* flatmem_run() launches with flatmem_eager_ops */
};

extern const struct spyre_engine_mem_ops flatmem_ops;		/* with probe */
extern const struct spyre_engine_mem_ops flatmem_eager_ops;	/* without */

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

/* What an engine test's main() sets up before its cases: flatmem_test_main(). */
struct flatmem_test {
	struct spyre_engine **engine;	/* made from @config, the defaults if NULL */
	const struct spyre_engine_config *config;
	struct flatmem *mem;		/* @size bytes at VA @base */
	uint64_t base, size;
	void (*setup)(void);		/* once both are made, or NULL */
};

/*
 * The main() of an engine test: the engine and memory of @t (Bail out! if
 * either cannot be made; SPYRE_ENGINE_THREADS in the environment sets its
 * host threads, cfg.threads), its setup, the cases (tests/tap.h), then both
 * are freed. Returns the exit status.
 */
int flatmem_test_main(const struct flatmem_test *t, const struct tap_case *cases, size_t n,
		      int argc, char **argv);
#define FLATMEM_TEST_MAIN(t, cases, argc, argv) \
	flatmem_test_main(t, cases, sizeof(cases) / sizeof((cases)[0]), argc, argv)

#endif /* FLATMEM_H */
