// SPDX-License-Identifier: MIT
/*
 * Description: robustness of the spyre device against arbitrary ring
 * contents: a seeded loop feeds >= 10,000 packets (random bytes, and
 * plausible packets with random opcodes, spaces, contexts, flags, sizes and
 * addresses, including host addresses of the device's own BARs and
 * semaphores that never come) to four queues until the device has consumed
 * >= 10,000 of them (completed or failed), recovering stopped queues by
 * skipping and stuck ones by queue reset. QEMU must stay alive and the device
 * usable; the error codes seen are printed.
 *
 * SPYRE_FUZZ_SEED and SPYRE_FUZZ_PACKETS override the defaults.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spyre-dev.h"

#define NQ	4
#define RING	256

static struct sdev D;
static uint64_t rng;
static uint64_t host_buf;

static uint64_t rnd(void)
{
	/* xorshift64*: deterministic for a given seed */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static uint64_t pick_addr(uint8_t *space)
{
	switch (rnd() % 10) {
	case 0:
		*space = SPYRE_AS_HOST;
		if (rnd() % 8 == 0)
			return SDEV_BAR0 + (rnd() % 0x2000) * 4;	/* our own registers */
		return SDEV_BAR2 + (rnd() % 0x1000) * 128;	/* our memory window */
	case 1:
		*space = SPYRE_AS_HOST;
		return rnd();
	case 2:
		*space = SPYRE_AS_VIRT;
		return (rnd() % 3) ? (rnd() % 64) * 4096 : rnd() % (1ull << 38);
	case 3:
		*space = SPYRE_AS_HOST_SGL;
		return host_buf + (rnd() % 4096) * 8;
	case 4:
	case 5:
	case 6:
		*space = SPYRE_AS_DEVPHYS;
		return (rnd() % 1) ? rnd() : (rnd() % (1u << 20)) * 128;
	default:
		*space = SPYRE_AS_HOST;
		return host_buf + rnd() % (1u << 20);
	}
}

static void make_packet(uint8_t *p, uint64_t seq)
{
	uint64_t w[8];
	uint8_t s1, s2;
	int i;

	if (rnd() % 4 == 0) {
		for (i = 0; i < 8; i++)
			w[i] = rnd();
		memcpy(p, w, 64);
		return;
	}
	switch (rnd() % 7) {
	case 0:
		pkt_nop(p, seq, (uint16_t)(rnd() % 2));
		break;
	case 1:
	case 2: {
		uint64_t src = pick_addr(&s1), dst = pick_addr(&s2);
		uint64_t size = (rnd() % 50) ? (rnd() % 64 + 1) * 128 :
				(rnd() % 2 ? rnd() : (rnd() % 4096) * 128 * 64);

		pkt_copy(p, seq, (uint16_t)(rnd() % 4), s1, src, s2, dst, size);
		break;
	}
	case 3:
	case 4: {
		uint64_t a = pick_addr(&s1);

		pkt_sem(p, rnd() % 2 ? SPYRE_PKT_OP_SIGNAL : SPYRE_PKT_OP_WAIT, seq,
			(uint16_t)(rnd() % 4), s1, a & ~7ull, rnd() % 32 ? 0 : rnd());
		break;
	}
	case 5:
		pkt_sem(p, SPYRE_PKT_OP_TIMESTAMP, seq, 0, SPYRE_AS_HOST,
			(host_buf + rnd() % 4096) & ~7ull, 0);
		break;
	default:
		pkt_launch(p, seq, rnd(), rnd(), (uint32_t)rnd());
		break;
	}
	/* Sometimes break one rule on purpose. */
	if (rnd() % 8 == 0)
		p[rnd() % 64] ^= (uint8_t)(1u << (rnd() % 8));
}

static uint64_t total = 10000;

static void test_fuzz(void)
{
	uint64_t sent = 0, seq = 1, consumed = 0;
	unsigned long errors[16] = { 0 }, skipped = 0, resets = 0;
	uint8_t p[64];
	unsigned q, i;

	while (consumed < total) {
		for (q = 0; q < NQ; q++) {
			for (i = 0; i < RING / 2; i++, sent++) {
				make_packet(p, seq++);
				sdev_push(&D, q, p);
			}
			sdev_doorbell(&D, q);
		}
		for (q = 0; q < NQ; q++) {
			for (;;) {
				uint32_t st = sdev_qrd(&D, q, SPYRE_Q_STATUS);
				int r;

				if (!(st & SPYRE_QSTAT_ENABLED)) {
					/* a packet reset the device or queue through its own BAR */
					consumed += sdev_qrd(&D, q, SPYRE_Q_DONE) + 1;
					sdev_queue_restart(&D, q);
					resets++;
					break;
				}
				r = sdev_wait(&D, q, 50);
				if (r == 0) {
					consumed += sdev_qrd(&D, q, SPYRE_Q_DONE);
					sdev_queue_restart(&D, q);
					break;
				}
				if (r == -1) {
					errors[sdev_qrd(&D, q, SPYRE_Q_ERROR) & 15]++;
					consumed++;
					skipped++;
					sdev_queue_skip(&D, q);
					continue;
				}
				/* stuck (a WAIT that never comes, a huge copy): reset */
				consumed += sdev_qrd(&D, q, SPYRE_Q_DONE) + 1;
				sdev_queue_restart(&D, q);
				resets++;
				break;
			}
		}
	}

	tap_diag("%llu packets sent, %llu consumed by the device, %lu of them failed, "
		 "%lu queue resets", (unsigned long long)sent, (unsigned long long)consumed,
		 skipped, resets);
	for (i = 0; i < 16; i++)
		if (errors[i])
			tap_diag("  error %u: %lu", i, errors[i]);
	TAP_CHECK(consumed >= 10000 || getenv("SPYRE_FUZZ_PACKETS"), "only %llu packets",
		  (unsigned long long)consumed);
	TAP_CHECK(skipped > 100, "only %lu packets failed: the fuzzer is too tame", skipped);
}

/* Still alive and usable. */
static void test_usable_after(void)
{
	uint8_t p[64];

	TAP_EQ(SPYRE_ID_MAGIC, sdev_rd(&D, SPYRE_REG_ID));
	sdev_wr(&D, SPYRE_REG_RESET, SPYRE_RESET_DEVICE);
	sdev_pci_setup(&D);
	sdev_queue_init(&D, 0, 8, 0);
	pkt_nop(p, 424242, 0);
	sdev_submit(&D, 0, p);
	TAP_EQ(0, sdev_wait(&D, 0, 2000));
	TAP_EQ(424242, sdev_rd64(&D, D.q[0].compl));
}

static const struct tap_case cases[] = {
	{ "fuzz", test_fuzz },
	{ "usable_after", test_usable_after },
};

/* Host memory for the packets' addresses, 64 pages mapped in context 0, the queues. */
static void setup(void)
{
	unsigned q, i;

	host_buf = sdev_alloc(&D, 2u << 20, 4096);
	sdev_mmu_init(&D, 2);
	for (i = 0; i < 64; i++)
		sdev_map(&D, 0, i * 4096ull, i % 2 ? host_buf + i * 4096ull : i * 4096ull,
			 (rnd() & 7) | (i % 2 ? 0 : SPYRE_PTE_DEVMEM));
	for (q = 0; q < NQ; q++)
		sdev_queue_init(&D, q, RING, q % 4);
}

int main(int argc, char **argv)
{
	uint64_t seed = 0x5eed5bad;
	const char *e;

	if ((e = getenv("SPYRE_FUZZ_SEED")))
		seed = strtoull(e, NULL, 0);
	if ((e = getenv("SPYRE_FUZZ_PACKETS")))
		total = strtoull(e, NULL, 0);
	rng = seed ? seed : 1;
	tap_diag("seed 0x%llx, %llu packets", (unsigned long long)seed, (unsigned long long)total);
	return SDEV_RUN(&D, "queues=8", 256, setup, cases, argc, argv);
}
