// SPDX-License-Identifier: MIT
/* Thread-local error detail, status strings and engine fault names. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "spyre.h"
#include "spyre_isa.h"
#include "internal.h"

static __thread char last_error[512];

int spyre_error(int status, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(last_error) - 1 && status < 0)
		snprintf(last_error + n, sizeof(last_error) - (size_t)n, " (%s)",
			 spyre_strerror(status));
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
	/* The SPYRE_FAULT_* causes of spyre_isa.h, in order. */
	static const char *const names[] = {
		[SPYRE_ENGINE_FAULT_NONE] = "no fault",
		[SPYRE_ENGINE_FAULT_BAD_PROGRAM] = "malformed program",
		[SPYRE_ENGINE_FAULT_BAD_OPCODE] = "bad opcode",
		[SPYRE_ENGINE_FAULT_BAD_OPERAND] = "bad operand",
		[SPYRE_ENGINE_FAULT_BAD_DTYPE] = "data type not valid for the opcode",
		[SPYRE_ENGINE_FAULT_ALIGN] = "operand not on a stick boundary",
		[SPYRE_ENGINE_FAULT_SP_RANGE] = "scratchpad access out of range",
		[SPYRE_ENGINE_FAULT_MEM_RANGE] = "memory access outside its slot",
		[SPYRE_ENGINE_FAULT_MEM] = "memory access failed",
		[SPYRE_ENGINE_FAULT_BAD_PEER] = "ring peer not launched",
		[SPYRE_ENGINE_FAULT_RING_MISMATCH] = "ring message tag or size mismatch",
		[SPYRE_ENGINE_FAULT_DEADLOCK] = "deadlock",
		[SPYRE_ENGINE_FAULT_BUDGET] = "instruction budget exhausted",
		[SPYRE_ENGINE_FAULT_BAD_SLOT] = "no such slot",
	};
	_Static_assert(sizeof(names) / sizeof(names[0]) == SPYRE_ENGINE_FAULT_COUNT,
		       "a name for every engine fault of spyre_isa.h");

	return SPYRE_NAME_OF(names, cause, "unknown engine fault");
}
