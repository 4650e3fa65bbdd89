// What the `carve` binary does with its command line before and around CLI11: the command after
// `--`, `carve version`, `carve completion` and the generated reference (docs/cli.md).
#ifndef CARVE_APPS_CARVE_COMMAND_LINE_H_
#define CARVE_APPS_CARVE_COMMAND_LINE_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace carve::app {

// CLI11 ends a repeatable option's values at `--` and then drops the `--`, so what follows it is
// parsed as options (`carve submit --env K=V -- sh -c x` failed on `-c`). The arguments after the
// first `--` are taken out before CLI11 parses: everything after `--` is the command.
struct SplitArgs {
  std::vector<std::string> head;                    // before `--`, for CLI11
  std::optional<std::vector<std::string>> command;  // after it; none when there was no `--`
};
SplitArgs SplitAtDashes(int argc, char** argv);

// The command after `--` (the caller names it in `flag`), or `before` when there was no `--`.
// Dies when both are given: `carve submit sleep -- 60` is ambiguous.
std::vector<std::string> CommandAfterDashes(const std::vector<std::string>& before);
// Records the split for CommandAfterDashes; main calls it once, before parsing.
void SetCommandAfterDashes(std::optional<std::vector<std::string>> command);
// Subcommands that take a command after `--` (submit, internal-run).
void TakesCommand(CLI::App* sub);
// Empty when `head` (main's arguments before `--`) names a subcommand that takes a command or
// there is no command; otherwise what to tell the user.
std::string CheckCommandPlacement(const CLI::App& app, const SplitArgs& args);

// "carve 0.1.0+7fcab4b\ncommit 7fcab4b..., RelWithDebInfo, g++ 12.2.0\n".
std::string VersionText();
// `carve version`, `carve completion bash|zsh`, and the hidden `carve cli-reference`.
void AddMetaCommands(CLI::App& app);
// The command tree as a bash or zsh completion script; false for another shell.
bool WriteCompletion(const CLI::App& app, const std::string& shell, std::ostream& out);
// The command tree as Markdown: every command with its description, positionals and options.
void WriteReference(const CLI::App& app, std::ostream& out);

}  // namespace carve::app

#endif  // CARVE_APPS_CARVE_COMMAND_LINE_H_
