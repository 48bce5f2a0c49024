// SPDX-License-Identifier: MIT
/*
 * kernels-bench: the kernel library's strategies side by side, in modeled
 * device time, next to the published Spyre figures they correspond to. Each
 * pair is the same op, shape and dtype (fp16, 32 cores) generated two ways:
 *  - matmul tiling/layout on the shapes of a Granite-8B layer: the cost
 *    model's choice vs the naive split (rows across cores, W streamed by
 *    each) -- published: -29..69 %;
 *  - softmax: scratchpad-resident vs naive (every step through device
 *    memory) -- published: 32.51 -> 23.67 us (-27 %);
 *  - MLP (SwiGLU): fused vs unfused, core utilization and time -- published:
 *    core use ~2/3 -> ~80 %, kernel time -17 %;
 *  - relayout (transpose): on-chip ring shuffle vs through device memory --
 *    published: 80 us -> 1.1 us.
 * "engine" rows ran on the compute engine (flat host memory; modeled time
 * and per-core busy cycles from its timing model, deterministic); "model"
 * rows are the kernel library's cost-model estimate (shapes too large to
 * execute here in reasonable time). Both come from the same formulas
 * (docs/spyre-isa.md §6). Where ours disagrees with the published figure,
 * docs/kernels.md says why.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flatmem.h"
#include "spyre_engine.h"
#include "spyre_kernels.h"
#include "spyre_progbuild.h"

static struct spyre_engine *E;
static struct flatmem M;

struct result {
	uint64_t ns;
	double util;
	uint32_t cores;
	int ran;
};

/* Build @d; execute it on the engine when @run, else take the estimate. */
static int measure(const struct spyre_kdesc *d, int run, struct result *r)
{
	struct spyre_kernel_info info = { .size = sizeof(info) };
	struct spyre_launch_result res;
	uint64_t va[16];
	void *img;
	size_t sz;

	memset(r, 0, sizeof(*r));
	if (spyre_kernel_build(d, &img, &sz, &info)) {
		fprintf(stderr, "kernels-bench: %s\n", spyre_last_error());
		return -1;
	}
	r->ns = info.est_ns;
	if (!run) {
		free(img);
		return 0;
	}
	M.next = 0;
	for (uint32_t i = 0; i < info.num_slots; i++)
		va[i] = flatmem_alloc(&M, info.slot_bytes[i]);	/* zeroed: timing does not depend on values */
	if ((d->flags & SPYRE_KF_RELOC) && spyre_prog_relocate(img, sz, va, info.num_slots) < 0)
		return -1;
	uint64_t sc[8] = { 0 };

	if (flatmem_run(&M, E, img, sz, va, info.num_slots, sc, info.num_scalars, info.core_mask, &res)) {
		fprintf(stderr, "kernels-bench: %s: engine fault %s\n", info.name, spyre_fault_name(res.status));
		free(img);
		return -1;
	}
	free(img);
	uint64_t busy = 0;

	for (uint32_t c = 0; c < SPYRE_MAX_CORES; c++)
		busy += res.core_busy_cycles[c];
	r->ns = res.device_ns;
	/* utilization of the cores the kernel runs on (it may choose fewer than 32) */
	r->util = res.device_cycles && res.cores_run ? (double)busy / ((double)res.device_cycles * res.cores_run) : 0;
	r->cores = res.cores_run;
	r->ran = 1;
	return 0;
}

static struct spyre_kdesc desc(uint32_t op, uint32_t strategy, uint64_t m, uint64_t n, uint64_t k)
{
	return (struct spyre_kdesc){ .size = sizeof(struct spyre_kdesc), .op = op, .dtype = SPYRE_DT_FP16,
				     .cores = 32, .strategy = strategy, .m = m, .n = n, .k = k };
}

static void row(const char *what, const struct result *a, const struct result *b)
{
	printf("  %-44s %10.2f us %10.2f us %+8.1f%%  %s\n", what, a->ns * 1e-3, b->ns * 1e-3,
	       a->ns ? 100.0 * ((double)b->ns / a->ns - 1) : 0.0, b->ran ? "engine" : "model");
}

int main(void)
{
	struct spyre_engine_config cfg;
	struct result a, b;
	int rc = 0;

	spyre_engine_config_default(&cfg);
	E = spyre_engine_new(&cfg);
	if (!E || flatmem_init(&M, 0x100000000ull, 1ull << 30)) {
		fprintf(stderr, "kernels-bench: no engine or memory\n");
		return 1;
	}
	printf("== kernel library strategies, fp16, 32 cores (modeled device time; change = second vs first)\n");
	printf("  %-44s %13s %13s %9s  %s\n", "", "first", "second", "change", "how");

	/* matmul: the cost model's choice vs the naive row split, on a Granite-8B layer's shapes */
	static const struct {
		const char *name;
		uint64_t m, n, k;
	} mm[] = {
		{ "decode q/o proj 1x4096x4096", 1, 4096, 4096 },
		{ "decode k/v proj 1x1024x4096", 1, 1024, 4096 },
		{ "decode ffn up 1x12800x4096", 1, 12800, 4096 },
		{ "prefill q/o proj 1024x4096x4096", 1024, 4096, 4096 },
		{ "prefill k/v proj 1024x1024x4096", 1024, 1024, 4096 },
		{ "prefill ffn up 1024x12800x4096", 1024, 12800, 4096 },
	};
	printf(" matmul, naive (rows split, W streamed per core) -> the cost model's tiling; published -29..-69 %%\n");
	for (size_t i = 0; i < sizeof(mm) / sizeof(mm[0]); i++) {
		struct spyre_kdesc dn = desc(SPYRE_KOP_LINEAR, SPYRE_KSTRAT_SPLIT_M, mm[i].m, mm[i].n, mm[i].k);
		struct spyre_kdesc dc = desc(SPYRE_KOP_LINEAR, 0, mm[i].m, mm[i].n, mm[i].k);
		int run = mm[i].m == 1;

		if (measure(&dn, run, &a) || measure(&dc, run, &b)) {
			rc = 1;
			continue;
		}
		row(mm[i].name, &a, &b);
	}

	printf(" softmax, naive (each step through device memory) -> scratchpad-resident; published 32.51 -> "
	       "23.67 us (-27 %%)\n");
	static const uint64_t sm[][2] = { { 32, 1024 }, { 1024, 1024 } };

	for (size_t i = 0; i < 2; i++) {
		char what[64];

		snprintf(what, sizeof(what), "softmax %llux%llu", (unsigned long long)sm[i][0],
			 (unsigned long long)sm[i][1]);
		if (measure(&(struct spyre_kdesc){ .size = sizeof(struct spyre_kdesc), .op = SPYRE_KOP_SOFTMAX,
						   .dtype = SPYRE_DT_FP16, .cores = 32,
						   .strategy = SPYRE_KSTRAT_NAIVE, .m = sm[i][0], .n = sm[i][1] }, 1, &a) ||
		    measure(&(struct spyre_kdesc){ .size = sizeof(struct spyre_kdesc), .op = SPYRE_KOP_SOFTMAX,
						   .dtype = SPYRE_DT_FP16, .cores = 32,
						   .strategy = SPYRE_KSTRAT_SCRATCHPAD, .m = sm[i][0], .n = sm[i][1] },
			    1, &b)) {
			rc = 1;
			continue;
		}
		row(what, &a, &b);
	}

	printf(" MLP (SwiGLU), unfused (4 passes via device memory) -> fused (on-chip reduction); published core "
	       "use ~2/3 -> ~80 %%, time -17 %%\n");
	static const uint64_t ml[][3] = { { 64, 1408, 512 }, { 1, 12800, 4096 }, { 1024, 12800, 4096 } };

	for (size_t i = 0; i < 3; i++) {
		struct spyre_kdesc du = desc(SPYRE_KOP_MLP, SPYRE_KSTRAT_UNFUSED, ml[i][0], ml[i][1], ml[i][2]);
		struct spyre_kdesc df = desc(SPYRE_KOP_MLP, SPYRE_KSTRAT_FUSED, ml[i][0], ml[i][1], ml[i][2]);
		int run = i == 0;
		char what[96];

		if (measure(&du, run, &a) || measure(&df, run, &b)) {
			rc = 1;
			continue;
		}
		snprintf(what, sizeof(what), "mlp m=%llu ffn=%llu hidden=%llu", (unsigned long long)ml[i][0],
			 (unsigned long long)ml[i][1], (unsigned long long)ml[i][2]);
		row(what, &a, &b);
		if (run)
			printf("  %-44s %9.0f %% %10.0f %%   (busy cycles / (device cycles x cores run: %u, %u))\n",
			       "  core utilization", a.util * 100, b.util * 100, a.cores, b.cores);
	}

	printf(" relayout 1024x1024 transpose, through device memory -> ring shuffle between cores; published "
	       "80 -> 1.1 us\n");
	if (measure(&(struct spyre_kdesc){ .size = sizeof(struct spyre_kdesc), .op = SPYRE_KOP_TRANSPOSE,
					   .dtype = SPYRE_DT_FP16, .cores = 32, .strategy = SPYRE_KSTRAT_VIA_MEMORY,
					   .m = 1024, .n = 1024 }, 1, &a) ||
	    measure(&(struct spyre_kdesc){ .size = sizeof(struct spyre_kdesc), .op = SPYRE_KOP_TRANSPOSE,
					   .dtype = SPYRE_DT_FP16, .cores = 32, .strategy = SPYRE_KSTRAT_RING,
					   .m = 1024, .n = 1024 }, 1, &b))
		rc = 1;
	else
		row("transpose 1024x1024 (incl. load X, store Y)", &a, &b);
	flatmem_fini(&M);
	spyre_engine_free(E);
	return rc;
}
