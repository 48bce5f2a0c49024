/* SPDX-License-Identifier: MIT */
#ifndef LIBSPYRE_INTERNAL_H
#define LIBSPYRE_INTERNAL_H

#include "spyre.h"

#define SPYRE_EXPORT __attribute__((visibility("default")))

struct spyre_device {
	int fd;
	struct spyre_device_props props;
};

/* Record a detail for spyre_last_error() and return @status. */
int spyre_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
