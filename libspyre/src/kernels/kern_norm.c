// SPDX-License-Identifier: MIT
/*
 * Normalization kernels: RMSNORM (Y = X / sqrt(mean(X^2) + eps) * w) and
 * LAYERNORM (Y = (X - mean) / sqrt(var + eps) * w + b), row-wise over X
 * [m x n]. Rows are split across cores; each core walks its rows in tiles.
 * Everything between the load and the store is fp32 (CAST, MUL, REDSUM,
 * SCALE, RSQRT, MUL/SUB/ADD with BCAST_COL for the per-row statistics and
 * BCAST_ROW for w and b); the output is rounded once to the dtype.
 *
 * When a whole row (and w, b) fits the scratchpad, each row tile is loaded
 * once: statistics, then the normalization, from the same fp32 copy. A
 * row too wide for that (or wider than a tile op's 65535 columns) is done in
 * two passes over column tiles: the first accumulates per-row statistics
 * (RMSNORM: the sum of squares; LAYERNORM: mean and centered sum of squares
 * of each tile, merged with Chan's parallel update so the variance never
 * comes from E[x^2] - mean^2), the second loads the tiles again and
 * normalizes them.
 */
#include <errno.h>

#include "kern.h"

#define F32 SPYRE_DT_FP32
/* tile ops take at most 65535 columns */
#define COLS_MAX 0xffffu
/* per-row vectors are tiles of one row: a row tile has at most this many rows */
#define ROWS_MAX 32768u

static void scale(struct kgen *g, uint32_t c, uint32_t d, uint32_t a, uint64_t rows, uint64_t cols, float s,
		  float bias)
{
	spyre_pb_op(g->pb, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SCALE, .dt = F32, .dt2 = F32, .d = d,
						     .a = a, .rows = (uint32_t)rows, .cols = (uint32_t)cols,
						     .scale = s, .bias = bias });
}

struct norm {
	uint32_t dt;
	int ln;			/* LAYERNORM */
	uint64_t tr, cw;	/* row tile, column tile */
};

/* Scratchpad bytes of a tile of @tr rows x @cw columns (the allocation below, stick by stick). */
static uint64_t norm_need(const struct norm *p, uint64_t tr, uint64_t cw)
{
	uint64_t b = tr * kg_pitch(cw, p->dt) + tr * kg_pitch(cw, F32);	/* x (and y), t2 */

	if (p->dt != F32)
		b += tr * kg_pitch(cw, F32);				/* t: x in fp32 */
	b += (p->ln ? 2 : 1) * kg_pitch(cw, F32);			/* w (, b) in fp32 */
	b += (p->ln ? 5 : 2) * kg_pitch(tr, F32);			/* per-row vectors */
	return b;
}

/* The largest row tile <= @maxr that fits with columns @cw, or 0. */
static uint64_t norm_rows(const struct norm *p, uint64_t cw, uint64_t maxr, uint64_t sp)
{
	uint64_t lo = 0, hi = maxr;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;

		if (norm_need(p, mid, cw) <= sp)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

static int norm_plan(struct kgen *g, struct norm *p, uint64_t n, uint64_t maxr)
{
	uint64_t gran = SPYRE_STICK_BYTES / SPYRE_DT_SIZE(p->dt), cmax = COLS_MAX / gran * gran;

	if (n <= COLS_MAX) {
		p->cw = n;
		p->tr = norm_rows(p, n, maxr, g->sp_bytes);
		if (p->tr)
			return 0;
	}
	/* two passes over column tiles: a few rows, as many whole sticks as fit */
	for (uint64_t want = maxr < 8 ? maxr : 8;; want = 1) {
		uint64_t lo = 0, hi = (n < cmax ? n : cmax) / gran;

		while (lo < hi) {
			uint64_t mid = lo + (hi - lo + 1) / 2;

			if (norm_need(p, want, mid * gran) <= g->sp_bytes)
				lo = mid;
			else
				hi = mid - 1;
		}
		if (lo) {
			p->cw = lo * gran;
			p->tr = norm_rows(p, p->cw, maxr, g->sp_bytes);
			return 0;
		}
		if (want == 1)
			break;
	}
	return kg_fail(g, "a row of %llu columns: not even one stick of it fits the %u-byte scratchpad",
		       (unsigned long long)n, g->sp_bytes);
}

/* Load columns [j0, j0 + w) of vector slot @sym (dtype dt) into @dst as fp32, through @stage. */
static void load_vec32(struct kgen *g, uint32_t c, uint32_t dt, int sym, uint64_t j0, uint64_t w, uint32_t dst,
		       uint32_t stage)
{
	uint64_t esz = SPYRE_DT_SIZE(dt);

	if (dt == F32) {
		kg_dma(g, c, SPYRE_ISA_OP_LOAD, dst, sym, j0 * esz, 1, kg_pitch(w, dt), 0);
		return;
	}
	kg_dma(g, c, SPYRE_ISA_OP_LOAD, stage, sym, j0 * esz, 1, kg_pitch(w, dt), 0);
	kg_op(g, c, SPYRE_ISA_OP_CAST, dt, F32, 0, dst, stage, 0, 1, w);
}

static int gen_norm(struct kgen *g, int ln)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, esz = SPYRE_DT_SIZE(dt);
	uint64_t m = d->m, n = d->n, pitch = kg_pitch(n, dt), maxr = (m + g->cores - 1) / g->cores;
	struct norm p = { .dt = dt, .ln = ln };
	int sx, sw, sb = -1, sy;

	if (!m || !n)
		return kg_fail(g, "m (rows) and n (columns) must be non-zero, got %llux%llu", (unsigned long long)m,
			       (unsigned long long)n);
	if (pitch > UINT32_MAX)
		return kg_fail(g, "a row of %llu columns is too wide", (unsigned long long)n);
	sx = kg_slot(g, "x", dt, m, n, pitch, SPYRE_SYM_IN);
	sw = kg_slot(g, "w", dt, 1, n, pitch, SPYRE_SYM_IN);
	if (ln)
		sb = kg_slot(g, "b", dt, 1, n, pitch, SPYRE_SYM_IN);
	sy = kg_slot(g, "y", dt, m, n, pitch, SPYRE_SYM_OUT);
	if (maxr > ROWS_MAX)
		maxr = ROWS_MAX;
	if (g->failed || norm_plan(g, &p, n, maxr))
		return -EINVAL;

	uint64_t ncol = (n + p.cw - 1) / p.cw;
	float eps = d->eps, inv_n = (float)(1.0 / (double)n);

	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(m, g->cores, c, 1);
		uint64_t tr = r.count < p.tr ? r.count : p.tr;

		if (!r.count)
			continue;
		kg_sp_reset(g, c);
		uint32_t xb = kg_sp_alloc(g, c, tr * kg_pitch(p.cw, dt));
		uint32_t t2 = kg_sp_alloc(g, c, tr * kg_pitch(p.cw, F32));
		uint32_t t = dt == F32 ? xb : kg_sp_alloc(g, c, tr * kg_pitch(p.cw, F32));
		uint32_t w32 = kg_sp_alloc(g, c, kg_pitch(p.cw, F32));
		uint32_t b32 = ln ? kg_sp_alloc(g, c, kg_pitch(p.cw, F32)) : 0;
		/* RMSNORM: acc (sum of squares, then the factor), part; LAYERNORM: mean, q (M2, then the factor), tile mean, tile M2, delta */
		uint32_t v0 = kg_sp_alloc(g, c, kg_pitch(tr, F32)), v1 = kg_sp_alloc(g, c, kg_pitch(tr, F32));
		uint32_t v2 = ln ? kg_sp_alloc(g, c, kg_pitch(tr, F32)) : 0;
		uint32_t v3 = ln ? kg_sp_alloc(g, c, kg_pitch(tr, F32)) : 0;
		uint32_t v4 = ln ? kg_sp_alloc(g, c, kg_pitch(tr, F32)) : 0;

		if (g->failed)
			return -EINVAL;
		if (ncol == 1) {
			/* w and b stay for every row tile */
			load_vec32(g, c, dt, sw, 0, n, w32, xb);
			if (ln)
				load_vec32(g, c, dt, sb, 0, n, b32, xb);
		}
		for (uint64_t r0 = 0; r0 < r.count; r0 += tr) {
			uint64_t rows = r.count - r0 < tr ? r.count - r0 : tr, row0 = r.start + r0;
			uint64_t seen = 0;

			/* pass 1: per-row statistics */
			for (uint64_t j0 = 0; j0 < n; j0 += p.cw) {
				uint64_t w = n - j0 < p.cw ? n - j0 : p.cw, tp = kg_pitch(w, dt);

				kg_dma(g, c, SPYRE_ISA_OP_LOAD, xb, sx, row0 * pitch + j0 * esz, rows, tp, pitch);
				if (dt != F32)
					kg_op(g, c, SPYRE_ISA_OP_CAST, dt, F32, 0, t, xb, 0, rows, w);
				if (!ln) {
					kg_op(g, c, SPYRE_ISA_OP_MUL, F32, F32, 0, t2, t, t, rows, w);
					kg_op(g, c, SPYRE_ISA_OP_REDSUM, F32, F32, 0, j0 ? v1 : v0, t2, 0, rows, w);
					if (j0)
						kg_op(g, c, SPYRE_ISA_OP_ADD, F32, F32, 0, v0, v0, v1, 1, rows);
					continue;
				}
				/* this tile's mean and M2 (first tile: straight into mean, q) */
				uint32_t tm = j0 ? v2 : v0, tq = j0 ? v3 : v1;

				kg_op(g, c, SPYRE_ISA_OP_REDSUM, F32, F32, 0, tm, t, 0, rows, w);
				scale(g, c, tm, tm, 1, rows, (float)(1.0 / (double)w), 0);
				kg_op(g, c, SPYRE_ISA_OP_SUB, F32, F32, SPYRE_IF_BCAST_COL, t2, t, tm, rows, w);
				kg_op(g, c, SPYRE_ISA_OP_MUL, F32, F32, 0, t2, t2, t2, rows, w);
				kg_op(g, c, SPYRE_ISA_OP_REDSUM, F32, F32, 0, tq, t2, 0, rows, w);
				if (j0) {
					/* Chan: delta = tm - mean; mean += delta w/(seen+w); q += tq + delta^2 seen w/(seen+w) */
					double na = (double)seen, nb = (double)w;

					kg_op(g, c, SPYRE_ISA_OP_SUB, F32, F32, 0, v4, tm, v0, 1, rows);
					scale(g, c, tm, v4, 1, rows, (float)(nb / (na + nb)), 0);
					kg_op(g, c, SPYRE_ISA_OP_ADD, F32, F32, 0, v0, v0, tm, 1, rows);
					kg_op(g, c, SPYRE_ISA_OP_MUL, F32, F32, 0, v4, v4, v4, 1, rows);
					scale(g, c, v4, v4, 1, rows, (float)(na * nb / (na + nb)), 0);
					kg_op(g, c, SPYRE_ISA_OP_ADD, F32, F32, 0, v1, v1, tq, 1, rows);
					kg_op(g, c, SPYRE_ISA_OP_ADD, F32, F32, 0, v1, v1, v4, 1, rows);
				}
				seen += w;
			}
			/* the per-row factor 1 / sqrt(sum / n + eps) */
			uint32_t f = ln ? v1 : v0;

			scale(g, c, f, f, 1, rows, inv_n, eps);
			kg_op(g, c, SPYRE_ISA_OP_RSQRT, F32, F32, 0, f, f, 0, 1, rows);

			/* pass 2: normalize (a single column tile is still in t) */
			for (uint64_t j0 = 0; j0 < n; j0 += p.cw) {
				uint64_t w = n - j0 < p.cw ? n - j0 : p.cw, tp = kg_pitch(w, dt);

				if (ncol > 1) {
					load_vec32(g, c, dt, sw, j0, w, w32, xb);
					if (ln)
						load_vec32(g, c, dt, sb, j0, w, b32, xb);
					kg_dma(g, c, SPYRE_ISA_OP_LOAD, xb, sx, row0 * pitch + j0 * esz, rows, tp, pitch);
					if (dt != F32)
						kg_op(g, c, SPYRE_ISA_OP_CAST, dt, F32, 0, t, xb, 0, rows, w);
				}
				if (ln) {
					kg_op(g, c, SPYRE_ISA_OP_SUB, F32, F32, SPYRE_IF_BCAST_COL, t2, t, v0, rows, w);
					kg_op(g, c, SPYRE_ISA_OP_MUL, F32, F32, SPYRE_IF_BCAST_COL, t, t2, f, rows, w);
					kg_op(g, c, SPYRE_ISA_OP_MUL, F32, F32, SPYRE_IF_BCAST_ROW, t2, t, w32, rows, w);
					kg_op(g, c, SPYRE_ISA_OP_ADD, F32, dt, SPYRE_IF_BCAST_ROW, xb, t2, b32, rows, w);
				} else {
					kg_op(g, c, SPYRE_ISA_OP_MUL, F32, F32, SPYRE_IF_BCAST_COL, t2, t, f, rows, w);
					kg_op(g, c, SPYRE_ISA_OP_MUL, F32, dt, SPYRE_IF_BCAST_ROW, xb, t2, w32, rows, w);
				}
				kg_dma(g, c, SPYRE_ISA_OP_STORE, xb, sy, row0 * pitch + j0 * esz, rows, tp, pitch);
			}
		}
	}
	return kg_ok(g);
}

int kg_gen_rmsnorm(struct kgen *g)
{
	return gen_norm(g, 0);
}

int kg_gen_layernorm(struct kgen *g)
{
	return gen_norm(g, 1);
}
