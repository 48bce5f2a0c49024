// SPDX-License-Identifier: MIT
/*
 * spyre-json-get - read values out of a JSON document with the project's
 * strict parser (util/json.c), for tests in the guest, which has no python
 * or jq.
 *
 * Usage: spyre-json-get FILE|- PATH...
 *
 * A PATH is dot-separated steps from the root: an object key, an array
 * index (0, 1, ...), "#" (the number of members or elements, as the last
 * step), or KEY=VALUE (the first array element that is an object whose
 * member KEY prints as VALUE). One line per PATH: a string unquoted, a
 * number as the document writes it, true/false/null, or the type name of an
 * object or array.
 *
 * Exit status: 0 every path found, 1 a path not found (named on stderr),
 * 2 bad usage, unreadable file or invalid JSON (the parser's message).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static const char *text;	/* the document */

/* The value as one line of text, into @buf. */
static const char *value_text(const struct spyre_json_node *v, char *buf, size_t len)
{
	size_t off, n;
	bool b;

	switch (spyre_json_type(v)) {
	case SPYRE_JSON_NULL:
		return "null";
	case SPYRE_JSON_BOOL:
		spyre_json_bool(v, &b);
		return b ? "true" : "false";
	case SPYRE_JSON_NUMBER:
		/* The literal: the parser checked it, it ends where these do. */
		off = spyre_json_offset(v);
		n = strspn(text + off, "0123456789+-.eE");
		snprintf(buf, len, "%.*s", (int)n, text + off);
		return buf;
	case SPYRE_JSON_STRING:
		return spyre_json_string(v, NULL);
	default:
		return spyre_json_type_name(spyre_json_type(v));
	}
}

/* Follow one step; NULL if there is nothing there. */
static const struct spyre_json_node *step(const struct spyre_json_node *v, const char *s)
{
	const char *eq = strchr(s, '=');
	char *end, buf[64];
	size_t i, n;

	if (spyre_json_type(v) == SPYRE_JSON_OBJECT)
		return spyre_json_get(v, s);
	if (spyre_json_type(v) != SPYRE_JSON_ARRAY)
		return NULL;
	if (eq) {
		char key[256];

		snprintf(key, sizeof(key), "%.*s", (int)(eq - s), s);
		n = spyre_json_count(v);
		for (i = 0; i < n; i++) {
			const struct spyre_json_node *m = spyre_json_get(spyre_json_at(v, i, NULL), key);

			if (m && !strcmp(value_text(m, buf, sizeof(buf)), eq + 1))
				return spyre_json_at(v, i, NULL);
		}
		return NULL;
	}
	i = strtoul(s, &end, 10);
	if (end == s || *end)
		return NULL;
	return spyre_json_at(v, i, NULL);
}

int main(int argc, char **argv)
{
	struct spyre_json *doc;
	char err[256], buf[64];
	size_t len = 0, cap = 0;
	char *buf_text = NULL;
	int i, rc = 0;
	FILE *f;

	if (argc < 3) {
		fprintf(stderr, "usage: spyre-json-get FILE|- PATH...\n");
		return 2;
	}
	f = strcmp(argv[1], "-") ? fopen(argv[1], "r") : stdin;
	if (!f) {
		perror(argv[1]);
		return 2;
	}
	for (;;) {
		size_t n;

		if (len == cap) {
			/* one byte more than read: the literal scan stops at a NUL */
			char *t = realloc(buf_text, (cap = cap ? 2 * cap : 65536) + 1);

			if (!t) {
				fprintf(stderr, "spyre-json-get: out of memory\n");
				return 2;
			}
			buf_text = t;
		}
		n = fread(buf_text + len, 1, cap - len, f);
		if (!n)
			break;
		len += n;
	}
	if (f != stdin)
		fclose(f);
	buf_text[len] = '\0';
	text = buf_text;
	if (spyre_json_parse(text, len, &doc, err, sizeof(err))) {
		fprintf(stderr, "spyre-json-get: %s: %s\n", argv[1], err);
		free(buf_text);
		return 2;
	}
	for (i = 2; i < argc; i++) {
		const struct spyre_json_node *v = spyre_json_root(doc);
		char *path = strdup(argv[i]), *save = NULL, *s;

		for (s = strtok_r(path, ".", &save); v && s; s = strtok_r(NULL, ".", &save)) {
			if (!strcmp(s, "#") && (spyre_json_type(v) == SPYRE_JSON_ARRAY ||
						spyre_json_type(v) == SPYRE_JSON_OBJECT)) {
				printf("%zu\n", spyre_json_count(v));
				break;
			}
			v = step(v, s);
		}
		if (!v) {
			fprintf(stderr, "spyre-json-get: %s: no value at '%s'\n", argv[1], argv[i]);
			rc = 1;
		} else if (!s) {
			printf("%s\n", value_text(v, buf, sizeof(buf)));
		}
		free(path);
	}
	spyre_json_free(doc);
	free(buf_text);
	return rc;
}
