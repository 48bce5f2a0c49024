// SPDX-License-Identifier: MIT
/* qmp.c - a QMP client over a unix socket (qmp.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* SOCK_CLOEXEC, MSG_NOSIGNAL */
#endif
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "qmp.h"

#define QMP_MAX_LINE (16u << 20)	/* a longer line is no QMP we speak */

void spyre_qmp_init(struct spyre_qmp *q)
{
	memset(q, 0, sizeof(*q));
	q->fd = -1;
	q->timeout_ms = SPYRE_QMP_TIMEOUT_MS;
}

void spyre_qmp_close(struct spyre_qmp *q)
{
	int timeout_ms = q->timeout_ms;

	if (q->fd >= 0)
		close(q->fd);
	free(q->buf);
	free(q->line);
	spyre_qmp_init(q);
	q->timeout_ms = timeout_ms;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The next line into q->line: 0, or -1 and why. */
static int read_line(struct spyre_qmp *q, char *err, size_t errlen)
{
	for (;;) {
		char *nl = q->len ? memchr(q->buf, '\n', q->len) : NULL;
		struct pollfd pfd = { .fd = q->fd, .events = POLLIN };
		ssize_t n;

		if (nl) {
			size_t l = (size_t)(nl - q->buf);
			char *line = malloc(l + 1);

			if (!line) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			memcpy(line, q->buf, l);
			line[l] = '\0';
			if (l && line[l - 1] == '\r')
				line[l - 1] = '\0';
			memmove(q->buf, nl + 1, q->len - l - 1);
			q->len -= l + 1;
			free(q->line);
			q->line = line;
			return 0;
		}
		if (q->len == q->cap) {
			size_t cap = q->cap ? 2 * q->cap : 4096;
			char *b;

			if (cap > QMP_MAX_LINE) {
				snprintf(err, errlen, "a QMP line longer than %u bytes", QMP_MAX_LINE);
				return -1;
			}
			b = realloc(q->buf, cap);
			if (!b) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			q->buf = b;
			q->cap = cap;
		}
		n = poll(&pfd, 1, q->timeout_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			snprintf(err, errlen, "no answer in %d ms", q->timeout_ms);
			return -1;
		}
		n = n < 0 ? -1 : read(q->fd, q->buf + q->len, q->cap - q->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "read: %s", strerror(errno));
			return -1;
		}
		if (n == 0) {
			snprintf(err, errlen, "closed");
			return -1;
		}
		q->len += (size_t)n;
	}
}

static int send_all(struct spyre_qmp *q, const char *s, size_t n, char *err, size_t errlen)
{
	while (n) {
		ssize_t k = send(q->fd, s, n, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			snprintf(err, errlen, "write: %s", strerror(errno));
			return -1;
		}
		s += k;
		n -= (size_t)k;
	}
	return 0;
}

/* The command's name in @cmd, for messages ("?" when there is none). */
static void cmd_name(const char *cmd, char *name, size_t len)
{
	const struct spyre_json_node *v;
	struct spyre_json *doc;
	const char *s = NULL;
	char perr[64];

	if (!spyre_json_parse(cmd, strlen(cmd), &doc, perr, sizeof(perr))) {
		v = spyre_json_get(spyre_json_root(doc), "execute");
		s = v ? spyre_json_string(v, NULL) : NULL;
	} else {
		doc = NULL;
	}
	snprintf(name, len, "%s", s ? s : "?");
	spyre_json_free(doc);
}

int spyre_qmp_cmd(struct spyre_qmp *q, const char *cmd, struct spyre_json **answer, char *err, size_t errlen)
{
	char name[64], why[160], *msg;
	size_t n;
	int ret;

	if (answer)
		*answer = NULL;
	if (!q->line)
		q->line = calloc(1, 1);
	else
		q->line[0] = '\0';
	cmd_name(cmd, name, sizeof(name));
	if (q->fd < 0) {
		snprintf(err, errlen, "%s: not connected", name);
		return -1;
	}
	/*
	 * The command and its newline in one write: QEMU's parser runs a
	 * command as soon as its closing brace arrives, and after "quit" a
	 * newline written on its own may meet a closed socket.
	 */
	n = strlen(cmd);
	msg = malloc(n + 2);
	if (!msg) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memcpy(msg, cmd, n);
	msg[n] = '\n';
	msg[n + 1] = '\0';
	ret = send_all(q, msg, n + 1, why, sizeof(why));
	free(msg);
	if (ret) {
		snprintf(err, errlen, "QMP %s during %s", why, name);
		return -1;
	}
	for (;;) {
		const struct spyre_json_node *root, *e, *desc;
		struct spyre_json *doc;
		const char *d;

		if (read_line(q, why, sizeof(why))) {
			snprintf(err, errlen, "QMP %s during %s", why, name);
			return -1;
		}
		if (spyre_json_parse(q->line, strlen(q->line), &doc, why, sizeof(why))) {
			snprintf(err, errlen, "%s: an answer that is not JSON (%s): %.80s", name, why, q->line);
			return -1;
		}
		root = spyre_json_root(doc);
		if (spyre_json_get(root, "return")) {
			if (answer)
				*answer = doc;
			else
				spyre_json_free(doc);
			return 0;
		}
		e = spyre_json_get(root, "error");
		if (e) {
			desc = spyre_json_get(e, "desc");
			d = desc ? spyre_json_string(desc, NULL) : NULL;
			snprintf(err, errlen, "%s: %s", name, d ? d : "an error without a description");
			spyre_json_free(doc);
			return -1;
		}
		spyre_json_free(doc);	/* an event */
	}
}

const struct spyre_json_node *spyre_qmp_return(const struct spyre_json *answer)
{
	return answer ? spyre_json_get(spyre_json_root(answer), "return") : NULL;
}

int spyre_qmp_open(struct spyre_qmp *q, const char *path, int wait_ms, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int64_t end = now_ms() + wait_ms;
	struct spyre_json *doc;
	char why[160];
	int ok;

	spyre_qmp_close(q);
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "QMP socket path too long: %s", path);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	for (;;) {
		q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (q->fd < 0) {
			snprintf(err, errlen, "socket: %s", strerror(errno));
			return -1;
		}
		if (!connect(q->fd, (struct sockaddr *)&sa, sizeof(sa)))
			break;
		close(q->fd);
		q->fd = -1;
		if (now_ms() > end) {
			snprintf(err, errlen, "no QMP socket at %s", path);
			return -1;
		}
		usleep(100 * 1000);
	}
	if (read_line(q, why, sizeof(why))) {
		snprintf(err, errlen, "no QMP greeting at %s (%s)", path, why);
		spyre_qmp_close(q);
		return -1;
	}
	ok = !spyre_json_parse(q->line, strlen(q->line), &doc, why, sizeof(why)) &&
	     spyre_json_get(spyre_json_root(doc), "QMP");
	spyre_json_free(doc);
	if (!ok) {
		snprintf(err, errlen, "no QMP greeting at %s: %.80s", path, q->line);
		spyre_qmp_close(q);
		return -1;
	}
	if (spyre_qmp_cmd(q, "{\"execute\": \"qmp_capabilities\"}", NULL, err, errlen)) {
		spyre_qmp_close(q);
		return -1;
	}
	return 0;
}
