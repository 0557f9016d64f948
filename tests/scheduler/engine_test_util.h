// Shared by the scheduler's engine tests: the fixture model's path, loading it
// as target or as a copy drafter, and creating / starting an engine on it.
// Each load and create is checked with EXPECT_TRUE (a failure is reported in
// the calling test).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/model.h"
#include "model/weights_quant.h"
#include "scheduler/engine.h"
#include "speculative/drafter.h"

namespace tandem::scheduler::testing {

// The fixture model every engine test runs on.
inline constexpr const char* kModel = "qwen3_qknorm_bf16_tied";

// $TANDEM_SOURCE_DIR/tests/fixtures/models/<name> (TANDEM_SOURCE_DIR unset: ".").
std::string fixture_dir(const std::string& name);

// kModel as the target (`weights`: --weights, quantized at load).
std::unique_ptr<model::Model> load_target(model::WeightsQuant weights = model::WeightsQuant::stored);
// A copy of kModel as draft model (acceptance 1.0) whose cache holds `positions`.
std::unique_ptr<speculative::Drafter> load_copy_drafter(
    int64_t positions = 1024, model::WeightsQuant weights = model::WeightsQuant::stored);
// Engine::create on `target` and `drafter` (may be null); not started.
std::unique_ptr<Engine> create_engine(const EngineConfig& config, std::unique_ptr<model::Model> target,
                                      std::unique_ptr<speculative::Drafter> drafter);
// create_engine, then set_policy_env(env) and start().
std::unique_ptr<Engine> start_engine(const EngineConfig& config, std::unique_ptr<model::Model> target,
                                     std::unique_ptr<speculative::Drafter> drafter, const PolicyEnv& env);

}  // namespace tandem::scheduler::testing
