#include "mixprec/core/transfer.h"
#include "mixprec/data/batch_source.h"

namespace mixprec::data {

void stage_on_device(Batch& batch, const Tensor& host_inputs) {
  const Device device = current_device();
  const TransferReason why("batch upload");
  batch.inputs = host_inputs.to(device);  // one upload per batch (nothing on the cpu device)
  if (!device.is_host() && !batch.targets.empty()) batch.device_targets = upload_indices(batch.targets);
}

}  // namespace mixprec::data
