#include "core/solver/milp.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>

#include "core/solver/cost_math.h"
#include "core/solver/highs_api.h"

namespace tlm::solver {

namespace {

// Columns and nonzeros of the MILP of `m`, counted until either passes its cap.
std::pair<size_t, size_t> count_milp(const Model& m, size_t max_cols, size_t max_nz) {
  size_t cols = m.strat.size(), nz = m.strat.size();
  for (const auto& e : m.edges) {
    if (cols > max_cols || nz > max_nz) return {cols, nz};
    size_t su = m.num_strategies(e.u), sv = m.num_strategies(e.v);
    size_t allowed = 0;
    for (size_t k = 0; k < su * sv; ++k) allowed += m.mat[e.off + k] != kInfiniteCost;
    cols += allowed;
    nz += 2 * allowed + su + sv;
  }
  // memory rows: one entry per (point, live node strategy with usage)
  for (int i = 0; i < m.n; ++i) {
    if (m.plo[i] >= m.phi[i]) continue;
    size_t used = 0;
    for (size_t k = m.off[i]; k < m.off[i + 1]; ++k) used += m.usage[k] != 0;
    nz += used * (m.phi[i] - m.plo[i]);
  }
  return {cols, nz};
}

}  // namespace

std::pair<size_t, size_t> milp_size(const Model& m) {
  return count_milp(m, std::numeric_limits<size_t>::max(), std::numeric_limits<size_t>::max());
}

bool milp_within(const Model& m, size_t max_cols, size_t max_nz) {
  const auto [cols, nz] = count_milp(m, max_cols, max_nz);
  return cols <= max_cols && nz <= max_nz;
}

namespace {

double elapsed_s(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// HiGHS checks limits and interrupt callbacks between LP iterations and B&B
// nodes, but not inside a root cut-separation round: on contest file D a call
// given 4.3 s returned after 5.1 s. Aiming this much before the caller's limit
// (at most a quarter of it) keeps the whole call inside the limit.
constexpr double kHighsOverrunS = 0.8;

double highs_budget(double limit_s) { return std::max(0.01, limit_s - std::min(kHighsOverrunS, 0.25 * limit_s)); }

struct CallbackState {
  std::chrono::steady_clock::time_point t0;
  const HighsApi* api;
  bool has_target;
  double target;
  bool reached = false;
  std::vector<std::pair<double, double>>* improvements;
  // HiGHS checks its time_limit only between some phases (a root LP or a
  // presolve round can overrun it by a second); the interrupt callbacks hold
  // our own deadline at every iteration they report.
  std::chrono::steady_clock::time_point deadline;
};

void on_highs_event(int type, const char*, const void* out, void* in, void* user) {
  auto* st = static_cast<CallbackState*>(user);
  if (type == kHighsCallbackMipImprovingSolution) {
    const void* v = st->api->getCallbackDataOutItem(out, "objective_function_value");
    double obj = v ? *static_cast<const double*>(v) : std::numeric_limits<double>::quiet_NaN();
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - st->t0).count();
    st->improvements->emplace_back(t, obj);
    if (st->has_target && obj <= st->target + 1e-6 * std::fabs(st->target)) st->reached = true;
  } else if (in && (st->reached || std::chrono::steady_clock::now() >= st->deadline)) {
    *static_cast<int*>(in) = 1;  // interrupt callbacks: HighsCallbackDataIn starts with `int user_interrupt`
  }
}

}  // namespace

MilpResult solve_milp(const Model& m, const MilpOptions& opt) {
  MilpResult r;
  const auto t0 = std::chrono::steady_clock::now();
  std::string why;
  const HighsApi* api = highs_api(&why);
  if (!api) {
    r.why = why;
    return r;
  }
  auto [cols_est, nz_est] = milp_size(m);
  if (cols_est > opt.max_columns || nz_est > opt.max_nonzeros) {
    r.why = "MILP too large: " + std::to_string(cols_est) + " columns, " + std::to_string(nz_est) +
            " nonzeros (limits " + std::to_string(opt.max_columns) + ", " + std::to_string(opt.max_nonzeros) + ")";
    return r;
  }
  // Columns: x (model strategies, per node shifted by the node's cheapest cost), then y.
  std::vector<double> cost, lower, upper;
  std::vector<HighsInt> integrality;
  double offset = static_cast<double>(m.offset);
  const size_t nx = m.strat.size();
  cost.reserve(cols_est);
  for (int i = 0; i < m.n; ++i) {
    Cost lo = *std::min_element(m.cost.begin() + m.off[i], m.cost.begin() + m.off[i + 1]);
    offset += static_cast<double>(lo);
    for (size_t k = m.off[i]; k < m.off[i + 1]; ++k) cost.push_back(static_cast<double>(m.cost[k] - lo));
  }
  integrality.assign(nx, kHighsInteger);
  // Rows, built row-wise.
  std::vector<HighsInt> start{0}, index;
  std::vector<double> value, row_lo, row_hi;
  index.reserve(nz_est);
  value.reserve(nz_est);
  for (int i = 0; i < m.n; ++i) {
    for (size_t k = m.off[i]; k < m.off[i + 1]; ++k) index.push_back(static_cast<HighsInt>(k)), value.push_back(1.0);
    start.push_back(static_cast<HighsInt>(index.size()));
    row_lo.push_back(1.0);
    row_hi.push_back(1.0);
  }
  std::vector<size_t> y_off(m.edges.size() + 1, nx);  // y columns of edge e start at y_off[e]
  std::vector<std::vector<HighsInt>> col_rows;  // temp: y columns of the rows of one edge
  for (size_t e = 0; e < m.edges.size(); ++e) {
    const auto& ed = m.edges[e];
    const int su = m.num_strategies(ed.u), sv = m.num_strategies(ed.v);
    const size_t first = cost.size();
    std::vector<std::vector<HighsInt>> by_t(sv);
    for (int s = 0; s < su; ++s) {
      // row: sum_t y[s,t] - x[u,s] = 0
      for (int t = 0; t < sv; ++t) {
        Cost c = m.mat[ed.off + static_cast<size_t>(s) * sv + t];
        if (c == kInfiniteCost) continue;
        HighsInt col = static_cast<HighsInt>(cost.size());
        cost.push_back(static_cast<double>(c));
        index.push_back(col);
        value.push_back(1.0);
        by_t[t].push_back(col);
      }
      index.push_back(static_cast<HighsInt>(m.off[ed.u] + s));
      value.push_back(-1.0);
      start.push_back(static_cast<HighsInt>(index.size()));
      row_lo.push_back(0.0);
      row_hi.push_back(0.0);
    }
    for (int t = 0; t < sv; ++t) {
      for (HighsInt col : by_t[t]) index.push_back(col), value.push_back(1.0);
      index.push_back(static_cast<HighsInt>(m.off[ed.v] + t));
      value.push_back(-1.0);
      start.push_back(static_cast<HighsInt>(index.size()));
      row_lo.push_back(0.0);
      row_hi.push_back(0.0);
    }
    (void)first;
    y_off[e + 1] = cost.size();
  }
  // Memory rows: nodes live at each point (sweep over sorted interval starts).
  if (!m.cap.empty()) {
    std::vector<std::vector<int>> starting(m.cap.size());
    for (int i = 0; i < m.n; ++i)
      if (m.plo[i] < m.phi[i]) starting[m.plo[i]].push_back(i);
    std::vector<int> live;
    for (size_t k = 0; k < m.cap.size(); ++k) {
      live.erase(std::remove_if(live.begin(), live.end(), [&](int i) { return m.phi[i] <= static_cast<int>(k); }),
                 live.end());
      live.insert(live.end(), starting[k].begin(), starting[k].end());
      std::sort(live.begin(), live.end());
      for (int i : live)
        for (size_t s = m.off[i]; s < m.off[i + 1]; ++s)
          if (m.usage[s] != 0) index.push_back(static_cast<HighsInt>(s)), value.push_back(static_cast<double>(m.usage[s]));
      start.push_back(static_cast<HighsInt>(index.size()));
      row_lo.push_back(-std::numeric_limits<double>::infinity());
      row_hi.push_back(static_cast<double>(m.cap[k]));
    }
  }
  if (opt.rows)
    for (const MemoryRow& row : *opt.rows) {
      for (const auto& [k, u] : row.terms)
        if (u != 0) index.push_back(static_cast<HighsInt>(k)), value.push_back(u);
      start.push_back(static_cast<HighsInt>(index.size()));
      row_lo.push_back(-std::numeric_limits<double>::infinity());
      row_hi.push_back(row.cap);
    }
  const size_t ncol = cost.size();
  lower.assign(ncol, 0.0);
  upper.assign(ncol, 1.0);
  for (size_t k = 0; k < nx; ++k)
    if (m.cost[k] >= kHugeCost) upper[k] = 0.0, cost[k] = 0.0;  // excluded by the caller
  integrality.resize(ncol, 0);
  const HighsInt nrow = static_cast<HighsInt>(row_lo.size());
  start.pop_back();  // row-wise starts: one per row

  // One HiGHS session at a time in this process: highspy 1.15's
  // Highs_destroy resets HiGHS' global task scheduler, which is not safe
  // while another thread is inside a HiGHS call (ERGO-Code/HiGHS#3141).
  static std::mutex session;
  std::lock_guard<std::mutex> one_at_a_time(session);
  void* h = api->create();
  struct Guard {
    const HighsApi* a;
    void* h;
    ~Guard() { a->destroy(h); }
  } guard{api, h};
  // TLM_HIGHS_LOG=1 shows HiGHS' own log (developers).
  api->setBoolOptionValue(h, "output_flag", std::getenv("TLM_HIGHS_LOG") ? 1 : 0);
  const double budget = highs_budget(opt.time_limit_s);
  api->setDoubleOptionValue(h, "time_limit", std::max(0.01, budget - elapsed_s(t0)));
  api->setDoubleOptionValue(h, "mip_rel_gap", opt.rel_gap);
  api->setDoubleOptionValue(h, "mip_abs_gap", 0.999);  // costs are integers: a gap below 1 proves optimality
  api->setIntOptionValue(h, "random_seed", static_cast<HighsInt>(opt.seed % 2147483647ULL));
  api->setIntOptionValue(h, "threads", std::max(1, opt.threads));
  if (opt.has_cutoff) api->setDoubleOptionValue(h, "objective_bound", opt.cutoff);
  if (api->passMip(h, static_cast<HighsInt>(ncol), nrow, static_cast<HighsInt>(index.size()), kHighsMatrixRowwise,
                   kHighsMinimize, offset, cost.data(), lower.data(), upper.data(), row_lo.data(), row_hi.data(),
                   start.data(), index.data(), value.data(), integrality.data()) < 0) {
    r.why = "HiGHS rejected the model";
    return r;
  }
  if (opt.start && opt.start->size() == static_cast<size_t>(m.n)) {
    std::vector<double> x(ncol, 0.0);
    for (int i = 0; i < m.n; ++i) x[m.off[i] + (*opt.start)[i]] = 1.0;
    for (size_t e = 0; e < m.edges.size(); ++e) {
      const auto& ed = m.edges[e];
      const int sv = m.num_strategies(ed.v);
      size_t col = y_off[e];
      for (int s = 0; s < m.num_strategies(ed.u); ++s)
        for (int t = 0; t < sv; ++t) {
          if (m.mat[ed.off + static_cast<size_t>(s) * sv + t] == kInfiniteCost) continue;
          if (s == (*opt.start)[ed.u] && t == (*opt.start)[ed.v]) x[col] = 1.0;
          ++col;
        }
    }
    api->setSolution(h, x.data(), nullptr, nullptr, nullptr);
  }
  CallbackState st{t0, api, opt.has_target, opt.target, false, &r.improvements,
                   t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(budget))};
  api->setCallback(h, &on_highs_event, &st);
  api->startCallback(h, kHighsCallbackMipImprovingSolution);
  api->startCallback(h, kHighsCallbackSimplexInterrupt);
  api->startCallback(h, kHighsCallbackIpmInterrupt);
  api->startCallback(h, kHighsCallbackMipInterrupt);
  api->run(h);
  r.ran = true;
  HighsInt status = api->getModelStatus(h);
  r.optimal = status == kHighsModelOptimal;
  r.infeasible = status == kHighsModelInfeasible;
  double db = -std::numeric_limits<double>::infinity();
  api->getDoubleInfoValue(h, "mip_dual_bound", &db);
  r.dual_bound = std::isfinite(db) ? db : -std::numeric_limits<double>::infinity();
  HighsInt sol_status = 0;
  api->getIntInfoValue(h, "primal_solution_status", &sol_status);
  if (sol_status == 2) {  // feasible
    std::vector<double> x(ncol);
    api->getSolution(h, x.data(), nullptr, nullptr, nullptr);
    r.labels.assign(m.n, 0);
    for (int i = 0; i < m.n; ++i) {
      size_t best = m.off[i];
      for (size_t k = m.off[i]; k < m.off[i + 1]; ++k)
        if (x[k] > x[best]) best = k;
      r.labels[i] = static_cast<int>(best - m.off[i]);
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

Model plain_model(const Problem& p) {
  validate(p);
  Model m;
  m.n = static_cast<int>(p.nodes.size());
  m.off.assign(1, 0);
  std::vector<std::vector<int>> local(m.n);
  std::vector<int64_t> times;
  const bool limited = p.usage_limit.has_value();
  for (int i = 0; i < m.n; ++i) {
    const Node& nd = p.nodes[i];
    m.orig.push_back(i);
    local[i].assign(nd.strategies.size(), -1);
    for (size_t s = 0; s < nd.strategies.size(); ++s) {
      const Strategy& st = nd.strategies[s];
      bool allowed = st.cost != kInfiniteCost && (nd.pinned < 0 || static_cast<int>(s) == nd.pinned) &&
                     !(nd.usage_lower && st.usage < *nd.usage_lower) && !(nd.usage_upper && st.usage > *nd.usage_upper);
      if (!allowed) continue;
      local[i][s] = static_cast<int>(m.strat.size() - m.off.back());
      m.strat.push_back(static_cast<int>(s));
      m.cost.push_back(st.cost);
      m.usage.push_back(limited && nd.start < nd.end ? st.usage : 0);
    }
    m.off.push_back(m.strat.size());
    if (m.off[i + 1] == m.off[i]) throw std::invalid_argument("node " + std::to_string(i) + " has no allowed strategy");
    if (limited && nd.start < nd.end) times.push_back(nd.start);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  m.plo.assign(m.n, 0);
  m.phi.assign(m.n, 0);
  for (int i = 0; i < m.n; ++i) {
    const Node& nd = p.nodes[i];
    if (!limited || nd.start >= nd.end) continue;
    m.plo[i] = static_cast<int>(std::lower_bound(times.begin(), times.end(), nd.start) - times.begin());
    m.phi[i] = static_cast<int>(std::lower_bound(times.begin(), times.end(), nd.end) - times.begin());
  }
  m.cap.assign(times.size(), limited ? *p.usage_limit : 0);
  m.point_time = times;
  auto add_edge = [&](int u, int v, auto&& entry) {
    Model::ModelEdge me{u, v, m.mat.size()};
    for (size_t a = 0; a < local[u].size(); ++a) {
      if (local[u][a] < 0) continue;
      for (size_t b = 0; b < local[v].size(); ++b)
        if (local[v][b] >= 0) m.mat.push_back(entry(a, b));
    }
    m.edges.push_back(me);
  };
  for (const Edge& e : p.edges) {
    size_t sv = p.nodes[e.v].strategies.size();
    const std::vector<Cost>& costs = *e.costs;
    add_edge(e.u, e.v, [&](size_t a, size_t b) { return costs[a * sv + b]; });
  }
  for (const Coupling& c : p.couplings)
    add_edge(c.u, c.v, [&](size_t a, size_t b) { return c.map[a] == static_cast<int>(b) ? Cost{0} : kInfiniteCost; });
  std::vector<std::vector<int>> adj(m.n);
  for (size_t e = 0; e < m.edges.size(); ++e) {
    adj[m.edges[e].u].push_back(static_cast<int>(e));
    adj[m.edges[e].v].push_back(static_cast<int>(e));
  }
  m.adj_off.assign(1, 0);
  for (auto& a : adj) {
    m.adj.insert(m.adj.end(), a.begin(), a.end());
    m.adj_off.push_back(m.adj.size());
  }
  return m;
}

}  // namespace tlm::solver
