#include "trainer/flags.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

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
)";

namespace {

absl::Status Bad(absl::string_view flag, absl::string_view value, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("flag --", flag, ": \"", value, "\" ", what));
}

template <typename T>
absl::Status ParseInt(absl::string_view flag, absl::string_view value, T* out) {
  int64_t v;
  if (!absl::SimpleAtoi(value, &v)) return Bad(flag, value, "is not an integer");
  *out = T(v);
  return absl::OkStatus();
}

template <typename T>
absl::Status ParseFloat(absl::string_view flag, absl::string_view value, T* out) {
  double v;
  if (!absl::SimpleAtod(value, &v)) return Bad(flag, value, "is not a number");
  *out = T(v);
  return absl::OkStatus();
}

absl::Status ParseBool(absl::string_view flag, absl::string_view value, bool* out) {
  if (value.empty() || value == "true" || value == "1") {
    *out = true;
  } else if (value == "false" || value == "0") {
    *out = false;
  } else {
    return Bad(flag, value, "is not true or false");
  }
  return absl::OkStatus();
}

absl::Status SetFlag(std::string name, absl::string_view value, ParsedFlags* parsed) {
  for (char& c : name) {
    if (c == '_') c = '-';
  }
  TrainerConfig& c = parsed->config;
  if (name == "train") {
    c.train_path = std::string(value);
  } else if (name == "test") {
    c.test_path = std::string(value);
  } else if (name == "synthetic") {
    return ParseInt(name, value, &c.synthetic_rows);
  } else if (name == "epochs") {
    return ParseInt(name, value, &c.epochs);
  } else if (name == "batch-size") {
    return ParseInt(name, value, &c.batch_size);
  } else if (name == "embedding-dim") {
    return ParseInt(name, value, &c.embedding_dim);
  } else if (name == "hidden") {
    c.hidden.clear();
    for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
      int width;
      if (!absl::SimpleAtoi(part, &width) || width < 1) {
        return Bad(name, value, "is not a comma-separated list of positive widths");
      }
      c.hidden.push_back(width);
    }
  } else if (name == "optimizer-sparse") {
    absl::StatusOr<SparseOptimizerKind> kind = ParseSparseOptimizerKind(value);
    if (!kind.ok()) return Bad(name, value, "is not one of sgd, adagrad, ftrl, adam");
    c.sparse.kind = *kind;
  } else if (name == "lr-sparse") {
    return ParseFloat(name, value, &c.sparse.lr);
  } else if (name == "lr-dense") {
    return ParseFloat(name, value, &c.lr_dense);
  } else if (name == "threads") {
    return ParseInt(name, value, &c.threads);
  } else if (name == "shards") {
    return ParseInt(name, value, &c.shards);
  } else if (name == "seed") {
    return ParseInt(name, value, &c.seed);
  } else if (name == "checkpoint-dir") {
    c.checkpoint_dir = std::string(value);
  } else if (name == "resume") {
    return ParseBool(name, value, &c.resume);
  } else if (name == "device") {
    c.device = std::string(value);
  } else if (name == "progress-every") {
    return ParseInt(name, value, &c.progress_every);
  } else if (name == "max-steps") {
    return ParseInt(name, value, &c.max_steps);
  } else if (name == "init-stddev") {
    return ParseFloat(name, value, &c.init_stddev);
  } else if (name == "holdout-fraction") {
    return ParseFloat(name, value, &c.holdout_fraction);
  } else if (name == "max-malformed-fraction") {
    return ParseFloat(name, value, &c.max_malformed_fraction);
  } else if (name == "min-count") {
    return ParseInt(name, value, &c.min_count);
  } else if (name == "min-count-slots") {
    c.min_count_by_slot.clear();
    for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
      std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, ':');
      int slot, count;
      if (!absl::SimpleAtoi(kv.first, &slot) || !absl::SimpleAtoi(kv.second, &count) || slot < 0 ||
          slot >= 26 || count < 0) {
        return Bad(name, value, "is not a list of SLOT:COUNT with SLOT in [0, 26)");
      }
      if (int(c.min_count_by_slot.size()) <= slot) c.min_count_by_slot.resize(slot + 1, 0);
      c.min_count_by_slot[slot] = uint32_t(count);
    }
  } else if (name == "expire-after-steps") {
    return ParseInt(name, value, &c.expire_after_steps);
  } else if (name == "evict-every") {
    return ParseInt(name, value, &c.evict_every);
  } else if (name == "checkpoint-every") {
    return ParseInt(name, value, &c.checkpoint_every);
  } else if (name == "full-checkpoint-every") {
    return ParseInt(name, value, &c.full_checkpoint_every);
  } else if (name == "help") {
    return ParseBool(name, value, &parsed->help);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
  }
  return absl::OkStatus();
}

bool IsBoolFlag(absl::string_view name) { return name == "resume" || name == "help"; }

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseFlatJson(
    absl::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("config JSON at offset ", i, ": ", what));
  };
  auto skip = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto string = [&](std::string* s) -> bool {
    if (i >= text.size() || text[i] != '"') return false;
    ++i;
    while (i < text.size() && text[i] != '"') {
      if (text[i] == '\\' && i + 1 < text.size()) ++i;
      s->push_back(text[i++]);
    }
    if (i >= text.size()) return false;
    ++i;
    return true;
  };
  auto scalar = [&](std::string* s) -> bool {
    skip();
    if (i < text.size() && text[i] == '"') return string(s);
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) ||
                               text[i] == '.' || text[i] == '-' || text[i] == '+')) {
      s->push_back(text[i++]);
    }
    return !s->empty();
  };
  skip();
  if (i >= text.size() || text[i] != '{') return error("expected '{'");
  ++i;
  skip();
  if (i < text.size() && text[i] == '}') return out;
  while (true) {
    skip();
    std::string key, value;
    if (!string(&key)) return error("expected a quoted key");
    skip();
    if (i >= text.size() || text[i] != ':') return error("expected ':'");
    ++i;
    skip();
    if (i < text.size() && text[i] == '[') {
      ++i;
      skip();
      while (i < text.size() && text[i] != ']') {
        std::string item;
        if (!scalar(&item)) return error("bad array element");
        if (!value.empty()) value += ",";
        value += item;
        skip();
        if (i < text.size() && text[i] == ',') ++i;
        skip();
      }
      if (i >= text.size()) return error("unterminated array");
      ++i;
    } else if (!scalar(&value)) {
      return error("expected a value");
    }
    if (value == "null") value.clear();
    out.emplace_back(std::move(key), std::move(value));
    skip();
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    if (i < text.size() && text[i] == '}') break;
    return error("expected ',' or '}'");
  }
  return out;
}

absl::StatusOr<ParsedFlags> ParseTrainerFlags(const std::vector<std::string>& args) {
  ParsedFlags parsed;
  std::vector<std::pair<std::string, std::string>> flags;
  std::string config_path;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (!absl::ConsumePrefix(&arg, "--") || arg.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", args[i], "\" (flags start with --)"));
    }
    std::string name, value;
    const size_t eq = arg.find('=');
    if (eq != absl::string_view::npos) {
      name = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
    } else {
      name = std::string(arg);
      if (!IsBoolFlag(name)) {
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
        }
        value = args[++i];
      }
    }
    if (name == "config") {
      config_path = value;
    } else {
      flags.emplace_back(std::move(name), std::move(value));
    }
  }
  if (!config_path.empty()) {
    std::ifstream in(config_path);
    if (!in) return absl::NotFoundError(absl::StrCat("--config ", config_path, ": cannot open"));
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> entries =
        ParseFlatJson(text.str());
    if (!entries.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--config ", config_path, ": ", entries.status().message()));
    }
    for (const auto& [key, value] : *entries) {
      absl::Status status = SetFlag(key, value, &parsed);
      if (!status.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--config ", config_path, ": ", status.message()));
      }
    }
  }
  for (const auto& [name, value] : flags) {
    absl::Status status = SetFlag(name, value, &parsed);
    if (!status.ok()) return status;
  }
  return parsed;
}

}  // namespace evoscale::trainer
