// SPDX-License-Identifier: MIT
/*
 * Description: the OpenAI request/response layer alone (serve/openai.c,
 * util/jsonw.c) under ASan+UBSan: a table of request bodies with the status
 * and field each must fail with (or pass), the JSON writer's escaping of
 * control characters and invalid UTF-8 (read back by util/json), and stop
 * strings held back across pieces of text.
 */
#include <string.h>

#include "json.h"
#include "jsonw.h"
#include "openai.h"
#include "../../tests/tap.h"

static const struct {
	int kind;		/* 0 completion, 1 chat */
	const char *body;
	unsigned int status;	/* 0: accepted */
	const char *param;
} reqs[] = {
	{ 0, "{\"prompt\":\"hi\"}", 0, "" },
	{ 0, "{\"prompt\":[1,2,3],\"max_tokens\":5,\"temperature\":0,\"seed\":-3}", 0, "" },
	{ 0, "{\"prompt\":[[1,2]],\"stop\":[\"a\",\"bc\"],\"stop_token_ids\":[7]}", 0, "" },
	{ 0, "{\"prompt\":[\"x\"],\"stream\":true,\"stream_options\":{\"include_usage\":true}}", 0, "" },
	{ 1, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 0, "" },
	{ 1, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}", 0, "" },
	{ 0, "{\"prompt\":\"hi\"", 400, "" },			/* malformed */
	{ 0, "[1,2]", 400, "" },					/* not an object */
	{ 0, "", 400, "" },
	{ 0, "{}", 400, "prompt" },
	{ 0, "{\"prompt\":5}", 400, "prompt" },
	{ 0, "{\"prompt\":[]}", 400, "prompt" },
	{ 0, "{\"prompt\":[1,-2]}", 400, "prompt" },
	{ 0, "{\"prompt\":[1,2.5]}", 400, "prompt" },
	{ 0, "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt" },
	{ 0, "{\"prompt\":\"a\",\"max_tokens\":-1}", 400, "max_tokens" },
	{ 0, "{\"prompt\":\"a\",\"max_tokens\":0}", 400, "max_tokens" },
	{ 0, "{\"prompt\":\"a\",\"max_tokens\":1e30}", 400, "max_tokens" },
	{ 0, "{\"prompt\":\"a\",\"max_tokens\":\"5\"}", 400, "max_tokens" },
	{ 0, "{\"prompt\":\"a\",\"temperature\":-0.1}", 400, "temperature" },
	{ 0, "{\"prompt\":\"a\",\"temperature\":\"hot\"}", 400, "temperature" },
	{ 0, "{\"prompt\":\"a\",\"top_p\":0}", 400, "top_p" },
	{ 0, "{\"prompt\":\"a\",\"top_k\":-2}", 400, "top_k" },
	{ 0, "{\"prompt\":\"a\",\"seed\":1.5}", 400, "seed" },
	{ 0, "{\"prompt\":\"a\",\"stream\":1}", 400, "stream" },
	{ 0, "{\"prompt\":\"a\",\"stop\":[\"\"]}", 400, "stop" },
	{ 0, "{\"prompt\":\"a\",\"stop\":[1]}", 400, "stop" },
	{ 0, "{\"prompt\":\"a\",\"n\":2}", 400, "n" },
	{ 0, "{\"prompt\":\"a\",\"logprobs\":3}", 400, "logprobs" },
	{ 0, "{\"prompt\":\"a\",\"model\":7}", 400, "model" },
	{ 1, "{\"messages\":[]}", 400, "messages" },
	{ 1, "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", 400, "messages" },
	{ 1, "{\"messages\":{\"role\":\"user\"}}", 400, "messages" },
	{ 1, "{\"messages\":[{\"role\":\"user\",\"content\":3}]}", 400, "messages" },
};

static void test_parse_table(void)
{
	struct spyre_oai_error e;
	struct spyre_oai_gen g;
	size_t i;

	for (i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		int rc = spyre_oai_parse_gen(reqs[i].kind ? SPYRE_OAI_CHAT : SPYRE_OAI_COMPLETION, reqs[i].body,
					     strlen(reqs[i].body), &g, &e);

		TAP_CHECK(rc == (reqs[i].status ? -1 : 0), "%s: rc %d", reqs[i].body, rc);
		if (rc) {
			TAP_CHECK(e.status == reqs[i].status, "%s: status %u, message %s", reqs[i].body, e.status,
				  e.message);
			TAP_CHECK(!strcmp(e.param, reqs[i].param), "%s: param '%s', expected '%s'", reqs[i].body,
				  e.param, reqs[i].param);
		} else {
			spyre_oai_gen_free(&g);
		}
	}
}

static void test_values(void)
{
	const char *b = "{\"prompt\":[[4,5]],\"max_tokens\":9,\"temperature\":0.5,\"top_k\":3,\"seed\":-1,"
			"\"stop\":\"zz\",\"stop_token_ids\":[2,3],\"ignore_eos\":true}";
	struct spyre_oai_error e;
	struct spyre_oai_gen g;

	TAP_EQ(0, spyre_oai_parse_gen(SPYRE_OAI_COMPLETION, b, strlen(b), &g, &e));
	TAP_EQ(2, g.n_prompt_ids);
	TAP_EQ(5, g.prompt_ids[1]);
	TAP_EQ(9, g.max_tokens);
	TAP_CMP(g.temperature, ==, 0.5f);
	TAP_EQ(3, g.top_k);
	TAP_EQ(UINT64_MAX, g.seed);
	TAP_EQ(1, g.n_stop);
	TAP_STREQ("zz", g.stop[0]);
	TAP_EQ(2, g.n_stop_ids);
	TAP_EQ(1, g.ignore_eos);
	spyre_oai_gen_free(&g);
}

/* Every byte 0..255 and invalid sequences written, read back as valid JSON. */
static void test_escape(void)
{
	static const char bad[] = "a\xff" "b\xc0\xaf" "c\xed\xa0\x80" "d\xe2\x82" "";
	struct spyre_json *doc;
	struct spyre_buf b;
	struct spyre_jw w;
	char raw[256], err[128];
	const char *s;
	size_t i, len;

	for (i = 0; i < 256; i++)
		raw[i] = (char)(i + 1 < 256 ? i + 1 : 0x7f);
	spyre_buf_init(&b);
	spyre_jw_init(&w, &b);
	spyre_jw_arr(&w);
	spyre_jw_strn(&w, raw, 127);
	spyre_jw_strn(&w, bad, sizeof(bad) - 1);
	spyre_jw_strn(&w, "\0x", 2);
	spyre_jw_double(&w, 1.0 / 0.0);
	spyre_jw_arr_end(&w);
	TAP_CHECK(!w.bad && !b.oom, "writer state");
	TAP_EQ(0, spyre_json_parse(b.p, b.len, &doc, err, sizeof(err)));
	if (!doc)
		return;
	s = spyre_json_string(spyre_json_at(spyre_json_root(doc), 0, NULL), &len);
	TAP_EQ(127, len);
	TAP_CHECK(s && !memcmp(s, raw, 127), "ASCII round trip");
	s = spyre_json_string(spyre_json_at(spyre_json_root(doc), 1, NULL), &len);
	TAP_STREQ("a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
		  "d\xef\xbf\xbd\xef\xbf\xbd", s);
	s = spyre_json_string(spyre_json_at(spyre_json_root(doc), 2, NULL), &len);
	TAP_EQ(2, len);
	TAP_EQ(SPYRE_JSON_NULL, spyre_json_type(spyre_json_at(spyre_json_root(doc), 3, NULL)));
	spyre_json_free(doc);
	spyre_buf_free(&b);
	/* Misuse is flagged, not written. */
	spyre_jw_init(&w, &b);
	spyre_jw_obj(&w);
	spyre_jw_int(&w, 1);
	TAP_EQ(1, w.bad);
	spyre_buf_free(&b);
}

/* Stop strings across pieces: held back while they may match, cut before a match. */
static void test_stop(void)
{
	const char *body = "{\"prompt\":\"x\",\"stop\":[\"END\",\"\xc3\xa9t\xc3\xa9\"]}";
	static const struct {
		const char *piece;
		size_t release;	/* cumulative bytes released */
		int hit;
	} steps[] = {
		{ "abc", 3, -1 }, { "E", 3, -1 }, { "N", 3, -1 }, { "x", 6, -1 },
		{ "\xc3\xa9", 6, -1 }, { "t", 6, -1 }, { "\xc3\xa9!", 6, 1 },
	};
	struct spyre_oai_error e;
	struct spyre_oai_gen g;
	struct spyre_buf pending;
	size_t i, released = 0, r;
	int hit;

	TAP_EQ(0, spyre_oai_parse_gen(SPYRE_OAI_COMPLETION, body, strlen(body), &g, &e));
	spyre_buf_init(&pending);
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		r = spyre_oai_stop_feed(&g, &pending, steps[i].piece, strlen(steps[i].piece), &hit);
		TAP_CHECK(hit == steps[i].hit, "step %zu: hit %d", i, hit);
		released += r;
		if (hit < 0)
			spyre_buf_consume(&pending, r);
		TAP_CHECK(released == steps[i].release, "step %zu: released %zu, expected %zu", i, released,
			  steps[i].release);
	}
	spyre_buf_free(&pending);
	spyre_oai_gen_free(&g);
}

static void test_error_json(void)
{
	struct spyre_oai_error e;
	char *s;

	spyre_oai_fail(&e, 404, "model", "The model `%s` does not exist.", "x\"y");
	s = spyre_oai_error_json(&e, NULL);
	TAP_STREQ("{\"error\":{\"message\":\"The model `x\\\"y` does not exist.\",\"type\":\"NotFoundError\","
		  "\"param\":\"model\",\"code\":404}}", s);
	free(s);
}

static const struct tap_case cases[] = {
	{ "parse_table", test_parse_table },
	{ "values", test_values },
	{ "escape", test_escape },
	{ "stop", test_stop },
	{ "error_json", test_error_json },
};

int main(int argc, char **argv)
{
	return TAP_RUN(cases, argc, argv);
}
