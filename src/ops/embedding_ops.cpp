// embedding: a row gather with its autograd node (a scatter-add into a table gradient).
#include "mixprec/ops/embedding.h"

#include "kernels/embedding.h"
#include "mixprec/runtime/autocast.h"
#include "runtime/op_scope.h"
#include "ops/op_util.h"

namespace mixprec {
namespace {

using ops::detail::record;

// Keeps the indices (not a tensor) and the table's shape and dtype; never the table itself.
class EmbeddingNode final : public runtime::Node {
 public:
  EmbeddingNode(std::shared_ptr<Storage> indices, std::int64_t count, std::int64_t rows,
                std::int64_t cols, DType dtype, std::int64_t padding_idx)
      : indices_(std::move(indices)), count_(count), rows_(rows), cols_(cols), dtype_(dtype),
        padding_idx_(padding_idx) {}
  const char* name() const override { return "embedding"; }
  bool saves_tensors() const override { return false; }
  std::vector<Tensor> backward(const Tensor& dy_in) override {
    const Tensor dy = dy_in.contiguous();
    Tensor dweight = Tensor::empty({rows_, cols_}, dtype_);
    kernels::embedding_backward(dy.data_ptr(), dy.dtype(),
                                static_cast<const std::int64_t*>(indices_->data()), count_,
                                rows_, cols_,
                                padding_idx_, dweight.data_ptr(), dtype_);
    return {dweight};
  }

 private:
  std::shared_ptr<Storage> indices_;  // int64 [count] on the device
  std::int64_t count_, rows_, cols_;
  DType dtype_;
  std::int64_t padding_idx_;
};

}  // namespace

namespace {

/// The lookup once the indices are on the device (int64 [count]); the kernel checks each index
/// against the table where the indices live.
Tensor embedding_of(const Tensor& weight_arg, std::shared_ptr<Storage> device_indices,
                    std::int64_t count, const Shape& index_shape, std::int64_t padding_idx) {
  const char* op = "embedding";
  runtime::detail::OpScope prof(runtime::OpKind::embedding);
  const Tensor weight = runtime::autocast_inputs(runtime::OpKind::embedding, {&weight_arg})[0];
  MIXPREC_CHECK(weight.dim() == 2, ShapeError, op,
                "weight must be the table [V, D], got " << to_string(weight.shape()));
  const Tensor table = weight.contiguous();
  const std::int64_t rows = table.size(0), cols = table.size(1);
  Shape out_shape = index_shape;
  out_shape.push_back(cols);
  MIXPREC_CHECK(padding_idx < rows, ValueError, op,
                "padding_idx " << padding_idx << " is not a row of the " << rows << "-row table");
  Tensor out = Tensor::empty(out_shape, table.dtype());
  kernels::embedding(table.data_ptr(), table.dtype(), rows, cols,
                     static_cast<const std::int64_t*>(device_indices->data()), count,
                     out.data_ptr());
  record<EmbeddingNode>(out, {&weight}, std::move(device_indices), count, rows, cols,
                        weight.dtype(), padding_idx);
  prof.done(out, {&weight}, 0.0);  // a copy: no arithmetic
  return out;
}

}  // namespace

Tensor embedding(const Tensor& weight_arg, const std::vector<std::int64_t>& indices,
                 const Shape& index_shape, std::int64_t padding_idx) {
  const char* op = "embedding";
  ops::detail::require_defined(op, weight_arg, "weight");
  std::int64_t count = 1;
  for (std::int64_t d : index_shape) {
    MIXPREC_CHECK(d >= 0, ShapeError, op, "negative dimension in index_shape " << to_string(index_shape));
    count *= d;
  }
  MIXPREC_CHECK(count == static_cast<std::int64_t>(indices.size()), ShapeError, op,
                indices.size() << " indices for index_shape " << to_string(index_shape) << " ("
                               << count << " elements)");
  MIXPREC_CHECK(weight_arg.dim() == 2, ShapeError, op,
                "weight must be the table [V, D], got " << to_string(weight_arg.shape()));
  // Every index (ValueError naming it and V) and padding_idx checked before anything runs.
  kernels::detail::check_embedding_args(op, weight_arg.size(0), weight_arg.size(1), indices.data(),
                                        count, padding_idx);
  return embedding_of(weight_arg, ops::detail::upload_indices(indices, "embedding indices"), count,
                      index_shape, padding_idx);
}

Tensor embedding_by_ids(const Tensor& weight, const Tensor& indices, std::int64_t padding_idx) {
  const char* op = "embedding";
  ops::detail::require_defined(op, weight, "weight");
  ops::detail::require_defined(op, indices, "indices");
  MIXPREC_CHECK(!is_storage_only(indices.dtype()), DTypeError, op,
                "indices must be f32, bf16 or f16 whole numbers, got " << name(indices.dtype()));
  const Tensor ids = indices.detach().contiguous();
  const std::int64_t count = ids.numel();
  auto device_indices = std::make_shared<Storage>(
      static_cast<std::size_t>(count) * sizeof(std::int64_t), MemoryCategory::workspace);
  kernels::indices_from_values(ids.data_ptr(), ids.dtype(), count,
                               static_cast<std::int64_t*>(device_indices->data()));
  return embedding_of(weight, std::move(device_indices), count, ids.shape(), padding_idx);
}

Tensor embedding(const Tensor& weight, const std::vector<std::int64_t>& indices) {
  return embedding(weight, indices, Shape{static_cast<std::int64_t>(indices.size())});
}

}  // namespace mixprec
