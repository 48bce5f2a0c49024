// SPDX-License-Identifier: MIT
/*
 * spyre-embed - sentence embeddings of a BERT encoder (model/bert.h,
 * all-MiniLM-L6-v2) on the CPU reference or a spyre card. Input: token ids
 * (--ids FILE, a sentence a line, ids separated by spaces or commas) or an
 * expected-embeddings file of bert_ref.py (--expect FILE: its ids, and the
 * cosine of every vector against its sentence-transformers vector).
 * docs/model.md ("The encoder") has the options and the output.
 *
 * Exit status: 0 done (and with --min-cos every cosine at least that),
 * 1 an error or a cosine below --min-cos, 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bert.h"
#include "bert_device.h"
#include "tests/bert-expect.h"

struct opts {
	const char *model, *ids, *expect;
	int device;		/* -1: the CPU reference */
	uint32_t cores, batch, bench;
	double min_cos;
	bool vectors, quiet;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: spyre-embed [--model DIR] (--ids FILE | --expect FILE) [options]\n"
		"Sentence embeddings of a BERT encoder (all-MiniLM-L6-v2) on the CPU or a spyre card.\n"
		"  --model DIR      the model directory (config.json, model.safetensors, modules.json ...);\n"
		"                   default: the expect file's model_dir\n"
		"  --ids FILE       token ids, a sentence a line (with [CLS] and [SEP])\n"
		"  --expect FILE    bert_ref.py's expected embeddings: its ids, and the cosines against them\n"
		"  --device N       on card N (default: the CPU reference)\n"
		"  --cores N        cores of the card (default all)\n"
		"  --batch N        sentences per call (default all of them)\n"
		"  --min-cos C      exit 1 when a cosine against --expect is below C\n"
		"  --bench N        then N batches of 1 and of 32 sentences: embeddings per second\n"
		"  --vectors        print every vector\n"
		"  -q               only the summary lines\n");
}

static int parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v > UINT32_MAX || s[0] == '-')
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* --ids FILE: packed ids and lengths. */
static int read_ids(const char *path, int32_t **ids, uint32_t **lens, uint32_t *n)
{
	FILE *f = fopen(path, "r");
	char line[65536];
	size_t cap = 0, capl = 0, total = 0;
	uint32_t lineno = 0;

	*ids = NULL;
	*lens = NULL;
	*n = 0;
	if (!f) {
		fprintf(stderr, "spyre-embed: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *end;
		uint32_t len = 0;

		lineno++;
		for (;;) {
			while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n' || *p == '\r')
				p++;
			if (!*p)
				break;
			errno = 0;
			long v = strtol(p, &end, 10);

			if (end == p || errno || v < INT32_MIN || v > INT32_MAX) {
				fprintf(stderr, "spyre-embed: %s:%u: not a token id: \"%.20s\"\n", path, lineno, p);
				goto bad;
			}
			if (total == cap) {
				cap = cap ? 2 * cap : 1024;
				int32_t *ni = realloc(*ids, cap * sizeof(*ni));

				if (!ni)
					goto oom;
				*ids = ni;
			}
			(*ids)[total++] = (int32_t)v;
			len++;
			p = end;
		}
		if (!len)
			continue;
		if (*n == capl) {
			capl = capl ? 2 * capl : 64;
			uint32_t *nl = realloc(*lens, capl * sizeof(*nl));

			if (!nl)
				goto oom;
			*lens = nl;
		}
		(*lens)[(*n)++] = len;
	}
	fclose(f);
	if (!*n) {
		fprintf(stderr, "spyre-embed: %s: no sentences\n", path);
		return -1;
	}
	return 0;
oom:
	fprintf(stderr, "spyre-embed: out of memory\n");
bad:
	fclose(f);
	free(*ids);
	free(*lens);
	*ids = NULL;
	*lens = NULL;
	return -1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct backend {
	struct spyre_bert *m;
	struct spyre_dbert *db;
	struct spyre_dbert_stats last;
};

static int embed(struct backend *be, const int32_t *ids, const uint32_t *lens, uint32_t n, float *out, char *err,
		 size_t errlen)
{
	if (be->db)
		return spyre_dbert_embed(be->db, ids, lens, n, out, &be->last, err, errlen);
	return spyre_bert_embed(be->m, ids, lens, n, out, err, errlen);
}

/* --bench: @iters calls of batch 1 and of 32 sentences (the input's, cycled). */
static int bench(struct backend *be, const int32_t *ids, const uint32_t *lens, uint32_t n, uint32_t iters,
		 uint32_t H, const char *where)
{
	static const uint32_t sizes[] = { 1, 32 };
	char err[512];

	for (size_t si = 0; si < 2; si++) {
		uint32_t B = sizes[si], *bl = malloc(B * sizeof(*bl));
		size_t *off = malloc(n * sizeof(*off)), total = 0;
		float *out = malloc((size_t)B * H * sizeof(float));
		int32_t *bi;
		double t, dev_ns = 0;

		if (!bl || !off || !out) {
			free(bl);
			free(off);
			free(out);
			return -1;
		}
		for (uint32_t i = 0, o = 0; i < n; o += lens[i], i++)
			off[i] = o;
		for (uint32_t i = 0; i < B; i++)
			total += lens[i % n];
		bi = malloc(total * sizeof(*bi));
		for (uint32_t i = 0, o = 0; bi && i < B; o += lens[i % n], i++) {
			bl[i] = lens[i % n];
			memcpy(bi + o, ids + off[i % n], bl[i] * sizeof(*bi));
		}
		/* the first call builds the batch shape's kernels: not timed */
		if (!bi || embed(be, bi, bl, B, out, err, sizeof(err))) {
			fprintf(stderr, "spyre-embed: %s\n", bi ? err : "out of memory");
			free(bi);
			free(bl);
			free(off);
			free(out);
			return -1;
		}
		t = now_s();
		for (uint32_t it = 0; it < iters; it++) {
			if (embed(be, bi, bl, B, out, err, sizeof(err))) {
				fprintf(stderr, "spyre-embed: %s\n", err);
				break;
			}
			dev_ns += (double)be->last.device_ns;
		}
		t = now_s() - t;
		printf("bench: %s, batch %u: %.1f embeddings/s (host wall, %u calls of %.1f ms)", where, B,
		       iters * (double)B / t, iters, t * 1e3 / iters);
		if (be->db)
			printf(", modeled device %.1f embeddings/s (%.3f ms a batch, padded to %u tokens)",
			       dev_ns > 0 ? iters * (double)B / (dev_ns * 1e-9) : 0, dev_ns * 1e-6 / iters,
			       be->last.padded_len);
		printf("\n");
		free(bi);
		free(bl);
		free(off);
		free(out);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "model", required_argument, NULL, 'm' }, { "ids", required_argument, NULL, 'i' },
		{ "expect", required_argument, NULL, 'e' }, { "device", required_argument, NULL, 'd' },
		{ "cores", required_argument, NULL, 'c' }, { "batch", required_argument, NULL, 'b' },
		{ "min-cos", required_argument, NULL, 'C' }, { "bench", required_argument, NULL, 'B' },
		{ "vectors", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct opts o = { .device = -1, .min_cos = -2 };
	struct bert_expect e = { 0 };
	struct backend be = { 0 };
	spyre_device_t *dev = NULL;
	int32_t *ids = NULL;
	uint32_t *lens = NULL, n = 0;
	float *out = NULL;
	char err[1024], where[64];
	int c, rc = 1;

	while ((c = getopt_long(argc, argv, "qh", lo, NULL)) != -1) {
		uint32_t u;
		char *end;

		switch (c) {
		case 'm': o.model = optarg; break;
		case 'i': o.ids = optarg; break;
		case 'e': o.expect = optarg; break;
		case 'd':
		case 'c':
		case 'b':
		case 'B':
			if (parse_u32(optarg, &u) || (c == 'b' && !u)) {
				fprintf(stderr, "spyre-embed: --%s: not a%s number: %s\n",
					c == 'd' ? "device" : c == 'c' ? "cores" : c == 'b' ? "batch" : "bench",
					c == 'b' ? " positive" : "", optarg);
				return 2;
			}
			if (c == 'd')
				o.device = (int)u;
			else if (c == 'c')
				o.cores = u;
			else if (c == 'b')
				o.batch = u;
			else
				o.bench = u;
			break;
		case 'C':
			o.min_cos = strtod(optarg, &end);
			if (*end || end == optarg || !(o.min_cos >= -1 && o.min_cos <= 1)) {
				fprintf(stderr, "spyre-embed: --min-cos: a number from -1 to 1, not %s\n", optarg);
				return 2;
			}
			break;
		case 'v': o.vectors = true; break;
		case 'q': o.quiet = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || !o.ids == !o.expect || (!o.model && !o.expect)) {
		usage(stderr);
		return 2;
	}
	if (o.expect) {
		if (bert_expect_load(o.expect, &e, err, sizeof(err))) {
			fprintf(stderr, "spyre-embed: %s\n", err);
			return 1;
		}
		ids = e.ids;
		lens = e.lens;
		n = e.n;
		if (!o.model)
			o.model = e.model_dir;
	} else if (read_ids(o.ids, &ids, &lens, &n)) {
		return 1;
	}
	if (spyre_bert_load(o.model, &be.m, err, sizeof(err))) {
		fprintf(stderr, "spyre-embed: %s\n", err);
		goto out;
	}
	if (o.expect && e.hidden != be.m->cfg.hidden) {
		fprintf(stderr, "spyre-embed: %s has vectors of %u, the model %u\n", o.expect, e.hidden,
			be.m->cfg.hidden);
		goto out;
	}
	snprintf(where, sizeof(where), "cpu reference");
	if (o.device >= 0) {
		int ret = spyre_device_open(o.device, &dev);

		if (ret) {
			fprintf(stderr, "spyre-embed: card %d: %s\n", o.device, spyre_last_error());
			goto out;
		}
		ret = spyre_dbert_new(dev, be.m, o.cores, &be.db, err, sizeof(err));
		if (ret) {
			fprintf(stderr, "spyre-embed: card %d: %s\n", o.device, err);
			goto out;
		}
		snprintf(where, sizeof(where), "card %d, fp32", o.device);
	}
	uint32_t H = be.m->cfg.hidden, B = o.batch ? o.batch : n;

	out = malloc((size_t)n * H * sizeof(float));
	if (!out) {
		fprintf(stderr, "spyre-embed: out of memory\n");
		goto out;
	}
	printf("model: %s (%u layers, hidden %u, %u heads), %u sentences on the %s, batches of %u\n", o.model,
	       be.m->cfg.layers, H, be.m->cfg.heads, n, where, B);
	double t0 = now_s();
	uint64_t dev_ns = 0, launches = 0;
	const int32_t *p = ids;

	for (uint32_t i = 0; i < n; i += B) {
		uint32_t nb = n - i < B ? n - i : B;

		if (embed(&be, p, lens + i, nb, out + (size_t)i * H, err, sizeof(err))) {
			fprintf(stderr, "spyre-embed: sentences %u..%u: %s\n", i, i + nb - 1, err);
			goto out;
		}
		dev_ns += be.last.device_ns;
		launches += be.last.launches;
		for (uint32_t j = 0; j < nb; j++)
			p += lens[i + j];
	}
	printf("embedded %u sentences in %.3f s", n, now_s() - t0);
	if (be.db)
		printf(" (modeled device %.3f ms, %llu launches)", dev_ns * 1e-6, (unsigned long long)launches);
	printf("\n");
	rc = 0;
	if (o.expect) {
		double min = 2;
		uint32_t at = 0;

		for (uint32_t i = 0; i < n; i++) {
			double cs = bert_cosine(out + (size_t)i * H, e.emb + (size_t)i * H, H);

			if (!o.quiet)
				printf("sentence %u (%u tokens): cosine %.7f\n", i, lens[i], cs);
			if (cs < min) {
				min = cs;
				at = i;
			}
		}
		printf("min cosine vs sentence-transformers: %.7f (1 - cos = %.2g, sentence %u), %u sentences, "
		       "batches of %u\n", min, 1 - min, at, n, B);
		if (min < o.min_cos) {
			printf("FAIL: min cosine %.7f is below %.7f\n", min, o.min_cos);
			rc = 1;
		}
	}
	if (o.vectors) {
		for (uint32_t i = 0; i < n; i++) {
			printf("vector %u:", i);
			for (uint32_t j = 0; j < H; j++)
				printf(" %.7g", out[(size_t)i * H + j]);
			printf("\n");
		}
	}
	if (o.bench && bench(&be, ids, lens, n, o.bench, H, where))
		rc = 1;
out:
	free(out);
	spyre_dbert_free(be.db);
	spyre_bert_free(be.m);
	if (dev)
		spyre_device_close(dev);
	if (o.expect)
		bert_expect_free(&e);
	else {
		free(ids);
		free(lens);
	}
	return rc;
}
