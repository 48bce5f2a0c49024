// SPDX-License-Identifier: MIT
/*
 * The engine's instruction execution: one instruction of one core
 * (spyre_exec_step(), called by the scheduler in spyre_engine.c) is decoded,
 * checked against the ISA's static rules and executed with real numerics:
 * control, DMA issue (LOAD/STORE into the core's queue, spyre_lpddr.c),
 * tensor ops (MATMUL through spyre_gemm.c), ring messages, tokens and
 * barriers. Each charges its modeled cost to the core's clock; tensor ops
 * cost spyre_insn_cycles() (isa/spyre_timing.h). Ring messages take the
 * shorter direction and reserve each link on the way for their transfer
 * time, first come first served.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_dtype.h"
#include "spyre_engine_int.h"
#include "spyre_gemm.h"

static uint32_t ring_hops(const struct spyre_engine *e, uint32_t a, uint32_t b)
{
	uint32_t d = a > b ? a - b : b - a;

	return d < e->cfg.cores - d ? d : e->cfg.cores - d;
}

/* Grow a workspace to n floats, 64-byte aligned. */
static float *workspace(float **buf, size_t *len, size_t n)
{
	if (*len < n) {
		void *p = NULL;

		free(*buf);
		*buf = NULL;
		*len = 0;
		if (posix_memalign(&p, 64, n * sizeof(float)))
			return NULL;
		*buf = p;
		*len = n;
	}
	return *buf;
}

static void charge(struct spyre_engine *e, struct core *c, uint64_t cycles)
{
	cycles += e->cfg.issue_cycles;
	c->clock += cycles;
	c->busy += cycles;
}

/* Charge the timing model's cost of instruction @insn (isa/spyre_timing.h) to core c. */
static void charge_insn(struct spyre_engine *e, struct core *c, const void *insn)
{
	uint64_t cycles = spyre_insn_cycles(insn, &e->tm, e->active);

	c->clock += cycles;
	c->busy += cycles;
}

/* ---- DMA ------------------------------------------------------------------ */

static int exec_dma(struct spyre_engine *e, struct core *c, uint32_t id, const struct spyre_insn_dma *d)
{
	uint64_t extent = (uint64_t)(d->rows - 1) * d->mem_stride + d->row_bytes;
	uint64_t va = d->mem, radd = (d->flags & SPYRE_IF_RMEM) ? c->r[d->rmem] : 0;
	uint64_t spo = d->sp;
	bool store = d->opcode == SPYRE_ISA_OP_STORE;

	if (d->flags & SPYRE_IF_RSP) {
		/* the static check covered d->sp; the register part is checked here */
		uint64_t sp_bytes = e->cfg.scratchpad_bytes, reg = c->r[d->rsp];
		/* rows * stride <= 2^32 * 2^32: no wrap; the comparisons below never add to spo */
		uint64_t ext = (uint64_t)(d->rows - 1) * d->sp_stride + d->row_bytes;

		spo = d->sp + reg;
		if (reg > sp_bytes || spo > sp_bytes || ext > sp_bytes - spo)
			return fault(e, SPYRE_ENGINE_FAULT_SP_RANGE, id, c->pc, spo);
		if (spo % SPYRE_STICK_BYTES)
			return fault(e, SPYRE_ENGINE_FAULT_ALIGN, id, c->pc, spo);
	}
	if (d->flags & SPYRE_IF_SLOT) {
		uint32_t slot = SPYRE_SLOT_OF(d->mem);
		uint64_t off = SPYRE_SLOT_OFF(d->mem) + radd, base, size;

		if (off < radd)
			return fault(e, SPYRE_ENGINE_FAULT_MEM_RANGE, id, c->pc, off);

		if (slot == SPYRE_SLOT_CONST && !store) {
			base = e->program_va + e->prog.hdr.const_off;
			size = e->prog.hdr.const_size;
		} else if (slot < e->prog.hdr.num_syms) {
			struct spyre_prog_sym s;

			spyre_prog_get_sym(&e->prog, slot, &s);
			base = e->args[slot];
			size = s.size;
		} else {
			return fault(e, SPYRE_ENGINE_FAULT_BAD_SLOT, id, c->pc, d->mem);
		}
		if (off > size || extent > size - off || base + off < base)
			return fault(e, SPYRE_ENGINE_FAULT_MEM_RANGE, id, c->pc, base + off);
		va = base + off;
	} else {
		va += radd;
		if (va < radd)
			return fault(e, SPYRE_ENGINE_FAULT_MEM_RANGE, id, c->pc, d->mem);
	}
	if (va % SPYRE_STICK_BYTES)
		return fault(e, SPYRE_ENGINE_FAULT_ALIGN, id, c->pc, va);
	if (va + extent < va)
		return fault(e, SPYRE_ENGINE_FAULT_MEM_RANGE, id, c->pc, va);

	if (c->dq_tail - c->dq_head == SPYRE_DMA_QUEUE_DEPTH)
		return STEP_BLOCK;	/* queue full: woken when its oldest completes */

	/* coalesce rows that are contiguous on both sides into one access */
	struct dma_op *op = DQ(c, c->dq_tail);
	bool contiguous = d->rows > 1 && d->mem_stride == d->row_bytes && d->sp_stride == d->row_bytes;

	*op = (struct dma_op){
		.va = va, .spo = (uint32_t)spo, .pc = c->pc, .store = store,
		.async = d->flags & SPYRE_IF_ASYNC,
		.rows = contiguous ? 1 : d->rows,
		.len = contiguous ? (uint64_t)d->rows * d->row_bytes : d->row_bytes,
		.mem_stride = d->mem_stride, .sp_stride = d->sp_stride,
		.issue = c->clock,
		.left = spyre_timing_dma_demand(&e->tm, d->rows, d->row_bytes, contiguous) * e->cfg.clock_mhz,
	};
	spyre_lpddr_advance(e, c->clock);
	c->dq_tail++;
	if (!store)
		c->sp_dirty = max64(c->sp_dirty, spo + (uint64_t)(d->rows - 1) * d->sp_stride + d->row_bytes);
	if (op->async) {
		charge(e, c, 0);
		return STEP_NEXT;
	}
	c->dma_wait = true;	/* completes (pc moves on) when the transfer does */
	return STEP_BLOCK;
}

/* ---- tensor ops ----------------------------------------------------------- */

#define ROW(base, off, r, ld) ((base) + (off) + (uint64_t)(r) * (ld) * SPYRE_STICK_BYTES)

/* The table of 16-bit type dt's values as fp32 (spyre_load_f32's), made on the scheduler's thread. */
static void cvt16_make(struct spyre_engine *e, unsigned dt)
{
	float *tab;

	if (e->cvt16[dt] || SPYRE_DT_SIZE(dt) != 2 || dt == SPYRE_DT_INT8 || !(tab = malloc(65536 * sizeof(float))))
		return;	/* without it: spyre_load_f32 element by element */
	for (uint32_t u = 0; u < 65536; u++) {
		uint16_t h = (uint16_t)u;

		tab[u] = spyre_load_f32(&h, dt, 0);
	}
	e->cvt16[dt] = tab;
}

/* n elements of type dt at src as fp32 into dst. */
static void to_f32(const struct spyre_engine *e, float *dst, const uint8_t *src, unsigned dt, size_t n)
{
	const float *tab = e->cvt16[dt];

	if (!tab) {
		for (size_t j = 0; j < n; j++)
			dst[j] = spyre_load_f32(src, dt, j);
		return;
	}
	for (size_t j = 0; j < n; j++) {
		uint16_t h;

		memcpy(&h, src + 2 * j, 2);
		dst[j] = tab[h];
	}
}

static uint32_t exec_matmul(struct spyre_engine *e, struct spyre_ws *w, uint32_t id,
			    const struct spyre_insn_tensor *t, const struct spyre_src *src)
{
	uint8_t *sp = core_sp(e, id);
	size_t m = t->rows, n = t->cols, k = t->k;
	unsigned dt = t->dtype, dt2 = t->dtype2;
	int acc = !!(t->flags & SPYRE_IF_ACC);
	size_t lda = (size_t)t->lda * SPYRE_STICK_BYTES / SPYRE_DT_SIZE(dt);
	size_t ldb = (size_t)t->ldb * SPYRE_STICK_BYTES / SPYRE_DT_SIZE(dt);
	size_t ldc = (size_t)t->ldd * SPYRE_STICK_BYTES / SPYRE_DT_SIZE(dt2);

	if (dt == SPYRE_DT_INT8) {
		spyre_igemm(m, n, k, (const int8_t *)(sp + t->a), lda, (const int8_t *)(sp + t->b), ldb,
			    (int32_t *)(void *)(sp + t->d), ldc, acc);
	} else {
		const float *a = (const float *)(void *)(sp + t->a), *b = (const float *)(void *)(sp + t->b);
		float *cc = (float *)(void *)(sp + t->d);
		size_t ldcc = ldc;

		if (src && src->a) {	/* fp32: the bytes a waiting LOAD holds */
			a = src->a;
			lda = src->lda;
		}
		if (src && src->b) {
			b = src->b;
			ldb = src->ldb;
		}
		if (!workspace(&w->buf[3], &w->len[3], SPYRE_SGEMM_PACK_FLOATS(n)))
			return SPYRE_ENGINE_FAULT_SP_RANGE; /* host OOM: cannot model */
		if (dt != SPYRE_DT_FP32) {
			float *wa = workspace(&w->buf[0], &w->len[0], m * k);
			float *wb = workspace(&w->buf[1], &w->len[1], k * n);

			if (!wa || !wb)
				return SPYRE_ENGINE_FAULT_SP_RANGE;
			for (size_t i = 0; i < m; i++)
				to_f32(e, wa + i * k, ROW(sp, t->a, i, t->lda), dt, k);
			for (size_t p = 0; p < k; p++)
				to_f32(e, wb + p * n, ROW(sp, t->b, p, t->ldb), dt, n);
			a = wa;
			b = wb;
			lda = k;
			ldb = n;
		}
		if (dt2 != SPYRE_DT_FP32) {
			float *wc = workspace(&w->buf[2], &w->len[2], m * n);

			if (!wc)
				return SPYRE_ENGINE_FAULT_SP_RANGE;
			if (acc)
				for (size_t i = 0; i < m; i++)
					for (size_t j = 0; j < n; j++)
						wc[i * n + j] = spyre_load_f32(ROW(sp, t->d, i, t->ldd), dt2, j);
			cc = wc;
			ldcc = n;
		}
		if (src && src->bpacked && dt == SPYRE_DT_FP32)
			spyre_sgemm_packed(m, n, k, a, lda, src->bpacked, cc, ldcc, acc, w->buf[3]);
		else
			spyre_sgemm(m, n, k, a, lda, b, ldb, cc, ldcc, acc, w->buf[3]);
		if (dt2 != SPYRE_DT_FP32)
			for (size_t i = 0; i < m; i++)
				for (size_t j = 0; j < n; j++)
					spyre_store_f32(ROW(sp, t->d, i, t->ldd), dt2, j, cc[i * n + j]);
	}
	return SPYRE_ENGINE_FAULT_NONE;
}

static float gelu(float x)
{
	return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

static float gelu_tanh(float x)
{
	const float k = 0.79788456080286536f;	/* sqrt(2/pi) */

	return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

static float unary_f(uint32_t op, float x, float s, float b)
{
	switch (op) {
	case SPYRE_ISA_OP_LOG:
		return logf(x);
	case SPYRE_ISA_OP_TANH:
		return tanhf(x);
	case SPYRE_ISA_OP_SIGMOID:
		return 1.0f / (1.0f + expf(-x));
	case SPYRE_ISA_OP_SQRT:
		return sqrtf(x);
	case SPYRE_ISA_OP_RECIP:
		return 1.0f / x;
	case SPYRE_ISA_OP_ABS:
		return fabsf(x);
	case SPYRE_ISA_OP_GELU_TANH:
		return gelu_tanh(x);
	case SPYRE_ISA_OP_POW:
		return powf(x, s);
	case SPYRE_ISA_OP_RELU:
		return x > 0.0f ? x : (isnan(x) ? x : 0.0f);
	case SPYRE_ISA_OP_GELU:
		return gelu(x);
	case SPYRE_ISA_OP_SILU:
		return x / (1.0f + expf(-x));
	case SPYRE_ISA_OP_EXP:
		return expf(x);
	case SPYRE_ISA_OP_RSQRT:
		return 1.0f / sqrtf(x);
	case SPYRE_ISA_OP_SCALE:
		return x * s + b;
	default: /* CAST */
		return x;
	}
}

static float binary_f(uint32_t op, float x, float y)
{
	switch (op) {
	case SPYRE_ISA_OP_ADD:
		return x + y;
	case SPYRE_ISA_OP_SUB:
		return x - y;
	case SPYRE_ISA_OP_MUL:
		return x * y;
	case SPYRE_ISA_OP_DIV:
		return x / y;
	case SPYRE_ISA_OP_MIN:	/* NaN propagates */
		return isnan(x) || isnan(y) ? NAN : (x < y ? x : y);
	default: /* MAX: NaN propagates */
		return isnan(x) || isnan(y) ? NAN : (x > y ? x : y);
	}
}

static int64_t binary_i(uint32_t op, int64_t x, int64_t y)
{
	switch (op) {
	case SPYRE_ISA_OP_ADD:
		return x + y;
	case SPYRE_ISA_OP_SUB:
		return x - y;
	case SPYRE_ISA_OP_MUL:
		return x * y;	/* |x|,|y| < 2^31: fits */
	case SPYRE_ISA_OP_MIN:
		return x < y ? x : y;
	default:	/* MAX (DIV is float only: the check refused it) */
		return x > y ? x : y;
	}
}

static void exec_elementwise(struct spyre_engine *e, uint32_t id,
			     const struct spyre_insn_tensor *t, enum spyre_opclass cls)
{
	uint8_t *sp = core_sp(e, id);
	unsigned dt = t->dtype, dt2 = t->dtype2;
	bool isint = !SPYRE_DT_IS_FLOAT(dt), swap = cls == SPYRE_CLS_BINARY && (t->flags & SPYRE_IF_SWAP);
	float s = spyre_bits_f32(t->b), bias = spyre_bits_f32(SPYRE_SCALE_BIAS_BITS(t));

	for (uint32_t r = 0; r < t->rows; r++) {
		uint8_t *dr = ROW(sp, t->d, r, t->ldd);
		const uint8_t *ar = ROW(sp, t->a, r, t->lda);
		const uint8_t *br = NULL;

		if (cls == SPYRE_CLS_BINARY)
			br = (t->flags & SPYRE_IF_BCAST_ROW) ? sp + t->b :
			     (t->flags & SPYRE_IF_BCAST_COL) ? sp + t->b : ROW(sp, t->b, r, t->ldb);
		for (uint32_t j = 0; j < t->cols; j++) {
			uint64_t bj = (t->flags & SPYRE_IF_BCAST_COL) ? r : j;

			if (cls == SPYRE_CLS_BINARY && isint) {
				int64_t x = spyre_load_int(ar, dt, j), y = spyre_load_int(br, dt, bj);

				spyre_store_int(dr, dt2, j, swap ? binary_i(t->opcode, y, x) : binary_i(t->opcode, x, y));
			} else if (cls == SPYRE_CLS_BINARY) {
				float x = spyre_load_f32(ar, dt, j), y = spyre_load_f32(br, dt, bj);

				spyre_store_f32(dr, dt2, j, swap ? binary_f(t->opcode, y, x) : binary_f(t->opcode, x, y));
			} else if (isint && (t->opcode == SPYRE_ISA_OP_RELU || !SPYRE_DT_IS_FLOAT(dt2))) {
				int64_t x = spyre_load_int(ar, dt, j);

				spyre_store_int(dr, dt2, j, t->opcode == SPYRE_ISA_OP_RELU && x < 0 ? 0 : x);
			} else {
				spyre_store_f32(dr, dt2, j, unary_f(t->opcode, spyre_load_f32(ar, dt, j), s, bias));
			}
		}
	}
}

/* MOVM: d = mask ? a : d; the unselected value is never computed with */
static void exec_movm(struct spyre_engine *e, uint32_t id, const struct spyre_insn_tensor *t)
{
	uint8_t *sp = core_sp(e, id);
	unsigned dt = t->dtype, dt2 = t->dtype2;

	for (uint32_t r = 0; r < t->rows; r++) {
		uint8_t *dr = ROW(sp, t->d, r, t->ldd);
		const uint8_t *ar = ROW(sp, t->a, r, t->lda), *mr = ROW(sp, t->b, r, t->ldb);

		for (uint32_t j = 0; j < t->cols; j++) {
			if (!mr[j])
				continue;
			if (SPYRE_DT_IS_FLOAT(dt))
				spyre_store_f32(dr, dt2, j, spyre_load_f32(ar, dt, j));
			else
				spyre_store_int(dr, dt2, j, spyre_load_int(ar, dt, j));
		}
	}
}

/* TRIL: keep a[r][c] where c - r' <= diag (UPPER: >=), r' the row within its matrix; else 0 */
static void exec_tril(struct spyre_engine *e, uint32_t id, const struct spyre_insn_tensor *t, uint64_t rdiag)
{
	uint8_t *sp = core_sp(e, id);
	unsigned dt = t->dtype, esz = SPYRE_DT_SIZE(dt);
	int64_t diag = (int32_t)t->b;
	bool upper = t->flags & SPYRE_IF_UPPER;

	if (t->flags & SPYRE_IF_RDIAG)	/* a run-time diagonal: imm + r[ldb] (checked < 16) */
		diag += (int64_t)rdiag;

	for (uint32_t r = 0; r < t->rows; r++) {
		uint8_t *dr = ROW(sp, t->d, r, t->ldd);
		const uint8_t *ar = ROW(sp, t->a, r, t->lda);
		int64_t rr = t->k ? ((uint64_t)t->ext + r) % t->k : r;

		for (uint32_t j = 0; j < t->cols; j++) {
			int64_t dc = (int64_t)j - rr;
			bool keep = upper ? dc >= diag : dc <= diag;

			if (keep)
				memmove(dr + (uint64_t)j * esz, ar + (uint64_t)j * esz, esz);
			else
				memset(dr + (uint64_t)j * esz, 0, esz);	/* +0 in every dtype */
		}
	}
}

static void exec_fill(struct spyre_engine *e, uint32_t id, const struct spyre_insn_tensor *t)
{
	uint8_t *sp = core_sp(e, id);
	unsigned dt = t->dtype2;

	for (uint32_t r = 0; r < t->rows; r++) {
		uint8_t *dr = ROW(sp, t->d, r, t->ldd);

		for (uint32_t j = 0; j < t->cols; j++) {
			if (SPYRE_DT_IS_FLOAT(dt))
				spyre_store_f32(dr, dt, j, spyre_bits_f32(t->b));
			else
				spyre_store_int(dr, dt, j, (int32_t)t->b);
		}
	}
}

static void exec_reduce(struct spyre_engine *e, uint32_t id, const struct spyre_insn_tensor *t)
{
	uint8_t *sp = core_sp(e, id);
	unsigned dt = t->dtype, dt2 = t->dtype2;
	bool axis0 = t->flags & SPYRE_IF_AXIS0, isint = !SPYRE_DT_IS_FLOAT(dt), sum = t->opcode == SPYRE_ISA_OP_REDSUM;
	uint32_t outer = axis0 ? t->cols : t->rows, inner = axis0 ? t->rows : t->cols;

	for (uint32_t o = 0; o < outer; o++) {
		float fa = sum ? 0.0f : -INFINITY;
		int64_t ia = sum ? 0 : INT64_MIN;

		for (uint32_t i = 0; i < inner; i++) {
			uint32_t r = axis0 ? i : o, j = axis0 ? o : i;
			const uint8_t *ar = ROW(sp, t->a, r, t->lda);

			if (isint) {
				int64_t x = spyre_load_int(ar, dt, j);

				ia = sum ? ia + x : (x > ia ? x : ia);
			} else {
				float x = spyre_load_f32(ar, dt, j);

				fa = sum ? fa + x : binary_f(SPYRE_ISA_OP_MAX, fa, x);
			}
		}
		if (isint)
			spyre_store_int(sp + t->d, dt2, o, ia);
		else
			spyre_store_f32(sp + t->d, dt2, o, fa);
	}
}

static void exec_argmax(struct spyre_engine *e, uint32_t id, const struct spyre_insn_tensor *t)
{
	uint8_t *sp = core_sp(e, id);
	bool index = t->flags & SPYRE_IF_INDEX;

	for (uint32_t r = 0; r < t->rows; r++) {
		const uint8_t *ar = ROW(sp, t->a, r, t->lda);
		uint32_t best = 0;
		float mx = 0.0f;
		bool any = false;

		for (uint32_t j = 0; j < t->cols; j++) {
			float x = spyre_load_f32(ar, t->dtype, j);

			if (x == x && (!any || x > mx)) {	/* NaN never wins; lowest index on ties */
				mx = x;
				best = j;
				any = true;
			}
		}
		int64_t v = index ? spyre_load_int(ROW(sp, t->b, r, t->ldb), SPYRE_DT_INT32, best) : best;

		spyre_store_int(sp + t->d, SPYRE_DT_INT32, r, v);
	}
}

static void exec_softmax(struct spyre_engine *e, uint32_t id, const struct spyre_insn_tensor *t)
{
	uint8_t *sp = core_sp(e, id);
	unsigned dt = t->dtype, dt2 = t->dtype2;

	for (uint32_t r = 0; r < t->rows; r++) {
		const uint8_t *ar = ROW(sp, t->a, r, t->lda);
		uint8_t *dr = ROW(sp, t->d, r, t->ldd);
		float mx = -INFINITY, sum = 0.0f;
		bool lg = t->flags & SPYRE_IF_LOG;

		for (uint32_t j = 0; j < t->cols; j++)
			mx = binary_f(SPYRE_ISA_OP_MAX, mx, spyre_load_f32(ar, dt, j));
		/* two passes over a: d may alias a, so exponentials are recomputed */
		for (uint32_t j = 0; j < t->cols; j++)
			sum += expf(spyre_load_f32(ar, dt, j) - mx);
		float inv = 1.0f / sum, lse = logf(sum);
		float ex[64];

		for (uint32_t j0 = 0; j0 < t->cols; j0 += 64) {
			uint32_t w = t->cols - j0 < 64 ? t->cols - j0 : 64;

			for (uint32_t j = 0; j < w; j++) {
				float x = spyre_load_f32(ar, dt, j0 + j) - mx;

				ex[j] = lg ? x - lse : expf(x) * inv;
			}
			for (uint32_t j = 0; j < w; j++)
				spyre_store_f32(dr, dt2, j0 + j, ex[j]);
		}
	}
}

static void exec_transpose(struct spyre_engine *e, uint32_t id,
			   const struct spyre_insn_tensor *t)
{
	uint8_t *sp = core_sp(e, id);
	uint32_t esz = SPYRE_DT_SIZE(t->dtype);

	if (t->flags & SPYRE_IF_DENSE) {
		for (uint32_t r = 0; r < t->rows; r++)
			for (uint32_t j = 0; j < t->cols; j++)
				memmove(sp + t->d + (t->ext + (uint64_t)j * t->rows + r) * esz,
					sp + t->a + (t->k + (uint64_t)r * t->cols + j) * esz, esz);
		return;
	}
	for (uint32_t r = 0; r < t->rows; r++)
		for (uint32_t j = 0; j < t->cols; j++)
			memmove(ROW(sp, t->d, j, t->ldd) + (uint64_t)r * esz, ROW(sp, t->a, r, t->lda) + (uint64_t)j * esz,
				esz);
}

static uint64_t tensor_dirty(const struct spyre_insn_tensor *t, enum spyre_opclass cls)
{
	unsigned e2 = SPYRE_DT_SIZE(t->dtype2);

	switch (cls) {
	case SPYRE_CLS_REDUCE:
		return t->d + spyre_tile_extent(1, (t->flags & SPYRE_IF_AXIS0) ? t->cols : t->rows, e2, 0);
	case SPYRE_CLS_ARGMAX:
		return t->d + spyre_tile_extent(1, t->rows, e2, 0);
	case SPYRE_CLS_TRANSPOSE:
		if (t->flags & SPYRE_IF_DENSE)
			return t->d + spyre_tile_extent(1, t->ext + (uint64_t)t->rows * t->cols, e2, 0);
		return t->d + spyre_tile_extent(t->cols, t->rows, e2, t->ldd);
	default:
		return t->d + spyre_tile_extent(t->rows, t->cols, e2, t->ldd);
	}
}

uint32_t spyre_exec_tensor(struct spyre_engine *e, struct spyre_ws *w, uint32_t id,
			   const struct spyre_insn_tensor *t, enum spyre_opclass cls, uint64_t rdiag,
			   const struct spyre_src *src)
{
	switch (cls) {
	case SPYRE_CLS_MATMUL:
		return exec_matmul(e, w, id, t, src);
	case SPYRE_CLS_FILL:
		exec_fill(e, id, t);
		break;
	case SPYRE_CLS_REDUCE:
		exec_reduce(e, id, t);
		break;
	case SPYRE_CLS_SOFTMAX:
		exec_softmax(e, id, t);
		break;
	case SPYRE_CLS_TRANSPOSE:
		exec_transpose(e, id, t);
		break;
	case SPYRE_CLS_ARGMAX:
		exec_argmax(e, id, t);
		break;
	case SPYRE_CLS_MOVM:
		exec_movm(e, id, t);
		break;
	case SPYRE_CLS_TRIL:
		exec_tril(e, id, t, rdiag);
		break;
	default:	/* BINARY, UNARY, SCALE, CAST */
		exec_elementwise(e, id, t, cls);
		break;
	}
	return SPYRE_ENGINE_FAULT_NONE;
}

/*
 * B (n x k at b, ld floats apart, in blob bl) packed for the GEMM, once for
 * every MATMUL of the launch that reads the same B; NULL if there is no room
 * (the GEMM then packs it itself). On the scheduler's thread.
 */
static const float *packed_b(struct spyre_engine *e, struct spyre_blob *bl, const float *b, size_t ld, size_t n,
			     size_t k)
{
	uint64_t boff = (uint64_t)((const uint8_t *)b - bl->data);
	struct spyre_packed *pk;

	for (pk = bl->packed; pk; pk = pk->next)
		if (pk->boff == boff && pk->ld == ld && pk->n == n && pk->k == k)
			return pk->p;
	pk = calloc(1, sizeof(*pk));
	if (!pk || !(pk->p = spyre_blob_alloc(e, SPYRE_SGEMM_PACKED_FLOATS(n, k) * sizeof(float), &pk->cap))) {
		free(pk);
		return NULL;
	}
	spyre_sgemm_pack_b(n, k, b, ld, pk->p);
	pk->boff = boff;
	pk->ld = ld;
	pk->n = n;
	pk->k = k;
	pk->next = bl->packed;
	bl->packed = pk;
	return pk->p;
}

/*
 * A MATMUL's waiting LOADs: those under what it writes are written; an fp32
 * operand that one waiting LOAD holds whole is read from that LOAD's copy
 * (the same bytes: a block that several cores load is read from memory once,
 * and no scratchpad is written for it); other operands' LOADs are written.
 */
static int matmul_sources(struct spyre_engine *e, uint32_t id, const struct spyre_insn_tensor *t,
			  struct spyre_src *src)
{
	uint32_t esz = SPYRE_DT_SIZE(t->dtype);
	struct spyre_blob *ba, *bb;
	uint64_t ld;

	if (spyre_lazy_flush_range(e, id, t->d, t->d + spyre_tile_extent(t->rows, t->cols,
									  SPYRE_DT_SIZE(t->dtype2), t->ldd)) == STEP_FAULT)
		return STEP_FAULT;
	if (t->dtype == SPYRE_DT_FP32 && e->core[id].nlazy) {
		src->a = spyre_lazy_operand(e, id, t->a, (uint64_t)t->lda * SPYRE_STICK_BYTES, t->rows,
					    (uint64_t)t->k * esz, &ld, &ba);
		src->lda = ld / sizeof(float);
		src->bpacked = spyre_lazy_packed_b(e, id, t->b, (uint64_t)t->ldb * SPYRE_STICK_BYTES, t->k, t->cols);
		if (!src->bpacked) {
			src->b = spyre_lazy_operand(e, id, t->b, (uint64_t)t->ldb * SPYRE_STICK_BYTES, t->k,
						    (uint64_t)t->cols * esz, &ld, &bb);
			src->ldb = ld / sizeof(float);
			if (src->b)
				src->bpacked = packed_b(e, bb, src->b, src->ldb, t->cols, t->k);
		}
	}
	if (!src->a && spyre_lazy_flush_range(e, id, t->a, t->a + spyre_tile_extent(t->rows, t->k, esz, t->lda)) ==
	    STEP_FAULT)
		return STEP_FAULT;
	if (!src->b && !src->bpacked &&
	    spyre_lazy_flush_range(e, id, t->b, t->b + spyre_tile_extent(t->k, t->cols, esz, t->ldb)) == STEP_FAULT)
		return STEP_FAULT;
	return STEP_NEXT;
}

/*
 * A MATMUL without ACC writes every byte of D: sticks of D the last launch
 * left need no zeroing first, unless it reads them (D meets A or B).
 */
static void matmul_fresh_d(struct spyre_engine *e, uint32_t id, const struct spyre_insn_tensor *t)
{
	uint32_t esz = SPYRE_DT_SIZE(t->dtype), esz2 = SPYRE_DT_SIZE(t->dtype2);
	uint64_t dend = t->d + spyre_tile_extent(t->rows, t->cols, esz2, t->ldd);
	uint64_t aend = t->a + spyre_tile_extent(t->rows, t->k, esz, t->lda);
	uint64_t bend = t->b + spyre_tile_extent(t->k, t->cols, esz, t->ldb);

	if ((t->flags & SPYRE_IF_ACC) || !e->core[id].stale_end || (t->d < aend && t->a < dend) ||
	    (t->d < bend && t->b < dend))
		return;
	for (uint32_t r = 0; r < t->rows; r++) {
		uint64_t lo = t->d + (uint64_t)r * t->ldd * SPYRE_STICK_BYTES, hi = lo + (uint64_t)t->cols * esz2;

		spyre_sp_write_begin(e, id, lo, hi);
		spyre_sp_write_end(e, id, lo, hi, true);
	}
}

/*
 * A tensor instruction on the scheduler's thread: its cost goes on the
 * timeline now (it depends on the instruction alone); its numerics run here
 * with one host thread, else on whichever host thread takes the core's queue
 * (spyre_defer.c), before anything else reads or writes that scratchpad.
 */
static int exec_tensor_insn(struct spyre_engine *e, struct core *c, uint32_t id,
			    const struct spyre_insn_tensor *t, enum spyre_opclass cls)
{
	uint64_t rdiag = cls == SPYRE_CLS_TRIL && (t->flags & SPYRE_IF_RDIAG) ? c->r[t->ldb] : 0;
	struct spyre_src src = { 0 };

	if (cls == SPYRE_CLS_MATMUL) {
		cvt16_make(e, t->dtype);
		if (matmul_sources(e, id, t, &src) == STEP_FAULT)
			return STEP_FAULT;
		matmul_fresh_d(e, id, t);
	} else if (spyre_lazy_flush(e, id) == STEP_FAULT) {	/* its LOADs' bytes */
		return STEP_FAULT;
	}
	spyre_sp_settle(e, id);	/* before its first queued op: none is in flight */

	/* a small op is not worth a hand-over: run here when nothing of the core's is queued */
	uint64_t work = (uint64_t)t->rows * t->cols * (cls == SPYRE_CLS_MATMUL ? t->k : 1);

	if (e->nworkers && (work >= SPYRE_DEFER_MIN_WORK || !spyre_defer_idle(e, id))) {
		if (spyre_defer_push(e, id, t, cls, rdiag, &src, c->pc) == STEP_FAULT)
			return STEP_FAULT;
	} else {
		uint32_t f = spyre_exec_tensor(e, &e->ws0, id, t, cls, rdiag, &src);

		if (f)
			return fault(e, f, id, c->pc, t->d);
	}
	charge_insn(e, c, t);
	return STEP_NEXT;
}

/* ---- ring and synchronisation ----------------------------------------------- */

static int exec_send(struct spyre_engine *e, struct core *c, uint32_t id, const struct spyre_insn_ring *r)
{
	struct core *dst;
	struct msg *m;

	if (!launched(e, r->peer))
		return fault(e, SPYRE_ENGINE_FAULT_BAD_PEER, id, c->pc, r->peer);
	dst = &e->core[r->peer];
	/* the receiver buffers up to one scratchpad of messages; a lone message always fits */
	if (dst->inbox_bytes && dst->inbox_bytes + r->bytes > e->cfg.scratchpad_bytes) {
		c->send_blocked = true;
		return STEP_BLOCK;
	}
	m = malloc(sizeof(*m) + r->bytes);
	if (!m)
		return fault(e, SPYRE_ENGINE_FAULT_SP_RANGE, id, c->pc, r->sp);
	if (spyre_defer_sync(e, id) == STEP_FAULT || spyre_lazy_flush(e, id) == STEP_FAULT) {
		free(m);
		return STEP_FAULT;
	}
	spyre_sp_settle(e, id);
	memcpy(m->data, core_sp(e, id) + r->sp, r->bytes);
	m->next = NULL;
	m->tag = r->tag;
	m->bytes = r->bytes;
	if (c->send_blocked)	/* waited for room: resume when the receiver made it */
		c->clock = max64(c->clock, dst->inbox_freed);
	c->send_blocked = false;

	/*
	 * The shorter direction (clockwise on a tie); the message takes each link
	 * on the way for its transfer time once the link is free (first come,
	 * first served), its head moving on after ring_hop_cycles.
	 */
	uint32_t n = e->cfg.cores, cw = (r->peer + n - id) % n, dir = cw > n - cw, hops = dir ? n - cw : cw;
	uint64_t xfer = div_up(r->bytes, e->cfg.ring_bytes_per_cycle);
	uint64_t t = c->clock + e->cfg.issue_cycles, inject = t;

	for (uint32_t h = 0, node = id; h < hops; h++) {
		uint64_t start = max64(t, e->link_free[dir][node]);

		e->link_free[dir][node] = start + xfer;
		if (!h)
			inject = start;
		t = start + e->cfg.ring_hop_cycles;
		node = dir ? (node + n - 1) % n : (node + 1) % n;
	}
	m->arrival = t + xfer;
	if (dst->tail[id])
		dst->tail[id]->next = m;
	else
		dst->head[id] = m;
	dst->tail[id] = m;
	dst->inbox_bytes += r->bytes;
	wake(dst, c->clock);
	/* the sender is busy for the transfer, from when its first link takes it */
	c->busy += e->cfg.issue_cycles + xfer;
	c->clock = inject + xfer;
	return STEP_NEXT;
}

static int exec_recv(struct spyre_engine *e, struct core *c, uint32_t id, const struct spyre_insn_ring *r)
{
	struct msg *m;

	if (!launched(e, r->peer))
		return fault(e, SPYRE_ENGINE_FAULT_BAD_PEER, id, c->pc, r->peer);
	m = c->head[r->peer];
	if (!m)
		return STEP_BLOCK;
	if (m->tag != r->tag || m->bytes != r->bytes)
		return fault(e, SPYRE_ENGINE_FAULT_RING_MISMATCH, id, c->pc, r->sp);
	/* its own tensor ops and LOADs first */
	if (spyre_defer_sync(e, id) == STEP_FAULT || spyre_lazy_flush(e, id) == STEP_FAULT)
		return STEP_FAULT;
	c->head[r->peer] = m->next;
	if (!m->next)
		c->tail[r->peer] = NULL;
	c->inbox_bytes -= m->bytes;
	spyre_sp_write_begin(e, id, r->sp, (uint64_t)r->sp + m->bytes);
	memcpy(core_sp(e, id) + r->sp, m->data, m->bytes);
	spyre_sp_write_end(e, id, r->sp, (uint64_t)r->sp + m->bytes, true);
	c->sp_dirty = max64(c->sp_dirty, (uint64_t)r->sp + r->bytes);
	c->clock = max64(c->clock, m->arrival);	/* idle until the data is there */
	free(m);
	charge(e, c, 0);
	c->inbox_freed = c->clock;
	for (uint32_t i = 0; i < e->cfg.cores; i++)	/* senders waiting for room */
		if (e->core[i].send_blocked)
			wake(&e->core[i], c->clock);
	return STEP_NEXT;
}

static int exec_barrier(struct spyre_engine *e, struct core *c, uint32_t id, uint32_t mask)
{
	uint64_t t = 0;

	if (!mask)
		mask = e->mask;
	if ((mask & ~e->mask) || !(mask >> id & 1))
		return fault(e, SPYRE_ENGINE_FAULT_BAD_PEER, id, c->pc, mask);
	c->at_barrier = true;
	c->barrier_mask = mask;
	for (uint32_t i = 0; i < e->cfg.cores; i++) {
		if (!(mask >> i & 1))
			continue;
		if (!e->core[i].at_barrier || e->core[i].barrier_mask != mask)
			return STEP_BLOCK;
		t = max64(t, e->core[i].clock);
	}
	/* everyone is here: release them all at the latest arrival */
	for (uint32_t i = 0; i < e->cfg.cores; i++) {
		struct core *o = &e->core[i];

		if (!(mask >> i & 1))
			continue;
		o->at_barrier = false;
		o->blocked = false;
		o->clock = t + e->cfg.barrier_cycles;
		o->busy += e->cfg.issue_cycles;
		if (o != c) {
			o->pc++;
			o->insns++;
		}
	}
	return STEP_NEXT;
}

/* ---- one instruction ------------------------------------------------------------ */

int spyre_exec_step(struct spyre_engine *e, uint32_t id)
{
	struct core *c = &e->core[id];
	union spyre_insn in;
	enum spyre_opclass cls;
	uint64_t addr;
	uint32_t f;

	if (c->pc >= c->num_insns)
		return STEP_HALT;
	if (c->insns >= e->cfg.insn_budget)
		return fault(e, SPYRE_ENGINE_FAULT_BUDGET, id, c->pc, 0);
	spyre_insn_decode(c->code + (uint64_t)c->pc * SPYRE_INSN_BYTES, &in);
	f = spyre_insn_check(&in, e->cfg.scratchpad_bytes, c->num_insns, &addr);
	if (f)
		return fault(e, f, id, c->pc, addr);
	cls = spyre_opclass(in.raw[0]);

	int rc = STEP_NEXT;

	switch (cls) {
	case SPYRE_CLS_CTL:
		switch (in.ctl.opcode) {
		case SPYRE_ISA_OP_HALT:
			c->insns++;
			charge(e, c, 0);
			return STEP_HALT;
		case SPYRE_ISA_OP_LI:
			c->r[in.ctl.reg] = in.ctl.imm;
			break;
		case SPYRE_ISA_OP_ADDI:
			c->r[in.ctl.reg] = c->r[in.ctl.reg2] + in.ctl.imm;
			break;
		case SPYRE_ISA_OP_LDARG:
			if (in.ctl.imm >= e->prog.hdr.num_scalars)
				return fault(e, SPYRE_ENGINE_FAULT_BAD_OPERAND, id, c->pc, in.ctl.imm);
			c->r[in.ctl.reg] = e->args[e->prog.hdr.num_syms + in.ctl.imm];
			break;
		case SPYRE_ISA_OP_LDX: {
			uint64_t off = in.ctl.imm;
			int64_t v;

			if (in.ctl.flags & SPYRE_IF_RIDX)
				off += c->r[in.ctl.reg2];
			if (off % 4)
				return fault(e, SPYRE_ENGINE_FAULT_ALIGN, id, c->pc, off);
			if (off > e->cfg.scratchpad_bytes - 4)
				return fault(e, SPYRE_ENGINE_FAULT_SP_RANGE, id, c->pc, off);
			if (spyre_defer_sync(e, id) == STEP_FAULT || spyre_lazy_flush(e, id) == STEP_FAULT)
				return STEP_FAULT;
			spyre_sp_settle(e, id);
			v = (int32_t)spyre_ld32(core_sp(e, id) + off);
			if (v < 0 && (in.ctl.flags & SPYRE_IF_SKIPNEG)) {
				/* a padding entry: the next instruction (its use) is skipped */
				c->r[in.ctl.reg] = (uint64_t)v * (in.ctl.scale ? in.ctl.scale : 1);
				c->insns++;
				charge(e, c, 0);
				c->pc += 2;
				return STEP_NEXT;
			}
			if (in.ctl.bound && (v < 0 || v >= (int64_t)in.ctl.bound))
				return fault(e, SPYRE_ENGINE_FAULT_INDEX, id, c->pc, (uint64_t)v);
			c->r[in.ctl.reg] = (uint64_t)v * (in.ctl.scale ? in.ctl.scale : 1);
			break;
		}
		case SPYRE_ISA_OP_BNZ:
			if ((in.ctl.flags & SPYRE_IF_GTZ) ? (int64_t)c->r[in.ctl.reg] > 0 : c->r[in.ctl.reg] != 0) {
				c->insns++;
				charge(e, c, 0);
				c->pc = (uint32_t)in.ctl.imm;
				return STEP_NEXT;
			}
			break;
		default:
			break;
		}
		charge(e, c, 0);
		break;
	case SPYRE_CLS_DMA:
		rc = exec_dma(e, c, id, &in.dma);
		break;
	case SPYRE_CLS_MATMUL:
	case SPYRE_CLS_BINARY:
	case SPYRE_CLS_UNARY:
	case SPYRE_CLS_SCALE:
	case SPYRE_CLS_CAST:
	case SPYRE_CLS_FILL:
	case SPYRE_CLS_REDUCE:
	case SPYRE_CLS_SOFTMAX:
	case SPYRE_CLS_TRANSPOSE:
	case SPYRE_CLS_ARGMAX:
	case SPYRE_CLS_MOVM:
	case SPYRE_CLS_TRIL:
		rc = exec_tensor_insn(e, c, id, &in.t, cls);
		break;
	case SPYRE_CLS_RING:
		switch (in.ring.opcode) {
		case SPYRE_ISA_OP_SEND:
			rc = exec_send(e, c, id, &in.ring);
			break;
		case SPYRE_ISA_OP_RECV:
			rc = exec_recv(e, c, id, &in.ring);
			break;
		case SPYRE_ISA_OP_SIGNAL:
			if (!launched(e, in.ring.peer))
				return fault(e, SPYRE_ENGINE_FAULT_BAD_PEER, id, c->pc, in.ring.peer);
			charge(e, c, 0);
			e->core[in.ring.peer].tok[in.ring.tag]++;
			e->core[in.ring.peer].tok_time[in.ring.tag] =
				max64(e->core[in.ring.peer].tok_time[in.ring.tag],
				      c->clock + (uint64_t)ring_hops(e, id, in.ring.peer) * e->cfg.ring_hop_cycles);
			wake(&e->core[in.ring.peer], c->clock);
			break;
		case SPYRE_ISA_OP_WAIT:
			if (c->tok[in.ring.tag] < in.ring.bytes)
				return STEP_BLOCK;
			c->tok[in.ring.tag] -= in.ring.bytes;
			if (in.ring.bytes)
				c->clock = max64(c->clock, c->tok_time[in.ring.tag]);
			charge(e, c, 0);
			break;
		default:
			rc = exec_barrier(e, c, id, in.ring.bytes);
			break;
		}
		break;
	default:
		return fault(e, SPYRE_ENGINE_FAULT_BAD_OPCODE, id, c->pc, 0);
	}
	if (rc == STEP_NEXT) {
		if (cls >= SPYRE_CLS_MATMUL && cls < SPYRE_CLS_RING)
			c->sp_dirty = max64(c->sp_dirty, tensor_dirty(&in.t, cls));
		c->insns++;
		c->pc++;
	}
	return rc;
}
