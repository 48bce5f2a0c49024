// SPDX-License-Identifier: MIT
/*
 * Description: the three-step launch path's patch logic, on the host: the
 * runtime's container parser and relocation patcher produce byte-identical
 * images to the ISA library's relocation (golden cases, several cores,
 * addends), re-patching only changed slots gives the same image as patching
 * from scratch, both launch paths yield identical effective addresses for
 * the same bindings (absolute operands after patching vs slot-relative
 * operands resolved from the argument block), and malformed containers are
 * refused by the ISA library's check with a detail that names the fault.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_isa.h"
#include "spyre_progbuild.h"
#include "../src/runtime/internal.h"
#include "../../tests/tap.h"

/* 4 cores x 6 DMA instructions over 3 slots with varying offsets. */
static void *build(int abs, size_t *size)
{
	struct spyre_pb *pb = spyre_pb_new();
	void *img = NULL;
	int c, j;

	spyre_pb_set_addressing(pb, abs ? SPYRE_PB_ADDR_RELOC : SPYRE_PB_ADDR_SLOT);
	spyre_pb_sym(pb, "a", SPYRE_DT_FP32, 1, (uint64_t[]){ 4096 }, 16384, SPYRE_SYM_IN);
	spyre_pb_sym(pb, "b", SPYRE_DT_FP16, 1, (uint64_t[]){ 4096 }, 8192, SPYRE_SYM_IN);
	spyre_pb_sym(pb, "c", SPYRE_DT_FP32, 1, (uint64_t[]){ 4096 }, 16384, SPYRE_SYM_OUT);
	for (c = 0; c < 4; c++)
		for (j = 0; j < 6; j++) {
			int sym = (c + j) % 3;

			spyre_pb_dma(pb, c, sym == 2 ? SPYRE_ISA_OP_STORE : SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
				.mem = { .sym = sym, .off = 128ull * (unsigned)(c * 7 + j) }, .row_bytes = 128 });
		}
	if (spyre_pb_finish(pb, &img, size))
		img = NULL;
	spyre_pb_free(pb);
	return img;
}

/* Effective address of every DMA instruction, in core/pc order. */
static size_t effective(const void *img, size_t size, const uint64_t *slots, uint64_t *out)
{
	struct spyre_prog_view v;
	size_t n = 0;
	uint32_t c, pc;

	if (spyre_prog_check_container(img, size, &v))
		return 0;
	for (c = 0; c < v.hdr.num_cores; c++)
		for (pc = 0; pc < v.cores[c].num_insns; pc++) {
			union spyre_insn in;

			spyre_insn_decode(v.image + spyre_prog_insn_off(&v, c, pc), &in);
			if (in.dma.opcode != SPYRE_ISA_OP_LOAD && in.dma.opcode != SPYRE_ISA_OP_STORE)
				continue;
			if (in.dma.flags & SPYRE_IF_SLOT)
				out[n++] = slots[in.dma.mem >> 48] + (in.dma.mem & 0xffffffffffffull);
			else
				out[n++] = in.dma.mem;
		}
	return n;
}

/* What a load reads: the container checked once, then its tables from the checked view. */
struct image {
	uint32_t num_syms, num_cores, num_relocs;
	struct spyre_prog_sym *syms;
	struct spyre_reloc_site *relocs;
};

static int image_parse(const void *image, size_t size, struct image *im)
{
	struct spyre_prog_view v;
	int ret = spyre_image_check(image, size, &v);

	memset(im, 0, sizeof(*im));
	if (ret)
		return ret;
	im->num_syms = v.hdr.num_syms;
	im->num_cores = v.hdr.num_cores;
	im->num_relocs = v.hdr.num_relocs;
	return spyre_image_tables(&v, &im->syms, &im->relocs);
}

static const uint64_t A[3] = { 0x100000, 0x200000, 0x300000 };
static const uint64_t B[3] = { 0x100000, 0x5000000, 0x300000 };	/* only slot 1 moved */
static void *abs_img, *slot_img;	/* the same program with absolute and slot-relative operands */
static size_t sa, ss;
static struct image im;		/* abs_img parsed */
static void *mine, *incr;		/* abs_img patched with A; then re-patched with B */

/* Parse: 3 slots, 24 relocations (every DMA of the absolute image). */
static void test_parse(void)
{
	TAP_CHECK(image_parse(abs_img, sa, &im) == 0, "%s", spyre_last_error());
	TAP_CHECK(im.num_syms == 3 && im.num_relocs == 24 && im.num_cores == 4,
		  "syms %u relocs %u cores %u", im.num_syms, im.num_relocs, im.num_cores);
	TAP_CHECK(!strcmp(im.syms[1].name, "b") && im.syms[1].size == 8192, "slot 1 is %s", im.syms[1].name);
}

/* Golden: byte-identical to the ISA library's relocation (spyre_prog_relocate). */
static void test_golden(void)
{
	void *golden = malloc(sa);
	uint64_t v;

	mine = malloc(sa);
	memcpy(golden, abs_img, sa);
	memcpy(mine, abs_img, sa);
	TAP_CHECK(spyre_prog_relocate(golden, sa, A, 3) == 24, "spyre_prog_relocate failed");
	TAP_CHECK(spyre_patch_apply(mine, im.relocs, im.num_relocs, A, NULL) == 24, "patched count");
	TAP_CHECK(!memcmp(golden, mine, sa), "patched image differs from spyre_prog_relocate's");
	/* A hand-checked site: core 0, pc 0 loads slot 0 at offset 0. */
	TAP_CHECK(im.relocs[0].sym == 0 && im.relocs[0].addend == 0, "first relocation");
	memcpy(&v, (uint8_t *)mine + im.relocs[0].off, 8);
	TAP_CHECK(v == 0x100000, "site 0 holds 0x%llx", (unsigned long long)v);
	free(golden);
}

/* Incremental re-patch equals patching from scratch; only slot 1 sites written. */
static void test_incremental(void)
{
	void *golden = malloc(sa);

	incr = malloc(sa);
	memcpy(incr, mine, sa);
	TAP_CHECK(spyre_patch_apply(incr, im.relocs, im.num_relocs, B, A) == 8,
		  "re-patch should write the 8 sites of slot 1");
	memcpy(golden, abs_img, sa);
	spyre_prog_relocate(golden, sa, B, 3);
	TAP_CHECK(!memcmp(golden, incr, sa), "incremental patch differs");
	TAP_CHECK(spyre_patch_apply(incr, im.relocs, im.num_relocs, B, B) == 0,
		  "unchanged bindings write nothing");
	free(golden);
}

/* Both paths: identical effective addresses for the same bindings. */
static void test_paths_agree(void)
{
	uint64_t ea[64], es[64];
	size_t na, ns, i;

	na = effective(incr, sa, B, ea);
	ns = effective(slot_img, ss, B, es);
	TAP_CHECK(na == 24 && ns == 24, "%zu / %zu DMA instructions", na, ns);
	for (i = 0; i < na && i < ns; i++)
		TAP_CHECK(ea[i] == es[i], "instruction %zu: patched 0x%llx, slot-relative 0x%llx", i,
			  (unsigned long long)ea[i], (unsigned long long)es[i]);
}

/* Refused by the ISA library's container check, the detail naming the fault. */
static void test_malformed(void)
{
	struct spyre_prog_view v;
	struct spyre_prog_reloc r;
	struct spyre_prog_sym s;
	struct image bad;
	uint8_t junk[256];
	uint8_t *img = malloc(sa + 128);

	TAP_CHECK(image_parse(abs_img, sa - 8, &bad) == -EINVAL && strstr(spyre_last_error(), "total_size"),
		  "truncated image refused: %s", spyre_last_error());
	memset(junk, 0, sizeof(junk));
	TAP_CHECK(image_parse(junk, sizeof(junk), &bad) == -EINVAL && strstr(spyre_last_error(), "bad magic"),
		  "zero image refused: %s", spyre_last_error());
	memcpy(img, abs_img, sa);
	memset(img + sa, 0, 128);
	TAP_CHECK(image_parse(img, sa + 128, &bad) == -EINVAL && strstr(spyre_last_error(), "header says"),
		  "trailing bytes refused: %s", spyre_last_error());
	TAP_CHECK(spyre_prog_check_container(img, sa, &v) == 0, "the copy is valid");
	spyre_prog_get_reloc(&v, 3, &r);
	r.sym = 7;
	spyre_prog_reloc_encode(&r, img + v.hdr.reloc_off + 3 * sizeof(r));
	TAP_CHECK(image_parse(img, sa, &bad) == -EINVAL &&
		  strstr(spyre_last_error(), "relocation 3: names a slot past the symbol table"),
		  "relocation to slot 7 refused: %s", spyre_last_error());
	memcpy(img, abs_img, sa);
	spyre_prog_get_sym(&v, 2, &s);
	strcpy(s.name, "a");	/* symbol 0's */
	spyre_prog_sym_encode(&s, img + v.hdr.sym_off + 2 * sizeof(s));
	TAP_CHECK(image_parse(img, sa, &bad) == -EINVAL && strstr(spyre_last_error(), "symbol 2: name used"),
		  "duplicate symbol name refused: %s", spyre_last_error());
	free(img);
}

static const struct tap_case cases[] = {
	{ "parse", test_parse },
	{ "golden", test_golden },
	{ "incremental", test_incremental },
	{ "paths_agree", test_paths_agree },
	{ "malformed", test_malformed },
};

int main(int argc, char **argv)
{
	int ret;

	abs_img = build(1, &sa);
	slot_img = build(0, &ss);
	if (!TAP_CHECK(abs_img && slot_img, "building images failed"))
		tap_bail("no images to patch");
	ret = TAP_RUN(cases, argc, argv);
	free(mine);
	free(incr);
	free(abs_img);
	free(slot_img);
	free(im.syms);
	free(im.relocs);
	return ret;
}
