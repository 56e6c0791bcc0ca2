#pragma once
/// Autocast and its settings under the names users know from the amp floor: amp::Autocast,
/// amp::OpKind, amp::MatmulPrecision and the rest are the runtime floor's own types and
/// functions (mixprec/runtime/autocast.h, op_policy.h, weight_copies.h, matmul_precision.h,
/// attention_precision.h, fp8_recipe.h), not copies. They live on the runtime floor because every
/// op consults them; the amp floor above (the GradScaler, the precision modes) names them here
/// so that a training loop reads amp:: throughout. The library's own code uses runtime::.
#include "mixprec/runtime/attention_precision.h"
#include "mixprec/runtime/autocast.h"
#include "mixprec/runtime/fp8_recipe.h"
#include "mixprec/runtime/matmul_precision.h"
#include "mixprec/runtime/op_policy.h"
#include "mixprec/runtime/weight_copies.h"

namespace mixprec::amp {

// autocast.h: the region and what it casts
using runtime::Autocast;
using runtime::autocast_dtype;
using runtime::autocast_enabled;
using runtime::autocast_inputs;
using runtime::cast_stats;
using runtime::CastStats;
using runtime::reset_cast_stats;
using runtime::run_with_inputs_cast;
// op_policy.h: the per-op table
using runtime::CastPolicy;
using runtime::documented_output_dtype;
using runtime::format_policy_table;
using runtime::kOpKindCount;
using runtime::kOpPolicyTable;
using runtime::OpKind;
using runtime::OpPolicy;
using runtime::policy_row;
// weight_copies.h: the kept 16-bit weight copies
using runtime::UseWeightCopies;
using runtime::weight_copies;
using runtime::WeightCopies;
// matmul_precision.h, attention_precision.h: how f32 GEMMs and 16-bit attention compute
using runtime::attention_precision;
using runtime::AttentionPrecision;
using runtime::AttentionPrecisionGuard;
using runtime::matmul_precision;
using runtime::MatmulPrecision;
using runtime::MatmulPrecisionGuard;
using runtime::parse_attention_precision;
using runtime::parse_matmul_precision;
using runtime::set_attention_precision;
using runtime::set_matmul_precision;
// fp8_recipe.h: the fp8 scaling recipes
using runtime::Fp8Formats;
using runtime::Fp8Recipe;
using runtime::Fp8Scaling;
using runtime::parse_fp8_formats;
// name() and to_string() of the enums and the recipe above, beside amp's own overloads
using runtime::name;
using runtime::to_string;

}  // namespace mixprec::amp
