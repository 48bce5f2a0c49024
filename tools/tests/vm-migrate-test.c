// SPDX-License-Identifier: MIT
/*
 * Description: the live migration launcher (build/tools/vm/migrate, from
 * tools/vm/migrate.c; tools/vm/run --migrate) on the host, no VM: bad usage
 * exits 2 naming the problem; with this program standing in for QEMU (a fake
 * that serves QMP on the socket it is given, writes device trace lines as
 * QEMU's log backend does and answers as QEMU would) two migrations run
 * through the exact QMP exchange (capabilities, migrate-set-parameters with
 * 4 GiB/s and 2000 ms, migrate to unix:DIR/migN.sock, query-migrate polled
 * past an event until completed, query-status on the destination, quit) and
 * the exact QEMU arguments (-qmp, -D, -trace, -incoming), each reported in
 * one line with the figures of query-migrate and what the traces say was in
 * flight (the last line of each kind, the source's pause and save, the
 * destination's load), and the last QEMU's exit status is the launcher's;
 * without traces the report says so; a failed migration, a QMP error
 * answer, a guest that finished before its marker and a QEMU that cannot
 * run exit 1 with a FAIL report line (the QEMUs' trace tails after it) and
 * the reason on stderr, and every QEMU is gone; SIGTERM kills the QEMUs and
 * exits 143.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../tests/tap.h"

static char self[PATH_MAX], migrate_bin[PATH_MAX];

/* ---- the fake QEMU ------------------------------------------------------- */

/*
 * argv: --fake-qemu MODE LAST RC, then what the launcher appends. MODE: ok
 * (serve QMP, write traces), notrace, failed (query-migrate says failed),
 * error (migrate-set-parameters answers an error), exit (exit RC at once),
 * hang (sleep). QEMU number LAST exits RC once asked query-status.
 */
struct fake {
	const char *mode;
	int k, last, rc;
	char dir[PATH_MAX], qmp[PATH_MAX], trace[PATH_MAX];
	bool incoming;
};

static void fake_file(struct fake *f, const char *what, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fake_file(struct fake *f, const char *what, const char *fmt, ...)
{
	char path[PATH_MAX + 16];
	va_list ap;
	FILE *o;

	snprintf(path, sizeof(path), "%s/%s%d", f->dir, what, f->k);
	o = fopen(path, "a");
	if (!o)
		exit(90);
	va_start(ap, fmt);
	vfprintf(o, fmt, ap);
	va_end(ap);
	fclose(o);
}

/* A line as QEMU's log trace backend writes it (pid@time:event text). */
static void fake_trace(struct fake *f, const char *event, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fake_trace(struct fake *f, const char *event, const char *fmt, ...)
{
	FILE *o;
	va_list ap;

	if (!strcmp(f->mode, "notrace"))
		return;
	o = fopen(f->trace, "a");
	if (!o)
		exit(91);
	fprintf(o, "%d@1700000000.%06d:%s ", getpid(), f->k, event);
	va_start(ap, fmt);
	vfprintf(o, fmt, ap);
	va_end(ap);
	fputc('\n', o);
	fclose(o);
}

static void say(int fd, const char *s)
{
	size_t n = strlen(s);

	if (write(fd, s, n) != (ssize_t)n || write(fd, "\r\n", 2) != 2)
		exit(0);	/* the launcher went away */
}

/*
 * The next command line into @line. As QEMU runs a command once its closing
 * brace is in, a command must come whole in one write with its newline (else
 * a quit closes the socket before the newline): a read that ends inside a
 * line is recorded in DIR/cmdsN, which the cases compare whole.
 */
static bool next_command(int fd, char *line, size_t len, struct fake *f)
{
	static char buf[8192];
	static size_t have;
	char *nl;
	ssize_t n;

	while (!(nl = memchr(buf, '\n', have))) {
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			return false;
		have += (size_t)n;
		if (buf[have - 1] != '\n')
			fake_file(f, "cmds", "a read ended inside a command: %.*s\n", (int)have, buf);
	}
	snprintf(line, len, "%.*s", (int)(nl + 1 - buf), buf);
	have -= (size_t)(nl + 1 - buf);
	memmove(buf, nl + 1, have);
	return true;
}

static int fake_qemu(int argc, char **argv)
{
	struct fake f = { .mode = argv[2], .last = atoi(argv[3]), .rc = atoi(argv[4]) };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char line[4096], *p;
	int i, lfd, fd, queries = 0;

	for (i = 5; i < argc; i++) {
		if (!strcmp(argv[i], "-qmp") && i + 1 < argc) {
			snprintf(f.qmp, sizeof(f.qmp), "%s", argv[i + 1] + strlen("unix:"));
			p = strchr(f.qmp, ',');
			if (p)
				*p = '\0';
		} else if (!strcmp(argv[i], "-D") && i + 1 < argc) {
			snprintf(f.trace, sizeof(f.trace), "%s", argv[i + 1]);
		} else if (!strcmp(argv[i], "-incoming")) {
			f.incoming = true;
		}
	}
	/* DIR/traceN.log: the directory and N */
	snprintf(f.dir, sizeof(f.dir), "%s", f.trace);
	p = strrchr(f.dir, '/');
	if (!p || sscanf(p, "/trace%d.log", &f.k) != 1)
		return 92;
	*p = '\0';
	fake_file(&f, "pid", "%d\n", getpid());
	for (i = 5; i < argc; i++)
		fake_file(&f, "args", "%s%s", i > 5 ? " " : "", argv[i]);
	fake_file(&f, "args", "\n");
	if (!strcmp(f.mode, "exit"))
		return f.rc;
	if (!strcmp(f.mode, "hang"))
		for (;;)
			pause();
	if (f.incoming)
		fake_trace(&f, "spyre_migrate_in_flight", "load: %d queues with work, %d packets submitted and not completed",
			   f.k, 10 * f.k);

	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (strlen(f.qmp) >= sizeof(sa.sun_path))
		return 95;
	memcpy(sa.sun_path, f.qmp, strlen(f.qmp) + 1);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
		return 93;
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		return 94;
	say(fd, "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, \"minor\": 2, \"major\": 7}, \"package\": \"\"}, "
		"\"capabilities\": [\"oob\"]}}");
	while (next_command(fd, line, sizeof(line), &f)) {
		fake_file(&f, "cmds", "%s", line);
		if (strstr(line, "\"qmp_capabilities\"")) {
			say(fd, "{\"return\": {}}");
		} else if (strstr(line, "\"migrate-set-parameters\"")) {
			say(fd, !strcmp(f.mode, "error") ?
				"{\"error\": {\"class\": \"GenericError\", \"desc\": \"Parameter 'max-bandwidth' is unexpected\"}}" :
				"{\"return\": {}}");
		} else if (strstr(line, "\"migrate\"")) {
			fake_trace(&f, "spyre_queues_pause", "VM stopped: 9 packets running (9 in a WAIT, run again "
				   "when the VM runs); the others finish before the save");
			fake_trace(&f, "spyre_queues_pause", "VM stopped: %d packets running (%d in a WAIT, run again "
				   "when the VM runs); the others finish before the save", f.k + 1, f.k);
			fake_trace(&f, "spyre_migrate_queue", "save: queue 0 head 1 tail 3 status 0x1 timed phase 0");
			fake_trace(&f, "spyre_migrate_in_flight", "save: %d queues with work, %d packets submitted and not "
				   "completed", f.k + 1, 10 * (f.k + 1));
			say(fd, "{\"return\": {}}");
		} else if (strstr(line, "\"query-migrate\"")) {
			char a[512];

			if (!strcmp(f.mode, "failed")) {
				say(fd, "{\"return\": {\"status\": \"failed\", \"error-desc\": \"fake: no space\"}}");
			} else if (queries++ == 0) {
				say(fd, "{\"return\": {\"status\": \"active\", \"total-time\": 3, \"ram\": {\"transferred\": 1}}}");
			} else {
				say(fd, "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}, \"event\": \"MIGRATION\", "
					"\"data\": {\"status\": \"completed\"}}");
				snprintf(a, sizeof(a), "{\"return\": {\"status\": \"completed\", \"setup-time\": 1, "
					 "\"downtime\": %d, \"total-time\": %d, \"ram\": {\"total\": 3221225472, "
					 "\"duplicate\": %d, \"transferred\": %d, \"mbps\": 1.5}}}",
					 50 + f.k, 1000 + f.k, 721269 + f.k, (273 << 20) + 5);
				say(fd, a);
			}
		} else if (strstr(line, "\"query-status\"")) {
			say(fd, "{\"return\": {\"status\": \"running\", \"singlestep\": false, \"running\": true}}");
			if (f.k == f.last)
				return f.rc;
		} else if (strstr(line, "\"quit\"")) {
			say(fd, "{\"return\": {}}");
			return 0;
		} else {
			say(fd, "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"unknown command\"}}");
		}
	}
	return 0;
}

/* ---- running the launcher ----------------------------------------------- */

struct run {
	char dir[200];
	int status;		/* exit status, 128 + signal */
	char out[8192], err[8192], report[8192];
};

static void slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? 0 : read(fd, buf, len - 1);

	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
}

static void slurp_in(struct run *r, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/%s", r->dir, name);
	slurp(path, buf, len);
}

static void new_dir(struct run *r)
{
	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	if ((size_t)snprintf(r->dir, sizeof(r->dir), "%s/vm-migrate-test.XXXXXX", tmp) >= sizeof(r->dir) - 20)
		tap_bail("TMPDIR is too long for the QEMU sockets' paths: %s", tmp);
	if (!mkdtemp(r->dir))
		tap_bail("mkdtemp: %s", strerror(errno));
}

static void rm_dir(struct run *r)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r->dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", r->dir);
}

static pid_t spawn(struct run *r, char **args)
{
	char o[PATH_MAX + 16], e[PATH_MAX + 16];
	pid_t pid;

	snprintf(o, sizeof(o), "%s/stdout", r->dir);
	snprintf(e, sizeof(e), "%s/stderr", r->dir);
	pid = fork();
	if (pid == 0) {
		int fo = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fo, 1);
		dup2(fe, 2);
		execv(migrate_bin, args);
		_exit(126);
	}
	return pid;
}

static void finish(struct run *r, pid_t pid)
{
	int st, i;

	for (i = 0; i < 600 && waitpid(pid, &st, WNOHANG) == 0; i++)
		usleep(50 * 1000);
	if (i == 600) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	slurp_in(r, "stdout", r->out, sizeof(r->out));
	slurp_in(r, "stderr", r->err, sizeof(r->err));
	slurp_in(r, "report", r->report, sizeof(r->report));
}

/* migrate ARGS... (NULL-terminated), in a new directory, to the end (30 s at most). */
static void run_args(struct run *r, ...)
{
	char *args[32];
	va_list ap;
	int n = 0;

	args[n++] = migrate_bin;
	va_start(ap, r);
	while (n < 31 && (args[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	args[n] = NULL;
	finish(r, spawn(r, args));
}

/*
 * The launcher on the fake: --work DIR --out DIR/out --report DIR/report,
 * the markers, -- the fake in MODE (LAST, RC) with "-M q35"; @out written to
 * DIR/out first. Returns the launcher's pid when @wait is false.
 */
static pid_t run_fake(struct run *r, const char *mode, int last, int rc, const char *out, const char *const *markers,
		      bool wait)
{
	char work[PATH_MAX], outf[PATH_MAX + 8], rep[PATH_MAX + 8], lastarg[16], rcarg[16];
	char *args[48];
	int n = 0, i;
	FILE *o;
	pid_t pid;

	snprintf(work, sizeof(work), "%s", r->dir);
	snprintf(outf, sizeof(outf), "%s/out", r->dir);
	snprintf(rep, sizeof(rep), "%s/report", r->dir);
	snprintf(lastarg, sizeof(lastarg), "%d", last);
	snprintf(rcarg, sizeof(rcarg), "%d", rc);
	o = fopen(outf, "w");
	if (!o)
		tap_bail("%s: %s", outf, strerror(errno));
	fputs(out, o);
	fclose(o);
	args[n++] = migrate_bin;
	args[n++] = "--work";
	args[n++] = work;
	args[n++] = "--out";
	args[n++] = outf;
	args[n++] = "--report";
	args[n++] = rep;
	for (i = 0; markers && markers[i]; i++) {
		args[n++] = "--marker";
		args[n++] = (char *)markers[i];
	}
	args[n++] = "--";
	args[n++] = self;
	args[n++] = "--fake-qemu";
	args[n++] = (char *)mode;
	args[n++] = lastarg;
	args[n++] = rcarg;
	args[n++] = "-M";
	args[n++] = "q35";
	args[n] = NULL;
	pid = spawn(r, args);
	if (wait)
		finish(r, pid);
	return pid;
}

/* The file DIR/NAME<k> as a string (empty when absent). */
static const char *fake_out(struct run *r, const char *name, int k)
{
	static char buf[8192];
	char n[64];

	snprintf(n, sizeof(n), "%s%d", name, k);
	slurp_in(r, n, buf, sizeof(buf));
	return buf;
}

/* True when the fake QEMU number @k ran and is gone (not even a zombie of ours). */
static bool fake_gone(struct run *r, int k)
{
	int pid = atoi(fake_out(r, "pid", k));

	return pid > 0 && kill(pid, 0) && errno == ESRCH;
}

/* ---- the cases ------------------------------------------------------------ */

static void test_usage(void)
{
	struct run r;

	new_dir(&r);
	run_args(&r, NULL);
	TAP_EQ(2, r.status);
	TAP_STREQ("tools/vm/migrate: missing --work --out --report (see --help)\n", r.err);
	run_args(&r, "--work", r.dir, "--out", "x", NULL);
	TAP_EQ(2, r.status);
	TAP_STREQ("tools/vm/migrate: missing --report (see --help)\n", r.err);
	run_args(&r, "--bogus", NULL);
	TAP_EQ(2, r.status);
	TAP_STREQ("tools/vm/migrate: unknown option --bogus (see --help)\n", r.err);
	run_args(&r, "--out", "x", "--work", NULL);
	TAP_EQ(2, r.status);
	TAP_STREQ("tools/vm/migrate: --work needs a value (see --help)\n", r.err);
	run_args(&r, "--work", r.dir, "--out", "x", "--report", "y", "--marker", "m", NULL);
	TAP_EQ(2, r.status);
	TAP_STREQ("tools/vm/migrate: no QEMU command after the options (see --help)\n", r.err);
	run_args(&r, "--work", r.dir, "--out", "x", "--report", "y", "--marker", "", "--", "qemu", NULL);
	TAP_EQ(2, r.status);
	TAP_STREQ("tools/vm/migrate: --marker: an empty marker (see --help)\n", r.err);
	run_args(&r, "--work", "/tmp/a-directory-whose-name-is-far-too-long-for-a-unix-socket-path-once-qmp0.sock-is-"
		 "appended", "--out", "x", "--report", "y", "--", "qemu", NULL);
	TAP_EQ(2, r.status);
	TAP_CHECK(strstr(r.err, "is too long for a unix socket's path (88 bytes at most)"), "stderr: %s", r.err);
	run_args(&r, "--help", NULL);
	TAP_EQ(0, r.status);
	TAP_CHECK(!strncmp(r.out, "usage: tools/vm/migrate --work DIR --out FILE --report FILE", 59), "stdout: %s", r.out);
	TAP_STREQ("", r.err);
	rm_dir(&r);
}

static void test_two_migrations(void)
{
	static const char *const markers[] = { "# spyre-copy-loop: looping", "# decode: looping", NULL };
	char want[4096], line[2048];
	struct run r;
	int k;

	new_dir(&r);
	run_fake(&r, "ok", 2, 3, "boot\n# spyre-copy-loop: looping\n# decode: looping\n", markers, true);
	TAP_EQ(3, r.status);	/* the last QEMU's */
	TAP_STREQ("", r.err);
	snprintf(want, sizeof(want),
		 "migration 1 at '# spyre-copy-loop: looping': completed in 1000 ms, downtime 50 ms, 273 MiB sent "
		 "(721269 zero pages); the card: 1 packets running at the stop (0 WAITs to run again, the others "
		 "finished before the save); 10 packets queued on 1 queues saved; 10 on 1 queues loaded to resume\n"
		 "migration 2 at '# decode: looping': completed in 1001 ms, downtime 51 ms, 273 MiB sent "
		 "(721270 zero pages); the card: 2 packets running at the stop (1 WAITs to run again, the others "
		 "finished before the save); 20 packets queued on 2 queues saved; 20 on 2 queues loaded to resume\n");
	TAP_STREQ(want, r.report);
	/* the QEMUs' arguments */
	for (k = 0; k < 3; k++) {
		snprintf(line, sizeof(line), "-M q35 -qmp unix:%s/qmp%d.sock,server=on,wait=off -D %s/trace%d.log "
			 "-trace spyre_migrate* -trace spyre_queues_pause", r.dir, k, r.dir, k);
		snprintf(want, sizeof(want), "%s%s%s%s\n", line, k ? " -incoming unix:" : "", k ? r.dir : "",
			 k == 1 ? "/mig1.sock" : k == 2 ? "/mig2.sock" : "");
		TAP_STREQ(want, fake_out(&r, "args", k));
	}
	/* the QMP exchange with each */
	for (k = 0; k < 2; k++) {
		snprintf(want, sizeof(want),
			 "{\"execute\": \"qmp_capabilities\"}\n%s"
			 "{\"execute\": \"migrate-set-parameters\", \"arguments\": {\"max-bandwidth\": 4294967296, "
			 "\"downtime-limit\": 2000}}\n"
			 "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"unix:%s/mig%d.sock\"}}\n"
			 "{\"execute\": \"query-migrate\"}\n{\"execute\": \"query-migrate\"}\n"
			 "{\"execute\": \"quit\"}\n", k ? "{\"execute\": \"query-status\"}\n" : "", r.dir, k + 1);
		TAP_STREQ(want, fake_out(&r, "cmds", k));
	}
	TAP_STREQ("{\"execute\": \"qmp_capabilities\"}\n{\"execute\": \"query-status\"}\n", fake_out(&r, "cmds", 2));
	for (k = 0; k < 3; k++)
		TAP_CHECK(fake_gone(&r, k), "QEMU %d still there", k);
	rm_dir(&r);
}

static void test_no_trace(void)
{
	static const char *const markers[] = { "marker", NULL };
	struct run r;

	new_dir(&r);
	run_fake(&r, "notrace", 1, 0, "a marker line\n", markers, true);
	TAP_EQ(0, r.status);
	TAP_STREQ("migration 1 at 'marker': completed in 1000 ms, downtime 50 ms, 273 MiB sent (721269 zero pages); "
		  "the card: no device trace (QEMU built without the log trace backend?)\n", r.report);
	rm_dir(&r);
}

static void test_no_markers(void)
{
	struct run r;

	new_dir(&r);
	run_fake(&r, "exit", 0, 5, "", NULL, true);
	TAP_EQ(5, r.status);
	TAP_STREQ("", r.report);
	TAP_STREQ("", r.err);
	rm_dir(&r);
}

/* Every failure: exit 1, the FAIL line first, the reason on stderr, every QEMU gone. */
static void check_fail(struct run *r, const char *why, int nqemu)
{
	char want[1024];
	int k;

	TAP_EQ(1, r->status);
	snprintf(want, sizeof(want), "FAIL: %s\n", why);
	TAP_CHECK(!strncmp(r->report, want, strlen(want)), "report: %s", r->report);
	snprintf(want, sizeof(want), "tools/vm/migrate: %s\n", why);
	TAP_STREQ(want, r->err);
	for (k = 0; k < nqemu; k++)
		TAP_CHECK(fake_gone(r, k), "QEMU %d still there", k);
}

static void test_failed(void)
{
	static const char *const markers[] = { "go", NULL };
	struct run r;

	new_dir(&r);
	run_fake(&r, "failed", 1, 0, "go\n", markers, true);
	check_fail(&r, "migration 1 failed: fake: no space", 2);
	/* the source's device trace lines follow, the last 8 holding spyre_ */
	TAP_CHECK(strstr(r.report, "\n  QEMU 0: "), "report: %s", r.report);
	TAP_CHECK(strstr(r.report, ":spyre_migrate_in_flight save: 1 queues with work, 10 packets submitted and not "
			 "completed\n"), "report: %s", r.report);
	TAP_CHECK(strstr(r.report, "\n  QEMU 1: ") && strstr(r.report, "load: 1 queues with work"), "report: %s",
		  r.report);
	rm_dir(&r);
}

static void test_qmp_error(void)
{
	static const char *const markers[] = { "go", NULL };
	struct run r;

	new_dir(&r);
	run_fake(&r, "error", 1, 0, "go\n", markers, true);
	check_fail(&r, "migration 1: migrate-set-parameters: Parameter 'max-bandwidth' is unexpected "
		   "(source QEMU running, destination running)", 2);
	rm_dir(&r);
}

static void test_guest_finished(void)
{
	static const char *const markers[] = { "# never", NULL };
	struct run r;

	new_dir(&r);
	run_fake(&r, "exit", 0, 0, "no marker here\n", markers, true);
	check_fail(&r, "the guest finished before it printed '# never': no migration 1", 1);
	rm_dir(&r);
}

static void test_cannot_run(void)
{
	struct run r;
	char rep[PATH_MAX + 8];

	new_dir(&r);
	snprintf(rep, sizeof(rep), "%s/report", r.dir);
	run_args(&r, "--work", r.dir, "--out", "/dev/null", "--report", rep, "--", "/nonexistent/qemu", NULL);
	TAP_EQ(1, r.status);
	TAP_STREQ("tools/vm/migrate: cannot run /nonexistent/qemu: No such file or directory\n", r.err);
	TAP_STREQ("FAIL: cannot run /nonexistent/qemu: No such file or directory\n", r.report);
	rm_dir(&r);
}

static void test_sigterm(void)
{
	static const char *const markers[] = { "never", NULL };
	struct run r;
	pid_t pid;
	int i;

	new_dir(&r);
	pid = run_fake(&r, "hang", 0, 0, "", markers, false);
	for (i = 0; i < 200 && !atoi(fake_out(&r, "pid", 0)); i++)
		usleep(25 * 1000);
	TAP_CHECK(i < 200, "the fake QEMU did not start");
	kill(pid, SIGTERM);
	finish(&r, pid);
	TAP_EQ(128 + SIGTERM, r.status);
	TAP_CHECK(fake_gone(&r, 0), "the QEMU outlived the launcher");
	rm_dir(&r);
}

static const struct tap_case cases[] = {
	{ "usage errors", test_usage },
	{ "two migrations: QMP, arguments, report", test_two_migrations },
	{ "no device trace", test_no_trace },
	{ "no markers: QEMU's exit status", test_no_markers },
	{ "migration failed", test_failed },
	{ "QMP error answer", test_qmp_error },
	{ "guest finished before its marker", test_guest_finished },
	{ "QEMU cannot run", test_cannot_run },
	{ "SIGTERM kills the QEMUs", test_sigterm },
};

int main(int argc, char **argv)
{
	const char *env = getenv("SPYRE_VM_MIGRATE");
	ssize_t n;
	char *p;

	if (argc >= 5 && !strcmp(argv[1], "--fake-qemu"))
		return fake_qemu(argc, argv);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		tap_bail("readlink /proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	if (env && *env) {
		snprintf(migrate_bin, sizeof(migrate_bin), "%s", env);
	} else {
		/* build/tests/vm-migrate-test -> build/tools/vm/migrate */
		snprintf(migrate_bin, sizeof(migrate_bin), "%s", self);
		p = strrchr(migrate_bin, '/');
		if (p)
			*p = '\0';
		p = strrchr(migrate_bin, '/');
		if (p)
			snprintf(p, sizeof(migrate_bin) - (size_t)(p - migrate_bin), "/tools/vm/migrate");
	}
	if (access(migrate_bin, X_OK))
		tap_bail("%s is not built (make tools), or set SPYRE_VM_MIGRATE", migrate_bin);
	return TAP_RUN(cases, argc, argv);
}
