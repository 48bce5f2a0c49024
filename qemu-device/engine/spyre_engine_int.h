/* SPDX-License-Identifier: MIT */
/*
 * spyre_engine_int.h - the engine's internal state, shared by its three
 * files (internal; the public interface is spyre_engine.h):
 *
 *   spyre_engine.c  the interface, a launch (program and argument fetch, the
 *                   cores' set-up, the result) and the scheduler: the
 *                   discrete-event loop that picks the next core or memory
 *                   event;
 *   spyre_exec.c    one instruction of one core: decode, check, execute
 *                   (control, DMA issue, tensor ops, ring, synchronisation);
 *   spyre_lpddr.c   the memory system: LPDDR shared by the DMA queues' heads,
 *                   and the data of each LOAD/STORE moved when it completes
 *                   (a LOAD's, with mem_ops.probe, at its core's next touch,
 *                   or never if only MATMULs read it: from a shared copy);
 *   spyre_defer.c   the host threads (cfg.threads > 1) that run the cores'
 *                   tensor numerics off the scheduler's thread: a queue per
 *                   core, drained before anything else touches its scratchpad.
 *
 * Calls go one way: spyre_engine.c -> spyre_exec.c -> spyre_lpddr.c (and
 * spyre_engine.c -> spyre_lpddr.c); all three call spyre_defer.c, which calls
 * back only spyre_exec_tensor(). The small helpers below serve them all.
 * The numerics of MATMUL are spyre_gemm.c's.
 */
#ifndef SPYRE_ENGINE_INT_H
#define SPYRE_ENGINE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spyre_engine.h"
#include "spyre_isa_codec.h"
#include "spyre_timing.h"

struct msg {
	struct msg *next;
	uint32_t tag, bytes;
	uint64_t arrival;	/* modeled cycle the last byte lands */
	uint8_t data[];
};

/*
 * A copy of the rows of device memory a LOAD reads (spyre_lpddr.c, with
 * mem_ops.probe only): a MATMUL reads its operand from it instead of the
 * scratchpad, and every LOAD of the same rows in the launch shares it, so a
 * block of B that eight cores load crosses host memory once. valid: no STORE
 * of the launch wrote its rows since it was read (a LOAD may then share it).
 * A launch's copies live until the next launch starts.
 */
struct spyre_blob {
	struct spyre_blob *next;
	uint64_t va, len, mem_stride;
	uint32_t rows;
	bool valid;
	uint8_t *data;		/* rows x len bytes, 64-byte aligned; NULL: in whole only, until asked for */
	uint64_t cap;		/* data's bytes */
	struct spyre_packed *packed;	/* B operands in it, packed for the GEMM (spyre_exec.c) */
	struct spyre_packed *whole;	/* its rows whole as one packed B (spyre_lazy_packed_b()), or NULL */
};

/* An fp32 B operand of a MATMUL in a blob, at byte boff, ld floats apart, packed once for every core. */
struct spyre_packed {
	struct spyre_packed *next;
	uint64_t boff, ld, n, k;
	float *p;		/* SPYRE_SGEMM_PACKED_FLOATS(n, k) */
	uint64_t cap;
};

/* Buffers of the last launches' blobs kept for the next (spyre_lpddr.c). */
#define SPYRE_BLOB_POOL 64

/* A LOAD or STORE in a core's DMA queue, addresses resolved at issue. */
struct dma_op {
	uint64_t va;		/* first row in device memory */
	uint64_t len;		/* bytes per access (rows coalesced when contiguous) */
	uint64_t left;		/* LPDDR service still owed, bytes x clock_mhz */
	uint64_t issue;		/* cycle it was issued */
	uint64_t done;		/* cycle it completes (set when its data phase ends) */
	uint32_t spo, rows, mem_stride, sp_stride, pc;
	bool store, async;
	struct spyre_blob *blob;	/* a waiting LOAD's bytes, once read (NULL: still in memory) */
};

/* MATMUL's fp32 operands from a waiting LOAD's copy instead of the scratchpad (NULL: the scratchpad). */
struct spyre_src {
	const float *a, *b;
	size_t lda, ldb;	/* elements */
	const float *bpacked;	/* b as spyre_sgemm_pack_b() packs it, or NULL */
};

/* A host thread's matmul workspaces: converted A, B, C, then the packing buffer (floats). */
struct spyre_ws {
	float *buf[4];
	size_t len[4];
};

/* A tensor instruction of a core whose numerics wait for a host thread (spyre_defer.c). */
struct deferred {
	struct spyre_insn_tensor t;
	struct spyre_src src;
	uint64_t rdiag;		/* TRIL's run-time diagonal: r[ldb] at issue */
	uint32_t cls, pc;
};

#define SPYRE_DEFER_DEPTH 32	/* per core; a full queue is drained before the next */
#define SPYRE_DEFER_MIN_WORK 4096	/* elements (MATMUL: MACs) below which an op runs in place */
#define SPYRE_LAZY_DEPTH 8	/* per core: completed LOADs whose bytes wait for its next touch */

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
	/*
	 * [0, stale_end): what the previous launch may have left in the
	 * scratchpad, which reads as zero; a stick there is zeroed when first
	 * touched unless a LOAD or RECV wrote it whole first (its bit in
	 * spyre_engine.fresh). 0 once the core's first other access settled it.
	 */
	uint64_t stale_end;
	/*
	 * completed LOADs, bytes checked but not yet in the scratchpad
	 * (mem_ops.probe), their scratchpad extents disjoint; after a launch,
	 * those a MATMUL read from their copy, written when the scratchpad is
	 * asked for (spyre_engine_scratchpad())
	 */
	struct dma_op lazy[SPYRE_LAZY_DEPTH];
	uint32_t nlazy;
	/* deferred tensor ops [df_head, df_tail), under spyre_engine.dlock; df_claimed: a thread runs some */
	uint32_t df_head, df_tail;
	bool df_claimed;
};

struct spyre_worker;

struct spyre_engine {
	struct spyre_engine_config cfg;
	struct spyre_timing tm;		/* cfg's timing properties, for spyre_insn_cycles() */
	uint8_t *sp;			/* cores * scratchpad_bytes */
	struct core core[SPYRE_MAX_CORES];
	struct spyre_ws ws0;		/* the launching thread's workspaces */
	/* host threads beyond the launching one (spyre_defer.c); none with cfg.threads == 1 */
	uint32_t nworkers;
	struct spyre_worker *workers;
	void *dsync;			/* its lock and condition variables */
	uint32_t dpending;		/* cores with queued ops that no thread has taken */
	bool dstop;
	uint32_t dfault, dfault_core, dfault_pc;	/* the first deferred op that failed */
	uint64_t dfault_addr;
	struct deferred dfq[SPYRE_MAX_CORES][SPYRE_DEFER_DEPTH];
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
	uint64_t *fresh;		/* per core, a bit per stick of [0, stale_end): written whole */
	uint32_t fresh_words;		/* per core */
	uint64_t mem_now;		/* cycle up to which LPDDR service is accounted */
	struct spyre_blob *blobs;	/* the launch's copies of LOADed rows (spyre_lpddr.c) */
	uint64_t blob_bytes;		/* their data and packed operands */
	struct {
		void *p;
		uint64_t cap;
	} pool[SPYRE_BLOB_POOL];	/* freed buffers, for the next launch */
	uint32_t npool;
	/* fp32 of every 16-bit pattern of FP16, BF16, DL16 (MATMUL's operands), made at first use */
	float *cvt16[SPYRE_DT_COUNT];
	uint64_t link_free[2][SPYRE_MAX_CORES];	/* ring link [direction][from core] free from this cycle */
};

#define DQ(c, i) (&(c)->dq[(i) % SPYRE_DMA_QUEUE_DEPTH])
#define NEVER UINT64_MAX

enum step { STEP_NEXT, STEP_BLOCK, STEP_HALT, STEP_FAULT };

/* ---- helpers ------------------------------------------------------------ */

static inline uint64_t div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static inline uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static inline uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Record the launch's first fault (later ones are dropped); STEP_FAULT. */
static inline int fault(struct spyre_engine *e, uint32_t cause, uint32_t core, uint32_t pc, uint64_t addr)
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

/* Core @core's scratchpad; NULL if core is out of range. */
static inline uint8_t *core_sp(struct spyre_engine *e, uint32_t core)
{
	if (!e || core >= e->cfg.cores)
		return NULL;
	return e->sp + (size_t)core * e->cfg.scratchpad_bytes;
}

static inline bool launched(const struct spyre_engine *e, uint32_t core)
{
	return core < e->cfg.cores && (e->mask >> core & 1);
}

/*
 * Something a blocked core may wait for happened at cycle now: it retries its
 * instruction (and may block again). A core in its own synchronous DMA goes
 * on only when that completes (spyre_lpddr_events()).
 */
static inline void wake(struct core *c, uint64_t now)
{
	if (c->blocked && !c->dma_wait) {
		c->blocked = false;
		c->clock = max64(c->clock, now);
	}
}

/*
 * spyre_lpddr.c: scratchpad zeroing, deferred from the launch's start to a
 * stick's first touch. A LOAD's row or a RECV writing [lo, hi) of core id
 * calls write_begin before (stale sticks it covers in part are zeroed) and
 * write_end after (the sticks it covered whole need no zeroing, or, if
 * nothing was written, are zeroed). settle: every stale stick of core id is
 * zeroed (before any other read or write of its scratchpad).
 */
void spyre_sp_write_begin(struct spyre_engine *e, uint32_t id, uint64_t lo, uint64_t hi);
void spyre_sp_write_end(struct spyre_engine *e, uint32_t id, uint64_t lo, uint64_t hi, bool written);
void spyre_sp_settle(struct spyre_engine *e, uint32_t id);

/*
 * spyre_lpddr.c: write the bytes of core id's completed LOADs that wait for
 * its next touch into its scratchpad (after its queued tensor ops); _range:
 * those whose scratchpad extent meets [lo, hi). Call before any read or
 * write of the scratchpad (of that range). STEP_NEXT or STEP_FAULT.
 */
int spyre_lazy_flush(struct spyre_engine *e, uint32_t id);
int spyre_lazy_flush_range(struct spyre_engine *e, uint32_t id, uint64_t lo, uint64_t hi);
/*
 * spyre_lpddr.c: an operand of rows x row_bytes at scratchpad offset off of
 * core id, rows ld bytes apart, that one waiting LOAD of core id holds whole:
 * its bytes in that LOAD's copy (read now if not yet, or shared with another
 * LOAD of the same rows), *ld_out bytes apart; NULL if none holds it (or the
 * copy cannot be made: the caller then flushes as usual). The LOAD stays
 * waiting: its scratchpad is written when something else touches it.
 */
const void *spyre_lazy_operand(struct spyre_engine *e, uint32_t id, uint64_t off, uint64_t ld, uint64_t rows,
			       uint64_t row_bytes, uint64_t *ld_out, struct spyre_blob **blob);
/*
 * spyre_lpddr.c: an fp32 B operand (k rows of n floats at scratchpad offset
 * off of core id, ld bytes apart) that is one waiting LOAD's rows whole,
 * packed for the GEMM (spyre_sgemm_pack_b()'s layout): a copy made of the
 * rows read from memory one at a time straight into their packed places
 * (never copied row by row first), shared with every LOAD of the same rows;
 * its row-major bytes are unpacked from it only if something asks for them.
 * NULL if no such LOAD waits, if its rows were copied already (the caller
 * then packs that copy) or if the copy cannot be made.
 */
const float *spyre_lazy_packed_b(struct spyre_engine *e, uint32_t id, uint64_t off, uint64_t ld, uint64_t k,
				 uint64_t n);
/*
 * spyre_lpddr.c: a 64-byte aligned buffer of at least size bytes for a blob or
 * its packed operands (*cap: its size), counted against the launch's limit
 * on copies; NULL beyond it or if memory is short. blobs_free returns it.
 */
void *spyre_blob_alloc(struct spyre_engine *e, uint64_t size, uint64_t *cap);
/*
 * spyre_lpddr.c: at a launch's end, write the waiting LOADs that have no copy
 * (memory may change after the launch); _post: write the rest of core id's
 * (when its scratchpad is asked for); blobs_free: drop every copy (a new
 * launch: their buffers kept for it if keep; the engine freed; no LOAD may
 * wait).
 */
int spyre_lazy_end(struct spyre_engine *e, uint32_t id);
void spyre_lazy_post(struct spyre_engine *e, uint32_t id);
void spyre_blobs_free(struct spyre_engine *e, bool keep);

/* spyre_exec.c: execute core id's next instruction (STEP_*). */
int spyre_exec_step(struct spyre_engine *e, uint32_t id);
/*
 * spyre_exec.c: the numerics of tensor instruction t of core id (class cls,
 * TRIL's run-time diagonal rdiag) with workspaces w, on any host thread: 0, or
 * the fault cause if host memory is short. Touches core id's scratchpad only.
 */
uint32_t spyre_exec_tensor(struct spyre_engine *e, struct spyre_ws *w, uint32_t id,
			   const struct spyre_insn_tensor *t, enum spyre_opclass cls, uint64_t rdiag,
			   const struct spyre_src *src);

/*
 * spyre_defer.c: start cfg.threads - 1 host threads (0, or -1 if none could
 * start: the engine then runs with one); stop and free them. push queues a
 * tensor op of core id (STEP_NEXT or STEP_FAULT); sync returns when all of
 * core id's queued ops have run (the caller may then touch its scratchpad);
 * sync_all does so for every core. Both return STEP_FAULT if a queued op
 * failed (recorded as the launch's fault). Without threads they do nothing.
 */
int spyre_defer_init(struct spyre_engine *e);
void spyre_defer_fini(struct spyre_engine *e);
void spyre_ws_free(struct spyre_ws *w);
int spyre_defer_push(struct spyre_engine *e, uint32_t id, const struct spyre_insn_tensor *t,
		     enum spyre_opclass cls, uint64_t rdiag, const struct spyre_src *src, uint32_t pc);
int spyre_defer_sync(struct spyre_engine *e, uint32_t id);
int spyre_defer_sync_all(struct spyre_engine *e);
/* spyre_defer.c: nothing of core id's is queued or running (true without threads). */
bool spyre_defer_idle(struct spyre_engine *e, uint32_t id);

/*
 * spyre_lpddr.c: account LPDDR service up to cycle t; the next memory event
 * (NEVER if none); process the events at cycle now (STEP_NEXT or STEP_FAULT).
 */
void spyre_lpddr_advance(struct spyre_engine *e, uint64_t t);
uint64_t spyre_lpddr_next(const struct spyre_engine *e);
int spyre_lpddr_events(struct spyre_engine *e, uint64_t now);

#endif /* SPYRE_ENGINE_INT_H */
