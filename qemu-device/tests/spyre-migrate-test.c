// SPDX-License-Identifier: MIT
/*
 * Description: spyre device migration through qtest and QMP: a card with a
 * queue blocked in a WAIT and eight COPYs queued behind it, and device
 * memory its own COPY wrote, is migrated live from one QEMU to another over
 * a unix socket; the destination holds the same registers, rings, device
 * memory and MSI-X routing, runs the queued packets once the semaphore is
 * released, and every byte they moved is checked; the stopped source runs
 * nothing more. In timed mode a COPY pending on the timeline completes on
 * the destination exactly at its modeled time; an armed fault injection and
 * a hung queue migrate like any other state. Then a saved stream is loaded
 * back as it is (the control), and corrupted in the device's fields (window,
 * MMU context count, a queue's ring size and status, pending vectors),
 * truncated, replaced with garbage, or loaded into a card with other
 * properties: each load fails cleanly (exit status 1, the reason on
 * stderr), never a crash or a hang.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spyre-dev.h"

#define PROPS		"mem-size=64M,queues=4"
#define RAM_MB		64
#define NCOPY		4
#define CHUNK		(64 * 1024)
#define MAGIC		0x5350594du	/* "SPYM" in SCRATCH: finds the device's fields */
#define DEV_PRE		(1u << 20)	/* device memory a COPY filled before migrating */

static char sock_path[108], file_path[108];

static uint8_t pattern(unsigned buf, size_t i)
{
	return (uint8_t)(buf * 37 + i * 7 + (i >> 9));
}

static void fill(uint8_t *b, unsigned buf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pattern(buf, i);
}

/* Poll a QMP query until its answer holds one of @want (0) or @fail (-1). */
static int qmp_poll(struct qtest *qt, const char *query, const char *want, const char *fail,
		   unsigned timeout_ms)
{
	uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	char reply[4096];

	do {
		if (qtest_qmp(qt, query, reply, sizeof(reply)) == 0) {
			if (strstr(reply, want))
				return 0;
			if (fail && strstr(reply, fail)) {
				tap_diag("%s: %s", query, reply);
				return -1;
			}
		}
		usleep(20000);
	} while (now_ns() < end);
	tap_diag("%s: timed out, last answer %s", query, reply);
	return -2;
}

/* Migrate @src to @uri and wait for the end: 0 completed. */
static int migrate(struct sdev *src, const char *uri)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "{\"execute\": \"migrate\", \"arguments\": {\"uri\": \"%s\"}}", uri);
	if (qtest_qmp(&src->qt, cmd, NULL, 0))
		return -1;
	return qmp_poll(&src->qt, "{\"execute\": \"query-migrate\"}", "\"status\": \"completed\"",
			"\"status\": \"failed\"", 120000);
}

/* Start @dst as a copy of @src's layout, QEMU waiting for @incoming. */
static int start_incoming(struct sdev *dst, const struct sdev *src, const char *props,
			  const char *incoming)
{
	char extra[512];

	*dst = *src;
	snprintf(extra, sizeof(extra), "-m %u -device spyre,addr=04.0,%s -incoming %s", RAM_MB,
		 props, incoming);
	return qtest_start(&dst->qt, extra);
}

/* Migrate @A live to a new QEMU @B (same layout) over a unix socket: 0 done. */
static int migrate_live(struct sdev *A, struct sdev *B, const char *props, const char *tag)
{
	char uri[160], cmd[256];

	snprintf(sock_path, sizeof(sock_path), "/tmp/spyre-mig-%d-%s.sock", getpid(), tag);
	snprintf(uri, sizeof(uri), "unix:%s", sock_path);
	unlink(sock_path);
	/*
	 * -incoming defer, then migrate-incoming: it returns once the socket
	 * listens. (Waiting for the socket's file raced: it exists from bind(),
	 * before listen(), and a source connecting then was refused, once in 30
	 * runs on a loaded host.)
	 */
	if (start_incoming(B, A, props, "defer"))
		return -1;
	snprintf(cmd, sizeof(cmd), "{\"execute\": \"migrate-incoming\", \"arguments\": {\"uri\": \"%s\"}}", uri);
	if (qtest_qmp(&B->qt, cmd, NULL, 0) || migrate(A, uri) ||
	    qmp_poll(&B->qt, "{\"execute\": \"query-status\"}", "\"status\": \"running\"", NULL, 30000)) {
		sdev_stop(B);
		return -1;
	}
	unlink(sock_path);
	return 0;
}

/*
 * Armed fault injections and a fired hang are state like any other: an
 * injection armed on the source fires on the destination, and a queue hung
 * on the source is hung there (until its reset).
 */
static void test_injections(void)
{
	struct sdev A, B;
	uint8_t p[64];

	if (sdev_start(&A, PROPS, RAM_MB)) {
		TAP_CHECK(0, "source QEMU did not start");
		return;
	}
	sdev_queue_init(&A, 0, 16, 0);
	sdev_queue_init(&A, 1, 16, 0);
	sdev_wr(&A, SPYRE_REG_INJECT, SPYRE_INJECT(0, SPYRE_INJECT_BAD_COMPLETION));
	sdev_wr(&A, SPYRE_REG_INJECT, SPYRE_INJECT(1, SPYRE_INJECT_HANG));
	pkt_nop(p, 5, 0);
	sdev_submit(&A, 1, p);
	TAP_CHECK(sdev_wait_status(&A, 1, SPYRE_QSTAT_BUSY, 5000), "queue 1 did not hang");
	if (migrate_live(&A, &B, PROPS, "i")) {
		TAP_CHECK(0, "migration failed");
		sdev_stop(&A);
		return;
	}
	sdev_stop(&A);
	TAP_EQ(1u << SPYRE_INJECT_BAD_COMPLETION, sdev_rd(&B, SPYRE_REG_INJECT));
	pkt_nop(p, 7, 0);
	sdev_submit(&B, 0, p);
	TAP_EQ(0, sdev_wait(&B, 0, 5000));
	TAP_EQ(7ull ^ ~0ull, sdev_rd64(&B, B.q[0].compl));
	TAP_EQ(0u, sdev_rd(&B, SPYRE_REG_INJECT));
	/* the hung queue: BUSY, nothing done, until a reset frees it */
	TAP_EQ((uint32_t)(SPYRE_QSTAT_ENABLED | SPYRE_QSTAT_BUSY), sdev_qrd(&B, 1, SPYRE_Q_STATUS));
	TAP_EQ(0u, sdev_qrd(&B, 1, SPYRE_Q_DONE));
	sdev_queue_restart(&B, 1);
	pkt_nop(p, 8, 0);
	sdev_submit(&B, 1, p);
	TAP_EQ(0, sdev_wait(&B, 1, 5000));
	TAP_EQ(8ull, sdev_rd64(&B, B.q[1].compl));
	sdev_stop(&B);
}

static void test_live_mid_work(void)
{
	static uint8_t src[NCOPY][CHUNK], got[CHUNK];
	struct sdev A, B;
	uint64_t hsrc[NCOPY], hdst[NCOPY], sem, pre;
	uint8_t p[64];
	unsigned i;

	if (sdev_start(&A, PROPS, RAM_MB)) {
		TAP_CHECK(0, "source QEMU did not start");
		return;
	}
	sdev_wr(&A, SPYRE_REG_SCRATCH, MAGIC);
	sem = sdev_alloc(&A, 8, 8);
	pre = sdev_alloc(&A, CHUNK, 4096);
	for (i = 0; i < NCOPY; i++) {
		hsrc[i] = sdev_alloc(&A, CHUNK, 4096);
		hdst[i] = sdev_alloc(&A, CHUNK, 4096);
		fill(src[i], i, CHUNK);
		sdev_memwrite(&A, hsrc[i], src[i], CHUNK);
	}

	/* Queue 1 writes device memory before the migration, and is idle. */
	sdev_queue_init(&A, 1, 8, 0);
	fill(got, 99, CHUNK);
	sdev_memwrite(&A, pre, got, CHUNK);
	pkt_copy(p, 100, 0, SPYRE_AS_HOST, pre, SPYRE_AS_DEVPHYS, DEV_PRE, CHUNK);
	sdev_submit(&A, 1, p);
	TAP_EQ(0, sdev_wait(&A, 1, 5000));

	/* Queue 0: a WAIT on a host semaphore, then host -> card -> host COPYs. */
	sdev_queue_init(&A, 0, 16, 0);
	pkt_sem(p, SPYRE_PKT_OP_WAIT, 1, 0, SPYRE_AS_HOST, sem, 1);
	sdev_push(&A, 0, p);
	for (i = 0; i < NCOPY; i++) {
		pkt_copy(p, 2 + 2 * i, 0, SPYRE_AS_HOST, hsrc[i], SPYRE_AS_DEVPHYS,
			 (uint64_t)i * CHUNK, CHUNK);
		sdev_push(&A, 0, p);
		pkt_copy(p, 3 + 2 * i, 0, SPYRE_AS_DEVPHYS, (uint64_t)i * CHUNK, SPYRE_AS_HOST,
			 hdst[i], CHUNK);
		if (i == NCOPY - 1)
			((struct spyre_pkt_hdr *)p)->flags = SPYRE_PKT_F_IRQ;
		sdev_push(&A, 0, p);
	}
	sdev_doorbell(&A, 0);
	TAP_CHECK(sdev_wait_status(&A, 0, SPYRE_QSTAT_WAITING, 5000), "queue 0 is not in its WAIT");

	if (migrate_live(&A, &B, PROPS, "l")) {
		TAP_CHECK(0, "migration failed");
		sdev_stop(&A);
		return;
	}

	/* The destination: registers, rings and device memory as they were. */
	TAP_EQ(MAGIC, sdev_rd(&B, SPYRE_REG_SCRATCH));
	TAP_EQ(0u, sdev_qrd(&B, 0, SPYRE_Q_HEAD));
	TAP_EQ(1u + 2 * NCOPY, sdev_qrd(&B, 0, SPYRE_Q_TAIL));
	TAP_EQ(0u, sdev_qrd(&B, 0, SPYRE_Q_DONE));
	TAP_EQ(1u, sdev_qrd(&B, 1, SPYRE_Q_DONE));
	TAP_EQ(100u, (uint32_t)sdev_rd64(&B, B.q[1].compl));
	TAP_CHECK(sdev_wait_status(&B, 0, SPYRE_QSTAT_ENABLED | SPYRE_QSTAT_WAITING, 5000),
		  "queue 0 did not take up its WAIT again: status 0x%x", sdev_qrd(&B, 0, SPYRE_Q_STATUS));
	qtest_memread(&B.qt, SDEV_BAR2 + DEV_PRE, got, CHUNK);
	fill(src[0], 99, CHUNK);
	TAP_CHECK(!memcmp(got, src[0], CHUNK), "device memory the card wrote did not arrive");
	fill(src[0], 0, CHUNK);

	/* The source is stopped: its card runs nothing, even with the semaphore up. */
	sdev_wr64(&A, sem, 1);
	usleep(200000);
	TAP_EQ(0u, sdev_qrd(&A, 0, SPYRE_Q_DONE));
	sdev_stop(&A);

	/* Release the WAIT on the destination: every queued COPY runs there. */
	sdev_wr64(&B, sem, 1);
	TAP_EQ(0, sdev_wait(&B, 0, 10000));
	TAP_EQ(1u + 2 * NCOPY, sdev_qrd(&B, 0, SPYRE_Q_DONE));
	TAP_EQ(1ull + 2 * NCOPY, sdev_rd64(&B, B.q[0].compl));
	TAP_EQ(0x1000u, sdev_irq(&B, 0));
	for (i = 0; i < NCOPY; i++) {
		sdev_memread(&B, hdst[i], got, CHUNK);
		TAP_CHECK(!memcmp(got, src[i], CHUNK), "COPY %u after migration: wrong bytes", i);
	}
	sdev_stop(&B);
}

/*
 * Timed mode: a COPY pending on the timeline (done functionally, completing
 * at a modeled virtual time) migrates as it stands and completes on the
 * destination exactly at that time, not 1 ns earlier. qtest's virtual clock
 * is the test's (not migrated): both QEMUs start at 0 and are stepped here.
 */
static void test_timed_pending(void)
{
	const char *props = PROPS ",timed=on,dma-mbps=1000";
	static uint8_t buf[CHUNK], got[CHUNK];
	/* dma-latency-ns 1000 + 64 KiB at 1000 MB/s */
	const int64_t dur = 1000 + (CHUNK * 1000 + 999) / 1000;
	int64_t t0, tb;
	struct sdev A, B;
	uint64_t h;
	uint8_t p[64];

	if (sdev_start(&A, props, RAM_MB)) {
		TAP_CHECK(0, "source QEMU did not start");
		return;
	}
	h = sdev_alloc(&A, CHUNK, 4096);
	fill(buf, 7, CHUNK);
	sdev_memwrite(&A, h, buf, CHUNK);
	sdev_queue_init(&A, 0, 16, 0);
	pkt_copy(p, 41, 0, SPYRE_AS_HOST, h, SPYRE_AS_DEVPHYS, 0, CHUNK);
	((struct spyre_pkt_hdr *)p)->flags = SPYRE_PKT_F_IRQ;
	sdev_submit(&A, 0, p);
	t0 = qtest_clock_step(&A.qt, 0);	/* the queue reaches it now */
	qtest_clock_step(&A.qt, dur / 2);
	TAP_EQ(0u, sdev_qrd(&A, 0, SPYRE_Q_DONE));
	TAP_EQ((uint32_t)(SPYRE_QSTAT_ENABLED | SPYRE_QSTAT_BUSY), sdev_qrd(&A, 0, SPYRE_Q_STATUS));

	if (migrate_live(&A, &B, props, "t")) {
		TAP_CHECK(0, "migration failed");
		sdev_stop(&A);
		return;
	}
	sdev_stop(&A);

	/* Still pending on the destination, until its time and not 1 ns before. */
	tb = qtest_clock_step(&B.qt, 0);
	TAP_CMP(tb, <, t0 + dur);
	TAP_EQ((uint32_t)(SPYRE_QSTAT_ENABLED | SPYRE_QSTAT_BUSY), sdev_qrd(&B, 0, SPYRE_Q_STATUS));
	qtest_clock_step(&B.qt, t0 + dur - 1 - tb);
	TAP_EQ(0u, sdev_qrd(&B, 0, SPYRE_Q_DONE));
	TAP_EQ(0ull, sdev_rd64(&B, B.q[0].compl));
	TAP_EQ(t0 + dur, qtest_clock_step(&B.qt, 1));
	TAP_EQ(1u, sdev_qrd(&B, 0, SPYRE_Q_DONE));
	TAP_EQ(1u, sdev_qrd(&B, 0, SPYRE_Q_HEAD));
	TAP_EQ(41ull, sdev_rd64(&B, B.q[0].compl));
	TAP_EQ(0x1000u, sdev_irq(&B, 0));
	/* done functionally on the source: the bytes came with device memory */
	qtest_memread(&B.qt, SDEV_BAR2, got, CHUNK);
	TAP_CHECK(!memcmp(got, buf, CHUNK), "the COPY's bytes did not arrive");
	sdev_stop(&B);
}

/* The saved stream, and where the device's SCRATCH register sits in it. */
static uint8_t *stream;
static size_t stream_len, magic_at;

static void save_stream(void)
{
	char uri[160];
	struct sdev A;
	struct stat st;
	size_t i, hits = 0;
	int fd;

	snprintf(file_path, sizeof(file_path), "/tmp/spyre-mig-%d.bin", getpid());
	unlink(file_path);
	if (sdev_start(&A, PROPS, RAM_MB))
		tap_bail("source QEMU did not start");
	sdev_wr(&A, SPYRE_REG_SCRATCH, MAGIC);
	sdev_queue_init(&A, 0, 16, 0);
	snprintf(uri, sizeof(uri), "exec:cat>%s", file_path);
	if (migrate(&A, uri))
		tap_bail("could not save the state to %s", file_path);
	sdev_stop(&A);
	fd = open(file_path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		tap_bail("no saved state at %s", file_path);
	stream_len = st.st_size;
	stream = malloc(stream_len);
	if (!stream || read(fd, stream, stream_len) != (ssize_t)stream_len)
		tap_bail("cannot read %s", file_path);
	close(fd);
	/* vmstate is big-endian: the register's bytes in order, once. */
	for (i = 0; i + 4 <= stream_len; i++) {
		if (stream[i] == 0x53 && stream[i + 1] == 0x50 && stream[i + 2] == 0x59 &&
		    stream[i + 3] == 0x4d) {
			magic_at = i;
			hits++;
		}
	}
	if (hits != 1)
		tap_bail("SCRATCH's value is %zu times in the stream, not once", hits);
}

/* Offsets from SCRATCH, in the order of spyre_vmstate's fields. */
enum {
	OFF_WINDOW_BASE = 12,
	OFF_CTX_COUNT = 40,
	OFF_IRQ_PENDING = 56,
	OFF_Q0_SIZE = 96,
	OFF_Q0_STATUS = 120,
};

static void put_be(uint8_t *b, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		b[i] = (uint8_t)v;
}

/* Load @len bytes of @buf into a fresh QEMU with @props; its exit status. */
static int load(const uint8_t *buf, size_t len, const char *props, char *out, size_t outlen)
{
	char path[128], mem[16], dev[160], inc[160];
	char *argv[] = {
		"/usr/bin/timeout", "120", (char *)qtest_qemu_path(), "-M", "q35", "-nodefaults",
		"-display", "none", "-monitor", "none", "-serial", "none", "-L", "/usr/share/qemu",
		"-L", "/usr/share/seabios", "-accel", "qtest", "-m", mem,
		"-device", dev, "-incoming", inc, NULL,
	};
	int fd, rc;

	snprintf(path, sizeof(path), "%s.bad", file_path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len) {
		TAP_CHECK(0, "cannot write %s", path);
		return -1;
	}
	close(fd);
	snprintf(mem, sizeof(mem), "%u", RAM_MB);
	snprintf(dev, sizeof(dev), "spyre,addr=04.0,%s", props);
	snprintf(inc, sizeof(inc), "exec:cat<%s", path);
	rc = qtest_run_capture(argv, out, outlen);
	unlink(path);
	return rc;
}

/* A corrupted stream: the load ends with exit status 1 and @why on stderr. */
static void expect_refused(const uint8_t *buf, size_t len, const char *props, const char *why)
{
	static char out[65536];
	int rc = load(buf, len, props, out, sizeof(out));

	TAP_EQ(1, rc);
	if (why)
		TAP_CHECK(strstr(out, why), "no '%s' in: %.400s", why, out);
}

static void corrupt(size_t off, uint64_t v, int n, const char *why)
{
	uint8_t *b = malloc(stream_len);

	memcpy(b, stream, stream_len);
	put_be(b + magic_at + off, v, n);
	expect_refused(b, stream_len, PROPS, why);
	free(b);
}

static void test_load_control(void)
{
	char inc[160];
	struct sdev C;

	memset(&C, 0, sizeof(C));
	snprintf(inc, sizeof(inc), "exec:cat<%s", file_path);
	if (start_incoming(&C, &C, PROPS, inc)) {
		TAP_CHECK(0, "QEMU did not start");
		return;
	}
	TAP_EQ(0, qmp_poll(&C.qt, "{\"execute\": \"query-status\"}", "\"status\": \"running\"", NULL, 30000));
	qpci_map_bar32(&C.qt, SDEV_PCI_DEV, 0, (uint32_t)SDEV_BAR0);
	TAP_EQ(MAGIC, sdev_rd(&C, SPYRE_REG_SCRATCH));
	TAP_EQ((uint32_t)SPYRE_QSTAT_ENABLED, sdev_qrd(&C, 0, SPYRE_Q_STATUS));
	TAP_EQ(16u, sdev_qrd(&C, 0, SPYRE_Q_SIZE));
	sdev_stop(&C);
}

static void test_refuse_window(void)
{
	corrupt(OFF_WINDOW_BASE, 0x123, 8, "WINDOW 0x123 is not");
}

static void test_refuse_ctx_count(void)
{
	corrupt(OFF_CTX_COUNT, 0xffffffff, 4, "MMU_CTX_COUNT 4294967295 exceeds 4096");
}

static void test_refuse_irq(void)
{
	corrupt(OFF_IRQ_PENDING, ~0ull, 8, "pending MSI-X vectors");
}

static void test_refuse_ring(void)
{
	corrupt(OFF_Q0_SIZE, 3, 4, "queue 0: enabled on ring base");
}

static void test_refuse_status(void)
{
	corrupt(OFF_Q0_STATUS, 0x80, 4, "queue 0: STATUS 0x80");
}

static void test_refuse_busy(void)
{
	/* functional mode saves queues between packets: BUSY cannot be */
	corrupt(OFF_Q0_STATUS, SPYRE_QSTAT_ENABLED | SPYRE_QSTAT_BUSY, 4,
		"queue 0: STATUS 0x3 between packets");
}

static void test_refuse_props(void)
{
	expect_refused(stream, stream_len, "mem-size=64M,queues=2",
		       "queues=4, this card has queues=2");
	expect_refused(stream, stream_len, "mem-size=64M,queues=4,cores=8",
		       "cores=32, this card has cores=8");
}

static void test_refuse_truncated(void)
{
	/* cut inside the device's fields, and inside guest RAM */
	expect_refused(stream, magic_at + 60, PROPS, NULL);
	expect_refused(stream, stream_len / 2, PROPS, NULL);
}

static void test_refuse_garbage(void)
{
	uint8_t *b = malloc(1 << 16);
	uint32_t x = 12345;

	for (size_t i = 0; i < 1 << 16; i++) {
		x = x * 1103515245 + 12345;
		b[i] = (uint8_t)(x >> 16);
	}
	expect_refused(b, 1 << 16, PROPS, NULL);
	/* a valid header, then garbage */
	memcpy(b, stream, 64);
	expect_refused(b, 1 << 16, PROPS, NULL);
	free(b);
}

static const struct tap_case cases[] = {
	{ "live migration with a queue mid-work", test_live_mid_work },
	{ "timed mode: a pending COPY completes at its time on the destination", test_timed_pending },
	{ "armed injections and a hung queue migrate", test_injections },
	{ "saved state loads back", test_load_control },
	{ "refused: window not aligned", test_refuse_window },
	{ "refused: MMU context count", test_refuse_ctx_count },
	{ "refused: pending vectors beyond the card's", test_refuse_irq },
	{ "refused: enabled queue on a bad ring", test_refuse_ring },
	{ "refused: unknown queue status bits", test_refuse_status },
	{ "refused: busy queue in functional mode", test_refuse_busy },
	{ "refused: other properties", test_refuse_props },
	{ "refused: truncated", test_refuse_truncated },
	{ "refused: garbage", test_refuse_garbage },
};

int main(int argc, char **argv)
{
	int ret;

	qtest_require_qemu();
	save_stream();
	ret = TAP_RUN(cases, argc, argv);
	unlink(file_path);
	free(stream);
	return ret;
}
