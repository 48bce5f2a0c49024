// SPDX-License-Identifier: GPL-2.0-only
/*
 * Description: concurrency soak of spyre.ko. Eight processes (on every
 * card in turn) each run SPYRE_SOAK_JOBS jobs (default 1000), eight in
 * flight at a time on two queues: three of four are COPYs host -> device ->
 * host of 128 B to 16 KiB with every byte checked, one of four uploads 32
 * values, runs the relu program of spyre_launch_test (LAUNCH) and downloads
 * the result, checked against the CPU. Meanwhile other processes are killed
 * with SIGKILL at fixed points with big copies (16 MiB each way) in flight:
 * right after their first submission, after four on two queues, after
 * closing a buffer a running job writes, with a BO shared with another file
 * (PRIME, on the other card when there is one), while blocked waiting for a
 * job, and while reading a buffer the device writes; the six at once, in
 * SPYRE_SOAK_KILL_ROUNDS rounds (default 3).
 *
 * Afterwards nothing is lost or wrong: every job's syncobj signaled, every
 * result is right, job sequence numbers have no gap, no queue recorded an
 * error, every killed process died of SIGKILL; and nothing leaked: sysfs
 * mem_used/host_mem_used and the debugfs contexts and bos listings of every
 * card are back at their starting values, the kernel is not newly tainted.
 *
 * Measured under TCG (2 host cores, shared): on the release kernel 8 x 1000
 * jobs take 1.5 to 2.5 s and the 18 kills 4 to 8 s, the test about 10 s; on
 * the debug kernel (KASAN, lockdep) 8 x 2000 jobs and 24 kills took 90 s,
 * so 8 x 1000 and 18 kills take about a minute there.
 */
#include <signal.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "spyre_test.h"
#include "spyre_progbuild.h"

#define MiB		(1ull << 20)
#define SOAK_PROCS	8
#define SOAK_SLOTS	8		/* jobs in flight per process */
#define SOAK_MAX_COPY	(16 << 10)
#define SOAK_CARDS	2
#define KILL_SCENARIOS	6
#define KILL_BIG	(16 * MiB)

static const char *const kill_names[KILL_SCENARIOS] = {
	"after its first submission",
	"after four submissions on two queues",
	"after closing a BO its running jobs write",
	"with a PRIME-shared BO in use by two files",
	"blocked waiting for its job",
	"reading a BO the device writes",
};

struct soak_result {
	uint64_t copies, launches;	/* verified */
	uint64_t wrong, lost, queue_errors, seq_gaps;
	double seconds;
	char first[192];		/* the first problem, verbatim */
};

struct soak_shared {
	struct soak_result r[SOAK_PROCS];
	int kills, kill_bad;
	char kill_err[192];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void note(struct soak_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct soak_result *r, const char *fmt, ...)
{
	va_list ap;

	if (r->first[0])
		return;
	va_start(ap, fmt);
	vsnprintf(r->first, sizeof(r->first), fmt, ap);
	va_end(ap);
}

static int ncards(void)
{
	char path[64];
	int n = 0;

	while (n < SOAK_CARDS && !spyre_node(n, path, sizeof(path)))
		n++;
	return n;
}

/* ---- what must come back to its starting value ------------------------------ */

/* ---- one soak process --------------------------------------------------------- */

struct slot {
	struct sbo src, mid, dst;		/* a copy */
	struct sbo xh, x, y, yh, args;		/* a launch */
	uint32_t sync;
	bool busy, launch;
	uint64_t job;
	uint32_t size;
};

/* The pattern of job @job: 64-bit words, cheap to write and check under TCG. */
static uint64_t soak_word(int id, uint64_t job, size_t k)
{
	return ((uint64_t)id << 56 | job << 24) ^ (k * 0x9e3779b97f4a7c15ull);
}

static float soak_in(uint64_t job, int i)
{
	return (float)((int)((job * 7 + i * 13) % 41) - 20) * 0.25f;
}

/*
 * How long a job may take to signal, queueing behind the others included:
 * 8 processes x 8 jobs in flight on a TCG guest of a loaded host reached 20 s
 * (one job of 8,000, make check with other VMs running); a job the card
 * never finishes is the driver's timeout and recovery to signal, well before.
 */
#define SOAK_WAIT_MS 120000

/* Wait for a slot's job and check its result. */
static void soak_finish(int fd, int id, struct slot *s, struct soak_result *r)
{
	size_t k;
	int ret;

	ret = ssyncobj_wait(fd, s->sync, 0, SOAK_WAIT_MS);
	s->busy = false;
	if (ret) {
		r->lost++;
		note(r, "job %llu: its syncobj did not signal within %d s: %s",
		     (unsigned long long)s->job, SOAK_WAIT_MS / 1000, strerror(-ret));
		return;
	}
	if (s->launch) {
		const float *out = s->yh.map;

		for (k = 0; k < 32; k++) {
			float in = soak_in(s->job, k), want = in > 0 ? in : 0.0f;

			if (out[k] != want) {
				r->wrong++;
				note(r, "launch job %llu: y[%zu] = %g, want %g",
				     (unsigned long long)s->job, k, out[k], want);
				return;
			}
		}
		r->launches++;
		return;
	}
	for (k = 0; k < s->size / 8; k++) {
		uint64_t got = ((uint64_t *)s->dst.map)[k];

		if (got != soak_word(id, s->job, k)) {
			r->wrong++;
			note(r, "copy job %llu: word %zu of %u bytes is %#llx, want %#llx",
			     (unsigned long long)s->job, k, s->size, (unsigned long long)got,
			     (unsigned long long)soak_word(id, s->job, k));
			return;
		}
	}
	r->copies++;
}

static int soak_slot_init(int fd, struct slot *s)
{
	int ret;

	ret = sbo_create(fd, SOAK_MAX_COPY, DRM_SPYRE_BO_HOST, &s->src);
	ret = ret ?: sbo_create(fd, SOAK_MAX_COPY, 0, &s->mid);
	ret = ret ?: sbo_create(fd, SOAK_MAX_COPY, DRM_SPYRE_BO_HOST, &s->dst);
	ret = ret ?: sbo_create(fd, 4096, DRM_SPYRE_BO_HOST, &s->xh);
	ret = ret ?: sbo_create(fd, 4096, 0, &s->x);
	ret = ret ?: sbo_create(fd, 4096, 0, &s->y);
	ret = ret ?: sbo_create(fd, 4096, DRM_SPYRE_BO_HOST, &s->yh);
	ret = ret ?: sbo_create(fd, 4096, DRM_SPYRE_BO_HOST, &s->args);
	ret = ret ?: ssyncobj_create(fd, &s->sync);
	if (ret)
		return ret;
	((uint64_t *)s->args.map)[0] = s->x.va;
	((uint64_t *)s->args.map)[1] = s->y.va;
	return 0;
}

/* @jobs jobs on @card, SOAK_SLOTS in flight, every result checked. */
static void soak_worker(int id, int card, int jobs, struct soak_result *r)
{
	struct slot slot[SOAK_SLOTS];
	uint64_t seq[2] = { 0, 0 };
	struct drm_spyre_queue_error e;
	uint32_t q[2];
	struct sbo img;
	double t0 = now_s();
	size_t isize;
	void *image;
	int fd, i, j;

	memset(slot, 0, sizeof(slot));
	fd = spyre_open(card);
	image = spyre_pb_relu_image(SPYRE_PB_ADDR_SLOT, 1, 128, &isize);
	if (fd < 0 || !image || squeue_create(fd, id % 3, &q[0]) ||
	    squeue_create(fd, (id + 1) % 3, &q[1]) ||
	    sbo_create(fd, 4096, DRM_SPYRE_BO_HOST, &img)) {
		note(r, "process %d: set-up failed", id);
		_exit(3);
	}
	memcpy(img.map, image, isize);
	for (i = 0; i < SOAK_SLOTS; i++)
		if (soak_slot_init(fd, &slot[i])) {
			note(r, "process %d: slot set-up failed", id);
			_exit(3);
		}

	for (j = 0; j < jobs; j++) {
		struct slot *s = &slot[j % SOAK_SLOTS];
		struct ssubmit sub = { .out = s->sync };
		uint8_t p[3][64];
		size_t k;
		int ret;

		if (s->busy)
			soak_finish(fd, id, s, r);
		s->job = j;
		s->launch = j % 4 == 3;
		if (s->launch) {
			float *in = s->xh.map;

			for (k = 0; k < 32; k++)
				in[k] = soak_in(j, k);
			memset(s->yh.map, 0xff, 128);
			spyre_prep_copy_va(p[0], s->xh.va, s->x.va, 128);
			spyre_prep_launch(p[1], img.va, s->args.va, 1, 0);
			spyre_prep_copy_va(p[2], s->y.va, s->yh.va, 128);
			sub.count = 3;
		} else {
			s->size = 128 * (1 + (j * 37 + id * 11) % (SOAK_MAX_COPY / 128));
			for (k = 0; k < s->size / 8; k++)
				((uint64_t *)s->src.map)[k] = soak_word(id, j, k);
			spyre_prep_copy_va(p[0], s->src.va, s->mid.va, s->size);
			spyre_prep_copy_va(p[1], s->mid.va, s->dst.va, s->size);
			sub.count = 2;
		}
		sub.packets = p;
		sub.queue = q[s->launch];
		ret = ssubmit(fd, &sub);
		if (ret) {
			r->lost++;
			note(r, "job %d: SUBMIT: %s", j, strerror(-ret));
			continue;
		}
		s->busy = true;
		if (sub.job_seq != ++seq[s->launch]) {
			r->seq_gaps++;
			note(r, "job %d: job_seq %llu on queue %u, want %llu", j,
			     (unsigned long long)sub.job_seq, q[s->launch],
			     (unsigned long long)seq[s->launch]);
			seq[s->launch] = sub.job_seq;
		}
	}
	for (i = 0; i < SOAK_SLOTS; i++)
		if (slot[i].busy)
			soak_finish(fd, id, &slot[i], r);
	for (i = 0; i < 2; i++) {
		if (squeue_error(fd, q[i], &e) || e.error_count) {
			r->queue_errors += e.error_count ? e.error_count : 1;
			note(r, "queue %u: %llu errors, the last: job %llu error %u hw %u at %#llx", q[i],
			     (unsigned long long)e.error_count, (unsigned long long)e.job_seq, e.fault.error,
			     e.fault.hw_error, (unsigned long long)e.fault.addr);
		}
	}
	close(fd);
	r->seconds = now_s() - t0;
	_exit(r->wrong || r->lost || r->queue_errors || r->seq_gaps ? 1 : 0);
}

/* ---- processes killed mid-job ---------------------------------------------------- */

/*
 * Set up big host -> device -> host copies on @card, then die of SIGKILL at
 * the fixed point @scenario. Exits (status 3) only when the set-up fails.
 */
/* Say which set-up step of a kill child failed (its exit status 3 says only that). */
static void kill_setup_failed(int scenario, int line)
{
	fprintf(stderr, "# kill child %d: set-up at %s:%d failed: %s\n", scenario, __FILE__, line,
		strerror(errno));
	_exit(3);
}

static void kill_child(int scenario, int card, int other_card, int pipe_wr)
{
	struct sbo h1, d, h2;
	uint32_t q1, q2, sync;
	uint8_t p[2][64];
	int fd, i;

	fd = spyre_open(card);
	if (fd < 0 || squeue_create(fd, DRM_SPYRE_PRIO_NORMAL, &q1) ||
	    squeue_create(fd, DRM_SPYRE_PRIO_HIGH, &q2) ||
	    sbo_create(fd, KILL_BIG, DRM_SPYRE_BO_HOST, &h1) || sbo_create(fd, KILL_BIG, 0, &d) ||
	    sbo_create(fd, KILL_BIG, DRM_SPYRE_BO_HOST, &h2) || ssyncobj_create(fd, &sync))
		kill_setup_failed(scenario, __LINE__);
	memset(h1.map, 0x5a, KILL_BIG);
	spyre_prep_copy_va(p[0], h1.va, d.va, KILL_BIG);
	spyre_prep_copy_va(p[1], d.va, h2.va, KILL_BIG);

	switch (scenario) {
	case 0: {	/* jobs in flight, every BO named by the job */
		uint32_t bos[3] = { h1.handle, d.handle, h2.handle };
		struct ssubmit s = { .queue = q1, .packets = p, .count = 2, .bos = bos, .nbos = 3 };

		if (ssubmit(fd, &s))
			kill_setup_failed(scenario, __LINE__);
		break;
	}
	case 1:		/* a deeper backlog on two queues, BOs named by address only */
		for (i = 0; i < 4; i++) {
			struct ssubmit s = { .queue = i % 2 ? q2 : q1, .packets = p, .count = 2 };

			if (ssubmit(fd, &s))
				kill_setup_failed(scenario, __LINE__);
		}
		break;
	case 2: {	/* the destination goes away under the running jobs */
		struct ssubmit s = { .queue = q1, .packets = p, .count = 2 };
		struct ssubmit n = { .queue = q2, .packets = p, .count = 1 };
		uint8_t nop[64];

		if (ssubmit(fd, &s) || ssubmit(fd, &s))
			kill_setup_failed(scenario, __LINE__);
		/* the newest job is on the other queue: the close must wait for all */
		spyre_prep_hdr(nop, SPYRE_PKT_OP_NOP);
		n.packets = nop;
		if (ssubmit(fd, &n))
			kill_setup_failed(scenario, __LINE__);
		sbo_close(fd, &h2);
		n.packets = p;
		ssubmit(fd, &n);
		break;
	}
	case 3: {	/* a BO shared with another file, maybe on the other card */
		struct drm_prime_handle exp = { .handle = h1.handle, .flags = DRM_CLOEXEC };
		struct drm_prime_handle imp = { 0 };
		struct drm_spyre_bo_info info = { 0 };
		struct ssubmit s = { .queue = q1, .packets = p, .count = 2 };
		struct sbo d2;
		uint32_t q3;
		int fd2 = spyre_open(other_card);

		if (fd2 < 0 || xioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &exp))
			kill_setup_failed(scenario, __LINE__);
		imp.fd = exp.fd;
		if (xioctl(fd2, DRM_IOCTL_PRIME_FD_TO_HANDLE, &imp) ||
		    squeue_create(fd2, DRM_SPYRE_PRIO_NORMAL, &q3) ||
		    sbo_create(fd2, KILL_BIG, 0, &d2))
			kill_setup_failed(scenario, __LINE__);
		info.handle = imp.handle;
		if (xioctl(fd2, DRM_IOCTL_SPYRE_BO_INFO, &info))
			kill_setup_failed(scenario, __LINE__);
		spyre_prep_copy_va(p[0], info.va, d2.va, KILL_BIG);
		s.queue = q3;
		s.count = 1;
		if (ssubmit(fd2, &s))
			kill_setup_failed(scenario, __LINE__);
		spyre_prep_copy_va(p[0], h1.va, d.va, KILL_BIG);
		s.queue = q1;
		s.count = 2;
		if (ssubmit(fd, &s))
			kill_setup_failed(scenario, __LINE__);
		break;
	}
	case 4: {	/* blocked in a wait for the job when the signal comes */
		struct ssubmit s = { .queue = q1, .packets = p, .count = 2, .out = sync };

		if (ssubmit(fd, &s) || ssubmit(fd, &s))
			kill_setup_failed(scenario, __LINE__);
		if (write(pipe_wr, "w", 1) != 1)
			kill_setup_failed(scenario, __LINE__);
		ssyncobj_wait(fd, sync, 0, 60000);
		/*
		 * Usually the parent's SIGKILL lands in the wait; if the jobs
		 * finished first, it lands here. Either way it is the end.
		 */
		for (;;)
			pause();
	}
	default: {	/* the CPU reads what the device writes */
		struct ssubmit s = { .queue = q1, .packets = p, .count = 2 };
		volatile uint8_t *m = h2.map;
		unsigned int sum = 0;

		if (ssubmit(fd, &s))
			kill_setup_failed(scenario, __LINE__);
		for (i = 0; i < 64; i++)
			sum += m[(size_t)i * (KILL_BIG / 64)];
		(void)sum;
		break;
	}
	}
	raise(SIGKILL);
	_exit(5);
}

/* Run @rounds rounds; in a round, the six scenarios run at once. */
static void kill_manager(int rounds, int ncard, struct soak_shared *sh)
{
	int round, sc, status, fds[KILL_SCENARIOS][2], card[KILL_SCENARIOS];
	pid_t pid[KILL_SCENARIOS];
	char c;

	for (round = 0; round < rounds; round++) {
		for (sc = 0; sc < KILL_SCENARIOS; sc++) {
			card[sc] = (round + sc) % ncard;
			if (pipe(fds[sc]))
				_exit(3);
			pid[sc] = fork();
			if (pid[sc] == 0) {
				close(fds[sc][0]);
				kill_child(sc, card[sc], (card[sc] + 1) % ncard, fds[sc][1]);
			}
			close(fds[sc][1]);
			if (pid[sc] < 0)
				_exit(3);
		}
		/* blocked in its wait (or about to be): kill it from here, at once */
		if (read(fds[4][0], &c, 1) == 1)
			kill(pid[4], SIGKILL);
		for (sc = 0; sc < KILL_SCENARIOS; sc++) {
			close(fds[sc][0]);
			if (waitpid(pid[sc], &status, 0) != pid[sc])
				_exit(3);
			if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
				sh->kills++;
				continue;
			}
			sh->kill_bad++;
			if (!sh->kill_err[0])
				snprintf(sh->kill_err, sizeof(sh->kill_err),
					 "round %d, killed %s on card %d: status %#x, not SIGKILL "
					 "(exit 3: set-up failed, see its message)", round,
					 kill_names[sc], card[sc], status);
		}
	}
	_exit(0);
}

/* ---- the test ------------------------------------------------------------------- */

FIXTURE(soak) {
	struct spyre_snap start;
	int ncards;
};

FIXTURE_SETUP(soak)
{
	self->ncards = ncards();
	if (!self->ncards)
		SKIP(return, "no spyre device");
	spyre_snap_take(&self->start);
	ASSERT_EQ(self->ncards, self->start.ncards);
}

FIXTURE_TEARDOWN(soak)
{
}

TEST_F_TIMEOUT(soak, eight_processes_verified_jobs_with_kills, 300)
{
	int jobs = (int)strtol(getenv("SPYRE_SOAK_JOBS") ?: "1000", NULL, 0);
	int rounds = (int)strtol(getenv("SPYRE_SOAK_KILL_ROUNDS") ?: "3", NULL, 0);
	struct soak_shared *sh;
	uint64_t copies = 0, launches = 0;
	pid_t pid[SOAK_PROCS], mgr;
	double t0 = now_s(), slowest = 0;
	struct spyre_snap end;
	int i, status;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);
	memset(sh, 0, sizeof(*sh));
	spyre_diag("soak: %d processes x %d jobs (SPYRE_SOAK_JOBS) on %d card(s), %d in flight each; "
	    "%d rounds (SPYRE_SOAK_KILL_ROUNDS) of %d processes killed mid-job", SOAK_PROCS, jobs,
	    self->ncards, SOAK_SLOTS, rounds, KILL_SCENARIOS);
	mgr = fork();
	ASSERT_LE(0, mgr);
	if (mgr == 0)
		kill_manager(rounds, self->ncards, sh);
	for (i = 0; i < SOAK_PROCS; i++) {
		pid[i] = fork();
		ASSERT_LE(0, pid[i]);
		if (pid[i] == 0)
			soak_worker(i, i % self->ncards, jobs, &sh->r[i]);
	}
	for (i = 0; i < SOAK_PROCS; i++) {
		struct soak_result *r = &sh->r[i];

		ASSERT_EQ(pid[i], waitpid(pid[i], &status, 0));
		if (r->first[0])
			TH_LOG("process %d: %s", i, r->first);
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("process %d: status %#x", i, status);
		EXPECT_EQ(jobs, r->copies + r->launches) TH_LOG("process %d", i);
		EXPECT_EQ(0, r->wrong);
		EXPECT_EQ(0, r->lost);
		EXPECT_EQ(0, r->queue_errors);
		EXPECT_EQ(0, r->seq_gaps);
		copies += r->copies;
		launches += r->launches;
		if (r->seconds > slowest)
			slowest = r->seconds;
	}
	spyre_diag("soak: %llu copies and %llu launches verified, slowest process %.1f s",
	    (unsigned long long)copies, (unsigned long long)launches, slowest);
	ASSERT_EQ(mgr, waitpid(mgr, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) TH_LOG("status %#x", status);
	if (sh->kill_err[0])
		TH_LOG("%s", sh->kill_err);
	EXPECT_EQ(0, sh->kill_bad);
	EXPECT_EQ(rounds * KILL_SCENARIOS, sh->kills);
	spyre_diag("soak: %d processes killed with SIGKILL mid-job (%s; %s; %s; %s; %s; %s); %.1f s",
	    sh->kills, kill_names[0], kill_names[1], kill_names[2], kill_names[3], kill_names[4],
	    kill_names[5], now_s() - t0);

	/* Nothing leaked: files are released and jobs freed asynchronously. */
	for (i = 0; i < 200; i++) {
		spyre_snap_take(&end);
		if (spyre_snap_same(&end, &self->start))
			break;
		usleep(100000);
	}
	EXPECT_EQ(self->start.tainted, end.tainted)
		TH_LOG("kernel taint %#lx -> %#lx: see the console", self->start.tainted,
		       end.tainted);
	for (i = 0; i < self->ncards; i++) {
		EXPECT_EQ(self->start.c[i].mem_used, end.c[i].mem_used) TH_LOG("card %d", i);
		EXPECT_EQ(self->start.c[i].host_used, end.c[i].host_used) TH_LOG("card %d", i);
		EXPECT_STREQ(self->start.c[i].contexts, end.c[i].contexts) TH_LOG("card %d", i);
		EXPECT_STREQ(self->start.c[i].bos, end.c[i].bos) TH_LOG("card %d", i);
	}
	spyre_diag("soak: mem_used, host_mem_used, debugfs contexts and bos %s",
	    spyre_snap_same(&end, &self->start) ? "back at their starting values" : "DIFFER");
	munmap(sh, sizeof(*sh));
}

TEST_HARNESS_MAIN
