#include "host_client/cli/completion.h"

#include <cctype>
#include <string_view>

namespace remex::cli {
namespace {

// The values of a validator CLI11 describes as a set, {a,b,c} (CLI::IsMember), or as a
// map, {a->1,b->2} (CLI::Transformer: its keys); none for any other description.
std::vector<std::string> ChoicesOf(const std::string& description) {
  std::vector<std::string> choices;
  if (description.size() < 2 || description.front() != '{' || description.back() != '}') return choices;
  const std::string_view body(description.data() + 1, description.size() - 2);
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string_view::npos) comma = body.size();
    std::string_view item = body.substr(start, comma - start);
    if (size_t arrow = item.find("->"); arrow != std::string_view::npos) item = item.substr(0, arrow);
    if (!item.empty()) choices.emplace_back(item);
    start = comma + 1;
  }
  return choices;
}

CompletionOption DescribeOption(const CLI::Option& opt) {
  CompletionOption o;
  for (const std::string& s : opt.get_snames()) o.names.push_back("-" + s);
  for (const std::string& l : opt.get_lnames()) o.names.push_back("--" + l);
  o.name = o.names.empty()            ? opt.get_name()
           : opt.get_lnames().empty() ? o.names[0]
                                      : "--" + opt.get_lnames()[0];
  o.description = opt.get_description();
  // An optional value (expected(0, 1)) cannot be told from the next word: a flag.
  o.takes_value = opt.get_type_size_max() > 0 && opt.get_expected_min() > 0;
  o.repeatable = o.takes_value && opt.get_items_expected_max() > 1;
  if (!o.takes_value) return o;
  // CLI11 2.1 reads validators through non-const accessors only; nothing is changed.
  auto& mutable_opt = const_cast<CLI::Option&>(opt);
  for (int i = 0;; ++i) {
    const CLI::Validator* v = nullptr;
    try {
      v = mutable_opt.get_validator(i);
    } catch (const CLI::OptionNotFound&) {
      break;
    }
    o.choices = ChoicesOf(v->get_description());
    if (!o.choices.empty()) {
      o.kind = ValueKind::kChoice;
      return o;
    }
  }
  // The type name alone: "FILE", not get_type_name()'s "FILE:<validators>".
  std::string type = opt.get_type_name();
  type = type.substr(0, type.find(':'));
  if (type == "FILE") o.kind = ValueKind::kFile;
  if (type == "DIR") o.kind = ValueKind::kDirectory;
  if (type == "COMMAND") o.kind = ValueKind::kCommand;
  return o;
}

// A name as part of a shell function's name: [A-Za-z0-9_] kept, anything else '_'.
std::string Identifier(const std::string& s) {
  std::string id = s;
  for (char& c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return id;
}

// `s` in single quotes for a POSIX shell (bash and zsh alike).
std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// `s` with a backslash before each of `special`.
std::string Escape(const std::string& s, std::string_view special) {
  std::string e;
  for (char c : s) {
    if (special.find(c) != std::string_view::npos) e += '\\';
    e += c;
  }
  return e;
}

// ---- bash ----

// The value spec of an option or positional as _PROGRAM_value sets it: (kind values...).
std::string BashValue(const CompletionOption& o) {
  switch (o.kind) {
    case ValueKind::kChoice: {
      std::string s = "choice";
      for (const std::string& c : o.choices) s += " " + Quote(c);
      return s;
    }
    case ValueKind::kFile:
      return "file";
    case ValueKind::kDirectory:
      return "dir";
    case ValueKind::kCommand:
      return "command";
    case ValueKind::kNone:
      return "none";
  }
  return "none";
}

void BashCommands(const CompletionCommand& c, const std::string& path, std::string& commands,
                  std::string& values) {
  std::string subs, opts;
  for (const CompletionCommand& s : c.subcommands) subs += (subs.empty() ? "" : " ") + Quote(s.name);
  for (const CompletionOption& o : c.options) {
    for (const std::string& n : o.names) {
      opts += (opts.empty() ? "" : " ") + Quote(n);
      if (o.takes_value) values += "    " + Quote(path + " " + n) + ") value=(" + BashValue(o) + ") ;;\n";
    }
  }
  for (size_t i = 0; i < c.positionals.size(); ++i) {
    values += "    " + Quote(path + " #" + std::to_string(i)) + ") value=(" + BashValue(c.positionals[i]) +
              ") ;;\n";
  }
  const bool many = !c.positionals.empty() && c.positionals.back().repeatable;
  commands += "    " + Quote(path) + ") subs=(" + subs + "); opts=(" + opts +
              "); npositional=" + std::to_string(c.positionals.size()) + "; many=" + (many ? "1" : "0") +
              " ;;\n";
  for (const CompletionCommand& s : c.subcommands) BashCommands(s, path + " " + s.name, commands, values);
}

// ---- zsh ----

// The action of _arguments for a value: (choices), _files, ...; " " offers nothing.
std::string ZshAction(const CompletionOption& o) {
  switch (o.kind) {
    case ValueKind::kChoice: {
      std::string s = "(";
      for (const std::string& c : o.choices)
        s += (s.size() > 1 ? " " : "") + Escape(c, " ()\\:'\"$`[]{};&|<>*?#~");
      return s + ")";
    }
    case ValueKind::kFile:
      return "_files";
    case ValueKind::kDirectory:
      return "_files -/";
    case ValueKind::kCommand:
      return "_command_names -e";
    case ValueKind::kNone:
      return " ";
  }
  return " ";
}

// A message or explanation of an _arguments spec.
std::string ZshText(const std::string& s) { return Escape(s, "\\[]:"); }

void ZshFunction(const CompletionCommand& c, const std::string& function, const std::string& program,
                 std::string& out) {
  std::vector<std::string> specs;
  for (const CompletionOption& o : c.options) {
    std::string exclusion;
    if (o.repeatable) {
      exclusion = "*";
    } else if (o.names.size() > 1) {
      for (const std::string& n : o.names) exclusion += (exclusion.empty() ? "(" : " ") + n;
      exclusion += ")";
    }
    for (const std::string& n : o.names) {
      std::string spec = exclusion + n;
      if (o.takes_value) spec += n.size() == 2 ? "+" : "=";
      spec += "[" + ZshText(o.description) + "]";
      if (o.takes_value) {
        std::string message = o.name.substr(o.name.find_first_not_of('-'));
        spec += ":" + ZshText(message) + ":" + ZshAction(o);
      }
      specs.push_back(spec);
    }
  }
  for (size_t i = 0; i < c.positionals.size(); ++i) {
    const CompletionOption& p = c.positionals[i];
    if (i + 1 == c.positionals.size() && p.repeatable) {
      // The rest of the line; a command line is completed as one (its command, then its own).
      specs.push_back(p.kind == ValueKind::kCommand ? "*::" + ZshText(p.name) + ":_normal"
                                                    : "*:" + ZshText(p.name) + ":" + ZshAction(p));
    } else {
      specs.push_back(std::to_string(i + 1) + ":" + ZshText(p.name) + ":" + ZshAction(p));
    }
  }
  if (!c.subcommands.empty()) {
    specs.push_back(": :->command");
    specs.push_back("*:: :->argument");
  }
  std::string f = function + "() {\n";
  if (!c.subcommands.empty())
    f += "  local curcontext=$curcontext state state_descr line\n  typeset -A opt_args\n";
  f += "  _arguments -S" + std::string(c.subcommands.empty() ? "" : " -C");
  for (const std::string& s : specs) f += " \\\n    " + Quote(s);
  f += "\n";
  std::string children;
  if (!c.subcommands.empty()) {
    f += "  case $state in\n    command)\n      local -a commands=(\n";
    for (const CompletionCommand& s : c.subcommands) {
      f += "        " + Quote(Escape(s.name, ":\\") + ":" + s.description) + "\n";
    }
    f += "      )\n      _describe -t commands " + Quote(program + " command") + " commands ;;\n";
    f += "    argument)\n      case $words[1] in\n";
    for (const CompletionCommand& s : c.subcommands) {
      const std::string child = function + "_" + Identifier(s.name);
      f += "        (" + Quote(s.name) + ") " + child + " ;;\n";
      ZshFunction(s, child, program, children);
    }
    f += "      esac ;;\n  esac\n";
  }
  f += "}\n\n";
  out += f + children;
}

}  // namespace

CompletionCommand DescribeForCompletion(const CLI::App& app, const std::string& program) {
  CompletionCommand c;
  c.name = program;
  c.description = app.get_description();
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_group().empty()) continue;  // hidden
    CompletionOption o = DescribeOption(*opt);
    (o.names.empty() ? c.positionals : c.options).push_back(std::move(o));
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    // Option groups are nameless subcommands; a subcommand in group "" is hidden.
    if (sub->get_name().empty() || sub->get_group().empty() || sub->get_disabled()) continue;
    c.subcommands.push_back(DescribeForCompletion(*sub, sub->get_name()));
  }
  return c;
}

std::string BashCompletionScript(const CLI::App& app, const std::string& program) {
  const CompletionCommand root = DescribeForCompletion(app, program);
  const std::string f = "_" + Identifier(program);
  std::string commands, values;
  BashCommands(root, program, commands, values);
  std::string s;
  s += "# bash completion of " + program + ", generated by `" + program +
       " completion bash` from its flag definitions.\n"
       "# Needs bash 4. Source it, or install it as a file named " +
       program + " in ~/.local/share/bash-completion/completions.\n\n";
  s += "# " + f + "_command PATH: the subcommands, options and positionals of the command PATH\n";
  s += "# (\"" + program + "\", \"" + program +
       " SUBCOMMAND\", ...) into the caller's subs, opts, npositional, many.\n";
  s += f + "_command() {\n  case $1 in\n" + commands +
       "    *) subs=(); opts=(); npositional=0; many=0 ;;\n  esac\n}\n\n";
  s += "# " + f + "_value PATH OPTION|#N: the value of an option (or of positional N) of the command\n";
  s += "# PATH into the caller's value: (none), (file), (dir), (command) or (choice VALUES...);\n";
  s += "# status 1 for a flag or an unknown option.\n";
  s += f + "_value() {\n  case \"$1 $2\" in\n" + values + "    *) value=(); return 1 ;;\n  esac\n}\n\n";
  std::string t = R"sh(# _F_reply KIND [VALUES...]: the values of KIND that start with $cur into COMPREPLY,
# each after $prefix; KIND command completes a command when $first is 1, else a file.
_F_reply() {
  local kind=$1 v
  shift
  case $kind in
    choice)
      for v in "$@"; do [[ $v == "$cur"* ]] && COMPREPLY+=("$v"); done
      # None: ignoring case (CLI::ignore_case choices, such as NHWC for nhwc).
      if ((${#COMPREPLY[@]} == 0)); then
        for v in "$@"; do [[ ${v,,} == "${cur,,}"* ]] && COMPREPLY+=("$v"); done
      fi ;;
    file) compopt -o filenames 2>/dev/null || :; mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
    dir) compopt -o filenames 2>/dev/null || :; mapfile -t COMPREPLY < <(compgen -d -- "$cur") ;;
    command)
      if ((first)); then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
      else
        compopt -o filenames 2>/dev/null || :; mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      fi ;;
  esac
  if [[ -n $prefix ]]; then
    for v in "${!COMPREPLY[@]}"; do COMPREPLY[v]=$prefix${COMPREPLY[v]}; done
  fi
  return 0
}

_F() {
  local -a words=() subs=() opts=() value=()
  local npositional=0 many=0 path=PROGRAM npos=0 dashdash=0 glue=0 expect="" first=1 prefix="" cur w i
  COMPREPLY=()
  # Words up to the cursor, --option=value rejoined (bash splits it at '=').
  for ((i = 0; i <= COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]-}
    if ((glue)); then
      words[${#words[@]} - 1]+=$w
      glue=0
    elif [[ $w == = && ${#words[@]} -gt 1 && ${words[${#words[@]} - 1]} == -?* ]]; then
      words[${#words[@]} - 1]+=$w
      glue=1
    else
      words+=("$w")
    fi
  done
  cur=${words[${#words[@]} - 1]}
  _F_command "$path"
  for ((i = 1; i < ${#words[@]} - 1; i++)); do
    w=${words[i]}
    if [[ -n $expect ]]; then
      expect=""
    elif ((dashdash)) || [[ $w != -?* ]]; then
      local sub="" s
      if ((!dashdash && npos == 0)); then
        for s in "${subs[@]}"; do [[ $s == "$w" ]] && sub=$s; done
      fi
      if [[ -n $sub ]]; then
        path+=" $sub"
        _F_command "$path"
      else
        npos=$((npos + 1))
      fi
    elif [[ $w == -- ]]; then
      dashdash=1
    elif [[ $w != *=* ]] && _F_value "$path" "$w"; then
      expect=$w
    fi
  done
  if [[ -n $expect ]]; then
    _F_value "$path" "$expect" && _F_reply "${value[@]}"
    return 0
  fi
  if ((!dashdash)) && [[ $cur == -?*=* ]]; then
    [[ $COMP_WORDBREAKS == *=* ]] || prefix=${cur%%=*}=
    w=${cur%%=*}
    cur=${cur#*=}
    _F_value "$path" "$w" && _F_reply "${value[@]}"
    return 0
  fi
  if ((!dashdash)) && [[ $cur == -* ]]; then
    for w in "${opts[@]}"; do [[ $w == "$cur"* ]] && COMPREPLY+=("$w"); done
    return 0
  fi
  if ((!dashdash && npos == 0 && ${#subs[@]} > 0)); then
    for w in "${subs[@]}"; do [[ $w == "$cur"* ]] && COMPREPLY+=("$w"); done
    return 0
  fi
  if ((npos < npositional)); then
    _F_value "$path" "#$npos"
  elif ((many && npositional > 0)); then
    first=0
    _F_value "$path" "#$((npositional - 1))"
  elif ((!dashdash)); then
    # Nothing positional is left: the options.
    for w in "${opts[@]}"; do [[ $w == "$cur"* ]] && COMPREPLY+=("$w"); done
    return 0
  fi
  ((${#value[@]} == 0)) || _F_reply "${value[@]}"
  return 0
}

complete -F _F PROGRAM
)sh";
  // The template's placeholders: _F the function, PROGRAM the command.
  for (size_t i = 0; i < t.size();) {
    if (t.compare(i, 2, "_F") == 0 &&
        (i + 2 == t.size() || !std::isalnum(static_cast<unsigned char>(t[i + 2])))) {
      s += f;
      i += 2;
    } else if (t.compare(i, 7, "PROGRAM") == 0) {
      s += Quote(program);
      i += 7;
    } else {
      s += t[i++];
    }
  }
  return s;
}

std::string ZshCompletionScript(const CLI::App& app, const std::string& program) {
  const CompletionCommand root = DescribeForCompletion(app, program);
  const std::string f = "_" + Identifier(program);
  std::string s = "#compdef " + program + "\n";
  s += "# zsh completion of " + program + ", generated by `" + program +
       " completion zsh` from its flag definitions.\n"
       "# Install it as a file named " +
       f + " in a folder of $fpath (before compinit runs), or source it after compinit.\n\n";
  std::string functions;
  ZshFunction(root, f + "_command", program, functions);
  s += functions;
  s += f + "() {\n  " + f + "_command \"$@\"\n}\n\n";
  s += "if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then\n  " + f + " \"$@\"\nelse\n  compdef " + f +
       " " + Quote(program) + "\nfi\n";
  return s;
}

}  // namespace remex::cli
