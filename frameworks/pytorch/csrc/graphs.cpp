// SPDX-License-Identifier: MIT
/*
 * graphs.cpp - libspyre launch graphs for the PyTorch device, as CUDA graphs
 * are for torch.cuda: the ops run on the current stream while it captures
 * (spyre_stream_begin_capture), so their launches, device copies and fills
 * become the nodes of a graph instead of running; the graph is instantiated
 * once (argument blocks resident on the card, its packets built once) and
 * replayed with one SUBMIT ioctl per job (spyre_graph_launch).
 *
 * What a capture holds until the graph is destroyed: the kernels its launches
 * name (Kernel::launch hands its reference over: graph_keep_kernel) and its
 * memory pool (runtime.cpp: the blocks allocated on the stream while it
 * captured, and the blocks freed meanwhile, are reused by no other tensor:
 * a replay writes them). Work the card cannot put in a graph fails the
 * capture with libspyre's reason: a host synchronize, a copy of pageable
 * host memory (an operand staged through the host, a value read back), an op
 * that falls back to the CPU (ops.cpp refuses it while the stream captures).
 *
 * torch.spyre.SpyreGraph / torch.spyre.graph (spyre_torch/graphs.py) and
 * torch.compile(backend="spyre", mode="reduce-overhead") (compile.py) call
 * the spyre:: ops at the end of this file.
 */
#include <map>
#include <mutex>
#include <vector>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include "spyre_torch.h"

namespace spyre_torch {

namespace {

struct Graph {
	int dev;
	int64_t stream_id;
	spyre_stream_t *s;
	std::shared_ptr<GraphPool> pool;
	bool capturing = true;
	spyre_graph_exec_t *exec = nullptr;
	std::vector<spyre_kernel_t *> kernels;
	int64_t nodes = 0, jobs = 0, packets = 0, arg_bytes = 0;
};

std::mutex &g_mu = *new std::mutex;
std::map<int64_t, Graph *> &g_graphs = *new std::map<int64_t, Graph *>;
std::map<spyre_stream_t *, Graph *> &g_capturing = *new std::map<spyre_stream_t *, Graph *>;
int64_t g_next = 1;

Graph *get(int64_t id)
{
	std::lock_guard<std::mutex> g(g_mu);
	auto it = g_graphs.find(id);

	TORCH_CHECK(it != g_graphs.end(), "spyre: no graph ", id, " (destroyed?)");
	return it->second;
}

/* Stop capturing @gr: its graph, or null when the capture failed (then nothing is kept). */
spyre_graph_t *stop(Graph *gr)
{
	spyre_graph_t *graph = nullptr;

	if (!gr->capturing)
		return nullptr;
	int rc = spyre_stream_end_capture(gr->s, &graph);
	{
		std::lock_guard<std::mutex> g(g_mu);

		g_capturing.erase(gr->s);
	}
	gr->capturing = false;
	graph_pool_end(gr->pool);
	if (rc)
		fail("end of a graph capture", rc);
	return graph;
}

void release(Graph *gr)
{
	if (gr->exec)
		spyre_graph_exec_destroy(gr->exec);	/* waits for its replays */
	gr->exec = nullptr;
	for (spyre_kernel_t *k : gr->kernels)
		spyre_kernel_put(k);
	gr->kernels.clear();
	graph_pool_release(gr->pool);
}

/* Begin capturing the current stream of @dev: the graph's id. */
int64_t capture_begin(int64_t dev)
{
	check_index((int)dev);
	auto *gr = new Graph;

	gr->dev = (int)dev;
	gr->s = current_stream((int)dev);
	{
		c10::Stream st = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)
					 ->getStream(c10::Device(c10::DeviceType::PrivateUse1, (c10::DeviceIndex)dev));
		gr->stream_id = st.id();
	}
	gr->pool = graph_pool_begin(gr->dev, gr->stream_id);
	int rc = spyre_stream_begin_capture(gr->s);

	if (rc) {
		graph_pool_release(gr->pool);
		delete gr;
		fail("begin of a graph capture", rc);
	}
	std::lock_guard<std::mutex> g(g_mu);
	int64_t id = g_next++;

	g_graphs[id] = gr;
	g_capturing[gr->s] = gr;
	return id;
}

/* End the capture and instantiate: [nodes, jobs per replay, packets, argument bytes]. */
std::vector<int64_t> capture_end(int64_t id)
{
	Graph *gr = get(id);

	TORCH_CHECK(gr->capturing, "spyre: graph ", id, " is not being captured");
	spyre_graph_t *graph = stop(gr);
	struct spyre_graph_exec_info info = {};
	int rc;

	gr->nodes = spyre_graph_node_count(graph);
	rc = spyre_graph_instantiate(graph, &gr->exec);
	spyre_graph_destroy(graph);
	if (rc)
		fail("graph instantiate", rc);
	info.size = sizeof(info);
	SPYRE_CHECK(spyre_graph_exec_get_info(gr->exec, &info), "graph info");
	gr->jobs = info.num_jobs;
	gr->packets = info.num_packets;
	gr->arg_bytes = (int64_t)info.arg_bytes;
	return { gr->nodes, gr->jobs, gr->packets, gr->arg_bytes };
}

void replay(int64_t id)
{
	Graph *gr = get(id);

	TORCH_CHECK(gr->exec, "spyre: graph ", id, gr->capturing ? " is still being captured" : " was not captured");
	SPYRE_CHECK(spyre_graph_launch(gr->exec, gr->s), "graph replay");
}

void destroy(int64_t id)
{
	Graph *gr;
	{
		std::lock_guard<std::mutex> g(g_mu);
		auto it = g_graphs.find(id);

		if (it == g_graphs.end())
			return;
		gr = it->second;
		g_graphs.erase(it);
	}
	if (gr->capturing) {
		spyre_graph_t *graph = nullptr;

		try {
			graph = stop(gr);
		} catch (const c10::Error &) {
		}
		spyre_graph_destroy(graph);
	}
	release(gr);
	delete gr;
}

/* libspyre's totals of stream @id of @dev (waits for its work): launches, jobs (SUBMIT ioctls), bytes. */
std::vector<int64_t> stream_stats(int64_t dev, int64_t id)
{
	struct spyre_stream_stats st = {};

	st.size = sizeof(st);
	SPYRE_CHECK(spyre_stream_get_stats(stream_of((int)dev, id), &st), "stream statistics");
	return { (int64_t)st.launches, (int64_t)st.jobs, (int64_t)st.device_ns, (int64_t)st.h2d_bytes,
		 (int64_t)st.d2h_bytes, (int64_t)st.d2d_bytes, (int64_t)st.arg_bytes };
}

}  // namespace

bool graph_keep_kernel(spyre_stream_t *s, spyre_kernel_t *k)
{
	std::lock_guard<std::mutex> g(g_mu);
	auto it = g_capturing.find(s);

	if (it == g_capturing.end())
		return false;
	it->second->kernels.push_back(k);
	return true;
}

TORCH_LIBRARY_FRAGMENT(spyre, m)
{
	m.def("graph_capture_begin(int d) -> int", capture_begin);
	m.def("graph_capture_end(int id) -> int[]", capture_end);
	m.def("graph_capture_abort(int id) -> ()", destroy);	/* a failed capture: drop what it made */
	m.def("graph_replay(int id) -> ()", replay);
	m.def("graph_destroy(int id) -> ()", destroy);
	m.def("stream_stats(int d, int id) -> int[]", stream_stats);
	m.def("stream_reset_stats(int d, int id) -> ()", [](int64_t d, int64_t id) {
		SPYRE_CHECK(spyre_stream_reset_stats(stream_of((int)d, id)), "stream statistics reset");
	});
}

}  // namespace spyre_torch
