// Minimal JSON document model, parser and writer.
//
// Why our own: the planner IR, plans, solver problems (our format and the
// IOPDDL contest format) and calibration profiles all cross the C++ boundary
// as JSON, and csrc/core must stay free of third-party dependencies so it
// builds in seconds. Integers are kept exactly as int64 (IOPDDL costs exceed
// 2^53); parse errors name the line and column.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tlm::json {

struct ParseError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A field had the wrong type or was missing; `path` names it ("nodes.costs[3][1]").
struct SchemaError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

class Value {
 public:
  enum class Type { Null, Bool, Int, Double, String, Array, Object };
  using Array = std::vector<Value>;
  using Object = std::vector<std::pair<std::string, Value>>;  // keeps insertion order

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : type_(Type::Bool), int_(b) {}
  Value(int v) : type_(Type::Int), int_(v) {}
  Value(int64_t v) : type_(Type::Int), int_(v) {}
  Value(double v) : type_(Type::Double), double_(v) {}
  Value(const char* s) : type_(Type::String), str_(s) {}
  Value(std::string s) : type_(Type::String), str_(std::move(s)) {}
  Value(Array a) : type_(Type::Array), arr_(std::make_shared<Array>(std::move(a))) {}
  Value(Object o) : type_(Type::Object), obj_(std::make_shared<Object>(std::move(o))) {}
  template <typename T>
  Value(const std::vector<T>& xs) : type_(Type::Array), arr_(std::make_shared<Array>()) {
    arr_->reserve(xs.size());
    for (const auto& x : xs) arr_->emplace_back(x);
  }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_int() const { return type_ == Type::Int; }
  bool is_number() const { return type_ == Type::Int || type_ == Type::Double; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Typed accessors; `what` names the field in the error message.
  bool as_bool(const std::string& what = "value") const;
  int64_t as_int(const std::string& what = "value") const;
  double as_double(const std::string& what = "value") const;
  const std::string& as_string(const std::string& what = "value") const;
  const Array& as_array(const std::string& what = "value") const;
  const Object& as_object(const std::string& what = "value") const;
  Array& mutable_array();
  Object& mutable_object();

  // Object lookup: nullptr when absent (or when not an object).
  const Value* find(const std::string& key) const;
  // Object lookup that throws SchemaError naming `what.key` when absent.
  const Value& at(const std::string& key, const std::string& what = "object") const;
  // Appends (or replaces) a key in an object value.
  void set(const std::string& key, Value v);
  void push_back(Value v);
  size_t size() const;

  std::string dump() const;  // compact, deterministic (insertion order)

 private:
  Type type_ = Type::Null;
  int64_t int_ = 0;
  double double_ = 0.0;
  std::string str_;
  std::shared_ptr<Array> arr_;
  std::shared_ptr<Object> obj_;
  void dump_to(std::string& out) const;
};

Value parse(const std::string& text);

// Decodes the JSON escape that follows a backslash (`p` points at the escape
// character, the input ends at `end`) and appends its character to `out`.
// \uXXXX becomes UTF-8; a high surrogate must be followed by a \u low surrogate
// -- how json.dumps writes characters above U+FFFF -- and the pair becomes one
// 4-byte character; a lone half has no UTF-8 form. Returns the position after
// the escape, or nullptr with `error` set. Shared by every reader (this parser
// and the IOPDDL pull reader).
const char* decode_escape(const char* p, const char* end, std::string& out, std::string& error);
const char* type_name(Value::Type t);

// Helpers for readers: typed vector extraction with field paths in errors.
std::vector<int64_t> int_list(const Value& v, const std::string& what);
std::vector<double> double_list(const Value& v, const std::string& what);

}  // namespace tlm::json
