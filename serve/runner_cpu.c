// SPDX-License-Identifier: MIT
/*
 * runner_cpu.c - the CPU runner (runner_cpu.h): struct spyre_runner over
 * model/ref_paged.h's step and a host paged KV cache.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "errf.h"
#include "ref_paged.h"
#include "runner_cpu.h"

struct runner_cpu {
	struct spyre_runner r;
	struct spyre_model_config cfg;
	struct spyre_model_weights w;	/* owned when own_weights */
	bool own_weights;
	struct spyre_ref *ref;
	struct spyre_paged_kv kv;
};


static int cpu_step(void *self, const struct spyre_runner_batch *b, struct spyre_runner_stats *st, char *err,
		    size_t errlen)
{
	struct runner_cpu *rc = self;
	struct spyre_paged_batch pb = {
		.num_tokens = b->num_tokens, .tokens = b->tokens, .positions = b->positions,
		.slot_mapping = b->slot_mapping, .num_seqs = b->num_seqs, .query_start = b->query_start,
		.context_lens = b->context_lens, .block_tables = b->block_tables, .max_blocks = b->max_blocks,
	};
	struct timespec t0, t1;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = spyre_ref_paged_step(rc->ref, &rc->kv, &pb, b->logits, b->argmax, err, errlen);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (st) {
		st->host_ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t1.tv_nsec -
			      (uint64_t)t0.tv_nsec;
		st->device_ns = 0;
		st->launches = 0;
	}
	return ret;
}

static void cpu_free(void *self)
{
	struct runner_cpu *rc = self;

	if (!rc)
		return;
	spyre_paged_kv_free(&rc->kv);
	spyre_ref_free(rc->ref);
	if (rc->own_weights)
		spyre_model_weights_free(&rc->w);
	free(rc);
}

static const struct spyre_runner_ops cpu_ops = {
	.step = cpu_step,
	.free = cpu_free,
};

/* Set up @rc over its cfg and w. */
static int init(struct runner_cpu *rc, unsigned int act_dtype, uint32_t num_blocks, uint32_t block_size,
		char *err, size_t errlen)
{
	const struct spyre_model_config *c = &rc->cfg;
	int ret;

	if (!spyre_ref_round_fn(act_dtype))
		return errfc(err, errlen, -EINVAL, "unknown activation dtype %u", act_dtype);
	if (!block_size)
		block_size = 64;
	if (block_size > 4096)
		return errfc(err, errlen, -EINVAL, "block size %u is above 4096", block_size);
	if (!num_blocks)
		num_blocks = 4 * ((c->max_pos + block_size - 1) / block_size);
	rc->ref = spyre_ref_new(c, &rc->w, act_dtype);
	if (!rc->ref)
		return errfc(err, errlen, -ENOMEM, "the reference model could not be set up (config or memory)");
	ret = spyre_paged_kv_alloc(&rc->kv, c, num_blocks, block_size);
	if (ret)
		return errfc(err, errlen, ret, "the KV cache of %u blocks of %u: %s", num_blocks, block_size,
			     ret == -ENOMEM ? "out of memory" : "too large");
	rc->r.ops = &cpu_ops;
	rc->r.self = rc;
	rc->r.vocab = c->vocab;
	rc->r.block_size = block_size;
	rc->r.num_blocks = num_blocks;
	rc->r.max_model_len = c->max_pos;
	rc->r.eos_token_id = (int32_t)c->eos_token_id;
	rc->r.name = "cpu";
	return 0;
}

int spyre_runner_cpu_new_from(const struct spyre_model_config *cfg, const struct spyre_model_weights *w,
			      unsigned int act_dtype, uint32_t num_blocks, uint32_t block_size,
			      struct spyre_runner **out, char *err, size_t errlen)
{
	struct runner_cpu *rc;
	int ret;

	*out = NULL;
	if (spyre_model_config_validate(cfg, err, errlen))
		return -EINVAL;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return errfc(err, errlen, -ENOMEM, "out of memory");
	rc->cfg = *cfg;
	rc->w = *w;
	ret = init(rc, act_dtype, num_blocks, block_size, err, errlen);
	if (ret) {
		cpu_free(rc);
		return ret;
	}
	*out = &rc->r;
	return 0;
}

static bool exists(const char *path)
{
	struct stat st;

	return !stat(path, &st);
}

int spyre_serve_model_load(const struct spyre_runner_cpu_opts *o, struct spyre_model_config *cfg,
			   struct spyre_model_weights *w, char *err, size_t errlen)
{
	char path[4200];

	memset(w, 0, sizeof(*w));
	if (o->model_dir) {
		snprintf(path, sizeof(path), "%s/config.json", o->model_dir);
		if (spyre_model_config_load(path, cfg, err, errlen))
			return -EINVAL;
	} else if (spyre_model_config_preset(o->config ? o->config : "tiny", cfg) &&
		   spyre_model_config_load(o->config, cfg, err, errlen)) {
		return -EINVAL;
	}
	if (spyre_model_bytes(cfg, 4) > (2ull << 30))
		return errfc(err, errlen, -E2BIG, "the model's fp32 weights are above the 2 GiB host limit");
	snprintf(path, sizeof(path), "%s/model.safetensors", o->model_dir ? o->model_dir : "");
	if (o->model_dir && exists(path)) {
		if (spyre_model_weights_load_file(cfg, path, w, err, errlen))
			return -EINVAL;
	} else if (spyre_model_weights_random(cfg, o->seed ? o->seed : 1, w)) {
		return errfc(err, errlen, -ENOMEM, "out of memory for the weights");
	}
	return 0;
}

int spyre_runner_cpu_new(const struct spyre_runner_cpu_opts *o, struct spyre_runner **out, char *err,
			 size_t errlen)
{
	struct runner_cpu *rc;
	int ret;

	*out = NULL;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return errfc(err, errlen, -ENOMEM, "out of memory");
	ret = spyre_serve_model_load(o, &rc->cfg, &rc->w, err, errlen);
	if (ret)
		goto bad;
	rc->own_weights = true;
	ret = init(rc, o->act_dtype, o->num_blocks, o->block_size, err, errlen);
	if (ret)
		goto bad;
	*out = &rc->r;
	return 0;
bad:
	cpu_free(rc);
	return ret;
}
