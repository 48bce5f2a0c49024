// SPDX-License-Identifier: MIT
/*
 * EMBEDDING (a gather of table rows by token id, ids as launch scalars),
 * ARGMAX (per row, the vocabulary split across cores and the partial
 * results combined on chip), IADD (an int32 counter step) and TRANSPOSE (a relayout between row blocks of
 * the cores, through device memory or over the ring). docs/kernels.md
 * describes the plans.
 */
#include <errno.h>
#include <stdio.h>

#include "common.h"
#include "kern.h"

#define F32 SPYRE_DT_FP32
#define I32 SPYRE_DT_INT32
#define COLS_MAX 0xffffu
#define STICK SPYRE_STICK_BYTES

/* EMBEDDING: the argument block holds the 2 slot addresses, then one scalar per token */
#define EMB_MAX_TOKENS (SPYRE_LAUNCH_MAX_ARGS - 2)

/* any tensor op with explicit row strides (sticks) */
static void op_ld(struct kgen *g, uint32_t c, unsigned opc, unsigned dt, unsigned dt2, unsigned flags, uint32_t d,
		  uint32_t a, uint32_t b, uint64_t rows, uint64_t cols, uint64_t ldd, uint64_t lda, uint64_t ldb)
{
	spyre_pb_op(g->pb, c, &(struct spyre_pb_op){ .op = opc, .dt = dt, .dt2 = dt2, .flags = flags, .d = d,
						     .a = a, .b = b, .rows = (uint32_t)rows, .cols = (uint32_t)cols,
						     .ldd = (uint32_t)ldd, .lda = (uint32_t)lda, .ldb = (uint32_t)ldb });
}

static void ring(struct kgen *g, uint32_t c, unsigned opc, uint32_t sp, uint32_t peer, uint32_t tag, uint64_t bytes)
{
	spyre_pb_ring(g->pb, c, opc, sp, peer, tag, (uint32_t)bytes);
}

static int check_shape(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;

	if (!d->m || !d->n)
		return kg_fail(g, "m (rows) and n (columns) must be non-zero, got %llux%llu",
			       (unsigned long long)d->m, (unsigned long long)d->n);
	if (kg_pitch(d->n, d->dtype) > UINT32_MAX || kg_pitch(d->m, d->dtype) > UINT32_MAX)
		return kg_fail(g, "%llux%llu: a row is too wide", (unsigned long long)d->m, (unsigned long long)d->n);
	return 0;
}

/* ---- EMBEDDING -------------------------------------------------------------- */

static int emb_check(const struct spyre_kdesc *d, char *why, size_t len)
{
	if (d->dtype != SPYRE_DT_FP32 && d->dtype != SPYRE_DT_FP16 && d->dtype != SPYRE_DT_BF16 &&
	    d->dtype != SPYRE_DT_DL16)
		return snprintf(why, len, "dtype %u is not fp32, fp16, bf16 or dl16", d->dtype), -1;
	if (!d->m || !d->n || !d->k)
		return snprintf(why, len, "m (tokens), n (vocabulary) and k (hidden) must be non-zero, got "
				"m %llu n %llu k %llu", (unsigned long long)d->m, (unsigned long long)d->n,
				(unsigned long long)d->k), -1;
	if (d->m > EMB_MAX_TOKENS && !(d->flags & SPYRE_KF_INDEXED))
		return snprintf(why, len, "m = %llu tokens: at most %u per launch (one scalar each in the "
				"argument block)", (unsigned long long)d->m, EMB_MAX_TOKENS), -1;
	if (kg_pitch(d->k, d->dtype) > UINT32_MAX || d->n > (UINT64_MAX / 4) / kg_pitch(d->k, d->dtype))
		return snprintf(why, len, "a table of %llu x %llu is too large", (unsigned long long)d->n,
				(unsigned long long)d->k), -1;
	return 0;
}

SPYRE_EXPORT int spyre_kernel_embedding_scalars(const struct spyre_kdesc *desc, const int32_t *tokens,
					       uint64_t *scalars)
{
	char why[160];

	if (!desc || !tokens || !scalars || desc->size < sizeof(*desc))
		return spyre_error(-EINVAL, "spyre_kernel_embedding_scalars: NULL argument or desc->size not set");
	if (desc->op != SPYRE_KOP_EMBEDDING)
		return spyre_error(-EINVAL, "spyre_kernel_embedding_scalars: op %u is not SPYRE_KOP_EMBEDDING",
				   desc->op);
	if (emb_check(desc, why, sizeof(why)))
		return spyre_error(-EINVAL, "spyre_kernel_embedding_scalars: %s", why);
	if (desc->flags & SPYRE_KF_INDEXED)
		return spyre_error(-EINVAL, "spyre_kernel_embedding_scalars: an indexed embedding (SPYRE_KF_INDEXED) "
				   "reads its ids from a slot, it has no scalars");
	for (uint64_t i = 0; i < desc->m; i++) {
		if (tokens[i] < 0 || (uint64_t)tokens[i] >= desc->n)
			return spyre_error(-EINVAL, "spyre_kernel_embedding_scalars: token %llu is id %d, outside "
					   "the vocabulary [0, %llu)", (unsigned long long)i, tokens[i],
					   (unsigned long long)desc->n);
		scalars[i] = (uint64_t)tokens[i] * kg_pitch(desc->k, desc->dtype);
	}
	return 0;
}

int kg_gen_embedding(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, esz = SPYRE_DT_SIZE(dt);
	uint64_t m = d->m, k = d->k, pitch = kg_pitch(k, dt), gran = STICK / esz;
	float scale = d->scale == 0.0f ? 1.0f : d->scale;
	char why[160];
	int st, sy;

	if (emb_check(d, why, sizeof(why)))
		return kg_fail(g, "%s", why);
	bool indexed = d->flags & SPYRE_KF_INDEXED;
	uint64_t ip = kg_pitch(m, SPYRE_DT_INT32);
	int si = -1;

	if (indexed && (d->n > UINT32_MAX || pitch > UINT32_MAX || m > 65535))
		return kg_fail(g, "indexed: a table of %llu rows of %llu bytes, or m %llu, too large for LDX",
			       (unsigned long long)d->n, (unsigned long long)pitch, (unsigned long long)m);
	st = kg_slot(g, "table", dt, d->n, k, pitch, SPYRE_SYM_IN);
	if (indexed)
		si = kg_slot(g, "ids", SPYRE_DT_INT32, 1, m, ip, SPYRE_SYM_IN);
	sy = kg_slot(g, "y", dt, m, k, pitch, SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	if (!indexed)
		spyre_pb_set_scalars(g->pb, (uint32_t)m);

	/* columns per tile: the whole row if it fits (and SCALE's 65535 columns when scaling) */
	uint64_t cw = k, cmax = scale != 1.0f ? COLS_MAX / gran * gran : UINT64_MAX;

	if (cw > cmax)
		cw = cmax;
	/* indexed: the ids row comes first in every core's scratchpad */
	uint64_t avail = g->sp_bytes - (indexed ? ip : 0);

	if (indexed && ip + STICK > g->sp_bytes)
		return kg_fail(g, "indexed: %llu ids do not fit a scratchpad of %u bytes", (unsigned long long)m,
			       g->sp_bytes);
	if (kg_pitch(cw, dt) > avail)
		cw = avail / STICK * gran;
	uint64_t tr = avail / kg_pitch(cw, dt);

	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(m, g->cores, c, 1);
		uint64_t t_rows = kg_min64(r.count, tr);

		if (!r.count)
			continue;
		kg_sp_reset(g, c);
		uint32_t ib = indexed ? kg_sp_alloc(g, c, ip) : 0;
		uint32_t xb = kg_sp_alloc(g, c, t_rows * kg_pitch(cw, dt));

		if (g->failed)
			return -EINVAL;
		if (indexed)
			kg_dma(g, c, SPYRE_ISA_OP_LOAD, ib, si, 0, 1, ip, ip);
		for (uint64_t r0 = 0; r0 < r.count; r0 += t_rows) {
			uint64_t rows = kg_min64(r.count - r0, t_rows);

			for (uint64_t j0 = 0; j0 < k; j0 += cw) {
				uint64_t w = kg_min64(k - j0, cw), tp = kg_pitch(w, dt);

				/*
				 * row i: r1 = scalar i (its byte offset in the table), or indexed
				 * ids[i] * pitch (bounded by the vocabulary), LOAD at table + r1
				 */
				for (uint64_t i = 0; i < rows; i++) {
					if (indexed)
						spyre_pb_ldx(g->pb, c, 1, ib + (uint32_t)((r.start + r0 + i) * 4), 0,
							     (uint32_t)d->n, (uint32_t)pitch, 0);
					else
						spyre_pb_ctl(g->pb, c, SPYRE_ISA_OP_LDARG, 1, r.start + r0 + i, 0);
					spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
						.sp = xb + (uint32_t)(i * tp),
						.mem = { .sym = st, .off = j0 * esz, .reg = SPYRE_PB_REG(1) },
						.rows = 1, .row_bytes = (uint32_t)tp });
				}
				if (scale != 1.0f)
					spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
						.op = SPYRE_ISA_OP_SCALE, .dt = dt, .dt2 = dt, .d = xb, .a = xb,
						.rows = (uint32_t)rows, .cols = (uint32_t)w, .scale = scale });
				kg_dma(g, c, SPYRE_ISA_OP_STORE, xb, sy, (r.start + r0) * pitch + j0 * esz, rows, tp, pitch);
			}
		}
	}
	return kg_ok(g);
}

/* ---- ARGMAX ----------------------------------------------------------------- */

struct am_plan {
	uint32_t dt;
	uint64_t cw, tr;
	uint64_t rows_buf;	/* rows of the (value, index) buffers: max(active cores, 2) */
};

static uint64_t am_need(const struct am_plan *p, uint64_t tr, uint64_t cw)
{
	uint64_t b = tr * kg_pitch(cw, p->dt), v = kg_pitch(tr, I32);

	if (p->dt != F32)
		b += tr * kg_pitch(cw, F32);
	/* values and indices [rows_buf x tr], their transposes [tr x rows_buf], offset vector, result */
	return b + 2 * p->rows_buf * v + 2 * tr * kg_pitch(p->rows_buf, I32) + 2 * v;
}

int kg_gen_argmax(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, esz = SPYRE_DT_SIZE(dt), act = 0;
	uint64_t m = d->m, n = d->n, pitch = kg_pitch(n, dt), gran = STICK / esz, cmax = COLS_MAX / gran * gran;
	struct am_plan p = { .dt = dt };
	int sx, sy;

	if (check_shape(g))
		return -EINVAL;
	if (n > INT32_MAX)
		return kg_fail(g, "n = %llu columns: indices are int32", (unsigned long long)n);
	sx = kg_slot(g, "x", dt, m, n, pitch, SPYRE_SYM_IN);
	/* Y: one int32 row of m indices */
	sy = kg_slot(g, "y", I32, 1, m, kg_pitch(m, I32), SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	for (uint32_t c = 0; c < g->cores; c++)
		act += kg_split(n, g->cores, c, gran).count > 0;
	p.rows_buf = act < 2 ? 2 : act;

	/*
	 * Plan: a row tile of 32 rows at least (so every row tile but the last
	 * starts a whole stick into Y's int32 row), the widest column tile that
	 * allows it, then as many rows as fit.
	 */
	uint64_t want = kg_min64(m, 32), widest = kg_min64(kg_split(n, g->cores, 0, gran).count, cmax), lo, hi;

	if (am_need(&p, want, widest) <= g->sp_bytes) {
		p.cw = widest;
	} else {
		for (lo = 0, hi = widest / gran; lo < hi;) {
			uint64_t mid = lo + (hi - lo + 1) / 2;

			if (am_need(&p, want, mid * gran) <= g->sp_bytes)
				lo = mid;
			else
				hi = mid - 1;
		}
		p.cw = lo * gran;
	}
	if (!p.cw)
		return kg_fail(g, "%llu rows of one stick of columns do not fit the %u-byte scratchpad",
			       (unsigned long long)want, g->sp_bytes);
	for (lo = want, hi = kg_min64(m, 32768); lo < hi;) {
		uint64_t mid = lo + (hi - lo + 1) / 2;

		if (am_need(&p, mid, p.cw) <= g->sp_bytes)
			lo = mid;
		else
			hi = mid - 1;
	}
	p.tr = lo < m ? lo / 32 * 32 : lo;

	for (uint32_t c = 0; c < act; c++) {
		struct kg_range cr = kg_split(n, g->cores, c, gran);
		uint64_t vs = kg_pitch(p.tr, I32), bufrows = c ? 2 : p.rows_buf;

		kg_sp_reset(g, c);
		uint32_t xb = kg_sp_alloc(g, c, p.tr * kg_pitch(p.cw, dt));
		uint32_t x32 = dt == F32 ? xb : kg_sp_alloc(g, c, p.tr * kg_pitch(p.cw, F32));
		uint32_t val = kg_sp_alloc(g, c, bufrows * vs), idx = kg_sp_alloc(g, c, bufrows * vs);
		uint32_t valt = kg_sp_alloc(g, c, p.tr * STICK), idxt = kg_sp_alloc(g, c, p.tr * STICK);
		uint32_t off = kg_sp_alloc(g, c, vs), res = kg_sp_alloc(g, c, vs);

		if (g->failed)
			return -EINVAL;
		for (uint64_t r0 = 0; r0 < m; r0 += p.tr) {
			uint64_t rows = kg_min64(m - r0, p.tr), rv = kg_pitch(rows, I32);

			for (uint64_t j0 = cr.start; j0 < cr.start + cr.count; j0 += p.cw) {
				uint64_t w = kg_min64(cr.start + cr.count - j0, p.cw);
				uint32_t row = j0 == cr.start ? 0 : (uint32_t)vs;

				kg_dma(g, c, SPYRE_ISA_OP_LOAD, xb, sx, r0 * pitch + j0 * esz, rows, kg_pitch(w, dt), pitch);
				if (dt != F32)
					kg_op(g, c, SPYRE_ISA_OP_CAST, dt, F32, 0, x32, xb, 0, rows, w);
				/*
				 * The tile's argmax (lowest on ties, never NaN), and its value:
				 * ARGMAX with INDEX selects from b = the fp32 tile read as int32,
				 * which gives the bits of the maximum. (REDMAX would propagate a
				 * NaN and hide the real maximum of the tile.)
				 */
				kg_op(g, c, SPYRE_ISA_OP_ARGMAX, F32, I32, 0, idx + row, x32, 0, rows, w);
				kg_op(g, c, SPYRE_ISA_OP_ARGMAX, F32, I32, SPYRE_IF_INDEX, val + row, x32, x32, rows, w);
				if (j0) {
					spyre_pb_op(g->pb, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = I32,
						.dt2 = I32, .d = off, .rows = 1, .cols = (uint32_t)rows,
						.imm = (uint32_t)j0 });
					kg_op(g, c, SPYRE_ISA_OP_ADD, I32, I32, 0, idx + row, idx + row, off, 1, rows);
				}
				if (!row)
					continue;
				/* merge with the running result: [2 x rows] -> [rows x 2], the earlier tile wins ties */
				op_ld(g, c, SPYRE_ISA_OP_TRANSPOSE, F32, F32, 0, valt, val, 0, 2, rows, 1, vs / STICK, 0);
				op_ld(g, c, SPYRE_ISA_OP_TRANSPOSE, I32, I32, 0, idxt, idx, 0, 2, rows, 1, vs / STICK, 0);
				op_ld(g, c, SPYRE_ISA_OP_ARGMAX, F32, I32, SPYRE_IF_INDEX, idx, valt, idxt, rows, 2, 0, 1, 1);
				op_ld(g, c, SPYRE_ISA_OP_ARGMAX, F32, I32, SPYRE_IF_INDEX, val, valt, valt, rows, 2, 0, 1, 1);
			}
			if (act == 1) {
				kg_dma(g, c, SPYRE_ISA_OP_STORE, idx, sy, r0 * 4, 1, rv, 0);
				continue;
			}
			if (c) {
				ring(g, c, SPYRE_ISA_OP_SEND, val, 0, 1, rv);
				ring(g, c, SPYRE_ISA_OP_SEND, idx, 0, 2, rv);
				continue;
			}
			/* core 0: row q of the buffers is core q's (value, index) per row; lowest core wins ties */
			for (uint32_t q = 1; q < act; q++) {
				ring(g, c, SPYRE_ISA_OP_RECV, val + q * (uint32_t)vs, q, 1, rv);
				ring(g, c, SPYRE_ISA_OP_RECV, idx + q * (uint32_t)vs, q, 2, rv);
			}
			op_ld(g, c, SPYRE_ISA_OP_TRANSPOSE, F32, F32, 0, valt, val, 0, act, rows, 1, vs / STICK, 0);
			op_ld(g, c, SPYRE_ISA_OP_TRANSPOSE, I32, I32, 0, idxt, idx, 0, act, rows, 1, vs / STICK, 0);
			op_ld(g, c, SPYRE_ISA_OP_ARGMAX, F32, I32, SPYRE_IF_INDEX, res, valt, idxt, rows, act, 0, 1, 1);
			kg_dma(g, c, SPYRE_ISA_OP_STORE, res, sy, r0 * 4, 1, rv, 0);
		}
	}
	return kg_ok(g);
}

/* ---- IADD ------------------------------------------------------------------- */

/* Rows split across cores; per tile a LOAD, the ADD of a FILLed row (BCAST_ROW), a STORE. */
int kg_gen_iadd(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint64_t m = d->m, n = d->n, pitch = kg_pitch(n, I32), tr;
	int sx, sy;

	if (check_shape(g))
		return -EINVAL;
	if (n > COLS_MAX || 2 * pitch > g->sp_bytes)
		return kg_fail(g, "n = %llu columns: at most %u, and two rows must fit the scratchpad",
			       (unsigned long long)n, COLS_MAX);
	sx = kg_slot(g, "x", I32, m, n, pitch, SPYRE_SYM_IN);
	sy = kg_slot(g, "y", I32, m, n, pitch, SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	tr = g->sp_bytes / pitch - 1;
	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(m, g->cores, c, 1);
		uint32_t k, x;

		if (!r.count)
			continue;
		kg_sp_reset(g, c);
		k = kg_sp_alloc(g, c, pitch);
		x = kg_sp_alloc(g, c, kg_min64(r.count, tr) * pitch);
		if (g->failed)
			return -EINVAL;
		spyre_pb_op(g->pb, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = I32, .dt2 = I32, .d = k,
							     .rows = 1, .cols = (uint32_t)n,
							     .imm = (uint32_t)(int32_t)d->alpha });
		for (uint64_t r0 = 0; r0 < r.count; r0 += tr) {
			uint64_t rows = kg_min64(r.count - r0, tr), off = (r.start + r0) * pitch;

			kg_dma(g, c, SPYRE_ISA_OP_LOAD, x, sx, off, rows, pitch, pitch);
			kg_op(g, c, SPYRE_ISA_OP_ADD, I32, I32, SPYRE_IF_BCAST_ROW, x, x, k, rows, n);
			kg_dma(g, c, SPYRE_ISA_OP_STORE, x, sy, off, rows, pitch, pitch);
		}
	}
	return kg_ok(g);
}

/* ---- TRANSPOSE -------------------------------------------------------------- */

struct tp {
	uint32_t dt, esz, cores;
	uint64_t m, n, px, py, gran;
	int sx, sy, sw;
};

/* core c's X rows (= Y columns) and X columns (= Y rows) */
static struct kg_range tp_rows(const struct tp *t, uint32_t c)
{
	return kg_split(t->m, t->cores, c, t->gran);
}

static struct kg_range tp_cols(const struct tp *t, uint32_t c)
{
	return kg_split(t->n, t->cores, c, t->gran);
}

/*
 * Chunks of a piece X[rows, cols]: rr rows x cc columns, both whole blocks
 * or multiples of a stick's elements (both ends of a chunk on a stick in X
 * and in Y), such that two buffers fit: one for an rr x cc chunk (or its
 * cc x rr transpose, whichever is larger) and one for the transpose.
 */
static int tp_chunks(struct kgen *g, const struct tp *t, uint64_t maxr, uint64_t maxc, uint64_t *rr, uint64_t *cc)
{
	uint64_t cap = COLS_MAX / t->gran * t->gran, s;

#define TP_NEED(r, c) (((r) * kg_pitch((c), t->dt) > (c) * kg_pitch((r), t->dt) ? \
			(r) * kg_pitch((c), t->dt) : (c) * kg_pitch((r), t->dt)) + \
		       (c) * kg_pitch((r), t->dt))
	if (maxc <= COLS_MAX && maxr <= COLS_MAX && TP_NEED(maxr, maxc) <= g->sp_bytes) {
		*rr = maxr;
		*cc = maxc;
		return 0;
	}
	for (uint64_t lo = 0, hi = cap / t->gran;;) {
		if (lo >= hi) {
			s = lo * t->gran;
			break;
		}
		uint64_t mid = lo + (hi - lo + 1) / 2, r = kg_min64(mid * t->gran, maxr), c = kg_min64(mid * t->gran, maxc);

		if (TP_NEED(r, c) <= g->sp_bytes)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (s) {
		*rr = kg_min64(s, maxr);
		*cc = kg_min64(s, maxc);
		return 0;
	}
#undef TP_NEED
	return kg_fail(g, "a stick x stick block does not fit the %u-byte scratchpad", g->sp_bytes);
}

/* VIA_MEMORY: transposed pieces -> work (in Y's layout), barrier, each core copies its Y rows */
static int tp_via_memory(struct kgen *g, const struct tp *t)
{
	uint64_t maxr = tp_rows(t, 0).count, rr, cc;

	if (tp_chunks(g, t, maxr, t->n, &rr, &cc))
		return -EINVAL;
	for (uint32_t c = 0; c < t->cores; c++) {
		struct kg_range R = tp_rows(t, c), C = tp_cols(t, c);

		if (!R.count && !C.count)
			continue;
		kg_sp_reset(g, c);
		uint32_t xt = kg_sp_alloc(g, c, rr * kg_pitch(cc, t->dt)), tt = kg_sp_alloc(g, c, cc * kg_pitch(rr, t->dt));

		if (g->failed)
			return -EINVAL;
		for (uint64_t i0 = R.start; i0 < R.start + R.count; i0 += rr)
			for (uint64_t j0 = 0; j0 < t->n; j0 += cc) {
				uint64_t h = kg_min64(R.start + R.count - i0, rr), w = kg_min64(t->n - j0, cc);

				kg_dma(g, c, SPYRE_ISA_OP_LOAD, xt, t->sx, i0 * t->px + j0 * t->esz, h, kg_pitch(w, t->dt),
				    t->px);
				kg_op(g, c, SPYRE_ISA_OP_TRANSPOSE, t->dt, t->dt, 0, tt, xt, 0, h, w);
				kg_dma(g, c, SPYRE_ISA_OP_STORE, tt, t->sw, j0 * t->py + i0 * t->esz, w, kg_pitch(h, t->dt),
				    t->py);
			}
		spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_BARRIER, 0, 0, 0, 0);
		/* Y rows C are contiguous in work and in Y: copy them a scratchpad at a time */
		uint64_t total = C.count * t->py, chunk = (uint64_t)g->sp_bytes / STICK * STICK;

		for (uint64_t o = 0; o < total; o += chunk) {
			uint64_t b = kg_min64(total - o, chunk);

			kg_dma(g, c, SPYRE_ISA_OP_LOAD, 0, t->sw, C.start * t->py + o, 1, b, 0);
			kg_dma(g, c, SPYRE_ISA_OP_STORE, 0, t->sy, C.start * t->py + o, 1, b, 0);
		}
	}
	return kg_ok(g);
}

/* RING, whole blocks: the largest piece core c sends (X[R_c, C_b]^T) and receives (X[R_a, C_c]^T) */
static void tp_piece_bytes(const struct tp *t, uint32_t c, uint64_t *snd, uint64_t *rcv)
{
	struct kg_range R = tp_rows(t, c), C = tp_cols(t, c);

	*snd = *rcv = 0;
	for (uint32_t b = 0; b < t->cores; b++) {
		uint64_t sb = tp_cols(t, b).count * kg_pitch(R.count, t->dt);
		uint64_t rb = C.count * kg_pitch(tp_rows(t, b).count, t->dt);

		if (b == c)
			continue;
		*snd = sb > *snd ? sb : *snd;
		*rcv = rb > *rcv ? rb : *rcv;
	}
}

/* RING, whole blocks: can every core hold its X rows, its Y rows and one piece each way? */
static bool tp_ring_fits(const struct kgen *g, const struct tp *t)
{
	for (uint32_t c = 0; c < t->cores; c++) {
		struct kg_range R = tp_rows(t, c), C = tp_cols(t, c);
		uint64_t snd, rcv;

		if (R.count > COLS_MAX || C.count > COLS_MAX)
			return false;
		tp_piece_bytes(t, c, &snd, &rcv);
		if (R.count * t->px + C.count * t->py + snd + rcv > g->sp_bytes)
			return false;
	}
	return true;
}

static int tp_ring_blocks(struct kgen *g, const struct tp *t)
{
	uint32_t C = t->cores;

	for (uint32_t c = 0; c < C; c++) {
		struct kg_range R = tp_rows(t, c), Cc = tp_cols(t, c);
		uint64_t snd, rcv;

		if (!R.count && !Cc.count)
			continue;
		tp_piece_bytes(t, c, &snd, &rcv);
		kg_sp_reset(g, c);
		uint32_t xb = R.count ? kg_sp_alloc(g, c, R.count * t->px) : 0;
		uint32_t yb = Cc.count ? kg_sp_alloc(g, c, Cc.count * t->py) : 0;
		uint32_t sb = snd ? kg_sp_alloc(g, c, snd) : 0, rb = rcv ? kg_sp_alloc(g, c, rcv) : 0;

		if (g->failed)
			return -EINVAL;
		if (R.count)
			kg_dma(g, c, SPYRE_ISA_OP_LOAD, xb, t->sx, R.start * t->px, R.count, t->px, t->px);
		for (uint32_t s = 0; s < C; s++) {
			uint32_t b = (c + s) % C, a = (c + C - s) % C;
			struct kg_range Cb = tp_cols(t, b), Ra = tp_rows(t, a);

			if (!s) {
				if (R.count && Cc.count)
					op_ld(g, c, SPYRE_ISA_OP_TRANSPOSE, t->dt, t->dt, 0, yb + (uint32_t)(R.start * t->esz),
					      xb + (uint32_t)(Cc.start * t->esz), 0, R.count, Cc.count, t->py / STICK,
					      t->px / STICK, 0);
				continue;
			}
			/* X[R, Cb]^T to core b; X[Ra, Cc]^T from core a into its place in Y's rows */
			if (R.count && Cb.count) {
				op_ld(g, c, SPYRE_ISA_OP_TRANSPOSE, t->dt, t->dt, 0, sb, xb + (uint32_t)(Cb.start * t->esz),
				      0, R.count, Cb.count, kg_sticks(R.count, t->dt), t->px / STICK, 0);
				ring(g, c, SPYRE_ISA_OP_SEND, sb, b, 3, Cb.count * kg_pitch(R.count, t->dt));
			}
			if (Ra.count && Cc.count) {
				ring(g, c, SPYRE_ISA_OP_RECV, rb, a, 3, Cc.count * kg_pitch(Ra.count, t->dt));
				op_ld(g, c, SPYRE_ISA_OP_CAST, t->dt, t->dt, 0, yb + (uint32_t)(Ra.start * t->esz), rb, 0,
				      Cc.count, Ra.count, t->py / STICK, kg_sticks(Ra.count, t->dt), 0);
			}
		}
		if (Cc.count)
			kg_dma(g, c, SPYRE_ISA_OP_STORE, yb, t->sy, Cc.start * t->py, Cc.count, t->py, t->py);
	}
	return kg_ok(g);
}

/*
 * RING, pieces too large for whole blocks: in step s core c streams X[R_c,
 * C_b]^T (b = c + s) in chunks to core b, which stores each chunk in Y;
 * sends and receives alternate chunk by chunk and a barrier closes every
 * step, so an inbox never holds more than the chunks of one sender.
 */
static int tp_ring_chunks(struct kgen *g, const struct tp *t)
{
	uint32_t C = t->cores;
	uint64_t rr, cc;

	/* the received chunk goes where the loaded one was (free once transposed): one buffer of each shape */
	if (tp_chunks(g, t, tp_rows(t, 0).count, tp_cols(t, 0).count, &rr, &cc))
		return -EINVAL;
	for (uint32_t c = 0; c < C; c++) {
		struct kg_range R = tp_rows(t, c), Cc = tp_cols(t, c);

		if (!R.count && !Cc.count)
			continue;
		kg_sp_reset(g, c);
		uint64_t tb = cc * kg_pitch(rr, t->dt);
		uint32_t xt = kg_sp_alloc(g, c, rr * kg_pitch(cc, t->dt) > tb ? rr * kg_pitch(cc, t->dt) : tb);
		uint32_t sb = kg_sp_alloc(g, c, tb), rb = xt;

		if (g->failed)
			return -EINVAL;
		for (uint32_t s = 0; s < C; s++) {
			uint32_t b = (c + s) % C, a = (c + C - s) % C;
			struct kg_range Cb = tp_cols(t, b), Ra = tp_rows(t, a);
			uint64_t nsr = (R.count + rr - 1) / rr, nsc = (Cb.count + cc - 1) / cc;
			uint64_t nrr = (Ra.count + rr - 1) / rr, nrc = (Cc.count + cc - 1) / cc;
			uint64_t ns = nsr * nsc, nr = s ? nrr * nrc : 0;

			for (uint64_t k = 0; k < ns || k < nr; k++) {
				if (k < ns) {
					uint64_t i0 = R.start + k / nsc * rr, j0 = Cb.start + k % nsc * cc;
					uint64_t h = kg_min64(R.start + R.count - i0, rr), w = kg_min64(Cb.start + Cb.count - j0, cc);

					kg_dma(g, c, SPYRE_ISA_OP_LOAD, xt, t->sx, i0 * t->px + j0 * t->esz, h,
					    kg_pitch(w, t->dt), t->px);
					kg_op(g, c, SPYRE_ISA_OP_TRANSPOSE, t->dt, t->dt, 0, sb, xt, 0, h, w);
					if (s)
						ring(g, c, SPYRE_ISA_OP_SEND, sb, b, 4, w * kg_pitch(h, t->dt));
					else
						kg_dma(g, c, SPYRE_ISA_OP_STORE, sb, t->sy, j0 * t->py + i0 * t->esz, w,
						    kg_pitch(h, t->dt), t->py);
				}
				if (k < nr) {
					uint64_t i0 = Ra.start + k / nrc * rr, j0 = Cc.start + k % nrc * cc;
					uint64_t h = kg_min64(Ra.start + Ra.count - i0, rr), w = kg_min64(Cc.start + Cc.count - j0, cc);

					ring(g, c, SPYRE_ISA_OP_RECV, rb, a, 4, w * kg_pitch(h, t->dt));
					kg_dma(g, c, SPYRE_ISA_OP_STORE, rb, t->sy, j0 * t->py + i0 * t->esz, w,
					    kg_pitch(h, t->dt), t->py);
				}
			}
			if (C > 1)
				spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_BARRIER, 0, 0, 0, 0);
		}
	}
	return kg_ok(g);
}

int kg_gen_transpose(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	struct tp t = { .dt = d->dtype, .esz = SPYRE_DT_SIZE(d->dtype), .cores = g->cores, .m = d->m, .n = d->n,
			.sw = -1 };

	if (check_shape(g))
		return -EINVAL;
	t.px = kg_pitch(t.n, t.dt);
	t.py = kg_pitch(t.m, t.dt);
	t.gran = STICK / t.esz;
	t.sx = kg_slot(g, "x", t.dt, t.m, t.n, t.px, SPYRE_SYM_IN);
	t.sy = kg_slot(g, "y", t.dt, t.n, t.m, t.py, SPYRE_SYM_OUT);
	if (g->strategy == SPYRE_KSTRAT_VIA_MEMORY)
		t.sw = kg_slot(g, "work", t.dt, t.n, t.m, t.py, SPYRE_SYM_IN | SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	if (g->strategy == SPYRE_KSTRAT_VIA_MEMORY)
		return tp_via_memory(g, &t);
	return tp_ring_fits(g, &t) ? tp_ring_blocks(g, &t) : tp_ring_chunks(g, &t);
}
