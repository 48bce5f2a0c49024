// SPDX-License-Identifier: GPL-2.0-only
/*
 * Description: per-client usage of spyre.ko in /proc/self/fdinfo/<fd>
 * (Documentation/gpu/drm-usage-stats.rst, docs/driver.md "Per-client
 * usage"), read before and after each step and checked to move exactly as
 * it must: drm-driver is "spyre", drm-pdev the card's PCI address,
 * drm-client-id distinct for two opens, the same for a dup()ed descriptor;
 * drm-engine-compute is 0 ns on a new file, grows after a LAUNCH and a COPY
 * by at most the wall time around them, stays put while idle, grows while a
 * job is blocked on the device (by at least the time it stayed blocked), and
 * another file's stays 0; drm-engine-capacity-compute is the number of user
 * hardware queues; drm-total/-resident/-active/-shared-device and -host
 * follow the file's buffers byte for byte (page-rounded sizes, active while
 * a job that lists the BO runs, shared once exported), and come back to 0;
 * the sysfs busy_ns counter grows by at least the blocked time too; a job
 * that faults is charged and then neither the file nor the card counts on.
 */
#include <inttypes.h>

#include "kselftest_harness.h"
#include "spyre_test.h"
#include "spyre_progbuild.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define NO_KEY UINT64_MAX

/* /proc/self/fdinfo/<fd> into @buf. */
static int fdinfo_read(int fd, char *buf, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	return read_text(path, buf, len);
}

/* The value of "key:\t<value>" in @info, leading blanks skipped; NULL if absent. */
static const char *fdinfo_value(const char *info, const char *key, char *val, size_t len)
{
	size_t klen = strlen(key);
	const char *line = info, *v, *end;

	while (line && *line) {
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			v = line + klen + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			end = strchr(v, '\n');
			if (!end)
				end = v + strlen(v);
			snprintf(val, len, "%.*s", (int)(end - v), v);
			return val;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return NULL;
}

/*
 * A number key of @fd's fdinfo with its unit applied: bytes for "KiB"/"MiB"
 * (as drm_print_memory_stats() prints them), ns for "ns"; NO_KEY if absent
 * or not a number with a known unit.
 */
static uint64_t fdinfo_u64(int fd, const char *key)
{
	char info[4096], val[64], *end;
	uint64_t v;

	if (fdinfo_read(fd, info, sizeof(info)) || !fdinfo_value(info, key, val, sizeof(val)))
		return NO_KEY;
	v = strtoull(val, &end, 10);
	if (end == val)
		return NO_KEY;
	if (!strcmp(end, " KiB"))
		return v * KiB;
	if (!strcmp(end, " MiB"))
		return v * MiB;
	if (!*end || !strcmp(end, " ns"))
		return v;
	return NO_KEY;
}

static uint64_t sysfs_busy_ns(void)
{
	char pci[32], path[128], buf[64];

	if (card_pci(0, pci, sizeof(pci)))
		return NO_KEY;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/busy_ns", pci);
	if (read_text(path, buf, sizeof(buf)))
		return NO_KEY;
	return strtoull(buf, NULL, 10);
}

static const char *const mem_keys[] = { "total", "shared", "active", "resident" };

/* Each of drm-{total,shared,active,resident}-@region as expected. */
#define EXPECT_MEM(fd, region, total, shared, active, resident)				\
	do {										\
		const uint64_t want_[] = { total, shared, active, resident };		\
		char key_[64];								\
		unsigned int i_;							\
											\
		for (i_ = 0; i_ < 4; i_++) {						\
			snprintf(key_, sizeof(key_), "drm-%s-%s", mem_keys[i_], region);	\
			EXPECT_EQ(want_[i_], fdinfo_u64(fd, key_)) TH_LOG("%s", key_);	\
		}									\
	} while (0)

FIXTURE(fdinfo) {
	int fd;
	uint32_t q;
};

FIXTURE_SETUP(fdinfo)
{
	self->fd = spyre_open(0);
	if (self->fd < 0)
		SKIP(return, "no spyre device");
	ASSERT_EQ(0, squeue_create(self->fd, DRM_SPYRE_PRIO_NORMAL, &self->q));
}

FIXTURE_TEARDOWN(fdinfo)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(fdinfo, identity_and_a_new_file_at_zero)
{
	struct drm_spyre_get_param gp = { .param = DRM_SPYRE_PARAM_NUM_QUEUES };
	char info[4096], val[64], pci[32];

	ASSERT_EQ(0, fdinfo_read(self->fd, info, sizeof(info)));
	TH_LOG("fdinfo of a new file:\n%s", info);
	ASSERT_NE(NULL, fdinfo_value(info, "drm-driver", val, sizeof(val)));
	EXPECT_STREQ("spyre", val);
	ASSERT_EQ(0, card_pci(0, pci, sizeof(pci)));
	ASSERT_NE(NULL, fdinfo_value(info, "drm-pdev", val, sizeof(val)));
	EXPECT_STREQ(pci, val);
	ASSERT_NE(NULL, fdinfo_value(info, "drm-client-id", val, sizeof(val)));
	EXPECT_LT(0, strtoull(val, NULL, 10));

	/* One engine class; its capacity: the user hardware queues (all but the kernel's). */
	EXPECT_EQ(0, fdinfo_u64(self->fd, "drm-engine-compute"));
	ASSERT_EQ(0, xioctl(self->fd, DRM_IOCTL_SPYRE_GET_PARAM, &gp));
	EXPECT_EQ(gp.value - 1, fdinfo_u64(self->fd, "drm-engine-capacity-compute"));
	EXPECT_MEM(self->fd, "device", 0, 0, 0, 0);
	EXPECT_MEM(self->fd, "host", 0, 0, 0, 0);

	/* Nothing the card does not measure. */
	EXPECT_EQ(NULL, strstr(info, "drm-cycles-"));
	EXPECT_EQ(NULL, strstr(info, "drm-maxfreq-"));
	EXPECT_EQ(NULL, strstr(info, "drm-purgeable-"));
	EXPECT_EQ(NULL, strstr(info, "drm-memory-"));
}

TEST_F(fdinfo, client_ids_distinct_per_open_shared_by_dup)
{
	uint64_t a, b, c;
	int fd2, fd3;

	fd2 = spyre_open(0);
	ASSERT_LE(0, fd2);
	fd3 = dup(self->fd);
	ASSERT_LE(0, fd3);
	a = fdinfo_u64(self->fd, "drm-client-id");
	b = fdinfo_u64(fd2, "drm-client-id");
	c = fdinfo_u64(fd3, "drm-client-id");
	ASSERT_NE(NO_KEY, a);
	ASSERT_NE(NO_KEY, b);
	EXPECT_NE(a, b);	/* two opens: two clients */
	EXPECT_LT(a, b);	/* ids are handed out in order */
	EXPECT_EQ(a, c);	/* a dup()ed descriptor is the same client */
	close(fd3);
	close(fd2);
	/* A new open after a close gets a new id, never a recycled one. */
	fd2 = spyre_open(0);
	ASSERT_LE(0, fd2);
	EXPECT_LT(b, fdinfo_u64(fd2, "drm-client-id"));
	close(fd2);
}

TEST_F(fdinfo, memory_follows_the_files_buffers)
{
	struct sbo d1, d2, h1;
	int fd2;

	ASSERT_EQ(0, sbo_create(self->fd, 1 * MiB, 0, &d1));
	EXPECT_MEM(self->fd, "device", 1 * MiB, 0, 0, 1 * MiB);
	EXPECT_MEM(self->fd, "host", 0, 0, 0, 0);

	/* Sizes are rounded up to the 4 KiB page: 5000 B take 8 KiB. */
	ASSERT_EQ(0, sbo_create(self->fd, 5000, 0, &d2));
	EXPECT_MEM(self->fd, "device", 1 * MiB + 8 * KiB, 0, 0, 1 * MiB + 8 * KiB);
	ASSERT_EQ(0, sbo_create(self->fd, 12 * KiB, DRM_SPYRE_BO_HOST, &h1));
	EXPECT_MEM(self->fd, "host", 12 * KiB, 0, 0, 12 * KiB);
	EXPECT_MEM(self->fd, "device", 1 * MiB + 8 * KiB, 0, 0, 1 * MiB + 8 * KiB);

	/* Another file's buffers are its own. */
	fd2 = spyre_open(0);
	ASSERT_LE(0, fd2);
	EXPECT_MEM(fd2, "device", 0, 0, 0, 0);
	EXPECT_MEM(fd2, "host", 0, 0, 0, 0);
	close(fd2);

	ASSERT_EQ(0, sbo_close(self->fd, &d1));
	EXPECT_MEM(self->fd, "device", 8 * KiB, 0, 0, 8 * KiB);
	ASSERT_EQ(0, sbo_close(self->fd, &d2));
	ASSERT_EQ(0, sbo_close(self->fd, &h1));
	EXPECT_MEM(self->fd, "device", 0, 0, 0, 0);
	EXPECT_MEM(self->fd, "host", 0, 0, 0, 0);
}

TEST_F(fdinfo, shared_host_buffer_counts_in_both_files)
{
	struct drm_prime_handle exp = { 0 }, imp = { 0 };
	struct sbo h;
	int fd2;

	fd2 = spyre_open(0);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, sbo_create(self->fd, 64 * KiB, DRM_SPYRE_BO_HOST, &h));
	EXPECT_MEM(self->fd, "host", 64 * KiB, 0, 0, 64 * KiB);
	exp.handle = h.handle;
	exp.flags = DRM_CLOEXEC | DRM_RDWR;
	ASSERT_EQ(0, xioctl(self->fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &exp));
	imp.fd = exp.fd;
	ASSERT_EQ(0, xioctl(fd2, DRM_IOCTL_PRIME_FD_TO_HANDLE, &imp));
	/* One BO, a handle in each file: each counts it, as shared. */
	EXPECT_MEM(self->fd, "host", 64 * KiB, 64 * KiB, 0, 64 * KiB);
	EXPECT_MEM(fd2, "host", 64 * KiB, 64 * KiB, 0, 64 * KiB);
	EXPECT_MEM(fd2, "device", 0, 0, 0, 0);
	close(exp.fd);
	close(fd2);
	ASSERT_EQ(0, sbo_close(self->fd, &h));
	EXPECT_MEM(self->fd, "host", 0, 0, 0, 0);
}

TEST_F(fdinfo, engine_time_after_a_launch_and_a_copy)
{
	struct spyre_pkt_launch l;
	struct sbo x, y, img, args, rec, src, dst;
	uint64_t e0, e1, e2, t0, t1, slots[2];
	char info[4096];
	uint8_t p[64];
	size_t size;
	void *image;
	int fd2;

	fd2 = spyre_open(0);
	ASSERT_LE(0, fd2);
	e0 = fdinfo_u64(self->fd, "drm-engine-compute");
	ASSERT_EQ(0, e0);

	/* A relu LAUNCH on one core, its tensors in device memory. */
	ASSERT_EQ(0, sbo_create(self->fd, 128, 0, &x));
	ASSERT_EQ(0, sbo_create(self->fd, 128, 0, &y));
	image = spyre_pb_relu_image(SPYRE_PB_ADDR_SLOT, 1, 128, &size);
	ASSERT_NE(NULL, image);
	ASSERT_EQ(0, sbo_create(self->fd, size, DRM_SPYRE_BO_HOST, &img));
	ASSERT_EQ(0, sbo_create(self->fd, 4096, DRM_SPYRE_BO_HOST, &args));
	ASSERT_EQ(0, sbo_create(self->fd, 4096, DRM_SPYRE_BO_HOST, &rec));
	memcpy(img.map, image, size);
	free(image);
	slots[0] = x.va;
	slots[1] = y.va;
	memcpy(args.map, slots, sizeof(slots));
	memset(&l, 0, sizeof(l));
	l.hdr.opcode = SPYRE_PKT_OP_LAUNCH;
	l.hdr.version = SPYRE_PKT_VERSION;
	l.program = img.va;
	l.args = args.va;
	l.core_mask = 0x1;
	l.record = rec.va;
	/* Creating BOs ran the kernel's clearing jobs: not this file's time. */
	EXPECT_EQ(0, fdinfo_u64(self->fd, "drm-engine-compute"));
	t0 = spyre_now_ns();
	ASSERT_EQ(0, srun(self->fd, self->q, &l, 1));
	t1 = spyre_now_ns();
	ASSERT_EQ(0, ((struct spyre_launch_record *)rec.map)->status);
	e1 = fdinfo_u64(self->fd, "drm-engine-compute");
	TH_LOG("LAUNCH: drm-engine-compute %" PRIu64 " ns, wall %" PRIu64 " ns", e1, t1 - t0);
	EXPECT_LT(0, e1);
	EXPECT_GE(t1 - t0, e1);		/* within the time the job was out */

	/* Idle: the value stays exactly where it is. */
	usleep(50000);
	EXPECT_EQ(e1, fdinfo_u64(self->fd, "drm-engine-compute"));

	/* A 16 MiB COPY adds its time, again at most the wall time around it. */
	ASSERT_EQ(0, sbo_create(self->fd, 16 * MiB, DRM_SPYRE_BO_HOST, &src));
	ASSERT_EQ(0, sbo_create(self->fd, 16 * MiB, 0, &dst));
	spyre_prep_copy_va(p, src.va, dst.va, 16 * MiB);
	t0 = spyre_now_ns();
	ASSERT_EQ(0, srun(self->fd, self->q, p, 1));
	t1 = spyre_now_ns();
	e2 = fdinfo_u64(self->fd, "drm-engine-compute");
	TH_LOG("COPY 16 MiB: drm-engine-compute +%" PRIu64 " ns, wall %" PRIu64 " ns",
	       e2 - e1, t1 - t0);
	EXPECT_LT(e1, e2);
	EXPECT_GE(t1 - t0, e2 - e1);

	/* The other file did nothing. */
	EXPECT_EQ(0, fdinfo_u64(fd2, "drm-engine-compute"));
	close(fd2);
	ASSERT_EQ(0, fdinfo_read(self->fd, info, sizeof(info)));
	TH_LOG("fdinfo after the LAUNCH and the COPY:\n%s", info);
}

TEST_F(fdinfo, a_running_job_counts_while_it_runs)
{
	struct ssubmit s = { 0 };
	struct sbo sem, buf;
	uint64_t b0, b1, b2, d0, d1, t0, t1, e_end, deadline;
	uint8_t p[64];
	uint32_t sync;

	ASSERT_EQ(0, sbo_create(self->fd, 4096, DRM_SPYRE_BO_HOST, &sem));
	ASSERT_EQ(0, sbo_create(self->fd, 1 * MiB, 0, &buf));
	EXPECT_MEM(self->fd, "device", 1 * MiB, 0, 0, 1 * MiB);

	/* A job that waits on the device for a value the CPU writes later. */
	spyre_prep_sem(p, SPYRE_PKT_OP_WAIT, SPYRE_AS_VIRT, sem.va, 1);
	ASSERT_EQ(0, ssyncobj_create(self->fd, &sync));
	s.queue = self->q;
	s.packets = p;
	s.count = 1;
	s.bos = &buf.handle;
	s.nbos = 1;
	s.out = sync;
	d0 = sysfs_busy_ns();
	ASSERT_NE(NO_KEY, d0);
	t0 = spyre_now_ns();
	ASSERT_EQ(0, ssubmit(self->fd, &s));

	/* Listed in the job: active until it completes. */
	EXPECT_MEM(self->fd, "device", 1 * MiB, 0, 1 * MiB, 1 * MiB);
	/*
	 * It counts from when it reaches the device, which a slow or loaded
	 * machine may take a while to get to: poll for that, not sleep and
	 * assume. From then on it stays blocked, so the checks below are exact.
	 */
	deadline = spyre_now_ns() + 5000000000ull;
	while (!(b0 = fdinfo_u64(self->fd, "drm-engine-compute")) && spyre_now_ns() < deadline)
		usleep(1000);
	usleep(200000);
	b1 = fdinfo_u64(self->fd, "drm-engine-compute");
	TH_LOG("blocked job: drm-engine-compute %" PRIu64 " then %" PRIu64 " ns", b0, b1);
	EXPECT_LT(0, b0);
	EXPECT_LE(b0 + 200000000ull, b1);	/* it ran (blocked) for all 200 ms */

	/* Release it; it completes within the device's 1 ms CPU-store poll. */
	*(volatile uint64_t *)sem.map = 1;
	ASSERT_EQ(0, ssyncobj_wait(self->fd, sync, 0, SPYRE_DONE_MS));
	t1 = spyre_now_ns();
	d1 = sysfs_busy_ns();
	b2 = fdinfo_u64(self->fd, "drm-engine-compute");
	EXPECT_LE(b1, b2);
	EXPECT_GE(t1 - t0, b2);
	/* The device was busy at least as long as the job ran, at most the wall time. */
	TH_LOG("sysfs busy_ns +%" PRIu64 " ns over %" PRIu64 " ns", d1 - d0, t1 - t0);
	EXPECT_LE(b2, d1 - d0);
	EXPECT_GE(t1 - t0, d1 - d0);
	EXPECT_MEM(self->fd, "device", 1 * MiB, 0, 0, 1 * MiB);

	/* Done: nothing more is charged. */
	usleep(50000);
	e_end = fdinfo_u64(self->fd, "drm-engine-compute");
	EXPECT_EQ(b2, e_end);
}

TEST_F(fdinfo, a_failed_job_stops_counting)
{
	struct drm_spyre_queue_error e;
	uint64_t e1, d1;
	uint8_t p[64];
	struct sbo h;

	/* A COPY from the never-mapped first MiB: the device faults. */
	ASSERT_EQ(0, sbo_create(self->fd, 4096, DRM_SPYRE_BO_HOST, &h));
	spyre_prep_copy_va(p, 0x1000, h.va, 128);
	srun(self->fd, self->q, p, 1);
	ASSERT_EQ(0, squeue_error(self->fd, self->q, &e));
	ASSERT_EQ(DRM_SPYRE_ERROR_FAULT, e.fault.error);
	e1 = fdinfo_u64(self->fd, "drm-engine-compute");
	d1 = sysfs_busy_ns();
	EXPECT_LT(0, e1);	/* the failed job ran */

	/* Gone from the queue: neither the file nor the device is busy any more. */
	usleep(50000);
	EXPECT_EQ(e1, fdinfo_u64(self->fd, "drm-engine-compute"));
	EXPECT_EQ(d1, sysfs_busy_ns());
}

TEST_HARNESS_MAIN
