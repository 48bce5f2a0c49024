// SPDX-License-Identifier: MIT
/*
 * spyre-coredump: decode a spyre.ko device coredump
 * (/sys/class/devcoredump/devcdN/data; format: uapi/spyre_devcoredump.h,
 * docs/coredump.md) into text.
 *
 *   spyre-coredump [FILE]    FILE, "-" for stdin; default: the first
 *                            pending dump of a spyre card
 *
 * Exit status: 0 decoded, 1 not a valid dump, 2 usage or I/O error.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyre_accel.h"
#include "spyre_devcoredump.h"
#include "spyre_hw.h"

static const char *const op_names[] = { "NOP", "COPY", "LAUNCH", "SIGNAL", "WAIT", "TIMESTAMP" };
static const char *const err_names[SPYRE_ERR_COUNT] = SPYRE_ERR_NAMES;
static const char *const state_names[] = SPYRE_DEV_STATE_NAMES;
static const char *const qreg_names[16] = {
	"BASE_LO", "BASE_HI", "SIZE", "CTRL", "HEAD", "TAIL", "COMPL_LO", "COMPL_HI",
	"STATUS", "ERROR", "ERR_SEQ_LO", "ERR_SEQ_HI", "FAULT_LO", "FAULT_HI", "FAULT_INFO", "DONE",
};

#define NAME(t, i) ((size_t)(i) < sizeof(t) / sizeof((t)[0]) && (t)[i] ? (t)[i] : "?")

static const char *space_name(unsigned int s)
{
	static const char *const n[] = { "virt", "devphys", "host", "host-sgl" };

	return NAME(n, s);
}

static void print_packet(unsigned int i, const uint8_t *p, unsigned int nwaits)
{
	const struct spyre_pkt_hdr *h = (const void *)p;
	const struct spyre_pkt_copy *c = (const void *)p;
	const struct spyre_pkt_launch *l = (const void *)p;
	const struct spyre_pkt_sem *m = (const void *)p;

	printf("  [%3u]%s %-9s ctx %u seq %#" PRIx64 " flags %#x", i,
	       i < nwaits ? " (driver WAIT)" : "", NAME(op_names, h->opcode), h->ctx,
	       (uint64_t)h->seq, h->flags);
	switch (h->opcode) {
	case SPYRE_PKT_OP_COPY:
		printf(": %s %#" PRIx64 " -> %s %#" PRIx64 ", %" PRIu64 " bytes",
		       space_name(c->src_space), (uint64_t)c->src, space_name(c->dst_space),
		       (uint64_t)c->dst, (uint64_t)c->size);
		break;
	case SPYRE_PKT_OP_LAUNCH:
		printf(": program %#" PRIx64 " args %#" PRIx64 " cores %#x record %#" PRIx64,
		       (uint64_t)l->program, (uint64_t)l->args, l->core_mask, (uint64_t)l->record);
		break;
	case SPYRE_PKT_OP_SIGNAL:
	case SPYRE_PKT_OP_WAIT:
	case SPYRE_PKT_OP_TIMESTAMP:
		printf(": %s %#" PRIx64 " value %" PRIu64, space_name(m->space), (uint64_t)m->addr,
		       (uint64_t)m->value);
		break;
	}
	printf("\n");
}

/* Returns 0, or 1 when a section is too short for its type. */
static int print_section(uint32_t type, const void *p, uint32_t size, const struct spyre_dump_job **job)
{
	uint32_t i;

	switch (type) {
	case SPYRE_DUMP_SEC_DEVICE: {
		const struct spyre_dump_device *d = p;

		if (size < sizeof(*d))
			return 1;
		printf("device: hw %u.%u, %u cores, %u queues, %u MHz, %" PRIu64 " MiB\n",
		       d->hw_version >> 16, d->hw_version & 0xffff, d->cores, d->queues,
		       d->clock_mhz, (uint64_t)(d->mem_size >> 20));
		printf("  STATUS %#x RESET_COUNT %u ERR_QUEUES %#" PRIx64 " clock %" PRIu64
		       " ns INJECT armed %#x\n", d->status, d->reset_count, (uint64_t)(d->err_queues),
		       (uint64_t)(d->clock_ns), d->inject_armed);
		printf("  driver: state %s, %u resets, %u faults\n", NAME(state_names, d->state),
		       d->resets, d->faults);
		return 0;
	}
	case SPYRE_DUMP_SEC_QUEUE: {
		const struct spyre_dump_queue *q = p;

		if (size < sizeof(*q))
			return 1;
		printf("queue %u%s: head %u tail %u status %#x%s%s%s%s error %s done %u"
		       " | driver tail %u, %u in flight, job %" PRIu64 ", completion %#" PRIx64 "\n",
		       q->idx, q->kernel ? " (kernel)" : "", q->regs[SPYRE_Q_HEAD / 4],
		       q->regs[SPYRE_Q_TAIL / 4], q->regs[SPYRE_Q_STATUS / 4],
		       q->regs[SPYRE_Q_STATUS / 4] & SPYRE_QSTAT_ENABLED ? " enabled" : "",
		       q->regs[SPYRE_Q_STATUS / 4] & SPYRE_QSTAT_BUSY ? " BUSY" : "",
		       q->regs[SPYRE_Q_STATUS / 4] & SPYRE_QSTAT_WAITING ? " WAITING" : "",
		       q->regs[SPYRE_Q_STATUS / 4] & SPYRE_QSTAT_ERROR ? " ERROR" : "",
		       NAME(err_names, q->regs[SPYRE_Q_ERROR / 4]), q->regs[SPYRE_Q_DONE / 4],
		       q->sw_tail, q->inflight, (uint64_t)(q->seqno), (uint64_t)(q->completion));
		if (q->regs[SPYRE_Q_STATUS / 4] & (SPYRE_QSTAT_BUSY | SPYRE_QSTAT_ERROR)) {
			for (i = 0; i < 16; i++)
				printf("    %-10s %#010x\n", qreg_names[i], q->regs[i]);
			printf("    QE_CORE    %#010x\n    QE_PC      %#010x\n", q->qe_core, q->qe_pc);
		}
		return 0;
	}
	case SPYRE_DUMP_SEC_JOB: {
		const struct spyre_dump_job *j = p;
		const struct drm_spyre_fault *f = &j->fault;

		if (size < sizeof(*j))
			return 1;
		*job = j;
		printf("job %" PRIu64 " of user queue %u, context %u, pid %d (%.16s), hardware queue %u"
		       " (job number %" PRIu64 ")\n", (uint64_t)(j->job_seq), j->uqueue, j->ctx, j->pid,
		       j->comm, j->hwq, (uint64_t)(j->hw_seqno));
		printf("  %u packets (+%u driver WAITs), ring %u..%u\n", j->npackets, j->nwaits,
		       j->ring_start, j->ring_end);
		printf("  error %u (%s), device error %s, packet %d, fault address %#" PRIx64
		       " info %#x (access %u source %u cause %u), core %d pc %d\n", f->error,
		       f->error == DRM_SPYRE_ERROR_TIMEOUT ? "timeout" :
		       f->error == DRM_SPYRE_ERROR_FAULT ? "fault" : "other",
		       NAME(err_names, f->hw_error), (int)f->packet, (uint64_t)(f->addr), f->info,
		       SPYRE_FAULT_ACCESS(f->info), SPYRE_FAULT_SOURCE(f->info),
		       SPYRE_FAULT_CAUSE(f->info), (int)f->core, (int)f->pc);
		return 0;
	}
	case SPYRE_DUMP_SEC_PACKETS:
		printf("packets on the ring:\n");
		for (i = 0; i + 1 <= size / SPYRE_PKT_SIZE; i++)
			print_packet(i, (const uint8_t *)p + (size_t)i * SPYRE_PKT_SIZE,
				     *job ? (*job)->nwaits : 0);
		return 0;
	case SPYRE_DUMP_SEC_LAUNCH: {
		const struct spyre_dump_launch *l = p;
		const struct spyre_launch_record *r = &l->record;

		if (size < sizeof(*l))
			return 1;
		printf("launch record of packet %u at %#" PRIx64 ":", l->packet, (uint64_t)(l->record_va));
		if (!l->valid) {
			printf(" not readable\n");
			return 0;
		}
		printf(" status %u, fault core %d pc %d address %#" PRIx64 ", %u cores ran, %"
		       PRIu64 " ns, %" PRIu64 " cycles, %" PRIu64 " instructions\n", r->status,
		       (int)r->fault_core, (int)r->fault_pc, (uint64_t)r->fault_addr, r->cores_run,
		       (uint64_t)r->device_ns, (uint64_t)r->device_cycles, (uint64_t)r->insns);
		printf("  per-core busy cycles:");
		for (i = 0; i < SPYRE_MAX_CORES; i++)
			if (r->core_busy_cycles[i])
				printf(" %u:%" PRIu64, i, (uint64_t)r->core_busy_cycles[i]);
		printf("\n");
		return 0;
	}
	case SPYRE_DUMP_SEC_PT: {
		const struct spyre_dump_pt *pt = p;
		const struct spyre_dump_range *r = (const void *)(pt + 1);

		if (size < sizeof(*pt) || (size - sizeof(*pt)) / sizeof(*r) < pt->ranges)
			return 1;
		printf("page tables of context %u: L0 at %#" PRIx64 ", %u L1 and %u L2 tables, %"
		       PRIu64 " device and %" PRIu64 " host pages; %u ranges (%u more not listed)\n",
		       pt->ctx, (uint64_t)(pt->l0_dma), pt->l1_tables, pt->l2_tables, (uint64_t)(pt->dev_pages),
		       (uint64_t)(pt->host_pages), pt->ranges, pt->ranges_dropped);
		for (i = 0; i < pt->ranges; i++)
			printf("  %#012" PRIx64 "-%#012" PRIx64 " %c%c %s %#" PRIx64 "\n", (uint64_t)r[i].va,
			       (uint64_t)(r[i].va + r[i].size), r[i].flags & SPYRE_PTE_READ ? 'r' : '-',
			       r[i].flags & SPYRE_PTE_WRITE ? 'w' : '-',
			       r[i].flags & SPYRE_PTE_DEVMEM ? "device" : "host  ", (uint64_t)(r[i].addr));
		return 0;
	}
	case SPYRE_DUMP_SEC_WALK: {
		const struct spyre_dump_walk *w = p;

		if (size < sizeof(*w))
			return 1;
		printf("walk of %#" PRIx64 " in context %u:", (uint64_t)(w->va), w->ctx);
		for (i = 0; i < w->levels && i < 3; i++)
			printf(" L%u %#" PRIx64, i, (uint64_t)(w->pte[i]));
		printf("\n");
		return 0;
	}
	default:
		printf("section type %u, %u bytes (unknown, skipped)\n", type, size);
		return 0;
	}
}

static int find_default(char *path, size_t len)
{
	char link[PATH_MAX], target[PATH_MAX], drv[PATH_MAX];
	struct dirent *d;
	DIR *dir = opendir("/sys/class/devcoredump");
	int ret = -1;
	ssize_t n;

	if (!dir)
		return -1;
	while (ret && (d = readdir(dir))) {
		if (strncmp(d->d_name, "devcd", 5))
			continue;
		snprintf(link, sizeof(link), "/sys/class/devcoredump/%s/failing_device/driver",
			 d->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = '\0';
		snprintf(drv, sizeof(drv), "%s", strrchr(target, '/') + 1);
		if (strcmp(drv, "spyre"))
			continue;
		snprintf(path, len, "/sys/class/devcoredump/%s/data", d->d_name);
		ret = 0;
	}
	closedir(dir);
	return ret;
}

int main(int argc, char **argv)
{
	const struct spyre_dump_job *job = NULL;
	const struct spyre_dump_header *h;
	size_t len = 0, cap = 1 << 16, off;
	char path[PATH_MAX];
	uint8_t *buf;
	uint32_t n = 0;
	FILE *f;

	if (argc > 2 || (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))) {
		fprintf(stderr, "usage: spyre-coredump [FILE|-]\n");
		return 2;
	}
	if (argc == 2) {
		snprintf(path, sizeof(path), "%s", argv[1]);
	} else if (find_default(path, sizeof(path))) {
		fprintf(stderr, "spyre-coredump: no pending spyre coredump in /sys/class/devcoredump\n");
		return 2;
	}
	f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	if (!f) {
		fprintf(stderr, "spyre-coredump: %s: %s\n", path, strerror(errno));
		return 2;
	}
	buf = malloc(cap);
	while (buf) {
		size_t r = fread(buf + len, 1, cap - len, f);

		len += r;
		if (len < cap)
			break;
		if (cap >= (64u << 20)) {
			fprintf(stderr, "spyre-coredump: %s: larger than 64 MiB\n", path);
			return 1;
		}
		cap *= 2;
		buf = realloc(buf, cap);
	}
	if (f != stdin)
		fclose(f);
	if (!buf)
		return 2;

	h = (const void *)buf;
	if (len < sizeof(*h) || h->magic != SPYRE_DUMP_MAGIC) {
		fprintf(stderr, "spyre-coredump: %s: not a spyre coredump (bad magic)\n", path);
		return 1;
	}
	if (h->version != SPYRE_DUMP_VERSION || h->header_size < sizeof(*h) ||
	    h->header_size > len || h->total_size > len || h->total_size < h->header_size) {
		fprintf(stderr, "spyre-coredump: %s: version %u, header %u, size %" PRIu64
			" of %zu bytes read: not understood or truncated\n", path, h->version,
			h->header_size, (uint64_t)h->total_size, len);
		return 1;
	}
	printf("spyre coredump v%u, %.24s, card %.16s, reason: %s, taken at %" PRIu64 ".%09" PRIu64
	       " (realtime), %u sections, %" PRIu64 " bytes\n", h->version, h->driver, h->pci,
	       h->reason == SPYRE_DUMP_REASON_HANG ? "hang" :
	       h->reason == SPYRE_DUMP_REASON_ENGINE_FAULT ? "engine fault" : "unknown",
	       (uint64_t)(h->time_ns / 1000000000u), (uint64_t)(h->time_ns % 1000000000u),
	       h->sections, (uint64_t)h->total_size);
	for (off = h->header_size; off + sizeof(struct spyre_dump_section) <= h->total_size; n++) {
		const struct spyre_dump_section *s = (const void *)(buf + off);

		if (s->size > h->total_size - off - sizeof(*s)) {
			fprintf(stderr, "spyre-coredump: section %u at %zu overruns the dump\n", n, off);
			return 1;
		}
		if (print_section(s->type, s + 1, s->size, &job)) {
			fprintf(stderr, "spyre-coredump: section %u (type %u) too short: %u bytes\n",
				n, s->type, s->size);
			return 1;
		}
		off += sizeof(*s) + (((size_t)s->size + 7) & ~(size_t)7);
	}
	if (n != h->sections) {
		fprintf(stderr, "spyre-coredump: %u sections found, header says %u\n", n, h->sections);
		return 1;
	}
	free(buf);
	return 0;
}
