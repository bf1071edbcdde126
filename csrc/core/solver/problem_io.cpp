#include "core/solver/problem_io.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "core/json.h"

namespace tlm::solver {
namespace {

using json::ParseError;
using json::SchemaError;

// Pull parser over the raw text. `path_` is a stack of keys / array indices,
// formatted only when an error is raised (hot loops just bump an integer).
class Reader {
 public:
  explicit Reader(const std::string& text) : p_(text.data()), begin_(text.data()), end_(text.data() + text.size()) {}

  struct PathElem {
    std::string key;
    long long index = -1;  // >= 0: array element
  };
  std::vector<PathElem> path_;

  // Objects and arrays nest by recursion (skip() of unknown members included):
  // a bound keeps hostile documents from exhausting the stack. The contest
  // format nests 4 deep; the IR reader (json.cpp) has the same limit.
  static constexpr int kMaxDepth = 512;
  struct Nesting {
    Reader& r;
    explicit Nesting(Reader& reader) : r(reader) {
      if (++r.depth_ > kMaxDepth) r.syntax("nesting deeper than 512 levels");
    }
    ~Nesting() { --r.depth_; }
  };
  int depth_ = 0;

  void push_key(const std::string& k) { path_.push_back({k, -1}); }
  void push_index() { path_.push_back({"", 0}); }
  void pop() { path_.pop_back(); }
  void set_index(long long i) { path_.back().index = i; }

  std::string path() const {
    std::string s;
    for (const auto& e : path_) {
      if (e.index >= 0) {
        s += "[" + std::to_string(e.index) + "]";
      } else {
        if (!s.empty()) s += ".";
        s += e.key;
      }
    }
    return s.empty() ? "document" : s;
  }

  [[noreturn]] void syntax(const std::string& what) const {
    long long line = 1, col = 1;
    for (const char* q = begin_; q < p_ && q < end_; ++q) {
      if (*q == '\n') { ++line; col = 1; } else { ++col; }
    }
    throw ParseError("JSON parse error at line " + std::to_string(line) + ", column " + std::to_string(col) +
                     " (in " + path() + "): " + what);
  }
  [[noreturn]] void schema(const std::string& what) const { throw SchemaError(path() + ": " + what); }

  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  char peek() {
    ws();
    return p_ < end_ ? *p_ : '\0';
  }
  bool at_end() { ws(); return p_ >= end_; }
  void expect(char c) {
    if (peek() != c) syntax(std::string("expected '") + c + "'" + found());
    ++p_;
  }
  std::string found() const {
    if (p_ >= end_) return ", found end of input";
    return std::string(", found '") + *p_ + "'";
  }
  const char* kind_here() {
    char c = peek();
    switch (c) {
      case '{': return "object";
      case '[': return "array";
      case '"': return "string";
      case 't': case 'f': return "bool";
      case 'n': return "null";
      case '\0': return "end of input";
      default: return (c == '-' || (c >= '0' && c <= '9')) ? "number" : "invalid token";
    }
  }

  std::string string() {
    if (peek() != '"') schema(std::string("expected string, got ") + kind_here());
    ++p_;
    std::string out;
    while (true) {
      if (p_ >= end_) syntax("unterminated string");
      char c = *p_++;
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) syntax("control character in string");
      if (c != '\\') { out.push_back(c); continue; }
      std::string error;
      const char* next = json::decode_escape(p_, end_, out, error);
      if (!next) syntax(error);
      p_ = next;
    }
    return out;
  }

  bool null_here() {
    if (peek() != 'n') return false;
    if (end_ - p_ < 4 || std::strncmp(p_, "null", 4) != 0) syntax("invalid literal");
    p_ += 4;
    return true;
  }

  // An integer; integral doubles (1e+18) are accepted, anything else names the path.
  int64_t integer() {
    char c = peek();
    if (!(c == '-' || (c >= '0' && c <= '9'))) schema(std::string("expected integer, got ") + kind_here());
    const char* s = p_;
    bool neg = false;
    if (*p_ == '-') { neg = true; ++p_; }
    if (p_ >= end_ || *p_ < '0' || *p_ > '9') syntax("expected digit");
    unsigned __int128 mag = 0;
    bool overflow = false;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
      mag = mag * 10 + static_cast<unsigned>(*p_ - '0');
      if (mag > (static_cast<unsigned __int128>(1) << 64)) overflow = true, mag = static_cast<unsigned __int128>(1) << 64;
      ++p_;
    }
    if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) {
      ++p_;
      while (p_ < end_ && ((*p_ >= '0' && *p_ <= '9') || *p_ == '+' || *p_ == '-' || *p_ == 'e' || *p_ == 'E' || *p_ == '.')) ++p_;
      std::string tok(s, p_);
      char* stop = nullptr;
      double d = std::strtod(tok.c_str(), &stop);
      if (stop != tok.c_str() + tok.size()) syntax("malformed number '" + tok + "'");
      if (!(std::floor(d) == d) || std::fabs(d) > 9.2e18) schema("expected integer, got " + tok);
      return static_cast<int64_t>(d);
    }
    const unsigned __int128 lim = static_cast<unsigned __int128>(INT64_MAX) + (neg ? 1 : 0);
    if (overflow || mag > lim) schema("integer " + std::string(s, p_) + " does not fit in 64 bits");
    return neg ? static_cast<int64_t>(-static_cast<__int128>(mag)) : static_cast<int64_t>(mag);
  }

  // Calls fn(index) for each element of an array.
  template <typename F>
  void array(F&& fn) {
    if (peek() != '[') schema(std::string("expected array, got ") + kind_here());
    ++p_;
    Nesting nest(*this);
    push_index();
    long long i = 0;
    if (peek() == ']') { ++p_; pop(); return; }
    while (true) {
      set_index(i);
      fn(i);
      ++i;
      char c = peek();
      if (c == ',') { ++p_; continue; }
      if (c == ']') { ++p_; break; }
      syntax("expected ',' or ']'" + found());
    }
    pop();
  }

  // Calls fn(key) for each member; fn must consume the value.
  template <typename F>
  void object(F&& fn) {
    if (peek() != '{') schema(std::string("expected object, got ") + kind_here());
    ++p_;
    Nesting nest(*this);
    if (peek() == '}') { ++p_; return; }
    while (true) {
      if (peek() != '"') syntax("expected member name" + found());
      std::string key = string();
      expect(':');
      push_key(key);
      fn(key);
      pop();
      char c = peek();
      if (c == ',') { ++p_; continue; }
      if (c == '}') { ++p_; break; }
      syntax("expected ',' or '}'" + found());
    }
  }

  std::vector<int64_t> int_array() {
    std::vector<int64_t> out;
    array([&](long long) { out.push_back(integer()); });
    return out;
  }

  void skip() {
    char c = peek();
    if (c == '{') { object([&](const std::string&) { skip(); }); return; }
    if (c == '[') { array([&](long long) { skip(); }); return; }
    if (c == '"') { string(); return; }
    if (c == 'n') { null_here(); return; }
    if (c == 't' || c == 'f') {
      const char* lit = c == 't' ? "true" : "false";
      size_t n = std::strlen(lit);
      if (static_cast<size_t>(end_ - p_) < n || std::strncmp(p_, lit, n) != 0) syntax("invalid literal");
      p_ += n;
      return;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      ++p_;
      while (p_ < end_ && ((*p_ >= '0' && *p_ <= '9') || *p_ == '+' || *p_ == '-' || *p_ == 'e' || *p_ == 'E' || *p_ == '.')) ++p_;
      return;
    }
    syntax("unexpected character" + found());
  }

 private:
  const char* p_;
  const char* begin_;
  const char* end_;
};

struct RawNodes {
  std::optional<std::vector<std::pair<int64_t, int64_t>>> intervals;
  std::optional<std::vector<std::vector<int64_t>>> costs, usages;
  std::optional<std::vector<int64_t>> pinned;
  std::optional<std::vector<std::optional<int64_t>>> lower, upper;
};

struct RawPairs {  // edges or couplings: node pairs + one list per pair
  std::optional<std::vector<std::pair<int64_t, int64_t>>> nodes;
  std::optional<std::vector<std::vector<int64_t>>> lists;
};

std::vector<std::pair<int64_t, int64_t>> read_pairs(Reader& r) {
  std::vector<std::pair<int64_t, int64_t>> out;
  r.array([&](long long) {
    std::vector<int64_t> xs = r.int_array();
    if (xs.size() != 2) r.schema("expected 2 integers, got " + std::to_string(xs.size()));
    out.emplace_back(xs[0], xs[1]);
  });
  return out;
}

std::vector<std::vector<int64_t>> read_lists(Reader& r) {
  std::vector<std::vector<int64_t>> out;
  r.array([&](long long) { out.push_back(r.int_array()); });
  return out;
}

std::vector<std::optional<int64_t>> read_optional_ints(Reader& r) {
  std::vector<std::optional<int64_t>> out;
  r.array([&](long long) {
    if (r.null_here()) out.emplace_back();
    else out.emplace_back(r.integer());
  });
  return out;
}

RawNodes read_nodes(Reader& r) {
  RawNodes n;
  r.object([&](const std::string& k) {
    if (k == "intervals") n.intervals = read_pairs(r);
    else if (k == "costs") n.costs = read_lists(r);
    else if (k == "usages") n.usages = read_lists(r);
    else if (k == "pinned") n.pinned = r.int_array();
    else if (k == "usage_lower") n.lower = read_optional_ints(r);
    else if (k == "usage_upper") n.upper = read_optional_ints(r);
    else r.skip();
  });
  return n;
}

RawPairs read_pair_lists(Reader& r, const char* list_key) {
  RawPairs e;
  r.object([&](const std::string& k) {
    if (k == "nodes") e.nodes = read_pairs(r);
    else if (k == list_key) e.lists = read_lists(r);
    else r.skip();
  });
  return e;
}

[[noreturn]] void missing(const std::string& where, const char* field) {
  throw SchemaError(where + ": missing field '" + field + "'");
}
void same_length(size_t got, size_t want, const std::string& what, const std::string& other) {
  if (got != want)
    throw SchemaError(what + ": has " + std::to_string(got) + " entries; expected " + std::to_string(want) +
                      " (one per entry of " + other + ")");
}
int node_index(int64_t v, size_t n, const std::string& what) {
  if (v < 0 || static_cast<uint64_t>(v) >= n)
    throw SchemaError(what + ": node index " + std::to_string(v) + " out of range; expected 0.." +
                      std::to_string(n == 0 ? 0 : n - 1));
  return static_cast<int>(v);
}

Problem assemble(const std::string& pre, std::string name, RawNodes& rn, std::optional<RawPairs>& re,
                 std::optional<RawPairs>& rc, std::optional<int64_t> limit) {
  Problem p;
  p.name = std::move(name);
  p.usage_limit = limit;
  const std::string np = pre + "nodes";
  if (!rn.intervals) missing(np, "intervals");
  if (!rn.costs) missing(np, "costs");
  if (!rn.usages) missing(np, "usages");
  const size_t n = rn.costs->size();
  if (n > 100000000) throw SchemaError(np + ".costs: too many nodes");
  same_length(rn.intervals->size(), n, np + ".intervals", np + ".costs");
  same_length(rn.usages->size(), n, np + ".usages", np + ".costs");
  if (rn.pinned) same_length(rn.pinned->size(), n, np + ".pinned", np + ".costs");
  if (rn.lower) same_length(rn.lower->size(), n, np + ".usage_lower", np + ".costs");
  if (rn.upper) same_length(rn.upper->size(), n, np + ".usage_upper", np + ".costs");
  p.nodes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string at = "[" + std::to_string(i) + "]";
    Node& node = p.nodes[i];
    node.start = (*rn.intervals)[i].first;
    node.end = (*rn.intervals)[i].second;
    auto& c = (*rn.costs)[i];
    auto& u = (*rn.usages)[i];
    if (c.empty()) throw SchemaError(np + ".costs" + at + ": node has no strategies; expected at least one cost");
    same_length(u.size(), c.size(), np + ".usages" + at, np + ".costs" + at);
    node.strategies.resize(c.size());
    for (size_t s = 0; s < c.size(); ++s) {
      if (u[s] < 0)
        throw SchemaError(np + ".usages" + at + "[" + std::to_string(s) + "]: negative usage " + std::to_string(u[s]));
      node.strategies[s] = {c[s], u[s]};
    }
    if (rn.pinned) {
      int64_t pin = (*rn.pinned)[i];
      if (pin < -1 || pin >= static_cast<int64_t>(c.size()))
        throw SchemaError(np + ".pinned" + at + ": strategy " + std::to_string(pin) + " out of range; expected -1.." +
                          std::to_string(c.size() - 1));
      node.pinned = static_cast<int>(pin);
    }
    if (rn.lower) node.usage_lower = (*rn.lower)[i];
    if (rn.upper) node.usage_upper = (*rn.upper)[i];
    std::vector<int64_t>().swap(c);
    std::vector<int64_t>().swap(u);
  }
  if (re) {
    const std::string ep = pre + "edges";
    if (!re->nodes) missing(ep, "nodes");
    if (!re->lists) missing(ep, "costs");
    same_length(re->lists->size(), re->nodes->size(), ep + ".costs", ep + ".nodes");
    p.edges.resize(re->nodes->size());
    for (size_t e = 0; e < p.edges.size(); ++e) {
      const std::string at = "[" + std::to_string(e) + "]";
      Edge& edge = p.edges[e];
      edge.u = node_index((*re->nodes)[e].first, n, ep + ".nodes" + at + "[0]");
      edge.v = node_index((*re->nodes)[e].second, n, ep + ".nodes" + at + "[1]");
      if (edge.u == edge.v) throw SchemaError(ep + ".nodes" + at + ": edge connects node " + std::to_string(edge.u) + " to itself");
      size_t want = p.nodes[edge.u].strategies.size() * p.nodes[edge.v].strategies.size();
      auto& costs = (*re->lists)[e];
      if (costs.size() != want)
        throw SchemaError(ep + ".costs" + at + ": has " + std::to_string(costs.size()) +
                          " entries; expected |S_u| x |S_v| = " + std::to_string(want));
      edge.costs = make_cost_matrix(std::move(costs));
    }
  }
  if (rc) {
    const std::string cp = pre + "couplings";
    if (!rc->nodes) missing(cp, "nodes");
    if (!rc->lists) missing(cp, "maps");
    same_length(rc->lists->size(), rc->nodes->size(), cp + ".maps", cp + ".nodes");
    p.couplings.resize(rc->nodes->size());
    for (size_t k = 0; k < p.couplings.size(); ++k) {
      const std::string at = "[" + std::to_string(k) + "]";
      Coupling& c = p.couplings[k];
      c.u = node_index((*rc->nodes)[k].first, n, cp + ".nodes" + at + "[0]");
      c.v = node_index((*rc->nodes)[k].second, n, cp + ".nodes" + at + "[1]");
      if (c.u == c.v) throw SchemaError(cp + ".nodes" + at + ": couples node " + std::to_string(c.u) + " with itself");
      auto& m = (*rc->lists)[k];
      size_t su = p.nodes[c.u].strategies.size();
      int64_t sv = static_cast<int64_t>(p.nodes[c.v].strategies.size());
      if (m.size() != su)
        throw SchemaError(cp + ".maps" + at + ": has " + std::to_string(m.size()) + " entries; expected |S_u| = " +
                          std::to_string(su));
      c.map.resize(su);
      for (size_t s = 0; s < su; ++s) {
        if (m[s] < -1 || m[s] >= sv)
          throw SchemaError(cp + ".maps" + at + "[" + std::to_string(s) + "]: strategy " + std::to_string(m[s]) +
                            " out of range; expected -1.." + std::to_string(sv - 1));
        c.map[s] = static_cast<int>(m[s]);
      }
    }
  }
  validate(p);  // remaining cross-field checks (messages name nodes/edges by index)
  return p;
}

// Members of a problem object, collected in any order.
struct RawProblem {
  std::string name;
  std::optional<RawNodes> nodes;
  std::optional<RawPairs> edges, couplings;
  std::optional<int64_t> limit;

  bool member(Reader& r, const std::string& k) {
    if (k == "name") name = r.string();
    else if (k == "nodes") nodes = read_nodes(r);
    else if (k == "edges") edges = read_pair_lists(r, "costs");
    else if (k == "couplings") couplings = read_pair_lists(r, "maps");
    else if (k == "usage_limit") { if (!r.null_here()) limit = r.integer(); }
    else return false;
    return true;
  }
  Problem finish(const std::string& pre) {
    if (!nodes) missing(pre.empty() ? "document" : pre.substr(0, pre.size() - 1), "nodes");
    return assemble(pre, std::move(name), *nodes, edges, couplings, limit);
  }
};

}  // namespace

// One pass: {"problem": {...}} or the bare problem object (members at top level).
Problem read_problem(const std::string& text) {
  Reader r(text);
  RawProblem bare;
  std::optional<Problem> wrapped;
  r.object([&](const std::string& k) {
    if (k == "problem") {
      RawProblem inner;
      r.object([&](const std::string& m) { if (!inner.member(r, m)) r.skip(); });
      wrapped = inner.finish("problem.");
    } else if (!bare.member(r, k)) {
      r.skip();
    }
  });
  if (!r.at_end()) r.syntax("trailing characters after the document");
  if (wrapped) return std::move(*wrapped);
  if (!bare.nodes) throw SchemaError("document: missing field 'problem' (or a bare problem with 'nodes')");
  return bare.finish("");
}

std::string write_problem(const Problem& p) {
  std::string o;
  o.reserve(1 << 16);
  auto num = [&](int64_t v) { o += std::to_string(v); };
  auto list = [&](auto&& xs, auto&& fn) {
    o += '[';
    bool first = true;
    for (const auto& x : xs) {
      if (!first) o += ',';
      first = false;
      fn(x);
    }
    o += ']';
  };
  o += "{\"problem\":{\"name\":";
  o += json::Value(p.name).dump();
  o += ",\"nodes\":{\"intervals\":";
  list(p.nodes, [&](const Node& n) { o += '['; num(n.start); o += ','; num(n.end); o += ']'; });
  o += ",\"costs\":";
  list(p.nodes, [&](const Node& n) { list(n.strategies, [&](const Strategy& s) { num(s.cost); }); });
  o += ",\"usages\":";
  list(p.nodes, [&](const Node& n) { list(n.strategies, [&](const Strategy& s) { num(s.usage); }); });
  bool any_pin = false, any_lo = false, any_hi = false;
  for (const auto& n : p.nodes) any_pin |= n.pinned >= 0, any_lo |= n.usage_lower.has_value(), any_hi |= n.usage_upper.has_value();
  if (any_pin) { o += ",\"pinned\":"; list(p.nodes, [&](const Node& n) { num(n.pinned); }); }
  auto opt = [&](const std::optional<Usage>& v) { if (v) num(*v); else o += "null"; };
  if (any_lo) { o += ",\"usage_lower\":"; list(p.nodes, [&](const Node& n) { opt(n.usage_lower); }); }
  if (any_hi) { o += ",\"usage_upper\":"; list(p.nodes, [&](const Node& n) { opt(n.usage_upper); }); }
  o += "},\"edges\":{\"nodes\":";
  list(p.edges, [&](const Edge& e) { o += '['; num(e.u); o += ','; num(e.v); o += ']'; });
  o += ",\"costs\":";
  list(p.edges, [&](const Edge& e) { list(*e.costs, [&](Cost c) { num(c); }); });
  o += '}';
  if (!p.couplings.empty()) {
    o += ",\"couplings\":{\"nodes\":";
    list(p.couplings, [&](const Coupling& c) { o += '['; num(c.u); o += ','; num(c.v); o += ']'; });
    o += ",\"maps\":";
    list(p.couplings, [&](const Coupling& c) { list(c.map, [&](int m) { num(m); }); });
    o += '}';
  }
  if (p.usage_limit) { o += ",\"usage_limit\":"; num(*p.usage_limit); }
  o += "}}";
  return o;
}

std::string write_solution(const Problem& p, const Solution& x, const std::string& extra) {
  Evaluation ev = evaluate(p, x);
  std::string o = "{\"problem\":" + json::Value(p.name).dump() + ",\"solution\":[";
  for (size_t i = 0; i < x.size(); ++i) {
    if (i) o += ',';
    o += std::to_string(x[i]);
  }
  o += "],\"cost\":" + to_string(ev.cost) + ",\"feasible\":" + (ev.feasible ? "true" : "false");
  if (!extra.empty()) o += "," + extra;
  o += "}";
  return o;
}

Solution read_solution(const std::string& text) {
  Reader r(text);
  Solution x;
  auto read_list = [&]() {
    r.array([&](long long) {
      int64_t v = r.integer();
      if (v < INT32_MIN || v > INT32_MAX) r.schema("strategy index " + std::to_string(v) + " out of range");
      x.push_back(static_cast<int>(v));
    });
  };
  bool found = false;
  if (r.peek() == '[') {
    read_list();
    found = true;
  } else {
    r.object([&](const std::string& k) {
      if (k == "solution") { read_list(); found = true; }
      else r.skip();
    });
  }
  if (!found) throw SchemaError("document: missing field 'solution'");
  if (!r.at_end()) r.syntax("trailing characters after the document");
  return x;
}

}  // namespace tlm::solver
