#include "trainer/flags.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "trainer/sparse_optimizer.h"

namespace evoscale::trainer {

const char kTrainerUsage[] = R"(usage: evoscale-trainer (--train FILE | --synthetic ROWS) [flags]
Trains the CTR model of ../shared/bench/ctr/torch_dnn.py and prints JSON lines on stdout.
  --train FILE              Criteo-format TSV (label, 13 ints, 26 hex categoricals)
  --test FILE               evaluate on FILE (default: a held-out share of the training data)
  --synthetic ROWS          generated click log with a known logistic ground truth
  --epochs N (1)            --batch-size N (1024)        --embedding-dim N (16)
  --hidden 256,128          --optimizer-sparse sgd|adagrad|ftrl|adam (adagrad)
  --lr-sparse X (0.05)      --lr-dense X (0.001, Adam)   --seed N (0)
  --threads N (2)           --shards N (= threads)       --device cpu|cuda (cpu)
  --checkpoint-dir DIR      --resume (continue from DIR's newest checkpoint)
  --checkpoint-every N (1000 steps)   --full-checkpoint-every K (8: others are deltas)
  --config FILE             JSON object of the same flags (command line wins)
  --progress-every N (100)  --max-steps N (0: all)       --init-stddev X (0.01)
  --holdout-fraction X (0.1)           --max-malformed-fraction X (0.01)
  --min-count N             ids get a row at their N-th sighting (all slots)
  --min-count-slots S:N,..  per-slot thresholds       --expire-after-steps N (0: never)
  --evict-every N (1000 steps)
  --stream                  train on --train without end (- is stdin; a file is followed)
  --serve HOST:PORT,...     push changed rows to evoscale-serve replicas
  --push-every S (1 s)      --dense-every S (60 s: the MLP)
)";

namespace {

using Json = nlohmann::ordered_json;

// What a flag's value is; in a config file, also the JSON type it takes.
enum class ValueKind {
  kText,     // a string
  kInteger,  // an integer
  kNumber,   // a number
  kSwitch,   // true or false (bare on the command line)
  kList,     // an array of strings or integers, or the command line's comma-separated string
};

// A bad value, as CLI11 reports it: `--NAME: "VALUE" what`.
[[noreturn]] void Reject(const std::string& flag, const std::string& value,
                         absl::string_view what) {
  throw CLI::ValidationError(flag, absl::StrCat("\"", value, "\" ", what));
}

// CLI11's name list for a flag: "--batch-size,--batch_size" ('-' may be spelled '_').
std::string Names(std::string name) {
  std::string names = "--" + name;
  if (name.find('-') != std::string::npos) {
    std::replace(name.begin(), name.end(), '-', '_');
    absl::StrAppend(&names, ",--", name);
  }
  return names;
}

// A switch's value: bare (true), or true, false, 1 or 0 after '='.
CLI::Validator TrueOrFalse() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (value == "true" || value == "false" || value == "1" || value == "0") return "";
        return absl::StrCat("\"", value, "\" is not true or false");
      },
      "BOOL");
}

// The trainer's flags on one CLI::App, each writing where it is told. CLI11 takes the command
// line apart; values are converted here with absl's number syntax (decimal only, unlike CLI11's,
// which reads "010" as octal), and a bad one throws Reject's ValidationError.
class FlagSet {
 public:
  explicit FlagSet(CLI::App* app) : app_(*app) {}

  void Text(const std::string& name, std::string* out) {
    kinds_[app_.add_option(Names(name), *out)] = ValueKind::kText;
  }

  template <typename T>
  void Integer(const std::string& name, T* out) {
    Value(name, ValueKind::kInteger, [out](const std::string& flag, const std::string& value) {
      int64_t v;
      if (!absl::SimpleAtoi(value, &v)) Reject(flag, value, "is not an integer");
      *out = static_cast<T>(v);
    });
  }

  template <typename T>
  void Number(const std::string& name, T* out) {
    Value(name, ValueKind::kNumber, [out](const std::string& flag, const std::string& value) {
      double v;
      if (!absl::SimpleAtod(value, &v)) Reject(flag, value, "is not a number");
      *out = static_cast<T>(v);
    });
  }

  void Switch(const std::string& name, bool* out) {
    kinds_[app_.add_flag(Names(name), *out)->check(TrueOrFalse())] = ValueKind::kSwitch;
  }

  // A flag whose value `parse(flag, value)` converts, calling Reject on a bad one.
  void Value(const std::string& name, ValueKind kind,
             std::function<void(const std::string&, const std::string&)> parse) {
    CLI::Option* option = app_.add_option_function<std::string>(
        Names(name), [flag = "--" + name, parse = std::move(parse)](const std::string& value) {
          parse(flag, value);
        });
    kinds_[option] = kind;
  }

  // The flag spelled `name` (without dashes), with its kind; nullptr for no such flag.
  std::pair<CLI::Option*, ValueKind> Find(const std::string& name) const {
    CLI::Option* option = app_.get_option_no_throw("--" + name);
    auto it = kinds_.find(option);
    if (it == kinds_.end()) return {nullptr, ValueKind::kText};
    return {option, it->second};
  }

 private:
  CLI::App& app_;
  std::map<const CLI::Option*, ValueKind> kinds_;  // every flag but --config
};

// --hidden 256,128
void ParseWidths(const std::string& flag, const std::string& value, std::vector<int>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    int width;
    if (!absl::SimpleAtoi(part, &width) || width < 1) {
      Reject(flag, value, "is not a comma-separated list of positive widths");
    }
    out->push_back(width);
  }
}

// --min-count-slots SLOT:COUNT,...
void ParseSlotCounts(const std::string& flag, const std::string& value,
                     std::vector<uint32_t>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, ':');
    int slot, count;
    if (!absl::SimpleAtoi(kv.first, &slot) || !absl::SimpleAtoi(kv.second, &count) || slot < 0 ||
        slot >= 26 || count < 0) {
      Reject(flag, value, "is not a list of SLOT:COUNT with SLOT in [0, 26)");
    }
    if (int(out->size()) <= slot) out->resize(slot + 1, 0);
    (*out)[slot] = uint32_t(count);
  }
}

void DefineFlags(FlagSet& flags, ParsedFlags* parsed) {
  TrainerConfig& c = parsed->config;
  flags.Text("train", &c.train_path);
  flags.Text("test", &c.test_path);
  flags.Integer("synthetic", &c.synthetic_rows);
  flags.Integer("epochs", &c.epochs);
  flags.Integer("batch-size", &c.batch_size);
  flags.Integer("embedding-dim", &c.embedding_dim);
  flags.Value("hidden", ValueKind::kList,
              [&c](const std::string& flag, const std::string& value) {
                ParseWidths(flag, value, &c.hidden);
              });
  flags.Value("optimizer-sparse", ValueKind::kText,
              [&c](const std::string& flag, const std::string& value) {
                absl::StatusOr<SparseOptimizerKind> kind = ParseSparseOptimizerKind(value);
                if (!kind.ok()) Reject(flag, value, "is not one of sgd, adagrad, ftrl, adam");
                c.sparse.kind = *kind;
              });
  flags.Number("lr-sparse", &c.sparse.lr);
  flags.Number("lr-dense", &c.lr_dense);
  flags.Integer("threads", &c.threads);
  flags.Integer("shards", &c.shards);
  flags.Integer("seed", &c.seed);
  flags.Text("checkpoint-dir", &c.checkpoint_dir);
  flags.Switch("resume", &c.resume);
  flags.Text("device", &c.device);
  flags.Integer("progress-every", &c.progress_every);
  flags.Integer("max-steps", &c.max_steps);
  flags.Number("init-stddev", &c.init_stddev);
  flags.Number("holdout-fraction", &c.holdout_fraction);
  flags.Number("max-malformed-fraction", &c.max_malformed_fraction);
  flags.Integer("min-count", &c.min_count);
  flags.Value("min-count-slots", ValueKind::kList,
              [&c](const std::string& flag, const std::string& value) {
                ParseSlotCounts(flag, value, &c.min_count_by_slot);
              });
  flags.Integer("expire-after-steps", &c.expire_after_steps);
  flags.Integer("evict-every", &c.evict_every);
  flags.Integer("checkpoint-every", &c.checkpoint_every);
  flags.Integer("full-checkpoint-every", &c.full_checkpoint_every);
  flags.Switch("stream", &c.stream);
  flags.Value("serve", ValueKind::kList, [&c](const std::string& flag, const std::string& value) {
    c.serve.clear();
    for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
      if (part.rfind(':') == absl::string_view::npos) Reject(flag, value, "is not HOST:PORT,...");
      c.serve.emplace_back(part);
    }
  });
  flags.Number("push-every", &c.push_every_s);
  flags.Number("dense-every", &c.dense_every_s);
  flags.Switch("help", &parsed->help);
}

// A config value as the command line would give it; it must have the JSON type of `kind`.
absl::StatusOr<std::string> FlagText(const std::string& key, const Json& value, ValueKind kind) {
  auto wrong_type = [&](absl::string_view want) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", key, "\" must be ", want, ", not ", value.dump()));
  };
  switch (kind) {
    case ValueKind::kText:
      if (!value.is_string()) return wrong_type("a string");
      return value.get<std::string>();
    case ValueKind::kInteger:
      if (!value.is_number_integer()) return wrong_type("an integer");
      return value.dump();
    case ValueKind::kNumber:
      if (!value.is_number()) return wrong_type("a number");
      return value.dump();
    case ValueKind::kSwitch:
      if (!value.is_boolean()) return wrong_type("true or false");
      return value.dump();
    case ValueKind::kList: {
      if (value.is_string()) return value.get<std::string>();
      if (!value.is_array()) return wrong_type("an array or a comma-separated string");
      std::vector<std::string> items;
      for (const Json& item : value) {
        if (item.is_string()) {
          items.push_back(item.get<std::string>());
        } else if (item.is_number_integer()) {
          items.push_back(item.dump());
        } else {
          return wrong_type("an array of strings or integers");
        }
      }
      return absl::StrJoin(items, ",");
    }
  }
  return wrong_type("a known kind of value");
}

// Gives each member of the JSON object in `path` to the flag it names, except flags the command
// line set (those in `from_command_line`).
absl::Status ApplyConfigFile(const std::string& path, const FlagSet& flags,
                             const std::set<const CLI::Option*>& from_command_line) {
  const std::string where = absl::StrCat("--config ", path, ": ");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(where, "cannot open"));
  Json config;
  try {
    config = Json::parse(in);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(where, e.what()));
  }
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "must be a JSON object of flags, not ", config.type_name()));
  }
  for (const auto& [key, value] : config.items()) {
    const auto [option, kind] = flags.Find(key);
    if (option == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, "unknown flag --", key));
    }
    if (from_command_line.contains(option)) continue;
    absl::StatusOr<std::string> text = FlagText(key, value, kind);
    if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat(where, text.status().message()));
    try {
      option->add_result(*text);
      option->run_callback();
    } catch (const CLI::ParseError& e) {
      return absl::InvalidArgumentError(absl::StrCat(where, "flag ", e.what()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParsedFlags> ParseTrainerFlags(const std::vector<std::string>& args) {
  ParsedFlags parsed;
  CLI::App app;
  app.set_help_flag();  // --help is one of our switches; main prints kTrainerUsage
  app.allow_extras();   // reported below, in the words of the flag at fault
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  FlagSet flags(&app);
  DefineFlags(flags, &parsed);
  std::string config_path;
  app.add_option("--config", config_path);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch&) {
    // Every flag takes one value or none, so CLI11 runs out of values only when the last
    // argument is a flag that needs one.
    const std::string flag = args.back().substr(0, args.back().find('='));
    return absl::InvalidArgumentError(absl::StrCat("flag ", flag, " needs a value"));
  } catch (const CLI::ValidationError& e) {
    return absl::InvalidArgumentError(absl::StrCat("flag ", e.what()));
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  if (std::vector<std::string> extra = app.remaining(); !extra.empty()) {
    const std::string& arg = extra.front();
    if (arg.size() > 2 && arg.rfind("--", 0) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", arg.substr(0, arg.find('='))));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", arg, "\" (flags start with --)"));
  }
  if (!config_path.empty()) {
    std::set<const CLI::Option*> from_command_line;
    for (const CLI::Option* option : app.get_options()) {
      if (option->count() > 0) from_command_line.insert(option);
    }
    absl::Status status = ApplyConfigFile(config_path, flags, from_command_line);
    if (!status.ok()) return status;
  }
  return parsed;
}

}  // namespace evoscale::trainer
