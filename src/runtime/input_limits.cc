#include "runtime/input_limits.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace carve {

using json = nlohmann::json;

namespace {

// The code point of the UTF-8 sequence at text[i] and its length; length 0 when it is not valid
// UTF-8 (truncated, overlong, a surrogate, past U+10FFFF).
std::pair<uint32_t, size_t> DecodeUtf8(absl::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  uint8_t b = byte(i);
  if (b < 0x80) return {b, 1};
  size_t len = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 && b < 0xE0 ? 2 : 0;
  if (len == 0 || i + len > text.size()) return {0, 0};
  uint32_t cp = b & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return {0, 0};
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {0, 0};
  return {cp, len};
}

// Characters that steer a terminal or reorder text: C0, DEL, C1, line/paragraph separators and
// the bidirectional overrides and isolates.
bool IsControl(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

std::string Escape(uint32_t cp) {
  switch (cp) {
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      return cp < 0x80 ? absl::StrFormat("\\x%02x", cp) : absl::StrFormat("\\u%04x", cp);
  }
}

}  // namespace

absl::Status CheckJsonDepth(absl::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return absl::InvalidArgumentError(
            absl::StrCat("the body nests deeper than ", max_depth, " levels"));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<json> ParseJsonBody(absl::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        "the body is empty: send a JSON document with Content-Type: application/json (the "
        "endpoints and their bodies: /api/v1/openapi.json)");
  }
  if (absl::Status s = CheckJsonDepth(text); !s.ok()) return s;
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError("the body is not valid JSON");
  return j;
}

absl::Status CheckPrintable(absl::string_view field, absl::string_view value, size_t max_bytes) {
  if (max_bytes > 0 && value.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", value.size(), " bytes; at most ", max_bytes));
  }
  for (size_t i = 0; i < value.size();) {
    auto [cp, len] = DecodeUtf8(value, i);
    if (len == 0) return absl::InvalidArgumentError(absl::StrCat(field, ": not valid UTF-8"));
    if (IsControl(cp)) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": holds the control character ",
                                                     Escape(cp), " at byte ", i,
                                                     "; only printable characters are allowed"));
    }
    i += len;
  }
  return absl::OkStatus();
}

bool IsEnvName(absl::string_view name) {
  if (name.empty() || name.size() > 256) return false;
  auto letter = [](char c) { return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
  if (!letter(name[0])) return false;
  for (char c : name) {
    if (!letter(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

absl::Status CheckStringBytes(const json& j, const std::string& at, size_t max_bytes) {
  if (j.is_string()) {
    const size_t size = j.get_ref<const std::string&>().size();
    if (size <= max_bytes) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(at.empty() ? "body" : at, ": is ", size, " bytes; at most ", max_bytes));
  }
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      absl::Status s = CheckStringBytes(j[i], absl::StrCat(at, "[", i, "]"), max_bytes);
      if (!s.ok()) return s;
    }
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      absl::Status s = CheckStringBytes(
          it.value(), at.empty() ? it.key() : absl::StrCat(at, ".", it.key()), max_bytes);
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

std::string TerminalSafe(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    auto [cp, len] = DecodeUtf8(text, i);
    if (len == 0) {  // a stray byte: 0x9b alone is CSI to an 8-bit terminal
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", static_cast<uint8_t>(text[i])));
      ++i;
      continue;
    }
    if (IsControl(cp)) {
      out += Escape(cp);
    } else {
      out.append(text.data() + i, len);
    }
    i += len;
  }
  return out;
}

void MakeTerminalSafe(json& j) {
  if (j.is_string()) {
    j = TerminalSafe(j.get_ref<const std::string&>());
  } else if (j.is_array()) {
    for (json& e : j) MakeTerminalSafe(e);
  } else if (j.is_object()) {
    json out = json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      MakeTerminalSafe(it.value());
      out[TerminalSafe(it.key())] = std::move(it.value());
    }
    j = std::move(out);
  }
}

}  // namespace carve
