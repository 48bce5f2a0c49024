// SPDX-License-Identifier: MIT
/*
 * spyre-serve - an OpenAI-compatible HTTP server (docs/serve.md): a model
 * (config.json, model.safetensors, tokenizer.json, or the seeded tiny model
 * and its tokenizer) on a runner (the CPU reference, or a spyre card), the
 * engine's continuous batching, the routes of server.c on the HTTP layer
 * of http.c. main() is parse -> load -> serve until SIGTERM/SIGINT -> stop.
 *
 * Exit status: 0 after a signal; 1 when the model, tokenizer, runner or
 * socket cannot be set up (the message says which); 2 for a bad command line.
 */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bert.h"
#include "bert_device.h"
#include "engine.h"
#include "http.h"
#include "runner_card.h"
#include "runner_cpu.h"
#include "server.h"
#include "tokenizer.h"

struct options {
	const char *model_dir;		/* --model */
	const char *tokenizer;		/* --tokenizer */
	const char *served_name;	/* --served-model-name */
	const char *runner;		/* --runner cpu|card */
	const char *embed_dir;		/* --embedding-model */
	const char *embed_name;		/* --served-embedding-name */
	int device;			/* --device (card) */
	uint32_t tp;			/* --tp (card): tensor parallel over cards device .. device + tp - 1 */
	uint64_t seed;			/* --seed: generated weights */
	struct spyre_http_opts http;
	struct spyre_engine_opts engine;
	uint32_t num_blocks, block_size;
	bool no_warmup;			/* --no-warmup (card) */
	bool no_graphs;			/* --no-graphs (card) */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spyre-serve [options]\n"
		"  --model DIR                   DIR/config.json, DIR/model.safetensors (else generated weights),\n"
		"                                DIR/tokenizer.json (default: the seeded tiny model)\n"
		"  --tokenizer PATH              a tokenizer.json (default: DIR/tokenizer.json, or the tiny\n"
		"                                model's model/configs/tiny/tokenizer.json)\n"
		"  --served-model-name NAME      the name clients use (default: DIR's name, or \"tiny\")\n"
		"  --embedding-model DIR         also serve /v1/embeddings with the BERT encoder of DIR (a\n"
		"                                sentence-transformers directory: config.json, model.safetensors,\n"
		"                                tokenizer.json), on the same runner (cpu or card)\n"
		"  --served-embedding-name NAME  its name (default: DIR's name)\n"
		"  --seed N                      seed of generated weights (default 1)\n"
		"  --runner cpu|card             the CPU reference (default) or a spyre card\n"
		"  --device N                    the card (default 0)\n"
		"  --tp N                        card: tensor parallel over N cards from --device's (heads and MLP\n"
		"                                split, two all-reduces a layer; N divides the heads, KV heads\n"
		"                                and intermediate_size; no launch graphs; default 1)\n"
		"  --host ADDR                   listen address (default 127.0.0.1)\n"
		"  --port N                      listen port (default 8000; 0: any free port, printed)\n"
		"  --max-num-seqs N              running requests at most (default 32)\n"
		"  --max-num-batched-tokens N    rows per step, the prefill chunk (default 512)\n"
		"  --num-blocks N                KV cache blocks (default: 4 whole contexts)\n"
		"  --block-size N                tokens per KV block (default 64)\n"
		"  --max-waiting N               queued requests before 429 (default 256)\n"
		"  --no-prefix-caching           compute every prompt block\n"
		"  --no-warmup                   card: build kernels as shapes first occur, not all of the\n"
		"                                step's shapes (1..max-num-seqs sequences, row buckets) at start\n"
		"  --no-graphs                   card: launch every step's kernels one by one (default: a decode\n"
		"                                step of N sequences is captured once and replayed as a graph)\n"
		"  --max-body BYTES              request body limit, 413 above (default 1048576)\n"
		"  --timeout S                   idle connection timeout in seconds (default 60)\n"
		"  --max-connections N           open connections at most (default 1024)\n"
		"  --min-step-us US              each engine step lasts at least US microseconds (default 0:\n"
		"                                off; a slower device for tests and demos)\n");
}

static int num(const char *opt, const char *s, uint64_t max, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 0);
	if (errno || end == s || *end || *s == '-' || *out > max) {
		fprintf(stderr, "spyre-serve: %s: '%s' is not a number from 0 to %" PRIu64 "\n", opt, s, max);
		return -1;
	}
	return 0;
}

static int parse(int argc, char **argv, struct options *o)
{
	static const struct {
		const char *name;
		uint64_t max;
	} nums[] = {
		{ "--seed", UINT64_MAX }, { "--port", 65535 }, { "--max-num-seqs", 4096 },
		{ "--max-num-batched-tokens", 1u << 20 }, { "--num-blocks", 1u << 24 }, { "--block-size", 4096 },
		{ "--max-waiting", 1u << 20 }, { "--max-body", 1ull << 30 }, { "--timeout", 86400 },
		{ "--max-connections", 65536 }, { "--device", 64 }, { "--min-step-us", 10000000 },
		{ "--tp", SPYRE_MODEL_TP_MAX },
	};
	uint64_t v[sizeof(nums) / sizeof(nums[0])];
	bool set[sizeof(nums) / sizeof(nums[0])] = { 0 };
	int i;
	size_t k;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (!strcmp(a, "--no-prefix-caching")) {
			o->engine.no_prefix_caching = true;
			continue;
		}
		if (!strcmp(a, "--no-graphs")) {
			o->no_graphs = true;
			continue;
		}
		if (!strcmp(a, "--no-warmup")) {
			o->no_warmup = true;
			continue;
		}
		if (!val) {
			fprintf(stderr, "spyre-serve: %s: a value is missing (or an unknown option)\n", a);
			return -1;
		}
		i++;
		if (!strcmp(a, "--model")) {
			o->model_dir = val;
		} else if (!strcmp(a, "--tokenizer")) {
			o->tokenizer = val;
		} else if (!strcmp(a, "--embedding-model")) {
			o->embed_dir = val;
		} else if (!strcmp(a, "--served-embedding-name")) {
			o->embed_name = val;
		} else if (!strcmp(a, "--served-model-name")) {
			o->served_name = val;
		} else if (!strcmp(a, "--runner")) {
			if (strcmp(val, "cpu") && strcmp(val, "card")) {
				fprintf(stderr, "spyre-serve: --runner: cpu or card, not '%s'\n", val);
				return -1;
			}
			o->runner = val;
		} else if (!strcmp(a, "--host")) {
			o->http.host = val;
		} else {
			for (k = 0; k < sizeof(nums) / sizeof(nums[0]) && strcmp(a, nums[k].name); k++)
				;
			if (k == sizeof(nums) / sizeof(nums[0])) {
				fprintf(stderr, "spyre-serve: unknown option %s\n", a);
				return -1;
			}
			if (num(a, val, nums[k].max, &v[k]))
				return -1;
			set[k] = true;
		}
	}
	if (set[0]) o->seed = v[0];
	if (set[1]) o->http.port = (uint16_t)v[1];
	if (set[2]) o->engine.max_num_seqs = (uint32_t)v[2];
	if (set[3]) o->engine.max_num_batched_tokens = (uint32_t)v[3];
	if (set[4]) o->num_blocks = (uint32_t)v[4];
	if (set[5]) o->block_size = (uint32_t)v[5];
	if (set[6]) o->engine.max_waiting = (uint32_t)v[6];
	if (set[7]) o->http.max_body = v[7];
	if (set[8]) o->http.timeout_s = (uint32_t)v[8];
	if (set[9]) o->http.max_connections = (uint32_t)v[9];
	if (set[10]) o->device = (int)v[10];
	if (set[11]) o->engine.min_step_us = (uint32_t)v[11];
	if (set[12]) o->tp = (uint32_t)v[12];
	if (set[12] && !v[12]) {
		fprintf(stderr, "spyre-serve: --tp: 0 cards; tensor parallel runs over 1 to %u cards\n", SPYRE_MODEL_TP_MAX);
		return -1;
	}
	for (k = 2; k <= 9; k++)
		if (set[k] && !v[k] && k != 1) {
			fprintf(stderr, "spyre-serve: %s must be at least 1\n", nums[k].name);
			return -1;
		}
	return 0;
}

/* The tiny model's tokenizer: model/configs/tiny/tokenizer.json from the tree this binary was built in. */
static void default_tokenizer(char *path, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	snprintf(path, len, "model/configs/tiny/tokenizer.json");
	if (n <= 0)
		return;
	exe[n] = '\0';
	/* build/bin/spyre-serve -> the tree's root */
	snprintf(path, len, "%s/../../model/configs/tiny/tokenizer.json", dirname(exe));
	if (access(path, R_OK))
		snprintf(path, len, "model/configs/tiny/tokenizer.json");
}

/* The runner of --runner: the CPU reference here; the card's runner plugs in at this one place. */
static spyre_device_t *card_devs[SPYRE_MODEL_TP_MAX];	/* --runner card: open until the runner is freed */
#define card_dev card_devs[0]

/* The card runner: the model loaded as the CPU runner loads it, packed onto card --device. */
static int open_card(const struct options *o, const struct spyre_runner_cpu_opts *co, struct spyre_runner **r,
		     char *err, size_t errlen)
{
	struct spyre_runner_card_opts ko = {
		.dtype = SPYRE_DT_FP32, .block_size = o->block_size, .num_blocks = o->num_blocks,
		.max_num_seqs = o->engine.max_num_seqs, .max_num_batched_tokens = o->engine.max_num_batched_tokens,
		.warmup = !o->no_warmup,
		.no_graphs = o->no_graphs,
	};
	struct spyre_model_config cfg, sc;
	struct spyre_model_weights w;
	int ret = spyre_serve_model_load(co, &cfg, &w, err, errlen), count = spyre_device_count();

	if (ret)
		return ret;
	/* the split's shape, then the cards it needs */
	ret = spyre_model_config_tp(&cfg, o->tp, &sc, err, errlen);
	if (!ret && o->tp > 1 && (int64_t)o->device + o->tp > count) {
		snprintf(err, errlen, "--tp %u from card %d needs cards %d..%d; this machine has %d card%s", o->tp,
			 o->device, o->device, o->device + (int)o->tp - 1, count, count == 1 ? "" : "s");
		ret = -ENODEV;
	}
	for (uint32_t i = 0; i < o->tp && !ret; i++) {
		ret = spyre_device_open(o->device + (int)i, &card_devs[i]);
		if (ret)
			snprintf(err, errlen, "card %d: %s", o->device + (int)i, spyre_last_error());
	}
	ret = ret ?: spyre_runner_card_new_tp(card_devs, o->tp, &cfg, &w, &ko, r, err, errlen);
	spyre_model_weights_free(&w);
	return ret;
}

static int open_runner(const struct options *o, struct spyre_runner **r, char *err, size_t errlen)
{
	struct spyre_runner_cpu_opts co = {
		.model_dir = o->model_dir, .seed = o->seed, .num_blocks = o->num_blocks,
		.block_size = o->block_size,
	};

	if (!strcmp(o->runner, "card"))
		return open_card(o, &co, r, err, errlen);
	return spyre_runner_cpu_new(&co, r, err, errlen);
}

/* The embedding model: the CPU reference (thread-safe) or its handle on the card (its own lock). */
struct embedder {
	struct spyre_bert *cpu;
	struct spyre_dbert *card;
	struct spyre_tokenizer *tok;
};

static int embed_call(void *ctx, const int32_t *ids, const uint32_t *lens, uint32_t batch, float *out, char *err,
		      size_t errlen)
{
	struct embedder *em = ctx;

	if (em->card)
		return spyre_dbert_embed(em->card, ids, lens, batch, out, NULL, err, errlen);
	return spyre_bert_embed(em->cpu, ids, lens, batch, out, err, errlen);
}

/* --embedding-model: the model and its tokenizer; on the card after the runner opened it. */
static int open_embedder(const struct options *o, struct embedder *em, char *err, size_t errlen)
{
	char path[PATH_MAX + 32];
	int ret;

	ret = spyre_bert_load(o->embed_dir, &em->cpu, err, errlen);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "%s/tokenizer.json", o->embed_dir);
	ret = spyre_tokenizer_load(path, &em->tok, err, errlen);
	if (ret)
		return ret;	/* main() prints the directory; tokenizer.json is the file */
	if (spyre_tokenizer_vocab_size(em->tok) > em->cpu->cfg.vocab) {
		snprintf(err, errlen, "the tokenizer has %u tokens, the model's vocabulary %u",
			 spyre_tokenizer_vocab_size(em->tok), em->cpu->cfg.vocab);
		return -EINVAL;
	}
	if (!strcmp(o->runner, "card")) {
		if (!card_dev) {
			snprintf(err, errlen, "no card open");
			return -ENODEV;
		}
		ret = spyre_dbert_new(card_dev, em->cpu, 0, &em->card, err, errlen);
		if (ret)
			return ret;
	}
	return 0;
}

static void close_embedder(struct embedder *em)
{
	if (em->card)
		spyre_dbert_free(em->card);
	if (em->cpu)
		spyre_bert_free(em->cpu);
	if (em->tok)
		spyre_tokenizer_free(em->tok);
}

/* After a step's events: wake the server thread once for all the streams they woke. */
static void flush_wakes(void *user)
{
	(void)user;
	spyre_http_flush();
}

int main(int argc, char **argv)
{
	struct options o = { .runner = "cpu", .tp = 1 };
	struct spyre_runner *runner = NULL;
	struct spyre_tokenizer *tok = NULL;
	struct spyre_engine *engine = NULL;
	struct spyre_server *server = NULL;
	struct spyre_http *http = NULL;
	struct embedder em = { 0 };
	char err[512], tokpath[PATH_MAX + 64], name[256], ename[256];
	sigset_t sigs;
	int sig, rc = 1;

	o.http.port = 8000;
	if (parse(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	if (o.tp > 1 && strcmp(o.runner, "card")) {
		fprintf(stderr, "spyre-serve: --tp %u needs --runner card\n", o.tp);
		return 2;
	}
	/* Signals go to sigwait() below: blocked before any thread starts. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (o.tokenizer)
		snprintf(tokpath, sizeof(tokpath), "%s", o.tokenizer);
	else if (o.model_dir)
		snprintf(tokpath, sizeof(tokpath), "%s/tokenizer.json", o.model_dir);
	else
		default_tokenizer(tokpath, sizeof(tokpath));
	if (spyre_tokenizer_load(tokpath, &tok, err, sizeof(err))) {
		fprintf(stderr, "spyre-serve: tokenizer %s: %s\n", tokpath, err);
		goto out;
	}
	if (open_runner(&o, &runner, err, sizeof(err))) {
		fprintf(stderr, "spyre-serve: runner %s: %s\n", o.runner, err);
		goto out;
	}
	if (spyre_tokenizer_vocab_size(tok) > runner->vocab) {
		fprintf(stderr, "spyre-serve: the tokenizer has %u tokens, the model's vocabulary %u\n",
			spyre_tokenizer_vocab_size(tok), runner->vocab);
		goto out;
	}
	/* the server's streams woken by a step's events (spyre_http_wake_later) go out in one wake-up */
	o.engine.events_delivered = flush_wakes;
	if (spyre_engine_new(runner, &o.engine, &engine, err, sizeof(err)) || spyre_engine_start(engine)) {
		fprintf(stderr, "spyre-serve: engine: %s\n", err);
		goto out;
	}
	if (o.served_name) {
		snprintf(name, sizeof(name), "%s", o.served_name);
	} else if (o.model_dir) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s", o.model_dir);
		snprintf(name, sizeof(name), "%s", basename(dir));
	} else {
		snprintf(name, sizeof(name), "tiny");
	}
	if (o.embed_dir) {
		char dir[PATH_MAX];

		if (open_embedder(&o, &em, err, sizeof(err))) {
			fprintf(stderr, "spyre-serve: embedding model %s: %s\n", o.embed_dir, err);
			goto out;
		}
		snprintf(dir, sizeof(dir), "%s", o.embed_dir);
		snprintf(ename, sizeof(ename), "%s", o.embed_name ? o.embed_name : basename(dir));
		if (!strcmp(ename, name)) {
			fprintf(stderr, "spyre-serve: the embedding model and the model are both named '%s' "
				"(--served-embedding-name)\n", name);
			goto out;
		}
	}
	server = spyre_server_new(&(struct spyre_server_opts){
		.model_name = name, .tok = tok, .engine = engine, .max_model_len = runner->max_model_len,
		.vocab = runner->vocab,
		.embed_name = o.embed_dir ? ename : NULL, .embed_tok = em.tok,
		.embed_dim = em.cpu ? em.cpu->cfg.hidden : 0, .embed_max_len = em.cpu ? em.cpu->cfg.max_seq_len : 0,
		.embed_vocab = em.cpu ? em.cpu->cfg.vocab : 0, .embed = embed_call, .embed_ctx = &em,
	});
	if (!server) {
		fprintf(stderr, "spyre-serve: out of memory\n");
		goto out;
	}
	if (spyre_http_start(&o.http, &spyre_server_http_ops, server, &http, err, sizeof(err))) {
		fprintf(stderr, "spyre-serve: %s\n", err);
		goto out;
	}
	printf("spyre-serve: model %s (runner %s, %u KV blocks of %u tokens, context %u) on http://%s:%u\n", name,
	       runner->name, runner->num_blocks, runner->block_size, runner->max_model_len,
	       o.http.host ? o.http.host : "127.0.0.1", spyre_http_port(http));
	/* After the line above: the first line of stdout names the port (tests read it). */
	if (o.embed_dir)
		printf("spyre-serve: embedding model %s (%u layers, %u dimensions, at most %u tokens, %s)\n", ename,
		       em.cpu->cfg.layers, em.cpu->cfg.hidden, em.cpu->cfg.max_seq_len, em.card ? "card" : "cpu");
	fflush(stdout);
	do {
		if (sigwait(&sigs, &sig))
			break;
	} while (sig != SIGTERM && sig != SIGINT);
	printf("spyre-serve: %s, stopping\n", strsignal(sig));
	fflush(stdout);
	rc = 0;
out:
	/* Connections first (their requests abort), then the engine (its last events), then what they used. */
	if (http)
		spyre_http_stop(http);
	if (engine)
		spyre_engine_free(engine);
	spyre_server_free(server);
	close_embedder(&em);
	spyre_runner_free(runner);
	for (uint32_t i = 0; i < SPYRE_MODEL_TP_MAX; i++)
		if (card_devs[i])
			spyre_device_close(card_devs[i]);
	if (tok)
		spyre_tokenizer_free(tok);
	return rc;
}
