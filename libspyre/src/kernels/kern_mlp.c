// SPDX-License-Identifier: MIT
/*
 * MLP: Y = (SiLU(X Wg) * (X Wu)) Wd (SwiGLU) or Y = GELU(X Wu) Wd
 * (SPYRE_KF_GELU), X [m x k], Wg/Wu [k x n], Wd [n x k], k = hidden,
 * n = ffn.
 *
 * FUSED: each of the P cores used takes a block of FFN columns (whole
 * sticks). Per tile of mt rows it computes G = X Wg_blk and U = X Wu_blk in
 * fp32 (k tiled, the X tile shared by both), H = SiLU(G) * U in place, and
 * its partial Y_c = H Wd[blk, :] in fp32, never leaving the scratchpad. The
 * partials are summed on chip by a ring reduce-scatter: hidden is cut into P
 * chunks (whole sticks); chunk q's running sum starts at core q and travels
 * q -> q+1 -> ... -> q-1, each core adding its own partial of that chunk,
 * which it computes just before (a matmul of H with the chunk's columns of
 * Wd). So no core holds all of a partial Y nor receives more than one
 * chunk per step, and core q-1 rounds chunk q once and stores it. When the
 * block's G and U do not fit beside an X tile, the block is done in R
 * rounds of sub-blocks, the owner accumulating its chunk over the rounds.
 * mt, R, the k tile, whether X stays resident and how a chunk is cut into
 * messages are chosen by the cost model's formulas.
 *
 * UNFUSED (SPYRE_KSTRAT_UNFUSED): the same math as a framework without
 * fusion runs it, passes through device memory in one program: G = X Wg
 * and U = X Wu to the work slot (fp32), BARRIER, H = SiLU(G) * U to work,
 * BARRIER, Y = H Wd. Each projection is the shared GEMM (kern_linear.c)
 * split the way its estimate prefers.
 *
 * H is kept in fp32 in both, so H Wd runs as an fp32 matmul (Wd's tiles are
 * cast in the scratchpad): the one rounding is Y's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kern.h"

#define STICK ((uint64_t)SPYRE_STICK_BYTES)
#define MAX_INSNS 65536u
#define RING_TAG 1

struct mlp {
	struct kgen *g;
	uint32_t dt, e;			/* dtype, its element bytes */
	uint64_t m, k, n;		/* rows, hidden, ffn */
	bool gelu;
	int sx, sg, su, sd, sy;		/* slots (sg -1 with GELU) */
	uint64_t xp, wp, dp;		/* pitches: X/Y [.. x k], Wg/Wu [.. x n], Wd [.. x k] */
	uint64_t spc;			/* elements per stick of dt */
	uint32_t P;			/* cores in the ring */
};

/* ---- fused: plan ------------------------------------------------------------- */

struct fplan {
	uint64_t mt, kt, T;	/* rows per tile, k tile, messages per chunk */
	uint32_t R;		/* rounds (sub-blocks of a core's FFN block) */
	bool xres;		/* the X tile holds all of k for the rounds */
	uint64_t cyc, insns;
};

static struct kg_range ffn_block(const struct mlp *p, uint32_t c)
{
	return kg_split(p->n, p->P, c, p->spc);
}

static struct kg_range sub_block(const struct mlp *p, struct kg_range blk, uint32_t R, uint32_t r)
{
	struct kg_range s = kg_split(blk.count, R, r, p->spc);

	s.start += blk.start;
	return s;
}

static struct kg_range chunk(const struct mlp *p, uint32_t q)
{
	return kg_split(p->k, p->P, q, p->spc);
}

static struct kg_range segment(const struct mlp *p, uint32_t q, uint64_t T, uint64_t t)
{
	struct kg_range c = chunk(p, q), s = kg_split(c.count, (uint32_t)T, (uint32_t)t, p->spc);

	s.start += c.start;
	return s;
}

/* The widest FFN sub-block (fw), hidden chunk (cw) and message segment (sw) of a plan. */
static void fdims(const struct mlp *p, const struct fplan *f, uint64_t *fw, uint64_t *cw, uint64_t *sw)
{
	uint64_t fs = kg_cdiv(kg_cdiv(p->n, p->spc), p->P), cs = kg_cdiv(kg_cdiv(p->k, p->spc), p->P);

	*fw = kg_min64(kg_cdiv(fs, f->R) * p->spc, p->n);
	*cw = kg_min64(cs * p->spc, p->k);
	*sw = kg_min64(kg_cdiv(cs, f->T) * p->spc, p->k);
}

/* Scratchpad layout of a plan (offsets from 0); returns the bytes needed. */
struct flayout {
	uint64_t x, h, acc, w, u, wd, wd32, rb, out, end;
	uint64_t xld, hld, accld, wld, rbld, outld, wdld, wd32ld;
};

static uint64_t flayout(const struct mlp *p, const struct fplan *f, struct flayout *l)
{
	uint64_t fw, cw, sw, kx = f->xres ? p->k : kg_min64(f->kt, p->k), b1, b3;

	fdims(p, f, &fw, &cw, &sw);
	memset(l, 0, sizeof(*l));
	l->xld = kg_rup(kx * p->e, STICK) / STICK;
	l->hld = kg_rup(fw * 4, STICK) / STICK;
	l->wld = kg_rup(fw * p->e, STICK) / STICK;
	l->rbld = kg_rup(sw * 4, STICK) / STICK;
	l->outld = kg_rup(sw * p->e, STICK) / STICK;
	l->wdld = l->outld;
	l->wd32ld = l->rbld;
	/* persistent: X tile, H (= G, or U with GELU), the owner's accumulator over rounds */
	l->x = 0;
	l->h = l->x + f->mt * l->xld * STICK;
	l->acc = l->h + f->mt * l->hld * STICK;
	if (f->R > 1) {
		l->accld = kg_rup((p->P > 1 ? cw : p->k) * 4, STICK) / STICK;
		l->w = l->acc + f->mt * l->accld * STICK;
	} else {
		l->w = l->acc;
	}
	/* phase 1: a W tile and U; phase 3: Wd tiles, the running sum, the output tile */
	l->u = l->w + kg_min64(f->kt, p->k) * l->wld * STICK;
	b1 = l->u + (p->gelu ? 0 : f->mt * l->hld * STICK);
	l->wd = l->w;
	l->wd32 = l->wd + (p->e == 4 ? 0 : fw * l->wdld * STICK);
	l->rb = l->wd32 + fw * l->wd32ld * STICK;
	l->out = l->rb + f->mt * l->rbld * STICK;
	b3 = l->out + (p->e == 4 ? 0 : f->mt * l->outld * STICK);
	l->end = kg_max64(b1, b3);
	if (p->gelu)
		l->u = l->h;	/* U accumulates in H's place, GELU in place */
	if (fw > 0xffff || sw > 0xffff || l->xld > 0xffff || l->accld > 0xffff)
		return UINT64_MAX;
	return l->end;
}

static uint64_t fplan_cost(const struct mlp *p, struct fplan *f, uint32_t sp_bytes)
{
	struct flayout l;
	uint64_t fw, cw, sw;
	uint64_t segs = p->P > 1 ? (uint64_t)p->P * f->T : f->T, M = kg_cdiv(p->m, f->mt), mt = f->mt;
	uint64_t KT = kg_cdiv(p->k, f->kt), nw = p->gelu ? 1 : 2, per_m = 0, ins = 0;
	uint32_t a = p->P;

	if (flayout(p, f, &l) > sp_bytes)
		return 0;
	fdims(p, f, &fw, &cw, &sw);
	/* X: once per row tile, or per round and k tile */
	if (f->xres || KT == 1) {
		per_m += kg_cyc_dma(mt * l.xld * STICK, a);
		ins++;
	} else {
		per_m += f->R * KT * kg_cyc_dma(mt * kg_rup(f->kt * p->e, STICK), a);
		ins += f->R * KT;
	}
	/* per round: gate/up, activation, the ring */
	uint64_t round = KT * nw * (kg_cyc_dma(kg_min64(f->kt, p->k) * l.wld * STICK, a) +
				    kg_cyc_mm(p->dt, SPYRE_DT_FP32, mt, fw, kg_min64(f->kt, p->k)));
	uint64_t ri = KT * nw * 2 + (p->gelu ? 1 : 2);

	round += p->gelu ? kg_cyc_sfu(mt * fw, SPYRE_TM_SFU_TRANSCENDENTAL_CYCLES, mt * fw * 8) :
		 kg_cyc_sfu(mt * fw, SPYRE_TM_SFU_TRANSCENDENTAL_CYCLES, mt * fw * 8) +
		 kg_cyc_sfu(mt * fw, 1, mt * fw * 12);
	round += segs * (kg_cyc_dma(fw * sw * p->e, a) + (p->e != 4 ? kg_cyc_sfu(fw * sw, 1, fw * sw * (p->e + 4)) : 0) +
			 kg_cyc_mm(SPYRE_DT_FP32, SPYRE_DT_FP32, mt, sw, fw) +
			 (p->P > 1 ? 2 + kg_cdiv(mt * sw * 4, SPYRE_TM_RING_BYTES_PER_CYCLE) : 0));
	ri += segs * (p->P > 1 ? 5 : 3);
	/* the owner's chunk: add over rounds, one rounding, store */
	round += f->T * ((f->R > 1 && p->P > 1 ? kg_cyc_sfu(mt * sw, 1, mt * sw * 12) : 0));
	per_m += f->R * round + f->T * (kg_cyc_sfu(mt * sw, 1, mt * sw * (4 + p->e)) +
					kg_cyc_dma(mt * sw * p->e, a));
	ins += f->R * (ri + f->T) + 2 * f->T;
	if (M * ins > MAX_INSNS)
		return 0;
	f->cyc = M * per_m;
	f->insns = M * ins;
	return f->cyc;
}

static bool fplan_best(const struct mlp *p, uint32_t sp_bytes, struct fplan *best)
{
	uint64_t ms[64], ks[64], ts[64], rs[64];
	uint64_t fmin = ffn_block(p, p->P - 1).count;	/* the narrowest block */
	uint32_t nm = kg_row_tiles(p->m, 12, ms, 64);
	uint32_t nk = kg_tile_sizes(p->k, p->spc, 0xffff / p->spc * p->spc, 12, ks, 64);
	uint64_t cs = kg_cdiv(kg_cdiv(p->k, p->spc), p->P);	/* sticks of the widest chunk */
	uint32_t nt = kg_tile_sizes(cs, 1, UINT64_MAX, 12, ts, 16);
	uint32_t nr = kg_tile_sizes(kg_cdiv(fmin, p->spc), 1, UINT64_MAX, 12, rs, 16);
	bool found = false;

	/* ts holds segment widths in sticks: turn them into counts T; rs: sub-block counts R */
	for (uint32_t i = 0; i < nt; i++)
		ts[i] = kg_cdiv(cs, ts[i]);
	for (uint32_t i = 0; i < nr; i++)
		rs[i] = kg_cdiv(kg_cdiv(fmin, p->spc), rs[i]);
	for (uint32_t a = 0; a < nm; a++)
		for (uint32_t r = 0; r < nr; r++)
			for (uint32_t b = 0; b < nk; b++)
				for (uint32_t t = 0; t < nt; t++)
					for (int xr = 0; xr < 2; xr++) {
						struct fplan f = { .mt = ms[a], .kt = ks[b], .T = ts[t], .R = (uint32_t)rs[r],
								   .xres = xr };

						if (xr && ks[b] >= p->k)
							continue;
						if (!fplan_cost(p, &f, sp_bytes))
							continue;
						if (!found || f.cyc < best->cyc || (f.cyc == best->cyc && f.insns < best->insns)) {
							*best = f;
							found = true;
						}
					}
	return found;
}

/* ---- fused: emission ------------------------------------------------------------- */

static void dma(struct kgen *g, uint32_t c, unsigned op, uint64_t sp, int slot, uint64_t off, uint64_t rows,
		uint64_t row_bytes, uint64_t mem_stride, uint64_t sp_stride)
{
	spyre_pb_dma(g->pb, c, op, &(struct spyre_pb_dma){
		.sp = (uint32_t)sp, .mem = { .sym = slot, .off = off }, .rows = (uint32_t)rows,
		.row_bytes = (uint32_t)row_bytes, .mem_stride = (uint32_t)mem_stride,
		.sp_stride = (uint32_t)sp_stride });
}

static void op(struct kgen *g, uint32_t c, const struct spyre_pb_op *o)
{
	spyre_pb_op(g->pb, c, o);
}

/* Load Wd[blk rows, seg cols] and make its fp32 copy; returns the fp32 tile's offset. */
static uint64_t load_wd(const struct mlp *p, uint32_t c, const struct flayout *l, struct kg_range blk,
			struct kg_range seg)
{
	struct kgen *g = p->g;
	uint64_t dst = p->e == 4 ? l->wd32 : l->wd, ld = p->e == 4 ? l->wd32ld : l->wdld;

	dma(g, c, SPYRE_ISA_OP_LOAD, dst, p->sd, blk.start * p->dp + seg.start * p->e, blk.count,
	    kg_rup(seg.count * p->e, STICK), p->dp, ld * STICK);
	if (p->e != 4)
		op(g, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_CAST, .dt = p->dt, .dt2 = SPYRE_DT_FP32,
						 .d = (uint32_t)l->wd32, .a = (uint32_t)l->wd, .rows = (uint32_t)blk.count,
						 .cols = (uint32_t)seg.count, .ldd = (uint32_t)l->wd32ld,
						 .lda = (uint32_t)l->wdld });
	return l->wd32;
}

/* sum (fp32 at src, ld sticks) rounded once to Y and stored: rows [rs, rs + rows), columns seg */
static void store_y(const struct mlp *p, uint32_t c, const struct flayout *l, uint64_t src, uint64_t ld,
		    uint64_t rs, uint64_t rows, struct kg_range seg)
{
	struct kgen *g = p->g;
	uint64_t from = src, fld = ld;

	if (p->e != 4) {
		op(g, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_CAST, .dt = SPYRE_DT_FP32, .dt2 = p->dt,
						 .d = (uint32_t)l->out, .a = (uint32_t)src, .rows = (uint32_t)rows,
						 .cols = (uint32_t)seg.count, .ldd = (uint32_t)l->outld, .lda = (uint32_t)ld });
		from = l->out;
		fld = l->outld;
	}
	dma(g, c, SPYRE_ISA_OP_STORE, from, p->sy, rs * p->xp + seg.start * p->e, rows, kg_rup(seg.count * p->e, STICK),
	    p->xp, fld * STICK);
}

static void emit_fused_core(const struct mlp *p, const struct fplan *f, const struct flayout *l, uint32_t c)
{
	struct kgen *g = p->g;
	struct kg_range blk = ffn_block(p, c);
	uint64_t KT = kg_cdiv(p->k, f->kt), segs_T = f->T;
	uint32_t P = p->P, next = (c + 1) % P, prev = (c + P - 1) % P;
	uint64_t owned_chunk = (c + 1) % P;	/* the chunk this core rounds and stores */
	uint64_t ochunk0 = chunk(p, (uint32_t)owned_chunk).start;

	for (uint64_t rs = 0; rs < p->m; rs += f->mt) {
		uint64_t rows = kg_min64(f->mt, p->m - rs);
		int64_t cur_x = -1;

		for (uint32_t r = 0; r < f->R; r++) {
			struct kg_range sb = sub_block(p, blk, f->R, r);

			/* phase 1: G = X Wg[:, sb], U = X Wu[:, sb], k tiled, fp32 */
			for (uint64_t ki = 0; ki < KT; ki++) {
				uint64_t k0 = ki * f->kt, kn = kg_min64(f->kt, p->k - k0);
				int64_t xid = (f->xres || KT == 1) ? 0 : (int64_t)ki;
				uint64_t xk0 = (f->xres || KT == 1) ? 0 : k0;

				if (cur_x != xid) {
					uint64_t xk1 = (f->xres || KT == 1) ? p->k : k0 + kn;

					dma(g, c, SPYRE_ISA_OP_LOAD, l->x, p->sx, rs * p->xp + xk0 * p->e, rows,
					    kg_rup((xk1 - xk0) * p->e, STICK), p->xp, l->xld * STICK);
					cur_x = xid;
				}
				for (int w = p->gelu ? 1 : 0; w < 2; w++) {
					dma(g, c, SPYRE_ISA_OP_LOAD, l->w, w ? p->su : p->sg, k0 * p->wp + sb.start * p->e,
					    kn, kg_rup(sb.count * p->e, STICK), p->wp, l->wld * STICK);
					op(g, c, &(struct spyre_pb_op){
						.op = SPYRE_ISA_OP_MATMUL, .dt = p->dt, .dt2 = SPYRE_DT_FP32,
						.flags = ki ? SPYRE_IF_ACC : 0, .d = (uint32_t)(w ? l->u : l->h),
						.a = (uint32_t)(l->x + (k0 - xk0) * p->e), .b = (uint32_t)l->w,
						.rows = (uint32_t)rows, .cols = (uint32_t)sb.count, .k = (uint32_t)kn,
						.ldd = (uint32_t)l->hld, .lda = (uint32_t)l->xld, .ldb = (uint32_t)l->wld });
				}
			}
			/* phase 2: H = SiLU(G) * U (or GELU(U)) in fp32, in place */
			if (p->gelu) {
				op(g, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_GELU, .dt = SPYRE_DT_FP32,
								 .dt2 = SPYRE_DT_FP32, .d = (uint32_t)l->h,
								 .a = (uint32_t)l->h, .rows = (uint32_t)rows,
								 .cols = (uint32_t)sb.count, .ldd = (uint32_t)l->hld,
								 .lda = (uint32_t)l->hld });
			} else {
				op(g, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SILU, .dt = SPYRE_DT_FP32,
								 .dt2 = SPYRE_DT_FP32, .d = (uint32_t)l->h,
								 .a = (uint32_t)l->h, .rows = (uint32_t)rows,
								 .cols = (uint32_t)sb.count, .ldd = (uint32_t)l->hld,
								 .lda = (uint32_t)l->hld });
				op(g, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32,
								 .dt2 = SPYRE_DT_FP32, .d = (uint32_t)l->h,
								 .a = (uint32_t)l->h, .b = (uint32_t)l->u,
								 .rows = (uint32_t)rows, .cols = (uint32_t)sb.count,
								 .ldd = (uint32_t)l->hld, .lda = (uint32_t)l->hld,
								 .ldb = (uint32_t)l->hld });
			}
			/* phase 3: partials of Y = H Wd[sb, :], summed over the ring */
			struct spyre_pb_op mm = { .op = SPYRE_ISA_OP_MATMUL, .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
						  .a = (uint32_t)l->h, .rows = (uint32_t)rows, .k = (uint32_t)sb.count,
						  .lda = (uint32_t)l->hld };

			if (P == 1) {
				for (uint64_t t = 0; t < segs_T; t++) {
					struct kg_range seg = segment(p, 0, f->T, t);
					uint64_t dst = f->R > 1 ? l->acc + seg.start * 4 : l->rb;
					uint64_t dld = f->R > 1 ? l->accld : l->rbld;

					if (!seg.count)
						continue;
					mm.b = (uint32_t)load_wd(p, c, l, sb, seg);
					mm.ldb = (uint32_t)l->wd32ld;
					mm.d = (uint32_t)dst;
					mm.ldd = (uint32_t)dld;
					mm.cols = (uint32_t)seg.count;
					mm.flags = r ? SPYRE_IF_ACC : 0;
					op(g, c, &mm);
					if (r == f->R - 1)
						store_y(p, c, l, dst, dld, rs, rows, seg);
				}
				continue;
			}
			for (uint32_t s = 0; s < P; s++) {
				uint32_t q = (c + P - s) % P;

				for (uint64_t t = 0; t < segs_T; t++) {
					struct kg_range seg = segment(p, q, f->T, t);
					uint32_t bytes = (uint32_t)(rows * kg_rup(seg.count * 4, STICK));

					if (!seg.count)
						continue;
					mm.b = (uint32_t)load_wd(p, c, l, sb, seg);
					mm.ldb = (uint32_t)l->wd32ld;
					mm.cols = (uint32_t)seg.count;
					mm.ldd = (uint32_t)(kg_rup(seg.count * 4, STICK) / STICK);	/* tight: the message */
					mm.d = (uint32_t)l->rb;
					if (s == 0) {
						/* the chain of chunk q starts here */
						mm.flags = 0;
						op(g, c, &mm);
						spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_SEND, (uint32_t)l->rb, next, RING_TAG, bytes);
						continue;
					}
					spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_RECV, (uint32_t)l->rb, prev, RING_TAG, bytes);
					if (s < P - 1 || f->R == 1) {
						mm.flags = SPYRE_IF_ACC;
						op(g, c, &mm);
						if (s < P - 1)
							spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_SEND, (uint32_t)l->rb, next, RING_TAG,
								      bytes);
						else
							store_y(p, c, l, l->rb, mm.ldd, rs, rows, seg);
						continue;
					}
					/* the owner over R rounds: acc (+)= own partial, += the others' */
					uint64_t acc = l->acc + (seg.start - ochunk0) * 4;

					mm.d = (uint32_t)acc;
					mm.ldd = (uint32_t)l->accld;
					mm.flags = r ? SPYRE_IF_ACC : 0;
					op(g, c, &mm);
					op(g, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32,
									 .dt2 = SPYRE_DT_FP32, .d = (uint32_t)acc,
									 .a = (uint32_t)acc, .b = (uint32_t)l->rb,
									 .rows = (uint32_t)rows, .cols = (uint32_t)seg.count,
									 .ldd = (uint32_t)l->accld, .lda = (uint32_t)l->accld,
									 .ldb = (uint32_t)(kg_rup(seg.count * 4, STICK) / STICK) });
					if (r == f->R - 1)
						store_y(p, c, l, acc, l->accld, rs, rows, seg);
				}
			}
		}
	}
}

/* kg_choose_parts()'s estimate of the fused plan on a ring of @parts cores. */
static bool ring_cost(void *ctx, uint32_t parts, uint64_t *cycles)
{
	struct mlp *p = ctx;
	struct fplan c;

	p->P = parts;
	if (!fplan_best(p, p->g->sp_bytes, &c))
		return false;
	*cycles = c.cyc;
	return true;
}

static int gen_fused(struct mlp *p)
{
	struct kgen *g = p->g;
	struct fplan f;
	struct flayout l;

	/* the cores in the ring: FFN blocks are whole sticks (kg_choose_parts) */
	p->P = kg_choose_parts(kg_cdiv(p->n, p->spc), g->cores, ring_cost, p);
	if (!fplan_best(p, g->sp_bytes, &f))
		return kg_fail(g, "fused mlp m %llu hidden %llu ffn %llu on %u cores: no tiling fits a scratchpad of "
			       "%u bytes in %u instructions", (unsigned long long)p->m, (unsigned long long)p->k,
			       (unsigned long long)p->n, p->P, g->sp_bytes, MAX_INSNS);
	flayout(p, &f, &l);
	for (uint32_t c = 0; c < p->P; c++) {
		kg_sp_reset(g, c);
		kg_sp_alloc(g, c, l.end);
		if (g->failed)
			return -EINVAL;
		emit_fused_core(p, &f, &l, c);
	}
	return kg_ok(g);
}

/* ---- unfused --------------------------------------------------------------------- */

/* The cheaper of the two splits of a projection over @cores cores, by estimate (*cyc: its cycles). */
static uint32_t pick_split(struct kgen *g, const struct kg_gemm *j, uint32_t cores, uint32_t max_insns, uint64_t *cyc)
{
	uint64_t cm = UINT64_MAX, cn = UINT64_MAX;
	int failed = g->failed;

	if (kg_gemm_split(g, j, SPYRE_KSTRAT_SPLIT_M, cores, max_insns, 0, &cm, NULL))
		cm = UINT64_MAX;
	g->failed = failed;
	if (kg_gemm_split(g, j, SPYRE_KSTRAT_SPLIT_N, cores, max_insns, 0, &cn, NULL))
		cn = UINT64_MAX;
	g->failed = failed;
	*cyc = cm < cn ? cm : cn;
	return cm < cn ? SPYRE_KSTRAT_SPLIT_M : SPYRE_KSTRAT_SPLIT_N;
}

/*
 * H = SiLU(G) * U (or U = GELU(U)) over work, split over @cores cores (rows,
 * or sticks of columns when there are fewer rows than cores), tiled through
 * the scratchpad. Returns the cores used; *@cyc the slowest core's cycles.
 */
static uint32_t act_pass(struct mlp *p, uint32_t cores, int swork, uint64_t gbase, uint64_t ubase, uint64_t pitch,
			 int emit, uint64_t *cyc)
{
	struct kgen *g = p->g;
	uint64_t spc = STICK / 4, sticks = kg_cdiv(p->n, spc);
	bool by_rows = p->m >= cores;
	uint32_t used = 0;
	uint64_t nbuf = p->gelu ? 1 : 2;

	*cyc = 0;
	for (uint32_t c = 0; c < cores; c++) {
		struct kg_range rr = { 0, p->m }, cr = { 0, p->n };
		uint64_t cc = 0;

		if (by_rows) {
			rr = kg_split(p->m, cores, c, 1);
		} else {
			struct kg_range s = kg_split(sticks, cores, c, 1);

			cr.start = s.start * spc;
			cr.count = kg_min64((s.start + s.count) * spc, p->n) - kg_min64(cr.start, p->n);
		}
		if (!rr.count || !cr.count)
			continue;
		used |= 1u << c;
		/* tiles: columns in whole sticks, as many rows as fit */
		uint64_t cw = kg_min64(cr.count, kg_min64(g->sp_bytes / (nbuf * STICK), 0xffff / spc) * spc);
		uint64_t tp = kg_rup(cw * 4, STICK), tr = kg_min64(rr.count, g->sp_bytes / (nbuf * tp));

		for (uint64_t c0 = 0; c0 < cr.count; c0 += cw)
			for (uint64_t r0 = 0; r0 < rr.count; r0 += tr) {
				uint64_t w = kg_min64(cw, cr.count - c0), rows = kg_min64(tr, rr.count - r0);
				uint64_t off = (rr.start + r0) * pitch + (cr.start + c0) * 4, bytes = kg_rup(w * 4, STICK);
				uint64_t ub = rows * tp;

				cc += (nbuf + 1) * kg_cyc_dma(rows * bytes, cores) +
				      kg_cyc_sfu(rows * w, SPYRE_TM_SFU_TRANSCENDENTAL_CYCLES, rows * w * 8) +
				      (p->gelu ? 0 : kg_cyc_sfu(rows * w, 1, rows * w * 12));
				if (!emit)
					continue;
				dma(g, c, SPYRE_ISA_OP_LOAD, 0, swork, ubase + off, rows, bytes, pitch, tp);
				if (!p->gelu)
					dma(g, c, SPYRE_ISA_OP_LOAD, ub, swork, gbase + off, rows, bytes, pitch, tp);
				op(g, c, &(struct spyre_pb_op){ .op = p->gelu ? SPYRE_ISA_OP_GELU : SPYRE_ISA_OP_SILU,
								 .dt = SPYRE_DT_FP32, .dt2 = SPYRE_DT_FP32,
								 .d = (uint32_t)(p->gelu ? 0 : ub), .a = (uint32_t)(p->gelu ? 0 : ub),
								 .rows = (uint32_t)rows, .cols = (uint32_t)w,
								 .ldd = (uint32_t)(tp / STICK), .lda = (uint32_t)(tp / STICK) });
				if (!p->gelu)
					op(g, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MUL, .dt = SPYRE_DT_FP32,
									 .dt2 = SPYRE_DT_FP32, .d = (uint32_t)ub,
									 .a = (uint32_t)ub, .b = 0, .rows = (uint32_t)rows,
									 .cols = (uint32_t)w, .ldd = (uint32_t)(tp / STICK),
									 .lda = (uint32_t)(tp / STICK),
									 .ldb = (uint32_t)(tp / STICK) });
				dma(g, c, SPYRE_ISA_OP_STORE, p->gelu ? 0 : ub, swork, (p->gelu ? ubase : gbase) + off, rows,
				    bytes, pitch, tp);
			}
		*cyc = kg_max64(*cyc, cc);
	}
	return used;
}

struct uplan {
	uint32_t cores, s_g, s_u, s_d;
	uint64_t cyc;
};

/*
 * The unfused program on @cores cores: each projection split the way its
 * estimate prefers, the passes' slowest cores summed (the barriers line
 * them up). 0 if a pass cannot be tiled.
 */
static uint64_t uplan_cost(struct mlp *p, const struct kg_gemm *jg, const struct kg_gemm *ju,
			   const struct kg_gemm *jd, uint32_t cores, uint32_t budget, struct uplan *u)
{
	uint64_t cg = 0, cu, cd, ca;

	u->cores = cores;
	u->s_u = pick_split(p->g, ju, cores, budget, &cu);
	u->s_g = u->s_u;
	if (!p->gelu)
		u->s_g = pick_split(p->g, jg, cores, budget, &cg);
	u->s_d = pick_split(p->g, jd, cores, budget, &cd);
	act_pass(p, cores, 0, 0, 0, kg_pitch(p->n, SPYRE_DT_FP32), 0, &ca);
	if (cu == UINT64_MAX || cg == UINT64_MAX || cd == UINT64_MAX)
		return 0;
	u->cyc = cg + cu + ca + cd + 2 * (SPYRE_TM_ISSUE_CYCLES + SPYRE_TM_BARRIER_CYCLES);
	return u->cyc;
}

static int gen_unfused(struct mlp *p)
{
	struct kgen *g = p->g;
	uint64_t p32 = kg_pitch(p->n, SPYRE_DT_FP32);
	uint64_t gbase = 0, ubase = p->gelu ? 0 : p->m * p32, ca;
	int sw = kg_slot(g, "work", SPYRE_DT_FP32, (p->gelu ? 1 : 2) * p->m, p->n, p32, SPYRE_SYM_IN | SPYRE_SYM_OUT);
	uint32_t budget = MAX_INSNS / 4, used = 0, n = 0;
	struct kg_gemm jg, ju, jd;
	struct uplan cand[16], best = { 0 };
	uint64_t best_cyc = UINT64_MAX;
	int ret;

	if (sw < 0)
		return -EINVAL;
	/* G = X Wg, U = X Wu (to work, fp32); H = act * mul (in G's place); Y = H Wd */
	jg = (struct kg_gemm){ .a = { .slot = p->sx, .dt = p->dt, .pitch = p->xp },
			       .b = { .slot = p->sg, .dt = p->dt, .pitch = p->wp },
			       .y = { .slot = sw, .dt = SPYRE_DT_FP32, .base = gbase, .pitch = p32 },
			       .bias = -1, .m = p->m, .n = p->n, .k = p->k };
	ju = jg;
	ju.b.slot = p->su;
	ju.y.base = ubase;
	jd = (struct kg_gemm){ .a = { .slot = sw, .dt = SPYRE_DT_FP32, .base = p->gelu ? ubase : gbase, .pitch = p32 },
			       .b = { .slot = p->sd, .dt = p->dt, .pitch = p->dp },
			       .y = { .slot = p->sy, .dt = p->dt, .pitch = p->xp },
			       .bias = -1, .m = p->m, .n = p->k, .k = p->n };
	/*
	 * How many cores the program launches (they share LPDDR whichever pass
	 * runs): all, or fewer when that is cheaper, as for each kernel of a
	 * framework; the most cores within 3 % of the cheapest estimate.
	 */
	for (uint32_t c = g->cores, prev = 0; c >= 1 && n < 16; c = c > 8 ? c * 3 / 4 : c / 2) {
		if (c == prev)
			continue;
		prev = c;
		if (uplan_cost(p, &jg, &ju, &jd, c, budget, &cand[n])) {
			best_cyc = kg_min64(best_cyc, cand[n].cyc);
			n++;
		}
	}
	for (uint32_t i = 0; i < n; i++)
		if (cand[i].cyc * 100 <= best_cyc * 103) {
			best = cand[i];
			break;
		}
	if (!best.cores)
		best.cores = g->cores;	/* nothing fits: the passes below name the shape */
	used = act_pass(p, best.cores, sw, gbase, ubase, p32, 0, &ca);
	if ((!p->gelu && kg_gemm_split(g, &jg, best.s_g, best.cores, budget, 0, NULL, &used)) ||
	    kg_gemm_split(g, &ju, best.s_u, best.cores, budget, 0, NULL, &used) ||
	    kg_gemm_split(g, &jd, best.s_d, best.cores, budget, 0, NULL, &used))
		return -EINVAL;
	if (!p->gelu && (ret = kg_gemm_split(g, &jg, best.s_g, best.cores, budget, 1, NULL, NULL)))
		return ret;
	if ((ret = kg_gemm_split(g, &ju, best.s_u, best.cores, budget, 1, NULL, NULL)))
		return ret;
	for (uint32_t c = 0; c < g->cores; c++)
		if (used >> c & 1)
			spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_BARRIER, 0, 0, 0, 0);
	for (uint32_t c = 0; c < g->cores; c++)
		kg_sp_reset(g, c);
	act_pass(p, best.cores, sw, gbase, ubase, p32, 1, &ca);
	for (uint32_t c = 0; c < g->cores; c++)
		if (used >> c & 1)
			spyre_pb_ring(g->pb, c, SPYRE_ISA_OP_BARRIER, 0, 0, 0, 0);
	if ((ret = kg_gemm_split(g, &jd, best.s_d, best.cores, budget, 1, NULL, NULL)))
		return ret;
	return kg_ok(g);
}

/* ---- the generator ------------------------------------------------------------------ */

int kg_gen_mlp(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	struct mlp p = { .g = g, .dt = d->dtype, .e = SPYRE_DT_SIZE(d->dtype), .m = d->m, .k = d->k, .n = d->n,
			 .gelu = !!(d->flags & SPYRE_KF_GELU), .sg = -1 };

	if (!d->m || !d->n || !d->k)
		return kg_fail(g, "m, n (ffn) and k (hidden) must be non-zero (m %llu, n %llu, k %llu)",
			       (unsigned long long)d->m, (unsigned long long)d->n, (unsigned long long)d->k);
	if (d->m > UINT32_MAX || d->n > UINT32_MAX || d->k > UINT32_MAX)
		return kg_fail(g, "m, n and k must be below 2^32");
	if (d->flags & (SPYRE_KF_BIAS | SPYRE_KF_DECODE))
		return kg_fail(g, "flags 0x%x do not apply to mlp", d->flags & (SPYRE_KF_BIAS | SPYRE_KF_DECODE));
	if (d->in_group || d->out_group || d->batch > 1)
		return kg_fail(g, "in_group, out_group and batch do not apply to mlp");
	p.spc = STICK / p.e;
	p.xp = kg_pitch(p.k, p.dt);
	p.wp = kg_pitch(p.n, p.dt);
	p.dp = p.xp;
	p.sx = kg_slot(g, "x", p.dt, p.m, p.k, p.xp, SPYRE_SYM_IN);
	if (!p.gelu)
		p.sg = kg_slot(g, "wg", p.dt, p.k, p.n, p.wp, SPYRE_SYM_IN);
	p.su = kg_slot(g, "wu", p.dt, p.k, p.n, p.wp, SPYRE_SYM_IN);
	p.sd = kg_slot(g, "wd", p.dt, p.n, p.k, p.dp, SPYRE_SYM_IN);
	p.sy = kg_slot(g, "y", p.dt, p.m, p.k, p.xp, SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;
	g->info->macs = p.m * p.k * p.n * (p.gelu ? 2 : 3);
	return g->strategy == SPYRE_KSTRAT_UNFUSED ? gen_unfused(&p) : gen_fused(&p);
}
