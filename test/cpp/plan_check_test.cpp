// Saved plans (plan_fingerprint.h, plan_check.h): a plan document records what it was
// made for, a file's every spec is checked against its own mesh and shapes, and a plan
// applied to another graph, mesh or boundary names what differs.
#include <gtest/gtest.h>

#include <string>

#include "core/placement.h"
#include "core/plan_check.h"
#include "core/plan_fingerprint.h"
#include "core/plan_json.h"
#include "core/planner.h"
#include "planner_test_util.h"

using namespace tlm;
using tlm_test::training_graph;

namespace {

json::Value saved_plan(const Graph& g, const PlanOptions& o = PlanOptions{}) {
  json::Value doc = plan_to_json(plan_graph(g, o));
  add_plan_provenance(doc, g, o);
  return json::parse(doc.dump());  // as a file holds it
}

std::string refusal(const json::Value& doc) {
  try {
    check_plan_document(doc);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// The document with node `i`'s strategy field `field`[0] set to `spec`.
json::Value with_spec(const json::Value& doc, size_t i, const std::string& field, const std::string& spec) {
  json::Value out = json::parse(doc.dump());
  for (auto& kv : out.mutable_object()) {
    if (kv.first != "nodes") continue;
    for (auto& skv : kv.second.mutable_array()[i].mutable_object())
      if (skv.first == "strategy")
        for (auto& fkv : skv.second.mutable_object())
          if (fkv.first == field) fkv.second.mutable_array()[0] = json::Value(spec);
  }
  return out;
}

}  // namespace

TEST(PlanCheck, APlannedDocumentPassesAndMatchesItsGraph) {
  Graph g = read_graph(training_graph(512, "[2, 2]"));
  json::Value doc = saved_plan(g);
  EXPECT_EQ(refusal(doc), "");
  EXPECT_EQ(plan_mismatch(g, PlanOptions{}, doc), "");
  EXPECT_EQ(doc.at("fingerprint").at("hash").as_string().size(), 32u);
  EXPECT_EQ(doc.at("nodes").as_array()[2].at("tensors").at("inputs").dump(), "[[512,512],[512,512]]");
}

TEST(PlanCheck, EditedSpecsAreRefusedNamingNodeAndField) {
  Graph g = read_graph(training_graph(512, "[2, 2]"));
  json::Value doc = saved_plan(g);
  EXPECT_NE(refusal(with_spec(doc, 2, "outputs", "XYZ")).find("plan.nodes[2] ('y', aten.mm.default).strategy.outputs[0]: "
                                                               "cannot parse placement 'XYZ'"),
            std::string::npos);
  EXPECT_NE(refusal(with_spec(doc, 2, "inputs", "S(9)R")).find("strategy.inputs[0] 'S(9)R': Shard(9) is out of range for a "
                                                                "tensor with 2 dims"),
            std::string::npos);
  EXPECT_NE(refusal(with_spec(doc, 0, "outputs", "S(0)")).find("plan.nodes[0] ('w', placeholder).strategy.outputs[0] "
                                                               "'S(0)': got 1 placements but the mesh has 2 dims"),
            std::string::npos);
}

TEST(PlanCheck, AnEditedMeshOrAnOldVersionIsRefused) {
  Graph g = read_graph(training_graph(512, "[2, 2]"));
  json::Value doc = saved_plan(g);
  std::string text = doc.dump();
  const std::string mesh = R"("shape":[2,2])";
  ASSERT_NE(text.find(mesh), std::string::npos);
  std::string other = text;
  other.replace(other.find(mesh), mesh.size(), R"("shape":[2,4])");
  EXPECT_NE(refusal(json::parse(other)).find("plan.mesh.shape: [2, 4] is not the mesh this plan was made for"),
            std::string::npos);
  std::string old = text;
  old.replace(old.find(R"("format_version":2)"), 18, R"("format_version":1)");
  EXPECT_NE(refusal(json::parse(old)).find("Plan the model again"), std::string::npos);
}

TEST(PlanCheck, MismatchesNameWhatDiffers) {
  Graph g = read_graph(training_graph(512, "[2, 2]"));
  json::Value doc = saved_plan(g);
  EXPECT_EQ(plan_mismatch(read_graph(training_graph(512, "[4]")), PlanOptions{}, doc),
            "mesh shape: the plan was made for a mesh of shape [2, 2], this mesh has shape [4]");
  EXPECT_EQ(plan_mismatch(read_graph(training_graph(256, "[2, 2]")), PlanOptions{}, doc),
            "input 0 ('x'): the plan was made for [512, 512] float32, this call has [256, 256] float32");
  PlanOptions compile;
  compile.mode = "compile";
  EXPECT_EQ(plan_mismatch(g, compile, doc).rfind("boundary options: the plan was made with mode=train", 0), 0u);
  PlanOptions fixed;
  const std::string w = json::parse(doc.dump()).at("nodes").as_array()[0].at("strategy").at("outputs").as_array()[0].as_string();
  fixed.fixed_params["w"] = parse_spec(w == "RR" ? "S(0)R" : "RR");
  EXPECT_EQ(plan_mismatch(g, fixed, doc).rfind("fixed_params['w']: the plan places it in " + w, 0), 0u);
  fixed.fixed_params["w"] = parse_spec(w);
  EXPECT_EQ(plan_mismatch(g, fixed, doc), "");  // a constraint the plan satisfies
}

TEST(PlanCheck, FingerprintIgnoresNamesAndDevicesButNotArguments) {
  std::string text = training_graph(512, "[2, 2]");
  Graph g = read_graph(text);
  std::string named = text;
  named.replace(named.find(R"("shape": [2, 2])"), 15, R"("shape": [2, 2], "dim_names": ["dp", "tp"])");
  named.replace(named.find(R"("name": "y")"), 11, R"("name": "mm_7")");
  EXPECT_EQ(graph_hash(read_graph(named)), graph_hash(g));
  EXPECT_EQ(graph_hash(read_graph(text)), graph_hash(g));  // deterministic
  std::string summed = text;
  summed.replace(summed.find(R"("args": [{"t": [2, 0]}])"), 23, R"("args": [{"t": [2, 0]}, [0]])");
  EXPECT_NE(graph_hash(read_graph(summed)), graph_hash(g));
}
