// SPDX-License-Identifier: MIT
/*
 * The engine's memory system (docs/spyre-isa.md §6): each core has a DMA
 * queue served in order; the transfers at the heads of all queues share
 * LPDDR bandwidth equally at every moment (processor sharing); a transfer
 * occupies LPDDR for its bytes plus a per-burst overhead and completes a
 * fixed latency after its data phase; its data moves when it completes.
 * spyre_exec.c queues the transfers (LOAD/STORE); the scheduler in
 * spyre_engine.c asks for the next memory event and has it processed here.
 * Calls nothing else of the engine's (spyre_engine_int.h).
 */
#include <string.h>

#include "spyre_engine_int.h"

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
void spyre_lpddr_advance(struct spyre_engine *e, uint64_t t)
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
uint64_t spyre_lpddr_next(const struct spyre_engine *e)
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

/* ---- scratchpad zeroing ------------------------------------------------------ */

/* Zero stick s of core id if the previous launch may have left it non-zero. */
static void settle_stick(struct spyre_engine *e, uint32_t id, uint64_t s)
{
	uint64_t *bm = e->fresh + (size_t)id * e->fresh_words;

	if (s * SPYRE_STICK_BYTES >= e->core[id].stale_end || (bm[s / 64] >> (s % 64) & 1))
		return;
	memset(core_sp(e, id) + s * SPYRE_STICK_BYTES, 0, SPYRE_STICK_BYTES);
	bm[s / 64] |= 1ull << (s % 64);
}

void spyre_sp_write_begin(struct spyre_engine *e, uint32_t id, uint64_t lo, uint64_t hi)
{
	if (lo >= e->core[id].stale_end || lo >= hi)
		return;
	if (lo % SPYRE_STICK_BYTES)
		settle_stick(e, id, lo / SPYRE_STICK_BYTES);
	if (hi % SPYRE_STICK_BYTES)
		settle_stick(e, id, hi / SPYRE_STICK_BYTES);
}

void spyre_sp_write_end(struct spyre_engine *e, uint32_t id, uint64_t lo, uint64_t hi, bool written)
{
	uint64_t *bm = e->fresh + (size_t)id * e->fresh_words;
	uint64_t s1 = min64(hi / SPYRE_STICK_BYTES, e->core[id].stale_end / SPYRE_STICK_BYTES);

	for (uint64_t s = div_up(lo, SPYRE_STICK_BYTES); s < s1; s++) {
		if (!written) {
			settle_stick(e, id, s);
		} else if (s % 64 == 0 && s + 64 <= s1) {
			bm[s / 64] = ~0ull;
			s += 63;
		} else {
			bm[s / 64] |= 1ull << (s % 64);
		}
	}
}

void spyre_sp_settle(struct spyre_engine *e, uint32_t id)
{
	struct core *c = &e->core[id];
	uint64_t *bm = e->fresh + (size_t)id * e->fresh_words;
	uint64_t end = c->stale_end / SPYRE_STICK_BYTES;
	uint8_t *sp = core_sp(e, id);

	if (!end)
		return;
	for (uint64_t w = 0; w * 64 < end; w++) {
		uint64_t n = min64(64, end - w * 64);

		if (!bm[w]) {	/* runs of stale sticks at once */
			memset(sp + w * 64 * SPYRE_STICK_BYTES, 0, n * SPYRE_STICK_BYTES);
			continue;
		}
		for (uint64_t b = 0; b < n; b++)
			if (!(bm[w] >> b & 1))
				memset(sp + (w * 64 + b) * SPYRE_STICK_BYTES, 0, SPYRE_STICK_BYTES);
	}
	c->stale_end = 0;
}

/* ---- data movement ----------------------------------------------------------- */

/* Move the bytes of LOAD/STORE op of core id (its queued tensor ops done). */
static int dma_move(struct spyre_engine *e, uint32_t id, const struct dma_op *op)
{
	uint8_t *sp = core_sp(e, id);

	if (op->store)
		spyre_sp_settle(e, id);
	for (uint32_t r = 0; r < op->rows; r++) {
		uint64_t a = op->va + (uint64_t)r * op->mem_stride, fva = a;
		uint8_t *s = sp + op->spo + (uint64_t)r * op->sp_stride;
		uint64_t lo = (uint64_t)(s - sp), hi = lo + op->len;

		if (!op->store)
			spyre_sp_write_begin(e, id, lo, hi);
		int rc = op->store ? e->ops->write(e->opaque, a, s, op->len, &fva) :
				     e->ops->read(e->opaque, a, s, op->len, &fva);

		if (!op->store)	/* a failed read is taken to have written nothing */
			spyre_sp_write_end(e, id, lo, hi, !rc);
		if (rc) {
			e->res->fault_detail = rc;
			return fault(e, SPYRE_ENGINE_FAULT_MEM, id, op->pc, fva);
		}
	}
	return STEP_NEXT;
}

int spyre_lazy_flush(struct spyre_engine *e, uint32_t id)
{
	struct core *c = &e->core[id];

	if (!c->nlazy)
		return STEP_NEXT;
	if (spyre_defer_sync(e, id) == STEP_FAULT)	/* the tensor ops before them */
		return STEP_FAULT;
	for (uint32_t i = 0; i < c->nlazy; i++) {
		struct dma_op *op = &c->lazy[i];
		uint8_t *sp = core_sp(e, id);

		/* checked by probe, stale sticks settled and marked when it completed */
		for (uint32_t r = 0; r < op->rows; r++) {
			uint64_t a = op->va + (uint64_t)r * op->mem_stride, fva = a;
			int rc = e->ops->read(e->opaque, a, sp + op->spo + (uint64_t)r * op->sp_stride, op->len, &fva);

			if (rc) {	/* probe said it would not: memory changed under the launch */
				c->nlazy = 0;
				e->res->fault_detail = rc;
				return fault(e, SPYRE_ENGINE_FAULT_MEM, id, op->pc, fva);
			}
		}
	}
	c->nlazy = 0;
	return STEP_NEXT;
}

int spyre_lazy_flush_all(struct spyre_engine *e)
{
	for (uint32_t i = 0; i < e->cfg.cores; i++)
		if (spyre_lazy_flush(e, i) == STEP_FAULT)
			return STEP_FAULT;
	return STEP_NEXT;
}

/*
 * The data of a completed LOAD/STORE. A STORE first lets every waiting LOAD
 * read (one may read what it overwrites). A LOAD whose rows all pass the
 * probe waits for its core's next touch (its stale sticks settled now, as
 * the read would); otherwise it moves now, faulting where the read does.
 */
static int dma_copy(struct spyre_engine *e, uint32_t id, const struct dma_op *op)
{
	struct core *c = &e->core[id];

	if (op->store) {
		if (spyre_lazy_flush_all(e) == STEP_FAULT || spyre_defer_sync(e, id) == STEP_FAULT)
			return STEP_FAULT;
		return dma_move(e, id, op);
	}
	if (e->ops->probe) {
		bool ok = true;

		for (uint32_t r = 0; r < op->rows && ok; r++) {
			uint64_t fva;

			ok = !e->ops->probe(e->opaque, op->va + (uint64_t)r * op->mem_stride, op->len, &fva);
		}
		if (ok) {
			if (c->nlazy == SPYRE_LAZY_DEPTH && spyre_lazy_flush(e, id) == STEP_FAULT)
				return STEP_FAULT;
			for (uint32_t r = 0; r < op->rows; r++) {
				uint64_t lo = op->spo + (uint64_t)r * op->sp_stride;

				spyre_sp_write_begin(e, id, lo, lo + op->len);
				spyre_sp_write_end(e, id, lo, lo + op->len, true);
			}
			c->lazy[c->nlazy++] = *op;
			return STEP_NEXT;
		}
	}
	if (spyre_lazy_flush(e, id) == STEP_FAULT || spyre_defer_sync(e, id) == STEP_FAULT)
		return STEP_FAULT;
	return dma_move(e, id, op);
}

/*
 * Process the memory events at cycle now (== spyre_lpddr_next(),
 * spyre_lpddr_advance()d to it): data phases that ended start their latency
 * and let the next transfer of their queue in; DMAs that complete move their
 * data, then add to the DMA token (asynchronous) or let their core go on
 * (synchronous).
 */
int spyre_lpddr_events(struct spyre_engine *e, uint64_t now)
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
