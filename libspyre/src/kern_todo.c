// SPDX-License-Identifier: MIT
/*
 * Generators not written yet (temporary, during development): weak, so a
 * kern_*.c that defines one replaces it. Deleted once every op has its own.
 */
#include "kern.h"

#define TODO(fn) __attribute__((weak)) int fn(struct kgen *g) { return kg_fail(g, "not implemented yet"); }
TODO(kg_gen_linear)
TODO(kg_gen_bmm)
TODO(kg_gen_mlp)
TODO(kg_gen_softmax)
TODO(kg_gen_rmsnorm)
TODO(kg_gen_layernorm)
TODO(kg_gen_rope)
TODO(kg_gen_attention)
TODO(kg_gen_embedding)
TODO(kg_gen_argmax)
TODO(kg_gen_transpose)
