// SPDX-License-Identifier: GPL-2.0-only
/*
 * Description: buffer objects of spyre.ko: creation in device and host
 * memory with their addresses and flags, every invalid argument with its
 * errno, BO_INFO/BO_WAIT, mmap of host and CPU-visible device BOs, clearing
 * of device memory between owners, memory accounting in sysfs, and PRIME
 * export/import between two open files.
 */
#include "kselftest_harness.h"
#include "spyre_test.h"

#define MiB (1ull << 20)

FIXTURE(bo) {
	int fd;
};

FIXTURE_SETUP(bo)
{
	self->fd = spyre_open(0);
	if (self->fd < 0)
		SKIP(return, "no spyre device");
}

FIXTURE_TEARDOWN(bo)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(bo, device_bo_has_va_and_no_mmap)
{
	struct sbo a, b;

	ASSERT_EQ(0, sbo_create(self->fd, 3 * MiB, 0, &a));
	ASSERT_NE(0, a.handle);
	ASSERT_LE(1 * MiB, a.va);		/* the first MiB is never mapped */
	ASSERT_EQ(0, a.va % (2 * MiB));		/* large BOs are 2 MiB aligned */
	ASSERT_EQ(0, a.mmap_offset);		/* not CPU visible */
	ASSERT_EQ(0, sbo_create(self->fd, 4096, 0, &b));
	ASSERT_EQ(0, b.va % 4096);
	/* Distinct BOs never overlap in the address space. */
	ASSERT_TRUE(b.va >= a.va + 3 * MiB || b.va + 4096 <= a.va);
	ASSERT_EQ(0, sbo_close(self->fd, &a));
	ASSERT_EQ(0, sbo_close(self->fd, &b));
}

TEST_F(bo, host_bo_mmap_read_write)
{
	struct sbo a;
	uint8_t *p;
	size_t i;

	ASSERT_EQ(0, sbo_create(self->fd, 64 * 1024 + 100, DRM_SPYRE_BO_HOST, &a));
	ASSERT_NE(0, a.mmap_offset);
	ASSERT_NE(NULL, a.map);
	p = a.map;
	for (i = 0; i < 64 * 1024; i++)
		ASSERT_EQ(0, p[i]);
	fill_pattern(p, 64 * 1024, 1);
	ASSERT_EQ((uint8_t)(4095 * 31 + 17), p[4095]);
	ASSERT_EQ(0, sbo_close(self->fd, &a));
}

TEST_F(bo, mappable_device_bo_mmap)
{
	struct sbo a;
	uint32_t *p;

	ASSERT_EQ(0, sbo_create(self->fd, 2 * MiB, DRM_SPYRE_BO_MAPPABLE, &a));
	ASSERT_NE(0, a.mmap_offset);
	p = a.map;
	p[0] = 0x12345678;
	p[(2 * MiB) / 4 - 1] = 0x9abcdef0;
	ASSERT_EQ(0x12345678, p[0]);
	ASSERT_EQ(0x9abcdef0, p[(2 * MiB) / 4 - 1]);
	ASSERT_EQ(0, sbo_close(self->fd, &a));
}

/*
 * A mappable BO spread over several buddy blocks (3 MiB + 4 KiB is not a
 * power of two): what the CPU writes through the mapping, page by page as
 * each is first touched, is what the device copies out, byte for byte.
 */
TEST_F(bo, mappable_device_bo_pages_match_the_device_view)
{
	const uint64_t size = 3 * MiB + 4096;
	uint8_t p[SPYRE_PKT_SIZE];
	struct sbo d, h;
	uint32_t q;

	ASSERT_EQ(0, squeue_create(self->fd, DRM_SPYRE_PRIO_NORMAL, &q));
	ASSERT_EQ(0, sbo_create(self->fd, size, DRM_SPYRE_BO_MAPPABLE, &d));
	ASSERT_EQ(0, sbo_create(self->fd, size, DRM_SPYRE_BO_HOST, &h));
	/* Private (copy-on-write) maps of device memory are refused. */
	EXPECT_EQ(MAP_FAILED, mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, self->fd,
				   d.mmap_offset));
	EXPECT_EQ(EINVAL, errno);
	fill_pattern(d.map, size, 5);
	spyre_prep_copy_va(p, d.va, h.va, size);
	ASSERT_EQ(0, srun(self->fd, q, p, 1));
	EXPECT_EQ(0, memcmp(d.map, h.map, size));
	ASSERT_EQ(0, sbo_close(self->fd, &d));
	ASSERT_EQ(0, sbo_close(self->fd, &h));
}

TEST_F(bo, device_memory_is_cleared_between_owners)
{
	struct sbo a, b;
	uint64_t *p;
	size_t i, n = 4 * MiB / 8;

	ASSERT_EQ(0, sbo_create(self->fd, 4 * MiB, DRM_SPYRE_BO_MAPPABLE, &a));
	p = a.map;
	for (i = 0; i < n; i++)
		p[i] = 0xdeadbeefcafef00dull;
	ASSERT_EQ(0, sbo_close(self->fd, &a));
	/* The allocator hands the same blocks out again: they must read as zero. */
	ASSERT_EQ(0, sbo_create(self->fd, 4 * MiB, DRM_SPYRE_BO_MAPPABLE, &b));
	p = b.map;
	for (i = 0; i < n; i += 509)
		ASSERT_EQ(0, p[i]);
	ASSERT_EQ(0, p[n - 1]);
	ASSERT_EQ(0, sbo_close(self->fd, &b));
}

TEST_F(bo, create_invalid_arguments)
{
	struct drm_spyre_bo_create c = { 0 };
	uint64_t mem = 0;
	struct drm_spyre_get_param gp = { .param = DRM_SPYRE_PARAM_MEM_SIZE };

	ASSERT_EQ(0, xioctl(self->fd, DRM_IOCTL_SPYRE_GET_PARAM, &gp));
	mem = gp.value;
	c.size = 0;
	ASSERT_EQ(-EINVAL, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_CREATE, &c));
	c.size = mem + 4096;
	ASSERT_EQ(-EINVAL, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_CREATE, &c));
	c.size = 4096;
	c.flags = 0x80;
	ASSERT_EQ(-EINVAL, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_CREATE, &c));
	c.flags = DRM_SPYRE_BO_HOST | DRM_SPYRE_BO_MAPPABLE;
	ASSERT_EQ(-EINVAL, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_CREATE, &c));
	ASSERT_EQ(-EFAULT, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_CREATE, (void *)8));
	/* More than the CPU-visible 256 MiB cannot be mappable. */
	c.flags = DRM_SPYRE_BO_MAPPABLE;
	c.size = 512 * MiB;
	ASSERT_EQ(-ENOMEM, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_CREATE, &c));
}

TEST_F(bo, info_and_wait)
{
	struct drm_spyre_bo_info i = { 0 };
	struct drm_spyre_bo_wait w = { 0 };
	struct sbo a;

	ASSERT_EQ(0, sbo_create(self->fd, 8192, DRM_SPYRE_BO_HOST, &a));
	i.handle = a.handle;
	ASSERT_EQ(0, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_INFO, &i));
	ASSERT_EQ(8192, i.size);
	ASSERT_EQ(DRM_SPYRE_BO_HOST, i.flags);
	ASSERT_EQ(a.va, i.va);
	ASSERT_EQ(a.mmap_offset, i.mmap_offset);
	i.pad = 1;
	ASSERT_EQ(-EINVAL, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_INFO, &i));
	i.pad = 0;
	i.handle = 0xdead;
	ASSERT_EQ(-ENOENT, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_INFO, &i));

	w.handle = a.handle;
	ASSERT_EQ(0, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_WAIT, &w));	/* idle */
	w.timeout_ns = -1;
	ASSERT_EQ(-EINVAL, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_WAIT, &w));
	w.timeout_ns = 0;
	w.pad = 1;
	ASSERT_EQ(-EINVAL, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_WAIT, &w));
	w.pad = 0;
	w.handle = 0xdead;
	ASSERT_EQ(-ENOENT, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_WAIT, &w));

	ASSERT_EQ(0, sbo_close(self->fd, &a));
	i.handle = a.handle;
	ASSERT_EQ(-ENOENT, xioctl(self->fd, DRM_IOCTL_SPYRE_BO_INFO, &i));
}

TEST_F(bo, sysfs_memory_accounting)
{
	const char *fmt = "/sys/class/accel/accel0/device/%s";
	long before, during, after;
	struct sbo a;

	before = read_sysfs_long(fmt, "mem_used");
	ASSERT_LE(0, before);
	ASSERT_EQ(0, sbo_create(self->fd, 16 * MiB, 0, &a));
	during = read_sysfs_long(fmt, "mem_used");
	ASSERT_EQ(before + (long)(16 * MiB), during);
	ASSERT_EQ(0, sbo_close(self->fd, &a));
	after = read_sysfs_long(fmt, "mem_used");
	ASSERT_EQ(before, after);
	ASSERT_EQ(1 << 30, read_sysfs_long(fmt, "mem_total"));
}

TEST_F(bo, prime_export_import_between_files)
{
	struct drm_prime_handle exp = { 0 }, imp = { 0 };
	struct drm_spyre_bo_info i = { 0 };
	struct sbo a;
	uint32_t *p;
	int fd2;

	fd2 = spyre_open(0);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, sbo_create(self->fd, 8192, DRM_SPYRE_BO_HOST, &a));
	((uint32_t *)a.map)[5] = 0xfeedbeef;
	exp.handle = a.handle;
	exp.flags = DRM_CLOEXEC | DRM_RDWR;
	ASSERT_EQ(0, xioctl(self->fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &exp));
	ASSERT_LE(0, exp.fd);
	imp.fd = exp.fd;
	ASSERT_EQ(0, xioctl(fd2, DRM_IOCTL_PRIME_FD_TO_HANDLE, &imp));
	/* The second file sees the same pages at an address of its own. */
	i.handle = imp.handle;
	ASSERT_EQ(0, xioctl(fd2, DRM_IOCTL_SPYRE_BO_INFO, &i));
	ASSERT_EQ(8192, i.size);
	ASSERT_LE(1 * MiB, i.va);
	ASSERT_NE(0, i.mmap_offset);
	p = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd2, i.mmap_offset);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0xfeedbeef, p[5]);
	munmap(p, 8192);
	close(exp.fd);
	ASSERT_EQ(0, sbo_close(self->fd, &a));
	close(fd2);
}

TEST_F(bo, handles_are_per_file)
{
	struct drm_spyre_bo_info i = { 0 };
	struct sbo a;
	int fd2 = spyre_open(0);

	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, sbo_create(self->fd, 4096, 0, &a));
	i.handle = a.handle;
	ASSERT_EQ(-ENOENT, xioctl(fd2, DRM_IOCTL_SPYRE_BO_INFO, &i));
	close(fd2);
	ASSERT_EQ(0, sbo_close(self->fd, &a));
}

TEST_HARNESS_MAIN
