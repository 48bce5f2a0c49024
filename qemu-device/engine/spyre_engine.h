/* SPDX-License-Identifier: MIT */
/*
 * spyre_engine.h - the spyre compute engine: 32 cores (by default) with
 * scratchpads on a bidirectional ring, executing programs in the format of
 * uapi/spyre_isa.h with real numerics and a timing model.
 *
 * Plain C11, no QEMU types: the QEMU device links it and routes every memory
 * access through its MMU with struct spyre_engine_mem_ops; host tests link it
 * with flat memory. It depends on the ISA library (isa/: decoding, the static
 * checks, data types), which everything else that handles programs links
 * without the engine; this header needs only uapi/spyre_isa.h. An engine holds all its state (no globals):
 * different engines may launch concurrently from different threads; one
 * engine runs one launch at a time (the caller serialises). With
 * cfg.threads > 1 an engine has host threads of its own for the cores'
 * numerics; memory callbacks still come from the launching thread only.
 *
 * docs/spyre-isa.md specifies the program format, ISA and timing model.
 */
#ifndef SPYRE_ENGINE_H
#define SPYRE_ENGINE_H

#include <stdint.h>

#include "spyre_isa.h"

/*
 * Device properties of the engine. spyre_engine_config_default() fills the
 * documented defaults (docs/spyre-isa.md §6 gives each one's source).
 */
struct spyre_engine_config {
	uint32_t cores;			/* 1..SPYRE_MAX_CORES; default 32 */
	uint32_t scratchpad_bytes;	/* per core, multiple of 128; default 2 MiB */
	uint32_t clock_mhz;		/* core clock; default 1500 */
	uint32_t peak_mac_per_ns[SPYRE_DT_COUNT]; /* per core, by input dtype (int32: unused) */
	uint32_t mem_bw_mbps;		/* LPDDR bandwidth shared by the launched cores, MB/s */
	uint32_t dma_latency_cycles;	/* from a LOAD/STORE's last byte to its completion */
	uint32_t dma_burst_bytes;	/* DMA burst, multiple of 128; default 4096 */
	uint32_t dma_burst_overhead_bytes; /* LPDDR time per burst beyond its data, in bytes */
	uint32_t ring_bytes_per_cycle;	/* per link and direction */
	uint32_t ring_hop_cycles;	/* latency per hop */
	uint32_t sp_bytes_per_cycle;	/* scratchpad read+write bandwidth per core */
	uint32_t sfu_elems_per_cycle;	/* special-function unit throughput per core */
	uint32_t sfu_transcendental_cycles; /* cycles per SFU pass for exp/gelu/silu/rsqrt/softmax */
	uint32_t issue_cycles;		/* cost of issuing any instruction */
	uint32_t barrier_cycles;	/* added when a barrier releases */
	uint64_t insn_budget;		/* instructions per core per launch */
	/*
	 * Host threads that run the cores' tensor numerics, the launching one
	 * included (1..SPYRE_ENGINE_MAX_THREADS; default 1). Results and the
	 * modeled timeline are the same for every count.
	 */
	uint32_t threads;
};

#define SPYRE_ENGINE_MAX_THREADS 64

/*
 * Memory access: every program fetch, argument read, LOAD and STORE goes
 * through these. Return 0, or a non-zero fault code (passed through in
 * spyre_launch_result.fault_detail) with *fault_va set to the first byte
 * that failed. Accesses never cross a row of a LOAD/STORE, are at most
 * SPYRE_PROG_MAX_BYTES long and may be issued from the launching thread only.
 */
struct spyre_engine_mem_ops {
	int (*read)(void *opaque, uint64_t va, void *buf, uint64_t len, uint64_t *fault_va);
	int (*write)(void *opaque, uint64_t va, const void *buf, uint64_t len, uint64_t *fault_va);
	/*
	 * Optional (NULL: unused): what read() of [va, va + len) would return,
	 * without reading. With it, a LOAD's bytes are checked when the LOAD
	 * completes on the timeline but read when its core next touches its
	 * scratchpad (or before any STORE writes), so a core's operands are
	 * still in the host's caches when it computes, and a MATMUL reads its
	 * operands from one copy of rows that several cores LOAD (docs/timed-mode.md,
	 * "The engine on the host"). The caller promises that nothing but the
	 * launch's STOREs writes device memory during a launch.
	 */
	int (*probe)(void *opaque, uint64_t va, uint64_t len, uint64_t *fault_va);
};

struct spyre_launch_result {
	uint32_t status;		/* SPYRE_ENGINE_FAULT_NONE or the fault cause */
	uint32_t fault_core;		/* SPYRE_ENGINE_FAULT_CORE_NONE if not tied to a core */
	uint32_t fault_pc;		/* instruction index in that core's stream */
	int32_t fault_detail;		/* SPYRE_ENGINE_FAULT_MEM: the callback's return value */
	uint64_t fault_addr;		/* VA (MEM, MEM_RANGE) or scratchpad offset (SP_RANGE, ALIGN) */
	uint64_t device_cycles;		/* modeled: launch start to the last core's end */
	uint64_t device_ns;
	uint64_t insns;			/* instructions executed, all cores */
	uint32_t cores_run;		/* cores in the mask with a non-empty stream */
	uint32_t reserved;
	uint64_t core_busy_cycles[SPYRE_MAX_CORES];	/* time spent executing (not waiting) */
	uint64_t core_end_cycles[SPYRE_MAX_CORES];	/* each core's clock when it ended */
};

struct spyre_engine;

void spyre_engine_config_default(struct spyre_engine_config *cfg);
/* NULL if cfg is invalid (see docs) or memory is short. */
struct spyre_engine *spyre_engine_new(const struct spyre_engine_config *cfg);
void spyre_engine_free(struct spyre_engine *e);
const struct spyre_engine_config *spyre_engine_get_config(const struct spyre_engine *e);

/*
 * Run the program at program_va with the argument block at args_va on the
 * cores in core_mask (bits beyond cfg.cores are ignored). Fills *res and
 * returns res->status (0 on success). Never crashes or hangs on any program
 * bytes: malformed input ends in a fault.
 */
int spyre_engine_launch(struct spyre_engine *e, uint64_t program_va, uint64_t args_va,
			uint32_t core_mask, const struct spyre_engine_mem_ops *ops, void *opaque,
			struct spyre_launch_result *res);

/*
 * Read access to a core's scratchpad as the last launch left it (tests,
 * debuggers; LOADs whose bytes only a MATMUL read are written into it now);
 * NULL if core is out of range. Not during a launch.
 */
uint8_t *spyre_engine_scratchpad(struct spyre_engine *e, uint32_t core);

#endif /* SPYRE_ENGINE_H */
