// Study files: a Study (or a bare StudySpec) as protobuf JSON or as YAML.
//
// Both formats become one JSON document (nlohmann-json), which protobuf's JSON parser then
// reads, so both accept exactly the same fields and enum names and report unknown fields the
// same way. yaml-cpp and nlohmann-json throw; their exceptions are caught here and never leave
// this file.

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/study.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "service/cli/cli.h"
#include "yaml-cpp/yaml.h"

namespace evoscale::cli {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
// Keeps the keys in the file's order, so that the JSON reads like the file.
using Json = nlohmann::ordered_json;

// yaml-cpp's tag for a non-plain (quoted or block) scalar without an explicit tag.
constexpr absl::string_view kNonPlainTag = "!";
constexpr absl::string_view kYamlTagPrefix = "tag:yaml.org,2002:";

bool IsDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), absl::ascii_isdigit);
}

// "007" -> "7", "0" -> "0".
absl::string_view StripLeadingZeros(absl::string_view digits) {
  size_t first = digits.find_first_not_of('0');
  return first == absl::string_view::npos ? digits.substr(digits.size() - 1) : digits.substr(first);
}

// If `s` is a YAML 1.2 (core schema) number, returns it as JSON: a JSON number, or for
// infinities and NaN the strings protobuf's JSON parser accepts ("Infinity", "NaN").
std::optional<Json> YamlNumber(absl::string_view s) {
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return Json("NaN");
  absl::string_view sign;
  absl::string_view body = s;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
    if (body[0] == '-') sign = "-";
    body.remove_prefix(1);
  }
  if (body == ".inf" || body == ".Inf" || body == ".INF") {
    return Json(absl::StrCat(sign, "Infinity"));
  }
  // Octal (0o17) and hexadecimal (0x1F) integers; unsigned, without a sign, in the core schema.
  const bool has_sign = body.size() != s.size();
  if (!has_sign && s.size() > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'x')) {
    const int base = s[1] == 'o' ? 8 : 16;
    uint64_t value = 0;
    auto [end, error] = std::from_chars(s.data() + 2, s.data() + s.size(), value, base);
    if (error != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return Json(value);
  }
  // Decimal: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
  absl::string_view mantissa = body;
  absl::string_view exponent;
  if (size_t e = body.find_first_of("eE"); e != absl::string_view::npos) {
    mantissa = body.substr(0, e);
    exponent = body.substr(e + 1);
    absl::string_view exponent_digits = exponent;
    if (!exponent_digits.empty() && (exponent_digits[0] == '-' || exponent_digits[0] == '+')) {
      exponent_digits.remove_prefix(1);
    }
    if (!IsDigits(exponent_digits)) return std::nullopt;
  }
  absl::string_view integer = mantissa;
  absl::string_view fraction;
  if (size_t dot = mantissa.find('.'); dot != absl::string_view::npos) {
    integer = mantissa.substr(0, dot);
    fraction = mantissa.substr(dot + 1);
    if (integer.empty() && fraction.empty()) return std::nullopt;
    if (!fraction.empty() && !IsDigits(fraction)) return std::nullopt;
    if (!integer.empty() && !IsDigits(integer)) return std::nullopt;
  } else if (!IsDigits(integer)) {
    return std::nullopt;
  }
  // JSON wants a leading digit, no leading zeros, no '+' and no bare '.'; in that form
  // nlohmann-json reads it exactly as protobuf would (an integer stays an integer).
  std::string text(sign);
  absl::StrAppend(&text, integer.empty() ? absl::string_view("0") : StripLeadingZeros(integer));
  if (!fraction.empty()) absl::StrAppend(&text, ".", fraction);
  if (!exponent.empty()) absl::StrAppend(&text, "e", exponent);
  Json number = Json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (number.is_discarded()) return std::nullopt;  // out of range, e.g. 1e999
  return number;
}

bool IsYamlNull(absl::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

std::optional<bool> YamlBool(absl::string_view s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

std::string Where(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return absl::StrCat("line ", mark.line + 1, ", column ", mark.column + 1, ": ");
}

bool IsStringField(const FieldDescriptor* field) {
  return field != nullptr && (field->type() == FieldDescriptor::TYPE_STRING ||
                              field->type() == FieldDescriptor::TYPE_BYTES);
}

const FieldDescriptor* FindField(const Descriptor* message, const std::string& key) {
  if (message == nullptr) return nullptr;
  const FieldDescriptor* field = message->FindFieldByName(key);
  return field != nullptr ? field : message->FindFieldByCamelcaseName(key);
}

// Bounds on what one file may expand to: YAML aliases can put a node inside itself (yaml-cpp
// builds the cycle) or repeat a node exponentially ("billion laughs"). A real study file is
// a few levels deep and a few hundred values.
struct Walk {
  static constexpr int kMaxDepth = 64;
  static constexpr int64_t kMaxValues = 100000;
  int depth = 0;
  int64_t values = 0;
};

absl::StatusOr<Json> ConvertValue(const YAML::Node& node, const FieldDescriptor* field,
                                  bool element, Walk& walk);

// A mapping whose keys are the fields of `message` (nullptr: unknown, convert generically),
// or, with `map_value`, a protobuf map whose values are that field.
absl::StatusOr<Json> ConvertMapping(const YAML::Node& node, Walk& walk, const Descriptor* message,
                                    const FieldDescriptor* map_value = nullptr) {
  Json object = Json::object();
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(entry.first.Mark()),
          map_value != nullptr ? "map keys must be scalars" : "mapping keys must be plain names"));
    }
    // Protobuf map keys are always JSON strings.
    const std::string& key = entry.first.Scalar();
    if (object.contains(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(entry.first.Mark()), "key \"", key, "\" given twice"));
    }
    absl::StatusOr<Json> value =
        map_value != nullptr ? ConvertValue(entry.second, map_value, /*element=*/true, walk)
                             : ConvertValue(entry.second, FindField(message, key), false, walk);
    if (!value.ok()) return value.status();
    object[key] = *std::move(value);
  }
  return object;
}

Json ConvertScalar(const YAML::Node& node, bool string_field) {
  const std::string& text = node.Scalar();
  const std::string& tag = node.Tag();
  if (tag == kNonPlainTag) return text;         // quoted: always a string
  if (absl::StartsWith(tag, kYamlTagPrefix)) {  // explicit !!str, !!int, ...
    if (absl::string_view(tag).substr(kYamlTagPrefix.size()) == "str") return text;
    string_field = false;  // !!int, !!float, !!bool, !!null: as their text says
  }
  if (IsYamlNull(text)) return nullptr;
  if (string_field) return text;
  if (std::optional<bool> b = YamlBool(text)) return *b;
  if (std::optional<Json> number = YamlNumber(text)) return *std::move(number);
  return text;
}

// The value of `field` (nullptr: unknown); `element` when it is one element of a repeated
// field or the value of a map entry.
absl::StatusOr<Json> ConvertValue(const YAML::Node& node, const FieldDescriptor* field,
                                  bool element, Walk& walk) {
  if (++walk.values > Walk::kMaxValues) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(node.Mark()), "the file expands to more than ", Walk::kMaxValues,
                     " values (aliases repeating aliases?)"));
  }
  if (walk.depth >= Walk::kMaxDepth) {
    return absl::InvalidArgumentError(absl::StrCat(Where(node.Mark()), "nested deeper than ",
                                                   Walk::kMaxDepth,
                                                   " levels (an alias inside its own anchor?)"));
  }
  ++walk.depth;
  absl::Cleanup leave = [&walk] { --walk.depth; };
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Sequence: {
      const bool whole_repeated = field != nullptr && field->is_repeated() && !element;
      Json array = Json::array();
      for (const YAML::Node& item : node) {
        absl::StatusOr<Json> value = whole_repeated
                                         ? ConvertValue(item, field, /*element=*/true, walk)
                                         : ConvertValue(item, nullptr, false, walk);
        if (!value.ok()) return value.status();
        array.push_back(*std::move(value));
      }
      return array;
    }
    case YAML::NodeType::Map:
      if (field != nullptr && field->is_map() && !element) {
        return ConvertMapping(node, walk, nullptr, field->message_type()->FindFieldByNumber(2));
      }
      if (field != nullptr && field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
          (element || !field->is_repeated())) {
        return ConvertMapping(node, walk, field->message_type());
      }
      return ConvertMapping(node, walk, nullptr);
    case YAML::NodeType::Scalar:
      return ConvertScalar(node, IsStringField(field) && (element || !field->is_repeated()));
  }
  return nullptr;
}

// Loads the first YAML document of `yaml`; errors carry the position.
absl::StatusOr<YAML::Node> LoadYaml(absl::string_view yaml) {
  try {
    return YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(Where(e.mark), e.msg));
  }
}

absl::StatusOr<Json> ConvertYaml(const YAML::Node& node, const Descriptor* schema) {
  try {
    Walk walk;
    if (node.IsMap()) return ConvertMapping(node, walk, schema);
    return ConvertValue(node, nullptr, /*element=*/false, walk);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(Where(e.mark), e.msg));
  }
}

// nlohmann-json's message without its "[json.exception.parse_error.101] " prefix.
std::string JsonErrorMessage(const nlohmann::json::exception& e) {
  absl::string_view message = e.what();
  if (size_t end = message.find("] "); absl::StartsWith(message, "[") && end != message.npos) {
    message.remove_prefix(end + 2);
  }
  return std::string(message);
}

// The JSON text of `json`. Strings must be UTF-8, as in every JSON text.
absl::StatusOr<std::string> JsonText(const Json& json) {
  try {
    return json.dump();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(JsonErrorMessage(e));
  }
}

absl::Status FileError(absl::string_view source, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("study file \"", source, "\": ", problem));
}

// A bare StudySpec (a top-level "metrics" or "parameters" and no "spec") as a Study.
Json WrapBareSpec(Json study) {
  if (study.contains("spec") || !(study.contains("metrics") || study.contains("parameters"))) {
    return study;
  }
  Json wrapped = Json::object();
  wrapped["spec"] = std::move(study);
  return wrapped;
}

// The study from a YAML file.
absl::StatusOr<Json> StudyFromYaml(absl::string_view text, absl::string_view source) {
  absl::StatusOr<YAML::Node> root = LoadYaml(text);
  if (!root.ok()) return FileError(source, root.status().message());
  if (root->IsNull()) return FileError(source, "the file holds no study");
  if (!root->IsMap()) return FileError(source, "expected a mapping of Study fields");
  const bool bare_spec = !(*root)["spec"] && ((*root)["metrics"] || (*root)["parameters"]);
  absl::StatusOr<Json> study =
      ConvertYaml(*root, bare_spec ? v1::StudySpec::descriptor() : v1::Study::descriptor());
  if (!study.ok()) return FileError(source, study.status().message());
  return WrapBareSpec(*std::move(study));
}

// The study from a JSON file.
absl::StatusOr<Json> StudyFromJson(absl::string_view text, absl::string_view source) {
  if (absl::StripAsciiWhitespace(text).empty()) {
    return FileError(source, "the file holds no study");
  }
  Json study;
  try {
    study = Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return FileError(source, absl::StrCat("invalid JSON: ", JsonErrorMessage(e)));
  }
  if (!study.is_object()) return FileError(source, "expected an object of Study fields");
  return WrapBareSpec(std::move(study));
}

}  // namespace

absl::StatusOr<std::string> YamlToJson(absl::string_view yaml, const Descriptor* schema) {
  absl::StatusOr<YAML::Node> root = LoadYaml(yaml);
  if (!root.ok()) return root.status();
  absl::StatusOr<Json> json = ConvertYaml(*root, schema);
  if (!json.ok()) return json.status();
  return JsonText(*json);
}

StudyFileFormat DetectStudyFileFormat(absl::string_view path, absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(path);
  if (absl::EndsWith(lower, ".json")) return StudyFileFormat::kJson;
  if (absl::EndsWith(lower, ".yaml") || absl::EndsWith(lower, ".yml")) {
    return StudyFileFormat::kYaml;
  }
  return absl::StartsWith(absl::StripLeadingAsciiWhitespace(text), "{") ? StudyFileFormat::kJson
                                                                        : StudyFileFormat::kYaml;
}

absl::StatusOr<v1::Study> ParseStudy(absl::string_view text, StudyFileFormat format,
                                     absl::string_view source) {
  absl::StatusOr<Json> study_json =
      format == StudyFileFormat::kYaml ? StudyFromYaml(text, source) : StudyFromJson(text, source);
  if (!study_json.ok()) return study_json.status();
  absl::StatusOr<std::string> json = JsonText(*study_json);
  if (!json.ok()) return FileError(source, json.status().message());
  v1::Study study;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  google::protobuf::util::Status parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json->data(), json->size()), &study, options);
  if (!parsed.ok()) {
    return FileError(source, absl::StrCat("not a valid Study: ", parsed.message().ToString()));
  }
  return study;
}

absl::StatusOr<v1::Study> LoadStudyFile(const std::string& path) {
  auto read_error = [&path](int error) {
    std::string message =
        absl::StrCat("cannot read study file \"", path, "\": ", std::strerror(error));
    switch (error) {
      case ENOENT:
        return absl::NotFoundError(message);
      case EACCES:
        return absl::PermissionDeniedError(message);
      default:
        return absl::InvalidArgumentError(message);
    }
  };
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return read_error(errno);
  std::string text;
  char buffer[1 << 14];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  const bool failed = std::ferror(file) != 0;
  const int error = errno;  // from the failed read, e.g. EISDIR
  std::fclose(file);
  if (failed) return read_error(error);
  return ParseStudy(text, DetectStudyFileFormat(path, text), path);
}

}  // namespace evoscale::cli
