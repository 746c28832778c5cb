// The synthetic click log (see MakeSyntheticSource in criteo_reader.h). Every random quantity is
// a hash of its coordinates, so the ground truth needs no tables and any row can be regenerated.
#include <cmath>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "trainer/criteo_reader.h"
#include "trainer/feature_id.h"

namespace evoscale::trainer {
namespace {

constexpr uint64_t kTruthSeed = 1234;

constexpr uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double Uniform(uint64_t h) { return (double(h >> 11) + 0.5) / double(uint64_t{1} << 53); }

// A standard normal that is a pure function of h.
double Normal(uint64_t h) {
  const double u1 = Uniform(SplitMix(h));
  const double u2 = Uniform(SplitMix(h ^ 0xA5A5A5A5A5A5A5A5ull));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

uint64_t Coord(uint64_t a, uint64_t b, uint64_t c = 0) {
  return SplitMix(SplitMix(SplitMix(kTruthSeed ^ a) ^ b) ^ c);
}

struct Truth {
  int64_t vocab[kNumCategorical];
  uint32_t salt[kNumCategorical];
  double dense_w[kNumDense];
  double lambda[kNumDense];
  Truth() {
    const int64_t big[6] = {2000000, 500000, 100000, 50000, 20000, 5000};
    for (int f = 0; f < kNumCategorical; ++f) {
      vocab[f] = f < 6 ? big[f] : 10 + int64_t(Uniform(Coord(1, f)) * 199990);
      salt[f] = uint32_t(1 + (Coord(2, f) % 0x7FFFFFFE));
    }
    for (int j = 0; j < kNumDense; ++j) {
      dense_w[j] = 0.3 * Normal(Coord(3, j));
      lambda[j] = 0.5 + 49.5 * Uniform(Coord(4, j));
    }
  }
  double IdWeight(int f, int64_t id) const { return 0.6 * Normal(Coord(5, f, uint64_t(id))); }
  double Cross(int64_t a, int64_t b) const {
    return 0.8 * Normal(Coord(6, uint64_t(a), uint64_t(b)));
  }
};

const Truth& GetTruth() {
  static const Truth* const kTruth = new Truth();
  return *kTruth;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return SplitMix(state_ += 0x9E3779B97F4A7C15ull); }
  double Uniform01() { return (double(Next() >> 11) + 0.5) / double(uint64_t{1} << 53); }

 private:
  uint64_t state_;
};

// numpy's Generator.zipf rejection sampler (Devroye), a > 1.
int64_t Zipf(Rng& rng, double a) {
  const double am1 = a - 1.0;
  const double b = std::pow(2.0, am1);
  while (true) {
    const double u = 1.0 - rng.Uniform01();
    const double v = rng.Uniform01();
    const double x = std::floor(std::pow(u, -1.0 / am1));
    if (x > 9.2e18 || x < 1.0) continue;
    const double t = std::pow(1.0 + 1.0 / x, am1);
    if (v * x * (t - 1.0) / (b - 1.0) <= t / b) return int64_t(x);
  }
}

int64_t Poisson(Rng& rng, double lambda) {
  if (lambda < 30) {
    const double limit = std::exp(-lambda);
    double p = 1.0;
    int64_t k = -1;
    do {
      ++k;
      p *= rng.Uniform01();
    } while (p > limit);
    return k;
  }
  const double u1 = rng.Uniform01(), u2 = rng.Uniform01();
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  return std::max<int64_t>(0, int64_t(std::llround(lambda + std::sqrt(lambda) * z)));
}

// The categorical value gen_synth.py writes for id `id` of field f.
uint64_t CategoricalValue(const Truth& truth, int f, int64_t id) {
  return (uint64_t(id) * 2654435761ull + truth.salt[f]) & 0xFFFFFFFFull;
}

double Logit(const Truth& truth, const float* dense, const int64_t* ids) {
  double logit = -1.3;
  double w = 0;
  for (int f = 0; f < kNumCategorical; ++f) w += truth.IdWeight(f, ids[f]);
  logit += 0.35 * w;
  for (int j = 0; j < kNumDense; ++j) logit += 0.3 * (double(dense[j]) - 1.5) * truth.dense_w[j];
  logit += 0.5 * truth.Cross(ids[0] % 64, ids[1] % 64);
  return logit;
}

class SyntheticSource : public ExampleSource {
 public:
  SyntheticSource(int64_t rows, uint64_t seed, int epochs, ReaderPosition start)
      : rows_(rows), seed_(seed), epochs_(epochs), pos_(start) {}

  absl::StatusOr<bool> Next(float* label, float* dense, uint64_t* fids, int64_t* row) override {
    if (pos_.row >= rows_) {
      if (pos_.epoch + 1 >= epochs_) return false;
      ++pos_.epoch;
      pos_.row = 0;
    }
    if (rows_ <= 0) return false;
    const Truth& truth = GetTruth();
    Rng rng(SplitMix(seed_ * 0x9E3779B97F4A7C15ull ^ SplitMix(uint64_t(pos_.row))));
    int64_t ids[kNumCategorical];
    for (int f = 0; f < kNumCategorical; ++f) {
      ids[f] = (Zipf(rng, 1.15) - 1) % truth.vocab[f];
      fids[f] = MakeFid(uint32_t(f), CategoricalValue(truth, f, ids[f]));
    }
    for (int j = 0; j < kNumDense; ++j) {
      dense[j] = std::log1p(float(Poisson(rng, truth.lambda[j])));
    }
    const double p = 1.0 / (1.0 + std::exp(-Logit(truth, dense, ids)));
    *label = rng.Uniform01() < p ? 1.0f : 0.0f;
    *row = pos_.row++;
    ++lines_;
    return true;
  }

  // Rows are generated from their index alone, so one another rank reads costs nothing here.
  int64_t NextRow() override {
    if (pos_.row >= rows_) {
      if (pos_.epoch + 1 >= epochs_ || rows_ <= 0) return -1;
      ++pos_.epoch;
      pos_.row = 0;
    }
    return pos_.row;
  }
  void SkipNext() override {
    ++pos_.row;
    ++lines_;
  }

  ReaderPosition position() const override { return pos_; }
  int64_t lines() const override { return lines_; }
  std::string name() const override { return absl::StrCat("synthetic(", rows_, ")"); }

 private:
  const int64_t rows_;
  const uint64_t seed_;
  const int epochs_;
  ReaderPosition pos_;
  int64_t lines_ = 0;
};

}  // namespace

std::unique_ptr<ExampleSource> MakeSyntheticSource(int64_t rows, uint64_t seed, int epochs,
                                                   ReaderPosition start) {
  return std::make_unique<SyntheticSource>(rows, seed, epochs, start);
}

}  // namespace evoscale::trainer
