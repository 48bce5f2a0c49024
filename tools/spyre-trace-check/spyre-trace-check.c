// SPDX-License-Identifier: MIT
/*
 * spyre-trace-check - check a trace written by libspyre (spyre_trace_start(),
 * spyre-run --trace, spyre-generate --trace) and tell where each step's time
 * went. The checks: trace-check.h. Exit status: 0 the trace passed, 1 it did
 * not (or could not be read), 2 bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace-check.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spyre-trace-check [options] FILE\n"
		"  --launches N   exactly N launch jobs\n"
		"  --min-steps N  at least N steps (outermost spans with spyre_stream_get_stats inside)\n"
		"  --min-jobs N   at least N device jobs\n"
		"  -q, --quiet    no per-step summary\n"
		"  -h, --help     this text\n"
		"exit status: 0 the trace passed every check, 1 it did not, 2 bad usage\n");
}

static int num(const char *opt, const char *v, long *out)
{
	char *end;

	if (!v || !*v || (*out = strtol(v, &end, 10)) < 0 || *end) {
		fprintf(stderr, "spyre-trace-check: %s needs a number >= 0\n", opt);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct trace_check_opts o = { .launches = -1, .summary = 1, .out = stdout };
	struct trace_check_result r;
	const char *path = NULL;
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			o.summary = 0;
		} else if (!strcmp(a, "--launches") || !strcmp(a, "--min-steps") || !strcmp(a, "--min-jobs")) {
			long *dst = a[2] == 'l' ? &o.launches : a[6] == 's' ? &o.min_steps : &o.min_jobs;

			if (num(a, i + 1 < argc ? argv[++i] : NULL, dst))
				return 2;
		} else if (a[0] == '-' || path) {
			usage(stderr);
			return 2;
		} else {
			path = a;
		}
	}
	if (!path) {
		usage(stderr);
		return 2;
	}
	if (trace_check_file(path, &o, &r)) {
		printf("%s: FAILED: %zu error%s\n", path, r.errors, r.errors == 1 ? "" : "s");
		return 1;
	}
	printf("%s: ok: %zu events, %zu host threads, %zu library calls, %zu caller spans, %zu submits, "
	       "%zu device jobs (%zu launches), %zu core spans, %zu steps\n", path, r.events, r.threads,
	       r.api_calls, r.user_spans, r.submits, r.jobs, r.launch_jobs, r.core_spans, r.steps);
	return 0;
}
