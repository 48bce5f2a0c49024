// SPDX-License-Identifier: MIT
/*
 * kern-images-test - the kernel library's programs, byte for byte: a sweep
 * of descriptors (every op, dtype, strategy and flag over a few shapes, core
 * counts and sets of the other fields, the ops of 0.5 also over their
 * functions and flags: 663,264 in all) is built with
 * spyre_kernel_build(), each described by one line (the image's size and
 * FNV-1a hash, strategy, estimate and name, or the error and its detail),
 * and the lines of each op and dtype are summed up by their count, the
 * number built and their FNV-1a hash, compared with the pinned list in
 * libspyre/tests/kern/images.txt. A restructuring of the library must leave
 * every line as it is; a change that means to alter programs regenerates it
 *
 *	build/tests/kern-images-test --pin >libspyre/tests/kern/images.txt
 *
 * and the diff shows which ops and dtypes it changed; --print lists every
 * descriptor's line, to diff two builds of the library in detail.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_kernels.h"
#include "spyre_isa.h"
#include "../../../tests/tap.h"

#define PINNED "libspyre/tests/kern/images.txt"

struct shape {
	uint64_t m, n, k;
};

static const struct shape shapes[] = {
	{ 1, 128, 128 }, { 4, 352, 128 }, { 64, 256, 512 }, { 7, 96, 200 },
};
static const uint32_t dtypes[] = { SPYRE_DT_FP32, SPYRE_DT_FP16, SPYRE_DT_BF16, SPYRE_DT_DL16 };
static const uint32_t flag_sets[] = { 0, SPYRE_KF_RELOC, SPYRE_KF_BIAS, SPYRE_KF_GELU, SPYRE_KF_DECODE,
				      SPYRE_KF_RELOC | SPYRE_KF_BIAS, SPYRE_KF_RELOC | SPYRE_KF_DECODE };
static const uint32_t core_counts[] = { 0, 5 };

static uint64_t fnv1a(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--)
		h = (h ^ *b++) * 0x100000001b3ull;
	return h;
}

/* One line per descriptor: what it is, then what the library made of it. */
static void describe(const struct spyre_kdesc *d, char *line, size_t len)
{
	struct spyre_kernel_info info = { .size = sizeof(info) };
	size_t size = 0;
	void *image = NULL;
	int ret, n;

	n = snprintf(line, len, "op %u dt %u %llux%llux%llu s%u f%x c%u:", d->op, d->dtype,
		     (unsigned long long)d->m, (unsigned long long)d->n, (unsigned long long)d->k,
		     d->strategy, d->flags, d->cores);
	if (d->fn)	/* the ops of 0.5 (older lines stay as they were) */
		n += snprintf(line + n - 1, len - n + 1, " fn%u:", d->fn) - 1;
	ret = spyre_kernel_build(d, &image, &size, &info);
	if (ret)
		snprintf(line + n, len - n, " error %d: %s", ret, spyre_last_error());
	else
		snprintf(line + n, len - n, " %zu bytes %016llx s%u %llu ns \"%s\"", size,
			 (unsigned long long)fnv1a(image, size), info.strategy,
			 (unsigned long long)info.est_ns, info.name);
	free(image);
}

/*
 * The fields beside the shape, one set per op family (the library rejects
 * fields an op does not use, so each op builds with one of these sets).
 */
enum { EX_NONE, EX_BATCH, EX_ATTENTION, EX_ROPE, EX_EPS, EX_ALPHA, EX_SCALE, EX_COUNT };

static void extras(struct spyre_kdesc *d, int ex)
{
	uint32_t hd = d->n % 64 ? 32 : 64;

	switch (ex) {
	case EX_BATCH:
		d->batch = 2;
		break;
	case EX_ATTENTION:
		d->kv_heads = 1;
		d->scale = 0.125f;
		/* fall through */
	case EX_ROPE:
		d->heads = (uint32_t)d->n / hd;
		d->head_dim = hd;
		d->max_pos = 256;
		break;
	case EX_EPS:
		d->eps = 1e-5f;
		break;
	case EX_ALPHA:
		d->alpha = 0.5f;
		break;
	case EX_SCALE:
		d->scale = 2.0f;
		break;
	}
}

/*
 * The ops of 0.5 are swept over their functions and flags too (each
 * variant's fn and flags, or'ed into every flag set); the older ops have
 * the one variant { 0, 0 }.
 */
struct variant {
	uint32_t fn, flags;
};

static const struct variant v_none[] = { { 0, 0 } };
static const struct variant v_binary[] = {
	{ SPYRE_KFN_ADD, 0 }, { SPYRE_KFN_SUB, SPYRE_KF_BCAST_ROW }, { SPYRE_KFN_MUL, SPYRE_KF_BCAST_COL },
	{ SPYRE_KFN_DIV, SPYRE_KF_REVERSE }, { SPYRE_KFN_MAX, SPYRE_KF_BCAST_COL | SPYRE_KF_REVERSE },
	{ SPYRE_KFN_MIN, 0 },
};
static const struct variant v_unary[] = {
	{ SPYRE_KFN_EXP, 0 }, { SPYRE_KFN_LOG, 0 }, { SPYRE_KFN_TANH, 0 }, { SPYRE_KFN_SIGMOID, 0 },
	{ SPYRE_KFN_RSQRT, 0 }, { SPYRE_KFN_SQRT, 0 }, { SPYRE_KFN_RECIP, 0 }, { SPYRE_KFN_ABS, 0 },
	{ SPYRE_KFN_GELU_TANH, 0 }, { SPYRE_KFN_SCALE, 0 }, { SPYRE_KFN_POW, 0 },
};
static const struct variant v_where[] = {
	{ 0, 0 }, { 0, SPYRE_KF_SCALAR_A }, { 0, SPYRE_KF_SCALAR_B }, { 0, SPYRE_KF_SCALAR_A | SPYRE_KF_SCALAR_B },
};
static const struct variant v_reduce[] = { { SPYRE_KFN_SUM, 0 }, { SPYRE_KFN_MEAN, 0 }, { SPYRE_KFN_RMAX, 0 } };
static const struct variant v_tril[] = { { SPYRE_KFN_TRIL, 0 }, { SPYRE_KFN_TRIU, 0 } };

static const struct variant *variants(uint32_t op, size_t *n)
{
#define V(a) (*n = sizeof(a) / sizeof(a[0]), a)
	switch (op) {
	case SPYRE_KOP_BINARY:
		return V(v_binary);
	case SPYRE_KOP_UNARY:
		return V(v_unary);
	case SPYRE_KOP_WHERE:
		return V(v_where);
	case SPYRE_KOP_REDUCE:
		return V(v_reduce);
	case SPYRE_KOP_TRIL:
		return V(v_tril);
	default:
		return V(v_none);
	}
#undef V
}

/* Calls @fn for every descriptor of the sweep, in a fixed order. */
static unsigned int sweep(void (*fn)(const char *line, void *arg), void *arg)
{
	unsigned int count = 0;
	char line[512];

	for (uint32_t op = 1; op < SPYRE_KOP_COUNT; op++) {
		size_t nv;
		const struct variant *v = variants(op, &nv);

		for (size_t dt = 0; dt < sizeof(dtypes) / sizeof(dtypes[0]); dt++)
			for (size_t vi = 0; vi < nv; vi++)
				for (int ex = 0; ex < EX_COUNT; ex++)
					for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
						for (uint32_t strat = 0; strat <= SPYRE_KSTRAT_RING; strat++)
							for (size_t f = 0; f < sizeof(flag_sets) / sizeof(flag_sets[0]); f++)
								for (size_t c = 0; c < sizeof(core_counts) / sizeof(core_counts[0]); c++) {
									struct spyre_kdesc d = {
										.size = sizeof(d), .op = op, .dtype = dtypes[dt],
										.cores = core_counts[c], .strategy = strat,
										.flags = flag_sets[f] | v[vi].flags,
										.m = shapes[s].m, .n = shapes[s].n,
										.k = shapes[s].k, .fn = v[vi].fn,
									};

									/* k where the op of 0.5 has one, else 0 */
									if (op == SPYRE_KOP_TRIL)
										d.k = d.m;
									else if (op == SPYRE_KOP_CAT)
										d.k = 2 + s % 7;
									else if (op == SPYRE_KOP_PERMUTE)
										d.k = s % 2 ? 64 : 1;
									else if (op >= SPYRE_KOP_BINARY)
										d.k = 0;
									extras(&d, ex);
									describe(&d, line, sizeof(line));
									fn(line, arg);
									count++;
								}
	}
	return count;
}

static void print_line(const char *line, void *arg)
{
	(void)arg;
	puts(line);
}

/* The summary of one op and dtype: "op 1 dt 0: 1234 descriptors, 56 built, fnv 0123456789abcdef". */
struct summary {
	uint32_t op, dt;
	unsigned int lines, built;
	uint64_t hash;
	void (*emit)(const char *line, void *arg);
	void *arg;
};

static void summary_flush(struct summary *sm)
{
	char line[128];

	if (!sm->lines)
		return;
	snprintf(line, sizeof(line), "op %u dt %u: %u descriptors, %u built, fnv %016llx", sm->op, sm->dt,
		 sm->lines, sm->built, (unsigned long long)sm->hash);
	sm->emit(line, sm->arg);
	sm->lines = sm->built = 0;
}

static void summary_line(const char *line, void *arg)
{
	struct summary *sm = arg;
	unsigned int op, dt;

	if (sscanf(line, "op %u dt %u", &op, &dt) != 2)
		return;
	if (sm->lines && (op != sm->op || dt != sm->dt))
		summary_flush(sm);
	if (!sm->lines) {
		sm->op = op;
		sm->dt = dt;
		sm->hash = 0xcbf29ce484222325ull;
	}
	sm->lines++;
	sm->built += !strstr(line, " error ");
	for (const char *p = line; *p; p++)
		sm->hash = (sm->hash ^ (unsigned char)*p) * 0x100000001b3ull;
	sm->hash = (sm->hash ^ '\n') * 0x100000001b3ull;
}

/* Every summary line, in order, to @emit. */
static void summarize(void (*emit)(const char *line, void *arg), void *arg)
{
	struct summary sm = { .emit = emit, .arg = arg };

	sweep(summary_line, &sm);
	summary_flush(&sm);
}

struct compare {
	FILE *pinned;
	unsigned int lines, differ, built;
};

static void compare_line(const char *line, void *arg)
{
	struct compare *c = arg;
	char want[256];
	unsigned int built;

	c->lines++;
	if (sscanf(line, "op %*u dt %*u: %*u descriptors, %u built", &built) == 1)
		c->built += built;
	if (!fgets(want, sizeof(want), c->pinned)) {
		c->differ++;
		tap_diag("%s: the pinned list has ended", line);
		return;
	}
	want[strcspn(want, "\n")] = 0;
	if (strcmp(want, line)) {
		c->differ++;
		tap_diag("now:    %s", line);
		tap_diag("pinned: %s", want);
	}
}

static void test_pinned(void)
{
	const char *path = getenv("SPYRE_KERN_IMAGES") ? getenv("SPYRE_KERN_IMAGES") : PINNED;
	struct compare c = { 0 };
	char extra[256];

	c.pinned = fopen(path, "r");
	TAP_CHECK(c.pinned, "%s: %s (run from the top of the tree)", path, strerror(errno));
	if (!c.pinned)
		return;
	summarize(compare_line, &c);
	if (fgets(extra, sizeof(extra), c.pinned))
		c.differ++;
	fclose(c.pinned);
	TAP_EQ(104u, c.lines);	/* 26 ops x 4 dtypes */
	TAP_CHECK(c.built > 20000, "the sweep built %u descriptors", c.built);
	TAP_CHECK(c.differ == 0, "%u of %u summaries differ from %s", c.differ, c.lines, path);
}

static const struct tap_case cases[] = {
	{ "every_image_as_pinned", test_pinned },
};

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--print")) {
		sweep(print_line, NULL);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "--pin")) {
		summarize(print_line, NULL);
		return 0;
	}
	return TAP_RUN(cases, argc, argv);
}
