// SPDX-License-Identifier: GPL-2.0-only
/*
 * Description: SR-IOV of spyre.ko on card 0 (a card with sriov-vfs=N,
 * docs/driver.md "SR-IOV"): `echo 2 > sriov_numvfs` gives two VFs bound as
 * cards of their own, each with a third of the card (the even split); a VF
 * cannot reach past its partition (a BO larger than it is -EINVAL, a COPY
 * past its whole-partition BO faults at the first address past it) and the
 * other VF's bytes stay as they were; a hang injected on one VF times out and
 * recovers that VF while the other's copies complete byte for byte;
 * disabling the VFs with a VF file open is safe (the file gets -ENODEV, the
 * PF works on, the VFs come back); the module parameter vf_mem_mb sets
 * the partition size, too much is -ENOSPC, a PF BO where the partitions
 * would go is -EBUSY; the PF stays awake (runtime PM) while VFs exist and
 * suspends once they are gone. SKIPs on a kernel without
 * CONFIG_PCI_IOV or a card without SR-IOV. Runs as root in the test VM.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

#define NVF 2

/* The accel node of PCI function @pci, opened; waits for it up to 10 s. */
static int open_pci_accel(const char *pci)
{
	char dir[256], path[300];
	int tries, fd;

	snprintf(dir, sizeof(dir), "/sys/bus/pci/devices/%s/accel", pci);
	for (tries = 0; tries < 1000; tries++) {
		DIR *d = opendir(dir);
		struct dirent *e;

		while (d && (e = readdir(d))) {
			if (strncmp(e->d_name, "accel", 5))
				continue;
			snprintf(path, sizeof(path), "/dev/accel/%s", e->d_name);
			fd = open(path, O_RDWR | O_CLOEXEC);
			if (fd >= 0) {
				closedir(d);
				return fd;
			}
		}
		if (d)
			closedir(d);
		usleep(10000);
	}
	return -ENODEV;
}

/* PCI name of VF @v of @pf (its virtfnV link); 0 or -errno. */
static int vf_pci(const char *pf, int v, char *pci, size_t len)
{
	char link[256];

	snprintf(link, sizeof(link), "/sys/bus/pci/devices/%s/virtfn%d", pf, v);
	return link_name(link, pci, len);
}

static int set_numvfs(const char *pf, int n)
{
	char path[256], val[16];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/sriov_numvfs", pf);
	snprintf(val, sizeof(val), "%d", n);
	return write_text(path, val);
}

static long pci_long(const char *pci, const char *attr)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", pci, attr);
	return read_sysfs_long("%s", path);
}

FIXTURE(sriov) {
	char pf[32];
	char vf[NVF][32];
	int fd[NVF];
	uint32_t q[NVF];
	uint64_t pf_mem;
};

FIXTURE_SETUP(sriov)
{
	char path[256];
	struct stat st;
	int v;

	self->fd[0] = self->fd[1] = -1;
	if (card_pci(0, self->pf, sizeof(self->pf)))
		SKIP(return, "no spyre device");
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/sriov_totalvfs", self->pf);
	if (stat(path, &st))
		SKIP(return, "kernel without SR-IOV (CONFIG_PCI_IOV)");
	if (pci_long(self->pf, "sriov_totalvfs") < NVF)
		SKIP(return, "card 0 has fewer than %d VFs (sriov-vfs)", NVF);
	self->pf_mem = pci_long(self->pf, "mem_total");
	ASSERT_EQ(0, set_numvfs(self->pf, NVF));
	for (v = 0; v < NVF; v++) {
		ASSERT_EQ(0, vf_pci(self->pf, v, self->vf[v], sizeof(self->vf[v])));
		self->fd[v] = open_pci_accel(self->vf[v]);
		ASSERT_LE(0, self->fd[v]);
		ASSERT_EQ(0, squeue_create(self->fd[v], DRM_SPYRE_PRIO_NORMAL, &self->q[v]));
	}
}

FIXTURE_TEARDOWN(sriov)
{
	int v;

	for (v = 0; v < NVF; v++)
		if (self->fd[v] >= 0)
			close(self->fd[v]);
	if (self->pf_mem)
		EXPECT_EQ(0, set_numvfs(self->pf, 0));
}

TEST_F(sriov, vfs_are_cards_with_a_partition_each)
{
	uint64_t part = (self->pf_mem / (NVF + 1)) & ~((2ull << 20) - 1);
	int v;

	ASSERT_EQ(NVF, pci_long(self->pf, "sriov_numvfs"));
	for (v = 0; v < NVF; v++) {
		ASSERT_EQ(SPYRE_PCI_VF_DEVICE_ID, pci_long(self->vf[v], "device"));
		ASSERT_EQ((long)part, pci_long(self->vf[v], "mem_total"));
		ASSERT_EQ(0, scopy_round_trip(self->fd[v], self->q[v], 65536, 1 + v));
	}
	/* The PF keeps its size; another count needs 0 first (the PCI core). */
	ASSERT_EQ((long)self->pf_mem, pci_long(self->pf, "mem_total"));
	ASSERT_EQ(-EBUSY, set_numvfs(self->pf, 1));
}

TEST_F(sriov, a_vf_cannot_reach_past_its_partition)
{
	uint64_t part = pci_long(self->vf[0], "mem_total");
	struct drm_spyre_queue_error e;
	struct sbo all0, all1, src, chk;
	uint8_t p[2][64], want[4096];

	/* More than the partition: refused. */
	ASSERT_EQ(-EINVAL, sbo_create(self->fd[0], part + 4096, 0, &all0));
	/* The whole partition of each VF, one BO each. */
	ASSERT_EQ(0, sbo_create(self->fd[0], part, 0, &all0));
	ASSERT_EQ(0, sbo_create(self->fd[1], part, 0, &all1));
	ASSERT_EQ(-ENOMEM, sbo_create(self->fd[0], 4096, 0, &chk));

	/* VF 1's first and last 4 KiB: a pattern. */
	ASSERT_EQ(0, sbo_create(self->fd[1], 4096, DRM_SPYRE_BO_HOST, &src));
	fill_pattern(src.map, 4096, 7);
	memcpy(want, src.map, sizeof(want));
	spyre_prep_copy_va(p[0], src.va, all1.va, 4096);
	spyre_prep_copy_va(p[1], src.va, all1.va + part - 4096, 4096);
	ASSERT_EQ(0, srun(self->fd[1], self->q[1], p, 2));

	/* VF 0: its last 4 KiB takes a copy; the next byte faults. */
	ASSERT_EQ(0, sbo_create(self->fd[0], 8192, DRM_SPYRE_BO_HOST, &chk));
	memset(chk.map, 0xee, 8192);
	spyre_prep_copy_va(p[0], chk.va, all0.va + part - 4096, 4096);
	ASSERT_EQ(0, srun(self->fd[0], self->q[0], p, 1));
	ASSERT_EQ(0, squeue_error(self->fd[0], self->q[0], &e));
	ASSERT_EQ(0, e.error_count);
	spyre_prep_copy_va(p[0], chk.va, all0.va + part - 4096, 8192);
	ASSERT_EQ(0, srun(self->fd[0], self->q[0], p, 1));
	ASSERT_EQ(0, squeue_error(self->fd[0], self->q[0], &e));
	ASSERT_EQ(1, e.error_count);
	ASSERT_EQ(DRM_SPYRE_ERROR_FAULT, e.fault.error);
	ASSERT_EQ(SPYRE_ERR_FAULT, e.fault.hw_error);
	ASSERT_EQ(all0.va + part, e.fault.addr);
	ASSERT_EQ(SPYRE_SOURCE_COPY_DST, SPYRE_FAULT_SOURCE(e.fault.info));
	/* Reading past it faults the same way. */
	spyre_prep_copy_va(p[0], all0.va + part, chk.va, 4096);
	ASSERT_EQ(0, srun(self->fd[0], self->q[0], p, 1));
	ASSERT_EQ(0, squeue_error(self->fd[0], self->q[0], &e));
	ASSERT_EQ(2, e.error_count);
	ASSERT_EQ(DRM_SPYRE_ERROR_FAULT, e.fault.error)
		TH_LOG("hw error %u, address %#llx", e.fault.hw_error, (unsigned long long)e.fault.addr);
	ASSERT_EQ(all0.va + part, e.fault.addr);
	ASSERT_EQ(0xee, ((uint8_t *)chk.map)[0]);

	/* VF 1's bytes are as it left them. */
	memset(src.map, 0, 4096);
	spyre_prep_copy_va(p[0], all1.va, src.va, 4096);
	ASSERT_EQ(0, srun(self->fd[1], self->q[1], p, 1));
	ASSERT_EQ(0, memcmp(want, src.map, 4096));
	memset(src.map, 0, 4096);
	spyre_prep_copy_va(p[0], all1.va + part - 4096, src.va, 4096);
	ASSERT_EQ(0, srun(self->fd[1], self->q[1], p, 1));
	ASSERT_EQ(0, memcmp(want, src.map, 4096));
	ASSERT_EQ(0, squeue_error(self->fd[1], self->q[1], &e));
	ASSERT_EQ(0, e.error_count);

	sbo_close(self->fd[0], &chk);
	sbo_close(self->fd[1], &src);
	sbo_close(self->fd[0], &all0);
	sbo_close(self->fd[1], &all1);
}

TEST_F(sriov, a_hang_on_one_vf_leaves_the_other_working)
{
	struct ssubmit s = { .queue = self->q[0], .count = 1 };
	struct drm_spyre_queue_error e;
	long resets0 = pci_long(self->vf[0], "resets");
	long resets1 = pci_long(self->vf[1], "resets");
	uint8_t p[64];
	uint32_t sync;
	int i;

	ASSERT_EQ(0, inject_hang_all(self->vf[0], 16));
	spyre_prep_hdr(p, SPYRE_PKT_OP_NOP);
	ASSERT_EQ(0, ssyncobj_create(self->fd[0], &sync));
	s.packets = p;
	s.out = sync;
	ASSERT_EQ(0, ssubmit(self->fd[0], &s));
	/* While VF 0 hangs, VF 1 copies, checked byte for byte. */
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, scopy_round_trip(self->fd[1], self->q[1], 1 << 20, 20 + i));
	ASSERT_EQ(0, ssyncobj_wait(self->fd[0], sync, 0, 15000));
	ASSERT_EQ(0, inject_disarm(self->vf[0]));
	ASSERT_EQ(0, squeue_error(self->fd[0], self->q[0], &e));
	ASSERT_EQ(DRM_SPYRE_ERROR_TIMEOUT, e.fault.error);
	ASSERT_EQ(resets0 + 1, pci_long(self->vf[0], "resets"));
	ASSERT_EQ(resets1, pci_long(self->vf[1], "resets"));
	ASSERT_EQ(0, squeue_error(self->fd[1], self->q[1], &e));
	ASSERT_EQ(0, e.error_count);
	/* VF 0 works again. */
	ASSERT_EQ(0, scopy_round_trip(self->fd[0], self->q[0], 65536, 30));
}

TEST_F(sriov, disabling_vfs_with_a_file_open_is_safe)
{
	struct drm_spyre_bo_create c = { .size = 4096 };
	struct sbo bo;
	int pf;

	ASSERT_EQ(0, sbo_create(self->fd[0], 65536, 0, &bo));
	ASSERT_EQ(0, set_numvfs(self->pf, 0));
	ASSERT_EQ(0, pci_long(self->pf, "sriov_numvfs"));
	ASSERT_EQ(-ENODEV, xioctl(self->fd[0], DRM_IOCTL_SPYRE_BO_CREATE, &c));
	close(self->fd[0]);
	close(self->fd[1]);
	self->fd[0] = self->fd[1] = -1;

	/* The PF works on, and has the VFs' memory back: half the card fits. */
	pf = spyre_open(0);
	ASSERT_LE(0, pf);
	ASSERT_EQ(0, sbo_create(pf, self->pf_mem / 2, 0, &bo));
	sbo_close(pf, &bo);
	close(pf);
	/* And the VFs come back. */
	ASSERT_EQ(0, set_numvfs(self->pf, NVF));
	self->fd[1] = open_pci_accel(self->vf[1]);
	ASSERT_LE(0, self->fd[1]);
	ASSERT_EQ(0, squeue_create(self->fd[1], DRM_SPYRE_PRIO_NORMAL, &self->q[1]));
	ASSERT_EQ(0, scopy_round_trip(self->fd[1], self->q[1], 65536, 40));
}

static int set_vf_mem_mb(unsigned int mb)
{
	char val[16];

	snprintf(val, sizeof(val), "%u", mb);
	return write_text("/sys/module/spyre/parameters/vf_mem_mb", val);
}

TEST_F(sriov, partition_size_and_what_does_not_fit)
{
	struct sbo big;
	int pf, v;

	ASSERT_EQ(0, set_numvfs(self->pf, 0));
	for (v = 0; v < NVF; v++) {
		close(self->fd[v]);
		self->fd[v] = -1;
	}

	/* vf_mem_mb: that much each. */
	ASSERT_EQ(0, set_vf_mem_mb(64));
	ASSERT_EQ(0, set_numvfs(self->pf, NVF));
	for (v = 0; v < NVF; v++) {
		ASSERT_EQ(0, vf_pci(self->pf, v, self->vf[v], sizeof(self->vf[v])));
		self->fd[v] = open_pci_accel(self->vf[v]);
		ASSERT_LE(0, self->fd[v]);
		ASSERT_EQ(64L << 20, pci_long(self->vf[v], "mem_total"));
		close(self->fd[v]);
		self->fd[v] = -1;
	}
	ASSERT_EQ(0, set_numvfs(self->pf, 0));

	/* As much as the card for each: ENOSPC. */
	ASSERT_EQ(0, set_vf_mem_mb(self->pf_mem >> 20));
	ASSERT_EQ(-ENOSPC, set_numvfs(self->pf, NVF));
	ASSERT_EQ(0, pci_long(self->pf, "sriov_numvfs"));
	ASSERT_EQ(0, set_vf_mem_mb(0));

	/* A PF BO where the VFs' partitions would go: EBUSY, until it goes. */
	pf = spyre_open(0);
	ASSERT_LE(0, pf);
	ASSERT_EQ(0, sbo_create(pf, self->pf_mem / 2, 0, &big));
	ASSERT_EQ(-EBUSY, set_numvfs(self->pf, NVF));
	ASSERT_EQ(0, pci_long(self->pf, "sriov_numvfs"));
	sbo_close(pf, &big);
	close(pf);
	ASSERT_EQ(0, set_numvfs(self->pf, NVF));
	ASSERT_EQ(NVF, pci_long(self->pf, "sriov_numvfs"));
}

/*
 * The PF holds a runtime-PM reference while VFs exist (a VF's config space
 * and BARs follow the PF's power state): with a 100 ms autosuspend delay
 * and nothing submitted to the PF it stays active in D0; with the VFs
 * disabled it suspends.
 */
TEST_F(sriov, the_pf_stays_awake_while_vfs_exist)
{
	char st[64], delay[32];

	if (pci_attr(self->pf, "power/autosuspend_delay_ms", delay, sizeof(delay)))
		SKIP(return, "kernel without CONFIG_PM");
	ASSERT_EQ(0, pci_attr_write(self->pf, "power/autosuspend_delay_ms", "100"));
	usleep(800000);
	EXPECT_EQ(0, pci_attr(self->pf, "power/runtime_status", st, sizeof(st)));
	EXPECT_STREQ("active", st);
	EXPECT_EQ(0, pci_attr(self->pf, "power_state", st, sizeof(st)));
	EXPECT_STREQ("D0", st);
	EXPECT_EQ(0, scopy_round_trip(self->fd[1], self->q[1], 4096, 9));

	ASSERT_EQ(0, set_numvfs(self->pf, 0));
	EXPECT_EQ(0, wait_runtime_status(self->pf, "suspended", 5000));
	EXPECT_EQ(0, pci_attr(self->pf, "power_state", st, sizeof(st)));
	EXPECT_STREQ("D3hot", st);
	ASSERT_EQ(0, pci_attr_write(self->pf, "power/autosuspend_delay_ms", delay));
}

TEST_HARNESS_MAIN
