/* SPDX-License-Identifier: MIT */
/* clock.h - CLOCK_MONOTONIC in nanoseconds, for the host-side timings of the model and the server. */
#ifndef SPYRE_UTIL_CLOCK_H
#define SPYRE_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
