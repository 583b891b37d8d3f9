// Element-wise helpers the compiled loops share: exp, sigmoid and tanh as branch-free
// float code the compiler vectorises (libm's are scalar calls), and bf16 loads / stores
// with round-to-nearest-even, as torch's own conversion.
#pragma once

#include <cstdint>
#include <cstring>

namespace compgen {

// exp(x) for x in [-87, 88]: 2^n * p(r), r = x - n ln 2 in [-ln2/2, ln2/2], p of degree 6
// (relative error < 2e-7).
inline float exp_(float x) {
  x = x < -87.f ? -87.f : x;
  x = x > 88.f ? 88.f : x;
  const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  const float r = x - n * 0.693145751953125f - n * 1.428606765330187045e-06f;
  const float p = 1.f + r * (1.f + r * (0.5f + r * (0.16666666f + r * (0.041666668f +
                  r * (0.0083333338f + r * 0.0013888889f)))));
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline float sigmoid(float x) { return 1.f / (1.f + exp_(-x)); }
inline float tanh_(float x) { return 2.f / (1.f + exp_(-2.f * x)) - 1.f; }

inline float load(float x) { return x; }
// bf16 values travel as their raw bits (uint16_t), which the compiler vectorises
inline float load(uint16_t x) {
  const uint32_t bits = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline void store(float* p, float v) { *p = v; }
inline void store(uint16_t* p, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  *p = static_cast<uint16_t>(bits >> 16);
}

}  // namespace compgen
