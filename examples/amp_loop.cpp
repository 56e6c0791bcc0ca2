// The seeds' mixed-precision training loop in C++, done right: forward and loss under autocast
// only, scaled backward, unscale BEFORE clipping, a step that is skipped on inf/NaN, and a
// schedule that does not advance on a skipped step. fp16 here, so the GradScaler is essential.
#include <cstdio>

#include <mixprec/amp/grad_scaler.h>
#include <mixprec/mixprec.h>
#include <mixprec/optim/adam.h>
#include <mixprec/optim/clip_grad.h>
#include <mixprec/optim/lr_scheduler.h>

using namespace mixprec;

int main() {
  auto model = nn::sequential({std::make_shared<nn::Linear>(64, 128, true, 1), std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Linear>(128, 4, true, 2)});
  const Tensor x = Tensor::randn({32, 64}, 3);
  std::vector<std::int64_t> y(32);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int64_t>(i % 4);

  optim::AdamW opt(model->parameters(), {.lr = 3e-3f});
  optim::CosineAnnealingLR schedule(opt, /*t_max=*/50);
  amp::GradScaler scaler;  // init 65536, growth 2 every 2000 clean steps, backoff 0.5
  for (int step = 0; step < 50; ++step) {
    Tensor loss;
    {
      amp::Autocast region(true, DType::f16);                      // 1. forward + loss in f16
      loss = cross_entropy(model->forward(x), y);
    }
    scaler.scale(loss).backward();                                 // 2. scaled backward
    scaler.unscale(opt);                                           // 3. unscale first...
    const float norm = optim::clip_grad_norm(model->parameters(), 1.0f);  // ...then clip
    const bool stepped = scaler.step(opt);                         // 4. skipped on inf/NaN
    scaler.update();                                               // 5. adjust the scale
    schedule.step();                                               // 6. not on skipped steps
    opt.zero_grad();
    if (step % 10 == 0 || step == 49) {
      std::printf("step %2d loss %.4f grad-norm %.3f scale %.0f %s\n", step, loss.item(), norm,
                  scaler.get_scale(), stepped ? "" : "(skipped)");
    }
  }
  return 0;
}
