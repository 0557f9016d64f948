#include "scheduler/engine.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/log.h"
#include "kernels/ops.h"
#include "model/weights_quant.h"
#include "sampling/dead_end.h"
#include "scheduler/metrics.h"
#include "speculative/pick.h"

namespace tandem::scheduler {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
double ms_between(Clock::time_point a, Clock::time_point b) { return seconds_between(a, b) * 1000.0; }

// A failed forward or round is the server's fault, whatever code the layer below used: the only
// error a request itself causes mid-generation is a position with no allowed token (InvalidArgument).
Status step_failure(const Status& status) { return internal_error(status.message()); }

}  // namespace

int64_t engine_forward_rows(const EngineConfig& c, bool on_gpu) {
  if (!on_gpu) return 256;
  // A whole tick in one chunk: a 2,048-token prompt is one forward, not eight launches of
  // 256-row GEMMs at the medium tile (ADR 0051: TTFT 276 -> 184 ms on the 8B shape).
  const int64_t rows = c.forward_rows > 0 ? c.forward_rows : c.prefill_budget + c.max_running;
  return std::clamp<int64_t>(rows, 256, 4096);
}

Expected<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config,
                                                 std::unique_ptr<model::Model> target,
                                                 std::unique_ptr<speculative::Drafter> drafter,
                                                 std::unique_ptr<ThreadPool> pool) {
  std::unique_ptr<Engine> e(new Engine());
  e->config_ = config;
  auto& c = e->config_;
  const auto& mc = target->config();
  if (c.context <= 0)
    c.context = std::min<int64_t>(mc.max_position_embeddings > 0 ? mc.max_position_embeddings : 4096, 4096);
  if (c.max_running < 1) return invalid_argument("engine: max_running must be at least 1");
  if (c.block_size < kMinDraftBlockSize || c.block_size > kMaxDraftBlockSize)
    return invalid_argument("engine: speculative block size must be between " +
                            std::to_string(kMinDraftBlockSize) + " and " +
                            std::to_string(kMaxDraftBlockSize) + ", got " + std::to_string(c.block_size));
  if (c.kv_tokens <= 0) c.kv_tokens = c.context * c.max_running;
  e->target_ = std::move(target);
  e->drafter_ = std::move(drafter);
  e->pool_ = pool ? std::move(pool) : std::make_unique<ThreadPool>(c.threads);
  auto kv_options = model::KvCache::options_for_tokens(c.kv_tokens, c.kv_tokens_per_block);
  // On a GPU the K/V live on the device (CudaForward); the host keeps the block tables only.
  kv_options.host_storage = e->target_->placement().kind == model::DeviceKind::cpu;
  TANDEM_ASSIGN_OR_RETURN(e->kv_, model::KvCache::create(mc, kv_options));
  const int64_t forward_rows = engine_forward_rows(c, !kv_options.host_storage);
  e->forward_ = std::make_unique<model::Forward>(*e->target_, e->kv_, e->pool_.get(), forward_rows);
  e->gate_ = std::make_unique<speculative::ExactnessGate>(
      speculative::ExactnessGate::for_model(*e->target_, e->pool_.get(), c.allow_inexact, c.gemm));
  if (e->drafter_) e->gate_->decide(c.block_size);  // warm: the verdict belongs in the boot log
  // The gate's K is fixed for the engine, so its mode is settled from here on.
  e->forward_->set_gemm_mode(e->gate_->gemm_mode());
  if (Status s = e->forward_->warm_up(); !s.ok()) return s;
  if (e->drafter_) e->drafter_->set_gemm_mode(e->gate_->gemm_mode());
  PlannerConfig pc;
  pc.max_running = c.max_running;
  pc.prefill_budget = c.prefill_budget;
  pc.tokens_per_block = c.kv_tokens_per_block;
  pc.total_blocks = e->kv_.num_blocks();
  e->planner_ = std::make_unique<BatchPlanner>(pc);
  Engine* self = e.get();
  e->planner_->set_admit_hook([self](uint64_t id) { return self->admit(id); });
  if (c.prefix_cache && !(e->drafter_ && e->drafter_->kind() == speculative::DraftKind::mtp)) {
    e->prefix_ = std::make_unique<PrefixCache>(e->kv_);
    e->kv_.set_reclaim([p = e->prefix_.get()] { return p->evict_one(); });
  }
  e->metrics_.kv_blocks_total = e->kv_.num_blocks();
  e->device_ = model::describe_device(e->target_->placement());
  e->hardware_ = hardware_label(e->device_, e->pool_->size());
  e->samplers_.resize(static_cast<size_t>(e->pool_->size()));
  e->set_policy_env(c.policy_env);
  const char* timing = std::getenv("TANDEM_STEP_TIMING");
  e->tick_timing_.on = timing != nullptr && std::string(timing) == "1";
  return e;
}

void Engine::record_tick(Clock::time_point start, Clock::time_point forward, Clock::time_point sampled,
                         int64_t rows) {
  TickTiming& t = tick_timing_;
  const auto end = Clock::now();
  TickTiming::Sums& s = t.by_rows[rows];
  if (t.last_end != Clock::time_point{}) s.between_ms += ms_between(t.last_end, start);
  s.forward_ms += ms_between(start, forward);
  s.sample_ms += ms_between(forward, sampled);
  s.deliver_ms += ms_between(sampled, end);
  s.ticks++;
  t.last_end = end;
  if (++t.ticks >= 128) report_ticks();
}

void Engine::report_ticks() {
  for (const auto& [rows, s] : tick_timing_.by_rows) {
    const double n = static_cast<double>(s.ticks);
    spdlog::info(
        "engine timing: {} batched ticks of {} rows: forward {:.3f} ms, sampling {:.3f} ms, delivery {:.3f} "
        "ms, "
        "between ticks {:.3f} ms (planner, speculative rounds, idle waits)",
        s.ticks, rows, s.forward_ms / n, s.sample_ms / n, s.deliver_ms / n, s.between_ms / n);
  }
  tick_timing_.by_rows.clear();
  tick_timing_.ticks = 0;
}

namespace {

std::string canonical(const std::string& dir) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(dir, ec);
  return ec ? dir : p.string();
}

// The policy's name for the target: its directory, plus the load-time
// quantization (--weights) when there is one — a q8_0 load of a directory
// times differently from its bf16 load, so their persisted verdicts must not mix.
std::string policy_target(const model::Model& m) {
  const std::string dir = canonical(m.dir());
  return m.config().weights == model::WeightsQuant::stored
             ? dir
             : dir + "#weights=" + model::weights_quant_name(m.config().weights);
}

}  // namespace

void Engine::set_policy_env(const PolicyEnv& env) {
  policy_.reset();
  if (drafter_) {
    PolicyKey key{policy_target(*target_), canonical(config_.drafter_dir), hardware_, config_.block_size};
    policy_ = AdaptivePolicy::create(key, env);
  }
  publish_policy();
}

void Engine::publish_policy() {
  PolicyReport r;
  r.reason.reset();
  if (!drafter_) {
    r.state = "unavailable";
    r.reason = "no_mtp_dispatch";
    r.mtp_enabled = false;
    board_.publish(r);
    return;
  }
  r.draft_kind = speculative::draft_kind_name(drafter_->kind());
  const speculative::GateDecision& gate = gate_->decide(config_.block_size);
  auto set_key = [&] {
    r.target = policy_target(*target_);
    r.drafter = canonical(config_.drafter_dir);
    r.hardware = hardware_;
    r.block_size = config_.block_size;
  };
  if (!gate.allowed) {  // the veto wins over everything, a forced pin included
    r.state = "exactness_declined";
    r.decline_detail = gate.decline_reason;
    r.mtp_enabled = false;
    set_key();
  } else if (policy_) {
    describe_policy(policy_->snapshot(), r);
    set_key();
  } else {
    r.state = "unavailable";
    r.reason = "adaptive_disabled";
    r.mtp_enabled = static_default_for(hardware_);
  }
  board_.publish(r);
}

Engine::~Engine() {
  shutdown(std::chrono::milliseconds(0));
  if (tick_timing_.on) report_ticks();
}

void Engine::start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

Status Engine::submit(std::shared_ptr<EngineRequest> r) {
  const int64_t prompt = static_cast<int64_t>(r->prompt.size());
  if (prompt == 0) return invalid_argument("the prompt is empty");
  if (r->max_tokens <= 0) return invalid_argument("max_tokens must be at least 1");
  if (prompt + r->max_tokens > config_.context)
    return invalid_argument("this model's context is " + std::to_string(config_.context) +
                            " tokens; the prompt has " + std::to_string(prompt) +
                            " tokens and max_tokens asks for " + std::to_string(r->max_tokens) + " more");
  if (!planner_->fits_ever(prompt, r->max_tokens))
    return resource_exhausted("the request needs more KV cache than the server has in total");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return failed_precondition("the server is shutting down");
    incoming_.push_back(std::move(r));
  }
  metrics_.requests_total++;
  metrics_.queued++;
  cv_.notify_one();
  return Status::Ok();
}

void Engine::shutdown(std::chrono::milliseconds drain) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      stopping_ = true;
      drain_deadline_ = Clock::now() + drain;
    } else {
      drain_deadline_ = std::min(drain_deadline_, Clock::now() + drain);
    }
  }
  cv_.notify_one();
  if (thread_.joinable() && std::this_thread::get_id() != thread_.get_id()) thread_.join();
}

bool Engine::take_incoming(bool block) {
  std::vector<std::shared_ptr<EngineRequest>> batch;
  bool stopping;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (block && incoming_.empty() && !stopping_) cv_.wait_for(lock, std::chrono::milliseconds(20));
    batch.swap(incoming_);
    stopping = stopping_;
  }
  for (auto& r : batch) {
    Active a;
    a.seq.prompt = r->prompt;
    a.seq.params = r->params;
    a.seq.keep_hidden = drafter_ && drafter_->kind() == speculative::DraftKind::mtp;
    a.stats.prompt_tokens = static_cast<int64_t>(r->prompt.size());
    planner_->enqueue(r->id, static_cast<int64_t>(r->prompt.size()), r->max_tokens);
    a.req = std::move(r);
    active_.emplace(a.req->id, std::move(a));
  }
  return stopping;
}

void Engine::loop() {
  bool stopping = false;
  for (;;) {
    // A decode step queued ahead (chain_ahead) is taken only if this tick asks for exactly it. A
    // request taken in now would be admitted and that step dropped: one GPU step computed for
    // nothing, and waited for. So new requests wait for that step instead (it is running already),
    // and the next tick, which chain_ahead does not queue ahead while they wait, takes them in.
    if (!forward_->device_chain_pending()) stopping = take_incoming(false);
    for (auto& [id, a] : active_)
      if (a.req->channel->cancelled()) planner_->cancel(id);
    if (stopping && Clock::now() >= drain_deadline_)
      for (auto& [id, a] : active_) planner_->cancel(id);
    const TickPlan plan = planner_->plan(speculation_available());
    mark_waiting(plan);
    if (plan.idle() && plan.admitted.empty()) {
      publish_gauges();
      if (stopping && active_.empty()) return;
      take_incoming(true);
      continue;
    }
    run_tick(plan);
    publish_gauges();
  }
}

bool Engine::speculation_available() {
  if (!drafter_ || !gate_->allowed(config_.block_size)) return false;
  return policy_ ? policy_->should_run() : static_default_for(hardware_);
}

void Engine::publish_gauges() {
  metrics_.running = planner_->running();
  metrics_.queued = planner_->queued();
  // Blocks only the prefix cache holds are reclaimable: they count as free.
  const int32_t idle_cached = prefix_ ? prefix_->idle_blocks() : 0;
  metrics_.kv_blocks_used = kv_.num_blocks() - kv_.free_blocks() - idle_cached;
  metrics_.prefix_cache_blocks = prefix_ ? prefix_->entries() : 0;
}

void Engine::mark_waiting(const TickPlan& plan) {
  for (uint64_t id : plan.admitted) active_.at(id).admitted_yet = true;
  for (auto& [id, a] : active_)
    if (!a.admitted_yet) a.waited = true;
}

void Engine::run_tick(const TickPlan& plan) {
  for (uint64_t id : plan.dropped) finish(id, FinishReason::cancelled);
  for (uint64_t id : plan.admitted) {
    Active& a = active_.at(id);
    a.admitted = Clock::now();
    a.stats.queue_ms = ms_between(a.req->submitted, a.admitted);
    metrics_.request_queue_time_seconds.observe(a.waited ? seconds_between(a.req->submitted, a.admitted)
                                                         : 0.0);
    metrics_.prompt_tokens_total += a.seq.prompt.size();
  }
  if (!plan.decode.empty() || !plan.prefill.empty()) run_batched(plan, chain_ahead(plan));
  if (plan.speculative) run_speculative(*plan.speculative);
}

bool Engine::chain_ahead(const TickPlan& plan) {
  // A step queued ahead that the next tick does not ask for costs the GPU one step: chain only
  // where the next tick is the same sequences' next decode step as far as the engine can tell.
  if (!plan.prefill.empty() || plan.speculative || !plan.dropped.empty() || planner_->queued() > 0)
    return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!incoming_.empty() || stopping_) return false;  // not yet taken in (loop)
  }
  if (drafter_ && speculation_available()) return false;
  for (uint64_t id : plan.decode) {
    const Active& a = active_.at(id);
    if (static_cast<int64_t>(a.seq.generated.size()) + 1 >= a.req->max_tokens) return false;
  }
  return true;
}

int64_t Engine::admit(uint64_t id) {
  Active& a = active_.at(id);
  a.seq.seq = kv_.create_sequence();
  if (!prefix_) return 0;
  // At least the prompt's last token is prefilled: its logits give the first token.
  const int64_t prompt = static_cast<int64_t>(a.seq.prompt.size());
  const std::vector<int32_t> hit =
      prefix_->lookup(a.seq.prompt, static_cast<int32_t>((prompt - 1) / kv_.tokens_per_block()));
  kv_.adopt(a.seq.seq, hit);
  a.stats.cached_tokens = static_cast<int64_t>(hit.size()) * kv_.tokens_per_block();
  metrics_.prefix_cache_queries += static_cast<uint64_t>(prompt);
  metrics_.prefix_cache_hits += static_cast<uint64_t>(a.stats.cached_tokens);
  return a.stats.cached_tokens;
}

void Engine::sample_into(sampling::Sampler& sampler, Active& a, const model::ForwardOutput& out, int64_t row,
                         int64_t position) {
  int32_t token = sampling::kNoToken;
  const std::span<const float> logits(out.logits_row(row), static_cast<size_t>(out.vocab));
  if (a.req->want_logprobs) {
    sampling::SampleResult r = sampler.sample(logits, a.seq.params, a.seq.history(), position, true);
    if (r.token != sampling::kNoToken) a.details.push_back({r.token, r.logprob, std::move(r.top)});
    token = r.token;
  } else {  // the forward's greedy pick where it made one (ADR 0070), else the sampler's
    token = speculative::pick_row(sampler, out, row, a.seq.params, a.seq.history(), position);
  }
  if (token == sampling::kNoToken) {  // the row is on the host then (ForwardOutput::picks)
    a.dead_end = sampling::no_allowed_token(logits, a.seq.params, a.seq.history());
    return;
  }
  a.seq.generated.push_back(token);
}

void Engine::deliver_or_end(uint64_t id) {
  Active& a = active_.at(id);
  if (a.dead_end.ok()) return deliver(a);
  // Classic decoding reaches a dead end only after delivering every token before it; a round
  // may bring some (accepted drafts) with it. Those go out first, as a classic step would have
  // sent them — a stop token or max_tokens among them ends the request normally.
  Status why = std::move(a.dead_end);
  deliver(a);
  if (active_.count(id) == 0) return;
  spdlog::info("request {} ends: {}", id, why.message());
  // The request's own constraints (grammar, logit_bias: the client's 400) are no engine failure;
  // a model row with no finite logit (an internal error) is.
  const bool failure = why.code() != StatusCode::kInvalidArgument;
  if (!failure) metrics_.requests_no_allowed_token++;
  finish(id, FinishReason::error, std::move(why), failure);
}

double Engine::run_batched(const TickPlan& plan, bool chain) {
  const auto t0 = Clock::now();
  std::vector<model::SequenceStep> steps;
  std::vector<uint64_t> owners;
  for (uint64_t id : plan.decode) {
    Active& a = active_.at(id);
    steps.push_back({a.seq.seq, std::span<const int32_t>(&a.seq.generated.back(), 1),
                     a.seq.pending_position(), model::LogitRows::last});
    owners.push_back(id);
  }
  for (const auto& c : plan.prefill) {
    Active& a = active_.at(c.id);
    steps.push_back({a.seq.seq, std::span<const int32_t>(a.seq.prompt.data() + c.start, c.length), c.start,
                     c.last ? model::LogitRows::last : model::LogitRows::none});
    owners.push_back(c.id);
  }
  model::ForwardOptions options;
  if (drafter_ && drafter_->kind() == speculative::DraftKind::mtp) {
    options.hidden = model::HiddenOutput::after_final_norm;  // one row per input row, for the MTP head
    options.hidden_all_rows = true;
  }
  // The position whose token step i's output row gives (decode: the next one; a
  // prompt's last chunk: the first generated), or -1 when the step has no output row.
  auto pick_position = [&](size_t i) -> int64_t {
    const Active& a = active_.at(owners[i]);
    if (i < plan.decode.size()) return a.seq.pending_position() + 1;
    return plan.prefill[i - plan.decode.size()].last ? static_cast<int64_t>(a.seq.prompt.size()) : -1;
  };
  // Rows of plain greedy or plain sampled requests without logprobs come back
  // as picks (on a GPU, picked on the device: one int per row); the others as
  // rows (ADR 0070, 0072).
  std::vector<kernels::PickRule> rules;
  bool any_pick = false, all_greedy = true;
  for (size_t i = 0; i < steps.size(); ++i) {
    const int64_t position = pick_position(i);
    if (position < 0) continue;
    const Active& a = active_.at(owners[i]);
    const auto rule = speculative::forward_pick_rule(a.seq.params, a.req->want_logprobs, position);
    rules.push_back(rule.value_or(kernels::PickRule{0.0f, 1, 0, position}));
    any_pick = any_pick || rule.has_value();
    all_greedy = all_greedy && rule && !(rule->temperature > 0.0f);
  }
  options.picks_only = any_pick;
  if (any_pick && !all_greedy) options.pick_rules = rules;
  options.chain = chain && plan.prefill.empty();
  auto out = forward_->run(steps, options);
  const auto forwarded = Clock::now();
  size_t forward_rows = 0;
  for (const auto& s : steps) forward_rows += s.tokens.size();
  if (!out.ok()) {
    spdlog::error("forward failed: {}", out.status().to_string());
    for (uint64_t id : owners) finish(id, FinishReason::error, step_failure(out.status()));
    return ms_between(t0, Clock::now());
  }
  // Bookkeeping in step order, then the rows that produce a token are sampled
  // in parallel (one Sampler per pool thread; each row's pick depends only
  // on its own row and request), then delivered in step order.
  int64_t input_row = 0;
  std::vector<size_t> picks;
  for (size_t i = 0; i < steps.size(); ++i) {
    Active& a = active_.at(owners[i]);
    const int64_t rows = static_cast<int64_t>(steps[i].tokens.size());
    if (options.hidden_all_rows) a.seq.append_hidden(*out, input_row, rows);
    input_row += rows;
    if (i >= plan.decode.size()) {
      const auto& c = plan.prefill[i - plan.decode.size()];
      planner_->on_prefilled(c.id, c.length);
      if (!c.last) continue;
      if (prefix_) {  // the prompt's full blocks are complete: share them from now on
        const auto full =
            static_cast<int32_t>(a.seq.prompt.size() / static_cast<size_t>(kv_.tokens_per_block()));
        prefix_->insert(a.seq.prompt, kv_.block_table(a.seq.seq), full);
        kv_.freeze(a.seq.seq, full);
      }
    }
    picks.push_back(i);
  }
  pool_->parallel_for(static_cast<int64_t>(picks.size()), 1, [&](int64_t begin, int64_t end, int thread) {
    for (int64_t j = begin; j < end; ++j) {
      const size_t i = picks[j];
      sample_into(samplers_[thread], active_.at(owners[i]), *out, out->first_row[i], pick_position(i));
    }
  });
  const auto sampled = Clock::now();
  const double compute_ms = ms_between(t0, sampled);
  for (size_t i : picks) deliver_or_end(owners[i]);
  if (tick_timing_.on) record_tick(t0, forwarded, sampled, static_cast<int64_t>(forward_rows));
  return compute_ms;
}

void Engine::run_speculative(uint64_t id) {
  Active& a = active_.at(id);
  if (policy_ && policy_->wants_plain_step(id)) {
    // Profiling: time a plain single-token step on this very request (its output is real):
    // the forward and the pick, as a round's draft + verify + walk — delivery is in neither.
    TickPlan single;
    single.decode.push_back(id);
    policy_->record_plain_step(id, run_batched(single));
    return;
  }
  // A round touches only positions classic decoding feeds too (< prompt + max_tokens - 1):
  // within the request's KV reservation and, with the drafter's cache sized to the
  // context, within the drafter's. Where that leaves no room for a draft, a classic step.
  const int64_t limit =
      std::min(static_cast<int64_t>(a.seq.prompt.size()) + a.req->max_tokens - 1, drafter_->position_limit());
  if (speculative::fitting_block_size(config_.block_size, a.seq.pending_position(), limit) < 2) {
    TickPlan single;
    single.decode.push_back(id);
    run_batched(single);
    return;
  }
  if (drafter_following_ != id) {
    drafter_->reset();
    drafter_following_ = id;
  }
  std::vector<sampling::SampleResult> logprobs;
  auto stats = speculative::speculative_round(*forward_, *drafter_, samplers_[0], a.seq, config_.block_size,
                                              a.req->want_logprobs ? &logprobs : nullptr, limit);
  if (!stats.ok()) {
    spdlog::error("speculative round failed: {}", stats.status().to_string());
    drafter_->reset();
    drafter_following_ = 0;
    finish(id, FinishReason::error, step_failure(stats.status()));
    return;
  }
  for (auto& r : logprobs) a.details.push_back({r.token, r.logprob, std::move(r.top)});
  // Shrunk rounds count too (docs/spec-speculative.md §4: any real round): skipping them would
  // keep requests shorter than two full rounds from ever becoming a profiling sample.
  if (policy_)
    policy_->record_round(id, stats->draft_ms + stats->verify_ms + stats->overhead_ms, stats->drafted,
                          stats->accepted);
  a.stats.spec_rounds++;
  a.stats.draft_tokens += stats->drafted;
  a.stats.accepted_tokens += stats->accepted;
  metrics_.spec_drafts++;
  metrics_.spec_draft_tokens += stats->drafted;
  metrics_.spec_accepted_tokens += stats->accepted;
  for (int32_t p = 0; p < stats->accepted && p < kMaxSpecPositions; ++p) metrics_.spec_accepted_per_pos[p]++;
  a.dead_end = std::move(stats->dead_end);
  deliver_or_end(id);
}

void Engine::deliver(Active& a) {
  RequestUpdate update;
  FinishReason reason = FinishReason::none;
  const auto now = Clock::now();
  while (a.sent < a.seq.generated.size()) {
    const int32_t token = a.seq.generated[a.sent];
    if (std::find(a.req->stop_tokens.begin(), a.req->stop_tokens.end(), token) != a.req->stop_tokens.end()) {
      reason = FinishReason::stop;
      break;
    }
    GeneratedToken g = a.sent < a.details.size() ? a.details[a.sent] : GeneratedToken{token, 0.0f, {}};
    update.tokens.push_back(std::move(g));
    ++a.sent;
    if (static_cast<int64_t>(a.sent) >= a.req->max_tokens) {
      reason = FinishReason::length;
      break;
    }
  }
  if (!update.tokens.empty()) {
    if (a.stats.generated_tokens == 0) {
      a.first_token = now;
      metrics_.ttft_seconds.observe(seconds_between(a.req->submitted, now));
    } else {
      const double gap = seconds_between(a.last_token, now) / static_cast<double>(update.tokens.size());
      for (size_t i = 0; i < update.tokens.size(); ++i) metrics_.inter_token_seconds.observe(gap);
    }
    a.last_token = now;
    a.stats.generated_tokens += static_cast<int64_t>(update.tokens.size());
    metrics_.generation_tokens_total += update.tokens.size();
    a.req->channel->push(std::move(update));
  }
  if (reason != FinishReason::none) finish(a.req->id, reason);
}

void Engine::finish(uint64_t id, FinishReason reason, Status error, bool failure) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  Active& a = it->second;
  const auto now = Clock::now();
  if (a.seq.seq >= 0) kv_.release(a.seq.seq);
  planner_->finish(id);
  if (drafter_ && drafter_following_ == id) {
    drafter_->reset();
    drafter_following_ = 0;
  }
  RequestUpdate last;
  last.finish = reason;
  last.error = std::move(error);
  a.stats.prompt_ms = a.stats.generated_tokens > 0 ? ms_between(a.admitted, a.first_token) : 0;
  a.stats.decode_ms = a.stats.generated_tokens > 0 ? ms_between(a.first_token, now) : 0;
  last.stats = a.stats;
  switch (reason) {
    case FinishReason::stop:
      metrics_.requests_finished_stop++;
      break;
    case FinishReason::length:
      metrics_.requests_finished_length++;
      break;
    case FinishReason::cancelled:
      metrics_.requests_cancelled++;
      break;
    default:
      if (failure) metrics_.requests_failed++;
      break;
  }
  if (reason != FinishReason::error)
    metrics_.e2e_request_latency_seconds.observe(seconds_between(a.req->submitted, now));
  // The policy first: a client that sees its request finish must see the sample it gave.
  // Settled policies keep measuring (ADR 0005).
  if (policy_ && policy_->state() != PolicyState::forced) {
    policy_->request_finished(id);
    publish_policy();
  }
  a.req->channel->push(std::move(last));
  active_.erase(it);
}

}  // namespace tandem::scheduler
