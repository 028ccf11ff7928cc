#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <initializer_list>
#if DEG == 6
static const float c[] = {6.931471825e-01f, 2.402264774e-01f, 5.550332367e-02f, 9.618436918e-03f, 1.339887502e-03f, 1.535336196e-04f};
#else
static const float c[] = {6.931470037e-01f, 2.402224243e-01f, 5.550733581e-02f, 9.671512991e-03f, 1.326472731e-03f};
#endif
constexpr int N = sizeof(c) / sizeof(c[0]);
float ex2p(float y) {
  y = std::fmax(y, -127.f);
  const float t = y + 12582912.f;
  const float j = t - 12582912.f;
  const float f = y - j;
  float p = c[N - 1];
  for (int i = N - 2; i >= 0; --i) p = std::fma(p, f, c[i]);
  const float r = std::fma(p, f, 1.0f);
  int32_t tb; std::memcpy(&tb, &t, 4);
  const int32_t sb = (tb - 0x4B400000 + 127) << 23;
  float s; std::memcpy(&s, &sb, 4);
  return r * s;
}
int main() {
  struct R { const char* n; float lo, hi; } rs[] = {{"[-115,0]",-115,0},{"[-1,0]",-1,0},{"[0,1]",0,1},{"[-12,-4]",-12,-4},{"[0,100]",0,100}};
  for (auto& r : rs) {
    uint64_t s = 0x9E3779B97F4A7C15ull; double su=0, sa=0, sr=0, mx=0; long n=0, neg=0, pos=0;
    for (long i = 0; i < (1<<24); ++i) {
      s ^= s << 13; s ^= s >> 7; s ^= s << 17;
      float y = r.lo + (r.hi - r.lo) * static_cast<float>((s >> 40) * 0x1.0p-24);
      double ref = std::exp2((double)y); float got = ex2p(y);
      if (!(ref > 1.2e-38) || got == 0.f) continue;
      float rf = (float)ref; double ulp = (double)std::nextafter(std::fabs(rf), 1e38f) - std::fabs(rf);
      double e = (got - ref) / ulp; su += e; sa += std::fabs(e); sr += (got-ref)/ref; mx = std::fmax(mx, std::fabs(e)); n++; neg += e<0; pos += e>0;
    }
    std::printf("%-10s mean %+.4f ulp |err| %.4f max %.3f rel %+.3e below %.3f above %.3f\n", r.n, su/n, sa/n, mx, sr/n, double(neg)/n, double(pos)/n);
  }
  // edge cases
  for (float y : {-126.f, -126.4f, -126.6f, -127.f, -200.f, -1e30f, 0.f, 127.f, 127.4f}) std::printf("2^%g = %g (exact %g)\n", y, ex2p(y), std::exp2((double)y));
}
