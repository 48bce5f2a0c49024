// SPDX-License-Identifier: MIT
/*
 * The connections of a communicator of one card per process: no network,
 * one unix socket per pair of ranks (SOCK_SEQPACKET: messages keep their
 * bounds, carry file descriptors with SCM_RIGHTS, and a peer's exit is an
 * end of file). Rank r listens on the abstract name
 * "spyre-comm-<the id's public half in hex>-<r>", connects to every lower
 * rank and accepts every higher one; each side's HELLO carries nranks, its
 * rank, its card and the id's secret half (the names are visible in
 * /proc/net/unix, the secret is not), and the peer must be of this user
 * (SO_PEERCRED). Messages of a peer that arrive before they are waited
 * for are kept in its queue; any wait also reads every other peer, so
 * that an ABORT or an exit anywhere ends it at once. Every wait ends by
 * SPYRE_COMM_TIMEOUT_MS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "common.h"
#include "coll.h"

#define COLL_MAGIC 0x53505943u		/* "SPYC" */
#define ID_MAGIC "spyreid1"
#define DEFAULT_TIMEOUT_MS 300000

struct peer_conn {
	int fd;				/* -1 until connected and once it ended */
	int gone;			/* how it ended: -ECONNRESET, -ECONNABORTED (its ABORT), 0 */
	char why[300];			/* ... in words */
	int pid;
	char card[256];
	struct coll_msg *q;		/* received, not yet waited for */
	int (*qfds)[2];
	size_t nq, capq;
};

/* Streams with a sender thread of their own; more share the last one's. */
#define SENDER_LANES 8

/* A message for a sender thread: sent once @ev is reached (coll_net_send_after()). */
struct sendq {
	struct sendq *next;
	spyre_event_t *ev;		/* kept with the entry for reuse */
	int fd;				/* the peer's socket, duplicated */
	struct coll_msg m;
};

struct coll_net {
	int n, rank, timeout_ms;
	struct peer_conn *p;
	spyre_device_t *dev;		/* the rank's card: its events */
	/* The sender threads, one per stream, started by coll_net_send_after(). */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct sender_lane {
		struct coll_net *net;
		const spyre_stream_t *s;	/* its stream (a later stream at that address joins it) */
		pthread_t thread;
		bool started;
		struct sendq *head, *tail;	/* to send, in order */
	} lane[SENDER_LANES];
	pid_t sender_pid;		/* the process that started them (not a fork's child) */
	bool sender_started, quit;
	struct sendq *spare;		/* sent: entries and events to reuse */
};

struct id_bytes {
	char magic[8];
	uint8_t name[8];		/* public: the sockets' names */
	uint8_t token[16];		/* secret: checked in HELLO */
};

static int env_timeout_ms(void)
{
	const char *e = getenv("SPYRE_COMM_TIMEOUT_MS");
	long v;
	char *end;

	if (!e || !*e)
		return DEFAULT_TIMEOUT_MS;
	v = strtol(e, &end, 10);
	return *end || v <= 0 || v > 86400000 ? DEFAULT_TIMEOUT_MS : (int)v;
}

SPYRE_EXPORT int spyre_comm_get_unique_id(spyre_comm_id_t *id)
{
	struct id_bytes b;
	FILE *f;
	size_t got;

	if (!id)
		return spyre_error(-EINVAL, "spyre_comm_get_unique_id: NULL id");
	memset(id, 0, sizeof(*id));
	memcpy(b.magic, ID_MAGIC, sizeof(b.magic));
	f = fopen("/dev/urandom", "re");
	if (!f)
		return spyre_error(-errno, "spyre_comm_get_unique_id: /dev/urandom: %s", strerror(errno));
	got = fread(b.name, 1, sizeof(b.name) + sizeof(b.token), f);
	fclose(f);
	if (got != sizeof(b.name) + sizeof(b.token))
		return spyre_error(-EIO, "spyre_comm_get_unique_id: short read of /dev/urandom");
	memcpy(id->internal, &b, sizeof(b));
	return 0;
}

static void sock_name(struct sockaddr_un *a, socklen_t *len, const struct id_bytes *b, int rank)
{
	int n, i;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "spyre-comm-");
	for (i = 0; i < (int)sizeof(b->name); i++)
		n += snprintf(a->sun_path + 1 + n, sizeof(a->sun_path) - 1 - (size_t)n, "%02x", b->name[i]);
	n += snprintf(a->sun_path + 1 + n, sizeof(a->sun_path) - 1 - (size_t)n, "-%d", rank);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int64_t now_ms(void)
{
	return (int64_t)(spyre_now_ns() / 1000000);
}

int coll_net_timeout_ms(const struct coll_net *net)
{
	return net->timeout_ms;
}

int coll_net_pid(const struct coll_net *net, int j)
{
	return net->p[j].pid;
}

const char *coll_net_card(const struct coll_net *net, int j)
{
	return net->p[j].card;
}

static const char *type_name(uint32_t t)
{
	static const char *const names[] = {
		[COLL_MSG_HELLO] = "HELLO", [COLL_MSG_BOXES] = "BOXES", [COLL_MSG_REACH] = "REACH",
		[COLL_MSG_CTS] = "CTS", [COLL_MSG_READY] = "READY", [COLL_MSG_DONE] = "DONE",
		[COLL_MSG_BARRIER] = "BARRIER", [COLL_MSG_ABORT] = "ABORT",
	};

	return SPYRE_NAME_OF(names, t, "?");
}

static int raw_send(int fd, const struct coll_msg *m, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)m, .iov_len = sizeof(*m) };
	struct msghdr h = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t w;

	if (nfds) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		h.msg_control = u.buf;
		h.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	do
		w = sendmsg(fd, &h, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	return w == (ssize_t)sizeof(*m) ? 0 : w < 0 ? -errno : -EIO;
}

/* One message of @fd into @m, its fds into @fds[2]; 0, -ECONNRESET at the end, -errno. */
static int raw_recv(int fd, struct coll_msg *m, int *fds)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = m, .iov_len = sizeof(*m) };
	struct msghdr h = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;
	ssize_t r;
	int k = 0;

	fds[0] = fds[1] = -1;
	do
		r = recvmsg(fd, &h, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	for (c = CMSG_FIRSTHDR(&h); r >= 0 && c; c = CMSG_NXTHDR(&h, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			size_t i, nf = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int f;

			for (i = 0; i < nf; i++) {
				memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (k < 2)
					fds[k++] = f;
				else
					close(f);
			}
		}
	}
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ECONNRESET;
	if (r != (ssize_t)sizeof(*m) || m->magic != COLL_MAGIC ||
	    (h.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) {
		if (fds[0] >= 0)
			close(fds[0]);
		if (fds[1] >= 0)
			close(fds[1]);
		return -EPROTO;
	}
	m->text[sizeof(m->text) - 1] = 0;
	return 0;
}

static int peer_gone(struct coll_net *net, int j, int err)
{
	if (err == -ECONNRESET || err == -EPIPE)
		return spyre_error(-ECONNRESET, "rank %d (pid %d) closed its connection: it exited or "
				   "was killed", j, net->p[j].pid);
	return spyre_error(err, "rank %d (pid %d): %s", j, net->p[j].pid,
			   err == -EPROTO ? "a message that is not the protocol's" : strerror(-err));
}

static int drain(struct coll_net *net, int j);

/* A send to @j failed with @err: its ABORT, when it sent one before it went, says why. */
static int send_failed(struct coll_net *net, int j, int err)
{
	if (net->p[j].fd >= 0 && !drain(net, j) && net->p[j].gone)
		return spyre_error(net->p[j].gone, "%s", net->p[j].why);
	return peer_gone(net, j, err);
}

int coll_net_send(struct coll_net *net, int j, struct coll_msg *m, const int *fds, int nfds)
{
	int ret;

	m->magic = COLL_MAGIC;
	m->pid = getpid();
	if (net->p[j].fd < 0)
		return spyre_error(net->p[j].gone ?: -ENOTCONN, "%s", net->p[j].gone ? net->p[j].why :
				   "not connected");
	ret = raw_send(net->p[j].fd, m, fds, nfds);
	return ret ? send_failed(net, j, ret) : 0;
}

/* Read every message waiting on @j's socket into its queue; an ABORT or an end is an error. */
static int drain(struct coll_net *net, int j)
{
	struct peer_conn *p = &net->p[j];

	for (;;) {
		struct coll_msg m;
		int fds[2], ret = raw_recv(p->fd, &m, fds);

		if (ret == -EAGAIN || ret == -EWOULDBLOCK)
			return 0;
		if (ret || m.type == COLL_MSG_ABORT) {
			/* What came before stays in the queue: a wait may still take it. */
			if (!ret && fds[0] >= 0)
				close(fds[0]);
			if (!ret && fds[1] >= 0)
				close(fds[1]);
			if (!p->gone && ret) {
				p->gone = ret == -EPROTO ? -EPROTO : -ECONNRESET;
				snprintf(p->why, sizeof(p->why), "rank %d (pid %d) %s", j, p->pid,
					 ret == -EPROTO ? "sent a message that is not the protocol's" :
					 "closed its connection: it exited or was killed");
			} else if (!p->gone) {
				p->gone = -ECONNABORTED;
				snprintf(p->why, sizeof(p->why), "rank %d (pid %d) failed: %s", j, m.pid,
					 m.text);
			}
			close(p->fd);
			p->fd = -1;
			return 0;
		}
		if (p->nq == p->capq) {
			size_t cap = p->capq ? 2 * p->capq : 8;
			struct coll_msg *q = realloc(p->q, cap * sizeof(*q));
			int (*qf)[2] = q ? realloc(p->qfds, cap * sizeof(*qf)) : NULL;

			if (q)
				p->q = q;
			if (!q || !qf) {
				if (fds[0] >= 0)
					close(fds[0]);
				if (fds[1] >= 0)
					close(fds[1]);
				return spyre_error(-ENOMEM, "communicator: out of memory");
			}
			p->qfds = qf;
			p->capq = cap;
		}
		p->q[p->nq] = m;
		p->qfds[p->nq][0] = fds[0];
		p->qfds[p->nq][1] = fds[1];
		p->nq++;
	}
}

static bool take(struct coll_net *net, int j, uint32_t type, uint64_t tag, bool any_tag,
		 struct coll_msg *m, int *fds)
{
	struct peer_conn *p = &net->p[j];
	size_t i;

	for (i = 0; i < p->nq; i++) {
		if (p->q[i].type != type || (!any_tag && p->q[i].tag != tag))
			continue;
		*m = p->q[i];
		if (fds) {
			fds[0] = p->qfds[i][0];
			fds[1] = p->qfds[i][1];
		} else {
			if (p->qfds[i][0] >= 0)
				close(p->qfds[i][0]);
			if (p->qfds[i][1] >= 0)
				close(p->qfds[i][1]);
		}
		memmove(&p->q[i], &p->q[i + 1], (p->nq - i - 1) * sizeof(*p->q));
		memmove(&p->qfds[i], &p->qfds[i + 1], (p->nq - i - 1) * sizeof(*p->qfds));
		p->nq--;
		return true;
	}
	return false;
}

/* The awaited rank @j ended, or any rank failed: an error with its detail, else 0. */
static int net_failed(struct coll_net *net, int j)
{
	int k;

	for (k = 0; k < net->n; k++)
		if (net->p[k].gone && (k == j || net->p[k].gone == -ECONNABORTED))
			return spyre_error(net->p[k].gone, "%s", net->p[k].why);
	return 0;
}

int coll_net_try(struct coll_net *net, int j, uint32_t type, uint64_t tag, struct coll_msg *m)
{
	if (take(net, j, type, tag, false, m, NULL))
		return 1;
	return net_failed(net, j);
}

int coll_net_poll(struct coll_net *net, int ms)
{
	struct pollfd *pf = calloc((size_t)net->n, sizeof(*pf));
	int k, np, ret = 0;

	if (!pf)
		return spyre_error(-ENOMEM, "communicator: out of memory");
	for (k = 0, np = 0; k < net->n; k++)
		if (net->p[k].fd >= 0) {
			pf[np].fd = net->p[k].fd;
			pf[np].events = POLLIN;
			pf[np].revents = 0;
			np++;
		}
	if (poll(pf, (nfds_t)np, ms) < 0 && errno != EINTR)
		ret = spyre_error(-errno, "communicator: poll: %s", strerror(errno));
	/* Every peer: an ABORT anywhere ends the wait. */
	for (k = 0; !ret && k < net->n; k++)
		if (net->p[k].fd >= 0)
			ret = drain(net, k);
	free(pf);
	return ret;
}

const char *coll_net_msg_name(uint32_t type)
{
	return type_name(type);
}

int coll_net_wait(struct coll_net *net, int j, uint32_t type, uint64_t tag, bool any_tag,
		  struct coll_msg *m, int *fds)
{
	int64_t deadline = now_ms() + net->timeout_ms;
	int ret;

	for (;;) {
		int64_t left;

		if (take(net, j, type, tag, any_tag, m, fds))
			return 0;
		ret = net_failed(net, j);
		if (ret)
			return ret;
		left = deadline - now_ms();
		if (left <= 0)
			return spyre_error(-ETIMEDOUT, "rank %d (pid %d) sent no %s (transfer %llu) within "
					   "%d ms (SPYRE_COMM_TIMEOUT_MS)", j, net->p[j].pid,
					   type_name(type), (unsigned long long)tag, net->timeout_ms);
		ret = coll_net_poll(net, (int)(left > 1000 ? 1000 : left));
		if (ret)
			return ret;
	}
}

/*
 * A sender thread, one per stream: each message queued for it goes out once
 * its event is reached, in the order they were queued (their events are in
 * that order on the stream), so a stream held by earlier work (say a WAIT
 * its host releases later) delays only its own messages. Unlike a stream
 * callback (spyre_stream_add_callback() makes later work on the stream wait
 * on the host for it), the caller's stream runs on.
 */
static void *sender_thread(void *arg)
{
	struct sender_lane *l = arg;
	struct coll_net *net = l->net;
	struct sendq *e;

	pthread_mutex_lock(&net->lock);
	for (;;) {
		while (!l->head && !net->quit)
			pthread_cond_wait(&net->cond, &net->lock);
		e = l->head;
		if (!e)
			break;
		pthread_mutex_unlock(&net->lock);
		/*
		 * Sent even when the copy failed (an event carries no job status):
		 * this rank's stream is poisoned and its next call aborts the others.
		 */
		(void)spyre_event_synchronize(e->ev);
		(void)raw_send(e->fd, &e->m, NULL, 0);
		close(e->fd);
		pthread_mutex_lock(&net->lock);
		l->head = e->next;
		if (!l->head)
			l->tail = NULL;
		e->next = net->spare;
		net->spare = e;
		pthread_cond_broadcast(&net->cond);
	}
	pthread_mutex_unlock(&net->lock);
	return NULL;
}

/* *@out = a spare entry with its event, or a new one. */
static int sendq_get(struct coll_net *net, struct sendq **out)
{
	struct sendq *e;
	int ret;

	pthread_mutex_lock(&net->lock);
	e = net->spare;
	if (e)
		net->spare = e->next;
	pthread_mutex_unlock(&net->lock);
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return spyre_error(-ENOMEM, "communicator: out of memory");
		ret = spyre_event_create(net->dev, &e->ev);
		if (ret) {
			free(e);
			return ret;
		}
	}
	*out = e;
	return 0;
}

static void sendq_put_spare(struct coll_net *net, struct sendq *e)
{
	pthread_mutex_lock(&net->lock);
	e->next = net->spare;
	net->spare = e;
	pthread_mutex_unlock(&net->lock);
}

int coll_net_send_after(struct coll_net *net, spyre_stream_t *s, int j, const struct coll_msg *m)
{
	struct sender_lane *l;
	struct sendq *e = NULL;
	int ret, k;

	if (net->p[j].fd < 0)
		return spyre_error(net->p[j].gone ?: -ENOTCONN, "%s", net->p[j].gone ? net->p[j].why :
				   "not connected");
	ret = sendq_get(net, &e);
	if (ret)
		return ret;
	e->m = *m;
	e->m.magic = COLL_MAGIC;
	e->m.pid = getpid();
	/* Its own descriptor: this thread closes the peer's when it ends. */
	e->fd = fcntl(net->p[j].fd, F_DUPFD_CLOEXEC, 0);
	if (e->fd < 0) {
		ret = spyre_error(-errno, "communicator: dup: %s", strerror(errno));
		sendq_put_spare(net, e);
		return ret;
	}
	ret = spyre_event_record(e->ev, s);
	if (ret) {
		close(e->fd);
		sendq_put_spare(net, e);
		return ret;
	}
	pthread_mutex_lock(&net->lock);
	for (k = 0; k < SENDER_LANES - 1 && net->lane[k].started && net->lane[k].s != s; k++)
		;
	l = &net->lane[k];
	if (!l->started) {
		l->net = net;
		l->s = s;
		if (pthread_create(&l->thread, NULL, sender_thread, l)) {
			pthread_mutex_unlock(&net->lock);
			close(e->fd);
			sendq_put_spare(net, e);
			return spyre_error(-EAGAIN, "communicator: cannot start a sender thread");
		}
		l->started = true;
		net->sender_started = true;
		net->sender_pid = getpid();
	}
	e->next = NULL;
	if (l->tail)
		l->tail->next = e;
	else
		l->head = e;
	l->tail = e;
	pthread_cond_broadcast(&net->cond);
	pthread_mutex_unlock(&net->lock);
	return 0;
}

void coll_strip_status(char *s, int status)
{
	const char *e = spyre_strerror(status);
	size_t len = strlen(s), el = strlen(e);

	if (len > el + 3 && s[len - 1] == ')' && !strncmp(s + len - el - 1, e, el) &&
	    !strncmp(s + len - el - 3, " (", 2))
		s[len - el - 3] = 0;
}

void coll_net_abort(struct coll_net *net, const char *why, int status)
{
	struct coll_msg m = { .type = COLL_MSG_ABORT };
	int k;

	m.magic = COLL_MAGIC;
	m.pid = getpid();
	snprintf(m.text, sizeof(m.text), "%s", why);
	coll_strip_status(m.text, status);
	/* Not coll_net_send(): the caller's error detail stays. */
	for (k = 0; k < net->n; k++)
		if (net->p[k].fd >= 0)
			(void)raw_send(net->p[k].fd, &m, NULL, 0);
}

void coll_net_close(struct coll_net *net)
{
	int k;
	size_t i;

	if (!net)
		return;
	/*
	 * The queued messages go out first (their events end by the job
	 * timeout at worst, or a stream memory wait's own bound). A fork's child has no sender thread (and maybe a
	 * lock its parent's thread held): it only frees.
	 */
	if (net->sender_started && net->sender_pid != getpid()) {
		free(net->p);
		free(net);
		return;
	}
	if (net->sender_started) {
		pthread_mutex_lock(&net->lock);
		net->quit = true;
		pthread_cond_broadcast(&net->cond);
		pthread_mutex_unlock(&net->lock);
		for (k = 0; k < SENDER_LANES; k++)
			if (net->lane[k].started)
				pthread_join(net->lane[k].thread, NULL);
	}
	while (net->spare) {
		struct sendq *e = net->spare;

		net->spare = e->next;
		spyre_event_destroy(e->ev);
		free(e);
	}
	pthread_cond_destroy(&net->cond);
	pthread_mutex_destroy(&net->lock);
	for (k = 0; k < net->n; k++) {
		struct peer_conn *p = &net->p[k];

		for (i = 0; i < p->nq; i++) {
			if (p->qfds[i][0] >= 0)
				close(p->qfds[i][0]);
			if (p->qfds[i][1] >= 0)
				close(p->qfds[i][1]);
		}
		if (p->fd >= 0)
			close(p->fd);
		free(p->q);
		free(p->qfds);
	}
	free(net->p);
	free(net);
}

/*
 * Sends on a rank's sockets give up after @ms too (a peer that stops reading
 * fills its queue): every wait of a communicator ends by SPYRE_COMM_TIMEOUT_MS.
 */
static void send_timeout(int fd, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* How long an accepted connection may take to say HELLO (generous: a loaded TCG guest). */
#define HELLO_MS 10000

/* This user's peer on @fd, or -EPERM. */
static int check_cred(int fd)
{
	struct ucred c;
	socklen_t len = sizeof(c);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len))
		return -errno;
	return c.uid == getuid() ? 0 : -EPERM;
}

static void hello(struct coll_msg *m, const struct id_bytes *b, int nranks, int rank, const char *card)
{
	memset(m, 0, sizeof(*m));
	m->type = COLL_MSG_HELLO;
	m->a = (uint64_t)nranks;
	m->b = (uint64_t)rank;
	memcpy(m->token, b->token, sizeof(m->token));
	snprintf(m->text, sizeof(m->text), "%s", card);
}

/* Read one message of @fd within @deadline (set-up: before the peer is known). */
static int recv_by(int fd, struct coll_msg *m, int64_t deadline)
{
	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		int fds[2], ret;

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pf, 1, (int)left) < 0 && errno != EINTR)
			return -errno;
		ret = raw_recv(fd, m, fds);
		if (fds[0] >= 0)
			close(fds[0]);
		if (fds[1] >= 0)
			close(fds[1]);
		if (ret != -EAGAIN && ret != -EWOULDBLOCK)
			return ret;
	}
}

/* The peer's HELLO (or ABORT) in @m checked against ours: 0 or an error with a detail. */
static int check_hello(const struct coll_msg *m, const struct id_bytes *b, int nranks, int rank,
		       int want_rank)
{
	if (m->type == COLL_MSG_ABORT)
		return spyre_error(-EINVAL, "rank %d (pid %d) refused this rank: %s", want_rank, m->pid,
				   m->text);
	if (m->type != COLL_MSG_HELLO || memcmp(m->token, b->token, sizeof(b->token)))
		return spyre_error(-EPROTO, "a process (pid %d) that does not hold this id connected",
				   m->pid);
	if (m->a != (uint64_t)nranks)
		return spyre_error(-EINVAL, "rank %llu (pid %d) joined with nranks %llu, this rank %d "
				   "with nranks %d", (unsigned long long)m->b, m->pid,
				   (unsigned long long)m->a, rank, nranks);
	if (want_rank >= 0 && m->b != (uint64_t)want_rank)
		return spyre_error(-EPROTO, "rank %d's socket answered as rank %llu", want_rank,
				   (unsigned long long)m->b);
	return 0;
}

/* Refuse a connected process with @why (best effort). */
static void refuse(int fd, const char *why)
{
	struct coll_msg m = { .magic = COLL_MAGIC, .type = COLL_MSG_ABORT };

	m.pid = getpid();
	snprintf(m.text, sizeof(m.text), "%s", why);
	(void)raw_send(fd, &m, NULL, 0);
}

/*
 * Connect to rank @j's socket, retrying until it is bound and accepts or
 * @deadline. Non-blocking: a unix connect() to a listener whose backlog is
 * full (a process that holds the name and never accepts, or one another
 * process flooded) would otherwise block past any timeout; it fails with
 * EAGAIN instead and is retried like a name not yet bound.
 */
static int connect_to(const struct id_bytes *b, int j, int64_t deadline, int timeout_ms, int *out)
{
	struct sockaddr_un a;
	socklen_t len;
	int fd, err;

	sock_name(&a, &len, b, j);
	for (;;) {
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return spyre_error(-errno, "communicator: socket: %s", strerror(errno));
		if (!connect(fd, (struct sockaddr *)&a, len)) {
			/* Abstract names have no permissions: a process of another user may
			 * hold the name first; it gets neither the secret nor a box. */
			if (check_cred(fd)) {
				close(fd);
				return spyre_error(-EPERM, "communicator: rank %d's socket is held by "
						   "a process of another user", j);
			}
			if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
				err = errno;
				close(fd);
				return spyre_error(-err, "communicator: fcntl: %s", strerror(err));
			}
			send_timeout(fd, timeout_ms);
			break;
		}
		err = errno;
		close(fd);
		if (err != ECONNREFUSED && err != ENOENT && err != EAGAIN && err != EINTR)
			return spyre_error(-err, "communicator: connecting to rank %d: %s", j,
					   strerror(err));
		if (now_ms() >= deadline)
			return spyre_error(-ETIMEDOUT, "rank %d did not join within %d ms "
					   "(SPYRE_COMM_TIMEOUT_MS): %s", j, timeout_ms,
					   err == EAGAIN ? "a process holds its socket but does not accept" :
					   "no process listens as it");
		usleep(10000);
	}
	*out = fd;
	return 0;
}

/*
 * Wait up to @left ms for a connection on @lfd, reading the connected
 * ranks meanwhile (their early messages queued): an ABORT or an exit of
 * one of them is an error.
 */
static int wait_listen(struct coll_net *net, int lfd, int64_t left)
{
	struct pollfd pf[65];
	int k, np = 1;

	pf[0].fd = lfd;
	pf[0].events = POLLIN;
	for (k = 0; k < net->n; k++)
		if (net->p[k].fd >= 0) {
			pf[np].fd = net->p[k].fd;
			pf[np].events = POLLIN;
			np++;
		}
	if (poll(pf, (nfds_t)np, (int)(left > 1000 ? 1000 : left)) < 0 && errno != EINTR)
		return spyre_error(-errno, "communicator: poll: %s", strerror(errno));
	for (k = 0; k < net->n; k++) {
		int ret = net->p[k].fd >= 0 ? drain(net, k) : 0;

		if (ret)
			return ret;
		if (net->p[k].gone)
			return spyre_error(net->p[k].gone, "%s", net->p[k].why);
	}
	return 0;
}

int coll_net_open(struct coll_net **out, spyre_device_t *dev, const spyre_comm_id_t *id,
		  int nranks, int rank, const char *card)
{
	const struct id_bytes *b = (const void *)id->internal;
	struct coll_net *net;
	struct sockaddr_un a;
	struct coll_msg m;
	socklen_t len;
	int64_t deadline;
	int lfd = -1, j, ret = 0, joined;

	if (memcmp(b->magic, ID_MAGIC, sizeof(b->magic)))
		return spyre_error(-EINVAL, "spyre_comm_init_rank: the id is not one of "
				   "spyre_comm_get_unique_id()");
	net = calloc(1, sizeof(*net));
	if (net)
		net->p = calloc((size_t)nranks, sizeof(*net->p));
	if (!net || !net->p) {
		free(net);
		return spyre_error(-ENOMEM, "spyre_comm_init_rank: out of memory");
	}
	pthread_mutex_init(&net->lock, NULL);
	pthread_cond_init(&net->cond, NULL);
	net->dev = dev;
	net->n = nranks;
	net->rank = rank;
	net->timeout_ms = env_timeout_ms();
	for (j = 0; j < nranks; j++)
		net->p[j].fd = -1;
	snprintf(net->p[rank].card, sizeof(net->p[rank].card), "%s", card);
	net->p[rank].pid = getpid();
	deadline = now_ms() + net->timeout_ms;

	/* Our name first: a second process with this rank finds it taken. */
	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (lfd < 0) {
		ret = spyre_error(-errno, "communicator: socket: %s", strerror(errno));
		goto out;
	}
	sock_name(&a, &len, b, rank);
	if (bind(lfd, (struct sockaddr *)&a, len)) {
		ret = errno == EADDRINUSE ?
		      spyre_error(-EADDRINUSE, "rank %d of this id is already taken by another process",
				  rank) :
		      spyre_error(-errno, "communicator: bind: %s", strerror(errno));
		goto out;
	}
	if (listen(lfd, nranks)) {
		ret = spyre_error(-errno, "communicator: listen: %s", strerror(errno));
		goto out;
	}
	/* Lower ranks: connect and say HELLO (answers are read below). */
	for (j = 0; !ret && j < rank; j++) {
		ret = connect_to(b, j, deadline, net->timeout_ms, &net->p[j].fd);
		if (!ret) {
			hello(&m, b, nranks, rank, card);
			ret = coll_net_send(net, j, &m, NULL, 0);
		}
	}
	/* The lower ranks' answers. */
	for (j = 0; !ret && j < rank; j++) {
		ret = recv_by(net->p[j].fd, &m, deadline);
		if (ret == -ETIMEDOUT)
			ret = spyre_error(-ETIMEDOUT, "rank %d did not answer within %d ms "
					  "(SPYRE_COMM_TIMEOUT_MS)", j, net->timeout_ms);
		else if (ret)
			ret = peer_gone(net, j, ret);
		else
			ret = check_hello(&m, b, nranks, rank, j);
		if (!ret) {
			net->p[j].pid = m.pid;
			snprintf(net->p[j].card, sizeof(net->p[j].card), "%s", m.text);
		}
	}
	/* Higher ranks: accept, check their HELLO, answer. */
	for (joined = 0; !ret && joined < nranks - 1 - rank;) {
		int64_t left = deadline - now_ms();
		int fd;

		if (left <= 0) {
			for (j = rank + 1; j < nranks && net->p[j].fd >= 0; j++)
				;
			ret = spyre_error(-ETIMEDOUT, "rank %d did not join within %d ms "
					  "(SPYRE_COMM_TIMEOUT_MS)", j, net->timeout_ms);
			break;
		}
		/* The ranks already connected too: one that fails or exits ends the set-up. */
		ret = wait_listen(net, lfd, left);
		if (ret)
			break;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		ret = check_cred(fd);
		if (ret) {
			close(fd);	/* another user's process: not ours to answer */
			ret = 0;
			continue;
		}
		send_timeout(fd, net->timeout_ms);
		/* A rank says HELLO as it connects: one that stays silent is not
		 * waited for long, the others queue behind it. */
		ret = recv_by(fd, &m, deadline < now_ms() + HELLO_MS ? deadline : now_ms() + HELLO_MS);
		if (ret) {
			close(fd);	/* gone or silent before its HELLO: still waiting for the rank */
			ret = 0;
			continue;
		}
		ret = check_hello(&m, b, nranks, rank, -1);
		if (!ret && (m.b <= (uint64_t)rank || m.b >= (uint64_t)nranks || net->p[m.b].fd >= 0))
			ret = spyre_error(-EINVAL, "a process (pid %d) joined as rank %llu, which this "
					  "rank %d does not wait for", m.pid, (unsigned long long)m.b,
					  rank);
		if (ret) {
			refuse(fd, spyre_last_error());
			close(fd);
			break;
		}
		j = (int)m.b;
		net->p[j].fd = fd;
		net->p[j].pid = m.pid;
		snprintf(net->p[j].card, sizeof(net->p[j].card), "%s", m.text);
		hello(&m, b, nranks, rank, card);
		ret = coll_net_send(net, j, &m, NULL, 0);
		joined++;
	}
out:
	if (lfd >= 0)
		close(lfd);
	if (ret) {
		coll_net_abort(net, spyre_last_error(), ret);
		coll_net_close(net);
		return ret;
	}
	*out = net;
	return 0;
}
