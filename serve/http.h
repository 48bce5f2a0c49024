/* SPDX-License-Identifier: MIT */
/*
 * http.h - spyre-serve's HTTP layer: GNU libmicrohttpd (no HTTP parsing of
 * ours) behind a small API that knows nothing of OpenAI.
 *
 * One server thread (ours, driving libmicrohttpd in its epoll mode) runs
 * every connection; callbacks run on it and must not block.
 * A request reaches ops->request once, whole (headers and a body of at most
 * max_body bytes: a larger Content-Length gets 413 before the body is read, a
 * larger chunked body 413 as soon as it passes the limit). The handler
 * answers it in one of three ways:
 *   - spyre_http_reply(): a whole response, now;
 *   - spyre_http_defer(): later. The connection is suspended (no reads, no
 *     timeout) until spyre_http_wake(); then ops->pump runs on the server
 *     thread and replies, or returns to wait for the next wake;
 *   - spyre_http_stream(): status and headers now, then a body of unknown
 *     length (chunked): ops->pump appends with spyre_http_write() and ends it
 *     with spyre_http_end(); between wakes the connection is suspended.
 * spyre_http_wake() may be called from any thread, at any time, as long as
 * the caller holds a reference (spyre_http_conn_get/put); after the
 * connection is gone it does nothing. ops->closed tells the handler that the
 * connection is gone: the response was sent whole (ok) or the client went
 * away, timed out, or the server stops (!ok); a stream's client that
 * disconnects is seen at the next write (a suspended connection is not
 * polled). Idle connections close after timeout_s seconds without traffic;
 * at most max_connections are open (more are accepted and closed at once).
 */
#ifndef SPYRE_SERVE_HTTP_H
#define SPYRE_SERVE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct spyre_http;
struct spyre_http_conn;

struct spyre_http_opts {
	const char *host;		/* numeric address or name (default 127.0.0.1) */
	uint16_t port;			/* 0: any free port (spyre_http_port() says which) */
	uint32_t max_connections;	/* default 1024 */
	uint32_t timeout_s;		/* idle timeout, default 60 */
	size_t max_body;		/* bytes, default 1 MiB */
};

struct spyre_http_request {
	const char *method;		/* "GET", "POST", ... */
	const char *path;		/* without the query string */
	const char *body;		/* NUL-terminated (the NUL is not counted) */
	size_t body_len;
};

struct spyre_http_ops {
	void (*request)(void *user, struct spyre_http_conn *c, const struct spyre_http_request *rq);
	void (*pump)(void *user, struct spyre_http_conn *c, void *ctx);
	/* Answer with an error (413 body too large, 503 shutting down, 500): spyre_http_reply() in the
	 * handler's format (else the message goes as text/plain). */
	void (*error)(void *user, struct spyre_http_conn *c, unsigned int status, const char *message);
	/* The connection is gone: ctx is the handler's (spyre_http_set_ctx), ok: sent whole. */
	void (*closed)(void *user, void *ctx, bool ok);
};

/* Start listening and serving. 0, or -errno with a message. */
int spyre_http_start(const struct spyre_http_opts *opts, const struct spyre_http_ops *ops, void *user,
		     struct spyre_http **out, char *err, size_t errlen);
uint16_t spyre_http_port(const struct spyre_http *h);
/* Stop accepting connections; those open go on. */
void spyre_http_quiesce(struct spyre_http *h);
/* Resume every suspended connection (their pump runs with spyre_http_stopping() true: it must finish
 * now), close every connection, stop the thread, free. */
void spyre_http_stop(struct spyre_http *h);
bool spyre_http_stopping(const struct spyre_http *h);
/* Connections open now. */
uint32_t spyre_http_connections(struct spyre_http *h);

/* The handler's per-request state, handed back to pump and closed. */
void spyre_http_set_ctx(struct spyre_http_conn *c, void *ctx);

/* A whole response (the body is copied). Extra headers: NULL, or "Name: value" strings, NULL-ended. */
void spyre_http_reply(struct spyre_http_conn *c, unsigned int status, const char *content_type,
		      const char *body, size_t len, const char *const *headers);
void spyre_http_defer(struct spyre_http_conn *c);
void spyre_http_stream(struct spyre_http_conn *c, unsigned int status, const char *content_type);
/* In pump: stream bytes (copied); 0, or -ENOMEM / -EPIPE (the stream ended or the client is gone). */
int spyre_http_write(struct spyre_http_conn *c, const void *data, size_t len);
void spyre_http_end(struct spyre_http_conn *c);

/* From any thread: have pump run soon. */
void spyre_http_wake(struct spyre_http_conn *c);
/*
 * spyre_http_wake() that leaves the server thread asleep until the calling
 * thread's spyre_http_flush(): the wake-ups a thread queues this way reach
 * the server thread as one (the engine's step wakes all its streams at once).
 */
void spyre_http_wake_later(struct spyre_http_conn *c);
void spyre_http_flush(void);
void spyre_http_conn_get(struct spyre_http_conn *c);
void spyre_http_conn_put(struct spyre_http_conn *c);

#endif /* SPYRE_SERVE_HTTP_H */
