// SPDX-License-Identifier: MIT
/*
 * fused.cpp - the kernel library's fused ops for torch.compile(backend=
 * "spyre") (spyre_torch/compile.py): linear + activation, the gated MLP
 * (SPYRE_KOP_MLP, weights packed once), causal attention without a cache
 * (SPYRE_KOP_ATTENTION, prefill) and the kernels of RMSNorm (spyre::rms_norm,
 * ops.cpp).
 *
 * The backend builds every kernel a graph needs at compile time (the
 * prepare_* ops, with the example shapes); the kernels are held here, keyed
 * by their descriptor, so a call looks its kernels up and launches them
 * (slots bound by the argument block, no image patching). Operands are bound
 * as they are: the backend fuses only card tensors whose rows are whole
 * sticks; a call with another tensor (another shape, a staged layout) runs
 * the same math with the eager ops instead (counted, "name(unfused)").
 * Meta kernels give fake tensors for tracing.
 */
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/ops/gelu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/silu.h>
#include <torch/library.h>

#include "ops.h"

namespace spyre_torch {

namespace {

/* Kernels held for the process (never destroyed, as every global here), and launches per fused op. */
std::mutex &g_mu = *new std::mutex;
std::map<std::string, spyre_kernel_t *> &g_kernels = *new std::map<std::string, spyre_kernel_t *>;
std::map<std::string, int64_t> &g_calls = *new std::map<std::string, int64_t>;

void count(const std::string &what)
{
	std::lock_guard<std::mutex> g(g_mu);

	g_calls[what]++;
}

/* The kernel of @d on device @dev: built (and held) on first use, a map lookup afterwards. */
spyre_kernel_t *kernel(int dev, struct spyre_kdesc d)
{
	d.size = sizeof(d);
	std::string key(reinterpret_cast<const char *>(&d), sizeof(d));
	key += std::to_string(dev);
	{
		std::lock_guard<std::mutex> g(g_mu);
		auto it = g_kernels.find(key);

		if (it != g_kernels.end())
			return it->second;
	}
	spyre_kernel_t *k = nullptr;

	SPYRE_CHECK(spyre_kernel_get(kcache(dev), &d, &k), std::string("kernel ") + spyre_kernel_op_name(d.op));
	std::lock_guard<std::mutex> g(g_mu);
	auto r = g_kernels.emplace(key, k);

	if (!r.second)
		spyre_kernel_put(k);	/* another thread built it first */
	return r.first->second;
}

void run(int dev, spyre_kernel_t *k, const std::vector<uint64_t> &slots)
{
	int rc = spyre_kernel_launch(current_stream(dev), k, slots.data(), (uint32_t)slots.size(), nullptr, 0);

	if (rc) {
		struct spyre_kernel_info info = {};

		info.size = sizeof(info);
		spyre_kernel_get_info(k, &info);
		fail(std::string("launch of ") + info.name, rc);
	}
}

uint32_t kdtype(at::ScalarType t)
{
	uint32_t dt = 0;

	TORCH_CHECK(kernel_dtype(t, &dt), "spyre: the fused ops take fp32, fp16 or bf16, not ", t);
	return dt;
}

bool float_dtype(at::ScalarType t)
{
	uint32_t dt;

	return kernel_dtype(t, &dt);
}

/* Bound as it is: on the card, contiguous, stick-aligned, rows of whole sticks. */
bool sticky(const at::Tensor &t)
{
	return on_card(t) && float_dtype(t.scalar_type()) && t.dim() >= 1 && t.numel() && t.is_contiguous() &&
	       dptr(t) % kStick == 0 && (t.size(-1) * t.element_size()) % kStick == 0;
}

void check_card(const at::Tensor &t, const char *op, const char *what)
{
	TORCH_CHECK(on_card(t), "spyre::", op, ": ", what, " is on ", t.device(), ", not on the card");
}

uint32_t act_op(c10::string_view act)
{
	if (act == "relu")
		return SPYRE_KOP_RELU;
	if (act == "gelu")
		return SPYRE_KOP_GELU;
	if (act == "silu")
		return SPYRE_KOP_SILU;
	TORCH_CHECK(false, "spyre::linear_act: activation ", std::string(act), " is not relu, gelu or silu");
}

at::Tensor act_eager(const at::Tensor &y, c10::string_view act)
{
	if (act == "relu")
		return at::relu(y);
	if (act == "gelu")
		return at::gelu(y);
	return at::silu(y);
}

/* ---- linear + activation: LINEAR (W as nn.Linear keeps it) then the activation ------------ */

struct spyre_kdesc linear_desc(uint64_t m, uint64_t n, uint64_t k, bool bias, uint32_t dt)
{
	struct spyre_kdesc d = {};

	d.op = SPYRE_KOP_LINEAR;
	d.dtype = dt;
	d.m = m;
	d.n = n;
	d.k = k;
	d.flags = SPYRE_KF_WEIGHT_NK | (bias ? SPYRE_KF_BIAS : 0);
	return d;
}

struct spyre_kdesc ew_desc(uint32_t op, uint64_t m, uint64_t n, uint32_t dt)
{
	struct spyre_kdesc d = {};

	d.op = op;
	d.dtype = dt;
	d.m = m;
	d.n = n;
	return d;
}

void prepare_linear_act(int64_t m, int64_t n, int64_t k, bool bias, c10::string_view act, at::ScalarType t,
			int64_t dev)
{
	uint32_t dt = kdtype(t), op = act_op(act);

	check_index((int)dev);
	kernel((int)dev, linear_desc(m, n, k, bias, dt));
	kernel((int)dev, ew_desc(op, m, n, dt));
}

at::Tensor linear_act(const at::Tensor &x, const at::Tensor &w, const std::optional<at::Tensor> &b,
		      c10::string_view act)
{
	uint32_t op = act_op(act);

	check_card(x, "linear_act", "x");
	check_card(w, "linear_act", "w");
	TORCH_CHECK(w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1), "spyre::linear_act: x ", x.sizes(),
		    " and w ", w.sizes(), " do not match");
	bool ok = sticky(x) && sticky(w) && x.scalar_type() == w.scalar_type() && x.device() == w.device() &&
		  (w.size(0) * w.element_size()) % kStick == 0 &&
		  (!b || (on_card(*b) && b->dim() == 1 && b->size(0) == w.size(0)));

	if (!ok) {
		count("linear_act(unfused)");
		return act_eager(at::linear(x, w, b), act);
	}
	c10::DeviceGuard g(x.device());
	int dev = x.device().index();
	uint32_t dt = kdtype(x.scalar_type());
	uint64_t k = x.size(-1), n = w.size(0), m = x.numel() / k;
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
	shape.back() = (int64_t)n;
	at::Tensor y = at::empty(shape, x.options()), z = at::empty(shape, x.options()), b32;
	std::vector<uint64_t> slots{ dptr(x), dptr(w) };

	if (b) {
		b32 = b->to(at::kFloat).contiguous();
		slots.push_back(dptr(b32));
	}
	slots.push_back(dptr(y));
	spyre_kernel_t *kl = kernel(dev, linear_desc(m, n, k, b.has_value(), dt));
	spyre_kernel_t *ka = kernel(dev, ew_desc(op, m, n, dt));

	run(dev, kl, slots);
	run(dev, ka, { dptr(y), dptr(z) });
	count(std::string("linear_") + std::string(act));
	return z;
}

at::Tensor linear_act_meta(const at::Tensor &x, const at::Tensor &w, const std::optional<at::Tensor> &b,
			   c10::string_view act)
{
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());

	shape.back() = w.size(0);
	return at::empty(shape, x.options());
}

/* ---- the gated MLP: down(silu(x Wg^T) * (x Wu^T)), weights packed once ---------------------- */

struct spyre_kdesc mlp_desc(uint64_t m, uint64_t n, uint64_t k, uint32_t dt)
{
	struct spyre_kdesc d = {};

	d.op = SPYRE_KOP_MLP;
	d.dtype = dt;
	d.m = m;
	d.n = n;
	d.k = k;
	return d;
}

void prepare_mlp(int64_t m, int64_t n, int64_t k, at::ScalarType t, int64_t dev)
{
	check_index((int)dev);
	kernel((int)dev, mlp_desc(m, n, k, kdtype(t)));
}

/* nn.Linear weights gate, up [n, k] and down [k, n] in MLP's slots 1..3 (device buffers of bytes). */
std::vector<at::Tensor> pack_mlp(const at::Tensor &wg, const at::Tensor &wu, const at::Tensor &wd)
{
	for (const at::Tensor *w : { &wg, &wu, &wd }) {
		check_card(*w, "pack_mlp", "a weight");
		TORCH_CHECK(float_dtype(w->scalar_type()) && w->dim() == 2 && w->scalar_type() == wg.scalar_type(),
			    "spyre::pack_mlp: weights are 2-d fp32/fp16/bf16 of one dtype");
	}
	uint64_t n = wg.size(0), k = wg.size(1);

	TORCH_CHECK(wu.sizes() == wg.sizes() && wd.size(0) == (int64_t)k && wd.size(1) == (int64_t)n,
		    "spyre::pack_mlp: gate ", wg.sizes(), ", up ", wu.sizes(), " and down ", wd.sizes(),
		    " are not [n, k], [n, k], [k, n]");
	c10::DeviceGuard g(wg.device());
	int dev = wg.device().index();
	struct spyre_kdesc d = mlp_desc(1, n, k, kdtype(wg.scalar_type()));
	std::vector<at::Tensor> out;
	uint32_t slot = 1;

	d.size = sizeof(d);
	for (const at::Tensor *w : { &wg, &wu, &wd }) {
		at::Tensor h = w->cpu().contiguous();
		size_t bytes = 0;

		SPYRE_CHECK(spyre_kernel_pack_weight(&d, slot, SPYRE_KW_OUT_IN, h.data_ptr(),
						     kdtype(h.scalar_type()), nullptr, &bytes), "pack_mlp");
		std::vector<uint8_t> buf(stick_up(bytes));
		SPYRE_CHECK(spyre_kernel_pack_weight(&d, slot, SPYRE_KW_OUT_IN, h.data_ptr(),
						     kdtype(h.scalar_type()), buf.data(), &bytes), "pack_mlp");
		at::Tensor p = at::empty({ (int64_t)buf.size() }, wg.options().dtype(at::kByte));

		copy_h2d(dev, dptr(p), buf.data(), buf.size());
		out.push_back(p);
		slot++;
	}
	return out;
}

at::Tensor mlp(const at::Tensor &x, const at::Tensor &pg, const at::Tensor &pu, const at::Tensor &pd, int64_t n)
{
	check_card(x, "mlp", "x");
	TORCH_CHECK(sticky(x), "spyre::mlp: x ", x.sizes(), " (", x.scalar_type(),
		    ") is not a contiguous card tensor of whole-stick rows");
	c10::DeviceGuard g(x.device());
	int dev = x.device().index();
	uint64_t k = x.size(-1), m = x.numel() / k;
	struct spyre_kdesc d = mlp_desc(m, n, k, kdtype(x.scalar_type()));
	size_t bytes[3] = {};

	d.size = sizeof(d);
	for (uint32_t s = 0; s < 3; s++) {
		const at::Tensor &p = s == 0 ? pg : s == 1 ? pu : pd;

		spyre_kernel_pack_weight(&d, s + 1, SPYRE_KW_OUT_IN, nullptr, SPYRE_DT_FP32, nullptr, &bytes[s]);
		TORCH_CHECK(on_card(p) && p.device() == x.device() && (size_t)p.numel() >= bytes[s],
			    "spyre::mlp: packed weight ", s, " is not the card buffer of pack_mlp() for n ", n,
			    ", k ", k);
	}
	at::Tensor y = at::empty_like(x);

	run(dev, kernel(dev, d), { dptr(x), dptr(pg), dptr(pu), dptr(pd), dptr(y) });
	count("mlp");
	return y;
}

at::Tensor mlp_meta(const at::Tensor &x, const at::Tensor &pg, const at::Tensor &pu, const at::Tensor &pd,
		    int64_t n)
{
	return at::empty_like(x);
}

/* ---- causal attention, no cache: q [B, H, S, D], k, v [B, KVH, S, D] -> [B, H, S, D] --------- */

struct spyre_kdesc attn_desc(uint64_t s, uint32_t h, uint32_t kvh, uint32_t hd, double scale, uint32_t dt)
{
	struct spyre_kdesc d = {};

	d.op = SPYRE_KOP_ATTENTION;
	d.dtype = dt;
	d.m = s;
	d.heads = h;
	d.kv_heads = kvh;
	d.head_dim = hd;
	d.max_pos = (uint32_t)s;
	d.scale = (float)scale;
	return d;
}

void prepare_attention(int64_t s, int64_t h, int64_t kvh, int64_t hd, double scale, at::ScalarType t, int64_t dev)
{
	check_index((int)dev);
	kernel((int)dev, attn_desc(s, h, kvh, hd, scale, kdtype(t)));
}

at::Tensor attention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, double scale)
{
	check_card(q, "attention", "q");
	check_card(k, "attention", "k");
	check_card(v, "attention", "v");
	TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes() && k.size(0) == q.size(0) &&
		    k.size(2) == q.size(2) && k.size(3) == q.size(3) && k.size(1) && q.size(1) % k.size(1) == 0 &&
		    q.scalar_type() == k.scalar_type() && v.scalar_type() == k.scalar_type() &&
		    float_dtype(q.scalar_type()) && q.numel(),
		    "spyre::attention: q [B, H, S, D] ", q.sizes(), ", k, v [B, KVH, S, D] ", k.sizes(), " and ",
		    v.sizes(), " of one float dtype");
	c10::DeviceGuard g(q.device());
	int dev = q.device().index();
	int64_t B = q.size(0), H = q.size(1), S = q.size(2), D = q.size(3), KVH = k.size(1);
	uint32_t dt = kdtype(q.scalar_type());
	/* the kernel's token-major rows [S, heads * D]: [B, S, H, D] contiguous */
	at::Tensor qs = q.transpose(1, 2).contiguous(), ks = k.transpose(1, 2).contiguous(),
		   vs = v.transpose(1, 2).contiguous();

	if (!sticky(qs) || !sticky(ks) || !sticky(vs)) {
		count("attention(unfused)");
		return at::scaled_dot_product_attention(q, k, v, {}, 0.0, true, scale ? std::optional<double>(scale) :
							std::nullopt, KVH != H);
	}
	at::Tensor o = at::empty({ B, S, H, D }, q.options());
	at::Tensor kc = at::zeros({ KVH * S, D }, q.options()), vc = at::zeros({ KVH * S, D }, q.options());
	spyre_kernel_t *kern = kernel(dev, attn_desc(S, H, KVH, D, scale, dt));
	uint64_t qb = S * H * D * q.element_size(), kb = S * KVH * D * q.element_size();

	for (int64_t b = 0; b < B; b++)
		run(dev, kern, { dptr(qs) + b * qb, dptr(ks) + b * kb, dptr(vs) + b * kb, dptr(kc), dptr(vc),
				 dptr(o) + b * qb });
	count("attention");
	return o.transpose(1, 2);
}

at::Tensor attention_meta(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, double scale)
{
	return at::empty({ q.size(0), q.size(2), q.size(1), q.size(3) }, q.options()).transpose(1, 2);
}

/* ---- RMSNorm: spyre::rms_norm (ops.cpp) launches RMSNORM; its kernel is built here at compile time */

void prepare_rms_norm(int64_t m, int64_t n, double eps, at::ScalarType t, int64_t dev)
{
	struct spyre_kdesc d = {};
	spyre_kernel_t *k = nullptr;

	check_index((int)dev);
	d.size = sizeof(d);
	d.op = SPYRE_KOP_RMSNORM;
	d.dtype = kdtype(t);
	d.m = m;
	d.n = n;
	d.eps = (float)eps;
	/* into the kernel cache, where the op finds it */
	SPYRE_CHECK(spyre_kernel_get(kcache((int)dev), &d, &k), "kernel rmsnorm");
	spyre_kernel_put(k);
}

at::Tensor rms_norm_meta(const at::Tensor &x, const at::Tensor &w, double eps)
{
	return at::empty_like(x, at::MemoryFormat::Contiguous);
}

std::string report()
{
	std::lock_guard<std::mutex> g(g_mu);
	std::string s;

	for (const auto &kv : g_calls)
		s += kv.first + " " + std::to_string(kv.second) + "\n";
	return s;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("prepare_linear_act(int m, int n, int k, bool bias, str act, ScalarType dtype, int device) -> ()",
	      prepare_linear_act);
	m.def("prepare_mlp(int m, int n, int k, ScalarType dtype, int device) -> ()", prepare_mlp);
	m.def("prepare_attention(int s, int heads, int kv_heads, int head_dim, float scale, ScalarType dtype, "
	      "int device) -> ()", prepare_attention);
	m.def("prepare_rms_norm(int m, int n, float eps, ScalarType dtype, int device) -> ()", prepare_rms_norm);
	m.def("pack_mlp(Tensor wg, Tensor wu, Tensor wd) -> Tensor[]");
	m.impl("pack_mlp", c10::DispatchKey::PrivateUse1, TORCH_FN(pack_mlp));
	m.impl("pack_mlp", c10::DispatchKey::AutogradPrivateUse1, TORCH_FN(pack_mlp));
	m.def("linear_act(Tensor x, Tensor w, Tensor? b, str act) -> Tensor");
	m.def("mlp(Tensor x, Tensor wg, Tensor wu, Tensor wd, int n) -> Tensor");
	m.def("attention(Tensor q, Tensor k, Tensor v, float scale) -> Tensor");
	m.def("fused_report() -> str", report);
	m.def("fused_reset() -> ()", [] {
		std::lock_guard<std::mutex> g(g_mu);

		g_calls.clear();
	});
}

/* Inference only, as spyre::rms_norm: the autograd keys run the same kernels. */
TORCH_LIBRARY_IMPL(spyre, PrivateUse1, m)
{
	m.impl("linear_act", linear_act);
	m.impl("mlp", mlp);
	m.impl("attention", attention);
}

TORCH_LIBRARY_IMPL(spyre, AutogradPrivateUse1, m)
{
	m.impl("linear_act", linear_act);
	m.impl("mlp", mlp);
	m.impl("attention", attention);
}

/* CPU tensors passed to a fused op: a clear error rather than "no kernel for CPU". */
TORCH_LIBRARY_IMPL(spyre, CPU, m)
{
	m.impl("linear_act", linear_act);
	m.impl("mlp", mlp);
	m.impl("attention", attention);
}

TORCH_LIBRARY_IMPL(spyre, Meta, m)
{
	m.impl("linear_act", linear_act_meta);
	m.impl("mlp", mlp_meta);
	m.impl("attention", attention_meta);
	m.impl("rms_norm", rms_norm_meta);
}

}  // namespace spyre_torch
