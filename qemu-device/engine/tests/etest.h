/* SPDX-License-Identifier: MIT */
/*
 * etest.h - tiny TAP helpers for the engine's host tests: `ok N name` /
 * `not ok N name` lines, a final `N passed, N failed` line, exit 0 or 1.
 */
#ifndef ETEST_H
#define ETEST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int et_n, et_fail;

static inline __attribute__((format(printf, 2, 3))) int et_ok(int cond, const char *fmt, ...)
{
	va_list ap;

	et_n++;
	if (!cond)
		et_fail++;
	printf("%s %d ", cond ? "ok" : "not ok", et_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	return cond;
}

static inline int et_done(void)
{
	printf("1..%d\n%d passed, %d failed\n", et_n, et_n - et_fail, et_fail);
	return et_fail ? 1 : 0;
}

#endif /* ETEST_H */
