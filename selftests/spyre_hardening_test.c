// SPDX-License-Identifier: GPL-2.0-only
/*
 * Description: regressions of what adversarial testing found in spyre.ko
 * (issue "Hardening"): generic DRM ioctls an accel file must not reach
 * (GET_UNIQUE and GET_MAGIC oopsed on a missing drm_master), syncobj handle
 * counts that made DRM core WARN in the page allocator, buffers closed
 * while a job on another queue still used them by address, SUBMIT racing
 * QUEUE_DESTROY (lost jobs, fences that never signaled, leaked memory),
 * unbounded pinned host memory, packets and exports the ABI documents as
 * rejected, and debugfs output that went to dmesg. Each test failed (or
 * crashed the guest) before its fix. Races run a fixed number of rounds and
 * check the outcome, never timing.
 */
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#define MiB (1ull << 20)

static long mem_used(const char *pci)
{
	return read_sysfs_long("/sys/bus/pci/devices/%s/mem_used", pci);
}

static long host_mem_used(const char *pci)
{
	return read_sysfs_long("/sys/bus/pci/devices/%s/host_mem_used", pci);
}

static void syncobj_destroy(int fd, uint32_t h)
{
	struct drm_syncobj_destroy d = { .handle = h };

	ioctl(fd, DRM_IOCTL_SYNCOBJ_DESTROY, &d);
}

/* Fork; the child runs fn(fd) as uid/gid 65534 and exits with its result. */
static int as_nobody(int fd, int (*fn)(int fd))
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (!pid) {
		if (setgid(65534) || setuid(65534))
			_exit(100);
		_exit(fn(fd));
	}
	if (waitpid(pid, &status, 0) != pid)
		return -errno;
	if (WIFSIGNALED(status))
		return 200 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/*
 * Legacy and KMS ioctls with their real request numbers: each must fail
 * with ENOTTY on an accel file, whoever calls it. Exit code = index + 1 of
 * the first one that did not, 0 when all did.
 */
static const struct {
	const char *name;
	unsigned long req;
} filtered[] = {
	{ "GET_UNIQUE", DRM_IOCTL_GET_UNIQUE },
	{ "GET_MAGIC", DRM_IOCTL_GET_MAGIC },
	{ "AUTH_MAGIC", DRM_IOCTL_AUTH_MAGIC },
	{ "GET_CLIENT", DRM_IOCTL_GET_CLIENT },
	{ "GET_STATS", DRM_IOCTL_GET_STATS },
	{ "SET_VERSION", DRM_IOCTL_SET_VERSION },
	{ "SET_UNIQUE", DRM_IOCTL_SET_UNIQUE },
	{ "GEM_FLINK", DRM_IOCTL_GEM_FLINK },
	{ "GEM_OPEN", DRM_IOCTL_GEM_OPEN },
	{ "SET_CLIENT_CAP", DRM_IOCTL_SET_CLIENT_CAP },
	{ "SET_MASTER", DRM_IOCTL_SET_MASTER },
	{ "DROP_MASTER", DRM_IOCTL_DROP_MASTER },
	{ "MODE_GETRESOURCES", DRM_IOCTL_MODE_GETRESOURCES },
	{ "MODE_CREATE_DUMB", DRM_IOCTL_MODE_CREATE_DUMB },
	{ "WAIT_VBLANK", DRM_IOCTL_WAIT_VBLANK },
	{ "IRQ_BUSID", DRM_IOCTL_IRQ_BUSID },
	{ "GET_MAP", DRM_IOCTL_GET_MAP },
	{ "CRTC_GET_SEQUENCE", DRM_IOCTL_CRTC_GET_SEQUENCE },
};

static int try_filtered(int fd)
{
	unsigned int i;

	for (i = 0; i < sizeof(filtered) / sizeof(filtered[0]); i++) {
		/* A buffer larger than any of these structures, all zero. */
		uint64_t arg[32] = { 0 };

		if (ioctl(fd, filtered[i].req, arg) != -1 || errno != ENOTTY)
			return i + 1;
	}
	return 0;
}

static int try_version(int fd)
{
	struct drm_version v = { 0 };

	return ioctl(fd, DRM_IOCTL_VERSION, &v) ? 1 : 0;
}

TEST(legacy_drm_ioctls_are_filtered_for_unprivileged_users)
{
	int fd = spyre_open(0), rc;

	if (fd < 0)
		SKIP(return, "no spyre device");
	rc = as_nobody(fd, try_filtered);
	if (rc > 0 && rc <= (int)(sizeof(filtered) / sizeof(filtered[0])))
		TH_LOG("%s did not fail with ENOTTY", filtered[rc - 1].name);
	EXPECT_EQ(0, rc);
	/* What an accelerator needs still works, unprivileged too. */
	EXPECT_EQ(0, as_nobody(fd, try_version));
	close(fd);
}

TEST(legacy_drm_ioctls_are_filtered_for_root)
{
	int fd = spyre_open(0), rc;

	if (fd < 0)
		SKIP(return, "no spyre device");
	rc = try_filtered(fd);
	if (rc > 0)
		TH_LOG("%s did not fail with ENOTTY", filtered[rc - 1].name);
	EXPECT_EQ(0, rc);
	close(fd);
}

TEST(syncobj_handle_counts_are_bounded)
{
	int fd = spyre_open(0);
	uint32_t h, handles[4];
	uint64_t points[4] = { 0 };
	struct drm_syncobj_wait w = { 0 };
	struct drm_syncobj_timeline_wait tw = { 0 };
	struct drm_syncobj_array a = { 0 };
	struct drm_syncobj_timeline_array ta = { 0 };
	const uint32_t huge[] = { DRM_SPYRE_MAX_SYNCOBJ_HANDLES + 1, 1u << 28, 0xffffffffu };
	unsigned int i;

	if (fd < 0)
		SKIP(return, "no spyre device");
	ASSERT_EQ(0, ssyncobj_create(fd, &h));
	handles[0] = h;

	for (i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		w.handles = (uintptr_t)handles;
		w.count_handles = huge[i];
		EXPECT_EQ(-EINVAL, xioctl(fd, DRM_IOCTL_SYNCOBJ_WAIT, &w));
		tw.handles = (uintptr_t)handles;
		tw.points = (uintptr_t)points;
		tw.count_handles = huge[i];
		EXPECT_EQ(-EINVAL, xioctl(fd, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &tw));
		a.handles = (uintptr_t)handles;
		a.count_handles = huge[i];
		EXPECT_EQ(-EINVAL, xioctl(fd, DRM_IOCTL_SYNCOBJ_RESET, &a));
		EXPECT_EQ(-EINVAL, xioctl(fd, DRM_IOCTL_SYNCOBJ_SIGNAL, &a));
		ta.handles = (uintptr_t)handles;
		ta.points = (uintptr_t)points;
		ta.count_handles = huge[i];
		EXPECT_EQ(-EINVAL, xioctl(fd, DRM_IOCTL_SYNCOBJ_QUERY, &ta));
		EXPECT_EQ(-EINVAL, xioctl(fd, DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &ta));
	}
	/* Within the bound DRM core decides: the 2nd handle does not exist. */
	a.handles = (uintptr_t)handles;
	handles[1] = 0;
	a.count_handles = 2;
	EXPECT_EQ(-ENOENT, xioctl(fd, DRM_IOCTL_SYNCOBJ_SIGNAL, &a));
	/* A real signal and wait still work. */
	a.count_handles = 1;
	EXPECT_EQ(0, xioctl(fd, DRM_IOCTL_SYNCOBJ_SIGNAL, &a));
	EXPECT_EQ(0, ssyncobj_wait(fd, h, 0, SPYRE_DONE_MS));
	/* A bad count pointer is EFAULT, not a crash. */
	EXPECT_EQ(-EFAULT, xioctl(fd, DRM_IOCTL_SYNCOBJ_WAIT, (void *)16));
	syncobj_destroy(fd, h);
	close(fd);
}

/*
 * Queue 1 copies 4 x 64 MiB into a host BO that the job reaches by address
 * only; queue 2 then runs a NOP (the file's newest job). Closing the host
 * BO must wait for the copy: before the fix it returned at once, the pages
 * were unmapped and freed, and the copy faulted inside them.
 */
TEST(gem_close_waits_for_jobs_on_every_queue)
{
	const uint64_t size = 64 * MiB;
	int fd = spyre_open(0), round;
	uint32_t q1, q2, sync;

	if (fd < 0)
		SKIP(return, "no spyre device");
	ASSERT_EQ(0, squeue_create(fd, DRM_SPYRE_PRIO_NORMAL, &q1));
	ASSERT_EQ(0, squeue_create(fd, DRM_SPYRE_PRIO_NORMAL, &q2));
	ASSERT_EQ(0, ssyncobj_create(fd, &sync));

	for (round = 0; round < 3; round++) {
		struct drm_spyre_queue_error e;
		uint8_t copy[4][SPYRE_PKT_SIZE], nop[SPYRE_PKT_SIZE];
		struct ssubmit s1 = { .queue = q1, .packets = copy, .count = 4, .out = sync };
		struct ssubmit s2 = { .queue = q2, .packets = nop, .count = 1 };
		struct sbo src, dst;
		int i;

		ASSERT_EQ(0, sbo_create(fd, size, 0, &src));
		ASSERT_EQ(0, sbo_create(fd, size, DRM_SPYRE_BO_HOST, &dst));
		munmap(dst.map, dst.size);	/* only the GEM handle holds it */
		dst.map = NULL;
		for (i = 0; i < 4; i++)
			spyre_prep_copy_va(copy[i], src.va, dst.va, size);
		spyre_prep_hdr(nop, SPYRE_PKT_OP_NOP);
		ASSERT_EQ(0, ssubmit(fd, &s1));
		ASSERT_EQ(0, ssubmit(fd, &s2));
		ASSERT_EQ(0, sbo_close(fd, &dst));
		/* The close returned: the copy must be done, and done right. */
		ASSERT_EQ(0, ssyncobj_wait(fd, sync, 0, 0));
		ASSERT_EQ(0, squeue_error(fd, q1, &e));
		EXPECT_EQ(0, e.error_count) {
			TH_LOG("round %d: the copy failed (error %u, hw %u, addr %#llx)", round,
			       e.fault.error, e.fault.hw_error, (unsigned long long)e.fault.addr);
		}
		ASSERT_EQ(0, sbo_close(fd, &src));
	}
	syncobj_destroy(fd, sync);
	close(fd);
}

/* Closing the file with copies in flight on two queues: the same rule. */
TEST(file_close_waits_for_jobs_on_every_queue)
{
	const uint64_t size = 64 * MiB;
	char pci[64];
	long used0, host0, faults0;
	int round;

	if (card_pci(0, pci, sizeof(pci)))
		SKIP(return, "no spyre device");
	used0 = mem_used(pci);
	host0 = host_mem_used(pci);
	faults0 = read_sysfs_long("/sys/bus/pci/devices/%s/faults", pci);
	for (round = 0; round < 3; round++) {
		uint8_t copy[4][SPYRE_PKT_SIZE], nop[SPYRE_PKT_SIZE];
		int fd = spyre_open(0), i;
		uint32_t q1, q2;
		struct sbo src, dst;
		struct ssubmit s1 = { .packets = copy, .count = 4 };
		struct ssubmit s2 = { .packets = nop, .count = 1 };

		ASSERT_LE(0, fd);
		ASSERT_EQ(0, squeue_create(fd, DRM_SPYRE_PRIO_NORMAL, &q1));
		ASSERT_EQ(0, squeue_create(fd, DRM_SPYRE_PRIO_NORMAL, &q2));
		ASSERT_EQ(0, sbo_create(fd, size, 0, &src));
		ASSERT_EQ(0, sbo_create(fd, size, DRM_SPYRE_BO_HOST, &dst));
		munmap(dst.map, dst.size);
		for (i = 0; i < 4; i++)
			spyre_prep_copy_va(copy[i], src.va, dst.va, size);
		spyre_prep_hdr(nop, SPYRE_PKT_OP_NOP);
		s1.queue = q1;
		s2.queue = q2;
		ASSERT_EQ(0, ssubmit(fd, &s1));
		ASSERT_EQ(0, ssubmit(fd, &s2));
		close(fd);
	}
	/*
	 * Everything was freed and nothing faulted: before the fix the page
	 * tables went while the copies ran, and they faulted.
	 */
	EXPECT_EQ(used0, mem_used(pci));
	EXPECT_EQ(host0, host_mem_used(pci));
	EXPECT_EQ(faults0, read_sysfs_long("/sys/bus/pci/devices/%s/faults", pci));
}

/* ---- SUBMIT racing QUEUE_DESTROY ---------------------------------------- */

struct race {
	int fd;
	uint64_t src;
	volatile uint32_t queue;	/* current queue id, replaced by the destroyer */
	int rounds;
	int ok, enoent, other, unsignaled;
	int running;			/* submitters not finished yet */
};

/*
 * Each job copies into its own new 1 MiB device BO, listed in bo_handles
 * and closed right after the submit, so only the job keeps it: a job lost
 * by the scheduler leaks its BO (sysfs mem_used) and never signals.
 */
static void *race_submitter(void *arg)
{
	struct race *r = arg;
	uint8_t p[SPYRE_PKT_SIZE];
	uint32_t *syncs = calloc(r->rounds, sizeof(*syncs));
	int i, ret, n = 0;

	if (!syncs)
		return NULL;
	for (i = 0; i < r->rounds; i++) {
		struct ssubmit s = { .queue = r->queue, .packets = p, .count = 1, .nbos = 1 };
		struct sbo bo;

		if (sbo_create(r->fd, MiB, 0, &bo) || ssyncobj_create(r->fd, &syncs[n])) {
			__atomic_add_fetch(&r->other, 1, __ATOMIC_RELAXED);
			continue;
		}
		spyre_prep_copy_va(p, r->src, bo.va, MiB);
		s.bos = &bo.handle;
		s.out = syncs[n];
		ret = ssubmit(r->fd, &s);
		sbo_close(r->fd, &bo);
		if (!ret) {
			__atomic_add_fetch(&r->ok, 1, __ATOMIC_RELAXED);
			n++;
			continue;
		}
		syncobj_destroy(r->fd, syncs[n]);
		if (ret == -ENOENT)
			__atomic_add_fetch(&r->enoent, 1, __ATOMIC_RELAXED);
		else
			__atomic_add_fetch(&r->other, 1, __ATOMIC_RELAXED);
	}
	/* Every accepted job signals: it ran, or was canceled with its queue. */
	for (i = 0; i < n; i++) {
		if (ssyncobj_wait(r->fd, syncs[i], 0, SPYRE_DONE_MS))
			__atomic_add_fetch(&r->unsignaled, 1, __ATOMIC_RELAXED);
		syncobj_destroy(r->fd, syncs[i]);
	}
	free(syncs);
	__atomic_sub_fetch(&r->running, 1, __ATOMIC_RELEASE);
	return NULL;
}

TEST(submit_racing_queue_destroy)
{
	struct race r = { .rounds = 300, .running = 3 };
	pthread_t t[3];
	struct sbo src;
	char pci[64];
	long used0;
	int i, k;

	if (card_pci(0, pci, sizeof(pci)))
		SKIP(return, "no spyre device");
	used0 = mem_used(pci);
	r.fd = spyre_open(0);
	ASSERT_LE(0, r.fd);
	ASSERT_EQ(0, sbo_create(r.fd, MiB, 0, &src));
	r.src = src.va;
	ASSERT_EQ(0, squeue_create(r.fd, DRM_SPYRE_PRIO_NORMAL, (uint32_t *)&r.queue));
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, race_submitter, &r));
	/* Destroy and re-create for as long as the submitters run. */
	for (k = 0; __atomic_load_n(&r.running, __ATOMIC_ACQUIRE); k++) {
		struct drm_spyre_queue_destroy d = { .queue_id = r.queue };
		uint32_t q;

		ASSERT_EQ(0, xioctl(r.fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &d));
		ASSERT_EQ(0, squeue_create(r.fd, DRM_SPYRE_PRIO_NORMAL, &q));
		r.queue = q;
	}
	for (i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	TH_LOG("%d submits accepted, %d ENOENT (queue gone), %d other; %d queues destroyed",
	       r.ok, r.enoent, r.other, k);
	EXPECT_EQ(3 * r.rounds, r.ok + r.enoent);
	EXPECT_EQ(0, r.other);
	EXPECT_EQ(0, r.unsignaled);
	EXPECT_LT(0, r.ok);
	/* Closing the last BO and the file returns and frees all device memory. */
	EXPECT_EQ(0, sbo_close(r.fd, &src));
	close(r.fd);
	EXPECT_EQ(used0, mem_used(pci));
}

/* ---- pinned host memory ------------------------------------------------- */

static int pin_under_rlimit(int fd)
{
	struct drm_gem_close c = { 0 };
	struct drm_spyre_bo_create a = { .size = 4 * MiB, .flags = DRM_SPYRE_BO_HOST };
	struct drm_spyre_bo_create b = { .size = 8 * MiB, .flags = DRM_SPYRE_BO_HOST };

	if (xioctl(fd, DRM_IOCTL_SPYRE_BO_CREATE, &a))
		return 1;		/* 4 of 8 MiB */
	if (xioctl(fd, DRM_IOCTL_SPYRE_BO_CREATE, &b) != -ENOMEM)
		return 2;		/* 12 of 8 MiB */
	c.handle = a.handle;
	if (xioctl(fd, DRM_IOCTL_GEM_CLOSE, &c))
		return 3;
	if (xioctl(fd, DRM_IOCTL_SPYRE_BO_CREATE, &b))
		return 4;		/* 8 of 8 MiB after the close */
	c.handle = b.handle;
	if (xioctl(fd, DRM_IOCTL_GEM_CLOSE, &c))
		return 5;
	/* Device BOs do not pin host memory. */
	a.flags = 0;
	a.size = 64 * MiB;
	if (xioctl(fd, DRM_IOCTL_SPYRE_BO_CREATE, &a))
		return 6;
	return 0;
}

TEST(pinned_host_memory_counts_against_rlimit_memlock)
{
	struct rlimit old, lim = { 8 * MiB, 8 * MiB };
	char pci[64];
	long host0;
	int fd, rc;

	if (card_pci(0, pci, sizeof(pci)))
		SKIP(return, "no spyre device");
	host0 = host_mem_used(pci);
	fd = spyre_open(0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, getrlimit(RLIMIT_MEMLOCK, &old));
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &lim));	/* inherited by the child */
	rc = as_nobody(fd, pin_under_rlimit);
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &old));
	EXPECT_EQ(0, rc) TH_LOG("step %d of pin_under_rlimit failed", rc);
	close(fd);
	EXPECT_EQ(host0, host_mem_used(pci));
}

static int write_param(const char *name, const char *val)
{
	char path[128];
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "/sys/module/spyre/parameters/%s", name);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	ret = fputs(val, f) < 0 ? -EIO : 0;
	return fclose(f) ? -errno : ret;
}

TEST(pinned_host_memory_has_a_driver_cap)
{
	struct sbo a, b;
	int fd = spyre_open(0);

	if (fd < 0)
		SKIP(return, "no spyre device");
	/* Root (CAP_IPC_LOCK) is not charged to RLIMIT_MEMLOCK, but is capped. */
	ASSERT_EQ(0, write_param("max_pinned_mb", "16"));
	EXPECT_EQ(0, sbo_create(fd, 8 * MiB, DRM_SPYRE_BO_HOST, &a));
	EXPECT_EQ(-ENOMEM, sbo_create(fd, 16 * MiB, DRM_SPYRE_BO_HOST, &b));
	EXPECT_EQ(0, sbo_close(fd, &a));
	EXPECT_EQ(0, sbo_create(fd, 16 * MiB, DRM_SPYRE_BO_HOST, &b));
	EXPECT_EQ(0, sbo_close(fd, &b));
	ASSERT_EQ(0, write_param("max_pinned_mb", "0"));
	/* Default: half of RAM. The VM has 2 GiB or more: 64 MiB fits. */
	EXPECT_EQ(0, sbo_create(fd, 64 * MiB, DRM_SPYRE_BO_HOST, &a));
	EXPECT_EQ(0, sbo_close(fd, &a));
	close(fd);
}

/* ---- what the ABI documents as rejected ----------------------------------- */

TEST(reserved_packet_bytes_are_rejected)
{
	uint8_t p[SPYRE_PKT_SIZE];
	struct ssubmit s = { .packets = p, .count = 1 };
	struct spyre_pkt_launch *l = (void *)p;
	struct spyre_pkt_copy *c = (void *)p;
	struct sbo a, b;
	uint32_t q;
	int fd = spyre_open(0);
	unsigned int i;

	if (fd < 0)
		SKIP(return, "no spyre device");
	ASSERT_EQ(0, squeue_create(fd, DRM_SPYRE_PRIO_NORMAL, &q));
	ASSERT_EQ(0, sbo_create(fd, 4096, 0, &a));
	ASSERT_EQ(0, sbo_create(fd, 4096, 0, &b));
	s.queue = q;

	for (i = 0; i < sizeof(c->reserved); i++) {
		spyre_prep_copy_va(p, a.va, b.va, 4096);
		c->reserved[i] = 1;
		EXPECT_EQ(-EINVAL, ssubmit(fd, &s)) TH_LOG("COPY reserved[%u]", i);
	}
	for (i = sizeof(struct spyre_pkt_hdr); i < SPYRE_PKT_SIZE; i++) {
		spyre_prep_hdr(p, SPYRE_PKT_OP_NOP);
		p[i] = 0x80;
		EXPECT_EQ(-EINVAL, ssubmit(fd, &s)) TH_LOG("NOP body byte %u", i);
	}
	spyre_prep_hdr(p, SPYRE_PKT_OP_LAUNCH);
	l->reserved0 = 1;
	EXPECT_EQ(-EINVAL, ssubmit(fd, &s));
	for (i = 0; i < 4; i++) {
		spyre_prep_hdr(p, SPYRE_PKT_OP_LAUNCH);
		l->reserved[i] = 1;
		EXPECT_EQ(-EINVAL, ssubmit(fd, &s)) TH_LOG("LAUNCH reserved[%u]", i);
	}
	/* The same packets with zeros are accepted and run. */
	spyre_prep_copy_va(p, a.va, b.va, 4096);
	EXPECT_EQ(0, srun(fd, q, p, 1));
	spyre_prep_hdr(p, SPYRE_PKT_OP_NOP);
	EXPECT_EQ(0, srun(fd, q, p, 1));
	sbo_close(fd, &a);
	sbo_close(fd, &b);
	close(fd);
}

/*
 * A device BO exports as a dma-buf only from a card with a peer BAR
 * (peer-to-peer, spyre_p2p_test); elsewhere EOPNOTSUPP, never a dma-buf
 * of pages that do not exist. Host BOs export everywhere.
 */
TEST(device_bo_prime_export_needs_peer_bar)
{
	struct drm_prime_handle ph = { .flags = DRM_CLOEXEC | DRM_RDWR, .fd = -1 };
	struct drm_spyre_get_param gp = { .param = DRM_SPYRE_PARAM_FEATURES };
	struct sbo dev, host;
	int card, fd, ret;

	for (card = 0; (fd = spyre_open(card)) >= 0; card++) {
		ASSERT_EQ(0, xioctl(fd, DRM_IOCTL_SPYRE_GET_PARAM, &gp));
		ASSERT_EQ(0, sbo_create(fd, 4096, 0, &dev));
		ph.handle = dev.handle;
		ph.fd = -1;
		ret = xioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph);
		EXPECT_EQ(gp.value & SPYRE_FEAT_PEER_BAR ? 0 : -EOPNOTSUPP, ret);
		if (!ret)
			close(ph.fd);
		ASSERT_EQ(0, sbo_create(fd, 4096, DRM_SPYRE_BO_HOST, &host));
		ph.handle = host.handle;
		ph.fd = -1;
		EXPECT_EQ(0, xioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph));
		EXPECT_LE(0, ph.fd);
		if (ph.fd >= 0)
			close(ph.fd);
		sbo_close(fd, &dev);
		sbo_close(fd, &host);
		close(fd);
	}
	if (!card)
		SKIP(return, "no spyre device");
}

/* An in-sync on a point nobody submitted: EINVAL, as the uapi says. */
TEST(in_sync_on_an_unsubmitted_point_is_einval)
{
	uint8_t p[SPYRE_PKT_SIZE];
	struct drm_spyre_sync in = { .point = 5 };
	struct ssubmit s = { .packets = p, .count = 1, .in = &in, .nin = 1 };
	int fd = spyre_open(0);
	uint32_t q, tl;

	if (fd < 0)
		SKIP(return, "no spyre device");
	ASSERT_EQ(0, squeue_create(fd, DRM_SPYRE_PRIO_NORMAL, &q));
	ASSERT_EQ(0, ssyncobj_create(fd, &tl));
	spyre_prep_hdr(p, SPYRE_PKT_OP_NOP);
	s.queue = q;
	in.handle = tl;
	EXPECT_EQ(-EINVAL, ssubmit(fd, &s));
	in.handle = tl + 1000;
	EXPECT_EQ(-ENOENT, ssubmit(fd, &s));
	syncobj_destroy(fd, tl);
	close(fd);
}

/* debugfs memory holds the allocator's state (it used to go to dmesg). */
TEST(debugfs_memory_prints_the_buddy_state_into_the_file)
{
	char pci[64], path[128], buf[4096];
	size_t n;
	FILE *f;

	if (card_pci(0, pci, sizeof(pci)))
		SKIP(return, "no spyre device");
	snprintf(path, sizeof(path), "/sys/kernel/debug/accel/%s/memory", pci);
	f = fopen(path, "r");
	if (!f)
		SKIP(return, "no debugfs");
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	EXPECT_NE(NULL, strstr(buf, "device memory: ")) TH_LOG("%s", buf);
	EXPECT_NE(NULL, strstr(buf, "chunk_size: ")) TH_LOG("%s", buf);
	EXPECT_NE(NULL, strstr(buf, "host memory pinned: ")) TH_LOG("%s", buf);
}

/*
 * A producer on one queue faults; a consumer on another queue waits for it
 * on the device. The failed job's completion value was never written, so
 * the consumer's WAIT blocked until the 2 s timeout: the queue was reset
 * and the innocent consumer blamed (three rounds banned its context).
 */
TEST(consumer_of_a_failed_producer_is_not_blamed)
{
	const uint64_t size = 16 * MiB;
	char pci[64];
	long resets0;
	int fd, round;
	uint32_t q1, q2, s1, s2;
	struct sbo h, d, t;

	if (card_pci(0, pci, sizeof(pci)))
		SKIP(return, "no spyre device");
	fd = spyre_open(0);
	ASSERT_LE(0, fd);
	resets0 = read_sysfs_long("/sys/bus/pci/devices/%s/resets", pci);
	ASSERT_EQ(0, squeue_create(fd, DRM_SPYRE_PRIO_NORMAL, &q1));
	ASSERT_EQ(0, squeue_create(fd, DRM_SPYRE_PRIO_NORMAL, &q2));
	ASSERT_EQ(0, sbo_create(fd, size, DRM_SPYRE_BO_HOST, &h));
	ASSERT_EQ(0, sbo_create(fd, size, 0, &d));
	ASSERT_EQ(0, sbo_create(fd, 4096, DRM_SPYRE_BO_HOST, &t));
	ASSERT_EQ(0, ssyncobj_create(fd, &s1));
	ASSERT_EQ(0, ssyncobj_create(fd, &s2));

	for (round = 0; round < 3; round++) {
		uint8_t pp[2][SPYRE_PKT_SIZE], pc[SPYRE_PKT_SIZE];
		struct drm_spyre_sync dep = { .handle = s1 };
		struct ssubmit prod = { .queue = q1, .packets = pp, .count = 2, .out = s1 };
		struct ssubmit cons = { .queue = q2, .packets = pc, .count = 1,
					.in = &dep, .nin = 1, .out = s2 };
		struct drm_spyre_queue_error e;

		spyre_prep_copy_va(pp[0], h.va, d.va, size);
		/* Unmapped (the top of the VA space): this packet faults. */
		spyre_prep_copy_va(pp[1], SPYRE_MMU_VA_SIZE - 8 * 4096, d.va, 4096);
		spyre_prep_timestamp(pc, SPYRE_AS_VIRT, t.va);
		ASSERT_EQ(0, ssubmit(fd, &prod));
		ASSERT_EQ(0, ssubmit(fd, &cons));
		ASSERT_EQ(0, ssyncobj_wait(fd, s2, 0, SPYRE_DONE_MS));
		ASSERT_EQ(0, squeue_error(fd, q1, &e));
		EXPECT_EQ(round + 1, e.error_count);
		EXPECT_EQ(DRM_SPYRE_ERROR_FAULT, e.fault.error);
		ASSERT_EQ(0, squeue_error(fd, q2, &e));
		EXPECT_EQ(0, e.error_count) TH_LOG("round %d: consumer error %u", round, e.fault.error);
	}
	EXPECT_EQ(resets0, read_sysfs_long("/sys/bus/pci/devices/%s/resets", pci));
	close(fd);
}

TEST_HARNESS_MAIN
