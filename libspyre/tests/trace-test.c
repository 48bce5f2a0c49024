// SPDX-License-Identifier: MIT
/*
 * Description: libspyre's traces (spyre_trace_start()) on the host, without
 * a card, checked by the checks of tools/spyre-trace-check (trace-check.h):
 *  - writer: 4 threads record nested spans and traced calls at once; the
 *    file is strict JSON with exactly their events, one lane per thread;
 *  - errors: the documented statuses (no file name, an unwritable file, a
 *    second start, a stop without a start), spans while off are no-ops;
 *  - device: a fake driver (defined here; libudev finds one "card" whose node
 *    is a memfd) executes each job's TIMESTAMP packets (a device clock with
 *    an offset from the host's) and writes each LAUNCH's record (modeled
 *    time, per-core busy cycles); 2 threads, each with its stream, run
 *    "decode steps" of launches, copies and fills between
 *    spyre_stream_reset_stats() and spyre_stream_get_stats(): every job
 *    lies after its submit, every core span inside its launch, each step's
 *    launches add up to its statistics;
 *  - clock_reset: the device clock restarts (as at a reset of the card, a
 *    runtime resume from D3hot) 300 ms behind where it was, between two
 *    runs of steps on an idle device: each run is put on the host clock with
 *    its own offset, and every job lies after its submit and before its
 *    completion was seen;
 *  - env: SPYRE_TRACE=FILE traces a process that exits without stopping.
 * Built twice: with AddressSanitizer (trace-test) and with ThreadSanitizer
 * (trace-tsan-test), linked with libspyre's objects. TAP (tests/tap.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libudev.h>
#include <xf86drm.h>

#include "spyre.h"
#include "spyre_accel.h"
#include "spyre_hw.h"
#include "spyre_progbuild.h"
#include "trace-check.h"
#include "../../tests/tap.h"

#define MAX_OBJS	4096
#define DEV_CLOCK_OFF	123456789ull	/* the fake device clock runs this far behind the host's */
#define CLOCK_BACK_NS	300000000ull	/* clock_reset: the device clock restarts this far back */
#define CORE_MASK	0xfu

static char self[4096];
static char dir[] = "/tmp/trace-test.XXXXXX";

/* ---- the fake driver: queues, syncobjs, buffers; jobs run at submit ------------------- */

static pthread_mutex_t mk = PTHREAD_MUTEX_INITIALIZER;
static int memfd = -1;
static char devnode[64];
static uint64_t file_size, next_va = 1ull << 30, launches_run;
static uint32_t next_handle;
static uint64_t timeline[MAX_OBJS];
static uint64_t dev_clock_off = DEV_CLOCK_OFF;	/* host clock - device clock (atomic) */
static struct {
	uint64_t va, size, off;		/* off: the memfd offset of a host buffer, else ~0 */
} bo[MAX_OBJS];

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int fail_errno(int e)
{
	errno = e;
	return -1;
}

/* Write @n bytes at device address @va (a host buffer). */
static int dev_write(uint64_t va, const void *p, size_t n)
{
	uint32_t h;

	for (h = 1; h <= next_handle; h++)
		if (bo[h].size && va >= bo[h].va && va + n <= bo[h].va + bo[h].size) {
			if (bo[h].off == ~0ull)
				return -1;
			return pwrite(memfd, p, n, (off_t)(bo[h].off + va - bo[h].va)) == (ssize_t)n ? 0 : -1;
		}
	return -1;
}

static int fake_submit(struct drm_spyre_submit *a)
{
	const uint8_t *pk = (const void *)(uintptr_t)a->packets;
	uint32_t i, c;

	if (!a->packet_count || a->packet_count > DRM_SPYRE_MAX_JOB_PACKETS ||
	    a->out_sync_handle >= MAX_OBJS || a->out_sync_point <= timeline[a->out_sync_handle])
		return fail_errno(EINVAL);
	for (i = 0; i < a->packet_count; i++) {
		const uint8_t *k = pk + (size_t)i * SPYRE_PKT_SIZE;

		if (k[0] == SPYRE_PKT_OP_TIMESTAMP) {
			const struct spyre_pkt_sem *t = (const void *)k;
			uint64_t now = mono_ns() - __atomic_load_n(&dev_clock_off, __ATOMIC_RELAXED);

			if (dev_write(t->addr, &now, 8))
				return fail_errno(EFAULT);
		} else if (k[0] == SPYRE_PKT_OP_LAUNCH) {
			const struct spyre_pkt_launch *l = (const void *)k;
			struct spyre_launch_record r = { .status = 0 };

			/* a modeled time of its own per launch; core c busy (c + 1) / 8 of it */
			r.device_ns = 1000 + 37 * (launches_run++ % 50);
			r.device_cycles = r.device_ns;		/* 1000 MHz */
			r.cores_run = (uint32_t)__builtin_popcount(l->core_mask);
			r.insns = 3;
			for (c = 0; c < 32; c++)
				if (l->core_mask & (1u << c))
					r.core_busy_cycles[c] = r.device_cycles * (c % 8 + 1) / 8;
			if (l->record && dev_write(l->record, &r, sizeof(r)))
				return fail_errno(EFAULT);
		}
	}
	timeline[a->out_sync_handle] = a->out_sync_point;
	return 0;
}

int drmIoctl(int fd, unsigned long request, void *arg)
{
	int ret = 0;

	(void)fd;
	pthread_mutex_lock(&mk);
	if (request == DRM_IOCTL_SPYRE_GET_PARAM) {
		static const uint64_t v[] = { 0x12345350, 0x3, 32, 2u << 20, 128, 8, 1ull << 30, 1000, 0 };
		struct drm_spyre_get_param *g = arg;

		if (g->param < sizeof(v) / sizeof(v[0]))
			g->value = v[g->param];
		else
			ret = fail_errno(EINVAL);
	} else if (request == DRM_IOCTL_SPYRE_BO_CREATE) {
		struct drm_spyre_bo_create *c = arg;
		uint64_t size = (c->size + 4095) & ~4095ull;

		if (next_handle + 1 >= MAX_OBJS) {
			ret = fail_errno(ENOMEM);
		} else {
			c->handle = ++next_handle;
			c->va = next_va;
			next_va += size;
			c->mmap_offset = 0;
			bo[c->handle].va = c->va;
			bo[c->handle].size = size;
			bo[c->handle].off = ~0ull;
			if (c->flags & DRM_SPYRE_BO_HOST) {
				c->mmap_offset = file_size;
				bo[c->handle].off = file_size;
				file_size += size;
				if (ftruncate(memfd, (off_t)file_size))
					abort();
			}
		}
	} else if (request == DRM_IOCTL_GEM_CLOSE) {
		struct drm_gem_close *c = arg;

		if (c->handle < MAX_OBJS)
			bo[c->handle].size = 0;
	} else if (request == DRM_IOCTL_SPYRE_QUEUE_CREATE) {
		((struct drm_spyre_queue_create *)arg)->queue_id = ++next_handle;
	} else if (request == DRM_IOCTL_SPYRE_QUEUE_DESTROY) {
	} else if (request == DRM_IOCTL_SPYRE_SUBMIT) {
		ret = fake_submit(arg);
	} else if (request == DRM_IOCTL_SPYRE_QUEUE_ERROR) {
		struct drm_spyre_queue_error *e = arg;
		uint32_t q = e->queue_id;

		memset(e, 0, sizeof(*e));
		e->queue_id = q;
	} else {
		ret = fail_errno(ENOTTY);
	}
	pthread_mutex_unlock(&mk);
	return ret;
}

int drmSyncobjCreate(int fd, uint32_t flags, uint32_t *handle)
{
	(void)fd;
	(void)flags;
	pthread_mutex_lock(&mk);
	*handle = ++next_handle;
	timeline[*handle] = 0;
	pthread_mutex_unlock(&mk);
	return 0;
}

int drmSyncobjDestroy(int fd, uint32_t handle)
{
	(void)fd;
	(void)handle;
	return 0;
}

int drmSyncobjTimelineWait(int fd, uint32_t *handles, uint64_t *points, unsigned int num_handles,
			   int64_t timeout_nsec, unsigned int flags, uint32_t *first_signaled)
{
	unsigned int i;
	int ret = 0;

	(void)fd;
	(void)timeout_nsec;
	(void)flags;
	(void)first_signaled;
	pthread_mutex_lock(&mk);
	for (i = 0; i < num_handles; i++)
		if (handles[i] >= MAX_OBJS || points[i] > timeline[handles[i]])
			ret = -EINVAL;
	pthread_mutex_unlock(&mk);
	if (ret)
		errno = EINVAL;
	return ret;
}

/* Only a batch whose SUBMIT failed signals a point (stream.c): never while tracing. */
int drmSyncobjTimelineSignal(int fd, const uint32_t *handles, uint64_t *points, uint32_t handle_count)
{
	(void)fd;
	(void)handles;
	(void)points;
	(void)handle_count;
	abort();
}

int drmSyncobjQuery(int fd, uint32_t *handles, uint64_t *points, uint32_t handle_count)
{
	uint32_t i;

	(void)fd;
	pthread_mutex_lock(&mk);
	for (i = 0; i < handle_count; i++)
		points[i] = handles[i] < MAX_OBJS ? timeline[handles[i]] : 0;
	pthread_mutex_unlock(&mk);
	return 0;
}

/* libudev: one accel device, bound to spyre, whose node is the memfd. */
#include "fake-udev.h"

/* ---- helpers -------------------------------------------------------------------------- */

static void path_of(char *p, size_t n, const char *name)
{
	snprintf(p, n, "%s/%s", dir, name);
}

/* Check the trace at @path with @o's expectations; the result in *@r. */
static bool check_file(const char *path, struct trace_check_opts o, struct trace_check_result *r)
{
	int ret;

	o.out = stdout;
	ret = trace_check_file(path, &o, r);
	return TAP_CHECK(ret == 0, "%s fails the trace checks (%zu errors, above)", path, r->errors);
}

/* ---- writer: 4 threads, no device ------------------------------------------------------ */

#define WRITERS 4
#define SPANS	500

static void *writer(void *arg)
{
	char name[48];
	int i;

	for (i = 0; i < SPANS; i++) {
		snprintf(name, sizeof(name), "thread %ld span %d \"quoted\" \\ é", (long)(intptr_t)arg, i);
		spyre_trace_span_begin(name);
		spyre_trace_span_begin("inner");
		/* a traced call that fails at once: a span of its own, with its status */
		if (spyre_stream_synchronize(NULL) != -EINVAL)
			return (void *)1;
		spyre_trace_span_end();
		spyre_trace_span_end();
	}
	return NULL;
}

static void test_writer(void)
{
	struct trace_check_opts o = { .launches = 0 };
	struct trace_check_result r;
	pthread_t t[WRITERS];
	char path[256];
	long i;
	void *rv;
	int ret;

	path_of(path, sizeof(path), "writer.json");
	TAP_EQ(0, spyre_trace_start(path));
	TAP_EQ(1, spyre_trace_active());
	for (i = 0; i < WRITERS; i++)
		TAP_EQ(0, pthread_create(&t[i], NULL, writer, (void *)i));
	for (i = 0; i < WRITERS; i++) {
		pthread_join(t[i], &rv);
		TAP_CHECK(rv == NULL, "writer %ld: a traced call did not fail as documented", i);
	}
	ret = spyre_trace_stop();
	TAP_CHECK(ret > 0, "spyre_trace_stop() = %d (%s)", ret, spyre_last_error());
	TAP_EQ(0, spyre_trace_active());
	if (!check_file(path, o, &r))
		return;
	TAP_CHECK(r.events == (size_t)ret, "the file holds %zu events, spyre_trace_stop() said %d", r.events, ret);
	TAP_CHECK(r.spans == WRITERS * SPANS * 3, "%zu spans, %d expected (2 caller spans and a call per "
		  "iteration)", r.spans, WRITERS * SPANS * 3);
	TAP_CHECK(r.user_spans == WRITERS * SPANS * 2, "%zu caller spans, %d expected", r.user_spans,
		  WRITERS * SPANS * 2);
	TAP_CHECK(r.api_calls == WRITERS * SPANS, "%zu calls, %d expected", r.api_calls, WRITERS * SPANS);
	TAP_CHECK(r.threads == WRITERS, "%zu host thread lanes, %d expected", r.threads, WRITERS);
	TAP_CHECK(r.jobs == 0 && r.submits == 0, "%zu jobs and %zu submits without a device", r.jobs, r.submits);
}

/* ---- errors ---------------------------------------------------------------------------- */

static void test_errors(void)
{
	char path[256];

	TAP_EQ(-EINVAL, spyre_trace_start(NULL));
	TAP_EQ(-EINVAL, spyre_trace_start(""));
	TAP_EQ(-ENOENT, spyre_trace_start("/nonexistent-dir/trace.json"));
	TAP_CHECK(strstr(spyre_last_error(), "/nonexistent-dir/trace.json") != NULL,
		  "the detail '%s' does not name the file", spyre_last_error());
	TAP_EQ(-EINVAL, spyre_trace_stop());
	TAP_EQ(0, spyre_trace_active());
	spyre_trace_span_begin("not recorded");		/* no-ops while off */
	spyre_trace_span_end();
	spyre_trace_span_end();
	path_of(path, sizeof(path), "errors.json");
	TAP_EQ(0, spyre_trace_start(path));
	TAP_EQ(-EBUSY, spyre_trace_start(path));
	spyre_trace_span_end();				/* nothing open: ignored */
	TAP_CHECK(spyre_trace_stop() > 0, "%s", spyre_last_error());
	TAP_EQ(-EINVAL, spyre_trace_stop());
}

/* ---- device: the fake card ------------------------------------------------------------- */

#define STEPS		4
#define OPS		6	/* launches per step */
#define WORKERS		2

static spyre_device_t *dev;
static spyre_program_t *prog;

static void *worker(void *arg)
{
	struct spyre_stream_stats st = { .size = sizeof(st) };
	spyre_dptr_t slots[2] = { 0 }, buf = 0;
	static const char *const ops[] = { "rmsnorm", "linear", "attention" };
	char name[48], host[256];
	spyre_stream_t *s;
	int k, i, bad = 0;

	(void)arg;
	if (spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s) || spyre_malloc(dev, 4096, &slots[0]) ||
	    spyre_malloc(dev, 4096, &slots[1]) || spyre_malloc(dev, 4096, &buf))
		return (void *)1;
	for (k = 0; k < STEPS && !bad; k++) {
		snprintf(name, sizeof(name), "decode step %d", k + 1);
		spyre_trace_span_begin(name);
		bad |= spyre_stream_reset_stats(s);
		bad |= spyre_memset_async(s, buf, 0, 4096);
		for (i = 0; i < OPS; i++) {
			spyre_trace_span_begin(ops[i % 3]);
			bad |= spyre_launch(s, prog, CORE_MASK, slots, 2, NULL, 0);
			spyre_trace_span_end();
		}
		bad |= spyre_memcpy_async(s, (uintptr_t)host, buf, sizeof(host), SPYRE_MEMCPY_D2H);
		bad |= spyre_stream_synchronize(s);
		bad |= spyre_stream_get_stats(s, &st);
		bad |= st.launches != OPS;
		spyre_trace_span_end();
	}
	spyre_free(dev, slots[0]);
	spyre_free(dev, slots[1]);
	spyre_free(dev, buf);
	bad |= spyre_stream_destroy(s);
	return bad ? (void *)1 : NULL;
}

/* Open the fake card, start tracing into @name (in the test's directory: @path) and load @prog. */
static bool start_device_trace(const char *name, char *path, size_t len)
{
	size_t size;
	void *img;
	int ret;

	ret = spyre_device_open(0, &dev);
	if (!TAP_CHECK(ret == 0, "opening the fake device: %s", spyre_last_error()))
		return false;
	img = spyre_pb_relu_image(SPYRE_PB_ADDR_SLOT, 32, 4096, &size);
	if (!TAP_CHECK(img != NULL, "spyre_pb_relu_image"))
		return false;
	path_of(path, len, name);
	TAP_EQ(0, spyre_trace_start(path));
	TAP_EQ(0, spyre_program_load(dev, img, size, &prog));
	free(img);
	return true;
}

static void test_device(void)
{
	struct trace_check_opts o = { .launches = WORKERS * STEPS * OPS, .min_steps = WORKERS * STEPS,
				      .min_jobs = WORKERS * STEPS * (OPS + 2) };
	struct trace_check_result r;
	pthread_t t[WORKERS];
	char path[256];
	void *rv;
	long i;
	int ret;

	if (!start_device_trace("device.json", path, sizeof(path)))
		return;
	for (i = 0; i < WORKERS; i++)
		TAP_EQ(0, pthread_create(&t[i], NULL, worker, NULL));
	for (i = 0; i < WORKERS; i++) {
		pthread_join(t[i], &rv);
		TAP_CHECK(rv == NULL, "worker %ld: a call failed (%s)", i, spyre_last_error());
	}
	TAP_EQ(0, spyre_program_unload(prog));
	ret = spyre_trace_stop();
	TAP_CHECK(ret > 0, "spyre_trace_stop() = %d (%s)", ret, spyre_last_error());
	spyre_device_close(dev);
	if (!check_file(path, o, &r))
		return;
	/* every core of the mask: a busy span and an idle one per launch */
	TAP_CHECK(r.core_spans == (size_t)WORKERS * STEPS * OPS * 4 * 2, "%zu core spans, %d expected",
		  r.core_spans, WORKERS * STEPS * OPS * 4 * 2);
	TAP_CHECK(r.submits == r.jobs, "%zu submits for %zu jobs", r.submits, r.jobs);
}

/* ---- clock_reset: the device clock restarts between two runs ----------------------------- */

#define RUNS		2
#define RUN_STEPS	3
#define RUN_OPS		3

static void test_clock_reset(void)
{
	struct trace_check_opts o = { .launches = RUNS * RUN_STEPS * RUN_OPS, .min_steps = RUNS * RUN_STEPS,
				      .min_jobs = RUNS * RUN_STEPS * RUN_OPS };
	struct spyre_stream_stats st = { .size = sizeof(st) };
	struct trace_check_result r;
	spyre_dptr_t slots[2] = { 0 };
	spyre_stream_t *s = NULL;
	char path[256], name[48];
	int run, k, i, ret;

	if (!start_device_trace("clock-reset.json", path, sizeof(path)))
		return;
	TAP_EQ(0, spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s));
	TAP_EQ(0, spyre_malloc(dev, 4096, &slots[0]));
	TAP_EQ(0, spyre_malloc(dev, 4096, &slots[1]));
	for (run = 0; run < RUNS; run++) {
		if (run) {
			/* idle (synchronized), then the reset: the clock is 300 ms behind */
			usleep(20000);
			__atomic_add_fetch(&dev_clock_off, CLOCK_BACK_NS, __ATOMIC_RELAXED);
		}
		for (k = 0; k < RUN_STEPS; k++) {
			snprintf(name, sizeof(name), "decode step %d", run * RUN_STEPS + k + 1);
			spyre_trace_span_begin(name);
			TAP_EQ(0, spyre_stream_reset_stats(s));
			for (i = 0; i < RUN_OPS; i++)
				TAP_EQ(0, spyre_launch(s, prog, CORE_MASK, slots, 2, NULL, 0));
			TAP_EQ(0, spyre_stream_synchronize(s));
			TAP_EQ(0, spyre_stream_get_stats(s, &st));
			TAP_EQ(RUN_OPS, (int)st.launches);
			spyre_trace_span_end();
			usleep(2000);
		}
	}
	spyre_free(dev, slots[0]);
	spyre_free(dev, slots[1]);
	TAP_EQ(0, spyre_stream_destroy(s));
	TAP_EQ(0, spyre_program_unload(prog));
	ret = spyre_trace_stop();
	TAP_CHECK(ret > 0, "spyre_trace_stop() = %d (%s)", ret, spyre_last_error());
	spyre_device_close(dev);
	__atomic_store_n(&dev_clock_off, DEV_CLOCK_OFF, __ATOMIC_RELAXED);
	check_file(path, o, &r);
}

/* ---- env: SPYRE_TRACE, written at exit ------------------------------------------------- */

static void test_env(void)
{
	struct trace_check_opts o = { .launches = 0 };
	struct trace_check_result r;
	char path[256], env[300];
	int status = 0;
	pid_t pid;

	path_of(path, sizeof(path), "env.json");
	snprintf(env, sizeof(env), "SPYRE_TRACE=%s", path);
	pid = fork();
	if (pid == 0) {
		char *const args[] = { self, "--child", NULL };
		char *const envp[] = { env, NULL };

		execve(self, args, envp);
		_exit(127);
	}
	TAP_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
		  "the child traced by SPYRE_TRACE failed (status 0x%x)", status);
	if (check_file(path, o, &r))
		TAP_CHECK(r.user_spans == 10, "%zu spans written at exit, 10 recorded", r.user_spans);
}

/* The child of test_env: spans, then exit without spyre_trace_stop(). */
static int child(void)
{
	int i;

	if (!spyre_trace_active())
		return 1;
	for (i = 0; i < 10; i++) {
		spyre_trace_span_begin("at exit");
		spyre_trace_span_end();
	}
	return 0;
}

static const struct tap_case cases[] = {
	{ "writer", test_writer },
	{ "errors", test_errors },
	{ "device", test_device },
	{ "clock_reset", test_clock_reset },
	{ "env", test_env },
};

int main(int argc, char **argv)
{
	ssize_t n;
	int ret;

	if (argc == 2 && !strcmp(argv[1], "--child"))
		return child();
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		tap_bail("readlink /proc/self/exe: %m");
	self[n] = 0;
	if (!mkdtemp(dir))
		tap_bail("mkdtemp: %m");
	memfd = memfd_create("fake-spyre", MFD_CLOEXEC);
	if (memfd < 0)
		tap_bail("memfd_create: %m");
	snprintf(devnode, sizeof(devnode), "/proc/self/fd/%d", memfd);
	ret = TAP_RUN(cases, argc, argv);
	if (!getenv("TRACE_TEST_KEEP")) {
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd))
			tap_diag("could not remove %s", dir);
	} else {
		tap_diag("traces kept in %s", dir);
	}
	return ret;
}
