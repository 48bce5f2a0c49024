// SPDX-License-Identifier: GPL-2.0-only
/*
 * Description: GET_PARAM ABI of spyre.ko: the device node exists and belongs
 * to the spyre driver, every parameter returns the device's configured value,
 * and malformed requests fail with the documented errno.
 *
 * The expected values of the "configured" variant match the second device of
 * the VM that `make check` boots (tools/check: SPYRE_CHECK_DEV1).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "spyre_test.h"

static int get_param(int fd, __u32 param, __u64 *value)
{
	struct drm_spyre_get_param gp = { .param = param };
	int ret;

	ret = ioctl(fd, DRM_IOCTL_SPYRE_GET_PARAM, &gp);
	if (ret)
		return -errno;
	*value = gp.value;
	return 0;
}

TEST(device_node_is_accel_char_device)
{
	char path[64];
	struct stat st;

	if (spyre_node(0, path, sizeof(path)))
		SKIP(return, "no spyre device");
	ASSERT_EQ(0, stat(path, &st));
	ASSERT_TRUE(S_ISCHR(st.st_mode));
	/* DRM accel nodes use their own char major (261). */
	ASSERT_EQ(261, major(st.st_rdev));
}

FIXTURE(param) {
	int fd;
};

FIXTURE_VARIANT(param) {
	int index;
	__u64 cores, scratchpad, queues, mem_size, clock_mhz;
	__u64 features;		/* beyond the ones every card has */
};

/*
 * A card with the published defaults (docs/spyre-device.md); tools/check:
 * SPYRE_CHECK_DEV0="sriov-vfs=2", so it offers SR-IOV.
 */
FIXTURE_VARIANT_ADD(param, defaults) {
	.index = 0,
	.features = SPYRE_FEAT_SRIOV,
	.cores = 32,
	.scratchpad = 2 << 20,
	.queues = 16,
	.mem_size = 1ULL << 30,
	.clock_mhz = 1500,
};

/* tools/check: SPYRE_CHECK_DEV1="cores=8,scratchpad-size=1M,mem-size=128G,queues=4,clock-mhz=1000" */
FIXTURE_VARIANT_ADD(param, configured) {
	.index = 1,
	.cores = 8,
	.scratchpad = 1 << 20,
	.queues = 4,
	.mem_size = 128ULL << 30,
	.clock_mhz = 1000,
};

FIXTURE_SETUP(param)
{
	char path[64];

	self->fd = -1;
	if (spyre_node(variant->index, path, sizeof(path)))
		SKIP(return, "no spyre device %d", variant->index);
	self->fd = open(path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", path, strerror(errno));
}

FIXTURE_TEARDOWN(param)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(param, identity)
{
	__u64 v = 0;

	ASSERT_EQ(0, get_param(self->fd, DRM_SPYRE_PARAM_DEVICE_ID, &v));
	ASSERT_EQ((__u64)SPYRE_PCI_VENDOR_ID << 16 | SPYRE_PCI_DEVICE_ID, v);
	ASSERT_EQ(0, get_param(self->fd, DRM_SPYRE_PARAM_HW_VERSION, &v));
	ASSERT_EQ(SPYRE_HW_VERSION, v);
	ASSERT_EQ(0, get_param(self->fd, DRM_SPYRE_PARAM_FEATURES, &v));
	/* SPYRE_FEAT_PEER_BAR depends on mem-size and peer-bar: either. */
	ASSERT_EQ(SPYRE_FEAT_MSIX | SPYRE_FEAT_QUEUES | SPYRE_FEAT_MMU | SPYRE_FEAT_MEM_WINDOW |
		  SPYRE_FEAT_FAULT_INJECT | SPYRE_FEAT_ENGINE | variant->features,
		  v & ~(__u64)SPYRE_FEAT_PEER_BAR);
}

TEST_F(param, capabilities)
{
	__u64 v = 0;

	ASSERT_EQ(0, get_param(self->fd, DRM_SPYRE_PARAM_NUM_CORES, &v));
	ASSERT_EQ(variant->cores, v);
	ASSERT_EQ(0, get_param(self->fd, DRM_SPYRE_PARAM_SCRATCHPAD_BYTES, &v));
	ASSERT_EQ(variant->scratchpad, v);
	ASSERT_EQ(0, get_param(self->fd, DRM_SPYRE_PARAM_STICK_BYTES, &v));
	ASSERT_EQ(128, v);
	ASSERT_EQ(0, get_param(self->fd, DRM_SPYRE_PARAM_NUM_QUEUES, &v));
	ASSERT_EQ(variant->queues, v);
	ASSERT_EQ(0, get_param(self->fd, DRM_SPYRE_PARAM_MEM_SIZE, &v));
	ASSERT_EQ(variant->mem_size, v);
	ASSERT_EQ(0, get_param(self->fd, DRM_SPYRE_PARAM_CLOCK_MHZ, &v));
	ASSERT_EQ(variant->clock_mhz, v);
}

TEST_F(param, value_is_output_only)
{
	struct drm_spyre_get_param gp = {
		.param = DRM_SPYRE_PARAM_STICK_BYTES,
		.value = 0xdeadbeefdeadbeefULL,
	};

	ASSERT_EQ(0, ioctl(self->fd, DRM_IOCTL_SPYRE_GET_PARAM, &gp));
	ASSERT_EQ(128, gp.value);
}

TEST_F(param, unknown_param_is_einval)
{
	static const __u32 bad[] = { DRM_SPYRE_PARAM_COUNT, 0x80000000u, 0xffffffffu };
	unsigned int i;
	__u64 v = 42;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-EINVAL, get_param(self->fd, bad[i], &v)) TH_LOG("param 0x%x", bad[i]);
	}
	ASSERT_EQ(42, v);
}

TEST_F(param, nonzero_reserved_is_einval)
{
	struct drm_spyre_get_param gp = {
		.param = DRM_SPYRE_PARAM_NUM_CORES,
		.reserved = 1,
	};

	ASSERT_EQ(-1, ioctl(self->fd, DRM_IOCTL_SPYRE_GET_PARAM, &gp));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_EQ(0, gp.value);
}

TEST_F(param, unknown_ioctl_is_einval)
{
	__u64 buf[2] = { 0, 0 };

	ASSERT_EQ(-1, ioctl(self->fd, DRM_IOWR(DRM_COMMAND_BASE + 0x3f, __u64[2]), buf));
	ASSERT_EQ(EINVAL, errno);
}

TEST_F(param, bad_user_pointer_is_efault)
{
	ASSERT_EQ(-1, ioctl(self->fd, DRM_IOCTL_SPYRE_GET_PARAM, (void *)16));
	ASSERT_EQ(EFAULT, errno);
}

TEST_HARNESS_MAIN
