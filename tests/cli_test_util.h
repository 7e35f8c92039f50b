// A fixture for tests of the remex CLI against a real remex-server process: the server,
// a fresh folder per test, the CLI run through the shell and its JSON parsed.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "tests/process_util.h"

namespace remex::testing {

class CliTest : public ::testing::Test {
 protected:
  // `prefix` names the test folder: TempDir()/PREFIX_TESTNAME.
  explicit CliTest(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    ASSERT_NE(server_.port(), 0) << "remex-server did not start";
    dir_ = ::testing::TempDir() + "/" + prefix_ + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }

  // `remex ARGS` through the shell (so ARGS may redirect stderr).
  CommandResult Cli(const std::string& args) { return RunCommand(std::string(REMEX_CLI_BIN) + " " + args); }
  // " --server 127.0.0.1:PORT" of the fixture's server.
  std::string Server() const { return " --server " + server_.address(); }
  // The command's stdout as JSON; a test failure when it is not.
  nlohmann::json Json(const CommandResult& r) {
    auto j = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << r.output;
    return j;
  }

  ServerProcess server_;
  std::string dir_;

 private:
  std::string prefix_;
};

}  // namespace remex::testing
