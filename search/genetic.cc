// GENETIC: an asynchronous steady-state genetic algorithm with a memetic CMA-ES step, a
// learned model of the objective whose acquisition the GA maximises, and adaptive choice
// among its moves.
//
// - The model's move (kModel, prior share model_share): a Gaussian process of the objective
//   (internal/gp_model.h: Matérn-5/2 with one length scale per gene, categorical and
//   conditional genes native, warped targets, maximum a-posteriori hyperparameters refitted
//   at trial-count checkpoints) on at most kModelMaxPoints trials, and log expected
//   improvement maximised over model_candidates offspring of the other moves (CMA-ES draws,
//   GA children, Parzen draws, uniform points, mutants of the elite), the best few refined
//   by gradient steps and one-gene moves (internal/acquisition.h). Pending trials, and the
//   earlier suggestions of a batch, are exact fantasies no better than the incumbent, so
//   eight workers get eight different points. Where the model does not pay (rugged
//   landscapes) the adaptive choice below moves the share to the GA's own moves.
//
// - The first population_size trials are quasi-random (the QUASI_RANDOM designer's Halton
//   points for the same seed).
// - Every completed trial competes for a place in the population at once (no generation
//   barrier): it replaces the worst member when it is better (elitism: the best never
//   leaves). Failed, infeasible and unrankable trials are worst and never breed.
// - Each offspring comes from one of five moves: a draw from a CMA-ES model of the region
//   around the elite (the memetic step; categorical genes from a tournament winner); a GA
//   child (two tournament parents, SBX / uniform crossover with probability crossover_rate,
//   then per-gene mutation whose Gaussian step follows the 1/5 success rule); each of those
//   two screened, that is the best of `candidates` draws by the surrogate's prediction; and
//   the best of `candidates` draws from a Parzen density on the best trials (TPE's proposal,
//   internal/parzen.h). The surrogate is a Gaussian process on the trials' ranks
//   (internal/gp.h), native to categorical, integer, log-scaled and conditional parameters.
//   Screened CMA-ES draws share one step length, so screening picks a direction and leaves
//   the model's step-size control alone.
// - Adaptive operator choice: a move's share follows what it paid recently (probability
//   matching on a decayed mean reward: 1 for a trial better than the population's median, 2
//   for a new best), never below min_move_share. The move of a suggestion is fixed by the
//   first draw of its stream and the shares at the time, so the designer tells which move
//   made a trial when it completes from its index alone; the state stays a function of the
//   completed trials in order.
// - Diversity: pending trials and this call's suggestions repel new candidates (spread
//   radius tied to the model's step size), duplicates of tried or pending points are
//   redrawn, and on stagnation (the model's step collapses or the best stops improving) the
//   model restarts around another member of the elite with its initial step.
//
// - Cost-aware, when the study has a budget in core-seconds and a max_step: a second Gaussian
//   process learns the log core-seconds of a full run from every completed trial (a full run
//   as measured; a stopped one extrapolated from its elapsed time at the step it reached, by
//   the study's median exponent of time in steps) and from the running ones (extrapolated the
//   same way, as they report), and screening ranks candidates by quality rank + alpha x cost
//   rank, alpha = kCostWeight x the share of the budget still unspent: the search starts cheap
//   and ends on quality alone. A log-linear model of the same costs (internal/linear_cost.h:
//   unlike the GP it extrapolates, so a handful of trials tell which parameters make a run
//   dear) caps every suggestion, the initial design's included: a draw predicted dearer than
//   the median configuration, or than the budget left can fund at the trials' pace, is redrawn
//   (where the trials' full runs differ less than kMinCostSpread-fold, there is nothing to cap).
//   A running trial that has reported little while later ones ran longer teaches both models
//   that it is dear (it has run at least that long). With a budget the initial population is
//   10: a budget of ten or thirty full runs starts a few dozen trials.
//
// Cost per suggestion: a move, plus for a screened one `candidates` draws and GP predictions
// (O(candidates m d), m <= 80 points); per Update the surrogates' fits (gp.h, parzen.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "Eigen/Dense"
#include "absl/types/span.h"
#include "search/designer.h"
#include "search/internal/acquisition.h"
#include "search/internal/cma.h"
#include "search/internal/cost_aware.h"
#include "search/internal/evolution.h"
#include "search/internal/evolutionary_designers.h"
#include "search/internal/fitness.h"
#include "search/internal/genome.h"
#include "search/internal/gp.h"
#include "search/internal/gp_model.h"
#include "search/internal/linear_cost.h"
#include "search/internal/parzen.h"
#include "search/internal/sampling.h"
#include "search/types.h"

namespace evoscale::search::internal {
namespace {

struct GeneticOptions {
  int population_size = 0;
  double mutation_rate = 0;
  double crossover_rate = 0;
  int tournament_size = 0;
  double local_search_rate = 0;
  double initial_step = 0;
  int candidates = 0;
  double min_move_share = 0;
  double reward_decay = 0;
  double model_share = 0;
  int model_candidates = 0;
};

GeneticOptions ReadOptions(const ProblemStatement& problem, size_t genes) {
  const auto& s = problem.settings;
  const double n = std::max<double>(1, static_cast<double>(genes));
  GeneticOptions o;
  // Small enough to start breeding early in a study of a few hundred trials, large enough to
  // cover the space once.
  const bool budget = problem.budget_core_seconds > 0 && problem.max_step > 0;
  o.population_size = static_cast<int>(SettingOr(s, "population_size", budget ? 10.0 : std::clamp(2 * n, 10.0, 40.0)));
  o.mutation_rate = SettingOr(s, "mutation_rate", 1 / n);
  o.crossover_rate = SettingOr(s, "crossover_rate", 0.9);
  o.tournament_size = static_cast<int>(SettingOr(s, "tournament_size", 2));
  o.local_search_rate = SettingOr(s, "local_search_rate", 0.5);
  o.initial_step = SettingOr(s, "initial_step", 0.08);
  o.candidates = static_cast<int>(std::clamp(SettingOr(s, "candidates", 32.0), 1.0, 256.0));
  o.min_move_share = std::clamp(SettingOr(s, "min_move_share", 0.05), 0.0, 0.2);
  o.reward_decay = std::clamp(SettingOr(s, "reward_decay", 0.97), 0.0, 1.0);
  // Budgeted studies keep the screened moves alone for now (the model's cost-aware
  // acquisition is not there yet).
  o.model_share = budget ? 0 : std::clamp(SettingOr(s, "model_share", 0.6), 0.0, 1.0);
  o.model_candidates =
      static_cast<int>(std::clamp(SettingOr(s, "model_candidates", 160.0), 8.0, 4096.0));
  return o;
}

// A restart stream no trial index reaches.
constexpr uint64_t kRestartStream = std::numeric_limits<uint64_t>::max() - 1;
// SBX distribution index. This large, each child gene stays very close to one parent's (in
// effect uniform crossover with a slight blend), which keeps good coordinates of separable
// problems intact; tuned on the peer functions (bench/search).
constexpr double kSbxEta = 1000;
// Share of numeric mutations that redraw the gene uniformly (escapes from a basin).
constexpr double kUniformShare = 0.2;
// Bounds of the GA's mutation step (genome space).
constexpr double kMinMutationStep = 0.01;
constexpr double kMaxMutationStep = 0.2;
// Pending points repel candidates within this share of the model's typical sample distance.
constexpr double kSpread = 0.3;
// Cost-aware screening: the weight of a candidate's predicted cost rank against its predicted
// quality rank at the start of a budget (it falls to 0 as the budget is spent).
constexpr double kCostWeight = 1.0;
// The cost model fits from this many costed trials (running ones included), fewer than the
// quality model needs: what a trial costs mostly follows a few parameters (rounds, depth,
// batch size), and a budget of ten full runs has started only a dozen trials.
constexpr size_t kCostMinPoints = 4;
// While the initial population is drawn under a budget, each point is the cheapest by the
// cost model of 1 + kInitialCostDraws x alpha candidates (its quasi-random point and uniform
// draws): the first trials lean cheap without collapsing onto the cheapest corner.
constexpr double kInitialCostDraws = 3;
// Under a budget, a suggestion must be affordable once the cost model is fitted: predicted no
// dearer than the kCostCapQuantile quantile of the model's predictions over kCostCapDraws
// uniform configurations (the cheaper share of the space, not of the trials already run, so
// the cap does not ratchet down); a draw that is not is redrawn up to kCostRedraws times,
// the cheapest kept when none is.
constexpr double kCostCapQuantile = 0.5;
constexpr int kCostCapDraws = 64;
constexpr double kMinCostSpread = 2;
constexpr int kCostRedraws = 16;
constexpr uint64_t kCostCapStream = std::numeric_limits<uint64_t>::max() - 2;

// What a completed trial tells of the cost of a full run of its parameters.
struct CostPoint {
  Genome genome;
  int64_t id = 0;           // the trial's: ids follow creation
  double core_seconds = 0;  // what it spent: cores x its latest elapsed seconds
  double elapsed = 0;       // its latest elapsed seconds
  int64_t step = 0;         // the furthest step it reported
  double exponent = std::numeric_limits<double>::quiet_NaN();  // its elapsed ~ step^exponent
};

// The cost point of `trial`, or nullopt when it reported no elapsed time.
std::optional<CostPoint> CostOf(const Genome& genome, const Trial& trial) {
  CostPoint point{.genome = genome, .id = trial.id};
  const Measurement* first = nullptr;  // the first report with elapsed time and a step
  double elapsed = 0;
  for (const Measurement& m : trial.measurements) {
    point.step = std::max(point.step, m.step);
    elapsed = std::max(elapsed, m.elapsed_seconds);
    if (first == nullptr && m.elapsed_seconds > 0 && m.step > 0) first = &m;
  }
  point.step = std::max(point.step, trial.final_measurement.step);
  elapsed = std::max(elapsed, trial.final_measurement.elapsed_seconds);
  if (!(elapsed > 0)) return std::nullopt;
  point.elapsed = elapsed;
  point.core_seconds = elapsed * (trial.cpu_cores > 0 ? trial.cpu_cores : 1);
  if (first != nullptr && point.step > first->step && elapsed > first->elapsed_seconds) {
    point.exponent =
        ElapsedExponentBetween(first->step, first->elapsed_seconds, point.step, elapsed);
  }
  return point;
}

// The moves an offspring can come from. kModel: the acquisition's maximum over offspring of
// all the others (gp_model.h, acquisition.h).
enum Move : int { kCma, kCmaScreened, kGa, kGaScreened, kParzen, kModel, kMoves };

// The model of the objective sees at most this many trials: the best half and the most
// recent half (past it a suggestion's cost stops growing with the study).
constexpr size_t kModelMaxPoints = 256;
// Of the model's candidates, the share drawn around the best trials (local moves).
constexpr double kModelLocalShare = 0.25;
// The acquisition's best candidates refined by local search.
constexpr int kModelRefined = 4;
// At most this many pending points (the latest) are fantasies: each costs O(n^2).
constexpr size_t kMaxFantasies = 64;
// The model needs this many ranked trials.
constexpr size_t kModelMinPoints = 5;
// The Gaussian step of the elite's mutants among the model's candidates (genome space).
constexpr double kModelLocalStep = 0.05;

// The trial counts at which the model's hyperparameters are refitted: every count up to
// kEveryFitUntil, then each 1/16 more than the last. A model uses the hyperparameters fitted
// at the last of them reached, so they are a function of the trials (not of how updates
// were batched) and a study of 10,000 trials refits them about 70 times.
constexpr size_t kEveryFitUntil = 40;
size_t HyperparameterCheckpoint(size_t n) {
  if (n <= kEveryFitUntil) return n;
  size_t c = kEveryFitUntil;
  while (true) {
    const size_t next = c + std::max<size_t>(1, c / 16);
    if (next > n) return c;
    c = next;
  }
}

class GeneticDesigner final : public EvolutionaryDesigner {
 public:
  GeneticDesigner(const ProblemStatement& problem, const GeneticOptions& options)
      : EvolutionaryDesigner(problem, /*single_objective=*/true, options.population_size),
        options_(options),
        seed_(problem.seed),
        parzen_(codec()),
        gp_(codec()),
        model_(codec()),
        cost_gp_(codec(), kCostMinPoints),
        linear_cost_(codec(), kCostMinPoints),
        budget_(problem.budget_core_seconds),
        max_step_(problem.max_step) {
    // Starting shares: local_search_rate for the two CMA-ES moves, the rest for the others.
    // and model_share for the model's move.
    const double rest = 1 - options_.model_share;
    const double cma = rest * options_.local_search_rate / 2,
                 other = rest * (1 - options_.local_search_rate) / 3;
    prior_ = {cma, cma, other, other, other, options_.model_share};
    for (size_t g = 0; g < codec().size(); ++g) {
      if (!codec().fixed(g) && codec().kind(g) != GeneKind::kCategorical) {
        numeric_genes_.push_back(g);
      }
    }
    if (!numeric_genes_.empty()) cma_.emplace(static_cast<int>(numeric_genes_.size()));
    mutation_scale_ = std::clamp(options_.initial_step, kMinMutationStep, kMaxMutationStep);
    stagnation_limit_ = cma_.has_value() ? std::max(40, 6 * cma_->lambda()) : 0;
  }

 private:
  struct Member {
    Genome genome;
    Fitness fitness;
    int64_t order = 0;  // completion order, for stable tie-breaking
  };

  bool Ready() const override { return population_.size() >= 2; }

  double SpreadRadius() const override {
    if (!cma_.has_value() || !cma_->initialized()) return 0;
    return kSpread * cma_->TypicalStdDev() * std::sqrt(static_cast<double>(numeric_genes_.size()));
  }

  void Observe(const Genome& genome, const Fitness& fitness, int64_t trial_index) override {
    history_.push_back(genome);
    history_fitness_.push_back(fitness);
    if (!fitness.failed && !fitness.losses.empty()) ++ranked_;
    const bool full = static_cast<int>(population_.size()) >= options_.population_size;
    // The 1/5 success rule on the GA's mutation step: a success is a trial better than the
    // population's median member (beating the worst is too easy early on).
    if (full) {
      int worse_members = 0;
      for (const Member& m : population_) worse_members += Better(fitness, m.fitness);
      const bool success = 2 * worse_members > static_cast<int>(population_.size());
      mutation_scale_ *= std::exp(success ? 0.8 / 3 : -0.2 / 3);
      mutation_scale_ = std::clamp(mutation_scale_, kMinMutationStep, kMaxMutationStep);
      // Credit the move that made this trial (when this designer bred it).
      if (trial_index >= options_.population_size && Ready()) {
        SplitMix64 rng = SuggestionStream(trial_index);
        const Move move = PickMove(rng.NextUnit());
        const bool new_best = !fitness.failed && (best_.failed || Better(fitness, best_));
        for (int m = 0; m < kMoves; ++m) {
          reward_[m] *= options_.reward_decay;
          tries_[m] *= options_.reward_decay;
        }
        reward_[move] += (success ? 1.0 : 0.0) + (new_best ? 1.0 : 0.0);
        tries_[move] += 1;
      }
    }
    if (!full) {
      population_.push_back({genome, fitness, observed()});
    } else {
      size_t worst = 0;
      for (size_t i = 1; i < population_.size(); ++i) {
        if (Ranks(population_[i], population_[worst])) worst = i;
      }
      if (Better(fitness, population_[worst].fitness)) {
        population_[worst] = {genome, fitness, observed()};
      }
    }
    if (!fitness.failed && (best_.failed || Better(fitness, best_))) {
      best_ = fitness;
      since_improvement_ = 0;
    } else {
      ++since_improvement_;
    }
    if (!cma_.has_value()) return;
    if (!cma_->initialized()) {
      if (observed() >= options_.population_size) RestartModel(/*around_best=*/true);
      return;
    }
    cma_->Tell(Numeric(genome), fitness);
    if (cma_->MaxStdDev() < 1e-7 || since_improvement_ > stagnation_limit_) {
      ++restarts_;
      since_improvement_ = 0;
      RestartModel(/*around_best=*/false);
    }
  }

  void ObserveTrial(const Genome& genome, const Trial& trial) override {
    if (!CostAware()) return;
    if (std::optional<CostPoint> point = CostOf(genome, trial)) {
      spent_completed_ += point->core_seconds;
      costs_.push_back(*std::move(point));
      std::vector<double> exponents;
      for (const CostPoint& p : costs_) {
        if (std::isfinite(p.exponent)) exponents.push_back(p.exponent);
      }
      exponent_ = MedianElapsedExponent(std::move(exponents));
    }
  }

  // A running trial teaches the cost model too (its full run extrapolated from where it is):
  // the expensive trials of a study are the ones still running when the cheap ones are done.
  // A running trial has run at least as long as any trial created after it has reported
  // (elapsed seconds count from a trial's start): one that has reported little or nothing
  // while later ones ran further is dear, and says so before its first report. Such a
  // lower bound teaches the model only where it is above the median full run of the costed
  // trials (a bound below that says little: the trial may just have started).
  void ObservePending(absl::Span<const Trial> pending) override {
    if (!CostAware()) return;
    spent_pending_ = 0;
    running_ = pending.size();
    pending_costs_.clear();
    std::vector<std::pair<int64_t, double>> elapsed_by_id;  // every costed trial's
    for (const CostPoint& p : costs_) elapsed_by_id.emplace_back(p.id, p.elapsed);
    std::vector<std::optional<CostPoint>> points;
    for (const Trial& t : pending) {
      points.push_back(CostOf(codec().Encode(t.parameters), t));
      if (points.back()) elapsed_by_id.emplace_back(t.id, points.back()->elapsed);
    }
    const double typical = MedianFullCost();
    for (size_t i = 0; i < pending.size(); ++i) {
      const Trial& t = pending[i];
      double outlived = 0;  // the longest a trial created after `t` has run
      for (const auto& [id, elapsed] : elapsed_by_id) {
        if (id > t.id) outlived = std::max(outlived, elapsed);
      }
      std::optional<CostPoint>& point = points[i];
      if (point) spent_pending_ += point->core_seconds;
      const double cores = t.cpu_cores > 0 ? t.cpu_cores : 1;
      if (outlived > (point ? FullCost(*point) / cores : 0) && outlived > typical) {
        point = CostPoint{.genome = codec().Encode(t.parameters), .id = t.id,
                          .core_seconds = outlived * cores, .elapsed = outlived, .step = max_step_};
      }
      if (point) pending_costs_.push_back(*std::move(point));
    }
  }

  void AfterUpdate() override {
    if (history_.size() != fitted_on_) {
      parzen_.Fit(history_, history_fitness_);
      gp_.Fit(history_, history_fitness_);
      if (options_.model_share > 0) FitModel();
      fitted_on_ = history_.size();
    }
    if (CostAware() && (costs_.size() != cost_fitted_on_ || !pending_costs_.empty() ||
                        pending_fitted_on_ > 0)) {
      FitCostModel();
    }
    const double unspent = CostAware() ? 1 - (spent_completed_ + spent_pending_) / budget_ : 0;
    cost_weight_ = cost_gp_.fitted() ? kCostWeight * std::clamp(unspent, 0.0, 1.0) : 0;
    SetCostCap();
  }

  // The cost cap of the next suggestions (see kCostCapQuantile), none where what the trials
  // cost so far hardly differs (the dearest within kMinCostSpread times the cheapest full
  // run): there is nothing to save by choosing.
  void SetCostCap() {
    cost_cap_ = std::numeric_limits<double>::infinity();
    if (!linear_cost_.fitted()) return;
    double cheapest = std::numeric_limits<double>::infinity(), dearest = 0;
    for (const std::vector<CostPoint>* points : {&costs_, &pending_costs_}) {
      for (const CostPoint& p : *points) {
        const double full = FullCost(p);
        cheapest = std::min(cheapest, full);
        dearest = std::max(dearest, full);
      }
    }
    if (!(dearest > kMinCostSpread * cheapest)) return;
    SplitMix64 rng(StreamSeed(seed_, kCostCapStream));
    std::vector<double> predicted;
    predicted.reserve(kCostCapDraws);
    for (int k = 0; k < kCostCapDraws; ++k) predicted.push_back(linear_cost_.Predict(RandomGenome(rng)));
    std::sort(predicted.begin(), predicted.end());
    auto quantile = [&](double q) {
      return predicted[static_cast<size_t>(q * (kCostCapDraws - 1))];
    };
    // Affordable, and able to finish before the budget runs out: with the running trials and
    // this one drawing on what is left, it has left / (running + 1) seconds.
    const double left = budget_ - spent_completed_ - spent_pending_;
    cost_cap_ = std::min(quantile(kCostCapQuantile),
                         std::log(std::max(left, 1e-9) / static_cast<double>(running_ + 1)));
  }

  // `candidate`, or when the cost model says it is not affordable the first affordable (else
  // the cheapest) of up to kCostRedraws more draws of `draw`.
  template <typename Draw>
  Genome Affordable(Genome candidate, Draw&& draw) const {
    if (!std::isfinite(cost_cap_)) return candidate;
    double cheapest = linear_cost_.Predict(candidate);
    for (int k = 0; k < kCostRedraws && cheapest > cost_cap_; ++k) {
      Genome next = draw();
      const double predicted = linear_cost_.Predict(next);
      if (predicted < cheapest) {
        cheapest = predicted;
        candidate = std::move(next);
      }
    }
    return candidate;
  }

  bool CostAware() const { return budget_ > 0 && max_step_ > 0; }

  // Refits the model of the objective on the completed trials (hyperparameters at their
  // checkpoint, see HyperparameterCheckpoint).
  void FitModel() {
    model_ready_ = false;
    const size_t n = history_.size();
    if (n < kModelMinPoints || model_.genes().empty()) return;
    std::vector<Genome> points;
    std::vector<double> targets;
    const size_t checkpoint = HyperparameterCheckpoint(n);
    if (checkpoint != hyper_fitted_at_) {
      hyper_fitted_at_ = checkpoint;
      ModelData(checkpoint, &points, &targets);
      hyper_ = model_.FitHyperparameters(points, targets);
    }
    ModelData(n, &points, &targets);
    model_ready_ = points.size() >= kModelMinPoints && model_.Condition(points, targets, hyper_);
  }

  // The model's points among the first `n` completed trials (all of them up to
  // kModelMaxPoints, else the best half and the most recent half) and their targets.
  void ModelData(size_t n, std::vector<Genome>* points, std::vector<double>* targets) const {
    std::vector<size_t> all(n);
    std::iota(all.begin(), all.end(), 0);
    const std::vector<size_t> chosen = BestAndRecentTrials(
        absl::MakeConstSpan(history_fitness_).first(n), std::move(all), kModelMaxPoints);
    std::vector<Fitness> fitness;
    fitness.reserve(chosen.size());
    for (size_t i : chosen) fitness.push_back(history_fitness_[i]);
    std::vector<size_t> kept;
    *targets = WarpedTargets(fitness, &kept);
    points->clear();
    for (size_t k : kept) points->push_back(history_[chosen[k]]);
  }

  // The model's move: offspring of every other move (and mutants of the elite) as
  // candidates, the one of highest expected improvement after local refinement. Pending
  // trials and this call's earlier suggestions are exact fantasies no better than the
  // incumbent (gp_model.h), so parallel workers get different points.
  Genome ModelChild(SplitMix64& rng, absl::Span<const Genome> taken) const {
    const double best = model_.best_target();
    std::optional<GpModel> fantasised;
    if (!taken.empty()) {
      fantasised.emplace(model_);
      fantasised->AddFantasies(taken.last(std::min(taken.size(), kMaxFantasies)), best);
    }
    const GpModel& model = fantasised ? *fantasised : model_;
    const int total = options_.model_candidates;
    const int local = static_cast<int>(kModelLocalShare * total);
    std::vector<Genome> candidates;
    candidates.reserve(static_cast<size_t>(total));
    std::vector<const Member*> elite;
    for (const Member& m : population_) elite.push_back(&m);
    std::sort(elite.begin(), elite.end(), [](const Member* a, const Member* b) { return Ranks(*b, *a); });
    elite.resize(std::min<size_t>(elite.size(), 5));
    for (int k = 0; k < local; ++k) {
      Genome child = elite[rng.NextBelow(elite.size())]->genome;
      Mutate(codec(), 2 * options_.mutation_rate, kModelLocalStep, 0, /*at_least_one=*/true, rng, child);
      candidates.push_back(std::move(child));
    }
    const bool cma = cma_.has_value() && cma_->initialized();
    for (int k = local; k < total; ++k) {
      switch (k % 4) {
        case 0:
          candidates.push_back(cma ? CmaChild(rng, 0) : GaChild(rng));
          break;
        case 1:
          candidates.push_back(parzen_.fitted() ? parzen_.Sample(rng) : GaChild(rng));
          break;
        case 2:
          candidates.push_back(GaChild(rng));
          break;
        default:
          candidates.push_back(RandomGenome(rng));
      }
    }
    return MaximiseAcquisition(model, codec(), best, std::move(candidates), kModelRefined).genome;
  }

  // What a full run of `p`'s parameters costs: as measured, or extrapolated from its step by
  // the study's median exponent of elapsed time in steps.
  double FullCost(const CostPoint& p) const {
    if (p.step >= max_step_) return p.core_seconds;
    const double steps = static_cast<double>(std::max<int64_t>(1, p.step));
    return p.core_seconds * std::pow(static_cast<double>(max_step_) / steps, exponent_);
  }

  // The median full cost of the completed costed trials (0 with none).
  double MedianFullCost() const {
    std::vector<double> full;
    for (const CostPoint& p : costs_) full.push_back(FullCost(p));
    return full.empty() ? 0 : UpperMedian(std::move(full));
  }

  // Fits cost_gp_ and linear_cost_ on the log core-seconds of a full run of each costed trial.
  void FitCostModel() {
    std::vector<Genome> genomes;
    std::vector<Fitness> log_costs;
    std::vector<double> logs;
    std::vector<const CostPoint*> points;
    for (const CostPoint& p : costs_) points.push_back(&p);
    for (const CostPoint& p : pending_costs_) points.push_back(&p);
    for (const CostPoint* point : points) {
      genomes.push_back(point->genome);
      logs.push_back(std::log(FullCost(*point)));
      log_costs.push_back(Fitness{.failed = false, .losses = {logs.back()}});
    }
    cost_gp_.Fit(genomes, log_costs);
    linear_cost_.Fit(genomes, logs);
    cost_fitted_on_ = costs_.size();
    pending_fitted_on_ = pending_costs_.size();
  }

  // The move of a suggestion whose stream starts with `u`: the shares' interval `u` falls
  // in, among the moves available now.
  Move PickMove(double u) const {
    const bool cma = cma_.has_value() && cma_->initialized();
    std::array<double, kMoves> share{};
    double total = 0;
    int available = 0;
    for (int m = 0; m < kMoves; ++m) {
      if (prior_[m] <= 0 || (!cma && (m == kCma || m == kCmaScreened)) ||
          (m == kModel && ranked_ < kModelMinPoints)) {
        continue;
      }
      // Probability matching: the prior share times the decayed mean reward (with one
      // pseudo-trial of reward 1/2, so untried moves start level).
      share[m] = prior_[m] * (reward_[m] + 0.5) / (tries_[m] + 1);
      total += share[m];
      ++available;
    }
    if (available == 0) return kGa;
    const double floor = std::min(options_.min_move_share, 1.0 / available);
    double acc = 0;
    Move last = kGa;
    for (int m = 0; m < kMoves; ++m) {
      if (share[m] <= 0) continue;
      acc += floor + (1 - floor * available) * share[m] / total;
      last = static_cast<Move>(m);
      if (u < acc) return last;
    }
    return last;
  }

  Genome Initial(Genome halton, SplitMix64& rng) const override {
    if (std::isfinite(cost_cap_)) {
      return Affordable(std::move(halton), [&] { return RandomGenome(rng); });
    }
    const int draws = static_cast<int>(std::lround(kInitialCostDraws * cost_weight_));
    if (draws <= 0) return halton;
    double cheapest = cost_gp_.Predict(halton);
    for (int k = 0; k < draws; ++k) {
      Genome candidate = RandomGenome(rng);
      const double predicted = cost_gp_.Predict(candidate);
      if (predicted < cheapest) {
        cheapest = predicted;
        halton = std::move(candidate);
      }
    }
    return halton;
  }

  Genome Propose(SplitMix64& rng, absl::Span<const Genome> taken, bool* spread) const override {
    const Move move = PickMove(rng.NextUnit());
    if (move == kModel && model_ready_) {
      // Fantasies already keep it off the pending points, by the model's own length scales.
      *spread = true;
      return ModelChild(rng, taken);
    }
    if (move == kModel) return GaChild(rng);
    const bool screened = move == kCmaScreened || move == kGaScreened || move == kParzen;
    const int draws = screened && gp_.fitted() ? options_.candidates : 1;
    Genome best;
    double best_predicted = std::numeric_limits<double>::infinity();
    // Screened CMA-ES draws share one step length, so choosing among them picks a direction
    // and leaves the model's step-size statistics alone.
    const double radius = move == kCmaScreened && draws > 1 ? cma_->SampleRadius(rng) : 0;
    auto draw = [&] {
      return move == kCma || move == kCmaScreened ? CmaChild(rng, radius)
             : move == kParzen && parzen_.fitted() ? parzen_.Sample(rng)
                                                   : GaChild(rng);
    };
    for (int k = 0; k < draws; ++k) {
      Genome candidate = Affordable(draw(), draw);
      if (draws == 1) return candidate;
      double predicted = gp_.Predict(candidate);
      if (cost_weight_ > 0) predicted += cost_weight_ * cost_gp_.Predict(candidate);
      if (predicted < best_predicted) {
        best_predicted = predicted;
        best = std::move(candidate);
      }
    }
    return best;
  }

  // A draw from the CMA-ES model for the numeric genes, the categorical ones from a
  // tournament winner, each mutated with probability mutation_rate.
  Genome CmaChild(SplitMix64& rng, double radius) const {
    Genome child = Tournament(rng).genome;
    const Eigen::VectorXd x = cma_->Sample(rng, radius);
    for (size_t k = 0; k < numeric_genes_.size(); ++k) {
      child[numeric_genes_[k]] = ReflectIntoUnit(x[static_cast<Eigen::Index>(k)]);
    }
    for (size_t g = 0; g < codec().size(); ++g) {
      if (codec().kind(g) == GeneKind::kCategorical && rng.NextUnit() < options_.mutation_rate) {
        MutateGene(codec(), g, mutation_scale_, kUniformShare, rng, child);
      }
    }
    return child;
  }

  // Two tournament parents, crossover with probability crossover_rate, mutation.
  Genome GaChild(SplitMix64& rng) const {
    const Member& first = Tournament(rng);
    Genome child = first.genome;
    if (rng.NextUnit() < options_.crossover_rate) {
      child = Crossover(codec(), first.genome, Tournament(rng).genome, kSbxEta, rng);
    }
    Mutate(codec(), options_.mutation_rate, mutation_scale_, kUniformShare,
           /*at_least_one=*/child == first.genome, rng, child);
    return child;
  }

  // True when `a` ranks worse than `b` (ties: the older is worse, so the population ages).
  static bool Ranks(const Member& a, const Member& b) {
    if (Better(b.fitness, a.fitness)) return true;
    if (Better(a.fitness, b.fitness)) return false;
    return a.order < b.order;
  }

  const Member& Tournament(SplitMix64& rng) const {
    const Member* winner = &population_[rng.NextBelow(population_.size())];
    for (int k = 1; k < options_.tournament_size; ++k) {
      const Member& contender = population_[rng.NextBelow(population_.size())];
      if (Ranks(*winner, contender)) winner = &contender;
    }
    return *winner;
  }

  Eigen::VectorXd Numeric(const Genome& genome) const {
    Eigen::VectorXd x(static_cast<Eigen::Index>(numeric_genes_.size()));
    for (size_t k = 0; k < numeric_genes_.size(); ++k) {
      x[static_cast<Eigen::Index>(k)] = genome[numeric_genes_[k]];
    }
    return x;
  }

  // Centres the model on the recombined elite (first start) or on a tournament winner from
  // a stream of its own (restarts), with the initial step.
  void RestartModel(bool around_best) {
    const Member* centre = &population_[0];
    if (around_best) {
      for (const Member& m : population_) {
        if (Ranks(*centre, m)) centre = &m;
      }
    } else {
      SplitMix64 rng(StreamSeed(seed_, kRestartStream - static_cast<uint64_t>(restarts_)));
      centre = &Tournament(rng);
    }
    Eigen::VectorXd mean = Numeric(centre->genome);
    if (around_best) {
      // The first model starts at the log-weighted recombination of the better half of the
      // quasi-random population, CMA-ES's own recombination.
      std::vector<const Member*> ranked;
      for (const Member& m : population_) ranked.push_back(&m);
      std::stable_sort(ranked.begin(), ranked.end(),
                       [](const Member* a, const Member* b) { return Ranks(*b, *a); });
      const size_t mu = std::max<size_t>(1, ranked.size() / 2);
      mean.setZero();
      double weight_sum = 0;
      for (size_t i = 0; i < mu; ++i) {
        const double w = std::log(static_cast<double>(mu) + 0.5) - std::log(i + 1.0);
        mean += w * Numeric(ranked[i]->genome);
        weight_sum += w;
      }
      mean /= weight_sum;
    }
    cma_->Reset(mean, options_.initial_step);
  }

  // Constant after construction.
  const GeneticOptions options_;
  const uint64_t seed_;
  std::vector<size_t> numeric_genes_;  // the model's coordinates: non-fixed numeric genes
  int64_t stagnation_limit_ = 0;

  // A function of the completed trials in completion order (see evolution.h).
  std::vector<Member> population_;
  std::optional<CmaModel> cma_;
  Fitness best_;
  int64_t since_improvement_ = 0;
  double mutation_scale_ = 0;
  int64_t restarts_ = 0;
  std::array<double, kMoves> prior_{};   // constant after construction
  std::array<double, kMoves> reward_{};  // decayed sum of rewards per move
  std::array<double, kMoves> tries_{};   // decayed count of credited trials per move
  std::vector<Genome> history_;          // every completed trial, in order
  std::vector<Fitness> history_fitness_;
  // Fitted on history_ by AfterUpdate.
  ParzenDensity parzen_;
  GpSurrogate gp_;
  GpModel model_;                 // the model of the objective (kModel)
  bool model_ready_ = false;      // model_ is conditioned on the trials
  size_t ranked_ = 0;             // completed trials the model can use (not failed)
  GpHyperparameters hyper_;       // fitted at hyper_fitted_at_ trials
  size_t hyper_fitted_at_ = 0;
  size_t fitted_on_ = 0;  // history_.size() at the last fit
  // Cost-aware screening (CostAware()): constant after construction, then a function of the
  // completed trials in order, and of the pending ones of the last Update.
  GpSurrogate cost_gp_;
  LinearCostModel linear_cost_;  // what screening's affordability asks
  const double budget_;
  const int64_t max_step_;
  std::vector<CostPoint> costs_;
  std::vector<CostPoint> pending_costs_;  // the running trials of the last Update
  size_t cost_fitted_on_ = 0;
  size_t pending_fitted_on_ = 0;
  double spent_completed_ = 0;
  double spent_pending_ = 0;
  double cost_weight_ = 0;  // alpha: set by AfterUpdate
  double cost_cap_ = std::numeric_limits<double>::infinity();  // set by AfterUpdate
  size_t running_ = 0;   // the pending trials of the last Update
  double exponent_ = 1;  // the completed trials' median exponent of elapsed time in steps
};

}  // namespace

std::unique_ptr<Designer> NewGeneticDesigner(const ProblemStatement& problem) {
  const GeneticOptions options = ReadOptions(problem, GenomeCodec(problem.space).size());
  return std::make_unique<GeneticDesigner>(problem, options);
}

}  // namespace evoscale::search::internal
