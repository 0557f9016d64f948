#include "llama_flags.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>

#include "core/env.h"
#include "core/log.h"

namespace tandem::app {
namespace {

constexpr int kNone = 0, kOne = 1, kOptional = -1, kTwo = 2;

// One llama-server flag tandem serve does not act on.
struct Row {
  const char* names;      // CLI11 long names, comma-separated; the first is what messages show
  const char* spellings;  // llama-server's one-dash spellings, space-separated
  const char* env;        // llama-server's variable, or nullptr
  int arity;              // kNone, kOne, kOptional (a bare flag means "on"), kTwo
  // "*": every use is a no-op; "": every use is refused; "a|b": those values
  // are no-ops, any other is refused.
  const char* accepts;
  const char* reason;
};

// Reasons shared by several rows.
const char* const kCpuOnly =
    "tandem serve runs the whole model on one device (--device cpu|cuda:N, or -ngl 0|all); splitting it "
    "across devices or between host and GPU is not supported";
const char* const kHostMemory =
    "every weight and the KV cache live on the serving device (--device): nothing is offloaded between host "
    "and GPU";
const char* const kDrafterDevice = "the drafter runs on the target's device (--device, -ngl)";
const char* const kNoDownloads =
    "tandem downloads nothing from the network: fetch the repository first (e.g. `huggingface-cli download "
    "org/name`) and pass its directory with -m (a Hub cache snapshot directory is served as org/name)";
const char* const kAffinity = "CPU affinity and priorities are not supported (use taskset, nice or chrt)";
const char* const kPolling = "the kernel threads spin briefly, then sleep; the level is fixed";
const char* const kKvType = "the KV cache is stored in f32; quantized and 16-bit KV caches are not supported";
const char* const kRope = "RoPE is configured by the model's config.json (rope_theta, rope_scaling)";
const char* const kMmap =
    "the checkpoint is always memory-mapped: its matrices are copied into the kernels' layout at load, and "
    "only the embedding table is read from the map afterwards";
const char* const kMoe = "Mixture-of-Experts models are not supported";
const char* const kAdapters = "LoRA adapters and control vectors are not supported";
const char* const kLogFormat = "tandem's log lines have a fixed format (time, level, message) on stderr";
const char* const kSamplerOrder =
    "the sampler chain is fixed: logit_bias, penalties, top-k, top-p, min-p, temperature, seeded Gumbel-max";
const char* const kUnusedSampler = "only used by a sampler tandem does not implement (so it is off)";
const char* const kNoSampler = "this sampler is not implemented";
const char* const kMultimodal = "multimodal models are not supported";
const char* const kRouter = "one tandem serve serves one model: router mode (--models-*) is not supported";
const char* const kTools = "built-in tools, agents and MCP servers are not supported";
const char* const kWebUiConfig = "web UI settings are not supported";
const char* const kReasoning =
    "reasoning is not parsed: thoughts stay in message.content (as llama-server's --reasoning-format none); "
    "a template's switch (e.g. enable_thinking) can be set with --chat-template-kwargs";
const char* const kNgram =
    "n-gram and lookup speculation are not supported; tandem drafts with -md (a draft model or MTP head)";
const char* const kDrafterThreads =
    "the drafter runs on the engine's kernel threads (-t) between target steps";
const char* const kContinuous = "batching is always continuous";
const char* const kNoShift =
    "tandem never shifts the context: a request ends with finish_reason \"length\" at the context's end";
const char* const kPreset = "presets download weights from the network, and tandem downloads nothing";

const Row kRows[] = {
    // Common parameters.
    {"--completion-bash", "", nullptr, kNone, "", "tandem has no shell-completion script"},
    {"--cache-list", "-cl", nullptr, kNone, "",
     "tandem downloads nothing, so it keeps no model cache to list"},
    {"--threads-batch", "-tb", "LLAMA_ARG_THREADS_BATCH", kOne, "*",
     "prompt processing and generation share one kernel thread pool (-t)"},
    {"--cpu-mask", "-C", nullptr, kOne, "", kAffinity},
    {"--cpu-range", "-Cr", nullptr, kOne, "", kAffinity},
    {"--cpu-strict", "", nullptr, kOne, "0", kAffinity},
    {"--prio", "", nullptr, kOne, "0", kAffinity},
    {"--poll", "", nullptr, kOne, "*", kPolling},
    {"--cpu-mask-batch", "-Cb", nullptr, kOne, "", kAffinity},
    {"--cpu-range-batch", "-Crb", nullptr, kOne, "", kAffinity},
    {"--cpu-strict-batch", "", nullptr, kOne, "0", kAffinity},
    {"--prio-batch", "", nullptr, kOne, "0", kAffinity},
    {"--poll-batch", "", nullptr, kOne, "*", kPolling},
    {"--ubatch-size", "-ub", "LLAMA_ARG_UBATCH", kOne, "*",
     "each engine step prefills up to -b prompt tokens in one forward; there is no separate physical batch"},
    {"--keep", "", nullptr, kOne, "0", kNoShift},
    {"--swa-full", "", "LLAMA_ARG_SWA_FULL", kNone, "",
     "sliding-window attention caches are not configurable"},
    {"--flash-attn", "-fa", "LLAMA_ARG_FLASH_ATTN", kOptional, "on|auto|1|true|enabled",
     "attention is always tandem's fused, chunked online-softmax (flash-style) kernel; it cannot be turned "
     "off"},
    {"--perf,--no-perf", "", "LLAMA_ARG_PERF", kNone, "*",
     "timings are always measured (response timings, /metrics)"},
    {"--escape,--no-escape", "-e", nullptr, kNone, "*", "a server takes no prompt on its command line"},
    {"--rope-scaling", "", "LLAMA_ARG_ROPE_SCALING_TYPE", kOne, "", kRope},
    {"--rope-scale", "", "LLAMA_ARG_ROPE_SCALE", kOne, "", kRope},
    {"--rope-freq-base", "", "LLAMA_ARG_ROPE_FREQ_BASE", kOne, "", kRope},
    {"--rope-freq-scale", "", "LLAMA_ARG_ROPE_FREQ_SCALE", kOne, "", kRope},
    {"--yarn-orig-ctx", "", "LLAMA_ARG_YARN_ORIG_CTX", kOne, "0", kRope},
    {"--yarn-ext-factor", "", "LLAMA_ARG_YARN_EXT_FACTOR", kOne, "-1", kRope},
    {"--yarn-attn-factor", "", "LLAMA_ARG_YARN_ATTN_FACTOR", kOne, "-1", kRope},
    {"--yarn-beta-slow", "", "LLAMA_ARG_YARN_BETA_SLOW", kOne, "-1", kRope},
    {"--yarn-beta-fast", "", "LLAMA_ARG_YARN_BETA_FAST", kOne, "-1", kRope},
    {"--kv-offload", "-kvo", "LLAMA_ARG_KV_OFFLOAD", kNone, "*", kHostMemory},
    {"--no-kv-offload", "-nkvo", "LLAMA_ARG_NO_KV_OFFLOAD", kNone, "*", kHostMemory},
    {"--repack", "", nullptr, kNone, "*", "weights are repacked at load wherever the kernels need it"},
    {"--no-repack", "-nr", nullptr, kNone, "", "weights are repacked at load wherever the kernels need it"},
    {"--no-host", "", "LLAMA_ARG_NO_HOST", kNone, "", kCpuOnly},
    {"--cache-type-k", "-ctk", "LLAMA_ARG_CACHE_TYPE_K", kOne, "f32", kKvType},
    {"--cache-type-v", "-ctv", "LLAMA_ARG_CACHE_TYPE_V", kOne, "f32", kKvType},
    {"--defrag-thold", "-dt", "LLAMA_ARG_DEFRAG_THOLD", kOne, "*",
     "the paged KV cache does not fragment (llama-server deprecated this too)"},
    {"--rpc", "", "LLAMA_ARG_RPC", kOne, "", "distributed (RPC) serving is not supported"},
    {"--mlock", "", "LLAMA_ARG_MLOCK", kNone, "", "locking the weights in RAM is not supported"},
    {"--mmap", "", nullptr, kNone, "*", kMmap},
    {"--no-mmap", "", "LLAMA_ARG_NO_MMAP", kNone, "", kMmap},
    {"--load-mode", "-lm", "LLAMA_ARG_LOAD_MODE", kOne, "auto|mmap", kMmap},
    {"--lazy-mode", "-lzm", "LLAMA_ARG_LAZY_MODE", kOne, "auto|on", kMmap},
    {"--direct-io", "-dio", "LLAMA_ARG_DIO", kNone, "", kMmap},
    {"--numa", "", "LLAMA_ARG_NUMA", kOne, "", "NUMA placement is not supported"},
    {"--list-devices", "", nullptr, kNone, "", "`tandem info` lists the CUDA devices this build sees"},
    {"--override-tensor", "-ot", "LLAMA_ARG_OVERRIDE_TENSOR", kOne, "", kCpuOnly},
    {"--cpu-moe", "-cmoe", "LLAMA_ARG_CPU_MOE", kNone, "*", kHostMemory},
    {"--n-cpu-moe", "-ncmoe", "LLAMA_ARG_N_CPU_MOE", kOne, "*", kHostMemory},
    {"--moe-cache-mib", "", "LLAMA_ARG_MOE_CACHE_MIB", kOne, "0", kMoe},
    {"--n-cpu-ffn", "-ncffn", "LLAMA_ARG_N_CPU_FFN", kOne, "*", kHostMemory},
    {"--split-mode", "-sm", "LLAMA_ARG_SPLIT_MODE", kOne, "none", kCpuOnly},
    {"--tensor-split", "-ts", "LLAMA_ARG_TENSOR_SPLIT", kOne, "", kCpuOnly},
    {"--main-gpu", "-mg", "LLAMA_ARG_MAIN_GPU", kOne, "0", kCpuOnly},
    {"--fit", "-fit", "LLAMA_ARG_FIT", kOptional, "*",
     "the whole model goes on one device, so there is nothing to fit"},
    {"--fit-target", "-fitt", "LLAMA_ARG_FIT_TARGET", kOne, "*",
     "the whole model goes on one device, so there is nothing to fit"},
    {"--fit-ctx", "-fitc", "LLAMA_ARG_FIT_CTX", kOne, "*",
     "the whole model goes on one device, so there is nothing to fit"},
    {"--check-tensors", "", nullptr, kNone, "", "checking tensor data for invalid values is not supported"},
    {"--override-kv", "", nullptr, kOne, "",
     "GGUF metadata overrides do not apply; edit the model's config.json"},
    {"--op-offload,--no-op-offload", "", nullptr, kNone, "*", kHostMemory},
    {"--lora", "", nullptr, kOne, "", kAdapters},
    {"--lora-scaled", "", nullptr, kOne, "", kAdapters},
    {"--control-vector", "", nullptr, kOne, "", kAdapters},
    {"--control-vector-scaled", "", nullptr, kOne, "", kAdapters},
    {"--control-vector-layer-range", "", nullptr, kTwo, "", kAdapters},
    {"--model-url", "-mu", "LLAMA_ARG_MODEL_URL", kOne, "", kNoDownloads},
    {"--docker-repo", "-dr", "LLAMA_ARG_DOCKER_REPO", kOne, "", kNoDownloads},
    {"--hf-repo", "-hf -hfr", "LLAMA_ARG_HF_REPO", kOne, "", kNoDownloads},
    {"--hf-file", "-hff", "LLAMA_ARG_HF_FILE", kOne, "", kNoDownloads},
    {"--hf-token", "-hft", nullptr, kOne, "", kNoDownloads},
    {"--hf-repo-v", "-hfv -hfrv", "LLAMA_ARG_HF_REPO_V", kOne, "", kNoDownloads},
    {"--hf-file-v", "-hffv", "LLAMA_ARG_HF_FILE_V", kOne, "", kNoDownloads},
    {"--offline", "", "LLAMA_ARG_OFFLINE", kNone, "*", "tandem never downloads anything"},
    {"--log-file", "", "LLAMA_ARG_LOG_FILE", kOne, "", "logs go to stderr only (redirect it to a file)"},
    {"--log-jsonl", "", "LLAMA_ARG_LOG_JSONL", kNone, "", kLogFormat},
    {"--no-log-jsonl", "", nullptr, kNone, "*", kLogFormat},
    {"--log-colors", "", "LLAMA_ARG_LOG_COLORS", kOptional, "*", kLogFormat},
    {"--log-prefix", "", "LLAMA_ARG_LOG_PREFIX", kNone, "*", kLogFormat},
    {"--no-log-prefix", "", nullptr, kNone, "", kLogFormat},
    {"--log-timestamps", "", "LLAMA_ARG_LOG_TIMESTAMPS", kNone, "*", kLogFormat},
    {"--no-log-timestamps", "", nullptr, kNone, "", kLogFormat},
    {"--spec-draft-type-k,--cache-type-k-draft", "-ctkd", "LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_K", kOne, "f32",
     kKvType},
    {"--spec-draft-type-v,--cache-type-v-draft", "-ctvd", "LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_V", kOne, "f32",
     kKvType},
    // Sampling parameters (the server-wide defaults tandem has are options of serve).
    {"--samplers", "", nullptr, kOne, "", kSamplerOrder},
    {"--sampler-seq,--sampling-seq", "", nullptr, kOne, "", kSamplerOrder},
    {"--ignore-eos", "", nullptr, kNone, "",
     "not supported server-wide; a request can keep the end-of-sequence token away with logit_bias"},
    {"--top-nsigma,--top-n-sigma", "", nullptr, kOne, "-1", kNoSampler},
    {"--xtc-probability", "", nullptr, kOne, "0", kNoSampler},
    {"--xtc-threshold", "", nullptr, kOne, "*", kUnusedSampler},
    {"--typical,--typical-p", "", nullptr, kOne, "1", kNoSampler},
    {"--repeat-last-n", "", nullptr, kOne, "-1",
     "the repetition penalty covers the whole context (llama-server's -1), as transformers' does"},
    {"--dry-multiplier", "", nullptr, kOne, "0", kNoSampler},
    {"--dry-base", "", nullptr, kOne, "*", kUnusedSampler},
    {"--dry-allowed-length", "", nullptr, kOne, "*", kUnusedSampler},
    {"--dry-penalty-last-n", "", nullptr, kOne, "*", kUnusedSampler},
    {"--dry-sequence-breaker", "", nullptr, kOne, "*", kUnusedSampler},
    {"--adaptive-target", "", nullptr, kOne, "-1", kNoSampler},
    {"--adaptive-decay", "", nullptr, kOne, "*", kUnusedSampler},
    {"--dynatemp-range", "", nullptr, kOne, "0", kNoSampler},
    {"--dynatemp-exp", "", nullptr, kOne, "*", kUnusedSampler},
    {"--mirostat", "", nullptr, kOne, "0", kNoSampler},
    {"--mirostat-lr", "", nullptr, kOne, "*", kUnusedSampler},
    {"--mirostat-ent", "", nullptr, kOne, "*", kUnusedSampler},
    {"--logit-bias", "-l", nullptr, kOne, "",
     "server-wide logit biases are not supported; send logit_bias with the request"},
    {"--backend-sampling", "-bs", "LLAMA_ARG_BACKEND_SAMPLING", kNone, "",
     "sampling always runs on the CPU (the seeded Gumbel-max sampler)"},
    // Server parameters.
    {"--lookup-cache-static", "-lcs", nullptr, kOne, "", kNgram},
    {"--lookup-cache-dynamic", "-lcd", nullptr, kOne, "", kNgram},
    {"--kv-unified-per-slot", "", "LLAMA_ARG_KV_UNIFIED_PER_SLOT", kOne, "",
     "the context per sequence is -c; the KV pool is shared by all sequences"},
    {"--ctx-checkpoints,--swa-checkpoints", "-ctxcp", "LLAMA_ARG_CTX_CHECKPOINTS", kOne, "*",
     "tandem keeps no context checkpoints: the prefix cache restores cached blocks exactly"},
    {"--checkpoint-min-step", "-cms", "LLAMA_ARG_CHECKPOINT_MIN_SPACING_NT", kOne, "*",
     "tandem keeps no context checkpoints: the prefix cache restores cached blocks exactly"},
    {"--kv-unified", "-kvu", "LLAMA_ARG_KV_UNIFIED", kNone, "*",
     "the KV cache is always one pool shared by all sequences"},
    {"--no-kv-unified", "-no-kvu", nullptr, kNone, "",
     "the KV cache is always one pool shared by all sequences"},
    {"--cache-idle-slots,--no-cache-idle-slots", "", "LLAMA_ARG_CACHE_IDLE_SLOTS", kNone, "*",
     "the prefix cache keeps finished requests' blocks for as long as nobody needs them"},
    {"--context-shift", "", "LLAMA_ARG_CONTEXT_SHIFT", kNone, "", kNoShift},
    {"--no-context-shift", "", nullptr, kNone, "*", kNoShift},
    {"--reverse-prompt", "-r", nullptr, kOne, "",
     "a server has no interactive mode; send stop with the request"},
    {"--special", "-sp", nullptr, kNone, "", "special tokens are not rendered in the output text"},
    {"--warmup,--no-warmup", "", nullptr, kNone, "*",
     "start-up runs the exactness probe on the loaded model, not a warm-up pass"},
    {"--spm-infill", "", nullptr, kNone, "", "/infill is not served"},
    {"--cont-batching", "-cb", "LLAMA_ARG_CONT_BATCHING", kNone, "*", kContinuous},
    {"--no-cont-batching", "-nocb", "LLAMA_ARG_NO_CONT_BATCHING", kNone, "", kContinuous},
    {"--mmproj", "-mm", "LLAMA_ARG_MMPROJ", kOne, "", kMultimodal},
    {"--mmproj-url", "-mmu", "LLAMA_ARG_MMPROJ_URL", kOne, "", kMultimodal},
    {"--mmproj-auto", "", "LLAMA_ARG_MMPROJ_AUTO", kNone, "*",
     "tandem never looks for a multimodal projector"},
    {"--no-mmproj,--no-mmproj-auto", "", nullptr, kNone, "*",
     "tandem never looks for a multimodal projector"},
    {"--mmproj-offload,--no-mmproj-offload", "", "LLAMA_ARG_MMPROJ_OFFLOAD", kNone, "*",
     "tandem never looks for a multimodal projector"},
    {"--mmproj-device", "-mmdev", "MTMD_BACKEND_DEVICE", kOne, "", kMultimodal},
    {"--image-min-tokens", "", "LLAMA_ARG_IMAGE_MIN_TOKENS", kOne, "", kMultimodal},
    {"--image-max-tokens", "", "LLAMA_ARG_IMAGE_MAX_TOKENS", kOne, "", kMultimodal},
    {"--mtmd-batch-max-tokens", "", "LLAMA_ARG_MTMD_BATCH_MAX_TOKENS", kOne, "", kMultimodal},
    {"--video-fps", "", "LLAMA_ARG_VIDEO_FPS", kOne, "", kMultimodal},
    {"--video-timestamp-interval", "", "LLAMA_ARG_VIDEO_TIMESTAMP_INTERVAL", kOne, "", kMultimodal},
    {"--video-ffmpeg-dir", "", "LLAMA_ARG_VIDEO_FFMPEG_DIR", kOne, "", kMultimodal},
    {"--tags", "", "LLAMA_ARG_TAGS", kOne, "", "model tags are not reported"},
    {"--reuse-port", "", "LLAMA_ARG_REUSE_PORT", kNone, "",
     "sharing the port with another process is refused on purpose (SO_REUSEADDR only)"},
    {"--path", "", "LLAMA_ARG_STATIC_PATH", kOne, "", "serving static files is not supported"},
    {"--cors-methods", "", "LLAMA_ARG_CORS_METHODS", kOne, "",
     "only the allowed origins are configurable (--cors-origin)"},
    {"--cors-headers", "", "LLAMA_ARG_CORS_HEADERS", kOne, "",
     "only the allowed origins are configurable (--cors-origin)"},
    {"--cors-credentials,--no-cors-credentials", "", "LLAMA_ARG_CORS_CREDENTIALS", kNone, "",
     "only the allowed origins are configurable (--cors-origin)"},
    {"--api-prefix", "", "LLAMA_ARG_API_PREFIX", kOne, "", "the routes are served at their usual paths only"},
    {"--ui-config,--webui-config", "", "LLAMA_ARG_UI_CONFIG", kOne, "", kWebUiConfig},
    {"--ui-config-file,--webui-config-file", "", "LLAMA_ARG_UI_CONFIG_FILE", kOne, "", kWebUiConfig},
    {"--ui-mcp-proxy,--webui-mcp-proxy", "", "LLAMA_ARG_UI_MCP_PROXY", kNone, "", kTools},
    {"--no-ui-mcp-proxy,--no-webui-mcp-proxy", "", nullptr, kNone, "*", kTools},
    {"--tools", "", "LLAMA_ARG_TOOLS", kOne, "", kTools},
    {"--tools-runtime", "", "LLAMA_ARG_TOOLS_RUNTIME", kOne, "", kTools},
    {"--mcp-servers-config", "", "LLAMA_ARG_MCP_SERVERS_CONFIG", kOne, "", kTools},
    {"--mcp-servers-json", "", "LLAMA_ARG_MCP_SERVERS_JSON", kOne, "", kTools},
    {"--agent", "-ag", "LLAMA_ARG_AGENT", kNone, "", kTools},
    {"--no-agent", "-no-ag", nullptr, kNone, "*", kTools},
    {"--rerank,--reranking", "", "LLAMA_ARG_RERANKING", kNone, "", "the reranking endpoint is not served"},
    {"--ssl-key-file", "", "LLAMA_ARG_SSL_KEY_FILE", kOne, "",
     "TLS is not supported: put tandem behind a TLS-terminating reverse proxy"},
    {"--ssl-cert-file", "", "LLAMA_ARG_SSL_CERT_FILE", kOne, "",
     "TLS is not supported: put tandem behind a TLS-terminating reverse proxy"},
    {"--sse-ping-interval", "", "LLAMA_ARG_SSE_PING_INTERVAL", kOne, "-1", "tandem sends no SSE pings"},
    {"--cache-reuse", "", "LLAMA_ARG_CACHE_REUSE", kOne, "0",
     "reusing chunks by shifting KV is not exact; tandem reuses exact prompt prefixes instead (the prefix "
     "cache, on by default)"},
    {"--metrics", "", "LLAMA_ARG_ENDPOINT_METRICS", kNone, "*", "/metrics is always served"},
    {"--props", "", "LLAMA_ARG_ENDPOINT_PROPS", kNone, "",
     "changing server properties through POST /props is not supported"},
    {"--slots", "", "LLAMA_ARG_ENDPOINT_SLOTS", kNone, "*", "/slots is always served (read-only)"},
    {"--no-slots", "", nullptr, kNone, "", "/slots is always served (read-only)"},
    {"--slot-save-path", "", "LLAMA_ARG_SLOT_SAVE_PATH", kOne, "",
     "saving and restoring slots is not supported"},
    {"--media-path", "", nullptr, kOne, "", kMultimodal},
    {"--models-dir", "", "LLAMA_ARG_MODELS_DIR", kOne, "", kRouter},
    {"--models-preset", "", "LLAMA_ARG_MODELS_PRESET", kOne, "", kRouter},
    {"--models-max", "", "LLAMA_ARG_MODELS_MAX", kOne, "", kRouter},
    {"--models-autoload,--no-models-autoload", "", "LLAMA_ARG_MODELS_AUTOLOAD", kNone, "", kRouter},
    {"--jinja", "", "LLAMA_ARG_JINJA", kNone, "*",
     "chat templates are always rendered with tandem's Jinja engine"},
    {"--no-jinja", "", nullptr, kNone, "", "chat templates are always rendered with tandem's Jinja engine"},
    {"--reasoning-format", "", "LLAMA_ARG_THINK", kOne, "none", kReasoning},
    {"--reasoning", "-rea", "LLAMA_ARG_REASONING", kOptional, "", kReasoning},
    {"--reasoning-effort", "", "LLAMA_ARG_REASONING_EFFORT", kOne, "default", kReasoning},
    {"--reasoning-budget", "", "LLAMA_ARG_THINK_BUDGET", kOne, "-1", kReasoning},
    {"--reasoning-budget-message", "", "LLAMA_ARG_THINK_BUDGET_MESSAGE", kOne, "", kReasoning},
    {"--reasoning-preserve,--no-reasoning-preserve", "", "LLAMA_ARG_REASONING_PRESERVE", kNone, "",
     kReasoning},
    {"--skip-chat-parsing", "", "LLAMA_ARG_SKIP_CHAT_PARSING", kNone, "*",
     "tandem parses neither tool calls nor reasoning out of the output: all of it is message.content"},
    {"--no-skip-chat-parsing", "", nullptr, kNone, "",
     "tandem parses neither tool calls nor reasoning out of the output: all of it is message.content"},
    {"--prefill-assistant,--no-prefill-assistant", "", "LLAMA_ARG_PREFILL_ASSISTANT", kNone, "",
     "prefilling a final assistant message is not configurable"},
    {"--slot-prompt-similarity", "-sps", nullptr, kOne, "*",
     "tandem has no slots to choose: every request reuses the longest cached prefix of its prompt"},
    {"--lora-init-without-apply", "", nullptr, kNone, "", kAdapters},
    {"--sleep-idle-seconds", "", nullptr, kOne, "-1", "sleeping when idle is not supported"},
    {"--log-prompts-dir", "", nullptr, kOne, "", "logging prompts to files is not supported"},
    // The drafter's.
    {"--spec-draft-hf,--hf-repo-draft", "-hfd -hfrd", "LLAMA_ARG_SPEC_DRAFT_HF_REPO", kOne, "", kNoDownloads},
    {"--spec-draft-threads,--threads-draft", "-td", nullptr, kOne, "*", kDrafterThreads},
    {"--spec-draft-threads-batch,--threads-batch-draft", "-tbd", nullptr, kOne, "*", kDrafterThreads},
    {"--spec-draft-cpu-mask,--cpu-mask-draft", "-Cd", nullptr, kOne, "", kAffinity},
    {"--spec-draft-cpu-range,--cpu-range-draft", "-Crd", nullptr, kOne, "", kAffinity},
    {"--spec-draft-cpu-strict,--cpu-strict-draft", "", nullptr, kOne, "0", kAffinity},
    {"--spec-draft-prio,--prio-draft", "", nullptr, kOne, "0", kAffinity},
    {"--spec-draft-poll,--poll-draft", "", nullptr, kOne, "*", kPolling},
    {"--spec-draft-cpu-mask-batch,--cpu-mask-batch-draft", "-Cbd", nullptr, kOne, "", kAffinity},
    {"--spec-draft-cpu-strict-batch,--cpu-strict-batch-draft", "", nullptr, kOne, "0", kAffinity},
    {"--spec-draft-prio-batch,--prio-batch-draft", "", nullptr, kOne, "0", kAffinity},
    {"--spec-draft-poll-batch,--poll-batch-draft", "", nullptr, kOne, "*", kPolling},
    {"--spec-draft-override-tensor,--override-tensor-draft", "-otd", nullptr, kOne, "", kCpuOnly},
    {"--spec-draft-cpu-moe,--cpu-moe-draft", "-cmoed", "LLAMA_ARG_SPEC_DRAFT_CPU_MOE", kNone, "*",
     kHostMemory},
    {"--spec-draft-n-cpu-moe,--spec-draft-ncmoe,--n-cpu-moe-draft", "-ncmoed",
     "LLAMA_ARG_SPEC_DRAFT_N_CPU_MOE", kOne, "*", kHostMemory},
    {"--spec-synth-len", "", "LLAMA_ARG_SPEC_SYNTH_LEN", kOne, "", "synthetic acceptance is not supported"},
    {"--spec-synth-rates", "", "LLAMA_ARG_SPEC_SYNTH_RATES", kOne, "",
     "synthetic acceptance is not supported"},
    {"--spec-draft-p-split,--draft-p-split", "", "LLAMA_ARG_SPEC_DRAFT_P_SPLIT", kOne, "*",
     "tandem drafts one chain of K-1 tokens, never a tree"},
    {"--spec-draft-p-min,--draft-p-min", "", "LLAMA_ARG_SPEC_DRAFT_P_MIN", kOne, "0",
     "tandem always drafts K-1 tokens; it does not stop drafting on a low draft probability"},
    {"--spec-draft-backend-sampling,--no-spec-draft-backend-sampling", "",
     "LLAMA_ARG_SPEC_DRAFT_BACKEND_SAMPLING", kNone, "*", "the drafter always samples on the CPU"},
    {"--spec-draft-sampling", "", "LLAMA_ARG_SPEC_DRAFT_SAMPLING", kOne, "",
     "the drafter samples with the target's seeded Gumbel noise and a draft is kept iff it equals the "
     "target's "
     "own pick (exact, ADR 0002)"},
    {"--spec-draft-device,--device-draft", "-devd", nullptr, kOne, "auto", kDrafterDevice},
    {"--spec-draft-ngl,--gpu-layers-draft,--n-gpu-layers-draft", "-ngld", "LLAMA_ARG_N_GPU_LAYERS_DRAFT",
     kOne, "auto", kDrafterDevice},
    {"--ctx-size-draft", "-cd", "LLAMA_ARG_CTX_SIZE_DRAFT", kOne, "*",
     "the drafter's cache always follows the target's context (-c)"},
    {"--spec-ngram-mod-n-min", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-mod-n-max", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-mod-n-match", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-simple-size-n", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-simple-size-m", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-simple-min-hits", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-map-k-size-n", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-map-k-size-m", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-map-k-min-hits", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-map-k4v-size-n", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-map-k4v-size-m", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-map-k4v-min-hits", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-size-n", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-size-m", "", nullptr, kOne, "", kNgram},
    {"--spec-ngram-min-hits", "", nullptr, kOne, "", kNgram},
    {"--embd-gemma-default", "", nullptr, kNone, "", kPreset},
    {"--fim-qwen-1.5b-default", "", nullptr, kNone, "", kPreset},
    {"--fim-qwen-3b-default", "", nullptr, kNone, "", kPreset},
    {"--fim-qwen-7b-default", "", nullptr, kNone, "", kPreset},
    {"--fim-qwen-7b-spec", "", nullptr, kNone, "", kPreset},
    {"--fim-qwen-14b-spec", "", nullptr, kNone, "", kPreset},
    {"--fim-qwen-30b-default", "", nullptr, kNone, "", kPreset},
    {"--gpt-oss-20b-default", "", nullptr, kNone, "", kPreset},
    {"--gpt-oss-120b-default", "", nullptr, kNone, "", kPreset},
    {"--vision-gemma-4b-default", "", nullptr, kNone, "", kPreset},
    {"--vision-gemma-12b-default", "", nullptr, kNone, "", kPreset},
    {"--spec-default", "", nullptr, kNone, "", "there is no default drafter: pass one with -md"},
};

// One-dash spellings of the options serve (or another subcommand) implements itself.
const std::pair<const char*, const char*> kOwnSpellings[] = {
    {"-md", "--model-draft"},   {"-np", "--parallel"},         {"-to", "--timeout"},
    {"-lv", "--verbosity"},     {"-cram", "--cache-ram"},      {"-dev", "--device"},
    {"-ngl", "--n-gpu-layers"}, {"-jf", "--json-schema-file"},
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(sep, start);
    const std::string part = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!part.empty()) out.push_back(part);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

const std::map<std::string, std::string>& spelling_map() {
  static const std::map<std::string, std::string> map = [] {
    std::map<std::string, std::string> m;
    for (const Row& r : kRows)
      for (const std::string& s : split(r.spellings, ' '))
        if (s.size() > 2) m[s] = split(r.names, ',').front();
    for (const auto& [from, to] : kOwnSpellings) m[from] = to;
    return m;
  }();
  return map;
}

bool is_number(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// `value` is one of the row's no-op values (numbers compare by value).
bool accepted(const Row& r, const std::string& value) {
  const std::string v = to_lower(trim(value));
  for (const std::string& a : split(r.accepts, '|')) {
    if (a == v) return true;
    if (is_number(a) && is_number(v) && std::strtod(a.c_str(), nullptr) == std::strtod(v.c_str(), nullptr))
      return true;
  }
  return false;
}

// "-ngl/--n-gpu-layers" or "--jinja".
std::string display_name(const Row& r) {
  const auto spellings = split(r.spellings, ' ');
  const std::string name = split(r.names, ',').front();
  return spellings.empty() ? name : spellings.front() + "/" + name;
}

}  // namespace

void add_llama_flags(CLI::App* serve, LlamaFlagValues& out) {
  constexpr size_t n = std::size(kRows);
  out.options.assign(n, nullptr);
  out.storage.assign(n, {});  // sized once: CLI11 keeps a reference to each
  for (size_t i = 0; i < n; ++i) {
    const Row& r = kRows[i];
    std::string names;
    for (const std::string& s : split(r.names, ',')) names += (names.empty() ? "" : ",") + s;
    // One-letter spellings (-e, -r, -C) are CLI11 short names; longer ones are rewritten.
    for (const std::string& s : split(r.spellings, ' '))
      if (s.size() == 2) names += "," + s;
    const std::string help =
        std::string("llama-server's; ") +
        (std::string(r.accepts) == "*"    ? "accepted, no effect: "
         : std::string(r.accepts).empty() ? "refused: "
                                          : "accepted only as " + std::string(r.accepts) + ": ") +
        r.reason;
    CLI::Option* opt;
    if (r.arity == kNone) {
      opt = serve->add_flag(names, help);
    } else {
      opt = serve->add_option(names, out.storage[i], help);
      if (r.arity == kOptional) opt->expected(0, 1);
      if (r.arity == kTwo) opt->expected(2);
    }
    opt->group("llama-server compatibility (docs/llama-server.md)");
    out.options[i] = opt;
  }
}

Status check_llama_flags(const LlamaFlagValues& flags) {
  for (size_t i = 0; i < flags.options.size(); ++i) {
    const Row& r = kRows[i];
    const CLI::Option* opt = flags.options[i];
    std::string what, value;
    bool used = false;
    if (opt->count() > 0) {
      used = true;
      std::vector<std::string> given = opt->results();
      if (r.arity == kTwo && given.size() >= 2) given = {given[given.size() - 2] + " " + given.back()};
      value = r.arity == kNone || given.empty() ? "" : given.back();
      what = display_name(r) + (value.empty() ? "" : " " + value);
    } else if (r.env) {
      auto v = env_string(r.env);
      if (!v || is_blank(*v)) continue;
      if (r.arity == kNone) {
        auto b = parse_bool(trim(*v));
        if (!b)
          return invalid_argument(std::string(r.env) + "='" + *v + "' is not a boolean (it mirrors " +
                                  display_name(r) + "); accepted: 1, true, yes, on, 0, false, no, off");
        if (!*b) continue;  // the flag off: nothing asked for
      } else {
        value = trim(*v);
      }
      used = true;
      what = std::string(r.env) + "='" + *v + "' (" + display_name(r) + ")";
    }
    if (!used) continue;
    const std::string accepts = r.accepts;
    if (r.arity == kOptional && value.empty()) value = "on";
    const bool no_op = accepts == "*" || (!accepts.empty() && accepted(r, value));
    if (no_op) {
      spdlog::info("{}: accepted, no effect: {}", what, r.reason);
      continue;
    }
    if (accepts.empty() || accepts == "*") return invalid_argument(what + ": not supported: " + r.reason);
    std::string list;
    for (const std::string& a : split(accepts, '|')) list += (list.empty() ? "" : ", ") + a;
    return invalid_argument(what + ": not supported (accepted: " + list + "): " + r.reason);
  }
  return Status::Ok();
}

Expected<std::vector<std::string>> rewrite_llama_spellings(CLI::App& app, std::vector<std::string> args) {
  const auto& spellings = spelling_map();
  CLI::App* sub = nullptr;
  auto looks_like_flag = [](const std::string& s) { return s.size() > 1 && s[0] == '-' && !is_number(s); };
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (!sub) {
      // Before the subcommand only --help and --version mean anything; `tandem -hf x` must
      // not be read as -h (help, exit 0).
      if (looks_like_flag(a) && a[1] != '-' && a.size() > 2)
        return invalid_argument(a + ": unknown flag; the subcommand comes first (e.g. tandem serve -m DIR " +
                                a + " ...)");
      if (a.empty() || a[0] == '-') continue;  // --help, --version
      try {
        sub = app.get_subcommand(a);
      } catch (const CLI::Error&) {
        return args;  // not a subcommand: CLI11 reports it
      }
      continue;
    }
    if (!looks_like_flag(a)) continue;
    std::string name = a;
    if (a[1] != '-' && a.size() > 2) {  // one dash, several letters
      auto it = spellings.find(a);
      if (it == spellings.end()) {
        const bool attached = sub->get_option_no_throw(a.substr(0, 2)) != nullptr;
        return invalid_argument(
            a + ": unknown flag" +
            (attached ? " (a value goes after a space: " + a.substr(0, 2) + " " + a.substr(2) + ")" : "") +
            "; llama-server's flags and what tandem does with each: docs/llama-server.md");
      }
      name = it->second;
    }
    const std::string key = name.substr(0, name.find('='));
    CLI::Option* opt = sub->get_option_no_throw(key);
    if (!opt) {
      if (name != a)
        return invalid_argument(a + " (" + name + ") is not an option of tandem " + sub->get_name());
      continue;  // CLI11 reports it
    }
    a = name;
    if (name.find('=') != std::string::npos) continue;
    const int min = std::min(opt->get_type_size_min(), opt->get_items_expected_min());
    const int max = opt->get_items_expected_max();
    if (max == 0) continue;
    if (min >= 1) {
      i += static_cast<size_t>(min);  // CLI11 takes the next `min` tokens as values, whatever they look like
    } else if (i + 1 < args.size() && !looks_like_flag(args[i + 1])) {
      ++i;  // an optional value
    }
  }
  return args;
}

}  // namespace tandem::app
