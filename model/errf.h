/* SPDX-License-Identifier: MIT */
/*
 * errf.h - the error reports of model/ and serve/ (internal to them): the
 * message formatted into the caller's (err, errlen) buffer, which may be
 * NULL or empty; returns -1, so that a failure reads
 *
 *	return errf(err, errlen, "%s: %s", path, strerror(errno));
 */
#ifndef SPYRE_MODEL_ERRF_H
#define SPYRE_MODEL_ERRF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline int errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static inline int errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* The same returning @rc (a negative errno): return errfc(err, errlen, -EINVAL, "..."). */
static inline int errfc(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static inline int errfc(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

#endif /* SPYRE_MODEL_ERRF_H */
