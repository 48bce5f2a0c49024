// SPDX-License-Identifier: MIT
/*
 * LINEAR (Y = X W + bias) and BMM (Y[b] = A[b] B[b]), and the GEMM tiling
 * they share with the MLP (kg_gemm_split, kern.h).
 *
 * A GEMM is split over cores by rows (SPYRE_KSTRAT_SPLIT_M: blocks of 8
 * rows, the PE array's pass height; each core streams all of B) or by
 * columns (SPLIT_N: blocks of whole sticks of columns; each core reads all
 * of A). Each core's block is then tiled through its scratchpad: an A tile
 * (mt rows x kt), a B tile (kt x nt), an fp32 accumulator (mt x nt), the
 * bias row and the output tile. k tiles accumulate in fp32 (SPYRE_IF_ACC),
 * the bias is added in fp32 and the sum rounded once to Y's dtype on the
 * way to the output tile. The tile sizes and the loop order are chosen per
 * core by the cost model's formulas (kg_cyc_*):
 *
 *   ORD_X  m tiles outer, the A tile holds whole rows (all of k) and is
 *          used for every n tile; B streams in kt x nt tiles;
 *   ORD_W  n tiles outer, the B tile holds all of k for nt columns and is
 *          used for every m tile; A streams in mt x kt tiles;
 *   ORD_S  both stream (neither fits), k innermost.
 *
 * A tile is not loaded again while it is still the one in the scratchpad,
 * so one tile covering a whole block is loaded once.
 *
 * Grouped layouts: columns are addressed in "physical" elements (a group
 * of g elements occupies round_up(g, stick) of them, docs/kernels.md).
 * Tiles and splits start on sticks; inside a tile every run of real
 * elements (at most one per group) gets its own matmul, so padding is
 * neither computed on nor mixed into sums. With groups that fill whole
 * sticks the layout is dense and a tile is one run.
 *
 * B as [n x k] (kg_gemm.b_nk, LINEAR's SPYRE_KF_WEIGHT_NK): a B tile is
 * loaded as its nt rows of W (one DMA per run of real columns, each to its
 * physical place) into a staging buffer and TRANSPOSEd into the B buffer,
 * whose rows are then physical k (W's rows are laid out like A's). The
 * plan counts the staging buffer, the transposes and W's row-wise bursts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kern.h"
#include "spyre_timing.h"

#define STICK ((uint64_t)SPYRE_STICK_BYTES)
#define MAX_INSNS 65536u

/* ---- the cost model's formulas ------------------------------------------ */

/* The timing model's formulas (isa/spyre_timing.h) with the default device properties, issue included. */
static const struct spyre_timing *tm_default(void)
{
	static struct spyre_timing tm;
	static int once;

	if (!__atomic_load_n(&once, __ATOMIC_ACQUIRE)) {
		struct spyre_timing t;

		spyre_timing_default(&t);
		tm = t;	/* every thread writes the same bytes */
		__atomic_store_n(&once, 1, __ATOMIC_RELEASE);
	}
	return &tm;
}

uint64_t kg_cyc_dma(uint64_t bytes, uint32_t active)
{
	return SPYRE_TM_ISSUE_CYCLES + spyre_timing_dma(tm_default(), bytes, active);
}

/* LPDDR bytes beyond the data of @rows rows of @row_bytes: the timing model's per-burst overhead. */
static uint64_t burst_overhead(uint64_t rows, uint64_t row_bytes, bool contiguous)
{
	return spyre_timing_dma_demand(tm_default(), rows, row_bytes, contiguous) - rows * row_bytes;
}

/* Cycles of @macs multiply-accumulates at the PE array's rate for @dt (planner aggregates). */
static uint64_t mac_cycles(uint32_t dt, uint64_t macs)
{
	const struct spyre_timing *t = tm_default();

	return kg_cdiv(macs * t->clock_mhz, (uint64_t)t->peak_mac_per_ns[dt] * 1000);
}

uint64_t kg_cyc_mm(uint32_t dt, uint32_t dt2, uint64_t m, uint64_t n, uint64_t k)
{
	return SPYRE_TM_ISSUE_CYCLES + spyre_timing_matmul(tm_default(), dt, dt2, m, n, k, 0);
}

uint64_t kg_cyc_sfu(uint64_t elems, uint32_t passes, uint64_t bytes)
{
	return SPYRE_TM_ISSUE_CYCLES + spyre_timing_sfu(tm_default(), elems, bytes, passes);
}

/* ---- grouped dimensions ---------------------------------------------------- */

/*
 * A dimension of n real elements, grouped by g (g == n: dense) with each
 * group taking gp physical elements; pw is the physical index after the last
 * real element; unit the split/tile granule in physical elements.
 */
struct cmap {
	uint64_t n, g, gp, pw, unit;
};

static struct cmap cmap_make(uint64_t n, uint64_t group, uint32_t esz, uint64_t unit)
{
	struct cmap c = { .n = n, .g = n, .gp = n, .unit = unit };

	if (group && group < n && (group * esz) % STICK) {
		c.g = group;
		c.gp = kg_rup(group, STICK / esz);
	}
	c.pw = ((n - 1) / c.g) * c.gp + (n - 1) % c.g + 1;
	return c;
}

static bool cmap_dense(const struct cmap *c)
{
	return c->g == c->n;
}

/* A run of real elements: physical index p, real index r, len elements. */
struct run {
	uint64_t p, r, len;
};

struct run_it {
	const struct cmap *c;
	uint64_t p0, p1, gi;
};

static struct run_it runs(const struct cmap *c, uint64_t p0, uint64_t p1)
{
	return (struct run_it){ .c = c, .p0 = p0, .p1 = p1, .gi = p0 / c->gp };
}

static bool run_next(struct run_it *it, struct run *r)
{
	const struct cmap *c = it->c;

	for (; it->gi * c->gp < it->p1 && it->gi * c->g < c->n; it->gi++) {
		uint64_t gs = it->gi * c->gp, glen = kg_min64(c->g, c->n - it->gi * c->g);
		uint64_t a = kg_max64(it->p0, gs), b = kg_min64(it->p1, gs + glen);

		if (a >= b)
			continue;
		*r = (struct run){ .p = a, .r = it->gi * c->g + (a - gs), .len = b - a };
		it->gi++;
		return true;
	}
	return false;
}

/* Real index range [*r0, *r1) covered by physical [p0, p1). */
static void real_range(const struct cmap *c, uint64_t p0, uint64_t p1, uint64_t *r0, uint64_t *r1)
{
	struct run_it it = runs(c, p0, p1);
	struct run r;
	bool first = true;

	*r0 = *r1 = 0;
	while (run_next(&it, &r)) {
		if (first)
			*r0 = r.r;
		first = false;
		*r1 = r.r + r.len;
	}
}

/* Runs in a tile of w physical elements (for the plan: an upper estimate). */
static uint64_t runs_in(const struct cmap *c, uint64_t w)
{
	return cmap_dense(c) ? 1 : kg_cdiv(w, c->gp) + 1;
}

/* ---- planning ------------------------------------------------------------------ */

enum { ORD_X, ORD_W, ORD_S };

struct gplan {
	uint64_t mt, nt, kt;	/* rows, physical columns, physical k of a tile */
	int ord;
	uint64_t cyc, insns;
};

struct gctx {
	struct kg_gemm j;
	struct cmap nc, kc;
	uint32_t ea, eb, ey, ec;	/* element bytes of A, B, Y, and of B as the matmul reads it */
	uint32_t cdt;			/* the matmul's input dtype */
	bool castb, bias, nk;
	uint32_t active, sp_bytes, max_insns;
	struct {
		uint64_t mr, w, max_insns;
		struct gplan p;
	} memo[4];
	uint32_t nmemo;
};

static int gctx_init(struct kgen *g, struct gctx *x, const struct kg_gemm *j)
{
	memset(x, 0, sizeof(*x));
	x->j = *j;
	x->ea = SPYRE_DT_SIZE(j->a.dt);
	x->eb = SPYRE_DT_SIZE(j->b.dt);
	x->ey = SPYRE_DT_SIZE(j->y.dt);
	x->bias = j->bias >= 0;
	if (j->a.dt == j->b.dt) {
		x->cdt = j->a.dt;
	} else if (j->a.dt == SPYRE_DT_FP32) {
		x->cdt = SPYRE_DT_FP32;
		x->castb = true;
	} else {
		return kg_fail(g, "gemm: A in %s with B in %s", spyre_dtype_name(j->a.dt),
			       spyre_dtype_name(j->b.dt));
	}
	x->ec = SPYRE_DT_SIZE(x->cdt);
	x->nk = j->b_nk;
	if (x->nk && x->castb)
		return kg_fail(g, "gemm: B as [n x k] needs A and B in one dtype");
	if (j->n_group && j->n_group < j->n && j->b.dt != j->y.dt)
		return kg_fail(g, "gemm: grouped columns need B and Y in one dtype");
	/* column granule: a stick of the narrowest of B, Y (and the fp32 bias) */
	uint32_t emin = x->eb < x->ey ? x->eb : x->ey;

	x->nc = cmap_make(j->n, j->n_group, x->eb, STICK / emin);
	x->kc = cmap_make(j->k, j->k_group, x->ea, STICK / x->ea);
	x->sp_bytes = g->sp_bytes;
	return 0;
}

/*
 * Cost of a plan for a block of @mr rows and @w physical columns (@wr of them
 * real), or 0 when it does not fit the scratchpad or the instruction budget.
 */
static uint64_t plan_cost(const struct gctx *x, uint64_t mr, uint64_t w, uint64_t wr, struct gplan *p)
{
	const struct kg_gemm *j = &x->j;
	uint64_t kp = x->kc.pw, mt = p->mt, nt = p->nt, kt = p->kt;
	uint64_t M = kg_cdiv(mr, mt), N = kg_cdiv(w, nt), K = kg_cdiv(kp, kt);
	uint64_t kt_real = kg_min64(kt, j->k);
	bool direct = K == 1 && cmap_dense(&x->kc) && !x->bias && (x->j.y.dt == x->cdt || x->ey == 4);
	uint64_t xrow = kg_rup((p->ord == ORD_X ? kp : kg_min64(kt, kp)) * x->ea, STICK);
	uint64_t wrows = p->ord == ORD_W ? j->k : kt_real;
	uint64_t wrow = kg_rup(nt * x->eb, STICK), acc_row = kg_rup(nt * 4, STICK);
	uint64_t sp = mt * xrow + wrows * wrow + (x->castb ? wrows * acc_row : 0) +
		      ((x->ey == 4 || !direct) ? mt * acc_row : 0) + (x->ey != 4 ? mt * kg_rup(nt * x->ey, STICK) : 0) +
		      (x->bias ? acc_row : 0);
	uint64_t xl, wl, xpass, wpass, bl, cyc, insns, mm, tiles = M * N;
	/* B as [n x k]: the B buffer holds physical k rows, beside a staging buffer of nt rows of W */
	uint64_t kcols = p->ord == ORD_W ? kp : kg_min64(kt, kp), srow = kg_rup(kcols * x->eb, STICK);

	if (x->nk) {
		sp += (kcols - wrows) * wrow + nt * srow;
		if (kcols > 0xffff || srow / STICK > 0xffff)
			return 0;
	}
	if (sp > x->sp_bytes || xrow / STICK > 0xffff || wrow / STICK > 0xffff)
		return 0;
	switch (p->ord) {
	case ORD_X:
		xl = M;
		xpass = 1;
		wl = (N == 1 && K == 1) ? 1 : M * N * K;
		wpass = wl == 1 ? 1 : M;
		break;
	case ORD_W:
		wl = N;
		wpass = 1;
		xl = (M == 1 && K == 1) ? 1 : N * M * K;
		xpass = xl == 1 ? 1 : N;
		break;
	default:
		xl = K == 1 ? M : M * N * K;
		xpass = K == 1 ? 1 : N;
		wl = K == 1 ? (N == 1 ? 1 : M * N) : M * N * K;
		wpass = wl == 1 ? 1 : M;
		break;
	}
	/* bias tiles; grouped: a partial first group, the whole ones (strided), a partial last */
	bl = !x->bias ? 0 : (p->ord == ORD_W || N == 1) ? N : M * N;
	/* bytes through LPDDR */
	uint64_t wbytes = x->nk ? wpass * wr * kg_rup(kp * x->eb, STICK) : wpass * j->k * kg_rup(w * x->eb, STICK);
	uint64_t bytes = xpass * mr * kg_rup(kp * x->ea, STICK) + wbytes +
			 mr * kg_rup(w * x->ey, STICK) + bl * kg_rup(nt * 4, STICK);
	/* B as [n x k]: a DMA per run of real columns of each B tile */
	uint64_t dmas = xl + wl * (x->nk ? runs_in(&x->nc, nt) : 1) + bl * (cmap_dense(&x->nc) ? 1 : 3) + tiles;
	/* LPDDR time of the bursts: each strided row is its own (isa/spyre_timing.h), a contiguous load one run */
	{
		uint64_t xr = kg_rup((p->ord == ORD_X || K == 1 ? kp : kt) * x->ea, STICK);
		uint64_t xrows = xpass * mr * (p->ord == ORD_X || K == 1 ? 1 : K);
		uint64_t wr_b = kg_rup(kg_min64(nt, w) * x->eb, STICK), wrow_n = wpass * j->k * N;
		uint64_t yr = kg_rup(kg_min64(nt, w) * x->ey, STICK), yrows = mr * N;

		if (x->nk) {	/* W's rows: nt of them per tile, kcols wide */
			wr_b = srow;
			wrow_n = wpass * wr * (p->ord == ORD_W || K == 1 ? 1 : K);
		}
		bytes += burst_overhead(xrows, xr, xr == j->a.pitch) +
			 burst_overhead(wrow_n, wr_b, (x->nk || N == 1) && wr_b == j->b.pitch) +
			 burst_overhead(yrows, yr, N == 1 && yr == j->y.pitch);
	}

	cyc = dmas * (SPYRE_TM_ISSUE_CYCLES + SPYRE_TM_DMA_LATENCY_CYCLES) +
	      kg_cdiv(bytes * SPYRE_TM_CLOCK_MHZ * (x->active ? x->active : 1), SPYRE_TM_MEM_BW_MBPS);
	/* matmuls: one per (k run, n run) of every tile step */
	uint64_t nr = runs_in(&x->nc, nt), kr = runs_in(&x->kc, kt);

	mm = tiles * K * nr * kr;
	{
		uint64_t macs = kg_rup(mr, SPYRE_TM_PE_ROWS) * wr * j->k;
		uint64_t ntr = kg_min64(nt, wr), spb = tiles * K * ((mt * kt_real + kt_real * ntr) * x->ec + mt * ntr * 4);

		cyc += mm * SPYRE_TM_ISSUE_CYCLES + kg_max64(mac_cycles(x->cdt, macs), kg_cdiv(spb, SPYRE_TM_SP_BYTES_PER_CYCLE));
	}
	/* casts of B tiles, the epilogue (bias add / cast) */
	if (x->castb)
		cyc += wl * kg_cyc_sfu(kt_real * nt, 1, kt_real * nt * (x->eb + 4));
	if (x->nk)
		cyc += wl * kg_cyc_sfu(kcols * nt, 1, 2 * kcols * nt * x->eb);
	if (!direct && (x->bias || x->ey != 4))
		cyc += tiles * kg_cyc_sfu(mt * nt, 1, mt * nt * ((x->bias ? 8 : 4) + x->ey));
	insns = dmas + mm + (x->castb ? wl : 0) + (x->nk ? wl : 0) + (!direct && (x->bias || x->ey != 4) ? tiles : 0);
	if (insns > x->max_insns)
		return 0;
	p->cyc = cyc;
	p->insns = insns;
	return cyc;
}

static bool plan(struct gctx *x, uint64_t mr, uint64_t w, uint64_t wr, struct gplan *best)
{
	uint64_t ms[64], ns[64], ks[64];
	uint32_t nm, nn, nk;
	bool found = false;

	for (uint32_t i = 0; i < x->nmemo; i++)
		if (x->memo[i].mr == mr && x->memo[i].w == w && x->memo[i].max_insns == x->max_insns) {
			*best = x->memo[i].p;
			return true;
		}
	nm = kg_row_tiles(mr, 16, ms, 64);
	nn = kg_tile_sizes(w, x->nc.unit, 0xffff / x->nc.unit * x->nc.unit, 16, ns, 64);
	nk = kg_tile_sizes(x->kc.pw, x->kc.unit, 0xffff / x->kc.unit * x->kc.unit, 16, ks, 64);
	for (uint32_t a = 0; a < nm; a++)
		for (uint32_t b = 0; b < nn; b++)
			for (uint32_t c = 0; c < nk; c++)
				for (int o = ORD_X; o <= ORD_S; o++) {
					struct gplan p = { .mt = ms[a], .nt = ns[b], .kt = ks[c], .ord = o };

					if (!plan_cost(x, mr, w, wr, &p))
						continue;
					if (!found || p.cyc < best->cyc || (p.cyc == best->cyc && p.insns < best->insns)) {
						*best = p;
						found = true;
					}
				}
	if (found) {
		uint32_t i = x->nmemo < 4 ? x->nmemo++ : 3;

		x->memo[i].mr = mr;
		x->memo[i].w = w;
		x->memo[i].max_insns = x->max_insns;
		x->memo[i].p = *best;
	}
	return found;
}

/* ---- emission -------------------------------------------------------------------- */

static void dma(struct kgen *g, uint32_t c, unsigned op, uint32_t sp, const struct kg_mat *m, uint64_t off,
		uint64_t rows, uint64_t row_bytes, uint64_t mem_stride, uint64_t sp_stride)
{
	spyre_pb_dma(g->pb, c, op, &(struct spyre_pb_dma){
		.sp = sp, .mem = { .sym = m->slot, .off = m->base + off }, .rows = (uint32_t)rows,
		.row_bytes = (uint32_t)row_bytes, .mem_stride = (uint32_t)mem_stride,
		.sp_stride = (uint32_t)sp_stride });
}

/* Load the fp32 bias of physical columns [p0, p1) into sp (laid out like the accumulator). */
static void load_bias(struct kgen *g, const struct gctx *x, uint32_t c, uint32_t sp, uint64_t p0, uint64_t p1)
{
	const struct cmap *nc = &x->nc;
	struct kg_mat b = { .slot = x->j.bias, .dt = SPYRE_DT_FP32 };
	uint64_t gpitch = kg_rup(nc->g * 4, STICK);
	struct run_it it = runs(nc, p0, p1);
	struct run r;
	/* a pending strided DMA of whole groups */
	uint64_t w_first = 0, w_count = 0, w_sp = 0;

	while (run_next(&it, &r)) {
		uint64_t off = (r.r / nc->g) * gpitch + (r.r % nc->g) * 4;
		bool whole = !cmap_dense(nc) && r.len == nc->g;

		if (whole && w_count && r.r / nc->g == w_first + w_count) {
			w_count++;
			continue;
		}
		if (w_count)
			dma(g, c, SPYRE_ISA_OP_LOAD, (uint32_t)w_sp, &b, w_first * gpitch, w_count, gpitch, gpitch,
			    nc->gp * 4);
		w_count = 0;
		if (whole) {
			w_first = r.r / nc->g;
			w_count = 1;
			w_sp = sp + (r.p - p0) * 4;
			continue;
		}
		dma(g, c, SPYRE_ISA_OP_LOAD, (uint32_t)(sp + (r.p - p0) * 4), &b, off, 1, kg_rup(r.len * 4, STICK), 0, 0);
	}
	if (w_count)
		dma(g, c, SPYRE_ISA_OP_LOAD, (uint32_t)w_sp, &b, w_first * gpitch, w_count, gpitch, gpitch, nc->gp * 4);
}

/* Emit core @c's block: rows [r0, r0 + mr), physical columns [p0, p1), with plan @p. */
static void emit_block(struct kgen *g, struct gctx *x, uint32_t c, uint64_t r0, uint64_t mr, uint64_t p0,
		       uint64_t p1, const struct gplan *p)
{
	const struct kg_gemm *j = &x->j;
	uint64_t kp = x->kc.pw, mt = p->mt, nt = p->nt, kt = p->kt, w = p1 - p0;
	uint64_t M = kg_cdiv(mr, mt), N = kg_cdiv(w, nt), K = kg_cdiv(kp, kt);
	bool direct = K == 1 && cmap_dense(&x->kc) && !x->bias && (x->j.y.dt == x->cdt || x->ey == 4);
	uint64_t xld = kg_rup((p->ord == ORD_X ? kp : kg_min64(kt, kp)) * x->ea, STICK) / STICK;
	uint64_t wrows = p->ord == ORD_W ? j->k : kg_min64(kt, j->k);
	uint64_t wld = kg_rup(nt * x->eb, STICK) / STICK, cld = kg_rup(nt * x->ec, STICK) / STICK;
	uint64_t accld = kg_rup(nt * 4, STICK) / STICK, outld = kg_rup(nt * x->ey, STICK) / STICK;
	uint32_t xb, wb, wcb = 0, acc = 0, out = 0, bb = 0, stg = 0;
	int64_t cur_x = -1, cur_w = -1, cur_b = -1;
	uint64_t wk0 = 0;	/* real k (B as [n x k]: physical k) of the B buffer's first row */
	/* B as [n x k]: physical k per B tile, the staging buffer's row in sticks */
	uint64_t kcols = p->ord == ORD_W ? kp : kg_min64(kt, kp), sld = kg_rup(kcols * x->eb, STICK) / STICK;

	kg_sp_reset(g, c);
	xb = kg_sp_alloc(g, c, mt * xld * STICK);
	wb = kg_sp_alloc(g, c, (x->nk ? kcols : wrows) * wld * STICK);
	if (x->castb)
		wcb = kg_sp_alloc(g, c, wrows * cld * STICK);
	if (x->ey == 4 || !direct)
		acc = kg_sp_alloc(g, c, mt * accld * STICK);
	if (x->ey != 4)
		out = kg_sp_alloc(g, c, mt * outld * STICK);
	else
		out = acc;
	if (x->bias)
		bb = kg_sp_alloc(g, c, accld * STICK);
	if (x->nk)
		stg = kg_sp_alloc(g, c, nt * sld * STICK);
	if (g->failed)
		return;

	uint64_t outer = p->ord == ORD_W ? N : M, inner = p->ord == ORD_W ? M : N;

	for (uint64_t o = 0; o < outer; o++)
		for (uint64_t i = 0; i < inner; i++) {
			uint64_t mi = p->ord == ORD_W ? i : o, ni = p->ord == ORD_W ? o : i;
			uint64_t rs = r0 + mi * mt, rows = kg_min64(mt, mr - mi * mt);
			uint64_t np0 = p0 + ni * nt, np1 = kg_min64(p1, np0 + nt), nw = np1 - np0;

			if (x->bias && cur_b != (int64_t)ni) {
				load_bias(g, x, c, bb, np0, np1);
				cur_b = (int64_t)ni;
			}
			for (uint64_t ki = 0; ki < K; ki++) {
				uint64_t kp0 = ki * kt, kp1 = kg_min64(kp, kp0 + kt), xk0;
				int64_t xid = p->ord == ORD_X ? (int64_t)mi : (int64_t)(mi * K + ki);
				int64_t wid = p->ord == ORD_W ? (int64_t)ni : (int64_t)(ni * K + ki);
				uint32_t bsrc = x->castb ? wcb : wb;
				uint64_t bld = x->castb ? cld : wld;

				/* A tile */
				xk0 = p->ord == ORD_X ? 0 : kp0;
				if (cur_x != xid) {
					uint64_t xk1 = p->ord == ORD_X ? kp : kp1;

					dma(g, c, SPYRE_ISA_OP_LOAD, xb, &j->a, rs * j->a.pitch + xk0 * x->ea, rows,
					    kg_rup((xk1 - xk0) * x->ea, STICK), j->a.pitch, xld * STICK);
					cur_x = xid;
				}
				/* B as [n x k]: W's rows of the tile's columns, transposed */
				if (x->nk && cur_w != wid) {
					uint64_t kc0 = p->ord == ORD_W ? 0 : kp0, kc1 = p->ord == ORD_W ? kp : kp1;
					struct run_it nit = runs(&x->nc, np0, np1);
					struct run nr;

					while (run_next(&nit, &nr))
						dma(g, c, SPYRE_ISA_OP_LOAD, (uint32_t)(stg + (nr.p - np0) * sld * STICK), &j->b,
						    nr.r * j->b.pitch + kc0 * x->eb, nr.len, kg_rup((kc1 - kc0) * x->eb, STICK),
						    j->b.pitch, sld * STICK);
					spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
						.op = SPYRE_ISA_OP_TRANSPOSE, .dt = j->b.dt, .dt2 = j->b.dt, .d = wb, .a = stg,
						.rows = (uint32_t)nw, .cols = (uint32_t)(kc1 - kc0), .ldd = (uint32_t)wld,
						.lda = (uint32_t)sld });
					wk0 = kc0;
					cur_w = wid;
				}
				/* B tile (cast to fp32 if A is) */
				if (cur_w != wid) {
					uint64_t kr0, kr1;

					if (p->ord == ORD_W) {
						kr0 = 0;
						kr1 = j->k;
					} else {
						real_range(&x->kc, kp0, kp1, &kr0, &kr1);
					}
					dma(g, c, SPYRE_ISA_OP_LOAD, wb, &j->b, kr0 * j->b.pitch + np0 * x->eb, kr1 - kr0,
					    kg_rup(nw * x->eb, STICK), j->b.pitch, wld * STICK);
					if (x->castb)
						spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
							.op = SPYRE_ISA_OP_CAST, .dt = j->b.dt, .dt2 = SPYRE_DT_FP32,
							.d = wcb, .a = wb, .rows = (uint32_t)(kr1 - kr0), .cols = (uint32_t)nw,
							.ldd = (uint32_t)cld, .lda = (uint32_t)wld });
					wk0 = kr0;
					cur_w = wid;
				}
				/* one matmul per (k run, n run) */
				struct run_it kit = runs(&x->kc, kp0, kp1);
				struct run kr;
				bool first = ki == 0;

				while (run_next(&kit, &kr)) {
					struct run_it nit = runs(&x->nc, np0, np1);
					struct run nr;

					while (run_next(&nit, &nr))
						spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
							.op = SPYRE_ISA_OP_MATMUL, .dt = x->cdt,
							.dt2 = direct ? j->y.dt : SPYRE_DT_FP32,
							.flags = first ? 0 : SPYRE_IF_ACC,
							.d = (uint32_t)((direct ? out : acc) +
									(nr.p - np0) * (direct ? x->ey : 4)),
							.a = (uint32_t)(xb + (kr.p - xk0) * x->ea),
							.b = (uint32_t)(bsrc + ((x->nk ? kr.p : kr.r) - wk0) * bld * STICK +
									(nr.p - np0) * x->ec),
							.rows = (uint32_t)rows, .cols = (uint32_t)nr.len, .k = (uint32_t)kr.len,
							.ldd = (uint32_t)(direct ? outld : accld), .lda = (uint32_t)xld,
							.ldb = (uint32_t)bld });
					first = false;
				}
			}
			/* epilogue: + bias in fp32, one rounding, store */
			if (!direct && x->bias)
				spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
					.op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32, .dt2 = j->y.dt,
					.flags = SPYRE_IF_BCAST_ROW, .d = out, .a = acc, .b = bb,
					.rows = (uint32_t)rows, .cols = (uint32_t)nw, .ldd = (uint32_t)outld,
					.lda = (uint32_t)accld });
			else if (!direct && x->ey != 4)
				spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
					.op = SPYRE_ISA_OP_CAST, .dt = SPYRE_DT_FP32, .dt2 = j->y.dt, .d = out, .a = acc,
					.rows = (uint32_t)rows, .cols = (uint32_t)nw, .ldd = (uint32_t)outld,
					.lda = (uint32_t)accld });
			dma(g, c, SPYRE_ISA_OP_STORE, out, &j->y, rs * j->y.pitch + np0 * x->ey, rows,
			    kg_rup(nw * x->ey, STICK), j->y.pitch, outld * STICK);
		}
}

/* Physical columns [*p0, *p1) of part @i of @parts (stick granule). */
static void col_split(const struct gctx *x, uint32_t parts, uint32_t i, uint64_t *p0, uint64_t *p1)
{
	struct kg_range r = kg_split(kg_cdiv(x->nc.pw, x->nc.unit), parts, i, 1);

	*p0 = kg_min64(r.start * x->nc.unit, x->nc.pw);
	*p1 = kg_min64((r.start + r.count) * x->nc.unit, x->nc.pw);
}

/* Real columns in physical [p0, p1). */
static uint64_t real_cols(const struct gctx *x, uint64_t p0, uint64_t p1)
{
	struct run_it it = runs(&x->nc, p0, p1);
	struct run r;
	uint64_t n = 0;

	while (run_next(&it, &r))
		n += r.len;
	return n;
}


/* Plan (and emit) one block; fails the generation naming the shape when nothing fits. */
static int block(struct kgen *g, struct gctx *x, uint32_t c, uint64_t r0, uint64_t mr, uint64_t p0, uint64_t p1,
		 int emit, uint64_t *cyc)
{
	struct gplan p;

	if (!plan(x, mr, p1 - p0, real_cols(x, p0, p1), &p))
		return kg_fail(g, "%llu x %llu x %llu (a %llu-row x %llu-column block): no tiling fits a "
			       "scratchpad of %u bytes in %u instructions",
			       (unsigned long long)x->j.m, (unsigned long long)x->j.n, (unsigned long long)x->j.k,
			       (unsigned long long)mr, (unsigned long long)(p1 - p0), x->sp_bytes, x->max_insns);
	if (cyc)
		*cyc += p.cyc;
	if (emit)
		emit_block(g, x, c, r0, mr, p0, p1, &p);
	return kg_ok(g);
}

static uint32_t count_active(const struct gctx *x, uint32_t cores, uint32_t strategy, uint64_t rows_units)
{
	uint64_t units = strategy == SPYRE_KSTRAT_SPLIT_M ? rows_units : kg_cdiv(x->nc.pw, x->nc.unit);

	return (uint32_t)kg_min64(cores, units);
}

/* Rows [*r0, *r0 + *mr) and physical columns [*p0, *p1) of core @i of @parts. */
static void part(const struct gctx *x, uint32_t strategy, uint32_t parts, uint32_t i, uint64_t *r0, uint64_t *mr,
		 uint64_t *p0, uint64_t *p1)
{
	*r0 = 0;
	*mr = x->j.m;
	*p0 = 0;
	*p1 = x->nc.pw;
	if (strategy == SPYRE_KSTRAT_SPLIT_M) {
		struct kg_range r = kg_split(x->j.m, parts, i, SPYRE_TM_PE_ROWS);

		*r0 = r.start;
		*mr = r.count;
	} else {
		col_split(x, parts, i, p0, p1);
	}
}

struct parts_ctx {
	struct gctx *x;
	uint32_t strategy;
};

/* kg_choose_parts()'s estimate of the split over @parts cores: its first (largest) block. */
static bool parts_cost(void *ctx, uint32_t parts, uint64_t *cycles)
{
	struct parts_ctx *pc = ctx;
	struct gctx *x = pc->x;
	uint64_t r0, mr, p0, p1;
	struct gplan p;

	x->active = parts;
	x->nmemo = 0;
	part(x, pc->strategy, parts, 0, &r0, &mr, &p0, &p1);
	if (!plan(x, mr, p1 - p0, real_cols(x, p0, p1), &p))
		return false;
	*cycles = p.cyc;
	return true;
}

/* How many cores to split over (kg_choose_parts). */
static uint32_t choose_parts(struct gctx *x, uint32_t strategy, uint32_t cores)
{
	uint64_t units = strategy == SPYRE_KSTRAT_SPLIT_M ? kg_cdiv(x->j.m, SPYRE_TM_PE_ROWS) :
							     kg_cdiv(x->nc.pw, x->nc.unit);
	struct parts_ctx pc = { x, strategy };
	uint32_t best = kg_choose_parts(units, cores, parts_cost, &pc);

	x->nmemo = 0;
	return best;
}

int kg_gemm_split(struct kgen *g, const struct kg_gemm *j, uint32_t strategy, uint32_t active,
		  uint32_t max_insns, int emit, uint64_t *cycles, uint32_t *used)
{
	struct gctx *x = malloc(sizeof(*x));
	uint64_t worst = 0;
	uint32_t parts = g->cores;
	int ret;

	if (!x)
		return kg_fail(g, "out of memory");
	ret = gctx_init(g, x, j);
	if (ret)
		goto out;
	x->max_insns = max_insns;
	if (active) {
		/* the program launches @active cores: they share LPDDR, the split uses them */
		parts = (uint32_t)kg_min64(active, g->cores);
		x->active = active;
	} else {
		parts = choose_parts(x, strategy, g->cores);
		x->active = count_active(x, parts, strategy, kg_cdiv(j->m, SPYRE_TM_PE_ROWS));
	}
	for (uint32_t c = 0; c < parts && !ret; c++) {
		uint64_t r0, mr, p0, p1, cyc = 0;

		part(x, strategy, parts, c, &r0, &mr, &p0, &p1);
		if (!mr || p0 >= p1)
			continue;
		ret = block(g, x, c, r0, mr, p0, p1, emit, &cyc);
		worst = kg_max64(worst, cyc);
		if (used)
			*used |= 1u << c;
	}
out:
	free(x);
	if (cycles)
		*cycles = worst;
	return ret;
}

/* ---- the generators ---------------------------------------------------------------- */

static int check_dims(struct kgen *g, const struct spyre_kdesc *d)
{
	if (!d->m || !d->n || !d->k)
		return kg_fail(g, "m, n and k must be non-zero (m %llu, n %llu, k %llu)", (unsigned long long)d->m,
			       (unsigned long long)d->n, (unsigned long long)d->k);
	if (d->m > UINT32_MAX || d->n > UINT32_MAX || d->k > UINT32_MAX)
		return kg_fail(g, "m, n and k must be below 2^32");
	return 0;
}

int kg_gen_linear(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype;
	uint64_t ig = d->in_group, og = d->out_group, wpitch;
	struct kg_gemm j;
	int sx, sw, sb = -1, sy;
	bool nk;

	if (check_dims(g, d))
		return -EINVAL;
	if (d->flags & (SPYRE_KF_GELU | SPYRE_KF_DECODE))
		return kg_fail(g, "flags 0x%x do not apply to linear", d->flags & (SPYRE_KF_GELU | SPYRE_KF_DECODE));
	if (d->batch > 1 || d->heads || d->kv_heads || d->head_dim || d->max_pos)
		return kg_fail(g, "batch, heads, head_dim and max_pos do not apply to linear");
	nk = d->flags & SPYRE_KF_WEIGHT_NK;
	wpitch = nk ? spyre_kernel_grouped_pitch(d->k, ig, dt) : spyre_kernel_grouped_pitch(d->n, og, dt);
	sx = kg_slot(g, "x", dt, d->m, d->k, spyre_kernel_grouped_pitch(d->k, ig, dt), SPYRE_SYM_IN);
	sw = nk ? kg_slot(g, "w", dt, d->n, d->k, wpitch, SPYRE_SYM_IN) :
		  kg_slot(g, "w", dt, d->k, d->n, wpitch, SPYRE_SYM_IN);
	if (d->flags & SPYRE_KF_BIAS)
		sb = kg_slot(g, "bias", SPYRE_DT_FP32, 1, d->n, spyre_kernel_grouped_pitch(d->n, og, SPYRE_DT_FP32),
			     SPYRE_SYM_IN);
	sy = kg_slot(g, "y", dt, d->m, d->n, spyre_kernel_grouped_pitch(d->n, og, dt), SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	j = (struct kg_gemm){
		.a = { .slot = sx, .dt = dt, .pitch = spyre_kernel_grouped_pitch(d->k, ig, dt) },
		.b = { .slot = sw, .dt = dt, .pitch = wpitch },
		.y = { .slot = sy, .dt = dt, .pitch = spyre_kernel_grouped_pitch(d->n, og, dt) },
		.bias = sb, .m = d->m, .n = d->n, .k = d->k, .k_group = ig, .n_group = og, .b_nk = nk,
	};
	g->info->macs = d->m * d->n * d->k;
	return kg_gemm_split(g, &j, g->strategy, 0, MAX_INSNS, 1, NULL, NULL);
}

int kg_gen_bmm(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, batch = d->batch ? d->batch : 1;
	uint64_t m = d->m, n = d->n, k = d->k, ap = kg_pitch(k, dt), bp = kg_pitch(n, dt);
	struct kg_gemm j;
	struct gctx *x;
	int sa, sb, sy, ret = 0;

	if (check_dims(g, d))
		return -EINVAL;
	if (d->flags & (SPYRE_KF_BIAS | SPYRE_KF_GELU | SPYRE_KF_DECODE))
		return kg_fail(g, "flags 0x%x do not apply to bmm",
			       d->flags & (SPYRE_KF_BIAS | SPYRE_KF_GELU | SPYRE_KF_DECODE));
	if (d->in_group || d->out_group)
		return kg_fail(g, "in_group and out_group do not apply to bmm");
	if ((uint64_t)batch * m > UINT32_MAX || (uint64_t)batch * k > UINT32_MAX)
		return kg_fail(g, "batch %u x %llu rows is too large", batch, (unsigned long long)(m > k ? m : k));
	sa = kg_slot(g, "a", dt, batch * m, k, ap, SPYRE_SYM_IN);
	sb = kg_slot(g, "b", dt, batch * k, n, bp, SPYRE_SYM_IN);
	sy = kg_slot(g, "y", dt, batch * m, n, bp, SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	g->info->macs = batch * m * n * k;
	j = (struct kg_gemm){
		.a = { .slot = sa, .dt = dt, .pitch = ap }, .b = { .slot = sb, .dt = dt, .pitch = bp },
		.y = { .slot = sy, .dt = dt, .pitch = bp }, .bias = -1, .m = m, .n = n, .k = k,
	};
	x = malloc(sizeof(*x));
	if (!x)
		return kg_fail(g, "out of memory");
	ret = gctx_init(g, x, &j);
	if (ret)
		goto out;

	uint64_t mu = kg_cdiv(m, SPYRE_TM_PE_ROWS), units = g->strategy == SPYRE_KSTRAT_SPLIT_M ? batch * mu : 0;

	x->active = g->strategy == SPYRE_KSTRAT_SPLIT_M ? (uint32_t)kg_min64(g->cores, units) :
		    count_active(x, g->cores, SPYRE_KSTRAT_SPLIT_N, 0);
	for (uint32_t c = 0; c < g->cores && !ret; c++) {
		uint64_t b0 = 0, b1 = batch, u0 = 0, u1 = 0, p0 = 0, p1 = x->nc.pw;

		if (g->strategy == SPYRE_KSTRAT_SPLIT_M) {
			struct kg_range r = kg_split(units, g->cores, c, 1);

			if (!r.count)
				continue;
			u0 = r.start;
			u1 = r.start + r.count;
			b0 = u0 / mu;
			b1 = kg_cdiv(u1, mu);
		} else {
			col_split(x, g->cores, c, &p0, &p1);
			if (p0 >= p1)
				continue;
		}
		x->max_insns = (uint32_t)(MAX_INSNS / (b1 - b0));
		for (uint64_t b = b0; b < b1 && !ret; b++) {
			uint64_t r0 = 0, mr = m;

			if (g->strategy == SPYRE_KSTRAT_SPLIT_M) {
				uint64_t l0 = kg_max64(u0, b * mu) - b * mu, l1 = kg_min64(u1, (b + 1) * mu) - b * mu;

				r0 = l0 * SPYRE_TM_PE_ROWS;
				mr = kg_min64(l1 * SPYRE_TM_PE_ROWS, m) - r0;
			}
			x->j.a.base = b * m * ap;
			x->j.b.base = b * k * bp;
			x->j.y.base = b * m * bp;
			ret = block(g, x, c, r0, mr, p0, p1, 1, NULL);
		}
	}
out:
	free(x);
	return ret ? ret : kg_ok(g);
}
