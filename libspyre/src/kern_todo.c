// SPDX-License-Identifier: MIT
/* Generators not written yet (temporary; each moves to its kern_*.c). */
#include "kern.h"

#define TODO(fn) int fn(struct kgen *g) { return kg_fail(g, "not implemented yet"); }
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
