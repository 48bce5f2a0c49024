// SPDX-License-Identifier: MIT
/*
 * spyre-busy-load - a workload with known figures for the spyre-smi test
 * (selftests/guest/spyre-smi-test): holds a device BO and a host BO of the
 * given sizes on card 0 and keeps one hardware queue busy without a gap
 * until STOPFILE exists (at most 600 s): each job WAITs on the device for a
 * semaphore (the host BO's first 8 bytes) the CPU raises every 300 ms, and
 * two jobs are always queued: when the CPU releases job k, job k + 1 has been
 * on the ring for 300 ms and the CPU submits job k + 2. The queue is never
 * idle however late the guest's CPU runs (a busy TCG host), so utilization
 * is 100 % by construction, and no job runs into the 2 s hang timeout while
 * the CPU keeps its 300 ms pace.
 * With -f, first one job that faults (a COPY from an unmapped address):
 * the card's fault counter grows by exactly 1.
 *
 * Usage: spyre-busy-load [-f] DEV_BYTES HOST_BYTES STOPFILE
 * Prints "ready" once the BOs exist and the card counts the first job busy; exit 0
 * when stopped, 1 on an error.
 */
#include "spyre_test.h"

static int fail(const char *what, int err)
{
	fprintf(stderr, "spyre-busy-load: %s: %s\n", what, strerror(-err));
	return 1;
}

static int submit_wait(int fd, uint32_t q, const struct sbo *sem, uint64_t value, uint32_t sync)
{
	struct ssubmit s = { .queue = q, .count = 1, .out = sync };
	uint8_t p[64];

	spyre_prep_sem(p, SPYRE_PKT_OP_WAIT, SPYRE_AS_VIRT, sem->va, value);
	s.packets = p;
	return ssubmit(fd, &s);
}

int main(int argc, char **argv)
{
	volatile uint64_t *semv;
	struct sbo dev, host;
	int fd, ret, fault = 0, a = 1;
	uint64_t k, dev_bytes, host_bytes;
	uint32_t q, sync;
	char pci[32];
	long busy0;
	time_t end;
	int i;

	if (argc > 1 && !strcmp(argv[1], "-f")) {
		fault = 1;
		a++;
	}
	if (argc - a != 3) {
		fprintf(stderr, "usage: spyre-busy-load [-f] DEV_BYTES HOST_BYTES STOPFILE\n");
		return 1;
	}
	dev_bytes = strtoull(argv[a], NULL, 0);
	host_bytes = strtoull(argv[a + 1], NULL, 0);
	fd = spyre_open(0);
	if (fd < 0)
		return fail("open card 0", -errno);
	ret = squeue_create(fd, DRM_SPYRE_PRIO_NORMAL, &q);
	ret = ret ?: ssyncobj_create(fd, &sync);
	if (ret)
		return fail("queue", ret);
	ret = sbo_create(fd, dev_bytes, 0, &dev);
	if (ret)
		return fail("device BO", ret);
	ret = sbo_create(fd, host_bytes, DRM_SPYRE_BO_HOST, &host);
	if (ret)
		return fail("host BO", ret);
	semv = host.map;
	*semv = 0;

	if (fault) {
		uint8_t p[64];

		/* The first MiB is never mapped: the device faults on it. */
		spyre_prep_copy_va(p, 0x1000, host.va + 4096, 128);
		srun(fd, q, p, 1);
	}

	/* Two jobs queued: the second is on the ring long before the first ends. */
	ret = submit_wait(fd, q, &host, 1, sync);
	ret = ret ?: submit_wait(fd, q, &host, 2, sync);
	if (ret) {
		*semv = 2;	/* whatever was queued may go */
		return fail("submit", ret);
	}
	/* "ready" once the card counts itself busy: job 1 is on the device. */
	if (card_pci(0, pci, sizeof(pci)))
		return fail("card 0's PCI address", -ENODEV);
	busy0 = read_sysfs_long("/sys/bus/pci/devices/%s/busy_ns", pci);
	for (i = 0; i < 500 && read_sysfs_long("/sys/bus/pci/devices/%s/busy_ns", pci) == busy0; i++)
		usleep(10000);
	if (busy0 < 0 || i == 500) {
		*semv = 2;
		return fail("card 0's busy_ns did not move in 5 s", -EIO);
	}
	printf("ready\n");
	fflush(stdout);

	end = time(NULL) + 600;
	for (k = 1; access(argv[a + 2], F_OK) && time(NULL) < end; k++) {
		usleep(300000);
		*semv = k;	/* job k may go: job k + 1, queued 300 ms ago, runs next */
		ret = submit_wait(fd, q, &host, k + 2, sync);
		if (ret) {
			*semv = k + 2;
			return fail("submit", ret);
		}
	}
	*semv = k + 1;	/* the two jobs still queued, k and k + 1 */
	ret = ssyncobj_wait(fd, sync, 0, 5000);
	if (ret)
		return fail("last job", ret);
	sbo_close(fd, &dev);
	sbo_close(fd, &host);
	close(fd);
	return 0;
}
