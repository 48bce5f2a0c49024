// SPDX-License-Identifier: MIT
/*
 * Description: the tokenizer (serve/tokenizer.h) against Hugging Face
 * `tokenizers`: for each tokenizer that serve/tests/tokref.py wrote into
 * build/serve/tokref/ (the real all-MiniLM-L6-v2 WordPiece; byte-level BPEs
 * in GPT-2's, Llama 3's and Granite's configurations; a cased WordPiece; a
 * BPE with many normalizers and pre-tokenizers; the tiny model's), every line
 * of serve/tests/tokenizer-corpus.jsonl encodes to the same ids (with and
 * without the special tokens) and decodes to the same text (skipping special
 * tokens or not), and seeded random id sequences decode the same; streaming
 * detokenization gives the same text piece by piece. Then: the tiny model's
 * committed tokenizer.json is what its generator writes, and has 512 ids with
 * <|endoftext|> at 0; invalid UTF-8 is -EILSEQ; ids out of range are -EINVAL;
 * configurations we do not implement are refused at load with a message; a
 * few MiB of input encode in bounded time; 8 threads encode with one
 * tokenizer at once and get the single-threaded ids.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "tokenizer.h"
#include "tokenizer-util.h"
#include "../../tests/tap.h"

static char err[512];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct spyre_tokenizer *load(const char *path)
{
	struct spyre_tokenizer *t = NULL;
	int rc = spyre_tokenizer_load(path, &t, err, sizeof(err));

	TAP_CHECK(rc == 0, "loading %s: %d %s", path, rc, err);
	return t;
}

static bool ids_equal(const struct spyre_json_node *arr, const int32_t *ids, size_t n)
{
	if (spyre_json_count(arr) != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		uint64_t u;

		if (spyre_json_u64(spyre_json_at(arr, i, NULL), &u) || u != (uint64_t)ids[i])
			return false;
	}
	return true;
}

static int32_t *ids_of(const struct spyre_json_node *arr, size_t *n)
{
	int32_t *v = malloc((spyre_json_count(arr) + 1) * sizeof(*v));

	*n = spyre_json_count(arr);
	for (size_t i = 0; i < *n; i++) {
		uint64_t u = 0;

		spyre_json_u64(spyre_json_at(arr, i, NULL), &u);
		v[i] = (int32_t)u;
	}
	return v;
}

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
	char line[600];
	size_t o = 0;

	for (size_t i = 0; i < n && o < sizeof(line) - 16; i++)
		o += (size_t)snprintf(line + o, sizeof(line) - o, "%d ", ids[i]);
	tap_diag("  %s: %s", what, line);
}

/* Streaming: the pieces of @ids concatenate to @want. */
static bool stream_equal(const struct spyre_tokenizer *t, const int32_t *ids, size_t n, bool skip, const char *want,
			 size_t want_len)
{
	struct spyre_detok *d = spyre_detok_new(t, skip);
	char *all = calloc(1, 1);
	size_t len = 0;
	bool ok = d != NULL;

	for (size_t i = 0; i <= n && ok; i++) {
		const char *piece;
		size_t pl;
		int rc = i < n ? spyre_detok_push(d, ids[i], &piece, &pl) : spyre_detok_flush(d, &piece, &pl);

		if (rc) {
			ok = false;
			break;
		}
		all = realloc(all, len + pl + 1);
		memcpy(all + len, piece, pl + 1);
		len += pl;
		/* never half a character: every piece is whole UTF-8 by itself */
		for (size_t k = 0; k < pl; k++) {
			unsigned char c = (unsigned char)piece[k];
			size_t w = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;

			if ((c & 0xc0) == 0x80 || k + w > pl) {
				tap_diag("  piece %zu of %zu bytes cut at %zu (%02x)", i, pl, k, c);
				ok = false;
				break;
			}
			k += w - 1;
		}
	}
	ok = ok && len == want_len && !memcmp(all, want, len);
	if (!ok)
		tap_diag("  streaming gave '%s' (%zu bytes), decode '%s' (%zu)", all, len, want, want_len);
	free(all);
	spyre_detok_free(d);
	return ok;
}

struct tally {
	unsigned lines, equal;
};

static void agree_one(const char *name, struct tally *sum)
{
	char path[4200];
	size_t len;
	char *text;
	struct spyre_json *doc = NULL;
	const struct spyre_json_node *cases, *decodes;
	struct spyre_tokenizer *t;
	unsigned eq = 0, total = 0, streams = 0, streams_ok = 0;

	snprintf(path, sizeof(path), "%s/serve/tokref/%s.ref.json", tok_test_build(), name);
	text = tok_test_read(path, &len);
	if (!TAP_CHECK(text && !spyre_json_parse(text, len, &doc, err, sizeof(err)), "%s: %s", path, err))
		goto out;
	snprintf(path, sizeof(path), "%s/serve/tokref/%s.json", tok_test_build(), name);
	if (!(t = load(path)))
		goto out;
	cases = spyre_json_get(spyre_json_root(doc), "cases");
	decodes = spyre_json_get(spyre_json_root(doc), "decodes");
	for (size_t i = 0; i < spyre_json_count(cases); i++) {
		const struct spyre_json_node *c = spyre_json_at(cases, i, NULL);
		size_t tl, n1 = 0, n2 = 0, dl = 0, dsl = 0;
		const char *s = spyre_json_string(spyre_json_get(c, "text"), &tl);
		size_t wl, wsl;
		const char *want = spyre_json_string(spyre_json_get(c, "decode"), &wl);
		const char *want_skip = spyre_json_string(spyre_json_get(c, "decode_skip"), &wsl);
		int32_t *ids = NULL, *plain = NULL;
		char *dec = NULL, *dec_skip = NULL;
		bool ok = true;

		total++;
		if (spyre_tokenizer_encode(t, s, tl, true, &ids, &n1, err, sizeof(err)) ||
		    spyre_tokenizer_encode(t, s, tl, false, &plain, &n2, err, sizeof(err))) {
			TAP_CHECK(0, "%s: encode line %zu: %s", name, i + 1, err);
			continue;
		}
		if (!ids_equal(spyre_json_get(c, "ids"), ids, n1) || !ids_equal(spyre_json_get(c, "plain"), plain, n2)) {
			size_t nw;
			int32_t *w = ids_of(spyre_json_get(c, "ids"), &nw);

			ok = TAP_CHECK(0, "%s: line %zu: ids differ from tokenizers'", name, i + 1);
			print_ids("tokenizers", w, nw);
			print_ids("ours      ", ids, n1);
			free(w);
		}
		if (!spyre_tokenizer_decode(t, ids, n1, false, &dec, &dl, err, sizeof(err)) &&
		    !spyre_tokenizer_decode(t, ids, n1, true, &dec_skip, &dsl, err, sizeof(err))) {
			if (dl != wl || memcmp(dec, want, dl) || dsl != wsl || memcmp(dec_skip, want_skip, dsl))
				ok = TAP_CHECK(0, "%s: line %zu: decode differs: '%s' / '%s', expected '%s' / '%s'", name,
					       i + 1, dec, dec_skip, want, want_skip);
		} else {
			ok = TAP_CHECK(0, "%s: decode line %zu: %s", name, i + 1, err);
		}
		streams += 2;
		streams_ok += stream_equal(t, ids, n1, false, want, wl) + stream_equal(t, ids, n1, true, want_skip, wsl);
		eq += ok;
		free(ids);
		free(plain);
		free(dec);
		free(dec_skip);
	}
	for (size_t i = 0; i < spyre_json_count(decodes); i++) {
		const struct spyre_json_node *c = spyre_json_at(decodes, i, NULL);
		size_t wl, wsl;
		const char *want = spyre_json_string(spyre_json_get(c, "decode"), &wl);
		const char *want_skip = spyre_json_string(spyre_json_get(c, "decode_skip"), &wsl);
		size_t n;
		int32_t *ids = ids_of(spyre_json_get(c, "ids"), &n);
		char *dec = NULL, *dec_skip = NULL;
		size_t dl = 0, dsl = 0;
		bool ok = !spyre_tokenizer_decode(t, ids, n, false, &dec, &dl, err, sizeof(err)) &&
			  !spyre_tokenizer_decode(t, ids, n, true, &dec_skip, &dsl, err, sizeof(err)) &&
			  dl == wl && !memcmp(dec, want, dl) && dsl == wsl && !memcmp(dec_skip, want_skip, dsl);

		total++;
		eq += TAP_CHECK(ok, "%s: random decode %zu: '%s' / '%s', expected '%s' / '%s'", name, i,
				dec ? dec : "(error)", dec_skip ? dec_skip : "(error)", want, want_skip);
		streams += 2;
		streams_ok += stream_equal(t, ids, n, false, want, wl) + stream_equal(t, ids, n, true, want_skip, wsl);
		free(ids);
		free(dec);
		free(dec_skip);
	}
	TAP_EQ(streams, streams_ok);
	tap_diag("%-10s %u/%u lines and decodes equal to tokenizers'; streaming %u/%u", name, eq, total, streams_ok,
		 streams);
	sum->lines += total;
	sum->equal += eq;
	spyre_tokenizer_free(t);
out:
	spyre_json_free(doc);
	free(text);
}

static void test_hf_agreement(void)
{
	char path[4200], line[64];
	struct tally sum = { 0 };
	unsigned toks = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/serve/tokref/index.txt", tok_test_build());
	if (!(f = fopen(path, "r"))) {
		tap_skip("no reference from Hugging Face tokenizers (%s: the venv's tokenizers is missing)", path);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (line[0]) {
			agree_one(line, &sum);
			toks++;
		}
	}
	fclose(f);
	TAP_CMP(toks, >=, 6u);
	tap_diag("agreement: %u tokenizers, %u/%u equal (corpus lines x 2 encodes x 2 decodes, and random decodes)",
		 toks, sum.equal, sum.lines);
}

static void test_tiny_tokenizer(void)
{
	char a[4200], b[4200];
	size_t na, nb;
	char *fa, *fb;
	struct spyre_tokenizer *t;
	int32_t *ids = NULL;
	size_t n = 0;
	char *dec = NULL;

	snprintf(a, sizeof(a), "%s/model/configs/tiny/tokenizer.json", tok_test_top());
	snprintf(b, sizeof(b), "%s/serve/tiny-tokenizer.json", tok_test_build());
	fa = tok_test_read(a, &na);
	fb = tok_test_read(b, &nb);
	TAP_CHECK(fa && fb && na == nb && !memcmp(fa, fb, na),
		  "%s differs from what serve/gen-tiny-tokenizer.py writes (%s): regenerate and commit it", a, b);
	free(fa);
	free(fb);
	if (!(t = load(a)))
		return;
	TAP_EQ(512, spyre_tokenizer_vocab_size(t));
	TAP_EQ(0, spyre_tokenizer_token_to_id(t, "<|endoftext|>"));
	TAP_CHECK(spyre_tokenizer_is_special(t, 0), "id 0 is special");
	TAP_CHECK(!spyre_tokenizer_is_special(t, 1), "id 1 is not");
	TAP_EQ(-1, spyre_tokenizer_token_to_id(t, "no such token"));
	TAP_EQ(0, spyre_tokenizer_encode(t, "Hello<|endoftext|>", 18, true, &ids, &n, err, sizeof(err)));
	TAP_CMP(n, >=, (size_t)2);
	if (n >= 2) {
		TAP_EQ(0, ids[n - 1]);
		for (size_t i = 0; i < n; i++)
			TAP_CMP(ids[i], <, 512);
	}
	TAP_EQ(0, spyre_tokenizer_decode(t, ids, n, true, &dec, NULL, err, sizeof(err)));
	TAP_STREQ("Hello", dec);
	free(dec);
	TAP_EQ(0, spyre_tokenizer_decode(t, ids, n, false, &dec, NULL, err, sizeof(err)));
	TAP_STREQ("Hello<|endoftext|>", dec);
	free(dec);
	free(ids);
	spyre_tokenizer_free(t);
}

static struct spyre_tokenizer *tiny(void)
{
	char a[4200];

	snprintf(a, sizeof(a), "%s/model/configs/tiny/tokenizer.json", tok_test_top());
	return load(a);
}

static void test_bad_utf8(void)
{
	static const struct {
		const char *s;
		size_t n;
		size_t at;
	} bad[] = {
		{ "ab\x80", 3, 2 },		/* a lone continuation byte */
		{ "\xc0\xaf", 2, 0 },		/* overlong */
		{ "x\xe0\x80\xaf", 4, 1 },	/* overlong, 3 bytes */
		{ "\xed\xa0\x80", 3, 0 },	/* a surrogate */
		{ "ok\xe2\x82", 4, 2 },		/* cut short */
		{ "\xf4\x90\x80\x80", 4, 0 },	/* above U+10FFFF */
		{ "\xf5\x80\x80\x80", 4, 0 },
		{ "\xff", 1, 0 },
		{ "caf\xe9", 4, 3 },		/* Latin-1 */
	};
	struct spyre_tokenizer *t = tiny();

	if (!t)
		return;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int32_t *ids = (int32_t *)1;
		size_t n = 7;
		char want[64];

		err[0] = 0;
		TAP_EQ(-EILSEQ, spyre_tokenizer_encode(t, bad[i].s, bad[i].n, true, &ids, &n, err, sizeof(err)));
		TAP_CHECK(ids == NULL && n == 0, "case %zu: outputs cleared", i);
		snprintf(want, sizeof(want), "at byte %zu", bad[i].at);
		TAP_CHECK(strstr(err, want), "case %zu: message '%s' names '%s'", i, err, want);
	}
	/* a NUL inside is valid UTF-8 */
	{
		int32_t *ids = NULL;
		size_t n = 0;

		TAP_EQ(0, spyre_tokenizer_encode(t, "a\0b", 3, false, &ids, &n, err, sizeof(err)));
		TAP_EQ(3, n);
		free(ids);
	}
	spyre_tokenizer_free(t);
}

static void test_decode_range(void)
{
	struct spyre_tokenizer *t = tiny();
	const int32_t bad[] = { -1, 512, INT32_MAX, INT32_MIN };
	struct spyre_detok *d;

	if (!t)
		return;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int32_t ids[3] = { 1 + 'G', bad[i], 1 + 'H' };
		char *text = (char *)1;
		const char *piece;

		err[0] = 0;
		TAP_EQ(-EINVAL, spyre_tokenizer_decode(t, ids, 3, false, &text, NULL, err, sizeof(err)));
		TAP_CHECK(text == NULL && strstr(err, "out of range"), "id %d: '%s'", bad[i], err);
		d = spyre_detok_new(t, false);
		TAP_EQ(0, spyre_detok_push(d, 1 + 'G', &piece, NULL));
		TAP_STREQ("G", piece);
		TAP_EQ(-EINVAL, spyre_detok_push(d, bad[i], &piece, NULL));
		spyre_detok_free(d);
	}
	/* a character cut between two tokens is held back, then completed or flushed as U+FFFD */
	d = spyre_detok_new(t, false);
	{
		const char *piece;
		size_t len;
		int32_t e2 = 1 + 0xe2, x82 = 1 + 0x82, xac = 1 + 0xac;	/* the bytes of the euro sign */

		TAP_EQ(0, spyre_detok_push(d, e2, &piece, &len));
		TAP_EQ(0, len);
		TAP_EQ(0, spyre_detok_push(d, x82, &piece, &len));
		TAP_EQ(0, len);
		TAP_EQ(0, spyre_detok_push(d, xac, &piece, &len));
		TAP_STREQ("\xe2\x82\xac", piece);
		TAP_EQ(0, spyre_detok_push(d, e2, &piece, &len));
		TAP_EQ(0, len);
		TAP_EQ(0, spyre_detok_flush(d, &piece, &len));
		TAP_STREQ("\xef\xbf\xbd", piece);
	}
	spyre_detok_free(d);
	spyre_tokenizer_free(t);
}

static void refuse(const char *json, int want, const char *msg)
{
	struct spyre_tokenizer *t = NULL;
	int rc;

	err[0] = 0;
	rc = spyre_tokenizer_new(json, strlen(json), &t, err, sizeof(err));
	TAP_CHECK(rc == want && !t && strstr(err, msg), "expected %d with '%s', got %d '%s'", want, msg, rc, err);
	spyre_tokenizer_free(t);
}

#define BPE_MODEL "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}"

static void test_refused(void)
{
	struct spyre_tokenizer *t = NULL;
	int32_t *ids = NULL;
	size_t n = 0;

	/* the minimal file loads and merges */
	TAP_EQ(0, spyre_tokenizer_new("{" BPE_MODEL "}", strlen("{" BPE_MODEL "}"), &t, err, sizeof(err)));
	if (t) {
		TAP_EQ(0, spyre_tokenizer_encode(t, "abab", 4, true, &ids, &n, err, sizeof(err)));
		TAP_EQ(2, n);
		TAP_EQ(2, n ? ids[0] : -1);
		free(ids);
		spyre_tokenizer_free(t);
	}
	refuse("", -EINVAL, "tokenizer.json:");
	refuse("{\"model\":", -EINVAL, "tokenizer.json:");
	refuse("[]", -EINVAL, "expected an object");
	refuse("{}", -EINVAL, "model: expected an object");
	refuse("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", -EOPNOTSUPP, "model.type 'Unigram'");
	refuse("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a c\"]}}", -EINVAL, "'c' is not in the vocabulary");
	refuse("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0}}}", -EINVAL, "id 0 given to two tokens");
	refuse("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":99999999}}}", -EINVAL, "model.vocab");
	refuse("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a\"]}}", -EINVAL, "model.merges[0]");
	refuse("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"dropout\":0.1}}", -EOPNOTSUPP, "dropout");
	refuse("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0},\"unk_token\":\"[UNK]\"}}", -EINVAL, "unk_token");
	refuse("{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\d+|[a-z]+\"},\"behavior\":\"Isolated\","
	       "\"invert\":false}," BPE_MODEL "}", -EOPNOTSUPP, "the regular expression '\\d+|[a-z]+' is not one");
	refuse("{\"pre_tokenizer\":{\"type\":\"Metaspace\"}," BPE_MODEL "}", -EOPNOTSUPP, "pre_tokenizer 'Metaspace'");
	refuse("{\"normalizer\":{\"type\":\"NFKC\"}," BPE_MODEL "}", -EOPNOTSUPP, "normalizer 'NFKC'");
	refuse("{\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\" \"}," BPE_MODEL "}",
	       -EOPNOTSUPP, "Replace");
	refuse("{\"decoder\":{\"type\":\"Metaspace\"}," BPE_MODEL "}", -EOPNOTSUPP, "decoder 'Metaspace'");
	refuse("{\"post_processor\":{\"type\":\"BertProcessing\",\"cls\":[\"a\",7],\"sep\":[\"b\",1]}," BPE_MODEL "}",
	       -EINVAL, "post_processor.cls");
	refuse("{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"X\"}}],"
	       "\"special_tokens\":{}}," BPE_MODEL "}", -EINVAL, "'X' has no ids");
	refuse("{\"added_tokens\":[{\"id\":-1,\"content\":\"x\"}]," BPE_MODEL "}", -EINVAL, "added_tokens[0].id");
	TAP_CHECK(spyre_tokenizer_load("/nonexistent/tokenizer.json", &t, err, sizeof(err)) == -ENOENT &&
		  strstr(err, "/nonexistent/tokenizer.json"), "load of a missing file: '%s'", err);
}

/* A few MiB of mixed text, of one long word, of spaces: each encodes within the time bound. */
static void test_huge(void)
{
	static const char chunk[] = "The quick brown fox, 12345 jumps! Ünïcödé 日本語 😀👨‍👩‍👧 \t\n  ";
	size_t size = 4u << 20;
	char *big = malloc(size);
	struct spyre_tokenizer *t = tiny();
	char mini[4200];
	struct spyre_tokenizer *wp;

	snprintf(mini, sizeof(mini), "%s/serve/tokref/minilm.json", tok_test_build());
	wp = access(mini, R_OK) ? NULL : load(mini);
	if (!big || !t)
		goto out;
	for (int kind = 0; kind < 3; kind++) {
		size_t len = 0;

		if (kind == 0) {
			while (len + sizeof(chunk) - 1 <= size) {
				memcpy(big + len, chunk, sizeof(chunk) - 1);
				len += sizeof(chunk) - 1;
			}
		} else {
			len = size;
			memset(big, kind == 1 ? 'q' : ' ', len);
		}
		for (int w = 0; w < 2; w++) {
			struct spyre_tokenizer *tk = w ? wp : t;
			int32_t *ids = NULL;
			size_t n = 0;
			char *dec = NULL;
			size_t dl = 0;
			double t0 = now(), dt;

			if (!tk)
				continue;
			TAP_EQ(0, spyre_tokenizer_encode(tk, big, len, false, &ids, &n, err, sizeof(err)));
			dt = now() - t0;
			TAP_CMP(dt, <, 30.0);
			if (kind == 2 && w)
				TAP_EQ(0, n);	/* BERT drops whitespace */
			else
				TAP_CMP(n, >, (size_t)0);
			if (!w) {	/* byte-level BPE round-trips exactly */
				TAP_EQ(0, spyre_tokenizer_decode(tk, ids, n, false, &dec, &dl, err, sizeof(err)));
				TAP_CHECK(dl == len && !memcmp(dec, big, len), "kind %d: the round trip differs", kind);
			}
			tap_diag("huge input kind %d (%s), %zu bytes: %zu ids in %.2f s", kind, w ? "minilm" : "tiny", len,
				 n, dt);
			free(ids);
			free(dec);
		}
	}
out:
	free(big);
	spyre_tokenizer_free(t);
	spyre_tokenizer_free(wp);
}

#define THREADS 8
#define ITERS 60

struct job {
	const struct spyre_tokenizer *t;
	char **lines;
	size_t *lens, nlines;
	int32_t **want;
	size_t *nwant;
	unsigned bad;
};

static void *worker(void *arg)
{
	struct job *j = arg;

	for (int it = 0; it < ITERS; it++)
		for (size_t i = 0; i < j->nlines; i++) {
			int32_t *ids = NULL;
			size_t n = 0;
			char e[256];

			if (spyre_tokenizer_encode(j->t, j->lines[i], j->lens[i], true, &ids, &n, e, sizeof(e)) ||
			    n != j->nwant[i] || memcmp(ids, j->want[i], n * sizeof(*ids)))
				j->bad++;
			free(ids);
		}
	return NULL;
}

static void test_threads(void)
{
	char path[4200];
	size_t len;
	char *text;
	struct spyre_json *doc = NULL;
	struct spyre_tokenizer *t;
	struct job jobs[THREADS];
	pthread_t th[THREADS];
	char *lines[128];
	size_t lens[128], nwant[128], nl = 0;
	int32_t *want[128];

	snprintf(path, sizeof(path), "%s/serve/tests/tokenizer-corpus.jsonl", tok_test_top());
	text = tok_test_read(path, &len);
	if (!TAP_CHECK(text, "%s", path))
		return;
	/* one JSON string a line */
	for (char *p = text, *e; p < text + len && nl < 128; p = e + 1) {
		const char *s;

		e = memchr(p, '\n', (size_t)(text + len - p));
		if (!e)
			e = text + len;
		if (!spyre_json_parse(p, (size_t)(e - p), &doc, err, sizeof(err)) &&
		    (s = spyre_json_string(spyre_json_root(doc), &lens[nl]))) {
			lines[nl] = malloc(lens[nl] + 1);
			memcpy(lines[nl], s, lens[nl] + 1);
			nl++;
		}
		spyre_json_free(doc);
		doc = NULL;
	}
	free(text);
	TAP_CMP(nl, >=, (size_t)80);
	snprintf(path, sizeof(path), "%s/serve/tokref/llama3.json", tok_test_build());
	if (access(path, R_OK))
		snprintf(path, sizeof(path), "%s/model/configs/tiny/tokenizer.json", tok_test_top());
	if (!(t = load(path)))
		goto out;
	for (size_t i = 0; i < nl; i++)
		TAP_EQ(0, spyre_tokenizer_encode(t, lines[i], lens[i], true, &want[i], &nwant[i], err, sizeof(err)));
	for (int k = 0; k < THREADS; k++) {
		jobs[k] = (struct job){ t, lines, lens, nl, want, nwant, 0 };
		TAP_EQ(0, pthread_create(&th[k], NULL, worker, &jobs[k]));
	}
	for (int k = 0; k < THREADS; k++) {
		pthread_join(th[k], NULL);
		TAP_EQ(0, jobs[k].bad);
	}
	for (size_t i = 0; i < nl; i++)
		free(want[i]);
	spyre_tokenizer_free(t);
out:
	for (size_t i = 0; i < nl; i++)
		free(lines[i]);
}

static const struct tap_case cases[] = {
	{ "hf_agreement", test_hf_agreement },
	{ "tiny_tokenizer", test_tiny_tokenizer },
	{ "bad_utf8", test_bad_utf8 },
	{ "decode_range", test_decode_range },
	{ "refused", test_refused },
	{ "huge_input", test_huge },
	{ "threads", test_threads },
};

int main(int argc, char **argv)
{
	return TAP_RUN(cases, argc, argv);
}
