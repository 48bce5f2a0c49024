/* SPDX-License-Identifier: MIT */
/*
 * fuzz-run.h - a bounded run of a libFuzzer target as one TAP check, for the
 * tests that run the fuzzers briefly (qemu-device/engine/tests/fuzz-run-test.c,
 * model/tests/fuzz-run-test.c). Include after tap.h.
 *
 *	fuzz_run(fuzz, "spyre-prog-fuzz", dir, 200000, 45);
 *
 * runs the target @fuzz on the seeds in @dir for @runs executions or
 * @seconds, whichever comes first, and prints its statistics as diagnostics.
 * The check fails on any crash, sanitizer report or timeout; then @dir (with
 * the reproducer and the log) is kept and the log's tail printed; else @dir
 * is removed.
 */
#ifndef SPYRE_FUZZ_RUN_H
#define SPYRE_FUZZ_RUN_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

static inline void fuzz_run(const char *fuzz, const char *name, const char *dir, unsigned int runs,
			    unsigned int seconds)
{
	char cmd[4 * PATH_MAX];
	int rc, stats;

	/*
	 * -timeout is wall-clock seconds per input: one that takes milliseconds
	 * can take many seconds on a slow or loaded machine (sanitizers, and
	 * builds or VMs sharing the CPUs), so only 60 s counts as a hang. That
	 * still fits, with @seconds, in tools/check's 300 s per test.
	 */
	snprintf(cmd, sizeof(cmd), "%s -runs=%u -max_total_time=%u -timeout=60 -rss_limit_mb=2048 "
		 "-print_final_stats=1 -artifact_prefix=%s/ %s > %s/log 2>&1", fuzz, runs, seconds, dir, dir, dir);
	rc = system(cmd);

	snprintf(cmd, sizeof(cmd), "grep -E 'stat::number_of_executed_units|ERROR|SUMMARY|Done' %s/log |"
		 " sed 's/^/# /'; grep -q 'stat::number_of_executed_units' %s/log", dir, dir);
	stats = system(cmd);

	TAP_CHECK(rc == 0 && stats == 0, "libFuzzer run of %s: no crash (exit %d)", name, rc);
	if (rc) {
		snprintf(cmd, sizeof(cmd), "tail -n 40 %s/log | sed 's/^/# /'", dir);
		if (system(cmd))
			rc = 1;
	}
	if (rc) {	/* keep the reproducer */
		tap_diag("crash input kept in %s", dir);
	} else {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd))
			tap_diag("could not remove %s", dir);
	}
}

#endif /* SPYRE_FUZZ_RUN_H */
