// SPDX-License-Identifier: MIT
/* Flat device memory for engine host tests; see flatmem.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flatmem.h"

static int check(struct flatmem *m, uint64_t va, uint64_t len, uint64_t *fault_va)
{
	if (va < m->base || va - m->base > m->size || len > m->size - (va - m->base)) {
		*fault_va = va < m->base || va - m->base >= m->size ? va : m->base + m->size;
		return FLATMEM_FAULT;
	}
	if (m->hole_lo < m->hole_hi && va < m->hole_hi && va + len > m->hole_lo) {
		*fault_va = va > m->hole_lo ? va : m->hole_lo;
		return FLATMEM_FAULT;
	}
	return 0;
}

static int fm_read(void *opaque, uint64_t va, void *buf, uint64_t len, uint64_t *fault_va)
{
	struct flatmem *m = opaque;
	int rc = check(m, va, len, fault_va);

	m->reads++;
	if (!rc)
		memcpy(buf, m->buf + (va - m->base), len);
	return rc;
}

static int fm_write(void *opaque, uint64_t va, const void *buf, uint64_t len, uint64_t *fault_va)
{
	struct flatmem *m = opaque;
	int rc = check(m, va, len, fault_va);

	m->writes++;
	if (!rc)
		memcpy(m->buf + (va - m->base), buf, len);
	return rc;
}

static int fm_probe(void *opaque, uint64_t va, uint64_t len, uint64_t *fault_va)
{
	return check(opaque, va, len, fault_va);
}

const struct spyre_engine_mem_ops flatmem_ops = { .read = fm_read, .write = fm_write, .probe = fm_probe };
/* the same without probe: every LOAD's bytes move when it completes */
const struct spyre_engine_mem_ops flatmem_eager_ops = { .read = fm_read, .write = fm_write };

int flatmem_init(struct flatmem *m, uint64_t base, uint64_t size)
{
	memset(m, 0, sizeof(*m));
	m->buf = calloc(1, size);
	m->base = base;
	m->size = size;
	return m->buf ? 0 : -1;
}

void flatmem_fini(struct flatmem *m)
{
	free(m->buf);
	m->buf = NULL;
}

int flatmem_test_main(const struct flatmem_test *t, const struct tap_case *cases, size_t n,
		      int argc, char **argv)
{
	struct spyre_engine_config cfg;
	const char *th = getenv("SPYRE_ENGINE_THREADS");
	int ret;

	if (t->config)
		cfg = *t->config;
	else
		spyre_engine_config_default(&cfg);
	/* every engine test runs with any number of host threads: the same results */
	if (th && *th)
		cfg.threads = (uint32_t)strtoul(th, NULL, 0);
	*t->engine = spyre_engine_new(&cfg);
	if (!*t->engine || flatmem_init(t->mem, t->base, t->size))
		tap_bail("cannot create the engine or its %llu bytes of memory",
			 (unsigned long long)t->size);
	if (t->setup)
		t->setup();
	ret = tap_run(cases, n, argc, argv);
	spyre_engine_free(*t->engine);
	flatmem_fini(t->mem);
	return ret;
}

uint64_t flatmem_alloc(struct flatmem *m, uint64_t len)
{
	uint64_t off = (m->next + 127) / 128 * 128;

	if (off + len > m->size) {
		fprintf(stderr, "flatmem: out of memory\n");
		abort();
	}
	m->next = off + len;
	memset(m->buf + off, 0, len);
	return m->base + off;
}

void *flatmem_ptr(struct flatmem *m, uint64_t va)
{
	return m->buf + (va - m->base);
}

int flatmem_run(struct flatmem *m, struct spyre_engine *e, const void *image, size_t size,
		const uint64_t *slots, uint32_t num_slots, const uint64_t *scalars,
		uint32_t num_scalars, uint32_t core_mask, struct spyre_launch_result *res)
{
	uint64_t save = m->next;
	uint64_t prog = flatmem_alloc(m, size);
	uint64_t args = flatmem_alloc(m, 8ull * (num_slots + num_scalars) + 8);
	uint8_t *a = flatmem_ptr(m, args);
	int rc;

	memcpy(flatmem_ptr(m, prog), image, size);
	for (uint32_t i = 0; i < num_slots; i++)
		memcpy(a + 8 * i, &slots[i], 8);
	for (uint32_t i = 0; i < num_scalars; i++)
		memcpy(a + 8 * (num_slots + i), &scalars[i], 8);
	rc = spyre_engine_launch(e, prog, args, core_mask, m->eager ? &flatmem_eager_ops : &flatmem_ops, m, res);
	m->next = save;
	return rc;
}
