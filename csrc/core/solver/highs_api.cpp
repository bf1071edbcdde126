#include "core/solver/highs_api.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

namespace tlm::solver {
namespace {

std::mutex g_mutex;
std::string g_path;
bool g_tried = false;
HighsApi g_api;
const HighsApi* g_loaded = nullptr;
std::string g_loaded_path, g_version;
std::string g_error =
    "no HiGHS library location (torch_localmap sets it from the highspy package; or set TLM_HIGHS_LIBRARY)";

template <typename F>
bool sym(void* lib, const char* name, F& out, std::string& err) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out) err = std::string("symbol ") + name + " missing";
  return out != nullptr;
}

bool is_shared_object(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  return name.size() > 3 && (name.find(".so") != std::string::npos || name.find(".dylib") != std::string::npos);
}

// Files to try for `path`: the file itself, or a directory's shared objects,
// libhighs* first (a plain C library), then the rest, each group sorted by
// name so the choice is deterministic.
std::vector<std::string> candidates(const std::string& path, std::string& err) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  std::vector<std::string> libs, others;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (!entry.is_regular_file(ec) || !is_shared_object(entry.path())) continue;
    (entry.path().filename().string().rfind("libhighs", 0) == 0 ? libs : others).push_back(entry.path().string());
  }
  if (ec) err = "cannot list " + path + ": " + ec.message();
  std::sort(libs.begin(), libs.end());
  std::sort(others.begin(), others.end());
  libs.insert(libs.end(), others.begin(), others.end());
  return libs;
}

// Resolves the whole API from an open library; false (and `err`) if one is missing.
bool resolve(void* lib, HighsApi& a, std::string& err) {
  HighsInt (*sizeof_int)() = nullptr;
  bool ok = sym(lib, "Highs_create", a.create, err) && sym(lib, "Highs_destroy", a.destroy, err) &&
            sym(lib, "Highs_passMip", a.passMip, err) &&
            sym(lib, "Highs_setBoolOptionValue", a.setBoolOptionValue, err) &&
            sym(lib, "Highs_setIntOptionValue", a.setIntOptionValue, err) &&
            sym(lib, "Highs_setDoubleOptionValue", a.setDoubleOptionValue, err) &&
            sym(lib, "Highs_setStringOptionValue", a.setStringOptionValue, err) &&
            sym(lib, "Highs_setSolution", a.setSolution, err) && sym(lib, "Highs_run", a.run, err) &&
            sym(lib, "Highs_getModelStatus", a.getModelStatus, err) &&
            sym(lib, "Highs_getSolution", a.getSolution, err) &&
            sym(lib, "Highs_getDoubleInfoValue", a.getDoubleInfoValue, err) &&
            sym(lib, "Highs_getIntInfoValue", a.getIntInfoValue, err) &&
            sym(lib, "Highs_getObjectiveValue", a.getObjectiveValue, err) &&
            sym(lib, "Highs_setCallback", a.setCallback, err) &&
            sym(lib, "Highs_startCallback", a.startCallback, err) &&
            sym(lib, "Highs_getCallbackDataOutItem", a.getCallbackDataOutItem, err) &&
            sym(lib, "Highs_getSizeofHighsInt", sizeof_int, err);
  if (ok && sizeof_int() != static_cast<HighsInt>(sizeof(HighsInt))) {
    err = "built with " + std::to_string(sizeof_int()) + "-byte HighsInt; expected 4";
    return false;
  }
  return ok;
}

void load_locked() {
  g_tried = true;
  std::string path = g_path;
  const char* env = std::getenv("TLM_HIGHS_LIBRARY");
  if (env && *env) path = env;  // an explicit choice wins over the package's default
  if (path.empty()) return;
  std::string list_err;
  std::vector<std::string> files = candidates(path, list_err);
  std::string tried;
  for (const std::string& file : files) {
    void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      tried += (tried.empty() ? "" : "; ") + file + ": cannot load (" + (e ? e : "unknown error") + ")";
      continue;
    }
    if (!dlsym(lib, "Highs_create")) {  // not a HiGHS C library (e.g. a C++-only build)
      tried += (tried.empty() ? "" : "; ") + file + ": exports no HiGHS C API";
      dlclose(lib);
      continue;
    }
    std::string err;
    HighsApi a{};
    if (!resolve(lib, a, err)) {
      tried += (tried.empty() ? "" : "; ") + file + ": unusable (" + err + ")";
      continue;  // the handle stays open: dlclose of a half-used library is not worth the risk
    }
    const char* (*version)() = nullptr;
    std::string ignored;
    g_version = sym(lib, "Highs_version", version, ignored) && version() ? version() : "unknown";
    g_api = a;
    g_loaded = &g_api;
    g_loaded_path = file;
    return;
  }
  if (files.empty())
    g_error = "no shared library in " + path + (list_err.empty() ? "" : " (" + list_err + ")");
  else
    g_error = "no library exporting the HiGHS C API (Highs_create) in " + path + " [" + tried + "]";
  g_error += "; install highspy>=1.7,<1.16 or point TLM_HIGHS_LIBRARY at a libhighs shared library";
}

}  // namespace

void set_highs_library(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_loaded || path == g_path) return;  // first successful load wins
  g_path = path;
  g_tried = false;
}

const HighsApi* highs_api(std::string* why) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_loaded && !g_tried) load_locked();
  if (!g_loaded && why) *why = g_error;
  return g_loaded;
}

HighsStatus highs_status() {
  HighsStatus s;
  s.loaded = highs_api(&s.why) != nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  s.path = g_loaded_path;
  s.version = g_version;
  return s;
}

}  // namespace tlm::solver
