// SPDX-License-Identifier: MIT
/*
 * spyre-smi - list spyre devices and their capabilities.
 *
 * Usage: spyre-smi [-d INDEX] [-q]
 * Exit status: 0 devices listed, 1 no spyre device (the reason on stderr) or
 * one could not be opened or queried, 2 bad usage.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyre.h"
#include "spyre_hw.h"

#define EXIT_NO_DEVICE	1
#define EXIT_USAGE	2

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

/* A sysfs attribute of a PCI device as a number; -1 if unreadable. */
static long pci_attr(const char *dev, const char *attr)
{
	char path[PATH_MAX], buf[32];
	FILE *f;
	long v = -1;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", dev, attr);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f))
		v = strtol(buf, NULL, 0);
	fclose(f);
	return v;
}

/* No device was found: say why, from what sysfs shows. */
static void explain_no_device(void)
{
	const char *detail = spyre_last_error();
	char link[PATH_MAX], path[PATH_MAX];
	int cards = 0;
	bool loaded = !access("/sys/module/spyre", F_OK);
	struct dirent *d;
	DIR *dir;

	fprintf(stderr, "spyre-smi: no spyre device found:\n");
	if (detail[0])
		fprintf(stderr, "  device discovery failed: %s\n", detail);
	if (!loaded)
		fprintf(stderr, "  the spyre driver is not loaded (modprobe spyre, or insmod spyre.ko)\n");
	dir = opendir("/sys/bus/pci/devices");
	while (dir && (d = readdir(dir))) {
		const char *drv = NULL;
		ssize_t n;

		if (d->d_name[0] == '.' || pci_attr(d->d_name, "vendor") != SPYRE_PCI_VENDOR_ID ||
		    pci_attr(d->d_name, "device") != SPYRE_PCI_DEVICE_ID)
			continue;
		cards++;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver", d->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = '\0';
			drv = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
		}
		if (!drv)
			fprintf(stderr, "  spyre card %s is not bound to a driver%s\n", d->d_name,
				loaded ? " (unbound, or the spyre driver failed to probe it: see dmesg)" :
				"");
		else if (strcmp(drv, "spyre"))
			fprintf(stderr, "  spyre card %s is bound to driver '%s', not spyre\n",
				d->d_name, drv);
		else
			fprintf(stderr, "  spyre card %s is bound to spyre but has no /dev/accel node "
				"(is devtmpfs mounted, is udev running?)\n", d->d_name);
	}
	if (dir)
		closedir(dir);
	if (!cards)
		fprintf(stderr, "  no spyre card (PCI %04x:%04x) on the PCI bus\n",
			SPYRE_PCI_VENDOR_ID, SPYRE_PCI_DEVICE_ID);
}

static int show(int index)
{
	struct spyre_device_props p = { .size = sizeof(p) };
	spyre_device_t *dev;
	int ret;

	ret = spyre_device_open(index, &dev);
	if (ret) {
		fprintf(stderr, "spyre-smi: %s\n", spyre_last_error());
		if (ret == -EACCES || ret == -EPERM)
			fprintf(stderr, "spyre-smi: hint: using a card needs read and write access to "
				"its /dev/accel node; the spyre udev rule (70-spyre.rules) gives it "
				"to the render group\n");
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
		   "  -d INDEX  show only device INDEX (0, 1, ...)\n"
		   "  -q        print only the number of devices\n"
		   "  -h        this text\n"
		   "exit status: 0 devices listed, 1 no spyre device (the reason is printed)\n"
		   "or a device could not be opened or queried, 2 bad usage\n");
}

int main(int argc, char **argv)
{
	int opt, n, i, only = -1, quiet = 0, rc = 0;
	char *end;
	long v;

	while ((opt = getopt(argc, argv, "d:qh")) != -1) {
		switch (opt) {
		case 'd':
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < 0 || v > INT_MAX) {
				fprintf(stderr, "spyre-smi: -d: '%s' is not a device index (0, 1, ...)\n",
					optarg);
				return EXIT_USAGE;
			}
			only = (int)v;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "spyre-smi: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return EXIT_USAGE;
	}

	n = spyre_device_count();
	if (quiet)
		printf("%d\n", n);
	if (!n) {
		explain_no_device();
		return EXIT_NO_DEVICE;
	}
	if (quiet)
		return 0;
	if (only >= 0)
		return show(only) ? EXIT_NO_DEVICE : 0;
	printf("%d spyre device%s\n", n, n == 1 ? "" : "s");
	for (i = 0; i < n; i++)
		if (show(i))
			rc = EXIT_NO_DEVICE;
	return rc;
}
