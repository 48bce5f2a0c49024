// SPDX-License-Identifier: MIT
/*
 * Description: spyre SR-IOV through qtest (docs/spyre-device.md section 14):
 * the PF's SR-IOV capability (TotalVFs, VF device ID, offset, stride, the VF
 * BARs) and registers (CAP_VFS, FEAT_SRIOV); a card without sriov-vfs has
 * neither (sriov-vfs=256 is refused: spyre-regs-test). The partition registers: read
 * back, ignored while VFs are enabled, a VF's CAP_MEM is its partition, a
 * partition overlapping a lower VF's gives no memory. Isolation: a VF's COPY
 * at its partition's end works, at and past the end fails with FAULT/RANGE on
 * that VF's queue, and the neighbour's bytes (read through the PF's BAR2) are
 * unchanged; a hang injected on one VF leaves another VF's and the PF's
 * copies correct, and a queue reset recovers the hung VF; a VF's device reset
 * leaves the other's reset count alone. A VF's FLR resets that VF only; the
 * PF's RESET leaves the VFs, its FLR and a system reset remove them (the
 * partitions stay). Disabling VFs removes them and opens
 * the partition registers again; migration is blocked while VFs exist and
 * completes once they are gone.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyre-dev.h"

#define NVF		4
#define PART		(16ull << 20)		/* 16 MiB per VF */
#define PART0		(64ull << 20)		/* VF v's at PART0 + v * PART */
#define ECAM		0xb0000000ull		/* q35 MMCONFIG, enabled below */
#define PF_DEVFN	(SDEV_PCI_DEV << 3)
#define SRIOV_CAP	0x160
#define VF_BAR0(v)	(0xe2000000ull + (v) * (uint64_t)SPYRE_REGS_SIZE)
#define VF_BAR1(v)	(0xe3000000ull + (v) * 0x1000ull)

/* PCI_SRIOV_* of the PCIe specification (linux/pci_regs.h). */
#define SR_CTRL		0x08
#define SR_CTRL_VFE	0x0001
#define SR_CTRL_MSE	0x0008
#define SR_INITIAL_VF	0x0c
#define SR_TOTAL_VF	0x0e
#define SR_NUM_VF	0x10
#define SR_VF_OFFSET	0x14
#define SR_VF_STRIDE	0x16
#define SR_VF_DID	0x1a
#define SR_BAR		0x24

static struct sdev D;
static struct sdev VF[NVF];

static uint64_t ecam(unsigned devfn, unsigned off)
{
	return ECAM + ((uint64_t)devfn << 12) + off;
}

static uint32_t cfg_rd(unsigned devfn, unsigned off)
{
	return qtest_readl(&D.qt, ecam(devfn, off));
}

static uint16_t cfg_rdw(unsigned devfn, unsigned off)
{
	return qtest_readw(&D.qt, ecam(devfn, off));
}

static void cfg_wr(unsigned devfn, unsigned off, uint32_t val)
{
	qtest_writel(&D.qt, ecam(devfn, off), val);
}

static void cfg_wrw(unsigned devfn, unsigned off, uint16_t val)
{
	qtest_writew(&D.qt, ecam(devfn, off), val);
}

/* Extended capability @id of the function at @devfn, or 0. */
static unsigned ext_cap(unsigned devfn, unsigned id)
{
	unsigned off = 0x100;

	while (off) {
		uint32_t h = cfg_rd(devfn, off);

		if ((h & 0xffff) == id)
			return off;
		off = h >> 20;
	}
	return 0;
}

static void set_part(unsigned v, uint64_t base, uint64_t size)
{
	sdev_wr(&D, SPYRE_VF_PART(v, SPYRE_VF_BASE_LO), (uint32_t)base);
	sdev_wr(&D, SPYRE_VF_PART(v, SPYRE_VF_BASE_HI), (uint32_t)(base >> 32));
	sdev_wr(&D, SPYRE_VF_PART(v, SPYRE_VF_SIZE_LO), (uint32_t)size);
	sdev_wr(&D, SPYRE_VF_PART(v, SPYRE_VF_SIZE_HI), (uint32_t)(size >> 32));
}

static uint64_t get_part(unsigned v, unsigned reg)
{
	return sdev_rd(&D, SPYRE_VF_PART(v, reg)) |
	       (uint64_t)sdev_rd(&D, SPYRE_VF_PART(v, reg + 4)) << 32;
}

static void vfs_enable(unsigned n)
{
	unsigned v;

	cfg_wrw(PF_DEVFN, SRIOV_CAP + SR_NUM_VF, n);
	cfg_wrw(PF_DEVFN, SRIOV_CAP + SR_CTRL, SR_CTRL_VFE | SR_CTRL_MSE);
	for (v = 0; v < n; v++) {
		/* Memory space and bus master: the VF's BARs map, it DMAs. */
		cfg_wrw(PF_DEVFN + 1 + v, 0x04, 0x0006);
		sdev_vf_init(&D, &VF[v], VF_BAR0(v), 1 << 20);
	}
}

static void vfs_disable(void)
{
	cfg_wrw(PF_DEVFN, SRIOV_CAP + SR_CTRL, 0);
}

/* Copy @size bytes of host memory @h to device memory @dst of @d's queue 0. */
static int copy_to_dev(struct sdev *d, uint64_t seq, uint64_t h, uint64_t dst, uint64_t size)
{
	uint8_t p[64];

	pkt_copy(p, seq, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, dst, size);
	sdev_submit(d, 0, p);
	return sdev_wait(d, 0, 5000);
}

/* Restart @d's queue 0 past its failed packet. */
static void skip_failed(struct sdev *d)
{
	uint8_t nop[64];

	pkt_nop(nop, 9999, 0);
	sdev_push(d, 0, nop);
	sdev_queue_skip(d, 0);
	sdev_doorbell(d, 0);
	TAP_EQ(0, sdev_wait(d, 0, 2000));
}

static void setup(void)
{
	unsigned v;

	/* q35 PCIEXBAR: MMCONFIG at ECAM, 256 buses, enabled. */
	qpci_cfg_writel(&D.qt, 0, 0x64, 0);
	qpci_cfg_writel(&D.qt, 0, 0x60, (uint32_t)ECAM | 1);
	/* The VF BARs: BAR0 32-bit, BAR1 32-bit (MSI-X), BAR2 64-bit (left at 0). */
	cfg_wr(PF_DEVFN, SRIOV_CAP + SR_BAR + 0, (uint32_t)VF_BAR0(0));
	cfg_wr(PF_DEVFN, SRIOV_CAP + SR_BAR + 4, (uint32_t)VF_BAR1(0));
	for (v = 0; v < NVF; v++)
		set_part(v, PART0 + v * PART, PART);
}

static void test_capability(void)
{
	struct sdev plain;

	TAP_EQ(SRIOV_CAP, ext_cap(PF_DEVFN, 0x0010));
	TAP_EQ(0x100, ext_cap(PF_DEVFN, 0x000e));		/* ARI */
	TAP_EQ(NVF, cfg_rdw(PF_DEVFN, SRIOV_CAP + SR_TOTAL_VF));
	TAP_EQ(NVF, cfg_rdw(PF_DEVFN, SRIOV_CAP + SR_INITIAL_VF));
	TAP_EQ(0, cfg_rdw(PF_DEVFN, SRIOV_CAP + SR_NUM_VF));
	TAP_EQ(1, cfg_rdw(PF_DEVFN, SRIOV_CAP + SR_VF_OFFSET));
	TAP_EQ(1, cfg_rdw(PF_DEVFN, SRIOV_CAP + SR_VF_STRIDE));
	TAP_EQ(SPYRE_PCI_VF_DEVICE_ID, cfg_rdw(PF_DEVFN, SRIOV_CAP + SR_VF_DID));
	TAP_EQ(NVF, sdev_rd(&D, SPYRE_REG_CAP_VFS));
	TAP_CHECK(sdev_rd(&D, SPYRE_REG_CAP_FEATURES) & SPYRE_FEAT_SRIOV, "PF lacks FEAT_SRIOV");
	TAP_CHECK(!(sdev_rd(&D, SPYRE_REG_CAP_FEATURES) & SPYRE_FEAT_VF), "PF has FEAT_VF");
	/* VF BAR sizes: write all ones, read the size mask back. */
	cfg_wr(PF_DEVFN, SRIOV_CAP + SR_BAR, 0xffffffff);
	TAP_EQ(~(uint32_t)(SPYRE_REGS_SIZE - 1), cfg_rd(PF_DEVFN, SRIOV_CAP + SR_BAR));
	cfg_wr(PF_DEVFN, SRIOV_CAP + SR_BAR, (uint32_t)VF_BAR0(0));
	TAP_EQ(0xc, cfg_rd(PF_DEVFN, SRIOV_CAP + SR_BAR + 8) & 0xf);	/* 64-bit prefetchable */

	/* Without sriov-vfs: no capability, no registers. */
	TAP_EQ(0, sdev_start(&plain, "", 64));
	qpci_cfg_writel(&plain.qt, 0, 0x64, 0);
	qpci_cfg_writel(&plain.qt, 0, 0x60, (uint32_t)ECAM | 1);
	TAP_EQ(0, qtest_readl(&plain.qt, ecam(PF_DEVFN, 0x100)) & 0xffff);
	TAP_EQ(0, sdev_rd(&plain, SPYRE_REG_CAP_VFS));
	TAP_EQ(0, sdev_rd(&plain, SPYRE_VF_PART(0, SPYRE_VF_SIZE_LO)));
	TAP_CHECK(!(sdev_rd(&plain, SPYRE_REG_CAP_FEATURES) & SPYRE_FEAT_SRIOV), "FEAT_SRIOV");
	sdev_stop(&plain);
}

static void test_partitions(void)
{
	unsigned v;

	TAP_EQ(PART0 + PART, get_part(1, SPYRE_VF_BASE_LO));
	TAP_EQ(PART, get_part(1, SPYRE_VF_SIZE_LO));
	vfs_enable(NVF);
	TAP_EQ(NVF, cfg_rdw(PF_DEVFN, SRIOV_CAP + SR_NUM_VF));
	for (v = 0; v < NVF; v++) {
		TAP_EQ(SPYRE_ID_MAGIC, sdev_rd(&VF[v], SPYRE_REG_ID));
		TAP_EQ((uint32_t)PART, sdev_rd(&VF[v], SPYRE_REG_CAP_MEM_LO));
		TAP_EQ(0, sdev_rd(&VF[v], SPYRE_REG_CAP_MEM_HI));
		TAP_EQ(0, sdev_rd(&VF[v], SPYRE_REG_CAP_VFS));
		TAP_CHECK(sdev_rd(&VF[v], SPYRE_REG_CAP_FEATURES) & SPYRE_FEAT_VF, "VF %u", v);
		TAP_EQ(16, sdev_rd(&VF[v], SPYRE_REG_CAP_QUEUES));
		/* ARI at 0x100, Next Function Number 0. */
		TAP_EQ(0x100, ext_cap(PF_DEVFN + 1 + v, 0x000e));
		TAP_EQ(0, qtest_readl(&D.qt, ecam(PF_DEVFN + 1 + v, 0x104)) >> 8 & 0xff);
		/* A VF has no partition registers. */
		TAP_EQ(0, sdev_rd(&VF[v], SPYRE_VF_PART(0, SPYRE_VF_SIZE_LO)));
	}
	/* Ignored while VFs are enabled, with a guest error. */
	set_part(0, 0, 2 << 20);
	TAP_EQ(PART0, get_part(0, SPYRE_VF_BASE_LO));
	TAP_EQ(PART, get_part(0, SPYRE_VF_SIZE_LO));
	TAP_CHECK(qtest_log_contains(&D.qt, "written while VFs are enabled"), "no guest error");
	/* Migration is blocked, with the reason. */
	{
		char reply[1024];

		qtest_qmp(&D.qt, "{\"execute\": \"migrate\", \"arguments\": "
			  "{\"uri\": \"exec:cat > /dev/null\"}}", reply, sizeof(reply));
		TAP_CHECK(strstr(reply, "SR-IOV VFs are enabled"), "migrate: %s", reply);
	}
	vfs_disable();
	/* VF Enable clear (NumVFs keeps its value on QEMU 10, as the spec has it). */
	TAP_EQ(0, cfg_rdw(PF_DEVFN, SRIOV_CAP + SR_CTRL) & SR_CTRL_VFE);
	TAP_EQ(0xffffffff, cfg_rd(PF_DEVFN + 1, 0));
	/* Without VFs the card migrates, its partitions in the stream. */
	{
		char reply[2048];
		int i;

		TAP_EQ(0, qtest_qmp(&D.qt, "{\"execute\": \"migrate\", \"arguments\": "
				    "{\"uri\": \"exec:cat > /dev/null\"}}", reply, sizeof(reply)));
		for (i = 0; i < 300; i++) {
			qtest_qmp(&D.qt, "{\"execute\": \"query-migrate\"}", reply, sizeof(reply));
			if (strstr(reply, "\"completed\"") || strstr(reply, "\"failed\""))
				break;
			usleep(100000);
		}
		TAP_CHECK(strstr(reply, "\"completed\""), "query-migrate: %s", reply);
		TAP_EQ(0, qtest_qmp(&D.qt, "{\"execute\": \"cont\"}", reply, sizeof(reply)));
	}

	/* Overlapping VF 0's, unaligned, past the end: no memory. */
	set_part(1, PART0 + PART / 2, PART);
	set_part(2, PART0 + 2 * PART + 4096, PART);
	set_part(3, 120ull << 20, PART);
	vfs_enable(NVF);
	TAP_EQ((uint32_t)PART, sdev_rd(&VF[0], SPYRE_REG_CAP_MEM_LO));
	TAP_EQ(0, sdev_rd(&VF[1], SPYRE_REG_CAP_MEM_LO));
	TAP_EQ(0, sdev_rd(&VF[2], SPYRE_REG_CAP_MEM_LO));
	TAP_EQ(0, sdev_rd(&VF[3], SPYRE_REG_CAP_MEM_LO));
	TAP_CHECK(qtest_log_contains(&D.qt, "overlaps VF 0's"), "no overlap guest error");
	{
		uint64_t h = sdev_alloc(&VF[1], 4096, 4096);

		/* A VF without memory: every device address faults. */
		sdev_queue_init(&VF[1], 0, 8, 0);
		TAP_EQ(-1, copy_to_dev(&VF[1], 1, h, 0, 128));
		TAP_EQ(SPYRE_ERR_FAULT, sdev_qrd(&VF[1], 0, SPYRE_Q_ERROR));
	}
	vfs_disable();
	for (v = 0; v < NVF; v++)
		set_part(v, PART0 + v * PART, PART);
}

static void test_isolation(void)
{
	uint8_t buf[256], ref[256];
	uint64_t h, nb;
	unsigned i;

	/* The neighbour's first bytes, through the PF's window. */
	for (i = 0; i < sizeof(ref); i++)
		ref[i] = (uint8_t)(i * 7 + 3);
	qtest_memwrite(&D.qt, SDEV_BAR2 + PART0 + PART, ref, sizeof(ref));

	vfs_enable(2);
	h = sdev_alloc(&VF[0], 4096, 4096);
	memset(buf, 0xa5, sizeof(buf));
	sdev_memwrite(&VF[0], h, buf, sizeof(buf));
	sdev_queue_init(&VF[0], 0, 8, 0);

	/* The last stick of the partition: fine, lands at PART0 + PART - 128. */
	TAP_EQ(0, copy_to_dev(&VF[0], 1, h, PART - 128, 128));
	qtest_memread(&D.qt, SDEV_BAR2 + PART0 + PART - 128, buf, 128);
	TAP_EQ(0xa5, buf[0]);
	TAP_EQ(0xa5, buf[127]);

	/* At the end: FAULT, RANGE, the faulting address is the VF's. */
	TAP_EQ(-1, copy_to_dev(&VF[0], 2, h, PART, 128));
	TAP_EQ(SPYRE_ERR_FAULT, sdev_qrd(&VF[0], 0, SPYRE_Q_ERROR));
	TAP_EQ(SPYRE_MMU_FAULT_RANGE,
	       SPYRE_FAULT_CAUSE(sdev_qrd(&VF[0], 0, SPYRE_Q_FAULT_INFO)));
	TAP_EQ((uint32_t)PART, sdev_qrd(&VF[0], 0, SPYRE_Q_FAULT_LO));
	skip_failed(&VF[0]);

	/* Straddling the end: the part past it never lands. */
	TAP_EQ(-1, copy_to_dev(&VF[0], 3, h, PART - 128, 256));
	TAP_EQ(SPYRE_ERR_FAULT, sdev_qrd(&VF[0], 0, SPYRE_Q_ERROR));
	skip_failed(&VF[0]);

	/* Far past it, and device-to-host from past it. */
	TAP_EQ(-1, copy_to_dev(&VF[0], 4, h, 1ull << 40, 128));
	skip_failed(&VF[0]);
	{
		uint8_t p[64];

		pkt_copy(p, 5, 0, SPYRE_AS_DEVPHYS, PART, SPYRE_AS_HOST, h, 128);
		sdev_submit(&VF[0], 0, p);
		TAP_EQ(-1, sdev_wait(&VF[0], 0, 5000));
		TAP_EQ(SPYRE_ERR_FAULT, sdev_qrd(&VF[0], 0, SPYRE_Q_ERROR));
		skip_failed(&VF[0]);
		sdev_memread(&VF[0], h, buf, 128);
		TAP_EQ(0xa5, buf[0]);		/* nothing of the neighbour's */
	}

	/* The neighbour's bytes are unchanged, and it sees them at 0. */
	qtest_memread(&D.qt, SDEV_BAR2 + PART0 + PART, buf, sizeof(buf));
	TAP_CHECK(!memcmp(buf, ref, sizeof(buf)), "VF 1's partition changed");
	nb = sdev_alloc(&VF[1], 4096, 4096);
	sdev_queue_init(&VF[1], 0, 8, 0);
	{
		uint8_t p[64];

		pkt_copy(p, 6, 0, SPYRE_AS_DEVPHYS, 0, SPYRE_AS_HOST, nb, sizeof(ref));
		sdev_submit(&VF[1], 0, p);
		TAP_EQ(0, sdev_wait(&VF[1], 0, 5000));
		sdev_memread(&VF[1], nb, buf, sizeof(buf));
		TAP_CHECK(!memcmp(buf, ref, sizeof(buf)), "VF 1 reads other bytes at 0");
	}
	vfs_disable();
}

static void test_hang_isolation(void)
{
	uint8_t p[64], buf[128];
	uint64_t h0, h1, hp;
	uint32_t count1;
	unsigned i;

	vfs_enable(2);
	h0 = sdev_alloc(&VF[0], 4096, 4096);
	h1 = sdev_alloc(&VF[1], 4096, 4096);
	hp = sdev_alloc(&D, 4096, 4096);
	sdev_queue_init(&VF[0], 0, 8, 0);
	sdev_queue_init(&VF[1], 0, 8, 0);
	sdev_queue_init(&D, 0, 8, 0);

	/* VF 0's queue 0 hangs; injections are per function. */
	sdev_wr(&VF[0], SPYRE_REG_INJECT, SPYRE_INJECT(0, SPYRE_INJECT_HANG));
	TAP_EQ(0, sdev_rd(&VF[1], SPYRE_REG_INJECT));
	TAP_EQ(0, sdev_rd(&D, SPYRE_REG_INJECT));
	pkt_nop(p, 10, 0);
	sdev_submit(&VF[0], 0, p);
	TAP_CHECK(sdev_wait_status(&VF[0], 0, SPYRE_QSTAT_BUSY, 5000), "VF 0 not BUSY");

	/* VF 1 and the PF work on, byte for byte. */
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i ^ 0x5c);
	sdev_memwrite(&VF[1], h1, buf, sizeof(buf));
	TAP_EQ(0, copy_to_dev(&VF[1], 11, h1, 4096, sizeof(buf)));
	pkt_copy(p, 12, 0, SPYRE_AS_DEVPHYS, 4096, SPYRE_AS_HOST, h1 + 1024, sizeof(buf));
	sdev_submit(&VF[1], 0, p);
	TAP_EQ(0, sdev_wait(&VF[1], 0, 5000));
	TAP_EQ(12, sdev_rd64(&VF[1], VF[1].q[0].compl));
	{
		uint8_t got[128];

		sdev_memread(&VF[1], h1 + 1024, got, sizeof(got));
		TAP_CHECK(!memcmp(got, buf, sizeof(got)), "VF 1's round trip differs");
		qtest_memread(&D.qt, SDEV_BAR2 + PART0 + PART + 4096, got, sizeof(got));
		TAP_CHECK(!memcmp(got, buf, sizeof(got)), "VF 1's bytes not at its partition");
	}
	pkt_copy(p, 13, 0, SPYRE_AS_HOST, hp, SPYRE_AS_DEVPHYS, 0, 128);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 5000));
	TAP_EQ(-2, sdev_wait(&VF[0], 0, 100));		/* still hung */

	/* A queue reset recovers VF 0; its device reset leaves VF 1 alone. */
	sdev_qwr(&VF[0], 0, SPYRE_Q_CTRL, SPYRE_QCTRL_RESET);
	sdev_queue_init(&VF[0], 0, 8, 0);
	TAP_EQ(0, copy_to_dev(&VF[0], 14, h0, 0, 128));
	TAP_EQ(14, sdev_rd64(&VF[0], VF[0].q[0].compl));
	count1 = sdev_rd(&VF[1], SPYRE_REG_RESET_COUNT);
	sdev_wr(&VF[0], SPYRE_REG_RESET, SPYRE_RESET_DEVICE);
	TAP_EQ(count1, sdev_rd(&VF[1], SPYRE_REG_RESET_COUNT));
	TAP_CHECK(sdev_qrd(&VF[1], 0, SPYRE_Q_STATUS) & SPYRE_QSTAT_ENABLED, "VF 1's queue stopped");
	TAP_EQ(0, copy_to_dev(&VF[1], 15, h1, 0, 128));

	/* Disabling with a VF mid-hang: the VF goes, the PF works on. */
	sdev_wr(&VF[1], SPYRE_REG_INJECT, SPYRE_INJECT(0, SPYRE_INJECT_HANG));
	pkt_nop(p, 16, 0);
	sdev_submit(&VF[1], 0, p);
	TAP_CHECK(sdev_wait_status(&VF[1], 0, SPYRE_QSTAT_BUSY, 5000), "VF 1 not BUSY");
	vfs_disable();
	/* VF Enable clear (NumVFs keeps its value on QEMU 10, as the spec has it). */
	TAP_EQ(0, cfg_rdw(PF_DEVFN, SRIOV_CAP + SR_CTRL) & SR_CTRL_VFE);
	pkt_copy(p, 17, 0, SPYRE_AS_HOST, hp, SPYRE_AS_DEVPHYS, 0, 128);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 5000));
	TAP_EQ(SPYRE_ID_MAGIC, sdev_rd(&D, SPYRE_REG_ID));
}

/* Initiate FLR through the PCIe capability's Device Control (at 0x80 + 8). */
static void flr(unsigned devfn)
{
	cfg_wrw(devfn, 0x80 + 8, cfg_rdw(devfn, 0x80 + 8) | 0x8000);
}

static void test_resets(void)
{
	uint32_t c0, c1;
	char reply[1024];

	/* A VF's FLR resets that VF only. */
	vfs_enable(2);
	c0 = sdev_rd(&VF[0], SPYRE_REG_RESET_COUNT);
	c1 = sdev_rd(&VF[1], SPYRE_REG_RESET_COUNT);
	sdev_wr(&VF[0], SPYRE_REG_SCRATCH, 0x1234);
	sdev_wr(&VF[1], SPYRE_REG_SCRATCH, 0x5678);
	flr(PF_DEVFN + 1);
	cfg_wrw(PF_DEVFN + 1, 0x04, 0x0006);	/* FLR cleared its command register */
	TAP_EQ(c0 + 1, sdev_rd(&VF[0], SPYRE_REG_RESET_COUNT));
	TAP_EQ(0, sdev_rd(&VF[0], SPYRE_REG_SCRATCH));
	TAP_EQ(c1, sdev_rd(&VF[1], SPYRE_REG_RESET_COUNT));
	TAP_EQ(0x5678, sdev_rd(&VF[1], SPYRE_REG_SCRATCH));
	TAP_EQ(2, cfg_rdw(PF_DEVFN, SRIOV_CAP + SR_NUM_VF));

	/* The PF's RESET register leaves the VFs; its FLR removes them. */
	sdev_wr(&D, SPYRE_REG_RESET, SPYRE_RESET_DEVICE);
	TAP_EQ(0x5678, sdev_rd(&VF[1], SPYRE_REG_SCRATCH));
	flr(PF_DEVFN);
	TAP_EQ(0, cfg_rdw(PF_DEVFN, SRIOV_CAP + SR_CTRL) & SR_CTRL_VFE);
	TAP_EQ(0xffffffff, cfg_rd(PF_DEVFN + 1, 0));
	sdev_pci_setup(&D);
	TAP_EQ(PART0 + PART, get_part(1, SPYRE_VF_BASE_LO));	/* partitions stay */

	/* A system reset with VFs enabled removes them too. */
	vfs_enable(2);
	TAP_EQ(0, qtest_qmp(&D.qt, "{\"execute\": \"system_reset\"}", reply, sizeof(reply)));
	usleep(200000);
	qpci_cfg_writel(&D.qt, 0, 0x64, 0);
	qpci_cfg_writel(&D.qt, 0, 0x60, (uint32_t)ECAM | 1);
	TAP_EQ(0, cfg_rdw(PF_DEVFN, SRIOV_CAP + SR_NUM_VF));
	TAP_EQ(0xffffffff, cfg_rd(PF_DEVFN + 1, 0));
	sdev_pci_setup(&D);
	TAP_EQ(SPYRE_ID_MAGIC, sdev_rd(&D, SPYRE_REG_ID));
	setup();
	vfs_enable(2);
	TAP_EQ((uint32_t)PART, sdev_rd(&VF[1], SPYRE_REG_CAP_MEM_LO));
	vfs_disable();
}

static const struct tap_case cases[] = {
	{ "capability", test_capability },
	{ "partitions", test_partitions },
	{ "isolation", test_isolation },
	{ "hang_isolation", test_hang_isolation },
	{ "resets", test_resets },
};

int main(int argc, char **argv)
{
	return SDEV_RUN(&D, "sriov-vfs=4,mem-size=128M", 256, setup, cases, argc, argv);
}
