// SPDX-License-Identifier: GPL-2.0-only
/*
 * Description: operating the card (issue 14, parts 3-5). A hung job leaves a
 * device coredump in /sys/class/devcoredump whose fields name the job, its
 * packets, its queue's registers and its context's mappings, and its queue
 * reset sends a SPYRE_RESET=queue uevent; the write-only sysfs "reset"
 * recovers 100 injected hangs in a row with the files open (each hung job
 * fails with DRM_SPYRE_ERROR_RESET, a SPYRE_RESET=device uevent arrives,
 * new work runs, a buffer keeps its contents); the card autosuspends to
 * D3hot and wakes on submit; a system suspend (pm_test "devices", then
 * "platform") keeps buffers' contents. Runs as root in the test VM.
 */
#include <dirent.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "kselftest_harness.h"
#include "spyre_devcoredump.h"
#include "spyre_test.h"

/* ---- uevents: the kernel's netlink multicast group ------------------------- */

static int uevent_open(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = 1 };
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
	int sz = 1 << 20;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Wait up to @ms for a uevent carrying both @key1 and @key2 (e.g.
 * "SPYRE_RESET=device"); copies its variables, one per line, to @out.
 */
static int uevent_wait(int fd, const char *key1, const char *key2, int ms, char *out,
		       size_t outlen)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char buf[4096];

	while (poll(&p, 1, ms) > 0) {
		ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
		int has1 = 0, has2 = 0;
		size_t off = 0;

		if (n <= 0)
			return -1;
		buf[n] = '\0';
		if (out)
			out[0] = '\0';
		for (off = 0; off < (size_t)n; off += strlen(buf + off) + 1) {
			has1 |= !strcmp(buf + off, key1);
			has2 |= !strcmp(buf + off, key2);
			if (out && strlen(out) + strlen(buf + off) + 2 < outlen) {
				strcat(out, buf + off);
				strcat(out, "\n");
			}
		}
		if (has1 && has2)
			return 0;
	}
	return -1;
}

/* ---- devcoredump ------------------------------------------------------------------ */

/* /sys/class/devcoredump/devcdN/data of a dump of card @pci, or -1. */
static int find_dump(const char *pci, char *path, size_t len)
{
	char link[PATH_MAX], target[PATH_MAX];
	struct dirent *d;
	DIR *dir = opendir("/sys/class/devcoredump");
	int ret = -1;
	ssize_t n;

	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		if (strncmp(d->d_name, "devcd", 5))
			continue;
		snprintf(link, sizeof(link), "/sys/class/devcoredump/%s/failing_device", d->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = '\0';
		if (strcmp(strrchr(target, '/') + 1, pci))
			continue;
		snprintf(path, len, "/sys/class/devcoredump/%s/data", d->d_name);
		ret = 0;
		break;
	}
	closedir(dir);
	return ret;
}

/*
 * Wait up to @ms for card @pci to have no dump left: 0, or -1. A write to a
 * dump's data only schedules its deletion, from a work item, which a slow or
 * loaded machine may run late.
 */
static int wait_no_dump(const char *pci, int ms)
{
	char path[PATH_MAX];

	for (;;) {
		if (find_dump(pci, path, sizeof(path)))
			return 0;
		if (ms <= 0)
			return -1;
		usleep(10000);
		ms -= 10;
	}
}

/*
 * Delete card @pci's dumps, writing to each until it is gone (see above):
 * 0 once none is left, -1 if one still is after 10 s.
 */
static int drop_dumps(const char *pci)
{
	char path[PATH_MAX];
	int ms;

	for (ms = 10000; !find_dump(pci, path, sizeof(path)); ms -= 10) {
		if (ms <= 0)
			return -1;
		write_text(path, "1");
		usleep(10000);
	}
	return 0;
}

static uint8_t *read_dump(const char *path, size_t *len)
{
	size_t cap = 1 << 20, off = 0;
	uint8_t *buf = malloc(cap);
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (!buf || fd < 0) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while (off < cap && (n = read(fd, buf + off, cap - off)) > 0)
		off += n;
	close(fd);
	*len = off;
	return buf;
}

/* The @nth section of @type in the dump (bounds checked), or NULL. */
static const void *dump_section(const uint8_t *d, size_t len, uint32_t type, int nth,
				uint32_t *size)
{
	const struct spyre_dump_header *h = (const void *)d;
	size_t off;

	if (len < sizeof(*h) || h->total_size > len || h->header_size > len)
		return NULL;
	for (off = h->header_size; off + sizeof(struct spyre_dump_section) <= h->total_size;) {
		const struct spyre_dump_section *s = (const void *)(d + off);

		if (off + sizeof(*s) + s->size > h->total_size)
			return NULL;
		if (s->type == type && nth-- == 0) {
			*size = s->size;
			return s + 1;
		}
		off += sizeof(*s) + ((s->size + 7) & ~7u);
	}
	return NULL;
}

FIXTURE(ops) {
	int fd;
	uint32_t q;
	char pci[32];
	char reset[96];
	int uev;
};

FIXTURE_SETUP(ops)
{
	char node[64];

	self->uev = -1;
	self->fd = spyre_open(0);
	if (self->fd < 0)
		SKIP(return, "no spyre device");
	ASSERT_EQ(0, card_pci(0, self->pci, sizeof(self->pci)));
	ASSERT_EQ(0, spyre_node(0, node, sizeof(node)));
	/* /dev/accel/accelN -> /sys/class/accel/accelN/reset */
	snprintf(self->reset, sizeof(self->reset), "/sys/class/accel/%s/reset",
		 strrchr(node, '/') + 1);
	ASSERT_EQ(0, squeue_create(self->fd, DRM_SPYRE_PRIO_NORMAL, &self->q));
	self->uev = uevent_open();
	ASSERT_LE(0, self->uev);
}

FIXTURE_TEARDOWN(ops)
{
	if (self->fd >= 0) {
		inject_disarm(self->pci);
		close(self->fd);
	}
	if (self->uev >= 0)
		close(self->uev);
}

TEST_F(ops, hang_leaves_a_coredump_and_a_queue_reset_uevent)
{
	struct ssubmit s = { .queue = self->q, .count = 3 };
	const struct spyre_dump_header *h;
	const struct spyre_dump_device *dev;
	const struct spyre_dump_queue *dq = NULL;
	const struct spyre_dump_job *job;
	const struct spyre_dump_pt *pt;
	const struct spyre_dump_range *rg;
	const uint8_t *pk;
	char path[PATH_MAX], ev[2048], cmd[PATH_MAX + 128], line[1024];
	uint8_t p[3][64], *d;
	uint32_t sync, size, i, found = 0;
	struct sbo t;
	size_t len;
	FILE *f;

	if (access("/sys/class/devcoredump", F_OK))
		SKIP(return, "kernel without CONFIG_DEV_COREDUMP");
	ASSERT_EQ(0, drop_dumps(self->pci));
	ASSERT_EQ(0, sbo_create(self->fd, 4096, DRM_SPYRE_BO_HOST, &t));
	ASSERT_EQ(0, inject_hang_all(self->pci, 63));
	spyre_prep_nop(p[0]);
	spyre_prep_timestamp(p[1], SPYRE_AS_VIRT, t.va);
	spyre_prep_nop(p[2]);
	ASSERT_EQ(0, ssyncobj_create(self->fd, &sync));
	s.packets = p;
	s.out = sync;
	ASSERT_EQ(0, ssubmit(self->fd, &s));
	ASSERT_EQ(0, ssyncobj_wait(self->fd, sync, 0, SPYRE_DONE_MS));
	ASSERT_EQ(0, inject_disarm(self->pci));
	ASSERT_EQ(0, uevent_wait(self->uev, "SPYRE_RESET=queue", "SPYRE_RESET_REASON=timeout",
				 5000, ev, sizeof(ev)));
	ASSERT_NE(NULL, strstr(ev, "SUBSYSTEM=accel"));

	for (i = 0; i < 50 && find_dump(self->pci, path, sizeof(path)); i++)
		usleep(100000);
	ASSERT_EQ(0, find_dump(self->pci, path, sizeof(path)));
	d = read_dump(path, &len);
	ASSERT_NE(NULL, d);
	h = (const void *)d;
	ASSERT_EQ(SPYRE_DUMP_MAGIC, h->magic);
	ASSERT_EQ(SPYRE_DUMP_VERSION, h->version);
	ASSERT_EQ(len, h->total_size);
	ASSERT_EQ(SPYRE_DUMP_REASON_HANG, h->reason);
	ASSERT_EQ(0, strcmp(h->pci, self->pci));

	dev = dump_section(d, len, SPYRE_DUMP_SEC_DEVICE, 0, &size);
	ASSERT_NE(NULL, dev);
	ASSERT_EQ(sizeof(*dev), size);
	ASSERT_EQ(SPYRE_STATUS_READY, dev->status & SPYRE_STATUS_READY);

	job = dump_section(d, len, SPYRE_DUMP_SEC_JOB, 0, &size);
	ASSERT_NE(NULL, job);
	ASSERT_EQ(s.job_seq, job->job_seq);
	ASSERT_EQ(getpid(), job->pid);
	ASSERT_EQ(self->q, job->uqueue);
	ASSERT_EQ(3, job->npackets);
	ASSERT_EQ(DRM_SPYRE_ERROR_TIMEOUT, job->fault.error);
	ASSERT_EQ(0, strncmp(job->comm, "spyre_ops_test", 14));

	/* The job's packets as the device saw them: ours, stamped by the driver. */
	pk = dump_section(d, len, SPYRE_DUMP_SEC_PACKETS, 0, &size);
	ASSERT_NE(NULL, pk);
	ASSERT_EQ((job->nwaits + 3) * 64, size);
	pk += job->nwaits * 64;
	ASSERT_EQ(SPYRE_PKT_OP_NOP, pk[0]);
	ASSERT_EQ(SPYRE_PKT_OP_TIMESTAMP, pk[64]);
	ASSERT_EQ(t.va, ((const struct spyre_pkt_sem *)(pk + 64))->addr);
	ASSERT_EQ(job->ctx, ((const struct spyre_pkt_hdr *)(pk + 64))->ctx);
	ASSERT_EQ(SPYRE_PKT_F_IRQ, ((const struct spyre_pkt_hdr *)(pk + 128))->flags);

	/* Its queue, hung before it consumed anything: HEAD on the job, BUSY. */
	for (i = 0; i < dev->queues; i++) {
		const struct spyre_dump_queue *x;

		x = dump_section(d, len, SPYRE_DUMP_SEC_QUEUE, i, &size);
		ASSERT_NE(NULL, x);
		if (x->idx == job->hwq)
			dq = x;
	}
	ASSERT_NE(NULL, dq);
	ASSERT_EQ(0, dq->kernel);
	ASSERT_EQ(SPYRE_QSTAT_BUSY, dq->regs[SPYRE_Q_STATUS / 4] & SPYRE_QSTAT_BUSY);
	ASSERT_EQ(job->ring_start, dq->regs[SPYRE_Q_HEAD / 4]);
	ASSERT_EQ(job->ring_end, dq->regs[SPYRE_Q_TAIL / 4]);
	ASSERT_LE(1, dq->inflight);

	/* The context's mappings: the 4 KiB host BO is one of them. */
	pt = dump_section(d, len, SPYRE_DUMP_SEC_PT, 0, &size);
	ASSERT_NE(NULL, pt);
	ASSERT_EQ(job->ctx, pt->ctx);
	ASSERT_EQ(sizeof(*pt) + pt->ranges * sizeof(*rg), size);
	rg = (const void *)(pt + 1);
	for (i = 0; i < pt->ranges; i++) {
		if (rg[i].va <= t.va && t.va + 4096 <= rg[i].va + rg[i].size) {
			found = 1;
			ASSERT_EQ(0, rg[i].flags & SPYRE_PTE_DEVMEM);
			ASSERT_EQ(SPYRE_PTE_WRITE, rg[i].flags & SPYRE_PTE_WRITE);
		}
	}
	ASSERT_EQ(1, found);
	ASSERT_LE(1, pt->host_pages);

	/* The decoder reads it too, when it is in the VM. */
	if (!access("/usr/bin/spyre-coredump", X_OK)) {
		snprintf(cmd, sizeof(cmd), "spyre-coredump %s", path);
		f = popen(cmd, "r");
		ASSERT_NE(NULL, f);
		found = 0;
		/* The whole decoded dump goes to the log: what a user reads. */
		while (fgets(line, sizeof(line), f)) {
			if (strstr(line, "reason: hang"))
				found |= 1;
			if (strstr(line, "TIMESTAMP"))
				found |= 2;
			line[strcspn(line, "\n")] = '\0';
			spyre_diag("spyre-coredump: %s", line);
		}
		ASSERT_EQ(0, pclose(f));
		ASSERT_EQ(3, found);
	}
	free(d);
	/* Deleting it is a write to data. */
	ASSERT_EQ(0, write_text(path, "1"));
	ASSERT_EQ(0, wait_no_dump(self->pci, 5000));
}

TEST_F(ops, sysfs_reset_recovers_100_hangs_with_files_open)
{
	struct drm_spyre_queue_error e;
	struct ssubmit s = { .queue = self->q, .count = 1 };
	char st[64], ev[2048];
	uint8_t nop[64], ts[64], cp[64], want[4096];
	struct stat sb;
	struct sbo t, keep, back;
	int i, recovered = 0, fd2;
	long resets0, dresets0;
	uint32_t sync, q2;
	uint64_t errors = 0;

	/* Another file holds device memory with a pattern the resets keep. */
	fd2 = spyre_open(0);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, squeue_create(fd2, DRM_SPYRE_PRIO_NORMAL, &q2));
	ASSERT_EQ(0, sbo_create(fd2, 4096, 0, &keep));
	ASSERT_EQ(0, sbo_create(fd2, 4096, DRM_SPYRE_BO_HOST, &back));
	fill_pattern(back.map, 4096, 14);
	spyre_prep_copy_va(cp, back.va, keep.va, 4096);
	ASSERT_EQ(0, srun(fd2, q2, cp, 1));
	memset(back.map, 0, 4096);

	ASSERT_EQ(0, pci_attr(self->pci, "resets", st, sizeof(st)));
	resets0 = atol(st);
	ASSERT_EQ(0, pci_attr(self->pci, "device_resets", st, sizeof(st)));
	dresets0 = atol(st);
	ASSERT_EQ(0, sbo_create(self->fd, 4096, DRM_SPYRE_BO_HOST, &t));
	spyre_prep_nop(nop);
	spyre_prep_timestamp(ts, SPYRE_AS_VIRT, t.va);
	ASSERT_EQ(0, ssyncobj_create(self->fd, &sync));
	for (i = 0; i < 100; i++) {
		struct drm_syncobj_array r = { .handles = (uintptr_t)&sync, .count_handles = 1 };

		ASSERT_EQ(0, xioctl(self->fd, DRM_IOCTL_SYNCOBJ_RESET, &r));
		ASSERT_EQ(0, inject_hang_all(self->pci, 63));
		s.packets = nop;
		s.out = sync;
		ASSERT_EQ(0, ssubmit(self->fd, &s));
		/* Hung: not done after 50 ms (a NOP takes microseconds). */
		ASSERT_EQ(-ETIME, ssyncobj_wait(self->fd, sync, 0, 50));
		ASSERT_EQ(0, write_text(self->reset, "1"));
		ASSERT_EQ(0, ssyncobj_wait(self->fd, sync, 0, SPYRE_DONE_MS));
		ASSERT_EQ(0, squeue_error(self->fd, self->q, &e));
		ASSERT_EQ(DRM_SPYRE_ERROR_RESET, e.fault.error);
		ASSERT_EQ(s.job_seq, e.job_seq);
		ASSERT_EQ(++errors, e.error_count);
		ASSERT_EQ(0, uevent_wait(self->uev, "SPYRE_RESET=device", "SPYRE_RESET_REASON=user",
					 5000, ev, sizeof(ev)));
		/* New work runs on the same file. */
		((uint64_t *)t.map)[0] = 0;
		ASSERT_EQ(0, srun(self->fd, self->q, ts, 1));
		ASSERT_LT(0, ((uint64_t *)t.map)[0]);
		ASSERT_EQ(0, pci_attr(self->pci, "state", st, sizeof(st)));
		ASSERT_NE(0, strcmp(st, "wedged"));
		recovered++;
	}
	spyre_diag("sysfs reset: %d of 100 injected hangs recovered, files open, no rmmod",
		   recovered);
	spyre_diag("last uevent: %s", strtok(ev, "\n") ? ev : "");
	ASSERT_EQ(100, recovered) {
		TH_LOG("recovered only %d", recovered);
	}
	ASSERT_EQ(0, pci_attr(self->pci, "device_resets", st, sizeof(st)));
	ASSERT_EQ(dresets0 + 100, atol(st));
	ASSERT_EQ(0, pci_attr(self->pci, "resets", st, sizeof(st)));
	ASSERT_EQ(resets0 + 100, atol(st));
	/* The other file's buffer kept its contents; its queue runs. */
	spyre_prep_copy_va(cp, keep.va, back.va, 4096);
	ASSERT_EQ(0, srun(fd2, q2, cp, 1));
	fill_pattern(want, 4096, 14);
	ASSERT_EQ(0, memcmp(want, back.map, 4096));
	/* Only root may reset: the attribute is write-only, 0200. */
	ASSERT_EQ(0, stat(self->reset, &sb));
	ASSERT_EQ(0200, sb.st_mode & 0777);
	ASSERT_EQ(-EINVAL, write_text(self->reset, "0"));
	close(fd2);
}

TEST_F(ops, runtime_pm_autosuspends_and_wakes_on_submit)
{
	char st[64], delay[32];
	uint8_t cp[64], want[8192];
	struct sbo dev, host;
	long t0, t1;

	if (pci_attr(self->pci, "power/runtime_status", st, sizeof(st)))
		SKIP(return, "kernel without CONFIG_PM");
	ASSERT_EQ(0, pci_attr(self->pci, "power/autosuspend_delay_ms", delay, sizeof(delay)));
	ASSERT_EQ(0, pci_attr(self->pci, "power/control", st, sizeof(st)));
	ASSERT_EQ(0, strcmp(st, "auto"));
	ASSERT_EQ(0, pci_attr_write(self->pci, "power/autosuspend_delay_ms", "100"));

	ASSERT_EQ(0, sbo_create(self->fd, 8192, 0, &dev));
	ASSERT_EQ(0, sbo_create(self->fd, 8192, DRM_SPYRE_BO_HOST, &host));
	fill_pattern(host.map, 8192, 5);
	memcpy(want, host.map, 8192);
	spyre_prep_copy_va(cp, host.va, dev.va, 8192);
	ASSERT_EQ(0, srun(self->fd, self->q, cp, 1));
	memset(host.map, 0, 8192);

	/* Idle: D3hot within the delay (and TCG's slack). */
	ASSERT_EQ(0, wait_runtime_status(self->pci, "suspended", 5000));
	ASSERT_EQ(0, pci_attr(self->pci, "state", st, sizeof(st)));
	ASSERT_EQ(0, strcmp(st, "suspended"));
	ASSERT_EQ(0, pci_attr(self->pci, "power_state", st, sizeof(st)));
	ASSERT_EQ(0, strcmp(st, "D3hot"));
	ASSERT_EQ(0, pci_attr(self->pci, "power/runtime_suspended_time", st, sizeof(st)));
	t0 = atol(st);
	usleep(300000);
	ASSERT_EQ(0, pci_attr(self->pci, "power/runtime_suspended_time", st, sizeof(st)));
	t1 = atol(st);
	ASSERT_LE(t0 + 200, t1);

	/* A submit wakes it; the device memory kept its contents across D3hot. */
	spyre_prep_copy_va(cp, dev.va, host.va, 8192);
	ASSERT_EQ(0, srun(self->fd, self->q, cp, 1));
	ASSERT_EQ(0, memcmp(want, host.map, 8192));
	ASSERT_EQ(0, pci_attr(self->pci, "power_state", st, sizeof(st)));
	spyre_diag("after the wake-up submit: %s; suspended %ld ms so far", st, t1);
	/* And it goes back to sleep. */
	ASSERT_EQ(0, wait_runtime_status(self->pci, "suspended", 5000));
	ASSERT_EQ(0, pci_attr_write(self->pci, "power/autosuspend_delay_ms", delay));
}

TEST_F(ops, system_suspend_keeps_buffers)
{
	static const char * const levels[] = { "devices", "platform" };
	uint8_t cp[64], want[65536];
	struct sbo dev, map, host;
	char old[128];
	unsigned int l;

	if (access("/sys/power/pm_test", W_OK))
		SKIP(return, "no /sys/power/pm_test (CONFIG_PM_DEBUG)");
	ASSERT_EQ(0, read_text("/sys/power/pm_test", old, sizeof(old)));
	ASSERT_EQ(0, sbo_create(self->fd, 65536, 0, &dev));
	ASSERT_EQ(0, sbo_create(self->fd, 4096, DRM_SPYRE_BO_MAPPABLE, &map));
	ASSERT_EQ(0, sbo_create(self->fd, 65536, DRM_SPYRE_BO_HOST, &host));
	fill_pattern(host.map, 65536, 9);
	memcpy(want, host.map, 65536);
	spyre_prep_copy_va(cp, host.va, dev.va, 65536);
	ASSERT_EQ(0, srun(self->fd, self->q, cp, 1));
	memcpy(map.map, want, 4096);

	for (l = 0; l < 2; l++) {
		ASSERT_EQ(0, write_text("/sys/power/pm_test", levels[l]));
		/* "mem" if the platform has it (S3), else suspend-to-idle. */
		if (write_text("/sys/power/state", "mem"))
			ASSERT_EQ(0, write_text("/sys/power/state", "freeze"));
		spyre_diag("pm_test %s: suspended and resumed", levels[l]);
		memset(host.map, 0, 65536);
		spyre_prep_copy_va(cp, dev.va, host.va, 65536);
		ASSERT_EQ(0, srun(self->fd, self->q, cp, 1));
		ASSERT_EQ(0, memcmp(want, host.map, 65536));
		ASSERT_EQ(0, memcmp(want, map.map, 4096));
	}
	ASSERT_EQ(0, write_text("/sys/power/pm_test", "none"));
}

TEST_HARNESS_MAIN
