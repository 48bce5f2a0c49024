// SPDX-License-Identifier: GPL-2.0-only
/*
 * Description: recovery of spyre.ko: an injected queue hang times out, fails
 * the guilty job with a TIMEOUT error its context can read and resets the
 * queue, innocent jobs queued behind it run, the next job succeeds; a job
 * that outlasts the timeout while its queue makes progress is not hung; a
 * job with a wait bound is not hung within it (unless another queue's job is
 * behind it or its file is closing); a
 * context that keeps hanging is banned (-ECANCELED); closing a file with
 * jobs in flight; unbind/rebind and rmmod/insmod with files open. Runs as
 * root in the test VM (debugfs and sysfs writes).
 */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

FIXTURE(rec) {
	int fd;
	uint32_t q;
	char pci[32];
};

FIXTURE_SETUP(rec)
{
	self->fd = spyre_open(0);
	if (self->fd < 0)
		SKIP(return, "no spyre device");
	ASSERT_EQ(0, card_pci(0, self->pci, sizeof(self->pci)));
	ASSERT_EQ(0, squeue_create(self->fd, DRM_SPYRE_PRIO_NORMAL, &self->q));
}

FIXTURE_TEARDOWN(rec)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(rec, hang_times_out_and_queue_recovers)
{
	char path[256];
	struct drm_spyre_queue_error e;
	struct ssubmit s = { .queue = self->q, .count = 1 };
	struct sbo t;
	uint8_t p[64], ts[64];
	uint32_t s1, s2;
	long resets;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resets", self->pci);
	resets = read_sysfs_long("%s", path);
	ASSERT_EQ(0, inject_hang_all(self->pci, 15));
	ASSERT_EQ(0, sbo_create(self->fd, 4096, DRM_SPYRE_BO_HOST, &t));

	/* job 1 hangs; job 2 (innocent, queued behind) must still run */
	spyre_prep_hdr(p, SPYRE_PKT_OP_NOP);
	ASSERT_EQ(0, ssyncobj_create(self->fd, &s1));
	ASSERT_EQ(0, ssyncobj_create(self->fd, &s2));
	s.packets = p;
	s.out = s1;
	ASSERT_EQ(0, ssubmit(self->fd, &s));
	spyre_prep_sem(ts, SPYRE_PKT_OP_TIMESTAMP, SPYRE_AS_VIRT, t.va, 0);
	s.packets = ts;
	s.out = s2;
	ASSERT_EQ(0, ssubmit(self->fd, &s));
	ASSERT_EQ(0, ssyncobj_wait(self->fd, s1, 0, SPYRE_DONE_MS));
	ASSERT_EQ(0, ssyncobj_wait(self->fd, s2, 0, SPYRE_DONE_MS));
	ASSERT_EQ(0, inject_disarm(self->pci));

	ASSERT_EQ(0, squeue_error(self->fd, self->q, &e));
	ASSERT_EQ(DRM_SPYRE_ERROR_TIMEOUT, e.fault.error);
	ASSERT_EQ(1, e.job_seq);
	ASSERT_EQ(1, e.error_count);
	ASSERT_LT(0, ((uint64_t *)t.map)[0]);	/* the innocent job ran */
	ASSERT_EQ(resets + 1, read_sysfs_long("%s", path));
	ASSERT_EQ(0, srun(self->fd, self->q, p, 1));
}

TEST_F(rec, repeated_hangs_ban_the_context)
{
	struct drm_spyre_queue_error e;
	struct ssubmit s = { .queue = self->q, .count = 1 };
	uint8_t p[64];
	uint32_t q2;
	int i, fd2;

	spyre_prep_hdr(p, SPYRE_PKT_OP_NOP);
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, inject_hang_all(self->pci, 15));
		ASSERT_EQ(0, srun(self->fd, self->q, p, 1));
	}
	ASSERT_EQ(0, inject_disarm(self->pci));
	ASSERT_EQ(0, squeue_error(self->fd, self->q, &e));
	ASSERT_EQ(3, e.error_count);
	s.packets = p;
	ASSERT_EQ(-ECANCELED, ssubmit(self->fd, &s));
	/* Another file is not affected. */
	fd2 = spyre_open(0);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, squeue_create(fd2, DRM_SPYRE_PRIO_NORMAL, &q2));
	ASSERT_EQ(0, srun(fd2, q2, p, 1));
	close(fd2);
}

/* A job of one WAIT for @value at @sem on @q, bounded at @bound_ms, signaling @out (0: none). */
static int submit_bounded_wait(int fd, uint32_t q, const struct sbo *sem, uint64_t value,
			       uint32_t bound_ms, uint32_t out)
{
	uint8_t pw[64];
	struct ssubmit w = { .queue = q, .packets = pw, .count = 1, .out = out,
			     .wait_bound_ms = bound_ms };

	spyre_prep_sem(pw, SPYRE_PKT_OP_WAIT, SPYRE_AS_VIRT, sem->va, value);
	return ssubmit(fd, &w);
}

/*
 * A job submitted with a wait bound (SUBMIT's wait_bound_ms) that WAITs on
 * the device past the 2 s job timeout is not hung within it: released by
 * another queue's SIGNAL after 4.5 s, it completes without an error or a
 * reset. One whose value never comes fails at the first timeout past its
 * bound, as a hang (DRM_SPYRE_ERROR_TIMEOUT).
 */
TEST_F(rec, wait_bound_keeps_a_waiting_job_alive)
{
	struct drm_spyre_queue_error e;
	struct sbo sem;
	uint8_t ps[64];
	uint32_t q2, s1;
	int64_t t0;

	ASSERT_EQ(0, squeue_create(self->fd, DRM_SPYRE_PRIO_HIGH, &q2));
	ASSERT_EQ(0, sbo_create(self->fd, 4096, 0, &sem));
	ASSERT_EQ(0, ssyncobj_create(self->fd, &s1));
	ASSERT_EQ(0, submit_bounded_wait(self->fd, self->q, &sem, 1, 10000, s1));
	/* Past two of the driver's 2 s timeouts: still waiting, not failed. */
	ASSERT_EQ(-ETIME, ssyncobj_wait(self->fd, s1, 0, 4500));
	ASSERT_EQ(0, squeue_error(self->fd, self->q, &e));
	ASSERT_EQ(0, e.error_count);
	spyre_prep_sem(ps, SPYRE_PKT_OP_SIGNAL, SPYRE_AS_VIRT, sem.va, 1);
	ASSERT_EQ(0, srun(self->fd, q2, ps, 1));
	ASSERT_EQ(0, ssyncobj_wait(self->fd, s1, 0, SPYRE_DONE_MS));
	ASSERT_EQ(0, squeue_error(self->fd, self->q, &e));
	ASSERT_EQ(0, e.error_count);

	/* 2.5 s for a value that never comes: a hang, no sooner than the bound. */
	t0 = spyre_now_ns();
	ASSERT_EQ(0, submit_bounded_wait(self->fd, self->q, &sem, 2, 2500, s1));
	ASSERT_EQ(0, ssyncobj_wait(self->fd, s1, 0, 30000));
	ASSERT_LE(2500, (spyre_now_ns() - t0) / 1000000);
	ASSERT_EQ(0, squeue_error(self->fd, self->q, &e));
	ASSERT_EQ(1, e.error_count);
	ASSERT_EQ(DRM_SPYRE_ERROR_TIMEOUT, e.fault.error);
}

/*
 * The wait bound is not the waiter's to hold when its hardware queue is
 * shared: 16 more queues of its priority (more than the card has hardware
 * queues of one priority, so one shares the waiter's FIFO) each get a job;
 * the waiter, bounded at 20 s, fails at a job timeout well before that, and
 * every other job runs.
 */
TEST_F(rec, wait_bound_ends_for_a_shared_queue)
{
	struct drm_spyre_queue_error e;
	struct ssubmit n = { 0 };
	uint32_t q[16], s[16], s1;
	uint8_t nop[64];
	struct sbo sem;
	int64_t t0;
	int i;

	ASSERT_EQ(0, sbo_create(self->fd, 4096, 0, &sem));
	ASSERT_EQ(0, ssyncobj_create(self->fd, &s1));
	t0 = spyre_now_ns();
	ASSERT_EQ(0, submit_bounded_wait(self->fd, self->q, &sem, 1, 20000, s1));
	spyre_prep_hdr(nop, SPYRE_PKT_OP_NOP);
	for (i = 0; i < 16; i++) {
		ASSERT_EQ(0, squeue_create(self->fd, DRM_SPYRE_PRIO_NORMAL, &q[i]));
		ASSERT_EQ(0, ssyncobj_create(self->fd, &s[i]));
		n.queue = q[i];
		n.packets = nop;
		n.count = 1;
		n.out = s[i];
		ASSERT_EQ(0, ssubmit(self->fd, &n));
	}
	ASSERT_EQ(0, ssyncobj_wait(self->fd, s1, 0, 30000));
	ASSERT_GT(15000, (spyre_now_ns() - t0) / 1000000);
	ASSERT_EQ(0, squeue_error(self->fd, self->q, &e));
	ASSERT_EQ(1, e.error_count);
	ASSERT_EQ(DRM_SPYRE_ERROR_TIMEOUT, e.fault.error);
	for (i = 0; i < 16; i++) {
		ASSERT_EQ(0, ssyncobj_wait(self->fd, s[i], 0, SPYRE_DONE_MS)) TH_LOG("queue %d", i);
		ASSERT_EQ(0, squeue_error(self->fd, q[i], &e));
		ASSERT_EQ(0, e.error_count) TH_LOG("queue %d", i);
	}
}

/*
 * A process killed while its job waits within a 60 s bound: its file's
 * release ends the bound, so the exit (which waits for its jobs) takes a job
 * timeout or two, not the minute.
 */
TEST_F(rec, wait_bound_ends_when_the_file_closes)
{
	int pipefd[2], st;
	int64_t t0;
	pid_t pid;
	char c;

	ASSERT_EQ(0, pipe(pipefd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct sbo sem;
		uint32_t q;
		int fd = spyre_open(0);

		if (fd < 0 || squeue_create(fd, DRM_SPYRE_PRIO_NORMAL, &q) ||
		    sbo_create(fd, 4096, 0, &sem))
			_exit(1);
		if (submit_bounded_wait(fd, q, &sem, 1, DRM_SPYRE_MAX_WAIT_BOUND_MS, 0))
			_exit(2);
		if (write(pipefd[1], "x", 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	close(pipefd[1]);
	ASSERT_EQ(1, read(pipefd[0], &c, 1));
	close(pipefd[0]);
	usleep(500000);		/* the job on the ring */
	t0 = spyre_now_ns();
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFSIGNALED(st));
	ASSERT_GT(30000, (spyre_now_ns() - t0) / 1000000);
}

TEST_F(rec, hung_producer_releases_device_side_waiter)
{
	struct drm_spyre_queue_error e;
	struct drm_spyre_sync dep = { 0 };
	struct ssubmit prod = { 0 }, cons = { 0 };
	struct sbo sem, t;
	uint8_t pp[64], pc[64];
	uint32_t q2, s1, s2;

	/* The producer hangs on a semaphore nobody signals; the consumer on
	 * another queue waits for it on the device. */
	ASSERT_EQ(0, squeue_create(self->fd, DRM_SPYRE_PRIO_NORMAL, &q2));
	ASSERT_EQ(0, sbo_create(self->fd, 4096, 0, &sem));
	ASSERT_EQ(0, sbo_create(self->fd, 4096, DRM_SPYRE_BO_HOST, &t));
	ASSERT_EQ(0, ssyncobj_create(self->fd, &s1));
	ASSERT_EQ(0, ssyncobj_create(self->fd, &s2));
	spyre_prep_sem(pp, SPYRE_PKT_OP_WAIT, SPYRE_AS_VIRT, sem.va, 1);
	prod.queue = self->q;
	prod.packets = pp;
	prod.count = 1;
	prod.out = s1;
	ASSERT_EQ(0, ssubmit(self->fd, &prod));
	spyre_prep_sem(pc, SPYRE_PKT_OP_TIMESTAMP, SPYRE_AS_VIRT, t.va, 0);
	dep.handle = s1;
	cons.queue = q2;
	cons.packets = pc;
	cons.count = 1;
	cons.in = &dep;
	cons.nin = 1;
	cons.out = s2;
	ASSERT_EQ(0, ssubmit(self->fd, &cons));
	/* After the producer's timeout and queue reset the consumer runs. */
	ASSERT_EQ(0, ssyncobj_wait(self->fd, s2, 0, SPYRE_DONE_MS));
	ASSERT_LT(0, ((uint64_t *)t.map)[0]);
	ASSERT_EQ(0, squeue_error(self->fd, self->q, &e));
	ASSERT_EQ(DRM_SPYRE_ERROR_TIMEOUT, e.fault.error);
	/* Only the producer is blamed. */
	ASSERT_EQ(0, squeue_error(self->fd, q2, &e));
	ASSERT_EQ(0, e.error_count);
}

/*
 * A job that runs past the timeout but keeps making progress is not hung:
 * five WAITs on a semaphore another queue raises every 600 ms take 3 s,
 * longer than the 2 s job timeout, and complete without an error or a
 * reset (the driver re-arms the timeout while the queue's packet count
 * moves; a job whose queue stands still is hung, the tests above).
 */
TEST_F(rec, a_job_that_makes_progress_is_not_hung)
{
	struct drm_spyre_queue_error e;
	struct ssubmit s = { .queue = self->q, .count = 6 };
	uint8_t p[6][64], sig[64];
	struct timespec t0, t1;
	struct sbo sem, t;
	char path[256];
	uint32_t q2, sync;
	long resets;
	int v;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resets", self->pci);
	resets = read_sysfs_long("%s", path);
	ASSERT_EQ(0, squeue_create(self->fd, DRM_SPYRE_PRIO_NORMAL, &q2));
	ASSERT_EQ(0, sbo_create(self->fd, 4096, 0, &sem));
	ASSERT_EQ(0, sbo_create(self->fd, 4096, DRM_SPYRE_BO_HOST, &t));
	ASSERT_EQ(0, ssyncobj_create(self->fd, &sync));
	for (v = 0; v < 5; v++)
		spyre_prep_sem(p[v], SPYRE_PKT_OP_WAIT, SPYRE_AS_VIRT, sem.va, v + 1);
	spyre_prep_sem(p[5], SPYRE_PKT_OP_TIMESTAMP, SPYRE_AS_VIRT, t.va, 0);
	s.packets = p;
	s.out = sync;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ASSERT_EQ(0, ssubmit(self->fd, &s));
	for (v = 1; v <= 5; v++) {
		usleep(600000);
		spyre_prep_sem(sig, SPYRE_PKT_OP_SIGNAL, SPYRE_AS_VIRT, sem.va, v);
		ASSERT_EQ(0, srun(self->fd, q2, sig, 1));
	}
	ASSERT_EQ(0, ssyncobj_wait(self->fd, sync, 0, SPYRE_DONE_MS));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* it did outlast the timeout */
	ASSERT_LT(2.5, (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	ASSERT_LT(0, ((uint64_t *)t.map)[0]);
	ASSERT_EQ(0, squeue_error(self->fd, self->q, &e));
	ASSERT_EQ(0, e.error_count);
	ASSERT_EQ(resets, read_sysfs_long("%s", path));
}

TEST_F(rec, close_with_jobs_in_flight)
{
	struct sbo sem;
	uint8_t p[64];
	struct ssubmit s = { .queue = self->q, .packets = p, .count = 1 };
	int fd2;
	uint32_t q2;

	/* A job blocked on a semaphore nobody signals, then close the file. */
	fd2 = spyre_open(0);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, squeue_create(fd2, DRM_SPYRE_PRIO_LOW, &q2));
	ASSERT_EQ(0, sbo_create(fd2, 4096, 0, &sem));
	spyre_prep_sem(p, SPYRE_PKT_OP_WAIT, SPYRE_AS_VIRT, sem.va, 1);
	s.queue = q2;
	ASSERT_EQ(0, ssubmit(fd2, &s));
	ASSERT_EQ(0, close(fd2));	/* returns once the job timed out */
	/* The device keeps working for everyone else. */
	spyre_prep_hdr(p, SPYRE_PKT_OP_NOP);
	ASSERT_EQ(0, srun(self->fd, self->q, p, 1));
}

TEST_F(rec, unbind_and_rebind_with_file_open)
{
	struct drm_spyre_get_param gp = { .param = DRM_SPYRE_PARAM_NUM_CORES };
	struct ssubmit s = { .queue = self->q, .count = 1 };
	uint8_t p[64];
	int fd2;
	uint32_t q2;

	struct sbo sem;
	uint8_t w[64];

	/* A job in flight (blocked on a semaphore) while the driver unbinds. */
	ASSERT_EQ(0, sbo_create(self->fd, 4096, 0, &sem));
	spyre_prep_sem(w, SPYRE_PKT_OP_WAIT, SPYRE_AS_VIRT, sem.va, 1);
	s.packets = w;
	ASSERT_EQ(0, ssubmit(self->fd, &s));
	usleep(20000);
	ASSERT_EQ(0, write_text("/sys/bus/pci/drivers/spyre/unbind", self->pci));
	/* The open file now gets -ENODEV, and closing it is safe. */
	ASSERT_EQ(-ENODEV, xioctl(self->fd, DRM_IOCTL_SPYRE_GET_PARAM, &gp));
	spyre_prep_hdr(p, SPYRE_PKT_OP_NOP);
	s.packets = p;
	ASSERT_EQ(-ENODEV, ssubmit(self->fd, &s));
	close(self->fd);
	self->fd = -1;
	ASSERT_EQ(0, write_text("/sys/bus/pci/drivers/spyre/bind", self->pci));
	fd2 = spyre_open(0);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, squeue_create(fd2, DRM_SPYRE_PRIO_NORMAL, &q2));
	ASSERT_EQ(0, srun(fd2, q2, p, 1));
	close(fd2);
}

TEST_F(rec, rmmod_busy_while_open_then_reload)
{
	uint8_t p[64];
	int mfd, fd2;
	uint32_t q2;

	if (access("/lib/modules/spyre.ko", R_OK))
		SKIP(return, "spyre.ko not at /lib/modules (not the test VM)");
	/* An open file pins the module. */
	ASSERT_EQ(-1, syscall(SYS_delete_module, "spyre", O_NONBLOCK));
	ASSERT_EQ(EWOULDBLOCK, errno);
	close(self->fd);
	self->fd = -1;
	ASSERT_EQ(0, syscall(SYS_delete_module, "spyre", O_NONBLOCK));
	ASSERT_NE(0, spyre_node(0, (char[64]){ 0 }, 64));
	mfd = open("/lib/modules/spyre.ko", O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, mfd);
	ASSERT_EQ(0, syscall(SYS_finit_module, mfd, "", 0));
	close(mfd);
	fd2 = spyre_open(0);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, squeue_create(fd2, DRM_SPYRE_PRIO_NORMAL, &q2));
	spyre_prep_hdr(p, SPYRE_PKT_OP_NOP);
	ASSERT_EQ(0, srun(fd2, q2, p, 1));
	close(fd2);
}

TEST_HARNESS_MAIN
