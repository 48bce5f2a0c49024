// SPDX-License-Identifier: MIT
/*
 * Description: libspyre's peer-to-peer copies on the `make check` VM's two
 * cards (run in the VM; card 0 shows its memory to peers, the 128 GiB card
 * 1 does not; in a VM of cards that all do, both directions are expected): spyre_device_can_access_peer() in both directions and for a
 * device with itself; spyre_memcpy_peer() both ways (the synchronous call
 * picks the card that can run it) with exact bytes over sizes from one
 * stick to 3 MiB + 384 at odd stick offsets inside larger allocations,
 * from the sub-allocator's small blocks and from large buffers;
 * spyre_memcpy_peer_async() on a stream of either card with events, a
 * chain card 1 -> card 0 -> card 1; the imports of a buffer dropped when it
 * is freed (a new allocation at a reused address gets the new bytes); and
 * errors with a detail: misaligned addresses or sizes, ranges outside one
 * allocation, host pointers, a stream of a third handle, a stream of the
 * card that cannot reach the other (-EXDEV or -EOPNOTSUPP).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "spyre.h"
#include "spyre_hw.h"

static void pattern(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 37 + seed * 11 + (i >> 9));
}

FIXTURE(peer) {
	spyre_device_t *dev[2];	/* [0] card 0 (peer BAR), [1] card 1 */
	int p2p;		/* card 1 can access card 0 */
	int peer1;		/* card 1 has a peer BAR too (not in make check's VM) */
};

FIXTURE_SETUP(peer)
{
	struct spyre_device_props props = { .size = sizeof(props) };

	if (spyre_device_count() < 2)
		SKIP(return, "two spyre devices needed");
	ASSERT_EQ(0, spyre_device_open(0, &self->dev[0])) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_device_open(1, &self->dev[1])) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_device_get_props(self->dev[0], &props));
	if (!(props.features & SPYRE_FEAT_PEER_BAR))
		SKIP(return, "card 0 has no peer BAR");
	ASSERT_EQ(0, spyre_device_get_props(self->dev[1], &props));
	self->peer1 = !!(props.features & SPYRE_FEAT_PEER_BAR);
	ASSERT_EQ(0, spyre_device_can_access_peer(self->dev[1], self->dev[0], &self->p2p));
	if (!self->p2p)
		SKIP(return, "no peer-to-peer path between the cards (tools/vm/run --flat?)");
}

FIXTURE_TEARDOWN(peer)
{
	spyre_device_close(self->dev[1]);
	spyre_device_close(self->dev[0]);
}

TEST_F(peer, can_access_peer)
{
	spyre_device_t *again;
	int can = -1;

	EXPECT_EQ(1, self->p2p);
	/* Card 0 reaches card 1 only if card 1 shows its memory to peers. */
	ASSERT_EQ(0, spyre_device_can_access_peer(self->dev[0], self->dev[1], &can));
	EXPECT_EQ(self->peer1, can);
	ASSERT_EQ(0, spyre_device_can_access_peer(self->dev[0], self->dev[0], &can));
	EXPECT_EQ(1, can);
	/* A second handle of card 0 reaches it (the driver's self-import). */
	ASSERT_EQ(0, spyre_device_open(0, &again));
	ASSERT_EQ(0, spyre_device_can_access_peer(again, self->dev[0], &can));
	EXPECT_EQ(1, can);
	spyre_device_close(again);
	EXPECT_EQ(-EINVAL, spyre_device_can_access_peer(NULL, self->dev[0], &can));
	EXPECT_EQ(-EINVAL, spyre_device_can_access_peer(self->dev[0], self->dev[1], NULL));
}

/* spyre_memcpy_peer() both ways at odd offsets, small blocks and large buffers. */
TEST_F(peer, memcpy_peer_exact_bytes)
{
	static const size_t sizes[] = { 128, 384, 4096 + 128, 65536 + 640, 1048576,
					3 * 1048576 + 384 };
	const size_t big = 4 * 1048576, off0 = 128 * 7, off1 = 128 * 3;
	uint8_t *in = malloc(big), *out = malloc(big);
	spyre_dptr_t a, b;
	size_t i;

	ASSERT_NE(NULL, in);
	ASSERT_NE(NULL, out);
	ASSERT_EQ(0, spyre_malloc(self->dev[0], big, &a));
	ASSERT_EQ(0, spyre_malloc(self->dev[1], big, &b));
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		pattern(in, n, (unsigned int)i);
		/* card 0 -> card 1 */
		ASSERT_EQ(0, spyre_memcpy(self->dev[0], a + off0, (uintptr_t)in, n, SPYRE_MEMCPY_H2D));
		ASSERT_EQ(0, spyre_memcpy_peer(self->dev[1], b + off1, self->dev[0], a + off0, n))
			TH_LOG("%s", spyre_last_error());
		memset(out, 0, n);
		ASSERT_EQ(0, spyre_memcpy(self->dev[1], (uintptr_t)out, b + off1, n, SPYRE_MEMCPY_D2H));
		EXPECT_EQ(0, memcmp(in, out, n)) TH_LOG("card 0 -> 1, %zu bytes", n);
		/* card 1 -> card 0 (card 1 pushes: card 0 cannot reach card 1) */
		pattern(in, n, (unsigned int)i + 50);
		ASSERT_EQ(0, spyre_memcpy(self->dev[1], b, (uintptr_t)in, n, SPYRE_MEMCPY_H2D));
		ASSERT_EQ(0, spyre_memcpy_peer(self->dev[0], a + off1, self->dev[1], b, n))
			TH_LOG("%s", spyre_last_error());
		memset(out, 0, n);
		ASSERT_EQ(0, spyre_memcpy(self->dev[0], (uintptr_t)out, a + off1, n, SPYRE_MEMCPY_D2H));
		EXPECT_EQ(0, memcmp(in, out, n)) TH_LOG("card 1 -> 0, %zu bytes", n);
	}
	/* Small allocations (the sub-allocator's blocks of a shared 2 MiB buffer). */
	{
		spyre_dptr_t s0, s1;

		ASSERT_EQ(0, spyre_malloc(self->dev[0], 640, &s0));
		ASSERT_EQ(0, spyre_malloc(self->dev[1], 640, &s1));
		pattern(in, 640, 9);
		ASSERT_EQ(0, spyre_memcpy(self->dev[0], s0, (uintptr_t)in, 640, SPYRE_MEMCPY_H2D));
		ASSERT_EQ(0, spyre_memcpy_peer(self->dev[1], s1, self->dev[0], s0, 640));
		ASSERT_EQ(0, spyre_memcpy(self->dev[1], (uintptr_t)out, s1, 640, SPYRE_MEMCPY_D2H));
		EXPECT_EQ(0, memcmp(in, out, 640));
		EXPECT_EQ(0, spyre_free(self->dev[0], s0));
		EXPECT_EQ(0, spyre_free(self->dev[1], s1));
	}
	EXPECT_EQ(0, spyre_free(self->dev[0], a));
	EXPECT_EQ(0, spyre_free(self->dev[1], b));
	free(in);
	free(out);
}

/* Asynchronous on either card's stream, ordered by events across the cards. */
TEST_F(peer, memcpy_peer_async_with_events)
{
	const size_t n = 256 * 1024 + 128;
	uint8_t *in = malloc(n), *out = malloc(n);
	spyre_stream_t *s0, *s1;
	spyre_event_t *e1;
	spyre_dptr_t a, b, c;

	ASSERT_EQ(0, spyre_stream_create(self->dev[0], SPYRE_STREAM_PRIORITY_NORMAL, &s0));
	ASSERT_EQ(0, spyre_stream_create(self->dev[1], SPYRE_STREAM_PRIORITY_NORMAL, &s1));
	ASSERT_EQ(0, spyre_event_create(self->dev[1], &e1));
	ASSERT_EQ(0, spyre_malloc(self->dev[0], n, &a));
	ASSERT_EQ(0, spyre_malloc(self->dev[1], n, &b));
	ASSERT_EQ(0, spyre_malloc(self->dev[1], n, &c));
	pattern(in, n, 77);
	ASSERT_EQ(0, spyre_memcpy(self->dev[1], b, (uintptr_t)in, n, SPYRE_MEMCPY_H2D));
	/* card 1 pushes b into card 0's a, then pulls a back into c: one stream, in order. */
	ASSERT_EQ(0, spyre_memcpy_peer_async(s1, self->dev[0], a, self->dev[1], b, n))
		TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_memcpy_peer_async(s1, self->dev[1], c, self->dev[0], a, n));
	ASSERT_EQ(0, spyre_event_record(e1, s1));
	ASSERT_EQ(0, spyre_event_synchronize(e1));
	ASSERT_EQ(0, spyre_memcpy(self->dev[1], (uintptr_t)out, c, n, SPYRE_MEMCPY_D2H));
	EXPECT_EQ(0, memcmp(in, out, n));
	ASSERT_EQ(0, spyre_memcpy(self->dev[0], (uintptr_t)out, a, n, SPYRE_MEMCPY_D2H));
	EXPECT_EQ(0, memcmp(in, out, n));
	/* Card 0's stream runs a copy that needs card 1's memory only if card 1 has a peer BAR. */
	if (self->peer1) {
		EXPECT_EQ(0, spyre_memcpy_peer_async(s0, self->dev[1], b, self->dev[0], a, n));
	} else {
		EXPECT_EQ(-EOPNOTSUPP, spyre_memcpy_peer_async(s0, self->dev[1], b, self->dev[0], a, n));
		EXPECT_NE(NULL, strstr(spyre_last_error(), "no peer BAR")) TH_LOG("%s", spyre_last_error());
	}
	EXPECT_EQ(0, spyre_stream_synchronize(s0));
	EXPECT_EQ(0, spyre_stream_synchronize(s1));
	spyre_free(self->dev[0], a);
	spyre_free(self->dev[1], b);
	spyre_free(self->dev[1], c);
	spyre_event_destroy(e1);
	spyre_stream_destroy(s0);
	spyre_stream_destroy(s1);
	free(in);
	free(out);
}

/*
 * An import lives as long as its buffer: after a large buffer is freed and
 * the cache emptied, a new one (whatever address it gets) is imported anew.
 */
TEST_F(peer, freed_buffer_is_imported_anew)
{
	const size_t n = 2 * 1048576 + 4096;
	uint8_t *in = malloc(n), *out = malloc(n);
	spyre_dptr_t a, b;
	int round;

	ASSERT_EQ(0, spyre_malloc(self->dev[1], n, &b));
	for (round = 0; round < 3; round++) {
		ASSERT_EQ(0, spyre_malloc(self->dev[0], n, &a));
		pattern(in, n, 200 + round);
		ASSERT_EQ(0, spyre_memcpy(self->dev[0], a, (uintptr_t)in, n, SPYRE_MEMCPY_H2D));
		ASSERT_EQ(0, spyre_memcpy_peer(self->dev[1], b, self->dev[0], a, n));
		ASSERT_EQ(0, spyre_memcpy(self->dev[1], (uintptr_t)out, b, n, SPYRE_MEMCPY_D2H));
		EXPECT_EQ(0, memcmp(in, out, n)) TH_LOG("round %d", round);
		ASSERT_EQ(0, spyre_free(self->dev[0], a));
		ASSERT_EQ(0, spyre_empty_cache(self->dev[0]));
	}
	spyre_free(self->dev[1], b);
	free(in);
	free(out);
}

TEST_F(peer, errors)
{
	spyre_dptr_t a, b;
	spyre_stream_t *s;
	spyre_device_t *third;
	uint8_t host[256];

	ASSERT_EQ(0, spyre_malloc(self->dev[0], 4096, &a));
	ASSERT_EQ(0, spyre_malloc(self->dev[1], 4096, &b));
	/* Whole sticks only. */
	EXPECT_EQ(-EINVAL, spyre_memcpy_peer(self->dev[1], b, self->dev[0], a, 100));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "whole 128-byte sticks"));
	EXPECT_EQ(-EINVAL, spyre_memcpy_peer(self->dev[1], b + 64, self->dev[0], a, 128));
	/* Outside one allocation, on either side. */
	EXPECT_EQ(-EINVAL, spyre_memcpy_peer(self->dev[1], b, self->dev[0], a + 2048, 4096));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "not inside one device allocation"))
		TH_LOG("%s", spyre_last_error());
	EXPECT_EQ(-EINVAL, spyre_memcpy_peer(self->dev[1], b + 2048, self->dev[0], a, 4096));
	/* A host pointer is not device memory of either. */
	EXPECT_EQ(-EINVAL, spyre_memcpy_peer(self->dev[1], b, self->dev[0],
					     (uintptr_t)host & ~(uintptr_t)127, 128));
	EXPECT_EQ(-EINVAL, spyre_memcpy_peer(NULL, b, self->dev[0], a, 128));
	/* A stream of a third handle is neither card's. */
	ASSERT_EQ(0, spyre_device_open(0, &third));
	ASSERT_EQ(0, spyre_stream_create(third, SPYRE_STREAM_PRIORITY_NORMAL, &s));
	EXPECT_EQ(-EINVAL, spyre_memcpy_peer_async(s, self->dev[1], b, self->dev[0], a, 128));
	EXPECT_NE(NULL, strstr(spyre_last_error(), "neither"));
	EXPECT_EQ(-EINVAL, spyre_memcpy_peer_async(NULL, self->dev[1], b, self->dev[0], a, 128));
	/* Size 0 is a no-op. */
	EXPECT_EQ(0, spyre_memcpy_peer(self->dev[1], b, self->dev[0], a, 0));
	spyre_stream_destroy(s);
	spyre_device_close(third);
	spyre_free(self->dev[0], a);
	spyre_free(self->dev[1], b);
}

TEST_HARNESS_MAIN
