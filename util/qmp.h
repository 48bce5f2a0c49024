/* SPDX-License-Identifier: MIT */
/*
 * qmp.h - a small client of QEMU's machine protocol (QMP, QEMU's
 * docs/interop/qmp-spec.rst) over a unix socket: util/, shared, depends on
 * nothing of the project but json.h, which parses the answers. Used by the
 * qtest client of the device tests (qemu-device/tests/qtest-client.c) and by
 * the live migration launcher (tools/vm/migrate.c).
 *
 * QMP is one JSON object a line each way: the server greets, the client
 * negotiates capabilities, then each command gets one answer, {"return": ...}
 * or {"error": {"class": ..., "desc": ...}}; asynchronous {"event": ...}
 * lines may come in between and are skipped. A QEMU serves one client at a
 * time on a socket, so keep one connection per QEMU.
 *
 * Every read waits at most the connection's timeout (a QEMU that stopped
 * answering is an error, not a hang).
 */
#ifndef SPYRE_UTIL_QMP_H
#define SPYRE_UTIL_QMP_H

#include <stddef.h>

struct spyre_json;
struct spyre_json_node;

struct spyre_qmp {
	int fd;			/* -1: not connected */
	int timeout_ms;		/* each read's limit */
	char *buf;		/* bytes read, not yet consumed */
	size_t len, cap;
	char *line;		/* the last answer line, NUL-terminated, without its newline */
};

#define SPYRE_QMP_TIMEOUT_MS 60000

/* An unconnected client (fd -1, the default read timeout). */
void spyre_qmp_init(struct spyre_qmp *q);

/*
 * Connect to the QMP server listening at @path, retrying for @wait_ms (a QEMU
 * just started may not listen yet), read its greeting and negotiate
 * capabilities. 0, or -1 and why in @err ("no QMP socket at PATH", ...).
 */
int spyre_qmp_open(struct spyre_qmp *q, const char *path, int wait_ms, char *err, size_t errlen);

/*
 * Send @cmd (one JSON object, no newline) and read until its answer. 0 for a
 * "return"; then *@answer (when @answer is non-NULL) is the parsed answer
 * line, freed with spyre_json_free(), and spyre_qmp_return() its value. -1
 * with why in @err for an "error" answer (its "desc"), a closed connection,
 * a read that timed out or an answer that is no JSON object. Either way
 * q->line holds the answer line (empty when none came) until the next call.
 */
int spyre_qmp_cmd(struct spyre_qmp *q, const char *cmd, struct spyre_json **answer, char *err, size_t errlen);

/* The "return" member of an answer spyre_qmp_cmd() parsed, or NULL. */
const struct spyre_json_node *spyre_qmp_return(const struct spyre_json *answer);

/* Close the connection (if any) and free the buffers; @q can be opened again. */
void spyre_qmp_close(struct spyre_qmp *q);

#endif /* SPYRE_UTIL_QMP_H */
