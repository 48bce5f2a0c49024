/* SPDX-License-Identifier: MIT */
/*
 * What the benches that run in the VM on libspyre share: a millisecond
 * clock, whether the card runs in timed mode (the guest kernel's command
 * line, as tools/vm/run --timed sets it) and the exit on a libspyre error.
 * Define BENCH_NAME before including it.
 */
#ifndef SPYRE_BENCH_VM_H
#define SPYRE_BENCH_VM_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spyre.h"

static inline double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline int timed_mode(void)
{
	char buf[4096] = "";
	FILE *f = fopen("/proc/cmdline", "r");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	return strstr(buf, "spyre.timed=1") != NULL;
}

static inline void die(const char *what)
{
	fprintf(stderr, BENCH_NAME ": %s: %s\n", what, spyre_last_error());
	exit(1);
}

#endif
