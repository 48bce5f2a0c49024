// SPDX-License-Identifier: MIT
/*
 * Elementwise kernels: ADD (Y = A + alpha B), MUL, SILU, GELU, RELU. Rows are
 * split across cores; each core walks its rows in tiles that fit its
 * scratchpad (columns too, in whole sticks, when one row does not fit).
 */
#include <errno.h>

#include "kern.h"

static int binary(uint32_t op)
{
	return op == SPYRE_KOP_ADD || op == SPYRE_KOP_MUL;
}

int kg_gen_eltwise(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, esz = SPYRE_DT_SIZE(dt);
	uint64_t m = d->m, n = d->n, pitch = kg_pitch(n, dt);
	int nin = binary(d->op) ? 2 : 1, sa, sb = -1, sy;
	float alpha = d->alpha == 0.0f ? 1.0f : d->alpha;

	if (!m || !n)
		return kg_fail(g, "m and n must be non-zero");
	sa = kg_slot(g, nin == 2 ? "a" : "x", dt, m, n, pitch, SPYRE_SYM_IN);
	if (nin == 2)
		sb = kg_slot(g, "b", dt, m, n, pitch, SPYRE_SYM_IN);
	sy = kg_slot(g, "y", dt, m, n, pitch, SPYRE_SYM_OUT);
	if (g->failed)
		return -EINVAL;

	/* columns per tile: all, or as many whole sticks as fit 8 rows of every operand */
	uint64_t per_stick = SPYRE_STICK_BYTES / esz;
	uint64_t buf_bytes_per_col = (uint64_t)(nin + 1) * esz + 8;	/* inputs, output, 2 fp32 temps */
	uint64_t cw = n;

	if (cw * buf_bytes_per_col * 8 > g->sp_bytes) {
		cw = g->sp_bytes / (buf_bytes_per_col * 8) / per_stick * per_stick;
		if (!cw)
			return kg_fail(g, "a stick of 8 rows does not fit the scratchpad");
	}
	for (uint32_t c = 0; c < g->cores; c++) {
		struct kg_range r = kg_split(m, g->cores, c, 1);

		if (!r.count)
			continue;
		for (uint64_t j0 = 0; j0 < n; j0 += cw) {
			uint64_t w = n - j0 < cw ? n - j0 : cw;
			uint64_t tp = kg_pitch(w, dt), tp32 = kg_pitch(w, SPYRE_DT_FP32);
			uint64_t rows_fit = g->sp_bytes / ((uint64_t)(nin + 1) * tp + 2 * tp32);
			uint64_t tr = r.count < rows_fit ? r.count : rows_fit;

			if (!tr)
				return kg_fail(g, "one row of %llu columns does not fit", (unsigned long long)w);
			for (uint64_t r0 = 0; r0 < r.count; r0 += tr) {
				uint64_t rows = r.count - r0 < tr ? r.count - r0 : tr;
				uint64_t moff = (r.start + r0) * pitch + j0 * esz;
				uint32_t a, b = 0, y, t, t2;

				kg_sp_reset(g, c);
				a = kg_sp_alloc(g, c, rows * tp);
				if (nin == 2)
					b = kg_sp_alloc(g, c, rows * tp);
				y = kg_sp_alloc(g, c, rows * tp);
				t = kg_sp_alloc(g, c, rows * tp32);
				t2 = kg_sp_alloc(g, c, rows * tp32);
				if (g->failed)
					return -EINVAL;
				spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
					.sp = a, .mem = { .sym = sa, .off = moff }, .rows = (uint32_t)rows,
					.row_bytes = (uint32_t)tp, .mem_stride = (uint32_t)pitch,
					.sp_stride = (uint32_t)tp });
				if (nin == 2)
					spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
						.sp = b, .mem = { .sym = sb, .off = moff }, .rows = (uint32_t)rows,
						.row_bytes = (uint32_t)tp, .mem_stride = (uint32_t)pitch,
						.sp_stride = (uint32_t)tp });
				switch (d->op) {
				case SPYRE_KOP_ADD:
					if (alpha != 1.0f) {
						/* fp32: A cast, alpha B scaled, one rounding of the sum */
						spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
							.op = SPYRE_ISA_OP_CAST, .dt = dt, .dt2 = SPYRE_DT_FP32,
							.d = t, .a = a, .rows = (uint32_t)rows, .cols = (uint32_t)w });
						spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
							.op = SPYRE_ISA_OP_SCALE, .dt = dt, .dt2 = SPYRE_DT_FP32,
							.d = t2, .a = b, .rows = (uint32_t)rows, .cols = (uint32_t)w,
							.scale = alpha });
						spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
							.op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_FP32, .dt2 = dt, .d = y,
							.a = t, .b = t2, .rows = (uint32_t)rows, .cols = (uint32_t)w });
						break;
					}
					spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
						.op = SPYRE_ISA_OP_ADD, .dt = dt, .dt2 = dt, .d = y, .a = a, .b = b,
						.rows = (uint32_t)rows, .cols = (uint32_t)w });
					break;
				case SPYRE_KOP_MUL:
					spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
						.op = SPYRE_ISA_OP_MUL, .dt = dt, .dt2 = dt, .d = y, .a = a, .b = b,
						.rows = (uint32_t)rows, .cols = (uint32_t)w });
					break;
				default:
					spyre_pb_op(g->pb, c, &(struct spyre_pb_op){
						.op = d->op == SPYRE_KOP_SILU ? SPYRE_ISA_OP_SILU :
						      d->op == SPYRE_KOP_RELU ? SPYRE_ISA_OP_RELU : SPYRE_ISA_OP_GELU,
						.dt = dt, .dt2 = dt, .d = y, .a = a, .rows = (uint32_t)rows,
						.cols = (uint32_t)w });
					break;
				}
				spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
					.sp = y, .mem = { .sym = sy, .off = moff }, .rows = (uint32_t)rows,
					.row_bytes = (uint32_t)tp, .mem_stride = (uint32_t)pitch,
					.sp_stride = (uint32_t)tp });
			}
		}
	}
	return kg_ok(g);
}
