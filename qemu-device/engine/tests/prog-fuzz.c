// SPDX-License-Identifier: MIT
/*
 * libFuzzer target (make fuzz): arbitrary bytes as a program image go
 * through the validator, the disassembler (and the assembler on its output,
 * which must reproduce the image whenever the input was laid out the
 * builder's way) and the engine itself (4 cores, 64 KiB scratchpads, a 4096
 * instruction budget, flat memory holding the image and a 1 MiB buffer that
 * every slot points at; even scalars are small counts, odd ones stick-aligned
 * offsets for the address registers). Any crash, sanitizer report or hang is
 * a bug. Each input also runs on an engine with 2 host threads and on one
 * whose memory has no probe (LOADs' bytes moved at their completion): the
 * launch results, memory and scratchpads must equal the first's, byte for
 * byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flatmem.h"
#include "spyre_asm.h"
#include "spyre_engine.h"
#include "spyre_isa_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NENG 3

/* Run the input on engine e with memory m; the memory is laid out the same way every time. */
static void run_one(struct spyre_engine *e, struct flatmem *m, const uint8_t *data, size_t size,
		    struct spyre_launch_result *r)
{
	/* image at 0x10000, every slot -> a 1 MiB buffer, scalars small (loop counts, offsets) */
	m->next = 0;
	uint64_t prog = flatmem_alloc(m, size ? size : 1);
	uint64_t args = flatmem_alloc(m, 8 * 512);
	uint64_t buf = flatmem_alloc(m, 1u << 20);

	memcpy(flatmem_ptr(m, prog), data, size);
	for (int i = 0; i < 512; i++) {
		uint64_t v = i < 256 ? buf : (uint64_t)(i & 7) * (i & 1 ? SPYRE_STICK_BYTES : 1);

		memcpy((uint8_t *)flatmem_ptr(m, args) + 8 * i, &v, 8);
	}
	spyre_engine_launch(e, prog, args, 0xf, m->eager ? &flatmem_eager_ops : &flatmem_ops, m, r);
	if (r->status >= SPYRE_ENGINE_FAULT_COUNT)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* 1 host thread; 2 host threads; 1, LOADs eager */
	static struct spyre_engine *e[NENG];
	static struct flatmem m[NENG];
	struct spyre_launch_result r[NENG];
	uint32_t core, pc;

	if (!e[0]) {
		struct spyre_engine_config cfg;

		spyre_engine_config_default(&cfg);
		cfg.cores = 4;
		cfg.scratchpad_bytes = 64 << 10;
		cfg.insn_budget = 4096;
		for (int i = 0; i < NENG; i++) {
			cfg.threads = i == 1 ? 2 : 1;
			e[i] = spyre_engine_new(&cfg);
			if (!e[i] || flatmem_init(&m[i], 0x10000, 4u << 20))
				abort();
			m[i].eager = i == 2;
		}
	}
	if (size > (2u << 20))
		return 0;
	(void)spyre_prog_validate(data, size, 64 << 10, &core, &pc);

	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (f && spyre_disasm_image(data, size, f) == 0) {
		void *img;
		size_t isz;
		char err[128];

		fclose(f);
		if (spyre_asm_text(text, &img, &isz, err, sizeof(err)) == 0) {
			char *t2 = NULL;
			size_t l2 = 0;
			FILE *g = open_memstream(&t2, &l2);

			/* the re-assembled image is canonical: it must disassemble to the same text */
			if (spyre_disasm_image(img, isz, g))
				abort();
			fclose(g);
			if (strcmp(text, t2) && strstr(text, "\n.const") == NULL)
				abort();
			free(t2);
			free(img);
		}
	} else if (f) {
		fclose(f);
	}
	free(text);

	for (int i = 0; i < NENG; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		run_one(e[i], &m[i], data, size, &r[i]);
	}
	for (int i = 1; i < NENG; i++) {
		if (memcmp(&r[0], &r[i], sizeof(r[0])) || memcmp(m[0].buf, m[i].buf, m[0].next))
			abort();
		for (uint32_t c = 0; c < 4; c++)
			if (memcmp(spyre_engine_scratchpad(e[0], c), spyre_engine_scratchpad(e[i], c), 64 << 10))
				abort();
	}
	return 0;
}
