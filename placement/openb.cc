#include "placement/openb.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace evoscale::placement {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  return text.str();
}

// One CSV table: the header's columns and the rows, each with its line number.
class Table {
 public:
  static absl::StatusOr<Table> Parse(absl::string_view text, absl::string_view file_name) {
    Table table;
    table.file_name_ = std::string(file_name);
    int line_number = 0;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      ++line_number;
      line = absl::StripSuffix(line, "\r");
      if (line.empty()) continue;
      std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
      if (table.header_.empty()) {
        table.header_ = std::move(fields);
        continue;
      }
      if (fields.size() != table.header_.size()) {
        return absl::InvalidArgumentError(absl::StrCat(file_name, ":", line_number, ": ",
                                                       fields.size(), " fields, the header has ",
                                                       table.header_.size()));
      }
      table.rows_.push_back({line_number, std::move(fields)});
    }
    if (table.header_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(file_name, ": empty file, no header"));
    }
    return table;
  }

  // The column's index; an error naming the column when `required` and absent.
  absl::StatusOr<std::optional<size_t>> Column(absl::string_view name, bool required) const {
    for (size_t i = 0; i < header_.size(); ++i) {
      if (header_[i] == name) return i;
    }
    if (!required) return std::nullopt;
    return absl::InvalidArgumentError(
        absl::StrCat(file_name_, ":1: missing column \"", name, "\""));
  }

  struct Row {
    int line;
    std::vector<absl::string_view> fields;
  };
  const std::vector<Row>& rows() const { return rows_; }

  absl::Status Error(const Row& row, size_t column, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name_, ":", row.line, ": field \"", header_[column], "\": ", what));
  }

  // An integer in [min, max].
  absl::StatusOr<int64_t> Integer(const Row& row, size_t column, int64_t min, int64_t max) const {
    absl::string_view text = row.fields[column];
    int64_t value;
    if (!absl::SimpleAtoi(text, &value)) {
      return Error(row, column, absl::StrCat("\"", text, "\" is not an integer"));
    }
    if (value < min || value > max) {
      return Error(row, column, absl::StrCat(value, " is out of range [", min, ", ", max, "]"));
    }
    return value;
  }

 private:
  std::string file_name_;
  std::vector<absl::string_view> header_;
  std::vector<Row> rows_;
};

constexpr int64_t kMaxQuantity = int64_t{1} << 40;

}  // namespace

absl::StatusOr<std::vector<NodeSpec>> ParseOpenbNodes(absl::string_view text,
                                                      absl::string_view file_name) {
  absl::StatusOr<Table> table = Table::Parse(text, file_name);
  if (!table.ok()) return table.status();
  size_t columns[5];
  const char* names[5] = {"sn", "cpu_milli", "memory_mib", "gpu", "model"};
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<std::optional<size_t>> column = table->Column(names[i], true);
    if (!column.ok()) return column.status();
    columns[i] = **column;
  }
  std::vector<NodeSpec> nodes;
  absl::flat_hash_set<absl::string_view> seen;
  for (const Table::Row& row : table->rows()) {
    NodeSpec node;
    node.name = std::string(row.fields[columns[0]]);
    if (node.name.empty()) return table->Error(row, columns[0], "empty");
    if (!seen.insert(row.fields[columns[0]]).second) {
      return table->Error(row, columns[0], absl::StrCat("node \"", node.name, "\" listed twice"));
    }
    absl::StatusOr<int64_t> cpu = table->Integer(row, columns[1], 0, kMaxQuantity);
    if (!cpu.ok()) return cpu.status();
    absl::StatusOr<int64_t> memory = table->Integer(row, columns[2], 0, kMaxQuantity);
    if (!memory.ok()) return memory.status();
    absl::StatusOr<int64_t> gpus = table->Integer(row, columns[3], 0, kMaxGpusPerNode);
    if (!gpus.ok()) return gpus.status();
    node.cpu_milli = *cpu;
    node.memory_mib = *memory;
    node.num_gpus = static_cast<int>(*gpus);
    node.gpu_model = std::string(row.fields[columns[4]]);
    if (node.num_gpus > 0 && node.gpu_model.empty()) {
      return table->Error(row, columns[4],
                          absl::StrCat("empty, but the node has ", node.num_gpus, " GPUs"));
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

namespace {

// A pod's creation_time and deletion_time (columns absent or fields empty: none, unless
// `require_times`).
absl::Status ParseTimes(const Table& table, const Table::Row& row,
                        std::optional<size_t> creation, std::optional<size_t> deletion,
                        bool require_times, PodSpec& pod) {
  for (std::optional<size_t> column : {creation, deletion}) {
    if (!column) continue;
    if (row.fields[*column].empty()) {
      if (require_times) return table.Error(row, *column, "empty");
      continue;
    }
    absl::StatusOr<int64_t> time = table.Integer(row, *column, 0, kMaxQuantity);
    if (!time.ok()) return time.status();
    (column == creation ? pod.creation_time : pod.deletion_time) = *time;
  }
  if (require_times && pod.deletion_time < pod.creation_time) {
    return table.Error(row, *deletion,
                       absl::StrCat(pod.deletion_time, " is before creation_time ",
                                    pod.creation_time));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<PodSpec>> ParseOpenbPods(absl::string_view text,
                                                    absl::string_view file_name,
                                                    bool require_times) {
  absl::StatusOr<Table> table = Table::Parse(text, file_name);
  if (!table.ok()) return table.status();
  const char* names[9] = {"name",     "cpu_milli", "memory_mib",    "num_gpu",      "gpu_milli",
                          "gpu_spec", "qos",       "creation_time", "deletion_time"};
  std::optional<size_t> columns[9];
  for (int i = 0; i < 9; ++i) {
    absl::StatusOr<std::optional<size_t>> column = table->Column(names[i], i < 5 || (require_times && i >= 7));
    if (!column.ok()) return column.status();
    columns[i] = *column;
  }
  std::vector<PodSpec> pods;
  pods.reserve(table->rows().size());
  for (const Table::Row& row : table->rows()) {
    PodSpec pod;
    pod.name = std::string(row.fields[*columns[0]]);
    if (pod.name.empty()) return table->Error(row, *columns[0], "empty");
    absl::StatusOr<int64_t> cpu = table->Integer(row, *columns[1], 0, kMaxQuantity);
    if (!cpu.ok()) return cpu.status();
    absl::StatusOr<int64_t> memory = table->Integer(row, *columns[2], 0, kMaxQuantity);
    if (!memory.ok()) return memory.status();
    absl::StatusOr<int64_t> gpus = table->Integer(row, *columns[3], 0, 1024);
    if (!gpus.ok()) return gpus.status();
    pod.cpu_milli = *cpu;
    pod.memory_mib = *memory;
    pod.num_gpus = static_cast<int>(*gpus);
    if (pod.num_gpus > 0) {
      absl::StatusOr<int64_t> milli = table->Integer(row, *columns[4], 1, kMilliPerGpu);
      if (!milli.ok()) return milli.status();
      if (pod.num_gpus > 1 && *milli != kMilliPerGpu) {
        return table->Error(row, *columns[4],
                            absl::StrCat(*milli, ": a pod of ", pod.num_gpus,
                                         " GPUs must ask for whole GPUs (1000)"));
      }
      pod.gpu_milli = static_cast<int>(*milli);
    }
    if (columns[5]) {
      for (absl::string_view model : absl::StrSplit(row.fields[*columns[5]], '|')) {
        if (!model.empty()) pod.gpu_models.emplace_back(model);
      }
    }
    if (columns[6]) {
      absl::StatusOr<QosClass> qos = ParseQosClass(row.fields[*columns[6]]);
      if (!qos.ok()) {
        return table->Error(row, *columns[6],
                            absl::StrCat("\"", row.fields[*columns[6]],
                                         "\" is not LS, Guaranteed, Burstable or BE"));
      }
      pod.qos = *qos;
    }
    absl::Status times = ParseTimes(*table, row, columns[7], columns[8], require_times, pod);
    if (!times.ok()) return times;
    pods.push_back(std::move(pod));
  }
  return pods;
}

absl::StatusOr<std::vector<NodeSpec>> ReadOpenbNodes(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseOpenbNodes(*text, path);
}

absl::StatusOr<std::vector<PodSpec>> ReadOpenbPods(const std::string& path, bool require_times) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseOpenbPods(*text, path, require_times);
}

}  // namespace evoscale::placement
