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
