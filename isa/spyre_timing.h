/* SPDX-License-Identifier: MIT */
/*
 * spyre_timing.h - what one instruction costs in the timing model
 * (docs/spyre-isa.md §6): the cycles it keeps its core busy, not counting
 * waits for messages, tokens or barriers. The engine charges exactly this;
 * the kernel library's cost model sums it over a program to choose among
 * strategies. One home for the formulas.
 */
#ifndef SPYRE_TIMING_H
#define SPYRE_TIMING_H

#include <stdint.h>

#include "spyre_isa.h"

/* The timing model's device properties (a subset of the engine's configuration). */
struct spyre_timing {
	uint32_t clock_mhz;
	uint32_t peak_mac_per_ns[SPYRE_DT_COUNT];	/* per core, by input dtype */
	uint32_t mem_bw_mbps;				/* LPDDR, shared by the launched cores */
	uint32_t dma_latency_cycles;
	uint32_t dma_burst_bytes;			/* multiple of 128 */
	uint32_t dma_burst_overhead_bytes;
	uint32_t ring_bytes_per_cycle;
	uint32_t sp_bytes_per_cycle;
	uint32_t sfu_elems_per_cycle;
	uint32_t sfu_transcendental_cycles;
	uint32_t issue_cycles;
};

/* The defaults of uapi/spyre_isa.h (SPYRE_TM_*). */
void spyre_timing_default(struct spyre_timing *t);

/*
 * LPDDR occupancy of a LOAD/STORE of @rows rows of @row_bytes, in bytes: each
 * row (all rows as one when @contiguous: both strides equal row_bytes) moves
 * in bursts of dma_burst_bytes, each costing dma_burst_overhead_bytes more.
 * The engine shares LPDDR among the transfers in flight by this demand.
 */
uint64_t spyre_timing_dma_demand(const struct spyre_timing *t, uint64_t rows, uint64_t row_bytes, int contiguous);

/*
 * The three formulas, issue cycles excluded: a contiguous DMA of @bytes
 * with @active cores sharing LPDDR evenly (the static estimate; the engine
 * shares by the transfers in flight at each moment); a matmul of m x k by k x n (rows padded to the PE
 * array's 8-row passes) reading and writing the scratchpad; an SFU pass of
 * @elems elements, @passes cycles per vector, moving @bytes.
 */
uint64_t spyre_timing_dma(const struct spyre_timing *t, uint64_t bytes, uint32_t active);
uint64_t spyre_timing_matmul(const struct spyre_timing *t, unsigned dt, unsigned dt2, uint64_t m, uint64_t n,
			     uint64_t k, int acc);
uint64_t spyre_timing_sfu(const struct spyre_timing *t, uint64_t elems, uint64_t bytes, uint32_t passes);

/*
 * Busy cycles of @in on a core, issue included, with @active cores of the
 * launch sharing LPDDR bandwidth (>= 1). 0 + issue for control instructions,
 * recv, wait and barrier (their cost is waiting).
 */
uint64_t spyre_insn_cycles(const union spyre_insn *in, const struct spyre_timing *t, uint32_t active);

#endif /* SPYRE_TIMING_H */
