/* SPDX-License-Identifier: MIT */
/*
 * spyre_kernels.h - libspyre's kernel library: the programs a framework
 * launches for the ops of a transformer, generated for a given op, shape,
 * dtype and core count, and kept in a kernel cache.
 *
 *	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_LINEAR,
 *				 .dtype = SPYRE_DT_FP16, .m = 1, .n = 4096, .k = 4096 };
 *	spyre_kernel_t *k;
 *	spyre_kernel_get(cache, &d, &k);		// built once per key, then a hit
 *	spyre_kernel_launch(stream, k, (spyre_dptr_t[]){ x, w, y }, 3, NULL, 0);
 *
 * Every kernel reads and writes tensors in device memory in the **stick
 * layout**: a matrix of rows x cols elements is rows rows, each padded to a
 * whole number of 128-byte sticks (pitch = spyre_kernel_pitch(cols, dtype));
 * a vector is one row; a batch of matrices is their rows one after another.
 * Padding bytes are never read as data and their content after a kernel is
 * unspecified. A **grouped** matrix (group g) splits each row into cols/g
 * groups of g elements, each group padded to whole sticks: that is how the
 * heads of attention are laid out (group = head_dim), so every head starts on
 * a stick whatever head_dim is.
 *
 * The slots (tensor arguments) of each op, in order, and its scalars are
 * listed with enum spyre_kop; spyre_kernel_get_info() gives their byte sizes.
 * Low-precision dtypes (fp16, bf16, DLFloat16) are stored as such and
 * computed in fp32 inside the core (matmuls accumulate in fp32); each
 * kernel's output is rounded once to the dtype.
 *
 * Weights: LINEAR reads W as [k x n] (the transpose of a PyTorch / Hugging
 * Face weight) or, with SPYRE_KF_WEIGHT_NK, as the framework keeps it,
 * W [n x k]; spyre_kernel_pack_weight() writes any weight slot (LINEAR's W
 * and bias, the MLP's Wg, Wu, Wd) in the layout its kernel reads, from a
 * host matrix in either orientation and any float dtype.
 *
 * Threads: a cache may be used from several threads; a kernel may be
 * launched on several streams at once (kernels keep no state on the device
 * besides their program). Ops that need device scratch memory have a last
 * slot, "work" (spyre_kernel_info.work_bytes): spyre_kernel_launch() binds
 * it itself when the caller passes the other slots only (since 0.4), from a
 * buffer the cache keeps per stream and reuses; a caller may still pass its
 * own work buffer as the last slot.
 */
#ifndef LIBSPYRE_SPYRE_KERNELS_H
#define LIBSPYRE_SPYRE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "spyre.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The ops. Slots in order; "[r x c]" is a stick-layout matrix. */
enum spyre_kop {
	SPYRE_KOP_NONE = 0,
	/**
	 * @SPYRE_KOP_LINEAR: Y = X W (+ bias). Slots X [m x k] (grouped by
	 * @in_group if set), W [k x n] (the transpose of a Hugging Face
	 * weight), bias [n] fp32 if SPYRE_KF_BIAS, Y [m x n]. With
	 * @out_group, Y, W and bias are grouped by it (so a head's columns
	 * start on a stick in all three). With SPYRE_KF_WEIGHT_NK, W is
	 * [n x k] instead (nn.Linear's weight: row j holds output j's k
	 * inputs, its columns grouped by @in_group like X's; @out_group then
	 * groups Y and bias only); the kernel transposes W's tiles in the
	 * scratchpad. Strategy: SPYRE_KSTRAT_SPLIT_M / _SPLIT_N.
	 */
	SPYRE_KOP_LINEAR = 1,
	/** @SPYRE_KOP_BMM: Y[b] = A[b] B[b]. Slots A [batch*m x k], B [batch*k x n], Y [batch*m x n]. */
	SPYRE_KOP_BMM = 2,
	/**
	 * @SPYRE_KOP_MLP: Y = act(X Wg) * (X Wu) Wd (SwiGLU, act = SiLU) or
	 * Y = GELU(X Wu) Wd (SPYRE_KF_GELU: no Wg slot). Slots X [m x k],
	 * Wg [k x n], Wu [k x n], Wd [n x k], Y [m x k]; work when unfused
	 * (SPYRE_KSTRAT_UNFUSED: each matmul a separate pass through device memory).
	 */
	SPYRE_KOP_MLP = 3,
	/** @SPYRE_KOP_SOFTMAX: row-wise. Slots X [m x n], Y [m x n] (+ work for SPYRE_KSTRAT_NAIVE). */
	SPYRE_KOP_SOFTMAX = 4,
	/** @SPYRE_KOP_RMSNORM: Y = X / sqrt(mean(X^2) + eps) * w. Slots X [m x n], w [n], Y [m x n]. */
	SPYRE_KOP_RMSNORM = 5,
	/** @SPYRE_KOP_LAYERNORM: Y = (X - mean) / sqrt(var + eps) * w + b. Slots X, w [n], b [n], Y. */
	SPYRE_KOP_LAYERNORM = 6,
	/**
	 * @SPYRE_KOP_ROPE: rotary embedding, Hugging Face rotate_half convention,
	 * on m tokens x @heads heads of @head_dim (even; grouped by head_dim) at
	 * positions pos0 .. pos0+m-1. Slots X [m x heads*head_dim], cos
	 * [max_pos x head_dim], sin [max_pos x head_dim] (fp32 tables,
	 * spyre_kernel_rope_tables()), Y [m x heads*head_dim] (may be X: in
	 * place). Scalar 0: pos0 * pitch of a table row
	 * (spyre_kernel_rope_scalar()): one program serves every pos0 with
	 * pos0 + m <= max_pos (past it the table reads fault, MEM_RANGE).
	 */
	SPYRE_KOP_ROPE = 7,
	/**
	 * @SPYRE_KOP_ADD: Y = A + alpha * B (alpha 0 is taken as 1).
	 * @SPYRE_KOP_MUL: Y = A * B. Slots A, B, Y [m x n].
	 */
	SPYRE_KOP_ADD = 8,
	SPYRE_KOP_MUL = 9,
	/** @SPYRE_KOP_SILU, @SPYRE_KOP_GELU (and @SPYRE_KOP_RELU, below): Y = f(X). Slots X, Y [m x n]. */
	SPYRE_KOP_SILU = 10,
	SPYRE_KOP_GELU = 11,
	/**
	 * @SPYRE_KOP_ATTENTION: causal scaled-dot-product attention with
	 * grouped-query heads and a KV cache in device memory.
	 * Slots Q [m x heads*head_dim], K [m x kv_heads*head_dim],
	 * V [m x kv_heads*head_dim] (the new tokens; all grouped by head_dim),
	 * Kc, Vc [kv_heads*max_pos x head_dim] (the caches: row kvh*max_pos+p
	 * is position p of KV head kvh), O [m x heads*head_dim] (grouped).
	 * The new K and V rows are written into the caches at positions
	 * pos0 .. pos0+m-1, then every query attends to positions 0 ..
	 * its own. Prefill: m tokens at pos0 = 0 (m is in the key, pos0 is
	 * fixed at 0; m <= max_pos), no scalars. Decode (SPYRE_KF_DECODE):
	 * m = 1 at any pos0 < max_pos with one program: its 36 scalars (row
	 * and mask offsets, loop counts) come from
	 * spyre_kernel_attention_scalars(); its time grows with pos0, not
	 * with max_pos. Scores are scaled by @scale (0: 1/sqrt(head_dim)).
	 * The caches must be zero-filled before their first use
	 * (spyre_memset_async()): rows past the position are read (masked),
	 * so they must hold finite values.
	 */
	SPYRE_KOP_ATTENTION = 12,
	/**
	 * @SPYRE_KOP_EMBEDDING: Y[i] = table[token_i] * @scale (0: 1).
	 * Slots table [n(vocab) x k(hidden)], Y [m x k]. Scalars: m token
	 * row offsets (spyre_kernel_embedding_scalars()): token ids go to
	 * the device as launch scalars, never as a copy. m <= 198 per launch.
	 */
	SPYRE_KOP_EMBEDDING = 13,
	/** @SPYRE_KOP_ARGMAX: per row of X [m x n]: Y [m] int32 index of its maximum (lowest on ties). */
	SPYRE_KOP_ARGMAX = 14,
	/**
	 * @SPYRE_KOP_TRANSPOSE: relayout Y [n x m] = X [m x n]^T, rows split
	 * across cores. SPYRE_KSTRAT_VIA_MEMORY: each core writes its part
	 * to device memory and reads back the part it needs (through work);
	 * SPYRE_KSTRAT_RING: the cores exchange the parts on chip (ring).
	 */
	SPYRE_KOP_TRANSPOSE = 15,
	/** @SPYRE_KOP_RELU: Y = max(X, 0). Slots X, Y [m x n] (since 0.4). */
	SPYRE_KOP_RELU = 16,
	/**
	 * @SPYRE_KOP_BINARY: Y = A fn B, fn = @fn (enum spyre_kfn: ADD, SUB,
	 * MUL, DIV, MAX, MIN); for ADD and SUB B is scaled by @alpha (0: 1),
	 * as torch.add's alpha; the other fns take an @alpha of 1 as 0. Slots A [m x n], B, Y [m x n]. B is [m x n],
	 * or with SPYRE_KF_BCAST_ROW one row [n] used for every row (a bias),
	 * or with SPYRE_KF_BCAST_COL a vector [m], element r for every column
	 * of row r (x * rsqrt(mean) of RMSNorm). SPYRE_KF_REVERSE computes
	 * Y = B fn A (B still the broadcast one); alpha then scales A, the
	 * second operand of fn: Y = B - alpha A (torch.rsub). MAX and MIN
	 * propagate NaN (torch.maximum, torch.minimum). Since 0.5.
	 */
	SPYRE_KOP_BINARY = 17,
	/**
	 * @SPYRE_KOP_UNARY: Y = fn(X), fn = @fn (EXP, LOG, TANH, SIGMOID,
	 * RSQRT, SQRT, RECIP, ABS, GELU_TANH, SCALE: Y = @alpha X + @beta,
	 * POW: Y = X ^ @alpha). Slots X, Y [m x n]. Since 0.5.
	 */
	SPYRE_KOP_UNARY = 18,
	/**
	 * @SPYRE_KOP_WHERE: Y = C ? A : B elementwise. Slots C [m x n] int8
	 * (PyTorch's bool: 0 false, anything else true; dtype SPYRE_DT_INT8's
	 * stick layout), A [m x n] unless SPYRE_KF_SCALAR_A (A is @alpha),
	 * B [m x n] unless SPYRE_KF_SCALAR_B (B is @beta), Y [m x n].
	 * masked_fill(X, C, v) is WHERE with SPYRE_KF_SCALAR_A, alpha v, B X.
	 * @alpha and @beta may be +-infinity (converted to dtype: fp16 past
	 * 65504 is inf); the side not taken never reaches Y, not even a NaN.
	 * Since 0.5.
	 */
	SPYRE_KOP_WHERE = 19,
	/**
	 * @SPYRE_KOP_REDUCE: per row of X [m x n], fn = @fn (SUM, MEAN, MAX):
	 * Y [m] (one row of m elements, dtype; accumulated in fp32). Since 0.5.
	 */
	SPYRE_KOP_REDUCE = 20,
	/**
	 * @SPYRE_KOP_TRIL: X [m x n] taken as m / @k matrices of @k rows;
	 * Y = X where column c of row r (r counted within its matrix) has
	 * c - r <= @alpha (the diagonal offset, an integer), else 0; with
	 * @fn SPYRE_KFN_TRIU: where c - r >= @alpha (fn 0 is TRIL). @k must
	 * divide m. Slots X, Y [m x n]. Since 0.5.
	 */
	SPYRE_KOP_TRIL = 21,
	/**
	 * @SPYRE_KOP_PERMUTE: the contiguous copy of a view with two middle
	 * dimensions swapped: X dense [batch x m x n x k] -> Y dense
	 * [batch x n x m x k] (PyTorch's contiguous layout, not the stick
	 * layout: rows of k elements packed). k == 1 is a batched transpose
	 * of [m x n]; otherwise k * element size must be a multiple of 128
	 * bytes (rows of whole sticks; -EINVAL else). @batch 0 is 1. Y's
	 * bytes after the tensor, in its last stick, are kept. With k 1
	 * and m or n not whole sticks, n <= 65535 and one matrix (X and Y)
	 * must fit the scratchpad (-EINVAL naming it else). Slots X, Y (their
	 * bytes rounded up to a stick). Since 0.5.
	 */
	SPYRE_KOP_PERMUTE = 22,
	/**
	 * @SPYRE_KOP_CAT: Y [m x k*n] = [X0 | X1 | ... | X(k-1)] along the
	 * columns, k (2..8) pieces of [m x n] each, n <= 65535. Slots X0 ..
	 * X(k-1), Y (stick layout). Since 0.5.
	 */
	SPYRE_KOP_CAT = 23,
	/**
	 * The paged KV cache (since 0.6; docs/kernels.md, "## Paged
	 * attention"). A layer's cache is K and V of [@num_blocks x
	 * @block_size x kv_heads x head_dim] (@block_size 0: 64): slot s =
	 * block * block_size + offset is row s of a [num_blocks*block_size x
	 * kv_heads*head_dim] matrix grouped by head_dim. Tables are int32
	 * stick-layout rows in device memory, written by the host once per
	 * step (one small copy): the programs read them (ISA LDX), so one
	 * program serves every step of its shape, with no scalars. An entry
	 * outside its range ends the launch with the engine fault bad-index
	 * (spyre_last_error() names it), never an access outside the slots.
	 *
	 * @SPYRE_KOP_PAGED_KV_WRITE: row r of K and V [m x kv_heads*head_dim]
	 * (grouped) goes to slot slots[r] of the caches; -1 rows are skipped
	 * (padding). Slots K, V, slots [m] int32, Kc, Vc.
	 */
	SPYRE_KOP_PAGED_KV_WRITE = 24,
	/**
	 * @SPYRE_KOP_PAGED_ATTENTION: causal GQA attention of @n sequences of
	 * m/@n query rows each (m a multiple of n) over their cached keys:
	 * sequence s's rows are its last m/n positions, ctx_lens[s] - m/n ..
	 * ctx_lens[s] - 1; its keys and values are read through
	 * block_tables[s] (entry i: the block of positions i*block_size ..
	 * (i+1)*block_size - 1). Batched decode: m = n (one row each, each
	 * sequence at its own length); a prefill chunk: n = 1, m rows
	 * attending to the cached prefix and causally to themselves (write
	 * the chunk's K/V first, PAGED_KV_WRITE). Slots Q [m x
	 * heads*head_dim] (grouped), Kc, Vc (the caches), block_tables [n x
	 * max_blocks] int32 (max_blocks = ceil(@max_pos / block_size)),
	 * ctx_lens [n] int32 (m/n <= ctx_lens[s] <= @max_pos), O [m x
	 * heads*head_dim]. @scale as ATTENTION's. Time grows with the
	 * context lengths, not with max_pos. Rows of a last block past the
	 * context are read and masked: the caches must hold finite values
	 * (zero-fill them once before first use).
	 */
	SPYRE_KOP_PAGED_ATTENTION = 25,
	/**
	 * @SPYRE_KOP_IADD: Y = X + @alpha on int32 [m x n] (stick-layout rows
	 * of int32), @alpha an integer (|alpha| < 2^24, exact in a float), the
	 * sum saturating at the int32 limits; Y may be X (in place). Slots X, Y. No
	 * scalars: the counters of a step that runs on the card without the
	 * host, e.g. a decode position and a context length advanced by 1 after
	 * each step of a replayed graph. n <= 65535 and two rows must fit the
	 * scratchpad. The tensors are always int32; @dtype is left 0 (any other
	 * value, SPYRE_DT_INT32 included, is refused with a detail saying so).
	 * Since 0.7.
	 */
	SPYRE_KOP_IADD = 26,
	SPYRE_KOP_COUNT
};

/**
 * Strategies; 0 (SPYRE_KSTRAT_AUTO) lets the library choose: LINEAR and BMM
 * build every strategy and keep the cost model's fastest; MLP, SOFTMAX and
 * TRANSPOSE take their preferred one (fused, scratchpad, ring) and fall back
 * to the cost model's pick of the others when it cannot be built.
 */
enum spyre_kstrategy {
	SPYRE_KSTRAT_AUTO = 0,
	SPYRE_KSTRAT_SPLIT_M = 1,	/**< LINEAR/BMM: cores take row blocks, each streams all of W */
	SPYRE_KSTRAT_SPLIT_N = 2,	/**< LINEAR/BMM: cores take column blocks of W (X is read by all) */
	SPYRE_KSTRAT_FUSED = 3,		/**< MLP: one program, intermediates stay in the scratchpad */
	SPYRE_KSTRAT_UNFUSED = 4,	/**< MLP: gate, up, act*mul, down as separate passes via device memory */
	SPYRE_KSTRAT_NAIVE = 5,		/**< SOFTMAX: max, exp, sum, divide, each a pass through device memory */
	SPYRE_KSTRAT_SCRATCHPAD = 6,	/**< SOFTMAX: rows stay in the scratchpad, one pass */
	SPYRE_KSTRAT_VIA_MEMORY = 7,	/**< TRANSPOSE through device memory */
	SPYRE_KSTRAT_RING = 8,		/**< TRANSPOSE on chip, ring shuffle between cores */
};

/**
 * spyre_kdesc.fn: the function of BINARY, UNARY, REDUCE and TRIL (since 0.5).
 * The ops of 0.5 refuse (-EINVAL, a detail naming it) a field they do not
 * use that is not zero: fn, alpha, beta, k, batch (PERMUTE's), heads ...
 * eps, scale, and flags of other ops.
 */
enum spyre_kfn {
	/* BINARY */
	SPYRE_KFN_ADD = 0,
	SPYRE_KFN_SUB = 1,
	SPYRE_KFN_MUL = 2,
	SPYRE_KFN_DIV = 3,
	SPYRE_KFN_MAX = 4,
	SPYRE_KFN_MIN = 5,
	/* UNARY */
	SPYRE_KFN_EXP = 16,
	SPYRE_KFN_LOG = 17,
	SPYRE_KFN_TANH = 18,
	SPYRE_KFN_SIGMOID = 19,
	SPYRE_KFN_RSQRT = 20,
	SPYRE_KFN_SQRT = 21,
	SPYRE_KFN_RECIP = 22,
	SPYRE_KFN_ABS = 23,
	SPYRE_KFN_GELU_TANH = 24,	/**< x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
	SPYRE_KFN_SCALE = 25,		/**< alpha x + beta */
	SPYRE_KFN_POW = 26,		/**< x ^ alpha */
	/* REDUCE */
	SPYRE_KFN_SUM = 32,
	SPYRE_KFN_MEAN = 33,
	SPYRE_KFN_RMAX = 34,
	/* TRIL */
	SPYRE_KFN_TRIL = 48,
	SPYRE_KFN_TRIU = 49,
};

/** spyre_kdesc.flags */
#define SPYRE_KF_RELOC		(1u << 0)	/**< absolute operands + relocations: the patch path */
#define SPYRE_KF_BIAS		(1u << 1)	/**< LINEAR: + bias */
#define SPYRE_KF_GELU		(1u << 2)	/**< MLP: GELU MLP instead of SwiGLU */
#define SPYRE_KF_DECODE		(1u << 3)	/**< ATTENTION: one token at a position given at launch */
#define SPYRE_KF_WEIGHT_NK	(1u << 4)	/**< LINEAR: W is [n x k], as nn.Linear keeps it (since 0.4) */
#define SPYRE_KF_BCAST_ROW	(1u << 5)	/**< BINARY: B is one row [n] (since 0.5) */
#define SPYRE_KF_BCAST_COL	(1u << 6)	/**< BINARY: B is a vector [m], one per row (since 0.5) */
#define SPYRE_KF_REVERSE	(1u << 7)	/**< BINARY: Y = B fn A (since 0.5) */
#define SPYRE_KF_SCALAR_A	(1u << 8)	/**< WHERE: A is @alpha, no slot (since 0.5) */
#define SPYRE_KF_SCALAR_B	(1u << 9)	/**< WHERE: B is @beta, no slot (since 0.5) */
#define SPYRE_KF_LOG		(1u << 10)	/**< SOFTMAX: log_softmax, x - max - log(sum(exp)) (since 0.5) */
/**
 * EMBEDDING: the token ids are a slot, ids [m] int32 in device memory
 * (slots table, ids, Y; no scalars, no limit on m): also a row gather (the
 * rows that sample). ROPE: each row has its own position, a slot pos [m]
 * int32 (slots X, cos, sin, pos, Y; no scalar): the rows of a batched step.
 * An id >= n or a position >= max_pos is the fault bad-index. Since 0.6.
 */
#define SPYRE_KF_INDEXED	(1u << 11)

/**
 * struct spyre_kdesc - what to generate. Zero every field you do not use
 * (a designated initializer does); the whole struct is the cache key.
 */
struct spyre_kdesc {
	uint32_t size;		/**< In: sizeof(struct spyre_kdesc). */
	uint32_t op;		/**< enum spyre_kop */
	uint32_t dtype;		/**< SPYRE_DT_FP32, _FP16, _BF16 or _DL16 of every tensor (not bias/tables/ids) */
	uint32_t cores;		/**< cores to use, 1..32; 0: all of the device's */
	uint32_t strategy;	/**< enum spyre_kstrategy, 0: chosen by the library (SPYRE_KSTRAT_AUTO) */
	uint32_t flags;		/**< SPYRE_KF_* */
	uint64_t m, n, k;	/**< rows, columns, inner dimension (per op, above) */
	uint32_t batch;		/**< BMM */
	uint32_t heads, kv_heads, head_dim;	/**< ATTENTION, ROPE */
	uint32_t max_pos;	/**< ATTENTION: cache length; ROPE: table length */
	uint32_t in_group, out_group;		/**< LINEAR grouped layouts, 0: none */
	float eps;		/**< norms */
	float alpha;		/**< ADD, BINARY: Y = A + alpha B; UNARY SCALE, POW; WHERE's scalar A; TRIL diagonal; IADD's constant */
	float scale;		/**< ATTENTION score scale, EMBEDDING multiplier */
	uint32_t sp_bytes;	/**< scratchpad per core; 0: the device's (2 MiB by default) */
	uint32_t fn;		/**< BINARY, UNARY, REDUCE, TRIL: enum spyre_kfn (since 0.5) */
	float beta;		/**< UNARY SCALE's offset, WHERE's scalar B (since 0.5) */
	uint32_t block_size;	/**< PAGED_*: tokens per KV block, 0: 64 (since 0.6) */
	uint32_t num_blocks;	/**< PAGED_*: blocks of each cache (since 0.6) */
};

/** What a generated kernel needs. */
struct spyre_kernel_info {
	uint32_t size;			/**< In: sizeof(struct spyre_kernel_info). */
	uint32_t strategy;		/**< the strategy used (never AUTO) */
	uint32_t num_slots;		/**< tensor arguments */
	uint32_t num_scalars;
	uint32_t cores;			/**< cores the program runs on */
	uint32_t core_mask;
	uint64_t slot_bytes[16];	/**< bytes each slot must provide */
	uint64_t image_bytes;
	uint64_t est_ns;		/**< the cost model's estimate of the device time */
	uint64_t macs;			/**< multiply-accumulates of the op (useful work) */
	char name[64];			/**< e.g. "linear fp16 1x4096x4096 split-n c32" */
	uint64_t work_bytes;		/**< bytes of the "work" slot (the last), 0: none (since 0.4) */
};

/**
 * spyre_kernel_build() - generate the program image of @desc without a
 * device (tests, tools, ahead-of-time builds). @image is malloc'd.
 * Return: 0, -EINVAL (with a detail naming the field) for a descriptor the
 * library cannot build (zero sizes, more cores than 32, a shape that does
 * not fit the scratchpad), -ENOMEM.
 */
int spyre_kernel_build(const struct spyre_kdesc *desc, void **image, size_t *size,
		       struct spyre_kernel_info *info);

/** A kernel cache bound to a device, and a kernel in it. */
typedef struct spyre_kcache spyre_kcache_t;
typedef struct spyre_kernel spyre_kernel_t;

/**
 * spyre_kcache_create() - a cache for @dev. With @capacity 0 it never keeps
 * a kernel: every spyre_kernel_get() builds and uploads anew, which is what
 * "graph building on the data path" costs (spyre_kernel_put() frees it).
 */
int spyre_kcache_create(spyre_device_t *dev, uint32_t capacity, spyre_kcache_t **cache);
/**
 * spyre_kcache_destroy() - synchronizes the device, then unloads every kernel
 * nobody holds; a kernel still held stays usable and is unloaded by its last
 * spyre_kernel_put(). Do not use @cache afterwards; keep the device open
 * until every kernel is put.
 */
void spyre_kcache_destroy(spyre_kcache_t *cache);

struct spyre_kcache_stats {
	uint32_t size;			/**< In: sizeof(struct spyre_kcache_stats). */
	uint32_t kernels;		/**< kernels held */
	uint64_t hits, misses;		/**< spyre_kernel_get() calls that found / built */
	uint64_t build_ns;		/**< host time spent generating and uploading */
};
int spyre_kcache_get_stats(spyre_kcache_t *cache, struct spyre_kcache_stats *stats);

/**
 * spyre_kernel_get() - the kernel for @desc: from the cache, or generated
 * and uploaded (and kept, unless the cache's capacity is 0 or full).
 * @desc->cores and ->sp_bytes of 0 are resolved against the device first.
 * Release with spyre_kernel_put().
 */
int spyre_kernel_get(spyre_kcache_t *cache, const struct spyre_kdesc *desc, spyre_kernel_t **kernel);
/** spyre_kernel_put() - drop a reference from spyre_kernel_get(); a kernel not in the cache is unloaded. */
void spyre_kernel_put(spyre_kernel_t *kernel);
int spyre_kernel_get_info(const spyre_kernel_t *kernel, struct spyre_kernel_info *info);
/** spyre_kernel_program() - the loaded program (spyre.h launch API, slot queries). */
spyre_program_t *spyre_kernel_program(const spyre_kernel_t *kernel);

/**
 * spyre_kernel_launch() - run @kernel on @stream with @slots (device
 * pointers, in the op's slot order) and @scalars. Asynchronous, as
 * spyre_launch(); -EINVAL with a detail naming the slot for a wrong binding.
 * For a kernel with a work slot (spyre_kernel_info.work_bytes), @slots may
 * leave it out (@nslots one less than num_slots): the library binds a
 * buffer of its cache's, one per stream, allocated on first use, grown when
 * a kernel needs more and freed with the cache; launches that use it are
 * serialized against each other on the host (not on the device). Passing
 * the work slot explicitly works as before.
 */
int spyre_kernel_launch(spyre_stream_t *stream, spyre_kernel_t *kernel, const spyre_dptr_t *slots,
			uint32_t nslots, const uint64_t *scalars, uint32_t nscalars);

/* ---- layout helpers ---- */

/** spyre_kernel_pitch() - bytes of one stick-layout row of @cols elements of @dtype. */
uint64_t spyre_kernel_pitch(uint64_t cols, uint32_t dtype);
/** spyre_kernel_grouped_pitch() - bytes of one row of @cols elements grouped by @group. */
uint64_t spyre_kernel_grouped_pitch(uint64_t cols, uint64_t group, uint32_t dtype);
/**
 * spyre_kernel_pack() / spyre_kernel_unpack() - convert between a dense
 * row-major fp32 host matrix [rows x cols] and its stick layout (grouped by
 * @group if non-zero) in @dtype (rounding to nearest even; DLFloat16 as the
 * device rounds). @dev_layout holds rows * (grouped) pitch bytes.
 */
void spyre_kernel_pack(void *dev_layout, const float *host, uint64_t rows, uint64_t cols,
		       uint64_t group, uint32_t dtype);
void spyre_kernel_unpack(float *host, const void *dev_layout, uint64_t rows, uint64_t cols,
			 uint64_t group, uint32_t dtype);

/** Orientations of a host weight for spyre_kernel_pack_weight(). */
enum spyre_kweight_layout {
	SPYRE_KW_OUT_IN = 0,	/**< [out x in]: nn.Linear.weight, a Hugging Face checkpoint */
	SPYRE_KW_IN_OUT = 1,	/**< [in x out]: its transpose */
};

/**
 * spyre_kernel_pack_weight() - write weight slot @slot of the op @desc in
 * the device layout its kernel reads, from a dense row-major host matrix
 * @src of @src_dtype (SPYRE_DT_FP32, _FP16, _BF16 or _DL16), converted to
 * @desc->dtype (rounding to nearest even). The weight slots: LINEAR 1 (W:
 * out = n, in = k; either orientation of @desc's flags) and 2 (the fp32
 * bias [n] with SPYRE_KF_BIAS; @layout ignored); MLP (out x in) 1 Wg and
 * 2 Wu [n x k], 3 Wd [k x n] (SwiGLU) or 1 Wu, 2 Wd (SPYRE_KF_GELU).
 * Groups (@in_group, @out_group) and the padding of every row are written
 * too (padding as zeros). With @dst NULL, *@dst_bytes gets the bytes the
 * slot takes (as spyre_kernel_info.slot_bytes[@slot]); else *@dst_bytes
 * must be at least that (since 0.4).
 * Return: 0, or -EINVAL (with a detail) for a slot that is not a weight, an
 * unknown @layout or @src_dtype, or too small a @dst.
 */
int spyre_kernel_pack_weight(const struct spyre_kdesc *desc, uint32_t slot, uint32_t layout, const void *src,
			     uint32_t src_dtype, void *dst, size_t *dst_bytes);

/** spyre_kernel_rope_tables() - fill cos/sin [max_pos x head_dim] fp32 stick-layout tables. */
void spyre_kernel_rope_tables(void *cos_tab, void *sin_tab, uint32_t max_pos, uint32_t head_dim,
			      float theta);
/** spyre_kernel_rope_scalar() - ROPE's scalar for the first position @pos0. */
uint64_t spyre_kernel_rope_scalar(const struct spyre_kdesc *desc, uint32_t pos0);
/**
 * spyre_kernel_attention_scalars() - the scalars of a decode ATTENTION launch
 * at position @pos (< max_pos) into @scalars[info.num_scalars].
 */
int spyre_kernel_attention_scalars(const struct spyre_kdesc *desc, uint32_t pos, uint64_t *scalars);
/** spyre_kernel_embedding_scalars() - EMBEDDING's scalars for @m token ids; -EINVAL for an id >= vocab. */
int spyre_kernel_embedding_scalars(const struct spyre_kdesc *desc, const int32_t *tokens, uint64_t *scalars);

/** spyre_kernel_op_name() - "linear", "attention", ...; "?" for an unknown op. */
const char *spyre_kernel_op_name(uint32_t op);

/* ---- collectives over the cards of one process (since 0.8) ---- */

/** A ring of devices of this process, rank r = devs[r]. */
typedef struct spyre_comm spyre_comm_t;

/** Reduction ops of the collectives. */
enum spyre_red_op {
	SPYRE_RED_SUM = 0,	/**< elementwise sum (the kernel library's ADD: fp32 inside) */
};

/**
 * spyre_comm_init() - a communicator of @n (1..64) distinct device handles,
 * ring order as given. Each pair of neighbours must have one card that can
 * reach the other's memory (spyre_device_can_access_peer()), else -EXDEV.
 */
int spyre_comm_init(spyre_comm_t **comm, spyre_device_t *const *devs, int n);
/** spyre_comm_destroy() - release @comm (its scratch buffers and kernels); NULL is a no-op. */
int spyre_comm_destroy(spyre_comm_t *comm);
/** spyre_comm_count() - the number of ranks. */
int spyre_comm_count(const spyre_comm_t *comm);
/**
 * spyre_all_reduce() - recv[r] = sum over ranks of send[r], @count elements
 * of @dtype (fp32, fp16, bf16, dl16) on every rank r, with @streams[r]
 * (one per rank, of that rank's device). Buffers are taken as @count
 * elements rounded up to whole 128-byte sticks (the padding is reduced
 * too); send[r] may equal recv[r]. The host waits for the streams at the
 * start and between ring steps; the last step runs asynchronously.
 */
int spyre_all_reduce(spyre_comm_t *comm, const spyre_dptr_t *send, const spyre_dptr_t *recv,
		     size_t count, uint32_t dtype, uint32_t op, spyre_stream_t *const *streams);
/** spyre_reduce_scatter() - recv[r] = chunk r (@recvcount elements, whole sticks) of the sum of send[]. */
int spyre_reduce_scatter(spyre_comm_t *comm, const spyre_dptr_t *send, const spyre_dptr_t *recv,
			 size_t recvcount, uint32_t dtype, uint32_t op, spyre_stream_t *const *streams);
/** spyre_all_gather() - chunk r of every recv[] = send[r] (@sendcount elements, whole sticks). */
int spyre_all_gather(spyre_comm_t *comm, const spyre_dptr_t *send, const spyre_dptr_t *recv,
		     size_t sendcount, uint32_t dtype, spyre_stream_t *const *streams);
/** spyre_broadcast() - buf[r] = buf[@root] for every rank r. */
int spyre_broadcast(spyre_comm_t *comm, const spyre_dptr_t *buf, size_t count, uint32_t dtype,
		    int root, spyre_stream_t *const *streams);
/** spyre_send_recv() - @recvbuf of rank @dst = @sendbuf of rank @src (a peer copy). */
int spyre_send_recv(spyre_comm_t *comm, int src, spyre_dptr_t sendbuf, int dst, spyre_dptr_t recvbuf,
		    size_t count, uint32_t dtype, spyre_stream_t *const *streams);

/* ---- communicators of one card per process (since 0.9) ---- */

/** The bytes of a communicator's id. */
#define SPYRE_COMM_ID_BYTES 64

/** What every rank of a communicator passes to spyre_comm_init_rank() (NCCL's ncclUniqueId). */
typedef struct spyre_comm_id {
	char internal[SPYRE_COMM_ID_BYTES];	/**< Opaque: pass it on as bytes. */
} spyre_comm_id_t;

/**
 * spyre_comm_get_unique_id() - a new random id (128 random bits), to be
 * handed to every rank's process (a file, a pipe, the parent's memory).
 * Return: 0, -EINVAL, or getrandom()'s error.
 */
int spyre_comm_get_unique_id(spyre_comm_id_t *id);
/**
 * spyre_comm_init_rank() - join the communicator @id as rank @rank of
 * @nranks (1..64), with @dev, a card no other rank uses; every rank calls it
 * (any order, each in its own process, of this user and network namespace).
 * Returns when all ranks have joined and each pair of ring neighbours has
 * a card that reaches the other's memory. Waits SPYRE_COMM_TIMEOUT_MS
 * (default 300000) for any rank. Return: 0; -EINVAL (bad arguments, another
 * rank's @nranks differs, two ranks on one card); -EADDRINUSE (another
 * process holds @rank of @id); -ETIMEDOUT; -ECONNRESET (a rank exited);
 * -EXDEV (neighbours that cannot reach each other); -ENOMEM.
 */
int spyre_comm_init_rank(spyre_comm_t **comm, int nranks, const spyre_comm_id_t *id, int rank,
			 spyre_device_t *dev);
/** spyre_comm_rank() - this process's rank (0 in a communicator of spyre_comm_init()). */
int spyre_comm_rank(const spyre_comm_t *comm);
/**
 * spyre_comm_all_reduce() - @recv = sum over the ranks of their @send, @count
 * elements of @dtype (fp32, fp16, bf16, dl16) rounded up to whole sticks;
 * @send may equal @recv. Every rank calls it with the same @count, @dtype
 * and @op, with a stream of its card. Returns with the last step enqueued
 * on @stream; the host waits only for the other ranks. After a failure
 * (-ETIMEDOUT, -ECONNRESET: a rank exited; a mismatched call: -EINVAL) the
 * communicator is broken: every later call fails; destroy it.
 */
int spyre_comm_all_reduce(spyre_comm_t *comm, spyre_dptr_t send, spyre_dptr_t recv, size_t count,
			  uint32_t dtype, uint32_t op, spyre_stream_t *stream);
/** spyre_comm_reduce_scatter() - @recv = chunk `rank` (@recvcount elements, whole sticks) of the sum of the @send. */
int spyre_comm_reduce_scatter(spyre_comm_t *comm, spyre_dptr_t send, spyre_dptr_t recv,
			      size_t recvcount, uint32_t dtype, uint32_t op, spyre_stream_t *stream);
/** spyre_comm_all_gather() - chunk r of @recv = @send of rank r (@sendcount elements, whole sticks). */
int spyre_comm_all_gather(spyre_comm_t *comm, spyre_dptr_t send, spyre_dptr_t recv, size_t sendcount,
			  uint32_t dtype, spyre_stream_t *stream);
/** spyre_comm_broadcast() - @buf of every rank = @buf of rank @root. */
int spyre_comm_broadcast(spyre_comm_t *comm, spyre_dptr_t buf, size_t count, uint32_t dtype, int root,
			 spyre_stream_t *stream);
/** spyre_comm_send() - send @buf to rank @peer, which calls spyre_comm_recv() with this rank. */
int spyre_comm_send(spyre_comm_t *comm, spyre_dptr_t buf, size_t count, uint32_t dtype, int peer,
		    spyre_stream_t *stream);
/** spyre_comm_recv() - receive into @buf what rank @peer sends with spyre_comm_send(). */
int spyre_comm_recv(spyre_comm_t *comm, spyre_dptr_t buf, size_t count, uint32_t dtype, int peer,
		    spyre_stream_t *stream);
/** spyre_comm_barrier() - return when every rank has called it (the host only: no stream). */
int spyre_comm_barrier(spyre_comm_t *comm);
/**
 * spyre_comm_group_start() - queue this thread's spyre_comm_send() and
 * spyre_comm_recv() calls until the matching spyre_comm_group_end()
 * (NCCL's ncclGroupStart; groups nest, the outermost end runs them). A
 * group holds the calls of one communicator of one card per process and
 * one stream (-EOPNOTSUPP for another); collectives and barriers inside
 * one fail with -EOPNOTSUPP.
 */
int spyre_comm_group_start(void);
/**
 * spyre_comm_group_end() - run the queued calls, in any order across peers
 * and in call order between two ranks, so that no order of the calls
 * across ranks deadlocks while every call has its match; returns once
 * their work is on the stream. -EINVAL without a group started; a failure
 * breaks the communicator, its detail naming the call.
 */
int spyre_comm_group_end(void);

#ifdef __cplusplus
}
#endif

#endif /* LIBSPYRE_SPYRE_KERNELS_H */
