// SPDX-License-Identifier: MIT
/*
 * Row-wise SOFTMAX of X [m x n], rows split across cores, two strategies
 * (the cost model's pair for "planning the scratchpad"):
 *
 * SPYRE_KSTRAT_SCRATCHPAD: rows stay in the scratchpad. Each row tile is
 *	loaded once, goes through the SOFTMAX instruction in place (fp32
 *	inside, one rounding to the dtype) and is stored once. A row too wide
 *	for the scratchpad (or for a tile op's 65535 columns) takes the online
 *	form: a first pass over column tiles keeps a running row max M and a
 *	running sum S of exp(x - M), rescaled by exp(M_old - M_new) when the max
 *	grows; a second pass loads the tiles again and writes exp(x - M) / S.
 *	Nothing but X and Y touches device memory.
 * With SPYRE_KF_LOG (since 0.5) each form gives log_softmax instead,
 *	x - M - log S: the SOFTMAX instruction's SPYRE_IF_LOG, the online form's
 *	last pass subtracts log S, the naive one keeps x - max in work.
 * SPYRE_KSTRAT_NAIVE: what a compiler without scratchpad planning produces:
 *	four passes, each a separate sweep over the rows that leaves its result
 *	in device memory (the work slot) for the next one to load back: row max
 *	-> work; exp(x - max) in fp32 -> work; row sum -> work; exp / sum -> Y.
 *	Wide rows are tiled by columns in every pass.
 *
 * Work (NAIVE): m rows of n fp32 (the exponentials), then per core and per
 * row tile a stick-aligned vector of row maxima, then the same of row sums.
 */
#include <errno.h>
#include <float.h>

#include "kern.h"
#include "spyre_dtype.h"

#define F32 SPYRE_DT_FP32
#define COLS_MAX 0xffffu
#define ROWS_MAX 32768u

/* scratchpad bytes of tr x cw tiles: x (dt), an fp32 copy if @copy, nvec vectors */
static uint64_t need(uint32_t dt, int copy, unsigned nvec, uint64_t tr, uint64_t cw)
{
	uint64_t b = tr * kg_pitch(cw, dt);

	if (copy)
		b += tr * kg_pitch(cw, F32);
	return b + nvec * kg_pitch(tr, F32);
}

/*
 * Row tile and column tile: whole rows if @whole allows (n <= 65535 and one
 * row fits), as many rows as fit; else a few rows and as many sticks of
 * columns as fit. 0, or a failure naming the width.
 */
static int plan(struct kgen *g, uint32_t dt, int copy, unsigned nvec, uint64_t n, uint64_t maxr, uint64_t *tr,
		uint64_t *cw)
{
	uint64_t gran = SPYRE_STICK_BYTES / SPYRE_DT_SIZE(dt), cmax = COLS_MAX / gran * gran, sp = g->sp_bytes;

	if (maxr > ROWS_MAX)
		maxr = ROWS_MAX;
	if (n <= COLS_MAX && need(dt, copy, nvec, 1, n) <= sp) {
		*cw = n;
	} else {
		uint64_t want = maxr < 8 ? maxr : 8, lo = 0, hi = (n < cmax ? n : cmax) / gran;

		for (;;) {
			while (lo < hi) {
				uint64_t mid = lo + (hi - lo + 1) / 2;

				if (need(dt, copy, nvec, want, mid * gran) <= sp)
					lo = mid;
				else
					hi = mid - 1;
			}
			if (lo || want == 1)
				break;
			want = 1;
			hi = (n < cmax ? n : cmax) / gran;
		}
		if (!lo)
			return kg_fail(g, "a row of %llu columns: not even one stick of it fits the %u-byte "
				       "scratchpad", (unsigned long long)n, g->sp_bytes);
		*cw = lo * gran;
	}
	uint64_t lo = 1, hi = maxr;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;

		if (need(dt, copy, nvec, mid, *cw) <= sp)
			lo = mid;
		else
			hi = mid - 1;
	}
	*tr = lo;
	return 0;
}

/* SCRATCHPAD, a row that does not fit: the online (two-pass) form on one row tile */
static void online_tile(struct kgen *g, uint32_t c, uint32_t dt, int sx, int sy, uint64_t row0, uint64_t rows,
			uint64_t n, uint64_t cw, uint32_t xb, uint32_t t, const uint32_t v[5])
{
	uint64_t pitch = kg_pitch(n, dt), esz = SPYRE_DT_SIZE(dt);
	uint32_t mx = v[0], mn = v[1], s = v[2], st = v[3], dl = v[4];
	bool lg = g->d->flags & SPYRE_KF_LOG;

	for (uint64_t j0 = 0; j0 < n; j0 += cw) {
		uint64_t w = n - j0 < cw ? n - j0 : cw;

		kg_dma(g, c, SPYRE_ISA_OP_LOAD, xb, sx, row0 * pitch + j0 * esz, rows, kg_pitch(w, dt), pitch);
		if (dt != F32)
			kg_op(g, c, SPYRE_ISA_OP_CAST, dt, F32, 0, t, xb, 0, rows, w);
		if (!j0) {
			/* M starts at -FLT_MAX, not -inf: a tile of -inf (a mask) must give exp(x - M) = 0, not NaN */
			spyre_pb_op(g->pb, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = F32, .dt2 = F32,
								     .d = dl, .rows = 1, .cols = (uint32_t)rows,
								     .imm = spyre_f32_bits(-FLT_MAX) });
			kg_op(g, c, SPYRE_ISA_OP_REDMAX, F32, F32, 0, mx, t, 0, rows, w);
			kg_op(g, c, SPYRE_ISA_OP_MAX, F32, F32, 0, mx, mx, dl, 1, rows);
			kg_op(g, c, SPYRE_ISA_OP_SUB, F32, F32, SPYRE_IF_BCAST_COL, t, t, mx, rows, w);
			kg_op(g, c, SPYRE_ISA_OP_EXP, F32, F32, 0, t, t, 0, rows, w);
			kg_op(g, c, SPYRE_ISA_OP_REDSUM, F32, F32, 0, s, t, 0, rows, w);
			continue;
		}
		/* M' = max(M, max(tile)); S = S exp(M - M') + sum(exp(tile - M')) */
		kg_op(g, c, SPYRE_ISA_OP_REDMAX, F32, F32, 0, st, t, 0, rows, w);
		kg_op(g, c, SPYRE_ISA_OP_MAX, F32, F32, 0, mn, mx, st, 1, rows);
		kg_op(g, c, SPYRE_ISA_OP_SUB, F32, F32, SPYRE_IF_BCAST_COL, t, t, mn, rows, w);
		kg_op(g, c, SPYRE_ISA_OP_EXP, F32, F32, 0, t, t, 0, rows, w);
		kg_op(g, c, SPYRE_ISA_OP_REDSUM, F32, F32, 0, st, t, 0, rows, w);
		kg_op(g, c, SPYRE_ISA_OP_SUB, F32, F32, 0, dl, mx, mn, 1, rows);
		kg_op(g, c, SPYRE_ISA_OP_EXP, F32, F32, 0, dl, dl, 0, 1, rows);
		kg_op(g, c, SPYRE_ISA_OP_MUL, F32, F32, 0, s, s, dl, 1, rows);
		kg_op(g, c, SPYRE_ISA_OP_ADD, F32, F32, 0, s, s, st, 1, rows);
		uint32_t tmp = mx;

		mx = mn;
		mn = tmp;
	}
	/* softmax: times 1 / S = rsqrt(S)^2; log_softmax: minus log S */
	if (lg) {
		kg_op(g, c, SPYRE_ISA_OP_LOG, F32, F32, 0, s, s, 0, 1, rows);
	} else {
		kg_op(g, c, SPYRE_ISA_OP_RSQRT, F32, F32, 0, s, s, 0, 1, rows);
		kg_op(g, c, SPYRE_ISA_OP_MUL, F32, F32, 0, s, s, s, 1, rows);
	}
	for (uint64_t j0 = 0; j0 < n; j0 += cw) {
		uint64_t w = n - j0 < cw ? n - j0 : cw;

		kg_dma(g, c, SPYRE_ISA_OP_LOAD, xb, sx, row0 * pitch + j0 * esz, rows, kg_pitch(w, dt), pitch);
		if (dt != F32)
			kg_op(g, c, SPYRE_ISA_OP_CAST, dt, F32, 0, t, xb, 0, rows, w);
		kg_op(g, c, SPYRE_ISA_OP_SUB, F32, F32, SPYRE_IF_BCAST_COL, t, t, mx, rows, w);
		if (lg) {
			kg_op(g, c, SPYRE_ISA_OP_SUB, F32, dt, SPYRE_IF_BCAST_COL, xb, t, s, rows, w);
		} else {
			kg_op(g, c, SPYRE_ISA_OP_EXP, F32, F32, 0, t, t, 0, rows, w);
			kg_op(g, c, SPYRE_ISA_OP_MUL, F32, dt, SPYRE_IF_BCAST_COL, xb, t, s, rows, w);
		}
		kg_dma(g, c, SPYRE_ISA_OP_STORE, xb, sy, row0 * pitch + j0 * esz, rows, kg_pitch(w, dt), pitch);
	}
}

static int gen_scratchpad(struct kgen *g, int sx, int sy)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype;
	uint64_t m = d->m, n = d->n, pitch = kg_pitch(n, dt), maxr = (m + g->cores - 1) / g->cores, tr, cw;
	int whole = n <= COLS_MAX && pitch <= g->sp_bytes;

	/* whole rows: just the row tile, in place; else the online form's buffers */
	if (plan(g, dt, !whole && dt != F32, whole ? 0 : 5, n, maxr, &tr, &cw))
		return -EINVAL;
	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(m, g->cores, c, 1);
		uint64_t t_rows = r.count < tr ? r.count : tr;

		if (!r.count)
			continue;
		kg_sp_reset(g, c);
		uint32_t xb = kg_sp_alloc(g, c, t_rows * kg_pitch(cw, dt)), t = xb, v[5] = { 0 };

		if (!whole) {
			if (dt != F32)
				t = kg_sp_alloc(g, c, t_rows * kg_pitch(cw, F32));
			for (int i = 0; i < 5; i++)
				v[i] = kg_sp_alloc(g, c, kg_pitch(t_rows, F32));
		}
		if (g->failed)
			return -EINVAL;
		for (uint64_t r0 = 0; r0 < r.count; r0 += t_rows) {
			uint64_t rows = r.count - r0 < t_rows ? r.count - r0 : t_rows, row0 = r.start + r0;

			if (!whole) {
				online_tile(g, c, dt, sx, sy, row0, rows, n, cw, xb, t, v);
				continue;
			}
			kg_dma(g, c, SPYRE_ISA_OP_LOAD, xb, sx, row0 * pitch, rows, pitch, pitch);
			kg_op(g, c, SPYRE_ISA_OP_SOFTMAX, dt, dt, (d->flags & SPYRE_KF_LOG) ? SPYRE_IF_LOG : 0, xb, xb,
			      0, rows, n);
			kg_dma(g, c, SPYRE_ISA_OP_STORE, xb, sy, row0 * pitch, rows, pitch, pitch);
		}
	}
	return kg_ok(g);
}

/* NAIVE: the work slot's layout */
struct naive_work {
	uint64_t e_pitch;		/* fp32 row of the exponentials */
	uint64_t vmax, vsum, vstride;	/* vector regions, per-core stride */
	uint64_t bytes;
};

static int gen_naive(struct kgen *g, int sx, int sy)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, esz = SPYRE_DT_SIZE(dt);
	uint64_t m = d->m, n = d->n, pitch = kg_pitch(n, dt), maxr = (m + g->cores - 1) / g->cores, tr, cw;
	struct naive_work wk;
	bool lg = d->flags & SPYRE_KF_LOG;
	int sw;

	if (plan(g, dt, dt != F32, 2, n, maxr, &tr, &cw))
		return -EINVAL;
	wk.e_pitch = kg_pitch(n, F32);
	wk.vstride = (maxr + tr - 1) / tr * kg_pitch(tr, F32);
	wk.vmax = m * wk.e_pitch;
	wk.vsum = wk.vmax + (uint64_t)g->cores * wk.vstride;
	wk.bytes = wk.vsum + (uint64_t)g->cores * wk.vstride;
	sw = kg_slot(g, "work", F32, 1, wk.bytes / 4, wk.bytes, SPYRE_SYM_IN | SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(m, g->cores, c, 1);
		uint64_t t_rows = r.count < tr ? r.count : tr;

		if (!r.count)
			continue;
		kg_sp_reset(g, c);
		uint32_t xb = kg_sp_alloc(g, c, t_rows * kg_pitch(cw, dt));
		uint32_t t = dt == F32 ? xb : kg_sp_alloc(g, c, t_rows * kg_pitch(cw, F32));
		uint32_t acc = kg_sp_alloc(g, c, kg_pitch(t_rows, F32)), part = kg_sp_alloc(g, c, kg_pitch(t_rows, F32));

		if (g->failed)
			return -EINVAL;
		for (int pass = 0; pass < 4; pass++) {
			for (uint64_t r0 = 0, k = 0; r0 < r.count; r0 += t_rows, k++) {
				uint64_t rows = r.count - r0 < t_rows ? r.count - r0 : t_rows, row0 = r.start + r0;
				uint64_t vb = kg_pitch(rows, F32), voff = c * wk.vstride + k * kg_pitch(t_rows, F32);

				if (pass == 1)
					kg_dma(g, c, SPYRE_ISA_OP_LOAD, acc, sw, wk.vmax + voff, 1, vb, 0);
				if (pass == 3) {
					kg_dma(g, c, SPYRE_ISA_OP_LOAD, acc, sw, wk.vsum + voff, 1, vb, 0);
					if (lg) {
						kg_op(g, c, SPYRE_ISA_OP_LOG, F32, F32, 0, acc, acc, 0, 1, rows);
					} else {
						kg_op(g, c, SPYRE_ISA_OP_RSQRT, F32, F32, 0, acc, acc, 0, 1, rows);
						kg_op(g, c, SPYRE_ISA_OP_MUL, F32, F32, 0, acc, acc, acc, 1, rows);
					}
				}
				for (uint64_t j0 = 0; j0 < n; j0 += cw) {
					uint64_t w = n - j0 < cw ? n - j0 : cw;
					uint64_t xoff = row0 * pitch + j0 * esz, eoff = row0 * wk.e_pitch + j0 * 4;

					switch (pass) {
					case 0:	/* row max */
						kg_dma(g, c, SPYRE_ISA_OP_LOAD, xb, sx, xoff, rows, kg_pitch(w, dt), pitch);
						kg_op(g, c, SPYRE_ISA_OP_REDMAX, dt, F32, 0, j0 ? part : acc, xb, 0, rows, w);
						if (j0)
							kg_op(g, c, SPYRE_ISA_OP_MAX, F32, F32, 0, acc, acc, part, 1, rows);
						break;
					case 1:	/* exp(x - max); log_softmax: x - max (exp taken by the sum pass) */
						kg_dma(g, c, SPYRE_ISA_OP_LOAD, xb, sx, xoff, rows, kg_pitch(w, dt), pitch);
						if (dt != F32)
							kg_op(g, c, SPYRE_ISA_OP_CAST, dt, F32, 0, t, xb, 0, rows, w);
						kg_op(g, c, SPYRE_ISA_OP_SUB, F32, F32, SPYRE_IF_BCAST_COL, t, t, acc, rows, w);
						if (!lg)
							kg_op(g, c, SPYRE_ISA_OP_EXP, F32, F32, 0, t, t, 0, rows, w);
						kg_dma(g, c, SPYRE_ISA_OP_STORE, t, sw, eoff, rows, kg_pitch(w, F32), wk.e_pitch);
						break;
					case 2:	/* row sum */
						kg_dma(g, c, SPYRE_ISA_OP_LOAD, t, sw, eoff, rows, kg_pitch(w, F32), wk.e_pitch);
						if (lg)
							kg_op(g, c, SPYRE_ISA_OP_EXP, F32, F32, 0, t, t, 0, rows, w);
						kg_op(g, c, SPYRE_ISA_OP_REDSUM, F32, F32, 0, j0 ? part : acc, t, 0, rows, w);
						if (j0)
							kg_op(g, c, SPYRE_ISA_OP_ADD, F32, F32, 0, acc, acc, part, 1, rows);
						break;
					default: /* divide (log_softmax: subtract the log) */
						kg_dma(g, c, SPYRE_ISA_OP_LOAD, t, sw, eoff, rows, kg_pitch(w, F32), wk.e_pitch);
						kg_op(g, c, lg ? SPYRE_ISA_OP_SUB : SPYRE_ISA_OP_MUL, F32, dt, SPYRE_IF_BCAST_COL,
						      xb, t, acc, rows, w);
						kg_dma(g, c, SPYRE_ISA_OP_STORE, xb, sy, xoff, rows, kg_pitch(w, dt), pitch);
						break;
					}
				}
				if (pass == 0)
					kg_dma(g, c, SPYRE_ISA_OP_STORE, acc, sw, wk.vmax + voff, 1, vb, 0);
				if (pass == 2)
					kg_dma(g, c, SPYRE_ISA_OP_STORE, acc, sw, wk.vsum + voff, 1, vb, 0);
			}
		}
	}
	return kg_ok(g);
}

int kg_gen_softmax(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint64_t m = d->m, n = d->n, pitch = kg_pitch(n, d->dtype);
	int sx, sy;

	if (!m || !n)
		return kg_fail(g, "m (rows) and n (columns) must be non-zero, got %llux%llu", (unsigned long long)m,
			       (unsigned long long)n);
	if (pitch > UINT32_MAX)
		return kg_fail(g, "a row of %llu columns is too wide", (unsigned long long)n);
	sx = kg_slot(g, "x", d->dtype, m, n, pitch, SPYRE_SYM_IN);
	sy = kg_slot(g, "y", d->dtype, m, n, pitch, SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	return g->strategy == SPYRE_KSTRAT_NAIVE ? gen_naive(g, sx, sy) : gen_scratchpad(g, sx, sy);
}
