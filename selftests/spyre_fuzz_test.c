// SPDX-License-Identifier: GPL-2.0-only
/*
 * Description: ioctl and packet fuzzing of spyre.ko, as a standing test.
 *
 * storm: a seeded storm from 5 processes at once, on every card, of every
 * spyre ioctl and every generic DRM ioctl an accel file reaches (VERSION,
 * GET_CAP, SET_CLIENT_CAP, GEM_CLOSE, PRIME both ways, every SYNCOBJ_*
 * ioctl, the legacy ones: GET_UNIQUE, GET_MAGIC, AUTH_MAGIC, GET_CLIENT,
 * GET_STATS, SET_VERSION, GEM_FLINK/GEM_OPEN, SET/DROP_MASTER, the
 * mode-setting and other core numbers, random numbers, directions and
 * sizes), plus mmap, with random and boundary sizes, flags, handles
 * (valid, freed, another file's, huge), pointers (NULL, unmapped, kernel,
 * non-canonical, misaligned, in a PROT_NONE page, straddling into one,
 * read-only so that only the copy back fails), counts (0, 1, max, max + 1,
 * 0xffffffff) and packet lists with malformed packets (random bytes, each
 * opcode with random fields, valid packets with one field mutated,
 * COPY/LAUNCH at unmapped, freed or another file's addresses, LAUNCH of
 * garbage and mutated programs); files are closed and reopened in the
 * middle, with jobs in flight and buffers mapped.
 * races: two threads submitting (on two queues) while a third destroys and
 * re-creates the queue, closes and re-creates the target BO, or closes the
 * file; SPYRE_FUZZ_RACE_ROUNDS rounds (default 6) of each, per card. Every
 * job SUBMIT accepted must complete.
 * failslab_storm: the storm, shorter, with slab allocations of the fuzzing
 * processes failing (failslab, task-filter, make-it-fail); skipped when the
 * kernel has no failslab.
 *
 * After each: a normal COPY job on every card is checked byte for byte, and
 * sysfs mem_used/host_mem_used, the debugfs contexts and bos listings of
 * every card and the kernel's taint flags are back at their starting values.
 * A fuzzing process still running a minute after the cap is stuck: its call
 * and kernel stack are printed and the test fails.
 *
 * Bounded in count and time: SPYRE_FUZZ_ITERS iterations per process
 * (default 1500) and a wall-clock cap per storm (SPYRE_FUZZ_SECONDS, default
 * 30; the output says when the cap ended a storm early). The seed
 * (SPYRE_FUZZ_SEED, default 0x20261202) is printed first: the same seed
 * replays the same calls in every process (their interleaving is the
 * scheduler's). The errno of every call goes into a histogram, printed with
 * the counts of ioctls and packets and the duration. Under TCG on the
 * release kernel, storm and races together take about 40 s.
 *
 * spyre.ko filters the generic ioctls an accel file reaches: all but VERSION,
 * GET_CAP, GEM_CLOSE, PRIME and SYNCOBJ_* must fail with ENOTTY, and syncobj
 * arrays above DRM_SPYRE_MAX_SYNCOBJ_HANDLES with EINVAL; any other answer
 * fails the test. A driver without that filter oopses on GET_UNIQUE and
 * GET_MAGIC and warns on a syncobj count above 64 Ki: SPYRE_FUZZ_LEGACY=0
 * leaves those calls and these checks out.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "spyre_test.h"
#include "spyre_progbuild.h"

#define MiB			(1ull << 20)
#define FZ_SEED_DEFAULT		0x20261202ull
#define FZ_ITERS_DEFAULT	1500
#define FZ_SECONDS_DEFAULT	30
#define FZ_PROCS		5	/* fuzzing processes: 1 + 4 more */
#define FZ_MAX_CARDS		2
#define FZ_MAX_SYNCOBJ_COUNT	DRM_SPYRE_MAX_SYNCOBJ_HANDLES
#define FZ_GRACE		60	/* s after the cap before a process counts as stuck */

/* Not in libdrm's drm.h of Debian 12. */
struct fz_syncobj_eventfd {
	__u32 handle;
	__u32 flags;
	__u64 point;
	__s32 fd;
	__u32 pad;
};

#define FZ_IOCTL_SYNCOBJ_EVENTFD	DRM_IOWR(0xCF, struct fz_syncobj_eventfd)

/* ---- what gets counted ------------------------------------------------------ */

enum fz_op {
	OP_GET_PARAM, OP_BO_CREATE, OP_BO_INFO, OP_BO_WAIT, OP_QUEUE_CREATE,
	OP_QUEUE_DESTROY, OP_SUBMIT, OP_QUEUE_ERROR,
	OP_VERSION, OP_GET_CAP, OP_SET_CLIENT_CAP, OP_GEM_CLOSE, OP_PRIME_TO_FD,
	OP_PRIME_TO_HANDLE,
	OP_SYNCOBJ_CREATE, OP_SYNCOBJ_DESTROY, OP_SYNCOBJ_TO_FD, OP_SYNCOBJ_TO_HANDLE,
	OP_SYNCOBJ_TRANSFER, OP_SYNCOBJ_WAIT, OP_SYNCOBJ_TIMELINE_WAIT, OP_SYNCOBJ_EVENTFD,
	OP_SYNCOBJ_RESET, OP_SYNCOBJ_SIGNAL, OP_SYNCOBJ_TIMELINE_SIGNAL, OP_SYNCOBJ_QUERY,
	OP_GET_UNIQUE, OP_GET_MAGIC, OP_AUTH_MAGIC, OP_GET_CLIENT, OP_GET_STATS,
	OP_SET_VERSION, OP_GEM_FLINK, OP_GEM_OPEN, OP_SET_MASTER, OP_DROP_MASTER,
	OP_CORE_OTHER, OP_RAW,
	OP_MMAP,	/* not an ioctl: the first op not counted as one */
	OP_COUNT
};

static const char *const fz_op_name[OP_COUNT] = {
	"GET_PARAM", "BO_CREATE", "BO_INFO", "BO_WAIT", "QUEUE_CREATE",
	"QUEUE_DESTROY", "SUBMIT", "QUEUE_ERROR",
	"VERSION", "GET_CAP", "SET_CLIENT_CAP", "GEM_CLOSE", "PRIME_HANDLE_TO_FD",
	"PRIME_FD_TO_HANDLE",
	"SYNCOBJ_CREATE", "SYNCOBJ_DESTROY", "SYNCOBJ_HANDLE_TO_FD", "SYNCOBJ_FD_TO_HANDLE",
	"SYNCOBJ_TRANSFER", "SYNCOBJ_WAIT", "SYNCOBJ_TIMELINE_WAIT", "SYNCOBJ_EVENTFD",
	"SYNCOBJ_RESET", "SYNCOBJ_SIGNAL", "SYNCOBJ_TIMELINE_SIGNAL", "SYNCOBJ_QUERY",
	"GET_UNIQUE", "GET_MAGIC", "AUTH_MAGIC", "GET_CLIENT", "GET_STATS",
	"SET_VERSION", "GEM_FLINK", "GEM_OPEN", "SET_MASTER", "DROP_MASTER",
	"other core ioctls", "random ioctl numbers",
	"mmap",
};

#define FZ_NERR		136	/* errno 0..134, then "other" */
#define FZ_NVIOL	6

/* Shared by every fuzzing process (MAP_SHARED). */
struct fz_stats {
	uint64_t hist[OP_COUNT][FZ_NERR];
	uint64_t op_ns[OP_COUNT];	/* time spent in each kind of call */
	int32_t cur_op[FZ_PROCS];	/* what each process is in now, or -1 */
	int64_t cur_since[FZ_PROCS];
	uint64_t cur_iter[FZ_PROCS];
	uint64_t iters, ioctls, packets, jobs, job_packets, reopens, hang_waits;
	uint64_t capped;		/* processes the wall-clock cap stopped */
	uint64_t violations;
	char violation[FZ_NVIOL][200];	/* the first ones, verbatim */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *s = getenv(name);

	return s && *s ? strtoull(s, NULL, 0) : def;
}

/* Call GET_UNIQUE, GET_MAGIC and huge syncobj counts (needs the driver's filter). */
#define FZ_LEGACY_DEFAULT	1
static bool fz_legacy(void)
{
	return env_u64("SPYRE_FUZZ_LEGACY", FZ_LEGACY_DEFAULT) != 0;
}

static const char *errname(int e)
{
	static char buf[24];
	const char *n;

	if (!e)
		return "OK";
	n = e < FZ_NERR - 1 ? strerrorname_np(e) : NULL;
	if (n)
		return n;
	snprintf(buf, sizeof(buf), "errno%d", e);
	return buf;
}

static void fz_record(struct fz_stats *st, int op, int err)
{
	int b = err >= 0 && err < FZ_NERR - 1 ? err : FZ_NERR - 1;

	__atomic_fetch_add(&st->hist[op][b], 1, __ATOMIC_RELAXED);
	if (op < OP_MMAP)
		__atomic_fetch_add(&st->ioctls, 1, __ATOMIC_RELAXED);
}

static void fz_violation(struct fz_stats *st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void fz_violation(struct fz_stats *st, const char *fmt, ...)
{
	uint64_t i = __atomic_fetch_add(&st->violations, 1, __ATOMIC_RELAXED);
	va_list ap;

	if (i >= FZ_NVIOL)
		return;
	va_start(ap, fmt);
	vsnprintf(st->violation[i], sizeof(st->violation[i]), fmt, ap);
	va_end(ap);
}

static void fz_report(const char *what, const struct fz_stats *st)
{
	uint64_t tot[FZ_NERR] = { 0 };
	char line[2048];
	int op, e, len;

	for (op = 0; op < OP_COUNT; op++)
		for (e = 0; e < FZ_NERR; e++)
			tot[e] += st->hist[op][e];
	/* Whole histogram, most frequent first. */
	for (len = 0;;) {
		uint64_t best = 0;
		int be = -1;

		for (e = 0; e < FZ_NERR; e++)
			if (tot[e] > best) {
				best = tot[e];
				be = e;
			}
		if (be < 0 || len > (int)sizeof(line) - 64)
			break;
		len += snprintf(line + len, sizeof(line) - len, "%s%s %llu", len ? ", " : "",
				be == FZ_NERR - 1 ? "other" : errname(be), (unsigned long long)best);
		tot[be] = 0;
	}
	spyre_diag("%s: errno histogram: %s", what, len ? line : "(nothing)");
	for (op = 0; op < OP_COUNT; op++) {
		uint64_t n = 0;

		for (e = 0; e < FZ_NERR; e++)
			n += st->hist[op][e];
		if (!n)
			continue;
		len = snprintf(line, sizeof(line), "%s: %s %llu (%.1f s):", what, fz_op_name[op],
			       (unsigned long long)n, st->op_ns[op] / 1e9);
		for (e = 0; e < FZ_NERR && len < (int)sizeof(line) - 64; e++)
			if (st->hist[op][e])
				len += snprintf(line + len, sizeof(line) - len, " %s %llu",
						e == FZ_NERR - 1 ? "other" : errname(e),
						(unsigned long long)st->hist[op][e]);
		spyre_diag("%s", line);
	}
}

/* ---- the cards, and what must come back to its starting value --------------- */

static long fz_sysfs(int card, const char *attr)
{
	char pci[32], path[PATH_MAX], buf[64];

	if (card_pci(card, pci, sizeof(pci)))
		return -1;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", pci, attr);
	return read_text(path, buf, sizeof(buf)) ? -1 : strtol(buf, NULL, 0);
}

/* host -> device -> host through two COPYs on @card, checked byte for byte */
static int fz_round_trip(int card, uint64_t size, unsigned int seed)
{
	uint32_t q;
	int fd, ret;

	fd = spyre_open(card);
	if (fd < 0)
		return -errno;
	ret = squeue_create(fd, DRM_SPYRE_PRIO_NORMAL, &q);
	ret = ret ?: scopy_round_trip(fd, q, size, seed);
	close(fd);
	return ret;
}

/*
 * The checks after every storm: a normal job works on every card, every
 * counter and listing is back where it started, the kernel is not tainted
 * anew (a WARN or an oops taints it), and no call broke the contract.
 */
static void fz_check_after(struct __test_metadata *_metadata, const struct spyre_snap *start,
			   const struct fz_stats *st)
{
	struct spyre_snap end;
	int i;

	for (i = 0; i < (int)st->violations && i < FZ_NVIOL; i++)
		TH_LOG("%s", st->violation[i]);
	EXPECT_EQ(0, st->violations);
	for (i = 0; i < start->ncards; i++)
		EXPECT_EQ(0, fz_round_trip(i, 1 * MiB, 77 + i)) TH_LOG("card %d: normal COPY job", i);
	spyre_snap_settle(&end, start, 20);
	ASSERT_EQ(start->ncards, end.ncards);
	EXPECT_EQ(start->tainted, end.tainted)
		TH_LOG("kernel taint %#lx -> %#lx: see the console for the splat",
		       start->tainted, end.tainted);
	for (i = 0; i < start->ncards; i++) {
		EXPECT_EQ(start->c[i].mem_used, end.c[i].mem_used) TH_LOG("card %d mem_used", i);
		EXPECT_EQ(start->c[i].host_used, end.c[i].host_used)
			TH_LOG("card %d host_mem_used", i);
		EXPECT_STREQ(start->c[i].contexts, end.c[i].contexts)
			TH_LOG("card %d debugfs contexts", i);
		EXPECT_STREQ(start->c[i].bos, end.c[i].bos) TH_LOG("card %d debugfs bos", i);
	}
	spyre_diag("after: normal COPY job ok on %d card(s); mem_used, host_mem_used, contexts, bos "
		   "and taint: %s", start->ncards,
		   spyre_snap_same(&end, start) ? "back at their starting values" :
		   spyre_snap_diff(start, &end));
}

/* ---- one fuzzing process --------------------------------------------------- */

#define FZ_FILES	3
#define FZ_BOS		24
#define FZ_QS		6
#define FZ_SYNCS	8
#define FZ_FREED	16
#define FZ_FDS		6
#define FZ_NAMES	8
#define FZ_HOST_BUDGET	(16 * MiB)	/* pinned host memory per file */

/* The scratch area: ioctl arguments and the arrays they point to. */
#define SC_ARG		0		/* the ioctl argument (4 KiB) */
#define SC_PKT		(4 << 10)	/* packets: 257 x 64 bytes */
#define SC_HND		(24 << 10)	/* handles: 4097 x 4 bytes */
#define SC_PTS		(44 << 10)	/* points: 4097 x 8 bytes */
#define SC_SYN		(84 << 10)	/* drm_spyre_sync: 65 x 16 bytes */
#define SC_OUT		(88 << 10)	/* what ioctls write back: strings, points */
#define SC_SIZE		(160 << 10)	/* then one PROT_NONE page, one read-only page */

struct fz_bo {
	uint32_t handle, flags;
	uint64_t va, size, mmap_offset;
	void *map;
};

struct fz_sync {
	uint32_t handle;
	uint64_t point;		/* last timeline point submitted */
};

struct fz_file {
	int fd, card;
	struct fz_bo bo[FZ_BOS];
	int nbo;
	struct {
		uint32_t handle;
		uint64_t va, size;
	} freed[FZ_FREED];
	int nfreed, freed_next;
	uint32_t q[FZ_QS];
	int nq;
	uint32_t dead_q;
	struct fz_sync sync[FZ_SYNCS];
	int nsync;
	uint32_t dead_sync;
	uint64_t host_bytes;
	/* the relu program, its arguments, record, tensors, and a garbage image */
	bool prog;
	struct fz_bo img, args, rec, x, y, junk;
	unsigned int since_wait;
	struct fz_sync last_out;
};

struct fz {
	uint64_t rng;
	int id;
	struct fz_stats *st;
	bool legacy, failslab;
	int ncards;
	uint64_t mem[FZ_MAX_CARDS];
	struct fz_file f[FZ_FILES];
	uint8_t *sc, *guard, *ro;
	int fds[FZ_FDS];	/* dma-buf and sync-file fds we got back */
	int nfds;
	int efd;		/* an eventfd */
	uint32_t names[FZ_NAMES];	/* GEM_FLINK names */
	int nnames;
	int hang_budget;	/* WAIT packets that may block until the job times out */
	void *relu;
	size_t relu_size;
};

/* splitmix64 */
static uint64_t rnd(struct fz *z)
{
	uint64_t x = (z->rng += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint32_t rn(struct fz *z, uint32_t n)
{
	return n ? (uint32_t)(rnd(z) % n) : 0;
}

static uint64_t fz_u64(struct fz *z)
{
	static const uint64_t v[] = {
		0, 1, 2, 7, 8, 64, 127, 128, 129, 255, 4095, 4096, 4097, 0x7fff, 0xffff, 0x10000,
		1 << 20, (1 << 20) + 128, 1 << 21, 0x7fffffff, 0x80000000, 0xffffffff,
		0x100000000ull, (1ull << 37) - 128, 1ull << 37, 1ull << 40, (1ull << 40) + 128,
		0x7fffffffffffffffull, 0x8000000000000000ull, 0xffffffffffff0000ull, ~0ull,
	};

	switch (rn(z, 3)) {
	case 0:
		return rnd(z);
	case 1:
		return rnd(z) & ((1ull << rn(z, 64)) - 1);
	default:
		return v[rn(z, sizeof(v) / sizeof(v[0]))];
	}
}

static uint32_t fz_u32(struct fz *z)
{
	static const uint32_t v[] = { 0, 1, 2, 3, 4, 63, 64, 65, 255, 256, 257, 1023, 1024,
				      1025, 4096, 4097, 0xffff, 0x10000, 0x7fffffff,
				      0x80000000, 0xfffffffe, 0xffffffff };

	return rn(z, 2) ? (uint32_t)rnd(z) : v[rn(z, sizeof(v) / sizeof(v[0]))];
}

/* A count for an array of at most @max: 0, 1, max, max + 1, 0xffffffff, ... */
static uint32_t fz_count(struct fz *z, uint32_t max)
{
	switch (rn(z, 10)) {
	case 0:
		return 0;
	case 1:
		return max;
	case 2:
		return max + 1;
	case 3:
		return rn(z, 2) ? 0xffffffffu : 0x80000000u;
	case 4:
		return fz_u32(z);
	default:
		return 1 + rn(z, rn(z, 4) ? 4 : max);
	}
}

/* A user address that must not work: the kernel has to say EFAULT (or fail earlier). */
static uint64_t fz_bad_ptr(struct fz *z, size_t len)
{
	switch (rn(z, 10)) {
	case 0:
		return 0;
	case 1:
		return 8;
	case 2:
		return 0x1000 + 8 * rn(z, 0x1c00);		/* below mmap_min_addr */
	case 3:
		return 0xffff888000000000ull + 4096 * rn(z, 4);	/* kernel direct map */
	case 4:
		return 0xffffffff81000000ull;			/* kernel text */
	case 5:
		return 0x8000000000000000ull;			/* not canonical */
	case 6:
		return ~0ull - rn(z, 64);
	case 7:
		return (uintptr_t)z->guard + 8 * rn(z, 512);	/* PROT_NONE */
	case 8:
		return (uintptr_t)z->guard - (len > 1 ? 1 + rn(z, len - 1) : 0); /* straddles */
	default:
		return 0x7ffffffff000ull - 4 * rn(z, 2);	/* the end of user space */
	}
}

/* A user pointer to @len bytes at scratch offset @off: usually that, sometimes bad. */
static uint64_t fz_ptr(struct fz *z, size_t off, size_t len)
{
	if (rn(z, 100) < 12)
		return fz_bad_ptr(z, len);
	if (rn(z, 40) == 0)
		return (uintptr_t)z->sc + off + 1 + rn(z, 3);	/* misaligned */
	return (uintptr_t)z->sc + off;
}

static struct fz_file *fz_other(struct fz *z, struct fz_file *f)
{
	struct fz_file *o = &z->f[rn(z, FZ_FILES)];

	return o == f ? &z->f[(o - z->f + 1) % FZ_FILES] : o;
}

/* A GEM handle: valid, freed, another file's, zero, small, huge */
static uint32_t fz_handle(struct fz *z, struct fz_file *f)
{
	struct fz_file *o;
	unsigned int r = rn(z, 100);

	if (r < 55 && f->nbo)
		return f->bo[rn(z, f->nbo)].handle;
	if (r < 65 && f->nfreed)
		return f->freed[rn(z, f->nfreed)].handle;
	if (r < 75) {
		o = fz_other(z, f);
		if (o->nbo)
			return o->bo[rn(z, o->nbo)].handle;
	}
	if (r < 80)
		return 0;
	if (r < 90)
		return 1 + rn(z, 64);
	return fz_u32(z);
}

static uint32_t fz_queue(struct fz *z, struct fz_file *f)
{
	unsigned int r = rn(z, 100);

	if (r < 75 && f->nq)
		return f->q[rn(z, f->nq)];
	if (r < 82)
		return f->dead_q;
	if (r < 88)
		return fz_other(z, f)->nq ? fz_other(z, f)->q[0] : 1;
	if (r < 92)
		return 0;
	if (r < 96)
		return 65;
	return fz_u32(z);
}

static struct fz_sync *fz_live_sync(struct fz *z, struct fz_file *f)
{
	return f->nsync ? &f->sync[rn(z, f->nsync)] : NULL;
}

static uint32_t fz_sync_handle(struct fz *z, struct fz_file *f)
{
	unsigned int r = rn(z, 100);

	if (r < 75 && f->nsync)
		return f->sync[rn(z, f->nsync)].handle;
	if (r < 82)
		return f->dead_sync;
	if (r < 88 && fz_other(z, f)->nsync)
		return fz_other(z, f)->sync[0].handle;
	if (r < 92)
		return 0;
	return fz_u32(z);
}

/* A device virtual address: in a BO, at its end, freed, another file's, misaligned, ... */
static uint64_t fz_va(struct fz *z, struct fz_file *f)
{
	unsigned int r = rn(z, 100);
	struct fz_file *o;
	struct fz_bo *b;

	if (r < 50 && f->nbo) {
		b = &f->bo[rn(z, f->nbo)];
		return b->va + 128 * rn(z, b->size / 128);
	}
	if (r < 58 && f->nfreed)
		return f->freed[rn(z, f->nfreed)].va;
	if (r < 64) {
		o = fz_other(z, f);
		if (o->nbo)
			return o->bo[rn(z, o->nbo)].va;
	}
	if (r < 69 && f->nbo) {
		b = &f->bo[rn(z, f->nbo)];
		return b->va + b->size;		/* one past the end */
	}
	if (r < 74 && f->nbo)
		return f->bo[rn(z, f->nbo)].va + 1 + rn(z, 127);	/* misaligned */
	if (r < 78)
		return 0;
	if (r < 82)
		return 4096 * rn(z, 256);				/* the first MiB */
	if (r < 86)
		return SPYRE_MMU_VA_SIZE - 128 * rn(z, 2);		/* the end of the VA space */
	if (r < 92)
		return fz_u64(z);
	return (rnd(z) & (SPYRE_MMU_VA_SIZE - 1)) & ~127ull;
}

static uint64_t fz_copy_size(struct fz *z)
{
	static const uint64_t v[] = { 0, 1, 127, 128, 129, 4096, 65536, 1 << 20, (1 << 20) + 64,
				      SPYRE_COPY_MAX, SPYRE_COPY_MAX + 128, ~0ull & ~127ull,
				      0x8000000000000000ull };

	return rn(z, 2) ? 128 * (1 + rn(z, 512)) : v[rn(z, sizeof(v) / sizeof(v[0]))];
}

/* One ioctl, its errno into the histogram; 0 or -errno. */
static int fz_do(struct fz *z, int op, int fd, unsigned long req, uint64_t arg)
{
	int64_t t0 = spyre_now_ns();
	int err;

	z->st->cur_since[z->id] = t0;
	__atomic_store_n(&z->st->cur_op[z->id], op, __ATOMIC_RELEASE);
	err = ioctl(fd, req, (void *)(uintptr_t)arg) ? errno : 0;
	__atomic_store_n(&z->st->cur_op[z->id], -1, __ATOMIC_RELEASE);
	__atomic_fetch_add(&z->st->op_ns[op], spyre_now_ns() - t0, __ATOMIC_RELAXED);
	fz_record(z->st, op, err);
	return -err;
}

/*
 * Run @req with the @size-byte argument @arg: usually copied into the
 * scratch area (sometimes misaligned) and copied back after the call; else
 * the argument itself is at a bad address, or only readable (the kernel
 * reads it, acts, and fails to write back), or the request number encodes
 * another size. *@clean is true when the kernel saw @arg as built and @arg
 * holds what it wrote back.
 */
static int fz_call(struct fz *z, int op, int fd, unsigned long req, void *arg, size_t size,
		   bool *clean)
{
	unsigned int r = rn(z, 100), usize;
	uint8_t *p;
	int ret;

	*clean = false;
	if (r < 5)
		return fz_do(z, op, fd, req, fz_bad_ptr(z, size));
	if (r < 7 && size <= 4096 - 8 && !mprotect(z->ro, 4096, PROT_READ | PROT_WRITE)) {
		p = z->ro + 4096 - size - 8 * rn(z, 2);
		memcpy(p, arg, size);
		mprotect(z->ro, 4096, PROT_READ);
		return fz_do(z, op, fd, req, (uintptr_t)p);
	}
	p = z->sc + SC_ARG;
	if (r < 10) {
		static const int d[] = { -8, -4, 4, 8, 64 };

		usize = rn(z, 3) ? size + d[rn(z, 5)] : rn(z, 512);
		if ((int)usize < 0)
			usize = 0;
		req = (req & ~((unsigned long)_IOC_SIZEMASK << _IOC_SIZESHIFT)) |
		      ((unsigned long)usize << _IOC_SIZESHIFT);
		memset(p, 0, 1024);
		memcpy(p, arg, size);
		return fz_do(z, op, fd, req, (uintptr_t)p);
	}
	if (r < 14)
		p += 1 + rn(z, 7);		/* misaligned */
	memcpy(p, arg, size);
	ret = fz_do(z, op, fd, req, (uintptr_t)p);
	memcpy(arg, p, size);
	*clean = true;
	return ret;
}

static void fz_keep_fd(struct fz *z, int fd)
{
	if (fd < 0)
		return;
	if (z->nfds == FZ_FDS) {
		close(z->fds[0]);
		memmove(z->fds, z->fds + 1, sizeof(z->fds[0]) * (FZ_FDS - 1));
		z->nfds--;
	}
	z->fds[z->nfds++] = fd;
}

/* An fd for an import: one we got back, the eventfd, the device, junk */
static int fz_fd(struct fz *z, struct fz_file *f)
{
	unsigned int r = rn(z, 100);

	if (r < 60 && z->nfds)
		return z->fds[rn(z, z->nfds)];
	if (r < 70)
		return z->efd;
	if (r < 78)
		return f->fd;
	if (r < 85)
		return -1;
	if (r < 92)
		return rn(z, 64);
	return (int)fz_u32(z);
}

/*
 * spyre.ko lets an accel file reach only the generic ioctls an accelerator
 * uses (VERSION, GET_CAP, GEM_CLOSE, PRIME, SYNCOBJ_*): every other one
 * fails with ENOTTY before DRM core sees it, whatever its argument.
 */
static bool fz_generic_allowed(unsigned int nr)
{
	switch (nr) {
	case _IOC_NR(DRM_IOCTL_VERSION):
	case _IOC_NR(DRM_IOCTL_GET_CAP):
	case _IOC_NR(DRM_IOCTL_GEM_CLOSE):
	case _IOC_NR(DRM_IOCTL_PRIME_HANDLE_TO_FD):
	case _IOC_NR(DRM_IOCTL_PRIME_FD_TO_HANDLE):
	case _IOC_NR(DRM_IOCTL_SYNCOBJ_CREATE):
	case _IOC_NR(DRM_IOCTL_SYNCOBJ_DESTROY):
	case _IOC_NR(DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD):
	case _IOC_NR(DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE):
	case _IOC_NR(DRM_IOCTL_SYNCOBJ_TRANSFER):
	case _IOC_NR(FZ_IOCTL_SYNCOBJ_EVENTFD):
	case _IOC_NR(DRM_IOCTL_SYNCOBJ_WAIT):
	case _IOC_NR(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT):
	case _IOC_NR(DRM_IOCTL_SYNCOBJ_RESET):
	case _IOC_NR(DRM_IOCTL_SYNCOBJ_SIGNAL):
	case _IOC_NR(DRM_IOCTL_SYNCOBJ_QUERY):
	case _IOC_NR(DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL):
		return true;
	default:
		return nr >= DRM_COMMAND_BASE && nr < DRM_COMMAND_END;
	}
}

static void fz_expect_enotty(struct fz *z, int op, unsigned long req, int ret)
{
	if (z->legacy && ret != -ENOTTY)
		fz_violation(z->st, "%s (ioctl %#lx) on an accel file: %s, want ENOTTY "
			     "(seed replay: process %d)", fz_op_name[op], req, errname(-ret), z->id);
}

/* ---- BOs ---------------------------------------------------------------------- */

static void fz_bo_forget(struct fz_file *f, int i)
{
	struct fz_bo *b = &f->bo[i];

	if (b->map)
		munmap(b->map, b->size);
	if (b->flags & DRM_SPYRE_BO_HOST)
		f->host_bytes -= b->size;
	f->freed[f->freed_next].handle = b->handle;
	f->freed[f->freed_next].va = b->va;
	f->freed[f->freed_next].size = b->size;
	f->freed_next = (f->freed_next + 1) % FZ_FREED;
	if (f->nfreed < FZ_FREED)
		f->nfreed++;
	f->bo[i] = f->bo[--f->nbo];
}

static int fz_bo_find(struct fz_file *f, uint32_t handle)
{
	int i;

	for (i = 0; i < f->nbo; i++)
		if (f->bo[i].handle == handle)
			return i;
	return -1;
}

static int fz_gem_close(struct fz *z, struct fz_file *f, uint32_t handle)
{
	struct drm_gem_close c = { .handle = handle };
	int ret, i;
	bool clean;

	if (rn(z, 12) == 0)
		c.pad = fz_u32(z);
	ret = fz_call(z, OP_GEM_CLOSE, f->fd, DRM_IOCTL_GEM_CLOSE, &c, sizeof(c), &clean);
	i = fz_bo_find(f, handle);
	if (!ret && clean && i >= 0) {
		/* The mapping outlives the handle: touch it before it goes. */
		if (f->bo[i].map && rn(z, 4) == 0)
			((volatile uint8_t *)f->bo[i].map)[0] = 1;
		fz_bo_forget(f, i);
	}
	return ret;
}

/* Track a BO this file now has a handle for (created, imported, opened by name). */
static void fz_bo_track(struct fz *z, struct fz_file *f, uint32_t handle)
{
	struct drm_spyre_bo_info i = { .handle = handle };
	struct fz_bo *b;

	if (fz_bo_find(f, handle) >= 0)
		return;
	if (fz_do(z, OP_BO_INFO, f->fd, DRM_IOCTL_SPYRE_BO_INFO, (uintptr_t)&i))
		return;
	if (f->nbo == FZ_BOS)
		fz_gem_close(z, f, f->bo[rn(z, FZ_BOS)].handle);
	if (f->nbo == FZ_BOS)
		return;
	b = &f->bo[f->nbo++];
	memset(b, 0, sizeof(*b));
	b->handle = handle;
	b->flags = i.flags;
	b->va = i.va;
	b->size = i.size;
	b->mmap_offset = i.mmap_offset;
	if (i.flags & DRM_SPYRE_BO_HOST)
		f->host_bytes += i.size;
}

static uint64_t fz_bo_size(struct fz *z, struct fz_file *f, uint32_t flags)
{
	uint64_t mem = z->mem[f->card];
	bool host = flags & DRM_SPYRE_BO_HOST;

	switch (rn(z, 48)) {
	case 0:
		return 0;
	case 1:
		return mem + 1;
	case 2:
		return mem + 4096;
	case 3:
		return ~0ull;
	case 4:
		return 1ull << 63;
	case 5:
		return SPYRE_MMU_VA_SIZE / 2;
	case 6:	/* all of a small card's memory: rarely free, cleared when it is */
		return !host && mem <= 2048 * MiB && rn(z, 4) == 0 ? mem : 4096;
	case 7:
		return 1;
	case 8:
		return 4095;
	case 9:
		return 4097;
	case 10:
		return 2 * MiB;
	case 11:
		return 2 * MiB + 4096;
	case 12:
		return host ? 4 * MiB : 8 * MiB;
	case 13:
		return host ? 256 << 10 : (rn(z, 3) ? 16 * MiB : 64 * MiB);
	case 14:	/* one page more than the CPU-visible window */
		return flags & DRM_SPYRE_BO_MAPPABLE ? SPYRE_MEM_WINDOW_SIZE + 4096 : 8192;
	default:
		return 1 + rn(z, rn(z, 4) ? 64 << 10 : 1 << 20);
	}
}

static void fz_bo_create(struct fz *z, struct fz_file *f)
{
	static const uint32_t flagv[] = { 0, 0, 0, 0, 0, DRM_SPYRE_BO_HOST, DRM_SPYRE_BO_HOST,
					  DRM_SPYRE_BO_HOST, DRM_SPYRE_BO_MAPPABLE,
					  DRM_SPYRE_BO_HOST | DRM_SPYRE_BO_MAPPABLE };
	struct drm_spyre_bo_create c = { 0 };
	struct fz_bo *b;
	bool clean;
	int ret;

	c.flags = rn(z, 20) ? flagv[rn(z, 10)] : fz_u32(z);
	c.size = fz_bo_size(z, f, c.flags);
	if ((c.flags & DRM_SPYRE_BO_HOST) && c.size < (1ull << 40) &&
	    f->host_bytes + c.size > FZ_HOST_BUDGET)
		c.size = 4096;
	if (rn(z, 30) == 0) {	/* outputs are not inputs: garbage there is ignored */
		c.handle = fz_u32(z);
		c.va = fz_u64(z);
	}
	if (f->nbo == FZ_BOS)
		fz_gem_close(z, f, f->bo[rn(z, FZ_BOS)].handle);
	ret = fz_call(z, OP_BO_CREATE, f->fd, DRM_IOCTL_SPYRE_BO_CREATE, &c, sizeof(c), &clean);
	if (ret || !clean || f->nbo == FZ_BOS)
		return;
	if (c.size > 64 * MiB) {	/* a whole card: give it back at once */
		fz_gem_close(z, f, c.handle);
		return;
	}
	b = &f->bo[f->nbo++];
	memset(b, 0, sizeof(*b));
	b->handle = c.handle;
	b->flags = c.flags;
	b->va = c.va;
	b->size = (c.size + 4095) & ~4095ull;
	b->mmap_offset = c.mmap_offset;
	if (c.flags & DRM_SPYRE_BO_HOST)
		f->host_bytes += b->size;
	if (c.mmap_offset && ((c.flags & DRM_SPYRE_BO_HOST) || rn(z, 2))) {
		b->map = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd,
			      c.mmap_offset);
		fz_record(z->st, OP_MMAP, b->map == MAP_FAILED ? errno : 0);
		if (b->map == MAP_FAILED)
			b->map = NULL;
		else
			fill_pattern(b->map, b->size < 65536 ? b->size : 65536, z->id);
	}
}

/* ---- packets -------------------------------------------------------------------- */

static void fz_pkt_launch(struct fz *z, struct fz_file *f, uint8_t *p, bool garbage)
{
	struct spyre_pkt_launch *l = (void *)p;
	uint64_t *slots;

	spyre_prep_hdr(p, SPYRE_PKT_OP_LAUNCH);
	if (!f->prog)
		return;
	if (garbage) {
		/* random bytes, or the relu image with a few bytes changed */
		if (f->junk.map) {
			uint8_t *j = f->junk.map;
			unsigned int i, n;

			if (rn(z, 2)) {
				for (i = 0; i < 1024; i++)
					j[rn(z, f->junk.size)] = rnd(z);
			} else {
				memcpy(j, z->relu, z->relu_size);
				for (i = 0, n = 1 + rn(z, 4); i < n; i++)
					j[rn(z, z->relu_size)] = rnd(z);
			}
		}
		l->program = f->junk.va;
		l->core_mask = rn(z, 4) ? 1 : (uint32_t)rnd(z);
	} else {
		if (f->img.map)
			memcpy(f->img.map, z->relu, z->relu_size);
		l->program = f->img.va;
		l->core_mask = 1u << rn(z, 2);
	}
	if (f->args.map) {
		slots = f->args.map;
		slots[0] = f->x.va;
		slots[1] = f->y.va;
	}
	l->args = f->args.va;
	l->record = rn(z, 2) ? f->rec.va : 0;
}

/* A packet the driver accepts and the device can run. */
static void fz_pkt_valid(struct fz *z, struct fz_file *f, uint8_t *p)
{
	uint64_t n, oa, ob;
	struct fz_bo *a, *b;
	int op = rn(z, 6);

	spyre_prep_hdr(p, SPYRE_PKT_OP_NOP);
	if (!f->nbo && op != SPYRE_PKT_OP_LAUNCH)
		return;
	a = f->nbo ? &f->bo[rn(z, f->nbo)] : NULL;
	b = f->nbo ? &f->bo[rn(z, f->nbo)] : NULL;
	switch (op) {
	case SPYRE_PKT_OP_COPY:
		n = a->size < b->size ? a->size : b->size;
		if (n > 256 << 10)
			n = 256 << 10;
		n = 128 * (1 + rn(z, n / 128));
		oa = 128 * rn(z, (a->size - n) / 128 + 1);
		ob = 128 * rn(z, (b->size - n) / 128 + 1);
		spyre_prep_copy_va(p, a->va + oa, b->va + ob, n);
		break;
	case SPYRE_PKT_OP_LAUNCH:
		fz_pkt_launch(z, f, p, false);
		break;
	case SPYRE_PKT_OP_SIGNAL:
	case SPYRE_PKT_OP_WAIT:
	case SPYRE_PKT_OP_TIMESTAMP:
		spyre_prep_sem(p, op, SPYRE_AS_VIRT, a->va + 8 * rn(z, a->size / 8), op == SPYRE_PKT_OP_SIGNAL ? rnd(z) : 0);
		break;
	}
}

/* Each opcode (or another byte) with its fields drawn at random. */
static void fz_pkt_fields(struct fz *z, struct fz_file *f, uint8_t *p)
{
	struct spyre_pkt_copy *c = (void *)p;
	struct spyre_pkt_launch *l = (void *)p;
	struct spyre_pkt_sem *m = (void *)p;
	uint8_t op = rn(z, 10) ? rn(z, 6) : (uint8_t)rnd(z);
	unsigned int i;

	spyre_prep_hdr(p, op);
	switch (op) {
	case SPYRE_PKT_OP_COPY:
		c->src = fz_va(z, f);
		c->dst = fz_va(z, f);
		c->size = fz_copy_size(z);
		c->src_space = rn(z, 6) ? SPYRE_AS_VIRT : rn(z, 256);
		c->dst_space = rn(z, 6) ? SPYRE_AS_VIRT : rn(z, 256);
		if (rn(z, 10) == 0)
			c->reserved[rn(z, sizeof(c->reserved))] = rnd(z);
		break;
	case SPYRE_PKT_OP_LAUNCH:
		l->program = rn(z, 3) ? fz_va(z, f) : f->img.va;
		l->args = rn(z, 3) ? fz_va(z, f) : f->args.va;
		l->core_mask = rn(z, 3) ? fz_u32(z) : 1;
		l->record = rn(z, 2) ? fz_va(z, f) : 0;
		if (rn(z, 10) == 0)
			l->reserved0 = fz_u32(z);
		if (rn(z, 10) == 0)
			l->reserved[rn(z, 4)] = fz_u32(z);
		break;
	case SPYRE_PKT_OP_SIGNAL:
	case SPYRE_PKT_OP_WAIT:
	case SPYRE_PKT_OP_TIMESTAMP:
		m->addr = fz_va(z, f) + (rn(z, 8) ? 0 : 1 + rn(z, 7));
		m->value = fz_u64(z);
		m->space = rn(z, 6) ? SPYRE_AS_VIRT : rn(z, 256);
		if (rn(z, 10) == 0)
			m->reserved[rn(z, sizeof(m->reserved))] = rnd(z);
		break;
	default:
		if (rn(z, 2))
			for (i = 16; i < 64; i++)
				p[i] = rnd(z);
		break;
	}
}

static void fz_pkt_mutate(struct fz *z, uint8_t *p)
{
	struct spyre_pkt_hdr *h = (void *)p;
	uint64_t v;

	switch (rn(z, 6)) {
	case 0:
		p[rn(z, 64)] = rnd(z);
		break;
	case 1:
		p[rn(z, 64)] ^= 1u << rn(z, 8);
		break;
	case 2:
		v = fz_u64(z);
		memcpy(p + 16 + 8 * rn(z, 6), &v, 8);
		break;
	case 3:
		h->opcode = rn(z, 8);
		break;
	case 4:
		switch (rn(z, 5)) {
		case 0:
			h->version = rn(z, 2) ? 0 : 2 + rn(z, 254);
			break;
		case 1:
			h->flags = 1u << rn(z, 16);
			break;
		case 2:
			h->ctx = 1 + rn(z, 0xffff);
			break;
		case 3:
			h->reserved = 1 + rn(z, 0xffff);
			break;
		default:
			h->seq = fz_u64(z) | 1;
			break;
		}
		break;
	default:
		p[16 + rn(z, 48)] = rnd(z);	/* a reserved byte, or a field */
		break;
	}
}

/* COPY or LAUNCH at memory that is gone or never was this file's */
static void fz_pkt_stale(struct fz *z, struct fz_file *f, uint8_t *p)
{
	struct fz_file *o = fz_other(z, f);
	uint64_t gone = f->nfreed ? f->freed[rn(z, f->nfreed)].va : 0x100000;
	uint64_t mine = f->nbo ? f->bo[rn(z, f->nbo)].va : 0x200000;
	uint64_t theirs = o->nbo ? o->bo[rn(z, o->nbo)].va : 0x300000;
	uint64_t bad = rn(z, 2) ? gone : theirs;

	if (rn(z, 2)) {
		if (rn(z, 2))
			spyre_prep_copy_va(p, bad, mine, 4096);
		else
			spyre_prep_copy_va(p, mine, bad, 4096);
	} else {
		fz_pkt_launch(z, f, p, false);
		switch (rn(z, 3)) {
		case 0:
			((struct spyre_pkt_launch *)p)->program = bad;
			break;
		case 1:
			((struct spyre_pkt_launch *)p)->args = bad;
			break;
		default:
			((struct spyre_pkt_launch *)p)->record = bad;
			break;
		}
	}
}

/*
 * A WAIT the driver would accept blocks its queue until the value arrives,
 * or until the job is declared hung (2 s, a queue reset, a strike towards
 * the context's ban). A few per process; the others wait for 0.
 */
static void fz_pkt_hang_guard(struct fz *z, uint8_t *p)
{
	struct spyre_pkt_sem *m = (void *)p;

	if (m->hdr.opcode != SPYRE_PKT_OP_WAIT || !m->value)
		return;
	if (z->hang_budget > 0 && rn(z, 8) == 0) {
		z->hang_budget--;
		__atomic_fetch_add(&z->st->hang_waits, 1, __ATOMIC_RELAXED);
		return;
	}
	m->value = 0;
}

static void fz_packet(struct fz *z, struct fz_file *f, uint8_t *p)
{
	unsigned int r = rn(z, 100), i;

	if (r < 8) {
		for (i = 0; i < 64; i++)
			p[i] = rnd(z);
		if (rn(z, 2)) {	/* a header that passes, a random body */
			p[0] = rn(z, 6);
			p[1] = SPYRE_PKT_VERSION;
			memset(p + 2, 0, 14);
		}
	} else if (r < 38) {
		fz_pkt_fields(z, f, p);
	} else if (r < 70) {
		fz_pkt_valid(z, f, p);
	} else if (r < 88) {
		fz_pkt_valid(z, f, p);
		fz_pkt_mutate(z, p);
	} else if (r < 95) {
		fz_pkt_stale(z, f, p);
	} else {
		fz_pkt_launch(z, f, p, true);
	}
	fz_pkt_hang_guard(z, p);
}

/* ---- spyre ioctls ------------------------------------------------------------------- */

static void fz_wait_out(struct fz *z, struct fz_file *f)
{
	struct drm_syncobj_timeline_wait w = { 0 };
	uint32_t h = f->last_out.handle;
	uint64_t pt = f->last_out.point;

	if (!h)
		return;
	w.handles = (uintptr_t)&h;
	w.points = (uintptr_t)&pt;
	w.count_handles = 1;
	w.timeout_nsec = spyre_now_ns() + 3000000000ll;
	fz_do(z, OP_SYNCOBJ_TIMELINE_WAIT, f->fd, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, (uintptr_t)&w);
	f->last_out.handle = 0;
	f->since_wait = 0;
}

/*
 * A packet of a well-formed job: valid, or valid in form but aimed at memory
 * that is gone, another file's, or holding a garbage program.
 */
static void fz_packet_good(struct fz *z, struct fz_file *f, uint8_t *p)
{
	unsigned int r = rn(z, 100);

	if (r < 70)
		fz_pkt_valid(z, f, p);
	else if (r < 82)
		fz_pkt_stale(z, f, p);
	else
		fz_pkt_launch(z, f, p, true);
	fz_pkt_hang_guard(z, p);
}

/*
 * Half the jobs are well formed (live queue, BOs and syncobjs, packets the
 * driver accepts) so that many reach the device; the other half draw every
 * field at random.
 */
static void fz_submit(struct fz *z, struct fz_file *f)
{
	struct drm_spyre_submit a = { 0 };
	struct drm_spyre_sync *in = (void *)(z->sc + SC_SYN);
	uint32_t *bos = (void *)(z->sc + SC_HND);
	struct fz_sync *out = NULL;
	uint32_t n, i, nb, ns;
	bool good = rn(z, 2) && f->nq, clean;
	int ret;

	if (good) {
		n = rn(z, 30) ? 1 + rn(z, rn(z, 4) ? 4 : 32) : DRM_SPYRE_MAX_JOB_PACKETS;
		for (i = 0; i < n; i++)
			fz_packet_good(z, f, z->sc + SC_PKT + 64 * i);
		a.queue_id = f->q[rn(z, f->nq)];
		a.packets = (uintptr_t)(z->sc + SC_PKT);
		a.packet_count = n;
		nb = rn(z, 2) && f->nbo ? 1 + rn(z, rn(z, 10) ? 4 : 1024) : 0;
		for (i = 0; i < nb; i++)
			bos[i] = f->bo[rn(z, f->nbo)].handle;
		a.bo_count = nb;
		a.bo_handles = (uintptr_t)bos;
		if (f->last_out.handle && rn(z, 4) == 0) {
			in[0].handle = f->last_out.handle;
			in[0].flags = 0;
			in[0].point = f->last_out.point;
			a.in_sync_count = 1;
			a.in_syncs = (uintptr_t)in;
		}
		if (rn(z, 4))
			out = fz_live_sync(z, f);
		if (out) {
			a.out_sync_handle = out->handle;
			if (rn(z, 3) == 0)
				a.out_sync_point = ++out->point;
		}
		ret = fz_do(z, OP_SUBMIT, f->fd, DRM_IOCTL_SPYRE_SUBMIT, (uintptr_t)&a);
		clean = true;
		goto done;
	}

	n = rn(z, 10) ? 1 + rn(z, rn(z, 4) ? 4 : 16) : fz_count(z, DRM_SPYRE_MAX_JOB_PACKETS);
	for (i = 0; i < n && i <= DRM_SPYRE_MAX_JOB_PACKETS; i++)
		fz_packet(z, f, z->sc + SC_PKT + 64 * i);
	a.queue_id = fz_queue(z, f);
	a.packet_count = n;
	a.packets = rn(z, 20) ? (uintptr_t)(z->sc + SC_PKT) :
		    fz_bad_ptr(z, (size_t)64 * (n < 257 ? n : 257));
	if (rn(z, 2)) {
		nb = rn(z, 8) ? 1 + rn(z, 4) : fz_count(z, 1024);
		for (i = 0; i < nb && i < 1025; i++)
			bos[i] = fz_handle(z, f);
		a.bo_count = nb;
		a.bo_handles = fz_ptr(z, SC_HND, 4 * (nb < 1025 ? nb : 1025));
	}
	if (rn(z, 3) == 0) {
		ns = rn(z, 8) ? 1 + rn(z, 3) : fz_count(z, 64);
		for (i = 0; i < ns && i < 65; i++) {
			struct fz_sync *s = fz_live_sync(z, f);

			in[i].handle = s && rn(z, 6) ? s->handle : fz_sync_handle(z, f);
			in[i].flags = rn(z, 20) ? 0 : fz_u32(z);
			in[i].point = !s || rn(z, 2) ? 0 : rn(z, 4) ? s->point : fz_u64(z);
		}
		a.in_sync_count = ns;
		a.in_syncs = fz_ptr(z, SC_SYN, 16 * (ns < 65 ? ns : 65));
	}
	switch (rn(z, 10)) {
	case 0 ... 4:
		out = fz_live_sync(z, f);
		if (out) {
			a.out_sync_handle = out->handle;
			if (rn(z, 3) == 0)
				a.out_sync_point = ++out->point;
		}
		break;
	case 5:
		a.out_sync_handle = fz_sync_handle(z, f);
		a.out_sync_point = rn(z, 2) ? 0 : fz_u64(z);
		break;
	case 6:
		a.out_sync_point = 1 + rn(z, 9);	/* a point without a syncobj */
		break;
	default:
		break;
	}
	if (rn(z, 25) == 0)
		a.flags = fz_u32(z);
	else if (rn(z, 8) == 0)
		a.flags = DRM_SPYRE_SUBMIT_QUEUE_ERROR;
	if (rn(z, 25) == 0)
		a.errors_seen = rn(z, 2) ? rn(z, 3) : fz_u64(z);
	if (rn(z, 30) == 0)
		a.job_seq = fz_u64(z);
	ret = fz_call(z, OP_SUBMIT, f->fd, DRM_IOCTL_SPYRE_SUBMIT, &a, sizeof(a), &clean);
done:
	__atomic_fetch_add(&z->st->packets, n < 257 ? n : 257, __ATOMIC_RELAXED);
	if (ret)
		return;
	__atomic_fetch_add(&z->st->jobs, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&z->st->job_packets, n, __ATOMIC_RELAXED);
	if (out && clean && a.out_sync_handle == out->handle) {
		f->last_out.handle = out->handle;
		f->last_out.point = a.out_sync_point;
	}
	/* Keep the device's backlog short: now and then wait for the last job. */
	if (++f->since_wait >= 8)
		fz_wait_out(z, f);
}

static void fz_get_param(struct fz *z, struct fz_file *f)
{
	struct drm_spyre_get_param g = { 0 };
	bool clean;

	g.param = rn(z, 4) ? rn(z, DRM_SPYRE_PARAM_COUNT + 2) : fz_u32(z);
	if (rn(z, 10) == 0)
		g.reserved = fz_u32(z);
	g.value = fz_u64(z);
	fz_call(z, OP_GET_PARAM, f->fd, DRM_IOCTL_SPYRE_GET_PARAM, &g, sizeof(g), &clean);
}

static void fz_bo_info(struct fz *z, struct fz_file *f)
{
	struct drm_spyre_bo_info i = { .handle = fz_handle(z, f) };
	bool clean;

	if (rn(z, 10) == 0)
		i.pad = fz_u64(z);
	if (rn(z, 10) == 0)
		i.flags = fz_u32(z);
	fz_call(z, OP_BO_INFO, f->fd, DRM_IOCTL_SPYRE_BO_INFO, &i, sizeof(i), &clean);
}

static void fz_bo_wait(struct fz *z, struct fz_file *f)
{
	static const int64_t tv[] = { 0, 1, 1000, 1000000, 10000000, -1, INT64_MIN };
	struct drm_spyre_bo_wait w = { .handle = fz_handle(z, f) };
	bool clean;

	w.timeout_ns = rn(z, 50) ? tv[rn(z, 7)] : INT64_MAX;	/* jobs end within 2 s */
	if (rn(z, 10) == 0)
		w.pad = fz_u32(z);
	fz_call(z, OP_BO_WAIT, f->fd, DRM_IOCTL_SPYRE_BO_WAIT, &w, sizeof(w), &clean);
}

static void fz_queue_destroy_id(struct fz *z, struct fz_file *f, uint32_t id)
{
	struct drm_spyre_queue_destroy d = { .queue_id = id };
	bool clean;
	int i;

	if (rn(z, 12) == 0)
		d.pad = fz_u32(z);
	if (fz_call(z, OP_QUEUE_DESTROY, f->fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &d, sizeof(d),
		    &clean) || !clean)
		return;
	for (i = 0; i < f->nq; i++)
		if (f->q[i] == id) {
			f->q[i] = f->q[--f->nq];
			f->dead_q = id;
			break;
		}
}

static void fz_queue_create(struct fz *z, struct fz_file *f)
{
	struct drm_spyre_queue_create c = { 0 };
	bool clean;
	int i;

	if (rn(z, 150) == 0) {
		/* Fill the file's 64 queues: the next one is -ENOSPC. */
		uint32_t ids[SPYRE_MAX_QUEUES + 1];
		int n = 0;

		for (i = 0; i <= SPYRE_MAX_QUEUES; i++) {
			c.priority = rn(z, 3);
			if (fz_do(z, OP_QUEUE_CREATE, f->fd, DRM_IOCTL_SPYRE_QUEUE_CREATE,
				  (uintptr_t)&c))
				break;
			ids[n++] = c.queue_id;
		}
		while (n)
			fz_queue_destroy_id(z, f, ids[--n]);
		return;
	}
	c.priority = rn(z, 5) ? rn(z, 4) : fz_u32(z);
	if (rn(z, 12) == 0)
		c.flags = fz_u32(z);
	if (rn(z, 12) == 0)
		c.pad = fz_u32(z);
	if (rn(z, 12) == 0)
		c.queue_id = fz_u32(z);
	if (f->nq == FZ_QS)
		fz_queue_destroy_id(z, f, f->q[rn(z, FZ_QS)]);
	if (fz_call(z, OP_QUEUE_CREATE, f->fd, DRM_IOCTL_SPYRE_QUEUE_CREATE, &c, sizeof(c),
		    &clean) || !clean)
		return;
	if (f->nq < FZ_QS)
		f->q[f->nq++] = c.queue_id;
}

static void fz_queue_error(struct fz *z, struct fz_file *f)
{
	struct drm_spyre_queue_error e = { .queue_id = fz_queue(z, f) };
	bool clean;

	if (rn(z, 10) == 0)
		e.pad = fz_u32(z);
	fz_call(z, OP_QUEUE_ERROR, f->fd, DRM_IOCTL_SPYRE_QUEUE_ERROR, &e, sizeof(e), &clean);
}

/* ---- generic DRM ioctls ------------------------------------------------------------- */

static void fz_version(struct fz *z, struct fz_file *f)
{
	struct drm_version v = { 0 };
	bool clean;

	v.name_len = rn(z, 3) ? rn(z, 64) : fz_u64(z) & 0xffffffff;
	v.date_len = rn(z, 3) ? rn(z, 64) : fz_u64(z) & 0xffffffff;
	v.desc_len = rn(z, 3) ? rn(z, 64) : fz_u64(z) & 0xffffffff;
	v.name = (void *)(uintptr_t)fz_ptr(z, SC_OUT, 64);
	v.date = (void *)(uintptr_t)fz_ptr(z, SC_OUT + 4096, 64);
	v.desc = (void *)(uintptr_t)fz_ptr(z, SC_OUT + 8192, 64);
	fz_call(z, OP_VERSION, f->fd, DRM_IOCTL_VERSION, &v, sizeof(v), &clean);
}

static void fz_get_cap(struct fz *z, struct fz_file *f)
{
	struct drm_get_cap c = { .capability = rn(z, 4) ? rn(z, 0x18) : fz_u64(z) };
	bool clean;

	fz_call(z, OP_GET_CAP, f->fd, DRM_IOCTL_GET_CAP, &c, sizeof(c), &clean);
}

static void fz_set_client_cap(struct fz *z, struct fz_file *f)
{
	struct drm_set_client_cap c = { .capability = rn(z, 4) ? rn(z, 8) : fz_u64(z),
					.value = rn(z, 4) ? rn(z, 3) : fz_u64(z) };
	bool clean;

	fz_expect_enotty(z, OP_SET_CLIENT_CAP, DRM_IOCTL_SET_CLIENT_CAP,
			 fz_call(z, OP_SET_CLIENT_CAP, f->fd, DRM_IOCTL_SET_CLIENT_CAP, &c, sizeof(c),
				 &clean));
}

static void fz_prime_to_fd(struct fz *z, struct fz_file *f)
{
	static const uint32_t fl[] = { 0, DRM_CLOEXEC, DRM_RDWR, DRM_CLOEXEC | DRM_RDWR };
	struct drm_prime_handle p = { .handle = fz_handle(z, f) };
	bool clean;

	p.flags = rn(z, 10) ? fl[rn(z, 4)] : fz_u32(z);
	p.fd = rn(z, 10) ? -1 : (int)fz_u32(z);
	if (!fz_call(z, OP_PRIME_TO_FD, f->fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p, sizeof(p),
		     &clean) && clean)
		fz_keep_fd(z, p.fd);
}

static void fz_prime_to_handle(struct fz *z, struct fz_file *f)
{
	struct drm_prime_handle p = { .fd = fz_fd(z, f) };
	bool clean;

	if (rn(z, 10) == 0)
		p.flags = fz_u32(z);
	if (rn(z, 10) == 0)
		p.handle = fz_u32(z);
	if (!fz_call(z, OP_PRIME_TO_HANDLE, f->fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &p, sizeof(p),
		     &clean) && clean)
		fz_bo_track(z, f, p.handle);
}

static void fz_syncobj_create(struct fz *z, struct fz_file *f)
{
	struct drm_syncobj_create c = { 0 };
	bool clean;

	c.flags = rn(z, 3) ? 0 : rn(z, 3) ? DRM_SYNCOBJ_CREATE_SIGNALED : fz_u32(z);
	if (f->nsync == FZ_SYNCS) {
		struct drm_syncobj_destroy d = { .handle = f->sync[0].handle };

		fz_do(z, OP_SYNCOBJ_DESTROY, f->fd, DRM_IOCTL_SYNCOBJ_DESTROY, (uintptr_t)&d);
		f->dead_sync = f->sync[0].handle;
		f->sync[0] = f->sync[--f->nsync];
	}
	if (fz_call(z, OP_SYNCOBJ_CREATE, f->fd, DRM_IOCTL_SYNCOBJ_CREATE, &c, sizeof(c), &clean) ||
	    !clean)
		return;
	f->sync[f->nsync].handle = c.handle;
	f->sync[f->nsync++].point = 0;
}

static void fz_syncobj_destroy(struct fz *z, struct fz_file *f)
{
	struct drm_syncobj_destroy d = { .handle = fz_sync_handle(z, f) };
	bool clean;
	int i;

	if (rn(z, 10) == 0)
		d.pad = fz_u32(z);
	if (fz_call(z, OP_SYNCOBJ_DESTROY, f->fd, DRM_IOCTL_SYNCOBJ_DESTROY, &d, sizeof(d),
		    &clean) || !clean)
		return;
	for (i = 0; i < f->nsync; i++)
		if (f->sync[i].handle == d.handle) {
			if (f->last_out.handle == d.handle)
				f->last_out.handle = 0;
			f->sync[i] = f->sync[--f->nsync];
			f->dead_sync = d.handle;
			break;
		}
}

static void fz_syncobj_to_fd(struct fz *z, struct fz_file *f)
{
	struct drm_syncobj_handle h = { .handle = fz_sync_handle(z, f) };
	bool clean;

	h.flags = rn(z, 3) ? 0 : rn(z, 3) ? DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE :
				  fz_u32(z);
	h.fd = rn(z, 10) ? -1 : (int)fz_u32(z);
	if (rn(z, 10) == 0)
		h.pad = fz_u32(z);
	if (!fz_call(z, OP_SYNCOBJ_TO_FD, f->fd, DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &h, sizeof(h),
		     &clean) && clean)
		fz_keep_fd(z, h.fd);
}

static void fz_syncobj_to_handle(struct fz *z, struct fz_file *f)
{
	struct drm_syncobj_handle h = { .fd = fz_fd(z, f) };
	bool clean;

	h.flags = rn(z, 3) ? 0 : rn(z, 3) ? DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE :
				  fz_u32(z);
	if (h.flags == DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE || rn(z, 8) == 0)
		h.handle = fz_sync_handle(z, f);
	if (rn(z, 10) == 0)
		h.pad = fz_u32(z);
	if (fz_call(z, OP_SYNCOBJ_TO_HANDLE, f->fd, DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE, &h, sizeof(h),
		    &clean) || !clean || h.flags || f->nsync == FZ_SYNCS)
		return;
	f->sync[f->nsync].handle = h.handle;	/* a new handle for an imported syncobj */
	f->sync[f->nsync++].point = 0;
}

static void fz_syncobj_transfer(struct fz *z, struct fz_file *f)
{
	struct drm_syncobj_transfer t = { .src_handle = fz_sync_handle(z, f),
					  .dst_handle = fz_sync_handle(z, f) };
	bool clean;

	t.src_point = rn(z, 2) ? 0 : rn(z, 3) ? 1 + rn(z, 4) : fz_u64(z);
	t.dst_point = rn(z, 2) ? 0 : rn(z, 3) ? 1 + rn(z, 8) : fz_u64(z);
	/* WAIT_FOR_SUBMIT would wait 5 s for a point that never comes */
	t.flags = rn(z, 10) ? 0 : fz_u32(z) & ~DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT;
	if (rn(z, 10) == 0)
		t.pad = fz_u32(z);
	fz_call(z, OP_SYNCOBJ_TRANSFER, f->fd, DRM_IOCTL_SYNCOBJ_TRANSFER, &t, sizeof(t), &clean);
}

/*
 * A syncobj array count. Above FZ_MAX_SYNCOBJ_COUNT the driver must refuse
 * it (EINVAL) before DRM core allocates count entries; without that filter
 * a count above 64 Ki makes the page allocator warn, so such counts wait for
 * SPYRE_FUZZ_LEGACY.
 */
static uint32_t fz_sync_count(struct fz *z, bool *huge)
{
	uint32_t n = rn(z, 4) ? 1 + rn(z, 4) : fz_count(z, FZ_MAX_SYNCOBJ_COUNT);

	if (n > 65536 && !z->legacy)
		n = FZ_MAX_SYNCOBJ_COUNT + 1;
	*huge = n > FZ_MAX_SYNCOBJ_COUNT;
	return n;
}

/* Handles (and points) arrays of @n entries in the scratch area. */
static void fz_sync_arrays(struct fz *z, struct fz_file *f, uint32_t n)
{
	uint32_t *h = (void *)(z->sc + SC_HND);
	uint64_t *p = (void *)(z->sc + SC_PTS);
	uint32_t i;

	for (i = 0; i < n && i <= FZ_MAX_SYNCOBJ_COUNT; i++) {
		struct fz_sync *s = fz_live_sync(z, f);

		h[i] = s && rn(z, 5) ? s->handle : fz_sync_handle(z, f);
		p[i] = !s || rn(z, 2) ? 0 : rn(z, 3) ? s->point : fz_u64(z);
	}
}

/* The driver's answer to a count it must refuse */
static void fz_expect_huge(struct fz *z, int op, bool clean, int ret, uint32_t n)
{
	if (z->legacy && clean && ret != -EINVAL)
		fz_violation(z->st, "%s with %u handles: %s, want EINVAL (seed replay: process %d)",
			     fz_op_name[op], n, errname(-ret), z->id);
}

static int64_t fz_deadline(struct fz *z, uint32_t flags)
{
	switch (rn(z, 8)) {
	case 0:
		return 0;
	case 1:
		return -1 - rn(z, 1000);
	case 2:	/* forever, unless it may wait for a point nobody submits: jobs end in 2 s */
		return flags & (DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT |
				DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE) ? spyre_now_ns() : INT64_MAX;
	default:
		return spyre_now_ns() + rn(z, 20000000);
	}
}

static void fz_syncobj_wait(struct fz *z, struct fz_file *f, bool timeline)
{
	static const uint32_t fl[] = { 0, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL,
				       DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
				       DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE,
				       DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL |
				       DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT };
	int op = timeline ? OP_SYNCOBJ_TIMELINE_WAIT : OP_SYNCOBJ_WAIT;
	uint32_t flags = rn(z, 12) ? fl[rn(z, 5)] : fz_u32(z) & ~7u;
	bool huge, clean;
	uint32_t n = fz_sync_count(z, &huge);
	uint64_t handles = fz_ptr(z, SC_HND, 4 * (n < 4097 ? n : 4097));
	int ret;

	fz_sync_arrays(z, f, n);
	if (timeline) {
		struct drm_syncobj_timeline_wait w = { .handles = handles, .count_handles = n,
						       .flags = flags };

		w.points = fz_ptr(z, SC_PTS, 8 * (n < 4097 ? n : 4097));
		w.timeout_nsec = fz_deadline(z, flags);
		if (rn(z, 12) == 0)
			w.first_signaled = fz_u32(z);
		ret = fz_call(z, op, f->fd, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &w, sizeof(w), &clean);
		clean = clean && handles == (uintptr_t)(z->sc + SC_HND);
	} else {
		struct drm_syncobj_wait w = { .handles = handles, .count_handles = n,
					      .flags = flags };

		w.timeout_nsec = fz_deadline(z, flags);
		if (rn(z, 12) == 0)
			w.pad = fz_u32(z);
		ret = fz_call(z, op, f->fd, DRM_IOCTL_SYNCOBJ_WAIT, &w, sizeof(w), &clean);
	}
	if (huge)
		fz_expect_huge(z, op, clean, ret, n);
}

static void fz_syncobj_eventfd(struct fz *z, struct fz_file *f)
{
	struct fz_syncobj_eventfd e = { .handle = fz_sync_handle(z, f) };
	bool clean;

	e.flags = rn(z, 3) ? 0 : rn(z, 2) ? DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE : fz_u32(z);
	e.point = rn(z, 2) ? 0 : fz_u64(z);
	e.fd = rn(z, 4) ? z->efd : fz_fd(z, f);
	if (rn(z, 10) == 0)
		e.pad = fz_u32(z);
	fz_call(z, OP_SYNCOBJ_EVENTFD, f->fd, FZ_IOCTL_SYNCOBJ_EVENTFD, &e, sizeof(e), &clean);
}

static void fz_syncobj_array(struct fz *z, struct fz_file *f, int op)
{
	bool huge, clean;
	uint32_t n = fz_sync_count(z, &huge);
	int ret;

	fz_sync_arrays(z, f, n);
	if (op == OP_SYNCOBJ_RESET || op == OP_SYNCOBJ_SIGNAL) {
		struct drm_syncobj_array a = { .count_handles = n };

		a.handles = fz_ptr(z, SC_HND, 4 * (n < 4097 ? n : 4097));
		if (rn(z, 10) == 0)
			a.pad = fz_u32(z);
		ret = fz_call(z, op, f->fd, op == OP_SYNCOBJ_RESET ? DRM_IOCTL_SYNCOBJ_RESET :
				 DRM_IOCTL_SYNCOBJ_SIGNAL, &a, sizeof(a), &clean);
		clean = clean && a.handles == (uintptr_t)(z->sc + SC_HND);
	} else {
		struct drm_syncobj_timeline_array a = { .count_handles = n };
		/* QUERY writes the points back: only to the scratch area */
		size_t pts = op == OP_SYNCOBJ_QUERY ? SC_OUT : SC_PTS;

		a.handles = fz_ptr(z, SC_HND, 4 * (n < 4097 ? n : 4097));
		a.points = fz_ptr(z, pts, 8 * (n < 4097 ? n : 4097));
		if (op == OP_SYNCOBJ_QUERY)
			a.flags = rn(z, 3) ? 0 : rn(z, 2) ? DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED :
				  fz_u32(z);
		else
			a.flags = rn(z, 10) ? 0 : fz_u32(z);
		ret = fz_call(z, op, f->fd, op == OP_SYNCOBJ_QUERY ? DRM_IOCTL_SYNCOBJ_QUERY :
				 DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &a, sizeof(a), &clean);
		clean = clean && a.handles == (uintptr_t)(z->sc + SC_HND) && !a.flags;
	}
	if (huge)
		fz_expect_huge(z, op, clean, ret, n);
}

/* A filtered ioctl: its argument built, its answer checked. */
static void fz_filtered(struct fz *z, struct fz_file *f, int op, unsigned long req, void *arg,
			size_t size)
{
	bool clean;

	fz_expect_enotty(z, op, req, fz_call(z, op, f->fd, req, arg, size, &clean));
}

/*
 * The legacy and master ioctls. Accel files have no drm_master: in Linux
 * 6.12, GET_UNIQUE and GET_MAGIC dereference it in DRM core (NULL-pointer
 * oopses) unless the driver stops them first, so those two are made only
 * with SPYRE_FUZZ_LEGACY (the default).
 */
static void fz_legacy_ioctl(struct fz *z, struct fz_file *f)
{
	uint8_t buf[256];

	memset(buf, 0, sizeof(buf));
	switch (rn(z, 10)) {
	case 0: {
		struct drm_unique *u = (void *)buf;

		if (!z->legacy)
			break;
		u->unique_len = rn(z, 2) ? rn(z, 64) : fz_u64(z) & 0xffffffff;
		u->unique = (void *)(uintptr_t)fz_ptr(z, SC_OUT, 64);
		fz_filtered(z, f, OP_GET_UNIQUE, DRM_IOCTL_GET_UNIQUE, u, sizeof(*u));
		break;
	}
	case 1:
		if (z->legacy)
			fz_filtered(z, f, OP_GET_MAGIC, DRM_IOCTL_GET_MAGIC, buf,
				    sizeof(struct drm_auth));
		break;
	case 2: {
		struct drm_auth *a = (void *)buf;

		a->magic = fz_u32(z);
		fz_filtered(z, f, OP_AUTH_MAGIC, DRM_IOCTL_AUTH_MAGIC, a, sizeof(*a));
		break;
	}
	case 3: {
		struct drm_client *c = (void *)buf;

		c->idx = rn(z, 2) ? rn(z, 8) : (int)fz_u32(z);
		fz_filtered(z, f, OP_GET_CLIENT, DRM_IOCTL_GET_CLIENT, c, sizeof(*c));
		break;
	}
	case 4:
		fz_filtered(z, f, OP_GET_STATS, DRM_IOCTL_GET_STATS, buf, sizeof(struct drm_stats));
		break;
	case 5: {
		struct drm_set_version *v = (void *)buf;

		v->drm_di_major = rn(z, 2) ? 1 : (int)fz_u32(z);
		v->drm_di_minor = rn(z, 2) ? 4 : (int)fz_u32(z);
		v->drm_dd_major = rn(z, 2) ? -1 : (int)fz_u32(z);
		v->drm_dd_minor = rn(z, 2) ? -1 : (int)fz_u32(z);
		fz_filtered(z, f, OP_SET_VERSION, DRM_IOCTL_SET_VERSION, v, sizeof(*v));
		break;
	}
	case 6: {
		struct drm_gem_flink *fl = (void *)buf;
		bool clean;
		int ret;

		fl->handle = fz_handle(z, f);
		ret = fz_call(z, OP_GEM_FLINK, f->fd, DRM_IOCTL_GEM_FLINK, fl, sizeof(*fl), &clean);
		fz_expect_enotty(z, OP_GEM_FLINK, DRM_IOCTL_GEM_FLINK, ret);
		if (!ret && clean)
			z->names[z->nnames++ % FZ_NAMES] = fl->name;
		break;
	}
	case 7: {
		struct drm_gem_open *o = (void *)buf;
		bool clean;
		int ret;

		o->name = z->nnames && rn(z, 4) ? z->names[rn(z, z->nnames < FZ_NAMES ?
						   z->nnames : FZ_NAMES)] : fz_u32(z);
		ret = fz_call(z, OP_GEM_OPEN, f->fd, DRM_IOCTL_GEM_OPEN, o, sizeof(*o), &clean);
		fz_expect_enotty(z, OP_GEM_OPEN, DRM_IOCTL_GEM_OPEN, ret);
		if (!ret && clean)
			fz_bo_track(z, f, o->handle);
		break;
	}
	case 8:
		fz_expect_enotty(z, OP_SET_MASTER, DRM_IOCTL_SET_MASTER,
				 fz_do(z, OP_SET_MASTER, f->fd, DRM_IOCTL_SET_MASTER, 0));
		break;
	default:
		fz_expect_enotty(z, OP_DROP_MASTER, DRM_IOCTL_DROP_MASTER,
				 fz_do(z, OP_DROP_MASTER, f->fd, DRM_IOCTL_DROP_MASTER, 0));
		break;
	}
}

/* The rest of DRM core's table: mode setting, vblank, leases, no-ops, removed ones. */
static void fz_core_other(struct fz *z, struct fz_file *f)
{
	static const unsigned long req[] = {
		DRM_IOCTL_SET_UNIQUE, DRM_IOCTL_BLOCK, DRM_IOCTL_UNBLOCK, DRM_IOCTL_CONTROL,
		DRM_IOCTL_ADD_MAP, DRM_IOCTL_ADD_BUFS, DRM_IOCTL_IRQ_BUSID, DRM_IOCTL_GET_MAP,
		DRM_IOCTL_ADD_DRAW, DRM_IOCTL_RM_DRAW, DRM_IOCTL_FINISH, DRM_IOCTL_WAIT_VBLANK,
		DRM_IOCTL_UPDATE_DRAW, DRM_IOCTL_MODESET_CTL, DRM_IOCTL_CRTC_GET_SEQUENCE,
		DRM_IOCTL_CRTC_QUEUE_SEQUENCE, DRM_IOCTL_MODE_GETRESOURCES, DRM_IOCTL_MODE_GETCRTC,
		DRM_IOCTL_MODE_SETCRTC, DRM_IOCTL_MODE_CURSOR, DRM_IOCTL_MODE_GETGAMMA,
		DRM_IOCTL_MODE_SETGAMMA, DRM_IOCTL_MODE_GETENCODER, DRM_IOCTL_MODE_GETCONNECTOR,
		DRM_IOCTL_MODE_GETPROPERTY, DRM_IOCTL_MODE_SETPROPERTY, DRM_IOCTL_MODE_GETPROPBLOB,
		DRM_IOCTL_MODE_GETFB, DRM_IOCTL_MODE_ADDFB, DRM_IOCTL_MODE_RMFB,
		DRM_IOCTL_MODE_PAGE_FLIP, DRM_IOCTL_MODE_DIRTYFB, DRM_IOCTL_MODE_CREATE_DUMB,
		DRM_IOCTL_MODE_MAP_DUMB, DRM_IOCTL_MODE_DESTROY_DUMB,
		DRM_IOCTL_MODE_GETPLANERESOURCES, DRM_IOCTL_MODE_GETPLANE, DRM_IOCTL_MODE_SETPLANE,
		DRM_IOCTL_MODE_ADDFB2, DRM_IOCTL_MODE_OBJ_GETPROPERTIES,
		DRM_IOCTL_MODE_OBJ_SETPROPERTY, DRM_IOCTL_MODE_CURSOR2, DRM_IOCTL_MODE_ATOMIC,
		DRM_IOCTL_MODE_CREATEPROPBLOB, DRM_IOCTL_MODE_DESTROYPROPBLOB,
		DRM_IOCTL_MODE_CREATE_LEASE, DRM_IOCTL_MODE_LIST_LESSEES, DRM_IOCTL_MODE_GET_LEASE,
		DRM_IOCTL_MODE_REVOKE_LEASE,
	};
	unsigned long r = req[rn(z, sizeof(req) / sizeof(req[0]))];
	uint8_t buf[512];
	unsigned int i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = rn(z, 3) ? 0 : rnd(z);
	fz_filtered(z, f, OP_CORE_OTHER, r, buf,
		    _IOC_SIZE(r) < sizeof(buf) ? _IOC_SIZE(r) : sizeof(buf));
}

/*
 * Any number of DRM's type, any direction and size. Without
 * SPYRE_FUZZ_LEGACY, not the numbers that reach GET_UNIQUE, GET_MAGIC or an
 * unbounded syncobj array.
 */
static void fz_raw(struct fz *z, struct fz_file *f)
{
	unsigned int nr = rn(z, 256), dir = rn(z, 4), size = rn(z, 3) ? rn(z, 128) : rn(z, 0x4000);
	unsigned long req;
	unsigned int i;
	uint64_t arg;
	int ret;

	if (!z->legacy && (nr == 0x01 || nr == 0x02 || (nr >= 0xbf && nr <= 0xcf)))
		nr = DRM_COMMAND_BASE + 8 + rn(z, 0x60 - 8);
	if (rn(z, 4) == 0)
		nr = DRM_COMMAND_BASE + rn(z, 0x60);	/* the driver's range, known or not */
	for (i = 0; i < 1024; i++)
		z->sc[SC_ARG + i] = rn(z, 2) ? 0 : rnd(z);
	arg = rn(z, 4) ? (uintptr_t)(z->sc + SC_ARG) : fz_bad_ptr(z, size);
	if (size > 1024 && arg == (uintptr_t)(z->sc + SC_ARG))
		arg = (uintptr_t)z->guard - 1024;	/* large: runs into PROT_NONE */
	req = _IOC(dir, DRM_IOCTL_BASE, nr, size);
	ret = fz_do(z, OP_RAW, f->fd, req, arg);
	if (!fz_generic_allowed(nr))
		fz_expect_enotty(z, OP_RAW, req, ret);
}

static void fz_mmap(struct fz *z, struct fz_file *f)
{
	struct fz_bo *b = f->nbo ? &f->bo[rn(z, f->nbo)] : NULL;
	uint64_t off, len;
	int fd = f->fd, prot = PROT_READ | (rn(z, 2) ? PROT_WRITE : 0);
	void *p;

	off = b && rn(z, 3) ? b->mmap_offset : fz_u64(z) & ~4095ull;
	len = b && rn(z, 2) ? b->size : 4096 * (1 + rn(z, 16));
	if (b && rn(z, 8) == 0)
		off += 4096;
	if (z->nfds && rn(z, 6) == 0 && !z->failslab) {	/* a dma-buf or sync file we got back */
		fd = z->fds[rn(z, z->nfds)];
		off = 0;
	}
	p = mmap(NULL, len, prot, rn(z, 4) ? MAP_SHARED : MAP_PRIVATE, fd, off);
	fz_record(z->st, OP_MMAP, p == MAP_FAILED ? errno : 0);
	if (p == MAP_FAILED)
		return;
	/* Touch only what is known to be backed. */
	if (b && fd == f->fd && off == b->mmap_offset && len == b->size)
		(void)((volatile uint8_t *)p)[len - 1];
	munmap(p, len);
}

/* ---- files ------------------------------------------------------------------------ */

static int fz_fixed_bo(struct fz *z, struct fz_file *f, struct fz_bo *b, uint64_t size,
		       uint32_t flags)
{
	struct drm_spyre_bo_create c = { .size = size, .flags = flags };

	memset(b, 0, sizeof(*b));
	if (fz_do(z, OP_BO_CREATE, f->fd, DRM_IOCTL_SPYRE_BO_CREATE, (uintptr_t)&c))
		return -1;
	b->handle = c.handle;
	b->va = c.va;
	b->size = size;
	b->flags = flags;
	if (c.mmap_offset) {
		b->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, c.mmap_offset);
		fz_record(z->st, OP_MMAP, b->map == MAP_FAILED ? errno : 0);
		if (b->map == MAP_FAILED)
			b->map = NULL;
	}
	return 0;
}

static void fz_file_open(struct fz *z, struct fz_file *f, int card)
{
	struct drm_spyre_queue_create qc = { .priority = DRM_SPYRE_PRIO_NORMAL };
	struct drm_syncobj_create sc = { 0 };
	int ok;

	memset(f, 0, sizeof(*f));
	f->card = card;
	f->fd = spyre_open(card);
	if (f->fd < 0)
		return;
	if (!fz_do(z, OP_QUEUE_CREATE, f->fd, DRM_IOCTL_SPYRE_QUEUE_CREATE, (uintptr_t)&qc))
		f->q[f->nq++] = qc.queue_id;
	if (!fz_do(z, OP_SYNCOBJ_CREATE, f->fd, DRM_IOCTL_SYNCOBJ_CREATE, (uintptr_t)&sc))
		f->sync[f->nsync++].handle = sc.handle;
	/* The relu program of spyre_launch_test, its buffers, and room for junk. */
	ok = !fz_fixed_bo(z, f, &f->img, 4096, DRM_SPYRE_BO_HOST);
	ok = ok && !fz_fixed_bo(z, f, &f->args, 4096, DRM_SPYRE_BO_HOST);
	ok = ok && !fz_fixed_bo(z, f, &f->rec, 4096, DRM_SPYRE_BO_HOST);
	ok = ok && !fz_fixed_bo(z, f, &f->x, 4096, 0);
	ok = ok && !fz_fixed_bo(z, f, &f->y, 4096, 0);
	ok = ok && !fz_fixed_bo(z, f, &f->junk, 8192, DRM_SPYRE_BO_HOST);
	f->prog = ok && f->img.map && f->args.map && f->junk.map;
}

static void fz_file_close(struct fz *z, struct fz_file *f)
{
	struct fz_bo *fixed[] = { &f->img, &f->args, &f->rec, &f->x, &f->y, &f->junk };
	unsigned int i;

	if (f->fd < 0)
		return;
	/* Sometimes give the BOs back first; else the close does it, jobs in flight. */
	while (f->nbo) {
		if (rn(z, 2))
			fz_gem_close(z, f, f->bo[f->nbo - 1].handle);
		else
			fz_bo_forget(f, f->nbo - 1);
	}
	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (fixed[i]->map)
			munmap(fixed[i]->map, fixed[i]->size);
	close(f->fd);
	f->fd = -1;
}

static int fz_card_of(struct fz *z, int i)
{
	return i < 2 || z->ncards < 2 ? 0 : 1;
}

static void fz_reopen(struct fz *z, int i)
{
	fz_file_close(z, &z->f[i]);
	fz_file_open(z, &z->f[i], fz_card_of(z, i));
	__atomic_fetch_add(&z->st->reopens, 1, __ATOMIC_RELAXED);
}

static void fz_one(struct fz *z, struct fz_file *f)
{
	unsigned int r = rn(z, 1000);

	if (r < 260)
		fz_submit(z, f);
	else if (r < 350)
		fz_bo_create(z, f);
	else if (r < 410)
		fz_gem_close(z, f, fz_handle(z, f));
	else if (r < 440)
		fz_bo_info(z, f);
	else if (r < 465)
		fz_bo_wait(z, f);
	else if (r < 500)
		fz_queue_create(z, f);
	else if (r < 520)
		fz_queue_destroy_id(z, f, fz_queue(z, f));
	else if (r < 540)
		fz_queue_error(z, f);
	else if (r < 560)
		fz_get_param(z, f);
	else if (r < 580)
		fz_syncobj_create(z, f);
	else if (r < 592)
		fz_syncobj_destroy(z, f);
	else if (r < 602)
		fz_syncobj_to_fd(z, f);
	else if (r < 612)
		fz_syncobj_to_handle(z, f);
	else if (r < 622)
		fz_syncobj_transfer(z, f);
	else if (r < 634)
		fz_syncobj_wait(z, f, false);
	else if (r < 646)
		fz_syncobj_wait(z, f, true);
	else if (r < 654)
		fz_syncobj_eventfd(z, f);
	else if (r < 662)
		fz_syncobj_array(z, f, OP_SYNCOBJ_RESET);
	else if (r < 670)
		fz_syncobj_array(z, f, OP_SYNCOBJ_SIGNAL);
	else if (r < 680)
		fz_syncobj_array(z, f, OP_SYNCOBJ_TIMELINE_SIGNAL);
	else if (r < 690)
		fz_syncobj_array(z, f, OP_SYNCOBJ_QUERY);
	else if (r < 720)
		fz_prime_to_fd(z, f);
	else if (r < 750)
		fz_prime_to_handle(z, f);
	else if (r < 760)
		fz_version(z, f);
	else if (r < 770)
		fz_get_cap(z, f);
	else if (r < 778)
		fz_set_client_cap(z, f);
	else if (r < 850)
		fz_legacy_ioctl(z, f);
	else if (r < 880)
		fz_core_other(z, f);
	else if (r < 950)
		fz_raw(z, f);
	else
		fz_mmap(z, f);
}

struct fz_cfg {
	uint64_t seed, iters;
	double deadline;
	bool legacy, failslab;
	int hang_budget;
};

/* One fuzzing process: @cfg->iters calls, or fewer when the deadline comes. */
static void fz_worker(const struct fz_cfg *cfg, struct fz_stats *st, int id)
{
	struct fz z;
	uint64_t it;
	int i;

	memset(&z, 0, sizeof(z));
	z.rng = cfg->seed * 0x2545f4914f6cdd1dull + (uint64_t)id * 0x9e3779b97f4a7c15ull;
	z.id = id;
	z.st = st;
	st->cur_op[id] = -1;
	z.legacy = cfg->legacy;
	z.failslab = cfg->failslab;
	z.hang_budget = cfg->hang_budget;
	for (z.ncards = 0; z.ncards < FZ_MAX_CARDS; z.ncards++) {
		struct drm_spyre_get_param g = { .param = DRM_SPYRE_PARAM_MEM_SIZE };
		int fd = spyre_open(z.ncards);

		if (fd < 0)
			break;
		z.mem[z.ncards] = ioctl(fd, DRM_IOCTL_SPYRE_GET_PARAM, &g) ? 1 << 30 : g.value;
		close(fd);
	}
	/* scratch, one PROT_NONE page, one read-only page */
	z.sc = mmap(NULL, SC_SIZE + 2 * 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (z.sc == MAP_FAILED)
		_exit(3);
	z.guard = z.sc + SC_SIZE;
	z.ro = z.guard + 4096;
	mprotect(z.guard, 4096, PROT_NONE);
	mprotect(z.ro, 4096, PROT_READ);
	z.efd = eventfd(0, EFD_CLOEXEC);
	z.relu = spyre_pb_relu_image(SPYRE_PB_ADDR_SLOT, 1, 128, &z.relu_size);
	if (!z.relu || z.relu_size > 4096)
		_exit(3);
	for (i = 0; i < FZ_FILES; i++)
		fz_file_open(&z, &z.f[i], fz_card_of(&z, i));
	if (z.failslab)	/* from here on, slab allocations of this process may fail */
		write_text("/proc/self/make-it-fail", "1");

	for (it = 0; it < cfg->iters; it++) {
		struct fz_file *f;

		if ((it & 7) == 0 && now_s() > cfg->deadline) {
			__atomic_fetch_add(&st->capped, 1, __ATOMIC_RELAXED);
			break;
		}
		/* Close and reopen a file in the middle (always once, halfway). */
		if (it == cfg->iters / 2 || rn(&z, 400) == 0)
			fz_reopen(&z, rn(&z, FZ_FILES));
		f = &z.f[rn(&z, FZ_FILES)];
		if (f->fd < 0) {
			fz_reopen(&z, f - z.f);
			continue;
		}
		st->cur_iter[id] = it;
		fz_one(&z, f);
		__atomic_fetch_add(&st->iters, 1, __ATOMIC_RELAXED);
	}
	for (i = 0; i < FZ_FILES; i++)
		fz_file_close(&z, &z.f[i]);
	_exit(0);
}

/* Print a stuck process's kernel stack. */
static void fz_dump_stuck(const char *what, const struct fz_stats *st, int i, pid_t pid)
{
	char path[64], buf[4096], *line, *save;
	int op = __atomic_load_n(&st->cur_op[i], __ATOMIC_ACQUIRE);

	spyre_diag("%s: process %d (pid %d) stuck at iteration %llu, %s%s for %.1f s; kernel stack:",
	       what, i, pid, (unsigned long long)st->cur_iter[i], op < 0 ? "between calls" : "in ",
	       op < 0 ? "" : fz_op_name[op], op < 0 ? 0 : (spyre_now_ns() - st->cur_since[i]) / 1e9);
	snprintf(path, sizeof(path), "/proc/%d/stack", pid);
	read_text(path, buf, sizeof(buf));
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		spyre_diag("%s:   %s", what, line);
}

/*
 * Wait for the fuzzing processes. A process still there @deadline is stuck
 * (every call it makes is bounded): report where, kill it, and count it.
 * Returns the number of processes that failed.
 */
static int fz_reap(const char *what, struct fz_stats *st, pid_t *pid, int n, double deadline)
{
	int i, status, left = n, bad = 0;
	bool killed = false;

	while (left) {
		for (i = 0; i < n; i++) {
			if (!pid[i] || waitpid(pid[i], &status, WNOHANG) != pid[i])
				continue;
			if (!WIFEXITED(status) || WEXITSTATUS(status)) {
				spyre_diag("%s: process %d ended with status %#x", what, i, status);
				bad++;
			}
			pid[i] = 0;
			left--;
		}
		if (!left)
			break;
		if (now_s() > deadline + (killed ? 15 : 0)) {
			if (killed) {
				fz_violation(st, "%s: %d process(es) stuck in the kernel after SIGKILL",
					     what, left);
				return bad + left;
			}
			for (i = 0; i < n; i++) {
				if (!pid[i])
					continue;
				fz_dump_stuck(what, st, i, pid[i]);
				fz_violation(st, "%s: process %d stuck in %s", what, i,
					     st->cur_op[i] < 0 ? "user space" :
					     fz_op_name[st->cur_op[i]]);
				kill(pid[i], SIGKILL);
			}
			killed = true;
		}
		usleep(50000);
	}
	return bad;
}

/* Fork the fuzzing processes, wait for them, report. */
static int fz_storm(const char *what, const struct fz_cfg *base, struct fz_stats *st,
		    int nprocs, double seconds)
{
	struct fz_cfg cfg = *base;
	pid_t pid[FZ_PROCS];
	double t0 = now_s();
	int i, bad;
	long faults[FZ_MAX_CARDS], resets[FZ_MAX_CARDS];

	for (i = 0; i < FZ_MAX_CARDS; i++) {
		faults[i] = fz_sysfs(i, "faults");
		resets[i] = fz_sysfs(i, "resets");
	}

	cfg.deadline = t0 + seconds;
	spyre_diag("%s: seed %#llx (SPYRE_FUZZ_SEED), %d processes x %llu iterations "
	       "(SPYRE_FUZZ_ITERS), wall-clock cap %.0f s (SPYRE_FUZZ_SECONDS)%s%s", what,
	       (unsigned long long)cfg.seed, nprocs, (unsigned long long)cfg.iters, seconds,
	       cfg.legacy ? "" : ", without GET_UNIQUE, GET_MAGIC and huge syncobj counts "
	       "(SPYRE_FUZZ_LEGACY=0)", cfg.failslab ? ", slab allocations failing" : "");
	for (i = 0; i < nprocs; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			fz_worker(&cfg, st, i);
		if (pid[i] < 0)
			return -errno;
	}
	bad = fz_reap(what, st, pid, nprocs, cfg.deadline + FZ_GRACE);
	spyre_diag("%s: %llu iterations, %llu ioctls, %llu packets submitted, %llu of them in "
	       "%llu accepted jobs, %llu file reopens, %llu WAIT packets allowed to hang, "
	       "%.1f s%s", what, (unsigned long long)st->iters, (unsigned long long)st->ioctls,
	       (unsigned long long)st->packets, (unsigned long long)st->job_packets,
	       (unsigned long long)st->jobs,
	       (unsigned long long)st->reopens, (unsigned long long)st->hang_waits,
	       now_s() - t0,
	       st->capped ? "; the wall-clock cap ended the storm early" : "");
	for (i = 0; i < FZ_MAX_CARDS && faults[i] >= 0; i++)
		spyre_diag("%s: card %d: %ld jobs failed by device errors, %ld queue resets after "
		       "hangs", what, i, fz_sysfs(i, "faults") - faults[i],
		       fz_sysfs(i, "resets") - resets[i]);
	fz_report(what, st);
	return bad ? -EIO : 0;
}

/* ---- races: threads -------------------------------------------------------------- */

#define RACE_JOBS	32
#define RACE_CYCLES	12	/* destroy/re-create or close/re-create per round */

struct race {
	struct fz_stats *st;
	int fd;
	uint32_t q;		/* current queue (submit vs destroy) */
	uint32_t q2;		/* a second queue (BO and file close) */
	uint32_t bo_handle;	/* current target BO (submit vs close) */
	uint64_t bo_va;
	struct sbo src;
	uint32_t sync[RACE_JOBS];
	bool accepted[RACE_JOBS];
	int submitted;		/* jobs tried so far */
	int kind;
	int next;		/* next job index a submitter takes */
};

static void *race_submitter(void *arg)
{
	struct race *r = arg;
	uint8_t p[2][64];
	uint32_t bos[2];
	int i, ret;

	/* Two submitters share the jobs. */
	while ((i = __atomic_fetch_add(&r->next, 1, __ATOMIC_ACQ_REL)) < RACE_JOBS) {
		struct drm_spyre_submit a = { 0 };
		uint64_t va = __atomic_load_n(&r->bo_va, __ATOMIC_ACQUIRE);

		bos[0] = r->src.handle;
		bos[1] = __atomic_load_n(&r->bo_handle, __ATOMIC_ACQUIRE);
		spyre_prep_copy_va(p[0], r->src.va, va, 1 * MiB);
		spyre_prep_hdr(p[1], SPYRE_PKT_OP_NOP);
		/* BO and file close: jobs on two queues, so the last one is not the only one */
		a.queue_id = r->kind && i % 2 ? r->q2 : __atomic_load_n(&r->q, __ATOMIC_ACQUIRE);
		a.packets = (uintptr_t)p;
		a.packet_count = 2;
		a.bo_handles = (uintptr_t)bos;
		a.bo_count = i % 2 ? 2 : 1;	/* every other job names its target by address only */
		a.out_sync_handle = r->sync[i];
		ret = ioctl(r->fd, DRM_IOCTL_SPYRE_SUBMIT, &a) ? errno : 0;
		fz_record(r->st, OP_SUBMIT, ret);
		r->accepted[i] = !ret;
		__atomic_fetch_add(&r->submitted, 1, __ATOMIC_ACQ_REL);
		/* 0, or: the queue or the BO was just destroyed; the file was closed */
		if (ret && ret != ENOENT && ret != EBADF)
			fz_violation(r->st, "race %d: SUBMIT %d: %s", r->kind, i, errname(ret));
		if (ret == EBADF)
			break;
	}
	return NULL;
}

/* Wait until the submitter passed job @n (or ended). */
static void race_wait_for(struct race *r, int n)
{
	while (__atomic_load_n(&r->submitted, __ATOMIC_ACQUIRE) < n)
		sched_yield();
}

/*
 * One round on @card. kind 0: the queue is destroyed and re-created under
 * the submitter; 1: the target BO (device or host memory) is closed and
 * re-created; 2: the file is closed. Every job SUBMIT accepted must
 * complete (its syncobj signals, with or without an error).
 */
static void race_round(struct fz_stats *st, int card, int kind, int round)
{
	struct drm_spyre_queue_create qc = { .priority = DRM_SPYRE_PRIO_NORMAL };
	struct race r;
	struct sbo dst;
	pthread_t t[2];
	int i, ret;

	memset(&r, 0, sizeof(r));
	r.st = st;
	r.kind = kind;
	r.fd = spyre_open(card);
	if (r.fd < 0 || squeue_create(r.fd, DRM_SPYRE_PRIO_NORMAL, &r.q) ||
	    squeue_create(r.fd, DRM_SPYRE_PRIO_NORMAL, &r.q2) ||
	    sbo_create(r.fd, 1 * MiB, DRM_SPYRE_BO_HOST, &r.src) ||
	    sbo_create(r.fd, 1 * MiB, 0, &dst)) {
		fz_violation(st, "race %d: set-up failed", kind);
		return;
	}
	r.bo_handle = dst.handle;
	r.bo_va = dst.va;
	for (i = 0; i < RACE_JOBS; i++)
		if (ssyncobj_create(r.fd, &r.sync[i]))
			fz_violation(st, "race %d: SYNCOBJ_CREATE failed", kind);
	for (i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, race_submitter, &r)) {
			fz_violation(st, "race %d: pthread_create failed", kind);
			return;
		}
	/* A fixed number of cycles, free-running against the submitters. */
	race_wait_for(&r, round % 3);
	for (i = 1; i <= RACE_CYCLES && kind != 2; i++) {
		if (kind == 0) {
			struct drm_spyre_queue_destroy d = { .queue_id = r.q };

			ret = ioctl(r.fd, DRM_IOCTL_SPYRE_QUEUE_DESTROY, &d) ? errno : 0;
			fz_record(st, OP_QUEUE_DESTROY, ret);
			ret = ret ?: ioctl(r.fd, DRM_IOCTL_SPYRE_QUEUE_CREATE, &qc) ? errno : 0;
			fz_record(st, OP_QUEUE_CREATE, ret);
			if (ret)
				fz_violation(st, "race 0: queue destroy/create: %s", errname(ret));
			__atomic_store_n(&r.q, qc.queue_id, __ATOMIC_RELEASE);
		} else {
			struct drm_gem_close c = { .handle = r.bo_handle };
			struct sbo n;

			ret = ioctl(r.fd, DRM_IOCTL_GEM_CLOSE, &c) ? errno : 0;
			fz_record(st, OP_GEM_CLOSE, ret);
			ret = ret ?: -sbo_create(r.fd, 1 * MiB, i % 2 ? DRM_SPYRE_BO_HOST : 0, &n);
			fz_record(st, OP_BO_CREATE, ret);
			if (ret) {
				fz_violation(st, "race 1: BO close/create: %s", errname(ret));
				break;
			}
			if (n.map)
				munmap(n.map, n.size);
			__atomic_store_n(&r.bo_va, n.va, __ATOMIC_RELEASE);
			__atomic_store_n(&r.bo_handle, n.handle, __ATOMIC_RELEASE);
		}
	}
	if (kind == 2) {
		race_wait_for(&r, 1 + round % 4);
		munmap(r.src.map, r.src.size);
		r.src.map = NULL;
		close(r.fd);	/* the submitter may be inside SUBMIT on it */
	}
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	if (kind == 2)
		return;
	for (i = 0; i < RACE_JOBS; i++) {
		if (!r.accepted[i])
			continue;
		ret = ssyncobj_wait(r.fd, r.sync[i], 0, SPYRE_DONE_MS);
		if (ret)
			fz_violation(st, "race %d round %d: accepted job %d never completed: %s",
				     kind, round, i, errname(-ret));
	}
	munmap(r.src.map, r.src.size);
	close(r.fd);
}

/* ---- the tests ------------------------------------------------------------------------ */

FIXTURE(fuzz) {
	struct spyre_snap start;
	struct fz_cfg cfg;
	struct fz_stats *st;
	double seconds;
};

FIXTURE_SETUP(fuzz)
{
	int fd = spyre_open(0);

	if (fd < 0)
		SKIP(return, "no spyre device");
	close(fd);
	self->cfg.seed = env_u64("SPYRE_FUZZ_SEED", FZ_SEED_DEFAULT);
	self->cfg.iters = env_u64("SPYRE_FUZZ_ITERS", FZ_ITERS_DEFAULT);
	self->cfg.legacy = fz_legacy();
	self->cfg.hang_budget = 1;
	self->seconds = env_u64("SPYRE_FUZZ_SECONDS", FZ_SECONDS_DEFAULT);
	self->st = mmap(NULL, sizeof(*self->st), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->st);
	memset(self->st, 0, sizeof(*self->st));
	spyre_snap_take(&self->start);
	ASSERT_LT(0, self->start.ncards);
	ASSERT_LE(0, self->start.c[0].mem_used);
	ASSERT_LE(0, self->start.c[0].host_used);
}

/* The failslab span is open in the kernel log (closed again in teardown). */
static bool fz_failslab_marked;

static void fz_failslab_mark(bool on)
{
	write_text("/dev/kmsg", on ? "<4>spyre-failslab: on\n" : "<4>spyre-failslab: off\n");
	fz_failslab_marked = on;
}

FIXTURE_TEARDOWN(fuzz)
{
	if (fz_failslab_marked)	/* an ASSERT left the storm early */
		fz_failslab_mark(false);
	if (self->st && self->st != MAP_FAILED)
		munmap(self->st, sizeof(*self->st));
}

TEST_F_TIMEOUT(fuzz, storm, 240)
{
	EXPECT_EQ(0, fz_storm("storm", &self->cfg, self->st, FZ_PROCS, self->seconds));
	fz_check_after(_metadata, &self->start, self->st);
}

TEST_F_TIMEOUT(fuzz, races, 180)
{
	int card, kind, round, rounds = env_u64("SPYRE_FUZZ_RACE_ROUNDS", 6);
	double t0 = now_s();

	spyre_diag("races: SUBMIT against QUEUE_DESTROY, GEM_CLOSE and close(), %d rounds each, "
	       "%d jobs per round, on %d card(s)", rounds, RACE_JOBS, self->start.ncards);
	for (card = 0; card < self->start.ncards; card++)
		for (kind = 0; kind < 3; kind++)
			for (round = 0; round < rounds; round++)
				race_round(self->st, card, kind, round);
	spyre_diag("races: %llu ioctls in %.1f s", (unsigned long long)self->st->ioctls,
	       now_s() - t0);
	fz_report("races", self->st);
	fz_check_after(_metadata, &self->start, self->st);
}

/*
 * [start, end) of the kernel function @name, from /proc/kallsyms: its
 * address and the next higher symbol's. 0 when not found.
 */
static int kernel_func_range(const char *name, unsigned long *start, unsigned long *end)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	unsigned long addr, next = ~0ul;
	char line[512], sym[256], type;

	*start = 0;
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %c %255s", &addr, &type, sym) != 3)
			continue;
		if (!strcmp(sym, name))
			*start = addr;
	}
	if (*start) {
		rewind(f);
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "%lx %c %255s", &addr, &type, sym) == 3 &&
			    addr > *start && addr < next)
				next = addr;
	}
	fclose(f);
	*end = next;
	return *start && next != ~0ul ? 0 : -ENOENT;
}

static const char *const failslab_attrs[] = {
	"probability", "interval", "times", "space", "verbose", "task-filter", "ignore-gfp-wait",
	"reject-start", "reject-end",
};

#define FAILSLAB_ATTRS	(sizeof(failslab_attrs) / sizeof(failslab_attrs[0]))

/*
 * The storm again, shorter, with 5 % of the slab allocations of the fuzzing
 * processes failing (GFP_KERNEL ones too), then the same checks. Not the
 * allocations of the buddy allocator (gpu_buddy_alloc_blocks on the stack):
 * in Linux 6.12 its error path after a failed split_block() frees a block
 * still in its free tree (alloc_from_freetree(), err_undo), which ends in
 * "kernel BUG at drivers/gpu/buddy.c:775" at a later allocation; that is a
 * core bug, not spyre's, and would stop the run at once. Mappable device
 * BOs are mmapped here too: their pages are inserted at fault time (an
 * eager io_remap_pfn_range() used to warn in untrack_pfn() when a
 * page-table allocation failed).
 */
TEST_F_TIMEOUT(fuzz, failslab_storm, 240)
{
	static const char *const set[FAILSLAB_ATTRS] = { "0", "1", "-1", "0", "0", "Y", "N",
							 NULL, NULL };
	char saved[FAILSLAB_ATTRS][32], path[128], val[32];
	unsigned long rs = 0, re = 0;
	struct fz_cfg cfg = self->cfg;
	unsigned int i;
	int ret;

	if (access("/sys/kernel/debug/failslab", F_OK))
		SKIP(return, "no /sys/kernel/debug/failslab: this kernel has no CONFIG_FAILSLAB "
		     "(or no CONFIG_FAULT_INJECTION_DEBUG_FS)");
	if (access("/proc/self/make-it-fail", F_OK))
		SKIP(return, "no /proc/self/make-it-fail: no task filter for failslab");
	if (access("/sys/kernel/debug/failslab/reject-start", F_OK))
		SKIP(return, "no failslab reject-start: the kernel has no "
		     "CONFIG_FAULT_INJECTION_STACKTRACE_FILTER to spare the buddy allocator");
	ASSERT_EQ(0, kernel_func_range("gpu_buddy_alloc_blocks", &rs, &re))
		TH_LOG("gpu_buddy_alloc_blocks not in /proc/kallsyms");
	for (i = 0; i < FAILSLAB_ATTRS; i++) {
		snprintf(path, sizeof(path), "/sys/kernel/debug/failslab/%s", failslab_attrs[i]);
		ASSERT_EQ(0, read_text(path, saved[i], sizeof(saved[i])));
		if (!set[i])
			snprintf(val, sizeof(val), "%#lx", i == FAILSLAB_ATTRS - 2 ? rs : re);
		/* probability last: only our fuzzing processes (make-it-fail) see failures */
		ASSERT_EQ(0, write_text(path, set[i] ?: val)) TH_LOG("%s", path);
	}
	/*
	 * A kvmalloc() whose kmalloc and then vmalloc's own allocation both
	 * fail prints warn_alloc()'s stack dump: expected here, so the VM's
	 * judge (tools/vm/run) leaves those out between these two lines.
	 */
	fz_failslab_mark(true);
	ASSERT_EQ(0, write_text("/sys/kernel/debug/failslab/probability", "5"));
	spyre_diag("failslab: 5%% of slab allocations fail in the fuzzing processes, but not in "
	       "gpu_buddy_alloc_blocks [%#lx, %#lx)", rs, re);
	cfg.failslab = true;
	cfg.iters = cfg.iters / 3 + 1;
	cfg.hang_budget = 0;
	ret = fz_storm("failslab", &cfg, self->st, FZ_PROCS, self->seconds / 2 + 1);
	for (i = 0; i < FAILSLAB_ATTRS; i++) {
		snprintf(path, sizeof(path), "/sys/kernel/debug/failslab/%s", failslab_attrs[i]);
		write_text(path, saved[i]);
	}
	write_text("/sys/kernel/debug/failslab/probability", "0");
	fz_failslab_mark(false);
	EXPECT_EQ(0, ret);
	fz_check_after(_metadata, &self->start, self->st);
}

TEST_HARNESS_MAIN
