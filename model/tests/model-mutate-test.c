// SPDX-License-Identifier: MIT
/*
 * Description: the model's readers on damaged input, deterministically,
 * under AddressSanitizer and UBSan (built with gcc -fsanitize=address,undefined
 * from the sources): valid files - the shipped config.json files and small
 * safetensors files written by the writer (a 1-layer model and a file of
 * mixed dtypes and ranks) - each take a fixed seed's mutations (bit flips,
 * truncations, byte insertions and deletions, chunk copies, numbers and JSON
 * punctuation spliced in, the header-length field changed), 20,000 in all,
 * and go through the JSON parser, the config parser, the safetensors reader
 * (every tensor then read as fp32) and the weights loader. Each result must
 * be success or an error with a non-empty message; a success must hold up
 * (a config that validates, tensors inside the buffer). Each input is in an
 * allocation of its exact size, so any read past the end is a report.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "json.h"
#include "safetensors.h"
#include "weights.h"
#include "test-util.h"
#include "../../tests/tap.h"

#define MUTATIONS 20000

static uint64_t rng = 0x5eed5eed12345678ull;

static uint64_t next(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t below(size_t n)
{
	return n ? (size_t)(next() % n) : 0;
}

struct seed {
	const char *name;
	unsigned char *buf;
	size_t len;
	int is_st;
};

static unsigned int accepted, refused;
static unsigned int by_kind[8];

static void check_json(const unsigned char *buf, size_t len)
{
	char err[256] = "";
	struct spyre_json *doc;

	if (spyre_json_parse((const char *)buf, len, &doc, err, sizeof(err)) == 0) {
		/* walk it */
		const struct spyre_json_node *r = spyre_json_root(doc);

		for (size_t i = 0; i < spyre_json_count(r); i++) {
			const char *key;
			const struct spyre_json_node *v = spyre_json_at(r, i, &key);

			TAP_CHECK(v && (spyre_json_type(r) != SPYRE_JSON_OBJECT || key), "member %zu", i);
		}
		spyre_json_free(doc);
	} else {
		TAP_CHECK(err[0] && strstr(err, " at byte "), "JSON error without a message or offset: '%s'", err);
	}
}

static void check_config(const unsigned char *buf, size_t len)
{
	char err[256] = "";
	struct spyre_model_config c;

	if (spyre_model_config_parse((const char *)buf, len, &c, err, sizeof(err)) == 0) {
		accepted++;
		TAP_CHECK(spyre_model_config_validate(&c, err, sizeof(err)) == 0, "accepted but invalid: %s", err);
		TAP_CHECK(spyre_model_param_count(&c) != UINT64_MAX, "count");
	} else {
		refused++;
		TAP_CHECK(err[0] != 0, "config refused without a message");
	}
}

static void check_st(const unsigned char *buf, size_t len)
{
	char err[256] = "";
	struct spyre_st *st;

	if (spyre_st_open_mem(buf, len, &st, err, sizeof(err))) {
		refused++;
		TAP_CHECK(err[0] != 0, "safetensors refused without a message");
		return;
	}
	accepted++;
	for (size_t i = 0; i < spyre_st_count(st); i++) {
		const struct spyre_st_tensor *t = spyre_st_tensor_at(st, i);
		float *out;

		TAP_CHECK(t->data >= buf && t->data + (t->end - t->begin) <= buf + len, "tensor inside the buffer");
		TAP_CHECK(t->nelem * (t->dtype == SPYRE_ST_F32 ? 4 : 2) == t->end - t->begin, "size");
		out = malloc(t->nelem ? t->nelem * sizeof(float) : 1);
		if (!out)
			continue;
		err[0] = 0;
		TAP_CHECK(spyre_st_read_f32(st, t->name, t->rank, t->shape, out, err, sizeof(err)) == 0 &&
			  spyre_st_find(st, t->name), "read of a listed tensor: %s", err);
		free(out);
	}
	/* the weights loader over whatever survived */
	struct spyre_model_config c = model_micro_config();
	struct spyre_model_weights w;

	err[0] = 0;
	if (spyre_model_weights_load(&c, st, &w, err, sizeof(err)) == 0)
		spyre_model_weights_free(&w);
	else
		TAP_CHECK(err[0] != 0, "weights refused without a message");
	spyre_st_close(st);
}

static const char *const splices[] = {
	"0", "-1", "1e309", "18446744073709551616", "\"", "{", "}", "[", "]", ",", ":", "null", "\\u", "\\ud800",
	"\"F64\"", "\"BF16\"", "[4294967296,4294967296]", "[0,0]", "\xff", "\xc3", " ", "\"__metadata__\"",
};

/* Mutate @in into a fresh exact-size buffer. */
static unsigned char *mutate(const struct seed *s, size_t *len)
{
	size_t n = s->len, pos = below(n + 1), cap = n + 64;
	unsigned char *b = malloc(cap);
	int kind = (int)below(s->is_st ? 8 : 7);

	memcpy(b, s->buf, n);
	by_kind[kind]++;
	switch (kind) {
	case 0:	/* flip 1..8 bits */
		for (int i = 1 + (int)below(8); i > 0 && n; i--)
			b[below(n)] ^= (unsigned char)(1u << below(8));
		break;
	case 1:	/* truncate */
		n = below(n);
		break;
	case 2: { /* insert 1..8 random bytes */
		size_t k = 1 + below(8);

		memmove(b + pos + k, b + pos, n - pos);
		for (size_t i = 0; i < k; i++)
			b[pos + i] = (unsigned char)next();
		n += k;
		break;
	}
	case 3: { /* delete 1..16 bytes */
		size_t k = 1 + below(16);

		if (pos + k > n)
			k = n - pos;
		memmove(b + pos, b + pos + k, n - pos - k);
		n -= k;
		break;
	}
	case 4: { /* splice a token over a position */
		const char *t = splices[below(sizeof(splices) / sizeof(splices[0]))];
		size_t k = strlen(t);

		if (pos + k > n)
			pos = n > k ? n - k : 0;
		if (k > n)
			k = n;
		memcpy(b + pos, t, k);
		break;
	}
	case 5: { /* change a digit (offsets, shapes, sizes) */
		for (int tries = 0; tries < 64 && n; tries++) {
			size_t i = below(n);

			if (b[i] >= '0' && b[i] <= '9') {
				b[i] = (unsigned char)('0' + below(10));
				break;
			}
		}
		break;
	}
	case 6: { /* copy a chunk elsewhere (duplicates keys and tensors) */
		size_t k = 1 + below(48), from = below(n);

		if (from + k > n)
			k = n - from;
		if (pos + k > cap - n)
			k = 0;
		memmove(b + pos + k, b + pos, n - pos);
		memcpy(b + pos, s->buf + from, k);
		n += k;
		break;
	}
	default: { /* the header length: +-small, random, huge */
		uint64_t h = 0;

		for (int i = 7; i >= 0; i--)
			h = h << 8 | b[i];
		switch (below(4)) {
		case 0: h += below(17) - 8; break;
		case 1: h = next() % (n + 16); break;
		case 2: h = next(); break;
		default: h = n - 8 + below(3); break;
		}
		for (int i = 0; i < 8 && n >= 8; i++)
			b[i] = (unsigned char)(h >> (8 * i));
		break;
	}
	}
	*len = n;
	unsigned char *exact = malloc(n ? n : 1);

	memcpy(exact, b, n);
	free(b);
	return exact;
}

static struct seed seeds[5];
static int nseeds;

/* (the file is read here, not in the caller's arguments: their order of evaluation is unspecified) */
static void add_seed(const char *name, const char *path, int is_st)
{
	size_t len;
	char *buf = model_read_file(path, &len);

	if (!buf)
		tap_bail("cannot make the seed %s", name);
	seeds[nseeds++] = (struct seed){ name, (unsigned char *)buf, len, is_st };
}

static void make_seeds(void)
{
	char p[PATH_MAX + 64], err[256];
	struct spyre_model_config c = model_micro_config();
	struct spyre_model_weights w;

	snprintf(p, sizeof(p), "%s/model/configs/tiny/config.json", model_top());
	add_seed("tiny config.json", p, 0);
	snprintf(p, sizeof(p), "%s/model/configs/granite-3.3-8b/config.json", model_top());
	add_seed("granite config.json", p, 0);
	if (spyre_model_weights_random(&c, 1, &w))
		tap_bail("weights");
	snprintf(p, sizeof(p), "%s/micro.safetensors", model_tmpdir());
	if (spyre_model_weights_save(&c, &w, p, SPYRE_ST_F16, err, sizeof(err)))
		tap_bail("%s", err);
	spyre_model_weights_free(&w);
	add_seed("1-layer model", p, 1);
	snprintf(p, sizeof(p), "%s/mixed.safetensors", model_tmpdir());
	if (spyre_st_write(p, model_mixed_tensors, 4, err, sizeof(err)))
		tap_bail("%s", err);
	add_seed("mixed tensors", p, 1);
}

static void test_seeds_valid(void)
{
	for (int i = 0; i < nseeds; i++) {
		unsigned int before = accepted;

		if (seeds[i].is_st)
			check_st(seeds[i].buf, seeds[i].len);
		else
			check_config(seeds[i].buf, seeds[i].len);
		TAP_CHECK(accepted == before + 1, "seed '%s' is accepted", seeds[i].name);
	}
	/* the 1-layer model loads completely */
	struct spyre_st *st;
	struct spyre_model_config c = model_micro_config();
	struct spyre_model_weights w;
	char err[256];

	TAP_CHECK(spyre_st_open_mem(seeds[2].buf, seeds[2].len, &st, err, sizeof(err)) == 0 &&
		  spyre_model_weights_load(&c, st, &w, err, sizeof(err)) == 0, "%s", err);
	spyre_model_weights_free(&w);
	spyre_st_close(st);
}

static void test_mutations(void)
{
	unsigned int fails_before = tap_state.failed;

	accepted = refused = 0;
	for (int m = 0; m < MUTATIONS; m++) {
		const struct seed *s = &seeds[m % nseeds];
		size_t len;
		unsigned char *b = mutate(s, &len);

		if (s->is_st) {
			check_st(b, len);
			if (len > 8)
				check_json(b + 8, len - 8);
		} else {
			check_json(b, len);
			check_config(b, len);
		}
		free(b);
		if (tap_state.failed - fails_before > 20)
			tap_bail("too many failures");
	}
	tap_diag("%d mutations: %u accepted, %u refused with a message; kinds %u/%u/%u/%u/%u/%u/%u/%u", MUTATIONS,
		 accepted, refused, by_kind[0], by_kind[1], by_kind[2], by_kind[3], by_kind[4], by_kind[5],
		 by_kind[6], by_kind[7]);
	TAP_EQ(MUTATIONS, accepted + refused);
	TAP_CMP(refused, >, MUTATIONS / 4u);
	TAP_CMP(accepted, >, MUTATIONS / 100u);
}

static const struct tap_case cases[] = {
	{ "seeds_valid", test_seeds_valid },
	{ "mutations", test_mutations },
};

int main(int argc, char **argv)
{
	int rc;

	if (!model_tmpdir())
		tap_bail("mkdtemp failed");
	make_seeds();
	rc = TAP_RUN(cases, argc, argv);
	for (int i = 0; i < nseeds; i++)
		free(seeds[i].buf);
	model_rmtmp();
	return rc;
}
