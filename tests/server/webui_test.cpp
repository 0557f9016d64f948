#include "server/webui.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/sha256.h"

namespace tandem::server {
namespace {

std::string source_file(const std::string& name) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  std::ifstream in(std::string(root ? root : ".") + "/src/server/webui/" + name, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::optional<std::string> header(const WebReply& r, const std::string& name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return std::nullopt;
}

TEST(WebUi, EmbedsEveryFileByteForByteWithItsType) {
  const struct {
    const char* path;
    const char* file;
    const char* type;
  } expected[] = {{"/", "index.html", "text/html; charset=utf-8"},
                  {"/webui/app.css", "app.css", "text/css; charset=utf-8"},
                  {"/webui/main.js", "main.js", "text/javascript; charset=utf-8"},
                  {"/webui/api.js", "api.js", "text/javascript; charset=utf-8"},
                  {"/webui/plots.js", "plots.js", "text/javascript; charset=utf-8"}};
  for (const auto& e : expected) {
    const WebAsset* a = find_webui_asset(e.path);
    ASSERT_NE(a, nullptr) << e.path;
    EXPECT_EQ(a->content_type, e.type) << e.path;
    const std::string source = source_file(e.file);
    ASSERT_FALSE(source.empty()) << e.file;
    EXPECT_EQ(a->body, source) << e.path << " differs from src/server/webui/" << e.file;
    EXPECT_EQ(a->etag, "\"" + sha256_hex(source).substr(0, 16) + "\"") << e.path;
  }
  EXPECT_EQ(find_webui_asset("/index.html"), nullptr);  // the page is at "/" only
  EXPECT_EQ(find_webui_asset("/webui/"), nullptr);
  EXPECT_EQ(find_webui_asset("/webui/missing.js"), nullptr);
}

TEST(WebUi, EveryAssetHasADistinctPathAndETag) {
  const auto assets = webui_assets();
  ASSERT_GE(assets.size(), 5u);
  for (size_t i = 0; i < assets.size(); ++i)
    for (size_t j = i + 1; j < assets.size(); ++j) {
      EXPECT_NE(assets[i].path, assets[j].path);
      EXPECT_NE(assets[i].etag, assets[j].etag);
    }
}

TEST(WebUi, ReplyCarriesCachingAndSecurityHeaders) {
  const WebAsset& page = *find_webui_asset("/");
  const WebReply r = webui_reply(page, std::nullopt);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, page.body);
  EXPECT_EQ(header(r, "ETag"), std::string(page.etag));
  EXPECT_EQ(header(r, "Cache-Control"), "no-cache");
  EXPECT_EQ(header(r, "X-Content-Type-Options"), "nosniff");
  const auto csp = header(r, "Content-Security-Policy");
  ASSERT_TRUE(csp);
  EXPECT_NE(csp->find("default-src 'none'"), std::string::npos);
  EXPECT_NE(csp->find("connect-src 'self'"), std::string::npos);
  // Scripts and styles need no policy of their own; it is the document's that applies.
  EXPECT_FALSE(
      header(webui_reply(*find_webui_asset("/webui/main.js"), std::nullopt), "Content-Security-Policy"));
}

TEST(WebUi, IfNoneMatchGivesNotModified) {
  const WebAsset& page = *find_webui_asset("/");
  const std::string etag(page.etag);
  for (const std::string& value :
       {etag, "W/" + etag, "\"other\", " + etag, std::string("*"), " " + etag + " "}) {
    const WebReply r = webui_reply(page, value);
    EXPECT_EQ(r.status, 304) << value;
    EXPECT_TRUE(r.body.empty()) << value;
    EXPECT_EQ(header(r, "ETag"), etag) << value;
  }
  for (const std::string& value : {std::string("\"other\""), std::string(""), etag.substr(1)}) {
    const WebReply r = webui_reply(page, value);
    EXPECT_EQ(r.status, 200) << value;
    EXPECT_EQ(r.body, page.body) << value;
  }
}

}  // namespace
}  // namespace tandem::server
