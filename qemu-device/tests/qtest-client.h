/* SPDX-License-Identifier: MIT */
/*
 * A small client of QEMU's qtest protocol (docs/devel/qtest.rst): starts
 * qemu-system-x86_64 with -accel qtest, then reads and writes guest memory
 * and I/O ports and accesses PCI configuration space the way a driver would,
 * with no guest kernel. Used by the device tests under qemu-device/tests/.
 */
#ifndef SPYRE_QTEST_CLIENT_H
#define SPYRE_QTEST_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "qmp.h"	/* util/: the QMP client */

struct qtest {
	pid_t pid;
	int fd;
	FILE *rx;
	char sock_path[108];
	char log_path[108];	/* QEMU's -D log: guest errors (-d guest_errors) */
	char qmp_path[108];	/* QEMU's QMP socket (qtest_qmp()) */
	struct spyre_qmp qmp;	/* connected on the first qtest_qmp() */
};

/* Path of the QEMU binary under test: $SPYRE_QEMU, else the set-up cache. */
const char *qtest_qemu_path(void);
/*
 * Return if that QEMU can run; else skip the whole test (exit 77), or fail
 * it (exit 1) when $SPYRE_QEMU names it: then it was meant to be there.
 */
void qtest_require_qemu(void);

/*
 * Start QEMU (q35, qtest accelerator) with @extra appended to its command
 * line (split on spaces). Returns 0, or -1 with a message on stderr.
 */
int qtest_start(struct qtest *qt, const char *extra);
void qtest_quit(struct qtest *qt);

uint32_t qtest_readl(struct qtest *qt, uint64_t addr);
void qtest_writel(struct qtest *qt, uint64_t addr, uint32_t val);
uint64_t qtest_readq(struct qtest *qt, uint64_t addr);
void qtest_writeq(struct qtest *qt, uint64_t addr, uint64_t val);
uint16_t qtest_readw(struct qtest *qt, uint64_t addr);
void qtest_writew(struct qtest *qt, uint64_t addr, uint16_t val);
/* Bulk guest memory access (hex-encoded "read"/"write", and "memset"). */
void qtest_memwrite(struct qtest *qt, uint64_t addr, const void *buf, uint64_t len);
void qtest_memread(struct qtest *qt, uint64_t addr, void *buf, uint64_t len);
void qtest_memset(struct qtest *qt, uint64_t addr, uint8_t val, uint64_t len);
/*
 * Advance QEMU_CLOCK_VIRTUAL by @ns (< 0: to the next timer deadline; 0:
 * not at all), running the timers that fall due; returns the new virtual
 * time in ns.
 */
int64_t qtest_clock_step(struct qtest *qt, int64_t ns);
/* QEMU_CLOCK_VIRTUAL now, in ns; the clock does not move. */
int64_t qtest_clock_now(struct qtest *qt);
uint32_t qtest_inl(struct qtest *qt, uint16_t port);
void qtest_outl(struct qtest *qt, uint16_t port, uint32_t val);

/* PCI configuration space of bus 0, device @dev, function 0 (mechanism #1). */
uint32_t qpci_cfg_readl(struct qtest *qt, int dev, int off);
void qpci_cfg_writel(struct qtest *qt, int dev, int off, uint32_t val);
uint16_t qpci_cfg_readw(struct qtest *qt, int dev, int off);
void qpci_cfg_writew(struct qtest *qt, int dev, int off, uint16_t val);
uint8_t qpci_cfg_readb(struct qtest *qt, int dev, int off);
/* Offset of capability @id in the standard capability list, or 0. */
int qpci_find_cap(struct qtest *qt, int dev, uint8_t id);
/* Program a 32-bit memory BAR at @addr and enable memory decoding + bus mastering. */
void qpci_map_bar32(struct qtest *qt, int dev, int bar, uint32_t addr);

/*
 * Send one QMP command (a JSON object, one line) to QEMU's monitor and read
 * its answer line into @reply (may be NULL): 0 for a "return", -1 for an
 * "error" or a closed connection. Events are skipped (util/qmp.h).
 */
int qtest_qmp(struct qtest *qt, const char *json, char *reply, size_t len);

/* True when QEMU's -D log contains @needle. */
bool qtest_log_contains(struct qtest *qt, const char *needle);

/*
 * Run @argv (QEMU with arguments), capture stdout+stderr into @out, and
 * return its exit status (or -1 if it could not run or was killed).
 */
int qtest_run_capture(char *const argv[], char *out, size_t outlen);

#endif
