// SPDX-License-Identifier: MIT
/*
 * Thread-local error detail, status strings and engine fault names. A
 * detail is never empty: a traced public call that fails without recording
 * one (a status passed up from a lower layer as it came) records its own.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "spyre.h"
#include "spyre_isa.h"
#include "internal.h"

static __thread char last_error[512];
static __thread uint64_t details;	/* details this thread recorded */

int spyre_error(int status, const char *fmt, ...)
{
	va_list ap;
	int n;

	details++;
	va_start(ap, fmt);
	n = vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(last_error) - 1 && status < 0)
		snprintf(last_error + n, sizeof(last_error) - (size_t)n, " (%s)",
			 spyre_strerror(status));
	return status;
}

uint64_t spyre_error_count(void)
{
	return details;
}

int spyre_error_ensure(int status, uint64_t count0, const char *call)
{
	if (status < 0 && details == count0)
		return spyre_error(status, "%s failed", call);
	return status;
}

SPYRE_EXPORT const char *spyre_last_error(void)
{
	return last_error;
}

SPYRE_EXPORT const char *spyre_strerror(int status)
{
	if (status >= 0)
		return "success";
	return strerror(-status);
}

SPYRE_EXPORT const char *spyre_engine_fault_name(uint32_t cause)
{
	/* The SPYRE_ENGINE_FAULT_* causes of spyre_isa.h. */
	static const char *const names[] = SPYRE_ENGINE_FAULT_TEXTS;
	_Static_assert(sizeof(names) / sizeof(names[0]) == SPYRE_ENGINE_FAULT_COUNT,
		       "a name for every engine fault of spyre_isa.h");

	return SPYRE_NAME_OF(names, cause, "unknown engine fault");
}
