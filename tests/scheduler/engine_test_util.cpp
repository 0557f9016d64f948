#include "engine_test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "speculative/draft_model.h"

namespace tandem::scheduler::testing {

std::string fixture_dir(const std::string& name) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/fixtures/models/" + name;
}

std::unique_ptr<model::Model> load_target(model::WeightsQuant weights) {
  auto config = model::load_config(fixture_dir(kModel));
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  config->weights = weights;
  auto target = model::Model::load(fixture_dir(kModel), std::move(*config));
  EXPECT_TRUE(target.ok()) << target.status().to_string();
  return std::move(*target);
}

std::unique_ptr<speculative::Drafter> load_copy_drafter(int64_t positions, model::WeightsQuant weights) {
  auto config = model::load_config(fixture_dir(kModel));
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  config->weights = weights;
  auto d = speculative::DraftModelDrafter::load(fixture_dir(kModel), std::move(*config), nullptr, positions);
  EXPECT_TRUE(d.ok());
  return std::move(*d);
}

std::unique_ptr<Engine> create_engine(const EngineConfig& config, std::unique_ptr<model::Model> target,
                                      std::unique_ptr<speculative::Drafter> drafter) {
  auto e = Engine::create(config, std::move(target), std::move(drafter));
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return std::move(*e);
}

std::unique_ptr<Engine> start_engine(const EngineConfig& config, std::unique_ptr<model::Model> target,
                                     std::unique_ptr<speculative::Drafter> drafter, const PolicyEnv& env) {
  auto e = create_engine(config, std::move(target), std::move(drafter));
  e->set_policy_env(env);
  e->start();
  return e;
}

}  // namespace tandem::scheduler::testing
