// SPDX-License-Identifier: MIT
/*
 * spyre-generate - greedy text generation (token ids in, token ids out) with
 * a Granite/Llama-style model: its config.json and safetensors weights, or
 * generated weights; on the CPU reference (model/ref.h). The device path
 * comes later as a second backend (struct backend below): main() is parse ->
 * load -> run (prefill, decode loop) -> print, and only run() knows backends.
 *
 * Exit status: 0; 1 for bad input (a file, a field, a tensor, a limit: the
 * message names it) or a failed run; 2 for a bad command line.
 * model/README.md describes the options.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "config.h"
#include "ref.h"
#include "safetensors.h"
#include "weights.h"
#include "device.h"
#include "spyre_isa.h"

/*
 * Host fp32 weights above this are refused (--estimate still works): a ~1 B
 * model (granite-1b, 4.4 GiB) fits, an 8 B one does not. Below it, what the
 * run would hold (the weights, and their rounded copy for a reference at
 * another precision) must also fit the machine's memory.
 */
#define MAX_HOST_WEIGHT_BYTES (8ull << 30)
#define MAX_PROMPT 4096
#define ESTIMATE_CONTEXT 1024u

static const int32_t default_prompt[] = { 1, 2, 3, 4, 5, 6, 7, 8 };

struct options {
	const char *model_dir;		/* --model */
	const char *config;		/* --config NAME|PATH (default tiny) */
	uint64_t seed;
	int32_t prompt[MAX_PROMPT];
	bool prompt_given;		/* --prompt */
	uint32_t prompt_len;		/* --prompt-len: ids drawn once the vocabulary is known */
	uint32_t nprompt;
	uint32_t ntokens;		/* -n */
	unsigned int dtype;		/* --dtype: SPYRE_REF_* */
	const char *save_dir;
	enum spyre_st_dtype save_dtype;
	bool estimate;
	bool quiet;
	int device;			/* --device N, -1: the CPU reference */
	uint32_t tp;			/* --tp N: tensor parallel over cards device .. device + N - 1 (default 1) */
	int dispatch;			/* --dispatch: enum spyre_dispatch, or -1: all four */
	uint32_t sync_every;		/* --sync-every: dispatch d's wait interval (the model checks it) */
	bool sync_set;			/* --sync-every given */
	uint32_t cores;			/* --cores, 0: all */
	bool check;			/* --check: the reference alongside, tokens and logits compared */
	const char *trace;		/* --trace FILE: a Chrome/Perfetto trace of the device run */
};

struct model {
	char label[256];		/* the preset name or the config's path */
	struct spyre_model_config cfg;
	struct spyre_model_weights w;
	char weights_from[4400];
	double load_s;			/* reading or generating the weights */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spyre-generate [options]\n"
		"  --model DIR         DIR/config.json, and DIR/model.safetensors when present\n"
		"                      (else generated weights)\n"
		"  --config NAME|PATH  a preset (tiny, granite-3.3-8b) or a config.json (default tiny)\n"
		"  --seed N            seed of the generated weights (default 1)\n"
		"  --prompt IDS        token ids, comma-separated (default 1,2,3,4,5,6,7,8)\n"
		"  --prompt-len N      instead, a prompt of N ids drawn from the vocabulary (splitmix64 of\n"
		"                      --seed: the same ids on every machine)\n"
		"  -n N                tokens to generate (default 32; 0: none)\n"
		"  --dtype D           reference precision: fp32, fp16, bf16, dl16 (default fp32)\n"
		"  --save DIR          write DIR/config.json and DIR/model.safetensors\n"
		"  --save-dtype D      their dtype: f32, f16, bf16 (default f32)\n"
		"  --estimate          sizes, FLOPs and modeled device time; nothing is allocated\n"
		"  --cpu               run the CPU reference (the default)\n"
		"  --device N          run on spyre card N: weights and KV cache resident, argmax on the card\n"
		"  --tp N              tensor parallel over N cards from --device's (Megatron: heads and MLP\n"
		"                      split, two all-reduces a layer; N divides the heads, KV heads and\n"
		"                      intermediate_size; dispatch a, b or c; default 1)\n"
		"  --dispatch D        build (a: kernels generated every step), patch (b: cached, three-step\n"
		"                      patching), fast (c: cached, patch-free; the default), graph (d: the decode\n"
		"                      step replayed from launch graphs, token and position fed back on the card),\n"
		"                      all (a, b, c, d in turn and a table of the ratios)\n"
		"  --sync-every K      d: the host waits for tokens every K decode steps, 1..256 (default 16)\n"
		"  --cores N           cores the kernels use (default: all)\n"
		"  --check             also run the CPU reference at --dtype: compare tokens and logits\n"
		"  --trace FILE        write a Chrome/Perfetto trace of the device run (spans per step and kernel)\n"
		"  -q, --quiet         no per-token lines\n");
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die_usage(const char *fmt, ...)
{
	va_list ap;

	fputs("spyre-generate: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see --help)\n", stderr);
	exit(2);
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fail(const char *fmt, ...)
{
	va_list ap;

	fputs("spyre-generate: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

static uint64_t parse_u64(const char *opt, const char *s, uint64_t max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		die_usage("%s: '%s' is not a number from 0 to %" PRIu64, opt, s, max);
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		die_usage("%s: '%s' is not a number from 0 to %" PRIu64, opt, s, max);
	return v;
}

static void parse_prompt(const char *s, struct options *o)
{
	const char *p = s;

	o->nprompt = 0;
	for (;;) {
		char num[16];
		size_t n = strcspn(p, ",");

		if (!n || n >= sizeof(num))
			die_usage("--prompt: '%s' is not a comma-separated list of token ids", s);
		if (o->nprompt == MAX_PROMPT)
			die_usage("--prompt: more than %d tokens", MAX_PROMPT);
		memcpy(num, p, n);
		num[n] = 0;
		o->prompt[o->nprompt++] = (int32_t)parse_u64("--prompt", num, INT32_MAX);
		if (!p[n])
			break;
		p += n + 1;
	}
}

static void parse_args(int argc, char **argv, struct options *o)
{
	memset(o, 0, sizeof(*o));
	o->seed = 1;
	o->ntokens = 32;
	o->save_dtype = SPYRE_ST_F32;
	o->device = -1;
	o->tp = 1;
	o->dispatch = SPYRE_DISPATCH_FAST;
	memcpy(o->prompt, default_prompt, sizeof(default_prompt));
	o->nprompt = sizeof(default_prompt) / sizeof(default_prompt[0]);

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool takes = true;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "--cpu")) {
			takes = false;
		} else if (!strcmp(a, "--estimate")) {
			o->estimate = true;
			takes = false;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			o->quiet = true;
			takes = false;
		} else if (!strcmp(a, "--check")) {
			o->check = true;
			takes = false;
		}
		if (!takes)
			continue;
		if (strcmp(a, "--model") && strcmp(a, "--config") && strcmp(a, "--seed") &&
		    strcmp(a, "--prompt") && strcmp(a, "--prompt-len") && strcmp(a, "-n") && strcmp(a, "--dtype") && strcmp(a, "--save") &&
		    strcmp(a, "--save-dtype") && strcmp(a, "--device") && strcmp(a, "--dispatch") &&
		    strcmp(a, "--tp") && strcmp(a, "--cores") && strcmp(a, "--trace") && strcmp(a, "--sync-every"))
			die_usage("unknown option '%s'", a);
		if (!v)
			die_usage("%s needs a value", a);
		i++;
		if (!strcmp(a, "--model")) {
			o->model_dir = v;
		} else if (!strcmp(a, "--config")) {
			o->config = v;
		} else if (!strcmp(a, "--seed")) {
			o->seed = parse_u64(a, v, UINT64_MAX);
		} else if (!strcmp(a, "--prompt")) {
			parse_prompt(v, o);
			o->prompt_given = true;
		} else if (!strcmp(a, "--prompt-len")) {
			o->prompt_len = (uint32_t)parse_u64(a, v, MAX_PROMPT);
			if (!o->prompt_len)
				die_usage("--prompt-len: a prompt has at least 1 token");
		} else if (!strcmp(a, "-n")) {
			o->ntokens = (uint32_t)parse_u64(a, v, 1u << 20);
		} else if (!strcmp(a, "--dtype")) {
			unsigned int d;

			for (d = 0; d < 4 && strcmp(v, spyre_ref_dtype_name(d)); d++)
				;
			if (d == 4)
				die_usage("--dtype: unknown dtype '%s' (valid: fp32, fp16, bf16, dl16)", v);
			o->dtype = d;
		} else if (!strcmp(a, "--device")) {
			o->device = (int)parse_u64(a, v, 255);
		} else if (!strcmp(a, "--tp")) {
			o->tp = (uint32_t)parse_u64(a, v, SPYRE_MODEL_TP_MAX);
			if (!o->tp)
				die_usage("--tp: 0 cards; tensor parallel runs over 1 to %u cards", SPYRE_MODEL_TP_MAX);
		} else if (!strcmp(a, "--cores")) {
			o->cores = (uint32_t)parse_u64(a, v, 32);
		} else if (!strcmp(a, "--dispatch")) {
			if (!strcmp(v, "build") || !strcmp(v, "a"))
				o->dispatch = SPYRE_DISPATCH_BUILD;
			else if (!strcmp(v, "patch") || !strcmp(v, "b"))
				o->dispatch = SPYRE_DISPATCH_PATCH;
			else if (!strcmp(v, "fast") || !strcmp(v, "c"))
				o->dispatch = SPYRE_DISPATCH_FAST;
			else if (!strcmp(v, "graph") || !strcmp(v, "d"))
				o->dispatch = SPYRE_DISPATCH_GRAPH;
			else if (!strcmp(v, "all"))
				o->dispatch = -1;
			else
				die_usage("--dispatch: '%s' is not build, patch, fast, graph or all", v);
		} else if (!strcmp(a, "--sync-every")) {
			/* its range is the model's to check (spyre_dmodel_set_sync_every()) */
			o->sync_every = (uint32_t)parse_u64(a, v, UINT32_MAX);
			o->sync_set = true;
		} else if (!strcmp(a, "--trace")) {
			o->trace = v;
		} else if (!strcmp(a, "--save")) {
			o->save_dir = v;
		} else {
			if (!strcmp(v, "f32"))
				o->save_dtype = SPYRE_ST_F32;
			else if (!strcmp(v, "f16"))
				o->save_dtype = SPYRE_ST_F16;
			else if (!strcmp(v, "bf16"))
				o->save_dtype = SPYRE_ST_BF16;
			else
				die_usage("--save-dtype: unknown dtype '%s' (valid: f32, f16, bf16)", v);
		}
	}
	if (o->prompt_len && o->prompt_given)
		die_usage("--prompt and --prompt-len both give the prompt; give one");
	if (o->model_dir && o->config)
		die_usage("--model and --config both name a config; give one");
	if (o->device < 0 && (o->dispatch != SPYRE_DISPATCH_FAST || o->cores || o->check || o->sync_set))
		die_usage("--dispatch, --cores, --sync-every and --check need --device");
	if (o->device < 0 && o->trace)
		die_usage("--trace needs --device");
	if (o->device < 0 && o->tp != 1)
		die_usage("--tp needs --device");
	if (o->tp > 1 && (o->dispatch == SPYRE_DISPATCH_GRAPH || o->dispatch < 0))
		die_usage("--tp %u: dispatch %s: d (graph replay) does not run with tensor parallelism (the "
			  "all-reduces' ring steps are ordered by the host); use a, b or c", o->tp,
			  o->dispatch < 0 ? "all includes d" : "graph");
}

/* --prompt-len: ids of the splitmix64 stream of the seed mod vocab, the same on every machine. */
static void draw_prompt(struct options *o, uint32_t vocab)
{
	uint64_t x = o->seed ^ 0x70726f6d7074ull;	/* "prompt": not the weights' stream */

	for (uint32_t i = 0; i < o->prompt_len; i++)
		o->prompt[i] = (int32_t)(spyre_splitmix64(&x) % vocab);
	o->nprompt = o->prompt_len;
}

static bool exists(const char *path)
{
	struct stat st;

	return !stat(path, &st);
}

static void human(char *buf, size_t len, double bytes)
{
	if (bytes >= 1024.0 * 1024 * 1024)
		snprintf(buf, len, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
	else if (bytes >= 1024.0 * 1024)
		snprintf(buf, len, "%.2f MiB", bytes / (1024.0 * 1024));
	else
		snprintf(buf, len, "%.1f KiB", bytes / 1024.0);
}

static void human_count(char *buf, size_t len, uint64_t n)
{
	if (n >= 1000000000ull)
		snprintf(buf, len, "%.2f B", (double)n / 1e9);
	else if (n >= 1000000ull)
		snprintf(buf, len, "%.2f M", (double)n / 1e6);
	else
		snprintf(buf, len, "%.1f K", (double)n / 1e3);
}

/* ---- load: the config, then weights (file, or generated) ---- */

static int load_config(const struct options *o, struct model *m)
{
	char err[600];
	const char *c = o->config ? o->config : "tiny";

	if (o->model_dir) {
		char path[4200];

		snprintf(m->label, sizeof(m->label), "%s", o->model_dir);
		snprintf(path, sizeof(path), "%s/config.json", o->model_dir);
		if (spyre_model_config_load(path, &m->cfg, err, sizeof(err)))
			return fail("%s", err);
		return 0;
	}
	snprintf(m->label, sizeof(m->label), "%s", c);
	if (!spyre_model_config_preset(c, &m->cfg))
		return 0;
	if (!strchr(c, '/') && !strstr(c, ".json") && !exists(c))
		die_usage("--config: '%s' is neither a preset (tiny, granite-3.3-8b) nor a file", c);
	if (spyre_model_config_load(c, &m->cfg, err, sizeof(err)))
		return fail("%s", err);
	return 0;
}

static void print_config(const struct model *m)
{
	const struct spyre_model_config *c = &m->cfg;
	uint64_t params = spyre_model_param_count(c);
	char n[32], b32[32], b16[32];

	human_count(n, sizeof(n), params);
	human(b32, sizeof(b32), (double)spyre_model_bytes(c, 4));
	human(b16, sizeof(b16), (double)spyre_model_bytes(c, 2));
	printf("model: %s (%s): %u layers, hidden %u, %u heads (%u KV) x %u, ffn %u, vocab %u, %u positions%s\n",
	       m->label, c->name[0] ? c->name : "unknown", c->layers, c->hidden, c->heads, c->kv_heads, c->head_dim,
	       c->ffn, c->vocab, c->max_pos, c->tied_embeddings ? ", tied embeddings" : "");
	printf("  multipliers: embedding %g, attention %g, residual %g, logits scaling %g; rope theta %g, eps %g\n",
	       c->embedding_multiplier, c->attention_multiplier, c->residual_multiplier, c->logits_scaling,
	       c->rope_theta, c->norm_eps);
	printf("parameters: %" PRIu64 " (%s): %s fp32, %s fp16/bf16/dl16\n", params, n, b32, b16);
}

/*
 * What the host will hold against its memory: the fp32 weights, twice when a
 * reference at another precision keeps a rounded copy (a CPU run or --check).
 */
static int host_fit(const struct options *o, const struct model *m)
{
	bool copy = o->dtype != SPYRE_REF_FP32 && (o->device < 0 || o->check);
	uint64_t need = spyre_model_bytes(&m->cfg, 4) * (copy ? 2 : 1);
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t have = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : UINT64_MAX;
	char n[32], h[32];

	if (need <= have / 10 * 9)
		return 0;
	human(n, sizeof(n), (double)need);
	human(h, sizeof(h), (double)have);
	return fail("%s: the host weights%s need %s, the machine has %s of memory", m->label,
		    copy ? " and the reference's rounded copy" : "", n, h);
}

static int load_weights(const struct options *o, struct model *m)
{
	char err[600], path[4200];

	if (spyre_model_bytes(&m->cfg, 4) > MAX_HOST_WEIGHT_BYTES) {
		char n[32], b[32];

		human_count(n, sizeof(n), spyre_model_param_count(&m->cfg));
		human(b, sizeof(b), (double)spyre_model_bytes(&m->cfg, 4));
		return fail("%s: %s parameters do not fit the %llu GiB limit of host fp32 weights (%s); "
			    "use --estimate", m->label, n, MAX_HOST_WEIGHT_BYTES >> 30, b);
	}
	if (host_fit(o, m))
		return 1;
	if (o->model_dir) {
		snprintf(path, sizeof(path), "%s/model.safetensors", o->model_dir);
		if (exists(path)) {
			if (spyre_model_weights_load_file(&m->cfg, path, &m->w, err, sizeof(err)))
				return fail("%s", err);
			snprintf(m->weights_from, sizeof(m->weights_from), "%s", path);
			return 0;
		}
		snprintf(path, sizeof(path), "%s/model.safetensors.index.json", o->model_dir);
		if (exists(path))
			return fail("%s: sharded checkpoints are not supported yet (want one model.safetensors)",
				    path);
	}
	if (spyre_model_weights_random(&m->cfg, o->seed, &m->w))
		return fail("%s: out of memory for the weights", m->label);
	snprintf(m->weights_from, sizeof(m->weights_from), "generated, seed %" PRIu64 "%s", o->seed,
		 o->model_dir ? " (no model.safetensors)" : "");
	return 0;
}

static int save(const struct options *o, const struct model *m)
{
	char path[4200], err[600];

	if (mkdir(o->save_dir, 0777) && errno != EEXIST)
		return fail("--save: %s: %s", o->save_dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/config.json", o->save_dir);
	if (spyre_model_config_save(&m->cfg, path, err, sizeof(err)))
		return fail("--save: %s", err);
	snprintf(path, sizeof(path), "%s/model.safetensors", o->save_dir);
	if (spyre_model_weights_save(&m->cfg, &m->w, path, o->save_dtype, err, sizeof(err)))
		return fail("--save: %s", err);
	printf("saved: %s/config.json, %s (%s)\n", o->save_dir, path, spyre_st_dtype_name(o->save_dtype));
	return 0;
}

/* ---- estimate ---- */

/*
 * Modeled device time: the kernel library's cost-model estimate of every
 * kernel of a prefill of @prompt tokens and of the decode step after it, in
 * fp16 on 32 cores (model/device.c, spyre_dmodel_estimate), for a KV cache of
 * ESTIMATE_CONTEXT + 64 positions. Nothing runs: no device, no emulator.
 */
static bool estimate_device_time(const struct spyre_model_config *c, double *prefill_s, double *decode_s)
{
	struct spyre_model_config e = *c;
	uint64_t p, d, wb;
	char err[600];

	e.max_pos = ESTIMATE_CONTEXT + 64;
	if (spyre_dmodel_estimate(&e, SPYRE_DT_FP16, SPYRE_MAX_CORES, ESTIMATE_CONTEXT, &p, &d, &wb, err,
				  sizeof(err))) {
		fprintf(stderr, "spyre-generate: estimate: %s\n", err);
		return false;
	}
	*prefill_s = (double)p * 1e-9;
	*decode_s = (double)d * 1e-9;
	return true;
}

static int estimate(const struct model *m)
{
	const struct spyre_model_config *c = &m->cfg;
	double h = c->hidden, q = (double)c->heads * c->head_dim, kv = (double)c->kv_heads * c->head_dim;
	double matmul = c->layers * (h * (2 * q + 2 * kv) + 3 * h * c->ffn);	/* weights per token */
	double lm = (double)c->vocab * h;
	double attn_per_ctx = 4.0 * c->layers * q;		/* QK^T and PV per context position */
	double L = ESTIMATE_CONTEXT;
	double prefill_total = L * 2 * matmul + 2 * lm + attn_per_ctx * (L * (L + 1) / 2);
	double decode = 2 * matmul + 2 * lm + attn_per_ctx * (L + 1);
	double kvb = 2.0 * c->layers * kv * L;
	double ps, ds;
	char b32[32], b16[32], k32[32], k16[32];

	print_config(m);
	human(b32, sizeof(b32), (double)spyre_model_bytes(c, 4));
	human(b16, sizeof(b16), (double)spyre_model_bytes(c, 2));
	human(k32, sizeof(k32), kvb * 4);
	human(k16, sizeof(k16), kvb * 2);
	printf("weights: fp32 %s (%" PRIu64 " bytes), fp16/bf16/dl16 %s (%" PRIu64 " bytes)\n", b32,
	       spyre_model_bytes(c, 4), b16, spyre_model_bytes(c, 2));
	printf("KV cache for %u positions: fp32 %s, fp16/bf16/dl16 %s\n", ESTIMATE_CONTEXT, k32, k16);
	printf("FLOPs: prefill of %u tokens %.4g (%.4g per token); decode at position %u %.4g per token\n",
	       ESTIMATE_CONTEXT, prefill_total, prefill_total / L, ESTIMATE_CONTEXT, decode);
	if (!estimate_device_time(c, &ps, &ds))
		return 1;
	printf("modeled device time (fp16, %u cores, kernel library cost model): prefill of %u tokens %.3f ms "
	       "(%.1f us per token), decode at position %u %.3f ms per token\n", SPYRE_MAX_CORES,
	       ESTIMATE_CONTEXT, ps * 1e3, ps * 1e6 / L, ESTIMATE_CONTEXT, ds * 1e3);
	return 0;
}

/* ---- run: a backend's prefill and decode loop ---- */

struct backend {
	const char *name;
	void *ctx;
	int (*prefill)(void *ctx, const int32_t *tokens, uint32_t n, float *logits);
	int (*decode)(void *ctx, int32_t token, float *logits);
	const char *(*error)(void *ctx);
	void (*destroy)(void *ctx);
};

static int cpu_prefill(void *ctx, const int32_t *tokens, uint32_t n, float *logits)
{
	return spyre_ref_prefill(ctx, tokens, n, logits);
}

static int cpu_decode(void *ctx, int32_t token, float *logits)
{
	return spyre_ref_decode(ctx, token, logits);
}

static const char *cpu_error(void *ctx)
{
	return spyre_ref_error(ctx);
}

static void cpu_destroy(void *ctx)
{
	spyre_ref_free(ctx);
}

static int cpu_backend(const struct options *o, const struct model *m, struct backend *b)
{
	static char name[64];

	snprintf(name, sizeof(name), "cpu reference, %s activations", spyre_ref_dtype_name(o->dtype));
	b->name = name;
	b->ctx = spyre_ref_new(&m->cfg, &m->w, o->dtype);
	b->prefill = cpu_prefill;
	b->decode = cpu_decode;
	b->error = cpu_error;
	b->destroy = cpu_destroy;
	return b->ctx ? 0 : fail("%s: out of memory for the reference", m->label);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* (top1 - top2) / max |logit|: how safely another implementation picks the same token. */
static double margin(const float *l, uint32_t n, int32_t best)
{
	float second = -INFINITY, mx = 0.0f;

	for (uint32_t i = 0; i < n; i++) {
		if ((int32_t)i != best && l[i] > second)
			second = l[i];
		if (fabsf(l[i]) > mx)
			mx = fabsf(l[i]);
	}
	return mx > 0 && n > 1 ? (double)(l[best] - second) / mx : 0.0;
}

static int run(const struct options *o, const struct model *m, const struct backend *b)
{
	const struct spyre_model_config *c = &m->cfg;
	float *logits = malloc((size_t)c->vocab * sizeof(float));
	int32_t *out = malloc(((size_t)o->ntokens + 1) * sizeof(int32_t));
	double t, step, prefill_s, decode_total = 0, min_margin = INFINITY;
	int rc = 1;

	if (!logits || !out) {
		fail("out of memory");
		goto done;
	}
	t = now();
	if (b->prefill(b->ctx, o->prompt, o->nprompt, logits)) {
		fail("prefill: %s", b->error(b->ctx));
		goto done;
	}
	prefill_s = step = now() - t;
	printf("prefill: %u tokens in %.3f ms\n", o->nprompt, prefill_s * 1e3);
	/* token i comes from the logits of the previous step: the prefill, then decode steps */
	for (uint32_t i = 0; i < o->ntokens; i++) {
		double mg;

		out[i] = spyre_argmax(logits, c->vocab);
		mg = margin(logits, c->vocab, out[i]);
		if (mg < min_margin)
			min_margin = mg;
		if (!o->quiet)
			printf("token %u: %d  (%.3f ms, margin %.4f)\n", i + 1, out[i], step * 1e3, mg);
		if (i + 1 == o->ntokens)
			break;
		t = now();
		if (b->decode(b->ctx, out[i], logits)) {
			fail("decode of token %u: %s", i + 2, b->error(b->ctx));
			goto done;
		}
		step = now() - t;
		decode_total += step;
	}
	printf("generated: %u tokens:", o->ntokens);
	for (uint32_t i = 0; i < o->ntokens; i++)
		printf(" %d", out[i]);
	printf("\n");
	printf("summary: prefill %.3f ms (%u tokens); %u decode steps %.3f ms (%.3f ms per token); "
	       "smallest margin %.4f; host time, %s\n", prefill_s * 1e3, o->nprompt, o->ntokens - 1,
	       decode_total * 1e3, o->ntokens > 1 ? decode_total * 1e3 / (o->ntokens - 1) : 0.0, min_margin,
	       b->name);
	rc = 0;
done:
	free(logits);
	free(out);
	return rc;
}

/* ---- the device ---- */

static const char *const dispatch_names[] = {
	[SPYRE_DISPATCH_BUILD] = "a: build every step",
	[SPYRE_DISPATCH_PATCH] = "b: cached + patching",
	[SPYRE_DISPATCH_FAST] = "c: cached + patch-free",
	[SPYRE_DISPATCH_GRAPH] = "d: graph replay",
};
#define NDISPATCH 4

/* What a run of prefill + decode cost, per step. */
struct totals {
	struct spyre_step_stats prefill;
	struct spyre_step_stats decode;		/* sums over the decode steps */
	uint32_t steps;				/* decode steps */
	uint32_t mismatches;			/* --check: tokens the reference picks differently */
	double worst_logit_err;			/* --check: max |device - reference| / max |reference| */
};

/* Logit tolerance of --check, relative to the largest |logit|: see model/README.md. */
static double check_tolerance(unsigned int dt)
{
	switch (dt) {
	case SPYRE_DT_FP32:
		return 1e-4;
	case SPYRE_DT_FP16:
		return 2e-2;
	case SPYRE_DT_DL16:
		return 4e-2;
	default:
		return 1e-1;
	}
}

static void add_stats(struct spyre_step_stats *t, const struct spyre_step_stats *s)
{
	t->host_ns += s->host_ns;
	t->dispatch_ns += s->dispatch_ns;
	t->device_ns += s->device_ns;
	t->device_ns_sum += s->device_ns_sum;
	t->launches += s->launches;
	t->utilization += s->utilization;
	t->h2d_bytes += s->h2d_bytes;
	t->arg_bytes += s->arg_bytes;
	t->upload_bytes += s->upload_bytes;
	t->d2h_bytes += s->d2h_bytes;
	t->kernel_hits += s->kernel_hits;
	t->kernel_misses += s->kernel_misses;
}

static double logit_err(const float *a, const float *ref, uint32_t n)
{
	double mx = 0, worst = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (fabs(ref[i]) > mx)
			mx = fabs(ref[i]);
		if (fabs((double)a[i] - ref[i]) > worst || a[i] != a[i])
			worst = a[i] != a[i] ? INFINITY : fabs((double)a[i] - ref[i]);
	}
	return mx > 0 ? worst / mx : worst;
}

/*
 * Prefill and greedy decode on the device; with @ref, the reference runs on
 * the device's tokens (teacher forced) and each step's token and logits are
 * compared. Tokens go to @out.
 */
static int device_generate(const struct options *o, const struct model *m, struct spyre_dmodel *dm,
			   struct spyre_ref *ref, bool print, int32_t *out, struct totals *t)
{
	const struct spyre_model_config *c = &m->cfg;
	uint32_t n = o->ntokens ? o->ntokens - 1 : 0;	/* decode steps */
	float *dl = o->check ? malloc((size_t)c->vocab * sizeof(float) * (n + 1)) : NULL;
	float *rl = o->check ? malloc((size_t)c->vocab * sizeof(float)) : NULL;
	struct spyre_step_stats *st = calloc(n + 1, sizeof(*st));
	int32_t tok;
	int rc = 1;

	memset(t, 0, sizeof(*t));
	if ((o->check && (!dl || !rl)) || !st) {
		fail("out of memory");
		goto done;
	}
	if (spyre_dmodel_reset(dm)) {
		fail("%s", spyre_dmodel_error(dm));
		goto done;
	}
	if (ref)
		spyre_ref_reset(ref);
	if (spyre_dmodel_prefill(dm, o->prompt, o->nprompt, &tok, dl, &st[0])) {
		fail("prefill on the device: %s", spyre_dmodel_error(dm));
		goto done;
	}
	t->prefill = st[0];
	out[0] = tok;
	/* every decode step at once: dispatch d feeds tokens back on the card, waiting every --sync-every steps */
	if (n && spyre_dmodel_decode_steps(dm, n, out + 1, dl ? dl + c->vocab : NULL, st + 1)) {
		fail("decode on the device: %s", spyre_dmodel_error(dm));
		goto done;
	}
	if (ref && spyre_ref_prefill(ref, o->prompt, o->nprompt, rl)) {
		fail("reference prefill: %s", spyre_ref_error(ref));
		goto done;
	}
	for (uint32_t i = 0; i < o->ntokens; i++) {
		if (i) {
			add_stats(&t->decode, &st[i]);
			t->steps++;
		}
		if (ref) {
			/* teacher forced: the reference's logits after the device's tokens */
			if (i && spyre_ref_decode(ref, out[i - 1], rl)) {
				fail("reference decode: %s", spyre_ref_error(ref));
				goto done;
			}
			double e = logit_err(dl + (size_t)i * c->vocab, rl, c->vocab);
			int32_t want = spyre_argmax(rl, c->vocab);

			if (e > t->worst_logit_err)
				t->worst_logit_err = e;
			if (want != out[i]) {
				t->mismatches++;
				printf("# token %u: the device chose %d, the reference %d (margin %.4f)\n", i + 1, out[i],
				       want, margin(rl, c->vocab, want));
			}
		}
		if (print)
			printf("token %u: %d  host %.3f ms (dispatch %.3f ms), device %.1f us modeled, "
			       "%.0f%% core use, %" PRIu64 " launches, H2D copies %" PRIu64 " B, "
			       "launch args %" PRIu64 " B%s\n", i + 1, out[i], st[i].host_ns * 1e-6,
			       st[i].dispatch_ns * 1e-6, st[i].device_ns * 1e-3, st[i].utilization * 100, st[i].launches,
			       st[i].h2d_bytes, st[i].arg_bytes, i ? "" : " (prefill)");
	}
	rc = 0;
done:
	free(st);
	free(dl);
	free(rl);
	return rc;
}

static double per(uint64_t v, uint32_t n)
{
	return n ? (double)v / n : 0;
}

static void print_summary(const struct options *o, const struct totals *t, spyre_kcache_t *kc, int dispatch)
{
	uint32_t n = t->steps;

	printf("prefill (%u tokens): host %.3f ms (dispatch %.3f ms), device %.1f us modeled, %.0f%% core use, "
	       "%" PRIu64 " launches, %" PRIu64 " kernels built\n", o->nprompt, t->prefill.host_ns * 1e-6,
	       t->prefill.dispatch_ns * 1e-6, t->prefill.device_ns * 1e-3, t->prefill.utilization * 100,
	       t->prefill.launches, t->prefill.kernel_misses);
	if (n)
		printf("decode (%u steps, per token): host %.3f ms (%.3f steps/s; dispatch %.3f ms), device %.1f us modeled, "
		       "%.0f%% core use, %.0f launches; H2D per step: %.0f B of copies, %.0f B of launch arguments "
		       "(%s; weights and KV cache stay on the card); "
		       "kernel cache during decode: %" PRIu64 " hits, %" PRIu64 " misses (%.1f%% hits)\n", n,
		       per(t->decode.host_ns, n) * 1e-6, t->decode.host_ns ? n * 1e9 / t->decode.host_ns : 0.0,
		       per(t->decode.dispatch_ns, n) * 1e-6,
		       per(t->decode.device_ns, n) * 1e-3, t->decode.utilization / n * 100,
		       per(t->decode.launches, n), per(t->decode.h2d_bytes, n), per(t->decode.arg_bytes, n),
		       dispatch == SPYRE_DISPATCH_GRAPH ? "the token is the last argmax, on the card; the graphs' "
		       "argument blocks are written once" : "the token id is an 8-byte launch scalar",
		       t->decode.kernel_hits, t->decode.kernel_misses,
		       t->decode.kernel_hits + t->decode.kernel_misses ?
		       100.0 * t->decode.kernel_hits / (t->decode.kernel_hits + t->decode.kernel_misses) : 0.0);
	if (kc) {
		struct spyre_kcache_stats ks = { .size = sizeof(ks) };

		if (!spyre_kcache_get_stats(kc, &ks))
			printf("kernel cache: %u kernels, %" PRIu64 " hits, %" PRIu64 " misses, %.3f ms building\n",
			       ks.kernels, ks.hits, ks.misses, ks.build_ns * 1e-6);
	}
}

/* Whether the card runs in timed mode (tools/vm/run --timed boots with spyre.timed=1). */
static bool timed_mode(void)
{
	char line[4096];
	FILE *f = fopen("/proc/cmdline", "r");
	bool timed = false;

	if (f) {
		timed = fgets(line, sizeof(line), f) && strstr(line, "spyre.timed=1");
		fclose(f);
	}
	return timed;
}

static int run_device(const struct options *o, const struct model *m)
{
	struct spyre_dmodel_opts dopts = { .dtype = o->dtype, .cores = o->cores,
					   .dispatch = o->dispatch < 0 ? SPYRE_DISPATCH_BUILD :
						       (enum spyre_dispatch)o->dispatch };
	struct totals t[NDISPATCH];
	int32_t *out[NDISPATCH] = { 0 };
	struct spyre_ref *ref = NULL;
	struct spyre_dmodel *dm = NULL;
	spyre_device_t *dev[SPYRE_MODEL_TP_MAX] = { 0 };
	char err[600], cards[32];
	int rc = 1, first = o->dispatch < 0 ? 0 : o->dispatch, last = o->dispatch < 0 ? NDISPATCH - 1 : o->dispatch;
	double t0;

	if (o->trace && spyre_trace_start(o->trace))
		return fail("--trace: %s", spyre_last_error());
	if (o->tp > 1)
		snprintf(cards, sizeof(cards), "cards %d..%d", o->device, o->device + (int)o->tp - 1);
	else
		snprintf(cards, sizeof(cards), "card %d", o->device);
	for (uint32_t r = 0; r < o->tp; r++)
		if (spyre_device_open(o->device + (int)r, &dev[r])) {
			fail("--device %d: %s", o->device + (int)r, spyre_last_error());
			goto done;
		}
	t0 = now();
	if (spyre_dmodel_new_tp(dev, o->tp, &m->cfg, &m->w, &dopts, &dm, err, sizeof(err))) {
		fail("%s on %s: %s", m->label, cards, err);
		goto done;
	}
	printf("upload: weights packed to %s and resident on %s in %.1f s\n", spyre_ref_dtype_name(o->dtype),
	       cards, now() - t0);
	if (o->sync_set && spyre_dmodel_set_sync_every(dm, o->sync_every)) {
		fail("--sync-every: %s", spyre_dmodel_error(dm));
		goto done;
	}
	if (o->check && !(ref = spyre_ref_new(&m->cfg, &m->w, o->dtype))) {
		fail("out of memory for the reference");
		goto done;
	}
	if (o->tp > 1)
		printf("backend: spyre %s, tensor parallel over %u (heads and MLP split, 2 all-reduces a layer, LM "
		       "head on the first), %s, %s cores each\n", cards, o->tp, spyre_ref_dtype_name(o->dtype),
		       o->cores ? "some" : "all");
	else
		printf("backend: spyre card %d, %s, %s cores\n", o->device, spyre_ref_dtype_name(o->dtype),
		       o->cores ? "some" : "all");
	printf("prompt: %u tokens:", o->nprompt);
	for (uint32_t i = 0; i < o->nprompt; i++)
		printf(" %d", o->prompt[i]);
	printf("\n");
	for (int d = first; d <= last; d++) {
		out[d] = calloc(o->ntokens + 1, sizeof(int32_t));
		if (!out[d] || spyre_dmodel_set_dispatch(dm, (enum spyre_dispatch)d)) {
			fail("dispatch %s: %s", dispatch_names[d], out[d] ? spyre_dmodel_error(dm) : "out of memory");
			goto done;
		}
		printf("== dispatch %s\n", dispatch_names[d]);
		if (device_generate(o, m, dm, ref, !o->quiet && first == last, out[d], &t[d]))
			goto done;
		printf("generated: %u tokens:", o->ntokens);
		for (uint32_t i = 0; i < o->ntokens; i++)
			printf(" %d", out[d][i]);
		printf("\n");
		print_summary(o, &t[d], spyre_dmodel_kcache(dm), d);
		if (o->tp > 1 && t[d].steps)
			printf("tensor parallel over %u cards: decode device time per token %.1f us on the busiest card, "
			       "%.1f us on all cards together (modeled; the all-reduces' ADDs included, their peer "
			       "copies not); prefill %.1f us / %.1f us\n", o->tp, per(t[d].decode.device_ns, t[d].steps) * 1e-3,
			       per(t[d].decode.device_ns_sum, t[d].steps) * 1e-3, t[d].prefill.device_ns * 1e-3,
			       t[d].prefill.device_ns_sum * 1e-3);
		if (ref) {
			printf("check: %u of %u tokens as the reference (%s); largest logit difference %.2e of the "
			       "largest logit (tolerance %.0e)\n", o->ntokens - t[d].mismatches, o->ntokens,
			       spyre_ref_dtype_name(o->dtype), t[d].worst_logit_err, check_tolerance(o->dtype));
			if (t[d].mismatches || !(t[d].worst_logit_err <= check_tolerance(o->dtype))) {
				fail("check failed: the device and the reference disagree");
				goto done;
			}
		}
		if (d > first && memcmp(out[d], out[first], o->ntokens * sizeof(int32_t))) {
			fail("dispatch %s generated other tokens than %s", dispatch_names[d], dispatch_names[first]);
			goto done;
		}
	}
	if (first != last) {
		uint32_t n = t[0].steps;

		printf("== dispatch: host time per token (the host's part of the critical path; the device's modeled "
		       "time is the same in a, b, c; d reads its caches through the paged kernels; card busy: decode "
		       "device time / decode host time)\n");
		printf("%-24s %14s %14s %16s %16s %10s\n", "", "prefill ms", "decode ms", "prefill dev us",
		       "decode dev us", "card busy");
		for (int d = 0; d < NDISPATCH; d++)
			printf("%-24s %14.3f %14.3f %16.1f %16.1f %9.1f%%\n", dispatch_names[d],
			       t[d].prefill.host_ns * 1e-6, per(t[d].decode.host_ns, n) * 1e-6,
			       t[d].prefill.device_ns * 1e-3, per(t[d].decode.device_ns, n) * 1e-3,
			       t[d].decode.host_ns ? 100.0 * t[d].decode.device_ns / t[d].decode.host_ns : 0.0);
		printf("%-24s %13.1f%% %13.1f%%   published: +9.9%% prefill, +13.6%% decode\n",
		       "b vs a (faster by)", 100.0 * ((double)t[0].prefill.host_ns / t[1].prefill.host_ns - 1),
		       100.0 * ((double)t[0].decode.host_ns / t[1].decode.host_ns - 1));
		printf("%-24s %13.2fx %13.2fx   published: 1.7x prefill, 2.4x decode\n", "c vs b (speed-up)",
		       (double)t[1].prefill.host_ns / t[2].prefill.host_ns,
		       (double)t[1].decode.host_ns / t[2].decode.host_ns);
		printf("%-24s %13.2fx %13.2fx   d: host time per decode token / the card's %.2fx (target <= 1.25x)\n",
		       "d vs c (speed-up)", (double)t[2].prefill.host_ns / t[3].prefill.host_ns,
		       (double)t[2].decode.host_ns / t[3].decode.host_ns,
		       t[3].decode.device_ns ? (double)t[3].decode.host_ns / t[3].decode.device_ns : 0.0);
		printf("(%s; dispatch-only times per decode token: a %.3f ms, b %.3f ms, c %.3f ms, d %.3f ms)\n",
		       timed_mode() ? "timed mode: guest CPU time counted by instructions, the card taking its "
				      "modeled time (docs/timed-mode.md)" :
				      "host times here include the emulated card's run time under QEMU TCG",
		       per(t[0].decode.dispatch_ns, n) * 1e-6, per(t[1].decode.dispatch_ns, n) * 1e-6,
		       per(t[2].decode.dispatch_ns, n) * 1e-6, per(t[3].decode.dispatch_ns, n) * 1e-6);
	}
	rc = 0;
done:
	for (int d = 0; d < NDISPATCH; d++)
		free(out[d]);
	spyre_ref_free(ref);
	spyre_dmodel_free(dm);
	for (uint32_t r = 0; r < o->tp; r++)
		if (dev[r])
			spyre_device_close(dev[r]);
	if (o->trace) {
		int n = spyre_trace_stop();

		if (n < 0)
			return fail("--trace: %s", spyre_last_error());
		printf("trace: %s, %d events (open it in ui.perfetto.dev)\n", o->trace, n);
	}
	return rc;
}

/* Before any weight is made or read: does the model fit the card? */
static int check_device_fit(const struct options *o, const struct model *m)
{
	struct spyre_model_config sc;
	spyre_device_t *dev;
	char err[600];
	int ret, count;

	if (spyre_model_config_tp(&m->cfg, o->tp, &sc, err, sizeof(err)))
		return fail("--tp %u: %s: %s", o->tp, m->label, err);
	count = spyre_device_count();
	if (o->tp > 1 && (int64_t)o->device + o->tp > count)
		return fail("--tp %u from card %d needs cards %d..%d; this machine has %d card%s", o->tp, o->device,
			    o->device, o->device + (int)o->tp - 1, count, count == 1 ? "" : "s");
	/* each card holds its shard */
	for (uint32_t r = 0; r < o->tp; r++) {
		if (spyre_device_open(o->device + (int)r, &dev))
			return fail("--device %d: %s", o->device + (int)r, spyre_last_error());
		ret = spyre_dmodel_check_fit(dev, &sc, o->dtype, o->tp, err, sizeof(err));
		spyre_device_close(dev);
		if (ret)
			return fail("%s on card %d: %s; try --estimate%s", m->label, o->device + (int)r, err,
				    o->tp > 1 ? " (this is its shard of the --tp split)" : "");
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct options *o = calloc(1, sizeof(*o));
	struct model m;
	struct backend b;
	int rc;

	if (!o)
		return fail("out of memory");
	parse_args(argc, argv, o);
	memset(&m, 0, sizeof(m));
	if (load_config(o, &m)) {
		free(o);
		return 1;
	}
	if (o->estimate) {
		rc = estimate(&m);
		free(o);
		return rc;
	}
	if (o->prompt_len)
		draw_prompt(o, m.cfg.vocab);
	for (uint32_t i = 0; i < o->nprompt; i++)
		if ((uint32_t)o->prompt[i] >= m.cfg.vocab) {
			fail("--prompt: token %u (%d) is not below vocab_size (%u) of %s", i + 1, o->prompt[i],
			     m.cfg.vocab, m.label);
			free(o);
			return 1;
		}
	if (o->ntokens && (uint64_t)o->nprompt + o->ntokens - 1 > m.cfg.max_pos) {
		fail("the prompt (%u tokens) and %u generated tokens need %u positions; %s has "
		     "max_position_embeddings %u", o->nprompt, o->ntokens, o->nprompt + o->ntokens - 1, m.label,
		     m.cfg.max_pos);
		free(o);
		return 1;
	}
	if (o->device >= 0 && o->ntokens && check_device_fit(o, &m)) {
		free(o);
		return 1;
	}
	m.load_s = now();
	if (load_weights(o, &m)) {
		free(o);
		return 1;
	}
	m.load_s = now() - m.load_s;
	print_config(&m);
	printf("weights: %s (%.1f s)\n", m.weights_from, m.load_s);
	rc = o->save_dir ? save(o, &m) : 0;
	if (!rc && o->ntokens && o->device >= 0) {
		rc = run_device(o, &m);
	} else if (!rc && o->ntokens) {
		rc = cpu_backend(o, &m, &b);
		if (!rc) {
			printf("backend: %s\n", b.name);
			printf("prompt: %u tokens:", o->nprompt);
			for (uint32_t i = 0; i < o->nprompt; i++)
				printf(" %d", o->prompt[i]);
			printf("\n");
			rc = run(o, &m, &b);
			b.destroy(b.ctx);
		}
	}
	spyre_model_weights_free(&m.w);
	free(o);
	return rc;
}
