// The completion model of a CLI11 App (DescribeForCompletion) and what the scripts make
// of it. The scripts run in real shells in completion_test.py.
#include "host_client/cli/completion.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace remex::cli {
namespace completion_test {

const CompletionOption* Find(const std::vector<CompletionOption>& options, const std::string& name) {
  for (const CompletionOption& o : options) {
    if (std::find(o.names.begin(), o.names.end(), name) != o.names.end() || o.name == name) return &o;
  }
  return nullptr;
}

class CompletionModelTest : public ::testing::Test {
 protected:
  CompletionModelTest() {
    app_.set_version_flag("--version", "tool 1");
    auto* run = app_.add_subcommand("run", "run a model");
    run->add_option("model", model_, "MODEL.onnx")->required()->type_name("FILE");
    run->add_option("-o,--output", output_, "where: [here] or there")->type_name("FILE");
    run->add_option("--output-dir", output_, "a folder")->type_name("DIR");
    run->add_option("--layout", output_, "NCHW or NHWC")
        ->check(CLI::IsMember({"NCHW", "NHWC"}, CLI::ignore_case));
    run->add_option("--level", output_, "a level")
        ->transform(CLI::Transformer({{"low", "1"}, {"high", "9"}}));
    run->add_option("--seed", number_, "seed")->check(CLI::Range(0, 10));
    run->add_option("--input", inputs_, "NAME=FILE (repeatable)");
    run->add_option("--record", output_, "URL, optional")->expected(0, 1);
    run->add_flag("--equal-nan,!--no-equal-nan", flag_, "NaN matches NaN");
    run->add_flag("--secret", flag_)->group("");
    auto* farm = app_.add_subcommand("farm", "the farm");
    farm->add_subcommand("status", "list devices")->add_flag("--json", flag_, "JSON");
    farm->add_subcommand("lease", "hold a lease")
        ->add_option("command", inputs_, "the command, after --")
        ->type_name("COMMAND");
    app_.add_subcommand("hidden", "not listed")->group("");
  }

  CLI::App app_{"a tool"};
  std::string model_, output_;
  std::vector<std::string> inputs_;
  int number_ = 0;
  bool flag_ = false;
};

TEST_F(CompletionModelTest, SubcommandsNestedAndHiddenOnesLeftOut) {
  CompletionCommand root = DescribeForCompletion(app_, "tool");
  EXPECT_EQ(root.name, "tool");
  ASSERT_EQ(root.subcommands.size(), 2u);
  EXPECT_EQ(root.subcommands[0].name, "run");
  EXPECT_EQ(root.subcommands[0].description, "run a model");
  const CompletionCommand& farm = root.subcommands[1];
  ASSERT_EQ(farm.subcommands.size(), 2u);
  EXPECT_EQ(farm.subcommands[0].name, "status");
  EXPECT_NE(Find(farm.subcommands[0].options, "--json"), nullptr);
  EXPECT_NE(Find(root.options, "--version"), nullptr);
  EXPECT_NE(Find(root.options, "--help"), nullptr);
}

TEST_F(CompletionModelTest, OptionsTheirValuesAndPositionals) {
  const CompletionCommand run = DescribeForCompletion(app_, "tool").subcommands[0];
  ASSERT_EQ(run.positionals.size(), 1u);
  EXPECT_EQ(run.positionals[0].name, "model");
  EXPECT_EQ(run.positionals[0].kind, ValueKind::kFile);
  EXPECT_TRUE(run.positionals[0].takes_value);

  const CompletionOption* output = Find(run.options, "-o");
  ASSERT_NE(output, nullptr);
  EXPECT_EQ(output->names, (std::vector<std::string>{"-o", "--output"}));
  EXPECT_EQ(output->name, "--output");
  EXPECT_EQ(output->kind, ValueKind::kFile);
  EXPECT_EQ(Find(run.options, "--output-dir")->kind, ValueKind::kDirectory);

  const CompletionOption* layout = Find(run.options, "--layout");
  EXPECT_EQ(layout->kind, ValueKind::kChoice);
  EXPECT_EQ(layout->choices, (std::vector<std::string>{"NCHW", "NHWC"}));
  EXPECT_EQ(Find(run.options, "--level")->choices, (std::vector<std::string>{"low", "high"}));  // the keys

  const CompletionOption* seed = Find(run.options, "--seed");
  EXPECT_TRUE(seed->takes_value);
  EXPECT_EQ(seed->kind, ValueKind::kNone);  // a Range is no set of choices
  EXPECT_TRUE(seed->choices.empty());

  EXPECT_TRUE(Find(run.options, "--input")->repeatable);
  EXPECT_FALSE(seed->repeatable);
  EXPECT_FALSE(Find(run.options, "--record")->takes_value);  // an optional value: completed as a flag

  const CompletionOption* nan = Find(run.options, "--equal-nan");
  ASSERT_NE(nan, nullptr);
  EXPECT_FALSE(nan->takes_value);
  EXPECT_NE(std::find(nan->names.begin(), nan->names.end(), "--no-equal-nan"), nan->names.end());
  EXPECT_EQ(Find(run.options, "--secret"), nullptr);  // hidden

  const CompletionOption& command =
      DescribeForCompletion(app_, "tool").subcommands[1].subcommands[1].positionals[0];
  EXPECT_EQ(command.kind, ValueKind::kCommand);
  EXPECT_TRUE(command.repeatable);
}

TEST_F(CompletionModelTest, BashScriptDeclaresEveryCommandAndValue) {
  const std::string s = BashCompletionScript(app_, "tool");
  EXPECT_NE(s.find("complete -F _tool 'tool'"), std::string::npos) << s;
  EXPECT_NE(s.find("'tool farm lease') subs=(); opts=("), std::string::npos) << s;
  EXPECT_NE(s.find("'tool run --layout') value=(choice 'NCHW' 'NHWC')"), std::string::npos) << s;
  EXPECT_NE(s.find("'tool run #0') value=(file)"), std::string::npos) << s;
  EXPECT_EQ(s.find("--secret"), std::string::npos);
  EXPECT_EQ(s.find("hidden"), std::string::npos);
}

TEST_F(CompletionModelTest, ZshScriptEscapesDescriptions) {
  const std::string s = ZshCompletionScript(app_, "tool");
  EXPECT_EQ(s.rfind("#compdef tool\n", 0), 0u) << s;
  // ']' and '[' escaped in an explanation; the spec single-quoted.
  EXPECT_NE(s.find("'(-o --output)--output=[where\\: \\[here\\] or there]:output:_files'"), std::string::npos)
      << s;
  EXPECT_NE(s.find("'--layout=[NCHW or NHWC]:layout:(NCHW NHWC)'"), std::string::npos) << s;
  EXPECT_NE(s.find("'*--input=[NAME=FILE (repeatable)]:input: '"), std::string::npos) << s;
  EXPECT_NE(s.find("'*::command:_normal'"), std::string::npos) << s;
  EXPECT_NE(s.find("'status:list devices'"), std::string::npos) << s;
}

}  // namespace completion_test
}  // namespace remex::cli
