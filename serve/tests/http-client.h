/* SPDX-License-Identifier: MIT */
/*
 * http-client.h - the serve tests' HTTP/1.1 client on raw loopback sockets
 * (so a test can also misbehave: stall, trickle bytes, hang up mid-stream).
 * Reads a response to its end (Connection: close), undoes chunked transfer
 * encoding. Test code only: the server's HTTP is libmicrohttpd's.
 */
#ifndef SPYRE_SERVE_TEST_HTTP_CLIENT_H
#define SPYRE_SERVE_TEST_HTTP_CLIENT_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

struct hresp {
	int status;		/* 0: no response (connection refused, closed, timed out) */
	char *head;		/* status line and headers */
	char *body;		/* decoded, NUL-terminated */
	size_t len;
};

static inline void hresp_free(struct hresp *r)
{
	free(r->head);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

static inline int hconnect(int port, int timeout_s)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { .tv_sec = timeout_s };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

static inline int hsend(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* The request's head (and body) as bytes. */
static inline char *hrequest(const char *method, const char *path, const char *body, size_t *len)
{
	size_t blen = body ? strlen(body) : 0, cap = blen + 512;
	char *s = malloc(cap);
	int n = snprintf(s, cap, "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
			 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", method, path, blen);

	memcpy(s + n, body ? body : "", blen);
	*len = (size_t)n + blen;
	return s;
}

/* Read to EOF and parse. */
static inline void hread(int fd, struct hresp *r)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap), *end, *p, *out;
	ssize_t k;

	memset(r, 0, sizeof(*r));
	for (;;) {
		if (len + 1 >= cap)
			buf = realloc(buf, cap *= 2);
		k = recv(fd, buf + len, cap - len - 1, 0);
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	buf[len] = '\0';
	end = strstr(buf, "\r\n\r\n");
	if (!end || sscanf(buf, "HTTP/1.%*d %d", &r->status) != 1) {
		r->status = 0;
		free(buf);
		return;
	}
	*end = '\0';
	r->head = strdup(buf);
	p = end + 4;
	out = r->body = malloc(len + 1);
	if (strcasestr(r->head, "Transfer-Encoding: chunked")) {
		for (;;) {
			unsigned long n = strtoul(p, &end, 16);

			if (end == p || !(p = strstr(end, "\r\n")))
				break;
			p += 2;
			if (!n || p + n > buf + len)
				break;
			memcpy(out, p, n);
			out += n;
			p += n + 2;
		}
	} else {
		memcpy(out, p, (size_t)(buf + len - p));
		out += buf + len - p;
	}
	*out = '\0';
	r->len = (size_t)(out - r->body);
	free(buf);
}

static inline int http_do(int port, const char *method, const char *path, const char *body, struct hresp *r)
{
	size_t n;
	char *req = hrequest(method, path, body, &n);
	int fd = hconnect(port, 60);

	memset(r, 0, sizeof(*r));
	if (fd < 0 || hsend(fd, req, n)) {
		free(req);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	free(req);
	hread(fd, r);
	close(fd);
	return r->status ? 0 : -1;
}

/*
 * A sample's value in Prometheus text: the first line starting with name
 * (a metric name, or a name and the start of its labels, e.g.
 * "vllm:request_success_total{finished_reason=\"abort\""); -1 when absent.
 */
static inline double prom_value(const char *text, const char *name)
{
	const char *p = text;
	size_t n = strlen(name);

	while (p && *p) {
		if (!strncmp(p, name, n) && (strchr(name, '{') || p[n] == '{' || p[n] == ' '))
			return strtod(strchr(p + n, ' ') + 1, NULL);
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return -1;
}

/* GET /metrics and one sample's value; -1 when unreachable or absent. */
static inline double get_metric(int port, const char *name)
{
	struct hresp r;
	double v = -1;

	if (!http_do(port, "GET", "/metrics", NULL, &r) && r.status == 200)
		v = prom_value(r.body, name);
	hresp_free(&r);
	return v;
}

#endif /* SPYRE_SERVE_TEST_HTTP_CLIENT_H */
