#include "search/internal/genome.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "search/internal/evolution.h"
#include "search/internal/sampling.h"
#include "search/types.h"

namespace evoscale::search::internal {
namespace {

ParameterConfig Number(std::string name, ParameterType type, double min, double max,
                       ScaleType scale = ScaleType::kLinear) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = type;
  p.scale = scale;
  p.min = min;
  p.max = max;
  return p;
}

ParameterConfig Categorical(std::string name, std::vector<std::string> categories) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = ParameterType::kCategorical;
  p.categories = std::move(categories);
  return p;
}

// kind in {a, b}; a -> width (integer 1..4); b -> rate (log double).
SearchSpace ConditionalSpace() {
  ParameterConfig kind = Categorical("kind", {"a", "b"});
  ConditionalChild when_a;
  when_a.parent_categories = {"a"};
  when_a.parameters.push_back(Number("width", ParameterType::kInteger, 1, 4));
  ConditionalChild when_b;
  when_b.parent_categories = {"b"};
  when_b.parameters.push_back(Number("rate", ParameterType::kDouble, 1e-4, 1, ScaleType::kLog));
  kind.children = {when_a, when_b};
  SearchSpace space;
  space.parameters = {kind};
  return space;
}

TEST(GenomeCodecTest, RoundTripsEveryKindAndScale) {
  ParameterConfig discrete;
  discrete.name = "units";
  discrete.type = ParameterType::kDiscrete;
  discrete.discrete_values = {32, 64, 128};
  SearchSpace space;
  space.parameters = {Number("lin", ParameterType::kDouble, -2, 3),
                      Number("log", ParameterType::kDouble, 1e-5, 1e-1, ScaleType::kLog),
                      Number("rev", ParameterType::kDouble, 1e-3, 1, ScaleType::kReverseLog),
                      Number("int", ParameterType::kInteger, -3, 7),
                      Number("ilog", ParameterType::kInteger, 16, 1024, ScaleType::kLog),
                      discrete, Categorical("opt", {"sgd", "adam", "ftrl"})};
  const GenomeCodec codec(space);
  ASSERT_EQ(codec.size(), 7u);
  EXPECT_EQ(codec.kind(0), GeneKind::kContinuous);
  EXPECT_EQ(codec.kind(3), GeneKind::kOrdinal);
  EXPECT_EQ(codec.kind(6), GeneKind::kCategorical);
  EXPECT_EQ(codec.cardinality(3), 11);
  const ParameterDict params = {{"lin", 0.5},         {"log", 1e-3},        {"rev", 0.99},
                                {"int", int64_t{6}},  {"ilog", int64_t{100}}, {"units", 64.0},
                                {"opt", std::string("ftrl")}};
  const Genome genome = codec.Encode(params);
  for (double gene : genome) {
    EXPECT_GE(gene, 0);
    EXPECT_LE(gene, 1);
  }
  const ParameterDict decoded = codec.Decode(genome);
  EXPECT_NEAR(std::get<double>(decoded.at("lin")), 0.5, 1e-12);
  EXPECT_NEAR(std::get<double>(decoded.at("log")), 1e-3, 1e-15);
  EXPECT_NEAR(std::get<double>(decoded.at("rev")), 0.99, 1e-12);
  EXPECT_EQ(decoded.at("int"), ParameterValue(int64_t{6}));
  EXPECT_EQ(decoded.at("ilog"), ParameterValue(int64_t{100}));
  EXPECT_EQ(decoded.at("units"), ParameterValue(64.0));
  EXPECT_EQ(decoded.at("opt"), ParameterValue(std::string("ftrl")));
}

TEST(GenomeCodecTest, ForeignValuesAreClampedSnappedOrCentred) {
  ParameterConfig discrete;
  discrete.name = "units";
  discrete.type = ParameterType::kDiscrete;
  discrete.discrete_values = {32, 64, 128};
  SearchSpace space;
  space.parameters = {Number("x", ParameterType::kDouble, 0, 1), discrete,
                      Categorical("c", {"p", "q", "r"})};
  const GenomeCodec codec(space);
  const Genome genome =
      codec.Encode({{"x", 7.0}, {"units", 70.0}, {"c", std::string("unknown")}});
  EXPECT_EQ(genome[0], 1.0);
  EXPECT_EQ(codec.Decode(genome).at("units"), ParameterValue(64.0));
  EXPECT_EQ(codec.Decode(genome).at("c"), ParameterValue(std::string("q")));  // the middle
  // A missing parameter gets the middle too.
  EXPECT_EQ(codec.Encode({})[0], 0.5);
}

TEST(GenomeCodecTest, InactiveChildrenAreCarriedButNotDecoded) {
  const GenomeCodec codec(ConditionalSpace());
  ASSERT_EQ(codec.size(), 3u);  // kind, width, rate
  const Genome a = {0.1, 0.99, 0.5};
  EXPECT_EQ(codec.Decode(a), (ParameterDict{{"kind", std::string("a")}, {"width", int64_t{4}}}));
  const Genome b = {0.9, 0.99, 1.0};
  EXPECT_EQ(codec.Decode(b), (ParameterDict{{"kind", std::string("b")}, {"rate", 1.0}}));
}

TEST(GenomeCodecTest, OutOfRangeGenesDecodeInsideTheBounds) {
  SearchSpace space;
  space.parameters = {Number("x", ParameterType::kDouble, -1, 1),
                      Number("n", ParameterType::kInteger, 2, 5)};
  const GenomeCodec codec(space);
  const ParameterDict low = codec.Decode(Genome{-3, -3});
  const ParameterDict high = codec.Decode(Genome{4, std::nan("")});
  EXPECT_EQ(low.at("x"), ParameterValue(-1.0));
  EXPECT_EQ(low.at("n"), ParameterValue(int64_t{2}));
  EXPECT_EQ(high.at("x"), ParameterValue(1.0));
  EXPECT_EQ(high.at("n"), ParameterValue(int64_t{2}));  // NaN clamps to the low end
}

TEST(FingerprintTest, EqualForEqualDictsAndSensitiveToTypeNameAndValue) {
  const ParameterDict a = {{"x", 1.0}, {"c", std::string("q")}};
  EXPECT_EQ(Fingerprint(a), Fingerprint(ParameterDict{{"c", std::string("q")}, {"x", 1.0}}));
  EXPECT_NE(Fingerprint(a), Fingerprint(ParameterDict{{"x", int64_t{1}}, {"c", std::string("q")}}));
  EXPECT_NE(Fingerprint(a), Fingerprint(ParameterDict{{"y", 1.0}, {"c", std::string("q")}}));
  EXPECT_NE(Fingerprint(a), Fingerprint(ParameterDict{{"x", 1.5}, {"c", std::string("q")}}));
  EXPECT_EQ(Fingerprint({{"x", 0.0}}), Fingerprint({{"x", -0.0}}));
}

TEST(ReflectIntoUnitTest, MirrorsAtBothBounds) {
  EXPECT_DOUBLE_EQ(ReflectIntoUnit(0.25), 0.25);
  EXPECT_DOUBLE_EQ(ReflectIntoUnit(-0.25), 0.25);
  EXPECT_DOUBLE_EQ(ReflectIntoUnit(1.25), 0.75);
  EXPECT_DOUBLE_EQ(ReflectIntoUnit(2.25), 0.25);
  EXPECT_DOUBLE_EQ(ReflectIntoUnit(std::nan("")), 0.5);
}

// --- Operators on edge cases ----------------------------------------------------------------

TEST(OperatorsTest, FixedGenesNeverMove) {
  SearchSpace space;
  space.parameters = {Categorical("single", {"only"}),
                      Number("fixed", ParameterType::kInteger, 5, 5),
                      Number("pinned", ParameterType::kDouble, 0.5, 0.5),
                      Number("free", ParameterType::kDouble, 0, 1)};
  const GenomeCodec codec(space);
  EXPECT_TRUE(codec.fixed(0));
  EXPECT_TRUE(codec.fixed(1));
  EXPECT_TRUE(codec.fixed(2));
  EXPECT_FALSE(codec.fixed(3));
  SplitMix64 rng(3);
  const Genome a = {0.5, 0.5, 0.5, 0.2};
  const Genome b = {0.5, 0.5, 0.5, 0.8};
  for (int i = 0; i < 200; ++i) {
    Genome child = Crossover(codec, a, b, 2, rng);
    EXPECT_EQ(Mutate(codec, 1.0, 0.3, 0.5, true, rng, child), 1);  // only "free" can move
    EXPECT_EQ(codec.Decode(child).at("single"), ParameterValue(std::string("only")));
    EXPECT_EQ(codec.Decode(child).at("fixed"), ParameterValue(int64_t{5}));
    EXPECT_EQ(codec.Decode(child).at("pinned"), ParameterValue(0.5));
    EXPECT_GE(child[3], 0);
    EXPECT_LE(child[3], 1);
  }
}

TEST(OperatorsTest, AllFixedSpaceMutatesNothing) {
  SearchSpace space;
  space.parameters = {Categorical("single", {"only"})};
  const GenomeCodec codec(space);
  SplitMix64 rng(1);
  Genome genome = {0.5};
  EXPECT_EQ(Mutate(codec, 1.0, 0.3, 0.5, /*at_least_one=*/true, rng, genome), 0);
  EXPECT_EQ(genome[0], 0.5);
}

TEST(OperatorsTest, CategoricalMutationAlwaysPicksAnotherCategory) {
  SearchSpace space;
  space.parameters = {Categorical("c", {"p", "q", "r"})};
  const GenomeCodec codec(space);
  SplitMix64 rng(9);
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    Genome genome = codec.Encode({{"c", std::string("q")}});
    MutateGene(codec, 0, 0.1, 0, rng, genome);
    const std::string value = std::get<std::string>(codec.Decode(genome).at("c"));
    EXPECT_NE(value, "q");
    seen.insert(value);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"p", "r"}));
}

TEST(OperatorsTest, OrdinalMutationMovesAtLeastAboutOneCell) {
  SearchSpace space;
  space.parameters = {Number("n", ParameterType::kInteger, 0, 1)};
  const GenomeCodec codec(space);
  SplitMix64 rng(5);
  int changed = 0;
  for (int i = 0; i < 200; ++i) {
    Genome genome = codec.Encode({{"n", int64_t{0}}});
    MutateGene(codec, 0, /*scale=*/1e-6, /*uniform_share=*/0, rng, genome);
    changed += codec.Decode(genome).at("n") != ParameterValue(int64_t{0});
  }
  EXPECT_GT(changed, 40);  // a tiny step would never leave the cell
}

}  // namespace
}  // namespace evoscale::search::internal
