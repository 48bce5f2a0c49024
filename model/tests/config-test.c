// SPDX-License-Identifier: MIT
/*
 * Description: the strict JSON parser (util/json.h) and the config.json
 * reader (model/config.h): the shipped configs equal the presets (tiny, and
 * Granite 3.3 8B's shape with its parameter count), defaults, the writer's
 * output reads back bit-exact, and every class of bad input is refused with
 * a message naming the field (zero or missing sizes, heads % kv_heads, odd
 * head_dim, hidden != heads * head_dim without head_dim, absurd sizes, wrong
 * types, unsupported activations/scaling/biases, garbage) - and the config
 * truncated at every byte is refused, never a crash.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "json.h"
#include "test-util.h"
#include "../../tests/tap.h"

static char err[512];

/* ---- JSON ---- */

static int jparse(const char *s, struct spyre_json **doc)
{
	return spyre_json_parse(s, strlen(s), doc, err, sizeof(err));
}

/* @s is refused with a message containing @frag. */
#define JSON_BAD(s, frag) do {								\
		struct spyre_json *d_ = NULL;						\
		TAP_CHECK(jparse(s, &d_) == -1 && strstr(err, frag),			\
			  "'%s': expected an error with \"%s\", got \"%s\"", s, frag, err); \
		spyre_json_free(d_);							\
	} while (0)

static void test_json_values(void)
{
	struct spyre_json *doc;
	const struct spyre_json_node *r, *v;
	const char *key;
	double d;
	uint64_t u;
	bool b;
	size_t n;
	const char *text = " {\"a\": [1, -2.5e3, 0, 1E2, 18446744073709551615, 18446744073709551616],"
			   " \"s\": \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\\u0000y\","
			   " \"t\": true, \"f\": false, \"n\": null, \"o\": {}, \"e\": [], \"\": 7} ";

	if (!TAP_CHECK(jparse(text, &doc) == 0, "parse: %s", err))
		return;
	r = spyre_json_root(doc);
	TAP_EQ(SPYRE_JSON_OBJECT, spyre_json_type(r));
	TAP_EQ(8, spyre_json_count(r));
	v = spyre_json_get(r, "a");
	TAP_EQ(6, spyre_json_count(v));
	TAP_CHECK(!spyre_json_number(spyre_json_at(v, 1, NULL), &d) && d == -2500.0, "-2.5e3 = %g", d);
	TAP_CHECK(!spyre_json_number(spyre_json_at(v, 3, NULL), &d) && d == 100.0, "1E2 = %g", d);
	TAP_CHECK(spyre_json_u64(spyre_json_at(v, 1, NULL), &u) == -1, "-2.5e3 is not a u64");
	TAP_CHECK(spyre_json_u64(spyre_json_at(v, 3, NULL), &u) == -1, "1E2 is not an integer literal");
	TAP_CHECK(!spyre_json_u64(spyre_json_at(v, 4, NULL), &u) && u == UINT64_MAX, "u64 max exact");
	TAP_CHECK(spyre_json_u64(spyre_json_at(v, 5, NULL), &u) == -1, "2^64 does not fit");
	TAP_CHECK(spyre_json_at(v, 6, NULL) == NULL, "past the end");
	const char *s = spyre_json_string(spyre_json_get(r, "s"), &n);

	TAP_CHECK(s && n == 17 && !memcmp(s, "x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80\0y", 18),
		  "escapes decoded (%zu bytes)", n);
	TAP_CHECK(!spyre_json_bool(spyre_json_get(r, "t"), &b) && b, "true");
	TAP_CHECK(!spyre_json_bool(spyre_json_get(r, "f"), &b) && !b, "false");
	TAP_EQ(SPYRE_JSON_NULL, spyre_json_type(spyre_json_get(r, "n")));
	TAP_EQ(0, spyre_json_count(spyre_json_get(r, "o")));
	TAP_EQ(SPYRE_JSON_ARRAY, spyre_json_type(spyre_json_get(r, "e")));
	TAP_CHECK(spyre_json_get(r, "missing") == NULL, "absent key");
	v = spyre_json_at(r, 7, &key);
	TAP_CHECK(key && !strcmp(key, "") && !spyre_json_number(v, &d) && d == 7, "empty key");
	TAP_EQ(1, spyre_json_offset(r));
	TAP_CHECK(spyre_json_number(spyre_json_get(r, "s"), &d) == -1, "a string is not a number");
	spyre_json_free(doc);
}

static void test_json_errors(void)
{
	JSON_BAD("", "expected a value, found the end at byte 0");
	JSON_BAD("   ", "at byte 3");
	JSON_BAD("{\"a\":1,}", "expected a string key in an object at byte 7");
	JSON_BAD("[1,]", "unexpected character ']' at byte 3");
	JSON_BAD("[1 2]", "expected ',' or ']' in an array at byte 3");
	JSON_BAD("{\"a\" 1}", "expected ':' after an object key at byte 5");
	JSON_BAD("{\"a\":1", "unterminated object");
	JSON_BAD("[1", "unterminated array");
	JSON_BAD("\"abc", "unterminated string at byte 0");
	JSON_BAD("01", "leading zero");
	JSON_BAD("1.", "expected a digit after '.'");
	JSON_BAD("-", "invalid number");
	JSON_BAD("1e", "expected a digit in the exponent");
	JSON_BAD("+1", "unexpected character '+'");
	JSON_BAD("1e400", "number out of range");
	JSON_BAD("NaN", "unexpected character 'N'");
	JSON_BAD("tru", "invalid literal (expected true)");
	JSON_BAD("nul", "invalid literal (expected null)");
	JSON_BAD("1 2", "unexpected data after the JSON value at byte 2");
	JSON_BAD("\"a\tb\"", "control character 0x09");
	JSON_BAD("\"\\x\"", "invalid escape '\\x'");
	JSON_BAD("\"\\u12g4\"", "invalid hex digit");
	JSON_BAD("\"\\ud800\"", "unpaired high surrogate");
	JSON_BAD("\"\\ud800\\u0041\"", "unpaired high surrogate");
	JSON_BAD("\"\\udc00\"", "unpaired low surrogate");
	JSON_BAD("\"\xc3\x28\"", "invalid UTF-8");
	JSON_BAD("\"\xc0\xaf\"", "invalid UTF-8");		/* overlong */
	JSON_BAD("\"\xed\xa0\x80\"", "invalid UTF-8");		/* a surrogate */
	JSON_BAD("{\"k\":1,\"j\":2,\"k\":3}", "duplicate key \"k\" at byte 13");
	JSON_BAD("// c\n{}", "unexpected character '/'");
	JSON_BAD("\x01", "unexpected byte 0x01");

	/* a NUL: an error outside strings, and the parser stops at len, not at NULs */
	struct spyre_json *doc;

	TAP_CHECK(spyre_json_parse("[1]\0", 4, &doc, err, sizeof(err)) == -1 &&
		  strstr(err, "unexpected data after the JSON value at byte 3"), "%s", err);
	TAP_CHECK(spyre_json_parse("[1]xyz", 3, &doc, err, sizeof(err)) == 0, "only len bytes: %s", err);
	spyre_json_free(doc);
	/* a tiny error buffer truncates, never overflows */
	char small[8];

	TAP_CHECK(spyre_json_parse("[", 1, &doc, small, sizeof(small)) == -1 && strlen(small) == 7,
		  "truncated message");
}

static void test_json_depth(void)
{
	char deep[2 * SPYRE_JSON_MAX_DEPTH + 8];
	struct spyre_json *doc;
	int d;

	for (d = 0; d < SPYRE_JSON_MAX_DEPTH; d++)
		deep[d] = '[';
	for (int i = 0; i < SPYRE_JSON_MAX_DEPTH; i++)
		deep[d++] = ']';
	TAP_CHECK(spyre_json_parse(deep, (size_t)d, &doc, err, sizeof(err)) == 0, "depth %d: %s",
		  SPYRE_JSON_MAX_DEPTH, err);
	spyre_json_free(doc);
	memmove(deep + 1, deep, (size_t)d);
	deep[0] = '[';
	deep[d + 1] = ']';
	TAP_CHECK(spyre_json_parse(deep, (size_t)d + 2, &doc, err, sizeof(err)) == -1 &&
		  strstr(err, "nesting deeper than 64"), "depth 65: %s", err);
	/* a very deep input is refused quickly, without recursion past the limit */
	size_t big = 1 << 20;
	char *p = malloc(big);

	if (p) {
		memset(p, '[', big);
		TAP_CHECK(spyre_json_parse(p, big, &doc, err, sizeof(err)) == -1 && strstr(err, "nesting"),
			  "1 MiB of '[': %s", err);
		memset(p, ' ', big);
		p[0] = '[';
		p[big - 1] = ']';
		TAP_CHECK(spyre_json_parse(p, big, &doc, err, sizeof(err)) == 0, "whitespace: %s", err);
		spyre_json_free(doc);
		free(p);
	}
}

/* ---- config ---- */

static int cfg_equal(const struct spyre_model_config *a, const struct spyre_model_config *b)
{
	return !strcmp(a->name, b->name) && a->layers == b->layers && a->hidden == b->hidden &&
	       a->heads == b->heads && a->kv_heads == b->kv_heads && a->head_dim == b->head_dim &&
	       a->ffn == b->ffn && a->vocab == b->vocab && a->max_pos == b->max_pos &&
	       a->rope_theta == b->rope_theta && a->norm_eps == b->norm_eps &&
	       a->tied_embeddings == b->tied_embeddings && a->embedding_multiplier == b->embedding_multiplier &&
	       a->attention_multiplier == b->attention_multiplier &&
	       a->residual_multiplier == b->residual_multiplier && a->logits_scaling == b->logits_scaling &&
	       a->bos_token_id == b->bos_token_id && a->eos_token_id == b->eos_token_id;
}

static char path_buf[PATH_MAX + 64];

static const char *config_path(const char *name)
{
	snprintf(path_buf, sizeof(path_buf), "%s/model/configs/%s/config.json", model_top(), name);
	return path_buf;
}

static void test_tiny_file(void)
{
	struct spyre_model_config c, t = spyre_model_config_tiny();

	if (!TAP_CHECK(spyre_model_config_load(config_path("tiny"), &c, err, sizeof(err)) == 0, "%s", err))
		return;
	TAP_CHECK(cfg_equal(&c, &t), "model/configs/tiny/config.json == spyre_model_config_tiny()");
	TAP_EQ(2, c.layers);
	TAP_EQ(128, c.hidden);
	TAP_EQ(4, c.heads);
	TAP_EQ(2, c.kv_heads);
	TAP_EQ(32, c.head_dim);
	TAP_EQ(352, c.ffn);
	TAP_EQ(512, c.vocab);
	TAP_EQ(256, c.max_pos);
	TAP_CHECK(c.attention_multiplier == 0.03125f && c.embedding_multiplier == 12.0f &&
		  c.residual_multiplier == 0.22f && c.logits_scaling == 8.0f && c.norm_eps == 1e-5f &&
		  c.rope_theta == 10000.0f && c.tied_embeddings, "tiny's multipliers");
	TAP_EQ(434816, spyre_model_param_count(&c));
	TAP_EQ(434816 * 4, spyre_model_bytes(&c, 4));
	/* a directory is read as DIR/config.json */
	snprintf(path_buf, sizeof(path_buf), "%s/model/configs/tiny", model_top());
	TAP_CHECK(spyre_model_config_load(path_buf, &c, err, sizeof(err)) == 0 && cfg_equal(&c, &t),
		  "load of the directory: %s", err);
	TAP_CHECK(spyre_model_config_preset("tiny", &c) == 0 && cfg_equal(&c, &t), "preset tiny");
	TAP_CHECK(spyre_model_config_preset("huge", &c) == -1, "no preset huge");
}

static void test_granite_file(void)
{
	struct spyre_model_config c, g = spyre_model_config_granite_3_3_8b();

	if (!TAP_CHECK(spyre_model_config_load(config_path("granite-3.3-8b"), &c, err, sizeof(err)) == 0,
		       "%s", err))
		return;
	TAP_CHECK(cfg_equal(&c, &g), "granite-3.3-8b config.json == the preset");
	TAP_STREQ("granite", c.name);
	TAP_EQ(40, c.layers);
	TAP_EQ(4096, c.hidden);
	TAP_EQ(32, c.heads);
	TAP_EQ(8, c.kv_heads);
	TAP_EQ(128, c.head_dim);	/* hidden / heads: the file has no head_dim */
	TAP_EQ(12800, c.ffn);
	TAP_EQ(49159, c.vocab);
	TAP_EQ(131072, c.max_pos);
	TAP_CHECK(c.rope_theta == 1e7f && c.norm_eps == 1e-5f && c.tied_embeddings &&
		  c.embedding_multiplier == 12.0f && c.attention_multiplier == 0.0078125f &&
		  c.residual_multiplier == 0.22f && c.logits_scaling == 16.0f, "granite's values");
	/* 49159*4096 + 40 * (2*4096 + 4096*(4096+4096+1024+1024) + 3*4096*12800) + 4096 */
	TAP_EQ(8170864640ull, spyre_model_param_count(&c));
	TAP_EQ(8170864640ull * 2, spyre_model_bytes(&c, 2));
}

static const char *const base_fields =
	"\"num_hidden_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
	"\"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 32";

static int parse_with(const char *extra, struct spyre_model_config *c)
{
	char json[2048];

	snprintf(json, sizeof(json), "{%s%s%s}", base_fields, extra[0] ? ", " : "", extra);
	return spyre_model_config_parse(json, strlen(json), c, err, sizeof(err));
}

static void test_defaults(void)
{
	struct spyre_model_config c;

	if (!TAP_CHECK(parse_with("", &c) == 0, "%s", err))
		return;
	TAP_STREQ("", c.name);
	TAP_EQ(4, c.kv_heads);
	TAP_EQ(16, c.head_dim);
	TAP_CHECK(c.rope_theta == 10000.0f && c.norm_eps == 1e-6f && !c.tied_embeddings, "theta, eps, tie");
	TAP_CHECK(c.embedding_multiplier == 1.0f && c.residual_multiplier == 1.0f && c.logits_scaling == 1.0f &&
		  c.attention_multiplier == 0.25f, "Llama multipliers (1/sqrt(16) = %g)", c.attention_multiplier);
	TAP_EQ(0, c.bos_token_id);
	TAP_EQ(0, c.eos_token_id);
	/* null counts as absent; eos may be a list; head_dim explicit may differ from hidden/heads */
	TAP_CHECK(parse_with("\"num_key_value_heads\": null, \"rope_scaling\": null, \"eos_token_id\": [7, 9], "
			     "\"head_dim\": 10, \"model_type\": \"llama\", \"hidden_act\": \"silu\", "
			     "\"attention_bias\": false, \"rms_norm_eps\": 1e-5, \"tie_word_embeddings\": true", &c) == 0,
		  "%s", err);
	TAP_EQ(4, c.kv_heads);
	TAP_EQ(7, c.eos_token_id);
	TAP_EQ(10, c.head_dim);
	TAP_STREQ("llama", c.name);
	TAP_CHECK(c.tied_embeddings && c.norm_eps == 1e-5f, "tie, eps");
	TAP_CHECK(fabsf(c.attention_multiplier - 1.0f / sqrtf(10.0f)) < 1e-7f, "1/sqrt(head_dim 10)");
	/* an integral float is an integer; unknown keys are ignored */
	TAP_CHECK(parse_with("\"num_key_value_heads\": 2.0, \"whatever\": {\"x\": [1]}", &c) == 0 && c.kv_heads == 2,
		  "%s", err);
}

/* The base config plus @extra is refused with a message containing @frag. */
#define CFG_BAD(extra, frag) do {							\
		struct spyre_model_config c_;						\
		TAP_CHECK(parse_with(extra, &c_) == -1 && strstr(err, frag),		\
			  "%s: expected an error with \"%s\", got \"%s\"", extra, frag, err);	\
	} while (0)

/* @json is refused with a message containing @frag. */
#define JSON_CFG_BAD(json, frag) do {							\
		struct spyre_model_config c_;						\
		TAP_CHECK(spyre_model_config_parse(json, strlen(json), &c_, err, sizeof(err)) == -1 && \
			  strstr(err, frag), "%s: expected an error with \"%s\", got \"%s\"", json, frag, err); \
	} while (0)

static void test_bad_configs(void)
{
	/* a later key overrides nothing: duplicates are a JSON error */
	CFG_BAD("\"hidden_size\": 0", "duplicate key \"hidden_size\"");
	JSON_CFG_BAD("{\"num_hidden_layers\": 2, \"hidden_size\": 0, \"num_attention_heads\": 4, "
		     "\"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 32}",
		     "hidden_size is 0");
	JSON_CFG_BAD("{\"num_hidden_layers\": 0, \"hidden_size\": 64, \"num_attention_heads\": 4, "
		     "\"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 32}",
		     "num_hidden_layers is 0");
	JSON_CFG_BAD("{\"num_hidden_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 0, "
		     "\"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 32}",
		     "num_attention_heads is 0");
	JSON_CFG_BAD("{\"num_hidden_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
		     "\"vocab_size\": 100, \"max_position_embeddings\": 32}", "missing field 'intermediate_size'");
	JSON_CFG_BAD("{\"num_hidden_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
		     "\"intermediate_size\": 128, \"max_position_embeddings\": 32}", "missing field 'vocab_size'");
	JSON_CFG_BAD("{\"num_hidden_layers\": 2, \"hidden_size\": \"64\", \"num_attention_heads\": 4, "
		     "\"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 32}",
		     "field 'hidden_size' must be an integer, not a string");
	JSON_CFG_BAD("{\"num_hidden_layers\": 2, \"hidden_size\": 64.5, \"num_attention_heads\": 4, "
		     "\"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 32}",
		     "field 'hidden_size' must be an integer from 0 to 4294967295, not 64.5");
	JSON_CFG_BAD("{\"num_hidden_layers\": -2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
		     "\"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 32}",
		     "field 'num_hidden_layers' must be an integer from 0 to 4294967295, not -2");
	JSON_CFG_BAD("{\"num_hidden_layers\": 2, \"hidden_size\": 2000000, \"num_attention_heads\": 4, "
		     "\"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 32}",
		     "hidden_size (2000000) is larger than 1048576");
	JSON_CFG_BAD("{\"num_hidden_layers\": 2000, \"hidden_size\": 64, \"num_attention_heads\": 4, "
		     "\"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 32}",
		     "num_hidden_layers (2000) is larger than 1024");
	JSON_CFG_BAD("{\"num_hidden_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
		     "\"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 99999999999}",
		     "field 'max_position_embeddings' must be an integer from 0 to 4294967295");
	JSON_CFG_BAD("{\"num_hidden_layers\": 2, \"hidden_size\": 66, \"num_attention_heads\": 4, "
		     "\"intermediate_size\": 128, \"vocab_size\": 100, \"max_position_embeddings\": 32}",
		     "hidden_size (66) is not a multiple of num_attention_heads (4) and head_dim is not given");
	CFG_BAD("\"num_key_value_heads\": 3", "num_attention_heads (4) is not a multiple of num_key_value_heads (3)");
	CFG_BAD("\"num_key_value_heads\": 8", "num_attention_heads (4) is not a multiple of num_key_value_heads (8)");
	CFG_BAD("\"num_key_value_heads\": 0", "num_key_value_heads is 0");
	CFG_BAD("\"head_dim\": 15", "head_dim (15) is odd: rotary embeddings need pairs");
	CFG_BAD("\"head_dim\": 0", "head_dim is 0");
	CFG_BAD("\"head_dim\": 524288", "num_attention_heads * head_dim (4 * 524288) is larger than 1048576");
	CFG_BAD("\"hidden_act\": \"gelu\"", "hidden_act \"gelu\" is not supported (only \"silu\")");
	CFG_BAD("\"hidden_act\": 1", "hidden_act number is not supported");
	CFG_BAD("\"rope_scaling\": {\"rope_type\": \"llama3\"}", "rope_scaling is not supported");
	CFG_BAD("\"attention_bias\": true", "attention_bias = true is not supported");
	CFG_BAD("\"mlp_bias\": \"no\"", "field 'mlp_bias' must be true or false, not a string");
	CFG_BAD("\"tie_word_embeddings\": 1", "field 'tie_word_embeddings' must be true or false, not a number");
	CFG_BAD("\"rope_theta\": \"1e4\"", "field 'rope_theta' must be a number, not a string");
	CFG_BAD("\"rope_theta\": 0", "rope_theta (0) must be a finite number above 1");
	CFG_BAD("\"rope_theta\": 1e300", "field 'rope_theta' (1e+300) is out of the range of a float");
	CFG_BAD("\"rms_norm_eps\": 0", "rms_norm_eps (0) must be above 0 and below 1");
	CFG_BAD("\"logits_scaling\": 0", "logits_scaling (0) must be a finite number above 0");
	CFG_BAD("\"residual_multiplier\": -0.5", "residual_multiplier (-0.5) must be a finite number above 0");
	CFG_BAD("\"embedding_multiplier\": [12]", "field 'embedding_multiplier' must be a number, not an array");
	CFG_BAD("\"bos_token_id\": 100", "bos_token_id (100) is not below vocab_size (100)");
	CFG_BAD("\"eos_token_id\": []", "field 'eos_token_id' must be an integer or a non-empty list of them");
	CFG_BAD("\"model_type\": 5", "field 'model_type' must be a string, not a number");
	CFG_BAD("\"model_type\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
		"field 'model_type' is longer than 63 bytes");
	CFG_BAD("\"model_type\": \"a\\u0000b\"", "holds a NUL");
	JSON_CFG_BAD("[1, 2]", "expected a JSON object, found an array");
	JSON_CFG_BAD("\"config\"", "expected a JSON object, found a string");
	JSON_CFG_BAD("garbage", "not valid JSON: unexpected character 'g' at byte 0");
	JSON_CFG_BAD("{\"num_hidden_layers\": 2,", "not valid JSON: unterminated object at byte 24");
	JSON_CFG_BAD("\x89PNG\r\n\x1a\n", "not valid JSON: unexpected byte 0x89 at byte 0");
}

static void test_validate_limits(void)
{
	struct spyre_model_config c = spyre_model_config_tiny();

	TAP_EQ(0, spyre_model_config_validate(&c, err, sizeof(err)));
	/* the largest config the limits allow: its count fits 64 bits */
	c.layers = SPYRE_MODEL_MAX_LAYERS;
	c.hidden = c.ffn = c.vocab = c.max_pos = SPYRE_MODEL_MAX_DIM;
	c.heads = c.kv_heads = 1;
	c.head_dim = SPYRE_MODEL_MAX_DIM;
	c.tied_embeddings = false;
	TAP_EQ(0, spyre_model_config_validate(&c, err, sizeof(err)));
	uint64_t m = SPYRE_MODEL_MAX_DIM, expect = m * m * 2 + 1024 * (2 * m + m * 4 * m + 3 * m * m) + m;

	TAP_EQ(expect, spyre_model_param_count(&c));
	c.name[63] = 'x';
	memset(c.name, 'x', sizeof(c.name));
	TAP_CHECK(spyre_model_config_validate(&c, err, sizeof(err)) == -1 && strstr(err, "model_type"), "%s", err);
}

static void test_format_round_trip(void)
{
	struct spyre_model_config in[3] = { spyre_model_config_tiny(), spyre_model_config_granite_3_3_8b() }, out;
	char buf[4096];

	TAP_EQ(0, parse_with("\"rms_norm_eps\": 1e-6, \"attention_multiplier\": 0.1, \"model_type\": \"llama\"",
			     &in[2]));
	for (int i = 0; i < 3; i++) {
		int n = spyre_model_config_format(&in[i], buf, sizeof(buf));

		TAP_CHECK(n > 0 && (size_t)n < sizeof(buf), "format %d", i);
		TAP_CHECK(spyre_model_config_parse(buf, (size_t)n, &out, err, sizeof(err)) == 0, "%d: %s", i, err);
		TAP_CHECK(cfg_equal(&in[i], &out), "config %d reads back the same", i);
	}
	TAP_CHECK(strstr(buf, "\"residual_multiplier\": 1,") && strstr(buf, "\"rms_norm_eps\": 1e-06,"),
		  "shortest floats: %s", buf);
	/* save and load */
	const char *dir = model_tmpdir();
	char path[128];

	if (!TAP_CHECK(dir != NULL, "mkdtemp"))
		return;
	snprintf(path, sizeof(path), "%s/config.json", dir);
	TAP_EQ(0, spyre_model_config_save(&in[1], path, err, sizeof(err)));
	TAP_CHECK(spyre_model_config_load(path, &out, err, sizeof(err)) == 0 && cfg_equal(&in[1], &out), "%s", err);
	TAP_CHECK(spyre_model_config_load("/nonexistent/config.json", &out, err, sizeof(err)) == -1 &&
		  !strcmp(err, "/nonexistent/config.json: No such file or directory"), "%s", err);
	TAP_CHECK(spyre_model_config_save(&in[1], "/nonexistent/x.json", err, sizeof(err)) == -1 &&
		  strstr(err, "/nonexistent/x.json"), "%s", err);
	/* a load error names the file */
	model_write_file(path, "{\"hidden_size\": 64}", 19);
	TAP_CHECK(spyre_model_config_load(path, &out, err, sizeof(err)) == -1 && strstr(err, path) &&
		  strstr(err, ": missing field 'num_hidden_layers'"), "%s", err);
}

static void test_truncated(void)
{
	const char *names[] = { "tiny", "granite-3.3-8b" };

	for (int f = 0; f < 2; f++) {
		size_t len, last_brace = 0, bad = 0, good = 0;
		char *text = model_read_file(config_path(names[f]), &len);
		struct spyre_model_config c;

		if (!TAP_CHECK(text != NULL, "read %s", config_path(names[f])))
			continue;
		for (size_t i = 0; i < len; i++)
			if (text[i] == '}')
				last_brace = i;
		for (size_t n = 0; n <= len; n++) {
			/* exactly n bytes in their own allocation: AddressSanitizer-visible overreads */
			char *cut = malloc(n ? n : 1);

			memcpy(cut, text, n);
			err[0] = 0;
			int rc = spyre_model_config_parse(cut, n, &c, err, sizeof(err));

			if (n <= last_brace) {
				bad += rc == -1 && err[0];
				if (rc != -1 || !err[0])
					TAP_CHECK(0, "%s cut at %zu bytes: accepted", names[f], n);
			} else {
				good += rc == 0;
			}
			free(cut);
		}
		TAP_EQ(last_brace + 1, bad);
		TAP_EQ(len - last_brace, good);
		free(text);
	}
}

static const struct tap_case cases[] = {
	{ "json_values", test_json_values },
	{ "json_errors", test_json_errors },
	{ "json_depth", test_json_depth },
	{ "tiny_file", test_tiny_file },
	{ "granite_file", test_granite_file },
	{ "defaults", test_defaults },
	{ "bad_configs", test_bad_configs },
	{ "validate_limits", test_validate_limits },
	{ "format_round_trip", test_format_round_trip },
	{ "truncated", test_truncated },
};

int main(int argc, char **argv)
{
	int rc = TAP_RUN(cases, argc, argv);

	model_rmtmp();
	return rc;
}
