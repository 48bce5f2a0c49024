// SPDX-License-Identifier: MIT
/*
 * ops.h - what the op files share: ops.cpp (the counters, the CPU fallback,
 * kernel operands and launches), ops_matmul.cpp, ops_eltwise.cpp,
 * ops_reduce.cpp, ops_shape.cpp, and copy.cpp's device relayouts; the
 * elementwise helpers other rooms call (baddbmm's scaled add).
 *
 * Every op tries its kernel first: when the op's dtype, devices or shape are
 * not what the kernel does, or the kernel library cannot build the
 * descriptor (-EINVAL: a shape past the scratchpad, an op this libspyre does
 * not know), it returns an undefined tensor and the op runs on the CPU
 * through the fallback, counted (the warning names libspyre's reason).
 */
#ifndef SPYRE_TORCH_OPS_H
#define SPYRE_TORCH_OPS_H

#include <string>
#include <vector>

#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>

#include "spyre_torch.h"

namespace spyre_torch {

/* The boxed CPU fallback (counted per op); FALLBACK(add_Tensor, a, b, alpha) calls it unboxed. */
void fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack);
#define FALLBACK(op, ...) at::native::call_fallback_fn<&::spyre_torch::fallback, ATEN_OP(op)>::call(__VA_ARGS__)

/* A launch of op @name's kernel (card_report()). */
void count_card(const char *name);

/* SPYRE_DT_* of a float dtype the kernels compute (fp32, fp16, bf16). */
bool kernel_dtype(at::ScalarType t, uint32_t *dt);
bool on_card(const at::Tensor &t);
/* On the card, non-empty, of a kernel dtype (in *@dt). */
bool card_float(const at::Tensor &t, uint32_t *dt = nullptr);
/* A CPU tensor of one element (a Python number, a 0-dim tensor): TensorIterator's scalar operand. */
bool cpu_scalar(const at::Tensor &t);

/*
 * A device tensor's values as a stick-layout matrix [rows x cols]: bound in
 * place when it already is one, else staged (one relayout, via the host).
 */
struct Operand {
	uint64_t ptr = 0;
	at::DataPtr staged;
};
Operand operand(const at::Tensor &t, uint64_t rows, uint64_t cols, uint32_t dt);

/* The output: @y (fresh, contiguous) itself, or a stick-layout buffer unpacked into it by finish(). */
struct Output {
	at::Tensor y;
	uint64_t rows, cols;
	uint32_t dt = 0;
	Operand o;

	Output(const at::Tensor &t, uint64_t r, uint64_t c, uint32_t d);
	void finish();
};

/*
 * The kernel of @d (size set here) on device @dev's cache; false when the
 * library cannot build it (-EINVAL: the caller falls back, the reason goes
 * with the fallback's warning); other errors raise.
 */
class Kernel {
public:
	Kernel(int dev, struct spyre_kdesc d);
	~Kernel();
	Kernel(const Kernel &) = delete;
	Kernel &operator=(const Kernel &) = delete;
	explicit operator bool() const { return k_ != nullptr; }
	/* Launch with @slots (the work slot, if any, from the kernel library); raises on failure. */
	void launch(const std::vector<uint64_t> &slots, const uint64_t *scalars = nullptr, uint32_t nscalars = 0);

private:
	int dev_;
	spyre_kernel_t *k_ = nullptr;
	bool kept_ = false;	/* launched into a graph being captured, which holds it now (graphs.cpp) */
};

/* Drop the reason of a kernel that could not be built when the op does not fall back (it found another way). */
void forget_kernel_error();

/* A tensor argument of run(): @t seen as a stick-layout [rows x cols] of dtype @dt. */
struct Slot {
	at::Tensor t;
	uint64_t rows, cols;
	uint32_t dt;
};

/*
 * Launch @d on @out's device with @in then @out as its slots (staged where
 * needed) and count op @name; false (nothing launched) when the library
 * cannot build @d.
 */
bool run(const struct spyre_kdesc &d, const std::vector<Slot> &in, const Slot &out, const char *name);

/*
 * An elementwise view of @numel elements: rows of @per elements when they
 * divide it (@per * element size a whole number of sticks), else one row.
 */
void ew_shape(uint64_t numel, uint64_t per, uint64_t *rows, uint64_t *cols);

/* ---- elementwise helpers (ops_eltwise.cpp), undefined when the card cannot do it ---- */

/* Y = fn(X) with UNARY (SCALE: alpha X + beta; POW: X ^ alpha). */
at::Tensor unary(uint32_t fn, const at::Tensor &x, float alpha, float beta, const char *name);
/*
 * Y = A fn B (ADD, SUB: B scaled by @alpha) for two tensors on the card of
 * one dtype, broadcast when one of them is a row, a column or a scalar of
 * the other once flattened to [outer x inner]; a CPU scalar on either side
 * is UNARY SCALE. Raises for shapes that do not broadcast.
 */
at::Tensor binary(uint32_t fn, const at::Tensor &a, const at::Tensor &b, double alpha, const char *name);

}  // namespace spyre_torch

#endif
