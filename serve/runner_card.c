// SPDX-License-Identifier: MIT
/*
 * The card runner (runner_card.h): a step of a flattened batch as kernels
 * of libspyre's kernel library over a paged KV cache in device memory.
 *
 * Per step: the host checks the batch (a careless engine gets an error,
 * not a device fault), writes the step's tables into one pinned buffer and
 * copies it to the device once; then the launches: the indexed embedding
 * (token ids from the tables), per layer RMSNorm, the Q/K/V projections,
 * RoPE with a position per row, the KV write through the slot mapping,
 * one PAGED_ATTENTION per run of consecutive sequences with the same
 * number of rows (the decodes: one launch; a prefill chunk: one), the
 * output projection, the residual, the MLP; then the rows that sample
 * gathered (the indexed embedding over the hidden states), the final norm,
 * the LM head and ARGMAX on those rows only. The greedy tokens (and the
 * logits when asked) come back in one copy each.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dmem.h"
#include "runner_card.h"
#include "spyre_isa.h"
#include "spyre_kernels.h"
#include "clock.h"

#define I32 SPYRE_DT_INT32

struct card {
	struct spyre_runner runner;	/* what the constructor hands out; freed with the rest */
	spyre_device_t *dev;
	struct spyre_model_config cfg;
	uint32_t dt, cores, sp_bytes, bs, nb, max_seqs, max_tokens, max_blocks;
	uint64_t ph, pq, pk, cache_bytes;
	spyre_stream_t *stream;
	spyre_kcache_t *kcache;
	struct spyre_ddecoder wt;	/* weights, KV caches, RoPE tables */
	/* activations for max_tokens rows, the sampled rows for max_seqs */
	spyre_dptr_t x, h, q, k, v, a, t, xs, hs, logits, argmax, tables;
	uint64_t tables_bytes;
	/* pinned host buffers: the step's tables, the results */
	uint8_t *host_tables;
	int32_t *host_argmax;
	void *host_logits;
	struct spyre_dmem mem;		/* every device allocation */
	uint64_t launches;
	/* launch graphs: the decode step of n sequences, dec[n] (NULL: not captured, or graphs off) */
	bool graphs;
	spyre_graph_exec_t **dec;
	bool *dec_failed;		/* its capture failed: launched one by one for good */
	bool capturing;			/* launch() keeps the kernels it launches (held) */
	spyre_kernel_t **held;		/* the kernels the graphs launch, a reference each */
	uint32_t nheld, capheld;
	char *err;		/* the caller's message buffer of the running call */
	size_t errlen;
	/*
	 * Tensor parallel (spyre_runner_card_new_tp()): this card is rank
	 * @rank of @tp with its shard of the heads and the MLP; the runner the
	 * caller holds drives @shard[0 .. tp-1] and holds no device memory. A
	 * shard's step is recorded (launch() into @rec, all-reduces marked)
	 * and launched side by side with the others' (step_tp()).
	 */
	uint32_t tp, rank;
	struct card **shard;
	spyre_comm_t *comm;
	spyre_dptr_t u;		/* the MLP's output under tensor parallelism (t is attention's) */
	bool recording;
	struct rec {
		struct spyre_kdesc d;	/* .op OP_ALLREDUCE: slots[0], d.m rows of hidden summed over the ranks */
		spyre_dptr_t slots[6];
		uint32_t n;
	} *rec;
	uint32_t nrec, caprec;
	char name[48];		/* the runner's name */
};

/* The all-reduce mark of a recorded step (not a kernel op). */
#define OP_ALLREDUCE	UINT32_MAX

static int fail(struct card *c, int ret, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct card *c, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ret = spyre_model_errv(c->err, c->errlen, ret, ret != -EINVAL, fmt, ap);
	va_end(ap);
	return ret;
}

static uint64_t ipitch(uint64_t n)
{
	return spyre_kernel_pitch(n, I32);
}

/* ---- set-up ------------------------------------------------------------------- */

static int dalloc(struct card *c, uint64_t bytes, spyre_dptr_t *p)
{
	return spyre_dmem_alloc(&c->mem, bytes, p);
}

static struct spyre_kdesc kd(const struct card *c, uint32_t op, uint64_t m, uint64_t n, uint64_t k)
{
	return (struct spyre_kdesc){ .size = sizeof(struct spyre_kdesc), .op = op, .dtype = c->dt,
				     .cores = c->cores, .m = m, .n = n, .k = k, .sp_bytes = c->sp_bytes };
}

/* The step's table buffer: tokens, positions, slots [T], sample rows [S], then per run ctx [n] + tables [n x mb]. */
static uint64_t tables_max_bytes(const struct card *c)
{
	return 3 * ipitch(c->max_tokens) + ipitch(c->max_seqs) +
	       (uint64_t)c->max_seqs * (SPYRE_STICK_BYTES + ipitch(c->max_blocks));
}

static void card_free(void *self)
{
	struct card *c = self;

	if (!c)
		return;
	for (uint32_t r = 0; c->shard && r < c->tp; r++)
		card_free(c->shard[r]);
	free(c->shard);
	spyre_comm_destroy(c->comm);
	free(c->rec);
	if (c->stream)
		spyre_stream_synchronize(c->stream);
	if (c->dec)
		for (uint32_t n = 0; n <= c->max_seqs; n++)
			spyre_graph_exec_destroy(c->dec[n]);
	free(c->dec);
	free(c->dec_failed);
	for (uint32_t i = 0; i < c->nheld; i++)
		spyre_kernel_put(c->held[i]);
	free(c->held);
	if (c->kcache)
		spyre_kcache_destroy(c->kcache);
	if (c->stream)
		spyre_stream_destroy(c->stream);
	spyre_dmem_free(&c->mem);
	if (c->host_tables)
		spyre_free_host(c->dev, c->host_tables);
	if (c->host_argmax)
		spyre_free_host(c->dev, c->host_argmax);
	if (c->host_logits)
		spyre_free_host(c->dev, c->host_logits);
	free(c->wt.layer);
	free(c);
}

static int card_step(void *self, const struct spyre_runner_batch *b, struct spyre_runner_stats *st, char *err,
		     size_t errlen);

static const struct spyre_runner_ops card_ops = { .step = card_step, .free = card_free };

static int setup(struct card *c, const struct spyre_model_weights *w, const struct spyre_runner_card_opts *o)
{
	const struct spyre_model_config *cfg = &c->cfg;
	struct spyre_device_props props = { .size = sizeof(props) };
	uint32_t hd = cfg->head_dim, qd = cfg->heads * hd, kvd = cfg->kv_heads * hd;
	uint64_t need;
	int ret;

	if (o->dtype != SPYRE_DT_FP32 && o->dtype != SPYRE_DT_FP16 && o->dtype != SPYRE_DT_BF16 &&
	    o->dtype != SPYRE_DT_DL16)
		return fail(c, -EINVAL, "dtype %u is not fp32, fp16, bf16 or dl16", o->dtype);
	if (!w || w->layers != cfg->layers)
		return fail(c, -EINVAL, "the weights are not of this config (%u layers)", cfg->layers);
	ret = spyre_device_get_props(c->dev, &props);
	if (ret)
		return fail(c, ret, "device properties");
	c->dt = o->dtype;
	c->cores = o->cores ? o->cores : props.num_cores;
	if (c->cores > props.num_cores)
		return fail(c, -EINVAL, "%u cores requested, the device has %u", c->cores, props.num_cores);
	c->sp_bytes = props.scratchpad_bytes;
	c->bs = o->block_size ? o->block_size : 64;
	c->max_seqs = o->max_num_seqs ? o->max_num_seqs : SPYRE_DEFAULT_MAX_NUM_SEQS;
	c->max_tokens = o->max_num_batched_tokens ? o->max_num_batched_tokens :
		(SPYRE_DEFAULT_MAX_NUM_BATCHED_TOKENS + c->bs - 1) / c->bs * c->bs;
	if (c->bs > 4096 || c->max_seqs > 4096 || c->max_tokens > 65535 || c->max_seqs > c->max_tokens)
		return fail(c, -EINVAL, "block_size %u (at most 4096), max_num_seqs %u (at most 4096 and at most the "
			    "tokens) or max_num_batched_tokens %u (at most 65535) out of range", c->bs, c->max_seqs,
			    c->max_tokens);
	c->max_blocks = (cfg->max_pos + c->bs - 1) / c->bs;
	c->nb = o->num_blocks ? o->num_blocks : c->max_blocks * c->max_seqs;
	c->ph = spyre_kernel_pitch(cfg->hidden, c->dt);
	c->pq = spyre_kernel_grouped_pitch(qd, hd, c->dt);
	c->pk = spyre_kernel_grouped_pitch(kvd, hd, c->dt);
	c->cache_bytes = (uint64_t)c->nb * c->bs * c->pk;
	/* the KV caches and activations; the weights are checked as they are allocated */
	need = 2 * cfg->layers * c->cache_bytes + (uint64_t)c->max_tokens * (3 * c->ph + 2 * c->pq + 2 * c->pk);
	if (need > props.mem_size)
		return fail(c, -ENOMEM, "the KV caches (%u blocks of %u tokens, %u layers) and activations need "
			    "%.1f MiB, the device has %.1f MiB", c->nb, c->bs, cfg->layers, need / 1048576.0,
			    props.mem_size / 1048576.0);
	ret = spyre_stream_create(c->dev, SPYRE_STREAM_PRIORITY_NORMAL, &c->stream);
	if (ret)
		return fail(c, ret, "stream");
	ret = spyre_kcache_create(c->dev, 4096, &c->kcache);
	if (ret)
		return fail(c, ret, "kernel cache");
	struct spyre_kdesc base = kd(c, SPYRE_KOP_LINEAR, 1, 1, 1);

	ret = spyre_dmem_upload_decoder(&c->mem, cfg, w, &base, !c->rank, c->cache_bytes, &c->wt);
	if (ret)
		return ret;
	/* finite values everywhere: rows past a context are read (masked) */
	for (uint32_t l = 0; l < cfg->layers; l++)
		if ((ret = spyre_memset_async(c->stream, c->wt.layer[l].kc, 0, c->cache_bytes)) ||
		    (ret = spyre_memset_async(c->stream, c->wt.layer[l].vc, 0, c->cache_bytes)))
			return fail(c, ret, "clearing the KV caches");
	{
		uint64_t mt = c->max_tokens, ms = c->max_seqs, pv = spyre_kernel_pitch(cfg->vocab, c->dt);

		c->tables_bytes = tables_max_bytes(c);
		if ((ret = dalloc(c, mt * c->ph, &c->x)) || (ret = dalloc(c, mt * c->ph, &c->h)) ||
		    (ret = dalloc(c, mt * c->ph, &c->t)) || (ret = dalloc(c, mt * c->pq, &c->q)) ||
		    (ret = dalloc(c, mt * c->pq, &c->a)) || (ret = dalloc(c, mt * c->pk, &c->k)) ||
		    (ret = dalloc(c, mt * c->pk, &c->v)) || (ret = dalloc(c, ms * c->ph, &c->xs)) ||
		    (ret = dalloc(c, ms * c->ph, &c->hs)) || (ret = dalloc(c, ms * pv, &c->logits)) ||
		    (ret = dalloc(c, ipitch(ms), &c->argmax)) || (ret = dalloc(c, c->tables_bytes, &c->tables)) ||
		    (c->tp > 1 && (ret = dalloc(c, mt * c->ph, &c->u))))
			return ret;
		ret = spyre_malloc_host(c->dev, c->tables_bytes, (void **)&c->host_tables);
		ret = ret ?: spyre_malloc_host(c->dev, ipitch(ms), (void **)&c->host_argmax);
		ret = ret ?: spyre_malloc_host(c->dev, ms * pv, &c->host_logits);
		if (ret)
			return fail(c, ret, "pinned host memory");
	}
	/* a captured step cannot hold the all-reduces: their cross-card events cannot be captured */
	c->graphs = !o->no_graphs && c->tp <= 1;
	if (c->graphs) {
		c->dec = calloc(c->max_seqs + 1, sizeof(*c->dec));
		c->dec_failed = calloc(c->max_seqs + 1, sizeof(*c->dec_failed));
		if (!c->dec || !c->dec_failed)
			return fail(c, -ENOMEM, "host memory");
	}
	ret = spyre_stream_synchronize(c->stream);
	return ret ? fail(c, ret, "clearing the KV caches") : 0;
}

static int warm_up(struct card *c, char *err, size_t errlen);

/* A card of @tp (rank @rank's shard, with @cfg and @w the shard's, when @tp > 1): set up, not warmed up. */
static int card_new(spyre_device_t *dev, const struct spyre_model_config *cfg, const struct spyre_model_weights *w,
		    const struct spyre_runner_card_opts *o, uint32_t tp, uint32_t rank, struct card **out, char *err,
		    size_t errlen)
{
	struct card *c = calloc(1, sizeof(*c));
	int ret;

	*out = NULL;
	if (!c) {
		snprintf(err, errlen, "out of host memory");
		return -ENOMEM;
	}
	c->dev = dev;
	c->cfg = *cfg;
	c->tp = tp;
	c->rank = rank;
	c->err = err;
	c->errlen = errlen;
	c->mem = (struct spyre_dmem){ .dev = dev, .err = err, .errlen = errlen };
	ret = setup(c, w, o);
	c->err = NULL;
	c->errlen = 0;
	c->mem.err = NULL;
	c->mem.errlen = 0;
	if (ret) {
		card_free(c);
		return ret;
	}
	*out = c;
	return 0;
}

/* The warm-up when asked for, then the runner handed out (@c freed on failure). */
static int hand_out(struct card *c, const struct spyre_runner_card_opts *o, struct spyre_runner **out, char *err,
		    size_t errlen)
{
	int ret = o->warmup ? warm_up(c, err, errlen) : 0;

	if (ret) {
		card_free(c);
		return ret;
	}
	c->runner = (struct spyre_runner){ .ops = &card_ops, .self = c, .vocab = c->cfg.vocab, .block_size = c->bs,
					   .num_blocks = c->nb, .max_model_len = c->cfg.max_pos,
					   .max_num_seqs = c->max_seqs, .max_num_tokens = c->max_tokens,
					   .eos_token_id = (int32_t)c->cfg.eos_token_id, .name = c->name };
	if (c->tp > 1)
		snprintf(c->name, sizeof(c->name), "card, tensor parallel over %u cards", c->tp);
	else
		snprintf(c->name, sizeof(c->name), "card");
	*out = &c->runner;
	return 0;
}

static const struct spyre_runner_card_opts defaults = { .dtype = SPYRE_DT_FP16 };

int spyre_runner_card_new(spyre_device_t *dev, const struct spyre_model_config *cfg,
			  const struct spyre_model_weights *w, const struct spyre_runner_card_opts *opts,
			  struct spyre_runner **out, char *err, size_t errlen)
{
	struct card *c;
	int ret;

	if (!dev || !cfg || !out) {
		snprintf(err, errlen, "card runner: NULL device, config or runner");
		return -EINVAL;
	}
	*out = NULL;
	ret = card_new(dev, cfg, w, opts ? opts : &defaults, 1, 0, &c, err, errlen);
	return ret ?: hand_out(c, opts ? opts : &defaults, out, err, errlen);
}

int spyre_runner_card_new_tp(spyre_device_t *const *devs, uint32_t tp, const struct spyre_model_config *cfg,
			     const struct spyre_model_weights *w, const struct spyre_runner_card_opts *opts,
			     struct spyre_runner **out, char *err, size_t errlen)
{
	const struct spyre_runner_card_opts *o = opts ? opts : &defaults;
	struct spyre_model_config sc;
	struct card *c, *s0;
	int ret;

	if (!devs || !cfg || !out) {
		snprintf(err, errlen, "card runner: NULL devices, config or runner");
		return -EINVAL;
	}
	*out = NULL;
	ret = spyre_model_config_tp(cfg, tp, &sc, err, errlen);
	if (ret)
		return ret;
	if (tp == 1)
		return spyre_runner_card_new(devs[0], cfg, w, opts, out, err, errlen);
	if (!w || w->layers != cfg->layers) {
		snprintf(err, errlen, "the weights are not of this config (%u layers)", cfg->layers);
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->shard = calloc(tp, sizeof(*c->shard)))) {
		free(c);
		snprintf(err, errlen, "out of host memory");
		return -ENOMEM;
	}
	c->cfg = *cfg;
	c->tp = tp;
	c->dev = devs[0];
	ret = spyre_comm_init(&c->comm, devs, (int)tp);
	if (ret)
		snprintf(err, errlen, "a communicator of %u cards: %s", tp, spyre_last_error());
	for (uint32_t r = 0; r < tp && !ret; r++) {
		struct spyre_model_weights sw;
		float *own;

		ret = spyre_model_weights_shard(cfg, &sc, w, r, &sw, &own);
		if (ret) {
			snprintf(err, errlen, "out of host memory");
			break;
		}
		ret = card_new(devs[r], &sc, &sw, o, tp, r, &c->shard[r], err, errlen);
		free(own);
		free(sw.layer);
		if (ret) {
			char e[512];

			snprintf(e, sizeof(e), "%s", err);
			snprintf(err, errlen, "rank %u of %u: %s", r, tp, e);
		}
	}
	if (ret) {
		card_free(c);
		return ret;
	}
	/* what the step's checks and the warm-up read, as every shard has it */
	s0 = c->shard[0];
	c->dt = s0->dt;
	c->cores = s0->cores;
	c->bs = s0->bs;
	c->nb = s0->nb;
	c->max_seqs = s0->max_seqs;
	c->max_tokens = s0->max_tokens;
	c->max_blocks = s0->max_blocks;
	c->ph = s0->ph;
	return hand_out(c, o, out, err, errlen);
}

/* ---- a step ------------------------------------------------------------------- */

/*
 * The rows a step runs: num_tokens rounded up to a bucket (powers of two to
 * 64, then multiples of 64; at most max_num_batched_tokens), so that the
 * kernels of the rows (embedding to MLP) are built for a dozen shapes, not
 * for every batch size. The padding rows take token 0 at position 0 and
 * slot -1: nothing is written to the caches, no sequence attends to them,
 * and their outputs are never read.
 */
static uint32_t rows_bucket(const struct card *c, uint32_t t)
{
	uint32_t b = 1;

	if (t > 64)
		b = (t + 63) / 64 * 64;
	else
		while (b < t)
			b *= 2;
	return b < c->max_tokens ? b : c->max_tokens;
}

/* A run of consecutive sequences with the same number of rows: one attention launch. */
struct run {
	uint32_t s0, n, rows;	/* first sequence, sequences, rows each */
	uint64_t ctx_off, bt_off;	/* in the table buffer */
};

/* A tensor-parallel shard's launch (or all-reduce mark), kept for step_tp(). */
static int record(struct card *c, const struct spyre_kdesc *d, const spyre_dptr_t *slots, uint32_t n)
{
	if (c->nrec == c->caprec) {
		uint32_t cap = c->caprec ? 2 * c->caprec : 128;
		struct rec *r = realloc(c->rec, cap * sizeof(*r));

		if (!r)
			return fail(c, -ENOMEM, "host memory");
		c->rec = r;
		c->caprec = cap;
	}
	c->rec[c->nrec].d = *d;
	memcpy(c->rec[c->nrec].slots, slots, n * sizeof(*slots));
	c->rec[c->nrec++].n = n;
	return 0;
}

/* Tensor parallel: @y, @T rows of hidden, summed over the ranks; nothing on one card. */
static int all_reduce(struct card *c, spyre_dptr_t y, uint32_t T)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = OP_ALLREDUCE, .dtype = c->dt, .m = T,
				 .n = c->cfg.hidden };

	return c->tp > 1 ? record(c, &d, &y, 1) : 0;
}

static int launch(struct card *c, const struct spyre_kdesc *d, const spyre_dptr_t *slots, uint32_t n)
{
	spyre_kernel_t *k;
	int ret;

	if (c->recording)
		return record(c, d, slots, n);
	ret = spyre_kernel_get(c->kcache, d, &k);

	if (ret)
		return fail(c, ret, "%s kernel (%llu rows)", spyre_kernel_op_name(d->op), (unsigned long long)d->m);
	ret = spyre_kernel_launch(c->stream, k, slots, n, NULL, 0);
	if (c->capturing && !ret) {
		/* a graph's kernel: kept as long as the graph */
		if (c->nheld == c->capheld) {
			uint32_t cap = c->capheld ? 2 * c->capheld : 256;
			spyre_kernel_t **h = realloc(c->held, cap * sizeof(*h));

			if (!h) {
				spyre_kernel_put(k);
				return fail(c, -ENOMEM, "host memory");
			}
			c->held = h;
			c->capheld = cap;
		}
		c->held[c->nheld++] = k;
	} else {
		spyre_kernel_put(k);
	}
	if (ret)
		return fail(c, ret, "launching %s", spyre_kernel_op_name(d->op));
	c->launches++;
	return 0;
}

/* The batch against the runner's limits and runner.h's contract; 0 or -EINVAL naming the first fault. */
static int check_batch(struct card *c, const struct spyre_runner_batch *b)
{
	uint32_t T = b->num_tokens, S = b->num_seqs;
	uint64_t nslots = (uint64_t)c->nb * c->bs;

	if (!T || T > c->max_tokens)
		return fail(c, -EINVAL, "num_tokens %u: 1..%u (max_num_batched_tokens)", T, c->max_tokens);
	if (!S || S > c->max_seqs || S > T)
		return fail(c, -EINVAL, "num_seqs %u: 1..%u (max_num_seqs) and at most num_tokens", S, c->max_seqs);
	if (!b->tokens || !b->positions || !b->slot_mapping || !b->query_start || !b->context_lens ||
	    !b->block_tables)
		return fail(c, -EINVAL, "a NULL array in the batch");
	if (!b->max_blocks || b->max_blocks > c->max_blocks)
		return fail(c, -EINVAL, "max_blocks %u: 1..%u (max_model_len / block_size)", b->max_blocks,
			    c->max_blocks);
	if (b->query_start[0] != 0 || b->query_start[S] != T)
		return fail(c, -EINVAL, "query_start must run from 0 to num_tokens (%u), got %u .. %u", T,
			    b->query_start[0], b->query_start[S]);
	for (uint32_t r = 0; r < T; r++) {
		if (b->tokens[r] < 0 || (uint32_t)b->tokens[r] >= c->cfg.vocab)
			return fail(c, -EINVAL, "row %u: token %d is not in the vocabulary (0..%u)", r, b->tokens[r],
				    c->cfg.vocab - 1);
		if (b->slot_mapping[r] < -1 || b->slot_mapping[r] >= (int64_t)nslots)
			return fail(c, -EINVAL, "row %u: slot %lld outside -1..%llu", r, (long long)b->slot_mapping[r],
				    (unsigned long long)nslots - 1);
	}
	for (uint32_t s = 0; s < S; s++) {
		uint32_t q0 = b->query_start[s], q1 = b->query_start[s + 1], ctx = b->context_lens[s];

		if (q1 <= q0 || q1 > T)
			return fail(c, -EINVAL, "sequence %u: query_start %u .. %u is empty or not increasing", s, q0,
				    q1);
		if (ctx > c->cfg.max_pos || ctx < q1 - q0)
			return fail(c, -EINVAL, "sequence %u: context length %u outside %u..%u", s, ctx, q1 - q0,
				    c->cfg.max_pos);
		for (uint32_t r = q0; r < q1; r++)
			if (b->positions[r] != (int32_t)(ctx - (q1 - r)))
				return fail(c, -EINVAL, "sequence %u row %u: position %d, the rows of a sequence are its "
					    "last positions up to context_lens - 1 (%u)", s, r, b->positions[r], ctx - 1);
		if ((ctx + c->bs - 1) / c->bs > b->max_blocks)
			return fail(c, -EINVAL, "sequence %u: a context of %u needs %u blocks, the tables have %u "
				    "columns", s, ctx, (ctx + c->bs - 1) / c->bs, b->max_blocks);
		for (uint32_t i = 0; i < (ctx + c->bs - 1) / c->bs; i++) {
			int32_t blk = b->block_tables[(uint64_t)s * b->max_blocks + i];

			if (blk < 0 || (uint32_t)blk >= c->nb)
				return fail(c, -EINVAL, "sequence %u: block %u of its context is %d, outside 0..%u", s,
					    i, blk, c->nb - 1);
		}
	}
	return 0;
}

/* The step's tables into host_tables (int32 stick rows); the runs of the attention into @runs. */
static uint64_t fill_tables(struct card *c, const struct spyre_runner_batch *b, uint32_t T, struct run *runs,
			    uint32_t *nruns, uint64_t *off_pos, uint64_t *off_slot, uint64_t *off_samp)
{
	uint32_t S = b->num_seqs, nr = 0;
	uint8_t *p = c->host_tables;
	uint64_t o = 0, pbt = ipitch(c->max_blocks);

	memset(p, 0, c->tables_bytes);
	for (uint32_t r = 0; r < T; r++) {
		/* the padding rows past num_tokens: token 0, position 0, no slot */
		int32_t slot = r < b->num_tokens ? (int32_t)b->slot_mapping[r] : -1;

		if (r >= b->num_tokens) {
			memcpy(p + 2 * ipitch(T) + 4ull * r, &slot, 4);
			continue;
		}

		memcpy(p + 4ull * r, &b->tokens[r], 4);
		memcpy(p + ipitch(T) + 4ull * r, &b->positions[r], 4);
		memcpy(p + 2 * ipitch(T) + 4ull * r, &slot, 4);
	}
	*off_pos = ipitch(T);
	*off_slot = 2 * ipitch(T);
	*off_samp = 3 * ipitch(T);
	for (uint32_t s = 0; s < S; s++) {
		int32_t last = (int32_t)b->query_start[s + 1] - 1;

		memcpy(p + *off_samp + 4ull * s, &last, 4);
	}
	o = *off_samp + ipitch(S);
	for (uint32_t s = 0; s < S;) {
		uint32_t rows = b->query_start[s + 1] - b->query_start[s], n = 1;

		while (s + n < S && b->query_start[s + n + 1] - b->query_start[s + n] == rows)
			n++;
		runs[nr] = (struct run){ .s0 = s, .n = n, .rows = rows, .ctx_off = o, .bt_off = o + ipitch(n) };
		for (uint32_t i = 0; i < n; i++) {
			int32_t ctx = (int32_t)b->context_lens[s + i];
			uint8_t *row = p + runs[nr].bt_off + (uint64_t)i * pbt;

			memcpy(p + o + 4ull * i, &ctx, 4);
			for (uint32_t j = 0; j < c->max_blocks; j++) {
				/* entries past the context are never read: -1 */
				int32_t v = j < b->max_blocks ? b->block_tables[(uint64_t)(s + i) * b->max_blocks + j] : -1;

				memcpy(row + 4ull * j, &v, 4);
			}
		}
		o = runs[nr].bt_off + (uint64_t)n * pbt;
		nr++;
		s += n;
	}
	*nruns = nr;
	return o;
}

static int step_launches(struct card *c, const struct spyre_runner_batch *b, uint32_t T, const struct run *runs,
			 uint32_t nruns, uint64_t off_pos, uint64_t off_slot, uint64_t off_samp)
{
	const struct spyre_model_config *cfg = &c->cfg;
	uint32_t S = b->num_seqs, hd = cfg->head_dim, qd = cfg->heads * hd, kvd = cfg->kv_heads * hd;
	spyre_dptr_t tb = c->tables;
	/* the MLP's output: not attention's under tensor parallelism (a peer may still read t, step_tp()) */
	spyre_dptr_t mo = c->tp > 1 ? c->u : c->t;
	struct spyre_kdesc d;
	int ret;

	d = kd(c, SPYRE_KOP_EMBEDDING, T, cfg->vocab, cfg->hidden);
	d.flags = SPYRE_KF_INDEXED;
	d.scale = cfg->embedding_multiplier;
	if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->wt.embed, tb, c->x }, 3)))
		return ret;
	for (uint32_t l = 0; l < cfg->layers; l++) {
		const struct spyre_dlayer *L = &c->wt.layer[l];

		d = kd(c, SPYRE_KOP_RMSNORM, T, cfg->hidden, 0);
		d.eps = cfg->norm_eps;
		if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->x, L->attn_norm, c->h }, 3)))
			return ret;
		d = kd(c, SPYRE_KOP_LINEAR, T, qd, cfg->hidden);
		d.out_group = hd;
		if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->h, L->wq, c->q }, 3)))
			return ret;
		d = kd(c, SPYRE_KOP_LINEAR, T, kvd, cfg->hidden);
		d.out_group = hd;
		if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->h, L->wk, c->k }, 3)) ||
		    (ret = launch(c, &d, (spyre_dptr_t[]){ c->h, L->wv, c->v }, 3)))
			return ret;
		for (int qk = 0; qk < 2; qk++) {
			d = kd(c, SPYRE_KOP_ROPE, T, 0, 0);
			d.flags = SPYRE_KF_INDEXED;
			d.heads = qk ? cfg->kv_heads : cfg->heads;
			d.head_dim = hd;
			d.max_pos = cfg->max_pos;
			ret = launch(c, &d, (spyre_dptr_t[]){ qk ? c->k : c->q, c->wt.rope_cos, c->wt.rope_sin, tb + off_pos,
							     qk ? c->k : c->q }, 5);
			if (ret)
				return ret;
		}
		d = kd(c, SPYRE_KOP_PAGED_KV_WRITE, T, 0, 0);
		d.kv_heads = cfg->kv_heads;
		d.head_dim = hd;
		d.block_size = c->bs;
		d.num_blocks = c->nb;
		if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->k, c->v, tb + off_slot, L->kc, L->vc }, 5)))
			return ret;
		for (uint32_t i = 0; i < nruns; i++) {
			const struct run *r = &runs[i];
			uint64_t row0 = b->query_start[r->s0];

			d = kd(c, SPYRE_KOP_PAGED_ATTENTION, (uint64_t)r->n * r->rows, r->n, 0);
			d.heads = cfg->heads;
			d.kv_heads = cfg->kv_heads;
			d.head_dim = hd;
			d.max_pos = cfg->max_pos;
			d.scale = cfg->attention_multiplier;
			d.block_size = c->bs;
			d.num_blocks = c->nb;
			ret = launch(c, &d, (spyre_dptr_t[]){ c->q + row0 * c->pq, L->kc, L->vc, tb + r->bt_off,
							     tb + r->ctx_off, c->a + row0 * c->pq }, 6);
			if (ret)
				return ret;
		}
		d = kd(c, SPYRE_KOP_LINEAR, T, cfg->hidden, qd);
		d.in_group = hd;
		if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->a, L->wo, c->t }, 3)) || (ret = all_reduce(c, c->t, T)))
			return ret;
		d = kd(c, SPYRE_KOP_ADD, T, cfg->hidden, 0);
		d.alpha = cfg->residual_multiplier;
		if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->x, c->t, c->x }, 3)))
			return ret;
		d = kd(c, SPYRE_KOP_RMSNORM, T, cfg->hidden, 0);
		d.eps = cfg->norm_eps;
		if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->x, L->mlp_norm, c->h }, 3)))
			return ret;
		d = kd(c, SPYRE_KOP_MLP, T, cfg->ffn, cfg->hidden);
		if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->h, L->wg, L->wu, L->wd, mo }, 5)) ||
		    (ret = all_reduce(c, mo, T)))
			return ret;
		d = kd(c, SPYRE_KOP_ADD, T, cfg->hidden, 0);
		d.alpha = cfg->residual_multiplier;
		if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->x, mo, c->x }, 3)))
			return ret;
	}
	/* the rows that sample: gathered, normed, projected, argmax; rank 0's alone (the LM head is not split) */
	if (c->rank)
		return 0;
	d = kd(c, SPYRE_KOP_EMBEDDING, S, T, cfg->hidden);
	d.flags = SPYRE_KF_INDEXED;
	if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->x, tb + off_samp, c->xs }, 3)))
		return ret;
	d = kd(c, SPYRE_KOP_RMSNORM, S, cfg->hidden, 0);
	d.eps = cfg->norm_eps;
	if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->xs, c->wt.final_norm, c->hs }, 3)))
		return ret;
	d = kd(c, SPYRE_KOP_LINEAR, S, cfg->vocab, cfg->hidden);
	if ((ret = launch(c, &d, (spyre_dptr_t[]){ c->hs, c->wt.lm_head, c->logits }, 3)))
		return ret;
	d = kd(c, SPYRE_KOP_ARGMAX, S, cfg->vocab, 0);
	return launch(c, &d, (spyre_dptr_t[]){ c->logits, c->argmax }, 2);
}

/* A step of @S decodes: @S sequences of one row each (the shape a graph replays). */
static bool is_decode(const struct spyre_runner_batch *b)
{
	return b->num_tokens == b->num_seqs;
}

/*
 * Capture the decode step of @S sequences (its tables laid out in
 * host_tables, @used bytes) as a graph: the tables' copy, the launches,
 * the tokens' copy back, all of fixed addresses. On failure the shape is
 * launched one by one for good (the step itself has run already).
 */
static void capture_decode(struct card *c, const struct spyre_runner_batch *b, uint32_t T, const struct run *runs,
			   uint32_t nruns, uint64_t used, uint64_t off_pos, uint64_t off_slot, uint64_t off_samp)
{
	uint32_t S = b->num_seqs, held0 = c->nheld;
	spyre_graph_t *g = NULL;
	spyre_graph_exec_t *x = NULL;
	char *err = c->err;
	int ret;

	c->err = NULL;		/* a failed capture is not the step's error */
	ret = spyre_stream_begin_capture(c->stream);
	if (!ret) {
		c->capturing = true;
		ret = spyre_memcpy_async(c->stream, c->tables, (uint64_t)(uintptr_t)c->host_tables, used,
					 SPYRE_MEMCPY_H2D);
		ret = ret ?: step_launches(c, b, T, runs, nruns, off_pos, off_slot, off_samp);
		ret = ret ?: spyre_memcpy_async(c->stream, (uint64_t)(uintptr_t)c->host_argmax, c->argmax, ipitch(S),
						SPYRE_MEMCPY_D2H);
		c->capturing = false;
		if (spyre_stream_end_capture(c->stream, &g))
			ret = ret ?: -EINVAL;
	}
	if (!ret)
		ret = spyre_graph_instantiate(g, &x);
	spyre_graph_destroy(g);
	c->err = err;
	if (ret) {
		while (c->nheld > held0)
			spyre_kernel_put(c->held[--c->nheld]);
		c->dec_failed[S] = true;
		return;
	}
	c->dec[S] = x;
}

/* The step's tokens and logits from @c's pinned buffers into the batch's. */
static void copy_out(const struct card *c, const struct spyre_runner_batch *b)
{
	if (b->argmax)
		memcpy(b->argmax, c->host_argmax, 4ull * b->num_seqs);
	if (b->logits) {
		float inv = 1.0f / c->cfg.logits_scaling;

		spyre_kernel_unpack(b->logits, c->host_logits, b->num_seqs, c->cfg.vocab, 0, c->dt);
		for (uint64_t i = 0; i < (uint64_t)b->num_seqs * c->cfg.vocab; i++)
			b->logits[i] *= inv;
	}
}

/* Enqueue the step's results back to @s's pinned buffers on its stream: the tokens (if @tokens) and logits. */
static int copy_back(struct card *c, struct card *s, const struct spyre_runner_batch *b, bool tokens)
{
	int ret;

	if (tokens && b->argmax &&
	    (ret = spyre_memcpy_async(s->stream, (uint64_t)(uintptr_t)s->host_argmax, s->argmax,
				      ipitch(b->num_seqs), SPYRE_MEMCPY_D2H)))
		return fail(c, ret, "copying the tokens back");
	if (b->logits &&
	    (ret = spyre_memcpy_async(s->stream, (uint64_t)(uintptr_t)s->host_logits, s->logits,
				      b->num_seqs * spyre_kernel_pitch(c->cfg.vocab, c->dt), SPYRE_MEMCPY_D2H)))
		return fail(c, ret, "copying the logits back");
	return 0;
}

/*
 * Wait for @stream, also after a failure (@ret, returned as it is), then
 * check what it ran into *@ss: 0, or the step's failure naming @rank (-1:
 * one card).
 */
static int stream_done(struct card *c, spyre_stream_t *stream, int rank, int ret, struct spyre_stream_stats *ss)
{
	int sret = spyre_stream_synchronize(stream);
	char who[32] = "";

	if (rank >= 0)
		snprintf(who, sizeof(who), " on rank %d", rank);
	if (!ret && sret)
		return fail(c, sret, "step%s", who);
	if (ret)
		return ret;
	sret = spyre_stream_get_stats(stream, ss);
	if (sret)
		return fail(c, sret, "stream statistics");
	if (ss->failed_launches)
		return fail(c, -EIO, "%llu kernels of the step faulted%s: %s",
			    (unsigned long long)ss->failed_launches, who, spyre_last_error());
	return 0;
}

/*
 * A step over the shards (Megatron's tensor parallelism, as
 * model/device.c's run_step_tp(): docs/model.md "Tensor parallel"): each
 * rank's tables copied to its card, its step recorded, then every rank's
 * kernels launched interleaved up to the next all-reduce mark, where
 * spyre_all_reduce() adds the ranks' partial sums of O (or of the MLP's
 * down projection) on every card, ordered by the cards (no host wait; each
 * rank's later kernels run after the copies into and out of its buffers);
 * rank 0 alone samples. Launched one by one: no launch graph holds the
 * collectives.
 */
static int step_tp(struct card *c, const struct spyre_runner_batch *b, struct spyre_runner_stats *st)
{
	struct spyre_kcache_stats k0[SPYRE_MODEL_TP_MAX], k1 = { .size = sizeof(k1) };
	spyre_stream_t *streams[SPYRE_MODEL_TP_MAX];
	spyre_dptr_t y[SPYRE_MODEL_TP_MAX];
	uint32_t at[SPYRE_MODEL_TP_MAX] = { 0 }, n = c->tp, nruns = 0, T, r;
	uint64_t t0 = mono_ns(), off_pos = 0, off_slot = 0, off_samp = 0, used, device_ns = 0, launches = 0, builds = 0;
	struct card *s0 = c->shard[0];
	struct run *runs = NULL;
	int ret;

	for (r = 0; r < n; r++) {
		c->shard[r]->err = c->err;
		c->shard[r]->errlen = c->errlen;
	}
	ret = check_batch(s0, b);
	if (ret)
		goto out;
	runs = calloc(b->num_seqs, sizeof(*runs));
	if (!runs) {
		ret = fail(c, -ENOMEM, "host memory");
		goto out;
	}
	T = rows_bucket(s0, b->num_tokens);
	for (r = 0; r < n && !ret; r++) {
		struct card *s = c->shard[r];

		streams[r] = s->stream;
		k0[r] = (struct spyre_kcache_stats){ .size = sizeof(k0[r]) };
		spyre_kcache_get_stats(s->kcache, &k0[r]);
		used = fill_tables(s, b, T, runs, &nruns, &off_pos, &off_slot, &off_samp);
		s->launches = 0;
		s->nrec = 0;
		ret = spyre_stream_reset_stats(s->stream);
		ret = ret ?: spyre_memcpy_async(s->stream, s->tables, (uint64_t)(uintptr_t)s->host_tables, used,
						SPYRE_MEMCPY_H2D);
		if (ret) {
			fail(c, ret, "copying the step's tables to rank %u", r);
			break;
		}
		s->recording = true;
		ret = step_launches(s, b, T, runs, nruns, off_pos, off_slot, off_samp);
		s->recording = false;
	}
	while (!ret) {
		bool more = true;

		/* every rank's kernels up to its next all-reduce, interleaved */
		while (more && !ret) {
			more = false;
			for (r = 0; r < n && !ret; r++) {
				struct card *s = c->shard[r];

				if (at[r] < s->nrec && s->rec[at[r]].d.op != OP_ALLREDUCE) {
					const struct rec *k = &s->rec[at[r]++];

					ret = launch(s, &k->d, k->slots, k->n);
					more = true;
				}
			}
		}
		if (ret || at[0] == s0->nrec)
			break;
		for (r = 0; r < n && !ret; r++) {
			if (at[r] == c->shard[r]->nrec || c->shard[r]->rec[at[r]].d.m != s0->rec[at[0]].d.m)
				ret = fail(c, -EINVAL, "rank %u's step does not match rank 0's", r);
			else
				y[r] = c->shard[r]->rec[at[r]++].slots[0];
		}
		ret = ret ?: spyre_all_reduce(c->comm, y, y, (size_t)T * c->ph / SPYRE_DT_SIZE(c->dt), c->dt,
					      SPYRE_RED_SUM, streams);
		if (ret && !(c->err && c->err[0]))
			fail(c, ret, "all-reduce over %u cards", n);
	}
	if (!ret)
		ret = copy_back(c, s0, b, true);
	/* every card done, also after a failure */
	for (r = 0; r < n; r++) {
		struct spyre_stream_stats ss = { .size = sizeof(ss) };

		ret = stream_done(c, streams[r], (int)r, ret, &ss);
		if (ret)
			continue;
		device_ns = ss.device_ns > device_ns ? ss.device_ns : device_ns;
		launches += c->shard[r]->launches;
		spyre_kcache_get_stats(c->shard[r]->kcache, &k1);
		builds += k1.misses - k0[r].misses;
	}
	if (ret)
		goto out;
	copy_out(s0, b);
	if (st) {
		st->host_ns = mono_ns() - t0;
		st->device_ns = device_ns;	/* the busiest card's */
		st->launches = launches;
		st->replays = 0;
		st->builds = builds;
	}
out:
	for (r = 0; r < n; r++) {
		c->shard[r]->err = NULL;
		c->shard[r]->errlen = 0;
	}
	free(runs);
	return ret;
}

static int card_step(void *self, const struct spyre_runner_batch *b, struct spyre_runner_stats *st, char *err,
		     size_t errlen)
{
	struct card *c = self;
	struct spyre_stream_stats ss = { .size = sizeof(ss) };
	struct spyre_kcache_stats k0 = { .size = sizeof(k0) }, k1 = { .size = sizeof(k1) };
	uint64_t t0 = mono_ns(), off_pos, off_slot, off_samp, used;
	uint32_t nruns, T;
	struct run *runs = NULL;
	spyre_graph_exec_t *replay = NULL;
	bool capture = false;
	int ret;

	c->err = err;
	c->errlen = errlen;
	if (err && errlen)
		err[0] = 0;
	if (!b) {
		ret = fail(c, -EINVAL, "NULL batch");
		goto out;
	}
	if (c->shard) {
		ret = step_tp(c, b, st);
		goto out;
	}
	ret = check_batch(c, b);
	if (ret)
		goto out;
	runs = calloc(b->num_seqs, sizeof(*runs));
	if (!runs) {
		ret = fail(c, -ENOMEM, "host memory");
		goto out;
	}
	T = rows_bucket(c, b->num_tokens);
	if (c->graphs && is_decode(b)) {
		replay = c->dec[b->num_seqs];
		capture = !replay && !c->dec_failed[b->num_seqs];
	}
	spyre_kcache_get_stats(c->kcache, &k0);
	used = fill_tables(c, b, T, runs, &nruns, &off_pos, &off_slot, &off_samp);
	c->launches = 0;
	ret = spyre_stream_reset_stats(c->stream);
	if (replay) {
		/* the step's copies and kernels in one submit */
		ret = ret ?: spyre_graph_launch(replay, c->stream);
		if (ret)
			fail(c, ret, "replaying the decode graph of %u sequences", b->num_seqs);
	} else {
		/* the step's one small copy, then its launches */
		ret = ret ?: spyre_memcpy_async(c->stream, c->tables, (uint64_t)(uintptr_t)c->host_tables, used,
						SPYRE_MEMCPY_H2D);
		if (ret)
			fail(c, ret, "copying the step's tables");
		else
			ret = step_launches(c, b, T, runs, nruns, off_pos, off_slot, off_samp);
	}
	/* a replay copies the tokens back itself */
	if (!ret)
		ret = copy_back(c, c, b, !replay);
	ret = stream_done(c, c->stream, -1, ret, &ss);
	if (ret)
		goto out;
	copy_out(c, b);
	/* the shape ran one by one: from now on a graph (capturing runs nothing) */
	if (capture)
		capture_decode(c, b, T, runs, nruns, used, off_pos, off_slot, off_samp);
	if (st) {
		st->host_ns = mono_ns() - t0;
		st->device_ns = ss.device_ns;	/* a replay's kernels have no records: 0 */
		st->launches = replay ? 0 : c->launches;
		st->replays = replay != NULL;
		spyre_kcache_get_stats(c->kcache, &k1);
		st->builds = k1.misses - k0.misses;
	}
out:
	free(runs);
	c->err = NULL;
	c->errlen = 0;
	return ret;
}

/*
 * Warm-up (vLLM on Spyre compiles its shapes before it serves): one dummy
 * step per sequence count 1..max_seqs (one row each: the decodes' shapes,
 * and the sampling kernels of every count) and one per row bucket above
 * those (sequences of up to max_position_embeddings rows), so that serving
 * builds no kernel but the attention of a prefill chunk of a new length.
 * The dummy rows write their K/V into block 0, which no request holds yet
 * (and every request writes a slot before it reads it).
 */
static int warm_up(struct card *c, char *err, size_t errlen)
{
	uint32_t T = c->max_tokens, mp = c->cfg.max_pos, mb = c->max_blocks;
	int32_t *tok = calloc(T, sizeof(int32_t)), *pos = calloc(T, sizeof(int32_t));
	int32_t *bt = calloc((size_t)T * mb, sizeof(int32_t)), *am = calloc(T, sizeof(int32_t));
	int64_t *slot = calloc(T, sizeof(int64_t));
	uint32_t *qs = calloc(T + 1, sizeof(uint32_t)), *ctx = calloc(T, sizeof(uint32_t));
	int ret = 0;

	if (!tok || !pos || !bt || !am || !slot || !qs || !ctx) {
		snprintf(err, errlen, "warm-up: out of host memory");
		ret = -ENOMEM;
	}
	for (uint32_t n = 1; !ret && n <= T; n = n < c->max_seqs ? n + 1 : rows_bucket(c, n + 1)) {
		/* n rows: n sequences of one row, or (above max_seqs) as few sequences as max_pos allows */
		uint32_t S = n <= c->max_seqs ? n : (n + mp - 1) / mp, r = 0;

		if (S > c->max_seqs)	/* more rows than max_num_seqs contexts hold: never asked for */
			break;
		for (uint32_t s = 0; s < S; s++) {
			uint32_t rows = n / S + (s < n % S);

			qs[s] = r;
			ctx[s] = rows;
			for (uint32_t i = 0; i < rows; i++, r++) {
				pos[r] = (int32_t)i;
				slot[r] = i % c->bs;
			}
		}
		qs[S] = n;
		ret = card_step(c, &(struct spyre_runner_batch){ .num_tokens = n, .tokens = tok, .positions = pos,
				.slot_mapping = slot, .num_seqs = S, .query_start = qs, .context_lens = ctx,
				.block_tables = bt, .max_blocks = mb, .argmax = am }, NULL, err, errlen);
		if (n == T)
			break;
	}
	free(tok);
	free(pos);
	free(bt);
	free(am);
	free(slot);
	free(qs);
	free(ctx);
	return ret;
}
