// SPDX-License-Identifier: MIT
/*
 * The engine's memory system (docs/spyre-isa.md §6): each core has a DMA
 * queue served in order; the transfers at the heads of all queues share
 * LPDDR bandwidth equally at every moment (processor sharing); a transfer
 * occupies LPDDR for its bytes plus a per-burst overhead and completes a
 * fixed latency after its data phase; its data moves when it completes.
 * spyre_exec.c queues the transfers (LOAD/STORE); the scheduler in
 * spyre_engine.c asks for the next memory event and has it processed here.
 * Calls nothing else of the engine's (spyre_engine_int.h) but B's packing
 * (spyre_gemm.h).
 */
#include <stdlib.h>
#include <string.h>

#include "spyre_engine_int.h"
#include "spyre_gemm.h"

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

	uint64_t s = div_up(lo, SPYRE_STICK_BYTES);

	if (!written) {
		for (; s < s1; s++)
			settle_stick(e, id, s);
		return;
	}
	while (s < s1) {	/* the bits of [s, s1), a word at a time */
		uint64_t n = min64(64 - s % 64, s1 - s);

		bm[s / 64] |= (n == 64 ? ~0ull : ((1ull << n) - 1)) << (s % 64);
		s += n;
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

/* ---- completed LOADs waiting for their core's next touch ------------------- */

/* Copies of LOADed rows a launch may keep (beyond: the LOAD is written as before). */
#define SPYRE_BLOB_MAX_BYTES (256ull << 20)

static uint64_t sp_end(const struct dma_op *op)
{
	return op->spo + (uint64_t)(op->rows - 1) * op->sp_stride + op->len;
}

static uint64_t mem_end(const struct dma_op *op)
{
	return op->va + (uint64_t)(op->rows - 1) * op->mem_stride + op->len;
}

/* Write waiting LOAD op of core id into its scratchpad: from its copy, or read now. */
static int lazy_move(struct spyre_engine *e, uint32_t id, const struct dma_op *op)
{
	uint8_t *sp = core_sp(e, id) + op->spo;

	for (uint32_t r = 0; r < op->rows; r++) {
		uint64_t a = op->va + (uint64_t)r * op->mem_stride, fva = a;
		int rc;

		if (op->blob && op->blob->data) {
			memcpy(sp + (uint64_t)r * op->sp_stride, op->blob->data + (uint64_t)r * op->len, op->len);
			continue;
		}
		if (op->blob) {		/* its copy is packed only */
			spyre_sgemm_unpack_b_row(op->blob->whole->n, op->blob->whole->k, r, op->blob->whole->p,
						 sp + (uint64_t)r * op->sp_stride);
			continue;
		}
		rc = e->ops->read(e->opaque, a, sp + (uint64_t)r * op->sp_stride, op->len, &fva);
		if (rc) {	/* probe said it would not: memory changed under the launch */
			e->res->fault_detail = rc;
			return fault(e, SPYRE_ENGINE_FAULT_MEM, id, op->pc, fva);
		}
	}
	return STEP_NEXT;
}

/*
 * Write core id's waiting LOADs that meet scratchpad [lo, hi), or whose rows
 * meet memory [mlo, mhi) and have no copy (a STORE is about to write there),
 * in order (their extents are disjoint: any order gives the same bytes).
 */
static int lazy_flush_sel(struct spyre_engine *e, uint32_t id, uint64_t lo, uint64_t hi, uint64_t mlo,
			  uint64_t mhi)
{
	struct core *c = &e->core[id];
	bool synced = false;

	for (uint32_t i = 0; i < c->nlazy;) {
		struct dma_op *op = &c->lazy[i];
		bool sp_hit = op->spo < hi && sp_end(op) > lo;
		bool mem_hit = !op->blob && op->va < mhi && mem_end(op) > mlo;
		int rc;

		if (!sp_hit && !mem_hit) {
			i++;
			continue;
		}
		/* the tensor ops before them */
		if (!synced && spyre_defer_sync(e, id) == STEP_FAULT)
			return STEP_FAULT;
		synced = true;
		rc = lazy_move(e, id, op);
		memmove(op, op + 1, (c->nlazy - i - 1) * sizeof(*op));
		c->nlazy--;
		if (rc == STEP_FAULT) {
			c->nlazy = 0;
			return STEP_FAULT;
		}
	}
	return STEP_NEXT;
}

int spyre_lazy_flush_range(struct spyre_engine *e, uint32_t id, uint64_t lo, uint64_t hi)
{
	return lazy_flush_sel(e, id, lo, hi, 0, 0);
}

int spyre_lazy_flush(struct spyre_engine *e, uint32_t id)
{
	return lazy_flush_sel(e, id, 0, UINT64_MAX, 0, 0);
}

int spyre_lazy_end(struct spyre_engine *e, uint32_t id)
{
	return lazy_flush_sel(e, id, 0, 0, 0, UINT64_MAX);
}

void spyre_lazy_post(struct spyre_engine *e, uint32_t id)
{
	struct core *c = &e->core[id];

	for (uint32_t i = 0; i < c->nlazy; i++)
		lazy_move(e, id, &c->lazy[i]);	/* each has its copy: nothing read, no fault */
	c->nlazy = 0;
}

/* Keep buffer p of cap bytes for the next launch (at most SPYRE_BLOB_POOL_BYTES of them), else free it. */
#define SPYRE_BLOB_POOL_BYTES (64ull << 20)

static void pool_put(struct spyre_engine *e, void *p, uint64_t cap, bool keep, uint64_t *kept)
{
	if (keep && e->npool < SPYRE_BLOB_POOL && cap <= SPYRE_BLOB_POOL_BYTES - *kept) {
		e->pool[e->npool].p = p;
		e->pool[e->npool++].cap = cap;
		*kept += cap;
	} else {
		free(p);
	}
}

void spyre_blobs_free(struct spyre_engine *e, bool keep)
{
	uint64_t kept = 0;

	for (uint32_t i = 0; i < e->npool; i++)
		kept += e->pool[i].cap;
	while (e->blobs) {
		struct spyre_blob *b = e->blobs;

		e->blobs = b->next;
		while (b->packed) {
			struct spyre_packed *pk = b->packed;

			b->packed = pk->next;
			pool_put(e, pk->p, pk->cap, keep, &kept);
			free(pk);
		}
		if (b->data)
			pool_put(e, b->data, b->cap, keep, &kept);
		free(b);
	}
	e->blob_bytes = 0;
	if (!keep) {
		while (e->npool)
			free(e->pool[--e->npool].p);
	}
}

void *spyre_blob_alloc(struct spyre_engine *e, uint64_t size, uint64_t *cap)
{
	uint32_t best = e->npool;
	void *p = NULL;

	if (size > SPYRE_BLOB_MAX_BYTES - e->blob_bytes)
		return NULL;
	for (uint32_t i = 0; i < e->npool; i++)	/* the smallest kept buffer that fits */
		if (e->pool[i].cap >= size && (best == e->npool || e->pool[i].cap < e->pool[best].cap))
			best = i;
	if (best < e->npool) {
		p = e->pool[best].p;
		*cap = e->pool[best].cap;
		e->pool[best] = e->pool[--e->npool];
	} else if (!posix_memalign(&p, 64, size ? size : 64)) {
		*cap = size;
	} else {
		return NULL;
	}
	e->blob_bytes += *cap;
	return p;
}

/* An earlier LOAD's copy of waiting LOAD op's rows, or NULL. */
static struct spyre_blob *blob_find(struct spyre_engine *e, const struct dma_op *op)
{
	for (struct spyre_blob *b = e->blobs; b; b = b->next)
		if (b->valid && b->va == op->va && b->rows == op->rows && b->len == op->len &&
		    (op->rows == 1 || b->mem_stride == op->mem_stride))
			return b;
	return NULL;
}

/* Blob b's rows, unpacked now if it holds them packed only; NULL if there is no room. */
static const uint8_t *blob_data(struct spyre_engine *e, struct spyre_blob *b)
{
	if (b->data)
		return b->data;
	if (!(b->data = spyre_blob_alloc(e, (uint64_t)b->rows * b->len, &b->cap)))
		return NULL;
	for (uint32_t r = 0; r < b->rows; r++)
		spyre_sgemm_unpack_b_row(b->whole->n, b->whole->k, r, b->whole->p, b->data + (uint64_t)r * b->len);
	return b->data;
}

/* The copy of waiting LOAD op's rows: shared with an earlier LOAD of the same rows, or read now; NULL if none. */
static struct spyre_blob *blob_get(struct spyre_engine *e, const struct dma_op *op)
{
	uint64_t size = (uint64_t)op->rows * op->len;
	struct spyre_blob *b = blob_find(e, op);

	if (b)
		return b;
	b = calloc(1, sizeof(*b));
	if (!b || !(b->data = spyre_blob_alloc(e, size, &b->cap))) {
		free(b);
		return NULL;
	}
	/* on the list at once: a failed read leaves its buffer to the launch's end */
	b->next = e->blobs;
	e->blobs = b;
	for (uint32_t r = 0; r < op->rows; r++) {
		uint64_t fva;

		if (e->ops->read(e->opaque, op->va + (uint64_t)r * op->mem_stride, b->data + (uint64_t)r * op->len,
				 op->len, &fva))	/* the flush that follows faults where it does */
			return NULL;
	}
	b->va = op->va;
	b->rows = op->rows;
	b->len = op->len;
	b->mem_stride = op->mem_stride;
	b->valid = true;
	return b;
}

const void *spyre_lazy_operand(struct spyre_engine *e, uint32_t id, uint64_t off, uint64_t ld, uint64_t rows,
			       uint64_t row_bytes, uint64_t *ld_out, struct spyre_blob **blob)
{
	struct core *c = &e->core[id];

	if (!rows || !row_bytes)
		return NULL;
	for (uint32_t i = 0; i < c->nlazy; i++) {
		struct dma_op *op = &c->lazy[i];
		uint64_t d = off - op->spo, boff, bld;

		if (off < op->spo)
			continue;
		if (op->rows == 1) {	/* one run of bytes (rows coalesced): any row pitch inside it */
			if (d > op->len || (rows - 1) * ld + row_bytes > op->len - d)
				continue;
			boff = d;
			bld = ld;
		} else {		/* the operand's rows are the LOAD's (or a column block of them) */
			if (ld != op->sp_stride || d % ld + row_bytes > op->len || d / ld + rows > op->rows)
				continue;
			boff = d / ld * op->len + d % ld;
			bld = op->len;
		}
		if (!op->blob && !(op->blob = blob_get(e, op)))
			return NULL;
		const uint8_t *data = blob_data(e, op->blob);

		if (!data)
			return NULL;
		*ld_out = bld;
		*blob = op->blob;
		return data + boff;
	}
	return NULL;
}

const float *spyre_lazy_packed_b(struct spyre_engine *e, uint32_t id, uint64_t off, uint64_t ld, uint64_t k,
				 uint64_t n)
{
	struct core *c = &e->core[id];
	uint64_t len = n * sizeof(float);

	for (uint32_t i = 0; i < c->nlazy; i++) {
		struct dma_op *op = &c->lazy[i];
		struct spyre_blob *b;
		struct spyre_packed *pk;
		float *row;

		/* its rows are B's rows (a LOAD of one row is one run of bytes: spyre_lazy_operand()'s) */
		if (op->spo != off || op->rows != k || k < 2 || op->len != len || op->sp_stride != ld)
			continue;
		if (!op->blob)
			op->blob = blob_find(e, op);
		if (op->blob)
			return op->blob->whole ? op->blob->whole->p : NULL;
		b = calloc(1, sizeof(*b));
		pk = calloc(1, sizeof(*pk));
		row = malloc(len);
		if (!b || !pk || !row || !(pk->p = spyre_blob_alloc(e, SPYRE_SGEMM_PACKED_FLOATS(n, k) * sizeof(float),
								      &pk->cap))) {
			free(b);
			free(pk);
			free(row);
			return NULL;
		}
		/* on the list at once: a failed read leaves its buffer to the launch's end */
		b->packed = pk;
		b->next = e->blobs;
		e->blobs = b;
		for (uint32_t r = 0; r < op->rows; r++) {
			uint64_t fva;

			if (e->ops->read(e->opaque, op->va + (uint64_t)r * op->mem_stride, row, len, &fva)) {
				free(row);	/* the flush that follows faults where it does */
				return NULL;
			}
			spyre_sgemm_pack_b_row(n, k, r, row, pk->p);
		}
		free(row);
		pk->ld = pk->n = n;
		pk->k = k;
		b->whole = pk;
		b->va = op->va;
		b->rows = op->rows;
		b->len = op->len;
		b->mem_stride = op->mem_stride;
		b->valid = true;
		op->blob = b;
		return pk->p;
	}
	return NULL;
}

/* Whether waiting LOAD n writes every byte of waiting LOAD o (o is then never read). */
static bool covers(const struct dma_op *n, const struct dma_op *o)
{
	if (n->rows == 1)
		return n->spo <= o->spo && sp_end(n) >= sp_end(o);
	return n->spo == o->spo && n->sp_stride == o->sp_stride && n->rows >= o->rows && n->len >= o->len;
}

/*
 * A STORE of core id is about to write memory [lo, hi) from its scratchpad:
 * the waiting LOADs that read there and have no copy are written first (on
 * any core), no later LOAD shares a copy of those rows, and the STORE's
 * scratchpad bytes are written.
 */
static int store_flush(struct spyre_engine *e, uint32_t id, const struct dma_op *st)
{
	uint64_t lo = st->va, hi = mem_end(st);

	for (uint32_t i = 0; i < e->cfg.cores; i++)
		if (e->core[i].nlazy && lazy_flush_sel(e, i, 0, 0, lo, hi) == STEP_FAULT)
			return STEP_FAULT;
	for (struct spyre_blob *b = e->blobs; b; b = b->next)
		if (b->va < hi && b->va + (uint64_t)(b->rows - 1) * b->mem_stride + b->len > lo)
			b->valid = false;
	if (spyre_lazy_flush_range(e, id, st->spo, sp_end(st)) == STEP_FAULT)
		return STEP_FAULT;
	return spyre_defer_sync(e, id);
}

/*
 * The data of a completed LOAD/STORE. A STORE first lets every waiting LOAD
 * that reads what it overwrites read (or keep its copy). A LOAD whose rows all
 * pass the probe waits for its core's next touch (its stale sticks settled
 * now, as the read would; waiting LOADs it overwrites whole are dropped, those
 * it meets in part written first); otherwise it moves now, faulting where the
 * read does.
 */
static int dma_copy(struct spyre_engine *e, uint32_t id, const struct dma_op *op)
{
	struct core *c = &e->core[id];

	if (op->store) {
		if (store_flush(e, id, op) == STEP_FAULT)
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
			uint64_t lo = op->spo, hi = sp_end(op);

			for (uint32_t i = 0; i < c->nlazy;) {
				if (c->lazy[i].spo < hi && sp_end(&c->lazy[i]) > lo && covers(op, &c->lazy[i])) {
					memmove(&c->lazy[i], &c->lazy[i + 1], (c->nlazy - i - 1) * sizeof(*op));
					c->nlazy--;
				} else {
					i++;
				}
			}
			if (spyre_lazy_flush_range(e, id, lo, hi) == STEP_FAULT)
				return STEP_FAULT;
			if (c->nlazy == SPYRE_LAZY_DEPTH && spyre_lazy_flush(e, id) == STEP_FAULT)
				return STEP_FAULT;
			for (uint32_t r = 0; r < op->rows; r++) {
				uint64_t rlo = op->spo + (uint64_t)r * op->sp_stride;

				spyre_sp_write_begin(e, id, rlo, rlo + op->len);
				spyre_sp_write_end(e, id, rlo, rlo + op->len, true);
			}
			c->lazy[c->nlazy] = *op;
			c->lazy[c->nlazy++].blob = NULL;
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
