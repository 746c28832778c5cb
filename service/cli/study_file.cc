// Study files: a Study (or a bare StudySpec) as protobuf JSON or as YAML.
//
// YAML goes through yaml-cpp to JSON text and then through protobuf's JSON parser, so both
// formats accept exactly the same fields and enum names and report unknown fields the same
// way. yaml-cpp throws; its exceptions are caught here and never leave this file.

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "evoscale/v1/study.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "service/cli/cli.h"
#include "yaml-cpp/yaml.h"

namespace evoscale::cli {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// yaml-cpp's tag for a non-plain (quoted or block) scalar without an explicit tag.
constexpr absl::string_view kNonPlainTag = "!";
constexpr absl::string_view kYamlTagPrefix = "tag:yaml.org,2002:";

void AppendJsonString(absl::string_view text, std::string* json) {
  json->push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        json->append("\\\"");
        break;
      case '\\':
        json->append("\\\\");
        break;
      case '\n':
        json->append("\\n");
        break;
      case '\r':
        json->append("\\r");
        break;
      case '\t':
        json->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(json, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          json->push_back(c);  // UTF-8 passes through unchanged
        }
    }
  }
  json->push_back('"');
}

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
std::optional<std::string> YamlNumberAsJson(absl::string_view s) {
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return "\"NaN\"";
  absl::string_view sign;
  absl::string_view body = s;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
    if (body[0] == '-') sign = "-";
    body.remove_prefix(1);
  }
  if (body == ".inf" || body == ".Inf" || body == ".INF") {
    return absl::StrCat("\"", sign, "Infinity\"");
  }
  // Octal (0o17) and hexadecimal (0x1F) integers; unsigned, without a sign, in the core schema.
  const bool has_sign = body.size() != s.size();
  if (!has_sign && s.size() > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'x')) {
    const int base = s[1] == 'o' ? 8 : 16;
    uint64_t value = 0;
    auto [end, error] = std::from_chars(s.data() + 2, s.data() + s.size(), value, base);
    if (error != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return absl::StrCat(value);
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
  // JSON wants a leading digit, no leading zeros, no '+' and no bare '.'.
  std::string json(sign);
  absl::StrAppend(&json, integer.empty() ? absl::string_view("0") : StripLeadingZeros(integer));
  if (!fraction.empty()) absl::StrAppend(&json, ".", fraction);
  if (!exponent.empty()) absl::StrAppend(&json, "e", exponent);
  return json;
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

class YamlToJsonConverter {
 public:
  absl::Status Convert(const YAML::Node& node, const Descriptor* schema, std::string* json) {
    json_ = json;
    if (node.IsMap()) return AppendObject(node, schema);
    return AppendValue(node, nullptr, /*element=*/false);
  }

 private:
  // A mapping whose keys are the fields of `message` (nullptr: unknown, convert generically).
  absl::Status AppendObject(const YAML::Node& node, const Descriptor* message) {
    json_->push_back('{');
    bool first = true;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(entry.first.Mark()), "mapping keys must be plain names"));
      }
      if (!first) json_->push_back(',');
      first = false;
      const std::string& key = entry.first.Scalar();
      AppendJsonString(key, json_);
      json_->push_back(':');
      if (absl::Status s = AppendValue(entry.second, FindField(message, key), false); !s.ok()) {
        return s;
      }
    }
    json_->push_back('}');
    return absl::OkStatus();
  }

  // The value of `field` (nullptr: unknown); `element` when it is one element of a repeated
  // field or the value of a map entry.
  absl::Status AppendValue(const YAML::Node& node, const FieldDescriptor* field, bool element) {
    const bool whole_repeated = field != nullptr && field->is_repeated() && !element;
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        json_->append("null");
        return absl::OkStatus();
      case YAML::NodeType::Sequence: {
        json_->push_back('[');
        bool first = true;
        for (const YAML::Node& item : node) {
          if (!first) json_->push_back(',');
          first = false;
          absl::Status s = whole_repeated ? AppendValue(item, field, /*element=*/true)
                                          : AppendValue(item, nullptr, false);
          if (!s.ok()) return s;
        }
        json_->push_back(']');
        return absl::OkStatus();
      }
      case YAML::NodeType::Map:
        if (field != nullptr && field->is_map() && !element) {
          return AppendMapField(node, field);
        }
        if (field != nullptr && field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
            (element || !field->is_repeated())) {
          return AppendObject(node, field->message_type());
        }
        return AppendObject(node, nullptr);
      case YAML::NodeType::Scalar:
        AppendScalar(node, IsStringField(field) && (element || !field->is_repeated()));
        return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  // A protobuf map: keys are always JSON strings; values follow the entry's value field.
  absl::Status AppendMapField(const YAML::Node& node, const FieldDescriptor* field) {
    const FieldDescriptor* value_field = field->message_type()->FindFieldByNumber(2);
    json_->push_back('{');
    bool first = true;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(entry.first.Mark()), "map keys must be scalars"));
      }
      if (!first) json_->push_back(',');
      first = false;
      AppendJsonString(entry.first.Scalar(), json_);
      json_->push_back(':');
      if (absl::Status s = AppendValue(entry.second, value_field, /*element=*/true); !s.ok()) {
        return s;
      }
    }
    json_->push_back('}');
    return absl::OkStatus();
  }

  void AppendScalar(const YAML::Node& node, bool string_field) {
    const std::string& text = node.Scalar();
    const std::string& tag = node.Tag();
    if (tag == kNonPlainTag) {  // quoted: always a string
      AppendJsonString(text, json_);
      return;
    }
    if (absl::StartsWith(tag, kYamlTagPrefix)) {  // explicit !!str, !!int, ...
      absl::string_view type = absl::string_view(tag).substr(kYamlTagPrefix.size());
      if (type == "str") {
        AppendJsonString(text, json_);
        return;
      }
      string_field = false;  // !!int, !!float, !!bool, !!null: as their text says
    }
    if (IsYamlNull(text)) {
      json_->append("null");
    } else if (string_field) {
      AppendJsonString(text, json_);
    } else if (std::optional<bool> b = YamlBool(text)) {
      json_->append(*b ? "true" : "false");
    } else if (std::optional<std::string> number = YamlNumberAsJson(text)) {
      json_->append(*number);
    } else {
      AppendJsonString(text, json_);
    }
  }

  std::string* json_ = nullptr;  // not owned; the output being built
};

// Loads the first YAML document of `yaml`; errors carry the position.
absl::StatusOr<YAML::Node> LoadYaml(absl::string_view yaml) {
  try {
    return YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(Where(e.mark), e.msg));
  }
}

absl::StatusOr<std::string> ConvertYaml(const YAML::Node& node, const Descriptor* schema) {
  std::string json;
  try {
    if (absl::Status s = YamlToJsonConverter().Convert(node, schema, &json); !s.ok()) return s;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(Where(e.mark), e.msg));
  }
  return json;
}

// protobuf's JSON parser reports a syntax error over three lines (the problem, the text
// around it, a caret); fold them into one: `Expected : between key:value pair. near "{"a" 1}"`.
std::string OneLine(absl::string_view message) {
  std::vector<absl::string_view> lines = absl::StrSplit(message, '\n', absl::SkipWhitespace());
  if (lines.empty()) return "";
  std::string text(absl::StripAsciiWhitespace(lines[0]));
  std::vector<std::string> context;
  for (size_t i = 1; i < lines.size(); ++i) {
    absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
    if (line != "^") context.emplace_back(line);
  }
  if (!context.empty()) absl::StrAppend(&text, " near \"", absl::StrJoin(context, " "), "\"");
  return text;
}

absl::Status FileError(absl::string_view source, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("study file \"", source, "\": ", problem));
}

// The study's JSON text from a YAML file; a bare StudySpec is wrapped as {"spec": ...}.
absl::StatusOr<std::string> StudyJsonFromYaml(absl::string_view text, absl::string_view source) {
  absl::StatusOr<YAML::Node> root = LoadYaml(text);
  if (!root.ok()) return FileError(source, root.status().message());
  if (root->IsNull()) return FileError(source, "the file holds no study");
  if (!root->IsMap()) return FileError(source, "expected a mapping of Study fields");
  const YAML::Node& study = *root;
  const bool bare_spec = !study["spec"] && (study["metrics"] || study["parameters"]);
  absl::StatusOr<std::string> json =
      ConvertYaml(study, bare_spec ? v1::StudySpec::descriptor() : v1::Study::descriptor());
  if (!json.ok()) return FileError(source, json.status().message());
  return bare_spec ? absl::StrCat("{\"spec\":", *json, "}") : *std::move(json);
}

// The study's JSON text from a JSON file; a bare StudySpec is wrapped as {"spec": ...}.
absl::StatusOr<std::string> StudyJsonFromJson(absl::string_view text, absl::string_view source) {
  // Parse once generically, to give syntax errors on their own and to look at the keys.
  google::protobuf::Struct object;
  google::protobuf::util::Status parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), &object);
  if (!parsed.ok()) {
    if (absl::StripAsciiWhitespace(text).empty()) {
      return FileError(source, "the file holds no study");
    }
    return FileError(source, absl::StrCat("invalid JSON: ", OneLine(parsed.message().ToString())));
  }
  const auto& fields = object.fields();
  if (!fields.contains("spec") && (fields.contains("metrics") || fields.contains("parameters"))) {
    return absl::StrCat("{\"spec\":", text, "}");
  }
  return std::string(text);
}

}  // namespace

absl::StatusOr<std::string> YamlToJson(absl::string_view yaml, const Descriptor* schema) {
  absl::StatusOr<YAML::Node> root = LoadYaml(yaml);
  if (!root.ok()) return root.status();
  return ConvertYaml(*root, schema);
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
  absl::StatusOr<std::string> json = format == StudyFileFormat::kYaml
                                         ? StudyJsonFromYaml(text, source)
                                         : StudyJsonFromJson(text, source);
  if (!json.ok()) return json.status();
  v1::Study study;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  google::protobuf::util::Status parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json->data(), json->size()), &study, options);
  if (!parsed.ok()) {
    return FileError(source,
                     absl::StrCat("not a valid Study: ", OneLine(parsed.message().ToString())));
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
