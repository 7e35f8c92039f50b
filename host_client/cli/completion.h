// `remex completion bash|zsh`: shell completion scripts generated from the CLI's own
// CLI11 definitions, so a flag added to main.cc completes without a second list.
//
// What each script completes comes from the CLI::App tree: the subcommands (nested, as
// `farm status`) with their descriptions; each command's options by every name, except
// those in the hidden group ""; whether an option takes a value (a flag takes none; an
// option whose value is optional, such as `--record [URL]`, is completed as a flag);
// an option's or positional's value by its kind:
//   - a choice: the members of its CLI::IsMember validator (or the keys of a
//     CLI::Transformer's map), as CLI11 describes them, {a,b,c};
//   - a file: type name FILE (`->type_name("FILE")`); a folder: DIR; a command line to
//     run: COMMAND (its first word a command, the rest files);
//   - anything else: nothing is offered.
// Positionals are completed in order; a command's positional that takes many values
// (a vector) completes every word after the others.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace remex::cli {

// What a value completes to.
enum class ValueKind { kNone, kChoice, kFile, kDirectory, kCommand };

// An option or positional of a command, as the scripts complete it.
struct CompletionOption {
  std::vector<std::string> names;  // "-o", "--output"; empty for a positional
  std::string name;                // the positional's name ("model"), else the first long name
  std::string description;
  bool takes_value = false;
  bool repeatable = false;  // may be given more than once (a vector)
  ValueKind kind = ValueKind::kNone;
  std::vector<std::string> choices;  // kChoice: the values
};

// A command (the root or a subcommand) as the scripts complete it.
struct CompletionCommand {
  std::string name;  // the root's: the program name given to DescribeForCompletion
  std::string description;
  std::vector<CompletionOption> options;      // every option and flag, in definition order
  std::vector<CompletionOption> positionals;  // in order
  std::vector<CompletionCommand> subcommands;
};

// The completion model of `app` and its subcommands, `program` naming the root.
CompletionCommand DescribeForCompletion(const CLI::App& app, const std::string& program);

// The bash completion script of `app` (run as `program`): a function _PROGRAM registered
// with `complete -F`; to be sourced. Needs bash 4.
std::string BashCompletionScript(const CLI::App& app, const std::string& program);

// The zsh completion script of `app`: `#compdef program`, a native _arguments script. As a
// file named _PROGRAM in a folder of $fpath it is autoloaded by compinit; sourced after
// compinit, it registers itself with compdef.
std::string ZshCompletionScript(const CLI::App& app, const std::string& program);

}  // namespace remex::cli
