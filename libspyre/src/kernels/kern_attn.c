// SPDX-License-Identifier: MIT
/*
 * ROPE and ATTENTION kernels (docs/kernels.md, "## Rotary embedding and
 * attention").
 *
 * ROPE: Y = X cos + rotate_half(X) sin per head, fp32 inside, rounded
 * once. rotate_half: two SCALEs (-1, +1) of the fp32 copy's halves when
 * they start on sticks (head_dim a multiple of 64), else a matmul with a
 * constant signed permutation R. Tokens x heads are split over the cores;
 * the table rows come through an address register (scalar 0 = pos0 *
 * table pitch), so one program serves every position.
 *
 * ATTENTION: the work is cut into units (KV head g, query heads j0..j0+nj of
 * the group, query tokens t0..t0+nt): the unit's query rows (token, head)
 * form one matrix Qg [nt*nj x hd], the keys stream through the scratchpad
 * in tiles with an online softmax (running max m, sum l, accumulator acc,
 * all fp32). Prefill reads its keys and values from the K/V inputs (the
 * cache rows of pos0 = 0 are those rows) and writes the cache from the
 * tiles it loaded; the causal mask is built with FILLs. Decode writes the
 * new row, then loops (BNZ, count from a launch scalar) over the key chunks
 * below the position, interleaved over the cores of a KV head, each chunk
 * masked from constant tables at register offsets; the partial (m, l, acc)
 * are combined on chip over the ring.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kern.h"
#include "spyre_dtype.h"

#define STICK		SPYRE_STICK_BYTES
#define NEG_BIG		(-1.0e30f)	/* masked score: exp(NEG_BIG - max) is exactly 0 in fp32 */
#define F32_PER_STICK	(STICK / 4)

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
	bool indexed = d->flags & SPYRE_KF_INDEXED;

	if (m > max_pos && !indexed)
		return kg_fail(g, "%llu tokens do not fit a table of max_pos %u", (unsigned long long)m, max_pos);
	if (indexed && m > 65535)
		return kg_fail(g, "indexed: m %llu rows, at most 65535", (unsigned long long)m);
	if (hd > 0xffff || (uint64_t)heads * hd > 0xffffffffull)
		return kg_fail(g, "head_dim %u x %u heads too large", hd, heads);

	uint32_t sh = kg_sticks(hd, dt), sh32 = kg_sticks(hd, SPYRE_DT_FP32);
	uint64_t shd = (uint64_t)sh * STICK, shd32 = (uint64_t)sh32 * STICK, px = heads * shd;
	int sx = kg_slot(g, "x", dt, m, (uint64_t)heads * hd, px, SPYRE_SYM_IN);
	int sc = kg_slot(g, "cos", SPYRE_DT_FP32, max_pos, hd, shd32, SPYRE_SYM_IN);
	int ss = kg_slot(g, "sin", SPYRE_DT_FP32, max_pos, hd, shd32, SPYRE_SYM_IN);
	uint64_t ip = indexed ? kg_pitch(m, SPYRE_DT_INT32) : 0;
	int sp = indexed ? kg_slot(g, "pos", SPYRE_DT_INT32, 1, m, ip, SPYRE_SYM_IN) : -1;
	int sy = kg_slot(g, "y", dt, m, (uint64_t)heads * hd, px, SPYRE_SYM_OUT);

	if (g->failed)
		return -EINVAL;
	if (!indexed)
		spyre_pb_set_scalars(g->pb, 1);

	/*
	 * rotate_half: with hd/2 a multiple of 32 the halves of an fp32 row
	 * start on sticks and two SCALEs (-1, +1) of the fp32 copy swap them;
	 * otherwise a matmul with the constant R (hd x hd in the dtype).
	 */
	bool halves = hd % (2 * F32_PER_STICK) == 0;
	uint64_t rbytes = halves ? 0 : (uint64_t)hd * shd;
	int64_t c_r = halves ? 0 : rope_rmat(g, hd, dt);

	if (c_r < 0)
		return -EINVAL;

	/* tokens x heads over the cores: token blocks first, then head blocks */
	uint32_t tb = (uint32_t)kg_min64(m, g->cores), hb = (uint32_t)kg_min64(heads, g->cores / tb);
	bool f32 = dt == SPYRE_DT_FP32;
	/* per (token, head): X/Y, X fp32 (not for fp32), X R; per token: a cos and a sin row */
	uint64_t per_th = shd + shd32 * (f32 ? 1 : 2), per_t = 2 * shd32;

	for (uint32_t c = 0; c < tb * hb; c++) {
		struct kg_range tr = kg_split(m, tb, c / hb, 1), hr = kg_split(heads, hb, c % hb, 1);
		uint32_t rb = 0;
		uint64_t fr, nh, nt;

		if (!tr.count || !hr.count)
			continue;
		uint32_t pb_sp = 0;

		if (ip + rbytes + per_th + per_t > g->sp_bytes)
			return kg_fail(g, "rope: the %ux%u rotation matrix and one head of one token do not fit "
				       "a scratchpad of %u bytes", hd, hd, g->sp_bytes);
		kg_sp_reset(g, c);
		if (ip)		/* indexed: the positions row, first (the same offset after each reset) */
			pb_sp = kg_sp_alloc(g, c, ip);
		if (rbytes)
			rb = kg_sp_alloc(g, c, rbytes);
		fr = kg_sp_free(g, c);
		nh = hr.count;
		nt = fr / (nh * per_th + per_t);
		if (!nt) {
			nt = 1;
			nh = (fr - per_t) / per_th;	/* >= 1: checked above */
		}
		nt = kg_min64(nt, tr.count);
		if (indexed)
			kg_dma(g, c, SPYRE_ISA_OP_LOAD, pb_sp, sp, 0, 1, ip, ip);
		else
			spyre_pb_ctl(g->pb, c, SPYRE_ISA_OP_LDARG, 1, 0, 0);
		if (rbytes)
			spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
				.sp = rb, .mem = { .sym = SPYRE_PB_CONST, .off = (uint64_t)c_r },
				.row_bytes = (uint32_t)rbytes });
		for (uint64_t t = tr.start; t < tr.start + tr.count; t += nt) {
			uint32_t n_t = (uint32_t)kg_min64(nt, tr.start + tr.count - t);

			for (uint64_t h = hr.start; h < hr.start + hr.count; h += nh) {
				uint32_t n_h = (uint32_t)kg_min64(nh, hr.start + hr.count - h), rows = n_t * n_h;
				uint32_t xb, xf, xr, cb, sb;

				kg_sp_reset(g, c);
				if (ip)
					kg_sp_alloc(g, c, ip);		/* the positions, as above */
				if (rbytes)
					kg_sp_alloc(g, c, rbytes);	/* R, as above */
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
				if (indexed) {
					/* each token's table rows: r1 = pos[t + i] * pitch, bounded by max_pos */
					for (uint32_t i = 0; i < n_t; i++) {
						spyre_pb_ldx(g->pb, c, 1, pb_sp + (uint32_t)((t + i) * 4), 0, max_pos,
							     (uint32_t)shd32, 0);
						for (int v = 0; v < 2; v++)
							spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
								.sp = (v ? sb : cb) + i * (uint32_t)shd32,
								.mem = { .sym = v ? ss : sc, .reg = SPYRE_PB_REG(1) },
								.row_bytes = (uint32_t)shd32 });
					}
				} else {
					spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
						.sp = cb, .mem = { .sym = sc, .off = t * shd32, .reg = SPYRE_PB_REG(1) },
						.row_bytes = (uint32_t)(n_t * shd32) });
					spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
						.sp = sb, .mem = { .sym = ss, .off = t * shd32, .reg = SPYRE_PB_REG(1) },
						.row_bytes = (uint32_t)(n_t * shd32) });
				}
				/* X R first: it reads X in the dtype before X is widened in place (fp32) */
				if (!halves)
					spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
						.op = SPYRE_ISA_OP_MATMUL, .dt = dt, .dt2 = SPYRE_DT_FP32, .d = xr,
						.a = xb, .b = rb, .rows = rows, .cols = hd, .k = hd });
				if (!f32)
					spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
						.op = SPYRE_ISA_OP_CAST, .dt = dt, .dt2 = SPYRE_DT_FP32, .d = xf,
						.a = xb, .rows = rows, .cols = hd });
				if (halves) {
					uint32_t hb4 = hd / 2 * 4;	/* bytes of half an fp32 row: whole sticks */

					spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
						.op = SPYRE_ISA_OP_SCALE, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						.d = xr, .a = xf + hb4, .rows = rows, .cols = hd / 2, .ldd = sh32,
						.lda = sh32, .scale = -1.0f });
					spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
						.op = SPYRE_ISA_OP_SCALE, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						.d = xr + hb4, .a = xf, .rows = rows, .cols = hd / 2, .ldd = sh32,
						.lda = sh32, .scale = 1.0f });
				}
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

/*
 * Decode scalars: 0 = pos * cache pitch, 1 = (S - q) sticks, 2 = (v % 32)
 * sticks, 3 = q sticks (v = pos + 1 valid keys, q = v / 32, S = sticks of
 * a max_pos fp32 row), then 4 + e for e < 32: d_e = the number of valid
 * full key chunks of index >= e (the loop count of the part starting at
 * chunk e). See spyre_kernel_attention_scalars().
 */
#define DECODE_BASE_SCALARS	4
#define DECODE_SCALARS		(DECODE_BASE_SCALARS + SPYRE_MAX_CORES)

/* Registers of the decode program. */
enum { R_POS, R_TAB, R_PART, R_Q, R_CNT, R_KV, R_CTAB, R_CQ, R_ONE = 15 };

struct att {
	struct kgen *g;
	uint32_t dt, esz, hd, sh, sh32, heads, kvh, r, max_pos;
	uint64_t m, shd, shd32, pq, pk;
	bool decode, f32;
	bool gather;		/* prefill: a KV head's K and V gathered whole in each of its cores */
	uint32_t ldk;		/* sticks between rows of a K or V tile, 0: sh (paged: a group of KV heads) */
	float scale;
	int sq, sk, sv, skc, svc, so;
	/* decode: */
	uint32_t S;		/* sticks of one fp32 row of max_pos scores */
	uint32_t U, CH;		/* a key chunk: U sticks = CH keys */
	uint32_t NCF, T0;	/* full chunks; the tail's first key (T0 == max_pos: no tail) */
	int64_t c_tab, c_part;	/* mask tables in the constant data */
	/* the emitters count instead of emitting (branch targets) */
	bool counting;
	uint32_t count;
	uint32_t pc[SPYRE_MAX_CORES];	/* the next pc of each core */
};

/*
 * A unit of work: query heads j0..j0+nj-1 of KV group g (query head
 * g*r + j) for tokens t0..t0+nt-1. Its query rows are (token i, head j) in
 * the order i*nj + j: how they lie in Q. Prefill: over keys k0..k1-1.
 * Decode: the key chunks part, part + nparts, ... below the position
 * (and the tail of the cache if @tail).
 */
struct unit {
	uint32_t g, j0, nj;
	uint64_t t0, nt;
	uint64_t k0, k1;
	uint32_t part, nparts;	/* decode: 1 part: complete */
	uint32_t first;		/* index of the unit of part 0 (its core combines) */
	uint32_t core;
	bool tail;
	bool st;		/* scores as (K Q^T)^T: no transpose of K (few query rows) */
	uint64_t kt;		/* key tile */
	uint64_t cost;		/* estimated cycles */
};

/* Decode's key chunk in sticks of 32 keys: about 16 KiB of K. A function of the descriptor only. */
static uint32_t decode_chunk_sticks(uint32_t hd, uint32_t dt)
{
	uint64_t u = 16384 / (F32_PER_STICK * kg_pitch(hd, dt));

	return (uint32_t)(u < 1 ? 1 : u > 8 ? 8 : u);
}

static uint64_t vec_bytes(uint64_t nq)
{
	return kg_pitch(nq, SPYRE_DT_FP32);
}

/* Scratchpad a unit keeps for its whole run (see alloc_bufs). */
static uint64_t fixed_bytes(const struct att *a, uint64_t nq, bool st, uint32_t nparts, bool leader)
{
	uint64_t b = nq * a->shd + nq * a->shd32 + 6 * vec_bytes(nq);

	if (st)
		b += a->hd * kg_pitch(nq, a->dt);
	if (a->decode)
		b += (uint64_t)(a->S + 1) * STICK + a->shd;
	if (a->gather)
		b += 2 * a->m * a->shd;		/* the KV head's K and V */
	if (leader && nparts > 1)
		b += (nparts - 1) * (2 * vec_bytes(nq) + nq * a->shd32);
	return b;
}

/* Scratchpad of one key tile of kt keys. */
static uint64_t tile_bytes(const struct att *a, uint64_t nq, uint64_t nt, bool st, uint64_t kt)
{
	uint64_t ls = kg_pitch(kt, SPYRE_DT_FP32);
	uint64_t b = (a->gather ? 0 : kt * a->shd) + nq * ls;	/* K then V (gather: in place); scores */

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
	uint64_t kq = kg_cyc_sfu(kt * a->hd, 1, 2 * kt * a->hd * a->esz) +
		      kg_cyc_mm(a->dt, SPYRE_DT_FP32, nq, kt, a->hd);
	uint64_t st = kg_cyc_mm(a->dt, SPYRE_DT_FP32, kt, nq, a->hd) + kg_cyc_sfu(kt * nq, 1, 8 * kt * nq) +
		      kg_cdiv(kg_cyc_sfu(nq * a->hd, 1, 2 * nq * a->hd * a->esz), kg_cdiv(kt, 256));

	return st < kq;
}

/* Estimated cycles of one key tile of kn keys: K and V in, scores, softmax update, P V. */
static uint64_t est_tile(const struct att *a, const struct unit *u, uint64_t kn, bool diag, uint32_t active)
{
	uint64_t nq = u->nt * u->nj, e = nq * kn, hd = a->hd;
	uint64_t c = a->gather ? 0 : 2 * kg_cyc_dma(kn * a->shd, active);

	if (u->st)
		c += kg_cyc_mm(a->dt, SPYRE_DT_FP32, kn, nq, hd) + kg_cyc_sfu(e, 1, 8 * e);
	else
		c += kg_cyc_sfu(kn * hd, 1, 2 * kn * hd * a->esz) + kg_cyc_mm(a->dt, SPYRE_DT_FP32, nq, kn, hd);
	c += 4 * kg_cyc_sfu(e, 1, 8 * e) + kg_cyc_sfu(e, SPYRE_TM_SFU_TRANSCENDENTAL_CYCLES, 8 * e);
	if (a->decode)
		c += kg_cyc_sfu(e, 1, 12 * e);
	else if (diag)
		c += (u->nt + 2) * kg_cyc_sfu(kn, 1, 4 * kn) +
		     u->nj * kg_cyc_sfu(u->nt * kn, 1, 12 * u->nt * kn);
	if (!a->f32)
		c += kg_cyc_sfu(kn * hd, 1, kn * hd * (a->esz + 4));
	return c + kg_cyc_mm(SPYRE_DT_FP32, SPYRE_DT_FP32, nq, hd, kn) + kg_cyc_sfu(nq * hd, 1, 12 * nq * hd) +
	       8;
}

/*
 * Estimated cycles of a unit on a device with @active cores streaming
 * memory; decode at the last position (every chunk valid).
 */
static uint64_t est_unit(const struct att *a, const struct unit *u, uint32_t active)
{
	uint64_t nq = u->nt * u->nj, c = 2 * kg_cyc_dma(nq * a->shd, active), hd = a->hd;

	if (u->st)
		c += kg_cyc_sfu(nq * hd, 1, 2 * nq * hd * a->esz);
	if (a->decode) {
		uint64_t chunks = a->NCF > u->part ? kg_cdiv(a->NCF - u->part, u->nparts) : 0, per = 0;

		c += 4 * kg_cyc_dma(a->shd, active) + 3 * kg_cyc_sfu(nq * hd, 1, 4 * nq * hd) + 12;
		for (uint64_t k = 0; k < a->CH; k += u->kt)
			per += est_tile(a, u, kg_min64(u->kt, a->CH - k), false, active);
		per += 2 * kg_cyc_dma((uint64_t)a->U * STICK, active) + 3 * u->nparts + 4;
		c += chunks * per;
		if (u->tail) {
			c += 2 * kg_cyc_dma((uint64_t)(a->S - a->T0 / F32_PER_STICK) * STICK, active);
			for (uint64_t k = a->T0; k < a->max_pos; k += u->kt)
				c += est_tile(a, u, kg_min64(u->kt, a->max_pos - k), false, active);
		}
	} else {
		for (uint64_t k = u->k0; k < u->k1; k += u->kt) {
			uint64_t kn = kg_min64(u->kt, u->k1 - k), w0 = kg_max64(k, u->t0), w1 = kg_min64(k + kn, u->t0 + u->nt);

			c += est_tile(a, u, kn, k + kn > u->t0 + 1, active);
			if (!a->gather && u->j0 == 0 && w0 < w1)
				c += 2 * kg_cyc_dma((w1 - w0) * a->shd, active);
		}
	}
	c += 4 + kg_cyc_sfu(nq * hd, 1, 8 * nq * hd);
	if (u->nparts > 1) {
		if (u->part)
			c += kg_cdiv(2 * vec_bytes(nq) + nq * a->shd32, SPYRE_TM_RING_BYTES_PER_CYCLE) + 3;
		else
			c += (u->nparts - 1) * (10 + 2 * kg_cyc_sfu(nq * hd, 1, 12 * nq * hd));
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

/* Cost every unit with @active cores streaming memory: (cost, index) pairs, longest first if @sort; NULL: no memory. */
static struct cost_idx *cost_units(const struct att *a, struct unit *u, uint32_t n, uint32_t active, bool sort)
{
	struct cost_idx *ci = malloc(n * sizeof(*ci));

	if (!ci)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		u[i].cost = est_unit(a, &u[i], active);
		ci[i] = (struct cost_idx){ u[i].cost, i };
	}
	if (sort)
		qsort(ci, n, sizeof(*ci), cost_desc);
	return ci;
}

/*
 * Cost every unit, place them on cores (longest first on the least loaded
 * core, or unit i on core i when @fixed), return the makespan (UINT64_MAX:
 * something does not fit).
 */
static uint64_t place(struct att *a, struct unit *u, uint32_t n, bool fixed)
{
	uint32_t active = (uint32_t)kg_min64(n, a->g->cores);
	uint64_t load[SPYRE_MAX_CORES] = { 0 }, span = 0;
	struct cost_idx *ci;

	if (fixed && n > a->g->cores)
		return UINT64_MAX;
	ci = cost_units(a, u, n, active, !fixed);
	if (!ci)
		return UINT64_MAX;
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
		span = kg_max64(span, load[best]);
	}
	free(ci);
	return span;
}

/* Fill in the route and key tile of a unit whose tiles hold up to @keys keys; false if it cannot fit. */
static bool size_unit(const struct att *a, struct unit *u, uint64_t keys)
{
	uint64_t nq = u->nt * u->nj;
	bool pref = pick_st(a, nq, kg_min64(keys, 256));

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

/*
 * Gather mode: the cores that hold KV head g whole: a team of cores per KV
 * head when there are at least as many cores as KV heads, else the one core
 * that takes g among its KV heads.
 */
static struct kg_range team_of(const struct att *a, uint32_t g)
{
	uint32_t cores = a->g->cores;

	if (cores >= a->kvh)
		return kg_split(cores, a->kvh, g, 1);
	for (uint32_t c = 0; c < cores; c++) {
		struct kg_range r = kg_split(a->kvh, cores, c, 1);

		if (g >= r.start && g < r.start + r.count)
			return (struct kg_range){ c, 1 };
	}
	return (struct kg_range){ 0, 1 };
}

/* Estimated cycles of a team member's share of gathering: its rows loaded, cached, sent; the others' received. */
static uint64_t est_produce(const struct att *a, uint64_t rows, uint32_t team, uint32_t active)
{
	uint64_t b = rows * a->shd;

	if (!rows)
		return 0;
	return 4 * kg_cyc_dma(b, active) + (team - 1) * (2 * kg_cdiv(b, SPYRE_TM_RING_BYTES_PER_CYCLE) + 4);
}

/* The gathering of every team into @load (cycles each core spends before its units can start). */
static void gather_loads(const struct att *a, uint32_t active, uint64_t *load)
{
	for (uint32_t gg = 0; gg < a->kvh; gg++) {
		struct kg_range t = team_of(a, gg);
		uint64_t ready = 0;

		/* a member starts its units when the slowest member's rows have arrived */
		for (uint32_t i = 0; i < t.count; i++)
			ready = kg_max64(ready, est_produce(a, kg_split(a->m, (uint32_t)t.count, i, 1).count,
							(uint32_t)t.count, active));
		for (uint32_t i = 0; i < t.count; i++)
			load[t.start + i] += ready + (t.count > 1 ? SPYRE_TM_RING_HOP_CYCLES * t.count / 2 : 0);
	}
}

/*
 * place() for gather mode: each KV head's units on its team, after the
 * team's gathering; costed again with the cores that end up busy (they
 * share LPDDR).
 */
static uint64_t place_gather(struct att *a, struct unit *u, uint32_t n)
{
	uint32_t cores = a->g->cores, active = cores;
	uint64_t load[SPYRE_MAX_CORES] = { 0 }, span = 0;
	bool busy[SPYRE_MAX_CORES] = { false };
	struct cost_idx *ci;

	gather_loads(a, active, load);
	ci = cost_units(a, u, n, active, true);
	if (!ci)
		return UINT64_MAX;
	for (uint32_t i = 0; i < n; i++) {
		struct kg_range t = team_of(a, u[ci[i].idx].g);
		uint32_t best = (uint32_t)t.start;

		for (uint32_t c = best + 1; c < t.start + t.count; c++)
			if (load[c] < load[best])
				best = c;
		u[ci[i].idx].core = best;
		load[best] += ci[i].cost;
	}
	free(ci);
	/* the busy cores: those with units, and those with rows to gather */
	active = 0;
	for (uint32_t i = 0; i < n; i++)
		busy[u[i].core] = true;
	for (uint32_t gg = 0; gg < a->kvh; gg++) {
		struct kg_range t = team_of(a, gg);

		for (uint32_t i = 0; i < t.count; i++)
			busy[t.start + i] |= kg_split(a->m, (uint32_t)t.count, i, 1).count > 0;
	}
	for (uint32_t c = 0; c < cores; c++)
		active += busy[c];
	memset(load, 0, sizeof(load));
	gather_loads(a, active, load);
	for (uint32_t i = 0; i < n; i++) {
		u[i].cost = est_unit(a, &u[i], active);
		load[u[i].core] += u[i].cost;
	}
	for (uint32_t c = 0; c < cores; c++)
		span = kg_max64(span, busy[c] ? load[c] : 0);
	return span;
}

/*
 * Prefill: (g, head subset, token block) units; the tiling with the least
 * estimated makespan, streaming each unit's keys from memory or gathering
 * each KV head's K and V whole in its cores first (read once, shared over
 * the ring).
 */
static struct unit *plan_prefill(struct att *a, uint32_t *nout)
{
	uint64_t best_span = UINT64_MAX, m = a->m;
	struct unit *best = NULL;
	uint32_t best_n = 0;
	uint64_t nts[16];
	uint32_t nnt = 0, njs[8], nnj = 0;
	bool best_gather = false;

	nts[nnt++] = m;
	for (uint64_t p = 256; p >= 1; p /= 2)
		if (p < m)
			nts[nnt++] = p;
	for (uint32_t j = a->r;; j = (uint32_t)kg_cdiv(j, 2)) {
		njs[nnj++] = j;
		if (j == 1 || nnj == 8)
			break;
	}
	for (int gm = 0; gm < 2; gm++)
	for (uint32_t ti = 0; ti < nnt; ti++)
		for (uint32_t ji = 0; ji < nnj; ji++) {
			uint64_t nt = nts[ti], nb = kg_cdiv(m, nt);
			uint32_t nsub = (uint32_t)kg_cdiv(a->r, njs[ji]), n = 0;
			uint64_t total = (uint64_t)a->kvh * nsub * nb, span;
			struct unit *u;
			bool ok = true;

			a->gather = gm;
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
						x->nt = kg_min64(nt, m - x->t0);
						x->k0 = 0;
						x->k1 = x->t0 + x->nt;
						x->nparts = 1;
						x->first = n - 1;
						ok = size_unit(a, x, x->k1);
					}
			span = !ok ? UINT64_MAX : gm ? place_gather(a, u, n) : place(a, u, n, false);
			if (span < best_span) {
				free(best);
				best = u;
				best_n = n;
				best_span = span;
				best_gather = gm;
			} else {
				free(u);
			}
		}
	a->gather = best_gather;
	*nout = best_n;
	return best;
}

/*
 * Decode: (g, key part) units, all heads of the group together. Part p of
 * kp takes the key chunks p, p + kp, ... (interleaved: a short sequence
 * still spreads over the parts); the tail of the cache (max_pos not a whole
 * number of chunks) goes to the part that would have the next chunk.
 */
static struct unit *plan_decode(struct att *a, uint32_t *nout)
{
	uint32_t cores = a->g->cores;
	uint32_t kpmax = a->kvh >= cores ? 1 : (uint32_t)kg_min64(cores / a->kvh, kg_max64(a->NCF, 1));
	uint64_t best_span = UINT64_MAX, keys = a->NCF ? a->CH : a->max_pos;
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
				struct unit *x = &u[gg * kp + p];

				x->g = gg;
				x->j0 = 0;
				x->nj = a->r;
				x->t0 = 0;
				x->nt = 1;
				x->part = p;
				x->nparts = kp;
				x->first = gg * kp;
				x->tail = a->T0 < a->max_pos && p == a->NCF % kp;
				ok = size_unit(a, x, keys);
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

/* ---- emitters: every instruction goes through these (counting mode for branch targets) ---- */

static void track(struct att *a, uint32_t c, int pc)
{
	if (pc >= 0)
		a->pc[c] = (uint32_t)pc + 1;
}

static void op(struct att *a, uint32_t c, const struct spyre_pb_op *o)
{
	if (a->counting)
		a->count++;
	else
		track(a, c, spyre_pb_op(a->g->pb, c, o));
}

static void dma(struct att *a, uint32_t c, unsigned opc, const struct spyre_pb_dma *d)
{
	if (a->counting)
		a->count++;
	else
		track(a, c, spyre_pb_dma(a->g->pb, c, opc, d));
}

static void ctl(struct att *a, uint32_t c, unsigned opc, unsigned reg, uint64_t imm, unsigned reg2)
{
	if (a->counting)
		a->count++;
	else
		track(a, c, spyre_pb_ctl(a->g->pb, c, opc, reg, imm, reg2));
}

static void ring(struct att *a, uint32_t c, unsigned opc, uint32_t sp, uint32_t peer, uint32_t tag, uint32_t bytes)
{
	if (a->counting)
		a->count++;
	else
		track(a, c, spyre_pb_ring(a->g->pb, c, opc, sp, peer, tag, bytes));
}

/* fp32 op on a vector of n elements (one row) */
static void vop(struct att *a, uint32_t c, unsigned opc, uint32_t d, uint32_t x, uint32_t y, uint32_t n)
{
	op(a, c, &(struct spyre_pb_op){ .op = opc, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32, .d = d, .a = x, .b = y,
					 .rows = 1, .cols = n });
}

/* The scratchpad of a unit. */
struct bufs {
	uint32_t nq, kt, vs, lds, ldst, ldqt, ldkt;
	uint32_t qb;		/* Q [nq x hd], then O */
	uint32_t acc;		/* [nq x hd] fp32 */
	uint32_t m, mn, mt, al, lv, lt;	/* vectors of nq fp32: max, new max, tile max, rescale, sum, tile sum */
	uint32_t qt;		/* Q^T [hd x nq] (route st) */
	uint32_t mk;		/* decode: the mask row, S + 1 sticks */
	uint32_t nr;		/* decode: the new K/V row */
	uint32_t kg, vg;	/* gather: the KV head's K and V [m x hd] */
	uint32_t kb;		/* K tile [kt x hd], then V */
	uint32_t sb;		/* S [nq x kt] fp32, then P */
	uint32_t xt;		/* K^T [hd x kt] or S^T [kt x nq] fp32 */
	uint32_t mb;		/* prefill: causal mask [nt x kt] fp32 */
	uint32_t vf;		/* V [kt x hd] fp32 */
	uint32_t rm[SPYRE_MAX_CORES], rl[SPYRE_MAX_CORES], ra[SPYRE_MAX_CORES];	/* parts received */
};

static void alloc_bufs(struct att *a, const struct unit *u, struct bufs *b)
{
	struct kgen *g = a->g;
	uint32_t c = u->core, hd = a->hd;

	memset(b, 0, sizeof(*b));
	b->nq = (uint32_t)(u->nt * u->nj);
	b->kt = (uint32_t)u->kt;
	b->vs = (uint32_t)vec_bytes(b->nq);
	b->lds = kg_sticks(b->kt, SPYRE_DT_FP32);
	b->ldst = kg_sticks(b->nq, SPYRE_DT_FP32);
	b->ldqt = kg_sticks(b->nq, a->dt);
	b->ldkt = kg_sticks(b->kt, a->dt);
	kg_sp_reset(g, c);
	if (a->gather) {	/* first, at the offsets emit_gather() used */
		b->kg = kg_sp_alloc(g, c, a->m * a->shd);
		b->vg = kg_sp_alloc(g, c, a->m * a->shd);
	}
	b->qb = kg_sp_alloc(g, c, (uint64_t)b->nq * a->shd);
	b->acc = kg_sp_alloc(g, c, (uint64_t)b->nq * a->shd32);
	b->m = kg_sp_alloc(g, c, b->vs);
	b->mn = kg_sp_alloc(g, c, b->vs);
	b->mt = kg_sp_alloc(g, c, b->vs);
	b->al = kg_sp_alloc(g, c, b->vs);
	b->lv = kg_sp_alloc(g, c, b->vs);
	b->lt = kg_sp_alloc(g, c, b->vs);
	if (u->st)
		b->qt = kg_sp_alloc(g, c, (uint64_t)hd * kg_pitch(b->nq, a->dt));
	if (a->decode) {
		b->mk = kg_sp_alloc(g, c, (uint64_t)(a->S + 1) * STICK);
		b->nr = kg_sp_alloc(g, c, a->shd);
	}
	if (u->nparts > 1 && u->part == 0)
		for (uint32_t p = 1; p < u->nparts; p++) {
			b->rm[p] = kg_sp_alloc(g, c, b->vs);
			b->rl[p] = kg_sp_alloc(g, c, b->vs);
			b->ra[p] = kg_sp_alloc(g, c, (uint64_t)b->nq * a->shd32);
		}
	if (!a->gather)
		b->kb = kg_sp_alloc(g, c, (uint64_t)b->kt * a->shd);
	b->sb = kg_sp_alloc(g, c, (uint64_t)b->nq * b->lds * STICK);
	b->xt = kg_sp_alloc(g, c, u->st ? (uint64_t)b->kt * b->ldst * STICK : (uint64_t)hd * b->ldkt * STICK);
	if (!a->decode)
		b->mb = kg_sp_alloc(g, c, u->nt * b->lds * STICK);
	if (!a->f32)
		b->vf = kg_sp_alloc(g, c, (uint64_t)b->kt * a->shd32);
}

/* S = scale * Q K^T [nq x kn] fp32 for the K tile at ks. */
/* Sticks between the rows of a K or V tile. */
static uint32_t kld(const struct att *a)
{
	return a->ldk ? a->ldk : a->sh;
}

static void emit_scores(struct att *a, const struct unit *u, const struct bufs *b, uint32_t kn, uint32_t ks)
{
	uint32_t c = u->core, hd = a->hd, dt = a->dt;

	if (u->st) {
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = dt, .dt2 = SPYRE_DT_FP32, .d = b->xt,
						 .a = ks, .b = b->qt, .rows = kn, .cols = b->nq, .k = hd,
						 .ldd = b->ldst, .lda = kld(a), .ldb = b->ldqt });
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRANSPOSE, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .d = b->sb, .a = b->xt, .rows = kn, .cols = b->nq, .ldd = b->lds,
						 .lda = b->ldst });
	} else {
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRANSPOSE, .dt = dt, .dt2 = dt, .d = b->xt,
						 .a = ks, .rows = kn, .cols = hd, .ldd = b->ldkt, .lda = kld(a) });
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = dt, .dt2 = SPYRE_DT_FP32, .d = b->sb,
						 .a = b->qb, .b = b->xt, .rows = b->nq, .cols = kn, .k = hd,
						 .ldd = b->lds, .lda = a->sh, .ldb = b->ldkt });
	}
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SCALE, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32, .d = b->sb,
					 .a = b->sb, .rows = b->nq, .cols = kn, .ldd = b->lds, .lda = b->lds,
					 .scale = a->scale });
}

/*
 * Online softmax over a masked score tile: m_new = max(m, rowmax S),
 * al = exp(m - m_new), P = exp(S - m_new) (in sb), l = l al + rowsum P,
 * acc *= al. The first tile sets m and l.
 */
static void emit_stats(struct att *a, uint32_t c, const struct bufs *b, uint32_t kn, bool first)
{
	if (first) {
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_REDMAX, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .d = b->m, .a = b->sb, .rows = b->nq, .cols = kn, .lda = b->lds });
	} else {
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_REDMAX, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .d = b->mt, .a = b->sb, .rows = b->nq, .cols = kn, .lda = b->lds });
		vop(a, c, SPYRE_ISA_OP_MAX, b->mn, b->m, b->mt, b->nq);
		vop(a, c, SPYRE_ISA_OP_SUB, b->al, b->m, b->mn, b->nq);
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_EXP, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .d = b->al, .a = b->al, .rows = 1, .cols = b->nq });
		vop(a, c, SPYRE_ISA_OP_MAX, b->m, b->mn, b->mn, b->nq);	/* m = m_new */
	}
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SUB, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
					 .flags = SPYRE_IF_BCAST_COL, .d = b->sb, .a = b->sb, .b = b->m, .rows = b->nq,
					 .cols = kn, .ldd = b->lds, .lda = b->lds });
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_EXP, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32, .d = b->sb,
					 .a = b->sb, .rows = b->nq, .cols = kn, .ldd = b->lds, .lda = b->lds });
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_REDSUM, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
					 .d = first ? b->lv : b->lt, .a = b->sb, .rows = b->nq, .cols = kn,
					 .lda = b->lds });
	if (!first) {
		vop(a, c, SPYRE_ISA_OP_MUL, b->lv, b->lv, b->al, b->nq);
		vop(a, c, SPYRE_ISA_OP_ADD, b->lv, b->lv, b->lt, b->nq);
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						 .flags = SPYRE_IF_BCAST_COL, .d = b->acc, .a = b->acc, .b = b->al,
						 .rows = b->nq, .cols = a->hd, .ldd = a->sh32, .lda = a->sh32 });
	}
}

/* acc (+)= P V for the V tile at vs. */
static void emit_pv(struct att *a, uint32_t c, const struct bufs *b, uint32_t kn, bool first, uint32_t vs)
{
	if (!a->f32)
		op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_CAST, .dt = a->dt, .dt2 = SPYRE_DT_FP32, .d = b->vf,
						 .a = vs, .rows = kn, .cols = a->hd, .ldd = a->sh32, .lda = kld(a) });
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
					 .flags = first ? 0 : SPYRE_IF_ACC, .d = b->acc, .a = b->sb, .b = a->f32 ? vs : b->vf,
					 .rows = b->nq, .cols = a->hd, .k = kn, .ldd = a->sh32, .lda = b->lds,
					 .ldb = a->f32 ? kld(a) : a->sh32 });
}

/* Prefill: a tile of keys (or values) k..k+kn-1 of group g from the input, and its own rows to the cache. */
static void prefill_kv(struct att *a, const struct unit *u, uint32_t sp, uint64_t k, uint64_t kn, bool v)
{
	dma(a, u->core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
		.sp = sp, .mem = { .sym = v ? a->sv : a->sk, .off = k * a->pk + u->g * a->shd }, .rows = (uint32_t)kn,
		.row_bytes = (uint32_t)a->shd, .mem_stride = (uint32_t)a->pk, .sp_stride = (uint32_t)a->shd });
	/* the unit of the first head subset writes its own tokens' rows into the cache */
	if (u->j0 == 0) {
		uint64_t w0 = kg_max64(k, u->t0), w1 = kg_min64(k + kn, u->t0 + u->nt);

		if (w0 < w1)
			dma(a, u->core, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
				.sp = sp + (uint32_t)((w0 - k) * a->shd),
				.mem = { .sym = v ? a->svc : a->skc, .off = (u->g * (uint64_t)a->max_pos + w0) * a->shd },
				.row_bytes = (uint32_t)((w1 - w0) * a->shd) });
	}
}

/* O = acc / l rounded once (1/l = rsqrt(l)^2 in fp32: there is no divide), into qb. */
static void emit_normalize(struct att *a, uint32_t c, const struct bufs *b)
{
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_RSQRT, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32, .d = b->lt,
					 .a = b->lv, .rows = 1, .cols = b->nq });
	vop(a, c, SPYRE_ISA_OP_MUL, b->lt, b->lt, b->lt, b->nq);
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32, .dt2 = a->dt,
					 .flags = SPYRE_IF_BCAST_COL, .d = b->qb, .a = b->acc, .b = b->lt, .rows = b->nq,
					 .cols = a->hd, .ldd = a->sh, .lda = a->sh32 });
}

static void emit_load_q(struct att *a, const struct unit *u, const struct bufs *b, unsigned opc)
{
	uint64_t off = u->t0 * a->pq + ((uint64_t)u->g * a->r + u->j0) * a->shd;

	dma(a, u->core, opc, &(struct spyre_pb_dma){
		.sp = b->qb, .mem = { .sym = opc == SPYRE_ISA_OP_LOAD ? a->sq : a->so, .off = off },
		.rows = (uint32_t)u->nt, .row_bytes = (uint32_t)(u->nj * a->shd), .mem_stride = (uint32_t)a->pq,
		.sp_stride = (uint32_t)(u->nj * a->shd) });
	if (opc == SPYRE_ISA_OP_LOAD && u->st)
		op(a, u->core, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRANSPOSE, .dt = a->dt, .dt2 = a->dt,
						       .d = b->qt, .a = b->qb, .rows = b->nq, .cols = a->hd,
						       .ldd = b->ldqt, .lda = a->sh });
}

/*
 * Gather mode, core @c of KV head g's team of @t.count cores: load its
 * share of g's K and V rows (and write them into the caches), send them to
 * the team's other cores that have units, receive theirs (@has_units).
 */
static void emit_gather(struct att *a, uint32_t c, uint32_t g, struct kg_range t, const bool *has_units)
{
	uint32_t T = (uint32_t)t.count, i = c - (uint32_t)t.start, kg, vg;
	struct kg_range r = kg_split(a->m, T, i, 1);

	kg_sp_reset(a->g, c);
	kg = kg_sp_alloc(a->g, c, a->m * a->shd);
	vg = kg_sp_alloc(a->g, c, a->m * a->shd);
	if (a->g->failed)
		return;
	for (int v = 0; v < 2 && r.count; v++) {
		uint32_t sp = (v ? vg : kg) + (uint32_t)(r.start * a->shd);

		dma(a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = sp, .mem = { .sym = v ? a->sv : a->sk, .off = r.start * a->pk + g * a->shd },
			.rows = (uint32_t)r.count, .row_bytes = (uint32_t)a->shd, .mem_stride = (uint32_t)a->pk,
			.sp_stride = (uint32_t)a->shd });
		dma(a, c, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
			.sp = sp, .mem = { .sym = v ? a->svc : a->skc, .off = (g * (uint64_t)a->max_pos + r.start) * a->shd },
			.row_bytes = (uint32_t)(r.count * a->shd) });
	}
	/* every send before any receive: no core waits on one that waits */
	for (uint32_t j = 0; j < T && r.count; j++)
		if (j != i && has_units[t.start + j])
			for (int v = 0; v < 2; v++)
				ring(a, c, SPYRE_ISA_OP_SEND, (v ? vg : kg) + (uint32_t)(r.start * a->shd),
				     (uint32_t)t.start + j, 1 + v, (uint32_t)(r.count * a->shd));
	for (uint32_t j = 0; j < T && has_units[c]; j++) {
		struct kg_range rj = kg_split(a->m, T, j, 1);

		if (j != i && rj.count)
			for (int v = 0; v < 2; v++)
				ring(a, c, SPYRE_ISA_OP_RECV, (v ? vg : kg) + (uint32_t)(rj.start * a->shd),
				     (uint32_t)t.start + j, 1 + v, (uint32_t)(rj.count * a->shd));
	}
}

static void emit_prefill(struct att *a, const struct unit *u)
{
	uint32_t c = u->core, kt = (uint32_t)u->kt;
	bool single = kt >= u->k1 - u->k0;
	struct bufs b;

	alloc_bufs(a, u, &b);
	if (a->g->failed)
		return;
	emit_load_q(a, u, &b, SPYRE_ISA_OP_LOAD);
	for (uint64_t k = u->k0; k < u->k1; k += kt) {
		uint32_t kn = (uint32_t)kg_min64(kt, u->k1 - k);
		bool first = k == u->k0;

		uint32_t ks = a->gather ? b.kg + (uint32_t)(k * a->shd) : b.kb;
		uint32_t vs = a->gather ? b.vg + (uint32_t)(k * a->shd) : b.kb;

		if (!a->gather)
			prefill_kv(a, u, b.kb, k, kn, false);
		emit_scores(a, u, &b, kn, ks);
		if (k + kn > u->t0 + 1) {
			/* causal mask: row i (token t0 + i) sees keys 0..t0+i; FILLs start on a stick */
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = b.mb, .rows = (uint32_t)u->nt,
							 .cols = kn, .ldd = b.lds, .imm = spyre_f32_bits(NEG_BIG) });
			for (uint32_t i = 0; i < u->nt; i++) {
				uint64_t q = u->t0 + i + 1, v = q <= k ? 0 : kg_min64(q - k, kn);

				if (v == kn) {	/* this row and every later one see the whole tile */
					op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
									 .dt2 = SPYRE_DT_FP32, .d = b.mb + i * b.lds * STICK,
									 .rows = (uint32_t)u->nt - i, .cols = kn,
									 .ldd = b.lds, .imm = 0 });
					break;
				}
				if (v)
					op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
									 .dt2 = SPYRE_DT_FP32, .d = b.mb + i * b.lds * STICK,
									 .rows = 1, .cols = (uint32_t)v, .ldd = b.lds,
									 .imm = 0 });
			}
			/* the same mask row for every head of a token: rows i*nj + j */
			for (uint32_t j = 0; j < u->nj; j++)
				op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32,
								 .dt2 = SPYRE_DT_FP32, .d = b.sb + j * b.lds * STICK,
								 .a = b.sb + j * b.lds * STICK, .b = b.mb,
								 .rows = (uint32_t)u->nt, .cols = kn,
								 .ldd = u->nj * b.lds, .lda = u->nj * b.lds, .ldb = b.lds });
		}
		if (single) {
			/* one tile: the softmax instruction, then O = P V rounded once */
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SOFTMAX, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = b.sb, .a = b.sb, .rows = b.nq,
							 .cols = kn, .ldd = b.lds, .lda = b.lds });
			if (!a->gather)
				prefill_kv(a, u, b.kb, k, kn, true);
			if (a->f32) {
				op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = a->dt, .dt2 = a->dt,
								 .d = b.qb, .a = b.sb, .b = vs, .rows = b.nq,
								 .cols = a->hd, .k = kn, .ldd = a->sh, .lda = b.lds,
								 .ldb = a->sh32 });
			} else {
				/* a matmul of fp32 inputs writes fp32: the one rounding is the cast */
				emit_pv(a, c, &b, kn, true, vs);
				op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_CAST, .dt = SPYRE_DT_FP32,
								 .dt2 = a->dt, .d = b.qb, .a = b.acc, .rows = b.nq,
								 .cols = a->hd, .ldd = a->sh, .lda = a->sh32 });
			}
			break;
		}
		emit_stats(a, c, &b, kn, first);
		if (!a->gather)
			prefill_kv(a, u, b.kb, k, kn, true);
		emit_pv(a, c, &b, kn, first, vs);
	}
	if (!single)
		emit_normalize(a, c, &b);
	emit_load_q(a, u, &b, SPYRE_ISA_OP_STORE);
}

/* Decode: one tile of kn keys at cache row k0 (+ r[R_KV] / R_KV bytes when @reg) with mask slice at @msk. */
static void decode_tile(struct att *a, const struct unit *u, const struct bufs *b, uint64_t off, bool reg,
			uint32_t kn, uint32_t msk)
{
	uint32_t c = u->core;

	dma(a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
		.sp = b->kb, .mem = { .sym = a->skc, .off = off, .reg = reg ? SPYRE_PB_REG(R_KV) : 0 },
		.row_bytes = (uint32_t)(kn * a->shd) });
	emit_scores(a, u, b, kn, b->kb);
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
					 .flags = SPYRE_IF_BCAST_ROW, .d = b->sb, .a = b->sb, .b = msk, .rows = b->nq,
					 .cols = kn, .ldd = b->lds, .lda = b->lds });
	emit_stats(a, c, b, kn, false);
	dma(a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
		.sp = b->kb, .mem = { .sym = a->svc, .off = off, .reg = reg ? SPYRE_PB_REG(R_KV) : 0 },
		.row_bytes = (uint32_t)(kn * a->shd) });
	emit_pv(a, c, b, kn, false, b->kb);
}

/* The loop body: the chunk at r[R_KV] (its mask: the table at r[R_CTAB], the partial stick at r[R_CQ]). */
static void decode_chunk(struct att *a, const struct unit *u, const struct bufs *b)
{
	uint64_t base = (uint64_t)u->g * a->max_pos * a->shd;

	dma(a, u->core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
		.sp = b->mk, .mem = { .sym = SPYRE_PB_CONST, .off = (uint64_t)a->c_tab, .reg = SPYRE_PB_REG(R_CTAB) },
		.row_bytes = a->U * STICK });
	dma(a, u->core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
		.sp = b->mk, .sp_reg = SPYRE_PB_REG(R_CQ),
		.mem = { .sym = SPYRE_PB_CONST, .off = (uint64_t)a->c_part, .reg = SPYRE_PB_REG(R_PART) },
		.row_bytes = STICK });
	for (uint32_t s = 0; s < a->CH; s += b->kt)
		decode_tile(a, u, b, base + s * a->shd, true, (uint32_t)kg_min64(b->kt, a->CH - s),
			    b->mk + s / F32_PER_STICK * STICK);
}

static void emit_decode(struct att *a, const struct unit *u, const struct unit *all)
{
	uint32_t c = u->core, kp = u->nparts, p = u->part, ustk = a->U * STICK;
	uint64_t base = (uint64_t)u->g * a->max_pos * a->shd;
	bool leader = kp > 1 && p == 0;
	struct bufs b;

	alloc_bufs(a, u, &b);
	if (a->g->failed)
		return;
	for (uint32_t r = 0; r < DECODE_BASE_SCALARS; r++)
		ctl(a, c, SPYRE_ISA_OP_LDARG, r, r, 0);
	/* the new K and V rows into the caches at pos (r0 = pos * pitch): before any cache read */
	for (int v = 0; v < 2; v++) {
		dma(a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = b.nr, .mem = { .sym = v ? a->sv : a->sk, .off = u->g * a->shd },
			.row_bytes = (uint32_t)a->shd });
		dma(a, c, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
			.sp = b.nr, .mem = { .sym = v ? a->svc : a->skc, .off = base, .reg = SPYRE_PB_REG(R_POS) },
			.row_bytes = (uint32_t)a->shd });
	}
	emit_load_q(a, u, &b, SPYRE_ISA_OP_LOAD);
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32, .d = b.m,
					 .rows = 1, .cols = b.nq, .imm = spyre_f32_bits(NEG_BIG) });
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32, .d = b.lv,
					 .rows = 1, .cols = b.nq, .imm = 0 });
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
					 .d = b.acc, .rows = b.nq, .cols = a->hd, .ldd = a->sh32, .imm = 0 });
	if (a->NCF > p) {
		/*
		 * for (n = d_p; n; ) { chunk; advance kp chunks; n -= kp, leaving when it reaches 0 }:
		 * r[R_CNT] = d_p valid chunks from chunk p on, decremented one at a time so
		 * that 0 is never skipped.
		 */
		uint32_t body, start, end;

		ctl(a, c, SPYRE_ISA_OP_LDARG, R_CNT, DECODE_BASE_SCALARS + p, 0);
		ctl(a, c, SPYRE_ISA_OP_LI, R_ONE, 1, 0);
		ctl(a, c, SPYRE_ISA_OP_LI, R_KV, (uint64_t)p * a->CH * a->shd, 0);
		ctl(a, c, SPYRE_ISA_OP_ADDI, R_CTAB, (uint64_t)p * ustk, R_TAB);
		ctl(a, c, SPYRE_ISA_OP_ADDI, R_CQ, (uint64_t)0 - (uint64_t)p * ustk, R_Q);
		a->counting = true;
		a->count = 0;
		decode_chunk(a, u, &b);
		a->counting = false;
		body = a->count;
		start = a->pc[c] + 2;
		end = start + body + 3 + 3 * (kp - 1) + 2;
		ctl(a, c, SPYRE_ISA_OP_BNZ, R_CNT, start, 0);
		ctl(a, c, SPYRE_ISA_OP_BNZ, R_ONE, end, 0);
		decode_chunk(a, u, &b);
		ctl(a, c, SPYRE_ISA_OP_ADDI, R_KV, (uint64_t)kp * a->CH * a->shd, R_KV);
		ctl(a, c, SPYRE_ISA_OP_ADDI, R_CTAB, (uint64_t)kp * ustk, R_CTAB);
		ctl(a, c, SPYRE_ISA_OP_ADDI, R_CQ, (uint64_t)0 - (uint64_t)kp * ustk, R_CQ);
		for (uint32_t i = 0; i < kp; i++) {
			ctl(a, c, SPYRE_ISA_OP_ADDI, R_CNT, (uint64_t)-1, R_CNT);
			if (i + 1 < kp) {
				ctl(a, c, SPYRE_ISA_OP_BNZ, R_CNT, a->pc[c] + 2, 0);
				ctl(a, c, SPYRE_ISA_OP_BNZ, R_ONE, end, 0);
			} else {
				ctl(a, c, SPYRE_ISA_OP_BNZ, R_CNT, start, 0);
			}
		}
		if (a->pc[c] != end)
			kg_fail(a->g, "internal: decode loop of %u instructions ends at %u, not %u", body, a->pc[c], end);
	}
	if (u->tail) {
		/* the last keys (max_pos not a whole chunk): static, masked like the whole row */
		uint32_t t0s = a->T0 / F32_PER_STICK;

		dma(a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = b.mk + t0s * STICK,
			.mem = { .sym = SPYRE_PB_CONST, .off = (uint64_t)a->c_tab + t0s * STICK, .reg = SPYRE_PB_REG(R_TAB) },
			.row_bytes = (a->S - t0s) * STICK });
		dma(a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = b.mk, .sp_reg = SPYRE_PB_REG(R_Q),
			.mem = { .sym = SPYRE_PB_CONST, .off = (uint64_t)a->c_part, .reg = SPYRE_PB_REG(R_PART) },
			.row_bytes = STICK });
		for (uint64_t k = a->T0; k < a->max_pos; k += b.kt)
			decode_tile(a, u, &b, base + k * a->shd, false, (uint32_t)kg_min64(b.kt, a->max_pos - k),
				    b.mk + (uint32_t)(k / F32_PER_STICK) * STICK);
	}
	if (kp > 1 && !leader) {
		/* a key part: (m, l, acc) to the core of part 0 */
		uint32_t to = all[u->first].core;

		ring(a, c, SPYRE_ISA_OP_SEND, b.m, to, 1, b.vs);
		ring(a, c, SPYRE_ISA_OP_SEND, b.lv, to, 2, b.vs);
		ring(a, c, SPYRE_ISA_OP_SEND, b.acc, to, 3, b.nq * (uint32_t)a->shd32);
		return;
	}
	if (leader) {
		/* M = max of the parts' m; every part scaled by exp(m_p - M) (0 for a part past pos) */
		for (uint32_t q = 1; q < kp; q++) {
			uint32_t from = all[u->first + q].core;

			ring(a, c, SPYRE_ISA_OP_RECV, b.rm[q], from, 1, b.vs);
			ring(a, c, SPYRE_ISA_OP_RECV, b.rl[q], from, 2, b.vs);
			ring(a, c, SPYRE_ISA_OP_RECV, b.ra[q], from, 3, b.nq * (uint32_t)a->shd32);
		}
		for (uint32_t q = 1; q < kp; q++)
			vop(a, c, SPYRE_ISA_OP_MAX, b.mt, q == 1 ? b.m : b.mt, b.rm[q], b.nq);
		for (uint32_t q = 0; q < kp; q++) {
			uint32_t pm = q ? b.rm[q] : b.m, pl = q ? b.rl[q] : b.lv, pa = q ? b.ra[q] : b.acc;

			vop(a, c, SPYRE_ISA_OP_SUB, b.al, pm, b.mt, b.nq);
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_EXP, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = b.al, .a = b.al, .rows = 1,
							 .cols = b.nq });
			vop(a, c, SPYRE_ISA_OP_MUL, pl, pl, b.al, b.nq);
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .flags = SPYRE_IF_BCAST_COL, .d = pa,
							 .a = pa, .b = b.al, .rows = b.nq, .cols = a->hd, .ldd = a->sh32,
							 .lda = a->sh32 });
			if (q) {
				vop(a, c, SPYRE_ISA_OP_ADD, b.lv, b.lv, pl, b.nq);
				op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32,
								 .dt2 = SPYRE_DT_FP32, .d = b.acc, .a = b.acc,
								 .b = pa, .rows = b.nq, .cols = a->hd, .ldd = a->sh32,
								 .lda = a->sh32, .ldb = a->sh32 });
			}
		}
	}
	emit_normalize(a, c, &b);
	emit_load_q(a, u, &b, SPYRE_ISA_OP_STORE);
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
	if (a.hd > 4096 || a.heads > 4096 || a.m > 65535 || a.max_pos > (1u << 24))
		return kg_fail(g, "head_dim %u, heads %u, m %llu or max_pos %u too large", a.hd, a.heads,
			       (unsigned long long)a.m, a.max_pos);
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
	a.S = (uint32_t)kg_cdiv(a.max_pos, F32_PER_STICK);
	a.U = decode_chunk_sticks(a.hd, a.dt);
	a.CH = a.U * F32_PER_STICK;
	a.NCF = a.max_pos / a.CH;
	a.T0 = a.NCF * a.CH;

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
	if (a.gather) {
		bool has_units[SPYRE_MAX_CORES] = { false };

		for (uint32_t i = 0; i < n; i++)
			has_units[u[i].core] = true;
		/* per KV head: its team gathers, then each team core runs its units of it */
		for (uint32_t c = 0; c < g->cores && !g->failed; c++)
			for (uint32_t gg = 0; gg < a.kvh && !g->failed; gg++) {
				struct kg_range t = team_of(&a, gg);

				if (c < t.start || c >= t.start + t.count)
					continue;
				emit_gather(&a, c, gg, t, has_units);
				for (uint32_t i = 0; i < n && !g->failed; i++)
					if (u[i].core == c && u[i].g == gg)
						emit_prefill(&a, &u[i]);
			}
	} else {
		for (uint32_t c = 0; c < g->cores; c++)
			for (uint32_t i = 0; i < n && !g->failed; i++)
				if (u[i].core == c) {
					if (a.decode)
						emit_decode(&a, &u[i], u);
					else
						emit_prefill(&a, &u[i]);
				}
	}
	free(u);
	return kg_ok(g);
}

SPYRE_EXPORT int spyre_kernel_attention_scalars(const struct spyre_kdesc *desc, uint32_t pos, uint64_t *scalars)
{
	uint32_t S, v, ch, ncf, ceff;

	if (!desc || !scalars)
		return spyre_error(-EINVAL, "spyre_kernel_attention_scalars: NULL argument");
	if (desc->op != SPYRE_KOP_ATTENTION || !(desc->flags & SPYRE_KF_DECODE))
		return spyre_error(-EINVAL, "spyre_kernel_attention_scalars: not a decode attention descriptor");
	if (!attn_dtype_ok(desc->dtype) || !desc->head_dim || desc->head_dim > 4096 || !desc->max_pos ||
	    desc->max_pos > (1u << 24))
		return spyre_error(-EINVAL, "spyre_kernel_attention_scalars: dtype, head_dim or max_pos invalid");
	if (pos >= desc->max_pos)
		return spyre_error(-EINVAL, "attention: decode position %u is past the cache (max_pos %u)", pos,
				   desc->max_pos);
	S = (uint32_t)kg_cdiv(desc->max_pos, F32_PER_STICK);
	v = pos + 1;		/* keys 0..pos are valid */
	scalars[0] = (uint64_t)pos * kg_pitch(desc->head_dim, desc->dtype);
	scalars[1] = (uint64_t)(S - v / F32_PER_STICK) * STICK;
	scalars[2] = (uint64_t)(v % F32_PER_STICK) * STICK;
	scalars[3] = (uint64_t)(v / F32_PER_STICK) * STICK;
	/* loop counts: full chunks 0..ceff hold valid keys; the part starting at chunk e has ceff + 1 - e */
	ch = decode_chunk_sticks(desc->head_dim, desc->dtype) * F32_PER_STICK;
	ncf = desc->max_pos / ch;
	ceff = pos / ch < ncf ? pos / ch : ncf - 1;
	for (uint32_t e = 0; e < SPYRE_MAX_CORES; e++)
		scalars[DECODE_BASE_SCALARS + e] = ncf && e <= ceff ? ceff + 1 - e : 0;
	return 0;
}

/* ============================== PAGED ATTENTION ========================== */

/*
 * Units (sequence s, a group of G KV heads g0..g0+G-1, query tokens
 * t0..t0+nt-1 of s) round-robin over the cores. A unit loads its context
 * length and its block-table row into the scratchpad, then loops over the
 * blocks its queries can see (the count from the context length: BNZ GTZ
 * on the keys left), the next block's id (LDX: times the block's bytes,
 * bounded by num_blocks) and its K and V rows of the group's heads in
 * flight while this block is computed (one contiguous transfer each when
 * the group is every KV head; two buffers, the loop body emitted once per
 * buffer): the causal mask once (a TRIL whose diagonal is a register: the
 * queries' position minus the block's first key), then per head of the
 * group the scores, the mask and the online softmax of the contiguous
 * attention above, and P V.
 */
enum { P_CTX = 1, P_REM, P_DIAG, P_BT, P_BLK, P_T, P_ONE };
#define PAGED_MAX_GROUP	16	/* KV heads per unit, at most */

/* What the loop of one paged unit emits from. */
struct paged_unit {
	struct unit u;
	struct bufs *b, sh;		/* per KV head of the group; the shared buffers */
	uint32_t G, kn, g0;
	uint32_t kb[2], vb[2];		/* K and V of a block, two of each */
};

/* LDX and BNZ GTZ through the emitters' counting (branch targets). */
static void pldx(struct att *a, uint32_t c, unsigned reg, uint32_t imm, unsigned ridx, uint32_t bound, uint32_t scale)
{
	if (a->counting)
		a->count++;
	else
		track(a, c, spyre_pb_ldx(a->g->pb, c, reg, imm, ridx, bound, scale, 0));
}

static void pbgtz(struct att *a, uint32_t c, unsigned reg, uint32_t target)
{
	if (a->counting)
		a->count++;
	else
		track(a, c, spyre_pb_bgtz(a->g->pb, c, reg, target));
}

/* The block at r[P_BLK]: its rows of the group's KV heads, K and V, in flight into buffers @x. */
static void paged_load(struct att *a, const struct paged_unit *pu, int x)
{
	for (int v = 0; v < 2; v++)
		dma(a, pu->u.core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.sp = v ? pu->vb[x] : pu->kb[x],
			.mem = { .sym = v ? a->svc : a->skc, .off = pu->g0 * a->shd, .reg = SPYRE_PB_REG(P_BLK) },
			.rows = pu->kn, .row_bytes = (uint32_t)(pu->G * a->shd), .mem_stride = (uint32_t)a->pk,
			.sp_stride = (uint32_t)(pu->G * a->shd), .async = true });
}

/*
 * Half @x of the block loop (buffers x): wait for this block's K; if a
 * block follows (keys left > block_size), its id (the next table entry,
 * bounded by num_blocks) and its K and V in flight into the other buffers;
 * the mask; per KV head the scores, the online softmax, P V (V waited for
 * after the first head's scores); the counters; then half 0 leaves to @end
 * when no key is left, half 1 goes back to @start while keys are left.
 */
static void paged_half(struct att *a, const struct paged_unit *pu, int x, uint32_t start, uint32_t end)
{
	const struct unit *u = &pu->u;
	const struct bufs *sh = &pu->sh;
	uint32_t c = u->core, kn = pu->kn, pc;

	ring(a, c, SPYRE_ISA_OP_WAIT, 0, 0, SPYRE_TOKEN_DMA, 1);	/* this block's K */
	ctl(a, c, SPYRE_ISA_OP_ADDI, P_T, (uint64_t)0 - kn, P_REM);
	pc = a->pc[c];
	pbgtz(a, c, P_T, pc + 2);
	ctl(a, c, SPYRE_ISA_OP_BNZ, P_ONE, pc + 5, 0);
	pldx(a, c, P_BLK, 4, SPYRE_PB_REG(P_BT), (uint32_t)a->g->d->num_blocks, kn * (uint32_t)a->pk);
	paged_load(a, pu, !x);
	/* mask: -inf where key c of the block is past query i's position: c - i >= 1 + diag */
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
					.d = sh->mb, .rows = (uint32_t)u->nt, .cols = kn, .ldd = sh->lds,
					.imm = spyre_f32_bits(NEG_BIG) });
	op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_TRIL, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
					.flags = SPYRE_IF_UPPER | SPYRE_IF_RDIAG, .d = sh->mb, .a = sh->mb,
					.rows = (uint32_t)u->nt, .cols = kn, .ldd = sh->lds, .lda = sh->lds, .imm = 1,
					.ldb = P_DIAG });
	for (uint32_t j = 0; j < pu->G; j++) {
		emit_scores(a, u, &pu->b[j], kn, pu->kb[x] + j * (uint32_t)a->shd);
		for (uint32_t q = 0; q < a->r; q++)
			op(a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
							.d = sh->sb + q * sh->lds * STICK, .a = sh->sb + q * sh->lds * STICK,
							.b = sh->mb, .rows = (uint32_t)u->nt, .cols = kn,
							.ldd = a->r * sh->lds, .lda = a->r * sh->lds, .ldb = sh->lds });
		emit_stats(a, c, &pu->b[j], kn, false);
		if (j == 0)	/* this block's V, in flight while the first head's scores were made */
			ring(a, c, SPYRE_ISA_OP_WAIT, 0, 0, SPYRE_TOKEN_DMA, 1);
		emit_pv(a, c, &pu->b[j], kn, false, pu->vb[x] + j * (uint32_t)a->shd);
	}
	ctl(a, c, SPYRE_ISA_OP_ADDI, P_BT, 4, P_BT);
	ctl(a, c, SPYRE_ISA_OP_ADDI, P_DIAG, (uint64_t)0 - kn, P_DIAG);
	ctl(a, c, SPYRE_ISA_OP_ADDI, P_REM, (uint64_t)0 - kn, P_REM);
	if (x) {
		pbgtz(a, c, P_REM, start);
	} else {
		pc = a->pc[c];
		pbgtz(a, c, P_REM, pc + 2);
		ctl(a, c, SPYRE_ISA_OP_BNZ, P_ONE, end, 0);
	}
}

/* Scratchpad of a paged unit: @G KV heads, @nt tokens (nq = nt * r query rows per head), key tiles of one block. */
static uint64_t paged_unit_bytes(const struct att *a, uint64_t G, uint64_t nt, uint64_t bs, uint64_t tbp,
				 uint64_t ctp)
{
	uint64_t nq = nt * a->r, ls = kg_pitch(bs, SPYRE_DT_FP32);

	return tbp + ctp + G * (nq * a->shd + nq * a->shd32 + 6 * vec_bytes(nq)) + 4 * bs * G * a->shd +
	       nq * ls + a->hd * kg_pitch(bs, a->dt) + nt * ls + (a->f32 ? 0 : bs * a->shd32);
}

int kg_gen_paged_attention(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	struct att a = { .g = g, .dt = d->dtype, .hd = d->head_dim, .heads = d->heads, .kvh = d->kv_heads,
			 .max_pos = d->max_pos, .m = d->m };
	uint64_t n = d->n, bs = d->block_size, nb = d->num_blocks;

	if (!a.heads || !n || !a.max_pos)
		return kg_fail(g, "heads, n (sequences) and max_pos must be non-zero");
	if (a.kvh && a.heads % a.kvh)
		return kg_fail(g, "heads %u is not a multiple of kv_heads %u", a.heads, a.kvh);
	if (a.m % n)
		return kg_fail(g, "m %llu rows are not a whole number per sequence (n %llu)", (unsigned long long)a.m,
			       (unsigned long long)n);
	if (a.heads > 4096 || a.max_pos > (1u << 24) || n > 65535)
		return kg_fail(g, "heads %u, max_pos %u or n %llu too large", a.heads, a.max_pos,
			       (unsigned long long)n);
	a.esz = SPYRE_DT_SIZE(a.dt);
	a.f32 = a.dt == SPYRE_DT_FP32;
	a.sh = kg_sticks(a.hd, a.dt);
	a.sh32 = kg_sticks(a.hd, SPYRE_DT_FP32);
	a.shd = (uint64_t)a.sh * STICK;
	a.shd32 = (uint64_t)a.sh32 * STICK;
	a.pq = a.heads * a.shd;
	a.pk = a.kvh * a.shd;
	if (kg_paged_check(g, a.pk))
		return -EINVAL;
	a.r = a.heads / a.kvh;
	a.scale = d->scale != 0.0f ? d->scale : (float)(1.0 / sqrt((double)a.hd));

	uint64_t qps = a.m / n, max_blocks = kg_cdiv(a.max_pos, bs), bb = bs * a.pk;
	uint64_t tbp = kg_pitch(max_blocks, SPYRE_DT_INT32), ctp = kg_pitch(n, SPYRE_DT_INT32);

	if (qps > a.max_pos)
		return kg_fail(g, "%llu rows per sequence do not fit a context of max_pos %u", (unsigned long long)qps,
			       a.max_pos);
	a.sq = kg_slot(g, "q", a.dt, a.m, (uint64_t)a.heads * a.hd, a.pq, SPYRE_SYM_IN);
	a.skc = kg_slot(g, "kc", a.dt, nb * bs, (uint64_t)a.kvh * a.hd, a.pk, SPYRE_SYM_IN);
	a.svc = kg_slot(g, "vc", a.dt, nb * bs, (uint64_t)a.kvh * a.hd, a.pk, SPYRE_SYM_IN);
	int sbt = kg_slot(g, "block_tables", SPYRE_DT_INT32, n, max_blocks, tbp, SPYRE_SYM_IN);
	int sct = kg_slot(g, "ctx_lens", SPYRE_DT_INT32, 1, n, ctp, SPYRE_SYM_IN);

	a.so = kg_slot(g, "o", a.dt, a.m, (uint64_t)a.heads * a.hd, a.pq, SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;

	/*
	 * Tokens per unit: enough units (one per KV head) for the cores. Then the
	 * KV heads per unit: the most (a divisor of kv_heads) that still gives
	 * as many units as that: a block's rows of more heads are one longer
	 * transfer (every head: one contiguous run) and the mask is made once.
	 * Then, until a unit fits, fewer heads, then fewer tokens.
	 */
	uint64_t per = (uint64_t)n * a.kvh, tb = kg_max64(1, kg_min64(qps, kg_cdiv(g->cores, per)));
	uint64_t nt = kg_cdiv(qps, tb), want = kg_min64(g->cores, per * kg_cdiv(qps, nt));
	uint32_t G = 1;

	for (uint32_t x = a.kvh < PAGED_MAX_GROUP ? a.kvh : PAGED_MAX_GROUP; x >= 1; x--)
		if (a.kvh % x == 0 && n * (a.kvh / x) * kg_cdiv(qps, nt) >= want) {
			G = x;
			break;
		}
	while (paged_unit_bytes(&a, G, nt, bs, tbp, ctp) > g->sp_bytes && (G > 1 || nt > 1)) {
		if (G > 1) {
			do
				G--;
			while (a.kvh % G);
		} else {
			nt = kg_cdiv(nt, 2);
		}
	}
	if (paged_unit_bytes(&a, G, nt, bs, tbp, ctp) > g->sp_bytes)
		return kg_fail(g, "paged attention: one token of %u heads x head_dim %u with blocks of %llu keys "
			       "does not fit a scratchpad of %u bytes", a.r, a.hd, (unsigned long long)bs, g->sp_bytes);
	a.ldk = G * a.sh;

	uint64_t ntb = kg_cdiv(qps, nt), ng = a.kvh / G, total = n * ng * ntb;
	uint32_t kn = (uint32_t)bs;

	for (uint64_t ui = 0; ui < total && !g->failed; ui++) {
		uint64_t s = ui / (ng * ntb), rest = ui % (ng * ntb), t0 = (rest % ntb) * nt;
		uint32_t g0 = (uint32_t)(rest / ntb) * G, c = (uint32_t)(ui % g->cores), tb_sp, ct_sp, start, end;
		struct paged_unit pu = { .G = G, .kn = kn, .g0 = g0 };
		struct unit u = { .g = g0, .j0 = 0, .nj = a.r, .t0 = s * qps + t0, .nt = kg_min64(nt, qps - t0),
				  .nparts = 1, .core = c };
		struct bufs b[PAGED_MAX_GROUP], sh;	/* one per KV head of the group */

		memset(&sh, 0, sizeof(sh));
		sh.nq = (uint32_t)(u.nt * a.r);
		sh.kt = kn;
		sh.vs = (uint32_t)vec_bytes(sh.nq);
		sh.lds = kg_sticks(kn, SPYRE_DT_FP32);
		sh.ldkt = kg_sticks(kn, a.dt);
		kg_sp_reset(g, c);
		tb_sp = kg_sp_alloc(g, c, tbp);
		ct_sp = kg_sp_alloc(g, c, ctp);
		for (int x = 0; x < 2; x++) {
			pu.kb[x] = kg_sp_alloc(g, c, bs * G * a.shd);
			pu.vb[x] = kg_sp_alloc(g, c, bs * G * a.shd);
		}
		sh.sb = kg_sp_alloc(g, c, (uint64_t)sh.nq * sh.lds * STICK);
		sh.xt = kg_sp_alloc(g, c, (uint64_t)a.hd * sh.ldkt * STICK);
		sh.mb = kg_sp_alloc(g, c, u.nt * sh.lds * STICK);
		if (!a.f32)
			sh.vf = kg_sp_alloc(g, c, bs * a.shd32);
		for (uint32_t j = 0; j < G; j++) {
			b[j] = sh;
			b[j].qb = kg_sp_alloc(g, c, (uint64_t)sh.nq * a.shd);
			b[j].acc = kg_sp_alloc(g, c, (uint64_t)sh.nq * a.shd32);
			b[j].m = kg_sp_alloc(g, c, sh.vs);
			b[j].mn = kg_sp_alloc(g, c, sh.vs);
			b[j].mt = kg_sp_alloc(g, c, sh.vs);
			b[j].al = kg_sp_alloc(g, c, sh.vs);
			b[j].lv = kg_sp_alloc(g, c, sh.vs);
			b[j].lt = kg_sp_alloc(g, c, sh.vs);
		}
		if (g->failed)
			break;
		/* the step's tables: the context lengths and this sequence's block-table row */
		dma(&a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .sp = ct_sp, .mem = { .sym = sct },
								     .row_bytes = (uint32_t)ctp });
		dma(&a, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .sp = tb_sp, .mem = { .sym = sbt, .off = s * tbp },
								     .row_bytes = (uint32_t)tbp });
		for (uint32_t j = 0; j < G; j++) {
			struct unit uj = u;

			uj.g = g0 + j;
			emit_load_q(&a, &uj, &b[j], SPYRE_ISA_OP_LOAD);
			op(&a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = b[j].m, .rows = 1, .cols = sh.nq,
							 .imm = spyre_f32_bits(NEG_BIG) });
			op(&a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = b[j].lv, .rows = 1, .cols = sh.nq,
							 .imm = 0 });
			op(&a, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_FILL, .dt = SPYRE_DT_FP32,
							 .dt2 = SPYRE_DT_FP32, .d = b[j].acc, .rows = sh.nq, .cols = a.hd,
							 .ldd = a.sh32, .imm = 0 });
		}
		/*
		 * ctx = ctx_lens[s] (<= max_pos); the queries' positions are ctx - qps + t0 + i:
		 * keys left = ctx - qps + t0 + nt, the mask diagonal of block 0 = ctx - qps + t0.
		 */
		track(&a, c, spyre_pb_ldx(g->pb, c, P_CTX, ct_sp + (uint32_t)(s * 4), 0, a.max_pos + 1, 1, 0));
		ctl(&a, c, SPYRE_ISA_OP_ADDI, P_REM, t0 + u.nt - qps, P_CTX);
		ctl(&a, c, SPYRE_ISA_OP_ADDI, P_DIAG, t0 - qps, P_CTX);
		ctl(&a, c, SPYRE_ISA_OP_LI, P_BT, tb_sp, 0);
		/* block 0 (always inside the context) in flight before the loop */
		pu.u = u;
		pu.b = b;
		pu.sh = sh;
		pldx(&a, c, P_BLK, 0, SPYRE_PB_REG(P_BT), (uint32_t)nb, (uint32_t)bb);
		paged_load(&a, &pu, 0);
		ctl(&a, c, SPYRE_ISA_OP_LI, P_ONE, 1, 0);
		/*
		 * The loop: two halves (buffers 0 and 1: tensor ops take no address
		 * register), each: block i's K has arrived; block i + 1's K and V go in
		 * flight into the other buffers when there is a block i + 1; block i
		 * is computed. Half 0 leaves to the end when no key is left, half 1
		 * goes back to half 0 while keys are left.
		 */
		a.counting = true;
		a.count = 0;
		paged_half(&a, &pu, 1, 0, 0);
		a.counting = false;
		start = a.pc[c];
		end = start + 2 * a.count + 1;
		paged_half(&a, &pu, 0, start, end);
		paged_half(&a, &pu, 1, start, end);
		if (a.pc[c] != end)
			kg_fail(g, "internal: paged attention loop ends at %u, not %u", a.pc[c], end);
		for (uint32_t j = 0; j < G; j++) {
			struct unit uj = u;

			uj.g = g0 + j;
			emit_normalize(&a, c, &b[j]);
			emit_load_q(&a, &uj, &b[j], SPYRE_ISA_OP_STORE);
		}
	}
	return kg_ok(g);
}
