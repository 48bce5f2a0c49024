// SPDX-License-Identifier: MIT
/*
 * Description: the tokenizer on damaged tokenizer.json files, deterministically,
 * under AddressSanitizer and UBSan (built from the sources with
 * -fsanitize=address,undefined): seeds - the tiny model's tokenizer.json and
 * small files written here (a WordPiece with a BertNormalizer and
 * TemplateProcessing, a Llama-3-style BPE with a Split, added tokens with
 * every flag, a BPE with normalizer and pre-tokenizer Sequences) - each take a
 * fixed seed's mutations (bit flips, truncations, byte insertions and
 * deletions, chunk copies, JSON punctuation and numbers spliced in), 20,000 in
 * all. Each load must succeed or fail with a negative errno and a message;
 * each tokenizer that loads encodes a few texts (ids below its vocabulary
 * size), decodes them and random ids, and detokenizes them streaming. Each
 * input is in an allocation of its exact size, so a read past it is a report.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "tokenizer-util.h"
#include "../../tests/tap.h"

#define MUTATIONS 20000

static uint64_t rng = 0x70c3a11e5eed0001ull;

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

static const char *const seeds_text[] = {
	"{\"added_tokens\":[{\"id\":0,\"content\":\"[PAD]\",\"special\":true,\"normalized\":false},"
	"{\"id\":1,\"content\":\"[UNK]\",\"special\":true},{\"id\":2,\"content\":\"[CLS]\",\"special\":true},"
	"{\"id\":3,\"content\":\"[SEP]\",\"special\":true}],"
	"\"normalizer\":{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,"
	"\"strip_accents\":null,\"lowercase\":true},\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
	"\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"[CLS]\",\"type_id\":0}},"
	"{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":0}}],"
	"\"special_tokens\":{\"[CLS]\":{\"id\":\"[CLS]\",\"ids\":[2],\"tokens\":[\"[CLS]\"]},"
	"\"[SEP]\":{\"id\":\"[SEP]\",\"ids\":[3],\"tokens\":[\"[SEP]\"]}}},"
	"\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true},"
	"\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\","
	"\"max_input_chars_per_word\":8,\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"a\":4,\"##b\":5,"
	"\"ab\":6,\"the\":7,\"##s\":8,\".\":9,\"e\":10,\"##e\":11}}}",
	"{\"added_tokens\":[{\"id\":9,\"content\":\"<|begin_of_text|>\",\"special\":true,\"normalized\":false},"
	"{\"id\":10,\"content\":\"<m>\",\"special\":true,\"lstrip\":true,\"rstrip\":true},"
	"{\"id\":11,\"content\":\"ab c\",\"special\":false,\"single_word\":true,\"normalized\":true}],"
	"\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
	"{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
	"[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
	"{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]},"
	"\"post_processor\":{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\"},{\"type\":\"TemplateProcessing\","
	"\"single\":[{\"SpecialToken\":{\"id\":\"<|begin_of_text|>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
	"\"special_tokens\":{\"<|begin_of_text|>\":{\"id\":\"<|begin_of_text|>\",\"ids\":[9],\"tokens\":[]}}}]},"
	"\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,\"byte_fallback\":true,"
	"\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"\\u0120\":3,\"ab\":4,\"\\u0120c\":5,\"abc\":6,\"<0x41>\":7,\"\\u0120ab\":8},"
	"\"merges\":[[\"a\",\"b\"],[\"\\u0120\",\"c\"],[\"ab\",\"c\"],[\"\\u0120\",\"ab\"]]}}",
	"{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFD\"},{\"type\":\"StripAccents\"},"
	"{\"type\":\"Lowercase\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\"x\"},\"content\":\"yy\"},"
	"{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":false},{\"type\":\"Prepend\",\"prepend\":\"_\"}]},"
	"\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Whitespace\"},{\"type\":\"Digits\","
	"\"individual_digits\":true},{\"type\":\"Punctuation\",\"behavior\":\"MergedWithNext\"},{\"type\":\"Split\","
	"\"pattern\":{\"String\":\"-\"},\"behavior\":\"MergedWithPrevious\",\"invert\":true},{\"type\":\"WhitespaceSplit\"}]},"
	"\"model\":{\"type\":\"BPE\",\"unk_token\":\"?\",\"fuse_unk\":true,\"continuing_subword_prefix\":\"##\","
	"\"end_of_word_suffix\":\"</w>\",\"vocab\":{\"?\":0,\"a\":1,\"##b\":2,\"ab\":3,\"_\":4,\"a</w>\":5,\"##b</w>\":6,"
	"\"ab</w>\":7},\"merges\":[\"a ##b\",\"a ##b</w>\"]}}",
};

static const char *const texts[] = {
	"", "ab abc The the. s", "Ab\tc  <m> x <|begin_of_text|>ab c ab cd", "Ünïcödé 日本 😀 1234 a-b--c",
	"aaaaaaaaaaaaaaaaaaaaa", " \n\r\n  x",
};

static unsigned loaded, refused;

static void exercise(const struct spyre_tokenizer *t)
{
	uint32_t vs = spyre_tokenizer_vocab_size(t);
	char err[256];

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		int32_t *ids = NULL, rnd[6];
		size_t n = 0;
		char *dec = NULL;
		int rc = spyre_tokenizer_encode(t, texts[i], strlen(texts[i]), i & 1, &ids, &n, err, sizeof(err));
		struct spyre_detok *d;
		const char *piece;

		if (rc) {
			TAP_CHECK(rc < 0 && err[0], "encode: %d without a message", rc);
			continue;
		}
		for (size_t k = 0; k < n; k++)
			if (!TAP_CHECK(ids[k] >= 0 && (uint32_t)ids[k] < vs, "id %d of %u", ids[k], vs))
				break;
		TAP_EQ(0, spyre_tokenizer_decode(t, ids, n, i & 2, &dec, NULL, err, sizeof(err)));
		free(dec);
		d = spyre_detok_new(t, i & 1);
		for (size_t k = 0; k < n; k++)
			TAP_EQ(0, spyre_detok_push(d, ids[k], &piece, NULL));
		TAP_EQ(0, spyre_detok_flush(d, &piece, NULL));
		spyre_detok_free(d);
		for (size_t k = 0; k < 6; k++)
			rnd[k] = (int32_t)below(vs);
		dec = NULL;
		TAP_EQ(0, spyre_tokenizer_decode(t, rnd, 6, false, &dec, NULL, err, sizeof(err)));
		free(dec);
		free(ids);
	}
}

static void try_one(const unsigned char *buf, size_t len)
{
	char *copy = malloc(len ? len : 1);
	struct spyre_tokenizer *t = NULL;
	char err[256] = "";
	int rc;

	memcpy(copy, buf, len);
	rc = spyre_tokenizer_new(copy, len, &t, err, sizeof(err));
	if (!rc) {
		loaded++;
		TAP_CHECK(t != NULL, "success without a tokenizer");
		exercise(t);
		spyre_tokenizer_free(t);
	} else {
		refused++;
		TAP_CHECK(rc < 0 && err[0] && !t, "refusal %d without a message", rc);
	}
	free(copy);
}

static size_t mutate(unsigned char *b, size_t len, size_t cap)
{
	static const char *const splice[] = { "{", "}", "[", "]", ",", ":", "\"", "null", "true", "-1", "0",
					      "4294967296", "1e999", "\"\\u0000\"", "\"\\ud800\"", "[]", "{}", "\"type\"" };
	int rounds = 1 + (int)below(4);

	for (int r = 0; r < rounds && len; r++) {
		size_t at = below(len), n;

		switch (below(6)) {
		case 0:
			b[at] ^= (unsigned char)(1u << below(8));
			break;
		case 1:
			len = at;
			break;
		case 2:
			if (len < cap) {
				memmove(b + at + 1, b + at, len - at);
				b[at] = (unsigned char)below(256);
				len++;
			}
			break;
		case 3:
			n = 1 + below(16);
			if (at + n > len)
				n = len - at;
			memmove(b + at, b + at + n, len - at - n);
			len -= n;
			break;
		case 4: {
			size_t from = below(len);

			n = 1 + below(32);
			if (from + n > len)
				n = len - from;
			if (len + n <= cap) {
				memmove(b + at + n, b + at, len - at);
				memmove(b + at, b + (from < at ? from : from + n), n);
				len += n;
			}
			break;
		}
		default: {
			const char *s = splice[below(sizeof(splice) / sizeof(splice[0]))];

			n = strlen(s);
			if (len + n <= cap) {
				memmove(b + at + n, b + at, len - at);
				memcpy(b + at, s, n);
				len += n;
			}
		}
		}
	}
	return len;
}

static void test_mutations(void)
{
	char path[4200];
	const char *seeds[4];
	size_t lens[4], nseeds = 0;
	char *tiny;

	snprintf(path, sizeof(path), "%s/model/configs/tiny/tokenizer.json", tok_test_top());
	tiny = tok_test_read(path, &lens[0]);
	if (!TAP_CHECK(tiny, "%s", path))
		return;
	seeds[nseeds++] = tiny;
	for (size_t i = 0; i < sizeof(seeds_text) / sizeof(seeds_text[0]); i++) {
		lens[nseeds] = strlen(seeds_text[i]);
		seeds[nseeds++] = seeds_text[i];
	}
	/* every seed loads as it is */
	for (size_t s = 0; s < nseeds; s++) {
		struct spyre_tokenizer *t = NULL;
		char err[256] = "";

		TAP_CHECK(!spyre_tokenizer_new(seeds[s], lens[s], &t, err, sizeof(err)), "seed %zu: %s", s, err);
		spyre_tokenizer_free(t);
	}
	for (int m = 0; m < MUTATIONS; m++) {
		size_t s = (size_t)m % nseeds, cap = lens[s] + 256;
		unsigned char *b = malloc(cap);
		size_t len;

		memcpy(b, seeds[s], lens[s]);
		len = mutate(b, lens[s], cap);
		try_one(b, len);
		free(b);
	}
	tap_diag("%d mutations: %u loaded, %u refused", MUTATIONS, loaded, refused);
	TAP_CMP(refused, >, 0u);
	TAP_CMP(loaded, >, 0u);
	free(tiny);
}

static const struct tap_case cases[] = {
	{ "mutations", test_mutations },
};

int main(int argc, char **argv)
{
	return TAP_RUN(cases, argc, argv);
}
