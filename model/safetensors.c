// SPDX-License-Identifier: MIT
/*
 * safetensors.c - the safetensors reader and writer (safetensors.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errf.h"
#include "json.h"
#include "safetensors.h"
#include "spyre_dtype.h"

struct spyre_st {
	struct spyre_json *doc;		/* names and metadata point into it */
	const struct spyre_json_node *meta;
	struct spyre_st_tensor *t;
	size_t n;
	const struct spyre_st_tensor **sorted;	/* t by name */
	void *map;			/* spyre_st_open: the mapping */
	size_t maplen;
};

/* A name fit for a message: at most 80 bytes, control characters as '?'. */
static const char *shown(const char *name, char *buf, size_t len)
{
	size_t n = strlen(name);

	snprintf(buf, len, "%.*s%s", n > 80 ? 80 : (int)n, name, n > 80 ? "..." : "");
	for (char *c = buf; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return buf;
}

static void fmt_shape(char *buf, size_t len, uint32_t rank, const uint64_t *shape)
{
	size_t o = 0;

	o += (size_t)snprintf(buf + o, len - o, "[");
	for (uint32_t i = 0; i < rank && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%llu", i ? "," : "", (unsigned long long)shape[i]);
	if (o < len)
		snprintf(buf + o, len - o, "]");
}

const char *spyre_st_dtype_name(enum spyre_st_dtype dtype)
{
	switch (dtype) {
	case SPYRE_ST_F32: return "F32";
	case SPYRE_ST_F16: return "F16";
	case SPYRE_ST_BF16: return "BF16";
	case SPYRE_ST_I64: return "I64";
	}
	return "?";
}

unsigned int spyre_st_dtype_size(enum spyre_st_dtype dtype)
{
	return dtype == SPYRE_ST_I64 ? 8u : dtype == SPYRE_ST_F32 ? 4u : 2u;
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(const struct spyre_st_tensor *const *)a)->name,
		      (*(const struct spyre_st_tensor *const *)b)->name);
}

static int parse_tensor(struct spyre_st_tensor *t, const char *name, const struct spyre_json_node *v,
			uint64_t data_len, char *err, size_t errlen)
{
	const struct spyre_json_node *dt, *shape, *offs;
	char nm[96], sh[200];
	const char *key, *s;
	uint64_t size;

	shown(name, nm, sizeof(nm));
	if (spyre_json_type(v) != SPYRE_JSON_OBJECT)
		return errf(err, errlen, "tensor '%s': expected an object, found %s", nm,
			    spyre_json_type_name(spyre_json_type(v)));
	for (size_t i = 0; spyre_json_at(v, i, &key); i++)
		if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets")) {
			char k[96];

			return errf(err, errlen, "tensor '%s': unknown field '%s'", nm, shown(key, k, sizeof(k)));
		}
	dt = spyre_json_get(v, "dtype");
	shape = spyre_json_get(v, "shape");
	offs = spyre_json_get(v, "data_offsets");
	if (!dt || !shape || !offs)
		return errf(err, errlen, "tensor '%s': missing field '%s'", nm,
			    !dt ? "dtype" : !shape ? "shape" : "data_offsets");
	s = spyre_json_string(dt, NULL);
	if (!s)
		return errf(err, errlen, "tensor '%s': dtype must be a string, not %s", nm,
			    spyre_json_type_name(spyre_json_type(dt)));
	if (!strcmp(s, "F32")) {
		t->dtype = SPYRE_ST_F32;
	} else if (!strcmp(s, "F16")) {
		t->dtype = SPYRE_ST_F16;
	} else if (!strcmp(s, "BF16")) {
		t->dtype = SPYRE_ST_BF16;
	} else if (!strcmp(s, "I64")) {
		t->dtype = SPYRE_ST_I64;
	} else {
		char d[96];

		return errf(err, errlen, "tensor '%s' has dtype '%s', not one of F32, F16, BF16, I64", nm,
			    shown(s, d, sizeof(d)));
	}
	if (spyre_json_type(shape) != SPYRE_JSON_ARRAY)
		return errf(err, errlen, "tensor '%s': shape must be an array, not %s", nm,
			    spyre_json_type_name(spyre_json_type(shape)));
	if (spyre_json_count(shape) > SPYRE_ST_MAX_RANK)
		return errf(err, errlen, "tensor '%s': rank %zu is more than %d", nm, spyre_json_count(shape),
			    SPYRE_ST_MAX_RANK);
	t->rank = (uint32_t)spyre_json_count(shape);
	t->nelem = 1;
	for (uint32_t i = 0; i < t->rank; i++) {
		if (spyre_json_u64(spyre_json_at(shape, i, NULL), &t->shape[i]))
			return errf(err, errlen, "tensor '%s': shape[%u] is not a non-negative integer", nm, i);
	}
	for (uint32_t i = 0; i < t->rank; i++) {
		if (t->shape[i] && t->nelem > UINT64_MAX / t->shape[i]) {
			fmt_shape(sh, sizeof(sh), t->rank, t->shape);
			return errf(err, errlen, "tensor '%s': shape %s has too many elements", nm, sh);
		}
		t->nelem *= t->shape[i];
	}
	if (spyre_json_type(offs) != SPYRE_JSON_ARRAY || spyre_json_count(offs) != 2 ||
	    spyre_json_u64(spyre_json_at(offs, 0, NULL), &t->begin) ||
	    spyre_json_u64(spyre_json_at(offs, 1, NULL), &t->end))
		return errf(err, errlen, "tensor '%s': data_offsets must be two non-negative integers", nm);
	if (t->begin > t->end)
		return errf(err, errlen, "tensor '%s': data_offsets [%llu, %llu] end before they begin", nm,
			    (unsigned long long)t->begin, (unsigned long long)t->end);
	if (t->end > data_len)
		return errf(err, errlen, "tensor '%s': data_offsets [%llu, %llu] run past the data area "
			    "(%llu bytes)", nm, (unsigned long long)t->begin, (unsigned long long)t->end,
			    (unsigned long long)data_len);
	fmt_shape(sh, sizeof(sh), t->rank, t->shape);
	if (t->nelem > UINT64_MAX / spyre_st_dtype_size(t->dtype))
		return errf(err, errlen, "tensor '%s': shape %s of %s needs more than 2^64 bytes", nm, sh, s);
	size = t->nelem * spyre_st_dtype_size(t->dtype);
	if (size != t->end - t->begin)
		return errf(err, errlen, "tensor '%s': shape %s of %s needs %llu bytes, data_offsets "
			    "[%llu, %llu] hold %llu", nm, sh, s, (unsigned long long)size,
			    (unsigned long long)t->begin, (unsigned long long)t->end,
			    (unsigned long long)(t->end - t->begin));
	t->name = name;
	return 0;
}

int spyre_st_open_mem(const void *buf, size_t len, struct spyre_st **out, char *err, size_t errlen)
{
	const unsigned char *p = buf;
	struct spyre_st *st;
	const struct spyre_json_node *root;
	uint64_t hlen = 0, data_len;
	char jerr[256];
	const char *key;

	*out = NULL;
	if (err && errlen)
		err[0] = 0;
	if (len < 8 || !buf)
		return errf(err, errlen, "file is %zu bytes, shorter than the 8-byte header length", len);
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | p[i];
	if (hlen > SPYRE_ST_MAX_HEADER)
		return errf(err, errlen, "header length %llu is more than the limit %u (100 MiB)",
			    (unsigned long long)hlen, SPYRE_ST_MAX_HEADER);
	if (hlen > len - 8)
		return errf(err, errlen, "header length %llu runs past the end of the file (%zu bytes)",
			    (unsigned long long)hlen, len);
	data_len = len - 8 - hlen;
	st = calloc(1, sizeof(*st));
	if (!st)
		return errf(err, errlen, "out of memory");
	if (spyre_json_parse((const char *)p + 8, (size_t)hlen, &st->doc, jerr, sizeof(jerr))) {
		errf(err, errlen, "header is not valid JSON: %s (of the header)", jerr);
		goto bad;
	}
	root = spyre_json_root(st->doc);
	if (spyre_json_type(root) != SPYRE_JSON_OBJECT) {
		errf(err, errlen, "header is not a JSON object but %s",
		     spyre_json_type_name(spyre_json_type(root)));
		goto bad;
	}
	st->t = calloc(spyre_json_count(root) + 1, sizeof(*st->t));
	st->sorted = calloc(spyre_json_count(root) + 1, sizeof(*st->sorted));
	if (!st->t || !st->sorted) {
		errf(err, errlen, "out of memory");
		goto bad;
	}
	for (size_t i = 0; i < spyre_json_count(root); i++) {
		const struct spyre_json_node *v = spyre_json_at(root, i, &key);
		size_t klen;

		if (!strcmp(key, "__metadata__")) {
			if (spyre_json_type(v) != SPYRE_JSON_OBJECT) {
				errf(err, errlen, "__metadata__ must be an object of strings, not %s",
				     spyre_json_type_name(spyre_json_type(v)));
				goto bad;
			}
			for (size_t j = 0; j < spyre_json_count(v); j++)
				if (spyre_json_type(spyre_json_at(v, j, NULL)) != SPYRE_JSON_STRING) {
					errf(err, errlen, "__metadata__ must be an object of strings");
					goto bad;
				}
			st->meta = v;
			continue;
		}
		/* "\u0000" in a name would make it look shorter: refuse it */
		spyre_json_key(v, &klen);
		if (klen != strlen(key)) {
			char nm[96];

			errf(err, errlen, "tensor name '%s...' holds a NUL", shown(key, nm, sizeof(nm)));
			goto bad;
		}
		if (parse_tensor(&st->t[st->n], key, v, data_len, err, errlen))
			goto bad;
		st->t[st->n].data = p + 8 + hlen + st->t[st->n].begin;
		st->sorted[st->n] = &st->t[st->n];
		st->n++;
	}
	qsort(st->sorted, st->n, sizeof(*st->sorted), by_name);
	*out = st;
	return 0;
bad:
	spyre_st_close(st);
	return -1;
}

int spyre_st_open(const char *path, struct spyre_st **out, char *err, size_t errlen)
{
	char msg[512];
	struct stat sb;
	void *map;
	int fd;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errf(err, errlen, "%s: %s", path, strerror(errno));
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		close(fd);
		return errf(err, errlen, "%s: not a regular file", path);
	}
	if (sb.st_size < 8) {
		close(fd);
		return errf(err, errlen, "%s: file is %lld bytes, shorter than the 8-byte header length", path,
			    (long long)sb.st_size);
	}
	if ((uint64_t)sb.st_size > SIZE_MAX) {
		close(fd);
		return errf(err, errlen, "%s: too large to map", path);
	}
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return errf(err, errlen, "%s: mmap: %s", path, strerror(errno));
	if (spyre_st_open_mem(map, (size_t)sb.st_size, out, msg, sizeof(msg))) {
		munmap(map, (size_t)sb.st_size);
		return errf(err, errlen, "%s: %s", path, msg);
	}
	(*out)->map = map;
	(*out)->maplen = (size_t)sb.st_size;
	return 0;
}

void spyre_st_close(struct spyre_st *st)
{
	if (!st)
		return;
	spyre_json_free(st->doc);
	free(st->t);
	free(st->sorted);
	if (st->map)
		munmap(st->map, st->maplen);
	free(st);
}

size_t spyre_st_count(const struct spyre_st *st)
{
	return st ? st->n : 0;
}

const struct spyre_st_tensor *spyre_st_tensor_at(const struct spyre_st *st, size_t i)
{
	return st && i < st->n ? &st->t[i] : NULL;
}

const struct spyre_st_tensor *spyre_st_find(const struct spyre_st *st, const char *name)
{
	size_t lo = 0, hi;

	if (!st || !name)
		return NULL;
	hi = st->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(st->sorted[mid]->name, name);

		if (!c)
			return st->sorted[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const char *spyre_st_metadata(const struct spyre_st *st, const char *key)
{
	return st ? spyre_json_string(spyre_json_get(st->meta, key), NULL) : NULL;
}

int spyre_st_read_f32(const struct spyre_st *st, const char *name, uint32_t expected_rank,
		      const uint64_t *expected_shape, float *out, char *err, size_t errlen)
{
	const struct spyre_st_tensor *t = spyre_st_find(st, name);
	char nm[96], have[200], want[200];
	int same;

	if (!t)
		return errf(err, errlen, "tensor '%s' not found", shown(name, nm, sizeof(nm)));
	same = t->rank == expected_rank;
	for (uint32_t i = 0; same && i < expected_rank; i++)
		same = t->shape[i] == expected_shape[i];
	if (!same) {
		fmt_shape(have, sizeof(have), t->rank, t->shape);
		fmt_shape(want, sizeof(want), expected_rank > SPYRE_ST_MAX_RANK ? SPYRE_ST_MAX_RANK : expected_rank,
			  expected_shape);
		return errf(err, errlen, "tensor '%s' has shape %s, expected %s", shown(name, nm, sizeof(nm)),
			    have, want);
	}
	if (t->dtype == SPYRE_ST_I64)
		return errf(err, errlen, "tensor '%s' has dtype 'I64', not a float (F32, F16, BF16)",
			    shown(name, nm, sizeof(nm)));
	const unsigned char *d = t->data;

	switch (t->dtype) {
	case SPYRE_ST_F32:
		for (uint64_t i = 0; i < t->nelem; i++, d += 4) {
			uint32_t u = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;

			memcpy(&out[i], &u, sizeof(u));
		}
		break;
	case SPYRE_ST_F16:
		for (uint64_t i = 0; i < t->nelem; i++, d += 2)
			out[i] = spyre_f16_to_f32((uint16_t)(d[0] | d[1] << 8));
		break;
	case SPYRE_ST_BF16:
		for (uint64_t i = 0; i < t->nelem; i++, d += 2)
			out[i] = spyre_bf16_to_f32((uint16_t)(d[0] | d[1] << 8));
		break;
	case SPYRE_ST_I64:
		break;
	}
	return 0;
}

/* ---- writer ---- */

struct sbuf {
	char *p;
	size_t n, cap;
	int oom;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		char *np;

		while (cap < b->n + n + 1)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_put(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static void sb_json_string(struct sbuf *b, const char *s)
{
	sb_put(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };

			sb_put(b, e, 2);
		} else if (c < 0x20) {
			sb_printf(b, "\\u%04x", c);
		} else {
			sb_put(b, (const char *)&c, 1);
		}
	}
	sb_put(b, "\"", 1);
}

static int write_all(FILE *f, const void *p, size_t n)
{
	return fwrite(p, 1, n, f) == n ? 0 : -1;
}

static int write_tensor(FILE *f, const struct spyre_st_out *t, uint64_t nelem)
{
	unsigned char buf[4096];
	size_t fill = 0;
	unsigned int esz = spyre_st_dtype_size(t->dtype);

	if (t->raw)
		return nelem ? write_all(f, t->raw, (size_t)(nelem * esz)) : 0;
	for (uint64_t i = 0; i < nelem; i++) {
		uint32_t u;

		switch (t->dtype) {
		case SPYRE_ST_F32:
			memcpy(&u, &t->f32[i], sizeof(u));
			break;
		case SPYRE_ST_F16:
			u = spyre_f32_to_f16(t->f32[i]);
			break;
		default:
			u = spyre_f32_to_bf16(t->f32[i]);
			break;
		}
		for (unsigned int k = 0; k < esz; k++)
			buf[fill++] = (unsigned char)(u >> (8 * k));
		if (fill + 4 > sizeof(buf)) {
			if (write_all(f, buf, fill))
				return -1;
			fill = 0;
		}
	}
	return fill ? write_all(f, buf, fill) : 0;
}

int spyre_st_write(const char *path, const struct spyre_st_out *t, size_t n, char *err, size_t errlen)
{
	struct sbuf h = { 0 };
	uint64_t off = 0, *nelem;
	unsigned char len8[8];
	char tmp[4096], nm[96];
	FILE *f = NULL;
	int rc = -1, created = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return errf(err, errlen, "%s: path too long", path);
	nelem = calloc(n + 1, sizeof(*nelem));
	if (!nelem)
		return errf(err, errlen, "out of memory");
	sb_put(&h, "{\"__metadata__\":{\"format\":\"pt\"}", strlen("{\"__metadata__\":{\"format\":\"pt\"}"));
	for (size_t i = 0; i < n; i++) {
		uint64_t bytes;

		if (!t[i].name || !strcmp(t[i].name, "__metadata__") || t[i].rank > SPYRE_ST_MAX_RANK ||
		    (t[i].dtype != SPYRE_ST_F32 && t[i].dtype != SPYRE_ST_F16 && t[i].dtype != SPYRE_ST_BF16) ||
		    (!t[i].f32 == !t[i].raw)) {
			errf(err, errlen, "%s: tensor %zu ('%s'): invalid name, rank, dtype or data", path, i,
			     t[i].name ? shown(t[i].name, nm, sizeof(nm)) : "(null)");
			goto out;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(t[i].name, t[j].name)) {
				errf(err, errlen, "%s: tensor '%s' is given twice", path,
				     shown(t[i].name, nm, sizeof(nm)));
				goto out;
			}
		nelem[i] = 1;
		for (uint32_t d = 0; d < t[i].rank; d++) {
			if (t[i].shape[d] && nelem[i] > UINT64_MAX / 4 / t[i].shape[d]) {
				errf(err, errlen, "%s: tensor '%s' is too large", path, shown(t[i].name, nm, sizeof(nm)));
				goto out;
			}
			nelem[i] *= t[i].shape[d];
		}
		bytes = nelem[i] * spyre_st_dtype_size(t[i].dtype);
		if (bytes > SIZE_MAX || off > UINT64_MAX - bytes) {
			errf(err, errlen, "%s: tensor '%s' is too large", path, shown(t[i].name, nm, sizeof(nm)));
			goto out;
		}
		sb_put(&h, ",", 1);
		sb_json_string(&h, t[i].name);
		sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", spyre_st_dtype_name(t[i].dtype));
		for (uint32_t d = 0; d < t[i].rank; d++)
			sb_printf(&h, "%s%llu", d ? "," : "", (unsigned long long)t[i].shape[d]);
		sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
			  (unsigned long long)(off + bytes));
		off += bytes;
	}
	sb_put(&h, "}", 1);
	while ((8 + h.n) % 8)
		sb_put(&h, " ", 1);
	if (h.oom) {
		errf(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
	f = fopen(tmp, "wb");
	if (!f) {
		errf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	created = 1;
	if (write_all(f, len8, 8) || write_all(f, h.p, h.n)) {
		errf(err, errlen, "%s: write error", tmp);
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (write_tensor(f, &t[i], nelem[i])) {
			errf(err, errlen, "%s: write error", tmp);
			goto out;
		}
	if (fclose(f)) {
		f = NULL;
		errf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	f = NULL;
	if (rename(tmp, path)) {
		errf(err, errlen, "%s: rename: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (f)
		fclose(f);
	if (rc && created)
		remove(tmp);
	free(nelem);
	free(h.p);
	return rc;
}
