"""Bugs planted in copies of the sources (build_emulated.py ``mutations``) that the tests must catch: each is guarded
by ``::cuda_emu::plantedBug(id)``, so one variant library carries them all and a test switches on one at a time
(``EmulatedKernels.set_planted_bug``). The real sources are never edited; a mutation that no longer applies fails
the build, and with it the test, so the planted bugs cannot silently go stale.
"""
from emulation import build_emulated

EMULATOR = build_emulated.EMULATOR_MUTATION_PATH
FLASH = "blockifyAttention/blockifyFlash.cuh"
BLOCKIFY_COMMON = "blockifyAttention/blockifyCommon.cuh"

#: id -> (what the bug is, its mutations)
BUGS = {
    # the flash kernel's main loop reads key tile t before its cp.async group has landed
    1: ("flash: missing cp.async wait",
        ((FLASH, "        async::wait<1>(); // this thread's copies of tile t have landed\n",
          "        if (!::cuda_emu::plantedBug(1)) async::wait<1>(); // planted\n"),)),
    # V fragments loaded like K (no transpose; in valueFragments, which the flash kernel shares with the warp kernel)
    2: ("flash: V without ldmatrix.trans",
        ((BLOCKIFY_COMMON, "    mma::ldmatrixX4Trans(\n",
          "    (::cuda_emu::plantedBug(2) ? mma::ldmatrixX4 : mma::ldmatrixX4Trans)( // planted\n"),)),
    # a warp refills the ring stage the others still read
    3: ("flash: missing barrier before a ring stage is refilled",
        ((FLASH, "        __syncthreads(); // every warp is done with this stage before the next iteration refills it\n",
          "        if (!::cuda_emu::plantedBug(3)) __syncthreads(); // planted\n"),)),
    # the emulator's ldmatrix .trans distributing like the plain form
    4: ("emulator: ldmatrix .trans layout",
        ((EMULATOR, "                std::memcpy(&lo, rows[8 * j + 2 * (lane % 4)] + 2 * (lane / 4), 2);\n"
                    "                std::memcpy(&hi, rows[8 * j + 2 * (lane % 4) + 1] + 2 * (lane / 4), 2);\n",
          "                std::memcpy(&lo, plantedBug(4) ? rows[8 * j + lane / 4] + 2 * (2 * (lane % 4))\n"
          "                    : rows[8 * j + 2 * (lane % 4)] + 2 * (lane / 4), 2); // planted\n"
          "                std::memcpy(&hi, plantedBug(4) ? rows[8 * j + lane / 4] + 2 * (2 * (lane % 4) + 1)\n"
          "                    : rows[8 * j + 2 * (lane % 4) + 1] + 2 * (lane / 4), 2);\n"),)),
    # the emulator's cp.async landing at issue instead of at its wait_group
    5: ("emulator: cp.async not deferred",
        ((EMULATOR, "    fillWords(destination, 16, kPoisonWord); // undefined until the copy's group is waited on\n",
          "    if (plantedBug(5)) std::memcpy(destination, copy.data, 16); else fillWords(destination, 16, kPoisonWord);\n"),)),
    # the emulator's ex2.approx exact
    6: ("emulator: ex2.approx exact",
        ((EMULATOR, "    return static_cast<float>(exact * ((hash & 1U) != 0 ? 1.0 + error : 1.0 - error));\n",
          "    return plantedBug(6) ? static_cast<float>(exact) // planted\n"
          "                         : static_cast<float>(exact * ((hash & 1U) != 0 ? 1.0 + error : 1.0 - error));\n"),)),
    # the emulator's traffic counters taking at most 4 bytes of an access
    7: ("emulator: traffic counts at most 4 bytes per access",
        ((EMULATOR, "        uintptr_t const high = std::min(begin + bytes, region.end);\n",
          "        uintptr_t const high = std::min(begin + (plantedBug(7) ? std::min<size_t>(bytes, 4) : bytes), region.end);\n"),)),
}

MUTATIONS = tuple(mutation for _, mutations in (BUGS[bug] for bug in sorted(BUGS)) for mutation in mutations)


def variant_library():
    """The emulated library with every planted bug (all off until set_planted_bug); raises RewriteError when a
    mutation no longer applies."""
    return build_emulated.cached_build(mutations=MUTATIONS)
