/* SPDX-License-Identifier: MIT */
/*
 * kern.h - the kernel library's generators (internal). Each op has a
 * generator that writes one program with the builder (isa/), planning the
 * scratchpad of each core and splitting the work across cores:
 *
 *	static int gen_add(struct kgen *g)
 *	{
 *		int a = kg_slot(g, "a", g->d->dtype, g->d->m, g->d->n, SPYRE_SYM_IN);
 *		...
 *		for (uint32_t c = 0; c < g->cores; c++) {
 *			struct kg_range r = kg_split(g->d->m, g->cores, c, 1);
 *			...spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){...});
 *		}
 *		return kg_ok(g);
 *	}
 *
 * Generators must work for every size (dimensions that are not multiples of
 * a stick or of 8 rows; 1..32 cores, more cores than rows), tile through the
 * scratchpad when a tensor does not fit (or fail with kg_fail() naming the
 * shape when even one row cannot), and use the builder's addressing form as
 * set (slot-relative or relocated: never SPYRE_SLOT_ADDR directly, always
 * spyre_pb_dma with .mem.sym).
 */
#ifndef LIBSPYRE_KERN_H
#define LIBSPYRE_KERN_H

#include <stdbool.h>
#include <stdint.h>

#include "spyre_kernels.h"
#include "spyre_isa.h"
#include "spyre_progbuild.h"

struct kgen {
	const struct spyre_kdesc *d;	/* normalized: cores and sp_bytes resolved */
	struct spyre_pb *pb;
	struct spyre_kernel_info *info;
	uint32_t cores;			/* == d->cores */
	uint32_t sp_bytes;		/* == d->sp_bytes */
	uint32_t strategy;		/* the one to generate (never AUTO) */
	uint32_t sp_used[SPYRE_MAX_CORES];	/* kg_sp_alloc() high-water marks */
	int failed;
};

/* A contiguous range [start, start + count) of a split. */
struct kg_range {
	uint64_t start, count;
};

/*
 * Part @i of @parts of @total items, balanced, every boundary a multiple of
 * @granule (except the end). Parts past the work are empty (count 0).
 */
struct kg_range kg_split(uint64_t total, uint32_t parts, uint32_t i, uint64_t granule);

/*
 * How many of @cores to split @units of work over (whole units: 8 rows, a
 * stick of columns). 32 cores may get 7 and 6 units where 25 would get 8
 * each: with LPDDR shared among the launched cores, the fewest cores giving
 * the same largest block are as fast when memory-bound and never slower; and
 * when every core streams all of one operand, fewer cores stream it fewer
 * times. Over the block sizes (all up to twice the smallest, then in steps of
 * 1.25) the most cores whose estimate @cost(@ctx, parts, &cycles) is within
 * 3 % of the cheapest win (@cost false: that split does not fit); with no
 * estimate, min(@cores, @units).
 */
uint32_t kg_choose_parts(uint64_t units, uint32_t cores, bool (*cost)(void *ctx, uint32_t parts, uint64_t *cycles),
			 void *ctx);

/*
 * Candidate tile sizes for a block of @total: ceil(total / t) rounded up to
 * @unit (t = 1 .. @dense, then in steps of 1.25), those above @cap left out,
 * largest first, then the unit itself. Returns how many (at most @max).
 */
uint32_t kg_tile_sizes(uint64_t total, uint64_t unit, uint64_t cap, uint64_t dense, uint64_t *out, uint32_t max);
/*
 * Row tiles of a block of @m rows: kg_tile_sizes() in the PE array's 8-row
 * passes (@dense as there), then 4, 2 and 1 rows as a last resort (fewer than
 * 8: only when nothing else fits). @max >= 4.
 */
uint32_t kg_row_tiles(uint64_t m, uint64_t dense, uint64_t *out, uint32_t max);

/* Sticks / bytes of a stick-layout row. */
static inline uint32_t kg_sticks(uint64_t cols, uint32_t dt)
{
	return spyre_sticks(cols, dt);
}

static inline uint64_t kg_pitch(uint64_t cols, uint32_t dt)
{
	return (uint64_t)spyre_sticks(cols, dt) * SPYRE_STICK_BYTES;
}

/* Small arithmetic of the planners. */
static inline uint64_t kg_cdiv(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static inline uint64_t kg_rup(uint64_t a, uint64_t b)
{
	return kg_cdiv(a, b) * b;
}

static inline uint64_t kg_min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static inline uint64_t kg_max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* A tensor op of @rows x @cols on core @c, dense rows (no explicit strides). */
static inline void kg_op(struct kgen *g, uint32_t c, unsigned opc, unsigned dt, unsigned dt2, unsigned flags,
			 uint32_t d, uint32_t a, uint32_t b, uint64_t rows, uint64_t cols)
{
	spyre_pb_op(g->pb, c, &(struct spyre_pb_op){ .op = opc, .dt = dt, .dt2 = dt2, .flags = flags, .d = d,
						     .a = a, .b = b, .rows = (uint32_t)rows, .cols = (uint32_t)cols });
}

/*
 * @rows x @row_bytes between the scratchpad at @sp (rows @row_bytes apart)
 * and slot @sym at @off (rows @stride apart): a LOAD or STORE on core @c.
 */
static inline void kg_dma(struct kgen *g, uint32_t c, unsigned opc, uint32_t sp, int sym, uint64_t off,
			  uint64_t rows, uint64_t row_bytes, uint64_t stride)
{
	spyre_pb_dma(g->pb, c, opc, &(struct spyre_pb_dma){
		.sp = sp, .mem = { .sym = sym, .off = off }, .rows = (uint32_t)rows,
		.row_bytes = (uint32_t)row_bytes, .mem_stride = rows > 1 ? (uint32_t)stride : 0,
		.sp_stride = rows > 1 ? (uint32_t)row_bytes : 0 });
}

/*
 * Add a tensor slot of @rows rows of @pitch bytes (a stick-layout matrix:
 * kg_pitch(cols, dt)); records its size in info. Returns the slot index.
 */
int kg_slot(struct kgen *g, const char *name, uint32_t dt, uint64_t rows, uint64_t cols,
	    uint64_t pitch, unsigned flags);

/*
 * Scratchpad planning: reserve @bytes (rounded up to a stick) on core @core
 * after what is already reserved; kg_sp_reset() starts the core's plan over
 * (between phases that do not overlap). Returns the offset, or fails the
 * generation ("scratchpad: N bytes needed, M available") and returns 0.
 */
uint32_t kg_sp_alloc(struct kgen *g, uint32_t core, uint64_t bytes);
void kg_sp_reset(struct kgen *g, uint32_t core);
/* Bytes still free on @core. */
uint64_t kg_sp_free(const struct kgen *g, uint32_t core);

/* Record a failure with a detail for spyre_last_error(); returns -EINVAL. */
int kg_fail(struct kgen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 0, or the builder's / an earlier failure as -EINVAL. */
int kg_ok(struct kgen *g);

/* ---- shared GEMM tiling (kern_linear.c; used by LINEAR, BMM and MLP) ---- */

/* A stick-layout matrix operand in device memory. */
struct kg_mat {
	int slot;
	uint32_t dt;
	uint64_t base;		/* byte offset of row 0 in the slot */
	uint64_t pitch;		/* bytes per row */
};

/*
 * Y[m x n] = A[m x k] B[k x n] (+ bias fp32 [n]), accumulated in fp32 and
 * rounded once to Y's dtype. A's k columns may be grouped (k_group: each
 * group padded to sticks), B's, Y's and bias's n columns likewise (n_group).
 * A and B share a dtype, or A is fp32 and B's tiles are cast to fp32.
 */
struct kg_gemm {
	struct kg_mat a, b, y;
	int bias;		/* fp32 bias slot, -1: none */
	uint64_t m, n, k;
	uint64_t k_group, n_group;
	/*
	 * B given as [n x k] (nn.Linear's weight): row j holds column j's k
	 * elements, laid out like a row of A (k grouped alike; one dtype
	 * with A); its n rows are real (not grouped). Tiles are transposed in
	 * the scratchpad.
	 */
	bool b_nk;
};

/*
 * Split @j by @strategy (SPYRE_KSTRAT_SPLIT_M: row blocks of 8, SPLIT_N:
 * column blocks of a stick) over @active cores (the cores the program
 * launches, sharing LPDDR; at most g->cores), or with @active 0 over as many
 * of g->cores as the estimate prefers; plan each core's tiles for the
 * scratchpad and, if @emit, emit them. @max_insns: instruction budget per
 * core. *@cycles (optional): the slowest core's modeled cycles; *@used
 * (optional) |= the cores given work. Returns 0 or -EINVAL (kg_fail).
 */
int kg_gemm_split(struct kgen *g, const struct kg_gemm *j, uint32_t strategy, uint32_t active,
		  uint32_t max_insns, int emit, uint64_t *cycles, uint32_t *used);

/* Modeled cycles of one instruction (docs/spyre-isa.md §6, SPYRE_TM_* defaults). */
uint64_t kg_cyc_dma(uint64_t bytes, uint32_t active);
uint64_t kg_cyc_mm(uint32_t dt, uint32_t dt2, uint64_t m, uint64_t n, uint64_t k);
uint64_t kg_cyc_sfu(uint64_t elems, uint32_t passes, uint64_t bytes);

/* ---- generators: one per op (kern_*.c) ---- */
typedef int (*kg_gen_fn)(struct kgen *g);

struct kg_op {
	const char *name;
	kg_gen_fn gen;
	/* strategies the op accepts (bit per enum spyre_kstrategy), 0: none */
	uint32_t strategies;
	/* the strategy AUTO resolves to when not chosen by estimate (0: estimate all) */
	uint32_t default_strategy;
};

extern const struct kg_op kg_ops[SPYRE_KOP_COUNT];

int kg_gen_linear(struct kgen *g);
int kg_gen_bmm(struct kgen *g);
int kg_gen_mlp(struct kgen *g);
int kg_gen_softmax(struct kgen *g);
int kg_gen_rmsnorm(struct kgen *g);
int kg_gen_layernorm(struct kgen *g);
int kg_gen_rope(struct kgen *g);
int kg_gen_eltwise(struct kgen *g);	/* ADD, MUL, SILU, GELU, RELU */
int kg_gen_attention(struct kgen *g);
int kg_gen_embedding(struct kgen *g);
int kg_gen_argmax(struct kgen *g);
int kg_gen_transpose(struct kgen *g);
int kg_gen_binary(struct kgen *g);	/* kern_ops.c (since 0.5) */
int kg_gen_unary(struct kgen *g);
int kg_gen_reduce(struct kgen *g);
int kg_gen_tril(struct kgen *g);
int kg_gen_where(struct kgen *g);
int kg_gen_permute(struct kgen *g);
int kg_gen_cat(struct kgen *g);
/* The paged ops' common checks: sizes and a cache of rows of @row_bytes LDX can address (0 or -EINVAL). */
int kg_paged_check(struct kgen *g, uint64_t row_bytes);
int kg_gen_paged_kv_write(struct kgen *g);	/* kern_paged.c (since 0.6) */
int kg_gen_paged_attention(struct kgen *g);	/* kern_attn.c: shares the attention's online softmax */
int kg_gen_iadd(struct kgen *g);		/* kern_misc.c (since 0.7) */

#endif /* LIBSPYRE_KERN_H */
