// SPDX-License-Identifier: MIT
/*
 * spyre-smi - spyre devices: capabilities, utilization, memory, resets,
 * faults and the processes using each card (docs/spyre-smi.md).
 *
 * Usage: spyre-smi [-d INDEX] [-q] [--json] [-l SECONDS [-c COUNT]] [-s MS]
 *
 * Utilization is the difference of the card's sysfs busy_ns over an
 * interval (the sample window, or the refresh interval with -l); the
 * process table comes from the DRM usage keys in /proc/<pid>/fdinfo of every
 * open spyre node (docs/driver.md "Per-client usage").
 *
 * Exit status: 0 devices shown, 1 no spyre device (the reason on stderr) or
 * one could not be opened or queried, 2 bad usage, 3 permission denied on a
 * device node.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spyre.h"
#include "spyre_hw.h"

#define EXIT_NO_DEVICE	1
#define EXIT_USAGE	2
#define EXIT_NO_ACCESS	3

#define SCHEMA_VERSION	1
#define NO_VALUE	UINT64_MAX	/* a counter that could not be read */

/* ---- small helpers ----------------------------------------------------------- */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000ull, .tv_nsec = ns % 1000000000ull };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Reads whose time is known to READ_AT_NS or better; else the best of READ_AT_TRIES. */
#define READ_AT_NS	200000ull
#define READ_AT_TRIES	20

/*
 * Read a small file into @buf (NUL-terminated); 0 or -errno. With @t, when
 * the kernel made up the contents: the middle of the clock readings taken
 * just before and after the read, retried while the two lie more than
 * READ_AT_NS apart (the reader was preempted, as a vCPU of a busy emulator
 * often is), so a utilization over a 200 ms sample is right to 0.1 %.
 */
static int read_file_at(const char *path, char *buf, size_t len, uint64_t *t)
{
	uint64_t t0, t1, best = UINT64_MAX;
	char tmp[4096];
	int try = 0, fd, err;
	ssize_t n;

	buf[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!t) {
		n = read(fd, buf, len - 1);
		err = n < 0 ? -errno : 0;
		buf[n < 0 ? 0 : n] = '\0';
		close(fd);
		return err;
	}
	if (len > sizeof(tmp))
		len = sizeof(tmp);
	do {
		t0 = mono_ns();
		n = pread(fd, tmp, len - 1, 0);
		t1 = mono_ns();
		if (n < 0) {
			err = -errno;
			close(fd);
			return err;
		}
		if (t1 - t0 < best) {
			best = t1 - t0;
			*t = t0 + best / 2;
			memcpy(buf, tmp, (size_t)n);
			buf[n] = '\0';
		}
	} while (best > READ_AT_NS && ++try < READ_AT_TRIES);
	close(fd);
	return 0;
}

static int read_file(const char *path, char *buf, size_t len)
{
	return read_file_at(path, buf, len, NULL);
}

/*
 * A sysfs attribute of a PCI device as a number; NO_VALUE if unreadable.
 * With @t, when it was read.
 */
static uint64_t pci_attr_at(const char *dev, const char *attr, uint64_t *t)
{
	char path[PATH_MAX], buf[64], *end;
	unsigned long long v;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", dev, attr);
	if (read_file_at(path, buf, sizeof(buf), t))
		return NO_VALUE;
	errno = 0;
	v = strtoull(buf, &end, 0);
	if (errno || end == buf)
		return NO_VALUE;
	return v;
}

static uint64_t pci_attr(const char *dev, const char *attr)
{
	return pci_attr_at(dev, attr, NULL);
}

/* "16 MiB", "1.5 GiB", "512 B": exact when a multiple, else one decimal. */
static const char *fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned int u = 0;
	double v = (double)bytes;

	if (bytes == NO_VALUE) {
		snprintf(buf, len, "-");
		return buf;
	}
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (v == floor(v))
		snprintf(buf, len, "%.0f %s", v, units[u]);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

/* ---- clients from /proc/<pid>/fdinfo ---------------------------------------- */

/* One open spyre file as one process's fdinfo shows it. */
struct client {
	int pid;
	char comm[32];
	char pdev[32];
	uint64_t id;		/* drm-client-id */
	uint64_t engine_ns;	/* drm-engine-compute */
	uint64_t dev_bytes;	/* drm-total-device */
	uint64_t host_bytes;	/* drm-total-host */
	uint64_t t_ns;		/* when its fdinfo was read (CLOCK_MONOTONIC) */
};

/*
 * Each counter is paired with the time it was read, so the time the scan
 * itself takes does not skew a rate.
 */
struct sample {
	uint64_t t_ns;			/* CLOCK_MONOTONIC, end of the sample */
	uint64_t *busy_ns;		/* per shown device: sysfs busy_ns */
	uint64_t *busy_t_ns;		/* when each was read */
	struct client *clients;
	size_t nclients, cap;
	unsigned int unreadable;	/* processes whose fd table we may not read */
};

/* The value of "key:<blanks>value" in fdinfo text; NULL if absent. */
static const char *fdinfo_value(const char *info, const char *key, char *val, size_t len)
{
	size_t klen = strlen(key);
	const char *line = info, *v, *end;

	while (line && *line) {
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			v = line + klen + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			end = strchr(v, '\n');
			if (!end)
				end = v + strlen(v);
			snprintf(val, len, "%.*s", (int)(end - v), v);
			return val;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return NULL;
}

/* A number key with its unit (KiB, MiB, ns) applied; 0 if absent. */
static uint64_t fdinfo_u64(const char *info, const char *key)
{
	char val[64], *end;
	uint64_t v;

	if (!fdinfo_value(info, key, val, sizeof(val)))
		return 0;
	v = strtoull(val, &end, 10);
	if (!strcmp(end, " KiB"))
		v <<= 10;
	else if (!strcmp(end, " MiB"))
		v <<= 20;
	return v;
}

static void sample_add(struct sample *s, const struct client *c)
{
	size_t i;

	/* A dup()ed descriptor is the same client: count it once per process. */
	for (i = 0; i < s->nclients; i++)
		if (s->clients[i].pid == c->pid && s->clients[i].id == c->id &&
		    !strcmp(s->clients[i].pdev, c->pdev))
			return;
	if (s->nclients == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct client *n = realloc(s->clients, cap * sizeof(*n));

		if (!n)
			return;
		s->clients = n;
		s->cap = cap;
	}
	s->clients[s->nclients++] = *c;
}

/* Every spyre file of process @pid. */
static void scan_process(struct sample *s, int pid)
{
	char path[PATH_MAX], target[PATH_MAX], info[4096], val[64];
	struct client c = { .pid = pid };
	struct dirent *d;
	ssize_t n;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = opendir(path);
	if (!dir) {
		if (errno == EACCES || errno == EPERM)
			s->unreadable++;
		return;
	}
	while ((d = readdir(dir))) {
		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd/%s", pid, d->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strncmp(target, "/dev/accel/accel", 16))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", pid, d->d_name);
		if (read_file_at(path, info, sizeof(info), &c.t_ns))
			continue;
		if (!fdinfo_value(info, "drm-driver", val, sizeof(val)) || strcmp(val, "spyre") ||
		    !fdinfo_value(info, "drm-pdev", c.pdev, sizeof(c.pdev)) ||
		    !fdinfo_value(info, "drm-client-id", val, sizeof(val)))
			continue;
		c.id = strtoull(val, NULL, 10);
		c.engine_ns = fdinfo_u64(info, "drm-engine-compute");
		c.dev_bytes = fdinfo_u64(info, "drm-total-device");
		c.host_bytes = fdinfo_u64(info, "drm-total-host");
		if (!c.comm[0]) {
			snprintf(path, sizeof(path), "/proc/%d/comm", pid);
			if (read_file(path, c.comm, sizeof(c.comm)))
				snprintf(c.comm, sizeof(c.comm), "?");
			c.comm[strcspn(c.comm, "\n")] = '\0';
		}
		sample_add(s, &c);
	}
	closedir(dir);
}

/* ---- devices ------------------------------------------------------------------ */

struct dev {
	struct spyre_device_props p;
	/* read at each refresh */
	uint64_t mem_used, host_used, resets, faults;
};

static struct dev *devs;
static int ndevs;

static void sample_take(struct sample *s)
{
	struct dirent *d;
	DIR *dir;
	int i, self = getpid();

	s->nclients = 0;
	s->unreadable = 0;
	dir = opendir("/proc");
	while (dir && (d = readdir(dir))) {
		int pid = atoi(d->d_name);

		if (pid > 0 && pid != self)
			scan_process(s, pid);
	}
	if (dir)
		closedir(dir);
	for (i = 0; i < ndevs; i++) {
		s->busy_ns[i] = pci_attr_at(devs[i].p.pci_address, "busy_ns", &s->busy_t_ns[i]);
	}
	s->t_ns = mono_ns();
}

static void refresh_counters(void)
{
	int i;

	for (i = 0; i < ndevs; i++) {
		const char *pci = devs[i].p.pci_address;

		devs[i].mem_used = pci_attr(pci, "mem_used");
		devs[i].host_used = pci_attr(pci, "host_mem_used");
		devs[i].resets = pci_attr(pci, "resets");
		devs[i].faults = pci_attr(pci, "faults");
	}
}

/* One process's usage of one device over the interval a -> b. */
struct proc_use {
	int pid;
	char comm[32];
	unsigned int clients;
	uint64_t dev_bytes, host_bytes, engine_ns, engine_delta_ns;
	double engine_percent;	/* negative: not measured */
};

/*
 * Client @c as sample @a saw it; NULL if it is new since (opened, or passed
 * to a process, after @a: all its engine time is in the interval).
 */
static const struct client *client_at(const struct sample *a, const struct client *c)
{
	size_t i;

	for (i = 0; i < a->nclients; i++)
		if (a->clients[i].id == c->id && !strcmp(a->clients[i].pdev, c->pdev))
			return &a->clients[i];
	return NULL;
}

/*
 * Processes using device @pci at sample @b, sorted by pid; the count. With
 * @a, their engine time over a -> b, each client's over the interval
 * between its two reads.
 */
static size_t procs_of(const struct sample *a, const struct sample *b, const char *pci,
		       struct proc_use **out)
{
	struct proc_use *p = calloc(b->nclients ? b->nclients : 1, sizeof(*p));
	size_t i, j, n = 0;

	*out = p;
	if (!p)
		return 0;
	for (i = 0; i < b->nclients; i++) {
		const struct client *c = &b->clients[i], *was;
		uint64_t before, t0;

		if (strcmp(c->pdev, pci))
			continue;
		for (j = 0; j < n && p[j].pid != c->pid; j++)
			;
		if (j == n) {
			/* insert sorted by pid */
			for (j = 0; j < n && p[j].pid < c->pid; j++)
				;
			memmove(&p[j + 1], &p[j], (n - j) * sizeof(*p));
			memset(&p[j], 0, sizeof(*p));
			p[j].pid = c->pid;
			p[j].engine_percent = a ? 0 : -1;
			snprintf(p[j].comm, sizeof(p[j].comm), "%s", c->comm);
			n++;
		}
		p[j].clients++;
		p[j].dev_bytes += c->dev_bytes;
		p[j].host_bytes += c->host_bytes;
		p[j].engine_ns += c->engine_ns;
		if (!a)
			continue;
		was = client_at(a, c);
		before = was ? was->engine_ns : 0;
		t0 = was ? was->t_ns : a->t_ns;
		if (c->engine_ns > before) {
			p[j].engine_delta_ns += c->engine_ns - before;
			if (c->t_ns > t0)
				p[j].engine_percent += 100.0 * (double)(c->engine_ns - before) /
						       (double)(c->t_ns - t0);
		}
	}
	return n;
}

/*
 * Utilization of device @i over a -> b in percent, negative when not
 * measured. At most 100: busy_ns counts time with any queue busy, and the
 * two reads' timestamps are a few microseconds off the kernel's.
 */
static double dev_util(int i, const struct sample *a, const struct sample *b, uint64_t *delta)
{
	double u;

	*delta = NO_VALUE;
	if (!a || a->busy_ns[i] == NO_VALUE || b->busy_ns[i] == NO_VALUE ||
	    b->busy_ns[i] < a->busy_ns[i] || b->busy_t_ns[i] <= a->busy_t_ns[i])
		return -1;
	*delta = b->busy_ns[i] - a->busy_ns[i];
	u = 100.0 * (double)*delta / (double)(b->busy_t_ns[i] - a->busy_t_ns[i]);
	return u > 100 ? 100 : u;
}

/* ---- human output --------------------------------------------------------------- */

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

static void print_counter(const char *label, uint64_t v)
{
	if (v == NO_VALUE)
		printf("  %-16s -\n", label);
	else
		printf("  %-16s %llu\n", label, (unsigned long long)v);
}

static void show_text(int i, const struct sample *a, const struct sample *b)
{
	const struct dev *d = &devs[i];
	const struct spyre_device_props *p = &d->p;
	char b1[32], b2[32], b3[32];
	struct proc_use *pu;
	size_t n, k;
	uint64_t delta;
	double util = dev_util(i, a, b, &delta);

	printf("spyre%u: %s  PCI %s  [%04x:%04x]  hw %u.%u\n", p->index, p->devnode,
	       p->pci_address, p->pci_vendor, p->pci_device, p->hw_version >> 16,
	       p->hw_version & 0xffff);
	printf("  %-16s %u\n", "cores", p->num_cores);
	print_size("scratchpad", p->scratchpad_bytes, " per core");
	print_size("stick", p->stick_bytes, "");
	print_size("device memory", p->mem_size, "");
	printf("  %-16s %u\n", "queues", p->num_queues);
	printf("  %-16s %u MHz\n", "clock", p->clock_mhz);
	printf("  %-16s 0x%llx\n", "features", (unsigned long long)p->features);
	printf("  %-16s %d\n", "numa node", p->numa_node);

	if (util >= 0)
		printf("  %-16s %.1f %% (over %.0f ms)\n", "utilization", util,
		       (double)(b->busy_t_ns[i] - a->busy_t_ns[i]) / 1e6);
	else
		printf("  %-16s -\n", "utilization");
	if (d->mem_used != NO_VALUE)
		printf("  %-16s %s of %s (%.1f %%)\n", "memory used",
		       fmt_bytes(d->mem_used, b1, sizeof(b1)), fmt_bytes(p->mem_size, b2, sizeof(b2)),
		       p->mem_size ? 100.0 * (double)d->mem_used / (double)p->mem_size : 0.0);
	else
		printf("  %-16s -\n", "memory used");
	printf("  %-16s %s\n", "host pinned", fmt_bytes(d->host_used, b1, sizeof(b1)));
	print_counter("resets", d->resets);
	print_counter("faults", d->faults);

	n = procs_of(a, b, p->pci_address, &pu);
	if (!n) {
		printf("  %-16s none\n", "processes");
	} else {
		printf("  processes\n");
		printf("    %7s  %-16s %11s %11s %8s %12s\n", "PID", "COMMAND", "DEVICE MEM",
		       "HOST MEM", "ENGINE", "ENGINE TIME");
		for (k = 0; k < n; k++) {
			char pct[16];

			if (pu[k].engine_percent >= 0)
				snprintf(pct, sizeof(pct), "%.1f %%", pu[k].engine_percent);
			else
				snprintf(pct, sizeof(pct), "-");
			printf("    %7d  %-16s %11s %11s %8s %9.3f s\n", pu[k].pid, pu[k].comm,
			       fmt_bytes(pu[k].dev_bytes, b2, sizeof(b2)),
			       fmt_bytes(pu[k].host_bytes, b3, sizeof(b3)), pct,
			       (double)pu[k].engine_ns / 1e9);
		}
	}
	free(pu);
}

/* ---- JSON output (docs/spyre-smi.md) ------------------------------------------- */

struct jw {
	bool pretty;
	int depth;
	bool first;	/* no member written yet at this depth */
};

static void jw_sep(struct jw *w)
{
	if (!w->first)
		putchar(',');
	w->first = false;
	if (w->pretty)
		printf("\n%*s", 2 * w->depth, "");
}

static void jw_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void jw_key(struct jw *w, const char *key)
{
	jw_sep(w);
	if (key) {
		jw_str(key);
		printf(w->pretty ? ": " : ":");
	}
}

static void jw_open(struct jw *w, const char *key, char c)
{
	if (key || w->depth)
		jw_key(w, key);
	putchar(c);
	w->depth++;
	w->first = true;
}

static void jw_close(struct jw *w, char c)
{
	bool empty = w->first;

	w->depth--;
	if (w->pretty && !empty)
		printf("\n%*s", 2 * w->depth, "");
	putchar(c);
	w->first = false;
}

static void jw_u64(struct jw *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	if (v == NO_VALUE)
		printf("null");
	else
		printf("%llu", (unsigned long long)v);
}

static void jw_int(struct jw *w, const char *key, long long v)
{
	jw_key(w, key);
	printf("%lld", v);
}

/* A percentage with one decimal; null when not measured (negative). */
static void jw_pct(struct jw *w, const char *key, double v)
{
	jw_key(w, key);
	if (v < 0)
		printf("null");
	else
		printf("%.1f", v);
}

static void jw_string(struct jw *w, const char *key, const char *s)
{
	jw_key(w, key);
	jw_str(s);
}

static void show_json(const struct sample *a, const struct sample *b, bool pretty)
{
	struct jw w = { .pretty = pretty, .first = true };
	char buf[64];
	time_t now = time(NULL);
	int i;

	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	jw_open(&w, NULL, '{');
	jw_int(&w, "schema_version", SCHEMA_VERSION);
	jw_string(&w, "time", buf);
	jw_u64(&w, "interval_ns", a ? b->t_ns - a->t_ns : NO_VALUE);
	jw_int(&w, "processes_unreadable", b->unreadable);
	jw_open(&w, "devices", '[');
	for (i = 0; i < ndevs; i++) {
		const struct dev *d = &devs[i];
		const struct spyre_device_props *p = &d->p;
		uint64_t busy_delta;
		double util = dev_util(i, a, b, &busy_delta);
		struct proc_use *pu;
		size_t n, k;

		jw_open(&w, NULL, '{');
		jw_int(&w, "index", p->index);
		jw_string(&w, "node", p->devnode);
		jw_string(&w, "pci", p->pci_address);
		snprintf(buf, sizeof(buf), "%04x:%04x", p->pci_vendor, p->pci_device);
		jw_string(&w, "pci_id", buf);
		snprintf(buf, sizeof(buf), "%u.%u", p->hw_version >> 16, p->hw_version & 0xffff);
		jw_string(&w, "hw_version", buf);
		jw_int(&w, "cores", p->num_cores);
		jw_int(&w, "scratchpad_bytes", p->scratchpad_bytes);
		jw_int(&w, "stick_bytes", p->stick_bytes);
		jw_int(&w, "queues", p->num_queues);
		jw_int(&w, "clock_mhz", p->clock_mhz);
		jw_u64(&w, "features", p->features);
		jw_int(&w, "numa_node", p->numa_node);

		jw_open(&w, "memory", '{');
		jw_u64(&w, "total_bytes", p->mem_size);
		jw_u64(&w, "used_bytes", d->mem_used);
		jw_u64(&w, "host_pinned_bytes", d->host_used);
		jw_close(&w, '}');

		jw_open(&w, "utilization", '{');
		jw_pct(&w, "percent", util);
		jw_u64(&w, "busy_ns", busy_delta);
		jw_u64(&w, "busy_ns_total", b->busy_ns[i]);
		jw_close(&w, '}');
		jw_u64(&w, "resets", d->resets);
		jw_u64(&w, "faults", d->faults);

		n = procs_of(a, b, p->pci_address, &pu);
		jw_open(&w, "processes", '[');
		for (k = 0; k < n; k++) {
			jw_open(&w, NULL, '{');
			jw_int(&w, "pid", pu[k].pid);
			jw_string(&w, "command", pu[k].comm);
			jw_int(&w, "clients", pu[k].clients);
			jw_u64(&w, "device_memory_bytes", pu[k].dev_bytes);
			jw_u64(&w, "host_memory_bytes", pu[k].host_bytes);
			jw_u64(&w, "engine_ns_total", pu[k].engine_ns);
			jw_u64(&w, "engine_ns", a ? pu[k].engine_delta_ns : NO_VALUE);
			jw_pct(&w, "engine_percent", pu[k].engine_percent);
			jw_close(&w, '}');
		}
		jw_close(&w, ']');
		free(pu);
		jw_close(&w, '}');
	}
	jw_close(&w, ']');
	jw_close(&w, '}');
	putchar('\n');
}

/* ---- no device, no access ---------------------------------------------------- */

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

/* Capabilities of device @index into @d; 0 or an exit status. */
static int load_props(int index, struct dev *d)
{
	spyre_device_t *dev;
	int ret;

	d->p.size = sizeof(d->p);
	ret = spyre_device_open(index, &dev);
	if (ret) {
		fprintf(stderr, "spyre-smi: %s\n", spyre_last_error());
		if (ret == -EACCES || ret == -EPERM) {
			fprintf(stderr, "spyre-smi: hint: using a card needs read and write access to "
				"its /dev/accel node; the spyre udev rule (70-spyre.rules) gives it "
				"to the render group\n");
			return EXIT_NO_ACCESS;
		}
		return EXIT_NO_DEVICE;
	}
	ret = spyre_device_get_props(dev, &d->p);
	spyre_device_close(dev);
	if (ret) {
		fprintf(stderr, "spyre-smi: %s\n", spyre_last_error());
		return EXIT_NO_DEVICE;
	}
	return 0;
}

/* ---- main ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f, "usage: spyre-smi [-d INDEX] [-q] [--json] [-l SECONDS [-c COUNT]] [-s MS]\n"
		   "  -d, --device INDEX  show only device INDEX (0, 1, ...)\n"
		   "  -q, --count-only    print only the number of devices\n"
		   "  -j, --json          JSON (docs/spyre-smi.md); with -l one document per line\n"
		   "  -l, --loop SECONDS  refresh every SECONDS (e.g. 1, 0.5) until interrupted;\n"
		   "                      utilization is over each interval\n"
		   "  -c, --count COUNT   with -l: stop after COUNT refreshes\n"
		   "  -s, --sample MS     measure utilization over MS milliseconds (default 200;\n"
		   "                      0: not measured); with -l, for the first refresh only\n"
		   "  -h, --help          this text\n"
		   "exit status: 0 devices shown, 1 no spyre device (the reason is printed)\n"
		   "or a device could not be opened or queried, 2 bad usage, 3 permission denied\n"
		   "on a device node\n");
}

static bool parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "count-only", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'j' },
		{ "loop", required_argument, NULL, 'l' },
		{ "count", required_argument, NULL, 'c' },
		{ "sample", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int opt, n, i, only = -1, quiet = 0, json = 0, rc;
	long v, count = 0, sample_ms = 200;
	double loop_s = 0;
	struct sample s[2] = { 0 };
	unsigned long iter;
	char *end;

	while ((opt = getopt_long(argc, argv, "d:qjl:c:s:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			if (!parse_long(optarg, 0, INT_MAX, &v)) {
				fprintf(stderr, "spyre-smi: -d: '%s' is not a device index (0, 1, ...)\n",
					optarg);
				return EXIT_USAGE;
			}
			only = (int)v;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'l':
			errno = 0;
			loop_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(loop_s >= 0.1 && loop_s <= 86400)) {
				fprintf(stderr, "spyre-smi: -l: '%s' is not a number of seconds from "
					"0.1 to 86400\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'c':
			if (!parse_long(optarg, 1, LONG_MAX, &count)) {
				fprintf(stderr, "spyre-smi: -c: '%s' is not a count (1, 2, ...)\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 's':
			if (!parse_long(optarg, 0, 60000, &sample_ms)) {
				fprintf(stderr, "spyre-smi: -s: '%s' is not a number of milliseconds "
					"from 0 to 60000\n", optarg);
				return EXIT_USAGE;
			}
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
	if (count && !loop_s) {
		fprintf(stderr, "spyre-smi: -c needs -l\n");
		return EXIT_USAGE;
	}
	if (quiet && (json || loop_s)) {
		fprintf(stderr, "spyre-smi: -q goes with neither --json nor -l\n");
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
	if (only >= n) {
		fprintf(stderr, "spyre-smi: no spyre device %d (%d present)\n", only, n);
		return EXIT_NO_DEVICE;
	}

	ndevs = only >= 0 ? 1 : n;
	devs = calloc(ndevs, sizeof(*devs));
	for (i = 0; i < 2; i++) {
		s[i].busy_ns = calloc(ndevs, sizeof(uint64_t));
		s[i].busy_t_ns = calloc(ndevs, sizeof(uint64_t));
	}
	if (!devs || !s[0].busy_ns || !s[1].busy_ns || !s[0].busy_t_ns || !s[1].busy_t_ns) {
		fprintf(stderr, "spyre-smi: out of memory\n");
		return EXIT_NO_DEVICE;
	}
	for (i = 0; i < ndevs; i++) {
		rc = load_props(only >= 0 ? only : i, &devs[i]);
		if (rc)
			return rc;
	}

	/*
	 * Sample a, wait, sample b: utilization and engine percentages are over
	 * a -> b. With -l the next refresh's a is this one's b.
	 */
	/*
	 * The first scan runs cold (under an emulator, code is translated on
	 * first use): its reads lag the kernel's clock more than later ones
	 * and would inflate the first rates. Warm up with a scan not used.
	 */
	sample_take(&s[0]);
	sample_take(&s[0]);
	if (sample_ms)
		sleep_ns((uint64_t)sample_ms * 1000000ull);
	for (iter = 0;; iter++) {
		struct sample *a = &s[iter % 2], *b = &s[(iter + 1) % 2];

		sample_take(b);
		refresh_counters();
		if (json) {
			show_json(iter || sample_ms ? a : NULL, b, !loop_s);
		} else {
			if (loop_s) {
				char t[32];
				time_t now = time(NULL);

				strftime(t, sizeof(t), "%Y-%m-%d %H:%M:%S", localtime(&now));
				printf("%s%s\n", iter ? "\n" : "", t);
			}
			if (only < 0)
				printf("%d spyre device%s\n", n, n == 1 ? "" : "s");
			for (i = 0; i < ndevs; i++)
				show_text(i, iter || sample_ms ? a : NULL, b);
			if (b->unreadable)
				printf("(%u process%s not readable: only root sees every process's usage)\n",
				       b->unreadable, b->unreadable == 1 ? "" : "es");
		}
		fflush(stdout);
		if (!loop_s || (count && (long)iter + 1 >= count))
			break;
		sleep_ns((uint64_t)(loop_s * 1e9));
	}
	for (i = 0; i < 2; i++) {
		free(s[i].busy_ns);
		free(s[i].busy_t_ns);
		free(s[i].clients);
	}
	free(devs);
	return 0;
}
