// SPDX-License-Identifier: GPL-2.0-only
/*
 * Peer-to-peer between two spyre cards (docs/driver.md "Peer-to-peer"): a
 * device BO of the card with a peer BAR (the exporter) exported as a
 * dma-buf, imported by the other card's file and mapped in its context;
 * that card's COPYs read and write the exporter's memory, checked byte for
 * byte at odd offsets and sizes in both directions. Also: a self-import on
 * the exporting card is the BO itself; a card without a peer BAR refuses
 * to export (EOPNOTSUPP); a card that has no peer-to-peer path to the
 * exporter (tools/vm/run --flat) is refused at import (EXDEV); the dma-buf
 * keeps the exporter's memory alive after its file is gone; and processes
 * racing close, exit and SIGKILL with peer copies in flight leave no
 * kernel report and every counter and listing as it was; a function-level
 * reset of the exporter while the importer copies fails only the copies
 * that ran into it.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

static int get_features(int fd, uint64_t *v)
{
	struct drm_spyre_get_param p = { .param = DRM_SPYRE_PARAM_FEATURES };
	int ret = xioctl(fd, DRM_IOCTL_SPYRE_GET_PARAM, &p);

	*v = p.value;
	return ret;
}

/*
 * Whether cards @a and @b sit below one PCI bridge (a switch), the path the
 * driver allows on a kernel without CONFIG_PCI_P2PDMA: their sysfs device
 * paths share a component after the root bus.
 */
static int same_switch(int a, int b)
{
	char la[64], lb[64], pa[PATH_MAX], pb[PATH_MAX], na[64], nb[64];
	char *sa, *sb;
	size_t i;

	if (spyre_node(a, na, sizeof(na)) || spyre_node(b, nb, sizeof(nb)))
		return 0;
	snprintf(la, sizeof(la), "/sys/class/accel/%s/device", strrchr(na, '/') + 1);
	snprintf(lb, sizeof(lb), "/sys/class/accel/%s/device", strrchr(nb, '/') + 1);
	if (!realpath(la, pa) || !realpath(lb, pb))
		return 0;
	/* /sys/devices/pci0000:00/<first hop>/...: compare past the root bus. */
	sa = strstr(pa, "/pci");
	sb = strstr(pb, "/pci");
	if (!sa || !sb || !(sa = strchr(sa + 1, '/')) || !(sb = strchr(sb + 1, '/')))
		return 0;
	for (i = 1; sa[i] && sa[i] == sb[i] && sa[i] != '/'; i++)
		;
	/* The first hop equal and both go deeper: a bridge above both. */
	return sa[i] == '/' && sb[i] == '/';
}

static int prime_export(int fd, uint32_t handle, int *dmabuf)
{
	struct drm_prime_handle ph = { .handle = handle, .flags = DRM_CLOEXEC | DRM_RDWR, .fd = -1 };
	int ret = xioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph);

	*dmabuf = ph.fd;
	return ret;
}

/* Import @dmabuf into @fd: handle, VA and size. */
static int prime_import(int fd, int dmabuf, struct sbo *bo)
{
	struct drm_prime_handle ph = { .fd = dmabuf };
	struct drm_spyre_bo_info info = { 0 };
	int ret = xioctl(fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &ph);

	memset(bo, 0, sizeof(*bo));
	if (ret)
		return ret;
	info.handle = ph.handle;
	ret = xioctl(fd, DRM_IOCTL_SPYRE_BO_INFO, &info);
	bo->handle = ph.handle;
	bo->va = info.va;
	bo->size = info.size;
	return ret;
}

/* Fill device BO @dev of @fd from the host with fill_pattern(@seed). */
static int fill_dev(int fd, uint32_t q, struct sbo *dev, unsigned int seed)
{
	uint8_t p[SPYRE_PKT_SIZE];
	struct sbo h;
	int ret = sbo_create(fd, dev->size, DRM_SPYRE_BO_HOST, &h);

	if (ret)
		return ret;
	fill_pattern(h.map, dev->size, seed);
	spyre_prep_copy_va(p, h.va, dev->va, dev->size);
	ret = srun(fd, q, p, 1);
	sbo_close(fd, &h);
	return ret;
}

/* Read @n bytes at @off of device BO @dev of @fd into @buf. */
static int read_dev(int fd, uint32_t q, struct sbo *dev, uint64_t off, uint64_t n, void *buf)
{
	uint8_t p[SPYRE_PKT_SIZE];
	struct sbo h;
	int ret = sbo_create(fd, n, DRM_SPYRE_BO_HOST, &h);

	if (ret)
		return ret;
	spyre_prep_copy_va(p, dev->va + off, h.va, n);
	ret = srun(fd, q, p, 1);
	if (!ret)
		memcpy(buf, h.map, n);
	sbo_close(fd, &h);
	return ret;
}

FIXTURE(p2p) {
	int fd[2];		/* [0] the exporter (has a peer BAR), [1] the importer */
	int card[2];
	uint32_t q[2];
	int path;		/* the importer can reach the exporter */
	int importer_exports;	/* the importer has a peer BAR too */
	struct spyre_snap start;
};

FIXTURE_SETUP(p2p)
{
	uint64_t f[2] = { 0, 0 };
	int i, fd[2];

	self->fd[0] = self->fd[1] = -1;
	spyre_snap_take(&self->start);
	fd[0] = spyre_open(0);
	fd[1] = spyre_open(1);
	if (fd[0] < 0 || fd[1] < 0) {
		if (fd[0] >= 0)
			close(fd[0]);
		SKIP(return, "two spyre cards needed");
	}
	ASSERT_EQ(0, get_features(fd[0], &f[0]));
	ASSERT_EQ(0, get_features(fd[1], &f[1]));
	if (!((f[0] | f[1]) & SPYRE_FEAT_PEER_BAR)) {
		close(fd[0]);
		close(fd[1]);
		SKIP(return, "no card has a peer BAR");
	}
	i = (f[0] & SPYRE_FEAT_PEER_BAR) ? 0 : 1;
	self->card[0] = i;
	self->card[1] = !i;
	self->fd[0] = fd[i];
	self->fd[1] = fd[!i];
	self->importer_exports = !!(f[!i] & SPYRE_FEAT_PEER_BAR);
	self->path = same_switch(0, 1);
	spyre_diag("exporter card %d, importer card %d, %s", self->card[0], self->card[1],
		   self->path ? "below one switch" : "no common bridge");
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, squeue_create(self->fd[i], 0, &self->q[i]));
}

FIXTURE_TEARDOWN(p2p)
{
	if (self->fd[0] >= 0)
		close(self->fd[0]);
	if (self->fd[1] >= 0)
		close(self->fd[1]);
}

/* After a test, both files closed: counters and listings back to where they started. */
static int snap_back(int fd[2], const struct spyre_snap *start)
{
	struct spyre_snap now;
	int i;

	for (i = 0; i < 2; i++) {
		if (fd[i] >= 0)
			close(fd[i]);
		fd[i] = -1;
	}

	spyre_snap_settle(&now, start, 10);
	if (!spyre_snap_same(start, &now)) {
		spyre_diag("not back: %s", spyre_snap_diff(start, &now));
		return 0;
	}
	return 1;
}

TEST_F(p2p, importer_copies_both_ways)
{
	/* Odd offsets and sizes: whole sticks, never whole pages. */
	const uint64_t size = 3 * 1024 * 1024 + 4096, off = 4096 * 5 + 384, n = 65536 + 640;
	uint8_t *want = malloc(size), *got = malloc(size), p[2][SPYRE_PKT_SIZE];
	struct sbo exp, imp, host, local;
	int dmabuf, ret;

	ASSERT_NE(NULL, want);
	ASSERT_NE(NULL, got);
	ASSERT_EQ(0, sbo_create(self->fd[0], size, 0, &exp));
	ASSERT_EQ(0, fill_dev(self->fd[0], self->q[0], &exp, 7));
	ASSERT_EQ(0, prime_export(self->fd[0], exp.handle, &dmabuf));
	ret = prime_import(self->fd[1], dmabuf, &imp);
	if (!self->path) {
		EXPECT_EQ(-EXDEV, ret);
		close(dmabuf);
		sbo_close(self->fd[0], &exp);
		goto out;
	}
	ASSERT_EQ(0, ret);
	EXPECT_EQ(size, imp.size);
	EXPECT_NE(0, imp.va);

	/* Peer -> importer's host memory. */
	fill_pattern(want, size, 7);
	ASSERT_EQ(0, sbo_create(self->fd[1], n, DRM_SPYRE_BO_HOST, &host));
	spyre_prep_copy_va(p[0], imp.va + off, host.va, n);
	ASSERT_EQ(0, srun(self->fd[1], self->q[1], p, 1));
	EXPECT_EQ(0, memcmp(host.map, want + off, n));

	/* Peer -> importer's device memory -> host (device to device across cards). */
	ASSERT_EQ(0, sbo_create(self->fd[1], n, 0, &local));
	memset(host.map, 0, n);
	spyre_prep_copy_va(p[0], imp.va + off + 128, local.va, n - 128);
	spyre_prep_copy_va(p[1], local.va, host.va, n - 128);
	ASSERT_EQ(0, srun(self->fd[1], self->q[1], p, 2));
	EXPECT_EQ(0, memcmp(host.map, want + off + 128, n - 128));

	/* Importer's host memory -> peer: the exporter reads it back. */
	fill_pattern(host.map, n, 99);
	spyre_prep_copy_va(p[0], host.va, imp.va + size - n, n);
	ASSERT_EQ(0, srun(self->fd[1], self->q[1], p, 1));
	ASSERT_EQ(0, read_dev(self->fd[0], self->q[0], &exp, 0, size, got));
	memcpy(want + size - n, host.map, n);
	EXPECT_EQ(0, memcmp(got, want, size));

	/* Exporter's view and importer's writes agree; the BO outlives the export fd. */
	close(dmabuf);
	sbo_close(self->fd[1], &host);
	sbo_close(self->fd[1], &local);
	sbo_close(self->fd[1], &imp);
	sbo_close(self->fd[0], &exp);
out:
	free(want);
	free(got);
	EXPECT_TRUE(snap_back(self->fd, &self->start));
}

/* The exporter's file goes first: the dma-buf keeps the memory and its bytes. */
TEST_F(p2p, exporter_closes_first)
{
	const uint64_t size = 256 * 1024;
	uint8_t *want = malloc(size), p[SPYRE_PKT_SIZE];
	struct sbo exp, imp, host;
	int dmabuf;

	if (!self->path)
		SKIP(free(want); return, "no peer-to-peer path between the cards");
	ASSERT_EQ(0, sbo_create(self->fd[0], size, 0, &exp));
	ASSERT_EQ(0, fill_dev(self->fd[0], self->q[0], &exp, 3));
	ASSERT_EQ(0, prime_export(self->fd[0], exp.handle, &dmabuf));
	ASSERT_EQ(0, prime_import(self->fd[1], dmabuf, &imp));
	close(dmabuf);
	close(self->fd[0]);
	self->fd[0] = -1;

	ASSERT_EQ(0, sbo_create(self->fd[1], size, DRM_SPYRE_BO_HOST, &host));
	spyre_prep_copy_va(p, imp.va, host.va, size);
	ASSERT_EQ(0, srun(self->fd[1], self->q[1], p, 1));
	fill_pattern(want, size, 3);
	EXPECT_EQ(0, memcmp(host.map, want, size));
	sbo_close(self->fd[1], &host);
	sbo_close(self->fd[1], &imp);
	free(want);
	EXPECT_TRUE(snap_back(self->fd, &self->start));
}

/* Another file of the exporting card imports the BO itself: device memory. */
TEST_F(p2p, self_import_is_the_bo)
{
	const uint64_t size = 64 * 1024;
	uint8_t *want = malloc(size), p[SPYRE_PKT_SIZE];
	struct drm_spyre_bo_info info = { 0 };
	struct sbo exp, imp, host;
	int fd2, dmabuf;
	uint32_t q2;

	fd2 = spyre_open(self->card[0]);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, sbo_create(self->fd[0], size, 0, &exp));
	ASSERT_EQ(0, fill_dev(self->fd[0], self->q[0], &exp, 5));
	ASSERT_EQ(0, prime_export(self->fd[0], exp.handle, &dmabuf));
	ASSERT_EQ(0, prime_import(fd2, dmabuf, &imp));
	EXPECT_EQ(size, imp.size);
	info.handle = imp.handle;
	ASSERT_EQ(0, xioctl(fd2, DRM_IOCTL_SPYRE_BO_INFO, &info));
	EXPECT_EQ(0, info.flags & DRM_SPYRE_BO_HOST);
	ASSERT_EQ(0, squeue_create(fd2, 0, &q2));
	ASSERT_EQ(0, sbo_create(fd2, size, DRM_SPYRE_BO_HOST, &host));
	spyre_prep_copy_va(p, imp.va, host.va, size);
	ASSERT_EQ(0, srun(fd2, q2, p, 1));
	fill_pattern(want, size, 5);
	EXPECT_EQ(0, memcmp(host.map, want, size));
	sbo_close(fd2, &host);
	/* A dma-buf of device memory has no CPU mapping of its own. */
	EXPECT_EQ(MAP_FAILED, mmap(NULL, size, PROT_READ, MAP_SHARED, dmabuf, 0));
	close(dmabuf);
	sbo_close(fd2, &imp);
	close(fd2);
	sbo_close(self->fd[0], &exp);
	free(want);
	EXPECT_TRUE(snap_back(self->fd, &self->start));
}

/* A card without a peer BAR (the 128 GiB card) cannot export device memory. */
TEST_F(p2p, no_peer_bar_no_export)
{
	struct sbo bo;
	int dmabuf;

	if (self->importer_exports)
		SKIP(return, "both cards have a peer BAR");
	ASSERT_EQ(0, sbo_create(self->fd[1], 4096, 0, &bo));
	EXPECT_EQ(-EOPNOTSUPP, prime_export(self->fd[1], bo.handle, &dmabuf));
	sbo_close(self->fd[1], &bo);
	/* Host BOs export on every card, as before. */
	ASSERT_EQ(0, sbo_create(self->fd[1], 4096, DRM_SPYRE_BO_HOST, &bo));
	EXPECT_EQ(0, prime_export(self->fd[1], bo.handle, &dmabuf));
	close(dmabuf);
	sbo_close(self->fd[1], &bo);
}

static int send_fd(int sock, int fd)
{
	char c = 0, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl) };
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);

	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	return sendmsg(sock, &m, 0) == 1 ? 0 : -errno;
}

static int recv_fd(int sock)
{
	char c, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl) };
	struct cmsghdr *h;
	int fd;

	if (recvmsg(sock, &m, 0) != 1)
		return -1;
	h = CMSG_FIRSTHDR(&m);
	if (!h || h->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(h), sizeof(int));
	return fd;
}

#define RACE_COPIES 16
#define RACE_SIZE (512 * 1024)

/*
 * The exporter process: a device BO filled with fill_pattern(@seed), its
 * dma-buf sent to the importer; then, by @how, it exits at once (0), closes
 * the BO's handle and the file (1), or waits for the importer's word (2).
 */
static int race_exporter(int card, int sock, unsigned int seed, int how)
{
	struct sbo bo;
	uint32_t q;
	int fd = spyre_open(card), dmabuf;
	char c;

	if (fd < 0 || squeue_create(fd, 0, &q) || sbo_create(fd, RACE_SIZE, 0, &bo))
		return 10;
	bo.size = RACE_SIZE;
	if (fill_dev(fd, q, &bo, seed) || prime_export(fd, bo.handle, &dmabuf) ||
	    send_fd(sock, dmabuf))
		return 11;
	close(dmabuf);
	if (how == 1) {
		sbo_close(fd, &bo);
		close(fd);
	} else if (how == 2) {
		/* The importer's word, or end of file if it was killed: either way on. */
		if (read(sock, &c, 1) < 0)
			return 12;
	}
	return 0;
}

/*
 * The importer process: RACE_COPIES peer reads queued at once (then a byte
 * on @ready). By @how it
 * exits with them in flight (0), closes the imported BO then the file with
 * them in flight (1), or waits and checks every byte (2).
 */
static int race_importer(int card, int sock, int ready, unsigned int seed, int how)
{
	uint8_t p[RACE_COPIES][SPYRE_PKT_SIZE], *want;
	int fd = spyre_open(card), dmabuf = recv_fd(sock), i;
	struct sbo imp, host;
	uint32_t q, sync;
	struct ssubmit s;

	if (fd < 0 || dmabuf < 0 || squeue_create(fd, 0, &q) || ssyncobj_create(fd, &sync))
		return 20;
	if (prime_import(fd, dmabuf, &imp) ||
	    sbo_create(fd, RACE_SIZE, DRM_SPYRE_BO_HOST, &host))
		return 21;
	close(dmabuf);
	for (i = 0; i < RACE_COPIES; i++)
		spyre_prep_copy_va(p[i], imp.va, host.va, RACE_SIZE);
	memset(&s, 0, sizeof(s));
	s.queue = q;
	s.packets = p;
	s.count = RACE_COPIES;
	s.out = sync;
	if (ssubmit(fd, &s))
		return 22;
	/* Only the SIGKILL rounds read it: EPIPE is fine. */
	if (write(ready, "r", 1) != 1 && errno != EPIPE)
		return 26;
	if (how == 1) {
		sbo_close(fd, &imp);
		close(fd);
		return 0;
	}
	if (how == 0)
		return 0;
	if (ssyncobj_wait(fd, sync, 0, SPYRE_DONE_MS))
		return 23;
	want = malloc(RACE_SIZE);
	fill_pattern(want, RACE_SIZE, seed);
	i = memcmp(want, host.map, RACE_SIZE) ? 24 : 0;
	free(want);
	/* The exporter may be gone already (SIGPIPE ignored): only a word. */
	if (write(sock, "x", 1) != 1 && errno != EPIPE)
		return 25;
	return i;
}

static int wait_status(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

/*
 * Processes racing close and exit with peer copies in flight, in every
 * order: exporter gone before the importer's copies run, importer exiting,
 * closing, or SIGKILLed mid-copy; the importer that waits checks every byte.
 */
TEST_F(p2p, processes_race_close_and_exit)
{
	int round, sv[2], ready[2], e, i, ok = 0;
	char c;

	if (!self->path)
		SKIP(return, "no peer-to-peer path between the cards");
	signal(SIGPIPE, SIG_IGN);
	for (round = 0; round < 12; round++) {
		int how_e = round % 3, how_i = (round / 3) % 3, kill_i = round >= 9;
		pid_t pe, pi;

		if (how_e == 2 || kill_i)
			how_i = 2;	/* a word for a waiting exporter; copies still running when killed */
		ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
		ASSERT_EQ(0, pipe(ready));
		pe = fork();
		ASSERT_LE(0, pe);
		if (!pe) {
			close(sv[1]);
			close(ready[0]);
			close(ready[1]);
			_exit(race_exporter(self->card[0], sv[0], round, how_e));
		}
		pi = fork();
		ASSERT_LE(0, pi);
		if (!pi) {
			close(sv[0]);
			close(ready[0]);
			_exit(race_importer(self->card[1], sv[1], ready[1], round, how_i));
		}
		close(sv[0]);
		close(sv[1]);
		close(ready[1]);
		/* SIGKILL rounds: once the copies are queued, 0, 1 or 2 ms later. */
		if (kill_i && read(ready[0], &c, 1) == 1) {
			usleep(1000 * (round - 9));
			kill(pi, SIGKILL);
		}
		close(ready[0]);
		e = wait_status(pe);
		i = wait_status(pi);
		spyre_diag("round %d: exporter %d -> %d, importer %d%s -> %d", round, how_e, e,
			   how_i, kill_i ? " (SIGKILL)" : "", i);
		EXPECT_EQ(0, e);
		if (kill_i) {
			EXPECT_TRUE(i == 0 || i == 128 + SIGKILL);
		} else {
			EXPECT_EQ(0, i);
		}
		ok += !e && (!i || kill_i);
	}
	EXPECT_EQ(12, ok);
	/* Both cards still copy correctly, and nothing leaked. */
	EXPECT_EQ(0, scopy_round_trip(self->fd[0], self->q[0], 65536, 1));
	EXPECT_EQ(0, scopy_round_trip(self->fd[1], self->q[1], 65536, 2));
	EXPECT_TRUE(snap_back(self->fd, &self->start));
}

/*
 * A function-level reset of the exporter (sysfs "reset" of its PCI device)
 * while the importer copies from it: during the reset its BARs are off the
 * bus, so importer jobs then fail with a device DMA error (never a hang or
 * a kernel report); the exporter's memory survives, and once the reset is
 * done the importer's copies give the exporter's bytes again.
 */
TEST_F(p2p, exporter_flr_during_peer_copies)
{
	const uint64_t size = 1024 * 1024;
	uint8_t *want = malloc(size), p[SPYRE_PKT_SIZE];
	char pci[32], path[96], c;
	struct sbo exp, imp, host;
	int dmabuf, ready[2], i, good = 0, st;
	uint32_t q2;
	pid_t pid;

	if (!self->path)
		SKIP(free(want); return, "no peer-to-peer path between the cards");
	ASSERT_EQ(0, card_pci(self->card[0], pci, sizeof(pci)));
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/reset", pci);
	if (access(path, W_OK))
		SKIP(free(want); return, "%s cannot be written", path);
	ASSERT_EQ(0, sbo_create(self->fd[0], size, 0, &exp));
	ASSERT_EQ(0, fill_dev(self->fd[0], self->q[0], &exp, 11));
	fill_pattern(want, size, 11);
	ASSERT_EQ(0, prime_export(self->fd[0], exp.handle, &dmabuf));
	ASSERT_EQ(0, prime_import(self->fd[1], dmabuf, &imp));
	close(dmabuf);
	ASSERT_EQ(0, sbo_create(self->fd[1], size, DRM_SPYRE_BO_HOST, &host));
	ASSERT_EQ(0, pipe(ready));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* The importer: 40 copies, each waited for (5 s at most). */
		for (i = 0; i < 40; i++) {
			memset(host.map, 0, size);
			spyre_prep_copy_va(p, imp.va, host.va, size);
			if (srun(self->fd[1], self->q[1], p, 1))
				_exit(100 + i);
			good += !memcmp(host.map, want, size);
			if (i == 2 && write(ready[1], "r", 1) != 1)
				_exit(99);
		}
		/*
		 * Every failed copy is counted and the last was a DMA error of
		 * this card. (A TIMEOUT here, seen twice, was the driver's error
		 * handler acknowledging a restarted queue's next error unseen:
		 * spyre_submit_test back_to_back_faults_are_each_reported.)
		 */
		if (good < 40) {
			struct drm_spyre_queue_error e = { 0 };

			if (squeue_error(self->fd[1], self->q[1], &e) ||
			    e.error_count != (uint64_t)(40 - good) ||
			    e.fault.error != DRM_SPYRE_ERROR_FAULT || e.fault.hw_error != SPYRE_ERR_DMA) {
				fprintf(stderr, "# importer: %d good copies; queue errors %llu, last error %u, hw error %u\n",
					good, (unsigned long long)e.error_count, e.fault.error, e.fault.hw_error);
				_exit(98);
			}
		}
		_exit(good);
	}
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	close(ready[0]);
	EXPECT_EQ(0, write_text(path, "1"));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	spyre_diag("importer: %d of 40 copies during the exporter's FLR gave its bytes",
		   WEXITSTATUS(st));
	EXPECT_LT(WEXITSTATUS(st), 41);	/* 98: a failure that was not the importer's DMA error */
	EXPECT_LE(3, WEXITSTATUS(st));
	/* After the reset: a new queue of the importer copies the exporter's bytes. */
	ASSERT_EQ(0, squeue_create(self->fd[1], 0, &q2));
	memset(host.map, 0, size);
	spyre_prep_copy_va(p, imp.va, host.va, size);
	ASSERT_EQ(0, srun(self->fd[1], q2, p, 1));
	EXPECT_EQ(0, memcmp(host.map, want, size));
	sbo_close(self->fd[1], &host);
	sbo_close(self->fd[1], &imp);
	sbo_close(self->fd[0], &exp);
	free(want);
	EXPECT_TRUE(snap_back(self->fd, &self->start));
}

TEST_HARNESS_MAIN
