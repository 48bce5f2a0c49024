/* SPDX-License-Identifier: MIT */
/*
 * device.h - the model on a spyre card: weights, KV caches and activations
 * resident in device memory, every op a kernel of libspyre's kernel library
 * (spyre_kernels.h), prefill then greedy decode with argmax on the device.
 *
 * A decode step moves only the new token id to the device, as a launch
 * scalar of the embedding kernel; the next token comes back as 4 bytes.
 *
 * Four dispatch configurations, the first three the structure of Spyre's
 * published result:
 *   SPYRE_DISPATCH_BUILD  (a) every kernel generated and uploaded on every
 *                             step (graph building on the data path);
 *   SPYRE_DISPATCH_PATCH  (b) kernels cached, launched through three-step
 *                             address patching (absolute operands);
 *   SPYRE_DISPATCH_FAST   (c) kernels cached, patch-free launches
 *                             (slot-relative operands);
 *   SPYRE_DISPATCH_GRAPH  (d) the decode step captured once into launch
 *                             graphs and replayed, one SUBMIT a step, with
 *                             device-side feedback: the token is the last
 *                             argmax, position and context length device
 *                             int32 that the step advances itself, the KV
 *                             caches read through the paged kernels; the
 *                             host waits every sync_every steps (prefill as
 *                             c, through the paged kernels).
 */
#ifndef SPYRE_MODEL_DEVICE_H
#define SPYRE_MODEL_DEVICE_H

#include <stdint.h>

#include "config.h"
#include "weights.h"
#include "spyre.h"
#include "spyre_kernels.h"

enum spyre_dispatch {
	SPYRE_DISPATCH_BUILD = 0,
	SPYRE_DISPATCH_PATCH = 1,
	SPYRE_DISPATCH_FAST = 2,
	SPYRE_DISPATCH_GRAPH = 3,
};

struct spyre_dmodel_opts {
	uint32_t dtype;		/* SPYRE_DT_FP16 (default when 0 is not meant: use FP32 explicitly), DL16, BF16, FP32 */
	uint32_t cores;		/* 0: all the device has */
	enum spyre_dispatch dispatch;
	uint32_t sync_every;	/* dispatch d: decode steps between two waits of the host, 1..256 (0: 16) */
};

/* What one prefill or decode step cost. */
struct spyre_step_stats {
	uint64_t host_ns;	/* wall time of the step on the host (enqueue + wait) */
	uint64_t dispatch_ns;	/* host time until the step's last launch was enqueued */
	uint64_t device_ns;	/* modeled device time, sum over the step's launches (tensor parallel: the busiest card's) */
	uint64_t device_ns_sum;	/* tensor parallel: every card's modeled time added up (one card: device_ns) */
	uint64_t launches;
	double utilization;	/* core busy cycles / (device cycles x cores), over the step */
	uint64_t h2d_bytes;	/* host -> device copies */
	uint64_t arg_bytes;	/* launch argument blocks written (slot addresses, scalars) */
	uint64_t upload_bytes;	/* program bytes uploaded (patched copies, new programs) */
	uint64_t d2h_bytes;
	uint64_t kernel_hits, kernel_misses;
	uint64_t est_ns;	/* the kernel library's estimate, sum over the step */
};

struct spyre_dmodel;

/*
 * Upload @w for @cfg. Fails with a message naming the cause in @err (the
 * model does not fit device memory: how much it needs and has).
 */
int spyre_dmodel_new(spyre_device_t *dev, const struct spyre_model_config *cfg,
		     const struct spyre_model_weights *w, const struct spyre_dmodel_opts *opts,
		     struct spyre_dmodel **out, char *err, size_t errlen);
void spyre_dmodel_free(struct spyre_dmodel *dm);

/*
 * Tensor parallelism (Megatron's) over @tp cards of this process, rank r on
 * @devs[r]: each card holds its shard of the attention heads (Wq, Wk, Wv
 * split by output rows: column-parallel; Wo by input columns:
 * row-parallel) with its KV heads' caches, and of the MLP (gate and up
 * column-parallel, down row-parallel); embeddings and norms are replicated,
 * the LM head is rank 0's alone (not split: rank 0 computes the logits and
 * the argmax). Per layer one spyre_all_reduce() after O and one after the
 * down projection; each card's kernels on its own stream. @tp must divide
 * the heads, the KV heads and intermediate_size; dispatch d is refused.
 * @tp 1 is spyre_dmodel_new() on @devs[0]. The returned model is used as
 * any other (prefill, decode, reset, set_dispatch: a, b, c; its kernel
 * cache is rank 0's); a step's statistics sum the cards' launches and
 * bytes, device_ns is the busiest card's, device_ns_sum all of them.
 */
int spyre_dmodel_new_tp(spyre_device_t *const *devs, uint32_t tp, const struct spyre_model_config *cfg,
			const struct spyre_model_weights *w, const struct spyre_dmodel_opts *opts,
			struct spyre_dmodel **out, char *err, size_t errlen);

/*
 * Whether @cfg in @dtype fits the memory of @dev (weights, KV caches for
 * max_pos positions, activations, work): 0, or -ENOMEM with a message giving
 * both sizes. Checked before any weight is generated or read. Under tensor
 * parallelism @cfg is one card's shard (spyre_model_config_tp()) of @tp
 * cards; 1 for the whole model on one card.
 */
int spyre_dmodel_check_fit(spyre_device_t *dev, const struct spyre_model_config *cfg, uint32_t dtype,
			   uint32_t tp, char *err, size_t errlen);

/*
 * Switch the dispatch configuration (the weights and caches stay; between d
 * and the others, whose caches have different layouts, the caches are
 * emptied as by spyre_dmodel_reset()).
 */
int spyre_dmodel_set_dispatch(struct spyre_dmodel *dm, enum spyre_dispatch dispatch);
/* Empty the KV caches: the next prefill starts at position 0. */
int spyre_dmodel_reset(struct spyre_dmodel *dm);

/*
 * Prefill @n tokens at positions 0..n-1; *next = the greedy next token
 * (argmax on the device). @logits (optional, [vocab]) gets the last
 * position's logits (divided by logits_scaling), @st (optional) the cost.
 */
int spyre_dmodel_prefill(struct spyre_dmodel *dm, const int32_t *tokens, uint32_t n, int32_t *next,
			 float *logits, struct spyre_step_stats *st);
/*
 * One decode step at the next position. Dispatch d replays the step: a
 * @token other than the last step's next token is copied over it first.
 */
int spyre_dmodel_decode(struct spyre_dmodel *dm, int32_t token, int32_t *next, float *logits,
			struct spyre_step_stats *st);
/*
 * @n greedy decode steps from the last step's next token: @next[i] the
 * token of step i, @logits (optional, [n x vocab]) and @st (optional, [n])
 * as for one step. a, b, c: step by step, each token back through the host.
 * d: device-side feedback, the host enqueues up to sync_every replays
 * before it waits; the statistics of a step are the whole call's,
 * divided evenly among its @n steps.
 */
int spyre_dmodel_decode_steps(struct spyre_dmodel *dm, uint32_t n, int32_t *next, float *logits,
			      struct spyre_step_stats *st);
/* Dispatch d's wait interval K (1..256): -EINVAL with a message for another. */
int spyre_dmodel_set_sync_every(struct spyre_dmodel *dm, uint32_t k);
uint32_t spyre_dmodel_pos(const struct spyre_dmodel *dm);
/* The last error's detail (also in spyre_last_error() for library failures). */
const char *spyre_dmodel_error(const struct spyre_dmodel *dm);
/* The kernel cache (stats for the hit rate). */
spyre_kcache_t *spyre_dmodel_kcache(struct spyre_dmodel *dm);

/*
 * Modeled device time of one prefill of @prompt tokens and one decode step at
 * position @prompt, without a device and without executing: the kernel
 * library's cost-model estimate of every kernel of the step (used for shapes
 * like granite-3.3-8b that do not fit the emulator). 0, or -1 with @err.
 */
int spyre_dmodel_estimate(const struct spyre_model_config *cfg, uint32_t dtype, uint32_t cores,
			  uint32_t prompt, uint64_t *prefill_ns, uint64_t *decode_ns, uint64_t *weight_bytes,
			  char *err, size_t errlen);

#endif /* SPYRE_MODEL_DEVICE_H */
