/* SPDX-License-Identifier: MIT */
/*
 * device_int.h - what the files of the model on a card share (device.h is
 * its interface): the model's state, the step as calls (device_graph.c:
 * step() and the no-device estimate) and the device run (device.c).
 */
#ifndef SPYRE_MODEL_DEVICE_INT_H
#define SPYRE_MODEL_DEVICE_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "device.h"
#include "dmem.h"
#include "spyre_isa.h"

/* Prefill embeds at most this many tokens per launch (they travel as launch scalars). */
#define EMBED_CHUNK	128
/* Dispatch d: positions per block of the paged view of the KV caches. */
#define PAGE		64
/* Dispatch d: the most decode steps between two waits (steps of one exec, spyre_dmodel_set_sync_every()). */
#define SYNC_MAX	256
#define SYNC_DEFAULT	16
/* Dispatch d: execs kept: K steps for either half of the rings, and a shorter last window's. */
#define NEXECS		4

/*
 * Dispatch d's int32 tables, one device buffer (struct spyre_dmodel.tab),
 * stick-layout rows: the prefill's context length, the decode position and
 * context length (the counters a decode step reads and advances on the
 * card: IADD), the prefill's slot mapping 0 .. max_pos-1, the identity block
 * table. The host writes the first three rows before a prefill.
 */
#define TAB_PREFILL_CTX	0
#define TAB_POS		SPYRE_STICK_BYTES
#define TAB_CTX		(2 * SPYRE_STICK_BYTES)
#define TAB_TOKEN	(3 * SPYRE_STICK_BYTES)	/* host row only: a token the caller feeds instead of the card's */
#define TAB_SLOTS	(4 * SPYRE_STICK_BYTES)

struct spyre_dmodel {
	spyre_device_t *dev;
	struct spyre_model_config cfg;
	struct spyre_dmodel_opts opts;
	uint32_t dt, cores, sp_bytes, pos;
	spyre_stream_t *stream;
	spyre_kcache_t *kcache;
	/* weights, KV caches, RoPE tables */
	struct spyre_ddecoder wt;
	/*
	 * activations, for up to max_pos rows (kernels with a work slot get it from the kernel library);
	 * u: the MLP's output under tensor parallelism (t is attention's: see run_step_tp())
	 */
	spyre_dptr_t x, h, q, k, v, a, t, u, logits, token;
	/* pinned host buffers the results come back in */
	int32_t *host_token;
	void *host_logits;
	/* dispatch d: the paged view of the caches, the tables, the execs of K decode steps and their rings */
	uint32_t nblocks;		/* blocks of PAGE positions of each cache (cache_bytes()) */
	spyre_dptr_t tab;		/* TAB_* */
	int32_t *host_tab;		/* pinned: the rows the host writes (TAB_PREFILL_CTX .. TAB_TOKEN) */
	int32_t last_token;		/* the token the card holds in @token (the last argmax) */
	bool dev_stale;			/* a failed decode_graph() may have left the card's counters and token ahead */
	uint32_t sync_every;		/* K: the host waits every K decode steps */
	struct {
		spyre_graph_exec_t *x;	/* @steps decode steps; step s leaves its token in ring slot half*K + s */
		uint32_t steps, half;
	} gx[NEXECS];
	uint32_t ngx;
	bool gx_logits;			/* the execs also copy the logits to @ring_logits */
	int32_t *ring_token;		/* pinned, 2K sticks: two windows, one filling while the other is read */
	void *ring_logits;		/* pinned, 2K rows of the logits, when @gx_logits */
	spyre_event_t *window_done[2];	/* recorded after the replay of a window into either half */
	/* kernels launched by a BUILD step, released when it ends */
	spyre_kernel_t **held;
	uint32_t nheld, capheld;
	/*
	 * Tensor parallel (spyre_dmodel_new_tp()): @tp ranks, this model rank
	 * @rank of them with its shard of the heads and the MLP. The model the
	 * caller holds drives @shard[0 .. tp-1] (one card each, their own
	 * stream, kernel cache, weights and KV caches) and holds no device
	 * memory of its own; a shard records its step's kernels in @rec.
	 */
	uint32_t tp, rank;
	struct spyre_dmodel **shard;
	spyre_comm_t *comm;
	struct call *rec;
	uint32_t nrec, caprec;
	char err[512];
	/* every device allocation, freed at the end */
	struct spyre_dmem mem;
};

/* ---- the model graph ---------------------------------------------------------- */

/* One kernel of a step: what to build and what to bind. */
struct call {
	struct spyre_kdesc d;
	spyre_dptr_t slots[8];
	uint32_t nslots;
	uint64_t scalars[EMBED_CHUNK + 8];
	uint32_t nscalars;
};

typedef int (*emit_fn)(void *ctx, struct call *c);

/* Shapes and buffers step() needs; buffers are 0 for the estimate. */
struct graph {
	const struct spyre_model_config *cfg;
	uint32_t dt, cores, sp_bytes;
	bool reloc;
	bool paged;		/* dispatch d: the caches through the paged kernels (identity block table) */
	uint32_t tp, rank;	/* tensor parallel: @cfg is rank @rank's shard of @tp (1: one card) */
	const struct spyre_dmodel *dm;	/* NULL for the estimate */
};

/*
 * Tensor parallel: step() emits this pseudo-op where the partial sums of
 * the ranks' row-parallel projections (O, the MLP's down) are added up: an
 * all-reduce of slot 0, m rows of hidden (spyre_all_reduce() over the
 * ranks' streams, run_step_tp()).
 */
#define OP_ALLREDUCE	UINT32_MAX

static inline int fail(struct spyre_dmodel *dm, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline int fail(struct spyre_dmodel *dm, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ret = spyre_model_errv(dm->err, sizeof(dm->err), ret, true, fmt, ap);
	va_end(ap);
	return ret;
}

/* ---- device_graph.c ---- */

/* A kernel descriptor of @g's dtype, cores and scratchpad. */
struct spyre_kdesc dm_kd(const struct graph *g, uint32_t op, uint64_t m, uint64_t n, uint64_t k);
/* A prefill (@m tokens from @pos0) or decode step of @g as the kernels it launches, each given to @emit. */
int dm_step(const struct graph *g, const int32_t *tokens, uint32_t m, uint32_t pos0, bool decode, emit_fn emit,
	    void *ctx);

/* ---- device.c ---- */

/* Device bytes the model needs (the fit check and the estimate). */
uint64_t dm_model_bytes(const struct spyre_model_config *c, uint32_t dt, uint32_t tp, uint64_t work);

#endif
