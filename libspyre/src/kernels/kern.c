// SPDX-License-Identifier: MIT
/*
 * The kernel library: descriptor checks, strategy choice by the cost model,
 * the kernel cache, launch, and the layout helpers. The programs themselves
 * come from the generators in kern_*.c.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "kern.h"
#include "spyre_dtype.h"
#include "spyre_isa_codec.h"
#include "spyre_timing.h"

#define BIT(s) (1u << (s))

const struct kg_op kg_ops[SPYRE_KOP_COUNT] = {
	[SPYRE_KOP_LINEAR] = { "linear", kg_gen_linear, BIT(SPYRE_KSTRAT_SPLIT_M) | BIT(SPYRE_KSTRAT_SPLIT_N), 0 },
	[SPYRE_KOP_BMM] = { "bmm", kg_gen_bmm, BIT(SPYRE_KSTRAT_SPLIT_M) | BIT(SPYRE_KSTRAT_SPLIT_N), 0 },
	[SPYRE_KOP_MLP] = { "mlp", kg_gen_mlp, BIT(SPYRE_KSTRAT_FUSED) | BIT(SPYRE_KSTRAT_UNFUSED),
			    SPYRE_KSTRAT_FUSED },
	[SPYRE_KOP_SOFTMAX] = { "softmax", kg_gen_softmax, BIT(SPYRE_KSTRAT_NAIVE) | BIT(SPYRE_KSTRAT_SCRATCHPAD),
				SPYRE_KSTRAT_SCRATCHPAD },
	[SPYRE_KOP_RMSNORM] = { "rmsnorm", kg_gen_rmsnorm, 0, 0 },
	[SPYRE_KOP_LAYERNORM] = { "layernorm", kg_gen_layernorm, 0, 0 },
	[SPYRE_KOP_ROPE] = { "rope", kg_gen_rope, 0, 0 },
	[SPYRE_KOP_ADD] = { "add", kg_gen_eltwise, 0, 0 },
	[SPYRE_KOP_MUL] = { "mul", kg_gen_eltwise, 0, 0 },
	[SPYRE_KOP_SILU] = { "silu", kg_gen_eltwise, 0, 0 },
	[SPYRE_KOP_GELU] = { "gelu", kg_gen_eltwise, 0, 0 },
	[SPYRE_KOP_RELU] = { "relu", kg_gen_eltwise, 0, 0 },
	[SPYRE_KOP_ATTENTION] = { "attention", kg_gen_attention, 0, 0 },
	[SPYRE_KOP_EMBEDDING] = { "embedding", kg_gen_embedding, 0, 0 },
	[SPYRE_KOP_ARGMAX] = { "argmax", kg_gen_argmax, 0, 0 },
	[SPYRE_KOP_TRANSPOSE] = { "transpose", kg_gen_transpose, BIT(SPYRE_KSTRAT_VIA_MEMORY) | BIT(SPYRE_KSTRAT_RING),
				  SPYRE_KSTRAT_RING },
	[SPYRE_KOP_BINARY] = { "binary", kg_gen_binary, 0, 0 },
	[SPYRE_KOP_UNARY] = { "unary", kg_gen_unary, 0, 0 },
	[SPYRE_KOP_WHERE] = { "where", kg_gen_where, 0, 0 },
	[SPYRE_KOP_REDUCE] = { "reduce", kg_gen_reduce, 0, 0 },
	[SPYRE_KOP_TRIL] = { "tril", kg_gen_tril, 0, 0 },
	[SPYRE_KOP_PERMUTE] = { "permute", kg_gen_permute, 0, 0 },
	[SPYRE_KOP_CAT] = { "cat", kg_gen_cat, 0, 0 },
	[SPYRE_KOP_PAGED_KV_WRITE] = { "paged-kv-write", kg_gen_paged_kv_write, 0, 0 },
	[SPYRE_KOP_PAGED_ATTENTION] = { "paged-attention", kg_gen_paged_attention, 0, 0 },
	[SPYRE_KOP_IADD] = { "iadd", kg_gen_iadd, 0, 0 },
};

/* The names of enum spyre_kfn (in a kernel's name: "binary-div fp16 3x5 c32"). */
static const char *const fn_names[] = {
	[SPYRE_KFN_ADD] = "add", [SPYRE_KFN_SUB] = "sub", [SPYRE_KFN_MUL] = "mul", [SPYRE_KFN_DIV] = "div",
	[SPYRE_KFN_MAX] = "max", [SPYRE_KFN_MIN] = "min",
	[SPYRE_KFN_EXP] = "exp", [SPYRE_KFN_LOG] = "log", [SPYRE_KFN_TANH] = "tanh",
	[SPYRE_KFN_SIGMOID] = "sigmoid", [SPYRE_KFN_RSQRT] = "rsqrt", [SPYRE_KFN_SQRT] = "sqrt",
	[SPYRE_KFN_RECIP] = "recip", [SPYRE_KFN_ABS] = "abs", [SPYRE_KFN_GELU_TANH] = "gelu_tanh",
	[SPYRE_KFN_SCALE] = "scale", [SPYRE_KFN_POW] = "pow",
	[SPYRE_KFN_SUM] = "sum", [SPYRE_KFN_MEAN] = "mean", [SPYRE_KFN_RMAX] = "max",
	[SPYRE_KFN_TRIL] = "tril", [SPYRE_KFN_TRIU] = "triu",
};

/* The fn range of each op that has one: [lo, hi] of enum spyre_kfn. */
static bool fn_valid(uint32_t op, uint32_t fn)
{
	switch (op) {
	case SPYRE_KOP_BINARY:
		return fn <= SPYRE_KFN_MIN;
	case SPYRE_KOP_UNARY:
		return fn >= SPYRE_KFN_EXP && fn <= SPYRE_KFN_POW;
	case SPYRE_KOP_REDUCE:
		return fn >= SPYRE_KFN_SUM && fn <= SPYRE_KFN_RMAX;
	case SPYRE_KOP_TRIL:
		return fn == SPYRE_KFN_TRIL || fn == SPYRE_KFN_TRIU;
	default:
		return fn == 0;
	}
}

/* The flags each op takes besides SPYRE_KF_RELOC. */
static uint32_t op_flags(uint32_t op)
{
	switch (op) {
	case SPYRE_KOP_LINEAR:
		return SPYRE_KF_BIAS | SPYRE_KF_WEIGHT_NK;
	case SPYRE_KOP_MLP:
		return SPYRE_KF_GELU;
	case SPYRE_KOP_ATTENTION:
		return SPYRE_KF_DECODE;
	case SPYRE_KOP_SOFTMAX:
		return SPYRE_KF_LOG;
	case SPYRE_KOP_EMBEDDING:
	case SPYRE_KOP_ROPE:
		return SPYRE_KF_INDEXED;
	case SPYRE_KOP_BINARY:
		return SPYRE_KF_BCAST_ROW | SPYRE_KF_BCAST_COL | SPYRE_KF_REVERSE;
	case SPYRE_KOP_WHERE:
		return SPYRE_KF_SCALAR_A | SPYRE_KF_SCALAR_B;
	default:
		return 0;
	}
}

/*
 * The fields of the ops since 0.5 (fn, alpha, beta, k, flags), each checked
 * against what the op uses, so a caller's mistake is an error naming the
 * field instead of an unused value in the cache key. Returns 0 or -EINVAL.
 */
static int check_op_fields(const struct spyre_kdesc *d)
{
	const char *op = kg_ops[d->op].name;
	bool uses_alpha, uses_beta, uses_k;
	/* the ops with a function name it in messages ("unary exp: ...") */
	bool has_fn = (d->op == SPYRE_KOP_BINARY || d->op == SPYRE_KOP_UNARY || d->op == SPYRE_KOP_REDUCE ||
		       d->op == SPYRE_KOP_TRIL) && d->fn < sizeof(fn_names) / sizeof(fn_names[0]) && fn_names[d->fn];

	if (!fn_valid(d->op, d->fn))
		return d->op == SPYRE_KOP_BINARY || d->op == SPYRE_KOP_UNARY || d->op == SPYRE_KOP_REDUCE ||
		       d->op == SPYRE_KOP_TRIL ?
			spyre_error(-EINVAL, "%s: fn %u is not a function of %s (enum spyre_kfn)", op, d->fn, op) :
			spyre_error(-EINVAL, "%s: fn must be 0 (fn is for binary, unary, reduce and tril), got %u",
				    op, d->fn);
	if ((d->flags & SPYRE_KF_BCAST_ROW) && (d->flags & SPYRE_KF_BCAST_COL))
		return spyre_error(-EINVAL, "%s: SPYRE_KF_BCAST_ROW and SPYRE_KF_BCAST_COL together", op);
	if (d->op == SPYRE_KOP_PAGED_KV_WRITE || d->op == SPYRE_KOP_PAGED_ATTENTION)
		return d->alpha != 0.0f || d->beta != 0.0f || d->k || d->batch || d->in_group || d->out_group ||
		       d->eps != 0.0f || (d->op == SPYRE_KOP_PAGED_KV_WRITE && (d->scale != 0.0f || d->n || d->heads)) ?
			spyre_error(-EINVAL, "%s: alpha, beta, k, batch, in_group, out_group, eps (and for the KV write "
				    "n, heads and scale) must be 0 (unused)", op) : 0;
	if (d->op < SPYRE_KOP_BINARY)
		return d->beta != 0.0f ? spyre_error(-EINVAL, "%s: beta must be 0 (it is for unary scale and "
						     "where)", op) : 0;
	switch (d->op) {
	case SPYRE_KOP_BINARY:
		uses_alpha = d->fn == SPYRE_KFN_ADD || d->fn == SPYRE_KFN_SUB;
		uses_beta = uses_k = false;
		break;
	case SPYRE_KOP_UNARY:
		uses_alpha = d->fn == SPYRE_KFN_SCALE || d->fn == SPYRE_KFN_POW;
		uses_beta = d->fn == SPYRE_KFN_SCALE;
		uses_k = false;
		break;
	case SPYRE_KOP_WHERE:
		uses_alpha = d->flags & SPYRE_KF_SCALAR_A;
		uses_beta = d->flags & SPYRE_KF_SCALAR_B;
		uses_k = false;
		break;
	case SPYRE_KOP_TRIL:
		uses_alpha = uses_k = true;
		uses_beta = false;
		if (!(fabsf(d->alpha) <= 2147483647.0f) || d->alpha != floorf(d->alpha))
			return spyre_error(-EINVAL, "%s: alpha (the diagonal) must be an integer, got %g", op,
					   (double)d->alpha);
		break;
	case SPYRE_KOP_IADD:
		uses_alpha = true;
		uses_beta = uses_k = false;
		if (!(fabsf(d->alpha) < 16777216.0f) || d->alpha != floorf(d->alpha))
			return spyre_error(-EINVAL, "%s: alpha (the constant) must be an integer below 2^24 in "
					   "magnitude, got %g", op, (double)d->alpha);
		if (d->dtype != SPYRE_DT_FP32)
			return spyre_error(-EINVAL, "%s: dtype must be 0 (SPYRE_DT_FP32): the tensors are int32, "
					   "got %u", op, d->dtype);
		break;
	case SPYRE_KOP_PERMUTE:
	case SPYRE_KOP_CAT:
		uses_alpha = uses_beta = false;
		uses_k = true;
		break;
	default:	/* REDUCE */
		uses_alpha = uses_beta = uses_k = false;
		break;
	}
	if (!uses_alpha && d->alpha != 0.0f)
		return spyre_error(-EINVAL, "%s%s%s: alpha must be 0 (unused%s), got %g", op,
				   has_fn ? " " : "", has_fn ? fn_names[d->fn] : "",
				   d->op == SPYRE_KOP_BINARY ? "; 1 is taken as 0" : "", (double)d->alpha);
	if (!uses_beta && d->beta != 0.0f)
		return spyre_error(-EINVAL, "%s: beta must be 0 (unused), got %g", op, (double)d->beta);
	if (!uses_k && d->k)
		return spyre_error(-EINVAL, "%s: k must be 0 (unused), got %llu", op, (unsigned long long)d->k);
	if ((d->batch && d->op != SPYRE_KOP_PERMUTE) || d->heads || d->kv_heads || d->head_dim || d->max_pos || d->in_group || d->out_group ||
	    d->eps != 0.0f || d->scale != 0.0f)
		return spyre_error(-EINVAL, "%s: batch (but for permute), heads, kv_heads, head_dim, max_pos, "
				   "in_group, out_group, eps and scale must be 0 (unused)", op);
	return 0;
}

static const char *const strategy_names[] = {
	[SPYRE_KSTRAT_AUTO] = "auto", [SPYRE_KSTRAT_SPLIT_M] = "split-m", [SPYRE_KSTRAT_SPLIT_N] = "split-n",
	[SPYRE_KSTRAT_FUSED] = "fused", [SPYRE_KSTRAT_UNFUSED] = "unfused", [SPYRE_KSTRAT_NAIVE] = "naive",
	[SPYRE_KSTRAT_SCRATCHPAD] = "scratchpad", [SPYRE_KSTRAT_VIA_MEMORY] = "via-memory",
	[SPYRE_KSTRAT_RING] = "ring",
};

SPYRE_EXPORT const char *spyre_kernel_op_name(uint32_t op)
{
	return op < SPYRE_KOP_COUNT && kg_ops[op].name ? kg_ops[op].name : "?";
}

/* ---- generator helpers ---------------------------------------------------- */

struct kg_range kg_split(uint64_t total, uint32_t parts, uint32_t i, uint64_t granule)
{
	uint64_t units, per, extra, s, e;

	if (!granule)
		granule = 1;
	units = (total + granule - 1) / granule;
	per = units / parts;
	extra = units % parts;
	s = (uint64_t)i * per + (i < extra ? i : extra);
	e = s + per + (i < extra ? 1 : 0);
	s *= granule;
	e *= granule;
	if (s > total)
		s = total;
	if (e > total)
		e = total;
	return (struct kg_range){ .start = s, .count = e - s };
}

int kg_fail(struct kgen *g, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!g->failed)
		spyre_error(-EINVAL, "%s: %s", g->info->name[0] ? g->info->name : "kernel", msg);
	g->failed = 1;
	return -EINVAL;
}

int kg_ok(struct kgen *g)
{
	if (g->failed)
		return -EINVAL;
	return 0;
}

int kg_slot(struct kgen *g, const char *name, uint32_t dt, uint64_t rows, uint64_t cols, uint64_t pitch,
	    unsigned flags)
{
	uint64_t shape[2] = { rows, cols };
	int s;

	if (!rows || !cols || !pitch || rows > (UINT64_MAX / 2) / pitch)
		return kg_fail(g, "slot %s: %llu x %llu is empty or too large", name, (unsigned long long)rows,
			       (unsigned long long)cols), -1;
	s = spyre_pb_sym(g->pb, name, dt, 2, shape, rows * pitch, flags);
	if (s < 0 || (uint32_t)s >= sizeof(g->info->slot_bytes) / sizeof(g->info->slot_bytes[0]))
		return kg_fail(g, "slot %s: cannot add", name), -1;
	g->info->slot_bytes[s] = rows * pitch;
	/* the op's device scratch: always its last slot, bound by spyre_kernel_launch() if left out */
	g->info->work_bytes = strcmp(name, "work") ? 0 : rows * pitch;
	g->info->num_slots = (uint32_t)s + 1;
	return s;
}

uint32_t kg_sp_alloc(struct kgen *g, uint32_t core, uint64_t bytes)
{
	uint64_t b = (bytes + SPYRE_STICK_BYTES - 1) / SPYRE_STICK_BYTES * SPYRE_STICK_BYTES;
	uint32_t off;

	if (core >= SPYRE_MAX_CORES)
		return kg_fail(g, "core %u out of range", core), 0;
	off = g->sp_used[core];
	if (!b)
		b = SPYRE_STICK_BYTES;
	if (b > g->sp_bytes - off) {
		kg_fail(g, "scratchpad: %llu bytes needed on core %u, %u of %u available",
			(unsigned long long)b, core, g->sp_bytes - off, g->sp_bytes);
		return 0;
	}
	g->sp_used[core] = off + (uint32_t)b;
	return off;
}

void kg_sp_reset(struct kgen *g, uint32_t core)
{
	if (core < SPYRE_MAX_CORES)
		g->sp_used[core] = 0;
}

uint64_t kg_sp_free(const struct kgen *g, uint32_t core)
{
	return core < SPYRE_MAX_CORES ? g->sp_bytes - g->sp_used[core] : 0;
}

uint32_t kg_tile_sizes(uint64_t total, uint64_t unit, uint64_t cap, uint64_t dense, uint64_t *out, uint32_t max)
{
	uint32_t n = 0;
	uint64_t tmax = kg_cdiv(total, unit), last = 0;

	for (uint64_t t = 1; t <= tmax && n < max; t = t < dense ? t + 1 : (t * 5 + 3) / 4) {
		uint64_t s = kg_min64(kg_rup(kg_cdiv(total, t), unit), total);

		if (s > cap || s == last)
			continue;
		out[n++] = last = s;
	}
	if (n < max && last != kg_min64(unit, total) && kg_min64(unit, total) <= cap)
		out[n++] = kg_min64(unit, total);
	return n;
}

uint32_t kg_row_tiles(uint64_t m, uint64_t dense, uint64_t *out, uint32_t max)
{
	uint32_t n = kg_tile_sizes(m, m < SPYRE_TM_PE_ROWS ? m : SPYRE_TM_PE_ROWS, UINT32_MAX, dense, out, max - 3);

	for (uint64_t r = 4; r >= 1 && n < max; r /= 2)
		if (r < out[n - 1])
			out[n++] = r;
	return n;
}

uint32_t kg_choose_parts(uint64_t units, uint32_t cores, bool (*cost)(void *ctx, uint32_t parts, uint64_t *cycles),
			 void *ctx)
{
	uint64_t wmin = kg_cdiv(units, cores), best_cyc = UINT64_MAX, cyc[64];
	uint32_t cand[64], n = 0;

	for (uint64_t w = wmin, prev = 0; w <= units;
	     w = w == units ? w + 1 : w < 2 * wmin ? w + 1 : kg_min64((w * 5 + 3) / 4, units)) {
		uint32_t parts = (uint32_t)kg_cdiv(units, w);
		uint64_t c;

		if (parts == prev)
			continue;
		prev = parts;
		if (!cost(ctx, parts, &c) || n == 64)
			continue;
		cand[n] = parts;
		cyc[n++] = c;
		best_cyc = kg_min64(best_cyc, c);
	}
	/* within 3 % of the cheapest, the most cores: the estimate is static, spreading is safer */
	for (uint32_t i = 0; i < n; i++)	/* cand[] runs from the most cores down */
		if (cyc[i] * 100 <= best_cyc * 103)
			return cand[i];
	return (uint32_t)kg_min64(cores, units);
}

/* ---- the cost model -------------------------------------------------------- */

/*
 * Estimated device ns of a checked image: the slowest core's sum of its
 * instructions' busy cycles (isa/spyre_timing.h, what the engine charges)
 * with the default device properties. Waits for messages, tokens and
 * barriers are not modeled: a static estimate.
 */
static uint64_t estimate_ns(const struct spyre_prog_view *v)
{
	struct spyre_timing tm;
	uint64_t worst = 0;
	uint32_t active = 0;

	spyre_timing_default(&tm);
	for (uint32_t c = 0; c < v->hdr.num_cores; c++)
		active += v->cores[c].num_insns > 0;
	for (uint32_t c = 0; c < v->hdr.num_cores; c++) {
		uint64_t cyc = 0;

		for (uint32_t i = 0; i < v->cores[c].num_insns; i++) {
			union spyre_insn in;

			spyre_insn_decode(v->image + spyre_prog_insn_off(v, c, i), &in);
			cyc += spyre_insn_cycles(&in, &tm, active);
		}
		worst = kg_max64(worst, cyc);
	}
	return (worst * 1000 + tm.clock_mhz - 1) / tm.clock_mhz;
}

/* ---- building ----------------------------------------------------------- */

static int normalize(const struct spyre_kdesc *in, struct spyre_kdesc *d)
{
	if (!in || in->size < sizeof(*in))
		return spyre_error(-EINVAL, "kernel descriptor: NULL or size not set to sizeof(struct spyre_kdesc)");
	/*
	 * Field by field into a zeroed descriptor: the whole struct is the cache
	 * key (memcmp), so padding must be zero and -0.0f equal 0.0f.
	 */
	memset(d, 0, sizeof(*d));
	d->size = sizeof(*d);
	d->op = in->op;
	d->dtype = in->dtype;
	d->cores = in->cores;
	d->strategy = in->strategy;
	d->flags = in->flags;
	d->m = in->m;
	d->n = in->n;
	d->k = in->k;
	d->batch = in->batch;
	d->heads = in->heads;
	d->kv_heads = in->kv_heads;
	d->head_dim = in->head_dim;
	d->max_pos = in->max_pos;
	d->in_group = in->in_group;
	d->out_group = in->out_group;
	d->eps = in->eps == 0.0f ? 0.0f : in->eps;
	d->alpha = in->alpha == 0.0f ? 0.0f : in->alpha;
	d->scale = in->scale == 0.0f ? 0.0f : in->scale;
	d->sp_bytes = in->sp_bytes;
	d->fn = in->fn;
	d->beta = in->beta == 0.0f ? 0.0f : in->beta;
	d->block_size = in->block_size;
	d->num_blocks = in->num_blocks;
	if (!d->op || d->op >= SPYRE_KOP_COUNT || !kg_ops[d->op].gen)
		return spyre_error(-EINVAL, "kernel descriptor: unknown op %u", d->op);
	if (d->dtype != SPYRE_DT_FP32 && d->dtype != SPYRE_DT_FP16 && d->dtype != SPYRE_DT_BF16 &&
	    d->dtype != SPYRE_DT_DL16)
		/* IADD: the message of check_op_fields(), also for SPYRE_DT_INT32, what its tensors are */
		return spyre_error(-EINVAL, d->op == SPYRE_KOP_IADD ? "%s: dtype must be 0 (SPYRE_DT_FP32): the "
				   "tensors are int32, got %u" : "%s: dtype %u is not fp32, fp16, bf16 or dl16",
				   kg_ops[d->op].name, d->dtype);
	if (!d->cores)
		d->cores = SPYRE_MAX_CORES;
	if (d->cores > SPYRE_MAX_CORES)
		return spyre_error(-EINVAL, "%s: %u cores, at most %u", kg_ops[d->op].name, d->cores,
				   SPYRE_MAX_CORES);
	if (!d->sp_bytes)
		d->sp_bytes = SPYRE_TM_SCRATCHPAD_BYTES;
	if (d->sp_bytes % SPYRE_STICK_BYTES || d->sp_bytes < 16 * SPYRE_STICK_BYTES)
		return spyre_error(-EINVAL, "%s: scratchpad of %u bytes", kg_ops[d->op].name, d->sp_bytes);
	if ((d->block_size || d->num_blocks) && d->op != SPYRE_KOP_PAGED_KV_WRITE && d->op != SPYRE_KOP_PAGED_ATTENTION)
		return spyre_error(-EINVAL, "%s: block_size and num_blocks must be 0 (they are for the paged ops)",
				   kg_ops[d->op].name);
	if ((d->op == SPYRE_KOP_PAGED_KV_WRITE || d->op == SPYRE_KOP_PAGED_ATTENTION) && !d->block_size)
		d->block_size = 64;	/* 0 is the default: one key */
	if (d->strategy && (d->strategy >= 32 || !(kg_ops[d->op].strategies & BIT(d->strategy))))
		return spyre_error(-EINVAL, "%s: strategy %u does not apply", kg_ops[d->op].name, d->strategy);
	if (d->flags & ~(SPYRE_KF_RELOC | SPYRE_KF_BIAS | SPYRE_KF_GELU | SPYRE_KF_DECODE | SPYRE_KF_WEIGHT_NK |
			 SPYRE_KF_BCAST_ROW | SPYRE_KF_BCAST_COL | SPYRE_KF_REVERSE | SPYRE_KF_SCALAR_A |
			 SPYRE_KF_SCALAR_B | SPYRE_KF_LOG | SPYRE_KF_INDEXED))
		return spyre_error(-EINVAL, "%s: unknown flags 0x%x", kg_ops[d->op].name, d->flags);
	if ((d->flags & SPYRE_KF_WEIGHT_NK) && d->op != SPYRE_KOP_LINEAR)
		return spyre_error(-EINVAL, "%s: SPYRE_KF_WEIGHT_NK applies to linear only", kg_ops[d->op].name);
	/*
	 * Flags that do not apply are refused: every one on the ops of 0.5,
	 * those of 0.5 on the older ops (which keep ignoring the older ones).
	 */
	uint32_t stray = d->flags & ~(op_flags(d->op) | SPYRE_KF_RELOC);

	if (d->op < SPYRE_KOP_BINARY)
		stray &= SPYRE_KF_BCAST_ROW | SPYRE_KF_BCAST_COL | SPYRE_KF_REVERSE | SPYRE_KF_SCALAR_A |
			 SPYRE_KF_SCALAR_B | SPYRE_KF_LOG | SPYRE_KF_INDEXED;
	if (stray)
		return spyre_error(-EINVAL, "%s: flags 0x%x do not apply to it (SPYRE_KF_BCAST_ROW, _BCAST_COL, "
				   "_REVERSE: binary; _SCALAR_A, _SCALAR_B: where; _LOG: softmax; _BIAS, _WEIGHT_NK: "
				   "linear; _GELU: mlp; _DECODE: attention; _INDEXED: embedding, rope)", kg_ops[d->op].name, stray);
	if (d->op == SPYRE_KOP_TRIL && !d->fn)
		d->fn = SPYRE_KFN_TRIL;	/* 0 is tril: one key */
	if (d->op == SPYRE_KOP_PERMUTE && !d->batch)
		d->batch = 1;		/* 0 is one batch: one key */
	if (d->op == SPYRE_KOP_BINARY && d->alpha == 1.0f)
		d->alpha = 0.0f;	/* ADD, SUB: 0 is 1; the others ignore a 1 (a framework's default): one key */
	return check_op_fields(d);
}

/*
 * Build @d with @strategy into *@image (malloc'd), its container checked once
 * here into *@v: the estimate reads the view, and so does the load of a
 * cached kernel (spyre_program_load_checked()).
 */
static int build_one(const struct spyre_kdesc *d, uint32_t strategy, void **image, size_t *size,
		     struct spyre_kernel_info *info, struct spyre_prog_view *v)
{
	struct kgen g = { .d = d, .cores = d->cores, .sp_bytes = d->sp_bytes, .strategy = strategy };
	int ret;

	memset(info, 0, sizeof(*info));
	info->size = sizeof(*info);
	info->strategy = strategy;
	/* m x n, and x k for the ops that have a k (elementwise ones do not: no "1x128x0") */
	char opname[40];

	if (d->op >= SPYRE_KOP_BINARY && d->fn < sizeof(fn_names) / sizeof(fn_names[0]) && fn_names[d->fn] &&
	    (d->op != SPYRE_KOP_WHERE && d->op < SPYRE_KOP_PERMUTE))
		snprintf(opname, sizeof(opname), "%s-%s", kg_ops[d->op].name, fn_names[d->fn]);
	else
		snprintf(opname, sizeof(opname), "%s%s", kg_ops[d->op].name,
			 (d->flags & SPYRE_KF_LOG) ? "-log" : "");
	snprintf(info->name, sizeof(info->name), "%s %s %llux%llu%s%.0llu%s%s%s c%u", opname,
		 spyre_dtype_name(d->dtype), (unsigned long long)d->m, (unsigned long long)d->n,
		 d->k ? "x" : "", (unsigned long long)d->k, (d->flags & SPYRE_KF_WEIGHT_NK) ? " w-nk" : "",
		 strategy ? " " : "", strategy ? strategy_names[strategy] : "", d->cores);
	g.info = info;
	g.pb = spyre_pb_new();
	if (!g.pb)
		return spyre_error(-ENOMEM, "kernel builder");
	spyre_pb_set_addressing(g.pb, (d->flags & SPYRE_KF_RELOC) ? SPYRE_PB_ADDR_RELOC : SPYRE_PB_ADDR_SLOT);
	ret = kg_ops[d->op].gen(&g);
	if (!ret && spyre_pb_finish(g.pb, image, size))
		ret = g.failed ? -EINVAL : spyre_error(-EINVAL, "%s: the program does not fit the format "
						       "(too many instructions, slots or bytes)", info->name);
	spyre_pb_free(g.pb);
	if (ret)
		return ret;
	if (spyre_prog_check_container(*image, *size, v) != SPYRE_ENGINE_FAULT_NONE || v->size != *size) {
		free(*image);
		*image = NULL;
		return spyre_error(-EINVAL, "%s: the builder wrote a malformed image", info->name);
	}
	for (uint32_t c = 0; c < v->hdr.num_cores; c++) {
		if (v->cores[c].num_insns) {
			info->core_mask |= 1u << c;
			info->cores++;
		}
	}
	if (!info->core_mask) {
		info->core_mask = 1;
		info->cores = 1;
	}
	info->num_scalars = v->hdr.num_scalars;
	info->image_bytes = *size;
	info->est_ns = estimate_ns(v);
	return 0;
}

/*
 * Build every strategy of @d's op but those in @skip and keep the one with
 * the fastest estimate. 0, or the last build's status when none could be built.
 */
static int build_fastest(const struct spyre_kdesc *d, uint32_t skip, void **best, size_t *best_size,
			 struct spyre_kernel_info *best_info, struct spyre_prog_view *best_view)
{
	struct spyre_kernel_info tmp;
	struct spyre_prog_view v;
	int last = -EINVAL;

	*best = NULL;
	for (uint32_t s = 1; s < 32; s++) {
		void *img;
		size_t sz;

		if (!(kg_ops[d->op].strategies & BIT(s)) || (skip & BIT(s)))
			continue;
		last = build_one(d, s, &img, &sz, &tmp, &v);
		if (last)
			continue;
		if (!*best || tmp.est_ns < best_info->est_ns) {
			free(*best);
			*best = img;
			*best_size = sz;
			*best_info = tmp;
			*best_view = v;
		} else {
			free(img);
		}
	}
	return *best ? 0 : last;
}

/* Build normalized @d: its strategy, or the best one; the image's checked view in *@v. */
static int kernel_build(const struct spyre_kdesc *d, void **image, size_t *size,
			struct spyre_kernel_info *info, struct spyre_prog_view *v)
{
	int ret;

	if (d->strategy || !kg_ops[d->op].strategies)
		return build_one(d, d->strategy, image, size, info, v);
	if (kg_ops[d->op].default_strategy) {
		/* the op's preferred strategy; if it cannot be built, the cost model's pick of the others */
		ret = build_one(d, kg_ops[d->op].default_strategy, image, size, info, v);
		if (ret && build_fastest(d, BIT(kg_ops[d->op].default_strategy), image, size, info, v))
			return ret;
		return 0;
	}
	/* the cost model chooses: build every strategy, keep the fastest estimate */
	return build_fastest(d, 0, image, size, info, v);
}

SPYRE_EXPORT int spyre_kernel_build(const struct spyre_kdesc *desc, void **image, size_t *size,
				    struct spyre_kernel_info *info)
{
	struct spyre_kernel_info best_info;
	struct spyre_prog_view v;
	struct spyre_kdesc d;
	void *best = NULL;
	size_t best_size = 0;
	int ret;

	if (!image || !size)
		return spyre_error(-EINVAL, "spyre_kernel_build: NULL argument");
	*image = NULL;
	*size = 0;
	if (info && info->size < sizeof(uint32_t) * 2)
		return spyre_error(-EINVAL, "spyre_kernel_build: info->size not set");
	ret = normalize(desc, &d);
	ret = ret ?: kernel_build(&d, &best, &best_size, &best_info, &v);
	if (ret)
		return ret;
	*image = best;
	*size = best_size;
	if (info) {
		uint32_t n = info->size < sizeof(best_info) ? info->size : (uint32_t)sizeof(best_info);

		memcpy((char *)info + 4, (char *)&best_info + 4, n - 4);
	}
	return 0;
}

/* ---- the cache ------------------------------------------------------------- */

struct spyre_kernel {
	struct spyre_kcache *cache;
	struct spyre_kdesc key;
	struct spyre_kernel_info info;
	spyre_program_t *prog;
	unsigned int refs;		/* atomic: the cache's while listed + each get's */
	bool cached;			/* under cache->lock: in the list */
	struct spyre_kernel *next;	/* the cache's list of every kernel */
	struct spyre_kernel *hnext;	/* the chain of its hash bucket */
};

/* A stream's work buffer: the "work" slot of the kernels launched on it without one. */
struct kwork {
	spyre_stream_t *stream;
	spyre_dptr_t ptr;
	uint64_t bytes;
};

/* Hash buckets of a cache (a power of two). */
#define KCACHE_BUCKETS 1024

/* Streams with a work buffer before the cache drops them all (after a device synchronize). */
#define KWORK_MAX 32

/*
 * Lifetimes: a kernel holds a reference on its cache (so a put after
 * spyre_kcache_destroy() still finds the cache's memory), the cache holds
 * one on each kernel in its list. The cache is freed when its owner
 * destroyed it and its last kernel is gone: then no launch can still use a
 * work buffer (each kernel's unload waited for its launches), and they are
 * freed too.
 */
struct spyre_kcache {
	spyre_device_t *dev;
	struct spyre_device_props props;	/* the device's, read at creation */
	uint32_t capacity;
	unsigned int refs;		/* atomic: the owner's + one per live kernel */
	pthread_mutex_t lock;
	struct spyre_kernel *head;
	/* the same kernels by the hash of their key: a get costs the same with thousands cached */
	struct spyre_kernel *bucket[KCACHE_BUCKETS];
	struct spyre_kcache_stats stats;
	/*
	 * Held from choosing a work buffer until its launch is queued, so a
	 * buffer is only replaced or freed when every launch using it is
	 * ordered before (on its stream) what waits for them.
	 */
	pthread_mutex_t work_lock;
	struct kwork work[KWORK_MAX];
	uint32_t nwork;
};

/* The bucket of a normalized key (its padding zeroed by normalize()): 64-bit FNV-1a over its words. */
static uint32_t kcache_hash(const struct spyre_kdesc *d)
{
	const unsigned char *p = (const unsigned char *)d;
	uint64_t h = 1469598103934665603ull, w;
	size_t i;

	for (i = 0; i + 8 <= sizeof(*d); i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 1099511628211ull;
	}
	for (; i < sizeof(*d); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	h ^= h >> 32;
	return (uint32_t)h & (KCACHE_BUCKETS - 1);
}

/* Under c->lock: the cached kernel of @d, or NULL. */
static struct spyre_kernel *kcache_find(struct spyre_kcache *c, const struct spyre_kdesc *d, uint32_t b)
{
	struct spyre_kernel *k;

	for (k = c->bucket[b]; k; k = k->hnext)
		if (!memcmp(&k->key, d, sizeof(*d)))
			return k;
	return NULL;
}

static void kcache_put(struct spyre_kcache *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		for (uint32_t i = 0; i < c->nwork; i++)
			spyre_free(c->dev, c->work[i].ptr);
		pthread_mutex_destroy(&c->work_lock);
		pthread_mutex_destroy(&c->lock);
		free(c);
	}
}

SPYRE_EXPORT int spyre_kcache_create(spyre_device_t *dev, uint32_t capacity, spyre_kcache_t **cache)
{
	struct spyre_kcache *c;
	int ret;

	if (!dev || !cache)
		return spyre_error(-EINVAL, "spyre_kcache_create: NULL argument");
	c = calloc(1, sizeof(*c));
	if (!c)
		return spyre_error(-ENOMEM, "spyre_kcache_create");
	c->props.size = sizeof(c->props);
	ret = spyre_device_get_props(dev, &c->props);
	if (ret) {
		free(c);
		return ret;
	}
	c->dev = dev;
	c->capacity = capacity;
	c->refs = 1;
	c->stats.size = sizeof(c->stats);
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->work_lock, NULL);
	*cache = c;
	return 0;
}

static void kernel_free(struct spyre_kernel *k)
{
	struct spyre_kcache *c = k->cache;

	spyre_program_unload(k->prog);	/* waits for the launches of the program */
	free(k);
	kcache_put(c);
}

static void kernel_put(struct spyre_kernel *k)
{
	if (__atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL) == 0)
		kernel_free(k);
}

SPYRE_EXPORT void spyre_kcache_destroy(spyre_kcache_t *c)
{
	struct spyre_kernel *k, *n;

	if (!c)
		return;
	spyre_device_synchronize(c->dev);
	pthread_mutex_lock(&c->lock);
	k = c->head;
	c->head = NULL;
	memset(c->bucket, 0, sizeof(c->bucket));
	c->stats.kernels = 0;
	c->capacity = 0;	/* kernels got after this are not kept */
	for (n = k; n; n = n->next)
		n->cached = false;
	pthread_mutex_unlock(&c->lock);
	/* the cache's references; a kernel still held is unloaded by its last spyre_kernel_put() */
	for (; k; k = n) {
		n = k->next;
		kernel_put(k);
	}
	kcache_put(c);
}

SPYRE_EXPORT int spyre_kcache_get_stats(spyre_kcache_t *c, struct spyre_kcache_stats *st)
{
	struct spyre_kcache_stats s;
	uint32_t n;

	if (!c || !st || st->size < 8)
		return spyre_error(-EINVAL, "spyre_kcache_get_stats: NULL argument or size not set");
	pthread_mutex_lock(&c->lock);
	s = c->stats;
	pthread_mutex_unlock(&c->lock);
	n = st->size < sizeof(s) ? st->size : (uint32_t)sizeof(s);
	memcpy((char *)st + 4, (char *)&s + 4, n - 4);
	return 0;
}

SPYRE_EXPORT int spyre_kernel_get(spyre_kcache_t *c, const struct spyre_kdesc *desc, spyre_kernel_t **out)
{
	struct spyre_prog_view v;
	struct spyre_kernel *k;
	struct spyre_kdesc d;
	uint64_t t0;
	uint32_t b;
	void *img;
	size_t sz;
	int ret;

	if (!c || !desc || !out)
		return spyre_error(-EINVAL, "spyre_kernel_get: NULL argument");
	ret = normalize(desc, &d);
	if (ret)
		return ret;
	/* resolve against the device: its cores and scratchpad */
	if (!desc->cores)
		d.cores = c->props.num_cores;
	if (d.cores > c->props.num_cores)
		return spyre_error(-EINVAL, "%s: %u cores requested, the device has %u", kg_ops[d.op].name,
				   d.cores, c->props.num_cores);
	if (!desc->sp_bytes)
		d.sp_bytes = c->props.scratchpad_bytes;
	if (d.sp_bytes > c->props.scratchpad_bytes || d.sp_bytes % SPYRE_STICK_BYTES ||
	    d.sp_bytes < 16 * SPYRE_STICK_BYTES)
		return spyre_error(-EINVAL, "%s: a scratchpad of %u bytes; the device has %u per core",
				   kg_ops[d.op].name, d.sp_bytes, c->props.scratchpad_bytes);

	b = kcache_hash(&d);
	pthread_mutex_lock(&c->lock);
	k = kcache_find(c, &d, b);
	if (k) {
		__atomic_add_fetch(&k->refs, 1, __ATOMIC_RELAXED);
		c->stats.hits++;
		pthread_mutex_unlock(&c->lock);
		*out = k;
		return 0;
	}
	c->stats.misses++;
	pthread_mutex_unlock(&c->lock);

	t0 = spyre_now_ns();
	k = calloc(1, sizeof(*k));
	if (!k)
		return spyre_error(-ENOMEM, "spyre_kernel_get");
	k->info.size = sizeof(k->info);
	/* the container is checked once, by the build; the load reads the checked view */
	ret = kernel_build(&d, &img, &sz, &k->info, &v);
	if (!ret) {
		ret = spyre_program_load_checked(c->dev, &v, &k->prog);
		free(img);
	}
	if (ret) {
		free(k);
		return ret;
	}
	k->key = d;
	k->cache = c;
	k->refs = 1;
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&c->lock);
	c->stats.build_ns += spyre_now_ns() - t0;
	if (c->capacity && c->stats.kernels < c->capacity) {
		struct spyre_kernel *o;

		/* another thread may have built the same kernel meanwhile: use the first */
		o = kcache_find(c, &d, b);
		if (o) {
			__atomic_add_fetch(&o->refs, 1, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&c->lock);
			kernel_put(k);
			*out = o;
			return 0;
		}
		k->cached = true;
		k->refs++;	/* the cache's; not yet visible to other threads */
		k->next = c->head;
		c->head = k;
		k->hnext = c->bucket[b];
		c->bucket[b] = k;
		c->stats.kernels++;
	}
	pthread_mutex_unlock(&c->lock);
	*out = k;
	return 0;
}

SPYRE_EXPORT void spyre_kernel_put(spyre_kernel_t *k)
{
	if (k)
		kernel_put(k);
}

SPYRE_EXPORT int spyre_kernel_get_info(const spyre_kernel_t *k, struct spyre_kernel_info *info)
{
	uint32_t n;

	if (!k || !info || info->size < 8)
		return spyre_error(-EINVAL, "spyre_kernel_get_info: NULL argument or size not set");
	n = info->size < sizeof(k->info) ? info->size : (uint32_t)sizeof(k->info);
	memcpy((char *)info + 4, (const char *)&k->info + 4, n - 4);
	return 0;
}

SPYRE_EXPORT spyre_program_t *spyre_kernel_program(const spyre_kernel_t *k)
{
	return k ? k->prog : NULL;
}

/*
 * The work buffer of stream @s, at least @bytes: the stream's (grown if
 * needed; the old one is freed once the stream's earlier launches are
 * done), or a new one. Under c->work_lock.
 */
static int stream_work(struct spyre_kcache *c, spyre_stream_t *s, uint64_t bytes, spyre_dptr_t *out)
{
	struct kwork *w = NULL;
	int ret;

	for (uint32_t i = 0; i < c->nwork; i++)
		if (c->work[i].stream == s)
			w = &c->work[i];
	if (w && w->bytes >= bytes) {
		*out = w->ptr;
		return 0;
	}
	if (w) {
		/* launches queued on the stream may still read it; none on another stream does */
		ret = spyre_stream_synchronize(s);
		if (ret)
			return ret;
		spyre_free(c->dev, w->ptr);
		*w = c->work[--c->nwork];
	} else if (c->nwork == KWORK_MAX) {
		/* streams come and go (a destroyed one waited for its work): start over */
		ret = spyre_device_synchronize(c->dev);
		if (ret)
			return ret;
		for (uint32_t i = 0; i < c->nwork; i++)
			spyre_free(c->dev, c->work[i].ptr);
		c->nwork = 0;
	}
	w = &c->work[c->nwork];
	w->stream = s;
	w->bytes = kg_max64(bytes, 1ull << 20);
	ret = spyre_malloc(c->dev, w->bytes, &w->ptr);
	if (ret)
		return ret;
	c->nwork++;
	*out = w->ptr;
	return 0;
}

SPYRE_EXPORT int spyre_kernel_launch(spyre_stream_t *s, spyre_kernel_t *k, const spyre_dptr_t *slots,
				     uint32_t nslots, const uint64_t *scalars, uint32_t nscalars)
{
	spyre_dptr_t all[SPYRE_LAUNCH_MAX_ARGS];
	struct spyre_kcache *c;
	int ret;

	if (!s || !k)
		return spyre_error(-EINVAL, "spyre_kernel_launch: NULL argument");
	if (!k->info.work_bytes || nslots + 1 != k->info.num_slots || (nslots && !slots))
		return spyre_launch(s, k->prog, k->info.core_mask, slots, nslots, scalars, nscalars);
	/* the work slot left out: the cache's buffer for this stream */
	c = k->cache;
	memcpy(all, slots, nslots * sizeof(*slots));
	all[nslots] = 0;
	pthread_mutex_lock(&c->work_lock);
	ret = stream_work(c, s, k->info.work_bytes, &all[nslots]);
	if (!ret)
		ret = spyre_launch(s, k->prog, k->info.core_mask, all, nslots + 1, scalars, nscalars);
	pthread_mutex_unlock(&c->work_lock);
	if (ret && !all[nslots]) {
		char why[256];

		snprintf(why, sizeof(why), "%s", spyre_last_error());
		spyre_error(ret, "%s: work memory of %llu bytes: %s", k->info.name,
			    (unsigned long long)k->info.work_bytes, why);
	}
	return ret;
}

/* ---- layout helpers ------------------------------------------------------ */

SPYRE_EXPORT uint64_t spyre_kernel_pitch(uint64_t cols, uint32_t dtype)
{
	return kg_pitch(cols, dtype);
}

SPYRE_EXPORT uint64_t spyre_kernel_grouped_pitch(uint64_t cols, uint64_t group, uint32_t dtype)
{
	if (!group || group >= cols)
		return kg_pitch(cols, dtype);
	return (cols / group) * kg_pitch(group, dtype) + (cols % group ? kg_pitch(cols % group, dtype) : 0);
}

/* Byte offset of element j of a (grouped) row. */
static uint64_t elem_off(uint64_t j, uint64_t group, uint32_t dtype)
{
	if (!group)
		return j * SPYRE_DT_SIZE(dtype);
	return (j / group) * kg_pitch(group, dtype) + (j % group) * SPYRE_DT_SIZE(dtype);
}

SPYRE_EXPORT void spyre_kernel_pack(void *dev_layout, const float *host, uint64_t rows, uint64_t cols,
				    uint64_t group, uint32_t dtype)
{
	uint64_t pitch = spyre_kernel_grouped_pitch(cols, group, dtype);

	if (group >= cols)
		group = 0;
	memset(dev_layout, 0, rows * pitch);
	for (uint64_t r = 0; r < rows; r++)
		for (uint64_t j = 0; j < cols; j++)
			spyre_store_f32((uint8_t *)dev_layout + r * pitch + elem_off(j, group, dtype), dtype, 0,
					host[r * cols + j]);
}

/*
 * The device layout of weight slot @slot of @d: rows x cols of @dt grouped
 * by @group, and whether row r, column j is the weight's (out j, in r)
 * (@out_cols) or (out r, in j). -EINVAL for a slot that is not a weight.
 */
static int weight_layout(const struct spyre_kdesc *d, uint32_t slot, uint64_t *rows, uint64_t *cols,
			 uint64_t *group, uint32_t *dt, bool *out_cols)
{
	bool nk = d->flags & SPYRE_KF_WEIGHT_NK, gelu = d->flags & SPYRE_KF_GELU;

	*dt = d->dtype;
	*group = 0;
	if (d->op == SPYRE_KOP_LINEAR && slot == 1) {
		*rows = nk ? d->n : d->k;
		*cols = nk ? d->k : d->n;
		*group = nk ? d->in_group : d->out_group;
		*out_cols = !nk;
		return 0;
	}
	if (d->op == SPYRE_KOP_LINEAR && slot == 2 && (d->flags & SPYRE_KF_BIAS)) {
		*rows = 1;
		*cols = d->n;
		*group = d->out_group;
		*dt = SPYRE_DT_FP32;
		*out_cols = true;
		return 0;
	}
	if (d->op == SPYRE_KOP_MLP && slot >= 1 && slot <= (gelu ? 2u : 3u)) {
		bool down = slot == (gelu ? 2u : 3u);

		/* Wg, Wu [k x n] (in = hidden = k rows), Wd [n x k] (in = ffn = n rows): out in the columns */
		*rows = down ? d->n : d->k;
		*cols = down ? d->k : d->n;
		*out_cols = true;
		return 0;
	}
	return spyre_error(-EINVAL, "spyre_kernel_pack_weight: slot %u of %s is not a weight", slot,
			   spyre_kernel_op_name(d->op));
}

SPYRE_EXPORT int spyre_kernel_pack_weight(const struct spyre_kdesc *desc, uint32_t slot, uint32_t layout,
					  const void *src, uint32_t src_dtype, void *dst, size_t *dst_bytes)
{
	struct spyre_kdesc d;
	uint64_t rows = 0, cols = 0, group = 0, pitch, bytes;
	uint32_t dt = 0;
	bool out_cols = false, src_out_rows;
	int ret;

	if (!dst_bytes || (dst && !src))
		return spyre_error(-EINVAL, "spyre_kernel_pack_weight: NULL argument");
	ret = normalize(desc, &d);
	if (ret)
		return ret;
	ret = weight_layout(&d, slot, &rows, &cols, &group, &dt, &out_cols);
	if (ret)
		return ret;
	if (layout != SPYRE_KW_OUT_IN && layout != SPYRE_KW_IN_OUT)
		return spyre_error(-EINVAL, "spyre_kernel_pack_weight: layout %u", layout);
	if (src_dtype != SPYRE_DT_FP32 && src_dtype != SPYRE_DT_FP16 && src_dtype != SPYRE_DT_BF16 &&
	    src_dtype != SPYRE_DT_DL16)
		return spyre_error(-EINVAL, "spyre_kernel_pack_weight: source dtype %u is not fp32, fp16, bf16 or dl16",
				   src_dtype);
	if (!rows || !cols)
		return spyre_error(-EINVAL, "spyre_kernel_pack_weight: %s with an empty weight",
				   spyre_kernel_op_name(d.op));
	if (group >= cols)
		group = 0;
	pitch = spyre_kernel_grouped_pitch(cols, group, dt);
	bytes = rows * pitch;
	if (!dst) {
		*dst_bytes = bytes;
		return 0;
	}
	if (*dst_bytes < bytes)
		return spyre_error(-EINVAL, "spyre_kernel_pack_weight: slot %u of %s takes %llu bytes, %zu given",
				   slot, spyre_kernel_op_name(d.op), (unsigned long long)bytes, *dst_bytes);
	/* the source's rows: out ([out x in]) or in; a vector (the bias) reads the same either way */
	src_out_rows = layout == SPYRE_KW_OUT_IN;
	memset(dst, 0, bytes);
	for (uint64_t r = 0; r < rows; r++)
		for (uint64_t j = 0; j < cols; j++) {
			/* device (r, j) is (out j, in r) or (out r, in j); the host matrix is [out x in] or [in x out] */
			uint64_t o = out_cols ? j : r, i = out_cols ? r : j, nout = out_cols ? cols : rows,
				 nin = out_cols ? rows : cols;
			uint64_t idx = src_out_rows ? o * nin + i : i * nout + o;

			spyre_store_f32((uint8_t *)dst + r * pitch + elem_off(j, group, dt), dt, 0,
					spyre_load_f32(src, src_dtype, idx));
		}
	return 0;
}

SPYRE_EXPORT void spyre_kernel_unpack(float *host, const void *dev_layout, uint64_t rows, uint64_t cols,
				      uint64_t group, uint32_t dtype)
{
	uint64_t pitch = spyre_kernel_grouped_pitch(cols, group, dtype);

	if (group >= cols)
		group = 0;
	for (uint64_t r = 0; r < rows; r++)
		for (uint64_t j = 0; j < cols; j++)
			host[r * cols + j] = spyre_load_f32((const uint8_t *)dev_layout + r * pitch +
							    elem_off(j, group, dtype), dtype, 0);
}
