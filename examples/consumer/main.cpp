// Uses the installed mixprec package: one bf16 linear layer, forward and backward.
#include <cstdio>

#include <mixprec/mixprec.h>

int main() {
  using namespace mixprec;
  const Tensor x = Tensor::randn({4, 8}, /*seed=*/1, DType::bf16);
  Tensor w = Tensor::randn({3, 8}, /*seed=*/2, DType::bf16);
  w.set_requires_grad(true);
  const Tensor loss = cross_entropy(linear(x, w), {0, 1, 2, 0});
  loss.backward();
  std::printf("consumer: loss %.4f (%s), grad %s %s\n", loss.item(), name(loss.dtype()),
              name(w.grad().dtype()), to_string(w.grad().shape()).c_str());
  return w.grad().defined() ? 0 : 1;
}
