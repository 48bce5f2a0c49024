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
 * The timing model (docs/spyre-isa.md §6): each core has a DMA queue served
 * in order; the transfers at the heads of all queues share LPDDR bandwidth
 * equally at every moment (processor sharing); a transfer occupies LPDDR for
 * its bytes plus a per-burst overhead and completes a fixed latency after its
 * data phase; its data moves when it completes. Ring messages take the shorter
 * direction and reserve each link on the way for their transfer time, first
 * come first served; tensor ops cost spyre_insn_cycles().
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_dtype.h"
#include "spyre_engine.h"
#include "spyre_timing.h"
#include "spyre_isa_codec.h"
#include "spyre_gemm.h"


struct msg {
	struct msg *next;
	uint32_t tag, bytes;
	uint64_t arrival;	/* modeled cycle the last byte lands */
	uint8_t data[];
};

/* A LOAD or STORE in a core's DMA queue, addresses resolved at issue. */
struct dma_op {
	uint64_t va;		/* first row in device memory */
	uint64_t len;		/* bytes per access (rows coalesced when contiguous) */
	uint64_t left;		/* LPDDR service still owed, bytes x clock_mhz */
	uint64_t issue;		/* cycle it was issued */
	uint64_t done;		/* cycle it completes (set when its data phase ends) */
	uint32_t spo, rows, mem_stride, sp_stride, pc;
	bool store, async;
};

struct core {
	const uint8_t *code;
	uint32_t num_insns, pc;
	bool running, done, at_barrier, send_blocked;
	bool blocked;		/* not runnable until something wakes it */
	bool dma_wait;		/* blocked on its own synchronous LOAD/STORE */
	/* DMA queue: [dq_head, dq_svc) in latency, [dq_svc, dq_tail) waiting for LPDDR (the first in service) */
	struct dma_op dq[SPYRE_DMA_QUEUE_DEPTH];
	uint32_t dq_head, dq_svc, dq_tail;
	uint32_t barrier_mask;
	uint64_t r[SPYRE_NUM_REGS];
	uint64_t clock, busy, insns;
	uint32_t tok[SPYRE_NUM_TOKENS];
	uint64_t tok_time[SPYRE_NUM_TOKENS];
	/* inbox: one FIFO per sending core */
	struct msg *head[SPYRE_MAX_CORES], *tail[SPYRE_MAX_CORES];
	uint64_t inbox_bytes;
	uint64_t inbox_freed;	/* clock of the RECV that last made room */
	uint64_t sp_dirty;	/* bytes of scratchpad that may be non-zero */
};

struct spyre_engine {
	struct spyre_engine_config cfg;
	struct spyre_timing tm;		/* cfg's timing properties, for spyre_insn_cycles() */
	uint8_t *sp;			/* cores * scratchpad_bytes */
	struct core core[SPYRE_MAX_CORES];
	float *ws[3];			/* matmul workspaces (converted A, B, C) */
	size_t ws_len[3];		/* floats */
	float *pack;
	size_t pack_len;
	/* per launch */
	const struct spyre_engine_mem_ops *ops;
	void *opaque;
	struct spyre_prog_view prog;
	uint8_t *image;
	uint64_t program_va;
	uint64_t *args;			/* slots then scalars */
	uint32_t mask;			/* launched cores (within cfg.cores) */
	uint32_t active;		/* popcount(mask): cores sharing LPDDR */
	struct spyre_launch_result *res;
	uint64_t mem_now;		/* cycle up to which LPDDR service is accounted */
	uint64_t link_free[2][SPYRE_MAX_CORES];	/* ring link [direction][from core] free from this cycle */
};

#define DQ(c, i) (&(c)->dq[(i) % SPYRE_DMA_QUEUE_DEPTH])
#define NEVER UINT64_MAX

enum step { STEP_NEXT, STEP_BLOCK, STEP_HALT, STEP_FAULT };

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
}

static bool config_ok(const struct spyre_engine_config *c)
{
	if (!c->cores || c->cores > SPYRE_MAX_CORES || !c->clock_mhz || !c->mem_bw_mbps ||
	    c->scratchpad_bytes < SPYRE_STICK_BYTES || c->scratchpad_bytes % SPYRE_STICK_BYTES ||
	    c->scratchpad_bytes > (256u << 20) || !c->ring_bytes_per_cycle ||
	    !c->dma_burst_bytes || c->dma_burst_bytes % SPYRE_STICK_BYTES ||
	    !c->sp_bytes_per_cycle || !c->sfu_elems_per_cycle || !c->insn_budget)
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
	if (!e->sp) {
		free(e);
		return NULL;
	}
	return e;
}

void spyre_engine_free(struct spyre_engine *e)
{
	if (!e)
		return;
	for (int i = 0; i < 3; i++)
		free(e->ws[i]);
	free(e->pack);
	free(e->sp);
	free(e);
}

const struct spyre_engine_config *spyre_engine_get_config(const struct spyre_engine *e)
{
	return &e->cfg;
}

uint8_t *spyre_engine_scratchpad(struct spyre_engine *e, uint32_t core)
{
	if (!e || core >= e->cfg.cores)
		return NULL;
	return e->sp + (size_t)core * e->cfg.scratchpad_bytes;
}

/* ---- helpers ------------------------------------------------------------ */

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static int fault(struct spyre_engine *e, uint32_t cause, uint32_t core, uint32_t pc, uint64_t addr)
{
	struct spyre_launch_result *r = e->res;

	if (r->status)
		return STEP_FAULT;
	r->status = cause;
	r->fault_core = core;
	r->fault_pc = pc;
	r->fault_addr = addr;
	return STEP_FAULT;
}

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

/* ---- the memory system: LPDDR shared by the DMA queues' heads --------------- */

static uint32_t mem_active(const struct spyre_engine *e)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < e->cfg.cores; i++)
		n += e->core[i].dq_svc != e->core[i].dq_tail;
	return n;
}

/*
 * Account LPDDR service up to cycle t (>= mem_now, never past the next data
 * phase's end): each of the n transfers in service got mem_bw_mbps / n
 * units (bytes x clock_mhz) per cycle.
 */
static void mem_advance(struct spyre_engine *e, uint64_t t)
{
	uint32_t n;

	if (t <= e->mem_now)
		return;
	n = mem_active(e);
	if (n) {
		uint64_t share = (t - e->mem_now) * e->cfg.mem_bw_mbps / n;

		for (uint32_t i = 0; i < e->cfg.cores; i++) {
			struct core *c = &e->core[i];

			if (c->dq_svc != c->dq_tail) {
				struct dma_op *op = DQ(c, c->dq_svc);

				op->left = op->left > share ? op->left - share : 0;
			}
		}
	}
	e->mem_now = t;
}

/* The next memory event: a data phase ending or a DMA completing; NEVER if none. */
static uint64_t mem_next(const struct spyre_engine *e)
{
	uint32_t n = mem_active(e);
	uint64_t t = NEVER;

	for (uint32_t i = 0; i < e->cfg.cores; i++) {
		const struct core *c = &e->core[i];

		if (c->dq_svc != c->dq_tail)
			t = min64(t, e->mem_now + div_up(DQ(c, c->dq_svc)->left * n, e->cfg.mem_bw_mbps));
		if (c->dq_head != c->dq_svc)
			t = min64(t, DQ(c, c->dq_head)->done);
	}
	return t;
}

/*
 * Something a blocked core may wait for happened at cycle now: it retries its
 * instruction (and may block again). A core in its own synchronous DMA goes
 * on only when that completes (mem_events()).
 */
static void wake(struct core *c, uint64_t now)
{
	if (c->blocked && !c->dma_wait) {
		c->blocked = false;
		c->clock = max64(c->clock, now);
	}
}

/*
 * Process the memory events at cycle now (== mem_next(), mem_advance()d to
 * it): data phases that ended start their latency and let the next transfer
 * of their queue in; DMAs that complete move their data, then add to the
 * DMA token (asynchronous) or let their core go on (synchronous).
 */
static int dma_copy(struct spyre_engine *e, uint32_t id, const struct dma_op *op);

static int mem_events(struct spyre_engine *e, uint64_t now)
{
	for (uint32_t i = 0; i < e->cfg.cores; i++) {
		struct core *c = &e->core[i];

		if (c->dq_svc != c->dq_tail && !DQ(c, c->dq_svc)->left) {
			DQ(c, c->dq_svc)->done = now + e->cfg.dma_latency_cycles;
			c->dq_svc++;
		}
	}
	for (uint32_t i = 0; i < e->cfg.cores; i++) {
		struct core *c = &e->core[i];

		while (c->dq_head != c->dq_svc && DQ(c, c->dq_head)->done <= now) {
			const struct dma_op *op = DQ(c, c->dq_head);

			if (dma_copy(e, i, op) == STEP_FAULT)
				return STEP_FAULT;
			c->dq_head++;
			if (op->async) {
				c->tok[SPYRE_TOKEN_DMA]++;
				c->tok_time[SPYRE_TOKEN_DMA] = max64(c->tok_time[SPYRE_TOKEN_DMA], op->done);
				wake(c, now);	/* a WAIT or a full queue */
				if (c->done)	/* the launch ends when its DMA does */
					c->clock = max64(c->clock, op->done);
			} else {
				/* the synchronous DMA at the queue's end: the core was busy for it */
				c->dma_wait = false;
				c->busy += op->done - op->issue + e->cfg.issue_cycles;
				c->clock = max64(c->clock, op->done + e->cfg.issue_cycles);
				c->blocked = false;
				c->pc++;
				c->insns++;
			}
		}
	}
	return STEP_NEXT;
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
	mem_advance(e, c->clock);
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

/* Move the data of a completed LOAD/STORE. */
static int dma_copy(struct spyre_engine *e, uint32_t id, const struct dma_op *op)
{
	uint8_t *sp = spyre_engine_scratchpad(e, id);

	for (uint32_t r = 0; r < op->rows; r++) {
		uint64_t a = op->va + (uint64_t)r * op->mem_stride, fva = a;
		uint8_t *s = sp + op->spo + (uint64_t)r * op->sp_stride;
		int rc = op->store ? e->ops->write(e->opaque, a, s, op->len, &fva) :
				     e->ops->read(e->opaque, a, s, op->len, &fva);

		if (rc) {
			e->res->fault_detail = rc;
			return fault(e, SPYRE_ENGINE_FAULT_MEM, id, op->pc, fva);
		}
	}
	return STEP_NEXT;
}

/* ---- tensor ops ----------------------------------------------------------- */

#define ROW(base, off, r, ld) ((base) + (off) + (uint64_t)(r) * (ld) * SPYRE_STICK_BYTES)

static int exec_matmul(struct spyre_engine *e, struct core *c, uint32_t id,
		       const struct spyre_insn_tensor *t)
{
	uint8_t *sp = spyre_engine_scratchpad(e, id);
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

		if (!workspace(&e->pack, &e->pack_len, SPYRE_SGEMM_PACK_FLOATS(n)))
			return fault(e, SPYRE_ENGINE_FAULT_SP_RANGE, id, c->pc, t->d); /* host OOM: cannot model */
		if (dt != SPYRE_DT_FP32) {
			float *wa = workspace(&e->ws[0], &e->ws_len[0], m * k);
			float *wb = workspace(&e->ws[1], &e->ws_len[1], k * n);

			if (!wa || !wb)
				return fault(e, SPYRE_ENGINE_FAULT_SP_RANGE, id, c->pc, t->d);
			for (size_t i = 0; i < m; i++)
				for (size_t p = 0; p < k; p++)
					wa[i * k + p] = spyre_load_f32(ROW(sp, t->a, i, t->lda), dt, p);
			for (size_t p = 0; p < k; p++)
				for (size_t j = 0; j < n; j++)
					wb[p * n + j] = spyre_load_f32(ROW(sp, t->b, p, t->ldb), dt, j);
			a = wa;
			b = wb;
			lda = k;
			ldb = n;
		}
		if (dt2 != SPYRE_DT_FP32) {
			float *wc = workspace(&e->ws[2], &e->ws_len[2], m * n);

			if (!wc)
				return fault(e, SPYRE_ENGINE_FAULT_SP_RANGE, id, c->pc, t->d);
			if (acc)
				for (size_t i = 0; i < m; i++)
					for (size_t j = 0; j < n; j++)
						wc[i * n + j] = spyre_load_f32(ROW(sp, t->d, i, t->ldd), dt2, j);
			cc = wc;
			ldcc = n;
		}
		spyre_sgemm(m, n, k, a, lda, b, ldb, cc, ldcc, acc, e->pack);
		if (dt2 != SPYRE_DT_FP32)
			for (size_t i = 0; i < m; i++)
				for (size_t j = 0; j < n; j++)
					spyre_store_f32(ROW(sp, t->d, i, t->ldd), dt2, j, cc[i * n + j]);
	}

	charge_insn(e, c, t);
	return STEP_NEXT;
}

static float gelu(float x)
{
	return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

static float unary_f(uint32_t op, float x, float s, float b)
{
	switch (op) {
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
	default:
		return x > y ? x : y;
	}
}

static void exec_elementwise(struct spyre_engine *e, struct core *c, uint32_t id,
			     const struct spyre_insn_tensor *t, enum spyre_opclass cls)
{
	uint8_t *sp = spyre_engine_scratchpad(e, id);
	unsigned dt = t->dtype, dt2 = t->dtype2;
	bool isint = !SPYRE_DT_IS_FLOAT(dt);
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
				spyre_store_int(dr, dt2, j, binary_i(t->opcode, spyre_load_int(ar, dt, j),
								     spyre_load_int(br, dt, bj)));
			} else if (cls == SPYRE_CLS_BINARY) {
				spyre_store_f32(dr, dt2, j, binary_f(t->opcode, spyre_load_f32(ar, dt, j),
								     spyre_load_f32(br, dt, bj)));
			} else if (isint && (t->opcode == SPYRE_ISA_OP_RELU || !SPYRE_DT_IS_FLOAT(dt2))) {
				int64_t x = spyre_load_int(ar, dt, j);

				spyre_store_int(dr, dt2, j, t->opcode == SPYRE_ISA_OP_RELU && x < 0 ? 0 : x);
			} else {
				spyre_store_f32(dr, dt2, j, unary_f(t->opcode, spyre_load_f32(ar, dt, j), s, bias));
			}
		}
	}
	charge_insn(e, c, t);
}

static void exec_fill(struct spyre_engine *e, struct core *c, uint32_t id, const struct spyre_insn_tensor *t)
{
	uint8_t *sp = spyre_engine_scratchpad(e, id);
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
	charge_insn(e, c, t);
}

static void exec_reduce(struct spyre_engine *e, struct core *c, uint32_t id, const struct spyre_insn_tensor *t)
{
	uint8_t *sp = spyre_engine_scratchpad(e, id);
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
	charge_insn(e, c, t);
}

static void exec_argmax(struct spyre_engine *e, struct core *c, uint32_t id, const struct spyre_insn_tensor *t)
{
	uint8_t *sp = spyre_engine_scratchpad(e, id);
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
	charge_insn(e, c, t);
}

static void exec_softmax(struct spyre_engine *e, struct core *c, uint32_t id, const struct spyre_insn_tensor *t)
{
	uint8_t *sp = spyre_engine_scratchpad(e, id);
	unsigned dt = t->dtype, dt2 = t->dtype2;

	for (uint32_t r = 0; r < t->rows; r++) {
		const uint8_t *ar = ROW(sp, t->a, r, t->lda);
		uint8_t *dr = ROW(sp, t->d, r, t->ldd);
		float mx = -INFINITY, sum = 0.0f;

		for (uint32_t j = 0; j < t->cols; j++)
			mx = binary_f(SPYRE_ISA_OP_MAX, mx, spyre_load_f32(ar, dt, j));
		/* two passes over a: d may alias a, so exponentials are recomputed */
		for (uint32_t j = 0; j < t->cols; j++)
			sum += expf(spyre_load_f32(ar, dt, j) - mx);
		float inv = 1.0f / sum;
		float ex[64];

		for (uint32_t j0 = 0; j0 < t->cols; j0 += 64) {
			uint32_t w = t->cols - j0 < 64 ? t->cols - j0 : 64;

			for (uint32_t j = 0; j < w; j++)
				ex[j] = expf(spyre_load_f32(ar, dt, j0 + j) - mx) * inv;
			for (uint32_t j = 0; j < w; j++)
				spyre_store_f32(dr, dt2, j0 + j, ex[j]);
		}
	}
	charge_insn(e, c, t);
}

static void exec_transpose(struct spyre_engine *e, struct core *c, uint32_t id,
			   const struct spyre_insn_tensor *t)
{
	uint8_t *sp = spyre_engine_scratchpad(e, id);
	uint32_t esz = SPYRE_DT_SIZE(t->dtype);

	for (uint32_t r = 0; r < t->rows; r++)
		for (uint32_t j = 0; j < t->cols; j++)
			memmove(ROW(sp, t->d, j, t->ldd) + (uint64_t)r * esz, ROW(sp, t->a, r, t->lda) + (uint64_t)j * esz,
				esz);
	charge_insn(e, c, t);
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
		return t->d + spyre_tile_extent(t->cols, t->rows, e2, t->ldd);
	default:
		return t->d + spyre_tile_extent(t->rows, t->cols, e2, t->ldd);
	}
}

/* ---- ring and synchronisation ----------------------------------------------- */

static bool launched(const struct spyre_engine *e, uint32_t core)
{
	return core < e->cfg.cores && (e->mask >> core & 1);
}

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
	memcpy(m->data, spyre_engine_scratchpad(e, id) + r->sp, r->bytes);
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
	c->head[r->peer] = m->next;
	if (!m->next)
		c->tail[r->peer] = NULL;
	c->inbox_bytes -= m->bytes;
	memcpy(spyre_engine_scratchpad(e, id) + r->sp, m->data, m->bytes);
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

/* ---- the core loop ------------------------------------------------------------ */

static int step(struct spyre_engine *e, uint32_t id)
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
		case SPYRE_ISA_OP_BNZ:
			if (c->r[in.ctl.reg]) {
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
		rc = exec_matmul(e, c, id, &in.t);
		break;
	case SPYRE_CLS_BINARY:
	case SPYRE_CLS_UNARY:
	case SPYRE_CLS_SCALE:
	case SPYRE_CLS_CAST:
		exec_elementwise(e, c, id, &in.t, cls);
		break;
	case SPYRE_CLS_FILL:
		exec_fill(e, c, id, &in.t);
		break;
	case SPYRE_CLS_REDUCE:
		exec_reduce(e, c, id, &in.t);
		break;
	case SPYRE_CLS_SOFTMAX:
		exec_softmax(e, c, id, &in.t);
		break;
	case SPYRE_CLS_TRANSPOSE:
		exec_transpose(e, c, id, &in.t);
		break;
	case SPYRE_CLS_ARGMAX:
		exec_argmax(e, c, id, &in.t);
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
		if (cls >= SPYRE_CLS_MATMUL && cls <= SPYRE_CLS_ARGMAX)
			c->sp_dirty = max64(c->sp_dirty, tensor_dirty(&in.t, cls));
		c->insns++;
		c->pc++;
	}
	return rc;
}

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
		int rc = step(e, id);

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

	/* reset the launched cores; scratchpads start zeroed (no data crosses launches) */
	for (uint32_t i = 0; i < e->cfg.cores; i++) {
		struct core *c = &e->core[i];
		uint64_t dirty = c->sp_dirty;

		memset(c, 0, sizeof(*c));
		if (dirty)
			memset(spyre_engine_scratchpad(e, i), 0, dirty);
		if (launched(e, i) && i < e->prog.hdr.num_cores && e->prog.cores[i].num_insns) {
			c->code = e->image + e->prog.cores[i].code_off;
			c->num_insns = e->prog.cores[i].num_insns;
			c->running = true;
			res->cores_run++;
		}
	}

	e->mem_now = 0;
	memset(e->link_free, 0, sizeof(e->link_free));
	for (;;) {
		uint64_t tev = mem_next(e), first = NEVER, second = NEVER;
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
			mem_advance(e, tev);
			if (mem_events(e, tev) == STEP_FAULT)
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
