// SPDX-License-Identifier: MIT
/*
 * Description: libspyre's error contract without a card: discovery succeeds
 * with the number of devices present (none on a build host), opening a device
 * that does not exist or passing NULL fails with the documented status and a
 * human-readable detail, the detail is per thread, and engine faults have
 * names.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "spyre.h"

static int failures;

#define CHECK(cond, ...) do {							\
		if (!(cond)) {							\
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);				\
			fputc('\n', stderr);					\
			failures++;						\
		}								\
	} while (0)

static void *other_thread(void *arg)
{
	(void)arg;
	/* A fresh thread has no detail yet, whatever the main thread did. */
	CHECK(spyre_last_error()[0] == '\0', "detail leaked across threads: '%s'",
	      spyre_last_error());
	return NULL;
}

int main(void)
{
	struct spyre_device_props p = { .size = sizeof(p) };
	spyre_device_t *dev = (spyre_device_t *)&p;
	char want[128];
	pthread_t t;
	int n, ret;

	n = spyre_device_count();
	CHECK(n >= 0, "spyre_device_count() = %d (%s)", n, spyre_last_error());
	if (n < 0)
		return 1;

	ret = spyre_device_open(n, &dev);
	CHECK(ret == -ENODEV, "open(%d) = %d", n, ret);
	CHECK(dev == NULL, "handle not cleared on failure");
	snprintf(want, sizeof(want), "no spyre device %d (%d present)", n, n);
	CHECK(strstr(spyre_last_error(), want) != NULL, "detail '%s' lacks '%s'",
	      spyre_last_error(), want);
	CHECK(strstr(spyre_last_error(), "No such device") != NULL,
	      "detail '%s' lacks the status text", spyre_last_error());

	CHECK(spyre_device_open(-1, &dev) == -ENODEV, "open(-1)");
	CHECK(spyre_device_open(0, NULL) == -EINVAL, "open(0, NULL)");
	CHECK(strstr(spyre_last_error(), "out is NULL") != NULL, "detail '%s'", spyre_last_error());
	CHECK(spyre_device_get_props(NULL, &p) == -EINVAL, "get_props(NULL)");
	CHECK(spyre_device_get_param(NULL, 0, NULL) == -EINVAL, "get_param(NULL)");
	CHECK(spyre_device_fd(NULL) == -EINVAL, "fd(NULL)");
	spyre_device_close(NULL);	/* a no-op, like free(NULL) */

	CHECK(!strcmp(spyre_strerror(0), "success"), "strerror(0) = %s", spyre_strerror(0));
	CHECK(!strcmp(spyre_strerror(-EINVAL), strerror(EINVAL)), "strerror(-EINVAL)");
	/* Engine faults by name (SPYRE_FAULT_* of spyre_isa.h: 0, 6, 13, then unknown). */
	CHECK(!strcmp(spyre_engine_fault_name(0), "no fault"), "%s", spyre_engine_fault_name(0));
	CHECK(!strcmp(spyre_engine_fault_name(6), "scratchpad access out of range"), "%s",
	      spyre_engine_fault_name(6));
	CHECK(!strcmp(spyre_engine_fault_name(13), "no such slot"), "%s", spyre_engine_fault_name(13));
	CHECK(!strcmp(spyre_engine_fault_name(14), "unknown engine fault"), "%s",
	      spyre_engine_fault_name(14));
	CHECK(!strcmp(spyre_engine_fault_name(UINT32_MAX), "unknown engine fault"), "UINT32_MAX");

	CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0, "pthread_create");
	pthread_join(t, NULL);

	if (failures)
		return 1;
	printf("api-errors-test: all checks passed (%d device%s present)\n", n, n == 1 ? "" : "s");
	return 0;
}
