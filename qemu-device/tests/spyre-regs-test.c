// SPDX-License-Identifier: MIT
/*
 * Description: the spyre device's PCI identity, capabilities and BAR0
 * registers, driven directly through QEMU's qtest protocol (no guest kernel,
 * no driver): config space and capability list, every capability register
 * for the default and a configured device, the scratch register, register and
 * PCIe function-level reset, guest-error logging of misuse, and refusal of
 * invalid properties with a clear message.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qtest-client.h"
#include "spyre_hw.h"
#include "../../tests/tap.h"

#define DEV	4		/* -device spyre,addr=04.0 */
#define BAR0	0xe0000000u	/* inside q35's 32-bit PCI hole */

static uint32_t reg(struct qtest *qt, uint32_t off)
{
	return qtest_readl(qt, BAR0 + off);
}

static void test_config_space(struct qtest *qt, uint32_t queues)
{
	int msix, exp;

	TAP_EQ(SPYRE_PCI_VENDOR_ID, qpci_cfg_readw(qt, DEV, 0x00));
	TAP_EQ(SPYRE_PCI_DEVICE_ID, qpci_cfg_readw(qt, DEV, 0x02));
	TAP_EQ(SPYRE_PCI_REVISION, qpci_cfg_readb(qt, DEV, 0x08));
	TAP_EQ(SPYRE_PCI_CLASS, qpci_cfg_readw(qt, DEV, 0x0a));

	/* BAR0: 32-bit memory BAR of SPYRE_REGS_SIZE (size probe). */
	qpci_cfg_writel(qt, DEV, 0x10, 0xffffffff);
	TAP_EQ((uint32_t)~(SPYRE_REGS_SIZE - 1), qpci_cfg_readl(qt, DEV, 0x10) & ~0xfu);
	TAP_EQ(0, qpci_cfg_readl(qt, DEV, 0x10) & 0x1);

	/* MSI-X: one vector per queue plus the error vector, table in BAR1. */
	msix = qpci_find_cap(qt, DEV, 0x11);
	TAP_CHECK(msix != 0, "no MSI-X capability");
	if (msix) {
		TAP_EQ(queues + 1, (qpci_cfg_readw(qt, DEV, msix + 2) & 0x7ff) + 1u);
		TAP_EQ(SPYRE_BAR_MSIX, qpci_cfg_readl(qt, DEV, msix + 4) & 0x7);
	}

	/* PCIe endpoint with function-level reset. */
	exp = qpci_find_cap(qt, DEV, 0x10);
	TAP_CHECK(exp != 0, "no PCI Express capability");
	if (exp)
		TAP_CHECK(qpci_cfg_readl(qt, DEV, exp + 4) & (1u << 28), "FLR not advertised");
}

static void test_caps(struct qtest *qt, uint32_t cores, uint32_t spad, uint64_t mem,
		      uint32_t queues, uint32_t mhz)
{
	TAP_EQ(SPYRE_ID_MAGIC, reg(qt, SPYRE_REG_ID));
	TAP_EQ(SPYRE_HW_VERSION, reg(qt, SPYRE_REG_VERSION));
	TAP_EQ(cores, reg(qt, SPYRE_REG_CAP_CORES));
	TAP_EQ(spad, reg(qt, SPYRE_REG_CAP_SCRATCHPAD));
	TAP_EQ(SPYRE_STICK_BYTES, reg(qt, SPYRE_REG_CAP_STICK));
	TAP_EQ(queues, reg(qt, SPYRE_REG_CAP_QUEUES));
	TAP_EQ((uint32_t)mem, reg(qt, SPYRE_REG_CAP_MEM_LO));
	TAP_EQ((uint32_t)(mem >> 32), reg(qt, SPYRE_REG_CAP_MEM_HI));
	TAP_EQ(mhz, reg(qt, SPYRE_REG_CAP_CLOCK_MHZ));
	TAP_EQ(SPYRE_FEAT_MSIX | SPYRE_FEAT_QUEUES | SPYRE_FEAT_MMU | SPYRE_FEAT_MEM_WINDOW |
		    SPYRE_FEAT_FAULT_INJECT | SPYRE_FEAT_ENGINE |
		    (mem <= SPYRE_PEER_BAR_AUTO_MAX ? SPYRE_FEAT_PEER_BAR : 0),
	       reg(qt, SPYRE_REG_CAP_FEATURES));
	TAP_EQ(SPYRE_STATUS_READY, reg(qt, SPYRE_REG_STATUS));
}

static void test_scratch_and_reset(struct qtest *qt)
{
	uint32_t count;
	int exp;

	TAP_EQ(0, reg(qt, SPYRE_REG_SCRATCH));
	qtest_writel(qt, BAR0 + SPYRE_REG_SCRATCH, 0xa5a5f00d);
	TAP_EQ(0xa5a5f00d, reg(qt, SPYRE_REG_SCRATCH));

	/* Misuse is ignored, logged, and does not disturb state. */
	qtest_writel(qt, BAR0 + SPYRE_REG_ID, 0);
	TAP_EQ(SPYRE_ID_MAGIC, reg(qt, SPYRE_REG_ID));
	TAP_CHECK(qtest_log_contains(qt, "read-only register 0x0"), "no guest error for RO write");
	TAP_EQ(0, reg(qt, 0x800));
	TAP_CHECK(qtest_log_contains(qt, "read of unassigned register 0x800"),
		  "no guest error for unassigned read");
	qtest_writew(qt, BAR0 + SPYRE_REG_SCRATCH, 0x1234);
	TAP_EQ(0xa5a5f00d, reg(qt, SPYRE_REG_SCRATCH));
	TAP_CHECK(qtest_log_contains(qt, "non-32-bit write"), "no guest error for 16-bit write");
	count = reg(qt, SPYRE_REG_RESET_COUNT);
	qtest_writel(qt, BAR0 + SPYRE_REG_RESET, 0xdead);
	TAP_EQ(0xa5a5f00d, reg(qt, SPYRE_REG_SCRATCH));
	TAP_EQ(count, reg(qt, SPYRE_REG_RESET_COUNT));
	TAP_CHECK(qtest_log_contains(qt, "RESET: unknown value 0xdead"), "no guest error for bad reset");

	/* Register reset. */
	qtest_writel(qt, BAR0 + SPYRE_REG_RESET, SPYRE_RESET_DEVICE);
	TAP_EQ(0, reg(qt, SPYRE_REG_SCRATCH));
	TAP_EQ(count + 1, reg(qt, SPYRE_REG_RESET_COUNT));
	TAP_EQ(SPYRE_STATUS_READY, reg(qt, SPYRE_REG_STATUS));

	/* PCIe function-level reset: Device Control bit 15. */
	qtest_writel(qt, BAR0 + SPYRE_REG_SCRATCH, 0x77);
	exp = qpci_find_cap(qt, DEV, 0x10);
	if (exp) {
		qpci_cfg_writew(qt, DEV, exp + 8, qpci_cfg_readw(qt, DEV, exp + 8) | 0x8000);
		/* FLR resets config space too: map BAR0 again. */
		qpci_map_bar32(qt, DEV, 0, BAR0);
		TAP_EQ(0, reg(qt, SPYRE_REG_SCRATCH));
		TAP_EQ(count + 2, reg(qt, SPYRE_REG_RESET_COUNT));
		TAP_EQ(SPYRE_ID_MAGIC, reg(qt, SPYRE_REG_ID));
	}
}

/* A QEMU with one device of @props: config space, capabilities, scratch and resets. */
static void device(const char *props, uint32_t cores, uint32_t spad, uint64_t mem,
		   uint32_t queues, uint32_t mhz)
{
	struct qtest qt;
	char extra[256];

	snprintf(extra, sizeof(extra), "-device spyre,addr=04.0%s%s", *props ? "," : "", props);
	if (!TAP_CHECK(qtest_start(&qt, extra) == 0, "QEMU with -device spyre,%s did not start",
		       props))
		return;
	test_config_space(&qt, queues);
	qpci_map_bar32(&qt, DEV, 0, BAR0);
	test_caps(&qt, cores, spad, mem, queues, mhz);
	test_scratch_and_reset(&qt);
	qtest_quit(&qt);
}

static void test_default_device(void)
{
	device("", 32, 2 << 20, 1ULL << 30, 16, 1500);
}

static void test_configured_device(void)
{
	device("cores=8,scratchpad-size=1M,mem-size=6G,queues=4,clock-mhz=1000",
	       8, 1 << 20, 6ULL << 30, 4, 1000);
}

/* The largest card: 128 GiB is accepted and reported without truncation. */
static void test_largest_device(void)
{
	device("mem-size=128G,queues=64", 32, 2 << 20, 128ULL << 30, 64, 1500);
}

/* QEMU must refuse a bad property with exit status 1 and name the problem. */
static void bad_prop(const char *props, const char *msg)
{
	char dev[128], out[8192];
	char *argv[] = { (char *)qtest_qemu_path(), "-M", "q35", "-accel", "qtest",
			 "-nodefaults", "-display", "none", "-L", "/usr/share/qemu",
			 "-L", "/usr/share/seabios", "-device", dev, NULL };
	int rc;

	snprintf(dev, sizeof(dev), "spyre,%s", props);
	rc = qtest_run_capture(argv, out, sizeof(out));
	TAP_CHECK(rc == 1, "-device %s: exit status %d, expected 1", dev, rc);
	TAP_CHECK(strstr(out, msg) != NULL, "-device %s: message lacks '%s': %s", dev, msg, out);
}

static void test_properties_listed(void)
{
	char out[8192];
	char *argv[] = { (char *)qtest_qemu_path(), "-device", "spyre,help", NULL };
	static const char *const props[] = {
		"cores=", "scratchpad-size=", "mem-size=", "queues=", "clock-mhz=",
		"lpddr-mbps=", "dma-burst-bytes=", "dma-burst-overhead-bytes=", "ring-bytes-per-cycle=",
		"ring-hop-cycles=", "peer-bar=",
	};
	size_t i;

	TAP_EQ(0, qtest_run_capture(argv, out, sizeof(out)));
	for (i = 0; i < sizeof(props) / sizeof(props[0]); i++)
		TAP_CHECK(strstr(out, props[i]) != NULL, "spyre,help does not list %s", props[i]);
}

static void test_bad_properties(void)
{
	bad_prop("cores=0", "cores=0 is out of range (1..32)");
	bad_prop("cores=33", "cores=33 is out of range (1..32)");
	bad_prop("queues=0", "queues=0 is out of range (1..64)");
	bad_prop("queues=65", "queues=65 is out of range (1..64)");
	bad_prop("mem-size=129G", "must be a multiple of 2 MiB from 64 MiB to 128 GiB");
	bad_prop("mem-size=65M", "must be a multiple of 2 MiB from 64 MiB to 128 GiB");
	bad_prop("scratchpad-size=3M", "must be a power of two from 64 KiB to 16 MiB");
	bad_prop("clock-mhz=5", "clock-mhz=5 is out of range");
	bad_prop("lpddr-mbps=0", "lpddr-mbps=0 (>= 1000)");
	bad_prop("dma-burst-bytes=100", "dma-burst-bytes=100 (128..1 MiB, multiple of 128)");
	bad_prop("dma-burst-bytes=4096,dma-burst-overhead-bytes=5000", "dma-burst-overhead-bytes=5000 (0..burst)");
	bad_prop("ring-bytes-per-cycle=0", "ring-bytes-per-cycle=0 (1..4096)");
	bad_prop("sriov-vfs=256", "sriov-vfs=256 is out of range (0..255)");
}

static const struct tap_case cases[] = {
	{ "default_device", test_default_device },
	{ "configured_device", test_configured_device },
	{ "largest_device", test_largest_device },
	{ "properties_listed", test_properties_listed },
	{ "bad_properties", test_bad_properties },
};

int main(int argc, char **argv)
{
	qtest_require_qemu();
	return TAP_RUN(cases, argc, argv);
}
