// SPDX-License-Identifier: MIT
/* The timing model's per-instruction cost (spyre_timing.h, docs/spyre-isa.md §6). */
#include "spyre_isa_codec.h"
#include "spyre_timing.h"

void spyre_timing_default(struct spyre_timing *t)
{
	*t = (struct spyre_timing){
		.clock_mhz = SPYRE_TM_CLOCK_MHZ,
		.peak_mac_per_ns = {
			[SPYRE_DT_FP32] = SPYRE_TM_MAC_PER_NS_FP32,
			[SPYRE_DT_FP16] = SPYRE_TM_MAC_PER_NS_16,
			[SPYRE_DT_BF16] = SPYRE_TM_MAC_PER_NS_16,
			[SPYRE_DT_DL16] = SPYRE_TM_MAC_PER_NS_16,
			[SPYRE_DT_INT8] = SPYRE_TM_MAC_PER_NS_INT8,
			[SPYRE_DT_INT32] = SPYRE_TM_MAC_PER_NS_FP32,
		},
		.mem_bw_mbps = SPYRE_TM_MEM_BW_MBPS,
		.dma_latency_cycles = SPYRE_TM_DMA_LATENCY_CYCLES,
		.dma_burst_bytes = SPYRE_TM_DMA_BURST_BYTES,
		.dma_burst_overhead_bytes = SPYRE_TM_DMA_BURST_OVERHEAD_BYTES,
		.ring_bytes_per_cycle = SPYRE_TM_RING_BYTES_PER_CYCLE,
		.sp_bytes_per_cycle = SPYRE_TM_SP_BYTES_PER_CYCLE,
		.sfu_elems_per_cycle = SPYRE_TM_SFU_ELEMS_PER_CYCLE,
		.sfu_transcendental_cycles = SPYRE_TM_SFU_TRANSCENDENTAL_CYCLES,
		.issue_cycles = SPYRE_TM_ISSUE_CYCLES,
	};
}

/* exp, gelu, silu, rsqrt, log, tanh, ..., div: through the SFU's transcendental path */
static int transcendental(uint32_t opcode)
{
	switch (opcode) {
	case SPYRE_ISA_OP_EXP:
	case SPYRE_ISA_OP_GELU:
	case SPYRE_ISA_OP_SILU:
	case SPYRE_ISA_OP_RSQRT:
	case SPYRE_ISA_OP_LOG:
	case SPYRE_ISA_OP_TANH:
	case SPYRE_ISA_OP_SIGMOID:
	case SPYRE_ISA_OP_SQRT:
	case SPYRE_ISA_OP_RECIP:
	case SPYRE_ISA_OP_GELU_TANH:
	case SPYRE_ISA_OP_POW:
	case SPYRE_ISA_OP_DIV:
		return 1;
	default:
		return 0;
	}
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

uint64_t spyre_timing_sfu(const struct spyre_timing *t, uint64_t elems, uint64_t bytes, uint32_t passes)
{
	return max64(div_up(elems, t->sfu_elems_per_cycle) * passes, div_up(bytes, t->sp_bytes_per_cycle));
}

#define sfu spyre_timing_sfu

uint64_t spyre_timing_dma_demand(const struct spyre_timing *t, uint64_t rows, uint64_t row_bytes, int contiguous)
{
	if (contiguous) {
		row_bytes *= rows;
		rows = 1;
	}
	return rows * (row_bytes + div_up(row_bytes, t->dma_burst_bytes) * t->dma_burst_overhead_bytes);
}

static uint64_t dma_cycles(const struct spyre_timing *t, uint64_t demand, uint32_t active)
{
	return t->dma_latency_cycles + div_up(demand * t->clock_mhz * (active ? active : 1), t->mem_bw_mbps);
}

uint64_t spyre_timing_dma(const struct spyre_timing *t, uint64_t bytes, uint32_t active)
{
	return dma_cycles(t, spyre_timing_dma_demand(t, 1, bytes, 1), active);
}

uint64_t spyre_timing_matmul(const struct spyre_timing *t, unsigned dt, unsigned dt2, uint64_t m, uint64_t n,
			     uint64_t k, int acc)
{
	/* the 8x8 PE array works in 8-row passes: rows are padded to 8 */
	uint64_t macs = div_up(m, SPYRE_TM_PE_ROWS) * SPYRE_TM_PE_ROWS * n * k;
	uint64_t cyc = div_up(macs * t->clock_mhz, (uint64_t)t->peak_mac_per_ns[dt] * 1000);
	uint64_t bytes = (m * k + k * n) * SPYRE_DT_SIZE(dt) + m * n * SPYRE_DT_SIZE(dt2) * (acc ? 2 : 1);

	return max64(cyc, div_up(bytes, t->sp_bytes_per_cycle));
}

static uint64_t tensor_cycles(const struct spyre_insn_tensor *in, const struct spyre_timing *t)
{
	uint64_t elems = (uint64_t)in->rows * in->cols;
	uint64_t e1 = SPYRE_DT_SIZE(in->dtype), e2 = SPYRE_DT_SIZE(in->dtype2);

	switch (spyre_opclass(in->opcode)) {
	case SPYRE_CLS_MATMUL:
		return spyre_timing_matmul(t, in->dtype, in->dtype2, in->rows, in->cols, in->k,
					   in->flags & SPYRE_IF_ACC);
	case SPYRE_CLS_BINARY:
		return sfu(t, elems, elems * (2 * e1 + e2),
			   transcendental(in->opcode) ? t->sfu_transcendental_cycles : 1);
	case SPYRE_CLS_MOVM:
		/* a, the mask and d read, d written */
		return sfu(t, elems, elems * (e1 + 1 + 2 * e2), 1);
	case SPYRE_CLS_TRIL:
		return sfu(t, elems, elems * (e1 + e2), 1);
	case SPYRE_CLS_UNARY:
	case SPYRE_CLS_SCALE:
	case SPYRE_CLS_CAST:
		return sfu(t, elems, elems * (e1 + e2),
			   transcendental(in->opcode) ? t->sfu_transcendental_cycles : 1);
	case SPYRE_CLS_FILL:
		return sfu(t, elems, elems * e1, 1);
	case SPYRE_CLS_REDUCE:
		return sfu(t, elems, elems * e1 + ((in->flags & SPYRE_IF_AXIS0) ? in->cols : in->rows) * e2, 1);
	case SPYRE_CLS_SOFTMAX:
		/* log_softmax: one more transcendental per row, negligible against the row */
		return sfu(t, elems, elems * (2 * e1 + e2), 2 + t->sfu_transcendental_cycles);
	case SPYRE_CLS_TRANSPOSE:
		/* one element per lane per cycle through the relayout path */
		return sfu(t, elems, 2 * elems * e1, 1);
	case SPYRE_CLS_ARGMAX:
		return sfu(t, elems, elems * e1 + 4ull * in->rows, 1);
	default:
		return 0;
	}
}

uint64_t spyre_insn_cycles(const union spyre_insn *in, const struct spyre_timing *t, uint32_t active)
{
	uint64_t c = 0;

	switch (spyre_opclass(in->raw[0])) {
	case SPYRE_CLS_DMA:
		c = dma_cycles(t, spyre_timing_dma_demand(t, in->dma.rows, in->dma.row_bytes,
							    in->dma.mem_stride == in->dma.row_bytes &&
							    in->dma.sp_stride == in->dma.row_bytes), active);
		break;
	case SPYRE_CLS_RING:
		if (in->ring.opcode == SPYRE_ISA_OP_SEND)
			c = div_up(in->ring.bytes, t->ring_bytes_per_cycle);
		break;
	case SPYRE_CLS_CTL:
	case SPYRE_CLS_NONE:
		break;
	default:
		c = tensor_cycles(&in->t, t);
		break;
	}
	return c + t->issue_cycles;
}
