// SPDX-License-Identifier: MIT
/*
 * Description: the text assembler and disassembler round-trip exactly: a
 * program using every opcode, every encoding class, symbols, scalars,
 * relocations, constant data, an empty core stream and a non-canonical
 * instruction (.word) is disassembled, assembled again and must give the
 * identical bytes (and the identical text a second time); the same through
 * the build/bin/spyre-objdump and spyre-as programs; assembler errors name
 * the line; LOAD/STORE address registers (rmem/rsp) and ARGMAX (plain and
 * INDEX) assemble to their fields and round-trip.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "spyre_asm.h"
#include "spyre_progbuild.h"
#include "../../tests/tap.h"

static char *disasm(const void *img, size_t sz)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f || spyre_disasm_image(img, sz, f)) {
		if (f)
			fclose(f);
		free(text);
		return NULL;
	}
	fclose(f);
	return text;
}

/* The image every case works on, and its disassembly. */
static void *img;
static size_t sz;
static char *t1;

/* A program using every opcode and encoding class, symbols, scalars, relocations, constants. */
static void test_builder(void)
{
	struct spyre_pb *pb = spyre_pb_new();
	uint8_t cdata[200];
	union spyre_insn odd;
	int rc;

	for (int i = 0; i < 200; i++)
		cdata[i] = (uint8_t)(i * 13);
	spyre_pb_sym(pb, "x", SPYRE_DT_DL16, 2, (uint64_t[]){ 3, 70 }, 3 * 256, SPYRE_SYM_IN);
	spyre_pb_sym(pb, "y.out", SPYRE_DT_INT32, 0, NULL, 4096, SPYRE_SYM_OUT);
	spyre_pb_set_scalars(pb, 3);
	spyre_pb_const(pb, cdata, sizeof(cdata));
	for (unsigned op = 0; op < 256; op++) {
		const char *n = spyre_opcode_name(op);

		if (!n)
			continue;
		union spyre_insn in;

		memset(&in, 0, sizeof(in));
		in.raw[0] = (uint8_t)op;
		for (int b = 1; b < SPYRE_INSN_BYTES; b++)
			in.raw[b] = (uint8_t)(op * 31 + b * 7);
		in.raw[1] %= SPYRE_DT_COUNT;
		in.raw[2] %= SPYRE_DT_COUNT;
		union spyre_insn d;

		/* decode the pseudo-random bytes as this class, then zero reserved fields */
		spyre_insn_decode(in.raw, &d);
		if (op < 0x10) {
			d.ctl.dtype = d.ctl.dtype2 = d.ctl.flags = 0;
			d.ctl.reserved = 0;
		} else if (op < 0x20) {
			d.dma.rmem = d.dma.rsp = 0;
		} else if (op >= 0x60) {
			d.ring.dtype = d.ring.dtype2 = d.ring.flags = 0;
			memset(d.ring.reserved, 0, sizeof(d.ring.reserved));
		}
		spyre_pb_emit(pb, op % 3, &d);
	}
	memset(&odd, 0, sizeof(odd));
	odd.raw[0] = 0xee;
	odd.raw[31] = 0x42;
	spyre_pb_emit(pb, 1, &odd);
	spyre_pb_set_addressing(pb, SPYRE_PB_ADDR_RELOC);
	spyre_pb_dma(pb, 2, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .mem = { .sym = 1, .off = 0x80 }, .row_bytes = 128 });
	spyre_pb_core(pb, 4);	/* cores 3 and 4 empty */
	rc = spyre_pb_finish(pb, &img, &sz);
	TAP_CHECK(rc == 0, "builder lays out a %zu-byte image", sz);
	spyre_pb_free(pb);
}

static void test_round_trip(void)
{
	char err[256], *t2;
	void *img2 = NULL;
	size_t sz2;
	int rc;

	if (!img) {
		tap_skip("no image: the builder failed");
		return;
	}
	t1 = disasm(img, sz);
	TAP_CHECK(t1 != NULL, "disassembles");
	rc = t1 ? spyre_asm_text(t1, &img2, &sz2, err, sizeof(err)) : -1;
	TAP_CHECK(rc == 0, "assembles its own disassembly %s", rc ? err : "");
	TAP_CHECK(rc == 0 && sz2 == sz && !memcmp(img, img2, sz),
		  "assemble(disassemble(image)) == image (%zu bytes)", sz2);
	t2 = rc == 0 ? disasm(img2, sz2) : NULL;
	TAP_CHECK(t2 && !strcmp(t1, t2), "disassembly is stable");
	TAP_CHECK(t1 && strstr(t1, ".word ee000000") && strstr(t1, "matmul.") && strstr(t1, ".reloc 2 ") &&
		  strstr(t1, ".sym y.out int32"),
		  "text names opcodes, dtypes, symbols, relocations and raw words");
	if (!rc)
		free(img2);
	free(t2);
}

/* The command-line tools, next to this test: build/tests/.. -> build/bin */
static void test_command_line_tools(void)
{
	char self[PATH_MAX], cmd[3 * PATH_MAX + 64], bin[PATH_MAX + 16], s1[] = "/tmp/spyre-asm-test-XXXXXX";
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	FILE *f;
	int fd;

	if (n <= 0 || !img) {
		tap_skip("%s", !img ? "no image: the builder failed" : "cannot find this program's directory");
		return;
	}
	self[n] = 0;
	*strrchr(self, '/') = 0;
	fd = mkstemp(s1);
	f = fdopen(fd, "wb");
	fwrite(img, 1, sz, f);
	fclose(f);
	snprintf(bin, sizeof(bin), "%s/../bin", self);
	snprintf(cmd, sizeof(cmd), "%s/spyre-objdump %s > %s.s && %s/spyre-as %s.s -o %s.2 && cmp -s %s %s.2",
		 bin, s1, s1, bin, s1, s1, s1, s1);
	TAP_CHECK(system(cmd) == 0, "spyre-objdump | spyre-as reproduces the file");
	snprintf(cmd, sizeof(cmd), "rm -f %s %s.s %s.2", s1, s1, s1);
	if (system(cmd))
		tap_diag("could not remove %s*", s1);
}

static void test_errors(void)
{
	char err[256];
	void *img2;
	size_t sz2;

	TAP_CHECK(spyre_asm_text(".core 0\nnop\nfrob x=1\n", &img2, &sz2, err, sizeof(err)) == -1 &&
		  !strncmp(err, "line 3: unknown mnemonic", 24),
		  "unknown mnemonic reported with its line (%s)", err);
	TAP_CHECK(spyre_asm_text("matmul.fp32.fp32 cols=70000\n", &img2, &sz2, err, sizeof(err)) == -1,
		  "out-of-range field rejected (%s)", err);
	TAP_CHECK(spyre_asm_text("add.fp32 d=0\n", &img2, &sz2, err, sizeof(err)) == -1,
		  "missing dtype2 rejected (%s)", err);
}

/* A hand-written program assembles, validates and means what it says. */
static void test_hand_written(void)
{
	const char *src = ".sym x fp32 flags=0x3 size=128 shape=32\n.core 0\n"
			  "load sp=0 mem=0 rows=1 row_bytes=128 mem_stride=0 sp_stride=0 flags=1\n"
			  "relu.fp32.fp32 d=0 a=0 rows=1 cols=32 ldd=1 lda=1\n"
			  "store sp=0 mem=0 rows=1 row_bytes=128 flags=1\n";
	char err[256] = "";
	uint32_t c, p;
	void *img2;
	size_t sz2;
	int rc;

	rc = spyre_asm_text(src, &img2, &sz2, err, sizeof(err));
	TAP_CHECK(rc == 0 && spyre_prog_validate(img2, sz2, 2u << 20, &c, &p) == 0,
		  "hand-written program validates %s", err);
	if (!rc)
		free(img2);
}

/* Address registers (rmem/rsp, bytes 1 and 2 of LOAD/STORE) and ARGMAX, both forms, round-trip. */
static void test_registers_and_argmax(void)
{
	const char *src = ".scalars 2\n.sym x fp16 flags=0x3 size=4096 shape=2048\n.core 0\n"
			  "ldarg reg=3 imm=0x0 reg2=0\n"
			  "ldarg reg=4 imm=0x1 reg2=0\n"
			  "load sp=0x0 mem=0x0000000000000000 rows=2 row_bytes=128 mem_stride=128 sp_stride=128 "
			  "flags=0x61 rmem=3 rsp=4\n"
			  "argmax.fp16.int32 d=0x1000 a=0x0 rows=2 cols=64 lda=1\n"
			  "argmax.fp16.int32 d=0x1080 a=0x0 b=0x800 rows=2 cols=64 lda=1 ldb=2 flags=0x80\n"
			  "store sp=0x1000 mem=0x0000000000000000 rows=1 row_bytes=128 flags=0x21 rmem=3\n";
	char err[256] = "", *t = NULL, *t2 = NULL;
	void *a = NULL, *b = NULL;
	size_t sa, sb;
	struct spyre_prog_view v;
	union spyre_insn ld, am, ai;
	uint32_t c, p;

	if (!TAP_CHECK(spyre_asm_text(src, &a, &sa, err, sizeof(err)) == 0, "assembles: %s", err))
		return;
	TAP_CHECK(spyre_prog_validate(a, sa, 2u << 20, &c, &p) == 0, "validates (core %d pc %d)", (int)c, (int)p);
	TAP_CHECK(spyre_prog_check_container(a, sa, &v) == 0 && v.cores[0].num_insns == 6, "six instructions");
	spyre_insn_decode(v.image + spyre_prog_insn_off(&v, 0, 2), &ld);
	spyre_insn_decode(v.image + spyre_prog_insn_off(&v, 0, 3), &am);
	spyre_insn_decode(v.image + spyre_prog_insn_off(&v, 0, 4), &ai);
	TAP_CHECK(ld.dma.opcode == SPYRE_ISA_OP_LOAD && ld.dma.rmem == 3 && ld.dma.rsp == 4 &&
		  ld.dma.flags == (SPYRE_IF_SLOT | SPYRE_IF_RMEM | SPYRE_IF_RSP),
		  "load: rmem %u rsp %u flags 0x%x in bytes 1..3", ld.dma.rmem, ld.dma.rsp, ld.dma.flags);
	TAP_CHECK(am.t.opcode == SPYRE_ISA_OP_ARGMAX && am.t.dtype == SPYRE_DT_FP16 && am.t.dtype2 == SPYRE_DT_INT32 &&
		  !am.t.flags && ai.t.flags == SPYRE_IF_INDEX && ai.t.b == 0x800 && ai.t.ldb == 2,
		  "argmax.fp16.int32, plain and with INDEX");
	t = disasm(a, sa);
	TAP_CHECK(t && strstr(t, "flags=0x61 rmem=3 rsp=4") && strstr(t, "flags=0x21 rmem=3 rsp=0") &&
		  strstr(t, "argmax.fp16.int32 d=0x1080 a=0x0 b=0x800"), "disassembly names the registers and argmax");
	TAP_CHECK(t && spyre_asm_text(t, &b, &sb, err, sizeof(err)) == 0 && sb == sa && !memcmp(a, b, sa),
		  "assemble(disassemble(image)) == image %s", err);
	t2 = b ? disasm(b, sb) : NULL;
	TAP_CHECK(t && t2 && !strcmp(t, t2), "disassembly is stable");
	free(t);
	free(t2);
	free(a);
	free(b);
}

static const struct tap_case cases[] = {
	{ "builder", test_builder },
	{ "round_trip", test_round_trip },
	{ "command_line_tools", test_command_line_tools },
	{ "errors", test_errors },
	{ "hand_written", test_hand_written },
	{ "registers_and_argmax", test_registers_and_argmax },
};

int main(int argc, char **argv)
{
	int ret = TAP_RUN(cases, argc, argv);

	free(t1);
	free(img);
	return ret;
}
