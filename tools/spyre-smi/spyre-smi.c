// SPDX-License-Identifier: MIT
/*
 * spyre-smi - list spyre devices and their capabilities.
 *
 * Usage: spyre-smi [-d INDEX] [-q]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "spyre.h"

static void print_size(const char *label, uint64_t bytes, const char *suffix)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned int u = 0;
	uint64_t v = bytes;

	while (v >= 1024 && v % 1024 == 0 && u < 4) {
		v /= 1024;
		u++;
	}
	printf("  %-16s %llu %s%s\n", label, (unsigned long long)v, units[u], suffix);
}

static int show(int index)
{
	struct spyre_device_props p = { .size = sizeof(p) };
	spyre_device_t *dev;
	int ret;

	ret = spyre_device_open(index, &dev);
	if (ret) {
		fprintf(stderr, "spyre-smi: %s\n", spyre_last_error());
		return ret;
	}
	ret = spyre_device_get_props(dev, &p);
	if (ret) {
		fprintf(stderr, "spyre-smi: %s\n", spyre_last_error());
		spyre_device_close(dev);
		return ret;
	}
	printf("spyre%u: %s  PCI %s  [%04x:%04x]  hw %u.%u\n", p.index, p.devnode,
	       p.pci_address, p.pci_vendor, p.pci_device, p.hw_version >> 16,
	       p.hw_version & 0xffff);
	printf("  %-16s %u\n", "cores", p.num_cores);
	print_size("scratchpad", p.scratchpad_bytes, " per core");
	print_size("stick", p.stick_bytes, "");
	print_size("device memory", p.mem_size, "");
	printf("  %-16s %u\n", "queues", p.num_queues);
	printf("  %-16s %u MHz\n", "clock", p.clock_mhz);
	printf("  %-16s 0x%llx\n", "features", (unsigned long long)p.features);
	printf("  %-16s %d\n", "numa node", p.numa_node);
	spyre_device_close(dev);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: spyre-smi [-d INDEX] [-q]\n"
		   "  -d INDEX  show only device INDEX\n"
		   "  -q        print only the number of devices\n");
}

int main(int argc, char **argv)
{
	int opt, n, i, only = -1, quiet = 0, rc = 0;

	while ((opt = getopt(argc, argv, "d:qh")) != -1) {
		switch (opt) {
		case 'd':
			only = atoi(optarg);
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}

	n = spyre_device_count();
	if (n < 0) {
		fprintf(stderr, "spyre-smi: %s\n", spyre_last_error());
		return 1;
	}
	if (quiet) {
		printf("%d\n", n);
		return 0;
	}
	if (only >= 0)
		return show(only) ? 1 : 0;
	printf("%d spyre device%s\n", n, n == 1 ? "" : "s");
	for (i = 0; i < n; i++)
		if (show(i))
			rc = 1;
	return rc;
}
