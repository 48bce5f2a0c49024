// SPDX-License-Identifier: MIT
/*
 * The paged KV cache's write (docs/kernels.md, "## Paged attention"):
 * row r of a step's K and V goes to slot slots[r] of the layer's caches.
 * The slot mapping is a table in device memory: each core loads it into
 * its scratchpad once and turns each entry into a store address with LDX
 * (bounded by the number of slots: a bad entry is the fault bad-index;
 * -1, a padding row, skips its store). One program serves every step of m
 * rows. The attention over the cache is kg_gen_paged_attention()
 * (kern_attn.c, with the contiguous attention's online softmax).
 */
#include <errno.h>

#include "kern.h"

#define STICK		SPYRE_STICK_BYTES

/* Checks shared by the paged ops: sizes non-zero and within what LDX's u32 bound and scale can say. */
int kg_paged_check(struct kgen *g, uint64_t row_bytes)
{
	const struct spyre_kdesc *d = g->d;
	uint64_t slots = (uint64_t)d->num_blocks * d->block_size;

	if (!d->m || !d->kv_heads || !d->head_dim || !d->num_blocks || !d->block_size)
		return kg_fail(g, "m, kv_heads, head_dim, num_blocks and block_size must be non-zero");
	if (d->head_dim > 4096 || d->kv_heads > 4096 || d->block_size > 4096 || d->m > 65535)
		return kg_fail(g, "head_dim %u, kv_heads %u, block_size %u or m %llu too large", d->head_dim,
			       d->kv_heads, d->block_size, (unsigned long long)d->m);
	if (slots > UINT32_MAX || row_bytes * d->block_size > UINT32_MAX || slots * row_bytes > (1ull << 47))
		return kg_fail(g, "a cache of %u blocks of %u rows of %llu bytes is too large", d->num_blocks,
			       d->block_size, (unsigned long long)row_bytes);
	return 0;
}

int kg_gen_paged_kv_write(struct kgen *g)
{
	const struct spyre_kdesc *d = g->d;
	uint32_t dt = d->dtype, hd = d->head_dim, kvh = d->kv_heads;
	uint64_t m = d->m, shd = kg_pitch(hd, dt), pk = kvh * shd;
	uint64_t slots = (uint64_t)d->num_blocks * d->block_size, tp = kg_pitch(m, SPYRE_DT_INT32);

	if (kg_paged_check(g, pk))
		return -EINVAL;

	int sk = kg_slot(g, "k", dt, m, (uint64_t)kvh * hd, pk, SPYRE_SYM_IN);
	int sv = kg_slot(g, "v", dt, m, (uint64_t)kvh * hd, pk, SPYRE_SYM_IN);
	int ss = kg_slot(g, "slots", SPYRE_DT_INT32, 1, m, tp, SPYRE_SYM_IN);
	int skc = kg_slot(g, "kc", dt, slots, (uint64_t)kvh * hd, pk, SPYRE_SYM_IN | SPYRE_SYM_OUT);
	int svc = kg_slot(g, "vc", dt, slots, (uint64_t)kvh * hd, pk, SPYRE_SYM_IN | SPYRE_SYM_OUT);

	if (g->failed)
		return -EINVAL;
	/* rows over the cores; each core's rows through the scratchpad in tiles of K and V */
	uint32_t parts = (uint32_t)kg_min64(m, g->cores);

	if (tp + 2 * pk > g->sp_bytes)
		return kg_fail(g, "the slot mapping of %llu rows and one K and V row (%llu bytes) do not fit a "
			       "scratchpad of %u bytes", (unsigned long long)m, (unsigned long long)pk, g->sp_bytes);
	for (uint32_t c = 0; c < parts; c++) {
		struct kg_range r = kg_split(m, parts, c, 1);
		uint32_t tb, kb, vb;
		uint64_t tr;

		if (!r.count)
			continue;
		kg_sp_reset(g, c);
		tb = kg_sp_alloc(g, c, tp);
		tr = kg_min64(r.count, (kg_sp_free(g, c) / (2 * pk)));
		kb = kg_sp_alloc(g, c, tr * pk);
		vb = kg_sp_alloc(g, c, tr * pk);
		if (g->failed)
			return -EINVAL;
		kg_dma(g, c, SPYRE_ISA_OP_LOAD, tb, ss, 0, 1, tp, tp);
		for (uint64_t r0 = r.start; r0 < r.start + r.count; r0 += tr) {
			uint64_t n = kg_min64(tr, r.start + r.count - r0);

			kg_dma(g, c, SPYRE_ISA_OP_LOAD, kb, sk, r0 * pk, 1, n * pk, n * pk);
			kg_dma(g, c, SPYRE_ISA_OP_LOAD, vb, sv, r0 * pk, 1, n * pk, n * pk);
			for (uint64_t i = 0; i < n; i++) {
				/* r1 = slot * row bytes; a -1 slot skips the store after each LDX */
				for (int v = 0; v < 2; v++) {
					spyre_pb_ldx(g->pb, c, 1, tb + (uint32_t)((r0 + i) * 4), 0, (uint32_t)slots,
						     (uint32_t)pk, SPYRE_IF_SKIPNEG);
					spyre_pb_dma(g->pb, c, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){
						.sp = (v ? vb : kb) + (uint32_t)(i * pk),
						.mem = { .sym = v ? svc : skc, .reg = SPYRE_PB_REG(1) },
						.row_bytes = (uint32_t)pk });
				}
			}
		}
	}
	return kg_ok(g);
}
