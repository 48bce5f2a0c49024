// SPDX-License-Identifier: MIT
/* qtest protocol client; see qtest-client.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qtest-client.h"
#include "../../tests/tap.h"

const char *qtest_qemu_path(void)
{
	static char path[512];
	const char *env = getenv("SPYRE_QEMU");
	const char *cache = getenv("SPYRE_CACHE");

	if (env && *env)
		return env;
	snprintf(path, sizeof(path), "%s/qemu/build/qemu-system-x86_64",
		 cache && *cache ? cache : "/var/cache/spyre");
	return path;
}

void qtest_require_qemu(void)
{
	if (!access(qtest_qemu_path(), X_OK))
		return;
	if (getenv("SPYRE_QEMU"))
		tap_bail("SPYRE_QEMU=%s is not an executable", qtest_qemu_path());
	tap_skip_all("no QEMU at %s (make setup, or set SPYRE_QEMU)", qtest_qemu_path());
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "qtest: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* Common QEMU arguments: q35, no default devices, firmware from Debian. */
static int base_argv(char **argv, int max, const char *extra, char *buf, size_t buflen)
{
	static const char *const base[] = {
		"-M", "q35", "-nodefaults", "-display", "none", "-monitor", "none",
		"-serial", "none", "-L", "/usr/share/qemu", "-L", "/usr/share/seabios",
	};
	int n = 0;
	size_t i;
	char *tok, *save;

	argv[n++] = (char *)qtest_qemu_path();
	for (i = 0; i < sizeof(base) / sizeof(base[0]); i++)
		argv[n++] = (char *)base[i];
	snprintf(buf, buflen, "%s", extra ? extra : "");
	for (tok = strtok_r(buf, " ", &save); tok && n < max - 1; tok = strtok_r(NULL, " ", &save))
		argv[n++] = tok;
	argv[n] = NULL;
	return n;
}

int qtest_start(struct qtest *qt, const char *extra)
{
	static unsigned seq;
	char *argv[64], buf[1024], qarg[160], qmparg[160];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct pollfd pfd;
	int lfd, n;

	memset(qt, 0, sizeof(*qt));
	qt->fd = -1;
	spyre_qmp_init(&qt->qmp);
	if (access(qtest_qemu_path(), X_OK)) {
		fprintf(stderr, "qtest: no QEMU at %s (run 'make setup')\n", qtest_qemu_path());
		return -1;
	}
	/* A test may run two QEMUs at once (migration): a name each. */
	snprintf(qt->sock_path, sizeof(qt->sock_path), "/tmp/spyre-qtest-%d-%u.sock", getpid(), seq);
	snprintf(qt->log_path, sizeof(qt->log_path), "/tmp/spyre-qtest-%d-%u.log", getpid(), seq);
	snprintf(qt->qmp_path, sizeof(qt->qmp_path), "/tmp/spyre-qmp-%d-%u.sock", getpid(), seq);
	seq++;
	unlink(qt->sock_path);
	unlink(qt->log_path);
	unlink(qt->qmp_path);

	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		die("socket: %s", strerror(errno));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", qt->sock_path);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
		die("bind/listen %s: %s", qt->sock_path, strerror(errno));

	n = base_argv(argv, 56, extra, buf, sizeof(buf));
	snprintf(qarg, sizeof(qarg), "unix:%s", qt->sock_path);
	argv[n++] = "-accel";
	argv[n++] = "qtest";
	argv[n++] = "-qtest";
	argv[n++] = qarg;
	argv[n++] = "-qtest-log";
	argv[n++] = "none";	/* no log: QEMU logs with a timer it may not have */
	argv[n++] = "-d";
	argv[n++] = "guest_errors";
	argv[n++] = "-D";
	argv[n++] = qt->log_path;
	snprintf(qmparg, sizeof(qmparg), "unix:%s,server=on,wait=off", qt->qmp_path);
	argv[n++] = "-qmp";
	argv[n++] = qmparg;
	argv[n] = NULL;

	qt->pid = fork();
	if (qt->pid < 0)
		die("fork: %s", strerror(errno));
	if (qt->pid == 0) {
		/* A test that dies (die(), a crash) leaves no QEMU behind. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execv(argv[0], argv);
		_exit(127);
	}

	pfd.fd = lfd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 30000) != 1) {
		fprintf(stderr, "qtest: QEMU did not connect (bad arguments?)\n");
		close(lfd);
		qtest_quit(qt);
		return -1;
	}
	qt->fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	close(lfd);
	unlink(qt->sock_path);
	if (qt->fd < 0)
		die("accept: %s", strerror(errno));
	qt->rx = fdopen(dup(qt->fd), "r");
	return 0;
}

void qtest_quit(struct qtest *qt)
{
	int status;

	if (qt->rx)
		fclose(qt->rx);
	if (qt->fd >= 0)
		close(qt->fd);
	spyre_qmp_close(&qt->qmp);
	qt->rx = NULL;
	qt->fd = -1;
	unlink(qt->qmp_path);
	if (qt->pid > 0) {
		kill(qt->pid, SIGTERM);
		waitpid(qt->pid, &status, 0);
		qt->pid = 0;
	}
	unlink(qt->log_path);
}

/* Send one command and return the reply line (after "OK"), skipping IRQ events. */
/* Send a command; the reply line (IRQ notices skipped), OK or not. */
static char *vcmd_reply(struct qtest *qt, char *out, size_t outsz, const char *fmt, va_list ap)
{
	static char line[512];
	int n;

	n = vsnprintf(out, outsz - 1, fmt, ap);
	out[n++] = '\n';
	out[n] = 0;
	if (write(qt->fd, out, (size_t)n) != n)
		die("write to QEMU: %s", strerror(errno));
	for (;;) {
		if (!fgets(line, sizeof(line), qt->rx))
			die("QEMU closed the qtest connection (crashed?) after: %.*s", n - 1, out);
		if (strncmp(line, "IRQ", 3))
			return line;
	}
}

static char *cmd(struct qtest *qt, const char *fmt, ...)
{
	char out[256], *line;
	va_list ap;

	va_start(ap, fmt);
	line = vcmd_reply(qt, out, sizeof(out), fmt, ap);
	va_end(ap);
	if (strncmp(line, "OK", 2))
		die("qtest command '%.*s' failed: %s", (int)strlen(out) - 1, out, line);
	return line + 2;
}

static char *cmd_reply(struct qtest *qt, const char *fmt, ...)
{
	char out[256], *line;
	va_list ap;

	va_start(ap, fmt);
	line = vcmd_reply(qt, out, sizeof(out), fmt, ap);
	va_end(ap);
	return line;
}

uint32_t qtest_readl(struct qtest *qt, uint64_t addr)
{
	return (uint32_t)strtoull(cmd(qt, "readl 0x%" PRIx64, addr), NULL, 0);
}

void qtest_writel(struct qtest *qt, uint64_t addr, uint32_t val)
{
	cmd(qt, "writel 0x%" PRIx64 " 0x%x", addr, val);
}

uint64_t qtest_readq(struct qtest *qt, uint64_t addr)
{
	return strtoull(cmd(qt, "readq 0x%" PRIx64, addr), NULL, 0);
}

void qtest_writeq(struct qtest *qt, uint64_t addr, uint64_t val)
{
	cmd(qt, "writeq 0x%" PRIx64 " 0x%" PRIx64, addr, val);
}

uint16_t qtest_readw(struct qtest *qt, uint64_t addr)
{
	return (uint16_t)strtoull(cmd(qt, "readw 0x%" PRIx64, addr), NULL, 0);
}

void qtest_writew(struct qtest *qt, uint64_t addr, uint16_t val)
{
	cmd(qt, "writew 0x%" PRIx64 " 0x%x", addr, val);
}

#define QT_BULK 32768

void qtest_memwrite(struct qtest *qt, uint64_t addr, const void *buf, uint64_t len)
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t *b = buf;
	char *line = malloc(2 * QT_BULK + 96), *reply = NULL;
	size_t cap = 0;

	while (len) {
		uint64_t n = len < QT_BULK ? len : QT_BULK, i;
		int k = sprintf(line, "write 0x%" PRIx64 " 0x%" PRIx64 " 0x", addr, n);

		for (i = 0; i < n; i++) {
			line[k++] = hex[b[i] >> 4];
			line[k++] = hex[b[i] & 15];
		}
		line[k++] = '\n';
		if (write(qt->fd, line, (size_t)k) != k)
			die("write to QEMU: %s", strerror(errno));
		do {
			if (getline(&reply, &cap, qt->rx) < 0)
				die("QEMU closed the qtest connection during a write");
		} while (!strncmp(reply, "IRQ", 3));
		if (strncmp(reply, "OK", 2))
			die("qtest write failed: %s", reply);
		addr += n;
		b += n;
		len -= n;
	}
	free(reply);
	free(line);
}

static int unhex(char c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

void qtest_memread(struct qtest *qt, uint64_t addr, void *buf, uint64_t len)
{
	uint8_t *b = buf;
	char *reply = NULL, out[96];
	size_t cap = 0;

	while (len) {
		uint64_t n = len < QT_BULK ? len : QT_BULK, i;
		int k = snprintf(out, sizeof(out), "read 0x%" PRIx64 " 0x%" PRIx64 "\n", addr, n);

		if (write(qt->fd, out, (size_t)k) != k)
			die("write to QEMU: %s", strerror(errno));
		do {
			if (getline(&reply, &cap, qt->rx) < 0)
				die("QEMU closed the qtest connection during a read");
		} while (!strncmp(reply, "IRQ", 3));
		if (strncmp(reply, "OK 0x", 5) || strlen(reply) < 5 + 2 * n)
			die("qtest read failed: %.80s", reply);
		for (i = 0; i < n; i++)
			b[i] = (uint8_t)(unhex(reply[5 + 2 * i]) << 4 | unhex(reply[6 + 2 * i]));
		addr += n;
		b += n;
		len -= n;
	}
	free(reply);
}

void qtest_memset(struct qtest *qt, uint64_t addr, uint8_t val, uint64_t len)
{
	cmd(qt, "memset 0x%" PRIx64 " 0x%" PRIx64 " 0x%02x", addr, len, val);
}

/*
 * The virtual clock, unchanged: "clock_set 0" (a time already past) leaves it
 * as it is and answers with it, "OK T" on QEMU 7.2, "FAIL T" on 10.0 (whose
 * "clock_step 0" fails: it could not advance time).
 */
int64_t qtest_clock_now(struct qtest *qt)
{
	char *line = cmd_reply(qt, "clock_set 0"), *num, *end;
	long long t;

	num = !strncmp(line, "OK ", 3) ? line + 3 : !strncmp(line, "FAIL ", 5) ? line + 5 : NULL;
	if (!num)
		die("qtest command 'clock_set 0' answered: %s", line);
	t = strtoll(num, &end, 0);
	if (end == num || t < 0)
		die("qtest command 'clock_set 0' answered no time: %s", line);
	return t;
}

int64_t qtest_clock_step(struct qtest *qt, int64_t ns)
{
	if (!ns)
		return qtest_clock_now(qt);
	return strtoll(ns < 0 ? cmd(qt, "clock_step") : cmd(qt, "clock_step %" PRId64, ns), NULL, 0);
}

uint32_t qtest_inl(struct qtest *qt, uint16_t port)
{
	return (uint32_t)strtoull(cmd(qt, "inl 0x%x", port), NULL, 0);
}

void qtest_outl(struct qtest *qt, uint16_t port, uint32_t val)
{
	cmd(qt, "outl 0x%x 0x%x", port, val);
}

static uint32_t cfg_addr(int dev, int off)
{
	return 0x80000000u | (uint32_t)dev << 11 | ((uint32_t)off & 0xfc);
}

uint32_t qpci_cfg_readl(struct qtest *qt, int dev, int off)
{
	qtest_outl(qt, 0xcf8, cfg_addr(dev, off));
	return qtest_inl(qt, 0xcfc);
}

void qpci_cfg_writel(struct qtest *qt, int dev, int off, uint32_t val)
{
	qtest_outl(qt, 0xcf8, cfg_addr(dev, off));
	qtest_outl(qt, 0xcfc, val);
}

uint16_t qpci_cfg_readw(struct qtest *qt, int dev, int off)
{
	return (uint16_t)(qpci_cfg_readl(qt, dev, off) >> ((off & 2) * 8));
}

void qpci_cfg_writew(struct qtest *qt, int dev, int off, uint16_t val)
{
	uint32_t v = qpci_cfg_readl(qt, dev, off);
	int shift = (off & 2) * 8;

	v = (v & ~(0xffffu << shift)) | (uint32_t)val << shift;
	qpci_cfg_writel(qt, dev, off, v);
}

uint8_t qpci_cfg_readb(struct qtest *qt, int dev, int off)
{
	return (uint8_t)(qpci_cfg_readl(qt, dev, off) >> ((off & 3) * 8));
}

int qpci_find_cap(struct qtest *qt, int dev, uint8_t id)
{
	int ptr, guard = 48;

	if (!(qpci_cfg_readw(qt, dev, 0x06) & 0x10))
		return 0;
	for (ptr = qpci_cfg_readb(qt, dev, 0x34) & 0xfc; ptr && guard--;
	     ptr = qpci_cfg_readb(qt, dev, ptr + 1) & 0xfc)
		if (qpci_cfg_readb(qt, dev, ptr) == id)
			return ptr;
	return 0;
}

void qpci_map_bar32(struct qtest *qt, int dev, int bar, uint32_t addr)
{
	qpci_cfg_writel(qt, dev, 0x10 + 4 * bar, addr);
	qpci_cfg_writew(qt, dev, 0x04, qpci_cfg_readw(qt, dev, 0x04) | 0x6);
}

bool qtest_log_contains(struct qtest *qt, const char *needle)
{
	char buf[65536];
	size_t n;
	FILE *f = fopen(qt->log_path, "r");

	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

int qtest_run_capture(char *const argv[], char *out, size_t outlen)
{
	int pipefd[2], status;
	size_t used = 0;
	ssize_t n;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pipefd[1]);
	while ((n = read(pipefd[0], out + used, outlen - 1 - used)) > 0) {
		used += (size_t)n;
		if (used == outlen - 1)
			used = 0;	/* keep reading; only the tail matters */
	}
	out[used] = '\0';
	close(pipefd[0]);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

int qtest_qmp(struct qtest *qt, const char *json, char *reply, size_t len)
{
	char err[256];
	int ret;

	if (reply && len)
		*reply = 0;
	if (qt->qmp.fd < 0 && spyre_qmp_open(&qt->qmp, qt->qmp_path, 5000, err, sizeof(err)))
		die("QMP: %s", err);
	ret = spyre_qmp_cmd(&qt->qmp, json, NULL, err, sizeof(err));
	if (reply && len)
		snprintf(reply, len, "%s", qt->qmp.line);
	return ret;
}
