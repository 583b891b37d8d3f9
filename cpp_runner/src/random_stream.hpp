// The counter-based random stream of compgen/random_stream.py, bit for bit:
//   x = splitmix64(splitmix64(splitmix64(seed) ^ index) ^ step); u = (x >> 11) * 2^-53
// Every random choice of sampling is a function of (seed, sample index, step), so it does
// not depend on batching, thread timing or the backend.
#pragma once

#include <cstdint>

namespace compgen {

constexpr uint64_t kLatentStep = uint64_t{1} << 32;  // steps of the latent prior's draws

inline uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

inline uint64_t stream_bits(uint64_t seed, uint64_t index, uint64_t step) {
  return splitmix64(splitmix64(splitmix64(seed) ^ index) ^ step);
}

inline double stream_uniform(uint64_t seed, uint64_t index, uint64_t step) {
  return static_cast<double>(stream_bits(seed, index, step) >> 11) * 0x1.0p-53;
}

}  // namespace compgen
