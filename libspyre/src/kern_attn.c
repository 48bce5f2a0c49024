// SPDX-License-Identifier: MIT
/*
 * ROPE and ATTENTION kernels (docs/kernels.md, "## Rotary embedding and
 * attention").
 *
 * ROPE: Y = X cos + rotate_half(X) sin per head, rotate_half done as a
 * matmul with a constant signed permutation R (the half-head slices are not
 * stick-aligned), fp32 inside, rounded once. Tokens x heads are split over
 * the cores; the table rows come through an address register (scalar 0 =
 * pos0 * table pitch), so one program serves every position.
 *
 * ATTENTION: the work is cut into units (KV head g, query heads j0..j0+nj of
 * the group, query tokens t0..t0+nt, keys k0..k1): the unit's query rows
 * (token, head) form one matrix Qg [nt*nj x hd], the keys stream through
 * the scratchpad in tiles with an online softmax (running max m, sum l,
 * accumulator acc, all fp32). Prefill reads its keys and values from the
 * K/V inputs (the cache rows of pos0 = 0 are those rows) and writes the
 * cache from the tiles it loaded; decode writes the new row, then reads
 * the cache, with a mask built from constant tables at register offsets
 * (launch scalars), the key range split across the cores of a KV head and
 * the partial (m, l, acc) combined on chip over the ring.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kern.h"
#include "spyre_dtype.h"

#define STICK		SPYRE_STICK_BYTES
#define NEG_BIG		(-1.0e30f)	/* masked score: exp(NEG_BIG - max) is exactly 0 in fp32 */
#define F32_PER_STICK	(STICK / 4)

static uint64_t cdiv(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static uint64_t umax(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t umin(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* ---- cost formulas (docs/spyre-isa.md §6, default device): planning only ---- */

static inline uint64_t c_dma(uint64_t bytes, uint32_t active)
{
	return SPYRE_TM_ISSUE_CYCLES + SPYRE_TM_DMA_LATENCY_CYCLES +
	       cdiv(bytes * SPYRE_TM_CLOCK_MHZ * active, SPYRE_TM_MEM_BW_MBPS);
}

static inline uint64_t c_sfu(uint64_t elems, uint64_t bytes, uint32_t passes)
{
	return SPYRE_TM_ISSUE_CYCLES + umax(cdiv(elems, SPYRE_TM_SFU_ELEMS_PER_CYCLE) * passes,
					    cdiv(bytes, SPYRE_TM_SP_BYTES_PER_CYCLE));
}

static inline uint64_t c_mm(uint64_t m, uint64_t n, uint64_t k, uint32_t dt, uint32_t dt2)
{
	uint64_t mac = dt == SPYRE_DT_FP32 ? SPYRE_TM_MAC_PER_NS_FP32 : SPYRE_TM_MAC_PER_NS_16;
	uint64_t macs = cdiv(m, SPYRE_TM_PE_ROWS) * SPYRE_TM_PE_ROWS * n * k;
	uint64_t bytes = (m * k + k * n) * SPYRE_DT_SIZE(dt) + m * n * SPYRE_DT_SIZE(dt2);

	return SPYRE_TM_ISSUE_CYCLES + umax(cdiv(macs * SPYRE_TM_CLOCK_MHZ, mac * 1000),
					    cdiv(bytes, SPYRE_TM_SP_BYTES_PER_CYCLE));
}

/* ============================== ROPE ===================================== */

SPYRE_EXPORT void spyre_kernel_rope_tables(void *cos_tab, void *sin_tab, uint32_t max_pos, uint32_t head_dim,
					   float theta)
{
	uint64_t pitch = kg_pitch(head_dim, SPYRE_DT_FP32);
	uint32_t half = head_dim / 2;

	if (!cos_tab || !sin_tab || !head_dim)
		return;
	memset(cos_tab, 0, (size_t)max_pos * pitch);
	memset(sin_tab, 0, (size_t)max_pos * pitch);
	for (uint32_t p = 0; p < max_pos; p++) {
		float *c = (float *)(void *)((uint8_t *)cos_tab + p * pitch);
		float *s = (float *)(void *)((uint8_t *)sin_tab + p * pitch);

		for (uint32_t i = 0; i < head_dim; i++) {
			/* emb = cat(freqs, freqs): element i uses frequency i mod hd/2 */
			uint32_t f = half ? i % half : 0;
			double inv = pow((double)theta, -2.0 * f / head_dim), ang = (double)p * inv;

			c[i] = (float)cos(ang);
			s[i] = (float)sin(ang);
		}
	}
}

SPYRE_EXPORT uint64_t spyre_kernel_rope_scalar(const struct spyre_kdesc *desc, uint32_t pos0)
{
	return desc ? (uint64_t)pos0 * kg_pitch(desc->head_dim, SPYRE_DT_FP32) : 0;
}

/*
 * R [hd x hd] with (X R)[:, j] = -X[:, j + hd/2] for j < hd/2 and
 * X[:, j - hd/2] after: rotate_half as a matmul (entries 0, +-1: exact).
 */
static int64_t rope_rmat(struct kgen *g, uint32_t hd, uint32_t dt)
{
	uint64_t pitch = kg_pitch(hd, dt);
	uint8_t *buf = calloc(hd, pitch);
	uint32_t h = hd / 2;
	int64_t off;

	if (!buf)
		return kg_fail(g, "out of memory"), -1;
	for (uint32_t j = 0; j < hd; j++) {
		if (j < h)
			spyre_store_f32(buf + (uint64_t)(j + h) * pitch, dt, j, -1.0f);
		else
			spyre_store_f32(buf + (uint64_t)(j - h) * pitch, dt, j, 1.0f);
	}
	off = spyre_pb_const(g->pb, buf, (size_t)hd * pitch);
	free(buf);
	if (off < 0)
		kg_fail(g, "constant data: cannot add the rotation matrix");
	return off;
}

int kg_gen_rope(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, hd = d->head_dim, heads = d->heads, max_pos = d->max_pos;
	uint64_t m = d->m;

	if (!m || !heads || !hd || !max_pos)
		return kg_fail(g, "m, heads, head_dim and max_pos must be non-zero");
	if (hd % 2)
		return kg_fail(g, "head_dim %u is odd: rotate_half needs an even head_dim", hd);
	if (m > max_pos)
		return kg_fail(g, "%llu tokens do not fit a table of max_pos %u", (unsigned long long)m, max_pos);
	if (hd > 0xffff || (uint64_t)heads * hd > 0xffffffffull)
		return kg_fail(g, "head_dim %u x %u heads too large", hd, heads);

	uint32_t sh = kg_sticks(hd, dt), sh32 = kg_sticks(hd, SPYRE_DT_FP32);
	uint64_t shd = (uint64_t)sh * STICK, shd32 = (uint64_t)sh32 * STICK, px = heads * shd;
	int sx = kg_slot(g, "x", dt, m, (uint64_t)heads * hd, px, SPYRE_SYM_IN);
	int sc = kg_slot(g, "cos", SPYRE_DT_FP32, max_pos, hd, shd32, SPYRE_SYM_IN);
	int ss = kg_slot(g, "sin", SPYRE_DT_FP32, max_pos, hd, shd32, SPYRE_SYM_IN);
	int sy = kg_slot(g, "y", dt, m, (uint64_t)heads * hd, px, SPYRE_SYM_OUT);

	if (g->failed)
		return -EINVAL;
	spyre_pb_set_scalars(g->pb, 1);

	int64_t c_r = rope_rmat(g, hd, dt);

	if (c_r < 0)
		return -EINVAL;

	/* tokens x heads over the cores: token blocks first, then head blocks */
	uint32_t tb = (uint32_t)umin(m, g->cores), hb = (uint32_t)umin(heads, g->cores / tb);
	bool f32 = dt == SPYRE_DT_FP32;
	/* per (token, head): X/Y, X fp32 (not for fp32), X R; per token: a cos and a sin row */
	uint64_t per_th = shd + shd32 * (f32 ? 1 : 2), per_t = 2 * shd32;

	for (uint32_t c = 0; c < tb * hb; c++) {
		struct kg_range tr = kg_split(m, tb, c / hb, 1), hr = kg_split(heads, hb, c % hb, 1);
		uint32_t rb;
		uint64_t fr, nh, nt;

		if (!tr.count || !hr.count)
			continue;
		if ((uint64_t)hd * shd + per_th + per_t > g->sp_bytes)
			return kg_fail(g, "rope: the %ux%u rotation matrix and one head of one token do not fit "
				       "a scratchpad of %u bytes", hd, hd, g->sp_bytes);
		kg_sp_reset(g, c);
		rb = kg_sp_alloc(g, c, (uint64_t)hd * shd);
		fr = kg_sp_free(g, c);
		nh = hr.count;
		nt = fr / (nh * per_th + per_t);
		if (!nt) {
			nt = 1;
			nh = (fr - per_t) / per_th;	/* >= 1: checked above */
		}
		nt = umin(nt, tr.count);
		spyre_pb_ctl(g->pb, c, SPYRE_ISA_OP_LDARG, 1, 0, 0);
		spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = rb, .mem = { .sym = SPYRE_PB_CONST, .off = (uint64_t)c_r },
			.row_bytes = (uint32_t)(hd * shd) });
		for (uint64_t t = tr.start; t < tr.start + tr.count; t += nt) {
			uint32_t n_t = (uint32_t)umin(nt, tr.start + tr.count - t);

			for (uint64_t h = hr.start; h < hr.start + hr.count; h += nh) {
				uint32_t n_h = (uint32_t)umin(nh, hr.start + hr.count - h), rows = n_t * n_h;
				uint32_t xb, xf, xr, cb, sb;

				kg_sp_reset(g, c);
				kg_sp_alloc(g, c, (uint64_t)hd * shd);	/* R, as above */
				xb = kg_sp_alloc(g, c, rows * shd);
				xf = f32 ? xb : kg_sp_alloc(g, c, rows * shd32);
				xr = kg_sp_alloc(g, c, rows * shd32);
				cb = kg_sp_alloc(g, c, n_t * shd32);
				sb = kg_sp_alloc(g, c, n_t * shd32);
				if (g->failed)
					return -EINVAL;
				spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
					.sp = xb, .mem = { .sym = sx, .off = t * px + h * shd }, .rows = n_t,
					.row_bytes = (uint32_t)(n_h * shd), .mem_stride = (uint32_t)px,
					.sp_stride = (uint32_t)(n_h * shd) });
				spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
					.sp = cb, .mem = { .sym = sc, .off = t * shd32, .reg = SPYRE_PB_REG(1) },
					.row_bytes = (uint32_t)(n_t * shd32) });
				spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
					.sp = sb, .mem = { .sym = ss, .off = t * shd32, .reg = SPYRE_PB_REG(1) },
					.row_bytes = (uint32_t)(n_t * shd32) });
				/* X R first: it reads X in the dtype before X is widened in place (fp32) */
				spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
					.op = SPYRE_ISA_OP_MATMUL, .dt = dt, .dt2 = SPYRE_DT_FP32, .d = xr, .a = xb,
					.b = rb, .rows = rows, .cols = hd, .k = hd });
				if (!f32)
					spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
						.op = SPYRE_ISA_OP_CAST, .dt = dt, .dt2 = SPYRE_DT_FP32, .d = xf,
						.a = xb, .rows = rows, .cols = hd });
				if (n_t <= n_h) {
					/* per token: its heads are consecutive rows, the table row broadcast */
					for (uint32_t i = 0; i < n_t; i++) {
						uint32_t ro = i * n_h * (uint32_t)shd32;

						spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
							.op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32,
							.dt2 = SPYRE_DT_FP32, .flags = SPYRE_IF_BCAST_ROW,
							.d = xf + ro, .a = xf + ro, .b = cb + i * (uint32_t)shd32,
							.rows = n_h, .cols = hd });
						spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
							.op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32,
							.dt2 = SPYRE_DT_FP32, .flags = SPYRE_IF_BCAST_ROW,
							.d = xr + ro, .a = xr + ro, .b = sb + i * (uint32_t)shd32,
							.rows = n_h, .cols = hd });
					}
				} else {
					/* per head: its tokens are every n_h-th row, against the table rows */
					for (uint32_t j = 0; j < n_h; j++) {
						uint32_t co = j * (uint32_t)shd32;

						spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
							.op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32,
							.dt2 = SPYRE_DT_FP32, .d = xf + co, .a = xf + co, .b = cb,
							.rows = n_t, .cols = hd, .ldd = n_h * sh32,
							.lda = n_h * sh32, .ldb = sh32 });
						spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
							.op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32,
							.dt2 = SPYRE_DT_FP32, .d = xr + co, .a = xr + co, .b = sb,
							.rows = n_t, .cols = hd, .ldd = n_h * sh32,
							.lda = n_h * sh32, .ldb = sh32 });
					}
				}
				/* Y = X cos + (X R) sin, rounded once */
				spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
					.op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32, .dt2 = dt, .d = xb, .a = xf,
					.b = xr, .rows = rows, .cols = hd, .ldd = sh, .lda = sh32, .ldb = sh32 });
				spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
					.sp = xb, .mem = { .sym = sy, .off = t * px + h * shd }, .rows = n_t,
					.row_bytes = (uint32_t)(n_h * shd), .mem_stride = (uint32_t)px,
					.sp_stride = (uint32_t)(n_h * shd) });
			}
		}
	}
	return kg_ok(g);
}

/* ============================== ATTENTION ================================ */

#define DECODE_SCALARS	4

struct att {
	struct kgen *g;
	uint32_t dt, esz, hd, sh, sh32, heads, kvh, r, max_pos;
	uint64_t m, shd, shd32, pq, pk;
	bool decode, f32;
	float scale;
	int sq, sk, sv, skc, svc, so;
	uint32_t S;		/* decode: sticks of one fp32 row of max_pos scores */
	int64_t c_tab, c_part;	/* decode: mask tables in the constant data */
};

/*
 * A unit of work: query heads j0..j0+nj-1 of KV group g (query head
 * g*r + j) for tokens t0..t0+nt-1, over keys k0..k1-1. Its query rows are
 * (token i, head j) in the order i*nj + j: how they lie in Q.
 */
struct unit {
	uint32_t g, j0, nj;
	uint64_t t0, nt;
	uint64_t k0, k1;
	uint32_t part, nparts;	/* decode: key part of the (g, heads) pair; 1 part: complete */
	uint32_t first;		/* index of the unit of part 0 (its core combines) */
	uint32_t core;
	bool st;		/* scores as (K Q^T)^T: no transpose of K (few query rows) */
	uint64_t kt;		/* key tile */
	uint64_t cost;		/* estimated cycles */
};

static uint64_t vec_bytes(uint64_t nq)
{
	return kg_pitch(nq, SPYRE_DT_FP32);
}

/* Scratchpad a unit keeps for its whole run (see emit_unit for the buffers). */
static uint64_t fixed_bytes(const struct att *a, uint64_t nq, bool st, uint32_t nparts, bool leader)
{
	uint64_t b = nq * a->shd + nq * a->shd32 + 6 * vec_bytes(nq);

	if (st)
		b += a->hd * kg_pitch(nq, a->dt);
	if (a->decode)
		b += (uint64_t)(a->S + 1) * STICK + a->shd;
	if (leader && nparts > 1)
		b += (nparts - 1) * (2 * vec_bytes(nq) + nq * a->shd32);
	return b;
}

/* Scratchpad of one key tile of kt keys. */
static uint64_t tile_bytes(const struct att *a, uint64_t nq, uint64_t nt, bool st, uint64_t kt)
{
	uint64_t ls = kg_pitch(kt, SPYRE_DT_FP32);
	uint64_t b = kt * a->shd + nq * ls;	/* K then V; scores */

	b += st ? kt * kg_pitch(nq, SPYRE_DT_FP32) : a->hd * kg_pitch(kt, a->dt);	/* S^T or K^T */
	if (!a->decode)
		b += nt * ls;			/* causal mask */
	if (!a->f32)
		b += kt * a->shd32;		/* V in fp32 */
	return b;
}

/* The largest key tile for @keys keys in @free bytes; multiples of 32 keys when cut (0: none fits). */
static uint64_t choose_kt(const struct att *a, uint64_t nq, uint64_t nt, bool st, uint64_t keys, uint64_t free)
{
	uint64_t lo = 0, hi = keys;

	if (tile_bytes(a, nq, nt, st, keys) <= free)
		return keys;
	while (lo < hi) {		/* largest kt in [0, keys) that fits */
		uint64_t mid = (lo + hi + 1) / 2;

		if (tile_bytes(a, nq, nt, st, mid) <= free)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (lo >= F32_PER_STICK)
		return lo / F32_PER_STICK * F32_PER_STICK;
	return a->decode ? 0 : lo;	/* decode tiles slice the mask row on sticks */
}

/* Scores as (K Q^T)^T when that is cheaper than transposing K (few query rows). */
static bool pick_st(const struct att *a, uint64_t nq, uint64_t kt)
{
	uint64_t kq = c_sfu(kt * a->hd, 2 * kt * a->hd * a->esz, 1) + c_mm(nq, kt, a->hd, a->dt, SPYRE_DT_FP32);
	uint64_t st = c_mm(kt, nq, a->hd, a->dt, SPYRE_DT_FP32) + c_sfu(kt * nq, 8 * kt * nq, 1) +
		      cdiv(c_sfu(nq * a->hd, 2 * nq * a->hd * a->esz, 1), cdiv(kt, 256));

	return st < kq;
}

/* Estimated cycles of a unit on a device with @active cores streaming memory. */
static uint64_t est_unit(const struct att *a, const struct unit *u, uint32_t active)
{
	uint64_t nq = u->nt * u->nj, c = 2 * c_dma(nq * a->shd, active), hd = a->hd;

	if (u->st)
		c += c_sfu(nq * hd, 2 * nq * hd * a->esz, 1);
	if (a->decode)
		c += 4 * c_dma(a->shd, active) + 2 * c_dma(cdiv(u->k1 - u->k0, F32_PER_STICK) * STICK, active) + 4;
	for (uint64_t k = u->k0; k < u->k1; k += u->kt) {
		uint64_t kn = umin(u->kt, u->k1 - k), e = nq * kn;

		c += 2 * c_dma(kn * a->shd, active);
		if (!a->decode && u->j0 == 0) {
			uint64_t w0 = umax(k, u->t0), w1 = umin(k + kn, u->t0 + u->nt);

			if (w0 < w1)
				c += 2 * c_dma((w1 - w0) * a->shd, active);
		}
		if (u->st)
			c += c_mm(kn, nq, hd, a->dt, SPYRE_DT_FP32) + c_sfu(e, 8 * e, 1);
		else
			c += c_sfu(kn * hd, 2 * kn * hd * a->esz, 1) + c_mm(nq, kn, hd, a->dt, SPYRE_DT_FP32);
		c += 4 * c_sfu(e, 8 * e, 1) + c_sfu(e, 8 * e, SPYRE_TM_SFU_TRANSCENDENTAL_CYCLES);
		if (a->decode)
			c += c_sfu(e, 12 * e, 1);
		else if (k + kn > u->t0 + 1)
			c += (u->nt + 2) * c_sfu(kn, 4 * kn, 1) + u->nj * c_sfu(u->nt * kn, 12 * u->nt * kn, 1);
		if (!a->f32)
			c += c_sfu(kn * hd, kn * hd * (a->esz + 4), 1);
		c += c_mm(nq, hd, kn, SPYRE_DT_FP32, SPYRE_DT_FP32) + c_sfu(nq * hd, 12 * nq * hd, 1) + 6;
	}
	c += 4 + c_sfu(nq * hd, 8 * nq * hd, 1);
	if (u->nparts > 1) {
		if (u->part)
			c += cdiv(2 * vec_bytes(nq) + nq * a->shd32, SPYRE_TM_RING_BYTES_PER_CYCLE) + 3;
		else
			c += (u->nparts - 1) * (10 + 2 * c_sfu(nq * hd, 12 * nq * hd, 1));
	}
	return c;
}

struct cost_idx {
	uint64_t cost;
	uint32_t idx;
};

static int cost_desc(const void *x, const void *y)
{
	const struct cost_idx *a = x, *b = y;

	return a->cost < b->cost ? 1 : a->cost > b->cost ? -1 : (a->idx > b->idx) - (a->idx < b->idx);
}

/*
 * Cost every unit, place them on cores (longest first on the least loaded
 * core, or unit i on core i when @fixed), return the makespan (UINT64_MAX:
 * something does not fit).
 */
static uint64_t place(struct att *a, struct unit *u, uint32_t n, bool fixed)
{
	uint32_t active = (uint32_t)umin(n, a->g->cores);
	uint64_t load[SPYRE_MAX_CORES] = { 0 }, span = 0;
	struct cost_idx *ci;

	if (fixed && n > a->g->cores)
		return UINT64_MAX;
	ci = malloc(n * sizeof(*ci));
	if (!ci)
		return UINT64_MAX;
	for (uint32_t i = 0; i < n; i++) {
		u[i].cost = est_unit(a, &u[i], active);
		ci[i] = (struct cost_idx){ u[i].cost, i };
	}
	if (!fixed)
		qsort(ci, n, sizeof(*ci), cost_desc);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t best = 0;

		if (fixed) {
			best = ci[i].idx;
		} else {
			for (uint32_t c = 1; c < a->g->cores; c++)
				if (load[c] < load[best])
					best = c;
		}
		u[ci[i].idx].core = best;
		load[best] += ci[i].cost;
		span = umax(span, load[best]);
	}
	free(ci);
	return span;
}

/* Fill in the route and key tile of a unit; false if it cannot fit. */
static bool size_unit(const struct att *a, struct unit *u)
{
	uint64_t nq = u->nt * u->nj, keys = u->k1 - u->k0;
	bool pref = pick_st(a, nq, umin(keys, 256));

	/* the cheaper route, or the other one when it does not fit */
	for (int i = 0; i < 2; i++) {
		uint64_t fixed;

		u->st = i ? !pref : pref;
		fixed = fixed_bytes(a, nq, u->st, u->nparts, u->part == 0);
		if (fixed >= a->g->sp_bytes)
			continue;
		u->kt = choose_kt(a, nq, u->nt, u->st, keys, a->g->sp_bytes - fixed);
		if (u->kt)
			return true;
	}
	return false;
}

/* Prefill: (g, head subset, token block) units; the tiling with the least estimated makespan. */
static struct unit *plan_prefill(struct att *a, uint32_t *nout)
{
	uint64_t best_span = UINT64_MAX, m = a->m;
	struct unit *best = NULL;
	uint32_t best_n = 0;
	uint64_t nts[16];
	uint32_t nnt = 0, njs[8], nnj = 0;

	nts[nnt++] = m;
	for (uint64_t p = 256; p >= 1; p /= 2)
		if (p < m)
			nts[nnt++] = p;
	for (uint32_t j = a->r;; j = (uint32_t)cdiv(j, 2)) {
		njs[nnj++] = j;
		if (j == 1 || nnj == 8)
			break;
	}
	for (uint32_t ti = 0; ti < nnt; ti++)
		for (uint32_t ji = 0; ji < nnj; ji++) {
			uint64_t nt = nts[ti], nb = cdiv(m, nt);
			uint32_t nsub = (uint32_t)cdiv(a->r, njs[ji]), n = 0;
			uint64_t total = (uint64_t)a->kvh * nsub * nb, span;
			struct unit *u;
			bool ok = true;

			if (total > 65536)
				continue;
			u = calloc(total, sizeof(*u));
			if (!u)
				continue;
			for (uint32_t gg = 0; gg < a->kvh && ok; gg++)
				for (uint32_t s = 0; s < nsub && ok; s++)
					for (uint64_t b = 0; b < nb && ok; b++) {
						struct kg_range hr = kg_split(a->r, nsub, s, 1);
						struct unit *x = &u[n++];

						x->g = gg;
						x->j0 = (uint32_t)hr.start;
						x->nj = (uint32_t)hr.count;
						x->t0 = b * nt;
						x->nt = umin(nt, m - x->t0);
						x->k0 = 0;
						x->k1 = x->t0 + x->nt;
						x->nparts = 1;
						x->first = n - 1;
						ok = size_unit(a, x);
					}
			span = ok ? place(a, u, n, false) : UINT64_MAX;
			if (span < best_span) {
				free(best);
				best = u;
				best_n = n;
				best_span = span;
			} else {
				free(u);
			}
		}
	*nout = best_n;
	return best;
}

/* Decode: (g, key part) units, all heads of the group together; parts split max_pos on sticks. */
static struct unit *plan_decode(struct att *a, uint32_t *nout)
{
	uint32_t cores = a->g->cores, kpmax = a->kvh >= cores ? 1 : (uint32_t)umin(cores / a->kvh, a->S);
	uint64_t best_span = UINT64_MAX;
	struct unit *best = NULL;
	uint32_t best_n = 0;

	for (uint32_t kp = 1; kp <= kpmax; kp++) {
		uint32_t n = a->kvh * kp;
		struct unit *u = calloc(n, sizeof(*u));
		uint64_t span;
		bool ok = true;

		if (!u)
			continue;
		for (uint32_t gg = 0; gg < a->kvh && ok; gg++)
			for (uint32_t p = 0; p < kp && ok; p++) {
				struct kg_range sr = kg_split(a->S, kp, p, 1);
				struct unit *x = &u[gg * kp + p];

				x->g = gg;
				x->j0 = 0;
				x->nj = a->r;
				x->t0 = 0;
				x->nt = 1;
				x->k0 = sr.start * F32_PER_STICK;
				x->k1 = umin(a->max_pos, (sr.start + sr.count) * F32_PER_STICK);
				x->part = p;
				x->nparts = kp;
				x->first = gg * kp;
				ok = size_unit(a, x);
			}
		span = ok ? place(a, u, n, kp > 1) : UINT64_MAX;
		if (span < best_span) {
			free(best);
			best = u;
			best_n = n;
			best_span = span;
		} else {
			free(u);
		}
	}
	*nout = best_n;
	return best;
}

static void op(struct att *a, uint32_t c, const struct spyre_pb_op *o)
{
	spyre_pb_op(a->g->pb, c, o);
}

static void dma(struct att *a, uint32_t c, unsigned opc, const struct spyre_pb_dma *d)
{
	spyre_pb_dma(a->g->pb, c, opc, d);
}

/* Load a tile of kn keys (or values) of group g from k: the input rows (prefill) or the cache. */
static void load_kv(struct att *a, const struct unit *u, uint32_t sp, uint64_t k, uint64_t kn, bool v)
{
	if (a->decode) {
		dma(a, u->core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = sp, .mem = { .sym = v ? a->svc : a->skc, .off = (u->g * (uint64_t)a->max_pos + k) * a->shd },
			.row_bytes = (uint32_t)(kn * a->shd) });
		return;
	}
	dma(a, u->core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
		.sp = sp, .mem = { .sym = v ? a->sv : a->sk, .off = k * a->pk + u->g * a->shd }, .rows = (uint32_t)kn,
		.row_bytes = (uint32_t)a->shd, .mem_stride = (uint32_t)a->pk, .sp_stride = (uint32_t)a->shd });
	/* prefill: the unit of the first head subset writes its own tokens' rows into the cache */
	if (u->j0 == 0) {
		uint64_t w0 = umax(k, u->t0), w1 = umin(k + kn, u->t0 + u->nt);

		if (w0 < w1)
			dma(a, u->core, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
				.sp = sp + (uint32_t)((w0 - k) * a->shd),
				.mem = { .sym = v ? a->svc : a->skc, .off = (u->g * (uint64_t)a->max_pos + w0) * a->shd },
				.row_bytes = (uint32_t)((w1 - w0) * a->shd) });
	}
}

static void emit_unit(struct att *a, const struct unit *u, const struct unit *all)
{
	struct kgen *g = a->g;
	uint32_t c = u->core, nq = (uint32_t)(u->nt * u->nj), hd = a->hd, dt = a->dt;
	uint32_t vs = (uint32_t)vec_bytes(nq), kt = (uint32_t)u->kt;
	bool leader = u->nparts > 1 && u->part == 0;
	uint32_t lds = kg_sticks(kt, SPYRE_DT_FP32), ldst = kg_sticks(nq, SPYRE_DT_FP32);
	uint32_t ldqt = kg_sticks(nq, dt), ldkt = kg_sticks(kt, dt), sh = a->sh, sh32 = a->sh32;
	uint32_t qb, acc, mv[2], mt, al, lv, lt, qt = 0, mk = 0, nr = 0, kb, sb, xt, mb = 0, vf;
	uint32_t rm[SPYRE_MAX_CORES] = { 0 }, rl[SPYRE_MAX_CORES] = { 0 }, ra[SPYRE_MAX_CORES] = { 0 };
	uint64_t qoff = u->t0 * a->pq + ((uint64_t)u->g * a->r + u->j0) * a->shd;
	uint32_t cur = 0;

	kg_sp_reset(g, c);
	qb = kg_sp_alloc(g, c, (uint64_t)nq * a->shd);
	acc = kg_sp_alloc(g, c, (uint64_t)nq * a->shd32);
	mv[0] = kg_sp_alloc(g, c, vs);
	mv[1] = kg_sp_alloc(g, c, vs);
	mt = kg_sp_alloc(g, c, vs);
	al = kg_sp_alloc(g, c, vs);
	lv = kg_sp_alloc(g, c, vs);
	lt = kg_sp_alloc(g, c, vs);
	if (u->st)
		qt = kg_sp_alloc(g, c, (uint64_t)hd * kg_pitch(nq, dt));
	if (a->decode) {
		mk = kg_sp_alloc(g, c, (uint64_t)(a->S + 1) * STICK);
		nr = kg_sp_alloc(g, c, a->shd);
	}
	if (leader)
		for (uint32_t p = 1; p < u->nparts; p++) {
			rm[p] = kg_sp_alloc(g, c, vs);
			rl[p] = kg_sp_alloc(g, c, vs);
			ra[p] = kg_sp_alloc(g, c, (uint64_t)nq * a->shd32);
		}
	kb = kg_sp_alloc(g, c, (uint64_t)kt * a->shd);
	sb = kg_sp_alloc(g, c, (uint64_t)nq * lds * STICK);
	xt = kg_sp_alloc(g, c, u->st ? (uint64_t)kt * ldst * STICK : (uint64_t)hd * ldkt * STICK);
	if (!a->decode)
		mb = kg_sp_alloc(g, c, u->nt * lds * STICK);
	vf = a->f32 ? kb : kg_sp_alloc(g, c, (uint64_t)kt * a->shd32);
	if (g->failed)
		return;

	/* the unit's query rows: nt tokens x nj heads of hd, (i, j) at row i*nj + j */
	dma(a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
		.sp = qb, .mem = { .sym = a->sq, .off = qoff }, .rows = (uint32_t)u->nt,
		.row_bytes = (uint32_t)(u->nj * a->shd), .mem_stride = (uint32_t)a->pq,
		.sp_stride = (uint32_t)(u->nj * a->shd) });
	if (u->st)
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRANSPOSE, .dt = dt, .dt2 = dt, .d = qt, .a = qb,
						 .rows = nq, .cols = hd, .ldd = ldqt, .lda = sh });
	if (a->decode) {
		uint64_t cb = (uint64_t)u->g * a->max_pos * a->shd, ks0 = u->k0 / F32_PER_STICK;
		uint64_t ks1 = cdiv(u->k1, F32_PER_STICK);

		for (uint32_t r = 0; r < DECODE_SCALARS; r++)
			spyre_pb_ctl(g->pb, c, SPYRE_ISA_OP_LDARG, r, r, 0);
		/* the new K and V rows into the caches at pos (r0 = pos * pitch): before any cache read */
		dma(a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = nr, .mem = { .sym = a->sk, .off = u->g * a->shd }, .row_bytes = (uint32_t)a->shd });
		dma(a, c, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
			.sp = nr, .mem = { .sym = a->skc, .off = cb, .reg = SPYRE_PB_REG(0) },
			.row_bytes = (uint32_t)a->shd });
		dma(a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = nr, .mem = { .sym = a->sv, .off = u->g * a->shd }, .row_bytes = (uint32_t)a->shd });
		dma(a, c, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
			.sp = nr, .mem = { .sym = a->svc, .off = cb, .reg = SPYRE_PB_REG(0) },
			.row_bytes = (uint32_t)a->shd });
		/*
		 * The mask row of keys 0..max_pos-1 (the unit's sticks of it): q zero sticks then
		 * -1e30 ones from the table at (S - q) sticks (r1), then the partial stick
		 * P_(v%32) (r2) at stick q (r3) -- past the unit's sticks it lands in unused space.
		 */
		dma(a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = mk + (uint32_t)(ks0 * STICK),
			.mem = { .sym = SPYRE_PB_CONST, .off = (uint64_t)a->c_tab + ks0 * STICK, .reg = SPYRE_PB_REG(1) },
			.row_bytes = (uint32_t)((ks1 - ks0) * STICK) });
		dma(a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = mk, .sp_reg = SPYRE_PB_REG(3),
			.mem = { .sym = SPYRE_PB_CONST, .off = (uint64_t)a->c_part, .reg = SPYRE_PB_REG(2) },
			.row_bytes = STICK });
	}

	bool single = u->nparts == 1 && kt >= u->k1 - u->k0;

	for (uint64_t k = u->k0; k < u->k1; k += kt) {
		uint32_t kn = (uint32_t)umin(kt, u->k1 - k);
		bool first = k == u->k0;

		/* scores S [nq x kn] fp32 */
		load_kv(a, u, kb, k, kn, false);
		if (u->st) {
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = dt, .dt2 = SPYRE_DT_FP32,
							 .d = xt, .a = kb, .b = qt, .rows = kn, .cols = nq, .k = hd,
							 .ldd = ldst, .lda = sh, .ldb = ldqt });
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRANSPOSE, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = sb, .a = xt, .rows = kn, .cols = nq,
							 .ldd = lds, .lda = ldst });
		} else {
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRANSPOSE, .dt = dt, .dt2 = dt, .d = xt,
							 .a = kb, .rows = kn, .cols = hd, .ldd = ldkt, .lda = sh });
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = dt, .dt2 = SPYRE_DT_FP32,
							 .d = sb, .a = qb, .b = xt, .rows = nq, .cols = kn, .k = hd,
							 .ldd = lds, .lda = sh, .ldb = ldkt });
		}
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SCALE, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .d = sb, .a = sb, .rows = nq, .cols = kn, .ldd = lds, .lda = lds,
						 .scale = a->scale });
		/* mask: keys after the query's position get -1e30 */
		if (a->decode) {
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .flags = SPYRE_IF_BCAST_ROW, .d = sb,
							 .a = sb, .b = mk + (uint32_t)(k / F32_PER_STICK * STICK),
							 .rows = nq, .cols = kn, .ldd = lds, .lda = lds });
		} else if (k + kn > u->t0 + 1) {
			uint32_t full = 0;

			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = mb, .rows = (uint32_t)u->nt,
							 .cols = kn, .ldd = lds, .imm = kg_f32_bits(NEG_BIG) });
			for (uint32_t i = 0; i < u->nt; i++) {
				uint64_t q = u->t0 + i + 1;	/* keys 0..t0+i valid */
				uint64_t v = q <= k ? 0 : umin(q - k, kn);

				if (v == kn) {
					full = (uint32_t)u->nt - i;	/* this row and every later one */
					op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
									 .dt2 = SPYRE_DT_FP32, .d = mb + i * lds * STICK,
									 .rows = full, .cols = kn, .ldd = lds, .imm = 0 });
					break;
				}
				if (v)
					op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
									 .dt2 = SPYRE_DT_FP32, .d = mb + i * lds * STICK,
									 .rows = 1, .cols = (uint32_t)v, .ldd = lds,
									 .imm = 0 });
			}
			for (uint32_t j = 0; j < u->nj; j++)
				op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32,
								 .dt2 = SPYRE_DT_FP32, .d = sb + j * lds * STICK,
								 .a = sb + j * lds * STICK, .b = mb, .rows = (uint32_t)u->nt,
								 .cols = kn, .ldd = u->nj * lds, .lda = u->nj * lds,
								 .ldb = lds });
		}
		if (single) {
			/* one tile: the softmax instruction, then O = P V rounded once */
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SOFTMAX, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = sb, .a = sb, .rows = nq, .cols = kn,
							 .ldd = lds, .lda = lds });
			load_kv(a, u, kb, k, kn, true);
			if (!a->f32)
				op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_CAST, .dt = dt, .dt2 = SPYRE_DT_FP32,
								 .d = vf, .a = kb, .rows = kn, .cols = hd, .ldd = sh32,
								 .lda = sh });
			if (a->f32) {
				op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = dt, .dt2 = dt,
								 .d = qb, .a = sb, .b = vf, .rows = nq, .cols = hd,
								 .k = kn, .ldd = sh, .lda = lds, .ldb = sh32 });
				break;
			}
			/* a matmul of fp32 inputs writes fp32: the one rounding is the cast */
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = acc, .a = sb, .b = vf, .rows = nq,
							 .cols = hd, .k = kn, .ldd = sh32, .lda = lds, .ldb = sh32 });
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_CAST, .dt = SPYRE_DT_FP32, .dt2 = dt,
							 .d = qb, .a = acc, .rows = nq, .cols = hd, .ldd = sh,
							 .lda = sh32 });
			break;
		}
		/* online softmax: running max m, sum l, accumulator acc */
		if (first) {
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_REDMAX, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = mv[cur], .a = sb, .rows = nq,
							 .cols = kn, .lda = lds });
		} else {
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_REDMAX, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = mt, .a = sb, .rows = nq, .cols = kn,
							 .lda = lds });
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MAX, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = mv[!cur], .a = mv[cur], .b = mt,
							 .rows = 1, .cols = nq });
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SUB, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = al, .a = mv[cur], .b = mv[!cur],
							 .rows = 1, .cols = nq });
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_EXP, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = al, .a = al, .rows = 1, .cols = nq });
			cur = !cur;
		}
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SUB, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .flags = SPYRE_IF_BCAST_COL, .d = sb, .a = sb, .b = mv[cur],
						 .rows = nq, .cols = kn, .ldd = lds, .lda = lds });
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_EXP, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .d = sb, .a = sb, .rows = nq, .cols = kn, .ldd = lds, .lda = lds });
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_REDSUM, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .d = first ? lv : lt, .a = sb, .rows = nq, .cols = kn, .lda = lds });
		if (!first) {
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = lv, .a = lv, .b = al, .rows = 1,
							 .cols = nq });
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = lv, .a = lv, .b = lt, .rows = 1,
							 .cols = nq });
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .flags = SPYRE_IF_BCAST_COL, .d = acc,
							 .a = acc, .b = al, .rows = nq, .cols = hd, .ldd = sh32,
							 .lda = sh32 });
		}
		load_kv(a, u, kb, k, kn, true);
		if (!a->f32)
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_CAST, .dt = dt, .dt2 = SPYRE_DT_FP32,
							 .d = vf, .a = kb, .rows = kn, .cols = hd, .ldd = sh32,
							 .lda = sh });
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .flags = first ? 0 : SPYRE_IF_ACC, .d = acc, .a = sb, .b = vf,
						 .rows = nq, .cols = hd, .k = kn, .ldd = sh32, .lda = lds, .ldb = sh32 });
	}

	if (u->nparts > 1 && !leader) {
		/* a key part: (m, l, acc) to the core of part 0 */
		uint32_t to = all[u->first].core;

		spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_SEND, mv[cur], to, 1, vs);
		spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_SEND, lv, to, 2, vs);
		spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_SEND, acc, to, 3, nq * (uint32_t)a->shd32);
		return;
	}
	if (leader) {
		/* M = max of the parts' m; every part scaled by exp(m_p - M) */
		for (uint32_t p = 1; p < u->nparts; p++) {
			uint32_t from = all[u->first + p].core;

			spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_RECV, rm[p], from, 1, vs);
			spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_RECV, rl[p], from, 2, vs);
			spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_RECV, ra[p], from, 3, nq * (uint32_t)a->shd32);
		}
		for (uint32_t p = 1; p < u->nparts; p++)
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MAX, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = mt, .a = p == 1 ? mv[cur] : mt,
							 .b = rm[p], .rows = 1, .cols = nq });
		for (uint32_t p = 0; p < u->nparts; p++) {
			uint32_t pm = p ? rm[p] : mv[cur], pl = p ? rl[p] : lv, pa = p ? ra[p] : acc;

			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SUB, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = al, .a = pm, .b = mt, .rows = 1,
							 .cols = nq });
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_EXP, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = al, .a = al, .rows = 1, .cols = nq });
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = pl, .a = pl, .b = al, .rows = 1,
							 .cols = nq });
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .flags = SPYRE_IF_BCAST_COL, .d = pa,
							 .a = pa, .b = al, .rows = nq, .cols = hd, .ldd = sh32,
							 .lda = sh32 });
			if (p) {
				op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32,
								 .dt2 = SPYRE_DT_FP32, .d = lv, .a = lv, .b = pl,
								 .rows = 1, .cols = nq });
				op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32,
								 .dt2 = SPYRE_DT_FP32, .d = acc, .a = acc, .b = pa,
								 .rows = nq, .cols = hd, .ldd = sh32, .lda = sh32,
								 .ldb = sh32 });
			}
		}
	}
	if (!single) {
		/* O = acc / l, rounded once (1/l = rsqrt(l)^2 in fp32: no divide instruction) */
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_RSQRT, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .d = lt, .a = lv, .rows = 1, .cols = nq });
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .d = lt, .a = lt, .b = lt, .rows = 1, .cols = nq });
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32, .dt2 = dt,
						 .flags = SPYRE_IF_BCAST_COL, .d = qb, .a = acc, .b = lt, .rows = nq,
						 .cols = hd, .ldd = sh, .lda = sh32 });
	}
	dma(a, c, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
		.sp = qb, .mem = { .sym = a->so, .off = qoff }, .rows = (uint32_t)u->nt,
		.row_bytes = (uint32_t)(u->nj * a->shd), .mem_stride = (uint32_t)a->pq,
		.sp_stride = (uint32_t)(u->nj * a->shd) });
}

/* Decode's constant tables: T = S zero sticks then S -1e30 sticks; P_j = j zeros then -1e30 (j < 32). */
static int decode_tables(struct att *a)
{
	uint32_t S = a->S;
	float *t = malloc((size_t)2 * S * STICK), *p = malloc((size_t)F32_PER_STICK * STICK);

	if (!t || !p) {
		free(t);
		free(p);
		return kg_fail(a->g, "out of memory");
	}
	for (uint64_t i = 0; i < (uint64_t)2 * S * F32_PER_STICK; i++)
		t[i] = i < (uint64_t)S * F32_PER_STICK ? 0.0f : NEG_BIG;
	for (uint32_t j = 0; j < F32_PER_STICK; j++)
		for (uint32_t e = 0; e < F32_PER_STICK; e++)
			p[j * F32_PER_STICK + e] = e < j ? 0.0f : NEG_BIG;
	a->c_tab = spyre_pb_const(a->g->pb, t, (size_t)2 * S * STICK);
	a->c_part = spyre_pb_const(a->g->pb, p, (size_t)F32_PER_STICK * STICK);
	free(t);
	free(p);
	if (a->c_tab < 0 || a->c_part < 0)
		return kg_fail(a->g, "constant data: cannot add the mask tables");
	return 0;
}

static bool attn_dtype_ok(uint32_t dt)
{
	return dt == SPYRE_DT_FP32 || dt == SPYRE_DT_FP16 || dt == SPYRE_DT_BF16 || dt == SPYRE_DT_DL16;
}

int kg_gen_attention(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	struct att a = { .g = g, .dt = d->dtype, .hd = d->head_dim, .heads = d->heads, .kvh = d->kv_heads,
			 .max_pos = d->max_pos, .m = d->m, .decode = !!(d->flags & SPYRE_KF_DECODE) };
	struct unit *u;
	uint32_t n;

	if (!a.m || !a.heads || !a.kvh || !a.hd || !a.max_pos)
		return kg_fail(g, "m, heads, kv_heads, head_dim and max_pos must be non-zero");
	if (a.heads % a.kvh)
		return kg_fail(g, "heads %u is not a multiple of kv_heads %u", a.heads, a.kvh);
	if (a.decode && a.m != 1)
		return kg_fail(g, "decode takes one token (m = 1), not %llu", (unsigned long long)a.m);
	if (a.m > a.max_pos)
		return kg_fail(g, "%llu tokens do not fit a cache of max_pos %u", (unsigned long long)a.m, a.max_pos);
	if (a.hd > 4096 || a.heads > 4096 || a.m > 65535)
		return kg_fail(g, "head_dim %u, heads %u or m %llu too large", a.hd, a.heads, (unsigned long long)a.m);
	a.esz = SPYRE_DT_SIZE(a.dt);
	a.f32 = a.dt == SPYRE_DT_FP32;
	a.r = a.heads / a.kvh;
	a.sh = kg_sticks(a.hd, a.dt);
	a.sh32 = kg_sticks(a.hd, SPYRE_DT_FP32);
	a.shd = (uint64_t)a.sh * STICK;
	a.shd32 = (uint64_t)a.sh32 * STICK;
	a.pq = a.heads * a.shd;
	a.pk = a.kvh * a.shd;
	a.scale = d->scale != 0.0f ? d->scale : (float)(1.0 / sqrt((double)a.hd));
	a.S = (uint32_t)cdiv(a.max_pos, F32_PER_STICK);

	a.sq = kg_slot(g, "q", a.dt, a.m, (uint64_t)a.heads * a.hd, a.pq, SPYRE_SYM_IN);
	a.sk = kg_slot(g, "k", a.dt, a.m, (uint64_t)a.kvh * a.hd, a.pk, SPYRE_SYM_IN);
	a.sv = kg_slot(g, "v", a.dt, a.m, (uint64_t)a.kvh * a.hd, a.pk, SPYRE_SYM_IN);
	a.skc = kg_slot(g, "kc", a.dt, (uint64_t)a.kvh * a.max_pos, a.hd, a.shd, SPYRE_SYM_IN | SPYRE_SYM_OUT);
	a.svc = kg_slot(g, "vc", a.dt, (uint64_t)a.kvh * a.max_pos, a.hd, a.shd, SPYRE_SYM_IN | SPYRE_SYM_OUT);
	a.so = kg_slot(g, "o", a.dt, a.m, (uint64_t)a.heads * a.hd, a.pq, SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	if (a.decode) {
		spyre_pb_set_scalars(g->pb, DECODE_SCALARS);
		if (decode_tables(&a))
			return -EINVAL;
	}
	u = a.decode ? plan_decode(&a, &n) : plan_prefill(&a, &n);
	if (!u)
		return kg_fail(g, "%s of %u heads (%u KV) x head_dim %u%s%llu does not fit a scratchpad of %u bytes",
			       a.decode ? "decode" : "prefill", a.heads, a.kvh, a.hd,
			       a.decode ? ", max_pos " : ", m ", a.decode ? (unsigned long long)a.max_pos :
			       (unsigned long long)a.m, g->sp_bytes);
	for (uint32_t c = 0; c < g->cores; c++)
		for (uint32_t i = 0; i < n && !g->failed; i++)
			if (u[i].core == c)
				emit_unit(&a, &u[i], u);
	free(u);
	return kg_ok(g);
}

SPYRE_EXPORT int spyre_kernel_attention_scalars(const struct spyre_kdesc *desc, uint32_t pos, uint64_t *scalars)
{
	uint32_t S, v;

	if (!desc || !scalars)
		return spyre_error(-EINVAL, "spyre_kernel_attention_scalars: NULL argument");
	if (desc->op != SPYRE_KOP_ATTENTION || !(desc->flags & SPYRE_KF_DECODE))
		return spyre_error(-EINVAL, "spyre_kernel_attention_scalars: not a decode attention descriptor");
	if (!attn_dtype_ok(desc->dtype) || !desc->head_dim || !desc->max_pos)
		return spyre_error(-EINVAL, "spyre_kernel_attention_scalars: dtype, head_dim or max_pos invalid");
	if (pos >= desc->max_pos)
		return spyre_error(-EINVAL, "attention: decode position %u is past the cache (max_pos %u)", pos,
				   desc->max_pos);
	S = (uint32_t)cdiv(desc->max_pos, F32_PER_STICK);
	v = pos + 1;		/* keys 0..pos are valid */
	scalars[0] = (uint64_t)pos * kg_pitch(desc->head_dim, desc->dtype);
	scalars[1] = (uint64_t)(S - v / F32_PER_STICK) * STICK;
	scalars[2] = (uint64_t)(v % F32_PER_STICK) * STICK;
	scalars[3] = (uint64_t)(v / F32_PER_STICK) * STICK;
	return 0;
}
