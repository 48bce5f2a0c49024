// SPDX-License-Identifier: MIT
/*
 * The ISA library's assembler and disassembler (spyre_asm.h). The text names
 * every field, so assemble(disassemble(image)) == image byte for byte for
 * every image the builder lays out (isa/tests/asm-test.c checks it).
 *
 *	.scalars 1
 *	.sym x fp32 flags=0x1 size=4096 shape=32,32
 *	.core 0
 *	load sp=0x0 mem=0x0000000000000000 rows=1 row_bytes=4096 mem_stride=0 sp_stride=0 flags=0x1
 *	relu.fp32.fp32 d=0x1000 a=0x0 b=0x0 rows=32 cols=32 k=0 ldd=1 lda=1 ldb=0 ext=0 flags=0x0
 *	.reloc 0 1 0 0x0
 *	.const 00112233...
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_asm.h"
#include "spyre_isa_codec.h"
#include "spyre_progbuild.h"

static void word(const uint8_t raw[SPYRE_INSN_BYTES], char *buf, size_t len)
{
	size_t o = (size_t)snprintf(buf, len, ".word ");

	for (int i = 0; i < SPYRE_INSN_BYTES && o + 2 < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%02x", raw[i]);
}

void spyre_disasm_insn(const union spyre_insn *in, const uint8_t raw[SPYRE_INSN_BYTES], char *buf, size_t len)
{
	const char *name = spyre_opcode_name(in->raw[0]);
	const struct spyre_insn_tensor *t = &in->t;

	switch (spyre_opclass(in->raw[0])) {
	case SPYRE_CLS_CTL:
	{
		int o;

		if (in->ctl.dtype || in->ctl.dtype2 || in->ctl.reserved)
			break;
		o = snprintf(buf, len, "%s reg=%u imm=0x%" PRIx64 " reg2=%u", name, in->ctl.reg, in->ctl.imm,
			     in->ctl.reg2);
		/* LDX's and BNZ's extra fields, printed when set (older programs read back as they were) */
		if (o > 0 && (size_t)o < len && (in->ctl.flags || in->ctl.bound || in->ctl.scale))
			snprintf(buf + o, len - (size_t)o, " flags=0x%x bound=%u scale=%u", in->ctl.flags,
				 in->ctl.bound, in->ctl.scale);
		return;
	}
	case SPYRE_CLS_DMA:
	{
		/* address registers only when used, so older text reads back unchanged */
		int o = snprintf(buf, len, "%s sp=0x%x mem=0x%016" PRIx64 " rows=%u row_bytes=%u mem_stride=%u sp_stride=%u flags=0x%x",
				 name, in->dma.sp, in->dma.mem, in->dma.rows, in->dma.row_bytes, in->dma.mem_stride,
				 in->dma.sp_stride, in->dma.flags);

		if ((in->dma.rmem || in->dma.rsp) && o > 0 && (size_t)o < len)
			snprintf(buf + o, len - (size_t)o, " rmem=%u rsp=%u", in->dma.rmem, in->dma.rsp);
		return;
	}
	case SPYRE_CLS_RING:
		if (in->ring.dtype || in->ring.dtype2 || in->ring.flags || in->ring.reserved[0] ||
		    in->ring.reserved[1] || in->ring.reserved[2])
			break;
		snprintf(buf, len, "%s sp=0x%x peer=%u tag=%u bytes=%u", name, in->ring.sp, in->ring.peer, in->ring.tag,
			 in->ring.bytes);
		return;
	case SPYRE_CLS_NONE:
		break;
	default:
		if (t->dtype >= SPYRE_DT_COUNT || t->dtype2 >= SPYRE_DT_COUNT)
			break;
		snprintf(buf, len, "%s.%s.%s d=0x%x a=0x%x b=0x%x rows=%u cols=%u k=%u ldd=%u lda=%u ldb=%u ext=%u flags=0x%x",
			 name, spyre_dtype_name(t->dtype), spyre_dtype_name(t->dtype2), t->d, t->a, t->b, t->rows,
			 t->cols, t->k, t->ldd, t->lda, t->ldb, t->ext, t->flags);
		return;
	}
	word(raw, buf, len);
}

int spyre_disasm_image(const void *image, size_t size, FILE *out)
{
	struct spyre_prog_view v;

	if (spyre_prog_check_container(image, size, &v))
		return -1;
	fprintf(out, "# spyre program, format version %u\n", v.hdr.version);
	if (v.hdr.num_scalars)
		fprintf(out, ".scalars %u\n", v.hdr.num_scalars);
	for (uint32_t i = 0; i < v.hdr.num_syms; i++) {
		struct spyre_prog_sym s;

		spyre_prog_get_sym(&v, i, &s);
		fprintf(out, ".sym %s %s flags=0x%x size=%" PRIu64 " shape=", s.name, spyre_dtype_name(s.dtype), s.flags,
			s.size);
		for (int d = 0; d < s.rank; d++)
			fprintf(out, "%s%" PRIu64, d ? "," : "", s.shape[d]);
		fprintf(out, "\n");
	}
	for (uint32_t c = 0; c < v.hdr.num_cores; c++) {
		fprintf(out, ".core %u\n", c);
		for (uint32_t pc = 0; pc < v.cores[c].num_insns; pc++) {
			const uint8_t *raw = v.image + spyre_prog_insn_off(&v, c, pc);
			union spyre_insn in;
			char line[256];

			spyre_insn_decode(raw, &in);
			spyre_disasm_insn(&in, raw, line, sizeof(line));
			fprintf(out, "\t%s\t# %u\n", line, pc);
		}
	}
	for (uint32_t i = 0; i < v.hdr.num_relocs; i++) {
		struct spyre_prog_reloc r;

		spyre_prog_get_reloc(&v, i, &r);
		fprintf(out, ".reloc %u %u %u 0x%" PRIx64 "\n", r.core, r.pc, r.sym, r.addend);
	}
	for (uint32_t o = 0; o < v.hdr.const_size; o += 32) {
		fprintf(out, ".const ");
		for (uint32_t b = 0; b < 32; b++)
			fprintf(out, "%02x", v.image[v.hdr.const_off + o + b]);
		fprintf(out, "\n");
	}
	return 0;
}

/* ---- assembler ---------------------------------------------------------- */

struct asmctx {
	struct spyre_pb *pb;
	int core;
	uint8_t *cst;
	size_t cst_len;
	char *err;
	size_t errlen;
	int line;
	uint32_t nsyms, nrelocs;	/* against the container's limits */
};

static int bad(struct asmctx *a, const char *what, const char *tok)
{
	snprintf(a->err, a->errlen, "line %d: %s%s%s", a->line, what, tok ? ": " : "", tok ? tok : "");
	return -1;
}

/* A count from the text reached the container's limit. */
static int too_many(struct asmctx *a, const char *what, unsigned max)
{
	snprintf(a->err, a->errlen, "line %d: too many %s (a program has at most %u)", a->line, what, max);
	return -1;
}

static int num(const char *s, uint64_t *v)
{
	char *end;

	if (!*s)
		return -1;
	*v = strtoull(s, &end, 0);
	return *end ? -1 : 0;
}

static int dtype_of(const char *s)
{
	for (unsigned d = 0; d < SPYRE_DT_COUNT; d++)
		if (!strcmp(s, spyre_dtype_name(d)))
			return (int)d;
	return -1;
}

static int hexbytes(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		if (!isxdigit((unsigned char)s[2 * i]) || !isxdigit((unsigned char)s[2 * i + 1]) ||
		    sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return s[2 * n] ? -1 : 0;
}

/* key=value fields of one instruction into the class's fields */
static int field(struct asmctx *a, union spyre_insn *in, const char *key, uint64_t v)
{
	enum spyre_opclass cls = spyre_opclass(in->raw[0]);
	static const char *const tk[] = { "d", "a", "b", "rows", "cols", "k", "ldd", "lda", "ldb", "ext" };

	if (!strcmp(key, "flags") && cls != SPYRE_CLS_RING) {
		in->raw[3] = (uint8_t)v;
		return v > 0xff ? -1 : 0;
	}
	switch (cls) {
	case SPYRE_CLS_CTL:
		if (!strcmp(key, "reg"))
			in->ctl.reg = (uint32_t)v;
		else if (!strcmp(key, "imm"))
			in->ctl.imm = v;
		else if (!strcmp(key, "reg2"))
			in->ctl.reg2 = (uint32_t)v;
		else if (!strcmp(key, "bound"))
			in->ctl.bound = (uint32_t)v;
		else if (!strcmp(key, "scale"))
			in->ctl.scale = (uint32_t)v;
		else
			return bad(a, "unknown field", key);
		return v > UINT32_MAX && strcmp(key, "imm") ? -1 : 0;
	case SPYRE_CLS_DMA:
		if (!strcmp(key, "sp"))
			in->dma.sp = (uint32_t)v;
		else if (!strcmp(key, "mem"))
			in->dma.mem = v;
		else if (!strcmp(key, "rows"))
			in->dma.rows = (uint32_t)v;
		else if (!strcmp(key, "row_bytes"))
			in->dma.row_bytes = (uint32_t)v;
		else if (!strcmp(key, "mem_stride"))
			in->dma.mem_stride = (uint32_t)v;
		else if (!strcmp(key, "sp_stride"))
			in->dma.sp_stride = (uint32_t)v;
		else if (!strcmp(key, "rmem") || !strcmp(key, "rsp"))
			in->raw[key[1] == 'm' ? 1 : 2] = (uint8_t)v;
		else
			return bad(a, "unknown field", key);
		if (!strcmp(key, "rmem") || !strcmp(key, "rsp"))
			return v > 0xff ? -1 : 0;
		return v > UINT32_MAX && strcmp(key, "mem") ? -1 : 0;
	case SPYRE_CLS_RING:
		if (!strcmp(key, "sp"))
			in->ring.sp = (uint32_t)v;
		else if (!strcmp(key, "peer"))
			in->ring.peer = (uint32_t)v;
		else if (!strcmp(key, "tag"))
			in->ring.tag = (uint32_t)v;
		else if (!strcmp(key, "bytes"))
			in->ring.bytes = (uint32_t)v;
		else
			return bad(a, "unknown field", key);
		return v > UINT32_MAX ? -1 : 0;
	default:
		for (unsigned i = 0; i < sizeof(tk) / sizeof(tk[0]); i++) {
			if (strcmp(key, tk[i]))
				continue;
			if (i < 4) {
				uint32_t *f[] = { &in->t.d, &in->t.a, &in->t.b, &in->t.rows };

				*f[i] = (uint32_t)v;
				return v > UINT32_MAX ? -1 : 0;
			}
			uint16_t *g[] = { &in->t.cols, &in->t.k, &in->t.ldd, &in->t.lda, &in->t.ldb, &in->t.ext };

			*g[i - 4] = (uint16_t)v;
			return v > 0xffff ? -1 : 0;
		}
		return bad(a, "unknown field", key);
	}
}

static int insn_line(struct asmctx *a, char *s)
{
	union spyre_insn in;
	char *tok = strtok(s, " \t"), *dot;
	int op = -1;

	memset(&in, 0, sizeof(in));
	if (!strcmp(tok, ".word")) {
		uint8_t raw[SPYRE_INSN_BYTES];

		tok = strtok(NULL, " \t");
		if (!tok || hexbytes(tok, raw, SPYRE_INSN_BYTES))
			return bad(a, "bad .word", tok);
		spyre_insn_decode(raw, &in);
		return spyre_pb_emit(a->pb, (unsigned)a->core, &in) < 0 ? bad(a, "emit failed", NULL) : 0;
	}
	dot = strchr(tok, '.');
	if (dot)
		*dot++ = 0;
	for (unsigned o = 0; o < 256; o++)
		if (spyre_opcode_name(o) && !strcmp(spyre_opcode_name(o), tok))
			op = (int)o;
	if (op < 0)
		return bad(a, "unknown mnemonic", tok);
	in.raw[0] = (uint8_t)op;
	if (dot) {
		char *d2 = strchr(dot, '.');

		if (!d2)
			return bad(a, "want mnemonic.dtype.dtype2", dot);
		*d2++ = 0;
		int x = dtype_of(dot), y = dtype_of(d2);

		if (x < 0 || y < 0)
			return bad(a, "unknown dtype", x < 0 ? dot : d2);
		in.raw[1] = (uint8_t)x;
		in.raw[2] = (uint8_t)y;
	}
	while ((tok = strtok(NULL, " \t"))) {
		char *eq = strchr(tok, '=');
		uint64_t v;

		if (!eq)
			return bad(a, "want key=value", tok);
		*eq = 0;
		if (num(eq + 1, &v))
			return bad(a, "bad number", eq + 1);
		if (field(a, &in, tok, v))
			return a->err[0] ? -1 : bad(a, "value out of range", tok);
	}
	return spyre_pb_emit(a->pb, (unsigned)a->core, &in) < 0 ? bad(a, "too many instructions", NULL) : 0;
}

static int directive(struct asmctx *a, char *s)
{
	char *tok = strtok(s, " \t");
	uint64_t v[4];

	if (!strcmp(tok, ".core")) {
		tok = strtok(NULL, " \t");
		if (!tok || num(tok, &v[0]) || v[0] >= SPYRE_MAX_CORES)
			return bad(a, "bad core", tok);
		a->core = (int)v[0];
		spyre_pb_core(a->pb, (unsigned)v[0]);
		return 0;
	}
	if (!strcmp(tok, ".scalars")) {
		tok = strtok(NULL, " \t");
		if (!tok || num(tok, &v[0]) || v[0] > SPYRE_PROG_MAX_SCALARS)
			return bad(a, "bad scalar count", tok);
		spyre_pb_set_scalars(a->pb, (uint32_t)v[0]);
		return 0;
	}
	if (!strcmp(tok, ".reloc")) {
		if (a->nrelocs == SPYRE_PROG_MAX_RELOCS)
			return too_many(a, "relocations", SPYRE_PROG_MAX_RELOCS);
		a->nrelocs++;
		for (int i = 0; i < 4; i++) {
			tok = strtok(NULL, " \t");
			if (!tok || num(tok, &v[i]))
				return bad(a, "want .reloc core pc sym addend", tok);
		}
		return spyre_pb_reloc(a->pb, (unsigned)v[0], (unsigned)v[1], (unsigned)v[2], v[3]) ? bad(a, "reloc", NULL) : 0;
	}
	if (!strcmp(tok, ".const")) {
		tok = strtok(NULL, " \t");
		size_t n = tok ? strlen(tok) / 2 : 0;
		uint8_t *nb = n ? realloc(a->cst, a->cst_len + n) : NULL;

		if (!nb)
			return bad(a, "bad .const", tok);
		a->cst = nb;
		if (hexbytes(tok, a->cst + a->cst_len, n))
			return bad(a, "bad .const hex", tok);
		a->cst_len += n;
		return 0;
	}
	if (!strcmp(tok, ".sym")) {
		char *name = strtok(NULL, " \t"), *dt = strtok(NULL, " \t");
		uint64_t flags = 0, size = 0, shape[SPYRE_SYM_MAX_RANK] = { 0 };
		unsigned rank = 0;

		if (!name || !dt || dtype_of(dt) < 0)
			return bad(a, "want .sym name dtype flags= size= shape=", name);
		if (a->nsyms == SPYRE_PROG_MAX_SYMS)
			return too_many(a, "symbols", SPYRE_PROG_MAX_SYMS);
		if (strlen(name) >= SPYRE_SYM_NAME_LEN)
			return bad(a, "symbol name longer than 31 characters", name);
		a->nsyms++;
		while ((tok = strtok(NULL, " \t"))) {
			if (!strncmp(tok, "flags=", 6) && !num(tok + 6, &flags))
				continue;
			if (!strncmp(tok, "size=", 5) && !num(tok + 5, &size))
				continue;
			if (!strncmp(tok, "shape=", 6)) {
				char *p = tok + 6, *save = NULL;

				for (char *d = strtok_r(p, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
					if (rank >= SPYRE_SYM_MAX_RANK || num(d, &shape[rank]))
						return bad(a, "bad shape", d);
					rank++;
				}
				continue;
			}
			return bad(a, "bad .sym field", tok);
		}
		return spyre_pb_sym(a->pb, name, (unsigned)dtype_of(dt), rank, shape, size, (unsigned)flags) < 0 ?
			bad(a, "bad symbol", name) : 0;
	}
	return bad(a, "unknown directive", tok);
}

int spyre_asm_text(const char *text, void **image, size_t *size, char *err, size_t errlen)
{
	struct asmctx a = { .pb = spyre_pb_new(), .core = 0, .err = err, .errlen = errlen };
	char *copy = strdup(text), *save = NULL;
	int rc = 0;

	*image = NULL;
	*size = 0;
	if (errlen)
		err[0] = 0;
	if (!a.pb || !copy) {
		rc = -1;
		goto out;
	}
	/* strtok_r on lines, strtok inside a line */
	for (char *l = copy, *nl; l && !rc; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = 0;
		a.line++;
		char *hash = strchr(l, '#');

		if (hash)
			*hash = 0;
		while (isspace((unsigned char)*l))
			l++;
		if (!*l)
			continue;
		rc = l[0] == '.' && strncmp(l, ".word", 5) ? directive(&a, l) : insn_line(&a, l);
	}
	(void)save;
	if (!rc && a.cst_len && spyre_pb_const(a.pb, a.cst, a.cst_len) < 0)
		rc = bad(&a, "constant data", NULL);
	if (!rc && spyre_pb_finish(a.pb, image, size))
		rc = bad(&a, "cannot lay out the image (limits exceeded?)", NULL);
out:
	free(copy);
	free(a.cst);
	spyre_pb_free(a.pb);
	return rc;
}

char *spyre_read_file(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	char *buf = NULL, *n;
	size_t r;

	*len = 0;
	if (!f)
		return NULL;
	for (;;) {
		n = realloc(buf, *len + 65537);
		if (!n) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = n;
		r = fread(buf + *len, 1, 65536, f);
		*len += r;
		if (r < 65536) {
			buf[*len] = 0;
			break;
		}
	}
	if (f != stdin)
		fclose(f);
	return buf;
}
