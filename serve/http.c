// SPDX-License-Identifier: MIT
/*
 * http.c - spyre-serve's HTTP layer on GNU libmicrohttpd (http.h). Written to
 * the API that 0.9.75 (Debian 12) and 1.0 (Debian 13) both have.
 *
 * A struct spyre_http_conn is one request (a keep-alive connection makes one
 * per request). References: the server's list while the request is open
 * (dropped when libmicrohttpd reports it completed), a streamed response's
 * (dropped when libmicrohttpd frees the response), and the handler's
 * (spyre_http_conn_get/put, e.g. the engine's events holding it).
 *
 * The server thread is ours (loop()): it waits in epoll on libmicrohttpd's
 * epoll descriptor and on an eventfd of wake-ups, and runs MHD_run(). Only
 * it suspends and resumes connections. Suspension without a lost wake-up:
 * the server thread suspends a connection only under c->lock after seeing
 * no wake pending; spyre_http_wake() sets the wake under c->lock and, when
 * it saw the connection suspended and not yet queued, queues it for the
 * server thread, writing the eventfd only when the queue was empty: the
 * engine's step wakes its N streams with one write, and the server thread
 * resumes all N and serves them in one pass (libmicrohttpd's own
 * MHD_resume_connection() from another thread would signal its thread once
 * per connection, one context switch each). A suspended connection cannot
 * complete (libmicrohttpd neither polls nor times it out), so c->mc stays
 * valid while it is queued; spyre_http_stop() has the server thread resume
 * every suspended connection and finish them before the daemon stops, as
 * the API demands.
 */
#include "http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <netinet/in.h>

#include "jsonw.h"

enum conn_mode {
	MODE_BODY,		/* reading the body; the handler has not been called */
	MODE_REPLIED,		/* a whole response is queued */
	MODE_DEFERRED,		/* waiting for the handler's reply */
	MODE_STREAM,		/* streaming a body */
};

struct spyre_http {
	struct MHD_Daemon *d;
	struct spyre_http_ops ops;
	void *user;
	size_t max_body;
	uint16_t port;
	int stopping;			/* atomic */
	pthread_mutex_t lock;		/* Protects the list of open requests */
	struct spyre_http_conn *head;
	pthread_t thread;		/* the server thread (loop) */
	int ep;				/* epoll: libmicrohttpd's descriptor and wake_fd */
	int wake_fd;			/* eventfd: the wake queue became non-empty, or stop */
	pthread_mutex_t wake_lock;	/* Protects the wake queue */
	struct spyre_http_conn *wake_head;	/* suspended connections to resume, a reference each */
};

struct spyre_http_conn {
	struct spyre_http *h;
	struct MHD_Connection *mc;
	struct spyre_http_conn *prev, *next;	/* h->head's list, under h->lock */
	enum conn_mode mode;		/* server thread only */
	struct spyre_buf body;		/* server thread only */
	void *ctx;			/* the handler's */
	pthread_mutex_t lock;		/* Protects what follows */
	unsigned int refs;
	bool alive;			/* not yet completed */
	bool suspended;
	bool wake;
	bool queued;			/* on h's wake queue */
	struct spyre_http_conn *wake_next;	/* under h->wake_lock */
	bool ended;			/* stream: spyre_http_end() */
	struct spyre_buf out;		/* stream: bytes not yet handed to libmicrohttpd */
};

static bool stopping(const struct spyre_http *h)
{
	return __atomic_load_n(&h->stopping, __ATOMIC_SEQ_CST);
}

bool spyre_http_stopping(const struct spyre_http *h)
{
	return stopping(h);
}

void spyre_http_conn_get(struct spyre_http_conn *c)
{
	pthread_mutex_lock(&c->lock);
	c->refs++;
	pthread_mutex_unlock(&c->lock);
}

void spyre_http_conn_put(struct spyre_http_conn *c)
{
	unsigned int refs;

	pthread_mutex_lock(&c->lock);
	refs = --c->refs;
	pthread_mutex_unlock(&c->lock);
	if (refs)
		return;
	spyre_buf_free(&c->body);
	spyre_buf_free(&c->out);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void spyre_http_set_ctx(struct spyre_http_conn *c, void *ctx)
{
	c->ctx = ctx;
}

static struct spyre_http_conn *conn_new(struct spyre_http *h, struct MHD_Connection *mc)
{
	struct spyre_http_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->h = h;
	c->mc = mc;
	c->mode = MODE_BODY;
	c->refs = 1;
	c->alive = true;
	spyre_buf_init(&c->body);
	spyre_buf_init(&c->out);
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_lock(&h->lock);
	c->next = h->head;
	if (h->head)
		h->head->prev = c;
	h->head = c;
	pthread_mutex_unlock(&h->lock);
	return c;
}

static void add_header(struct MHD_Response *r, const char *line)
{
	const char *colon = strchr(line, ':');
	char name[128];
	size_t n;

	if (!colon || (n = (size_t)(colon - line)) >= sizeof(name))
		return;
	memcpy(name, line, n);
	name[n] = '\0';
	colon++;
	while (*colon == ' ')
		colon++;
	MHD_add_response_header(r, name, colon);
}

void spyre_http_reply(struct spyre_http_conn *c, unsigned int status, const char *content_type,
		      const char *body, size_t len, const char *const *headers)
{
	struct MHD_Response *r;
	char *copy = malloc(len + 1);

	c->mode = MODE_REPLIED;
	if (!copy)
		return;		/* no response: libmicrohttpd closes the connection */
	memcpy(copy, body, len);
	r = MHD_create_response_from_buffer_with_free_callback(len, copy, free);
	if (!r) {
		free(copy);
		return;
	}
	if (content_type)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	for (; headers && *headers; headers++)
		add_header(r, *headers);
	MHD_queue_response(c->mc, status, r);
	MHD_destroy_response(r);
}

void spyre_http_defer(struct spyre_http_conn *c)
{
	c->mode = MODE_DEFERRED;
}

/* Server thread: the handler's pump. */
static void run_pump(struct spyre_http_conn *c)
{
	struct spyre_http *h = c->h;

	h->ops.pump(h->user, c, c->ctx);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct spyre_http_conn *c = cls;
	size_t n;

	(void)pos;
	for (;;) {
		pthread_mutex_lock(&c->lock);
		if (c->out.len) {
			n = c->out.len < max ? c->out.len : max;
			memcpy(buf, c->out.p, n);
			spyre_buf_consume(&c->out, n);
			pthread_mutex_unlock(&c->lock);
			return (ssize_t)n;
		}
		if (c->ended) {
			pthread_mutex_unlock(&c->lock);
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		if (c->wake) {
			c->wake = false;
			pthread_mutex_unlock(&c->lock);
			run_pump(c);
			continue;
		}
		if (stopping(c->h)) {
			pthread_mutex_unlock(&c->lock);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		c->suspended = true;
		MHD_suspend_connection(c->mc);
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
}

static void stream_free(void *cls)
{
	spyre_http_conn_put(cls);
}

void spyre_http_stream(struct spyre_http_conn *c, unsigned int status, const char *content_type)
{
	struct MHD_Response *r;

	c->mode = MODE_STREAM;
	spyre_http_conn_get(c);
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, c, stream_free);
	if (!r) {
		spyre_http_conn_put(c);
		pthread_mutex_lock(&c->lock);
		c->ended = true;
		pthread_mutex_unlock(&c->lock);
		return;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	MHD_queue_response(c->mc, status, r);
	MHD_destroy_response(r);
}

int spyre_http_write(struct spyre_http_conn *c, const void *data, size_t len)
{
	int ret = 0;

	pthread_mutex_lock(&c->lock);
	if (c->ended || !c->alive) {
		ret = -EPIPE;
	} else {
		spyre_buf_add(&c->out, data, len);
		if (c->out.oom)
			ret = -ENOMEM;
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

void spyre_http_end(struct spyre_http_conn *c)
{
	pthread_mutex_lock(&c->lock);
	c->ended = true;
	pthread_mutex_unlock(&c->lock);
}

static void signal_server(struct spyre_http *h)
{
	uint64_t one = 1;

	if (write(h->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: the server thread is due to read it anyway */
	}
}

/* This thread's server with wake-ups queued by spyre_http_wake_later() and not yet signalled. */
static __thread struct spyre_http *later;

static void wake(struct spyre_http_conn *c, bool now)
{
	struct spyre_http *h = c->h;
	bool queue = false, signal;

	pthread_mutex_lock(&c->lock);
	c->wake = true;
	if (c->suspended && c->alive && !c->queued) {
		c->queued = true;
		c->refs++;	/* the queue's */
		queue = true;
	}
	pthread_mutex_unlock(&c->lock);
	/* Suspended connections do not complete: c->mc is valid until the server thread resumes it. */
	if (!queue)
		return;
	pthread_mutex_lock(&h->wake_lock);
	signal = !h->wake_head;
	c->wake_next = h->wake_head;
	h->wake_head = c;
	pthread_mutex_unlock(&h->wake_lock);
	if (!now) {
		if (later && later != h)
			signal_server(later);
		later = h;
	} else if (signal) {
		signal_server(h);
	}
}

void spyre_http_wake(struct spyre_http_conn *c)
{
	wake(c, true);
}

void spyre_http_wake_later(struct spyre_http_conn *c)
{
	wake(c, false);
}

void spyre_http_flush(void)
{
	if (later)
		signal_server(later);
	later = NULL;
}

/* Server thread: resume @c if it is suspended (and open); @dequeue: taken off the wake queue; @wake: set its wake. */
static void resume(struct spyre_http_conn *c, bool dequeue, bool wake)
{
	bool suspended;

	pthread_mutex_lock(&c->lock);
	if (dequeue) {
		c->queued = false;
		c->wake_next = NULL;
	}
	if (wake)
		c->wake = true;
	suspended = c->suspended && c->alive;
	c->suspended = false;
	pthread_mutex_unlock(&c->lock);
	if (suspended)
		MHD_resume_connection(c->mc);
}

/* Server thread: resume the queued connections. */
static void resume_queued(struct spyre_http *h)
{
	struct spyre_http_conn *c, *next;

	pthread_mutex_lock(&h->wake_lock);
	c = h->wake_head;
	h->wake_head = NULL;
	pthread_mutex_unlock(&h->wake_lock);
	for (; c; c = next) {
		next = c->wake_next;
		resume(c, true, false);
		spyre_http_conn_put(c);	/* the queue's */
	}
}

/* Server thread, stopping: every suspended connection resumed (and never suspended again). */
static void resume_all(struct spyre_http *h)
{
	resume_queued(h);
	pthread_mutex_lock(&h->lock);
	for (struct spyre_http_conn *c = h->head; c; c = c->next)
		resume(c, false, true);
	pthread_mutex_unlock(&h->lock);
}

/* The server thread: libmicrohttpd's events and the wake queue. */
static void *loop(void *arg)
{
	struct spyre_http *h = arg;
	struct epoll_event ev[2];

	while (!stopping(h)) {
		MHD_UNSIGNED_LONG_LONG to = 0;
		int ms = 1000, n = 0, i;
		uint64_t count;

		if (MHD_get_timeout(h->d, &to) == MHD_YES)
			ms = to < 1000 ? (int)to : 1000;
		if (ms)
			n = epoll_wait(h->ep, ev, 2, ms);
		for (i = 0; i < n; i++)
			if (ev[i].data.fd == h->wake_fd && read(h->wake_fd, &count, sizeof(count)) < 0) {
				/* EAGAIN: read already */
			}
		resume_queued(h);
		MHD_run(h->d);
	}
	/* stopping: the resumed connections' pumps see it and end their responses */
	for (int pass = 0; pass < 3; pass++) {
		resume_all(h);
		MHD_run(h->d);
	}
	return NULL;
}

/* An error response in the handler's format. */
static void reply_error(struct spyre_http_conn *c, unsigned int status, const char *msg)
{
	c->h->ops.error(c->h->user, c, status, msg);
	if (c->mode == MODE_BODY || c->mode == MODE_DEFERRED)
		spyre_http_reply(c, status, "text/plain", msg, strlen(msg), NULL);
}

static void reply_too_big(struct spyre_http_conn *c)
{
	char msg[128];

	snprintf(msg, sizeof(msg), "request body larger than the limit of %zu bytes", c->h->max_body);
	reply_error(c, 413, msg);
}

/* A deferred request: pump while woken, then suspend (or, when stopping, give up with 503). */
static void deferred(struct spyre_http_conn *c)
{
	for (;;) {
		pthread_mutex_lock(&c->lock);
		if (c->wake) {
			c->wake = false;
			pthread_mutex_unlock(&c->lock);
			run_pump(c);
			if (c->mode != MODE_DEFERRED)
				return;
			continue;
		}
		if (stopping(c->h)) {
			pthread_mutex_unlock(&c->lock);
			reply_error(c, 503, "server shutting down");
			return;
		}
		c->suspended = true;
		MHD_suspend_connection(c->mc);
		pthread_mutex_unlock(&c->lock);
		return;
	}
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
				 const char *version, const char *upload_data, size_t *upload_data_size,
				 void **con_cls)
{
	struct spyre_http *h = cls;
	struct spyre_http_conn *c = *con_cls;
	struct spyre_http_request rq;

	(void)version;
	if (!c) {
		const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

		c = conn_new(h, mc);
		if (!c)
			return MHD_NO;
		*con_cls = c;
		/* libmicrohttpd has checked that Content-Length is a number. */
		if (cl && strtoull(cl, NULL, 10) > h->max_body)
			reply_too_big(c);
		return MHD_YES;
	}
	switch (c->mode) {
	case MODE_BODY:
		if (*upload_data_size) {
			if (*upload_data_size > h->max_body - c->body.len) {
				spyre_buf_free(&c->body);
				reply_too_big(c);
			} else {
				spyre_buf_add(&c->body, upload_data, *upload_data_size);
				if (c->body.oom) {
					spyre_buf_free(&c->body);
					reply_error(c, 500, "out of memory");
				}
			}
			*upload_data_size = 0;
			return MHD_YES;
		}
		if (stopping(h)) {
			reply_error(c, 503, "server shutting down");
			return MHD_YES;
		}
		rq.method = method;
		rq.path = url;
		rq.body = c->body.p ? c->body.p : "";
		rq.body_len = c->body.len;
		h->ops.request(h->user, c, &rq);
		spyre_buf_free(&c->body);
		if (c->mode == MODE_BODY)	/* the handler did not answer */
			reply_error(c, 500, "the handler gave no response");
		if (c->mode == MODE_DEFERRED)
			deferred(c);
		return MHD_YES;
	case MODE_DEFERRED:
		deferred(c);
		return MHD_YES;
	case MODE_REPLIED:
	case MODE_STREAM:
		*upload_data_size = 0;	/* the rest of a refused body */
		return MHD_YES;
	}
	return MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct spyre_http *h = cls;
	struct spyre_http_conn *c = *con_cls;

	(void)mc;
	if (!c)
		return;
	*con_cls = NULL;
	pthread_mutex_lock(&c->lock);
	c->alive = false;
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_lock(&h->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		h->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	pthread_mutex_unlock(&h->lock);
	if (c->ctx)
		h->ops.closed(h->user, c->ctx, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
	c->ctx = NULL;
	spyre_http_conn_put(c);
}

static void on_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	fputs("spyre-serve: http: ", stderr);
	vfprintf(stderr, fmt, ap);
}

int spyre_http_start(const struct spyre_http_opts *opts, const struct spyre_http_ops *ops, void *user,
		     struct spyre_http **out, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	struct addrinfo *ai = NULL;
	const union MHD_DaemonInfo *info;
	unsigned int flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
	struct epoll_event ev = { .events = EPOLLIN };
	const char *host = opts->host && *opts->host ? opts->host : "127.0.0.1";
	char port[8];
	struct spyre_http *h;
	int rc;

	snprintf(port, sizeof(port), "%u", opts->port);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		snprintf(err, errlen, "--host %s: %s", host, gai_strerror(rc));
		return -EINVAL;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		freeaddrinfo(ai);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	h->ops = *ops;
	h->user = user;
	h->max_body = opts->max_body ? opts->max_body : 1 << 20;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_init(&h->wake_lock, NULL);
	h->ep = h->wake_fd = -1;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (getenv("SPYRE_SERVE_HTTP_LOG"))
		flags |= MHD_USE_ERROR_LOG;
	h->d = MHD_start_daemon(flags, opts->port, NULL, NULL, on_access, h,
				MHD_OPTION_SOCK_ADDR, ai->ai_addr,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned int)(opts->max_connections ?
									   opts->max_connections : 1024),
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)(opts->timeout_s ? opts->timeout_s : 60),
				MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
				MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL,
				MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!h->d) {
		snprintf(err, errlen, "cannot listen on %s port %u (in use, or not an address of this machine)",
			 host, opts->port);
		pthread_mutex_destroy(&h->lock);
		pthread_mutex_destroy(&h->wake_lock);
		free(h);
		return -EADDRINUSE;
	}
	info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD);
	h->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	h->ep = epoll_create1(EPOLL_CLOEXEC);
	rc = !info || h->wake_fd < 0 || h->ep < 0;
	if (!rc) {
		ev.data.fd = info->epoll_fd;
		rc = epoll_ctl(h->ep, EPOLL_CTL_ADD, info->epoll_fd, &ev);
	}
	if (!rc) {
		ev.data.fd = h->wake_fd;
		rc = epoll_ctl(h->ep, EPOLL_CTL_ADD, h->wake_fd, &ev);
	}
	if (!rc)
		rc = pthread_create(&h->thread, NULL, loop, h);
	if (rc) {
		snprintf(err, errlen, "cannot start the server thread: %s", strerror(errno));
		MHD_stop_daemon(h->d);
		if (h->ep >= 0)
			close(h->ep);
		if (h->wake_fd >= 0)
			close(h->wake_fd);
		pthread_mutex_destroy(&h->lock);
		pthread_mutex_destroy(&h->wake_lock);
		free(h);
		return -ENOMEM;
	}
	info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_LISTEN_FD);
	if (info && !getsockname(info->listen_fd, (struct sockaddr *)&ss, &sslen))
		h->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
				((struct sockaddr_in *)&ss)->sin_port);
	*out = h;
	return 0;
}

uint16_t spyre_http_port(const struct spyre_http *h)
{
	return h->port;
}

uint32_t spyre_http_connections(struct spyre_http *h)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

	return info ? info->num_connections : 0;
}

void spyre_http_quiesce(struct spyre_http *h)
{
	MHD_socket fd = MHD_quiesce_daemon(h->d);

	if (fd != MHD_INVALID_SOCKET)
		close(fd);
}

void spyre_http_stop(struct spyre_http *h)
{
	uint64_t one = 1;

	__atomic_store_n(&h->stopping, 1, __ATOMIC_SEQ_CST);
	/* The server thread resumes every suspended connection (never suspended again: stopping is set). */
	if (write(h->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: a wake-up is pending anyway */
	}
	pthread_join(h->thread, NULL);
	MHD_stop_daemon(h->d);
	close(h->ep);
	close(h->wake_fd);
	pthread_mutex_destroy(&h->lock);
	pthread_mutex_destroy(&h->wake_lock);
	free(h);
}
