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
#include <time.h>

#include "config.h"
#include "ref.h"
#include "safetensors.h"
#include "weights.h"

/* Host fp32 weights above this are refused (--estimate still works). */
#define MAX_HOST_WEIGHT_BYTES (2ull << 30)
#define MAX_PROMPT 4096
#define ESTIMATE_CONTEXT 1024u

static const int32_t default_prompt[] = { 1, 2, 3, 4, 5, 6, 7, 8 };

struct options {
	const char *model_dir;		/* --model */
	const char *config;		/* --config NAME|PATH (default tiny) */
	uint64_t seed;
	int32_t prompt[MAX_PROMPT];
	uint32_t nprompt;
	uint32_t ntokens;		/* -n */
	unsigned int dtype;		/* --dtype: SPYRE_REF_* */
	const char *save_dir;
	enum spyre_st_dtype save_dtype;
	bool estimate;
	bool quiet;
};

struct model {
	char label[256];		/* the preset name or the config's path */
	struct spyre_model_config cfg;
	struct spyre_model_weights w;
	char weights_from[4400];
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
		"  -n N                tokens to generate (default 32; 0: none)\n"
		"  --dtype D           reference precision: fp32, fp16, bf16, dl16 (default fp32)\n"
		"  --save DIR          write DIR/config.json and DIR/model.safetensors\n"
		"  --save-dtype D      their dtype: f32, f16, bf16 (default f32)\n"
		"  --estimate          sizes and FLOPs only; nothing is allocated\n"
		"  --cpu               run the CPU reference (the only backend for now)\n"
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
		} else if (!strcmp(a, "--device")) {
			die_usage("--device: the device backend is not written yet; use --cpu");
		}
		if (!takes)
			continue;
		if (strcmp(a, "--model") && strcmp(a, "--config") && strcmp(a, "--seed") &&
		    strcmp(a, "--prompt") && strcmp(a, "-n") && strcmp(a, "--dtype") && strcmp(a, "--save") &&
		    strcmp(a, "--save-dtype"))
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
		} else if (!strcmp(a, "-n")) {
			o->ntokens = (uint32_t)parse_u64(a, v, 1u << 20);
		} else if (!strcmp(a, "--dtype")) {
			unsigned int d;

			for (d = 0; d < 4 && strcmp(v, spyre_ref_dtype_name(d)); d++)
				;
			if (d == 4)
				die_usage("--dtype: unknown dtype '%s' (valid: fp32, fp16, bf16, dl16)", v);
			o->dtype = d;
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
	if (o->model_dir && o->config)
		die_usage("--model and --config both name a config; give one");
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

/* The hook for a modeled device time (docs to come with the device backend):
 * returns false while there is no model of the device. */
static bool estimate_device_time(const struct spyre_model_config *c, double prefill_flops, double decode_flops,
				 double *prefill_s, double *decode_s)
{
	(void)c;
	(void)prefill_flops;
	(void)decode_flops;
	*prefill_s = *decode_s = 0;
	return false;
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
	if (estimate_device_time(c, prefill_total, decode, &ps, &ds))
		printf("device time: prefill %.3g s, decode %.3g s per token\n", ps, ds);
	else
		printf("device time: not modeled yet (hook: estimate_device_time() in model/spyre-generate.c)\n");
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
	if (load_weights(o, &m)) {
		free(o);
		return 1;
	}
	print_config(&m);
	printf("weights: %s\n", m.weights_from);
	rc = o->save_dir ? save(o, &m) : 0;
	if (!rc && o->ntokens) {
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
