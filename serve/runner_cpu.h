/* SPDX-License-Identifier: MIT */
/*
 * runner_cpu.h - the CPU runner (runner.h) on model/ref_paged.h: the model's
 * paged step in host memory, the reference of the card runner.
 */
#ifndef SPYRE_SERVE_RUNNER_CPU_H
#define SPYRE_SERVE_RUNNER_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "runner.h"
#include "weights.h"

struct spyre_runner_cpu_opts {
	/*
	 * The model as spyre-generate loads it: @model_dir (config.json, and
	 * model.safetensors when present, else weights generated from @seed),
	 * or @config (a preset name or a config.json path; NULL: "tiny") with
	 * weights generated from @seed.
	 */
	const char *model_dir;
	const char *config;
	uint64_t seed;			/* 0: 1, as spyre-generate's default */
	unsigned int act_dtype;		/* SPYRE_REF_* (ref.h) */
	uint32_t num_blocks;		/* 0: enough for 4 sequences of the whole context */
	uint32_t block_size;		/* 0: 64 */
};

/* 0 and *@out (free with spyre_runner_free), or -errno with a message. */
/*
 * The model of @o (model_dir, config, seed; the rest ignored) as the CPU
 * runner loads it, for another runner (the card's): 0, or -errno with @err.
 * @w is allocated (spyre_model_weights_free) unless it failed.
 */
int spyre_serve_model_load(const struct spyre_runner_cpu_opts *o, struct spyre_model_config *cfg,
			   struct spyre_model_weights *w, char *err, size_t errlen);
int spyre_runner_cpu_new(const struct spyre_runner_cpu_opts *o, struct spyre_runner **out, char *err,
			 size_t errlen);
/*
 * The same over a config and weights the caller keeps (they must outlive the
 * runner; with a storage dtype a rounded copy is made).
 */
int spyre_runner_cpu_new_from(const struct spyre_model_config *cfg, const struct spyre_model_weights *w,
			      unsigned int act_dtype, uint32_t num_blocks, uint32_t block_size,
			      struct spyre_runner **out, char *err, size_t errlen);

#endif /* SPYRE_SERVE_RUNNER_CPU_H */
