// SPDX-License-Identifier: MIT
/*
 * migrate - live-migrate a running VM from one QEMU process to another on
 * this machine, each time the guest command prints a marker line:
 * tools/vm/run --migrate runs it (built as build/tools/vm/migrate) in place of
 * QEMU (docs/vm.md, "Live migration").
 *
 * Usage: migrate --work DIR --out FILE --report FILE [--marker TEXT]...
 *                -- QEMU ARGS...
 *   --work DIR     sockets and the QEMUs' trace logs go here
 *   --out FILE     the guest command's output (ttyS1, appended to by every
 *                  QEMU): watched for the markers
 *   --report FILE  one line per migration is appended here
 *   --marker TEXT  migrate when a line of FILE holds TEXT (repeatable; in
 *                  order, each once)
 *
 * For each marker: a destination QEMU with the same arguments and
 * -incoming unix:DIR/migN.sock; QMP "migrate-set-parameters" and "migrate"
 * on the source, "query-migrate" polled until it completed; the destination
 * must be running; the source quits. Every QEMU traces the spyre device's
 * migration events (spyre_migrate_*, spyre_queues_pause) to DIR/traceN.log,
 * from which the report says what the card had in flight at the switch-over.
 * QMP through util/qmp.c: one connection per QEMU (a QEMU serves one client
 * at a time), the destination's kept as the next migration's source.
 *
 * Exit status: the last QEMU's (128 + N when signal N killed it), 1 (with
 * the reason on stderr and in the report) when a migration failed, did not
 * finish in time, or the guest finished before printing a marker, 2 on bad
 * usage, 128 + N when signal N (SIGTERM, SIGINT, SIGHUP) stopped it: the
 * QEMUs are killed first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "jsonw.h"
#include "qmp.h"

#define ME "tools/vm/migrate"
#define MIGRATE_TIMEOUT_S 600
/* Bandwidth 4 GiB/s, downtime limit 2 s: loopback is fast; the guest runs on
 * TCG, so allow a longer stop than the 300 ms default rather than never
 * converging on a busy host. */
static const char SET_PARAMETERS[] = "{\"execute\": \"migrate-set-parameters\", "
	"\"arguments\": {\"max-bandwidth\": 4294967296, \"downtime-limit\": 2000}}";
#define QMP_CONNECT_MS 60000
#define DEST_RUNNING_MS 60000
#define SOURCE_QUIT_MS 60000
#define MARKER_POLL_MS 200
#define QMP_POLL_MS 100
#define TRACE_TAIL 8		/* the last device trace lines of each QEMU in a failure's report */

static const char *const trace_events[] = { "spyre_migrate*", "spyre_queues_pause" };

/* A QEMU this program started: its status once reaped. */
struct qemu {
	pid_t pid;
	bool reaped;
	int status;
};

static const char *work, *outf, *reportf;
static char **qemu_argv;
static int qemu_argc;
static struct qemu *procs;
static int nprocs;
static const char **markers;
static int cur_mig;	/* the migration under way: QEMUs 0..cur_mig have traces */

static void usage(FILE *f)
{
	fprintf(f, "usage: %s --work DIR --out FILE --report FILE [--marker TEXT]... -- QEMU ARGS...\n"
		"  live-migrate the VM QEMU ARGS runs to a new QEMU process each time FILE (the\n"
		"  guest command's output) holds the next marker; one report line a migration\n"
		"  (tools/vm/run --migrate; docs/vm.md, \"Live migration\")\n", ME);
}

static __attribute__((noreturn, format(printf, 1, 2))) void usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "%s: ", ME);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, " (see --help)\n");
	va_end(ap);
	exit(2);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static __attribute__((format(printf, 1, 2))) void report(const char *fmt, ...)
{
	FILE *f = fopen(reportf, "a");
	va_list ap;

	if (!f) {
		fprintf(stderr, "%s: %s: %s\n", ME, reportf, strerror(errno));
		return;
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

/* ---- the QEMU processes ---------------------------------------------------- */

/* Reap @q if it has exited; true while it runs. */
static bool alive(struct qemu *q)
{
	int st;

	if (q->reaped)
		return false;
	if (waitpid(q->pid, &st, WNOHANG) == q->pid) {
		q->reaped = true;
		q->status = st;
	}
	return !q->reaped;
}

/* Wait up to @ms (< 0: for ever) for @q to exit; true when it has. */
static bool wait_exit(struct qemu *q, int ms)
{
	int64_t end = now_ms() + ms;
	int st;

	if (ms < 0 && !q->reaped) {
		while (waitpid(q->pid, &st, 0) < 0 && errno == EINTR)
			;
		q->reaped = true;
		q->status = st;
	}
	while (alive(q) && now_ms() < end)
		sleep_ms(50);
	return !alive(q);
}

static void kill_qemu(struct qemu *q)
{
	if (alive(q)) {
		kill(q->pid, SIGKILL);
		wait_exit(q, -1);
	}
}

static int exit_code(const struct qemu *q)
{
	if (WIFEXITED(q->status))
		return WEXITSTATUS(q->status);
	return WIFSIGNALED(q->status) ? 128 + WTERMSIG(q->status) : 1;
}

static const char *state(struct qemu *q, char *buf, size_t len)
{
	if (alive(q))
		snprintf(buf, len, "running");
	else if (WIFSIGNALED(q->status))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(q->status));
	else
		snprintf(buf, len, "exit status %d", exit_code(q));
	return buf;
}

static void on_signal(int sig)
{
	int i;

	/* kill(2), waitpid(2) and _exit(2) only: async-signal-safe; the QEMUs
	 * are gone, not zombies, when this program has exited */
	for (i = 0; i < nprocs; i++)
		if (!procs[i].reaped)
			kill(procs[i].pid, SIGKILL);
	for (i = 0; i < nprocs; i++)
		if (!procs[i].reaped)
			waitpid(procs[i].pid, NULL, 0);
	_exit(128 + sig);
}

static char *path_in_work(const char *what, int n)
{
	char *p;

	if (asprintf(&p, "%s/%s%d%s", work, what, n, !strcmp(what, "trace") ? ".log" : ".sock") < 0) {
		fprintf(stderr, "%s: out of memory\n", ME);
		exit(1);
	}
	return p;
}

static void bail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* QEMU number @n: the arguments, a QMP socket, its trace log, maybe -incoming. */
static struct qemu *start(int n, const char *incoming)
{
	size_t max = (size_t)qemu_argc + 8 + 2 * (sizeof(trace_events) / sizeof(trace_events[0])), k = 0, i;
	char **argv = calloc(max + 1, sizeof(*argv)), *qmp = path_in_work("qmp", n), *qmparg;
	char *trace = path_in_work("trace", n);
	struct qemu *q = &procs[nprocs];
	int pfd[2], err = 0;
	ssize_t got;

	if (!argv || asprintf(&qmparg, "unix:%s,server=on,wait=off", qmp) < 0)
		bail("out of memory");
	for (i = 0; i < (size_t)qemu_argc; i++)
		argv[k++] = qemu_argv[i];
	argv[k++] = "-qmp";
	argv[k++] = qmparg;
	argv[k++] = "-D";
	argv[k++] = trace;
	for (i = 0; i < sizeof(trace_events) / sizeof(trace_events[0]); i++) {
		argv[k++] = "-trace";
		argv[k++] = (char *)trace_events[i];
	}
	if (incoming) {
		argv[k++] = "-incoming";
		argv[k++] = (char *)incoming;
	}
	argv[k] = NULL;

	/* A close-on-exec pipe tells an exec that failed from a QEMU that ran. */
	if (pipe2(pfd, O_CLOEXEC))
		bail("pipe: %s", strerror(errno));
	q->pid = fork();
	if (q->pid < 0)
		bail("fork: %s", strerror(errno));
	if (q->pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		if (null >= 0 && null != 0) {
			dup2(null, 0);
			close(null);
		}
		execvp(argv[0], argv);
		err = errno;
		if (write(pfd[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(127);
	}
	nprocs++;
	close(pfd[1]);
	do
		got = read(pfd[0], &err, sizeof(err));
	while (got < 0 && errno == EINTR);
	close(pfd[0]);
	free(argv);
	if (got == (ssize_t)sizeof(err)) {
		wait_exit(q, -1);
		bail("cannot run %s: %s", qemu_argv[0], strerror(err));
	}
	free(qmparg);
	free(qmp);
	free(trace);
	return q;
}

static void kill_all(void)
{
	int i;

	for (i = 0; i < nprocs; i++)
		kill_qemu(&procs[i]);
}

/* ---- the trace logs and the guest's output -------------------------------- */

/* Strip @s of surrounding white space, in place. */
static char *strip(char *s)
{
	size_t n;

	while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
		s++;
	n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
		s[--n] = '\0';
	return s;
}

/*
 * The last @max lines of @path holding @what (stripped), oldest first, into
 * @lines (malloc'ed, freed by the caller); their number (0: none, or no file).
 */
static int trace_tail(const char *path, const char *what, char **lines, int max)
{
	FILE *f = fopen(path, "r");
	char *line = NULL, *ring[TRACE_TAIL] = { 0 };
	size_t cap = 0;
	int n = 0, i, k;

	if (max > TRACE_TAIL)
		max = TRACE_TAIL;
	if (!f)
		return 0;
	while (getline(&line, &cap, f) >= 0) {
		if (!strstr(line, what))
			continue;
		free(ring[n % max]);
		ring[n % max] = strdup(strip(line));
		n++;
	}
	free(line);
	fclose(f);
	k = n < max ? n : max;
	for (i = 0; i < k; i++)
		lines[i] = ring[(n - k + i) % max];	/* the oldest kept is line n - k */
	return k;
}

/* The numbers @re's two groups match in the last line of @path holding @what. */
static bool trace_pair(const char *path, const char *what, const char *re, unsigned long *a, unsigned long *b)
{
	regmatch_t m[3];
	char *line = NULL;
	bool ok = false;
	regex_t rx;

	if (trace_tail(path, what, &line, 1) != 1 || !line)
		return false;
	if (!regcomp(&rx, re, REG_EXTENDED)) {
		ok = !regexec(&rx, line, 3, m, 0);
		if (ok) {
			*a = strtoul(line + m[1].rm_so, NULL, 10);
			*b = strtoul(line + m[2].rm_so, NULL, 10);
		}
		regfree(&rx);
	}
	free(line);
	return ok;
}

/* What the card had at the switch-over from QEMU @src to @dst, from their traces. */
static void in_flight(int src, int dst, struct spyre_buf *out)
{
	static const char queued[] = "([0-9]+) queues with work, ([0-9]+) packets";
	char *st = path_in_work("trace", src), *dt = path_in_work("trace", dst);
	unsigned long a, b;
	size_t start = out->len;

	if (trace_pair(st, "spyre_queues_pause", "([0-9]+) packets running \\(([0-9]+) in a WAIT", &a, &b))
		spyre_buf_printf(out, "%lu packets running at the stop (%lu WAITs to run again, "
				 "the others finished before the save)", a, b);
	if (trace_pair(st, "spyre_migrate_in_flight save:", queued, &a, &b))
		spyre_buf_printf(out, "%s%lu packets queued on %lu queues saved", out->len > start ? "; " : "", b, a);
	if (trace_pair(dt, "spyre_migrate_in_flight load:", queued, &a, &b))
		spyre_buf_printf(out, "%s%lu on %lu queues loaded to resume", out->len > start ? "; " : "", b, a);
	if (out->len == start)
		spyre_buf_puts(out, "no device trace (QEMU built without the log trace backend?)");
	free(st);
	free(dt);
}

static void bail(const char *fmt, ...)
{
	char *msg, *lines[TRACE_TAIL];
	va_list ap;
	int i, j, n;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = (char *)fmt;
	va_end(ap);
	report("FAIL: %s", msg);
	for (i = 0; i <= cur_mig; i++) {
		char *trace = path_in_work("trace", i);

		n = trace_tail(trace, "spyre_", lines, TRACE_TAIL);
		for (j = 0; j < n; j++) {
			if (lines[j])
				report("  QEMU %d: %s", i, lines[j]);
			free(lines[j]);
		}
		free(trace);
	}
	fprintf(stderr, "%s: %s\n", ME, msg);
	kill_all();
	exit(1);
}

/* True once @path holds @marker; false when @q exited before it did. */
static bool wait_marker(const char *path, const char *marker, struct qemu *q)
{
	size_t mlen = strlen(marker);

	for (;;) {
		FILE *f = fopen(path, "rb");
		bool found = false;

		if (f) {
			char *text = NULL;
			size_t cap = 0, len = 0, n;

			for (;;) {
				if (len == cap) {
					char *t = realloc(text, cap = cap ? 2 * cap : 65536);

					if (!t)
						bail("out of memory reading %s", path);
					text = t;
				}
				n = fread(text + len, 1, cap - len, f);
				if (!n)
					break;
				len += n;
			}
			fclose(f);
			found = memmem(text, len, marker, mlen) != NULL;
			free(text);
		}
		if (found)
			return true;
		if (!alive(q))
			return false;
		sleep_ms(MARKER_POLL_MS);
	}
}

/* ---- one migration ---------------------------------------------------------- */

/* A QMP command's answer, or a failure of migration @n with both QEMUs' states. */
static struct spyre_json *qmp(struct spyre_qmp *c, const char *cmd, int n, struct qemu *src, struct qemu *dst)
{
	struct spyre_json *answer;
	char err[512], s[48], d[48];

	if (!spyre_qmp_cmd(c, cmd, &answer, err, sizeof(err)))
		return answer;
	sleep_ms(1000);		/* let a QEMU that is going away go, for its status */
	bail("migration %d: %s (source QEMU %s, destination %s)", n, err, state(src, s, sizeof(s)),
	     state(dst, d, sizeof(d)));
}

static void qmp_open(struct spyre_qmp *c, int m, int n, struct qemu *src, struct qemu *dst)
{
	char *path = path_in_work("qmp", m), err[512], s[48], d[48];

	if (spyre_qmp_open(c, path, QMP_CONNECT_MS, err, sizeof(err))) {
		sleep_ms(1000);
		bail("migration %d: %s (source QEMU %s, destination %s)", n, err, state(src, s, sizeof(s)),
		     state(dst, d, sizeof(d)));
	}
	free(path);
}

static const char *member_str(const struct spyre_json_node *v, const char *key)
{
	const struct spyre_json_node *m = spyre_json_get(v, key);

	return m ? spyre_json_string(m, NULL) : NULL;
}

static uint64_t member_u64(const struct spyre_json_node *v, const char *key)
{
	uint64_t x = 0;

	if (spyre_json_u64(spyre_json_get(v, key), &x))
		x = 0;
	return x;
}

/* QMP's "migrate" to @uri (a JSON string, escaped by the writer). */
static char *migrate_command(const char *uri)
{
	struct spyre_buf b;
	struct spyre_jw w;
	char *s;

	spyre_buf_init(&b);
	spyre_jw_init(&w, &b);
	spyre_jw_obj(&w);
	spyre_jw_key(&w, "execute");
	spyre_jw_str(&w, "migrate");
	spyre_jw_key(&w, "arguments");
	spyre_jw_obj(&w);
	spyre_jw_key(&w, "uri");
	spyre_jw_str(&w, uri);
	spyre_jw_obj_end(&w);
	spyre_jw_obj_end(&w);
	s = w.bad ? NULL : spyre_buf_steal(&b, NULL);
	if (!s)
		bail("out of memory");
	return s;
}

/*
 * Migration @n at @marker from @src (QMP @src_qmp, connected unless this is
 * the first) to a new QEMU, whose QMP connection it leaves in @dst_qmp.
 */
static struct qemu *migrate(int n, const char *marker, struct qemu *src, struct spyre_qmp *src_qmp,
			    struct spyre_qmp *dst_qmp)
{
	char *sock = path_in_work("mig", n), *uri, *cmd;
	const struct spyre_json_node *info, *ram;
	struct spyre_json *answer;
	struct spyre_buf line;
	struct qemu *dst;
	const char *status;
	int64_t t0, end;

	if (!wait_marker(outf, marker, src))
		bail("the guest finished before it printed '%s': no migration %d", marker, n);
	if (asprintf(&uri, "unix:%s", sock) < 0)
		bail("out of memory");
	dst = start(n, uri);
	t0 = now_ms();
	if (src_qmp->fd < 0)
		qmp_open(src_qmp, n - 1, n, src, dst);
	qmp_open(dst_qmp, n, n, src, dst);
	spyre_json_free(qmp(src_qmp, SET_PARAMETERS, n, src, dst));
	cmd = migrate_command(uri);
	spyre_json_free(qmp(src_qmp, cmd, n, src, dst));
	free(cmd);
	for (;;) {
		answer = qmp(src_qmp, "{\"execute\": \"query-migrate\"}", n, src, dst);
		info = spyre_qmp_return(answer);
		status = member_str(info, "status");
		if (status && !strcmp(status, "completed"))
			break;
		if (status && (!strcmp(status, "failed") || !strcmp(status, "cancelled"))) {
			const char *desc = member_str(info, "error-desc");

			bail("migration %d %s: %s", n, status, desc ? desc : "");
		}
		if (now_ms() - t0 > MIGRATE_TIMEOUT_S * 1000)
			bail("migration %d did not finish in %d s (%s)", n, MIGRATE_TIMEOUT_S,
			     status ? status : "no status");
		spyre_json_free(answer);
		sleep_ms(QMP_POLL_MS);
	}
	end = now_ms() + DEST_RUNNING_MS;
	for (;;) {
		struct spyre_json *st = qmp(dst_qmp, "{\"execute\": \"query-status\"}", n, src, dst);
		const char *s = member_str(spyre_qmp_return(st), "status");
		bool running = s && !strcmp(s, "running");

		spyre_json_free(st);
		if (running)
			break;
		if (now_ms() > end || !alive(dst))
			bail("migration %d: the destination is not running", n);
		sleep_ms(QMP_POLL_MS);
	}
	spyre_json_free(qmp(src_qmp, "{\"execute\": \"quit\"}", n, src, dst));
	if (!wait_exit(src, SOURCE_QUIT_MS))
		kill_qemu(src);
	spyre_qmp_close(src_qmp);

	ram = spyre_json_get(info, "ram");
	spyre_buf_init(&line);
	in_flight(n - 1, n, &line);
	if (line.oom)
		bail("out of memory");
	report("migration %d at '%s': completed in %llu ms, downtime %llu ms, %llu MiB sent "
	       "(%llu zero pages); the card: %s", n, marker,
	       (unsigned long long)member_u64(info, "total-time"), (unsigned long long)member_u64(info, "downtime"),
	       (unsigned long long)(member_u64(ram, "transferred") >> 20),
	       (unsigned long long)member_u64(ram, "duplicate"), line.p);
	spyre_buf_free(&line);
	spyre_json_free(answer);
	free(uri);
	free(sock);
	return dst;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "work", required_argument, NULL, 'w' },
		{ "out", required_argument, NULL, 'o' },
		{ "report", required_argument, NULL, 'r' },
		{ "marker", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct spyre_qmp qmp_a, qmp_b, *cur_qmp = &qmp_a, *next_qmp = &qmp_b, *t;
	struct sigaction sa = { .sa_handler = on_signal };
	struct sockaddr_un sun;
	struct qemu *cur;
	int c, nmarkers = 0, n;

	markers = calloc((size_t)argc + 1, sizeof(*markers));
	if (!markers)
		return 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'w': work = optarg; break;
		case 'o': outf = optarg; break;
		case 'r': reportf = optarg; break;
		case 'm': markers[nmarkers++] = optarg; break;
		case 'h': usage(stdout); return 0;
		case ':': usage_error("%s needs a value", argv[optind - 1]);
		default: usage_error("unknown option %s", argv[optind - 1]);
		}
	}
	if (!work || !outf || !reportf)
		usage_error("missing%s%s%s", work ? "" : " --work", outf ? "" : " --out", reportf ? "" : " --report");
	for (n = 0; n < nmarkers; n++)
		if (!*markers[n])
			usage_error("--marker: an empty marker");
	qemu_argv = argv + optind;
	qemu_argc = argc - optind;
	if (!qemu_argc)
		usage_error("no QEMU command after the options");
	/* QEMU's sockets in DIR: each path must fit a sockaddr_un. */
	if (strlen(work) + sizeof("/qmp2147483647.sock") > sizeof(sun.sun_path))
		usage_error("--work: '%s' is too long for a unix socket's path (%zu bytes at most)", work,
			    sizeof(sun.sun_path) - sizeof("/qmp2147483647.sock"));

	procs = calloc((size_t)nmarkers + 1, sizeof(*procs));
	if (!procs)
		return 1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	spyre_qmp_init(&qmp_a);
	spyre_qmp_init(&qmp_b);

	cur = start(0, NULL);
	for (n = 1; n <= nmarkers; n++) {
		cur_mig = n;
		cur = migrate(n, markers[n - 1], cur, cur_qmp, next_qmp);
		t = cur_qmp;
		cur_qmp = next_qmp;
		next_qmp = t;
	}
	wait_exit(cur, -1);
	n = exit_code(cur);
	spyre_qmp_close(cur_qmp);
	free(procs);
	free(markers);
	return n;
}
