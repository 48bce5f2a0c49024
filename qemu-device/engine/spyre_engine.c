// SPDX-License-Identifier: MIT
/*
 * The spyre compute engine: cores with scratchpads on a bidirectional ring,
 * executing programs (uapi/spyre_isa.h) with real numerics and a timing
 * model. docs/spyre-isa.md is the specification.
 *
 * Execution is a deterministic discrete-event simulation on one modeled
 * timeline: the runnable core with the earliest clock (the lowest index on
 * ties) executes its next instruction, unless an event of the memory system
 * (a DMA's data phase ending, a DMA completing) comes first. Cores block on
 * RECV with nothing to take, SEND into a full inbox, WAIT, BARRIER, a full DMA
 * queue and a LOAD/STORE without SPYRE_IF_ASYNC; whatever unblocks them wakes
 * them. Nothing runnable and no DMA in flight while some core is unfinished
 * is a deadlock.
 *
 * This file holds the engine's interface, a launch (program and argument
 * fetch, the cores' set-up, the result) and that scheduler. What one
 * instruction does is spyre_exec.c's; the memory system (LPDDR shared by the
 * DMA queues, docs/spyre-isa.md §6) is spyre_lpddr.c's; calls go one way,
 * spyre_engine.c -> spyre_exec.c -> spyre_lpddr.c (spyre_engine_int.h).
 * With cfg.threads > 1 the tensor numerics run on host threads
 * (spyre_defer.c); everything above, the timeline included, stays on the
 * launching thread and is the same for every thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "spyre_engine_int.h"

void spyre_engine_config_default(struct spyre_engine_config *c)
{
	memset(c, 0, sizeof(*c));
	c->cores = SPYRE_TM_CORES;
	c->scratchpad_bytes = SPYRE_TM_SCRATCHPAD_BYTES;
	c->clock_mhz = SPYRE_TM_CLOCK_MHZ;
	c->peak_mac_per_ns[SPYRE_DT_FP16] = SPYRE_TM_MAC_PER_NS_16;
	c->peak_mac_per_ns[SPYRE_DT_BF16] = SPYRE_TM_MAC_PER_NS_16;
	c->peak_mac_per_ns[SPYRE_DT_DL16] = SPYRE_TM_MAC_PER_NS_16;
	c->peak_mac_per_ns[SPYRE_DT_INT8] = SPYRE_TM_MAC_PER_NS_INT8;
	c->peak_mac_per_ns[SPYRE_DT_FP32] = SPYRE_TM_MAC_PER_NS_FP32;
	c->peak_mac_per_ns[SPYRE_DT_INT32] = SPYRE_TM_MAC_PER_NS_FP32;
	c->mem_bw_mbps = SPYRE_TM_MEM_BW_MBPS;
	c->dma_latency_cycles = SPYRE_TM_DMA_LATENCY_CYCLES;
	c->dma_burst_bytes = SPYRE_TM_DMA_BURST_BYTES;
	c->dma_burst_overhead_bytes = SPYRE_TM_DMA_BURST_OVERHEAD_BYTES;
	c->ring_bytes_per_cycle = SPYRE_TM_RING_BYTES_PER_CYCLE;
	c->ring_hop_cycles = SPYRE_TM_RING_HOP_CYCLES;
	c->sp_bytes_per_cycle = SPYRE_TM_SP_BYTES_PER_CYCLE;
	c->sfu_elems_per_cycle = SPYRE_TM_SFU_ELEMS_PER_CYCLE;
	c->sfu_transcendental_cycles = SPYRE_TM_SFU_TRANSCENDENTAL_CYCLES;
	c->issue_cycles = SPYRE_TM_ISSUE_CYCLES;
	c->barrier_cycles = SPYRE_TM_BARRIER_CYCLES;
	c->insn_budget = 1u << 22;
	c->threads = 1;
}

static bool config_ok(const struct spyre_engine_config *c)
{
	if (!c->cores || c->cores > SPYRE_MAX_CORES || !c->clock_mhz || !c->mem_bw_mbps ||
	    c->scratchpad_bytes < SPYRE_STICK_BYTES || c->scratchpad_bytes % SPYRE_STICK_BYTES ||
	    c->scratchpad_bytes > (256u << 20) || !c->ring_bytes_per_cycle ||
	    !c->dma_burst_bytes || c->dma_burst_bytes % SPYRE_STICK_BYTES ||
	    !c->sp_bytes_per_cycle || !c->sfu_elems_per_cycle || !c->insn_budget ||
	    !c->threads || c->threads > SPYRE_ENGINE_MAX_THREADS)
		return false;
	for (int i = 0; i < SPYRE_DT_COUNT; i++)
		if (!c->peak_mac_per_ns[i])
			return false;
	return true;
}

struct spyre_engine *spyre_engine_new(const struct spyre_engine_config *cfg)
{
	struct spyre_engine *e;

	if (!cfg || !config_ok(cfg))
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->cfg = *cfg;
	e->tm = (struct spyre_timing){
		.clock_mhz = cfg->clock_mhz, .mem_bw_mbps = cfg->mem_bw_mbps,
		.dma_latency_cycles = cfg->dma_latency_cycles, .ring_bytes_per_cycle = cfg->ring_bytes_per_cycle,
		.dma_burst_bytes = cfg->dma_burst_bytes, .dma_burst_overhead_bytes = cfg->dma_burst_overhead_bytes,
		.sp_bytes_per_cycle = cfg->sp_bytes_per_cycle, .sfu_elems_per_cycle = cfg->sfu_elems_per_cycle,
		.sfu_transcendental_cycles = cfg->sfu_transcendental_cycles, .issue_cycles = cfg->issue_cycles,
	};
	memcpy(e->tm.peak_mac_per_ns, cfg->peak_mac_per_ns, sizeof(e->tm.peak_mac_per_ns));
	/* calloc: untouched scratchpad pages cost no host memory */
	e->sp = calloc(cfg->cores, cfg->scratchpad_bytes);
	e->fresh_words = (uint32_t)div_up(cfg->scratchpad_bytes / SPYRE_STICK_BYTES, 64);
	e->fresh = calloc((size_t)cfg->cores * e->fresh_words, sizeof(uint64_t));
	if (!e->sp || !e->fresh) {
		free(e->sp);
		free(e->fresh);
		free(e);
		return NULL;
	}
	/* no host threads: the same results on the launching thread alone */
	if (spyre_defer_init(e))
		e->cfg.threads = 1;
	return e;
}

void spyre_engine_free(struct spyre_engine *e)
{
	if (!e)
		return;
	spyre_defer_fini(e);
	spyre_blobs_free(e, false);
	for (int i = 0; i < SPYRE_DT_COUNT; i++)
		free(e->cvt16[i]);
	spyre_ws_free(&e->ws0);
	free(e->fresh);
	free(e->sp);
	free(e);
}

const struct spyre_engine_config *spyre_engine_get_config(const struct spyre_engine *e)
{
	return &e->cfg;
}

uint8_t *spyre_engine_scratchpad(struct spyre_engine *e, uint32_t core)
{
	if (core_sp(e, core))
		spyre_lazy_post(e, core);	/* what the last launch left, whole */
	return core_sp(e, core);
}

/* ---- the scheduler ------------------------------------------------------------ */

/*
 * Run core id from its clock while it stays the earliest runnable core (below
 * @bound, the next other core or memory event) and executes instructions that
 * touch nothing shared; after anything else the caller chooses again.
 */
static int run_core(struct spyre_engine *e, uint32_t id, uint64_t bound)
{
	struct core *c = &e->core[id];

	for (;;) {
		uint32_t pc = c->pc;
		enum spyre_opclass cls = pc < c->num_insns ?
			spyre_opclass(c->code[(uint64_t)pc * SPYRE_INSN_BYTES]) : SPYRE_CLS_NONE;
		int rc = spyre_exec_step(e, id);

		if (rc == STEP_BLOCK)
			c->blocked = true;
		else if (rc == STEP_HALT)
			c->done = true;
		if (rc != STEP_NEXT || cls == SPYRE_CLS_DMA || cls == SPYRE_CLS_RING || c->clock >= bound)
			return rc;
	}
}

static void launch_cleanup(struct spyre_engine *e)
{
	for (uint32_t i = 0; i < e->cfg.cores; i++) {
		struct core *c = &e->core[i];

		for (uint32_t s = 0; s < SPYRE_MAX_CORES; s++) {
			while (c->head[s]) {
				struct msg *m = c->head[s];

				c->head[s] = m->next;
				free(m);
			}
			c->tail[s] = NULL;
		}
	}
	free(e->image);
	free(e->args);
	e->image = NULL;
	e->args = NULL;
}

static int read_mem(struct spyre_engine *e, uint64_t va, void *buf, uint64_t len)
{
	uint64_t fva = va;
	int rc;

	if (!len)
		return 0;
	rc = e->ops->read(e->opaque, va, buf, len, &fva);
	if (rc) {
		e->res->fault_detail = rc;
		fault(e, SPYRE_ENGINE_FAULT_MEM, SPYRE_ENGINE_FAULT_CORE_NONE, SPYRE_ENGINE_FAULT_PC_NONE, fva);
	}
	return rc;
}

int spyre_engine_launch(struct spyre_engine *e, uint64_t program_va, uint64_t args_va,
			uint32_t core_mask, const struct spyre_engine_mem_ops *ops, void *opaque,
			struct spyre_launch_result *res)
{
	uint8_t hdr[sizeof(struct spyre_prog_hdr)];
	struct spyre_prog_hdr h;
	uint32_t total, f;

	memset(res, 0, sizeof(*res));
	res->fault_core = SPYRE_ENGINE_FAULT_CORE_NONE;
	res->fault_pc = SPYRE_ENGINE_FAULT_PC_NONE;
	e->res = res;
	e->ops = ops;
	e->opaque = opaque;
	e->program_va = program_va;
	e->mask = e->cfg.cores == SPYRE_MAX_CORES ? core_mask : core_mask & ((1u << e->cfg.cores) - 1);
	/* a launch that fails before its cores start reports none of the previous launch's figures */
	for (uint32_t i = 0; i < e->cfg.cores; i++)
		e->core[i].running = false;
	e->active = (uint32_t)__builtin_popcount(e->mask);

	/* fetch: header first (for the size), then the whole image */
	if (read_mem(e, program_va, hdr, sizeof(hdr)))
		return (int)res->status;
	spyre_prog_hdr_decode(hdr, &h);
	total = h.total_size;
	if (h.magic != SPYRE_PROG_MAGIC || total < sizeof(hdr) || total > SPYRE_PROG_MAX_BYTES) {
		fault(e, SPYRE_ENGINE_FAULT_BAD_PROGRAM, SPYRE_ENGINE_FAULT_CORE_NONE, SPYRE_ENGINE_FAULT_PC_NONE, program_va);
		e->res = NULL;
		return (int)res->status;
	}
	e->image = malloc(total);
	if (!e->image || read_mem(e, program_va, e->image, total))
		goto out;
	f = spyre_prog_check_container(e->image, total, &e->prog);
	if (f) {
		fault(e, f, SPYRE_ENGINE_FAULT_CORE_NONE, SPYRE_ENGINE_FAULT_PC_NONE, program_va);
		goto out;
	}
	uint64_t nargs = (uint64_t)e->prog.hdr.num_syms + e->prog.hdr.num_scalars;

	e->args = calloc(nargs + 1, 8);
	if (!e->args) {
		fault(e, SPYRE_ENGINE_FAULT_BAD_PROGRAM, SPYRE_ENGINE_FAULT_CORE_NONE, SPYRE_ENGINE_FAULT_PC_NONE, args_va);
		goto out;
	}
	if (nargs) {
		uint8_t *raw = malloc(nargs * 8);

		if (!raw || read_mem(e, args_va, raw, nargs * 8)) {
			free(raw);
			goto out;
		}
		for (uint64_t i = 0; i < nargs; i++)
			e->args[i] = spyre_ld64(raw + 8 * i);
		free(raw);
	}

	/*
	 * reset the launched cores; scratchpads start zeroed (no data crosses
	 * launches): what the last launch left is zeroed where first touched,
	 * unless a LOAD or RECV overwrites it whole (spyre_sp_settle(), below
	 * for whatever the launch did not touch)
	 */
	for (uint32_t i = 0; i < e->cfg.cores; i++) {
		struct core *c = &e->core[i];
		uint64_t dirty = min64(div_up(c->sp_dirty, SPYRE_STICK_BYTES), e->cfg.scratchpad_bytes / SPYRE_STICK_BYTES);

		memset(c, 0, sizeof(*c));	/* LOADs still waiting from the last launch are dropped */
		c->stale_end = dirty * SPYRE_STICK_BYTES;
		memset(e->fresh + (size_t)i * e->fresh_words, 0, div_up(dirty, 64) * sizeof(uint64_t));
		if (launched(e, i) && i < e->prog.hdr.num_cores && e->prog.cores[i].num_insns) {
			c->code = e->image + e->prog.cores[i].code_off;
			c->num_insns = e->prog.cores[i].num_insns;
			c->running = true;
			res->cores_run++;
		}
	}

	spyre_blobs_free(e, true);
	e->mem_now = 0;
	e->dfault = 0;
	memset(e->link_free, 0, sizeof(e->link_free));
	for (;;) {
		uint64_t tev = spyre_lpddr_next(e), first = NEVER, second = NEVER;
		uint32_t pick = SPYRE_MAX_CORES;
		bool all_done = true;

		for (uint32_t i = 0; i < e->cfg.cores; i++) {
			struct core *c = &e->core[i];

			if (!c->running || c->done)
				continue;
			all_done = false;
			if (c->blocked)
				continue;
			if (c->clock < first) {
				second = first;
				first = c->clock;
				pick = i;
			} else if (c->clock < second) {
				second = c->clock;
			}
		}
		if (pick < SPYRE_MAX_CORES && first < tev) {
			/* a later core on the same clock goes next: stop at second, or one past it for a tie */
			if (run_core(e, pick, min64(tev, second + (second == first))) == STEP_FAULT)
				goto out;
		} else if (tev != NEVER) {
			spyre_lpddr_advance(e, tev);
			if (spyre_lpddr_events(e, tev) == STEP_FAULT)
				goto out;
		} else if (all_done) {
			break;
		} else {
			for (uint32_t i = 0; i < e->cfg.cores; i++)
				if (e->core[i].running && !e->core[i].done) {
					fault(e, SPYRE_ENGINE_FAULT_DEADLOCK, i, e->core[i].pc, 0);
					break;
				}
			goto out;
		}
	}
out:
	/*
	 * the cores' waiting LOADs (completed before any fault: their bytes
	 * were checked) and queued numerics (host threads) finish before the
	 * scratchpads are seen
	 */
	for (uint32_t i = 0; i < e->cfg.cores; i++)
		spyre_lazy_end(e, i);
	spyre_defer_sync_all(e);
	for (uint32_t i = 0; i < e->cfg.cores; i++)
		spyre_sp_settle(e, i);
	if (!res->status && !e->image)
		fault(e, SPYRE_ENGINE_FAULT_BAD_PROGRAM, SPYRE_ENGINE_FAULT_CORE_NONE, SPYRE_ENGINE_FAULT_PC_NONE, program_va);
	for (uint32_t i = 0; i < e->cfg.cores; i++) {
		struct core *c = &e->core[i];

		if (!c->running)
			continue;
		res->core_busy_cycles[i] = c->busy;
		res->core_end_cycles[i] = c->clock;
		res->device_cycles = max64(res->device_cycles, c->clock);
		res->insns += c->insns;
	}
	res->device_ns = div_up(res->device_cycles * 1000, e->cfg.clock_mhz);
	launch_cleanup(e);
	e->res = NULL;
	return (int)res->status;
}

