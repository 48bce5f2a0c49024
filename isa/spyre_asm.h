/* SPDX-License-Identifier: MIT */
/*
 * spyre_asm.h - the ISA library's text form of spyre programs
 * (docs/spyre-isa.md §8): a disassembler that prints every field of an image
 * and an assembler that reads that text back into the identical image.
 * tools/spyre-as holds the spyre-as and spyre-objdump programs around them.
 */
#ifndef SPYRE_ASM_H
#define SPYRE_ASM_H

#include <stddef.h>
#include <stdio.h>

#include "spyre_isa.h"

/* One instruction as text (no newline). Unknown or non-canonical encodings print as ".word". */
void spyre_disasm_insn(const union spyre_insn *in, const uint8_t raw[SPYRE_INSN_BYTES], char *buf, size_t len);
/* A whole image; returns 0, or -1 if the container is malformed. */
int spyre_disasm_image(const void *image, size_t size, FILE *out);
/* Read all of @path ("-": stdin), NUL-terminated; *len excludes the NUL. NULL on error (errno). */
char *spyre_read_file(const char *path, size_t *len);
/* Assemble text; *image is malloc'd. Returns 0, or -1 with a message "line N: ..." in err. */
int spyre_asm_text(const char *text, void **image, size_t *size, char *err, size_t errlen);

#endif /* SPYRE_ASM_H */
