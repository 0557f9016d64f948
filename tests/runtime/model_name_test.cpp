// The served model id of a directory: a Hub cache snapshot is served as
// org/name (not its commit hash), anything else under its own name.
#include "runtime/model_name.h"

#include <gtest/gtest.h>

namespace tandem::runtime {
namespace {

TEST(ServedModelId, HubCacheSnapshotIsServedAsOrgSlashName) {
  EXPECT_EQ(served_model_id("/root/.cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/"
                            "7ae557604adf67be50417f59c2c2f167def9a775"),
            "Qwen/Qwen2.5-0.5B-Instruct");
  EXPECT_EQ(served_model_id("/hub/models--meta-llama--Llama-3.2-1B/snapshots/abc123/"),
            "meta-llama/Llama-3.2-1B");
  // A repository without an organisation, and the repository folder itself.
  EXPECT_EQ(served_model_id("/hub/models--gpt2/snapshots/abc"), "gpt2");
  EXPECT_EQ(served_model_id("/hub/models--org--name"), "org/name");
}

TEST(ServedModelId, OtherDirectoriesAreServedUnderTheirName) {
  EXPECT_EQ(served_model_id("models/tandem-target"), "tandem-target");
  EXPECT_EQ(served_model_id("models/tandem-target/"), "tandem-target");
  EXPECT_EQ(served_model_id("/a/b/./tandem-target/../tandem-draft"), "tandem-draft");
  // "snapshots" under a folder that is not a Hub cache entry: the directory's own name.
  EXPECT_EQ(served_model_id("/data/snapshots/abc"), "abc");
  EXPECT_EQ(served_model_id("/"), "");
}

}  // namespace
}  // namespace tandem::runtime
