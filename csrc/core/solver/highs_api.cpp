#include "highs_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace tlm::solver {
namespace {

std::mutex g_mutex;
std::string g_path;
bool g_tried = false;
HighsApi g_api;
const HighsApi* g_loaded = nullptr;
std::string g_error = "HiGHS library location not set (torch_localmap sets it from highspy; or set TLM_HIGHS_LIBRARY)";

template <typename F>
bool sym(void* lib, const char* name, F& out, std::string& err) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out) err = std::string("symbol ") + name + " missing in the HiGHS library";
  return out != nullptr;
}

std::string candidate(const std::string& path) {
  if (path.size() > 3 && (path.find(".so") != std::string::npos)) return path;
  return path + "/libhighs.so.1";
}

void load_locked() {
  g_tried = true;
  std::string path = g_path;
  if (path.empty()) {
    const char* env = std::getenv("TLM_HIGHS_LIBRARY");
    if (env && *env) path = env;
  }
  if (path.empty()) return;
  std::string file = candidate(path);
  void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    g_error = "cannot load HiGHS from " + file + ": " + (e ? e : "unknown error");
    return;
  }
  std::string err;
  HighsApi a{};
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
    ok = false;
    err = "HiGHS was built with " + std::to_string(sizeof_int()) + "-byte HighsInt; expected 4";
  }
  if (!ok) {
    g_error = "unusable HiGHS library " + file + ": " + err;
    return;  // the handle stays open: harmless, and dlclose of a half-used library is not
  }
  g_api = a;
  g_loaded = &g_api;
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

}  // namespace tlm::solver
