// `mixprec ops`: the autocast policy table, as text or JSON.
#include <cstdio>
#include <string>

#include "commands.h"
#include "mixprec/runtime/op_policy.h"

namespace mixprec::tools {

void add_ops_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "ops", "Print the autocast policy: for each op, the dtype it computes in under autocast");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON (one object per op) instead of a table");
  cmd->callback([json] {
    if (!*json) {
      std::fputs(runtime::format_policy_table().c_str(), stdout);
      std::puts("\nlower_precision: inputs cast to the region's dtype (bf16 by default, or f16)"
                "\nfp32: 16-bit inputs cast to f32; the output is f32"
                "\nfp32_to_lower: no casts; computed in f32 inside, the output in the region's dtype"
                "\npromote: inputs of different dtypes are combined in the widest"
                "\npass_through: runs in the input's dtype");
      return;
    }
    std::string out = "[";
    for (const runtime::OpPolicy& row : runtime::kOpPolicyTable) {
      if (out.size() > 1) out += ",";
      out += std::string("\n  {\"op\": \"") + row.name + "\", \"policy\": \"" + runtime::name(row.policy) +
             "\", \"why\": \"" + row.why + "\"}";
    }
    out += "\n]\n";
    std::fputs(out.c_str(), stdout);
  });
}

}  // namespace mixprec::tools
