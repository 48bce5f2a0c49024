/* SPDX-License-Identifier: MIT */
/*
 * Driving a spyre device through qtest the way a driver does: map the BARs,
 * route MSI-X into guest RAM, allocate guest memory, set up rings, build and
 * submit packets, wait for completion. Shared by the device tests and the
 * COPY benchmark.
 */
#ifndef SPYRE_DEV_H
#define SPYRE_DEV_H

#include <stdbool.h>
#include <stdint.h>

#include "qtest-client.h"
#include "spyre_hw.h"
#include "../../tests/tap.h"

#define SDEV_PCI_DEV	4
#define SDEV_BAR0	0xe0000000ull
#define SDEV_BAR1	0xe1000000ull	/* MSI-X table and PBA */
#define SDEV_BAR2	0xc0000000ull	/* 256 MiB window, naturally aligned */
#define SDEV_RAM_BASE	0x01000000ull	/* guest RAM handed out from 16 MiB */

struct sdev_queue {
	uint64_t ring;
	uint32_t size;
	uint32_t tail;
	uint64_t compl;
};

struct sdev {
	struct qtest qt;
	uint64_t bar0;		/* a VF's registers (sdev_vf_init); 0: SDEV_BAR0 */
	uint32_t queues;
	uint64_t ram_next;
	uint64_t ram_end;
	uint64_t mailbox;	/* MSI-X vector v writes 0x1000 + v to mailbox + 4 v */
	struct sdev_queue q[SPYRE_MAX_QUEUES];
};

/* Start QEMU with "-m ram_mb -device spyre,PROPS" and bring the device up. */
int sdev_start(struct sdev *d, const char *props, unsigned ram_mb);
/* The same with @extra (space-separated QEMU arguments, e.g. a second card) after it. */
int sdev_start_with(struct sdev *d, const char *props, const char *extra, unsigned ram_mb);
void sdev_stop(struct sdev *d);
/*
 * The main() of a device test: skip without QEMU, start @d as sdev_start()
 * does (Bail out! if it does not start), call @setup if not NULL, run the
 * cases (tests/tap.h), stop QEMU. Returns the exit status.
 */
int sdev_run(struct sdev *d, const char *props, unsigned ram_mb, void (*setup)(void),
	     const struct tap_case *cases, size_t n, int argc, char **argv);
#define SDEV_RUN(d, props, ram_mb, setup, cases, argc, argv) \
	sdev_run(d, props, ram_mb, setup, cases, sizeof(cases) / sizeof((cases)[0]), argc, argv)
/*
 * A handle on one of @pf's SR-IOV VFs, its registers mapped at @bar0: it
 * shares @pf's QEMU and gets @ram bytes of @pf's guest RAM to allocate from.
 * No MSI-X (poll); stop only @pf.
 */
void sdev_vf_init(struct sdev *pf, struct sdev *vf, uint64_t bar0, uint64_t ram);
/* Map BARs, enable bus mastering, route MSI-X to a mailbox (again after FLR). */
void sdev_pci_setup(struct sdev *d);

uint32_t sdev_rd(struct sdev *d, uint32_t reg);
void sdev_wr(struct sdev *d, uint32_t reg, uint32_t val);
uint32_t sdev_qrd(struct sdev *d, unsigned q, uint32_t reg);
void sdev_qwr(struct sdev *d, unsigned q, uint32_t reg, uint32_t val);

/* Guest RAM: bump allocation (zeroed), and bulk access. */
uint64_t sdev_alloc(struct sdev *d, uint64_t size, uint64_t align);
void sdev_memwrite(struct sdev *d, uint64_t addr, const void *buf, uint64_t len);
void sdev_memread(struct sdev *d, uint64_t addr, void *buf, uint64_t len);
void sdev_memset(struct sdev *d, uint64_t addr, uint8_t val, uint64_t len);
uint64_t sdev_rd64(struct sdev *d, uint64_t addr);
void sdev_wr64(struct sdev *d, uint64_t addr, uint64_t val);

/* Ring of @size packets with a completion word; enabled at priority @prio. */
void sdev_queue_init(struct sdev *d, unsigned q, uint32_t size, unsigned prio);
/* Reset queue @q and start it again on the same ring, empty. */
void sdev_queue_restart(struct sdev *d, unsigned q);
/* Copy a packet to the ring and ring the doorbell. */
void sdev_submit(struct sdev *d, unsigned q, const void *pkt);
/* Write a packet to the ring without ringing the doorbell; returns its index. */
uint32_t sdev_push(struct sdev *d, unsigned q, const void *pkt);
void sdev_doorbell(struct sdev *d, unsigned q);
/*
 * Wait until queue @q consumed everything (0), stopped on an error (-1), or
 * @timeout_ms passed (-2).
 */
int sdev_wait(struct sdev *d, unsigned q, unsigned timeout_ms);
/* Poll until Q_STATUS of @q has all of @bits (true) or @timeout_ms passed. */
bool sdev_wait_status(struct sdev *d, unsigned q, uint32_t bits, unsigned timeout_ms);
/* MSI-X mailbox of @vector: 0x1000 + vector once it fired; sdev_irq_clear() resets. */
uint32_t sdev_irq(struct sdev *d, unsigned vector);
void sdev_irq_clear(struct sdev *d, unsigned vector);
/* Restart a stopped queue past its failed packet. */
void sdev_queue_skip(struct sdev *d, unsigned q);

/* Packet builders. */
void pkt_nop(void *p, uint64_t seq, uint16_t flags);
void pkt_copy(void *p, uint64_t seq, uint16_t ctx, uint8_t src_space, uint64_t src,
	      uint8_t dst_space, uint64_t dst, uint64_t size);
void pkt_sem(void *p, uint8_t op, uint64_t seq, uint16_t ctx, uint8_t space,
	     uint64_t addr, uint64_t value);
void pkt_launch(void *p, uint64_t seq, uint64_t program, uint64_t args, uint32_t mask);

uint64_t now_ns(void);

#endif

/* Device MMU page tables in guest RAM (format: docs/spyre-device.md). */
void sdev_mmu_init(struct sdev *d, unsigned nctx);
/* Map one 4 KiB page (or a 2 MiB page with SPYRE_PTE_LEAF) of context @ctx. */
void sdev_map(struct sdev *d, unsigned ctx, uint64_t va, uint64_t pa, uint64_t flags);
/* Point context @ctx's entry at a fresh, empty L0 table (or invalidate it). */
void sdev_ctx_set(struct sdev *d, unsigned ctx, bool valid);
