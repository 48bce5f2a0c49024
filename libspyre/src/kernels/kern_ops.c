// SPDX-License-Identifier: MIT
/*
 * The ops of a framework's eager mode (since 0.5): BINARY (add, sub, mul,
 * div, max, min with row / column broadcasting), UNARY (exp ... pow),
 * WHERE (select by a bool mask), REDUCE (sum, mean, max of each row) and
 * TRIL / TRIU. Rows are split across cores as the elementwise kernels'
 * (kern_eltwise.c); each core walks its rows in tiles that fit its
 * scratchpad, columns too (whole sticks) when a row does not fit. A vector
 * with one element per row (BINARY's B with SPYRE_KF_BCAST_COL, REDUCE's Y)
 * is addressed in whole sticks, so those ops split rows in sticks of it.
 * docs/kernels.md describes the plans; docs/spyre-isa.md the instructions.
 */
#include <errno.h>
#include <math.h>

#include "kern.h"
#include "spyre_dtype.h"

#define F32 SPYRE_DT_FP32
#define I8 SPYRE_DT_INT8
#define COLS_MAX 0xffffu

/* any tensor op: kg_op's and the immediates of SCALE / POW / FILL / TRIL */
static void op_imm(struct kgen *g, uint32_t c, unsigned opc, unsigned dt, unsigned dt2, unsigned flags, uint32_t d,
		   uint32_t a, uint32_t b, uint64_t rows, uint64_t cols, float scale, float bias, uint32_t imm,
		   uint32_t k, uint32_t ext)
{
	spyre_pb_op(g->pb, c, &(struct spyre_pb_op){ .op = opc, .dt = dt, .dt2 = dt2, .flags = flags, .d = d,
						     .a = a, .b = b, .rows = (uint32_t)rows, .cols = (uint32_t)cols,
						     .scale = scale, .bias = bias, .imm = imm, .k = k, .ext = ext });
}

/* a tile of @rows x @w at @sp <-> slot @sym at row @row0, column @j0 of rows @pitch apart */
static void tile_dma(struct kgen *g, uint32_t c, unsigned opc, uint32_t sp, int sym, uint64_t row0, uint64_t j0,
		     uint64_t rows, uint64_t w, uint64_t pitch, uint32_t dt)
{
	kg_dma(g, c, opc, sp, sym, row0 * pitch + j0 * SPYRE_DT_SIZE(dt), rows, kg_pitch(w, dt), pitch);
}

/*
 * The tiling every op here shares: columns per tile (all, or whole sticks)
 * and rows per tile for @per_col bytes of scratchpad per element of a
 * tile: @ndt dtype buffers and @nf32 fp32 temporaries of the tile, @nvec
 * fp32 vectors of one element per row, @nrow rows of the tile's width
 * (a broadcast row; counted as fp32). Rows are a multiple of @rgran unless
 * the block is smaller.
 */
struct plan {
	uint64_t cw, tr;
};

static int plan_tiles(struct kgen *g, uint64_t n, uint64_t maxr, uint64_t rgran, uint32_t esz,
		      unsigned ndt, unsigned nf32, unsigned nvec, unsigned nrow, struct plan *p)
{
	uint64_t per_stick = SPYRE_STICK_BYTES / esz, sp = g->sp_bytes;
	uint64_t want = kg_min64(maxr, kg_max64(rgran, 8));
	uint64_t cw = kg_min64(n, COLS_MAX / per_stick * per_stick);

	/* bytes of a tile of r rows x w columns */
#define TILE_BYTES(r, w) ((r) * (ndt * kg_rup((w) * esz, SPYRE_STICK_BYTES) + \
				  nf32 * kg_rup((w) * 4, SPYRE_STICK_BYTES)) + \
			  nvec * (kg_rup((r) * 4, SPYRE_STICK_BYTES) + SPYRE_STICK_BYTES) + \
			  nrow * kg_rup((w) * 4, SPYRE_STICK_BYTES))
	while (cw > per_stick && TILE_BYTES(want, cw) > sp)
		cw = kg_max64(per_stick, (cw / 2) / per_stick * per_stick);
	if (TILE_BYTES(want, cw) > sp)
		return kg_fail(g, "a tile of %llu rows x %llu columns does not fit the %u-byte scratchpad",
			       (unsigned long long)want, (unsigned long long)cw, g->sp_bytes);
	uint64_t lo = want, hi = kg_min64(maxr, 32768);	/* vectors of one element per row: <= 65535 */

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;

		if (TILE_BYTES(mid, cw) <= sp)
			lo = mid;
		else
			hi = mid - 1;
	}
#undef TILE_BYTES
	if (lo < maxr && lo > rgran)
		lo = lo / rgran * rgran;
	p->cw = cw;
	p->tr = lo;
	return 0;
}

/* ---- BINARY --------------------------------------------------------------------- */

static unsigned binary_isa(uint32_t fn)
{
	static const unsigned isa[] = {
		[SPYRE_KFN_ADD] = SPYRE_ISA_OP_ADD, [SPYRE_KFN_SUB] = SPYRE_ISA_OP_SUB,
		[SPYRE_KFN_MUL] = SPYRE_ISA_OP_MUL, [SPYRE_KFN_DIV] = SPYRE_ISA_OP_DIV,
		[SPYRE_KFN_MAX] = SPYRE_ISA_OP_MAX, [SPYRE_KFN_MIN] = SPYRE_ISA_OP_MIN,
	};

	return isa[fn];
}

int kg_gen_binary(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, esz = SPYRE_DT_SIZE(dt);
	uint64_t m = d->m, n = d->n, pitch = kg_pitch(n, dt), per_stick = SPYRE_STICK_BYTES / esz;
	bool row = d->flags & SPYRE_KF_BCAST_ROW, col = d->flags & SPYRE_KF_BCAST_COL;
	bool rev = d->flags & SPYRE_KF_REVERSE;
	bool scaled = (d->fn == SPYRE_KFN_ADD || d->fn == SPYRE_KFN_SUB) && d->alpha != 0.0f && d->alpha != 1.0f;
	unsigned opc = binary_isa(d->fn), bflags = (row ? SPYRE_IF_BCAST_ROW : 0) | (col ? SPYRE_IF_BCAST_COL : 0);
	uint64_t rgran = col ? per_stick : 1;
	struct plan p;
	int sa, sb, sy;

	if (!m || !n)
		return kg_fail(g, "m and n must be non-zero, got %llux%llu", (unsigned long long)m,
			       (unsigned long long)n);
	sa = kg_slot(g, "a", dt, m, n, pitch, SPYRE_SYM_IN);
	if (row)
		sb = kg_slot(g, "b", dt, 1, n, pitch, SPYRE_SYM_IN);
	else if (col)
		sb = kg_slot(g, "b", dt, 1, m, kg_pitch(m, dt), SPYRE_SYM_IN);
	else
		sb = kg_slot(g, "b", dt, m, n, pitch, SPYRE_SYM_IN);
	sy = kg_slot(g, "y", dt, m, n, pitch, SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	/* a, b (a tile unless broadcast), y; with alpha two fp32 copies of the tiles and of b's vector */
	if (plan_tiles(g, n, kg_cdiv(kg_cdiv(m, rgran), g->cores) * rgran, rgran, esz, (row || col) ? 2 : 3,
		       scaled ? 2 : 0, col ? 2 : 0, row ? 2 : 0, &p))
		return -EINVAL;
	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(m, g->cores, c, rgran);

		if (!r.count)
			continue;
		for (uint64_t j0 = 0; j0 < n; j0 += p.cw) {
			uint64_t w = kg_min64(n - j0, p.cw), tr = kg_min64(r.count, p.tr);
			uint64_t tp = kg_pitch(w, dt), tp32 = kg_pitch(w, F32);
			uint32_t a, b, y, ta = 0, tb = 0;

			kg_sp_reset(g, c);
			a = kg_sp_alloc(g, c, tr * tp);
			y = kg_sp_alloc(g, c, tr * tp);
			b = kg_sp_alloc(g, c, row ? tp : col ? kg_pitch(tr, dt) : tr * tp);
			if (scaled) {
				ta = kg_sp_alloc(g, c, tr * tp32);
				tb = kg_sp_alloc(g, c, row ? tp32 : col ? kg_pitch(tr, F32) : tr * tp32);
			}
			if (g->failed)
				return -EINVAL;
			if (row) {
				tile_dma(g, c, SPYRE_ISA_OP_LOAD, b, sb, 0, j0, 1, w, pitch, dt);
				if (scaled && !rev)	/* the broadcast row scaled once */
					op_imm(g, c, SPYRE_ISA_OP_SCALE, dt, F32, 0, tb, b, 0, 1, w, d->alpha, 0, 0, 0, 0);
				else if (scaled)
					kg_op(g, c, SPYRE_ISA_OP_CAST, dt, F32, 0, tb, b, 0, 1, w);
			}
			for (uint64_t r0 = 0; r0 < r.count; r0 += tr) {
				uint64_t rows = kg_min64(r.count - r0, tr), row0 = r.start + r0;
				uint32_t oa = a, ob = b;

				tile_dma(g, c, SPYRE_ISA_OP_LOAD, a, sa, row0, j0, rows, w, pitch, dt);
				if (col)
					kg_dma(g, c, SPYRE_ISA_OP_LOAD, b, sb, row0 * esz, 1, kg_pitch(rows, dt), 0);
				else if (!row)
					tile_dma(g, c, SPYRE_ISA_OP_LOAD, b, sb, row0, j0, rows, w, pitch, dt);
				if (scaled) {
					/* alpha scales the second operand of fn: B, or A with REVERSE; fp32 inside */
					uint64_t brows = col ? 1 : rows, bcols = col ? rows : w;

					if (!row) {
						if (rev)
							kg_op(g, c, SPYRE_ISA_OP_CAST, dt, F32, 0, tb, b, 0, brows, bcols);
						else
							op_imm(g, c, SPYRE_ISA_OP_SCALE, dt, F32, 0, tb, b, 0, brows, bcols,
							       d->alpha, 0, 0, 0, 0);
					}
					if (rev)
						op_imm(g, c, SPYRE_ISA_OP_SCALE, dt, F32, 0, ta, a, 0, rows, w, d->alpha, 0,
						       0, 0, 0);
					else
						kg_op(g, c, SPYRE_ISA_OP_CAST, dt, F32, 0, ta, a, 0, rows, w);
					oa = ta;
					ob = tb;
				}
				kg_op(g, c, opc, scaled ? F32 : dt, dt, bflags | (rev ? SPYRE_IF_SWAP : 0), y, oa, ob,
				      rows, w);
				tile_dma(g, c, SPYRE_ISA_OP_STORE, y, sy, row0, j0, rows, w, pitch, dt);
			}
		}
	}
	return kg_ok(g);
}

/* ---- UNARY ---------------------------------------------------------------------- */

static unsigned unary_isa(uint32_t fn)
{
	static const unsigned isa[] = {
		[SPYRE_KFN_EXP - SPYRE_KFN_EXP] = SPYRE_ISA_OP_EXP,
		[SPYRE_KFN_LOG - SPYRE_KFN_EXP] = SPYRE_ISA_OP_LOG,
		[SPYRE_KFN_TANH - SPYRE_KFN_EXP] = SPYRE_ISA_OP_TANH,
		[SPYRE_KFN_SIGMOID - SPYRE_KFN_EXP] = SPYRE_ISA_OP_SIGMOID,
		[SPYRE_KFN_RSQRT - SPYRE_KFN_EXP] = SPYRE_ISA_OP_RSQRT,
		[SPYRE_KFN_SQRT - SPYRE_KFN_EXP] = SPYRE_ISA_OP_SQRT,
		[SPYRE_KFN_RECIP - SPYRE_KFN_EXP] = SPYRE_ISA_OP_RECIP,
		[SPYRE_KFN_ABS - SPYRE_KFN_EXP] = SPYRE_ISA_OP_ABS,
		[SPYRE_KFN_GELU_TANH - SPYRE_KFN_EXP] = SPYRE_ISA_OP_GELU_TANH,
		[SPYRE_KFN_SCALE - SPYRE_KFN_EXP] = SPYRE_ISA_OP_SCALE,
		[SPYRE_KFN_POW - SPYRE_KFN_EXP] = SPYRE_ISA_OP_POW,
	};

	return isa[fn - SPYRE_KFN_EXP];
}

/* The tiles of a one-input op (UNARY, TRIL): f(core, tile in sp, its rows, row0, j0, w) between load and store. */
static int gen_map(struct kgen *g, void (*f)(struct kgen *g, uint32_t c, uint32_t x, uint64_t rows, uint64_t row0,
					     uint64_t j0, uint64_t w))
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, esz = SPYRE_DT_SIZE(dt);
	uint64_t m = d->m, n = d->n, pitch = kg_pitch(n, dt);
	struct plan p;
	int sx, sy;

	if (!m || !n)
		return kg_fail(g, "m and n must be non-zero, got %llux%llu", (unsigned long long)m,
			       (unsigned long long)n);
	sx = kg_slot(g, "x", dt, m, n, pitch, SPYRE_SYM_IN);
	sy = kg_slot(g, "y", dt, m, n, pitch, SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	if (plan_tiles(g, n, kg_cdiv(m, g->cores), 1, esz, 1, 0, 0, 0, &p))
		return -EINVAL;
	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(m, g->cores, c, 1);

		if (!r.count)
			continue;
		kg_sp_reset(g, c);
		uint64_t tr = kg_min64(r.count, p.tr);
		uint32_t x = kg_sp_alloc(g, c, tr * kg_pitch(p.cw, dt));

		if (g->failed)
			return -EINVAL;
		for (uint64_t j0 = 0; j0 < n; j0 += p.cw) {
			uint64_t w = kg_min64(n - j0, p.cw);

			for (uint64_t r0 = 0; r0 < r.count; r0 += tr) {
				uint64_t rows = kg_min64(r.count - r0, tr), row0 = r.start + r0;

				tile_dma(g, c, SPYRE_ISA_OP_LOAD, x, sx, row0, j0, rows, w, pitch, dt);
				f(g, c, x, rows, row0, j0, w);
				tile_dma(g, c, SPYRE_ISA_OP_STORE, x, sy, row0, j0, rows, w, pitch, dt);
			}
		}
	}
	return kg_ok(g);
}

static void unary_tile(struct kgen *g, uint32_t c, uint32_t x, uint64_t rows, uint64_t row0, uint64_t j0,
		       uint64_t w)
{
	const struct spyre_kdesc *d = g->d;

	(void)row0;
	(void)j0;
	op_imm(g, c, unary_isa(d->fn), d->dtype, d->dtype, 0, x, x, 0, rows, w, d->alpha, d->beta, 0, 0, 0);
}

int kg_gen_unary(struct kgen *g)
{
	return gen_map(g, unary_tile);
}

/* ---- TRIL ------------------------------------------------------------------------ */

static void tril_one(struct kgen *g, uint32_t c, uint32_t x, uint64_t rows, uint64_t first, uint64_t w,
		     uint32_t k, int64_t diag)
{
	const struct spyre_kdesc *d = g->d;
	unsigned fl = d->fn == SPYRE_KFN_TRIU ? SPYRE_IF_UPPER : 0;
	int64_t dg = diag < INT32_MIN ? INT32_MIN : diag > INT32_MAX ? INT32_MAX : diag;

	op_imm(g, c, SPYRE_ISA_OP_TRIL, d->dtype, d->dtype, fl, x, x, 0, rows, w, 0, 0, (uint32_t)(int32_t)dg, k,
	       k ? (uint32_t)first : 0);
}

/*
 * One TRIL instruction per tile: its rows are matrices of k rows, the
 * tile's first row is row row0 % k of its matrix and its first column
 * column j0 (c - r <= diag  <=>  (c - j0) - r <= diag - j0). A matrix
 * taller than the instruction's 65535-row field is cut into runs of one
 * matrix each, the diagonal shifted by the run's first row instead.
 */
static void tril_tile(struct kgen *g, uint32_t c, uint32_t x, uint64_t rows, uint64_t row0, uint64_t j0,
		      uint64_t w)
{
	const struct spyre_kdesc *d = g->d;
	uint64_t k = d->k, stride = kg_pitch(w, d->dtype);
	int64_t diag = (int64_t)d->alpha - (int64_t)j0;

	if (k <= COLS_MAX) {
		tril_one(g, c, x, rows, row0 % k, w, (uint32_t)k, diag);
		return;
	}
	for (uint64_t r = 0; r < rows;) {
		uint64_t first = (row0 + r) % k, cnt = kg_min64(rows - r, k - first);

		tril_one(g, c, x + (uint32_t)(r * stride), cnt, 0, w, 0, diag + (int64_t)first);
		r += cnt;
	}
}

int kg_gen_tril(struct kgen *g)
{
	if (g->d->k == 0 || g->d->m % g->d->k)
		return kg_fail(g, "k (rows per matrix) must divide m, got m %llu k %llu",
			       (unsigned long long)g->d->m, (unsigned long long)g->d->k);
	return gen_map(g, tril_tile);
}

/* ---- REDUCE --------------------------------------------------------------------- */

int kg_gen_reduce(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, esz = SPYRE_DT_SIZE(dt);
	uint64_t m = d->m, n = d->n, pitch = kg_pitch(n, dt), per_stick = SPYRE_STICK_BYTES / esz;
	bool mx = d->fn == SPYRE_KFN_RMAX;
	struct plan p;
	int sx, sy;

	if (!m || !n)
		return kg_fail(g, "m and n must be non-zero, got %llux%llu", (unsigned long long)m,
			       (unsigned long long)n);
	sx = kg_slot(g, "x", dt, m, n, pitch, SPYRE_SYM_IN);
	sy = kg_slot(g, "y", dt, 1, m, kg_pitch(m, dt), SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	/* the tile; vectors: the accumulator, a partial, the result in dtype */
	if (plan_tiles(g, n, kg_cdiv(kg_cdiv(m, per_stick), g->cores) * per_stick, per_stick, esz, 1, 0, 3, 0, &p))
		return -EINVAL;
	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(m, g->cores, c, per_stick);

		if (!r.count)
			continue;
		kg_sp_reset(g, c);
		uint64_t tr = kg_min64(r.count, p.tr);
		uint32_t x = kg_sp_alloc(g, c, tr * kg_pitch(p.cw, dt));
		uint32_t acc = kg_sp_alloc(g, c, kg_pitch(tr, F32)), part = kg_sp_alloc(g, c, kg_pitch(tr, F32));
		uint32_t y = kg_sp_alloc(g, c, kg_pitch(tr, dt));

		if (g->failed)
			return -EINVAL;
		for (uint64_t r0 = 0; r0 < r.count; r0 += tr) {
			uint64_t rows = kg_min64(r.count - r0, tr), row0 = r.start + r0;

			for (uint64_t j0 = 0; j0 < n; j0 += p.cw) {
				uint64_t w = kg_min64(n - j0, p.cw);

				tile_dma(g, c, SPYRE_ISA_OP_LOAD, x, sx, row0, j0, rows, w, pitch, dt);
				kg_op(g, c, mx ? SPYRE_ISA_OP_REDMAX : SPYRE_ISA_OP_REDSUM, dt, F32, 0, j0 ? part : acc, x,
				      0, rows, w);
				if (j0)
					kg_op(g, c, mx ? SPYRE_ISA_OP_MAX : SPYRE_ISA_OP_ADD, F32, F32, 0, acc, acc, part,
					      1, rows);
			}
			if (d->fn == SPYRE_KFN_MEAN)
				op_imm(g, c, SPYRE_ISA_OP_SCALE, F32, dt, 0, y, acc, 0, 1, rows, (float)(1.0 / (double)n),
				       0, 0, 0, 0);
			else
				kg_op(g, c, SPYRE_ISA_OP_CAST, F32, dt, 0, y, acc, 0, 1, rows);
			kg_dma(g, c, SPYRE_ISA_OP_STORE, y, sy, row0 * esz, 1, kg_pitch(rows, dt), 0);
		}
	}
	return kg_ok(g);
}

/* ---- WHERE ---------------------------------------------------------------------- */

/*
 * Y = C ? A : B by a masked move: Y's tile gets B (loaded, or filled with
 * beta), then MOVM copies A (loaded, or filled with alpha) where the int8
 * mask C is non-zero. Neither side is computed with the other: infinities
 * and NaNs of the side not taken never reach Y.
 */
int kg_gen_where(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, esz = SPYRE_DT_SIZE(dt);
	uint64_t m = d->m, n = d->n, pitch = kg_pitch(n, dt), mpitch = kg_pitch(n, I8);
	bool sca = d->flags & SPYRE_KF_SCALAR_A, scb = d->flags & SPYRE_KF_SCALAR_B;
	struct plan p;
	int sc, sa = -1, sb = -1, sy;

	if (!m || !n)
		return kg_fail(g, "m and n must be non-zero, got %llux%llu", (unsigned long long)m,
			       (unsigned long long)n);
	sc = kg_slot(g, "c", I8, m, n, mpitch, SPYRE_SYM_IN);
	if (!sca)
		sa = kg_slot(g, "a", dt, m, n, pitch, SPYRE_SYM_IN);
	if (!scb)
		sb = kg_slot(g, "b", dt, m, n, pitch, SPYRE_SYM_IN);
	sy = kg_slot(g, "y", dt, m, n, pitch, SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	/* y, a and the mask (counted in dtype: at least its bytes) */
	if (plan_tiles(g, n, kg_cdiv(m, g->cores), 1, esz, 3, 0, 0, 0, &p))
		return -EINVAL;
	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(m, g->cores, c, 1);

		if (!r.count)
			continue;
		uint64_t tr = kg_min64(r.count, p.tr);

		for (uint64_t j0 = 0; j0 < n; j0 += p.cw) {
			uint64_t w = kg_min64(n - j0, p.cw);

			kg_sp_reset(g, c);
			uint32_t y = kg_sp_alloc(g, c, tr * kg_pitch(w, dt)), a = kg_sp_alloc(g, c, tr * kg_pitch(w, dt));
			uint32_t mk = kg_sp_alloc(g, c, tr * kg_pitch(w, I8));

			if (g->failed)
				return -EINVAL;
			if (sca)	/* the scalar tile, once per column tile */
				op_imm(g, c, SPYRE_ISA_OP_FILL, dt, dt, 0, a, 0, 0, tr, w, 0, 0, spyre_f32_bits(d->alpha),
				       0, 0);
			for (uint64_t r0 = 0; r0 < r.count; r0 += tr) {
				uint64_t rows = kg_min64(r.count - r0, tr), row0 = r.start + r0;

				tile_dma(g, c, SPYRE_ISA_OP_LOAD, mk, sc, row0, j0, rows, w, mpitch, I8);
				if (scb)
					op_imm(g, c, SPYRE_ISA_OP_FILL, dt, dt, 0, y, 0, 0, rows, w, 0, 0,
					       spyre_f32_bits(d->beta), 0, 0);
				else
					tile_dma(g, c, SPYRE_ISA_OP_LOAD, y, sb, row0, j0, rows, w, pitch, dt);
				if (!sca)
					tile_dma(g, c, SPYRE_ISA_OP_LOAD, a, sa, row0, j0, rows, w, pitch, dt);
				kg_op(g, c, SPYRE_ISA_OP_MOVM, dt, dt, 0, y, a, mk, rows, w);
				tile_dma(g, c, SPYRE_ISA_OP_STORE, y, sy, row0, j0, rows, w, pitch, dt);
			}
		}
	}
	return kg_ok(g);
}

/* ---- CAT ------------------------------------------------------------------------ */

/*
 * Y [m x k*n] = [X0 | ... | X(k-1)]. Pieces whose rows are whole sticks
 * (n * element size a multiple of 128) are copied by DMA alone, each piece's
 * tile stored at its column offset of Y. Otherwise a piece starts inside a
 * stick of Y's row, and the row tile is assembled on chip: each piece's
 * tile [rows x n] is transposed into rows i*n .. (i+1)*n - 1 of T [k*n x
 * rows] (T's rows start on sticks), and T transposed back is Y's tile.
 */
int kg_gen_cat(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, esz = SPYRE_DT_SIZE(dt), k = (uint32_t)d->k;
	uint64_t m = d->m, n = d->n, pitch = kg_pitch(n, dt), ypitch, per_stick = SPYRE_STICK_BYTES / esz;
	bool aligned = n * esz % SPYRE_STICK_BYTES == 0;
	int sx[8], sy;

	if (!m || !n)
		return kg_fail(g, "m and n must be non-zero, got %llux%llu", (unsigned long long)m,
			       (unsigned long long)n);
	if (d->k < 2 || d->k > 8)
		return kg_fail(g, "k (pieces) must be 2..8, got %llu", (unsigned long long)d->k);
	if (n > COLS_MAX || n * k > UINT32_MAX)
		return kg_fail(g, "n = %llu columns per piece: at most %u", (unsigned long long)n, COLS_MAX);
	ypitch = kg_pitch(n * k, dt);
	for (uint32_t i = 0; i < k; i++) {
		char name[8] = { 'x', (char)('0' + i), 0 };

		sx[i] = kg_slot(g, name, dt, m, n, pitch, SPYRE_SYM_IN);
	}
	sy = kg_slot(g, "y", dt, m, n * k, ypitch, SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	/* rows per tile: DMA only: k piece tiles; on chip: k piece tiles, T and Y's tile */
	uint64_t per_row = aligned ? k * pitch : k * pitch + ypitch, maxr = kg_cdiv(m, g->cores);
	uint64_t tr = kg_min64(kg_min64(maxr, g->sp_bytes / per_row), 32768);

	if (!aligned) {
		/* T is k*n rows of tr elements: its rows are sticks of tr; keep tr a multiple of a stick */
		while (tr > per_stick && (tr * per_row + k * n * kg_pitch(tr, dt)) > g->sp_bytes)
			tr -= per_stick;
		if (tr > per_stick)
			tr = tr / per_stick * per_stick;
		while (tr > 1 && tr * per_row + k * n * kg_pitch(tr, dt) > g->sp_bytes)
			tr--;
		if (!tr || tr * per_row + k * n * kg_pitch(tr, dt) > g->sp_bytes)
			tr = 0;
	}
	if (!tr)
		return kg_fail(g, "a row of %u pieces of %llu columns does not fit the %u-byte scratchpad", k,
			       (unsigned long long)n, g->sp_bytes);
	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(m, g->cores, c, 1);
		uint64_t t_rows = kg_min64(r.count, tr);
		uint32_t buf[8], tb = 0, yb = 0;

		if (!r.count)
			continue;
		kg_sp_reset(g, c);
		for (uint32_t i = 0; i < k; i++)
			buf[i] = kg_sp_alloc(g, c, t_rows * pitch);
		if (!aligned) {
			tb = kg_sp_alloc(g, c, k * n * kg_pitch(t_rows, dt));
			yb = kg_sp_alloc(g, c, t_rows * ypitch);
		}
		if (g->failed)
			return -EINVAL;
		for (uint64_t r0 = 0; r0 < r.count; r0 += t_rows) {
			uint64_t rows = kg_min64(r.count - r0, t_rows), row0 = r.start + r0;
			uint64_t tpitch = kg_pitch(rows, dt);

			for (uint32_t i = 0; i < k; i++) {
				kg_dma(g, c, SPYRE_ISA_OP_LOAD, buf[i], sx[i], row0 * pitch, rows, pitch, pitch);
				if (aligned) {
					kg_dma(g, c, SPYRE_ISA_OP_STORE, buf[i], sy, row0 * ypitch + i * pitch, rows, pitch,
					       ypitch);
					continue;
				}
				spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
					.op = SPYRE_ISA_OP_TRANSPOSE, .dt = dt, .dt2 = dt, .d = tb + (uint32_t)(i * n * tpitch),
					.a = buf[i], .rows = (uint32_t)rows, .cols = (uint32_t)n,
					.ldd = (uint32_t)(tpitch / SPYRE_STICK_BYTES),
					.lda = (uint32_t)(pitch / SPYRE_STICK_BYTES) });
			}
			if (aligned)
				continue;
			spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
				.op = SPYRE_ISA_OP_TRANSPOSE, .dt = dt, .dt2 = dt, .d = yb, .a = tb,
				.rows = (uint32_t)(k * n), .cols = (uint32_t)rows,
				.ldd = (uint32_t)(ypitch / SPYRE_STICK_BYTES),
				.lda = (uint32_t)(tpitch / SPYRE_STICK_BYTES) });
			kg_dma(g, c, SPYRE_ISA_OP_STORE, yb, sy, row0 * ypitch, rows, ypitch, ypitch);
		}
	}
	return kg_ok(g);
}

/* ---- PERMUTE -------------------------------------------------------------------- */

/*
 * X dense [batch x m x n x k] -> Y dense [batch x n x m x k], three plans:
 *
 * rows: k elements are whole sticks (R = k * element size, a multiple of
 *	128): a DMA relayout. A block of ib source rows i (all n of their
 *	j's, contiguous in X) is loaded at once and stored as ib runs of n
 *	rows m*R apart, or n runs of ib contiguous rows, whichever is fewer
 *	instructions. A block too big for the scratchpad takes j in parts.
 * tiles: k == 1 with m and n whole sticks: the batched transpose of
 *	stick-layout matrices, tiles of tr x tc through the TRANSPOSE
 *	instruction.
 * dense: k == 1 otherwise: the matrices start anywhere inside a stick.
 *	Each core owns a range of Y's sticks; a chunk of them is made from
 *	the batches it overlaps: their input loaded as one run of sticks, each
 *	transposed by a dense TRANSPOSE (element offsets inside the first
 *	stick), the chunk's own sticks stored; Y's last stick, where Y ends
 *	inside it, keeps the bytes after Y (loaded first: a view's storage may
 *	go on). A matrix (X and Y) must fit a quarter of the scratchpad.
 */
static int permute_rows(struct kgen *g, int sx, int sy, uint64_t batch, uint64_t m, uint64_t n, uint64_t rb)
{
	uint64_t cap = g->sp_bytes / rb;	/* rows of R bytes in the scratchpad */

	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(batch * m, g->cores, c, 1);

		if (!r.count)
			continue;
		kg_sp_reset(g, c);
		/* a block is ib * n <= cap rows, or jc <= cap of one i */
		uint32_t buf = kg_sp_alloc(g, c, (n <= cap ? kg_min64(cap / n, r.count) * n : cap) * rb);

		if (g->failed)
			return -EINVAL;
		for (uint64_t u = r.start; u < r.start + r.count;) {
			uint64_t b = u / m, i0 = u % m;
			uint64_t ib = n <= cap ? kg_min64(kg_min64(cap / n, m - i0), r.start + r.count - u) : 1;

			for (uint64_t j0 = 0; j0 < n;) {
				uint64_t jc = n <= cap ? n : kg_min64(cap, n - j0);
				uint64_t xoff = ((b * m + i0) * n + j0) * rb, yoff = ((b * n + j0) * m + i0) * rb;

				kg_dma(g, c, SPYRE_ISA_OP_LOAD, buf, sx, xoff, ib * jc, rb, rb);
				if (ib <= jc) {
					for (uint64_t i = 0; i < ib; i++)	/* jc rows, m*R apart in Y */
						spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
							.sp = buf + (uint32_t)(i * jc * rb), .mem = { .sym = sy, .off = yoff + i * rb },
							.rows = (uint32_t)jc, .row_bytes = (uint32_t)rb,
							.mem_stride = (uint32_t)(m * rb), .sp_stride = (uint32_t)rb });
				} else {
					for (uint64_t j = 0; j < jc; j++)	/* ib contiguous rows, n*R apart here */
						spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
							.sp = buf + (uint32_t)(j * rb), .mem = { .sym = sy, .off = yoff + j * m * rb },
							.rows = (uint32_t)ib, .row_bytes = (uint32_t)rb,
							.mem_stride = (uint32_t)rb, .sp_stride = (uint32_t)(jc * rb) });
				}
				j0 += jc;
			}
			u += ib;
		}
	}
	return kg_ok(g);
}

static int permute_tiles(struct kgen *g, int sx, int sy, uint64_t batch, uint64_t m, uint64_t n, uint32_t dt)
{
	uint64_t esz = SPYRE_DT_SIZE(dt), S = SPYRE_STICK_BYTES / esz, tr = kg_min64(m, 8 * S), tc = kg_min64(n, 8 * S);

	/* two tiles of tr x tc in the scratchpad (tc a stick multiple below the tile op's 65535 columns) */
	while (2 * tr * tc * esz > g->sp_bytes && (tr > S || tc > S)) {
		if (tr >= tc)
			tr = kg_max64(S, tr / 2 / S * S);
		else
			tc = kg_max64(S, tc / 2 / S * S);
	}
	if (2 * tr * tc * esz > g->sp_bytes)
		return kg_fail(g, "a %llu x %llu tile does not fit the scratchpad", (unsigned long long)tr,
			       (unsigned long long)tc);
	uint64_t nr = kg_cdiv(m, tr), nc = kg_cdiv(n, tc);

	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(batch * nr * nc, g->cores, c, 1);

		if (!r.count)
			continue;
		kg_sp_reset(g, c);
		uint32_t a = kg_sp_alloc(g, c, tr * tc * esz), t = kg_sp_alloc(g, c, tr * tc * esz);

		if (g->failed)
			return -EINVAL;
		for (uint64_t u = r.start; u < r.start + r.count; u++) {
			uint64_t b = u / (nr * nc), r0 = (u / nc % nr) * tr, c0 = u % nc * tc;
			uint64_t rows = kg_min64(m - r0, tr), cols = kg_min64(n - c0, tc);

			kg_dma(g, c, SPYRE_ISA_OP_LOAD, a, sx, (b * m + r0) * n * esz + c0 * esz, rows, cols * esz, n * esz);
			kg_op(g, c, SPYRE_ISA_OP_TRANSPOSE, dt, dt, 0, t, a, 0, rows, cols);
			kg_dma(g, c, SPYRE_ISA_OP_STORE, t, sy, (b * n + c0) * m * esz + r0 * esz, cols, rows * esz, m * esz);
		}
	}
	return kg_ok(g);
}

static int permute_dense(struct kgen *g, int sx, int sy, uint64_t batch, uint64_t m, uint64_t n, uint32_t dt)
{
	uint64_t esz = SPYRE_DT_SIZE(dt), S = SPYRE_STICK_BYTES / esz, mn = m * n, total = batch * mn;
	uint64_t nst = kg_cdiv(total, S), spst = g->sp_bytes / SPYRE_STICK_BYTES;
	uint64_t mst = kg_cdiv(mn, S);

	if (n > COLS_MAX)
		return kg_fail(g, "k = 1 with n = %llu: a transposed matrix is at most %u columns wide unless m and "
			       "n are whole sticks", (unsigned long long)n, COLS_MAX);
	/* input and output runs: each at most a chunk plus two matrices and two sticks */
	if (spst < 4 * mst + 10)
		return kg_fail(g, "k = 1: a %llu x %llu matrix needs %llu bytes of scratchpad, %u available (m and "
			       "n of whole sticks take any size)", (unsigned long long)m, (unsigned long long)n,
			       (unsigned long long)((4 * mst + 10) * SPYRE_STICK_BYTES), g->sp_bytes);
	uint64_t ch = (spst - 4 * mst - 8) / 2;	/* output sticks per chunk */

	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(nst, g->cores, c, 1);

		if (!r.count)
			continue;
		kg_sp_reset(g, c);
		uint64_t run = kg_min64(r.count, ch) + 2 * mst + 4;
		uint32_t in = kg_sp_alloc(g, c, run * SPYRE_STICK_BYTES), out = kg_sp_alloc(g, c, run * SPYRE_STICK_BYTES);

		if (g->failed)
			return -EINVAL;
		for (uint64_t s0 = r.start; s0 < r.start + r.count;) {
			uint64_t s1 = kg_min64(s0 + ch, r.start + r.count);
			uint64_t e0 = s0 * S, e1 = kg_min64(s1 * S, total), bl = e0 / mn, bh = (e1 - 1) / mn;
			uint64_t ob0 = bl * mn / S, ob1 = kg_cdiv((bh + 1) * mn, S);

			/* the batches' input: the same sticks as their output */
			kg_dma(g, c, SPYRE_ISA_OP_LOAD, in, sx, ob0 * SPYRE_STICK_BYTES, 1, (ob1 - ob0) * SPYRE_STICK_BYTES, 0);
			/*
			 * Y's last stick, when the tensor ends inside it: what follows is not
			 * Y's (a view's storage goes on), so it is read first and stored back
			 * as it was around the transposed elements.
			 */
			if (s1 == nst && total % S)
				kg_dma(g, c, SPYRE_ISA_OP_LOAD, out + (uint32_t)((nst - 1 - ob0) * SPYRE_STICK_BYTES), sy,
				       (nst - 1) * SPYRE_STICK_BYTES, 1, SPYRE_STICK_BYTES, 0);
			for (uint64_t b = bl; b <= bh; b++) {
				uint64_t st = b * mn / S - ob0, off = b * mn % S;

				op_imm(g, c, SPYRE_ISA_OP_TRANSPOSE, dt, dt, SPYRE_IF_DENSE, out + (uint32_t)(st * SPYRE_STICK_BYTES),
				       in + (uint32_t)(st * SPYRE_STICK_BYTES), 0, m, n, 0, 0, 0, (uint32_t)off,
				       (uint32_t)off);
			}
			kg_dma(g, c, SPYRE_ISA_OP_STORE, out + (uint32_t)((s0 - ob0) * SPYRE_STICK_BYTES), sy,
			       s0 * SPYRE_STICK_BYTES, 1, (s1 - s0) * SPYRE_STICK_BYTES, 0);
			s0 = s1;
		}
	}
	return kg_ok(g);
}

int kg_gen_permute(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, esz = SPYRE_DT_SIZE(dt);
	uint64_t batch = d->batch ? d->batch : 1, m = d->m, n = d->n, k = d->k, rb = k * esz, total;
	int sx, sy;

	if (!m || !n || !k)
		return kg_fail(g, "m, n and k must be non-zero, got %llux%llux%llu", (unsigned long long)m,
			       (unsigned long long)n, (unsigned long long)k);
	if (k != 1 && rb % SPYRE_STICK_BYTES)
		return kg_fail(g, "k = %llu: k * element size (%llu bytes) must be a multiple of 128, or k 1",
			       (unsigned long long)k, (unsigned long long)rb);
	if (m > UINT32_MAX / 2 || n > UINT32_MAX / 2 || k > UINT32_MAX / 2 || batch * m > (UINT64_MAX >> 24) / n ||
	    batch * m * n > (UINT64_MAX >> 24) / rb || m * rb > UINT32_MAX || n * rb > UINT32_MAX)
		return kg_fail(g, "%u x %llu x %llu x %llu is too large", d->batch, (unsigned long long)m,
			       (unsigned long long)n, (unsigned long long)k);
	total = batch * m * n * rb;
	sx = kg_slot(g, "x", dt, 1, batch * m * n * k, kg_rup(total, SPYRE_STICK_BYTES), SPYRE_SYM_IN);
	/* Y is read too: the dense plan keeps what follows the tensor in its last stick */
	sy = kg_slot(g, "y", dt, 1, batch * m * n * k, kg_rup(total, SPYRE_STICK_BYTES), SPYRE_SYM_IN | SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	if (k != 1 || m == 1 || n == 1) {
		/* m or n 1 with k 1: the relayout is a copy, rows of one element become one row of them */
		if (k == 1 && total % SPYRE_STICK_BYTES == 0)
			return permute_rows(g, sx, sy, 1, 1, total / SPYRE_STICK_BYTES, SPYRE_STICK_BYTES);
		if (k != 1)
			return permute_rows(g, sx, sy, batch, m, n, rb);
	}
	if (m * esz % SPYRE_STICK_BYTES == 0 && n * esz % SPYRE_STICK_BYTES == 0)
		return permute_tiles(g, sx, sy, batch, m, n, dt);
	return permute_dense(g, sx, sy, batch, m, n, dt);
}
