#include "core/json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tlm::json {

const char* type_name(Value::Type t) {
  switch (t) {
    case Value::Type::Null: return "null";
    case Value::Type::Bool: return "bool";
    case Value::Type::Int: return "integer";
    case Value::Type::Double: return "number";
    case Value::Type::String: return "string";
    case Value::Type::Array: return "array";
    case Value::Type::Object: return "object";
  }
  return "?";
}

static SchemaError type_error(const std::string& what, const char* expected, Value::Type got) {
  return SchemaError(what + ": expected " + expected + ", got " + type_name(got));
}

bool Value::as_bool(const std::string& what) const {
  if (type_ != Type::Bool) throw type_error(what, "bool", type_);
  return int_ != 0;
}
int64_t Value::as_int(const std::string& what) const {
  if (type_ == Type::Int) return int_;
  if (type_ == Type::Double && std::floor(double_) == double_ && std::fabs(double_) < 9.2e18)
    return static_cast<int64_t>(double_);
  throw type_error(what, "integer", type_);
}
double Value::as_double(const std::string& what) const {
  if (type_ == Type::Int) return static_cast<double>(int_);
  if (type_ == Type::Double) return double_;
  throw type_error(what, "number", type_);
}
const std::string& Value::as_string(const std::string& what) const {
  if (type_ != Type::String) throw type_error(what, "string", type_);
  return str_;
}
const Value::Array& Value::as_array(const std::string& what) const {
  if (type_ != Type::Array) throw type_error(what, "array", type_);
  return *arr_;
}
const Value::Object& Value::as_object(const std::string& what) const {
  if (type_ != Type::Object) throw type_error(what, "object", type_);
  return *obj_;
}
Value::Array& Value::mutable_array() {
  if (type_ == Type::Null) { type_ = Type::Array; arr_ = std::make_shared<Array>(); }
  if (type_ != Type::Array) throw type_error("value", "array", type_);
  if (arr_.use_count() > 1) arr_ = std::make_shared<Array>(*arr_);
  return *arr_;
}
Value::Object& Value::mutable_object() {
  if (type_ == Type::Null) { type_ = Type::Object; obj_ = std::make_shared<Object>(); }
  if (type_ != Type::Object) throw type_error("value", "object", type_);
  if (obj_.use_count() > 1) obj_ = std::make_shared<Object>(*obj_);
  return *obj_;
}

const Value* Value::find(const std::string& key) const {
  if (type_ != Type::Object) return nullptr;
  for (const auto& kv : *obj_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}
const Value& Value::at(const std::string& key, const std::string& what) const {
  as_object(what);
  const Value* v = find(key);
  if (!v) throw SchemaError(what + ": missing field '" + key + "'");
  return *v;
}
void Value::set(const std::string& key, Value v) {
  auto& o = mutable_object();
  for (auto& kv : o)
    if (kv.first == key) { kv.second = std::move(v); return; }
  o.emplace_back(key, std::move(v));
}
void Value::push_back(Value v) { mutable_array().push_back(std::move(v)); }
size_t Value::size() const {
  if (type_ == Type::Array) return arr_->size();
  if (type_ == Type::Object) return obj_->size();
  return 0;
}

static void dump_string(const std::string& s, std::string& out) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void Value::dump_to(std::string& out) const {
  switch (type_) {
    case Type::Null: out += "null"; break;
    case Type::Bool: out += int_ ? "true" : "false"; break;
    case Type::Int: out += std::to_string(int_); break;
    case Type::Double: {
      if (!std::isfinite(double_)) { out += double_ > 0 ? "1e999" : (double_ < 0 ? "-1e999" : "null"); break; }
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", double_);
      out += buf;
      if (!std::strpbrk(buf, ".eE")) out += ".0";
      break;
    }
    case Type::String: dump_string(str_, out); break;
    case Type::Array: {
      out.push_back('[');
      for (size_t i = 0; i < arr_->size(); ++i) {
        if (i) out.push_back(',');
        (*arr_)[i].dump_to(out);
      }
      out.push_back(']');
      break;
    }
    case Type::Object: {
      out.push_back('{');
      for (size_t i = 0; i < obj_->size(); ++i) {
        if (i) out.push_back(',');
        dump_string((*obj_)[i].first, out);
        out.push_back(':');
        (*obj_)[i].second.dump_to(out);
      }
      out.push_back('}');
      break;
    }
  }
}
std::string Value::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Value parse_document() {
    skip_ws();
    Value v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected trailing characters");
    return v;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;
  static constexpr int kMaxDepth = 512;  // bounds recursion on hostile input

  [[noreturn]] void fail(const std::string& msg) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    throw ParseError("JSON parse error at line " + std::to_string(line) + ", column " +
                     std::to_string(col) + ": " + msg);
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    if (pos_ >= s_.size() || s_[pos_] != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool consume_literal(const char* lit) {
    size_t n = std::strlen(lit);
    if (s_.compare(pos_, n, lit) == 0) { pos_ += n; return true; }
    return false;
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 512 levels");
    if (pos_ >= s_.size()) fail("unexpected end of input");
    char c = s_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Value(parse_string());
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    if (consume_literal("true")) return Value(true);
    if (consume_literal("false")) return Value(false);
    if (consume_literal("null")) return Value(nullptr);
    if (consume_literal("Infinity")) return Value(HUGE_VAL);
    if (consume_literal("NaN")) return Value(std::nan(""));
    fail(std::string("unexpected character '") + c + "'");
  }

  Value parse_object(int depth) {
    expect('{');
    Value::Object obj;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') { ++pos_; return Value(std::move(obj)); }
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
      std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      obj.emplace_back(std::move(key), parse_value(depth + 1));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
      expect('}');
      return Value(std::move(obj));
    }
  }

  Value parse_array(int depth) {
    expect('[');
    Value::Array arr;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') { ++pos_; return Value(std::move(arr)); }
    while (true) {
      skip_ws();
      arr.push_back(parse_value(depth + 1));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
      expect(']');
      return Value(std::move(arr));
    }
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') { out.push_back(c); continue; }
      std::string error;
      const char* next = decode_escape(s_.data() + pos_, s_.data() + s_.size(), out, error);
      if (!next) fail(error);
      pos_ = static_cast<size_t>(next - s_.data());
    }
  }

  Value parse_number() {
    size_t start = pos_;
    bool is_float = false;
    if (s_[pos_] == '-') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == 'I') {  // -Infinity
      if (consume_literal("Infinity")) return Value(-HUGE_VAL);
      fail("bad number");
    }
    if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) fail("bad number");
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      is_float = true;
      ++pos_;
      if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) fail("bad number: digit expected after '.'");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      is_float = true;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) fail("bad number: digit expected in exponent");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    std::string tok = s_.substr(start, pos_ - start);
    if (!is_float) {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(tok.c_str(), &end, 10);
      if (errno == 0 && end && *end == '\0') return Value(static_cast<int64_t>(v));
      // Out of int64 range: keep it as a double rather than wrapping silently.
    }
    return Value(std::strtod(tok.c_str(), nullptr));
  }
};

}  // namespace

namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Four hex digits at p, or -1.
int64_t hex4(const char* p, const char* end) {
  if (end - p < 4) return -1;
  int64_t v = 0;
  for (int i = 0; i < 4; ++i) {
    const char h = p[i];
    v <<= 4;
    if (h >= '0' && h <= '9') v |= h - '0';
    else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
    else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10;
    else return -1;
  }
  return v;
}

}  // namespace

namespace {

const char* decode_unicode_escape(const char* p, const char* end, std::string& out, std::string& error) {
  const int64_t cp = hex4(p, end);
  if (cp < 0) {
    error = "bad or truncated \\u escape (expected four hex digits)";
    return nullptr;
  }
  p += 4;
  if (cp >= 0xDC00 && cp <= 0xDFFF) {
    error = "lone low surrogate in \\u escape (not valid Unicode)";
    return nullptr;
  }
  if (cp < 0xD800 || cp > 0xDBFF) {
    append_utf8(out, static_cast<uint32_t>(cp));
    return p;
  }
  const int64_t lo = end - p >= 6 && p[0] == '\\' && p[1] == 'u' ? hex4(p + 2, end) : -1;
  if (lo < 0xDC00 || lo > 0xDFFF) {
    error = "high surrogate in \\u escape without its low half (not valid Unicode)";
    return nullptr;
  }
  append_utf8(out, static_cast<uint32_t>(0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)));
  return p + 6;
}

}  // namespace

const char* decode_escape(const char* p, const char* end, std::string& out, std::string& error) {
  if (p >= end) {
    error = "unterminated escape";
    return nullptr;
  }
  switch (const char e = *p++) {
    case '"': out.push_back('"'); return p;
    case '\\': out.push_back('\\'); return p;
    case '/': out.push_back('/'); return p;
    case 'b': out.push_back('\b'); return p;
    case 'f': out.push_back('\f'); return p;
    case 'n': out.push_back('\n'); return p;
    case 'r': out.push_back('\r'); return p;
    case 't': out.push_back('\t'); return p;
    case 'u': return decode_unicode_escape(p, end, out, error);
    default:
      error = std::string("bad escape '\\") + e + "'";
      return nullptr;
  }
}

Value parse(const std::string& text) { return Parser(text).parse_document(); }

std::vector<int64_t> int_list(const Value& v, const std::string& what) {
  const auto& arr = v.as_array(what);
  std::vector<int64_t> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) out.push_back(arr[i].as_int(what + "[" + std::to_string(i) + "]"));
  return out;
}

std::vector<double> double_list(const Value& v, const std::string& what) {
  const auto& arr = v.as_array(what);
  std::vector<double> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) out.push_back(arr[i].as_double(what + "[" + std::to_string(i) + "]"));
  return out;
}

}  // namespace tlm::json
