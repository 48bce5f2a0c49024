// SPDX-License-Identifier: MIT
/*
 * Description: libspyre's error contract without a card: discovery succeeds
 * with the number of devices present (none on a build host), opening a device
 * that does not exist or passing NULL fails with the documented status and a
 * human-readable detail (the stream statistics and memory operations
 * included), the detail is per thread, and engine faults have names.
 * Groups of point-to-point calls (spyre_comm_group_start/end()): an end
 * without a start is -EINVAL with its detail, groups nest, and a group is
 * the calling thread's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "spyre.h"
#include "spyre_kernels.h"
#include "../../tests/tap.h"

static int n;	/* devices present */

static void test_device_count(void)
{
	if (!TAP_CHECK(n >= 0, "spyre_device_count() = %d (%s)", n, spyre_last_error()))
		tap_bail("the other cases need the device count");
	tap_diag("%d device%s present", n, n == 1 ? "" : "s");
}

static void test_open_missing_device(void)
{
	struct spyre_device_props p = { .size = sizeof(p) };
	spyre_device_t *dev = (spyre_device_t *)&p;
	char want[128];
	int ret;

	ret = spyre_device_open(n, &dev);
	TAP_CHECK(ret == -ENODEV, "open(%d) = %d", n, ret);
	TAP_CHECK(dev == NULL, "handle not cleared on failure");
	snprintf(want, sizeof(want), "no spyre device %d (%d present)", n, n);
	TAP_CHECK(strstr(spyre_last_error(), want) != NULL, "detail '%s' lacks '%s'",
		  spyre_last_error(), want);
	TAP_CHECK(strstr(spyre_last_error(), "No such device") != NULL,
		  "detail '%s' lacks the status text", spyre_last_error());
	TAP_CHECK(spyre_device_open(-1, &dev) == -ENODEV, "open(-1)");
}

static void test_null_arguments(void)
{
	struct spyre_device_props p = { .size = sizeof(p) };

	TAP_CHECK(spyre_device_open(0, NULL) == -EINVAL, "open(0, NULL)");
	TAP_CHECK(strstr(spyre_last_error(), "out is NULL") != NULL, "detail '%s'", spyre_last_error());
	TAP_CHECK(spyre_device_get_props(NULL, &p) == -EINVAL, "get_props(NULL)");
	TAP_CHECK(spyre_device_get_param(NULL, 0, NULL) == -EINVAL, "get_param(NULL)");
	TAP_CHECK(spyre_device_fd(NULL) == -EINVAL, "fd(NULL)");
	spyre_device_close(NULL);	/* a no-op, like free(NULL) */
}

static void test_stream_stats_arguments(void)
{
	struct spyre_stream_stats st = { .size = sizeof(st) };
	/* Never dereferenced: the arguments are checked first. */
	spyre_stream_t *bogus = (spyre_stream_t *)&st;

	TAP_CHECK(spyre_stream_get_stats(NULL, &st) == -EINVAL, "get_stats(NULL, stats)");
	TAP_CHECK(strstr(spyre_last_error(), "spyre_stream_get_stats: NULL argument") != NULL,
		  "detail '%s'", spyre_last_error());
	TAP_CHECK(spyre_stream_get_stats(bogus, NULL) == -EINVAL, "get_stats(stream, NULL)");
	st.size = 4;
	TAP_CHECK(spyre_stream_get_stats(bogus, &st) == -EINVAL, "get_stats with size 4");
	TAP_CHECK(strstr(spyre_last_error(), "size not set") != NULL, "detail '%s'",
		  spyre_last_error());
	st.size = 0;
	TAP_CHECK(spyre_stream_get_stats(bogus, &st) == -EINVAL, "get_stats with size 0");
	TAP_CHECK(st.launches == 0 && st.size == 0, "stats written on failure");
	TAP_CHECK(spyre_stream_reset_stats(NULL) == -EINVAL, "reset_stats(NULL)");
	TAP_CHECK(strstr(spyre_last_error(), "spyre_stream_reset_stats: NULL stream") != NULL,
		  "detail '%s'", spyre_last_error());
	/* The stream memory operations (0.11). */
	TAP_CHECK(spyre_stream_write_value64(NULL, 4096, 1) == -EINVAL, "write_value64(NULL)");
	TAP_CHECK(strstr(spyre_last_error(), "spyre_stream_write_value64: NULL stream") != NULL,
		  "detail '%s'", spyre_last_error());
	TAP_CHECK(spyre_stream_wait_value64(NULL, 4096, 1, 0) == -EINVAL, "wait_value64(NULL)");
	TAP_CHECK(strstr(spyre_last_error(), "spyre_stream_wait_value64: NULL stream") != NULL,
		  "detail '%s'", spyre_last_error());
}

static void test_names(void)
{
	TAP_STREQ("success", spyre_strerror(0));
	TAP_STREQ(strerror(EINVAL), spyre_strerror(-EINVAL));
	/* Engine faults by name (SPYRE_FAULT_* of spyre_isa.h: 0, 6, 13, 14 (LDX's bad index), then unknown). */
	TAP_STREQ("no fault", spyre_engine_fault_name(0));
	TAP_STREQ("scratchpad access out of range", spyre_engine_fault_name(6));
	TAP_STREQ("no such slot", spyre_engine_fault_name(13));
	TAP_STREQ("index out of bounds", spyre_engine_fault_name(14));
	TAP_STREQ("unknown engine fault", spyre_engine_fault_name(15));
	TAP_STREQ("unknown engine fault", spyre_engine_fault_name(UINT32_MAX));
}

static void *other_thread(void *arg)
{
	(void)arg;
	/* A fresh thread has no detail yet, whatever the main thread did. */
	TAP_CHECK(spyre_last_error()[0] == '\0', "detail leaked across threads: '%s'",
		  spyre_last_error());
	return NULL;
}

static void test_detail_per_thread(void)
{
	pthread_t t;

	spyre_device_open(-1, NULL);	/* leaves a detail on this thread */
	TAP_CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0, "pthread_create");
	pthread_join(t, NULL);
}

static void *end_in_thread(void *arg)
{
	*(int *)arg = spyre_comm_group_end();
	return NULL;
}

static void test_comm_groups(void)
{
	pthread_t t;
	int other = 0;

	TAP_CHECK(spyre_comm_group_end() == -EINVAL, "end without start");
	TAP_CHECK(strstr(spyre_last_error(), "spyre_comm_group_end: no spyre_comm_group_start() before it"),
		  "detail '%s'", spyre_last_error());
	TAP_CHECK(spyre_comm_group_start() == 0, "start");
	TAP_CHECK(spyre_comm_group_start() == 0, "nested start");
	TAP_CHECK(spyre_comm_send(NULL, 0, 1, SPYRE_DT_FP32, 1, NULL) == -EINVAL, "a NULL communicator's send");
	TAP_CHECK(strstr(spyre_last_error(), "spyre_comm_send: NULL communicator"), "detail '%s'",
		  spyre_last_error());
	/* Another thread has no group of its own. */
	TAP_CHECK(pthread_create(&t, NULL, end_in_thread, &other) == 0, "pthread_create");
	pthread_join(t, NULL);
	TAP_CHECK(other == -EINVAL, "end in another thread = %d", other);
	TAP_CHECK(spyre_comm_group_end() == 0, "inner end");
	TAP_CHECK(spyre_comm_group_end() == 0, "outer end of an empty group");
	TAP_CHECK(spyre_comm_group_end() == -EINVAL, "a third end");
}

static const struct tap_case cases[] = {
	{ "device_count", test_device_count },
	{ "open_missing_device", test_open_missing_device },
	{ "null_arguments", test_null_arguments },
	{ "stream_stats_arguments", test_stream_stats_arguments },
	{ "names", test_names },
	{ "detail_per_thread", test_detail_per_thread },
	{ "comm_groups", test_comm_groups },
};

int main(int argc, char **argv)
{
	n = spyre_device_count();
	return TAP_RUN(cases, argc, argv);
}
